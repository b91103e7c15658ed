/*
 * Errors that lead to their cause.  A stale remote key used by an RDMA
 * WRITE or READ completes with WSAECONNRESET (ws2san.h), and
 * nicsim_socket_error() says which refusal it was (a remote access error),
 * between which addresses and QPs, and that `nicsim show faults --nic PEER`
 * shows more; the peer's socket says its own NIC refused the request; and
 * `nicsim show faults` names the requester (its address, QP, opcode and
 * PSN) beside the key's owner.  With NICSIM_DEBUG=1 the provider says on
 * stderr, and never on stdout, where it looked for NICs and what it found
 * when a bind finds no NIC, why a registration was refused, and which
 * refusal broke a connection.  A healthy socket has nothing to report, and
 * bad arguments are refused.
 *
 * The fixture of the test_spi_* programs (nstspidata.h): NICs A, B, C (no
 * windows, registrations up to 1 MiB) and D.  The diagnostic output is read
 * from this program run again as a child ("--debug-child WHAT") with
 * NICSIM_DEBUG=1 in its environment, its stdout thrown away.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "nicsim_abi.h"
#include "nicsim_provider.h"
#include "nstest.h"
#include "nstspidata.h"
#include "ws2san.h"

#define OUT_MAX (64u << 10)
/* Fake NICs of test_debug_run_dir_and_attach_refused, in a directory of their own. */
#define ADDR_STALE "198.18.0.7"
#define ADDR_OLD "198.18.0.8"

static uint32_t addr_n(const char *addr)
{
	struct in_addr a;

	inet_pton(AF_INET, addr, &a);
	return a.s_addr;
}

#define HAS(out, text) \
	NST_CHECK_(strstr((out), (text)) != NULL, CU_FALSE, "output has \"%.400s\"", (text))
#define LACKS(out, text) \
	NST_CHECK_(strstr((out), (text)) == NULL, CU_FALSE, "output lacks \"%.400s\"", (text))

struct broke_arg {
	SOCKET s;
	struct nicsim_socket_error e;
};

static bool broke(void *arg)
{
	struct broke_arg *b = arg;

	return nicsim_socket_error(b->s, &b->e) == 0;
}

/* Run `nicsim show faults --nic addr --dir dir [--json]` into out: its exit code. */
static int show_faults(const char *addr, bool json, char *out)
{
	const char *args[] = {"show", "faults", "--nic", addr, "--dir", dir, json ? "--json" : NULL,
			      NULL};

	return nst_run_shown(nst_bin("nicsim"), "nicsim", args, out, OUT_MAX, WAIT_MS);
}

/*
 * a (on A) RDMA-writes or reads through a descriptor b (on B) deregistered:
 * both sockets say why their connection broke, and B's fault log names a
 * as the requester.
 */
static void stale_key(bool write)
{
	uint8_t *m = map(4 * PAGE), *src = m, *t = m + 2 * PAGE;
	struct nicsim_socket_error e;
	struct broke_arg peer;
	struct nicsim_rdma_desc d;
	char want[160], *out = malloc(OUT_MAX);
	WSAOVERLAPPED ov;
	SOCKET a, b, x, y;
	HANDLE h;
	DWORD n;
	int err = 0;

	NST_REQUIRE(m != NULL && out != NULL);
	/* A connection of B's alone first, so that a's and b's QP numbers differ. */
	NST_REQUIRE_EQ(connect_pair(ADDR_D, ADDR_B, &x, &y), 0);
	NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_A, &b, &a), 0);
	NST_REQUIRE_EQ(expose(b, t, PAGE, MEM_READWRITE, &d), 0);
	NST_REQUIRE_EQ(WSPDeregisterRdmaMemory(b, &d, sizeof(d), &err), 0);
	h = reg(a, src, PAGE, MEM_READWRITE);
	NST_REQUIRE(h != NULL);
	/* Nothing failed yet. */
	NST_EQ(nicsim_socket_error(a, &e), WSAENOTCONN);

	NST_REQUIRE_EQ(post_rdma(a, write, src, 64, h, &d, 0, &ov), WSA_IO_PENDING);
	NST_EQ(ov_wait(a, &ov, &n), WSAECONNRESET);

	memset(&e, 0xa5, sizeof(e));
	NST_REQUIRE_EQ(nicsim_socket_error(a, &e), 0);
	NST_EQ(e.wsa_error, WSAECONNRESET);
	NST_EQ_U(e.nic_status, NICSIM_STATUS_REM_ACCESS_ERR);
	NST_EQ_U(e.local_addr, addr_n(ADDR_A));
	NST_EQ_U(e.peer_addr, addr_n(ADDR_B));
	NST_NE(e.local_qp, 0);
	NST_NE(e.peer_qp, 0);
	NST_NE(e.local_qp, e.peer_qp);
	NST_TRUE(memchr(e.what, '\0', sizeof(e.what)) != NULL);
	printf("  a: %s\n", e.what);
	HAS(e.what, write ? "RDMA WRITE refused by the peer's NIC"
			  : "RDMA READ refused by the "
			    "peer's NIC");
	HAS(e.what, "remote access error");
	HAS(e.what, "nicsim show faults --nic " ADDR_B);
	/* Asked again: the same first failure. */
	{
		struct nicsim_socket_error again;

		NST_EQ(nicsim_socket_error(a, &again), 0);
		NST_EQ(memcmp(&again, &e, sizeof(e)), 0);
	}

	/* The peer's connection broke too, refused by its own NIC. */
	peer.s = b;
	NST_TRUE(nst_wait_until(broke, &peer, WAIT_MS, 1));
	printf("  b: %s\n", peer.e.what);
	NST_EQ(peer.e.wsa_error, WSAECONNRESET);
	NST_EQ_U(peer.e.nic_status, NICSIM_STATUS_REM_ACCESS_ERR);
	NST_EQ_U(peer.e.local_addr, addr_n(ADDR_B));
	NST_EQ_U(peer.e.peer_addr, addr_n(ADDR_A));
	NST_EQ_U(peer.e.local_qp, e.peer_qp);
	NST_EQ_U(peer.e.peer_qp, e.local_qp);
	HAS(peer.e.what, "this NIC refused the peer's RDMA");
	HAS(peer.e.what, "nicsim show faults --nic " ADDR_B);

	/* B's fault log names the requester: a's address and QP, and the request. */
	NST_EQ(show_faults(ADDR_B, false, out), 0);
	snprintf(want, sizeof(want), ", qpn %u) from %s qpn %u (%s psn ", e.peer_qp, ADDR_A,
		 e.local_qp, write ? "RC_RDMA_WRITE_ONLY" : "RC_RDMA_READ_REQUEST");
	HAS(out, want);
	NST_EQ(show_faults(ADDR_B, true, out), 0);
	snprintf(want, sizeof(want), "\"qpn\":%u,", e.peer_qp);
	HAS(out, want);
	snprintf(want, sizeof(want), "\"requester\":{\"addr\":\"%s\",\"qpn\":%u,\"psn\":", ADDR_A,
		 e.local_qp);
	HAS(out, want);
	HAS(out,
	    write ? "\"opcode\":\"RC_RDMA_WRITE_ONLY\"" : "\"opcode\":\"RC_RDMA_READ_REQUEST\"");

	close_socket(a);
	close_socket(b);
	close_socket(x);
	close_socket(y);
	munmap(m, 4 * PAGE);
	free(out);
}

static void test_stale_key_rdma_write(void)
{
	stale_key(true);
}

static void test_stale_key_rdma_read(void)
{
	stale_key(false);
}

static void test_nothing_failed_and_bad_arguments(void)
{
	struct nicsim_socket_error e;
	SOCKET a, b, u;
	int err = 0;

	NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_A, &b, &a), 0);
	NST_EQ(nicsim_socket_error(a, &e), WSAENOTCONN);
	NST_EQ(nicsim_socket_error(b, &e), WSAENOTCONN);
	NST_EQ(nicsim_socket_error(a, NULL), WSAEFAULT);
	NST_EQ(nicsim_socket_error(INVALID_SOCKET, &e), WSAENOTSOCK);
	NST_EQ(nicsim_socket_error((SOCKET)0, &e), WSAENOTSOCK);
	/* A socket never bound, and one closed. */
	u = WSPSocket(AF_INET, SOCK_STREAM, IPPROTO_TCP, NULL, 0, 0, &err);
	NST_REQUIRE(u != INVALID_SOCKET);
	NST_EQ(nicsim_socket_error(u, &e), WSAENOTCONN);
	close_socket(u);
	NST_EQ(nicsim_socket_error(u, &e), WSAENOTSOCK);

	/* The peer closes: no NIC error, and the sentence says who to ask. */
	{
		struct broke_arg survivor = {.s = a};

		close_socket(b);
		NST_TRUE(nst_wait_until(broke, &survivor, WAIT_MS, 1));
		NST_EQ(survivor.e.wsa_error, WSAECONNRESET);
		NST_EQ_U(survivor.e.nic_status, NICSIM_STATUS_NONE);
		NST_EQ_U(survivor.e.local_addr, addr_n(ADDR_A));
		NST_EQ_U(survivor.e.peer_addr, addr_n(ADDR_B));
		HAS(survivor.e.what, "the peer (" ADDR_B ") closed the connection");
	}
	close_socket(a);
}

/* ---- NICSIM_DEBUG=1 ------------------------------------------------------------- */

/* The child: one case, its stdout thrown away; exit 0 if the SPI said what was expected. */
static int debug_child(const char *what)
{
	WSPPROC_TABLE table;
	WSPDATA data;
	int err = 0, null = open("/dev/null", O_WRONLY);

	/* The provider must print nothing on stdout: anything there is lost. */
	if (null < 0 || dup2(null, STDOUT_FILENO) < 0)
		return 2;
	if (WSPStartupEx(0x0202, &data, NULL, NULL, &table))
		return 3;
	if (!strcmp(what, "bind")) {
		struct sockaddr_in sa = addr_of(ADDR_NONE, 0);
		SOCKET s = WSPSocket(AF_INET, SOCK_STREAM, IPPROTO_TCP, NULL, 0, 0, &err);

		if (s == INVALID_SOCKET)
			return 4;
		if (WSPBind(s, (struct sockaddr *)&sa, sizeof(sa), &err) != SOCKET_ERROR)
			return 5;
		return err == WSAEADDRNOTAVAIL ? 0 : 6;
	}
	if (!strcmp(what, "attach")) {
		/* A stale socket, then a NIC of another ABI version (fake, see below). */
		struct sockaddr_in stale = addr_of(ADDR_STALE, 0), other = addr_of(ADDR_OLD, 0);
		SOCKET s = WSPSocket(AF_INET, SOCK_STREAM, IPPROTO_TCP, NULL, 0, 0, &err);

		if (s == INVALID_SOCKET)
			return 4;
		if (WSPBind(s, (struct sockaddr *)&stale, sizeof(stale), &err) != SOCKET_ERROR ||
		    err != WSAENETDOWN)
			return 5;
		if (WSPBind(s, (struct sockaddr *)&other, sizeof(other), &err) != SOCKET_ERROR ||
		    err != WSAENETDOWN)
			return 6;
		return 0;
	}
	if (!strcmp(what, "register")) {
		/* Larger than C's limit (1 MiB), then with flags that mean nothing. */
		size_t len = 2u << 20;
		uint8_t *m = map(len);
		SOCKET s = sock_on(ADDR_C, 0);

		if (!m || s == INVALID_SOCKET)
			return 4;
		if (WSPRegisterMemory(s, m, (DWORD)len, MEM_READWRITE, &err) || err != WSAENOBUFS)
			return 5;
		if (WSPRegisterMemory(s, m, PAGE, 7, &err) || err != WSAEINVAL)
			return 6;
		return 0;
	}
	if (!strcmp(what, "refusal")) {
		uint8_t *m = map(4 * PAGE);
		struct nicsim_rdma_desc d;
		WSAOVERLAPPED ov;
		SOCKET a, b;
		HANDLE h;

		if (!m || connect_pair(ADDR_B, ADDR_A, &b, &a))
			return 4;
		if (expose(b, m + 2 * PAGE, PAGE, MEM_READWRITE, &d) ||
		    WSPDeregisterRdmaMemory(b, &d, sizeof(d), &err))
			return 5;
		h = WSPRegisterMemory(a, m, PAGE, MEM_READWRITE, &err);
		if (!h || post_rdma(a, true, m, 64, h, &d, 0, &ov) != WSA_IO_PENDING)
			return 6;
		return ov_wait(a, &ov, NULL) == WSAECONNRESET ? 0 : 7;
	}
	return 9;
}

/*
 * Run the child for what with NICSIM_DEBUG=1 and NICSIM_DIR run_dir (NULL:
 * the fixture's); its exit code, its stderr in out.
 */
static int run_debug_child(const char *what, const char *run_dir, char *out)
{
	const char *args[] = {"--debug-child", what, NULL};
	int rc;

	setenv("NICSIM_DEBUG", "1", 1);
	if (run_dir)
		setenv("NICSIM_DIR", run_dir, 1);
	rc = nst_run_shown(self_exe, "test_spi_errors", args, out, OUT_MAX, 2 * WAIT_MS);
	unsetenv("NICSIM_DEBUG");
	setenv("NICSIM_DIR", dir, 1);
	return rc;
}

static void test_debug_bind_to_missing_address(void)
{
	char want[512], *out = malloc(OUT_MAX);

	NST_REQUIRE(out != NULL);
	NST_EQ(run_debug_child("bind", NULL, out), 0);
	snprintf(want, sizeof(want), "nicsimsp: looking for NICs in %s (from $NICSIM_DIR): found ",
		 dir);
	HAS(out, want);
	snprintf(want, sizeof(want),
		 "nicsimsp: bind to %s: WSAEADDRNOTAVAIL: no NIC with that address in %s; found "
		 "%s, %s, %s",
		 ADDR_NONE, dir, ADDR_A, ADDR_B, ADDR_C);
	HAS(out, want);
	/* Nothing else is in the output: every line is the provider's. */
	for (const char *l = out; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l))
		NST_CHECK_(!strncmp(l, "nicsimsp: ", 10), CU_FALSE, "line \"%.60s\" is nicsimsp's",
			   l);
	free(out);
}

static void test_debug_paths_escaped(void)
{
	char here[200], odd[400], longer[420], *out = malloc(OUT_MAX);

	NST_REQUIRE(out != NULL);
	NST_REQUIRE_EQ(nst_tmpdir(here, sizeof(here), "spi-errors"), 0);
	/* A run directory whose name holds a newline cannot add a line of its
	 * own to the provider's messages. */
	snprintf(odd, sizeof(odd), "%s/x\nnicsimsp: forged\t", here);
	NST_EQ(run_debug_child("bind", odd, out), 0);
	NST_CHECK_(strstr(out, "\nnicsimsp: forged") == NULL &&
		       strncmp(out, "nicsimsp: forged", 16),
		   CU_FALSE, "no forged line in: %.400s", out);
	HAS(out, "/x\\x0anicsimsp: forged\\x09");
	for (const char *l = out; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l))
		NST_CHECK_(!strncmp(l, "nicsimsp: ", 10), CU_FALSE, "line \"%.60s\" is nicsimsp's",
			   l);
	/* One too long for a socket path: where it came from, and what to do. */
	snprintf(longer, sizeof(longer), "%s/%0200d", here, 0);
	NST_EQ(run_debug_child("bind", longer, out), 0);
	HAS(out, "nicsimsp: the run directory (from $NICSIM_DIR) does not fit");
	HAS(out, "choose a shorter one with NICSIM_DIR");
	nst_rmtree(here);
	free(out);
}

static void test_debug_registration_refused(void)
{
	char *out = malloc(OUT_MAX);

	NST_REQUIRE(out != NULL);
	NST_EQ(run_debug_child("register", NULL, out), 0);
	HAS(out, "nicsimsp: attached to NIC nic-" ADDR_C ".sock");
	HAS(out, "nicsimsp: registration of 2097152 bytes refused: larger than the NIC's limit "
		 "of 1048576 bytes (nicsimd --max-reg)");
	HAS(out, "bytes, flags 3) failed: WSAENOBUFS: no resources");
	HAS(out, "bytes, flags 7) failed: WSAEINVAL: flags must be MEM_READ, MEM_WRITE or "
		 "MEM_READWRITE");
	free(out);
}

static void test_debug_refusal_by_peer_nic(void)
{
	char *out = malloc(OUT_MAX);

	NST_REQUIRE(out != NULL);
	NST_EQ(run_debug_child("refusal", NULL, out), 0);
	HAS(out, "nicsimsp: connection " ADDR_A " qp ");
	HAS(out,
	    "broke (WSAECONNRESET): RDMA WRITE refused by the peer's NIC: remote access error");
	HAS(out, "run `nicsim show faults --nic " ADDR_B "`");
	free(out);
}

/* A NIC socket whose NIC answers every hello as a NIC of ABI version 4 would. */
struct old_nic {
	int lfd;
	int served;
};

static void *old_nic_main(void *arg)
{
	struct old_nic *o = arg;
	struct nic_hello_reply r = {
	    .magic = NIC_ABI_MAGIC, .abi_version = 4, .status = NIC_STATUS_BAD_VERSION};
	struct nic_hello h;
	struct pollfd p = {.fd = o->lfd, .events = POLLIN};
	int fd;

	if (poll(&p, 1, 2 * WAIT_MS) <= 0)
		return NULL;
	fd = accept4(o->lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return NULL;
	p.fd = fd;
	if (poll(&p, 1, WAIT_MS) > 0 && recv(fd, &h, sizeof(h), 0) == sizeof(h) &&
	    send(fd, &r, sizeof(r), MSG_NOSIGNAL) == sizeof(r))
		o->served = 1;
	close(fd);
	return NULL;
}

/* A UNIX socket bound at dir/name: listening, or closed (stale) if !listen_too. */
static int unix_socket_at(const char *where, const char *name, bool listen_too)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", where, name);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    (listen_too && listen(fd, 4))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!listen_too) {
		close(fd);
		return 0;
	}
	return fd;
}

static void test_debug_run_dir_and_attach_refused(void)
{
	char here[200], open_dir[300], want[768], *out = malloc(OUT_MAX);
	struct old_nic o = {.lfd = -1};
	pthread_t t;

	NST_REQUIRE(out != NULL);
	NST_REQUIRE_EQ(nst_tmpdir(here, sizeof(here), "spi-errors"), 0);

	/* A run directory others may write to is refused, and said why. */
	snprintf(open_dir, sizeof(open_dir), "%s/open", here);
	NST_REQUIRE_EQ(mkdir(open_dir, 0700), 0);
	NST_REQUIRE_EQ(chmod(open_dir, 0777), 0);
	NST_EQ(run_debug_child("bind", open_dir, out), 0);
	HAS(out, "nicsimsp: looking for NICs: none: ");
	HAS(out, open_dir);
	snprintf(want, sizeof(want),
		 "nicsimsp: bind to %s: WSAEADDRNOTAVAIL: no usable run directory", ADDR_NONE);
	HAS(out, want);

	/* A socket nobody listens on, and a NIC of another version. */
	NST_REQUIRE_EQ(unix_socket_at(here, "nic-" ADDR_STALE ".sock", false), 0);
	o.lfd = unix_socket_at(here, "nic-" ADDR_OLD ".sock", true);
	NST_REQUIRE(o.lfd >= 0);
	NST_REQUIRE_EQ(pthread_create(&t, NULL, old_nic_main, &o), 0);
	NST_EQ(run_debug_child("attach", here, out), 0);
	pthread_join(t, NULL);
	close(o.lfd);
	NST_EQ(o.served, 1);
	snprintf(want, sizeof(want),
		 "nicsimsp: looking for NICs in %s (from $NICSIM_DIR): found %s, %s", here,
		 ADDR_STALE, ADDR_OLD);
	HAS(out, want);
	snprintf(want, sizeof(want), "nicsimsp: attach to %s/nic-%s.sock refused: nobody listens",
		 here, ADDR_STALE);
	HAS(out, want);
	snprintf(want, sizeof(want), "nicsimsp: attach to %s/nic-%s.sock refused: version mismatch",
		 here, ADDR_OLD);
	HAS(out, want);
	nst_rmtree(here);
	free(out);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"stale_key_rdma_write", test_stale_key_rdma_write},
	    {"stale_key_rdma_read", test_stale_key_rdma_read},
	    {"nothing_failed_and_bad_arguments", test_nothing_failed_and_bad_arguments},
	    {"debug_bind_to_missing_address", test_debug_bind_to_missing_address},
	    {"debug_paths_escaped", test_debug_paths_escaped},
	    {"debug_registration_refused", test_debug_registration_refused},
	    {"debug_refusal_by_peer_nic", test_debug_refusal_by_peer_nic},
	    {"debug_run_dir_and_attach_refused", test_debug_run_dir_and_attach_refused},
	    {NULL, NULL},
	};

	if (argc == 3 && !strcmp(argv[1], "--debug-child"))
		return debug_child(argv[2]);
	return spi_main(argc, argv, "spi_errors", tests);
}

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
 * refusal broke a connection.  A registration refused by RLIMIT_MEMLOCK
 * names the limit, its value and the fix there and in `nicsim show hosts`.
 * A healthy socket has nothing to report, and bad arguments are refused.
 *
 * The fixture of the test_spi_* programs (nstspidata.h): NICs A, B, C (no
 * windows, registrations up to 1 MiB) and D.  The diagnostic output is read
 * from this program run again as a child ("--debug-child WHAT") with
 * NICSIM_DEBUG=1 in its environment, its stdout thrown away.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nicsim_abi.h"
#include "nicsim_provider.h"
#include "nstest.h"
#include "nstspidata.h"
#include "ws2san.h"

#define OUT_MAX (64u << 10)
/* A NIC without CAP_SYS_PTRACE, started by test_debug_ptrace_refusal. */
#define ADDR_E "198.18.0.5"
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

/* RLIMIT_MEMLOCK's soft limit to limit bytes, the hard one kept (so that
 * it can be raised again): 0, or -1. */
static int memlock_limit(rlim_t limit)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0 ||
	    (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < limit))
		return -1;
	rl.rlim_cur = limit;
	return setrlimit(RLIMIT_MEMLOCK, &rl);
}

/*
 * Without CAP_IPC_LOCK, a lock limit of 0 and then of 64 KiB: registering
 * 1 MiB fails with WSAENOBUFS both times.  Then the child says "memlock
 * child ready" on stderr and stays attached, for `nicsim show hosts`, until
 * SIGUSR1 (bounded).
 */
static int memlock_child(void)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct caps[2];
	struct timespec bound = {.tv_sec = 6 * WAIT_MS / 1000};
	uint8_t *m = map(1u << 20);
	SOCKET s = sock_on(ADDR_A, 0);
	sigset_t usr1;
	int err = 0;

	if (!m || s == INVALID_SOCKET)
		return 20;
	if (syscall(SYS_capget, &hdr, caps) < 0)
		return 21;
	caps[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
	caps[CAP_IPC_LOCK / 32].permitted &= ~(1u << (CAP_IPC_LOCK % 32));
	if (syscall(SYS_capset, &hdr, caps) < 0 || memlock_limit(0) < 0)
		return 22;
	if (WSPRegisterMemory(s, m, 1u << 20, MEM_READWRITE, &err) || err != WSAENOBUFS)
		return 23;
	if (memlock_limit(64u << 10) < 0)
		return 24;
	err = 0;
	if (WSPRegisterMemory(s, m, 1u << 20, MEM_READWRITE, &err) || err != WSAENOBUFS)
		return 25;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	if (sigprocmask(SIG_BLOCK, &usr1, NULL) < 0)
		return 26;
	fprintf(stderr, "memlock child ready\n");
	return sigtimedwait(&usr1, NULL, &bound) == SIGUSR1 ? 0 : 27;
}

/*
 * Not dumpable, on NIC E (which lacks CAP_SYS_PTRACE): the kernel refuses E
 * this process's memory, so registering fails with WSAENOBUFS; dumpable
 * again, the same registration works.  Then as memlock_child.  The process
 * gives up CAP_SYS_PTRACE first: holding a capability E lacks would be
 * reason enough for the kernel to refuse E.
 */
static int ptrace_child(void)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct caps[2];
	struct timespec bound = {.tv_sec = 6 * WAIT_MS / 1000};
	uint8_t *m = map(PAGE);
	SOCKET s = sock_on(ADDR_E, 0);
	sigset_t usr1;
	HANDLE h;
	int err = 0;

	if (!m || s == INVALID_SOCKET)
		return 20;
	if (syscall(SYS_capget, &hdr, caps) < 0)
		return 28;
	caps[CAP_SYS_PTRACE / 32].effective &= ~(1u << (CAP_SYS_PTRACE % 32));
	caps[CAP_SYS_PTRACE / 32].permitted &= ~(1u << (CAP_SYS_PTRACE % 32));
	if (syscall(SYS_capset, &hdr, caps) < 0)
		return 29;
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return 21;
	if (WSPRegisterMemory(s, m, PAGE, MEM_READWRITE, &err) || err != WSAENOBUFS)
		return 22;
	if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
		return 23;
	h = WSPRegisterMemory(s, m, PAGE, MEM_READWRITE, &err);
	if (!h || WSPDeregisterMemory(s, h, &err))
		return 24;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	if (sigprocmask(SIG_BLOCK, &usr1, NULL) < 0)
		return 26;
	fprintf(stderr, "ptrace child ready\n");
	return sigtimedwait(&usr1, NULL, &bound) == SIGUSR1 ? 0 : 27;
}

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
	if (!strcmp(what, "memlock"))
		return memlock_child();
	if (!strcmp(what, "ptrace"))
		return ptrace_child();
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

/* `nicsim show hosts` of NIC A lists pid (an int *) as detached. */
static bool listed_detached(void *arg)
{
	const char *argv[] = {nst_bin("nicsim"), "show", "hosts", "--nic", ADDR_A,
			      "--dir",           dir,    NULL};
	char out[4096], want[64];

	snprintf(want, sizeof(want), "pid %d (detached", *(int *)arg);
	return nst_run(argv, out, sizeof(out), WAIT_MS) == 0 && strstr(out, want) != NULL;
}

/*
 * A registration refused by RLIMIT_MEMLOCK says which limit, its value and
 * how to raise it: on stderr with NICSIM_DEBUG=1, and in `nicsim show hosts`
 * while the process is attached and after it has exited.  The SPI's code
 * stays WSAENOBUFS.
 */
static void test_debug_memlock_refusal(void)
{
	const char *argv[] = {self_exe, "--debug-child", "memlock", NULL};
	const char *env[] = {"NICSIM_DEBUG=1", NULL};
	const char *hosts[] = {"show", "hosts", "--nic", ADDR_A, "--dir", dir, NULL};
	const char *json[] = {"show", "hosts", "--nic", ADDR_A, "--dir", dir, "--json", NULL};
	char want[400], *out = malloc(OUT_MAX), *shown = malloc(OUT_MAX);
	size_t len = 0;
	pid_t child;
	int fd = -1;

	NST_REQUIRE(out != NULL && shown != NULL);
	out[0] = '\0';
	child = nst_spawn_output(argv, env, &fd);
	NST_REQUIRE(child > 0);
	if (!nst_read_until(fd, out, OUT_MAX, &len, "memlock child ready", 4 * WAIT_MS)) {
		int st;

		kill(child, SIGKILL);
		st = nst_wait(child, WAIT_MS);
		close(fd);
		printf("  child (wait status 0x%x) said:\n%s\n", (unsigned)st, out);
		NST_CHECK_(false, CU_FALSE, "the child never got ready (status 0x%x)",
			   (unsigned)st);
		free(out);
		free(shown);
		return;
	}
	printf("  $ NICSIM_DEBUG=1 test_spi_errors --debug-child memlock\n%s", out);
	/* Both refusals on stderr: the limit, its value, what is needed, the fix. */
	HAS(out, "refused: cannot pin (mlock: Operation not permitted), even after evicting the "
		 "cache: RLIMIT_MEMLOCK is 0 (ulimit -l) and the process lacks CAP_IPC_LOCK; this "
		 "registration needs 1 MiB locked: raise it with `ulimit -l unlimited` (up to "
		 "the hard limit, `ulimit -Hl`; beyond it, as root: memlock in "
		 "/etc/security/limits.conf, then log in again, or LimitMEMLOCK= for a systemd "
		 "service)");
	HAS(out, "nicsimsp: registration of 1048576 bytes at 0x");
	HAS(out, "refused: cannot pin (mlock: Cannot allocate memory), even after evicting the "
		 "cache: RLIMIT_MEMLOCK is 64 KiB (ulimit -l: 64); the process has 0 bytes locked "
		 "and this registration needs 1 MiB more: raise it with `ulimit -l unlimited`");
	HAS(out, " 1048576 bytes, flags 3) failed: WSAENOBUFS: no resources (the line above says "
		 "which)");

	/* The NIC reports the host's last refusal, and how many there were. */
	NST_EQ(nst_run_shown(nst_bin("nicsim"), "nicsim", hosts, shown, OUT_MAX, WAIT_MS), 0);
	snprintf(want, sizeof(want), "pid %d qps 0 cache ", (int)child);
	HAS(shown, want);
	HAS(shown, " refusals 2 ");
	snprintf(want, sizeof(want),
		 "pid %d last refusal: RLIMIT_MEMLOCK is 64 KiB (ulimit -l: 64); the process has "
		 "0 bytes locked and this registration needs 1 MiB more: raise it with `ulimit -l "
		 "unlimited` (up to the hard limit, `ulimit -Hl`; beyond it, as root: memlock in "
		 "/etc/security/limits.conf, then log in again, or LimitMEMLOCK= for a systemd "
		 "service)\n",
		 (int)child);
	HAS(shown, want);
	NST_EQ(nst_run_shown(nst_bin("nicsim"), "nicsim", json, shown, OUT_MAX, WAIT_MS), 0);
	HAS(shown, "\"refusals\":2,\"last_refusal\":{\"kind\":1,\"errno\":12,\"limit\":65536,"
		   "\"in_use\":0,\"needed\":1048576,");
	HAS(shown, "\"what\":\"RLIMIT_MEMLOCK is 64 KiB (ulimit -l: 64);");

	kill(child, SIGUSR1);
	NST_EQ(nst_wait(child, 2 * WAIT_MS), 0);
	/* Gone, and still saying why. */
	NST_TRUE(nst_wait_until(listed_detached, &(int){child}, WAIT_MS, 5));
	NST_EQ(nst_run_shown(nst_bin("nicsim"), "nicsim", hosts, shown, OUT_MAX, WAIT_MS), 0);
	snprintf(want, sizeof(want), "pid %d qps", (int)child);
	NST_TRUE(strstr(shown, want) == NULL);
	snprintf(want, sizeof(want),
		 "pid %d (detached, comm test_spi_errors) last refusal: RLIMIT_MEMLOCK is 64 "
		 "KiB (ulimit -l: 64); the process has 0 bytes locked",
		 (int)child);
	HAS(shown, want);
	NST_EQ(nst_run_shown(nst_bin("nicsim"), "nicsim", json, shown, OUT_MAX, WAIT_MS), 0);
	snprintf(want, sizeof(want), "],\"detached\":[\n {\"ctx\":");
	HAS(shown, want);
	snprintf(want, sizeof(want), ",\"pid\":%d,\"comm\":\"test_spi_errors\",\"qps\":0,",
		 (int)child);
	HAS(shown, want);
	close(fd);
	free(out);
	free(shown);
}

/*
 * A NIC the kernel does not let read a host's memory refuses its
 * registrations: the host says which rule and how to change it, on stderr
 * and in `nicsim show hosts`.  Yama's ptrace_scope cannot be set here (the
 * machines this runs on may have no Yama, and a test must not change a
 * sysctl of the whole machine), so the refusal is made the other way the
 * kernel makes it: a host that is not dumpable and a NIC without
 * CAP_SYS_PTRACE, the same EPERM from process_vm_readv.  WSAENOBUFS, as for any
 * registration the system's limits refuse.  The sentences for each Yama
 * scope are checked in test_refusal (unit).
 */
static void test_debug_ptrace_refusal(void)
{
	const char *argv[] = {self_exe, "--debug-child", "ptrace", NULL};
	const char *env[] = {"NICSIM_DEBUG=1", NULL};
	const char *hosts[] = {"show", "hosts", "--nic", ADDR_E, "--dir", dir, NULL};
	char want[400], *out = malloc(OUT_MAX), *shown = malloc(OUT_MAX);
	bool ready;
	size_t len = 0;
	pid_t nic, child;
	int fd = -1, st;

	NST_REQUIRE(out != NULL && shown != NULL);
	out[0] = '\0';
	nic = nst_start_nic_without(dir, ADDR_E, NULL, CAP_SYS_PTRACE, 2 * WAIT_MS);
	NST_REQUIRE(nic > 0);
	child = nst_spawn_output(argv, env, &fd);
	NST_REQUIRE(child > 0);
	ready = nst_read_until(fd, out, OUT_MAX, &len, "ptrace child ready", 4 * WAIT_MS);
	printf("  $ NICSIM_DEBUG=1 test_spi_errors --debug-child ptrace\n%s", out);
	if (ready) {
		snprintf(
		    want, sizeof(want),
		    "refused by NIC %s (pid %d): it may not read this process's memory: this "
		    "process is not dumpable (prctl PR_SET_DUMPABLE 0, setuid or file "
		    "capabilities), so only a NIC with CAP_SYS_PTRACE may read its memory: "
		    "call prctl(PR_SET_DUMPABLE, 1), or `setcap cap_sys_ptrace+ep $(command -v "
		    "nicsimd)`",
		    ADDR_E, (int)nic);
		HAS(out, want);
		HAS(out, " 4096 bytes, flags 3) failed: WSAENOBUFS: no resources");
		NST_EQ(nst_run_shown(nst_bin("nicsim"), "nicsim", hosts, shown, OUT_MAX, WAIT_MS),
		       0);
		HAS(shown, " refusals 1 ");
		snprintf(want, sizeof(want),
			 "pid %d last refusal: this process is not dumpable (prctl PR_SET_DUMPABLE "
			 "0, setuid or file capabilities), so only a NIC with CAP_SYS_PTRACE may "
			 "read its memory: call prctl(PR_SET_DUMPABLE, 1)",
			 (int)child);
		HAS(shown, want);
		kill(child, SIGUSR1);
	} else {
		kill(child, SIGKILL);
	}
	st = nst_wait(child, 2 * WAIT_MS);
	NST_CHECK_(ready && st == 0, CU_FALSE, "child ready %d, wait status 0x%x", ready,
		   (unsigned)st);
	close(fd);
	NST_EQ(nst_stop(nic, WAIT_MS), 0);
	free(out);
	free(shown);
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
	    {"debug_memlock_refusal", test_debug_memlock_refusal},
	    {"debug_ptrace_refusal", test_debug_ptrace_refusal},
	    {"debug_run_dir_and_attach_refused", test_debug_run_dir_and_attach_refused},
	    {NULL, NULL},
	};

	if (argc == 3 && !strcmp(argv[1], "--debug-child"))
		return debug_child(argv[2]);
	return spi_main(argc, argv, "spi_errors", tests);
}

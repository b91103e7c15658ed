/*
 * The fixture the test_spi_* programs share: four NICs on one fabric,
 * sockets, registrations and overlapped operations, the peer process on
 * the same host, and waiting for a blocked thread (nstspidata.h).
 */
#include "nstspidata.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fab_addr.h"
#include "nicsim_abi.h"
#include "nstest.h"
#include "nstnet.h"
#include "nstnic.h"
#include "nstspi.h"
#include "ws2san.h"

char dir[256], sock_a[300], sock_b[300], sock_c[300];
struct nst_nic spi_nics[4] = {
    {.addr = ADDR_A},
    {.addr = ADDR_B},
    {.addr = ADDR_C,
     .extra = (const char *const[]){"--no-mw", "--no-rdma-read", "--max-reg", "1M", NULL}},
    {.addr = ADDR_D},
};
/* Peer processes started, so that a failed test's are ended before the next. */
static pid_t peers[64];
static size_t npeers;
static int base_a = -1, base_b = -1, base_c = -1;
uint16_t next_port = 2000;
char self_exe[PATH_MAX];

/* ---- Helpers ------------------------------------------------------------------ */

uint8_t *map(size_t n)
{
	uint8_t *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	memset(p, 0, n);
	return p;
}

struct sockaddr_in addr_of(const char *addr, uint16_t port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};

	inet_pton(AF_INET, addr, &sa.sin_addr);
	return sa;
}

SOCKET sock_on(const char *addr, uint16_t port)
{
	struct sockaddr_in sa = addr_of(addr, port);
	int err = 0;
	SOCKET s = WSPSocket(AF_INET, SOCK_STREAM, IPPROTO_TCP, NULL, 0, 0, &err);

	if (s == INVALID_SOCKET)
		return s;
	if (WSPBind(s, (struct sockaddr *)&sa, sizeof(sa), &err)) {
		WSPCloseSocket(s, &err);
		return INVALID_SOCKET;
	}
	return s;
}

void close_socket(SOCKET s)
{
	int err = 0;

	NST_EQ(WSPCloseSocket(s, &err), 0);
}

void *accept_main(void *arg)
{
	struct acceptor *a = arg;

	a->s = WSPAccept(a->l, NULL, NULL, NULL, 0, &a->err);
	return NULL;
}

/*
 * A connected pair, blocking on both sides: *srv accepted on NIC srv_addr,
 * *cli connected from NIC cli_addr.  0 or the WSA error of the connect.
 */
int connect_pair(const char *srv_addr, const char *cli_addr, SOCKET *srv, SOCKET *cli)
{
	uint16_t port = next_port++;
	struct sockaddr_in to = addr_of(srv_addr, port);
	struct acceptor a = {.s = INVALID_SOCKET};
	pthread_t t;
	int err = 0, rc;

	a.l = sock_on(srv_addr, port);
	*cli = sock_on(cli_addr, 0);
	if (a.l == INVALID_SOCKET || *cli == INVALID_SOCKET)
		return -1;
	if (WSPListen(a.l, 8, &err))
		return err;
	pthread_create(&t, NULL, accept_main, &a);
	rc = WSPConnect(*cli, (struct sockaddr *)&to, sizeof(to), NULL, NULL, NULL, NULL, &err);
	/* Closing the listener ends an accept that a failed connect left waiting. */
	if (rc)
		WSPCloseSocket(a.l, &a.err);
	pthread_join(t, NULL);
	if (!rc)
		WSPCloseSocket(a.l, &a.err);
	*srv = a.s;
	if (rc)
		return err;
	return a.s == INVALID_SOCKET ? a.err : 0;
}

HANDLE reg(SOCKET s, void *buf, DWORD len, DWORD flags)
{
	int err = 0;
	HANDLE h = WSPRegisterMemory(s, buf, len, flags, &err);

	NST_CHECK_(h != NULL, CU_TRUE, "WSPRegisterMemory: %s", nicsim_wsa_name(err));
	return h;
}

void dereg(SOCKET s, HANDLE h)
{
	int err = 0;

	NST_EQ(WSPDeregisterMemory(s, h, &err), 0);
}

int expose(SOCKET s, void *buf, DWORD len, DWORD flags, struct nicsim_rdma_desc *d)
{
	DWORD dlen = sizeof(*d);
	int err = 0;

	return WSPRegisterRdmaMemory(s, buf, len, flags, d, &dlen, &err) ? err : 0;
}

void unexpose(SOCKET s, struct nicsim_rdma_desc *d)
{
	int err = 0;

	NST_EQ(WSPDeregisterRdmaMemory(s, d, sizeof(*d), &err), 0);
}

/*
 * Wait for an overlapped operation: 0 or its WSA error; *bytes if not NULL.
 * Bounded by OV_WAIT_MS: an operation still pending then (its connection
 * died and nothing told this side) fails the test with WSAETIMEDOUT, and
 * s is closed first, so that the operation ends while ov still exists.
 */
int ov_wait(SOCKET s, WSAOVERLAPPED *ov, DWORD *bytes)
{
	const struct timespec pause = {.tv_nsec = 2 * 1000000L};
	uint64_t deadline = nst_now_ns() + (uint64_t)OV_WAIT_MS * 1000000u;
	DWORD n = 0, flags = 7;
	int err = 0;

	/* A bounded back-off of a wait for a condition. */
	while (!WSPGetOverlappedResult(s, ov, &n, FALSE, &flags, &err) &&
	       err == WSA_IO_INCOMPLETE) {
		if (nst_now_ns() >= deadline) {
			NST_CHECK_(
			    false, CU_FALSE,
			    "an operation on socket 0x%llx still pending after %d s: closing it",
			    (unsigned long long)s, OV_WAIT_MS / 1000);
			WSPCloseSocket(s, &err);
			return WSAETIMEDOUT;
		}
		nanosleep(&pause, NULL);
		err = 0;
	}
	if (!err) {
		if (bytes)
			*bytes = n;
		return flags == 0 ? 0 : -1;
	}
	return err;
}

/* Post a send/receive of one buffer: WSA_IO_PENDING expected, else the error. */
int post_send(SOCKET s, void *buf, DWORD len, WSAOVERLAPPED *ov)
{
	WSABUF b = {.len = len, .buf = buf};
	DWORD n = 1;
	int err = 0;

	memset(ov, 0, sizeof(*ov));
	if (WSPSend(s, &b, 1, &n, 0, ov, NULL, NULL, &err) == 0)
		return 0;
	return err;
}

int post_recv(SOCKET s, void *buf, DWORD len, WSAOVERLAPPED *ov)
{
	WSABUF b = {.len = len, .buf = buf};
	DWORD n = 1, flags = 0;
	int err = 0;

	memset(ov, 0, sizeof(*ov));
	if (WSPRecv(s, &b, 1, &n, &flags, ov, NULL, NULL, &err) == 0)
		return 0;
	return err;
}

int post_rdma(SOCKET s, bool write, void *buf, DWORD len, HANDLE h,
	      const struct nicsim_rdma_desc *d, DWORD off, WSAOVERLAPPED *ov)
{
	WSABUFEX b = {.len = len, .buf = buf, .handle = h};
	DWORD n = 1;
	int err = 0, rc;

	memset(ov, 0, sizeof(*ov));
	if (write)
		rc =
		    WSPRdmaWrite(s, &b, 1, (void *)d, sizeof(*d), off, &n, 0, ov, NULL, NULL, &err);
	else
		rc = WSPRdmaRead(s, &b, 1, (void *)d, sizeof(*d), off, &n, 0, ov, NULL, NULL, &err);
	return rc == 0 ? 0 : err;
}

uint32_t rnd(void)
{
	return (uint32_t)rand();
}

const uint32_t sizes[] = {
    1, 3, 4096, 4097, 65536 + 5, (1u << 20) + 3, (16u << 20) - 7, BIG,
};
_Static_assert(sizeof(sizes) / sizeof(sizes[0]) == NSIZES, "NSIZES counts sizes[]");

/* ---- Child process: the peer on the same host --------------------------------- */

struct child {
	SOCKET s;
	uint8_t *data;
	HANDLE hdata, hctl;
	struct ctl *in, *out; /* registered control buffers */
	WSAOVERLAPPED ov_in;
};

/* Send control message m on s from out, its registered buffer, and wait. */
int send_ctl(SOCKET s, struct ctl *out, const struct ctl *m)
{
	WSAOVERLAPPED ov;

	*out = *m;
	if (post_send(s, out, sizeof(*m), &ov) != WSA_IO_PENDING)
		return -1;
	return ov_wait(s, &ov, NULL);
}

/* Serve the parent's commands on one connection; 0 when told to quit. */
static int child_serve(struct child *c)
{
	struct nicsim_rdma_desc exposed;
	bool have_exposed = false;

	if (post_recv(c->s, c->in, sizeof(*c->in), &c->ov_in) != WSA_IO_PENDING)
		return 10;
	for (;;) {
		struct ctl m, r = {0};
		WSAOVERLAPPED ov;
		DWORD n;

		if (ov_wait(c->s, &c->ov_in, NULL))
			return 11;
		m = *c->in;
		if (m.op == CTL_QUIT)
			return 0;
		if (m.off > REGION || m.len > REGION - m.off)
			return 12;
		if (m.op == CTL_RECV &&
		    post_recv(c->s, c->data + m.off, m.len, &ov) != WSA_IO_PENDING)
			return 13;
		if (m.op == CTL_SEND)
			nst_fill(c->data + m.off, m.len, m.seed);
		if (m.op == CTL_EXPOSE) {
			if (have_exposed)
				WSPDeregisterRdmaMemory(c->s, &exposed, sizeof(exposed),
							(int *)&r.err);
			nst_fill(c->data, m.len, m.seed);
			r.err = (uint32_t)expose(c->s, c->data, m.len, m.flags, &exposed);
			have_exposed = r.err == 0;
			r.desc = exposed;
		}
		/* The next command's receive is posted before anything is answered. */
		if (post_recv(c->s, c->in, sizeof(*c->in), &c->ov_in) != WSA_IO_PENDING)
			return 14;
		switch (m.op) {
		case CTL_RECV:
			r.op = CTL_READY;
			if (send_ctl(c->s, c->out, &r))
				return 15;
			r.err = (uint32_t)ov_wait(c->s, &ov, &n);
			r.op = CTL_SUMS;
			r.bytes = n;
			r.sum = nst_sum32(c->data + m.off, n);
			if (send_ctl(c->s, c->out, &r))
				return 16;
			break;
		case CTL_SEND:
			if (post_send(c->s, c->data + m.off, m.len, &ov) != WSA_IO_PENDING ||
			    ov_wait(c->s, &ov, NULL))
				return 17;
			break;
		case CTL_EXPOSE:
			r.op = CTL_DESC;
			if (send_ctl(c->s, c->out, &r))
				return 18;
			break;
		case CTL_SUM:
			r.op = CTL_SUMS;
			r.sum = nst_sum32(c->data + m.off, m.len);
			if (send_ctl(c->s, c->out, &r))
				return 19;
			break;
		default: return 20;
		}
	}
}

/* The child: listen on addr:port, accept one connection, serve it. */
static int child_main(const char *addr, uint16_t port)
{
	WSPDATA data;
	WSPPROC_TABLE table;
	struct child c = {0};
	SOCKET l;
	int err = 0, rc;
	uint8_t *ctl;

	if (WSPStartupEx(0x0202, &data, NULL, NULL, &table))
		return 2;
	l = sock_on(addr, port);
	if (l == INVALID_SOCKET || WSPListen(l, 1, &err))
		return 3;
	c.s = WSPAccept(l, NULL, NULL, NULL, 0, &err);
	if (c.s == INVALID_SOCKET)
		return 4;
	c.data = map(REGION);
	ctl = map(PAGE);
	if (!c.data || !ctl)
		return 5;
	c.in = (struct ctl *)ctl;
	c.out = (struct ctl *)(ctl + 512);
	c.hdata = WSPRegisterMemory(c.s, c.data, REGION, MEM_READWRITE, &err);
	c.hctl = WSPRegisterMemory(c.s, ctl, PAGE, MEM_READWRITE, &err);
	if (!c.hdata || !c.hctl)
		return 6;
	rc = child_serve(&c);
	WSPCloseSocket(c.s, &err);
	WSPCloseSocket(l, &err);
	WSPCleanup(&err);
	return rc;
}

/* The parent's side of a child connection. */

pid_t start_child(const char *addr, uint16_t port)
{
	char p[16];
	pid_t pid, parent = getpid();

	snprintf(p, sizeof(p), "%u", port);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		/* It dies with us (the test thread that started it). */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		execl(self_exe, self_exe, "--child", addr, p, (char *)NULL);
		_exit(127);
	}
	if (pid > 0 && npeers < sizeof(peers) / sizeof(peers[0]))
		peers[npeers++] = pid;
	return pid;
}

/* Start a child listening on NIC child_addr and connect to it from NIC mine. */
bool peer_open(struct peer *pr, const char *child_addr, const char *mine)
{
	uint16_t port = next_port++;
	struct sockaddr_in to = addr_of(child_addr, port);
	uint64_t deadline = nst_now_ns() + (uint64_t)WAIT_MS * 1000000u;
	int err = 0;

	memset(pr, 0, sizeof(*pr));
	pr->pid = start_child(child_addr, port);
	if (pr->pid < 0)
		return false;
	/* Until the child listens, the connect is refused: try again. */
	for (;;) {
		pr->s = sock_on(mine, 0);
		if (pr->s == INVALID_SOCKET)
			return false;
		if (!WSPConnect(pr->s, (struct sockaddr *)&to, sizeof(to), NULL, NULL, NULL, NULL,
				&err))
			break;
		WSPCloseSocket(pr->s, &err);
		if (nst_now_ns() > deadline)
			return false;
		usleep(10000); /* a bounded back-off of a wait for a condition */
	}
	pr->ctl = map(PAGE);
	pr->in = (struct ctl *)pr->ctl;
	pr->out = (struct ctl *)(pr->ctl + 512);
	pr->hctl = reg(pr->s, pr->ctl, PAGE, MEM_READWRITE);
	return true;
}

/* Send m and wait for the answer (its receive posted first). */
int peer_call(struct peer *pr, const struct ctl *m, struct ctl *answer)
{
	WSAOVERLAPPED ov;
	int err;

	if (post_recv(pr->s, pr->in, sizeof(*pr->in), &ov) != WSA_IO_PENDING)
		return -1;
	err = send_ctl(pr->s, pr->out, m);
	if (!err)
		err = ov_wait(pr->s, &ov, NULL);
	*answer = *pr->in;
	if (err) {
		/* Say why: the child's exit status names the step that failed. */
		int status = nst_wait(pr->pid, 1000);

		fprintf(stderr, "\n    child: status 0x%x (exit %d)\n", status,
			status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	}
	return err;
}

void peer_close(struct peer *pr, bool quit)
{
	struct ctl m = {.op = CTL_QUIT};
	int status;

	if (quit)
		NST_EQ(send_ctl(pr->s, pr->out, &m), 0);
	close_socket(pr->s);
	munmap(pr->ctl, PAGE);
	status = nst_wait(pr->pid, WAIT_MS);
	if (quit)
		NST_CHECK_(WIFEXITED(status) && WEXITSTATUS(status) == 0, CU_FALSE,
			   "child exit status 0x%x", status);
	else if (status == -ETIMEDOUT)
		nst_stop(pr->pid, WAIT_MS);
}

int try_connect(SOCKET s, const char *addr, uint16_t port)
{
	struct sockaddr_in to = addr_of(addr, port);
	int err = 0;

	return WSPConnect(s, (struct sockaddr *)&to, sizeof(to), NULL, NULL, NULL, NULL, &err) ? err
											       : 0;
}

int events_of(SOCKET s, int ev, WSANETWORKEVENTS *ne)
{
	int err = 0;

	memset(ne, 0, sizeof(*ne));
	return WSPEnumNetworkEvents(s, ev, ne, &err) ? err : 0;
}

/* Wait for an eventfd without calling the provider. */
bool event_fires(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, ms) == 1;
}

/* ---- Blocked threads --------------------------------------------------------------- */

/* Wait until the thread that will set *tid has done so and blocks in its
 * call: what the test does next must find it waiting. */
void wait_until_blocked(pid_t *tid)
{
	uint64_t deadline = nst_now_ns() + (uint64_t)WAIT_MS * 1000000u;

	while (!__atomic_load_n(tid, __ATOMIC_ACQUIRE) && nst_now_ns() < deadline)
		sched_yield();
	NST_REQUIRE_GT(__atomic_load_n(tid, __ATOMIC_ACQUIRE), 0);
	NST_REQUIRE_EQ(nst_wait_blocked(*tid, WAIT_MS), 0);
}

void *wait_main(void *arg)
{
	struct waiter *w = arg;
	DWORD flags = 0;

	__atomic_store_n(&w->tid, gettid(), __ATOMIC_RELEASE);
	w->rc = WSPGetOverlappedResult(w->s, w->ov, &w->bytes, TRUE, &flags, &w->err);
	w->done_ns = nst_now_ns();
	return NULL;
}

/* A receive without an overlapped structure: the call itself waits. */
void *blocking_recv_main(void *arg)
{
	struct waiter *w = arg;
	WSABUF b = {.len = w->len, .buf = w->buf};
	DWORD flags = 0;

	__atomic_store_n(&w->tid, gettid(), __ATOMIC_RELEASE);
	w->rc = WSPRecv(w->s, &b, 1, &w->bytes, &flags, NULL, NULL, NULL, &w->err);
	return NULL;
}

/* ---- Suite ---------------------------------------------------------------------------- */

/*
 * --udp: each NIC in a network namespace of its own with a run directory
 * and fabric of its own (dir/host-ADDR), all four on one Ethernet segment
 * (nstnet.h), so that every frame between them is a UDP datagram.  The
 * suite's directory holds a link to each NIC's socket, which is all the
 * provider needs to find it.  Nothing answers ADDR_NONE on the segment; a
 * route says it is unreachable, as the fabric says of an address with no
 * port.
 */
bool spi_udp;
struct nst_net spi_net;

static int init(void)
{
	const char *const addrs[] = {ADDR_A, ADDR_B, ADDR_C, ADDR_D, NULL};
	WSPDATA data;
	WSPPROC_TABLE table;
	ssize_t n;

	srand((unsigned)nst_now_ns());
	n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
	if (n <= 0)
		return -1;
	self_exe[n] = '\0';
	if (nst_tmpdir(dir, sizeof(dir), "spi") < 0)
		return -1;
	snprintf(sock_a, sizeof(sock_a), "%s/nic-" ADDR_A ".sock", dir);
	snprintf(sock_b, sizeof(sock_b), "%s/nic-" ADDR_B ".sock", dir);
	snprintf(sock_c, sizeof(sock_c), "%s/nic-" ADDR_C ".sock", dir);
	if (spi_udp ? nst_nics_udp(dir, spi_nics, 4, &spi_net, ADDR_NONE "/32") < 0
		    : nst_make_fabric(dir, addrs) < 0)
		return -1;
	if (nst_nics_start(dir, spi_nics, 4, WAIT_MS) < 0)
		return -1;
	setenv("NICSIM_DIR", dir, 1);
	return WSPStartupEx(0x0202, &data, NULL, NULL, &table) == 0 ? 0 : -1;
}

static int clean(void)
{
	int err = 0, ok = WSPCleanup(&err) == 0;
	int sa = nst_stop(nic_a, WAIT_MS), sb = nst_stop(nic_b, WAIT_MS);
	int sc = nst_stop(nic_c, WAIT_MS), sd = nic_d > 0 ? nst_stop(nic_d, WAIT_MS) : 0;

	if (!ok || !WIFEXITED(sa) || WEXITSTATUS(sa) || !WIFEXITED(sb) || WEXITSTATUS(sb) ||
	    !WIFEXITED(sc) || WEXITSTATUS(sc) ||
	    (nic_d > 0 && (!WIFEXITED(sd) || WEXITSTATUS(sd)))) {
		fprintf(stderr,
			"clean-up failed (cleanup %d, NICs 0x%x 0x%x 0x%x 0x%x); logs in %s\n", ok,
			sa, sb, sc, sd, dir);
		return -1;
	}
	nst_net_down(&spi_net);
	nst_rmtree(dir);
	return 0;
}

/* End the peer processes still running (a failed test's); reap the rest. */
static void end_peers(void)
{
	for (size_t i = 0; i < npeers; i++) {
		int status;

		/* Still our child, so its pid is not anyone else's. */
		if (waitpid(peers[i], &status, WNOHANG) == 0) {
			fprintf(stderr, "%s: ending peer process %d of an earlier test\n",
				program_invocation_short_name, (int)peers[i]);
			kill(peers[i], SIGKILL);
			nst_wait(peers[i], WAIT_MS);
		}
	}
	npeers = 0;
}

static void setup(void)
{
	int rc;

	/* Each test from the NICs as they were started (nstspidata.h). */
	NST_SPI_KNOWN_STATE(rc, dir, spi_nics, 4, end_peers, WAIT_MS);
	NST_EQ(rc, 0);
	base_a = nst_tpt_in_use(sock_a);
	base_b = nst_tpt_in_use(sock_b);
	base_c = nst_tpt_in_use(sock_c);
}

static void teardown(void)
{
	NST_TRUE(base_a >= 0 && base_b >= 0 && base_c >= 0);
	NST_EQ(nst_wait_tpt_in_use(sock_a, base_a, WAIT_MS), base_a);
	NST_EQ(nst_wait_tpt_in_use(sock_b, base_b, WAIT_MS), base_b);
	NST_EQ(nst_wait_tpt_in_use(sock_c, base_c, WAIT_MS), base_c);
}

int spi_main(int argc, char **argv, const char *name, const struct nst_test *tests)
{
	const struct nst_suite suite = {.name = name,
					.tests = tests,
					.init = init,
					.clean = clean,
					.setup = setup,
					.teardown = teardown};

	if (argc == 4 && !strcmp(argv[1], "--child"))
		return child_main(argv[2], (uint16_t)atoi(argv[3]));
	if (argc > 1 && !strcmp(argv[1], "--udp")) {
		spi_udp = true;
		argv[1] = argv[0];
		return nst_run_suite(argc - 1, argv + 1, &suite);
	}
	return nst_run_suite(argc, argv, &suite);
}

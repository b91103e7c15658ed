/*
 * Connections and data through the SPI (ws2san.h) against real nicsimd
 * processes joined by a fabric: WSPListen/WSPAccept/WSPConnect (blocking and
 * non-blocking with WSPEventSelect), WSPSend/WSPRecv, WSPRdmaWrite and
 * WSPRdmaRead with checksummed data from 1 byte to 64 MiB at random offsets
 * between two hosts (two NICs, one process) and between two processes on one
 * host (a child process on the same NIC), WSPGetOverlappedResult with fWait
 * FALSE and TRUE, socket options, the address list, every bad input with its
 * WSA code, descriptors the NIC must refuse, closing with operations in
 * flight, a peer killed mid-transfer and a NIC killed under its host.  Every
 * test leaves the TPT occupancy of the NICs where it found it (R11).
 *
 * NICs: A and B (198.18.0.1, .2) with every capability; C (.3) without
 * memory windows and RDMA read, registrations up to 1 MiB; D (.4), killed by
 * the last test.  The child process is this program run with "--child".
 */
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fab_addr.h"
#include "nicsim_abi.h"
#include "nstest.h"
#include "nstnic.h"
#include "ws2san.h"

#define ADDR_A "198.18.0.1"
#define ADDR_B "198.18.0.2"
#define ADDR_C "198.18.0.3"
#define ADDR_D "198.18.0.4"
#define ADDR_NONE "198.18.0.9" /* on no fabric port */
#define WAIT_MS 10000
#define PEER_GONE_NS 60000000000ull
#define PAGE 4096u
#define BIG (64u << 20)
#define REGION (BIG + 2 * PAGE)

static char dir[256], sock_a[300], sock_b[300], sock_c[300];
static pid_t nic_a = -1, nic_b = -1, nic_c = -1, nic_d = -1;
static int base_a = -1, base_b = -1, base_c = -1;
static uint16_t next_port = 2000;
static char self_exe[PATH_MAX];

/* ---- Helpers ------------------------------------------------------------------ */

static uint8_t *map(size_t n)
{
	uint8_t *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	memset(p, 0, n);
	return p;
}

static struct sockaddr_in addr_of(const char *addr, uint16_t port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};

	inet_pton(AF_INET, addr, &sa.sin_addr);
	return sa;
}

static SOCKET sock_on(const char *addr, uint16_t port)
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

static void close_socket(SOCKET s)
{
	int err = 0;

	NST_EQ(WSPCloseSocket(s, &err), 0);
}

struct acceptor {
	SOCKET l, s;
	int err;
};

static void *accept_main(void *arg)
{
	struct acceptor *a = arg;

	a->s = WSPAccept(a->l, NULL, NULL, NULL, 0, &a->err);
	return NULL;
}

/*
 * A connected pair, blocking on both sides: *srv accepted on NIC srv_addr,
 * *cli connected from NIC cli_addr.  0 or the WSA error of the connect.
 */
static int connect_pair(const char *srv_addr, const char *cli_addr, SOCKET *srv, SOCKET *cli)
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

static HANDLE reg(SOCKET s, void *buf, DWORD len, DWORD flags)
{
	int err = 0;
	HANDLE h = WSPRegisterMemory(s, buf, len, flags, &err);

	NST_CHECK_(h != NULL, CU_TRUE, "WSPRegisterMemory: %s", prov_wsa_name(err));
	return h;
}

static void dereg(SOCKET s, HANDLE h)
{
	int err = 0;

	NST_EQ(WSPDeregisterMemory(s, h, &err), 0);
}

static int expose(SOCKET s, void *buf, DWORD len, DWORD flags, struct nicsim_rdma_desc *d)
{
	DWORD dlen = sizeof(*d);
	int err = 0;

	return WSPRegisterRdmaMemory(s, buf, len, flags, d, &dlen, &err) ? err : 0;
}

static void unexpose(SOCKET s, struct nicsim_rdma_desc *d)
{
	int err = 0;

	NST_EQ(WSPDeregisterRdmaMemory(s, d, sizeof(*d), &err), 0);
}

/* Wait for an overlapped operation: 0 or its WSA error; *bytes if not NULL. */
static int ov_wait(SOCKET s, WSAOVERLAPPED *ov, DWORD *bytes)
{
	DWORD n = 0, flags = 7;
	int err = 0;

	if (WSPGetOverlappedResult(s, ov, &n, TRUE, &flags, &err)) {
		if (bytes)
			*bytes = n;
		return flags == 0 ? 0 : -1;
	}
	return err;
}

/* Post a send/receive of one buffer: WSA_IO_PENDING expected, else the error. */
static int post_send(SOCKET s, void *buf, DWORD len, WSAOVERLAPPED *ov)
{
	WSABUF b = {.len = len, .buf = buf};
	DWORD n = 1;
	int err = 0;

	memset(ov, 0, sizeof(*ov));
	if (WSPSend(s, &b, 1, &n, 0, ov, NULL, NULL, &err) == 0)
		return 0;
	return err;
}

static int post_recv(SOCKET s, void *buf, DWORD len, WSAOVERLAPPED *ov)
{
	WSABUF b = {.len = len, .buf = buf};
	DWORD n = 1, flags = 0;
	int err = 0;

	memset(ov, 0, sizeof(*ov));
	if (WSPRecv(s, &b, 1, &n, &flags, ov, NULL, NULL, &err) == 0)
		return 0;
	return err;
}

static int post_rdma(SOCKET s, bool write, void *buf, DWORD len, HANDLE h,
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

static uint32_t rnd(void)
{
	return (uint32_t)rand();
}

static const uint32_t sizes[] = {
    1, 3, 4096, 4097, 65536 + 5, (1u << 20) + 3, (16u << 20) - 7, BIG,
};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* ---- Child process: the peer on the same host --------------------------------- */

enum ctl_op {
	CTL_RECV = 1,   /* post a receive of len at off, answer READY, then SUM of what came */
	CTL_SEND = 2,   /* fill [off, off + len) from seed and send it */
	CTL_EXPOSE = 3, /* expose [0, len) with flags (after filling it from seed): DESC */
	CTL_SUM = 4,    /* checksum of [off, off + len): SUM */
	CTL_QUIT = 5,
	CTL_READY = 6,
	CTL_DESC = 7,
	CTL_SUMS = 8,
};

struct ctl {
	uint32_t op, len, off, seed, flags, sum, bytes, err;
	struct nicsim_rdma_desc desc;
};

struct child {
	SOCKET s;
	uint8_t *data;
	HANDLE hdata, hctl;
	struct ctl *in, *out; /* registered control buffers */
	WSAOVERLAPPED ov_in;
};

/* Send control message m on s from out, its registered buffer, and wait. */
static int send_ctl(SOCKET s, struct ctl *out, const struct ctl *m)
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
struct peer {
	pid_t pid;
	SOCKET s;
	uint8_t *ctl;
	HANDLE hctl;
	struct ctl *in, *out;
};

static pid_t start_child(const char *addr, uint16_t port)
{
	char p[16];
	pid_t pid;

	snprintf(p, sizeof(p), "%u", port);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		execl(self_exe, self_exe, "--child", addr, p, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Start a child listening on NIC child_addr and connect to it from NIC mine. */
static bool peer_open(struct peer *pr, const char *child_addr, const char *mine)
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
static int peer_call(struct peer *pr, const struct ctl *m, struct ctl *answer)
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

static void peer_close(struct peer *pr, bool quit)
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

/* ---- Data integrity ------------------------------------------------------------ */

struct side {
	SOCKET s;
	uint8_t *src, *dst; /* REGION bytes each */
	HANDLE hsrc, hdst;
};

static void side_open(struct side *sd, SOCKET s)
{
	sd->s = s;
	sd->src = map(REGION);
	sd->dst = map(REGION);
	NST_REQUIRE(sd->src != NULL && sd->dst != NULL);
	sd->hsrc = reg(s, sd->src, REGION, MEM_READ);
	sd->hdst = reg(s, sd->dst, REGION, MEM_READWRITE);
}

static void side_close(struct side *sd)
{
	dereg(sd->s, sd->hsrc);
	dereg(sd->s, sd->hdst);
	munmap(sd->src, REGION);
	munmap(sd->dst, REGION);
	close_socket(sd->s);
}

/* Send/receive, RDMA write and RDMA read of every size between two sockets. */
static void integrity(SOCKET s_a, SOCKET s_b)
{
	struct side a, b;
	uint64_t t0 = nst_now_ns();

	side_open(&a, s_a);
	side_open(&b, s_b);
	for (size_t i = 0; i < NSIZES; i++) {
		uint32_t len = sizes[i], oa = rnd() % (2 * PAGE), ob = rnd() % (2 * PAGE);
		struct nicsim_rdma_desc d;
		WSAOVERLAPPED ova, ovb;
		DWORD n = 0;

		/* Send/receive: b posts first, a sends. */
		nst_fill(a.src + oa, len, (uint32_t)i + 1);
		NST_REQUIRE_EQ(post_recv(b.s, b.dst + ob, len, &ovb), WSA_IO_PENDING);
		NST_REQUIRE_EQ(post_send(a.s, a.src + oa, len, &ova), WSA_IO_PENDING);
		NST_EQ(ov_wait(a.s, &ova, &n), 0);
		NST_EQ(n, len);
		NST_EQ(ov_wait(b.s, &ovb, &n), 0);
		NST_EQ(n, len);
		NST_EQ_U(nst_sum32(b.dst + ob, len), nst_sum32(a.src + oa, len));

		/* RDMA write from a into b's exposed buffer at an offset. */
		nst_fill(a.src + oa, len, (uint32_t)i + 100);
		memset(b.dst, 0, REGION);
		NST_REQUIRE_EQ(expose(b.s, b.dst, REGION, MEM_WRITE, &d), 0);
		NST_REQUIRE_EQ(post_rdma(a.s, true, a.src + oa, len, a.hsrc, &d, ob, &ova),
			       WSA_IO_PENDING);
		NST_EQ(ov_wait(a.s, &ova, &n), 0);
		NST_EQ(n, len);
		NST_EQ_U(nst_sum32(b.dst + ob, len), nst_sum32(a.src + oa, len));
		NST_EQ(b.dst[ob + len], 0); /* nothing past the end */
		unexpose(b.s, &d);

		/* RDMA read by a of b's exposed buffer at an offset. */
		nst_fill(b.dst + ob, len, (uint32_t)i + 200);
		NST_REQUIRE_EQ(expose(b.s, b.dst, REGION, MEM_READ, &d), 0);
		NST_REQUIRE_EQ(post_rdma(a.s, false, a.dst + oa, len, a.hdst, &d, ob, &ova),
			       WSA_IO_PENDING);
		NST_EQ(ov_wait(a.s, &ova, &n), 0);
		NST_EQ(n, len);
		NST_EQ_U(nst_sum32(a.dst + oa, len), nst_sum32(b.dst + ob, len));
		unexpose(b.s, &d);
	}
	printf("\n    3 x %zu sizes, 1 B .. 64 MiB: %.0f ms ", NSIZES,
	       (double)(nst_now_ns() - t0) / 1e6);
	side_close(&a);
	side_close(&b);
}

static void test_two_hosts_integrity(void)
{
	SOCKET a, b;

	NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_A, &b, &a), 0);
	integrity(a, b);
}

static void test_two_processes_one_host(void)
{
	struct peer pr;
	uint8_t *src = map(REGION), *dst = map(REGION);
	HANDLE hsrc, hdst;

	NST_REQUIRE(src != NULL && dst != NULL);
	NST_REQUIRE(peer_open(&pr, ADDR_A, ADDR_A));
	hsrc = reg(pr.s, src, REGION, MEM_READ);
	hdst = reg(pr.s, dst, REGION, MEM_READWRITE);
	for (size_t i = 0; i < NSIZES; i++) {
		uint32_t len = sizes[i], o = rnd() % (2 * PAGE), co = rnd() % (2 * PAGE);
		struct ctl m = {0}, r;
		struct nicsim_rdma_desc desc;
		WSAOVERLAPPED ov, ovd;
		DWORD n = 0;

		/* Send to the child: it posts, says READY, and reports the checksum. */
		nst_fill(src + o, len, (uint32_t)i + 7);
		m.op = CTL_RECV;
		m.len = len;
		m.off = co;
		NST_REQUIRE_EQ(peer_call(&pr, &m, &r), 0);
		NST_REQUIRE_EQ(r.op, CTL_READY);
		NST_REQUIRE_EQ(post_recv(pr.s, pr.in, sizeof(*pr.in), &ov), WSA_IO_PENDING);
		NST_REQUIRE_EQ(post_send(pr.s, src + o, len, &ovd), WSA_IO_PENDING);
		NST_EQ(ov_wait(pr.s, &ovd, NULL), 0);
		NST_EQ(ov_wait(pr.s, &ov, NULL), 0);
		NST_EQ(pr.in->bytes, len);
		NST_EQ_U(pr.in->sum, nst_sum32(src + o, len));

		/* Receive from the child. */
		NST_REQUIRE_EQ(post_recv(pr.s, dst + o, len, &ovd), WSA_IO_PENDING);
		m.op = CTL_SEND;
		m.seed = (uint32_t)i + 9;
		NST_REQUIRE_EQ(send_ctl(pr.s, pr.out, &m), 0);
		NST_EQ(ov_wait(pr.s, &ovd, &n), 0);
		NST_EQ(n, len);
		nst_fill(src + o, len, m.seed);
		NST_EQ_U(nst_sum32(dst + o, len), nst_sum32(src + o, len));

		/* RDMA write into the child's exposed buffer, checked by its checksum. */
		m.op = CTL_EXPOSE;
		m.off = 0;
		m.len = REGION;
		m.flags = MEM_READWRITE;
		m.seed = (uint32_t)i + 11;
		NST_REQUIRE_EQ(peer_call(&pr, &m, &r), 0);
		NST_REQUIRE_EQ(r.err, 0);
		desc = r.desc;
		nst_fill(src + o, len, (uint32_t)i + 13);
		NST_REQUIRE_EQ(post_rdma(pr.s, true, src + o, len, hsrc, &desc, co, &ovd),
			       WSA_IO_PENDING);
		NST_EQ(ov_wait(pr.s, &ovd, &n), 0);
		NST_EQ(n, len);
		m.op = CTL_SUM;
		m.off = co;
		m.len = len;
		NST_REQUIRE_EQ(peer_call(&pr, &m, &r), 0);
		NST_EQ_U(r.sum, nst_sum32(src + o, len));

		/* RDMA read back what was just written. */
		memset(dst + o, 0, len);
		NST_REQUIRE_EQ(post_rdma(pr.s, false, dst + o, len, hdst, &desc, co, &ovd),
			       WSA_IO_PENDING);
		NST_EQ(ov_wait(pr.s, &ovd, &n), 0);
		NST_EQ(n, len);
		NST_EQ_U(nst_sum32(dst + o, len), nst_sum32(src + o, len));
	}
	dereg(pr.s, hsrc);
	dereg(pr.s, hdst);
	peer_close(&pr, true);
	munmap(src, REGION);
	munmap(dst, REGION);
}

/* ---- Connections ------------------------------------------------------------------ */

struct cond_ctx {
	int verdict;
	int calls;
	struct sockaddr_in caller;
};

static int WSPAPI condition(LPWSABUF caller, LPWSABUF caller_data, LPQOS sqos, LPQOS gqos,
			    LPWSABUF callee, LPWSABUF callee_data, GROUP *g, DWORD_PTR data)
{
	struct cond_ctx *c = (struct cond_ctx *)data;

	(void)caller_data;
	(void)sqos;
	(void)gqos;
	(void)callee;
	(void)callee_data;
	(void)g;
	c->calls++;
	if (caller && caller->len >= sizeof(c->caller))
		memcpy(&c->caller, caller->buf, sizeof(c->caller));
	return c->verdict;
}

struct cond_acceptor {
	SOCKET l, s;
	struct cond_ctx *ctx;
	struct sockaddr_in peer;
	int peer_len, err;
};

static void *cond_accept_main(void *arg)
{
	struct cond_acceptor *a = arg;

	a->peer_len = sizeof(a->peer);
	a->s = WSPAccept(a->l, (struct sockaddr *)&a->peer, &a->peer_len, condition,
			 (DWORD_PTR)a->ctx, &a->err);
	return NULL;
}

static int try_connect(SOCKET s, const char *addr, uint16_t port)
{
	struct sockaddr_in to = addr_of(addr, port);
	int err = 0;

	return WSPConnect(s, (struct sockaddr *)&to, sizeof(to), NULL, NULL, NULL, NULL, &err) ? err
											       : 0;
}

static void test_connect_listen_accept_errors(void)
{
	uint16_t port = next_port++;
	struct sockaddr_in to = addr_of(ADDR_B, port), v6 = to;
	struct cond_ctx ctx = {.verdict = CF_REJECT};
	struct cond_acceptor a = {.ctx = &ctx};
	SOCKET s = sock_on(ADDR_A, 0), l, l2, u;
	int err = 0, plen = 4;
	pthread_t t;

	NST_REQUIRE(s != INVALID_SOCKET);
	/* Nobody listens there; no NIC has that address. */
	NST_EQ(try_connect(s, ADDR_B, port), WSAECONNREFUSED);
	NST_EQ(try_connect(s, ADDR_NONE, port), WSAEHOSTUNREACH);
	/* Bad arguments. */
	NST_EQ(WSPConnect(s, NULL, sizeof(to), NULL, NULL, NULL, NULL, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEFAULT);
	NST_EQ(WSPConnect(s, (struct sockaddr *)&to, 4, NULL, NULL, NULL, NULL, &err),
	       SOCKET_ERROR);
	NST_EQ(err, WSAEFAULT);
	v6.sin_family = AF_INET6;
	NST_EQ(WSPConnect(s, (struct sockaddr *)&v6, sizeof(v6), NULL, NULL, NULL, NULL, &err),
	       SOCKET_ERROR);
	NST_EQ(err, WSAEAFNOSUPPORT);
	NST_EQ(try_connect(s, ADDR_B, 0), WSAEADDRNOTAVAIL);
	NST_EQ(try_connect(s, "0.0.0.0", port), WSAEADDRNOTAVAIL);
	NST_EQ(try_connect((SOCKET)12345, ADDR_B, port), WSAENOTSOCK);

	/* Listening: unbound, port taken, then connect/accept misuse. */
	u = WSPSocket(AF_INET, SOCK_STREAM, 0, NULL, 0, 0, &err);
	NST_EQ(WSPListen(u, 4, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEINVAL);
	NST_TRUE(WSPAccept(u, NULL, NULL, NULL, 0, &err) == INVALID_SOCKET);
	NST_EQ(err, WSAEINVAL);
	l = sock_on(ADDR_B, port);
	l2 = sock_on(ADDR_B, port);
	NST_EQ(WSPListen(l, 4, &err), 0);
	NST_EQ(WSPListen(l, 4, &err), 0); /* again: nothing changes */
	NST_EQ(WSPListen(l2, 4, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEADDRINUSE);
	NST_EQ(try_connect(l, ADDR_A, 9), WSAEINVAL);
	NST_TRUE(WSPAccept(l, (struct sockaddr *)&to, &plen, NULL, 0, &err) == INVALID_SOCKET);
	NST_EQ(err, WSAEFAULT);

	/* The condition function refuses: both sides see WSAECONNREFUSED. */
	a.l = l;
	pthread_create(&t, NULL, cond_accept_main, &a);
	NST_EQ(try_connect(s, ADDR_B, port), WSAECONNREFUSED);
	pthread_join(t, NULL);
	NST_TRUE(a.s == INVALID_SOCKET);
	NST_EQ(a.err, WSAECONNREFUSED);
	NST_EQ(ctx.calls, 1);
	NST_EQ(ctx.caller.sin_addr.s_addr, addr_of(ADDR_A, 0).sin_addr.s_addr);

	/* Deferred, then accepted; a failed connect left the socket usable. */
	ctx.verdict = CF_DEFER;
	ctx.calls = 0;
	pthread_create(&t, NULL, cond_accept_main, &a);
	{
		/* The connect waits until the second accept takes the request. */
		struct acceptor later = {.l = l};
		SOCKET c2 = sock_on(ADDR_A, 0);
		int rc;

		(void)later;
		NST_REQUIRE(c2 != INVALID_SOCKET);
		rc = WSPEventSelect(c2, eventfd(0, EFD_NONBLOCK), FD_CONNECT, &err);
		NST_EQ(rc, 0);
		NST_EQ(try_connect(c2, ADDR_B, port), WSAEWOULDBLOCK);
		pthread_join(t, NULL);
		NST_TRUE(a.s == INVALID_SOCKET);
		NST_EQ(a.err, WSATRY_AGAIN);
		ctx.verdict = CF_ACCEPT;
		pthread_create(&t, NULL, cond_accept_main, &a);
		pthread_join(t, NULL);
		NST_TRUE(a.s != INVALID_SOCKET);
		NST_EQ(ctx.calls, 2);
		NST_EQ(a.peer_len, (int)sizeof(struct sockaddr_in));
		NST_EQ(a.peer.sin_addr.s_addr, addr_of(ADDR_A, 0).sin_addr.s_addr);
		close_socket(a.s);
		close_socket(c2);
	}

	/* A blocking connect, then the connected socket refuses connect and listen. */
	pthread_create(&t, NULL, cond_accept_main, &a);
	NST_EQ(try_connect(s, ADDR_B, port), 0);
	pthread_join(t, NULL);
	NST_TRUE(a.s != INVALID_SOCKET);
	NST_EQ(try_connect(s, ADDR_B, port), WSAEISCONN);
	NST_EQ(WSPListen(s, 4, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEISCONN);
	close_socket(a.s);
	close_socket(s);
	close_socket(l);
	close_socket(l2);
	close_socket(u);

	/* An unbound socket binds itself (to the lowest NIC, A) when it connects. */
	l = sock_on(ADDR_B, port);
	NST_EQ(WSPListen(l, 4, &err), 0);
	u = WSPSocket(AF_INET, SOCK_STREAM, 0, NULL, 0, 0, &err);
	a.l = l;
	pthread_create(&t, NULL, cond_accept_main, &a);
	NST_EQ(try_connect(u, ADDR_B, port), 0);
	pthread_join(t, NULL);
	NST_EQ(a.peer.sin_addr.s_addr, addr_of(ADDR_A, 0).sin_addr.s_addr);
	close_socket(a.s);
	close_socket(u);
	close_socket(l);
}

static int events_of(SOCKET s, int ev, WSANETWORKEVENTS *ne)
{
	int err = 0;

	memset(ne, 0, sizeof(*ne));
	return WSPEnumNetworkEvents(s, ev, ne, &err) ? err : 0;
}

/* Wait for an eventfd without calling the provider. */
static bool event_fires(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, ms) == 1;
}

static void test_nonblocking_connect_and_accept(void)
{
	uint16_t port = next_port++;
	int el = eventfd(0, EFD_NONBLOCK), ec = eventfd(0, EFD_NONBLOCK);
	int ec2 = eventfd(0, EFD_NONBLOCK), err = 0;
	SOCKET l = sock_on(ADDR_B, port), c = sock_on(ADDR_A, 0), c2 = sock_on(ADDR_A, 0), s;
	struct sockaddr_in peer;
	int plen = sizeof(peer);
	WSANETWORKEVENTS ne;
	uint64_t t0;

	NST_REQUIRE(el >= 0 && ec >= 0 && ec2 >= 0);
	NST_EQ(WSPListen(l, 4, &err), 0);
	/* Bad selections. */
	NST_EQ(WSPEventSelect(l, el, 1 << 12, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEINVAL);
	NST_EQ(WSPEventSelect(l, WSA_INVALID_EVENT, FD_ACCEPT, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEINVAL);
	NST_EQ(WSPEventSelect(l, STDERR_FILENO, FD_ACCEPT, &err),
	       SOCKET_ERROR); /* not an eventfd */
	NST_EQ(err, WSAEINVAL);
	NST_EQ(WSPEnumNetworkEvents(l, el, NULL, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEFAULT);

	NST_EQ(WSPEventSelect(l, el, FD_ACCEPT, &err), 0);
	NST_TRUE(WSPAccept(l, NULL, NULL, NULL, 0, &err) == INVALID_SOCKET);
	NST_EQ(err, WSAEWOULDBLOCK);
	NST_EQ(WSPEventSelect(c, ec, FD_CONNECT | FD_CLOSE, &err), 0);
	t0 = nst_now_ns();
	NST_EQ(try_connect(c, ADDR_B, port), WSAEWOULDBLOCK);
	/* The events fire with nobody calling the provider. */
	NST_REQUIRE(event_fires(el, WAIT_MS));
	NST_EQ(events_of(l, el, &ne), 0);
	NST_EQ(ne.lNetworkEvents, FD_ACCEPT);
	NST_EQ(ne.iErrorCode[FD_ACCEPT_BIT], 0);
	NST_TRUE(!event_fires(el, 0)); /* reset by WSPEnumNetworkEvents */
	s = WSPAccept(l, (struct sockaddr *)&peer, &plen, NULL, 0, &err);
	NST_REQUIRE(s != INVALID_SOCKET);
	NST_EQ(peer.sin_addr.s_addr, addr_of(ADDR_A, 0).sin_addr.s_addr);
	NST_REQUIRE(event_fires(ec, WAIT_MS));
	printf("\n    non-blocking connect + accept: %.0f us ", (double)(nst_now_ns() - t0) / 1e3);
	NST_EQ(events_of(c, ec, &ne), 0);
	NST_EQ(ne.lNetworkEvents, FD_CONNECT);
	NST_EQ(ne.iErrorCode[FD_CONNECT_BIT], 0);
	NST_EQ(try_connect(c, ADDR_B, port), WSAEISCONN);

	/* Refused without blocking: FD_CONNECT carries the error. */
	NST_EQ(WSPEventSelect(c2, ec2, FD_CONNECT, &err), 0);
	NST_EQ(try_connect(c2, ADDR_B, next_port++), WSAEWOULDBLOCK);
	NST_REQUIRE(event_fires(ec2, WAIT_MS));
	NST_EQ(events_of(c2, ec2, &ne), 0);
	NST_EQ(ne.lNetworkEvents, FD_CONNECT);
	NST_EQ(ne.iErrorCode[FD_CONNECT_BIT], WSAECONNREFUSED);

	/* The peer closes: FD_CLOSE, graceful. */
	close_socket(s);
	NST_REQUIRE(event_fires(ec, WAIT_MS));
	NST_EQ(events_of(c, ec, &ne), 0);
	NST_EQ(ne.lNetworkEvents, FD_CLOSE);
	NST_EQ(ne.iErrorCode[FD_CLOSE_BIT], 0);
	close_socket(c);
	close_socket(c2);
	close_socket(l);
	close(el);
	close(ec);
	close(ec2);
}

/* A listener on B at port, and a request to it from a new socket on A,
 * which selects cev, waiting to be accepted. */
struct pending {
	SOCKET l, c;
	int el, ec; /* the event objects of l and c */
};

static void pending_accept(struct pending *p, uint16_t port, long cev)
{
	WSANETWORKEVENTS ne;
	int err = 0;

	p->el = eventfd(0, EFD_NONBLOCK);
	p->ec = eventfd(0, EFD_NONBLOCK);
	NST_REQUIRE(p->el >= 0 && p->ec >= 0);
	p->l = sock_on(ADDR_B, port);
	p->c = sock_on(ADDR_A, 0);
	NST_EQ(WSPListen(p->l, 4, &err), 0);
	NST_EQ(WSPEventSelect(p->l, p->el, FD_ACCEPT | FD_CLOSE, &err), 0);
	NST_EQ(WSPEventSelect(p->c, p->ec, cev, &err), 0);
	NST_EQ(try_connect(p->c, ADDR_B, port), WSAEWOULDBLOCK);
	NST_REQUIRE(event_fires(p->el, WAIT_MS));
	NST_EQ(events_of(p->l, p->el, &ne), 0);
	NST_EQ(ne.lNetworkEvents, FD_ACCEPT);
}

static void pending_close(struct pending *p)
{
	if (p->c != INVALID_SOCKET)
		close_socket(p->c);
	close_socket(p->l);
	close(p->el);
	close(p->ec);
}

/* Socket s, accepted on a listener with event object el, was closed under
 * it within ms: FD_CLOSE says so with err, and a receive fails with err. */
static void closed_with(SOCKET s, int el, int ms, int err)
{
	WSANETWORKEVENTS ne;
	WSAOVERLAPPED ov;
	char buf[16];
	HANDLE h;

	NST_TRUE(event_fires(el, ms));
	NST_EQ(events_of(s, el, &ne), 0);
	NST_EQ(ne.lNetworkEvents, FD_CLOSE);
	NST_EQ(ne.iErrorCode[FD_CLOSE_BIT], err);
	h = reg(s, buf, sizeof(buf), MEM_READWRITE);
	NST_EQ(post_recv(s, buf, sizeof(buf), &ov), err);
	dereg(s, h);
}

/*
 * The connector closes its socket after its request reached the listener
 * and before the accept: the accepted connection is refused by the
 * connector's NIC.  Either the accept itself fails with WSAECONNRESET (the
 * refusal came first) or the accepted socket gets FD_CLOSE with
 * WSAECONNRESET and its receives fail: never a connection to nobody.
 */
static void test_accept_after_connector_left(void)
{
	struct pending p;
	SOCKET s;
	int err = 0;

	pending_accept(&p, next_port++, FD_CONNECT);
	close_socket(p.c);
	p.c = INVALID_SOCKET;
	s = WSPAccept(p.l, NULL, NULL, NULL, 0, &err);
	if (s == INVALID_SOCKET) {
		NST_EQ(err, WSAECONNRESET);
	} else {
		closed_with(s, p.el, WAIT_MS, WSAECONNRESET);
		close_socket(s);
	}
	pending_close(&p);
}

/*
 * Nothing from A reaches B once B has the request, so B's NIC never hears
 * the RTU: the accepted socket gets FD_CLOSE with WSAECONNABORTED after the
 * NIC's five replies, and later posts fail the same way.  The connector's
 * socket connected, and hears of the close from B's DREQ.
 */
static void test_accepted_never_confirmed(void)
{
	struct pending p;
	WSANETWORKEVENTS ne;
	uint32_t a = 0, b = 0;
	SOCKET s;
	int err = 0;

	NST_REQUIRE_EQ(fab_addr_parse(ADDR_A, &a), 0);
	NST_REQUIRE_EQ(fab_addr_parse(ADDR_B, &b), 0);
	pending_accept(&p, next_port++, FD_CONNECT | FD_CLOSE);
	NST_REQUIRE_EQ(nst_link_down(dir, a, b, true), 0);
	s = WSPAccept(p.l, NULL, NULL, NULL, 0, &err);
	NST_TRUE(s != INVALID_SOCKET);
	if (s != INVALID_SOCKET) {
		NST_TRUE(event_fires(p.ec, WAIT_MS));
		NST_EQ(events_of(p.c, p.ec, &ne), 0);
		NST_EQ(ne.lNetworkEvents, FD_CONNECT);
		NST_EQ(ne.iErrorCode[FD_CONNECT_BIT], 0);
		closed_with(s, p.el, 2000, WSAECONNABORTED);
		NST_TRUE(event_fires(p.ec, 2000));
		NST_EQ(events_of(p.c, p.ec, &ne), 0);
		NST_EQ(ne.lNetworkEvents, FD_CLOSE);
		NST_EQ(ne.iErrorCode[FD_CLOSE_BIT], 0);
		close_socket(s);
	}
	NST_EQ(nst_link_down(dir, a, b, false), 0);
	pending_close(&p);
}

/* ---- Overlapped results --------------------------------------------------------------- */

struct waiter {
	SOCKET s;
	WSAOVERLAPPED *ov;
	void *buf;
	DWORD len, bytes;
	int rc, err;
	uint64_t done_ns;
	pid_t tid; /* set by the thread just before its call */
};

/* Wait until the thread that will set *tid has done so and blocks in its
 * call: what the test does next must find it waiting. */
static void wait_until_blocked(pid_t *tid)
{
	uint64_t deadline = nst_now_ns() + (uint64_t)WAIT_MS * 1000000u;

	while (!__atomic_load_n(tid, __ATOMIC_ACQUIRE) && nst_now_ns() < deadline)
		sched_yield();
	NST_REQUIRE_GT(__atomic_load_n(tid, __ATOMIC_ACQUIRE), 0);
	NST_REQUIRE_EQ(nst_wait_blocked(*tid, WAIT_MS), 0);
}

static void *wait_main(void *arg)
{
	struct waiter *w = arg;
	DWORD flags = 0;

	__atomic_store_n(&w->tid, gettid(), __ATOMIC_RELEASE);
	w->rc = WSPGetOverlappedResult(w->s, w->ov, &w->bytes, TRUE, &flags, &w->err);
	w->done_ns = nst_now_ns();
	return NULL;
}

/* A receive without an overlapped structure: the call itself waits. */
static void *blocking_recv_main(void *arg)
{
	struct waiter *w = arg;
	WSABUF b = {.len = w->len, .buf = w->buf};
	DWORD flags = 0;

	__atomic_store_n(&w->tid, gettid(), __ATOMIC_RELEASE);
	w->rc = WSPRecv(w->s, &b, 1, &w->bytes, &flags, NULL, NULL, NULL, &w->err);
	return NULL;
}

static void test_overlapped_results(void)
{
	SOCKET a, b;
	uint8_t *buf = map(4 * PAGE);
	WSAOVERLAPPED ov, ovs, bogus = {.Internal = WSA_STATUS_PENDING};
	struct waiter w = {0};
	DWORD n = 9, flags = 9;
	int err = 0, ev = eventfd(0, EFD_NONBLOCK);
	pthread_t t;
	WSABUF wb;

	NST_REQUIRE(buf != NULL && ev >= 0);
	NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_A, &b, &a), 0);
	reg(a, buf, 2 * PAGE, MEM_READ);
	reg(b, buf + 2 * PAGE, 2 * PAGE, MEM_READWRITE);
	nst_fill(buf, 2 * PAGE, 5);

	/* Pending: fWait FALSE says WSA_IO_INCOMPLETE; the fields say in progress. */
	NST_REQUIRE_EQ(post_recv(b, buf + 2 * PAGE, PAGE, &ov), WSA_IO_PENDING);
	NST_EQ(WSPGetOverlappedResult(b, &ov, &n, FALSE, &flags, &err), FALSE);
	NST_EQ(err, WSA_IO_INCOMPLETE);
	NST_EQ_U(ov.Internal, WSA_STATUS_PENDING);
	/* Bad arguments, and a pending structure that is no operation of b. */
	NST_EQ(WSPGetOverlappedResult(b, NULL, &n, FALSE, &flags, &err), FALSE);
	NST_EQ(err, WSAEFAULT);
	NST_EQ(WSPGetOverlappedResult(b, &ov, NULL, FALSE, &flags, &err), FALSE);
	NST_EQ(err, WSAEFAULT);
	NST_EQ(WSPGetOverlappedResult(b, &ov, &n, FALSE, NULL, &err), FALSE);
	NST_EQ(err, WSAEFAULT);
	NST_EQ(WSPGetOverlappedResult(b, &bogus, &n, TRUE, &flags, &err), FALSE);
	NST_EQ(err, WSAEINVAL);
	NST_EQ(WSPGetOverlappedResult(a, &ov, &n, TRUE, &flags, &err), FALSE);
	NST_EQ(err, WSAEINVAL);
	NST_EQ(WSPGetOverlappedResult((SOCKET)7, &ov, &n, TRUE, &flags, &err), FALSE);
	NST_EQ(err, WSAENOTSOCK);

	/* fWait TRUE in another thread wakes when the message lands. */
	w.s = b;
	w.ov = &ov;
	pthread_create(&t, NULL, wait_main, &w);
	wait_until_blocked(&w.tid);
	NST_REQUIRE_EQ(post_send(a, buf, 100, &ovs), WSA_IO_PENDING);
	pthread_join(t, NULL);
	NST_EQ(w.rc, TRUE);
	NST_EQ(w.bytes, 100);
	NST_EQ_U(ov.Internal, 0);
	NST_EQ_U(ov.InternalHigh, 100);
	NST_EQ(ov.OffsetHigh, 0);
	NST_EQ(ov.Offset, 0);
	NST_EQ(ov_wait(a, &ovs, &n), 0);
	NST_EQ(n, 100);
	NST_EQ_U(nst_sum32(buf + 2 * PAGE, 100), nst_sum32(buf, 100));

	/* hEvent: signalled at completion without anyone calling the provider. */
	memset(&ov, 0, sizeof(ov));
	ov.hEvent = ev;
	wb.len = PAGE;
	wb.buf = (char *)buf + 2 * PAGE;
	flags = 0;
	NST_EQ(WSPRecv(b, &wb, 1, &n, &flags, &ov, NULL, NULL, &err), SOCKET_ERROR);
	NST_EQ(err, WSA_IO_PENDING);
	NST_TRUE(!event_fires(ev, 0));
	NST_REQUIRE_EQ(post_send(a, buf + 7, 33, &ovs), WSA_IO_PENDING);
	NST_TRUE(event_fires(ev, WAIT_MS));
	NST_EQ_U(__atomic_load_n(&ov.Internal, __ATOMIC_ACQUIRE), 0);
	NST_EQ_U(ov.InternalHigh, 33);
	NST_EQ(ov_wait(b, &ov, &n), 0);
	NST_EQ(ov_wait(a, &ovs, &n), 0);

	/* Without an overlapped structure: the call waits and gives the count. */
	w.s = b;
	w.buf = buf + 2 * PAGE;
	w.len = PAGE;
	w.tid = 0;
	pthread_create(&t, NULL, blocking_recv_main, &w);
	wait_until_blocked(&w.tid);
	wb.len = 77;
	wb.buf = (char *)buf;
	NST_EQ(WSPSend(a, &wb, 1, &n, 0, NULL, NULL, NULL, &err), 0);
	NST_EQ(n, 77);
	pthread_join(t, NULL);
	NST_EQ(w.rc, 0);
	NST_EQ(w.bytes, 77);

	close_socket(a);
	close_socket(b);
	close(ev);
	munmap(buf, 4 * PAGE);
}

/* ---- Bad input ----------------------------------------------------------------------- */

static void WSPAPI routine(DWORD e, DWORD n, LPWSAOVERLAPPED ov, DWORD f)
{
	(void)e;
	(void)n;
	(void)ov;
	(void)f;
}

static int send_bufs(SOCKET s, WSABUF *b, DWORD count, DWORD flags,
		     LPWSAOVERLAPPED_COMPLETION_ROUTINE r)
{
	WSAOVERLAPPED ov = {0};
	DWORD n;
	int err = 0;

	if (WSPSend(s, b, count, &n, flags, &ov, r, NULL, &err) == 0)
		return 0;
	if (err == WSA_IO_PENDING)
		ov_wait(s, &ov, NULL); /* not expected: do not leave it pending */
	return err;
}

static int recv_bufs(SOCKET s, WSABUF *b, DWORD count, DWORD *flags)
{
	/* Never expected to start: static, so that one that does is not left
	 * pointing at a dead stack frame. */
	static WSAOVERLAPPED ov;
	DWORD n;
	int err = 0;

	if (WSPRecv(s, b, count, &n, flags, &ov, NULL, NULL, &err) == 0)
		return 0;
	return err;
}

static void test_bad_input_send_recv(void)
{
	uint8_t *m = map(8 * PAGE);
	SOCKET a, b, u, bound = sock_on(ADDR_A, 0), l = sock_on(ADDR_A, next_port++);
	WSABUF bufs[5], one = {.len = 10, .buf = (char *)m};
	WSAOVERLAPPED ov, ovs;
	DWORD flags = 0, n = 0;
	int err = 0;

	NST_REQUIRE(m != NULL);
	/* Not connected: unbound, bound, listening. */
	u = WSPSocket(AF_INET, SOCK_STREAM, 0, NULL, 0, 0, &err);
	NST_EQ(send_bufs(u, &one, 1, 0, NULL), WSAENOTCONN);
	NST_EQ(recv_bufs(u, &one, 1, &flags), WSAENOTCONN);
	reg(bound, m, PAGE, MEM_READWRITE);
	NST_EQ(send_bufs(bound, &one, 1, 0, NULL), WSAENOTCONN);
	NST_EQ(recv_bufs(bound, &one, 1, &flags), WSAENOTCONN);
	NST_EQ(WSPListen(l, 1, &err), 0);
	reg(l, m, PAGE, MEM_READWRITE);
	NST_EQ(send_bufs(l, &one, 1, 0, NULL), WSAENOTCONN);
	NST_EQ(send_bufs((SOCKET)99, &one, 1, 0, NULL), WSAENOTSOCK);
	close_socket(u);
	close_socket(bound);
	close_socket(l);

	NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_A, &b, &a), 0);
	reg(a, m, 2 * PAGE, MEM_READ);                 /* pages 0-1: a's send source */
	reg(a, m + 2 * PAGE, PAGE, MEM_READWRITE);     /* page 2: a's receive buffer */
	reg(b, m + 4 * PAGE, 2 * PAGE, MEM_READWRITE); /* pages 4-5: b's only */
	for (int i = 0; i < 5; i++) {
		bufs[i].len = 8;
		bufs[i].buf = (char *)m + 8 * i;
	}
	NST_EQ(send_bufs(a, NULL, 1, 0, NULL), WSAEFAULT);
	NST_EQ(send_bufs(a, bufs, 0, 0, NULL), WSAEINVAL);
	NST_EQ(send_bufs(a, bufs, 5, 0, NULL), WSAEINVAL);
	NST_EQ(send_bufs(a, bufs, 1, 1 /* MSG_OOB */, NULL), WSAEOPNOTSUPP);
	NST_EQ(send_bufs(a, bufs, 1, 0, routine), WSAEOPNOTSUPP);
	/* Not inside a registration of this socket: unregistered, across the
	 * end, another socket's (R3), NULL. */
	one.buf = (char *)m + 7 * PAGE;
	NST_EQ(send_bufs(a, &one, 1, 0, NULL), WSAEFAULT);
	one.buf = (char *)m + 2 * PAGE - 5;
	NST_EQ(send_bufs(a, &one, 1, 0, NULL), WSAEFAULT); /* across two registrations */
	one.buf = (char *)m + 4 * PAGE;
	NST_EQ(send_bufs(a, &one, 1, 0, NULL), WSAEFAULT);
	one.buf = NULL;
	NST_EQ(send_bufs(a, &one, 1, 0, NULL), WSAEFAULT);
	/* Receives: flags, and a buffer the NIC may not write. */
	NST_EQ(recv_bufs(a, bufs, 1, NULL), WSAEFAULT);
	flags = 2; /* MSG_PEEK */
	NST_EQ(recv_bufs(a, bufs, 1, &flags), WSAEOPNOTSUPP);
	flags = 0;
	NST_EQ(recv_bufs(a, bufs, 1, &flags), WSAEFAULT); /* MEM_READ: not for receiving */

	/* Nothing was posted: the next message is exactly the next send. */
	NST_REQUIRE_EQ(post_recv(b, m + 4 * PAGE, PAGE, &ov), WSA_IO_PENDING);
	bufs[0].len = 3;
	bufs[1].len = 0; /* skipped */
	bufs[2].len = 5;
	memset(&ovs, 0, sizeof(ovs));
	NST_EQ(WSPSend(a, bufs, 3, &n, 0, &ovs, NULL, NULL, &err), SOCKET_ERROR);
	NST_EQ(err, WSA_IO_PENDING);
	NST_EQ(ov_wait(a, &ovs, &n), 0);
	NST_EQ(n, 8);
	NST_EQ(ov_wait(b, &ov, &n), 0);
	NST_EQ(n, 8);
	NST_EQ(memcmp(m + 4 * PAGE, m, 3), 0);
	NST_EQ(memcmp(m + 4 * PAGE + 3, m + 16, 5), 0);
	close_socket(a);
	close_socket(b);
	munmap(m, 8 * PAGE);
}

static int rdma_call(SOCKET s, bool write, WSABUFEX *b, DWORD count, const void *d, DWORD dlen,
		     DWORD off)
{
	WSAOVERLAPPED ov = {0};
	DWORD n;
	int err = 0, rc;

	if (write)
		rc = WSPRdmaWrite(s, b, count, (void *)d, dlen, off, &n, 0, &ov, NULL, NULL, &err);
	else
		rc = WSPRdmaRead(s, b, count, (void *)d, dlen, off, &n, 0, &ov, NULL, NULL, &err);
	if (rc == 0)
		return 0;
	if (err == WSA_IO_PENDING)
		ov_wait(s, &ov, NULL);
	return err;
}

static void test_bad_input_rdma(void)
{
	uint8_t *m = map(16 * PAGE);
	SOCKET a, b, bound = sock_on(ADDR_A, 0);
	struct nicsim_rdma_desc dw, dr, own, d;
	HANDLE hr, hw, hb;
	WSABUFEX x = {.len = 64, .buf = (char *)m};
	int err = 0;

	NST_REQUIRE(m != NULL);
	/* Not connected. */
	hr = reg(bound, m, PAGE, MEM_READ);
	NST_REQUIRE_EQ(expose(bound, m + 8 * PAGE, PAGE, MEM_WRITE, &dw), 0);
	x.handle = hr;
	NST_EQ(rdma_call(bound, true, &x, 1, &dw, sizeof(dw), 0), WSAENOTCONN);
	close_socket(bound);

	NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_A, &b, &a), 0);
	hr = reg(a, m, 2 * PAGE, MEM_READ);
	hw = reg(a, m + 2 * PAGE, 2 * PAGE, MEM_READWRITE);
	hb = reg(b, m + 4 * PAGE, PAGE, MEM_READWRITE);
	NST_REQUIRE_EQ(expose(b, m + 8 * PAGE, 2 * PAGE, MEM_WRITE, &dw), 0);
	NST_REQUIRE_EQ(expose(b, m + 10 * PAGE, 2 * PAGE, MEM_READ, &dr), 0);
	NST_REQUIRE_EQ(expose(a, m + 12 * PAGE, PAGE, MEM_READWRITE, &own), 0);
	x.handle = hr;
	NST_EQ(rdma_call(a, true, NULL, 1, &dw, sizeof(dw), 0), WSAEFAULT);
	NST_EQ(rdma_call(a, true, &x, 0, &dw, sizeof(dw), 0), WSAEINVAL);
	NST_EQ(rdma_call(a, true, &x, 5, &dw, sizeof(dw), 0), WSAEINVAL);
	/* Handles: NULL, forged, another socket's (R3). */
	x.handle = NULL;
	NST_EQ(rdma_call(a, true, &x, 1, &dw, sizeof(dw), 0), WSAEINVAL);
	x.handle = (HANDLE)((uintptr_t)hr ^ 0x1000000);
	NST_EQ(rdma_call(a, true, &x, 1, &dw, sizeof(dw), 0), WSAEINVAL);
	x.handle = hb;
	x.buf = (char *)m + 4 * PAGE;
	NST_EQ(rdma_call(a, true, &x, 1, &dw, sizeof(dw), 0), WSAEINVAL);
	/* Buffers outside the handle's registration, or a read-only sink. */
	x.handle = hr;
	x.buf = (char *)m + 2 * PAGE - 10;
	NST_EQ(rdma_call(a, true, &x, 1, &dw, sizeof(dw), 0), WSAEFAULT);
	x.buf = (char *)m;
	NST_EQ(rdma_call(a, false, &x, 1, &dr, sizeof(dr), 0), WSAEFAULT);
	/* Descriptors: NULL, short, not a descriptor, this side's own (not the
	 * peer's NIC), without the access asked for, past the target's end. */
	NST_EQ(rdma_call(a, true, &x, 1, NULL, sizeof(dw), 0), WSAEFAULT);
	NST_EQ(rdma_call(a, true, &x, 1, &dw, sizeof(dw) - 1, 0), WSAEINVAL);
	d = dw;
	d.magic ^= 1;
	NST_EQ(rdma_call(a, true, &x, 1, &d, sizeof(d), 0), WSAEINVAL);
	NST_EQ(rdma_call(a, true, &x, 1, &own, sizeof(own), 0), WSAEINVAL);
	NST_EQ(rdma_call(a, true, &x, 1, &dr, sizeof(dr), 0), WSAEINVAL);
	x.handle = hw;
	x.buf = (char *)m + 2 * PAGE;
	NST_EQ(rdma_call(a, false, &x, 1, &dw, sizeof(dw), 0), WSAEINVAL);
	x.handle = hr;
	x.buf = (char *)m;
	NST_EQ(rdma_call(a, true, &x, 1, &dw, sizeof(dw), 2 * PAGE - 63), WSAEFAULT);
	NST_EQ(rdma_call(a, true, &x, 1, &dw, sizeof(dw), 3 * PAGE), WSAEFAULT);
	NST_EQ(rdma_call(a, true, &x, 1, &dw, sizeof(dw), 0), WSA_IO_PENDING);
	/* The connection still works: nothing bad reached the NIC. */
	NST_EQ(rdma_call(a, true, &x, 1, &dw, sizeof(dw), 2 * PAGE - 64), WSA_IO_PENDING);
	unexpose(b, &dw);
	unexpose(b, &dr);
	unexpose(a, &own);
	close_socket(a);
	close_socket(b);
	(void)err;
	munmap(m, 16 * PAGE);
}

/* ---- Descriptors the NIC refuses (R4-R6 through the SPI) --------------------------------- */

/*
 * a RDMA-writes (or reads) through descriptor d with 64 bytes: the NIC
 * refuses, the operation completes with WSAECONNRESET, the connection is
 * broken for later posts, and the target memory is unchanged.
 */
static void refused(SOCKET a, HANDLE h, uint8_t *src, const struct nicsim_rdma_desc *d, bool write,
		    const uint8_t *target, size_t target_len)
{
	uint32_t before = nst_sum32(target, target_len);
	WSAOVERLAPPED ov;
	DWORD n;

	NST_REQUIRE_EQ(post_rdma(a, write, src, 64, h, d, 0, &ov), WSA_IO_PENDING);
	NST_EQ(ov_wait(a, &ov, &n), WSAECONNRESET);
	NST_EQ(post_rdma(a, write, src, 64, h, d, 0, &ov), WSAECONNRESET);
	NST_EQ(post_send(a, src, 1, &ov), WSAECONNRESET);
	NST_EQ_U(nst_sum32(target, target_len), before);
}

static void test_descriptors_refused_by_nic(void)
{
	uint8_t *m = map(16 * PAGE), *src = m, *t1 = m + 4 * PAGE, *t2 = m + 8 * PAGE;
	struct nicsim_rdma_desc d, d2, pre;
	SOCKET a, b, a2, b2, c, s, l;
	HANDLE h;
	int err = 0;

	NST_REQUIRE(m != NULL);
	nst_fill(m, 16 * PAGE, 77);

	/* Another connection's descriptor, from the same peer NIC (R4). */
	NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_A, &b, &a), 0);
	NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_A, &b2, &a2), 0);
	NST_REQUIRE_EQ(expose(b2, t2, PAGE, MEM_READWRITE, &d2), 0);
	h = reg(a, src, PAGE, MEM_READWRITE);
	refused(a, h, src, &d2, true, t2, PAGE);
	close_socket(a);
	close_socket(b);
	/* That connection still works with its own descriptor. */
	h = reg(a2, src, PAGE, MEM_READWRITE);
	{
		WSAOVERLAPPED ov;

		NST_REQUIRE_EQ(post_rdma(a2, true, src, 64, h, &d2, 0, &ov), WSA_IO_PENDING);
		NST_EQ(ov_wait(a2, &ov, NULL), 0);
		NST_EQ(memcmp(t2, src, 64), 0);
	}
	unexpose(b2, &d2);
	close_socket(a2);
	close_socket(b2);

	/* Forged key, stale key, read through a write-only window, past the end. */
	for (int k = 0; k < 4; k++) {
		NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_A, &b, &a), 0);
		NST_REQUIRE_EQ(expose(b, t1, PAGE, MEM_WRITE, &d), 0);
		h = reg(a, src, PAGE, MEM_READWRITE);
		if (k == 0) {
			d.rkey ^= 0x100;
		} else if (k == 1) {
			unexpose(b, &d);
		} else if (k == 2) {
			d.access = MEM_READWRITE; /* claims more than the window grants (R6) */
		} else {
			d.len = 4 * PAGE; /* claims more than the window covers */
			d.va -= 0;
		}
		if (k == 3) {
			WSAOVERLAPPED ov;
			uint32_t before = nst_sum32(t1 + PAGE, PAGE);

			NST_REQUIRE_EQ(post_rdma(a, true, src, 64, h, &d, PAGE, &ov),
				       WSA_IO_PENDING);
			NST_EQ(ov_wait(a, &ov, NULL), WSAECONNRESET);
			NST_EQ_U(nst_sum32(t1 + PAGE, PAGE), before);
		} else {
			refused(a, h, src, &d, k != 2, t1, PAGE);
		}
		close_socket(a);
		close_socket(b);
	}

	/* A descriptor obtained before connecting is not valid on the connection. */
	l = sock_on(ADDR_A, next_port);
	NST_EQ(WSPListen(l, 1, &err), 0);
	c = sock_on(ADDR_B, 0);
	NST_REQUIRE_EQ(expose(c, t1, PAGE, MEM_WRITE, &pre), 0);
	{
		struct acceptor acc = {.l = l};
		pthread_t t;

		pthread_create(&t, NULL, accept_main, &acc);
		NST_EQ(try_connect(c, ADDR_A, next_port++), 0);
		pthread_join(t, NULL);
		s = acc.s;
	}
	NST_REQUIRE(s != INVALID_SOCKET);
	/* Registering again on the connected socket gives the valid descriptor. */
	NST_REQUIRE_EQ(expose(c, t1, PAGE, MEM_WRITE, &d), 0);
	NST_NE(d.rkey, pre.rkey);
	h = reg(s, src, PAGE, MEM_READWRITE);
	{
		WSAOVERLAPPED ov;

		NST_REQUIRE_EQ(post_rdma(s, true, src + 100, 64, h, &d, 8, &ov), WSA_IO_PENDING);
		NST_EQ(ov_wait(s, &ov, NULL), 0);
		NST_EQ(memcmp(t1 + 8, src + 100, 64), 0);
	}
	refused(s, h, src, &pre, true, t1 + 64, PAGE - 64);
	close_socket(s);
	close_socket(c);
	close_socket(l);
	munmap(m, 16 * PAGE);
}

/* ---- Deregistration, close, slots ------------------------------------------------------- */

static void test_r1_dereg_refused_while_in_flight(void)
{
	uint8_t *m = map(4 * PAGE);
	SOCKET a, b;
	WSAOVERLAPPED ov, ovs;
	HANDLE h, h2;
	int err = 0;

	NST_REQUIRE(m != NULL);
	NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_A, &b, &a), 0);
	h = reg(a, m, PAGE, MEM_READWRITE);
	h2 = reg(a, m, PAGE, MEM_READWRITE); /* a second instance: same handle (R2) */
	NST_TRUE(h == h2);
	reg(b, m + 2 * PAGE, PAGE, MEM_READ);
	NST_REQUIRE_EQ(post_recv(a, m, PAGE, &ov), WSA_IO_PENDING);
	/* The socket's other instance may go; its last one may not (R1). */
	NST_EQ(WSPDeregisterMemory(a, h, &err), 0);
	NST_EQ(WSPDeregisterMemory(a, h, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEINVAL);
	/* Nothing changed: the receive still lands, then the release works. */
	NST_REQUIRE_EQ(post_send(b, m + 2 * PAGE, 10, &ovs), WSA_IO_PENDING);
	NST_EQ(ov_wait(a, &ov, NULL), 0);
	NST_EQ(ov_wait(b, &ovs, NULL), 0);
	NST_EQ(WSPDeregisterMemory(a, h, &err), 0);
	close_socket(a);
	close_socket(b);
	munmap(m, 4 * PAGE);
}

struct accept_waiter {
	SOCKET l;
	int err;
	SOCKET s;
	pid_t tid; /* set by the thread just before its call */
};

static void *blocked_accept_main(void *arg)
{
	struct accept_waiter *w = arg;

	__atomic_store_n(&w->tid, gettid(), __ATOMIC_RELEASE);
	w->s = WSPAccept(w->l, NULL, NULL, NULL, 0, &w->err);
	return NULL;
}

static void test_close_with_operations_in_flight(void)
{
	uint8_t *m = map(8 * PAGE);
	SOCKET a, b, l = sock_on(ADDR_A, next_port++);
	WSAOVERLAPPED ova[3], ovb[2], ov;
	struct nicsim_rdma_desc d;
	struct accept_waiter aw = {.l = l};
	struct waiter w = {0};
	pthread_t t, t2;
	uint64_t t0;
	int err = 0;

	NST_REQUIRE(m != NULL);
	NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_A, &b, &a), 0);
	reg(a, m, 4 * PAGE, MEM_READWRITE);
	reg(b, m + 4 * PAGE, 4 * PAGE, MEM_READWRITE);
	NST_REQUIRE_EQ(expose(a, m + 3 * PAGE, PAGE, MEM_READWRITE, &d), 0);
	for (int i = 0; i < 3; i++)
		NST_REQUIRE_EQ(post_recv(a, m + (size_t)i * PAGE, PAGE, &ova[i]), WSA_IO_PENDING);
	for (int i = 0; i < 2; i++)
		NST_REQUIRE_EQ(post_recv(b, m + (size_t)(4 + i) * PAGE, PAGE, &ovb[i]),
			       WSA_IO_PENDING);
	/* Blocked threads: one on a's first receive, one in accept. */
	w.s = a;
	w.ov = &ova[0];
	pthread_create(&t, NULL, wait_main, &w);
	NST_EQ(WSPListen(l, 1, &err), 0);
	pthread_create(&t2, NULL, blocked_accept_main, &aw);
	wait_until_blocked(&w.tid);
	wait_until_blocked(&aw.tid);

	t0 = nst_now_ns();
	close_socket(a);
	close_socket(l);
	/* a's operations completed at once, aborted; blocked calls returned. */
	for (int i = 0; i < 3; i++) {
		NST_EQ_U(ova[i].Internal, 0);
		NST_EQ(ova[i].OffsetHigh, WSA_OPERATION_ABORTED);
	}
	pthread_join(t, NULL);
	NST_EQ(w.rc, FALSE);
	NST_EQ(w.err, WSA_OPERATION_ABORTED);
	pthread_join(t2, NULL);
	NST_TRUE(aw.s == INVALID_SOCKET);
	NST_EQ(aw.err, WSAEINTR);
	/* The peer: its receives are flushed, later posts fail at once. */
	for (int i = 0; i < 2; i++)
		NST_EQ(ov_wait(b, &ovb[i], NULL), WSA_OPERATION_ABORTED);
	printf("\n    peer's receives flushed %.0f us after the close ",
	       (double)(nst_now_ns() - t0) / 1e3);
	NST_EQ(post_send(b, m + 4 * PAGE, 8, &ov), WSAECONNRESET);
	close_socket(b);
	munmap(m, 8 * PAGE);
	/* teardown: a's registrations and its exposure are gone from the NIC (R11). */
}

static void test_33rd_connection_has_no_slot(void)
{
	SOCKET cli[NIC_QP_SLOTS + 1], srv[NIC_QP_SLOTS + 1];
	uint16_t port = next_port++;
	SOCKET l = sock_on(ADDR_B, port), extra;
	struct acceptor acc = {.l = l};
	pthread_t t;
	int err = 0;

	NST_EQ(WSPListen(l, 8, &err), 0);
	for (uint32_t i = 0; i < NIC_QP_SLOTS; i++) {
		cli[i] = sock_on(ADDR_A, 0);
		pthread_create(&t, NULL, accept_main, &acc);
		NST_REQUIRE_EQ(try_connect(cli[i], ADDR_B, port), 0);
		pthread_join(t, NULL);
		NST_REQUIRE(acc.s != INVALID_SOCKET);
		srv[i] = acc.s;
	}
	extra = sock_on(ADDR_A, 0);
	NST_EQ(try_connect(extra, ADDR_B, port), WSAENOBUFS);
	/* A slot freed is a slot to use again. */
	close_socket(cli[5]);
	close_socket(srv[5]);
	pthread_create(&t, NULL, accept_main, &acc);
	NST_EQ(try_connect(extra, ADDR_B, port), 0);
	pthread_join(t, NULL);
	NST_TRUE(acc.s != INVALID_SOCKET);
	close_socket(acc.s);
	close_socket(extra);
	for (uint32_t i = 0; i < NIC_QP_SLOTS; i++) {
		if (i == 5)
			continue;
		close_socket(cli[i]);
		close_socket(srv[i]);
	}
	close_socket(l);
}

/* ---- Options, addresses, a NIC without windows or RDMA read ------------------------------ */

static DWORD getopt_dword(SOCKET s, int level, int name, int *err)
{
	DWORD v = 0;
	int len = sizeof(v);

	*err = 0;
	if (WSPGetSockOpt(s, level, name, (char *)&v, &len, err))
		return 0;
	NST_EQ(len, sizeof(v));
	return v;
}

static void test_socket_options(void)
{
	SOCKET a = sock_on(ADDR_A, 0), c = sock_on(ADDR_C, 0);
	SOCKET u = WSPSocket(AF_INET, SOCK_STREAM, 0, NULL, 0, 0, NULL);
	DWORD v = 4096;
	int err = 0, len = 2;

	NST_EQ(getopt_dword(a, SOL_SOCKET, SO_MAX_RDMA_SIZE, &err), 1u << 30);
	NST_EQ(getopt_dword(a, WSA_SOL_SOCKET, SO_MAX_RDMA_SIZE, &err), 1u << 30);
	NST_EQ(getopt_dword(c, SOL_SOCKET, SO_MAX_RDMA_SIZE, &err), 1u << 20);
	NST_EQ(getopt_dword(u, SOL_SOCKET, SO_MAX_RDMA_SIZE, &err), 1u << 30);
	NST_EQ(getopt_dword(a, SOL_SOCKET, SO_RDMA_THRESHOLD_SIZE, &err), 64u << 10);
	NST_EQ(WSPSetSockOpt(a, SOL_SOCKET, SO_RDMA_THRESHOLD_SIZE, (char *)&v, sizeof(v), &err),
	       0);
	NST_EQ(getopt_dword(a, SOL_SOCKET, SO_RDMA_THRESHOLD_SIZE, &err), 4096);
	/* Read-only, unknown, wrong level, too short, NULL. */
	NST_EQ(WSPSetSockOpt(a, SOL_SOCKET, SO_MAX_RDMA_SIZE, (char *)&v, sizeof(v), &err),
	       SOCKET_ERROR);
	NST_EQ(err, WSAENOPROTOOPT);
	getopt_dword(a, SOL_SOCKET, 0x1234, &err);
	NST_EQ(err, WSAENOPROTOOPT);
	getopt_dword(a, IPPROTO_TCP, SO_MAX_RDMA_SIZE, &err);
	NST_EQ(err, WSAEINVAL);
	NST_EQ(WSPGetSockOpt(a, SOL_SOCKET, SO_MAX_RDMA_SIZE, (char *)&v, &len, &err),
	       SOCKET_ERROR);
	NST_EQ(err, WSAEFAULT);
	NST_EQ(WSPSetSockOpt(a, SOL_SOCKET, SO_RDMA_THRESHOLD_SIZE, NULL, 4, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEFAULT);
	getopt_dword((SOCKET)3, SOL_SOCKET, SO_MAX_RDMA_SIZE, &err);
	NST_EQ(err, WSAENOTSOCK);
	close_socket(a);
	close_socket(c);
	close_socket(u);
}

static void test_address_list(void)
{
	SOCKET u = WSPSocket(AF_INET, SOCK_STREAM, 0, NULL, 0, 0, NULL);
	union {
		SOCKET_ADDRESS_LIST list;
		char bytes[1024];
	} out;
	static const char *const want[] = {ADDR_A, ADDR_B, ADDR_C, ADDR_D};
	DWORD ret = 0, need;
	int err = 0;

	NST_EQ(WSPIoctl(u, SIO_ADDRESS_LIST_QUERY, NULL, 0, &out, 8, &ret, NULL, NULL, NULL, &err),
	       SOCKET_ERROR);
	NST_EQ(err, WSAEFAULT);
	need = ret;
	NST_TRUE(need > 8 && need < sizeof(out));
	NST_EQ(WSPIoctl(u, SIO_ADDRESS_LIST_QUERY, NULL, 0, &out, sizeof(out), &ret, NULL, NULL,
			NULL, &err),
	       0);
	NST_EQ(ret, need);
	NST_REQUIRE_EQ(out.list.iAddressCount, 4);
	for (int i = 0; i < 4; i++) {
		const SOCKET_ADDRESS *sa =
		    &((const SOCKET_ADDRESS *)((const char *)&out +
					       offsetof(SOCKET_ADDRESS_LIST, Address)))[i];
		struct sockaddr_in sin;

		NST_EQ(sa->iSockaddrLength, sizeof(struct sockaddr_in));
		NST_TRUE((const char *)sa->lpSockaddr >= out.bytes &&
			 (const char *)sa->lpSockaddr + sizeof(sin) <= out.bytes + ret);
		memcpy(&sin, sa->lpSockaddr, sizeof(sin));
		NST_EQ(sin.sin_family, AF_INET);
		NST_EQ(sin.sin_addr.s_addr, addr_of(want[i], 0).sin_addr.s_addr);
	}
	close_socket(u);
}

static void test_nic_without_windows_or_rdma_read(void)
{
	uint8_t *m = map(2u << 20);
	SOCKET a, c, lone = sock_on(ADDR_C, 0);
	struct nicsim_rdma_desc d;
	WSAOVERLAPPED ov;
	WSABUF two[2];
	HANDLE h, h1, h2;
	GUID rd = WSAID_RDMAREAD;
	void *fn = NULL;
	DWORD n;
	int err = 0;

	NST_REQUIRE(m != NULL);
	/* RDMA read refused at the call and at the extension lookup. */
	h = reg(lone, m, PAGE, MEM_READWRITE);
	NST_EQ(WSPIoctl(lone, SIO_GET_EXTENSION_FUNCTION_POINTER, &rd, sizeof(rd), &fn, sizeof(fn),
			&n, NULL, NULL, NULL, &err),
	       SOCKET_ERROR);
	NST_EQ(err, WSAEOPNOTSUPP);
	NST_REQUIRE_EQ(expose(lone, m + PAGE, PAGE, MEM_READ, &d), 0);
	NST_EQ(post_rdma(lone, false, m, 64, h, &d, 0, &ov), WSAEOPNOTSUPP);
	/* Longer than SO_MAX_RDMA_SIZE (1 MiB here): refused before anything else. */
	h1 = reg(lone, m, 1u << 20, MEM_READWRITE);
	h2 = reg(lone, m + (1u << 20), 1u << 20, MEM_READWRITE);
	(void)h1;
	(void)h2;
	two[0].len = 1u << 20;
	two[0].buf = (char *)m;
	two[1].len = 1;
	two[1].buf = (char *)m + (1u << 20);
	NST_EQ(send_bufs(lone, two, 2, 0, NULL), WSAEMSGSIZE);
	close_socket(lone);

	/* RDMA write into C's exposure works; the key is the region's own. */
	NST_REQUIRE_EQ(connect_pair(ADDR_C, ADDR_A, &c, &a), 0);
	nst_fill(m, PAGE, 3);
	memset(m + PAGE, 0, PAGE);
	NST_REQUIRE_EQ(expose(c, m + PAGE, PAGE, MEM_WRITE, &d), 0);
	h = reg(a, m, PAGE, MEM_READ);
	NST_REQUIRE_EQ(post_rdma(a, true, m + 5, 100, h, &d, 9, &ov), WSA_IO_PENDING);
	NST_EQ(ov_wait(a, &ov, &n), 0);
	NST_EQ(memcmp(m + PAGE + 9, m + 5, 100), 0);
	unexpose(c, &d);
	close_socket(a);
	close_socket(c);
	munmap(m, 2u << 20);
}

/* ---- Failures: a peer killed, a NIC killed -------------------------------------------- */

static void test_peer_killed_mid_transfer(void)
{
	struct peer pr;
	uint8_t *src = map(BIG), *ctl;
	struct ctl m = {.op = CTL_EXPOSE, .len = BIG, .flags = MEM_READWRITE}, r;
	struct nicsim_rdma_desc d;
	WSAOVERLAPPED ov[4], ovr;
	HANDLE h;
	uint64_t killed = 0, failed = 0;
	int first_err = 0;

	NST_REQUIRE(src != NULL);
	NST_REQUIRE(peer_open(&pr, ADDR_B, ADDR_A));
	h = reg(pr.s, src, BIG, MEM_READ);
	NST_REQUIRE_EQ(peer_call(&pr, &m, &r), 0);
	NST_REQUIRE_EQ(r.err, 0);
	d = r.desc;
	ctl = map(PAGE);
	reg(pr.s, ctl, PAGE, MEM_READWRITE);
	NST_REQUIRE_EQ(post_recv(pr.s, ctl, PAGE, &ovr), WSA_IO_PENDING);
	/* Keep 64 MiB writes flowing; kill the child once the first one is done. */
	for (int i = 0; i < 4; i++)
		NST_REQUIRE_EQ(post_rdma(pr.s, true, src, BIG, h, &d, 0, &ov[i]), WSA_IO_PENDING);
	NST_REQUIRE_EQ(ov_wait(pr.s, &ov[0], NULL), 0);
	NST_EQ(kill(pr.pid, SIGKILL), 0);
	killed = nst_now_ns();
	/* The peer's NIC ends the connection when its host goes: a generous
	 * deadline bounds only a hang. */
	for (int i = 1; nst_now_ns() - killed < PEER_GONE_NS; i = (i + 1) % 4) {
		int e = ov_wait(pr.s, &ov[i], NULL);

		if (!e)
			e = post_rdma(pr.s, true, src, BIG, h, &d, 0, &ov[i]);
		if (e && e != WSA_IO_PENDING) {
			first_err = e;
			failed = nst_now_ns();
			break;
		}
	}
	NST_TRUE(first_err == WSA_OPERATION_ABORTED || first_err == WSAECONNRESET ||
		 first_err == WSAECONNABORTED);
	NST_TRUE(failed != 0);
	printf("\n    peer killed: %s after %.1f ms ", prov_wsa_name(first_err),
	       (double)(failed - killed) / 1e6);
	/* Everything in flight ends; later posts fail at once. */
	NST_TRUE(ov_wait(pr.s, &ovr, NULL) != 0);
	for (int i = 0; i < 4; i++)
		ov_wait(pr.s, &ov[i], NULL);
	NST_TRUE(post_send(pr.s, ctl, 1, &ovr) != WSA_IO_PENDING);
	peer_close(&pr, false);
	munmap(src, BIG);
	munmap(ctl, PAGE);
}

static void test_nic_killed_gives_enetdown(void)
{
	uint8_t *m = map(4 * PAGE);
	SOCKET d, b;
	WSAOVERLAPPED ov1, ov2, ov3, ovb;
	struct waiter w = {0};
	int ev = eventfd(0, EFD_NONBLOCK), err = 0;
	pthread_t t;
	uint64_t t0, polled = 0;
	DWORD n, flags;
	WSABUF wb;

	NST_REQUIRE(m != NULL && ev >= 0 && nic_d > 0);
	NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_D, &b, &d), 0);
	reg(d, m, 2 * PAGE, MEM_READWRITE);
	reg(b, m + 2 * PAGE, 2 * PAGE, MEM_READWRITE);
	NST_REQUIRE_EQ(post_recv(d, m, 100, &ov1), WSA_IO_PENDING);
	NST_REQUIRE_EQ(post_recv(d, m + 100, 100, &ov2), WSA_IO_PENDING);
	memset(&ov3, 0, sizeof(ov3));
	ov3.hEvent = ev;
	wb.len = 100;
	wb.buf = (char *)m + 200;
	flags = 0;
	NST_EQ(WSPRecv(d, &wb, 1, &n, &flags, &ov3, NULL, NULL, &err), SOCKET_ERROR);
	NST_EQ(err, WSA_IO_PENDING);
	w.s = d;
	w.ov = &ov1;
	pthread_create(&t, NULL, wait_main, &w);
	wait_until_blocked(&w.tid);

	/* The host learns of the NIC's death from its socket: an event, so
	 * the deadlines are generous and only bound a hang. */
	t0 = nst_now_ns();
	NST_EQ(kill(nic_d, SIGKILL), 0);
	/* A thread blocked with fWait TRUE, a poller with fWait FALSE, an event. */
	while (nst_now_ns() - t0 < (uint64_t)WAIT_MS * 1000000u) {
		if (!WSPGetOverlappedResult(d, &ov2, &n, FALSE, &flags, &err) &&
		    err == WSA_IO_INCOMPLETE) {
			usleep(1000); /* the poller's own pace: what is tested */
			continue;
		}
		polled = nst_now_ns();
		break;
	}
	NST_EQ(err, WSAENETDOWN);
	NST_TRUE(event_fires(ev, WAIT_MS));
	NST_EQ(ov3.OffsetHigh, WSAENETDOWN);
	pthread_join(t, NULL);
	NST_EQ(w.rc, FALSE);
	NST_EQ(w.err, WSAENETDOWN);
	NST_TRUE(polled != 0);
	printf("\n    NIC killed: WSAENETDOWN after %.1f ms (blocked), %.1f ms (polling) ",
	       (double)(w.done_ns - t0) / 1e6, (double)(polled - t0) / 1e6);
	/* Later calls fail with WSAENETDOWN. */
	NST_EQ(post_recv(d, m, 10, &ov1), WSAENETDOWN);
	NST_TRUE(WSPRegisterMemory(d, m + 3 * PAGE, PAGE, MEM_READ, &err) == NULL);
	NST_EQ(err, WSAENETDOWN);
	NST_TRUE(sock_on(ADDR_D, 0) == INVALID_SOCKET);
	/* The peer's NIC notices when it sends: retries run out. */
	NST_REQUIRE_EQ(post_send(b, m + 2 * PAGE, 10, &ovb), WSA_IO_PENDING);
	NST_EQ(ov_wait(b, &ovb, NULL), WSAECONNABORTED);
	close_socket(d);
	close_socket(b);
	nst_wait(nic_d, WAIT_MS);
	nic_d = -1;
	close(ev);
	munmap(m, 4 * PAGE);
}

/* ---- Suite ---------------------------------------------------------------------------- */

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
	if (nst_make_fabric(dir, addrs) < 0)
		return -1;
	nic_a = nst_start_nic(dir, ADDR_A, NULL, WAIT_MS);
	nic_b = nst_start_nic(dir, ADDR_B, NULL, WAIT_MS);
	nic_c = nst_start_nic(
	    dir, ADDR_C,
	    (const char *const[]){"--no-mw", "--no-rdma-read", "--max-reg", "1M", NULL}, WAIT_MS);
	nic_d = nst_start_nic(dir, ADDR_D, NULL, WAIT_MS);
	if (nic_a < 0 || nic_b < 0 || nic_c < 0 || nic_d < 0)
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
	nst_rmtree(dir);
	return 0;
}

static void setup(void)
{
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

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"connect_listen_accept_errors", test_connect_listen_accept_errors},
	    {"nonblocking_connect_and_accept", test_nonblocking_connect_and_accept},
	    {"accept_after_connector_left", test_accept_after_connector_left},
	    {"accepted_never_confirmed", test_accepted_never_confirmed},
	    {"overlapped_results", test_overlapped_results},
	    {"two_hosts_integrity", test_two_hosts_integrity},
	    {"two_processes_one_host", test_two_processes_one_host},
	    {"bad_input_send_recv", test_bad_input_send_recv},
	    {"bad_input_rdma", test_bad_input_rdma},
	    {"descriptors_refused_by_nic", test_descriptors_refused_by_nic},
	    {"r1_dereg_refused_while_in_flight", test_r1_dereg_refused_while_in_flight},
	    {"close_with_operations_in_flight", test_close_with_operations_in_flight},
	    {"33rd_connection_has_no_slot", test_33rd_connection_has_no_slot},
	    {"socket_options", test_socket_options},
	    {"address_list", test_address_list},
	    {"nic_without_windows_or_rdma_read", test_nic_without_windows_or_rdma_read},
	    {"peer_killed_mid_transfer", test_peer_killed_mid_transfer},
	    {"nic_killed_gives_enetdown", test_nic_killed_gives_enetdown},
	    {NULL, NULL},
	};
	static const struct nst_suite suite = {.name = "spi_data",
					       .tests = tests,
					       .init = init,
					       .clean = clean,
					       .setup = setup,
					       .teardown = teardown};

	if (argc == 4 && !strcmp(argv[1], "--child"))
		return child_main(argv[2], (uint16_t)atoi(argv[3]));
	return nst_run_suite(argc, argv, &suite);
}

/*
 * nicsim-pingpong: send/receive ping-pong and RDMA write between two hosts
 * through the SAN SPI (ws2san.h), as a switch would drive it.
 *
 *   nicsim-pingpong --server [--addr A] [--port P]
 *   nicsim-pingpong --client --peer A [--addr B] [--port P] [--iters N]
 *                   [--size S] [--rdma-size R]
 *
 * The server accepts one connection, exposes an RDMA target of R bytes to
 * the client, echoes every ping and reports checksums of its target.  The
 * client sends N pings of S bytes and prints the median half round trip,
 * then RDMA-writes R bytes max(N / 10, 10) times and prints the bandwidth,
 * and checks the server's checksum of what landed.  Exits 0 when every step
 * worked and every checksum matched, 1 otherwise, 2 on a usage error.
 *
 * Receives are posted before the peer can send, as the switch's protocol
 * does, but for the client's hello, sent as soon as it is connected: the
 * server cannot post a receive before WSPAccept returns, and its NIC holds
 * the hello (up to 256 bytes, ws2san.h, WSPRecv) for its first receive.
 * So no message draws an RNR NAK.
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "nicsim_provider.h"
#include "ws2san.h"

enum msg_type { MSG_HELLO = 1, MSG_DESC, MSG_SUM_REQ, MSG_SUM, MSG_BYE };

struct msg {
	uint32_t type;
	uint32_t iters; /* HELLO */
	uint32_t size;  /* HELLO: ping size; SUM_REQ, SUM: bytes summed */
	uint32_t sum;   /* SUM */
	uint64_t rdma_size;
	struct nicsim_rdma_desc desc; /* DESC */
};

struct conn {
	SOCKET s;
	uint8_t *tx, *rx; /* message buffers, registered */
	HANDLE htx, hrx;
	size_t buf_len;
	LPFN_WSPRDMAWRITE rdma_write;
	LPFN_WSPREGISTERRDMAMEMORY reg_rdma;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint32_t sum32(const uint8_t *p, size_t n)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

static void *map(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static bool fail(const char *what, int err)
{
	fprintf(stderr, "nicsim-pingpong: %s: %s (%d)\n", what, nicsim_wsa_name(err), err);
	return false;
}

/* Wait for an overlapped operation; false (and a message) on error. */
static bool wait_ov(struct conn *c, WSAOVERLAPPED *ov, DWORD *bytes, const char *what)
{
	DWORD n = 0, flags = 0;
	int err = 0;

	if (!WSPGetOverlappedResult(c->s, ov, &n, TRUE, &flags, &err))
		return fail(what, err);
	if (bytes)
		*bytes = n;
	return true;
}

static bool post(struct conn *c, bool send, uint8_t *buf, size_t len, WSAOVERLAPPED *ov)
{
	WSABUF b = {.len = (ULONG)len, .buf = (char *)buf};
	DWORD n, flags = 0;
	int err = 0, rc;

	memset(ov, 0, sizeof(*ov));
	rc = send ? WSPSend(c->s, &b, 1, &n, 0, ov, NULL, NULL, &err)
		  : WSPRecv(c->s, &b, 1, &n, &flags, ov, NULL, NULL, &err);
	if (rc == SOCKET_ERROR && err != WSA_IO_PENDING)
		return fail(send ? "WSPSend" : "WSPRecv", err);
	return true;
}

static bool send_msg(struct conn *c, const struct msg *m)
{
	WSAOVERLAPPED ov;

	memcpy(c->tx, m, sizeof(*m));
	return post(c, true, c->tx, sizeof(*m), &ov) && wait_ov(c, &ov, NULL, "send");
}

/* (Re)make the message buffers, large enough for size bytes, and register them. */
static bool conn_buffers(struct conn *c, size_t size)
{
	int err = 0;

	if (c->tx) {
		WSPDeregisterMemory(c->s, c->htx, &err);
		WSPDeregisterMemory(c->s, c->hrx, &err);
		munmap(c->tx, c->buf_len);
		munmap(c->rx, c->buf_len);
	}
	c->buf_len = size > sizeof(struct msg) ? size : sizeof(struct msg);
	c->tx = map(c->buf_len);
	c->rx = map(c->buf_len);
	if (!c->tx || !c->rx)
		return fail("mmap", WSAENOBUFS);
	c->htx = WSPRegisterMemory(c->s, c->tx, (DWORD)c->buf_len, MEM_READ, &err);
	c->hrx =
	    c->htx ? WSPRegisterMemory(c->s, c->rx, (DWORD)c->buf_len, MEM_READWRITE, &err) : NULL;
	return c->hrx ? true : fail("WSPRegisterMemory", err);
}

/*
 * Close the connection and free its buffers.  Closing completes every
 * operation still pending on the socket (WSA_OPERATION_ABORTED) at once, so
 * it must come before the overlapped structures those operations name go
 * out of scope: every path out of server() and client() ends here.
 */
static void conn_close(struct conn *c)
{
	int err = 0;

	if (c->s != INVALID_SOCKET)
		WSPCloseSocket(c->s, &err);
	c->s = INVALID_SOCKET;
	if (c->tx)
		munmap(c->tx, c->buf_len);
	if (c->rx)
		munmap(c->rx, c->buf_len);
	c->tx = c->rx = NULL;
}

/* The extension functions, asked for as a switch does. */
static bool conn_extensions(struct conn *c)
{
	GUID wr = WSAID_RDMAWRITE, rr = WSAID_REGISTERRDMAMEMORY;
	DWORD n;
	int err = 0;

	if (WSPIoctl(c->s, SIO_GET_EXTENSION_FUNCTION_POINTER, &wr, sizeof(wr), &c->rdma_write,
		     sizeof(c->rdma_write), &n, NULL, NULL, NULL, &err) ||
	    WSPIoctl(c->s, SIO_GET_EXTENSION_FUNCTION_POINTER, &rr, sizeof(rr), &c->reg_rdma,
		     sizeof(c->reg_rdma), &n, NULL, NULL, NULL, &err))
		return fail("WSPIoctl", err);
	return true;
}

/* Why binding to addr failed, and what to do about it. */
static void explain_bind(const char *addr, int err)
{
	char dir[256];
	bool any = !strcmp(addr, "0.0.0.0");
	int rd;

	if (err != WSAEADDRNOTAVAIL) {
		fprintf(stderr, "nicsim-pingpong: cannot bind to %s: %s (%d)\n", addr,
			nicsim_wsa_name(err), err);
		return;
	}
	rd = nicsim_run_dir(dir, sizeof(dir));
	/* The provider said why it refused the directory: no advice to
	 * start NICs in it. */
	if (rd == WSAEACCES) {
		fprintf(stderr, "nicsim-pingpong: no usable run directory: choose another with "
				"--dir or NICSIM_DIR\n");
		return;
	}
	if (rd)
		snprintf(dir, sizeof(dir), "(unresolvable run directory)");
	fprintf(stderr,
		"nicsim-pingpong: no NIC%s%s in %s\n"
		"  start NICs with `nicsim up`, or point --dir / NICSIM_DIR at the run\n"
		"  directory of running ones\n",
		any ? "" : " with address ", any ? "" : addr, dir);
}

/* A socket bound to addr (0.0.0.0: the lowest NIC), or INVALID_SOCKET after
 * saying why; nothing is left open on failure. */
static SOCKET bound_socket(const char *addr, uint16_t port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	int err = 0;
	SOCKET s;

	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
		fprintf(stderr, "nicsim-pingpong: --addr %s: expected an IPv4 address\n", addr);
		return INVALID_SOCKET;
	}
	s = WSPSocket(AF_INET, SOCK_STREAM, 0, NULL, 0, 0, &err);
	if (s == INVALID_SOCKET) {
		fail("WSPSocket", err);
		return INVALID_SOCKET;
	}
	if (WSPBind(s, (struct sockaddr *)&sa, sizeof(sa), &err)) {
		int ignored = 0;

		explain_bind(addr, err);
		WSPCloseSocket(s, &ignored);
		return INVALID_SOCKET;
	}
	return s;
}

static bool server(const char *addr, uint16_t port)
{
	SOCKET l = bound_socket(addr, port);
	struct conn c = {.s = INVALID_SOCKET};
	struct msg hello, m = {.type = MSG_DESC};
	WSAOVERLAPPED ov, ovs;
	uint8_t *target = NULL;
	DWORD dlen = sizeof(m.desc), n;
	bool ok = false;
	int err = 0;

	if (l == INVALID_SOCKET)
		goto out; /* bound_socket said why */
	if (WSPListen(l, 1, &err)) {
		fail("WSPListen", err);
		goto out;
	}
	c.s = WSPAccept(l, NULL, NULL, NULL, 0, &err);
	if (c.s == INVALID_SOCKET) {
		fail("WSPAccept", err);
		goto out;
	}
	WSPCloseSocket(l, &err);
	l = INVALID_SOCKET;
	/* The hello says how big the pings are; its receive fits any header. */
	if (!conn_extensions(&c) || !conn_buffers(&c, sizeof(struct msg)) ||
	    !post(&c, false, c.rx, c.buf_len, &ov) || !wait_ov(&c, &ov, NULL, "hello"))
		goto out;
	memcpy(&hello, c.rx, sizeof(hello));
	if (hello.type != MSG_HELLO || hello.size > (64u << 20) || hello.rdma_size > (1u << 30) ||
	    !hello.rdma_size) {
		fail("hello", WSAEINVAL);
		goto out;
	}
	/* Buffers for the pings, and the RDMA target, exposed to the client. */
	if (hello.size > c.buf_len && !conn_buffers(&c, hello.size))
		goto out;
	target = map(hello.rdma_size);
	if (!target) {
		fail("mmap", WSAENOBUFS);
		goto out;
	}
	if (c.reg_rdma(c.s, target, (DWORD)hello.rdma_size, MEM_WRITE, &m.desc, &dlen, &err)) {
		fail("WSPRegisterRdmaMemory", err);
		goto out;
	}
	if (!post(&c, false, c.rx, c.buf_len, &ov) || !send_msg(&c, &m))
		goto out;
	/* Echo every ping: the next receive is posted before answering. */
	for (uint32_t i = 0; i < hello.iters; i++) {
		if (!wait_ov(&c, &ov, &n, "ping"))
			goto out;
		memcpy(c.tx, c.rx, n);
		if (!post(&c, false, c.rx, c.buf_len, &ov) || !post(&c, true, c.tx, n, &ovs) ||
		    !wait_ov(&c, &ovs, NULL, "pong"))
			goto out;
	}
	/* Checksum requests until bye. */
	for (;;) {
		if (!wait_ov(&c, &ov, NULL, "request"))
			goto out;
		memcpy(&m, c.rx, sizeof(m));
		if (m.type == MSG_BYE)
			break;
		if (m.type != MSG_SUM_REQ || m.size > hello.rdma_size) {
			fail("request", WSAEINVAL);
			goto out;
		}
		m.type = MSG_SUM;
		m.sum = sum32(target, m.size);
		if (!post(&c, false, c.rx, c.buf_len, &ov) || !send_msg(&c, &m))
			goto out;
	}
	ok = true;
out:
	/* Before ov and ovs go: closing completes what is pending on them. */
	conn_close(&c);
	if (l != INVALID_SOCKET)
		WSPCloseSocket(l, &err);
	if (target)
		munmap(target, hello.rdma_size);
	return ok;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static bool client(const char *addr, const char *peer, uint16_t port, uint32_t iters, uint32_t size,
		   uint32_t rdma_size)
{
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(port)};
	struct conn c = {.s = INVALID_SOCKET};
	struct msg m = {.type = MSG_HELLO, .iters = iters, .size = size, .rdma_size = rdma_size};
	struct nicsim_rdma_desc desc;
	uint32_t writes = iters / 10 > 10 ? iters / 10 : 10;
	uint64_t *rtt = calloc(iters ? iters : 1, sizeof(*rtt)), t0;
	WSAOVERLAPPED ov, ovs;
	uint8_t *src = NULL;
	HANDLE hsrc;
	bool ok = false;
	int err = 0;

	if (!rtt) {
		fail("calloc", WSAENOBUFS);
		goto out;
	}
	if (inet_pton(AF_INET, peer, &to.sin_addr) != 1) {
		fprintf(stderr, "nicsim-pingpong: --peer %s: expected an IPv4 address\n", peer);
		goto out;
	}
	c.s = bound_socket(addr, 0);
	if (c.s == INVALID_SOCKET)
		goto out; /* bound_socket said why */
	t0 = now_ns();
	if (WSPConnect(c.s, (struct sockaddr *)&to, sizeof(to), NULL, NULL, NULL, NULL, &err)) {
		fail("WSPConnect", err);
		goto out;
	}
	printf("connected to %s:%u in %.0f us\n", peer, port, (double)(now_ns() - t0) / 1e3);
	if (!conn_extensions(&c) || !conn_buffers(&c, size) ||
	    !post(&c, false, c.rx, c.buf_len, &ov) || !send_msg(&c, &m) ||
	    !wait_ov(&c, &ov, NULL, "descriptor"))
		goto out;
	memcpy(&m, c.rx, sizeof(m));
	if (m.type != MSG_DESC) {
		fail("descriptor", WSAEINVAL);
		goto out;
	}
	desc = m.desc;

	for (uint32_t i = 0; i < iters; i++) {
		DWORD n = 0;

		t0 = now_ns();
		if (!post(&c, false, c.rx, size, &ov) || !post(&c, true, c.tx, size, &ovs) ||
		    !wait_ov(&c, &ovs, NULL, "ping") || !wait_ov(&c, &ov, &n, "pong"))
			goto out;
		rtt[i] = now_ns() - t0;
		if (n != size) {
			fail("pong length", WSAEMSGSIZE);
			goto out;
		}
	}
	if (iters) {
		qsort(rtt, iters, sizeof(*rtt), cmp_u64);
		printf("send/recv %u B: half round trip median %.2f us, p99 %.2f us (%u round "
		       "trips)\n",
		       size, (double)rtt[iters / 2] / 2e3, (double)rtt[iters * 99 / 100] / 2e3,
		       iters);
	}

	src = map(rdma_size);
	if (!src) {
		fail("mmap", WSAENOBUFS);
		goto out;
	}
	for (uint32_t i = 0; i < rdma_size; i++)
		src[i] = (uint8_t)(i * 131u + 7u);
	hsrc = WSPRegisterMemory(c.s, src, rdma_size, MEM_READ, &err);
	if (!hsrc) {
		fail("WSPRegisterMemory", err);
		goto out;
	}
	t0 = now_ns();
	for (uint32_t i = 0; i < writes; i++) {
		WSABUFEX b = {.len = rdma_size, .buf = (char *)src, .handle = hsrc};
		DWORD n;

		memset(&ovs, 0, sizeof(ovs));
		if (c.rdma_write(c.s, &b, 1, &desc, sizeof(desc), 0, &n, 0, &ovs, NULL, NULL,
				 &err) == SOCKET_ERROR &&
		    err != WSA_IO_PENDING) {
			fail("WSPRdmaWrite", err);
			goto out;
		}
		if (!wait_ov(&c, &ovs, NULL, "RDMA write"))
			goto out;
	}
	printf("RDMA write %u B: %.2f GB/s (%u writes, one at a time)\n", rdma_size,
	       (double)rdma_size * writes / (double)(now_ns() - t0), writes);

	m = (struct msg){.type = MSG_SUM_REQ, .size = rdma_size};
	if (!post(&c, false, c.rx, c.buf_len, &ov) || !send_msg(&c, &m) ||
	    !wait_ov(&c, &ov, NULL, "checksum"))
		goto out;
	memcpy(&m, c.rx, sizeof(m));
	if (m.type != MSG_SUM || m.sum != sum32(src, rdma_size)) {
		fprintf(stderr, "nicsim-pingpong: the server's checksum differs\n");
		goto out;
	}
	printf("RDMA write checksum matches\n");
	/* The server closes once the bye arrives; if the acknowledgement of
	 * the bye is lost on a faulty link, the close can reach this side
	 * first and end the bye's send.  Every result is in by now, so that
	 * is how a bye ends too. */
	m = (struct msg){.type = MSG_BYE};
	memcpy(c.tx, &m, sizeof(m));
	ok = post(&c, true, c.tx, sizeof(m), &ovs);
	if (ok) {
		DWORD n = 0, flags = 0;
		int why = 0;

		ok = WSPGetOverlappedResult(c.s, &ovs, &n, TRUE, &flags, &why) ||
		     why == WSA_OPERATION_ABORTED || why == WSAECONNRESET ||
		     why == WSAECONNABORTED || fail("send", why);
	}
out:
	/* Before ov and ovs go: closing completes what is pending on them. */
	conn_close(&c);
	if (src)
		munmap(src, rdma_size);
	free(rtt);
	return ok;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: nicsim-pingpong --server [--addr A] [--port P] [--dir D]\n"
		   "       nicsim-pingpong --client --peer A [--addr B] [--port P] [--iters N]\n"
		   "                       [--size S] [--rdma-size R] [--dir D]\n"
		   "\n"
		   "Ping-pong of S-byte messages (default 8, 10000 times) and RDMA writes of R\n"
		   "bytes (default 1 MiB) between two hosts through the SAN SPI.  --addr picks\n"
		   "this host's NIC (default: the lowest in the run directory), --dir the run\n"
		   "directory (default: $NICSIM_DIR ...), --port the server's (default 7471).\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"server", no_argument, NULL, 's'},
	    {"client", no_argument, NULL, 'c'},
	    {"addr", required_argument, NULL, 'a'},
	    {"peer", required_argument, NULL, 'p'},
	    {"port", required_argument, NULL, 'P'},
	    {"iters", required_argument, NULL, 'n'},
	    {"size", required_argument, NULL, 'z'},
	    {"rdma-size", required_argument, NULL, 'r'},
	    {"dir", required_argument, NULL, 'd'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *addr = "0.0.0.0", *peer = NULL;
	unsigned long port = 7471, iters = 10000, size = 8, rdma_size = 1u << 20;
	int role = 0, opt, err = 0;
	WSPDATA data;
	WSPPROC_TABLE table;
	bool ok;

	/* Each line as it happens, also into a pipe or a log. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (opt) {
		case 's':
		case 'c': role = opt; break;
		case 'a': addr = optarg; break;
		case 'p': peer = optarg; break;
		case 'P': port = strtoul(optarg, NULL, 0); break;
		case 'n': iters = strtoul(optarg, NULL, 0); break;
		case 'z': size = strtoul(optarg, NULL, 0); break;
		case 'r': rdma_size = strtoul(optarg, NULL, 0); break;
		case 'd': setenv("NICSIM_DIR", optarg, 1); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!role || optind != argc || (role == 'c' && !peer) || !port || port > 65535 || !size ||
	    size > (64u << 20) || !rdma_size || rdma_size > (1u << 30) || iters > 10000000) {
		usage(stderr);
		return 2;
	}
	err = WSPStartupEx(MAKEWORD(2, 2), &data, NULL, NULL, &table);
	if (err) {
		fail("WSPStartupEx", err);
		return 1;
	}
	ok = role == 's' ? server(addr, (uint16_t)port)
			 : client(addr, peer, (uint16_t)port, (uint32_t)iters, (uint32_t)size,
				  (uint32_t)rdma_size);
	WSPCleanup(&err);
	return ok ? 0 : 1;
}

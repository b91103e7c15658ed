/*
 * nicsim-rping: rping's protocol over the SAN SPI, so that a nicsim host and
 * any RDMA stack with rdma-core's rping (Linux's Soft-RoCE, a RoCE card)
 * can check each other's connection management, SENDs, RDMA READs and RDMA
 * WRITEs, with the data verified.
 *
 *   nicsim-rping -s [-a ADDR] [-p PORT] [-C COUNT] [-S SIZE] [-v] [-V]
 *                   [--forge-rkey read|write]
 *   nicsim-rping -c -a ADDR [-I ADDR] [-p PORT] [-C COUNT] [-S SIZE | --sizes LIST]
 *                   [-v] [-V] [--expect-broken]
 *
 * The protocol (rdma-core's librdmacm/examples/rping.c): a connection to
 * the server's port (7174 unless -p) in the RDMA CM's TCP port space; every
 * message is a SEND of 16 bytes, a buffer's address (64 bits), its rkey and
 * its size (32 bits each), in network byte order.  For ping i the client
 * fills its start buffer with rping's text ("rdma-ping-i: " and then letters
 * from 'A' + i % 58 upward, wrapping after 'z' to 'A', the last byte 0) and
 * advertises it; the server RDMA READs it and answers with a 16-byte "go
 * ahead"; the client advertises its RDMA buffer; the server RDMA WRITEs what
 * it read into it and answers again; the client compares the two buffers.
 * After COUNT pings the client disconnects, and the server ends.
 *
 * rping itself allows 26 to 65535 bytes; nicsim-rping allows 1 byte to
 * 16 MiB (the text is cut at the size; a 1-byte ping is its final 0), and
 * --sizes runs one ping per size in one connection.  -V checks the data:
 * the server checks what it read against the text of ping i, the client
 * that what came back is what it sent.  -v prints each ping's data of up to
 * 256 bytes as rping does.
 *
 * For the protection checks: --forge-rkey read makes the server's first
 * RDMA READ present the client's rkey with its low byte inverted (write: a
 * good READ, then a forged WRITE); the peer's NIC must refuse it with a NAK
 * (remote access error), which the server reports, exiting 0 only if that is
 * what happened.  The client of such a server sees its connection break:
 * --expect-broken makes that its success.
 *
 * Exit status: 0 when every ping worked (or the expected refusal came), 1
 * otherwise, 2 on a usage error.  The NIC is the one with address -a
 * (server) or -I (client; default: the lowest in the run directory, which
 * is $NICSIM_DIR or `nicsim dir`).
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "nicsim_provider.h"
#include "ws2san.h"

#define RPING_PORT 7174u
#define RPING_MAX_SIZE (16u << 20)
#define RPING_MAX_SIZES 64
#define RPING_PRINT_MAX 256u /* -v prints pings up to this size */
#define SENTINEL 0xa5

/* rping's message: where a buffer is, its rkey and size, big-endian. */
struct rping_info {
	uint64_t buf;
	uint32_t rkey;
	uint32_t size;
};
_Static_assert(sizeof(struct rping_info) == 16, "rping's message is 16 bytes");

enum forge { FORGE_NONE, FORGE_READ, FORGE_WRITE };

struct opts {
	bool server, verbose, validate, expect_broken;
	bool listed; /* --sizes: one ping per size */
	const char *addr, *src;
	uint16_t port;
	unsigned long count;
	uint32_t sizes[RPING_MAX_SIZES];
	unsigned nsizes;
	enum forge forge;
};

/* A registered buffer: local registration, and for RDMA an exposure. */
struct buf {
	uint8_t *p;
	size_t len;
	HANDLE h;
	struct nicsim_rdma_desc desc; /* when exposed */
	bool exposed;
};

struct conn {
	SOCKET s;
	struct sockaddr_in peer;
	struct buf tx, rx; /* the 16-byte messages */
	LPFN_WSPRDMAWRITE rdma_write;
	LPFN_WSPRDMAREAD rdma_read;
	LPFN_WSPREGISTERRDMAMEMORY reg_rdma;
	LPFN_WSPDEREGISTERRDMAMEMORY dereg_rdma;
	WSAOVERLAPPED ov_rx; /* the receive always posted */
};

static const char *role = "nicsim-rping";

static bool fail(const char *what, int err)
{
	fprintf(stderr, "%s: %s: %s (%d)\n", role, what, nicsim_wsa_name(err), err);
	return false;
}

/* Why s's connection broke, as the provider recorded it. */
static void explain_broken(SOCKET s)
{
	struct nicsim_socket_error e;

	if (nicsim_socket_error(s, &e) == 0)
		fprintf(stderr, "%s: connection broke: %s\n", role, e.what);
}

/* rping's text for ping i in size bytes. */
static void fill_pattern(uint8_t *p, uint32_t size, unsigned long i)
{
	char head[32];
	int cc = snprintf(head, sizeof(head), "rdma-ping-%lu: ", i);
	uint32_t n = (uint32_t)cc < size ? (uint32_t)cc : size;
	unsigned c = 65 + (unsigned)(i % 58);

	memcpy(p, head, n);
	for (uint32_t k = n; k < size; k++) {
		p[k] = (uint8_t)c;
		c = c == 122 ? 65 : c + 1;
	}
	p[size - 1] = 0;
}

/* The first byte where a and b differ, or -1. */
static long first_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
	for (size_t k = 0; k < n; k++)
		if (a[k] != b[k])
			return (long)k;
	return -1;
}

/* ---- Buffers ------------------------------------------------------------- */

static bool buf_alloc(struct conn *c, struct buf *b, size_t len, DWORD flags)
{
	int err = 0;

	b->p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (b->p == MAP_FAILED) {
		b->p = NULL;
		return fail("mmap", WSAENOBUFS);
	}
	b->len = len;
	b->h = WSPRegisterMemory(c->s, b->p, (DWORD)len, flags, &err);
	return b->h ? true : fail("WSPRegisterMemory", err);
}

/* Expose b to the peer for RDMA with flags (MEM_READ / MEM_WRITE). */
static bool buf_expose(struct conn *c, struct buf *b, DWORD flags)
{
	DWORD dlen = sizeof(b->desc);
	int err = 0;

	if (c->reg_rdma(c->s, b->p, (DWORD)b->len, flags, &b->desc, &dlen, &err))
		return fail("WSPRegisterRdmaMemory", err);
	b->exposed = true;
	return true;
}

static void buf_free(struct conn *c, struct buf *b)
{
	int err = 0;

	if (b->exposed && c->s != INVALID_SOCKET)
		c->dereg_rdma(c->s, &b->desc, sizeof(b->desc), &err);
	if (b->h && c->s != INVALID_SOCKET)
		WSPDeregisterMemory(c->s, b->h, &err);
	if (b->p)
		munmap(b->p, b->len);
	memset(b, 0, sizeof(*b));
}

/* ---- Messages ------------------------------------------------------------ */

static bool wait_ov(struct conn *c, WSAOVERLAPPED *ov, DWORD *bytes, int *why)
{
	DWORD n = 0, flags = 0;
	int err = 0;

	if (!WSPGetOverlappedResult(c->s, ov, &n, TRUE, &flags, &err)) {
		*why = err;
		return false;
	}
	*bytes = n;
	return true;
}

static bool post_recv(struct conn *c)
{
	WSABUF b = {.len = sizeof(struct rping_info), .buf = (char *)c->rx.p};
	DWORD n, flags = 0;
	int err = 0;

	memset(&c->ov_rx, 0, sizeof(c->ov_rx));
	if (WSPRecv(c->s, &b, 1, &n, &flags, &c->ov_rx, NULL, NULL, &err) == SOCKET_ERROR &&
	    err != WSA_IO_PENDING)
		return fail("WSPRecv", err);
	return true;
}

/*
 * The next message into *info, and a receive posted for the one after.
 * *closed says the peer disconnected (the receive was flushed); false with
 * it clear is an error, said.
 */
static bool recv_info(struct conn *c, struct rping_info *info, bool *closed)
{
	DWORD n = 0;
	int why = 0;

	*closed = false;
	if (!wait_ov(c, &c->ov_rx, &n, &why)) {
		struct nicsim_socket_error e;

		if ((why == WSA_OPERATION_ABORTED || why == WSAECONNRESET) &&
		    (nicsim_socket_error(c->s, &e) != 0 || e.nic_status == NICSIM_STATUS_NONE)) {
			*closed = true;
			return false;
		}
		explain_broken(c->s);
		return fail("receive", why);
	}
	if (n != sizeof(*info)) {
		fprintf(stderr, "%s: received %lu bytes, expected %zu (an rping message)\n", role,
			(unsigned long)n, sizeof(*info));
		return false;
	}
	memcpy(info, c->rx.p, sizeof(*info));
	info->buf = be64toh(info->buf);
	info->rkey = be32toh(info->rkey);
	info->size = be32toh(info->size);
	return post_recv(c);
}

static bool send_info(struct conn *c, uint64_t va, uint32_t rkey, uint32_t size)
{
	struct rping_info m = {.buf = htobe64(va), .rkey = htobe32(rkey), .size = htobe32(size)};
	WSABUF b = {.len = sizeof(m), .buf = (char *)c->tx.p};
	WSAOVERLAPPED ov = {0};
	DWORD n;
	int err = 0;

	memcpy(c->tx.p, &m, sizeof(m));
	if (WSPSend(c->s, &b, 1, &n, 0, &ov, NULL, NULL, &err) == SOCKET_ERROR &&
	    err != WSA_IO_PENDING)
		return fail("WSPSend", err);
	if (!wait_ov(c, &ov, &n, &err)) {
		explain_broken(c->s);
		return fail("send", err);
	}
	return true;
}

/* ---- Connection ------------------------------------------------------------ */

static bool extensions(struct conn *c)
{
	static const struct {
		GUID id;
		size_t off;
	} fns[] = {
	    {WSAID_RDMAWRITE, offsetof(struct conn, rdma_write)},
	    {WSAID_RDMAREAD, offsetof(struct conn, rdma_read)},
	    {WSAID_REGISTERRDMAMEMORY, offsetof(struct conn, reg_rdma)},
	    {WSAID_DEREGISTERRDMAMEMORY, offsetof(struct conn, dereg_rdma)},
	};

	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
		GUID id = fns[i].id;
		DWORD n;
		int err = 0;

		if (WSPIoctl(c->s, SIO_GET_EXTENSION_FUNCTION_POINTER, &id, sizeof(id),
			     (char *)c + fns[i].off, sizeof(void *), &n, NULL, NULL, NULL, &err))
			return fail("WSPIoctl (extension functions)", err);
	}
	return true;
}

/* After connecting: extensions, message buffers, the first receive. */
static bool conn_ready(struct conn *c)
{
	return extensions(c) && buf_alloc(c, &c->tx, sizeof(struct rping_info), MEM_READ) &&
	       buf_alloc(c, &c->rx, sizeof(struct rping_info), MEM_READWRITE) && post_recv(c);
}

/* Closing completes what is pending on the socket before the buffers go. */
static void conn_close(struct conn *c, struct buf *bufs, size_t nbufs)
{
	int err = 0;

	for (size_t i = 0; i < nbufs; i++)
		buf_free(c, &bufs[i]);
	if (c->s != INVALID_SOCKET)
		WSPCloseSocket(c->s, &err);
	c->s = INVALID_SOCKET;
	buf_free(c, &c->tx);
	buf_free(c, &c->rx);
}

static SOCKET bound_socket(const char *addr, uint16_t port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	int err = 0, ignored = 0;
	SOCKET s;

	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
		fprintf(stderr, "%s: %s: expected an IPv4 address\n", role, addr);
		return INVALID_SOCKET;
	}
	s = WSPSocket(AF_INET, SOCK_STREAM, 0, NULL, 0, 0, &err);
	if (s == INVALID_SOCKET) {
		fail("WSPSocket", err);
		return INVALID_SOCKET;
	}
	if (WSPBind(s, (struct sockaddr *)&sa, sizeof(sa), &err)) {
		char dir[PATH_MAX];

		fail("WSPBind", err);
		if (err == WSAEADDRNOTAVAIL && nicsim_run_dir(dir, sizeof(dir)) == 0)
			fprintf(stderr,
				"%s: no NIC%s%s in %s: start one (nicsim up), or set NICSIM_DIR "
				"to the run directory of running ones\n",
				role, sa.sin_addr.s_addr ? " with address " : "",
				sa.sin_addr.s_addr ? addr : "", dir);
		WSPCloseSocket(s, &ignored);
		return INVALID_SOCKET;
	}
	return s;
}

/* ---- RDMA ------------------------------------------------------------------ */

/*
 * One RDMA READ (read) or WRITE of len bytes between local and the peer's
 * buffer info, with rkey (forged or not).  0 on success, else the WSA code.
 */
static int rdma(struct conn *c, bool read, struct buf *local, uint32_t len,
		const struct rping_info *info, uint32_t rkey)
{
	struct nicsim_rdma_desc d = {
	    .magic = NICSIM_RDMA_DESC_MAGIC,
	    .version = NICSIM_RDMA_DESC_VERSION,
	    .access = MEM_READWRITE,
	    .nic_addr = c->peer.sin_addr.s_addr,
	    .rkey = rkey,
	    .va = info->buf,
	    .len = info->size,
	};
	WSABUFEX b = {.len = len, .buf = (char *)local->p, .handle = local->h};
	WSAOVERLAPPED ov = {0};
	DWORD n;
	int err = 0, rc;

	rc = read ? c->rdma_read(c->s, &b, 1, &d, sizeof(d), 0, &n, 0, &ov, NULL, NULL, &err)
		  : c->rdma_write(c->s, &b, 1, &d, sizeof(d), 0, &n, 0, &ov, NULL, NULL, &err);
	if (rc == SOCKET_ERROR && err != WSA_IO_PENDING)
		return err;
	return wait_ov(c, &ov, &n, &err) ? 0 : err;
}

/* The server's report of a forged RDMA operation's outcome. */
static bool forged_outcome(struct conn *c, bool read, uint32_t rkey, int err)
{
	const char *op = read ? "RDMA READ" : "RDMA WRITE";
	struct nicsim_socket_error e;

	if (!err) {
		fprintf(stderr, "%s: %s with forged rkey 0x%08x succeeded: the peer accepted it\n",
			role, op, rkey);
		return false;
	}
	if (nicsim_socket_error(c->s, &e) != 0) {
		fail(op, err);
		return false;
	}
	printf("%s: %s with forged rkey 0x%08x completed with %s (NIC status %u): %s\n", role, op,
	       rkey, nicsim_wsa_name(err), e.nic_status, e.what);
	return e.nic_status == NICSIM_STATUS_REM_ACCESS_ERR;
}

/* ---- Server ---------------------------------------------------------------- */

/* Make b hold at least len bytes, registered for local access. */
static bool buf_fit(struct conn *c, struct buf *b, uint32_t len)
{
	if (b->p && b->len >= len)
		return true;
	buf_free(c, b);
	return buf_alloc(c, b, len, MEM_READWRITE);
}

static bool serve_ping(struct conn *c, const struct opts *o, struct buf *data, struct buf *want,
		       unsigned long i, bool *done, bool *ok)
{
	struct rping_info info;
	uint32_t rkey, len;
	bool closed;
	long at;
	int err;

	if (!recv_info(c, &info, &closed)) {
		*done = closed;
		return false;
	}
	len = info.size;
	if (len == 0 || len > RPING_MAX_SIZE) {
		fprintf(stderr, "%s: ping %lu: the client advertised %u bytes (1..%u)\n", role, i,
			len, RPING_MAX_SIZE);
		return false;
	}
	if (!buf_fit(c, data, len) || (o->validate && !buf_fit(c, want, len)))
		return false;
	rkey = o->forge == FORGE_READ ? info.rkey ^ 0xff : info.rkey;
	err = rdma(c, true, data, len, &info, rkey);
	if (o->forge == FORGE_READ) {
		*ok = forged_outcome(c, true, rkey, err);
		*done = true;
		return false;
	}
	if (err) {
		explain_broken(c->s);
		return fail("RDMA READ", err);
	}
	if (o->validate) {
		fill_pattern(want->p, len, i);
		at = first_diff(data->p, want->p, len);
		if (at >= 0) {
			fprintf(stderr,
				"%s: ping %lu: data read differs from rping's at byte %ld\n", role,
				i, at);
			return false;
		}
	}
	if (o->verbose && len <= RPING_PRINT_MAX)
		printf("server ping data: %.*s\n", (int)len, (const char *)data->p);
	if (!send_info(c, 0, 0, 0))
		return false;

	if (!recv_info(c, &info, &closed)) {
		if (closed)
			fprintf(stderr, "%s: ping %lu: the client left before its RDMA buffer\n",
				role, i);
		return false;
	}
	if (info.size < len) {
		fprintf(stderr, "%s: ping %lu: the client's RDMA buffer holds %u bytes, not %u\n",
			role, i, info.size, len);
		return false;
	}
	rkey = o->forge == FORGE_WRITE ? info.rkey ^ 0xff : info.rkey;
	err = rdma(c, false, data, len, &info, rkey);
	if (o->forge == FORGE_WRITE) {
		*ok = forged_outcome(c, false, rkey, err);
		*done = true;
		return false;
	}
	if (err) {
		explain_broken(c->s);
		return fail("RDMA WRITE", err);
	}
	return send_info(c, 0, 0, 0);
}

static bool server(const struct opts *o)
{
	SOCKET l = bound_socket(o->addr, o->port);
	struct conn c = {.s = INVALID_SOCKET};
	struct buf bufs[2] = {0}; /* what was read and is written back; rping's text */
	int len = sizeof(c.peer), err = 0;
	unsigned long i = 0;
	bool ok = false, done = false;

	role = "nicsim-rping: server";
	if (l == INVALID_SOCKET)
		return false;
	if (WSPListen(l, 1, &err)) {
		fail("WSPListen", err);
		goto out;
	}
	/* For scripts: a client may connect from now on. */
	if (strcmp(o->addr, "0.0.0.0") == 0)
		printf("%s: listening on port %u of the lowest NIC of the run directory\n", role,
		       o->port);
	else
		printf("%s: listening on %s port %u\n", role, o->addr, o->port);
	c.s = WSPAccept(l, (struct sockaddr *)&c.peer, &len, NULL, 0, &err);
	if (c.s == INVALID_SOCKET) {
		fail("WSPAccept", err);
		goto out;
	}
	if (!conn_ready(&c))
		goto out;
	for (;; i++) {
		if (!serve_ping(&c, o, &bufs[0], &bufs[1], i, &done, &ok))
			break;
	}
	if (o->forge != FORGE_NONE) {
		/* forged_outcome said what happened; done is set only after it ran. */
		ok = ok && done;
	} else if (done) {
		/* The client disconnected after its last ping. */
		ok = o->count ? i == o->count : i > 0;
		if (!ok && o->count)
			fprintf(stderr, "%s: the client left after %lu pings, not %lu\n", role, i,
				o->count);
		else if (!ok)
			fprintf(stderr, "%s: the client left before its first ping\n", role);
		else
			printf("%s: %lu ping%s, %s\n", role, i, i == 1 ? "" : "s",
			       o->validate ? "data verified" : "data not checked (no -V)");
	}
out:
	conn_close(&c, bufs, 2);
	if (l != INVALID_SOCKET)
		WSPCloseSocket(l, &err);
	return ok;
}

/* ---- Client ---------------------------------------------------------------- */

static bool client_ping(struct conn *c, const struct opts *o, struct buf *start, struct buf *back,
			uint32_t size, unsigned long i)
{
	struct rping_info info;
	bool closed = false;
	long at;

	fill_pattern(start->p, size, i);
	memset(back->p, SENTINEL, size);
	if (!send_info(c, start->desc.va, start->desc.rkey, size) ||
	    !recv_info(c, &info, &closed) || !send_info(c, back->desc.va, back->desc.rkey, size) ||
	    !recv_info(c, &info, &closed)) {
		if (closed)
			fprintf(stderr, "%s: ping %lu: the server disconnected\n", role, i);
		return false;
	}
	if (o->validate) {
		at = first_diff(start->p, back->p, size);
		if (at >= 0) {
			fprintf(stderr, "%s: ping %lu of %u bytes: data mismatch at byte %ld\n",
				role, i, size, at);
			return false;
		}
	}
	if (o->verbose && size <= RPING_PRINT_MAX)
		printf("ping data: %.*s\n", (int)size, (const char *)back->p);
	return true;
}

static uint32_t max_size(const struct opts *o)
{
	uint32_t m = 0;

	for (unsigned k = 0; k < o->nsizes; k++)
		m = o->sizes[k] > m ? o->sizes[k] : m;
	return m;
}

/* What a failed connect means, and what to try. */
static void explain_connect(const struct opts *o, int err)
{
	switch (err) {
	case WSAECONNREFUSED:
		fprintf(stderr, "%s: nothing listens on %s port %u: start the server first\n", role,
			o->addr, o->port);
		break;
	case WSAEHOSTUNREACH:
		fprintf(stderr,
			"%s: no NIC %s on this NIC's fabric; to reach a host beyond it, start "
			"this NIC with --udp (nicsim up --udp)\n",
			role, o->addr);
		break;
	case WSAETIMEDOUT:
		fprintf(stderr,
			"%s: no answer from %s: is a host there, and its RDMA stack up (for "
			"Soft-RoCE: rdma link show)?\n",
			role, o->addr);
		break;
	default: break;
	}
}

static bool client(const struct opts *o)
{
	struct conn c = {.s = INVALID_SOCKET};
	struct buf bufs[2] = {0}; /* start buffer (read by the server), RDMA buffer */
	uint32_t size = max_size(o);
	unsigned long i = 0, pings = o->listed ? o->nsizes : o->count;
	int err = 0;
	bool ok = false;

	role = "nicsim-rping: client";
	c.peer = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(o->port)};
	if (inet_pton(AF_INET, o->addr, &c.peer.sin_addr) != 1) {
		fprintf(stderr, "%s: -a %s: expected an IPv4 address\n", role, o->addr);
		return false;
	}
	c.s = bound_socket(o->src, 0);
	if (c.s == INVALID_SOCKET)
		return false;
	if (WSPConnect(c.s, (struct sockaddr *)&c.peer, sizeof(c.peer), NULL, NULL, NULL, NULL,
		       &err)) {
		fail("WSPConnect", err);
		explain_connect(o, err);
		goto out;
	}
	if (!conn_ready(&c) || !buf_alloc(&c, &bufs[0], size, MEM_READ) ||
	    !buf_expose(&c, &bufs[0], MEM_READ) || !buf_alloc(&c, &bufs[1], size, MEM_READWRITE) ||
	    !buf_expose(&c, &bufs[1], MEM_WRITE))
		goto out;
	/* Without a count the pings go on until one fails: that is never a success. */
	for (i = 0; !pings || i < pings; i++) {
		uint32_t s = o->listed ? o->sizes[i] : size;

		if (!client_ping(&c, o, &bufs[0], &bufs[1], s, i))
			break;
	}
	ok = pings && i == pings;
	if (o->expect_broken) {
		printf("%s: %s after %lu pings%s\n", role,
		       ok ? "every ping worked" : "the connection broke", i,
		       ok ? ", but a broken connection was expected" : ", as expected");
		ok = !ok;
	} else if (ok) {
		printf("%s: %lu ping%s", role, i, i == 1 ? "" : "s");
		if (o->listed && o->nsizes > 1)
			printf(" of %u sizes up to %u bytes", o->nsizes, size);
		else
			printf(" of %u bytes", size);
		printf(", %s\n", o->validate ? "data verified" : "data not checked (no -V)");
	}
out:
	conn_close(&c, bufs, 2);
	return ok;
}

/* ---- Options --------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: nicsim-rping -s [-a ADDR] [-p PORT] [-C COUNT] [-S SIZE] [-v] [-V]\n"
	    "                       [--forge-rkey read|write]\n"
	    "       nicsim-rping -c -a ADDR [-I ADDR] [-p PORT] [-C COUNT]\n"
	    "                       [-S SIZE | --sizes N,N,...] [-v] [-V] [--expect-broken]\n"
	    "\n"
	    "rping's protocol (rdma-core's rping) between a nicsim host and any RDMA\n"
	    "stack: per ping a SEND each way, the server's RDMA READ of the client's\n"
	    "buffer and its RDMA WRITE of what it read back into another.\n"
	    "\n"
	    "  -s, -c        server, client\n"
	    "  -a ADDR       server: the NIC to listen on (default: the lowest in the\n"
	    "                run directory); client: the server's address\n"
	    "  -I ADDR       client: the NIC to use (default: the lowest)\n"
	    "  -p PORT       the server's port (default 7174, as rping's)\n"
	    "  -C COUNT      pings (default: the client's forever; the server checks the\n"
	    "                client did exactly COUNT)\n"
	    "  -S SIZE       bytes per ping, 1 to 16777216 (default 64)\n"
	    "  --sizes LIST  client: one ping per size, in one connection\n"
	    "  -v            print each ping's data (up to 256 bytes), as rping does\n"
	    "  -V            check the data (as rping -V, and the server checks what it\n"
	    "                read against rping's text)\n"
	    "  --forge-rkey read|write\n"
	    "                server: present a forged rkey in the first RDMA READ (or\n"
	    "                WRITE); succeeds only if the peer refuses it (remote access\n"
	    "                error)\n"
	    "  --expect-broken\n"
	    "                client: succeed only if the connection breaks\n"
	    "\n"
	    "The run directory is $NICSIM_DIR, else `nicsim dir`'s.  Examples, with a\n"
	    "Soft-RoCE machine at 198.18.100.2 and a nicsim NIC at 198.18.100.1:\n"
	    "  nicsim-rping -s -a 198.18.100.1 -V -v     (there: rping -c -a 198.18.100.1 -V -C "
	    "10)\n"
	    "  nicsim-rping -c -a 198.18.100.2 -V -C 10  (there: rping -s -a 198.18.100.2 -V)\n");
}

static bool parse_size(const char *s, uint32_t *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno || end == s || *end || *s == '-' || v == 0 || v > RPING_MAX_SIZE)
		return false;
	*out = (uint32_t)v;
	return true;
}

static bool parse_sizes(char *list, struct opts *o)
{
	char *t;

	o->nsizes = 0;
	/* strsep, not strtok: an empty entry ("1,,2", a trailing comma) is an error. */
	while ((t = strsep(&list, ",")) != NULL) {
		if (o->nsizes == RPING_MAX_SIZES || !parse_size(t, &o->sizes[o->nsizes]))
			return false;
		o->nsizes++;
	}
	return o->nsizes > 0;
}

static int bad(const char *why, const char *arg)
{
	fprintf(stderr, "nicsim-rping: %s%s%s\n(nicsim-rping --help for usage)\n", why,
		arg ? ": " : "", arg ? arg : "");
	return 2;
}

static int parse(int argc, char **argv, struct opts *o)
{
	enum { OPT_FORGE = 256, OPT_SIZES, OPT_BROKEN };
	static const struct option longs[] = {
	    {"forge-rkey", required_argument, NULL, OPT_FORGE},
	    {"sizes", required_argument, NULL, OPT_SIZES},
	    {"expect-broken", no_argument, NULL, OPT_BROKEN},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int opt, roles = 0;
	bool sized = false;
	char *end;
	unsigned long v;

	*o = (struct opts){.addr = NULL, .src = "0.0.0.0", .port = RPING_PORT, .nsizes = 1};
	o->sizes[0] = 64;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":scvVa:I:p:C:S:h", longs, NULL)) != -1) {
		switch (opt) {
		case 's':
		case 'c':
			o->server = opt == 's';
			roles++;
			break;
		case 'v': o->verbose = true; break;
		case 'V': o->validate = true; break;
		case 'a': o->addr = optarg; break;
		case 'I': o->src = optarg; break;
		case 'p':
			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || v == 0 || v > 65535)
				return bad("-p: expected a port, 1 to 65535", optarg);
			o->port = (uint16_t)v;
			break;
		case 'C':
			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || *optarg == '-' || v == 0)
				return bad("-C: expected a count of at least 1", optarg);
			o->count = v;
			break;
		case 'S':
			sized = true;
			if (!parse_size(optarg, &o->sizes[0]))
				return bad("-S: expected a size from 1 to 16777216 bytes", optarg);
			break;
		case OPT_SIZES:
			o->listed = true;
			if (!parse_sizes(optarg, o))
				return bad(
				    "--sizes: expected up to 64 sizes of 1 to 16777216 bytes, "
				    "separated by commas",
				    NULL);
			break;
		case OPT_FORGE:
			if (!strcmp(optarg, "read"))
				o->forge = FORGE_READ;
			else if (!strcmp(optarg, "write"))
				o->forge = FORGE_WRITE;
			else
				return bad("--forge-rkey: expected read or write", optarg);
			break;
		case OPT_BROKEN: o->expect_broken = true; break;
		case 'h': usage(stdout); exit(0);
		case ':': return bad("an option needs a value", argv[optind - 1]);
		default: return bad("unknown option", argv[optind - 1]);
		}
	}
	if (optind != argc)
		return bad("unexpected argument", argv[optind]);
	if (roles != 1)
		return bad("say -s (server) or -c (client), once", NULL);
	if (!o->server && !o->addr)
		return bad("the client needs the server's address (-a ADDR)", NULL);
	if (o->server && (o->listed || o->expect_broken))
		return bad("--sizes and --expect-broken are the client's", NULL);
	if (!o->server && o->forge != FORGE_NONE)
		return bad("--forge-rkey is the server's", NULL);
	if (o->listed && o->count)
		return bad("--sizes makes one ping per size: leave out -C", NULL);
	if (sized && o->listed)
		return bad("-S and --sizes are alternatives: give one", NULL);
	if (o->server && !o->addr)
		o->addr = "0.0.0.0";
	for (const char *const *a = (const char *const[]){o->addr, o->src, NULL}; *a; a++) {
		struct in_addr in;

		if (inet_pton(AF_INET, *a, &in) != 1)
			return bad("expected an IPv4 address", *a);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	WSPDATA data;
	WSPPROC_TABLE table;
	int err, rc;
	bool ok;

	/* Each line as it happens, also into a pipe or a log. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = parse(argc, argv, &o);
	if (rc)
		return rc;
	err = WSPStartupEx(MAKEWORD(2, 2), &data, NULL, NULL, &table);
	if (err) {
		fail("WSPStartupEx", err);
		return 1;
	}
	ok = o.server ? server(&o) : client(&o);
	WSPCleanup(&err);
	return ok ? 0 : 1;
}

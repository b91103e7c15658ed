/*
 * The switch's stream sockets (nicsim_switch.h) against a hostile peer.
 * One end of each connection is a switch socket; the other is a peer that
 * speaks the session protocol (docs/session-protocol.md) itself, with raw
 * SPI calls (WSPSend, WSPRecv, WSPRegisterMemory) and the protocol's codec,
 * and then breaks it: a bad HELLO, a malformed header, a message out of
 * sequence or beyond its credit, a stream offset or a done message out of
 * place, a forged descriptor, data after SHUTDOWN, a truncated or empty
 * message, an ABORT; and, with two large transfers outstanding (section
 * 6), done messages and SINK_AVAILs out of order or across transfers,
 * credit updates below their bound, the peer dying.  For each case:
 *
 *   - the switch's application gets the error the protocol names:
 *     ECONNABORTED from recv and send, with a line on stderr naming the
 *     check (captured and matched), or ECONNRESET for the peer's ABORT and
 *     for a connection the SPI reset;
 *   - no byte of the bad message or after it reaches the application, and
 *     the valid bytes before it arrive in order or not at all;
 *   - the peer sees its connection end: the switch's ABORT with the reason
 *     of section 9, or its receives failing;
 *   - every registration of both ends is released: the TPT occupancy of
 *     both NICs back where it was.
 *
 * Each case runs twice: with the switch accepting the peer's connection and
 * with the switch connecting to the peer.  A peer that keeps every rule
 * runs the same way first, so that a case can only pass for its own reason.
 * The NICs are the test_spi_* fixture (nstspidata.h): the switch on A, the
 * peer on B.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "nicsim_switch.h"
#include "nss_proto.h"
#include "nstest.h"
#include "nstnic.h"
#include "nstspidata.h"

#define HP_RECVS 32u  /* receives the peer posts for the switch's messages */
#define HP_SENDS 120u /* messages the peer may send (the SPI allows 128 in flight) */
#define HP_SIZE 8192u /* bytes of each receive and each send slot: more than the switch's */
#define END_MS 20000  /* how long the peer waits for its connection to end */
#define TIMEO_S 20    /* the switch application's SO_RCVTIMEO and SO_SNDTIMEO */
#define PAT 4099u     /* the stream's pattern repeats every PAT bytes */
#define SEED_OK 21u   /* the bytes of the peer's stream */
#define SEED_BAD 99u  /* bytes the switch must never deliver */
#define PREFIX1 1000u /* valid bytes the application reads before the bad message */
#define PREFIX2 700u  /* valid bytes sent just before it, perhaps never read */
#define LARGE \
	(4u   \
	 << 20) /* a send that moves by RDMA straight from the application's buffer (over the 1 MiB staging buffer), and waits for the done message */

/* The byte at stream offset k of the stream with this seed. */
static uint8_t pat(uint64_t k, uint32_t seed)
{
	uint32_t j = (uint32_t)(k % PAT);

	return (uint8_t)(j * 131u + (j >> 7) * 29u + seed);
}

static void fill(uint8_t *p, size_t n, uint64_t off, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pat(off + i, seed);
}

/* ---- The switch's stderr ------------------------------------------------------------ */

/*
 * While a case runs, file descriptor 2 is a pipe that a thread copies to
 * the real stderr (so that the log still shows everything) and keeps, so
 * that the case can look for the line the switch must write.
 */
static struct {
	int saved, rd;
	pthread_t t;
	pthread_mutex_t lock;
	char text[32768];
	size_t len;
} cap = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void *cap_main(void *arg)
{
	char b[1024];
	ssize_t n;

	(void)arg;
	while ((n = read(cap.rd, b, sizeof(b))) > 0) {
		if (write(cap.saved, b, (size_t)n) != n) {
			/* The real stderr is gone: keep the text anyway. */
		}
		pthread_mutex_lock(&cap.lock);
		if ((size_t)n > sizeof(cap.text) - 1 - cap.len)
			n = (ssize_t)(sizeof(cap.text) - 1 - cap.len);
		memcpy(cap.text + cap.len, b, (size_t)n);
		cap.len += (size_t)n;
		cap.text[cap.len] = '\0';
		pthread_mutex_unlock(&cap.lock);
	}
	return NULL;
}

static void cap_start(void)
{
	int p[2];

	fflush(stderr);
	NST_REQUIRE_EQ(pipe2(p, O_CLOEXEC), 0);
	cap.saved = fcntl(2, F_DUPFD_CLOEXEC, 3);
	NST_REQUIRE(cap.saved >= 0);
	NST_REQUIRE(dup2(p[1], 2) == 2);
	close(p[1]);
	cap.rd = p[0];
	cap.len = 0;
	cap.text[0] = '\0';
	NST_REQUIRE_EQ(pthread_create(&cap.t, NULL, cap_main, NULL), 0);
}

/* The real stderr back; the text written meanwhile stays in cap.text. */
static void cap_stop(void)
{
	fflush(stderr);
	/* The pipe's last write end goes: the thread reads to its end, still
	 * copying to saved, which is closed only then. */
	dup2(cap.saved, 2);
	pthread_join(cap.t, NULL);
	close(cap.saved);
	close(cap.rd);
}

/* ---- The hostile peer ------------------------------------------------------------ */

/* The peer's end of a connection: its SPI socket and buffers. */
struct hp {
	SOCKET s;
	int ev;       /* the eventfd of every operation of the peer */
	uint8_t *mem; /* HP_RECVS receive slots, then HP_SENDS send slots */
	HANDLE h;
	WSAOVERLAPPED rov[HP_RECVS], sov[HP_SENDS];
	uint32_t rnext;      /* the receive that completes next (in the order posted) */
	uint32_t nsent;      /* send slots used */
	uint32_t seq;        /* the seq of the peer's next message */
	uint64_t off;        /* the peer's stream: bytes sent so far */
	struct nss_hello sw; /* the switch's HELLO */
	uint8_t *xbuf;       /* a buffer the peer exposed, its length and descriptor */
	uint32_t xlen;
	struct nicsim_rdma_desc xdesc;
	bool exposed;
	uint8_t *lbuf; /* a buffer the peer registered for its own RDMA */
	uint32_t llen;
	HANDLE lh;
	bool saw_abort; /* the switch's ABORT came */
	bool done_ok;   /* the switch's done messages may come before its end */
};

/* Wait for one of the peer's operations until deadline (monotonic ns): 0
 * (*bytes: its length), its WSA error, or WSAETIMEDOUT. */
static int hp_wait(struct hp *hp, WSAOVERLAPPED *ov, DWORD *bytes, uint64_t deadline)
{
	for (;;) {
		DWORD n = 0, flags = 0;
		int err = 0;
		uint64_t now, v;

		if (WSPGetOverlappedResult(hp->s, ov, &n, FALSE, &flags, &err)) {
			*bytes = n;
			return 0;
		}
		if (err != WSA_IO_INCOMPLETE)
			return err ? err : WSAECONNRESET;
		now = nst_now_ns();
		if (now >= deadline)
			return WSAETIMEDOUT;
		/* Every completion of the peer's signals ev: wait for the next. */
		event_fires(hp->ev, (int)((deadline - now) / 1000000u) + 1);
		if (read(hp->ev, &v, sizeof(v)) < 0) {
			/* Not signalled: the status is read again anyway. */
		}
	}
}

/* Post send slot n with len bytes already in it: 0 or the WSA error. */
static int hp_post(struct hp *hp, uint32_t n, size_t len)
{
	WSABUF b = {.len = (ULONG)len, .buf = (char *)hp->mem + (size_t)(HP_RECVS + n) * HP_SIZE};
	WSAOVERLAPPED *ov = &hp->sov[n];
	DWORD sent = 0;
	int err = 0;

	memset(ov, 0, sizeof(*ov));
	ov->hEvent = hp->ev;
	if (WSPSend(hp->s, &b, 1, &sent, 0, ov, NULL, NULL, &err) == 0 || err == WSA_IO_PENDING)
		return 0;
	return err;
}

/* The next free send slot. */
static uint8_t *hp_slot(struct hp *hp)
{
	NST_REQUIRE(hp->nsent < HP_SENDS);
	return hp->mem + (size_t)(HP_RECVS + hp->nsent) * HP_SIZE;
}

/* Send the len bytes at p as one message, whatever they are: 0 or the WSA
 * error (the switch may have closed already: the case decides). */
static int hp_send_bytes(struct hp *hp, const void *p, size_t len)
{
	NST_REQUIRE(len <= HP_SIZE);
	memcpy(hp_slot(hp), p, len);
	return hp_post(hp, hp->nsent++, len);
}

/* A valid message, encoded by the protocol's codec. */
static int hp_send(struct hp *hp, const struct nss_hdr *h, const void *desc, const void *data)
{
	long n = nss_encode(h, desc, data, hp_slot(hp), HP_SIZE);

	NST_CHECK_(n > 0, CU_TRUE, "nss_encode of type %u: %ld", h->type, n);
	return hp_post(hp, hp->nsent++, (size_t)n);
}

static void put_le(uint8_t *p, uint64_t v, unsigned size)
{
	for (unsigned i = 0; i < size; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/*
 * Any header, on the wire as section 2 lays it out (the peer's own encoder:
 * nss_encode refuses what is not well formed), then desc_bytes of desc at
 * 32 and data_bytes of data after the descriptor padded to 8; the message
 * is len bytes, however many that is.
 */
static int hp_send_raw(struct hp *hp, const struct nss_hdr *h, const void *desc, size_t desc_bytes,
		       const void *data, size_t data_bytes, size_t len)
{
	uint8_t b[HP_SIZE];
	size_t at = NSS_HDR_LEN + ((desc_bytes + 7u) & ~(size_t)7u);

	NST_REQUIRE(at + data_bytes <= sizeof(b) && len <= sizeof(b));
	memset(b, 0, sizeof(b));
	b[0] = h->type;
	b[1] = h->flags;
	put_le(b + 2, h->desc_len, 2);
	put_le(b + 4, h->seq, 4);
	put_le(b + 8, h->credit_limit, 4);
	put_le(b + 12, h->data_len, 4);
	put_le(b + 16, h->rdma_len, 4);
	put_le(b + 20, h->arg, 4);
	put_le(b + 24, h->stream_off, 8);
	if (desc_bytes)
		memcpy(b + NSS_HDR_LEN, desc, desc_bytes);
	if (data_bytes)
		memcpy(b + at, data, data_bytes);
	return hp_send_bytes(hp, b, len);
}

/* The header of the peer's next message: its seq taken, at its stream's end. */
static struct nss_hdr hp_hdr(struct hp *hp, uint8_t type)
{
	return (struct nss_hdr){
	    .type = type, .seq = hp->seq++, .credit_limit = HP_RECVS - 1, .stream_off = hp->off};
}

/* The peer's HELLO body: it posted HP_RECVS receives of HP_SIZE bytes. */
static struct nss_hello hp_hello_body(uint16_t features)
{
	return (struct nss_hello){.version = NSS_VERSION,
				  .features = features,
				  .recv_count = HP_RECVS,
				  .recv_size = HP_SIZE,
				  .max_rdma = 16u << 20, /* LARGE in one transfer */
				  .rdma_threshold = 65536,
				  .desc_len = NICSIM_RDMA_DESC_SIZE};
}

/* HELLO with the body given (NSS_HELLO_LEN bytes) and the credit limit its
 * receives give, or as told. */
static int hp_send_hello(struct hp *hp, const uint8_t *body, uint32_t credit_limit)
{
	struct nss_hdr h = hp_hdr(hp, NSS_HELLO);

	h.data_len = NSS_HELLO_LEN;
	h.credit_limit = credit_limit;
	return hp_send_raw(hp, &h, NULL, 0, body, NSS_HELLO_LEN, NSS_HDR_LEN + NSS_HELLO_LEN);
}

static int hp_hello(struct hp *hp, uint16_t features)
{
	struct nss_hello hl = hp_hello_body(features);
	uint8_t body[NSS_HELLO_LEN];

	nss_hello_encode(&hl, body);
	return hp_send_hello(hp, body, HP_RECVS - 1);
}

/* DATA of len bytes of the stream with seed, at the peer's stream's end. */
static int hp_data(struct hp *hp, uint32_t len, uint32_t seed)
{
	struct nss_hdr h = hp_hdr(hp, NSS_DATA);
	uint8_t d[HP_SIZE];

	NST_REQUIRE(len <= HP_SIZE - NSS_HDR_LEN);
	h.data_len = len;
	fill(d, len, hp->off, seed);
	hp->off += len;
	return hp_send(hp, &h, NULL, d);
}

/*
 * The switch's next message, in the order the peer's receives were posted:
 * 0 with *m decoded (pointing into the receive), the receive's WSA error,
 * or WSAETIMEDOUT after ms.  The switch is the party under test, not the
 * peer: a message it sent that does not decode fails the test.
 */
static int hp_next(struct hp *hp, struct nss_msg *m, int ms)
{
	uint64_t deadline = nst_now_ns() + (uint64_t)ms * 1000000u;
	DWORD n = 0;
	const char *why = NULL;
	int err;

	NST_REQUIRE(hp->rnext < HP_RECVS);
	err = hp_wait(hp, &hp->rov[hp->rnext], &n, deadline);
	if (err)
		return err;
	NST_CHECK_(nss_decode(hp->mem + (size_t)hp->rnext * HP_SIZE, n, m, &why) == 0, CU_TRUE,
		   "the switch's message %u does not decode: %s", hp->rnext, why ? why : "?");
	hp->rnext++;
	return 0;
}

/* The switch's next message that is not a credit update: 0 or as hp_next. */
static int hp_next_not_update(struct hp *hp, struct nss_msg *m)
{
	int err;

	do
		err = hp_next(hp, m, END_MS);
	while (!err && m->h.type == NSS_DATA && !m->h.data_len);
	return err;
}

/*
 * The peer's connection must end: the switch's messages up to its ABORT
 * with reason (0: the switch must send none), or a receive that fails.
 * The switch's HELLO, credit updates and DATA may come first.
 */
static void hp_expect_end(struct hp *hp, uint32_t reason, const char *what)
{
	for (;;) {
		struct nss_msg m;
		int err = hp_next(hp, &m, END_MS);

		if (err) {
			NST_CHECK_(err != WSAETIMEDOUT, CU_FALSE,
				   "%s: the peer's connection did not end within %d ms", what,
				   END_MS);
			return;
		}
		if (m.h.type == NSS_ABORT) {
			NST_CHECK_(reason && m.h.arg == reason, CU_FALSE,
				   "%s: the switch's ABORT says %u, want %u", what, m.h.arg,
				   reason);
			hp->saw_abort = true;
			return;
		}
		if (hp->done_ok && (m.h.type == NSS_RD_DONE || m.h.type == NSS_WR_DONE))
			continue;
		NST_CHECK_(m.h.type == NSS_DATA || m.h.type == NSS_HELLO, CU_FALSE,
			   "%s: the switch sent type %u before its end", what, m.h.type);
		if (m.h.type != NSS_DATA && m.h.type != NSS_HELLO)
			return;
	}
}

/* Expose len bytes of the peer's, the stream with seed from off, for the
 * switch to read or write. */
static void hp_expose(struct hp *hp, uint32_t len, uint64_t off, uint32_t seed)
{
	hp->xbuf = map(len);
	NST_REQUIRE(hp->xbuf != NULL);
	hp->xlen = len;
	fill(hp->xbuf, len, off, seed);
	NST_REQUIRE_EQ(expose(hp->s, hp->xbuf, len, MEM_READWRITE, &hp->xdesc), 0);
	hp->exposed = true;
}

/* A buffer of len bytes registered for the peer's own RDMA. */
static void hp_local(struct hp *hp, uint32_t len)
{
	hp->lbuf = map(len);
	NST_REQUIRE(hp->lbuf != NULL);
	hp->llen = len;
	hp->lh = reg(hp->s, hp->lbuf, len, MEM_READWRITE);
	NST_REQUIRE(hp->lh != NULL);
}

/* RDMA WRITE (or READ) of len bytes of lbuf at off to (from) the switch's
 * buffer desc describes, waited for: 0 or its WSA error. */
static int hp_rdma(struct hp *hp, bool write, uint32_t off, uint32_t len, const void *desc,
		   uint16_t desc_len)
{
	WSABUFEX b = {.len = len, .buf = (char *)hp->lbuf + off, .handle = hp->lh};
	WSAOVERLAPPED ov = {.hEvent = hp->ev};
	DWORD n = 0;
	int err = 0, rc;

	if (write)
		rc = WSPRdmaWrite(hp->s, &b, 1, (void *)desc, desc_len, 0, &n, 0, &ov, NULL, NULL,
				  &err);
	else
		rc = WSPRdmaRead(hp->s, &b, 1, (void *)desc, desc_len, 0, &n, 0, &ov, NULL, NULL,
				 &err);
	if (rc && err != WSA_IO_PENDING)
		return err;
	err = hp_wait(hp, &ov, &n, nst_now_ns() + (uint64_t)END_MS * 1000000u);
	if (err == WSAETIMEDOUT) {
		/* ov must not outlive this frame while the operation is pending. */
		WSPCloseSocket(hp->s, &rc);
		hp->s = INVALID_SOCKET;
	}
	return err;
}

/* Register the peer's buffers, post its receives, take the switch's HELLO. */
static void hp_start(struct hp *hp)
{
	size_t bytes = (size_t)(HP_RECVS + HP_SENDS) * HP_SIZE;
	struct nss_msg m;
	const char *why = NULL;

	hp->ev = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	NST_REQUIRE(hp->ev >= 0);
	hp->mem = map(bytes);
	NST_REQUIRE(hp->mem != NULL);
	hp->h = reg(hp->s, hp->mem, (DWORD)bytes, MEM_READWRITE);
	NST_REQUIRE(hp->h != NULL);
	for (uint32_t i = 0; i < HP_RECVS; i++) {
		WSABUF b = {.len = HP_SIZE, .buf = (char *)hp->mem + (size_t)i * HP_SIZE};
		DWORD n = 0, flags = 0;
		int err = 0;

		memset(&hp->rov[i], 0, sizeof(hp->rov[i]));
		hp->rov[i].hEvent = hp->ev;
		NST_REQUIRE(WSPRecv(hp->s, &b, 1, &n, &flags, &hp->rov[i], NULL, NULL, &err) == 0 ||
			    err == WSA_IO_PENDING);
	}
	NST_REQUIRE_EQ(hp_next(hp, &m, END_MS), 0);
	NST_REQUIRE_EQ(m.h.type, NSS_HELLO);
	NST_REQUIRE_EQ(m.h.seq, 0);
	NST_REQUIRE_EQ(nss_hello_decode(m.data, m.h.data_len, &hp->sw, &why), 0);
	/* The peer's DATA messages (PREFIX1 the largest) fit the switch's receives. */
	NST_CHECK_(hp->sw.recv_size >= NSS_HDR_LEN + PREFIX1, CU_TRUE,
		   "the switch's receives take %u bytes: the peer's messages do not fit",
		   hp->sw.recv_size);
}

/* Deregister, close the peer's socket (flushing what is pending), free. */
static void hp_close(struct hp *hp)
{
	int err = 0;

	if (hp->s != INVALID_SOCKET) {
		if (hp->exposed)
			WSPDeregisterRdmaMemory(hp->s, &hp->xdesc, sizeof(hp->xdesc), &err);
		if (hp->h)
			WSPDeregisterMemory(hp->s, hp->h, &err);
		if (hp->lh)
			WSPDeregisterMemory(hp->s, hp->lh, &err);
		NST_EQ(WSPCloseSocket(hp->s, &err), 0);
	}
	if (hp->lbuf)
		munmap(hp->lbuf, hp->llen);
	if (hp->mem)
		munmap(hp->mem, (size_t)(HP_RECVS + HP_SENDS) * HP_SIZE);
	if (hp->xbuf)
		munmap(hp->xbuf, hp->xlen);
	if (hp->ev >= 0)
		close(hp->ev);
	free(hp);
}

/* ---- Connecting the two ends ----------------------------------------------------------- */

enum role { SW_ACCEPTS, SW_CONNECTS };

static const char *role_name(enum role r)
{
	return r == SW_ACCEPTS ? "switch accepts" : "switch connects";
}

static void set_timeouts(int s)
{
	struct timeval tv = {.tv_sec = TIMEO_S};

	NST_EQ(nsw_setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	NST_EQ(nsw_setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)), 0);
}

struct sw_acceptor {
	int l, s, err;
};

static void *sw_accept_main(void *arg)
{
	struct sw_acceptor *a = arg;

	a->s = nsw_accept(a->l, NULL, NULL);
	a->err = errno;
	return NULL;
}

/* The switch socket on A (*sw) and the peer on B, connected as role says;
 * the peer has taken the switch's HELLO. */
static struct hp *open_pair(enum role role, int *sw)
{
	uint16_t port = next_port++;
	struct hp *hp = calloc(1, sizeof(*hp));
	int err = 0;

	NST_REQUIRE(hp != NULL);
	hp->s = INVALID_SOCKET;
	hp->ev = -1;
	if (role == SW_ACCEPTS) {
		struct sockaddr_in at = addr_of(ADDR_A, port);
		struct sw_acceptor a = {.l = nsw_socket(AF_INET, SOCK_STREAM, 0)};
		pthread_t t;

		NST_REQUIRE(a.l >= 0);
		set_timeouts(a.l); /* bounds the accept if the connect fails */
		NST_REQUIRE_EQ(nsw_bind(a.l, (struct sockaddr *)&at, sizeof(at)), 0);
		NST_REQUIRE_EQ(nsw_listen(a.l, 1), 0);
		NST_REQUIRE_EQ(pthread_create(&t, NULL, sw_accept_main, &a), 0);
		hp->s = sock_on(ADDR_B, 0);
		NST_REQUIRE(hp->s != INVALID_SOCKET);
		err = try_connect(hp->s, ADDR_A, port);
		pthread_join(t, NULL);
		NST_EQ(nsw_close(a.l), 0);
		NST_CHECK_(err == 0, CU_TRUE, "the peer's connect: %s", nicsim_wsa_name(err));
		NST_CHECK_(a.s >= 0, CU_TRUE, "nsw_accept: %s", strerror(a.err));
		*sw = a.s;
	} else {
		struct sockaddr_in to = addr_of(ADDR_B, port), from = addr_of(ADDR_A, 0);
		struct acceptor a = {.l = sock_on(ADDR_B, port), .s = INVALID_SOCKET};
		int s = nsw_socket(AF_INET, SOCK_STREAM, 0), rc, e;
		pthread_t t;

		NST_REQUIRE(a.l != INVALID_SOCKET && s >= 0);
		NST_REQUIRE_EQ(WSPListen(a.l, 1, &err), 0);
		NST_REQUIRE_EQ(pthread_create(&t, NULL, accept_main, &a), 0);
		NST_REQUIRE_EQ(nsw_bind(s, (struct sockaddr *)&from, sizeof(from)), 0);
		rc = nsw_connect(s, (struct sockaddr *)&to, sizeof(to));
		e = errno;
		/* Closing the listener ends an accept a failed connect left waiting. */
		if (rc)
			WSPCloseSocket(a.l, &err);
		pthread_join(t, NULL);
		if (!rc)
			WSPCloseSocket(a.l, &err);
		NST_CHECK_(rc == 0, CU_TRUE, "nsw_connect: %s", strerror(e));
		NST_CHECK_(a.s != INVALID_SOCKET, CU_TRUE, "the peer's accept: %s",
			   nicsim_wsa_name(a.err));
		hp->s = a.s;
		*sw = s;
	}
	set_timeouts(*sw);
	hp_start(hp);
	return hp;
}

/* ---- What the switch's application sees ---------------------------------------------- */

/*
 * Read everything the switch's application still gets: bytes of the peer's
 * stream from *off, in order, never beyond limit, then -1 with errno want.
 * Fails on a wrong or out-of-place byte, end-of-file, a timeout.
 */
static void sw_drain(int sw, uint64_t *off, uint64_t limit, int want, const char *what)
{
	static uint8_t buf[1 << 16];

	for (;;) {
		ssize_t n = nsw_recv(sw, buf, sizeof(buf), 0);

		if (n < 0) {
			NST_CHECK_(errno == want, CU_FALSE, "%s: recv: %s, want %s", what,
				   strerror(errno), strerror(want));
			return;
		}
		if (n == 0) {
			NST_CHECK_(false, CU_FALSE, "%s: end-of-file, want %s", what,
				   strerror(want));
			return;
		}
		for (ssize_t i = 0; i < n; i++) {
			if (*off + (uint64_t)i >= limit ||
			    buf[i] != pat(*off + (uint64_t)i, SEED_OK)) {
				NST_CHECK_(
				    false, CU_FALSE,
				    "%s: delivered 0x%02x at stream offset %llu (valid bytes "
				    "end at %llu; want 0x%02x)",
				    what, buf[i], (unsigned long long)(*off + (uint64_t)i),
				    (unsigned long long)limit, pat(*off + (uint64_t)i, SEED_OK));
				return;
			}
		}
		*off += (uint64_t)n;
	}
}

/* Read exactly len bytes of the peer's stream at *off. */
static bool sw_read_exact(int sw, uint64_t *off, uint32_t len, const char *what)
{
	uint8_t buf[HP_SIZE];
	ssize_t n;

	NST_REQUIRE(len <= sizeof(buf));
	n = nsw_recv(sw, buf, len, MSG_WAITALL);
	NST_CHECK_(n == (ssize_t)len, CU_FALSE, "%s: recv of %u: %zd (%s)", what, len, n,
		   n < 0 ? strerror(errno) : "short");
	if (n != (ssize_t)len)
		return false;
	for (uint32_t i = 0; i < len; i++) {
		if (buf[i] != pat(*off + i, SEED_OK)) {
			NST_CHECK_(false, CU_FALSE, "%s: byte at %llu is 0x%02x, want 0x%02x", what,
				   (unsigned long long)(*off + i), buf[i], pat(*off + i, SEED_OK));
			return false;
		}
	}
	*off += len;
	return true;
}

/* ---- After a case ------------------------------------------------------------------- */

/* The switch's stderr during the case names the check why (and says it
 * aborts), or, why NULL, has no such line. */
static void check_log(const char *why, const char *what)
{
	const char *line;

	pthread_mutex_lock(&cap.lock);
	line = strstr(cap.text, "aborting the connection");
	if (why)
		NST_CHECK_(line && strstr(line, why), CU_FALSE,
			   "%s: the switch's stderr does not name \"%s\": [%.200s]", what, why,
			   cap.text);
	else
		NST_CHECK_(!line, CU_FALSE, "%s: the switch's stderr says it aborted: [%.200s]",
			   what, cap.text);
	pthread_mutex_unlock(&cap.lock);
}

/* The TPT occupancy of both NICs is back where it was. */
static void check_tpt(int base_a, int base_b, const char *what)
{
	NST_CHECK_(nst_wait_tpt_in_use(sock_a, base_a, WAIT_MS) == base_a, CU_FALSE,
		   "%s: NIC A's TPT not back to %d", what, base_a);
	NST_CHECK_(nst_wait_tpt_in_use(sock_b, base_b, WAIT_MS) == base_b, CU_FALSE,
		   "%s: NIC B's TPT not back to %d", what, base_b);
}

/* ---- The cases ------------------------------------------------------------------------ */

/*
 * One way to break the protocol.  Unless hello is set, the peer first sends
 * a valid HELLO with its features, PREFIX1 bytes that the application reads,
 * and PREFIX2 more; then bad() misbehaves, and the peer sends more DATA of
 * bytes that must never arrive.  With hello set, bad() sends the first
 * message itself.
 */
struct hcase {
	const char *name;
	void (*bad)(struct hp *hp);
	const char *why; /* the check the switch's stderr must name; NULL: no line */
	uint32_t reason; /* the reason of the ABORT the peer may get (0: none) */
	int err;         /* the switch application's errno */
	bool hello;
	/* The peer's HELLO lacks CAN_READ (the switch's sends take the write
	 * path), or READABLE (the peer's sends take it). */
	bool no_can_read, not_readable;
	uint32_t extra; /* valid bytes bad() adds to the stream (a SRC_AVAIL's head) */
	bool no_more;   /* nothing after bad(): the switch's own RDMA is to fail */
	bool dies;      /* bad() closes the peer's socket: its end is not awaited */
};

/* Run c with the switch in role: every check of the top of this file. */
static void run_case(const struct hcase *c, enum role role)
{
	char what[160];
	int base_a = nst_tpt_in_use(sock_a), base_b = nst_tpt_in_use(sock_b);
	uint64_t got = 0;
	struct hp *hp;
	int sw = -1;
	char x = 'x';
	bool saw_abort;

	snprintf(what, sizeof(what), "%s (%s)", c->name, role_name(role));
	NST_REQUIRE(base_a >= 0 && base_b >= 0);
	printf("\n    %-46s %-16s ", c->name, role_name(role));
	fflush(stdout);
	cap_start();
	hp = open_pair(role, &sw);
	if (!c->hello) {
		uint16_t f =
		    (c->no_can_read ? 0 : NSS_F_CAN_READ) | (c->not_readable ? 0 : NSS_F_READABLE);

		NST_REQUIRE_EQ(hp_hello(hp, f), 0);
		NST_REQUIRE_EQ(hp_data(hp, PREFIX1, SEED_OK), 0);
		if (!sw_read_exact(sw, &got, PREFIX1, what))
			goto out;
		NST_REQUIRE_EQ(hp_data(hp, PREFIX2, SEED_OK), 0);
	}
	c->bad(hp);
	/* More messages after the bad one, if the connection still takes them:
	 * none of their bytes may reach the application. */
	if (!c->no_more)
		hp_data(hp, 300, SEED_BAD);
	if (!c->dies)
		hp_expect_end(hp, c->reason, what);
	sw_drain(sw, &got, c->hello ? 0 : PREFIX1 + PREFIX2 + c->extra, c->err, what);
	NST_CHECK_(nsw_send(sw, &x, 1, 0) == -1 && errno == c->err, CU_FALSE,
		   "%s: send after the end: %s, want %s", what, strerror(errno), strerror(c->err));
out:
	NST_EQ(nsw_close(sw), 0);
	saw_abort = hp->saw_abort;
	hp_close(hp);
	cap_stop();
	check_log(c->why, what);
	check_tpt(base_a, base_b, what);
	printf("%s", saw_abort ? "ABORT came" : "connection ended");
}

/* Every case of the list in both roles. */
static void run_cases(const struct hcase *cases, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		run_case(&cases[i], SW_ACCEPTS);
		run_case(&cases[i], SW_CONNECTS);
	}
}

#define RUN(cases) run_cases(cases, sizeof(cases) / sizeof((cases)[0]))

#define F_ALL (NSS_F_CAN_READ | NSS_F_READABLE)

/* ---- A bad first message ----------------------------------------------------------- */

/* HELLO with body as hl says, byte at of the encoded body xor-ed with x. */
static void hello_patched(struct hp *hp, struct nss_hello hl, size_t at, uint8_t x)
{
	uint8_t body[NSS_HELLO_LEN];

	nss_hello_encode(&hl, body);
	if (at < NSS_HELLO_LEN)
		body[at] ^= x;
	hp_send_hello(hp, body, hl.recv_count - 1);
}

static void first_is_data(struct hp *hp)
{
	hp_data(hp, 10, SEED_BAD);
}

static void hello_bad_magic(struct hp *hp)
{
	hello_patched(hp, hp_hello_body(F_ALL), 0, 0xff);
}

static void hello_version_0(struct hp *hp)
{
	struct nss_hello hl = hp_hello_body(F_ALL);

	hl.version = 0;
	hello_patched(hp, hl, NSS_HELLO_LEN, 0);
}

static void hello_3_receives(struct hp *hp)
{
	struct nss_hello hl = hp_hello_body(F_ALL);

	hl.recv_count = 3;
	hello_patched(hp, hl, NSS_HELLO_LEN, 0);
}

/* So many that the credit limit they give, recv_count - 1, is behind seq 1
 * in serial arithmetic: the switch could never send. */
static void hello_4g_receives(struct hp *hp)
{
	struct nss_hello hl = hp_hello_body(F_ALL);

	hl.recv_count = 0xffffffffu;
	hello_patched(hp, hl, NSS_HELLO_LEN, 0);
}

static void hello_511_bytes(struct hp *hp)
{
	struct nss_hello hl = hp_hello_body(F_ALL);

	hl.recv_size = 511;
	hello_patched(hp, hl, NSS_HELLO_LEN, 0);
}

static void hello_reserved(struct hp *hp)
{
	hello_patched(hp, hp_hello_body(F_ALL), 40, 0x01);
}

static void hello_features(struct hp *hp)
{
	hello_patched(hp, hp_hello_body(F_ALL | 0x80), NSS_HELLO_LEN, 0);
}

static void hello_desc_300(struct hp *hp)
{
	struct nss_hello hl = hp_hello_body(F_ALL);

	hl.desc_len = 300;
	hello_patched(hp, hl, NSS_HELLO_LEN, 0);
}

static void hello_max_rdma_4095(struct hp *hp)
{
	struct nss_hello hl = hp_hello_body(F_ALL);

	hl.max_rdma = 4095;
	hello_patched(hp, hl, NSS_HELLO_LEN, 0);
}

static void hello_wrong_credit(struct hp *hp)
{
	struct nss_hello hl = hp_hello_body(F_ALL);
	uint8_t body[NSS_HELLO_LEN];

	nss_hello_encode(&hl, body);
	hp_send_hello(hp, body, HP_RECVS - 2);
}

static void hello_short_body(struct hp *hp)
{
	struct nss_hello hl = hp_hello_body(F_ALL);
	uint8_t body[NSS_HELLO_LEN];
	struct nss_hdr h = hp_hdr(hp, NSS_HELLO);

	nss_hello_encode(&hl, body);
	h.data_len = 40;
	hp_send_raw(hp, &h, NULL, 0, body, 40, NSS_HDR_LEN + 40);
}

static void hello_seq_1(struct hp *hp)
{
	struct nss_hello hl = hp_hello_body(F_ALL);
	uint8_t body[NSS_HELLO_LEN];
	struct nss_hdr h = hp_hdr(hp, NSS_HELLO);

	nss_hello_encode(&hl, body);
	h.seq = 1;
	h.data_len = NSS_HELLO_LEN;
	hp_send_raw(hp, &h, NULL, 0, body, NSS_HELLO_LEN, NSS_HDR_LEN + NSS_HELLO_LEN);
}

static void empty_message(struct hp *hp)
{
	uint8_t none = 0;

	hp_send_bytes(hp, &none, 0);
}

#define BAD_HELLO(fn, sentence)                                                         \
	{                                                                               \
		.name = #fn, .bad = fn, .why = sentence, .reason = NSS_ABORT_BAD_HELLO, \
		.err = ECONNABORTED, .hello = true                                      \
	}

static void test_bad_first_message(void)
{
	static const struct hcase cases[] = {
	    BAD_HELLO(first_is_data, "the first message is not HELLO"),
	    BAD_HELLO(hello_bad_magic, "HELLO magic is not NSSP"),
	    BAD_HELLO(hello_version_0, "HELLO of version 0"),
	    BAD_HELLO(hello_3_receives, "fewer than 4 receives posted"),
	    BAD_HELLO(hello_4g_receives, "more than 2^30 receives posted"),
	    BAD_HELLO(hello_511_bytes, "receives smaller than 512 bytes"),
	    BAD_HELLO(hello_reserved, "HELLO reserved bytes not zero"),
	    BAD_HELLO(hello_features, "HELLO feature bits versions 1 and 2 do not have"),
	    BAD_HELLO(hello_desc_300, "descriptors longer than 256 bytes"),
	    BAD_HELLO(hello_max_rdma_4095, "a largest RDMA under 4 KiB"),
	    BAD_HELLO(hello_wrong_credit, "HELLO's credit limit is not its receives"),
	    BAD_HELLO(hello_short_body, "HELLO body not 64 to 256 bytes"),
	    BAD_HELLO(hello_seq_1, "HELLO that is not the first message"),
	    BAD_HELLO(empty_message, "shorter than the header"),
	};

	RUN(cases);
}

/* ---- Malformed messages ---------------------------------------------------------------- */

static void type_9(struct hp *hp)
{
	struct nss_hdr h = hp_hdr(hp, 9);

	hp_send_raw(hp, &h, NULL, 0, NULL, 0, NSS_HDR_LEN);
}

static void type_0(struct hp *hp)
{
	struct nss_hdr h = hp_hdr(hp, 0);

	hp_send_raw(hp, &h, NULL, 0, NULL, 0, NSS_HDR_LEN);
}

/* DATA of 10 bytes that must never arrive, with h as given. */
static void bad_data(struct hp *hp, struct nss_hdr h, size_t data_bytes, size_t len)
{
	uint8_t d[256];

	fill(d, sizeof(d), h.stream_off, SEED_BAD);
	hp_send_raw(hp, &h, NULL, 0, d, data_bytes, len);
}

static void flags_set(struct hp *hp)
{
	struct nss_hdr h = hp_hdr(hp, NSS_DATA);

	h.flags = 0x80;
	h.data_len = 10;
	bad_data(hp, h, 10, NSS_HDR_LEN + 10);
}

static void arg_on_data(struct hp *hp)
{
	struct nss_hdr h = hp_hdr(hp, NSS_DATA);

	h.arg = 1;
	h.data_len = 10;
	bad_data(hp, h, 10, NSS_HDR_LEN + 10);
}

static void desc_300(struct hp *hp)
{
	struct nss_hdr h = hp_hdr(hp, NSS_SRC_AVAIL);
	uint8_t desc[300];

	memset(desc, 0x5a, sizeof(desc));
	h.desc_len = sizeof(desc);
	h.data_len = 1;
	h.rdma_len = 4096;
	hp_send_raw(hp, &h, desc, sizeof(desc), desc, 1, NSS_HDR_LEN + 304 + 1);
}

static void desc_on_data(struct hp *hp)
{
	struct nss_hdr h = hp_hdr(hp, NSS_DATA);
	uint8_t desc[32], d[10];

	memset(desc, 0x5a, sizeof(desc));
	fill(d, sizeof(d), h.stream_off, SEED_BAD);
	h.desc_len = sizeof(desc);
	h.data_len = sizeof(d);
	hp_send_raw(hp, &h, desc, sizeof(desc), d, sizeof(d), NSS_HDR_LEN + 32 + 10);
}

static void padding_not_zero(struct hp *hp)
{
	struct nss_hdr h = hp_hdr(hp, NSS_SRC_AVAIL);
	uint8_t desc[24], d[1];

	memset(desc, 0x5a, sizeof(desc)); /* 20 bytes of descriptor, then padding */
	fill(d, sizeof(d), h.stream_off, SEED_BAD);
	h.desc_len = 20;
	h.data_len = 1;
	h.rdma_len = 4096;
	hp_send_raw(hp, &h, desc, sizeof(desc), d, 1, NSS_HDR_LEN + 24 + 1);
}

/* A descriptor said to follow the header, and 4 bytes of it there. */
static void desc_past_end(struct hp *hp)
{
	struct nss_hdr h = hp_hdr(hp, NSS_SINK_AVAIL);
	uint8_t desc[4] = {1, 2, 3, 4};

	h.stream_off = 0;
	h.desc_len = 32;
	h.rdma_len = 4096;
	hp_send_raw(hp, &h, desc, sizeof(desc), NULL, 0, NSS_HDR_LEN + sizeof(desc));
}

/* The header says 100 bytes of data; 60 come. */
static void truncated(struct hp *hp)
{
	struct nss_hdr h = hp_hdr(hp, NSS_DATA);

	h.data_len = 100;
	bad_data(hp, h, 60, NSS_HDR_LEN + 60);
}

static void bytes_after_data(struct hp *hp)
{
	struct nss_hdr h = hp_hdr(hp, NSS_DATA);

	h.data_len = 10;
	bad_data(hp, h, 20, NSS_HDR_LEN + 20);
}

static void shorter_than_header(struct hp *hp)
{
	struct nss_hdr h = hp_hdr(hp, NSS_DATA);

	bad_data(hp, h, 0, 20);
}

static void abort_unknown_reason(struct hp *hp)
{
	struct nss_hdr h = hp_hdr(hp, NSS_ABORT);

	h.arg = 77;
	hp_send_raw(hp, &h, NULL, 0, NULL, 0, NSS_HDR_LEN);
}

#define PROTO(fn, sentence)                                                            \
	{                                                                              \
		.name = #fn, .bad = fn, .why = sentence, .reason = NSS_ABORT_PROTOCOL, \
		.err = ECONNABORTED                                                    \
	}

static void test_malformed_messages(void)
{
	static const struct hcase cases[] = {
	    PROTO(type_9, "unknown message type"),
	    PROTO(type_0, "unknown message type"),
	    PROTO(flags_set, "flags other than 0"),
	    PROTO(arg_on_data, "arg other than 0"),
	    PROTO(desc_300, "descriptor longer than 256 bytes"),
	    PROTO(desc_on_data, "a descriptor on a type that carries none"),
	    PROTO(padding_not_zero, "padding after the descriptor not zero"),
	    PROTO(desc_past_end, "lengths that run past the message"),
	    PROTO(truncated, "lengths that run past the message"),
	    PROTO(bytes_after_data, "bytes after the message's data"),
	    PROTO(shorter_than_header, "shorter than the header"),
	    PROTO(empty_message, "shorter than the header"),
	    PROTO(abort_unknown_reason, "ABORT without a known reason"),
	};

	RUN(cases);
}

/* ---- Sequence, credit and stream offsets ----------------------------------------------- */

static void seq_skipped(struct hp *hp)
{
	hp->seq++;
	hp_data(hp, 10, SEED_BAD);
}

static void seq_repeated(struct hp *hp)
{
	hp->seq--;
	hp->off -= PREFIX2; /* the last DATA's seq and offset again */
	hp_data(hp, PREFIX2, SEED_BAD);
}

static void credit_backwards(struct hp *hp)
{
	struct nss_hdr h = hp_hdr(hp, NSS_DATA);

	h.credit_limit = HP_RECVS - 2;
	h.data_len = 10;
	bad_data(hp, h, 10, NSS_HDR_LEN + 10);
}

static void data_ahead(struct hp *hp)
{
	struct nss_hdr h = hp_hdr(hp, NSS_DATA);

	h.stream_off += 5;
	h.data_len = 10;
	bad_data(hp, h, 10, NSS_HDR_LEN + 10);
}

static void data_behind(struct hp *hp)
{
	struct nss_hdr h = hp_hdr(hp, NSS_DATA);

	h.stream_off -= 100;
	h.data_len = 10;
	bad_data(hp, h, 10, NSS_HDR_LEN + 10);
}

static void update_ahead(struct hp *hp)
{
	struct nss_hdr h = hp_hdr(hp, NSS_DATA);

	h.stream_off += 1;
	hp_send(hp, &h, NULL, NULL);
}

static void hello_again(struct hp *hp)
{
	struct nss_hello hl = hp_hello_body(F_ALL);
	uint8_t body[NSS_HELLO_LEN];
	struct nss_hdr h = {
	    .type = NSS_HELLO, .credit_limit = HP_RECVS - 1, .data_len = NSS_HELLO_LEN};

	nss_hello_encode(&hl, body);
	hp_send(hp, &h, NULL, body);
}

/*
 * Messages with data, one after the other, whatever the credit: more than
 * the switch's HELLO said it posts.  The switch's application reads nothing
 * meanwhile, so the switch takes them until the peer spends credits the
 * rule keeps back.  The switch's NIC holds back (RNR) those beyond the
 * receives posted, so the flood can only be seen on the messages that do
 * arrive: the credit rule is what the switch must check.  Their bytes are
 * valid: they may arrive, in order, up to FLOOD_MAX of them.
 */
#define FLOOD_LEN 16u
#define FLOOD_MAX (HP_SENDS - 8u)
static void credit_flood(struct hp *hp)
{
	uint32_t n = hp->sw.recv_count + 4;

	NST_CHECK_(n <= FLOOD_MAX, CU_TRUE, "the switch posts %u receives: %u messages to flood",
		   hp->sw.recv_count, n);
	for (uint32_t i = 0; i < n; i++)
		hp_data(hp, FLOOD_LEN, SEED_OK);
}

static void test_sequence_credit_offsets(void)
{
	static const struct hcase cases[] = {
	    PROTO(seq_skipped, "a message out of sequence"),
	    PROTO(seq_repeated, "a message out of sequence"),
	    PROTO(credit_backwards, "a credit limit that moves backwards"),
	    PROTO(data_ahead, "DATA not where the stream stands"),
	    PROTO(data_behind, "DATA not where the stream stands"),
	    PROTO(update_ahead, "a credit update not where the stream stands"),
	    PROTO(hello_again, "HELLO after the first message"),
	    {.name = "credit_flood",
	     .bad = credit_flood,
	     .why = "beyond the credit",
	     .reason = NSS_ABORT_CREDIT,
	     .err = ECONNABORTED,
	     .extra = FLOOD_MAX * FLOOD_LEN},
	};

	RUN(cases);
}

/* ---- Messages the state does not allow ------------------------------------------------- */

static void sink_avail_none(struct hp *hp)
{
	struct nss_hdr h = hp_hdr(hp, NSS_SINK_AVAIL);
	uint8_t desc[NICSIM_RDMA_DESC_SIZE] = {0};

	h.stream_off = 0; /* where the switch's stream stands: it sent nothing */
	h.desc_len = sizeof(desc);
	h.rdma_len = 4096;
	hp_send(hp, &h, desc, NULL);
}

static void rd_done_none(struct hp *hp)
{
	struct nss_hdr h = hp_hdr(hp, NSS_RD_DONE);

	h.stream_off = 0;
	h.rdma_len = 4096;
	hp_send(hp, &h, NULL, NULL);
}

static void wr_done_none(struct hp *hp)
{
	struct nss_hdr h = hp_hdr(hp, NSS_WR_DONE);

	h.rdma_len = 4096;
	hp_send(hp, &h, NULL, NULL);
}

static void shutdown_then_data(struct hp *hp)
{
	struct nss_hdr h = hp_hdr(hp, NSS_SHUTDOWN);

	hp_send(hp, &h, NULL, NULL);
	hp_data(hp, 10, SEED_BAD);
}

static void shutdown_twice(struct hp *hp)
{
	struct nss_hdr h = hp_hdr(hp, NSS_SHUTDOWN);

	hp_send(hp, &h, NULL, NULL);
	h = hp_hdr(hp, NSS_SHUTDOWN);
	hp_send(hp, &h, NULL, NULL);
}

static void shutdown_elsewhere(struct hp *hp)
{
	struct nss_hdr h = hp_hdr(hp, NSS_SHUTDOWN);

	h.stream_off += 1;
	hp_send(hp, &h, NULL, NULL);
}

static void test_out_of_place(void)
{
	static const struct hcase cases[] = {
	    {.name = "sink_avail_without_transfer",
	     .bad = sink_avail_none,
	     .why = "SINK_AVAIL with no large transfer outstanding",
	     .reason = NSS_ABORT_PROTOCOL,
	     .err = ECONNABORTED,
	     .no_can_read = true},
	    PROTO(sink_avail_none, "SINK_AVAIL on the read path"),
	    PROTO(rd_done_none, "RD_DONE with no large transfer outstanding"),
	    {.name = "rd_done_on_write_path",
	     .bad = rd_done_none,
	     .why = "RD_DONE on the write path",
	     .reason = NSS_ABORT_PROTOCOL,
	     .err = ECONNABORTED,
	     .no_can_read = true},
	    {.name = "wr_done_without_sink_avail",
	     .bad = wr_done_none,
	     .why = "WR_DONE with no SINK_AVAIL outstanding",
	     .reason = NSS_ABORT_PROTOCOL,
	     .err = ECONNABORTED,
	     .not_readable = true},
	    PROTO(wr_done_none, "WR_DONE on the read path"),
	    PROTO(shutdown_then_data, "data after SHUTDOWN"),
	    PROTO(shutdown_twice, "a second SHUTDOWN"),
	    PROTO(shutdown_elsewhere, "SHUTDOWN not where the stream stands"),
	};

	RUN(cases);
}

/* ---- The peer's ABORT -------------------------------------------------------------------- */

static void peer_aborts(struct hp *hp)
{
	struct nss_hdr h = hp_hdr(hp, NSS_ABORT);

	h.arg = NSS_ABORT_CLOSED;
	hp_send(hp, &h, NULL, NULL);
}

/* The peer resets: ECONNRESET, no line (nothing was wrong), no ABORT back. */
static void test_peer_abort(void)
{
	static const struct hcase cases[] = {
	    {.name = "peer_aborts", .bad = peer_aborts, .err = ECONNRESET},
	};

	RUN(cases);
}

/* ---- Large transfers into the switch --------------------------------------------------- */

#define HEAD 10u         /* inline bytes of the peer's SRC_AVAIL */
#define REST (64u << 10) /* its RDMA part */

/* SRC_AVAIL of HEAD valid bytes inline and REST by RDMA, with desc (or none). */
static void src_avail(struct hp *hp, const void *desc, uint16_t desc_len)
{
	struct nss_hdr h = hp_hdr(hp, NSS_SRC_AVAIL);
	uint8_t d[HEAD];

	fill(d, HEAD, hp->off, SEED_OK);
	h.desc_len = desc_len;
	h.data_len = HEAD;
	h.rdma_len = REST;
	hp->off += HEAD;
	hp_send(hp, &h, desc, d);
}

static void src_avail_no_desc(struct hp *hp)
{
	src_avail(hp, NULL, 0);
}

static void src_avail_desc_on_write_path(struct hp *hp)
{
	uint8_t desc[NICSIM_RDMA_DESC_SIZE] = {0};

	src_avail(hp, desc, sizeof(desc));
}

/* Read path: a descriptor of random bytes, which no provider can use. */
static void src_avail_garbage(struct hp *hp)
{
	uint8_t desc[NICSIM_RDMA_DESC_SIZE];

	fill(desc, sizeof(desc), 0, SEED_BAD);
	src_avail(hp, desc, sizeof(desc));
}

/* Read path: a real descriptor of 4 KiB, altered to cover the whole
 * transfer: the provider takes it, the peer's NIC refuses the READ. */
static void src_avail_forged(struct hp *hp)
{
	struct nicsim_rdma_desc d;

	hp_expose(hp, PAGE, hp->off + HEAD, SEED_BAD);
	d = hp->xdesc;
	d.len = REST;
	src_avail(hp, &d, sizeof(d));
}

/* Write path: the switch's SINK_AVAIL for the transfer: its header, and
 * its descriptor into desc if not NULL. */
static struct nss_hdr sink_avail_of(struct hp *hp, uint8_t desc[NSS_DESC_MAX])
{
	struct nss_msg m;

	memset(&m, 0, sizeof(m));
	NST_CHECK_(hp_next_not_update(hp, &m) == 0, CU_FALSE, "no SINK_AVAIL came");
	NST_EQ(m.h.type, NSS_SINK_AVAIL);
	NST_EQ_U(m.h.stream_off, hp->off);
	if (desc && m.desc)
		memcpy(desc, m.desc, m.h.desc_len);
	return m.h;
}

static void data_during_transfer(struct hp *hp)
{
	src_avail(hp, NULL, 0);
	sink_avail_of(hp, NULL);
	hp_data(hp, 10, SEED_BAD);
}

static void wr_done_wrong_length(struct hp *hp)
{
	struct nss_hdr sa, h;

	src_avail(hp, NULL, 0);
	sa = sink_avail_of(hp, NULL);
	h = hp_hdr(hp, NSS_WR_DONE);
	h.rdma_len = sa.rdma_len - 1;
	hp_send(hp, &h, NULL, NULL);
}

/* The switch takes two transfers outstanding (its HELLO says so), and
 * offers a buffer for the second at once: a third before the first is
 * done breaks the rule. */
static void third_src_avail(struct hp *hp)
{
	src_avail(hp, NULL, 0);
	sink_avail_of(hp, NULL);
	hp->off += REST; /* after the first one's RDMA part */
	src_avail(hp, NULL, 0);
	sink_avail_of(hp, NULL);
	hp->off += REST;
	src_avail(hp, NULL, 0);
}

/* A second transfer must start after the first one's RDMA part. */
static void second_src_avail_overlapping(struct hp *hp)
{
	src_avail(hp, NULL, 0);
	sink_avail_of(hp, NULL);
	src_avail(hp, NULL, 0);
}

/* Write path: two transfers announced back to back, and the switch's
 * SINK_AVAIL for each (it keeps two outstanding): their headers. */
static void two_offered(struct hp *hp, struct nss_hdr *sa1, struct nss_hdr *sa2)
{
	src_avail(hp, NULL, 0);
	*sa1 = sink_avail_of(hp, NULL);
	hp->off += REST;
	src_avail(hp, NULL, 0);
	*sa2 = sink_avail_of(hp, NULL);
	hp->off += REST;
}

/* WR_DONEs go in the order of the SINK_AVAILs: one for the second first
 * is not the oldest SINK_AVAIL's. */
static void wr_done_second_first(struct hp *hp)
{
	struct nss_hdr sa1, sa2, h;

	two_offered(hp, &sa1, &sa2);
	h = hp_hdr(hp, NSS_WR_DONE);
	h.stream_off = sa2.stream_off;
	h.rdma_len = sa2.rdma_len;
	hp_send(hp, &h, NULL, NULL);
}

static void data_during_second_transfer(struct hp *hp)
{
	struct nss_hdr sa1, sa2;

	two_offered(hp, &sa1, &sa2);
	hp_data(hp, 10, SEED_BAD);
}

static void shutdown_during_two_transfers(struct hp *hp)
{
	struct nss_hdr sa1, sa2, h;

	two_offered(hp, &sa1, &sa2);
	h = hp_hdr(hp, NSS_SHUTDOWN);
	hp_send(hp, &h, NULL, NULL);
}

/* One WR_DONE for both SINK_AVAILs: a done message never covers bytes of
 * two transfers. */
static void wr_done_covers_two(struct hp *hp)
{
	struct nss_hdr sa1, sa2, h;

	two_offered(hp, &sa1, &sa2);
	h = hp_hdr(hp, NSS_WR_DONE);
	h.stream_off = sa1.stream_off;
	h.rdma_len = (uint32_t)(sa2.stream_off + sa2.rdma_len - sa1.stream_off);
	hp_send(hp, &h, NULL, NULL);
}

/* The first of two transfers written and answered, then DATA while the
 * second is still outstanding.  The first transfer and the second's head
 * are valid and may arrive; the DATA must not. */
static void data_after_first_done(struct hp *hp)
{
	uint8_t desc[NSS_DESC_MAX];
	struct nss_hdr sa1, h;

	src_avail(hp, NULL, 0);
	sa1 = sink_avail_of(hp, desc);
	NST_REQUIRE_EQ(sa1.rdma_len, REST);
	hp_local(hp, REST);
	fill(hp->lbuf, REST, hp->off, SEED_OK);
	NST_REQUIRE_EQ(hp_rdma(hp, true, 0, REST, desc, sa1.desc_len), 0);
	hp->off += REST;
	src_avail(hp, NULL, 0);
	sink_avail_of(hp, NULL);
	hp->off += REST;
	h = hp_hdr(hp, NSS_WR_DONE);
	h.stream_off = sa1.stream_off;
	h.rdma_len = REST;
	hp_send(hp, &h, NULL, NULL);
	hp_data(hp, 10, SEED_BAD);
}

/* With one transfer announced after DATA, the source certainly stood at
 * the DATA's end: a credit update before it is below the bound. */
static void update_below_data_end(struct hp *hp)
{
	struct nss_hdr h;
	uint64_t data_end = hp->off;

	src_avail(hp, NULL, 0);
	sink_avail_of(hp, NULL);
	h = hp_hdr(hp, NSS_DATA);
	h.stream_off = data_end - 1;
	hp_send(hp, &h, NULL, NULL);
}

/* With two transfers announced (as many as the switch takes), the source
 * certainly stood at the first one's RDMA part when it sent the second:
 * a credit update one byte before it is below the bound of section 3. */
static void update_below_bound(struct hp *hp)
{
	struct nss_hdr sa1, sa2, h;

	two_offered(hp, &sa1, &sa2);
	h = hp_hdr(hp, NSS_DATA);
	h.stream_off = sa1.stream_off - 1;
	hp_send(hp, &h, NULL, NULL);
}

/* Read path: a first transfer by the rules, then a second whose
 * descriptor no provider can use.  The first may arrive whole; the
 * second's inline head must not (it comes after the message that failed),
 * whether the switch refuses the descriptor when the message comes or when
 * the first transfer has landed. */
static void second_src_avail_garbage(struct hp *hp)
{
	uint8_t desc[NICSIM_RDMA_DESC_SIZE];

	hp->done_ok = true; /* the first transfer's RD_DONE may come */
	hp_expose(hp, REST, hp->off + HEAD, SEED_OK);
	src_avail(hp, &hp->xdesc, sizeof(hp->xdesc));
	hp->off += REST;
	fill(desc, sizeof(desc), 0, SEED_BAD);
	src_avail(hp, desc, sizeof(desc));
}

/* The peer dies (its socket closes) with two transfers outstanding and
 * the switch's two SINK_AVAILs (its bounce buffers exposed) unanswered. */
static void dies_with_two_offered(struct hp *hp)
{
	struct nss_hdr sa1, sa2;
	int err = 0;

	two_offered(hp, &sa1, &sa2);
	NST_EQ(WSPCloseSocket(hp->s, &err), 0);
	hp->s = INVALID_SOCKET;
}

#define XBIG (4u << 20) /* a transfer's RDMA part the switch takes a while to read */

/* Read path: two transfers of XBIG announced back to back, their RDMA
 * parts in one exposed buffer, each SRC_AVAIL with a descriptor of its
 * own part; the switch starts reading at once. */
static void two_big_reads(struct hp *hp)
{
	struct nicsim_rdma_desc d[2];

	hp->done_ok = true;
	hp_expose(hp, 2 * XBIG, hp->off + HEAD, SEED_OK);
	fill(hp->xbuf + XBIG, XBIG, hp->off + HEAD + XBIG + HEAD, SEED_OK);
	for (int k = 0; k < 2; k++) {
		struct nss_hdr h = hp_hdr(hp, NSS_SRC_AVAIL);
		uint8_t head[HEAD];

		d[k] = hp->xdesc;
		d[k].va += (uint64_t)k * XBIG;
		d[k].len = XBIG;
		fill(head, HEAD, hp->off, SEED_OK);
		h.desc_len = sizeof(d[k]);
		h.data_len = HEAD;
		h.rdma_len = XBIG;
		hp->off += HEAD + XBIG;
		NST_EQ(hp_send(hp, &h, &d[k], head), 0);
	}
}

/* The peer aborts while the switch reads its two transfers. */
static void abort_during_two_reads(struct hp *hp)
{
	two_big_reads(hp);
	peer_aborts(hp);
}

/* The peer dies while the switch reads its two transfers. */
static void dies_during_two_reads(struct hp *hp)
{
	int err = 0;

	two_big_reads(hp);
	NST_EQ(WSPCloseSocket(hp->s, &err), 0);
	hp->s = INVALID_SOCKET;
}

static void test_large_into_switch(void)
{
	static const struct hcase cases[] = {
	    PROTO(src_avail_no_desc, "SRC_AVAIL without a descriptor on the read path"),
	    {.name = "src_avail_desc_on_write_path",
	     .bad = src_avail_desc_on_write_path,
	     .why = "SRC_AVAIL with a descriptor on the write path",
	     .reason = NSS_ABORT_PROTOCOL,
	     .err = ECONNABORTED,
	     .not_readable = true},
	    {.name = "src_avail_garbage_descriptor",
	     .bad = src_avail_garbage,
	     .why = "descriptor",
	     .reason = NSS_ABORT_PROTOCOL,
	     .err = ECONNABORTED,
	     .extra = HEAD,
	     .no_more = true},
	    /* The SPI resets the connection: ECONNRESET, and no ABORT can go. */
	    {.name = "src_avail_forged_descriptor",
	     .bad = src_avail_forged,
	     .err = ECONNRESET,
	     .extra = HEAD,
	     .no_more = true},
	    {.name = "data_during_transfer",
	     .bad = data_during_transfer,
	     .why = "data while a large transfer is outstanding",
	     .reason = NSS_ABORT_PROTOCOL,
	     .err = ECONNABORTED,
	     .not_readable = true,
	     .extra = HEAD},
	    {.name = "wr_done_wrong_length",
	     .bad = wr_done_wrong_length,
	     .why = "WR_DONE that is not the SINK_AVAIL's",
	     .reason = NSS_ABORT_PROTOCOL,
	     .err = ECONNABORTED,
	     .not_readable = true,
	     .extra = HEAD},
	    {.name = "third_src_avail",
	     .bad = third_src_avail,
	     .why = "more large transfers outstanding than HELLO allows",
	     .reason = NSS_ABORT_PROTOCOL,
	     .err = ECONNABORTED,
	     .not_readable = true,
	     .extra = HEAD},
	    {.name = "wr_done_second_first",
	     .bad = wr_done_second_first,
	     .why = "WR_DONE that is not the SINK_AVAIL's",
	     .reason = NSS_ABORT_PROTOCOL,
	     .err = ECONNABORTED,
	     .not_readable = true,
	     .extra = HEAD},
	    {.name = "wr_done_covers_two",
	     .bad = wr_done_covers_two,
	     .why = "WR_DONE that is not the SINK_AVAIL's",
	     .reason = NSS_ABORT_PROTOCOL,
	     .err = ECONNABORTED,
	     .not_readable = true,
	     .extra = HEAD},
	    {.name = "data_during_second_transfer",
	     .bad = data_during_second_transfer,
	     .why = "data while a large transfer is outstanding",
	     .reason = NSS_ABORT_PROTOCOL,
	     .err = ECONNABORTED,
	     .not_readable = true,
	     .extra = HEAD},
	    {.name = "shutdown_during_two_transfers",
	     .bad = shutdown_during_two_transfers,
	     .why = "SHUTDOWN during a large transfer",
	     .reason = NSS_ABORT_PROTOCOL,
	     .err = ECONNABORTED,
	     .not_readable = true,
	     .extra = HEAD},
	    {.name = "data_after_first_done",
	     .bad = data_after_first_done,
	     .why = "data while a large transfer is outstanding",
	     .reason = NSS_ABORT_PROTOCOL,
	     .err = ECONNABORTED,
	     .not_readable = true,
	     .extra = 2 * HEAD + REST},
	    {.name = "update_below_data_end",
	     .bad = update_below_data_end,
	     .why = "a credit update not where the stream stands",
	     .reason = NSS_ABORT_PROTOCOL,
	     .err = ECONNABORTED,
	     .not_readable = true,
	     .extra = HEAD},
	    {.name = "update_below_bound",
	     .bad = update_below_bound,
	     .why = "a credit update not where the stream stands",
	     .reason = NSS_ABORT_PROTOCOL,
	     .err = ECONNABORTED,
	     .not_readable = true,
	     .extra = HEAD},
	    {.name = "second_src_avail_garbage_descriptor",
	     .bad = second_src_avail_garbage,
	     .why = "descriptor",
	     .reason = NSS_ABORT_PROTOCOL,
	     .err = ECONNABORTED,
	     .extra = HEAD + REST,
	     .no_more = true},
	    {.name = "peer_dies_with_two_offered",
	     .bad = dies_with_two_offered,
	     .err = ECONNRESET,
	     .not_readable = true,
	     .extra = HEAD,
	     .no_more = true,
	     .dies = true},
	    /* The bytes of the first transfer may arrive, of the second too,
	     * in order; then ECONNRESET, and the switch's reads in flight
	     * must not keep anything registered. */
	    {.name = "abort_during_two_reads",
	     .bad = abort_during_two_reads,
	     .err = ECONNRESET,
	     .extra = 2 * (HEAD + XBIG),
	     .no_more = true},
	    {.name = "dies_during_two_reads",
	     .bad = dies_during_two_reads,
	     .err = ECONNRESET,
	     .extra = 2 * (HEAD + XBIG),
	     .no_more = true,
	     .dies = true},
	    {.name = "second_src_avail_overlapping",
	     .bad = second_src_avail_overlapping,
	     .why = "SRC_AVAIL not where the stream stands",
	     .reason = NSS_ABORT_PROTOCOL,
	     .err = ECONNABORTED,
	     .not_readable = true,
	     .extra = HEAD},
	};

	RUN(cases);
}

/* ---- Large transfers out of the switch ------------------------------------------------- */

#define SW_SEED 5u /* the switch application's stream */

struct sender {
	int s;
	const uint8_t *p;
	size_t len;
	ssize_t n;
	int err;
};

static void *sender_main(void *arg)
{
	struct sender *sd = arg;

	sd->n = nsw_send(sd->s, sd->p, sd->len, 0);
	sd->err = errno;
	return NULL;
}

/* The switch's application sends LARGE bytes (by RDMA) from a thread; the
 * peer takes the SRC_AVAIL and does bad() with its header. */
struct ocase {
	const char *name;
	void (*bad)(struct hp *hp, const struct nss_msg *sa);
	const char *why;
	uint32_t reason;
	int err;          /* the errno of the application's send and recv; 0: the send succeeds */
	bool no_can_read; /* the write path (else the read path) */
};

static void run_out_case(const struct ocase *c, enum role role)
{
	char what[160];
	int base_a = nst_tpt_in_use(sock_a), base_b = nst_tpt_in_use(sock_b);
	uint8_t *src = map(LARGE);
	struct sender sd = {.len = LARGE};
	struct timeval no_timeo = {0};
	struct timespec until;
	struct nss_msg m;
	struct hp *hp;
	pthread_t t;
	int sw = -1, rc;
	bool saw_abort;
	char x;

	snprintf(what, sizeof(what), "%s (%s)", c->name, role_name(role));
	NST_REQUIRE(base_a >= 0 && base_b >= 0 && src != NULL);
	fill(src, LARGE, 0, SW_SEED);
	printf("\n    %-46s %-16s ", c->name, role_name(role));
	fflush(stdout);
	cap_start();
	hp = open_pair(role, &sw);
	NST_REQUIRE_EQ(hp_hello(hp, c->no_can_read ? NSS_F_READABLE : F_ALL), 0);
	/* One transfer straight from the application's buffer: without
	 * SO_SNDTIMEO (with it, the send would go a staging buffer at a
	 * time); the timed join below bounds the send. */
	NST_EQ(nsw_setsockopt(sw, SOL_SOCKET, SO_SNDTIMEO, &no_timeo, sizeof(no_timeo)), 0);
	sd.s = sw;
	sd.p = src;
	NST_REQUIRE_EQ(pthread_create(&t, NULL, sender_main, &sd), 0);
	memset(&m, 0, sizeof(m));
	NST_REQUIRE_EQ(hp_next_not_update(hp, &m), 0);
	NST_REQUIRE_EQ(m.h.type, NSS_SRC_AVAIL);
	NST_EQ_U(m.h.stream_off, 0);
	NST_EQ_U(m.h.data_len + m.h.rdma_len, LARGE);
	NST_EQ(m.h.desc_len, c->no_can_read ? 0 : NICSIM_RDMA_DESC_SIZE);
	for (uint32_t i = 0; i < m.h.data_len; i++)
		if (m.data[i] != pat(i, SW_SEED)) {
			NST_CHECK_(false, CU_FALSE, "%s: SRC_AVAIL's byte %u is wrong", what, i);
			break;
		}
	c->bad(hp, &m);
	if (c->err)
		hp_expect_end(hp, c->reason, what);
	/* The send waits for the transfer: it must end, one way or the other. */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += END_MS / 1000;
	rc = pthread_timedjoin_np(t, NULL, &until);
	NST_CHECK_(rc == 0, CU_TRUE, "%s: the application's send did not return", what);
	if (c->err) {
		/* As TCP's: the bytes the peer took (the inline head, what
		 * done messages covered), and the next call the error. */
		if (sd.n >= 0 && sd.n < (ssize_t)LARGE) {
			sd.n = nsw_send(sw, src, 1, 0);
			sd.err = errno;
		}
		NST_CHECK_(sd.n == -1 && sd.err == c->err, CU_FALSE,
			   "%s: send: %zd (%s), want the bytes taken, then -1 (%s)", what, sd.n,
			   strerror(sd.err), strerror(c->err));
		NST_CHECK_(nsw_recv(sw, &x, 1, 0) == -1 && errno == c->err, CU_FALSE,
			   "%s: recv after the end: %s, want %s", what, strerror(errno),
			   strerror(c->err));
	} else {
		NST_CHECK_(sd.n == (ssize_t)LARGE, CU_FALSE, "%s: send: %zd (%s), want %u", what,
			   sd.n, strerror(sd.err), LARGE);
	}
	NST_EQ(nsw_close(sw), 0);
	if (!c->err) {
		struct nss_msg sh;

		/* The switch closes gracefully: SHUTDOWN at the stream's end. */
		NST_REQUIRE_EQ(hp_next_not_update(hp, &sh), 0);
		NST_EQ(sh.h.type, NSS_SHUTDOWN);
		NST_EQ_U(sh.h.stream_off, LARGE);
		hp_expect_end(hp, 0, what);
	}
	saw_abort = hp->saw_abort;
	hp_close(hp);
	cap_stop();
	check_log(c->why, what);
	check_tpt(base_a, base_b, what);
	munmap(src, LARGE);
	printf("%s", !c->err ? "transfer done" : saw_abort ? "ABORT came" : "connection ended");
}

/* Where the RDMA part of the switch's SRC_AVAIL starts. */
static uint64_t rest_off(const struct nss_hdr *sa)
{
	return sa->stream_off + sa->data_len;
}

/* Read path, by the rules: read it all (the descriptor stays in the
 * receive it came in: the peer never posts it again), check it, RD_DONE. */
static void read_and_done(struct hp *hp, const struct nss_msg *msg)
{
	const struct nss_hdr *sa = &msg->h;
	struct nss_hdr h;

	hp_local(hp, sa->rdma_len);
	NST_REQUIRE_EQ(hp_rdma(hp, false, 0, sa->rdma_len, msg->desc, sa->desc_len), 0);
	for (uint32_t i = 0; i < sa->rdma_len; i++)
		if (hp->lbuf[i] != pat(rest_off(sa) + i, SW_SEED)) {
			NST_CHECK_(false, CU_FALSE, "byte %u read from the switch is wrong", i);
			break;
		}
	h = hp_hdr(hp, NSS_RD_DONE);
	h.stream_off = rest_off(sa);
	h.rdma_len = sa->rdma_len;
	NST_EQ(hp_send(hp, &h, NULL, NULL), 0);
}

/* Write path, by the rules: advertise a buffer for all of it, take the
 * WR_DONE, check the bytes. */
static void sink_and_check(struct hp *hp, const struct nss_msg *msg)
{
	const struct nss_hdr *sa = &msg->h;
	struct nss_hdr h = hp_hdr(hp, NSS_SINK_AVAIL);
	struct nss_msg m;

	hp_expose(hp, sa->rdma_len, 0, 0);
	h.stream_off = rest_off(sa);
	h.desc_len = sizeof(hp->xdesc);
	h.rdma_len = sa->rdma_len;
	NST_EQ(hp_send(hp, &h, &hp->xdesc, NULL), 0);
	NST_REQUIRE_EQ(hp_next_not_update(hp, &m), 0);
	NST_EQ(m.h.type, NSS_WR_DONE);
	NST_EQ_U(m.h.stream_off, rest_off(sa));
	NST_EQ_U(m.h.rdma_len, sa->rdma_len);
	for (uint32_t i = 0; i < sa->rdma_len; i++)
		if (hp->xbuf[i] != pat(rest_off(sa) + i, SW_SEED)) {
			NST_CHECK_(false, CU_FALSE, "byte %u written by the switch is wrong", i);
			break;
		}
}

static void rd_done_too_much(struct hp *hp, const struct nss_msg *msg)
{
	const struct nss_hdr *sa = &msg->h;
	struct nss_hdr h = hp_hdr(hp, NSS_RD_DONE);

	h.stream_off = rest_off(sa);
	h.rdma_len = sa->rdma_len + 1;
	hp_send(hp, &h, NULL, NULL);
}

static void rd_done_elsewhere(struct hp *hp, const struct nss_msg *msg)
{
	const struct nss_hdr *sa = &msg->h;
	struct nss_hdr h = hp_hdr(hp, NSS_RD_DONE);

	h.stream_off = rest_off(sa) + 1;
	h.rdma_len = 100;
	hp_send(hp, &h, NULL, NULL);
}

/* SINK_AVAIL for the switch's transfer with desc, and rdma_len plus more. */
static void sink_avail(struct hp *hp, const struct nss_hdr *sa, const void *desc, int64_t off_delta,
		       uint32_t more)
{
	struct nss_hdr h = hp_hdr(hp, NSS_SINK_AVAIL);

	h.stream_off = (uint64_t)((int64_t)rest_off(sa) + off_delta);
	h.desc_len = NICSIM_RDMA_DESC_SIZE;
	h.rdma_len = sa->rdma_len + more;
	hp_send(hp, &h, desc, NULL);
}

static void sink_avail_garbage(struct hp *hp, const struct nss_msg *msg)
{
	const struct nss_hdr *sa = &msg->h;
	uint8_t desc[NICSIM_RDMA_DESC_SIZE];

	fill(desc, sizeof(desc), 0, SEED_BAD);
	sink_avail(hp, sa, desc, 0, 0);
}

/* A real descriptor of 4 KiB altered to cover the whole transfer. */
static void sink_avail_forged(struct hp *hp, const struct nss_msg *msg)
{
	const struct nss_hdr *sa = &msg->h;
	struct nicsim_rdma_desc d;

	hp_expose(hp, PAGE, 0, 0);
	d = hp->xdesc;
	d.len = sa->rdma_len;
	sink_avail(hp, sa, &d, 0, 0);
}

static void sink_avail_elsewhere(struct hp *hp, const struct nss_msg *msg)
{
	const struct nss_hdr *sa = &msg->h;
	uint8_t desc[NICSIM_RDMA_DESC_SIZE] = {0};

	sink_avail(hp, sa, desc, 1, 0);
}

static void sink_avail_too_much(struct hp *hp, const struct nss_msg *msg)
{
	const struct nss_hdr *sa = &msg->h;
	uint8_t desc[NICSIM_RDMA_DESC_SIZE] = {0};

	sink_avail(hp, sa, desc, 0, 1);
}

static void test_large_out_of_switch(void)
{
	static const struct ocase cases[] = {
	    {.name = "read_path_by_the_rules", .bad = read_and_done},
	    {.name = "write_path_by_the_rules", .bad = sink_and_check, .no_can_read = true},
	    {.name = "rd_done_too_much",
	     .bad = rd_done_too_much,
	     .why = "RD_DONE for more than was offered",
	     .reason = NSS_ABORT_PROTOCOL,
	     .err = ECONNABORTED},
	    {.name = "rd_done_elsewhere",
	     .bad = rd_done_elsewhere,
	     .why = "RD_DONE not where the transfer stands",
	     .reason = NSS_ABORT_PROTOCOL,
	     .err = ECONNABORTED},
	    {.name = "sink_avail_garbage_descriptor",
	     .bad = sink_avail_garbage,
	     .why = "descriptor",
	     .reason = NSS_ABORT_PROTOCOL,
	     .err = ECONNABORTED,
	     .no_can_read = true},
	    {.name = "sink_avail_forged_descriptor",
	     .bad = sink_avail_forged,
	     .err = ECONNRESET,
	     .no_can_read = true},
	    {.name = "sink_avail_elsewhere",
	     .bad = sink_avail_elsewhere,
	     .why = "SINK_AVAIL not where the transfer stands",
	     .reason = NSS_ABORT_PROTOCOL,
	     .err = ECONNABORTED,
	     .no_can_read = true},
	    {.name = "sink_avail_too_much",
	     .bad = sink_avail_too_much,
	     .why = "SINK_AVAIL for more than the transfer has left",
	     .reason = NSS_ABORT_PROTOCOL,
	     .err = ECONNABORTED,
	     .no_can_read = true},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		run_out_case(&cases[i], SW_ACCEPTS);
		run_out_case(&cases[i], SW_CONNECTS);
	}
}

/* ---- A peer that keeps the rules -------------------------------------------------------- */

/*
 * The peer speaks the protocol correctly, as a later version (with
 * reserved bytes set, which the switch must accept and run as its own):
 * data, a large send on the path its features choose, SHUTDOWN; the
 * application reads everything and then end-of-file, answers, and closes;
 * the peer gets the answer, the SHUTDOWN and the end.  Its receives are
 * larger than the switch's own: the answer, under the RDMA threshold but
 * over the switch's receive size, comes in DATA messages as large as the
 * peer takes and the switch can send.
 */
static void keeps_the_rules(enum role role, bool readable)
{
	char what[160];
	int base_a = nst_tpt_in_use(sock_a), base_b = nst_tpt_in_use(sock_b);
	struct nss_hello hl = hp_hello_body(readable ? F_ALL : NSS_F_CAN_READ);
	static uint8_t ans[20000];
	uint8_t body[NSS_HELLO_LEN], c;
	uint64_t ans_off = 0;
	uint64_t got = 0;
	struct nss_msg m;
	struct hp *hp;
	int sw = -1;

	snprintf(what, sizeof(what), "the rules, %s path in (%s)", readable ? "read" : "write",
		 role_name(role));
	NST_REQUIRE(base_a >= 0 && base_b >= 0);
	hp = open_pair(role, &sw);
	hl.version = NSS_VERSION + 1;
	nss_hello_encode(&hl, body);
	body[40] = 0x77;
	NST_REQUIRE_EQ(hp_send_hello(hp, body, HP_RECVS - 1), 0);
	NST_REQUIRE_EQ(hp_data(hp, PREFIX1, SEED_OK), 0);
	NST_REQUIRE(sw_read_exact(sw, &got, PREFIX1, what));
	if (readable) {
		hp_expose(hp, REST, hp->off + HEAD, SEED_OK);
		src_avail(hp, &hp->xdesc, sizeof(hp->xdesc));
		NST_REQUIRE_EQ(hp_next_not_update(hp, &m), 0);
		NST_EQ(m.h.type, NSS_RD_DONE);
		NST_EQ_U(m.h.stream_off, hp->off);
		NST_EQ_U(m.h.rdma_len, REST);
	} else {
		uint8_t desc[NSS_DESC_MAX];
		struct nss_hdr sa, h;

		src_avail(hp, NULL, 0);
		sa = sink_avail_of(hp, desc);
		NST_REQUIRE_EQ(sa.rdma_len, REST);
		hp_local(hp, REST);
		fill(hp->lbuf, REST, hp->off, SEED_OK);
		NST_REQUIRE_EQ(hp_rdma(hp, true, 0, REST, desc, sa.desc_len), 0);
		h = hp_hdr(hp, NSS_WR_DONE);
		h.rdma_len = REST;
		NST_EQ(hp_send(hp, &h, NULL, NULL), 0);
	}
	hp->off += REST;
	NST_EQ(hp_data(hp, PREFIX2, SEED_OK), 0);
	{
		struct nss_hdr h = hp_hdr(hp, NSS_SHUTDOWN);

		NST_EQ(hp_send(hp, &h, NULL, NULL), 0);
	}
	for (uint64_t left = hp->off - got; left;) {
		uint32_t n = left < HP_SIZE ? (uint32_t)left : HP_SIZE;

		if (!sw_read_exact(sw, &got, n, what))
			break;
		left -= n;
	}
	NST_EQ(nsw_recv(sw, &c, 1, 0), 0);
	/* The other direction is still open. */
	fill(ans, sizeof(ans), 0, SW_SEED);
	NST_EQ(nsw_send(sw, ans, sizeof(ans), 0), (ssize_t)sizeof(ans));
	while (ans_off < sizeof(ans)) {
		NST_REQUIRE_EQ(hp_next_not_update(hp, &m), 0);
		NST_REQUIRE_EQ(m.h.type, NSS_DATA);
		NST_REQUIRE_EQ(m.h.stream_off, ans_off);
		NST_REQUIRE(m.h.data_len <= sizeof(ans) - ans_off);
		NST_TRUE(memcmp(m.data, ans + ans_off, m.h.data_len) == 0);
		ans_off += m.h.data_len;
	}
	NST_EQ(nsw_close(sw), 0);
	NST_REQUIRE_EQ(hp_next_not_update(hp, &m), 0);
	NST_EQ(m.h.type, NSS_SHUTDOWN);
	NST_EQ_U(m.h.stream_off, sizeof(ans));
	hp_expect_end(hp, 0, what);
	NST_TRUE(!hp->saw_abort);
	hp_close(hp);
	check_tpt(base_a, base_b, what);
}

static void test_peer_that_keeps_the_rules(void)
{
	keeps_the_rules(SW_ACCEPTS, true);
	keeps_the_rules(SW_CONNECTS, true);
	keeps_the_rules(SW_ACCEPTS, false);
	keeps_the_rules(SW_CONNECTS, false);
}

/* ---- Two transfers outstanding ------------------------------------------------------- */

/*
 * A source keeping the rules pipelines: two SRC_AVAILs back to back, the
 * second before the first is done, then a credit update exactly at the
 * lowest offset section 3 allows (the first transfer's RDMA part), which
 * the switch must take.  Read path: the switch reads both and sends
 * RD_DONEs in stream order, none spanning two transfers; write path: it
 * offers a buffer for each, the peer writes both and answers in order.
 * The application gets every byte in order.
 */
/* The switch's application, waiting in recv for the rest of the stream
 * while the transfers come, so that they may land in its own buffer. */
struct reader {
	int s;
	uint8_t *buf;
	size_t len;
	ssize_t n;
	int err;
};

static void *reader_main(void *arg)
{
	struct reader *rd = arg;

	rd->n = nsw_recv(rd->s, rd->buf, rd->len, MSG_WAITALL);
	rd->err = errno;
	return NULL;
}

static void pipelined_source(enum role role, bool readable, bool waiting)
{
	char what[160];
	int base_a = nst_tpt_in_use(sock_a), base_b = nst_tpt_in_use(sock_b);
	uint64_t got = 0, p, start[2], at;
	uint8_t *x2 = NULL, c;
	struct nicsim_rdma_desc d2;
	struct nss_hdr sa[2], h;
	struct reader rd = {.len = 2 * (HEAD + REST) + PREFIX2};
	struct nss_msg m;
	struct hp *hp;
	pthread_t t;
	int sw = -1, err = 0;

	snprintf(what, sizeof(what), "pipelined source, %s path%s (%s)",
		 readable ? "read" : "write", waiting ? ", a reader waiting" : "", role_name(role));
	printf("\n    %-46s %-16s ",
	       readable
		   ? (waiting ? "pipelined_source_read_reader_waits" : "pipelined_source_read")
		   : (waiting ? "pipelined_source_write_reader_waits" : "pipelined_source_write"),
	       role_name(role));
	fflush(stdout);
	NST_REQUIRE(base_a >= 0 && base_b >= 0);
	hp = open_pair(role, &sw);
	NST_REQUIRE(nss_hello_xfers(&hp->sw) >= 2);
	NST_REQUIRE_EQ(hp_hello(hp, readable ? F_ALL : NSS_F_CAN_READ), 0);
	NST_REQUIRE_EQ(hp_data(hp, PREFIX1, SEED_OK), 0);
	NST_REQUIRE(sw_read_exact(sw, &got, PREFIX1, what));
	if (waiting) {
		rd.s = sw;
		rd.buf = map(rd.len);
		NST_REQUIRE(rd.buf != NULL);
		NST_REQUIRE_EQ(pthread_create(&t, NULL, reader_main, &rd), 0);
	}
	p = hp->off;
	start[0] = p + HEAD;
	start[1] = p + HEAD + REST + HEAD;
	if (readable) {
		hp_expose(hp, REST, start[0], SEED_OK);
		x2 = map(REST);
		NST_REQUIRE(x2 != NULL);
		fill(x2, REST, start[1], SEED_OK);
		NST_REQUIRE_EQ(expose(hp->s, x2, REST, MEM_READWRITE, &d2), 0);
		src_avail(hp, &hp->xdesc, sizeof(hp->xdesc));
		hp->off += REST;
		src_avail(hp, &d2, sizeof(d2));
		hp->off += REST;
	} else {
		uint8_t desc[2][NSS_DESC_MAX];

		src_avail(hp, NULL, 0);
		sa[0] = sink_avail_of(hp, desc[0]);
		hp->off += REST;
		src_avail(hp, NULL, 0);
		sa[1] = sink_avail_of(hp, desc[1]);
		hp->off += REST;
		NST_REQUIRE_EQ(sa[0].rdma_len, REST);
		NST_REQUIRE_EQ(sa[1].rdma_len, REST);
		hp_local(hp, 2 * REST);
		fill(hp->lbuf, REST, start[0], SEED_OK);
		fill(hp->lbuf + REST, REST, start[1], SEED_OK);
		/* Both written before either is answered: the WR_DONEs follow in order. */
		NST_REQUIRE_EQ(hp_rdma(hp, true, 0, REST, desc[0], sa[0].desc_len), 0);
		NST_REQUIRE_EQ(hp_rdma(hp, true, REST, REST, desc[1], sa[1].desc_len), 0);
	}
	/* The lowest offset a credit update may carry now: must be taken. */
	h = hp_hdr(hp, NSS_DATA);
	h.stream_off = start[0];
	NST_EQ(hp_send(hp, &h, NULL, NULL), 0);
	if (readable) {
		/* RD_DONEs in stream order, each within one transfer. */
		at = start[0];
		for (int k = 0; k < 2;) {
			NST_REQUIRE_EQ(hp_next_not_update(hp, &m), 0);
			NST_REQUIRE_EQ(m.h.type, NSS_RD_DONE);
			NST_REQUIRE_EQ(m.h.stream_off, at);
			NST_CHECK_(m.h.rdma_len && at + m.h.rdma_len <= start[k] + REST, CU_TRUE,
				   "%s: RD_DONE of %u at %llu runs past transfer %d", what,
				   m.h.rdma_len, (unsigned long long)at, k);
			at += m.h.rdma_len;
			if (at == start[k] + REST && ++k < 2)
				at = start[k];
		}
	} else {
		for (int k = 0; k < 2; k++) {
			h = hp_hdr(hp, NSS_WR_DONE);
			h.stream_off = start[k];
			h.rdma_len = REST;
			NST_EQ(hp_send(hp, &h, NULL, NULL), 0);
		}
	}
	NST_EQ(hp_data(hp, PREFIX2, SEED_OK), 0);
	h = hp_hdr(hp, NSS_SHUTDOWN);
	NST_EQ(hp_send(hp, &h, NULL, NULL), 0);
	if (waiting) {
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += END_MS / 1000;
		NST_REQUIRE_EQ(pthread_timedjoin_np(t, NULL, &until), 0);
		NST_CHECK_(rd.n == (ssize_t)rd.len, CU_FALSE, "%s: recv: %zd (%s), want %zu", what,
			   rd.n, strerror(rd.err), rd.len);
		for (size_t i = 0; i < rd.len && rd.n == (ssize_t)rd.len; i++)
			if (rd.buf[i] != pat(got + i, SEED_OK)) {
				NST_CHECK_(false, CU_FALSE,
					   "%s: byte at %llu is 0x%02x, want 0x%02x", what,
					   (unsigned long long)(got + i), rd.buf[i],
					   pat(got + i, SEED_OK));
				break;
			}
		got += rd.n > 0 ? (uint64_t)rd.n : 0;
		munmap(rd.buf, rd.len);
	}
	for (uint64_t left = hp->off - got; left;) {
		uint32_t n = left < HP_SIZE ? (uint32_t)left : HP_SIZE;

		if (!sw_read_exact(sw, &got, n, what))
			break;
		left -= n;
	}
	NST_EQ(nsw_recv(sw, &c, 1, 0), 0);
	NST_EQ(nsw_close(sw), 0);
	NST_REQUIRE_EQ(hp_next_not_update(hp, &m), 0);
	NST_EQ(m.h.type, NSS_SHUTDOWN);
	hp_expect_end(hp, 0, what);
	NST_TRUE(!hp->saw_abort);
	if (x2) {
		WSPDeregisterRdmaMemory(hp->s, &d2, sizeof(d2), &err);
		munmap(x2, REST);
	}
	hp_close(hp);
	check_tpt(base_a, base_b, what);
	printf("%llu bytes in order", (unsigned long long)got);
}

/* The application reads in a loop until recv fails or ends: the bytes it
 * got (checked against the peer's stream from off) and the last errno. */
struct drainer {
	int s;
	uint64_t off, got;
	ssize_t last;
	int err;
	bool bad_byte;
};

static void *drainer_main(void *arg)
{
	static uint8_t buf[1 << 20];
	struct drainer *d = arg;

	for (;;) {
		ssize_t n = nsw_recv(d->s, buf, sizeof(buf), 0);

		d->last = n;
		d->err = errno;
		if (n <= 0)
			return NULL;
		for (ssize_t i = 0; i < n && !d->bad_byte; i++)
			if (buf[i] != pat(d->off + d->got + (uint64_t)i, SEED_OK))
				d->bad_byte = true;
		d->got += (uint64_t)n;
	}
}

/*
 * The application waits in recv (so that the switch may move the
 * transfers straight into its buffer) when the peer announces two
 * transfers and then aborts or dies while they move: the reader gets the
 * valid bytes in order at most, then ECONNRESET, and whatever the switch
 * registered of the reader's buffer is released with the rest.
 */
static void reader_waits_then_end(enum role role, bool readable, bool dies)
{
	char what[160];
	int base_a = nst_tpt_in_use(sock_a), base_b = nst_tpt_in_use(sock_b);
	struct drainer d = {.off = PREFIX1};
	struct timespec until;
	uint64_t got = 0, valid;
	struct hp *hp;
	pthread_t t;
	int sw = -1, err = 0;

	snprintf(what, sizeof(what), "reader waits, %s path, peer %s (%s)",
		 readable ? "read" : "write", dies ? "dies" : "aborts", role_name(role));
	printf("\n    %-46s %-16s ",
	       readable
		   ? (dies ? "reader_waits_read_peer_dies" : "reader_waits_read_peer_aborts")
		   : (dies ? "reader_waits_write_peer_dies" : "reader_waits_write_peer_aborts"),
	       role_name(role));
	fflush(stdout);
	NST_REQUIRE(base_a >= 0 && base_b >= 0);
	cap_start();
	hp = open_pair(role, &sw);
	NST_REQUIRE_EQ(hp_hello(hp, readable ? F_ALL : NSS_F_CAN_READ), 0);
	NST_REQUIRE_EQ(hp_data(hp, PREFIX1, SEED_OK), 0);
	NST_REQUIRE(sw_read_exact(sw, &got, PREFIX1, what));
	d.s = sw;
	NST_REQUIRE_EQ(pthread_create(&t, NULL, drainer_main, &d), 0);
	if (readable) {
		two_big_reads(hp);
		valid = hp->off;
	} else {
		struct nss_hdr sa1, sa2;

		two_offered(hp, &sa1, &sa2);
		valid = sa1.stream_off; /* the first head at most: nothing is written */
	}
	if (dies) {
		NST_EQ(WSPCloseSocket(hp->s, &err), 0);
		hp->s = INVALID_SOCKET;
	} else {
		peer_aborts(hp);
	}
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += END_MS / 1000;
	NST_REQUIRE_EQ(pthread_timedjoin_np(t, NULL, &until), 0);
	NST_CHECK_(d.last == -1 && d.err == ECONNRESET, CU_FALSE,
		   "%s: recv: %zd (%s), want -1 (%s)", what, d.last, strerror(d.err),
		   strerror(ECONNRESET));
	NST_CHECK_(!d.bad_byte && PREFIX1 + d.got <= valid, CU_FALSE,
		   "%s: %llu bytes delivered after the first %u (valid up to %llu)%s", what,
		   (unsigned long long)d.got, PREFIX1, (unsigned long long)valid,
		   d.bad_byte ? ", some wrong" : "");
	NST_EQ(nsw_close(sw), 0);
	hp_close(hp);
	cap_stop();
	check_log(NULL, what);
	check_tpt(base_a, base_b, what);
	printf("%llu bytes, then %s", (unsigned long long)d.got, strerror(d.err));
}

#define MED (256u << 10) /* a send the switch copies to a staging buffer: it returns at once */

struct sender2 {
	int s, nsends;
	const uint8_t *p;
	ssize_t n[2];
	int err[2];
};

static void *sender2_main(void *arg)
{
	struct sender2 *sd = arg;

	for (int i = 0; i < sd->nsends; i++) {
		sd->n[i] = nsw_send(sd->s, sd->p + (size_t)i * MED, MED, 0);
		sd->err[i] = errno;
	}
	return NULL;
}

/* The switch's application sends two MED sends; the peer (announcing
 * xfers in its HELLO) takes the switch's two SRC_AVAILs and does bad()
 * with them. */
struct o2case {
	const char *name;
	void (*bad)(struct hp *hp, const struct nss_msg *sa1, const struct nss_msg *sa2);
	const char *why;
	uint32_t reason;
	int err; /* the errno of the application's recv; 0: both transfers go through */
	bool no_can_read;
	uint8_t xfers; /* the peer's HELLO byte 26; 0 here means 2 */
	bool dies;     /* bad() closes the peer's socket */
};

static void run_out2_case(const struct o2case *c, enum role role)
{
	char what[160];
	int base_a = nst_tpt_in_use(sock_a), base_b = nst_tpt_in_use(sock_b);
	struct nss_hello hl = hp_hello_body(c->no_can_read ? NSS_F_READABLE : F_ALL);
	uint8_t *src = map(2 * MED), body[NSS_HELLO_LEN];
	struct sender2 sd = {.nsends = 2};
	struct timespec until;
	struct nss_msg m[2];
	struct hp *hp;
	pthread_t t;
	int sw = -1, rc;
	bool saw_abort;
	char x;

	snprintf(what, sizeof(what), "%s (%s)", c->name, role_name(role));
	NST_REQUIRE(base_a >= 0 && base_b >= 0 && src != NULL);
	fill(src, 2 * MED, 0, SW_SEED);
	printf("\n    %-46s %-16s ", c->name, role_name(role));
	fflush(stdout);
	cap_start();
	hp = open_pair(role, &sw);
	hl.xfers = c->xfers ? c->xfers : 2;
	nss_hello_encode(&hl, body);
	NST_REQUIRE_EQ(hp_send_hello(hp, body, HP_RECVS - 1), 0);
	sd.s = sw;
	sd.p = src;
	NST_REQUIRE_EQ(pthread_create(&t, NULL, sender2_main, &sd), 0);
	memset(m, 0, sizeof(m));
	for (int k = 0; k < sd.nsends; k++) {
		NST_REQUIRE_EQ(hp_next_not_update(hp, &m[k]), 0);
		NST_REQUIRE_EQ(m[k].h.type, NSS_SRC_AVAIL);
		NST_EQ_U(m[k].h.stream_off, (uint64_t)k * MED);
		NST_EQ_U(m[k].h.data_len + m[k].h.rdma_len, MED);
		NST_EQ(m[k].h.desc_len, c->no_can_read ? 0 : NICSIM_RDMA_DESC_SIZE);
		for (uint32_t i = 0; i < m[k].h.data_len; i++)
			if (m[k].data[i] != pat(m[k].h.stream_off + i, SW_SEED)) {
				NST_CHECK_(false, CU_FALSE, "%s: SRC_AVAIL %d's byte %u is wrong",
					   what, k, i);
				break;
			}
	}
	c->bad(hp, &m[0], &m[1]);
	if (c->err && !c->dies)
		hp_expect_end(hp, c->reason, what);
	/* Both sends were copied: they returned when their SRC_AVAIL went. */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += END_MS / 1000;
	rc = pthread_timedjoin_np(t, NULL, &until);
	NST_CHECK_(rc == 0, CU_TRUE, "%s: the application's send did not return", what);
	for (int k = 0; k < sd.nsends; k++)
		NST_CHECK_(sd.n[k] == (ssize_t)MED, CU_FALSE, "%s: send %d: %zd (%s), want %u",
			   what, k, sd.n[k], strerror(sd.err[k]), MED);
	if (c->err)
		NST_CHECK_(nsw_recv(sw, &x, 1, 0) == -1 && errno == c->err, CU_FALSE,
			   "%s: recv after the end: %s, want %s", what, strerror(errno),
			   strerror(c->err));
	NST_EQ(nsw_close(sw), 0);
	if (!c->err) {
		struct nss_msg sh;

		NST_REQUIRE_EQ(hp_next_not_update(hp, &sh), 0);
		NST_EQ(sh.h.type, NSS_SHUTDOWN);
		NST_EQ_U(sh.h.stream_off, (uint64_t)sd.nsends * MED);
		hp_expect_end(hp, 0, what);
	}
	saw_abort = hp->saw_abort;
	hp_close(hp);
	cap_stop();
	check_log(c->why, what);
	check_tpt(base_a, base_b, what);
	munmap(src, 2 * MED);
	printf("%s", !c->err ? "transfers done" : saw_abort ? "ABORT came" : "connection ended");
}

/* Read path by the rules: read both, RD_DONE each, in order. */
static void read_both(struct hp *hp, const struct nss_msg *m1, const struct nss_msg *m2)
{
	const struct nss_msg *ms[2] = {m1, m2};

	hp_local(hp, 2 * MED);
	for (int k = 0; k < 2; k++) {
		const struct nss_hdr *sa = &ms[k]->h;

		NST_REQUIRE_EQ(
		    hp_rdma(hp, false, (uint32_t)k * MED, sa->rdma_len, ms[k]->desc, sa->desc_len),
		    0);
	}
	for (int k = 0; k < 2; k++) {
		const struct nss_hdr *sa = &ms[k]->h;
		struct nss_hdr h = hp_hdr(hp, NSS_RD_DONE);

		for (uint32_t i = 0; i < sa->rdma_len; i++)
			if (hp->lbuf[(size_t)k * MED + i] != pat(rest_off(sa) + i, SW_SEED)) {
				NST_CHECK_(false, CU_FALSE, "transfer %d: byte %u read is wrong", k,
					   i);
				break;
			}
		h.stream_off = rest_off(sa);
		h.rdma_len = sa->rdma_len;
		NST_EQ(hp_send(hp, &h, NULL, NULL), 0);
	}
}

/* Write path by the rules: a SINK_AVAIL for each (two outstanding, as the
 * peer's HELLO allows), the WR_DONEs in order, the bytes in place. */
static void sink_both(struct hp *hp, const struct nss_msg *m1, const struct nss_msg *m2)
{
	const struct nss_msg *ms[2] = {m1, m2};
	struct nss_msg m;

	hp_expose(hp, 2 * MED, 0, 0);
	for (int k = 0; k < 2; k++) {
		struct nss_hdr h = hp_hdr(hp, NSS_SINK_AVAIL);
		struct nicsim_rdma_desc d = hp->xdesc;

		/* Each SINK_AVAIL its own part of the one exposed buffer. */
		d.len = ms[k]->h.rdma_len;
		d.va += (uint64_t)k * MED;
		h.stream_off = rest_off(&ms[k]->h);
		h.desc_len = sizeof(d);
		h.rdma_len = ms[k]->h.rdma_len;
		NST_EQ(hp_send(hp, &h, &d, NULL), 0);
	}
	for (int k = 0; k < 2; k++) {
		const struct nss_hdr *sa = &ms[k]->h;

		NST_REQUIRE_EQ(hp_next_not_update(hp, &m), 0);
		NST_EQ(m.h.type, NSS_WR_DONE);
		NST_EQ_U(m.h.stream_off, rest_off(sa));
		NST_EQ_U(m.h.rdma_len, sa->rdma_len);
		for (uint32_t i = 0; i < sa->rdma_len; i++)
			if (hp->xbuf[(size_t)k * MED + i] != pat(rest_off(sa) + i, SW_SEED)) {
				NST_CHECK_(false, CU_FALSE, "transfer %d: byte %u written is wrong",
					   k, i);
				break;
			}
	}
}

/* Read path by the rules, the first transfer's RD_DONE in parts. */
static void read_both_done_in_parts(struct hp *hp, const struct nss_msg *m1,
				    const struct nss_msg *m2)
{
	const struct nss_msg *ms[2] = {m1, m2};

	hp_local(hp, 2 * MED);
	for (int k = 0; k < 2; k++)
		NST_REQUIRE_EQ(hp_rdma(hp, false, (uint32_t)k * MED, ms[k]->h.rdma_len, ms[k]->desc,
				       ms[k]->h.desc_len),
			       0);
	for (int k = 0; k < 2; k++) {
		const struct nss_hdr *sa = &ms[k]->h;
		uint32_t part = k == 0 ? sa->rdma_len / 3 : sa->rdma_len;

		for (uint32_t i = 0; i < sa->rdma_len; i++)
			if (hp->lbuf[(size_t)k * MED + i] != pat(rest_off(sa) + i, SW_SEED)) {
				NST_CHECK_(false, CU_FALSE, "transfer %d: byte %u read is wrong", k,
					   i);
				break;
			}
		for (uint32_t done = 0; done < sa->rdma_len;) {
			struct nss_hdr h = hp_hdr(hp, NSS_RD_DONE);
			uint32_t n = sa->rdma_len - done < part ? sa->rdma_len - done : part;

			h.stream_off = rest_off(sa) + done;
			h.rdma_len = n;
			NST_EQ(hp_send(hp, &h, NULL, NULL), 0);
			done += n;
		}
	}
}

/* The peer aborts with both transfers outstanding. */
static void aborts_two_outstanding(struct hp *hp, const struct nss_msg *m1,
				   const struct nss_msg *m2)
{
	struct nss_hdr h = hp_hdr(hp, NSS_ABORT);

	(void)m1;
	(void)m2;
	h.arg = NSS_ABORT_CLOSED;
	hp_send(hp, &h, NULL, NULL);
}

/* An RD_DONE for the first transfer's rest and the whole second. */
static void rd_done_spans_two(struct hp *hp, const struct nss_msg *m1, const struct nss_msg *m2)
{
	struct nss_hdr h = hp_hdr(hp, NSS_RD_DONE);

	h.stream_off = rest_off(&m1->h);
	h.rdma_len = m1->h.rdma_len + m2->h.data_len + m2->h.rdma_len;
	hp_send(hp, &h, NULL, NULL);
}

static void rd_done_second_first(struct hp *hp, const struct nss_msg *m1, const struct nss_msg *m2)
{
	struct nss_hdr h = hp_hdr(hp, NSS_RD_DONE);

	(void)m1;
	h.stream_off = rest_off(&m2->h);
	h.rdma_len = m2->h.rdma_len;
	hp_send(hp, &h, NULL, NULL);
}

/* A SINK_AVAIL of the switch's transfers at off for len bytes, with a
 * descriptor of zeros (the check must come before the provider's). */
static void sink_avail_at(struct hp *hp, uint64_t off, uint32_t len)
{
	struct nss_hdr h = hp_hdr(hp, NSS_SINK_AVAIL);
	uint8_t desc[NICSIM_RDMA_DESC_SIZE] = {0};

	h.stream_off = off;
	h.desc_len = sizeof(desc);
	h.rdma_len = len;
	hp_send(hp, &h, desc, NULL);
}

/* One SINK_AVAIL over the first transfer's rest, the second's inline
 * head and its rest: more than the transfer has left. */
static void sink_avail_over_head(struct hp *hp, const struct nss_msg *m1, const struct nss_msg *m2)
{
	sink_avail_at(hp, rest_off(&m1->h), m1->h.rdma_len + m2->h.data_len + m2->h.rdma_len);
}

/* The first SINK_AVAIL right, written and answered; the second at the
 * second transfer's head, which came inline, instead of after it. */
static void sink_avail_on_head(struct hp *hp, const struct nss_msg *m1, const struct nss_msg *m2)
{
	struct nss_hdr h = hp_hdr(hp, NSS_SINK_AVAIL);
	struct nss_msg m;

	hp_expose(hp, m1->h.rdma_len, 0, 0);
	h.stream_off = rest_off(&m1->h);
	h.desc_len = sizeof(hp->xdesc);
	h.rdma_len = m1->h.rdma_len;
	NST_EQ(hp_send(hp, &h, &hp->xdesc, NULL), 0);
	NST_REQUIRE_EQ(hp_next_not_update(hp, &m), 0);
	NST_REQUIRE_EQ(m.h.type, NSS_WR_DONE);
	sink_avail_at(hp, m2->h.stream_off, m2->h.data_len + m2->h.rdma_len);
}

/* A SINK_AVAIL for the second transfer while the first has none. */
static void sink_avail_second_first(struct hp *hp, const struct nss_msg *m1,
				    const struct nss_msg *m2)
{
	(void)m1;
	sink_avail_at(hp, rest_off(&m2->h), m2->h.rdma_len);
}

#define PIECES 4u /* SINK_AVAILs per transfer: 8 outstanding, what xfers 255 reads as */

/* The peer's HELLO said xfers 255, read as NSS_XFERS_MAX: it offers each
 * transfer in PIECES parts, all eight SINK_AVAILs back to back; the switch
 * writes each and answers with WR_DONEs in order. */
static void sink_in_pieces(struct hp *hp, const struct nss_msg *m1, const struct nss_msg *m2)
{
	const struct nss_msg *ms[2] = {m1, m2};
	struct nss_msg m;

	hp_expose(hp, 2 * MED, 0, 0);
	for (int k = 0; k < 2; k++) {
		uint32_t piece = ms[k]->h.rdma_len / PIECES;

		for (uint32_t j = 0; j < PIECES; j++) {
			struct nss_hdr h = hp_hdr(hp, NSS_SINK_AVAIL);
			struct nicsim_rdma_desc d = hp->xdesc;
			uint32_t len = j + 1 < PIECES ? piece : ms[k]->h.rdma_len - j * piece;

			d.va += (uint64_t)k * MED + (uint64_t)j * piece;
			d.len = len;
			h.stream_off = rest_off(&ms[k]->h) + (uint64_t)j * piece;
			h.desc_len = sizeof(d);
			h.rdma_len = len;
			NST_EQ(hp_send(hp, &h, &d, NULL), 0);
		}
	}
	for (int k = 0; k < 2; k++) {
		const struct nss_hdr *sa = &ms[k]->h;
		uint32_t piece = sa->rdma_len / PIECES;

		for (uint32_t j = 0; j < PIECES; j++) {
			NST_REQUIRE_EQ(hp_next_not_update(hp, &m), 0);
			NST_EQ(m.h.type, NSS_WR_DONE);
			NST_EQ_U(m.h.stream_off, rest_off(sa) + (uint64_t)j * piece);
			NST_EQ_U(m.h.rdma_len, j + 1 < PIECES ? piece : sa->rdma_len - j * piece);
		}
		for (uint32_t i = 0; i < sa->rdma_len; i++)
			if (hp->xbuf[(size_t)k * MED + i] != pat(rest_off(sa) + i, SW_SEED)) {
				NST_CHECK_(false, CU_FALSE, "transfer %d: byte %u written is wrong",
					   k, i);
				break;
			}
	}
}

/* The peer's process dies with both transfers outstanding: its socket
 * closes, which releases its registrations. */
static void peer_dies(struct hp *hp, const struct nss_msg *m1, const struct nss_msg *m2)
{
	int err = 0;

	(void)m1;
	(void)m2;
	NST_EQ(WSPCloseSocket(hp->s, &err), 0);
	hp->s = INVALID_SOCKET;
}

static void test_two_transfers(void)
{
	static const struct o2case cases[] = {
	    {.name = "two_reads_by_the_rules", .bad = read_both},
	    {.name = "two_writes_by_the_rules", .bad = sink_both, .no_can_read = true},
	    /* 255 is read as 8: the switch takes it, and still sends no more than it has. */
	    {.name = "hello_xfers_255", .bad = read_both, .xfers = 255},
	    {.name = "eight_sink_avails_xfers_255",
	     .bad = sink_in_pieces,
	     .no_can_read = true,
	     .xfers = 255},
	    {.name = "rd_done_in_parts", .bad = read_both_done_in_parts},
	    {.name = "peer_aborts_two_outstanding",
	     .bad = aborts_two_outstanding,
	     .err = ECONNRESET},
	    {.name = "rd_done_spans_two",
	     .bad = rd_done_spans_two,
	     .why = "RD_DONE for more than was offered",
	     .reason = NSS_ABORT_PROTOCOL,
	     .err = ECONNABORTED},
	    {.name = "rd_done_second_first",
	     .bad = rd_done_second_first,
	     .why = "RD_DONE not where the transfer stands",
	     .reason = NSS_ABORT_PROTOCOL,
	     .err = ECONNABORTED},
	    {.name = "sink_avail_over_next_head",
	     .bad = sink_avail_over_head,
	     .why = "SINK_AVAIL for more than the transfer has left",
	     .reason = NSS_ABORT_PROTOCOL,
	     .err = ECONNABORTED,
	     .no_can_read = true},
	    {.name = "sink_avail_on_next_head",
	     .bad = sink_avail_on_head,
	     .why = "SINK_AVAIL not where the transfer stands",
	     .reason = NSS_ABORT_PROTOCOL,
	     .err = ECONNABORTED,
	     .no_can_read = true},
	    {.name = "sink_avail_second_first",
	     .bad = sink_avail_second_first,
	     .why = "SINK_AVAIL not where the transfer stands",
	     .reason = NSS_ABORT_PROTOCOL,
	     .err = ECONNABORTED,
	     .no_can_read = true},
	    {.name = "peer_dies_read_path", .bad = peer_dies, .err = ECONNRESET, .dies = true},
	    {.name = "peer_dies_write_path",
	     .bad = peer_dies,
	     .err = ECONNRESET,
	     .no_can_read = true,
	     .dies = true},
	};

	for (int k = 0; k < 4; k++) {
		reader_waits_then_end(SW_ACCEPTS, k & 1, k & 2);
		reader_waits_then_end(SW_CONNECTS, k & 1, k & 2);
	}
	for (int w = 0; w < 2; w++) {
		pipelined_source(SW_ACCEPTS, true, w);
		pipelined_source(SW_CONNECTS, true, w);
		pipelined_source(SW_ACCEPTS, false, w);
		pipelined_source(SW_CONNECTS, false, w);
	}
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		run_out2_case(&cases[i], SW_ACCEPTS);
		run_out2_case(&cases[i], SW_CONNECTS);
	}
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"peer_that_keeps_the_rules", test_peer_that_keeps_the_rules},
	    {"bad_first_message", test_bad_first_message},
	    {"malformed_messages", test_malformed_messages},
	    {"sequence_credit_offsets", test_sequence_credit_offsets},
	    {"out_of_place", test_out_of_place},
	    {"peer_abort", test_peer_abort},
	    {"large_into_switch", test_large_into_switch},
	    {"large_out_of_switch", test_large_out_of_switch},
	    {"two_transfers", test_two_transfers},
	    {NULL, NULL},
	};

	return spi_main(argc, argv, "stream_hostile", tests);
}

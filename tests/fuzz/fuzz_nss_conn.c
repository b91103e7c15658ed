/*
 * libFuzzer target: the session protocol's connection state (provider/switch/
 * nss_conn.h), two sides at once.  Both run the real nss_conn; the input
 * picks what each side does next (send data, a credit update, a large
 * transfer's SRC_AVAIL, a SINK_AVAIL, RD_DONE, WR_DONE or SHUTDOWN, post a
 * receive again, take the next message that arrived) and, now and then,
 * forges the next message on the way with one field changed.  Every message
 * travels encoded (nss_encode, nss_decode) and in order, and arrives only
 * when its receiver has a receive posted for it, as on an RC connection.
 *
 * What it asserts beyond "no crash":
 *   - every message an honest side was allowed to send is taken by the
 *     other (nss_conn_rx returns 0): the sender's rules and the receiver's
 *     checks agree;
 *   - a send the state refuses (-EAGAIN, -EPROTO) changes nothing;
 *   - a forged message nss_conn_rx refuses changes nothing, and the real
 *     message is still taken after it; one with another seq, or one that
 *     puts the stream elsewhere, is always refused (another forgery may be
 *     a message an honest peer could have sent: taken, it ends the input);
 *   - with nothing on the way, the two sides agree on each stream: where it
 *     stands, its transfers and SINK_AVAILs outstanding, its end.
 *
 * Input: 10 bytes of HELLO parameters (per side: features, receives,
 * transfers, version, one spare), then records of 4 bytes (fuzz.h, enum
 * fz_conn_act).
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "nss_conn.h"
#include "nss_proto.h"

#define QUEUE 64u       /* messages on the way in one direction, at most */
#define DATA_MAX 1024u  /* bytes of inline data the harness sends, at most */
#define RECV_SIZE 4096u /* each side's receive size */
#define MSG_MAX (NSS_HDR_LEN + NSS_DESC_MAX + 8u + NSS_HELLO_MAX + DATA_MAX)

struct wire_msg {
	size_t len;
	uint8_t buf[MSG_MAX];
};

struct side {
	struct nss_conn c;
	uint8_t hello_body[NSS_HELLO_LEN];
	/* Messages to this side, oldest first. */
	struct wire_msg q[QUEUE];
	unsigned head, n;
};

static struct side sides[2];
static bool over; /* a forgery was taken: the two sides no longer agree */
static const uint8_t zeros[NSS_HELLO_MAX + DATA_MAX];

static bool same_dir(const struct nss_dir *out, const struct nss_dir *in)
{
	return out->off == in->off && out->end == in->end && out->nxfer == in->nxfer &&
	       !memcmp(out->xq, in->xq, out->nxfer * sizeof(out->xq[0])) &&
	       out->nsink == in->nsink &&
	       !memcmp(out->sq, in->sq, out->nsink * sizeof(out->sq[0])) && out->shut == in->shut;
}

/* Field by field (padding left out): the whole state of one side. */
static bool same_conn(const struct nss_conn *a, const struct nss_conn *b)
{
	return a->hello_in == b->hello_in && a->hello_out == b->hello_out &&
	       a->version == b->version && a->in_path == b->in_path && a->out_path == b->out_path &&
	       a->in_seq == b->in_seq && a->out_seq == b->out_seq &&
	       a->peer_limit == b->peer_limit && a->limit == b->limit &&
	       a->advertised == b->advertised && a->aborted == b->aborted &&
	       a->peer.recv_count == b->peer.recv_count && a->peer.features == b->peer.features &&
	       a->peer.xfers == b->peer.xfers && a->peer.version == b->peer.version &&
	       same_dir(&a->in, &b->in) && same_dir(&a->out, &b->out) &&
	       a->in.synced == b->in.synced && a->in.nstarts == b->in.nstarts &&
	       !memcmp(a->in.starts, b->in.starts, sizeof(a->in.starts));
}

/* Send h (already accounted for by the sender's nss_conn) to side to. */
static void put(struct side *to, const struct nss_hdr *h, const void *data)
{
	static const uint8_t desc[NSS_DESC_MAX] = {1, 2, 3, 4};
	struct wire_msg *w;
	long n;

	CHECK(to->n < QUEUE);
	w = &to->q[(to->head + to->n) % QUEUE];
	n = nss_encode(h, h->desc_len ? desc : NULL, h->data_len ? data : NULL, w->buf,
		       sizeof(w->buf));
	/* The sender's state made this header: it must be a message. */
	CHECK(n > 0);
	w->len = (size_t)n;
	to->n++;
}

/* Whether the oldest message to s has a receive posted for it. */
static bool deliverable(const struct side *s)
{
	struct nss_msg m;
	const char *why;

	if (!s->n)
		return false;
	CHECK(nss_decode(s->q[s->head].buf, s->q[s->head].len, &m, &why) == 0);
	return !nss_after(m.h.seq, s->c.limit);
}

/*
 * Forge the oldest message to s: field f of its header gets v.  Returns
 * false if the forgery was taken (the input ends), true otherwise.
 */
static bool forge(struct side *s, uint8_t f, uint8_t v)
{
	const struct wire_msg *w = &s->q[s->head];
	struct nss_conn before = s->c;
	uint8_t buf[MSG_MAX];
	struct nss_msg m;
	struct nss_hdr h;
	const char *why;
	uint32_t reason;
	long n;
	int r;

	CHECK(nss_decode(w->buf, w->len, &m, &why) == 0);
	h = m.h;
	switch (f % 7) {
	case 0: h.type = (uint8_t)(v % 9); break;
	case 1: h.seq += (uint32_t)(int8_t)v; break;
	case 2: h.credit_limit += (uint32_t)(int8_t)v; break;
	case 3: h.stream_off += (uint64_t)(int64_t)(int8_t)v; break;
	case 4: h.rdma_len += (uint32_t)(int8_t)v; break;
	case 5: h.data_len = (h.data_len + (uint32_t)(int8_t)v) % (DATA_MAX + 1); break;
	default: h.desc_len = (uint16_t)(h.desc_len ? 0 : 1 + v % NSS_DESC_MAX); break;
	}
	if (!memcmp(&h, &m.h, sizeof(h)))
		return true;
	n = nss_encode(&h, zeros, zeros, buf, sizeof(buf));
	if (n < 0 || nss_decode(buf, (size_t)n, &m, &why))
		return true;
	r = nss_conn_rx(&s->c, &m, &why, &reason);
	/* Some forgeries no state may take: a message out of sequence, or
	 * one that says the stream stands elsewhere (a credit update may
	 * trail the stream; HELLO and ABORT say nothing of it). */
	CHECK(!(r == 0 && f % 7 == 1));
	CHECK(!(r == 0 && f % 7 == 3 && h.type != NSS_HELLO && h.type != NSS_ABORT &&
		!(h.type == NSS_DATA && !h.data_len)));
	if (r == 0 || r == -ECONNRESET)
		return false;
	CHECK(r == -EPROTO && why != NULL);
	CHECK(same_conn(&before, &s->c));
	return true;
}

/* s takes its oldest message, which an honest peer sent. */
static void take(struct side *s)
{
	const struct wire_msg *w = &s->q[s->head];
	struct nss_msg m;
	const char *why;
	uint32_t reason;

	CHECK(nss_decode(w->buf, w->len, &m, &why) == 0);
	CHECK(nss_conn_rx(&s->c, &m, &why, &reason) == 0);
	s->head = (s->head + 1) % QUEUE;
	s->n--;
}

/* A send s's state may refuse: if it does, nothing changed. */
static void send_or_nothing(struct side *s, struct side *peer, int r, const struct nss_conn *before,
			    const struct nss_hdr *h)
{
	if (r == 0) {
		put(peer, h, zeros);
		return;
	}
	CHECK(r == -EAGAIN || r == -EPROTO);
	CHECK(same_conn(before, &s->c));
}

static void act(unsigned who, uint8_t what, const uint8_t arg[3])
{
	struct side *s = &sides[who], *peer = &sides[!who];
	struct nss_conn before = s->c;
	uint32_t a = (uint32_t)arg[0] | (uint32_t)arg[1] << 8 | (uint32_t)arg[2] << 16;
	struct nss_hdr h;
	uint64_t off = 0, room;
	int r;

	/* The queue bound is the harness's, not the protocol's: credits keep
	 * fewer than a side's receives on the way. */
	if (peer->n >= QUEUE - 1 && what % FZ_CONN_NACTS < FZ_CONN_REPOST)
		return;
	switch (what % FZ_CONN_NACTS) {
	case FZ_CONN_DATA: r = nss_conn_data_hdr(&s->c, 1 + a % DATA_MAX, &h); break;
	case FZ_CONN_CREDIT: r = nss_conn_data_hdr(&s->c, 0, &h); break;
	case FZ_CONN_SRC_AVAIL:
		r = nss_conn_src_avail_hdr(&s->c, 1 + arg[0] % 64, 1 + (a >> 8),
					   s->c.out_path == NSS_PATH_READ ? 16 : 0, &h);
		break;
	case FZ_CONN_SINK_AVAIL:
		room = nss_conn_sink_next(&s->c, &off);
		r = nss_conn_sink_avail_hdr(&s->c, room ? (uint32_t)(1 + a % room) : 1 + a, 16, &h);
		break;
	case FZ_CONN_RD_DONE:
		room = nss_dir_xfer(&s->c.in) ? nss_dir_xfer_end(&s->c.in) - s->c.in.off : 0;
		r = nss_conn_rd_done_hdr(&s->c, room ? (uint32_t)(1 + a % room) : 1 + a, &h);
		break;
	case FZ_CONN_WR_DONE: r = nss_conn_wr_done_hdr(&s->c, &h); break;
	case FZ_CONN_SHUTDOWN:
		/* Rarely: a stream that ends stops most of the rest. */
		if (arg[0] % 8)
			return;
		r = nss_conn_shutdown_hdr(&s->c, &h);
		break;
	case FZ_CONN_REPOST: /* a receive taken before */
		if (s->c.limit + 1 - s->c.in_seq < s->c.local.recv_count)
			nss_conn_repost(&s->c);
		return;
	case FZ_CONN_TAKE:
		if (deliverable(s))
			take(s);
		return;
	default: /* FZ_CONN_FORGE */
		if (deliverable(s) && !forge(s, arg[0], arg[1])) {
			over = true;
			return;
		}
		if (deliverable(s))
			take(s);
		return;
	}
	send_or_nothing(s, peer, r, &before, &h);
}

static int setup(const uint8_t *d)
{
	for (unsigned i = 0; i < 2; i++) {
		const uint8_t *p = d + 5 * i;
		struct nss_hello hello = {
		    .version = (uint16_t)(1 + p[3] % NSS_VERSION),
		    .features = (uint16_t)(p[0] & (NSS_F_CAN_READ | NSS_F_READABLE)),
		    .recv_count = NSS_MIN_RECVS + p[1] % 29,
		    .recv_size = RECV_SIZE,
		    .max_rdma = 1u << 20,
		    .rdma_threshold = NSS_MIN_THRESHOLD,
		    .desc_len = 16,
		    .xfers = (uint8_t)(p[2] % (NSS_XFERS_MAX + 1)),
		};
		struct nss_hello back;
		const char *why;

		/* Version 1's HELLO has no xfers: the byte is reserved. */
		if (hello.version < 2)
			hello.xfers = 0;
		memset(&sides[i], 0, sizeof(sides[i]));
		nss_conn_init(&sides[i].c, &hello);
		nss_hello_encode(&hello, sides[i].hello_body);
		/* A HELLO the project makes must be one it takes. */
		CHECK(nss_hello_decode(sides[i].hello_body, NSS_HELLO_LEN, &back, &why) == 0);
	}
	for (unsigned i = 0; i < 2; i++) {
		struct nss_hdr h;

		CHECK(nss_conn_hello_hdr(&sides[i].c, &h) == 0);
		put(&sides[!i], &h, sides[i].hello_body);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	if (n < 10)
		return 0;
	setup(d);
	over = false;
	d += 10, n -= 10;
	for (; n >= 4 && !over; d += 4, n -= 4) {
		unsigned who = d[0] & 1;
		uint8_t what = d[0] >> 1;

		act(who, what, d + 1);
		if (over || sides[0].c.aborted || sides[1].c.aborted)
			return 0;
		if (sides[0].c.hello_in && sides[1].c.hello_in) {
			CHECK(sides[0].c.out_path == sides[1].c.in_path);
			CHECK(sides[1].c.out_path == sides[0].c.in_path);
		}
		if (!sides[0].n && !sides[1].n) {
			CHECK(same_dir(&sides[0].c.out, &sides[1].c.in));
			CHECK(same_dir(&sides[1].c.out, &sides[0].c.in));
		}
	}
	return 0;
}

/* The session protocol's connection state (nss_conn.h). */
#include "nss_conn.h"

#include <errno.h>
#include <string.h>

void nss_conn_init(struct nss_conn *c, const struct nss_hello *local)
{
	memset(c, 0, sizeof(*c));
	c->local = *local;
	c->limit = local->recv_count - 1;
	c->advertised = c->limit;
	/* Until the peer's HELLO says whether it can be read (section 5). */
	c->in_path = local->features & NSS_F_CAN_READ ? NSS_PATH_READ : NSS_PATH_WRITE;
}

/* The large transfers a side takes outstanding as a sink (its HELLO h),
 * on the version the two sides run: version 1 has one. */
static uint32_t xfers(const struct nss_conn *c, const struct nss_hello *h)
{
	return c->version >= 2 ? nss_hello_xfers(h) : 1;
}

/* A large transfer of head bytes inline and rdma by RDMA was announced
 * at d->end: its RDMA part joins the queue. */
static void dir_push(struct nss_dir *d, uint32_t head, uint32_t rdma)
{
	uint64_t start = d->end + head;

	if (!d->nxfer)
		d->off = start;
	d->xq[d->nxfer++] = (struct nss_span){start, start + rdma};
	d->end = start + rdma;
}

/* len bytes of the oldest transfer's RDMA part moved: when it is over,
 * the stream stands at the next one's RDMA part (its head came before). */
static void dir_advance(struct nss_dir *d, uint64_t len)
{
	d->off += len;
	if (d->off != d->xq[0].end)
		return;
	memmove(&d->xq[0], &d->xq[1], (d->nxfer - 1) * sizeof(d->xq[0]));
	d->nxfer--;
	d->off = d->nxfer ? d->xq[0].off : d->end;
}

/* Where the next SINK_AVAIL of d starts (*off) and the most it may offer,
 * or 0 if every transfer outstanding is offered. */
static uint64_t dir_sink_next(const struct nss_dir *d, uint64_t *off)
{
	uint64_t at = d->nsink ? d->sq[d->nsink - 1].end : d->off;

	for (uint32_t i = 0; i < d->nxfer; i++) {
		if (at < d->xq[i].end) {
			*off = at > d->xq[i].off ? at : d->xq[i].off;
			return d->xq[i].end - *off;
		}
	}
	return 0;
}

/* The oldest SINK_AVAIL of d was written. */
static uint64_t dir_sink_pop(struct nss_dir *d)
{
	uint64_t len = d->sq[0].end - d->sq[0].off;

	memmove(&d->sq[0], &d->sq[1], (d->nsink - 1) * sizeof(d->sq[0]));
	d->nsink--;
	return len;
}

/*
 * The sink took a SRC_AVAIL: where the source's stream stood at least when
 * it sent it.  The source had fewer transfers outstanding than this side
 * allows (n), by its own count, which may still hold transfers this side
 * has finished: its oldest is one of the n - 1 announced before, or this
 * one, so it stood at the start of the RDMA part of the n-th last at
 * least.  (With n = 1, this one's.)
 */
static void note_start(const struct nss_conn *c, struct nss_dir *in)
{
	uint32_t n = xfers(c, &c->local);
	uint64_t at;

	in->starts[in->nstarts++ % NSS_XFERS_MAX] = in->xq[in->nxfer - 1].off;
	if (in->nstarts < n)
		return;
	at = in->starts[(in->nstarts - n) % NSS_XFERS_MAX];
	if (at > in->synced)
		in->synced = at;
}

/* The stateful checks of one message after the first (section 3); NULL if
 * it may be taken, else why not.  in and out are updated copies. */
static const char *check_rx(const struct nss_conn *c, const struct nss_hdr *h, struct nss_dir *in,
			    struct nss_dir *out)
{
	uint64_t at = 0, room;

	switch (h->type) {
	case NSS_DATA:
		if (!h->data_len) {
			/* A credit update says where the source stands, which
			 * trails this side while its RD_DONE is on the way. */
			if (h->stream_off > in->off || h->stream_off < in->synced)
				return "a credit update not where the stream stands";
			return NULL;
		}
		if (in->shut)
			return "data after SHUTDOWN";
		if (nss_dir_xfer(in))
			return "data while a large transfer is outstanding";
		if (h->stream_off != in->off)
			return "DATA not where the stream stands";
		in->off += h->data_len;
		in->end = in->synced = in->off;
		return NULL;
	case NSS_SRC_AVAIL:
		if (in->shut)
			return "SRC_AVAIL after SHUTDOWN";
		if (in->nxfer >= xfers(c, &c->local))
			return in->nxfer == 1
				   ? "a second large transfer before the first is done"
				   : "more large transfers outstanding than HELLO allows";
		if (h->stream_off != in->end)
			return "SRC_AVAIL not where the stream stands";
		if ((h->desc_len != 0) != (c->in_path == NSS_PATH_READ))
			return c->in_path == NSS_PATH_READ
				   ? "SRC_AVAIL without a descriptor on the "
				     "read path"
				   : "SRC_AVAIL with a descriptor on the write "
				     "path";
		dir_push(in, h->data_len, h->rdma_len);
		note_start(c, in);
		return NULL;
	case NSS_SINK_AVAIL:
		if (c->out_path != NSS_PATH_WRITE)
			return "SINK_AVAIL on the read path";
		if (!nss_dir_xfer(out))
			return "SINK_AVAIL with no large transfer outstanding";
		if (out->nsink >= xfers(c, &c->peer))
			return out->nsink == 1 ? "a second SINK_AVAIL before WR_DONE"
					       : "more SINK_AVAILs outstanding than HELLO allows";
		room = dir_sink_next(out, &at);
		if (!room)
			return "SINK_AVAIL for more than the transfers have left";
		if (h->stream_off != at)
			return "SINK_AVAIL not where the transfer stands";
		if (h->rdma_len > room)
			return "SINK_AVAIL for more than the transfer has left";
		out->sq[out->nsink++] = (struct nss_span){at, at + h->rdma_len};
		return NULL;
	case NSS_RD_DONE:
		if (c->out_path != NSS_PATH_READ)
			return "RD_DONE on the write path";
		if (!nss_dir_xfer(out))
			return "RD_DONE with no large transfer outstanding";
		if (h->stream_off != out->off)
			return "RD_DONE not where the transfer stands";
		if (h->rdma_len > nss_dir_xfer_end(out) - out->off)
			return "RD_DONE for more than was offered";
		dir_advance(out, h->rdma_len);
		return NULL;
	case NSS_WR_DONE:
		if (c->in_path != NSS_PATH_WRITE)
			return "WR_DONE on the read path";
		if (!in->nsink)
			return "WR_DONE with no SINK_AVAIL outstanding";
		if (h->stream_off != in->sq[0].off || h->rdma_len != in->sq[0].end - in->sq[0].off)
			return "WR_DONE that is not the SINK_AVAIL's";
		dir_advance(in, dir_sink_pop(in));
		return NULL;
	case NSS_SHUTDOWN:
		if (in->shut)
			return "a second SHUTDOWN";
		if (nss_dir_xfer(in))
			return "SHUTDOWN during a large transfer";
		if (h->stream_off != in->off)
			return "SHUTDOWN not where the stream stands";
		in->shut = true;
		return NULL;
	default: return "a message of no known type"; /* nss_decode lets none through */
	}
}

int nss_conn_rx(struct nss_conn *c, const struct nss_msg *m, const char **why, uint32_t *reason)
{
	const struct nss_hdr *h = &m->h;
	struct nss_dir in = c->in, out = c->out;

	*why = NULL;
	*reason = NSS_ABORT_PROTOCOL;
	if (!c->hello_in) {
		struct nss_hello peer;

		*reason = NSS_ABORT_BAD_HELLO;
		if (h->type != NSS_HELLO)
			*why = "the first message is not HELLO";
		else if (nss_hello_decode(m->data, h->data_len, &peer, why) == 0 &&
			 h->credit_limit != peer.recv_count - 1)
			*why = "HELLO's credit limit is not its receives";
		if (*why)
			return -EPROTO;
		c->peer = peer;
		c->hello_in = true;
		/* A later version negotiates down (section 5). */
		c->version = peer.version < c->local.version ? peer.version : c->local.version;
		c->in_seq = 1;
		c->peer_limit = h->credit_limit;
		/* A direction runs the read path when its sink reads and its
		 * source can be read (section 5). */
		c->out_path =
		    (peer.features & NSS_F_CAN_READ) && (c->local.features & NSS_F_READABLE)
			? NSS_PATH_READ
			: NSS_PATH_WRITE;
		c->in_path =
		    (c->local.features & NSS_F_CAN_READ) && (peer.features & NSS_F_READABLE)
			? NSS_PATH_READ
			: NSS_PATH_WRITE;
		return 0;
	}
	if (h->type == NSS_ABORT) {
		c->aborted = true;
		*why = "the peer aborted the connection";
		*reason = h->arg;
		return -ECONNRESET;
	}
	if (h->type == NSS_HELLO)
		*why = "HELLO after the first message";
	else if (h->seq != c->in_seq)
		*why = "a message out of sequence";
	/* Credit is checked against the limit this side last sent: the peer
	 * cannot know a higher one.  A message past the receives posted never
	 * arrives (the NIC holds it back), so a peer that ignores credits
	 * shows in the margins of the rule, which the check includes. */
	else if (nss_after(h->seq, c->advertised))
		*why = "a message beyond the credit given", *reason = NSS_ABORT_CREDIT;
	else if (!nss_may_send(h->type, h->data_len != 0, h->seq, c->advertised))
		*why = "a message beyond the credit the rule leaves its type (section 4)",
		*reason = NSS_ABORT_CREDIT;
	else if (nss_after(c->peer_limit, h->credit_limit))
		*why = "a credit limit that moves backwards";
	else
		*why = check_rx(c, h, &in, &out);
	if (*why)
		return -EPROTO;
	c->in = in;
	c->out = out;
	c->in_seq++;
	c->peer_limit = h->credit_limit;
	return 0;
}

void nss_conn_repost(struct nss_conn *c)
{
	c->limit++;
}

bool nss_conn_update_due(const struct nss_conn *c)
{
	uint32_t behind = c->limit - c->advertised;
	/* What the peer believes it has left: it sends in_seq next. */
	uint32_t peer_avail = c->advertised - c->in_seq + 1;

	return behind && (behind >= c->local.recv_count / 2 || peer_avail <= 2);
}

/* The common part of a header to send, if the credit allows it now. */
static int begin(struct nss_conn *c, uint8_t type, bool has_data, struct nss_hdr *h)
{
	if (!c->hello_out)
		return -EPROTO; /* HELLO first */
	if (!c->hello_in)
		return -EAGAIN; /* the peer's credit is not known yet */
	if (!nss_may_send(type, has_data, c->out_seq, c->peer_limit))
		return -EAGAIN;
	memset(h, 0, sizeof(*h));
	h->type = type;
	h->seq = c->out_seq;
	h->credit_limit = c->limit;
	return 0;
}

/* The message is going: its seq is spent, its limit told. */
static void commit(struct nss_conn *c)
{
	c->out_seq++;
	c->advertised = c->limit;
}

int nss_conn_hello_hdr(struct nss_conn *c, struct nss_hdr *h)
{
	if (c->hello_out)
		return -EPROTO;
	memset(h, 0, sizeof(*h));
	h->type = NSS_HELLO;
	h->data_len = NSS_HELLO_LEN;
	h->credit_limit = c->limit;
	c->hello_out = true;
	commit(c);
	return 0;
}

uint32_t nss_conn_xfer_room(const struct nss_conn *c)
{
	uint32_t max = xfers(c, &c->peer);

	return c->hello_in && c->out.nxfer < max ? max - c->out.nxfer : 0;
}

uint64_t nss_conn_sink_next(const struct nss_conn *c, uint64_t *off)
{
	if (c->in.nsink >= xfers(c, &c->local))
		return 0;
	return dir_sink_next(&c->in, off);
}

int nss_conn_data_hdr(struct nss_conn *c, uint32_t data_len, struct nss_hdr *h)
{
	int err;

	if (data_len && (c->out.shut || nss_dir_xfer(&c->out)))
		return -EPROTO;
	err = begin(c, NSS_DATA, data_len != 0, h);
	if (err)
		return err;
	h->data_len = data_len;
	h->stream_off = c->out.off;
	if (data_len) /* an update leaves a transfer outstanding where it is */
		c->out.end = c->out.off += data_len;
	commit(c);
	return 0;
}

int nss_conn_src_avail_hdr(struct nss_conn *c, uint32_t head, uint32_t rdma_len, uint16_t desc_len,
			   struct nss_hdr *h)
{
	int err;

	if (!c->hello_in)
		return -EAGAIN; /* the path is not known yet */
	if (!head || !rdma_len || c->out.shut || (desc_len != 0) != (c->out_path == NSS_PATH_READ))
		return -EPROTO;
	if (!nss_conn_xfer_room(c))
		return -EAGAIN;
	err = begin(c, NSS_SRC_AVAIL, true, h);
	if (err)
		return err;
	h->desc_len = desc_len;
	h->data_len = head;
	h->rdma_len = rdma_len;
	h->stream_off = c->out.end;
	dir_push(&c->out, head, rdma_len);
	commit(c);
	return 0;
}

int nss_conn_sink_avail_hdr(struct nss_conn *c, uint32_t len, uint16_t desc_len, struct nss_hdr *h)
{
	uint64_t at = 0, room;
	int err;

	if (c->in_path != NSS_PATH_WRITE || !len || !desc_len)
		return -EPROTO;
	if (c->in.nsink >= xfers(c, &c->local))
		return -EAGAIN;
	room = dir_sink_next(&c->in, &at);
	if (len > room)
		return -EPROTO;
	err = begin(c, NSS_SINK_AVAIL, false, h);
	if (err)
		return err;
	h->desc_len = desc_len;
	h->rdma_len = len;
	h->stream_off = at;
	c->in.sq[c->in.nsink++] = (struct nss_span){at, at + len};
	commit(c);
	return 0;
}

int nss_conn_rd_done_hdr(struct nss_conn *c, uint32_t len, struct nss_hdr *h)
{
	int err;

	if (c->in_path != NSS_PATH_READ || !nss_dir_xfer(&c->in) || !len ||
	    len > nss_dir_xfer_end(&c->in) - c->in.off)
		return -EPROTO;
	err = begin(c, NSS_RD_DONE, false, h);
	if (err)
		return err;
	h->rdma_len = len;
	h->stream_off = c->in.off;
	dir_advance(&c->in, len);
	commit(c);
	return 0;
}

int nss_conn_wr_done_hdr(struct nss_conn *c, struct nss_hdr *h)
{
	int err;

	if (c->out_path != NSS_PATH_WRITE || !c->out.nsink)
		return -EPROTO;
	err = begin(c, NSS_WR_DONE, false, h);
	if (err)
		return err;
	h->stream_off = c->out.sq[0].off;
	h->rdma_len = (uint32_t)(c->out.sq[0].end - c->out.sq[0].off);
	dir_advance(&c->out, dir_sink_pop(&c->out));
	commit(c);
	return 0;
}

int nss_conn_shutdown_hdr(struct nss_conn *c, struct nss_hdr *h)
{
	int err;

	if (c->out.shut || nss_dir_xfer(&c->out))
		return -EPROTO;
	err = begin(c, NSS_SHUTDOWN, false, h);
	if (err)
		return err;
	h->stream_off = c->out.off;
	c->out.shut = true;
	commit(c);
	return 0;
}

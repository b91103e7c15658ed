/*
 * The switch's engine: the session protocol of docs/session-protocol.md over
 * one SPI socket, driven by nss_conn (what may be sent, what a received
 * message must be) and run under sk->lock by whichever thread gets there:
 * the library's progress thread when the SPI signals the socket's event,
 * or an application thread inside a call.
 *
 * Receives complete in the order they were posted (postq).  A message is
 * taken as soon as its receive completes: control messages are acted on and
 * their receive posted again at once; data stays in its receive until the
 * application has read it (the delivery queue, dq), so the receives held
 * are what bounds the bytes waiting (section 4, "Holding back"), and the
 * credit rule keeps two receives posted for the done and shutdown messages
 * whatever the application does.
 *
 * A large transfer in (this side the sink) goes through the bounce buffer:
 * on the read path the engine reads a chunk into it and sends RD_DONE, on
 * the write path it exposes it, sends SINK_AVAIL and takes the WR_DONE;
 * either way the chunk then waits in dq and the next one starts when the
 * application has taken it.  A large transfer out reads from the
 * application's buffer (or the staging copy of a non-blocking send).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "nicsim_provider.h"
#include "sw.h"

#define SW_RECV_MAX 256u
#define SW_RECV_SIZE_MAX 4096u
#define SW_SENDS 8u
#define SW_BOUNCE (1u << 20)

static bool ov_done(const WSAOVERLAPPED *ov)
{
	return __atomic_load_n(&ov->Internal, __ATOMIC_ACQUIRE) != WSA_STATUS_PENDING;
}

static void ov_prepare(struct sw_sock *sk, WSAOVERLAPPED *ov)
{
	memset(ov, 0, sizeof(*ov));
	ov->hEvent = sk->evfd;
}

/* The k-th oldest SINK_AVAIL of the peer's not yet answered. */
static struct sw_sink *sink(struct sw_sock *sk, uint32_t k)
{
	return &sk->sinks[(sk->sink_head + k) % NSS_XFERS_MAX];
}

/* The k-th oldest chunk moving. */
static struct sw_chunk *chunk(struct sw_sock *sk, uint32_t k)
{
	return &sk->ch[(sk->ch_head + k) % SW_XFERS];
}

int sw_errno_of(int wsa)
{
	switch (wsa) {
	case 0: return 0;
	case WSAENETDOWN: return ENETDOWN;
	case WSAECONNABORTED: return ECONNABORTED;
	case WSAECONNREFUSED: return ECONNREFUSED;
	case WSAETIMEDOUT: return ETIMEDOUT;
	case WSAEHOSTUNREACH: return EHOSTUNREACH;
	case WSAENETUNREACH: return ENETUNREACH;
	case WSAEADDRINUSE: return EADDRINUSE;
	case WSAEADDRNOTAVAIL: return EADDRNOTAVAIL;
	case WSAENOBUFS: return ENOBUFS;
	case WSAEMSGSIZE: return EMSGSIZE;
	case WSAEFAULT: return EFAULT;
	case WSAEINVAL: return EINVAL;
	case WSAEISCONN: return EISCONN;
	case WSAENOTCONN: return ENOTCONN;
	case WSAEALREADY: return EALREADY;
	case WSAEINTR: return EINTR;
	case WSAEOPNOTSUPP: return EOPNOTSUPP;
	case WSAEAFNOSUPPORT: return EAFNOSUPPORT;
	case WSAEWOULDBLOCK: return EAGAIN;
	default: return ECONNRESET; /* flushes, resets, refusals by the peer */
	}
}

/* ---- Readiness for the application ------------------------------------------ */

/* Something for a reader: bytes, an error, or an end not yet reported
 * (once a recv has returned end-of-file, the end is no longer news, and a
 * sender that got EAGAIN after it must be able to wait for room). */
static bool readable(const struct sw_sock *sk)
{
	return sk->dq_len || sk->err ||
	       (!sk->eof_told && (sk->rd_shut || sk->pc.in.shut || sk->close_code >= 0));
}

/* Whether a send could take bytes now: the peer's HELLO is in, no large
 * transfer is outstanding, and a send slot and the credit for data are free. */
static bool writable(struct sw_sock *sk)
{
	return sk->pc.hello_in && !sk->nout && !sk->pend.on && sw_tx_free(sk) &&
	       nss_may_send(NSS_DATA, true, sk->pc.out_seq, sk->pc.peer_limit);
}

/*
 * The application's descriptor reads as ready once something may be there
 * for it, and stays so until a call of the application finds nothing
 * (sw_ready_reset): POLLIN is a hint, so a blocking application, which
 * never gets EAGAIN, costs no system call per message for it.
 */
void sw_update_ready(struct sw_sock *sk)
{
	uint64_t v = 1;
	ssize_t r;

	if (sk->ready ||
	    !(sk->err || sk->accept_ready || sk->connect_done ||
	      (sk->st == SW_CONNECTED && readable(sk)) || (sk->want_write && writable(sk))))
		return;
	sk->ready = true;
	/* The descriptor is ours: a failure could only be a bug. */
	r = write(sk->fd, &v, sizeof(v));
	(void)r;
}

/* A call found nothing (EAGAIN): the descriptor reads as ready again only
 * when something may have come. */
void sw_ready_reset(struct sw_sock *sk)
{
	uint64_t v;
	ssize_t r;

	if (!sk->ready)
		return;
	r = read(sk->fd, &v, sizeof(v));
	(void)r;
	sk->ready = false;
	sw_update_ready(sk);
}

/* ---- Failing and tearing down ------------------------------------------------ */

/* Release what a transfer out holds registered (a staging buffer's
 * registration stays). */
static void out_release(struct sw_sock *sk, struct sw_out *o)
{
	int e;

	if (o->exposed)
		sw_spi.dereg_rdma(sk->spi, o->desc, sizeof(o->desc), &e);
	if (o->h && !o->staged)
		sw_spi.dereg(sk->spi, o->h, &e);
	o->exposed = false;
	o->h = NULL;
}

/* Release what the transfers of the connection hold registered. */
static void release_xfers(struct sw_sock *sk)
{
	int e;

	for (uint32_t k = 0; k < sk->nout; k++)
		out_release(sk, &sk->out[k]);
	for (uint32_t k = 0; k < sk->nch; k++) {
		struct sw_chunk *c = chunk(sk, k);

		if (c->exposed)
			sw_spi.dereg_rdma(sk->spi, c->bdesc, sizeof(c->bdesc), &e);
	}
	if (sk->zc_h)
		sw_spi.dereg(sk->spi, sk->zc_h, &e);
	sk->zc_h = NULL;
	for (uint32_t k = 0; k < SW_XFERS; k++) {
		struct sw_stage *g = &sk->stg[k];

		if (g->exposed)
			sw_spi.dereg_rdma(sk->spi, g->desc, sizeof(g->desc), &e);
		g->exposed = false;
		if (g->h)
			sw_spi.dereg(sk->spi, g->h, &e);
		g->h = NULL;
	}
	sk->pend.on = false; /* a send not started dies with the connection */
	sk->nin = sk->nch = 0;
}

/* The connection is over (err, a positive errno): every call of the
 * application gets err from now on, after the bytes already delivered
 * when err is only the peer's end. */
void sw_fail(struct sw_sock *sk, int err)
{
	if (sk->err)
		return;
	sk->err = err;
	if (sk->nout && !sk->out_err)
		sk->out_err = err;
	pthread_cond_broadcast(&sk->cond);
}

/* Reset the connection: ABORT with reason if a credit allows, then close. */
void sw_abort(struct sw_sock *sk, uint32_t reason, int err)
{
	if (sk->st != SW_CONNECTED || sk->err)
		return;
	sk->abort_due = true;
	sk->abort_reason = reason;
	sw_ctl_flush(sk);
	sk->dq_len = 0; /* nothing reaches the application after the failure */
	sw_fail(sk, err);
	sw_teardown(sk);
}

/* Release everything of the connection and close the SPI socket. */
void sw_teardown(struct sw_sock *sk)
{
	int e;

	if (sk->spi == INVALID_SOCKET)
		return;
	release_xfers(sk);
	for (uint32_t k = 0; k < SW_XFERS; k++) {
		struct sw_bounce *g = &sk->bnc[k];

		if (g->h)
			sw_spi.dereg(sk->spi, g->h, &e);
		g->h = NULL;
		if (g->exposed)
			sw_spi.dereg_rdma(sk->spi, g->desc, sizeof(g->desc), &e);
		g->exposed = false;
	}
	/* The control pool is in use by the posted receives: closing flushes
	 * them and releases it (R11). */
	sw_spi.t.lpWSPCloseSocket(sk->spi, &e);
	sk->spi = INVALID_SOCKET;
	sk->ctl_h = NULL;
	sk->nsinks = 0;
	for (uint32_t i = 0; i < sk->nsend; i++)
		sk->tx[i].busy = false;
	if (sk->st == SW_CONNECTED || sk->st == SW_CONNECTING)
		sk->st = SW_DOWN;
	if (sk->nout) {
		sk->nout = 0;
		if (!sk->out_err)
			sk->out_err = sk->err ? sk->err : ECONNRESET;
	}
	pthread_cond_broadcast(&sk->cond);
}

/*
 * A send or a receive of the connection failed with WSA code e, as it was
 * posted or when it completed.  After the peer's SHUTDOWN that is the peer
 * having closed: this side's reader gets end-of-file and later sends fail
 * (the socket is down).  Before it, the connection broke.  A negative
 * errno for the caller.
 */
static int conn_lost(struct sw_sock *sk, int e)
{
	bool ended = e == WSAECONNRESET || e == WSAECONNABORTED || e == WSAENETDOWN ||
		     e == WSAENOTCONN || e == WSA_OPERATION_ABORTED;

	if (sk->pc.in.shut && !sk->err) {
		sk->close_code = sk->close_code < 0 ? 0 : sk->close_code;
		sw_teardown(sk);
		return -EPIPE;
	}
	/* A post that finds the connection ended: what the peer sent before
	 * may still wait in completed receives, its SHUTDOWN among them, and
	 * the rest are flushed.  reap takes them in order and the first
	 * flush says how the connection ended (end-of-file after SHUTDOWN). */
	if (ended && sk->pq_len && !sk->err) {
		sk->post_err = e;
		return -sw_errno_of(e);
	}
	sw_fail(sk, sw_errno_of(e));
	return -sk->err;
}

/* ---- Sending control messages ------------------------------------------------ */

bool sw_tx_free(struct sw_sock *sk)
{
	for (uint32_t i = 0; i < sk->nsend; i++)
		if (!sk->tx[i].busy)
			return true;
	return false;
}

static struct sw_slot *tx_slot(struct sw_sock *sk)
{
	for (uint32_t i = 0; i < sk->nsend; i++)
		if (!sk->tx[i].busy)
			return &sk->tx[i];
	return NULL;
}

/* The largest message this side sends: what the peer's receives take, and
 * what its own send slots (of its own receive size) hold. */
static uint32_t msg_max(const struct sw_sock *sk)
{
	return sk->pc.peer.recv_size < sk->rsize ? sk->pc.peer.recv_size : sk->rsize;
}

/* Encode h (accounted for already) into slot and send it. */
static int tx_post(struct sw_sock *sk, struct sw_slot *slot, const struct nss_hdr *h,
		   const void *desc, const void *data)
{
	long n = nss_encode(h, desc, data, slot->buf, sk->rsize);
	WSABUF b;
	DWORD sent = 0;
	int e = 0;

	if (n < 0) {
		/* A message nss_conn accepted always encodes: a bug. */
		fprintf(stderr, "nicsim switch: cannot encode message type %u (%ld)\n", h->type, n);
		sw_fail(sk, EPROTO);
		return -EPROTO;
	}
	b.len = (ULONG)n;
	b.buf = (char *)slot->buf;
	ov_prepare(sk, &slot->ov);
	/* A send's completion only frees its slot, which the next pass
	 * finds: it wakes the progress thread only when it is the last free
	 * slot (a sender may wait for it) or the connection's end waits on
	 * it.  Every send still completes: the provider runs progress for the
	 * receives, which always have an event. */
	slot->busy = true;
	if (sw_tx_free(sk) && h->type != NSS_SHUTDOWN && h->type != NSS_ABORT)
		slot->ov.hEvent = WSA_INVALID_EVENT;
	slot->busy = false;
	if (sw_spi.t.lpWSPSend(sk->spi, &b, 1, &sent, 0, &slot->ov, NULL, NULL, &e) != 0 &&
	    e != WSA_IO_PENDING)
		return conn_lost(sk, e);
	slot->busy = true;
	sk->stats.msgs_sent++;
	return 0;
}

/* The oldest chunk whose SINK_AVAIL is still to send, or NULL. */
static struct sw_chunk *sink_due(struct sw_sock *sk)
{
	for (uint32_t k = 0; k < sk->nch; k++)
		if (chunk(sk, k)->sink_due)
			return chunk(sk, k);
	return NULL;
}

/* Send what the protocol owes the peer, as far as credit and send slots
 * allow: 0, or a negative errno when the connection failed. */
int sw_ctl_flush(struct sw_sock *sk)
{
	struct nss_hdr h;
	struct sw_slot *slot;
	struct sw_chunk *c;

	if (sk->spi == INVALID_SOCKET || sk->st != SW_CONNECTED)
		return sk->err ? -sk->err : 0;
	if (sk->abort_due) {
		slot = tx_slot(sk);
		sk->abort_due = false;
		if (slot && !nss_after(sk->pc.out_seq, sk->pc.peer_limit)) {
			memset(&h, 0, sizeof(h));
			h.type = NSS_ABORT;
			h.seq = sk->pc.out_seq++;
			h.credit_limit = sk->pc.limit;
			h.arg = sk->abort_reason;
			tx_post(sk, slot, &h, NULL, NULL);
		}
		return 0;
	}
	while ((slot = tx_slot(sk)) != NULL && !sk->err) {
		int r;

		if (sk->done_due) {
			/* One RD_DONE per transfer: the bytes read may run
			 * into the next one. */
			uint64_t room = nss_dir_xfer_end(&sk->pc.in) - sk->pc.in.off;
			uint32_t n = room < sk->done_due ? (uint32_t)room : sk->done_due;

			r = nss_conn_rd_done_hdr(&sk->pc, n, &h);
			if (r == 0)
				sk->done_due -= n;
		} else if (sk->nsinks && sink(sk, 0)->st == SW_SINK_WRITTEN) {
			r = nss_conn_wr_done_hdr(&sk->pc, &h);
			if (r == 0) {
				sk->sink_head = (sk->sink_head + 1) % NSS_XFERS_MAX;
				sk->nsinks--;
			}
		} else if ((c = sink_due(sk)) != NULL) {
			r = nss_conn_sink_avail_hdr(&sk->pc, c->len, NICSIM_RDMA_DESC_SIZE, &h);
			if (r == 0) {
				c->sink_due = false;
				r = tx_post(sk, slot, &h, c->bdesc, NULL);
				continue;
			}
		} else if (sk->shutdown_due && !nss_dir_xfer(&sk->pc.out) && !sk->pend.on) {
			r = nss_conn_shutdown_hdr(&sk->pc, &h);
			if (r == 0)
				sk->shutdown_due = false;
		} else if (nss_conn_update_due(&sk->pc)) {
			r = nss_conn_data_hdr(&sk->pc, 0, &h);
			if (r == 0)
				sk->stats.credit_updates++;
		} else {
			break;
		}
		if (r == -EAGAIN)
			break;
		if (r) {
			fprintf(stderr, "nicsim switch: internal protocol error %d\n", r);
			sw_fail(sk, EPROTO);
			break;
		}
		if (tx_post(sk, slot, &h, NULL, NULL))
			break;
	}
	return sk->err ? -sk->err : 0;
}

/* ---- Receives ---------------------------------------------------------------- */

static int rx_post(struct sw_sock *sk, uint32_t i)
{
	struct sw_slot *s = &sk->rx[i];
	WSABUF b = {.len = sk->rsize, .buf = (char *)s->buf};
	DWORD got = 0, flags = 0;
	int e = 0;

	ov_prepare(sk, &s->ov);
	if (sw_spi.t.lpWSPRecv(sk->spi, &b, 1, &got, &flags, &s->ov, NULL, NULL, &e) != 0 &&
	    e != WSA_IO_PENDING)
		return conn_lost(sk, e);
	s->busy = true;
	sk->postq[(sk->pq_head + sk->pq_len++) % sk->nrecv] = i;
	return 0;
}

/* A receive whose message was taken is posted again: one more credit. */
static void rx_repost(struct sw_sock *sk, uint32_t i)
{
	sk->rx[i].busy = false;
	if (sk->spi == INVALID_SOCKET || sk->err)
		return;
	if (rx_post(sk, i) == 0)
		nss_conn_repost(&sk->pc);
}

static void dq_push(struct sw_sock *sk, const uint8_t *p, uint32_t len, int32_t slot)
{
	struct sw_piece *d = &sk->dq[(sk->dq_head + sk->dq_len++) % (sk->nrecv + 1)];

	d->p = p;
	d->len = len;
	d->slot = slot;
}

/* The application took bytes from the head of dq: release what it emptied. */
void sw_consumed(struct sw_sock *sk, uint32_t bytes)
{
	while (bytes && sk->dq_len) {
		struct sw_piece *d = &sk->dq[sk->dq_head];
		uint32_t n = bytes < d->len ? bytes : d->len;

		d->p += n;
		d->len -= n;
		bytes -= n;
		sk->stats.bytes_received += n;
		if (d->len)
			break;
		sk->dq_head = (sk->dq_head + 1) % (sk->nrecv + 1);
		sk->dq_len--;
		if (d->slot >= 0)
			rx_repost(sk, (uint32_t)d->slot);
		else
			sk->bnc[-1 - d->slot].busy = false;
	}
}

static void refuse(struct sw_sock *sk, const struct nss_hdr *h, const char *why, uint32_t reason);

/*
 * Posting an RDMA operation against the peer's descriptor failed with WSA
 * code e.  The provider refuses a descriptor that is not one of the peer's
 * NIC (WSAEINVAL) or does not cover the transfer (WSAEFAULT) before
 * anything moves, and this side's own buffer and handle are right: the
 * descriptor of the peer's SRC_AVAIL or SINK_AVAIL (of type) is the peer's
 * protocol error.  Any other error is the connection's.
 */
static void rdma_post_failed(struct sw_sock *sk, int e, uint8_t type, uint64_t off)
{
	char why[160];

	if (e != WSAEINVAL && e != WSAEFAULT) {
		sw_fail(sk, sw_errno_of(e));
		return;
	}
	snprintf(why, sizeof(why),
		 "the descriptor of its %s at stream offset %llu is not one the provider can use "
		 "(%s)",
		 type == NSS_SRC_AVAIL ? "SRC_AVAIL" : "SINK_AVAIL", (unsigned long long)off,
		 e == WSAEINVAL ? "WSAEINVAL" : "WSAEFAULT");
	refuse(sk, NULL, why, NSS_ABORT_PROTOCOL);
}

/* ---- Large transfers in (this side is the sink) -------------------------------- */

/*
 * A buffer of the switch's own that the NIC moves data in or out of: one
 * the NICs map (nicsim_provider.h), which they copy at memcpy speed, or
 * ordinary memory if the provider has none to give.  0 or -ENOBUFS.
 */
static int own_alloc(uint32_t len, uint8_t **buf, bool *shared)
{
	*shared = nicsim_buffer_alloc(len, (void **)buf) == 0;
	if (!*shared && posix_memalign((void **)buf, 4096, len))
		return -ENOBUFS;
	return 0;
}

static void own_free(uint8_t **buf, bool *shared)
{
	if (*shared)
		nicsim_buffer_free(*buf);
	else
		free(*buf);
	*buf = NULL;
	*shared = false;
}

void sw_bounce_free(struct sw_sock *sk)
{
	for (uint32_t k = 0; k < SW_XFERS; k++)
		own_free(&sk->bnc[k].buf, &sk->bnc[k].shared);
}

/* Bounce buffer k, allocated (and on the read path registered) once.
 * 0 or a negative errno. */
static int bounce_get(struct sw_sock *sk, uint32_t k)
{
	struct sw_bounce *g = &sk->bnc[k];
	int e = 0;

	if (g->buf)
		return 0;
	if (!sk->bounce_len)
		sk->bounce_len = sk->in_max < SW_BOUNCE ? sk->in_max : SW_BOUNCE;
	if (own_alloc(sk->bounce_len, &g->buf, &g->shared))
		return -ENOMEM;
	if (sk->pc.in_path == NSS_PATH_READ) {
		g->h = sw_spi.reg(sk->spi, g->buf, sk->bounce_len, MEM_READWRITE, &e);
		if (!g->h) {
			own_free(&g->buf, &g->shared);
			return -sw_errno_of(e);
		}
	} else {
		DWORD dl = sizeof(g->desc);

		if (sw_spi.reg_rdma(sk->spi, g->buf, sk->bounce_len, MEM_WRITE, g->desc, &dl, &e)) {
			own_free(&g->buf, &g->shared);
			return -sw_errno_of(e);
		}
		g->exposed = true;
	}
	sk->stats.registrations++;
	return 0;
}

/* The transfer in that the next chunk comes from: the oldest with bytes
 * no chunk has taken yet, or NULL. */
static struct sw_in *in_unstarted(struct sw_sock *sk)
{
	for (uint32_t k = 0; k < sk->nin; k++)
		if (sk->xin[k].started < sk->xin[k].len)
			return &sk->xin[k];
	return NULL;
}

/*
 * Move the next chunk of the transfers in (at most len bytes) to dst,
 * registered for the NIC as h on the read path: read it, or expose dst and
 * owe the peer a SINK_AVAIL.  bounce: the bounce buffer dst is, or -1 (the
 * reader's buffer).  0 or a negative errno (nothing started).
 */
static int chunk_start(struct sw_sock *sk, uint8_t *dst, uint32_t len, HANDLE h, int bounce)
{
	struct sw_in *t = in_unstarted(sk);
	struct sw_chunk *c = chunk(sk, sk->nch);
	uint64_t left = t->len - t->started;
	int e = 0;

	memset(c, 0, sizeof(*c));
	c->bounce = bounce;
	c->len = (uint32_t)(left < len ? left : len);
	if (sk->pc.in_path == NSS_PATH_READ) {
		WSABUFEX b = {.len = c->len, .buf = (char *)dst, .handle = h};
		DWORD n = 0;

		ov_prepare(sk, &c->ov);
		if (sw_spi.rdma_read(sk->spi, &b, 1, t->desc, t->desc_len, (DWORD)t->started, &n, 0,
				     &c->ov, NULL, NULL, &e) != 0 &&
		    e != WSA_IO_PENDING) {
			/* A descriptor the provider refuses ends the connection. */
			rdma_post_failed(sk, e, NSS_SRC_AVAIL, t->off + t->started);
			return -sk->err;
		}
		c->op = true;
		sk->stats.rdma_ops++;
	} else if (bounce >= 0) {
		/* Exposed once: it holds only bytes of the peer's own stream. */
		memcpy(c->bdesc, sk->bnc[bounce].desc, sizeof(c->bdesc));
		c->sink_due = true;
	} else {
		DWORD dl = sizeof(c->bdesc);

		if (sw_spi.reg_rdma(sk->spi, dst, c->len, MEM_WRITE, c->bdesc, &dl, &e))
			return -sw_errno_of(e);
		sk->stats.registrations++;
		c->exposed = true;
		c->sink_due = true;
	}
	t->started += c->len;
	sk->nch++;
	return 0;
}

/* A bounce buffer that holds nothing for the application and no chunk
 * moves into, or -1. */
static int bounce_free_one(struct sw_sock *sk)
{
	bool used[SW_XFERS] = {false};

	for (uint32_t k = 0; k < sk->nch; k++)
		if (chunk(sk, k)->bounce >= 0)
			used[chunk(sk, k)->bounce] = true;
	for (uint32_t k = 0; k < SW_XFERS; k++)
		if (!used[k] && !sk->bnc[k].busy && (k == 0 || !sk->bnc_short))
			return (int)k;
	return -1;
}

/*
 * Start chunks of the transfers in into free bounce buffers, up to one per
 * bounce buffer in flight, unless a reader waits to take the next chunk
 * straight into its own buffer (sw_zc_begin).  A second bounce buffer that
 * cannot be had only costs the overlap.
 */
static void in_next(struct sw_sock *sk)
{
	while (sk->nch < SW_XFERS && !sk->err && in_unstarted(sk) &&
	       !(sk->zc_reader && !sk->nch && !sk->dq_len)) {
		int k = bounce_free_one(sk), err;

		if (k < 0)
			return;
		err = bounce_get(sk, (uint32_t)k);
		if (err && k > 0) {
			sk->bnc_short = true;
			return;
		}
		if (err) {
			sw_abort(sk, NSS_ABORT_NO_MEMORY, ENOBUFS);
			return;
		}
		err = chunk_start(sk, sk->bnc[k].buf, sk->bounce_len, sk->bnc[k].h, k);
		if (err == -ENOBUFS)
			sw_abort(sk, NSS_ABORT_NO_MEMORY, ENOBUFS);
		else if (err)
			sw_fail(sk, -err);
		if (err)
			return;
	}
}

/*
 * A reader waits with room for len bytes at dst and nothing before them
 * is waiting: take the transfers' next chunk straight into dst, with no
 * copy.  1 when started: the caller waits until sk->zc_got says so, then the
 * bytes are in dst.  0: no chunk to take now.  -1: not possible (dst
 * cannot be registered): take the bytes as they come, through the bounce.
 */
int sw_zc_begin(struct sw_sock *sk, uint8_t *dst, uint32_t len)
{
	HANDLE h = NULL;
	int e = 0;

	if (sk->nch || sk->dq_len || sk->err || !in_unstarted(sk))
		return 0;
	if (len < SW_ZC_MIN)
		return -1;
	if (len > sk->in_max)
		len = sk->in_max;
	if (sk->pc.in_path == NSS_PATH_READ) {
		/* Through the registration cache: the same buffer again costs
		 * nothing. */
		h = sw_spi.reg(sk->spi, dst, len, MEM_READWRITE, &e);
		if (!h)
			return -1;
		sk->stats.registrations++;
	}
	if (chunk_start(sk, dst, len, h, -1)) {
		if (h)
			sw_spi.dereg(sk->spi, h, &e);
		return -1;
	}
	sk->zc_got = 0;
	sk->zc_h = h;
	return 1;
}

/* A transfer in begins (it is the oldest): its head, in receive slot,
 * goes to the application. */
static void in_begin(struct sw_sock *sk, const struct sw_in *t)
{
	dq_push(sk, t->head, t->head_len, (int32_t)t->slot);
}

/* The oldest chunk landed, the stream's next bytes: to the reader that
 * waits for them, or to the application from its bounce buffer; its
 * transfer is over when it was the last. */
static void chunk_landed(struct sw_sock *sk)
{
	struct sw_chunk *c = chunk(sk, 0);
	struct sw_in *t = &sk->xin[0];
	int e;

	if (c->bounce < 0) {
		if (sk->zc_h)
			sw_spi.dereg(sk->spi, sk->zc_h, &e);
		sk->zc_h = NULL;
		sk->zc_got = c->len;
	} else {
		sk->bnc[c->bounce].busy = true;
		dq_push(sk, sk->bnc[c->bounce].buf, c->len, -1 - c->bounce);
	}
	if (sk->pc.in_path == NSS_PATH_READ)
		sk->done_due += c->len; /* our own wait, not the provider's fence, orders it */
	t->landed += c->len;
	sk->ch_head = (sk->ch_head + 1) % SW_XFERS; /* a ring: reads in flight keep their place */
	sk->nch--;
	if (t->landed < t->len)
		return;
	memmove(&sk->xin[0], &sk->xin[1], --sk->nin * sizeof(sk->xin[0]));
	if (sk->nin)
		in_begin(sk, &sk->xin[0]);
}

/* ---- Large transfers out (this side is the source) ----------------------------- */

/* The oldest transfer out is over (failed ones end in sw_teardown, not
 * here): release its registration, wake its sender. */
static void out_end(struct sw_sock *sk)
{
	out_release(sk, &sk->out[0]);
	memmove(&sk->out[0], &sk->out[1], --sk->nout * sizeof(sk->out[0]));
	pthread_cond_broadcast(&sk->cond);
}

/* A new transfer out, its RDMA part len bytes at rdma, announced last. */
static struct sw_out *out_push(struct sw_sock *sk, const uint8_t *rdma, uint32_t len)
{
	struct sw_out *o = &sk->out[sk->nout++];

	memset(o, 0, sizeof(*o));
	o->rdma = rdma;
	o->len = len;
	o->base = sk->pc.out.end - len;
	return o;
}

/* Write path: post the write of every SINK_AVAIL received, from the
 * transfer it lies in. */
static void out_write(struct sw_sock *sk)
{
	for (uint32_t k = 0; k < sk->nsinks && !sk->err; k++) {
		struct sw_sink *q = sink(sk, k);
		const struct sw_out *o = NULL;
		WSABUFEX b;
		DWORD n = 0;
		int e = 0;

		if (q->st != SW_SINK_NEW)
			continue;
		for (uint32_t j = 0; j < sk->nout && !o; j++)
			if (q->off >= sk->out[j].base && q->off - sk->out[j].base < sk->out[j].len)
				o = &sk->out[j];
		if (!o) /* nss_conn_rx let no SINK_AVAIL through outside them */
			return;
		b.len = q->len;
		b.buf = (char *)(o->rdma + (q->off - o->base));
		b.handle = o->h;
		ov_prepare(sk, &q->ov);
		if (sw_spi.rdma_write(sk->spi, &b, 1, q->desc, q->desc_len, 0, &n, 0, &q->ov, NULL,
				      NULL, &e) != 0 &&
		    e != WSA_IO_PENDING) {
			rdma_post_failed(sk, e, NSS_SINK_AVAIL, q->off);
			return;
		}
		q->st = SW_SINK_WRITING;
		sk->stats.rdma_ops++;
	}
}

/* The bytes of a large send of len that go inline in its SRC_AVAIL: as
 * many as fit, at least 1, never all. */
static uint32_t head_of(const struct sw_sock *sk, uint32_t len)
{
	uint32_t room = msg_max(sk) - NSS_HDR_LEN;

	if (sk->pc.out_path == NSS_PATH_READ)
		room -= (NICSIM_RDMA_DESC_SIZE + 7u) & ~7u;
	return len - 1 < room ? len - 1 : room;
}

/*
 * Begin a large transfer of len bytes at p (this side's threshold or more):
 * register what goes by RDMA, then send SRC_AVAIL with the head inline.
 * 0, -EAGAIN (no credit or send slot yet: call again), or a negative errno
 * (-ENOBUFS: the buffer could not be registered, nothing was sent).
 */
int sw_large_begin(struct sw_sock *sk, const uint8_t *p, uint32_t len)
{
	bool rd = sk->pc.out_path == NSS_PATH_READ;
	uint32_t head = head_of(sk, len);
	struct nss_hdr h;
	struct sw_slot *slot = tx_slot(sk);
	const uint8_t *rdma;
	uint8_t desc[NICSIM_RDMA_DESC_SIZE] = {0};
	HANDLE mh = NULL;
	struct sw_out *o;
	int e = 0, r;

	if (len < 2)
		return -EINVAL; /* a head and a rest: the caller's bug */
	if (!slot || !nss_may_send(NSS_SRC_AVAIL, true, sk->pc.out_seq, sk->pc.peer_limit) ||
	    sk->nout || !nss_conn_xfer_room(&sk->pc))
		return -EAGAIN;
	rdma = p + head;
	if (rd) {
		DWORD dl = sizeof(desc);

		if (sw_spi.reg_rdma(sk->spi, (void *)rdma, len - head, MEM_READ, desc, &dl, &e))
			return -sw_errno_of(e);
	} else {
		mh = sw_spi.reg(sk->spi, (void *)rdma, len - head, MEM_READ, &e);
		if (!mh)
			return -sw_errno_of(e);
	}
	sk->stats.registrations++;
	r = nss_conn_src_avail_hdr(&sk->pc, head, len - head, rd ? NICSIM_RDMA_DESC_SIZE : 0, &h);
	if (r) {
		if (rd)
			sw_spi.dereg_rdma(sk->spi, desc, sizeof(desc), &e);
		else
			sw_spi.dereg(sk->spi, mh, &e);
		return r;
	}
	o = out_push(sk, rdma, len - head);
	o->exposed = rd;
	memcpy(o->desc, desc, sizeof(desc));
	o->h = mh;
	sk->out_err = 0;
	sk->stats.large_sends++;
	r = tx_post(sk, slot, &h, rd ? o->desc : NULL, p);
	if (r)
		return r;
	sk->stats.bytes_sent += len; /* the head now, the rest by RDMA */
	return 0;
}

/* A staging buffer's size: SO_SNDBUF, at least SW_STAGING, fixed once the
 * buffers exist (a later SO_SNDBUF does not resize them). */
uint32_t sw_staging_cap(const struct sw_sock *sk)
{
	if (sk->staging_len)
		return sk->staging_len;
	return (uint32_t)(sk->sndbuf > (int)SW_STAGING ? sk->sndbuf : (int)SW_STAGING);
}

void sw_staging_free(struct sw_sock *sk)
{
	for (uint32_t k = 0; k < SW_XFERS; k++)
		own_free(&sk->stg[k].buf, &sk->stg[k].shared);
}

/* Staging buffer k, registered (and on the read path exposed) once. */
static int staging_get(struct sw_sock *sk, int k)
{
	struct sw_stage *g = &sk->stg[k];
	int e = 0;

	if (!sk->staging_len)
		sk->staging_len = sw_staging_cap(sk); /* 0 until now: from SO_SNDBUF */
	if (!g->buf && own_alloc(sk->staging_len, &g->buf, &g->shared))
		return -ENOBUFS;
	if (sk->pc.out_path == NSS_PATH_READ && !g->exposed) {
		DWORD dl = sizeof(g->desc);

		if (sw_spi.reg_rdma(sk->spi, g->buf, sk->staging_len, MEM_READ, g->desc, &dl, &e))
			return -sw_errno_of(e);
		g->exposed = true;
		sk->stats.registrations++;
	} else if (sk->pc.out_path == NSS_PATH_WRITE && !g->h) {
		g->h = sw_spi.reg(sk->spi, g->buf, sk->staging_len, MEM_READ, &e);
		if (!g->h)
			return -sw_errno_of(e);
		sk->stats.registrations++;
	}
	return 0;
}

/* Start the copied send that waits, when the last transfer is done and
 * credit and a send slot allow: SRC_AVAIL with its head. */
static void pend_start(struct sw_sock *sk)
{
	bool rd = sk->pc.out_path == NSS_PATH_READ;
	struct sw_stage *g = &sk->stg[sk->pend.stg];
	struct sw_slot *slot;
	struct sw_out *o;
	struct nss_hdr h;
	uint32_t rest = sk->pend.len - sk->pend.head;

	if (!sk->pend.on || sk->nout == SW_XFERS || sk->err || sk->spi == INVALID_SOCKET)
		return;
	slot = tx_slot(sk);
	if (!slot || nss_conn_src_avail_hdr(&sk->pc, sk->pend.head, rest,
					    rd ? NICSIM_RDMA_DESC_SIZE : 0, &h))
		return; /* credit, a slot or the peer's room later: the next pass */
	o = out_push(sk, g->buf, rest);
	o->h = rd ? NULL : g->h;
	o->staged = true;
	o->stg = sk->pend.stg;
	sk->pend.on = false;
	tx_post(sk, slot, &h, rd ? g->desc : NULL, sk->pend.head_bytes);
}

/*
 * Take a large send of len bytes at p (at most the staging buffer's size
 * and a head) by copying it: the head to the side, the rest to a staging
 * buffer the outstanding transfer does not use, and the caller may reuse
 * p at once.  It starts as soon as the protocol allows (pend_start).  0,
 * -EAGAIN (a copied send already waits), or a negative errno (-ENOBUFS:
 * no staging buffer could be had).
 */
int sw_large_copy(struct sw_sock *sk, const uint8_t *p, uint32_t len)
{
	uint32_t head = head_of(sk, len);
	bool used[SW_XFERS] = {false};
	int k = -1, r;

	if (len < 2)
		return -EINVAL; /* a head and a rest: the caller's bug */
	if (sk->pend.on)
		return -EAGAIN;
	for (uint32_t j = 0; j < sk->nout; j++)
		if (sk->out[j].staged)
			used[sk->out[j].stg] = true;
	for (int j = SW_XFERS - 1; j >= 0; j--)
		if (!used[j])
			k = j;
	if (k < 0)
		return -EAGAIN; /* every staging buffer has a transfer outstanding */
	r = staging_get(sk, k);
	if (r)
		return r;
	if (len - head > sk->staging_len || head > sizeof(sk->pend.head_bytes))
		return -EINVAL; /* the caller's bug */
	memcpy(sk->stg[k].buf, p + head, len - head);
	memcpy(sk->pend.head_bytes, p, head);
	sk->pend.on = true;
	sk->pend.stg = k;
	sk->pend.head = head;
	sk->pend.len = len;
	sk->stats.large_sends++;
	sk->stats.bytes_sent += len;
	pend_start(sk);
	return sk->err ? -sk->err : 0;
}

/* Send len bytes (under the threshold) as DATA messages; 0, -EAGAIN with
 * nothing sent, or a negative errno.  Returns after each message posted:
 * the caller loops. */
int sw_send_small(struct sw_sock *sk, const uint8_t *p, uint32_t len)
{
	uint32_t room = msg_max(sk) - NSS_HDR_LEN;
	uint32_t n = len < room ? len : room;
	struct sw_slot *slot = tx_slot(sk);
	struct nss_hdr h;
	int r;

	if (!slot || nss_dir_xfer(&sk->pc.out))
		return -EAGAIN;
	r = nss_conn_data_hdr(&sk->pc, n, &h);
	if (r == -EAGAIN)
		sk->stats.credit_waits++;
	if (r)
		return r;
	r = tx_post(sk, slot, &h, NULL, p);
	if (r)
		return r;
	sk->stats.bytes_sent += n;
	return (int)n;
}

/* ---- Taking a message ------------------------------------------------------------- */

/* Something the peer sent failed a check: say which (and the message, h,
 * when its header could be read), and abort the connection. */
static void refuse(struct sw_sock *sk, const struct nss_hdr *h, const char *why, uint32_t reason)
{
	char msg[96] = "", peer[INET_ADDRSTRLEN] = "?";

	inet_ntop(AF_INET, &sk->peer.sin_addr, peer, sizeof(peer));
	if (h)
		snprintf(msg, sizeof(msg), " (message type %u, seq %u, stream offset %llu)",
			 h->type, h->seq, (unsigned long long)h->stream_off);
	fprintf(stderr, "nicsim switch: aborting the connection from %s:%u: %s%s\n", peer,
		ntohs(sk->peer.sin_port), why, msg);
	sw_abort(sk, reason, ECONNABORTED);
}

static void take(struct sw_sock *sk, uint32_t i, uint32_t len)
{
	struct nss_msg m;
	const char *why = NULL;
	uint32_t reason = NSS_ABORT_PROTOCOL;
	int r;

	sk->stats.msgs_received++;
	if (nss_decode(sk->rx[i].buf, len, &m, &why)) {
		/* The header's fields are read before they are checked. */
		refuse(sk, len >= NSS_HDR_LEN ? &m.h : NULL, why,
		       sk->pc.hello_in ? NSS_ABORT_PROTOCOL : NSS_ABORT_BAD_HELLO);
		return;
	}
	r = nss_conn_rx(&sk->pc, &m, &why, &reason);
	if (r == -ECONNRESET) {
		sk->dq_len = 0;
		sw_fail(sk, ECONNRESET);
		sw_teardown(sk);
		return;
	}
	if (r) {
		refuse(sk, &m.h, why, reason);
		return;
	}
	switch (m.h.type) {
	case NSS_HELLO: {
		uint32_t lmax = sk->pc.local.max_rdma, pmax = sk->pc.peer.max_rdma;

		sk->out_max = sk->in_max = lmax < pmax ? lmax : pmax;
		sk->out_threshold =
		    sk->threshold < NSS_MIN_THRESHOLD ? NSS_MIN_THRESHOLD : sk->threshold;
		rx_repost(sk, i);
		break;
	}
	case NSS_DATA:
		if (m.h.data_len)
			dq_push(sk, m.data, m.h.data_len, (int32_t)i);
		else
			rx_repost(sk, i);
		break;
	case NSS_SRC_AVAIL: {
		/* nss_conn_rx let no more come than this side's HELLO allows;
		 * a transfer behind another keeps its head until it begins. */
		struct sw_in *t = &sk->xin[sk->nin++];

		memset(t, 0, sizeof(*t));
		t->slot = i;
		t->head = m.data;
		t->head_len = m.h.data_len;
		t->off = sk->pc.in.xq[sk->pc.in.nxfer - 1].off;
		t->len = m.h.rdma_len;
		t->desc_len = m.h.desc_len;
		if (m.h.desc_len)
			memcpy(t->desc, m.desc, m.h.desc_len);
		if (sk->nin == 1)
			in_begin(sk, t);
		break;
	}
	case NSS_SINK_AVAIL: {
		/* nss_conn_rx let no more come than this side can hold. */
		struct sw_sink *q = sink(sk, sk->nsinks++);

		q->st = SW_SINK_NEW;
		q->off = m.h.stream_off;
		q->len = m.h.rdma_len;
		q->desc_len = m.h.desc_len;
		memcpy(q->desc, m.desc, m.h.desc_len);
		rx_repost(sk, i);
		break;
	}
	case NSS_RD_DONE:
		rx_repost(sk, i);
		while (sk->nout > sk->pc.out.nxfer)
			out_end(sk);
		break;
	case NSS_WR_DONE: {
		/* It answers the oldest chunk's SINK_AVAIL (nss_conn_rx checked). */
		struct sw_chunk *c = chunk(sk, 0);
		int e;

		rx_repost(sk, i);
		/* The writes have landed: take the peer's access away, then
		 * deliver (section 6, write path step 4). */
		if (c->exposed)
			sw_spi.dereg_rdma(sk->spi, c->bdesc, sizeof(c->bdesc), &e);
		c->exposed = false;
		chunk_landed(sk);
		break;
	}
	case NSS_SHUTDOWN: rx_repost(sk, i); break;
	default: break;
	}
}

/* The completions of the connection's operations, in order. */
static void reap(struct sw_sock *sk)
{
	while (sk->pq_len && !sk->err) {
		uint32_t i = sk->postq[sk->pq_head];
		struct sw_slot *s = &sk->rx[i];

		if (!ov_done(&s->ov))
			break;
		sk->pq_head = (sk->pq_head + 1) % sk->nrecv;
		sk->pq_len--;
		if (s->ov.OffsetHigh) {
			int code = (int)s->ov.OffsetHigh;

			s->busy = false;
			/* The connection ended.  After the peer's SHUTDOWN that is
			 * its close: the reader gets end-of-file. */
			if (sk->pc.in.shut &&
			    (code == WSA_OPERATION_ABORTED || code == WSAECONNRESET))
				code = 0;
			else if (code == WSA_OPERATION_ABORTED)
				code = sk->close_code > 0 ? sk->close_code : WSAECONNRESET;
			if (code)
				sw_fail(sk, sw_errno_of(code));
			else
				sk->close_code = sk->close_code < 0 ? 0 : sk->close_code;
			sw_teardown(sk);
			return;
		}
		take(sk, i, (uint32_t)s->ov.InternalHigh);
	}
	for (uint32_t i = 0; i < sk->nsend && !sk->err; i++) {
		struct sw_slot *s = &sk->tx[i];

		if (!s->busy || !ov_done(&s->ov))
			continue;
		s->busy = false;
		if (!s->ov.OffsetHigh)
			continue;
		conn_lost(sk, (int)s->ov.OffsetHigh);
		if (sk->spi == INVALID_SOCKET)
			return;
	}
	/* Reads complete in the order posted, and land so. */
	while (sk->nch && chunk(sk, 0)->op && ov_done(&chunk(sk, 0)->ov) && !sk->err) {
		struct sw_chunk *c = chunk(sk, 0);

		c->op = false;
		if (c->ov.OffsetHigh)
			sw_fail(sk, sw_errno_of((int)c->ov.OffsetHigh));
		else
			chunk_landed(sk);
	}
	/* Writes complete in the order posted. */
	for (uint32_t k = 0; k < sk->nsinks && !sk->err; k++) {
		struct sw_sink *q = sink(sk, k);

		if (q->st == SW_SINK_WRITTEN)
			continue;
		if (q->st != SW_SINK_WRITING || !ov_done(&q->ov))
			break;
		if (q->ov.OffsetHigh)
			sw_fail(sk, sw_errno_of((int)q->ov.OffsetHigh));
		else
			q->st = SW_SINK_WRITTEN; /* its WR_DONE may go */
	}
}

void sw_progress(struct sw_sock *sk)
{
	if (sk->st != SW_CONNECTED || sk->spi == INVALID_SOCKET)
		return;
	reap(sk);
	in_next(sk);
	out_write(sk);
	sw_ctl_flush(sk);
	/* The done message of a transfer's last bytes ends it: the peer's
	 * RD_DONE, or this side's WR_DONE once sent. */
	while (sk->nout > sk->pc.out.nxfer)
		out_end(sk);
	pend_start(sk);
	in_next(sk);
	pthread_cond_broadcast(&sk->cond);
	sw_update_ready(sk);
}

/* ---- Connection set-up ------------------------------------------------------------- */

static uint32_t clamp(uint32_t v, uint32_t lo, uint32_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* The SPI connection exists: build the pools, post the receives, send HELLO. */
int sw_conn_start(struct sw_sock *sk)
{
	struct nss_hello hello;
	struct nss_hdr h;
	uint8_t body[NSS_HELLO_LEN];
	uint32_t rcv = (uint32_t)(sk->rcvbuf > 0 ? sk->rcvbuf : 65536);
	DWORD spi_max = 0;
	int len = sizeof(spi_max), e = 0;
	GUID rr = WSAID_RDMAREAD;
	LPFN_WSPRDMAREAD rd = NULL;
	DWORD got = 0;
	size_t bytes;

	sk->rsize = clamp(rcv / 16, NSS_MIN_RECV_SIZE, SW_RECV_SIZE_MAX) & ~511u;
	sk->nrecv = clamp(rcv / sk->rsize, NSS_MIN_RECVS, SW_RECV_MAX);
	sk->nsend = SW_SENDS;
	bytes = (size_t)(sk->nrecv + sk->nsend) * sk->rsize;
	sk->rx = calloc(sk->nrecv, sizeof(*sk->rx));
	sk->tx = calloc(sk->nsend, sizeof(*sk->tx));
	sk->postq = calloc(sk->nrecv, sizeof(*sk->postq));
	sk->dq = calloc(sk->nrecv + 1, sizeof(*sk->dq));
	if (!sk->rx || !sk->tx || !sk->postq || !sk->dq ||
	    posix_memalign((void **)&sk->ctl, 4096, bytes))
		return -ENOMEM;
	memset(sk->ctl, 0, bytes);
	sk->ctl_h = sw_spi.reg(sk->spi, sk->ctl, (DWORD)bytes, MEM_READWRITE, &e);
	if (!sk->ctl_h)
		return -sw_errno_of(e);
	sk->stats.registrations++;
	for (uint32_t i = 0; i < sk->nrecv; i++)
		sk->rx[i].buf = sk->ctl + (size_t)i * sk->rsize;
	for (uint32_t i = 0; i < sk->nsend; i++)
		sk->tx[i].buf = sk->ctl + (size_t)(sk->nrecv + i) * sk->rsize;

	if (sw_spi.t.lpWSPGetSockOpt(sk->spi, WSA_SOL_SOCKET, SO_MAX_RDMA_SIZE, (char *)&spi_max,
				     &len, &e))
		spi_max = 1u << 20;
	if (sk->max_rdma && sk->max_rdma < spi_max)
		spi_max = sk->max_rdma;
	/* The provider offers RDMA read on this socket's NIC, or refuses: a
	 * nicsim NIC without it neither reads nor serves reads.  (The function
	 * is the one sw_spi got at start-up: only whether it may be used here
	 * is asked.) */
	if (!sw_spi.rdma_read ||
	    sw_spi.t.lpWSPIoctl(sk->spi, SIO_GET_EXTENSION_FUNCTION_POINTER, &rr, sizeof(rr), &rd,
				sizeof(rd), &got, NULL, NULL, NULL, &e) != 0)
		rd = NULL;

	memset(&hello, 0, sizeof(hello));
	hello.version = NSS_VERSION;
	hello.features = !rd                               ? 0
			 : sk->path_pref == NSW_PATH_WRITE ? NSS_F_READABLE
							   : NSS_F_CAN_READ | NSS_F_READABLE;
	hello.recv_count = sk->nrecv;
	hello.recv_size = sk->rsize;
	hello.max_rdma = spi_max;
	hello.rdma_threshold = sk->threshold;
	hello.desc_len = NICSIM_RDMA_DESC_SIZE;
	hello.xfers = SW_XFERS;
	nss_conn_init(&sk->pc, &hello);
	sk->st = SW_CONNECTED;
	for (uint32_t i = 0; i < sk->nrecv; i++)
		if (rx_post(sk, i))
			return -sk->err;
	nss_conn_hello_hdr(&sk->pc, &h);
	nss_hello_encode(&hello, body);
	return tx_post(sk, &sk->tx[0], &h, NULL, body);
}

/* ---- The SPI's event ---------------------------------------------------------------- */

/* One of the socket's events fired: the network events' (net), or a
 * completion's; then progress. */
void sw_event(struct sw_sock *sk, bool net)
{
	WSANETWORKEVENTS ne;
	uint64_t v;
	int e = 0;
	ssize_t r = read(net ? sk->netfd : sk->evfd, &v, sizeof(v));

	(void)r;
	if (sk->spi == INVALID_SOCKET)
		return;
	memset(&ne, 0, sizeof(ne));
	if (net && sw_spi.t.lpWSPEnumNetworkEvents(sk->spi, WSA_INVALID_EVENT, &ne, &e) == 0) {
		if (ne.lNetworkEvents & FD_ACCEPT)
			sk->accept_ready = true;
		if ((ne.lNetworkEvents & FD_CONNECT) && sk->st == SW_CONNECTING) {
			int code = ne.iErrorCode[FD_CONNECT_BIT];

			sk->connect_done = true;
			if (code) {
				sk->so_error = sw_errno_of(code);
				sk->st = SW_NEW;
			} else {
				int err = sw_conn_start(sk);

				if (err) {
					sk->so_error = -err;
					sw_fail(sk, -err);
					sw_teardown(sk);
				}
			}
		}
		if (ne.lNetworkEvents & FD_CLOSE)
			sk->close_code = ne.iErrorCode[FD_CLOSE_BIT];
	}
	sw_progress(sk);
	pthread_cond_broadcast(&sk->cond);
	sw_update_ready(sk);
}

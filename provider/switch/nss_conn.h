/*
 * The session protocol's connection state (docs/session-protocol.md),
 * without I/O: what each side has sent and received, the credits, where
 * each direction's stream stands and its large transfer.  nss_conn_rx
 * makes every check of a received message that needs this state, after
 * nss_decode made the others; the nss_conn_*_hdr functions fill the header
 * of a message to send and account for it, or refuse it when the protocol
 * does not allow it now.  The switch does the I/O around them.
 *
 * Directions: "in" is the stream the peer sends (this side is its sink),
 * "out" the stream this side sends.  Offsets count bytes of one stream.
 */
#ifndef NSS_CONN_H
#define NSS_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include "nss_proto.h"

enum nss_path { NSS_PATH_READ = 1, NSS_PATH_WRITE = 2 };

/* A stretch of one direction's stream: bytes [off, end). */
struct nss_span {
	uint64_t off, end;
};

/*
 * One direction's stream.  A source may have several large transfers
 * outstanding (as many as the sink's HELLO allows, section 6); their RDMA
 * parts move in stream order, the oldest first, and each one's inline head
 * arrived with its SRC_AVAIL.
 */
struct nss_dir {
	uint64_t off;   /* every byte before off has moved: sent (out) or received (in) */
	uint64_t end;   /* where the next data-bearing message starts: off, or past the
			    * last transfer outstanding */
	uint32_t nxfer; /* transfers outstanding: their RDMA parts, oldest first */
	struct nss_span xq[NSS_XFERS_MAX];
	uint32_t nsink; /* write path: SINK_AVAILs outstanding, oldest first (sq[0].off == off) */
	struct nss_span sq[NSS_XFERS_MAX];
	bool shut;       /* SHUTDOWN sent (out) or received (in) */
	uint64_t synced; /* in: where the source's out stream stood, at least, when it
			  * sent its last data-bearing message: a credit update may say
			  * no less */
	uint64_t starts[NSS_XFERS_MAX]; /* in: the RDMA parts' starts of the last transfers */
	uint32_t nstarts;               /* ... announced (a count: starts is a ring) */
};

/* Whether a large transfer's RDMA part is outstanding in d, and where the
 * oldest one's ends (it covers [d->off, that)). */
static inline bool nss_dir_xfer(const struct nss_dir *d)
{
	return d->nxfer != 0;
}

static inline uint64_t nss_dir_xfer_end(const struct nss_dir *d)
{
	return d->nxfer ? d->xq[0].end : 0;
}

struct nss_conn {
	struct nss_hello local, peer;
	bool hello_in, hello_out;
	uint16_t version; /* the version both sides run, once the peer's HELLO is in */
	enum nss_path in_path, out_path; /* fixed once both HELLOs are known */
	uint32_t in_seq;                 /* the seq the peer's next message must carry */
	uint32_t out_seq;                /* the seq of this side's next message */
	uint32_t peer_limit;             /* the highest seq this side may send */
	uint32_t limit;                  /* the highest seq the peer may send: receives posted */
	uint32_t advertised;             /* limit as last sent */
	struct nss_dir in, out;
	bool aborted; /* an ABORT came */
};

/* A connection whose side posts local->recv_count receives and will send
 * the HELLO local describes. */
void nss_conn_init(struct nss_conn *c, const struct nss_hello *local);

/*
 * Account for a message received and check it against the state: 0, or
 * -EPROTO with *why and *reason (enum nss_abort) for an ABORT to send, or
 * -ECONNRESET when the message is the peer's ABORT.  The message must have
 * passed nss_decode.  Nothing changes on a refusal.
 */
int nss_conn_rx(struct nss_conn *c, const struct nss_msg *m, const char **why, uint32_t *reason);

/* How many more large transfers this side may start now (out stream):
 * the peer's HELLO allows so many outstanding. */
uint32_t nss_conn_xfer_room(const struct nss_conn *c);

/*
 * Write path, this side the sink: where the next SINK_AVAIL must start
 * (*off) and how many bytes it may offer at most (the return: the rest of
 * the transfer that offset lies in), or 0 when every transfer outstanding
 * has been offered or this side has as many SINK_AVAILs outstanding as its
 * HELLO allows.
 */
uint64_t nss_conn_sink_next(const struct nss_conn *c, uint64_t *off);

/* A receive was posted again: the peer may send one more message. */
void nss_conn_repost(struct nss_conn *c);

/*
 * Whether a credit update is due now (section 4): this side's limit trails
 * what it last told the peer by half its receives or more, or the peer is
 * down to 2 credits or fewer by what it was told.
 */
bool nss_conn_update_due(const struct nss_conn *c);

/*
 * The header of the next message of each kind, accounted for: 0, or
 * -EAGAIN (not enough credit yet, or as many transfers outstanding as the
 * peer allows: the same call later), or -EPROTO (the
 * protocol does not allow it in this state: a bug of the caller).
 *   hello: the HELLO (its data is the local body);
 *   data: data_len bytes of the out stream, or a credit update (0 bytes);
 *   src_avail: a large send, head bytes inline and rdma_len by RDMA, with a
 *     descriptor of desc_len bytes on the read path (0 on the write path);
 *   sink_avail: write path, the in stream's next len bytes may be written
 *     (at the offset nss_conn_sink_next gives);
 *   rd_done: read path, len bytes of the in stream read;
 *   wr_done: write path, the oldest SINK_AVAIL of the out stream written;
 *   shutdown: the out stream ends.
 */
int nss_conn_hello_hdr(struct nss_conn *c, struct nss_hdr *h);
int nss_conn_data_hdr(struct nss_conn *c, uint32_t data_len, struct nss_hdr *h);
int nss_conn_src_avail_hdr(struct nss_conn *c, uint32_t head, uint32_t rdma_len, uint16_t desc_len,
			   struct nss_hdr *h);
int nss_conn_sink_avail_hdr(struct nss_conn *c, uint32_t len, uint16_t desc_len, struct nss_hdr *h);
int nss_conn_rd_done_hdr(struct nss_conn *c, uint32_t len, struct nss_hdr *h);
int nss_conn_wr_done_hdr(struct nss_conn *c, struct nss_hdr *h);
int nss_conn_shutdown_hdr(struct nss_conn *c, struct nss_hdr *h);

#endif /* NSS_CONN_H */

/*
 * Reliable-connected (RC) transport of one queue pair, with InfiniBand
 * semantics, as an engine without I/O: the NIC hands it posted send work
 * requests, received packets and the time; it answers through struct rc_ops
 * (transmit a packet, place payload in host memory, check keys against the
 * TPT, take a receive work request, post a completion, report a fatal
 * error).  The NIC wires the operations to the fabric, the DMA engine and
 * the TPT; the unit tests wire two engines to each other over a lossy link.
 *
 * Requester: work requests are split into packets of at most mtu bytes with
 * consecutive 24-bit PSNs (an RDMA READ request takes one PSN per response
 * packet).  At most `window` PSNs are outstanding.  The last packet of each
 * message, and every ack_every-th packet, asks for an acknowledgement.
 * Acknowledgements are cumulative; a NAK for a PSN sequence error, a
 * retransmission timeout, or an RNR NAK (after its delay) restarts sending
 * from the oldest unacknowledged PSN (go-back-N), re-reading the data from
 * host memory as a NIC does; after a timeout only ack_every PSNs go out,
 * doubled by each acknowledgement that makes progress, up to `window`.  The
 * timer backs off: after n timeouts in a row it runs timeout_ns * 2^min(n,
 * RC_BACKOFF_SHIFT_MAX), and progress (or an RNR NAK, which is an answer)
 * brings it back to timeout_ns; so the requester gives up rc_retry_budget_ns
 * after the last progress.  A timeout counts against retry_cnt, an RNR NAK
 * against rnr_retry (7: forever); exhausting either, or a NAK for an invalid
 * request, a remote access error or a remote operational error, fails the
 * work request and puts the QP in error: every other work request completes
 * flushed.  Completions are posted in work request order.
 *
 * Responder: a packet with the expected PSN is executed; an older one is a
 * duplicate (acknowledged again, or an RDMA READ re-executed); a newer one
 * gets one PSN sequence error NAK until the expected PSN arrives.  SEND and
 * RDMA WRITE with immediate take a receive work request (an RNR NAK when
 * there is none); RDMA WRITE and READ check the remote key, and a refusal
 * sends a remote access error NAK and puts this QP in error too.
 * Acknowledgements are coalesced: one ACK answers every packet that asked
 * since the last one, sent after any pending read responses.
 *
 * The first message (cfg.hold_first, NIC_QP_F_HOLD_FIRST): until a message
 * has taken a receive work request, a SEND in one packet of at most
 * NIC_HOLD_MAX bytes that finds no receive posted is copied into the
 * engine's own buffer and accepted (acknowledged, the PSN moves on) instead
 * of drawing an RNR NAK.  The first receive taken afterwards -- as soon as
 * the host posts it (rc_progress looks), and always before any later
 * message takes one -- completes with it, placed with the usual checks: a
 * receive too short completes with LOC_LEN_ERR, one whose keys fail with
 * LOC_PROT_ERR, and the QP goes to error, as for a message arriving then
 * (no NAK: the sender saw its SEND acknowledged).  Only one message is ever
 * held: a later one without a receive gets RNR NAKs.  A held message is
 * dropped when the QP fails or closes (counted).
 *
 * Every packet handed to rc_recv() has been decoded and its ICRC checked, but
 * its fields are still the peer's: the engine validates opcode sequences,
 * lengths and PSNs and never trusts them.
 */
#ifndef NICSIM_RC_H
#define NICSIM_RC_H

#include <stdbool.h>
#include <stdint.h>

#include "dma.h"
#include "fab_wire.h"
#include "nicsim_abi.h"
#include "nicsim_mgmt.h"

#define RC_WINDOW_MAX 1024u /* PSNs in flight, well under half the PSN space */
#define RC_MAX_READS 16u    /* RDMA READs a responder keeps answering at once */

/* Host memory a payload comes from or goes to, as the TPT granted it. */
struct rc_mem {
	struct dma_seg seg[NIC_MAX_SGE];
	uint32_t grant[NIC_MAX_SGE]; /* TPT grants to end (rc_ops.release) */
	uint32_t nseg;
	uint32_t ngrant;
	uint64_t len;
};

struct rc_ops {
	void *arg;
	/*
	 * Transmit pkt (headers filled); its payload is pkt->payload_len bytes
	 * at offset off of mem, or, with mem NULL, at pkt->payload (an inline
	 * send; payload_len 0 for none).  0, or
	 * -ENOBUFS (no frame now: the engine tries again at the next
	 * rc_progress), or another error (the packet is lost; recovery is as
	 * for a loss on the wire).
	 */
	int (*xmit)(void *arg, struct fab_pkt *pkt, const struct rc_mem *mem, uint64_t off);
	/* Copy len bytes to offset off of mem: 0 or -EFAULT.  buf stays valid
	 * until the engine's call returns; the copy may be made as late as
	 * that, and before any later transmit or completion of this QP (a
	 * late failure is reported with rc_dma_fault). */
	int (*place)(void *arg, const struct rc_mem *mem, uint64_t off, const void *buf,
		     size_t len);
	/* Check local SGEs (write: the NIC writes them); fill *mem.  0, or
	 * -EACCES with *why set. */
	int (*check_local)(void *arg, const struct nic_sge *sge, uint32_t nsge, bool write,
			   struct rc_mem *mem, enum nic_tpt_reason *why);
	/* Check a remote access (NIC_ACCESS_REMOTE_READ/WRITE) on this QP. */
	int (*check_remote)(void *arg, uint32_t rkey, uint64_t va, uint64_t len, uint32_t access,
			    struct rc_mem *mem, enum nic_tpt_reason *why);
	/* End the TPT grants of mem (called once per filled mem). */
	void (*release)(void *arg, struct rc_mem *mem);
	void (*complete)(void *arg, const struct nic_cqe *cqe);
	/* The same, for a receive whose data (cqe->byte_len bytes at data) goes
	 * beside its completion (cfg.recv_inline; cqe has NIC_WC_F_INLINE). */
	void (*complete_inline)(void *arg, const struct nic_cqe *cqe, const void *data);
	/* Copy the next posted receive work request out: 0 or -EAGAIN. */
	int (*take_recv)(void *arg, struct nic_recv_wqe *wqe);
	/* The QP went to error because of status (enum nic_wc_status). */
	void (*error)(void *arg, uint16_t status);
};

/*
 * The connection's timers in InfiniBand's encodings, as the CM REQ carries
 * them: the local ACK timeout (4.096 us * 2^code; 0 turns the timer off, as
 * IB defines it), the retry count (3 bits) and the RNR retry count (3 bits,
 * 7 = forever).
 */
#define RC_ACK_TIMEOUT_DEFAULT 14u /* 4.096 us * 2^14 = 67.1 ms */
#define RC_RETRY_CNT_DEFAULT 7u
#define RC_RNR_RETRY_DEFAULT 7u
#define RC_RNR_FOREVER 7u
/*
 * The RNR NAK timer code a responder sends (IBTA's encoding, the "minimum
 * RNR NAK timer" of the responder's QP; fab_rnr_timer_us() gives the
 * delay): how long the requester waits before it sends again.  Code 12,
 * 0.64 ms, as rdma-core's verbs examples use: a host that posts its
 * receive a millisecond late then costs its peer one or two NAKs, where the
 * 10 us of code 1 cost a hundred and kept both NICs busy with them.
 */
#define RC_RNR_TIMER_DEFAULT 12u

/* The retransmission timer doubles with each timeout in a row, up to
 * 2^RC_BACKOFF_SHIFT_MAX times its base. */
#define RC_BACKOFF_SHIFT_MAX 4u

struct rc_config {
	uint32_t mtu;        /* payload bytes per packet, 256 .. FAB_MTU */
	uint32_t window;     /* PSNs outstanding, 1 .. RC_WINDOW_MAX */
	uint32_t ack_every;  /* ask for an ACK at least every so many packets */
	uint64_t timeout_ns; /* retransmission timeout before any backoff; 0: no timer */
	uint32_t retry_cnt;  /* timeouts in a row before RETRY_EXC_ERR */
	uint32_t rnr_retry;  /* RNR NAKs before RNR_RETRY_EXC_ERR; 7 = no limit */
	uint8_t rnr_timer;   /* RNR NAK timer code this responder sends (IBTA table 45) */
	bool no_reads;       /* the responder refuses RDMA READ (NIC without the capability) */
	bool hold_first;     /* hold a first message that finds no receive (above) */
	bool recv_inline;    /* one-packet SENDs up to NIC_RECV_INLINE_MAX go beside the cqe */
};

/* Defaults: 4096-byte MTU, 512 PSNs in flight, ACK every 64, the timers of
 * RC_ACK_TIMEOUT_DEFAULT (67.1 ms), RC_RETRY_CNT_DEFAULT (7) and
 * RC_RNR_RETRY_DEFAULT (7: unlimited), RNR timer RC_RNR_TIMER_DEFAULT
 * (code 12, 0.64 ms). */
void rc_config_default(struct rc_config *cfg);

/* A local ACK timeout code (0..31) in ns: 0 for code 0 (no timer). */
static inline uint64_t rc_ack_timeout_ns(unsigned code)
{
	return code ? 4096ull << (code & 31u) : 0;
}

/*
 * The wait after n timeouts (or retransmissions) in a row of a timer whose
 * base is base_ns: base_ns * 2^min(n, RC_BACKOFF_SHIFT_MAX).  The CM uses
 * the same rule for its REQ, REP and DREQ.
 */
static inline uint64_t rc_backoff_ns(uint64_t base_ns, uint32_t n)
{
	return base_ns << (n < RC_BACKOFF_SHIFT_MAX ? n : RC_BACKOFF_SHIFT_MAX);
}

/*
 * The longest a timer of base base_ns allowing retries retries waits in
 * all, from the first transmission to giving up: the sum of
 * rc_backoff_ns(base_ns, n) for n = 0 .. retries.  For the requester, the
 * time from the last progress to RETRY_EXC_ERR (79 * base for 7 retries).
 */
static inline uint64_t rc_retry_budget_ns(uint64_t base_ns, uint32_t retries)
{
	uint64_t t = 0;

	for (uint32_t n = 0; n <= retries; n++)
		t += rc_backoff_ns(base_ns, n);
	return t;
}

struct rc_stats {
	uint64_t pkts_sent, pkts_rcvd, bytes_sent, bytes_rcvd;
	uint64_t retransmits; /* go-back-N restarts */
	uint64_t timeouts, rnr_naks_rcvd, rnr_naks_sent, seq_naks_rcvd, seq_naks_sent;
	uint64_t duplicates, out_of_seq, acks_sent, acks_rcvd, bad_pkts, naks_sent;
	uint64_t first_held, first_dropped; /* first messages held, dropped held */
	uint64_t reads_rewound; /* duplicate READ requests answered by sending again, not twice */
};

struct rc_swqe {
	struct nic_send_wqe wqe;
	struct rc_mem mem;
	bool checked; /* mem filled (local keys checked) */
	uint32_t len; /* bytes of the message */
	uint32_t psn; /* first PSN */
	uint32_t npkts;
	uint64_t read_done; /* RDMA READ: bytes placed */
	bool read_complete; /* RDMA READ: every response placed */
	uint32_t gap_k;     /* RDMA READ: packet index a gap was last re-requested at */
};

struct rc_read {
	uint32_t psn; /* first response PSN */
	uint32_t npkts;
	uint32_t sent; /* response packets sent */
	uint32_t rkey; /* as requested: a re-request of the rest names the same */
	uint64_t va;
	struct rc_mem mem;
};

struct rc {
	struct rc_config cfg;
	struct rc_ops ops;
	uint32_t qpn, dqpn;          /* local and remote QP numbers */
	uint32_t src_addr, dst_addr; /* network byte order */
	bool dead;                   /* in error: nothing more is sent or accepted */
	struct rc_stats st;

	/* Requester. */
	struct rc_swqe sq[NIC_SQ_DEPTH];
	uint32_t sq_head;  /* oldest not completed */
	uint32_t sq_next;  /* next to (re)transmit */
	uint32_t sq_tail;  /* next free */
	uint32_t tx_pkt;   /* packets of sq[sq_next] sent */
	uint32_t post_psn; /* PSN of the next posted work request */
	uint32_t next_psn; /* PSN of the next packet to transmit */
	uint32_t max_psn;  /* PSN after the highest ever transmitted */
	uint32_t una_psn;  /* oldest PSN not acknowledged */
	uint32_t since_ackreq;
	uint64_t timer;     /* retransmission deadline, 0: off */
	uint64_t rnr_until; /* RNR wait: resend from una_psn then, 0: none */
	uint32_t retries, rnr_retries;
	/* PSNs outstanding at most now: cfg.window, or less after a timeout
	 * (each acknowledgement that makes progress doubles it again). */
	uint32_t cwnd;

	/* Responder. */
	uint32_t epsn; /* expected PSN */
	uint32_t msn;  /* messages completed */
	/* The request packet being executed, for the records of a refused key. */
	uint32_t rx_psn;
	uint8_t rx_opcode;
	enum { RC_RX_IDLE, RC_RX_SEND, RC_RX_WRITE } rx;
	struct nic_recv_wqe rwqe;
	struct rc_mem rmem; /* receive buffers of rwqe, or the RDMA WRITE target */
	bool rmem_held;
	uint64_t rx_off;   /* bytes placed in the current message */
	uint64_t rx_limit; /* RDMA WRITE: its length */
	bool have_rwqe;
	bool nak_sent; /* a PSN sequence error NAK awaits the expected PSN */
	bool ack_due;
	struct rc_read reads[RC_MAX_READS];
	uint32_t rd_head, rd_tail;
	/* The first message (cfg.hold_first): OFF (not held, nor to be),
	 * ARMED (no message took a receive yet), FULL (held in hold_buf). */
	enum { RC_HOLD_OFF, RC_HOLD_ARMED, RC_HOLD_FULL } hold;
	uint32_t hold_len;
	uint32_t hold_imm;
	bool hold_has_imm;
	uint8_t hold_buf[NIC_HOLD_MAX];
};

/*
 * Start a connected QP: PSNs from sq_psn (ours) and rq_psn (the peer's first
 * PSN).  ops and cfg are copied.
 */
void rc_init(struct rc *rc, const struct rc_config *cfg, const struct rc_ops *ops, uint32_t qpn,
	     uint32_t dqpn, uint32_t src_addr, uint32_t dst_addr, uint32_t sq_psn, uint32_t rq_psn);

/*
 * Queue a send work request (a private copy).  0, -ENOSPC (send queue
 * full), -EINVAL (malformed: the NIC completes it with LOC_QP_OP_ERR and
 * puts the QP in error), -ENOTCONN (QP in error: the NIC completes it
 * flushed).
 */
int rc_post_send(struct rc *rc, const struct nic_send_wqe *wqe);

/* Handle one received packet addressed to this QP. */
void rc_recv(struct rc *rc, const struct fab_pkt *pkt, uint64_t now);

/* Transmit what the window allows, answer, run the timers, and give a
 * held first message to a receive the host posted since. */
void rc_progress(struct rc *rc, uint64_t now);

/* When rc_progress must run again at the latest (0: only on new work). */
uint64_t rc_deadline(const struct rc *rc);

/*
 * For xmit: how many packets with payload from mem, the one being
 * transmitted included, this call of the engine will hand over in a row
 * unless frames run out -- the rest of an RDMA READ's responses, or the
 * packets of the work request being sent that the window lets out now.
 * Reading payloads further ahead than this would be wasted.
 */
uint32_t rc_xmit_run(const struct rc *rc, const struct rc_mem *mem);

/*
 * Put the QP in error (if not already) with status, complete every send
 * work request flushed and release what the responder held.  Receive work
 * requests still posted are the NIC's to flush.
 */
void rc_fail(struct rc *rc, uint16_t status);

/*
 * A payload that place() accepted could not be written to host memory after
 * all (the NIC writes payloads in batches, after the engine moved on).  As
 * for a place() that fails at once: the responder NAKs with a remote
 * operational error naming psn (the first packet whose payload was lost:
 * everything before it got through); the requester fails the read with a
 * local protection error (completed: its completion already carried that
 * status).  Then the QP is in error.
 */
void rc_dma_fault(struct rc *rc, bool responder, bool completed, uint32_t psn);

/* PSN arithmetic on 24 bits: a - b as a signed distance. */
static inline int32_t rc_psn_diff(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8) >> 8;
}

static inline uint32_t rc_psn_add(uint32_t a, uint32_t n)
{
	return (a + n) & FAB_MASK24;
}

#endif /* NICSIM_RC_H */

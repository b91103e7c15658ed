/*
 * Queue pairs of a NIC: numbering, the slot each one occupies in its
 * context's segment, and their life cycle.
 *
 * A QP number is 24 bits: (generation << 12) | index, index in 2 .. 4095
 * into the NIC's table, generation bumped each time the index is reused, so a
 * number that named a destroyed QP names nothing for a long while (frames
 * still in flight for it are dropped, not delivered to its successor).
 * Lookup by number is one array access.
 *
 * The NIC keeps its own copies of the indices it owns (SQ and RQ consumer,
 * CQ producer) and never reads them back from shared memory.
 */
#ifndef NICSIM_QP_H
#define NICSIM_QP_H

#include <stdint.h>

#include "nicsim_abi.h"
#include "rc.h"

#define QP_INDEX_BITS 12u
#define QP_MAX (1u << QP_INDEX_BITS) /* table size; indices 0 and 1 unused */

struct nic_ctx;

/*
 * Frames of one payload stream (a work request's packets, a read's
 * responses) whose payloads one DMA read ahead, for the packets the engine
 * sends next (qpio.c).
 */
#define QPIO_AHEAD 64u
struct qpio_ahead {
	const struct rc_mem *mem; /* NULL: empty */
	uint64_t va0, len;        /* mem's first segment and length when read */
	uint32_t n, next;         /* frames held, the next to send */
	uint32_t idx[QPIO_AHEAD];
	uint8_t *data[QPIO_AHEAD];
	uint64_t off[QPIO_AHEAD]; /* where in mem each payload came from */
	uint32_t plen[QPIO_AHEAD];
	uint16_t at[QPIO_AHEAD]; /* where in its frame each payload lies */
};

struct qp {
	uint32_t qpn;
	uint32_t slot;
	struct nic_ctx *ctx;
	struct nic_qp_hdr *hdr;
	struct nic_send_wqe *sq;
	struct nic_recv_wqe *rq;
	struct nic_cqe *cq;
	uint8_t (*cq_data)[NIC_RECV_INLINE_MAX]; /* beside cq[i]: NIC_QP_F_RECV_INLINE */
	uint32_t sq_cons;                        /* NIC-owned indices */
	uint32_t rq_cons;
	uint32_t cq_prod;
	enum nic_qp_state state;
	void *nic;        /* the struct nic that owns it */
	bool ring_broken; /* the host's receive ring index went wild */
	bool cq_overrun;  /* a completion found the CQ full */
	bool hold_first;  /* NIC_QP_F_HOLD_FIRST: the engine holds a first message */
	bool recv_inline; /* NIC_QP_F_RECV_INLINE: small SENDs land beside the cqe */
	/* Connection (conn.c). */
	uint32_t peer_addr; /* network byte order */
	uint32_t peer_qpn;
	uint16_t local_port, peer_port;
	uint32_t comm_id, peer_comm_id; /* CM communication IDs */
	uint32_t sq_psn, rq_psn;        /* starting PSNs of each direction */
	uint64_t cm_tid;                /* MAD transaction ID of the REQ */
	/* Active: the next REQ; passive: the next REP, while neither the RTU
	 * nor a packet from the peer has come.  0: none. */
	uint64_t cm_deadline;
	uint32_t cm_tries;
	bool passive;
	/* The timers the connection runs with: the REQ's (struct nic_timers),
	 * and for the active side the RNR retry count of the REP. */
	uint8_t ack_timeout, retry_cnt, rnr_retry, cm_timeout, cm_retries;
	/* The path MTU (payload bytes per packet): the active side's REQ
	 * names it, the passive side takes it no larger than its own. */
	uint32_t mtu;
	struct port_watch *peer_watch; /* the peer NIC's process, watched (port.c) */
	/* Transport (qpio.c), valid from RTS on. */
	struct rc rc;
	struct qpio_ahead ahead[2]; /* a requester's and a responder's stream */
	uint32_t ahead_turn;        /* which one a new stream replaces */
	bool dma_fault;             /* a batched write to host memory failed ... */
	bool dma_fault_responder;   /* ... placing a request's payload (not a response's) */
	bool dma_fault_completed;   /* ... and a completion already said so */
	uint32_t dma_fault_psn;     /* ... from this packet on */
};

struct qp_table {
	struct qp *by_index[QP_MAX];
	uint16_t gen[QP_MAX]; /* generation of each index (12 bits used) */
	uint32_t next;        /* where the search for a free index starts */
	uint32_t in_use;
};

/*
 * Put slot `slot` of the context whose segment starts at seg to use: the
 * slot's rings are reset and the QP is INIT.  *out gets the QP.  -EBUSY if
 * the context already has a QP in that slot (slots[] is the context's own
 * slot array), -EINVAL for a slot past NIC_QP_SLOTS, -ENOSPC if the NIC has
 * no QP number left, -ENOMEM.
 */
int qp_create(struct qp_table *t, struct nic_ctx *ctx, struct qp **slots, void *seg, uint32_t slot,
	      struct qp **out);

/* The QP with number qpn, or NULL. */
struct qp *qp_find(const struct qp_table *t, uint32_t qpn);

/* Free a QP: its slot is marked free in the segment and may be reused. */
void qp_destroy(struct qp_table *t, struct qp **slots, struct qp *qp);

#endif /* NICSIM_QP_H */

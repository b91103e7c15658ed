/*
 * The data path of a queue pair: work requests in from the host's send and
 * receive queues, completions out to its completion queue, and the RC
 * engine (rc.h) wired to the fabric port, the DMA engine and the TPT.
 *
 * Payload moves once each way: the DMA engine reads host memory straight
 * into a fabric frame (xmit) and writes a received frame's payload straight
 * into host memory (place).  Work requests are copied out of the shared
 * rings before anything looks at them; a host that breaks a ring (an index
 * more than a ring ahead) puts its QP in error.
 */
#include "nic_priv.h"

#include <errno.h>
#include <string.h>

#include "dma.h"
#include "nicsim_ring.h"
#include "rc_tpt.h"

static struct nic *nic_of(const struct qp *qp)
{
	return qp->nic;
}

static void post_cqe(struct qp *qp, const struct nic_cqe *cqe)
{
	struct nic *nic = nic_of(qp);
	uint32_t cons = ring_observe(&qp->hdr->cq.cons);

	/* The host consumes completions it asked for; one that lets its CQ
	 * fill (or writes a consumer index never produced) loses them, as a
	 * CQ overrun does on hardware, and the QP goes to error. */
	if (ring_count(qp->cq_prod, cons) >= NIC_CQ_DEPTH) {
		nic->stats.cq_overruns++;
		qp->cq_overrun = true;
		return;
	}
	qp->cq[qp->cq_prod & (NIC_CQ_DEPTH - 1)] = *cqe;
	qp->cq_prod++;
	ring_publish(&qp->hdr->cq.prod, qp->cq_prod);
	qp->ctx->irq_due = true;
}

static void set_state(struct qp *qp, enum nic_qp_state state, uint16_t error)
{
	qp->state = state;
	ring_flag_set(&qp->hdr->error, error);
	ring_flag_set(&qp->hdr->state, state);
}

/* ---- rc_ops --------------------------------------------------------------- */

struct xmit_arg {
	struct qp *qp;
	struct fab_pkt *pkt;
	const struct rc_mem *mem;
	uint64_t off;
};

/* Build a frame: payload by DMA straight into place, then the headers. */
static int fill_frame(void *arg, uint8_t *frame, size_t cap)
{
	struct xmit_arg *x = arg;
	size_t hdr = fab_pkt_hdr_len(x->pkt->opcode), len;
	int err;

	if (hdr == 0 || hdr + x->pkt->payload_len > cap)
		return -EINVAL;
	if (x->mem && x->pkt->payload_len) {
		err = dma_read((pid_t)x->qp->ctx->pid, x->mem->seg, x->mem->nseg, x->off,
			       frame + hdr, x->pkt->payload_len);
		if (err) {
			nic_of(x->qp)->stats.dma_faults++;
			return -EFAULT;
		}
	}
	x->pkt->payload = NULL;
	err = fab_pkt_encode(x->pkt, frame, cap, &len);
	return err ? err : (int)len;
}

static int op_xmit(void *arg, struct fab_pkt *pkt, const struct rc_mem *mem, uint64_t off)
{
	struct qp *qp = arg;
	struct xmit_arg x = {.qp = qp, .pkt = pkt, .mem = mem, .off = off};

	return port_xmit(nic_of(qp), qp->peer_addr, fill_frame, &x);
}

static int op_place(void *arg, const struct rc_mem *mem, uint64_t off, const void *buf, size_t len)
{
	struct qp *qp = arg;
	int err = dma_write((pid_t)qp->ctx->pid, mem->seg, mem->nseg, off, buf, len);

	if (err) {
		nic_of(qp)->stats.dma_faults++;
		return -EFAULT;
	}
	return 0;
}

static void drained(void *nic, uint32_t key)
{
	ctx_drained(nic, key);
}

static void op_release(void *arg, struct rc_mem *mem)
{
	struct qp *qp = arg;

	rc_tpt_release(nic_of(qp)->tpt, mem, drained, nic_of(qp));
}

static int op_check_local(void *arg, const struct nic_sge *sge, uint32_t nsge, bool write,
			  struct rc_mem *mem, enum nic_tpt_reason *why)
{
	struct qp *qp = arg;
	const struct tpt_owner owner = {.ctx_id = qp->ctx->id, .pid = qp->ctx->pid};

	return rc_tpt_local(nic_of(qp)->tpt, &owner, sge, nsge, write, mem, why);
}

static int op_check_remote(void *arg, uint32_t rkey, uint64_t va, uint64_t len, uint32_t access,
			   struct rc_mem *mem, enum nic_tpt_reason *why)
{
	struct qp *qp = arg;
	const struct tpt_owner owner = {.ctx_id = qp->ctx->id, .pid = qp->ctx->pid};

	if (rc_tpt_remote(nic_of(qp)->tpt, &owner, qp->qpn, rkey, va, len, access, mem, why) < 0) {
		nic_warn(&nic_of(qp)->log,
			 "QP %u: remote %s of %llu bytes at 0x%llx with key 0x%06x from peer QP %u "
			 "refused: %s",
			 qp->qpn, access == NIC_ACCESS_REMOTE_READ ? "read" : "write",
			 (unsigned long long)len, (unsigned long long)va, rkey, qp->peer_qpn,
			 tpt_reason_str(*why));
		return -EACCES;
	}
	return 0;
}

static void op_complete(void *arg, const struct nic_cqe *cqe)
{
	post_cqe(arg, cqe);
}

/* Copy the next receive work request out of the host's ring. */
static int take_recv(struct qp *qp, struct nic_recv_wqe *wqe)
{
	uint32_t prod = ring_observe(&qp->hdr->rq.prod);
	uint32_t pending = ring_count(prod, qp->rq_cons);

	if (pending == 0 || pending > NIC_RQ_DEPTH) {
		if (pending > NIC_RQ_DEPTH)
			qp->ring_broken = true;
		return -EAGAIN;
	}
	memcpy(wqe, &qp->rq[qp->rq_cons & (NIC_RQ_DEPTH - 1)], sizeof(*wqe));
	qp->rq_cons++;
	ring_publish(&qp->hdr->rq.cons, qp->rq_cons);
	return 0;
}

static int op_take_recv(void *arg, struct nic_recv_wqe *wqe)
{
	return take_recv(arg, wqe);
}

static void op_error(void *arg, uint16_t status)
{
	struct qp *qp = arg;
	struct nic *nic = nic_of(qp);
	struct nic_event ev = {.type = NIC_EV_QP_ERROR, .status = status, .qpn = qp->qpn};

	/* A disconnect stops the engine too; only a real error is an event. */
	if (qp->state != NIC_QPS_RTS)
		return;
	set_state(qp, NIC_QPS_ERROR, status);
	nic->stats.qp_errors++;
	nic_info(&nic->log, "QP %u (context %u) went to error: status %u", qp->qpn, qp->ctx->id,
		 status);
	ctx_event(nic, qp->ctx, &ev);
}

static const struct rc_ops qp_rc_ops = {
    .xmit = op_xmit,
    .place = op_place,
    .check_local = op_check_local,
    .check_remote = op_check_remote,
    .release = op_release,
    .complete = op_complete,
    .take_recv = op_take_recv,
    .error = op_error,
};

/* ---- Life cycle ------------------------------------------------------------- */

void qpio_start(struct nic *nic, struct qp *qp, uint32_t peer_addr, uint32_t peer_qpn,
		uint32_t sq_psn, uint32_t rq_psn)
{
	struct rc_config cfg;
	struct rc_ops ops = qp_rc_ops;

	rc_config_default(&cfg);
	cfg.no_reads = !(nic->opts.caps & NIC_CAP_RDMA_READ);
	ops.arg = qp;
	qp->peer_addr = peer_addr;
	qp->peer_qpn = peer_qpn;
	rc_init(&qp->rc, &cfg, &ops, qp->qpn, peer_qpn, nic->opts.addr, peer_addr, sq_psn, rq_psn);
	set_state(qp, NIC_QPS_RTS, 0);
}

/* The completion opcode of a send work request as the host wrote it. */
static uint8_t wc_opcode_of(const struct nic_send_wqe *w)
{
	switch (w->opcode) {
	case NIC_WR_RDMA_READ: return NIC_WC_RDMA_READ;
	case NIC_WR_RDMA_WRITE:
	case NIC_WR_RDMA_WRITE_IMM: return NIC_WC_RDMA_WRITE;
	default: return NIC_WC_SEND;
	}
}

/* Complete every work request still in the host's rings as flushed. */
static void flush_rings(struct qp *qp)
{
	uint32_t prod = ring_observe(&qp->hdr->sq.prod);
	struct nic_recv_wqe rw;

	if (ring_count(prod, qp->sq_cons) <= NIC_SQ_DEPTH) {
		while (qp->sq_cons != prod) {
			struct nic_send_wqe w;
			struct nic_cqe cqe = {.status = NIC_WC_WR_FLUSH_ERR, .qpn = qp->qpn};

			memcpy(&w, &qp->sq[qp->sq_cons & (NIC_SQ_DEPTH - 1)], sizeof(w));
			qp->sq_cons++;
			cqe.wr_id = w.wr_id;
			cqe.opcode = wc_opcode_of(&w);
			post_cqe(qp, &cqe);
		}
		ring_publish(&qp->hdr->sq.cons, qp->sq_cons);
	}
	while (take_recv(qp, &rw) == 0) {
		struct nic_cqe cqe = {.wr_id = rw.wr_id,
				      .status = NIC_WC_WR_FLUSH_ERR,
				      .opcode = NIC_WC_RECV,
				      .qpn = qp->qpn};

		post_cqe(qp, &cqe);
	}
}

void qpio_stop(struct nic *nic, struct qp *qp, enum nic_qp_state state, uint16_t status)
{
	bool running = qp->state == NIC_QPS_RTS;

	if (qp->state == NIC_QPS_ERROR || qp->state == NIC_QPS_CLOSED)
		return;
	if (running && state == NIC_QPS_ERROR) {
		rc_fail(&qp->rc, status); /* op_error sets the state and tells the host */
	} else {
		set_state(qp, state, status);
		if (running)
			rc_fail(&qp->rc, NIC_WC_WR_FLUSH_ERR);
		if (state == NIC_QPS_ERROR) {
			struct nic_event ev = {
			    .type = NIC_EV_QP_ERROR, .status = status, .qpn = qp->qpn};

			nic->stats.qp_errors++;
			ctx_event(nic, qp->ctx, &ev);
		}
	}
	flush_rings(qp);
}

/* Add what a QP's engine counted to the NIC's counters (at its end). */
void qpio_account(struct nic *nic, const struct qp *qp, struct nic_stats *st)
{
	(void)nic;
	st->retransmits += qp->rc.st.retransmits;
	st->timeouts += qp->rc.st.timeouts;
	st->rnr_naks += qp->rc.st.rnr_naks_rcvd;
	st->naks_sent += qp->rc.st.naks_sent;
}

unsigned qpio_poll(struct nic *nic, struct qp *qp, uint64_t now, uint64_t *deadline)
{
	uint32_t prod, pending, taken = 0;
	uint64_t sent, d;

	if (qp->state == NIC_QPS_ERROR || qp->state == NIC_QPS_CLOSED) {
		flush_rings(qp);
		return 0;
	}
	if (qp->state != NIC_QPS_RTS)
		return 0;
	if (qp->ring_broken || qp->cq_overrun) {
		nic_warn(&nic->log, "QP %u (context %u): the host broke its %s", qp->qpn,
			 qp->ctx->id,
			 qp->cq_overrun ? "completion queue (overrun)" : "receive ring");
		qpio_stop(nic, qp, NIC_QPS_ERROR, NIC_WC_LOC_QP_OP_ERR);
		return 1;
	}
	prod = ring_observe(&qp->hdr->sq.prod);
	pending = ring_count(prod, qp->sq_cons);
	if (pending > NIC_SQ_DEPTH) {
		nic_warn(&nic->log,
			 "QP %u (context %u): send ring producer %u is more than a ring "
			 "ahead of %u",
			 qp->qpn, qp->ctx->id, prod, qp->sq_cons);
		qpio_stop(nic, qp, NIC_QPS_ERROR, NIC_WC_LOC_QP_OP_ERR);
		return 1;
	}
	while (pending--) {
		struct nic_send_wqe w;
		int err;

		memcpy(&w, &qp->sq[qp->sq_cons & (NIC_SQ_DEPTH - 1)], sizeof(w));
		err = rc_post_send(&qp->rc, &w);
		if (err == -ENOSPC)
			break;
		qp->sq_cons++;
		taken++;
		if (err) {
			struct nic_cqe cqe = {.wr_id = w.wr_id,
					      .status = err == -EINVAL ? NIC_WC_LOC_QP_OP_ERR
								       : NIC_WC_WR_FLUSH_ERR,
					      .opcode = wc_opcode_of(&w),
					      .qpn = qp->qpn};

			/* A malformed request fails the QP: the requests before
			 * it complete (flushed) first, so completions stay in
			 * order; the ones after it are flushed as they come. */
			if (err == -EINVAL)
				rc_fail(&qp->rc, NIC_WC_LOC_QP_OP_ERR);
			post_cqe(qp, &cqe);
		}
	}
	if (taken)
		ring_publish(&qp->hdr->sq.cons, qp->sq_cons);
	sent = qp->rc.st.pkts_sent;
	rc_progress(&qp->rc, now);
	d = rc_deadline(&qp->rc);
	if (d && (!*deadline || d < *deadline))
		*deadline = d;
	return taken + (unsigned)(qp->rc.st.pkts_sent - sent);
}

void qpio_rx(struct nic *nic, struct qp *qp, const struct fab_pkt *pkt, uint64_t now)
{
	(void)nic;
	rc_recv(&qp->rc, pkt, now);
	/* Answer at once (ACKs, read responses) rather than on the next pass. */
	rc_progress(&qp->rc, now);
}

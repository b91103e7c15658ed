/*
 * The requester of the RC engine: work requests into packets, the window,
 * acknowledgements and NAKs, go-back-N, the retransmission timer and its
 * backoff, RDMA READ responses, completions in order (rc.h).
 */
#include "rc_priv.h"

#include <errno.h>
#include <string.h>

/*
 * The retransmission deadline for a timer started now, after rc->retries
 * timeouts in a row: 0 (none) when the QP has no ACK timeout.
 */
static uint64_t timer_from(const struct rc *rc, uint64_t now)
{
	return rc->cfg.timeout_ns ? now + rc_backoff_ns(rc->cfg.timeout_ns, rc->retries) : 0;
}

int rc_post_send(struct rc *rc, const struct nic_send_wqe *wqe)
{
	struct rc_swqe *w;
	uint64_t len = 0;

	if (rc->dead)
		return -ENOTCONN;
	if (rc->sq_tail - rc->sq_head >= NIC_SQ_DEPTH)
		return -ENOSPC;
	if (wqe->opcode < NIC_WR_SEND || wqe->opcode > NIC_WR_RDMA_READ ||
	    wqe->num_sge > NIC_MAX_SGE ||
	    wqe->flags & ~(uint8_t)(NIC_WR_F_FENCE | NIC_WR_F_SOLICITED | NIC_WR_F_INLINE))
		return -EINVAL;
	if (wqe->flags & NIC_WR_F_INLINE) {
		/* The payload is in the request: no SGEs, nothing to read. */
		if (wqe->opcode == NIC_WR_RDMA_READ || wqe->num_sge ||
		    wqe->inline_len > NIC_MAX_INLINE)
			return -EINVAL;
		len = wqe->inline_len;
	} else if (wqe->inline_len) {
		return -EINVAL;
	}
	for (uint32_t i = 0; i < wqe->num_sge; i++)
		len += wqe->sge[i].len;
	/* A message is at most 2^31 bytes, as on InfiniBand. */
	if (len > 0x80000000u)
		return -EINVAL;
	w = &rc->sq[rc->sq_tail & RC_SQ_MASK];
	memset(w, 0, sizeof(*w));
	w->wqe = *wqe;
	w->len = (uint32_t)len;
	w->npkts = rc_npkts(rc, len);
	w->psn = rc->post_psn;
	w->gap_k = UINT32_MAX;
	rc->post_psn = rc_psn_add(rc->post_psn, w->npkts);
	rc->sq_tail++;
	return 0;
}

static uint8_t wc_opcode(const struct rc_swqe *w)
{
	switch (w->wqe.opcode) {
	case NIC_WR_RDMA_WRITE:
	case NIC_WR_RDMA_WRITE_IMM: return NIC_WC_RDMA_WRITE;
	case NIC_WR_RDMA_READ: return NIC_WC_RDMA_READ;
	default: return NIC_WC_SEND;
	}
}

void rc_complete_swqe(struct rc *rc, struct rc_swqe *w, uint16_t status, uint32_t detail)
{
	struct nic_cqe cqe = {.wr_id = w->wqe.wr_id,
			      .status = status,
			      .opcode = wc_opcode(w),
			      .byte_len = status == NIC_WC_SUCCESS ? w->len : 0,
			      .qpn = rc->qpn,
			      .detail = detail};

	/* The completion first: an invalidation waiting for these grants is
	 * then acknowledged after the work request it waited for. */
	rc->ops.complete(rc->ops.arg, &cqe);
	rc_release(rc, &w->mem);
}

/* Fail the oldest work request with status, then the QP. */
void rc_fail_head(struct rc *rc, uint16_t status, uint32_t detail)
{
	if (rc->sq_head != rc->sq_tail) {
		rc_complete_swqe(rc, &rc->sq[rc->sq_head & RC_SQ_MASK], status, detail);
		rc->sq_head++;
	}
	rc_fail(rc, status);
}

/* Move the transmit position to PSN psn; false if no work request holds it. */
static bool seek(struct rc *rc, uint32_t psn)
{
	for (uint32_t i = rc->sq_head; i != rc->sq_tail; i++) {
		struct rc_swqe *w = &rc->sq[i & RC_SQ_MASK];
		int32_t d = rc_psn_diff(psn, w->psn);

		if (d >= 0 && d < (int32_t)w->npkts) {
			rc->sq_next = i;
			if (!rc_is_read(w)) {
				rc->tx_pkt = (uint32_t)d;
				rc->next_psn = psn;
				return true;
			}
			/* A read is asked for again from the first response it
			 * lacks, as a new request for the rest of the buffer at
			 * that response's PSN; the responder treats it as a
			 * duplicate and answers from there. */
			rc->tx_pkt = (uint32_t)(w->read_done / rc->cfg.mtu);
			rc->next_psn = rc_psn_add(w->psn, rc->tx_pkt);
			return true;
		}
	}
	return false;
}

/* Restart transmission at PSN psn (go-back-N). */
static void go_back(struct rc *rc, uint32_t psn)
{
	if (seek(rc, psn))
		rc->st.retransmits++;
}

/*
 * Complete, in order, the work requests that PSNs before `upto` finished,
 * and move the oldest unacknowledged PSN up to `upto` -- but never past a
 * read whose responses have not all arrived: an acknowledgement beyond it
 * means they were lost, so the read is asked for again from the first
 * missing response, and that response's PSN stays unacknowledged.
 */
static void retire(struct rc *rc, uint32_t upto, uint64_t now)
{
	/* Every PSN before upto has been sent at least once (upto <= max_psn),
	 * so the work requests it covers may be ahead of sq_next after a go
	 * back: acknowledgements sent for the first transmission still count. */
	while (rc->sq_head != rc->sq_tail) {
		struct rc_swqe *w = &rc->sq[rc->sq_head & RC_SQ_MASK];
		uint32_t last = rc_psn_add(w->psn, w->npkts);

		if (rc_psn_diff(upto, last) < 0)
			break;
		if (rc_is_read(w) && !w->read_complete) {
			upto = rc_psn_add(w->psn, (uint32_t)(w->read_done / rc->cfg.mtu));
			go_back(rc, upto);
			break;
		}
		rc_complete_swqe(rc, w, NIC_WC_SUCCESS, 0);
		rc->sq_head++;
	}
	if (rc_psn_diff(upto, rc->una_psn) > 0) {
		rc->una_psn = upto;
		rc->retries = 0;
		rc->cwnd = rc->cwnd > rc->cfg.window / 2 ? rc->cfg.window : 2 * rc->cwnd;
		/* Acknowledged beyond the transmit position: skip what got through. */
		if (rc_psn_diff(upto, rc->next_psn) > 0 && !seek(rc, upto)) {
			rc->sq_next = rc->sq_head;
			rc->tx_pkt = 0;
			rc->next_psn = upto;
		}
		rc->timer = rc->una_psn == rc->max_psn ? 0 : timer_from(rc, now);
	}
}

/* The opcode of packet k of n of a work request. */
static uint8_t req_opcode(const struct rc_swqe *w, uint32_t k)
{
	bool first = k == 0, last = k + 1 == w->npkts;

	switch (w->wqe.opcode) {
	case NIC_WR_SEND:
	case NIC_WR_SEND_IMM:
		if (first && last)
			return w->wqe.opcode == NIC_WR_SEND ? FAB_OP_SEND_ONLY
							    : FAB_OP_SEND_ONLY_WITH_IMMEDIATE;
		if (first)
			return FAB_OP_SEND_FIRST;
		if (last)
			return w->wqe.opcode == NIC_WR_SEND ? FAB_OP_SEND_LAST
							    : FAB_OP_SEND_LAST_WITH_IMMEDIATE;
		return FAB_OP_SEND_MIDDLE;
	case NIC_WR_RDMA_WRITE:
	case NIC_WR_RDMA_WRITE_IMM:
		if (first && last)
			return w->wqe.opcode == NIC_WR_RDMA_WRITE
				   ? FAB_OP_RDMA_WRITE_ONLY
				   : FAB_OP_RDMA_WRITE_ONLY_WITH_IMMEDIATE;
		if (first)
			return FAB_OP_RDMA_WRITE_FIRST;
		if (last)
			return w->wqe.opcode == NIC_WR_RDMA_WRITE
				   ? FAB_OP_RDMA_WRITE_LAST
				   : FAB_OP_RDMA_WRITE_LAST_WITH_IMMEDIATE;
		return FAB_OP_RDMA_WRITE_MIDDLE;
	default: return FAB_OP_RDMA_READ_REQUEST;
	}
}

/* A fence holds a work request until every earlier RDMA READ completed. */
static bool fenced(const struct rc *rc, uint32_t idx)
{
	if (!(rc->sq[idx & RC_SQ_MASK].wqe.flags & NIC_WR_F_FENCE))
		return false;
	for (uint32_t i = rc->sq_head; i != idx; i++) {
		if (rc_is_read(&rc->sq[i & RC_SQ_MASK]))
			return true;
	}
	return false;
}

/* Send the next packet of the requester: 1 sent, 0 nothing to send now. */
int rc_req_send_next(struct rc *rc, uint64_t now)
{
	struct rc_swqe *w;
	struct fab_pkt p;
	uint32_t k, psn;
	uint64_t off;
	int err;

	if (rc->sq_next == rc->sq_tail || rc->rnr_until)
		return 0;
	w = &rc->sq[rc->sq_next & RC_SQ_MASK];
	k = rc->tx_pkt;
	psn = rc_psn_add(w->psn, k);
	/* The window bounds the PSNs in flight; a read larger than the window
	 * still goes out once everything before it has been acknowledged. */
	if ((uint32_t)rc_psn_diff(rc_psn_add(psn, rc_is_read(w) ? w->npkts - k : 1), rc->una_psn) >
		rc->cwnd &&
	    !(rc_is_read(w) && psn == rc->una_psn))
		return 0;
	if (fenced(rc, rc->sq_next))
		return 0;
	if (!w->checked) {
		enum nic_tpt_reason why = NIC_TPT_R_NONE;

		if (rc->ops.check_local(rc->ops.arg, w->wqe.sge, w->wqe.num_sge, rc_is_read(w),
					&w->mem, &why) < 0) {
			/* Work requests before it still complete normally when
			 * acknowledged; this one and the QP fail now. */
			while (rc->sq_head != rc->sq_next) {
				rc_complete_swqe(rc, &rc->sq[rc->sq_head & RC_SQ_MASK],
						 NIC_WC_WR_FLUSH_ERR, 0);
				rc->sq_head++;
			}
			rc_fail_head(rc, NIC_WC_LOC_PROT_ERR, why);
			return 0;
		}
		w->checked = true;
	}
	rc_pkt_base(rc, &p, req_opcode(w, k), psn);
	off = (uint64_t)k * rc->cfg.mtu;
	if (rc_is_read(w)) {
		p.va = w->wqe.remote_va + off;
		p.rkey = w->wqe.rkey;
		p.dma_len = (uint32_t)(w->len - off);
		p.ack_req = true;
		err = rc->ops.xmit(rc->ops.arg, &p, NULL, 0);
	} else {
		uint64_t left = w->len - off;

		p.payload_len = (uint32_t)(left < rc->cfg.mtu ? left : rc->cfg.mtu);
		if (p.has_reth) {
			p.va = w->wqe.remote_va;
			p.rkey = w->wqe.rkey;
			p.dma_len = w->len;
		}
		if (p.has_imm)
			p.imm = w->wqe.imm;
		p.se = k + 1 == w->npkts && (w->wqe.flags & NIC_WR_F_SOLICITED);
		p.ack_req = k + 1 == w->npkts || ++rc->since_ackreq >= rc->cfg.ack_every;
		if (w->wqe.flags & NIC_WR_F_INLINE) {
			/* One packet: NIC_MAX_INLINE is below any MTU. */
			p.payload = w->wqe.inline_data;
			err = rc->ops.xmit(rc->ops.arg, &p, NULL, 0);
		} else {
			err = rc->ops.xmit(rc->ops.arg, &p, p.payload_len ? &w->mem : NULL, off);
		}
	}
	if (err == -ENOBUFS)
		return 0;
	if (err == -EFAULT) {
		/* The host's memory refused the DMA: a local protection error. */
		while (rc->sq_head != rc->sq_next) {
			rc_complete_swqe(rc, &rc->sq[rc->sq_head & RC_SQ_MASK], NIC_WC_WR_FLUSH_ERR,
					 0);
			rc->sq_head++;
		}
		rc_fail_head(rc, NIC_WC_LOC_PROT_ERR, 0);
		return 0;
	}
	if (p.ack_req)
		rc->since_ackreq = 0;
	if (!err) {
		rc->st.pkts_sent++;
		rc->st.bytes_sent += p.payload_len;
	}
	if (rc_is_read(w) || ++rc->tx_pkt == w->npkts) {
		rc->sq_next++;
		rc->tx_pkt = 0;
		rc->next_psn = rc_psn_add(w->psn, w->npkts);
	} else {
		rc->next_psn = rc_psn_add(psn, 1);
	}
	if (rc_psn_diff(rc->next_psn, rc->max_psn) > 0)
		rc->max_psn = rc->next_psn;
	if (!rc->timer)
		rc->timer = timer_from(rc, now);
	return 1;
}

/* An RDMA READ response for the oldest read in flight. */
void rc_req_recv_read_response(struct rc *rc, const struct fab_pkt *pkt, uint64_t now)
{
	const struct fab_opcode_info *oi = fab_opcode_info(pkt->opcode);
	struct rc_swqe *w = NULL;
	uint32_t k;
	bool last;

	for (uint32_t i = rc->sq_head; i != rc->sq_next && !w; i++) {
		if (rc_is_read(&rc->sq[i & RC_SQ_MASK]) && !rc->sq[i & RC_SQ_MASK].read_complete)
			w = &rc->sq[i & RC_SQ_MASK];
	}
	if (!w) {
		rc->st.duplicates++;
		return;
	}
	k = (uint32_t)(w->read_done / rc->cfg.mtu);
	if (rc_psn_diff(pkt->psn, w->psn) != (int32_t)k) {
		/* A duplicate, or a gap: ask at once for the rest from the
		 * first missing response (once per gap; the timer covers a
		 * lost request). */
		rc->st.out_of_seq++;
		if (rc_psn_diff(pkt->psn, w->psn) > (int32_t)k && w->gap_k != k) {
			w->gap_k = k;
			go_back(rc, rc_psn_add(w->psn, k));
		}
		return;
	}
	last = k + 1 == w->npkts;
	/*
	 * Every response but the last is full, and only the last is LAST or
	 * ONLY.  FIRST and MIDDLE are not told apart: after a re-request the
	 * expected response may come from the old request (MIDDLE) or the new
	 * one (FIRST), and both carry the same bytes.
	 */
	if (((oi->flags & FAB_OPF_LAST) != 0) != last ||
	    pkt->payload_len != (last ? w->len - w->read_done : rc->cfg.mtu)) {
		rc->st.bad_pkts++;
		rc_fail_head(rc, NIC_WC_BAD_RESP_ERR, 0);
		return;
	}
	if (pkt->payload_len &&
	    rc->ops.place(rc->ops.arg, &w->mem, w->read_done, pkt->payload, pkt->payload_len) < 0) {
		rc_fail_head(rc, NIC_WC_LOC_PROT_ERR, 0);
		return;
	}
	w->read_done += pkt->payload_len;
	w->read_complete = last;
	/* A response acknowledges every PSN up to and including its own. */
	retire(rc, rc_psn_add(pkt->psn, 1), now);
}

void rc_req_recv_ack(struct rc *rc, const struct fab_pkt *pkt, uint64_t now)
{
	uint8_t kind = pkt->syndrome & FAB_AETH_KIND_MASK;
	uint32_t psn = pkt->psn;

	/* Only PSNs in [una - 1, max - 1] mean anything; others are stale.
	 * After a go back, acknowledgements of the first transmission beyond
	 * the rewound transmit position still arrive and still count. */
	if (rc_psn_diff(psn, rc->una_psn) < -1 || rc_psn_diff(psn, rc->max_psn) >= 0) {
		rc->st.duplicates++;
		return;
	}
	rc->st.acks_rcvd++;
	if (kind == FAB_AETH_ACK) {
		retire(rc, rc_psn_add(psn, 1), now);
		return;
	}
	/* NAKs name the PSN they refuse: everything before it got through. */
	retire(rc, psn, now);
	if (rc->dead)
		return;
	if (kind == FAB_AETH_RNR_NAK) {
		rc->st.rnr_naks_rcvd++;
		if (rc->cfg.rnr_retry != RC_RNR_FOREVER && ++rc->rnr_retries > rc->cfg.rnr_retry) {
			rc_fail_head(rc, NIC_WC_RNR_RETRY_EXC_ERR, 0);
			return;
		}
		go_back(rc, psn);
		rc->rnr_until =
		    now + (uint64_t)fab_rnr_timer_us(pkt->syndrome & FAB_AETH_VALUE_MASK) * 1000u;
		/* The peer answered: the transport retry count and timer start
		 * again; only rnr_retry bounds a peer that never posts. */
		rc->retries = 0;
		rc->timer = 0;
		return;
	}
	if (kind != FAB_AETH_NAK) {
		rc->st.bad_pkts++;
		return;
	}
	switch (pkt->syndrome & FAB_AETH_VALUE_MASK) {
	case FAB_NAK_PSN_SEQ_ERROR:
		rc->st.seq_naks_rcvd++;
		go_back(rc, psn);
		break;
	case FAB_NAK_INVALID_REQUEST: rc_fail_head(rc, NIC_WC_REM_INV_REQ_ERR, 0); break;
	case FAB_NAK_REMOTE_ACCESS_ERROR: rc_fail_head(rc, NIC_WC_REM_ACCESS_ERR, 0); break;
	default: rc_fail_head(rc, NIC_WC_REM_OP_ERR, 0); break;
	}
}

/* Run the requester's timers: the end of an RNR wait, the retransmission
 * timer (which may fail the QP). */
void rc_req_timers(struct rc *rc, uint64_t now)
{
	if (rc->rnr_until && now >= rc->rnr_until) {
		rc->rnr_until = 0;
		go_back(rc, rc->una_psn);
	}
	if (rc->timer && now >= rc->timer) {
		if (rc->una_psn == rc->max_psn && rc->sq_head == rc->sq_next) {
			rc->timer = 0;
		} else if (++rc->retries > rc->cfg.retry_cnt) {
			rc_fail_head(rc, NIC_WC_RETRY_EXC_ERR, 0);
			return;
		} else {
			/* No answer: resend, but only an acknowledgement's worth,
			 * so that a receiver still working through the first
			 * transmission is not buried under another window. */
			rc->st.timeouts++;
			rc->cwnd =
			    rc->cfg.ack_every < rc->cfg.window ? rc->cfg.ack_every : rc->cfg.window;
			go_back(rc, rc->una_psn);
			/* Each timeout in a row waits longer (a peer that is slow,
			 * not gone, gets time to answer). */
			rc->timer = timer_from(rc, now);
		}
	}
}

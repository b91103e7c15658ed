#include "rc.h"

#include <errno.h>
#include <string.h>

#define SQ_MASK (NIC_SQ_DEPTH - 1)
#define RD_MASK (RC_MAX_READS - 1)

_Static_assert((RC_MAX_READS & RD_MASK) == 0, "read queue depth is a power of two");

void rc_config_default(struct rc_config *cfg)
{
	*cfg = (struct rc_config){.mtu = FAB_MTU,
				  .window = 512,
				  .ack_every = 64,
				  .timeout_ns = rc_ack_timeout_ns(RC_ACK_TIMEOUT_DEFAULT),
				  .retry_cnt = RC_RETRY_CNT_DEFAULT,
				  .rnr_retry = RC_RNR_RETRY_DEFAULT,
				  .rnr_timer = 1};
}

void rc_init(struct rc *rc, const struct rc_config *cfg, const struct rc_ops *ops, uint32_t qpn,
	     uint32_t dqpn, uint32_t src_addr, uint32_t dst_addr, uint32_t sq_psn, uint32_t rq_psn)
{
	memset(rc, 0, sizeof(*rc));
	rc->cfg = *cfg;
	if (rc->cfg.mtu < 256 || rc->cfg.mtu > FAB_MTU)
		rc->cfg.mtu = FAB_MTU;
	if (rc->cfg.window < 1 || rc->cfg.window > RC_WINDOW_MAX)
		rc->cfg.window = RC_WINDOW_MAX;
	if (rc->cfg.ack_every < 1)
		rc->cfg.ack_every = 1;
	rc->cwnd = rc->cfg.window;
	rc->ops = *ops;
	rc->qpn = qpn;
	rc->dqpn = dqpn;
	rc->src_addr = src_addr;
	rc->dst_addr = dst_addr;
	rc->post_psn = rc->next_psn = rc->max_psn = rc->una_psn = sq_psn & FAB_MASK24;
	rc->epsn = rq_psn & FAB_MASK24;
}

static uint32_t npkts_of(const struct rc *rc, uint64_t len)
{
	return len == 0 ? 1 : (uint32_t)((len + rc->cfg.mtu - 1) / rc->cfg.mtu);
}

static bool is_read(const struct rc_swqe *w)
{
	return w->wqe.opcode == NIC_WR_RDMA_READ;
}

/*
 * The retransmission deadline for a timer started now, after rc->retries
 * timeouts in a row: 0 (none) when the QP has no ACK timeout.
 */
static uint64_t timer_from(const struct rc *rc, uint64_t now)
{
	return rc->cfg.timeout_ns ? now + rc_backoff_ns(rc->cfg.timeout_ns, rc->retries) : 0;
}

static void release(struct rc *rc, struct rc_mem *mem)
{
	if (mem->ngrant)
		rc->ops.release(rc->ops.arg, mem);
	memset(mem, 0, sizeof(*mem));
}

/* ---- Requester ------------------------------------------------------------ */

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
	    wqe->flags & ~(uint8_t)(NIC_WR_F_FENCE | NIC_WR_F_SOLICITED))
		return -EINVAL;
	for (uint32_t i = 0; i < wqe->num_sge; i++)
		len += wqe->sge[i].len;
	/* A message is at most 2^31 bytes, as on InfiniBand. */
	if (len > 0x80000000u)
		return -EINVAL;
	w = &rc->sq[rc->sq_tail & SQ_MASK];
	memset(w, 0, sizeof(*w));
	w->wqe = *wqe;
	w->len = (uint32_t)len;
	w->npkts = npkts_of(rc, len);
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

static void complete_swqe(struct rc *rc, struct rc_swqe *w, uint16_t status, uint32_t detail)
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
	release(rc, &w->mem);
}

void rc_fail(struct rc *rc, uint16_t status)
{
	if (rc->dead)
		return;
	rc->dead = true;
	rc->timer = rc->rnr_until = 0;
	rc->ops.error(rc->ops.arg, status);
	while (rc->sq_head != rc->sq_tail) {
		complete_swqe(rc, &rc->sq[rc->sq_head & SQ_MASK], NIC_WC_WR_FLUSH_ERR, 0);
		rc->sq_head++;
	}
	rc->sq_next = rc->sq_tail;
	if (rc->rmem_held)
		release(rc, &rc->rmem);
	rc->rmem_held = false;
	/* A receive taken for a message that will never finish. */
	if (rc->have_rwqe) {
		struct nic_cqe cqe = {.wr_id = rc->rwqe.wr_id,
				      .status = NIC_WC_WR_FLUSH_ERR,
				      .opcode = NIC_WC_RECV,
				      .qpn = rc->qpn};

		rc->have_rwqe = false;
		rc->ops.complete(rc->ops.arg, &cqe);
	}
	while (rc->rd_head != rc->rd_tail)
		release(rc, &rc->reads[rc->rd_head++ & RD_MASK].mem);
}

/* Fail the oldest work request with status, then the QP. */
static void fail_head(struct rc *rc, uint16_t status, uint32_t detail)
{
	if (rc->sq_head != rc->sq_tail) {
		complete_swqe(rc, &rc->sq[rc->sq_head & SQ_MASK], status, detail);
		rc->sq_head++;
	}
	rc_fail(rc, status);
}

/* Move the transmit position to PSN psn; false if no work request holds it. */
static bool seek(struct rc *rc, uint32_t psn)
{
	for (uint32_t i = rc->sq_head; i != rc->sq_tail; i++) {
		struct rc_swqe *w = &rc->sq[i & SQ_MASK];
		int32_t d = rc_psn_diff(psn, w->psn);

		if (d >= 0 && d < (int32_t)w->npkts) {
			rc->sq_next = i;
			if (!is_read(w)) {
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
		struct rc_swqe *w = &rc->sq[rc->sq_head & SQ_MASK];
		uint32_t last = rc_psn_add(w->psn, w->npkts);

		if (rc_psn_diff(upto, last) < 0)
			break;
		if (is_read(w) && !w->read_complete) {
			upto = rc_psn_add(w->psn, (uint32_t)(w->read_done / rc->cfg.mtu));
			go_back(rc, upto);
			break;
		}
		complete_swqe(rc, w, NIC_WC_SUCCESS, 0);
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

static void pkt_base(struct rc *rc, struct fab_pkt *p, uint8_t opcode, uint32_t psn)
{
	fab_pkt_init(p, opcode);
	p->src_ip = rc->src_addr;
	p->dst_ip = rc->dst_addr;
	p->udp_sport = fab_udp_sport(rc->qpn);
	p->dest_qpn = rc->dqpn;
	p->psn = psn;
}

/* A fence holds a work request until every earlier RDMA READ completed. */
static bool fenced(const struct rc *rc, uint32_t idx)
{
	if (!(rc->sq[idx & SQ_MASK].wqe.flags & NIC_WR_F_FENCE))
		return false;
	for (uint32_t i = rc->sq_head; i != idx; i++) {
		if (is_read(&rc->sq[i & SQ_MASK]))
			return true;
	}
	return false;
}

/* Send the next packet of the requester: 1 sent, 0 nothing to send now. */
static int send_next(struct rc *rc, uint64_t now)
{
	struct rc_swqe *w;
	struct fab_pkt p;
	uint32_t k, psn;
	uint64_t off;
	int err;

	if (rc->sq_next == rc->sq_tail || rc->rnr_until)
		return 0;
	w = &rc->sq[rc->sq_next & SQ_MASK];
	k = rc->tx_pkt;
	psn = rc_psn_add(w->psn, k);
	/* The window bounds the PSNs in flight; a read larger than the window
	 * still goes out once everything before it has been acknowledged. */
	if ((uint32_t)rc_psn_diff(rc_psn_add(psn, is_read(w) ? w->npkts - k : 1), rc->una_psn) >
		rc->cwnd &&
	    !(is_read(w) && psn == rc->una_psn))
		return 0;
	if (fenced(rc, rc->sq_next))
		return 0;
	if (!w->checked) {
		enum nic_tpt_reason why = NIC_TPT_R_NONE;

		if (rc->ops.check_local(rc->ops.arg, w->wqe.sge, w->wqe.num_sge, is_read(w),
					&w->mem, &why) < 0) {
			/* Work requests before it still complete normally when
			 * acknowledged; this one and the QP fail now. */
			while (rc->sq_head != rc->sq_next) {
				complete_swqe(rc, &rc->sq[rc->sq_head & SQ_MASK],
					      NIC_WC_WR_FLUSH_ERR, 0);
				rc->sq_head++;
			}
			fail_head(rc, NIC_WC_LOC_PROT_ERR, why);
			return 0;
		}
		w->checked = true;
	}
	pkt_base(rc, &p, req_opcode(w, k), psn);
	off = (uint64_t)k * rc->cfg.mtu;
	if (is_read(w)) {
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
		err = rc->ops.xmit(rc->ops.arg, &p, p.payload_len ? &w->mem : NULL, off);
	}
	if (err == -ENOBUFS)
		return 0;
	if (err == -EFAULT) {
		/* The host's memory refused the DMA: a local protection error. */
		while (rc->sq_head != rc->sq_next) {
			complete_swqe(rc, &rc->sq[rc->sq_head & SQ_MASK], NIC_WC_WR_FLUSH_ERR, 0);
			rc->sq_head++;
		}
		fail_head(rc, NIC_WC_LOC_PROT_ERR, 0);
		return 0;
	}
	if (p.ack_req)
		rc->since_ackreq = 0;
	if (!err) {
		rc->st.pkts_sent++;
		rc->st.bytes_sent += p.payload_len;
	}
	if (is_read(w) || ++rc->tx_pkt == w->npkts) {
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
static void recv_read_response(struct rc *rc, const struct fab_pkt *pkt, uint64_t now)
{
	const struct fab_opcode_info *oi = fab_opcode_info(pkt->opcode);
	struct rc_swqe *w = NULL;
	uint32_t k;
	bool last;

	for (uint32_t i = rc->sq_head; i != rc->sq_next && !w; i++) {
		if (is_read(&rc->sq[i & SQ_MASK]) && !rc->sq[i & SQ_MASK].read_complete)
			w = &rc->sq[i & SQ_MASK];
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
		fail_head(rc, NIC_WC_BAD_RESP_ERR, 0);
		return;
	}
	if (pkt->payload_len &&
	    rc->ops.place(rc->ops.arg, &w->mem, w->read_done, pkt->payload, pkt->payload_len) < 0) {
		fail_head(rc, NIC_WC_LOC_PROT_ERR, 0);
		return;
	}
	w->read_done += pkt->payload_len;
	w->read_complete = last;
	/* A response acknowledges every PSN up to and including its own. */
	retire(rc, rc_psn_add(pkt->psn, 1), now);
}

static void recv_ack(struct rc *rc, const struct fab_pkt *pkt, uint64_t now)
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
			fail_head(rc, NIC_WC_RNR_RETRY_EXC_ERR, 0);
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
	case FAB_NAK_INVALID_REQUEST: fail_head(rc, NIC_WC_REM_INV_REQ_ERR, 0); break;
	case FAB_NAK_REMOTE_ACCESS_ERROR: fail_head(rc, NIC_WC_REM_ACCESS_ERR, 0); break;
	default: fail_head(rc, NIC_WC_REM_OP_ERR, 0); break;
	}
}

/* ---- Responder ------------------------------------------------------------ */

static int send_aeth(struct rc *rc, uint8_t syndrome, uint32_t psn)
{
	struct fab_pkt p;
	int err;

	pkt_base(rc, &p, FAB_OP_ACKNOWLEDGE, psn);
	p.syndrome = syndrome;
	p.msn = rc->msn & FAB_MASK24;
	err = rc->ops.xmit(rc->ops.arg, &p, NULL, 0);
	if (!err)
		rc->st.pkts_sent++;
	return err;
}

static void send_nak(struct rc *rc, enum fab_nak_code code)
{
	send_aeth(rc, fab_aeth_nak(code), rc->epsn);
	rc->st.naks_sent++;
	if (code == FAB_NAK_PSN_SEQ_ERROR)
		rc->st.seq_naks_sent++;
}

/* The responder hit a fatal error: tell the requester, then fail. */
static void responder_fatal(struct rc *rc, enum fab_nak_code code, uint16_t status)
{
	send_nak(rc, code);
	rc_fail(rc, status);
}

void rc_dma_fault(struct rc *rc, bool responder, bool completed, uint32_t psn)
{
	if (rc->dead)
		return;
	if (responder) {
		send_aeth(rc, fab_aeth_nak(FAB_NAK_REMOTE_OP_ERROR), psn);
		rc->st.naks_sent++;
		rc_fail(rc, NIC_WC_REM_OP_ERR);
	} else if (completed) {
		rc_fail(rc, NIC_WC_LOC_PROT_ERR);
	} else {
		fail_head(rc, NIC_WC_LOC_PROT_ERR, 0);
	}
}

static void complete_recv(struct rc *rc, uint16_t status, uint8_t opcode, const struct fab_pkt *pkt,
			  uint32_t detail)
{
	struct nic_cqe cqe = {.wr_id = rc->rwqe.wr_id,
			      .status = status,
			      .opcode = opcode,
			      .byte_len = status == NIC_WC_SUCCESS ? (uint32_t)rc->rx_off : 0,
			      .qpn = rc->qpn,
			      .detail = detail};

	if (pkt && pkt->has_imm) {
		cqe.flags = NIC_WC_F_IMM;
		cqe.imm = pkt->imm;
	}
	rc->have_rwqe = false;
	rc->ops.complete(rc->ops.arg, &cqe);
}

/* Take the receive work request a message needs: 0, or -EAGAIN (RNR NAK sent). */
static int need_rwqe(struct rc *rc, bool check)
{
	enum nic_tpt_reason why = NIC_TPT_R_NONE;

	if (rc->have_rwqe)
		return 0;
	if (rc->ops.take_recv(rc->ops.arg, &rc->rwqe) < 0) {
		send_aeth(rc, fab_aeth_rnr_nak(rc->cfg.rnr_timer), rc->epsn);
		rc->st.rnr_naks_sent++;
		return -EAGAIN;
	}
	rc->have_rwqe = true;
	if (!check)
		return 0;
	if (rc->rwqe.num_sge > NIC_MAX_SGE ||
	    rc->ops.check_local(rc->ops.arg, rc->rwqe.sge, rc->rwqe.num_sge, true, &rc->rmem,
				&why) < 0) {
		rc->rx_off = 0;
		complete_recv(rc, NIC_WC_LOC_PROT_ERR, NIC_WC_RECV, NULL, why);
		responder_fatal(rc, FAB_NAK_REMOTE_OP_ERROR, NIC_WC_LOC_PROT_ERR);
		return -EACCES;
	}
	rc->rmem_held = true;
	return 0;
}

static void end_message(struct rc *rc)
{
	if (rc->rmem_held)
		release(rc, &rc->rmem);
	rc->rmem_held = false;
	rc->rx = RC_RX_IDLE;
	rc->rx_off = 0;
	rc->msn = (rc->msn + 1) & FAB_MASK24;
}

/* Place a packet's payload at the current offset of the current message. */
static int place_payload(struct rc *rc, const struct fab_pkt *pkt, uint64_t limit)
{
	if (pkt->payload_len > limit || rc->rx_off > limit - pkt->payload_len)
		return -EMSGSIZE;
	if (pkt->payload_len &&
	    rc->ops.place(rc->ops.arg, &rc->rmem, rc->rx_off, pkt->payload, pkt->payload_len) < 0)
		return -EFAULT;
	rc->rx_off += pkt->payload_len;
	return 0;
}

/*
 * The packets of a SEND.  Returns 0 when the packet is accepted (the PSN
 * moves on), -EAGAIN after an RNR NAK, -EPROTO after a fatal error.
 */
static int recv_send(struct rc *rc, const struct fab_pkt *pkt, uint8_t flags)
{
	int err;

	if ((flags & FAB_OPF_FIRST) ? rc->rx != RC_RX_IDLE : rc->rx != RC_RX_SEND) {
		responder_fatal(rc, FAB_NAK_INVALID_REQUEST, NIC_WC_REM_INV_REQ_ERR);
		return -EPROTO;
	}
	if ((flags & FAB_OPF_FIRST) && (err = need_rwqe(rc, true)) < 0)
		return err == -EAGAIN ? -EAGAIN : -EPROTO;
	/* Every packet but the last carries exactly one MTU. */
	if (!(flags & FAB_OPF_LAST) && pkt->payload_len != rc->cfg.mtu) {
		responder_fatal(rc, FAB_NAK_INVALID_REQUEST, NIC_WC_REM_INV_REQ_ERR);
		return -EPROTO;
	}
	err = place_payload(rc, pkt, rc->rmem.len);
	if (err) {
		complete_recv(rc, err == -EMSGSIZE ? NIC_WC_LOC_LEN_ERR : NIC_WC_LOC_PROT_ERR,
			      NIC_WC_RECV, NULL, 0);
		responder_fatal(
		    rc, err == -EMSGSIZE ? FAB_NAK_INVALID_REQUEST : FAB_NAK_REMOTE_OP_ERROR,
		    err == -EMSGSIZE ? NIC_WC_LOC_LEN_ERR : NIC_WC_LOC_PROT_ERR);
		return -EPROTO;
	}
	rc->rx = RC_RX_SEND;
	if (flags & FAB_OPF_LAST) {
		complete_recv(rc, NIC_WC_SUCCESS, NIC_WC_RECV, pkt, 0);
		end_message(rc);
	}
	return 0;
}

/* The packets of an RDMA WRITE; returns as recv_send. */
static int recv_write(struct rc *rc, const struct fab_pkt *pkt, uint8_t flags)
{
	int err;

	if ((flags & FAB_OPF_FIRST) ? rc->rx != RC_RX_IDLE : rc->rx != RC_RX_WRITE) {
		responder_fatal(rc, FAB_NAK_INVALID_REQUEST, NIC_WC_REM_INV_REQ_ERR);
		return -EPROTO;
	}
	/* With immediate data the last packet consumes a receive work
	 * request: make sure there is one before placing anything. */
	if ((flags & FAB_OPF_LAST) && pkt->has_imm && need_rwqe(rc, false) < 0)
		return -EAGAIN;
	if (flags & FAB_OPF_FIRST) {
		enum nic_tpt_reason why = NIC_TPT_R_NONE;

		if (pkt->dma_len > 0x80000000u ||
		    rc->ops.check_remote(rc->ops.arg, pkt->rkey, pkt->va, pkt->dma_len,
					 NIC_ACCESS_REMOTE_WRITE, &rc->rmem, &why) < 0) {
			responder_fatal(rc, FAB_NAK_REMOTE_ACCESS_ERROR, NIC_WC_REM_ACCESS_ERR);
			return -EPROTO;
		}
		rc->rmem_held = true;
		rc->rx_limit = pkt->dma_len;
		rc->rx = RC_RX_WRITE;
	}
	if (!(flags & FAB_OPF_LAST) && pkt->payload_len != rc->cfg.mtu) {
		responder_fatal(rc, FAB_NAK_INVALID_REQUEST, NIC_WC_REM_INV_REQ_ERR);
		return -EPROTO;
	}
	err = place_payload(rc, pkt, rc->rx_limit);
	if (err || ((flags & FAB_OPF_LAST) && rc->rx_off != rc->rx_limit)) {
		responder_fatal(rc,
				err == -EFAULT ? FAB_NAK_REMOTE_OP_ERROR : FAB_NAK_INVALID_REQUEST,
				err == -EFAULT ? NIC_WC_REM_OP_ERR : NIC_WC_REM_INV_REQ_ERR);
		return -EPROTO;
	}
	if (flags & FAB_OPF_LAST) {
		if (pkt->has_imm)
			complete_recv(rc, NIC_WC_SUCCESS, NIC_WC_RECV_RDMA_IMM, pkt, 0);
		end_message(rc);
	}
	return 0;
}

/* Queue the responses to an RDMA READ request (new or duplicate). */
static void recv_read_request(struct rc *rc, const struct fab_pkt *pkt, bool duplicate)
{
	enum nic_tpt_reason why = NIC_TPT_R_NONE;
	struct rc_read *r;

	/* A NIC that does not serve RDMA READ refuses it as an invalid request. */
	if (rc->cfg.no_reads) {
		responder_fatal(rc, FAB_NAK_INVALID_REQUEST, NIC_WC_REM_INV_REQ_ERR);
		return;
	}
	if (rc->rd_tail - rc->rd_head >= RC_MAX_READS) {
		if (!duplicate)
			responder_fatal(rc, FAB_NAK_INVALID_REQUEST, NIC_WC_REM_INV_REQ_ERR);
		return;
	}
	if (pkt->dma_len > 0x80000000u) {
		responder_fatal(rc, FAB_NAK_INVALID_REQUEST, NIC_WC_REM_INV_REQ_ERR);
		return;
	}
	r = &rc->reads[rc->rd_tail & RD_MASK];
	memset(r, 0, sizeof(*r));
	if (rc->ops.check_remote(rc->ops.arg, pkt->rkey, pkt->va, pkt->dma_len,
				 NIC_ACCESS_REMOTE_READ, &r->mem, &why) < 0) {
		responder_fatal(rc, FAB_NAK_REMOTE_ACCESS_ERROR, NIC_WC_REM_ACCESS_ERR);
		return;
	}
	r->psn = pkt->psn;
	r->npkts = npkts_of(rc, pkt->dma_len);
	rc->rd_tail++;
	if (!duplicate) {
		rc->epsn = rc_psn_add(rc->epsn, r->npkts);
		rc->msn = (rc->msn + 1) & FAB_MASK24;
	}
}

/* Send read responses; 1 if one was sent. */
static int send_read_response(struct rc *rc)
{
	struct rc_read *r;
	struct fab_pkt p;
	uint64_t off, left;
	bool first, last;
	uint8_t op;
	int err;

	if (rc->rd_head == rc->rd_tail)
		return 0;
	r = &rc->reads[rc->rd_head & RD_MASK];
	first = r->sent == 0;
	last = r->sent + 1 == r->npkts;
	op = first && last ? FAB_OP_RDMA_READ_RESPONSE_ONLY
	     : first       ? FAB_OP_RDMA_READ_RESPONSE_FIRST
	     : last        ? FAB_OP_RDMA_READ_RESPONSE_LAST
			   : FAB_OP_RDMA_READ_RESPONSE_MIDDLE;
	pkt_base(rc, &p, op, rc_psn_add(r->psn, r->sent));
	off = (uint64_t)r->sent * rc->cfg.mtu;
	left = r->mem.len - off;
	p.payload_len = (uint32_t)(left < rc->cfg.mtu ? left : rc->cfg.mtu);
	if (p.has_aeth) {
		p.syndrome = fab_aeth_ack(FAB_AETH_CREDITS_INVALID);
		p.msn = rc->msn & FAB_MASK24;
	}
	err = rc->ops.xmit(rc->ops.arg, &p, p.payload_len ? &r->mem : NULL, off);
	if (err == -ENOBUFS)
		return 0;
	if (err == -EFAULT) {
		responder_fatal(rc, FAB_NAK_REMOTE_OP_ERROR, NIC_WC_REM_OP_ERR);
		return 0;
	}
	rc->st.pkts_sent++;
	rc->st.bytes_sent += p.payload_len;
	if (++r->sent == r->npkts) {
		release(rc, &r->mem);
		rc->rd_head++;
	}
	return 1;
}

static void recv_request(struct rc *rc, const struct fab_pkt *pkt, uint8_t flags)
{
	int32_t d = rc_psn_diff(pkt->psn, rc->epsn);

	if (d < 0) {
		/* A duplicate: acknowledge again, or answer a read again. */
		rc->st.duplicates++;
		if (pkt->opcode == FAB_OP_RDMA_READ_REQUEST)
			recv_read_request(rc, pkt, true);
		else
			rc->ack_due = true;
		return;
	}
	if (d > 0) {
		rc->st.out_of_seq++;
		if (!rc->nak_sent) {
			send_nak(rc, FAB_NAK_PSN_SEQ_ERROR);
			rc->nak_sent = true;
		}
		return;
	}
	rc->nak_sent = false;
	switch (pkt->opcode) {
	case FAB_OP_SEND_FIRST:
	case FAB_OP_SEND_MIDDLE:
	case FAB_OP_SEND_LAST:
	case FAB_OP_SEND_LAST_WITH_IMMEDIATE:
	case FAB_OP_SEND_ONLY:
	case FAB_OP_SEND_ONLY_WITH_IMMEDIATE:
		/* Not accepted (RNR, or fatal): the PSN stays expected. */
		if (recv_send(rc, pkt, flags) < 0)
			return;
		break;
	case FAB_OP_RDMA_READ_REQUEST: recv_read_request(rc, pkt, false); return;
	default:
		if (recv_write(rc, pkt, flags) < 0)
			return;
		break;
	}
	rc->epsn = rc_psn_add(rc->epsn, 1);
	if (pkt->ack_req)
		rc->ack_due = true;
}

void rc_recv(struct rc *rc, const struct fab_pkt *pkt, uint64_t now)
{
	const struct fab_opcode_info *oi = fab_opcode_info(pkt->opcode);

	if (rc->dead)
		return;
	if (!oi || !(oi->flags & FAB_OPF_SUPPORTED) || (pkt->opcode & 0xe0) != 0 ||
	    pkt->payload_len > rc->cfg.mtu) {
		rc->st.bad_pkts++;
		return;
	}
	rc->st.pkts_rcvd++;
	rc->st.bytes_rcvd += pkt->payload_len;
	if (pkt->opcode == FAB_OP_ACKNOWLEDGE)
		recv_ack(rc, pkt, now);
	else if (oi->flags & FAB_OPF_RESPONSE)
		recv_read_response(rc, pkt, now);
	else
		recv_request(rc, pkt, oi->flags);
}

void rc_progress(struct rc *rc, uint64_t now)
{
	if (rc->dead)
		return;
	if (rc->rnr_until && now >= rc->rnr_until) {
		rc->rnr_until = 0;
		go_back(rc, rc->una_psn);
	}
	if (rc->timer && now >= rc->timer) {
		if (rc->una_psn == rc->max_psn && rc->sq_head == rc->sq_next) {
			rc->timer = 0;
		} else if (++rc->retries > rc->cfg.retry_cnt) {
			fail_head(rc, NIC_WC_RETRY_EXC_ERR, 0);
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
	/* Read responses first, so that an ACK never overtakes them. */
	while (!rc->dead && send_read_response(rc))
		;
	if (!rc->dead && rc->ack_due && rc->rd_head == rc->rd_tail) {
		int err = send_aeth(rc, fab_aeth_ack(FAB_AETH_CREDITS_INVALID),
				    rc_psn_add(rc->epsn, FAB_MASK24));

		if (err != -ENOBUFS) {
			rc->ack_due = false;
			rc->st.acks_sent++;
		}
	}
	while (!rc->dead && send_next(rc, now))
		;
}

uint64_t rc_deadline(const struct rc *rc)
{
	uint64_t t = rc->timer;

	if (rc->rnr_until && (!t || rc->rnr_until < t))
		t = rc->rnr_until;
	return rc->dead ? 0 : t;
}

uint32_t rc_xmit_run(const struct rc *rc, const struct rc_mem *mem)
{
	if (rc->rd_head != rc->rd_tail) {
		const struct rc_read *r = &rc->reads[rc->rd_head & RD_MASK];

		if (mem == &r->mem)
			return r->npkts - r->sent;
	}
	if (rc->sq_next != rc->sq_tail) {
		const struct rc_swqe *w = &rc->sq[rc->sq_next & SQ_MASK];
		uint32_t used, room, left;

		if (mem != &w->mem || is_read(w))
			return 1;
		/* send_next let this packet out, so used < cwnd. */
		used = (uint32_t)rc_psn_diff(rc_psn_add(w->psn, rc->tx_pkt), rc->una_psn);
		room = used < rc->cwnd ? rc->cwnd - used : 1;
		left = w->npkts - rc->tx_pkt;
		return left < room ? left : room;
	}
	return 1;
}

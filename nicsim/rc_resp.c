/*
 * The responder of the RC engine: the expected PSN, duplicates and
 * sequence NAKs, SEND and RDMA WRITE into host memory, RDMA READ responses,
 * receive work requests and RNR NAKs, coalesced ACKs, the checks of the
 * peer's packets (rc.h).
 */
#include "rc_priv.h"

#include <errno.h>
#include <string.h>

int rc_send_aeth(struct rc *rc, uint8_t syndrome, uint32_t psn)
{
	struct fab_pkt p;
	int err;

	rc_pkt_base(rc, &p, FAB_OP_ACKNOWLEDGE, psn);
	p.syndrome = syndrome;
	p.msn = rc->msn & FAB_MASK24;
	err = rc->ops.xmit(rc->ops.arg, &p, NULL, 0);
	if (!err)
		rc->st.pkts_sent++;
	return err;
}

static void send_nak(struct rc *rc, enum fab_nak_code code)
{
	rc_send_aeth(rc, fab_aeth_nak(code), rc->epsn);
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
		rc_send_aeth(rc, fab_aeth_nak(FAB_NAK_REMOTE_OP_ERROR), psn);
		rc->st.naks_sent++;
		rc_fail(rc, NIC_WC_REM_OP_ERR);
	} else if (completed) {
		rc_fail(rc, NIC_WC_LOC_PROT_ERR);
	} else {
		rc_fail_head(rc, NIC_WC_LOC_PROT_ERR, 0);
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

/*
 * Take the receive work request a message needs: 0, 1 (none posted, but the
 * message may be held: nothing sent), -EAGAIN (RNR NAK sent), or -EPROTO
 * (the QP failed).  A held first message takes the first receive posted
 * before this message can.
 */
static int need_rwqe(struct rc *rc, bool check, bool holdable)
{
	enum nic_tpt_reason why = NIC_TPT_R_NONE;

	if (rc->have_rwqe)
		return 0;
	if (rc->hold == RC_HOLD_FULL) {
		rc_resp_deliver_held(rc);
		if (rc->dead)
			return -EPROTO;
	}
	if (rc->hold == RC_HOLD_FULL || rc->ops.take_recv(rc->ops.arg, &rc->rwqe) < 0) {
		if (holdable && rc->hold == RC_HOLD_ARMED)
			return 1;
		rc_send_aeth(rc, fab_aeth_rnr_nak(rc->cfg.rnr_timer), rc->epsn);
		rc->st.rnr_naks_sent++;
		return -EAGAIN;
	}
	rc->have_rwqe = true;
	/* A message took a receive: no later one is the first. */
	if (rc->hold == RC_HOLD_ARMED)
		rc->hold = RC_HOLD_OFF;
	if (!check)
		return 0;
	if (rc->rwqe.num_sge > NIC_MAX_SGE ||
	    rc->ops.check_local(rc->ops.arg, rc->rwqe.sge, rc->rwqe.num_sge, true, &rc->rmem,
				&why) < 0) {
		rc->rx_off = 0;
		complete_recv(rc, NIC_WC_LOC_PROT_ERR, NIC_WC_RECV, NULL, why);
		responder_fatal(rc, FAB_NAK_REMOTE_OP_ERROR, NIC_WC_LOC_PROT_ERR);
		return -EPROTO;
	}
	rc->rmem_held = true;
	return 0;
}

/*
 * Keep a SEND in one packet as the connection's first message: accepted
 * (the caller moves the PSN on and acknowledges it) and completed later, by
 * rc_resp_deliver_held.
 */
static void hold_message(struct rc *rc, const struct fab_pkt *pkt)
{
	if (pkt->payload_len)
		memcpy(rc->hold_buf, pkt->payload, pkt->payload_len);
	rc->hold_len = pkt->payload_len;
	rc->hold_has_imm = pkt->has_imm;
	rc->hold_imm = pkt->has_imm ? pkt->imm : 0;
	rc->hold = RC_HOLD_FULL;
	rc->st.first_held++;
	rc->msn = (rc->msn + 1) & FAB_MASK24;
}

void rc_resp_deliver_held(struct rc *rc)
{
	enum nic_tpt_reason why = NIC_TPT_R_NONE;
	struct nic_cqe cqe = {.opcode = NIC_WC_RECV, .qpn = rc->qpn};
	struct nic_recv_wqe w;
	struct rc_mem m;

	if (rc->dead || rc->hold != RC_HOLD_FULL || rc->ops.take_recv(rc->ops.arg, &w) < 0)
		return;
	rc->hold = RC_HOLD_OFF;
	memset(&m, 0, sizeof(m));
	cqe.wr_id = w.wr_id;
	/* The checks of a receive that a message arrives for, in their order
	 * (need_rwqe, then place_payload). */
	if (w.num_sge > NIC_MAX_SGE ||
	    rc->ops.check_local(rc->ops.arg, w.sge, w.num_sge, true, &m, &why) < 0) {
		cqe.status = NIC_WC_LOC_PROT_ERR;
		cqe.detail = why;
	} else if (rc->hold_len > m.len) {
		cqe.status = NIC_WC_LOC_LEN_ERR;
	} else if (rc->hold_len &&
		   rc->ops.place(rc->ops.arg, &m, 0, rc->hold_buf, rc->hold_len) < 0) {
		cqe.status = NIC_WC_LOC_PROT_ERR;
	} else {
		cqe.byte_len = rc->hold_len;
		if (rc->hold_has_imm) {
			cqe.flags = NIC_WC_F_IMM;
			cqe.imm = rc->hold_imm;
		}
	}
	rc->ops.complete(rc->ops.arg, &cqe);
	rc_release(rc, &m);
	/* A failed receive puts the QP in error as for a message arriving
	 * now; no NAK, since the sender's SEND was acknowledged already. */
	if (cqe.status != NIC_WC_SUCCESS)
		rc_fail(rc, cqe.status);
}

static void end_message(struct rc *rc)
{
	if (rc->rmem_held)
		rc_release(rc, &rc->rmem);
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
	if (flags & FAB_OPF_FIRST) {
		/* One packet that fits the buffer of a first message. */
		bool holdable = (flags & FAB_OPF_LAST) && pkt->payload_len <= NIC_HOLD_MAX;

		err = need_rwqe(rc, true, holdable);
		if (err == 1) {
			hold_message(rc, pkt);
			return 0;
		}
		if (err < 0)
			return err;
	}
	/* Every packet but the last carries exactly one MTU. */
	if (!(flags & FAB_OPF_LAST) && pkt->payload_len != rc->cfg.mtu) {
		responder_fatal(rc, FAB_NAK_INVALID_REQUEST, NIC_WC_REM_INV_REQ_ERR);
		return -EPROTO;
	}
	if ((flags & FAB_OPF_FIRST) && (flags & FAB_OPF_LAST) && rc->cfg.recv_inline &&
	    pkt->payload_len <= NIC_RECV_INLINE_MAX && pkt->payload_len <= rc->rmem.len) {
		/* One small packet: its bytes go beside the completion. */
		struct nic_cqe cqe = {.wr_id = rc->rwqe.wr_id,
				      .opcode = NIC_WC_RECV,
				      .flags = NIC_WC_F_INLINE,
				      .byte_len = pkt->payload_len,
				      .qpn = rc->qpn};

		if (pkt->has_imm) {
			cqe.flags |= NIC_WC_F_IMM;
			cqe.imm = pkt->imm;
		}
		rc->have_rwqe = false;
		rc->ops.complete_inline(rc->ops.arg, &cqe, pkt->payload);
		end_message(rc);
		return 0;
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
	if ((flags & FAB_OPF_LAST) && pkt->has_imm && (err = need_rwqe(rc, false, false)) < 0)
		return err;
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

/*
 * A duplicate RDMA READ request that asks again for the rest of a read still
 * queued, from its response k on: the requester missed responses, or
 * waited for them too long.  The responses from k are sent again, once:
 * those not sent yet are on their way, and queueing the rest a second time
 * behind the first would double the work at each of the requester's
 * timeouts, most of all on a responder already too busy to answer in time.
 * Whether pkt is such a request (handled here) or asks for a read this side
 * no longer holds (answered anew).
 */
static bool rewind_read(struct rc *rc, const struct fab_pkt *pkt)
{
	for (uint32_t i = rc->rd_head; i != rc->rd_tail; i++) {
		struct rc_read *r = &rc->reads[i & RC_RD_MASK];
		int32_t k = rc_psn_diff(pkt->psn, r->psn);
		uint64_t off = (uint64_t)k * rc->cfg.mtu;

		if (k < 0 || (uint32_t)k >= r->npkts)
			continue;
		if (pkt->rkey != r->rkey || pkt->va != r->va + off ||
		    pkt->dma_len != r->mem.len - off)
			return false;
		if ((uint32_t)k < r->sent)
			r->sent = (uint32_t)k;
		rc->st.reads_rewound++;
		return true;
	}
	return false;
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
	if (duplicate && rewind_read(rc, pkt))
		return;
	if (rc->rd_tail - rc->rd_head >= RC_MAX_READS) {
		if (!duplicate)
			responder_fatal(rc, FAB_NAK_INVALID_REQUEST, NIC_WC_REM_INV_REQ_ERR);
		return;
	}
	if (pkt->dma_len > 0x80000000u) {
		responder_fatal(rc, FAB_NAK_INVALID_REQUEST, NIC_WC_REM_INV_REQ_ERR);
		return;
	}
	r = &rc->reads[rc->rd_tail & RC_RD_MASK];
	memset(r, 0, sizeof(*r));
	if (rc->ops.check_remote(rc->ops.arg, pkt->rkey, pkt->va, pkt->dma_len,
				 NIC_ACCESS_REMOTE_READ, &r->mem, &why) < 0) {
		responder_fatal(rc, FAB_NAK_REMOTE_ACCESS_ERROR, NIC_WC_REM_ACCESS_ERR);
		return;
	}
	r->psn = pkt->psn;
	r->npkts = rc_npkts(rc, pkt->dma_len);
	r->rkey = pkt->rkey;
	r->va = pkt->va;
	rc->rd_tail++;
	if (!duplicate) {
		rc->epsn = rc_psn_add(rc->epsn, r->npkts);
		rc->msn = (rc->msn + 1) & FAB_MASK24;
	}
}

/* Send read responses; 1 if one was sent. */
int rc_resp_send_read_response(struct rc *rc)
{
	struct rc_read *r;
	struct fab_pkt p;
	uint64_t off, left;
	bool first, last;
	uint8_t op;
	int err;

	if (rc->rd_head == rc->rd_tail)
		return 0;
	r = &rc->reads[rc->rd_head & RC_RD_MASK];
	first = r->sent == 0;
	last = r->sent + 1 == r->npkts;
	op = first && last ? FAB_OP_RDMA_READ_RESPONSE_ONLY
	     : first       ? FAB_OP_RDMA_READ_RESPONSE_FIRST
	     : last        ? FAB_OP_RDMA_READ_RESPONSE_LAST
			   : FAB_OP_RDMA_READ_RESPONSE_MIDDLE;
	rc_pkt_base(rc, &p, op, rc_psn_add(r->psn, r->sent));
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
		rc_release(rc, &r->mem);
		rc->rd_head++;
	}
	return 1;
}

void rc_resp_recv_request(struct rc *rc, const struct fab_pkt *pkt, uint8_t flags)
{
	int32_t d = rc_psn_diff(pkt->psn, rc->epsn);

	rc->rx_psn = pkt->psn;
	rc->rx_opcode = pkt->opcode;
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

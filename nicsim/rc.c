/*
 * The RC engine's set-up, its entry points and what its two halves share:
 * the requester is rc_req.c, the responder rc_resp.c (rc.h describes the
 * engine, rc_priv.h the internals they share).
 */
#include "rc_priv.h"

#include <errno.h>
#include <string.h>

_Static_assert((RC_MAX_READS & RC_RD_MASK) == 0, "read queue depth is a power of two");

void rc_config_default(struct rc_config *cfg)
{
	*cfg = (struct rc_config){.mtu = FAB_MTU,
				  .window = 512,
				  .ack_every = 64,
				  .timeout_ns = rc_ack_timeout_ns(RC_ACK_TIMEOUT_DEFAULT),
				  .retry_cnt = RC_RETRY_CNT_DEFAULT,
				  .rnr_retry = RC_RNR_RETRY_DEFAULT,
				  .rnr_timer = RC_RNR_TIMER_DEFAULT};
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
	rc->hold = rc->cfg.hold_first ? RC_HOLD_ARMED : RC_HOLD_OFF;
}

uint32_t rc_npkts(const struct rc *rc, uint64_t len)
{
	return len == 0 ? 1 : (uint32_t)((len + rc->cfg.mtu - 1) / rc->cfg.mtu);
}

void rc_release(struct rc *rc, struct rc_mem *mem)
{
	if (mem->ngrant)
		rc->ops.release(rc->ops.arg, mem);
	memset(mem, 0, sizeof(*mem));
}

void rc_pkt_base(struct rc *rc, struct fab_pkt *p, uint8_t opcode, uint32_t psn)
{
	fab_pkt_init(p, opcode);
	p->src_ip = rc->src_addr;
	p->dst_ip = rc->dst_addr;
	p->udp_sport = fab_udp_sport(rc->qpn);
	p->dest_qpn = rc->dqpn;
	p->psn = psn;
}

void rc_fail(struct rc *rc, uint16_t status)
{
	if (rc->dead)
		return;
	rc->dead = true;
	rc->timer = rc->rnr_until = 0;
	rc->ops.error(rc->ops.arg, status);
	while (rc->sq_head != rc->sq_tail) {
		rc_complete_swqe(rc, &rc->sq[rc->sq_head & RC_SQ_MASK], NIC_WC_WR_FLUSH_ERR, 0);
		rc->sq_head++;
	}
	rc->sq_next = rc->sq_tail;
	if (rc->rmem_held)
		rc_release(rc, &rc->rmem);
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
		rc_release(rc, &rc->reads[rc->rd_head++ & RC_RD_MASK].mem);
	/* A first message nobody will receive now: its sender saw it
	 * acknowledged, so it is counted. */
	if (rc->hold == RC_HOLD_FULL)
		rc->st.first_dropped++;
	rc->hold = RC_HOLD_OFF;
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
		rc_req_recv_ack(rc, pkt, now);
	else if (oi->flags & FAB_OPF_RESPONSE)
		rc_req_recv_read_response(rc, pkt, now);
	else
		rc_resp_recv_request(rc, pkt, oi->flags);
}

void rc_progress(struct rc *rc, uint64_t now)
{
	if (rc->dead)
		return;
	rc_req_timers(rc, now);
	if (rc->dead)
		return;
	if (rc->hold == RC_HOLD_FULL) {
		rc_resp_deliver_held(rc);
		if (rc->dead)
			return;
	}
	/* Read responses first, so that an ACK never overtakes them. */
	while (!rc->dead && rc_resp_send_read_response(rc))
		;
	if (!rc->dead && rc->ack_due && rc->rd_head == rc->rd_tail) {
		int err = rc_send_aeth(rc, fab_aeth_ack(FAB_AETH_CREDITS_INVALID),
				       rc_psn_add(rc->epsn, FAB_MASK24));

		if (err != -ENOBUFS) {
			rc->ack_due = false;
			rc->st.acks_sent++;
		}
	}
	while (!rc->dead && rc_req_send_next(rc, now))
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
		const struct rc_read *r = &rc->reads[rc->rd_head & RC_RD_MASK];

		if (mem == &r->mem)
			return r->npkts - r->sent;
	}
	if (rc->sq_next != rc->sq_tail) {
		const struct rc_swqe *w = &rc->sq[rc->sq_next & RC_SQ_MASK];
		uint32_t used, room, left;

		if (mem != &w->mem || rc_is_read(w))
			return 1;
		/* rc_req_send_next let this packet out, so used < cwnd. */
		used = (uint32_t)rc_psn_diff(rc_psn_add(w->psn, rc->tx_pkt), rc->una_psn);
		room = used < rc->cwnd ? rc->cwnd - used : 1;
		left = w->npkts - rc->tx_pkt;
		return left < room ? left : room;
	}
	return 1;
}

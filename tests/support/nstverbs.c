#include "nstverbs.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nicsim_ring.h"
#include "nstest.h"

#define WAIT_MS 5000

static void pause_us(long us)
{
	struct timespec ts = {.tv_nsec = us * 1000L};

	nanosleep(&ts, NULL);
}

int nst_cmd(struct nic_host *h, struct nic_cmd *cmd, uint32_t *key)
{
	struct nic_cpl cpl;
	int err = nic_host_cmd(h, cmd, &cpl, WAIT_MS);

	if (err)
		return err;
	if (key)
		*key = cpl.key;
	return cpl.status;
}

int nst_qp_create(struct nic_host *h, uint32_t slot, struct nst_qp *qp)
{
	return nst_qp_create_flags(h, slot, 0, qp);
}

int nst_qp_create_flags(struct nic_host *h, uint32_t slot, uint32_t flags, struct nst_qp *qp)
{
	struct nic_cmd c = {.opcode = NIC_CMD_CREATE_QP};
	size_t size;
	char *base;
	int st;

	c.u.qp.slot = slot;
	c.u.qp.flags = flags;
	memset(qp, 0, sizeof(*qp));
	st = nst_cmd(h, &c, &qp->qpn);
	if (st)
		return st;
	base =
	    (char *)nic_host_segment(h, &size) + NIC_CTX_QP_OFF + (size_t)slot * NIC_QP_SLOT_SIZE;
	qp->h = h;
	qp->slot = slot;
	qp->hdr = (struct nic_qp_hdr *)base;
	qp->sq = (struct nic_send_wqe *)(base + NIC_QP_SQ_OFF);
	qp->rq = (struct nic_recv_wqe *)(base + NIC_QP_RQ_OFF);
	qp->cq = (struct nic_cqe *)(base + NIC_QP_CQ_OFF);
	qp->cq_data = (const uint8_t *)base + NIC_QP_CQ_DATA_OFF;
	qp->flags = flags;
	return 0;
}

/* Publish, fence, and ring the doorbell if the NIC may be asleep. */
static void kick(struct nic_host *h)
{
	size_t size;
	struct nic_ctx_hdr *hdr = nic_host_segment(h, &size);
	uint64_t one = 1;

	ring_fence();
	if (ring_flag_get(&hdr->nic_sleeping) &&
	    write(nic_host_doorbell_fd(h), &one, sizeof(one)) < 0)
		return;
}

struct nic_send_wqe nst_swqe(uint64_t id, uint8_t op, void *buf, uint32_t len, uint32_t lkey,
			     uint64_t rva, uint32_t rkey)
{
	struct nic_send_wqe w = {.wr_id = id, .opcode = op, .num_sge = 1};

	w.sge[0] = (struct nic_sge){.va = (uintptr_t)buf, .len = len, .lkey = lkey};
	w.remote_va = rva;
	w.rkey = rkey;
	return w;
}

int nst_post_send(struct nst_qp *qp, const struct nic_send_wqe *wqe)
{
	if (ring_count(qp->sq_prod, ring_observe(&qp->hdr->sq.cons)) >= NIC_SQ_DEPTH)
		return -ENOSPC;
	qp->sq[qp->sq_prod & (NIC_SQ_DEPTH - 1)] = *wqe;
	ring_publish(&qp->hdr->sq.prod, ++qp->sq_prod);
	kick(qp->h);
	return 0;
}

int nst_post_recv(struct nst_qp *qp, const struct nic_recv_wqe *wqe)
{
	if (ring_count(qp->rq_prod, ring_observe(&qp->hdr->rq.cons)) >= NIC_RQ_DEPTH ||
	    ((qp->flags & NIC_QP_F_RECV_INLINE) &&
	     ring_count(qp->rq_prod, qp->rq_done) >= NIC_RQ_DEPTH))
		return -ENOSPC;
	qp->rq[qp->rq_prod & (NIC_RQ_DEPTH - 1)] = *wqe;
	ring_publish(&qp->hdr->rq.prod, ++qp->rq_prod);
	kick(qp->h);
	return 0;
}

bool nst_take_cqe(struct nst_qp *qp, struct nic_cqe *cqe)
{
	uint32_t i = qp->cq_cons & (NIC_CQ_DEPTH - 1);

	if (ring_observe(&qp->hdr->cq.prod) == qp->cq_cons)
		return false;
	*cqe = qp->cq[i];
	if ((qp->flags & NIC_QP_F_RECV_INLINE) &&
	    (cqe->opcode == NIC_WC_RECV || cqe->opcode == NIC_WC_RECV_RDMA_IMM)) {
		/* The k-th receive completion is the k-th receive posted. */
		if (cqe->status == NIC_WC_SUCCESS && (cqe->flags & NIC_WC_F_INLINE))
			nic_host_scatter(&qp->rq[qp->rq_done & (NIC_RQ_DEPTH - 1)],
					 qp->cq_data + (size_t)i * NIC_RECV_INLINE_MAX,
					 cqe->byte_len);
		qp->rq_done++;
	}
	ring_publish(&qp->hdr->cq.cons, ++qp->cq_cons);
	return true;
}

int nst_poll_cq(struct nst_qp *qp, struct nic_cqe *cqe, int timeout_ms)
{
	uint64_t deadline = nst_now_ns() + (uint64_t)timeout_ms * 1000000u;

	for (unsigned i = 0;; i++) {
		if (nst_take_cqe(qp, cqe))
			return 0;
		if (nst_now_ns() >= deadline)
			return -ETIMEDOUT;
		if (i > 1000)
			pause_us(50);
	}
}

int nst_cqe_ok(const struct nic_cqe *c)
{
	if (c->status)
		fprintf(stderr, "completion of wr %llu failed: status %u detail %u\n",
			(unsigned long long)c->wr_id, c->status, c->detail);
	return c->status ? -EIO : 0;
}

static int cq_ready(void *arg)
{
	struct nst_qp *qp = arg;

	return ring_observe(&qp->hdr->cq.prod) != qp->cq_cons;
}

int nst_sleep_cq(struct nst_qp *qp, struct nic_cqe *c, int timeout_ms)
{
	uint64_t deadline = nst_now_ns() + (uint64_t)timeout_ms * 1000000u;
	int err;

	while (!nst_take_cqe(qp, c)) {
		err = nic_host_await(qp->h, cq_ready, qp, deadline, 0);
		if (err)
			return err;
	}
	return nst_cqe_ok(c);
}

int nst_spin_cq(struct nst_qp *qp, struct nic_cqe *c, int timeout_ms)
{
	uint64_t deadline = nst_now_ns() + (uint64_t)timeout_ms * 1000000u;

	for (unsigned i = 0; !nst_take_cqe(qp, c); i++) {
		if (i % 64 == 63) {
			if (nst_now_ns() > deadline)
				return -ETIMEDOUT;
			sched_yield();
		}
	}
	return nst_cqe_ok(c);
}

int nst_next_event(struct nic_host *h, struct nic_event *ev, int timeout_ms)
{
	size_t size;
	char *seg = nic_host_segment(h, &size);
	struct nic_ctx_hdr *hdr = (struct nic_ctx_hdr *)seg;
	struct nic_event *eq = (struct nic_event *)(seg + NIC_CTX_EQ_OFF);
	uint64_t deadline = nst_now_ns() + (uint64_t)timeout_ms * 1000000u;
	uint32_t cons = ring_own(&hdr->eq.cons);

	for (;;) {
		if (ring_observe(&hdr->eq.prod) != cons) {
			*ev = eq[cons & (NIC_EQ_DEPTH - 1)];
			ring_publish(&hdr->eq.cons, cons + 1);
			return 0;
		}
		if (nst_now_ns() >= deadline)
			return -ETIMEDOUT;
		pause_us(100);
	}
}

uint32_t nst_reg(struct nic_host *h, void *buf, uint64_t len, uint32_t access)
{
	struct nic_cmd c = {.opcode = NIC_CMD_REG_MR};
	uint32_t key = 0;

	c.u.reg_mr.va = (uintptr_t)buf;
	c.u.reg_mr.len = len;
	c.u.reg_mr.access = access;
	return nst_cmd(h, &c, &key) == 0 ? key : 0;
}

uint32_t nst_window(struct nic_host *h, uint32_t mr_key, void *buf, uint64_t len, uint32_t remote,
		    uint32_t qpn)
{
	struct nic_cmd c = {.opcode = NIC_CMD_ALLOC_MW};
	uint32_t mw = 0, key = 0;

	if (nst_cmd(h, &c, &mw) != 0)
		return 0;
	c = (struct nic_cmd){.opcode = NIC_CMD_BIND_MW};
	c.u.bind_mw = (struct nic_cmd_bind_mw){.mw_key = mw,
					       .mr_key = mr_key,
					       .va = (uintptr_t)buf,
					       .len = len,
					       .access = remote,
					       .qpn = qpn};
	return nst_cmd(h, &c, &key) == 0 ? key : 0;
}

int nst_accept_one(struct nst_qp *qp, uint16_t port, int ready_fd)
{
	struct nic_cmd c = {.opcode = NIC_CMD_LISTEN};
	struct nic_event ev;
	int st;

	c.u.listen.port = port;
	c.u.listen.backlog = 1;
	st = nst_cmd(qp->h, &c, NULL);
	if (st)
		return st;
	if (ready_fd >= 0 && write(ready_fd, "r", 1) != 1)
		return -EPIPE;
	if (nst_next_event(qp->h, &ev, WAIT_MS) || ev.type != NIC_EV_CONN_REQUEST)
		return -EPROTO;
	c = (struct nic_cmd){.opcode = NIC_CMD_ACCEPT};
	c.u.conn.qpn = qp->qpn;
	c.u.conn.conn_id = ev.conn_id;
	return nst_cmd(qp->h, &c, NULL);
}

int nst_connect(struct nst_qp *qp, uint32_t addr, uint16_t port)
{
	struct nic_cmd c = {.opcode = NIC_CMD_CONNECT};
	struct nic_event ev;
	int st;

	c.u.conn.qpn = qp->qpn;
	c.u.conn.dst_addr = addr;
	c.u.conn.dst_port = port;
	st = nst_cmd(qp->h, &c, NULL);
	if (st)
		return st;
	if (nst_next_event(qp->h, &ev, WAIT_MS))
		return -ETIMEDOUT;
	return ev.type == NIC_EV_CONNECTED && ev.qpn == qp->qpn ? 0 : -ECONNREFUSED;
}

int nst_connect_pair(struct nst_qp *a, struct nst_qp *b, uint32_t b_addr, uint16_t port)
{
	struct nic_cmd c = {.opcode = NIC_CMD_LISTEN};
	struct nic_event ev;
	int st;

	c.u.listen.port = port;
	c.u.listen.backlog = 4;
	st = nst_cmd(b->h, &c, NULL);
	if (st)
		return st;
	c = (struct nic_cmd){.opcode = NIC_CMD_CONNECT};
	c.u.conn.qpn = a->qpn;
	c.u.conn.dst_addr = b_addr;
	c.u.conn.dst_port = port;
	st = nst_cmd(a->h, &c, NULL);
	if (st)
		return st;
	if (nst_next_event(b->h, &ev, WAIT_MS) || ev.type != NIC_EV_CONN_REQUEST)
		return -EPROTO;
	c = (struct nic_cmd){.opcode = NIC_CMD_ACCEPT};
	c.u.conn.qpn = b->qpn;
	c.u.conn.conn_id = ev.conn_id;
	st = nst_cmd(b->h, &c, NULL);
	if (st)
		return st;
	if (nst_next_event(b->h, &ev, WAIT_MS) || ev.type != NIC_EV_CONNECTED || ev.qpn != b->qpn)
		return -EPROTO;
	if (nst_next_event(a->h, &ev, WAIT_MS) || ev.type != NIC_EV_CONNECTED || ev.qpn != a->qpn)
		return -EPROTO;
	return 0;
}

#include "qp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nicsim_ring.h"

static uint32_t index_of(uint32_t qpn)
{
	return qpn & (QP_MAX - 1);
}

struct qp *qp_find(const struct qp_table *t, uint32_t qpn)
{
	struct qp *qp;

	if (qpn > NIC_QPN_MAX)
		return NULL;
	qp = t->by_index[index_of(qpn)];
	return qp && qp->qpn == qpn ? qp : NULL;
}

/* A free index, searching round-robin from t->next; 0 if none. */
static uint32_t free_index(struct qp_table *t)
{
	for (uint32_t n = 0; n < QP_MAX; n++) {
		uint32_t i = (t->next + n) % QP_MAX;

		if (i >= 2 && !t->by_index[i]) {
			t->next = i + 1;
			return i;
		}
	}
	return 0;
}

int qp_create(struct qp_table *t, struct nic_ctx *ctx, struct qp **slots, void *seg, uint32_t slot,
	      struct qp **out)
{
	char *base;
	struct qp *qp;
	uint32_t i;

	if (slot >= NIC_QP_SLOTS)
		return -EINVAL;
	if (slots[slot])
		return -EBUSY;
	i = free_index(t);
	if (!i)
		return -ENOSPC;
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return -ENOMEM;
	t->gen[i] = (uint16_t)((t->gen[i] + 1) & 0xfffu);
	qp->qpn = ((uint32_t)t->gen[i] << QP_INDEX_BITS) | i;
	qp->slot = slot;
	qp->ctx = ctx;
	base = (char *)seg + NIC_CTX_QP_OFF + (size_t)slot * NIC_QP_SLOT_SIZE;
	qp->hdr = (struct nic_qp_hdr *)base;
	qp->sq = (struct nic_send_wqe *)(base + NIC_QP_SQ_OFF);
	qp->rq = (struct nic_recv_wqe *)(base + NIC_QP_RQ_OFF);
	qp->cq = (struct nic_cqe *)(base + NIC_QP_CQ_OFF);
	qp->cq_data = (uint8_t(*)[NIC_RECV_INLINE_MAX])(base + NIC_QP_CQ_DATA_OFF);
	qp->state = NIC_QPS_INIT;
	/* A reused slot starts from clean rings; the host must not use it
	 * before the CREATE_QP completion, which is published after this. */
	memset(base, 0, NIC_QP_SLOT_SIZE);
	qp->hdr->qpn = qp->qpn;
	ring_flag_set(&qp->hdr->state, NIC_QPS_INIT);
	t->by_index[i] = qp;
	t->in_use++;
	slots[slot] = qp;
	*out = qp;
	return 0;
}

void qp_destroy(struct qp_table *t, struct qp **slots, struct qp *qp)
{
	uint32_t i = index_of(qp->qpn);

	if (t->by_index[i] == qp) {
		t->by_index[i] = NULL;
		t->in_use--;
	}
	if (slots[qp->slot] == qp)
		slots[qp->slot] = NULL;
	ring_flag_set(&qp->hdr->state, NIC_QPS_FREE);
	ring_flag_set(&qp->hdr->qpn, 0);
	free(qp);
}

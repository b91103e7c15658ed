/*
 * The first message of a connection (ws2san.h, WSPRecv: "The first
 * message").
 *
 * Winsock Direct's session protocol starts with a negotiation message of at
 * most 256 bytes that each side may send as soon as it is connected, and
 * the provider must keep one that arrives before the application's first
 * receive: WSPRecv cannot be posted before WSPAccept or WSPConnect returns,
 * and by then the peer may have sent.  Without a receive posted, the NIC
 * answers a SEND with RNR NAKs until one is, and the sender's WSPSend does
 * not complete meanwhile.
 *
 * So every QP's first receive request is the provider's own: PROV_HOLD_LEN
 * bytes of a buffer of its NIC attachment (one slice per QP slot, mapped
 * at the first connection), registered for local write when the QP is
 * created and posted while the QP is still INIT, before CONNECT or ACCEPT
 * can make it receive.  The NIC takes it for the connection's first
 * message, whenever that comes.  The application's first WSPRecv is never
 * posted to the NIC; it takes the internal receive's place instead:
 *
 *   arrived already (ARRIVED)  the message is copied into the receive's
 *       buffers and the receive completes before WSPRecv returns, with what
 *       the NIC's completion would have said: the byte count, or the error;
 *   not yet (POSTED)  the receive becomes rq[0], the internal receive's
 *       operation (CLAIMED), and completes, copied, when the NIC completes
 *       the internal receive.
 *
 * The application's later receives go to the NIC in order behind it, so
 * the first message goes to the first WSPRecv and message n to receive n:
 * the order of a QP's receive queue is kept.
 *
 * A completion the provider makes itself follows the NIC's rules: a
 * message longer than the receive's buffers completes it with WSAEMSGSIZE
 * and breaks the connection (the NIC's LOC_LEN_ERR), and a buffer whose
 * memory the application gave back meanwhile (R10: the registration was
 * invalidated) with WSAEFAULT (the NIC's LOC_PROT_ERR); then the QP is
 * disconnected, as after a QP error, so the peer learns.  The copy is made
 * under the NIC's lock after checking that each registration of the
 * receive is still tracked, and the cache clears `tracked` under that lock
 * too, so that no copy lands in memory an invalidation has given back; it
 * is made with process_vm_writev(), as the NIC's DMA engine makes its
 * copies, so that memory gone unseen fails the receive, not the process.
 *
 * A first message longer than PROV_HOLD_LEN does not fit the internal
 * receive: the NIC completes it with LOC_LEN_ERR and puts the QP in error,
 * as for any receive too short.  The application's first WSPRecv then fails
 * with WSAEMSGSIZE (and FD_CLOSE says WSAEMSGSIZE), and the sender's send
 * completes with WSAECONNRESET (the responder's invalid-request NAK).
 *
 * The registration is the provider's, not the application's: it is not in
 * the registration cache, is never given to the peer, holds no pins (the
 * provider never unmaps the buffer while it is registered), and goes with
 * the QP (DEREG_MR after DESTROY_QP).  `nicsim show tpt` lists it as a
 * 256-byte local-write region of the process while the socket has a QP.
 */
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "prov.h"

static uint8_t *slot_buf(const struct prov_nic *nic, const struct prov_qp *qp)
{
	return nic->hold_area + (size_t)qp->slot * PROV_HOLD_LEN;
}

int prov_hold_open(struct prov *p, struct prov_sock *sk)
{
	struct prov_nic *nic = sk->nic;
	struct prov_qp *qp = sk->qp;
	struct nic_cmd cmd = {.opcode = NIC_CMD_REG_MR};
	struct nic_recv_wqe w = {.wr_id = PROV_WR_RECV | 0u, .num_sge = 1};
	uint32_t key = 0;
	int err;

	if (!nic->hold_area) {
		void *m = mmap(NULL, (size_t)NIC_QP_SLOTS * PROV_HOLD_LEN, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (m == MAP_FAILED)
			return -ENOBUFS;
		nic->hold_area = m;
	}
	cmd.u.reg_mr.va = (uintptr_t)slot_buf(nic, qp);
	cmd.u.reg_mr.len = PROV_HOLD_LEN;
	cmd.u.reg_mr.access = NIC_ACCESS_LOCAL_WRITE;
	err = prov_nic_exec(nic, &cmd, &key);
	/* A full TPT: make room as a registration would. */
	while (err == -ENOSPC && prov_cache_evict(p, nic, PROV_EVICT_TPT))
		err = prov_nic_exec(nic, &cmd, &key);
	if (err)
		return err == -ENETDOWN ? err : -ENOBUFS;

	w.sge[0].va = cmd.u.reg_mr.va;
	w.sge[0].len = PROV_HOLD_LEN;
	w.sge[0].lkey = key;
	pthread_mutex_lock(&nic->lock);
	qp->hold.key = key;
	/* The QP is INIT: the NIC keeps the request until a message needs it. */
	err = nic_host_post_recv(nic->host, qp->slot, &w);
	if (err) {
		/* A fresh QP's empty queue refused: the NIC is broken. */
		prov_nic_fail(nic, -ENETDOWN);
		err = -ENETDOWN;
	} else {
		memset(&qp->rq[0], 0, sizeof(qp->rq[0]));
		qp->rq[0].kind = PROV_OP_HOLD;
		qp->rq[0].event = -1;
		qp->rq_post = 1;
		qp->hold.state = PROV_HOLD_POSTED;
	}
	pthread_mutex_unlock(&nic->lock);
	return err;
}

void prov_hold_close(struct prov_nic *nic, struct prov_qp *qp)
{
	struct nic_cmd cmd = {.opcode = NIC_CMD_DEREG_MR};

	if (!qp->hold.key)
		return;
	/* The QP is destroyed: nothing can land in the buffer any more.  A NIC
	 * that refuses (or is gone) dropped the entry with the context. */
	cmd.u.key.key = qp->hold.key;
	prov_nic_exec(nic, &cmd, NULL);
	pthread_mutex_lock(&nic->lock);
	qp->hold.key = 0;
	qp->hold.state = PROV_HOLD_NONE;
	pthread_mutex_unlock(&nic->lock);
}

void prov_hold_free(struct prov_nic *nic)
{
	if (nic->hold_area)
		munmap(nic->hold_area, (size_t)NIC_QP_SLOTS * PROV_HOLD_LEN);
	nic->hold_area = NULL;
}

/*
 * Copy the held message of completion c into the buffers sge of receive op:
 * 0 and the byte count, or what the NIC would have completed the receive
 * with had the message landed there (nic->lock held).
 */
static int copy_out(const struct prov_nic *nic, const struct prov_qp *qp, const struct prov_op *op,
		    const struct nic_sge *sge, uint8_t nsge, const struct nic_cqe *c,
		    uint32_t *bytes)
{
	const uint8_t *src = slot_buf(nic, qp);
	uint32_t len = c->byte_len, off = 0;
	struct iovec local, remote[NIC_MAX_SGE];
	unsigned long n = 0;

	/* An RDMA WRITE with immediate data: its data went to the write's
	 * target, and the receive only reports it, as any receive does.  (The
	 * provider neither sends immediate data nor gives it to receives.) */
	if (c->opcode == NIC_WC_RECV_RDMA_IMM) {
		*bytes = len < op->bytes ? len : op->bytes;
		return 0;
	}
	if (len > PROV_HOLD_LEN)
		return -EPROTO; /* more than the buffer holds: a NIC breaking its contract */
	if (len > op->bytes)
		return -EMSGSIZE;
	/* R10: memory given back since the receive was posted is not written. */
	for (uint32_t i = 0; i < op->nref; i++)
		if (!op->ref[i]->mr->tracked)
			return -EFAULT;
	/* As the NIC's DMA engine writes: memory the application unmapped
	 * without the monitor seeing it fails the copy (EFAULT) rather than
	 * the process. */
	for (uint8_t i = 0; i < nsge && off < len; i++) {
		remote[n].iov_base = (void *)(uintptr_t)sge[i].va;
		remote[n].iov_len = sge[i].len < len - off ? sge[i].len : len - off;
		off += (uint32_t)remote[n++].iov_len;
	}
	local.iov_base = (void *)src;
	local.iov_len = len;
	if (len && process_vm_writev(getpid(), &local, 1, remote, n, 0) != (ssize_t)len)
		return -EFAULT;
	*bytes = len;
	return 0;
}

/* Complete receive op with the held completion c (nic->lock held). */
static void deliver(struct prov_nic *nic, struct prov_qp *qp, struct prov_op *op,
		    const struct nic_sge *sge, uint8_t nsge, const struct nic_cqe *c)
{
	uint32_t bytes = 0;
	int err = prov_wc_errno(c->status);

	qp->hold.state = PROV_HOLD_NONE;
	if (!err) {
		err = copy_out(nic, qp, op, sge, nsge, c, &bytes);
		/* Refused here, where the NIC would have refused the message. */
		if (err)
			prov_qp_break(nic, qp, err);
	}
	prov_op_complete(nic, qp, op, err, bytes);
}

void prov_hold_claim(struct prov_nic *nic, struct prov_qp *qp, const struct prov_op *op,
		     const struct nic_sge *sge, uint8_t nsge)
{
	if (qp->hold.state == PROV_HOLD_ARRIVED) {
		struct prov_op now = *op;

		deliver(nic, qp, &now, sge, nsge, &qp->hold.cqe);
		return;
	}
	/* POSTED: rq[0] is the internal receive, not completed yet. */
	qp->rq[0] = *op;
	qp->rq[0].kind = PROV_OP_HOLD;
	memcpy(qp->hold.sge, sge, sizeof(sge[0]) * nsge);
	qp->hold.nsge = nsge;
	qp->hold.state = PROV_HOLD_CLAIMED;
}

void prov_hold_cqe(struct prov_nic *nic, struct prov_qp *qp, struct prov_op *op,
		   const struct nic_cqe *c)
{
	switch (qp->hold.state) {
	case PROV_HOLD_CLAIMED: deliver(nic, qp, op, qp->hold.sge, qp->hold.nsge, c); break;
	case PROV_HOLD_POSTED:
		qp->hold.cqe = *c;
		qp->hold.state = PROV_HOLD_ARRIVED;
		break;
	default: break; /* nobody waits for it any more */
	}
}

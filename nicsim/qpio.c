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
#include "fab_addr.h"
#include "nicsim_ring.h"
#include "rc_tpt.h"

static struct nic *nic_of(const struct qp *qp)
{
	return qp->nic;
}

/* The shared buffers of qp's host, for the DMA engine.  Looked up at each
 * transfer: nothing here keeps a pointer into a map between transfers, so
 * SHM_UNMAP needs only the held payloads written (qpio_rx_write_ctx). */
static struct dma_maps maps_of(const struct qp *qp)
{
	return (struct dma_maps){.map = qp->ctx->shm,
				 .n = qp->ctx->nshm,
				 .copied = &nic_of(qp)->stats.dma_shm,
				 .calls = &nic_of(qp)->stats.dma_calls,
				 .as = qp->ctx->by_group ? &qp->ctx->as : NULL};
}

/* Post a completion, with data beside it (byte_len bytes) when not NULL. */
static void post_cqe_data(struct qp *qp, const struct nic_cqe *cqe, const void *data)
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
	if (data)
		memcpy(qp->cq_data[qp->cq_prod & (NIC_CQ_DEPTH - 1)], data, cqe->byte_len);
	qp->cq[qp->cq_prod & (NIC_CQ_DEPTH - 1)] = *cqe;
	qp->cq_prod++;
	ring_publish(&qp->hdr->cq.prod, qp->cq_prod);
	qp->ctx->irq_due = true;
}

static void post_cqe(struct qp *qp, const struct nic_cqe *cqe)
{
	post_cqe_data(qp, cqe, NULL);
}

static void set_state(struct qp *qp, enum nic_qp_state state, uint16_t error)
{
	qp->state = state;
	ring_flag_set(&qp->hdr->error, error);
	ring_flag_set(&qp->hdr->state, state);
}

/* ---- Transmit: payloads read ahead in batches ------------------------------------- */

/*
 * The engine sends the packets of a message one after another, and each
 * process_vm_readv costs more than the copy of a 4 KiB payload.  So when a
 * packet's payload is not already in a frame, the DMA engine reads it and
 * the payloads of up to QPIO_AHEAD - 1 packets that follow it in the same
 * buffer, each into its own frame, in one system call -- no more than the
 * engine will send in this call (rc_xmit_run).  The frames wait,
 * payload in place, for the packets the engine sends next; a packet that
 * does not match (a retransmission from elsewhere, another message) starts
 * a new stream, and what a stream still holds when the engine's call
 * returns goes back to the pool.  The header length of the packets that
 * follow is guessed (MIDDLE: the BTH alone); a LAST that carries more moves
 * its payload up.
 */

static void ahead_drop(struct qp *qp, struct qpio_ahead *a)
{
	struct nic *nic = nic_of(qp);

	if (!a->mem)
		return;
	nic->stats.dma_ahead_unused += a->n - a->next;
	for (uint32_t i = a->next; i < a->n; i++)
		port_frame_put(nic, a->idx[i]);
	a->mem = NULL;
	a->n = a->next = 0;
}

static void ahead_drop_all(struct qp *qp)
{
	ahead_drop(qp, &qp->ahead[0]);
	ahead_drop(qp, &qp->ahead[1]);
}

/* The stream whose next frame holds len bytes at off of mem, or NULL. */
static struct qpio_ahead *ahead_find(struct qp *qp, const struct rc_mem *mem, uint64_t off,
				     uint32_t len)
{
	for (unsigned i = 0; i < 2; i++) {
		struct qpio_ahead *a = &qp->ahead[i];

		if (a->mem != mem)
			continue;
		if (a->next < a->n && a->off[a->next] == off && a->plen[a->next] == len &&
		    a->va0 == mem->seg[0].va && a->len == mem->len)
			return a;
		ahead_drop(qp, a);
	}
	return NULL;
}

/*
 * Read the payload of len bytes at off of mem (its packet's header takes
 * hdr bytes) and those of up to max - 1 packets after it into fresh
 * frames.  0, -ENOBUFS (no frame), -EFAULT (host memory refused),
 * -EHOSTUNREACH.
 */
static int ahead_read(struct qp *qp, const struct rc_mem *mem, uint64_t off, uint32_t len,
		      size_t hdr, uint32_t max, struct qpio_ahead *a)
{
	struct nic *nic = nic_of(qp);
	const uint32_t mtu = qp->rc.cfg.mtu;
	const uint16_t mid = (uint16_t)fab_pkt_hdr_len(FAB_OP_SEND_MIDDLE);
	struct iovec iov[QPIO_AHEAD];
	const struct dma_maps maps = maps_of(qp);
	uint32_t n = 1;
	int err;

	/* Only a full packet can have others after it. */
	if (len == mtu && mem->len - off > len) {
		uint64_t more = (mem->len - off - len + mtu - 1) / mtu;

		n += more < max - 1 ? (uint32_t)more : max - 1;
	}
	/* Only the packet being sent is delayed when no frame is left (counted
	 * by port_frame_get): fewer frames read ahead is no delay. */
	err = port_frame_get(nic, &a->idx[0], &a->data[0], false);
	if (err)
		return err;
	a->mem = mem;
	a->va0 = mem->seg[0].va;
	a->len = mem->len;
	a->n = a->next = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t o = off + (uint64_t)i * mtu;
		void *d;

		if (i > 0) {
			if (fab_frame_get(nic->port, &a->idx[i], &d))
				break;
			a->data[i] = d;
		}
		a->off[i] = o;
		a->plen[i] = i == 0 ? len : (uint32_t)(mem->len - o < mtu ? mem->len - o : mtu);
		a->at[i] = i == 0 ? (uint16_t)hdr : mid;
		iov[i] = (struct iovec){.iov_base = a->data[i] + a->at[i], .iov_len = a->plen[i]};
		a->n++;
	}
	err = dma_readv((pid_t)qp->ctx->pid, &maps, mem->seg, mem->nseg, off, iov, a->n);
	if (err) {
		/* Nothing of it was read: every frame goes back, none counted
		 * as read ahead and unused. */
		for (uint32_t i = 0; i < a->n; i++)
			port_frame_put(nic, a->idx[i]);
		a->mem = NULL;
		a->n = a->next = 0;
		return -EFAULT;
	}
	nic->stats.dma_frames += a->n;
	return 0;
}

/* A frame holding the payload of the packet the engine sends now. */
static struct qpio_ahead *ahead_get(struct qp *qp, const struct rc_mem *mem, uint64_t off,
				    uint32_t len, size_t hdr, int *err)
{
	struct qpio_ahead *a = ahead_find(qp, mem, off, len);
	uint32_t run;

	if (a)
		return a;
	a = !qp->ahead[0].mem   ? &qp->ahead[0]
	    : !qp->ahead[1].mem ? &qp->ahead[1]
				: &qp->ahead[qp->ahead_turn++ & 1];
	ahead_drop(qp, a);
	run = rc_xmit_run(&qp->rc, mem);
	*err = ahead_read(qp, mem, off, len, hdr, run < QPIO_AHEAD ? run : QPIO_AHEAD, a);
	/* The fault may lie in a later packet's payload: that packet fails
	 * when it is sent, not this one. */
	if (*err == -EFAULT)
		*err = ahead_read(qp, mem, off, len, hdr, 1, a);
	if (*err == -EFAULT)
		nic_of(qp)->stats.dma_faults++;
	return *err ? NULL : a;
}

/* ---- Receive: payloads written in batches -------------------------------------- */

/*
 * A payload the engine places stays in its frame, and consecutive pieces
 * of one buffer go to host memory in one process_vm_writev: when the next
 * piece does not follow, before the QP transmits or completes anything (so
 * no ACK or completion ever runs ahead of its data), before the buffer's
 * grants end, and at the end of each pass over the fabric.  A write that
 * fails marks the QP; completions posted after the mark say so, ACKs are
 * not sent, and once the engine's call returns the QP fails as it would
 * have at once (rc_dma_fault).
 */
static void rx_write(struct nic *nic)
{
	struct nic_rx_batch *b = &nic->rxb;
	struct qp *qp = b->qp;
	struct dma_maps maps;

	if (!b->n)
		return;
	maps = maps_of(qp);
	nic->stats.dma_frames += b->n;
	if (dma_writev((pid_t)qp->ctx->pid, &maps, b->mem->seg, b->mem->nseg, b->off, b->iov,
		       b->n)) {
		nic->stats.dma_faults++;
		qp->dma_fault = true;
		qp->dma_fault_responder = b->mem == &qp->rc.rmem;
		qp->dma_fault_psn = b->psn;
	}
	for (uint32_t i = 0; i < b->n; i++)
		fab_rx_done(nic->port, b->idx[i]);
	nic->pool_dry = false;
	b->n = 0;
	b->qp = NULL;
	b->mem = NULL;
}

void qpio_rx_write_ctx(struct nic *nic, const struct nic_ctx *c)
{
	if (nic->rxb.qp && nic->rxb.qp->ctx == c)
		rx_write(nic);
}

/* Write what qp has held, from inside the engine. */
static void rx_write_qp(struct qp *qp)
{
	if (nic_of(qp)->rxb.qp == qp)
		rx_write(nic_of(qp));
}

/* After an engine call: a late DMA failure fails the QP now. */
static void settle(struct qp *qp)
{
	if (!qp->dma_fault)
		return;
	qp->dma_fault = false;
	rc_dma_fault(&qp->rc, qp->dma_fault_responder, qp->dma_fault_completed, qp->dma_fault_psn);
	qp->dma_fault_completed = false;
}

void qpio_rx_flush(struct nic *nic)
{
	struct qp *qp = nic->rxb.qp;

	if (!qp)
		return;
	rx_write(nic);
	settle(qp);
}

static int op_place(void *arg, const struct rc_mem *mem, uint64_t off, const void *buf, size_t len)
{
	struct qp *qp = arg;
	struct nic *nic = nic_of(qp);
	struct nic_rx_batch *b = &nic->rxb;

	if (b->n && (b->qp != qp || b->mem != mem || b->end != off || b->n == NIC_RX_BATCH))
		rx_write(nic);
	if (qp->dma_fault) {
		/* An earlier piece failed: the engine fails the QP for this
		 * one, now, as for any failed placement. */
		qp->dma_fault = false;
		return -EFAULT;
	}
	if (!nic->rx_keepable || nic->rx_kept || (const uint8_t *)buf < nic->rx_data ||
	    (const uint8_t *)buf + len > nic->rx_data + nic->rx_len) {
		/* Not a frame this pass may keep (or not from the frame being
		 * received: a held first message): write it now. */
		const struct dma_maps maps = maps_of(qp);

		nic->stats.dma_frames++;
		if (dma_write((pid_t)qp->ctx->pid, &maps, mem->seg, mem->nseg, off, buf, len)) {
			nic->stats.dma_faults++;
			return -EFAULT;
		}
		return 0;
	}
	if (!b->n) {
		b->qp = qp;
		b->mem = mem;
		b->off = b->end = off;
		b->psn = qp->rc.epsn; /* the packet being placed */
	}
	b->idx[b->n] = nic->rx_idx;
	b->iov[b->n] = (struct iovec){.iov_base = (void *)buf, .iov_len = len};
	b->n++;
	b->end += len;
	nic->rx_kept = true;
	return 0;
}

/* ---- rc_ops --------------------------------------------------------------- */

static int op_xmit(void *arg, struct fab_pkt *pkt, const struct rc_mem *mem, uint64_t off)
{
	struct qp *qp = arg;
	struct nic *nic = nic_of(qp);
	size_t hdr = fab_pkt_hdr_len(pkt->opcode), len;
	struct qpio_ahead *a;
	uint32_t idx;
	uint8_t *frame;
	bool unit;
	int err = 0;

	rx_write_qp(qp);
	if (qp->dma_fault)
		return -EIO; /* lost: the QP fails when the engine returns */
	if (hdr == 0 || hdr + pkt->payload_len > FAB_SLOT_BYTES)
		return -EINVAL;
	if (mem && pkt->payload_len) {
		a = ahead_get(qp, mem, off, pkt->payload_len, hdr, &err);
		if (!a)
			return err;
		idx = a->idx[a->next];
		frame = a->data[a->next];
		if (a->at[a->next] != hdr)
			memmove(frame + hdr, frame + a->at[a->next], pkt->payload_len);
		a->next++;
		pkt->payload = NULL; /* read into the frame already */
	} else {
		/* No payload (an acknowledgement, a read request: it may take
		 * the frames kept for those), or an inline one that the
		 * encoder copies. */
		err = port_frame_get(nic, &idx, &frame, pkt->payload_len == 0);
		if (err)
			return err;
	}
	/* Into a burst unit when nothing can observe the packet on its way:
	 * then it goes without its ICRC (fab.h, "Burst units"). */
	unit = port_unit_join(nic, qp->peer_addr);
	err = fab_pkt_encode_opt(pkt, frame, FAB_SLOT_BYTES, &len, unit ? FAB_PKT_NO_ICRC : 0);
	if (err) {
		port_frame_put(nic, idx);
		return err;
	}
	if (unit) {
		port_unit_add(nic, idx, (uint32_t)len);
		return 0;
	}
	return port_send(nic, idx, (uint32_t)len, qp->peer_addr);
}

static void drained(void *nic, uint32_t key)
{
	ctx_drained(nic, key);
}

static void op_release(void *arg, struct rc_mem *mem)
{
	struct qp *qp = arg;

	if (nic_of(qp)->rxb.mem == mem)
		rx_write(nic_of(qp));
	for (unsigned i = 0; i < 2; i++)
		if (qp->ahead[i].mem == mem)
			ahead_drop(qp, &qp->ahead[i]);

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
		char peer[FAB_ADDR_STRLEN];

		tpt_fault_set_peer(nic_of(qp)->tpt, qp->peer_addr, qp->peer_qpn, qp->rc.rx_psn,
				   qp->rc.rx_opcode);
		nic_warn(&nic_of(qp)->log,
			 "QP %u: remote %s of %llu bytes at 0x%llx with key 0x%06x from %s QP %u "
			 "refused: %s (nicsim show faults)",
			 qp->qpn, access == NIC_ACCESS_REMOTE_READ ? "read" : "write",
			 (unsigned long long)len, (unsigned long long)va, rkey,
			 fab_addr_format(qp->peer_addr, peer, sizeof(peer)), qp->peer_qpn,
			 tpt_reason_str(*why));
		return -EACCES;
	}
	return 0;
}

static void op_complete(void *arg, const struct nic_cqe *cqe)
{
	struct qp *qp = arg;
	struct nic_cqe c = *cqe;

	rx_write_qp(qp);
	if (qp->dma_fault && c.status == NIC_WC_SUCCESS) {
		c.status = NIC_WC_LOC_PROT_ERR;
		qp->dma_fault_completed = true;
	}
	post_cqe(qp, &c);
}

static void op_complete_inline(void *arg, const struct nic_cqe *cqe, const void *data)
{
	struct qp *qp = arg;

	/* Earlier messages' batched payloads land first, as for any completion. */
	rx_write_qp(qp);
	if (qp->dma_fault) {
		struct nic_cqe c = *cqe;

		c.status = NIC_WC_LOC_PROT_ERR;
		c.flags = 0;
		c.byte_len = 0;
		qp->dma_fault_completed = true;
		post_cqe(qp, &c);
		return;
	}
	post_cqe_data(qp, cqe, data);
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

	rx_write_qp(qp);
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
    .complete_inline = op_complete_inline,
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
	cfg.timeout_ns = rc_ack_timeout_ns(qp->ack_timeout);
	cfg.retry_cnt = qp->retry_cnt;
	cfg.rnr_retry = qp->rnr_retry;
	cfg.rnr_timer = nic->opts.rnr_timer;
	cfg.no_reads = !(nic->opts.caps & NIC_CAP_RDMA_READ);
	cfg.hold_first = qp->hold_first;
	cfg.recv_inline = qp->recv_inline;
	cfg.mtu = qp->mtu ? qp->mtu : FAB_MTU;
	ops.arg = qp;
	qp->peer_addr = peer_addr;
	qp->peer_qpn = peer_qpn;
	rc_init(&qp->rc, &cfg, &ops, qp->qpn, peer_qpn, nic->opts.addr, peer_addr, sq_psn, rq_psn);
	set_state(qp, NIC_QPS_RTS, 0);
	port_peer_watch(nic, qp);
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

	port_peer_unwatch(nic, qp);
	rx_write_qp(qp);
	qp->dma_fault = false;
	ahead_drop_all(qp);
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
void qpio_account(struct nic *nic, const struct qp *qp, struct nic_counters *st)
{
	(void)nic;
	st->retransmits += qp->rc.st.retransmits;
	st->timeouts += qp->rc.st.timeouts;
	st->rnr_naks += qp->rc.st.rnr_naks_rcvd;
	st->naks_sent += qp->rc.st.naks_sent;
	st->first_msg_held += qp->rc.st.first_held;
	st->first_msg_dropped += qp->rc.st.first_dropped;
	st->duplicates += qp->rc.st.duplicates;
}

unsigned qpio_poll(struct nic *nic, struct qp *qp, uint64_t now, uint64_t *deadline)
{
	uint32_t prod, pending, taken = 0;
	uint64_t sent;
	bool held;

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
	held = qp->rc.hold == RC_HOLD_FULL;
	fab_port_hold_kicks(nic->port);
	rc_progress(&qp->rc, now);
	/* A held first message given to a receive posted since is work. */
	if (held && qp->rc.hold != RC_HOLD_FULL)
		taken++;
	ahead_drop_all(qp);
	settle(qp);
	port_flush(nic);
	fab_port_release_kicks(nic->port);
	nic_deadline_min(deadline, rc_deadline(&qp->rc));
	return taken + (unsigned)(qp->rc.st.pkts_sent - sent);
}

void qpio_rx(struct nic *nic, struct qp *qp, const struct fab_pkt *pkt, uint64_t now)
{
	/* A packet from the peer on a passive QP still sending its REP (the
	 * only QP in RTS with a CM deadline): the requester has the REP even
	 * if its RTU was lost (IBTA's "communication established"). */
	if (qp->cm_deadline)
		conn_established(nic, qp);
	/* The frames the engine sends now reach the peer's NIC together, with
	 * one notification (fab_port_hold_kicks). */
	fab_port_hold_kicks(nic->port);
	rc_recv(&qp->rc, pkt, now);
	/* Answer at once (ACKs, read responses) rather than on the next pass. */
	rc_progress(&qp->rc, now);
	ahead_drop_all(qp);
	settle(qp);
	port_flush(nic);
	fab_port_release_kicks(nic->port);
}

/*
 * Queue-pair and connection commands, and the connection manager (CM).
 *
 * Connections are set up and torn down with InfiniBand CM messages carried
 * over the fabric to QP 1 (fab_cm.h), so that a capture shows them:
 *
 *   active: CONNECT -> REQ ............. REP -> RTU, CONNECTED event
 *   passive:           REQ -> CONN_REQUEST event; ACCEPT -> REP, CONNECTED
 *                      (or REJECT -> REJ -> the active side's CONN_FAILED)
 *   either: DISCONNECT -> DREQ -> the peer's DISCONNECTED event, DREP
 *
 * The passive QP is ready to receive when it sends its REP; the active QP
 * when the REP arrives.  A lost REQ or REP is recovered by the active side
 * sending the REQ again (the passive side answers a duplicate REQ with its
 * REP again); after its CM retries the connect fails as timed out.  The
 * passive side sends its REP again too, until the RTU or a packet from the
 * peer on the QP arrives; after the CM retries the REQ asked for it closes
 * the QP (NIC_EV_DISCONNECTED, status TIMED_OUT) and sends a DREQ.  A
 * request nobody accepted is forgotten once its sender has stopped
 * repeating it (req_timers): the active side has given up by then, and the
 * listener's backlog is free again.  A REP that comes after the
 * active side gave up (or destroyed its QP) is answered with a REJ, which
 * closes the passive QP: its owner gets NIC_EV_DISCONNECTED with status
 * CONN_REFUSED rather than a connection to nobody (a lost REJ is made good
 * by the next REP).  A DREQ is sent again until its DREP arrives, as often
 * as the connection's CM retries allow, so that a lost one cannot leave the
 * peer waiting on a connection that is gone.  Ports are per NIC, like TCP
 * ports on a host.
 *
 * Timers: the connecting NIC puts its configured timers (struct
 * nic_timers) in the REQ: local ACK timeout, retry count and RNR retry
 * count for the RC engines, CM response timeout and max CM retries for the
 * CM.  The passive side runs with the REQ's values, as InfiniBand's CM
 * does, and echoes the RNR retry count in its REP.  Every CM message that
 * waits for an answer is sent again after 4.096 us * 2^(CM response
 * timeout), doubled after each unanswered send up to 16 times that
 * (rc_backoff_ns, the RC timer's rule), and given up after max CM retries
 * retransmissions.
 *
 * Every CM message is hostile input: it must match the state it claims to
 * continue (the same peer address and communication IDs), or it is counted
 * and dropped.
 */
#include "nic_priv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fab_addr.h"
#include "fab_cm.h"

#define CM_EPHEMERAL_FIRST 49152u

struct listener {
	uint16_t port;
	uint16_t backlog;
	uint16_t pending;
	struct nic_ctx *ctx;
};

struct pending_req {
	uint64_t conn_id;
	uint64_t tid;        /* the REQ's MAD transaction ID, echoed in REP and REJ */
	struct nic_ctx *ctx; /* the listener's */
	uint64_t heard;      /* when its REQ last arrived (ns) */
	uint64_t silence_ns; /* dropped when not heard again for this long */
	uint16_t local_port, peer_port;
	uint32_t peer_addr, peer_qpn, peer_psn, peer_comm_id;
	/* The REQ's timers, which the connection will run with (as in struct qp). */
	uint8_t ack_timeout, retry_cnt, rnr_retry, cm_timeout, cm_retries;
	uint32_t mtu; /* the REQ's path MTU, no larger than this NIC's path back */
};

/* A DREQ sent and not yet answered: the QP it closed may be gone. */
struct dreq_out {
	uint64_t tid, deadline;
	uint32_t peer_addr, peer_qpn, comm_id, peer_comm_id;
	uint32_t tries;
	uint8_t cm_timeout, cm_retries; /* the connection's */
};

struct conn_state {
	struct listener *lst;
	uint32_t nlst, caplst;
	struct pending_req *req;
	uint32_t nreq, capreq;
	struct qp **connecting; /* QPs waiting: active ones for a REP, passive for an RTU */
	uint32_t nconn, capconn;
	struct dreq_out *dreq; /* DREQs waiting for a DREP */
	uint32_t ndreq, capdreq;
	uint64_t next_conn_id;
	uint32_t next_comm_id;
	uint16_t next_port;
	uint32_t gsi_psn; /* PSN of the next CM packet from QP 1 */
	uint64_t next_tid;
	uint64_t rng;
};

static uint64_t now_ns(void)
{
	return fab_now_ns();
}

/*
 * How long to wait for the answer to the n-th send (from 1) of a CM message
 * of a connection whose CM response timeout code is code.
 */
static uint64_t cm_wait_ns(uint8_t code, uint32_t n)
{
	return rc_backoff_ns(fab_ib_timeout_ns(code), n ? n - 1 : 0);
}

static uint32_t rnd24(struct conn_state *cs)
{
	cs->rng ^= cs->rng >> 12;
	cs->rng ^= cs->rng << 25;
	cs->rng ^= cs->rng >> 27;
	return (uint32_t)((cs->rng * 0x2545f4914f6cdd1dull) >> 40) & FAB_MASK24;
}

/* Grow an array of elements of size sz to hold one more. */
static int grow(void **arr, uint32_t *cap, uint32_t n, size_t sz)
{
	void *p;
	uint32_t c;

	if (n < *cap)
		return 0;
	c = *cap ? 2 * *cap : 8;
	p = realloc(*arr, c * sz);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = c;
	return 0;
}

int conn_init(struct nic *nic)
{
	struct conn_state *cs = calloc(1, sizeof(*cs));
	struct timespec ts;

	if (!cs)
		return -ENOMEM;
	clock_gettime(CLOCK_REALTIME, &ts);
	cs->rng = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ nic->opts.addr ^ 0x9e3779b9u;
	cs->next_comm_id = rnd24(cs) << 8 | 1;
	cs->next_tid = (uint64_t)rnd24(cs) << 32 | 1;
	cs->next_port = CM_EPHEMERAL_FIRST;
	nic->conn = cs;
	return 0;
}

void conn_fini(struct nic *nic)
{
	struct conn_state *cs = nic->conn;

	if (!cs)
		return;
	free(cs->lst);
	free(cs->req);
	free(cs->connecting);
	free(cs->dreq);
	free(cs);
	nic->conn = NULL;
}

/* ---- Sending CM messages ---------------------------------------------------- */

struct cm_out {
	const struct fab_cm_msg *msg;
	uint32_t psn;
};

static int fill_cm(void *arg, uint8_t *frame, size_t cap)
{
	const struct cm_out *o = arg;
	size_t len;
	int err = fab_cm_frame(o->msg, o->psn, frame, cap, &len);

	return err ? err : (int)len;
}

static int cm_send(struct nic *nic, uint32_t dst, struct fab_cm_msg *msg)
{
	struct conn_state *cs = nic->conn;
	struct cm_out o = {.msg = msg, .psn = cs->gsi_psn};

	cs->gsi_psn = (cs->gsi_psn + 1) & FAB_MASK24;
	msg->src_ip = nic->opts.addr;
	msg->dst_ip = dst;
	return port_xmit(nic, dst, fill_cm, &o);
}

/* A message of type with nicsim's defaults and transaction ID tid. */
static struct fab_cm_msg cm_msg(enum fab_cm_type type, uint64_t tid)
{
	struct fab_cm_msg m;

	fab_cm_init(&m, type);
	m.tid = tid;
	return m;
}

static void event(struct nic *nic, struct nic_ctx *c, uint16_t type, uint16_t status, uint32_t qpn)
{
	struct nic_event ev = {.type = type, .status = status, .qpn = qpn};

	ctx_event(nic, c, &ev);
}

/* qp is connected: tell its host, with the peer's QP number. */
static void connected_event(struct nic *nic, struct qp *qp)
{
	struct nic_event ev = {.type = NIC_EV_CONNECTED,
			       .status = NIC_STATUS_OK,
			       .qpn = qp->qpn,
			       .peer_qpn = qp->peer_qpn};

	ctx_event(nic, qp->ctx, &ev);
}

static void send_req(struct nic *nic, struct qp *qp)
{
	struct fab_cm_msg m = cm_msg(FAB_CM_REQ, qp->cm_tid);
	int err;

	m.local_comm_id = qp->comm_id;
	m.qpn = qp->qpn;
	m.psn = qp->rq_psn; /* what this side expects: see fab_cm_msg.psn */
	m.src_port = qp->local_port;
	m.dst_port = qp->peer_port;
	m.ack_timeout = qp->ack_timeout;
	m.retry_count = qp->retry_cnt;
	m.rnr_retry_count = qp->rnr_retry;
	m.remote_cm_timeout = m.local_cm_timeout = qp->cm_timeout;
	m.max_cm_retries = qp->cm_retries;
	m.mtu = qp->mtu;
	err = cm_send(nic, qp->peer_addr, &m);

	qp->cm_tries++;
	qp->cm_deadline = now_ns() + cm_wait_ns(qp->cm_timeout, qp->cm_tries);
	if (err == -EHOSTUNREACH)
		qp->cm_deadline = 1; /* fail at the next timer pass, not inside CONNECT */
}

/* The reply to the request qp accepted (tid: the REQ's transaction ID). */
static void send_rep(struct nic *nic, struct qp *qp, uint64_t tid)
{
	struct fab_cm_msg m = cm_msg(FAB_CM_REP, tid);

	m.local_comm_id = qp->comm_id;
	m.remote_comm_id = qp->peer_comm_id;
	m.qpn = qp->qpn;
	m.psn = qp->rq_psn;
	m.src_port = qp->local_port;
	m.dst_port = qp->peer_port;
	m.rnr_retry_count = qp->rnr_retry;
	cm_send(nic, qp->peer_addr, &m);
}

static void send_dreq(struct nic *nic, struct qp *qp);

/* ---- QPs waiting on the CM -------------------------------------------------------- */

static void connecting_remove(struct conn_state *cs, struct qp *qp)
{
	for (uint32_t i = 0; i < cs->nconn; i++) {
		if (cs->connecting[i] == qp) {
			cs->connecting[i] = cs->connecting[--cs->nconn];
			return;
		}
	}
}

static void connect_failed(struct nic *nic, struct qp *qp, uint16_t status)
{
	connecting_remove(nic->conn, qp);
	qp->cm_deadline = 0;
	qp->state = NIC_QPS_INIT;
	__atomic_store_n(&qp->hdr->state, NIC_QPS_INIT, __ATOMIC_RELAXED);
	nic->stats.conn_refused++;
	event(nic, qp->ctx, NIC_EV_CONN_FAILED, status, qp->qpn);
}

/* A passive QP stops waiting for the RTU. */
static void rtu_wait_end(struct conn_state *cs, struct qp *qp)
{
	qp->cm_deadline = 0;
	connecting_remove(cs, qp);
}

void conn_established(struct nic *nic, struct qp *qp)
{
	if (qp->passive && qp->cm_deadline)
		rtu_wait_end(nic->conn, qp);
}

/* A connected QP ends without its owner asking (status says why: its peer
 * disconnected or refused, or never confirmed): flushed, and the owner told. */
static void disconnected(struct nic *nic, struct qp *qp, uint16_t status)
{
	conn_established(nic, qp); /* a passive QP sends no more REPs */
	qpio_stop(nic, qp, NIC_QPS_CLOSED, NIC_WC_WR_FLUSH_ERR);
	nic->stats.disconnects++;
	event(nic, qp->ctx, NIC_EV_DISCONNECTED, status, qp->qpn);
}

/* A passive QP whose REPs all went unanswered: its requester is not there
 * (or cannot be reached), so the QP is closed, and a DREQ tells a requester
 * that did connect but whose RTUs were all lost. */
static void rtu_timed_out(struct nic *nic, struct qp *qp)
{
	send_dreq(nic, qp);
	disconnected(nic, qp, NIC_STATUS_TIMED_OUT);
}

/*
 * Repeat the REQs whose REP is late and the REPs whose RTU is late; give up
 * on a QP whose retries are spent.  A passive QP that left RTS
 * meanwhile (DISCONNECT, the peer's DREQ or REJ, an error) waits no more.
 */
static unsigned connect_timers(struct nic *nic, uint64_t now, uint64_t *deadline)
{
	struct conn_state *cs = nic->conn;
	unsigned work = 0;

	for (uint32_t i = 0; i < cs->nconn;) {
		struct qp *qp = cs->connecting[i];

		if (qp->passive && qp->state != NIC_QPS_RTS) {
			rtu_wait_end(cs, qp);
			continue;
		}
		if (qp->cm_deadline > now) {
			nic_deadline_min(deadline, qp->cm_deadline);
			i++;
			continue;
		}
		work++;
		if (qp->passive) {
			if (qp->cm_tries > qp->cm_retries) {
				rtu_timed_out(nic, qp);
				continue;
			}
			send_rep(nic, qp, qp->cm_tid);
			qp->cm_tries++;
			qp->cm_deadline = now + cm_wait_ns(qp->cm_timeout, qp->cm_tries);
			i++;
			continue;
		}
		if (!nic->port || qp->cm_deadline == 1) {
			connect_failed(nic, qp, NIC_STATUS_UNREACHABLE);
			continue;
		}
		if (qp->cm_tries > qp->cm_retries) {
			connect_failed(nic, qp, NIC_STATUS_TIMED_OUT);
			continue;
		}
		send_req(nic, qp);
		i++;
	}
	return work;
}

/* ---- Commands --------------------------------------------------------------- */

static struct listener *find_listener(struct conn_state *cs, uint16_t port)
{
	for (uint32_t i = 0; i < cs->nlst; i++) {
		if (cs->lst[i].port == port)
			return &cs->lst[i];
	}
	return NULL;
}

static struct pending_req *find_req(struct conn_state *cs, uint64_t conn_id)
{
	for (uint32_t i = 0; i < cs->nreq; i++) {
		if (cs->req[i].conn_id == conn_id)
			return &cs->req[i];
	}
	return NULL;
}

static void drop_req(struct conn_state *cs, struct pending_req *r)
{
	struct listener *l = find_listener(cs, r->local_port);

	if (l && l->pending)
		l->pending--;
	*r = cs->req[--cs->nreq];
}

static void send_rej(struct nic *nic, uint32_t dst, uint32_t peer_comm_id, uint64_t tid,
		     uint16_t reason)
{
	struct fab_cm_msg m = cm_msg(FAB_CM_REJ, tid);

	m.remote_comm_id = peer_comm_id;
	m.reason = reason;
	cm_send(nic, dst, &m);
}

static struct qp *own_qp(struct nic *nic, struct nic_ctx *c, uint32_t qpn)
{
	struct qp *qp = qp_find(&nic->qps, qpn);

	return qp && qp->ctx == c ? qp : NULL;
}

static bool port_taken(struct nic *nic, uint16_t port)
{
	if (find_listener(nic->conn, port))
		return true;
	for (uint32_t i = 2; i < QP_MAX; i++) {
		const struct qp *qp = nic->qps.by_index[i];

		if (qp && qp->local_port == port && qp->state != NIC_QPS_INIT)
			return true;
	}
	return false;
}

static uint16_t ephemeral_port(struct nic *nic)
{
	struct conn_state *cs = nic->conn;

	for (uint32_t n = 0; n < 65536u - CM_EPHEMERAL_FIRST; n++) {
		uint16_t p = cs->next_port++;

		if (cs->next_port == 0)
			cs->next_port = CM_EPHEMERAL_FIRST;
		if (!port_taken(nic, p))
			return p;
	}
	return 0;
}

static uint16_t do_connect(struct nic *nic, struct nic_ctx *c, const struct nic_cmd_conn *cc)
{
	struct conn_state *cs = nic->conn;
	struct qp *qp = own_qp(nic, c, cc->qpn);

	if (!qp || qp->state != NIC_QPS_INIT)
		return NIC_STATUS_BAD_QP;
	if (grow((void **)&cs->connecting, &cs->capconn, cs->nconn, sizeof(*cs->connecting)))
		return NIC_STATUS_NO_RESOURCES;
	qp->local_port = cc->src_port ? cc->src_port : ephemeral_port(nic);
	if (!qp->local_port)
		return NIC_STATUS_NO_RESOURCES;
	qp->peer_addr = cc->dst_addr;
	qp->peer_port = cc->dst_port;
	qp->comm_id = cs->next_comm_id++;
	qp->cm_tid = cs->next_tid++;
	qp->rq_psn = rnd24(cs); /* the peer's first PSN; the REP says ours */
	qp->cm_tries = 0;
	qp->passive = false;
	qp->ack_timeout = nic->opts.timers.ack_timeout;
	qp->retry_cnt = nic->opts.timers.retry_cnt;
	qp->rnr_retry = nic->opts.timers.rnr_retry;
	qp->cm_timeout = nic->opts.timers.cm_timeout;
	qp->cm_retries = nic->opts.timers.cm_retries;
	qp->mtu = port_path_mtu(nic, qp->peer_addr);
	qp->state = NIC_QPS_CONNECTING;
	__atomic_store_n(&qp->hdr->state, NIC_QPS_CONNECTING, __ATOMIC_RELAXED);
	cs->connecting[cs->nconn++] = qp;
	send_req(nic, qp);
	return NIC_STATUS_OK;
}

static uint16_t do_accept(struct nic *nic, struct nic_ctx *c, const struct nic_cmd_conn *cc)
{
	struct conn_state *cs = nic->conn;
	struct pending_req *r = find_req(cs, cc->conn_id);
	struct qp *qp = own_qp(nic, c, cc->qpn);

	if (!r || r->ctx != c)
		return NIC_STATUS_BAD_CONN;
	if (!qp || qp->state != NIC_QPS_INIT)
		return NIC_STATUS_BAD_QP;
	if (grow((void **)&cs->connecting, &cs->capconn, cs->nconn, sizeof(*cs->connecting)))
		return NIC_STATUS_NO_RESOURCES;
	qp->passive = true;
	qp->local_port = r->local_port;
	qp->peer_port = r->peer_port;
	qp->comm_id = cs->next_comm_id++;
	qp->peer_comm_id = r->peer_comm_id;
	qp->sq_psn = r->peer_psn; /* as the REQ asks; the REP says the peer's */
	qp->rq_psn = rnd24(cs);
	qp->cm_tid = r->tid;
	qp->ack_timeout = r->ack_timeout;
	qp->retry_cnt = r->retry_cnt;
	qp->rnr_retry = r->rnr_retry;
	qp->cm_timeout = r->cm_timeout;
	qp->cm_retries = r->cm_retries;
	qp->mtu = r->mtu;
	qpio_start(nic, qp, r->peer_addr, r->peer_qpn, qp->sq_psn, qp->rq_psn);
	drop_req(cs, r);
	send_rep(nic, qp, qp->cm_tid);
	qp->cm_tries = 1;
	qp->cm_deadline = now_ns() + cm_wait_ns(qp->cm_timeout, 1);
	cs->connecting[cs->nconn++] = qp;
	nic->stats.conn_established++;
	connected_event(nic, qp);
	return NIC_STATUS_OK;
}

static void dreq_xmit(struct nic *nic, struct dreq_out *d)
{
	struct fab_cm_msg m = cm_msg(FAB_CM_DREQ, d->tid);

	m.local_comm_id = d->comm_id;
	m.remote_comm_id = d->peer_comm_id;
	m.qpn = d->peer_qpn;
	cm_send(nic, d->peer_addr, &m);
	d->tries++;
	d->deadline = now_ns() + cm_wait_ns(d->cm_timeout, d->tries);
}

/* Close qp's connection on the wire: a DREQ, sent again until answered. */
static void send_dreq(struct nic *nic, struct qp *qp)
{
	struct conn_state *cs = nic->conn;
	struct dreq_out d = {.tid = cs->next_tid++,
			     .peer_addr = qp->peer_addr,
			     .peer_qpn = qp->peer_qpn,
			     .comm_id = qp->comm_id,
			     .peer_comm_id = qp->peer_comm_id,
			     .cm_timeout = qp->cm_timeout,
			     .cm_retries = qp->cm_retries};

	dreq_xmit(nic, &d);
	/* Without the memory to track it, the DREQ goes out once. */
	if (!grow((void **)&cs->dreq, &cs->capdreq, cs->ndreq, sizeof(*cs->dreq)))
		cs->dreq[cs->ndreq++] = d;
}

/* Repeat the DREQs whose DREP is late; forget those whose retries are spent. */
static unsigned dreq_timers(struct nic *nic, uint64_t now, uint64_t *deadline)
{
	struct conn_state *cs = nic->conn;
	unsigned work = 0;

	for (uint32_t i = 0; i < cs->ndreq;) {
		struct dreq_out *d = &cs->dreq[i];

		if (d->deadline > now) {
			nic_deadline_min(deadline, d->deadline);
			i++;
			continue;
		}
		work++;
		if (d->tries > d->cm_retries) {
			nic->stats.dreq_unanswered++;
			*d = cs->dreq[--cs->ndreq];
			continue;
		}
		dreq_xmit(nic, d);
		i++;
	}
	return work;
}

/* Forget the pending requests whose sender has stopped repeating them. */
static unsigned req_timers(struct nic *nic, uint64_t now, uint64_t *deadline)
{
	struct conn_state *cs = nic->conn;
	unsigned work = 0;

	for (uint32_t i = 0; i < cs->nreq;) {
		struct pending_req *r = &cs->req[i];
		char addr[FAB_ADDR_STRLEN];
		uint64_t expiry = r->heard + r->silence_ns;

		if (expiry > now) {
			nic_deadline_min(deadline, expiry);
			i++;
			continue;
		}
		work++;
		nic->stats.conn_requests_expired++;
		nic_info(&nic->log,
			 "connection request from %s port %u to port %u dropped: nobody accepted "
			 "it and its sender has stopped asking",
			 fab_addr_format(r->peer_addr, addr, sizeof(addr)), r->peer_port,
			 r->local_port);
		drop_req(cs, r);
	}
	return work;
}

unsigned conn_timers(struct nic *nic, uint64_t now, uint64_t *deadline)
{
	return connect_timers(nic, now, deadline) + dreq_timers(nic, now, deadline) +
	       req_timers(nic, now, deadline);
}

static bool connected(const struct qp *qp)
{
	return qp->state == NIC_QPS_RTS || qp->state == NIC_QPS_ERROR;
}

void conn_qp_destroy(struct nic *nic, struct qp *qp)
{
	struct nic_ctx *c = qp->ctx;

	if (connected(qp)) {
		send_dreq(nic, qp);
		nic->stats.disconnects++;
	}
	connecting_remove(nic->conn, qp);
	qpio_stop(nic, qp, NIC_QPS_CLOSED, NIC_WC_WR_FLUSH_ERR);
	qpio_account(nic, qp, &nic->stats);
	qp_destroy(&nic->qps, c->qps, qp);
}

uint16_t conn_exec(void *nic_arg, void *ctx, const struct nic_cmd *cmd, uint32_t *key)
{
	struct nic *nic = nic_arg;
	struct nic_ctx *c = ctx;
	struct conn_state *cs = nic->conn;
	struct listener *l;
	struct pending_req *r;
	struct qp *qp;
	int err;

	switch (cmd->opcode) {
	case NIC_CMD_CREATE_QP:
		err = qp_create(&nic->qps, c, c->qps, c->hdr, cmd->u.qp.slot, &qp);
		if (err)
			return err == -ENOSPC || err == -ENOMEM ? NIC_STATUS_NO_RESOURCES
								: NIC_STATUS_BAD_QP;
		qp->nic = nic;
		qp->hold_first = (cmd->u.qp.flags & NIC_QP_F_HOLD_FIRST) != 0;
		qp->recv_inline = (cmd->u.qp.flags & NIC_QP_F_RECV_INLINE) != 0;
		*key = qp->qpn;
		return NIC_STATUS_OK;
	case NIC_CMD_DESTROY_QP:
		qp = own_qp(nic, c, cmd->u.qp.qpn);
		if (!qp)
			return NIC_STATUS_BAD_QP;
		conn_qp_destroy(nic, qp);
		return NIC_STATUS_OK;
	case NIC_CMD_LISTEN:
		if (port_taken(nic, cmd->u.listen.port))
			return NIC_STATUS_ADDR_IN_USE;
		if (grow((void **)&cs->lst, &cs->caplst, cs->nlst, sizeof(*cs->lst)))
			return NIC_STATUS_NO_RESOURCES;
		cs->lst[cs->nlst++] = (struct listener){
		    .port = cmd->u.listen.port, .backlog = cmd->u.listen.backlog, .ctx = c};
		return NIC_STATUS_OK;
	case NIC_CMD_UNLISTEN:
		l = find_listener(cs, cmd->u.listen.port);
		if (!l || l->ctx != c)
			return NIC_STATUS_BAD_CONN;
		for (uint32_t i = 0; i < cs->nreq;) {
			r = &cs->req[i];
			if (r->local_port != l->port) {
				i++;
				continue;
			}
			send_rej(nic, r->peer_addr, r->peer_comm_id, r->tid, FAB_CM_REJ_CONSUMER);
			drop_req(cs, r);
		}
		*l = cs->lst[--cs->nlst];
		return NIC_STATUS_OK;
	case NIC_CMD_CONNECT: return do_connect(nic, c, &cmd->u.conn);
	case NIC_CMD_ACCEPT: return do_accept(nic, c, &cmd->u.conn);
	case NIC_CMD_REJECT:
		r = find_req(cs, cmd->u.conn.conn_id);
		if (!r || r->ctx != c)
			return NIC_STATUS_BAD_CONN;
		send_rej(nic, r->peer_addr, r->peer_comm_id, r->tid, FAB_CM_REJ_CONSUMER);
		drop_req(cs, r);
		nic->stats.conn_refused++;
		return NIC_STATUS_OK;
	case NIC_CMD_DISCONNECT:
		qp = own_qp(nic, c, cmd->u.conn.qpn);
		if (!qp || !connected(qp))
			return NIC_STATUS_BAD_QP;
		send_dreq(nic, qp);
		nic->stats.disconnects++;
		qpio_stop(nic, qp, NIC_QPS_CLOSED, NIC_WC_WR_FLUSH_ERR);
		return NIC_STATUS_OK;
	default: return NIC_STATUS_BAD_OPCODE;
	}
}

void conn_peer_gone(struct nic *nic, const struct port_watch *w)
{
	for (struct nic_ctx *c = nic->ctxs; c; c = c->next) {
		for (uint32_t i = 0; i < NIC_QP_SLOTS; i++) {
			struct qp *qp = c->qps[i];

			if (!qp || qp->peer_watch != w)
				continue;
			if (connected(qp))
				disconnected(nic, qp, NIC_STATUS_UNREACHABLE);
			else
				port_peer_unwatch(nic, qp);
		}
	}
}

void conn_ctx_gone(struct nic *nic, struct nic_ctx *c)
{
	struct conn_state *cs = nic->conn;

	for (uint32_t i = 0; i < cs->nreq;) {
		struct pending_req *r = &cs->req[i];

		if (r->ctx != c) {
			i++;
			continue;
		}
		send_rej(nic, r->peer_addr, r->peer_comm_id, r->tid, FAB_CM_REJ_CONSUMER);
		drop_req(cs, r);
	}
	for (uint32_t i = 0; i < cs->nlst;) {
		if (cs->lst[i].ctx == c)
			cs->lst[i] = cs->lst[--cs->nlst];
		else
			i++;
	}
}

/* ---- Received CM messages ------------------------------------------------------ */

/* The QP a message from addr continues, by this side's communication ID. */
static struct qp *qp_by_comm(struct nic *nic, uint32_t addr, uint32_t comm_id)
{
	for (uint32_t i = 2; i < QP_MAX; i++) {
		struct qp *qp = nic->qps.by_index[i];

		if (qp && qp->comm_id == comm_id && qp->peer_addr == addr)
			return qp;
	}
	return NULL;
}

static void rx_req(struct nic *nic, const struct fab_cm_msg *m, uint32_t src)
{
	struct conn_state *cs = nic->conn;
	struct listener *l;
	struct pending_req *r;
	uint32_t path_mtu;

	/* A repeated REQ: answer again if accepted, else it is still pending. */
	for (uint32_t i = 2; i < QP_MAX; i++) {
		struct qp *qp = nic->qps.by_index[i];

		if (qp && qp->passive && qp->peer_addr == src &&
		    qp->peer_comm_id == m->local_comm_id && qp->state == NIC_QPS_RTS) {
			send_rep(nic, qp, m->tid);
			return;
		}
	}
	for (uint32_t i = 0; i < cs->nreq; i++) {
		if (cs->req[i].peer_addr == src && cs->req[i].peer_comm_id == m->local_comm_id) {
			cs->req[i].heard = now_ns(); /* still waited for */
			return;
		}
	}
	l = find_listener(cs, m->dst_port);
	if (!l) {
		send_rej(nic, src, m->local_comm_id, m->tid, FAB_CM_REJ_INVALID_SERVICE_ID);
		nic->stats.conn_refused++;
		return;
	}
	if (l->pending >= l->backlog ||
	    grow((void **)&cs->req, &cs->capreq, cs->nreq, sizeof(*cs->req))) {
		send_rej(nic, src, m->local_comm_id, m->tid, FAB_CM_REJ_NO_RESOURCES);
		nic->stats.conn_refused++;
		return;
	}
	r = &cs->req[cs->nreq++];
	*r = (struct pending_req){.conn_id = ++cs->next_conn_id,
				  .tid = m->tid,
				  .ctx = l->ctx,
				  .heard = now_ns(),
				  .local_port = l->port,
				  .peer_port = m->src_port,
				  .peer_addr = src,
				  .peer_qpn = m->qpn,
				  .peer_psn = m->psn,
				  .peer_comm_id = m->local_comm_id,
				  .ack_timeout = m->ack_timeout,
				  .retry_cnt = m->retry_count,
				  .rnr_retry = m->rnr_retry_count,
				  .cm_timeout = m->local_cm_timeout,
				  .cm_retries = m->max_cm_retries,
				  .mtu = m->mtu};
	/* No larger than this NIC's own path back (a system call: once). */
	path_mtu = port_path_mtu(nic, src);
	if (r->mtu > path_mtu)
		r->mtu = path_mtu;
	/*
	 * The requester waits at most its longest interval after its last REQ
	 * before it gives up; twice that without a REQ means it has (one lost
	 * repeat does not drop the request).  A nicsim requester sends its REQ
	 * on the schedule it asks of the receiver (the remote CM response
	 * timeout and max CM retries); the IBTA does not make a requester say
	 * how often it repeats a REQ, so for another CM this is an estimate.
	 */
	r->silence_ns =
	    2 * rc_backoff_ns(fab_ib_timeout_ns(m->remote_cm_timeout), m->max_cm_retries);
	l->pending++;
	{
		struct nic_event ev = {.type = NIC_EV_CONN_REQUEST,
				       .conn_id = r->conn_id,
				       .peer_addr = src,
				       .peer_port = r->peer_port,
				       .local_port = r->local_port};

		ctx_event(nic, l->ctx, &ev);
	}
}

static void rx_rep(struct nic *nic, const struct fab_cm_msg *m, uint32_t src)
{
	struct qp *qp = qp_by_comm(nic, src, m->remote_comm_id);
	struct fab_cm_msg rtu = cm_msg(FAB_CM_RTU, m->tid);

	if (qp && qp->passive) {
		nic->stats.cm_bad++;
		return;
	}
	if (!qp || (qp->state != NIC_QPS_CONNECTING && qp->peer_comm_id != m->local_comm_id)) {
		/* A REP for a connect given up (timed out, or its QP destroyed):
		 * the peer accepted too late and would stay connected to nobody.
		 * Refuse it, naming both IDs, so that the peer closes its QP. */
		struct fab_cm_msg rej = cm_msg(FAB_CM_REJ, m->tid);

		rej.local_comm_id = m->remote_comm_id;
		rej.remote_comm_id = m->local_comm_id;
		rej.rej_msg = FAB_CM_REJ_MSG_REP;
		rej.reason = FAB_CM_REJ_TIMEOUT;
		cm_send(nic, src, &rej);
		nic->stats.cm_bad++;
		return;
	}
	if (qp->state == NIC_QPS_CONNECTING) {
		connecting_remove(nic->conn, qp);
		qp->cm_deadline = 0;
		qp->peer_comm_id = m->local_comm_id;
		qp->sq_psn = m->psn;
		qp->rnr_retry = m->rnr_retry_count; /* as the REP asks */
		qpio_start(nic, qp, src, m->qpn, qp->sq_psn, qp->rq_psn);
		nic->stats.conn_established++;
		connected_event(nic, qp);
	} else if (qp->peer_comm_id != m->local_comm_id) {
		nic->stats.cm_bad++;
		return;
	}
	/* RTU, also for a repeated REP (our RTU was lost). */
	rtu.local_comm_id = qp->comm_id;
	rtu.remote_comm_id = qp->peer_comm_id;
	cm_send(nic, src, &rtu);
}

/* The requester has our REP: stop sending it (a repeated RTU changes nothing). */
static void rx_rtu(struct nic *nic, const struct fab_cm_msg *m, uint32_t src)
{
	struct qp *qp = qp_by_comm(nic, src, m->remote_comm_id);

	if (!qp || !qp->passive || qp->peer_comm_id != m->local_comm_id) {
		nic->stats.cm_bad++;
		return;
	}
	conn_established(nic, qp);
}

static void rx_rej(struct nic *nic, const struct fab_cm_msg *m, uint32_t src)
{
	struct qp *qp = qp_by_comm(nic, src, m->remote_comm_id);

	if (qp && qp->passive && connected(qp) && m->rej_msg == FAB_CM_REJ_MSG_REP &&
	    qp->peer_comm_id == m->local_comm_id) {
		/* Our REP reached a requester that had given up. */
		disconnected(nic, qp, NIC_STATUS_CONN_REFUSED);
		return;
	}
	if (!qp || qp->state != NIC_QPS_CONNECTING) {
		nic->stats.cm_bad++;
		return;
	}
	connect_failed(nic, qp, NIC_STATUS_CONN_REFUSED);
}

static void rx_dreq(struct nic *nic, const struct fab_cm_msg *m, uint32_t src)
{
	struct qp *qp = qp_find(&nic->qps, m->qpn);
	struct fab_cm_msg drep = cm_msg(FAB_CM_DREP, m->tid);

	if (qp && qp->peer_addr == src && qp->comm_id == m->remote_comm_id &&
	    qp->peer_comm_id == m->local_comm_id && connected(qp))
		disconnected(nic, qp, NIC_STATUS_OK);
	/* A DREP in every case: a repeated DREQ must be answered too. */
	drep.local_comm_id = m->remote_comm_id;
	drep.remote_comm_id = m->local_comm_id;
	cm_send(nic, src, &drep);
}

/* The answer to one of our DREQs: stop sending it. */
static void rx_drep(struct nic *nic, const struct fab_cm_msg *m, uint32_t src)
{
	struct conn_state *cs = nic->conn;

	for (uint32_t i = 0; i < cs->ndreq; i++) {
		struct dreq_out *d = &cs->dreq[i];

		if (d->peer_addr == src && d->tid == m->tid && d->comm_id == m->remote_comm_id &&
		    d->peer_comm_id == m->local_comm_id) {
			*d = cs->dreq[--cs->ndreq];
			return;
		}
	}
	/* Otherwise a second DREP, for a DREQ that went out twice: nothing to do. */
}

void conn_rx(struct nic *nic, const struct fab_pkt *pkt)
{
	struct fab_cm_msg m;

	enum fab_cm_err why;

	if (fab_cm_decode(pkt, &m, &why) < 0) {
		nic->stats.cm_bad++;
		nic_dbg(&nic->log, "CM message refused: %s", fab_cm_err_str(why));
		return;
	}
	nic->stats.cm_rx++;
	switch (m.type) {
	case FAB_CM_REQ: rx_req(nic, &m, pkt->src_ip); break;
	case FAB_CM_REP: rx_rep(nic, &m, pkt->src_ip); break;
	case FAB_CM_REJ: rx_rej(nic, &m, pkt->src_ip); break;
	case FAB_CM_DREQ: rx_dreq(nic, &m, pkt->src_ip); break;
	case FAB_CM_DREP: rx_drep(nic, &m, pkt->src_ip); break;
	case FAB_CM_RTU: rx_rtu(nic, &m, pkt->src_ip); break;
	default: break;
	}
}

/*
 * Management requests (nicsim_mgmt.h), served from the NIC's event loop
 * without ever blocking it.
 *
 * A reply is produced one message at a time, only when the socket can take
 * it: each message is built into the client's one buffer and sent without
 * waiting; a message the full socket refuses stays there, and the client's
 * socket is watched for EPOLLOUT until it goes.  A listing keeps its place
 * (a TPT index, a context id) between messages, so a long one costs one
 * message of memory and is read as it is sent: entries that change while it
 * is under way show as they are when their message is built.  Requests that
 * arrive while a reply is under way wait in a queue of NIC_MGMT_QUEUE; a
 * client that fills it has stopped reading its replies, and is dropped
 * (counted in mgmt_dropped, one line of log).  At most MGMT_MSGS_PER_PASS
 * messages are sent per event, so a long listing shares the loop with
 * everything else.
 */
#include "nic_priv.h"
#include "nicsim_mgmt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MGMT_MSGS_PER_PASS 16u
#define MGMT_REQS_PER_PASS 64u

enum {
	TPT_PER_MSG =
	    (NIC_MGMT_MSG_MAX - sizeof(struct nic_mgmt_hdr)) / sizeof(struct nic_mgmt_tpt_rec),
	HOSTS_PER_MSG =
	    (NIC_MGMT_MSG_MAX - sizeof(struct nic_mgmt_hdr)) / sizeof(struct nic_mgmt_host_rec),
};
_Static_assert(TPT_FAULT_LOG * sizeof(struct nic_mgmt_fault_rec) + sizeof(struct nic_mgmt_hdr) <=
		   NIC_MGMT_MSG_MAX,
	       "the fault log fits one message");

/* The TPT's records of one message, before conversion (a client's scratch). */
#define SCRATCH_SIZE                                                                            \
	(TPT_PER_MSG * sizeof(struct tpt_entry_view) > TPT_FAULT_LOG * sizeof(struct tpt_fault) \
	     ? TPT_PER_MSG * sizeof(struct tpt_entry_view)                                      \
	     : TPT_FAULT_LOG * sizeof(struct tpt_fault))

/*
 * The conversions below turn the NIC's own state into the records of the
 * protocol, one field at a time, so that either can change without the
 * other: a record keeps the layout of its ABI version whatever the NIC
 * keeps inside.
 */

/* Figures of the stats record that are looked up when asked, not counted:
 * six of the NIC's, and the fabric port's UDP counters. */
#define STATS_UDP (sizeof(struct fab_udp_stats) / sizeof(uint64_t))
#define STATS_LOOKED_UP (6u + STATS_UDP)
_Static_assert(sizeof(struct nic_stats) ==
		   sizeof(struct nic_counters) + STATS_LOOKED_UP * sizeof(uint64_t),
	       "each field of the stats record is either a counter of the same name or one of "
	       "the figures stats_rec looks up");

/*
 * The stats record: every counter of the NIC under its own name (those of
 * the live QPs' engines added in), then the figures looked up now.
 */
static void stats_rec(struct nic *nic, struct nic_stats *r)
{
	struct nic_counters c = nic->stats;

	for (uint32_t i = 2; i < QP_MAX; i++) {
		if (nic->qps.by_index[i])
			qpio_account(nic, nic->qps.by_index[i], &c);
	}
	memset(r, 0, sizeof(*r));
#define STATS_COPY(name) r->name = c.name;
	NIC_COUNTERS(STATS_COPY)
#undef STATS_COPY
	/* The STATS_LOOKED_UP figures. */
	r->tpt_refusals = tpt_refusals_total(nic->tpt);
	r->tpt_in_use = tpt_in_use(nic->tpt);
	r->tpt_capacity = tpt_capacity(nic->tpt);
	r->tpt_high_water = tpt_high_water(nic->tpt);
	r->contexts = nic->nctx;
	r->qps = nic->qps.in_use;
	if (nic->port) {
		struct fab_udp_stats u;

		if (fab_port_udp_stats(nic->port, &u) == 0) {
#define UDP_COPY(name, desc) r->udp_##name = u.name;
			FAB_UDP_STATS(UDP_COPY)
#undef UDP_COPY
		}
	}
}

static uint8_t wire_type(enum tpt_type type)
{
	switch (type) {
	case TPT_MR: return NIC_TPT_MR;
	case TPT_MW: return NIC_TPT_MW;
	case TPT_NONE: break;
	}
	return 0;
}

static uint8_t wire_state(enum tpt_state state)
{
	switch (state) {
	case TPT_FREE: return NIC_TPT_FREE;
	case TPT_VALID: return NIC_TPT_VALID;
	case TPT_REVOKED: return NIC_TPT_REVOKED;
	case TPT_INVALIDATING: return NIC_TPT_INVALIDATING;
	}
	return NIC_TPT_FREE;
}

int mgmt_start(struct nic *nic, struct nic_conn *conn)
{
	struct nic_mgmt_client *m = calloc(1, sizeof(*m));

	(void)nic;
	if (!m)
		return -ENOMEM;
	m->msg = malloc(NIC_MGMT_MSG_MAX);
	if (!m->msg) {
		free(m);
		return -ENOMEM;
	}
	m->last_active = nic_now_ns();
	conn->mgmt = m;
	return 0;
}

void mgmt_free(struct nic_mgmt_client *m)
{
	if (!m)
		return;
	free(m->scratch);
	free(m->msg);
	free(m);
}

static void tpt_rec(struct nic *nic, const struct tpt_entry_view *v, struct nic_mgmt_tpt_rec *r)
{
	const struct nic_ctx *c = ctx_find(nic, v->ctx_id);

	memset(r, 0, sizeof(*r));
	r->key = v->key;
	r->type = wire_type(v->type);
	r->state = wire_state(v->state);
	r->access = (uint8_t)v->access;
	r->va = v->va;
	r->len = v->len;
	r->ctx_id = v->ctx_id;
	r->pid = v->pid;
	memcpy(r->comm, c ? c->comm : "?", c ? sizeof(r->comm) : 2);
	r->qpn = v->qpn;
	r->mr_key = v->mr_key;
	r->reg_ns = v->reg_ns;
	r->inflight = v->inflight;
}

/* The next TPT records into recs: how many (0: the listing is done). */
static uint32_t tpt_next(struct nic *nic, struct nic_mgmt_client *m, struct nic_mgmt_tpt_rec *recs)
{
	struct tpt_entry_view *views = m->scratch;
	size_t n = tpt_list(nic->tpt, &m->cursor, views, TPT_PER_MSG);

	for (size_t i = 0; i < n; i++)
		tpt_rec(nic, &views[i], &recs[i]);
	return (uint32_t)n;
}

static void fault_rec(const struct tpt_fault *f, struct nic_mgmt_fault_rec *r)
{
	memset(r, 0, sizeof(*r));
	r->when_ns = f->when_ns;
	r->key = f->key;
	r->reason = (uint16_t)f->reason;
	r->access = (uint8_t)f->access;
	r->entry_state = wire_state(f->entry_state);
	r->va = f->va;
	r->len = f->len;
	r->ctx_id = f->ctx_id;
	r->pid = f->pid;
	r->qpn = f->qpn;
	r->entry_key = f->entry_key;
	r->entry_va = f->entry_va;
	r->entry_len = f->entry_len;
	r->entry_access = (uint8_t)f->entry_access;
	r->entry_type = wire_type(f->entry_type);
	r->entry_pid = f->entry_pid;
	r->entry_changed_ns = f->entry_changed_ns;
	r->entry_ctx_id = f->entry_ctx_id;
	r->entry_qpn = f->entry_qpn;
	r->peer_addr = f->peer_addr;
	r->peer_qpn = f->peer_qpn;
	r->peer_psn = f->peer_psn;
	r->peer_opcode = f->peer_opcode;
}

/* The fault log into recs, oldest first: how many. */
static uint32_t faults_all(struct nic *nic, struct nic_mgmt_client *m,
			   struct nic_mgmt_fault_rec *recs)
{
	struct tpt_fault *faults = m->scratch;
	size_t n = tpt_faults(nic->tpt, faults, TPT_FAULT_LOG);

	for (size_t i = 0; i < n; i++)
		fault_rec(&faults[i], &recs[i]);
	return (uint32_t)n;
}

/* The context with the smallest id above after, or NULL. */
static const struct nic_ctx *ctx_after(const struct nic *nic, uint32_t after)
{
	const struct nic_ctx *best = NULL;

	for (const struct nic_ctx *c = nic->ctxs; c; c = c->next) {
		if (c->id > after && (!best || c->id < best->id))
			best = c;
	}
	return best;
}

/*
 * The next host records into recs, in context id order from m->cursor (the
 * last id sent): how many, and *last when none is left after them.  With
 * the cache counters each host publishes, copied out of its segment.
 */
static uint32_t hosts_next(struct nic *nic, struct nic_mgmt_client *m,
			   struct nic_mgmt_host_rec *recs, bool *last)
{
	const struct nic_ctx *c = ctx_after(nic, m->cursor);
	uint32_t n = 0;

	for (; c && n < HOSTS_PER_MSG; c = ctx_after(nic, c->id), n++) {
		struct nic_mgmt_host_rec *r = &recs[n];

		memset(r, 0, sizeof(*r));
		r->ctx_id = c->id;
		r->pid = c->pid;
		memcpy(r->comm, c->comm, sizeof(r->comm));
		for (uint32_t i = 0; i < NIC_QP_SLOTS; i++)
			r->qps += c->qps[i] != NULL;
		memcpy(&r->cache, &c->hdr->host_cache, sizeof(r->cache));
		m->cursor = c->id;
	}
	*last = c == NULL;
	return n;
}

/* The detached hosts kept for their refusal (nic->detached), oldest first. */
static uint32_t detached_all(const struct nic *nic, struct nic_mgmt_host_rec *recs)
{
	for (uint32_t i = 0; i < nic->ndetached; i++)
		recs[i] = nic->detached[(nic->detached_next + i) % NIC_MGMT_DETACHED_MAX];
	return nic->ndetached;
}

/* Build the next message of the reply to the request being answered. */
static void build_next(struct nic *nic, struct nic_mgmt_client *m)
{
	struct nic_mgmt_hdr *h = (struct nic_mgmt_hdr *)m->msg;
	void *recs = m->msg + sizeof(*h);
	uint16_t status = NIC_STATUS_OK;
	uint32_t count = 0;
	size_t rec_size = 0;
	bool last = true;

	if ((m->op == NIC_MGMT_TPT || m->op == NIC_MGMT_FAULTS) && !m->scratch) {
		m->scratch = malloc(SCRATCH_SIZE);
		if (!m->scratch)
			status = NIC_STATUS_NO_RESOURCES;
	}
	if (status == NIC_STATUS_OK) {
		switch (m->op) {
		case NIC_MGMT_STATS:
			stats_rec(nic, recs);
			count = 1;
			rec_size = sizeof(struct nic_stats);
			break;
		case NIC_MGMT_TPT:
			count = tpt_next(nic, m, recs);
			rec_size = sizeof(struct nic_mgmt_tpt_rec);
			last = count == 0;
			break;
		case NIC_MGMT_FAULTS:
			count = faults_all(nic, m, recs);
			rec_size = sizeof(struct nic_mgmt_fault_rec);
			break;
		case NIC_MGMT_HOSTS:
			count = hosts_next(nic, m, recs, &last);
			rec_size = sizeof(struct nic_mgmt_host_rec);
			break;
		case NIC_MGMT_DETACHED:
			count = detached_all(nic, recs);
			rec_size = sizeof(struct nic_mgmt_host_rec);
			break;
		default: status = NIC_STATUS_BAD_OPCODE; break;
		}
	}
	if (status != NIC_STATUS_OK)
		count = 0;
	*h = (struct nic_mgmt_hdr){.magic = NIC_ABI_MAGIC,
				   .op = m->op,
				   .status = status,
				   .count = count,
				   .flags = last ? NIC_MGMT_F_LAST : 0};
	m->msg_len = sizeof(*h) + count * rec_size;
	if (last)
		m->busy = false;
}

/* Watch the socket for EPOLLOUT, or stop watching. */
static void want_out(struct nic *nic, struct nic_conn *conn, bool want)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | (want ? EPOLLOUT : 0u),
				 .data.ptr = &conn->src};

	if (conn->mgmt->out_armed == want)
		return;
	if (epoll_ctl(nic->epoll_fd, EPOLL_CTL_MOD, conn->fd, &ev) == 0)
		conn->mgmt->out_armed = want;
}

/*
 * Send what the socket takes, building messages as it goes.  0, or -EPIPE
 * when the client was dropped (it is then closed).
 */
static int pump(struct nic *nic, struct nic_conn *conn)
{
	struct nic_mgmt_client *m = conn->mgmt;

	for (unsigned i = 0; i < MGMT_MSGS_PER_PASS; i++) {
		ssize_t r;

		if (!m->msg_len) {
			if (!m->busy) {
				if (!m->qlen)
					break;
				m->op = m->queue[m->qhead];
				m->qhead = (m->qhead + 1) % NIC_MGMT_QUEUE;
				m->qlen--;
				m->cursor = 0;
				m->busy = true;
			}
			build_next(nic, m);
		}
		r = send(conn->fd, m->msg, m->msg_len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
			want_out(nic, conn, true);
			return 0;
		}
		if (r != (ssize_t)m->msg_len) {
			nic_warn(&nic->log, "management client pid %u: %s; dropped", conn->pid,
				 r < 0 ? strerror(errno) : "short send");
			nic_conn_close(nic, conn);
			return -EPIPE;
		}
		m->msg_len = 0;
		m->last_active = nic_now_ns();
	}
	/* Work left after this pass's share: EPOLLOUT brings it back. */
	want_out(nic, conn, m->msg_len || m->busy || m->qlen);
	return 0;
}

bool mgmt_req_valid(const struct nic_mgmt_req *req, size_t n)
{
	static const uint8_t zero[sizeof(req->reserved)];

	return n == sizeof(*req) && req->magic == NIC_ABI_MAGIC && !req->reserved0 &&
	       !memcmp(req->reserved, zero, sizeof(zero));
}

/* Read the requests that came, answering as the socket allows.  0, or -EPIPE (closed). */
static int read_requests(struct nic *nic, struct nic_conn *conn)
{
	struct nic_mgmt_client *m = conn->mgmt;

	for (unsigned i = 0; i < MGMT_REQS_PER_PASS; i++) {
		struct nic_mgmt_req req;
		ssize_t n;

		if (pump(nic, conn) < 0)
			return -EPIPE;
		n = recv(conn->fd, &req, sizeof(req), MSG_DONTWAIT | MSG_TRUNC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			nic_conn_close(nic, conn);
			return -EPIPE;
		}
		if (!mgmt_req_valid(&req, (size_t)n)) {
			struct nic_mgmt_hdr h = {.magic = NIC_ABI_MAGIC,
						 .status = NIC_STATUS_BAD_FIELD,
						 .flags = NIC_MGMT_F_LAST};
			char note[80];

			if (nic_ratelog(&nic->log_mgmt, note, sizeof(note)))
				nic_warn(&nic->log,
					 "management client pid %u sent a malformed request%s",
					 conn->pid, note);
			/* Best effort: the client is closed whether it reads this or not. */
			if (send(conn->fd, &h, sizeof(h), MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
				nic_dbg(&nic->log, "management client pid %u: %s", conn->pid,
					strerror(errno));
			nic_conn_close(nic, conn);
			return -EPIPE;
		}
		if (m->qlen == NIC_MGMT_QUEUE) {
			char note[80];

			nic->stats.mgmt_dropped++;
			if (nic_ratelog(&nic->log_mgmt, note, sizeof(note)))
				nic_warn(&nic->log,
					 "management client pid %u sent %u requests more than it "
					 "read replies for; dropped%s",
					 conn->pid, NIC_MGMT_QUEUE + 1, note);
			nic_conn_close(nic, conn);
			return -EPIPE;
		}
		m->queue[(m->qhead + m->qlen++) % NIC_MGMT_QUEUE] = req.op;
		m->last_active = nic_now_ns();
	}
	return pump(nic, conn);
}

void mgmt_serve(struct nic *nic, struct nic_conn *conn, uint32_t events)
{
	if (events & EPOLLERR) {
		nic_conn_close(nic, conn);
		return;
	}
	if (events & EPOLLIN) {
		read_requests(nic, conn);
		return;
	}
	/* Hung up with nothing left to read: nobody will read the replies. */
	if (events & (EPOLLHUP | EPOLLRDHUP)) {
		nic_conn_close(nic, conn);
		return;
	}
	if (events & EPOLLOUT)
		pump(nic, conn);
}

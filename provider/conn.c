/*
 * Connections: WSPListen, WSPAccept, WSPConnect, WSPEventSelect and
 * WSPEnumNetworkEvents, and the QP slot each connected socket owns.
 *
 * Socket <-> QP: a socket that connects (or is accepted) takes a free slot of
 * its NIC context's NIC_QP_SLOTS (32) and creates its QP there; the slot and
 * the QP stay the socket's until it closes, also across a failed connect (the
 * QP is back in INIT and a retry uses it again).  With every slot taken, a
 * connect or an accept fails with WSAENOBUFS.  Each QP is created with
 * NIC_QP_F_HOLD_FIRST: its NIC holds a first message of up to
 * NICSIM_FIRST_MESSAGE_MAX bytes that arrives before the first WSPRecv, at
 * no cost to the socket (no TPT entry, no receive of the provider's own);
 * and with NIC_QP_F_RECV_INLINE: a SEND of up to NIC_RECV_INLINE_MAX bytes
 * arrives beside its completion, and the driver copies it into the
 * receive's buffers, which saves the NIC a DMA write per small message.
 * Memory windows the socket exposed before it had a QP were bound to no
 * connection; they are bound to the new QP as soon as it exists, which
 * changes their keys (ws2san.h).
 *
 * State that the progress engine changes (the socket's connection state, its
 * QP's state, a listener's queue of requests) is set to its "in progress"
 * value under the NIC's lock before the command that starts the change is
 * posted: the event answering the command may be dispatched by another
 * thread before the command's own completion is seen.
 *
 * Blocking calls wait through prov_sock_wait(), without the provider lock; a
 * socket closed meanwhile makes them fail with WSAEINTR, as Winsock does for
 * a blocking call whose socket another thread closed.
 */
#include <arpa/inet.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "prov.h"

#define EPHEMERAL_FIRST 49152u
#define EPHEMERAL_TRIES 64u

static uint64_t deadline_ms(int ms)
{
	return nic_host_now_ns() + (uint64_t)ms * 1000000u;
}

/*
 * Reserve a free slot of sk's NIC and create a QP in it (prov.lock held).
 * 0, -ENOBUFS (no slot, or the NIC has no QP number left), -ENETDOWN.
 */
static int qp_create(struct prov_sock *sk)
{
	struct prov_nic *nic = sk->nic;
	struct nic_cmd cmd = {.opcode = NIC_CMD_CREATE_QP};
	struct prov_qp *qp = NULL;
	uint32_t qpn;
	int err;

	pthread_mutex_lock(&nic->lock);
	for (uint32_t i = 0; i < NIC_QP_SLOTS && !qp; i++)
		if (!nic->qp[i].sock)
			qp = &nic->qp[i];
	if (qp && !qp->sq) {
		qp->sq = calloc(NIC_SQ_DEPTH + NIC_RQ_DEPTH, sizeof(*qp->sq));
		qp->rq = qp->sq ? qp->sq + NIC_SQ_DEPTH : NULL;
	}
	if (!qp || !qp->sq) {
		pthread_mutex_unlock(&nic->lock);
		return -ENOBUFS;
	}
	qp->sock = sk; /* reserved: state FREE, not drained yet */
	qp->state = PROV_QP_FREE;
	pthread_mutex_unlock(&nic->lock);

	cmd.u.qp.slot = qp->slot;
	/* The NIC keeps a first message that comes before the first WSPRecv,
	 * which cannot be posted before WSPAccept or WSPConnect returns
	 * (ws2san.h, WSPRecv). */
	cmd.u.qp.flags = NIC_QP_F_HOLD_FIRST | NIC_QP_F_RECV_INLINE;
	err = prov_nic_exec(nic, &cmd, &qpn);
	pthread_mutex_lock(&nic->lock);
	if (err) {
		qp->sock = NULL;
		pthread_mutex_unlock(&nic->lock);
		/* NO_RESOURCES (no QP number) or BAD_QP (slot taken): no resources. */
		return err == -ENOMEM || err == -EBADSLT ? -ENOBUFS : err;
	}
	nic_host_qp_open(nic->host, qp->slot, cmd.u.qp.flags);
	qp->qpn = qpn;
	qp->state = PROV_QP_INIT;
	qp->closing = false;
	qp->peer_gone = false;
	qp->disc_want = false;
	qp->sq_post = qp->sq_done = qp->rq_post = qp->rq_done = 0;
	qp->reads = 0;
	nic->slots_used |= 1u << qp->slot;
	sk->qp = qp;
	pthread_mutex_unlock(&nic->lock);
	return 0;
}

void prov_qp_release(struct prov *p, struct prov_sock *sk)
{
	struct prov_nic *nic = sk->nic;
	struct nic_cmd cmd = {.opcode = NIC_CMD_DESTROY_QP};
	struct prov_qp *qp = sk->qp;

	(void)p;
	if (!qp)
		return;
	pthread_mutex_lock(&nic->lock);
	prov_qp_abort(nic, qp, -ECANCELED);
	qp->closing = true;
	pthread_mutex_unlock(&nic->lock);
	/* Disconnects a connected QP first; on a down NIC it simply fails. */
	cmd.u.qp.qpn = qp->qpn;
	prov_nic_exec(nic, &cmd, NULL);
	pthread_mutex_lock(&nic->lock);
	nic->slots_used &= ~(1u << qp->slot);
	qp->sock = NULL;
	qp->qpn = 0;
	qp->state = PROV_QP_FREE;
	sk->qp = NULL;
	pthread_mutex_unlock(&nic->lock);
}

/* ---- Waiting on a socket ------------------------------------------------------ */

struct sock_wait {
	struct prov_sock *sk;
	uint32_t gen;   /* the socket's generation when the wait began */
	uint32_t state; /* wait while the socket (or its QP) is in this state */
	bool on_qp;
};

/* Closed (or freed and reused) since the wait began?  Under nic->lock. */
static bool sock_gone(const struct sock_wait *w)
{
	return w->sk->slot.gen != w->gen || w->sk->closing;
}

static int state_left(void *arg)
{
	const struct sock_wait *w = arg;
	const struct prov_sock *sk = w->sk;

	if (sock_gone(w))
		return 1;
	if (w->on_qp)
		return !sk->qp || sk->qp->state != w->state;
	return sk->state != w->state;
}

static int request_pending(void *arg)
{
	const struct sock_wait *w = arg;

	return sock_gone(w) || w->sk->state != PROV_SK_LISTENING || w->sk->req_count > 0;
}

/*
 * Wait until sk (or its QP) leaves state, unbounded in slices, or until
 * deadline if not 0.  prov.lock held on entry and return; sk may be gone
 * then (-EINTR).  0, -EINTR, -ETIMEDOUT, -ENETDOWN.
 */
static int wait_state(struct prov *p, struct prov_sock *sk, uint32_t state, bool on_qp,
		      int (*pred)(void *), uint64_t deadline)
{
	struct sock_wait w = {.sk = sk, .gen = sk->slot.gen, .state = state, .on_qp = on_qp};
	int err;

	for (;;) {
		uint64_t slice = deadline_ms(PROV_WAIT_SLICE_MS);

		err = prov_sock_wait(p, sk, pred, &w,
				     deadline && deadline < slice ? deadline : slice);
		if (sk->slot.gen != w.gen || sk->closing)
			return -EINTR;
		if (err != -ETIMEDOUT || (deadline && nic_host_now_ns() >= deadline))
			return err;
	}
}

/* ---- WSPListen ---------------------------------------------------------------- */

static int sock_listen(struct prov_sock *sk, int backlog)
{
	struct prov_nic *nic = sk->nic;
	struct nic_cmd cmd = {.opcode = NIC_CMD_LISTEN};
	uint16_t port = ntohs(sk->local.sin_port);
	bool pick = port == 0;
	int err = 0;

	if (!sk->bound)
		return -EINVAL;
	if (backlog < 1)
		backlog = 1;
	if (backlog > (int)NIC_EQ_DEPTH)
		backlog = (int)NIC_EQ_DEPTH;

	pthread_mutex_lock(&nic->lock);
	if (sk->state == PROV_SK_LISTENING)
		err = 1; /* already listening: nothing to do */
	else if (sk->state != PROV_SK_IDLE || sk->qp)
		err = -EISCONN;
	else if (prov_nic_is_down(nic))
		err = -ENETDOWN;
	if (!err) {
		/* Listed first: a request may be dispatched before LISTEN's completion. */
		sk->state = PROV_SK_LISTENING;
		sk->backlog = (uint16_t)backlog;
		sk->req_head = sk->req_count = 0;
		sk->lnext = nic->listeners;
		nic->listeners = sk;
	}
	pthread_mutex_unlock(&nic->lock);
	if (err)
		return err > 0 ? 0 : err;

	/* Port 0: the first free port of the ephemeral range, from a random start. */
	for (uint32_t i = 0; i < (pick ? EPHEMERAL_TRIES : 1u); i++) {
		if (pick) {
			port = (uint16_t)(EPHEMERAL_FIRST +
					  ((uint32_t)rand() + i) % (65536u - EPHEMERAL_FIRST));
			pthread_mutex_lock(&nic->lock);
			sk->local.sin_port = htons(port);
			pthread_mutex_unlock(&nic->lock);
		}
		cmd.u.listen.port = port;
		cmd.u.listen.backlog = (uint16_t)backlog;
		err = prov_nic_exec(nic, &cmd, NULL);
		if (err != -EADDRINUSE)
			break;
	}
	if (err) {
		struct prov_sock **pp;

		pthread_mutex_lock(&nic->lock);
		for (pp = &nic->listeners; *pp && *pp != sk; pp = &(*pp)->lnext)
			;
		if (*pp)
			*pp = sk->lnext;
		sk->state = PROV_SK_IDLE;
		if (pick)
			sk->local.sin_port = 0;
		pthread_mutex_unlock(&nic->lock);
		/* The NIC's own refusals other than "port taken" mean a bad argument. */
		return err == -EADDRINUSE || err == -ENETDOWN ? err : -EINVAL;
	}
	return 0;
}

int WSPAPI WSPListen(SOCKET s, int backlog, LPINT lpErrno)
{
	struct prov *p = prov_lock();
	struct prov_sock *sk;
	int err = prov_sock_get(p, s, &sk);

	if (!err)
		err = sock_listen(sk, backlog);
	prov_unlock(p);
	return err ? prov_fail(err, lpErrno) : 0;
}

/* ---- WSPConnect ---------------------------------------------------------------- */

static int conn_cmd(struct prov_nic *nic, uint16_t opcode, uint32_t qpn, uint64_t conn_id)
{
	struct nic_cmd cmd = {.opcode = opcode};

	cmd.u.conn.qpn = qpn;
	cmd.u.conn.conn_id = conn_id;
	return prov_nic_exec(nic, &cmd, NULL);
}

/* What the NIC's answer to CONNECT or ACCEPT means for the caller. */
static int conn_cmd_errno(int err)
{
	switch (err) {
	case -ECONNREFUSED:
	case -EHOSTUNREACH:
	case -ETIMEDOUT:
	case -EADDRINUSE:
	case -ENETDOWN:
	case -ENOBUFS: return err;
	case -ENOENT: return -ECONNRESET; /* BAD_CONN: the request is gone */
	case -ENOMEM: return -ENOBUFS;
	default: return -ETIMEDOUT; /* unknown cases: WSAETIMEDOUT */
	}
}

static int sock_connect(struct prov *p, struct prov_sock *sk, const struct sockaddr_in *to)
{
	struct sockaddr_in any = {.sin_family = AF_INET};
	struct nic_cmd cmd = {.opcode = NIC_CMD_CONNECT};
	struct prov_nic *nic;
	struct prov_qp *qp;
	int err = 0;

	if (to->sin_family != AF_INET)
		return -EAFNOSUPPORT;
	if (to->sin_addr.s_addr == htonl(INADDR_ANY) || to->sin_port == 0)
		return -EADDRNOTAVAIL;
	/* Winsock binds an unbound socket implicitly: here to the lowest NIC. */
	if (!sk->bound) {
		err = prov_sock_bind(p, sk, &any);
		if (err)
			return err;
	}
	nic = sk->nic;
	pthread_mutex_lock(&nic->lock);
	if (sk->state == PROV_SK_LISTENING)
		err = -EINVAL;
	else if (sk->state == PROV_SK_CONNECTING)
		err = -EALREADY;
	else if (sk->state != PROV_SK_IDLE)
		err = -EISCONN;
	else if (prov_nic_is_down(nic))
		err = -ENETDOWN;
	qp = sk->qp;
	pthread_mutex_unlock(&nic->lock);
	if (err)
		return err;
	/* A QP that went to error while connecting cannot be used again. */
	if (qp && qp->state != PROV_QP_INIT)
		prov_qp_release(p, sk);
	if (!sk->qp) {
		err = qp_create(sk);
		if (err)
			return err;
	}
	qp = sk->qp;

	pthread_mutex_lock(&nic->lock);
	qp->state = PROV_QP_CONNECTING;
	sk->state = PROV_SK_CONNECTING;
	sk->err = 0;
	sk->peer = *to;
	memset(sk->peer.sin_zero, 0, sizeof(sk->peer.sin_zero));
	pthread_mutex_unlock(&nic->lock);
	cmd.u.conn.qpn = qp->qpn;
	cmd.u.conn.dst_addr = to->sin_addr.s_addr;
	cmd.u.conn.dst_port = ntohs(to->sin_port);
	cmd.u.conn.src_port = ntohs(sk->local.sin_port);
	err = prov_nic_exec(nic, &cmd, NULL);
	if (err) {
		pthread_mutex_lock(&nic->lock);
		if (qp->state == PROV_QP_CONNECTING) {
			qp->state = PROV_QP_INIT;
			sk->state = PROV_SK_IDLE;
		}
		pthread_mutex_unlock(&nic->lock);
		return conn_cmd_errno(err);
	}
	if (sk->nonblocking)
		return -EWOULDBLOCK;

	err = wait_state(p, sk, PROV_SK_CONNECTING, false, state_left,
			 deadline_ms(PROV_CONNECT_TIMEOUT_MS));
	if (err == -EINTR)
		return err;
	if (err == -ETIMEDOUT) {
		/* The NIC never answered: give the QP up rather than let it connect late. */
		prov_qp_release(p, sk);
		pthread_mutex_lock(&nic->lock);
		sk->state = PROV_SK_IDLE;
		pthread_mutex_unlock(&nic->lock);
		return -ETIMEDOUT;
	}
	pthread_mutex_lock(&nic->lock);
	if (sk->state == PROV_SK_CONNECTED)
		err = 0;
	else
		err = sk->err ? sk->err : -ENETDOWN;
	pthread_mutex_unlock(&nic->lock);
	return err;
}

int WSPAPI WSPConnect(SOCKET s, const struct sockaddr *name, int namelen, LPWSABUF lpCallerData,
		      LPWSABUF lpCalleeData, LPQOS lpSQOS, LPQOS lpGQOS, LPINT lpErrno)
{
	struct prov *p = prov_lock();
	struct prov_sock *sk;
	struct sockaddr_in to;
	int err = prov_sock_get(p, s, &sk);

	/* Connect data and QoS: not supported by the transport, ignored (ws2san.h). */
	(void)lpCallerData;
	(void)lpSQOS;
	(void)lpGQOS;
	if (!err && (!name || namelen < (int)sizeof(struct sockaddr_in)))
		err = -EFAULT;
	if (!err) {
		memcpy(&to, name, sizeof(to));
		err = sock_connect(p, sk, &to);
	}
	if (!err && lpCalleeData)
		lpCalleeData->len = 0;
	prov_unlock(p);
	return err ? prov_fail(err, lpErrno) : 0;
}

/* ---- WSPAccept ------------------------------------------------------------------ */

/* Take the oldest request of listener sk (nic->lock held); false if none. */
static bool req_take(struct prov_sock *sk, struct prov_req *out)
{
	if (!sk->req_count)
		return false;
	*out = sk->reqs[sk->req_head];
	sk->req_head = (sk->req_head + 1) % NIC_EQ_DEPTH;
	sk->req_count--;
	return true;
}

/* Put a deferred request back at the head (nic->lock held). */
static void req_untake(struct prov_sock *sk, const struct prov_req *r)
{
	sk->req_head = (sk->req_head + NIC_EQ_DEPTH - 1) % NIC_EQ_DEPTH;
	sk->reqs[sk->req_head] = *r;
	sk->req_count++;
}

/* Wait for a request on listener sk and take it.  prov.lock held. */
static int accept_take(struct prov *p, struct prov_sock *sk, struct prov_req *r)
{
	struct prov_nic *nic = sk->nic;
	int err;

	for (;;) {
		pthread_mutex_lock(&nic->lock);
		prov_poll(nic);
		if (sk->state != PROV_SK_LISTENING)
			err = -EINVAL;
		else if (req_take(sk, r))
			err = 0;
		else if (prov_nic_is_down(nic))
			err = -ENETDOWN;
		else
			err = sk->nonblocking ? -EWOULDBLOCK : 1; /* 1: wait for one */
		pthread_mutex_unlock(&nic->lock);
		if (err != 1)
			return err;
		err = wait_state(p, sk, PROV_SK_LISTENING, false, request_pending, 0);
		if (err && err != -ENETDOWN)
			return err;
	}
}

/* Ask the application's condition function; prov.lock dropped meanwhile. */
static int accept_condition(struct prov *p, struct prov_sock *sk, const struct prov_req *r,
			    LPCONDITIONPROC cond, DWORD_PTR data, struct prov **pp)
{
	struct sockaddr_in caller = {.sin_family = AF_INET}, callee = sk->local;
	WSABUF caller_id = {.len = sizeof(caller), .buf = (char *)&caller};
	WSABUF callee_id = {.len = sizeof(callee), .buf = (char *)&callee};
	uint32_t gen = sk->slot.gen;
	GROUP g = 0;
	int verdict;

	caller.sin_addr.s_addr = r->peer_addr;
	caller.sin_port = htons(r->peer_port);
	/* The callback may call the provider: it runs without the lock. */
	p->waiters++;
	prov_unlock(p);
	verdict = cond(&caller_id, NULL, NULL, NULL, &callee_id, NULL, &g, data);
	p = prov_lock();
	p->waiters--;
	*pp = p;
	if (sk->slot.gen != gen || sk->closing)
		return -EINTR;
	return verdict;
}

/* A new socket for an accepted connection, bound like the listener. */
static struct prov_sock *accepted_socket(struct prov *p, struct prov_sock *lsk)
{
	struct prov_sock *ns = prov_slot_alloc(&p->socks);
	struct prov_nic *nic = lsk->nic;

	if (!ns)
		return NULL;
	ns->rdma_threshold = lsk->rdma_threshold;
	ns->bound = true;
	ns->local = lsk->local;
	ns->nic = nic;
	nic->users++;
	pthread_mutex_lock(&nic->lock);
	/* Winsock: the accepted socket has the listener's event selection. */
	ns->nonblocking = lsk->nonblocking;
	ns->event = lsk->event;
	ns->ev_mask = lsk->ev_mask;
	prov_sock_ev_update(nic, ns);
	pthread_mutex_unlock(&nic->lock);
	return ns;
}

static int sock_accept(struct prov *p, struct prov_sock *sk, struct sockaddr_in *peer,
		       LPCONDITIONPROC cond, DWORD_PTR data, struct prov_sock **out)
{
	struct prov_nic *nic = sk->nic;
	struct prov_sock *ns;
	struct prov_req r;
	int err;

	if (!nic)
		return -EINVAL;
	err = accept_take(p, sk, &r);
	if (err)
		return err;
	if (cond) {
		int verdict = accept_condition(p, sk, &r, cond, data, &p);

		if (verdict == -EINTR)
			return -EINTR; /* the listener closed: UNLISTEN rejected it */
		if (verdict == CF_DEFER) {
			pthread_mutex_lock(&nic->lock);
			req_untake(sk, &r);
			pthread_mutex_unlock(&nic->lock);
			return -PROV_ETRYAGAIN;
		}
		if (verdict != CF_ACCEPT) {
			conn_cmd(nic, NIC_CMD_REJECT, 0, r.conn_id);
			return verdict == CF_REJECT ? -ECONNREFUSED : -EINVAL;
		}
	}

	ns = accepted_socket(p, sk);
	if (!ns) {
		conn_cmd(nic, NIC_CMD_REJECT, 0, r.conn_id);
		return -ENOBUFS;
	}
	err = qp_create(ns);
	if (err) {
		conn_cmd(nic, NIC_CMD_REJECT, 0, r.conn_id);
		goto fail;
	}
	pthread_mutex_lock(&nic->lock);
	ns->qp->state = PROV_QP_ACCEPTING;
	ns->state = PROV_SK_CONNECTING;
	ns->peer.sin_family = AF_INET;
	ns->peer.sin_addr.s_addr = r.peer_addr;
	ns->peer.sin_port = htons(r.peer_port);
	pthread_mutex_unlock(&nic->lock);
	err = conn_cmd(nic, NIC_CMD_ACCEPT, ns->qp->qpn, r.conn_id);
	if (err) {
		err = conn_cmd_errno(err);
		goto fail;
	}
	/* Bounded even on a non-blocking socket: the NIC answers at once. */
	err = wait_state(p, ns, PROV_QP_ACCEPTING, true, state_left,
			 deadline_ms(PROV_ACCEPT_TIMEOUT_MS));
	if (err == -EINTR)
		return -EINTR; /* closed by WSPCleanup meanwhile */
	pthread_mutex_lock(&nic->lock);
	if (!err && ns->state != PROV_SK_CONNECTED)
		err = ns->err ? ns->err : -ECONNRESET;
	/* More requests pending: FD_ACCEPT again, as Winsock re-enables it. */
	if (!sk->closing && sk->req_count)
		prov_sock_notify(nic, sk, FD_ACCEPT_BIT, 0);
	pthread_mutex_unlock(&nic->lock);
	if (err) {
		/* The peer gave up, or the NIC is gone: this connection is lost. */
		if (err != -ENETDOWN)
			err = -ECONNRESET;
		goto fail;
	}
	*peer = ns->peer;
	*out = ns;
	return 0;

fail:
	prov_sock_close(p, ns);
	return err;
}

SOCKET WSPAPI WSPAccept(SOCKET s, struct sockaddr *addr, LPINT addrlen,
			LPCONDITIONPROC lpfnCondition, DWORD_PTR dwCallbackData, LPINT lpErrno)
{
	struct prov *p = prov_lock();
	struct prov_sock *sk, *ns = NULL;
	struct sockaddr_in peer;
	SOCKET ret = INVALID_SOCKET;
	int err = prov_sock_get(p, s, &sk);

	if (!err && addr && (!addrlen || *addrlen < (int)sizeof(struct sockaddr_in)))
		err = -EFAULT;
	if (!err)
		err = sock_accept(p, sk, &peer, lpfnCondition, dwCallbackData, &ns);
	if (!err) {
		ret = (SOCKET)prov_slot_handle(&p->socks, ns);
		if (addr) {
			memcpy(addr, &peer, sizeof(peer));
			*addrlen = (int)sizeof(peer);
		}
	}
	prov_unlock(p);
	if (err)
		prov_fail(err, lpErrno);
	return ret;
}

/* ---- WSPEventSelect, WSPEnumNetworkEvents ---------------------------------------- */

/*
 * Is ev an eventfd?  The provider writes 8 bytes to it whenever an event is
 * recorded: anything else (a file, a pipe) would be corrupted.  Where /proc
 * cannot say, the application is trusted.
 */
static bool is_eventfd(WSAEVENT ev)
{
	char path[64], target[64];
	ssize_t n;

	if (ev <= 0 || ev > INT_MAX)
		return false;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", (int)ev);
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return errno != ENOENT && errno != EBADF;
	target[n] = '\0';
	return strcmp(target, "anon_inode:[eventfd]") == 0;
}

int WSPAPI WSPEventSelect(SOCKET s, WSAEVENT hEventObject, long lNetworkEvents, LPINT lpErrno)
{
	struct prov *p = prov_lock();
	struct prov_nic *nic = NULL;
	struct prov_sock *sk;
	int err = prov_sock_get(p, s, &sk);

	if (!err && (lNetworkEvents & ~(long)FD_ALL_EVENTS))
		err = -EINVAL;
	else if (!err && lNetworkEvents && !is_eventfd(hEventObject))
		err = -EINVAL;
	if (err) {
		prov_unlock(p);
		return prov_fail(err, lpErrno);
	}
	nic = sk->nic;
	if (nic)
		pthread_mutex_lock(&nic->lock);
	/* Winsock: a new selection replaces the old and clears the record. */
	sk->event = lNetworkEvents ? hEventObject : WSA_INVALID_EVENT;
	sk->ev_mask = lNetworkEvents;
	sk->ev_seen = 0;
	memset(sk->ev_err, 0, sizeof(sk->ev_err));
	sk->nonblocking = true;
	if (nic) {
		prov_sock_ev_update(nic, sk);
		/* A condition that holds already is reported at once. */
		if (sk->state == PROV_SK_LISTENING && sk->req_count)
			prov_sock_notify(nic, sk, FD_ACCEPT_BIT, 0);
		pthread_mutex_unlock(&nic->lock);
	}
	prov_unlock(p);
	return 0;
}

/* Reset an event object: drain the eventfd without blocking. */
static void reset_event(WSAEVENT ev)
{
	struct pollfd pfd = {.fd = (int)ev, .events = POLLIN};
	uint64_t v;

	if (ev > 0 && poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN)) {
		ssize_t r = read((int)ev, &v, sizeof(v));

		(void)r;
	}
}

int WSPAPI WSPEnumNetworkEvents(SOCKET s, WSAEVENT hEventObject, LPWSANETWORKEVENTS lpNetworkEvents,
				LPINT lpErrno)
{
	struct prov *p = prov_lock();
	struct prov_nic *nic;
	struct prov_sock *sk;
	int err = prov_sock_get(p, s, &sk);

	if (!err && !lpNetworkEvents)
		err = -EFAULT;
	if (err) {
		prov_unlock(p);
		return prov_fail(err, lpErrno);
	}
	/* Reset first, then read: an event recorded after the reset signals again. */
	reset_event(hEventObject);
	nic = sk->nic;
	if (nic) {
		pthread_mutex_lock(&nic->lock);
		prov_poll(nic);
	}
	lpNetworkEvents->lNetworkEvents = sk->ev_seen;
	memcpy(lpNetworkEvents->iErrorCode, sk->ev_err, sizeof(sk->ev_err));
	sk->ev_seen = 0;
	memset(sk->ev_err, 0, sizeof(sk->ev_err));
	if (nic)
		pthread_mutex_unlock(&nic->lock);
	prov_unlock(p);
	return 0;
}

/*
 * The progress engine of a NIC context: one per attached NIC, run under the
 * context's mutex (nic->lock) by whichever thread waits or polls.
 *
 * A pass drains the event queue, the completion of the command in flight and
 * the completion queue of every QP of the context, each bounded by its ring
 * depth so that a NIC producing without pause cannot hold a thread forever,
 * and dispatches what it took:
 *   - a completion finishes the overlapped operation of its work request
 *     (found by wr_id: the queue and the request's index; completions come
 *     in request order per queue, anything else is a NIC breaking the ABI);
 *   - CONN_REQUEST queues the request on the listening socket of its port
 *     (FD_ACCEPT); CONNECTED, CONN_FAILED, DISCONNECTED and QP_ERROR move
 *     the socket owning the QP along (FD_CONNECT, FD_CLOSE) and wake whoever
 *     waits for it.  A QP in error that the peer did not close is disconnected
 *     (NIC_CMD_DISCONNECT: the NIC sends the peer a DREQ), so that the peer
 *     resets its socket rather than wait on a connection that is gone.  The
 *     command is the context's own (nic->bg), posted when no other is in
 *     flight and completed by whichever thread runs progress; a command of
 *     the provider lock's holder waits for it first (one command in flight).
 *
 * Waiting (prov_nic_wait): one thread per context at a time sleeps on the
 * interrupt, through the driver's nic_host_await() (spin, then the Dekker
 * handshake, then poll on the interrupt and the attach socket); every other
 * waiter sleeps on nic->cond.  The sleeper broadcasts the condition variable
 * each time it wakes, and a thread whose progress pass dispatched anything
 * while another thread sleeps wakes that sleeper (wake_seq, seen while it
 * spins, and a write to the interrupt eventfd, seen while it sleeps), since
 * what it dispatched may be what the sleeper waits for.  Every sleep is
 * bounded by the waiter's deadline, and the sleeper notices the NIC's death
 * at once through the socket's hangup.
 *
 * The event thread: event objects (an overlapped operation's hEvent, a
 * WSPEventSelect event) are eventfds an application may wait on with poll()
 * without calling the provider, so something has to run progress for them.
 * A thread per context, started the first time one is used or a connection
 * is established, runs progress while operations with an event are in
 * flight, sockets have selected connection events, or a dead connection
 * still has operations the NIC has not flushed back yet.  It never spins, so
 * it costs nothing to a thread that waits in the provider itself: whichever
 * of them sleeps on the interrupt wakes the other through the broadcast.
 *
 * Otherwise it watches: once a connection was established, it sleeps in
 * poll() on the attach socket, where the NIC sends a notice whenever a
 * connection ends (nic_host_notify_fd), and on its own eventfd (ev_kick).
 * So a connection that dies (the peer's process gone, a NIC error, the QP in
 * error) completes the operations pending on it at once, flushed, with no
 * call of the application's to carry it: one that waits on an event, polls
 * the WSAOVERLAPPED or does something else entirely sees them end; and a NIC
 * that dies is noticed too (the socket hangs up).  The notices are rare, so
 * the data path never wakes the watcher; without a connection it waits on
 * nic->cond as before.
 */
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "driver.h"
#include "prov.h"

/* wr_id of a receive: bit 63 set; the low 32 bits are the request's index. */
#define WR_ID_RECV (1ull << 63)
#define EV_CONN_BITS (FD_ACCEPT | FD_CONNECT | FD_CLOSE)

static void signal_event(int fd)
{
	uint64_t one = 1;
	ssize_t r;

	/* The application owns the descriptor: a failure is its problem. */
	if (fd > 0) {
		r = write(fd, &one, sizeof(one));
		(void)r;
	}
}

/* Wake the event thread where it watches the socket (nic->lock held). */
static void ev_kick(struct prov_nic *nic)
{
	if (nic->ev_kick >= 0)
		signal_event(nic->ev_kick);
}

static void ev_watch_start(struct prov_nic *nic);

void prov_nic_wake(struct prov_nic *nic)
{
	pthread_cond_broadcast(&nic->cond);
	if (nic->sleeping) {
		__atomic_add_fetch(&nic->wake_seq, 1, __ATOMIC_RELEASE);
		nic_host_kick(nic->host);
	}
}

void prov_sock_notify(struct prov_nic *nic, struct prov_sock *sk, int bit, int err)
{
	long m = 1L << bit;

	(void)nic;
	if (!(sk->ev_mask & m) || sk->closing)
		return;
	sk->ev_seen |= m;
	sk->ev_err[bit] = prov_wsa_error(err);
	signal_event((int)sk->event);
}

void prov_op_complete(struct prov_nic *nic, struct prov_qp *qp, struct prov_op *op, int err,
		      uint32_t bytes)
{
	LPWSAOVERLAPPED ov = op->ov;

	for (uint32_t i = 0; i < op->nref; i++)
		__atomic_fetch_sub(&op->ref[i]->inflight, 1, __ATOMIC_RELEASE);
	op->nref = 0;
	if (op->kind == PROV_OP_READ)
		qp->reads--;
	op->ov = NULL;
	/* The bookkeeping fields first, Internal last: a reader that sees
	 * Internal done (acquire) sees the rest. */
	ov->InternalHigh = err ? 0 : bytes;
	ov->Offset = 0;
	ov->OffsetHigh = (DWORD)prov_wsa_error(err);
	__atomic_store_n(&ov->Internal, (ULONG_PTR)0, __ATOMIC_RELEASE);
	if (op->event >= 0) {
		signal_event(op->event);
		nic->ev_ops--;
	}
}

void prov_qp_abort(struct prov_nic *nic, struct prov_qp *qp, int err)
{
	for (; qp->sq_done != qp->sq_post; qp->sq_done++) {
		struct prov_op *op = &qp->sq[qp->sq_done & (NIC_SQ_DEPTH - 1)];

		if (op->ov)
			prov_op_complete(nic, qp, op, err, 0);
	}
	for (; qp->rq_done != qp->rq_post; qp->rq_done++) {
		struct prov_op *op = &qp->rq[qp->rq_done & (NIC_RQ_DEPTH - 1)];

		if (op->ov)
			prov_op_complete(nic, qp, op, err, 0);
	}
}

/*
 * The QP will carry no more data: its socket fails later posts with err.  A
 * socket still connecting learns that its connect failed.
 */
static void qp_dead(struct prov_nic *nic, struct prov_qp *qp, int err, int close_err)
{
	struct prov_sock *sk = qp->sock;
	uint32_t was = qp->state;

	qp->state = PROV_QP_DEAD;
	/* What is still posted on it comes back flushed: see that it is taken. */
	ev_kick(nic);
	if (!sk)
		return;
	if (was == PROV_QP_CONNECTING || was == PROV_QP_ACCEPTING) {
		sk->state = PROV_SK_IDLE;
		sk->err = err;
		if (was == PROV_QP_CONNECTING)
			prov_sock_notify(nic, sk, FD_CONNECT_BIT, err);
	} else if (sk->state == PROV_SK_CONNECTED) {
		sk->state = PROV_SK_DEAD;
		sk->err = err;
		prov_sock_notify(nic, sk, FD_CLOSE_BIT, close_err);
	}
}

void prov_nic_bg_next(struct prov_nic *nic)
{
	if (nic->cmd || prov_nic_is_down(nic))
		return;
	for (uint32_t m = nic->slots_used; m; m &= m - 1) {
		struct prov_qp *qp = &nic->qp[__builtin_ctz(m)];

		if (!qp->disc_want)
			continue;
		qp->disc_want = false;
		/* A closing socket's DESTROY_QP disconnects it anyway. */
		if (qp->closing || qp->peer_gone)
			continue;
		memset(&nic->bg, 0, sizeof(nic->bg));
		nic->bg.cmd.opcode = NIC_CMD_DISCONNECT;
		nic->bg.cmd.u.conn.qpn = qp->qpn;
		nic->bg.err = -EAGAIN;
		if (nic_host_post(nic->host, &nic->bg.cmd)) {
			/* As in prov_nic_post: a full ring means the NIC is lost. */
			prov_nic_fail(nic, -ENETDOWN);
			return;
		}
		nic->cmd = &nic->bg;
		/* The event thread takes the completion if nobody else does. */
		ev_kick(nic);
		return;
	}
}

static struct prov_qp *qp_by_qpn(struct prov_nic *nic, uint32_t qpn)
{
	if (qpn == NIC_QPN_NONE)
		return NULL;
	for (uint32_t m = nic->slots_used; m; m &= m - 1) {
		struct prov_qp *qp = &nic->qp[__builtin_ctz(m)];

		if (qp->qpn == qpn && !qp->closing)
			return qp;
	}
	return NULL;
}

static void conn_request(struct prov_nic *nic, const struct nic_event *ev)
{
	struct prov_sock *sk;
	struct prov_req *r;

	for (sk = nic->listeners; sk; sk = sk->lnext)
		if (ntohs(sk->local.sin_port) == ev->local_port)
			break;
	/*
	 * No listener: it closed, and its UNLISTEN made the NIC reject what was
	 * pending.  A full queue cannot happen: the NIC keeps at most backlog
	 * requests pending.  Either way there is nobody to give the request to.
	 */
	if (!sk || sk->closing || sk->req_count >= NIC_EQ_DEPTH)
		return;
	r = &sk->reqs[(sk->req_head + sk->req_count++) % NIC_EQ_DEPTH];
	r->conn_id = ev->conn_id;
	r->peer_addr = ev->peer_addr;
	r->peer_port = ev->peer_port;
	r->local_port = ev->local_port;
	prov_sock_notify(nic, sk, FD_ACCEPT_BIT, 0);
}

static void dispatch_event(struct prov_nic *nic, const struct nic_event *ev)
{
	struct prov_qp *qp;
	int err;

	if (ev->type == NIC_EV_CONN_REQUEST) {
		conn_request(nic, ev);
		return;
	}
	qp = qp_by_qpn(nic, ev->qpn);
	if (!qp || !qp->sock)
		return; /* a QP destroyed meanwhile */
	switch (ev->type) {
	case NIC_EV_CONNECTED:
		if (qp->state == PROV_QP_CONNECTING || qp->state == PROV_QP_ACCEPTING) {
			bool active = qp->state == PROV_QP_CONNECTING;

			qp->state = PROV_QP_CONNECTED;
			qp->peer_qpn = ev->peer_qpn;
			qp->sock->state = PROV_SK_CONNECTED;
			qp->sock->err = 0;
			ev_watch_start(nic);
			if (active)
				prov_sock_notify(nic, qp->sock, FD_CONNECT_BIT, 0);
		}
		break;
	case NIC_EV_CONN_FAILED:
		if (qp->state == PROV_QP_CONNECTING || qp->state == PROV_QP_ACCEPTING) {
			/* The QP is back in INIT: a later connect may use it again. */
			err = prov_conn_errno(ev->status);
			qp_dead(nic, qp, err, err);
			qp->state = PROV_QP_INIT;
		}
		break;
	case NIC_EV_DISCONNECTED:
		qp->peer_gone = true;
		/* The peer closed: later posts fail as reset; FD_CLOSE says
		 * "graceful".  Unless the connection we accepted never was one:
		 * the peer refused it (it had given up before our answer came:
		 * FD_CLOSE says reset too), or never confirmed it (our answers
		 * went unanswered: FD_CLOSE and later posts say aborted, as
		 * after a time-out). */
		if (qp->state != PROV_QP_DEAD) {
			err = ev->status == NIC_STATUS_TIMED_OUT ? -ECONNABORTED : -ECONNRESET;
			prov_sock_broke(qp, err, 0, 0);
			qp_dead(nic, qp, err, ev->status ? err : 0);
		}
		break;
	case NIC_EV_QP_ERROR:
		err = prov_wc_errno(ev->status);
		if (!err || err == -ECANCELED)
			err = -ECONNABORTED;
		if (qp->state != PROV_QP_DEAD) {
			prov_sock_broke(qp, err, ev->status, 0);
			qp_dead(nic, qp, err, err);
		}
		/*
		 * The NIC's QP left RTS for ERROR: the transport gave up on the
		 * connection (or a request broke it), and the peer, whose side may
		 * be well, would wait on it until its application closed.  A
		 * DISCONNECT sends it a DREQ, so it resets its socket now; unless
		 * it disconnected first.  Should the DREQ not get through (the link
		 * is down), the peer learns when its own transport fails or when
		 * its application closes.
		 */
		if (!qp->peer_gone) {
			qp->disc_want = true;
			prov_nic_bg_next(nic);
		}
		break;
	default: break; /* an event this provider does not know: nothing to do */
	}
}

/* 0, or -EPROTO when the completion names no request the QP has outstanding. */
static int dispatch_cqe(struct prov_nic *nic, struct prov_qp *qp, const struct nic_cqe *c)
{
	bool recv = (c->wr_id & WR_ID_RECV) != 0;
	uint32_t idx = (uint32_t)c->wr_id;
	uint32_t *done = recv ? &qp->rq_done : &qp->sq_done;
	uint32_t post = recv ? qp->rq_post : qp->sq_post;
	struct prov_op *op;
	uint32_t bytes;
	int err;

	/* Operations of a closing socket were aborted already. */
	if (qp->closing)
		return 0;
	if ((c->wr_id & ~WR_ID_RECV) >> 32 || idx != *done || *done == post)
		return -EPROTO;
	op = recv ? &qp->rq[idx & (NIC_RQ_DEPTH - 1)] : &qp->sq[idx & (NIC_SQ_DEPTH - 1)];
	(*done)++;
	err = prov_wc_errno(c->status);
	/* A failure breaks the connection (a flush follows one): say why. */
	if (err)
		prov_sock_broke(qp, err, c->status, op->kind);
	if (!op->ov)
		return 0;
	/* A receive reports what arrived (never more than was posted); the
	 * other operations what they asked for. */
	bytes = recv && c->byte_len < op->bytes ? c->byte_len : op->bytes;
	if (err && err != -ECANCELED && qp->state != PROV_QP_DEAD)
		qp_dead(nic, qp, err, err);
	prov_op_complete(nic, qp, op, err, bytes);
	return 0;
}

int prov_progress(struct prov_nic *nic)
{
	struct nic_host *h = nic->host;
	struct nic_event ev;
	struct nic_cqe cqe;
	int n = 0, r = 0;

	if (prov_nic_is_down(nic))
		return 0;
	for (uint32_t i = 0; i < NIC_EQ_DEPTH && (r = nic_host_poll_event(h, &ev)) == 1; i++) {
		dispatch_event(nic, &ev);
		n++;
	}
	if (r < 0)
		goto broken;
	if (nic->cmd && nic->cmd->err == -EAGAIN) {
		r = nic_host_cmd_poll(h, nic->cmd->cmd.tag, &nic->cmd->cpl);
		if (r != -EAGAIN) {
			nic->cmd->err = r;
			n++;
		}
	}
	/* The context's own command: nobody waits for it but the engine.  Its
	 * status does not matter (a QP the peer closed meanwhile is refused). */
	if (nic->cmd == &nic->bg && nic->bg.err != -EAGAIN) {
		nic->cmd = NULL;
		if (nic->bg.err)
			goto broken;
		prov_nic_bg_next(nic);
	}
	for (uint32_t m = nic->slots_used; m; m &= m - 1) {
		struct prov_qp *qp = &nic->qp[__builtin_ctz(m)];

		for (uint32_t i = 0; i < NIC_CQ_DEPTH; i++) {
			r = nic_host_poll_cq(h, qp->slot, &cqe);
			if (r != 1)
				break;
			if (dispatch_cqe(nic, qp, &cqe))
				goto broken;
			n++;
		}
		if (r < 0)
			goto broken;
	}
	if (n)
		prov_nic_wake(nic);
	return n;

broken:
	/* The NIC broke the ring protocol: nothing it says can be trusted. */
	prov_nic_fail(nic, -ENETDOWN);
	return n;
}

void prov_poll(struct prov_nic *nic)
{
	uint64_t now;

	if (prov_progress(nic) || prov_nic_is_down(nic))
		return;
	/* Nobody may be sleeping on the attach socket: look at it now and then. */
	now = nic_host_now_ns();
	if (now < nic->next_check_ns)
		return;
	nic->next_check_ns = now + PROV_CHECK_NS;
	if (nic_host_check(nic->host))
		prov_nic_fail(nic, -ENETDOWN);
}

struct sleep_arg {
	struct prov_nic *nic;
	uint32_t seq;
	uint32_t slots;
};

/* The sleeper's ready function: lock-free, called while it spins and before it sleeps. */
static int sleep_ready(void *arg)
{
	const struct sleep_arg *a = arg;

	return __atomic_load_n(&a->nic->wake_seq, __ATOMIC_ACQUIRE) != a->seq ||
	       nic_host_pending(a->nic->host, a->slots);
}

static void timespec_of(uint64_t ns, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ns / 1000000000u);
	ts->tv_nsec = (long)(ns % 1000000000u);
}

int prov_nic_wait(struct prov_nic *nic, int (*pred)(void *), void *arg, uint64_t deadline,
		  bool spin)
{
	for (;;) {
		struct sleep_arg sa;
		int err;

		prov_progress(nic);
		if (pred(arg))
			return 0;
		if (prov_nic_is_down(nic))
			return -ENETDOWN;
		if (nic_host_now_ns() >= deadline)
			return -ETIMEDOUT;
		if (nic->sleeping) {
			struct timespec ts;

			timespec_of(deadline, &ts);
			pthread_cond_timedwait(&nic->cond, &nic->lock, &ts);
			continue;
		}
		nic->sleeping = true;
		sa.nic = nic;
		sa.seq = __atomic_load_n(&nic->wake_seq, __ATOMIC_ACQUIRE);
		sa.slots = nic->slots_used;
		pthread_mutex_unlock(&nic->lock);
		err =
		    nic_host_await(nic->host, sleep_ready, &sa, deadline, spin ? PROV_SPIN_NS : 0);
		pthread_mutex_lock(&nic->lock);
		nic->sleeping = false;
		/* Whoever waits on the condition variable re-checks, and one of
		 * them takes over the interrupt. */
		pthread_cond_broadcast(&nic->cond);
		if (err == -ENETDOWN)
			prov_nic_fail(nic, -ENETDOWN);
	}
}

void prov_nic_fail(struct prov_nic *nic, int err)
{
	if (prov_nic_is_down(nic))
		return;
	__atomic_store_n(&nic->down, 1u, __ATOMIC_RELEASE);
	for (uint32_t m = nic->slots_used; m; m &= m - 1) {
		struct prov_qp *qp = &nic->qp[__builtin_ctz(m)];

		if (qp->closing)
			continue;
		prov_sock_broke(qp, err, 0, 0);
		prov_qp_abort(nic, qp, err);
		if (qp->state != PROV_QP_DEAD)
			qp_dead(nic, qp, err, err);
	}
	for (struct prov_sock *sk = nic->listeners; sk; sk = sk->lnext)
		prov_sock_notify(nic, sk, FD_ACCEPT_BIT, err);
	/* If the NIC still lives, this makes it tear the context down. */
	nic_host_shutdown(nic->host);
	prov_nic_wake(nic);
}

/* ---- The event thread -------------------------------------------------------- */

/* Does a dead connection still have operations the NIC has not flushed back? */
static bool dead_ops(const struct prov_nic *nic)
{
	for (uint32_t m = nic->slots_used; m; m &= m - 1) {
		const struct prov_qp *qp = &nic->qp[__builtin_ctz(m)];

		if (qp->state == PROV_QP_DEAD && !qp->closing &&
		    (qp->sq_post != qp->sq_done || qp->rq_post != qp->rq_done))
			return true;
	}
	return false;
}

static int ev_idle(void *arg)
{
	const struct prov_nic *nic = arg;

	return nic->ev_stop ||
	       (!nic->ev_socks && !nic->ev_ops && !dead_ops(nic) && nic->cmd != &nic->bg);
}

/*
 * Sleep until the NIC sends a notice on the attach socket, ev_kick fires or
 * the slice passes; then take what the notice announced (nic->lock held on
 * entry and return, dropped while asleep).
 */
static void ev_watch(struct prov_nic *nic)
{
	struct pollfd p[2] = {{.fd = nic_host_notify_fd(nic->host), .events = POLLIN},
			      {.fd = nic->ev_kick, .events = POLLIN}};
	uint64_t v;
	int r;

	pthread_mutex_unlock(&nic->lock);
	r = poll(p, 2, PROV_WAIT_SLICE_MS);
	if (r > 0 && (p[1].revents & POLLIN) && read(nic->ev_kick, &v, sizeof(v)) < 0)
		v = 0; /* another wake-up took it: nothing lost */
	pthread_mutex_lock(&nic->lock);
	if (r <= 0 || !p[0].revents || prov_nic_is_down(nic))
		return;
	if ((p[0].revents & (POLLHUP | POLLERR | POLLNVAL)) || nic_host_notify_drain(nic->host) < 0)
		prov_nic_fail(nic, -ENETDOWN);
	else
		prov_progress(nic);
}

static void *ev_main(void *arg)
{
	struct prov_nic *nic = arg;

	/* The provider's own thread: the memory monitor leaves it alone. */
	prov_tls_depth = 1;
	pthread_mutex_lock(&nic->lock);
	while (!nic->ev_stop) {
		uint64_t slice = nic_host_now_ns() + (uint64_t)PROV_WAIT_SLICE_MS * 1000000u;

		if (!prov_nic_is_down(nic) && !ev_idle(nic)) {
			prov_nic_wait(nic, ev_idle, nic, slice, false);
		} else if (!prov_nic_is_down(nic) && nic->ev_watch && nic->ev_kick >= 0) {
			ev_watch(nic);
		} else {
			struct timespec ts;

			timespec_of(slice, &ts);
			pthread_cond_timedwait(&nic->cond, &nic->lock, &ts);
		}
	}
	pthread_mutex_unlock(&nic->lock);
	return NULL;
}

/* Start the event thread if it is not running (nic->lock held). */
static void ev_start(struct prov_nic *nic)
{
	sigset_t all, old;

	if (nic->ev_started)
		return;
	if (nic->ev_kick < 0)
		nic->ev_kick = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	/* Signals are the application's: none is delivered to this thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	nic->ev_started = pthread_create(&nic->ev_thread, NULL, ev_main, nic) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Start the event thread if something needs it (nic->lock held). */
static void ev_arm(struct prov_nic *nic)
{
	if (ev_idle(nic))
		return;
	ev_start(nic);
	prov_nic_wake(nic);
	ev_kick(nic);
}

/* A connection was established: from now on, watch for connections' ends. */
static void ev_watch_start(struct prov_nic *nic)
{
	if (nic->ev_watch)
		return;
	nic->ev_watch = true;
	ev_start(nic);
	prov_nic_wake(nic);
}

void prov_ev_op_add(struct prov_nic *nic)
{
	nic->ev_ops++;
	if (nic->ev_ops == 1)
		ev_arm(nic);
}

void prov_sock_ev_update(struct prov_nic *nic, struct prov_sock *sk)
{
	bool want = !sk->closing && sk->event > 0 && (sk->ev_mask & EV_CONN_BITS);

	if (want == sk->ev_counted)
		return;
	sk->ev_counted = want;
	if (want) {
		nic->ev_socks++;
		ev_arm(nic);
	} else {
		nic->ev_socks--;
	}
}

void prov_ev_stop(struct prov_nic *nic)
{
	bool started;

	pthread_mutex_lock(&nic->lock);
	nic->ev_stop = true;
	started = nic->ev_started;
	nic->ev_started = false;
	if (nic->host)
		prov_nic_wake(nic);
	ev_kick(nic);
	pthread_mutex_unlock(&nic->lock);
	if (started)
		pthread_join(nic->ev_thread, NULL);
	if (nic->ev_kick >= 0) {
		close(nic->ev_kick);
		nic->ev_kick = -1;
	}
}

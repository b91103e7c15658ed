#include "nic_priv.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59 /* Linux 4.13 */
#endif

#include "fab_addr.h"
#include "nicsim_abi_util.h"
#include "nicsim_ring.h"
#include "nicsim_rundir.h"

/* How often the spinning loop still looks at sockets and signals. */
#define NIC_EPOLL_EVERY_NS 200000u
/* Polls of the rings between two sched_yield() calls while spinning. */
#define NIC_SPIN_BATCH 32u
/*
 * Pauses after a pass that found nothing, about half a microsecond.  A NIC
 * that polls without them reads the fabric's ring indexes as fast as its
 * peer writes them, and takes cache lines and core time from the peer that
 * is doing the work: in interleaved runs of the 1 MiB write benchmark, 16
 * pauses raised bandwidth by 2-3%; 128 did no better than 16.
 */
#define NIC_SPIN_PAUSES 16u
/*
 * A sched_yield() longer than this gave the CPU to another task's time
 * slice: the CPU is contended.  Every further yield would cost as much (an
 * EEVDF scheduler also pushes the yielder's deadline a slice later each
 * time), while a NIC asleep on its descriptors is woken at once by a
 * doorbell; so for NIC_CONTENDED_NS the NIC does not yield: it spins with
 * pauses as before while a host on this CPU sleeps, and sleeps when one
 * spins here.
 */
#define NIC_YIELD_SLOW_NS 200000u
#define NIC_CONTENDED_NS 100000000u
/*
 * Slow yields in a row before the CPU counts as contended.  One alone says
 * little: a virtual CPU that its hypervisor preempted, or an interrupt,
 * makes a yield slow once now and then on an idle machine (seen here every
 * few tens of milliseconds), and each false alarm cost a ping-pong a sleep
 * and a wake-up per message for NIC_CONTENDED_NS, 10 us becoming 24 us.
 * A process that competes for the CPU makes every yield slow.
 */
#define NIC_SLOW_YIELDS 2u
/*
 * The spin adapts after KVM's halt polling (virt/kvm/kvm_main.c,
 * grow_halt_poll_ns and shrink_halt_poll_ns, both factors 2 as there by
 * default; docs/hardware-interface.md has the figures): a sleep that work ended
 * within NIC_SPIN_MAX_NS would have been caught by a longer spin, so the
 * spin doubles, up to that; a longer sleep halves it, down to --spin-us.
 * A session's control message and its answer are often 50-150 us apart
 * (a transfer's data moves in between), and each sleep the NIC takes there
 * costs a wake-up of a few tens of microseconds on a busy machine.  A
 * contended CPU puts the spin back to --spin-us at once.
 */
#define NIC_SPIN_MAX_NS 500000u

void nic_opts_default(struct nic_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->addr = fab_addr_host(1);
	o->tpt_capacity = TPT_DEFAULT_CAPACITY;
	o->max_reg_len = NIC_DEFAULT_MAX_REG;
	o->caps = NIC_CAP_MW | NIC_CAP_RDMA_READ;
	o->spin_us = NIC_DEFAULT_SPIN_US;
	o->timers = (struct nic_timers){.ack_timeout = RC_ACK_TIMEOUT_DEFAULT,
					.retry_cnt = RC_RETRY_CNT_DEFAULT,
					.rnr_retry = RC_RNR_RETRY_DEFAULT,
					.cm_timeout = NIC_DEFAULT_CM_TIMEOUT,
					.cm_retries = NIC_DEFAULT_CM_RETRIES};
	o->rnr_timer = RC_RNR_TIMER_DEFAULT;
	o->log_level = NIC_LOG_INFO;
	o->hello_timeout_ms = NIC_HELLO_TIMEOUT_MS;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t nic_now_ns(void)
{
	return now_ns();
}

bool nic_ratelog(struct nic_ratelog *r, char *note, size_t size)
{
	uint64_t now = now_ns();

	note[0] = '\0';
	if (!r->since || now - r->since >= NIC_LOG_WINDOW_NS) {
		if (r->held)
			snprintf(note, size, " (and %u more like it before, not logged)", r->held);
		r->since = now;
		r->logged = 1;
		r->held = 0;
		return true;
	}
	if (r->logged < NIC_LOG_BURST) {
		if (++r->logged == NIC_LOG_BURST)
			snprintf(note, size, " (more like it in the next %llu s are only counted)",
				 (unsigned long long)((NIC_LOG_WINDOW_NS - (now - r->since)) /
						      1000000000u) +
				     1);
		return true;
	}
	r->held++;
	return false;
}

int nic_epoll_add(struct nic *nic, int fd, uint32_t events, struct nic_src *src)
{
	struct epoll_event ev = {.events = events, .data.ptr = src};

	return epoll_ctl(nic->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

void nic_fill_reply(struct nic *nic, struct nic_hello_reply *r, uint16_t status, uint32_t ctx_id)
{
	memset(r, 0, sizeof(*r));
	r->magic = NIC_ABI_MAGIC;
	r->abi_version = NIC_ABI_VERSION;
	r->status = status;
	r->nic_pid = (uint32_t)getpid();
	r->ctx_id = ctx_id;
	r->nic_addr = nic->opts.addr;
	r->caps = nic->opts.caps;
	r->tpt_capacity = tpt_capacity(nic->tpt);
	r->page_size = nic->env.page_size;
	r->max_reg_len = nic->opts.max_reg_len;
	r->seg_size = status == NIC_STATUS_OK && ctx_id ? NIC_CTX_SEG_SIZE : 0;
}

int nic_send_reply(struct nic *nic, int fd, uint16_t status, uint32_t ctx_id)
{
	struct nic_hello_reply r;

	nic_fill_reply(nic, &r, status, ctx_id);
	return send(fd, &r, sizeof(r), MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof(r) ? 0
											  : -EIO;
}

/* Take conn off the list of connections (its descriptor is the caller's). */
static void conn_unlink(struct nic *nic, struct nic_conn *conn)
{
	for (struct nic_conn **p = &nic->conns; *p; p = &(*p)->next) {
		if (*p == conn) {
			*p = conn->next;
			nic->nconns--;
			if (conn->mgmt)
				nic->nmgmt--;
			break;
		}
	}
	/* Room for one more: a listening socket paused at NIC_CONN_MAX listens again. */
	nic_fd_freed(nic);
}

void nic_conn_close(struct nic *nic, struct nic_conn *conn)
{
	conn_unlink(nic, conn);
	close(conn->fd); /* also removes it from the epoll set */
	mgmt_free(conn->mgmt);
	free(conn);
	nic_fd_freed(nic);
}

void nic_fd_freed(struct nic *nic)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &nic->listen_src};

	if (!nic->listen_paused)
		return;
	if (epoll_ctl(nic->epoll_fd, EPOLL_CTL_MOD, nic->listen_fd, &ev) == 0)
		nic->listen_paused = false;
}

static bool hello_reserved_zero(const struct nic_hello *h)
{
	if (h->reserved0)
		return false;
	for (size_t i = 0; i < sizeof(h->reserved); i++) {
		if (h->reserved[i])
			return false;
	}
	return true;
}

/* Did the peer of fd shut its side down (as opposed to sending an empty message)? */
static bool peer_gone(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLRDHUP};

	return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* Refuse conn with status (counted by the caller), say why, and close it. */
static void refuse(struct nic *nic, struct nic_conn *conn, uint16_t status, const char *why)
{
	char note[80];

	if (nic_ratelog(&nic->log_refused, note, sizeof(note)))
		nic_warn(&nic->log, "refused a connection from pid %u (uid %u): %s%s", conn->pid,
			 conn->uid, why, note);
	nic_send_reply(nic, conn->fd, status, 0);
	nic_conn_close(nic, conn);
}

/*
 * A management session is starting and NIC_MGMT_MAX are open: close the one
 * that has gone longest without a request or a reply message.  Idle
 * sessions (a client that connected and sent nothing since) go first that
 * way; a client that uses its session is not the one closed while 15 others
 * have been quieter.  Counted in mgmt_evicted, logged at a bounded rate.
 */
static void mgmt_make_room(struct nic *nic)
{
	struct nic_conn *oldest = NULL;
	char note[80];

	for (struct nic_conn *c = nic->conns; c; c = c->next) {
		if (c->mgmt && (!oldest || c->mgmt->last_active < oldest->mgmt->last_active))
			oldest = c;
	}
	if (!oldest)
		return;
	nic->stats.mgmt_evicted++;
	if (nic_ratelog(&nic->log_evicted, note, sizeof(note)))
		nic_warn(&nic->log,
			 "closed the management session of pid %u, quiet for %llu ms, to make "
			 "room for a new one (at most %u)%s",
			 oldest->pid,
			 (unsigned long long)((now_ns() - oldest->mgmt->last_active) / 1000000u),
			 NIC_MGMT_MAX, note);
	nic_conn_close(nic, oldest);
}

/*
 * First message of a new connection: decides host context or management.
 * The peer's user was checked at accept (accept_new).  A management session
 * leaves the NIC_CONN_MAX places of connections waiting for their hello and
 * takes one of NIC_MGMT_MAX, so management clients that stay connected never
 * keep hosts (or other management clients) from being answered.
 */
static void serve_hello(struct nic *nic, struct nic_conn *conn)
{
	struct nic_hello h;
	ssize_t n = recv(conn->fd, &h, sizeof(h), MSG_DONTWAIT | MSG_TRUNC);
	uint16_t status = NIC_STATUS_OK;
	char why[256];

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	/* An empty message reads as 0 bytes too, like the end of the stream:
	 * only a peer that is still there sent one, and it gets an answer. */
	if (n < 0 || (n == 0 && peer_gone(conn->fd))) {
		nic_conn_close(nic, conn);
		return;
	}
	conn->hello_deadline = 0;
	if ((size_t)n != sizeof(h) || h.magic != NIC_ABI_MAGIC || !hello_reserved_zero(&h))
		status = NIC_STATUS_BAD_HELLO;
	else if (h.abi_version != NIC_ABI_VERSION)
		status = NIC_STATUS_BAD_VERSION;
	else if (h.role != NIC_ROLE_HOST && h.role != NIC_ROLE_MGMT)
		status = NIC_STATUS_BAD_HELLO;
	if (status != NIC_STATUS_OK) {
		nic->stats.attach_refused++;
		snprintf(why, sizeof(why), "%s (a hello of %zd bytes)", nic_status_str(status), n);
		refuse(nic, conn, status, why);
		return;
	}
	if (h.role == NIC_ROLE_MGMT && conn->by_group) {
		/* Management shows every host's registrations and connections:
		 * a group member may attach a host, and no more. */
		nic->stats.attach_refused++;
		nic->stats.attach_denied++;
		snprintf(why, sizeof(why),
			 "%s (management is for uid %u and root; group %u may attach hosts only)",
			 nic_status_str(NIC_STATUS_DENIED), nic->uid, nic->opts.allow_gid);
		refuse(nic, conn, NIC_STATUS_DENIED, why);
		return;
	}
	if (h.role == NIC_ROLE_MGMT) {
		if (nic->nmgmt >= NIC_MGMT_MAX)
			mgmt_make_room(nic);
		if (mgmt_start(nic, conn) < 0) {
			nic->stats.attach_refused++;
			refuse(nic, conn, NIC_STATUS_NO_RESOURCES,
			       "no memory for a management client");
			return;
		}
		/* A session from here on (conn_unlink counts it out). */
		nic->nmgmt++;
		if (nic_send_reply(nic, conn->fd, NIC_STATUS_OK, 0) < 0) {
			nic_conn_close(nic, conn);
			return;
		}
		nic->stats.mgmt_sessions++;
		conn->src.type = NIC_SRC_MGMT;
		/* One place fewer taken by connections waiting for their hello. */
		nic_fd_freed(nic);
		return;
	}
	/* A host: the context takes the socket over. */
	{
		int fd = conn->fd;
		uint32_t pid = conn->pid;
		bool by_group = conn->by_group;
		uint32_t uid = conn->uid, gid = conn->gid;

		if (by_group)
			nic_info(&nic->log, "pid %u of uid %u attaches as a host through group %u",
				 pid, conn->uid, nic->opts.allow_gid);

		epoll_ctl(nic->epoll_fd, EPOLL_CTL_DEL, fd, NULL);
		conn_unlink(nic, conn);
		free(conn);
		if (ctx_attach(nic, fd, pid, by_group, uid, gid) < 0) {
			close(fd);
			nic_fd_freed(nic);
		}
	}
}

/*
 * Close the connections whose hello is overdue (answered TIMED_OUT: a slow
 * but honest client learns why), and fold the next hello deadline into
 * *deadline.  Cheap when nothing is due: one comparison.
 */
static void hello_expire(struct nic *nic, uint64_t now, uint64_t *deadline)
{
	struct nic_conn *c, *next;
	uint64_t first = 0;

	if (!nic->hello_next || now < nic->hello_next) {
		nic_deadline_min(deadline, nic->hello_next);
		return;
	}
	for (c = nic->conns; c; c = next) {
		next = c->next;
		if (!c->hello_deadline)
			continue;
		if (c->hello_deadline <= now) {
			char note[80];

			nic->stats.hello_timeouts++;
			if (nic_ratelog(&nic->log_silent, note, sizeof(note)))
				nic_warn(
				    &nic->log,
				    "closed a connection from pid %u (uid %u): no hello within "
				    "%u ms%s",
				    c->pid, c->uid, nic->opts.hello_timeout_ms, note);
			nic_send_reply(nic, c->fd, NIC_STATUS_TIMED_OUT, 0);
			nic_conn_close(nic, c);
			continue;
		}
		nic_deadline_min(&first, c->hello_deadline);
	}
	nic->hello_next = first;
	nic_deadline_min(deadline, first);
}

/* Answer a connection that cannot be served with status, and close it. */
static void refuse_fd(struct nic *nic, int fd, uint16_t status)
{
	nic_send_reply(nic, fd, status, 0);
	close(fd);
	nic->stats.accept_refused++;
}

/* Leave new connections in the backlog until nic_fd_freed(). */
static void pause_listening(struct nic *nic)
{
	struct epoll_event ev = {.events = 0, .data.ptr = &nic->listen_src};

	if (!nic->listen_paused &&
	    epoll_ctl(nic->epoll_fd, EPOLL_CTL_MOD, nic->listen_fd, &ev) == 0)
		nic->listen_paused = true;
}

/*
 * accept() failed for lack of descriptors.  The connection stays in the
 * backlog and the listening socket stays readable, so looping on would spin
 * the event loop.  Spend the reserve descriptor on it instead: accept it,
 * answer NO_RESOURCES, close it, and take the reserve back.  If the reserve
 * cannot be taken back, stop watching the listening socket until a
 * descriptor is freed (nic_fd_freed).  Logged once per episode.  Returns
 * true if accepting may go on.
 */
static bool out_of_fds(struct nic *nic, int err)
{
	int fd;

	/* A reserve spent in an earlier episode: take it back first. */
	if (nic->reserve_fd < 0)
		nic->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (!nic->fd_short) {
		nic->fd_short = true;
		nic->fd_short_refused = 0;
		/* The NICs of one process share its descriptors: those this
		 * NIC holds may be few, and the log says where the rest went. */
		if (nic->opts.fd_share > 1)
			nic_warn(&nic->log,
				 "accept: %s (descriptor limit %llu, shared by the %u NICs of this "
				 "process; this NIC holds %u contexts and %u other connections): "
				 "refusing new connections until one closes",
				 strerror(err), (unsigned long long)nic->fd_limit,
				 nic->opts.fd_share, nic->nctx, nic->nconns);
		else
			nic_warn(&nic->log,
				 "accept: %s (descriptor limit %llu, %u contexts, %u other "
				 "connections): refusing new connections until one closes",
				 strerror(err), (unsigned long long)nic->fd_limit, nic->nctx,
				 nic->nconns);
	}
	if (nic->reserve_fd >= 0) {
		close(nic->reserve_fd);
		nic->reserve_fd = -1;
		fd = accept4(nic->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd >= 0) {
			refuse_fd(nic, fd, NIC_STATUS_NO_RESOURCES);
			nic->fd_short_refused++;
		}
		nic->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (nic->reserve_fd >= 0)
			return fd >= 0;
	}
	pause_listening(nic);
	return false;
}

/*
 * Close a connection refused at accept.  Its hello has usually come already
 * (a client sends it right after connect()); read it first, as closing a
 * UNIX socket with messages unread makes the peer's next read fail with
 * ECONNRESET instead of returning the answer just sent.
 */
static void close_unread(int fd)
{
	char sink[sizeof(struct nic_hello)];

	for (int i = 0; i < 4 && recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; i++)
		;
	close(fd);
}

/*
 * Whether the peer of fd, whose credentials are cred, is in group gid: its
 * primary group (SO_PEERCRED) or one of its supplementary groups
 * (SO_PEERGROUPS), as they were when it connected.  A kernel without
 * SO_PEERGROUPS (before Linux 4.13) leaves the primary group only.
 */
static bool peer_in_group(int fd, const struct ucred *cred, uint32_t gid)
{
	gid_t small[64], *list = small;
	socklen_t len = sizeof(small);
	bool found = false;
	int tries = 0;

	if (cred->gid == (gid_t)gid)
		return true;
	/* ERANGE: the list is longer than the buffer, and len says how long
	 * it is now; groups can change between two calls, so a few tries. */
	while (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, list, &len) < 0) {
		gid_t *bigger;

		if (errno != ERANGE || ++tries > 3 || len == 0) {
			len = 0;
			break;
		}
		bigger = realloc(list == small ? NULL : list, len);
		if (!bigger) {
			len = 0;
			break;
		}
		list = bigger;
	}
	for (size_t i = 0; i < len / sizeof(gid_t) && !found; i++)
		found = list[i] == (gid_t)gid;
	if (list != small)
		free(list);
	return found;
}

static void accept_new(struct nic *nic)
{
	for (;;) {
		int fd;
		struct nic_conn *conn;
		struct ucred cred;
		socklen_t len = sizeof(cred);

		/*
		 * NIC_CONN_MAX connections waiting for their hello (each holds
		 * a descriptor the contexts' share does not count): the next
		 * ones wait in the backlog, and are taken as these say hello,
		 * time out or close.  A burst of honest hosts is only delayed.
		 * Management sessions are bounded apart (NIC_MGMT_MAX).
		 */
		if (nic->nconns - nic->nmgmt >= NIC_CONN_MAX) {
			pause_listening(nic);
			return;
		}
		fd = accept4(nic->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (fd < 0) {
			if (errno == ECONNABORTED || errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				if (out_of_fds(nic, errno))
					continue;
				return;
			}
			nic_warn(&nic->log, "accept: %s", strerror(errno));
			return;
		}
		if (nic->fd_short) {
			nic->fd_short = false;
			nic_info(
			    &nic->log,
			    "accepting connections again (%llu refused for lack of descriptors)",
			    (unsigned long long)nic->fd_short_refused);
		}
		conn = calloc(1, sizeof(*conn));
		if (!conn || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
			free(conn);
			refuse_fd(nic, fd, NIC_STATUS_NO_RESOURCES);
			continue;
		}
		/*
		 * The peer must run as this NIC's user or as root: a host context
		 * lets the NIC read and write the host's memory, and management
		 * shows every host's registrations, so neither is offered to
		 * another user's processes, except hosts of the group that
		 * --allow-group names (management stays refused to them:
		 * serve_hello).  Who the peer is comes from SO_PEERCRED and
		 * SO_PEERGROUPS, never from the hello, so it is refused here,
		 * at once: it never holds a place a hello waits in.
		 */
		conn->by_group = false;
		if (cred.uid != nic->uid && cred.uid != 0) {
			char note[80], group[48] = "";

			if (nic->opts.allow_group &&
			    peer_in_group(fd, &cred, nic->opts.allow_gid)) {
				conn->by_group = true;
			} else {
				free(conn);
				nic->stats.attach_refused++;
				nic->stats.attach_denied++;
				if (nic->opts.allow_group)
					snprintf(group, sizeof(group), " and lets in group %u",
						 nic->opts.allow_gid);
				if (nic_ratelog(&nic->log_denied, note, sizeof(note)))
					nic_warn(&nic->log,
						 "refused a connection from pid %u (uid %u): %s "
						 "(this NIC runs as uid %u%s)%s",
						 (unsigned)cred.pid, (unsigned)cred.uid,
						 nic_status_str(NIC_STATUS_DENIED), nic->uid, group,
						 note);
				nic_send_reply(nic, fd, NIC_STATUS_DENIED, 0);
				close_unread(fd);
				continue;
			}
		}
		conn->fd = fd;
		conn->pid = (uint32_t)cred.pid;
		conn->uid = (uint32_t)cred.uid;
		conn->gid = (uint32_t)cred.gid;
		conn->hello_deadline = now_ns() + (uint64_t)nic->opts.hello_timeout_ms * 1000000u;
		conn->src.type = NIC_SRC_NEW;
		conn->src.obj = conn;
		if (nic_epoll_add(nic, fd, EPOLLIN | EPOLLRDHUP, &conn->src) < 0) {
			free(conn);
			refuse_fd(nic, fd, NIC_STATUS_NO_RESOURCES);
			continue;
		}
		conn->next = nic->conns;
		nic->conns = conn;
		nic->nconns++;
		nic_deadline_min(&nic->hello_next, conn->hello_deadline);
	}
}

static void serve_signal(struct nic *nic)
{
	struct signalfd_siginfo si;

	while (read(nic->signal_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		nic_info(&nic->log, "signal %u from pid %u: shutting down", si.ssi_signo,
			 si.ssi_pid);
		nic->stop = true;
	}
}

static void serve_event(struct nic *nic, const struct epoll_event *ev)
{
	struct nic_src *src = ev->data.ptr;

	nic->woke_by |= src->type == NIC_SRC_PORT       ? NIC_WOKE_BELL
			: src->type == NIC_SRC_TIMER    ? NIC_WOKE_TIMER
			: src->type == NIC_SRC_DOORBELL ? NIC_WOKE_DOORBELL
							: NIC_WOKE_SOCKET;
	switch (src->type) {
	case NIC_SRC_LISTEN: accept_new(nic); break;
	case NIC_SRC_SIGNAL: serve_signal(nic); break;
	case NIC_SRC_NEW: serve_hello(nic, src->obj); break;
	case NIC_SRC_MGMT: mgmt_serve(nic, src->obj, ev->events); break;
	case NIC_SRC_CTX: {
		struct nic_ctx *c = src->obj;

		/* After the hello only shared-buffer descriptors come on the
		 * socket (a few per event, so that one host cannot hold the
		 * loop); end of file or an error means the host has gone. */
		if (ctx_sock_read(nic, c, 8) < 0 || (ev->events & (EPOLLHUP | EPOLLERR))) {
			ctx_detach(nic, c, "host closed its connection");
			nic_fd_freed(nic);
		}
		break;
	}
	case NIC_SRC_PIDFD:
		/* The host of another user exited (its socket may live on in a
		 * child): its pid names nobody now, or soon someone else. */
		ctx_detach(nic, src->obj, "host process exited");
		nic_fd_freed(nic);
		break;
	case NIC_SRC_PORT: break; /* the bell is drained by fab_port_sleep_cancel */
	case NIC_SRC_PEER: port_peer_event(nic, src->obj); break;
	case NIC_SRC_TIMER: {
		uint64_t v;

		if (read(nic->timer_fd, &v, sizeof(v)) == (ssize_t)sizeof(v))
			nic->timer_armed = 0;
		break;
	}
	case NIC_SRC_DOORBELL: {
		struct nic_ctx *c = src->obj;
		uint64_t v;

		if (read(c->doorbell, &v, sizeof(v)) == (ssize_t)sizeof(v))
			nic->stats.doorbells++;
		break;
	}
	}
}

/* Whether src is one of the NIC's event sources now.  Only its address is
 * compared: it may lie in memory freed by an earlier event's service. */
static bool src_live(const struct nic *nic, const struct nic_src *src)
{
	if (src == &nic->listen_src || src == &nic->signal_src || src == &nic->port_src ||
	    src == &nic->udp_src || src == &nic->timer_src)
		return true;
	for (const struct nic_ctx *c = nic->ctxs; c; c = c->next)
		if (src == &c->sock_src || src == &c->bell_src || src == &c->pid_src)
			return true;
	for (const struct nic_conn *c = nic->conns; c; c = c->next)
		if (src == &c->src)
			return true;
	return port_src_is_watch(nic, src);
}

/* Handle the epoll events that are ready, waiting up to timeout_ms. */
static int poll_events(struct nic *nic, int timeout_ms)
{
	struct epoll_event evs[32];
	int n = epoll_wait(nic->epoll_fd, evs, 32, timeout_ms);

	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	/* Serving an event may free another event's context (a hang-up, its
	 * host's exit), management session (one closed to make room for a
	 * new one) or peer watch, whose sources live inside them: an event
	 * already fetched is served only if its source is still one of the
	 * NIC's, found by its address alone (src_live). */
	for (int i = 0; i < n; i++) {
		if (!src_live(nic, evs[i].data.ptr))
			continue;
		serve_event(nic, &evs[i]);
	}
	return n;
}

/*
 * One pass over everything that can have work: the host rings (commands,
 * then each QP's send queue and engine), the fabric, the connection timers.
 * Returns the work done; *deadline gets the earliest timer (0: none).
 */
static unsigned poll_all(struct nic *nic, uint64_t *deadline)
{
	uint64_t now, held = nic->stats.dest_ring_full + nic->stats.frame_pool_empty;
	unsigned work = 0;

	nic->stats.loop_polls++;
	nic->pool_dry = false; /* other NICs gave frames back meanwhile */
	*deadline = 0;
	for (struct nic_ctx *c = nic->ctxs; c; c = c->next)
		work += ctx_poll(nic, c);
	/*
	 * The fabric first: what arrived while this NIC was off the CPU (a
	 * NIC shares its CPU and can wait for it for milliseconds) is read
	 * before any retransmission timer is judged, or an ACK waiting in the
	 * ring would count as a timeout.  And the clock is read again for
	 * every step: one pass can take milliseconds (each ACK opens the
	 * window and sends up to a window of frames at once), and a timer
	 * armed from a stale time expires early.  A step that did nothing
	 * took well under a microsecond: the reading before it serves the next.
	 */
	work += port_poll(nic);
	now = now_ns();
	for (struct nic_ctx *c = nic->ctxs; c; c = c->next) {
		for (uint32_t i = 0; i < NIC_QP_SLOTS; i++) {
			unsigned w = c->qps[i] ? qpio_poll(nic, c->qps[i], now, deadline) : 0;

			if (w)
				now = now_ns();
			work += w;
		}
	}
	work += conn_timers(nic, now, deadline);
	hello_expire(nic, now, deadline);
	/* Whatever built a burst unit sends it before the NIC may wait. */
	if (nic->port)
		port_flush(nic);
	for (struct nic_ctx *c = nic->ctxs; c; c = c->next) {
		if (c->irq_due) {
			c->irq_due = false;
			ctx_interrupt(nic, c);
		}
	}
	/* No free frame, or a full ring: try again shortly rather than wait
	 * for a timer. */
	if (nic->stats.dest_ring_full + nic->stats.frame_pool_empty != held)
		nic_deadline_min(deadline, now + 20000);
	return work;
}

/* Arm the timerfd for deadline (CLOCK_MONOTONIC ns; 0 disarms). */
static void arm_timer(struct nic *nic, uint64_t deadline)
{
	struct itimerspec its = {0};

	if (deadline == nic->timer_armed)
		return;
	its.it_value.tv_sec = (time_t)(deadline / 1000000000u);
	its.it_value.tv_nsec = (long)(deadline % 1000000000u);
	if (timerfd_settime(nic->timer_fd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
		nic->timer_armed = deadline;
}

/* Count one sleep from t0 to t1 (ns) and what ended it. */
static void account_sleep(struct nic *nic, uint64_t t0, uint64_t t1)
{
	uint64_t us = (t1 - t0) / 1000u;

	nic->stats.sleeps++;
	nic->stats.sleep_us += us;
	if (us > nic->stats.sleep_max_us)
		nic->stats.sleep_max_us = us;
	if (nic->woke_by & NIC_WOKE_BELL)
		nic->stats.wake_bell++;
	if (nic->woke_by & NIC_WOKE_TIMER)
		nic->stats.wake_timer++;
	if (nic->woke_by & NIC_WOKE_DOORBELL)
		nic->stats.wake_doorbell++;
	if (nic->woke_by & NIC_WOKE_SOCKET)
		nic->stats.wake_socket++;
}

static uint32_t contexts_that_fit(struct nic *nic);

/* What nic_run says when it starts serving. */
static void announce(struct nic *nic)
{
	nic_info(&nic->log,
		 "serving on %s (TPT %u entries, max registration %llu bytes, caps%s%s, "
		 "up to %u host contexts)",
		 nic->sock_path, tpt_capacity(nic->tpt), (unsigned long long)nic->opts.max_reg_len,
		 nic->opts.caps & NIC_CAP_MW ? " mw" : "",
		 nic->opts.caps & NIC_CAP_RDMA_READ ? " rdma-read" : "", nic->max_ctx);
	if (nic->max_ctx < NIC_MAX_CONTEXTS)
		nic_warn(&nic->log,
			 "the descriptor limit (%llu) leaves room for %u host contexts, not %u: "
			 "each takes %u descriptors; raise the limit (ulimit -n) for more",
			 (unsigned long long)nic->fd_limit, nic->max_ctx, NIC_MAX_CONTEXTS,
			 NIC_CTX_FDS);
}

/*
 * Sleep until any NIC of the group has something to do: each announces it
 * sleeps and looks once more, arms its timer, and then the thread waits on
 * the NICs' epoll sets (on `top`, which holds them all, for more than one).
 * 1 if a NIC found work instead (nothing slept), 0 after a sleep, or a
 * negative errno.
 */
static int group_sleep(struct nic **nics, unsigned n, int top)
{
	uint64_t deadline[NIC_GROUP_MAX], t0, t1;
	unsigned prepared = 0;
	int err = 0;

	for (unsigned i = 0; i < n; i++)
		ctx_set_sleeping(nics[i], 1);
	/* A peer that published before it saw the flag is caught here. */
	for (; prepared < n; prepared++) {
		struct nic *nic = nics[prepared];

		if (poll_all(nic, &deadline[prepared]) ||
		    (nic->port && fab_port_sleep_prepare(nic->port) == -EAGAIN))
			break;
	}
	if (prepared < n) {
		for (unsigned i = 0; i < n; i++) {
			if (i < prepared && nics[i]->port)
				fab_port_sleep_cancel(nics[i]->port);
			ctx_set_sleeping(nics[i], 0);
		}
		nics[prepared]->stats.sleep_aborts++;
		return 1;
	}
	for (unsigned i = 0; i < n; i++) {
		struct nic *nic = nics[i];
		uint64_t due = nic->port ? fab_next_due_ns(nic->port) : UINT64_MAX;

		if (due != UINT64_MAX && (!deadline[i] || due < deadline[i]))
			deadline[i] = due ? due : 1;
		arm_timer(nic, deadline[i]);
		nic->woke_by = 0;
	}
	t0 = now_ns();
	if (n == 1) {
		err = poll_events(nics[0], -1);
	} else {
		struct epoll_event ev[NIC_GROUP_MAX];

		if (epoll_wait(top, ev, NIC_GROUP_MAX, -1) < 0 && errno != EINTR)
			err = -errno;
		for (unsigned i = 0; i < n && err >= 0; i++)
			err = poll_events(nics[i], 0);
	}
	t1 = now_ns();
	for (unsigned i = 0; i < n; i++) {
		if (nics[i]->port)
			fab_port_sleep_cancel(nics[i]->port);
		ctx_set_sleeping(nics[i], 0);
		if (err >= 0)
			account_sleep(nics[i], t0, t1);
	}
	return err < 0 ? err : 0;
}

uint64_t nic_spin_next(uint64_t spin, uint64_t base, uint64_t slept)
{
	uint64_t max = base > NIC_SPIN_MAX_NS ? base : NIC_SPIN_MAX_NS;

	if (!base)
		return 0; /* --spin-us 0: never poll */
	if (slept < max)
		return spin * 2 < max ? spin * 2 : max;
	return spin / 2 > base ? spin / 2 : base;
}

int nic_run(struct nic *nic)
{
	return nic_run_group(&nic, 1);
}

int nic_run_group(struct nic **nics, unsigned n)
{
	uint64_t spin_ns = 0, spin_base = 0, last_work = now_ns(), last_epoll = 0;
	uint64_t contended_until = 0, slept = 0;
	unsigned idle_polls = 0, slow_yields = 0;
	bool check_wake = false, contended, spin, stop = false;
	int top = -1, err = 0;

	if (n == 0 || n > NIC_GROUP_MAX)
		return -EINVAL;
	if (n > 1) {
		top = epoll_create1(EPOLL_CLOEXEC);
		if (top < 0)
			return -errno;
		for (unsigned i = 0; i < n; i++) {
			struct epoll_event ev = {.events = EPOLLIN, .data.u32 = i};

			if (epoll_ctl(top, EPOLL_CTL_ADD, nics[i]->epoll_fd, &ev) < 0) {
				err = -errno;
				close(top);
				return err;
			}
		}
	}
	for (unsigned i = 0; i < n; i++) {
		uint64_t ns = (uint64_t)nics[i]->opts.spin_us * 1000u;

		spin_base = ns > spin_base ? ns : spin_base;
		spin_ns = spin_base;
		/* Counted again with every NIC's descriptors open: each then
		 * has the same share, whatever the order they were made in. */
		if (n > 1)
			nics[i]->max_ctx = contexts_that_fit(nics[i]);
		announce(nics[i]);
	}
	while (!stop) {
		uint64_t now, deadline = 0;
		unsigned work = 0;
		bool share = false;

		for (unsigned i = 0; i < n; i++) {
			uint64_t d;

			work += poll_all(nics[i], &d);
			nic_deadline_min(&deadline, d);
		}
		now = now_ns();
		if (work) {
			last_work = now;
			idle_polls = 0;
		} else if (check_wake) {
			for (unsigned i = 0; i < n; i++)
				nics[i]->stats.wake_idle++;
		}
		if (check_wake)
			spin_ns = nic_spin_next(spin_ns, spin_base, work ? slept : UINT64_MAX);
		check_wake = false;
		contended = now < contended_until;
		if (contended)
			spin_ns = spin_base;
		for (unsigned i = 0; i < n; i++)
			share |= ctx_share_cpu(nics[i]);
		spin = work || now - last_work < spin_ns || (deadline && deadline <= now);
		/* On a contended CPU, a host spinning on this one gets it by a
		 * sleep, not by a yield. */
		if (spin && contended && !work && share)
			spin = false;
		if (spin) {
			if (now - last_epoll >= NIC_EPOLL_EVERY_NS) {
				last_epoll = now;
				for (unsigned i = 0; i < n && err >= 0; i++)
					err = poll_events(nics[i], 0);
				if (err < 0)
					break;
			}
			/* Two cores are shared by every process in a test: give
			 * the CPU away regularly while spinning, and at once when
			 * a host waits on this very CPU; but not while the CPU is
			 * contended (the scheduler's tick shares it then). */
			if (!contended && (++idle_polls % NIC_SPIN_BATCH == 0 || share)) {
				uint64_t t;

				sched_yield();
				t = now_ns();
				slow_yields = t - now >= NIC_YIELD_SLOW_NS ? slow_yields + 1 : 0;
				if (slow_yields >= NIC_SLOW_YIELDS) {
					contended_until = t + NIC_CONTENDED_NS;
					slow_yields = 0;
				}
			} else if (!work) {
				for (unsigned i = 0; i < NIC_SPIN_PAUSES; i++)
					ring_cpu_relax();
			}
		} else {
			uint64_t t0 = now_ns();

			err = group_sleep(nics, n, top);
			if (err < 0)
				break;
			last_work = now_ns();
			last_epoll = last_work;
			slept = last_work - t0;
			check_wake = err == 0;
			err = 0;
		}
		/* A signal stops every NIC of the process, whichever read it. */
		for (unsigned i = 0; i < n; i++)
			stop |= nics[i]->stop;
	}
	if (err < 0)
		for (unsigned i = 0; i < n; i++)
			nic_err(&nics[i]->log, "event loop failed: %s", strerror(-err));
	if (top >= 0)
		close(top);
	return err < 0 ? err : 0;
}

/* Is a NIC already answering on path?  Removes a stale socket file. */
static int claim_socket_path(struct nic *nic, const struct sockaddr_un *sa)
{
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	int err;

	if (fd < 0)
		return -errno;
	err = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0 ? -EADDRINUSE : -errno;
	close(fd);
	if (err == -EADDRINUSE)
		return err;
	if (err == -ECONNREFUSED) {
		nic_warn(&nic->log, "removing stale socket %s", sa->sun_path);
		if (unlink(sa->sun_path) < 0 && errno != ENOENT)
			return -errno;
	}
	return 0;
}

static int write_pid_file(struct nic *nic)
{
	char tmp[PATH_MAX + 8], text[32];
	int fd, n = snprintf(text, sizeof(text), "%d\n", (int)getpid());

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", nic->pid_path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -errno;
	/* A full file system is ENOSPC (or EDQUOT), not an I/O error: the
	 * message then says how full it is. */
	if (write(fd, text, (size_t)n) != n) {
		int err = errno == ENOSPC || errno == EDQUOT ? -errno : -EIO;

		close(fd);
		unlink(tmp);
		return err;
	}
	close(fd);
	if (rename(tmp, nic->pid_path) < 0) {
		unlink(tmp);
		return -errno;
	}
	return 0;
}

static int open_listener(struct nic *nic)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char addr[FAB_ADDR_STRLEN];
	int err;

	err = nic_sock_path(nic->sock_path, sizeof(nic->sock_path), nic->opts.dir, nic->opts.addr);
	if (err < 0) {
		nic_err(&nic->log, "run directory %s is too long for a UNIX socket path (max %zu)",
			nic->opts.dir, sizeof(sa.sun_path) - 24);
		return err;
	}
	fab_addr_format(nic->opts.addr, addr, sizeof(addr));
	if (snprintf(nic->pid_path, sizeof(nic->pid_path),
		     "%s/" NIC_SOCK_PREFIX "%s" NIC_PID_SUFFIX, nic->opts.dir,
		     addr) >= (int)sizeof(nic->pid_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, nic->sock_path);
	err = claim_socket_path(nic, &sa);
	if (err == -EADDRINUSE) {
		nic_err(&nic->log, "another NIC already serves %s in %s", addr, nic->opts.dir);
		return err;
	}
	if (err < 0)
		return err;
	nic->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (nic->listen_fd < 0)
		return -errno;
	if (bind(nic->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		err = -errno;
		nic_err(&nic->log, "bind %s: %s", sa.sun_path, strerror(errno));
		return err;
	}
	nic->own_files = true;
	/* --allow-group: the group's members must be able to connect (write
	 * permission on the socket); nobody else.  Before listen(): nobody
	 * can have connected yet. */
	if (nic->opts.allow_group &&
	    (chown(sa.sun_path, (uid_t)-1, (gid_t)nic->opts.allow_gid) < 0 ||
	     chmod(sa.sun_path, 0660) < 0)) {
		err = -errno;
		nic_err(&nic->log, "cannot give socket %s to group %u: %s", sa.sun_path,
			nic->opts.allow_gid, strerror(errno));
		return err;
	}
	if (listen(nic->listen_fd, 128) < 0)
		return -errno;
	nic->listen_src.type = NIC_SRC_LISTEN;
	err = nic_epoll_add(nic, nic->listen_fd, EPOLLIN, &nic->listen_src);
	if (err < 0)
		return err;
	err = write_pid_file(nic);
	if (err < 0) {
		char why[PATH_MAX * 3];

		nic_err(&nic->log, "cannot write %s: %s", nic->pid_path,
			nic_run_dir_full(nic->opts.dir, err, 0, why, sizeof(why)));
	}
	return err;
}

/*
 * Raise the soft descriptor limit to the hard one (contexts take four
 * descriptors each); returns the soft limit in force after.  The event loop
 * uses epoll, never select(), so descriptors past 1024 are fine.
 */
static uint64_t raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 1024;
	if (rl.rlim_cur < rl.rlim_max) {
		struct rlimit want = {.rlim_cur = rl.rlim_max, .rlim_max = rl.rlim_max};

		/* An unlimited hard limit is still capped by fs.nr_open: then
		 * the soft limit stays where it was. */
		if (setrlimit(RLIMIT_NOFILE, &want) == 0)
			rl = want;
	}
	return rl.rlim_cur == RLIM_INFINITY ? UINT32_MAX : (uint64_t)rl.rlim_cur;
}

/* Descriptors this process has open now (a fair guess if /proc is missing). */
static unsigned count_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	unsigned n = 0;

	if (!d)
		return 32;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n ? n - 1 : 0; /* not the directory's own descriptor */
}

/*
 * How many contexts fit beside what is open now, NIC_CONN_MAX connections
 * waiting for their hello, NIC_MGMT_MAX management sessions and
 * NIC_FD_SLACK: with the common limit of 1024 descriptors that is about
 * 185, not NIC_MAX_CONTEXTS.
 */
static uint32_t contexts_that_fit(struct nic *nic)
{
	/* The NICs of one process (opts.fd_share) split what is left.  The
	 * room kept for connections waiting for their hello and for
	 * management sessions is one NIC's: kept for each, it would leave a
	 * group of 16 under the common hard limit of 1024 no contexts at all. */
	uint64_t share = nic->opts.fd_share ? nic->opts.fd_share : 1;
	uint64_t used = (uint64_t)count_open_fds() + NIC_CONN_MAX + NIC_MGMT_MAX + NIC_FD_SLACK, n;

	if (nic->fd_limit <= used)
		return 0;
	n = (nic->fd_limit - used) / NIC_CTX_FDS / share;
	return n < NIC_MAX_CONTEXTS ? (uint32_t)n : NIC_MAX_CONTEXTS;
}

unsigned nic_max_contexts(const struct nic *nic)
{
	return nic->max_ctx;
}

int nic_create(const struct nic_opts *o, struct nic **out)
{
	struct nic *nic = calloc(1, sizeof(*nic));
	char addr[FAB_ADDR_STRLEN];
	sigset_t mask;
	long page = sysconf(_SC_PAGESIZE);
	int err;

	if (!nic)
		return -ENOMEM;
	nic->opts = *o;
	nic->listen_fd = nic->epoll_fd = nic->signal_fd = nic->timer_fd = -1;
	nic->next_ctx_id = 1;
	nic->uid = (uint32_t)geteuid();
	nic->fd_limit = raise_fd_limit();
	if (!nic->opts.hello_timeout_ms)
		nic->opts.hello_timeout_ms = NIC_HELLO_TIMEOUT_MS;
	/* Kept to refuse a connection when descriptors run out (out_of_fds). */
	nic->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	nic->log.level = o->log_level;
	snprintf(nic->log.prefix, sizeof(nic->log.prefix), "nicsimd[%s]",
		 fab_addr_format(o->addr, addr, sizeof(addr)));
	if (!fab_addr_valid(o->addr) || o->max_reg_len == 0) {
		err = -EINVAL;
		goto fail;
	}
	err = tpt_create(&nic->tpt, o->tpt_capacity, (uint32_t)page);
	if (err < 0) {
		nic_err(&nic->log, "cannot create a TPT of %u entries: %s", o->tpt_capacity,
			strerror(-err));
		goto fail;
	}
	nic->env = (struct cmd_env){.tpt = nic->tpt,
				    .conn_exec = conn_exec,
				    .shm_exec = ctx_shm_exec,
				    .reg_check = ctx_reg_check,
				    .conn_arg = nic,
				    .stats = &nic->stats,
				    .caps = o->caps,
				    .max_reg_len = o->max_reg_len,
				    .page_size = (uint32_t)page,
				    .nic_addr = o->addr};

	nic->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (nic->epoll_fd < 0) {
		err = -errno;
		goto fail;
	}
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	nic->signal_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (nic->signal_fd < 0) {
		err = -errno;
		goto fail;
	}
	nic->signal_src.type = NIC_SRC_SIGNAL;
	err = nic_epoll_add(nic, nic->signal_fd, EPOLLIN, &nic->signal_src);
	if (err < 0)
		goto fail;
	err = conn_init(nic);
	if (err < 0)
		goto fail;
	err = port_open(nic);
	if (err < 0)
		goto fail;
	err = open_listener(nic);
	if (err < 0)
		goto fail;
	nic->max_ctx = contexts_that_fit(nic);
	*out = nic;
	return 0;
fail:
	nic_destroy(nic);
	return err;
}

/* Remove the pid file only if it still names this process. */
static void remove_pid_file(const struct nic *nic)
{
	char text[32] = "";
	FILE *f = fopen(nic->pid_path, "re");

	if (!f)
		return;
	if (fgets(text, sizeof(text), f) && atoi(text) == (int)getpid())
		unlink(nic->pid_path);
	fclose(f);
}

void nic_destroy(struct nic *nic)
{
	if (!nic)
		return;
	while (nic->ctxs)
		ctx_detach(nic, nic->ctxs, "NIC shutting down");
	while (nic->conns)
		nic_conn_close(nic, nic->conns);
	if (nic->conn)
		conn_fini(nic);
	port_close(nic);
	if (nic->listen_fd >= 0)
		close(nic->listen_fd);
	if (nic->own_files) {
		unlink(nic->sock_path);
		remove_pid_file(nic);
	}
	if (nic->signal_fd >= 0)
		close(nic->signal_fd);
	if (nic->epoll_fd >= 0)
		close(nic->epoll_fd);
	if (nic->reserve_fd >= 0)
		close(nic->reserve_fd);
	tpt_destroy(nic->tpt);
	free(nic);
}

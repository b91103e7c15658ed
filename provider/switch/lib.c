/*
 * The switch's process-wide state: the provider (started once, its
 * procedure table and extension functions), the table of sockets by
 * descriptor, and the progress thread, which waits in epoll on every
 * socket's SPI event and runs the engine for the sockets it names.
 *
 * Fork: as the provider does (provider/startup.c), a child does not
 * inherit the switch.  It has no progress thread, the provider forgot the
 * SPI sockets under the parent's stream sockets, and the connections are
 * the parent's: the child forgets every socket (its calls on them give
 * EBADF) and starts the switch afresh on its first nsw_socket.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>

#include "sw.h"

struct sw_spi sw_spi;

/* The tables of sockets a forked child forgot, kept reachable: their
 * memory is the parent's state, which the child leaves as it is. */
struct sw_forgot {
	struct sw_sock **tab;
	struct sw_forgot *next;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;       /* a reference was dropped */
	pthread_mutex_t init_lock; /* held while the switch starts */
	bool started;              /* init_once ran in this process */
	bool atexit_set;
	int init_err;
	struct sw_sock **tab; /* by descriptor */
	size_t cap;
	int ep;
	struct sw_forgot *forgot;
} g = {PTHREAD_MUTEX_INITIALIZER,
       PTHREAD_COND_INITIALIZER,
       PTHREAD_MUTEX_INITIALIZER,
       false,
       false,
       0,
       NULL,
       0,
       -1,
       NULL};

uint64_t sw_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *progress_main(void *arg)
{
	struct epoll_event ev[32];

	(void)arg;
	for (;;) {
		int n = epoll_wait(g.ep, ev, 32, -1);

		for (int i = 0; i < n; i++) {
			/* The socket's descriptor, and which of its events. */
			size_t fd = (size_t)(ev[i].data.u64 >> 1);
			struct sw_sock *sk = NULL;

			pthread_mutex_lock(&g.lock);
			if (fd < g.cap && g.tab[fd]) {
				sk = g.tab[fd];
				sk->refs++;
			}
			pthread_mutex_unlock(&g.lock);
			if (!sk)
				continue;
			pthread_mutex_lock(&sk->lock);
			sw_event(sk, ev[i].data.u64 & 1);
			pthread_mutex_unlock(&sk->lock);
			sw_put(sk);
		}
	}
	return NULL;
}

/* Ask the provider for an extension function by GUID. */
static int ext(SOCKET s, GUID id, void *fn)
{
	DWORD got = 0;
	int e = 0;

	if (sw_spi.t.lpWSPIoctl(s, SIO_GET_EXTENSION_FUNCTION_POINTER, &id, sizeof(id), fn,
				sizeof(void *), &got, NULL, NULL, NULL, &e))
		return e;
	return 0;
}

/* At exit, the sockets still open close as nsw_close would: what the
 * application sent reaches the peer, then end-of-file, as TCP gives a
 * process that exits without closing. */
static void close_all(void)
{
	for (;;) {
		int fd = -1;

		pthread_mutex_lock(&g.lock);
		for (size_t i = 0; i < g.cap && fd < 0; i++)
			if (g.tab[i] && !g.tab[i]->closing)
				fd = (int)i;
		pthread_mutex_unlock(&g.lock);
		if (fd < 0)
			return;
		nsw_close(fd);
	}
}

static void init_once(void)
{
	WSPDATA data;
	SOCKET s;
	int e = 0;
	pthread_t thr;
	pthread_attr_t attr;
	sigset_t all, old;

	e = WSPStartupEx(MAKEWORD(2, 2), &data, NULL, NULL, &sw_spi.t);
	if (e) {
		g.init_err = e == WSAENOBUFS ? ENOMEM : ENETDOWN;
		return;
	}
	/* The extension functions, as the Windows switch gets them: through
	 * WSPIoctl on a socket of the provider. */
	s = sw_spi.t.lpWSPSocket(AF_INET, SOCK_STREAM, IPPROTO_TCP, NULL, 0, 0, &e);
	if (s == INVALID_SOCKET) {
		g.init_err = sw_errno_of(e);
		return;
	}
	if (ext(s, (GUID)WSAID_REGISTERMEMORY, &sw_spi.reg) ||
	    ext(s, (GUID)WSAID_DEREGISTERMEMORY, &sw_spi.dereg) ||
	    ext(s, (GUID)WSAID_REGISTERRDMAMEMORY, &sw_spi.reg_rdma) ||
	    ext(s, (GUID)WSAID_DEREGISTERRDMAMEMORY, &sw_spi.dereg_rdma) ||
	    ext(s, (GUID)WSAID_RDMAWRITE, &sw_spi.rdma_write))
		g.init_err = EOPNOTSUPP;
	/* An unbound socket gets RDMA read's pointer; whether a socket's NIC
	 * serves it is asked again once it is connected (sw_conn_start). */
	if (ext(s, (GUID)WSAID_RDMAREAD, &sw_spi.rdma_read))
		sw_spi.rdma_read = NULL;
	sw_spi.t.lpWSPCloseSocket(s, &e);
	if (g.init_err)
		return;
	if (!g.atexit_set)
		atexit(close_all);
	g.atexit_set = true;
	g.ep = epoll_create1(EPOLL_CLOEXEC);
	if (g.ep < 0) {
		g.init_err = errno;
		return;
	}
	/* The thread takes no signal of the application's. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&thr, &attr, progress_main, NULL))
		g.init_err = EAGAIN;
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

int sw_init(void)
{
	int err;

	pthread_mutex_lock(&g.init_lock);
	if (!g.started) {
		g.started = true;
		init_once();
	}
	err = g.init_err;
	pthread_mutex_unlock(&g.init_lock);
	return -err;
}

/* Before fork: no thread is half way through the table, or starting. */
static void fork_prepare(void)
{
	pthread_mutex_lock(&g.init_lock);
	pthread_mutex_lock(&g.lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&g.lock);
	pthread_mutex_unlock(&g.init_lock);
}

/*
 * In the child: forget every socket (see the top).  Only the child's own
 * copies of the descriptors are closed; the sockets' memory is left as it
 * is (a thread of the parent's may have been changing it, holding its
 * lock), reachable from g.forgot.  No SPI call: the provider's own fork
 * handler, which ran before this one, forgot its side.
 */
static void fork_child(void)
{
	struct sw_forgot *f = NULL;

	for (size_t i = 0; i < g.cap; i++) {
		struct sw_sock *sk = g.tab[i];

		if (!sk)
			continue;
		close(sk->fd);
		close(sk->evfd);
		close(sk->netfd);
	}
	if (g.tab)
		f = malloc(sizeof(*f));
	if (f) {
		f->tab = g.tab;
		f->next = g.forgot;
		g.forgot = f;
	}
	g.tab = NULL;
	g.cap = 0;
	if (g.ep >= 0)
		close(g.ep);
	g.ep = -1;
	g.started = false;
	g.init_err = 0;
	pthread_mutex_init(&g.lock, NULL);
	pthread_cond_init(&g.cond, NULL);
	pthread_mutex_init(&g.init_lock, NULL);
}

/* Runs when the library is loaded, after the provider's (which it needs),
 * so that in a child the provider's fork handler runs first. */
__attribute__((constructor)) static void sw_load(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

struct sw_sock *sw_get(int fd)
{
	struct sw_sock *sk = NULL;

	pthread_mutex_lock(&g.lock);
	if (fd >= 0 && (size_t)fd < g.cap && g.tab[fd] && !g.tab[fd]->closing) {
		sk = g.tab[fd];
		sk->refs++;
	}
	pthread_mutex_unlock(&g.lock);
	return sk;
}

void sw_put(struct sw_sock *sk)
{
	pthread_mutex_lock(&g.lock);
	sk->refs--;
	pthread_cond_broadcast(&g.cond);
	pthread_mutex_unlock(&g.lock);
}

int sw_add(struct sw_sock *sk)
{
	struct epoll_event ev = {.events = EPOLLIN};
	int err = 0;

	pthread_mutex_lock(&g.lock);
	if ((size_t)sk->fd >= g.cap) {
		size_t cap = (size_t)sk->fd * 2 + 64;
		struct sw_sock **t = realloc(g.tab, cap * sizeof(*t));

		if (!t) {
			err = -ENOMEM;
		} else {
			memset(t + g.cap, 0, (cap - g.cap) * sizeof(*t));
			g.tab = t;
			g.cap = cap;
		}
	}
	if (!err) {
		g.tab[sk->fd] = sk;
		sk->refs = 1;
	}
	pthread_mutex_unlock(&g.lock);
	ev.data.u64 = (uint64_t)sk->fd << 1;
	if (!err && epoll_ctl(g.ep, EPOLL_CTL_ADD, sk->evfd, &ev))
		err = -errno;
	ev.data.u64 |= 1;
	if (!err && epoll_ctl(g.ep, EPOLL_CTL_ADD, sk->netfd, &ev)) {
		err = -errno;
		epoll_ctl(g.ep, EPOLL_CTL_DEL, sk->evfd, NULL);
	}
	if (err) {
		pthread_mutex_lock(&g.lock);
		g.tab[sk->fd] = NULL;
		pthread_mutex_unlock(&g.lock);
	}
	return err;
}

/* Whether the progress thread watches sk's completions (a reader that
 * waits on them itself takes them over for its call). */
void sw_watch(struct sw_sock *sk, bool on)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)sk->fd << 1};

	/* Level-triggered: completions signalled while unwatched fire at once. */
	epoll_ctl(g.ep, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, sk->evfd, &ev);
}

/* No new call may take sk (nsw_close began). */
void sw_closing(struct sw_sock *sk)
{
	pthread_mutex_lock(&g.lock);
	sk->closing = true;
	pthread_mutex_unlock(&g.lock);
}

/* Take sk out of the table (the caller holds a reference of sw_get) and
 * wait until the caller's is the last. */
void sw_remove(struct sw_sock *sk)
{
	pthread_mutex_lock(&g.lock);
	g.tab[sk->fd] = NULL;
	sk->refs--; /* the table's */
	pthread_mutex_unlock(&g.lock);
	epoll_ctl(g.ep, EPOLL_CTL_DEL, sk->evfd, NULL);
	epoll_ctl(g.ep, EPOLL_CTL_DEL, sk->netfd, NULL);
	pthread_mutex_lock(&g.lock);
	while (sk->refs > 1)
		pthread_cond_wait(&g.cond, &g.lock);
	pthread_mutex_unlock(&g.lock);
}

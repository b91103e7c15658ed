/* The stream-socket calls of nicsim_switch.h. */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/tcp.h>
#include <sys/eventfd.h>

#include "sw.h"

#define SW_CLOSE_NS 5000000000ull /* a graceful close waits this long for credit */
#define SW_RCVBUF_MIN (NSS_MIN_RECVS * NSS_MIN_RECV_SIZE)

/* errno = err (positive), and the call's failure value. */
static int fail(int err)
{
	errno = err;
	return -1;
}

/* The socket of descriptor s with a reference, or NULL with errno EBADF. */
static struct sw_sock *get(int s)
{
	struct sw_sock *sk = sw_get(s);

	if (!sk)
		errno = EBADF;
	return sk;
}

/* A call that waited on the completions itself (wait_input) ends: the
 * progress thread watches again. */
static void direct_end(struct sw_sock *sk)
{
	if (sk->direct && pthread_equal(sk->direct_owner, pthread_self())) {
		sk->direct = false;
		sw_watch(sk, true);
	}
}

/* Release sk after a call: return ret, with errno err if ret is -1. */
static int done(struct sw_sock *sk, int ret, int err)
{
	direct_end(sk);
	if (ret < 0 && err == EAGAIN)
		sw_ready_reset(sk);
	sw_update_ready(sk);
	pthread_mutex_unlock(&sk->lock);
	sw_put(sk);
	if (ret < 0)
		errno = err;
	return ret;
}

/*
 * Wait on the socket's condition (sk->lock held) for the progress thread
 * to change something, until deadline (monotonic ns, 0: none).  0, or
 * -ETIMEDOUT once the deadline has passed.
 */
static int wait_change(struct sw_sock *sk, uint64_t deadline)
{
	struct timespec ts;
	uint64_t until = deadline ? deadline : sw_now_ns() + 1000000000ull;

	if (deadline && sw_now_ns() >= deadline)
		return -ETIMEDOUT;
	/* Without a deadline the wait is cut into seconds: the condition is
	 * checked again anyway, and a lost wake-up costs at most one. */
	ts.tv_sec = (time_t)(until / 1000000000ull);
	ts.tv_nsec = (long)(until % 1000000000ull);
	pthread_cond_timedwait(&sk->cond, &sk->lock, &ts);
	return 0;
}

/*
 * A reader's or a sender's wait (sk->lock held, and released meanwhile):
 * on the completions' eventfd itself, so that the caller wakes when a
 * message or a completion lands, not after the progress thread woke and
 * woke it.  For the rest of the call the progress thread leaves the
 * socket's completions to it (direct_end gives them back as the call
 * returns).  Another thread already waiting so waits on the condition
 * instead, and the first one's progress wakes it.  0, or -ETIMEDOUT past
 * deadline.
 */
static int wait_input(struct sw_sock *sk, uint64_t deadline)
{
	struct pollfd p = {.fd = sk->evfd, .events = POLLIN};
	uint64_t now = sw_now_ns(), until = deadline ? deadline : now + 1000000000ull, v;
	ssize_t r;

	if (sk->direct_waiting || (sk->direct && !pthread_equal(sk->direct_owner, pthread_self())))
		return wait_change(sk, deadline);
	if (deadline && now >= deadline)
		return -ETIMEDOUT;
	if (!sk->direct) {
		sk->direct = true;
		sk->direct_owner = pthread_self();
		sw_watch(sk, false);
	}
	sk->direct_waiting = true;
	pthread_mutex_unlock(&sk->lock);
	poll(&p, 1, (int)((until - now + 999999) / 1000000));
	pthread_mutex_lock(&sk->lock);
	sk->direct_waiting = false;
	r = read(sk->evfd, &v, sizeof(v)); /* taken: the caller runs progress */
	(void)r;
	return 0;
}

static uint64_t deadline_of(uint64_t timeo_ns)
{
	return timeo_ns ? sw_now_ns() + timeo_ns : 0;
}

static struct sw_sock *sock_new(SOCKET spi, int *err)
{
	struct sw_sock *sk = calloc(1, sizeof(*sk));
	pthread_condattr_t ca;
	int e = 0, len = sizeof(int), thr = 0;

	if (!sk) {
		*err = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&sk->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&sk->cond, &ca);
	pthread_condattr_destroy(&ca);
	sk->spi = spi;
	sk->close_code = -1;
	sk->rcvbuf = 65536;
	sk->sndbuf = SW_STAGING;
	sk->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	sk->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	sk->netfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (sk->fd < 0 || sk->evfd < 0 || sk->netfd < 0) {
		*err = errno;
		goto fail;
	}
	if (sk->spi == INVALID_SOCKET)
		sk->spi = sw_spi.t.lpWSPSocket(AF_INET, SOCK_STREAM, IPPROTO_TCP, NULL, 0, 0, &e);
	if (sk->spi == INVALID_SOCKET) {
		*err = sw_errno_of(e);
		goto fail;
	}
	/* Every SPI call of the switch is non-blocking: the events come to
	 * netfd, where the progress thread waits. */
	if (sw_spi.t.lpWSPEventSelect(sk->spi, sk->netfd, FD_ACCEPT | FD_CONNECT | FD_CLOSE, &e)) {
		*err = sw_errno_of(e);
		goto fail;
	}
	if (sw_spi.t.lpWSPGetSockOpt(sk->spi, WSA_SOL_SOCKET, SO_RDMA_THRESHOLD_SIZE, (char *)&thr,
				     &len, &e) == 0)
		sk->threshold = (uint32_t)thr;
	else
		sk->threshold = 65536;
	*err = -sw_add(sk);
	if (*err)
		goto fail;
	return sk;
fail:
	if (sk->spi != INVALID_SOCKET)
		sw_spi.t.lpWSPCloseSocket(sk->spi, &e);
	if (sk->fd >= 0)
		close(sk->fd);
	if (sk->evfd >= 0)
		close(sk->evfd);
	if (sk->netfd >= 0)
		close(sk->netfd);
	free(sk);
	return NULL;
}

static void sock_free(struct sw_sock *sk)
{
	close(sk->fd);
	close(sk->evfd);
	close(sk->netfd);
	free(sk->ctl);
	free(sk->rx);
	free(sk->tx);
	free(sk->postq);
	free(sk->dq);
	sw_bounce_free(sk);
	sw_staging_free(sk);
	pthread_mutex_destroy(&sk->lock);
	pthread_cond_destroy(&sk->cond);
	free(sk);
}

int nsw_socket(int domain, int type, int protocol)
{
	struct sw_sock *sk;
	int err = -sw_init();

	if (domain != AF_INET)
		return fail(EAFNOSUPPORT);
	if ((type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) != SOCK_STREAM)
		return fail(ESOCKTNOSUPPORT);
	if (protocol != 0 && protocol != IPPROTO_TCP)
		return fail(EPROTONOSUPPORT);
	if (err)
		return fail(err);
	sk = sock_new(INVALID_SOCKET, &err);
	if (!sk)
		return fail(err);
	sk->nonblock = (type & SOCK_NONBLOCK) != 0;
	return sk->fd;
}

static int check_addr(const struct sockaddr *addr, socklen_t len)
{
	if (!addr || len < sizeof(struct sockaddr_in))
		return addr ? EINVAL : EFAULT;
	if (addr->sa_family != AF_INET)
		return EAFNOSUPPORT;
	return 0;
}

/* The socket of s, locked, for a call with an address: NULL (errno set)
 * for a bad descriptor or address. */
static struct sw_sock *get_with_addr(int s, const struct sockaddr *addr, socklen_t addrlen)
{
	struct sw_sock *sk = get(s);
	int err;

	if (!sk)
		return NULL;
	pthread_mutex_lock(&sk->lock);
	err = check_addr(addr, addrlen);
	if (err) {
		done(sk, -1, err);
		return NULL;
	}
	return sk;
}

int nsw_bind(int s, const struct sockaddr *addr, socklen_t addrlen)
{
	struct sw_sock *sk = get_with_addr(s, addr, addrlen);
	int e = 0;

	if (!sk)
		return -1;
	if (sk->bound || sk->st != SW_NEW)
		return done(sk, -1, EINVAL);
	if (sw_spi.t.lpWSPBind(sk->spi, addr, sizeof(struct sockaddr_in), &e))
		return done(sk, -1, sw_errno_of(e));
	sk->bound = true;
	memcpy(&sk->local, addr, sizeof(sk->local));
	return done(sk, 0, 0);
}

int nsw_listen(int s, int backlog)
{
	struct sw_sock *sk = get(s);
	int e = 0;

	if (!sk)
		return -1;
	pthread_mutex_lock(&sk->lock);
	if (sk->st != SW_NEW && sk->st != SW_LISTEN)
		return done(sk, -1, sk->st == SW_CONNECTED ? EISCONN : EINVAL);
	if (!sk->bound)
		return done(sk, -1, EDESTADDRREQ);
	if (sw_spi.t.lpWSPListen(sk->spi, backlog, &e))
		return done(sk, -1, sw_errno_of(e));
	sk->st = SW_LISTEN;
	return done(sk, 0, 0);
}

int nsw_accept(int s, struct sockaddr *addr, socklen_t *addrlen)
{
	struct sw_sock *sk = get(s), *nk;
	struct sockaddr_in peer;
	int plen = sizeof(peer), e = 0, err;
	SOCKET ns;
	uint64_t deadline;

	if (!sk)
		return -1;
	if (addr && (!addrlen || *addrlen < sizeof(peer))) {
		sw_put(sk);
		return fail(addrlen ? EINVAL : EFAULT);
	}
	pthread_mutex_lock(&sk->lock);
	deadline = deadline_of(sk->rcvtimeo_ns);
	for (;;) {
		/* A listener closed meanwhile has err EBADF, and no SPI socket. */
		if (sk->st != SW_LISTEN || sk->err)
			return done(sk, -1, sk->err ? sk->err : EINVAL);
		ns = sw_spi.t.lpWSPAccept(sk->spi, (struct sockaddr *)&peer, &plen, NULL, 0, &e);
		if (ns != INVALID_SOCKET)
			break;
		if (e != WSAEWOULDBLOCK && e != WSAECONNRESET)
			return done(sk, -1, sw_errno_of(e));
		if (e == WSAEWOULDBLOCK)
			sk->accept_ready = false;
		if (sk->nonblock)
			return done(sk, -1, EAGAIN);
		if (!sk->accept_ready && wait_change(sk, deadline))
			return done(sk, -1, EAGAIN);
	}
	nk = sock_new(ns, &err);
	if (!nk)
		return done(sk, -1, err);
	pthread_mutex_lock(&nk->lock);
	nk->bound = true;
	nk->local = sk->local;
	nk->peer = peer;
	nk->threshold = sk->threshold;
	nk->max_rdma = sk->max_rdma;
	nk->rcvbuf = sk->rcvbuf;
	nk->sndbuf = sk->sndbuf;
	nk->path_pref = sk->path_pref;
	err = -sw_conn_start(nk);
	pthread_mutex_unlock(&nk->lock);
	if (err) {
		nsw_close(nk->fd);
		return done(sk, -1, err);
	}
	if (addr) {
		memcpy(addr, &peer, sizeof(peer));
		*addrlen = sizeof(peer);
	}
	return done(sk, nk->fd, 0);
}

int nsw_connect(int s, const struct sockaddr *addr, socklen_t addrlen)
{
	struct sw_sock *sk = get_with_addr(s, addr, addrlen);
	int err, e = 0;
	uint64_t deadline;

	if (!sk)
		return -1;
	switch (sk->st) {
	case SW_CONNECTED: return done(sk, -1, EISCONN);
	case SW_CONNECTING: return done(sk, -1, EALREADY);
	case SW_LISTEN:
	case SW_DOWN: return done(sk, -1, EINVAL);
	default: break;
	}
	memcpy(&sk->peer, addr, sizeof(sk->peer));
	sk->connect_done = false;
	sk->so_error = 0;
	sk->st = SW_CONNECTING;
	if (sw_spi.t.lpWSPConnect(sk->spi, addr, sizeof(struct sockaddr_in), NULL, NULL, NULL, NULL,
				  &e) == 0) {
		err = -sw_conn_start(sk);
		return done(sk, err ? -1 : 0, err);
	}
	if (e != WSAEWOULDBLOCK) {
		sk->st = SW_NEW;
		return done(sk, -1, sw_errno_of(e));
	}
	sk->bound = true;
	if (sk->nonblock)
		return done(sk, -1, EINPROGRESS);
	/* The NIC bounds the connect (its connection timeout); SO_SNDTIMEO may
	 * end the wait first, as for TCP: EINPROGRESS, and the connect goes
	 * on as a non-blocking one does. */
	deadline = deadline_of(sk->sndtimeo_ns);
	while (sk->st == SW_CONNECTING)
		if (wait_change(sk, deadline))
			return done(sk, -1, EINPROGRESS);
	sk->connect_done = false;
	if (sk->st == SW_CONNECTED)
		return done(sk, 0, 0);
	err = sk->so_error ? sk->so_error : sk->err ? sk->err : ECONNREFUSED;
	sk->so_error = 0;
	return done(sk, -1, err);
}

/* ---- Data ------------------------------------------------------------------------- */

/* Why the socket cannot send now, or 0. */
static int send_err(struct sw_sock *sk)
{
	if (sk->err)
		return sk->err == ECONNRESET || sk->err == ECONNABORTED || sk->err == ENETDOWN
			   ? sk->err
			   : EPIPE;
	if (sk->post_err)
		return sw_errno_of(sk->post_err); /* the peer reset or died: ECONNRESET */
	if (sk->wr_shut || sk->st == SW_DOWN)
		return EPIPE;
	if (sk->st != SW_CONNECTED)
		return ENOTCONN;
	return 0;
}

/*
 * Send len bytes (sk->lock held): the bytes taken, or a negative errno
 * with none taken.  nb: do not wait.  A large part waits for its transfer
 * when the caller waits (the buffer is the application's); a non-blocking
 * one is copied to a staging buffer first.
 */
static ssize_t send_locked(struct sw_sock *sk, const uint8_t *p, size_t len, bool nb,
			   uint64_t deadline)
{
	size_t sent = 0;

	sk->connect_done = false; /* a connected socket's readiness is its data's */
	while (sent < len) {
		size_t left = len - sent;
		int err = send_err(sk), r;
		uint32_t n, cap = sw_staging_cap(sk);

		if (err)
			return sent ? (ssize_t)sent : -err;
		sw_progress(sk); /* may take the peer's HELLO, and with it out_max */
		n = (uint32_t)(left < sk->out_max ? left : sk->out_max);
		if (!sk->pc.hello_in) {
			r = -EAGAIN;
		} else if (left >= sk->out_threshold && (nb || left <= cap || sk->sndtimeo_ns)) {
			/* What fits a staging buffer is copied and goes from
			 * there, with no registration, and the call returns,
			 * even while the last transfer is outstanding.  With
			 * SO_SNDTIMEO, larger sends go so too, a buffer at a
			 * time: a send straight from the application's buffer
			 * could not return before the peer has read it. */
			if (n > cap)
				n = cap;
			r = sw_large_copy(sk, p + sent, n);
			if (r == 0) {
				sent += n;
				continue;
			}
		} else if (sk->nout || sk->pend.on) {
			r = -EAGAIN; /* the stream's order: after those */
		} else if (left >= sk->out_threshold) {
			/* Larger sends go straight from the buffer, and wait. */
			uint64_t start = sk->pc.out.end;

			r = sw_large_begin(sk, p + sent, n);
			if (r == 0) {
				while (sk->nout && !sk->err) {
					sw_progress(sk);
					if (sk->nout)
						wait_input(sk, 0);
				}
				/* Failed part-way: the bytes the peer took (the
				 * head, and what done messages covered) count as
				 * sent, as TCP's would; the next call fails. */
				if (sk->out_err) {
					sent += sk->pc.out.off - start;
					return sent ? (ssize_t)sent : -sk->out_err;
				}
				sent += n;
				continue;
			}
		} else {
			r = sw_send_small(sk, p + sent,
					  (uint32_t)(left < INT32_MAX ? left : INT32_MAX));
			if (r > 0) {
				sent += (size_t)r;
				continue;
			}
		}
		if (r != -EAGAIN)
			return sent ? (ssize_t)sent : r;
		if (nb) {
			sk->want_write = true;
			return sent ? (ssize_t)sent : -EAGAIN;
		}
		if (wait_input(sk, deadline))
			return sent ? (ssize_t)sent : -EAGAIN;
	}
	sk->want_write = false;
	return (ssize_t)sent;
}

/* Release sk after a send or a receive: the bytes n, or -1 with errno -n. */
static ssize_t data_done(struct sw_sock *sk, ssize_t n)
{
	direct_end(sk);
	if (n == -EAGAIN)
		sw_ready_reset(sk);
	sw_update_ready(sk);
	pthread_mutex_unlock(&sk->lock);
	sw_put(sk);
	if (n < 0)
		return fail((int)-n);
	return n;
}

static int check_flags(int flags, int allowed)
{
	return flags & ~(allowed | MSG_DONTWAIT | MSG_NOSIGNAL) ? EOPNOTSUPP : 0;
}

/* An iovec the calls take: 0, or the errno.  As readv and writev, the
 * lengths must add up to what an ssize_t result can report. */
static int check_iov(const struct iovec *iov, int iovcnt)
{
	size_t total = 0;

	if (iovcnt < 0 || iovcnt > IOV_MAX)
		return EINVAL;
	if (iovcnt && !iov)
		return EFAULT;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > (size_t)SSIZE_MAX - total)
			return EINVAL;
		total += iov[i].iov_len;
	}
	return 0;
}

ssize_t nsw_writev(int s, const struct iovec *iov, int iovcnt)
{
	struct sw_sock *sk;
	ssize_t total = 0;
	int err = check_iov(iov, iovcnt);

	if (err)
		return fail(err);
	sk = get(s);
	if (!sk)
		return -1;
	pthread_mutex_lock(&sk->lock);
	uint64_t deadline = deadline_of(sk->sndtimeo_ns);
	for (int i = 0; i < iovcnt; i++) {
		ssize_t n;

		if (!iov[i].iov_len)
			continue;
		n = iov[i].iov_base
			? send_locked(sk, iov[i].iov_base, iov[i].iov_len, sk->nonblock, deadline)
			: -EFAULT;
		if (n < 0) {
			if (total)
				break;
			return done(sk, -1, (int)-n);
		}
		total += n;
		if ((size_t)n < iov[i].iov_len)
			break;
	}
	direct_end(sk);
	sw_update_ready(sk);
	pthread_mutex_unlock(&sk->lock);
	sw_put(sk);
	return total;
}

ssize_t nsw_send(int s, const void *buf, size_t len, int flags)
{
	struct sw_sock *sk;
	ssize_t n;
	int err = check_flags(flags, 0);

	if (err)
		return fail(err);
	if (!buf && len)
		return fail(EFAULT);
	if (len > (size_t)SSIZE_MAX)
		return fail(EINVAL);
	sk = get(s);
	if (!sk)
		return -1;
	pthread_mutex_lock(&sk->lock);
	n = send_locked(sk, buf, len, sk->nonblock || (flags & MSG_DONTWAIT),
			deadline_of(sk->sndtimeo_ns));
	return data_done(sk, n);
}

/* Copy up to len bytes waiting for the application (sk->lock held). */
static size_t take_bytes(struct sw_sock *sk, uint8_t *p, size_t len)
{
	size_t got = 0;

	while (got < len && sk->dq_len) {
		struct sw_piece *d = &sk->dq[sk->dq_head];
		uint32_t n = (uint32_t)(len - got < d->len ? len - got : d->len);

		memcpy(p + got, d->p, n);
		got += n;
		sw_consumed(sk, n);
	}
	return got;
}

/*
 * Take the transfer's next chunk straight into dst (room bytes): the bytes
 * taken, 0 if there is none to take now, -EAGAIN if it cannot be done
 * (take the bytes through the bounce), or the connection's errno.  The NIC writes
 * dst meanwhile, so this waits for the chunk whatever the socket's
 * timeout, and a connection that fails first is closed before returning,
 * which ends every operation on dst.
 */
static int zc_take(struct sw_sock *sk, uint8_t *dst, uint32_t room)
{
	int r = sw_zc_begin(sk, dst, room);

	if (r <= 0)
		return r ? -EAGAIN : 0;
	while (!sk->zc_got && !sk->err) {
		sw_progress(sk);
		if (!sk->zc_got && !sk->err)
			wait_input(sk, 0);
	}
	if (!sk->zc_got) {
		sw_teardown(sk);
		return -sk->err;
	}
	r = (int)sk->zc_got;
	sk->zc_got = 0;
	sk->stats.bytes_received += (uint64_t)r;
	return r;
}

/*
 * Receive into iov (sk->lock held): the bytes taken, 0 at end-of-file, or a
 * negative errno.  all: wait for every byte (MSG_WAITALL).
 */
static ssize_t recv_locked(struct sw_sock *sk, const struct iovec *iov, int iovcnt, bool nb,
			   bool all)
{
	size_t want = 0, got = 0;
	int i = 0;
	size_t in_iov = 0;
	uint64_t deadline = deadline_of(sk->rcvtimeo_ns);
	bool zc = true;

	for (int k = 0; k < iovcnt; k++)
		want += iov[k].iov_len;
	if (!want)
		return 0;
	if (sk->st == SW_NEW || sk->st == SW_LISTEN || sk->st == SW_CONNECTING)
		return -ENOTCONN;
	sk->connect_done = false;
	for (;;) {
		/* A reader with room for a chunk takes it straight (below):
		 * the engine does not start one into the bounce meanwhile. */
		sk->zc_reader = zc && !nb && i < iovcnt && iov[i].iov_len - in_iov >= SW_ZC_MIN;
		sw_progress(sk);
		while (sk->dq_len && i < iovcnt) {
			size_t n = take_bytes(sk, (uint8_t *)iov[i].iov_base + in_iov,
					      iov[i].iov_len - in_iov);

			got += n;
			in_iov += n;
			if (in_iov == iov[i].iov_len) {
				i++;
				in_iov = 0;
			}
		}
		if (got)
			sw_progress(sk); /* the receives emptied go back, a chunk may follow */
		if (got == want || (got && !all))
			return (ssize_t)got;
		if (sk->dq_len)
			continue; /* more came meanwhile, perhaps before an end */
		if (sk->err && !sk->dq_len)
			return got ? (ssize_t)got : -sk->err;
		if (sk->rd_shut || sk->pc.in.shut || sk->st == SW_DOWN) {
			sk->eof_told = sk->eof_told || !got;
			return (ssize_t)got;
		}
		if (nb)
			return got ? (ssize_t)got : -EAGAIN;
		if (sk->zc_reader) {
			uint8_t *dst = (uint8_t *)iov[i].iov_base + in_iov;
			size_t room = iov[i].iov_len - in_iov;
			int r = zc_take(sk, dst, room > UINT32_MAX ? UINT32_MAX : (uint32_t)room);

			if (r > 0) {
				got += (size_t)r;
				in_iov += (size_t)r;
				if (in_iov == iov[i].iov_len) {
					i++;
					in_iov = 0;
				}
				continue;
			}
			if (r == -EAGAIN) {
				zc = false; /* as the bytes come, then */
				continue;
			}
			if (r < 0)
				return got ? (ssize_t)got : r;
		}
		if (wait_input(sk, deadline))
			return got ? (ssize_t)got : -EAGAIN;
	}
}

static ssize_t recv_common(int s, const struct iovec *iov, int iovcnt, int flags)
{
	struct sw_sock *sk = get(s);
	ssize_t n;

	if (!sk)
		return -1;
	pthread_mutex_lock(&sk->lock);
	n = recv_locked(sk, iov, iovcnt, sk->nonblock || (flags & MSG_DONTWAIT),
			(flags & MSG_WAITALL) != 0);
	sk->zc_reader = false;
	direct_end(sk);
	sw_progress(sk); /* a chunk may start into the bounce now */
	return data_done(sk, n);
}

ssize_t nsw_recv(int s, void *buf, size_t len, int flags)
{
	struct iovec v = {.iov_base = buf, .iov_len = len};
	int err = check_flags(flags, MSG_WAITALL);

	if (err)
		return fail(err);
	if (!buf && len)
		return fail(EFAULT);
	if (len > (size_t)SSIZE_MAX)
		return fail(EINVAL);
	return recv_common(s, &v, 1, flags);
}

ssize_t nsw_readv(int s, const struct iovec *iov, int iovcnt)
{
	int err = check_iov(iov, iovcnt);

	if (err)
		return fail(err);
	for (int i = 0; i < iovcnt; i++)
		if (iov[i].iov_len && !iov[i].iov_base)
			return fail(EFAULT);
	return recv_common(s, iov, iovcnt, 0);
}

/* ---- Ending ------------------------------------------------------------------------- */

int nsw_shutdown(int s, int how)
{
	struct sw_sock *sk = get(s);

	if (!sk)
		return -1;
	pthread_mutex_lock(&sk->lock);
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return done(sk, -1, EINVAL);
	if (sk->st != SW_CONNECTED && sk->st != SW_DOWN)
		return done(sk, -1, ENOTCONN);
	if (how != SHUT_WR)
		sk->rd_shut = true;
	if (how != SHUT_RD && !sk->wr_shut) {
		sk->wr_shut = true;
		sk->shutdown_due = true;
		sw_progress(sk);
	}
	pthread_cond_broadcast(&sk->cond);
	return done(sk, 0, 0);
}

/* Send what is owed and SHUTDOWN, within SW_CLOSE_NS; else abort. */
static void close_graceful(struct sw_sock *sk)
{
	uint64_t deadline = sw_now_ns() + SW_CLOSE_NS;

	sk->wr_shut = true;
	for (;;) {
		bool sending = false;

		sw_progress(sk);
		/* Data unread, or arriving while this side closes: the peer
		 * must learn that it was lost (TCP resets too). Decided before
		 * the SHUTDOWN goes, so the peer never takes it for an EOF. */
		if (sk->dq_len || sk->nin) {
			sw_abort(sk, NSS_ABORT_CLOSED, ECONNRESET);
			return;
		}
		if (!sk->pc.out.shut && !sk->shutdown_due) {
			sk->shutdown_due = true;
			continue;
		}
		for (uint32_t i = 0; i < sk->nsend; i++)
			sending |= sk->tx[i].busy;
		if (sk->err || sk->spi == INVALID_SOCKET || (sk->pc.out.shut && !sending))
			return;
		if (wait_change(sk, deadline)) {
			sw_abort(sk, NSS_ABORT_CLOSED, ECONNRESET);
			return;
		}
	}
}

int nsw_close(int s)
{
	struct sw_sock *sk = get(s);

	if (!sk)
		return -1;
	sw_closing(sk);
	pthread_mutex_lock(&sk->lock);
	if (sk->st == SW_CONNECTED && !sk->err && sk->spi != INVALID_SOCKET)
		close_graceful(sk);
	sw_fail(sk, EBADF);
	sw_teardown(sk);
	pthread_mutex_unlock(&sk->lock);
	sw_remove(sk);
	sock_free(sk);
	return 0;
}

/* ---- Options ------------------------------------------------------------------------- */

static int opt_int(const void *v, socklen_t len, int *out)
{
	if (!v)
		return EFAULT;
	if (len < sizeof(int))
		return EINVAL;
	memcpy(out, v, sizeof(int));
	return 0;
}

static int opt_timeo(const void *v, socklen_t len, uint64_t *out)
{
	struct timeval tv;

	if (!v)
		return EFAULT;
	if (len < sizeof(tv))
		return EINVAL;
	memcpy(&tv, v, sizeof(tv));
	if (tv.tv_sec < 0 || tv.tv_usec < 0 || tv.tv_usec >= 1000000)
		return EDOM;
	*out = (uint64_t)tv.tv_sec * 1000000000ull + (uint64_t)tv.tv_usec * 1000ull;
	return 0;
}

/* An option the negotiation announces: valid (ok), and set before it. */
static int set_before(bool ok, bool before, uint32_t *field, int v)
{
	if (!ok)
		return EINVAL;
	if (!before)
		return EISCONN;
	*field = (uint32_t)v;
	return 0;
}

int nsw_setsockopt(int s, int level, int optname, const void *optval, socklen_t optlen)
{
	struct sw_sock *sk = get(s);
	int v = 0, err = 0;
	bool before = true;

	if (!sk)
		return -1;
	pthread_mutex_lock(&sk->lock);
	before = sk->st == SW_NEW || sk->st == SW_LISTEN;
	if (level == SOL_SOCKET && (optname == SO_RCVTIMEO || optname == SO_SNDTIMEO)) {
		err = opt_timeo(optval, optlen,
				optname == SO_RCVTIMEO ? &sk->rcvtimeo_ns : &sk->sndtimeo_ns);
		return done(sk, err ? -1 : 0, err);
	}
	err = opt_int(optval, optlen, &v);
	if (err)
		return done(sk, -1, err);
	if (level == SOL_SOCKET && optname == SO_RCVBUF) {
		/* Sizes the receive pool: fixed once connected. */
		sk->rcvbuf = v < (int)SW_RCVBUF_MIN ? (int)SW_RCVBUF_MIN : v;
	} else if (level == SOL_SOCKET && optname == SO_SNDBUF) {
		sk->sndbuf = v < 4096 ? 4096 : v;
	} else if (level == IPPROTO_TCP && optname == TCP_NODELAY) {
		/* Small sends always go at once. */
	} else if (level == NSW_SOL && optname == NSW_RDMA_THRESHOLD) {
		/* Copying beats any RDMA below 2 KiB (the protocol's floor). */
		err = set_before(v >= (int)NSS_MIN_THRESHOLD, before, &sk->threshold, v);
	} else if (level == NSW_SOL && optname == NSW_MAX_RDMA) {
		err = set_before(v >= 4096, before, &sk->max_rdma, v);
	} else if (level == NSW_SOL && optname == NSW_NONBLOCK) {
		sk->nonblock = v != 0;
	} else if (level == NSW_SOL && optname == NSW_PATH) {
		if (v != 0 && v != NSW_PATH_READ && v != NSW_PATH_WRITE)
			err = EINVAL;
		else if (!before)
			err = EISCONN;
		else
			sk->path_pref = v;
	} else {
		err = ENOPROTOOPT;
	}
	return done(sk, err ? -1 : 0, err);
}

int nsw_getsockopt(int s, int level, int optname, void *optval, socklen_t *optlen)
{
	struct sw_sock *sk = get(s);
	int v = 0, err = 0;
	const void *src = &v;
	socklen_t len = sizeof(v);

	if (!sk)
		return -1;
	pthread_mutex_lock(&sk->lock);
	if (!optval || !optlen)
		return done(sk, -1, EFAULT);
	if (level == SOL_SOCKET && optname == SO_ERROR) {
		v = sk->so_error ? sk->so_error : sk->err == EBADF ? 0 : sk->err;
		sk->so_error = 0;
		sk->connect_done = false; /* its outcome is taken */
	} else if (level == SOL_SOCKET && optname == SO_RCVBUF) {
		v = sk->rcvbuf;
	} else if (level == SOL_SOCKET && optname == SO_SNDBUF) {
		v = sk->sndbuf;
	} else if (level == SOL_SOCKET && optname == SO_TYPE) {
		v = SOCK_STREAM;
	} else if (level == IPPROTO_TCP && optname == TCP_NODELAY) {
		v = 1;
	} else if (level == NSW_SOL && optname == NSW_RDMA_THRESHOLD) {
		v = (int)(sk->pc.hello_in ? sk->out_threshold : sk->threshold);
	} else if (level == NSW_SOL && optname == NSW_MAX_RDMA) {
		v = (int)(sk->pc.hello_in ? sk->out_max : sk->max_rdma);
	} else if (level == NSW_SOL && optname == NSW_NONBLOCK) {
		v = sk->nonblock;
	} else if (level == NSW_SOL && optname == NSW_PATH) {
		v = sk->pc.hello_in ? (int)sk->pc.out_path | (int)sk->pc.in_path << 4 : 0;
	} else if (level == NSW_SOL && optname == NSW_STATS) {
		src = &sk->stats;
		len = sizeof(sk->stats);
	} else {
		err = ENOPROTOOPT;
	}
	if (!err && *optlen < len)
		err = EINVAL;
	if (!err) {
		memcpy(optval, src, len);
		*optlen = len;
	}
	return done(sk, err ? -1 : 0, err);
}

static int name_of(int s, struct sockaddr *addr, socklen_t *addrlen, bool peer)
{
	struct sw_sock *sk = get(s);
	struct sockaddr_in a;

	if (!sk)
		return -1;
	pthread_mutex_lock(&sk->lock);
	if (!addr || !addrlen)
		return done(sk, -1, EFAULT);
	if (peer && sk->st != SW_CONNECTED && sk->st != SW_DOWN)
		return done(sk, -1, ENOTCONN);
	a = peer ? sk->peer : sk->local;
	a.sin_family = AF_INET;
	memcpy(addr, &a, *addrlen < sizeof(a) ? *addrlen : sizeof(a));
	*addrlen = sizeof(a);
	return done(sk, 0, 0);
}

int nsw_getsockname(int s, struct sockaddr *addr, socklen_t *addrlen)
{
	return name_of(s, addr, addrlen, false);
}

int nsw_getpeername(int s, struct sockaddr *addr, socklen_t *addrlen)
{
	return name_of(s, addr, addrlen, true);
}

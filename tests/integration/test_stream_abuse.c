/*
 * The switch's stream sockets (nicsim_switch.h) misused: descriptors that
 * are not stream sockets (a kernel descriptor, one closed, one never
 * made), NULL pointers, lengths no call can take, option values and sizes
 * out of range, calls pending when their socket is closed, and a process
 * that forks after using the switch.  Each call must fail with the errno
 * the header gives, and leave the socket and the connection usable; no
 * call may crash or hang.  The NICs are the test_spi_* fixture
 * (nstspidata.h), which checks after each test that the TPT occupancy is
 * back where it was.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nicsim_switch.h"
#include "nstest.h"
#include "nstsw.h"
#include "nstnic.h"
#include "nstspidata.h"

/* ThreadSanitizer cannot start threads in the child of a process with
 * threads: there, the fork test's child only checks the parent's sockets. */
#if defined(__SANITIZE_THREAD__)
#define CHILD_CONNECTS 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CHILD_CONNECTS 0
#endif
#endif
#ifndef CHILD_CONNECTS
#define CHILD_CONNECTS 1
#endif

/* The call's result is -1 with errno want. */
#define FAILS(call, want)                                                                      \
	do {                                                                                   \
		long long r_;                                                                  \
		errno = 0;                                                                     \
		r_ = (long long)(call);                                                        \
		NST_CHECK_(r_ == -1 && errno == (want), CU_FALSE, "%s: %lld, %s; want -1, %s", \
			   #call, r_, strerror(errno), strerror(want));                        \
	} while (0)

static bool readable_within(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

/* A listening socket on srv_addr, port in *port. */
static int listener(const char *srv_addr, uint16_t *port)
{
	struct sockaddr_in a;
	int l = nsw_socket(AF_INET, SOCK_STREAM, 0);

	*port = next_port++;
	a = addr_of(srv_addr, *port);
	NST_REQUIRE(l >= 0);
	NST_REQUIRE_EQ(nsw_bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	NST_REQUIRE_EQ(nsw_listen(l, 4), 0);
	return l;
}

/* A connected pair: *srv on A, *cli on B.  The connect completes only
 * once the server accepts: it is started non-blocking, then awaited. */
static void pair(int *srv, int *cli)
{
	uint16_t port;
	int l = listener(ADDR_A, &port), c = nsw_socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in from = addr_of(ADDR_B, 0), to = addr_of(ADDR_A, port);
	int err = -1;
	socklen_t len = sizeof(err);

	NST_REQUIRE(c >= 0);
	NST_REQUIRE_EQ(nsw_bind(c, (struct sockaddr *)&from, sizeof(from)), 0);
	NST_REQUIRE_EQ(nsw_connect(c, (struct sockaddr *)&to, sizeof(to)), -1);
	NST_REQUIRE_EQ(errno, EINPROGRESS);
	*srv = nsw_accept(l, NULL, NULL);
	NST_REQUIRE(*srv >= 0);
	NST_REQUIRE(readable_within(c, WAIT_MS));
	NST_REQUIRE_EQ(nsw_getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len), 0);
	NST_REQUIRE_EQ(err, 0);
	nst_sw_set_int(c, NSW_SOL, NSW_NONBLOCK, 0);
	*cli = c;
	NST_EQ(nsw_close(l), 0);
}

/* n bytes from a to b arrive whole and in order. */
static void still_works(int a, int b, size_t n)
{
	static uint8_t out[256 << 10], in[256 << 10];

	NST_REQUIRE(n <= sizeof(out));
	for (size_t i = 0; i < n; i++)
		out[i] = (uint8_t)(i * 7 + n);
	memset(in, 0, n);
	NST_EQ(nsw_send(a, out, n, 0), (ssize_t)n);
	NST_EQ(nsw_recv(b, in, n, MSG_WAITALL), (ssize_t)n);
	NST_TRUE(memcmp(in, out, n) == 0);
}

/* ---- Descriptors that are not stream sockets ----------------------------------------- */

/* Every call on fd fails with EBADF. */
static void all_ebadf(int fd)
{
	struct sockaddr_in a = addr_of(ADDR_A, next_port++);
	socklen_t alen = sizeof(a), olen = sizeof(int);
	char buf[8] = {0};
	struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
	int v = 1;

	FAILS(nsw_bind(fd, (struct sockaddr *)&a, sizeof(a)), EBADF);
	FAILS(nsw_listen(fd, 1), EBADF);
	FAILS(nsw_accept(fd, NULL, NULL), EBADF);
	FAILS(nsw_connect(fd, (struct sockaddr *)&a, sizeof(a)), EBADF);
	FAILS(nsw_send(fd, buf, 1, 0), EBADF);
	FAILS(nsw_recv(fd, buf, 1, 0), EBADF);
	FAILS(nsw_writev(fd, &iov, 1), EBADF);
	FAILS(nsw_readv(fd, &iov, 1), EBADF);
	FAILS(nsw_shutdown(fd, SHUT_RDWR), EBADF);
	FAILS(nsw_getsockopt(fd, SOL_SOCKET, SO_ERROR, &v, &olen), EBADF);
	FAILS(nsw_setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)), EBADF);
	FAILS(nsw_getsockname(fd, (struct sockaddr *)&a, &alen), EBADF);
	FAILS(nsw_getpeername(fd, (struct sockaddr *)&a, &alen), EBADF);
	FAILS(nsw_close(fd), EBADF);
}

static void test_not_stream_sockets(void)
{
	int kfd = eventfd(0, EFD_CLOEXEC), s;

	NST_REQUIRE(kfd >= 0);
	all_ebadf(-1);
	all_ebadf(INT_MAX);
	/* A descriptor of the kernel's: refused, and left open. */
	all_ebadf(kfd);
	NST_EQ(write(kfd, &(uint64_t){1}, sizeof(uint64_t)), (ssize_t)sizeof(uint64_t));
	close(kfd);
	/* A stream socket closed: everything after is EBADF. */
	s = nsw_socket(AF_INET, SOCK_STREAM, 0);
	NST_REQUIRE(s >= 0);
	NST_EQ(nsw_close(s), 0);
	all_ebadf(s);
}

/* ---- Arguments ---------------------------------------------------------------------- */

static void test_bad_arguments(void)
{
	char buf[64] = {0};
	struct iovec iov[2] = {{.iov_base = buf, .iov_len = 8}, {.iov_base = buf, .iov_len = 8}};
	struct iovec huge[2] = {{.iov_base = buf, .iov_len = (size_t)SSIZE_MAX},
				{.iov_base = buf, .iov_len = 8}};
	struct nsw_stats st;
	socklen_t len = 2;
	int srv, cli, v = 0;

	pair(&srv, &cli);
	FAILS(nsw_send(cli, NULL, 10, 0), EFAULT);
	FAILS(nsw_recv(cli, NULL, 10, 0), EFAULT);
	/* A length no ssize_t result can report: EINVAL, as the kernel
	 * gives, without touching the buffer, waiting or not. */
	FAILS(nsw_send(cli, buf, SIZE_MAX, 0), EINVAL);
	FAILS(nsw_send(cli, buf, SIZE_MAX, MSG_DONTWAIT), EINVAL);
	FAILS(nsw_send(cli, buf, (size_t)SSIZE_MAX + 1, MSG_DONTWAIT), EINVAL);
	FAILS(nsw_recv(cli, buf, SIZE_MAX, MSG_DONTWAIT), EINVAL);
	FAILS(nsw_writev(cli, huge, 2), EINVAL);
	FAILS(nsw_readv(cli, huge, 2), EINVAL);
	FAILS(nsw_writev(cli, iov, -1), EINVAL);
	FAILS(nsw_writev(cli, iov, IOV_MAX + 1), EINVAL);
	FAILS(nsw_readv(cli, iov, -1), EINVAL);
	FAILS(nsw_writev(cli, NULL, 1), EFAULT);
	FAILS(nsw_send(cli, buf, 1, MSG_PEEK), EOPNOTSUPP);
	FAILS(nsw_recv(cli, buf, 1, MSG_OOB), EOPNOTSUPP);
	FAILS(nsw_shutdown(cli, 7), EINVAL);
	/* Options: short, NULL, unknown, out of range, too late. */
	FAILS(nsw_getsockopt(cli, NSW_SOL, NSW_STATS, &st, &len), EINVAL);
	FAILS(nsw_getsockopt(cli, SOL_SOCKET, SO_ERROR, NULL, &len), EFAULT);
	FAILS(nsw_setsockopt(cli, SOL_SOCKET, SO_SNDBUF, &v, 2), EINVAL);
	FAILS(nsw_setsockopt(cli, SOL_SOCKET, SO_SNDBUF, NULL, sizeof(v)), EFAULT);
	FAILS(nsw_setsockopt(cli, NSW_SOL, 99, &v, sizeof(v)), ENOPROTOOPT);
	FAILS(nsw_setsockopt(cli, NSW_SOL, NSW_STATS, &v, sizeof(v)), ENOPROTOOPT);
	v = 4095;
	FAILS(nsw_setsockopt(cli, NSW_SOL, NSW_MAX_RDMA, &v, sizeof(v)), EINVAL);
	v = 2047;
	FAILS(nsw_setsockopt(cli, NSW_SOL, NSW_RDMA_THRESHOLD, &v, sizeof(v)), EINVAL);
	v = 3;
	FAILS(nsw_setsockopt(cli, NSW_SOL, NSW_PATH, &v, sizeof(v)), EINVAL);
	v = 1 << 20;
	FAILS(nsw_setsockopt(cli, NSW_SOL, NSW_RDMA_THRESHOLD, &v, sizeof(v)), EISCONN);
	FAILS(nsw_setsockopt(cli, SOL_SOCKET, SO_RCVTIMEO, &(struct timeval){0, 1000000},
			     sizeof(struct timeval)),
	      EDOM);
	/* None of it harmed the connection. */
	still_works(cli, srv, 100);
	still_works(srv, cli, 200000);
	NST_EQ(nsw_close(cli), 0);
	NST_EQ(nsw_close(srv), 0);
}

/* ---- Calls pending when their socket is closed ------------------------------------------ */

struct pending {
	int s;
	pid_t tid;
	long long rc;
	int err;
};

static void *accept_main_(void *arg)
{
	struct pending *p = arg;

	__atomic_store_n(&p->tid, gettid(), __ATOMIC_RELEASE);
	p->rc = nsw_accept(p->s, NULL, NULL);
	p->err = errno;
	return NULL;
}

static void *recv_main_(void *arg)
{
	struct pending *p = arg;
	char c;

	__atomic_store_n(&p->tid, gettid(), __ATOMIC_RELEASE);
	p->rc = nsw_recv(p->s, &c, 1, 0);
	p->err = errno;
	return NULL;
}

/* A call waiting in a socket that another thread closes ends with EBADF,
 * as nicsim_switch.h says, and nsw_close waits for it to leave. */
static void test_pending_calls_end_with_ebadf(void)
{
	struct pending pa = {0}, pr = {0};
	pthread_t t;
	uint16_t port;
	int srv, cli;

	pa.s = listener(ADDR_A, &port);
	pthread_create(&t, NULL, accept_main_, &pa);
	wait_until_blocked(&pa.tid);
	NST_EQ(nsw_close(pa.s), 0);
	pthread_join(t, NULL);
	NST_CHECK_(pa.rc == -1 && pa.err == EBADF, CU_FALSE,
		   "pending accept on a closed listener: %lld, %s; want -1, EBADF", pa.rc,
		   strerror(pa.err));

	pair(&srv, &cli);
	pr.s = srv;
	pthread_create(&t, NULL, recv_main_, &pr);
	wait_until_blocked(&pr.tid);
	NST_EQ(nsw_close(srv), 0);
	pthread_join(t, NULL);
	NST_CHECK_(pr.rc == -1 && pr.err == EBADF, CU_FALSE,
		   "pending recv on a closed socket: %lld, %s; want -1, EBADF", pr.rc,
		   strerror(pr.err));
	NST_EQ(nsw_close(cli), 0);
}

/* ---- Timeouts -------------------------------------------------------------------------- */

/* SO_SNDTIMEO bounds a blocking connect, as for TCP: when it passes before
 * the server accepts, EINPROGRESS, and the connect goes on as a
 * non-blocking one would. */
static void test_connect_honours_sndtimeo(void)
{
	struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
	uint16_t port;
	int l = listener(ADDR_A, &port), c = nsw_socket(AF_INET, SOCK_STREAM, 0), srv, err = -1;
	struct sockaddr_in from = addr_of(ADDR_B, 0), to = addr_of(ADDR_A, port);
	socklen_t len = sizeof(err);
	uint64_t t0;

	NST_REQUIRE(c >= 0);
	NST_EQ(nsw_setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)), 0);
	tv.tv_sec = WAIT_MS / 1000;
	NST_EQ(nsw_setsockopt(l, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	NST_REQUIRE_EQ(nsw_bind(c, (struct sockaddr *)&from, sizeof(from)), 0);
	t0 = nst_now_ns();
	FAILS(nsw_connect(c, (struct sockaddr *)&to, sizeof(to)), EINPROGRESS);
	/* The NIC alone gives up after seconds (its CM timeout and retries). */
	NST_LT(nst_now_ns() - t0, 1500000000ull);
	FAILS(nsw_connect(c, (struct sockaddr *)&to, sizeof(to)), EALREADY);
	srv = nsw_accept(l, NULL, NULL);
	NST_CHECK_(srv >= 0, CU_FALSE, "accept: %s", strerror(errno));
	if (srv < 0) {
		nsw_close(c);
		nsw_close(l);
		return;
	}
	NST_TRUE(readable_within(c, WAIT_MS));
	NST_EQ(nsw_getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len), 0);
	NST_EQ(err, 0);
	still_works(c, srv, 1000);
	NST_EQ(nsw_close(c), 0);
	NST_EQ(nsw_close(srv), 0);
	NST_EQ(nsw_close(l), 0);
}

/* ---- fork ------------------------------------------------------------------------------ */

/*
 * The child of a process that used the switch: the parent's sockets are
 * not its own (EBADF), and a socket of its own works: it connects to the
 * parent's listener on port and sends "child".  Its exit must leave the
 * parent's connections alone.  Exit status: 0, or the step that failed.
 */
static int fork_child(int inherited, uint16_t port)
{
	struct sockaddr_in to = addr_of(ADDR_A, port), from = addr_of(ADDR_B, 0);
	char c = 0;
	int s;

	alarm(60);
	if (nsw_send(inherited, "x", 1, 0) != -1 || errno != EBADF)
		return 10;
	if (nsw_close(inherited) != -1 || errno != EBADF)
		return 11;
	if (!CHILD_CONNECTS)
		exit(0);
	s = nsw_socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0) {
		fprintf(stderr, "child: nsw_socket: %s\n", strerror(errno));
		return 12;
	}
	if (nsw_bind(s, (struct sockaddr *)&from, sizeof(from)) ||
	    nsw_connect(s, (struct sockaddr *)&to, sizeof(to))) {
		fprintf(stderr, "child: bind or connect: %s\n", strerror(errno));
		return 13;
	}
	if (nsw_send(s, "child", 5, 0) != 5)
		return 14;
	/* The parent answers, then closes. */
	if (nsw_recv(s, &c, 1, 0) != 1 || c != '!' || nsw_recv(s, &c, 1, 0) != 0)
		return 15;
	/* exit, not _exit: the switch's own clean-up runs in the child too. */
	exit(0);
}

struct fork_args {
	int inherited;
	uint16_t port;
};

static int fork_child_main(void *arg)
{
	const struct fork_args *f = arg;

	return fork_child(f->inherited, f->port);
}

static void test_fork_child_starts_afresh(void)
{
	uint16_t port;
	int srv, cli, l, cs, status = -1;
	char got[8] = {0};
	struct fork_args fa;
	pid_t pid;

	pair(&srv, &cli);
	still_works(cli, srv, 1000);
	l = listener(ADDR_A, &port);
	/* A child that fails before connecting must not hold the accept. */
	NST_EQ(nsw_setsockopt(l, SOL_SOCKET, SO_RCVTIMEO, &(struct timeval){WAIT_MS / 1000 * 3, 0},
			      sizeof(struct timeval)),
	       0);
	fa = (struct fork_args){.inherited = cli, .port = port};
	pid = nst_fork(fork_child_main, &fa);
	NST_REQUIRE(pid > 0);
	cs = CHILD_CONNECTS ? nsw_accept(l, NULL, NULL) : 0;
	NST_CHECK_(cs >= 0, CU_FALSE, "accept of the child's connection: %s", strerror(errno));
	if (CHILD_CONNECTS && cs >= 0) {
		NST_EQ(nsw_recv(cs, got, 5, MSG_WAITALL), 5);
		NST_EQ(memcmp(got, "child", 5), 0);
		NST_EQ(nsw_send(cs, "!", 1, 0), 1);
		NST_EQ(nsw_close(cs), 0);
	}
	status = nst_wait(pid, WAIT_MS * 3);
	if (status == -ETIMEDOUT) {
		kill(pid, SIGKILL);
		status = nst_wait(pid, WAIT_MS);
	}
	NST_CHECK_(WIFEXITED(status) && WEXITSTATUS(status) == 0, CU_FALSE,
		   "the child's status is %#x (exit %d), want exit 0", status,
		   WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	/* The parent's connection, used before the fork, is untouched. */
	still_works(cli, srv, 100);
	still_works(srv, cli, 200000);
	NST_EQ(nsw_close(l), 0);
	NST_EQ(nsw_close(cli), 0);
	NST_EQ(nsw_close(srv), 0);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"not_stream_sockets", test_not_stream_sockets},
	    {"bad_arguments", test_bad_arguments},
	    {"pending_calls_end_with_ebadf", test_pending_calls_end_with_ebadf},
	    {"connect_honours_sndtimeo", test_connect_honours_sndtimeo},
	    {"fork_child_starts_afresh", test_fork_child_starts_afresh},
	    {NULL, NULL},
	};

	return spi_main(argc, argv, "stream_abuse", tests);
}

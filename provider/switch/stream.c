/*
 * nicsim-stream: a byte stream between a client and a server over the
 * switch's stream sockets (nicsim_switch.h) and, for comparison, over the
 * kernel's TCP, measured as rstream and iperf measure it.  `--help` says
 * how to run it; docs/stream-sockets.md says what it measures.
 *
 * This file arranges a run: a server alone (--server), or a client whose
 * servers are a remote one (--client), children of this process
 * (--loopback), or both (the TCP comparison of --tcp always runs against a
 * child on 127.0.0.1).  A child is forked before this process makes any
 * switch call, so each end has a switch of its own as two hosts would, and
 * it gets SIGKILL if this process dies.  It tells its port through a pipe,
 * whose end-of-file then says that it has ended.  Every test of every size
 * runs on each transport in turn, over one connection per transport.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stream.h"

/* One transport of a client's run: where it connects from and to, and
 * the server child that this process starts for it, if any. */
struct leg {
	const struct stream_backend *be;
	struct sockaddr_in local, server;
	bool child;
	pid_t pid;
	int fd; /* the child's pipe: its port, then end-of-file when it ends */
	struct stream_conn *conn;
};

static const struct stream_opts *report_opts;

/* The watchdog's last word: a JSON report still ends as a document. */
static void report_timeout(void)
{
	if (report_opts)
		stream_report_end(report_opts, false);
}

static const struct stream_backend *backend_of(unsigned transport)
{
	if (transport == ST_TCP)
		return &stream_tcp_backend;
	return &stream_switch_backend;
}

/* Wait up to ms for fd to be readable: 1 readable, 0 not in time, -errno. */
static int wait_readable(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	struct timespec t0, t1;
	int rc, left = ms;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		rc = poll(&p, 1, left);
		if (rc >= 0)
			return rc > 0;
		if (errno != EINTR)
			return -errno;
		if (stream_watch_signalled())
			return -EINTR; /* the watchdog, once started, says so */
		clock_gettime(CLOCK_MONOTONIC, &t1);
		left = ms -
		       (int)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0)
			return 0;
	}
}

/* How a child that was waited for ended, for a message. */
static const char *ended(int status, char *buf, size_t len)
{
	if (WIFEXITED(status))
		snprintf(buf, len, "exit status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "wait status 0x%x", status);
	return buf;
}

static void kill_child(struct leg *l)
{
	int status;

	kill(l->pid, SIGKILL);
	waitpid(l->pid, &status, 0);
	l->pid = 0;
	close(l->fd);
	l->fd = -1;
}

/* The server of l in a child process, listening once it returns 0 (its
 * port in l->server); 1 after saying why. */
static int start_child(struct leg *l, const struct stream_opts *o)
{
	pid_t parent = getpid();
	uint8_t port[2];
	char how[64];
	int p[2], rc;

	if (pipe2(p, O_CLOEXEC)) {
		stream_err("%s: pipe for the server: %s", l->be->name, strerror(errno));
		return 1;
	}
	fflush(stdout);
	fflush(stderr);
	l->pid = fork();
	if (l->pid < 0) {
		stream_err("%s: fork for the server: %s", l->be->name, strerror(errno));
		close(p[0]);
		close(p[1]);
		return 1;
	}
	if (l->pid == 0) {
		struct stream_opts co = *o;

		close(p[0]);
		stream_watch_forked();
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
			_exit(1);
		co.once = true;
		co.quiet = true;
		stream_err_prefix("server: ");
		if (stream_watch_start(o->timeout_s)) {
			stream_err("cannot start the watchdog thread");
			exit(1);
		}
		rc = stream_serve(l->be, &co, &l->server, p[1]);
		stream_watch_stop();
		exit(rc);
	}
	close(p[1]);
	l->fd = p[0];
	rc = wait_readable(l->fd, (int)o->timeout_s * 1000);
	if (rc > 0 && read(l->fd, port, sizeof(port)) == (ssize_t)sizeof(port)) {
		l->server.sin_port = htons((uint16_t)(port[0] | port[1] << 8));
		return 0;
	}
	if (rc == -EINTR) {
		kill_child(l);
		return 1;
	}
	if (rc == 0) {
		stream_err("%s: the server did not listen within %u s", l->be->name, o->timeout_s);
		kill_child(l);
		return 1;
	}
	/* It ended before listening, and said why. */
	waitpid(l->pid, &rc, 0);
	stream_err("%s: the server could not start (%s)", l->be->name, ended(rc, how, sizeof(how)));
	l->pid = 0;
	close(l->fd);
	l->fd = -1;
	return 1;
}

/* After the client's goodbye: the child must end, cleanly, in time. */
static int end_child(struct leg *l, const struct stream_opts *o)
{
	char how[64], c;
	int rc, status;

	rc = wait_readable(l->fd, (int)o->timeout_s * 1000);
	if (rc <= 0 || read(l->fd, &c, 1) != 0) {
		stream_err("%s: the server did not end within %u s of the client's goodbye",
			   l->be->name, o->timeout_s);
		kill_child(l);
		return 1;
	}
	close(l->fd);
	l->fd = -1;
	waitpid(l->pid, &status, 0);
	l->pid = 0;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	stream_err("%s: the server ended with %s", l->be->name, ended(status, how, sizeof(how)));
	return 1;
}

/* The transports of a client's run, in the order they run. */
static unsigned plan(const struct stream_opts *o, struct leg *legs)
{
	struct sockaddr_in lo = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	unsigned n = 0;

	if (o->transports & ST_SWITCH)
		legs[n++] = (struct leg){.be = backend_of(ST_SWITCH),
					 .local = o->bind,
					 .server = o->peer,
					 .child = o->role == ROLE_LOOPBACK,
					 .fd = -1};
	if (o->transports & ST_TCP) {
		bool given = !o->tcp_on_loopback || o->transports == ST_TCP;

		legs[n++] = (struct leg){.be = backend_of(ST_TCP),
					 .local = given ? o->bind : lo,
					 .server = given ? o->peer : lo,
					 .child = o->tcp_on_loopback,
					 .fd = -1};
	}
	return n;
}

static int run_client(struct stream_opts *o)
{
	struct leg legs[2];
	unsigned n = plan(o, legs), i, k;
	bool ok = true, bye;

	/* The signals are taken and the report is open before anything
	 * waits, even for a server child that does not start; the children
	 * are forked while this process has one thread, and the watchdog
	 * starts after them. */
	report_opts = o;
	stream_watch_on_timeout(report_timeout);
	if (stream_watch_take_signals()) {
		stream_err("cannot take signals: %s", strerror(errno));
		ok = false;
	}
	stream_report_begin(o);
	for (i = 0; i < n && ok; i++)
		if (legs[i].child && start_child(&legs[i], o))
			ok = false;
	if (stream_watch_start(o->timeout_s)) {
		stream_err("cannot start the watchdog thread");
		ok = false;
	}
	for (i = 0; i < n && ok; i++) {
		legs[i].conn = stream_connect(legs[i].be, o, &legs[i].local, &legs[i].server);
		ok = legs[i].conn != NULL;
	}
	for (k = 0; k < o->nsizes && ok; k++) {
		for (i = 0; i < n && ok; i++) {
			struct stream_result r;

			ok = !stream_test(legs[i].conn, o, o->sizes[k], &r);
			if (ok)
				stream_report(o, &r);
		}
	}
	/* After a failure the children have said what they had to; ended
	 * first, they do not report the connection closing under them. */
	for (i = 0; i < n && !ok; i++)
		if (legs[i].pid)
			kill_child(&legs[i]);
	bye = ok;
	for (i = 0; i < n; i++)
		if (stream_disconnect(legs[i].conn, bye))
			ok = false;
	for (i = 0; i < n; i++)
		if (legs[i].pid && end_child(&legs[i], o))
			ok = false;
	stream_watch_check_signal(); /* the report ends as interrupted */
	stream_report_end(o, ok);
	stream_watch_stop();
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	struct stream_opts o;
	int rc;

	/* Each line as it happens, also into a pipe or a log. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = stream_parse_args(argc, argv, &o);
	if (rc)
		return rc == 1 ? 0 : 2;
	/* A peer that goes away is an error of the call, not a signal. */
	signal(SIGPIPE, SIG_IGN);
	if (!o.seed_set) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		o.seed =
		    ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 48);
	}
	if (o.role != ROLE_SERVER)
		return run_client(&o);
	if (stream_watch_start(o.timeout_s)) {
		stream_err("cannot start the watchdog thread");
		return 1;
	}
	rc = stream_serve(backend_of(o.transports), &o, &o.bind, -1);
	stream_watch_stop();
	return rc;
}

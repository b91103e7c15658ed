/*
 * stream_watch.c: nicsim-stream's errors and its watchdog.
 *
 * Every call that waits is bounded by the watchdog: a thread that ends the
 * process when nothing has moved for --timeout seconds while it is armed.
 * It is disarmed only where a server waits for what only the client can
 * start (the next client, the next test): there, the client's own watchdog
 * bounds the wait, because a client that gives up closes its connection,
 * and a client that dies has its connection closed by its system.
 *
 * The watchdog also takes SIGINT, SIGTERM and SIGHUP: it says which came,
 * ends the JSON report as a document (as after a timeout), and exits with
 * 128 plus the signal's number, as a shell reports a process a signal
 * ended.  The signals can be taken before the thread starts
 * (stream_watch_take_signals), so that a process forks its children with
 * one thread and a signal meanwhile still counts; a child starts from
 * nothing (stream_watch_forked), with a watchdog of its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "stream.h"

/* ---- Errors ------------------------------------------------------------- */

static char last_err[1024];
static const char *err_prefix = "";

void stream_err_prefix(const char *prefix)
{
	err_prefix = prefix;
}

void stream_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_err, sizeof(last_err), fmt, ap);
	va_end(ap);
	fflush(stdout);
	fprintf(stderr, STREAM_PROG ": %s%s\n", err_prefix, last_err);
}

const char *stream_last_err(void)
{
	return last_err;
}

uint64_t stream_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- The watchdog ------------------------------------------------------- */

static struct {
	pthread_t thread;
	bool running;
	atomic_bool stop;
	pthread_mutex_t lock;
	int wake[2]; /* a byte: stop, or a signal came */
	unsigned timeout_s;
	char what[256]; /* under lock */
	atomic_uint_fast64_t progress;
	atomic_bool armed;
	void (*on_timeout)(void);
} watch = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = {-1, -1}};

static volatile sig_atomic_t got_signal;

void stream_watch_tick(void)
{
	atomic_fetch_add_explicit(&watch.progress, 1, memory_order_relaxed);
}

void stream_watch_arm(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&watch.lock);
	va_start(ap, fmt);
	vsnprintf(watch.what, sizeof(watch.what), fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&watch.lock);
	stream_watch_tick();
	atomic_store(&watch.armed, true);
}

void stream_watch_disarm(void)
{
	atomic_store(&watch.armed, false);
}

void stream_watch_on_timeout(void (*fn)(void))
{
	watch.on_timeout = fn;
}

/* Async-signal-safe.  A full pipe means the watchdog has a wake-up due. */
static void wake_watchdog(void)
{
	int e = errno;
	ssize_t r = write(watch.wake[1], "", 1);

	(void)r;
	errno = e;
}

static void on_signal(int signo)
{
	got_signal = signo;
	wake_watchdog();
}

static const char *sig_name(int sig)
{
	return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP";
}

/* The report ends, and so does the process.  A stdout that nobody reads
 * may hold the last lines up: SIGALRM (its default action) ends the
 * process after 3 s whatever. */
_Noreturn static void give_up(int status)
{
	signal(SIGALRM, SIG_DFL);
	alarm(3);
	if (watch.on_timeout)
		watch.on_timeout();
	fflush(stdout);
	_exit(status);
}

void stream_watch_check_signal(void)
{
	int sig = got_signal;

	if (sig) {
		stream_err("interrupted by %s", sig_name(sig));
		give_up(128 + sig);
	}
}

static void *watch_main(void *arg)
{
	uint64_t last = ~0ull, since = stream_now_ns();
	/* Look four times per timeout, at most once per second. */
	int step_ms = watch.timeout_s >= 4 ? 1000 : (int)watch.timeout_s * 250;
	struct pollfd p = {.fd = watch.wake[0], .events = POLLIN};

	(void)arg;
	while (!atomic_load(&watch.stop)) {
		char drain[16];
		uint64_t q;

		if (poll(&p, 1, step_ms) > 0)
			while (read(watch.wake[0], drain, sizeof(drain)) > 0)
				;
		stream_watch_check_signal();
		if (atomic_load(&watch.stop))
			break;
		q = atomic_load_explicit(&watch.progress, memory_order_relaxed);
		if (q != last || !atomic_load(&watch.armed)) {
			last = q;
			since = stream_now_ns();
			continue;
		}
		if (stream_now_ns() - since >= (uint64_t)watch.timeout_s * 1000000000u) {
			pthread_mutex_lock(&watch.lock);
			stream_err("%s: nothing has moved for %u s, giving up (--timeout sets "
				   "how long to wait)",
				   watch.what, watch.timeout_s);
			pthread_mutex_unlock(&watch.lock);
			give_up(1);
		}
	}
	return NULL;
}

static const int watched_sigs[] = {SIGINT, SIGTERM, SIGHUP};

/* The watched signals go to handler (on_signal, or SIG_DFL). */
static void watch_signals(void (*handler)(int))
{
	struct sigaction sa = {.sa_handler = handler, .sa_flags = SA_RESTART};

	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(watched_sigs) / sizeof(watched_sigs[0]); i++)
		sigaction(watched_sigs[i], &sa, NULL);
}

int stream_watch_take_signals(void)
{
	if (watch.wake[0] < 0 && pipe2(watch.wake, O_CLOEXEC | O_NONBLOCK))
		return -errno;
	watch_signals(on_signal);
	return 0;
}

int stream_watch_signalled(void)
{
	return got_signal;
}

int stream_watch_start(unsigned timeout_s)
{
	int rc;

	watch.timeout_s = timeout_s;
	atomic_store(&watch.stop, false);
	rc = stream_watch_take_signals();
	if (rc)
		return rc;
	rc = pthread_create(&watch.thread, NULL, watch_main, NULL);
	if (rc) {
		watch_signals(SIG_DFL);
		return -rc;
	}
	watch.running = true;
	return 0;
}

void stream_watch_forked(void)
{
	/* Whatever the parent's watchdog held at the fork is not held here. */
	pthread_mutex_init(&watch.lock, NULL);
	watch_signals(SIG_DFL);
	got_signal = 0;
	watch.running = false; /* the parent's thread is not in this process */
	for (int i = 0; i < 2; i++) {
		if (watch.wake[i] >= 0)
			close(watch.wake[i]);
		watch.wake[i] = -1;
	}
}

void stream_watch_stop(void)
{
	if (!watch.running)
		return;
	/* A signal from now on ends the process as it would have (one that
	 * came meanwhile is acted on below). */
	watch_signals(SIG_DFL);
	atomic_store(&watch.stop, true);
	wake_watchdog();
	pthread_join(watch.thread, NULL);
	watch.running = false;
	stream_watch_check_signal(); /* one that came meanwhile */
}

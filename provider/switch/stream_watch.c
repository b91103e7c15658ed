/*
 * stream_watch.c: nicsim-stream's errors and its watchdog.
 *
 * Every call that waits is bounded by the watchdog: a thread that ends the
 * process when nothing has moved for --timeout seconds while it is armed.
 * It is disarmed only where a server waits for what only the client can
 * start (the next client, the next test): there, the client's own watchdog
 * bounds the wait, because a client that gives up closes its connection,
 * and a client that dies has its connection closed by its system.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
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
	bool running, stop;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned timeout_s;
	char what[256]; /* under lock */
	atomic_uint_fast64_t progress;
	atomic_bool armed;
	void (*on_timeout)(void);
} watch = {.lock = PTHREAD_MUTEX_INITIALIZER};

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

static void *watch_main(void *arg)
{
	uint64_t last = ~0ull, since = stream_now_ns();
	/* Look four times per timeout, at most once per second. */
	long step_ms = watch.timeout_s >= 4 ? 1000 : (long)watch.timeout_s * 250;

	(void)arg;
	pthread_mutex_lock(&watch.lock);
	while (!watch.stop) {
		struct timespec until;
		uint64_t p;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += step_ms / 1000;
		until.tv_nsec += (step_ms % 1000) * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&watch.cond, &watch.lock, &until);
		if (watch.stop)
			break;
		p = atomic_load_explicit(&watch.progress, memory_order_relaxed);
		if (p != last || !atomic_load(&watch.armed)) {
			last = p;
			since = stream_now_ns();
			continue;
		}
		if (stream_now_ns() - since >= (uint64_t)watch.timeout_s * 1000000000u) {
			stream_err("%s: nothing has moved for %u s, giving up (--timeout sets "
				   "how long to wait)",
				   watch.what, watch.timeout_s);
			if (watch.on_timeout)
				watch.on_timeout();
			fflush(stdout);
			_exit(1);
		}
	}
	pthread_mutex_unlock(&watch.lock);
	return NULL;
}

int stream_watch_start(unsigned timeout_s)
{
	pthread_condattr_t ca;
	int rc;

	watch.timeout_s = timeout_s;
	watch.stop = false;
	pthread_condattr_init(&ca);
	pthread_cond_init(&watch.cond, &ca);
	pthread_condattr_destroy(&ca);
	rc = pthread_create(&watch.thread, NULL, watch_main, NULL);
	if (rc) {
		pthread_cond_destroy(&watch.cond);
		return -rc;
	}
	watch.running = true;
	return 0;
}

void stream_watch_stop(void)
{
	if (!watch.running)
		return;
	pthread_mutex_lock(&watch.lock);
	watch.stop = true;
	pthread_cond_signal(&watch.cond);
	pthread_mutex_unlock(&watch.lock);
	pthread_join(watch.thread, NULL);
	pthread_cond_destroy(&watch.cond);
	watch.running = false;
}

/*
 * stream_report.c: nicsim-stream's results, as a table or as one JSON
 * document:
 *
 *   {"tool":"nicsim-stream","version":"...","seed":N,"results":[
 *   {...one object per size and transport, one per line...},
 *   ...
 *   ],"ok":true}
 *
 * and, when the run failed, "ok":false and "error" with the message that
 * ended it.  GB/s are 10^9 bytes per second, Gbit/s 10^9 bits.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stream.h"

static unsigned reported;

static double per_s(double v, double seconds)
{
	return seconds > 0 ? v / seconds : 0;
}

static const char *path_word(int p)
{
	return p == NSW_PATH_READ ? "read" : p == NSW_PATH_WRITE ? "write" : "unknown";
}

/* s as a JSON string's contents: quotes, backslashes and control
 * characters escaped. */
static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

static bool begun, ended;

void stream_report_begin(const struct stream_opts *o)
{
	flockfile(stdout);
	/* Once: a signal's ending may have opened it first. */
	if (!begun && o->json)
		printf("{\"tool\":\"" STREAM_PROG "\",\"version\":\"%s\",\"seed\":%" PRIu64
		       ",\"results\":[\n",
		       NICSIM_VERSION, o->seed);
	begun = true;
	funlockfile(stdout);
}

/* The table's head, before its first row: a run that fails to connect
 * prints no empty table. */
static void text_head(const struct stream_opts *o)
{
	if (o->verify)
		printf("--verify: data from seed %" PRIu64 "\n", o->seed);
	if (o->pingpong)
		printf("%-9s %8s %11s %9s %8s %8s %11s %8s %8s %8s %8s\n", "transport", "size",
		       "round trips", "seconds", "GB/s", "Gbit/s", "msgs/s", "p50 us", "p90 us",
		       "p99 us", "max us");
	else
		printf("%-9s %8s %11s %9s %8s %8s %11s  %s\n", "transport", "size", "messages",
		       "seconds", "GB/s", "Gbit/s", "msgs/s", "path (registrations)");
}

static void report_json(const struct stream_result *r)
{
	double msgs = (double)r->msgs * (r->pingpong ? 2 : 1);

	printf("%s{\"transport\":\"%s\",\"test\":\"%s\",\"size\":%" PRIu64 ",\"count\":%" PRIu64
	       ",\"bytes\":%" PRIu64 ",\"seconds\":%.9f,\"gbytes_per_s\":%.6f,"
	       "\"gbits_per_s\":%.6f,\"msgs_per_s\":%.1f,\"verified\":%s",
	       reported ? ",\n" : "", r->transport, r->pingpong ? "pingpong" : "stream", r->size,
	       r->msgs, r->bytes, r->seconds, per_s((double)r->bytes, r->seconds) / 1e9,
	       per_s((double)r->bytes * 8, r->seconds) / 1e9, per_s(msgs, r->seconds),
	       r->verify ? "true" : "false");
	if (r->pingpong)
		printf(",\"latency_us\":{\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,\"max\":%.3f,"
		       "\"mean\":%.3f}",
		       r->lat_p50, r->lat_p90, r->lat_p99, r->lat_max, r->lat_mean);
	else
		printf(",\"latency_us\":null");
	if (r->path_to_server >= 0)
		printf(",\"path\":{\"to_server\":\"%s\",\"to_client\":\"%s\"}",
		       path_word(r->path_to_server), path_word(r->path_to_client));
	else
		printf(",\"path\":null");
	if (r->have_stats)
		printf(",\"switch\":{\"large_sends\":%" PRIu64 ",\"rdma_ops\":%" PRIu64
		       ",\"registrations\":%" PRIu64 ",\"msgs_sent\":%" PRIu64
		       ",\"msgs_received\":%" PRIu64 ",\"credit_updates\":%" PRIu64
		       ",\"credit_waits\":%" PRIu64 "}",
		       r->stats.large_sends, r->stats.rdma_ops, r->stats.registrations,
		       r->stats.msgs_sent, r->stats.msgs_received, r->stats.credit_updates,
		       r->stats.credit_waits);
	else
		printf(",\"switch\":null");
	if (r->have_cache)
		printf(",\"cache\":{\"hits\":%" PRIu64 ",\"misses\":%" PRIu64 "}", r->cache_hits,
		       r->cache_misses);
	else
		printf(",\"cache\":null");
	putchar('}');
}

void stream_report(const struct stream_opts *o, const struct stream_result *r)
{
	double msgs = (double)r->msgs * (r->pingpong ? 2 : 1);
	char size[32];

	/* Whole, even when the watchdog ends the report meanwhile. */
	flockfile(stdout);
	if (o->json) {
		report_json(r);
		reported++;
		fflush(stdout);
		funlockfile(stdout);
		return;
	}
	if (!reported)
		text_head(o);
	stream_size_str(r->size, size, sizeof(size));
	printf("%-9s %8s %11" PRIu64 " %9.3f %8.3f %8.2f %11.0f", r->transport, size, r->msgs,
	       r->seconds, per_s((double)r->bytes, r->seconds) / 1e9,
	       per_s((double)r->bytes * 8, r->seconds) / 1e9, per_s(msgs, r->seconds));
	if (r->pingpong) {
		printf(" %8.2f %8.2f %8.2f %8.2f\n", r->lat_p50, r->lat_p90, r->lat_p99,
		       r->lat_max);
	} else if (r->path_to_server >= 0) {
		printf("  %s", path_word(r->path_to_server));
		if (r->have_stats)
			printf(" (%" PRIu64 ")", r->stats.registrations);
		putchar('\n');
	} else {
		printf("  -\n");
	}
	reported++;
	funlockfile(stdout);
}

void stream_report_end(const struct stream_opts *o, bool ok)
{
	if (!o->json)
		return;
	flockfile(stdout);
	/* Once: a signal's ending may race the run's own. */
	if (ended) {
		funlockfile(stdout);
		return;
	}
	stream_report_begin(o); /* a document even when a signal came first */
	ended = true;
	printf("%s],\"ok\":%s", reported ? "\n" : "", ok ? "true" : "false");
	if (!ok) {
		printf(",\"error\":");
		json_str(stream_last_err());
	}
	printf("}\n");
	fflush(stdout);
	funlockfile(stdout);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The p-th percentile by nearest rank of n sorted values. */
static double rank(const uint64_t *v, size_t n, unsigned p)
{
	size_t k = (n * p + 99) / 100;

	return (double)v[k ? k - 1 : 0] / 1e3;
}

void stream_latency(struct stream_result *r, uint64_t *ns, size_t n)
{
	double sum = 0;

	if (!n)
		return;
	qsort(ns, n, sizeof(*ns), cmp_u64);
	for (size_t i = 0; i < n; i++)
		sum += (double)ns[i];
	r->lat_p50 = rank(ns, n, 50);
	r->lat_p90 = rank(ns, n, 90);
	r->lat_p99 = rank(ns, n, 99);
	r->lat_max = (double)ns[n - 1] / 1e3;
	r->lat_mean = sum / (double)n / 1e3;
}

/*
 * stream_client.c: nicsim-stream's client: it connects, runs each test
 * (stream_wire.h) and measures it, checks what the server says arrived,
 * and the switch's path against --path.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stream_data.h"
#include "stream_wire.h"

/* ---- The client --------------------------------------------------------- */

struct stream_conn {
	const struct stream_backend *be;
	int s;
	char peer[32];
	bool path_checked;
	int path_out, path_in; /* NSW_PATH_* of each direction, -1 without */
	uint8_t *tx, *rx;
	size_t tx_len, rx_len;
	uint64_t *rtt; /* ping-pong round trips, ns */
	size_t rtt_cap;
};

/* The test under way on the client, for its messages. */
struct client_test {
	struct stream_conn *c;
	const struct stream_opts *o;
	uint64_t size, seq, sum;
	char name[80]; /* "the 64 KiB stream test" */
	bool timed;
	size_t nrtt;
};

static int client_io_fail(struct client_test *t, int rc, const char *doing)
{
	const struct stream_conn *c = t->c;
	char text[256];

	if (rc == PEER_CLOSED)
		snprintf(text, sizeof(text), "the server closed the connection");
	else if (rc == -EPROTO)
		snprintf(text, sizeof(text),
			 "the server sent something that is not a "
			 "nicsim-stream answer");
	else
		wire_why(c->be, "send", rc, text, sizeof(text));
	stream_err("%s: %s with the server %s: %s: %s", c->be->name, t->name, c->peer, doing, text);
	return 1;
}

static const char *path_name(int p)
{
	return p == NSW_PATH_READ ? "read" : p == NSW_PATH_WRITE ? "write" : "unknown";
}

struct stream_conn *stream_connect(const struct stream_backend *be, const struct stream_opts *o,
				   const struct sockaddr_in *local, const struct sockaddr_in *peer)
{
	struct stream_conn *c = calloc(1, sizeof(*c));
	char text[512], lname[32];
	const char *what = "";

	if (!c) {
		stream_err("%s: no memory", be->name);
		return NULL;
	}
	c->be = be;
	c->path_out = c->path_in = -1;
	stream_addr_str(peer, c->peer, sizeof(c->peer));
	stream_addr_str(local, lname, sizeof(lname));
	stream_watch_arm("%s: connecting to %s", be->name, c->peer);
	c->s = be->socket(AF_INET, SOCK_STREAM, 0);
	if (c->s < 0) {
		stream_err("%s: socket: %s", be->name,
			   wire_why(be, "socket", -errno, text, sizeof(text)));
		free(c);
		return NULL;
	}
	if (be->prepare(c->s, o, PREP_CONNECT, &what)) {
		stream_err("%s: setting %s: %s", be->name, what, strerror(errno));
		goto fail;
	}
	if ((local->sin_addr.s_addr != htonl(INADDR_ANY) || local->sin_port) &&
	    be->bind(c->s, (const struct sockaddr *)local, sizeof(*local))) {
		stream_err("%s: cannot bind to %s: %s", be->name, lname,
			   wire_why(be, "bind", -errno, text, sizeof(text)));
		goto fail;
	}
	while (be->connect(c->s, (const struct sockaddr *)peer, sizeof(*peer))) {
		if (errno == EINTR)
			continue;
		stream_err("%s: cannot connect to %s: %s", be->name, c->peer,
			   wire_why(be, "connect", -errno, text, sizeof(text)));
		goto fail;
	}
	return c;
fail:
	be->close(c->s);
	free(c);
	return NULL;
}

int stream_disconnect(struct stream_conn *c, bool ok)
{
	int rc = 0;

	if (!c)
		return 0;
	if (ok) {
		struct ctl bye = {.kind = K_BYE};
		uint8_t b[CTL_SIZE];
		ssize_t n;

		/* The server closes once it has the goodbye: wait for that, so
		 * that this side's close cannot cut the goodbye short. */
		stream_watch_arm("%s: closing the connection to %s", c->be->name, c->peer);
		rc = wire_send_ctl(c->be, c->s, &bye);
		if (!rc && c->be->shutdown(c->s, SHUT_WR))
			rc = -errno;
		while (!rc && (n = c->be->recv(c->s, b, sizeof(b), 0)) != 0)
			if (n < 0 && errno != EINTR)
				rc = -errno;
		if (rc) {
			char text[256];

			stream_err("%s: saying goodbye to the server %s: %s", c->be->name, c->peer,
				   wire_why(c->be, "send", rc, text, sizeof(text)));
			rc = 1;
		}
	}
	c->be->close(c->s);
	wire_buf_free(&c->tx, &c->tx_len);
	wire_buf_free(&c->rx, &c->rx_len);
	free(c->rtt);
	free(c);
	return rc;
}

/* The switch's path, once the first test has made the connection talk:
 * reported, and an error if it is not what --path asked for. */
static int check_path(struct stream_conn *c, const struct stream_opts *o)
{
	static const char *const dirs[] = {"from the client to the server",
					   "from the server to the client"};
	int want = o->path == SP_READ ? NSW_PATH_READ : NSW_PATH_WRITE;
	int got[2];

	c->path_checked = true;
	if (!c->be->path)
		return 0;
	if (c->be->path(c->s, &c->path_out, &c->path_in)) {
		stream_err("%s: NSW_PATH of the connection to %s: %s", c->be->name, c->peer,
			   strerror(errno));
		return 1;
	}
	if (o->path == SP_AUTO)
		return 0;
	got[0] = c->path_out;
	got[1] = c->path_in;
	for (int d = 0; d < 2; d++) {
		const char *sink = d == 0 ? "the server" : "this client";

		if (got[d] == want)
			continue;
		if (got[d] != NSW_PATH_READ && got[d] != NSW_PATH_WRITE)
			stream_err(
			    "%s: --path %s asked for, but the switch does not say which path "
			    "the connection to %s runs %s (NSW_PATH %d)",
			    c->be->name, path_name(want), c->peer, dirs[d], got[d]);
		else if (want == NSW_PATH_READ)
			stream_err(
			    "%s: --path read asked for, but the connection to %s runs the %s "
			    "path %s: %s does not RDMA-read (a NIC of the two was started "
			    "with --no-rdma-read, or its provider cannot read, or the server "
			    "runs with --path write)",
			    c->be->name, c->peer, path_name(got[d]), dirs[d], sink);
		else
			stream_err("%s: --path write asked for, but the connection to %s runs the "
				   "%s path %s: %s reads as a sink (start a separate server with "
				   "--path write too)",
				   c->be->name, c->peer, path_name(got[d]), dirs[d], sink);
		return 1;
	}
	return 0;
}

static int add_rtt(struct client_test *t, uint64_t ns)
{
	struct stream_conn *c = t->c;

	if (t->nrtt == c->rtt_cap) {
		size_t cap = c->rtt_cap ? c->rtt_cap * 2 : 4096;
		uint64_t *p = realloc(c->rtt, cap * sizeof(*p));

		if (!p) {
			stream_err("%s: no memory for %zu round-trip times", c->be->name, cap);
			return 1;
		}
		c->rtt = p;
		c->rtt_cap = cap;
	}
	c->rtt[t->nrtt++] = ns;
	return 0;
}

/* One message (ping-pong: one round trip). */
static int client_message(struct client_test *t)
{
	struct stream_conn *c = t->c;
	uint64_t t0 = 0;
	int rc;

	if (t->o->verify)
		t->sum = sdata_fold(
		    t->sum, sdata_fill(c->tx, t->size, t->o->seed, SDATA_TO_SERVER, t->seq));
	if (t->o->pingpong)
		t0 = stream_now_ns();
	rc = wire_send_all(c->be, c->s, c->tx, t->size);
	if (rc)
		return client_io_fail(t, rc, "sending a message");
	if (t->o->pingpong) {
		rc = wire_recv_all(c->be, c->s, c->rx, t->size);
		if (rc)
			return client_io_fail(t, rc, "receiving an answer");
		if (t->timed && add_rtt(t, stream_now_ns() - t0))
			return 1;
		if (t->o->verify) {
			struct sdata_diff d;
			uint64_t sum;

			if (sdata_check(c->rx, t->size, t->o->seed, SDATA_TO_CLIENT, t->seq, &sum,
					&d)) {
				stream_err("%s: answer %" PRIu64 " of %s from %s differs at byte "
					   "%zu: got 0x%02x, expected 0x%02x (seed %" PRIu64 ")",
					   c->be->name, t->seq, t->name, c->peer, d.off, d.got,
					   d.want, t->o->seed);
				return 1;
			}
		}
	}
	t->seq++;
	return 0;
}

static int client_batch(struct client_test *t, uint64_t n)
{
	struct ctl b = {.kind = K_BATCH, .count = n};
	int rc = wire_send_ctl(t->c->be, t->c->s, &b);

	if (rc)
		return client_io_fail(t, rc, "starting a batch");
	for (uint64_t i = 0; i < n; i++)
		if (client_message(t))
			return 1;
	return 0;
}

/* Send req and wait for the answer of kind want. */
static int client_ask(struct client_test *t, const struct ctl *req, uint8_t want, struct ctl *ans,
		      const char *doing)
{
	int rc = wire_send_ctl(t->c->be, t->c->s, req);

	if (!rc)
		rc = wire_recv_ctl(t->c->be, t->c->s, ans);
	if (rc)
		return client_io_fail(t, rc, doing);
	if (ans->kind != want) {
		stream_err("%s: %s of %s: the server %s answered %u, not %u", t->c->be->name, doing,
			   t->name, t->c->peer, ans->kind, want);
		return 1;
	}
	return 0;
}

/* Messages per size unless --count or --duration says. */
static uint64_t default_count(const struct stream_opts *o, uint64_t size)
{
	uint64_t n = (1ull << 30) / size;

	/* Ping-pong: 10000 round trips, or 1 GiB's worth if fewer (16 MiB
	 * messages would take minutes), at least 16. */
	if (o->pingpong)
		return n < 16 ? 16 : n > 10000 ? 10000 : n;
	return n < 64 ? 64 : n > 100000 ? 100000 : n;
}

/* The timed batches of a --duration run: as many messages as fit, in
 * batches that double until one takes 10 ms, never planned past the end. */
static int client_duration(struct client_test *t, uint64_t t0)
{
	uint64_t end = t0 + (uint64_t)t->o->duration * 1000000000u, n = 1, now = t0;

	while (now < end) {
		uint64_t b0 = now, took, left, fit;

		if (client_batch(t, n))
			return 1;
		now = stream_now_ns();
		took = now - b0 ? now - b0 : 1;
		if (now >= end)
			break;
		left = end - now;
		if (took < 10000000u && n < (1ull << 30))
			n *= 2;
		/* n messages took `took`: as many as fit in what is left. */
		fit = (uint64_t)((double)n * (double)left / (double)took);
		if (fit < n)
			n = fit ? fit : 1;
	}
	return 0;
}

static void stats_delta(struct nsw_stats *d, const struct nsw_stats *a, const struct nsw_stats *b)
{
	d->bytes_sent = b->bytes_sent - a->bytes_sent;
	d->bytes_received = b->bytes_received - a->bytes_received;
	d->msgs_sent = b->msgs_sent - a->msgs_sent;
	d->msgs_received = b->msgs_received - a->msgs_received;
	d->large_sends = b->large_sends - a->large_sends;
	d->rdma_ops = b->rdma_ops - a->rdma_ops;
	d->registrations = b->registrations - a->registrations;
	d->credit_updates = b->credit_updates - a->credit_updates;
	d->credit_waits = b->credit_waits - a->credit_waits;
}

static int client_stats(struct client_test *t, struct nsw_stats *st)
{
	if (!t->c->be->stats(t->c->s, st))
		return 0;
	stream_err("%s: NSW_STATS of the connection to %s: %s", t->c->be->name, t->c->peer,
		   strerror(errno));
	return 1;
}

/* What RESULT says against what the client sent: 0 if they agree. */
static int check_result(struct client_test *t, const struct ctl *res, uint64_t msgs)
{
	struct stream_conn *c = t->c;

	if (res->status == CS_MISMATCH) {
		stream_err("%s: the server %s found message %" PRIu64 " of %s different at byte "
			   "%" PRIu64 ": got 0x%02x, expected 0x%02x (seed %" PRIu64 ")",
			   c->be->name, c->peer, res->bad_msg, t->name, res->bad_off, res->bad_got,
			   res->bad_want, t->o->seed);
		return 1;
	}
	if (res->status != CS_OK) {
		stream_err("%s: the server %s ended %s with status %u", c->be->name, c->peer,
			   t->name, res->status);
		return 1;
	}
	if (res->count != msgs || res->bytes != msgs * t->size) {
		stream_err(
		    "%s: the server %s counted %" PRIu64 " messages and %" PRIu64 " bytes of "
		    "%s, the client sent %" PRIu64 " and %" PRIu64,
		    c->be->name, c->peer, res->count, res->bytes, t->name, msgs, msgs * t->size);
		return 1;
	}
	if (t->o->verify && res->sum != t->sum) {
		stream_err("%s: the server's checksum of %s is 0x%016" PRIx64 ", the client's "
			   "0x%016" PRIx64 ": the bytes arrived in another order or some twice",
			   c->be->name, t->name, res->sum, t->sum);
		return 1;
	}
	return 0;
}

int stream_test(struct stream_conn *c, const struct stream_opts *o, uint64_t size,
		struct stream_result *r)
{
	struct client_test t = {.c = c, .o = o, .size = size};
	struct ctl req, ans;
	struct nsw_stats st0, st1;
	uint64_t h0 = 0, m0 = 0, h1 = 0, m1 = 0;
	bool cache;
	uint64_t count = o->count ? o->count : default_count(o, size), t0, t1, msgs;
	char sz[32];

	stream_size_str(size, sz, sizeof(sz));
	snprintf(t.name, sizeof(t.name), "the %s %s test", sz, wire_mode_name(o->pingpong));
	stream_watch_arm("%s: running %s with %s", c->be->name, t.name, c->peer);
	if (wire_buf_reserve(&c->tx, &c->tx_len, size) ||
	    (o->pingpong && wire_buf_reserve(&c->rx, &c->rx_len, size))) {
		stream_err("%s: no memory for %s's messages", c->be->name, t.name);
		return 1;
	}
	/* Without --verify the data is the same every time; still not zeros. */
	if (!o->verify)
		sdata_fill(c->tx, size, o->seed, SDATA_TO_SERVER, 0);
	req = (struct ctl){.kind = K_TEST,
			   .mode = o->pingpong ? MODE_PINGPONG : MODE_STREAM,
			   .flags = o->verify ? F_VERIFY : 0,
			   .size = size,
			   .seed = o->seed};
	if (client_ask(&t, &req, K_READY, &ans, "starting"))
		return 1;
	if (ans.status != CS_OK) {
		stream_err("%s: the server %s cannot run %s: %s", c->be->name, c->peer, t.name,
			   ans.status == CS_NOMEM ? "it has no memory for the messages"
						  : "it does not know the test (another version?)");
		return 1;
	}
	if (!c->path_checked && check_path(c, o))
		return 1;
	if (o->warmup && client_batch(&t, o->warmup))
		return 1;
	req = (struct ctl){.kind = K_SYNC};
	if (client_ask(&t, &req, K_SYNCED, &ans, "ending the warm-up"))
		return 1;
	if (c->be->stats && client_stats(&t, &st0))
		return 1;
	cache = c->be->cache && c->be->cache(&h0, &m0) == 0;
	t.timed = true;
	msgs = t.seq;
	t0 = stream_now_ns();
	if (o->duration ? client_duration(&t, t0) : client_batch(&t, count))
		return 1;
	msgs = t.seq - msgs;
	t1 = stream_now_ns();
	req = (struct ctl){.kind = K_END};
	if (client_ask(&t, &req, K_RESULT, &ans, "ending"))
		return 1;
	if (!o->pingpong)
		t1 = stream_now_ns();
	if (c->be->stats && client_stats(&t, &st1))
		return 1;
	cache = cache && c->be->cache(&h1, &m1) == 0;
	if (check_result(&t, &ans, msgs))
		return 1;
	*r = (struct stream_result){
	    .transport = c->be->name,
	    .pingpong = o->pingpong,
	    .verify = o->verify,
	    .size = size,
	    .msgs = msgs,
	    .bytes = msgs * size * (o->pingpong ? 2 : 1),
	    .seconds = (double)(t1 - t0) / 1e9,
	    .path_to_server = c->path_out,
	    .path_to_client = c->path_in,
	    .have_stats = c->be->stats != NULL,
	    .have_cache = cache,
	    .cache_hits = h1 - h0,
	    .cache_misses = m1 - m0,
	};
	if (r->have_stats)
		stats_delta(&r->stats, &st0, &st1);
	if (o->pingpong) {
		for (size_t i = 0; i < t.nrtt; i++)
			c->rtt[i] /= 2;
		stream_latency(r, c->rtt, t.nrtt);
	}
	return 0;
}

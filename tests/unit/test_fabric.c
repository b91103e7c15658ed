/*
 * The fabric in one process: ports of one segment sending real RoCEv2
 * frames (fab_wire.h) to each other by index, the link model (latency,
 * rate, every fault rule, replay from a seed), burst units and where they
 * are split, the frame pool, reclaiming a dead port's frames, the bell, and
 * a segment scribbled over by a hostile writer.  Each test gets a fresh fabric in its own directory.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fab.h"
#include "fab_addr.h"
#include "fab_capture.h"
#include "fab_wire.h"
#include "nstest.h"

#define A_ADDR "198.18.0.1"
#define B_ADDR "198.18.0.2"
#define C_ADDR "198.18.0.3"
#define D_ADDR "198.18.0.4"
#define WAIT_MS 10000
#define QPN 0x000123u
#define LONG_PAYLOAD 4000u

static char tmp[256];
static char dir[512];
static int dir_no;
static struct fab *fab;
static struct fab_port *pa, *pb, *pc;
static uint32_t a_addr, b_addr, c_addr, d_addr;

/* ---- Frames ------------------------------------------------------------------ */

/* A real RoCEv2 frame from src to dst: opcode, destination QP, PSN = seq,
 * and a payload (for opcodes that carry one) that depends on seq alone. */
static uint32_t make_frame(void *buf, uint32_t src, uint32_t dst, uint8_t opcode, uint32_t qpn,
			   uint32_t seq, uint32_t payload_len)
{
	static uint8_t payload[FAB_MTU];
	struct fab_pkt pkt;
	size_t len = 0;
	uint32_t i;

	NST_REQUIRE_EQ(fab_pkt_init(&pkt, opcode), 0);
	pkt.src_ip = src;
	pkt.dst_ip = dst;
	pkt.udp_sport = fab_udp_sport(qpn);
	pkt.dest_qpn = qpn;
	pkt.psn = seq & FAB_MASK24;
	if (pkt.has_aeth)
		pkt.syndrome = fab_aeth_ack(FAB_AETH_CREDITS_INVALID);
	if (pkt.has_reth) {
		pkt.va = 0x10000;
		pkt.rkey = 0x1234;
		pkt.dma_len = payload_len;
	}
	if (fab_opcode_info(opcode)->flags & FAB_OPF_PAYLOAD) {
		for (i = 0; i < payload_len; i++)
			payload[i] = (uint8_t)(seq * 7u + i);
		pkt.payload = payload;
		pkt.payload_len = payload_len;
	}
	NST_REQUIRE_EQ(fab_pkt_encode(&pkt, buf, FAB_SLOT_BYTES, &len), 0);
	return (uint32_t)len;
}

/* Take a frame at p, fill it, send it to dst; returns fab_send's result. */
static int send_frame(struct fab_port *p, uint32_t dst, uint8_t opcode, uint32_t qpn, uint32_t seq,
		      uint32_t payload_len)
{
	uint32_t idx, len;
	void *data;

	NST_REQUIRE_EQ(fab_frame_get(p, &idx, &data), 0);
	len = make_frame(data, fab_port_addr(p), dst, opcode, qpn, seq, payload_len);
	return fab_send(p, idx, len, dst);
}

static int send_seq(struct fab_port *p, uint32_t dst, uint32_t seq)
{
	return send_frame(p, dst, FAB_OP_SEND_ONLY, QPN, seq, 64);
}

/* Send n frames numbered first.. from p to port to, letting to pull them
 * into its heap as it goes (a ring holds fewer than the pool). */
static void send_seqs(struct fab_port *p, struct fab_port *to, uint32_t first, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		NST_REQUIRE_EQ(send_seq(p, fab_port_addr(to), first + i), 0);
		if (i % 256 == 255)
			(void)fab_next_due_ns(to);
	}
}

/* One received frame, decoded. */
struct got {
	uint32_t seq; /* the PSN */
	uint32_t marks;
	uint32_t len;
	uint32_t src;
	uint8_t opcode;
	uint32_t qpn;
	bool intact;           /* decodes without error */
	enum fab_wire_err why; /* else why not */
	uint64_t due_ns, sent_ns, got_ns, link_seq;
};

static void decode(const struct fab_rx *rx, struct got *g)
{
	struct fab_pkt pkt;

	memset(g, 0, sizeof(*g));
	g->marks = rx->marks;
	g->len = rx->len;
	g->src = rx->src;
	g->due_ns = rx->due_ns;
	g->sent_ns = rx->sent_ns;
	g->link_seq = rx->link_seq;
	g->got_ns = fab_now_ns();
	g->intact = fab_pkt_decode(rx->data, rx->len, &pkt, &g->why) == 0;
	if (g->intact) {
		g->seq = pkt.psn;
		g->opcode = pkt.opcode;
		g->qpn = pkt.dest_qpn;
	} else {
		/* Corruption lands after the BTH: the PSN is still readable. */
		g->seq = fab_get32(((const uint8_t *)rx->data) + FAB_ETH_HLEN + FAB_IP4_HLEN +
				   FAB_UDP_HLEN + 8) &
			 FAB_MASK24;
	}
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
			      .tv_nsec = (long)(ns % 1000000000u)};

	nanosleep(&ts, NULL);
}

/*
 * Receive at p until nothing more has arrived (every frame sent so far was
 * published before the call) or max frames, waiting for frames not yet due;
 * bounded by WAIT_MS.  Returns how many were stored in out.
 */
static size_t collect(struct fab_port *p, struct got *out, size_t max)
{
	uint64_t deadline = fab_now_ns() + (uint64_t)WAIT_MS * 1000000u, due, now;
	struct fab_rx rx;
	size_t n = 0;

	while (n < max) {
		if (fab_recv(p, &rx) == 0) {
			decode(&rx, &out[n++]);
			NST_EQ(fab_rx_done(p, rx.idx), 0);
			continue;
		}
		due = fab_next_due_ns(p);
		if (due == UINT64_MAX)
			break;
		now = fab_now_ns();
		NST_REQUIRE(now < deadline);
		if (due > now)
			sleep_ns(due - now < 1000000u ? due - now : 1000000u);
	}
	return n;
}

static struct fab_link_stats stats(uint32_t src, uint32_t dst)
{
	struct fab_link_stats st;

	NST_REQUIRE_EQ(fab_link_stats(fab, src, dst, &st), 0);
	return st;
}

static void link_set(uint32_t src, uint32_t dst, const char *settings)
{
	const char *words[32];
	char copy[256], err[256], *save, *w;
	struct fab_link_config cfg;
	uint32_t fields;
	size_t n = 0;
	int rc;

	snprintf(copy, sizeof(copy), "%s", settings);
	for (w = strtok_r(copy, " ", &save); w && n < 32; w = strtok_r(NULL, " ", &save))
		words[n++] = w;
	rc = fab_link_parse(words, n, &cfg, &fields, err, sizeof(err));
	NST_CHECK_(rc == 0, CU_TRUE, "parse '%s': %s", settings, rc ? err : "ok");
	NST_REQUIRE_EQ(fab_link_set(fab, src, dst, &cfg, fields), 0);
}

static uint32_t frames_free(void)
{
	return nst_fab_frames_free(fab);
}

static struct fab_port_counters port_counters(uint32_t addr)
{
	return nst_fab_port(fab, addr).counters;
}

/* ---- Set-up --------------------------------------------------------------------- */

static int suite_init(void)
{
	if (nst_tmpdir(tmp, sizeof(tmp), "fab"))
		return -1;
	fab_addr_parse(A_ADDR, &a_addr);
	fab_addr_parse(B_ADDR, &b_addr);
	fab_addr_parse(C_ADDR, &c_addr);
	fab_addr_parse(D_ADDR, &d_addr);
	return 0;
}

static int suite_clean(void)
{
	nst_rmtree(tmp);
	return 0;
}

/* A fresh fabric with ports A, B, C open. */
static void open_fabric(uint32_t frames)
{
	const uint32_t addrs[] = {a_addr, b_addr, c_addr, d_addr};
	const struct fab_config cfg = {
	    .max_ports = 8, .frames = frames, .seed = 7, .addrs = addrs, .naddrs = 4};

	snprintf(dir, sizeof(dir), "%s/f%d", tmp, ++dir_no);
	NST_REQUIRE_EQ(mkdir(dir, 0700), 0);
	NST_REQUIRE_EQ(fab_create(dir, &cfg), 0);
	NST_REQUIRE_EQ(fab_open(dir, &fab), 0);
	NST_REQUIRE_EQ(fab_port_open(fab, a_addr, &pa), 0);
	NST_REQUIRE_EQ(fab_port_open(fab, b_addr, &pb), 0);
	NST_REQUIRE_EQ(fab_port_open(fab, c_addr, &pc), 0);
}

static void setup(void)
{
	open_fabric(4096);
}

static void teardown(void)
{
	fab_port_close(pa);
	fab_port_close(pb);
	fab_port_close(pc);
	pa = pb = pc = NULL;
	fab_close(fab);
	fab = NULL;
}

/* ---- Basics ----------------------------------------------------------------------- */

static void test_send_recv_by_index(void)
{
	struct fab_link_stats st;
	uint32_t idx, len, n0 = frames_free();
	struct fab_rx rx;
	struct got g;
	void *data;

	NST_REQUIRE_EQ(fab_frame_get(pa, &idx, &data), 0);
	NST_EQ(frames_free(), n0 - 1);
	len = make_frame(data, a_addr, b_addr, FAB_OP_SEND_ONLY, QPN, 42, 100);
	NST_REQUIRE_EQ(fab_send(pa, idx, len, b_addr), 0);
	/* The sender holds it no longer. */
	NST_EQ(fab_frame_put(pa, idx), -EINVAL);
	NST_TRUE(fab_frame_data(pa, idx) == NULL);

	NST_REQUIRE_EQ(fab_recv(pb, &rx), 0);
	NST_EQ_U(rx.idx, idx);
	NST_TRUE(rx.data == data); /* the very bytes the sender wrote: no copy */
	NST_TRUE(fab_frame_data(pb, idx) == data);
	NST_EQ(rx.len, len);
	NST_EQ_U(rx.src, a_addr);
	NST_EQ(rx.marks, 0);
	NST_EQ(rx.link_seq, 0);
	decode(&rx, &g);
	NST_TRUE(g.intact);
	NST_EQ(g.seq, 42);
	NST_EQ(fab_recv(pb, &rx), -EAGAIN);
	NST_EQ(fab_rx_done(pb, idx), 0);
	NST_EQ(fab_rx_done(pb, idx), -EINVAL);
	NST_EQ(frames_free(), n0);

	st = stats(a_addr, b_addr);
	NST_EQ(st.tx.frames, 1);
	NST_EQ(st.tx.bytes, len);
	NST_EQ(st.rx.delivered, 1);
	NST_EQ(st.rx.delivered_bytes, len);
	NST_EQ(st.queued, 0);
}

static void test_errors(void)
{
	uint32_t idx, n0 = frames_free(), e_addr;
	struct fab_port *again;
	void *data;

	fab_addr_parse("198.18.0.9", &e_addr);
	/* No port there: -EHOSTUNREACH, and the frame is released. */
	NST_REQUIRE_EQ(fab_frame_get(pa, &idx, &data), 0);
	NST_EQ(fab_send(pa, idx, 100, e_addr), -EHOSTUNREACH);
	NST_EQ(frames_free(), n0);
	/* Bound but not open. */
	NST_REQUIRE_EQ(fab_frame_get(pa, &idx, &data), 0);
	NST_EQ(fab_send(pa, idx, 100, d_addr), -EHOSTUNREACH);
	NST_EQ(frames_free(), n0);
	/* Not a frame of ours: nothing released. */
	NST_EQ(fab_send(pa, 5, 100, b_addr), -EINVAL);
	NST_EQ(fab_send(pa, 1u << 30, 100, b_addr), -EINVAL);
	NST_REQUIRE_EQ(fab_frame_get(pa, &idx, &data), 0);
	NST_EQ(fab_send(pb, idx, 100, c_addr), -EINVAL);
	NST_EQ(fab_frame_put(pb, idx), -EINVAL);
	/* Bad lengths: refused, released. */
	NST_EQ(fab_send(pa, idx, FAB_SLOT_BYTES + 1, b_addr), -EMSGSIZE);
	NST_EQ(frames_free(), n0);
	NST_REQUIRE_EQ(fab_frame_get(pa, &idx, &data), 0);
	NST_EQ(fab_send(pa, idx, 0, b_addr), -EINVAL);
	NST_EQ(frames_free(), n0);
	NST_EQ(fab_frame_put(pa, 1u << 30), -EINVAL);

	/* One owner per port; addresses outside the block. */
	NST_EQ(fab_port_open(fab, a_addr, &again), -EADDRINUSE);
	NST_EQ(fab_port_open(fab, htonl(0x0a000001), &again), -EADDRNOTAVAIL);
	NST_EQ(fab_port_claim(fab, htonl(0x0a000001)), -EADDRNOTAVAIL);
	/* A closed port is unreachable. */
	fab_port_close(pc);
	pc = NULL;
	NST_EQ(send_seq(pa, c_addr, 1), -EHOSTUNREACH);
	NST_EQ(frames_free(), n0);
	/* An existing fabric with a live port is not replaced. */
	{
		const struct fab_config cfg = {.seed = 1};

		NST_EQ(fab_create(dir, &cfg), -EBUSY);
		NST_EQ(fab_destroy_files(dir), -EBUSY);
	}
}

static void test_order_two_sources(void)
{
	static struct got g[3000];
	uint32_t next_a = 0, next_c = 0, i;
	size_t n;

	for (i = 0; i < 1500; i++) {
		NST_REQUIRE_EQ(send_seq(pa, b_addr, i), 0);
		NST_REQUIRE_EQ(send_seq(pc, b_addr, 100000 + i), 0);
		if (i % 256 == 255)
			(void)fab_next_due_ns(pb);
	}
	n = collect(pb, g, 3000);
	NST_EQ(n, 3000);
	for (i = 0; i < n; i++) {
		NST_TRUE(g[i].intact);
		NST_EQ(g[i].marks, 0);
		if (g[i].src == a_addr)
			NST_EQ(g[i].seq, next_a++);
		else
			NST_EQ(g[i].seq, 100000 + next_c++);
	}
	NST_EQ(next_a, 1500);
	NST_EQ(next_c, 1500);
	NST_EQ(frames_free(), 4096);
}

/*
 * Frames wait for delivery in two places: those that arrive in order of
 * their due times in a queue, the others in a heap.  Delivered all at once,
 * they come out in order of due time whichever place they waited in.
 */
static void test_delivery_in_due_order(void)
{
	enum { N = 1000 }; /* within a ring's depth per source */
	static struct got g[N];
	uint32_t from_a = 0;
	size_t n, i;

	link_set(a_addr, b_addr, "jitter 300 reorder 10 reorder-gap 200");
	link_set(c_addr, b_addr, "latency 150");
	for (i = 0; i < N / 2; i++) {
		NST_REQUIRE_EQ(send_seq(pa, b_addr, (uint32_t)i), 0);
		NST_REQUIRE_EQ(send_seq(pc, b_addr, 100000 + (uint32_t)i), 0);
	}
	sleep_ns(2000000); /* all due */
	n = collect(pb, g, N);
	NST_EQ(n, N);
	for (i = 0; i < n; i++) {
		NST_TRUE(g[i].intact);
		NST_TRUE(i == 0 || g[i].due_ns >= g[i - 1].due_ns);
		from_a += g[i].src == a_addr;
	}
	NST_EQ(from_a, N / 2);
	NST_EQ(frames_free(), 4096);
}

/* ---- Timing ----------------------------------------------------------------------- */

static void test_latency(void)
{
	const uint64_t lat = 20000000; /* 20 ms */
	struct fab_rx rx;
	uint64_t t0, t1, due;

	link_set(a_addr, b_addr, "latency 20000");
	t0 = fab_now_ns();
	NST_REQUIRE_EQ(send_seq(pa, b_addr, 1), 0);
	t1 = fab_now_ns();
	NST_EQ(fab_recv(pb, &rx), -EAGAIN);
	due = fab_next_due_ns(pb);
	/* Required: the waits below are bounded by it. */
	NST_REQUIRE(due >= t0 + lat && due <= t1 + lat);
	/* Half way: still not delivered. */
	sleep_ns(lat / 2);
	if (fab_now_ns() < due)
		NST_EQ(fab_recv(pb, &rx), -EAGAIN);
	/* Once due, it is. */
	while (fab_now_ns() < due)
		sleep_ns(due - fab_now_ns());
	NST_REQUIRE_EQ(fab_recv(pb, &rx), 0);
	NST_EQ(rx.due_ns, due);
	NST_TRUE(fab_now_ns() >= due);
	NST_EQ(fab_rx_done(pb, rx.idx), 0);
	NST_EQ_U(fab_next_due_ns(pb), UINT64_MAX);
}

static void test_rate_limit(void)
{
	/* 0.1 Gbit/s: a frame of L bytes takes L * 80 ns to serialise. */
	enum { N = 50 };
	static struct got g[N];
	uint64_t t0, per, total;
	uint32_t len = 0, i;
	size_t n;

	link_set(a_addr, b_addr, "rate 0.1");
	t0 = fab_now_ns();
	for (i = 0; i < N; i++)
		NST_REQUIRE_EQ(send_frame(pa, b_addr, FAB_OP_SEND_ONLY, QPN, i, LONG_PAYLOAD), 0);
	n = collect(pb, g, N);
	NST_REQUIRE_EQ(n, N);
	len = g[0].len;
	per = (uint64_t)len * 8u * 1000u / 100u;
	total = g[N - 1].got_ns - t0;
	printf("\n    %u frames of %u bytes at 0.1 Gbit/s: %.2f ms (model %.2f ms)", N, len,
	       (double)total / 1e6, (double)(per * N) / 1e6);
	/* Each frame starts when it is sent or when the previous one has left,
	 * whichever is later: back to back while the sender keeps ahead. */
	NST_EQ(g[0].due_ns, g[0].sent_ns + per);
	for (i = 1; i < N; i++) {
		uint64_t start = g[i].sent_ns > g[i - 1].due_ns ? g[i].sent_ns : g[i - 1].due_ns;

		NST_EQ(g[i].due_ns, start + per);
	}
	NST_TRUE(g[0].due_ns >= t0 + per);
	NST_TRUE(total >= per * N);
	NST_TRUE(total < per * N + 200000000u);
	for (i = 0; i < N; i++)
		NST_TRUE(g[i].got_ns >= g[i].due_ns);
}

/* ---- Fault rules ------------------------------------------------------------------ */

/* Send n frames A -> B in batches and collect them; returns how many
 * arrived, their sequence numbers marked in got_seq (a bitmap). */
static size_t run_frames(uint32_t n, uint8_t *got_seq, struct got *g, size_t gmax)
{
	static struct got batch[1200];
	size_t total = 0, k, m;
	uint32_t i, b;

	for (i = 0; i < n; i += 500) {
		for (b = i; b < i + 500 && b < n; b++)
			NST_REQUIRE_EQ(send_seq(pa, b_addr, b), 0);
		m = collect(pb, batch, 1200);
		for (k = 0; k < m; k++) {
			if (got_seq)
				got_seq[batch[k].seq / 8] |= (uint8_t)(1u << (batch[k].seq % 8));
			if (g && total < gmax)
				g[total] = batch[k];
			total++;
		}
	}
	return total;
}

static void test_loss_reproducible(void)
{
	enum { N = 20000 };
	static uint8_t first[N / 8], again[N / 8], other[N / 8];
	struct fab_link_stats st;
	size_t got;
	double mean = N * 0.05, sd = 30.8; /* binomial(20000, 0.05) */
	long lost;

	link_set(a_addr, b_addr, "loss 5 seed 42");
	got = run_frames(N, first, NULL, 0);
	st = stats(a_addr, b_addr);
	lost = (long)(N - got);
	printf("\n    loss 5%%, seed 42: %ld of %d lost (expected %.0f +- %.0f)", lost, N, mean,
	       sd);
	NST_EQ(st.tx.dropped_loss, lost);
	NST_EQ(st.rx.delivered, got);
	NST_TRUE(lost > mean - 4 * sd && lost < mean + 4 * sd);

	/* The same seed again: the very same frames are lost. */
	link_set(a_addr, b_addr, "seed 42");
	NST_EQ((long)(N - run_frames(N, again, NULL, 0)), lost);
	NST_TRUE(memcmp(first, again, sizeof(first)) == 0);

	/* Another seed: other frames. */
	link_set(a_addr, b_addr, "seed 43");
	got = run_frames(N, other, NULL, 0);
	NST_TRUE(memcmp(first, other, sizeof(first)) != 0);
	NST_TRUE((long)(N - got) > mean - 4 * sd && (long)(N - got) < mean + 4 * sd);

	/* Other rules on the link do not change which frames are lost. */
	link_set(a_addr, b_addr, "seed 42 dup 3 reorder 2");
	memset(again, 0, sizeof(again));
	run_frames(N, again, NULL, 0);
	NST_TRUE(memcmp(first, again, sizeof(first)) == 0);
	NST_EQ(frames_free(), 4096);
}

static void test_duplicate(void)
{
	enum { N = 5000 };
	static struct got g[2 * N];
	struct fab_link_stats st;
	size_t n, i, dups = 0;

	link_set(a_addr, b_addr, "dup 10");
	n = run_frames(N, NULL, g, 2 * N);
	st = stats(a_addr, b_addr);
	printf("\n    dup 10%%: %llu copies of %d frames", (unsigned long long)st.tx.duplicated, N);
	NST_EQ(n, N + st.tx.duplicated);
	NST_TRUE(st.tx.duplicated > N * 0.10 - 90 && st.tx.duplicated < N * 0.10 + 90);
	for (i = 0; i < n; i++) {
		NST_TRUE(g[i].intact);
		if (!(g[i].marks & FAB_MARK_DUPLICATE))
			continue;
		dups++;
		/* The copy follows its original, with the same content. */
		NST_REQUIRE(i > 0);
		NST_EQ(g[i].seq, g[i - 1].seq);
		NST_EQ(g[i].link_seq, g[i - 1].link_seq);
		NST_EQ(g[i - 1].marks & FAB_MARK_DUPLICATE, 0);
	}
	NST_EQ(dups, st.tx.duplicated);
	NST_EQ(frames_free(), 4096);
}

static void test_reorder(void)
{
	enum { N = 3000 };
	static struct got g[N];
	struct fab_link_stats st;
	uint32_t marked = 0, overtaken = 0, last_in_order = 0;
	size_t n, i, j;

	/* A long hold-back: the frames sent meanwhile overtake. */
	link_set(a_addr, b_addr, "reorder 5 reorder-gap 20000");
	send_seqs(pa, pb, 0, N);
	n = collect(pb, g, N);
	st = stats(a_addr, b_addr);
	NST_EQ(n, N);
	for (i = 0; i < n; i++) {
		NST_TRUE(g[i].intact);
		if (!(g[i].marks & FAB_MARK_REORDERED)) {
			/* The others keep their order among themselves. */
			NST_TRUE(i == 0 || g[i].seq >= last_in_order);
			last_in_order = g[i].seq;
			continue;
		}
		marked++;
		for (j = 0; j < i; j++)
			if (g[j].seq > g[i].seq) {
				overtaken++;
				break;
			}
	}
	printf("\n    reorder 5%%: %u of %d held back, %u of them overtaken", marked, N, overtaken);
	NST_EQ(marked, st.tx.reordered);
	NST_TRUE(marked > N * 0.05 - 50 && marked < N * 0.05 + 50);
	/* Frames sent within 20 ms of a held-back one overtake it: all of them
	 * unless it was among the last sent. */
	NST_TRUE(overtaken >= marked * 9 / 10);
}

static void test_corrupt(void)
{
	enum { N = 2000 };
	static struct got g[N];
	struct fab_link_stats st;
	uint32_t bad = 0;
	size_t n, i;

	link_set(a_addr, b_addr, "corrupt 10");
	for (i = 0; i < N; i++) {
		NST_REQUIRE_EQ(send_frame(pa, b_addr, FAB_OP_SEND_ONLY, QPN, (uint32_t)i,
					  (uint32_t)(i % 2 ? 1000 : 8)),
			       0);
		if (i % 256 == 255)
			(void)fab_next_due_ns(pb);
	}
	n = collect(pb, g, N);
	st = stats(a_addr, b_addr);
	NST_EQ(n, N);
	for (i = 0; i < n; i++) {
		if (g[i].marks & FAB_MARK_CORRUPTED) {
			bad++;
			/* The NIC's decoder sees a frame damaged on the wire. */
			NST_TRUE(!g[i].intact);
			NST_EQ(g[i].why, FAB_WIRE_E_ICRC);
		} else {
			NST_TRUE(g[i].intact);
		}
		NST_EQ(g[i].seq, i);
	}
	printf("\n    corrupt 10%%: %u of %d frames fail their ICRC", bad, N);
	NST_EQ(bad, st.tx.corrupted);
	NST_TRUE(bad > N * 0.10 - 55 && bad < N * 0.10 + 55);
}

static void test_corrupt_one_bit(void)
{
	static uint8_t want[FAB_SLOT_BYTES];
	uint32_t i, diff = 0, where = 0, len;
	struct fab_rx rx;
	uint8_t x;

	link_set(a_addr, b_addr, "corrupt 100");
	len = make_frame(want, a_addr, b_addr, FAB_OP_SEND_ONLY, QPN, 9, 500);
	NST_REQUIRE_EQ(send_frame(pa, b_addr, FAB_OP_SEND_ONLY, QPN, 9, 500), 0);
	NST_REQUIRE_EQ(fab_recv(pb, &rx), 0);
	NST_REQUIRE_EQ(rx.len, len);
	for (i = 0; i < len; i++) {
		x = ((const uint8_t *)rx.data)[i] ^ want[i];
		if (x) {
			diff += (uint32_t)__builtin_popcount(x);
			where = i;
		}
	}
	NST_EQ(diff, 1);
	/* After the BTH, before the ICRC. */
	NST_TRUE(where >= FAB_HDR_BASE && where < len - FAB_ICRC_LEN);
	NST_EQ(fab_rx_done(pb, rx.idx), 0);
}

static void test_delay(void)
{
	enum { N = 2000 };
	static struct got g[N];
	struct fab_link_stats st;
	uint32_t delayed = 0;
	size_t n, i;

	link_set(a_addr, b_addr, "delay 300 delay-pct 20");
	send_seqs(pa, pb, 0, N);
	n = collect(pb, g, N);
	st = stats(a_addr, b_addr);
	NST_EQ(n, N);
	for (i = 0; i < n; i++) {
		NST_TRUE(g[i].got_ns >= g[i].due_ns);
		if (g[i].marks & FAB_MARK_DELAYED) {
			delayed++;
			NST_EQ(g[i].due_ns - g[i].sent_ns, 300000);
		} else {
			NST_EQ(g[i].due_ns, g[i].sent_ns);
		}
	}
	printf("\n    delay 300 us for 20%%: %u of %d delayed", delayed, N);
	NST_EQ(delayed, st.tx.delayed);
	NST_TRUE(delayed > N * 0.2 - 80 && delayed < N * 0.2 + 80);
}

static void test_drop_nth_filter(void)
{
	static const uint8_t ops[] = {FAB_OP_SEND_ONLY, FAB_OP_RDMA_WRITE_ONLY, FAB_OP_ACKNOWLEDGE};
	static const uint32_t qpns[] = {0x10, 0x20};
	static struct got g[64];
	struct fab_link_stats st;
	uint32_t i, matching = 0, victim = UINT32_MAX;
	uint8_t seen[64] = {0};
	size_t n;

	link_set(a_addr, b_addr, "drop-nth 3 opcode RC_RDMA_WRITE_ONLY qpn 0x20");
	for (i = 0; i < 60; i++) {
		uint8_t op = ops[i % 3];
		uint32_t qpn = qpns[(i / 3) % 2];

		if (op == FAB_OP_RDMA_WRITE_ONLY && qpn == 0x20 && ++matching == 3)
			victim = i;
		NST_REQUIRE_EQ(send_frame(pa, b_addr, op, qpn, i, 32), 0);
	}
	n = collect(pb, g, 64);
	st = stats(a_addr, b_addr);
	NST_EQ(n, 59);
	NST_EQ(st.tx.dropped_nth, 1);
	NST_EQ(st.nth_matched, matching);
	for (i = 0; i < n; i++)
		seen[g[i].seq] = 1;
	for (i = 0; i < 60; i++)
		NST_EQ(seen[i], i != victim);

	/* Setting the rule again restarts the count: the 1st matching frame. */
	link_set(a_addr, b_addr, "drop-nth 1 opcode ack");
	NST_REQUIRE_EQ(send_frame(pa, b_addr, FAB_OP_SEND_ONLY, 0x10, 100, 32), 0);
	NST_REQUIRE_EQ(send_frame(pa, b_addr, FAB_OP_ACKNOWLEDGE, 0x10, 101, 0), 0);
	NST_REQUIRE_EQ(send_frame(pa, b_addr, FAB_OP_ACKNOWLEDGE, 0x10, 102, 0), 0);
	n = collect(pb, g, 64);
	NST_EQ(n, 2);
	NST_EQ(g[0].seq, 100);
	NST_EQ(g[1].seq, 102);
	NST_EQ(stats(a_addr, b_addr).tx.dropped_nth, 2);
}

static void test_link_down_up(void)
{
	static struct got g[200];
	struct fab_link_stats st;
	uint32_t i;

	link_set(a_addr, b_addr, "down");
	for (i = 0; i < 100; i++)
		NST_REQUIRE_EQ(send_seq(pa, b_addr, i), 0);
	NST_EQ(collect(pb, g, 200), 0);
	st = stats(a_addr, b_addr);
	NST_EQ(st.tx.dropped_down, 100);
	/* The other direction and other links are unaffected. */
	NST_REQUIRE_EQ(send_seq(pb, a_addr, 1), 0);
	NST_EQ(collect(pa, g, 200), 1);
	NST_REQUIRE_EQ(send_seq(pc, b_addr, 1), 0);
	NST_EQ(collect(pb, g, 200), 1);

	link_set(a_addr, b_addr, "up");
	for (i = 0; i < 100; i++)
		NST_REQUIRE_EQ(send_seq(pa, b_addr, i), 0);
	NST_EQ(collect(pb, g, 200), 100);

	/* Frames in flight when the link goes down are lost too. */
	link_set(a_addr, b_addr, "latency 5000");
	for (i = 0; i < 10; i++)
		NST_REQUIRE_EQ(send_seq(pa, b_addr, i), 0);
	link_set(a_addr, b_addr, "down");
	NST_EQ(collect(pb, g, 200), 0);
	st = stats(a_addr, b_addr);
	NST_EQ(st.rx.dropped_down_rx, 10);
	link_set(a_addr, b_addr, "up");
	NST_REQUIRE_EQ(send_seq(pa, b_addr, 11), 0);
	NST_EQ(collect(pb, g, 200), 1);
	NST_EQ(frames_free(), 4096);
}

/* Tap events: every frame offered, drops included, with its marks. */
struct tap_count {
	uint32_t events, lost, delivered_marks;
};

static void count_tap(void *arg, const struct fab_tap_frame *f)
{
	struct tap_count *t = arg;
	struct fab_pkt pkt;
	enum fab_wire_err why;

	t->events++;
	if (f->marks & FAB_MARK_DROP_LOSS)
		t->lost++;
	if (!(f->marks & FAB_MARKS_DROP))
		t->delivered_marks++;
	/* The tap sees the frame's bytes before it is released. */
	NST_EQ(fab_pkt_decode(f->data, f->len, &pkt, &why), 0);
}

static void test_tap(void)
{
	struct tap_count t = {0};
	static struct got g[1000];
	size_t n;
	uint32_t i;

	fab_port_set_tap(pa, count_tap, &t);
	link_set(a_addr, b_addr, "loss 30");
	for (i = 0; i < 1000; i++)
		NST_REQUIRE_EQ(send_seq(pa, b_addr, i), 0);
	n = collect(pb, g, 1000);
	NST_EQ(t.events, 1000);
	NST_EQ(t.lost, stats(a_addr, b_addr).tx.dropped_loss);
	NST_EQ(t.delivered_marks, n);
	fab_port_set_tap(pa, NULL, NULL);
}

/* ---- Burst units ------------------------------------------------------------------- */

#define UNIT_N 40u
#define UNIT_SEEN 200u

/*
 * Packet i of a UNIT_N-packet RDMA WRITE, as a requester makes them: FIRST
 * with its RETH, MIDDLEs, a shorter LAST, PSNs that wrap past 2^24, AckReq
 * every 16th packet and on the last, a payload that depends on i; encoded
 * into buf with fab_pkt_encode_opt's flags.
 */
static uint32_t unit_frame(uint8_t *buf, uint32_t i, unsigned flags)
{
	static uint8_t payload[FAB_MTU];
	struct fab_pkt pkt;
	uint8_t opcode = i == 0            ? FAB_OP_RDMA_WRITE_FIRST
			 : i + 1 == UNIT_N ? FAB_OP_RDMA_WRITE_LAST
					   : FAB_OP_RDMA_WRITE_MIDDLE;
	size_t len = 0;

	NST_REQUIRE_EQ(fab_pkt_init(&pkt, opcode), 0);
	pkt.src_ip = a_addr;
	pkt.dst_ip = b_addr;
	pkt.udp_sport = fab_udp_sport(QPN);
	pkt.dest_qpn = QPN;
	pkt.psn = (0xfffff0u + i) & FAB_MASK24;
	pkt.ack_req = i + 1 == UNIT_N || i % 16 == 15;
	pkt.payload_len = i + 1 == UNIT_N ? FAB_MTU - 101 : FAB_MTU;
	if (pkt.has_reth) {
		pkt.va = 0x7f0000001000ull;
		pkt.rkey = 0x4321;
		pkt.dma_len = (UNIT_N - 1) * FAB_MTU + FAB_MTU - 101;
	}
	for (uint32_t k = 0; k < pkt.payload_len; k++)
		payload[k] = (uint8_t)(i * 131u + k * 7u);
	pkt.payload = payload;
	NST_REQUIRE_EQ(fab_pkt_encode_opt(&pkt, buf, FAB_SLOT_BYTES, &len, flags), 0);
	return (uint32_t)len;
}

/* The length of packet i's frame. */
static uint32_t unit_frame_len(uint32_t i)
{
	static uint8_t buf[FAB_SLOT_BYTES];

	return unit_frame(buf, i, 0);
}

/* A frame as someone saw it: received, tapped or captured. */
struct seen {
	uint64_t link_seq;
	uint32_t marks, len, caplen;
	bool no_icrc;
	uint8_t bytes[FAB_SLOT_BYTES];
};

struct seen_list {
	uint32_t n;
	struct seen s[UNIT_SEEN];
};

static void seen_add(struct seen_list *l, const void *data, uint32_t len, uint32_t caplen,
		     uint32_t marks, uint64_t link_seq, bool no_icrc)
{
	struct seen *s;

	NST_REQUIRE(l->n < UNIT_SEEN && caplen <= len && len <= FAB_SLOT_BYTES);
	s = &l->s[l->n++];
	s->link_seq = link_seq;
	s->marks = marks;
	s->len = len;
	s->caplen = caplen;
	s->no_icrc = no_icrc;
	memcpy(s->bytes, data, caplen);
}

static void seen_tap(void *arg, const struct fab_tap_frame *f)
{
	NST_TRUE(!f->no_icrc);
	seen_add(arg, f->data, f->len, f->len, f->marks, f->link_seq, false);
}

static int seen_cap(void *arg, const struct fab_cap_rec *r)
{
	seen_add(arg, r->data, r->len, r->caplen, r->marks | (r->rx_drop ? 0x80000000u : 0),
		 r->link_seq, false);
	return 0;
}

/* Order of a list that does not depend on delivery times: by link
 * sequence, each copy after its original. */
static int seen_cmp(const void *a, const void *b)
{
	const struct seen *x = a, *y = b;

	if (x->link_seq != y->link_seq)
		return x->link_seq < y->link_seq ? -1 : 1;
	return (int)(x->marks & FAB_MARK_DUPLICATE) - (int)(y->marks & FAB_MARK_DUPLICATE);
}

/* Receive at B everything that will arrive, as collect() does, keeping the
 * bytes. */
static void seen_collect(struct seen_list *l)
{
	uint64_t deadline = fab_now_ns() + (uint64_t)WAIT_MS * 1000000u, due, now;
	struct fab_rx rx;

	for (;;) {
		if (fab_recv(pb, &rx) == 0) {
			seen_add(l, rx.data, rx.len, rx.len, rx.marks, rx.link_seq, rx.no_icrc);
			NST_EQ(fab_rx_done(pb, rx.idx), 0);
			continue;
		}
		due = fab_next_due_ns(pb);
		if (due == UINT64_MAX)
			break;
		now = fab_now_ns();
		NST_REQUIRE(now < deadline);
		if (due > now)
			sleep_ns(due - now < 1000000u ? due - now : 1000000u);
	}
}

/* The two lists hold the same frames, byte for byte, with the same marks
 * and numbers on the link. */
static void seen_same(const char *what, struct seen_list *unit, struct seen_list *alone)
{
	qsort(unit->s, unit->n, sizeof(unit->s[0]), seen_cmp);
	qsort(alone->s, alone->n, sizeof(alone->s[0]), seen_cmp);
	NST_CHECK_(unit->n == alone->n, CU_TRUE, "%s: %u frames from the unit, %u sent alone", what,
		   unit->n, alone->n);
	for (uint32_t i = 0; i < unit->n && i < alone->n; i++) {
		const struct seen *u = &unit->s[i], *a = &alone->s[i];

		NST_CHECK_(u->link_seq == a->link_seq && u->marks == a->marks && u->len == a->len &&
			       u->caplen == a->caplen && memcmp(u->bytes, a->bytes, u->caplen) == 0,
			   CU_TRUE,
			   "%s: frame %u differs: link_seq %llu/%llu marks 0x%x/0x%x len %u/%u, "
			   "bytes %s",
			   what, i, (unsigned long long)u->link_seq,
			   (unsigned long long)a->link_seq, u->marks, a->marks, u->len, a->len,
			   u->caplen == a->caplen && memcmp(u->bytes, a->bytes, u->caplen) == 0
			       ? "equal"
			       : "differ");
	}
}

/* Who watches A's frames: nobody, a tap callback, or a capture that keeps
 * whole frames, all but the last two bytes of the longest (so part of its
 * ICRC), or the first 100 bytes. */
enum unit_watch { WATCH_NONE, WATCH_TAP, WATCH_CAPTURE, WATCH_CAPTURE_PART, WATCH_CAPTURE_HEAD };

struct unit_run {
	struct seen_list rx, seen; /* received at B; tapped or captured at A */
	bool whole;
	struct fab_unit_res res;
};

/*
 * Send the UNIT_N packets from A to B over a link set to settings, with the
 * link's decisions restarted from one seed, as one unit (encoded without
 * their ICRCs) or one frame at a time (with them), and keep what B received
 * and what the tap or the capture saw.
 */
static void unit_run(const char *settings, bool as_unit, enum unit_watch watch,
		     struct unit_run *out)
{
	uint32_t idx[UNIT_N], len[UNIT_N];
	struct fab_cap *cap = NULL;
	struct fab *cap_fab = NULL;
	char words[256];
	void *data;

	memset(out, 0, sizeof(*out));
	snprintf(words, sizeof(words), "clear seed 99 %s", settings);
	link_set(a_addr, b_addr, words);
	if (watch == WATCH_TAP)
		fab_port_set_tap(pa, seen_tap, &out->seen);
	if (watch >= WATCH_CAPTURE) {
		uint32_t copy = watch == WATCH_CAPTURE        ? FAB_SLOT_BYTES
				: watch == WATCH_CAPTURE_PART ? unit_frame_len(0) - 2
							      : 100;

		NST_REQUIRE_EQ(fab_open(dir, &cap_fab), 0);
		NST_REQUIRE_EQ(fab_cap_attach(cap_fab, copy, &cap), 0);
	}
	for (uint32_t i = 0; i < UNIT_N; i++) {
		NST_REQUIRE_EQ(fab_frame_get(pa, &idx[i], &data), 0);
		len[i] = unit_frame(data, i, as_unit ? FAB_PKT_NO_ICRC : 0);
	}
	if (as_unit) {
		NST_EQ(fab_send_unit(pa, idx, len, UNIT_N, b_addr, &out->res), 0);
		NST_EQ(out->res.sent, UNIT_N);
		out->whole = out->res.whole;
	} else {
		for (uint32_t i = 0; i < UNIT_N; i++)
			NST_EQ(fab_send(pa, idx[i], len[i], b_addr), 0);
	}
	seen_collect(&out->rx);
	/* What B received, as an observer would see it: a frame of a unit that
	 * crossed whole gets its ICRC where it is looked at. */
	for (uint32_t i = 0; i < out->rx.n; i++) {
		struct seen *s = &out->rx.s[i];
		struct fab_pkt pkt;
		enum fab_wire_err why;

		if (!s->no_icrc)
			continue;
		NST_EQ(fab_pkt_decode_opt(s->bytes, s->len, &pkt, &why, FAB_PKT_NO_ICRC), 0);
		/* Left out, unless a capture that keeps less than the frame had
		 * the sender compute it. */
		if (watch < WATCH_CAPTURE_PART)
			NST_EQ(fab_pkt_decode(s->bytes, s->len, &pkt, &why), -EBADMSG);
		NST_EQ(fab_pkt_icrc_fill(s->bytes, s->len), 0);
		NST_EQ(fab_pkt_decode(s->bytes, s->len, &pkt, &why), 0);
	}
	if (watch == WATCH_TAP)
		fab_port_set_tap(pa, NULL, NULL);
	if (cap) {
		size_t n;

		do
			NST_EQ(fab_cap_read(cap, seen_cap, &out->seen, &n), 0);
		while (n);
		fab_cap_detach(cap);
		fab_close(cap_fab);
	}
}

/*
 * A unit's packets, split out where they become observable, are the packets
 * sent one at a time: the same bytes (headers, payload, ICRC), the same
 * fate under every rule, the same numbers on the link, and the same frames
 * in the tap and the capture.  Only on a link with no rule and nothing
 * watching does the unit cross whole; its frames then reach the receiver
 * without their ICRCs, and are the same frames once it is filled in.
 */
static void test_unit_split_identical(void)
{
	static const struct {
		const char *settings;
		enum unit_watch watch;
		bool whole;
	} cases[] = {
	    {"", WATCH_NONE, true},
	    {"", WATCH_TAP, false},
	    {"", WATCH_CAPTURE, true},
	    {"", WATCH_CAPTURE_PART, true},
	    {"", WATCH_CAPTURE_HEAD, true},
	    {"loss 30", WATCH_NONE, false},
	    {"loss 30", WATCH_TAP, false},
	    {"dup 30", WATCH_NONE, false},
	    {"dup 30", WATCH_CAPTURE, false},
	    {"loss 10", WATCH_CAPTURE_PART, false},
	    {"reorder 30", WATCH_NONE, false},
	    {"reorder 30 reorder-gap 5", WATCH_CAPTURE, false},
	    {"corrupt 30", WATCH_NONE, false},
	    {"corrupt 30 dup 20 loss 10", WATCH_CAPTURE, false},
	    {"delay 30 delay-pct 40", WATCH_TAP, false},
	    {"drop-nth 5", WATCH_NONE, false},
	    {"drop-nth 3 qpn 291", WATCH_CAPTURE, false},
	    {"drop-nth 2 opcode RDMA_WRITE_MIDDLE", WATCH_TAP, false},
	    {"down", WATCH_TAP, false},
	    {"latency 20", WATCH_NONE, false},
	    {"latency 10 jitter 5", WATCH_NONE, false},
	    {"rate 100", WATCH_TAP, false},
	};
	static struct unit_run unit, alone;
	char what[128];

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		snprintf(what, sizeof(what), "'%s'%s", cases[c].settings,
			 cases[c].watch == WATCH_TAP       ? " with a tap"
			 : cases[c].watch == WATCH_CAPTURE ? " with a capture"
			 : cases[c].watch > WATCH_CAPTURE  ? " with a capture of part of each frame"
							   : "");
		unit_run(cases[c].settings, true, cases[c].watch, &unit);
		unit_run(cases[c].settings, false, cases[c].watch, &alone);
		NST_CHECK_(unit.whole == cases[c].whole, CU_TRUE,
			   "%s: crossed whole %d, expected %d", what, unit.whole, cases[c].whole);
		seen_same(what, &unit.rx, &alone.rx);
		seen_same(what, &unit.seen, &alone.seen);
		for (uint32_t i = 0; i < unit.rx.n; i++)
			NST_CHECK_(unit.rx.s[i].no_icrc == unit.whole, CU_TRUE,
				   "%s: frame %u no_icrc %d", what, i, unit.rx.s[i].no_icrc);
		if (cases[c].watch != WATCH_NONE)
			NST_CHECK_(alone.seen.n >= UNIT_N, CU_TRUE, "%s: %u frames observed", what,
				   alone.seen.n);
	}
	NST_EQ(frames_free(), 4096);
}

/* A unit that crossed whole is one ring entry, counted as its frames on
 * the link; a frame of it dropped on delivery (the link went down while it
 * was in flight) reaches the tap with its ICRC, as the frame sent alone. */
static void test_unit_whole_and_dropped_in_flight(void)
{
	uint32_t idx[UNIT_N], len[UNIT_N], prod0;
	static struct seen_list unit_tap, rx;
	static uint8_t want[FAB_SLOT_BYTES];
	struct fab_unit_res res;
	struct fab_link_stats st;
	void *data;

	prod0 = stats(a_addr, b_addr).prod;
	NST_EQ(fab_unit_whole(pa, b_addr), 1);
	NST_EQ(fab_unit_whole(pa, d_addr), -EHOSTUNREACH);
	for (uint32_t i = 0; i < UNIT_N; i++) {
		NST_REQUIRE_EQ(fab_frame_get(pa, &idx[i], &data), 0);
		len[i] = unit_frame(data, i, FAB_PKT_NO_ICRC);
	}
	NST_EQ(fab_send_unit(pa, idx, len, UNIT_N, b_addr, &res), 0);
	NST_TRUE(res.whole);
	st = stats(a_addr, b_addr);
	NST_EQ(st.prod - prod0, 1);
	NST_EQ(st.tx.frames, UNIT_N);
	link_set(a_addr, b_addr, "down");
	fab_port_set_tap(pb, seen_tap, &unit_tap);
	seen_collect(&rx);
	fab_port_set_tap(pb, NULL, NULL);
	NST_EQ(rx.n, 0);
	NST_EQ(stats(a_addr, b_addr).rx.dropped_down_rx, UNIT_N);
	NST_EQ(unit_tap.n, UNIT_N);
	for (uint32_t i = 0; i < unit_tap.n && i < UNIT_N; i++) {
		uint32_t n = unit_frame(want, i, 0);

		NST_EQ(unit_tap.s[i].link_seq, i);
		NST_EQ(unit_tap.s[i].marks, FAB_MARK_DROP_DOWN);
		NST_CHECK_(unit_tap.s[i].len == n && memcmp(unit_tap.s[i].bytes, want, n) == 0,
			   CU_TRUE, "frame %u dropped in flight: not the frame sent alone", i);
	}
	/* A unit to a port nobody opened: refused whole, its frames back in
	 * the pool. */
	for (uint32_t i = 0; i < 4; i++) {
		NST_REQUIRE_EQ(fab_frame_get(pa, &idx[i], &data), 0);
		len[i] = unit_frame(data, i, FAB_PKT_NO_ICRC);
	}
	NST_EQ(fab_send_unit(pa, idx, len, 4, d_addr, &res), -EHOSTUNREACH);
	NST_EQ(res.unreachable, 4);
	NST_EQ(frames_free(), 4096);
}

/* A unit whose chain a hostile writer broke: the frames before the break
 * are delivered, the break is counted, nothing is read outside the pool. */
static void test_unit_chain_broken(void)
{
	uint32_t idx[8], len[8];
	struct fab_port_counters c0 = port_counters(b_addr), c;
	struct fab_seg_frame *meta;
	struct fab_seg_hdr *h;
	struct fab_unit_res res;
	static struct seen_list rx;
	char path[PATH_MAX];
	struct stat st;
	uint8_t *base;
	void *data;
	int fd;

	snprintf(path, sizeof(path), "%s/" FAB_SEG_FILE, dir);
	fd = open(path, O_RDWR);
	NST_REQUIRE(fd >= 0);
	NST_REQUIRE_EQ(fstat(fd, &st), 0);
	base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	NST_REQUIRE(base != MAP_FAILED);
	h = (struct fab_seg_hdr *)base;
	meta = (struct fab_seg_frame *)(base + h->meta_off);

	for (uint32_t i = 0; i < 8; i++) {
		NST_REQUIRE_EQ(fab_frame_get(pa, &idx[i], &data), 0);
		len[i] = unit_frame(data, i, FAB_PKT_NO_ICRC);
	}
	NST_EQ(fab_send_unit(pa, idx, len, 8, b_addr, &res), 0);
	NST_TRUE(res.whole);
	meta[idx[3]].unit = 9;                /* not the count the chain expects */
	meta[idx[5]].unit_next = 0xfffffff0u; /* outside the pool */
	seen_collect(&rx);
	c = port_counters(b_addr);
	NST_EQ(rx.n, 3);
	NST_EQ(c.bad_meta - c0.bad_meta, 1);
	/* A count over the most a unit holds, on a head: refused. */
	for (uint32_t i = 0; i < 2; i++) {
		NST_REQUIRE_EQ(fab_frame_get(pa, &idx[i], &data), 0);
		len[i] = unit_frame(data, i, FAB_PKT_NO_ICRC);
	}
	NST_EQ(fab_send_unit(pa, idx, len, 2, b_addr, &res), 0);
	meta[idx[0]].unit = FAB_UNIT_MAX + 1;
	rx.n = 0;
	seen_collect(&rx);
	NST_EQ(rx.n, 0);
	NST_EQ(port_counters(b_addr).bad_meta - c0.bad_meta, 2);
	munmap(base, (size_t)st.st_size);
}

/* ---- Pool, ports, bells --------------------------------------------------------------- */

static void test_pool_exhaustion(void)
{
	uint32_t idx[64], extra, i;
	void *data;
	struct got g[4];

	teardown();
	open_fabric(64);
	for (i = 0; i < 64; i++)
		NST_REQUIRE_EQ(fab_frame_get(i % 2 ? pa : pb, &idx[i], &data), 0);
	NST_EQ(fab_frame_get(pa, &extra, &data), -ENOBUFS);
	NST_EQ(fab_frame_get(pc, &extra, &data), -ENOBUFS);
	/* A duplicate that finds no frame is not sent; the original is. */
	NST_EQ(frames_free(), 0);
	link_set(a_addr, b_addr, "dup 100");
	NST_REQUIRE_EQ(fab_send(pa, idx[1], 60, b_addr), 0);
	NST_EQ(stats(a_addr, b_addr).tx.dup_nobuf, 1);
	NST_EQ(collect(pb, g, 4), 1);
	link_set(a_addr, b_addr, "dup 0");
	/* Recovers as soon as one comes back. */
	NST_REQUIRE_EQ(fab_frame_get(pc, &extra, &data), 0);
	NST_EQ(fab_frame_get(pc, &extra, &data), -ENOBUFS);
	NST_EQ(fab_frame_put(pb, idx[0]), 0);
	NST_REQUIRE_EQ(fab_frame_get(pc, &extra, &data), 0);
	NST_EQ(extra, idx[0]);
	NST_EQ(fab_frame_put(pc, extra), 0);
	for (i = 2; i < 64; i++)
		NST_EQ(fab_frame_put(i % 2 ? pa : pb, idx[i]), 0);
	NST_EQ(frames_free(), 63); /* pc still holds one */
}

/*
 * The frames kept for packets without payload: data takes every other
 * frame and then none, and acknowledgements still find frames; once the
 * kept ones are gone they take what data left; the kept ones are never
 * data's.
 */
static void test_pool_kept_for_acks(void)
{
	static uint32_t idx[4096];
	const uint32_t kept = fab_ctl_frames(4096);
	uint32_t n = 0, ctl = 0, extra;
	void *data;

	NST_EQ(kept, 256);
	NST_EQ(fab_ctl_frames(255), 0);
	NST_EQ(fab_ctl_frames(FAB_MAX_FRAMES), 1024);
	teardown();
	open_fabric(4096);
	while (n < 4096 && fab_frame_get(n % 2 ? pa : pb, &idx[n], &data) == 0)
		n++;
	NST_EQ(n, 4096 - kept);
	for (uint32_t i = 0; i < n; i++)
		NST_TRUE(idx[i] < 4096 - kept);
	NST_EQ(fab_frame_get(pc, &extra, &data), -ENOBUFS);
	/* Acknowledgements: the kept frames. */
	while (n < 4096 && fab_frame_get_ctl(pc, &idx[n], &data) == 0) {
		NST_TRUE(idx[n] >= 4096 - kept);
		n++, ctl++;
	}
	NST_EQ(ctl, kept);
	NST_EQ(frames_free(), 0);
	/* A data frame back: data and acknowledgements may both take it. */
	NST_EQ(fab_frame_put(pb, idx[0]), 0);
	NST_REQUIRE_EQ(fab_frame_get_ctl(pc, &extra, &data), 0);
	NST_EQ(extra, idx[0]);
	NST_EQ(fab_frame_put(pc, extra), 0);
	NST_REQUIRE_EQ(fab_frame_get(pa, &extra, &data), 0);
	NST_EQ(extra, idx[0]); /* pa holds it now */
	/* A kept frame back: only an acknowledgement takes it. */
	NST_EQ(fab_frame_put(pc, idx[4095]), 0);
	NST_EQ(fab_frame_get(pa, &extra, &data), -ENOBUFS);
	NST_REQUIRE_EQ(fab_frame_get_ctl(pa, &extra, &data), 0);
	NST_EQ(extra, idx[4095]);
	NST_EQ(fab_frame_put(pa, extra), 0);
	NST_EQ(fab_frame_put(pa, idx[0]), 0);
	for (uint32_t i = 1; i < 4095; i++)
		NST_EQ(fab_frame_put(i >= 4096 - kept ? pc : i % 2 ? pa : pb, idx[i]), 0);
	NST_EQ(frames_free(), 4096);
}

static void test_ring_full(void)
{
	struct fab_port *pd;
	struct got g[8];
	uint32_t i;
	int rc = 0;

	NST_REQUIRE_EQ(fab_port_open(fab, d_addr, &pd), 0);
	/* D never receives: its ring from A fills up. */
	for (i = 0; i < 5000 && rc == 0; i++)
		rc = send_seq(pa, d_addr, i);
	NST_EQ(rc, -ENOBUFS);
	NST_TRUE(i > 8);
	NST_EQ(stats(a_addr, d_addr).tx.dest_ring_full, 1);
	fab_port_close(pd);
	NST_EQ(frames_free(), 4096);
	NST_EQ(collect(pb, g, 8), 0);
}

/* In a child: open port D, take 10 frames, receive 5 from A without giving
 * them back, and die without closing anything. */
static int die_holding(void *arg)
{
	struct fab_port *pd;
	struct fab_rx rx;
	uint32_t idx, i;
	void *data;

	(void)arg;
	if (fab_port_open(fab, d_addr, &pd))
		return 1;
	for (i = 0; i < 10; i++)
		if (fab_frame_get(pd, &idx, &data))
			return 2;
	/* The parent sends 5 frames as soon as the port is open. */
	while (fab_next_due_ns(pd) == UINT64_MAX)
		sleep_ns(100000);
	for (i = 0; i < 5;) {
		if (fab_recv(pd, &rx) == 0)
			i++;
		else
			sleep_ns(100000);
	}
	_exit(0);
}

static void test_reopen_reclaims(void)
{
	struct fab_port *pd;
	uint64_t deadline;
	struct fab_port_info *list;
	size_t n, i;
	pid_t pid;
	uint32_t k, held = 0, sent = 0;

	pid = nst_fork(die_holding, NULL);
	NST_REQUIRE(pid > 0);
	/* Send 5 frames once D is open, and 5 more after the child is gone
	 * (in flight to a dead port: the segment still says open). */
	deadline = fab_now_ns() + (uint64_t)WAIT_MS * 1000000u;
	while (sent < 5 && fab_now_ns() < deadline) {
		if (send_seq(pa, d_addr, sent) == 0)
			sent++;
		else
			sleep_ns(1000000);
	}
	NST_REQUIRE_EQ(sent, 5);
	NST_REQUIRE(WIFEXITED(nst_wait(pid, WAIT_MS)));
	for (k = 0; k < 5; k++)
		NST_REQUIRE_EQ(send_seq(pa, d_addr, 100 + k), 0);
	NST_EQ(frames_free(), 4096 - 20);
	NST_REQUIRE_EQ(fab_port_list(fab, &list, &n), 0);
	for (i = 0; i < n; i++)
		if (list[i].addr == d_addr) {
			held = list[i].frames_held;
			NST_TRUE(list[i].open);
			NST_TRUE(!list[i].live);
		}
	free(list);
	NST_EQ(held, 20);

	/* Opening the port again reclaims all of them. */
	NST_REQUIRE_EQ(fab_port_open(fab, d_addr, &pd), 0);
	NST_EQ(frames_free(), 4096);
	NST_EQ(port_counters(d_addr).reclaimed, 20);
	/* And the port works. */
	NST_REQUIRE_EQ(send_seq(pa, d_addr, 7), 0);
	{
		struct got g[4];

		NST_EQ(collect(pd, g, 4), 1);
		NST_EQ(g[0].seq, 7);
	}
	fab_port_close(pd);
	NST_EQ(frames_free(), 4096);
}

static void test_close_frees(void)
{
	uint32_t idx, i;
	void *data;

	for (i = 0; i < 10; i++)
		NST_REQUIRE_EQ(send_seq(pa, c_addr, i), 0);
	NST_REQUIRE_EQ(fab_frame_get(pc, &idx, &data), 0);
	NST_EQ(frames_free(), 4096 - 11);
	fab_port_close(pc);
	pc = NULL;
	NST_EQ(frames_free(), 4096);
}

static void test_bell(void)
{
	struct pollfd pfd = {.fd = fab_port_fd(pb), .events = POLLIN};
	struct fab_rx rx;

	/* Awake: a send writes nothing to the bell. */
	NST_REQUIRE_EQ(send_seq(pa, b_addr, 1), 0);
	NST_EQ(poll(&pfd, 1, 0), 0);
	/* With a frame waiting, the receiver may not sleep. */
	NST_EQ(fab_port_sleep_prepare(pb), -EAGAIN);
	NST_REQUIRE_EQ(fab_recv(pb, &rx), 0);
	NST_EQ(fab_rx_done(pb, rx.idx), 0);
	/* Asleep: the first send rings, the next ones do not ring again. */
	NST_EQ(fab_port_sleep_prepare(pb), 0);
	NST_REQUIRE_EQ(send_seq(pa, b_addr, 2), 0);
	NST_REQUIRE_EQ(send_seq(pc, b_addr, 3), 0);
	NST_EQ(poll(&pfd, 1, WAIT_MS), 1);
	fab_port_sleep_cancel(pb);
	NST_EQ(fab_port_wakeups(pb), 1);
	NST_EQ(poll(&pfd, 1, 0), 0);
	NST_REQUIRE_EQ(fab_recv(pb, &rx), 0);
	NST_EQ(fab_rx_done(pb, rx.idx), 0);
	NST_REQUIRE_EQ(fab_recv(pb, &rx), 0);
	NST_EQ(fab_rx_done(pb, rx.idx), 0);
	/* A frame not yet due lets it sleep, with a timer. */
	link_set(a_addr, b_addr, "latency 50000");
	NST_REQUIRE_EQ(send_seq(pa, b_addr, 4), 0);
	NST_EQ(fab_port_sleep_prepare(pb), -EAGAIN); /* it pulled something new */
	NST_EQ(fab_port_sleep_prepare(pb), 0);
	NST_TRUE(fab_next_due_ns(pb) > fab_now_ns());
	fab_port_sleep_cancel(pb);
}

/* Held notifications: a sleeping receiver hears of held frames at the
 * eighth or at the release, once, and gets every frame. */
static void test_held_kicks(void)
{
	struct pollfd pfd = {.fd = fab_port_fd(pb), .events = POLLIN};
	struct fab_rx rx;
	int got = 0;

	NST_EQ(fab_port_sleep_prepare(pb), 0);
	fab_port_hold_kicks(pa);
	for (uint32_t i = 0; i < 7; i++)
		NST_REQUIRE_EQ(send_seq(pa, b_addr, 100 + i), 0);
	NST_EQ(poll(&pfd, 1, 0), 0); /* seven sent, nobody told */
	NST_REQUIRE_EQ(send_seq(pa, b_addr, 107), 0);
	NST_EQ(poll(&pfd, 1, WAIT_MS), 1); /* the eighth tells */
	fab_port_sleep_cancel(pb);
	while (fab_recv(pb, &rx) == 0) {
		got++;
		NST_EQ(fab_rx_done(pb, rx.idx), 0);
	}
	NST_EQ(got, 8);
	/* Asleep again: one more held frame rings nothing ... */
	NST_EQ(fab_port_sleep_prepare(pb), 0);
	NST_REQUIRE_EQ(send_seq(pa, b_addr, 108), 0);
	NST_EQ(poll(&pfd, 1, 0), 0);
	fab_port_sleep_cancel(pb);
	/* ... but is not lost: the look before sleeping scans every ring. */
	NST_EQ(fab_port_sleep_prepare(pb), -EAGAIN);
	fab_port_release_kicks(pa);
	NST_REQUIRE_EQ(fab_recv(pb, &rx), 0);
	NST_EQ(fab_rx_done(pb, rx.idx), 0);
	NST_EQ(fab_recv(pb, &rx), -EAGAIN);
	/* Released: sends tell at once again. */
	NST_EQ(fab_port_sleep_prepare(pb), 0);
	NST_REQUIRE_EQ(send_seq(pa, b_addr, 109), 0);
	NST_EQ(poll(&pfd, 1, WAIT_MS), 1);
	fab_port_sleep_cancel(pb);
	NST_REQUIRE_EQ(fab_recv(pb, &rx), 0);
	NST_EQ(fab_rx_done(pb, rx.idx), 0);
}

/* ---- Configuration ---------------------------------------------------------------- */

/* fab_link_config_merge() takes the fields a mask names, and
 * fab_link_config_diff() names the fields that differ, the seed left out. */
static void test_link_config_merge_diff(void)
{
	struct fab_link_config base, f, c;

	fab_link_config_default(&base);
	fab_link_config_default(&f);
	f.loss_ppb = 1000;
	f.latency_ns = 5000;
	f.nth = 3;
	f.nth_opcode = 7;
	f.flags |= FAB_LINK_DOWN;
	f.seed = 42;
	c = base;
	fab_link_config_merge(&c, &f, FAB_LF_LOSS | FAB_LF_DOWN);
	NST_EQ(c.loss_ppb, 1000);
	NST_EQ(c.latency_ns, 0);
	NST_EQ(c.nth, 0);
	NST_TRUE(c.flags & FAB_LINK_DOWN);
	NST_EQ_U(fab_link_config_diff(&base, &c), FAB_LF_LOSS | FAB_LF_DOWN);
	fab_link_config_merge(&c, &f, FAB_LF_NTH | FAB_LF_SEED);
	NST_EQ(c.nth, 3);
	NST_EQ(c.nth_opcode, 7);
	NST_EQ_U(c.seed, 42);
	NST_TRUE(c.flags & FAB_LINK_SEEDED);
	NST_EQ_U(fab_link_config_diff(&base, &c), FAB_LF_LOSS | FAB_LF_DOWN | FAB_LF_NTH);
	NST_EQ_U(fab_link_config_diff(&c, &c), 0);
}

/*
 * A description parses back to the same rules: "delay 100 delay-pct 0"
 * delays no frame, and was once described as "delay 100", which delays
 * every frame (found by fuzz_link_text).
 */
static void test_link_describe_round_trip(void)
{
	static const char *const cases[][2] = {
	    {"delay 100 delay-pct 0", "delay 100 delay-pct 0"},
	    {"delay 100 delay-pct 50", "delay 100 delay-pct 50"},
	    {"delay 100", "delay 100"},
	    {"delay 100 delay-pct 100", "delay 100"},
	};
	struct fab_link_config cfg, back;
	const char *words[8];
	char err[256], text[256], copy[256];
	uint32_t fields;
	size_t n;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(copy, sizeof(copy), "%s", cases[i][0]);
		n = 0;
		for (char *w = strtok(copy, " "); w && n < 8; w = strtok(NULL, " "))
			words[n++] = w;
		NST_REQUIRE_EQ(fab_link_parse(words, n, &cfg, &fields, err, sizeof(err)), 0);
		fab_link_describe(&cfg, text, sizeof(text));
		NST_CHECK_(!strcmp(text, cases[i][1]), CU_FALSE, "'%s' described as '%s', not '%s'",
			   cases[i][0], text, cases[i][1]);
		snprintf(copy, sizeof(copy), "%s", text);
		n = 0;
		for (char *w = strtok(copy, " "); w && n < 8; w = strtok(NULL, " "))
			words[n++] = w;
		NST_REQUIRE_EQ(fab_link_parse(words, n, &back, &fields, err, sizeof(err)), 0);
		NST_CHECK_(back.delay_ns == cfg.delay_ns && back.delay_ppb == cfg.delay_ppb,
			   CU_FALSE,
			   "'%s': delay %llu ns for %u ppb, read back as %llu ns for %u ppb",
			   cases[i][0], (unsigned long long)cfg.delay_ns, cfg.delay_ppb,
			   (unsigned long long)back.delay_ns, back.delay_ppb);
	}
}

static void test_link_config(void)
{
	struct fab_link_config cfg, got;
	const char *words[8];
	char err[256], text[256];
	uint32_t fields;

	/* Defaults, and the derived seed differs per direction. */
	NST_REQUIRE_EQ(fab_link_get(fab, a_addr, b_addr, &cfg), 0);
	NST_EQ(cfg.latency_ns, 0);
	NST_EQ(cfg.flags & FAB_LINK_DOWN, 0);
	NST_REQUIRE_EQ(fab_link_get(fab, b_addr, a_addr, &got), 0);
	NST_NE(cfg.seed, got.seed);
	NST_EQ(fab_link_describe(&cfg, text, sizeof(text))[0], '\0');

	link_set(a_addr, b_addr, "latency 12.5 jitter 1 rate 10 loss 0.01 down");
	link_set(a_addr, b_addr, "drop-nth 3 opcode send-only qpn 17 seed 99");
	NST_REQUIRE_EQ(fab_link_get(fab, a_addr, b_addr, &cfg), 0);
	NST_EQ(cfg.latency_ns, 12500);
	NST_EQ(cfg.jitter_ns, 1000);
	NST_EQ(cfg.rate_mbps, 10000);
	NST_EQ(cfg.loss_ppb, 100000);
	NST_EQ(cfg.nth, 3);
	NST_EQ(cfg.nth_opcode, FAB_OP_SEND_ONLY);
	NST_EQ(cfg.nth_qpn, 17);
	NST_EQ(cfg.seed, 99);
	NST_TRUE(cfg.flags & FAB_LINK_DOWN);
	fab_link_describe(&cfg, text, sizeof(text));
	NST_CHECK_(!strcmp(text, "down latency 12.5 jitter 1 rate 10 loss 0.01 drop-nth 3 opcode "
				 "RC_SEND_ONLY qpn 17"),
		   CU_FALSE, "describe: '%s'", text);
	/* clear: everything back to the default but the seed. */
	link_set(a_addr, b_addr, "clear");
	NST_REQUIRE_EQ(fab_link_get(fab, a_addr, b_addr, &cfg), 0);
	NST_EQ(fab_link_describe(&cfg, text, sizeof(text))[0], '\0');
	NST_EQ(cfg.seed, 99);

	/* Errors name the word. */
	words[0] = "loss";
	words[1] = "150";
	NST_EQ(fab_link_parse(words, 2, &cfg, &fields, err, sizeof(err)), -EINVAL);
	NST_TRUE(strstr(err, "loss 150") != NULL);
	words[0] = "opcode";
	words[1] = "4";
	NST_EQ(fab_link_parse(words, 2, &cfg, &fields, err, sizeof(err)), -EINVAL);
	NST_TRUE(strstr(err, "drop-nth") != NULL);
	words[0] = "latency";
	NST_EQ(fab_link_parse(words, 1, &cfg, &fields, err, sizeof(err)), -EINVAL);
	NST_TRUE(strstr(err, "needs a value") != NULL);
	words[0] = "latency";
	words[1] = "1.0001";
	NST_EQ(fab_link_parse(words, 2, &cfg, &fields, err, sizeof(err)), -EINVAL);
	words[0] = "frobnicate";
	NST_EQ(fab_link_parse(words, 2, &cfg, &fields, err, sizeof(err)), -EINVAL);
	NST_TRUE(strstr(err, "unknown setting 'frobnicate'") != NULL);
	words[0] = "drop-nth";
	words[1] = "1";
	words[2] = "opcode";
	words[3] = "NOPE";
	NST_EQ(fab_link_parse(words, 4, &cfg, &fields, err, sizeof(err)), -EINVAL);
	words[0] = "up";
	words[1] = "down";
	NST_EQ(fab_link_parse(words, 2, &cfg, &fields, err, sizeof(err)), -EINVAL);

	/* Settings that would do nothing are refused, saying what to write. */
	words[0] = "drop-nth";
	words[1] = "0";
	NST_EQ(fab_link_parse(words, 2, &cfg, &fields, err, sizeof(err)), -EINVAL);
	NST_CHECK_(strstr(err, "'drop-nth off'") != NULL, CU_FALSE, "err: %s", err);
	words[1] = "off";
	NST_EQ(fab_link_parse(words, 2, &cfg, &fields, err, sizeof(err)), 0);
	NST_EQ(fields, FAB_LF_NTH);
	NST_EQ(cfg.nth, 0);
	words[2] = "qpn";
	words[3] = "5";
	NST_EQ(fab_link_parse(words, 4, &cfg, &fields, err, sizeof(err)), -EINVAL);
	words[0] = "delay-pct";
	words[1] = "50";
	NST_EQ(fab_link_parse(words, 2, &cfg, &fields, err, sizeof(err)), -EINVAL);
	NST_CHECK_(strstr(err, "delay 100 delay-pct 50") != NULL, CU_FALSE, "err: %s", err);
	words[2] = "delay";
	words[3] = "0";
	NST_EQ(fab_link_parse(words, 4, &cfg, &fields, err, sizeof(err)), -EINVAL);
	words[3] = "100";
	NST_EQ(fab_link_parse(words, 4, &cfg, &fields, err, sizeof(err)), 0);
	NST_EQ(cfg.delay_ppb, FAB_PPB_ONE / 2);
	words[0] = "reorder";
	words[1] = "10";
	words[2] = "reorder-gap";
	words[3] = "0";
	NST_EQ(fab_link_parse(words, 4, &cfg, &fields, err, sizeof(err)), -EINVAL);
	NST_CHECK_(strstr(err, "reorder-gap 0") != NULL, CU_FALSE, "err: %s", err);
	/* Too fine a value names the resolution; trailing zeros are fine. */
	words[0] = "latency";
	words[1] = "0.0001";
	NST_EQ(fab_link_parse(words, 2, &cfg, &fields, err, sizeof(err)), -EINVAL);
	NST_CHECK_(strstr(err, "finer than the resolution, which is 0.001") != NULL, CU_FALSE,
		   "err: %s", err);
	words[1] = "2.50000";
	NST_EQ(fab_link_parse(words, 2, &cfg, &fields, err, sizeof(err)), 0);
	NST_EQ(cfg.latency_ns, 2500);
	/* A bad opcode's error suggests the names the output uses. */
	words[0] = "drop-nth";
	words[1] = "1";
	words[2] = "opcode";
	words[3] = "NOPE";
	NST_EQ(fab_link_parse(words, 4, &cfg, &fields, err, sizeof(err)), -EINVAL);
	NST_CHECK_(strstr(err, "RC_SEND_ONLY") != NULL && strstr(err, " SEND_ONLY") == NULL,
		   CU_FALSE, "err: %s", err);

	/* Out of range through the API: refused, nothing changed. */
	fab_link_config_default(&cfg);
	cfg.loss_ppb = FAB_PPB_ONE + 1;
	NST_EQ(fab_link_set(fab, a_addr, b_addr, &cfg, FAB_LF_LOSS), -EINVAL);
	NST_EQ(fab_link_set(fab, a_addr, b_addr, &cfg, 1u << 30), -EINVAL);
	NST_EQ(fab_link_set(fab, a_addr, htonl(0xc6120063), &cfg, FAB_LF_LATENCY), -ENOENT);
	NST_REQUIRE_EQ(fab_link_get(fab, a_addr, b_addr, &got), 0);
	NST_EQ(got.loss_ppb, 0);
}

static void test_writer_died(void)
{
	struct fab_link_config cfg;
	uint8_t *base;
	struct fab_seg_hdr *h;
	struct fab_seg_link *l;
	char path[PATH_MAX];
	int fd;

	/* A writer that died holding the link's seqlock (pid 0x7ffffffe
	 * cannot exist): readers go on with their copy, the next writer takes
	 * over. */
	link_set(a_addr, b_addr, "latency 1");
	NST_REQUIRE_EQ(send_seq(pa, b_addr, 1), 0);
	snprintf(path, sizeof(path), "%s/" FAB_SEG_FILE, dir);
	fd = open(path, O_RDWR);
	NST_REQUIRE(fd >= 0);
	base = mmap(NULL, 1u << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	NST_REQUIRE(base != MAP_FAILED);
	h = (struct fab_seg_hdr *)base;
	l = (struct fab_seg_link *)(base + h->links_off) + 1 * h->max_ports + 2;
	__atomic_store_n(&l->cfg_seq, (uint64_t)0x7ffffffe << 32 | (l->cfg_seq + 1),
			 __ATOMIC_SEQ_CST);
	NST_REQUIRE_EQ(send_seq(pa, b_addr, 2), 0);
	NST_EQ(collect(pb, (struct got[4]){0}, 4), 2);
	link_set(a_addr, b_addr, "latency 3");
	NST_REQUIRE_EQ(fab_link_get(fab, a_addr, b_addr, &cfg), 0);
	NST_EQ(cfg.latency_ns, 3000);
	NST_EQ(__atomic_load_n(&l->cfg_seq, __ATOMIC_SEQ_CST) >> 32, 0);
	NST_EQ((uint32_t)__atomic_load_n(&l->cfg_seq, __ATOMIC_SEQ_CST) & 1, 0);
	munmap(base, 1u << 20);
}

/* ---- A hostile writer --------------------------------------------------------------- */

static uint64_t xs;

static uint64_t xrand(void)
{
	xs ^= xs << 13;
	xs ^= xs >> 7;
	xs ^= xs << 17;
	return xs;
}

/* Random values, biased towards the ones that hurt: near the limits. */
static uint32_t nasty32(void)
{
	static const uint32_t edges[] = {0,          1,          4095,       4096, 4097,
					 0x7fffffff, 0x80000000, 0xffffffff, 4352, 4353};

	return xrand() % 3 ? edges[xrand() % (sizeof(edges) / sizeof(edges[0]))]
			   : (uint32_t)xrand();
}

static void test_hostile_segment(void)
{
	struct fab_port_counters c;
	struct fab_seg_hdr *h;
	struct fab_seg_port *ports;
	struct fab_seg_link *links;
	struct fab_seg_frame *meta;
	uint32_t *rings, ab, round, i, k;
	char path[PATH_MAX];
	struct stat st;
	struct fab_rx rx;
	uint8_t *base;
	uint64_t bad;
	int fd;

	/* A second mapping of the segment, as another process would have. */
	snprintf(path, sizeof(path), "%s/" FAB_SEG_FILE, dir);
	fd = open(path, O_RDWR);
	NST_REQUIRE(fd >= 0);
	NST_REQUIRE_EQ(fstat(fd, &st), 0);
	base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	NST_REQUIRE(base != MAP_FAILED);
	h = (struct fab_seg_hdr *)base;
	ports = (struct fab_seg_port *)(base + h->ports_off);
	links = (struct fab_seg_link *)(base + h->links_off);
	rings = (uint32_t *)(base + h->rings_off);
	meta = (struct fab_seg_frame *)(base + h->meta_off);
	ab = 1 * h->max_ports + 2; /* link A (slot 1) -> B (slot 2) */
	xs = 0x9e3779b97f4a7c15ull;
	bad = 0;

	for (round = 0; round < 300; round++) {
		for (i = 0; i < 20; i++) {
			uint32_t idx, len;
			void *data;

			/* Scribbled frames stay out of the pool until B reopens. */
			if (fab_frame_get(pa, &idx, &data))
				break;
			len = make_frame(data, a_addr, b_addr, FAB_OP_SEND_ONLY, QPN, round, 64);
			if (fab_send(pa, idx, len, b_addr) == -ENOBUFS)
				break;
		}
		/* Scribble over what the receiver will read. */
		for (k = 0; k < 8; k++) {
			switch (xrand() % 9) {
			case 0: links[ab].prod = nasty32(); break;
			case 1: links[ab].cons = nasty32(); break;
			case 2:
				/* Near the producer: about to be consumed. */
				rings[(size_t)ab * h->ring_depth +
				      ((links[ab].prod - 1 - xrand() % 16) & (h->ring_depth - 1))] =
				    nasty32();
				break;
			case 3: meta[xrand() % h->nframes].len = nasty32(); break;
			case 4: meta[xrand() % h->nframes].holder = xrand(); break;
			case 5:
				meta[xrand() % h->nframes].due_ns =
				    xrand() % 2 ? xrand() : UINT64_MAX;
				break;
			case 6: meta[xrand() % h->nframes].ring_pos = nasty32(); break;
			case 7: ports[2].pending[xrand() % 4] = xrand(); break;
			default:
				/* A configuration change nobody made through the API. */
				links[ab].cfg[xrand() % FAB_LINK_CFG_WORDS] = xrand();
				links[ab].cfg_seq += 2;
				break;
			}
		}
		/* The receiver must neither crash nor read outside the pool. */
		for (i = 0; i < 40; i++) {
			if (fab_recv(pb, &rx) == 0) {
				NST_TRUE(rx.idx < h->nframes);
				NST_TRUE(rx.len >= 1 && rx.len <= FAB_SLOT_BYTES);
				NST_TRUE(rx.data == fab_frame_data(pb, rx.idx));
				/* Touch every byte: ASan and the MMU check the bounds. */
				bad += ((const volatile uint8_t *)rx.data)[rx.len - 1];
				fab_rx_done(pb, rx.idx);
			}
		}
		if (fab_port_sleep_prepare(pb) == 0)
			fab_port_sleep_cancel(pb);
		(void)fab_next_due_ns(pb);
	}
	c = port_counters(b_addr);
	bad = c.bad_ring + c.bad_index + c.bad_meta + c.stale + c.reclaimed;
	printf("\n    300 rounds of scribbling: bad_ring %llu bad_index %llu bad_meta %llu "
	       "stale %llu reclaimed %llu bad_config %llu",
	       (unsigned long long)c.bad_ring, (unsigned long long)c.bad_index,
	       (unsigned long long)c.bad_meta, (unsigned long long)c.stale,
	       (unsigned long long)c.reclaimed,
	       (unsigned long long)port_counters(a_addr).bad_config);
	NST_TRUE(c.bad_ring > 0);
	NST_TRUE(c.bad_index > 0);
	NST_TRUE(bad > 100);
	NST_TRUE(port_counters(a_addr).bad_config + c.bad_config > 0);
	munmap(base, (size_t)st.st_size);

	/* Reopening B takes back what the scribbling stranded there, and the
	 * fabric works again, on the scribbled link too. */
	fab_port_close(pb);
	NST_REQUIRE_EQ(fab_port_open(fab, b_addr, &pb), 0);
	printf(", %u of 4096 frames free after B reopened", frames_free());
	NST_TRUE(frames_free() > 3000);
	link_set(a_addr, b_addr, "clear");
	NST_REQUIRE_EQ(send_seq(pc, a_addr, 5), 0);
	NST_REQUIRE_EQ(send_seq(pa, b_addr, 6), 0);
	{
		struct got g[4];

		NST_EQ(collect(pa, g, 4), 1);
		NST_TRUE(g[0].intact);
		NST_EQ(collect(pb, g, 4), 1);
		NST_TRUE(g[0].intact);
	}
}

static void test_open_rejects_bad_segments(void)
{
	const struct fab_config cfg = {.max_ports = 4, .frames = 16, .seed = 1};
	char path[PATH_MAX + 16], d2[PATH_MAX];
	struct fab *f2;
	uint32_t v;
	int fd;

	snprintf(d2, sizeof(d2), "%s/bad%d", tmp, ++dir_no);
	NST_EQ(fab_open(d2, &f2), -ENOENT);
	NST_REQUIRE_EQ(mkdir(d2, 0700), 0);
	NST_EQ(fab_open(d2, &f2), -ENOENT);
	NST_REQUIRE_EQ(fab_create(d2, &cfg), 0);
	NST_REQUIRE_EQ(fab_open(d2, &f2), 0);
	fab_close(f2);
	snprintf(path, sizeof(path), "%s/" FAB_SEG_FILE, d2);
	fd = open(path, O_RDWR);
	NST_REQUIRE(fd >= 0);
	/* Sizes that do not add up to the file. */
	v = 1u << 19;
	NST_REQUIRE_EQ(pwrite(fd, &v, 4, offsetof(struct fab_seg_hdr, nframes)), 4);
	NST_EQ(fab_open(d2, &f2), -EPROTO);
	v = 16;
	NST_REQUIRE_EQ(pwrite(fd, &v, 4, offsetof(struct fab_seg_hdr, nframes)), 4);
	NST_REQUIRE_EQ(fab_open(d2, &f2), 0);
	fab_close(f2);
	/* An offset moved. */
	v = 8192;
	NST_REQUIRE_EQ(pwrite(fd, &v, 4, offsetof(struct fab_seg_hdr, meta_off)), 4);
	NST_EQ(fab_open(d2, &f2), -EPROTO);
	/* Not a fabric at all, and a truncated one. */
	v = 0;
	NST_REQUIRE_EQ(pwrite(fd, &v, 4, 0), 4);
	NST_EQ(fab_open(d2, &f2), -EPROTO);
	NST_REQUIRE_EQ(ftruncate(fd, 100), 0);
	NST_EQ(fab_open(d2, &f2), -EPROTO);
	close(fd);
	/* Removing: no live port, so it goes, bells and all. */
	NST_EQ(fab_destroy_files(d2), 0);
	NST_EQ(fab_destroy_files(d2), -ENOENT);
	NST_EQ(access(path, F_OK), -1);
}

static const struct nst_test tests[] = {
    {"send_recv_by_index", test_send_recv_by_index},
    {"errors", test_errors},
    {"order_two_sources", test_order_two_sources},
    {"delivery_in_due_order", test_delivery_in_due_order},
    {"latency", test_latency},
    {"rate_limit", test_rate_limit},
    {"loss_reproducible", test_loss_reproducible},
    {"duplicate", test_duplicate},
    {"reorder", test_reorder},
    {"corrupt", test_corrupt},
    {"corrupt_one_bit", test_corrupt_one_bit},
    {"delay", test_delay},
    {"drop_nth_filter", test_drop_nth_filter},
    {"link_down_up", test_link_down_up},
    {"tap", test_tap},
    {"unit_split_identical", test_unit_split_identical},
    {"unit_whole_and_dropped_in_flight", test_unit_whole_and_dropped_in_flight},
    {"unit_chain_broken", test_unit_chain_broken},
    {"pool_exhaustion", test_pool_exhaustion},
    {"pool_kept_for_acks", test_pool_kept_for_acks},
    {"ring_full", test_ring_full},
    {"reopen_reclaims", test_reopen_reclaims},
    {"close_frees", test_close_frees},
    {"bell", test_bell},
    {"held_kicks", test_held_kicks},
    {"link_config", test_link_config},
    {"link_describe_round_trip", test_link_describe_round_trip},
    {"link_config_merge_diff", test_link_config_merge_diff},
    {"writer_died", test_writer_died},
    {"hostile_segment", test_hostile_segment},
    {"open_rejects_bad_segments", test_open_rejects_bad_segments},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	const struct nst_suite suite = {
	    .name = "fabric",
	    .tests = tests,
	    .init = suite_init,
	    .clean = suite_clean,
	    .setup = setup,
	    .teardown = teardown,
	};

	return nst_run_suite(argc, argv, &suite);
}

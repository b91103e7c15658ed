/*
 * The switch's stream sockets (nicsim_switch.h) against real nicsimd
 * processes: byte-stream integrity on both RDMA paths and at the edges of
 * the thresholds, random interleavings of send and receive sizes in both
 * directions at once, half-close, abortive close, non-blocking calls with
 * poll(), the smallest receive pool, and the peer's process and this
 * side's NIC dying.  The NICs are the test_spi_* fixture (nstspidata.h):
 * A and B with every capability, C without RDMA read (registrations up to
 * 1 MiB), D to kill; every test leaves the TPT occupancy of A, B and C
 * where it found it.  "--sw-child ADDR PORT FD" runs the peer process of the
 * kill test instead.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fab_addr.h"
#include "nicsim_switch.h"
#include "nstest.h"
#include "nstsw.h"
#include "nstnic.h"
#include "nstspidata.h"

#define PAT 4099u /* the stream's pattern repeats every PAT bytes: no power of two */
#define SRC_LEN (BIG + PAT)

/* The byte at stream offset k of the stream with this seed. */
static uint8_t pat(uint64_t k, uint32_t seed)
{
	uint32_t j = (uint32_t)(k % PAT);

	return (uint8_t)(j * 131u + (j >> 7) * 29u + seed);
}

/* A source whose bytes from src + (off % PAT) are the stream's from off. */
static uint8_t *pattern_source(uint32_t seed)
{
	uint8_t *m = map(SRC_LEN);

	NST_REQUIRE(m != NULL);
	for (size_t i = 0; i < SRC_LEN; i++)
		m[i] = pat(i, seed);
	return m;
}

static struct sockaddr_in sin_of(const char *addr, uint16_t port)
{
	return addr_of(addr, port);
}

/* Wait for POLLIN on fd, up to ms: whether it came. */
static bool readable_within(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

struct opts {
	int rcvbuf;   /* 0: default */
	int path_srv; /* NSW_PATH preference of each side, 0: auto */
	int path_cli;
	int threshold; /* 0: default */
	int max_rdma;  /* 0: default */
};

static void apply(int s, const struct opts *o, int path)
{
	if (o->rcvbuf)
		nst_sw_set_int(s, SOL_SOCKET, SO_RCVBUF, o->rcvbuf);
	if (path)
		nst_sw_set_int(s, NSW_SOL, NSW_PATH, path);
	if (o->threshold)
		nst_sw_set_int(s, NSW_SOL, NSW_RDMA_THRESHOLD, o->threshold);
	if (o->max_rdma)
		nst_sw_set_int(s, NSW_SOL, NSW_MAX_RDMA, o->max_rdma);
}

/*
 * A connected pair: *srv accepted on NIC srv_addr, *cli connected from
 * cli_addr.  The connect is non-blocking and awaited with poll() on the
 * socket's descriptor, which tests that too.
 */
static void sw_pair(const char *srv_addr, const char *cli_addr, const struct opts *o, int *srv,
		    int *cli)
{
	uint16_t port = next_port++;
	struct sockaddr_in to = sin_of(srv_addr, port), from = sin_of(cli_addr, 0);
	int l = nsw_socket(AF_INET, SOCK_STREAM, 0);
	int c = nsw_socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

	NST_REQUIRE(l >= 0 && c >= 0);
	apply(l, o, o->path_srv);
	apply(c, o, o->path_cli);
	NST_REQUIRE_EQ(nsw_bind(l, (struct sockaddr *)&to, sizeof(to)), 0);
	NST_REQUIRE_EQ(nsw_listen(l, 4), 0);
	NST_REQUIRE_EQ(nsw_bind(c, (struct sockaddr *)&from, sizeof(from)), 0);
	NST_REQUIRE_EQ(nsw_connect(c, (struct sockaddr *)&to, sizeof(to)), -1);
	NST_REQUIRE_EQ(errno, EINPROGRESS);
	*srv = nsw_accept(l, NULL, NULL);
	NST_REQUIRE(*srv >= 0);
	NST_REQUIRE(readable_within(c, WAIT_MS));
	NST_REQUIRE_EQ(nst_sw_get_int(c, SOL_SOCKET, SO_ERROR), 0);
	nst_sw_set_int(c, NSW_SOL, NSW_NONBLOCK, 0);
	*cli = c;
	NST_EQ(nsw_close(l), 0);
}

/* Send len bytes of the stream from offset *off; false on an error. */
static bool send_stream(int s, const uint8_t *src, uint64_t *off, size_t len)
{
	ssize_t n = nsw_send(s, src + *off % PAT, len, 0);

	NST_CHECK_(n == (ssize_t)len, CU_FALSE, "send of %zu at %llu: %zd (%s)", len,
		   (unsigned long long)*off, n, strerror(errno));
	if (n > 0)
		*off += (uint64_t)n;
	return n == (ssize_t)len;
}

/*
 * Receive len bytes of the stream at *off into buf, in reads of at most
 * chunk bytes (0: len at once), checking each byte; false on an error or a
 * wrong byte (reported with its offset).
 */
static bool recv_stream(int s, uint8_t *buf, uint64_t *off, size_t len, size_t chunk, uint32_t seed)
{
	size_t got = 0;

	while (got < len) {
		size_t want = chunk && chunk < len - got ? chunk : len - got;
		ssize_t n = nsw_recv(s, buf, want, 0);

		if (n <= 0) {
			NST_CHECK_(false, CU_FALSE, "recv at stream offset %llu: %zd (%s)",
				   (unsigned long long)*off, n,
				   n ? strerror(errno) : "end-of-file");
			return false;
		}
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] != pat(*off + (uint64_t)i, seed)) {
				NST_CHECK_(false, CU_FALSE,
					   "byte at stream offset %llu is 0x%02x, not 0x%02x",
					   (unsigned long long)(*off + (uint64_t)i), buf[i],
					   pat(*off + (uint64_t)i, seed));
				return false;
			}
		*off += (uint64_t)n;
		got += (size_t)n;
	}
	return true;
}

static struct nsw_stats stats_of(int s)
{
	struct nsw_stats st;
	socklen_t l = sizeof(st);

	memset(&st, 0, sizeof(st));
	NST_EQ(nsw_getsockopt(s, NSW_SOL, NSW_STATS, &st, &l), 0);
	return st;
}

/* ---- Paths and thresholds -------------------------------------------------------- */

struct sender {
	int s;
	const uint8_t *src;
	uint64_t *off;
	size_t len;
	int times; /* sends of len, one after the other (0: one) */
	bool ok;
};

static void *sender_main(void *arg)
{
	struct sender *sd = arg;
	int i = 0;

	do
		sd->ok = send_stream(sd->s, sd->src, sd->off, sd->len);
	while (sd->ok && ++i < sd->times);
	return NULL;
}

/* n bytes of the stream from a to b, sent by a thread (a large send
 * returns once the peer has the bytes) and received here. */
static bool xfer(int a, int b, const uint8_t *src, uint64_t *so, uint64_t *ro, uint8_t *buf,
		 size_t n, uint32_t seed)
{
	struct sender sd = {.s = a, .src = src, .off = so, .len = n};
	pthread_t t;
	bool ok;

	pthread_create(&t, NULL, sender_main, &sd);
	ok = recv_stream(b, buf, ro, n, 0, seed);
	pthread_join(t, NULL);
	return ok && sd.ok;
}

/* Each size from cli to srv and back, checked, with the paths expected. */
static void echo_sizes(const char *srv_addr, const char *cli_addr, const struct opts *o,
		       int path_to_srv, int path_to_cli)
{
	uint8_t *src = pattern_source(7), *buf = map(BIG);
	uint64_t so = 0, ro = 0, bso = 0, bro = 0;
	const size_t t = o->threshold ? (size_t)o->threshold : 65536;
	const size_t m = o->max_rdma ? (size_t)o->max_rdma : 1u << 20;
	const size_t sizes_[] = {1, 2047,  2048,      2049,  4063, 4064,  4065,      t - 1,
				 t, t + 1, 2 * t + 3, m - 1, m,    m + 1, 3 * m + 5, BIG};
	int srv, cli;

	NST_REQUIRE(buf != NULL);
	sw_pair(srv_addr, cli_addr, o, &srv, &cli);
	for (size_t i = 0; i < sizeof(sizes_) / sizeof(sizes_[0]); i++) {
		size_t n = sizes_[i];

		if (!xfer(cli, srv, src, &so, &ro, buf, n, 7) ||
		    !xfer(srv, cli, src, &bso, &bro, buf, n, 7))
			break;
		/* Both HELLOs are in once a byte went each way. */
		if (i == 0) {
			NST_EQ(nst_sw_get_int(cli, NSW_SOL, NSW_PATH),
			       path_to_srv | path_to_cli << 4);
			NST_EQ(nst_sw_get_int(srv, NSW_SOL, NSW_PATH),
			       path_to_cli | path_to_srv << 4);
		}
	}
	{
		struct nsw_stats sc = stats_of(cli), ss = stats_of(srv);

		NST_GT(sc.large_sends, 0);
		NST_GT(ss.large_sends, 0);
		NST_EQ_U(sc.bytes_received, bro);
		NST_EQ_U(ss.bytes_received, ro);
		/* Every byte sent counts, the RDMA part of a large send too. */
		NST_EQ_U(sc.bytes_sent, so);
		NST_EQ_U(ss.bytes_sent, bso);
	}
	NST_EQ(nsw_close(cli), 0);
	NST_EQ(nsw_close(srv), 0);
	munmap(src, SRC_LEN);
	munmap(buf, BIG);
}

static void test_read_path_both_ways(void)
{
	struct opts o = {.max_rdma = 256 << 10};

	echo_sizes(ADDR_A, ADDR_B, &o, NSW_PATH_READ, NSW_PATH_READ);
}

/* A side that will not read gets the write path into it; the other
 * direction may still run the read path. */
static void test_write_path_by_choice(void)
{
	struct opts both = {
	    .path_srv = NSW_PATH_WRITE, .path_cli = NSW_PATH_WRITE, .threshold = 4096};
	struct opts one = {.path_srv = NSW_PATH_WRITE};

	echo_sizes(ADDR_A, ADDR_B, &both, NSW_PATH_WRITE, NSW_PATH_WRITE);
	echo_sizes(ADDR_A, ADDR_B, &one, NSW_PATH_WRITE, NSW_PATH_READ);
}

/* C serves no RDMA READ, and issues none: the write path both ways. */
static void test_write_path_with_nic_without_read(void)
{
	struct opts o = {0};

	echo_sizes(ADDR_A, ADDR_C, &o, NSW_PATH_WRITE, NSW_PATH_WRITE);
}

/* ---- Random interleavings, both directions at once --------------------------------- */

struct flow {
	int s;
	uint32_t seed;
	uint64_t total;
	uint64_t rng;
	const uint8_t *src;
	uint8_t *buf;
	bool ok;
};

/* A send size: mostly small, some large, up to 4 MiB. */
static size_t rand_size(uint64_t *rng)
{
	uint64_t r = nst_splitmix64(rng);

	switch (r % 10) {
	case 0:
	case 1:
	case 2:
	case 3:
	case 4: return 1 + (size_t)(r >> 8) % 4096;
	case 5:
	case 6:
	case 7: return 4096 + (size_t)(r >> 8) % (256u << 10);
	default: return 1 + (size_t)(r >> 8) % (4u << 20);
	}
}

static void *send_main(void *arg)
{
	struct flow *f = arg;
	uint64_t off = 0;
	bool big = false;

	f->ok = true;
	while (off < f->total && f->ok) {
		size_t n = rand_size(&f->rng);

		/* One send of 64 MiB in the middle of it. */
		if (!big && off > f->total / 2) {
			n = BIG;
			big = true;
		}
		if (n > f->total - off)
			n = (size_t)(f->total - off);
		f->ok = send_stream(f->s, f->src, &off, n);
	}
	return NULL;
}

static void *recv_main(void *arg)
{
	struct flow *f = arg;
	uint64_t off = 0;

	f->ok = true;
	while (off < f->total && f->ok) {
		size_t n = rand_size(&f->rng);

		if (n > f->total - off)
			n = (size_t)(f->total - off);
		f->ok = recv_stream(f->s, f->buf, &off, n, rand_size(&f->rng), f->seed);
	}
	return NULL;
}

static void both_ways(int a, int b, uint64_t total)
{
	uint8_t *sa = pattern_source(11), *sb = pattern_source(12);
	struct flow f[4] = {
	    {.s = a, .seed = 11, .total = total, .rng = 1, .src = sa},
	    {.s = b, .seed = 11, .total = total, .rng = 2, .buf = map(4u << 20)},
	    {.s = b, .seed = 12, .total = total, .rng = 3, .src = sb},
	    {.s = a, .seed = 12, .total = total, .rng = 4, .buf = map(4u << 20)},
	};
	pthread_t t[4];

	NST_REQUIRE(f[1].buf != NULL && f[3].buf != NULL);
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, i % 2 ? recv_main : send_main, &f[i]);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 4; i++)
		NST_TRUE(f[i].ok);
	munmap(sa, SRC_LEN);
	munmap(sb, SRC_LEN);
	munmap(f[1].buf, 4u << 20);
	munmap(f[3].buf, 4u << 20);
}

static void test_random_interleavings_both_ways(void)
{
	struct opts o = {0};
	int srv, cli;

	sw_pair(ADDR_A, ADDR_B, &o, &srv, &cli);
	both_ways(srv, cli, 160u << 20);
	NST_EQ(nsw_close(cli), 0);
	NST_EQ(nsw_close(srv), 0);
	/* The same on mixed paths, into a NIC without RDMA read. */
	sw_pair(ADDR_C, ADDR_A, &o, &srv, &cli);
	both_ways(srv, cli, 96u << 20);
	NST_EQ(nsw_close(cli), 0);
	NST_EQ(nsw_close(srv), 0);
}

/* Back-to-back large sends into a reader that waits with room for each:
 * every chunk goes straight into its buffer, and the next transfer's
 * SRC_AVAIL may come before the reader has counted the last chunk. */
static void test_large_sends_into_waiting_reader(void)
{
	struct opts paths[2] = {{0}, {.path_srv = NSW_PATH_WRITE, .path_cli = NSW_PATH_WRITE}};
	uint8_t *src = pattern_source(9), *buf = map(1u << 20);

	NST_REQUIRE(buf != NULL);
	for (int k = 0; k < 2; k++) {
		struct sender sd;
		uint64_t so = 0, ro = 0;
		pthread_t t;
		int srv, cli;

		sw_pair(ADDR_A, ADDR_B, &paths[k], &srv, &cli);
		sd =
		    (struct sender){.s = cli, .src = src, .off = &so, .len = 1u << 20, .times = 48};
		pthread_create(&t, NULL, sender_main, &sd);
		for (int i = 0; i < 48; i++)
			if (!recv_stream(srv, buf, &ro, 1u << 20, 0, 9))
				break;
		pthread_join(t, NULL);
		NST_TRUE(sd.ok);
		NST_EQ_U(ro, 48u << 20);
		NST_GT(stats_of(cli).large_sends, 40);
		NST_EQ(nsw_close(cli), 0);
		NST_EQ(nsw_close(srv), 0);
	}
	munmap(src, SRC_LEN);
	munmap(buf, 1u << 20);
}

/* Fault rules both ways between A and B, in parts per billion (0: none). */
static void faults_ab(uint32_t loss, uint32_t dup, uint32_t reorder, uint32_t corrupt)
{
	uint32_t a, b;

	NST_REQUIRE_EQ(fab_addr_parse(ADDR_A, &a), 0);
	NST_REQUIRE_EQ(fab_addr_parse(ADDR_B, &b), 0);
	NST_EQ(nst_link_faults(dir, a, b, loss, dup, reorder, corrupt, false), 0);
}

/* Both ways at once over a link that loses 5% of frames, duplicates 1%,
 * reorders 1% and corrupts 0.1%: the transport repairs it, and the stream
 * arrives whole on both paths. */
static void test_under_link_faults(void)
{
	struct opts rd = {0}, wr = {.path_srv = NSW_PATH_WRITE, .path_cli = NSW_PATH_WRITE};
	int srv, cli;

	faults_ab(50000000, 10000000, 10000000, 1000000);
	sw_pair(ADDR_A, ADDR_B, &rd, &srv, &cli);
	both_ways(srv, cli, 24u << 20);
	NST_EQ(nsw_close(cli), 0);
	NST_EQ(nsw_close(srv), 0);
	sw_pair(ADDR_A, ADDR_B, &wr, &srv, &cli);
	both_ways(srv, cli, 24u << 20);
	NST_EQ(nsw_close(cli), 0);
	NST_EQ(nsw_close(srv), 0);
	faults_ab(0, 0, 0, 0);
}

/* 64 connections at once (a process has 32 on a NIC: A to B and C to D,
 * on both paths), each moving small and large sends both ways, the sends
 * of all of them in flight before any is read. */
static void test_sixty_four_connections(void)
{
	struct opts o = {0};
	uint8_t *src = pattern_source(13), *buf = map(1u << 20);
	int srv[64], cli[64];
	uint64_t so[64] = {0}, ro[64] = {0}, bso[64] = {0}, bro[64] = {0};
	const size_t sizes_[] = {100, 200000, 3000, 700000};

	NST_REQUIRE(buf != NULL);
	for (int i = 0; i < 64; i++)
		sw_pair(i < 32 ? ADDR_A : ADDR_C, i < 32 ? ADDR_B : ADDR_D, &o, &srv[i], &cli[i]);
	for (size_t k = 0; k < sizeof(sizes_) / sizeof(sizes_[0]); k++) {
		/* Sends up to the staging buffer's size return at once. */
		for (int i = 0; i < 64; i++) {
			send_stream(cli[i], src, &so[i], sizes_[k]);
			send_stream(srv[i], src, &bso[i], sizes_[k]);
		}
		for (int i = 0; i < 64; i++) {
			NST_TRUE(recv_stream(srv[i], buf, &ro[i], sizes_[k], 0, 13));
			NST_TRUE(recv_stream(cli[i], buf, &bro[i], sizes_[k], 0, 13));
		}
	}
	for (int i = 0; i < 64; i++) {
		NST_EQ_U(ro[i], so[i]);
		NST_EQ_U(bro[i], bso[i]);
		NST_EQ(nsw_close(cli[i]), 0);
		NST_EQ(nsw_close(srv[i]), 0);
	}
	munmap(src, SRC_LEN);
	munmap(buf, 1u << 20);
}

/* The smallest receive pool on both sides, both sending large data at
 * once: the credit rule must keep both moving. */
static void test_smallest_pool_no_deadlock(void)
{
	struct opts o = {.rcvbuf = 1, .threshold = 2048};
	int srv, cli;

	sw_pair(ADDR_A, ADDR_B, &o, &srv, &cli);
	NST_EQ(nst_sw_get_int(srv, SOL_SOCKET, SO_RCVBUF), 2048);
	both_ways(srv, cli, 80u << 20);
	NST_EQ(nsw_close(cli), 0);
	NST_EQ(nsw_close(srv), 0);
}

/* ---- Endings ---------------------------------------------------------------------- */

static void test_shutdown_delivers_all_then_eof(void)
{
	struct opts o = {0};
	uint8_t *src = pattern_source(3), *buf = map(BIG);
	uint64_t so = 0, ro = 0, bso = 0, bro = 0;
	int srv, cli;
	char c;

	NST_REQUIRE(buf != NULL);
	sw_pair(ADDR_A, ADDR_B, &o, &srv, &cli);
	/* Small and large data, then the half-close at once behind them. */
	send_stream(cli, src, &so, 1000);
	NST_TRUE(xfer(cli, srv, src, &so, &ro, buf, 3u << 20, 3));
	send_stream(cli, src, &so, 10);
	send_stream(cli, src, &so, 20000);
	NST_EQ(nsw_shutdown(cli, SHUT_WR), 0);
	NST_EQ(nsw_send(cli, src, 1, 0), -1);
	NST_EQ(errno, EPIPE);
	NST_TRUE(recv_stream(srv, buf, &ro, so - ro, 4096, 3));
	NST_EQ(nsw_recv(srv, &c, 1, 0), 0);
	NST_EQ(nsw_recv(srv, &c, 1, 0), 0);
	/* The other direction still works after the half-close. */
	NST_TRUE(xfer(srv, cli, src, &bso, &bro, buf, 5u << 20, 3));
	NST_EQ(nsw_close(srv), 0);
	/* The peer's close after its data: end-of-file, not an error. */
	NST_EQ(nsw_recv(cli, &c, 1, 0), 0);
	NST_EQ(nsw_close(cli), 0);
	munmap(src, SRC_LEN);
	munmap(buf, BIG);
}

struct last_words {
	int s;
	const uint8_t *src;
	uint64_t *off;
	bool ok;
};

/* Small, large and small again, then the half-close at once. */
static void *last_words_main(void *arg)
{
	struct last_words *w = arg;
	const size_t parts[] = {10, 100000, 700, 3000};

	w->ok = true;
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]) && w->ok; i++)
		w->ok = send_stream(w->s, w->src, w->off, parts[i]);
	w->ok = w->ok && nsw_shutdown(w->s, SHUT_WR) == 0;
	return NULL;
}

/*
 * A reader that asks for the whole stream with MSG_WAITALL while the last
 * bytes and the SHUTDOWN behind them arrive: it gets every byte, then
 * end-of-file; the SHUTDOWN taken in the same pass as the last bytes never
 * cuts the read short.  Many rounds, each on its own connection, on both
 * paths, for the timings to vary.
 */
static void test_waitall_read_across_the_end(void)
{
	struct opts paths[2] = {{0}, {.path_srv = NSW_PATH_WRITE, .path_cli = NSW_PATH_WRITE}};
	const size_t total = 10 + 100000 + 700 + 3000;
	uint8_t *src = pattern_source(11), *buf = map(1u << 20);

	NST_REQUIRE(buf != NULL);
	for (int round = 0; round < 40; round++) {
		struct last_words w;
		uint64_t so = 0;
		pthread_t t;
		ssize_t n;
		int srv, cli;
		char c;

		sw_pair(ADDR_A, ADDR_B, &paths[round % 2], &srv, &cli);
		w = (struct last_words){.s = cli, .src = src, .off = &so};
		pthread_create(&t, NULL, last_words_main, &w);
		n = nsw_recv(srv, buf, total, MSG_WAITALL);
		pthread_join(t, NULL);
		NST_TRUE(w.ok);
		NST_CHECK_(n == (ssize_t)total, CU_FALSE,
			   "round %d (%s path): MSG_WAITALL read of %zu: %zd (%s)", round,
			   round % 2 ? "write" : "read", total, n,
			   n < 0 ? strerror(errno) : "short");
		if (n == (ssize_t)total)
			for (size_t i = 0; i < total; i++)
				if (buf[i] != pat(i, 11)) {
					NST_CHECK_(false, CU_FALSE, "round %d: byte %zu is wrong",
						   round, i);
					break;
				}
		NST_EQ(nsw_recv(srv, &c, 1, 0), 0);
		NST_EQ(nsw_close(srv), 0);
		NST_EQ(nsw_close(cli), 0);
		if (n != (ssize_t)total)
			break;
	}
	munmap(src, SRC_LEN);
	munmap(buf, 1u << 20);
}

/* A goodbye, as nicsim-stream says it: one side sends its last bytes and
 * shuts down, then reads until end-of-file; the other reads them and
 * closes at once, maybe before the first side's SHUTDOWN arrived.  The
 * first side must see end-of-file, never a reset. */
static void test_close_right_after_last_read_is_eof(void)
{
	struct opts o = {0};
	uint8_t *src = pattern_source(10), buf[128];
	char c;

	for (int i = 0; i < 20; i++) {
		uint64_t so = 0, ro = 0;
		int srv, cli;

		sw_pair(ADDR_A, ADDR_B, &o, &srv, &cli);
		send_stream(cli, src, &so, 80);
		NST_EQ(nsw_shutdown(cli, SHUT_WR), 0);
		NST_TRUE(recv_stream(srv, buf, &ro, 80, 0, 10));
		NST_EQ(nsw_close(srv), 0);
		NST_EQ(nsw_recv(cli, &c, 1, 0), 0);
		NST_EQ(nsw_close(cli), 0);
	}
	munmap(src, SRC_LEN);
}

static void test_close_with_unread_data_resets_peer(void)
{
	struct opts o = {0};
	uint8_t *src = pattern_source(4);
	uint64_t so = 0;
	int srv, cli;
	char c;
	uint64_t t0;

	sw_pair(ADDR_A, ADDR_B, &o, &srv, &cli);
	send_stream(cli, src, &so, 1000);
	send_stream(cli, src, &so, 200000); /* a large one the peer has not read */
	/* The peer has data it will not read when it closes. */
	NST_TRUE(readable_within(srv, WAIT_MS));
	NST_EQ(nsw_close(srv), 0);
	t0 = nst_now_ns();
	NST_EQ(nsw_recv(cli, &c, 1, 0), -1);
	NST_EQ(errno, ECONNRESET);
	NST_LT(nst_now_ns() - t0, 1000000000ull);
	NST_EQ(nsw_send(cli, src, 10, 0), -1);
	NST_EQ(errno, ECONNRESET);
	NST_EQ(nsw_close(cli), 0);
	munmap(src, SRC_LEN);
}

/* Resets the connection from the peer's side (s) unless told first (on
 * fd) that the call it guards returned within WAIT_MS: a send the test
 * expects to end by itself cannot then hang the test. */
struct guard {
	int fd[2];
	int s;
	bool closed; /* the guard closed s */
	pthread_t t;
};

static void *guard_main(void *arg)
{
	struct guard *g = arg;
	struct pollfd p = {.fd = g->fd[0], .events = POLLIN};

	/* Closing with data unread resets the connection. */
	if (poll(&p, 1, WAIT_MS) == 0)
		g->closed = nsw_close(g->s) == 0;
	return NULL;
}

static void guard_start(struct guard *g, int s)
{
	g->s = s;
	g->closed = false;
	NST_REQUIRE_EQ(pipe(g->fd), 0);
	NST_REQUIRE_EQ(pthread_create(&g->t, NULL, guard_main, g), 0);
}

static void guard_end(struct guard *g)
{
	NST_EQ(write(g->fd[1], "x", 1), 1);
	pthread_join(g->t, NULL);
	close(g->fd[0]);
	close(g->fd[1]);
}

/*
 * SO_SNDTIMEO bounds a send larger than the staging buffers too: with a
 * peer that does not read, a 5 MiB send returns what it took (or EAGAIN)
 * once the time is up, and the peer then reads exactly that.
 */
static void test_send_timeout_bounds_large_send(void)
{
	struct opts o = {0};
	uint8_t *src = pattern_source(8), *buf = map(BIG);
	struct timeval tv = {.tv_usec = 300000};
	uint64_t ro = 0, t0, took;
	struct guard g;
	int srv, cli;
	ssize_t n;

	NST_REQUIRE(buf != NULL);
	sw_pair(ADDR_A, ADDR_B, &o, &srv, &cli);
	NST_EQ(nsw_setsockopt(cli, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)), 0);
	guard_start(&g, srv);
	t0 = nst_now_ns();
	n = nsw_send(cli, src, 5u << 20, 0);
	took = nst_now_ns() - t0;
	guard_end(&g);
	NST_CHECK_(n > 0 && n < (ssize_t)(5u << 20), CU_FALSE,
		   "a 5 MiB send to a peer that does not read, SO_SNDTIMEO 300 ms: %zd (%s)", n,
		   n < 0 ? strerror(errno) : "bytes");
	NST_CHECK_(took >= 250000000ull && took < (uint64_t)WAIT_MS * 1000000ull, CU_FALSE,
		   "the send returned after %llu ms", (unsigned long long)(took / 1000000));
	NST_TRUE(!g.closed);
	if (n > 0 && !g.closed)
		NST_TRUE(recv_stream(srv, buf, &ro, (size_t)n, 0, 8));
	NST_EQ(nsw_close(cli), 0);
	if (!g.closed)
		NST_EQ(nsw_close(srv), 0);
	munmap(src, SRC_LEN);
	munmap(buf, BIG);
}

/* The peer of test_large_send_failing_part_way: reads 10 bytes, then
 * closes with the rest unread. */
static void *read_ten_then_close(void *arg)
{
	int s = *(int *)arg;
	char b[10];

	if (nsw_recv(s, b, sizeof(b), MSG_WAITALL) != (ssize_t)sizeof(b))
		return (void *)1;
	nsw_close(s);
	return NULL;
}

/*
 * A blocking send straight from the application's buffer that fails
 * part-way returns the bytes the peer took, as TCP's does, and the next
 * call the error.
 */
static void test_large_send_failing_part_way(void)
{
	struct opts o = {0};
	uint8_t *src = pattern_source(9);
	int srv, cli;
	pthread_t t;
	void *rc = NULL;
	ssize_t n;

	sw_pair(ADDR_A, ADDR_B, &o, &srv, &cli);
	NST_REQUIRE_EQ(pthread_create(&t, NULL, read_ten_then_close, &srv), 0);
	n = nsw_send(cli, src, 5u << 20, 0);
	NST_CHECK_(n >= 10 && n < (ssize_t)(5u << 20), CU_FALSE,
		   "a 5 MiB send the peer read 10 bytes of, then reset: %zd (%s)", n,
		   n < 0 ? strerror(errno) : "bytes");
	NST_EQ(nsw_send(cli, src, 10, 0), -1);
	NST_EQ(errno, ECONNRESET);
	pthread_join(t, &rc);
	NST_TRUE(rc == NULL);
	NST_EQ(nsw_close(cli), 0);
	munmap(src, SRC_LEN);
}

/* ---- Non-blocking calls and poll() ------------------------------------------------ */

static void test_nonblocking_with_poll(void)
{
	struct opts o = {0};
	uint8_t *src = pattern_source(5), *buf = map(BIG);
	uint64_t so = 0, ro = 0;
	int srv, cli;
	ssize_t n;
	char c;

	NST_REQUIRE(buf != NULL);
	sw_pair(ADDR_A, ADDR_B, &o, &srv, &cli);
	nst_sw_set_int(srv, NSW_SOL, NSW_NONBLOCK, 1);
	NST_EQ(nst_sw_get_int(srv, NSW_SOL, NSW_NONBLOCK), 1);
	NST_EQ(nsw_recv(srv, &c, 1, 0), -1);
	NST_EQ(errno, EAGAIN);
	NST_EQ(nsw_recv(cli, &c, 1, MSG_DONTWAIT), -1);
	NST_EQ(errno, EAGAIN);
	NST_TRUE(!readable_within(srv, 0));
	send_stream(cli, src, &so, 100);
	NST_TRUE(readable_within(srv, WAIT_MS));
	NST_TRUE(recv_stream(srv, buf, &ro, 100, 0, 5));
	/* Ready stays a hint until a call finds nothing. */
	NST_EQ(nsw_recv(srv, &c, 1, 0), -1);
	NST_EQ(errno, EAGAIN);
	NST_TRUE(!readable_within(srv, 0));
	/* A large non-blocking send takes what its staging holds and
	 * returns; the next waits for the transfer (EAGAIN, then POLLIN). */
	nst_sw_set_int(cli, NSW_SOL, NSW_NONBLOCK, 1);
	n = nsw_send(cli, src + so % PAT, 8u << 20, 0);
	NST_TRUE(n > 0 && n < (ssize_t)(8u << 20));
	if (n > 0)
		so += (uint64_t)n;
	for (int i = 0; i < 1000 && so < (8u << 20); i++) {
		n = nsw_send(cli, src + so % PAT, (8u << 20) - so, 0);
		if (n > 0) {
			so += (uint64_t)n;
			continue;
		}
		NST_EQ(errno, EAGAIN);
		if (errno != EAGAIN)
			break;
		/* The reader drains, then the sender may go on. */
		while (ro < so) {
			if (!readable_within(srv, WAIT_MS))
				break;
			n = nsw_recv(srv, buf, BIG, 0);
			if (n < 0 && errno == EAGAIN)
				continue; /* POLLIN is a hint: wait again */
			if (n <= 0)
				break;
			for (ssize_t k = 0; k < n; k++)
				if (buf[k] != pat(ro + (uint64_t)k, 5)) {
					NST_CHECK_(false, CU_FALSE, "wrong byte at %llu",
						   (unsigned long long)(ro + (uint64_t)k));
					break;
				}
			ro += (uint64_t)n;
		}
		NST_TRUE(readable_within(cli, WAIT_MS));
	}
	NST_EQ_U(so, 8u << 20);
	NST_EQ(nsw_close(cli), 0);
	NST_EQ(nsw_close(srv), 0);
	munmap(src, SRC_LEN);
	munmap(buf, BIG);
}

/*
 * A half-closed non-blocking socket: once a recv has returned end-of-file,
 * the end is no longer news, so a send that got EAGAIN leaves the
 * descriptor quiet until there is room (it used to stay ready and make a
 * poll loop spin).
 */
static void test_eof_told_then_wait_for_room(void)
{
	struct opts o = {0};
	uint8_t *src = pattern_source(6), *buf = map(BIG);
	uint64_t so = 0, ro = 0;
	struct timeval tv = {.tv_sec = WAIT_MS / 1000};
	int srv, cli;
	ssize_t n = 0;
	char c;

	NST_REQUIRE(buf != NULL);
	sw_pair(ADDR_A, ADDR_B, &o, &srv, &cli);
	NST_EQ(nsw_shutdown(srv, SHUT_WR), 0);
	nst_sw_set_int(cli, NSW_SOL, NSW_NONBLOCK, 1);
	/* The end, told (the descriptor is a hint: wait again on EAGAIN). */
	for (int i = 0; i < 100 && (n = nsw_recv(cli, &c, 1, 0)) < 0 && errno == EAGAIN; i++)
		readable_within(cli, WAIT_MS);
	NST_EQ(n, 0);
	/* Send until there is no room: the server does not read yet. */
	for (int i = 0; i < 100000; i++) {
		n = nsw_send(cli, src + so % PAT, 1u << 20, 0);
		if (n <= 0)
			break;
		so += (uint64_t)n;
	}
	NST_EQ(n, -1);
	NST_EQ(errno, EAGAIN);
	NST_TRUE(so > 0);
	NST_CHECK_(!readable_within(cli, 0), CU_FALSE,
		   "after EAGAIN on a send the descriptor is ready again at once, with nothing "
		   "new: the end-of-file already told");
	/* The server reads everything; then the client may send again. */
	while (ro < so) {
		if (!readable_within(srv, WAIT_MS)) {
			NST_CHECK_(false, CU_FALSE, "nothing to read at %llu of %llu",
				   (unsigned long long)ro, (unsigned long long)so);
			break;
		}
		nst_sw_set_int(srv, NSW_SOL, NSW_NONBLOCK, 1);
		n = nsw_recv(srv, buf, BIG, 0);
		if (n < 0 && errno == EAGAIN)
			continue;
		if (n <= 0)
			break;
		for (ssize_t k = 0; k < n; k++)
			if (buf[k] != pat(ro + (uint64_t)k, 6)) {
				NST_CHECK_(false, CU_FALSE, "wrong byte at %llu",
					   (unsigned long long)(ro + (uint64_t)k));
				break;
			}
		ro += (uint64_t)n;
	}
	NST_EQ_U(ro, so);
	NST_TRUE(readable_within(cli, WAIT_MS));
	n = nsw_send(cli, src + so % PAT, 100, 0);
	NST_EQ(n, 100);
	nst_sw_set_int(srv, NSW_SOL, NSW_NONBLOCK, 0);
	NST_EQ(nsw_setsockopt(srv, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	NST_TRUE(recv_stream(srv, buf, &ro, 100, 0, 6));
	NST_EQ(nsw_close(cli), 0);
	NST_EQ(nsw_close(srv), 0);
	munmap(src, SRC_LEN);
	munmap(buf, BIG);
}

/* ---- The peer's process and this side's NIC dying ---------------------------------- */

/* The peer process: listen, say so on ready_fd, accept one connection and
 * read until it ends. */
static int sw_child(const char *addr, uint16_t port, int ready_fd)
{
	struct sockaddr_in a = sin_of(addr, port);
	int l = nsw_socket(AF_INET, SOCK_STREAM, 0), s;
	static char buf[1 << 20];

	if (l < 0 || nsw_bind(l, (struct sockaddr *)&a, sizeof(a)) || nsw_listen(l, 1))
		return 2;
	if (write(ready_fd, "r", 1) != 1)
		return 4;
	close(ready_fd);
	s = nsw_accept(l, NULL, NULL);
	if (s < 0)
		return 3;
	while (nsw_recv(s, buf, sizeof(buf), 0) > 0)
		;
	return 0;
}

static void test_peer_killed_gives_econnreset(void)
{
	uint16_t port = next_port++;
	struct sockaddr_in to = sin_of(ADDR_B, port), from = sin_of(ADDR_A, 0);
	uint8_t *src = pattern_source(6);
	uint64_t so = 0, t0;
	char p[16], fdn[16], r = 0;
	pid_t pid, parent = getpid();
	int s, ready[2];
	ssize_t n = 0;

	NST_REQUIRE_EQ(pipe(ready), 0);
	snprintf(p, sizeof(p), "%u", port);
	snprintf(fdn, sizeof(fdn), "%d", ready[1]);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		close(ready[0]);
		execl(self_exe, self_exe, "--sw-child", ADDR_B, p, fdn, (char *)NULL);
		_exit(127);
	}
	close(ready[1]);
	NST_REQUIRE(pid > 0);
	/* The child says when it listens (or dies, closing the pipe). */
	NST_REQUIRE(readable_within(ready[0], WAIT_MS * 3));
	NST_REQUIRE_EQ(read(ready[0], &r, 1), 1);
	close(ready[0]);
	s = nsw_socket(AF_INET, SOCK_STREAM, 0);
	NST_REQUIRE(s >= 0);
	NST_REQUIRE_EQ(nsw_bind(s, (struct sockaddr *)&from, sizeof(from)), 0);
	NST_REQUIRE_EQ(nsw_connect(s, (struct sockaddr *)&to, sizeof(to)), 0);
	for (int i = 0; i < 20; i++)
		send_stream(s, src, &so, 1u << 20);
	t0 = nst_now_ns();
	NST_EQ(kill(pid, SIGKILL), 0);
	for (int i = 0; i < 100000; i++) {
		n = nsw_send(s, src + so % PAT, 64u << 10, 0);
		if (n < 0)
			break;
		so += (uint64_t)n;
	}
	NST_EQ(n, -1);
	NST_EQ(errno, ECONNRESET);
	printf("\n    peer killed: ECONNRESET after %.1f ms ", (double)(nst_now_ns() - t0) / 1e6);
	NST_LT(nst_now_ns() - t0, 1000000000ull);
	NST_EQ(nsw_close(s), 0);
	nst_wait(pid, WAIT_MS);
	munmap(src, SRC_LEN);
}

static void test_nic_killed_gives_enetdown(void)
{
	struct opts o = {0};
	uint8_t *src = pattern_source(8);
	uint64_t so = 0, t0;
	int srv, cli;
	char c;

	NST_REQUIRE(nic_d > 0);
	sw_pair(ADDR_B, ADDR_D, &o, &srv, &cli);
	send_stream(cli, src, &so, 100000);
	t0 = nst_now_ns();
	NST_EQ(kill(nic_d, SIGKILL), 0);
	NST_EQ(nsw_recv(cli, &c, 1, 0), -1);
	NST_EQ(errno, ENETDOWN);
	printf("\n    NIC killed: ENETDOWN after %.1f ms ", (double)(nst_now_ns() - t0) / 1e6);
	NST_EQ(nsw_send(cli, src, 10, 0), -1);
	NST_EQ(errno, ENETDOWN);
	NST_EQ(nsw_close(cli), 0);
	NST_EQ(nsw_close(srv), 0);
	nst_wait(nic_d, WAIT_MS);
	nic_d = -1;
	munmap(src, SRC_LEN);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"read_path_both_ways", test_read_path_both_ways},
	    {"write_path_by_choice", test_write_path_by_choice},
	    {"write_path_with_nic_without_read", test_write_path_with_nic_without_read},
	    {"random_interleavings_both_ways", test_random_interleavings_both_ways},
	    {"large_sends_into_waiting_reader", test_large_sends_into_waiting_reader},
	    {"sixty_four_connections", test_sixty_four_connections},
	    {"under_link_faults", test_under_link_faults},
	    {"smallest_pool_no_deadlock", test_smallest_pool_no_deadlock},
	    {"shutdown_delivers_all_then_eof", test_shutdown_delivers_all_then_eof},
	    {"waitall_read_across_the_end", test_waitall_read_across_the_end},
	    {"close_right_after_last_read_is_eof", test_close_right_after_last_read_is_eof},
	    {"close_with_unread_data_resets_peer", test_close_with_unread_data_resets_peer},
	    {"nonblocking_with_poll", test_nonblocking_with_poll},
	    {"eof_told_then_wait_for_room", test_eof_told_then_wait_for_room},
	    {"send_timeout_bounds_large_send", test_send_timeout_bounds_large_send},
	    {"large_send_failing_part_way", test_large_send_failing_part_way},
	    {"peer_killed_gives_econnreset", test_peer_killed_gives_econnreset},
	    {"nic_killed_gives_enetdown", test_nic_killed_gives_enetdown},
	    {NULL, NULL},
	};

	if (argc == 5 && !strcmp(argv[1], "--sw-child"))
		return sw_child(argv[2], (uint16_t)atoi(argv[3]), atoi(argv[4]));
	return spi_main(argc, argv, "stream", tests);
}

/*
 * Soak: a GiB each of RDMA WRITE, RDMA READ and SEND through the SPI
 * (ws2san.h), and a GiB on each path of the switch's stream sockets
 * (nicsim_switch.h), between two nicsimd processes on one fabric whose link
 * loses 5% of the frames both ways, duplicates 1%, reorders 1% and
 * corrupts 0.1% (docs/fabric.md).  Every byte that arrives is compared
 * with the deterministic pattern it was sent as.  For each kind the test
 * prints bytes, seconds and MB/s, the fabric's counts of dropped,
 * duplicated, reordered and corrupted frames, and the NICs' go-back-N
 * restarts, timeouts and refused frames, and checks that every fault rule
 * struck and that the transport repaired what they did.
 *
 * Not part of the default run: ctest label and configuration soak
 * (`ctest -C soak -L soak -V`, or scripts/test --soak).  NICSIM_SOAK_MIB
 * sets the MiB moved per kind (default 1024).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "fab.h"
#include "fab_addr.h"
#include "nicsim_mgmt.h"
#include "nicsim_switch.h"
#include "nstest.h"
#include "nstsw.h"
#include "nstnic.h"
#include "nstspi.h"
#include "nstspidata.h"

/* The link rules, in parts per billion. */
#define LOSS_PPB 50000000u    /* 5% */
#define DUP_PPB 10000000u     /* 1% */
#define REORDER_PPB 10000000u /* 1% */
#define CORRUPT_PPB 1000000u  /* 0.1% */

#define CHUNK (16u << 20)               /* one SPI operation */
#define CHUNK_REGION (CHUNK + 2 * PAGE) /* room for the odd offsets */
#define STREAM_MAX_SEND (4u << 20)
#define STREAM_WAIT_MS 60000 /* SO_RCVTIMEO of the stream's receiver */

static uint64_t total; /* bytes per kind */
static uint32_t addr_a, addr_b;
static struct fab *fab;
static int base_a = -1, base_b = -1;

/* ---- Counters ---------------------------------------------------------------------- */

struct snap {
	uint64_t ns;
	struct fab_link_stats ab, ba;
	struct nic_stats a, b;
};

static void take_snap(struct snap *s)
{
	memset(s, 0, sizeof(*s));
	NST_EQ(fab_link_stats(fab, addr_a, addr_b, &s->ab), 0);
	NST_EQ(fab_link_stats(fab, addr_b, addr_a, &s->ba), 0);
	NST_EQ(nst_nic_stats(sock_a, &s->a), 0);
	NST_EQ(nst_nic_stats(sock_b, &s->b), 0);
	s->ns = nst_now_ns();
}

#define D_TX(x, y, f) ((y)->f - (x)->f)

/* What NIC name's transport did between x and y. */
static void print_nic(const char *name, const struct nic_stats *x, const struct nic_stats *y)
{
	printf("      NIC %s: go-back-N restarts %llu, timeouts %llu, NAKs sent %llu, frames "
	       "refused %llu, QP errors %llu\n",
	       name, (unsigned long long)D_TX(x, y, retransmits),
	       (unsigned long long)D_TX(x, y, timeouts), (unsigned long long)D_TX(x, y, naks_sent),
	       (unsigned long long)D_TX(x, y, rx_bad_frames),
	       (unsigned long long)D_TX(x, y, qp_errors));
}

/*
 * What one kind did between s0 and s1: its figures on stdout, and the
 * checks that the faults happened (every rule struck, frames were refused
 * for their ICRC, requesters went back) and that the data path carried
 * at least the bytes moved.
 */
static void report(const char *kind, uint64_t bytes, const struct snap *s0, const struct snap *s1)
{
	double sec = (double)(s1->ns - s0->ns) / 1e9;
	uint64_t frames = D_TX(&s0->ab, &s1->ab, tx.frames) + D_TX(&s0->ba, &s1->ba, tx.frames);
	uint64_t lost =
	    D_TX(&s0->ab, &s1->ab, tx.dropped_loss) + D_TX(&s0->ba, &s1->ba, tx.dropped_loss);
	uint64_t dup =
	    D_TX(&s0->ab, &s1->ab, tx.duplicated) + D_TX(&s0->ba, &s1->ba, tx.duplicated);
	uint64_t reord =
	    D_TX(&s0->ab, &s1->ab, tx.reordered) + D_TX(&s0->ba, &s1->ba, tx.reordered);
	uint64_t corr = D_TX(&s0->ab, &s1->ab, tx.corrupted) + D_TX(&s0->ba, &s1->ba, tx.corrupted);
	uint64_t payload = D_TX(&s0->ab, &s1->ab, tx.bytes) + D_TX(&s0->ba, &s1->ba, tx.bytes);
	uint64_t restarts = D_TX(&s0->a, &s1->a, retransmits) + D_TX(&s0->b, &s1->b, retransmits);
	uint64_t bad = D_TX(&s0->a, &s1->a, rx_bad_frames) + D_TX(&s0->b, &s1->b, rx_bad_frames);

	printf("\n    %-20s %llu B in %.1f s: %.1f MB/s\n", kind, (unsigned long long)bytes, sec,
	       (double)bytes / sec / 1e6);
	printf("      frames  A->B %llu, B->A %llu; dropped %llu, duplicated %llu, reordered %llu, "
	       "corrupted %llu\n",
	       (unsigned long long)D_TX(&s0->ab, &s1->ab, tx.frames),
	       (unsigned long long)D_TX(&s0->ba, &s1->ba, tx.frames), (unsigned long long)lost,
	       (unsigned long long)dup, (unsigned long long)reord, (unsigned long long)corr);
	print_nic("A", &s0->a, &s1->a);
	print_nic("B", &s0->b, &s1->b);
	fflush(stdout);
	NST_GE(payload, bytes);
	NST_GT(lost, 0);
	NST_GT(dup, 0);
	NST_GT(reord, 0);
	NST_GT(corr, 0);
	NST_GT(bad, 0);
	NST_GT(restarts, 0);
	/* Each rule decides on every frame: what it struck is its share of the
	 * frames, within wide bounds (a 1 GiB kind has over 250,000 frames). */
	if (frames >= 100000) {
		NST_GT(lost, frames / 40);
		NST_LT(lost, frames / 10);
		NST_GT(corr, frames / 4000);
	}
	NST_EQ(D_TX(&s0->a, &s1->a, qp_errors) + D_TX(&s0->b, &s1->b, qp_errors), 0);
}

/* ---- Checking ---------------------------------------------------------------------- */

/* Whether got holds what want does; if not, says where they first differ. */
static bool same(const char *kind, uint64_t at, const uint8_t *got, const uint8_t *want, size_t n)
{
	size_t i = 0;

	if (memcmp(got, want, n) == 0)
		return true;
	while (got[i] == want[i])
		i++;
	NST_CHECK_(false, CU_FALSE, "%s: byte %llu of %llu is 0x%02x, not 0x%02x", kind,
		   (unsigned long long)(at + i), (unsigned long long)total, got[i], want[i]);
	return false;
}

/* The size of the chunk starting at off. */
static uint32_t chunk_at(uint64_t off)
{
	return total - off < CHUNK ? (uint32_t)(total - off) : CHUNK;
}

/* A fresh pattern for every chunk of every kind, so that a chunk left over
 * from before never passes for the new one. */
static uint32_t seed_of(uint32_t kind, uint64_t off)
{
	return kind * 100003u + (uint32_t)(off / CHUNK) + 1;
}

/* Odd offsets that move with every chunk. */
static uint32_t offset_a(uint64_t off)
{
	return (uint32_t)((off / CHUNK) * 1237u % (2 * PAGE)) | 1u;
}

static uint32_t offset_b(uint64_t off)
{
	return (uint32_t)((off / CHUNK) * 733u % (2 * PAGE));
}

/* ---- Through the SPI --------------------------------------------------------------- */

struct host {
	SOCKET s;
	uint8_t *src, *dst; /* CHUNK_REGION bytes each */
	HANDLE hsrc, hdst;
};

static void host_open(struct host *h, SOCKET s)
{
	h->s = s;
	h->src = map(CHUNK_REGION);
	h->dst = map(CHUNK_REGION);
	NST_REQUIRE(h->src != NULL && h->dst != NULL);
	h->hsrc = reg(s, h->src, CHUNK_REGION, MEM_READ);
	h->hdst = reg(s, h->dst, CHUNK_REGION, MEM_READWRITE);
	NST_REQUIRE(h->hsrc != NULL && h->hdst != NULL);
}

static void host_close(struct host *h)
{
	dereg(h->s, h->hsrc);
	dereg(h->s, h->hdst);
	close_socket(h->s);
	munmap(h->src, CHUNK_REGION);
	munmap(h->dst, CHUNK_REGION);
}

enum spi_kind { K_WRITE = 1, K_READ = 2, K_SEND = 3 };

/*
 * total bytes of one kind from A to B (READ: from B's memory into A's), a
 * chunk at a time, each chunk compared with its pattern as it arrives.
 */
static void spi_soak(enum spi_kind kind, const char *name)
{
	struct host a, b;
	struct nicsim_rdma_desc d;
	struct snap s0, s1;
	SOCKET sa, sb;
	uint64_t off, moved = 0;

	NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_A, &sb, &sa), 0);
	host_open(&a, sa);
	host_open(&b, sb);
	if (kind == K_WRITE)
		NST_REQUIRE_EQ(expose(b.s, b.dst, CHUNK_REGION, MEM_WRITE, &d), 0);
	if (kind == K_READ)
		NST_REQUIRE_EQ(expose(b.s, b.src, CHUNK_REGION, MEM_READ, &d), 0);
	take_snap(&s0);
	for (off = 0; off < total; off += CHUNK) {
		uint32_t n = chunk_at(off), oa = offset_a(off), ob = offset_b(off);
		uint32_t seed = seed_of(kind, off);
		WSAOVERLAPPED ova, ovb;
		DWORD got = 0, got_b = 0;
		const uint8_t *want, *arrived;

		switch (kind) {
		case K_WRITE:
			nst_fill(a.src + oa, n, seed);
			NST_REQUIRE_EQ(post_rdma(a.s, true, a.src + oa, n, a.hsrc, &d, ob, &ova),
				       WSA_IO_PENDING);
			NST_REQUIRE_EQ(ov_wait(a.s, &ova, &got), 0);
			want = a.src + oa;
			arrived = b.dst + ob;
			break;
		case K_READ:
			nst_fill(b.src + ob, n, seed);
			NST_REQUIRE_EQ(post_rdma(a.s, false, a.dst + oa, n, a.hdst, &d, ob, &ova),
				       WSA_IO_PENDING);
			NST_REQUIRE_EQ(ov_wait(a.s, &ova, &got), 0);
			want = b.src + ob;
			arrived = a.dst + oa;
			break;
		default:
			nst_fill(a.src + oa, n, seed);
			NST_REQUIRE_EQ(post_recv(b.s, b.dst + ob, n, &ovb), WSA_IO_PENDING);
			NST_REQUIRE_EQ(post_send(a.s, a.src + oa, n, &ova), WSA_IO_PENDING);
			NST_REQUIRE_EQ(ov_wait(a.s, &ova, &got), 0);
			NST_REQUIRE_EQ(ov_wait(b.s, &ovb, &got_b), 0);
			NST_REQUIRE_EQ(got_b, n);
			want = a.src + oa;
			arrived = b.dst + ob;
			break;
		}
		NST_REQUIRE_EQ(got, n);
		if (!same(name, off, arrived, want, n))
			break;
		moved += n;
	}
	take_snap(&s1);
	NST_EQ_U(moved, total);
	report(name, moved, &s0, &s1);
	if (kind != K_SEND)
		unexpose(b.s, &d);
	host_close(&a);
	host_close(&b);
}

static void test_rdma_write(void)
{
	spi_soak(K_WRITE, "RDMA WRITE");
}

static void test_rdma_read(void)
{
	spi_soak(K_READ, "RDMA READ");
}

static void test_send(void)
{
	spi_soak(K_SEND, "SEND");
}

/* ---- Through the switch's streams ---------------------------------------------------- */

/* The byte at stream offset k is byte k % 8 of a hash of k / 8 and the
 * seed: no period, so a piece of the stream in the wrong place shows. */
static void stream_bytes(uint8_t *buf, uint64_t off, size_t n, uint32_t seed)
{
	while (n) {
		uint64_t st = (off / 8) * 0x9e3779b97f4a7c15ull ^ seed;
		uint64_t x = nst_splitmix64(&st);
		size_t at = (size_t)(off % 8), take = 8 - at < n ? 8 - at : n;

		memcpy(buf, (const uint8_t *)&x + at, take);
		buf += take;
		off += take;
		n -= take;
	}
}

/* A send or receive size: mostly small (inside control messages), some
 * medium, some large (by RDMA, split at NSW_MAX_RDMA). */
static size_t stream_size(uint64_t *rng)
{
	uint64_t r = nst_splitmix64(rng);

	switch (r % 8) {
	case 0:
	case 1:
	case 2: return 1 + (size_t)(r >> 8) % 4096;
	case 3:
	case 4: return 4096 + (size_t)(r >> 8) % (256u << 10);
	default: return 1 + (size_t)(r >> 8) % STREAM_MAX_SEND;
	}
}

struct stream_sender {
	int s;
	uint32_t seed;
	uint8_t *buf;
	uint64_t sent;
	int err;
};

static void *stream_send_main(void *arg)
{
	struct stream_sender *sd = arg;
	uint64_t rng = sd->seed;

	while (sd->sent < total) {
		size_t n = stream_size(&rng);
		ssize_t k;

		if (n > total - sd->sent)
			n = (size_t)(total - sd->sent);
		stream_bytes(sd->buf, sd->sent, n, sd->seed);
		k = nsw_send(sd->s, sd->buf, n, 0);
		if (k != (ssize_t)n) {
			sd->err = k < 0 ? errno : EIO;
			break;
		}
		sd->sent += n;
	}
	return NULL;
}

static void set_timeout(int s, int opt, int ms)
{
	struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};

	NST_EQ(nsw_setsockopt(s, SOL_SOCKET, opt, &tv, sizeof(tv)), 0);
}

/*
 * A connected pair of stream sockets: *srv accepted on B, *cli connected
 * from A, both with path preference path.  The connect is non-blocking and
 * the accept bounded by SO_RCVTIMEO.
 */
static void stream_pair(int path, int *srv, int *cli)
{
	uint16_t port = next_port++;
	struct sockaddr_in to = addr_of(ADDR_B, port), from = addr_of(ADDR_A, 0);
	int l = nsw_socket(AF_INET, SOCK_STREAM, 0);
	int c = nsw_socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct pollfd p = {.fd = c, .events = POLLIN};

	NST_REQUIRE(l >= 0 && c >= 0);
	if (path) {
		nst_sw_set_int(l, NSW_SOL, NSW_PATH, path);
		nst_sw_set_int(c, NSW_SOL, NSW_PATH, path);
	}
	set_timeout(l, SO_RCVTIMEO, WAIT_MS);
	NST_REQUIRE_EQ(nsw_bind(l, (struct sockaddr *)&to, sizeof(to)), 0);
	NST_REQUIRE_EQ(nsw_listen(l, 4), 0);
	NST_REQUIRE_EQ(nsw_bind(c, (struct sockaddr *)&from, sizeof(from)), 0);
	NST_REQUIRE_EQ(nsw_connect(c, (struct sockaddr *)&to, sizeof(to)), -1);
	NST_REQUIRE_EQ(errno, EINPROGRESS);
	*srv = nsw_accept(l, NULL, NULL);
	NST_CHECK_(*srv >= 0, CU_TRUE, "accept: %s", strerror(errno));
	NST_REQUIRE(poll(&p, 1, WAIT_MS) == 1 && (p.revents & POLLIN));
	NST_REQUIRE_EQ(nst_sw_get_int(c, SOL_SOCKET, SO_ERROR), 0);
	nst_sw_set_int(c, NSW_SOL, NSW_NONBLOCK, 0);
	*cli = c;
	NST_EQ(nsw_close(l), 0);
}

/*
 * total bytes of one stream from A to B, sent by a thread in sends of
 * random sizes and received here in reads of random sizes, each read
 * compared with the stream's pattern at its offset.
 */
static void stream_soak(int path, const char *name, uint32_t seed)
{
	struct stream_sender sd = {.seed = seed};
	uint8_t *rbuf = map(STREAM_MAX_SEND), *want = map(STREAM_MAX_SEND);
	uint64_t rng = seed ^ 0x5a5a5a5aull, got = 0;
	struct nsw_stats st_cli, st_srv;
	socklen_t l = sizeof(struct nsw_stats);
	struct snap s0, s1;
	pthread_t t;
	int srv, cli;
	bool ok = true;

	sd.buf = map(STREAM_MAX_SEND);
	NST_REQUIRE(rbuf != NULL && want != NULL && sd.buf != NULL);
	stream_pair(path, &srv, &cli);
	set_timeout(srv, SO_RCVTIMEO, STREAM_WAIT_MS);
	sd.s = cli;
	take_snap(&s0);
	NST_REQUIRE_EQ(pthread_create(&t, NULL, stream_send_main, &sd), 0);
	while (got < total && ok) {
		size_t n = stream_size(&rng);
		ssize_t k;

		if (n > total - got)
			n = (size_t)(total - got);
		k = nsw_recv(srv, rbuf, n, 0);
		if (k <= 0) {
			NST_CHECK_(false, CU_FALSE, "%s: receive at byte %llu: %s", name,
				   (unsigned long long)got, k ? strerror(errno) : "end-of-file");
			ok = false;
			break;
		}
		stream_bytes(want, got, (size_t)k, seed);
		ok = same(name, got, rbuf, want, (size_t)k);
		got += (uint64_t)k;
	}
	take_snap(&s1);
	if (!ok) {
		/* Closing ends the sender's call, whatever it waits for. */
		nsw_close(cli);
		cli = -1;
	}
	pthread_join(t, NULL);
	NST_EQ(sd.err, 0);
	NST_EQ_U(sd.sent, total);
	NST_EQ_U(got, total);
	if (ok) {
		memset(&st_cli, 0, sizeof(st_cli));
		memset(&st_srv, 0, sizeof(st_srv));
		NST_EQ(nsw_getsockopt(cli, NSW_SOL, NSW_STATS, &st_cli, &l), 0);
		NST_EQ(nsw_getsockopt(srv, NSW_SOL, NSW_STATS, &st_srv, &l), 0);
		NST_EQ_U(st_cli.bytes_sent, total);
		NST_EQ_U(st_srv.bytes_received, total);
		NST_GT(st_cli.large_sends, 0);
		/* The data went the path asked for (the sending direction's bits). */
		NST_EQ(nst_sw_get_int(cli, NSW_SOL, NSW_PATH) & 0xf,
		       path == NSW_PATH_WRITE ? NSW_PATH_WRITE : NSW_PATH_READ);
		report(name, got, &s0, &s1);
		printf(
		    "      switch: %llu large sends, %llu RDMA operations by the sender, %llu by "
		    "the receiver, %llu control messages\n",
		    (unsigned long long)st_cli.large_sends, (unsigned long long)st_cli.rdma_ops,
		    (unsigned long long)st_srv.rdma_ops,
		    (unsigned long long)(st_cli.msgs_sent + st_srv.msgs_sent));
		NST_EQ(nsw_close(cli), 0);
	}
	NST_EQ(nsw_close(srv), 0);
	munmap(rbuf, STREAM_MAX_SEND);
	munmap(want, STREAM_MAX_SEND);
	munmap(sd.buf, STREAM_MAX_SEND);
}

static void test_stream_read_path(void)
{
	stream_soak(NSW_PATH_READ, "stream, read path", 41);
}

static void test_stream_write_path(void)
{
	stream_soak(NSW_PATH_WRITE, "stream, write path", 42);
}

/* ---- Suite ------------------------------------------------------------------------- */

static int init(void)
{
	const char *const addrs[] = {ADDR_A, ADDR_B, NULL};
	const char *mib = getenv("NICSIM_SOAK_MIB");
	struct fab_info fi;
	char *end;

	total = 1024ull << 20;
	if (mib && *mib) {
		unsigned long long v = strtoull(mib, &end, 10);

		if (*end || v == 0 || v > (1ull << 20)) {
			fprintf(stderr,
				"NICSIM_SOAK_MIB=%s: give a whole number of MiB, 1 or more\n", mib);
			return -1;
		}
		total = v << 20;
	}
	if (fab_addr_parse(ADDR_A, &addr_a) || fab_addr_parse(ADDR_B, &addr_b))
		return -1;
	if (nst_tmpdir(dir, sizeof(dir), "soak") < 0)
		return -1;
	snprintf(sock_a, sizeof(sock_a), "%s/nic-" ADDR_A ".sock", dir);
	snprintf(sock_b, sizeof(sock_b), "%s/nic-" ADDR_B ".sock", dir);
	if (nst_make_fabric(dir, addrs) < 0 || nst_nics_start(dir, spi_nics, 2, WAIT_MS) < 0)
		return -1;
	if (fab_open(dir, &fab) < 0 || fab_info(fab, &fi) < 0)
		return -1;
	if (nst_link_faults(dir, addr_a, addr_b, LOSS_PPB, DUP_PPB, REORDER_PPB, CORRUPT_PPB,
			    false) < 0)
		return -1;
	setenv("NICSIM_DIR", dir, 1);
	printf("\n%llu MiB per kind between " ADDR_A " and " ADDR_B
	       ", both ways: loss 5 dup 1 reorder 1 corrupt 0.1 (fabric seed %llu)\n",
	       (unsigned long long)(total >> 20), (unsigned long long)fi.seed);
	return nst_spi_startup() == 0 ? 0 : -1;
}

static int clean(void)
{
	int err = 0, ok = WSPCleanup(&err) == 0;
	int sa = nst_stop(nic_a, WAIT_MS), sb = nst_stop(nic_b, WAIT_MS);

	if (fab)
		fab_close(fab);
	if (!ok || !WIFEXITED(sa) || WEXITSTATUS(sa) || !WIFEXITED(sb) || WEXITSTATUS(sb)) {
		fprintf(stderr, "clean-up failed (cleanup %d, NICs 0x%x 0x%x); logs in %s\n", ok,
			sa, sb, dir);
		return -1;
	}
	nst_done_with_dir(dir);
	return 0;
}

static void setup(void)
{
	int rc;

	NST_SPI_KNOWN_STATE(rc, dir, spi_nics, 2, NULL, WAIT_MS);
	NST_EQ(rc, 0);
	base_a = nst_tpt_in_use(sock_a);
	base_b = nst_tpt_in_use(sock_b);
}

/* Everything a kind registered is gone again. */
static void teardown(void)
{
	NST_TRUE(base_a >= 0 && base_b >= 0);
	NST_EQ(nst_wait_tpt_in_use(sock_a, base_a, WAIT_MS), base_a);
	NST_EQ(nst_wait_tpt_in_use(sock_b, base_b, WAIT_MS), base_b);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"rdma_write", test_rdma_write},
	    {"rdma_read", test_rdma_read},
	    {"send", test_send},
	    {"stream_read_path", test_stream_read_path},
	    {"stream_write_path", test_stream_write_path},
	    {NULL, NULL},
	};
	const struct nst_suite suite = {.name = "soak",
					.tests = tests,
					.init = init,
					.clean = clean,
					.setup = setup,
					.teardown = teardown};

	return nst_run_suite(argc, argv, &suite);
}

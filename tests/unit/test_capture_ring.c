/*
 * Unit tests of the capture tap (fabric/include/fab_capture.h) with real
 * ports on a real segment: every frame a port sends or drops, with its
 * marks, reaches the capture whole and in order; by default a port whose
 * ring is full waits for a capture in another process to make room, so
 * every frame is captured, and waits for a stalled capture (stopped) for
 * FAB_TAP_STALL_NS only, then counts what it leaves out; in lossy mode a
 * full ring costs the sender nothing but a count and never blocks it;
 * filters are applied by the ports, before a frame takes room; one capture
 * at a time, and a capture that dies releases the tap at once; snap
 * lengths; hostile ring contents and filters never make the capture read
 * outside the ring or crash a port.  (The pcapng writer is the tool's:
 * test_pcapng.c.)
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
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
#define QPN 0x11u

static char tmp[256], dir[512];
static int dir_no;
static uint32_t a_addr, b_addr;
static struct fab *fab, *cap_fab; /* the ports' mapping, the capture's own */
static struct fab_port *pa, *pb;
static uint32_t send_qpn = QPN; /* the destination QP of the SENDs A makes */

/* ---- Helpers -------------------------------------------------------------------- */

/* A SEND Only from A to B with PSN psn and n payload bytes; its length. */
static uint32_t make_send(void *frame, uint32_t psn, uint32_t n)
{
	static uint8_t payload[FAB_MTU];
	struct fab_pkt p;
	size_t len;

	nst_fill(payload, n, psn);
	NST_REQUIRE_EQ(fab_pkt_init(&p, FAB_OP_SEND_ONLY), 0);
	p.src_ip = a_addr;
	p.dst_ip = b_addr;
	p.dest_qpn = send_qpn;
	p.psn = psn;
	p.payload = payload;
	p.payload_len = n;
	NST_REQUIRE_EQ(fab_pkt_encode(&p, frame, FAB_SLOT_BYTES, &len), 0);
	return (uint32_t)len;
}

/* Send a SEND Only from A; 0 or fab_send's error.  *len gets its length. */
static int send_one(uint32_t psn, uint32_t n, uint32_t *len)
{
	uint32_t idx, l;
	void *data;

	NST_REQUIRE_EQ(fab_frame_get(pa, &idx, &data), 0);
	l = make_send(data, psn, n);
	if (len)
		*len = l;
	return fab_send(pa, idx, l, b_addr);
}

/* Receive and release everything B has, waiting up to ms for want frames. */
static unsigned drain_b(unsigned want, int ms)
{
	uint64_t deadline = nst_now_ns() + (uint64_t)ms * 1000000u;
	struct fab_rx rx;
	unsigned n = 0;

	do {
		while (fab_recv(pb, &rx) == 0) {
			fab_rx_done(pb, rx.idx);
			n++;
		}
	} while (n < want && nst_now_ns() < deadline);
	return n;
}

static void set_link(const struct fab_link_config *cfg)
{
	NST_REQUIRE_EQ(fab_link_set(fab, a_addr, b_addr, cfg, FAB_LF_ALL & ~FAB_LF_SEED), 0);
}

/* What a test kept of the records it read. */
#define MAX_KEPT 20000u
struct kept {
	size_t n;
	struct fab_cap_rec r[MAX_KEPT];
	uint8_t *bytes[MAX_KEPT];
};

static struct kept *kept;

static int keep(void *arg, const struct fab_cap_rec *r)
{
	struct kept *k = arg;

	if (k->n == MAX_KEPT)
		return 1;
	k->r[k->n] = *r;
	k->bytes[k->n] = malloc(r->caplen ? r->caplen : 1);
	NST_REQUIRE(k->bytes[k->n] != NULL);
	memcpy(k->bytes[k->n], r->data, r->caplen);
	k->r[k->n].data = k->bytes[k->n];
	k->n++;
	return 0;
}

static void forget(struct kept *k)
{
	for (size_t i = 0; i < k->n; i++)
		free(k->bytes[i]);
	k->n = 0;
}

/* Read passes until one brings nothing. */
static size_t read_until_empty(struct fab_cap *cap, struct kept *k)
{
	size_t total = 0, n;

	do {
		NST_EQ(fab_cap_read(cap, keep, k, &n), 0);
		total += n;
	} while (n);
	return total;
}

/* ---- Set-up -------------------------------------------------------------------- */

static int suite_init(void)
{
	kept = calloc(1, sizeof(*kept));
	return kept && fab_addr_parse(A_ADDR, &a_addr) == 0 &&
		       fab_addr_parse(B_ADDR, &b_addr) == 0 &&
		       nst_tmpdir(tmp, sizeof(tmp), "capr") == 0
		   ? 0
		   : -1;
}

static int suite_clean(void)
{
	free(kept);
	nst_rmtree(tmp);
	return 0;
}

static void setup(void)
{
	const uint32_t addrs[] = {a_addr, b_addr};
	const struct fab_config cfg = {
	    .max_ports = 8, .frames = 4096, .seed = 3, .addrs = addrs, .naddrs = 2};

	snprintf(dir, sizeof(dir), "%s/f%d", tmp, ++dir_no);
	NST_REQUIRE_EQ(mkdir(dir, 0700), 0);
	NST_REQUIRE_EQ(fab_create(dir, &cfg), 0);
	NST_REQUIRE_EQ(fab_open(dir, &fab), 0);
	NST_REQUIRE_EQ(fab_open(dir, &cap_fab), 0);
	NST_REQUIRE_EQ(fab_port_open(fab, a_addr, &pa), 0);
	NST_REQUIRE_EQ(fab_port_open(fab, b_addr, &pb), 0);
}

static void teardown(void)
{
	forget(kept);
	fab_port_close(pa);
	fab_port_close(pb);
	pa = pb = NULL;
	fab_close(fab);
	fab_close(cap_fab);
	fab = cap_fab = NULL;
}

/* ---- The tap -------------------------------------------------------------------- */

static void test_off_until_attached(void)
{
	struct fab_cap *cap;

	NST_TRUE(!fab_cap_attached(fab, NULL));
	NST_REQUIRE_EQ(send_one(1, 100, NULL), 0);
	NST_EQ(drain_b(1, 1000), 1);
	NST_REQUIRE_EQ(fab_cap_attach(cap_fab, FAB_SLOT_BYTES, &cap), 0);
	/* What was sent before the attach is not there. */
	NST_EQ(read_until_empty(cap, kept), 0);
	fab_cap_detach(cap);
}

static void test_every_frame_with_its_marks(void)
{
	struct fab_link_config cfg;
	struct fab_link_stats st;
	struct fab_cap_stats cs;
	struct fab_cap *cap;
	uint32_t i, len[600], pid = 0, dups = 0, corrupt = 0, lost = 0, delayed = 0;
	uint64_t last_ts = 0;
	struct fab_pkt pkt;
	enum fab_wire_err why;
	uint8_t want[FAB_SLOT_BYTES];

	NST_REQUIRE_EQ(fab_cap_attach(cap_fab, FAB_SLOT_BYTES, &cap), 0);
	NST_TRUE(fab_cap_attached(fab, &pid));
	NST_EQ(pid, getpid());
	fab_link_config_default(&cfg);
	cfg.loss_ppb = 100000000;   /* 10 % */
	cfg.dup_ppb = 100000000;    /* 10 % */
	cfg.corrupt_ppb = 50000000; /* 5 % */
	cfg.delay_ppb = 50000000;
	cfg.delay_ns = 1000;
	set_link(&cfg);
	for (i = 0; i < 600; i++)
		NST_REQUIRE_EQ(send_one(i, 1 + i * 3, &len[i]), 0);
	st = (struct fab_link_stats){0};
	NST_REQUIRE_EQ(fab_link_stats(fab, a_addr, b_addr, &st), 0);
	drain_b((unsigned)(600 - st.tx.dropped_loss + st.tx.duplicated), 2000);
	NST_EQ(read_until_empty(cap, kept), 600 + st.tx.duplicated);
	/* Each original in send order, each copy right after its original. */
	for (size_t k = 0, psn = 0; k < kept->n; k++) {
		const struct fab_cap_rec *r = &kept->r[k];
		bool dup = r->marks & FAB_MARK_DUPLICATE;

		if (dup)
			dups++;
		else
			psn++;
		NST_EQ(r->len, len[psn - 1]);
		NST_EQ(r->caplen, r->len);
		NST_EQ_U(r->src, a_addr);
		NST_EQ_U(r->dst, b_addr);
		NST_TRUE(!r->rx_drop);
		NST_EQ(r->lost_before, 0);
		NST_TRUE(r->ts_ns >= last_ts);
		last_ts = r->ts_ns;
		if (r->marks & FAB_MARK_DROP_LOSS) {
			lost++;
			NST_EQ(r->due_ns, 0);
		}
		delayed += !dup && (r->marks & FAB_MARK_DELAYED);
		/* The bytes the sender put on the wire, bit flip included (a
		 * copy is made after the flip). */
		make_send(want, (uint32_t)psn - 1, 1 + ((uint32_t)psn - 1) * 3);
		if (r->marks & FAB_MARK_CORRUPTED) {
			corrupt += !dup;
			NST_EQ(fab_pkt_decode(r->data, r->caplen, &pkt, &why), -EBADMSG);
			NST_NE(memcmp(r->data, want, r->len), 0);
		} else {
			NST_EQ(memcmp(r->data, want, r->len), 0);
		}
	}
	NST_EQ(dups, st.tx.duplicated);
	NST_EQ(lost, st.tx.dropped_loss);
	NST_EQ(corrupt, st.tx.corrupted);
	NST_EQ(delayed, st.tx.delayed);
	NST_TRUE(dups > 0 && lost > 0 && corrupt > 0 && delayed > 0);
	fab_cap_get_stats(cap, &cs);
	NST_EQ(cs.read, kept->n);
	NST_EQ(cs.not_captured, 0);
	NST_EQ(cs.bad, 0);
	fab_cap_detach(cap);
	NST_TRUE(!fab_cap_attached(fab, NULL));
}

static void test_dropped_on_delivery_recorded_by_receiver(void)
{
	struct fab_link_config cfg;
	struct fab_cap *cap;

	NST_REQUIRE_EQ(fab_cap_attach(cap_fab, 100, &cap), 0);
	fab_link_config_default(&cfg);
	cfg.latency_ns = 20000000; /* 20 ms in flight */
	set_link(&cfg);
	NST_REQUIRE_EQ(send_one(5, 500, NULL), 0);
	cfg.flags = FAB_LINK_DOWN;
	set_link(&cfg);
	NST_EQ(drain_b(1, 100), 0);
	NST_EQ(read_until_empty(cap, kept), 2);
	NST_REQUIRE_EQ(kept->n, 2);
	NST_TRUE(!kept->r[0].rx_drop);
	NST_EQ(kept->r[0].marks, 0);
	NST_TRUE(kept->r[1].rx_drop);
	NST_EQ_U(kept->r[1].marks, FAB_MARK_DROP_DOWN);
	NST_EQ(kept->r[1].port_slot, 2); /* B's ring: 198.18.0.2 sits in slot 2 */
	NST_EQ(kept->r[1].ts_ns, kept->r[1].due_ns);
	NST_EQ(kept->r[1].link_seq, kept->r[0].link_seq);
	NST_EQ(kept->r[1].caplen, 100);
	fab_cap_detach(cap);
}

/* Median time of n sends of a ready 4 KiB frame, received as they go. */
static uint64_t median_send_ns(uint64_t *took, uint32_t n)
{
	static uint8_t frame[FAB_SLOT_BYTES];
	uint32_t len = make_send(frame, 0, 4000), idx, i;
	uint64_t t0;
	void *data;

	for (i = 0; i < n; i++) {
		NST_REQUIRE_EQ(fab_frame_get(pa, &idx, &data), 0);
		memcpy(data, frame, len);
		t0 = nst_now_ns();
		NST_REQUIRE_EQ(fab_send(pa, idx, len, b_addr), 0);
		took[i] = nst_now_ns() - t0;
		drain_b(0, 0);
	}
	return (uint64_t)nst_median_u64(took, n);
}

static void test_lossy_full_ring_never_blocks(void)
{
	enum { SENT = 20000 };
	static uint64_t took[SENT];
	const struct fab_cap_config lossy = {.copy_bytes = FAB_SLOT_BYTES, .lossy = true};
	struct fab_cap_stats cs;
	struct fab_cap *cap;
	uint64_t off, full;
	size_t first;

	off = median_send_ns(took, 2000);
	NST_REQUIRE_EQ(fab_cap_attach_cfg(cap_fab, &lossy, &cap), 0);
	/* Nobody reads the capture: the ring (1 MiB here) fills after a few
	 * hundred 4 KiB frames, and every send still succeeds at once, at the
	 * cost of one without a capture (medians: a descheduled send does not
	 * count). */
	full = median_send_ns(took, SENT);
	printf("\n    median send: %.2f us without a capture, %.2f us with a full capture "
	       "ring\n",
	       (double)off / 1000.0, (double)full / 1000.0);
	NST_TRUE(full <= 2 * off + 1000);
	first = read_until_empty(cap, kept);
	fab_cap_get_stats(cap, &cs);
	NST_TRUE(first > 100 && first < SENT / 2);
	NST_EQ(cs.not_captured, SENT - first);
	NST_EQ(cs.stalled, 0);
	NST_TRUE(fab_cap_attached(fab, NULL));
	/* Room again: the next frame is captured, and says how many were
	 * left out before it. */
	NST_REQUIRE_EQ(send_one(1, 10, NULL), 0);
	drain_b(1, 1000);
	NST_EQ(read_until_empty(cap, kept), 1);
	NST_EQ(kept->r[kept->n - 1].lost_before, SENT - first);
	fab_cap_get_stats(cap, &cs);
	NST_EQ(cs.read, first + 1);
	fab_cap_detach(cap);
}

static void test_snap_length(void)
{
	struct fab_cap *cap;
	uint32_t len;

	NST_REQUIRE_EQ(fab_cap_attach(cap_fab, 100, &cap), 0);
	NST_REQUIRE_EQ(send_one(1, 1000, &len), 0);
	NST_REQUIRE_EQ(send_one(2, 10, NULL), 0);
	drain_b(2, 1000);
	NST_EQ(read_until_empty(cap, kept), 2);
	NST_EQ(kept->r[0].caplen, 100);
	NST_EQ(kept->r[0].len, len);
	NST_EQ(kept->r[1].caplen, kept->r[1].len); /* shorter than the snap length */
	fab_cap_detach(cap);
	forget(kept);
	/* Below the headers through the BTH: the headers are kept anyway. */
	NST_REQUIRE_EQ(fab_cap_attach(cap_fab, 1, &cap), 0);
	NST_REQUIRE_EQ(send_one(3, 1000, NULL), 0);
	drain_b(1, 1000);
	NST_EQ(read_until_empty(cap, kept), 1);
	NST_EQ(kept->r[0].caplen, FAB_CAP_COPY_MIN);
	fab_cap_detach(cap);
}

static void test_one_capture_at_a_time(void)
{
	struct fab_cap *cap, *second;
	struct fab *third;

	NST_REQUIRE_EQ(fab_cap_attach(cap_fab, 200, &cap), 0);
	NST_EQ(fab_cap_attach(cap_fab, 200, &second), -EBUSY);
	NST_REQUIRE_EQ(fab_open(dir, &third), 0);
	NST_EQ(fab_cap_attach(third, 200, &second), -EBUSY);
	fab_cap_detach(cap);
	NST_EQ(fab_cap_attach(third, 200, &second), 0);
	fab_cap_detach(second);
	fab_close(third);
}

/* The whole segment of the current fabric, mapped as another process would
 * map it; *size gets its length. */
static uint8_t *map_segment(size_t *size)
{
	char path[600];
	void *base;
	off_t end;
	int fd;

	snprintf(path, sizeof(path), "%s/" FAB_SEG_FILE, dir);
	fd = open(path, O_RDWR | O_CLOEXEC);
	NST_REQUIRE(fd >= 0);
	end = lseek(fd, 0, SEEK_END);
	*size = end > 0 ? (size_t)end : 0;
	base = *size ? mmap(NULL, *size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
	close(fd);
	NST_REQUIRE(base != MAP_FAILED);
	return base;
}

/* A child that attaches a capture and dies without detaching. */
static int attach_and_die(void *arg)
{
	struct fab_cap *cap;
	struct fab *f;

	(void)arg;
	if (fab_open(dir, &f) || fab_cap_attach(f, 200, &cap))
		return 1;
	_exit(0);
}

static void test_dead_capture_releases_the_tap(void)
{
	const struct fab_seg_hdr *h;
	struct fab_cap *cap;
	uint32_t i, pid = 0;
	uint64_t ctl, t0, took, longest = 0;
	pid_t child = nst_fork(attach_and_die, NULL);
	size_t size;
	void *base;
	int st;

	NST_REQUIRE(child > 0);
	st = nst_wait(child, 10000);
	NST_REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	base = map_segment(&size);
	h = base;
	/* The tap is still on, but nobody holds the lock. */
	NST_NE(FAB_TAP_CTL_SNAP(__atomic_load_n(&h->tap_ctl, __ATOMIC_ACQUIRE)), 0);
	NST_TRUE(!fab_cap_attached(fab, &pid));
	NST_EQ(pid, child);
	/* The port copies until its ring is full (1 MiB: 3971 records of 264
	 * bytes here); about to wait for room, it finds the capture gone and
	 * turns the tap off: a dead capture holds no one back, not even for
	 * the stall bound. */
	for (i = 0; i < 6000; i++) {
		t0 = nst_now_ns();
		NST_REQUIRE_EQ(send_one(i, 4000, NULL), 0);
		took = nst_now_ns() - t0;
		longest = took > longest ? took : longest;
		drain_b(0, 0);
	}
	printf("\n    6000 sends with a dead capture attached: the longest took %.1f ms\n",
	       (double)longest / 1e6);
	NST_TRUE(longest < FAB_TAP_STALL_NS / 2);
	ctl = __atomic_load_n(&h->tap_ctl, __ATOMIC_ACQUIRE);
	NST_EQ(FAB_TAP_CTL_SNAP(ctl), 0);
	/* A new capture attaches, with a new generation, and starts clean. */
	drain_b(1, 1000);
	NST_REQUIRE_EQ(fab_cap_attach(cap_fab, 200, &cap), 0);
	NST_EQ(FAB_TAP_CTL_GEN(__atomic_load_n(&h->tap_ctl, __ATOMIC_ACQUIRE)),
	       FAB_TAP_CTL_GEN(ctl) + 1);
	NST_EQ(read_until_empty(cap, kept), 0);
	NST_REQUIRE_EQ(send_one(9, 50, NULL), 0);
	NST_EQ(read_until_empty(cap, kept), 1);
	fab_cap_detach(cap);
	munmap(base, size);
}

/* splitmix64: the scribbler's randomness, reproducible from its start. */
static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint64_t xrand(void)
{
	return nst_splitmix64(&rng_state);
}

/* Values that hurt: around the ring's size, alignment and record sizes. */
static uint64_t nasty(uint32_t ring_bytes)
{
	static const uint64_t edges[] = {
	    0, 1, 7, 8, 63, 64, 65, 4160, 0xffffffffull, UINT64_MAX, 0x8000000000000000ull};
	uint64_t e[] = {ring_bytes, ring_bytes - 8, ring_bytes + 8, (uint64_t)ring_bytes * 2};

	switch (xrand() % 4) {
	case 0: return edges[xrand() % (sizeof(edges) / sizeof(edges[0]))];
	case 1: return e[xrand() % 4];
	default: return xrand();
	}
}

/* ---- Lossless, stalled, filtered ------------------------------------------------- */

/* What a capture in a child process saw, in a page shared with it. */
struct child_cap {
	uint32_t want;         /* frames A sends */
	uint32_t stop;         /* the parent is done sending: read what is left, end */
	uint32_t pause_us;     /* rest after each pass: a capture slower than A */
	uint32_t rec_pause_us; /* rest after each record: an output slow to write */
	uint64_t records;      /* records read */
	uint64_t got;          /* the highest PSN read, plus one */
	uint64_t out_of_order; /* records whose PSN was not after the last one */
	uint64_t not_captured, stalled;
};

static struct child_cap *child_page(void)
{
	struct child_cap *c =
	    mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	NST_REQUIRE(c != MAP_FAILED);
	memset(c, 0, sizeof(*c));
	return c;
}

static int count_in_order(void *arg, const struct fab_cap_rec *r)
{
	struct child_cap *c = arg;
	uint32_t psn = r->caplen >= FAB_HDR_BASE
			   ? (uint32_t)r->data[51] << 16 | (uint32_t)r->data[52] << 8 | r->data[53]
			   : UINT32_MAX;

	/* The PSNs continue across a stall: what was left out is skipped. */
	if (c->rec_pause_us) {
		struct timespec ts = {0, (long)c->rec_pause_us * 1000};

		nanosleep(&ts, NULL); /* the output is slow: what is tested */
	}
	c->records++;
	c->out_of_order += psn < c->got;
	c->got = psn + 1 > c->got ? psn + 1 : c->got;
	return 0;
}

/* A capture (lossless) in its own process: reads until the parent says
 * stop and a pass finds nothing, or 60 s. */
static int child_capture(void *arg, int ready_fd)
{
	struct child_cap *c = arg;
	uint64_t deadline = nst_now_ns() + 60000000000ull;
	struct fab_cap_stats st;
	struct fab_cap *cap;
	struct fab *f;
	size_t n;

	if (fab_open(dir, &f) || fab_cap_attach(f, FAB_SLOT_BYTES, &cap))
		return 1;
	if (write(ready_fd, "r", 1) != 1)
		return 2;
	while (nst_now_ns() < deadline) {
		/* Read before the pass: a pass that began before the parent's
		 * last frames were written may miss them. */
		bool stopping = __atomic_load_n(&c->stop, __ATOMIC_ACQUIRE);

		if (fab_cap_read(cap, count_in_order, c, &n))
			return 3;
		if (stopping && !n)
			break;
		if (c->pause_us) {
			struct timespec ts = {0, (long)c->pause_us * 1000};

			nanosleep(&ts, NULL); /* the capture is slow: what is tested */
		}
	}
	fab_cap_get_stats(cap, &st);
	c->not_captured = st.not_captured;
	c->stalled = st.stalled;
	fab_cap_detach(cap);
	fab_close(f);
	return nst_now_ns() < deadline ? 0 : 4;
}

/* Tell the child capture to finish and collect what it saw. */
static void child_end(pid_t pid, struct child_cap *c)
{
	int st;

	__atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE);
	st = nst_wait(pid, 60000);
	NST_CHECK_(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, CU_FALSE,
		   "the capture process ended with status 0x%x", st);
}

/*
 * Start the capture process c describes, send it sent frames of 4 KiB from
 * A (B drains as they come), end it; how long the sends took.
 */
static uint64_t send_through_capture(struct child_cap *c, uint32_t sent)
{
	uint64_t t0, took;
	pid_t pid = nst_fork_ready(child_capture, c, 10000);

	NST_REQUIRE(pid > 0);
	t0 = nst_now_ns();
	for (uint32_t i = 0; i < sent; i++) {
		NST_REQUIRE_EQ(send_one(i, 4000, NULL), 0);
		drain_b(0, 0);
	}
	took = nst_now_ns() - t0;
	drain_b(0, 0);
	child_end(pid, c);
	return took;
}

static void test_lossless_waits_for_the_capture(void)
{
	enum { SENT = 3000 };
	struct child_cap *c = child_page();
	uint64_t took;

	/* A capture that rests 1 ms after each pass, far slower than A: 3000
	 * frames of 4 KiB are 12 MiB through a ring of 1 MiB. */
	c->want = SENT;
	c->pause_us = 1000;
	took = send_through_capture(c, SENT);
	printf("\n    %d frames of 4 KiB through a 1 MiB ring, capture resting 1 ms per pass: "
	       "%.0f ms, %llu captured, %llu not captured\n",
	       SENT, (double)took / 1e6, (unsigned long long)c->records,
	       (unsigned long long)c->not_captured);
	NST_EQ(c->records, SENT);
	NST_EQ(c->got, SENT);
	NST_EQ(c->out_of_order, 0);
	NST_EQ(c->not_captured, 0);
	NST_EQ(c->stalled, 0);
	munmap(c, sizeof(*c));
}

static void test_slow_output_loses_nothing(void)
{
	enum { SENT = 400 };
	struct child_cap *c = child_page();
	uint64_t took;

	/* A capture whose output takes 5 ms a record: a ring full of 4 KiB
	 * frames (about 250) is a pass of over a second, longer than the stall
	 * bound.  The capture gives the ring back what it has written as the
	 * pass goes on, so A waits for it and nothing is left out. */
	c->want = SENT;
	c->rec_pause_us = 5000;
	took = send_through_capture(c, SENT);
	printf("\n    %d frames of 4 KiB to a capture writing 200 frames/s: %.0f ms, %llu "
	       "captured, %llu not captured\n",
	       SENT, (double)took / 1e6, (unsigned long long)c->records,
	       (unsigned long long)c->not_captured);
	NST_EQ(c->records, SENT);
	NST_EQ(c->not_captured, 0);
	NST_EQ(c->stalled, 0);
	NST_EQ(c->out_of_order, 0);
	munmap(c, sizeof(*c));
}

static const struct fab_seg_hdr *watched_hdr;

/* Whether the capture has made a pass since *arg passes. */
static bool passes_beyond(void *arg)
{
	return __atomic_load_n(&watched_hdr->tap_passes, __ATOMIC_ACQUIRE) > *(uint64_t *)arg;
}

static void test_stalled_capture_holds_back_for_the_bound_only(void)
{
	enum { SENT = 6000, AFTER = 2000 };
	struct child_cap *c = child_page();
	const struct fab_seg_hdr *h;
	const struct fab_tap_ring *ra;
	uint64_t t0, took, longest = 0, t, stalled, passes, held = 0;
	size_t size;
	void *base;
	pid_t pid;

	pid = nst_fork_ready(child_capture, c, 10000);
	NST_REQUIRE(pid > 0);
	NST_REQUIRE_EQ(kill(pid, SIGSTOP), 0);
	base = map_segment(&size);
	h = watched_hdr = base;
	ra = (const struct fab_tap_ring *)((const uint8_t *)base + h->tap_off) + 1; /* A: slot 1 */
	/* The capture is stopped: the ring fills (about 250 frames), A waits
	 * until the capture's last pass is FAB_TAP_STALL_NS old, then leaves
	 * frames out without waiting. */
	t0 = nst_now_ns();
	for (uint32_t i = 0; i < SENT; i++) {
		t = nst_now_ns();
		NST_REQUIRE_EQ(send_one(i, 4000, NULL), 0);
		t = nst_now_ns() - t;
		longest = t > longest ? t : longest;
		held += t >= FAB_TAP_STALL_NS / 2;
		drain_b(0, 0);
	}
	took = nst_now_ns() - t0;
	stalled = __atomic_load_n(&ra->stalled, __ATOMIC_RELAXED);
	printf("\n    %d sends with the capture stopped: %.0f ms in all, the longest %.0f ms; "
	       "%llu left out\n",
	       SENT, (double)took / 1e6, (double)longest / 1e6, (unsigned long long)stalled);
	/* Held back once, for about the bound (less the time since the
	 * attach), and not per frame: counted by the sends that waited, not
	 * by the run's time, which a busy or valgrind-slowed host stretches. */
	NST_TRUE(longest >= FAB_TAP_STALL_NS / 2);
	NST_CHECK_(held <= 2, CU_FALSE, "%llu sends waited half the bound or more",
		   (unsigned long long)held);
	NST_TRUE(stalled > SENT / 2);
	NST_EQ(__atomic_load_n(&ra->not_captured, __ATOMIC_RELAXED), stalled);
	/* Going again: once the capture has made a pass, A waits for it
	 * again (frames sent before that pass are still left out).  The
	 * first pass to end may be one the stop interrupted, begun before
	 * A's ring filled, which gives none of it back: wait for the one
	 * after it, which began after SIGCONT and read the whole ring. */
	passes = __atomic_load_n(&h->tap_passes, __ATOMIC_ACQUIRE) + 1;
	NST_REQUIRE_EQ(kill(pid, SIGCONT), 0);
	NST_REQUIRE(nst_wait_until(passes_beyond, &passes, 10000, 1));
	stalled = __atomic_load_n(&ra->stalled, __ATOMIC_RELAXED);
	for (uint32_t i = SENT; i < SENT + AFTER; i++) {
		NST_REQUIRE_EQ(send_one(i, 4000, NULL), 0);
		drain_b(0, 0);
	}
	child_end(pid, c);
	NST_EQ(c->stalled, stalled);
	NST_EQ(c->not_captured, stalled);
	NST_EQ(c->got, SENT + AFTER);
	NST_EQ(c->records + stalled, SENT + AFTER);
	NST_EQ(c->out_of_order, 0);
	munmap(base, size);
	munmap(c, sizeof(*c));
}

/* A process that keeps the capture's progress stamp fresh and does nothing
 * else: until the parent says stop, or 5 s. */
static int child_stamp_beat(void *arg, int ready_fd)
{
	const uint32_t *stop = arg;
	uint64_t deadline = nst_now_ns() + 5000000000ull;
	struct fab_seg_hdr *h;
	size_t size;

	h = (struct fab_seg_hdr *)map_segment(&size);
	if (write(ready_fd, "r", 1) != 1)
		return 2;
	while (!__atomic_load_n(stop, __ATOMIC_ACQUIRE) && nst_now_ns() < deadline) {
		struct timespec ts = {0, 10000000};

		__atomic_store_n(&h->tap_beat_ns, nst_now_ns(), __ATOMIC_RELEASE);
		nanosleep(&ts, NULL); /* the pace of the forgery, not a synchronisation */
	}
	munmap(h, size);
	return 0;
}

static void test_fresh_stamp_without_progress_holds_back_for_the_bound_only(void)
{
	enum { SENT = 600 };
	uint32_t *stop =
	    mmap(NULL, sizeof(*stop), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	uint64_t t, longest = 0, passes0;
	struct fab_cap_port_counters pc;
	const struct fab_seg_hdr *h;
	struct fab_cap *cap;
	size_t size;
	void *base;
	pid_t pid;
	int st;

	/* A capture that is attached (it holds the lock) and never reads, and
	 * a process that stamps its progress every 10 ms: neither the ring's
	 * position nor the pass count moves, so a port whose ring is full must
	 * stop waiting after the bound, whatever the stamp says. */
	NST_REQUIRE(stop != MAP_FAILED);
	*stop = 0;
	NST_REQUIRE_EQ(fab_cap_attach(cap_fab, FAB_SLOT_BYTES, &cap), 0);
	base = map_segment(&size);
	h = base;
	passes0 = __atomic_load_n(&h->tap_passes, __ATOMIC_ACQUIRE);
	pid = nst_fork_ready(child_stamp_beat, stop, 10000);
	NST_REQUIRE(pid > 0);
	for (uint32_t i = 0; i < SENT; i++) {
		t = nst_now_ns();
		NST_REQUIRE_EQ(send_one(i, 4000, NULL), 0);
		t = nst_now_ns() - t;
		longest = t > longest ? t : longest;
		drain_b(0, 0);
	}
	__atomic_store_n(stop, 1, __ATOMIC_RELEASE);
	st = nst_wait(pid, 10000);
	NST_CHECK_(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, CU_FALSE,
		   "the stamping process ended with status 0x%x", st);
	NST_REQUIRE_EQ(fab_cap_port_counters(fab, a_addr, &pc), 0);
	printf("\n    %d sends, the capture's stamp fresh and nothing read: the longest took "
	       "%.0f ms; %llu captured, %llu left out as stalled\n",
	       SENT, (double)longest / 1e6, (unsigned long long)pc.records,
	       (unsigned long long)pc.stalled);
	NST_EQ(__atomic_load_n(&h->tap_passes, __ATOMIC_ACQUIRE), passes0);
	NST_TRUE(longest < FAB_TAP_STALL_NS + 500000000ull);
	NST_GT(pc.stalled, 0);
	NST_EQ(pc.records + pc.not_captured, SENT);
	fab_cap_detach(cap);
	munmap(base, size);
	munmap(stop, sizeof(*stop));
}

static void test_written_fields_named(void)
{
	struct fab_tap_ring *ra;
	struct fab_cap_stats cs;
	struct fab_seg_hdr *h;
	struct fab_cap *cap;
	uint32_t i;
	size_t size;
	void *base;

	/* A lossless capture whose mode another process turns lossy: the port
	 * leaves frames out without waiting, and the capture's next pass finds
	 * its mode written (and writes it back), not its positions. */
	NST_REQUIRE_EQ(fab_cap_attach(cap_fab, FAB_SLOT_BYTES, &cap), 0);
	base = map_segment(&size);
	h = base;
	ra = (struct fab_tap_ring *)((uint8_t *)base + h->tap_off) + 1; /* A: slot 1 */
	__atomic_store_n(&h->tap_flags, FAB_TAP_F_LOSSY, __ATOMIC_RELAXED);
	for (i = 0; i < 600; i++) {
		NST_REQUIRE_EQ(send_one(i, 4000, NULL), 0);
		drain_b(0, 0);
	}
	read_until_empty(cap, kept);
	fab_cap_get_stats(cap, &cs);
	NST_GT(cs.not_captured, 0);
	NST_EQ(cs.stalled, 0);
	NST_EQ(cs.mode_written, 1);
	NST_EQ(cs.filter_written, 0);
	NST_EQ(cs.pos_written, 0);
	NST_EQ(__atomic_load_n(&h->tap_flags, __ATOMIC_RELAXED), 0);
	/* Then its ring's position and its filter: each found by the next
	 * pass, the mode left alone. */
	__atomic_store_n(&ra->cons, nasty(h->tap_ring_bytes) | 1, __ATOMIC_RELAXED);
	__atomic_store_n(&h->tap_qpn, 7, __ATOMIC_RELAXED);
	read_until_empty(cap, kept);
	fab_cap_get_stats(cap, &cs);
	NST_EQ(cs.mode_written, 1);
	NST_EQ(cs.filter_written, 1);
	NST_EQ(cs.pos_written, 1);
	NST_EQ(__atomic_load_n(&h->tap_qpn, __ATOMIC_RELAXED), 0);
	fab_cap_detach(cap);
	munmap(base, size);
}

static void test_lossless_hostile_never_hangs(void)
{
	enum { ROUNDS = 300, BURST = 20 };
	struct child_cap *c = child_page();
	struct fab_tap_ring *ra;
	struct fab_seg_hdr *h;
	uint64_t t, longest = 0, now;
	uint32_t round, i;
	size_t size;
	void *base;
	pid_t pid;

	/* A slow capture in another process, so that A's ring fills and A
	 * waits; meanwhile this process scribbles on what a waiting port
	 * reads: the capture's progress, its pass count, the wake word, the
	 * waiting flag, the capture's position, the mode and the filter. */
	c->pause_us = 1000;
	pid = nst_fork_ready(child_capture, c, 10000);
	NST_REQUIRE(pid > 0);
	base = map_segment(&size);
	h = base;
	ra = (struct fab_tap_ring *)((uint8_t *)base + h->tap_off) + 1; /* A: slot 1 */
	for (round = 0; round < ROUNDS; round++) {
		for (i = 0; i < BURST; i++) {
			t = nst_now_ns();
			NST_REQUIRE_EQ(send_one(round * BURST + i, 4000, NULL), 0);
			t = nst_now_ns() - t;
			longest = t > longest ? t : longest;
			drain_b(0, 0);
		}
		now = nst_now_ns();
		switch (xrand() % 8) {
		case 0: /* progress from the future, near or far */
			__atomic_store_n(&h->tap_beat_ns,
					 now + (xrand() % 2 ? 1000 : 2 * FAB_TAP_STALL_NS),
					 __ATOMIC_RELAXED);
			break;
		case 1: __atomic_store_n(&h->tap_passes, xrand(), __ATOMIC_RELAXED); break;
		case 2: __atomic_store_n(&ra->wake, (uint32_t)xrand(), __ATOMIC_RELAXED); break;
		case 3: __atomic_store_n(&ra->waiting, (uint32_t)xrand(), __ATOMIC_RELAXED); break;
		case 4:
			__atomic_store_n(&ra->cons, nasty(h->tap_ring_bytes), __ATOMIC_RELAXED);
			break;
		case 5:
			__atomic_store_n(&h->tap_flags, (uint32_t)xrand() & ~FAB_TAP_F_LOSSY,
					 __ATOMIC_RELAXED);
			break;
		case 6: __atomic_store_n(&h->tap_flags, 0, __ATOMIC_RELAXED); break;
		default: __atomic_store_n(&h->tap_beat_ns, 0, __ATOMIC_RELAXED); break;
		}
	}
	child_end(pid, c);
	printf("\n    %d sends of 4 KiB to a slow capture, its state scribbled on: the longest "
	       "took %.0f ms; %llu captured, %llu left out\n",
	       ROUNDS * BURST, (double)longest / 1e6, (unsigned long long)c->records,
	       (unsigned long long)c->not_captured);
	/* No send waits longer than the stall bound (and a little). */
	NST_TRUE(longest < FAB_TAP_STALL_NS + 500000000ull);
	NST_GT(c->records, 0);
	munmap(base, size);
	munmap(c, sizeof(*c));
}

static void test_lossy_filter_before_drops(void)
{
	enum { SENT = 20000, EVERY = 100 };
	const struct fab_cap_config cfg = {
	    .copy_bytes = FAB_SLOT_BYTES,
	    .lossy = true,
	    .filter = {
		.qpn_set = true, .qpn = QPN + 1, .opcode_set = true, .opcode = FAB_OP_SEND_ONLY}};
	struct fab_cap_stats cs;
	struct fab_cap *cap;
	size_t other_qp = 0;

	/* Nobody reads while A sends 20,000 frames of 4 KiB: the ring holds
	 * about 250.  The 200 to the QP the filter names all fit, since the
	 * others never take room. */
	NST_REQUIRE_EQ(fab_cap_attach_cfg(cap_fab, &cfg, &cap), 0);
	for (uint32_t i = 0; i < SENT; i++) {
		send_qpn = i % EVERY ? QPN : QPN + 1;
		NST_REQUIRE_EQ(send_one(i, 4000, NULL), 0);
		drain_b(0, 0);
	}
	send_qpn = QPN;
	NST_EQ(read_until_empty(cap, kept), SENT / EVERY);
	for (size_t k = 0; k < kept->n; k++)
		other_qp += kept->bytes[k][FAB_HDR_BASE - 5] != ((QPN + 1) & 0xff);
	NST_EQ(other_qp, 0);
	fab_cap_get_stats(cap, &cs);
	NST_EQ(cs.not_captured, 0);
	NST_EQ(cs.filtered, SENT - SENT / EVERY);
	fab_cap_detach(cap);
}

/* ---- Hostile ring contents ------------------------------------------------------ */

static int count_only(void *arg, const struct fab_cap_rec *r)
{
	size_t *n = arg;

	/* Whatever the ring held, what is handed out adds up. */
	NST_TRUE(r->caplen <= r->len && r->len <= FAB_SLOT_BYTES);
	(*n)++;
	return 0;
}

static void test_hostile_ring_contents(void)
{
	const struct fab_cap_config lossy = {.copy_bytes = FAB_SLOT_BYTES, .lossy = true};
	struct fab_cap_stats cs;
	struct fab_tap_ring *rings;
	struct fab_seg_hdr *h;
	struct fab_cap *cap;
	uint32_t ring_bytes, round, i, s;
	uint8_t *base, *data;
	size_t handed = 0, n, size;
	bool garbled = false;

	/* Lossy: a scribbled position makes a ring look full, and a port of
	 * this process would otherwise wait for this same thread to read
	 * (bounded, by FAB_TAP_STALL_NS, in every such round). */
	NST_REQUIRE_EQ(fab_cap_attach_cfg(cap_fab, &lossy, &cap), 0);
	/* A mapping of our own, as a hostile process would have. */
	base = map_segment(&size);
	h = (struct fab_seg_hdr *)base;
	ring_bytes = h->tap_ring_bytes;
	rings = (struct fab_tap_ring *)(base + h->tap_off);
	for (round = 0; round < 400; round++) {
		for (i = 0; i < 10; i++) {
			if (send_one(round * 10 + i, (uint32_t)(xrand() % 4000), NULL))
				break;
		}
		/* A garbled filter lasts one round of sends. */
		if (garbled)
			__atomic_store_n(&h->tap_flags, FAB_TAP_F_LOSSY, __ATOMIC_RELAXED);
		garbled = false;
		drain_b(0, 0);
		/* Scribble on A's ring (slot 1): positions, then record bytes. */
		s = 1 + (uint32_t)(xrand() % 2);
		data = base + h->tap_off + fab_tap_data_off(h->max_ports) + (size_t)s * ring_bytes;
		switch (xrand() % 8) {
		case 0:
			__atomic_store_n(&rings[s].prod, nasty(ring_bytes), __ATOMIC_RELEASE);
			break;
		case 1:
			__atomic_store_n(&rings[s].cons, nasty(ring_bytes), __ATOMIC_RELEASE);
			break;
		case 2:
			for (int k = 0; k < 16; k++) {
				uint64_t off = (__atomic_load_n(&rings[s].prod, __ATOMIC_RELAXED) -
						8 * (xrand() % 64)) &
					       (ring_bytes - 8);
				uint64_t v = nasty(ring_bytes);

				memcpy(data + off, &v, sizeof(v));
			}
			break;
		case 3: __atomic_store_n(&rings[s].not_captured, xrand(), __ATOMIC_RELAXED); break;
		case 6: /* a garbled filter (the ports keep the lossy mode) */
			__atomic_store_n(&h->tap_flags, (uint32_t)xrand() | FAB_TAP_F_LOSSY,
					 __ATOMIC_RELAXED);
			__atomic_store_n(&h->tap_host, (uint32_t)nasty(ring_bytes),
					 __ATOMIC_RELAXED);
			__atomic_store_n(&h->tap_qpn, (uint32_t)xrand(), __ATOMIC_RELAXED);
			__atomic_store_n(&h->tap_opcode, (uint32_t)xrand(), __ATOMIC_RELAXED);
			__atomic_store_n(&rings[s].wake, (uint32_t)xrand(), __ATOMIC_RELAXED);
			__atomic_store_n(&rings[s].filtered, xrand(), __ATOMIC_RELAXED);
			garbled = true;
			break;
		case 5: /* a copy length out of range in the switch */
			__atomic_store_n(&h->tap_ctl,
					 FAB_TAP_CTL(FAB_TAP_CTL_GEN(h->tap_ctl),
						     (uint32_t)nasty(ring_bytes) | 1),
					 __ATOMIC_RELEASE);
			break;
		case 4: /* a plausible header with lies inside */
		{
			struct fab_tap_rec r = {.rec_len = 64 + 8 * (uint32_t)(xrand() % 600),
						.flags = (uint32_t)(xrand() % 4),
						.len = (uint32_t)nasty(ring_bytes),
						.caplen = (uint32_t)nasty(ring_bytes)};
			uint64_t off =
			    __atomic_load_n(&rings[s].cons, __ATOMIC_RELAXED) & (ring_bytes - 8);

			if (off + sizeof(r) <= ring_bytes)
				memcpy(data + off, &r, sizeof(r));
			break;
		}
		default: break;
		}
		n = 0;
		NST_EQ(fab_cap_read(cap, count_only, &n, NULL), 0);
		handed += n;
	}
	/* The scribbling stops; the next record realigns A's own position. */
	NST_REQUIRE_EQ(send_one(1, 100, NULL), 0);
	NST_EQ(fab_cap_read(cap, count_only, &n, NULL), 0);
	drain_b(0, 0);
	fab_cap_get_stats(cap, &cs);
	printf("\n    400 rounds of scribbling: %zu records handed out, %llu refused\n", handed,
	       (unsigned long long)cs.bad);
	NST_TRUE(cs.bad > 0);
	NST_TRUE(handed > 0);
	fab_cap_detach(cap);
	/* A new capture starts from where the producers are, and works. */
	NST_REQUIRE_EQ(fab_cap_attach(cap_fab, FAB_SLOT_BYTES, &cap), 0);
	NST_REQUIRE_EQ(send_one(1, 100, NULL), 0);
	NST_EQ(read_until_empty(cap, kept), 1);
	fab_cap_get_stats(cap, &cs);
	NST_EQ(cs.bad, 0);
	fab_cap_detach(cap);
	munmap(base, size);
}

/* ---- Marks in words --------------------------------------------------------------- */

static void test_describe(void)
{
	char buf[256];

	NST_EQ(strcmp(fab_cap_describe(0, false, buf, sizeof(buf)), ""), 0);
	NST_EQ(strcmp(fab_cap_describe(FAB_MARK_DROP_LOSS, false, buf, sizeof(buf)),
		      "nicsim: dropped (loss rule)"),
	       0);
	NST_EQ(
	    strcmp(fab_cap_describe(FAB_MARK_DUPLICATE | FAB_MARK_DELAYED, false, buf, sizeof(buf)),
		   "nicsim: duplicate (dup rule), delayed (delay rule)"),
	    0);
	NST_EQ(strcmp(fab_cap_describe(FAB_MARK_DROP_DOWN, true, buf, sizeof(buf)),
		      "nicsim: dropped on delivery (link went down in flight)"),
	       0);
	NST_EQ(
	    strcmp(fab_cap_describe(1u << 20, false, buf, sizeof(buf)), "nicsim: marks 0x100000"),
	    0);
	/* A small buffer is cut, never overrun. */
	fab_cap_describe(FAB_MARK_CORRUPTED | FAB_MARK_DROP_NTH, false, buf, 12);
	NST_EQ(strlen(buf), 11);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"off_until_attached", test_off_until_attached},
	    {"every_frame_with_its_marks", test_every_frame_with_its_marks},
	    {"dropped_on_delivery_recorded_by_receiver",
	     test_dropped_on_delivery_recorded_by_receiver},
	    {"lossy_full_ring_never_blocks", test_lossy_full_ring_never_blocks},
	    {"lossless_waits_for_the_capture", test_lossless_waits_for_the_capture},
	    {"slow_output_loses_nothing", test_slow_output_loses_nothing},
	    {"stalled_capture_holds_back_for_the_bound_only",
	     test_stalled_capture_holds_back_for_the_bound_only},
	    {"fresh_stamp_without_progress_holds_back_for_the_bound_only",
	     test_fresh_stamp_without_progress_holds_back_for_the_bound_only},
	    {"written_fields_named", test_written_fields_named},
	    {"lossless_hostile_never_hangs", test_lossless_hostile_never_hangs},
	    {"lossy_filter_before_drops", test_lossy_filter_before_drops},
	    {"snap_length", test_snap_length},
	    {"one_capture_at_a_time", test_one_capture_at_a_time},
	    {"dead_capture_releases_the_tap", test_dead_capture_releases_the_tap},
	    {"hostile_ring_contents", test_hostile_ring_contents},
	    {"describe", test_describe},
	    {NULL, NULL},
	};
	const struct nst_suite suite = {
	    .name = "capture_ring",
	    .tests = tests,
	    .init = suite_init,
	    .clean = suite_clean,
	    .setup = setup,
	    .teardown = teardown,
	};

	/* These tests attach captures of their own: one per fabric at a time. */
	unsetenv("NICSIM_CAPTURE");
	return nst_run_suite(argc, argv, &suite);
}

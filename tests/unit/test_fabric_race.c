/*
 * The fabric against a process that races it.  Every process that can open
 * fabric.shm can write any byte of it at any moment, also between two reads
 * a port makes of the same field.  Here a second process maps the segment
 * and keeps flipping what the ports read (frame metadata, ring entries, ring
 * indices, pending bits, link configurations, the sender's link state,
 * holder words, frame headers, the capture's switch, ring positions and
 * records) between the value that passes the checks and one that does not,
 * while one port sends and another receives, decodes and captures.  A field
 * read twice, checked in one read and used in the other, is then used
 * unchecked sooner or later; under AddressSanitizer that is a report, and
 * the bounds the sanitizer cannot see (the segment is one mapping) are
 * checked here.  The ports must go on working, their counters must show what
 * they refused, and after the racer stops the fabric must carry frames
 * intact again.
 *
 * The other tests race the decoders alone: a frame flips between two valid
 * packets of the same length (different opcodes and PSNs), and every packet
 * fab_pkt_decode accepts must be one of the two, never a mixture of a
 * header it checked and a header it read again; a CM message's attribute
 * flips between an RTU's and an unknown one, and every message
 * fab_cm_decode accepts must be the RTU.
 *
 * The racers are forked processes writing shared mappings, never threads:
 * the races are the point, and ThreadSanitizer is not to see them.  Each
 * runs on the other CPU from the test's (when there are two), stops when
 * told (a flag in a shared page), dies with the test (PR_SET_PDEATHSIG),
 * and ends by itself after RACER_MAX_MS.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fab.h"
#include "fab_addr.h"
#include "fab_capture.h"
#include "fab_cm.h"
#include "fab_wire.h"
#include "nstest.h"

#define A_ADDR "198.18.0.1" /* slot 1 */
#define B_ADDR "198.18.0.2" /* slot 2 */
#define A_SLOT 1u
#define B_SLOT 2u
#define MAX_PORTS 8u
#define NFRAMES 1024u
#define QPN 0x000123u
#define PAYLOAD 64u
#define BATCH 32u
#define MIN_ROUNDS 3000u
#define RACE_MS 40000u     /* the longest the ports are raced, waiting for every refusal */
#define RACER_MAX_MS 90000 /* a racer nobody stops ends by itself */
#define STOP_MS 10000
#define MIN_DECODES 20000u
#define MIN_OVERLAPS 64u

static char tmp[256];
static uint32_t a_addr, b_addr;

/* ---- The racers' side ------------------------------------------------------------- */

/* The page a racer shares with the test: the stop flag and what it did. */
struct race_ctl {
	uint32_t stop;
	uint32_t mapped;
	uint64_t actions;
};

static uint64_t xs;

static uint64_t xrand(void)
{
	xs ^= xs << 13;
	xs ^= xs >> 7;
	xs ^= xs << 17;
	return xs;
}

/* Values that fail a check, biased towards the ones just out of range. */
static uint32_t bad32(uint32_t limit)
{
	static const uint32_t edges[] = {0, 0x7fffffff, 0x80000000, 0xffffffff, FAB_SLOT_BYTES + 1};

	switch (xrand() % 4) {
	case 0: return limit;
	case 1: return limit + 1;
	case 2: return edges[xrand() % (sizeof(edges) / sizeof(edges[0]))];
	default: return (uint32_t)xrand();
	}
}

/* Flip *p between good and bad n times, ending on good: a reader that
 * reads it twice sees the two values differ. */
#define FLIP(p, good, bad, n)                             \
	do {                                              \
		for (uint32_t f_ = 0; f_ < (n); f_++)     \
			*(p) = (f_ & 1) ? (good) : (bad); \
	} while (0)

/* A racer's end: the test asked it to stop, or it ran too long. */
static bool racer_done(volatile struct race_ctl *ctl, uint64_t deadline)
{
	return ctl->stop || nst_now_ns() > deadline;
}

/* Die with the test, even one killed by a signal. */
static int racer_start(volatile struct race_ctl *ctl, uint64_t seed)
{
	pid_t parent = getppid();

	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		return 1;
	xs = seed;
	(void)ctl;
	return 0;
}

struct seg_racer {
	const char *path;
	volatile struct race_ctl *ctl;
};

/*
 * The segment racer.  Each action picks a target near where the ports are
 * working (the last frames published on A -> B and B -> A) and flips it
 * between its value and a bad one, FLIP_N times, so that the receiver,
 * running on the other CPU, meets both.
 */
#define FLIP_N 2048u

/*
 * Flip one field of every frame published on link l and not yet taken (its
 * ring entry, or a field of its metadata), all at once, WINDOW_FLIPS times:
 * whichever of them the receiver is reading meets the flips.
 */
#define WINDOW_MAX 64u
#define WINDOW_FLIPS 512u

static void flip_window(volatile struct fab_seg_link *l, volatile uint32_t *ring,
			volatile struct fab_seg_frame *meta, uint32_t depth, uint32_t nframes,
			uint32_t nports)
{
	volatile struct fab_seg_frame *m[WINDOW_MAX];
	volatile uint32_t *e[WINDOW_MAX];
	uint32_t good[WINDOW_MAX], bad[WINDOW_MAX], prod = l->prod, cons = l->cons, n = 0, i, j;
	unsigned field = (unsigned)(xrand() % 5);

	for (; cons != prod && n < WINDOW_MAX; cons++) {
		uint32_t idx = ring[cons & (depth - 1)];

		if (idx < nframes) {
			e[n] = &ring[cons & (depth - 1)];
			m[n++] = &meta[idx];
		}
	}
	for (i = 0; i < n; i++) {
		switch (field) {
		case 0:
			good[i] = m[i]->src_slot;
			bad[i] = xrand() % 2 ? nports : bad32(nports) & 0xffff;
			break;
		case 1:
			good[i] = m[i]->len;
			bad[i] = bad32(FAB_SLOT_BYTES);
			break;
		case 2:
			good[i] = m[i]->ring_pos;
			bad[i] = bad32(good[i]);
			break;
		case 3:
			good[i] = m[i]->src_addr;
			bad[i] = (uint32_t)xrand();
			break;
		default:
			good[i] = *e[i];
			bad[i] = bad32(nframes);
			break;
		}
	}
	for (j = 0; j < WINDOW_FLIPS; j++) {
		for (i = 0; i < n; i++) {
			uint32_t v = (j & 1) ? good[i] : bad[i];

			switch (field) {
			case 0: m[i]->src_slot = (uint16_t)v; break;
			case 1: m[i]->len = v; break;
			case 2: m[i]->ring_pos = v; break;
			case 3: m[i]->src_addr = v; break;
			default: *e[i] = v; break;
			}
		}
	}
}

static int seg_racer(void *arg, int ready_fd)
{
	struct seg_racer *r = arg;
	volatile struct race_ctl *ctl = r->ctl;
	uint64_t deadline = nst_now_ns() + (uint64_t)RACER_MAX_MS * 1000000u;
	volatile struct fab_seg_hdr *h;
	volatile struct fab_seg_port *ports;
	volatile struct fab_seg_link *links, *l;
	volatile struct fab_seg_frame *meta, *m;
	volatile struct fab_tap_ring *taps;
	volatile uint32_t *rings, *ring;
	volatile uint8_t *base, *frames, *tapdata, *fr;
	uint32_t depth, nframes, nports, ringb, prod, idx, v, src;
	struct stat st;
	int fd;
	char c = 1;

	if (racer_start(ctl, 0x243f6a8885a308d3ull))
		return 1;
	fd = open(r->path, O_RDWR);
	if (fd < 0 || fstat(fd, &st) < 0)
		return 1;
	base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (base == MAP_FAILED)
		return 1;
	h = (volatile struct fab_seg_hdr *)base;
	nports = h->max_ports;
	nframes = h->nframes;
	depth = h->ring_depth;
	ringb = h->tap_ring_bytes;
	ports = (volatile struct fab_seg_port *)(base + h->ports_off);
	links = (volatile struct fab_seg_link *)(base + h->links_off);
	rings = (volatile uint32_t *)(base + h->rings_off);
	meta = (volatile struct fab_seg_frame *)(base + h->meta_off);
	frames = base + h->frames_off;
	taps = (volatile struct fab_tap_ring *)(base + h->tap_off);
	tapdata = base + h->tap_off + fab_tap_data_off(nports);
	ctl->mapped = 1;
	if (write(ready_fd, &c, 1) != 1)
		return 1;

	while (!racer_done(ctl, deadline)) {
		/* Mostly A -> B, where the receiver under test reads. */
		src = xrand() % 4 ? A_SLOT : B_SLOT;
		l = &links[src * nports + (src == A_SLOT ? B_SLOT : A_SLOT)];
		ring = &rings[(size_t)(src * nports + (src == A_SLOT ? B_SLOT : A_SLOT)) * depth];
		prod = l->prod;
		/* One of the last frames published: likely being received now. */
		idx = ring[(prod - 1 - (uint32_t)(xrand() % 8)) & (depth - 1)];
		if (idx >= nframes)
			idx = (uint32_t)(xrand() % nframes);
		m = &meta[idx];
		fr = frames + (size_t)idx * FAB_SLOT_BYTES;
		ctl->actions++;
		switch (xrand() % 25) {
		case 0:
		case 1:
		case 2:
		case 3:
		case 4: flip_window(l, ring, meta, depth, nframes, nports); break;
		case 5: /* The source slot: indexes the receiver's per-source arrays. */
		case 6:
			v = m->src_slot;
			FLIP(&m->src_slot, (uint16_t)v,
			     (uint16_t)(xrand() % 2 ? nports : bad32(nports)), FLIP_N);
			break;
		case 7:
			v = m->ring_pos;
			FLIP(&m->ring_pos, v, bad32(v), FLIP_N);
			break;
		case 8:
			v = m->len;
			FLIP(&m->len, v, bad32(FAB_SLOT_BYTES), FLIP_N);
			break;
		case 9:
			v = m->src_addr;
			FLIP(&m->src_addr, v, (uint32_t)xrand(), FLIP_N);
			break;
		case 10: {
			uint64_t d = m->due_ns;

			FLIP(&m->due_ns, d, xrand() % 2 ? UINT64_MAX : xrand(), FLIP_N);
			break;
		}
		case 11: /* A ring entry about to be read. */
		{
			volatile uint32_t *e =
			    &ring[(prod - 1 - (uint32_t)(xrand() % 8)) & (depth - 1)];

			v = *e;
			FLIP(e, v, bad32(nframes), FLIP_N);
			break;
		}
		case 12:
			v = l->prod;
			FLIP(&l->prod, v, v + depth + 1 + (uint32_t)xrand() % 7, FLIP_N);
			break;
		case 13:
			v = l->cons;
			FLIP(&l->cons, v, bad32(v), 64);
			break;
		case 14: /* Header bytes the decoder checks: flipped, then put back. */
		case 15: {
			static const uint32_t offs[] = {12, 14, 16, 17, 20, 23,
							36, 37, 38, 39, 42, 43};
			uint32_t o = offs[xrand() % (sizeof(offs) / sizeof(offs[0]))];
			uint8_t b = fr[o];

			FLIP(&fr[o], b, (uint8_t)xrand(), FLIP_N);
			break;
		}
		case 16:
			ports[B_SLOT].pending[xrand() % (FAB_MAX_PORTS / 64)] = xrand();
			ports[A_SLOT].pending[xrand() % (FAB_MAX_PORTS / 64)] = xrand();
			break;
		case 17: { /* A configuration nobody set through the API. */
			uint32_t w = (uint32_t)(xrand() % FAB_LINK_CFG_WORDS);
			uint64_t good = l->cfg[w];

			l->cfg[w] = xrand();
			l->cfg_seq += xrand() % 4 ? 2 : 1;
			l->cfg[w] = xrand() % 2 ? good : l->cfg[w];
			l->cfg_seq += (l->cfg_seq & 1) ? 1 : 2; /* settled: read it */
			break;
		}
		case 18: /* The sender's own state on the link. */
			switch (xrand() % 4) {
			case 0: l->busy_until_ns = xrand(); break;
			case 1: l->last_due_ns = xrand() % 2 ? UINT64_MAX : xrand(); break;
			case 2: l->rng_seq = xrand(); break;
			default: l->nth_matched = (uint32_t)xrand(); break;
			}
			break;
		case 19: /* Holder words, rarely: a stolen frame is gone until a reopen. */
			if (xrand() % 8 == 0)
				meta[xrand() % nframes].holder = FAB_HOLDER(
				    xrand() % 4, xrand() % 2 ? A_SLOT : B_SLOT, (uint32_t)xrand());
			break;
		case 20: { /* The capture's switch: any snap length, or off and on. */
			uint64_t ctl0 = h->tap_ctl;

			FLIP(&h->tap_ctl, ctl0,
			     FAB_TAP_CTL(FAB_TAP_CTL_GEN(ctl0),
					 xrand() % 2 ? 0 : bad32(FAB_SLOT_BYTES)),
			     64);
			break;
		}
		case 21: { /* Capture ring positions. */
			volatile struct fab_tap_ring *t = &taps[src];
			uint64_t p = t->prod, q = t->cons;

			if (xrand() % 2)
				FLIP(&t->prod, p, p + (xrand() % 2 ? ringb + 8 : xrand() % 64),
				     256);
			else
				FLIP(&t->cons, q, q + (xrand() % 2 ? ringb : xrand()), 256);
			break;
		}
		case 22: { /* The capture's filter, and a waiting port's wake word. */
			uint32_t f0 = h->tap_flags;

			h->tap_host = (uint32_t)xrand();
			h->tap_qpn = (uint32_t)xrand();
			h->tap_opcode = (uint32_t)xrand();
			taps[src].wake = (uint32_t)xrand();
			FLIP(&h->tap_flags, f0, (uint32_t)xrand() | FAB_TAP_F_LOSSY, 64);
			break;
		}
		default: { /* Capture records: a word of a record header near the producer. */
			volatile struct fab_tap_ring *t = &taps[src];
			uint32_t off =
			    (uint32_t)((t->prod - 8 * (1 + xrand() % 64)) & (ringb - 1)) & ~7u;
			volatile uint32_t *w =
			    (volatile uint32_t *)(tapdata + (size_t)src * ringb + off);

			v = *w;
			FLIP(w, v, bad32(v), 256);
			break;
		}
		}
	}
	munmap((void *)base, (size_t)st.st_size);
	return 0;
}

/* ---- The test's side --------------------------------------------------------------- */

static struct race_ctl *ctl_page(void)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Tell the racer to stop and reap it; kill it if it does not. */
static void racer_stop(volatile struct race_ctl *ctl, pid_t pid)
{
	ctl->stop = 1;
	if (nst_wait(pid, STOP_MS) < 0)
		nst_stop(pid, STOP_MS);
}

/*
 * Run the test and its racer on two different CPUs (when there are two), so
 * that they race rather than take turns on one; *old gets the test's CPUs,
 * for pin_undo.
 */
static void pin_apart(pid_t racer, cpu_set_t *old)
{
	CPU_ZERO(old);
	if (sched_getaffinity(0, sizeof(*old), old) < 0 || CPU_COUNT(old) < 2)
		return;
	nst_pin(racer, 1);
	nst_pin(0, 0);
}

static void pin_undo(const cpu_set_t *old)
{
	if (CPU_COUNT(old) >= 2)
		sched_setaffinity(0, sizeof(*old), old);
}

static uint32_t make_frame(uint8_t *buf, uint32_t src, uint32_t dst, uint8_t opcode, uint32_t psn,
			   uint32_t payload_len, const uint8_t *payload)
{
	struct fab_pkt pkt;
	size_t len = 0;

	NST_REQUIRE_EQ(fab_pkt_init(&pkt, opcode), 0);
	pkt.src_ip = src;
	pkt.dst_ip = dst;
	pkt.udp_sport = fab_udp_sport(QPN);
	pkt.dest_qpn = QPN;
	pkt.psn = psn & FAB_MASK24;
	if (pkt.has_reth) {
		pkt.va = 0x1000;
		pkt.rkey = 0xabcd;
		pkt.dma_len = payload_len;
	}
	pkt.payload = payload;
	pkt.payload_len = payload_len;
	NST_REQUIRE_EQ(fab_pkt_encode(&pkt, buf, FAB_SLOT_BYTES, &len), 0);
	return (uint32_t)len;
}

/* What the test saw of the frames it received and captured. */
struct seen {
	const uint8_t *frames; /* the pool in the test's mapping */
	const uint8_t *tapdata;
	uint32_t ring_bytes;
	uint64_t received, intact, refused, out_of_bounds, mixed, captured, cap_out_of_bounds;
};

static void check_rx(struct seen *s, const struct fab_rx *rx)
{
	struct fab_pkt pkt;
	enum fab_wire_err why;

	s->received++;
	if (rx->idx >= NFRAMES || rx->len < 1 || rx->len > FAB_SLOT_BYTES ||
	    rx->data != s->frames + (size_t)rx->idx * FAB_SLOT_BYTES) {
		s->out_of_bounds++;
		return;
	}
	(void)((const volatile uint8_t *)rx->data)[rx->len - 1];
	if (fab_pkt_decode(rx->data, rx->len, &pkt, &why)) {
		s->refused++;
		return;
	}
	/* The ICRC covers every header: an accepted frame is the one A sent. */
	if (pkt.opcode == FAB_OP_SEND_ONLY && pkt.dest_qpn == QPN && pkt.src_ip == a_addr &&
	    pkt.dst_ip == b_addr && pkt.payload_len == PAYLOAD &&
	    pkt.payload == (const uint8_t *)rx->data + FAB_HDR_BASE)
		s->intact++;
	else
		s->mixed++;
}

static int check_cap(void *arg, const struct fab_cap_rec *r)
{
	struct seen *s = arg;
	const uint8_t *ring = s->tapdata + (size_t)r->port_slot * s->ring_bytes;

	s->captured++;
	if (r->port_slot >= MAX_PORTS || r->caplen > r->len || r->len > FAB_SLOT_BYTES ||
	    r->data < ring || r->data + r->caplen > ring + s->ring_bytes) {
		s->cap_out_of_bounds++;
		return 0;
	}
	if (r->caplen)
		(void)((const volatile uint8_t *)r->data)[r->caplen - 1];
	return 0;
}

static struct fab_port_counters counters(struct fab *fab, uint32_t addr)
{
	return nst_fab_port(fab, addr).counters;
}

/* Every kind of refusal the racer provokes has been counted. */
static bool all_refused(struct fab *fab, const struct seen *s, struct fab_cap *cap)
{
	struct fab_port_counters b = counters(fab, b_addr), a = counters(fab, a_addr);
	struct fab_cap_stats cs;

	fab_cap_get_stats(cap, &cs);
	return b.bad_ring && b.bad_index && b.bad_meta && b.stale && a.bad_config + b.bad_config &&
	       s->refused && cs.bad && s->intact > MIN_ROUNDS;
}

/* Send up to n frames from p to dst; the pool may run dry under the racer. */
static void send_some(struct fab_port *p, uint32_t src, uint32_t dst, uint32_t first, uint32_t n)
{
	static uint8_t payload[PAYLOAD];
	uint32_t i, idx, len;
	void *data;
	int rc;

	for (i = 0; i < n; i++) {
		if (fab_frame_get(p, &idx, &data))
			return;
		len = make_frame(data, src, dst, FAB_OP_SEND_ONLY, first + i, PAYLOAD, payload);
		/* -EINVAL: the racer took the frame from us (its holder word). */
		rc = fab_send(p, idx, len, dst);
		NST_CHECK_(rc == 0 || rc == -ENOBUFS || rc == -EINVAL, CU_TRUE,
			   "fab_send under the racer: %d", rc);
	}
}

static void test_ports_against_racing_writer(void)
{
	char dir[512], path[PATH_MAX];
	const uint32_t addrs[] = {a_addr, b_addr};
	const struct fab_config cfg = {
	    .max_ports = MAX_PORTS, .frames = NFRAMES, .seed = 11, .addrs = addrs, .naddrs = 2};
	volatile struct race_ctl *ctl = ctl_page();
	struct fab_port_counters ca, cb;
	struct fab_link_config def;
	struct fab_port *pa, *pb;
	struct fab_seg_hdr hdr;
	struct seen s = {0};
	struct seg_racer r;
	struct fab_cap *cap;
	struct fab_cap_stats cs;
	struct fab_rx rx;
	struct fab *fab;
	cpu_set_t cpus;
	uint64_t deadline;
	uint32_t round, i, idx;
	void *data;
	pid_t pid;
	int fd;

	NST_REQUIRE(ctl != NULL);
	snprintf(dir, sizeof(dir), "%s/ports", tmp);
	NST_REQUIRE_EQ(mkdir(dir, 0700), 0);
	NST_REQUIRE_EQ(fab_create(dir, &cfg), 0);
	snprintf(path, sizeof(path), "%s/" FAB_SEG_FILE, dir);
	/* The racer first: it must not inherit the ports' bells (their locks
	 * are the ports' ownership) or the capture's lock. */
	r = (struct seg_racer){.path = path, .ctl = ctl};
	pid = nst_fork_ready(seg_racer, &r, STOP_MS);
	NST_REQUIRE(pid > 0);
	pin_apart(pid, &cpus);
	NST_REQUIRE_EQ(fab_open(dir, &fab), 0);
	NST_REQUIRE_EQ(fab_port_open(fab, a_addr, &pa), 0);
	NST_REQUIRE_EQ(fab_port_open(fab, b_addr, &pb), 0);
	/* Lossy: the racer's positions make rings look full, and a port
	 * would wait for this thread's next read (test_capture_ring has the
	 * waiting port and a capture in another process). */
	NST_REQUIRE_EQ(
	    fab_cap_attach_cfg(
		fab, &(const struct fab_cap_config){.copy_bytes = FAB_SLOT_BYTES, .lossy = true},
		&cap),
	    0);
	/* Where the pool and the capture records lie in this process's map. */
	fd = open(path, O_RDONLY);
	NST_REQUIRE(fd >= 0);
	NST_REQUIRE_EQ(pread(fd, &hdr, sizeof(hdr), 0), sizeof(hdr));
	close(fd);
	NST_REQUIRE_EQ(fab_frame_get(pa, &idx, &data), 0);
	s.frames = (const uint8_t *)data - (size_t)idx * FAB_SLOT_BYTES;
	NST_REQUIRE_EQ(fab_frame_put(pa, idx), 0);
	s.tapdata = s.frames - hdr.frames_off + hdr.tap_off + fab_tap_data_off(hdr.max_ports);
	s.ring_bytes = hdr.tap_ring_bytes;

	deadline = nst_now_ns() + (uint64_t)RACE_MS * 1000000u;
	for (round = 0; round < MIN_ROUNDS || !all_refused(fab, &s, cap); round++) {
		if (nst_now_ns() > deadline)
			break;
		send_some(pa, a_addr, b_addr, round * BATCH, BATCH);
		if (round % 4 == 0)
			send_some(pb, b_addr, a_addr, round, 2);
		for (i = 0; i < 2 * BATCH && fab_recv(pb, &rx) == 0; i++) {
			check_rx(&s, &rx);
			fab_rx_done(pb, rx.idx);
		}
		while (fab_recv(pa, &rx) == 0)
			fab_rx_done(pa, rx.idx);
		if (fab_port_sleep_prepare(pb) == 0)
			fab_port_sleep_cancel(pb);
		(void)fab_next_due_ns(pb);
		if (round % 8 == 0)
			NST_REQUIRE_EQ(fab_cap_read(cap, check_cap, &s, NULL), 0);
		/* Frames the racer stranded come back when their port reopens. */
		if (round % 256 == 255 && nst_fab_frames_free(fab) < NFRAMES / 2) {
			fab_port_close(pb);
			NST_REQUIRE_EQ(fab_port_open(fab, b_addr, &pb), 0);
			fab_port_close(pa);
			NST_REQUIRE_EQ(fab_port_open(fab, a_addr, &pa), 0);
		}
	}
	racer_stop(ctl, pid);
	pin_undo(&cpus);
	ca = counters(fab, a_addr);
	cb = counters(fab, b_addr);
	fab_cap_get_stats(cap, &cs);
	printf("\n    %u rounds, %llu racer actions: B received %llu, intact %llu, refused by the "
	       "decoder %llu; bad_ring %llu bad_index %llu bad_meta %llu stale %llu reclaimed %llu "
	       "bad_config %llu; capture read %llu bad %llu",
	       round, (unsigned long long)ctl->actions, (unsigned long long)s.received,
	       (unsigned long long)s.intact, (unsigned long long)s.refused,
	       (unsigned long long)cb.bad_ring, (unsigned long long)cb.bad_index,
	       (unsigned long long)cb.bad_meta, (unsigned long long)cb.stale,
	       (unsigned long long)cb.reclaimed,
	       (unsigned long long)(ca.bad_config + cb.bad_config), (unsigned long long)cs.read,
	       (unsigned long long)cs.bad);
	/* Nothing handed out lay outside the pool or the capture's ring, and no
	 * accepted frame mixed two versions of its headers. */
	NST_EQ(s.out_of_bounds, 0);
	NST_EQ(s.cap_out_of_bounds, 0);
	NST_EQ(s.mixed, 0);
	/* The racer was met, and every kind of its damage refused. */
	NST_TRUE(cb.bad_ring > 0);
	NST_TRUE(cb.bad_index > 0);
	NST_TRUE(cb.bad_meta > 0);
	NST_TRUE(cb.stale > 0);
	NST_TRUE(ca.bad_config + cb.bad_config > 0);
	NST_TRUE(s.refused > 0);
	NST_TRUE(cs.bad > 0);
	/* And the ports kept working under it. */
	NST_TRUE(s.intact > MIN_ROUNDS);

	/* With the racer gone and the ports reopened, frames arrive intact. */
	fab_link_config_default(&def);
	NST_REQUIRE_EQ(fab_link_set(fab, a_addr, b_addr, &def, FAB_LF_ALL & ~FAB_LF_SEED), 0);
	fab_port_close(pb);
	NST_REQUIRE_EQ(fab_port_open(fab, b_addr, &pb), 0);
	fab_port_close(pa);
	NST_REQUIRE_EQ(fab_port_open(fab, a_addr, &pa), 0);
	fab_cap_detach(cap);
	memset(&s.received, 0, sizeof(s) - offsetof(struct seen, received));
	send_some(pa, a_addr, b_addr, 0, BATCH);
	deadline = nst_now_ns() + (uint64_t)STOP_MS * 1000000u;
	while (s.received < BATCH && nst_now_ns() < deadline) {
		if (fab_recv(pb, &rx) == 0) {
			check_rx(&s, &rx);
			fab_rx_done(pb, rx.idx);
		} else {
			sched_yield();
		}
	}
	NST_EQ(s.received, BATCH);
	NST_EQ(s.intact, BATCH);
	fab_port_close(pa);
	fab_port_close(pb);
	fab_close(fab);
	munmap((void *)ctl, 4096);
}

/* ---- The decoder against a racing writer ----------------------------------------- */

/* The frame the decoder reads and its two versions, shared with the racer. */
struct frame_race {
	struct race_ctl ctl;
	uint32_t len, ndiff;
	uint16_t diff[64]; /* offsets at which the versions differ */
	uint8_t v[2][FAB_SLOT_BYTES];
	uint8_t frame[FAB_SLOT_BYTES];
};

/* Write the differing bytes of one version, then of the other, and so on. */
static int frame_racer(void *arg, int ready_fd)
{
	struct frame_race *fr = arg;
	volatile struct race_ctl *ctl = &fr->ctl;
	volatile uint8_t *frame = fr->frame;
	uint64_t deadline = nst_now_ns() + (uint64_t)RACER_MAX_MS * 1000000u;
	uint32_t k, i;
	char c = 1;

	if (racer_start(ctl, 0x13198a2e03707344ull) || write(ready_fd, &c, 1) != 1)
		return 1;
	for (k = 0; !racer_done(ctl, deadline); k++) {
		for (i = 0; i < fr->ndiff; i++)
			frame[fr->diff[i]] = fr->v[k & 1][fr->diff[i]];
		ctl->actions++;
	}
	return 0;
}

/* The fields of a decoded packet that the headers decide. */
static bool same_pkt(const struct fab_pkt *x, const struct fab_pkt *y)
{
	return x->opcode == y->opcode && x->psn == y->psn && x->dest_qpn == y->dest_qpn &&
	       x->has_reth == y->has_reth && x->va == y->va && x->rkey == y->rkey &&
	       x->dma_len == y->dma_len && x->pad == y->pad && x->payload == y->payload &&
	       x->payload_len == y->payload_len && x->src_ip == y->src_ip && x->dst_ip == y->dst_ip;
}

static void race_decoder(uint32_t payload_len)
{
	struct frame_race *fr;
	struct fab_pkt want[2], got;
	enum fab_wire_err why;
	uint64_t seen[2] = {0, 0}, refused = 0, mixed = 0, decodes = 0, deadline;
	uint8_t reth_payload[FAB_MTU];
	uint32_t len0, len1, i;
	cpu_set_t cpus;
	pid_t pid;

	fr = mmap(NULL, sizeof(*fr), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	NST_REQUIRE(fr != MAP_FAILED);
	/*
	 * Version 0: RDMA WRITE Only (a RETH, then zeros).  Version 1: SEND Only
	 * of the same length whose payload starts with version 0's RETH bytes.
	 * They differ in the opcode, the PSN and the ICRC alone, so a decoder
	 * that read the opcode twice could mix them without noticing.
	 */
	memset(reth_payload, 0, sizeof(reth_payload));
	len0 = make_frame(fr->v[0], a_addr, b_addr, FAB_OP_RDMA_WRITE_ONLY, 100, payload_len,
			  reth_payload);
	memcpy(reth_payload, fr->v[0] + FAB_HDR_BASE, FAB_RETH_LEN);
	len1 = make_frame(fr->v[1], a_addr, b_addr, FAB_OP_SEND_ONLY, 200,
			  payload_len + FAB_RETH_LEN, reth_payload);
	NST_REQUIRE_EQ(len0, len1);
	fr->len = len0;
	for (i = 0; i < fr->len; i++)
		if (fr->v[0][i] != fr->v[1][i] && fr->ndiff < 64)
			fr->diff[fr->ndiff++] = (uint16_t)i;
	NST_REQUIRE(fr->ndiff >= 3 && fr->ndiff <= 8);
	for (i = 0; i < 2; i++) {
		memcpy(fr->frame, fr->v[i], fr->len);
		NST_REQUIRE_EQ(fab_pkt_decode(fr->frame, fr->len, &want[i], &why), 0);
	}
	pid = nst_fork_ready(frame_racer, fr, STOP_MS);
	NST_REQUIRE(pid > 0);
	pin_apart(pid, &cpus);
	/* Until the racer was met often enough: both versions read, and
	 * MIN_OVERLAPS decodes refused because a rewrite fell between their
	 * reads (where a decoder that reads a header twice would mix). */
	deadline = nst_now_ns() + (uint64_t)RACE_MS * 1000000u;
	while ((decodes < MIN_DECODES || !seen[0] || !seen[1] || refused < MIN_OVERLAPS) &&
	       nst_now_ns() < deadline) {
		for (i = 0; i < 64; i++, decodes++) {
			if (fab_pkt_decode(fr->frame, fr->len, &got, &why))
				refused++;
			else if (same_pkt(&got, &want[0]))
				seen[0]++;
			else if (same_pkt(&got, &want[1]))
				seen[1]++;
			else
				mixed++;
		}
	}
	racer_stop(&fr->ctl, pid);
	pin_undo(&cpus);
	printf("\n    %u-byte frames, %llu decodes against %llu rewrites: version 0 %llu, "
	       "version 1 %llu, refused %llu, mixed %llu",
	       fr->len, (unsigned long long)decodes, (unsigned long long)fr->ctl.actions,
	       (unsigned long long)seen[0], (unsigned long long)seen[1],
	       (unsigned long long)refused, (unsigned long long)mixed);
	NST_EQ(mixed, 0);
	/* The racer was met: both versions were read, and torn ones. */
	NST_TRUE(seen[0] > 0);
	NST_TRUE(seen[1] > 0);
	NST_TRUE(refused > 0);
	munmap(fr, sizeof(*fr));
}

static void test_decoder_against_racing_writer_short(void)
{
	race_decoder(16);
}

static void test_decoder_against_racing_writer_long(void)
{
	race_decoder(FAB_MTU - FAB_RETH_LEN);
}

/*
 * The connection manager's decoder reads the MAD, a frame's payload, where
 * it lies: the racer flips the MAD's attribute ID between an RTU's and an
 * unknown one.  Every message accepted must be the RTU.
 */
#define CM_DECODES 200000u

static void test_cm_decoder_against_racing_writer(void)
{
	const size_t attr = FAB_HDR_BASE + FAB_DETH_LEN + offsetof(struct fab_mad_hdr, attr_id);
	uint64_t rtu = 0, refused = 0, mixed = 0, decodes = 0, deadline;
	struct frame_race *fr;
	struct fab_cm_msg m, got;
	enum fab_cm_err why;
	enum fab_wire_err wwhy;
	struct fab_pkt pkt;
	cpu_set_t cpus;
	size_t len;
	pid_t pid;

	fr = mmap(NULL, sizeof(*fr), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	NST_REQUIRE(fr != MAP_FAILED);
	NST_REQUIRE_EQ(fab_cm_init(&m, FAB_CM_RTU), 0);
	m.tid = 0x1234;
	m.src_ip = a_addr;
	m.dst_ip = b_addr;
	m.local_comm_id = 7;
	m.remote_comm_id = 9;
	NST_REQUIRE_EQ(fab_cm_frame(&m, 1, fr->v[0], FAB_SLOT_BYTES, &len), 0);
	memcpy(fr->v[1], fr->v[0], len);
	fab_put16(fr->v[1] + attr, 0x0fff); /* no CM message has this ID */
	fr->len = (uint32_t)len;
	fr->diff[fr->ndiff++] = (uint16_t)attr;
	fr->diff[fr->ndiff++] = (uint16_t)(attr + 1);
	memcpy(fr->frame, fr->v[0], len);
	/* The packet is decoded once; its payload points into the frame. */
	NST_REQUIRE_EQ(fab_pkt_decode(fr->frame, len, &pkt, &wwhy), 0);
	pid = nst_fork_ready(frame_racer, fr, STOP_MS);
	NST_REQUIRE(pid > 0);
	pin_apart(pid, &cpus);
	deadline = nst_now_ns() + (uint64_t)RACE_MS * 1000000u;
	while ((decodes < CM_DECODES || !rtu || !refused) && nst_now_ns() < deadline) {
		for (uint32_t i = 0; i < 64; i++, decodes++) {
			if (fab_cm_decode(&pkt, &got, &why))
				refused++;
			else if (got.type == FAB_CM_RTU && got.local_comm_id == 7 &&
				 got.remote_comm_id == 9)
				rtu++;
			else
				mixed++;
		}
	}
	racer_stop(&fr->ctl, pid);
	pin_undo(&cpus);
	printf("\n    %llu CM decodes against %llu rewrites: RTU %llu, refused %llu, mixed %llu",
	       (unsigned long long)decodes, (unsigned long long)fr->ctl.actions,
	       (unsigned long long)rtu, (unsigned long long)refused, (unsigned long long)mixed);
	NST_EQ(mixed, 0);
	NST_TRUE(rtu > 0);
	NST_TRUE(refused > 0);
	munmap(fr, sizeof(*fr));
}

/* ---- Suite ------------------------------------------------------------------------- */

static int suite_init(void)
{
	if (nst_tmpdir(tmp, sizeof(tmp), "fabrace"))
		return -1;
	fab_addr_parse(A_ADDR, &a_addr);
	fab_addr_parse(B_ADDR, &b_addr);
	return 0;
}

static int suite_clean(void)
{
	nst_done_with_dir(tmp);
	return 0;
}

static const struct nst_test tests[] = {
    {"decoder_against_racing_writer_short", test_decoder_against_racing_writer_short},
    {"decoder_against_racing_writer_long", test_decoder_against_racing_writer_long},
    {"cm_decoder_against_racing_writer", test_cm_decoder_against_racing_writer},
    {"ports_against_racing_writer", test_ports_against_racing_writer},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	return nst_main(argc, argv, "fabric_race", tests, suite_init, suite_clean);
}

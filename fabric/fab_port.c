/*
 * Ports: opening and reclaiming, the frame pool, sending through the link
 * model, pulling rings into the delivery heap, and the sleep/wake handshake
 * (fab.h).
 *
 * Who writes what.  The sender fills a frame's metadata, stores its holder
 * word (in flight to the destination's slot and generation) with release,
 * writes the ring slot and publishes prod with release.  The receiver reads
 * prod, then takes the frame with a compare-and-swap of the holder word (in
 * flight to me -> held by me, acquire), and only then reads the metadata,
 * which it validates before use.  The receiver alone writes cons.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fab_addr.h"
#include "fab_capture_priv.h"
#include "fab_priv.h"

/* A frame due further ahead than this was not scheduled by a link model
 * (the longest legitimate wait is a few FAB_LINK_MAX_NS). */
#define DUE_MAX_AHEAD_NS (64ull * 1000000000u)
/* Every this many fab_recv calls, every ring is looked at, not only the
 * ones the pending bitmap names. */
#define FULL_SCAN_EVERY 1024u

uint64_t fab_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t holder_get(const struct fab *fab, uint32_t idx)
{
	return __atomic_load_n(&fab->meta[idx].holder, __ATOMIC_ACQUIRE);
}

static bool holds(const struct fab_port *p, uint32_t idx)
{
	return idx < p->fab->nframes && holder_get(p->fab, idx) == p->holder;
}

/* Free a frame this port holds; release: our reads of it come first. */
static void release(struct fab_port *p, uint32_t idx)
{
	__atomic_store_n(&p->fab->meta[idx].holder, 0, __ATOMIC_RELEASE);
}

/* Port counters: the owner is their only writer. */
#define COUNT(p, name) fab_count(&(p)->seg->counters.name, 1)

/* ---- Delivery heap (private): min-heap on (due_ns, order) --------------------- */

static bool heap_before(const struct fab_heap_ent *a, const struct fab_heap_ent *b)
{
	return a->due_ns < b->due_ns || (a->due_ns == b->due_ns && a->order < b->order);
}

static void heap_push(struct fab_port *p, const struct fab_heap_ent *e)
{
	struct fab_heap_ent *h = p->heap;
	uint32_t i = p->heap_n++, up;

	while (i > 0) {
		up = (i - 1) / 2;
		if (!heap_before(e, &h[up]))
			break;
		h[i] = h[up];
		i = up;
	}
	h[i] = *e;
}

static void heap_pop(struct fab_port *p, struct fab_heap_ent *out)
{
	struct fab_heap_ent *h = p->heap, last;
	uint32_t i = 0, c, n;

	*out = h[0];
	n = --p->heap_n;
	if (!n)
		return;
	last = h[n];
	for (;;) {
		c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && heap_before(&h[c + 1], &h[c]))
			c++;
		if (!heap_before(&h[c], &last))
			break;
		h[i] = h[c];
		i = c;
	}
	h[i] = last;
}

/*
 * Frames waiting for delivery: a queue of the frames that arrived in
 * (due_ns, order) order, which without latency rules is nearly all of them,
 * and the heap for the others.  The earliest of the two heads is delivered
 * first, which is the heap's order with a push and a pop of the heap saved
 * for most frames (the sift over 48-byte entries was 5% of a receiver's
 * time per frame).
 */
static uint32_t waiting(const struct fab_port *p)
{
	return p->heap_n + p->queue_n;
}

static void wait_push(struct fab_port *p, const struct fab_heap_ent *e)
{
	uint32_t cap = p->fab->nframes;

	if (p->queue_n == 0 || !heap_before(e, &p->queue[(p->queue_head + p->queue_n - 1) % cap])) {
		p->queue[(p->queue_head + p->queue_n) % cap] = *e;
		p->queue_n++;
	} else {
		heap_push(p, e);
	}
}

/* The next frame to deliver, NULL if none waits. */
static const struct fab_heap_ent *wait_first(const struct fab_port *p)
{
	const struct fab_heap_ent *q = p->queue_n ? &p->queue[p->queue_head] : NULL;

	if (!p->heap_n)
		return q;
	return q && heap_before(q, &p->heap[0]) ? q : &p->heap[0];
}

static void wait_pop(struct fab_port *p, struct fab_heap_ent *out)
{
	if (p->queue_n && (!p->heap_n || heap_before(&p->queue[p->queue_head], &p->heap[0]))) {
		*out = p->queue[p->queue_head];
		p->queue_head = (p->queue_head + 1) % p->fab->nframes;
		p->queue_n--;
		return;
	}
	heap_pop(p, out);
}

/* ---- Tap ------------------------------------------------------------------------- */

/*
 * A frame for the taps: the port's callback, and the port's capture ring
 * while a capture is attached (fab_capture.h).  rx: the receiver drops it
 * on delivery.  Without either, one load of the header's tap_ctl.
 */
static void tap(const struct fab_port *p, uint32_t idx, uint32_t len, uint32_t src, uint32_t dst,
		uint32_t marks, uint64_t sent_ns, uint64_t due_ns, uint64_t link_seq, bool rx)
{
	uint64_t ctl = fab_tap_ctl(p->fab);
	struct fab_tap_frame f;

	if (!p->tap && !FAB_TAP_CTL_SNAP(ctl))
		return;
	f = (struct fab_tap_frame){
	    .data = fab_frame_at(p->fab, idx),
	    .len = len,
	    .idx = idx,
	    .src = src,
	    .dst = dst,
	    .marks = marks,
	    .sent_ns = sent_ns,
	    .due_ns = due_ns,
	    .link_seq = link_seq,
	};
	if (FAB_TAP_CTL_SNAP(ctl))
		fab_tap_ring_put(p->fab, p->slot, ctl, &f, rx);
	if (p->tap)
		p->tap(p->tap_arg, &f);
}

void fab_port_set_tap(struct fab_port *p, fab_tap_fn fn, void *arg)
{
	p->tap = fn;
	p->tap_arg = arg;
}

/* ---- Receiving: rings -> heap -------------------------------------------------------- */

/* A frame its link did not delay: due the moment it was sent, so due now. */
static bool due_at_send(const struct fab_heap_ent *e)
{
	return e->due_ns == e->sent_ns;
}

/* Whether e is due at now. */
static bool due_by(const struct fab_heap_ent *e, uint64_t now)
{
	return e->due_ns <= now || due_at_send(e);
}

/*
 * Move every frame published in the ring from slot s into the heap.  The
 * ring, the frame indices and the metadata are validated; the return value
 * is the number of entries consumed.
 *
 * Any process that maps the segment can write the producer index, the ring
 * entries and a frame's metadata while this runs, also after the frame was
 * taken: each is read once into a local (FAB_READ_ONCE), the local is
 * checked, and only the local is used.
 */
static uint32_t pull_ring(struct fab_port *p, uint32_t s, uint64_t *now)
{
	struct fab *fab = p->fab;
	struct fab_seg_link *l = fab_link_at(fab, s, p->slot);
	const uint32_t *ring = fab_ring_at(fab, s, p->slot);
	const uint64_t inflight = FAB_HOLDER(FAB_HOLD_INFLIGHT, p->slot, p->gen);
	uint32_t cons = FAB_READ_ONCE(l->cons);
	/* seq_cst: the other half of the sender's fence (fab.h, "Wake-ups"). */
	uint32_t prod = __atomic_load_n(&l->prod, __ATOMIC_SEQ_CST);
	uint32_t n = prod - cons, idx, mask = fab->ring_depth - 1, src_slot, ring_pos;
	struct fab_seg_frame *m;
	struct fab_heap_ent e;
	uint64_t expect;

	if (n == 0)
		return 0;
	if (n > fab->ring_depth) {
		/* Impossible indices (a hostile or broken writer): start over at
		 * prod; the frames in between stay held for our generation. */
		COUNT(p, bad_ring);
		__atomic_store_n(&l->cons, prod, __ATOMIC_RELEASE);
		return 0;
	}
	for (; cons != prod; cons++) {
		idx = FAB_READ_ONCE(ring[cons & mask]);
		if (idx >= fab->nframes) {
			COUNT(p, bad_index);
			continue;
		}
		m = &fab->meta[idx];
		expect = inflight;
		if (!__atomic_compare_exchange_n(&m->holder, &expect, p->holder, false,
						 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
			/* In flight to an earlier generation of this port: ours to
			 * free.  Anything else is not ours to touch. */
			if (FAB_HOLDER_STATE(expect) == FAB_HOLD_INFLIGHT &&
			    FAB_HOLDER_SLOT(expect) == p->slot &&
			    FAB_HOLDER_GEN(expect) != p->gen &&
			    __atomic_compare_exchange_n(&m->holder, &expect, 0, false,
							__ATOMIC_RELEASE, __ATOMIC_RELAXED))
				COUNT(p, reclaimed);
			else
				COUNT(p, stale);
			continue;
		}
		/* Ours now: copy the metadata out, each field once, then judge
		 * the copy.  Nothing below reads m again. */
		e.due_ns = FAB_READ_ONCE(m->due_ns);
		e.sent_ns = FAB_READ_ONCE(m->sent_ns);
		e.link_seq = FAB_READ_ONCE(m->link_seq);
		e.len = FAB_READ_ONCE(m->len);
		e.src_addr = FAB_READ_ONCE(m->src_addr);
		e.marks = (uint16_t)(FAB_READ_ONCE(m->marks) & FAB_MARKS_DELIVERED);
		src_slot = FAB_READ_ONCE(m->src_slot);
		ring_pos = FAB_READ_ONCE(m->ring_pos);
		e.idx = idx;
		if (src_slot != s || ring_pos != cons) {
			/* An index left in the ring from before, naming a frame that
			 * is in flight to us from elsewhere: give it back untouched. */
			__atomic_store_n(&m->holder, inflight, __ATOMIC_RELEASE);
			COUNT(p, stale);
			continue;
		}
		/* The ring's own slot, not the metadata's: it indexes our arrays. */
		e.src_slot = (uint16_t)s;
		/* A frame due when it was sent needs no clock reading. */
		if (!*now && !due_at_send(&e))
			*now = fab_now_ns();
		if (e.len == 0 || e.len > FAB_SLOT_BYTES ||
		    e.src_addr != FAB_READ_ONCE(fab->ports[s].addr) ||
		    (!due_at_send(&e) && e.due_ns > *now && e.due_ns - *now > DUE_MAX_AHEAD_NS)) {
			COUNT(p, bad_meta);
			release(p, idx);
			continue;
		}
		if (waiting(p) == fab->nframes) {
			COUNT(p, heap_full);
			release(p, idx);
			continue;
		}
		e.order = p->order++;
		wait_push(p, &e);
	}
	__atomic_store_n(&l->cons, cons, __ATOMIC_RELEASE);
	return n;
}

/* Pull the rings the pending bitmap names. */
static uint32_t pull_pending(struct fab_port *p, uint64_t *now)
{
	uint64_t *words = p->seg->pending, bits;
	uint32_t w, s, n = 0;

	for (w = 0; w < (p->fab->max_ports + 63) / 64; w++) {
		if (!__atomic_load_n(&words[w], __ATOMIC_RELAXED))
			continue;
		bits = __atomic_exchange_n(&words[w], 0, __ATOMIC_SEQ_CST);
		while (bits) {
			s = w * 64 + (uint32_t)__builtin_ctzll(bits);
			bits &= bits - 1;
			if (s < p->fab->max_ports)
				n += pull_ring(p, s, now);
		}
	}
	return n;
}

/* Pull every ring of a bound source slot. */
static uint32_t pull_all(struct fab_port *p, uint64_t *now)
{
	uint32_t s, n = 0;

	for (s = 0; s < p->fab->max_ports; s++)
		if (__atomic_load_n(&p->fab->ports[s].addr, __ATOMIC_RELAXED))
			n += pull_ring(p, s, now);
	return n;
}

int fab_recv(struct fab_port *p, struct fab_rx *rx)
{
	const struct fab_heap_ent *first;
	struct fab_link_view *v;
	struct fab_heap_ent e;
	uint64_t now = 0;

	if (p->scan_all || ++p->recv_calls % FULL_SCAN_EVERY == 0) {
		p->scan_all = false;
		pull_all(p, &now);
	} else {
		pull_pending(p, &now);
	}
	first = wait_first(p);
	if (!first)
		return -EAGAIN;
	/* A clock read costs more than the rest of a delivery: read it again
	 * only when the next frame is not due by the last reading, and not for
	 * a frame that was due when it was sent (a link that adds no delay). */
	if (!due_by(first, p->clock))
		p->clock = fab_now_ns();
	now = p->clock;
	while ((first = wait_first(p)) && due_by(first, now)) {
		wait_pop(p, &e);
		v = &p->rx[e.src_slot];
		if (!fab_link_view_refresh(p->fab, fab_link_at(p->fab, e.src_slot, p->slot),
					   e.src_slot, p->slot, v))
			COUNT(p, bad_config);
		if (v->cfg.flags & FAB_LINK_DOWN) {
			fab_count(&fab_link_at(p->fab, e.src_slot, p->slot)->rx.dropped_down_rx, 1);
			tap(p, e.idx, e.len, e.src_addr, p->addr, e.marks | FAB_MARK_DROP_DOWN,
			    e.sent_ns, e.due_ns, e.link_seq, true);
			release(p, e.idx);
			continue;
		}
		fab_count(&fab_link_at(p->fab, e.src_slot, p->slot)->rx.delivered, 1);
		fab_count(&fab_link_at(p->fab, e.src_slot, p->slot)->rx.delivered_bytes, e.len);
		*rx = (struct fab_rx){
		    .idx = e.idx,
		    .len = e.len,
		    .data = fab_frame_at(p->fab, e.idx),
		    .src = e.src_addr,
		    .marks = e.marks,
		    .due_ns = e.due_ns,
		    .sent_ns = e.sent_ns,
		    .link_seq = e.link_seq,
		};
		return 0;
	}
	return -EAGAIN;
}

uint64_t fab_next_due_ns(struct fab_port *p)
{
	const struct fab_heap_ent *first;
	uint64_t now = 0;

	pull_pending(p, &now);
	first = wait_first(p);
	return first ? first->due_ns : UINT64_MAX;
}

/* ---- Sleeping and waking -------------------------------------------------------- */

int fab_port_sleep_prepare(struct fab_port *p)
{
	const struct fab_heap_ent *first;
	uint64_t now = 0;

	__atomic_store_n(&p->seg->sleeping, 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (pull_all(p, &now) || ((first = wait_first(p)) && first->due_ns <= fab_now_ns())) {
		__atomic_store_n(&p->seg->sleeping, 0, __ATOMIC_RELAXED);
		return -EAGAIN;
	}
	return 0;
}

static void drain_bell(struct fab_port *p)
{
	char buf[256];
	ssize_t n;

	while ((n = read(p->bell_fd, buf, sizeof(buf))) > 0)
		p->wakeups += (uint64_t)n;
}

void fab_port_sleep_cancel(struct fab_port *p)
{
	__atomic_store_n(&p->seg->sleeping, 0, __ATOMIC_RELAXED);
	drain_bell(p);
}

uint64_t fab_port_wakeups(const struct fab_port *p)
{
	return p->wakeups;
}

/* Write one byte to the bell of slot d.  Senders open bells read-write: a
 * FIFO with a reader never raises SIGPIPE, even when its owner is dead. */
static void ring_bell(struct fab_port *p, uint32_t d)
{
	struct fab_tx *t = &p->tx[d];
	uint32_t gen = __atomic_load_n(&p->fab->ports[d].gen, __ATOMIC_RELAXED);
	char path[PATH_MAX];
	const char one = 1;
	struct stat st;

	if (t->bell_fd < 0 || t->bell_gen != gen) {
		if (t->bell_fd >= 0)
			close(t->bell_fd);
		t->bell_fd = -1;
		t->bell_gen = gen;
		if (fab_bell_path(path, sizeof(path), p->fab->dir,
				  __atomic_load_n(&p->fab->ports[d].addr, __ATOMIC_RELAXED)))
			return;
		t->bell_fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
		if (t->bell_fd >= 0 && (fstat(t->bell_fd, &st) < 0 || !S_ISFIFO(st.st_mode))) {
			close(t->bell_fd);
			t->bell_fd = -1;
		}
	}
	/* A full FIFO (EAGAIN) already holds a wake-up. */
	if (t->bell_fd >= 0 && write(t->bell_fd, &one, 1) < 0)
		return;
}

/* After publishing to slot d: flag the ring in d's pending bitmap and ring
 * d's bell if it sleeps.  The fence pairs with fab_port_sleep_prepare's. */
static void kick(struct fab_port *p, uint32_t d)
{
	struct fab_seg_port *dp = &p->fab->ports[d];
	uint64_t *word = &dp->pending[p->slot / 64], bit = 1ull << (p->slot % 64);

	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!(__atomic_load_n(word, __ATOMIC_RELAXED) & bit))
		__atomic_fetch_or(word, bit, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&dp->sleeping, __ATOMIC_RELAXED) &&
	    __atomic_exchange_n(&dp->sleeping, 0, __ATOMIC_SEQ_CST))
		ring_bell(p, d);
}

/* ---- Frames ---------------------------------------------------------------------------- */

/* Take frame i if it is free. */
static bool frame_take(struct fab_port *p, uint32_t i)
{
	uint64_t expect = 0;

	return __atomic_load_n(&p->fab->meta[i].holder, __ATOMIC_RELAXED) == 0 &&
	       __atomic_compare_exchange_n(&p->fab->meta[i].holder, &expect, p->holder, false,
					   __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

/*
 * Frames come from a span of FAB_HOT_FRAMES of the pool while it has a free
 * one, so that the frames a busy port writes are the ones it wrote a moment
 * ago and are still in the CPU's caches (cycling through the whole pool
 * halved bandwidth: every frame was a cache miss on both sides).  Frames
 * come back about in the order they were taken, so the first probe after
 * the span's cursor nearly always succeeds.  When the span is all in use
 * the next SPILL_GETS gets scan the whole pool.
 */
#define FAB_HOT_FRAMES 512u
#define SPILL_GETS 64u

int fab_frame_get(struct fab_port *p, uint32_t *idx, void **data)
{
	struct fab *fab = p->fab;
	uint32_t span = fab->nframes < FAB_HOT_FRAMES ? fab->nframes : FAB_HOT_FRAMES;
	uint32_t i, k;

	if (p->spill) {
		p->spill--;
	} else {
		for (k = 0, i = p->hot_cursor; k < span; k++) {
			uint32_t f = p->hot_base + i < fab->nframes
					 ? p->hot_base + i
					 : p->hot_base + i - fab->nframes;

			i = i + 1 == span ? 0 : i + 1;
			if (frame_take(p, f)) {
				p->hot_cursor = i;
				*idx = f;
				goto found;
			}
		}
		p->spill = SPILL_GETS;
	}
	for (k = 0, i = p->cursor; k < fab->nframes; k++) {
		if (frame_take(p, i)) {
			p->cursor = i + 1 == fab->nframes ? 0 : i + 1;
			*idx = i;
			goto found;
		}
		i = i + 1 == fab->nframes ? 0 : i + 1;
	}
	return -ENOBUFS;
found:
	if (data)
		*data = fab_frame_at(fab, *idx);
	return 0;
}

int fab_frame_put(struct fab_port *p, uint32_t idx)
{
	if (!holds(p, idx))
		return -EINVAL;
	release(p, idx);
	return 0;
}

int fab_rx_done(struct fab_port *p, uint32_t idx)
{
	return fab_frame_put(p, idx);
}

void *fab_frame_data(struct fab_port *p, uint32_t idx)
{
	return holds(p, idx) ? fab_frame_at(p->fab, idx) : NULL;
}

/* ---- Sending ---------------------------------------------------------------------------- */

/*
 * Room for need more entries in the ring of link l, whose producer index
 * fab_send read once into prod?  The consumer index is read only when the
 * copy we have of it says the ring is full.  Both indices are the segment's
 * (so that a port reopened at either end finds the ring where the other end
 * left it) and a hostile process may write either: a bad value makes the
 * ring look full or empty, and the entry written still lies inside the ring.
 */
static bool ring_room(const struct fab *fab, struct fab_tx *t, const struct fab_seg_link *l,
		      uint32_t prod, uint32_t need)
{
	if (prod - t->cons_seen <= fab->ring_depth - need)
		return true;
	t->cons_seen = __atomic_load_n(&l->cons, __ATOMIC_ACQUIRE);
	return prod - t->cons_seen <= fab->ring_depth - need;
}

struct send_ctx {
	uint32_t d, dgen, dst;
	struct fab_seg_link *l;
	uint64_t now;
};

/* Publish frame idx at ring position pos (the producer index fab_send read,
 * plus one for a duplicate). */
static void publish(struct fab_port *p, const struct send_ctx *sc, uint32_t pos, uint32_t idx,
		    uint32_t len, const struct fab_verdict *v, uint32_t marks)
{
	struct fab *fab = p->fab;
	struct fab_seg_frame *m = &fab->meta[idx];
	uint32_t *ring = fab_ring_at(fab, p->slot, sc->d);

	m->due_ns = v->due_ns;
	m->sent_ns = sc->now;
	m->link_seq = v->link_seq;
	m->len = len;
	m->src_addr = p->addr;
	m->dst_addr = sc->dst;
	m->ring_pos = pos;
	m->src_slot = (uint16_t)p->slot;
	m->dst_slot = (uint16_t)sc->d;
	m->marks = marks;
	tap(p, idx, len, p->addr, sc->dst, marks, sc->now, v->due_ns, v->link_seq, false);
	__atomic_store_n(&m->holder, FAB_HOLDER(FAB_HOLD_INFLIGHT, sc->d, sc->dgen),
			 __ATOMIC_RELEASE);
	__atomic_store_n(&ring[pos & (fab->ring_depth - 1)], idx, __ATOMIC_RELAXED);
	__atomic_store_n(&sc->l->prod, pos + 1, __ATOMIC_RELEASE);
}

/* The owner of slot d is gone (its pid no longer exists). */
static bool owner_dead(const struct fab *fab, uint32_t d)
{
	uint32_t pid = __atomic_load_n(&fab->ports[d].owner_pid, __ATOMIC_RELAXED);

	return pid && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

#define FAB_KICK_EVERY 8u

/* Tell d of its frames now, or at fab_port_release_kicks. */
static void kick_or_hold(struct fab_port *p, uint32_t d)
{
	/* Not too many at a time either: a receiver that could have been
	 * working on the first frames would wait for the last. */
	if (p->holding && ++p->held_frames % FAB_KICK_EVERY == 0) {
		fab_port_release_kicks(p);
		p->holding = true;
	}
	if (p->holding) {
		for (uint32_t i = 0; i < p->nheld; i++)
			if (p->held[i] == d)
				return;
		if (p->nheld < FAB_HELD_MAX) {
			p->held[p->nheld++] = d;
			return;
		}
	}
	kick(p, d);
}

void fab_port_hold_kicks(struct fab_port *p)
{
	p->holding = true;
	p->held_frames = 0;
	p->clock_sends = 0;
}

void fab_port_release_kicks(struct fab_port *p)
{
	p->holding = false;
	for (uint32_t i = 0; i < p->nheld; i++)
		kick(p, p->held[i]);
	p->nheld = 0;
}

#define FAB_CLOCK_EVERY 8u

/*
 * The time a frame leaves.  Within a burst (between fab_port_hold_kicks and
 * fab_port_release_kicks) one reading serves FAB_CLOCK_EVERY frames, a few
 * microseconds at most: a reading costs more than the rest of a send.  A
 * link that spaces or delays frames, and a capture, get a reading for each.
 */
static uint64_t send_clock(struct fab_port *p, const struct fab_link_config *c)
{
	if (!p->holding || p->clock_sends++ % FAB_CLOCK_EVERY == 0 || c->rate_mbps ||
	    c->latency_ns || c->jitter_ns || c->delay_ppb || c->reorder_ppb || p->tap ||
	    FAB_TAP_CTL_SNAP(fab_tap_ctl(p->fab)))
		p->clock = fab_now_ns();
	return p->clock;
}

int fab_send(struct fab_port *p, uint32_t idx, uint32_t len, uint32_t dst)
{
	struct fab *fab = p->fab;
	struct fab_verdict v;
	struct send_ctx sc;
	struct fab_tx *t;
	uint32_t dup_idx, prod;
	uint8_t *data;
	bool dup = false;
	int d;

	if (!holds(p, idx))
		return -EINVAL;
	if (len == 0 || len > FAB_SLOT_BYTES) {
		release(p, idx);
		return len ? -EMSGSIZE : -EINVAL;
	}
	d = fab_slot_find(fab, dst);
	if (d < 0 || __atomic_load_n(&fab->ports[d].state, __ATOMIC_ACQUIRE) != FAB_PORT_OPEN) {
		release(p, idx);
		return -EHOSTUNREACH;
	}
	sc.d = (uint32_t)d;
	sc.dst = dst;
	sc.dgen = __atomic_load_n(&fab->ports[d].gen, __ATOMIC_ACQUIRE);
	sc.l = fab_link_at(fab, p->slot, sc.d);
	t = &p->tx[d];
	if (!fab_link_view_refresh(fab, sc.l, p->slot, sc.d, &t->view))
		COUNT(p, bad_config);
	sc.now = send_clock(p, &t->view.cfg);
	data = fab_frame_at(fab, idx);
	fab_link_decide(sc.l, &t->view, data, len, sc.now, &v);
	if (v.marks & FAB_MARKS_DROP) {
		tap(p, idx, len, p->addr, dst, v.marks, sc.now, 0, v.link_seq, false);
		release(p, idx);
		return 0;
	}
	/* Read once: the room is judged and the frame published from this copy. */
	prod = FAB_READ_ONCE(sc.l->prod);
	if (!ring_room(fab, t, sc.l, prod, 1)) {
		fab_count(&sc.l->tx.dropped_full, 1);
		tap(p, idx, len, p->addr, dst, v.marks | FAB_MARK_DROP_FULL, sc.now, 0, v.link_seq,
		    false);
		release(p, idx);
		return owner_dead(fab, sc.d) ? -EHOSTUNREACH : -ENOBUFS;
	}
	if (v.marks & FAB_MARK_CORRUPTED)
		data[v.corrupt_bit / 8] ^= (uint8_t)(1u << (v.corrupt_bit % 8));
	/* The copy is made before the original is published: once published,
	 * the original may be received, released and reused at any moment. */
	if (v.duplicate) {
		if (ring_room(fab, t, sc.l, prod, 2) && fab_frame_get(p, &dup_idx, NULL) == 0) {
			memcpy(fab_frame_at(fab, dup_idx), data, len);
			fab_count(&sc.l->tx.duplicated, 1);
			dup = true;
		} else {
			fab_count(&sc.l->tx.dup_nobuf, 1);
		}
	}
	publish(p, &sc, prod, idx, len, &v, v.marks);
	if (dup)
		publish(p, &sc, prod + 1, dup_idx, len, &v, v.marks | FAB_MARK_DUPLICATE);
	kick_or_hold(p, sc.d);
	return 0;
}

/* ---- Opening and closing ------------------------------------------------------------- */

int fab_port_fd(const struct fab_port *p)
{
	return p->bell_fd;
}

uint32_t fab_port_addr(const struct fab_port *p)
{
	return p->addr;
}

/* Create (or reuse) the bell FIFO and take its lock: the port's ownership. */
static int bell_open(const struct fab *fab, uint32_t addr, int *fd_out)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	char path[PATH_MAX];
	struct stat st;
	int fd, rc;

	rc = fab_bell_path(path, sizeof(path), fab->dir, addr);
	if (rc)
		return rc;
	if (mkfifo(path, 0600) < 0 && errno != EEXIST)
		return -errno;
	/* Read-write: the open does not wait for a writer, and the FIFO
	 * never reports end-of-file. */
	fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode)) {
		close(fd);
		return -EEXIST;
	}
	if (fcntl(fd, F_OFD_SETLK, &fl) < 0) {
		rc = errno == EAGAIN || errno == EACCES ? -EADDRINUSE : -errno;
		close(fd);
		return rc;
	}
	*fd_out = fd;
	return 0;
}

static void port_free(struct fab_port *p)
{
	uint32_t i;

	if (p->tx)
		for (i = 0; i < p->fab->max_ports; i++)
			if (p->tx[i].bell_fd >= 0)
				close(p->tx[i].bell_fd);
	if (p->bell_fd >= 0)
		close(p->bell_fd); /* drops the lock: the port is free */
	free(p->tx);
	free(p->rx);
	free(p->heap);
	free(p->queue);
	free(p);
}

/* Free every frame whose holder word names slot with a generation other
 * than keep (0: any generation).  Returns how many. */
static uint64_t reclaim(struct fab *fab, uint32_t slot, uint32_t keep)
{
	uint64_t h, n = 0;
	uint32_t i;

	for (i = 0; i < fab->nframes; i++) {
		h = __atomic_load_n(&fab->meta[i].holder, __ATOMIC_RELAXED);
		if (!h || FAB_HOLDER_SLOT(h) != slot || (keep && FAB_HOLDER_GEN(h) == keep))
			continue;
		if (__atomic_compare_exchange_n(&fab->meta[i].holder, &h, 0, false,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			n++;
	}
	return n;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int fab_port_open(struct fab *fab, uint32_t addr, struct fab_port **out)
{
	struct fab_seg_port *seg;
	struct fab_port *p;
	uint32_t i, gen;
	int slot, rc;

	*out = NULL;
	if (!fab_addr_valid(addr))
		return -EADDRNOTAVAIL;
	slot = fab_slot_claim(fab, addr);
	if (slot < 0)
		return slot;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->fab = fab;
	p->bell_fd = -1;
	p->tx = calloc(fab->max_ports, sizeof(*p->tx));
	p->rx = calloc(fab->max_ports, sizeof(*p->rx));
	p->heap = malloc((size_t)fab->nframes * sizeof(*p->heap));
	p->queue = malloc((size_t)fab->nframes * sizeof(*p->queue));
	if (!p->tx || !p->rx || !p->heap || !p->queue) {
		rc = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < fab->max_ports; i++) {
		p->tx[i].bell_fd = -1;
		fab_link_config_default(&p->tx[i].view.cfg);
		fab_link_config_default(&p->rx[i].cfg);
		/* Odd: never a settled sequence, so the first use reads the link. */
		p->tx[i].view.cfg_seq = UINT32_MAX;
		p->rx[i].cfg_seq = UINT32_MAX;
	}
	rc = bell_open(fab, addr, &p->bell_fd);
	if (rc)
		goto fail;

	/* The port is ours.  Take it over from whoever had it before. */
	p->slot = (uint32_t)slot;
	p->addr = addr;
	seg = p->seg = &fab->ports[slot];
	__atomic_store_n(&seg->state, FAB_PORT_CLOSED, __ATOMIC_RELEASE);
	/* Entries left in our rings belong to the old generation. */
	for (i = 0; i < fab->max_ports; i++) {
		struct fab_seg_link *l = fab_link_at(fab, i, p->slot);

		__atomic_store_n(&l->cons, __atomic_load_n(&l->prod, __ATOMIC_ACQUIRE),
				 __ATOMIC_RELEASE);
	}
	gen = __atomic_load_n(&seg->gen, __ATOMIC_RELAXED) + 1;
	p->gen = gen ? gen : 1;
	__atomic_store_n(&seg->gen, p->gen, __ATOMIC_RELEASE);
	p->holder = FAB_HOLDER(FAB_HOLD_HELD, p->slot, p->gen);
	fab_count(&seg->counters.reclaimed, reclaim(fab, p->slot, p->gen));
	drain_bell(p);
	p->wakeups = 0;
	/* Spread the ports' allocation cursors over the pool. */
	p->cursor = (uint32_t)((uint64_t)fab->nframes * p->slot / fab->max_ports);
	p->hot_base = (uint32_t)((uint64_t)p->slot * FAB_HOT_FRAMES % fab->nframes);
	p->scan_all = true;
	__atomic_store_n(&seg->owner_pid, (uint32_t)getpid(), __ATOMIC_RELAXED);
	__atomic_store_n(&seg->opened_ns, realtime_ns(), __ATOMIC_RELAXED);
	__atomic_store_n(&seg->sleeping, 0, __ATOMIC_RELAXED);
	for (i = 0; i < FAB_MAX_PORTS / 64; i++)
		__atomic_store_n(&seg->pending[i], 0, __ATOMIC_RELAXED);
	__atomic_store_n(&seg->state, FAB_PORT_OPEN, __ATOMIC_RELEASE);
	*out = p;
	return 0;
fail:
	port_free(p);
	return rc;
}

void fab_port_close(struct fab_port *p)
{
	struct fab_heap_ent e;
	uint64_t now = 0;

	if (!p)
		return;
	__atomic_store_n(&p->seg->state, FAB_PORT_CLOSED, __ATOMIC_RELEASE);
	__atomic_store_n(&p->seg->sleeping, 0, __ATOMIC_RELAXED);
	/* What has arrived, then everything else this generation holds (frames
	 * taken and not sent).  Frames still on their way are freed by the
	 * next open. */
	pull_all(p, &now);
	while (waiting(p)) {
		wait_pop(p, &e);
		release(p, e.idx);
	}
	reclaim(p->fab, p->slot, 0);
	port_free(p);
}

/*
 * Ports, the receive side: pulling the rings into the delivery queue and
 * heap, handing frames out when they are due, and the sleep half of the
 * sleep/wake handshake (fab.h; who writes what: fab_port.c).
 */
#include <errno.h>
#include <unistd.h>

#include "fab_priv.h"
#include "fab_wire.h"

/* A frame due further ahead than this was not scheduled by a link model
 * (the longest legitimate wait is a few FAB_LINK_MAX_NS). */
#define DUE_MAX_AHEAD_NS (64ull * 1000000000u)
/* Every this many fab_recv calls, every ring is looked at, not only the
 * ones the pending bitmap names. */
#define FULL_SCAN_EVERY 1024u
/* While frames wait, the UDP socket is still looked at every this many
 * fab_recv calls. */
#define UDP_LOOK_EVERY 16u

/* ---- Delivery heap (private): min-heap on (due_ns, order) --------------------- */

static bool heap_before(const struct fab_heap_ent *a, const struct fab_heap_ent *b)
{
	return a->due_ns < b->due_ns || (a->due_ns == b->due_ns && a->order < b->order);
}

void fab_heap_push(struct fab_heap_ent *h, uint32_t *n, const struct fab_heap_ent *e)
{
	uint32_t i = (*n)++, up;

	while (i > 0) {
		up = (i - 1) / 2;
		if (!heap_before(e, &h[up]))
			break;
		h[i] = h[up];
		i = up;
	}
	h[i] = *e;
}

void fab_heap_pop(struct fab_heap_ent *h, uint32_t *np, struct fab_heap_ent *out)
{
	struct fab_heap_ent last;
	uint32_t i = 0, c, n;

	*out = h[0];
	n = --*np;
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

static void heap_push(struct fab_port *p, const struct fab_heap_ent *e)
{
	fab_heap_push(p->heap, &p->heap_n, e);
}

static void heap_pop(struct fab_port *p, struct fab_heap_ent *out)
{
	fab_heap_pop(p->heap, &p->heap_n, out);
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
 * Take frame idx, named by ring position pos of the ring from slot s, out
 * of flight: its holder word from in flight to us to held by us, then its
 * metadata copied into *e, each field once, and the copy judged.  *unit and
 * *next are the copy's unit fields (fab_seg.h).  True when the frame is
 * ours to deliver; false when it was not ours or was refused (counted,
 * and released if it was ours).
 *
 * Any process that maps the segment can write the ring entries and a
 * frame's metadata while this runs, also after the frame was taken: each
 * is read once into a local (FAB_READ_ONCE), the local is checked, and only
 * the local is used.
 */
static bool take(struct fab_port *p, uint32_t s, uint32_t pos, uint32_t idx, uint64_t *now,
		 struct fab_heap_ent *e, uint32_t *unit, uint32_t *next)
{
	struct fab *fab = p->fab;
	const uint64_t inflight = FAB_HOLDER(FAB_HOLD_INFLIGHT, p->slot, p->gen);
	struct fab_seg_frame *m;
	uint32_t src_slot, ring_pos;
	uint64_t expect;

	if (idx >= fab->nframes) {
		FAB_PORT_COUNT(p, bad_index);
		return false;
	}
	m = &fab->meta[idx];
	expect = inflight;
	if (!__atomic_compare_exchange_n(&m->holder, &expect, p->holder, false, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED)) {
		/* In flight to an earlier generation of this port: ours to
		 * free.  Anything else is not ours to touch. */
		if (FAB_HOLDER_STATE(expect) == FAB_HOLD_INFLIGHT &&
		    FAB_HOLDER_SLOT(expect) == p->slot && FAB_HOLDER_GEN(expect) != p->gen &&
		    __atomic_compare_exchange_n(&m->holder, &expect, 0, false, __ATOMIC_RELEASE,
						__ATOMIC_RELAXED))
			FAB_PORT_COUNT(p, reclaimed);
		else
			FAB_PORT_COUNT(p, stale);
		return false;
	}
	/* Ours now: copy the metadata out, each field once, then judge the
	 * copy.  Nothing below reads m again. */
	e->due_ns = FAB_READ_ONCE(m->due_ns);
	e->sent_ns = FAB_READ_ONCE(m->sent_ns);
	e->link_seq = FAB_READ_ONCE(m->link_seq);
	e->len = FAB_READ_ONCE(m->len);
	e->src_addr = FAB_READ_ONCE(m->src_addr);
	e->marks = (uint16_t)(FAB_READ_ONCE(m->marks) & FAB_MARKS_DELIVERED);
	*unit = FAB_READ_ONCE(m->unit);
	*next = FAB_READ_ONCE(m->unit_next);
	src_slot = FAB_READ_ONCE(m->src_slot);
	ring_pos = FAB_READ_ONCE(m->ring_pos);
	e->idx = idx;
	if (src_slot != s || ring_pos != pos) {
		/* An index left in the ring from before, naming a frame that is
		 * in flight to us from elsewhere: give it back untouched. */
		__atomic_store_n(&m->holder, inflight, __ATOMIC_RELEASE);
		FAB_PORT_COUNT(p, stale);
		return false;
	}
	/* The ring's own slot, not the metadata's: it indexes our arrays. */
	e->src_slot = (uint16_t)s;
	if (*unit)
		e->marks |= FAB_ENT_NO_ICRC;
	/* A frame due when it was sent needs no clock reading. */
	if (!*now && !due_at_send(e))
		*now = fab_now_ns();
	if (e->len == 0 || e->len > FAB_SLOT_BYTES || *unit > FAB_UNIT_MAX ||
	    e->src_addr != FAB_READ_ONCE(fab->ports[s].addr) ||
	    (!due_at_send(e) && e->due_ns > *now && e->due_ns - *now > DUE_MAX_AHEAD_NS)) {
		FAB_PORT_COUNT(p, bad_meta);
		fab_port_release(p, idx);
		return false;
	}
	return true;
}

uint32_t fab_port_waiting(const struct fab_port *p)
{
	return waiting(p);
}

/* Queue a frame taken for delivery, unless the queue and heap are full. */
bool fab_port_deliver_later(struct fab_port *p, struct fab_heap_ent *e)
{
	if (waiting(p) == p->fab->nframes) {
		FAB_PORT_COUNT(p, heap_full);
		fab_port_release(p, e->idx);
		return false;
	}
	e->order = p->order++;
	wait_push(p, e);
	return true;
}

/*
 * Move every frame published in the ring from slot s into the heap: a ring
 * entry names one frame, or the head of a burst unit whose other frames
 * follow it in order through their unit_next fields.  The ring, the frame
 * indices and the metadata are validated; the return value is the number
 * of entries consumed.
 */
static uint32_t pull_ring(struct fab_port *p, uint32_t s, uint64_t *now)
{
	struct fab *fab = p->fab;
	struct fab_seg_link *l = fab_link_at(fab, s, p->slot);
	const uint32_t *ring = fab_ring_at(fab, s, p->slot);
	uint32_t cons = FAB_READ_ONCE(l->cons);
	/* seq_cst: the other half of the sender's fence (fab.h, "Wake-ups"). */
	uint32_t prod = __atomic_load_n(&l->prod, __ATOMIC_SEQ_CST);
	uint32_t n = prod - cons, mask = fab->ring_depth - 1, unit, next, k, left;
	struct fab_heap_ent e;

	if (n == 0)
		return 0;
	if (n > fab->ring_depth) {
		/* Impossible indices (a hostile or broken writer): start over at
		 * prod; the frames in between stay held for our generation. */
		FAB_PORT_COUNT(p, bad_ring);
		__atomic_store_n(&l->cons, prod, __ATOMIC_RELEASE);
		return 0;
	}
	for (; cons != prod; cons++) {
		if (!take(p, s, cons, FAB_READ_ONCE(ring[cons & mask]), now, &e, &unit, &next))
			continue;
		fab_port_deliver_later(p, &e);
		/* The rest of a unit: each frame must say it is the one the
		 * chain expects (its count of frames left one less than the
		 * last's), or the walk stops there; the frames it did not
		 * reach stay in flight to this generation, as any frame whose
		 * ring entry was overwritten does. */
		for (left = unit; left > 1; left--) {
			if (!take(p, s, cons, next, now, &e, &k, &next))
				break;
			if (k != left - 1) {
				FAB_PORT_COUNT(p, bad_meta);
				fab_port_release(p, e.idx);
				break;
			}
			fab_port_deliver_later(p, &e);
		}
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
	/* The network when nothing else waits, and now and then when the
	 * fabric keeps the queue busy: one system call per look. */
	if (p->udp && (!waiting(p) || p->recv_calls % UDP_LOOK_EVERY == 0))
		fab_udp_pull(p, fab_now_ns());
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
		if (e.marks & FAB_ENT_UDP) {
			p->udp_waiting--;
			*rx = (struct fab_rx){
			    .idx = e.idx,
			    .len = e.len,
			    .data = fab_frame_at(p->fab, e.idx),
			    .src = e.src_addr,
			    .due_ns = e.due_ns,
			    .sent_ns = e.sent_ns,
			};
			return 0;
		}
		v = &p->rx[e.src_slot];
		if (!fab_link_view_refresh(p->fab, fab_link_at(p->fab, e.src_slot, p->slot),
					   e.src_slot, p->slot, v))
			FAB_PORT_COUNT(p, bad_config);
		if (v->cfg.flags & FAB_LINK_DOWN) {
			fab_count(&fab_link_at(p->fab, e.src_slot, p->slot)->rx.dropped_down_rx, 1);
			/* Observed here: what the tap sees has its ICRC. */
			if (e.marks & FAB_ENT_NO_ICRC)
				fab_pkt_icrc_fill(fab_frame_at(p->fab, e.idx), e.len);
			e.marks &= (uint16_t)~FAB_ENT_NO_ICRC;
			fab_port_tap(p, e.idx, e.len, e.src_addr, p->addr,
				     e.marks | FAB_MARK_DROP_DOWN, e.sent_ns, e.due_ns, e.link_seq,
				     true);
			fab_port_release(p, e.idx);
			continue;
		}
		fab_count(&fab_link_at(p->fab, e.src_slot, p->slot)->rx.delivered, 1);
		fab_count(&fab_link_at(p->fab, e.src_slot, p->slot)->rx.delivered_bytes, e.len);
		*rx = (struct fab_rx){
		    .idx = e.idx,
		    .len = e.len,
		    .data = fab_frame_at(p->fab, e.idx),
		    .src = e.src_addr,
		    .marks = e.marks & FAB_MARKS_DELIVERED,
		    .no_icrc = e.marks & FAB_ENT_NO_ICRC,
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
	uint64_t now = 0, udp;

	pull_pending(p, &now);
	first = wait_first(p);
	udp = fab_udp_next_due_ns(p);
	return first && first->due_ns < udp ? first->due_ns : udp;
}

/* ---- Sleeping and waking -------------------------------------------------------- */

int fab_port_sleep_prepare(struct fab_port *p)
{
	const struct fab_heap_ent *first;
	uint64_t now = 0;

	/* Datagrams a burst left waiting go now; the receive socket is in the
	 * sleeper's epoll set, so arrivals there wake it. */
	fab_udp_tx_flush(p);
	__atomic_store_n(&p->seg->sleeping, 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (pull_all(p, &now) || ((first = wait_first(p)) && first->due_ns <= fab_now_ns()) ||
	    fab_udp_next_due_ns(p) <= fab_now_ns()) {
		__atomic_store_n(&p->seg->sleeping, 0, __ATOMIC_RELAXED);
		return -EAGAIN;
	}
	return 0;
}

void fab_port_drain_bell(struct fab_port *p)
{
	char buf[256];
	ssize_t n;

	while ((n = read(p->bell_fd, buf, sizeof(buf))) > 0)
		p->wakeups += (uint64_t)n;
}

void fab_port_sleep_cancel(struct fab_port *p)
{
	__atomic_store_n(&p->seg->sleeping, 0, __ATOMIC_RELAXED);
	fab_port_drain_bell(p);
}

uint64_t fab_port_wakeups(const struct fab_port *p)
{
	return p->wakeups;
}

void fab_port_rx_close(struct fab_port *p)
{
	struct fab_heap_ent e;
	uint64_t now = 0;

	pull_all(p, &now);
	while (waiting(p)) {
		wait_pop(p, &e);
		fab_port_release(p, e.idx);
	}
	p->udp_waiting = 0;
}

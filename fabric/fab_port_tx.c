/*
 * Ports, the send side: the link model's verdict, the rings towards other
 * ports, and the wake half of the sleep/wake handshake: pending bits, bells,
 * kicks held back during a burst (fab.h; who writes what: fab_port.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fab_capture_priv.h"
#include "fab_priv.h"
#include "fab_wire.h"

/* ---- Waking ------------------------------------------------------------------------- */

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

/* The sending context for frames to dst, its link view refreshed: the
 * port's transmit state for dst, or NULL when dst is not an open port. */
static struct fab_tx *send_ctx_open(struct fab_port *p, uint32_t dst, struct send_ctx *sc)
{
	struct fab *fab = p->fab;
	struct fab_tx *t;
	int d = fab_slot_find(fab, dst);

	if (d < 0 || __atomic_load_n(&fab->ports[d].state, __ATOMIC_ACQUIRE) != FAB_PORT_OPEN)
		return NULL;
	sc->d = (uint32_t)d;
	sc->dst = dst;
	sc->dgen = __atomic_load_n(&fab->ports[d].gen, __ATOMIC_ACQUIRE);
	sc->l = fab_link_at(fab, p->slot, sc->d);
	t = &p->tx[d];
	if (!fab_link_view_refresh(fab, sc->l, p->slot, sc->d, &t->view))
		FAB_PORT_COUNT(p, bad_config);
	return t;
}

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
	m->unit = 0;
	fab_port_tap(p, idx, len, p->addr, sc->dst, marks, sc->now, v->due_ns, v->link_seq, false);
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
	fab_udp_tx_flush(p);
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

	if (!fab_port_holds(p, idx))
		return -EINVAL;
	if (len == 0 || len > FAB_SLOT_BYTES) {
		fab_port_release(p, idx);
		return len ? -EMSGSIZE : -EINVAL;
	}
	t = send_ctx_open(p, dst, &sc);
	if (!t) {
		if (p->udp)
			return fab_udp_send(p, idx, len, dst);
		fab_port_release(p, idx);
		return -EHOSTUNREACH;
	}
	sc.now = send_clock(p, &t->view.cfg);
	data = fab_frame_at(fab, idx);
	fab_link_decide(sc.l, &t->view, data, len, sc.now, &v);
	if (v.marks & FAB_MARKS_DROP) {
		fab_port_tap(p, idx, len, p->addr, dst, v.marks, sc.now, 0, v.link_seq, false);
		fab_port_release(p, idx);
		return 0;
	}
	/* Read once: the room is judged and the frame published from this copy. */
	prod = FAB_READ_ONCE(sc.l->prod);
	if (!ring_room(fab, t, sc.l, prod, 1)) {
		fab_count(&sc.l->tx.dest_ring_full, 1);
		fab_port_tap(p, idx, len, p->addr, dst, v.marks | FAB_MARK_DROP_FULL, sc.now, 0,
			     v.link_seq, false);
		fab_port_release(p, idx);
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

/* ---- Burst units ------------------------------------------------------------------ */

/*
 * Whether a frame on a link with configuration c could meet anything that
 * looks at it on its way: a rule that decides on it or times it.  A link
 * with none of them delivers every frame unchanged, in order, due when
 * sent, which is what lets a unit cross it whole.
 */
static bool link_plain(const struct fab_link_config *c)
{
	return !c->latency_ns && !c->jitter_ns && !c->rate_mbps && !c->loss_ppb && !c->dup_ppb &&
	       !c->reorder_ppb && !c->corrupt_ppb && !c->delay_ns && !c->nth &&
	       !(c->flags & FAB_LINK_DOWN);
}

/* Whether this port's frames are observed, as they are sent, by something
 * that needs each with its ICRC: a tap callback.  An attached capture gets
 * a unit's frames without their ICRCs and computes them itself
 * (fab_port_tap_unit), so that a capture costs a unit no CRC. */
static bool port_observed(const struct fab_port *p)
{
	return p->tap != NULL;
}

int fab_unit_whole(struct fab_port *p, uint32_t dst)
{
	struct fab *fab = p->fab;
	struct fab_seg_link *l;
	struct fab_tx *t;
	int d = fab_slot_find(fab, dst);

	if (d < 0 || __atomic_load_n(&fab->ports[d].state, __ATOMIC_ACQUIRE) != FAB_PORT_OPEN)
		return p->udp ? 0 : -EHOSTUNREACH; /* a datagram each */
	l = fab_link_at(fab, p->slot, (uint32_t)d);
	t = &p->tx[d];
	if (!fab_link_view_refresh(fab, l, p->slot, (uint32_t)d, &t->view))
		FAB_PORT_COUNT(p, bad_config);
	if (port_observed(p) || !link_plain(&t->view.cfg))
		return 0;
	return ring_room(fab, t, l, FAB_READ_ONCE(l->prod), 1) ? 1 : 0;
}

/* Split the unit: each frame gets its ICRC and goes alone, through every
 * rule and past the capture, as fab_send would have sent it. */
static void unit_split(struct fab_port *p, const uint32_t *idx, const uint32_t *len, uint32_t n,
		       uint32_t dst, struct fab_unit_res *res)
{
	for (uint32_t i = 0; i < n; i++) {
		int err;

		if (fab_port_holds(p, idx[i]) && len[i] <= FAB_SLOT_BYTES)
			fab_pkt_icrc_fill(fab_frame_at(p->fab, idx[i]), len[i]);
		err = fab_send(p, idx[i], len[i], dst);
		if (!err)
			res->sent++;
		else if (err == -ENOBUFS)
			res->ring_full++;
		else if (err == -EHOSTUNREACH)
			res->unreachable++;
		else
			res->refused++;
	}
}

/* Release the frames of a unit that cannot go. */
static void unit_release(struct fab_port *p, const uint32_t *idx, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (fab_port_holds(p, idx[i]))
			fab_port_release(p, idx[i]);
}

int fab_send_unit(struct fab_port *p, const uint32_t *idx, const uint32_t *len, uint32_t n,
		  uint32_t dst, struct fab_unit_res *res)
{
	struct fab *fab = p->fab;
	struct fab_verdict v;
	struct send_ctx sc;
	struct fab_tx *t;
	uint32_t prod, *ring;
	bool captured;

	memset(res, 0, sizeof(*res));
	if (n == 0)
		return 0;
	for (uint32_t i = 0; i < n; i++) {
		if (!fab_port_holds(p, idx[i]) || len[i] < FAB_FRAME_MIN ||
		    len[i] > FAB_FRAME_MAX) {
			/* Not a unit this port can vouch for: every frame alone, and
			 * fab_send judges each. */
			unit_split(p, idx, len, n, dst, res);
			return 0;
		}
	}
	t = send_ctx_open(p, dst, &sc);
	if (!t && p->udp) {
		unit_split(p, idx, len, n, dst, res);
		return 0;
	}
	if (!t) {
		unit_release(p, idx, n);
		res->unreachable = n;
		return -EHOSTUNREACH;
	}
	prod = FAB_READ_ONCE(sc.l->prod);
	if (n > FAB_UNIT_MAX || port_observed(p) || !link_plain(&t->view.cfg) ||
	    !ring_room(fab, t, sc.l, prod, 1)) {
		unit_split(p, idx, len, n, dst, res);
		return 0;
	}
	/*
	 * Whole: the link model numbers and counts each frame as it would one
	 * sent alone at this moment (a plain link drops, marks and delays
	 * none), every frame's metadata names the one ring entry, and the
	 * frames are chained from the head in order.
	 */
	sc.now = send_clock(p, &t->view.cfg);
	captured = FAB_TAP_CTL_SNAP(fab_tap_ctl(fab)) != 0;
	for (uint32_t i = 0; i < n; i++) {
		struct fab_seg_frame *m = &fab->meta[idx[i]];

		fab_link_decide(sc.l, &t->view, fab_frame_at(fab, idx[i]), len[i], sc.now, &v);
		m->due_ns = v.due_ns;
		m->sent_ns = sc.now;
		m->link_seq = v.link_seq;
		m->len = len[i];
		m->src_addr = p->addr;
		m->dst_addr = dst;
		m->ring_pos = prod;
		m->src_slot = (uint16_t)p->slot;
		m->dst_slot = (uint16_t)sc.d;
		m->marks = 0;
		m->unit = n - i;
		m->unit_next = i + 1 < n ? idx[i + 1] : 0;
		if (captured)
			fab_port_tap_unit(p, idx[i], len[i], dst, sc.now, v.due_ns, v.link_seq);
		__atomic_store_n(&m->holder, FAB_HOLDER(FAB_HOLD_INFLIGHT, sc.d, sc.dgen),
				 __ATOMIC_RELEASE);
	}
	ring = fab_ring_at(fab, p->slot, sc.d);
	__atomic_store_n(&ring[prod & (fab->ring_depth - 1)], idx[0], __ATOMIC_RELAXED);
	__atomic_store_n(&sc.l->prod, prod + 1, __ATOMIC_RELEASE);
	res->sent = n;
	res->whole = true;
	/* A unit is a batch already: its receiver is told at once, so that it
	 * works on this unit while the next one is built. */
	kick(p, sc.d);
	return 0;
}

/*
 * The capture tap: ports writing their frames into their rings, and the
 * capture attaching, draining and detaching (fab_capture.h; layout in
 * fab_seg.h).
 *
 * Who writes what.  The producer (a port's owner) writes a record at prod,
 * then publishes prod with release; it alone writes prod, records,
 * not_captured, stalled, filtered, check_ns and waiting.  The consumer (the
 * capture) reads prod with acquire, copies the record headers out, hands
 * the frames out where they lie, then publishes cons with release; it
 * alone writes cons, wake and the header's tap_beat_ns, and keeps its own
 * copy of cons, so a scribbled cons misleads only the producer (into a full
 * ring, or into overwriting frames being read: their bytes change, never
 * where they are read from).
 *
 * Waiting for room (lossless mode).  The producer reads wake, stores
 * waiting = 1, a full fence, and looks at cons again; only if there is
 * still no room does it sleep on the futex word wake, expecting the value
 * it read.  The consumer stores cons, a full fence, and if it finds waiting
 * set bumps wake and wakes the futex.  Either the producer's second look
 * sees the new cons or the consumer sees waiting (Dekker, as the fabric's
 * bells): no wake-up is lost, and if one were (a scribbled word), the sleep
 * ends after FAB_CAP_WAIT_NS anyway.
 *
 * How long a port waits.  The only progress a port trusts is its own
 * ring's consumer position moving on: it remembers, in its own memory
 * (struct fab_tap_wait), where cons stood when it found the ring full and
 * since when, and stops waiting once cons has not moved on for
 * FAB_TAP_STALL_NS.  The capture's stamp (tap_beat_ns) and pass count only
 * cut a wait short (a stamp a second old, eight passes without room): a
 * stamp kept fresh by something that frees no room holds no one.  So that
 * an honest capture that is merely slow keeps its ports waiting (and
 * loses nothing), it gives each ring back what it has handed out every
 * BEAT_EVERY records of a long pass, not only when the pass ends.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fab_capture.h"
#include "fab_capture_priv.h"
#include "fab_wire.h"

_Static_assert(FAB_CAP_COPY_MIN == FAB_HDR_BASE, "ports keep the headers through the BTH");

/* A port with a full ring reads the clock once per this many frames. */
#define FULL_CHECK_EVERY 1024u
/* A port waiting for room yields this many times before it sleeps. */
#define WAIT_YIELDS 16u
/* Passes of the capture after which a port that still finds no room stops
 * waiting: every pass reads each ring up to its producer (BATCH_RECS
 * allowing, starting from another ring each time), so only positions
 * written by something other than nicsim keep a ring full that long. */
#define WAIT_PASSES 8u
/* Where the BTH starts in a frame. */
#define BTH_OFF (FAB_HDR_BASE - FAB_BTH_LEN)
/* Records one pass gathers at most. */
#define BATCH_RECS 32768u
/* A long pass gives the rings back what it handed out, and stamps its
 * progress, after this many records, or after FAB_CAP_WAIT_NS (the clock
 * read every CLOCK_EVERY records): far more often than FAB_TAP_STALL_NS
 * even when each record takes the output long to write. */
#define BEAT_EVERY 256u
#define CLOCK_EVERY 8u

static uint32_t align8(uint32_t v)
{
	return (v + FAB_TAP_ALIGN - 1) & ~(FAB_TAP_ALIGN - 1);
}

/* The capture section, from the checked sizes (it follows the frames). */
static uint8_t *tap_section(const struct fab *fab)
{
	uint64_t end =
	    (uint64_t)(fab->frames - fab->base) + (uint64_t)fab->nframes * FAB_SLOT_BYTES;

	return fab->base + ((end + FAB_PAGE - 1) & ~(uint64_t)(FAB_PAGE - 1));
}

static struct fab_tap_ring *tap_ring(const struct fab *fab, uint32_t slot)
{
	return (struct fab_tap_ring *)tap_section(fab) + slot;
}

static uint8_t *tap_data(const struct fab *fab, uint32_t slot, uint32_t ring_bytes)
{
	return tap_section(fab) + fab_tap_data_off(fab->max_ports) + (size_t)slot * ring_bytes;
}

static struct flock lock_req(short type)
{
	return (struct flock){
	    .l_type = type, .l_whence = SEEK_SET, .l_start = FAB_TAP_LOCK_OFF, .l_len = 1};
}

/* Whether an open file description other than fd's holds the capture lock. */
static bool lock_held(int fd)
{
	struct flock fl = lock_req(F_WRLCK);

	return fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
}

/* ---- Filter ------------------------------------------------------------------------ */

bool fab_cap_filter_match(const struct fab_cap_filter *f, const uint8_t *data, uint32_t len,
			  uint32_t src, uint32_t dst)
{
	const uint8_t *bth = data + BTH_OFF;

	if (f->host_set && src != f->host && dst != f->host)
		return false;
	if (!f->qpn_set && !f->opcode_set)
		return true;
	if (len < FAB_CAP_COPY_MIN)
		return false;
	if (f->opcode_set && bth[0] != f->opcode)
		return false;
	return !f->qpn_set || fab_get24(bth + 5) == f->qpn;
}

/* The capture's flags and filter, copied out of the header once: only the
 * copy is used (any value is safe to compare with). */
static uint32_t filter_read(const struct fab *fab, struct fab_cap_filter *f)
{
	uint32_t flags = FAB_READ_ONCE(fab->hdr->tap_flags);

	*f = (struct fab_cap_filter){
	    .host_set = flags & FAB_TAP_F_HOST,
	    .qpn_set = flags & FAB_TAP_F_QPN,
	    .opcode_set = flags & FAB_TAP_F_OPCODE,
	    .host = FAB_READ_ONCE(fab->hdr->tap_host),
	    .qpn = FAB_READ_ONCE(fab->hdr->tap_qpn) & FAB_MASK24,
	    .opcode = (uint8_t)FAB_READ_ONCE(fab->hdr->tap_opcode),
	};
	return flags;
}

/* ---- Producer ------------------------------------------------------------------ */

/*
 * The tap of a capture that is gone (nobody holds its lock): off, so that
 * the ports stop copying and waiting.  Only ctl, the switch as the caller
 * read it, is turned off: a capture that attached since keeps its own.
 */
static void tap_off_if_dead(struct fab *fab, uint64_t ctl)
{
	if (!lock_held(fab->fd))
		__atomic_compare_exchange_n(&fab->hdr->tap_ctl, &ctl,
					    FAB_TAP_CTL(FAB_TAP_CTL_GEN(ctl), 0), false,
					    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
}

/*
 * No room: count the frame, and now and then (every FULL_CHECK_EVERY frames
 * left out, and at most every FAB_CAP_CHECK_NS) turn a dead capture's tap
 * off.  The common case is one load and one store.
 */
static void ring_full(struct fab *fab, struct fab_tap_ring *r, uint64_t ctl)
{
	uint64_t now, n = __atomic_load_n(&r->not_captured, __ATOMIC_RELAXED) + 1;

	__atomic_store_n(&r->not_captured, n, __ATOMIC_RELAXED);
	if (n % FULL_CHECK_EVERY)
		return;
	now = fab_now_ns();
	if (now - __atomic_load_n(&r->check_ns, __ATOMIC_RELAXED) < FAB_CAP_CHECK_NS)
		return;
	__atomic_store_n(&r->check_ns, now, __ATOMIC_RELAXED);
	tap_off_if_dead(fab, ctl);
}

/* Where a ring stands for the producer: its own position, and the room. */
struct ring_pos {
	uint64_t prod;
	uint32_t size, need, off, tail;
};

/* Whether a record of p->need bytes (and the pad before it, if it would
 * cross the end) fits with the consumer at cons.  An impossible cons (more
 * than a ring behind or ahead) is a full ring. */
static bool has_room(const struct ring_pos *p, uint64_t cons)
{
	uint64_t used = p->prod - cons;

	return used <= p->size &&
	       p->size - used >= (p->need <= p->tail ? p->need : p->tail + p->need);
}

/* Nanoseconds since the capture's last pass, from a stamp anyone may have
 * written: a stamp from the future further than a stall counts as stalled. */
static uint64_t beat_age(const struct fab *fab, uint64_t now)
{
	uint64_t beat = FAB_READ_ONCE(fab->hdr->tap_beat_ns);

	if (beat <= now)
		return now - beat;
	return beat - now > FAB_TAP_STALL_NS ? FAB_TAP_STALL_NS : 0;
}

enum wait_result { WAIT_ROOM, WAIT_STALLED, WAIT_NO_ROOM, WAIT_OFF };

/*
 * The port finds its ring full with the consumer at cons, at now: whether
 * the capture made progress on this ring is recorded in w.  The first look
 * of a wait, a recorded position that is no longer a possible one (the
 * port wrote since), and a position further on than the recorded one (the
 * capture gave room back) restart the clock.  An impossible cons (written
 * by something other than nicsim) counts as a full ring: no progress.
 */
static void ring_progress(struct fab_tap_wait *w, const struct ring_pos *p, uint64_t cons,
			  uint64_t now)
{
	uint64_t seen = p->prod - cons <= p->size ? cons : p->prod - p->size;

	if (!w->since_ns || p->prod - w->cons > p->size || p->prod - seen < p->prod - w->cons) {
		w->cons = seen;
		w->since_ns = now;
	}
}

/* Whether the port should stop waiting at now: its ring's position has
 * not moved for the bound, or the capture's own stamp says it stalled. */
static bool wait_over(const struct fab *fab, const struct fab_tap_wait *w, uint64_t now)
{
	return now - w->since_ns >= FAB_TAP_STALL_NS || beat_age(fab, now) >= FAB_TAP_STALL_NS;
}

static void futex_sleep(uint32_t *word, uint32_t expect, uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
			      .tv_nsec = (long)(ns % 1000000000u)};

	/* Not FUTEX_PRIVATE: the word is in a mapping other processes share.
	 * EAGAIN (the word moved), EINTR, ETIMEDOUT: all mean look again. */
	syscall(SYS_futex, word, FUTEX_WAIT, expect, &ts, NULL, 0);
}

/*
 * Lossless mode, no room: wait until the capture makes some.  WAIT_ROOM
 * with *cons the consumer position that gives it; WAIT_STALLED when the
 * ring's consumer position has not moved on for FAB_TAP_STALL_NS (w, kept
 * across frames: a stalled capture costs the first frame the bound and the
 * next ones nothing), or the capture's stamp is that old (the frame is
 * left out and counted); WAIT_NO_ROOM when WAIT_PASSES passes brought no
 * room (positions someone scribbled on: left out and counted); WAIT_OFF
 * when the tap was turned off or taken over meanwhile, or the capture is
 * dead (the frame is not the capture's business).  *cons is the position
 * the caller found no room with.
 */
static enum wait_result wait_room(struct fab *fab, struct fab_tap_ring *r, struct fab_tap_wait *w,
				  uint64_t ctl, const struct ring_pos *p, uint64_t *cons)
{
	uint64_t now = fab_now_ns(), ns, passes0;
	uint32_t i, seq;
	bool room;

	ring_progress(w, p, *cons, now);
	if (wait_over(fab, w, now))
		return WAIT_STALLED;
	/* Spin briefly, yielding: the capture may be on this CPU. */
	for (i = 0; i < WAIT_YIELDS; i++) {
		sched_yield();
		*cons = __atomic_load_n(&r->cons, __ATOMIC_ACQUIRE);
		if (has_room(p, *cons))
			return WAIT_ROOM;
		if (__atomic_load_n(&fab->hdr->tap_ctl, __ATOMIC_ACQUIRE) != ctl)
			return WAIT_OFF;
	}
	passes0 = FAB_READ_ONCE(fab->hdr->tap_passes);
	for (;;) {
		now = fab_now_ns();
		ring_progress(w, p, *cons, now);
		if (wait_over(fab, w, now))
			return WAIT_STALLED;
		if (FAB_READ_ONCE(fab->hdr->tap_passes) - passes0 >= WAIT_PASSES)
			return WAIT_NO_ROOM;
		/* A capture that was killed never wakes us: its lock says so. */
		tap_off_if_dead(fab, ctl);
		seq = __atomic_load_n(&r->wake, __ATOMIC_ACQUIRE);
		__atomic_store_n(&r->waiting, 1, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		*cons = __atomic_load_n(&r->cons, __ATOMIC_ACQUIRE);
		room = has_room(p, *cons);
		if (!room && __atomic_load_n(&fab->hdr->tap_ctl, __ATOMIC_ACQUIRE) == ctl) {
			ns = FAB_TAP_STALL_NS - (now - w->since_ns);
			futex_sleep(&r->wake, seq, ns < FAB_CAP_WAIT_NS ? ns : FAB_CAP_WAIT_NS);
			*cons = __atomic_load_n(&r->cons, __ATOMIC_ACQUIRE);
			room = has_room(p, *cons);
		}
		__atomic_store_n(&r->waiting, 0, __ATOMIC_RELAXED);
		if (room)
			return WAIT_ROOM;
		if (__atomic_load_n(&fab->hdr->tap_ctl, __ATOMIC_ACQUIRE) != ctl)
			return WAIT_OFF;
	}
}

void fab_tap_ring_put(struct fab *fab, uint32_t slot, struct fab_tap_wait *w, uint64_t ctl,
		      const struct fab_tap_frame *f, bool rx)
{
	uint32_t snap = FAB_TAP_CTL_SNAP(ctl), caplen, flags, off;
	struct fab_tap_ring *r = tap_ring(fab, slot);
	struct fab_cap_filter filter;
	struct fab_tap_rec rec;
	struct ring_pos p;
	uint8_t *ring;
	uint64_t prod, cons;

	/* Filters before anything else: a frame the capture does not want
	 * takes no room and waits for nothing. */
	flags = filter_read(fab, &filter);
	if (!fab_cap_filter_match(&filter, f->data, f->len, f->src, f->dst)) {
		fab_count(&r->filtered, 1);
		return;
	}
	if (snap < FAB_CAP_COPY_MIN)
		snap = FAB_CAP_COPY_MIN;
	if (snap > FAB_SLOT_BYTES)
		snap = FAB_SLOT_BYTES;
	caplen = f->len < snap ? f->len : snap;
	p.size = fab_tap_ring_bytes(fab->max_ports);
	p.need = align8((uint32_t)sizeof(rec) + caplen);
	ring = tap_data(fab, slot, p.size);
	/* Our own prod, unless someone scribbled on it: keep it aligned. */
	p.prod = __atomic_load_n(&r->prod, __ATOMIC_RELAXED) & ~(uint64_t)(FAB_TAP_ALIGN - 1);
	p.off = (uint32_t)(p.prod & (p.size - 1));
	p.tail = p.size - p.off;
	cons = __atomic_load_n(&r->cons, __ATOMIC_ACQUIRE);
	if (!has_room(&p, cons)) {
		if (flags & FAB_TAP_F_LOSSY) {
			ring_full(fab, r, ctl);
			return;
		}
		switch (wait_room(fab, r, w, ctl, &p, &cons)) {
		case WAIT_ROOM: break;
		case WAIT_STALLED:
			fab_count(&r->stalled, 1);
			ring_full(fab, r, ctl);
			return;
		case WAIT_NO_ROOM: ring_full(fab, r, ctl); return;
		case WAIT_OFF: return;
		}
	}
	/* Room: the next full ring starts a wait of its own. */
	w->since_ns = 0;
	prod = p.prod;
	off = p.off;
	if (p.need > p.tail) {
		/* The record would cross the end: pad to it, start over at 0. */
		rec = (struct fab_tap_rec){.rec_len = p.tail, .flags = FAB_TAP_REC_PAD};
		memcpy(ring + off, &rec, 2 * sizeof(uint32_t));
		prod += p.tail;
		off = 0;
	}
	rec = (struct fab_tap_rec){
	    .rec_len = p.need,
	    .flags = (rx ? FAB_TAP_REC_RX : 0) |
		     (f->no_icrc && caplen == f->len ? FAB_TAP_REC_NO_ICRC : 0),
	    .len = f->len,
	    .caplen = caplen,
	    .src = f->src,
	    .dst = f->dst,
	    .marks = f->marks,
	    .seq = (uint32_t)__atomic_load_n(&r->records, __ATOMIC_RELAXED),
	    .ts_ns = rx ? f->due_ns : f->sent_ns,
	    .due_ns = f->due_ns,
	    .link_seq = f->link_seq,
	    .not_captured = __atomic_load_n(&r->not_captured, __ATOMIC_RELAXED),
	};
	memcpy(ring + off, &rec, sizeof(rec));
	memcpy(ring + off + sizeof(rec), f->data, caplen);
	memset(ring + off + sizeof(rec) + caplen, 0, p.need - sizeof(rec) - caplen);
	fab_count(&r->records, 1);
	__atomic_store_n(&r->prod, prod + p.need, __ATOMIC_RELEASE);
}

/* ---- Consumer ------------------------------------------------------------------ */

/*
 * A record of the current pass: its header, copied out and checked, where
 * its frame bytes lie in the ring (they stay there until the pass ends and
 * cons moves past them), and its sort key.
 */
struct batch_ent {
	struct fab_tap_rec rec;
	const uint8_t *data;
	uint32_t order;
	uint32_t slot;
};

/* A ring's counters when the capture attached: its stats count from there. */
struct ring_base {
	uint64_t not_captured, stalled, filtered;
};

struct fab_cap {
	struct fab *fab;
	int lock_fd; /* our own open file description: the lock's holder */
	uint32_t gen, copy, ring_bytes;
	uint32_t flags, host, qpn, opcode; /* what it wrote in tap_flags, tap_host, ... */
	bool stopped;
	uint64_t passes;         /* passes made: the header's tap_passes */
	uint64_t *cons;          /* [max_ports] our read positions */
	uint64_t *next;          /* [max_ports] read positions at the end of this pass */
	struct ring_base *base0; /* [max_ports] each ring's counters at the attach */
	uint64_t *nocap;         /* [max_ports] not_captured in the ring's last record read */
	struct batch_ent *ents;  /* BATCH_RECS */
	/* A pass's records by gather order (ring by ring, each ring's in ring
	 * order): where each ends in its ring, and whether it was handed out.
	 * Ring s's are [first[s], lim[s]); those before upto[s] are given back. */
	uint64_t *ends;  /* BATCH_RECS */
	bool *done;      /* BATCH_RECS */
	uint32_t *first; /* [max_ports] */
	uint32_t *lim;   /* [max_ports] */
	uint32_t *upto;  /* [max_ports] */
	struct fab_cap_stats st;
	/* A frame of a burst unit, copied out of its ring and given its ICRC
	 * (FAB_TAP_REC_NO_ICRC): what the callback gets instead of the ring's
	 * bytes. */
	uint8_t whole[FAB_SLOT_BYTES];
};

static void cap_free(struct fab_cap *cap)
{
	if (cap->lock_fd >= 0)
		close(cap->lock_fd); /* drops the lock */
	free(cap->cons);
	free(cap->next);
	free(cap->base0);
	free(cap->nocap);
	free(cap->ents);
	free(cap->ends);
	free(cap->done);
	free(cap->first);
	free(cap->lim);
	free(cap->upto);
	free(cap);
}

/* A second open file description of the mapped file: the lock must not be
 * held through fab->fd, which the ports of this process query. */
static int reopen(const struct fab *fab)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fab->fd);
	return open(path, O_RDWR | O_CLOEXEC);
}

/* The capture's mode and filter into the header, where the ports read them. */
static void write_requests(struct fab_cap *cap)
{
	struct fab_seg_hdr *h = cap->fab->hdr;

	__atomic_store_n(&h->tap_flags, cap->flags, __ATOMIC_RELAXED);
	__atomic_store_n(&h->tap_host, cap->host, __ATOMIC_RELAXED);
	__atomic_store_n(&h->tap_qpn, cap->qpn, __ATOMIC_RELAXED);
	__atomic_store_n(&h->tap_opcode, cap->opcode, __ATOMIC_RELAXED);
}

/*
 * Before a pass: whether the capture's mode and filter are still what it
 * wrote.  Anything else was written by another process: it is counted
 * (the mode apart from the filter, since only a mode made lossy makes the
 * ports leave frames out) and written back.
 */
static void check_requests(struct fab_cap *cap)
{
	const struct fab_seg_hdr *h = cap->fab->hdr;
	uint32_t flags = FAB_READ_ONCE(h->tap_flags);
	bool mode = (flags & FAB_TAP_F_LOSSY) != (cap->flags & FAB_TAP_F_LOSSY);
	bool filter = (flags & ~FAB_TAP_F_LOSSY) != (cap->flags & ~FAB_TAP_F_LOSSY) ||
		      FAB_READ_ONCE(h->tap_host) != cap->host ||
		      FAB_READ_ONCE(h->tap_qpn) != cap->qpn ||
		      FAB_READ_ONCE(h->tap_opcode) != cap->opcode;

	if (!mode && !filter)
		return;
	cap->st.mode_written += mode;
	cap->st.filter_written += filter;
	write_requests(cap);
}

int fab_cap_attach(struct fab *fab, uint32_t copy_bytes, struct fab_cap **out)
{
	const struct fab_cap_config cfg = {.copy_bytes = copy_bytes};

	return fab_cap_attach_cfg(fab, &cfg, out);
}

int fab_cap_attach_cfg(struct fab *fab, const struct fab_cap_config *cfg, struct fab_cap **out)
{
	const struct fab_cap_filter *flt = &cfg->filter;
	uint32_t copy_bytes = cfg->copy_bytes;
	struct flock fl = lock_req(F_WRLCK);
	struct fab_cap *cap;
	uint64_t ctl;
	uint32_t s;
	int rc;

	*out = NULL;
	cap = calloc(1, sizeof(*cap));
	if (!cap)
		return -ENOMEM;
	cap->fab = fab;
	cap->ring_bytes = fab_tap_ring_bytes(fab->max_ports);
	cap->copy = copy_bytes < FAB_CAP_COPY_MIN ? FAB_CAP_COPY_MIN
		    : copy_bytes > FAB_SLOT_BYTES ? FAB_SLOT_BYTES
						  : copy_bytes;
	cap->lock_fd = reopen(fab);
	if (cap->lock_fd < 0) {
		rc = -errno;
		goto fail;
	}
	if (fcntl(cap->lock_fd, F_OFD_SETLK, &fl) < 0) {
		rc = errno == EAGAIN || errno == EACCES ? -EBUSY : -errno;
		goto fail;
	}
	rc = posix_fallocate(cap->lock_fd, (off_t)(tap_section(fab) - fab->base),
			     (off_t)fab_tap_size(fab->max_ports));
	if (rc && rc != EOPNOTSUPP && rc != EINVAL) {
		rc = -rc;
		goto fail;
	}
	cap->cons = calloc(fab->max_ports, sizeof(*cap->cons));
	cap->next = calloc(fab->max_ports, sizeof(*cap->next));
	cap->base0 = calloc(fab->max_ports, sizeof(*cap->base0));
	cap->nocap = calloc(fab->max_ports, sizeof(*cap->nocap));
	cap->ents = malloc(BATCH_RECS * sizeof(*cap->ents));
	cap->ends = malloc(BATCH_RECS * sizeof(*cap->ends));
	cap->done = malloc(BATCH_RECS * sizeof(*cap->done));
	cap->first = calloc(fab->max_ports, sizeof(*cap->first));
	cap->lim = calloc(fab->max_ports, sizeof(*cap->lim));
	cap->upto = calloc(fab->max_ports, sizeof(*cap->upto));
	rc = -ENOMEM;
	if (!cap->cons || !cap->next || !cap->base0 || !cap->nocap || !cap->ents || !cap->ends ||
	    !cap->done || !cap->first || !cap->lim || !cap->upto)
		goto fail;
	/* Whatever an earlier capture left unread is not ours. */
	for (s = 0; s < fab->max_ports; s++) {
		struct fab_tap_ring *r = tap_ring(fab, s);

		cap->cons[s] =
		    __atomic_load_n(&r->prod, __ATOMIC_ACQUIRE) & ~(uint64_t)(FAB_TAP_ALIGN - 1);
		__atomic_store_n(&r->cons, cap->cons[s], __ATOMIC_RELEASE);
		cap->base0[s] = (struct ring_base){
		    .not_captured = __atomic_load_n(&r->not_captured, __ATOMIC_RELAXED),
		    .stalled = __atomic_load_n(&r->stalled, __ATOMIC_RELAXED),
		    .filtered = __atomic_load_n(&r->filtered, __ATOMIC_RELAXED),
		};
		cap->nocap[s] = cap->base0[s].not_captured;
	}
	ctl = __atomic_load_n(&fab->hdr->tap_ctl, __ATOMIC_ACQUIRE);
	cap->gen = FAB_TAP_CTL_GEN(ctl) + 1;
	cap->passes = __atomic_load_n(&fab->hdr->tap_passes, __ATOMIC_RELAXED);
	__atomic_store_n(&fab->hdr->tap_pid, (uint32_t)getpid(), __ATOMIC_RELAXED);
	/* The mode and the filter, then the switch: a port that sees the tap
	 * on (acquire) sees these too. */
	cap->flags = (cfg->lossy ? FAB_TAP_F_LOSSY : 0) | (flt->host_set ? FAB_TAP_F_HOST : 0) |
		     (flt->qpn_set ? FAB_TAP_F_QPN : 0) | (flt->opcode_set ? FAB_TAP_F_OPCODE : 0);
	cap->host = flt->host;
	cap->qpn = flt->qpn & FAB_MASK24;
	cap->opcode = flt->opcode;
	write_requests(cap);
	__atomic_store_n(&fab->hdr->tap_beat_ns, fab_now_ns(), __ATOMIC_RELAXED);
	__atomic_store_n(&fab->hdr->tap_ctl, FAB_TAP_CTL(cap->gen, cap->copy), __ATOMIC_SEQ_CST);
	*out = cap;
	return 0;
fail:
	cap_free(cap);
	return rc;
}

void fab_cap_stop(struct fab_cap *cap)
{
	uint64_t ctl = FAB_TAP_CTL(cap->gen, cap->copy);

	if (cap->stopped)
		return;
	cap->stopped = true;
	__atomic_compare_exchange_n(&cap->fab->hdr->tap_ctl, &ctl, FAB_TAP_CTL(cap->gen, 0), false,
				    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
}

void fab_cap_detach(struct fab_cap *cap)
{
	if (!cap)
		return;
	fab_cap_stop(cap);
	cap_free(cap);
}

/*
 * The ring of slot s makes no sense from its read position on: skip to its
 * producer.  A position that is not aligned is never read from (it would
 * leave less than a record header before the end): the next record the
 * producer writes, at an aligned position, makes this ring resync once more.
 */
static void resync(struct fab_cap *cap, uint32_t s, uint64_t prod)
{
	cap->st.bad++;
	/* Aligned as the producer aligns its own: the ring is then empty to
	 * both, and a producer waiting for room finds it. */
	cap->next[s] = prod & ~(uint64_t)(FAB_TAP_ALIGN - 1);
}

/* A record header copied out of a ring: whether its fields add up. */
static bool rec_valid(const struct fab_tap_rec *rec)
{
	return !(rec->flags & ~(FAB_TAP_REC_RX | FAB_TAP_REC_NO_ICRC)) &&
	       (!(rec->flags & FAB_TAP_REC_NO_ICRC) || rec->caplen == rec->len) && rec->len >= 1 &&
	       rec->len <= FAB_SLOT_BYTES && rec->caplen <= rec->len &&
	       rec->rec_len == align8(sizeof(*rec) + rec->caplen);
}

/*
 * Gather the records of slot s's ring into the pass, n entries so far;
 * next[s] gets the position after the last one.  Stops when the pass is
 * full.  Each record's header is copied out once and only the copy is
 * checked and used (the port that writes the ring, or any process mapping
 * the segment, may change it meanwhile); the frame bytes stay in the ring,
 * which the producer does not reuse before cons moves.
 */
static void gather_ring(struct fab_cap *cap, uint32_t s, size_t *n)
{
	struct fab_tap_ring *r = tap_ring(cap->fab, s);
	const uint8_t *ring = tap_data(cap->fab, s, cap->ring_bytes);
	/* Aligned as the producer aligns its own (only a scribbler makes it
	 * otherwise): the two agree on where the ring ends. */
	uint64_t prod =
	    __atomic_load_n(&r->prod, __ATOMIC_ACQUIRE) & ~(uint64_t)(FAB_TAP_ALIGN - 1);
	uint64_t pos = cap->cons[s];
	struct batch_ent *e;
	uint32_t off, tail;

	cap->next[s] = pos;
	/* The position is the capture's to write: it left it at pos. */
	if (__atomic_load_n(&r->cons, __ATOMIC_RELAXED) != pos)
		cap->st.pos_written++;
	if (prod == pos)
		return;
	if (prod - pos > cap->ring_bytes || pos % FAB_TAP_ALIGN) {
		resync(cap, s, prod);
		return;
	}
	while (pos != prod && *n < BATCH_RECS) {
		off = (uint32_t)(pos & (cap->ring_bytes - 1));
		tail = cap->ring_bytes - off;
		e = &cap->ents[*n];
		/* A pad record may have as little as its first 8 bytes before
		 * the end of the ring. */
		memset(&e->rec, 0, sizeof(e->rec));
		memcpy(&e->rec, ring + off,
		       tail < sizeof(e->rec) ? 2 * sizeof(uint32_t) : sizeof(e->rec));
		if (e->rec.flags & FAB_TAP_REC_PAD) {
			if (e->rec.rec_len != tail || e->rec.rec_len > prod - pos) {
				resync(cap, s, prod);
				return;
			}
			pos += tail;
			continue;
		}
		if (e->rec.rec_len < sizeof(e->rec) || e->rec.rec_len > tail ||
		    e->rec.rec_len > prod - pos || e->rec.rec_len % FAB_TAP_ALIGN) {
			resync(cap, s, prod);
			return;
		}
		pos += e->rec.rec_len;
		if (!rec_valid(&e->rec)) {
			cap->st.bad++;
			continue;
		}
		e->data = ring + off + sizeof(e->rec);
		e->order = (uint32_t)*n;
		e->slot = s;
		cap->ends[*n] = pos;
		cap->done[*n] = false;
		(*n)++;
	}
	cap->next[s] = pos;
}

static int ent_cmp(const void *a, const void *b)
{
	const struct batch_ent *x = a, *y = b;

	if (x->rec.ts_ns != y->rec.ts_ns)
		return x->rec.ts_ns < y->rec.ts_ns ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

/*
 * Give ring s back up to pos (the consumer half of the handshake described
 * at the top): whether cons moved.  Stored only when it changed (or was
 * scribbled on): the producer reads this line for every record.
 */
static bool give_back(struct fab_cap *cap, uint32_t s, uint64_t pos)
{
	struct fab_tap_ring *r = tap_ring(cap->fab, s);

	if (__atomic_load_n(&r->cons, __ATOMIC_RELAXED) == pos)
		return false;
	__atomic_store_n(&r->cons, pos, __ATOMIC_RELEASE);
	return true;
}

/* After give_back: wake the producers of the rings that moved and wait. */
static void wake_moved(struct fab_cap *cap, const bool *moved)
{
	struct fab_tap_ring *r;
	uint32_t s;

	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (s = 0; s < cap->fab->max_ports; s++) {
		r = tap_ring(cap->fab, s);
		if (!moved[s] || !__atomic_load_n(&r->waiting, __ATOMIC_RELAXED))
			continue;
		__atomic_fetch_add(&r->wake, 1, __ATOMIC_SEQ_CST);
		syscall(SYS_futex, &r->wake, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
	}
}

/*
 * During a long pass: give each ring back the records of it handed out so
 * far, up to the first one that is not (a ring's records come out in time
 * order, which is not always its own order), so that a port waiting for
 * room sees its ring's position move while the pass goes on; and stamp the
 * capture's progress.
 */
static void give_back_handed(struct fab_cap *cap)
{
	bool moved[FAB_MAX_PORTS], any = false;
	uint32_t s, u;

	for (s = 0; s < cap->fab->max_ports; s++) {
		moved[s] = false;
		for (u = cap->upto[s]; u < cap->lim[s] && cap->done[u]; u++)
			;
		if (u == cap->upto[s])
			continue;
		cap->upto[s] = u;
		moved[s] = give_back(cap, s, cap->ends[u - 1]);
		any |= moved[s];
	}
	if (any)
		wake_moved(cap, moved);
	__atomic_store_n(&cap->fab->hdr->tap_beat_ns, fab_now_ns(), __ATOMIC_RELEASE);
}

/*
 * The pass is over: the producers may reuse what it read.  A producer
 * waiting for room is woken, and the pass is stamped: the capture makes
 * progress.
 */
static void release_rings(struct fab_cap *cap)
{
	bool moved[FAB_MAX_PORTS], any = false;
	uint32_t s;

	for (s = 0; s < cap->fab->max_ports; s++) {
		cap->cons[s] = cap->next[s];
		moved[s] = give_back(cap, s, cap->cons[s]);
		any |= moved[s];
	}
	if (any)
		wake_moved(cap, moved);
	__atomic_store_n(&cap->fab->hdr->tap_passes, ++cap->passes, __ATOMIC_RELAXED);
	__atomic_store_n(&cap->fab->hdr->tap_beat_ns, fab_now_ns(), __ATOMIC_RELEASE);
}

int fab_cap_read(struct fab_cap *cap, fab_cap_fn fn, void *arg, size_t *count)
{
	const struct fab_tap_rec *rec;
	struct fab_cap_rec out;
	size_t n = 0, i, since = 0;
	uint64_t given = fab_now_ns();
	bool sorted = true;
	uint32_t s;
	int rc = 0;

	if (count)
		*count = 0;
	check_requests(cap);
	/* From another ring each pass: when a pass is full (BATCH_RECS), the
	 * rings it did not reach come first in a later one. */
	for (i = 0; i < cap->fab->max_ports; i++) {
		s = (uint32_t)((i + cap->passes) % cap->fab->max_ports);
		cap->first[s] = cap->upto[s] = (uint32_t)n;
		gather_ring(cap, s, &n);
		cap->lim[s] = (uint32_t)n;
	}
	for (i = 1; i < n && sorted; i++)
		sorted = cap->ents[i - 1].rec.ts_ns <= cap->ents[i].rec.ts_ns;
	if (!sorted)
		qsort(cap->ents, n, sizeof(*cap->ents), ent_cmp);
	for (i = 0; i < n && !rc; i++) {
		rec = &cap->ents[i].rec;
		s = cap->ents[i].slot;
		out = (struct fab_cap_rec){
		    .data = cap->ents[i].data,
		    .caplen = rec->caplen,
		    .len = rec->len,
		    .src = rec->src,
		    .dst = rec->dst,
		    .marks = rec->marks,
		    .rx_drop = rec->flags & FAB_TAP_REC_RX,
		    .port_slot = s,
		    .ts_ns = rec->ts_ns,
		    .due_ns = rec->due_ns,
		    .link_seq = rec->link_seq,
		};
		/* The packet as it would have been sent alone: the ICRC its
		 * sender left out is computed here, from the copy. */
		if (rec->flags & FAB_TAP_REC_NO_ICRC) {
			memcpy(cap->whole, out.data, rec->len);
			fab_pkt_icrc_fill(cap->whole, rec->len);
			out.data = cap->whole;
		}
		/* The producer's count only grows; anything else is scribbling. */
		if (rec->not_captured >= cap->nocap[s]) {
			out.lost_before = rec->not_captured - cap->nocap[s];
			cap->nocap[s] = rec->not_captured;
		}
		cap->st.read++;
		if (count)
			(*count)++;
		rc = fn(arg, &out);
		cap->done[cap->ents[i].order] = true;
		/* A long pass (a slow reader of the output) is progress too:
		 * the ports waiting for room see their rings' positions move. */
		if (++since == BEAT_EVERY ||
		    (since % CLOCK_EVERY == 0 && fab_now_ns() - given >= FAB_CAP_WAIT_NS)) {
			give_back_handed(cap);
			given = fab_now_ns();
			since = 0;
		}
	}
	release_rings(cap);
	return rc;
}

void fab_cap_get_stats(const struct fab_cap *cap, struct fab_cap_stats *st)
{
	uint64_t v;
	uint32_t s;

	*st = cap->st;
	st->not_captured = st->stalled = st->filtered = 0;
	/* Counts since the attach; one that went backwards was scribbled on. */
	for (s = 0; s < cap->fab->max_ports; s++) {
		const struct fab_tap_ring *r = tap_ring(cap->fab, s);
		const struct ring_base *b = &cap->base0[s];

		v = __atomic_load_n(&r->not_captured, __ATOMIC_RELAXED);
		st->not_captured += v >= b->not_captured ? v - b->not_captured : 0;
		v = __atomic_load_n(&r->stalled, __ATOMIC_RELAXED);
		st->stalled += v >= b->stalled ? v - b->stalled : 0;
		v = __atomic_load_n(&r->filtered, __ATOMIC_RELAXED);
		st->filtered += v >= b->filtered ? v - b->filtered : 0;
	}
	if (st->stalled > st->not_captured)
		st->stalled = st->not_captured;
}

bool fab_cap_attached(struct fab *fab, uint32_t *pid)
{
	uint64_t ctl = __atomic_load_n(&fab->hdr->tap_ctl, __ATOMIC_ACQUIRE);

	if (pid)
		*pid = __atomic_load_n(&fab->hdr->tap_pid, __ATOMIC_RELAXED);
	return FAB_TAP_CTL_SNAP(ctl) != 0 && lock_held(fab->fd);
}

void fab_cap_status(struct fab *fab, struct fab_cap_status *st)
{
	uint64_t ctl = __atomic_load_n(&fab->hdr->tap_ctl, __ATOMIC_ACQUIRE), now = fab_now_ns();
	uint64_t beat = FAB_READ_ONCE(fab->hdr->tap_beat_ns);

	*st = (struct fab_cap_status){.ever = FAB_TAP_CTL_GEN(ctl) != 0};
	st->attached = fab_cap_attached(fab, &st->pid);
	st->lossy = filter_read(fab, &st->filter) & FAB_TAP_F_LOSSY;
	st->last_pass_ns = beat <= now ? now - beat : 0;
}

int fab_cap_port_counters(struct fab *fab, uint32_t addr, struct fab_cap_port_counters *c)
{
	const struct fab_tap_ring *r;
	int slot = fab_slot_find(fab, addr);

	*c = (struct fab_cap_port_counters){0};
	if (slot < 0)
		return slot;
	/* No capture ever attached: the section may be a hole in the file,
	 * which reading would fill (or fault on a full disk). */
	if (!FAB_TAP_CTL_GEN(__atomic_load_n(&fab->hdr->tap_ctl, __ATOMIC_ACQUIRE)))
		return 0;
	r = tap_ring(fab, (uint32_t)slot);
	c->records = FAB_READ_ONCE(r->records);
	c->not_captured = FAB_READ_ONCE(r->not_captured);
	c->stalled = FAB_READ_ONCE(r->stalled);
	c->filtered = FAB_READ_ONCE(r->filtered);
	return 0;
}

/* ---- Marks in words --------------------------------------------------------------- */

const char *fab_cap_describe(uint32_t marks, bool rx_drop, char *buf, size_t size)
{
	static const struct {
		uint32_t mark;
		const char *text;
	} words[] = {
	    {FAB_MARK_DROP_LOSS, "dropped (loss rule)"},
	    {FAB_MARK_DROP_NTH, "dropped (drop-nth rule)"},
	    {FAB_MARK_DROP_DOWN, "dropped (link down)"},
	    {FAB_MARK_DROP_QUEUE, "dropped (rate limit: queued too long)"},
	    {FAB_MARK_DROP_FULL, "refused (destination ring full: not delivered)"},
	    {FAB_MARK_DUPLICATE, "duplicate (dup rule)"},
	    {FAB_MARK_CORRUPTED, "corrupted (corrupt rule: one bit flipped, ICRC fails)"},
	    {FAB_MARK_DELAYED, "delayed (delay rule)"},
	    {FAB_MARK_REORDERED, "reordered (reorder rule)"},
	};
	uint32_t known = 0;
	size_t len = 0, i;
	int n;

	if (!size)
		return buf;
	buf[0] = '\0';
	if (!marks)
		return buf;
	n = snprintf(buf, size, "nicsim:");
	len = n < 0 ? 0 : (size_t)n;
	for (i = 0; i < sizeof(words) / sizeof(words[0]) && len < size; i++) {
		known |= words[i].mark;
		if (!(marks & words[i].mark))
			continue;
		n = snprintf(buf + len, size - len, "%s %s", len > 7 ? "," : "",
			     rx_drop && words[i].mark == FAB_MARK_DROP_DOWN
				 ? "dropped on delivery (link went down in flight)"
				 : words[i].text);
		len += n < 0 ? 0 : (size_t)n;
	}
	if (marks & ~known && len < size)
		snprintf(buf + len, size - len, "%s marks 0x%x", len > 7 ? "," : "",
			 marks & ~known);
	return buf;
}

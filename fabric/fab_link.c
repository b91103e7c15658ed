/*
 * Links: the configuration seqlock, the per-link PRNG, and the link model
 * that decides each frame's fate (fab.h, "Links" and "Replay").
 *
 * cfg_seq packs the sequence (low 32 bits, odd while a writer works) and the
 * writer's pid (high 32 bits) into one word, so that taking the lock and
 * saying who holds it is one compare-and-swap, and a writer that died with
 * the lock held can be recognised and taken over.  Readers never wait: a
 * sender or receiver that finds a writer at work keeps its last good copy.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fab_priv.h"

#define WRITER_WAIT_NS 1000000000ull /* a live writer may keep a link this long */
/* The furthest ahead of now a frame of ours can leave a link busy: the
 * longest queue a rate limit builds plus the longest frame at 1 Mbit/s,
 * with room to spare.  A busy_until_ns further ahead was not ours. */
#define BUSY_MAX_AHEAD_NS (FAB_LINK_QUEUE_NS + 1000000000ull)
/* The furthest after a new frame's own arrival time the link's previous
 * in-order frame can arrive: the most latency and jitter add.  A
 * last_due_ns further ahead was not ours. */
#define LAST_DUE_MAX_AHEAD_NS (2 * FAB_LINK_MAX_NS + BUSY_MAX_AHEAD_NS)

/* Rule streams of the PRNG: each rule draws from its own. */
enum rng_stream {
	RNG_LOSS = 1,
	RNG_JITTER,
	RNG_DELAY,
	RNG_DELAY_JITTER,
	RNG_REORDER,
	RNG_CORRUPT,
	RNG_CORRUPT_BIT,
	RNG_DUP,
};

/* splitmix64's finaliser: a bijection that mixes every input bit. */
static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Random word for frame number seq of a link with this seed, one rule. */
static uint64_t rng(uint64_t seed, uint64_t seq, enum rng_stream stream)
{
	return mix64(seed ^
		     mix64(seq * 0x9e3779b97f4a7c15ull + (uint64_t)stream * 0xd1b54a32d192ed03ull));
}

/* True with probability ppb / 1e9. */
static bool chance(uint64_t seed, uint64_t seq, enum rng_stream stream, uint32_t ppb)
{
	if (!ppb)
		return false;
	return ((rng(seed, seq, stream) >> 32) * FAB_PPB_ONE >> 32) < ppb;
}

/* Uniform in 0 .. max. */
static uint64_t uniform(uint64_t seed, uint64_t seq, enum rng_stream stream, uint64_t max)
{
	return max ? rng(seed, seq, stream) % (max + 1) : 0;
}

/* The default seed of link src -> dst: the fabric's, mixed with both addresses. */
static uint64_t derived_seed(uint64_t fabric_seed, uint32_t src, uint32_t dst)
{
	return mix64(fabric_seed ^ mix64((uint64_t)ntohl(src) << 32 | ntohl(dst)));
}

/* ---- Configuration words ---------------------------------------------------- */

void fab_link_config_default(struct fab_link_config *c)
{
	memset(c, 0, sizeof(*c));
	c->nth_opcode = FAB_ANY;
	c->nth_qpn = FAB_ANY;
}

static bool filter_valid(uint32_t v, uint32_t max)
{
	return v == FAB_ANY || v <= max;
}

static bool cfg_valid(const struct fab_link_config *c)
{
	return c->latency_ns <= FAB_LINK_MAX_NS && c->jitter_ns <= FAB_LINK_MAX_NS &&
	       c->delay_ns <= FAB_LINK_MAX_NS && c->reorder_gap_ns <= FAB_LINK_MAX_NS &&
	       c->rate_mbps <= FAB_LINK_MAX_MBPS && c->loss_ppb <= FAB_PPB_ONE &&
	       c->dup_ppb <= FAB_PPB_ONE && c->reorder_ppb <= FAB_PPB_ONE &&
	       c->corrupt_ppb <= FAB_PPB_ONE && c->delay_ppb <= FAB_PPB_ONE &&
	       filter_valid(c->nth_opcode, 0xff) && filter_valid(c->nth_qpn, 0xffffff) &&
	       !(c->flags & ~FAB_LINK_FLAGS_ALL);
}

int fab_link_config_check(const struct fab_link_config *c, char *why, size_t size)
{
	const struct {
		const char *name;
		uint64_t value, max;
	} f[] = {
	    {"latency_ns", c->latency_ns, FAB_LINK_MAX_NS},
	    {"jitter_ns", c->jitter_ns, FAB_LINK_MAX_NS},
	    {"delay_ns", c->delay_ns, FAB_LINK_MAX_NS},
	    {"reorder_gap_ns", c->reorder_gap_ns, FAB_LINK_MAX_NS},
	    {"rate_mbps", c->rate_mbps, FAB_LINK_MAX_MBPS},
	    {"loss_ppb", c->loss_ppb, FAB_PPB_ONE},
	    {"dup_ppb", c->dup_ppb, FAB_PPB_ONE},
	    {"reorder_ppb", c->reorder_ppb, FAB_PPB_ONE},
	    {"corrupt_ppb", c->corrupt_ppb, FAB_PPB_ONE},
	    {"delay_ppb", c->delay_ppb, FAB_PPB_ONE},
	    {"nth_opcode", c->nth_opcode == FAB_ANY ? 0 : c->nth_opcode, 0xff},
	    {"nth_qpn", c->nth_qpn == FAB_ANY ? 0 : c->nth_qpn, 0xffffff},
	};

	if (why && size)
		why[0] = '\0';
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		if (f[i].value <= f[i].max)
			continue;
		if (why && size)
			snprintf(why, size, "%s %llu is over its limit %llu", f[i].name,
				 (unsigned long long)f[i].value, (unsigned long long)f[i].max);
		return -EINVAL;
	}
	if (c->flags & ~FAB_LINK_FLAGS_ALL) {
		if (why && size)
			snprintf(why, size, "flags 0x%x has unknown bits 0x%x", c->flags,
				 c->flags & ~FAB_LINK_FLAGS_ALL);
		return -EINVAL;
	}
	return 0;
}

/* The words are copied one atomic load or store at a time: a seqlock reader
 * may race with a writer, and the sequence check throws such a copy away. */
static void cfg_load(const struct fab_seg_link *l, struct fab_link_config *c)
{
	uint64_t w[FAB_LINK_CFG_WORDS];
	size_t i;

	for (i = 0; i < FAB_LINK_CFG_WORDS; i++)
		w[i] = __atomic_load_n(&l->cfg[i], __ATOMIC_RELAXED);
	memcpy(c, w, sizeof(*c));
}

static void cfg_store(struct fab_seg_link *l, const struct fab_link_config *c)
{
	uint64_t w[FAB_LINK_CFG_WORDS];
	size_t i;

	memcpy(w, c, sizeof(w));
	for (i = 0; i < FAB_LINK_CFG_WORDS; i++)
		__atomic_store_n(&l->cfg[i], w[i], __ATOMIC_RELAXED);
}

static uint32_t seq_of(uint64_t word)
{
	return (uint32_t)word;
}

/* One consistent read of the configuration and its generations; false if a
 * writer was at work or the words changed under the copy. */
static bool cfg_read(const struct fab_seg_link *l, struct fab_link_config *c, uint32_t *seq,
		     uint32_t *seed_gen, uint32_t *nth_gen)
{
	uint64_t s1 = __atomic_load_n(&l->cfg_seq, __ATOMIC_ACQUIRE);

	if (seq_of(s1) & 1)
		return false;
	cfg_load(l, c);
	*seed_gen = __atomic_load_n(&l->seed_gen, __ATOMIC_RELAXED);
	*nth_gen = __atomic_load_n(&l->nth_gen, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (seq_of(__atomic_load_n(&l->cfg_seq, __ATOMIC_RELAXED)) != seq_of(s1))
		return false;
	*seq = seq_of(s1);
	return true;
}

bool fab_link_view_refresh(const struct fab *fab, const struct fab_seg_link *l, uint32_t src,
			   uint32_t dst, struct fab_link_view *view)
{
	uint32_t seq, seed_gen, nth_gen;
	struct fab_link_config c;

	if (seq_of(__atomic_load_n(&l->cfg_seq, __ATOMIC_ACQUIRE)) == view->cfg_seq)
		return true;
	if (!cfg_read(l, &c, &seq, &seed_gen, &nth_gen))
		return true; /* a writer is at work: keep the copy we have */
	view->cfg_seq = seq; /* judged once, good or bad */
	if (!cfg_valid(&c))
		return false;
	view->cfg = c;
	view->seed =
	    c.flags & FAB_LINK_SEEDED
		? c.seed
		: derived_seed(fab->seed, __atomic_load_n(&fab->ports[src].addr, __ATOMIC_RELAXED),
			       __atomic_load_n(&fab->ports[dst].addr, __ATOMIC_RELAXED));
	view->cfg.seed = view->seed;
	view->seed_gen = seed_gen;
	view->nth_gen = nth_gen;
	view->valid = true;
	return true;
}

/* ---- Writers ------------------------------------------------------------------ */

static bool pid_alive(uint32_t pid)
{
	return pid && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Take the link's writer lock; *locked is the odd word now in cfg_seq.
 * A writer that died holding it is taken over. */
static int writer_lock(struct fab_seg_link *l, uint64_t *locked)
{
	const uint64_t me = (uint64_t)(uint32_t)getpid() << 32;
	uint64_t deadline = mono_ns() + WRITER_WAIT_NS, cur, next;
	struct timespec pause = {.tv_nsec = 100000};

	for (;;) {
		cur = __atomic_load_n(&l->cfg_seq, __ATOMIC_RELAXED);
		if (!(seq_of(cur) & 1))
			next = me | (uint32_t)(seq_of(cur) + 1);
		else if (!pid_alive((uint32_t)(cur >> 32)))
			next = me | (uint32_t)(seq_of(cur) + 2); /* stays odd */
		else
			next = 0;
		if (next && __atomic_compare_exchange_n(&l->cfg_seq, &cur, next, false,
							__ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
			*locked = next;
			return 0;
		}
		if (!next) {
			if (mono_ns() >= deadline)
				return -EBUSY;
			nanosleep(&pause, NULL);
		}
	}
}

static void writer_unlock(struct fab_seg_link *l, uint64_t locked)
{
	__atomic_store_n(&l->cfg_seq, (uint64_t)(uint32_t)(seq_of(locked) + 1), __ATOMIC_RELEASE);
}

void fab_link_config_merge(struct fab_link_config *dst, const struct fab_link_config *src,
			   uint32_t mask)
{
	if (mask & FAB_LF_LATENCY)
		dst->latency_ns = src->latency_ns;
	if (mask & FAB_LF_JITTER)
		dst->jitter_ns = src->jitter_ns;
	if (mask & FAB_LF_RATE)
		dst->rate_mbps = src->rate_mbps;
	if (mask & FAB_LF_LOSS)
		dst->loss_ppb = src->loss_ppb;
	if (mask & FAB_LF_DUP)
		dst->dup_ppb = src->dup_ppb;
	if (mask & FAB_LF_REORDER)
		dst->reorder_ppb = src->reorder_ppb;
	if (mask & FAB_LF_REORDER_GAP)
		dst->reorder_gap_ns = src->reorder_gap_ns;
	if (mask & FAB_LF_CORRUPT)
		dst->corrupt_ppb = src->corrupt_ppb;
	if (mask & FAB_LF_DELAY)
		dst->delay_ns = src->delay_ns;
	if (mask & FAB_LF_DELAY_PPB)
		dst->delay_ppb = src->delay_ppb;
	if (mask & FAB_LF_NTH) {
		dst->nth = src->nth;
		dst->nth_opcode = src->nth_opcode;
		dst->nth_qpn = src->nth_qpn;
	}
	if (mask & FAB_LF_DOWN)
		dst->flags = (dst->flags & ~FAB_LINK_DOWN) | (src->flags & FAB_LINK_DOWN);
	if (mask & FAB_LF_SEED) {
		dst->seed = src->seed;
		dst->flags |= FAB_LINK_SEEDED;
	}
}

uint32_t fab_link_config_diff(const struct fab_link_config *a, const struct fab_link_config *b)
{
	uint32_t d = 0;

	d |= a->latency_ns != b->latency_ns ? FAB_LF_LATENCY : 0;
	d |= a->jitter_ns != b->jitter_ns ? FAB_LF_JITTER : 0;
	d |= a->rate_mbps != b->rate_mbps ? FAB_LF_RATE : 0;
	d |= a->loss_ppb != b->loss_ppb ? FAB_LF_LOSS : 0;
	d |= a->dup_ppb != b->dup_ppb ? FAB_LF_DUP : 0;
	d |= a->reorder_ppb != b->reorder_ppb ? FAB_LF_REORDER : 0;
	d |= a->reorder_gap_ns != b->reorder_gap_ns ? FAB_LF_REORDER_GAP : 0;
	d |= a->corrupt_ppb != b->corrupt_ppb ? FAB_LF_CORRUPT : 0;
	d |= a->delay_ns != b->delay_ns ? FAB_LF_DELAY : 0;
	d |= a->delay_ppb != b->delay_ppb ? FAB_LF_DELAY_PPB : 0;
	d |= a->nth != b->nth || a->nth_opcode != b->nth_opcode || a->nth_qpn != b->nth_qpn
		 ? FAB_LF_NTH
		 : 0;
	d |= (a->flags ^ b->flags) & FAB_LINK_DOWN ? FAB_LF_DOWN : 0;
	return d;
}

static int link_slots(struct fab *fab, uint32_t src, uint32_t dst, struct fab_seg_link **l,
		      uint32_t *s, uint32_t *d)
{
	int a = fab_slot_find(fab, src), b = fab_slot_find(fab, dst);

	if (a < 0 || b < 0)
		return -ENOENT;
	*s = (uint32_t)a;
	*d = (uint32_t)b;
	*l = fab_link_at(fab, *s, *d);
	return 0;
}

int fab_link_set(struct fab *fab, uint32_t src, uint32_t dst, const struct fab_link_config *cfg,
		 uint32_t fields)
{
	struct fab_link_config cur, want;
	struct fab_seg_link *l;
	uint64_t locked;
	uint32_t s, d;
	int rc;

	if (fields & ~FAB_LF_ALL)
		return -EINVAL;
	/* Check the new values alone, before touching anything. */
	fab_link_config_default(&want);
	fab_link_config_merge(&want, cfg, fields);
	if (!cfg_valid(&want))
		return -EINVAL;
	rc = link_slots(fab, src, dst, &l, &s, &d);
	if (rc)
		return rc;
	rc = writer_lock(l, &locked);
	if (rc)
		return rc;
	cfg_load(l, &cur);
	/* Words a dead writer left half written, or a hostile one garbled. */
	if (!cfg_valid(&cur))
		fab_link_config_default(&cur);
	fab_link_config_merge(&cur, cfg, fields);
	cfg_store(l, &cur);
	if (fields & FAB_LF_SEED)
		__atomic_store_n(&l->seed_gen, l->seed_gen + 1, __ATOMIC_RELAXED);
	if (fields & FAB_LF_NTH)
		__atomic_store_n(&l->nth_gen, l->nth_gen + 1, __ATOMIC_RELAXED);
	writer_unlock(l, locked);
	return 0;
}

int fab_link_get(struct fab *fab, uint32_t src, uint32_t dst, struct fab_link_config *cfg)
{
	uint32_t s, d, seq, sg, ng;
	struct fab_seg_link *l;
	int rc, tries;

	rc = link_slots(fab, src, dst, &l, &s, &d);
	if (rc)
		return rc;
	for (tries = 0; tries < 1000; tries++) {
		if (cfg_read(l, cfg, &seq, &sg, &ng))
			break;
		sched_yield();
	}
	/* A writer that never finishes (it died): take the words as they are. */
	if (tries == 1000)
		cfg_load(l, cfg);
	/* The ports treat such a link as they would a default one; a person
	 * looking at it must see what is really there. */
	if (!cfg_valid(cfg))
		return -EBADMSG;
	if (!(cfg->flags & FAB_LINK_SEEDED))
		cfg->seed = derived_seed(fab->seed, src, dst);
	return 0;
}

int fab_link_stats(struct fab *fab, uint32_t src, uint32_t dst, struct fab_link_stats *st)
{
	struct fab_seg_link *l;
	uint32_t s, d, prod, cons;
	int rc;

	rc = link_slots(fab, src, dst, &l, &s, &d);
	if (rc)
		return rc;
	memset(st, 0, sizeof(*st));
#define FAB_X_TX(name, desc) st->tx.name = __atomic_load_n(&l->tx.name, __ATOMIC_RELAXED);
#define FAB_X_RX(name, desc) st->rx.name = __atomic_load_n(&l->rx.name, __ATOMIC_RELAXED);
	FAB_LINK_TX_COUNTERS(FAB_X_TX)
	FAB_LINK_RX_COUNTERS(FAB_X_RX)
#undef FAB_X_TX
#undef FAB_X_RX
	/* frames last: every other tx counter counts some of the frames
	 * offered, so read before it, none can exceed it (fab.h). */
	st->tx.frames = __atomic_load_n(&l->tx.frames, __ATOMIC_RELAXED);
	prod = __atomic_load_n(&l->prod, __ATOMIC_RELAXED);
	cons = __atomic_load_n(&l->cons, __ATOMIC_RELAXED);
	st->prod = prod;
	st->cons = cons;
	st->ring_bad = prod - cons > fab->ring_depth;
	st->queued = st->ring_bad ? 0 : prod - cons;
	st->nth_matched = __atomic_load_n(&l->nth_matched, __ATOMIC_RELAXED);
	return 0;
}

/* ---- The link model --------------------------------------------------------------- */

/* Offsets in a RoCEv2 frame: Ethernet 14 + IPv4 20 + UDP 8, then the BTH. */
#define BTH_OFF 42u
#define BTH_LEN 12u
#define BTH_DQPN_OFF (BTH_OFF + 5)
#define ICRC_LEN 4u

static bool nth_matches(const struct fab_link_config *c, const uint8_t *f, uint32_t len)
{
	uint32_t qpn;

	if (c->nth_opcode != FAB_ANY && (len <= BTH_OFF || f[BTH_OFF] != c->nth_opcode))
		return false;
	if (c->nth_qpn == FAB_ANY)
		return true;
	if (len < BTH_DQPN_OFF + 3)
		return false;
	qpn = (uint32_t)f[BTH_DQPN_OFF] << 16 | (uint32_t)f[BTH_DQPN_OFF + 1] << 8 |
	      f[BTH_DQPN_OFF + 2];
	return qpn == c->nth_qpn;
}

/* The bytes a corruption may hit: after the BTH and before the ICRC, so
 * that the frame still reaches its QP and its ICRC check fails; shorter
 * frames take what they have. */
static void corrupt_region(uint32_t len, uint32_t *start, uint32_t *bytes)
{
	if (len > BTH_OFF + BTH_LEN + ICRC_LEN)
		*start = BTH_OFF + BTH_LEN;
	else if (len > BTH_OFF + ICRC_LEN)
		*start = BTH_OFF;
	else
		*start = 0;
	*bytes = len > *start + ICRC_LEN ? len - *start - ICRC_LEN : len - *start;
}

void fab_link_decide(struct fab_seg_link *l, const struct fab_link_view *view, const uint8_t *frame,
		     uint32_t len, uint64_t now, struct fab_verdict *v)
{
	const struct fab_link_config *c = &view->cfg;
	struct fab_link_tx_counters *tx = &l->tx;
	uint64_t seq, start, leave, due, last_due, busy, seed = view->seed;
	uint32_t first, bytes, m;

	memset(v, 0, sizeof(*v));
	/*
	 * The sender's state on the link lives in the segment (so that it
	 * survives a reopen and `nicsim link show` sees it), where any process
	 * can write it: each word is read once, and a time no frame of ours
	 * could have set is taken for now rather than followed.
	 */
	if (FAB_READ_ONCE(l->seed_gen_seen) != view->seed_gen) {
		__atomic_store_n(&l->rng_seq, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&l->seed_gen_seen, view->seed_gen, __ATOMIC_RELAXED);
	}
	if (FAB_READ_ONCE(l->nth_gen_seen) != view->nth_gen) {
		__atomic_store_n(&l->nth_matched, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&l->nth_gen_seen, view->nth_gen, __ATOMIC_RELAXED);
	}
	seq = FAB_READ_ONCE(l->rng_seq);
	__atomic_store_n(&l->rng_seq, seq + 1, __ATOMIC_RELAXED);
	v->link_seq = seq;
	fab_count(&tx->frames, 1);
	fab_count(&tx->bytes, len);

	if (c->flags & FAB_LINK_DOWN) {
		v->marks = FAB_MARK_DROP_DOWN;
		fab_count(&tx->dropped_down, 1);
		return;
	}
	if (c->nth && nth_matches(c, frame, len)) {
		m = FAB_READ_ONCE(l->nth_matched);
		if (m != UINT32_MAX)
			__atomic_store_n(&l->nth_matched, ++m, __ATOMIC_RELAXED);
		if (m == c->nth) {
			v->marks = FAB_MARK_DROP_NTH;
			fab_count(&tx->dropped_nth, 1);
			return;
		}
	}
	/* Serialisation: the link is busy until its previous frame has left. */
	leave = now;
	if (c->rate_mbps) {
		busy = FAB_READ_ONCE(l->busy_until_ns);
		if (busy > now + BUSY_MAX_AHEAD_NS)
			busy = now;
		start = busy > now ? busy : now;
		if (start - now > FAB_LINK_QUEUE_NS) {
			v->marks = FAB_MARK_DROP_QUEUE;
			fab_count(&tx->dropped_queue, 1);
			return;
		}
		leave = start + (uint64_t)len * 8000u / c->rate_mbps;
		__atomic_store_n(&l->busy_until_ns, leave, __ATOMIC_RELAXED);
	}
	/* Lost on the wire, after taking its time on it. */
	if (chance(seed, seq, RNG_LOSS, c->loss_ppb)) {
		v->marks = FAB_MARK_DROP_LOSS;
		fab_count(&tx->dropped_loss, 1);
		return;
	}
	/* Latency and jitter keep the link's order ... */
	due = leave + c->latency_ns + uniform(seed, seq, RNG_JITTER, c->jitter_ns);
	last_due = FAB_READ_ONCE(l->last_due_ns);
	if (due < last_due && last_due - due <= LAST_DUE_MAX_AHEAD_NS)
		due = last_due;
	__atomic_store_n(&l->last_due_ns, due, __ATOMIC_RELAXED);
	/* ... the delay and reorder rules take a frame out of it. */
	if (c->delay_ns && chance(seed, seq, RNG_DELAY, c->delay_ppb)) {
		due += c->delay_ns + uniform(seed, seq, RNG_DELAY_JITTER, c->jitter_ns);
		v->marks |= FAB_MARK_DELAYED;
		fab_count(&tx->delayed, 1);
	}
	if (chance(seed, seq, RNG_REORDER, c->reorder_ppb)) {
		due += c->reorder_gap_ns ? c->reorder_gap_ns : FAB_REORDER_GAP_NS;
		v->marks |= FAB_MARK_REORDERED;
		fab_count(&tx->reordered, 1);
	}
	if (chance(seed, seq, RNG_CORRUPT, c->corrupt_ppb)) {
		corrupt_region(len, &first, &bytes);
		v->corrupt_bit = first * 8u + (uint32_t)(rng(seed, seq, RNG_CORRUPT_BIT) %
							 ((uint64_t)bytes * 8u));
		v->marks |= FAB_MARK_CORRUPTED;
		fab_count(&tx->corrupted, 1);
	}
	v->duplicate = chance(seed, seq, RNG_DUP, c->dup_ppb);
	v->due_ns = due;
}

/*
 * Faults of a scenario: the `link` set-up, `fault` rules armed now, after an
 * operation ended or at a time, healed by `heal`, after a duration or after
 * N frames on the link, and at the end whatever happens; and the check that
 * each fault fired (scn_run_priv.h).
 *
 * A fault is link settings in the words of `nicsim link set`.  A link's
 * settings are composed: its baseline (what it had when the first fault on
 * it began: the `link` lines, the defaults) overlaid by every fault armed
 * on it, in the order they began, each over the fields its words name.
 * Arming or healing a fault recomputes that and writes to the fabric the
 * fields whose value changed (so a heal leaves every other fault in force,
 * whatever order faults are healed in, and a drop-nth count still running
 * is not restarted by another fault's change).  Whether it fired is read
 * from the link's own counters of those rules (dropped_loss for loss,
 * dropped_nth for drop-nth, ...), their growth between arming and healing;
 * rules without a counter of their own (latency, jitter, rate) fired when
 * any frame crossed the link meanwhile.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "scn_run_priv.h"

#define FRAMES_POLL_NS 1000000ull /* re-read a link while a fault counts its frames */

/* The words of a statement as fab_link_parse takes them. */
static void words_of(const struct scn_link_words *w, const char **v)
{
	for (size_t i = 0; i < w->n; i++)
		v[i] = w->word[i];
}

static int parse_words(const struct scn_link_words *w, struct fab_link_config *cfg,
		       uint32_t *fields, char *why, size_t size)
{
	const char *v[SCN_LINK_WORDS_MAX];

	words_of(w, v);
	return fab_link_parse(v, w->n, cfg, fields, why, size);
}

/* The two directed links a statement names (one unless <->). */
static int ends_of(struct scn_runner *r, const struct scn_stmt *st, const struct scn_link_ends *e,
		   uint32_t *src, uint32_t *dst, size_t *n)
{
	struct scn_nicd *a = scn_rt_nic(r, e->src), *b = scn_rt_nic(r, e->dst);

	if (!a || !b) {
		scn_fail(r, st, "%s is not a NIC of this scenario", a ? e->dst : e->src);
		return -ENOENT;
	}
	src[0] = a->addr, dst[0] = b->addr;
	src[1] = b->addr, dst[1] = a->addr;
	*n = e->both ? 2 : 1;
	return 0;
}

int scn_links_setup(struct scn_runner *r)
{
	const struct scn_script *s = r->script;
	struct fab_link_config cfg;
	uint32_t src[2], dst[2], fields;
	char why[SCN_WHY_MAX];
	size_t n;
	int rc;

	for (size_t i = 0; i < s->nlinks; i++) {
		const struct scn_stmt *st = s->links[i];

		if (ends_of(r, st, &st->u.link.ends, src, dst, &n))
			return -ENOENT;
		if (parse_words(&st->u.link.words, &cfg, &fields, why, sizeof(why))) {
			scn_fail(r, st, "link settings: %s", why);
			return -EINVAL;
		}
		for (size_t k = 0; k < n; k++) {
			rc = r->topo.fab ? fab_link_set(r->topo.fab, src[k], dst[k], &cfg, fields)
					 : -ENOENT;
			if (rc) {
				scn_fail(r, st, "cannot set the link: %s", strerror(-rc));
				return rc;
			}
		}
	}
	return 0;
}

/* The counters of the rules fields names, summed: how often they acted. */
static uint64_t rule_hits(const struct fab_link_stats *st, uint32_t fields)
{
	uint64_t hits = 0;

	if (fields & FAB_LF_LOSS)
		hits += st->tx.dropped_loss;
	if (fields & FAB_LF_DUP)
		hits += st->tx.duplicated;
	if (fields & (FAB_LF_REORDER | FAB_LF_REORDER_GAP))
		hits += st->tx.reordered;
	if (fields & FAB_LF_CORRUPT)
		hits += st->tx.corrupted;
	if (fields & (FAB_LF_DELAY | FAB_LF_DELAY_PPB))
		hits += st->tx.delayed;
	if (fields & FAB_LF_NTH)
		hits += st->tx.dropped_nth;
	if (fields & FAB_LF_DOWN)
		hits += st->tx.dropped_down + st->rx.dropped_down_rx;
	if (fields & (FAB_LF_LATENCY | FAB_LF_JITTER | FAB_LF_RATE))
		hits += st->tx.frames;
	return hits;
}

static uint32_t fault_fields(const struct scn_rt_fault *f)
{
	return f->fields;
}

/* The link src -> dst as faults know it, made (its baseline read from the
 * fabric now) the first time a fault touches it; NULL without memory. */
static struct scn_rt_link *link_of(struct scn_runner *r, uint32_t src, uint32_t dst)
{
	struct scn_rt_link *l;

	for (size_t i = 0; i < r->nlinks; i++)
		if (r->links[i].src == src && r->links[i].dst == dst)
			return &r->links[i];
	if (r->nlinks == r->cap_links) {
		size_t ncap = r->cap_links ? 2 * r->cap_links : 8;
		void *bigger = realloc(r->links, ncap * sizeof(*r->links));

		if (!bigger)
			return NULL;
		r->links = bigger;
		r->cap_links = ncap;
	}
	l = &r->links[r->nlinks++];
	memset(l, 0, sizeof(*l));
	l->src = src;
	l->dst = dst;
	if (!r->topo.fab || fab_link_get(r->topo.fab, src, dst, &l->base))
		fab_link_config_default(&l->base);
	l->cur = l->base;
	return l;
}

/* Link l's settings: its baseline, then every fault armed on it in the
 * order they began. */
static void link_compose(const struct scn_runner *r, const struct scn_rt_link *l,
			 struct fab_link_config *cfg)
{
	const struct scn_rt_fault *f;

	*cfg = l->base;
	for (size_t i = 0; i < l->narmed; i++) {
		f = &r->faults[l->armed[i]];
		fab_link_config_merge(cfg, &f->cfg, f->fields);
	}
}

/*
 * Arm (arm true) or heal fault f on link l: its settings before and after,
 * and write the fields that changed.  Arming adds f last (it began last),
 * so its settings go over the link's; healing takes it out and composes
 * the rest again.  Either costs the faults armed on l.  0, -ENOMEM or
 * fab_link_set's error.
 */
static int link_apply(struct scn_runner *r, struct scn_rt_link *l, struct scn_rt_fault *f, bool arm)
{
	size_t fi = (size_t)(f - r->faults), i;
	struct fab_link_config after;
	uint32_t changed;

	for (i = 0; i < l->narmed && l->armed[i] != fi; i++)
		;
	if (arm && i == l->narmed) {
		if (l->narmed == l->cap_armed) {
			size_t ncap = l->cap_armed ? 2 * l->cap_armed : 4;
			size_t *bigger = realloc(l->armed, ncap * sizeof(*l->armed));

			if (!bigger)
				return -ENOMEM;
			l->armed = bigger;
			l->cap_armed = ncap;
		}
		l->armed[l->narmed++] = fi;
		after = l->cur;
		fab_link_config_merge(&after, &f->cfg, f->fields);
	} else if (!arm) {
		if (i < l->narmed) {
			memmove(&l->armed[i], &l->armed[i + 1],
				(l->narmed - i - 1) * sizeof(*l->armed));
			l->narmed--;
		}
		link_compose(r, l, &after);
	} else {
		return 0;
	}
	changed = fab_link_config_diff(&l->cur, &after);
	l->cur = after;
	if (!changed || !r->topo.fab)
		return 0;
	return fab_link_set(r->topo.fab, l->src, l->dst, &after, changed);
}

static void fault_arm(struct scn_runner *r, struct scn_rt_fault *f, uint64_t now)
{
	struct fab_link_config cfg;
	struct fab_link_stats ls;
	uint32_t fields;
	int rc;

	cfg = f->cfg;
	fields = f->fields;
	f->armed_seq = ++r->fault_seq;
	for (size_t k = 0; k < f->nlinks; k++) {
		struct scn_rt_link *l = link_of(r, f->src[k], f->dst[k]);

		memset(&ls, 0, sizeof(ls));
		scn_topo_link_stats(&r->topo, f->src[k], f->dst[k], &ls);
		f->frames0[k] = ls.tx.frames;
		f->hits0[k] = rule_hits(&ls, fields);
		rc = l ? link_apply(r, l, f, true) : -ENOMEM;
		/* A seed the fault names restarts the link's PRNG once, now;
		 * healing leaves it (the composition never writes the seed). */
		if (!rc && (fields & FAB_LF_SEED))
			rc = fab_link_set(r->topo.fab, f->src[k], f->dst[k], &cfg, FAB_LF_SEED);
		if (rc) {
			scn_fail(r, f->st, "fault %s: cannot change the link: %s", f->st->name,
				 strerror(-rc));
			for (size_t j = 0; j <= k; j++) {
				l = link_of(r, f->src[j], f->dst[j]);
				if (l)
					link_apply(r, l, f, false);
			}
			f->state = SCN_RF_HEALED;
			return;
		}
	}
	f->state = SCN_RF_ARMED;
	f->ever_armed = true;
	if (f->st->u.fault.end == SCN_FAULT_FOR_TIME)
		f->heal_at_ns = scn_after_ns(now, f->st->u.fault.for_ns, r->slow);
}

static void fault_heal(struct scn_runner *r, struct scn_rt_fault *f)
{
	struct fab_link_stats ls;
	uint32_t fields = fault_fields(f);
	uint64_t hits;

	if (f->state != SCN_RF_ARMED) {
		f->state = SCN_RF_HEALED;
		return;
	}
	for (size_t k = 0; k < f->nlinks; k++) {
		memset(&ls, 0, sizeof(ls));
		struct scn_rt_link *l = link_of(r, f->src[k], f->dst[k]);

		if (!scn_topo_link_stats(&r->topo, f->src[k], f->dst[k], &ls)) {
			hits = rule_hits(&ls, fields);
			f->hits += hits >= f->hits0[k] ? hits - f->hits0[k] : 0;
		}
		/* Back to the baseline and the faults still armed. */
		if (l)
			link_apply(r, l, f, false);
	}
	f->state = SCN_RF_HEALED;
}

int scn_fault_step(struct scn_runner *r, const struct scn_stmt *st)
{
	const struct scn_fault *fd = &st->u.fault;
	struct scn_rt_fault *f;
	struct fab_link_config cfg;
	uint32_t fields;
	char why[SCN_WHY_MAX];
	void *bigger;

	if (!r->topo.fab) {
		scn_fail(r, st, "fault %s: there is no fabric (no NIC)", st->name);
		return -ENOENT;
	}
	if (parse_words(&fd->words, &cfg, &fields, why, sizeof(why))) {
		scn_fail(r, st, "fault %s: %s", st->name, why);
		return -EINVAL;
	}
	if (r->nfaults == r->cap_faults) {
		size_t ncap = r->cap_faults ? 2 * r->cap_faults : 8;

		bigger = realloc(r->faults, ncap * sizeof(*r->faults));
		if (!bigger)
			return -ENOMEM;
		r->faults = bigger;
		r->cap_faults = ncap;
	}
	f = &r->faults[r->nfaults];
	memset(f, 0, sizeof(*f));
	f->st = st;
	f->cfg = cfg;
	f->fields = fields;
	if (ends_of(r, st, &fd->ends, f->src, f->dst, &f->nlinks))
		return -ENOENT;
	r->nfaults++;
	switch (fd->start) {
	case SCN_FAULT_NOW: fault_arm(r, f, scn_now_ns()); break;
	case SCN_FAULT_AT:
		/* `scn_check` warns that this is time-based. */
		f->arm_at_ns = scn_after_ns(scn_now_ns(), fd->at_ns, r->slow);
		break;
	case SCN_FAULT_AFTER: break;
	}
	return r->out->status == SCN_PASSED ? 0 : -EINVAL;
}

int scn_fault_heal_step(struct scn_runner *r, const struct scn_stmt *st)
{
	for (size_t i = r->nfaults; i-- > 0;)
		if (!strcmp(r->faults[i].st->name, st->u.target)) {
			fault_heal(r, &r->faults[i]);
			return 0;
		}
	scn_fail(r, st, "%s is not a fault set earlier", st->u.target);
	return -ENOENT;
}

/* Whether the operation or step a fault waits for has ended. */
static bool after_done(struct scn_runner *r, const struct scn_rt_fault *f)
{
	struct scn_rt_op *op = scn_rt_op(r, f->st->u.fault.after);

	return op && op->done;
}

uint64_t scn_fault_tick(struct scn_runner *r, uint64_t now, uint64_t *poll_ns)
{
	struct fab_link_stats ls;
	uint64_t next = 0, frames;
	struct scn_rt_fault *f;

	for (size_t i = 0; i < r->nfaults; i++) {
		f = &r->faults[i];
		if (f->state == SCN_RF_WAITING) {
			if ((f->st->u.fault.start == SCN_FAULT_AFTER && after_done(r, f)) ||
			    (f->st->u.fault.start == SCN_FAULT_AT && now >= f->arm_at_ns))
				fault_arm(r, f, now);
			else if (f->st->u.fault.start == SCN_FAULT_AT &&
				 (!next || f->arm_at_ns < next))
				next = f->arm_at_ns;
		}
		if (f->state != SCN_RF_ARMED)
			continue;
		if (f->heal_at_ns) {
			if (now >= f->heal_at_ns)
				fault_heal(r, f);
			else if (!next || f->heal_at_ns < next)
				next = f->heal_at_ns;
		}
		if (f->state == SCN_RF_ARMED && f->st->u.fault.end == SCN_FAULT_FOR_FRAMES) {
			frames = f->frames_before;
			for (size_t k = 0; k < f->nlinks; k++) {
				memset(&ls, 0, sizeof(ls));
				scn_topo_link_stats(&r->topo, f->src[k], f->dst[k], &ls);
				frames += ls.tx.frames - f->frames0[k];
			}
			if (frames >= f->st->u.fault.for_frames)
				fault_heal(r, f);
			else
				*poll_ns = FRAMES_POLL_NS;
		}
	}
	return next;
}

void scn_fault_rebase(struct scn_runner *r, bool renewed)
{
	struct fab_link_stats ls;
	struct scn_rt_fault *f;
	uint64_t hits;

	for (size_t i = 0; i < r->nfaults; i++) {
		f = &r->faults[i];
		if (f->state != SCN_RF_ARMED)
			continue;
		for (size_t k = 0; k < f->nlinks; k++) {
			if (renewed) {
				f->hits0[k] = f->frames0[k] = 0;
				continue;
			}
			memset(&ls, 0, sizeof(ls));
			if (scn_topo_link_stats(&r->topo, f->src[k], f->dst[k], &ls))
				continue;
			hits = rule_hits(&ls, fault_fields(f));
			f->hits += hits >= f->hits0[k] ? hits - f->hits0[k] : 0;
			f->hits0[k] = hits;
			f->frames_before += ls.tx.frames - f->frames0[k];
			f->frames0[k] = ls.tx.frames;
		}
	}
}

void scn_fault_finish(struct scn_runner *r, bool check)
{
	struct scn_rt_fault *f;

	for (size_t i = 0; i < r->nfaults; i++)
		fault_heal(r, &r->faults[i]);
	for (size_t i = 0; check && i < r->nfaults; i++) {
		f = &r->faults[i];
		if (f->st->optional || f->hits)
			continue;
		if (!f->ever_armed)
			scn_fail(r, f->st,
				 "fault %s never fired: it was never armed (%s %s did not happen)",
				 f->st->name,
				 f->st->u.fault.start == SCN_FAULT_AFTER ? "after" : "at",
				 f->st->u.fault.start == SCN_FAULT_AFTER ? f->st->u.fault.after
									 : "its time");
		else
			scn_fail(
			    r, f->st,
			    "fault %s never fired (0 frames matched its rule on %s %s %s while "
			    "it was armed)",
			    f->st->name, f->st->u.fault.ends.src,
			    f->st->u.fault.ends.both ? "<->" : "->", f->st->u.fault.ends.dst);
		scn_outcome_add(r->out->wanted, sizeof(r->out->wanted),
				"fault %s: fired at least once (or mark it optional)", f->st->name);
		scn_outcome_add(r->out->found, sizeof(r->out->found), "fault %s: fired 0 times",
				f->st->name);
	}
}

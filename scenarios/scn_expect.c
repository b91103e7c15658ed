/*
 * Waits on counters and frames, `settle`, and the expectations: memory,
 * TPT, counters, refusals, frames (scn_run_priv.h).  Each failure says what
 * was expected and what was found, field by field.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fab_wire.h"
#include "scn_agent_client.h"
#include "fab_addr.h"
#include "scn_run_priv.h"
#include "ws2san.h"

#define COUNTER_GAP_MIN_NS 2000000ull  /* first re-read of a counter a wait watches */
#define COUNTER_GAP_MAX_NS 10000000ull /* backing off to this */
#define PEEK_CHUNK 1024u               /* SCN_AGENT_PEEK_MAX */
#define PEEK_TIMEOUT_MS 5000
#define MEM_MAX (64ull << 20)   /* the largest range kept for `unchanged` (scn_mem_snapshot) */
#define CMP_CHUNK (1u << 20)    /* an expectation compares its range piece by piece */
#define CMP_READ_MAX (2u << 20) /* bytes of differing pieces read to show and count */
#define SUM_BYTES_PER_MS (256u << 10) /* a slow agent's CRC-32 speed, for its timeout */

/* ---- Patterns ------------------------------------------------------------------ */

/* The argument the agent and the runner use: random data follows the
 * scenario's seed too, so that another seed gives other data. */
static uint64_t pattern_arg(const struct scn_runner *r, const struct scn_pattern *p)
{
	if (p->kind == SCN_PATTERN_RANDOM)
		return p->arg ^ r->topo.seed * 0x9e3779b97f4a7c15ull;
	return p->arg;
}

/* Bytes first .. first + len - 1 of pattern p as the host agent fills them. */
static void pattern_fill(const struct scn_runner *r, const struct scn_pattern *p, uint64_t first,
			 void *buf, size_t len)
{
	struct scn_pattern as_filled = {.kind = p->kind, .arg = pattern_arg(r, p)};

	scn_pattern_fill(&as_filled, first, buf, len);
}

void scn_pattern_words(const struct scn_runner *r, const struct scn_pattern *p, char *buf,
		       size_t size)
{
	if (p->kind == SCN_PATTERN_ZERO)
		snprintf(buf, size, "zero");
	else
		snprintf(buf, size, "%s %llu", scn_pattern_name(p->kind),
			 (unsigned long long)pattern_arg(r, p));
}

/* A pattern as the script writes it ("random 5", not the generator's
 * state that scn_pattern_words gives the agent), for messages. */
static void pattern_text(const struct scn_pattern *p, char *buf, size_t size)
{
	if (p->kind == SCN_PATTERN_ZERO)
		snprintf(buf, size, "zero");
	else if (p->kind == SCN_PATTERN_BYTE)
		snprintf(buf, size, "byte 0x%02llx", (unsigned long long)p->arg);
	else
		snprintf(buf, size, "%s %llu", scn_pattern_name(p->kind),
			 (unsigned long long)p->arg);
}

/* ---- Memory ---------------------------------------------------------------------- */

/* The value of a hex digit, or -1. */
static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int scn_peek(struct scn_runner *r, struct scn_rt_host *h, const char *buf, uint64_t off,
	     uint64_t len, uint8_t *out, char *why, size_t size)
{
	char line[SCN_AGENT_LINE_MAX];
	struct scn_reply rep;
	uint64_t done = 0, n;
	const char *p;
	int rc;

	(void)r;
	while (done < len) {
		n = len - done < PEEK_CHUNK ? len - done : PEEK_CHUNK;
		rc = scn_agent_call(h->agent, line, sizeof(line), PEEK_TIMEOUT_MS,
				    "peek %s %llu %llu", buf, (unsigned long long)(off + done),
				    (unsigned long long)n);
		if (rc < 0) {
			snprintf(why, size, "host %s did not answer a peek: %s", h->name,
				 strerror(-rc));
			return rc;
		}
		if (scn_reply_parse(line, &rep) || rep.kind != SCN_REPLY_OK || !rep.rest) {
			snprintf(why, size, "host %s cannot read %s: %s", h->name, buf, line);
			return -EIO;
		}
		p = strstr(rep.rest, "x:");
		if (!p) {
			snprintf(why, size, "host %s answered a peek with %s", h->name, line);
			return -EIO;
		}
		p += 2;
		for (uint64_t i = 0; i < n; i++, p += 2) {
			int hi = hex_digit(p[0]), lo = hi < 0 ? -1 : hex_digit(p[1]);

			if (lo < 0) {
				snprintf(why, size, "host %s answered a peek short", h->name);
				return -EIO;
			}
			out[done + i] = (uint8_t)(hi << 4 | lo);
		}
		done += n;
	}
	return 0;
}

/* The CRC-32 of a range of host h's buffer, computed by the agent (one
 * request, whatever the length).  0 or an error with why. */
static int agent_sum(struct scn_rt_host *h, const char *buf, uint64_t off, uint64_t len,
		     uint32_t *crc, char *why, size_t size)
{
	char line[SCN_AGENT_LINE_MAX], val[32];
	struct scn_reply rep;
	int rc;

	/* A whole buffer of up to 1 GiB takes the agent a while. */
	rc = scn_agent_call(h->agent, line, sizeof(line),
			    PEEK_TIMEOUT_MS + (int)(len / SUM_BYTES_PER_MS), "sum %s %llu %llu",
			    buf, (unsigned long long)off, (unsigned long long)len);
	if (rc < 0) {
		snprintf(why, size, "host %s did not answer a sum: %s", h->name, strerror(-rc));
		return rc;
	}
	if (scn_reply_parse(line, &rep) || rep.kind != SCN_REPLY_OK ||
	    !scn_reply_get(&rep, "crc32", val, sizeof(val))) {
		snprintf(why, size, "host %s cannot read %s: %.300s", h->name, buf, line);
		return -EIO;
	}
	*crc = (uint32_t)strtoul(val, NULL, 0);
	return 0;
}

void scn_mem_forget(struct scn_rt_buf *b)
{
	for (size_t i = 0; i < b->nsnaps; i++)
		free(b->snaps[i].bytes);
	free(b->snaps);
	b->snaps = NULL;
	b->nsnaps = 0;
	b->snap_lost = NULL;
}

void scn_mem_snapshot(struct scn_runner *r, const struct scn_stmt *st, struct scn_rt_buf *b,
		      uint64_t off, uint64_t len)
{
	struct scn_rt_snap *grown, *sn;
	char why[SCN_WHY_MAX];
	uint8_t *bytes;
	size_t keep = 0;

	if (len > MEM_MAX || !b->host->agent || b->host->gone) {
		b->snap_lost = st;
		return;
	}
	bytes = malloc(len ? len : 1);
	grown = bytes ? realloc(b->snaps, (b->nsnaps + 1) * sizeof(*grown)) : NULL;
	if (!grown || scn_peek(r, b->host, b->name, off, len, bytes, why, sizeof(why))) {
		free(bytes);
		if (grown)
			b->snaps = grown;
		b->snap_lost = st;
		return;
	}
	b->snaps = grown;
	/* Older copies that the new one covers whole are of no more use. */
	for (size_t i = 0; i < b->nsnaps; i++) {
		sn = &b->snaps[i];
		if (sn->off >= off && sn->off + sn->len <= off + len)
			free(sn->bytes);
		else
			b->snaps[keep++] = *sn;
	}
	b->snaps[keep] = (struct scn_rt_snap){.st = st, .off = off, .len = len, .bytes = bytes};
	b->nsnaps = keep + 1;
}

/*
 * What b[off..off+len) should hold: its fill, overlaid by the copies taken
 * after its host's writing steps, oldest first.  words names it: the fill
 * pattern, or the line of the last step whose copy the range overlaps.
 */
static void mem_expected(const struct scn_runner *r, const struct scn_rt_buf *b, uint64_t off,
			 uint64_t len, uint8_t *want, char *words, size_t size)
{
	const struct scn_rt_snap *sn, *last = NULL;
	uint64_t from, to;

	pattern_fill(r, &b->fill, off, want, len);
	for (size_t i = 0; i < b->nsnaps; i++) {
		sn = &b->snaps[i];
		from = sn->off > off ? sn->off : off;
		to = sn->off + sn->len < off + len ? sn->off + sn->len : off + len;
		if (from >= to)
			continue;
		memcpy(want + (from - off), sn->bytes + (from - sn->off), to - from);
		last = sn;
	}
	if (last)
		snprintf(words, size, "what it held after line %u", last->st->loc.line);
	else
		pattern_text(&b->fill, words, size);
}

static int mem_range(struct scn_runner *r, const struct scn_stmt *st, const char *host,
		     const struct scn_range *rg, struct scn_rt_host **h, uint64_t *off,
		     uint64_t *len)
{
	struct scn_rt_buf *b = scn_rt_buf(r, rg->name);

	*h = scn_rt_host(r, host);
	if (!*h || !(*h)->agent || (*h)->gone) {
		scn_fail(r, st, "host %s is not running: its memory cannot be read", host);
		return -ESRCH;
	}
	if (!b) {
		scn_fail(r, st, "%s is not a buffer made by a `buffer` step", rg->name);
		return -ENOENT;
	}
	*off = rg->form == SCN_RANGE_WHOLE ? 0 : rg->off;
	*len = rg->form == SCN_RANGE_SPAN ? rg->end - rg->off
	       : *off <= b->size          ? b->size - *off
					  : 0;
	if (*off > b->size || *len > b->size - *off) {
		scn_fail(r, st, "%s[%llu..%llu] is outside buffer %s (%llu bytes)", rg->name,
			 (unsigned long long)*off, (unsigned long long)(*off + *len), rg->name,
			 (unsigned long long)b->size);
		return -ERANGE;
	}
	return 0;
}

/* What an expectation compares, piece by piece (mem_compare). */
struct mem_cmp {
	const struct scn_mem *m;
	struct scn_rt_host *h, *ph; /* the host, and the peer's host (== peer) */
	struct scn_rt_buf *b;       /* the buffer (`unchanged`) */
	struct scn_pattern pat;     /* the pattern (== pattern) */
	uint64_t off, poff, len;
	char words[2 * SCN_NAME_MAX + 8];
};

/* What piece [at, at+n) of the range should hold, into want: the
 * pattern's bytes, what the buffer held (`unchanged`), or the peer's
 * bytes, read only when the checksums of the two pieces differ and read
 * is true (*same says whether they are equal).  0 or an error with why. */
static int mem_want(struct scn_runner *r, struct mem_cmp *c, uint64_t at, uint64_t n, uint8_t *want,
		    bool read, bool *same, char *why, size_t size)
{
	char words[sizeof(c->words)];
	uint32_t crc, pcrc;
	int rc;

	*same = false;
	switch (c->m->check) {
	case SCN_MEM_PEER:
		rc = agent_sum(c->ph, c->m->peer.name, c->poff + at, n, &pcrc, why, size);
		if (!rc)
			rc = agent_sum(c->h, c->m->range.name, c->off + at, n, &crc, why, size);
		if (rc || crc == pcrc || !read) {
			*same = !rc && crc == pcrc;
			return rc;
		}
		return scn_peek(r, c->ph, c->m->peer.name, c->poff + at, n, want, why, size);
	case SCN_MEM_UNCHANGED:
		/* Named after a copy the range holds, in any piece. */
		mem_expected(r, c->b, c->off + at, n, want, words, sizeof(words));
		if (!strncmp(words, "what it held", 12))
			snprintf(c->words, sizeof(c->words), "%s", words);
		break;
	default: pattern_fill(r, &c->pat, at, want, n); break;
	}
	rc = agent_sum(c->h, c->m->range.name, c->off + at, n, &crc, why, size);
	if (!rc && crc == fab_crc32(0, want, (size_t)n))
		*same = true;
	return rc;
}

/*
 * Compare the range piece by piece (CMP_CHUNK bytes): the agent's
 * checksum of a piece against the expected bytes' first, so that a range
 * that holds what is expected costs one request a piece (a 1 GiB buffer
 * in seconds), and only pieces that differ are read, CMP_READ_MAX bytes
 * of them at most.  Past that, each piece that differs counts as one
 * byte and the count is "at least".  The hex diff shows the first piece
 * that differs.  0, -EINVAL (a difference, failed) or an error.
 */
static int mem_compare(struct scn_runner *r, const struct scn_stmt *st, struct mem_cmp *c)
{
	uint64_t at, n, diff = 0, read = 0, d;
	uint8_t *want = malloc(CMP_CHUNK), *got = malloc(CMP_CHUNK);
	uint8_t *fwant = NULL, *fgot = NULL;
	uint64_t first_at = 0, first_n = 0;
	char why[SCN_WHY_MAX];
	bool same, at_least = false;
	int rc = 0;

	if (!want || !got) {
		rc = -ENOMEM;
		goto out;
	}
	for (at = 0; at < c->len; at += CMP_CHUNK) {
		n = c->len - at < CMP_CHUNK ? c->len - at : CMP_CHUNK;
		rc = mem_want(r, c, at, n, want, read < CMP_READ_MAX, &same, why, sizeof(why));
		if (rc) {
			scn_fail(r, st, "%s", why);
			goto out;
		}
		if (same)
			continue;
		if (read >= CMP_READ_MAX) {
			diff++;
			at_least = true;
			continue;
		}
		rc = scn_peek(r, c->h, c->m->range.name, c->off + at, n, got, why, sizeof(why));
		if (rc) {
			scn_fail(r, st, "%s", why);
			goto out;
		}
		read += n;
		d = scn_diff_count(want, got, n);
		if (!d) /* a CRC-32 that differs over equal bytes: not from this world */
			continue;
		diff += d;
		if (!fwant) {
			fwant = want, fgot = got;
			want = malloc(CMP_CHUNK), got = malloc(CMP_CHUNK);
			first_at = at, first_n = n;
			if (!want || !got) {
				rc = -ENOMEM;
				goto out;
			}
		}
	}
	if (!diff)
		goto out;
	scn_hexdiff_rows(fwant, fgot, first_n, c->off + first_at, diff, c->len, at_least,
			 r->out->detail, sizeof(r->out->detail));
	scn_fail(r, st, "%s %s[%llu..%llu] does not hold %s: %s%llu byte%s differ", c->m->host,
		 c->m->range.name, (unsigned long long)c->off,
		 (unsigned long long)(c->off + c->len), c->words, at_least ? "at least " : "",
		 (unsigned long long)diff, diff == 1 ? "" : "s");
	scn_outcome_add(r->out->wanted, sizeof(r->out->wanted), "%s[%llu..%llu]: %s%s",
			c->m->range.name, (unsigned long long)c->off,
			(unsigned long long)(c->off + c->len),
			c->m->check == SCN_MEM_UNCHANGED ? "unchanged, " : "", c->words);
	scn_outcome_add(r->out->found, sizeof(r->out->found),
			"%s%llu differing bytes (hex diff below)", at_least ? "at least " : "",
			(unsigned long long)diff);
	rc = -EINVAL;
out:
	free(want);
	free(got);
	free(fwant);
	free(fgot);
	return rc;
}

static int expect_mem(struct scn_runner *r, const struct scn_stmt *st)
{
	const struct scn_mem *m = &st->u.mem;
	struct mem_cmp c = {.m = m};
	uint64_t plen;
	char why[SCN_WHY_MAX];
	uint32_t crc;
	int rc;

	rc = mem_range(r, st, m->host, &m->range, &c.h, &c.off, &c.len);
	if (rc)
		return rc;
	switch (m->check) {
	case SCN_MEM_CHECKSUM:
		rc = agent_sum(c.h, m->range.name, c.off, c.len, &crc, why, sizeof(why));
		if (rc) {
			scn_fail(r, st, "%s", why);
			return rc;
		}
		if (crc != m->checksum) {
			scn_fail(r, st, "the checksum of %s[%llu..%llu] on %s differs",
				 m->range.name, (unsigned long long)c.off,
				 (unsigned long long)(c.off + c.len), m->host);
			scn_outcome_add(r->out->wanted, sizeof(r->out->wanted), "crc32: 0x%08x",
					m->checksum);
			scn_outcome_add(r->out->found, sizeof(r->out->found), "crc32: 0x%08x", crc);
			return -EINVAL;
		}
		return 0;
	case SCN_MEM_PEER:
		rc = mem_range(r, st, m->peer_host, &m->peer, &c.ph, &c.poff, &plen);
		if (rc)
			return rc;
		if (plen != c.len) {
			scn_fail(r, st, "the two ranges differ in length (%llu and %llu bytes)",
				 (unsigned long long)c.len, (unsigned long long)plen);
			return -EINVAL;
		}
		snprintf(c.words, sizeof(c.words), "%s %s", m->peer_host, m->peer.name);
		break;
	case SCN_MEM_UNCHANGED:
		c.b = scn_rt_buf(r, m->range.name);
		if (c.b->snap_lost) {
			scn_fail(r, st,
				 "cannot tell whether %s changed: the runner could not keep a copy "
				 "of it after line %u (over %llu bytes, or host %s gone)",
				 m->range.name, c.b->snap_lost->loc.line,
				 (unsigned long long)MEM_MAX, c.b->host->name);
			return -EIO;
		}
		/* The words: from the first piece (mem_expected names the
		 * last copy it used). */
		pattern_text(&c.b->fill, c.words, sizeof(c.words));
		break;
	default:
		c.pat = m->pattern;
		pattern_text(&c.pat, c.words, sizeof(c.words));
		break;
	}
	return mem_compare(r, st, &c);
}

/* ---- Comparisons ----------------------------------------------------------------- */

static void cmp_text(const struct scn_cmp *c, char *buf, size_t size)
{
	static const char *const ops[] = {"==", "!=", "<", "<=", ">", ">="};

	if (c->op == SCN_CMP_IN)
		snprintf(buf, size, "in %llu..%llu", (unsigned long long)c->a,
			 (unsigned long long)c->b);
	else
		snprintf(buf, size, "%s %llu", ops[c->op], (unsigned long long)c->a);
}

/* ---- Counters -------------------------------------------------------------------- */

static int counter_now(struct scn_runner *r, const struct scn_stmt *st, const struct scn_counter *c,
		       uint64_t *value, uint64_t *base)
{
	struct scn_nicd *n = scn_rt_nic(r, c->nic);
	struct nic_stats stats;
	uint64_t words[sizeof(stats) / sizeof(uint64_t)];
	char why[SCN_WHY_MAX];
	struct scn_rt_mark *m = NULL;
	int idx, rc;

	idx = scn_topo_counter_index(c->counter);
	if (!n || idx < 0) {
		scn_fail(r, st, "%s.%s is not a NIC counter (nicsim stats names them)", c->nic,
			 c->counter);
		return -ENOENT;
	}
	rc = scn_topo_stats(&r->topo, n, &stats, why, sizeof(why));
	if (rc) {
		scn_fail(r, st, "%s", why);
		return rc;
	}
	memcpy(words, &stats, sizeof(words));
	*value = words[idx];
	*base = 0;
	if (!c->delta)
		return 0;
	for (size_t i = r->nmarks; i-- > 0;)
		if (!strcmp(r->marks[i].name, c->mark)) {
			m = &r->marks[i];
			break;
		}
	if (!m) {
		scn_fail(r, st, "mark %s was not taken before this step", c->mark);
		return -ENOENT;
	}
	if (!m->have[n - r->topo.nics]) {
		scn_fail(r, st, "NIC %s was not running at mark %s", n->name,
			 c->mark[0] ? c->mark : "(the start)");
		return -ENOENT;
	}
	memcpy(words, &m->stats[n - r->topo.nics], sizeof(words));
	*base = words[idx];
	return 0;
}

/* waited_ns: how long a wait waited before its deadline, 0 for an expect. */
static void counter_fail(struct scn_runner *r, const struct scn_stmt *st,
			 const struct scn_counter *c, uint64_t value, uint64_t base,
			 uint64_t waited_ns)
{
	char want[64], when[128] = "";

	cmp_text(&c->cmp, want, sizeof(want));
	/* A wait the scenario's budget cut short says so: its own `within`
	 * did not run out. */
	if (waited_ns && scn_now_ns() >= r->deadline)
		snprintf(when, sizeof(when),
			 " after waiting %.3f s, when the scenario's timeout (%.3f s) ran out",
			 waited_ns / 1e9, (r->deadline - r->t0) / 1e9);
	else if (waited_ns)
		snprintf(when, sizeof(when), " after waiting %.3f s", waited_ns / 1e9);
	scn_fail(r, st, "counter %s.%s%s is %llu%s, not %s", c->nic, c->counter,
		 c->delta ? " delta" : "", (unsigned long long)(value - base), when, want);
	scn_outcome_add(r->out->wanted, sizeof(r->out->wanted), "%s.%s%s: %s", c->nic, c->counter,
			c->delta ? " delta" : "", want);
	scn_outcome_add(r->out->found, sizeof(r->out->found), "%s.%s%s: %llu", c->nic, c->counter,
			c->delta ? " delta" : "", (unsigned long long)(value - base));
	if (c->delta)
		scn_outcome_add(r->out->detail, sizeof(r->out->detail),
				"%s.%s: %llu at %s, %llu now", c->nic, c->counter,
				(unsigned long long)base, c->mark[0] ? c->mark : "the start",
				(unsigned long long)value);
}

struct counter_wait {
	const struct scn_stmt *st;
	uint64_t value, base;
	int err;
};

static bool counter_holds(struct scn_runner *r, void *arg)
{
	struct counter_wait *w = arg;
	uint64_t now = scn_now_ns();

	if (now < r->counter_next_ns)
		return false;
	w->err = counter_now(r, w->st, &w->st->u.counter, &w->value, &w->base);
	if (w->err)
		return true;
	/* Re-read often at first, then back off: a counter wait never spins. */
	r->counter_next_ns = now + r->counter_gap_ns;
	if (r->counter_gap_ns < COUNTER_GAP_MAX_NS)
		r->counter_gap_ns *= 2;
	return scn_cmp_holds(&w->st->u.counter.cmp, w->value - w->base);
}

static int counter_step(struct scn_runner *r, const struct scn_stmt *st)
{
	struct counter_wait w = {.st = st};
	uint64_t t0;
	int rc;

	if (st->kind == SCN_EXPECT_COUNTER) {
		rc = counter_now(r, st, &st->u.counter, &w.value, &w.base);
		if (rc)
			return rc;
		if (scn_cmp_holds(&st->u.counter.cmp, w.value - w.base))
			return 0;
		counter_fail(r, st, &st->u.counter, w.value, w.base, 0);
		return -EINVAL;
	}
	t0 = scn_now_ns();
	r->counter_poll = true;
	r->counter_next_ns = 0;
	r->counter_gap_ns = COUNTER_GAP_MIN_NS;
	rc = scn_loop_until(r, counter_holds, &w, scn_step_deadline(r, st));
	r->counter_poll = false;
	if (w.err)
		return w.err;
	if (rc == -ETIMEDOUT)
		counter_fail(r, st, &st->u.counter, w.value, w.base, scn_now_ns() - t0);
	return rc;
}

/* ---- Frames ---------------------------------------------------------------------- */

struct frame_match {
	const struct scn_frame_filter *f;
	uint32_t src, dst;
	uint64_t count;
	size_t first; /* index after the first match, 0 if none */
	size_t at;    /* index of the frame being visited */
};

static void frame_visit(void *arg, const struct scn_wire_frame *fr)
{
	struct frame_match *m = arg;
	const struct scn_frame_filter *f = m->f;

	m->at++;
	if (fr->src != m->src || fr->dst != m->dst || fr->rx_drop)
		return;
	if (f->opcode >= 0 && fr->opcode != f->opcode)
		return;
	if (f->qpn >= 0 && (int64_t)fr->qpn != f->qpn)
		return;
	if (f->syndrome >= 0) {
		if (fr->syndrome < 0)
			return;
		/* An RNR NAK's timer and an ACK's credits are not matched. */
		if ((f->syndrome & FAB_AETH_KIND_MASK) != FAB_AETH_NAK
			? (fr->syndrome & FAB_AETH_KIND_MASK) != (f->syndrome & FAB_AETH_KIND_MASK)
			: fr->syndrome != f->syndrome)
			return;
	}
	m->count++;
	if (!m->first)
		m->first = m->at;
}

static int frame_setup(struct scn_runner *r, const struct scn_stmt *st,
		       const struct scn_frame_filter *f, struct frame_match *m)
{
	struct scn_nicd *a = scn_rt_nic(r, f->link.src), *b = scn_rt_nic(r, f->link.dst);

	memset(m, 0, sizeof(*m));
	if (!a || !b) {
		scn_fail(r, st, "%s is not a NIC of this scenario", a ? f->link.dst : f->link.src);
		return -ENOENT;
	}
	if (!r->topo.capture.running) {
		scn_fail(r, st, "frames are known only with the capture on (`capture on`)");
		return -ENOENT;
	}
	m->f = f;
	m->src = a->addr;
	m->dst = b->addr;
	return 0;
}

struct frame_wait {
	struct frame_match m;
	size_t from;
};

static bool frame_seen(struct scn_runner *r, void *arg)
{
	struct frame_wait *w = arg;

	w->m.at = w->from;
	scn_capture_scan(&r->topo, &w->from, frame_visit, &w->m);
	return w->m.count > 0;
}

static void filter_text(const struct scn_frame_filter *f, char *buf, size_t size)
{
	snprintf(buf, size, "%s -> %s%s%s%s%s", f->link.src, f->link.dst,
		 f->opcode_name[0] ? " opcode " : "", f->opcode_name,
		 f->syndrome_name[0] ? " syndrome " : "", f->syndrome_name);
}

static int frames_step(struct scn_runner *r, const struct scn_stmt *st)
{
	const struct scn_frame_filter *f =
	    st->kind == SCN_SETTLE ? &st->u.settle.filter : &st->u.frames.filter;
	struct frame_wait w;
	char what[4 * SCN_NAME_MAX + 32], want[64];
	size_t from = 0;
	uint64_t until;
	int rc;

	if (st->kind == SCN_SETTLE && !st->u.settle.no_frame) {
		scn_outcome_add(r->out->notes, sizeof(r->out->notes),
				"%s:%u: settle %.3f ms is a time-based step", st->loc.file,
				st->loc.line, st->u.settle.ns / 1e6);
		rc = scn_loop_until(r, NULL, NULL,
				    scn_after_ns(scn_now_ns(), st->u.settle.ns, r->slow));
		return rc == -ETIMEDOUT ? 0 : rc;
	}
	rc = frame_setup(r, st, f, &w.m);
	if (rc)
		return rc;
	filter_text(f, what, sizeof(what));
	switch (st->kind) {
	case SCN_WAIT_FRAME:
		/* Each wait takes the first matching frame after the one the
		 * previous `wait frame` took. */
		w.from = r->frame_cursor;
		rc = scn_loop_until(r, frame_seen, &w, scn_step_deadline(r, st));
		if (!rc)
			r->frame_cursor = w.m.first;
		return rc;
	case SCN_SETTLE:
		scn_outcome_add(r->out->notes, sizeof(r->out->notes),
				"%s:%u: settle %.3f ms is a time-based step", st->loc.file,
				st->loc.line, st->u.settle.ns / 1e6);
		w.from = scn_capture_count(&r->topo); /* frames from now on */
		until = scn_after_ns(scn_now_ns(), st->u.settle.ns, r->slow);
		rc = scn_loop_until(r, frame_seen, &w, until);
		if (rc == -ETIMEDOUT) {
			scn_capture_sync(&r->topo);
			frame_seen(r, &w);
			if (!w.m.count)
				return 0;
		} else if (rc) {
			return rc;
		}
		scn_fail(r, st, "a frame %s crossed the link while it should have settled", what);
		scn_outcome_add(r->out->wanted, sizeof(r->out->wanted), "frames %s: none", what);
		scn_outcome_add(r->out->found, sizeof(r->out->found), "frames %s: %llu", what,
				(unsigned long long)w.m.count);
		return -EINVAL;
	default:
		scn_capture_sync(&r->topo);
		w.m.at = 0;
		scn_capture_scan(&r->topo, &from, frame_visit, &w.m);
		if (scn_cmp_holds(&st->u.frames.count, w.m.count))
			return 0;
		cmp_text(&st->u.frames.count, want, sizeof(want));
		scn_fail(r, st, "%llu frames %s were seen, not %s", (unsigned long long)w.m.count,
			 what, want);
		scn_outcome_add(r->out->wanted, sizeof(r->out->wanted), "count: %s", want);
		scn_outcome_add(r->out->found, sizeof(r->out->found),
				"count: %llu of %zu frames captured", (unsigned long long)w.m.count,
				from);
		return -EINVAL;
	}
}

/* ---- The TPT and refusals ---------------------------------------------------------- */

static const char *tpt_state_word(int state)
{
	return state == NIC_TPT_VALID ? "valid" : state == NIC_TPT_FREE ? "free" : "invalid";
}

static int expect_tpt(struct scn_runner *r, const struct scn_stmt *st)
{
	const struct scn_tpt *t = &st->u.tpt;
	struct scn_nicd *n = scn_rt_nic(r, t->nic);
	struct nic_mgmt_tpt_rec *recs = NULL;
	struct scn_rt_host *h = NULL;
	struct scn_rt_desc *d;
	struct nicsim_rdma_desc head;
	size_t count = 0, live = 0;
	uint32_t rkey;
	char want[64];
	int rc, state = NIC_TPT_FREE;

	if (!n) {
		scn_fail(r, st, "%s is not a NIC of this scenario", t->nic);
		return -ENOENT;
	}
	rc = scn_topo_tpt(&r->topo, n, &recs, &count);
	if (rc) {
		scn_fail(r, st, "NIC %s did not list its TPT: %s", n->name, strerror(-rc));
		return rc;
	}
	if (t->key) {
		d = scn_rt_desc(r, t->desc);
		if (!d || d->len < sizeof(head)) {
			scn_fail(r, st, "%s is not a whole descriptor", t->desc);
			rc = -ENOENT;
			goto out;
		}
		memcpy(&head, d->bytes, sizeof(head));
		rkey = head.rkey;
		for (size_t i = 0; i < count; i++)
			if (recs[i].key == rkey)
				state = recs[i].state;
		if ((t->state == SCN_TPT_VALID && state == NIC_TPT_VALID) ||
		    (t->state == SCN_TPT_FREE && state == NIC_TPT_FREE) ||
		    (t->state == SCN_TPT_INVALID && state != NIC_TPT_VALID &&
		     state != NIC_TPT_FREE))
			goto out;
		scn_fail(r, st, "key 0x%08x of %s on NIC %s is %s", rkey, t->desc, n->name,
			 tpt_state_word(state));
		scn_outcome_add(r->out->wanted, sizeof(r->out->wanted), "key 0x%08x: %s", rkey,
				t->state == SCN_TPT_VALID  ? "valid"
				: t->state == SCN_TPT_FREE ? "free"
							   : "invalid");
		scn_outcome_add(r->out->found, sizeof(r->out->found), "key 0x%08x: %s", rkey,
				tpt_state_word(state));
		rc = -EINVAL;
		goto out;
	}
	if (t->host[0]) {
		h = scn_rt_host(r, t->host);
		if (!h) {
			scn_fail(r, st, "%s is not a host", t->host);
			rc = -ENOENT;
			goto out;
		}
	}
	for (size_t i = 0; i < count; i++)
		live += !h || (pid_t)recs[i].pid == h->pid;
	if (scn_cmp_holds(&t->cmp, live))
		goto out;
	cmp_text(&t->cmp, want, sizeof(want));
	scn_fail(r, st, "NIC %s has %zu TPT entries%s%s, not %s", n->name, live, h ? " of " : "",
		 h ? h->name : "", want);
	scn_outcome_add(r->out->wanted, sizeof(r->out->wanted), "entries: %s", want);
	scn_outcome_add(r->out->found, sizeof(r->out->found), "entries: %zu", live);
	for (size_t i = 0; i < count && i < 16; i++)
		scn_outcome_add(r->out->detail, sizeof(r->out->detail),
				"tpt key 0x%08x %s %s va 0x%llx len %llu pid %u (%.16s)",
				recs[i].key, recs[i].type == NIC_TPT_MW ? "window" : "region",
				tpt_state_word(recs[i].state), (unsigned long long)recs[i].va,
				(unsigned long long)recs[i].len, recs[i].pid, recs[i].comm);
	rc = -EINVAL;
out:
	free(recs);
	return rc;
}

static const char *const reason_names[] = {
#define SCN_X_REASON(name, desc) #name,
    NIC_TPT_REASONS(SCN_X_REASON)
#undef SCN_X_REASON
};

/* A reason as the language spells it: NIC_TPT_R_BAD_STATE is bad-state. */
static const char *reason_word(uint32_t reason, char *buf, size_t size)
{
	const char *name;
	size_t i;

	if (reason >= sizeof(reason_names) / sizeof(reason_names[0]) || !size)
		return "?";
	name = reason_names[reason];
	for (i = 0; name[i] && i + 1 < size; i++)
		buf[i] = name[i] == '_' ? '-' : (char)tolower((unsigned char)name[i]);
	buf[i] = '\0';
	return buf;
}

static int expect_refusal(struct scn_runner *r, const struct scn_stmt *st)
{
	const struct scn_refusal *rf = &st->u.refusal;
	struct scn_nicd *n = scn_rt_nic(r, rf->nic), *from = NULL;
	struct nic_mgmt_fault_rec *recs = NULL;
	char addr[16], word[SCN_NAME_MAX];
	uint64_t since = 0;
	size_t count = 0;
	int rc;

	if (!n || (rf->from[0] && !(from = scn_rt_nic(r, rf->from)))) {
		scn_fail(r, st, "%s is not a NIC of this scenario", n ? rf->from : rf->nic);
		return -ENOENT;
	}
	if (rf->since[0]) {
		/* The latest mark of that name, as `delta from` takes it. */
		size_t i = r->nmarks;

		while (i-- > 0 && strcmp(r->marks[i].name, rf->since))
			;
		if (i == (size_t)-1) {
			scn_fail(r, st, "mark %s was not taken before this step", rf->since);
			return -ENOENT;
		}
		since = r->marks[i].realtime_ns;
	}
	rc = scn_topo_faults(&r->topo, n, &recs, &count);
	if (rc) {
		scn_fail(r, st, "NIC %s did not list its faults: %s", n->name, strerror(-rc));
		return rc;
	}
	for (size_t i = 0; i < count; i++)
		if (recs[i].reason == rf->reason_code &&
		    (!from || recs[i].peer_addr == from->addr) && recs[i].when_ns >= since)
			goto out;
	scn_fail(r, st, "NIC %s recorded no refusal %s%s%s%s%s", n->name, rf->reason,
		 from ? " from " : "", from ? from->name : "", since ? " since mark " : "",
		 since ? rf->since : "");
	scn_outcome_add(r->out->wanted, sizeof(r->out->wanted), "refusal: reason %s%s%s%s%s",
			rf->reason, from ? ", requester " : "", from ? from->addr_str : "",
			since ? ", since mark " : "", since ? rf->since : "");
	if (!count)
		scn_outcome_add(r->out->found, sizeof(r->out->found), "refusals: none");
	for (size_t i = 0; i < count && i < 8; i++)
		scn_outcome_add(r->out->found, sizeof(r->out->found),
				"refusal: reason %s, requester %s, key 0x%08x",
				reason_word(recs[i].reason, word, sizeof(word)),
				recs[i].peer_addr
				    ? fab_addr_format(recs[i].peer_addr, addr, sizeof(addr))
				    : "local",
				recs[i].key);
	rc = -EINVAL;
out:
	free(recs);
	return rc;
}

/* ---- Stream sockets ----------------------------------------------------------------- */

#define STREAM_INFO_MS 5000

/*
 * expect stream SOCK ...: the switch's own account of the socket, asked of
 * the host that made it (`stream-info`: NSW_PATH and NSW_STATS).
 */
static int expect_stream(struct scn_runner *r, const struct scn_stmt *st)
{
	const struct scn_stream_exp *e = &st->u.stream;
	struct scn_rt_op *made = scn_rt_op(r, e->sock);
	char line[SCN_AGENT_LINE_MAX], val[32], want[64];
	struct scn_rt_host *h = made ? made->host : NULL;
	struct scn_reply rep;
	int rc;

	if (!h || !made->done || made->code[0]) {
		scn_fail(r, st, "%s is not a stream socket an earlier step made", e->sock);
		return -ENOENT;
	}
	if (h->gone || !h->agent) {
		scn_fail(r, st, "host %s, whose stream socket %s is, has ended", h->name, e->sock);
		return -EPIPE;
	}
	rc =
	    scn_agent_call(h->agent, line, sizeof(line), STREAM_INFO_MS, "stream-info %s", e->sock);
	if (rc < 0) {
		scn_fail(r, st, "host %s did not say what stream socket %s did: %s", h->name,
			 e->sock, strerror(-rc));
		return rc;
	}
	if (scn_reply_parse(line, &rep) || rep.kind != SCN_REPLY_OK) {
		scn_fail(r, st, "host %s cannot say what stream socket %s did: %.300s", h->name,
			 e->sock, line);
		return -EIO;
	}
	if (e->path) {
		const char *w = e->want == SCN_PATH_READ ? "read" : "write";
		char in[16] = "", out[16] = "";

		if (!scn_reply_get(&rep, "path_in", in, sizeof(in)) ||
		    !scn_reply_get(&rep, "path_out", out, sizeof(out))) {
			scn_fail(r, st, "host %s answered stream-info without the paths: %.300s",
				 h->name, line);
			return -EIO;
		}
		if ((!e->in || !strcmp(in, w)) && (!e->out || !strcmp(out, w)))
			return 0;
		scn_fail(r, st,
			 "stream socket %s of %s sends by the %s path and receives by the %s "
			 "path",
			 e->sock, h->name, out, in);
		if (e->out)
			scn_outcome_add(r->out->wanted, sizeof(r->out->wanted), "path out: %s", w);
		if (e->in)
			scn_outcome_add(r->out->wanted, sizeof(r->out->wanted), "path in: %s", w);
		scn_outcome_add(r->out->found, sizeof(r->out->found), "path out: %s, path in: %s",
				out, in);
		scn_outcome_add(r->out->detail, sizeof(r->out->detail),
				"the paths are those the two HELLOs chose (none: not connected "
				"yet, or no HELLO from the peer)");
		return -EINVAL;
	}
	if (!scn_reply_get(&rep, e->stat, val, sizeof(val))) {
		scn_fail(r, st, "host %s answered stream-info without %s: %.300s", h->name, e->stat,
			 line);
		return -EIO;
	}
	if (scn_cmp_holds(&e->cmp, strtoull(val, NULL, 10)))
		return 0;
	cmp_text(&e->cmp, want, sizeof(want));
	scn_fail(r, st, "stream socket %s of %s: %s is %s, not %s", e->sock, h->name, e->stat, val,
		 want);
	scn_outcome_add(r->out->wanted, sizeof(r->out->wanted), "%s: %s", e->stat, want);
	scn_outcome_add(r->out->found, sizeof(r->out->found), "%s: %s", e->stat, val);
	/* Every statistic, for what the switch did besides. */
	scn_outcome_add(r->out->detail, sizeof(r->out->detail), "NSW_STATS of %s: %.400s", e->sock,
			rep.rest ? rep.rest : "");
	return -EINVAL;
}

int scn_expect_step(struct scn_runner *r, const struct scn_stmt *st)
{
	switch (st->kind) {
	case SCN_EXPECT_MEM: return expect_mem(r, st);
	case SCN_EXPECT_TPT: return expect_tpt(r, st);
	case SCN_WAIT_COUNTER:
	case SCN_EXPECT_COUNTER: return counter_step(r, st);
	case SCN_EXPECT_REFUSAL: return expect_refusal(r, st);
	case SCN_EXPECT_STREAM: return expect_stream(r, st);
	case SCN_WAIT_FRAME:
	case SCN_SETTLE:
	case SCN_EXPECT_FRAMES: return frames_step(r, st);
	default:
		scn_fail(r, st, "the runner cannot run a `%s` step", scn_stmt_kind_name(st->kind));
		return -EINVAL;
	}
}

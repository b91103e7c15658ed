/*
 * The scenario checker: what a script means, before anything runs.
 *
 * One pass over the statements in file order with a table of the names
 * defined so far: every name is defined once and before it is used, and
 * each use finds the kind it wants (a socket where a socket is wanted).
 * Set-up comes before the first step.  Values that need the whole set-up
 * are checked here: addresses valid and distinct, hosts and programs on
 * declared NICs, link settings as `nicsim link set` takes them (the same
 * fab_link_parse), buffer ranges within the buffer's size, counters and
 * refusal reasons by the names the NIC gives them.
 *
 * An operation started with `&` that no `wait NAME` collects is an error,
 * not a warning: its result would never be checked, and the runner would
 * have to guess when the scenario ends.  A fault timed with `at +T` is a
 * warning (prefer events: a time depends on the machine's speed).
 */
#include <errno.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fab.h"
#include "fab_addr.h"
#include "nicsim_mgmt.h"
#include "scn.h"
#include "scn_priv.h"

struct sym {
	const char *name; /* in the statement that defines it */
	enum scn_kind kind;
	const struct scn_stmt *def;
	const char *host;                 /* a buffer's host; a forked host's parent */
	uint64_t size;                    /* a buffer's size; a host's fork depth */
	bool async;                       /* an operation started with `&` ... */
	const struct scn_stmt *collected; /* ... and the wait that collected it */
	const struct scn_stmt *healed;    /* a fault's `heal` */
};

/* The largest buffer a host agent makes (its BUFFER_MAX). */
#define SCN_BUFFER_MAX (1ull << 30)
/* A "FILE:LINE" for messages. */
#define SCN_WHERE 320

/* A forked host may use its ancestors' buffers: the walk up is bounded. */
#define SCN_FORK_DEPTH 64

struct checker {
	struct scn_script *s;
	struct scn_diag *diag;
	struct sym *syms; /* open addressing, cap a power of two */
	size_t cap, n;
	const struct scn_stmt *first_step;
	const struct scn_stmt *once[SCN_CAPTURE + 1]; /* title, seed, timeout, capture */
	size_t nics;                                  /* `nic` lines so far */
};

static struct sym *lookup(struct checker *c, const char *name)
{
	size_t i = (size_t)scn_hash(name, strlen(name)) & (c->cap - 1);

	while (c->syms[i].name) {
		if (!strcmp(c->syms[i].name, name))
			return &c->syms[i];
		i = (i + 1) & (c->cap - 1);
	}
	return &c->syms[i]; /* the empty slot where it would go */
}

static void error(struct checker *c, const struct scn_stmt *st, const char *word, const char *fmt,
		  ...) __attribute__((format(printf, 4, 5)));

/* An error about st, at the place word is written in it (NULL: at st). */
static void error(struct checker *c, const struct scn_stmt *st, const char *word, const char *fmt,
		  ...)
{
	struct scn_loc loc = scn_stmt_word_loc(st, word);
	va_list ap;

	va_start(ap, fmt);
	scn_diag_vadd(c->diag, SCN_ERROR, &loc, fmt, ap);
	va_end(ap);
}

/* "a socket", "an operation". */
static const char *a_kind(enum scn_kind kind, char *buf, size_t size)
{
	const char *name = scn_kind_name(kind);

	snprintf(buf, size, "%s %s", strchr("aeiouAEIOU", name[0]) ? "an" : "a", name);
	return buf;
}

/*
 * Where there is, as a message about here names it: "line N" in the same
 * file, "FILE:N" in another (an included file, or the one that included
 * it), so that a line number never reads as one of the wrong file.
 */
static const char *where(const struct scn_stmt *here, const struct scn_stmt *there, char *buf,
			 size_t size)
{
	if (!here || !there->loc.file || !here->loc.file ||
	    !strcmp(here->loc.file, there->loc.file))
		snprintf(buf, size, "line %u", there->loc.line);
	else
		snprintf(buf, size, "%s:%u", there->loc.file, there->loc.line);
	return buf;
}

/* The statement after `from` that defines name, if any: "used before". */
static const struct scn_stmt *defined_later(const struct checker *c, const struct scn_stmt *from,
					    const char *name)
{
	const struct scn_stmt *st;

	if (c->diag->n >= SCN_DIAG_MAX)
		return NULL; /* the message would not be kept: spare the scan */
	for (st = from + 1; st < c->s->stmts + c->s->nstmts; st++)
		if (st->name[0] && !strcmp(st->name, name))
			return st;
	return NULL;
}

/* The nearest defined name of a kind, for "did you mean". */
static const char *nearest_of(const struct checker *c, const char *name, enum scn_kind kind)
{
	const char *cand[64];
	size_t i, n = 0;

	for (i = 0; i < c->cap && n < ARRAY_SIZE(cand); i++)
		if (c->syms[i].name && c->syms[i].kind == kind)
			cand[n++] = c->syms[i].name;
	return n ? scn_nearest(name, cand, n) : NULL;
}

/*
 * Name used by st, wanted of kind a (or b, if not NONE).  Returns the
 * symbol, or NULL after reporting an undefined name or a wrong kind.
 */
static struct sym *use2(struct checker *c, const struct scn_stmt *st, const char *name,
			enum scn_kind a, enum scn_kind b)
{
	struct sym *y = lookup(c, name);
	const struct scn_stmt *later;
	char want[64], wa[24], wb[24], is[24], w[SCN_WHERE];
	const char *near;

	if (b != SCN_KIND_NONE)
		snprintf(want, sizeof(want), "%s or %s", a_kind(a, wa, sizeof(wa)),
			 a_kind(b, wb, sizeof(wb)));
	else
		snprintf(want, sizeof(want), "%s", a_kind(a, wa, sizeof(wa)));
	if (!y->name) {
		later = defined_later(c, st, name);
		/* The search costs the whole table: only for a message kept. */
		near = c->diag->n < SCN_DIAG_MAX ? nearest_of(c, name, a) : NULL;
		if (later)
			error(c, st, name, "'%s' is used before it is defined (%s)", name,
			      where(st, later, w, sizeof(w)));
		else if (near)
			error(c, st, name, "'%s' is not defined (%s is wanted); did you mean '%s'?",
			      name, want, near);
		else
			error(c, st, name, "'%s' is not defined (%s is wanted)", name, want);
		return NULL;
	}
	if (y->kind != a && (b == SCN_KIND_NONE || y->kind != b)) {
		error(c, st, name, "'%s' is %s (%s), not %s", name, a_kind(y->kind, is, sizeof(is)),
		      where(st, y->def, w, sizeof(w)), want);
		return NULL;
	}
	/* What a call started with '&' makes exists once it is collected. */
	if (y->async && !y->collected) {
		error(c, st, name,
		      "'%s' is used before 'wait %s' collects it (%s started it "
		      "with '&')",
		      name, name, where(st, y->def, w, sizeof(w)));
		return NULL;
	}
	return y;
}

static struct sym *use(struct checker *c, const struct scn_stmt *st, const char *name,
		       enum scn_kind kind)
{
	return use2(c, st, name, kind, SCN_KIND_NONE);
}

/* Define the name st makes, of kind; NULL after reporting a duplicate. */
static struct sym *define(struct checker *c, const struct scn_stmt *st, const char *name,
			  enum scn_kind kind)
{
	struct sym *y = lookup(c, name);
	struct scn_loc loc = st->name_loc.line ? st->name_loc : st->loc;

	if (y->name) {
		scn_diag_add(c->diag, SCN_ERROR, &loc, "'%s' is defined twice: it is a %s at %s:%u",
			     name, scn_kind_name(y->kind), y->def->loc.file, y->def->loc.line);
		return NULL;
	}
	y->name = name;
	y->kind = kind;
	y->def = st;
	c->n++;
	return y;
}

/* A buffer used by host: it must be the host's (or its parent's, for a
 * forked host), and a range must lie within its size. */
static void use_range(struct checker *c, const struct scn_stmt *st, const char *host,
		      const struct scn_range *r)
{
	struct sym *b = use(c, st, r->name, SCN_KIND_BUFFER), *h;
	char w[SCN_WHERE];
	const char *owner;
	int depth;

	if (!b)
		return;
	/* A forked host has its parent's memory. */
	for (owner = host, depth = 0; owner && depth <= SCN_FORK_DEPTH; depth++) {
		if (!strcmp(owner, b->host))
			break;
		h = lookup(c, owner);
		owner = h->name && h->kind == SCN_KIND_HOST ? h->host : NULL;
	}
	if (host && !owner)
		error(c, st, r->name, "buffer '%s' is %s's (%s), not %s's", r->name, b->host,
		      where(st, b->def, w, sizeof(w)), host);
	if (r->form == SCN_RANGE_SPAN && r->end > b->size)
		error(c, st, r->name,
		      "%s[%llu..%llu] goes past the end of '%s', which has %llu bytes (%s)",
		      r->name, (unsigned long long)r->off, (unsigned long long)r->end, r->name,
		      (unsigned long long)b->size, where(st, b->def, w, sizeof(w)));
	if (r->form == SCN_RANGE_FROM && r->off > b->size)
		error(c, st, r->name,
		      "%s[%llu..] starts past the end of '%s', which has %llu bytes (%s)", r->name,
		      (unsigned long long)r->off, r->name, (unsigned long long)b->size,
		      where(st, b->def, w, sizeof(w)));
}

static uint64_t range_len(const struct checker *c, const struct scn_range *r)
{
	struct sym *b = lookup((struct checker *)c, r->name);
	uint64_t size = b->name && b->kind == SCN_KIND_BUFFER ? b->size : 0;

	switch (r->form) {
	case SCN_RANGE_SPAN: return r->end - r->off;
	case SCN_RANGE_FROM: return size > r->off ? size - r->off : 0;
	default: return size;
	}
}

/* Link settings: the words `nicsim link set` takes, parsed by its code. */
static void check_words(struct checker *c, const struct scn_link_words *w)
{
	const char *words[SCN_LINK_WORDS_MAX];
	struct fab_link_config cfg;
	char why[256];
	uint32_t fields;
	size_t i;

	for (i = 0; i < w->n; i++)
		words[i] = w->word[i];
	if (fab_link_parse(words, w->n, &cfg, &fields, why, sizeof(why)))
		scn_diag_add(c->diag, SCN_ERROR, &w->loc, "link settings: %s", why);
}

static void check_ends(struct checker *c, const struct scn_stmt *st, const struct scn_link_ends *e)
{
	use(c, st, e->src, SCN_KIND_NIC);
	use(c, st, e->dst, SCN_KIND_NIC);
	/* NIC a's link to itself (a -> a) carries the frames between two hosts
	 * of a; it has one direction only. */
	if (e->both && !strcmp(e->src, e->dst))
		error(c, st, e->src,
		      "'%s <-> %s' is one link, NIC %s's to itself: write '%s -> %s'", e->src,
		      e->dst, e->src, e->src, e->dst);
}

/* A size that a host agent can make a buffer of. */
static void check_buffer_size(struct checker *c, const struct scn_stmt *st, const char *name,
			      uint64_t size)
{
	if (size > SCN_BUFFER_MAX)
		error(c, st, NULL,
		      "buffer '%s' of %llu bytes: a host's buffer is at most 1GiB (%llu bytes); "
		      "split it into several buffers",
		      name, (unsigned long long)size, (unsigned long long)SCN_BUFFER_MAX);
}

/* `read ... len N` reads N bytes into the local buffer from the range's
 * start: they must fit in the buffer, when its size is known. */
static void check_read_len(struct checker *c, const struct scn_stmt *st)
{
	const struct scn_call *k = &st->u.call;
	struct sym *b = lookup(c, k->local.name);
	uint64_t off = k->local.form == SCN_RANGE_WHOLE ? 0 : k->local.off;

	if (!k->size || !b->name || b->kind != SCN_KIND_BUFFER || off > b->size)
		return;
	if (k->size > b->size - off)
		error(c, st, k->local.name,
		      "read of len %llu into '%s' at offset %llu runs past its end: '%s' has %llu "
		      "bytes, so at most len %llu fits there",
		      (unsigned long long)k->size, k->local.name, (unsigned long long)off,
		      k->local.name, (unsigned long long)b->size,
		      (unsigned long long)(b->size - off));
}

/* madvise works on whole pages: a range must start on a page, and end on
 * one or at the buffer's end (the kernel rounds the length up, which would
 * reach bytes past the range).  Only mmap buffers: around a malloc block
 * the pages are the C library's. */
static void check_madvise(struct checker *c, const struct scn_stmt *st)
{
	const struct scn_range *r = &st->u.call.local;
	struct sym *b = lookup(c, r->name);
	/* The page size of this machine, which runs the scenario too. */
	long sys_page = sysconf(_SC_PAGESIZE);
	uint64_t page = sys_page > 0 ? (uint64_t)sys_page : 4096, end;

	if (!b->name || b->kind != SCN_KIND_BUFFER)
		return;
	if (b->def->u.call.use_malloc) {
		error(c, st, r->name,
		      "madvise needs an mmap buffer: '%s' is a malloc buffer, whose pages are "
		      "shared with the C library's",
		      r->name);
		return;
	}
	if (r->form != SCN_RANGE_WHOLE && r->off % page)
		error(c, st, r->name,
		      "madvise of %s at offset %llu: the range must start on a page (a multiple "
		      "of the page size, %llu bytes)",
		      r->name, (unsigned long long)r->off, (unsigned long long)page);
	end = r->form == SCN_RANGE_SPAN ? r->end : b->size;
	if (r->form == SCN_RANGE_SPAN && end % page && end != b->size)
		error(c, st, r->name,
		      "madvise of %s[..%llu]: the range must end on a page (a multiple of the page "
		      "size, %llu bytes) or at the buffer's end, since the kernel rounds its "
		      "length up to whole pages",
		      r->name, (unsigned long long)end, (unsigned long long)page);
}

static void check_counter(struct checker *c, const struct scn_stmt *st, const struct scn_counter *k)
{
	static const char *const names[] = {
#define SCN_STAT_NAME(name, desc) #name,
	    NIC_STATS(SCN_STAT_NAME)
#undef SCN_STAT_NAME
	};
	const char *near;
	size_t i;

	use(c, st, k->nic, SCN_KIND_NIC);
	if (k->mark[0])
		use(c, st, k->mark, SCN_KIND_MARK);
	for (i = 0; i < ARRAY_SIZE(names); i++)
		if (!strcmp(k->counter, names[i]))
			return;
	near = scn_nearest(k->counter, names, ARRAY_SIZE(names));
	error(c, st, k->nic, "unknown counter '%s'%s%s%s (the names 'nicsim stats' prints)",
	      k->counter, near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
}

/* The ']' that ends the bracket expression at re ('['), or NULL: a ']'
 * first is a member, [:x:], [.x.] and [=x=] hold their own ']', and a
 * backslash is itself. */
static const char *bracket_end(const char *re)
{
	const char *q = re + 1;

	if (*q == '^')
		q++;
	if (*q == ']')
		q++;
	while (*q && *q != ']') {
		if (*q == '[' && (q[1] == ':' || q[1] == '.' || q[1] == '=')) {
			const char *end = strchr(q + 2, q[1]);

			while (end && end[1] != ']')
				end = strchr(end + 1, q[1]);
			if (end) {
				q = end + 2;
				continue;
			}
		}
		q++;
	}
	return *q ? q : NULL;
}

const char *scn_ere_backref(const char *re)
{
	for (; *re; re++) {
		if (*re == '\\') {
			if (re[1] >= '1' && re[1] <= '9')
				return re;
			if (re[1])
				re++;
		} else if (*re == '[') {
			re = bracket_end(re);
			if (!re)
				return NULL; /* regcomp says what is wrong */
		}
	}
	return NULL;
}

/* Copies of one atom that counted repetitions nested in each other may
 * make: glibc builds its automaton with a copy per repetition, so
 * (a{1,255}){1,255} is 65,025 copies, and matching a line takes seconds. */
#define SCN_RE_COPIES_MAX 255

/* The largest product of nested {M,N} bounds in re (N, else M). */
static unsigned long long re_copies(const char *re)
{
	unsigned long long inner[SCN_TEXT_MAX + 1], last = 1, worst = 1, b, m;
	const char *q;
	size_t depth = 0;

	inner[0] = 1;
	for (; *re; re++) {
		switch (*re) {
		case '\\':
			if (re[1])
				re++;
			last = 1;
			break;
		case '[':
			q = bracket_end(re);
			if (!q)
				return worst; /* regcomp says what is wrong */
			re = q;
			last = 1;
			break;
		case '(':
			if (depth + 1 < ARRAY_SIZE(inner))
				inner[++depth] = 1;
			last = 1;
			break;
		case ')':
			if (!depth)
				break;
			last = inner[depth--];
			if (last > inner[depth])
				inner[depth] = last;
			break;
		case '{':
			if (re[1] < '0' || re[1] > '9')
				break;
			for (m = 0, q = re + 1; *q >= '0' && *q <= '9' && m < 100000; q++)
				m = m * 10 + (unsigned long long)(*q - '0');
			b = m;
			if (*q == ',' && q[1] >= '0' && q[1] <= '9')
				for (b = 0, q++; *q >= '0' && *q <= '9' && b < 100000; q++)
					b = b * 10 + (unsigned long long)(*q - '0');
			else if (*q == ',')
				q++;
			if (*q != '}')
				break;
			re = q;
			last *= b ? b : 1;
			if (last > inner[depth])
				inner[depth] = last;
			break;
		default: last = 1; break;
		}
	}
	for (size_t i = 0; i <= depth; i++)
		if (inner[i] > worst)
			worst = inner[i];
	return worst;
}

/* A /ERE/ that regcomp refuses is the script's error, not a line never seen. */
static void check_regex(struct checker *c, const struct scn_stmt *st, const struct scn_output *o)
{
	const char *br;
	char why[128];
	regex_t re;
	int rc;

	if (!o->regex)
		return;
	br = scn_ere_backref(o->text);
	if (br) {
		error(c, st, NULL,
		      "/%s/: '\\%c' is a back-reference, which a POSIX extended regular "
		      "expression does not have (and whose matching can take exponential "
		      "time): match the text itself, or escape a digit as [%c]",
		      o->text, br[1], br[1]);
		return;
	}
	if (re_copies(o->text) > SCN_RE_COPIES_MAX) {
		error(c, st, NULL,
		      "/%s/: counted repetitions {M,N} (nested ones multiplied) make %llu copies "
		      "of an atom, more than %d, and matching a line would take seconds: use "
		      "smaller counts, or * and + instead",
		      o->text, re_copies(o->text), SCN_RE_COPIES_MAX);
		return;
	}
	rc = regcomp(&re, o->text, REG_EXTENDED | REG_NOSUB);
	if (!rc) {
		regfree(&re);
		return;
	}
	regerror(rc, &re, why, sizeof(why));
	error(c, st, NULL, "/%s/ is not a valid extended regular expression: %s", o->text, why);
}

/*
 * The socket of a call: a stream socket for the stream-* verbs, a socket
 * of the SPI for the others.  The two are different things (a stream
 * socket is the switch's, over SPI sockets of its own), so a mix-up says
 * which calls the socket takes.
 */
static void use_sock(struct checker *c, const struct scn_stmt *st, enum scn_verb verb,
		     const char *host, const char *name)
{
	bool stream = scn_verb_stream(verb);
	struct sym *y = lookup(c, name);
	char w[SCN_WHERE];

	if (y->name && stream && y->kind == SCN_KIND_SOCKET) {
		error(c, st, name,
		      "'%s' is a socket of the SPI (%s): %s takes a stream socket, made by "
		      "stream-socket or stream-accept; the SPI's calls are %s",
		      name, where(st, y->def, w, sizeof(w)), scn_verb_name(verb),
		      scn_verb_name(verb) + strlen("stream-"));
		return;
	}
	if (y->name && !stream && y->kind == SCN_KIND_STREAM) {
		error(c, st, name,
		      "'%s' is a stream socket (%s): its calls are stream-bind, stream-send, "
		      "stream-recv ...; %s takes a socket of the SPI, made by socket or accept",
		      name, where(st, y->def, w, sizeof(w)), scn_verb_name(verb));
		return;
	}
	y = use(c, st, name, stream ? SCN_KIND_STREAM : SCN_KIND_SOCKET);
	/* A stream socket is the switch's of the process that made it: no
	 * other host has it, a forked one neither (its switch starts afresh). */
	if (y && stream && y->host && host && strcmp(y->host, host))
		error(c, st, name,
		      "stream socket '%s' is %s's (%s), not %s's: a stream socket belongs to "
		      "the host that made it",
		      name, y->host, where(st, y->def, w, sizeof(w)), host);
}

/*
 * `= RESULT` fits the call: an SPI call gives WSA codes, a stream call
 * errno names (the switch is BSD-shaped), and only stream-recv may meet
 * the end of the stream.  st is the call or the wait that collects it.
 */
static void check_result(struct checker *c, const struct scn_stmt *st, enum scn_verb verb,
			 const struct scn_result *res)
{
	const char *name = res->name;
	char alt[SCN_NAME_MAX + 4];
	bool near;
	int code;

	if (res->kind == SCN_RES_WSA && scn_verb_stream(verb)) {
		near = !strncmp(name, "WSA", 3) && !scn_errno_parse(name + 3, &code);
		error(c, st, name,
		      "%s is a stream call: its result is an errno name (ENOBUFS, ECONNRESET "
		      "...), not a WSA code%s%s%s",
		      scn_verb_name(verb), near ? "; did you mean '" : "", near ? name + 3 : "",
		      near ? "'?" : "");
	} else if (res->kind == SCN_RES_ERRNO && !scn_verb_stream(verb)) {
		snprintf(alt, sizeof(alt), "WSA%s", name);
		near = !scn_wsa_parse(alt, &code);
		error(c, st, name,
		      "%s is a call of the SPI: its result is a WSA code (WSAENOBUFS ...), not "
		      "an errno name%s%s%s",
		      scn_verb_name(verb), near ? "; did you mean '" : "", near ? alt : "",
		      near ? "'?" : "");
	} else if (res->kind == SCN_RES_EOF && verb != SCN_V_STREAM_RECV) {
		error(c, st, "eof",
		      "'= eof' is the result of a stream-recv that met the end of the stream, "
		      "not of %s",
		      scn_verb_name(verb));
	}
}

static void check_call(struct checker *c, const struct scn_stmt *st)
{
	const struct scn_call *k = &st->u.call;
	struct sym *h = use(c, st, k->host, SCN_KIND_HOST), *y;
	enum scn_kind makes = scn_verb_makes(k->verb);

	if (k->sock[0])
		use_sock(c, st, k->verb, k->host, k->sock);
	check_result(c, st, k->verb, &st->result);
	if (k->nic[0])
		use(c, st, k->nic, SCN_KIND_NIC);
	switch (k->verb) {
	case SCN_V_BUFFER:
		if (!k->size)
			error(c, st, k->local.name, "buffer '%s' of 0 bytes: give it a size",
			      k->local.name);
		check_buffer_size(c, st, k->local.name, k->size);
		break;
	case SCN_V_DEREGISTER: use(c, st, k->target, SCN_KIND_HANDLE); break;
	case SCN_V_DEREGISTER_RDMA: use(c, st, k->target, SCN_KIND_DESC); break;
	case SCN_V_WRITE:
	case SCN_V_READ:
		use(c, st, k->remote.name, SCN_KIND_DESC);
		use_range(c, st, k->host, &k->local);
		if (k->verb == SCN_V_READ)
			check_read_len(c, st);
		break;
	case SCN_V_MADVISE:
		use_range(c, st, k->host, &k->local);
		check_madvise(c, st);
		break;
	case SCN_V_MREMAP:
	case SCN_V_REALLOC:
		use_range(c, st, k->host, &k->local);
		if (!k->size)
			error(c, st, NULL, "%s to 0 bytes: use munmap or free",
			      scn_verb_name(k->verb));
		check_buffer_size(c, st, k->local.name, k->size);
		y = lookup(c, k->local.name);
		if (y->name && y->kind == SCN_KIND_BUFFER && k->size)
			y->size = k->size;
		break;
	default:
		if (k->local.name[0])
			use_range(c, st, k->host, &k->local);
		break;
	}
	if (k->verb == SCN_V_FREE || k->verb == SCN_V_REALLOC) {
		y = lookup(c, k->local.name);
		if (y->name && y->kind == SCN_KIND_BUFFER && !y->def->u.call.use_malloc)
			error(c, st, k->local.name,
			      "%s needs a malloc buffer: declare '%s' with 'buffer %s SIZE malloc'",
			      scn_verb_name(k->verb), k->local.name, k->local.name);
	}
	if (st->async && !st->name[0])
		error(c, st, NULL,
		      "'&' needs '-> NAME', so that a later 'wait NAME' collects the result");
	/* Later steps can reach a socket, a handle or a host only by its name. */
	if (!st->name[0] && (makes == SCN_KIND_SOCKET || makes == SCN_KIND_HANDLE ||
			     makes == SCN_KIND_HOST || makes == SCN_KIND_STREAM))
		error(c, st, NULL, "'%s' makes a %s: name it with '-> NAME'",
		      scn_verb_name(k->verb), scn_kind_name(makes));
	if (k->verb == SCN_V_BUFFER) {
		y = define(c, st, st->name, SCN_KIND_BUFFER);
		if (y) {
			y->host = k->host;
			y->size = k->size;
		}
		return;
	}
	if (!st->name[0] || makes == SCN_KIND_NONE)
		return;
	y = define(c, st, st->name, makes);
	if (!y)
		return;
	y->async = st->async;
	if (makes == SCN_KIND_STREAM)
		y->host = k->host;
	if (k->verb != SCN_V_FORK || !h)
		return;
	y->host = h->name;
	y->size = h->size + 1; /* a host's size is how deep it is forked */
	if (y->size > SCN_FORK_DEPTH)
		error(c, st, NULL, "forks nested deeper than %d", SCN_FORK_DEPTH);
}

static void check_mem(struct checker *c, const struct scn_stmt *st)
{
	const struct scn_mem *m = &st->u.mem;
	uint64_t a, b;

	if (!use(c, st, m->host, SCN_KIND_HOST))
		return;
	use_range(c, st, m->host, &m->range);
	if (m->check != SCN_MEM_PEER || !use(c, st, m->peer_host, SCN_KIND_HOST))
		return;
	use_range(c, st, m->peer_host, &m->peer);
	a = range_len(c, &m->range);
	b = range_len(c, &m->peer);
	if (a && b && a != b)
		error(c, st, m->peer.name, "the two ranges differ in length: %llu and %llu bytes",
		      (unsigned long long)a, (unsigned long long)b);
}

static void check_stmt(struct checker *c, const struct scn_stmt *st)
{
	char w[SCN_WHERE];
	struct sym *y;

	/* The runner replaces ${RUN_DIR} in a program's command, where the
	 * parser left it (a parameter may carry it there). */
	if (st->kind != SCN_PROGRAM && st->kind != SCN_PARAM && st->text &&
	    strstr(st->text, "${RUN_DIR}"))
		error(c, st, "${RUN_DIR}",
		      "${RUN_DIR} is replaced only in a program's command (the run directory is "
		      "known only when the scenario runs); here, leave it out");

	switch (st->kind) {
	case SCN_NIC: define(c, st, st->name, SCN_KIND_NIC); break;
	case SCN_PARAM: define(c, st, st->name, SCN_KIND_PARAM); break;
	case SCN_HOST:
		use(c, st, st->u.host.nic, SCN_KIND_NIC);
		define(c, st, st->name, SCN_KIND_HOST);
		break;
	case SCN_PROGRAM:
		use(c, st, st->u.program.nic, SCN_KIND_NIC);
		define(c, st, st->name, SCN_KIND_PROGRAM);
		break;
	case SCN_LINK:
		check_ends(c, st, &st->u.link.ends);
		check_words(c, &st->u.link.words);
		break;
	case SCN_CALL: check_call(c, st); break;
	case SCN_DESC:
		use(c, st, st->u.desc.base, SCN_KIND_DESC);
		if (st->u.desc.field == SCN_DF_NIC)
			use(c, st, st->u.desc.nic, SCN_KIND_NIC);
		define(c, st, st->name, SCN_KIND_DESC);
		break;
	case SCN_START: use(c, st, st->u.target, SCN_KIND_PROGRAM); break;
	case SCN_KILL:
		y = use2(c, st, st->u.kill.target, SCN_KIND_HOST, SCN_KIND_PROGRAM);
		if (y && y->kind == SCN_KIND_HOST && st->u.kill.signal != SIGKILL)
			error(c, st, NULL, "a host agent is only killed (SIGKILL): 'kill %s'",
			      st->u.kill.target);
		break;
	case SCN_KILL_NIC:
	case SCN_RESTART_NIC:
	case SCN_STOP_NIC:
	case SCN_CONT_NIC: use(c, st, st->u.target, SCN_KIND_NIC); break;
	case SCN_FAULT:
		check_ends(c, st, &st->u.fault.ends);
		check_words(c, &st->u.fault.words);
		if (st->u.fault.start == SCN_FAULT_AFTER) {
			y = lookup(c, st->u.fault.after);
			/* Only a host call ends: a fault after a mark, a desc or
			 * a declaration would never start. */
			if (!y->name)
				use(c, st, st->u.fault.after, SCN_KIND_OP);
			else if (y->def->kind != SCN_CALL)
				error(
				    c, st, y->name,
				    "'after %s': %s is a %s made by '%s' (%s), which does not end "
				    "as a call does; name what a host call made (-> NAME), or "
				    "declare the fault after that statement without 'after'",
				    y->name, y->name, scn_kind_name(y->kind),
				    scn_stmt_kind_name(y->def->kind),
				    where(st, y->def, w, sizeof(w)));
		}
		if (st->u.fault.start == SCN_FAULT_AT)
			scn_diag_add(c->diag, SCN_WARNING, &st->loc,
				     "fault '%s' starts at a time: timing depends on the "
				     "machine; prefer 'after NAME' (an event)",
				     st->name);
		define(c, st, st->name, SCN_KIND_FAULT);
		break;
	case SCN_HEAL:
		y = use(c, st, st->u.target, SCN_KIND_FAULT);
		if (y && y->healed)
			error(c, st, st->u.target,
			      "fault '%s' is healed already (%s): heal a fault once", st->u.target,
			      where(st, y->healed, w, sizeof(w)));
		else if (y)
			y->healed = st;
		break;
	case SCN_MARK: define(c, st, st->name, SCN_KIND_MARK); break;
	case SCN_WAIT_OP:
		y = lookup(c, st->u.target);
		if (!y->name) {
			use(c, st, st->u.target, SCN_KIND_OP);
		} else if (!y->async) {
			if (y->kind == SCN_KIND_PROGRAM || y->kind == SCN_KIND_HOST)
				error(c, st, y->name,
				      "wait %s: say what to wait for: 'wait %s exit' or "
				      "'wait %s output \"TEXT\"'",
				      y->name, y->name, y->name);
			else
				error(c, st, y->name,
				      "'%s' did not start with '&' (%s): its step waited for "
				      "it already",
				      y->name, where(st, y->def, w, sizeof(w)));
		} else if (y->collected) {
			error(c, st, y->name, "'%s' is waited for twice (%s)", y->name,
			      where(st, y->collected, w, sizeof(w)));
		} else {
			y->collected = st;
			if (y->def->kind == SCN_CALL)
				check_result(c, st, y->def->u.call.verb, &st->result);
		}
		break;
	case SCN_WAIT_EXIT: use2(c, st, st->u.exit.target, SCN_KIND_PROGRAM, SCN_KIND_HOST); break;
	case SCN_WAIT_OUTPUT:
	case SCN_EXPECT_OUTPUT:
		use(c, st, st->u.output.target, SCN_KIND_PROGRAM);
		check_regex(c, st, &st->u.output);
		break;
	case SCN_WAIT_COUNTER:
	case SCN_EXPECT_COUNTER: check_counter(c, st, &st->u.counter); break;
	case SCN_WAIT_FRAME:
	case SCN_EXPECT_FRAMES: check_ends(c, st, &st->u.frames.filter.link); break;
	case SCN_SETTLE:
		if (st->u.settle.no_frame)
			check_ends(c, st, &st->u.settle.filter.link);
		break;
	case SCN_EXPECT_MEM: check_mem(c, st); break;
	case SCN_EXPECT_TPT:
		use(c, st, st->u.tpt.nic, SCN_KIND_NIC);
		if (st->u.tpt.host[0])
			use(c, st, st->u.tpt.host, SCN_KIND_HOST);
		/* The runner knows a descriptor's key (its bytes); a handle is
		 * the provider's, and its key is not known outside it. */
		y = st->u.tpt.key ? use2(c, st, st->u.tpt.desc, SCN_KIND_DESC, SCN_KIND_HANDLE)
				  : NULL;
		if (y && y->kind == SCN_KIND_HANDLE)
			error(
			    c, st, st->u.tpt.desc,
			    "'expect tpt %s key %s': '%s' is a handle, whose key only the provider "
			    "knows; name a descriptor (register-rdma ... -> D), or count entries: "
			    "'expect tpt %s entries CMP of HOST'",
			    st->u.tpt.nic, st->u.tpt.desc, st->u.tpt.desc, st->u.tpt.nic);
		break;
	case SCN_EXPECT_STREAM: use(c, st, st->u.stream.sock, SCN_KIND_STREAM); break;
	case SCN_EXPECT_REFUSAL:
		use(c, st, st->u.refusal.nic, SCN_KIND_NIC);
		if (st->u.refusal.from[0])
			use(c, st, st->u.refusal.from, SCN_KIND_NIC);
		if (st->u.refusal.since[0])
			use(c, st, st->u.refusal.since, SCN_KIND_MARK);
		break;
	default: break;
	}
}

/* Set-up before steps; one title, seed, timeout, capture; distinct
 * addresses.  Called for each statement in order, before check_stmt. */
static void check_order(struct checker *c, const struct scn_stmt *st)
{
	const struct scn_stmt *other;
	char a[FAB_ADDR_STRLEN], w[SCN_WHERE];
	size_t i;

	if (!scn_stmt_is_setup(st->kind)) {
		if (!c->first_step)
			c->first_step = st;
		return;
	}
	if (c->first_step)
		error(c, st, NULL, "'%s' is set-up: it must come before the first step (%s:%u)",
		      scn_stmt_kind_name(st->kind), c->first_step->loc.file,
		      c->first_step->loc.line);
	if (st->kind == SCN_TITLE || st->kind == SCN_SEED || st->kind == SCN_TIMEOUT ||
	    st->kind == SCN_CAPTURE) {
		other = c->once[st->kind];
		if (other)
			error(c, st, NULL, "'%s' given twice (first at %s:%u)",
			      scn_stmt_kind_name(st->kind), other->loc.file, other->loc.line);
		else
			c->once[st->kind] = st;
	}
	if (st->kind != SCN_NIC)
		return;
	/* The NICs' nicsimd make the fabric with its default port slots, one
	 * per NIC: one more would be found only when it starts. */
	if (++c->nics == FAB_DEFAULT_PORTS + 1)
		error(c, st, NULL,
		      "NIC '%s' is NIC number %u: a scenario has at most %u NICs (the fabric's "
		      "port slots); split it in two",
		      st->name, FAB_DEFAULT_PORTS + 1, FAB_DEFAULT_PORTS);
	for (i = 0; i < c->s->nnics && c->s->nics[i] != st; i++) {
		other = c->s->nics[i];
		if (other->u.nic.addr != st->u.nic.addr)
			continue;
		error(c, st, st->u.nic.addr_text,
		      "NIC '%s' has the address %s of NIC '%s' (%s): each NIC needs its own",
		      st->name, fab_addr_format(st->u.nic.addr, a, sizeof(a)), other->name,
		      where(st, other, w, sizeof(w)));
		break;
	}
}

int scn_check(struct scn_script *s, struct scn_diag *diag)
{
	struct checker c = {.s = s, .diag = diag};
	size_t errors = diag->errors, i;

	c.cap = 64;
	while (c.cap < 2 * s->nstmts + 16)
		c.cap *= 2;
	c.syms = calloc(c.cap, sizeof(*c.syms));
	if (!c.syms)
		return -ENOMEM;
	for (i = 0; i < s->nstmts; i++) {
		check_order(&c, &s->stmts[i]);
		check_stmt(&c, &s->stmts[i]);
	}
	/* Every `&` collected: report them in file order. */
	for (i = 0; i < s->nstmts; i++) {
		const struct scn_stmt *st = &s->stmts[i];
		struct sym *y;

		if (!st->async || !st->name[0])
			continue;
		y = lookup(&c, st->name);
		if (y->name && y->def == st && !y->collected)
			error(&c, st, NULL,
			      "'%s' is started with '&' but never waited for: add 'wait %s' before "
			      "the end, or drop the '&'",
			      st->name, st->name);
	}
	free(c.syms);
	return diag->errors > errors ? -EINVAL : 0;
}

/*
 * The scenario parser: text to a struct scn_script (scn_ast.h).
 *
 * A file is read one logical line at a time (scn_lex.c): its comment is
 * removed, every ${NAME} replaced, and the rest split into tokens; each
 * line is one statement.  An error abandons its statement, is collected
 * with its file:line:col, and parsing goes on with the next line, so one
 * run reports every bad line (up to SCN_DIAG_MAX messages).  `include`
 * parses the named file in place, relative to the including file's
 * directory.  What needs the whole script (names, kinds, order of set-up
 * and steps, addresses, link settings) is scn_check()'s.
 *
 * The grammar (EBNF; words in quotes are keywords, NAME a word
 * [A-Za-z_][A-Za-z0-9_.-]*, N a whole number (decimal or 0x hex), SIZE a
 * whole number with an optional B/KiB/MiB/GiB/K/M/G, T a number (decimals
 * allowed) with ns/us/ms/s, PCT a number with an optional %, STR a "string"
 * with \" \\ \n \t \xHH escapes, RE a /regex/ (\/ for a slash), ADDR a
 * dotted quad in 198.18.0.0/15, WSACODE a name such as WSAEINVAL, ERRNO an
 * errno's name such as ENOBUFS):
 *
 *   file      = { line } ;
 *   line      = [ stmt ] [ "#" comment ] newline ;   (a trailing \ joins lines)
 *   stmt      = setup | step ;
 *   setup     = "title" STR | "seed" N | "param" NAME "=" ( STR | rest of the line )
 *             | "include" STR | "timeout" T
 *             | "nic" NAME ADDR { nicopt }
 *             | "link" ends linkword { linkword }
 *             | "host" NAME "on" NAME [ "cache" ( "on" | "off" ) ]
 *             | "program" NAME "on" NAME STR
 *             | "capture" ( "on" | "off" ) ;
 *   nicopt    = "no-windows" | "no-rdma-read" | "tpt-capacity" N | "max-reg" SIZE
 *             | ( "ack-timeout" | "retry-count" | "rnr-retry" | "cm-timeout"
 *               | "cm-retries" | "rnr-timer" ) N ;
 *   ends      = NAME ( "->" | "<->" ) NAME ;
 *   linkword  = ( "latency" | "jitter" | "reorder-gap" | "delay" ) T
 *             | ( "loss" | "dup" | "reorder" | "corrupt" | "delay-pct" ) PCT
 *             | "rate" N | "drop-nth" ( N | "off" ) | "opcode" ( NAME | N )
 *             | "qpn" N | "seed" N | "down" | "up" | "clear" ;
 *   step      = call | "desc" NAME "=" NAME ( "with" dfield | "truncated" N )
 *             | "start" NAME | "kill" "nic" NAME | "kill" NAME [ NAME | N ]
 *             | ( "restart" | "stop" | "cont" ) "nic" NAME
 *             | "fault" NAME ends linkword { linkword } [ "after" NAME | "at" "+" T ]
 *               [ "for" ( T | N "frames" ) ] [ "optional" ]
 *             | "heal" NAME | "mark" NAME
 *             | "wait" wait [ "within" T ]
 *             | "settle" T [ "no" "frame" filter ]
 *             | "expect" expect ;
 *   call      = NAME ":" verb trailer ;
 *   trailer   = [ "->" NAME ] [ "=" result ] [ "within" T ] [ "&" ]
 *               (each at most once, in any order; "&" last) ;
 *   verb      = "startup" | "socket" | "bind" NAME NAME N | "listen" NAME [ N ]
 *             | "accept" NAME | "connect" NAME NAME N
 *             | "buffer" NAME SIZE [ "fill" pattern ] [ "malloc" ]
 *             | ( "register" | "register-rdma" ) NAME range [ access ]
 *             | ( "deregister" | "deregister-rdma" ) NAME NAME
 *             | "write" NAME range range | "read" NAME range range [ "len" SIZE ]
 *             | ( "send" | "recv" ) NAME range | "close" NAME | "cleanup"
 *             | "cache-callback" range | "munmap" NAME | "mmap" NAME
 *             | ( "mremap" | "realloc" ) NAME SIZE | "madvise" range advice
 *             | "free" NAME | "fork" | "exit" N
 *             | "stream-socket" | "stream-bind" NAME NAME N
 *             | "stream-listen" NAME [ N ] [ path ] | "stream-accept" NAME
 *             | "stream-connect" NAME NAME N [ path ]
 *             | ( "stream-send" | "stream-recv" ) NAME range
 *             | "stream-shutdown" NAME ( "read" | "write" | "both" )
 *             | "stream-close" NAME ;
 *   path      = "path" ( "read" | "write" | "auto" ) ;
 *   range     = NAME [ "[" SIZE ".." [ SIZE ] "]" | "[" SIZE "]" ] ;
 *   access    = "read" | "write" | "readwrite" ;
 *   advice    = "dontneed" | "free" | "remove" ;
 *   pattern   = "zero" | "seq" N | "random" N | "byte" N ;
 *   result    = "ok" | "any" | WSACODE | ERRNO | "eof" ;
 *   dfield    = ( "rkey" | "magic" | "version" ) N | ( "va" | "len" ) [ "+" | "-" ] SIZE
 *             | "nic" NAME | "access" ( access | N ) ;
 *   wait      = "counter" COUNTER [ "delta" [ "from" NAME ] ] cmp | "frame" filter
 *             | NAME "exit" [ N ] | NAME "output" ( STR | RE ) | NAME [ "=" result ] ;
 *   filter    = NAME "->" NAME { "opcode" ( NAME | N ) | "syndrome" NAME | "qpn" N } ;
 *   expect    = "tpt" NAME ( "entries" cmp [ "of" NAME ] | "key" NAME tptstate )
 *             | "counter" COUNTER [ "delta" [ "from" NAME ] ] cmp
 *             | "refusal" NAME "reason" NAME [ "from" NAME ] [ "since" NAME ]
 *             | "frames" filter "count" cmp
 *             | "stream" NAME ( "path" [ "in" | "out" ] ( "read" | "write" ) | NAME cmp )
 *             | NAME "output" ( STR | RE )
 *             | NAME range ( "==" pattern | "==" NAME range | "unchanged" | "checksum" N ) ;
 *   tptstate  = "valid" | "invalid" | "free" ;
 *   cmp       = ( "==" | "!=" | "<" | "<=" | ">" | ">=" ) SIZE | "in" SIZE ".." SIZE ;
 *   COUNTER   = NIC.NAME, one word (a.retransmits) ;
 *
 * Parameters: ${NAME} is replaced, anywhere in a line, by the value of a
 * `param NAME` written before (after -D NAME=VALUE overrides), or of a -D
 * NAME=VALUE alone; ${NIC.addr} by the address of a NIC declared before;
 * ${SEED} by the seed the scenario runs with (struct scn_run_seed: --seed,
 * else -D SEED, else the file's `seed N` wherever it is -- a use before
 * that line makes a second pass -- else the run's random seed, else 0).
 * ${RUN_DIR} stays as written: the runner replaces it in a program's
 * command (scn_subst_run_dir), and the checker refuses it elsewhere.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include "fab.h"
#include "fab_addr.h"
#include "fab_wire.h"
#include "nicsim_abi.h"
#include "nicsim_mgmt.h"
#include "opts.h"
#include "scn_priv.h"
#include "ws2san.h"

/* More statements than this in one script (includes expanded) is an error:
 * it bounds the memory a hostile file can make the parser take. */
#define SCN_STMTS_MAX 20000
/* Larger files are refused before they are read. */
#define SCN_FILE_MAX (64u << 20)

struct parser {
	struct scn_script *s;
	struct scn_diag *diag;
	const struct scn_defines *defs;
	unsigned flags;
	size_t cap; /* of s->stmts */
	/* The files being read, outermost first, by real path: cycles. */
	char *stack[SCN_INCLUDE_DEPTH + 2];
	int depth;
	/* The line being parsed and its tokens. */
	struct scn_line raw, line;
	struct scn_toks toks;
	const char *file;
	size_t ti;
	bool top_comment; /* still in the top file's leading comment block */
	/* The param and nic statements by name (find_stmt): statement index + 1,
	 * 0 for an empty slot; index_cap is a power of two. */
	uint32_t *index;
	size_t index_cap, index_n;
	char comment[SCN_TEXT_MAX];
	/* ${SEED}: the seed forced on this pass (the run's, once known), and
	 * what the uses were replaced with, to tell whether they were the seed
	 * the file gives in the end (a `seed` line may come after them). */
	const struct scn_run_seed *run_seed; /* NULL: none */
	bool seed_forced;
	bool seed_used, seed_used_known, seed_used_varied;
	uint64_t seed_used_v;
	/* ${NIC.addr} of a NIC not declared yet: the message to amend once
	 * every line is read, if the NIC is declared later (addr_fixup). */
	struct {
		size_t msg;
		struct scn_loc loc;
		char nic[SCN_NAME_MAX];
	} early[8];
	size_t nearly;
	/* Include lines read (one in a file included twice counts twice),
	 * and whether the limit stopped the parse. */
	size_t nincludes;
	bool stop;
};

/* ---- Tokens ------------------------------------------------------------------ */

static const struct scn_tok *peek(struct parser *p)
{
	return &p->toks.tok[p->ti];
}

static const struct scn_tok *peek2(struct parser *p)
{
	return p->toks.tok[p->ti].type == SCN_TOK_END ? peek(p) : &p->toks.tok[p->ti + 1];
}

static bool is_word(const struct scn_tok *t, const char *w)
{
	return t->type == SCN_TOK_WORD && !strcmp(t->text, w);
}

static bool is_punct(const struct scn_tok *t, const char *s)
{
	return t->type == SCN_TOK_PUNCT && !strcmp(t->text, s);
}

static bool accept_word(struct parser *p, const char *w)
{
	if (!is_word(peek(p), w))
		return false;
	p->ti++;
	return true;
}

static bool accept_punct(struct parser *p, const char *s)
{
	if (!is_punct(peek(p), s))
		return false;
	p->ti++;
	return true;
}

static int err_at(struct parser *p, const struct scn_tok *t, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Report an error at token t; returns -EINVAL. */
static int err_at(struct parser *p, const struct scn_tok *t, const char *fmt, ...)
{
	struct scn_loc loc = scn_loc_at(p->file, t->pos);
	va_list ap;

	va_start(ap, fmt);
	scn_diag_vadd(p->diag, SCN_ERROR, &loc, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* What a token is, for "expected X, found Y". */
static const char *tok_desc(const struct scn_tok *t, char *buf, size_t size)
{
	if (t->type == SCN_TOK_END)
		return "the end of the line";
	snprintf(buf, size, t->type == SCN_TOK_STR ? "\"%.40s\"" : "'%.40s'", t->text);
	return buf;
}

static int expected(struct parser *p, const char *what)
{
	const struct scn_tok *t = peek(p);
	char buf[64];

	return err_at(p, t, "expected %s, found %s", what, tok_desc(t, buf, sizeof(buf)));
}

static int expect_punct(struct parser *p, const char *s)
{
	char what[16];

	if (accept_punct(p, s))
		return 0;
	snprintf(what, sizeof(what), "'%s'", s);
	return expected(p, what);
}

static int expect_word(struct parser *p, const char *w)
{
	char what[SCN_NAME_MAX + 4];

	if (accept_word(p, w))
		return 0;
	snprintf(what, sizeof(what), "'%s'", w);
	return expected(p, what);
}

/* A name into out (SCN_NAME_MAX); what says what it names. */
static int get_name(struct parser *p, const char *what, char *out, struct scn_loc *loc)
{
	const struct scn_tok *t = peek(p);

	if (t->type != SCN_TOK_WORD)
		return expected(p, what);
	if (t->len >= SCN_NAME_MAX)
		return err_at(p, t, "name too long (%zu bytes; at most %d)", t->len,
			      SCN_NAME_MAX - 1);
	memcpy(out, t->text, t->len + 1);
	if (loc)
		*loc = scn_loc_at(p->file, t->pos);
	p->ti++;
	return 0;
}

static int get_string(struct parser *p, const char *what, char *out)
{
	const struct scn_tok *t = peek(p);

	if (t->type != SCN_TOK_STR)
		return expected(p, what);
	if (t->len >= SCN_TEXT_MAX)
		return err_at(p, t, "string too long (%zu bytes; at most %d)", t->len,
			      SCN_TEXT_MAX - 1);
	if (memchr(t->text, '\0', t->len))
		return err_at(p, t, "a string cannot hold a NUL byte");
	memcpy(out, t->text, t->len + 1);
	p->ti++;
	return 0;
}

/* ---- Numbers ----------------------------------------------------------------- */

/* A number token split: its whole part, its decimals (frac over 10^ndec)
 * and its unit ("" if none).  -ERANGE when a part overflows, -EINVAL when
 * it is not a number. */
struct num {
	uint64_t whole, frac;
	unsigned ndec;
	const char *unit;
	bool hex;
};

static int num_split(const char *text, struct num *n)
{
	const char *s = text;
	unsigned base = 10;

	memset(n, 0, sizeof(*n));
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		n->hex = true;
		s += 2;
		if (!((*s >= '0' && *s <= '9') || ((*s | 0x20) >= 'a' && (*s | 0x20) <= 'f')))
			return -EINVAL;
	}
	for (;; s++) {
		unsigned d;

		if (*s >= '0' && *s <= '9')
			d = (unsigned)(*s - '0');
		else if (base == 16 && (*s | 0x20) >= 'a' && (*s | 0x20) <= 'f')
			d = (unsigned)((*s | 0x20) - 'a' + 10);
		else
			break;
		if (n->whole > (UINT64_MAX - d) / base)
			return -ERANGE;
		n->whole = n->whole * base + d;
	}
	if (*s == '.' && base == 10) {
		for (s++; *s >= '0' && *s <= '9'; s++) {
			if (n->ndec == 18)
				return -ERANGE;
			n->frac = n->frac * 10 + (uint64_t)(*s - '0');
			n->ndec++;
		}
	}
	n->unit = s;
	return 0;
}

static uint64_t pow10u(unsigned e)
{
	uint64_t v = 1;

	while (e--)
		v *= 10;
	return v;
}

/* n times mult, exactly; -ERANGE on overflow, -EDOM when decimals remain. */
static int num_scale(const struct num *n, uint64_t mult, uint64_t *out)
{
	uint64_t scale = pow10u(n->ndec), part;

	if (n->whole && mult > UINT64_MAX / n->whole)
		return -ERANGE;
	/* frac < 10^18 and mult <= 10^9: frac * mult may overflow, so
	 * divide first when exact. */
	if (n->frac % scale == 0) {
		part = 0;
	} else {
		uint64_t g = scale, m = mult;

		/* Reduce frac/scale * mult to lowest terms step by step. */
		while (g % 10 == 0 && m % 10 == 0) {
			g /= 10;
			m /= 10;
		}
		while (g % 2 == 0 && m % 2 == 0) {
			g /= 2;
			m /= 2;
		}
		while (g % 5 == 0 && m % 5 == 0) {
			g /= 5;
			m /= 5;
		}
		if (g != 1 && n->frac % g)
			return -EDOM;
		part = n->frac / g * m;
	}
	if (n->whole * mult > UINT64_MAX - part)
		return -ERANGE;
	*out = n->whole * mult + part;
	return 0;
}

/* Report a number that did not parse; returns -EINVAL. */
static int bad_number(struct parser *p, const struct scn_tok *t, int rc, const char *what)
{
	if (rc == -ERANGE)
		return err_at(p, t, "number too large: %s (at most %llu)", t->text,
			      (unsigned long long)UINT64_MAX);
	return err_at(p, t, "bad number '%s': expected %s", t->text, what);
}

/* A whole number without a unit, at most max. */
static int get_u64(struct parser *p, const char *what, uint64_t max, uint64_t *out)
{
	const struct scn_tok *t = peek(p);
	struct num n;
	int rc;

	if (t->type != SCN_TOK_NUM)
		return expected(p, what);
	rc = num_split(t->text, &n);
	if (rc)
		return bad_number(p, t, rc, what);
	if (*n.unit || n.ndec)
		return err_at(p, t, "bad number '%s': expected %s, a whole number without a unit",
			      t->text, what);
	if (n.whole > max)
		return err_at(p, t, "%s is too large for %s: at most %llu (0x%llx)", t->text, what,
			      (unsigned long long)max, (unsigned long long)max);
	*out = n.whole;
	p->ti++;
	return 0;
}

/* A size: bytes, or with a unit B, KiB, MiB, GiB (K, M, G the same). */
static int get_size(struct parser *p, uint64_t *out)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "K", "M", "G"};
	const struct scn_tok *t = peek(p);
	char text[SCN_NAME_MAX];
	struct num n;
	size_t i, len;
	int rc;

	if (t->type != SCN_TOK_NUM)
		return expected(p, "a size (e.g. 4096, 64KiB, 1MiB)");
	rc = num_split(t->text, &n);
	if (rc)
		return bad_number(p, t, rc, "a size (e.g. 4096, 64KiB, 1MiB)");
	for (i = 0; i < ARRAY_SIZE(units) && *n.unit; i++)
		if (!strcmp(n.unit, units[i]))
			break;
	if (n.ndec || (*n.unit && (i == ARRAY_SIZE(units) || n.hex)))
		return err_at(p, t,
			      "bad size '%s': expected a whole number of bytes with an optional "
			      "B, KiB, MiB or GiB (K, M, G), e.g. 64KiB",
			      t->text);
	if (!*n.unit || !strcmp(n.unit, "B")) {
		*out = n.whole;
	} else {
		/* The K/M/G arithmetic is the one nicsimd's options use. */
		len = (size_t)(n.unit - t->text);
		if (len + 2 > sizeof(text))
			return bad_number(p, t, -ERANGE, "a size");
		snprintf(text, sizeof(text), "%.*s%c", (int)len, t->text, n.unit[0]);
		rc = opts_parse_size(text, out);
		if (rc)
			return bad_number(p, t, -ERANGE, "a size");
	}
	p->ti++;
	return 0;
}

/* A time with its unit, in ns. */
static int get_time(struct parser *p, uint64_t *ns)
{
	static const struct {
		const char *unit;
		uint64_t ns;
	} units[] = {{"ns", 1}, {"us", 1000}, {"ms", 1000000}, {"s", 1000000000}};
	const struct scn_tok *t = peek(p);
	struct num n;
	size_t i;
	int rc;

	if (t->type != SCN_TOK_NUM)
		return expected(p, "a time (e.g. 100ms, 10us, 2s)");
	rc = num_split(t->text, &n);
	if (rc)
		return bad_number(p, t, rc, "a time (e.g. 100ms, 10us, 2s)");
	if (!*n.unit)
		return err_at(p, t, "%s: a time needs a unit (%sms? %sus?)", t->text, t->text,
			      t->text);
	for (i = 0; i < ARRAY_SIZE(units); i++)
		if (!strcmp(n.unit, units[i].unit))
			break;
	if (i == ARRAY_SIZE(units) || n.hex)
		return err_at(p, t, "bad time '%s': the units are ns, us, ms and s", t->text);
	rc = num_scale(&n, units[i].ns, ns);
	if (rc == -EDOM)
		return err_at(p, t, "%s: finer than a nanosecond", t->text);
	if (rc || *ns > SCN_TIME_MAX_NS)
		return err_at(p, t, "time too large: %s (at most a day, 86400s, as --timeout)",
			      t->text);
	p->ti++;
	return 0;
}

/* ---- Shared pieces of statements --------------------------------------------- */

/* NAME [ "[" SIZE ".." [ SIZE ] "]" | "[" SIZE "]" ] */
static int get_range(struct parser *p, const char *what, bool at_ok, struct scn_range *r)
{
	const struct scn_tok *open;
	int rc;

	memset(r, 0, sizeof(*r));
	rc = get_name(p, what, r->name, NULL);
	if (rc)
		return rc;
	open = peek(p);
	if (!accept_punct(p, "["))
		return 0;
	rc = get_size(p, &r->off);
	if (rc)
		return rc;
	if (accept_punct(p, "..")) {
		if (accept_punct(p, "]")) {
			r->form = SCN_RANGE_FROM;
			return 0;
		}
		rc = get_size(p, &r->end);
		if (rc)
			return rc;
		if (r->end < r->off)
			return err_at(p, open, "range [%llu..%llu] ends before it starts",
				      (unsigned long long)r->off, (unsigned long long)r->end);
		r->form = SCN_RANGE_SPAN;
		return expect_punct(p, "]");
	}
	if (!at_ok)
		return expected(p, "'..' (a range is [START..END] or [START..])");
	r->form = SCN_RANGE_AT;
	return expect_punct(p, "]");
}

static int get_pattern(struct parser *p, struct scn_pattern *pat)
{
	if (accept_word(p, "zero")) {
		pat->kind = SCN_PATTERN_ZERO;
		pat->arg = 0;
		return 0;
	}
	if (accept_word(p, "seq")) {
		pat->kind = SCN_PATTERN_SEQ;
		return get_u64(p, "the sequence's number", UINT32_MAX, &pat->arg);
	}
	if (accept_word(p, "random")) {
		pat->kind = SCN_PATTERN_RANDOM;
		return get_u64(p, "the generator's seed", UINT64_MAX, &pat->arg);
	}
	if (accept_word(p, "byte")) {
		pat->kind = SCN_PATTERN_BYTE;
		return get_u64(p, "a byte value (0..255, e.g. 0xAB)", 0xff, &pat->arg);
	}
	return expected(p, "a pattern: zero, seq N, random N or byte B");
}

static int get_access(struct parser *p, enum scn_access *a)
{
	if (accept_word(p, "readwrite"))
		*a = SCN_ACCESS_READWRITE;
	else if (accept_word(p, "read"))
		*a = SCN_ACCESS_READ;
	else if (accept_word(p, "write"))
		*a = SCN_ACCESS_WRITE;
	else
		return expected(p, "an access: read, write or readwrite");
	return 0;
}

static int get_result(struct parser *p, struct scn_result *r)
{
	const struct scn_tok *t = peek(p);

	memset(r, 0, sizeof(*r));
	if (accept_word(p, "ok"))
		return 0;
	if (accept_word(p, "any")) {
		r->kind = SCN_RES_ANY;
		return 0;
	}
	if (accept_word(p, "eof")) {
		r->kind = SCN_RES_EOF;
		snprintf(r->name, sizeof(r->name), "eof");
		return 0;
	}
	if (t->type != SCN_TOK_WORD)
		return expected(p, "a result: ok, any, a WSA code such as WSAEINVAL, or for a "
				   "stream call an errno name such as ENOBUFS or eof");
	if (!scn_wsa_parse(t->text, &r->code)) {
		r->kind = SCN_RES_WSA;
	} else if (!scn_errno_parse(t->text, &r->code)) {
		r->kind = SCN_RES_ERRNO;
	} else {
		static const char *const some[] = {
		    "WSAEINVAL", "WSAEFAULT",  "WSAENOBUFS", "WSAECONNRESET", "WSAENETDOWN",
		    "ENOBUFS",   "ECONNRESET", "EPIPE",      "ENOTCONN",      NULL};
		const char *near = scn_nearest(t->text, some, 0);

		return err_at(p, t,
			      "unknown result '%s'%s%s%s (ok, any, a WSA code, or for a stream "
			      "call an errno name or eof)",
			      t->text, near ? "; did you mean '" : "", near ? near : "",
			      near ? "'?" : "");
	}
	snprintf(r->name, sizeof(r->name), "%s", t->text);
	p->ti++;
	return 0;
}

/* [ "path" ( "read" | "write" | "auto" ) ] */
static int get_path_opt(struct parser *p, enum scn_path *path)
{
	if (!accept_word(p, "path"))
		return 0;
	if (accept_word(p, "read"))
		*path = SCN_PATH_READ;
	else if (accept_word(p, "write"))
		*path = SCN_PATH_WRITE;
	else if (accept_word(p, "auto"))
		*path = SCN_PATH_AUTO;
	else
		return expected(p, "a path: read, write or auto");
	return 0;
}

static int get_cmp(struct parser *p, struct scn_cmp *c)
{
	static const char *const ops[] = {
	    [SCN_CMP_EQ] = "==", [SCN_CMP_NE] = "!=", [SCN_CMP_LT] = "<",
	    [SCN_CMP_LE] = "<=", [SCN_CMP_GT] = ">",  [SCN_CMP_GE] = ">=",
	};
	const struct scn_tok *t;
	size_t i;
	int rc;

	memset(c, 0, sizeof(*c));
	if (accept_word(p, "in")) {
		t = peek(p);
		c->op = SCN_CMP_IN;
		rc = get_size(p, &c->a);
		if (!rc)
			rc = expect_punct(p, "..");
		if (!rc)
			rc = get_size(p, &c->b);
		if (!rc && c->b < c->a)
			rc = err_at(p, t, "empty range: %llu..%llu", (unsigned long long)c->a,
				    (unsigned long long)c->b);
		return rc;
	}
	for (i = 0; i < ARRAY_SIZE(ops); i++)
		if (accept_punct(p, ops[i])) {
			c->op = (enum scn_cmp_op)i;
			return get_size(p, &c->a);
		}
	return expected(p, "a comparison: == N, != N, < N, <= N, > N, >= N or in A..B");
}

static int get_ends(struct parser *p, bool both_ok, struct scn_link_ends *e)
{
	int rc = get_name(p, "a NIC", e->src, NULL);

	if (rc)
		return rc;
	if (accept_punct(p, "->")) {
		e->both = false;
	} else if (both_ok && accept_punct(p, "<->")) {
		e->both = true;
	} else {
		return expected(p, both_ok ? "'->' or '<->'" : "'->'");
	}
	return get_name(p, "a NIC", e->dst, NULL);
}

static int add_word(struct parser *p, struct scn_link_words *w, const struct scn_tok *t,
		    const char *text)
{
	if (w->n == SCN_LINK_WORDS_MAX)
		return err_at(p, t, "too many link settings (at most %d words)",
			      SCN_LINK_WORDS_MAX);
	if (strlen(text) >= SCN_LINK_WORD_MAX)
		return err_at(p, t, "'%s' is too long for a link setting", text);
	snprintf(w->word[w->n++], SCN_LINK_WORD_MAX, "%s", text);
	return 0;
}

static bool word_in(const char *w, const char *const *set)
{
	for (; *set; set++)
		if (!strcmp(w, *set))
			return true;
	return false;
}

/*
 * Link settings up to the end of the line or a word of stop: the words of
 * `nicsim link set`, with the language's units turned into its units
 * (times into microseconds, "1%" into "1").  Words it does not know pass
 * as written, for fab_link_parse to name in scn_check().
 */
static int get_link_words(struct parser *p, const char *const *stop, struct scn_link_words *w)
{
	static const char *const times[] = {"latency", "jitter", "reorder-gap", "delay", NULL};
	static const char *const pcts[] = {"loss", "dup", "reorder", "corrupt", "delay-pct", NULL};
	static const char *const bare[] = {"down", "up", "clear", NULL};
	const struct scn_tok *t, *v;
	char num[SCN_LINK_WORD_MAX];
	uint64_t ns;
	struct num n;
	int rc;

	w->n = 0;
	w->loc = scn_loc_at(p->file, peek(p)->pos);
	for (;;) {
		t = peek(p);
		if (t->type == SCN_TOK_END || (t->type == SCN_TOK_WORD && word_in(t->text, stop)))
			break;
		if (t->type != SCN_TOK_WORD)
			return expected(p, "a link setting (latency, loss, drop-nth, down ...)");
		rc = add_word(p, w, t, t->text);
		if (rc)
			return rc;
		p->ti++;
		v = peek(p);
		if (word_in(t->text, bare) || v->type == SCN_TOK_END)
			continue;
		if (word_in(t->text, times)) {
			rc = get_time(p, &ns);
			if (rc)
				return rc;
			if (ns > FAB_LINK_MAX_NS)
				return err_at(p, v, "%s %s: a link's times are at most %llums",
					      t->text, v->text,
					      (unsigned long long)(FAB_LINK_MAX_NS / 1000000));
			if (ns % 1000)
				snprintf(num, sizeof(num), "%llu.%03llu",
					 (unsigned long long)(ns / 1000),
					 (unsigned long long)(ns % 1000));
			else
				snprintf(num, sizeof(num), "%llu", (unsigned long long)(ns / 1000));
			rc = add_word(p, w, v, num);
		} else if (word_in(t->text, pcts) && v->type == SCN_TOK_NUM) {
			rc = num_split(v->text, &n);
			if (rc || (*n.unit && strcmp(n.unit, "%")))
				return err_at(p, v,
					      "%s %s: expected a percentage, e.g. 1%% or 0.5%%",
					      t->text, v->text);
			snprintf(num, sizeof(num), "%.*s", (int)(n.unit - v->text), v->text);
			rc = add_word(p, w, v, num);
			p->ti++;
		} else if (v->type == SCN_TOK_NUM || v->type == SCN_TOK_WORD) {
			/* rate, drop-nth, opcode, qpn, seed, or a word that
			 * fab_link_parse will name. */
			if (v->type == SCN_TOK_WORD && word_in(v->text, stop))
				continue;
			rc = add_word(p, w, v, v->text);
			p->ti++;
		}
		if (rc)
			return rc;
	}
	if (!w->n)
		return expected(p, "a link setting (latency, loss, drop-nth, down ...)");
	return 0;
}

/* The syndromes `syndrome NAME` knows, as fab_wire.h encodes them. */
static const struct {
	const char *name;
	int syndrome;
} syndromes[] = {
    {"ACK", 0x00},
    {"RNR-NAK", FAB_AETH_RNR_NAK},
    {"NAK-PSN-SEQ", FAB_AETH_NAK | FAB_NAK_PSN_SEQ_ERROR},
    {"NAK-INVALID-REQUEST", FAB_AETH_NAK | FAB_NAK_INVALID_REQUEST},
    {"NAK-REMOTE-ACCESS", FAB_AETH_NAK | FAB_NAK_REMOTE_ACCESS_ERROR},
    {"NAK-REMOTE-OP", FAB_AETH_NAK | FAB_NAK_REMOTE_OP_ERROR},
    {"NAK-INVALID-RD", FAB_AETH_NAK | FAB_NAK_INVALID_RD_REQUEST},
};

static int get_filter(struct parser *p, struct scn_frame_filter *f)
{
	const struct scn_tok *t;
	uint32_t code;
	uint64_t v;
	size_t i;
	int rc;

	f->opcode = -1;
	f->syndrome = -1;
	f->qpn = -1;
	rc = get_ends(p, false, &f->link);
	while (!rc) {
		t = peek2(p);
		if (accept_word(p, "opcode")) {
			if ((t->type != SCN_TOK_WORD && t->type != SCN_TOK_NUM) ||
			    fab_link_opcode_parse(t->text, &code) || t->len >= SCN_NAME_MAX)
				return err_at(p, t,
					      "unknown opcode %s: expected a BTH opcode such as "
					      "RC_SEND_ONLY, RC_RDMA_WRITE_MIDDLE or ACK",
					      t->type == SCN_TOK_END ? "(none)" : t->text);
			f->opcode = (int)code;
			memcpy(f->opcode_name, t->text, t->len + 1);
			p->ti++;
		} else if (accept_word(p, "syndrome")) {
			for (i = 0; i < ARRAY_SIZE(syndromes); i++)
				if (t->type == SCN_TOK_WORD && !strcmp(t->text, syndromes[i].name))
					break;
			if (i == ARRAY_SIZE(syndromes))
				return err_at(
				    p, t,
				    "unknown syndrome %s: expected ACK, RNR-NAK, "
				    "NAK-PSN-SEQ, NAK-INVALID-REQUEST, NAK-REMOTE-ACCESS, "
				    "NAK-REMOTE-OP or NAK-INVALID-RD",
				    t->type == SCN_TOK_END ? "(none)" : t->text);
			f->syndrome = syndromes[i].syndrome;
			snprintf(f->syndrome_name, sizeof(f->syndrome_name), "%s",
				 syndromes[i].name);
			p->ti++;
		} else if (accept_word(p, "qpn")) {
			rc = get_u64(p, "a queue pair number", 0xffffff, &v);
			f->qpn = (int64_t)v;
		} else {
			break;
		}
	}
	return rc;
}

/* A counter: NIC.NAME, one word. */
static int get_counter_name(struct parser *p, struct scn_counter *c)
{
	const struct scn_tok *t = peek(p);
	const char *dot;

	if (t->type != SCN_TOK_WORD || !(dot = strchr(t->text, '.')) || dot == t->text || !dot[1])
		return expected(p, "a counter as NIC.NAME (e.g. a.retransmits)");
	if ((size_t)(dot - t->text) >= SCN_NAME_MAX || strlen(dot + 1) >= SCN_NAME_MAX)
		return err_at(p, t, "counter name too long");
	snprintf(c->nic, sizeof(c->nic), "%.*s", (int)(dot - t->text), t->text);
	snprintf(c->counter, sizeof(c->counter), "%s", dot + 1);
	p->ti++;
	return 0;
}

/* "text" or /ERE/ */
static int get_output(struct parser *p, struct scn_output *o)
{
	const struct scn_tok *t = peek(p);

	if (t->type == SCN_TOK_REGEX) {
		if (t->len >= SCN_TEXT_MAX)
			return err_at(p, t, "regex too long (at most %d bytes)", SCN_TEXT_MAX - 1);
		memcpy(o->text, t->text, t->len + 1);
		o->regex = true;
		p->ti++;
		return 0;
	}
	o->regex = false;
	return get_string(p, "a \"text\" or a /regex/", o->text);
}

/* ---- Statements ---------------------------------------------------------------- */

static struct scn_stmt *stmt_new(struct parser *p, enum scn_stmt_kind kind)
{
	struct scn_stmt *st, *v;
	size_t cap;

	if (p->s->nstmts == SCN_STMTS_MAX) {
		err_at(p, &p->toks.tok[0], "more than %d statements in one scenario",
		       SCN_STMTS_MAX);
		return NULL;
	}
	if (p->s->nstmts == p->cap) {
		cap = p->cap ? p->cap * 2 : 32;
		v = realloc(p->s->stmts, cap * sizeof(*v));
		if (!v)
			return NULL;
		p->s->stmts = v;
		p->cap = cap;
	}
	st = &p->s->stmts[p->s->nstmts];
	memset(st, 0, sizeof(*st));
	st->kind = kind;
	st->loc = scn_loc_at(p->file, p->toks.tok[0].pos);
	st->result.kind = SCN_RES_OK;
	return st;
}

static int index_add(struct parser *p);

/* The statement is complete: keep it. */
static int stmt_keep(struct parser *p, struct scn_stmt *st)
{
	size_t a = 0, b = p->line.len;
	struct scn_pos *pos;

	if (peek(p)->type != SCN_TOK_END)
		return expected(p, "the end of the statement");
	while (a < b && (p->line.text[a] == ' ' || p->line.text[a] == '\t'))
		a++;
	while (b > a && (p->line.text[b - 1] == ' ' || p->line.text[b - 1] == '\t'))
		b--;
	st->text = strndup(p->line.text + a, b - a);
	pos = malloc((b - a + 1) * sizeof(*pos));
	if (!st->text || !pos) {
		free((char *)st->text);
		free(pos);
		return -ENOMEM;
	}
	memcpy(pos, p->line.pos + a, (b - a + 1) * sizeof(*pos));
	st->text_pos = pos;
	p->s->nstmts++;
	return index_add(p);
}

/* [ "->" NAME ] [ "=" result ] [ "within" T ] [ "&" ], each once. */
static int get_trailers(struct parser *p, struct scn_stmt *st, bool name_ok, bool result_ok,
			bool async_ok)
{
	const struct scn_tok *t;
	int rc = 0;

	while (!rc && peek(p)->type != SCN_TOK_END) {
		t = peek(p);
		if (st->async)
			return err_at(p, t, "'&' ends a step: nothing may follow it");
		if (name_ok && !st->name[0] && accept_punct(p, "->")) {
			rc = get_name(p, "a name for what the call makes", st->name, &st->name_loc);
		} else if (result_ok && !st->has_result && accept_punct(p, "=")) {
			rc = get_result(p, &st->result);
			st->has_result = true;
		} else if (!st->within_ns && accept_word(p, "within")) {
			rc = get_time(p, &st->within_ns);
			if (!rc && !st->within_ns)
				rc = err_at(p, t, "'within 0' leaves no time at all");
		} else if (async_ok && accept_punct(p, "&")) {
			st->async = true;
		} else if (is_punct(t, "->")) {
			return err_at(p, t,
				      name_ok ? "'-> NAME' given twice"
					      : "this statement makes nothing to name");
		} else if (is_punct(t, "&")) {
			return err_at(p, t,
				      "'&' is for calls that complete later (accept, connect, "
				      "write, read, send, recv and their stream- forms)");
		} else {
			return expected(p, "the end of the statement");
		}
	}
	return rc;
}

/* A statement's keyword and the function that parses the rest of it. */
struct keyword {
	const char *word;
	int (*parse)(struct parser *p, const struct keyword *k);
	enum scn_stmt_kind kind; /* what it makes (wait and expect: decided by their words) */
	const char *what;        /* parse_target: what the name after it is */
};

static const struct scn_define *find_define(const struct parser *p, const char *name, size_t len)
{
	size_t i;

	for (i = 0; p->defs && i < p->defs->n; i++)
		if (strlen(p->defs->v[i].name) == len && !strncmp(p->defs->v[i].name, name, len))
			return &p->defs->v[i];
	return NULL;
}

static int parse_title(struct parser *p, const struct keyword *k)
{
	struct scn_stmt *st = stmt_new(p, k->kind);

	if (!st)
		return -ENOMEM;
	return (get_string(p, "the title as a \"string\"", st->u.text)) ? -EINVAL
									: stmt_keep(p, st);
}

static int parse_seed(struct parser *p, const struct keyword *k)
{
	struct scn_stmt *st = stmt_new(p, k->kind);

	if (!st)
		return -ENOMEM;
	if (get_u64(p, "a seed", UINT64_MAX, &st->u.seed))
		return -EINVAL;
	/* Known from here on, for ${SEED}, unless --seed or -D SEED gave one. */
	if (!p->seed_forced && !find_define(p, "SEED", 4)) {
		p->s->seed = st->u.seed;
		p->s->seed_set = true;
	}
	return stmt_keep(p, st);
}

static int parse_timeout(struct parser *p, const struct keyword *k)
{
	struct scn_stmt *st = stmt_new(p, k->kind);
	const struct scn_tok *t = peek(p);
	int rc;

	if (!st)
		return -ENOMEM;
	rc = get_time(p, &st->u.time_ns);
	if (!rc && !st->u.time_ns)
		rc = err_at(p, t, "timeout 0 leaves the scenario no time");
	return rc ? rc : stmt_keep(p, st);
}

static int parse_param(struct parser *p, const struct keyword *k)
{
	struct scn_stmt *st = stmt_new(p, k->kind);
	const struct scn_define *d;
	const struct scn_tok *t;
	size_t len;
	int rc;

	if (!st)
		return -ENOMEM;
	t = peek(p);
	rc = get_name(p, "the parameter's name", st->name, &st->name_loc);
	if (rc)
		return rc;
	/* ${SEED}, ${RUN_DIR} and ${NIC.addr} are the runner's: a parameter
	 * of that name would silently replace them. */
	len = strlen(st->name);
	if (!strcmp(st->name, "SEED"))
		return err_at(p, t,
			      "'SEED' is built in (the seed the scenario runs with): set it with "
			      "'seed N', --seed N or -D SEED=N, or name the parameter otherwise");
	if (!strcmp(st->name, "RUN_DIR"))
		return err_at(p, t,
			      "'RUN_DIR' is built in (the run directory): name the parameter "
			      "otherwise");
	if (len > 5 && !strcmp(st->name + len - 5, ".addr"))
		return err_at(p, t,
			      "'%s' is built in (the address of NIC '%.*s'): give the address on "
			      "the nic line, or name the parameter otherwise",
			      st->name, (int)(len - 5), st->name);
	rc = expect_punct(p, "=");
	if (rc)
		return rc;
	t = peek(p);
	if (t->type == SCN_TOK_END)
		return expected(p, "the parameter's value");
	if (t->type == SCN_TOK_STR && t->len >= SCN_TEXT_MAX) {
		return err_at(p, t,
			      "the value of parameter '%s' is %zu bytes: a parameter's value is at "
			      "most %d bytes",
			      st->name, t->len, SCN_TEXT_MAX - 1);
	} else if (t->type == SCN_TOK_STR) {
		rc = get_string(p, "a value", st->u.param.value);
	} else {
		/* Everything after '=' as written: 64KiB, RC_SEND_ONLY. */
		const char *from = p->line.text;
		size_t i;

		for (i = 0; i < p->line.len && (p->line.pos[i].line != t->pos.line ||
						p->line.pos[i].col != t->pos.col);
		     i++)
			;
		while (p->line.len > i && (p->line.text[p->line.len - 1] == ' ' ||
					   p->line.text[p->line.len - 1] == '\t'))
			p->line.len--;
		if (p->line.len - i >= SCN_TEXT_MAX)
			return err_at(
			    p, t,
			    "the value of parameter '%s' is %zu bytes: a parameter's value "
			    "is at most %d bytes",
			    st->name, p->line.len - i, SCN_TEXT_MAX - 1);
		snprintf(st->u.param.value, SCN_TEXT_MAX, "%.*s", (int)(p->line.len - i), from + i);
		while (peek(p)->type != SCN_TOK_END)
			p->ti++;
	}
	if (rc)
		return rc;
	d = find_define(p, st->name, strlen(st->name));
	if (d) {
		if (strlen(d->value) >= SCN_TEXT_MAX)
			return err_at(
			    p, t,
			    "-D %s: the value is %zu bytes: a parameter's value is at most "
			    "%d bytes",
			    d->name, strlen(d->value), SCN_TEXT_MAX - 1);
		snprintf(st->u.param.value, SCN_TEXT_MAX, "%s", d->value);
		st->u.param.overridden = true;
	}
	return stmt_keep(p, st);
}

static int parse_nic(struct parser *p, const struct keyword *k)
{
	struct scn_stmt *st = stmt_new(p, k->kind);
	struct scn_nic *n;
	const struct scn_tok *t;
	uint64_t v;
	size_t i;
	int rc;

	if (!st)
		return -ENOMEM;
	n = &st->u.nic;
	for (i = 0; i < NIC_TIMER_OPTS; i++)
		n->timer[i] = -1;
	rc = get_name(p, "the NIC's name", st->name, &st->name_loc);
	if (rc)
		return rc;
	t = peek(p);
	if ((t->type != SCN_TOK_NUM && t->type != SCN_TOK_WORD) || t->len >= SCN_NAME_MAX)
		return expected(p, "the NIC's address (e.g. 198.18.0.1)");
	memcpy(n->addr_text, t->text, t->len + 1);
	rc = fab_addr_parse(t->text, &n->addr);
	if (rc == -EADDRNOTAVAIL)
		return err_at(p, t,
			      "%s: not a NIC address: nicsim NICs take 198.18.0.1 to "
			      "198.19.255.254 (198.18.0.0/15)",
			      t->text);
	if (rc)
		return err_at(p, t, "%s: not an IPv4 address (expected e.g. 198.18.0.1)", t->text);
	p->ti++;
	while (!rc && peek(p)->type != SCN_TOK_END) {
		t = peek(p);
		if (accept_word(p, "no-windows")) {
			n->no_windows = true;
			continue;
		}
		if (accept_word(p, "no-rdma-read")) {
			n->no_rdma_read = true;
			continue;
		}
		if (accept_word(p, "tpt-capacity")) {
			rc = get_u64(p, "the TPT's capacity", NIC_TPT_MAX_CAPACITY, &v);
			if (!rc && !v)
				rc = err_at(p, t, "tpt-capacity 0: a NIC needs at least one entry");
			n->tpt_capacity = (uint32_t)v;
			continue;
		}
		if (accept_word(p, "max-reg")) {
			rc = get_size(p, &n->max_reg);
			if (!rc && !n->max_reg)
				rc = err_at(p, t, "max-reg 0: leave it out for nicsimd's default");
			continue;
		}
		for (i = 0; i < NIC_TIMER_OPTS; i++)
			if (is_word(t, nic_timer_opts[i].name))
				break;
		if (i == NIC_TIMER_OPTS) {
			static const char *const opts[] = {"no-windows",
							   "no-rdma-read",
							   "tpt-capacity",
							   "max-reg",
							   "ack-timeout",
							   "retry-count",
							   "rnr-retry",
							   "cm-timeout",
							   "cm-retries",
							   "rnr-timer",
							   NULL};
			const char *near =
			    t->type == SCN_TOK_WORD ? scn_nearest(t->text, opts, 0) : NULL;
			char buf[64];

			return err_at(p, t,
				      "unknown NIC option %s%s%s%s (no-windows, no-rdma-read, "
				      "tpt-capacity N, max-reg SIZE, ack-timeout, retry-count, "
				      "rnr-retry, cm-timeout, cm-retries, rnr-timer)",
				      tok_desc(t, buf, sizeof(buf)), near ? "; did you mean '" : "",
				      near ? near : "", near ? "'?" : "");
		}
		p->ti++;
		t = peek(p);
		rc = get_u64(p, nic_timer_opts[i].name, nic_timer_opts[i].max, &v);
		if (!rc && v < nic_timer_opts[i].min)
			rc = err_at(p, t, "%s %llu: at least %u", nic_timer_opts[i].name,
				    (unsigned long long)v, nic_timer_opts[i].min);
		n->timer[i] = (int)v;
	}
	return rc ? rc : stmt_keep(p, st);
}

static int parse_link(struct parser *p, const struct keyword *k)
{
	static const char *const none[] = {NULL};
	struct scn_stmt *st = stmt_new(p, k->kind);

	if (!st)
		return -ENOMEM;
	return (get_ends(p, true, &st->u.link.ends) || get_link_words(p, none, &st->u.link.words))
		   ? -EINVAL
		   : stmt_keep(p, st);
}

static int parse_host(struct parser *p, const struct keyword *k)
{
	struct scn_stmt *st = stmt_new(p, k->kind);
	int rc;

	if (!st)
		return -ENOMEM;
	st->u.host.cache = -1;
	rc = (get_name(p, "the host's name", st->name, &st->name_loc) || expect_word(p, "on") ||
	      get_name(p, "a NIC", st->u.host.nic, NULL))
		 ? -EINVAL
		 : 0;
	if (!rc && accept_word(p, "cache")) {
		if (accept_word(p, "on"))
			st->u.host.cache = 1;
		else if (accept_word(p, "off"))
			st->u.host.cache = 0;
		else
			rc = expected(p, "'on' or 'off'");
	}
	return rc ? rc : stmt_keep(p, st);
}

static int parse_program(struct parser *p, const struct keyword *k)
{
	struct scn_stmt *st = stmt_new(p, k->kind);

	if (!st)
		return -ENOMEM;
	return (get_name(p, "the program's name", st->name, &st->name_loc) ||
		expect_word(p, "on") || get_name(p, "a NIC", st->u.program.nic, NULL) ||
		get_string(p, "the command as a \"string\"", st->u.program.command))
		   ? -EINVAL
		   : stmt_keep(p, st);
}

static int parse_capture(struct parser *p, const struct keyword *k)
{
	struct scn_stmt *st = stmt_new(p, k->kind);

	if (!st)
		return -ENOMEM;
	if (accept_word(p, "on"))
		st->u.flag = true;
	else if (!accept_word(p, "off"))
		return expected(p, "'on' or 'off'");
	return stmt_keep(p, st);
}

/* HOST: VERB ARGS ... */
static int parse_call(struct parser *p)
{
	struct scn_stmt *st = stmt_new(p, SCN_CALL);
	const struct scn_tok *t;
	struct scn_call *c;
	uint64_t v = 0;
	int rc;

	if (!st)
		return -ENOMEM;
	c = &st->u.call;
	rc = (get_name(p, "a host", c->host, NULL) || expect_punct(p, ":")) ? -EINVAL : 0;
	if (rc)
		return rc;
	t = peek(p);
	c->verb = t->type == SCN_TOK_WORD ? scn_verb_parse(t->text) : 0;
	if (t->type == SCN_TOK_END)
		return expected(p, "a call (startup, socket, bind, listen, accept, connect, "
				   "buffer, register, write, read, send, recv, close ...)");
	if (!c->verb) {
		const char *verbs[SCN_VERB_COUNT_];
		const char *near = NULL;
		char buf[64];
		int i;

		if (t->type == SCN_TOK_WORD) {
			for (i = 1; i < SCN_VERB_COUNT_; i++)
				verbs[i - 1] = scn_verb_name((enum scn_verb)i);
			near = scn_nearest(t->text, verbs, SCN_VERB_COUNT_ - 1);
		}
		if (near)
			return err_at(p, t, "unknown call %s; did you mean '%s'?",
				      tok_desc(t, buf, sizeof(buf)), near);
		return err_at(p, t,
			      "unknown call %s (startup, socket, bind, listen, accept, connect, "
			      "buffer, register, write, read, send, recv, close ...)",
			      tok_desc(t, buf, sizeof(buf)));
	}
	p->ti++;
	switch (c->verb) {
	case SCN_V_BIND:
	case SCN_V_CONNECT:
		rc =
		    (get_name(p, "a socket", c->sock, NULL) || get_name(p, "a NIC", c->nic, NULL) ||
		     get_u64(p, "a port (0..65535)", 65535, &v))
			? -EINVAL
			: 0;
		c->port = (uint32_t)v;
		break;
	case SCN_V_LISTEN:
		rc = get_name(p, "a socket", c->sock, NULL);
		if (!rc && peek(p)->type == SCN_TOK_NUM) {
			rc = get_u64(p, "a backlog", 65535, &v);
			c->backlog = (uint32_t)v;
		}
		break;
	case SCN_V_ACCEPT:
	case SCN_V_CLOSE: rc = get_name(p, "a socket", c->sock, NULL); break;
	case SCN_V_BUFFER:
		rc = (get_name(p, "the buffer's name", c->local.name, &st->name_loc) ||
		      get_size(p, &c->size))
			 ? -EINVAL
			 : 0;
		memcpy(st->name, c->local.name, sizeof(st->name));
		if (!rc && accept_word(p, "fill"))
			rc = get_pattern(p, &c->fill);
		if (!rc && accept_word(p, "malloc"))
			c->use_malloc = true;
		break;
	case SCN_V_REGISTER:
	case SCN_V_REGISTER_RDMA:
		rc = (get_name(p, "a socket", c->sock, NULL) ||
		      get_range(p, "a buffer", false, &c->local))
			 ? -EINVAL
			 : 0;
		if (!rc && (is_word(peek(p), "read") || is_word(peek(p), "write") ||
			    is_word(peek(p), "readwrite")))
			rc = get_access(p, &c->access);
		break;
	case SCN_V_DEREGISTER:
		rc = (get_name(p, "a socket", c->sock, NULL) ||
		      get_name(p, "a handle", c->target, NULL))
			 ? -EINVAL
			 : 0;
		break;
	case SCN_V_DEREGISTER_RDMA:
		rc = (get_name(p, "a socket", c->sock, NULL) ||
		      get_name(p, "a descriptor", c->target, NULL))
			 ? -EINVAL
			 : 0;
		break;
	case SCN_V_WRITE:
	case SCN_V_READ:
		rc = (get_name(p, "a socket", c->sock, NULL) ||
		      get_range(p, "a buffer", false, &c->local))
			 ? -EINVAL
			 : 0;
		t = peek(p);
		if (!rc)
			rc = get_range(p, "a descriptor", true, &c->remote);
		if (!rc && c->remote.form != SCN_RANGE_WHOLE && c->remote.form != SCN_RANGE_AT)
			rc = err_at(p, t,
				    "the descriptor takes an offset only (d[4KiB]): the length "
				    "is the buffer's");
		if (!rc && c->verb == SCN_V_READ && accept_word(p, "len"))
			rc = get_size(p, &c->size);
		break;
	case SCN_V_SEND:
	case SCN_V_RECV:
		rc = (get_name(p, "a socket", c->sock, NULL) ||
		      get_range(p, "a buffer", false, &c->local))
			 ? -EINVAL
			 : 0;
		break;
	case SCN_V_CACHE_CALLBACK: rc = get_range(p, "a buffer", false, &c->local); break;
	case SCN_V_MUNMAP:
		/* The agent unmaps a buffer whole: a buffer is one mapping, and
		 * madvise drops the pages of a part of it. */
		t = peek(p);
		rc = get_range(p, "a buffer", false, &c->local);
		if (!rc && c->local.form != SCN_RANGE_WHOLE)
			rc = err_at(p, t,
				    "munmap unmaps a whole buffer: write 'munmap %s' (to drop "
				    "the pages of a part, 'madvise %s[...] dontneed')",
				    c->local.name, c->local.name);
		break;
	case SCN_V_MMAP:
	case SCN_V_FREE: rc = get_name(p, "a buffer", c->local.name, NULL); break;
	case SCN_V_MREMAP:
	case SCN_V_REALLOC:
		rc = (get_name(p, "a buffer", c->local.name, NULL) || get_size(p, &c->size))
			 ? -EINVAL
			 : 0;
		break;
	case SCN_V_MADVISE:
		rc = get_range(p, "a buffer", false, &c->local);
		if (rc)
			break;
		if (accept_word(p, "dontneed"))
			c->advice = SCN_ADV_DONTNEED;
		else if (accept_word(p, "free"))
			c->advice = SCN_ADV_FREE;
		else if (accept_word(p, "remove"))
			c->advice = SCN_ADV_REMOVE;
		else
			rc = expected(p, "an advice: dontneed, free or remove");
		break;
	case SCN_V_EXIT:
		rc = get_u64(p, "an exit status (0..255)", 255, &v);
		c->exit_code = (int)v;
		break;
	case SCN_V_STREAM_BIND:
	case SCN_V_STREAM_CONNECT:
		rc = (get_name(p, "a stream socket", c->sock, NULL) ||
		      get_name(p, "a NIC", c->nic, NULL) ||
		      get_u64(p, "a port (0..65535)", 65535, &v))
			 ? -EINVAL
			 : 0;
		c->port = (uint32_t)v;
		if (!rc && c->verb == SCN_V_STREAM_CONNECT)
			rc = get_path_opt(p, &c->path);
		break;
	case SCN_V_STREAM_LISTEN:
		rc = get_name(p, "a stream socket", c->sock, NULL);
		if (!rc && peek(p)->type == SCN_TOK_NUM) {
			rc = get_u64(p, "a backlog", 65535, &v);
			c->backlog = (uint32_t)v;
		}
		if (!rc)
			rc = get_path_opt(p, &c->path);
		break;
	case SCN_V_STREAM_ACCEPT:
	case SCN_V_STREAM_CLOSE: rc = get_name(p, "a stream socket", c->sock, NULL); break;
	case SCN_V_STREAM_SEND:
	case SCN_V_STREAM_RECV:
		rc = (get_name(p, "a stream socket", c->sock, NULL) ||
		      get_range(p, "a buffer", false, &c->local))
			 ? -EINVAL
			 : 0;
		break;
	case SCN_V_STREAM_SHUTDOWN:
		rc = get_name(p, "a stream socket", c->sock, NULL);
		if (rc)
			break;
		if (accept_word(p, "read"))
			c->how = SCN_SHUT_READ;
		else if (accept_word(p, "write"))
			c->how = SCN_SHUT_WRITE;
		else if (accept_word(p, "both"))
			c->how = SCN_SHUT_BOTH;
		else
			rc = expected(p, "what to shut down: read, write or both");
		break;
	default: break; /* startup, socket, cleanup, fork, stream-socket: no arguments */
	}
	if (rc)
		return rc;
	if (c->verb == SCN_V_BUFFER) {
		/* The buffer's name is given before, not after. */
		rc = get_trailers(p, st, false, true, false);
	} else {
		rc = get_trailers(p, st, scn_verb_makes(c->verb) != SCN_KIND_NONE, true,
				  scn_verb_async(c->verb));
	}
	return rc ? rc : stmt_keep(p, st);
}

/* The widths parse_desc allows for the fields it sets. */
_Static_assert(sizeof(((struct nicsim_rdma_desc *)0)->rkey) == 4, "rkey is 32 bits");
_Static_assert(sizeof(((struct nicsim_rdma_desc *)0)->magic) == 4, "magic is 32 bits");
_Static_assert(sizeof(((struct nicsim_rdma_desc *)0)->version) == 2, "version is 16 bits");
_Static_assert(sizeof(((struct nicsim_rdma_desc *)0)->access) == 2, "access is 16 bits");

static int parse_desc(struct parser *p, const struct keyword *k)
{
	static const struct {
		const char *word;
		enum scn_desc_field field;
	} fields[] = {
	    {"rkey", SCN_DF_RKEY},     {"va", SCN_DF_VA},       {"len", SCN_DF_LEN},
	    {"nic", SCN_DF_NIC},       {"magic", SCN_DF_MAGIC}, {"version", SCN_DF_VERSION},
	    {"access", SCN_DF_ACCESS},
	};
	struct scn_stmt *st = stmt_new(p, k->kind);
	struct scn_desc *d;
	enum scn_access a;
	size_t i;
	int rc;

	if (!st)
		return -ENOMEM;
	d = &st->u.desc;
	rc = (get_name(p, "the new descriptor's name", st->name, &st->name_loc) ||
	      expect_punct(p, "=") || get_name(p, "a descriptor", d->base, NULL))
		 ? -EINVAL
		 : 0;
	if (rc)
		return rc;
	if (accept_word(p, "truncated")) {
		d->field = SCN_DF_TRUNCATED;
		rc = get_u64(p, "the bytes kept", 4096, &d->value);
		return rc ? rc : stmt_keep(p, st);
	}
	rc = expect_word(p, "with");
	if (rc)
		return rc;
	for (i = 0; i < ARRAY_SIZE(fields); i++)
		if (accept_word(p, fields[i].word))
			break;
	if (i == ARRAY_SIZE(fields))
		return expected(p, "a field: rkey, va, len, nic, magic, version or access");
	d->field = fields[i].field;
	switch (d->field) {
	case SCN_DF_NIC: rc = get_name(p, "a NIC", d->nic, NULL); break;
	case SCN_DF_VA:
	case SCN_DF_LEN:
		if (accept_punct(p, "+")) {
			d->relative = true;
		} else if (accept_punct(p, "-")) {
			d->relative = true;
			d->negative = true;
		}
		rc = get_size(p, &d->value);
		break;
	case SCN_DF_ACCESS:
		if (peek(p)->type == SCN_TOK_WORD) {
			/* The descriptor holds ws2san.h's MEM_* value. */
			static const uint64_t mem[] = {[SCN_ACCESS_READWRITE] = MEM_READWRITE,
						       [SCN_ACCESS_READ] = MEM_READ,
						       [SCN_ACCESS_WRITE] = MEM_WRITE};

			rc = get_access(p, &a);
			d->value = rc ? 0 : mem[a];
			break;
		}
		rc = get_u64(p, "an access value (16 bits)", UINT16_MAX, &d->value);
		break;
	/* The descriptor's fields are narrower than 64 bits: a larger value
	 * would be cut silently. */
	case SCN_DF_RKEY: rc = get_u64(p, "an rkey (32 bits)", UINT32_MAX, &d->value); break;
	case SCN_DF_MAGIC: rc = get_u64(p, "a magic (32 bits)", UINT32_MAX, &d->value); break;
	case SCN_DF_VERSION: rc = get_u64(p, "a version (16 bits)", UINT16_MAX, &d->value); break;
	default: rc = get_u64(p, "a value", UINT64_MAX, &d->value); break;
	}
	return rc ? rc : stmt_keep(p, st);
}

/* A signal by name (TERM, SIGTERM) or number. */
static int get_signal(struct parser *p, int *sig)
{
	static const struct {
		const char *name;
		int sig;
	} sigs[] = {{"KILL", SIGKILL}, {"TERM", SIGTERM}, {"INT", SIGINT},   {"HUP", SIGHUP},
		    {"QUIT", SIGQUIT}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"STOP", SIGSTOP},
		    {"CONT", SIGCONT}, {"ABRT", SIGABRT}};
	const struct scn_tok *t = peek(p);
	const char *name = t->text;
	uint64_t v;
	size_t i;

	if (t->type == SCN_TOK_NUM) {
		if (get_u64(p, "a signal number", 64, &v))
			return -EINVAL;
		if (!v)
			return err_at(p, t, "signal 0 sends nothing");
		*sig = (int)v;
		return 0;
	}
	if (t->type != SCN_TOK_WORD)
		return expected(p, "a signal (TERM, INT, HUP ...)");
	if (!strncmp(name, "SIG", 3))
		name += 3;
	for (i = 0; i < ARRAY_SIZE(sigs); i++)
		if (!strcmp(name, sigs[i].name)) {
			*sig = sigs[i].sig;
			p->ti++;
			return 0;
		}
	return err_at(p, t,
		      "unknown signal '%s' (KILL, TERM, INT, HUP, QUIT, USR1, USR2, "
		      "STOP, CONT, ABRT or a number)",
		      t->text);
}

/* kill nic NIC | kill NAME [SIGNAL]; restart/stop/cont nic NIC; start, heal, mark */
static int parse_target(struct parser *p, const struct keyword *k)
{
	enum scn_stmt_kind kind = k->kind;
	const char *what = k->what;
	struct scn_stmt *st;
	int rc;

	if (kind == SCN_KILL && is_word(peek(p), "nic")) {
		p->ti++;
		kind = SCN_KILL_NIC;
		what = "a NIC";
	} else if (kind == SCN_KILL_NIC || kind == SCN_RESTART_NIC || kind == SCN_STOP_NIC ||
		   kind == SCN_CONT_NIC) {
		rc = expect_word(p, "nic");
		if (rc)
			return rc;
	}
	st = stmt_new(p, kind);
	if (!st)
		return -ENOMEM;
	if (kind == SCN_MARK) {
		rc = get_name(p, what, st->name, &st->name_loc);
	} else if (kind == SCN_KILL) {
		st->u.kill.signal = SIGKILL;
		rc = get_name(p, what, st->u.kill.target, NULL);
		if (!rc && peek(p)->type != SCN_TOK_END)
			rc = get_signal(p, &st->u.kill.signal);
	} else {
		rc = get_name(p, what, st->u.target, NULL);
	}
	return rc ? rc : stmt_keep(p, st);
}

static int parse_fault(struct parser *p, const struct keyword *k)
{
	static const char *const stop[] = {"after", "at", "for", "optional", NULL};
	struct scn_stmt *st = stmt_new(p, k->kind);
	const struct scn_tok *t;
	struct scn_fault *f;
	uint64_t v;
	int rc;

	if (!st)
		return -ENOMEM;
	f = &st->u.fault;
	rc = (get_name(p, "the fault's name", st->name, &st->name_loc) ||
	      get_ends(p, true, &f->ends) || get_link_words(p, stop, &f->words))
		 ? -EINVAL
		 : 0;
	if (!rc && accept_word(p, "after")) {
		f->start = SCN_FAULT_AFTER;
		rc = get_name(p, "an operation or a name a step made", f->after, NULL);
	} else if (!rc && accept_word(p, "at")) {
		f->start = SCN_FAULT_AT;
		rc = (expect_punct(p, "+") || get_time(p, &f->at_ns)) ? -EINVAL : 0;
	}
	if (!rc && accept_word(p, "for")) {
		t = peek(p);
		if (t->type == SCN_TOK_NUM && is_word(peek2(p), "frames")) {
			rc = get_u64(p, "a frame count", UINT64_MAX, &v);
			f->end = SCN_FAULT_FOR_FRAMES;
			f->for_frames = v;
			p->ti++;
			if (!rc && !v)
				rc = err_at(p, t, "for 0 frames: the fault would never act");
		} else {
			rc = get_time(p, &f->for_ns);
			f->end = SCN_FAULT_FOR_TIME;
			if (!rc && !f->for_ns)
				rc = err_at(p, t, "for 0s: the fault would never act");
		}
	}
	if (!rc && accept_word(p, "optional"))
		st->optional = true;
	return rc ? rc : stmt_keep(p, st);
}

/* NIC.NAME [ "delta" [ "from" MARK ] ] CMP (wait and expect alike) */
static int get_counter(struct parser *p, struct scn_counter *k)
{
	int rc = get_counter_name(p, k);

	if (!rc && accept_word(p, "delta")) {
		k->delta = true;
		if (accept_word(p, "from"))
			rc = get_name(p, "a mark", k->mark, NULL);
	}
	return rc ? rc : get_cmp(p, &k->cmp);
}

/* PROGRAM "output" ( STR | RE ) */
static int get_program_output(struct parser *p, struct scn_output *o)
{
	int rc = get_name(p, "a program", o->target, NULL);

	p->ti++; /* "output", seen by the caller */
	return rc ? rc : get_output(p, o);
}

/* wait NAME ... and expect NAME ...: which statement the words after the
 * keyword make.  Sub-keywords (counter, frame ...) count only when a word
 * follows, so that an operation may be called "counter". */
static enum scn_stmt_kind sub_kind(struct parser *p, const char *const *words,
				   const enum scn_stmt_kind *kinds, size_t n,
				   enum scn_stmt_kind output, enum scn_stmt_kind other)
{
	const struct scn_tok *t = peek(p), *t2 = peek2(p);
	size_t i;

	/* "expect WORD" alone cannot be the memory form, which needs a
	 * buffer after the host: the sub-statement says what it lacks. */
	for (i = 0; i < n; i++)
		if (is_word(t, words[i]) &&
		    (t2->type == SCN_TOK_WORD ||
		     (t2->type == SCN_TOK_END && other == SCN_EXPECT_MEM))) {
			p->ti++;
			return kinds[i];
		}
	if (is_word(t2, "output"))
		return output;
	if (is_word(t2, "exit") && other == SCN_WAIT_OP)
		return SCN_WAIT_EXIT;
	return other;
}

static int parse_wait(struct parser *p, const struct keyword *k)
{
	static const char *const words[] = {"counter", "frame"};
	static const enum scn_stmt_kind kinds[] = {SCN_WAIT_COUNTER, SCN_WAIT_FRAME};
	enum scn_stmt_kind kind = sub_kind(p, words, kinds, 2, SCN_WAIT_OUTPUT, SCN_WAIT_OP);
	struct scn_stmt *st = stmt_new(p, kind);
	uint64_t v;
	int rc;

	(void)k; /* the kind depends on the words after it */

	if (!st)
		return -ENOMEM;
	switch (kind) {
	case SCN_WAIT_COUNTER: rc = get_counter(p, &st->u.counter); break;
	case SCN_WAIT_FRAME:
		st->u.frames.count.op = SCN_CMP_GE;
		st->u.frames.count.a = 1;
		rc = get_filter(p, &st->u.frames.filter);
		break;
	case SCN_WAIT_OUTPUT: rc = get_program_output(p, &st->u.output); break;
	case SCN_WAIT_EXIT:
		rc = get_name(p, "a program or a host", st->u.exit.target, NULL);
		p->ti++; /* "exit" */
		if (!rc && peek(p)->type == SCN_TOK_NUM) {
			rc = get_u64(p, "an exit status (0..255)", 255, &v);
			st->u.exit.has_code = true;
			st->u.exit.code = (int)v;
		}
		break;
	default:
		rc = get_name(p, "what to wait for: an operation, counter, frame, or a program",
			      st->u.target, NULL);
		if (!rc)
			rc = get_trailers(p, st, false, true, false);
		break;
	}
	if (!rc)
		rc = get_trailers(p, st, false, false, false);
	return rc ? rc : stmt_keep(p, st);
}

static int parse_settle(struct parser *p, const struct keyword *k)
{
	struct scn_stmt *st = stmt_new(p, k->kind);
	int rc;

	if (!st)
		return -ENOMEM;
	rc = get_time(p, &st->u.settle.ns);
	if (!rc && accept_word(p, "no")) {
		st->u.settle.no_frame = true;
		rc = (expect_word(p, "frame") || get_filter(p, &st->u.settle.filter)) ? -EINVAL : 0;
	}
	return rc ? rc : stmt_keep(p, st);
}

/* tpt NIC ( "entries" CMP [ "of" HOST ] | "key" DESC STATE ) */
static int get_tpt(struct parser *p, struct scn_tpt *tp)
{
	int rc = get_name(p, "a NIC", tp->nic, NULL);

	if (rc)
		return rc;
	if (accept_word(p, "entries")) {
		rc = get_cmp(p, &tp->cmp);
		if (!rc && accept_word(p, "of"))
			rc = get_name(p, "a host", tp->host, NULL);
		return rc;
	}
	if (!accept_word(p, "key"))
		return expected(p, "'entries' or 'key'");
	tp->key = true;
	rc = get_name(p, "a descriptor", tp->desc, NULL);
	if (rc)
		return rc;
	if (accept_word(p, "valid"))
		tp->state = SCN_TPT_VALID;
	else if (accept_word(p, "invalid"))
		tp->state = SCN_TPT_INVALID;
	else if (accept_word(p, "free"))
		tp->state = SCN_TPT_FREE;
	else
		return expected(p, "a state: valid, invalid or free");
	return 0;
}

/* refusal NIC "reason" REASON [ "from" NIC ] [ "since" MARK ]: reasons as NIC_TPT_REASONS
 * names them, lower case with '-' ("stale-key" is NIC_TPT_R_STALE_KEY). */
static int get_refusal(struct parser *p, struct scn_refusal *r)
{
	static const char *const reasons[] = {
#define SCN_REASON_NAME(name, desc) #name,
	    NIC_TPT_REASONS(SCN_REASON_NAME)
#undef SCN_REASON_NAME
	};
	const struct scn_tok *t;
	char up[SCN_NAME_MAX];
	size_t i;

	if (get_name(p, "a NIC", r->nic, NULL) || expect_word(p, "reason"))
		return -EINVAL;
	t = peek(p);
	if (get_name(p, "a reason (stale-key, no-access ...)", r->reason, NULL))
		return -EINVAL;
	for (i = 0; r->reason[i]; i++)
		up[i] = r->reason[i] == '-' ? '_' : (char)(r->reason[i] & ~0x20);
	up[i] = '\0';
	for (i = 1; i < ARRAY_SIZE(reasons); i++)
		if (!strcmp(up, reasons[i]))
			break;
	if (i == ARRAY_SIZE(reasons))
		return err_at(p, t,
			      "unknown reason '%s' (bad-index, stale-key, wrong-pd, no-access, "
			      "bad-state, wrong-qp, out-of-range)",
			      r->reason);
	r->reason_code = (int)i;
	if (accept_word(p, "from") && get_name(p, "the requester's NIC", r->from, NULL))
		return -EINVAL;
	return accept_word(p, "since") ? get_name(p, "a mark", r->since, NULL) : 0;
}

/* HOST RANGE ( "==" PATTERN | "==" HOST RANGE | "unchanged" | "checksum" N ) */
static int get_mem(struct parser *p, struct scn_mem *m)
{
	const struct scn_tok *t;
	uint64_t v;

	if (get_name(p, "tpt, counter, refusal, frames, stream, a program or a host", m->host,
		     NULL) ||
	    get_range(p, "a buffer", false, &m->range))
		return -EINVAL;
	if (accept_word(p, "unchanged")) {
		m->check = SCN_MEM_UNCHANGED;
		return 0;
	}
	if (accept_word(p, "checksum")) {
		m->check = SCN_MEM_CHECKSUM;
		if (get_u64(p, "a CRC-32", UINT32_MAX, &v))
			return -EINVAL;
		m->checksum = (uint32_t)v;
		return 0;
	}
	if (!accept_punct(p, "=="))
		return expected(p, "'== PATTERN', '== HOST BUFFER', 'unchanged' or 'checksum N'");
	t = peek(p);
	if (is_word(t, "zero") || is_word(t, "seq") || is_word(t, "random") || is_word(t, "byte")) {
		m->check = SCN_MEM_PATTERN;
		return get_pattern(p, &m->pattern);
	}
	m->check = SCN_MEM_PEER;
	if (get_name(p, "a pattern or a host", m->peer_host, NULL) ||
	    get_range(p, "a buffer", false, &m->peer))
		return -EINVAL;
	return 0;
}

/* stream SOCK ( "path" [ "in" | "out" ] ( "read" | "write" ) | STAT CMP ) */
static int get_stream_exp(struct parser *p, struct scn_stream_exp *e)
{
	const struct scn_tok *t;

	if (get_name(p, "a stream socket", e->sock, NULL))
		return -EINVAL;
	if (accept_word(p, "path")) {
		e->path = true;
		if (accept_word(p, "in"))
			e->in = true;
		else if (accept_word(p, "out"))
			e->out = true;
		else
			e->in = e->out = true;
		if (accept_word(p, "read"))
			e->want = SCN_PATH_READ;
		else if (accept_word(p, "write"))
			e->want = SCN_PATH_WRITE;
		else
			return expected(p, "a path: read or write");
		return 0;
	}
	t = peek(p);
	if (get_name(p, "'path' or a statistic (large_sends, registrations ...)", e->stat, NULL))
		return -EINVAL;
	if (scn_stream_stat_index(e->stat) < 0) {
		const char *near = scn_nearest(e->stat, scn_stream_stats, scn_stream_nstats);

		return err_at(p, t,
			      "unknown statistic '%s'%s%s%s (NSW_STATS: bytes_sent, "
			      "bytes_received, msgs_sent, msgs_received, large_sends, rdma_ops, "
			      "registrations, credit_updates, credit_waits), or 'path'",
			      e->stat, near ? "; did you mean '" : "", near ? near : "",
			      near ? "'?" : "");
	}
	return get_cmp(p, &e->cmp);
}

static int parse_expect(struct parser *p, const struct keyword *k)
{
	static const char *const words[] = {"tpt", "counter", "refusal", "frames", "stream"};
	static const enum scn_stmt_kind kinds[] = {SCN_EXPECT_TPT, SCN_EXPECT_COUNTER,
						   SCN_EXPECT_REFUSAL, SCN_EXPECT_FRAMES,
						   SCN_EXPECT_STREAM};
	enum scn_stmt_kind kind = sub_kind(p, words, kinds, 5, SCN_EXPECT_OUTPUT, SCN_EXPECT_MEM);
	struct scn_stmt *st = stmt_new(p, kind);
	int rc;

	(void)k; /* the kind depends on the words after it */

	if (!st)
		return -ENOMEM;
	switch (kind) {
	case SCN_EXPECT_TPT: rc = get_tpt(p, &st->u.tpt); break;
	case SCN_EXPECT_COUNTER: rc = get_counter(p, &st->u.counter); break;
	case SCN_EXPECT_REFUSAL: rc = get_refusal(p, &st->u.refusal); break;
	case SCN_EXPECT_FRAMES:
		rc = (get_filter(p, &st->u.frames.filter) || expect_word(p, "count") ||
		      get_cmp(p, &st->u.frames.count))
			 ? -EINVAL
			 : 0;
		break;
	case SCN_EXPECT_OUTPUT: rc = get_program_output(p, &st->u.output); break;
	case SCN_EXPECT_STREAM: rc = get_stream_exp(p, &st->u.stream); break;
	default: rc = get_mem(p, &st->u.mem); break;
	}
	return rc ? rc : stmt_keep(p, st);
}

/* One statement from the tokens of the current line. */
static int parse_include(struct parser *p, const struct keyword *k);

static const struct keyword keywords[] = {
    {"title", parse_title, SCN_TITLE, NULL},
    {"seed", parse_seed, SCN_SEED, NULL},
    {"param", parse_param, SCN_PARAM, NULL},
    {"include", parse_include, 0, NULL},
    {"timeout", parse_timeout, SCN_TIMEOUT, NULL},
    {"nic", parse_nic, SCN_NIC, NULL},
    {"link", parse_link, SCN_LINK, NULL},
    {"host", parse_host, SCN_HOST, NULL},
    {"program", parse_program, SCN_PROGRAM, NULL},
    {"capture", parse_capture, SCN_CAPTURE, NULL},
    {"desc", parse_desc, SCN_DESC, NULL},
    {"start", parse_target, SCN_START, "a program"},
    {"kill", parse_target, SCN_KILL, "a host, a program or 'nic NIC'"},
    {"restart", parse_target, SCN_RESTART_NIC, "a NIC"},
    {"stop", parse_target, SCN_STOP_NIC, "a NIC"},
    {"cont", parse_target, SCN_CONT_NIC, "a NIC"},
    {"heal", parse_target, SCN_HEAL, "a fault"},
    {"mark", parse_target, SCN_MARK, "the mark's name"},
    {"fault", parse_fault, SCN_FAULT, NULL},
    {"wait", parse_wait, 0, NULL},
    {"settle", parse_settle, SCN_SETTLE, NULL},
    {"expect", parse_expect, 0, NULL},
};

/* One statement from the tokens of the current line. */
static int parse_stmt(struct parser *p)
{
	const struct scn_tok *t = peek(p);
	const char *words[ARRAY_SIZE(keywords)], *near, *verb;
	char buf[64];
	size_t i;

	if (t->type == SCN_TOK_WORD && is_punct(peek2(p), ":"))
		return parse_call(p);
	if (t->type != SCN_TOK_WORD)
		return err_at(p, t, "expected a statement, found %s",
			      tok_desc(t, buf, sizeof(buf)));
	p->ti++;
	for (i = 0; i < ARRAY_SIZE(keywords); i++) {
		if (!strcmp(t->text, keywords[i].word))
			return keywords[i].parse(p, &keywords[i]);
		words[i] = keywords[i].word;
	}
	if (!strcmp(t->text, "sleep"))
		return err_at(p, t,
			      "there is no sleep: wait for an event with a deadline (wait NAME, "
			      "wait counter, wait frame ... within T), or 'settle T' to check "
			      "that nothing happens");
	near = scn_nearest(t->text, words, ARRAY_SIZE(words));
	if (near)
		return err_at(p, t, "unknown statement '%s'; did you mean '%s'?", t->text, near);
	/* "h1 socket": a call without its colon. */
	verb =
	    peek(p)->type == SCN_TOK_WORD && scn_verb_parse(peek(p)->text) ? peek(p)->text : NULL;
	if (verb)
		return err_at(p, t, "unknown statement '%s'; a call is written '%s: %s ...'",
			      t->text, t->text, verb);
	return err_at(p, t, "unknown statement '%s'", t->text);
}

/* ---- Lines, parameters, files ------------------------------------------------------ */

/* The latest `param` or `nic` statement of that name, through p->index:
 * ${NAME} costs the same however many statements came before. */
static const struct scn_stmt *find_stmt(const struct parser *p, enum scn_stmt_kind kind,
					const char *name, size_t len)
{
	const struct scn_stmt *found = NULL;
	size_t i;

	if (!p->index_cap)
		return NULL;
	for (i = scn_hash(name, len) & (p->index_cap - 1); p->index[i];
	     i = (i + 1) & (p->index_cap - 1)) {
		const struct scn_stmt *st = &p->s->stmts[p->index[i] - 1];

		if (st->kind == kind && strlen(st->name) == len && !strncmp(st->name, name, len))
			found = st; /* later ones come later in the chain */
	}
	return found;
}

/* Add the statement just kept to p->index, if ${NAME} may name it. */
static int index_add(struct parser *p)
{
	size_t at = p->s->nstmts - 1, i, cap;
	const struct scn_stmt *st = &p->s->stmts[at];
	uint32_t *v, *old = p->index;

	if (st->kind != SCN_PARAM && st->kind != SCN_NIC)
		return 0;
	if (2 * (p->index_n + 1) > p->index_cap) {
		cap = p->index_cap ? 2 * p->index_cap : 64;
		v = calloc(cap, sizeof(*v));
		if (!v)
			return -ENOMEM;
		/* Re-insert in statement order, so chains keep that order. */
		p->index = v;
		p->index_cap = cap;
		p->index_n = 0;
		for (i = 0; i < at; i++) {
			const struct scn_stmt *o = &p->s->stmts[i];
			size_t k;

			if (o->kind != SCN_PARAM && o->kind != SCN_NIC)
				continue;
			for (k = scn_hash(o->name, strlen(o->name)) & (cap - 1); v[k];
			     k = (k + 1) & (cap - 1))
				;
			v[k] = (uint32_t)i + 1;
			p->index_n++;
		}
		free(old);
	}
	for (i = scn_hash(st->name, strlen(st->name)) & (p->index_cap - 1); p->index[i];
	     i = (i + 1) & (p->index_cap - 1))
		;
	p->index[i] = (uint32_t)at + 1;
	p->index_n++;
	return 0;
}

/* Append n bytes of text, all at pos, to out; false when it would not fit. */
static bool line_put(struct scn_line *out, const char *text, size_t n, struct scn_pos pos)
{
	if (out->len + n > SCN_LINE_MAX)
		return false;
	memcpy(out->text + out->len, text, n);
	for (; n; n--)
		out->pos[out->len++] = pos;
	return true;
}

/*
 * The text of ${SEED} here: the seed when known so far, else the run's
 * default, else 0 (a check).  What a use got is remembered: if it is not
 * the seed the whole file gives, the file is parsed again with that seed
 * (scn_parse_buffer).
 */
static const char *seed_text(struct parser *p, char *buf, size_t size)
{
	bool known = p->s->seed_set || (p->run_seed && p->run_seed->default_set);
	uint64_t v = p->s->seed_set ? p->s->seed : known ? p->run_seed->seed_default : 0;

	if (!p->seed_used) {
		p->seed_used = true;
		p->seed_used_known = known;
		p->seed_used_v = v;
	} else if (known != p->seed_used_known || v != p->seed_used_v) {
		p->seed_used_varied = true;
	}
	snprintf(buf, size, "%llu", (unsigned long long)v);
	return buf;
}

/* Replace every ${NAME} of p->raw into p->line.  Returns 0 or -EINVAL. */
static int expand(struct parser *p)
{
	const struct scn_line *in = &p->raw;
	struct scn_line *out = &p->line;
	char seed[24], addr[FAB_ADDR_STRLEN];
	struct scn_loc loc;
	size_t i = 0, j, nlen;

	out->len = 0;
	while (i < in->len) {
		const struct scn_define *d;
		const struct scn_stmt *st;
		const char *name, *val = NULL;

		if (!(in->text[i] == '$' && in->text[i + 1] == '{')) {
			if (!line_put(out, in->text + i, 1, in->pos[i]))
				goto too_long;
			i++;
			continue;
		}
		loc = scn_loc_at(p->file, in->pos[i]);
		name = in->text + i + 2;
		for (j = i + 2; j < in->len && in->text[j] != '}'; j++)
			;
		if (j == in->len) {
			scn_diag_add(p->diag, SCN_ERROR, &loc, "'${' without its closing '}'");
			return -EINVAL;
		}
		nlen = j - i - 2;
		if (!nlen) {
			scn_diag_add(p->diag, SCN_ERROR, &loc, "'${}' names no parameter");
			return -EINVAL;
		}
		if ((st = find_stmt(p, SCN_PARAM, name, nlen)) != NULL) {
			val = st->u.param.value;
		} else if (nlen == 4 && !strncmp(name, "SEED", 4)) {
			val = seed_text(p, seed, sizeof(seed)); /* -D SEED's too, as a number */
		} else if (nlen == 7 && !strncmp(name, "RUN_DIR", 7)) {
			val = NULL; /* the runner's */
		} else if (nlen > 5 && !strncmp(name + nlen - 5, ".addr", 5) &&
			   (st = find_stmt(p, SCN_NIC, name, nlen - 5)) != NULL) {
			/* Before -D: a define cannot change a NIC's address. */
			val = fab_addr_format(st->u.nic.addr, addr, sizeof(addr));
		} else if ((d = find_define(p, name, nlen)) != NULL) {
			val = d->value;
		} else if (nlen > 5 && nlen - 5 < SCN_NAME_MAX &&
			   !strncmp(name + nlen - 5, ".addr", 5)) {
			/* Never "declare a param": a.addr is refused as one. */
			scn_diag_add(p->diag, SCN_ERROR, &loc,
				     "${%.*s}: no NIC '%.*s' is declared before this line: declare "
				     "it first with 'nic %.*s ADDR'",
				     (int)nlen, name, (int)(nlen - 5), name, (int)(nlen - 5), name);
			if (p->nearly < ARRAY_SIZE(p->early) && p->diag->n && !p->diag->dropped) {
				p->early[p->nearly].msg = p->diag->n - 1;
				p->early[p->nearly].loc = loc;
				snprintf(p->early[p->nearly].nic, SCN_NAME_MAX, "%.*s",
					 (int)(nlen - 5), name);
				p->nearly++;
			}
			return -EINVAL;
		} else {
			scn_diag_add(p->diag, SCN_ERROR, &loc,
				     "unknown parameter '${%.*s}': declare it with 'param %.*s = "
				     "VALUE' before this line, or give -D %.*s=VALUE",
				     (int)(nlen > 64 ? 64 : nlen), name,
				     (int)(nlen > 64 ? 64 : nlen), name,
				     (int)(nlen > 64 ? 64 : nlen), name);
			return -EINVAL;
		}
		if (!val)
			val = ""; /* left as written below */
		if (!*val && !line_put(out, in->text + i, j + 1 - i, in->pos[i]))
			goto too_long;
		if (*val && !line_put(out, val, strlen(val), in->pos[i]))
			goto too_long;
		i = j + 1;
	}
	out->text[out->len] = '\0';
	out->pos[out->len] = in->pos[in->len];
	return 0;
too_long:
	loc = scn_loc_at(p->file, in->pos[0]);
	scn_diag_add(p->diag, SCN_ERROR, &loc, "line longer than %d bytes once ${...} are replaced",
		     SCN_LINE_MAX);
	return -EINVAL;
}

static int parse_source(struct parser *p, struct scn_src *src);

/* A ${NIC.addr} before its `nic` line: now that every line is read, say
 * where the NIC is declared, if it is. */
static void addr_fixup(struct parser *p)
{
	size_t i;

	for (i = 0; i < p->nearly; i++) {
		const struct scn_loc *l = &p->early[i].loc;
		const char *nic = p->early[i].nic;
		const struct scn_stmt *st = find_stmt(p, SCN_NIC, nic, strlen(nic));

		if (!st)
			continue;
		snprintf(p->diag->msg[p->early[i].msg].text, SCN_DIAG_TEXT,
			 "%s:%u:%u: ${%s.addr}: NIC '%s' is declared later, at %s:%u: declare it "
			 "before this line",
			 l->file ? l->file : "-", l->line, l->col, nic, nic,
			 st->name_loc.file ? st->name_loc.file : "-", st->name_loc.line);
	}
}

static char *dup_file_name(struct parser *p, const char *name)
{
	char **v = realloc(p->s->files, (p->s->nfiles + 1) * sizeof(*v));
	char *copy;

	if (!v)
		return NULL;
	p->s->files = v;
	copy = strdup(name);
	if (!copy)
		return NULL;
	v[p->s->nfiles++] = copy;
	return copy;
}

/* What read_file's error means. */
static const char *read_error(int rc)
{
	if (rc == -EINVAL)
		return "not a regular file";
	if (rc == -ESPIPE)
		return "not a regular file on a regular filesystem (a file of /proc or /sys "
		       "shows a size that is not its length): copy it to a file first";
	return strerror(-rc);
}

/* Filesystems whose files show a size (often 0) that is not what reading
 * them gives: procfs, sysfs, debugfs, tracefs, configfs, securityfs,
 * cgroup; <linux/magic.h>'s numbers. */
static bool special_fs(int fd)
{
	static const unsigned long magic[] = {
	    0x9fa0,     /* PROC_SUPER_MAGIC */
	    0x62656572, /* SYSFS_MAGIC */
	    0x64626720, /* DEBUGFS_MAGIC */
	    0x74726163, /* TRACEFS_MAGIC */
	    0x62656570, /* CONFIGFS_MAGIC */
	    0x73636673, /* SECURITYFS_MAGIC */
	    0x27e0eb,   /* CGROUP_SUPER_MAGIC */
	    0x63677270, /* CGROUP2_SUPER_MAGIC */
	};
	struct statfs fs;
	size_t i;

	if (fstatfs(fd, &fs))
		return false;
	for (i = 0; i < ARRAY_SIZE(magic); i++)
		if ((unsigned long)fs.f_type == magic[i])
			return true;
	return false;
}

/* Read a whole file into *data (malloc'ed); returns 0 or a negative errno:
 * -EINVAL for anything but a regular file, -ESPIPE for a file of procfs,
 * sysfs and the like (or one that holds more than its size says), -EFBIG
 * past SCN_FILE_MAX. */
static int read_file(const char *path, char **data, size_t *len)
{
	struct stat sb;
	size_t got = 0;
	FILE *f;
	char *buf;
	int rc = 0;

	/* A FIFO or a device would block or never end: regular files only. */
	if (stat(path, &sb))
		return -errno;
	if (S_ISDIR(sb.st_mode))
		return -EISDIR;
	if (!S_ISREG(sb.st_mode))
		return -EINVAL;
	f = fopen(path, "rb");
	if (!f)
		return -errno;
	/* Its size would say 0 while reading gives text: the scenario would
	 * silently include nothing. */
	if (special_fs(fileno(f))) {
		fclose(f);
		return -ESPIPE;
	}
	if (sb.st_size > (off_t)SCN_FILE_MAX) {
		fclose(f);
		return -EFBIG;
	}
	buf = malloc((size_t)sb.st_size + 1);
	if (!buf) {
		fclose(f);
		return -ENOMEM;
	}
	/* Read what is there, up to the limit: the size may change. */
	got = fread(buf, 1, (size_t)sb.st_size, f);
	if (ferror(f))
		rc = -EIO;
	else if (got == (size_t)sb.st_size && fgetc(f) != EOF)
		rc = -ESPIPE; /* more than its size says: not a file to trust */
	fclose(f);
	if (rc) {
		free(buf);
		return rc;
	}
	*data = buf;
	*len = got;
	return 0;
}

static int parse_include(struct parser *p, const struct keyword *k)
{
	const struct scn_tok *kw = &p->toks.tok[0];
	char rel[SCN_TEXT_MAX], path[PATH_MAX + SCN_TEXT_MAX], real[PATH_MAX];
	const struct scn_tok *t = peek(p);
	const char *slash, *file;
	struct scn_src src;
	size_t len;
	char *data = NULL;
	int rc, i;

	(void)k; /* it makes no statement of its own */
	rc = get_string(p, "the file to include, as a \"path\"", rel);
	if (!rc && peek(p)->type != SCN_TOK_END)
		rc = expected(p, "the end of the statement");
	if (rc)
		return rc;
	if (p->flags & SCN_PARSE_NO_INCLUDE)
		return err_at(p, kw, "include is not allowed here");
	if (!rel[0])
		return err_at(p, t, "include \"\": name a file");
	/* Files that include each other many times over would be read a
	 * number of times exponential in their depth, even with no statement
	 * to count: every include read counts, and the first past the limit
	 * ends the parse. */
	if (++p->nincludes > SCN_INCLUDES_MAX) {
		p->stop = true;
		return err_at(p, kw,
			      "more than %d includes in one scenario (a file included twice "
			      "counts twice, with every include in it): include each file once, "
			      "at the top level",
			      SCN_INCLUDES_MAX);
	}
	if (p->depth >= SCN_INCLUDE_DEPTH)
		return err_at(p, kw, "includes nested deeper than %d", SCN_INCLUDE_DEPTH);
	slash = strrchr(p->file, '/');
	if (rel[0] == '/' || !slash)
		snprintf(path, sizeof(path), "%s", rel);
	else
		snprintf(path, sizeof(path), "%.*s/%s", (int)(slash - p->file), p->file, rel);
	if (!realpath(path, real)) {
		rc = -errno;
		return err_at(p, t, "cannot include \"%s\": %s (looked for %s)", rel, strerror(-rc),
			      path);
	}
	for (i = 0; i <= p->depth; i++)
		if (p->stack[i] && !strcmp(p->stack[i], real))
			return err_at(p, t, "include cycle: \"%s\" is %s", rel,
				      i == p->depth ? "this file"
						    : "being read already (it includes this file)");
	rc = read_file(path, &data, &len);
	if (rc == -EFBIG)
		return err_at(p, t, "cannot include \"%s\": larger than %u bytes", rel,
			      SCN_FILE_MAX);
	if (rc)
		return err_at(p, t, "cannot include \"%s\": %s", rel, read_error(rc));
	file = dup_file_name(p, path);
	p->stack[p->depth + 1] = strdup(real);
	if (!file || !p->stack[p->depth + 1]) {
		free(data);
		return -ENOMEM;
	}
	{
		/* The including line's state is kept across the included file. */
		const char *saved_file = p->file;
		bool saved_top = p->top_comment;

		p->depth++;
		p->top_comment = false;
		scn_src_init(&src, file, data, len);
		rc = parse_source(p, &src);
		p->depth--;
		p->file = saved_file;
		p->top_comment = saved_top;
	}
	free(p->stack[p->depth + 1]);
	p->stack[p->depth + 1] = NULL;
	free(data);
	/* Its errors are counted already; the include line itself is fine. */
	return rc == -ENOMEM ? rc : 0;
}

/* Parse every line of src; returns 0, or -ENOMEM (other errors are in the
 * diag). */
static int parse_source(struct parser *p, struct scn_src *src)
{
	/* The line buffers are reused by nested includes: parse one line
	 * completely (an include parses its file) before reading the next. */
	int rc;

	for (;;) {
		if (p->stop)
			return 0;
		p->file = src->file;
		rc = scn_src_next(src, &p->raw, p->diag);
		if (rc <= 0)
			return 0;
		scn_strip_comment(&p->raw, p->comment, sizeof(p->comment));
		if (p->raw.len == 0 || strspn(p->raw.text, " \t") == p->raw.len) {
			if (p->top_comment && p->comment[0] && !p->s->title[0])
				snprintf(p->s->title, sizeof(p->s->title), "%s", p->comment);
			continue;
		}
		p->top_comment = false;
		if (expand(p))
			continue;
		if (scn_tokenize(&p->line, p->file, &p->toks, p->diag))
			continue;
		p->ti = 0;
		rc = parse_stmt(p);
		if (rc == -ENOMEM)
			return p->s->nstmts >= SCN_STMTS_MAX ? 0 : rc; /* reported */
	}
}

/* The set-up tables and the script's own values, once every line is in. */
static int fill_tables(struct scn_script *s, const struct scn_defines *defs)
{
	struct {
		enum scn_stmt_kind kind;
		const struct scn_stmt ***v;
		size_t *n;
	} tables[] = {
	    {SCN_NIC, &s->nics, &s->nnics},       {SCN_LINK, &s->links, &s->nlinks},
	    {SCN_HOST, &s->hosts, &s->nhosts},    {SCN_PROGRAM, &s->programs, &s->nprograms},
	    {SCN_PARAM, &s->params, &s->nparams},
	};
	size_t i, k;

	for (k = 0; k < ARRAY_SIZE(tables); k++) {
		*tables[k].v = calloc(s->nstmts + 1, sizeof(**tables[k].v));
		if (!*tables[k].v)
			return -ENOMEM;
		for (i = 0; i < s->nstmts; i++)
			if (s->stmts[i].kind == tables[k].kind)
				(*tables[k].v)[(*tables[k].n)++] = &s->stmts[i];
	}
	for (i = 0; i < s->nstmts; i++) {
		const struct scn_stmt *st = &s->stmts[i];

		if (st->kind == SCN_TITLE)
			snprintf(s->title, sizeof(s->title), "%s", st->u.text);
		else if (st->kind == SCN_TIMEOUT)
			s->timeout_ns = st->u.time_ns;
		else if (st->kind == SCN_CAPTURE)
			s->capture = st->u.flag;
	}
	(void)defs;
	return 0;
}

/* --seed N, else -D SEED=N: the seed, checked once. */
static int define_seed(struct parser *p, const char *name)
{
	const struct scn_define *d = find_define(p, "SEED", 4);
	struct scn_loc loc = {name, 0, 0};

	if (p->seed_forced)
		return 0; /* set by the caller */
	if (p->run_seed && p->run_seed->given) {
		p->s->seed = p->run_seed->seed;
		p->s->seed_set = true;
		p->seed_forced = true;
		return 0;
	}
	if (!d)
		return 0;
	if (opts_parse_u64(d->value, &p->s->seed)) {
		scn_diag_add(p->diag, SCN_ERROR, &loc, "-D SEED=%.64s: expected a whole number",
			     d->value);
		return -EINVAL;
	}
	p->s->seed_set = true;
	return 0;
}

/*
 * One pass over the text: a new script in *out (even with errors, so that
 * the caller can see what ${SEED} was replaced with), or NULL with
 * -ENOMEM.  forced: the seed for this pass (its ${SEED} and the script's
 * seed), or NULL.  *seed_redo is set when a ${SEED} was replaced by
 * something other than the seed the whole file gives.
 */
static int parse_pass(const char *name, const void *data, size_t len,
		      const struct scn_defines *defs, const struct scn_run_seed *run_seed,
		      unsigned flags, const uint64_t *forced, struct scn_script **out,
		      bool *seed_redo, struct scn_diag *diag)
{
	struct parser *p;
	struct scn_src src;
	char real[PATH_MAX];
	const char *file;
	size_t errors = diag->errors;
	int rc;

	*out = NULL;
	*seed_redo = false;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->s = calloc(1, sizeof(*p->s));
	if (!p->s) {
		free(p);
		return -ENOMEM;
	}
	p->diag = diag;
	p->defs = defs;
	p->run_seed = run_seed;
	p->flags = flags;
	p->top_comment = true;
	p->s->timeout_ns = SCN_DEFAULT_TIMEOUT_NS;
	p->s->capture = true;
	if (forced) {
		p->seed_forced = true;
		p->s->seed = *forced;
		p->s->seed_set = true;
	}
	p->s->path = strdup(name);
	file = dup_file_name(p, name);
	p->stack[0] = strdup(realpath(name, real) ? real : name);
	if (!p->s->path || !file || !p->stack[0]) {
		rc = -ENOMEM;
		goto out;
	}
	rc = define_seed(p, name);
	if (rc)
		goto out;
	if (len == 0) {
		struct scn_loc loc = {file, 0, 0};

		scn_diag_add(diag, SCN_WARNING, &loc, "empty scenario: it does nothing");
	}
	scn_src_init(&src, file, data, len);
	rc = parse_source(p, &src);
	addr_fixup(p);
	if (!rc) {
		rc = fill_tables(p->s, defs);
	}
	/* With nothing else, the run's default is the seed. */
	if (!rc && !p->s->seed_set && run_seed && run_seed->default_set) {
		p->s->seed = run_seed->seed_default;
		p->s->seed_set = true;
	}
	if (!rc && p->seed_used && p->s->seed_set)
		*seed_redo =
		    p->seed_used_varied || !p->seed_used_known || p->seed_used_v != p->s->seed;
	if (!rc && diag->errors > errors)
		rc = -EINVAL;
out:
	free(p->stack[0]);
	free(p->index);
	if (rc == -ENOMEM) {
		scn_script_free(p->s);
	} else {
		*out = p->s;
	}
	free(p);
	return rc;
}

static int parse_seeded(const char *name, const void *data, size_t len,
			const struct scn_defines *defs, const struct scn_run_seed *run_seed,
			unsigned flags, struct scn_script **out, struct scn_diag *diag)
{
	struct scn_diag *before = malloc(sizeof(*before));
	struct scn_script *s = NULL;
	bool redo;
	uint64_t seed;
	int rc;

	*out = NULL;
	if (!before)
		return -ENOMEM;
	*before = *diag;
	rc = parse_pass(name, data, len, defs, run_seed, flags, NULL, &s, &redo, diag);
	/* A ${SEED} before the `seed` line (or replaced by the run's default
	 * that the file's seed overrides): the file again, with the seed known
	 * from its first line, and only this pass's messages. */
	if (redo) {
		seed = s->seed;
		scn_script_free(s);
		*diag = *before;
		rc = parse_pass(name, data, len, defs, run_seed, flags, &seed, &s, &redo, diag);
	}
	free(before);
	if (rc)
		scn_script_free(s);
	else
		*out = s;
	return rc;
}

int scn_parse_buffer(const char *name, const void *data, size_t len, const struct scn_defines *defs,
		     unsigned flags, struct scn_script **out, struct scn_diag *diag)
{
	return parse_seeded(name, data, len, defs, NULL, flags, out, diag);
}

int scn_parse_file(const char *path, const struct scn_defines *defs, struct scn_script **out,
		   struct scn_diag *diag)
{
	return scn_parse_file_run(path, defs, NULL, out, diag);
}

int scn_parse_file_run(const char *path, const struct scn_defines *defs,
		       const struct scn_run_seed *seed, struct scn_script **out,
		       struct scn_diag *diag)
{
	struct scn_loc loc = {path, 0, 0};
	char *data = NULL;
	size_t len = 0;
	int rc;

	*out = NULL;
	rc = read_file(path, &data, &len);
	if (rc == -EFBIG) {
		scn_diag_add(diag, SCN_ERROR, &loc, "larger than %u bytes: not a scenario",
			     SCN_FILE_MAX);
		return rc;
	}
	if (rc) {
		scn_diag_add(diag, SCN_ERROR, &loc, "cannot read: %s", read_error(rc));
		return rc;
	}
	rc = parse_seeded(path, data, len, defs, seed, 0, out, diag);
	free(data);
	return rc;
}

void scn_script_free(struct scn_script *s)
{
	size_t i;

	if (!s)
		return;
	for (i = 0; i < s->nstmts; i++) {
		free((char *)s->stmts[i].text);
		free((struct scn_pos *)s->stmts[i].text_pos);
	}
	free(s->stmts);
	free(s->nics);
	free(s->links);
	free(s->hosts);
	free(s->programs);
	free(s->params);
	for (i = 0; i < s->nfiles; i++)
		free(s->files[i]);
	free(s->files);
	free(s->path);
	free(s);
}

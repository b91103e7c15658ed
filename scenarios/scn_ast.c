/*
 * The tables of the scenario language (verbs, kinds, statement names, WSA
 * codes) and the diagnostics list (scn_ast.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scn_priv.h"
#include "ws2san.h"

static const struct {
	const char *name;
	enum scn_kind makes;
	bool async;
} verbs[SCN_VERB_COUNT_] = {
    [SCN_V_STARTUP] = {"startup", SCN_KIND_NONE, false},
    [SCN_V_SOCKET] = {"socket", SCN_KIND_SOCKET, false},
    [SCN_V_BIND] = {"bind", SCN_KIND_NONE, false},
    [SCN_V_LISTEN] = {"listen", SCN_KIND_NONE, false},
    [SCN_V_ACCEPT] = {"accept", SCN_KIND_SOCKET, true},
    [SCN_V_CONNECT] = {"connect", SCN_KIND_OP, true},
    [SCN_V_BUFFER] = {"buffer", SCN_KIND_BUFFER, false},
    [SCN_V_REGISTER] = {"register", SCN_KIND_HANDLE, false},
    [SCN_V_DEREGISTER] = {"deregister", SCN_KIND_NONE, false},
    [SCN_V_REGISTER_RDMA] = {"register-rdma", SCN_KIND_DESC, false},
    [SCN_V_DEREGISTER_RDMA] = {"deregister-rdma", SCN_KIND_NONE, false},
    [SCN_V_WRITE] = {"write", SCN_KIND_OP, true},
    [SCN_V_READ] = {"read", SCN_KIND_OP, true},
    [SCN_V_SEND] = {"send", SCN_KIND_OP, true},
    [SCN_V_RECV] = {"recv", SCN_KIND_OP, true},
    [SCN_V_CLOSE] = {"close", SCN_KIND_NONE, false},
    [SCN_V_CLEANUP] = {"cleanup", SCN_KIND_NONE, false},
    [SCN_V_CACHE_CALLBACK] = {"cache-callback", SCN_KIND_NONE, false},
    [SCN_V_MUNMAP] = {"munmap", SCN_KIND_NONE, false},
    [SCN_V_MMAP] = {"mmap", SCN_KIND_NONE, false},
    [SCN_V_MREMAP] = {"mremap", SCN_KIND_NONE, false},
    [SCN_V_MADVISE] = {"madvise", SCN_KIND_NONE, false},
    [SCN_V_FREE] = {"free", SCN_KIND_NONE, false},
    [SCN_V_REALLOC] = {"realloc", SCN_KIND_NONE, false},
    [SCN_V_FORK] = {"fork", SCN_KIND_HOST, false},
    [SCN_V_EXIT] = {"exit", SCN_KIND_NONE, false},
    [SCN_V_STREAM_SOCKET] = {"stream-socket", SCN_KIND_STREAM, false},
    [SCN_V_STREAM_BIND] = {"stream-bind", SCN_KIND_NONE, false},
    [SCN_V_STREAM_LISTEN] = {"stream-listen", SCN_KIND_NONE, false},
    [SCN_V_STREAM_ACCEPT] = {"stream-accept", SCN_KIND_STREAM, true},
    [SCN_V_STREAM_CONNECT] = {"stream-connect", SCN_KIND_OP, true},
    [SCN_V_STREAM_SEND] = {"stream-send", SCN_KIND_OP, true},
    [SCN_V_STREAM_RECV] = {"stream-recv", SCN_KIND_OP, true},
    [SCN_V_STREAM_SHUTDOWN] = {"stream-shutdown", SCN_KIND_NONE, false},
    [SCN_V_STREAM_CLOSE] = {"stream-close", SCN_KIND_NONE, false},
};

const char *scn_verb_name(enum scn_verb verb)
{
	return verb > 0 && verb < SCN_VERB_COUNT_ ? verbs[verb].name : NULL;
}

enum scn_verb scn_verb_parse(const char *word)
{
	int i;

	for (i = 1; i < SCN_VERB_COUNT_; i++)
		if (!strcmp(word, verbs[i].name))
			return (enum scn_verb)i;
	return 0;
}

enum scn_kind scn_verb_makes(enum scn_verb verb)
{
	return verb > 0 && verb < SCN_VERB_COUNT_ ? verbs[verb].makes : SCN_KIND_NONE;
}

bool scn_verb_async(enum scn_verb verb)
{
	return verb > 0 && verb < SCN_VERB_COUNT_ && verbs[verb].async;
}

bool scn_verb_stream(enum scn_verb verb)
{
	return verb >= SCN_V_STREAM_SOCKET && verb <= SCN_V_STREAM_CLOSE;
}

const char *scn_kind_name(enum scn_kind kind)
{
	static const char *const names[SCN_KIND_COUNT_] = {
	    [SCN_KIND_NONE] = "nothing",
	    [SCN_KIND_SOCKET] = "socket",
	    [SCN_KIND_HANDLE] = "handle",
	    [SCN_KIND_DESC] = "descriptor",
	    [SCN_KIND_OP] = "operation",
	    [SCN_KIND_BUFFER] = "buffer",
	    [SCN_KIND_HOST] = "host",
	    [SCN_KIND_PROGRAM] = "program",
	    [SCN_KIND_NIC] = "NIC",
	    [SCN_KIND_FAULT] = "fault",
	    [SCN_KIND_MARK] = "mark",
	    [SCN_KIND_PARAM] = "parameter",
	    [SCN_KIND_STREAM] = "stream socket",
	};

	return kind >= 0 && kind < SCN_KIND_COUNT_ ? names[kind] : "?";
}

bool scn_stmt_is_setup(enum scn_stmt_kind kind)
{
	return kind >= SCN_TITLE && kind <= SCN_CAPTURE;
}

const char *scn_stmt_kind_name(enum scn_stmt_kind kind)
{
	static const char *const names[SCN_STMT_KIND_COUNT_] = {
	    [SCN_TITLE] = "title",
	    [SCN_SEED] = "seed",
	    [SCN_PARAM] = "param",
	    [SCN_TIMEOUT] = "timeout",
	    [SCN_NIC] = "nic",
	    [SCN_LINK] = "link",
	    [SCN_HOST] = "host",
	    [SCN_PROGRAM] = "program",
	    [SCN_CAPTURE] = "capture",
	    [SCN_CALL] = "call",
	    [SCN_DESC] = "desc",
	    [SCN_START] = "start",
	    [SCN_KILL] = "kill",
	    [SCN_KILL_NIC] = "kill nic",
	    [SCN_RESTART_NIC] = "restart nic",
	    [SCN_STOP_NIC] = "stop nic",
	    [SCN_CONT_NIC] = "cont nic",
	    [SCN_FAULT] = "fault",
	    [SCN_HEAL] = "heal",
	    [SCN_MARK] = "mark",
	    [SCN_WAIT_OP] = "wait",
	    [SCN_WAIT_EXIT] = "wait exit",
	    [SCN_WAIT_OUTPUT] = "wait output",
	    [SCN_WAIT_COUNTER] = "wait counter",
	    [SCN_WAIT_FRAME] = "wait frame",
	    [SCN_SETTLE] = "settle",
	    [SCN_EXPECT_MEM] = "expect",
	    [SCN_EXPECT_TPT] = "expect tpt",
	    [SCN_EXPECT_COUNTER] = "expect counter",
	    [SCN_EXPECT_REFUSAL] = "expect refusal",
	    [SCN_EXPECT_FRAMES] = "expect frames",
	    [SCN_EXPECT_OUTPUT] = "expect output",
	    [SCN_EXPECT_STREAM] = "expect stream",
	};

	return kind > 0 && kind < SCN_STMT_KIND_COUNT_ ? names[kind] : "?";
}

bool scn_cmp_holds(const struct scn_cmp *c, uint64_t v)
{
	switch (c->op) {
	case SCN_CMP_EQ: return v == c->a;
	case SCN_CMP_NE: return v != c->a;
	case SCN_CMP_LT: return v < c->a;
	case SCN_CMP_LE: return v <= c->a;
	case SCN_CMP_GT: return v > c->a;
	case SCN_CMP_GE: return v >= c->a;
	case SCN_CMP_IN: return v >= c->a && v <= c->b;
	}
	return false;
}

#define WSA(x)        \
	{             \
#x, x \
	}
static const struct {
	const char *name;
	int code;
} wsa_codes[] = {
    WSA(WSAEINTR),
    WSA(WSAEBADF),
    WSA(WSAEACCES),
    WSA(WSAEFAULT),
    WSA(WSAEINVAL),
    WSA(WSAEMFILE),
    WSA(WSAEWOULDBLOCK),
    WSA(WSAEINPROGRESS),
    WSA(WSAEALREADY),
    WSA(WSAENOTSOCK),
    WSA(WSAEDESTADDRREQ),
    WSA(WSAEMSGSIZE),
    WSA(WSAEPROTOTYPE),
    WSA(WSAENOPROTOOPT),
    WSA(WSAEPROTONOSUPPORT),
    WSA(WSAESOCKTNOSUPPORT),
    WSA(WSAEOPNOTSUPP),
    WSA(WSAEPFNOSUPPORT),
    WSA(WSAEAFNOSUPPORT),
    WSA(WSAEADDRINUSE),
    WSA(WSAEADDRNOTAVAIL),
    WSA(WSAENETDOWN),
    WSA(WSAENETUNREACH),
    WSA(WSAENETRESET),
    WSA(WSAECONNABORTED),
    WSA(WSAECONNRESET),
    WSA(WSAENOBUFS),
    WSA(WSAEISCONN),
    WSA(WSAENOTCONN),
    WSA(WSAESHUTDOWN),
    WSA(WSAETIMEDOUT),
    WSA(WSAECONNREFUSED),
    WSA(WSAEHOSTUNREACH),
    WSA(WSASYSNOTREADY),
    WSA(WSAVERNOTSUPPORTED),
    WSA(WSANOTINITIALISED),
    WSA(WSAEPROVIDERFAILEDINIT),
    WSA(WSA_IO_PENDING),
    WSA(WSA_IO_INCOMPLETE),
    WSA(WSA_OPERATION_ABORTED),
};
#undef WSA

int scn_wsa_parse(const char *name, int *code)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(wsa_codes); i++)
		if (!strcmp(name, wsa_codes[i].name)) {
			*code = wsa_codes[i].code;
			return 0;
		}
	return -EINVAL;
}

const char *scn_wsa_name(int code)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(wsa_codes); i++)
		if (wsa_codes[i].code == code)
			return wsa_codes[i].name;
	return NULL;
}

int scn_errno_parse(const char *name, int *code)
{
	/* Every errno the C library names; Linux's run below 134. */
	for (int e = 1; e < 256; e++) {
		const char *n = strerrorname_np(e);

		if (n && !strcmp(n, name)) {
			*code = e;
			return 0;
		}
	}
	return -EINVAL;
}

#define SCN_STAT_NAME(name) #name,
const char *const scn_stream_stats[] = {SCN_STREAM_STATS(SCN_STAT_NAME)};
#undef SCN_STAT_NAME
const size_t scn_stream_nstats = ARRAY_SIZE(scn_stream_stats);

int scn_stream_stat_index(const char *name)
{
	for (size_t i = 0; i < scn_stream_nstats; i++)
		if (!strcmp(name, scn_stream_stats[i]))
			return (int)i;
	return -1;
}

static bool word_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '.' || c == '-';
}

struct scn_loc scn_stmt_word_loc(const struct scn_stmt *st, const char *word)
{
	size_t len = word ? strlen(word) : 0;
	const char *t = st->text, *at;
	struct scn_loc loc = st->loc;

	if (!t || !st->text_pos || !len)
		return loc;
	for (at = strstr(t, word); at; at = strstr(at + 1, word)) {
		/* A whole word; "a" in "a.retransmits" counts (NIC.COUNTER). */
		if ((at > t && word_char(at[-1])) || (word_char(at[len]) && at[len] != '.'))
			continue;
		loc.line = st->text_pos[at - t].line;
		loc.col = st->text_pos[at - t].col;
		return loc;
	}
	return loc;
}

char *scn_subst_run_dir(const char *text, const char *run_dir)
{
	static const char var[] = "${RUN_DIR}";
	size_t vlen = sizeof(var) - 1, dlen = strlen(run_dir), n = 0, len;
	const char *at;
	char *out, *o;

	for (at = strstr(text, var); at; at = strstr(at + vlen, var))
		n++;
	len = strlen(text) + n * dlen + 1; /* each ${RUN_DIR} is replaced, not kept */
	out = malloc(len);
	if (!out)
		return NULL;
	for (o = out; (at = strstr(text, var)) != NULL; text = at + vlen) {
		memcpy(o, text, (size_t)(at - text));
		o += at - text;
		memcpy(o, run_dir, dlen);
		o += dlen;
	}
	memcpy(o, text, strlen(text) + 1);
	return out;
}

uint64_t scn_hash(const char *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

	while (len--)
		h = (h ^ (unsigned char)*s++) * 0x100000001b3ull;
	return h;
}

/* ---- Diagnostics ---------------------------------------------------------- */

void scn_diag_init(struct scn_diag *diag)
{
	memset(diag, 0, sizeof(*diag));
}

void scn_diag_vadd(struct scn_diag *diag, enum scn_severity sev, const struct scn_loc *loc,
		   const char *fmt, va_list ap)
{
	struct scn_diag_msg *m;
	const char *file = loc && loc->file ? loc->file : "-";
	size_t used;
	int n;

	if (sev == SCN_ERROR)
		diag->errors++;
	else
		diag->warnings++;
	if (diag->n == SCN_DIAG_MAX) {
		diag->dropped++;
		return;
	}
	m = &diag->msg[diag->n++];
	m->severity = sev;
	m->line = loc ? loc->line : 0;
	m->col = loc ? loc->col : 0;
	if (m->line && m->col)
		n = snprintf(m->text, sizeof(m->text), "%s:%u:%u: ", file, m->line, m->col);
	else if (m->line)
		n = snprintf(m->text, sizeof(m->text), "%s:%u: ", file, m->line);
	else
		n = snprintf(m->text, sizeof(m->text), "%s: ", file);
	used = n < 0 ? 0 : (size_t)n >= sizeof(m->text) ? sizeof(m->text) - 1 : (size_t)n;
	if (sev == SCN_WARNING && used + 10 < sizeof(m->text))
		used += (size_t)snprintf(m->text + used, sizeof(m->text) - used, "warning: ");
	if (used >= sizeof(m->text))
		return;
	vsnprintf(m->text + used, sizeof(m->text) - used, fmt, ap);
}

void scn_diag_add(struct scn_diag *diag, enum scn_severity sev, const struct scn_loc *loc,
		  const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	scn_diag_vadd(diag, sev, loc, fmt, ap);
	va_end(ap);
}

void scn_diag_print(const struct scn_diag *diag, FILE *f)
{
	size_t i;

	for (i = 0; i < diag->n; i++)
		fprintf(f, "%s\n", diag->msg[i].text);
	if (diag->dropped)
		fprintf(f, "... and %zu more\n", diag->dropped);
}

/*
 * The arguments of agent requests: each check replies `bad` with what was
 * wrong and returns false (or NULL), so that a verb ends with a plain
 * return.  Nothing a request holds is trusted: every number is range
 * checked, every name looked up, every range kept inside its buffer.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "agent.h"

bool arg_count(const struct agent_req *r, int min, int max)
{
	if (r->argc >= min && r->argc <= max)
		return true;
	if (min == max)
		return agent_bad(r, "%s takes %d argument%s, not %d", r->verb, min,
				 min == 1 ? "" : "s", r->argc);
	return agent_bad(r, "%s takes %d to %d arguments, not %d", r->verb, min, max, r->argc);
}

bool arg_num(const struct agent_req *r, const char *s, const char *what, uint64_t max,
	     uint64_t *out)
{
	bool hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
	const char *d = hex ? s + 2 : s;
	uint64_t v = 0;

	if (!*d)
		return agent_bad(r, "%s \"%.40s\" is not a number", what, s);
	for (; *d; d++) {
		unsigned digit;

		if (*d >= '0' && *d <= '9')
			digit = (unsigned)(*d - '0');
		else if (hex && isxdigit((unsigned char)*d))
			digit = (unsigned)(tolower((unsigned char)*d) - 'a' + 10);
		else
			return agent_bad(r, "%s \"%.40s\" is not a number (decimal, or 0x and hex)",
					 what, s);
		if (v > (UINT64_MAX - digit) / (hex ? 16 : 10))
			return agent_bad(r, "%s %.40s is too large (at most %llu)", what, s,
					 (unsigned long long)max);
		v = v * (hex ? 16 : 10) + digit;
	}
	if (v > max)
		return agent_bad(r, "%s %.40s is too large (at most %llu)", what, s,
				 (unsigned long long)max);
	*out = v;
	return true;
}

/* Whether s is a NAME: [A-Za-z_][A-Za-z0-9_.-]*, shorter than AGENT_NAME_MAX. */
static bool is_name(const char *s)
{
	size_t n = strlen(s);

	if (!n || n >= AGENT_NAME_MAX || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("_.-", s[i]))
			return false;
	return true;
}

static bool name_taken(const struct agent *a, const char *s)
{
	for (size_t i = 0; i < a->n_socks; i++)
		if (!strcmp(a->socks[i].name, s))
			return true;
	for (size_t i = 0; i < a->n_bufs; i++)
		if (!strcmp(a->bufs[i].name, s))
			return true;
	for (size_t i = 0; i < a->n_regs; i++)
		if (!strcmp(a->regs[i].name, s))
			return true;
	return agent_op_names(a, s);
}

bool arg_new_name(const struct agent_req *r, const char *s, const char *what)
{
	if (!is_name(s))
		return agent_bad(r,
				 "%s name \"%.40s\" is not a name ([A-Za-z_][A-Za-z0-9_.-]*, at "
				 "most %d characters)",
				 what, s, AGENT_NAME_MAX - 1);
	if (name_taken(r->a, s))
		return agent_bad(r, "the name %s is taken: names are given once", s);
	return true;
}

bool arg_addr(const struct agent_req *r, const char *s, struct in_addr *out)
{
	if (inet_pton(AF_INET, s, out) != 1)
		return agent_bad(r, "address \"%.40s\" is not an IPv4 address (a.b.c.d)", s);
	return true;
}

bool arg_sockaddr(const struct agent_req *r, char **words, struct sockaddr_in *sa)
{
	uint64_t port;

	*sa = (struct sockaddr_in){.sin_family = AF_INET};
	if (!arg_addr(r, words[0], &sa->sin_addr) || !arg_num(r, words[1], "port", 65535, &port))
		return false;
	sa->sin_port = htons((uint16_t)port);
	return true;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)tolower((unsigned char)c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

bool arg_blob(const struct agent_req *r, const char *s, uint8_t *out, size_t *len)
{
	size_t n;

	if (strncmp(s, "x:", 2))
		return agent_bad(r, "\"%.40s\" is not a blob (x: and hex digits)", s);
	s += 2;
	n = strlen(s);
	if (n % 2)
		return agent_bad(r, "a blob of %zu hex digits: bytes take two each", n);
	if (n / 2 > SCN_AGENT_BLOB_MAX)
		return agent_bad(r, "a blob of %zu bytes: at most %d", n / 2, SCN_AGENT_BLOB_MAX);
	for (size_t i = 0; i < n; i += 2) {
		int hi = hexval(s[i]), lo = hexval(s[i + 1]);

		if (hi < 0 || lo < 0)
			return agent_bad(r, "blob character %zu is not a hex digit",
					 i + (hi < 0 ? 1 : 2));
		out[i / 2] = (uint8_t)(hi << 4 | lo);
	}
	*len = n / 2;
	return true;
}

static struct agent_sock *find_sock(const struct agent_req *r, const char *name, bool stream)
{
	for (size_t i = 0; i < r->a->n_socks; i++) {
		struct agent_sock *s = &r->a->socks[i];

		if (strcmp(s->name, name))
			continue;
		if (s->stream == stream)
			return s;
		agent_bad(r,
			  stream ? "%.63s is a socket of the SPI, not a stream socket"
				 : "%.63s is a stream socket: the stream- verbs take it",
			  name);
		return NULL;
	}
	agent_bad(r, "no %s named \"%.63s\"", stream ? "stream socket" : "socket", name);
	return NULL;
}

struct agent_sock *arg_sock(const struct agent_req *r, const char *name)
{
	return find_sock(r, name, false);
}

struct agent_sock *arg_stream(const struct agent_req *r, const char *name)
{
	return find_sock(r, name, true);
}

struct agent_buf *arg_buf(const struct agent_req *r, const char *name)
{
	for (size_t i = 0; i < r->a->n_bufs; i++)
		if (!strcmp(r->a->bufs[i].name, name))
			return &r->a->bufs[i];
	agent_bad(r, "no buffer named \"%.63s\"", name);
	return NULL;
}

struct agent_reg *arg_reg(const struct agent_req *r, const char *name)
{
	/* The newest first: a name is given once, but be exact anyway. */
	for (size_t i = r->a->n_regs; i-- > 0;)
		if (!strcmp(r->a->regs[i].name, name))
			return &r->a->regs[i];
	agent_bad(r, "no registration handle named \"%.63s\"", name);
	return NULL;
}

bool arg_range(const struct agent_req *r, char **words, struct agent_buf **buf, size_t *off,
	       size_t *len, uint64_t max_len)
{
	uint64_t o, n;

	*buf = arg_buf(r, words[0]);
	if (!*buf || !arg_num(r, words[1], "offset", UINT64_MAX, &o) ||
	    !arg_num(r, words[2], "length", max_len, &n))
		return false;
	if (o > (*buf)->len || n > (*buf)->len - o)
		return agent_bad(r, "the range %llu + %llu is outside buffer %s of %zu bytes",
				 (unsigned long long)o, (unsigned long long)n, (*buf)->name,
				 (*buf)->len);
	*off = (size_t)o;
	*len = (size_t)n;
	return true;
}

bool arg_touchable(const struct agent_req *r, const struct agent_buf *b)
{
	if (b->state == BUF_UNMAPPED)
		return agent_bad(r, "buffer %s is unmapped: mmap it again first", b->name);
	if (b->state == BUF_FREED)
		return agent_bad(r, "buffer %s was freed", b->name);
	return true;
}

bool arg_not_freed(const struct agent_req *r, const struct agent_buf *b)
{
	if (b->state == BUF_FREED)
		return agent_bad(r,
				 "buffer %s was freed: its memory is the C library's now, and the "
				 "NIC could write into it",
				 b->name);
	return true;
}

bool arg_pattern(const struct agent_req *r, char **words, int n, struct scn_pattern *out)
{
	uint64_t arg = 0;

	if (n < 1)
		return agent_bad(r, "a pattern is missing: zero, byte B, seq N or random N");
	if (!strcmp(words[0], "zero")) {
		if (n != 1)
			return agent_bad(r, "the pattern zero takes no argument");
	} else if (!strcmp(words[0], "byte") || !strcmp(words[0], "seq") ||
		   !strcmp(words[0], "random")) {
		if (n != 2)
			return agent_bad(r, "the pattern %s takes one number", words[0]);
		if (!arg_num(r, words[1], words[0], words[0][0] == 'b' ? 255 : UINT64_MAX, &arg))
			return false;
	} else {
		return agent_bad(r, "unknown pattern \"%.40s\": zero, byte B, seq N or random N",
				 words[0]);
	}
	if (scn_pattern_from_name(words[0], arg, out))
		return agent_bad(r, "pattern %s %llu is out of range", words[0],
				 (unsigned long long)arg);
	return true;
}

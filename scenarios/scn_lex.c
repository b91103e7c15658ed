/*
 * The scenario lexer: a file into logical lines, a line into tokens.
 *
 * Hostile input is the normal case here (a fuzzer feeds it): every loop is
 * bounded by the input's length, a line never grows past SCN_LINE_MAX, a
 * file that is not UTF-8 text stops at its first bad byte, and an overlong
 * line is skipped with memchr, so the cost stays linear in the input.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "scn_priv.h"

void scn_src_init(struct scn_src *src, const char *file, const void *data, size_t len)
{
	src->file = file;
	src->data = data;
	src->len = len;
	src->at = 0;
	src->line = 1;
	/* A UTF-8 byte order mark some editors write first is no text: it is
	 * skipped, and the first character is still at column 1. */
	if (len >= 3 && !memcmp(data, "\xef\xbb\xbf", 3))
		src->at = 3;
}

/* Length of the UTF-8 sequence at p (at most n bytes), or 0 if invalid:
 * overlong forms, surrogates and values past U+10FFFF are invalid too. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
	size_t len, i;
	uint32_t cp;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf) {
		len = 2;
		cp = p[0] & 0x1f;
	} else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		len = 3;
		cp = p[0] & 0x0f;
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		len = 4;
		cp = p[0] & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* Skip the rest of an overlong physical line, from src->at. */
static void skip_line(struct scn_src *src)
{
	const char *nl = memchr(src->data + src->at, '\n', src->len - src->at);

	src->at = nl ? (size_t)(nl - src->data) + 1 : src->len;
	src->line++;
}

/* Where a scan of a line stands: in a "string" or a /regex/ (quote), just
 * after a backslash in one (escaped), or in the comment.  In a `param`
 * line a '/' is a character like any other: its value is a "string" or the
 * rest of the line as written (param P = /tmp), never a /regex/. */
struct scan {
	char quote;
	bool escaped, comment, param;
};

/* Whether a line's text starts with the word `param`. */
static bool param_line(const char *text, size_t len)
{
	size_t i = 0;

	while (i < len && (text[i] == ' ' || text[i] == '\t'))
		i++;
	return len - i > 5 && !strncmp(text + i, "param", 5) &&
	       (text[i + 5] == ' ' || text[i + 5] == '\t');
}

static void scan_byte(struct scan *s, char ch)
{
	if (s->comment)
		return;
	if (s->quote) {
		if (s->escaped)
			s->escaped = false;
		else if (ch == '\\')
			s->escaped = true;
		else if (ch == s->quote)
			s->quote = 0;
		return;
	}
	if (ch == '"' || (ch == '/' && !s->param))
		s->quote = ch;
	else if (ch == '#')
		s->comment = true;
}

int scn_src_next(struct scn_src *src, struct scn_line *out, struct scn_diag *diag)
{
	const unsigned char *d = (const unsigned char *)src->data;
	bool more = true, too_long = false;
	struct scan sc = {0};
	size_t i;

	out->len = 0;
	out->text[0] = '\0';
	if (src->at >= src->len)
		return 0;
	while (more && src->at < src->len) {
		uint32_t col = 1;
		size_t start = out->len, k;

		more = false;
		while (src->at < src->len && d[src->at] != '\n') {
			struct scn_loc loc = {src->file, src->line, col};

			if (d[src->at] == '\0') {
				scn_diag_add(diag, SCN_ERROR, &loc,
					     "a NUL byte: this is a binary file, not a scenario "
					     "(UTF-8 text)");
				src->at = src->len;
				return -EINVAL;
			}
			k = utf8_len(d + src->at, src->len - src->at);
			if (!k) {
				scn_diag_add(diag, SCN_ERROR, &loc,
					     "invalid UTF-8 (byte 0x%02x): a scenario is UTF-8 "
					     "text",
					     d[src->at]);
				src->at = src->len;
				return -EINVAL;
			}
			if (out->len + k > SCN_LINE_MAX) {
				scn_diag_add(diag, SCN_ERROR, &loc,
					     "line longer than %d bytes; split it with a "
					     "trailing '\\'",
					     SCN_LINE_MAX);
				too_long = true;
				skip_line(src);
				break;
			}
			for (; k; k--, col++) {
				out->text[out->len] = (char)d[src->at++];
				out->pos[out->len++] = (struct scn_pos){src->line, col};
			}
		}
		if (too_long) {
			/* Returned empty: nothing of it is parsed. */
			out->len = 0;
			out->text[0] = '\0';
			out->pos[0] = (struct scn_pos){src->line, 1};
			return 1;
		}
		out->pos[out->len] = (struct scn_pos){src->line, col};
		if (src->at < src->len) { /* the newline */
			src->at++;
			src->line++;
		}
		/* A carriage return before the newline is not part of the line. */
		if (out->len > start && out->text[out->len - 1] == '\r')
			out->len--;
		if (!start)
			sc.param = param_line(out->text, out->len);
		for (i = start; i < out->len; i++)
			scan_byte(&sc, out->text[i]);
		/* A trailing backslash joins the next line, except in a comment
		 * (a comment never swallows the line after it). */
		if (out->len > start && out->text[out->len - 1] == '\\' && !sc.comment) {
			out->len--;
			sc.escaped = false;
			more = true;
		}
	}
	out->text[out->len] = '\0';
	return 1;
}

void scn_strip_comment(struct scn_line *line, char *comment, size_t size)
{
	struct scan sc = {0};
	size_t i, c;

	if (comment && size)
		comment[0] = '\0';
	sc.param = param_line(line->text, line->len);
	for (i = 0; i < line->len && !sc.comment; i++)
		scan_byte(&sc, line->text[i]);
	if (!sc.comment)
		return;
	i--; /* the '#' */
	if (comment && size) {
		for (c = i + 1; c < line->len && (line->text[c] == ' ' || line->text[c] == '\t' ||
						  line->text[c] == '#');
		     c++)
			;
		snprintf(comment, size, "%.*s", (int)(line->len - c), line->text + c);
	}
	line->len = i;
	line->text[i] = '\0';
}

static bool is_word_start(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_word_char(char c)
{
	return is_word_start(c) || is_digit(c) || c == '.' || c == '-';
}

static bool is_hex(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int hex_val(char c)
{
	return is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10;
}

/* Start a token at line->text[i]; its text is appended with put(). */
static struct scn_tok *tok_new(struct scn_toks *t, enum scn_tok_type type, struct scn_pos pos)
{
	struct scn_tok *k = &t->tok[t->n++];

	k->type = type;
	k->pos = pos;
	k->text = t->arena + t->used;
	k->len = 0;
	return k;
}

static void put(struct scn_toks *t, struct scn_tok *k, char c)
{
	t->arena[t->used++] = c;
	k->len++;
}

static void tok_end(struct scn_toks *t)
{
	t->arena[t->used++] = '\0';
}

/* Two-character punctuation first, then one-character. */
static size_t punct_len(const char *s)
{
	static const char *const two[] = {"->", "..", "==", "!=", "<=", ">="};
	size_t i;

	if (!strncmp(s, "<->", 3))
		return 3;
	for (i = 0; i < ARRAY_SIZE(two); i++)
		if (!strncmp(s, two[i], 2))
			return 2;
	return strchr(":=[],()&@<>+-", s[0]) ? 1 : 0;
}

/* A "string" or /regex/ from text[*i] (the opening quote). */
static int lex_quoted(const struct scn_line *line, size_t *i, const char *file, struct scn_toks *t,
		      struct scn_diag *diag)
{
	char q = line->text[*i];
	struct scn_tok *k = tok_new(t, q == '"' ? SCN_TOK_STR : SCN_TOK_REGEX, line->pos[*i]);
	size_t j = *i + 1;
	struct scn_loc loc;

	for (;;) {
		char c;

		if (j >= line->len) {
			loc = scn_loc_at(file, line->pos[*i]);
			scn_diag_add(diag, SCN_ERROR, &loc, "%s without its closing %c",
				     q == '"' ? "a string" : "a /regex/", q);
			return -EINVAL;
		}
		c = line->text[j];
		if (c == q) {
			j++;
			break;
		}
		if (c != '\\') {
			put(t, k, c);
			j++;
			continue;
		}
		c = line->text[j + 1];
		loc = scn_loc_at(file, line->pos[j]);
		if (q == '/') {
			/* A regex keeps its escapes for regcomp, except \/. */
			if (c != '/')
				put(t, k, '\\');
			if (j + 1 < line->len)
				put(t, k, c);
			j += 2;
			continue;
		}
		switch (c) {
		case '"':
		case '\\': put(t, k, c); break;
		case 'n': put(t, k, '\n'); break;
		case 't': put(t, k, '\t'); break;
		case 'x':
			if (!is_hex(line->text[j + 2]) || !is_hex(line->text[j + 3])) {
				scn_diag_add(diag, SCN_ERROR, &loc,
					     "bad escape: \\x takes two hex digits (\\x41)");
				return -EINVAL;
			}
			if (!hex_val(line->text[j + 2]) && !hex_val(line->text[j + 3])) {
				scn_diag_add(diag, SCN_ERROR, &loc,
					     "\\x00: a NUL byte is not allowed in a string (a "
					     "string is C text); use \\x01..\\xff");
				return -EINVAL;
			}
			put(t, k,
			    (char)(hex_val(line->text[j + 2]) * 16 + hex_val(line->text[j + 3])));
			j += 2;
			break;
		default:
			scn_diag_add(diag, SCN_ERROR, &loc,
				     "unknown escape '\\%c': write \\\" \\\\ \\n \\t or \\xHH",
				     c ? c : ' ');
			return -EINVAL;
		}
		j += 2;
	}
	tok_end(t);
	*i = j;
	return 0;
}

int scn_tokenize(const struct scn_line *line, const char *file, struct scn_toks *t,
		 struct scn_diag *diag)
{
	const char *s = line->text;
	struct scn_tok *k;
	struct scn_loc loc;
	size_t i = 0, n;

	t->n = 0;
	t->used = 0;
	while (i < line->len) {
		char c = s[i];

		if (c == ' ' || c == '\t') {
			i++;
			continue;
		}
		if (t->n + 1 >= SCN_TOKS_MAX)
			break; /* cannot happen: every token takes a byte of the line */
		if (t->n == 3 && c != '"' && t->tok[0].type == SCN_TOK_WORD &&
		    !strcmp(t->tok[0].text, "param") && t->tok[2].type == SCN_TOK_PUNCT &&
		    !strcmp(t->tok[2].text, "=")) {
			/* An unquoted parameter value is the rest of the line as
			 * written, trailing blanks off: /tmp, a/b, ./x.sh, 64KiB. */
			size_t end = line->len;

			while (end > i && (s[end - 1] == ' ' || s[end - 1] == '\t'))
				end--;
			k = tok_new(t, SCN_TOK_WORD, line->pos[i]);
			while (i < end)
				put(t, k, s[i++]);
			tok_end(t);
			i = line->len;
			continue;
		}
		if (c == '"' || c == '/') {
			if (lex_quoted(line, &i, file, t, diag))
				return -EINVAL;
			continue;
		}
		if (is_word_start(c)) {
			k = tok_new(t, SCN_TOK_WORD, line->pos[i]);
			/* "a->b" is a, ->, b: a word stops before "->". */
			while (i < line->len && is_word_char(s[i]) &&
			       !(s[i] == '-' && s[i + 1] == '>'))
				put(t, k, s[i++]);
			tok_end(t);
			continue;
		}
		if (is_digit(c)) {
			k = tok_new(t, SCN_TOK_NUM, line->pos[i]);
			if (c == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X')) {
				put(t, k, s[i++]);
				put(t, k, s[i++]);
			}
			/* Digits, one decimal point followed by a digit (not
			 * "0..4"), then a unit: letters or %. */
			while (i < line->len && (is_digit(s[i]) || is_word_start(s[i]) ||
						 (s[i] == '.' && is_digit(s[i + 1]))))
				put(t, k, s[i++]);
			if (s[i] == '%')
				put(t, k, s[i++]);
			tok_end(t);
			continue;
		}
		n = punct_len(s + i);
		if (n) {
			k = tok_new(t, SCN_TOK_PUNCT, line->pos[i]);
			for (; n; n--)
				put(t, k, s[i++]);
			tok_end(t);
			continue;
		}
		loc = scn_loc_at(file, line->pos[i]);
		if (c == '$' && !strncmp(s + i, "${RUN_DIR}", 10))
			scn_diag_add(
			    diag, SCN_ERROR, &loc,
			    "${RUN_DIR} is the run directory, known only when the scenario "
			    "runs: it is replaced inside a program's \"command\" only");
		else if (c == '$')
			scn_diag_add(diag, SCN_ERROR, &loc,
				     "'$' starts a parameter only as ${NAME}");
		else if (!strncmp(s + i, "\xef\xbb\xbf", 3))
			scn_diag_add(diag, SCN_ERROR, &loc,
				     "a byte order mark (U+FEFF) in the middle of the text: delete "
				     "it");
		else if ((unsigned char)c >= 0x80)
			scn_diag_add(diag, SCN_ERROR, &loc, "non-ASCII text outside a \"string\"");
		else if ((unsigned char)c < 0x20 || c == 0x7f)
			scn_diag_add(diag, SCN_ERROR, &loc, "unexpected control character 0x%02x",
				     (unsigned char)c);
		else
			scn_diag_add(diag, SCN_ERROR, &loc, "unexpected character '%c'", c);
		return -EINVAL;
	}
	k = tok_new(t, SCN_TOK_END, line->pos[line->len]);
	tok_end(t);
	return 0;
}

/* Edit distance of a and b, or a value > max once it exceeds max. */
static size_t distance(const char *a, const char *b, size_t max)
{
	size_t la = strlen(a), lb = strlen(b), i, j, best;
	size_t prev[SCN_NAME_MAX + 1], cur[SCN_NAME_MAX + 1];

	if (la > SCN_NAME_MAX || lb > SCN_NAME_MAX)
		return max + 1;
	for (j = 0; j <= lb; j++)
		prev[j] = j;
	for (i = 1; i <= la; i++) {
		cur[0] = i;
		best = cur[0];
		for (j = 1; j <= lb; j++) {
			size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
			size_t del = prev[j] + 1, ins = cur[j - 1] + 1;

			cur[j] = sub < del ? sub : del;
			if (ins < cur[j])
				cur[j] = ins;
			if (cur[j] < best)
				best = cur[j];
		}
		if (best > max)
			return max + 1;
		memcpy(prev, cur, (lb + 1) * sizeof(prev[0]));
	}
	return prev[lb];
}

const char *scn_nearest(const char *word, const char *const *words, size_t n)
{
	const char *best = NULL;
	size_t i, d, best_d = 3, len = strlen(word);

	for (i = 0; n ? i < n : words[i] != NULL; i++) {
		if (!words[i])
			continue;
		d = distance(word, words[i], 2);
		if (d < best_d && d < len) {
			best_d = d;
			best = words[i];
		}
	}
	return best;
}

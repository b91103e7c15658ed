/*
 * What the scenario library's files share and nobody else sees: the lexer
 * (scn_lex.c) that turns a file into logical lines and a line into tokens,
 * and small helpers of the parser and the checker.
 *
 * The lexer works one logical line at a time (physical lines joined by a
 * trailing backslash), each at most SCN_LINE_MAX bytes, and remembers for
 * every byte of it the physical line and column it came from, so that a
 * token made after `${NAME}` expansion or a continuation still points at
 * the right place.
 */
#ifndef SCN_PRIV_H
#define SCN_PRIV_H

#include <stdarg.h>

#include "scn_ast.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* A logical line: the bytes of its physical lines without the newlines and
 * the joining backslashes, NUL-terminated. */
struct scn_line {
	char text[SCN_LINE_MAX + 1];
	struct scn_pos pos[SCN_LINE_MAX + 1]; /* pos[len]: just past the end */
	size_t len;
};

/* A file being read. */
struct scn_src {
	const char *file; /* its name, as messages print it (owned by the script) */
	const char *data;
	size_t len;
	size_t at;     /* next byte to read */
	uint32_t line; /* physical line of data[at] */
};

void scn_src_init(struct scn_src *src, const char *file, const void *data, size_t len);

/*
 * The next logical line of src into out.  Returns 1 with a line, 0 at the
 * end of the file, or -EINVAL after reporting a file that is not text (a
 * NUL byte, invalid UTF-8): nothing more is read from it then.  A line
 * longer than SCN_LINE_MAX is reported, skipped in linear time, and
 * returned empty.
 */
int scn_src_next(struct scn_src *src, struct scn_line *out, struct scn_diag *diag);

enum scn_tok_type {
	SCN_TOK_END = 0, /* past the last token */
	SCN_TOK_WORD,    /* [A-Za-z_][A-Za-z0-9_.-]* */
	SCN_TOK_NUM,     /* digits (0x hex), decimals, then a unit: "64KiB", "2.5us", "1%" */
	SCN_TOK_STR,     /* "..." with escapes decoded */
	SCN_TOK_REGEX,   /* /.../ with \/ decoded */
	SCN_TOK_PUNCT,   /* : = -> <-> [ ] , ( ) & @ .. == != < <= > >= + - */
};

struct scn_tok {
	enum scn_tok_type type;
	const char *text; /* NUL-terminated, in the token list's arena */
	size_t len;       /* strings may hold "\x00"-free bytes only: len == strlen */
	struct scn_pos pos;
};

#define SCN_TOKS_MAX (SCN_LINE_MAX + 2)

struct scn_toks {
	struct scn_tok tok[SCN_TOKS_MAX];
	size_t n;
	char arena[SCN_LINE_MAX + SCN_TOKS_MAX];
	size_t used;
};

/*
 * Split a logical line, whose comment has been removed, into tokens.
 * Returns 0, or -EINVAL after reporting the first bad character or
 * unterminated string.
 */
int scn_tokenize(const struct scn_line *line, const char *file, struct scn_toks *out,
		 struct scn_diag *diag);

/*
 * Remove the comment of a line: from the first '#' outside a "string" or a
 * /regex/.  If comment is not NULL, it gets the comment's text without the
 * '#' and leading blanks (at most size bytes, NUL-terminated), or "".
 */
void scn_strip_comment(struct scn_line *line, char *comment, size_t size);

/* The word among words[0..n) (NULL-terminated when n is 0) nearest to word,
 * within an edit distance of 2 and less than its length; NULL if none. */
const char *scn_nearest(const char *word, const char *const *words, size_t n);

/* A token's place as a struct scn_loc in file. */
static inline struct scn_loc scn_loc_at(const char *file, struct scn_pos pos)
{
	struct scn_loc loc = {file, pos.line, pos.col};
	return loc;
}

/* A hash of len bytes at s, for the tables of names. */
uint64_t scn_hash(const char *s, size_t len);

/* scn_diag_add with a va_list. */
void scn_diag_vadd(struct scn_diag *diag, enum scn_severity sev, const struct scn_loc *loc,
		   const char *fmt, va_list ap) __attribute__((format(printf, 4, 0)));

#endif /* SCN_PRIV_H */

/*
 * Reports of the scenario runner: text, TAP 14 and JUnit XML (scn_report.h).
 */
#include "scn_report.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEXDIFF_LINES 8u
#define HEXDIFF_WIDTH 16u

/* ---- Visible text ------------------------------------------------------------ */

/*
 * The next character of s (not at its end) as visible text, into piece
 * (at least 16 bytes): a valid UTF-8 character as it is, except a control
 * character; '\n' and '\t' as they are; any other C0 control, DEL and a
 * byte that is not part of valid UTF-8 as \xHH; C1 controls and the
 * non-characters U+FFFE and U+FFFF, the bidirectional controls U+202A to
 * U+202E and U+2066 to U+2069 as \uHHHH.  Returns the bytes of s
 * taken.
 */
static size_t vis_next(const char *s, char *piece)
{
	const unsigned char *u = (const unsigned char *)s;
	unsigned cp, n, i;

	if (u[0] < 0x80) {
		if ((u[0] < 0x20 && u[0] != '\n' && u[0] != '\t') || u[0] == 0x7f)
			snprintf(piece, 16, "\\x%02x", u[0]);
		else
			piece[0] = (char)u[0], piece[1] = '\0';
		return 1;
	}
	if (u[0] >= 0xc2 && u[0] <= 0xdf)
		n = 2, cp = u[0] & 0x1fu;
	else if (u[0] >= 0xe0 && u[0] <= 0xef)
		n = 3, cp = u[0] & 0x0fu;
	else if (u[0] >= 0xf0 && u[0] <= 0xf4)
		n = 4, cp = u[0] & 0x07u;
	else
		n = 0, cp = 0;
	for (i = 1; i < n; i++) {
		if ((u[i] & 0xc0) != 0x80)
			break;
		cp = cp << 6 | (u[i] & 0x3fu);
	}
	/* Overlong forms, surrogates and code points past U+10FFFF are not
	 * UTF-8 either. */
	if (!n || i < n || (n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (n == 4 && (cp < 0x10000 || cp > 0x10ffff))) {
		snprintf(piece, 16, "\\x%02x", u[0]);
		return 1;
	}
	/* The bidirectional embeddings, overrides and isolates too: they
	 * would reorder what a terminal shows of the report. */
	if ((cp >= 0x80 && cp <= 0x9f) || cp == 0xfffe || cp == 0xffff ||
	    (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069)) {
		snprintf(piece, 16, "\\u%04x", cp);
		return n;
	}
	memcpy(piece, s, n);
	piece[n] = '\0';
	return n;
}

size_t scn_visible(const char *in, char *out, size_t size)
{
	char piece[16];
	size_t len = 0, n;

	if (!size)
		return 0;
	while (*in) {
		in += vis_next(in, piece);
		n = strlen(piece);
		if (len + n >= size)
			break;
		memcpy(out + len, piece, n);
		len += n;
	}
	out[len] = '\0';
	return len;
}

/* Write s visibly (scn_visible) on f. */
static void vis_puts(FILE *f, const char *s)
{
	char piece[16];

	while (*s) {
		s += vis_next(s, piece);
		fputs(piece, f);
	}
}

/* fprintf, with what it makes written visibly: the format's own text is
 * printable, so only what the arguments bring in (a title, a program's
 * output) is changed. */
static void vis_printf(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void vis_printf(FILE *f, const char *fmt, ...)
{
	char small[1024], *text = small;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(small)) {
		text = malloc((size_t)n + 1);
		if (!text)
			return;
		va_start(ap, fmt);
		vsnprintf(text, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	vis_puts(f, text);
	if (text != small)
		free(text);
}

void scn_outcome_fail(struct scn_outcome *o, const char *at, const char *step, const char *fmt, ...)
{
	va_list ap;

	if (o->status != SCN_PASSED)
		return;
	o->status = SCN_FAILED;
	snprintf(o->at, sizeof(o->at), "%s", at);
	snprintf(o->step, sizeof(o->step), "%s", step);
	va_start(ap, fmt);
	vsnprintf(o->message, sizeof(o->message), fmt, ap);
	va_end(ap);
}

void scn_outcome_add(char *field, size_t size, const char *fmt, ...)
{
	size_t len = strnlen(field, size);
	va_list ap;

	if (len + 2 >= size)
		return;
	if (len)
		field[len++] = '\n';
	va_start(ap, fmt);
	vsnprintf(field + len, size - len, fmt, ap);
	va_end(ap);
}

/* Append to out at *len, never past size. */
static void put(char *out, size_t size, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *out, size_t size, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*len + 1 >= size)
		return;
	va_start(ap, fmt);
	n = vsnprintf(out + *len, size - *len, fmt, ap);
	va_end(ap);
	if (n > 0)
		*len = *len + (size_t)n < size ? *len + (size_t)n : size - 1;
}

static void hex_row(char *out, size_t size, size_t *len, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < HEXDIFF_WIDTH; i++)
		put(out, size, len, i < n ? "%02x " : "   ", i < n ? p[i] : 0);
}

void scn_hexdiff_rows(const uint8_t *want, const uint8_t *got, size_t len, uint64_t base,
		      uint64_t diff, uint64_t total, bool at_least, char *out, size_t size)
{
	size_t first = 0, lines = 0, olen = 0, row, n, i;
	uint64_t shown = 0;

	out[0] = '\0';
	while (first < len && want[first] == got[first])
		first++;
	if (first == len)
		return;
	put(out, size, &olen, "%s%llu of %llu bytes differ, the first at offset 0x%llx:\n",
	    at_least ? "at least " : "", (unsigned long long)diff, (unsigned long long)total,
	    (unsigned long long)(base + first));
	put(out, size, &olen, "  %-10s  %-48s| %s\n", "offset", "expected", "actual");
	for (row = first - first % HEXDIFF_WIDTH; row < len && lines < HEXDIFF_LINES;
	     row += HEXDIFF_WIDTH) {
		n = len - row < HEXDIFF_WIDTH ? len - row : HEXDIFF_WIDTH;
		if (!memcmp(want + row, got + row, n))
			continue;
		for (i = row; i < row + n; i++)
			shown += want[i] != got[i];
		put(out, size, &olen, "  0x%08llx  ", (unsigned long long)(base + row));
		hex_row(out, size, &olen, want + row, n);
		put(out, size, &olen, "| ");
		hex_row(out, size, &olen, got + row, n);
		while (olen && out[olen - 1] == ' ')
			out[--olen] = '\0';
		put(out, size, &olen, "\n");
		lines++;
	}
	if (diff > shown)
		put(out, size, &olen, "  ... and %s%llu more differing bytes after 0x%llx\n",
		    at_least ? "at least " : "", (unsigned long long)(diff - shown),
		    (unsigned long long)(base + row));
	if (olen && out[olen - 1] == '\n')
		out[--olen] = '\0';
}

size_t scn_hexdiff(const uint8_t *want, const uint8_t *got, size_t len, uint64_t base, char *out,
		   size_t size)
{
	size_t diff = scn_diff_count(want, got, len);

	out[0] = '\0';
	if (diff)
		scn_hexdiff_rows(want, got, len, base, diff, len, false, out, size);
	return diff;
}

size_t scn_diff_count(const uint8_t *want, const uint8_t *got, size_t len)
{
	size_t diff = 0, i = 0;
	uint64_t a, b;

	/* Word by word where words are equal, byte by byte in those that
	 * differ. */
	for (; i + 8 <= len; i += 8) {
		memcpy(&a, want + i, 8);
		memcpy(&b, got + i, 8);
		if (a == b)
			continue;
		for (size_t k = 0; k < 8; k++)
			diff += want[i + k] != got[i + k];
	}
	for (; i < len; i++)
		diff += want[i] != got[i];
	return diff;
}

/* A word as a POSIX shell reads it back: quoted only when it needs it. */
static void shell_word(char *buf, size_t size, size_t *len, const char *w)
{
	if (*w &&
	    strspn(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_/.,:+@%=-") ==
		strlen(w)) {
		put(buf, size, len, " %s", w);
		return;
	}
	/* A control character or a byte past ASCII would be shown as an
	 * escape (scn_visible), which '...' would take literally: such a word
	 * is written $'...' (bash, zsh, ksh, POSIX.1-2024 sh) with \xHH for
	 * those bytes, so that the replay line runs as printed. */
	for (const unsigned char *u = (const unsigned char *)w; *u; u++)
		if (*u < 0x20 || *u >= 0x7f) {
			put(buf, size, len, " $'");
			for (u = (const unsigned char *)w; *u; u++) {
				if (*u < 0x20 || *u >= 0x7f)
					put(buf, size, len, "\\x%02x", *u);
				else if (*u == '\'' || *u == '\\')
					put(buf, size, len, "\\%c", *u);
				else
					put(buf, size, len, "%c", *u);
			}
			put(buf, size, len, "'");
			return;
		}
	put(buf, size, len, " '");
	for (; *w; w++)
		put(buf, size, len, *w == '\'' ? "'\\''" : "%c", *w);
	put(buf, size, len, "'");
}

void scn_replay_cmd(const struct scn_outcome *o, const struct scn_report_opts *ro, char *buf,
		    size_t size)
{
	char seed[32];
	size_t len = 0;

	buf[0] = '\0';
	put(buf, size, &len, "nicsim scenario run");
	shell_word(buf, size, &len, o->path);
	snprintf(seed, sizeof(seed), "%llu", (unsigned long long)o->seed);
	put(buf, size, &len, " --seed %s", seed);
	for (size_t i = 0; ro->defs && i < ro->defs->n; i++) {
		char def[SCN_NAME_MAX + SCN_TEXT_MAX + 2];

		snprintf(def, sizeof(def), "%s=%s", ro->defs->v[i].name, ro->defs->v[i].value);
		put(buf, size, &len, " -D");
		shell_word(buf, size, &len, def);
	}
	if (ro->slow != 1.0)
		put(buf, size, &len, " --slow %g", ro->slow);
	if (ro->timeout_s > 0)
		put(buf, size, &len, " --timeout %g", ro->timeout_s);
}

/* Print a multi-line field with a label on its first line, indented. */
static void print_field(FILE *f, const char *label, const char *text)
{
	const char *p = text, *nl;
	bool first = true;

	if (!*text)
		return;
	while (*p) {
		nl = strchr(p, '\n');
		vis_printf(f, "  %-9s %.*s\n", first ? label : "",
			   (int)(nl ? nl - p : (long)strlen(p)), p);
		first = false;
		p = nl ? nl + 1 : p + strlen(p);
	}
}

static void print_indented(FILE *f, const char *text, const char *indent)
{
	const char *p = text, *nl;

	while (*p) {
		nl = strchr(p, '\n');
		vis_printf(f, "%s%.*s\n", indent, (int)(nl ? nl - p : (long)strlen(p)), p);
		p = nl ? nl + 1 : p + strlen(p);
	}
}

void scn_report_text(FILE *f, const struct scn_outcome *o, const struct scn_report_opts *ro)
{
	char replay[PATH_MAX + 1024];
	const struct scn_step_rec *r;

	/* A scenario never started has no seed and nothing to replay. */
	if (o->status == SCN_NOT_RUN) {
		vis_printf(f, "SKIP %s (%s)\n", o->path, o->message);
		return;
	}
	scn_replay_cmd(o, ro, replay, sizeof(replay));
	vis_printf(f, "%s: seed %llu (replay: %s)\n", o->path, (unsigned long long)o->seed, replay);
	if (ro->verbose) {
		for (uint32_t i = 0; i < o->nrecs; i++) {
			r = &o->recs[i];
			vis_printf(f, "  %8.3fs %-4s %-9s %s (%.1f ms)\n", r->start_ns / 1e9,
				   r->ok ? "ok" : "FAIL", r->at, r->text, r->dur_ns / 1e6);
		}
		if (o->nsteps > o->nrecs)
			vis_printf(f, "  ... %u more steps\n", o->nsteps - o->nrecs);
	}
	if (o->notes[0])
		print_indented(f, o->notes, "  note: ");
	if (o->status == SCN_PASSED) {
		vis_printf(f, "PASS %s%s%s (%.3f s)\n", o->path, o->title[0] ? ": " : "", o->title,
			   o->elapsed_ns / 1e9);
		if (o->run_dir[0])
			vis_printf(f, "  kept %s\n", o->run_dir);
		return;
	}
	vis_printf(f, "FAIL %s%s%s (%.3f s)\n", o->path, o->title[0] ? ": " : "", o->title,
		   o->elapsed_ns / 1e9);
	if (o->at[0])
		vis_printf(f, "%s: %s\n", o->at, o->step);
	vis_printf(f, "  %s\n", o->message);
	print_field(f, "expected:", o->wanted);
	print_field(f, "actual:", o->found);
	if (o->detail[0])
		print_indented(f, o->detail, "  ");
	if (o->run_dir[0])
		vis_printf(f, "  kept: %s\n  files: %s\n", o->run_dir, o->files);
	vis_printf(f, "  replay: %s\n", replay);
}

/* ---- TAP 14 --------------------------------------------------------------------- */

void scn_report_tap_begin(FILE *f, size_t count)
{
	fprintf(f, "TAP version 14\n1..%zu\n", count);
}

/* A YAML value: a block scalar for several lines, else a quoted string. */
static void yaml_value(FILE *f, const char *indent, const char *key, const char *text)
{
	if (strchr(text, '\n')) {
		fprintf(f, "%s%s: |-\n", indent, key);
		char deeper[32];

		snprintf(deeper, sizeof(deeper), "%s  ", indent);
		print_indented(f, text, deeper);
		return;
	}
	/* The value, visible, then quoted: a control character reads
	 * "\\x1b" in the YAML text, so that the value a TAP consumer gets is
	 * the visible \x1b, as in the text report. */
	fprintf(f, "%s%s: \"", indent, key);
	for (const char *p = text; *p;) {
		char piece[16];

		p += vis_next(p, piece);
		for (const char *c = piece; *c; c++)
			if (*c == '"' || *c == '\\')
				fprintf(f, "\\%c", *c);
			else if (*c == '\t')
				fputs("\\t", f);
			else
				fputc(*c, f);
	}
	fputs("\"\n", f);
}

/*
 * s visibly (scn_visible) on one TAP line: a newline, a tab or a carriage
 * return as \n, \t, \r so that no text splits the line; in a test
 * point's description (desc) also a backslash as \\ and '#' as \#
 * (TAP 14), so that no name reads as a directive such as "# TODO".
 */
static void tap_puts(FILE *f, const char *s, bool desc)
{
	char piece[16];

	while (*s) {
		s += vis_next(s, piece);
		for (const char *c = piece; *c; c++) {
			if (*c == '\n')
				fputs("\\n", f);
			else if (*c == '\t')
				fputs("\\t", f);
			else if (desc && (*c == '\\' || *c == '#'))
				fprintf(f, "\\%c", *c);
			else
				fputc(*c, f);
		}
	}
}

void scn_report_tap(FILE *f, size_t n, const struct scn_outcome *o,
		    const struct scn_report_opts *ro)
{
	char replay[PATH_MAX + 1024];
	const struct scn_step_rec *r;

	if (ro->verbose && o->nrecs) {
		fputs("# Subtest: ", f);
		tap_puts(f, o->path, false);
		fprintf(f, "\n    1..%u\n", o->nrecs);
		for (uint32_t i = 0; i < o->nrecs; i++) {
			r = &o->recs[i];
			fprintf(f, "    %s %u - ", r->ok ? "ok" : "not ok", i + 1);
			tap_puts(f, r->at, true);
			fputs(": ", f);
			tap_puts(f, r->text, true);
			fprintf(f, " # time=%.3fms\n", r->dur_ns / 1e6);
		}
	}
	if (o->status == SCN_NOT_RUN) {
		fprintf(f, "ok %zu - ", n);
		tap_puts(f, o->path, true);
		fputs(" # SKIP ", f);
		tap_puts(f, o->message, true);
		fputc('\n', f);
		return;
	}
	fprintf(f, "%s %zu - ", o->status == SCN_PASSED ? "ok" : "not ok", n);
	tap_puts(f, o->path, true);
	fprintf(f, " [seed %llu]\n", (unsigned long long)o->seed);
	if (o->status == SCN_PASSED)
		return;
	scn_replay_cmd(o, ro, replay, sizeof(replay));
	fputs("  ---\n", f);
	yaml_value(f, "  ", "message", o->message);
	yaml_value(f, "  ", "severity", "fail");
	if (o->at[0])
		yaml_value(f, "  ", "at", o->at);
	if (o->step[0])
		yaml_value(f, "  ", "step", o->step);
	if (o->found[0])
		yaml_value(f, "  ", "found", o->found);
	if (o->wanted[0])
		yaml_value(f, "  ", "wanted", o->wanted);
	if (o->detail[0])
		yaml_value(f, "  ", "detail", o->detail);
	if (o->run_dir[0])
		yaml_value(f, "  ", "kept", o->run_dir);
	yaml_value(f, "  ", "replay", replay);
	fputs("  ...\n", f);
}

void scn_report_summary(FILE *f, const struct scn_outcome *const *o, size_t n, uint64_t elapsed_ns,
			bool tap)
{
	size_t passed = 0, failed = 0, skipped = 0;

	for (size_t i = 0; i < n; i++) {
		if (o[i]->status == SCN_PASSED)
			passed++;
		else if (o[i]->status == SCN_NOT_RUN)
			skipped++;
		else
			failed++;
	}
	fprintf(f, "%s%zu scenario%s: %zu passed, %zu failed", tap ? "# " : "", n,
		n == 1 ? "" : "s", passed, failed);
	if (skipped)
		fprintf(f, ", %zu not run", skipped);
	fprintf(f, " (%.2f s)\n", elapsed_ns / 1e9);
	for (size_t i = 0; i < n && failed; i++) {
		if (o[i]->status == SCN_PASSED || o[i]->status == SCN_NOT_RUN)
			continue;
		fprintf(f, "%s  failed: ", tap ? "# " : "");
		if (tap) {
			tap_puts(f, o[i]->path, false);
			if (o[i]->at[0]) {
				fputs(" at ", f);
				tap_puts(f, o[i]->at, false);
			}
			fputc('\n', f);
		} else {
			vis_printf(f, "%s%s%s\n", o[i]->path, o[i]->at[0] ? " at " : "", o[i]->at);
		}
	}
}

/* ---- JUnit XML ---------------------------------------------------------------- */

/* Text for XML: visible (scn_visible), so that no character XML 1.0 does
 * not allow is left, not even as a reference, then with its markup
 * characters escaped. */
static void xml_text(FILE *f, const char *s)
{
	char piece[16];

	while (*s) {
		s += vis_next(s, piece);
		for (const char *c = piece; *c; c++) {
			switch (*c) {
			case '<': fputs("&lt;", f); break;
			case '>': fputs("&gt;", f); break;
			case '&': fputs("&amp;", f); break;
			case '"': fputs("&quot;", f); break;
			case '\'': fputs("&apos;", f); break;
			default: fputc(*c, f);
			}
		}
	}
}

/* The directory part of path ("." for none), and the file name without
 * ".scn". */
static void split_path(const char *path, char *dir, size_t dsize, char *name, size_t nsize)
{
	const char *slash = strrchr(path, '/');
	size_t len;

	if (slash)
		snprintf(dir, dsize, "%.*s", (int)(slash - path), path);
	else
		snprintf(dir, dsize, ".");
	snprintf(name, nsize, "%s", slash ? slash + 1 : path);
	len = strlen(name);
	if (len > 4 && !strcmp(name + len - 4, ".scn"))
		name[len - 4] = '\0';
}

/* path relative to the working directory when it is below it; CI systems
 * take attachments relative to the job's directory only. */
static const char *relative(const char *path, const char *cwd)
{
	size_t n = strlen(cwd);

	if (n && !strncmp(path, cwd, n) && path[n] == '/')
		return path + n + 1;
	return path;
}

/*
 * The descriptor of this process that path names (/dev/stdout, /dev/stderr,
 * /dev/fd/N, /proc/self/fd/N), or -1.  Such a report goes to the open
 * descriptor itself: opened again by name, a redirected standard output
 * would be truncated or replaced, and the text report on it lost.
 */
static int own_fd(const char *path)
{
	static const char *const dirs[] = {"/dev/fd/", "/proc/self/fd/"};
	const char *num = NULL;
	char *end;
	long n;

	if (!strcmp(path, "/dev/stdout"))
		return 1;
	if (!strcmp(path, "/dev/stderr"))
		return 2;
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (!strncmp(path, dirs[i], strlen(dirs[i])))
			num = path + strlen(dirs[i]);
	if (!num || *num < '0' || *num > '9')
		return -1;
	errno = 0;
	n = strtol(num, &end, 10);
	return !errno && !*end && n <= 1024 * 1024 ? (int)n : -1;
}

int scn_report_junit_target(const char *path, char *target, size_t size, bool *in_place, char *why,
			    size_t wsize)
{
	char link[PATH_MAX], dir[PATH_MAX];
	struct stat st;
	const char *slash;
	ssize_t len;
	int hops;

	*in_place = false;
	if (!path[0]) {
		snprintf(why, wsize, "--junit '': expected a file name (e.g. report.xml)");
		return -EINVAL;
	}
	if (snprintf(target, size, "%s", path) >= (int)size) {
		snprintf(why, wsize, "--junit %s: the path is too long", path);
		return -ENAMETOOLONG;
	}
	if (own_fd(path) >= 0) {
		if (fcntl(own_fd(path), F_GETFL) < 0) {
			snprintf(why, wsize, "--junit %s: descriptor %d is not open", path,
				 own_fd(path));
			return -EBADF;
		}
		*in_place = true;
		return 0;
	}
	/* An existing file, through any links (even /proc's: /dev/stdout
	 * leads to "pipe:[N]", which is no path): a device or a FIFO is
	 * opened by the name given; a regular file is replaced at its real
	 * path, so that a link to it stays a link. */
	if (!stat(path, &st)) {
		if (S_ISDIR(st.st_mode)) {
			snprintf(
			    why, wsize,
			    "--junit %s is a directory: name a file in it (e.g. %s/report.xml)",
			    path, path);
			return -EISDIR;
		}
		if (!S_ISREG(st.st_mode)) {
			*in_place = true;
			return 0;
		}
		if (!lstat(path, &st) && S_ISLNK(st.st_mode)) {
			if (!realpath(path, link) ||
			    snprintf(target, size, "%s", link) >= (int)size) {
				snprintf(why, wsize, "--junit %s: cannot resolve the link: %s",
					 path, strerror(errno ? errno : ENAMETOOLONG));
				return -EINVAL;
			}
		}
		return 0;
	}
	if (errno != ENOENT) {
		snprintf(why, wsize, "--junit %s: %s", path, strerror(errno));
		return -errno;
	}
	/* A new file, or a dangling link: follow the links one by one to
	 * the file they would create; a loop ends after a bound. */
	for (hops = 0; !lstat(target, &st) && S_ISLNK(st.st_mode); hops++) {
		if (hops == 40) {
			snprintf(why, wsize, "--junit %s: too many levels of symbolic links", path);
			return -ELOOP;
		}
		len = readlink(target, link, sizeof(link) - 1);
		if (len < 0) {
			snprintf(why, wsize, "--junit %s: %s", path, strerror(errno));
			return -errno;
		}
		link[len] = '\0';
		slash = strrchr(target, '/');
		/* A relative link is relative to the link's directory. */
		if (link[0] != '/' && slash)
			len = snprintf(dir, sizeof(dir), "%.*s/%s", (int)(slash - target), target,
				       link);
		else
			len = snprintf(dir, sizeof(dir), "%s", link);
		if (len >= (ssize_t)sizeof(dir) || snprintf(target, size, "%s", dir) >= (int)size) {
			snprintf(why, wsize, "--junit %s: the path is too long", path);
			return -ENAMETOOLONG;
		}
	}
	len = (ssize_t)strlen(target);
	if (len && target[len - 1] == '/') {
		snprintf(why, wsize, "--junit %s: expected a file name, not a directory", path);
		return -EISDIR;
	}
	slash = strrchr(target, '/');
	if (slash) {
		int e;

		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - target + (slash == target)),
			 target);
		e = stat(dir, &st) ? errno : S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
		if (e) {
			snprintf(why, wsize,
				 "--junit %s: the directory %s %s; create it first or name "
				 "another file",
				 path, dir, e == ENOENT ? "does not exist" : "is not a directory");
			return -(e == ENOENT ? ENOENT : ENOTDIR);
		}
	}
	return 0;
}

/* The JUnit document for every outcome, on f. */
static void junit_write(FILE *f, const struct scn_outcome *const *o, size_t n,
			const struct scn_report_opts *ro)
{
	char dir[PATH_MAX], name[PATH_MAX], cwd[PATH_MAX], replay[PATH_MAX + 1024];
	size_t failed = 0, skipped = 0;
	double total = 0;

	if (!getcwd(cwd, sizeof(cwd)))
		cwd[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		skipped += o[i]->status == SCN_NOT_RUN;
		failed += o[i]->status != SCN_PASSED && o[i]->status != SCN_NOT_RUN;
		total += o[i]->elapsed_ns / 1e9;
	}
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
	fprintf(f,
		"<testsuites name=\"nicsim scenarios\" tests=\"%zu\" failures=\"%zu\" "
		"skipped=\"%zu\" time=\"%.3f\">\n",
		n, failed, skipped, total);
	fprintf(f,
		"  <testsuite name=\"nicsim scenarios\" tests=\"%zu\" failures=\"%zu\" "
		"errors=\"0\" skipped=\"%zu\" time=\"%.3f\">\n",
		n, failed, skipped, total);
	for (size_t i = 0; i < n; i++) {
		split_path(o[i]->path, dir, sizeof(dir), name, sizeof(name));
		fputs("    <testcase name=\"", f);
		xml_text(f, name);
		if (o[i]->status != SCN_NOT_RUN)
			fprintf(f, " [seed %llu]", (unsigned long long)o[i]->seed);
		fputs("\" classname=\"", f);
		xml_text(f, dir);
		fprintf(f, "\" file=\"");
		xml_text(f, o[i]->path);
		fprintf(f, "\" time=\"%.3f\"", o[i]->elapsed_ns / 1e9);
		if (o[i]->status == SCN_NOT_RUN) {
			fputs(">\n      <skipped message=\"", f);
			xml_text(f, o[i]->message);
			fputs("\"/>\n    </testcase>\n", f);
			continue;
		}
		if (o[i]->status == SCN_PASSED && !o[i]->run_dir[0]) {
			fputs("/>\n", f);
			continue;
		}
		fputs(">\n", f);
		if (o[i]->status != SCN_PASSED) {
			fputs("      <failure message=\"", f);
			if (o[i]->at[0]) {
				xml_text(f, o[i]->at);
				fputs(": ", f);
			}
			xml_text(f, o[i]->message);
			fputs("\" type=\"failure\">", f);
			if (o[i]->at[0]) {
				xml_text(f, o[i]->at);
				fputs(": ", f);
				xml_text(f, o[i]->step);
				fputc('\n', f);
			}
			xml_text(f, o[i]->message);
			if (o[i]->wanted[0]) {
				fputs("\nexpected:\n", f);
				xml_text(f, o[i]->wanted);
			}
			if (o[i]->found[0]) {
				fputs("\nactual:\n", f);
				xml_text(f, o[i]->found);
			}
			if (o[i]->detail[0]) {
				fputc('\n', f);
				xml_text(f, o[i]->detail);
			}
			scn_replay_cmd(o[i], ro, replay, sizeof(replay));
			fputs("\nreplay: ", f);
			xml_text(f, replay);
			fputs("</failure>\n", f);
		}
		if (o[i]->run_dir[0]) {
			fputs("      <system-out>", f);
			xml_text(f, "kept ");
			xml_text(f, o[i]->run_dir);
			fputc('\n', f);
			for (const char *p = o[i]->files; *p; p += strspn(p, " ")) {
				size_t len = strcspn(p, " ");

				fputs("[[ATTACHMENT|", f);
				xml_text(f, relative(o[i]->run_dir, cwd));
				fprintf(f, "/%.*s]]\n", (int)len, p);
				p += len;
			}
			fputs("</system-out>\n", f);
		}
		fputs("    </testcase>\n", f);
	}
	fputs("  </testsuite>\n</testsuites>\n", f);
}

int scn_report_junit(const char *path, const struct scn_outcome *const *o, size_t n,
		     const struct scn_report_opts *ro)
{
	char target[PATH_MAX], tmp[PATH_MAX + 32], why[PATH_MAX + 128];
	bool in_place;
	FILE *f;
	int rc, fd;

	rc = scn_report_junit_target(path, target, sizeof(target), &in_place, why, sizeof(why));
	if (rc)
		return rc;
	if (in_place) {
		/* One of this process's descriptors, a device or a FIFO:
		 * written as it is, never replaced by a regular file (not even
		 * /dev/null by root).  A FIFO is opened without waiting for a
		 * reader: with none, ENXIO, not a run that never ends. */
		if (own_fd(path) >= 0) {
			fflush(NULL);
			fd = fcntl(own_fd(path), F_DUPFD_CLOEXEC, 3);
		} else {
			fd = open(target, O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
			if (fd >= 0 && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
				close(fd);
				fd = -1;
			}
		}
		if (fd < 0)
			return -errno;
		f = fdopen(fd, "w");
		if (!f) {
			rc = -errno;
			close(fd);
			return rc;
		}
		junit_write(f, o, n, ro);
		rc = ferror(f) ? -EIO : 0;
		if (fclose(f) && !rc)
			rc = -errno;
		return rc;
	}
	/* Written beside the target and renamed over it: a reader (or a run
	 * that dies half-way) never sees half a report; a symlink named on
	 * the command line stays, its target is replaced. */
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", target, (int)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	f = fopen(tmp, "wxe");
	if (!f)
		return -errno;
	junit_write(f, o, n, ro);
	rc = ferror(f) ? -EIO : 0;
	if (fclose(f) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, target) < 0)
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

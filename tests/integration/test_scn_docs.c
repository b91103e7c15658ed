/*
 * The scenario examples of the documentation are true: every fenced block
 * of docs/scenarios.md and docs/scenario-tutorial.md in the scenario
 * language is checked with `nicsim scenario check`, and run with `nicsim
 * scenario run` where it says so, and the tutorial's scenario is the file
 * scenarios/examples/tutorial.scn, which passes, and fails as the tutorial
 * shows once broken.
 *
 * A block's info string says what it is (the first word is what Markdown
 * renderers read; the rest are attributes):
 *
 *   ```scn [setup] [run] [name=PATH] [file=PATH]
 *       a complete scenario; check must pass.  setup: the page's set-up,
 *       which fragments follow.  run: run must pass.  name=PATH: written at
 *       PATH of the page's directory, for later blocks to include.
 *       file=PATH: must equal the file PATH of the source tree.
 *   ```scn-fragment [continue] [run]
 *       steps, checked (and run) after the page's set-up block and, with
 *       continue, after every earlier `continue` fragment of the page.
 *   ```scn-bad
 *       check must fail with exit status 2, printing every line of the
 *       ```text block that follows (the file is example.scn).
 *
 * Each page's blocks are written in a directory of their own and checked
 * from there, so that messages say example.scn and includes resolve.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nstest.h"

#define RUN_MS 120000
#define BLOCKS_MAX 128
#define TEXT_MAX (1 << 16)

static char tmp[128];
static char out[1 << 17];

struct block {
	char lang[32];   /* scn, scn-fragment, scn-bad, text ... */
	char attrs[256]; /* the rest of the info string */
	unsigned line;   /* of the opening fence in the page */
	char *text;
};

static bool has_attr(const struct block *b, const char *attr)
{
	size_t n = strlen(attr);

	for (const char *p = b->attrs; (p = strstr(p, attr)) != NULL; p += n)
		if ((p == b->attrs || p[-1] == ' ') && (p[n] == ' ' || !p[n]))
			return true;
	return false;
}

/* The value of attribute key=VALUE into val, or false. */
static bool attr_value(const struct block *b, const char *key, char *val, size_t size)
{
	size_t n = strlen(key);

	for (const char *p = b->attrs; (p = strstr(p, key)) != NULL; p += n)
		if ((p == b->attrs || p[-1] == ' ') && p[n] == '=') {
			p += n + 1;
			snprintf(val, size, "%.*s", (int)strcspn(p, " "), p);
			return val[0] != '\0';
		}
	return false;
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	size_t n;

	if (!f)
		return NULL;
	buf = malloc(TEXT_MAX + 1);
	n = buf ? fread(buf, 1, TEXT_MAX, f) : 0;
	fclose(f);
	if (buf)
		buf[n] = '\0';
	return buf;
}

/* The fenced blocks of a Markdown page, in order. */
static size_t page_blocks(const char *page, struct block *v, size_t max)
{
	char path[PATH_MAX], line[4096];
	struct block *cur = NULL;
	size_t n = 0, len = 0;
	unsigned lineno = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", NICSIM_SOURCE_DIR, page);
	f = fopen(path, "r");
	NST_CHECK_(f != NULL, CU_TRUE, "%.200s can be read", path);
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (strncmp(line, "```", 3)) {
			if (cur && len + strlen(line) < TEXT_MAX) {
				memcpy(cur->text + len, line, strlen(line) + 1);
				len += strlen(line);
			}
			continue;
		}
		if (cur) { /* the closing fence */
			cur = NULL;
			continue;
		}
		NST_REQUIRE(n < max);
		cur = &v[n++];
		memset(cur, 0, sizeof(*cur));
		line[strcspn(line, "\n")] = '\0';
		sscanf(line + 3, "%31s", cur->lang);
		snprintf(cur->attrs, sizeof(cur->attrs), "%s",
			 line + 3 + strlen(cur->lang) + (line[3 + strlen(cur->lang)] == ' '));
		cur->line = lineno;
		cur->text = calloc(1, TEXT_MAX + 1);
		NST_REQUIRE(cur->text != NULL);
		len = 0;
	}
	fclose(f);
	NST_CHECK_(cur == NULL, CU_FALSE, "%s: every block is closed", page);
	return n;
}

static void write_text(const char *dir, const char *name, const char *text)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	/* name=common/x.scn: its directories first. */
	for (char *s = strchr(path + strlen(dir) + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		mkdir(path, 0700);
		*s = '/';
	}
	f = fopen(path, "w");
	NST_REQUIRE(f != NULL);
	fputs(text, f);
	fclose(f);
}

/* `nicsim scenario SUB FILE` from dir; its exit status, its output in out. */
static int scenario(const char *dir, const char *sub, const char *file)
{
	char cwd[PATH_MAX];
	int rc;

	NST_REQUIRE(getcwd(cwd, sizeof(cwd)) != NULL);
	NST_REQUIRE(chdir(dir) == 0);
	rc = nst_run_shown(nst_bin("nicsim"), "nicsim",
			   (const char *const[]){"scenario", sub, file, NULL}, out, sizeof(out),
			   RUN_MS);
	NST_REQUIRE(chdir(cwd) == 0);
	return rc;
}

/* Check (and run) a block's scenario text as example.scn or name. */
static void check_text(const char *page, const struct block *b, const char *dir, const char *name,
		       const char *text, bool run)
{
	int rc;

	write_text(dir, name, text);
	rc = scenario(dir, "check", name);
	NST_CHECK_(rc == 0, CU_FALSE, "%s:%u: ```%s %s passes check (exit %d)", page, b->line,
		   b->lang, b->attrs, rc);
	if (rc == 0 && run) {
		rc = scenario(dir, "run", name);
		NST_CHECK_(rc == 0, CU_FALSE, "%s:%u: ```%s %s runs and passes (exit %d)", page,
			   b->line, b->lang, b->attrs, rc);
	}
}

/* Every line of the text block appears in out. */
static void check_lines(const char *page, const struct block *b, const struct block *t)
{
	char line[1024];

	NST_CHECK_(t && !strcmp(t->lang, "text"), CU_FALSE,
		   "%s:%u: a ```text block with the messages follows the ```scn-bad block", page,
		   b->line);
	if (!t || strcmp(t->lang, "text"))
		return;
	for (const char *p = t->text; *p; p += strcspn(p, "\n") + (p[strcspn(p, "\n")] == '\n')) {
		snprintf(line, sizeof(line), "%.*s", (int)strcspn(p, "\n"), p);
		if (line[0])
			NST_CHECK_(strstr(out, line) != NULL, CU_FALSE,
				   "%s:%u: check prints \"%.300s\"", page, t->line, line);
	}
}

/* Check every scenario block of page; returns how many it checked. */
static size_t check_page(const char *page, const char *tag)
{
	static struct block v[BLOCKS_MAX];
	char dir[PATH_MAX], name[256], path[PATH_MAX];
	const struct block *setup = NULL;
	size_t n = page_blocks(page, v, BLOCKS_MAX), checked = 0;
	char *cont, *text, *tree;

	snprintf(dir, sizeof(dir), "%s/%s", tmp, tag);
	NST_REQUIRE(mkdir(dir, 0700) == 0);
	cont = calloc(1, TEXT_MAX + 1);
	text = calloc(1, 2 * TEXT_MAX + 2);
	NST_REQUIRE(cont && text);
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].lang, "scn") && has_attr(&v[i], "setup"))
			setup = &v[i];
	for (size_t i = 0; i < n; i++) {
		const struct block *b = &v[i];

		if (!strcmp(b->lang, "scn")) {
			if (!attr_value(b, "name", name, sizeof(name)))
				snprintf(name, sizeof(name), "example.scn");
			check_text(page, b, dir, name, b->text, has_attr(b, "run"));
			if (attr_value(b, "file", path, sizeof(path))) {
				char full[PATH_MAX + 64];

				snprintf(full, sizeof(full), "%s/%s", NICSIM_SOURCE_DIR, path);
				tree = read_file(full);
				NST_CHECK_(tree && !strcmp(tree, b->text), CU_FALSE,
					   "%s:%u: the block is %.200s, byte for byte", page,
					   b->line, path);
				free(tree);
			}
			checked++;
		} else if (!strcmp(b->lang, "scn-fragment")) {
			NST_CHECK_(setup != NULL, CU_FALSE, "%s: a ```scn setup block for %s:%u",
				   page, page, b->line);
			if (!setup)
				continue;
			snprintf(text, 2 * TEXT_MAX + 2, "%s%s%s", setup->text,
				 has_attr(b, "continue") ? cont : "", b->text);
			check_text(page, b, dir, "example.scn", text, has_attr(b, "run"));
			if (has_attr(b, "continue") && strlen(cont) + strlen(b->text) < TEXT_MAX)
				strcat(cont, b->text);
			checked++;
		} else if (!strcmp(b->lang, "scn-bad")) {
			int rc;

			write_text(dir, "example.scn", b->text);
			rc = scenario(dir, "check", "example.scn");
			NST_CHECK_(rc == 2, CU_FALSE,
				   "%s:%u: ```scn-bad fails check with 2 (exit %d)", page, b->line,
				   rc);
			check_lines(page, b, i + 1 < n ? &v[i + 1] : NULL);
			checked++;
		}
	}
	for (size_t i = 0; i < n; i++)
		free(v[i].text);
	free(cont);
	free(text);
	return checked;
}

static void test_reference(void)
{
	size_t n = check_page("docs/scenarios.md", "reference");

	printf("\ndocs/scenarios.md: %zu blocks checked\n", n);
	NST_GE(n, (size_t)10);
}

static void test_tutorial(void)
{
	size_t n = check_page("docs/scenario-tutorial.md", "tutorial");

	printf("\ndocs/scenario-tutorial.md: %zu blocks checked\n", n);
	NST_GE(n, (size_t)3);
}

/* The tutorial's scenario fails as the tutorial shows once its expected
 * pattern is wrong: a hex diff of the first bytes that differ. */
static void test_tutorial_broken(void)
{
	char path[PATH_MAX], dir[PATH_MAX];
	char *text, *at;

	snprintf(path, sizeof(path), "%s/scenarios/examples/tutorial.scn", NICSIM_SOURCE_DIR);
	text = read_file(path);
	NST_REQUIRE(text != NULL);
	at = strstr(text, "expect h1 x == seq 9\n");
	NST_REQUIRE(at != NULL);
	at[strlen("expect h1 x == seq ")] = '8';
	snprintf(dir, sizeof(dir), "%s/broken", tmp);
	NST_REQUIRE(mkdir(dir, 0700) == 0);
	write_text(dir, "broken.scn", text);
	free(text);
	NST_EQ(scenario(dir, "run", "broken.scn"), 1);
	NST_TRUE(strstr(out, ": expect h1 x == seq 8\n") != NULL);
	NST_TRUE(strstr(out, "h1 x[0..65536] does not hold seq 8: 8192 bytes differ") != NULL);
	NST_TRUE(strstr(out, "8192 of 65536 bytes differ, the first at offset 0x4:") != NULL);
	NST_TRUE(strstr(out, "    0x00000000  00 00 00 00 08 00 00 00 01 00 00 00 08 00 00 00 | "
			     "00 00 00 00 09 00 00 00 01 00 00 00 09 00 00 00\n") != NULL);
	NST_TRUE(strstr(out, "replay: nicsim scenario run broken.scn --seed 42\n") != NULL);
}

static int suite_init(void)
{
	return nst_suite_dir(tmp, sizeof(tmp), "scn-docs", NST_TMP_ENV);
}

static int suite_clean(void)
{
	return nst_suite_dir_done(tmp);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"reference", test_reference},
	    {"tutorial", test_tutorial},
	    {"tutorial_broken", test_tutorial_broken},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "scn_docs", tests, suite_init, suite_clean);
}

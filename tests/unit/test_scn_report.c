/*
 * The scenario runner's reports (scenarios/scn_report.c) on outcomes made
 * here: the hex diff (offsets, 16 bytes a line, at most 8 lines, then a
 * count), the replay command (quoting, -D values), the text report, TAP 14
 * with its YAML block, and JUnit XML with escaping and attachments.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nstest.h"
#include "scn_report.h"

static char tmp[128];
static char buf[1 << 16];

#define HAS(text) NST_CHECK_(strstr(buf, (text)) != NULL, CU_FALSE, "has \"%s\"", (text))
#define LACKS(text) NST_CHECK_(strstr(buf, (text)) == NULL, CU_FALSE, "lacks \"%s\"", (text))

/* What a report function wrote on a stream, in buf. */
static FILE *mem_open(void)
{
	FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");

	NST_REQUIRE(f != NULL);
	memset(buf, 0, sizeof(buf));
	return f;
}

/* The report file at path into buf (and the log). */
static void read_report(const char *path)
{
	FILE *f = fopen(path, "r");
	size_t n;

	NST_REQUIRE(f != NULL);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	printf("\n%s", buf);
}

static void test_hexdiff(void)
{
	static uint8_t want[4096], got[4096];
	size_t n;

	memset(want, 0xaa, sizeof(want));
	memcpy(got, want, sizeof(got));
	NST_EQ(scn_hexdiff(want, got, sizeof(want), 0, buf, sizeof(buf)), 0);
	NST_EQ(buf[0], '\0');
	got[0x25] = 0x01;
	n = scn_hexdiff(want, got, sizeof(want), 0x1000, buf, sizeof(buf));
	printf("\n%s\n", buf);
	NST_EQ(n, 1);
	HAS("1 of 4096 bytes differ, the first at offset 0x1025:\n");
	HAS("  0x00001020  aa aa aa aa aa aa aa aa aa aa aa aa aa aa aa aa | "
	    "aa aa aa aa aa 01 aa aa aa aa aa aa aa aa aa aa");
	LACKS("0x00001010");
	LACKS("more differing");
	/* Many lines differ: eight shown, the rest counted. */
	got[0x25] = 0xaa;
	memset(got + 0x100, 0, 0x200);
	n = scn_hexdiff(want, got, sizeof(want), 0, buf, sizeof(buf));
	printf("%s\n", buf);
	NST_EQ(n, 0x200);
	HAS("512 of 4096 bytes differ, the first at offset 0x100:\n");
	HAS("  0x00000170  aa aa");
	LACKS("0x00000180  ");
	HAS("  ... and 384 more differing bytes after 0x180");
	/* A short last line, at the offset given. */
	memcpy(got, want, sizeof(got));
	got[4095] = 0;
	scn_hexdiff(want + 4088, got + 4088, 8, 4088, buf, sizeof(buf));
	printf("%s\n", buf);
	HAS("  0x00000ff8  aa aa aa aa aa aa aa aa                         | "
	    "aa aa aa aa aa aa aa 00");
}

static void fill_failure(struct scn_outcome *o)
{
	memset(o, 0, sizeof(*o));
	o->seed = 42;
	o->elapsed_ns = 1500000000;
	snprintf(o->path, sizeof(o->path), "dir/it's.scn");
	snprintf(o->title, sizeof(o->title), "a <title> & more");
	scn_outcome_fail(o, "dir/it's.scn:7", "expect h1 x == seq 9", "%s differ", "4 bytes");
	scn_outcome_fail(o, "dir/it's.scn:9", "later", "a second failure is ignored");
	scn_outcome_add(o->wanted, sizeof(o->wanted), "x: %s", "seq 9");
	scn_outcome_add(o->found, sizeof(o->found), "x: \"%s\"", "4 differing bytes");
	scn_outcome_add(o->found, sizeof(o->found), "second line");
	snprintf(o->run_dir, sizeof(o->run_dir), "%s/run", tmp);
	snprintf(o->files, sizeof(o->files), "capture.pcapng decisions.log");
}

static void test_text_and_replay(void)
{
	struct scn_define defs[] = {{"SIZE", "1MiB"}, {"NAME", "a b"}};
	struct scn_defines d = {defs, 2};
	struct scn_report_opts ro = {.defs = &d, .slow = 2};
	struct scn_outcome *o = calloc(1, sizeof(*o));
	FILE *f;

	NST_REQUIRE(o != NULL);
	fill_failure(o);
	NST_EQ(strcmp(o->at, "dir/it's.scn:7"), 0);
	scn_replay_cmd(o, &ro, buf, sizeof(buf));
	NST_EQ(strcmp(buf, "nicsim scenario run 'dir/it'\\''s.scn' --seed 42 -D SIZE=1MiB "
			   "-D 'NAME=a b' --slow 2"),
	       0);
	f = mem_open();
	scn_report_text(f, o, &ro);
	fclose(f);
	printf("\n%s", buf);
	NST_TRUE(!strncmp(buf, "dir/it's.scn: seed 42 (replay: nicsim scenario run", 50));
	HAS("FAIL dir/it's.scn: a <title> & more (1.500 s)\n");
	HAS("dir/it's.scn:7: expect h1 x == seq 9\n  4 bytes differ\n");
	HAS("  expected: x: seq 9\n");
	HAS("  actual:   x: \"4 differing bytes\"\n            second line\n");
	HAS("  kept: ");
	HAS("  files: capture.pcapng decisions.log\n");
	free(o);
}

static void test_tap(void)
{
	struct scn_report_opts ro = {.slow = 1, .verbose = true};
	struct scn_outcome *o = calloc(1, sizeof(*o));
	FILE *f;

	NST_REQUIRE(o != NULL);
	fill_failure(o);
	o->nrecs = o->nsteps = 2;
	o->recs[0] = (struct scn_step_rec){.at = "line 3", .ok = true, .text = "h1: startup"};
	o->recs[1] = (struct scn_step_rec){.at = "line 7", .ok = false, .text = "expect"};
	f = mem_open();
	scn_report_tap_begin(f, 2);
	scn_report_tap(f, 2, o, &ro);
	fclose(f);
	printf("\n%s", buf);
	NST_TRUE(!strncmp(buf, "TAP version 14\n1..2\n", 20));
	HAS("# Subtest: dir/it's.scn\n    1..2\n    ok 1 - line 3: h1: startup # time=");
	HAS("    not ok 2 - line 7: expect # time=");
	HAS("not ok 2 - dir/it's.scn [seed 42]\n  ---\n  message: \"4 bytes differ\"\n");
	HAS("  at: \"dir/it's.scn:7\"\n");
	HAS("  found: |-\n    x: \"4 differing bytes\"\n    second line\n");
	HAS("  wanted: \"x: seq 9\"\n");
	HAS("  ...\n");
	free(o);
}

static void test_junit(void)
{
	struct scn_report_opts ro = {.slow = 1};
	struct scn_outcome *o = calloc(2, sizeof(*o));
	const struct scn_outcome *v[2];
	char path[256];

	NST_REQUIRE(o != NULL);
	fill_failure(&o[0]);
	snprintf(o[1].path, sizeof(o[1].path), "top.scn");
	o[1].seed = 7;
	v[0] = &o[0];
	v[1] = &o[1];
	snprintf(path, sizeof(path), "%s/junit.xml", tmp);
	NST_EQ(chdir(tmp), 0);
	NST_EQ(scn_report_junit(path, v, 2, &ro), 0);
	read_report(path);
	HAS("tests=\"2\" failures=\"1\"");
	HAS("<testcase name=\"it&apos;s [seed 42]\" classname=\"dir\"");
	HAS("<failure message=\"dir/it&apos;s.scn:7: 4 bytes differ\" type=\"failure\">");
	HAS("x: &quot;4 differing bytes&quot;");
	/* The run directory is below the working directory: relative paths. */
	HAS("[[ATTACHMENT|run/capture.pcapng]]\n[[ATTACHMENT|run/decisions.log]]\n");
	HAS("<testcase name=\"top [seed 7]\" classname=\".\" file=\"top.scn\" time=\"0.000\"/>");
	free(o);
}

/* No byte a terminal or an XML 1.0 parser would take as a control: C0
 * controls but '\n' (and '\t' outside XML), DEL, C1 controls (UTF-8 C2 80
 * .. C2 9F), and no character reference (&#...;) either. */
static bool clean(const char *text, bool xml)
{
	const unsigned char *u = (const unsigned char *)text;

	for (size_t i = 0; u[i]; i++) {
		if ((u[i] < 0x20 && u[i] != '\n' && (xml || u[i] != '\t')) || u[i] == 0x7f ||
		    (u[i] == 0xc2 && u[i + 1] >= 0x80 && u[i + 1] <= 0x9f) || u[i] >= 0xf8 ||
		    u[i] == 0xff) {
			printf("\nbyte 0x%02x at %zu: %.40s\n", u[i], i,
			       text + (i > 20 ? i - 20 : 0));
			return false;
		}
	}
	return strstr(text, "&#") == NULL;
}

/*
 * A title and output holding ESC, BEL, CR, 0x01, DEL, a C1 control and
 * bytes that are not UTF-8 reach no report raw: the text report, TAP and
 * JUnit all show them as visible escapes, and the XML stays well formed.
 */
static void test_control_characters(void)
{
	static const char nasty[] = "a\x1b[2Jb\x07"
				    "c\\0d\x01"
				    "e\rf\x7f"
				    "g\xc2\x9b"
				    "h\xff"
				    "i caf\xc3\xa9";
	static const char shown[] =
	    "a\\x1b[2Jb\\x07c\\0d\\x01e\\x0df\\x7fg\\u009bh\\xffi caf\xc3\xa9";
	struct scn_report_opts ro = {.slow = 1, .verbose = true};
	struct scn_outcome *o = calloc(1, sizeof(*o));
	const struct scn_outcome *v[1] = {o};
	char path[256], vis[256];
	FILE *f;

	NST_REQUIRE(o != NULL);
	NST_EQ(scn_visible(nasty, vis, sizeof(vis)), strlen(shown));
	NST_CHECK_(!strcmp(vis, shown), CU_FALSE, "visible: %s", vis);
	/* Cut at a character's end: never half an escape. */
	NST_EQ(scn_visible(nasty, vis, 4), 1);
	NST_EQ(strcmp(vis, "a"), 0);
	fill_failure(o);
	snprintf(o->title, sizeof(o->title), "title %s", nasty);
	snprintf(o->message, sizeof(o->message), "message %s", nasty);
	snprintf(o->found, sizeof(o->found), "output: %s\nsecond %s", nasty, nasty);
	o->nrecs = o->nsteps = 1;
	o->recs[0] = (struct scn_step_rec){.at = "line 3", .ok = false};
	snprintf(o->recs[0].text, sizeof(o->recs[0].text), "step %s", nasty);

	f = mem_open();
	scn_report_text(f, o, &ro);
	fclose(f);
	printf("\n%s", buf);
	NST_TRUE(clean(buf, false));
	HAS("title a\\x1b[2Jb\\x07c");
	HAS("  actual:   output: a\\x1b[2Jb\\x07c\\0d\\x01e\\x0df\\x7fg\\u009bh\\xffi caf");
	HAS("step a\\x1b");

	f = mem_open();
	scn_report_tap(f, 1, o, &ro);
	fclose(f);
	printf("\n%s", buf);
	NST_TRUE(clean(buf, false));
	/* Quoted: the YAML value is the visible escape itself. */
	HAS("  message: \"message a\\\\x1b[2Jb\\\\x07c\\\\0d\\\\x01e");
	HAS("  found: |-\n    output: a\\x1b[2Jb\\x07c");

	snprintf(path, sizeof(path), "%s/ctl.xml", tmp);
	NST_EQ(scn_report_junit(path, v, 1, &ro), 0);
	read_report(path);
	NST_TRUE(clean(buf, true));
	HAS("message a\\x1b[2Jb\\x07c\\0d\\x01e\\x0df\\x7fg\\u009bh\\xffi caf\xc3\xa9");
	free(o);
}

/*
 * TAP descriptions are escaped (TAP 14): a '#' in a file name or a step
 * does not make a directive, a backslash is doubled, a newline does not
 * split the test point; bidirectional controls are shown escaped.
 */
static void test_tap_escaping(void)
{
	struct scn_report_opts ro = {.slow = 1, .verbose = true};
	struct scn_outcome *o = calloc(1, sizeof(*o));
	char vis[64];
	FILE *f;

	NST_REQUIRE(o != NULL);
	snprintf(o->path, sizeof(o->path), "x # TODO\nok 9 - a\\b.scn");
	o->seed = 5;
	o->status = SCN_FAILED;
	snprintf(o->message, sizeof(o->message), "failed");
	o->nrecs = o->nsteps = 1;
	o->recs[0] = (struct scn_step_rec){.at = "line 2", .ok = true, .text = "echo '#' # SKIP"};
	f = mem_open();
	scn_report_tap(f, 1, o, &ro);
	fclose(f);
	printf("\n%s", buf);
	HAS("not ok 1 - x \\# TODO\\nok 9 - a\\\\b.scn [seed 5]\n");
	HAS("# Subtest: x # TODO\\nok 9 - a\\b.scn\n");
	HAS("    ok 1 - line 2: echo '\\#' \\# SKIP # time=");
	LACKS("\nok 9");
	/* Not run: a SKIP, no seed, no replay. */
	o->status = SCN_NOT_RUN;
	o->nrecs = 0;
	snprintf(o->path, sizeof(o->path), "later.scn");
	snprintf(o->message, sizeof(o->message), "not run: interrupted (SIGINT)");
	f = mem_open();
	scn_report_tap(f, 3, o, &ro);
	fclose(f);
	HAS("ok 3 - later.scn # SKIP not run: interrupted (SIGINT)\n");
	LACKS("seed");
	f = mem_open();
	scn_report_text(f, o, &ro);
	fclose(f);
	HAS("SKIP later.scn (not run: interrupted (SIGINT))\n");
	LACKS("replay");
	/* A replay line for a name with control characters runs as printed:
	 * $'...' with \xHH escapes. */
	{
		struct scn_report_opts plain = {.slow = 1};

		snprintf(o->path, sizeof(o->path), "a\nb'\x1b\\.scn");
		o->seed = 5;
		scn_replay_cmd(o, &plain, buf, sizeof(buf));
		NST_CHECK_(!strcmp(buf, "nicsim scenario run $'a\\x0ab\\'\\x1b\\\\.scn' --seed 5"),
			   CU_FALSE, "replay: %.400s", buf);
	}
	/* U+202E (right-to-left override) and U+2066 (left-to-right isolate). */
	NST_EQ(scn_visible("a\xe2\x80\xae"
			   "b\xe2\x81\xa6"
			   "c",
			   vis, sizeof(vis)),
	       15);
	NST_CHECK_(!strcmp(vis, "a\\u202eb\\u2066c"), CU_FALSE, "visible: %s", vis);
	free(o);
}

static int suite_init(void)
{
	return nst_suite_dir(tmp, sizeof(tmp), "scn-report", 0);
}

static int suite_clean(void)
{
	return nst_suite_dir_done(tmp);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"hexdiff", test_hexdiff},
	    {"text_and_replay", test_text_and_replay},
	    {"tap", test_tap},
	    {"junit", test_junit},
	    {"control_characters", test_control_characters},
	    {"tap_escaping", test_tap_escaping},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "scn_report", tests, suite_init, suite_clean);
}

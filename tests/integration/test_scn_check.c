/*
 * `nicsim scenario check` end to end: the exit status and the messages the
 * real binary prints for good and bad scripts, files and directories, -D,
 * and the help.  Nothing is started: check only reads files, in a private
 * directory that is the tool's working directory (nst_run passes ours on),
 * so messages name files as given.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nstest.h"

#define RUN_MS 30000 /* bound on one nicsim command */

static char tmp[256];
static char out[65536];

static int nicsim(const char *const *args)
{
	return nst_run_shown(nst_bin("nicsim"), "nicsim", args, out, sizeof(out), RUN_MS);
}

static void put(const char *name, const char *text)
{
	FILE *f = fopen(name, "w");

	NST_REQUIRE(f != NULL);
	NST_REQUIRE(fputs(text, f) >= 0);
	NST_REQUIRE(fclose(f) == 0);
}

/* out holds line (a whole line). */
static bool has_line(const char *line)
{
	size_t len = strlen(line);
	const char *p;

	for (p = strstr(out, line); p; p = strstr(p + 1, line))
		if ((p == out || p[-1] == '\n') && (p[len] == '\n' || !p[len]))
			return true;
	printf("  missing line: %s\n", line);
	return false;
}

static const char good[] = "# Two hosts say hello.\n"
			   "param PORT = 7000\n"
			   "nic a 198.18.0.1\n"
			   "nic b 198.18.0.2\n"
			   "host h1 on a\n"
			   "host h2 on b\n"
			   "h1: startup\n"
			   "h1: socket -> s\n"
			   "h1: bind s a ${PORT}\n"
			   "h1: listen s\n"
			   "h1: accept s -> c &\n"
			   "h2: startup\n"
			   "h2: socket -> t\n"
			   "h2: connect t a ${PORT}\n"
			   "wait c within 2s\n";

static void test_good_file(void)
{
	const char *args[] = {"scenario", "check", "good.scn", NULL};

	put("good.scn", good);
	NST_EQ(nicsim(args), 0);
	NST_EQ(strlen(out), 0);
}

static void test_bad_file(void)
{
	const char *args[] = {"scenario", "check", "good.scn", "bad.scn", NULL};

	put("good.scn", good);
	put("bad.scn", "nic a 198.18.0.1\n"
		       "timeout 5\n"
		       "host h1 on a\n"
		       "h1: sokcet -> s\n"
		       "h1: close s\n");
	NST_EQ(nicsim(args), 2);
	NST_TRUE(has_line("bad.scn:2:9: 5: a time needs a unit (5ms? 5us?)"));
	NST_TRUE(has_line("bad.scn:4:5: unknown call 'sokcet'; did you mean 'socket'?"));
	/* Parse errors stop the file before its names are checked. */
	NST_TRUE(strstr(out, "bad.scn:5") == NULL);
	NST_TRUE(strstr(out, "good.scn") == NULL);

	put("bad.scn", "nic a 198.18.0.1\nhost h1 on a\nh1: close s\n");
	NST_EQ(nicsim(args), 2);
	NST_TRUE(has_line("bad.scn:3:11: 's' is not defined (a socket is wanted)"));
}

/* A directory: every *.scn below it, in name order, other files left out. */
static void test_directory(void)
{
	const char *args[] = {"scenario", "check", "dir", NULL};

	NST_REQUIRE(mkdir("dir", 0700) == 0 || errno == EEXIST);
	NST_REQUIRE(mkdir("dir/b", 0700) == 0 || errno == EEXIST);
	put("dir/a.scn", "seed x\n");
	put("dir/b/c.scn", "seed y\n");
	put("dir/b/notes.txt", "seed z\n");
	NST_EQ(nicsim(args), 2);
	NST_TRUE(has_line("dir/a.scn:1:6: expected a seed, found 'x'"));
	NST_TRUE(has_line("dir/b/c.scn:1:6: expected a seed, found 'y'"));
	NST_TRUE(strstr(out, "dir/a.scn") < strstr(out, "dir/b/c.scn"));
	NST_TRUE(strstr(out, "notes") == NULL);

	put("dir/a.scn", "seed 1\n");
	put("dir/b/c.scn", "seed 2\n");
	NST_EQ(nicsim(args), 0);
}

static void test_defines(void)
{
	const char *set[] = {"scenario", "check", "d.scn", "-D", "N=0", NULL};
	const char *joined[] = {"scenario", "check", "-DN=2KiB", "d.scn", NULL};
	const char *bad[] = {"scenario", "check", "d.scn", "-D", "=1", NULL};

	put("d.scn", "param N = 4KiB\nnic a 198.18.0.1\nhost h on a\nh: buffer x ${N}\n");
	NST_EQ(nicsim(set), 2);
	NST_TRUE(has_line("d.scn:4:11: buffer 'x' of 0 bytes: give it a size"));
	NST_EQ(nicsim(joined), 0);
	NST_EQ(nicsim(bad), 2);
	NST_TRUE(has_line("nicsim: -D =1: expected NAME=VALUE, NAME a word such as SIZE"));
}

/* What check refuses now rather than fail or mislead at run time: exit 2,
 * each message at its file:line:col, an included file's own. */
static void test_refused_at_check(void)
{
	const char *args[] = {"scenario", "check", "refuse.scn", NULL};
	const char *proc[] = {"scenario", "check", "proc.scn", NULL};

	put("refuse.inc", "h1: madvise x[100..] dontneed\n"
			  "heal f\n");
	put("refuse.scn", "nic a 198.18.0.1\n"
			  "nic b 198.18.0.2\n"
			  "host h1 on a\n"
			  "h1: buffer x 2GiB\n"
			  "fault f a -> b loss 1% optional\n"
			  "heal f\n"
			  "include \"refuse.inc\"\n"
			  "wait counter a.retransmits delta from m >= 1\n");
	NST_EQ(nicsim(args), 2);
	NST_TRUE(has_line("refuse.scn:4:1: buffer 'x' of 2147483648 bytes: a host's buffer is at "
			  "most 1GiB (1073741824 bytes); split it into several buffers"));
	NST_TRUE(has_line("refuse.inc:1:13: madvise of x at offset 100: the range must start on "
			  "a page (a multiple of the page size, 4096 bytes)"));
	NST_TRUE(has_line("refuse.inc:2:6: fault 'f' is healed already (refuse.scn:6): heal a "
			  "fault once"));
	NST_TRUE(has_line("refuse.scn:8:39: 'm' is not defined (a mark is wanted)"));

	put("proc.scn", "include \"/proc/self/status\"\n");
	NST_EQ(nicsim(proc), 2);
	NST_TRUE(
	    has_line("proc.scn:1:9: cannot include \"/proc/self/status\": not a regular file "
		     "on a regular filesystem (a file of /proc or /sys shows a size that is not "
		     "its length): copy it to a file first"));
}

/*
 * What would stall a run is refused before anything starts, with exit 2:
 * a back-reference (exponential matching), and files of comments that
 * include each other 100 times over, six deep (read 100^6 times before the
 * include limit; the command is bounded by RUN_MS).
 */
static void test_refused_before_run(void)
{
	const char *run[] = {"scenario", "run", "backref.scn", NULL};
	const char *fan[] = {"scenario", "check", "fan.scn", NULL};
	char text[32 * 100 + 1], name[32];
	size_t used;
	int level, k;

	put("backref.scn", "nic a 198.18.0.1\n"
			   "program p on a \"printf 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaac\\n'\"\n"
			   "start p\n"
			   "wait p output /^(a*)*(a*)*\\1\\2b/ within 2s\n");
	NST_EQ(nicsim(run), 2);
	NST_TRUE(has_line("backref.scn:4:1: /^(a*)*(a*)*\\1\\2b/: '\\1' is a back-reference, "
			  "which a POSIX extended regular expression does not have (and whose "
			  "matching can take exponential time): match the text itself, or escape "
			  "a digit as [1]"));
	NST_TRUE(has_line("nicsim scenario: 1 of 1 script bad: nothing was run"));

	put("l0.inc", "# only a comment\n");
	for (level = 1; level <= 6; level++) {
		used = 0;
		for (k = 0; k < 100; k++)
			used += (size_t)snprintf(text + used, sizeof(text) - used,
						 "include \"l%d.inc\"\n", level - 1);
		snprintf(name, sizeof(name), "l%d.inc", level);
		put(name, text);
	}
	put("fan.scn", "nic a 198.18.0.1\ninclude \"l6.inc\"\n");
	NST_EQ(nicsim(fan), 2);
	NST_TRUE(strstr(out, "more than 1000 includes in one scenario") != NULL);
}

static void test_usage(void)
{
	const char *help1[] = {"scenario", "--help", NULL};
	const char *help2[] = {"help", "scenario", NULL};
	const char *help3[] = {"scenario", "check", "--help", NULL};
	const char *top[] = {"help", NULL};
	const char *none[] = {"scenario", "check", NULL};
	const char *missing[] = {"scenario", "check", "nowhere.scn", NULL};
	const char *run[] = {"scenario", "run", "good.scn", NULL};
	const char *unknown[] = {"scenario", "chekc", NULL};
	const char *badopt[] = {"scenario", "check", "good.scn", "-j", "2", NULL};

	NST_EQ(nicsim(help1), 0);
	NST_TRUE(strstr(out, "scenario check") != NULL && strstr(out, "scenario run") != NULL);
	NST_EQ(nicsim(help2), 0);
	NST_TRUE(strstr(out, "scenario check") != NULL);
	NST_EQ(nicsim(help3), 0);
	NST_TRUE(strstr(out, "usage: nicsim scenario check PATH...") != NULL);
	NST_EQ(nicsim(top), 0);
	NST_TRUE(strstr(out, "scenario") != NULL);
	NST_EQ(nicsim(none), 2);
	NST_TRUE(has_line("nicsim: scenario check: name the files or directories to check"));
	NST_EQ(nicsim(missing), 2);
	NST_TRUE(has_line("nowhere.scn: No such file or directory"));
	NST_EQ(nicsim(run), 0);
	NST_TRUE(strstr(out, "\n1 scenario: 1 passed, 0 failed (") != NULL);
	NST_EQ(nicsim(badopt), 2);
	NST_TRUE(has_line("nicsim: unknown option '-j' for 'nicsim scenario check'; see 'nicsim "
			  "scenario check --help'"));
	NST_EQ(nicsim(unknown), 2);
	NST_TRUE(has_line("nicsim: unknown subcommand 'scenario chekc'; see 'nicsim scenario "
			  "--help'"));
}

static int init(void)
{
	return nst_suite_dir(tmp, sizeof(tmp), "scncheck", NST_TMP_CWD);
}

static int clean(void)
{
	return nst_suite_dir_done(tmp);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"a good file", test_good_file},
	    {"bad files", test_bad_file},
	    {"a directory", test_directory},
	    {"-D overrides", test_defines},
	    {"refused at check", test_refused_at_check},
	    {"refused before a run", test_refused_before_run},
	    {"help and usage errors", test_usage},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "scn_check", tests, init, clean);
}

/*
 * The scenarios that must fail (scenarios/selftest/): each states, in a
 * line `# must-fail: TEXT`, the failure it exists to produce.  A runner
 * whose expectations passed whatever happened would pass every scenario of
 * the repository; these prove that each kind of expectation (memory, TPT,
 * counter, refusal, frames, program output, call result, a wait's deadline,
 * a fault that never fired, a stream socket's path) can fail, and fails
 * with a message that says what was wrong.
 *
 * Each file is run alone with `nicsim scenario run FILE`: it must exit 1
 * (failed, not a script error), and the report must hold the file's TEXT
 * and the file:line of the failing step.  Run directories go below this
 * suite's private directory (TMPDIR), kept there by the failures and
 * removed with it.
 *
 * And the shape of the repository's scenarios, which label scenario runs:
 * every rule R1-R12 has a scenario scenarios/rules/rNN-*.scn whose first
 * line states the rule ("# RN: ..."), and every scenario there and in
 * scenarios/faults starts with its intent, a comment.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nstest.h"

#define RUN_MS 120000 /* bound on one `nicsim scenario run` */
#define MAX_FILES 64
#define MUST_FAIL "# must-fail: "

static char tmp[128];
static char out[1 << 17];

/* The kinds of expectation the directory must cover, by file name. */
static const char *const kinds[] = {
    "memory.scn", "tpt.scn",         "counter.scn",      "refusal.scn",           "frames.scn",
    "output.scn", "call-result.scn", "wait-timeout.scn", "fault-never-fired.scn", "stream.scn",
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.scn names of dir, sorted, into names (each malloc'd); their count. */
static size_t list_scn(const char *dir, char **names, size_t max)
{
	struct dirent *e;
	size_t n = 0;
	DIR *d = opendir(dir);

	while (d && (e = readdir(d)) && n < max) {
		size_t len = strlen(e->d_name);

		if (len > 4 && !strcmp(e->d_name + len - 4, ".scn"))
			names[n++] = strdup(e->d_name);
	}
	if (d)
		closedir(d);
	qsort(names, n, sizeof(*names), cmp_str);
	return n;
}

/* The TEXT of path's `# must-fail: TEXT` line into text; false if none. */
static bool must_fail_text(const char *path, char *text, size_t size)
{
	char line[1024];
	bool found = false;
	FILE *f = fopen(path, "r");

	while (f && !found && fgets(line, sizeof(line), f)) {
		if (strncmp(line, MUST_FAIL, strlen(MUST_FAIL)))
			continue;
		line[strcspn(line, "\n")] = '\0';
		snprintf(text, size, "%s", line + strlen(MUST_FAIL));
		found = text[0] != '\0';
	}
	if (f)
		fclose(f);
	return found;
}

static void test_every_kind_present(void)
{
	char path[512];

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		snprintf(path, sizeof(path), "%s/selftest/%s", NICSIM_SCENARIOS_DIR, kinds[i]);
		NST_CHECK_(access(path, R_OK) == 0, CU_FALSE, "%.400s exists", path);
	}
}

/* The first line of path into line (without its newline); false if none. */
static bool first_line(const char *path, char *line, size_t size)
{
	FILE *f = fopen(path, "r");
	bool ok = f && fgets(line, (int)size, f);

	if (f)
		fclose(f);
	if (ok)
		line[strcspn(line, "\n")] = '\0';
	return ok;
}

static void test_rules_and_intents(void)
{
	static const char *const dirs[] = {"rules", "faults"};
	bool rule[13] = {false};
	char dir[512], path[1024], line[256], want[16];

	for (size_t k = 0; k < sizeof(dirs) / sizeof(dirs[0]); k++) {
		char *names[MAX_FILES];
		size_t n;

		snprintf(dir, sizeof(dir), "%s/%s", NICSIM_SCENARIOS_DIR, dirs[k]);
		n = list_scn(dir, names, MAX_FILES);
		NST_CHECK_(n > 0, CU_FALSE, "%.400s holds scenarios", dir);
		for (size_t i = 0; i < n; i++) {
			unsigned r;

			snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
			NST_CHECK_(first_line(path, line, sizeof(line)) &&
				       !strncmp(line, "# ", 2) && strlen(line) > 12,
				   CU_FALSE, "%.400s starts with its intent, a comment", path);
			if (k == 0 && sscanf(names[i], "r%2u-", &r) == 1 && r >= 1 && r <= 12) {
				snprintf(want, sizeof(want), "# R%u: ", r);
				NST_CHECK_(!strncmp(line, want, strlen(want)), CU_FALSE,
					   "%.400s starts with \"%s\"", path, want);
				rule[r] = true;
			}
			free(names[i]);
		}
	}
	for (unsigned r = 1; r <= 12; r++)
		NST_CHECK_(rule[r], CU_FALSE, "scenarios/rules has a scenario r%02u-*.scn for R%u",
			   r, r);
}

static void test_each_fails_as_stated(void)
{
	char dir[512], path[1024], text[1024], at[1100];
	char *names[MAX_FILES];
	size_t n;

	snprintf(dir, sizeof(dir), "%s/selftest", NICSIM_SCENARIOS_DIR);
	n = list_scn(dir, names, MAX_FILES);
	printf("\n%zu scenarios in %s\n", n, dir);
	NST_REQUIRE_GE(n, sizeof(kinds) / sizeof(kinds[0]));
	for (size_t i = 0; i < n; i++) {
		int rc;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (!must_fail_text(path, text, sizeof(text))) {
			NST_CHECK_(false, CU_FALSE, "%.400s has a line \"%s<text>\"", path,
				   MUST_FAIL);
			free(names[i]);
			continue;
		}
		rc = nst_run_shown(nst_bin("nicsim"), "nicsim",
				   (const char *const[]){"scenario", "run", path, NULL}, out,
				   sizeof(out), RUN_MS);
		NST_CHECK_(rc == 1, CU_FALSE, "%.100s: exit status %d, wanted 1 (a failure)",
			   names[i], rc);
		NST_CHECK_(strstr(out, text) != NULL, CU_FALSE, "%.100s: the report has \"%.300s\"",
			   names[i], text);
		/* The failing step by file:line ("PATH:N: step"). */
		snprintf(at, sizeof(at), "\n%s:", path);
		NST_CHECK_(strstr(out, at) != NULL, CU_FALSE,
			   "%.100s: the report names %.300s:LINE", names[i], path);
		free(names[i]);
	}
}

static int suite_init(void)
{
	return nst_suite_dir(tmp, sizeof(tmp), "scn-selftest", NST_TMP_ENV);
}

static int suite_clean(void)
{
	return nst_suite_dir_done(tmp);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"every_kind_present", test_every_kind_present},
	    {"rules_and_intents", test_rules_and_intents},
	    {"each_fails_as_stated", test_each_fails_as_stated},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "scn_selftest", tests, suite_init, suite_clean);
}

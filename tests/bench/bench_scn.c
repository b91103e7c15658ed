/*
 * The scenario runner's fixed cost: `nicsim scenario run` of a scenario
 * with two NICs, a host agent on each and one call each (startup), from
 * the command to its exit: checking the file, forking the scenario's
 * process, the run directory, both nicsimd started and answering, the
 * fabric's links, the capture attached, the agents spawned and attached,
 * the two calls, then every process ended and the directory removed.
 *
 * Beside it, measured in the same run and alternating with it (so that a
 * drift in the machine's load touches both alike): the cost of the NICs
 * alone, `nicsim up --hosts 2` then `nicsim down` in a fresh directory,
 * which the runner cannot do without.  Medians of RUNS runs each, and
 * their ratio.  Target: the runner's median at most TARGET_MS.
 *
 * The repository's scenario set: every scenario of the folders of
 * scenarios/ but selftest (what label scenario runs: rules, faults ...),
 * `nicsim scenario run` of those folders at -j 2, SET_RUNS times.  Beside it, measured in the same run
 * just before each, the fixed cost again: the set can take no less than its
 * scenarios' fixed costs shared between two workers, so the ratio of the
 * set's time to that reference says how much of the set is the scenarios'
 * own work (their transfers, their faults' timeouts) rather than start-up
 * and teardown.  Target: the set's median at most SET_TARGET_S.
 */
#include <dirent.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nstest.h"

#define RUNS 9
#define RUN_MS 60000
#define TARGET_MS 150.0
#define SET_RUNS 3
#define SET_RUN_MS 600000
#define SET_TARGET_S 60.0
#define SET_JOBS 2
#define MAX_DIRS 16

static char tmp[128];
static char out[1 << 17];
static char fixed_path[256];

static const char scenario[] = "# the runner's fixed cost\n"
			       "seed 1\n"
			       "nic a 198.18.0.1\n"
			       "nic b 198.18.0.2\n"
			       "host h1 on a\n"
			       "host h2 on b\n"
			       "h1: startup\n"
			       "h2: startup\n";

static double run_ms(const char *const *argv)
{
	uint64_t t0 = nst_now_ns();
	int rc = nst_run(argv, out, sizeof(out), RUN_MS);

	if (rc != 0)
		printf("\n%s -> %d:\n%s", argv[1], rc, out);
	NST_EQ(rc, 0);
	return (double)(nst_now_ns() - t0) / 1e6;
}

static void test_fixed_cost(void)
{
	char dir[256];
	const char *nicsim = nst_bin("nicsim");
	double scn[RUNS], nics[RUNS], m_scn, m_nics;

	for (int i = 0; i < RUNS; i++) {
		snprintf(dir, sizeof(dir), "%s/up%d", tmp, i);
		scn[i] = run_ms((const char *const[]){nicsim, "scenario", "run", fixed_path, NULL});
		nics[i] =
		    run_ms((const char *const[]){nicsim, "up", "--dir", dir, "--hosts", "2", NULL});
		nics[i] += run_ms((const char *const[]){nicsim, "down", "--dir", dir, NULL});
	}
	m_scn = nst_median(scn, RUNS);
	m_nics = nst_median(nics, RUNS);
	printf("\n\n  fixed cost of a scenario (2 NICs, 2 agents, 1 call each, teardown), "
	       "median of %d:\n",
	       RUNS);
	printf("  %-44s %9.1f ms\n", "nicsim scenario run", m_scn);
	printf("  %-44s %9.1f ms\n", "nicsim up --hosts 2 + nicsim down (reference)", m_nics);
	printf("  %-44s %9.2fx\n", "ratio", m_scn / m_nics);
	printf("  target: the runner's median at most %.0f ms\n", TARGET_MS);
	NST_TRUE(m_scn <= TARGET_MS);
}

/* The *.scn files of dir (one level: a folder of label scenario). */
static int count_scn(const char *dir)
{
	struct dirent *e;
	int n = 0;
	DIR *d = opendir(dir);

	while (d && (e = readdir(d))) {
		size_t len = strlen(e->d_name);

		n += len > 4 && !strcmp(e->d_name + len - 4, ".scn");
	}
	if (d)
		closedir(d);
	return n;
}

static void test_scenario_set(void)
{
	static char dirs[MAX_DIRS][512];
	const char *argv[MAX_DIRS + 8];
	char jobs[8];
	double set[SET_RUNS], fixed[SET_RUNS], m_set, m_fixed, reference;
	struct dirent *e;
	DIR *d = opendir(NICSIM_SCENARIOS_DIR);
	int n = 0, ndirs = 0, argc = 0;

	/* The folders label scenario runs: those holding scenarios, but
	 * selftest (its scenarios exist to fail). */
	while (d && (e = readdir(d)) && ndirs < MAX_DIRS) {
		int k;

		if (e->d_name[0] == '.' || !strcmp(e->d_name, "selftest"))
			continue;
		snprintf(dirs[ndirs], sizeof(dirs[ndirs]), "%s/%s", NICSIM_SCENARIOS_DIR,
			 e->d_name);
		k = count_scn(dirs[ndirs]);
		if (k > 0) {
			printf("\n  %s: %d scenarios", dirs[ndirs], k);
			n += k;
			ndirs++;
		}
	}
	if (d)
		closedir(d);
	NST_REQUIRE_GT(n, 0);
	snprintf(jobs, sizeof(jobs), "%d", SET_JOBS);
	argv[argc++] = nst_bin("nicsim");
	argv[argc++] = "scenario";
	argv[argc++] = "run";
	for (int i = 0; i < ndirs; i++)
		argv[argc++] = dirs[i];
	argv[argc++] = "-j";
	argv[argc++] = jobs;
	argv[argc] = NULL;
	for (int i = 0; i < SET_RUNS; i++) {
		fixed[i] =
		    run_ms((const char *const[]){argv[0], "scenario", "run", fixed_path, NULL});
		set[i] = run_ms(argv);
	}
	m_set = nst_median(set, SET_RUNS) / 1e3;
	m_fixed = nst_median(fixed, SET_RUNS);
	/* Every scenario's fixed cost, shared between the workers. */
	reference = m_fixed * n / SET_JOBS / 1e3;
	printf("\n\n  the scenario set (%d scenarios in %d folders, -j %d), median of %d:\n", n,
	       ndirs, SET_JOBS, SET_RUNS);
	printf("  %-44s %9.2f s\n", "nicsim scenario run FOLDERS -j 2", m_set);
	printf("  %-44s %9.2f s\n", "fixed cost x scenarios / 2 (reference)", reference);
	printf("  %-44s %9.2fx\n", "ratio", m_set / reference);
	printf("  target: the set's median at most %.0f s\n", SET_TARGET_S);
	NST_TRUE(m_set <= SET_TARGET_S);
}

static int suite_init(void)
{
	char bin[PATH_MAX], path[2 * PATH_MAX];
	const char *old = getenv("PATH");
	FILE *f;

	if (nst_suite_dir(tmp, sizeof(tmp), "bench-scn", NST_TMP_ENV))
		return -1;
	snprintf(fixed_path, sizeof(fixed_path), "%s/fixed.scn", tmp);
	f = fopen(fixed_path, "w");
	if (!f)
		return -1;
	fputs(scenario, f);
	fclose(f);
	/* The programs the scenarios start (nicsim-pingpong): this build's. */
	snprintf(bin, sizeof(bin), "%s", nst_bin("nicsim"));
	snprintf(path, sizeof(path), "%s:%s", dirname(bin), old ? old : "/usr/bin:/bin");
	return setenv("PATH", path, 1);
}

static int suite_clean(void)
{
	return nst_suite_dir_done(tmp);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"fixed_cost", test_fixed_cost},
	    {"scenario_set", test_scenario_set},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "bench_scn", tests, suite_init, suite_clean);
}

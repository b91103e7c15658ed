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
 */
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

static char tmp[128];
static char out[16384];

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
	char path[256], dir[256];
	const char *nicsim = nst_bin("nicsim");
	double scn[RUNS], nics[RUNS], m_scn, m_nics;
	FILE *f;

	snprintf(path, sizeof(path), "%s/fixed.scn", tmp);
	f = fopen(path, "w");
	NST_REQUIRE(f != NULL);
	fputs(scenario, f);
	fclose(f);
	for (int i = 0; i < RUNS; i++) {
		snprintf(dir, sizeof(dir), "%s/up%d", tmp, i);
		scn[i] = run_ms((const char *const[]){nicsim, "scenario", "run", path, NULL});
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

static int suite_init(void)
{
	if (nst_tmpdir(tmp, sizeof(tmp), "bench-scn"))
		return -1;
	return setenv("TMPDIR", tmp, 1);
}

static int suite_clean(void)
{
	nst_done_with_dir(tmp);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"fixed_cost", test_fixed_cost},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "bench_scn", tests, suite_init, suite_clean);
}

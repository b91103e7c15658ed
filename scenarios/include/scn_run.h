/*
 * Running scenarios: what `nicsim scenario run` asks of the runner.
 *
 * scn_run() checks every file first (nothing starts if one is bad: exit
 * status 2), then runs each scenario in a process of its own, at most
 * opts->jobs at a time, each in a private run directory, and prints the
 * reports (text, or TAP 14 with opts->tap) on stdout in the order of the
 * paths, and JUnit XML to opts->junit.  Returns the exit status: 0 when
 * every scenario passed, 1 when one failed (or the runner was interrupted),
 * 2 for a usage or script error.
 */
#ifndef SCN_RUN_H
#define SCN_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "scn_ast.h"

struct scn_run_opts {
	bool seed_set; /* --seed N: overrides every scenario's seed */
	uint64_t seed;
	const struct scn_defines *defs; /* -D NAME=VALUE; may be NULL */
	unsigned jobs;                  /* -j N; 0 or 1: one at a time */
	double timeout_s;               /* --timeout S: each scenario's budget; 0: the script's */
	double slow;                    /* --slow F: every time bound times F; 0: 1 */
	bool keep;                      /* --keep: keep run directories of passed scenarios too */
	bool verbose;                   /* -v: a line per step */
	bool tap;                       /* --tap */
	const char *junit;              /* --junit FILE, or NULL */
	const char *agent;    /* nicsim-agent to use; NULL: beside this program, else PATH */
	const char *dir;      /* --dir D: run directories below D; NULL: $TMPDIR, else /tmp */
	uint64_t capture_max; /* --capture-max SIZE: capture.pcapng's limit; 0: 64 MiB */
};

/* Run the scenarios of npaths files (a directory: every *.scn below it,
 * sorted: scn_find_files).  Returns the exit status. */
int scn_run(const char *const *paths, size_t npaths, const struct scn_run_opts *opts);

#endif /* SCN_RUN_H */

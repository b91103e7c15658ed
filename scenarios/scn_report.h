/*
 * What the runner reports about each scenario, and how: the outcome of one
 * run (filled in by the process that ran the scenario and handed to the
 * parent whole, so that scenarios run in parallel never interleave their
 * output), and the three forms it is printed in: text for people, TAP 14
 * on stdout, and JUnit XML.  Private to scenarios/.
 */
#ifndef SCN_REPORT_H
#define SCN_REPORT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "scn_ast.h"

#define SCN_OUT_TEXT 1024
#define SCN_OUT_LONG 4096
#define SCN_PGIDS_MAX 64  /* programs whose process groups the runner ends if the scenario dies */
#define SCN_STEPS_MAX 512 /* steps recorded for -v and TAP subtests; later ones are counted */

enum scn_status {
	SCN_PASSED = 0,
	SCN_FAILED = 1,
	SCN_BROKEN = 2,  /* a script error: nothing was started */
	SCN_NOT_RUN = 3, /* never started: the runner was interrupted first */
};

/* One step as run: for `-v` and TAP subtests. */
struct scn_step_rec {
	char at[96]; /* "line N", or "file:line" in an included file */
	bool ok;
	uint64_t start_ns; /* since the scenario started */
	uint64_t dur_ns;
	char text[160];
};

struct scn_outcome {
	enum scn_status status;
	uint64_t seed;
	uint64_t elapsed_ns;
	char path[PATH_MAX]; /* the scenario file as given */
	char title[256];
	char at[SCN_OUT_TEXT];      /* "file:line" of the failure, "" if none */
	char step[SCN_OUT_TEXT];    /* the failing step's text */
	char message[SCN_OUT_TEXT]; /* what failed, one line */
	char wanted[SCN_OUT_LONG];  /* expected, a line per field */
	char found[SCN_OUT_LONG];   /* actual, a line per field */
	char detail[SCN_OUT_LONG];  /* more: a hex diff, snapshots, a warning */
	char notes[SCN_OUT_LONG];   /* notes printed whatever the result (settle, at +T) */
	char work_dir[PATH_MAX];    /* the run directory, from the moment it exists */
	bool complete;              /* the process running the scenario filled it all in */
	/* The process groups of the programs running now (0: none), for the
	 * runner to end if the process running the scenario dies first. */
	int32_t pgids[SCN_PGIDS_MAX];
	char run_dir[PATH_MAX];   /* kept (failure or --keep); "" when removed */
	char files[SCN_OUT_TEXT]; /* the artefacts in it: logs, capture, decisions (by name) */
	uint32_t nsteps;          /* steps run */
	uint32_t nrecs;           /* of them in recs */
	struct scn_step_rec recs[SCN_STEPS_MAX];
};

/* What the reports need of the command line. */
struct scn_report_opts {
	bool verbose;
	bool tap;
	const char *junit;              /* a file, or NULL */
	const struct scn_defines *defs; /* -D NAME=VALUE; may be NULL */
	bool seed_given; /* --seed on the command line (the replay command has it anyway) */
	double slow;
	double timeout_s; /* --timeout, 0 if not given */
};

/*
 * in made visible, into out[0..size) (always NUL-terminated, cut at a
 * character's end): control characters other than '\n' and '\t' (ESC, BEL,
 * NUL written as "\0" by the runner, DEL) become \xHH, bytes that are not
 * valid UTF-8 \xHH, C1 controls and U+FFFE, U+FFFF \uHHHH; the rest is
 * kept.  Every report writes what a scenario or a program brings in (a
 * title, output) this way, on a terminal, in TAP and in XML alike.
 * Returns the length written.
 */
size_t scn_visible(const char *in, char *out, size_t size);

/* Record a failure in o (the first one only: later ones are ignored). */
void scn_outcome_fail(struct scn_outcome *o, const char *at, const char *step, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Append a line to one of o's multi-line fields (wanted, found, detail,
 * notes), cut at its size. */
void scn_outcome_add(char *field, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * A hex diff of want and got (len bytes each, at offset base of their
 * buffer): the lines of 16 bytes that differ, with their offsets, expected
 * beside actual, at most 8 lines, then how many more bytes differ.  Into
 * out (always NUL-terminated).  Returns the number of bytes that differ.
 */
/* The bytes in which want and got differ. */
size_t scn_diff_count(const uint8_t *want, const uint8_t *got, size_t len);

/* scn_hexdiff's text for a piece want/got[0..len) at offset base of a
 * larger range of total bytes, in which diff bytes differ ("at least" diff
 * when at_least: not every piece was read).  The rows shown come from
 * this piece, which holds the range's first difference. */
void scn_hexdiff_rows(const uint8_t *want, const uint8_t *got, size_t len, uint64_t base,
		      uint64_t diff, uint64_t total, bool at_least, char *out, size_t size);

size_t scn_hexdiff(const uint8_t *want, const uint8_t *got, size_t len, uint64_t base, char *out,
		   size_t size);

/* The command that replays o: "nicsim scenario run PATH --seed N -D ...". */
void scn_replay_cmd(const struct scn_outcome *o, const struct scn_report_opts *ro, char *buf,
		    size_t size);

/* The text report of one scenario (the seed first), on f. */
void scn_report_text(FILE *f, const struct scn_outcome *o, const struct scn_report_opts *ro);

/* TAP 14: the version and plan, then one test point per scenario (number
 * n, from 1), with a subtest of its steps under -v. */
void scn_report_tap_begin(FILE *f, size_t count);
void scn_report_tap(FILE *f, size_t n, const struct scn_outcome *o,
		    const struct scn_report_opts *ro);

/* The summary line: how many passed and failed, and the time. */
void scn_report_summary(FILE *f, const struct scn_outcome *const *o, size_t n, uint64_t elapsed_ns,
			bool tap);

/* Where --junit FILE is written: a symlink is followed (to its resolved
 * target, which may not exist yet); *in_place is set when the target
 * exists and is not a regular file (a device, a FIFO), which is opened and
 * written, never replaced.  Refused (with why, a sentence for the user):
 * an empty path, a directory, a target whose directory does not exist or
 * is not a directory.  0 or a negative errno. */
int scn_report_junit_target(const char *path, char *target, size_t size, bool *in_place, char *why,
			    size_t wsize);

/* Write the JUnit XML file for every outcome: a regular file (or a new
 * one) atomically, by a rename beside its target; a device or a FIFO in
 * place.  0 or a negative errno. */
int scn_report_junit(const char *path, const struct scn_outcome *const *o, size_t n,
		     const struct scn_report_opts *ro);

#endif /* SCN_REPORT_H */

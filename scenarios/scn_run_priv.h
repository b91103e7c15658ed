/*
 * The runner's state while one scenario runs, shared by scn_run.c (the
 * event loop, hosts, programs and steps), scn_fault.c (faults) and
 * scn_expect.c (expectations and waits).  Private to scenarios/.
 *
 * One process runs one scenario (the parent of `nicsim scenario run` forks
 * one per scenario, so that -j N runs them side by side and each has its
 * own signals, children and run directory).  Everything happens in one
 * event loop, scn_loop_until(): poll() on a signalfd (SIGINT, SIGTERM), the
 * capture's eventfd, each agent's channel and pidfd, each program's output
 * pipe and pidfd, and each NIC's pidfd, with a timeout bounded by the
 * nearest deadline, fault timer or counter re-read.  A step starts what it
 * does, then waits in that loop for its condition (a reply, an exit, a
 * counter, a frame) or its deadline; replies of operations started with `&`
 * are collected whatever step is waiting.
 */
#ifndef SCN_RUN_PRIV_H
#define SCN_RUN_PRIV_H

#include <regex.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "fab.h"
#include "scn_ast.h"
#include "scn_report.h"
#include "scn_run.h"
#include "scn_topo.h"

struct scn_agent;

#define SCN_RT_DESC_MAX 256 /* bytes of a descriptor the runner carries */

/* A host: a built-in agent, spawned or forked. */
struct scn_rt_host {
	char name[SCN_NAME_MAX];
	struct scn_nicd *nic;
	struct scn_agent *agent;
	pid_t pid;
	int pidfd;         /* spawned agents: readable once it exited; -1 otherwise */
	bool gone;         /* it takes no more calls: exited, or its channel closed */
	bool exited;       /* it has ended, and status says how */
	bool killed;       /* by the scenario (`kill h1`) */
	int status;        /* wait status once exited, else -1 */
	long long fork_id; /* forked: the fork request's id in the parent */
	struct scn_rt_host *parent;
};

/* A `wait P output` or `expect P output` step's text or ERE, matched
 * against each line of P's output as it comes (scn_rt_prog). */
struct scn_rt_watch {
	const struct scn_stmt *st;
	regex_t re;    /* st's ERE compiled (when it is one and compiled) */
	bool compiled; /* re holds it */
	bool hit;      /* a line of the program's current run matched */
};

/* A program of the scenario (`program NAME on NIC "command"`). */
struct scn_rt_prog {
	const struct scn_stmt *decl;
	struct scn_nicd *nic;
	pid_t pid; /* also its process group */
	int pidfd;
	int out_fd; /* its stdout and stderr */
	int log_fd; /* prog-NAME.log in the run directory */
	/* What it wrote, for `wait/expect P output` and the report: the first
	 * SCN_OUT_HEAD bytes (out) and the latest SCN_OUT_TAIL or so (tail),
	 * each NUL-terminated, a NUL byte it wrote kept as the two characters
	 * "\\0" so that what follows stays visible; dropped counts the bytes
	 * between the two that are no longer kept. */
	char *out;
	size_t outlen, outcap;
	bool head_full;
	char *tail;
	size_t taillen, tailcap;
	uint64_t dropped;
	/* What the scenario's `wait P output` and `expect P output` steps
	 * look for, known from the script before the program starts: each
	 * line it writes is matched against those not found yet as the line
	 * ends, so that none goes unseen, kept or not; the line not ended yet
	 * (part) is looked at by the step itself; a line longer than part is
	 * matched in pieces. */
	struct scn_rt_watch *watches;
	size_t nwatches;
	char part[4096];
	size_t partlen;
	uint64_t logged, unlogged; /* bytes written to its log, and cut from it */
	bool started, exited;
	bool killed;                        /* by a `kill P` step since it started */
	bool exit_waited;                   /* a `wait P exit` step has looked at its end */
	int status;                         /* its wait status once exited */
	uint64_t exit_ns;                   /* when the runner saw it exit */
	const struct scn_stmt *exit_during; /* the step running then (NULL: set-up) */
};

/* An operation: a host call, pending or done. */
struct scn_rt_op {
	char name[SCN_NAME_MAX]; /* `-> NAME`, "" if none */
	const struct scn_stmt *st;
	struct scn_rt_host *host;
	long long id;
	bool replied; /* a first reply came (pending or final) */
	bool done;
	bool bad;                 /* the agent refused the request */
	char code[40];            /* "" for ok, else the error's name */
	char reply[SCN_OUT_TEXT]; /* the final reply's k=v words (or bad's text) */
	uint64_t end_ns;
	bool collected; /* a `wait NAME` (or the step itself) has checked it */
};

/* A descriptor carried between hosts by name. */
struct scn_rt_desc {
	char name[SCN_NAME_MAX];
	uint8_t bytes[SCN_RT_DESC_MAX];
	size_t len;
};

/* A copy of part of a buffer, taken right after a step of its host wrote
 * there (scn_mem_snapshot). */
struct scn_rt_snap {
	const struct scn_stmt *st; /* the step */
	uint64_t off, len;
	uint8_t *bytes;
};

/*
 * A buffer of a host, and what the runner expects it to hold: its fill,
 * overlaid by the copies taken after the host's own steps that wrote into
 * it, oldest first (what `unchanged` compares with).
 */
struct scn_rt_buf {
	char name[SCN_NAME_MAX];
	struct scn_rt_host *host;
	uint64_t size;
	struct scn_pattern fill; /* what it was filled with */
	struct scn_rt_snap *snaps;
	size_t nsnaps;
	const struct scn_stmt *snap_lost; /* a step after which no copy could be taken */
};

/* A registration handle, by value: passed as a number to another host. */
struct scn_rt_handle {
	char name[SCN_NAME_MAX];
	struct scn_rt_host *host;
	uint64_t value;
};

/* `mark NAME`: every NIC's counters then. */
struct scn_rt_mark {
	char name[SCN_NAME_MAX];
	struct nic_stats *stats; /* one per NIC, index as topo.nics */
	bool *have;
	uint64_t realtime_ns; /* CLOCK_REALTIME when taken, as refusal records say */
};

/* A fault of the scenario (scn_fault.c). */
enum scn_rt_fault_state {
	SCN_RF_WAITING = 0, /* `after` or `at`: not armed yet */
	SCN_RF_ARMED,
	SCN_RF_HEALED,
};

struct scn_rt_fault {
	const struct scn_stmt *st;
	enum scn_rt_fault_state state;
	uint32_t src[2], dst[2];
	size_t nlinks;
	uint64_t arm_at_ns;     /* AT: when to arm */
	uint64_t heal_at_ns;    /* FOR_TIME: when to heal; 0 otherwise */
	uint64_t frames0[2];    /* FOR_FRAMES: link frames when armed */
	uint64_t hits0[2];      /* the rule's counters when armed */
	uint64_t hits;          /* the rule's counter moves while armed */
	uint64_t frames_before; /* FOR_FRAMES: frames counted on an earlier fabric */
	uint64_t armed_seq;     /* the order faults began in (scn_fault.c) */
	bool ever_armed;
	struct fab_link_config cfg; /* its words, parsed once when its step ran */
	uint32_t fields;            /* the fields (FAB_LF_*) its words name */
};

/* A link a fault has touched: its settings without any fault, taken when
 * the first fault on it began.  Its settings at any time are these plus
 * every fault armed on it, in the order they began: armed lists them (as
 * indices into the runner's faults), so that arming or healing costs the
 * faults on this link, not every fault of the scenario. */
struct scn_rt_link {
	uint32_t src, dst;
	struct fab_link_config base;
	struct fab_link_config cur; /* base and the armed faults: what the fabric has */
	size_t *armed;
	size_t narmed, cap_armed;
};

struct scn_runner {
	const struct scn_script *script;
	const struct scn_run_opts *opts;
	struct scn_outcome *out;
	struct scn_topo topo;
	double slow;
	uint64_t t0, deadline;
	int sigfd;
	bool interrupted;
	int signo;
	char agent_path[4096];
	char *prog_path;            /* PATH of the programs (run_scenario), NULL: the runner's */
	const struct scn_stmt *cur; /* the step running */
	uint64_t step_t0;

	struct scn_rt_host *hosts;
	size_t nhosts, cap_hosts;
	struct scn_rt_prog *progs;
	size_t nprogs;
	struct scn_rt_op *ops;
	size_t nops, cap_ops;
	struct scn_rt_desc *descs;
	size_t ndescs, cap_descs;
	struct scn_rt_buf *bufs;
	size_t nbufs, cap_bufs;
	struct scn_rt_handle *handles;
	size_t nhandles, cap_handles;
	struct scn_rt_mark *marks; /* marks[0]: the scenario's start */
	size_t nmarks, cap_marks;
	struct scn_rt_fault *faults;
	size_t nfaults, cap_faults;
	struct scn_rt_link *links; /* the links faults touched */
	size_t nlinks, cap_links;
	uint64_t fault_seq;
	size_t frame_cursor; /* `wait frame` looks at frames from here on */
	bool counter_poll;   /* a wait re-reads counters: bound the poll timeout */
	uint64_t counter_next_ns, counter_gap_ns;
};

/* A condition a step waits for: true when it holds.  It may fail the
 * scenario (scn_outcome_fail) and return true to end the wait. */
typedef bool (*scn_cond_fn)(struct scn_runner *r, void *arg);

/*
 * Run the event loop until cond holds (cond NULL: until the deadline), the
 * deadline (CLOCK_MONOTONIC ns) passes, or a signal asks the runner to end.
 * Returns 0 when cond held, -ETIMEDOUT, or -EINTR.
 */
int scn_loop_until(struct scn_runner *r, scn_cond_fn cond, void *arg, uint64_t deadline);

/* The deadline of the current step: `within T` or the default, times
 * --slow, never past the scenario's. */
uint64_t scn_step_deadline(const struct scn_runner *r, const struct scn_stmt *st);

/* now + ns * slow in ns, saturated at UINT64_MAX (never wrapping past it):
 * the moment a scaled time bound ends. */
uint64_t scn_after_ns(uint64_t now, uint64_t ns, double slow);

/* Fail the scenario at statement st: "file:line", its text, and message. */
void scn_fail(struct scn_runner *r, const struct scn_stmt *st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Names. */
struct scn_nicd *scn_rt_nic(struct scn_runner *r, const char *name);
struct scn_rt_host *scn_rt_host(struct scn_runner *r, const char *name);
struct scn_rt_prog *scn_rt_prog(struct scn_runner *r, const char *name);
struct scn_rt_op *scn_rt_op(struct scn_runner *r, const char *name);
struct scn_rt_desc *scn_rt_desc(struct scn_runner *r, const char *name);
struct scn_rt_buf *scn_rt_buf(struct scn_runner *r, const char *name);

/* Snapshot every NIC's counters as mark name ("" for the start). */
int scn_rt_mark_take(struct scn_runner *r, const char *name, const struct scn_stmt *st);

/* ---- scn_fault.c --------------------------------------------------------- */

/* A `fault` statement: armed now, or registered for later. */
int scn_fault_step(struct scn_runner *r, const struct scn_stmt *st);
/* `heal NAME`. */
int scn_fault_heal_step(struct scn_runner *r, const struct scn_stmt *st);
/* Arm and heal what is due; returns the next time something is due (0: none)
 * and sets *poll_ns when a fault counts frames (the loop re-reads the link). */
uint64_t scn_fault_tick(struct scn_runner *r, uint64_t now, uint64_t *poll_ns);
/* At the end, in any case: fail for faults that never fired (when check),
 * then heal every fault. */
void scn_fault_finish(struct scn_runner *r, bool check);
/* Apply the `link` statements of the set-up. */
int scn_links_setup(struct scn_runner *r);
/*
 * Around a NIC's restart, which may replace the fabric (scn_topo_nic_start):
 * before it (renewed false), add what the armed faults' link counters moved
 * so far to their tallies and count from there; after a fabric was renewed
 * (renewed true), count from zero, the new fabric's start.
 */
void scn_fault_rebase(struct scn_runner *r, bool renewed);

/* ---- scn_expect.c -------------------------------------------------------- */

/* The waits and expectations (SCN_WAIT_COUNTER, SCN_WAIT_FRAME, SCN_SETTLE,
 * SCN_EXPECT_*): 0 when the step passed; on failure the outcome holds it. */
int scn_expect_step(struct scn_runner *r, const struct scn_stmt *st);

/* The pattern a script names, with the scenario's seed folded into random
 * ones, as the agent fills it ("seq 7"). */
void scn_pattern_words(const struct scn_runner *r, const struct scn_pattern *p, char *buf,
		       size_t size);

/*
 * Host b->host's step st has written (or may have) b[off..off+len): a
 * recv or read into it, madvise, mmap, mremap, realloc.  Keep a copy of
 * those bytes as they are now, read through the agent, for `unchanged`.
 * When no copy can be taken (too large, the host gone) later `unchanged`
 * steps on b fail and say why.
 */
void scn_mem_snapshot(struct scn_runner *r, const struct scn_stmt *st, struct scn_rt_buf *b,
		      uint64_t off, uint64_t len);

/* Forget b's copies (a new fill, the runner's end). */
void scn_mem_forget(struct scn_rt_buf *b);

/* Read len bytes at off of host h's buffer b into out (peek in chunks).  0,
 * or -EIO with the agent's answer in why. */
int scn_peek(struct scn_runner *r, struct scn_rt_host *h, const char *buf, uint64_t off,
	     uint64_t len, uint8_t *out, char *why, size_t size);

#endif /* SCN_RUN_PRIV_H */

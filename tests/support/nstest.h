/*
 * Test support for nicsim's CUnit programs: a common main, assertions that
 * print both values, a private temporary directory per test program, and
 * starting, waiting for and stopping the processes a test owns, by pid, with
 * every wait bounded.
 */
#ifndef NSTEST_H
#define NSTEST_H

#include <CUnit/Basic.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* ---- Assertions that print both sides on failure ---------------------- */

#define NST_CHECK_(cond, fatal, ...)                                                      \
	do {                                                                              \
		char nst_msg_[512];                                                       \
		snprintf(nst_msg_, sizeof(nst_msg_), __VA_ARGS__);                        \
		CU_assertImplementation((cond), __LINE__, nst_msg_, __FILE__, "", fatal); \
	} while (0)

/* Signed and unsigned integer comparisons: "a == b (got X, want Y)". */
#define NST_EQ(a, b)                                                                             \
	do {                                                                                     \
		long long nst_a_ = (long long)(a), nst_b_ = (long long)(b);                      \
		NST_CHECK_(nst_a_ == nst_b_, CU_FALSE, "%s == %s (got %lld, want %lld)", #a, #b, \
			   nst_a_, nst_b_);                                                      \
	} while (0)
#define NST_NE(a, b)                                                                            \
	do {                                                                                    \
		long long nst_a_ = (long long)(a), nst_b_ = (long long)(b);                     \
		NST_CHECK_(nst_a_ != nst_b_, CU_FALSE, "%s != %s (both %lld)", #a, #b, nst_a_); \
	} while (0)
#define NST_EQ_U(a, b)                                                                           \
	do {                                                                                     \
		unsigned long long nst_a_ = (unsigned long long)(a),                             \
				   nst_b_ = (unsigned long long)(b);                             \
		NST_CHECK_(nst_a_ == nst_b_, CU_FALSE, "%s == %s (got 0x%llx, want 0x%llx)", #a, \
			   #b, nst_a_, nst_b_);                                                  \
	} while (0)
/* Signed ordering comparisons: "a < b (got X, limit Y)". */
#define NST_CMP_(a, op, b, fatal, pre)                                                          \
	do {                                                                                    \
		long long nst_a_ = (long long)(a), nst_b_ = (long long)(b);                     \
		NST_CHECK_(nst_a_ op nst_b_, fatal, pre "%s " #op " %s (got %lld, limit %lld)", \
			   #a, #b, nst_a_, nst_b_);                                             \
	} while (0)
#define NST_LT(a, b) NST_CMP_(a, <, b, CU_FALSE, "")
#define NST_LE(a, b) NST_CMP_(a, <=, b, CU_FALSE, "")
#define NST_GT(a, b) NST_CMP_(a, >, b, CU_FALSE, "")
#define NST_GE(a, b) NST_CMP_(a, >=, b, CU_FALSE, "")
#define NST_TRUE(c) NST_CHECK_((c), CU_FALSE, "%s", #c)
/* Fatal variants end the test function at once. */
#define NST_REQUIRE(c) NST_CHECK_((c), CU_TRUE, "required: %s", #c)
#define NST_REQUIRE_EQ(a, b)                                                                      \
	do {                                                                                      \
		long long nst_a_ = (long long)(a), nst_b_ = (long long)(b);                       \
		NST_CHECK_(nst_a_ == nst_b_, CU_TRUE, "required: %s == %s (got %lld, want %lld)", \
			   #a, #b, nst_a_, nst_b_);                                               \
	} while (0)

#define NST_REQUIRE_GT(a, b) NST_CMP_(a, >, b, CU_TRUE, "required: ")
#define NST_REQUIRE_GE(a, b) NST_CMP_(a, >=, b, CU_TRUE, "required: ")
#define NST_REQUIRE_LT(a, b) NST_CMP_(a, <, b, CU_TRUE, "required: ")

/* ---- Main --------------------------------------------------------------- */

struct nst_test {
	const char *name;
	void (*fn)(void);
};

/*
 * One suite: tests (the array ends with {NULL, NULL}), init/clean run once
 * around the suite, setup/teardown around every test (assertions made in
 * teardown count for that test).  Any of the four may be NULL.
 */
struct nst_suite {
	const char *name;
	const struct nst_test *tests;
	int (*init)(void);
	int (*clean)(void);
	void (*setup)(void);
	void (*teardown)(void);
};

/*
 * Runs a suite with CUnit's basic interface in verbose mode.  Returns the
 * exit status for main: 0 only if every test ran and passed and the suite's
 * init and clean succeeded.  A command-line argument selects the tests whose
 * name contains it.
 */
int nst_run_suite(int argc, char **argv, const struct nst_suite *suite);

/* nst_run_suite without per-test setup and teardown. */
int nst_main(int argc, char **argv, const char *suite, const struct nst_test *tests,
	     int (*init)(void), int (*clean)(void));

/* ---- Files and processes ------------------------------------------------ */

/* A new private (0700) directory under $TMPDIR or /tmp; path in buf.  With
 * NICSIM_CAPTURE set, a capture follows it (nstcapture.h). */
int nst_tmpdir(char *buf, size_t size, const char *tag);
/*
 * nst_run_suite starts a guard process that, when the test program ends in
 * any way (SIGKILL included), kills every process naming one of the
 * program's run directories (--dir DIR, or NICSIM_DIR=DIR in its
 * environment), DIR itself or below it: daemons `nicsim up` started too.
 * nst_tmpdir registers its directories; nst_guard_dir registers another.
 * The children nst_start_nic, nst_run, nst_fork and nst_fork_ready make
 * get SIGKILL when the thread that made them ends (PR_SET_PDEATHSIG).
 */
void nst_guard_dir(const char *dir);
/* The guard also removes network namespace name (/run/netns/name) if it is
 * still there when the test ends (nstnet.h). */
void nst_guard_netns(const char *name);

/* Remove a directory tree made by nst_tmpdir (best effort). */
void nst_rmtree(const char *dir);

/* At the end of a suite: remove dir if every assertion passed, else keep it
 * (logs, captures) and say where it is. */
void nst_done_with_dir(const char *dir);

/*
 * A suite's private working directory: nst_tmpdir(tag) into buf, then, as
 * how asks, made the current directory (NST_TMP_CWD) and the TMPDIR of this
 * program and what it starts (NST_TMP_ENV: the scenario runner's run
 * directories then go below it).  0, or -1.  nst_suite_dir_done undoes it
 * at the suite's end: back to "/", then nst_done_with_dir.
 */
enum { NST_TMP_CWD = 1, NST_TMP_ENV = 2 };
int nst_suite_dir(char *buf, size_t size, const char *tag, unsigned how);
int nst_suite_dir_done(const char *dir);

/* Path of a nicsim binary (nicsimd, nicsim, ...): $NICSIM_BIN_DIR or the build's bin/. */
const char *nst_bin(const char *name);

/*
 * A "Name: N kB" field of /proc/<pid>/status (pid 0: this process), such as
 * "VmLck" or "VmRSS", in KiB; -1 if it cannot be read.
 */
long nst_proc_status_kib(pid_t pid, const char *field);

/* Descriptors process pid (0: this process) holds open (entries of
 * /proc/<pid>/fd, the one reading them not counted), or -1. */
int nst_fd_count(pid_t pid);

/* Fill n bytes with a pattern drawn from seed (xorshift), for data checks. */
void nst_fill(void *buf, size_t n, uint32_t seed);

/* A checksum of n bytes (FNV-1a), to compare buffers too big to print. */
uint32_t nst_sum32(const void *buf, size_t n);

/* For qsort: doubles, uint64_t. */
int nst_cmp_double(const void *a, const void *b);
int nst_cmp_u64(const void *a, const void *b);
/* The median of n values (n > 0), sorting them in place. */
double nst_median(double *v, size_t n);
double nst_median_u64(uint64_t *v, size_t n);

/* splitmix64: the next number from *state (any seed); a fixed seed makes a
 * randomized test the same on every run. */
uint64_t nst_splitmix64(uint64_t *state);

/*
 * One process_vm_readv of len bytes from src to dst, both in this process:
 * the benchmarks' reference copy.  0, or -errno (-EIO for a short copy),
 * the failure printed: a reference that could not be measured must end
 * the benchmark, not turn into a ratio.
 */
int nst_pvr_self(void *dst, const void *src, size_t len);

/*
 * Same-run references for benchmarks: the median time of one copy of len
 * bytes from src to dst by memcpy and by process_vm_readv (of this process),
 * over rounds copies, in nanoseconds.  0, -EINVAL (no rounds), -ENOMEM, or
 * nst_pvr_self's error.
 */
int nst_copy_refs(const void *src, void *dst, size_t len, unsigned rounds, double *memcpy_ns,
		  double *pvr_ns);

/* Monotonic clock in nanoseconds. */
uint64_t nst_now_ns(void);

/* Sleep ms milliseconds: a pause that is itself what is tested, or the
 * back-off of a bounded wait (never a synchronisation). */
void nst_sleep_ms(int ms);

/*
 * Wait until done(arg) is true, asking it first at once and then every
 * pause_ms, for at most timeout_ms: the wait for a condition that has no
 * event to wait on.  Returns done's last answer, so false means the deadline
 * passed without it.
 */
bool nst_wait_until(bool (*done)(void *arg), void *arg, int timeout_ms, int pause_ms);

/*
 * Start nicsimd in dir with address addr (dotted quad) and extra arguments
 * (NULL-terminated list, may be NULL); stderr goes to dir/nic-<addr>.log.
 * Waits up to timeout_ms until the NIC accepts attaches (and every other
 * NIC that an "--addr" of extra gives it to serve).  Returns the pid or a
 * negative errno (-ETIMEDOUT; the child is then stopped).
 */
pid_t nst_start_nic(const char *dir, const char *addr, const char *const *extra, int timeout_ms);
/* nst_start_nic in network namespace netns (nstnet.h; NULL: this one). */
pid_t nst_start_nic_in(const char *netns, const char *dir, const char *addr,
		       const char *const *extra, int timeout_ms);
/*
 * nst_start_nic of a nicsimd that can never hold capability cap (CAP_*):
 * dropped from its bounding set before exec, so that root's nicsimd runs
 * without it as an unprivileged user's would (another user's nicsimd gets
 * no capability at exec anyway).  Fails with -ECHILD when root cannot drop
 * it (the reason is in the NIC's log).
 */
pid_t nst_start_nic_without(const char *dir, const char *addr, const char *const *extra, int cap,
			    int timeout_ms);

/*
 * Stop a process this test started: SIGTERM, wait up to timeout_ms, then
 * SIGKILL and reap.  Returns the wait status, or -1 if it was not our child.
 */
int nst_stop(pid_t pid, int timeout_ms);

/*
 * nst_stop for a NIC the test started: true if it exited 0 (it survived the
 * test and stopped cleanly on SIGTERM); otherwise says how it ended.
 */
bool nst_stop_clean(pid_t pid, int timeout_ms);

/*
 * A suite's clean-up of the NICs it started: nst_stop_clean on each of
 * pids[0..n) (every one, even after one failed).  If all stopped cleanly,
 * dir is done with (nst_done_with_dir) and 0 is returned; otherwise dir is
 * kept, stderr says where its logs are, and -1 is returned.
 */
int nst_stop_nics_clean(const char *dir, const pid_t *pids, size_t n, int timeout_ms);

/* Reap pid, waiting up to timeout_ms; returns the wait status or -ETIMEDOUT. */
int nst_wait(pid_t pid, int timeout_ms);

/*
 * Wait up to timeout_ms until thread tid of this process sleeps in the
 * kernel (state S or D in /proc), as a thread does once it blocks in a call
 * that waits: a test makes sure its waiter waits before it acts.  0, or
 * -ETIMEDOUT (the thread kept running), or -ESRCH (it ended).
 */
int nst_wait_blocked(pid_t tid, int timeout_ms);

/* True if pid exists and is not a zombie. */
bool nst_pid_alive(pid_t pid);

/*
 * Keep pid (0: the caller) on the cpu-th (modulo their number) of the CPUs
 * it may use, for benchmarks that measure two processes each on its own
 * core: left to itself the scheduler sometimes puts both on one for tens of
 * milliseconds after a wake-up.  0 or a negative errno.
 */
int nst_pin(pid_t pid, unsigned cpu);

/* True if pid's program name is nicsimd. */
bool nst_pid_is_nicsimd(pid_t pid);

/* The pid in a pid file, or 0. */
pid_t nst_read_pid_file(const char *path);

/*
 * Stop daemons a test did not start itself (nicsim up starts them): each
 * pid of pids[0..n) that is still a live nicsimd gets SIGKILL, and the wait
 * for it to go is bounded by timeout_ms.  Entries are zeroed.  Says on
 * stderr which it had to kill, naming the test `who`.
 */
void nst_kill_nicsimds(pid_t *pids, size_t n, int timeout_ms, const char *who);

/*
 * Run argv (argv[0] a path), capturing stdout and stderr together into out
 * (NUL-terminated, truncated to size).  Kills it after timeout_ms.  Returns
 * the exit code, 128 + signal if it was killed, or a negative errno.
 */
int nst_run(const char *const *argv, char *out, size_t size, int timeout_ms);

/*
 * nst_run of the program at path bin with the NULL-terminated args (at most
 * 62 are passed), then print the command as "$ name args...", its result
 * and its output, so that a test's log shows what it ran and saw.
 */
int nst_run_shown(const char *bin, const char *name, const char *const *args, char *out,
		  size_t size, int timeout_ms);

/*
 * Start argv (argv[0] a path) in the background with env's "NAME=VALUE"
 * entries (NULL-terminated; env itself may be NULL) added to its
 * environment; its stdout and stderr both go to a pipe whose read end is
 * *out_fd.  Returns the pid (end it with nst_wait or nst_stop), or a
 * negative errno.
 */
pid_t nst_spawn_output(const char *const *argv, const char *const *env, int *out_fd);

/*
 * Read fd into buf (kept NUL-terminated; *len counts what it holds) until
 * what appears in it or, with what NULL, until fd ends; true then.  False
 * when ms pass first, buf fills, or fd ends before what appeared.
 */
bool nst_read_until(int fd, char *buf, size_t size, size_t *len, const char *what, int ms);

/*
 * Fork a child that runs fn(arg) and exits with its return value; the
 * child's exit status is collected with nst_wait.  Returns the pid.
 */
pid_t nst_fork(int (*fn)(void *), void *arg);

/*
 * Fork a child that runs fn(arg, ready_fd) and return once it has written a
 * byte to ready_fd (bounded by timeout_ms), e.g. when it listens.  Returns
 * the pid, or a negative errno (the child is then killed and reaped).
 */
pid_t nst_fork_ready(int (*fn)(void *arg, int ready_fd), void *arg, int timeout_ms);

struct fab;
struct fab_port_info;

/* What the fabric reports of the port bound to addr (all zero if none is):
 * its state and counters.  The listing itself must succeed (fatal). */
struct fab_port_info nst_fab_port(struct fab *fab, uint32_t addr);

/* Frames free in the fabric's pool now (reading it must succeed: fatal). */
uint32_t nst_fab_frames_free(struct fab *fab);

#endif /* NSTEST_H */

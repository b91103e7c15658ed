/*
 * `nicsim scenario run` end to end: small scenarios written here run with
 * real NICs, host agents and the capture, in run directories under this
 * suite's private directory (TMPDIR points there, so the suite's guard ends
 * anything left behind).  Each test checks the runner's exit status and the
 * words of its report: a passing RDMA write, a memory expectation that
 * fails with a hex diff, `unchanged` after the host's own writes, a fault
 * that never fired, a timeout that names the wait, programs as hosts with
 * a NIC restarted, every NIC restarted (a new fabric), SIGTERM
 * mid-scenario leaving no process and no run directory, the process of a
 * scenario killed outright leaving no process either, the shapes of TAP
 * and JUnit, and two runs with one seed making the same fault decisions.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nstest.h"

#define RUN_MS 120000  /* bound on one `nicsim scenario run` */
#define START_MS 30000 /* bound on a scenario reaching its waiting step */
#define GONE_MS 10000  /* bound on the runner ending after SIGTERM */
#define MAX_PIDS 16
#define P 256  /* a path below tmp */
#define W 400  /* a line a test looks for */
#define D 1024 /* a path below a directory of the runner */

static char tmp[128];
static char out[1 << 17];

/* ---- Helpers ------------------------------------------------------------------ */

static void write_file(const char *name, const char *text, char *path, size_t size)
{
	FILE *f;

	snprintf(path, size, "%s/%s", tmp, name);
	f = fopen(path, "w");
	NST_REQUIRE(f != NULL);
	fputs(text, f);
	fclose(f);
}

static int scn_run(const char *const *args)
{
	return nst_run_shown(nst_bin("nicsim"), "nicsim", args, out, sizeof(out), RUN_MS);
}

#define SCN(...) scn_run((const char *const[]){"scenario", "run", __VA_ARGS__, NULL})
#define OUT_HAS(text) NST_CHECK_(strstr(out, (text)) != NULL, CU_FALSE, "output has \"%s\"", (text))

/* The two-host set-up every scenario here starts with: h1 listens on a,
 * h2 connects from b, and h1 exposes a buffer x to h2 as descriptor d. */
#define TWO_HOSTS            \
	"nic a 198.18.0.1\n" \
	"nic b 198.18.0.2\n" HOSTS

/* The hosts and calls of TWO_HOSTS, after its NICs. */
#define HOSTS                                     \
	"host h1 on a\n"                          \
	"host h2 on b\n"                          \
	"h1: startup\n"                           \
	"h2: startup\n"                           \
	"h1: socket -> s\n"                       \
	"h1: bind s a 7000\n"                     \
	"h1: listen s\n"                          \
	"h1: accept s -> c1 &\n"                  \
	"h2: socket -> t\n"                       \
	"h2: bind t b 0\n"                        \
	"h2: connect t a 7000\n"                  \
	"wait c1\n"                               \
	"h1: buffer x 64KiB fill zero\n"          \
	"h1: register-rdma c1 x readwrite -> d\n" \
	"h2: buffer y 64KiB fill seq 9\n"         \
	"h2: register t y -> hy\n"

static const char write_ok[] = "# an RDMA write lands intact\n"
			       "seed 7\n" TWO_HOSTS "h2: write t y[0..64KiB] d[0] -> w1\n"
			       "expect h1 x[0..64KiB] == seq 9\n"
			       "expect counter a.conn_established delta >= 1\n";

/* The kept run directory a report names ("  kept DIR" or "  kept: DIR (...)"). */
static bool kept_dir(char *dir, size_t size)
{
	const char *p = strstr(out, "  kept");

	if (!p)
		return false;
	p += 6;
	p += strspn(p, ": ");
	snprintf(dir, size, "%.*s", (int)strcspn(p, " \n"), p);
	return dir[0] == '/';
}

static bool read_all(const char *path, char *buf, size_t size)
{
	ssize_t n;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return false;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return false;
	buf[n] = '\0';
	return true;
}

/* ---- Tests -------------------------------------------------------------------- */

static void test_write_passes(void)
{
	char path[P];

	write_file("write-ok.scn", write_ok, path, sizeof(path));
	NST_EQ(SCN(path, "-v"), 0);
	OUT_HAS("seed 7 (replay: nicsim scenario run ");
	OUT_HAS("PASS ");
	OUT_HAS("h2: write t y[0..64KiB] d[0] -> w1");
	OUT_HAS("1 scenario: 1 passed, 0 failed");
}

/*
 * `unchanged` wants what the host's own steps left: the bytes a recv and a
 * madvise wrote count as written, while a peer's RDMA write outside what
 * the script expects is a change.
 */
static void test_unchanged_follows_own_writes(void)
{
	char path[P], at[W];

	write_file("unchanged.scn",
		   "# unchanged follows the host's own writes\n"
		   "seed 3\n" TWO_HOSTS "h1: register c1 x -> hx\n"
		   "h1: recv c1 x[0..100] -> r1 &\n"
		   "h2: send t y[0..100]\n"
		   "wait r1\n"
		   "expect h1 x unchanged\n"
		   "expect h1 x[0..100] == h2 y[0..100]\n"
		   "h1: buffer z 64KiB fill seq 5\n"
		   "h1: madvise z[60KiB..64KiB] dontneed\n"
		   "expect h1 z unchanged\n"
		   "h2: write t y[0..4KiB] d[4KiB]\n"
		   "expect h1 x[8KiB..] unchanged\n"
		   "expect h1 x[4KiB..8KiB] unchanged\n",
		   path, sizeof(path));
	NST_EQ(SCN(path, "-v"), 1);
	OUT_HAS("ok   line 25   expect h1 x unchanged");
	OUT_HAS("ok   line 29   expect h1 z unchanged");
	OUT_HAS("ok   line 31   expect h1 x[8KiB..] unchanged");
	snprintf(at, sizeof(at), "%s:32: expect h1 x[4KiB..8KiB] unchanged\n", path);
	OUT_HAS(at);
	OUT_HAS("h1 x[4096..8192] does not hold zero");
}

static void test_memory_diff(void)
{
	char path[P], at[W];

	write_file("mem-bad.scn",
		   "# the expected pattern is not what was written\n"
		   "seed 3\n" TWO_HOSTS "h2: write t y[0..4KiB] d[4KiB]\n"
		   "expect h1 x[4KiB..8KiB] == seq 8\n",
		   path, sizeof(path));
	NST_EQ(SCN(path), 1);
	snprintf(at, sizeof(at), "%s:22: expect h1 x[4KiB..8KiB] == seq 8", path);
	OUT_HAS(at);
	OUT_HAS("FAIL ");
	OUT_HAS("512 of 4096 bytes differ, the first at offset 0x1004");
	OUT_HAS("  offset      expected");
	OUT_HAS("  0x00001000  00 00 00 00 08 00 00 00 01 00 00 00 08 00 00 00 | "
		"00 00 00 00 09 00 00 00 01 00 00 00 09 00 00 00\n");
	OUT_HAS("more differing bytes");
	OUT_HAS("replay: nicsim scenario run ");
	OUT_HAS("--seed 3");
}

/* A refusal expected but not recorded: the report lists the ones the NIC
 * recorded, their reasons spelt as the language spells them. */
static void test_refusal_reason_spelling(void)
{
	char path[P];

	write_file("refusal.scn",
		   "# a refusal of another reason\n"
		   "seed 11\n" TWO_HOSTS "desc forged = d with rkey 0x00001234\n"
		   "h2: write t y[0..4KiB] forged[0] = WSAECONNRESET\n"
		   "wait frame a -> b opcode ACK syndrome NAK-REMOTE-ACCESS within 5s\n"
		   "expect refusal a reason bad-state from b\n",
		   path, sizeof(path));
	NST_EQ(SCN(path), 1);
	OUT_HAS("NIC a recorded no refusal bad-state from b");
	OUT_HAS("refusal: reason stale-key, requester 198.18.0.2");
}

/* `since MARK` counts only the refusals recorded after the mark: an older
 * one of the same reason no longer satisfies the expectation. */
static void test_refusal_since_mark(void)
{
	char path[P];

	write_file("refusal-since.scn",
		   "# a refusal before the mark\n"
		   "seed 11\n" TWO_HOSTS "mark m0\n"
		   "desc forged = d with rkey 0x00001234\n"
		   "h2: write t y[0..4KiB] forged[0] = WSAECONNRESET\n"
		   "wait frame a -> b opcode ACK syndrome NAK-REMOTE-ACCESS within 5s\n"
		   "mark m\n"
		   "expect refusal a reason stale-key from b since m0\n"
		   "expect refusal a reason stale-key from b\n"
		   "expect refusal a reason stale-key from b since m\n",
		   path, sizeof(path));
	NST_EQ(SCN(path, "-v"), 1);
	OUT_HAS("ok   line 26   expect refusal a reason stale-key from b since m0");
	OUT_HAS("ok   line 27   expect refusal a reason stale-key from b (");
	OUT_HAS("NIC a recorded no refusal stale-key from b since mark m\n");
	OUT_HAS("expected: refusal: reason stale-key, requester 198.18.0.2, since mark m\n");
}

static void test_fault_never_fired(void)
{
	char path[P];

	write_file("never.scn",
		   "# a rule no frame matches\n"
		   "seed 5\n" TWO_HOSTS "fault f1 b -> a drop-nth 1 opcode RDMA_READ_REQUEST\n"
		   "h2: write t y[0..4KiB] d[0]\n",
		   path, sizeof(path));
	NST_EQ(SCN(path), 1);
	OUT_HAS(":21: fault f1 b -> a drop-nth 1 opcode RDMA_READ_REQUEST");
	OUT_HAS("fault f1 never fired (0 frames matched");
	/* Optional: the same scenario passes. */
	write_file("never-optional.scn",
		   "# a rule no frame matches, optional\n"
		   "seed 5\n" TWO_HOSTS
		   "fault f1 b -> a drop-nth 1 opcode RDMA_READ_REQUEST optional\n"
		   "h2: write t y[0..4KiB] d[0]\n",
		   path, sizeof(path));
	NST_EQ(SCN(path), 0);
}

static void test_timeout_names_wait(void)
{
	char path[P];

	write_file("timeout.scn",
		   "# nobody connects\n"
		   "seed 9\n"
		   "nic a 198.18.0.1\n"
		   "host h1 on a\n"
		   "h1: startup\n"
		   "h1: socket -> s\n"
		   "h1: bind s a 7000\n"
		   "h1: listen s\n"
		   "h1: accept s -> c1 &\n"
		   "wait c1 within 300ms\n",
		   path, sizeof(path));
	NST_EQ(SCN(path), 1);
	OUT_HAS(":10: wait c1 within 300ms");
	OUT_HAS("timed out after");
	OUT_HAS("waiting for operation c1 to end");
}

/* Programs as hosts (nicsim-pingpong over a lossy link), a forked host's
 * exit status, a NIC killed and started again, and a program output that
 * never comes. */
static void test_programs_and_nics(void)
{
	char path[P], text[2048], want[W];
	const char *pp = nst_bin("nicsim-pingpong");

	snprintf(text, sizeof(text),
		 "# programs, fork, a NIC restarted\n"
		 "seed 6\n"
		 "nic a 198.18.0.1\n"
		 "nic b 198.18.0.2\n"
		 "link b -> a loss 1%%\n"
		 "program srv on a \"%s --server --addr ${a.addr} --port 7600\"\n"
		 "program cli on b \"%s --client --peer ${a.addr} --addr ${b.addr} --port 7600 "
		 "--iters 100 --rdma-size 64K\"\n"
		 "host h1 on a\n"
		 "start srv\n"
		 "wait counter a.cmd_conn >= 1 within 10s\n" /* it listens */
		 "h1: startup\n"
		 "start cli\n"
		 "wait cli exit 0 within 30s\n"
		 "expect cli output /[0-9]+/\n"
		 "wait srv exit 0 within 10s\n"
		 "h1: fork -> h3\n"
		 "h3: exit 3\n"
		 "wait h3 exit 3 within 5s\n"
		 "kill h1\n"
		 "wait h1 exit within 5s\n"
		 "kill nic b\n"
		 "restart nic b\n"
		 "expect counter b.conn_established == 0\n"
		 "start srv\n"
		 "wait srv output \"never printed\" within 300ms\n",
		 pp, pp);
	write_file("programs.scn", text, path, sizeof(path));
	NST_EQ(SCN(path, "-v"), 1);
	OUT_HAS("ok   line 13   wait cli exit 0 within 30s");
	OUT_HAS("ok   line 18   wait h3 exit 3 within 5s");
	OUT_HAS("ok   line 22   restart nic b");
	/* A NIC started again counts from zero. */
	OUT_HAS("ok   line 23   expect counter b.conn_established == 0");
	snprintf(want, sizeof(want), "%s:25: wait srv output \"never printed\" within 300ms\n",
		 path);
	OUT_HAS(want);
	/* A wait that ran out says so, as every wait does. */
	OUT_HAS("s waiting for program srv to write a line containing \"never printed\"");
	OUT_HAS("prog-cli.log prog-srv.log");
}

/* Whether dir holds no fabric segment, FIFO or lock (printing any). */
static bool kept_only_artefacts(const char *dir)
{
	struct dirent *e;
	bool clean = true;
	DIR *d = opendir(dir);

	while (d && (e = readdir(d)))
		if (!strcmp(e->d_name, "fabric.shm") || !strcmp(e->d_name, "nicsim.lock") ||
		    strstr(e->d_name, ".bell")) {
			printf("\n%s is still in %s\n", e->d_name, dir);
			clean = false;
		}
	if (d)
		closedir(d);
	return d != NULL && clean;
}

/*
 * A program that floods its output: the runner keeps its first and last
 * MiB, its log stops at 16 MiB with a line saying so, a line from the
 * dropped middle is still seen by the `wait` that waits for it as it
 * arrives, and a NUL byte hides nothing after it.
 */
static void test_output_flood(void)
{
	char path[P], dir[D], file[2 * D], log[4096];
	struct stat sb;
	FILE *f;
	long tail;

	write_file("flood.scn",
		   "# a program that floods its output\n"
		   "nic a 198.18.0.1\n"
		   "program p on a \"head -c 1 /dev/zero; echo ' after-nul'; "
		   "yes flood | head -c 5000000; echo middle-mark; "
		   "yes flood | head -c 20000000; echo end-mark\"\n"
		   "start p\n"
		   "wait p output /middle-mark$/ within 60s\n"
		   "wait p exit 0 within 60s\n"
		   "expect p output \"after-nul\"\n"
		   "expect p output \"end-mark\"\n"
		   /* From the middle no longer kept, after the fact. */
		   "expect p output /middle-mark$/\n"
		   "wait p output \"middle-mark\" within 1s\n",
		   path, sizeof(path));
	NST_EQ(SCN(path, "--keep"), 0);
	OUT_HAS("1 scenario: 1 passed, 0 failed");
	NST_REQUIRE(kept_dir(dir, sizeof(dir)));
	snprintf(file, sizeof(file), "%s/prog-p.log", dir);
	NST_REQUIRE(stat(file, &sb) == 0);
	/* 16 MiB of output, the line that says it was cut, and the count. */
	NST_CHECK_(sb.st_size > (16 << 20) && sb.st_size < (16 << 20) + 512, CU_FALSE,
		   "prog-p.log holds %lld bytes, wanted 16 MiB and a note", (long long)sb.st_size);
	f = fopen(file, "r");
	NST_REQUIRE(f != NULL);
	tail = sb.st_size > (long)sizeof(log) - 1 ? sb.st_size - (long)sizeof(log) + 1 : 0;
	fseek(f, tail, SEEK_SET);
	log[fread(log, 1, sizeof(log) - 1, f)] = '\0';
	fclose(f);
	NST_CHECK_(strstr(log, "the rest is not kept") != NULL, CU_FALSE, "log's end: %s",
		   log + strlen(log) / 2);
	NST_CHECK_(strstr(log, "bytes of output not kept") != NULL, CU_FALSE, "log's end: %s",
		   log + strlen(log) / 2);
	/* A kept run directory holds the artefacts, not the fabric. */
	NST_TRUE(kept_only_artefacts(dir));
	nst_rmtree(dir);
}

/*
 * Every NIC killed, then started again: the first to start makes a new
 * fabric.  The runner maps it, sets its links as they were (a `link` line
 * and a fault armed before the kills), and captures from it: both rules
 * drop a frame of the new fabric, which decisions.log records, and the
 * frames are seen on the wire.
 */
static void test_every_nic_restarted(void)
{
	char path[P], text[2048], dir[D], file[2 * D], log[4096];
	const char *pp = nst_bin("nicsim-pingpong");

	snprintf(text, sizeof(text),
		 "# every NIC restarted\n"
		 "seed 8\n"
		 "nic a 198.18.0.1\n"
		 "nic b 198.18.0.2\n"
		 "link b -> a drop-nth 2\n"
		 "program srv on a \"%s --server --addr ${a.addr} --port 7610\"\n"
		 "program cli on b \"%s --client --peer ${a.addr} --addr ${b.addr} --port 7610 "
		 "--iters 20\"\n"
		 "fault f1 a -> b drop-nth 3\n"
		 "kill nic a\n"
		 "kill nic b\n"
		 "restart nic a\n"
		 "restart nic b\n"
		 "start srv\n"
		 "wait counter a.cmd_conn >= 1 within 10s\n" /* it listens */
		 "start cli\n"
		 "wait cli exit 0 within 30s\n"
		 "wait srv exit 0 within 10s\n"
		 "expect frames a -> b count >= 3\n"
		 "expect frames b -> a count >= 2\n",
		 pp, pp);
	write_file("renewed.scn", text, path, sizeof(path));
	NST_EQ(SCN(path, "-v", "--keep"), 0);
	OUT_HAS("ok   line 12   restart nic b");
	OUT_HAS("ok   line 19   expect frames b -> a count >= 2");
	NST_REQUIRE(kept_dir(dir, sizeof(dir)));
	snprintf(file, sizeof(file), "%s/decisions.log", dir);
	NST_REQUIRE(read_all(file, log, sizeof(log)));
	NST_CHECK_(strstr(log, "198.18.0.2 -> 198.18.0.1 frame 1: dropped") != NULL, CU_FALSE,
		   "decisions.log: %.400s", log);
	NST_CHECK_(strstr(log, "198.18.0.1 -> 198.18.0.2 frame 2: dropped") != NULL, CU_FALSE,
		   "decisions.log: %.400s", log);
	nst_rmtree(dir);
}

/* Every process whose environment names dir (the agents), and the NICs of
 * dir's pid files. */
static size_t pids_of(const char *dir, pid_t *pids, size_t max)
{
	char path[2 * D], env[16384], want[D + 16];
	struct dirent *e;
	size_t n = 0;
	ssize_t len;
	DIR *d;
	int fd;

	snprintf(want, sizeof(want), "NICSIM_DIR=%s", dir);
	d = opendir("/proc");
	while (d && (e = readdir(d)) && n < max) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/environ", e->d_name);
		fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		len = read(fd, env, sizeof(env) - 1);
		close(fd);
		for (ssize_t i = 0; i < len; i += (ssize_t)strlen(env + i) + 1) {
			env[len] = '\0';
			if (!strcmp(env + i, want)) {
				pids[n++] = (pid_t)atoi(e->d_name);
				break;
			}
		}
	}
	if (d)
		closedir(d);
	d = opendir(dir);
	while (d && (e = readdir(d)) && n < max) {
		size_t l = strlen(e->d_name);

		if (l > 4 && !strcmp(e->d_name + l - 4, ".pid")) {
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			pids[n] = nst_read_pid_file(path);
			n += pids[n] > 0;
		}
	}
	if (d)
		closedir(d);
	return n;
}

struct started_run {
	char tmpdir[P];
	char dir[D];
	pid_t pids[MAX_PIDS];
	size_t n;
};

/* A scenario's run directory (nicsim-scn-*) below tmpdir, into dir; false
 * while there is none. */
static bool run_dir_below(const char *tmpdir, char *dir, size_t size)
{
	struct dirent *e;
	DIR *d = opendir(tmpdir);

	dir[0] = '\0';
	while (d && (e = readdir(d)))
		if (!strncmp(e->d_name, "nicsim-scn-", 11))
			snprintf(dir, size, "%s/%s", tmpdir, e->d_name);
	if (d)
		closedir(d);
	return dir[0] != '\0';
}

/* The run directory below tmpdir once its two agents and NICs run. */
static bool scenario_running(void *arg)
{
	struct started_run *s = arg;

	if (!run_dir_below(s->tmpdir, s->dir, sizeof(s->dir)))
		return false;
	s->n = pids_of(s->dir, s->pids, MAX_PIDS - 1); /* room for the runner's child */
	return s->n >= 5;                              /* two agents, two NICs, a program */
}

static bool path_gone(void *arg)
{
	return access(arg, F_OK) != 0;
}

/* None of the processes of s runs any more. */
static bool all_gone(void *arg)
{
	const struct started_run *s = arg;

	for (size_t i = 0; i < s->n; i++)
		if (nst_pid_alive(s->pids[i]))
			return false;
	return true;
}

/* The child process of the runner that runs its one scenario. */
static pid_t runner_child(pid_t runner)
{
	char path[64], buf[64];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)runner, (int)runner);
	return read_all(path, buf, sizeof(buf)) ? (pid_t)atoi(buf) : -1;
}

/*
 * Start the runner on a scenario that waits for a minute, once its agents
 * and NICs run send sig to the runner (or to its child that runs the
 * scenario), and wait for the runner's end: its exit status, its output in
 * out, the processes that ran in s.
 */
static int run_and_signal_more(const char *tag, int sig, bool to_child, struct started_run *s,
			       const char *more, const char *opt)
{
	char path[P], log[P];
	const char *bin = nst_bin("nicsim");
	pid_t runner, victim;
	int fd, status;

	snprintf(s->tmpdir, sizeof(s->tmpdir), "%s/%s", tmp, tag);
	NST_REQUIRE(mkdir(s->tmpdir, 0700) == 0);
	write_file("wait.scn",
		   "# waits for a connection that never comes\n"
		   "seed 1\n"
		   "nic a 198.18.0.1\n"
		   "nic b 198.18.0.2\n"
		   "host h1 on a\n"
		   "host h2 on b\n"
		   "program p on a \"sleep 60\"\n"
		   "start p\n"
		   "h1: startup\n"
		   "h1: socket -> s\n"
		   "h1: bind s a 7000\n"
		   "h1: listen s\n"
		   "h1: accept s -> c1 &\n"
		   "wait c1 within 60s\n",
		   path, sizeof(path));
	snprintf(log, sizeof(log), "%s/%s.out", tmp, tag);
	runner = fork();
	NST_REQUIRE(runner >= 0);
	if (runner == 0) {
		fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fd, 1);
		dup2(fd, 2);
		setenv("TMPDIR", s->tmpdir, 1);
		if (more)
			execl(bin, "nicsim", "scenario", "run", path, more, opt, (char *)NULL);
		else
			execl(bin, "nicsim", "scenario", "run", path, (char *)NULL);
		_exit(127);
	}
	NST_TRUE(nst_wait_until(scenario_running, s, START_MS, 10));
	printf("\nrun dir %s, %zu processes in it\n", s->dir, s->n);
	NST_REQUIRE_GE(s->n, (size_t)5);
	/* The process running the scenario, too, must end. */
	s->pids[s->n] = runner_child(runner);
	NST_REQUIRE_GT(s->pids[s->n], 0);
	victim = to_child ? s->pids[s->n] : runner;
	s->n++;
	NST_EQ(kill(victim, sig), 0);
	status = nst_wait(runner, GONE_MS);
	if (read_all(log, out, sizeof(out)))
		printf("%s", out);
	/* A runner killed outright leaves the ending to its child. */
	nst_wait_until(all_gone, s, GONE_MS, 10);
	for (size_t i = 0; i < s->n; i++)
		NST_CHECK_(!nst_pid_alive(s->pids[i]), CU_FALSE, "pid %d is gone", (int)s->pids[i]);
	return status;
}

static int run_and_signal(const char *tag, int sig, bool to_child, struct started_run *s)
{
	return run_and_signal_more(tag, sig, to_child, s, NULL, NULL);
}

static void test_sigterm_cleans_up(void)
{
	static struct started_run s;
	int status = run_and_signal("term", SIGTERM, false, &s);

	NST_CHECK_(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 1, CU_FALSE,
		   "the runner exits 1 (wait status 0x%x)", (unsigned)status);
	OUT_HAS("interrupted (SIGTERM)");
	OUT_HAS("the run directory");
	NST_CHECK_(access(s.dir, F_OK) != 0, CU_FALSE, "%.400s is removed", s.dir);
}

/* SIGINT (a terminal's ^C) to the runner: reported as SIGINT, not as the
 * SIGTERM it once passed on; the run ends as on SIGTERM. */
static void test_sigint_reported(void)
{
	static struct started_run s;
	int status = run_and_signal("int", SIGINT, false, &s);

	NST_CHECK_(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 1, CU_FALSE,
		   "the runner exits 1 (wait status 0x%x)", (unsigned)status);
	OUT_HAS("interrupted (SIGINT)");
	NST_CHECK_(strstr(out, "SIGTERM") == NULL, CU_FALSE, "no SIGTERM in the report");
	NST_CHECK_(access(s.dir, F_OK) != 0, CU_FALSE, "%.400s is removed", s.dir);
}

/*
 * SIGHUP (a closed terminal) ends the run as SIGTERM does, with a report;
 * a scenario never started is reported as not run (a TAP SKIP, no seed
 * and no replay), not as failed.
 */
static void test_sighup_and_not_run(void)
{
	static struct started_run s;
	char later[P], want[W];
	int status;

	write_file("later # TODO.scn", "# never started\nnic a 198.18.0.1\n", later, sizeof(later));
	status = run_and_signal_more("hup", SIGHUP, false, &s, later, "--tap");
	NST_CHECK_(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 1, CU_FALSE,
		   "the runner exits 1 (wait status 0x%x)", (unsigned)status);
	OUT_HAS("interrupted (SIGHUP)");
	/* The file's '#' is escaped, so that the SKIP is the directive. */
	snprintf(want, sizeof(want),
		 "%.*s/later \\# TODO.scn # SKIP not run: interrupted (SIGHUP)\n",
		 (int)(strrchr(later, '/') - later), later);
	NST_CHECK_(strstr(out, "ok 2 - ") && strstr(out, want), CU_FALSE, "output has %s", want);
	NST_TRUE(strstr(out, "--seed 0") == NULL);
	OUT_HAS("# 2 scenarios: 0 passed, 1 failed, 1 not run");
	NST_CHECK_(access(s.dir, F_OK) != 0, CU_FALSE, "%.400s is removed", s.dir);
}

/* The process running a scenario killed outright: the runner reports it,
 * ends its NICs (daemons of their own) and keeps the run directory. */
static bool pid_gone(void *arg)
{
	return !nst_pid_alive(*(pid_t *)arg);
}

static void test_killed_scenario_cleaned_up(void)
{
	static struct started_run s;
	char lock[D + 16];
	int status = run_and_signal("kill", SIGKILL, true, &s);

	NST_CHECK_(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 1, CU_FALSE,
		   "the runner exits 1 (wait status 0x%x)", (unsigned)status);
	OUT_HAS("ended before its end (wait status 0x9)");
	OUT_HAS("  kept: ");
	NST_CHECK_(access(s.dir, F_OK) == 0, CU_FALSE, "%.400s is kept", s.dir);
	/* The NICs are down: no lock and no fabric left in what is kept. */
	snprintf(lock, sizeof(lock), "%s/nicsim.lock", s.dir);
	NST_CHECK_(access(lock, F_OK) != 0, CU_FALSE, "%.400s is removed", lock);
	nst_rmtree(s.dir);
}

/* A program that leaves its process group (setsid) is ended with the
 * scenario all the same: the scenario's process is a child subreaper. */
static void test_setsid_escape_ended(void)
{
	char path[P], pidfile[P], text[W + P], buf[32];
	pid_t pid;

	snprintf(pidfile, sizeof(pidfile), "%s/escaped.pid", tmp);
	snprintf(text, sizeof(text),
		 "# a program whose child leaves its process group\n"
		 "nic a 198.18.0.1\n"
		 "program esc on a \"setsid sh -c 'echo $$ > %s; echo escaped; exec sleep 300' & "
		 "exec sleep 300\"\n"
		 "start esc\n"
		 "wait esc output \"escaped\"\n",
		 pidfile);
	write_file("setsid-escape.scn", text, path, sizeof(path));
	NST_EQ(SCN(path), 0);
	/* The escaped process wrote its pid before it said "escaped". */
	NST_REQUIRE(read_all(pidfile, buf, sizeof(buf)));
	pid = (pid_t)atoi(buf);
	NST_REQUIRE_GT(pid, 0);
	NST_CHECK_(nst_wait_until(pid_gone, &pid, GONE_MS, 10), CU_FALSE,
		   "the escaped process %d is ended", (int)pid);
	if (nst_pid_alive(pid))
		kill(pid, SIGKILL);
}

/* The runner killed outright: the process running its scenario gets
 * SIGTERM from the kernel and ends everything it started, and removes its
 * run directory, as on SIGTERM. */
static void test_killed_runner_cleaned_up(void)
{
	static struct started_run s;
	int status = run_and_signal("kill-runner", SIGKILL, false, &s);

	NST_CHECK_(status >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, CU_FALSE,
		   "the runner was killed (wait status 0x%x)", (unsigned)status);
	nst_wait_until(path_gone, s.dir, GONE_MS, 10);
	NST_CHECK_(access(s.dir, F_OK) != 0, CU_FALSE, "%.400s is removed", s.dir);
}

static void test_tap_and_junit(void)
{
	char ok[P], bad[P], junit[P], want[W];
	static char xml[1 << 16];

	write_file("tap-ok.scn", write_ok, ok, sizeof(ok));
	write_file("tap-bad.scn",
		   "# a counter that does not move\n"
		   "seed 4\n"
		   "nic a 198.18.0.1\n"
		   "expect counter a.retransmits delta >= 1\n",
		   bad, sizeof(bad));
	snprintf(junit, sizeof(junit), "%s/junit.xml", tmp);
	NST_EQ(SCN(ok, bad, "--tap", "--junit", junit, "-j", "2"), 1);
	NST_TRUE(!strncmp(out, "TAP version 14\n1..2\n", 20));
	snprintf(want, sizeof(want), "ok 1 - %s [seed 7]\n", ok);
	OUT_HAS(want);
	snprintf(want, sizeof(want), "not ok 2 - %s [seed 4]\n  ---\n", bad);
	OUT_HAS(want);
	OUT_HAS("  message: \"counter a.retransmits delta is 0, not >= 1\"\n");
	snprintf(want, sizeof(want), "  at: \"%s:4\"\n", bad);
	OUT_HAS(want);
	OUT_HAS("  found: \"a.retransmits delta: 0\"\n");
	OUT_HAS("  wanted: \"a.retransmits delta: >= 1\"\n");
	OUT_HAS("  ...\n");
	NST_REQUIRE(read_all(junit, xml, sizeof(xml)));
	printf("\n%s", xml);
	NST_TRUE(strstr(xml, "<testsuites ") && strstr(xml, "tests=\"2\" failures=\"1\""));
	snprintf(want, sizeof(want), "<testcase name=\"tap-ok [seed 7]\" classname=\"%s\"", tmp);
	NST_CHECK_(strstr(xml, want) != NULL, CU_FALSE, "junit has %s", want);
	snprintf(want, sizeof(want), "<failure message=\"%s:4: counter a.retransmits", bad);
	NST_CHECK_(strstr(xml, want) != NULL, CU_FALSE, "junit has %s", want);
	NST_TRUE(strstr(xml, "<system-out>") != NULL);
	NST_TRUE(strstr(xml, "[[ATTACHMENT|") != NULL && strstr(xml, "/capture.pcapng]]"));
	/* The report never goes over a scenario: the one run, or another. */
	NST_EQ(SCN(ok, "--junit", ok), 2);
	OUT_HAS("the report would overwrite it; name another file");
	NST_REQUIRE(read_all(ok, xml, sizeof(xml)));
	NST_EQ(strcmp(xml, write_ok), 0);
	NST_EQ(SCN(ok, "--junit", bad), 2);
	OUT_HAS("is a scenario file: the report would overwrite it");
	NST_REQUIRE(read_all(bad, xml, sizeof(xml)));
	NST_TRUE(!strncmp(xml, "# a counter that does not move\n", 31));
}

/*
 * --junit FILE never replaces what is not a regular file: a FIFO is
 * written in place, a symlink is written through (its target replaced, the
 * link kept, a dangling one creating its target), and a path that cannot
 * be written is refused before anything runs.
 */
static void test_junit_targets(void)
{
	static const char one_nic[] = "# one NIC\nseed 3\nnic a 198.18.0.1\n";
	char scn[P], fifo[P], link[P], real[P], dangling[P], made[P], bad[P];
	static char xml[1 << 16];
	struct stat st;
	bool was_link;
	ssize_t n;
	int rfd;

	write_file("junit-one.scn", one_nic, scn, sizeof(scn));
	snprintf(fifo, sizeof(fifo), "%s/junit.fifo", tmp);
	NST_REQUIRE(mkfifo(fifo, 0600) == 0);
	/* A reader first, so that the runner's open for writing completes;
	 * the report is far smaller than the pipe's buffer. */
	rfd = open(fifo, O_RDONLY | O_NONBLOCK);
	NST_REQUIRE(rfd >= 0);
	NST_EQ(SCN(scn, "--junit", fifo), 0);
	NST_REQUIRE(lstat(fifo, &st) == 0);
	NST_CHECK_(S_ISFIFO(st.st_mode), CU_FALSE, "%s is still a FIFO (mode %o)", fifo,
		   (unsigned)st.st_mode);
	n = read(rfd, xml, sizeof(xml) - 1);
	close(rfd);
	NST_REQUIRE(n > 0);
	xml[n] = '\0';
	NST_TRUE(strstr(xml, "<testsuites ") != NULL);
	unlink(fifo);

	/* A symlink (relative, as `ln -s real.xml link.xml` makes it). */
	snprintf(real, sizeof(real), "%s/junit-real.xml", tmp);
	snprintf(link, sizeof(link), "%s/junit-link.xml", tmp);
	write_file("junit-real.xml", "old\n", real, sizeof(real));
	NST_REQUIRE(symlink("junit-real.xml", link) == 0);
	NST_EQ(SCN(scn, "--junit", link), 0);
	NST_REQUIRE(lstat(link, &st) == 0);
	NST_CHECK_(S_ISLNK(st.st_mode), CU_FALSE, "%s is still a symlink (mode %o)", link,
		   (unsigned)st.st_mode);
	NST_REQUIRE(read_all(real, xml, sizeof(xml)));
	NST_TRUE(strstr(xml, "<testsuites ") != NULL);
	snprintf(dangling, sizeof(dangling), "%s/junit-dangling.xml", tmp);
	snprintf(made, sizeof(made), "%s/junit-made.xml", tmp);
	NST_REQUIRE(symlink(made, dangling) == 0);
	NST_EQ(SCN(scn, "--junit", dangling), 0);
	NST_REQUIRE(lstat(dangling, &st) == 0 && S_ISLNK(st.st_mode));
	NST_REQUIRE(read_all(made, xml, sizeof(xml)));
	NST_TRUE(strstr(xml, "<testsuites ") != NULL);

	/* /dev/stdout leads through /proc to "pipe:[N]": written in place. */
	NST_REQUIRE(lstat("/dev/stdout", &st) == 0);
	was_link = S_ISLNK(st.st_mode);
	NST_EQ(SCN(scn, "--junit", "/dev/stdout"), 0);
	OUT_HAS("<testsuites ");
	NST_REQUIRE(lstat("/dev/stdout", &st) == 0);
	NST_EQ(S_ISLNK(st.st_mode), was_link);
	/* Standard output a regular file: the report goes after the text
	 * report, through the descriptor, not in the file's place. */
	{
		char cmd[4 * P], txt[P];

		snprintf(txt, sizeof(txt), "%s/junit-stdout.txt", tmp);
		snprintf(cmd, sizeof(cmd),
			 "exec '%s' scenario run '%s' --junit /dev/stdout > '%s' 2>&1",
			 nst_bin("nicsim"), scn, txt);
		NST_EQ(nst_run((const char *const[]){"/bin/sh", "-c", cmd, NULL}, out, sizeof(out),
			       RUN_MS),
		       0);
		NST_REQUIRE(read_all(txt, xml, sizeof(xml)));
		NST_TRUE(strstr(xml, "PASS ") != NULL);
		NST_TRUE(strstr(xml, "<testsuites ") != NULL);
	}
	/* A FIFO nobody reads: the run ends, saying so, and does not wait
	 * for a reader that never comes. */
	NST_REQUIRE(mkfifo(fifo, 0600) == 0);
	NST_EQ(SCN(scn, "--junit", fifo), 1);
	OUT_HAS("it is a FIFO that no process is reading");
	unlink(fifo);

	/* Refused up front: usage errors, and no scenario ran. */
	snprintf(bad, sizeof(bad), "%s/no-such-dir/r.xml", tmp);
	NST_EQ(SCN(scn, "--junit", bad), 2);
	OUT_HAS("no-such-dir does not exist");
	NST_TRUE(strstr(out, "1 scenario") == NULL);
	NST_EQ(SCN(scn, "--junit", tmp), 2);
	OUT_HAS("is a directory: name a file in it");
	NST_TRUE(strstr(out, "1 scenario") == NULL);
	NST_EQ(SCN(scn, "--junit", ""), 2);
	OUT_HAS("--junit '': expected a file name");
	NST_TRUE(strstr(out, "1 scenario") == NULL);
}

/* Mistakes in the command are usage errors before anything runs. */
static void test_usage_errors_up_front(void)
{
	char scn[P], dir[P];

	write_file("usage-one.scn", "# one NIC\nnic a 198.18.0.1\n", scn, sizeof(scn));
	NST_EQ(SCN(scn, "--seed", "18446744073709551616"), 2);
	OUT_HAS("too large (at most 2^64-1");
	snprintf(dir, sizeof(dir), "%s/no-such-run-dir", tmp);
	NST_EQ(SCN(scn, "--dir", dir), 2);
	OUT_HAS("no such directory; create it first");
	NST_TRUE(strstr(out, "1 scenario") == NULL);
}

/*
 * Arming costs the faults on the link, not every fault of the scenario
 * (3000 faults on one link once took minutes), and the budget is checked
 * between steps: a --timeout far shorter than the steps ends the run.
 */
static void test_many_faults(void)
{
	static char text[3000 * 48 + 256];
	char path[P];
	uint64_t t0;
	size_t len;

	len = (size_t)snprintf(text, sizeof(text),
			       "# many faults\nnic a 198.18.0.1\n"
			       "nic b 198.18.0.2\nhost h on a\nh: startup\n");
	for (int i = 0; i < 3000; i++)
		len += (size_t)snprintf(text + len, sizeof(text) - len,
					"fault f%d a -> b loss 1%% optional\n", i);
	write_file("many-faults.scn", text, path, sizeof(path));
	t0 = nst_now_ns();
	NST_EQ(SCN(path), 0);
	NST_LT((long long)((nst_now_ns() - t0) / 1000000), 20000);
	OUT_HAS("1 scenario: 1 passed, 0 failed");
	t0 = nst_now_ns();
	NST_EQ(SCN(path, "--timeout", "0.001"), 1);
	NST_LT((long long)((nst_now_ns() - t0) / 1000000), 20000);
	OUT_HAS("the scenario's timeout (0.001 s) ran out");
}

/*
 * A back-reference makes matching exponential in the line's length (this
 * one stalled the runner for half a minute past its `within`): refused,
 * by the checker or at the latest by the runner, and the run ends at once.
 */
static void test_backreference_refused(void)
{
	char path[P];
	uint64_t t0;
	int rc;

	write_file(
	    "backref.scn",
	    "# a regex with back-references on a long line\n"
	    "nic a 198.18.0.1\n"
	    "program p on a \"printf "
	    "'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaac\\n'; sleep 30\"\n"
	    "start p\n"
	    "wait p output /^(a*)*(a*)*\\1\\2b/ within 2s\n",
	    path, sizeof(path));
	t0 = nst_now_ns();
	rc = SCN(path);
	NST_CHECK_(rc == 1 || rc == 2, CU_FALSE, "refused (exit %d)", rc);
	NST_LT((long long)((nst_now_ns() - t0) / 1000000), 10000);
	OUT_HAS("back-reference");
}

/*
 * A TMPDIR so long that a NIC's socket path does not fit: the report says
 * so at the NIC's line (which of TMPDIR and --dir, its limit, what to do),
 * and names no NIC log that was never written.
 */
static void test_long_tmpdir_reported(void)
{
	char path[P], longdir[P], log[P];
	const char *bin = nst_bin("nicsim");
	pid_t pid;
	int fd, status;

	write_file("long-tmpdir.scn", "# one NIC\nnic a 198.18.0.1\n", path, sizeof(path));
	snprintf(longdir, sizeof(longdir), "%s/%.*s", tmp, 100,
		 "tttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttt"
		 "tttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttt");
	NST_REQUIRE(mkdir(longdir, 0700) == 0);
	snprintf(log, sizeof(log), "%s/long-tmpdir.out", tmp);
	pid = fork();
	NST_REQUIRE(pid >= 0);
	if (pid == 0) {
		fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fd, 1);
		dup2(fd, 2);
		setenv("TMPDIR", longdir, 1);
		execl(bin, "nicsim", "scenario", "run", path, (char *)NULL);
		_exit(127);
	}
	status = nst_wait(pid, RUN_MS);
	NST_REQUIRE(read_all(log, out, sizeof(out)));
	printf("\n%s", out);
	NST_CHECK_(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 1, CU_FALSE,
		   "the runner exits 1 (wait status 0x%x)", (unsigned)status);
	OUT_HAS("long-tmpdir.scn:2: nic a 198.18.0.1\n");
	OUT_HAS("over the 107 a UNIX socket's path may have: TMPDIR ");
	OUT_HAS("set TMPDIR to a shorter directory");
	NST_CHECK_(strstr(out, "its log:") == NULL, CU_FALSE, "no NIC log named");
	/* Nothing said outside the report (on stderr, before it). */
	NST_CHECK_(!strncmp(out, path, strlen(path)), CU_FALSE, "the report comes first");
}

/*
 * Memory expectations cover a whole buffer past 64 MiB: one that holds
 * what is expected passes, one that differs everywhere fails quickly,
 * counting at least the bytes it read and showing the first difference.
 */
static void test_big_memory_expectations(void)
{
	char path[P];
	uint64_t t0;

	write_file("big-mem.scn",
		   "# an 80 MiB buffer\n"
		   "nic a 198.18.0.1\n"
		   "host h1 on a\n"
		   "h1: startup\n"
		   "h1: buffer x 80MiB fill seq 1\n"
		   "expect h1 x == seq 1\n"
		   "expect h1 x[1MiB..] unchanged\n"
		   "expect h1 x == seq 2\n",
		   path, sizeof(path));
	t0 = nst_now_ns();
	NST_EQ(SCN(path, "-v"), 1);
	NST_LT((long long)((nst_now_ns() - t0) / 1000000), 60000);
	OUT_HAS("ok   line 6    expect h1 x == seq 1");
	OUT_HAS("ok   line 7    expect h1 x[1MiB..] unchanged");
	OUT_HAS("h1 x[0..83886080] does not hold seq 2: at least ");
	OUT_HAS("of 83886080 bytes differ, the first at offset 0x");
}

/* capture.pcapng stops at --capture-max (64 MiB by default), and the
 * report says it was cut; `expect frames` still sees every frame. */
static void test_capture_cut(void)
{
	char path[P], dir[D], file[2 * D];
	struct stat st;

	write_file("capture-cut.scn", write_ok, path, sizeof(path));
	NST_EQ(SCN(path, "--capture-max", "2KiB", "--keep"), 0);
	OUT_HAS("capture.pcapng was cut at 2048 bytes (--capture-max): ");
	OUT_HAS("frames from ");
	NST_REQUIRE(kept_dir(dir, sizeof(dir)));
	snprintf(file, sizeof(file), "%s/capture.pcapng", dir);
	NST_REQUIRE(stat(file, &st) == 0);
	/* The limit, plus the one record that went over it. */
	NST_CHECK_(st.st_size < 2048 + 8192, CU_FALSE, "capture.pcapng is %lld bytes",
		   (long long)st.st_size);
	nst_rmtree(dir);
	NST_EQ(SCN(path, "--capture-max", "2XB"), 2);
	OUT_HAS("--capture-max 2XB: expected a size");
}

/* A `wait counter` cut short by the scenario's budget says so, not only
 * how long it waited. */
static void test_wait_counter_budget(void)
{
	char path[P];

	write_file("counter-budget.scn",
		   "# a counter that never moves, a budget shorter than the wait\n"
		   "nic a 198.18.0.1\n"
		   "wait counter a.retransmits >= 1 within 60s\n",
		   path, sizeof(path));
	NST_EQ(SCN(path, "--timeout", "0.5"), 1);
	OUT_HAS("counter a.retransmits is 0 after waiting ");
	OUT_HAS(", when the scenario's timeout (0.500 s) ran out, not >= 1");
}

/*
 * An ERE on a line of a megabyte is matched in pieces (it once took
 * minutes whole), and the scenario's budget is looked at between pieces.
 */
static void test_long_line_regex_bounded(void)
{
	char path[P];
	uint64_t t0;

	write_file("long-line-re.scn",
		   "# a long line and a regex that backtracks\n"
		   "nic a 198.18.0.1\n"
		   "program p on a \"head -c 1000000 /dev/zero | tr '\\\\0' a; echo; sleep 30\"\n"
		   "start p\n"
		   "wait p output \"aaaa\" within 30s\n"
		   "expect p output /(a|aa)*c/\n",
		   path, sizeof(path));
	t0 = nst_now_ns();
	NST_EQ(SCN(path, "--timeout", "5"), 1);
	NST_LT((long long)((nst_now_ns() - t0) / 1000000), 60000);
	OUT_HAS("expect p output /(a|aa)*c/");
}

static void test_same_seed_same_decisions(void)
{
	char path[P], dir1[D], dir2[D], f1[D + 32], f2[D + 32];
	static char log1[1 << 16], log2[1 << 16];

	write_file("lossy.scn",
		   "# single-frame writes over a lossy link, retransmitted\n"
		   "seed 11\n"
		   "nic a 198.18.0.1\n"
		   /* Only a timeout retransmits a lost write: one long enough
		    * that no ACK is late for it, however loaded the machine. */
		   "nic b 198.18.0.2 ack-timeout 16\n" HOSTS "fault f1 b -> a loss 30%\n"
		   "h2: write t y[0..1KiB] d[0]\n"
		   "h2: write t y[1KiB..2KiB] d[1KiB]\n"
		   "h2: write t y[2KiB..3KiB] d[2KiB]\n"
		   "h2: write t y[3KiB..4KiB] d[3KiB]\n"
		   "h2: write t y[4KiB..5KiB] d[4KiB]\n"
		   "h2: write t y[5KiB..6KiB] d[5KiB]\n"
		   "h2: write t y[6KiB..7KiB] d[6KiB]\n"
		   "h2: write t y[7KiB..8KiB] d[7KiB]\n"
		   "expect h1 x[0..8KiB] == seq 9\n",
		   path, sizeof(path));
	NST_REQUIRE_EQ(SCN(path, "--keep"), 0);
	NST_REQUIRE(kept_dir(dir1, sizeof(dir1)));
	NST_REQUIRE_EQ(SCN(path, "--keep"), 0);
	NST_REQUIRE(kept_dir(dir2, sizeof(dir2)));
	snprintf(f1, sizeof(f1), "%s/decisions.log", dir1);
	snprintf(f2, sizeof(f2), "%s/decisions.log", dir2);
	NST_REQUIRE(read_all(f1, log1, sizeof(log1)));
	NST_REQUIRE(read_all(f2, log2, sizeof(log2)));
	printf("\n%s:\n%s%s:\n%s", f1, log1, f2, log2);
	NST_TRUE(strstr(log1, "dropped (loss rule)") != NULL);
	NST_EQ(strcmp(log1, log2), 0);
	nst_rmtree(dir1);
	nst_rmtree(dir2);
}

/* The agents among pids (by their command name). */
static size_t agents_of(const pid_t *pids, size_t n, pid_t *agents)
{
	char path[64], comm[64];
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)pids[i]);
		if (read_all(path, comm, sizeof(comm)) && !strncmp(comm, "nicsim-agent", 12))
			agents[k++] = pids[i];
	}
	return k;
}

struct gate {
	char tmpdir[P];
	char dir[D];
	char fifo[D + 8];
};

/* The run directory below tmpdir once the scenario's program made its
 * gate (a FIFO it reads). */
static bool gate_made(void *arg)
{
	struct gate *g = arg;

	if (!run_dir_below(g->tmpdir, g->dir, sizeof(g->dir)))
		return false;
	snprintf(g->fifo, sizeof(g->fifo), "%s/gate", g->dir);
	return access(g->fifo, F_OK) == 0;
}

/*
 * Teardown ends a scenario's processes at once: four programs that ignore
 * SIGTERM and three host agents that are stopped (so they never read the
 * end of their channel) each need SIGKILL after the budget, which they get
 * together after one second, not one after the other (seven seconds).
 */
static void test_teardown_in_parallel(void)
{
	static struct gate g;
	char path[P], log[P];
	pid_t runner, pids[MAX_PIDS], agents[MAX_PIDS];
	size_t n, na;
	uint64_t t0, t1;
	int fd, status;

	snprintf(g.tmpdir, sizeof(g.tmpdir), "%s/teardown", tmp);
	NST_REQUIRE(mkdir(g.tmpdir, 0700) == 0);
	write_file("stuck.scn",
		   "# processes that do not end when asked\n"
		   "nic a 198.18.0.1\n"
		   "program p1 on a \"trap '' TERM; echo ready; exec sleep 600\"\n"
		   "program p2 on a \"trap '' TERM; echo ready; exec sleep 600\"\n"
		   "program p3 on a \"trap '' TERM; echo ready; exec sleep 600\"\n"
		   "program p4 on a \"trap '' TERM; echo ready; exec sleep 600\"\n"
		   "program gate on a \"mkfifo $NICSIM_DIR/gate && read x < $NICSIM_DIR/gate\"\n"
		   "host h1 on a\n"
		   "host h2 on a\n"
		   "host h3 on a\n"
		   "start p1\n"
		   "start p2\n"
		   "start p3\n"
		   "start p4\n"
		   "wait p1 output \"ready\"\n"
		   "wait p2 output \"ready\"\n"
		   "wait p3 output \"ready\"\n"
		   "wait p4 output \"ready\"\n"
		   "h1: startup\n"
		   "h2: startup\n"
		   "h3: startup\n"
		   "start gate\n"
		   "wait gate exit 0 within 60s\n",
		   path, sizeof(path));
	snprintf(log, sizeof(log), "%s/teardown.out", tmp);
	runner = fork();
	NST_REQUIRE(runner >= 0);
	if (runner == 0) {
		fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fd, 1);
		dup2(fd, 2);
		setenv("TMPDIR", g.tmpdir, 1);
		execl(nst_bin("nicsim"), "nicsim", "scenario", "run", path, (char *)NULL);
		_exit(127);
	}
	NST_TRUE(nst_wait_until(gate_made, &g, START_MS, 10));
	n = pids_of(g.dir, pids, MAX_PIDS);
	na = agents_of(pids, n, agents);
	NST_EQ(na, 3);
	for (size_t i = 0; i < na; i++)
		NST_EQ(kill(agents[i], SIGSTOP), 0);
	/* Open the gate: the scenario passes and its teardown begins. */
	fd = open(g.fifo, O_WRONLY);
	NST_REQUIRE(fd >= 0);
	t0 = nst_now_ns();
	NST_EQ(write(fd, "go\n", 3), 3);
	close(fd);
	status = nst_wait(runner, GONE_MS);
	t1 = nst_now_ns();
	if (read_all(log, out, sizeof(out)))
		printf("\n%s", out);
	printf("teardown and report took %.3f s\n", (double)(t1 - t0) / 1e9);
	NST_CHECK_(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0, CU_FALSE,
		   "the scenario passed (wait status 0x%x)", (unsigned)status);
	/* One budget (1 s) and the NIC's end (at most 2 s more on a loaded
	 * machine); one after the other: 7 s. */
	NST_CHECK_(t1 - t0 < 5000000000ull, CU_FALSE,
		   "seven stuck processes ended in %.3f s, wanted under 5 s",
		   (double)(t1 - t0) / 1e9);
	for (size_t i = 0; i < n; i++)
		NST_CHECK_(!nst_pid_alive(pids[i]), CU_FALSE, "pid %d is gone", (int)pids[i]);
}

/*
 * A host whose channel closes before its exit status is in: the report
 * waits for the status instead of printing the -1 it had (a forked host
 * killed while a call of its was pending).
 */
static void test_host_end_status(void)
{
	char path[P];

	write_file("forked-killed.scn",
		   "# a forked host killed while it accepts\n"
		   "seed 1\n"
		   "nic a 198.18.0.1\n"
		   "host h1 on a\n"
		   "h1: startup\n"
		   "h1: fork -> h3\n"
		   "h3: startup\n"
		   "h3: socket -> s\n"
		   "h3: bind s a 7000\n"
		   "h3: listen s\n"
		   "h3: accept s -> c1 &\n"
		   "kill h3\n"
		   "wait c1\n",
		   path, sizeof(path));
	for (int i = 0; i < 3; i++) {
		NST_EQ(SCN(path), 1);
		OUT_HAS("host h3 ended before the call's result came");
		OUT_HAS("actual:   host h3: killed by signal 9 (SIGKILL)");
		NST_CHECK_(strstr(out, "0xffffffff") == NULL, CU_FALSE, "no status -1 reported");
	}
	write_file("exited.scn",
		   "# a call to a host that exited\n"
		   "nic a 198.18.0.1\n"
		   "host h1 on a\n"
		   "h1: exit 3\n"
		   "h1: startup\n",
		   path, sizeof(path));
	/* Whether the runner sees the host's channel closed before it sends
	 * the call, or the send fails, or the call is sent and never
	 * answered, the report says how the host ended. */
	for (int i = 0; i < 5; i++) {
		NST_EQ(SCN(path), 1);
		OUT_HAS("exited.scn:5: h1: startup");
		OUT_HAS("exited with status 3");
		NST_CHECK_(strstr(out, "Broken pipe") == NULL, CU_FALSE, "no bare EPIPE reported");
	}
}

/*
 * A program that cannot run, or that exits early: a wait for its output
 * fails as it exits, saying how, at the wait's line; a wait for something
 * else that runs out lists it.
 */
static void test_program_exit_ends_waits(void)
{
	char path[P], want[W];
	uint64_t t0;

	write_file("no-command.scn",
		   "# a program that is not there\n"
		   "nic a 198.18.0.1\n"
		   "program p on a \"nicsim-no-such-program --flag\"\n"
		   "start p\n"
		   "wait p output \"hello\" within 60s\n",
		   path, sizeof(path));
	t0 = nst_now_ns();
	NST_EQ(SCN(path), 1);
	NST_LT((long long)((nst_now_ns() - t0) / 1000000), 30000);
	snprintf(want, sizeof(want), "%s:5: wait p output \"hello\" within 60s\n", path);
	OUT_HAS(want);
	OUT_HAS("program p exited with status 127 (command not found or not executable) before "
		"writing a line containing \"hello\"");
	/* It exits while a child it left holds its output open. */
	write_file("early-exit.scn",
		   "# a program that exits early, leaving a child\n"
		   "nic a 198.18.0.1\n"
		   "program q on a \"sleep 600 & echo started; exit 3\"\n"
		   "start q\n"
		   "wait q output \"never\" within 60s\n",
		   path, sizeof(path));
	t0 = nst_now_ns();
	NST_EQ(SCN(path), 1);
	NST_LT((long long)((nst_now_ns() - t0) / 1000000), 30000);
	OUT_HAS("program q exited with status 3 before writing a line containing \"never\"");
	OUT_HAS("output: started");
	write_file("server-missing.scn",
		   "# the server never starts\n"
		   "nic a 198.18.0.1\n"
		   "program srv on a \"nicsim-no-such-server\"\n"
		   "start srv\n"
		   "wait counter a.cmd_conn >= 1 within 300ms\n",
		   path, sizeof(path));
	NST_EQ(SCN(path), 1);
	OUT_HAS("program srv exited with status 127 (command not found or not executable) ");
	OUT_HAS("into the scenario, while line 5 ran");
}

/* Programs find the binaries of the build that runs them first on their
 * PATH, whatever the runner's PATH. */
static void test_programs_find_binaries(void)
{
	char path[P], text[4 * PATH_MAX], bin[D], real[PATH_MAX], *old, *slash;

	snprintf(bin, sizeof(bin), "%s", nst_bin("nicsim"));
	slash = strrchr(bin, '/');
	NST_REQUIRE(slash != NULL);
	*slash = '\0';
	NST_REQUIRE(realpath(bin, real) != NULL);
	snprintf(text, sizeof(text),
		 "# programs find the build's binaries\n"
		 "nic a 198.18.0.1\n"
		 "program p on a \"command -v nicsim-pingpong; command -v nicsim; "
		 "command -v nicsimd\"\n"
		 "start p\n"
		 "wait p exit 0\n"
		 "expect p output \"%s/nicsim-pingpong\"\n"
		 "expect p output \"%s/nicsim\"\n"
		 "expect p output \"%s/nicsimd\"\n",
		 real, real, real);
	write_file("path.scn", text, path, sizeof(path));
	old = strdup(getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
	NST_REQUIRE(old != NULL);
	setenv("PATH", "/usr/bin:/bin", 1);
	NST_EQ(SCN(path), 0);
	setenv("PATH", old, 1);
	free(old);
}

/* The tool's common options before `scenario`: --dir D is where the run
 * directories are made, as `scenario run --dir D` does; --nic does not
 * apply; the help says so. */
static void test_global_options(void)
{
	char path[P], dir[P], kept[D], want[W];
	const char *bin = nst_bin("nicsim");

	write_file("dir.scn", write_ok, path, sizeof(path));
	snprintf(dir, sizeof(dir), "%s/runs", tmp);
	NST_REQUIRE(mkdir(dir, 0700) == 0);
	NST_EQ(nst_run_shown(
		   bin, "nicsim",
		   (const char *const[]){"--dir", dir, "scenario", "run", path, "--keep", NULL},
		   out, sizeof(out), RUN_MS),
	       0);
	NST_REQUIRE(kept_dir(kept, sizeof(kept)));
	snprintf(want, sizeof(want), "%s/nicsim-scn-", dir);
	NST_CHECK_(!strncmp(kept, want, strlen(want)), CU_FALSE, "%.200s is below %.200s", kept,
		   dir);
	nst_rmtree(kept);
	snprintf(want, sizeof(want), "--dir=%s", dir);
	NST_EQ(nst_run_shown(bin, "nicsim",
			     (const char *const[]){want, "scenario", "run", path, "--keep", NULL},
			     out, sizeof(out), RUN_MS),
	       0);
	NST_REQUIRE(kept_dir(kept, sizeof(kept)));
	NST_CHECK_(!strncmp(kept, dir, strlen(dir)), CU_FALSE, "%.200s is below %.200s", kept, dir);
	nst_rmtree(kept);
	NST_EQ(SCN(path, "--dir", dir, "--keep"), 0);
	NST_REQUIRE(kept_dir(kept, sizeof(kept)));
	NST_CHECK_(!strncmp(kept, dir, strlen(dir)), CU_FALSE, "%.200s is below %.200s", kept, dir);
	nst_rmtree(kept);
	NST_EQ(nst_run_shown(
		   bin, "nicsim",
		   (const char *const[]){"--nic", "198.18.0.1", "scenario", "run", path, NULL}, out,
		   sizeof(out), RUN_MS),
	       2);
	OUT_HAS("option --nic does not apply to 'nicsim scenario'");
	NST_EQ(nst_run_shown(bin, "nicsim", (const char *const[]){"--help", NULL}, out, sizeof(out),
			     RUN_MS),
	       0);
	OUT_HAS("'nicsim [--dir D] scenario run' makes each scenario's private run directory");
	NST_EQ(nst_run_shown(bin, "nicsim",
			     (const char *const[]){"--dir", dir, "scenario", "run", "--help", NULL},
			     out, sizeof(out), RUN_MS),
	       0);
	OUT_HAS("--dir D");
	OUT_HAS("'nicsim --dir D scenario run ...' is 'nicsim scenario run ... --dir D'");
}

/*
 * Two faults on one link, healed in either order: the link holds its
 * baseline and every fault still armed, in the order they began, and
 * comes back to its baseline at the end (`nicsim link show`, run by the
 * scenario, shows it).
 */
static void test_faults_compose(void)
{
	char path[P], text[4096];
	const char *nicsim = nst_bin("nicsim");

	snprintf(text, sizeof(text),
		 "# faults on one link healed in any order\n"
		 "seed 1\n"
		 "nic a 198.18.0.1\n"
		 "nic b 198.18.0.2\n"
		 "link a -> b latency 10us\n"
		 "program show on a \"%s link show | grep '198.18.0.1 -> 198.18.0.2'\"\n"
		 /* Loss, then down: heal the first first. */
		 "fault A a -> b loss 10%% optional\n"
		 "fault B a -> b down optional\n"
		 "heal A\n"
		 "start show\n"
		 "wait show exit 0\n"
		 "expect show output /: down latency 10 seed/\n"
		 "heal B\n"
		 "start show\n"
		 "wait show exit 0\n"
		 "expect show output /: up latency 10 seed/\n"
		 /* The same, healed the other way. */
		 "fault C a -> b loss 10%% optional\n"
		 "fault D a -> b down optional\n"
		 "heal D\n"
		 "start show\n"
		 "wait show exit 0\n"
		 "expect show output /: up latency 10 loss 10 seed/\n"
		 "heal C\n"
		 "start show\n"
		 "wait show exit 0\n"
		 "expect show output /: up latency 10 seed/\n"
		 /* Two faults on one setting: the later one holds while armed. */
		 "fault E a -> b loss 10%% optional\n"
		 "fault F a -> b loss 50%% optional\n"
		 "fault G a -> b down optional\n"
		 "heal E\n"
		 "start show\n"
		 "wait show exit 0\n"
		 "expect show output /: down latency 10 loss 50 seed/\n"
		 "heal G\n"
		 "start show\n"
		 "wait show exit 0\n"
		 "expect show output /: up latency 10 loss 50 seed/\n"
		 "heal F\n"
		 "start show\n"
		 "wait show exit 0\n"
		 "expect show output /: up latency 10 seed/\n"
		 "fault H a -> b down optional\n"
		 "fault I a -> b down optional\n"
		 "heal I\n"
		 "start show\n"
		 "wait show exit 0\n"
		 "expect show output /: down latency 10 seed/\n"
		 "heal H\n"
		 "start show\n"
		 "wait show exit 0\n"
		 "expect show output /: up latency 10 seed/\n",
		 nicsim);
	write_file("compose.scn", text, path, sizeof(path));
	NST_EQ(SCN(path, "-v"), 0);
	OUT_HAS("1 scenario: 1 passed, 0 failed");
}

/* Whether text holds no control character but '\n' (a terminal's, or
 * XML's: tab too there) and no character reference. */
static bool no_controls(const char *text, bool xml)
{
	const unsigned char *u = (const unsigned char *)text;

	for (size_t i = 0; u[i]; i++)
		if ((u[i] < 0x20 && u[i] != '\n' && (xml || u[i] != '\t')) || u[i] == 0x7f) {
			printf("\nbyte 0x%02x at offset %zu\n", u[i], i);
			return false;
		}
	return strstr(text, "&#") == NULL;
}

/* ESC, BEL, NUL and 0x01 in a title and a program's output reach no
 * report raw. */
static void test_control_characters(void)
{
	char path[P], junit[P];
	static char xml[1 << 16];

	write_file("controls.scn",
		   "title \"red \\x1b[31mALERT\\x07 \\x01 end\"\n"
		   "nic a 198.18.0.1\n"
		   "program q on a \"printf 'a\\\\033[2Jb\\\\007c\\\\000d\\\\001e\\\\n'\"\n"
		   "start q\n"
		   "wait q exit 0\n"
		   "expect q output \"zzz\"\n",
		   path, sizeof(path));
	snprintf(junit, sizeof(junit), "%s/controls.xml", tmp);
	NST_EQ(SCN(path, "-v", "--junit", junit), 1);
	NST_TRUE(no_controls(out, false));
	OUT_HAS(": red \\x1b[31mALERT\\x07 \\x01 end (");
	OUT_HAS("output: a\\x1b[2Jb\\x07c\\0d\\x01e");
	NST_REQUIRE(read_all(junit, xml, sizeof(xml)));
	NST_CHECK_(no_controls(xml, true), CU_FALSE, "the XML: %.400s", xml);
	NST_TRUE(strstr(xml, "output: a\\x1b[2Jb\\x07c\\0d\\x01e") != NULL);
	NST_EQ(SCN(path, "--tap"), 1);
	NST_TRUE(no_controls(out, false));
	OUT_HAS("    output: a\\x1b[2Jb\\x07c\\0d\\x01e");
}

static int suite_init(void)
{
	return nst_suite_dir(tmp, sizeof(tmp), "scn-run", NST_TMP_ENV);
}

static int suite_clean(void)
{
	return nst_suite_dir_done(tmp);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"write_passes", test_write_passes},
	    {"memory_diff", test_memory_diff},
	    {"unchanged_follows_own_writes", test_unchanged_follows_own_writes},
	    {"fault_never_fired", test_fault_never_fired},
	    {"refusal_reason_spelling", test_refusal_reason_spelling},
	    {"refusal_since_mark", test_refusal_since_mark},
	    {"timeout_names_wait", test_timeout_names_wait},
	    {"programs_and_nics", test_programs_and_nics},
	    {"output_flood", test_output_flood},
	    {"every_nic_restarted", test_every_nic_restarted},
	    {"sigterm_cleans_up", test_sigterm_cleans_up},
	    {"killed_scenario_cleaned_up", test_killed_scenario_cleaned_up},
	    {"setsid_escape_ended", test_setsid_escape_ended},
	    {"killed_runner_cleaned_up", test_killed_runner_cleaned_up},
	    {"tap_and_junit", test_tap_and_junit},
	    {"junit_targets", test_junit_targets},
	    {"usage_errors_up_front", test_usage_errors_up_front},
	    {"same_seed_same_decisions", test_same_seed_same_decisions},
	    {"sigint_reported", test_sigint_reported},
	    {"sighup_and_not_run", test_sighup_and_not_run},
	    {"teardown_in_parallel", test_teardown_in_parallel},
	    {"host_end_status", test_host_end_status},
	    {"program_exit_ends_waits", test_program_exit_ends_waits},
	    {"programs_find_binaries", test_programs_find_binaries},
	    {"global_options", test_global_options},
	    {"faults_compose", test_faults_compose},
	    {"many_faults", test_many_faults},
	    {"long_line_regex_bounded", test_long_line_regex_bounded},
	    {"wait_counter_budget", test_wait_counter_budget},
	    {"capture_cut", test_capture_cut},
	    {"big_memory_expectations", test_big_memory_expectations},
	    {"long_tmpdir_reported", test_long_tmpdir_reported},
	    {"backreference_refused", test_backreference_refused},
	    {"control_characters", test_control_characters},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "scn_run", tests, suite_init, suite_clean);
}

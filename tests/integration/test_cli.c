/*
 * The nicsim CLI end to end: `nicsim up` starts real nicsimd processes in a
 * private directory, the query commands read them, `nicsim down` stops them.
 * A fake NIC (a child of this test) sends hand-made management replies, well
 * formed and malformed, to check what the CLI prints and what it refuses.
 *
 * The daemons `nicsim up` starts are not our children.  Their pids are read
 * from the pid files as soon as `up` returns, and the suite's clean-up kills
 * exactly those pids (if they are still nicsimd), whatever failed before.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "nicsim_abi.h"
#include "nicsim_mgmt.h"
#include "nstest.h"
#include "nststream.h"

#define RUN_MS 30000       /* bound on one nicsim command */
#define GONE_MS 5000       /* bound on a killed daemon disappearing */
#define FAKE_IDLE_MS 20000 /* the fake NIC exits after this long without a client */
#define MAX_TRACKED 8

/* Sizes that let the compiler see every path below fits. */
#define DIR_MAX 512
#define FILE_MAX 1024

static char tmp[256];
static char out[65536];
static pid_t tracked[MAX_TRACKED]; /* daemons read from pid files */
static pid_t fake_pid;

/* ---- Helpers --------------------------------------------------------------- */

/* Run the nicsim binary bin with the NULL-terminated args; its stdout and
 * stderr in out. */
static int nicsim_run_bin(const char *bin, const char *const *args)
{
	return nst_run_shown(bin, "nicsim", args, out, sizeof(out), RUN_MS);
}

static int nicsim_run(const char *const *args)
{
	char bin[PATH_MAX];

	snprintf(bin, sizeof(bin), "%s", nst_bin("nicsim"));
	return nicsim_run_bin(bin, args);
}

#define NICSIM(...) nicsim_run((const char *const[]){__VA_ARGS__, NULL})
#define OUT_HAS(text) NST_CHECK_(strstr(out, (text)) != NULL, CU_FALSE, "output has \"%s\"", (text))
#define OUT_LACKS(text) \
	NST_CHECK_(strstr(out, (text)) == NULL, CU_FALSE, "output lacks \"%s\"", (text))

static void track(pid_t pid)
{
	size_t i;

	for (i = 0; pid > 0 && i < MAX_TRACKED; i++) {
		if (tracked[i] == pid)
			return;
		if (!tracked[i]) {
			tracked[i] = pid;
			return;
		}
	}
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static bool sock_exists(void *path)
{
	return exists(path);
}

/* Kill exactly the tracked daemons that are still nicsimd; wait, bounded. */
static void kill_tracked(void)
{
	nst_kill_nicsimds(tracked, MAX_TRACKED, GONE_MS, "test_cli");
}

/* Occurrences of "key":<digit> in s. */
static int json_count_number(const char *s, const char *key)
{
	char pat[64];
	int n = 0;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	while ((s = strstr(s, pat))) {
		s += strlen(pat);
		n += *s >= '0' && *s <= '9';
	}
	return n;
}

static int suite_init(void)
{
	return nst_tmpdir(tmp, sizeof(tmp), "cli") ? -1 : 0;
}

static int suite_clean(void)
{
	kill_tracked();
	if (fake_pid > 0)
		nst_stop(fake_pid, 2000);
	fake_pid = 0;
	if (tmp[0])
		nst_rmtree(tmp);
	return 0;
}

/* ---- Usage errors ---------------------------------------------------------- */

static void test_usage_errors(void)
{
	char dir[DIR_MAX], longdir[DIR_MAX];
	int rc;

	rc = NICSIM("--nic", "10.0.0.1", "stats");
	NST_EQ(rc, 2);
	OUT_HAS("10.0.0.1");
	OUT_HAS("198.18.0.0/15");

	rc = NICSIM("--nic", "198.18.0", "stats");
	NST_EQ(rc, 2);
	OUT_HAS("198.18.0");

	rc = NICSIM("frobnicate");
	NST_EQ(rc, 2);
	OUT_HAS("unknown command 'frobnicate'");

	rc = NICSIM("stats", "--frob");
	NST_EQ(rc, 2);
	OUT_HAS("--frob");

	rc = NICSIM("show", "keys");
	NST_EQ(rc, 2);

	rc = NICSIM("up", "--hosts", "0");
	NST_EQ(rc, 2);
	OUT_HAS("--hosts");

	/* A timer code of 0 would turn the retransmission timer off. */
	rc = NICSIM("up", "--ack-timeout", "0");
	NST_EQ(rc, 2);
	OUT_HAS("--ack-timeout 0");
	rc = NICSIM("up", "--cm-retries", "16");
	NST_EQ(rc, 2);
	OUT_HAS("from 0 to 15");

	rc = NICSIM("stats", "--hosts", "2");
	NST_EQ(rc, 2);
	OUT_HAS("does not apply");

	rc = NICSIM("--help");
	NST_EQ(rc, 0);
	OUT_HAS("usage: nicsim");
	rc = NICSIM("help", "show", "faults");
	NST_EQ(rc, 0);
	OUT_HAS("usage: nicsim show faults");

	/* A directory without NICs: a runtime failure that says what to do. */
	snprintf(dir, sizeof(dir), "%s/none", tmp);
	rc = NICSIM("show", "tpt", "--dir", dir);
	NST_EQ(rc, 1);
	OUT_HAS("no NICs");
	OUT_HAS("nicsim up");

	/* Socket paths that cannot fit a sockaddr_un: refused before anything
	 * is created. */
	snprintf(longdir, sizeof(longdir), "%s/%0110d", tmp, 0);
	rc = NICSIM("up", "--dir", longdir, "--hosts", "1");
	NST_EQ(rc, 2);
	OUT_HAS("too long");
	NST_TRUE(!exists(longdir));
}

/* ---- Real NICs ------------------------------------------------------------- */

static void test_up_show_down(void)
{
	char dir[DIR_MAX], pidf[2][FILE_MAX], sock[2][FILE_MAX];
	pid_t pids[2];
	int rc, i;

	snprintf(dir, sizeof(dir), "%s/run", tmp);
	for (i = 0; i < 2; i++) {
		snprintf(pidf[i], sizeof(pidf[i]), "%s/nic-198.18.0.%d.pid", dir, i + 1);
		snprintf(sock[i], sizeof(sock[i]), "%s/nic-198.18.0.%d.sock", dir, i + 1);
	}
	rc = NICSIM("up", "--dir", dir, "--hosts", "2");
	/* First of all, learn what to kill if anything below fails. */
	for (i = 0; i < 2; i++) {
		pids[i] = nst_read_pid_file(pidf[i]);
		track(pids[i]);
	}
	NST_REQUIRE_EQ(rc, 0);
	OUT_HAS("export NICSIM_DIR=");
	for (i = 0; i < 2; i++) {
		NST_REQUIRE_GT(pids[i], 0);
		NST_TRUE(nst_pid_alive(pids[i]));
		NST_TRUE(nst_pid_is_nicsimd(pids[i]));
		NST_TRUE(exists(sock[i]));
	}

	rc = NICSIM("stats", "--json", "--dir", dir);
	NST_EQ(rc, 0);
	NST_TRUE(nst_json_balanced(out));
	NST_EQ(json_count_number(out, "tpt_capacity"), 2);
	OUT_HAS("\"addr\":\"198.18.0.1\"");
	OUT_HAS("\"addr\":\"198.18.0.2\"");

	rc = NICSIM("stats", "--dir", dir);
	NST_EQ(rc, 0);
	OUT_HAS("tpt_capacity");
	OUT_HAS("TPT capacity");

	rc = NICSIM("show", "tpt", "--dir", dir);
	NST_EQ(rc, 0);
	OUT_HAS("198.18.0.1");
	OUT_HAS("198.18.0.2");

	rc = NICSIM("show", "tpt", "--json", "--dir", dir);
	NST_EQ(rc, 0);
	NST_TRUE(nst_json_balanced(out));

	rc = NICSIM("show", "faults", "--dir", dir);
	NST_EQ(rc, 0);

	/* One NIC, and the directory from the environment as the provider
	 * finds it. */
	NST_REQUIRE_EQ(setenv("NICSIM_DIR", dir, 1), 0);
	rc = NICSIM("--nic", "198.18.0.2", "stats");
	unsetenv("NICSIM_DIR");
	NST_EQ(rc, 0);
	OUT_HAS("nic 198.18.0.2");
	OUT_LACKS("198.18.0.1");

	rc = NICSIM("--nic", "198.18.0.7", "--dir", dir, "stats");
	NST_EQ(rc, 1);
	OUT_HAS("198.18.0.7");

	/* A second `up` on the same directory is refused and changes nothing. */
	rc = NICSIM("up", "--dir", dir, "--hosts", "2");
	NST_NE(rc, 0);
	OUT_HAS("already answering");
	OUT_HAS("started nothing");
	for (i = 0; i < 2; i++) {
		NST_TRUE(nst_pid_alive(pids[i]));
		NST_EQ(nst_read_pid_file(pidf[i]), pids[i]);
	}
	NST_EQ(NICSIM("up", "--dir", dir, "--hosts", "2", "--nic", "198.18.0.2"), 2);

	/* One NIC dies: a plain `up` still refuses (the other answers) and says
	 * how to start the missing one alone, which `up --nic` does. */
	NST_REQUIRE_EQ(kill(pids[1], SIGKILL), 0);
	for (i = 0; i < GONE_MS && nst_pid_alive(pids[1]); i++)
		nst_sleep_ms(1);
	NST_REQUIRE(!nst_pid_alive(pids[1]));
	rc = NICSIM("up", "--dir", dir);
	NST_EQ(rc, 1);
	OUT_HAS("--nic ADDR");
	rc = NICSIM("up", "--dir", dir, "--nic", "198.18.0.2");
	pids[1] = nst_read_pid_file(pidf[1]);
	track(pids[1]);
	NST_EQ(rc, 0);
	OUT_HAS("joined");
	OUT_HAS("started 1 NIC in");
	NST_TRUE(pids[1] > 0 && nst_pid_is_nicsimd(pids[1]));
	NST_TRUE(nst_pid_alive(pids[0]));
	NST_EQ(NICSIM("--nic", "198.18.0.2", "--dir", dir, "stats"), 0);

	rc = NICSIM("down", "--dir", dir);
	NST_EQ(rc, 0);
	OUT_HAS("stopped nic 198.18.0.1");
	OUT_HAS("stopped nic 198.18.0.2");
	for (i = 0; i < 2; i++) {
		NST_TRUE(!nst_pid_alive(pids[i]));
		NST_TRUE(!exists(sock[i]));
		NST_TRUE(!exists(pidf[i]));
	}

	rc = NICSIM("stats", "--dir", dir);
	NST_EQ(rc, 1);
	OUT_HAS("no NICs");

	rc = NICSIM("down", "--dir", dir);
	NST_EQ(rc, 0);
	OUT_HAS("no NICs to stop");
	kill_tracked();
}

/*
 * up --one-process: one nicsimd serves every NIC (each pid file names it,
 * each NIC answers as its own address, the others' logs point to the
 * first's); down stops it and every NIC's files go.
 */
static void test_up_one_process(void)
{
	char dir[DIR_MAX], pidf[3][FILE_MAX], sock[3][FILE_MAX], log[FILE_MAX];
	pid_t pid;
	int rc, i;

	snprintf(dir, sizeof(dir), "%s/one", tmp);
	for (i = 0; i < 3; i++) {
		snprintf(pidf[i], sizeof(pidf[i]), "%s/nic-198.18.0.%d.pid", dir, i + 1);
		snprintf(sock[i], sizeof(sock[i]), "%s/nic-198.18.0.%d.sock", dir, i + 1);
	}
	rc = NICSIM("up", "--dir", dir, "--hosts", "3", "--one-process");
	pid = nst_read_pid_file(pidf[0]);
	track(pid);
	NST_REQUIRE_EQ(rc, 0);
	NST_REQUIRE_GT(pid, 0);
	NST_TRUE(nst_pid_is_nicsimd(pid));
	for (i = 0; i < 3; i++)
		NST_EQ(nst_read_pid_file(pidf[i]), pid);
	rc = NICSIM("--nic", "198.18.0.3", "--dir", dir, "stats");
	NST_EQ(rc, 0);
	OUT_HAS("nic 198.18.0.3");
	snprintf(log, sizeof(log), "%s/nic-198.18.0.3.log", dir);
	{
		char text[512] = "";
		FILE *f = fopen(log, "re");

		NST_REQUIRE(f != NULL);
		NST_TRUE(fgets(text, sizeof(text), f) != NULL);
		fclose(f);
		NST_CHECK_(strstr(text, "nic-198.18.0.1.log") != NULL, CU_FALSE, "log: %s", text);
	}
	rc = NICSIM("down", "--dir", dir);
	NST_EQ(rc, 0);
	OUT_HAS("stopped nic 198.18.0.3");
	NST_TRUE(!nst_pid_alive(pid));
	for (i = 0; i < 3; i++)
		NST_TRUE(!exists(sock[i]) && !exists(pidf[i]));
	/* down --nic of one NIC stops its nicsimd, and says that the others
	 * it served stopped with it. */
	rc = NICSIM("up", "--dir", dir, "--hosts", "3", "--one-process");
	pid = nst_read_pid_file(pidf[0]);
	track(pid);
	NST_REQUIRE_EQ(rc, 0);
	rc = NICSIM("down", "--dir", dir, "--nic", "198.18.0.2");
	NST_EQ(rc, 0);
	OUT_HAS("stopped nic 198.18.0.2 (nicsimd pid");
	OUT_HAS("stopped nic 198.18.0.1 too: it ran in the same nicsimd");
	OUT_HAS("stopped nic 198.18.0.3 too: it ran in the same nicsimd");
	NST_TRUE(!nst_pid_alive(pid));
	for (i = 0; i < 3; i++)
		NST_TRUE(!exists(sock[i]) && !exists(pidf[i]));
	rc = NICSIM("down", "--dir", dir);
	NST_EQ(rc, 0);
	/* More NICs than one nicsimd serves: refused before anything starts. */
	rc = NICSIM("up", "--dir", dir, "--hosts", "17", "--one-process");
	NST_EQ(rc, 2);
	OUT_HAS("at most 16");
	NST_TRUE(!exists(pidf[0]));
	kill_tracked();
}

/*
 * A copy of nicsim in dir/bin beside a fake nicsimd (a shell script): nicsim
 * runs the nicsimd beside its own binary, so this is how a test makes the
 * daemon misbehave on purpose.  Returns the path of the copy in bin.
 */
static int make_fake_daemon(const char *dir, const char *script, char *bin, size_t size)
{
	char bindir[DIR_MAX + 8], daemon[DIR_MAX + 16], buf[65536];
	int in, outfd, rc = -1;
	ssize_t n = -1;

	snprintf(bindir, sizeof(bindir), "%s/bin", dir);
	snprintf(daemon, sizeof(daemon), "%s/nicsimd", bindir);
	snprintf(bin, size, "%s/nicsim", bindir);
	if (mkdir(dir, 0700) || mkdir(bindir, 0700))
		return -1;
	in = open(nst_bin("nicsim"), O_RDONLY | O_CLOEXEC);
	outfd = open(bin, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	while (in >= 0 && outfd >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
		if (write(outfd, buf, (size_t)n) != n)
			break;
	if (in >= 0 && outfd >= 0 && n == 0)
		rc = 0;
	if (in >= 0)
		close(in);
	if (outfd >= 0 && close(outfd))
		rc = -1;
	outfd = open(daemon, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	if (outfd < 0)
		return -1;
	if (write(outfd, script, strlen(script)) != (ssize_t)strlen(script))
		rc = -1;
	if (close(outfd))
		rc = -1;
	return rc;
}

/* A daemon that dies at start: `up` says which NIC, how it ended and what
 * its log says, and passes every daemon option on. */
static void test_up_daemon_exits(void)
{
	char dir[DIR_MAX], bin[FILE_MAX];
	int rc;

	snprintf(dir, sizeof(dir), "%s/dies", tmp);
	NST_REQUIRE_EQ(make_fake_daemon(dir,
					"#!/bin/sh\n"
					"echo \"fake nicsimd: cannot start: $*\" >&2\n"
					"exit 3\n",
					bin, sizeof(bin)),
		       0);
	rc = nicsim_run_bin(bin, (const char *const[]){"up",
						       "--dir",
						       dir,
						       "--hosts",
						       "1",
						       "--tpt-capacity",
						       "128",
						       "--max-reg",
						       "64K",
						       "--no-mw",
						       "--no-rdma-read",
						       "--log-level",
						       "debug",
						       "--ack-timeout",
						       "12",
						       "--retry-count",
						       "3",
						       "--rnr-retry",
						       "5",
						       "--cm-timeout",
						       "11",
						       "--cm-retries",
						       "2",
						       "--rnr-timer",
						       "3",
						       NULL});
	NST_EQ(rc, 1);
	OUT_HAS("nicsimd for 198.18.0.1");
	OUT_HAS("exited with status 3");
	OUT_HAS("fake nicsimd: cannot start: --addr 198.18.0.1 --dir ");
	OUT_HAS("--tpt-capacity 128 --max-reg 64K --no-mw --no-rdma-read --log-level debug "
		"--ack-timeout 12 --retry-count 3 --rnr-retry 5 --cm-timeout 11 --cm-retries 2 "
		"--rnr-timer 3");
}

/* A daemon that never answers: `up` gives up after --timeout-ms, names the
 * NIC and stops what it started. */
static void test_up_timeout(void)
{
	char dir[DIR_MAX], bin[FILE_MAX], pidf[FILE_MAX];
	uint64_t t0, ms;
	const char *p;
	pid_t pid;
	int rc;

	snprintf(dir, sizeof(dir), "%s/mute", tmp);
	snprintf(pidf, sizeof(pidf), "%s/nic-198.18.0.1.pid", dir);
	NST_REQUIRE_EQ(make_fake_daemon(dir, "#!/bin/sh\nexec sleep 30\n", bin, sizeof(bin)), 0);
	t0 = nst_now_ns();
	rc = nicsim_run_bin(bin, (const char *const[]){"up", "--dir", dir, "--hosts", "1",
						       "--timeout-ms", "300", NULL});
	ms = (nst_now_ns() - t0) / 1000000u;
	p = strstr(out, "nicsimd pid ");
	pid = p ? (pid_t)strtol(p + strlen("nicsimd pid "), NULL, 10) : 0;
	NST_EQ(rc, 1);
	OUT_HAS("NIC 198.18.0.1");
	OUT_HAS("not ready within 300 ms");
	NST_GE(ms, 300);
	NST_LT(ms, 300 + 5000 + 2000);
	NST_REQUIRE_GT(pid, 0);
	NST_TRUE(!nst_pid_alive(pid));
	NST_TRUE(!exists(pidf));
}

/* ---- A fake NIC with hand-made replies --------------------------------------- */

/*
 * Host records as a hostile host can make them: any process names itself
 * (PR_SET_NAME), and the cache counters are the host's own words.  An
 * attached host whose name holds a CSI, encoded in UTF-8 (C1, U+009B) and
 * as a byte alone, a right-to-left override (U+202E) and an e acute, which
 * stays; a detached one with all 16 bytes of its name used (no NUL), a
 * refusal of a kind no version knows and the largest numbers.
 */
#define HOSTILE_COMM          \
	"\xc2\x9b"            \
	"31m\x9b\xe2\x80\xae" \
	"caf\xc3\xa9"
#define DETACHED_COMM "0123456789abcdef"

static void hostile_hosts(struct nic_mgmt_host_rec h[2])
{
	memset(h, 0, 2 * sizeof(*h));
	h[0].ctx_id = 7;
	h[0].pid = 4343;
	memcpy(h[0].comm, HOSTILE_COMM, sizeof(HOSTILE_COMM));
	h[1].ctx_id = 5;
	h[1].pid = 4444;
	memcpy(h[1].comm, DETACHED_COMM, sizeof(h[1].comm));
	h[1].flags = NIC_MGMT_HOST_DETACHED;
	h[1].cache.magic = NIC_HOST_CACHE_MAGIC;
	h[1].cache.flags = UINT32_MAX;
	h[1].cache.refusal = 99;
	h[1].cache.refusal_errno = UINT32_MAX;
	h[1].cache.refusals = UINT64_MAX;
	h[1].cache.refusal_limit = UINT64_MAX;
	h[1].cache.refusal_in_use = UINT64_MAX;
	h[1].cache.refusal_needed = UINT64_MAX;
	h[1].cache.refusal_ns = UINT64_MAX;
}

/* Whether s holds only printable ASCII, UTF-8 beyond it, and newlines (no
 * C0 or C1 control character, no byte outside a UTF-8 character). */
static bool plain_text(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
			return false;
		if ((*p < 0x20 && *p != '\n') || *p == 0x7f)
			return false;
		if (*p >= 0x80 && *p < 0xc0 && (p == (const unsigned char *)s || p[-1] < 0x80))
			return false;
	}
	return true;
}

struct fake_nic {
	char sock[FILE_MAX];
	uint32_t addr;
};

static int send_reply(int fd, uint16_t op, uint32_t count, uint32_t flags, const void *recs,
		      size_t len)
{
	unsigned char msg[512];
	struct nic_mgmt_hdr h = {.magic = NIC_ABI_MAGIC,
				 .op = op,
				 .status = NIC_STATUS_OK,
				 .count = count,
				 .flags = flags};

	memcpy(msg, &h, sizeof(h));
	memcpy(msg + sizeof(h), recs, len);
	return send(fd, msg, sizeof(h) + len, MSG_NOSIGNAL) == (ssize_t)(sizeof(h) + len) ? 0 : -1;
}

/* Serve one management client: TPT and FAULTS well formed (the TPT listing
 * in two messages), HOSTS and DETACHED with the records hostile_hosts makes,
 * STATS malformed (a record count its length contradicts). */
static void fake_serve(int fd, const struct fake_nic *f)
{
	struct nic_mgmt_host_rec hosts[2];
	struct nic_hello_reply r = {
	    .magic = NIC_ABI_MAGIC,
	    .abi_version = NIC_ABI_VERSION,
	    .status = NIC_STATUS_OK,
	    .nic_pid = (uint32_t)getpid(),
	    .nic_addr = f->addr,
	    .tpt_capacity = 1024,
	    .page_size = 4096,
	};
	struct nic_mgmt_tpt_rec mr = {
	    .key = 0x000102,
	    .type = NIC_TPT_MR,
	    .state = NIC_TPT_VALID,
	    .access = NIC_ACCESS_ALL,
	    .va = 0x7f12a4000000ull,
	    .len = 1048576,
	    .ctx_id = 3,
	    .pid = 4242,
	    .comm = "fake-app",
	};
	struct nic_mgmt_tpt_rec mw = mr;
	struct nic_mgmt_fault_rec fault = {
	    .when_ns = 1700000000123456789ull,
	    .key = 0x000105,
	    .reason = NIC_TPT_R_STALE_KEY,
	    .access = NIC_ACCESS_REMOTE_READ,
	    .va = 0x7f12a4000000ull,
	    .len = 4096,
	    .ctx_id = 3,
	    .pid = 4242,
	    .entry_key = 0x000106,
	    .entry_state = NIC_TPT_VALID,
	    .entry_va = 0x7f12a4000000ull,
	    .entry_len = 1048576,
	    .entry_access = NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_REMOTE_READ,
	    .entry_pid = 4242,
	    .entry_changed_ns = 1700000000000001000ull,
	    .entry_ctx_id = 3,
	};
	/* A remote access, naming its requester (198.18.0.7, QP 33). */
	struct nic_mgmt_fault_rec remote[2];
	struct nic_stats stats = {.tpt_capacity = 1024};
	struct nic_hello hello;
	struct nic_mgmt_req req;
	struct pollfd p = {.fd = fd, .events = POLLIN};

	remote[0] = fault;
	remote[1] = fault;
	remote[1].access = NIC_ACCESS_REMOTE_WRITE;
	remote[1].qpn = 4098;
	remote[1].peer_addr = htonl(0xc6120007u);
	remote[1].peer_qpn = 33;
	remote[1].peer_psn = 1234;
	remote[1].peer_opcode = 10; /* RC_RDMA_WRITE_ONLY */
	mw.key = 0x000203;
	mw.type = NIC_TPT_MW;
	mw.access = NIC_ACCESS_REMOTE_READ;
	mw.mr_key = 0x000102;
	mw.qpn = 7;
	mw.len = 4096;
	hostile_hosts(hosts);
	if (poll(&p, 1, 5000) <= 0 || recv(fd, &hello, sizeof(hello), 0) != sizeof(hello))
		return;
	if (send(fd, &r, sizeof(r), MSG_NOSIGNAL) != sizeof(r))
		return;
	while (poll(&p, 1, 5000) > 0 && recv(fd, &req, sizeof(req), 0) == sizeof(req)) {
		switch (req.op) {
		case NIC_MGMT_TPT:
			send_reply(fd, req.op, 1, 0, &mr, sizeof(mr));
			send_reply(fd, req.op, 1, NIC_MGMT_F_LAST, &mw, sizeof(mw));
			break;
		case NIC_MGMT_FAULTS:
			send_reply(fd, req.op, 2, NIC_MGMT_F_LAST, remote, sizeof(remote));
			break;
		case NIC_MGMT_HOSTS:
			send_reply(fd, req.op, 1, NIC_MGMT_F_LAST, &hosts[0], sizeof(hosts[0]));
			break;
		case NIC_MGMT_DETACHED:
			send_reply(fd, req.op, 1, NIC_MGMT_F_LAST, &hosts[1], sizeof(hosts[1]));
			break;
		default: send_reply(fd, req.op, 1, NIC_MGMT_F_LAST, &stats, 8); break;
		}
	}
}

static int fake_main(void *arg)
{
	const struct fake_nic *f = arg;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct pollfd p;
	int lfd, fd;

	lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (lfd < 0 || strlen(f->sock) >= sizeof(sa.sun_path))
		return 1;
	strcpy(sa.sun_path, f->sock);
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 8))
		return 1;
	p.fd = lfd;
	p.events = POLLIN;
	while (poll(&p, 1, FAKE_IDLE_MS) > 0) {
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		fake_serve(fd, f);
		close(fd);
	}
	return 0;
}

static void test_fake_nic(void)
{
	static struct fake_nic f;
	char dir[DIR_MAX];
	int rc;

	snprintf(dir, sizeof(dir), "%s/fake", tmp);
	NST_REQUIRE_EQ(mkdir(dir, 0700), 0);
	snprintf(f.sock, sizeof(f.sock), "%s/nic-198.18.0.9.sock", dir);
	f.addr = htonl(0xc6120009u);
	fake_pid = nst_fork(fake_main, &f);
	NST_REQUIRE_GT(fake_pid, 0);
	(void)nst_wait_until(sock_exists, f.sock, 5000, 5);
	NST_REQUIRE(exists(f.sock));

	rc = NICSIM("show", "tpt", "--dir", dir);
	NST_EQ(rc, 0);
	OUT_HAS("nic 198.18.0.9 key 0x000102 type mr state valid ctx 3 va 0x7f12a4000000 "
		"len 1048576 access lw,rr,rw,bind pid 4242 comm fake-app");
	OUT_HAS("key 0x000203 type mw");
	OUT_HAS("mr 0x000102 qpn 7");

	rc = NICSIM("show", "faults", "--dir", dir);
	NST_EQ(rc, 0);
	OUT_HAS("pid 4242 (ctx 3) key 0x000105: key byte does not match the entry "
		"(stale or forged key); wanted rr va 0x7f12a4000000 len 4096; "
		"entry now key 0x000106 state valid ctx 3");
	OUT_HAS("access lw,rr; key changed ");
	OUT_HAS(" by pid 4242");
	OUT_HAS("pid 4242 (ctx 3, qpn 4098) from 198.18.0.7 qpn 33 (RC_RDMA_WRITE_ONLY psn 1234) "
		"key 0x000105: ");

	rc = NICSIM("show", "faults", "--json", "--dir", dir);
	NST_EQ(rc, 0);
	NST_TRUE(nst_json_balanced(out));
	OUT_HAS("\"reason\":\"STALE_KEY\"");
	OUT_HAS("\"requester\":null");
	OUT_HAS("\"requester\":{\"addr\":\"198.18.0.7\",\"qpn\":33,\"psn\":1234,"
		"\"opcode\":\"RC_RDMA_WRITE_ONLY\"}");

	/* Host records as a hostile host makes them: what reaches the terminal
	 * has no control character of any kind, and the JSON is whole. */
	rc = NICSIM("show", "hosts", "--dir", dir);
	NST_EQ(rc, 0);
	OUT_HAS("nic 198.18.0.9 ctx 7 pid 4343 qps 0 cache unknown comm ?31m??caf\xc3\xa9\n");
	OUT_HAS("nic 198.18.0.9 ctx 5 pid 4444 (detached, comm " DETACHED_COMM
		") last refusal: refusal of kind 99, unknown to this version\n");
	NST_TRUE(plain_text(out));
	rc = NICSIM("show", "hosts", "--json", "--dir", dir);
	NST_EQ(rc, 0);
	NST_TRUE(nst_json_balanced(out));
	NST_TRUE(plain_text(out));
	OUT_HAS("\"hosts\":[\n {\"ctx\":7,\"pid\":4343,\"comm\":\"\\u00c2\\u009b31m");
	OUT_HAS("\"detached\":[\n {\"ctx\":5,\"pid\":4444,\"comm\":\"" DETACHED_COMM "\",");
	OUT_HAS("\"last_refusal\":{\"kind\":99,\"errno\":4294967295,"
		"\"limit\":18446744073709551615,");

	/* The stats reply claims a record its length does not hold. */
	rc = NICSIM("stats", "--dir", dir);
	NST_EQ(rc, 1);
	OUT_HAS("198.18.0.9");
	OUT_HAS("record count does not match");

	NST_GE(nst_stop(fake_pid, 2000), 0);
	fake_pid = 0;
	/* Nobody listening any more: a stale socket, said so. */
	rc = NICSIM("stats", "--dir", dir);
	NST_EQ(rc, 1);
	OUT_HAS("stale socket");
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"usage_errors", test_usage_errors},
	    {"up_show_down", test_up_show_down},
	    {"up_one_process", test_up_one_process},
	    {"up_daemon_exits", test_up_daemon_exits},
	    {"up_timeout", test_up_timeout},
	    {"fake_nic", test_fake_nic},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "cli", tests, suite_init, suite_clean);
}

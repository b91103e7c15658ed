/*
 * The run directory end to end: one resolver for nicsimd, the tool and the
 * provider; a directory another user controls is refused by all of them;
 * nothing in it is followed through a link; `nicsim up` and `nicsim down`
 * lock it; `nicsim down` stops only the NICs that serve it; and a full
 * file system under it is named with how full it is and what to do, while
 * registrations, which keep nothing there, go on working.
 *
 * Each test works in its own directory below a private temporary one.  The
 * daemons `nicsim up` starts are not our children: their pids are read from
 * the pid files, and the suite's clean-up kills exactly those (if they are
 * still nicsimd), whatever failed before.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nstest.h"
#include "nicsim_provider.h"
#include "ws2san.h"

#define RUN_MS 30000   /* bound on one nicsim command */
#define GONE_MS 5000   /* bound on a daemon disappearing */
#define START_MS 10000 /* bound on a NIC this test starts answering */
#define MAX_TRACKED 8
#define DIR_MAX 512
#define FILE_MAX 1024
#define NIC1 "198.18.0.1"

static char tmp[256];
static char out[65536];
static pid_t tracked[MAX_TRACKED]; /* daemons read from pid files */
static int dir_no;

/* ---- Helpers --------------------------------------------------------------- */

/* Run a program of the build with the NULL-terminated args; its stdout and
 * stderr in out (printed, for the log). */
static int run_in(const char *prog, const char *const *args, char *buf, size_t size)
{
	char bin[PATH_MAX];

	snprintf(bin, sizeof(bin), "%s", nst_bin(prog));
	return nst_run_shown(bin, prog, args, buf, size, RUN_MS);
}

#define NICSIM(...) run_in("nicsim", (const char *const[]){__VA_ARGS__, NULL}, out, sizeof(out))
#define NICSIMD(...) run_in("nicsimd", (const char *const[]){__VA_ARGS__, NULL}, out, sizeof(out))
#define STR_EQ(a, b)                                                                              \
	NST_CHECK_(strcmp((a), (b)) == 0, CU_FALSE, "%s == %s (got \"%.200s\", want \"%.200s\")", \
		   #a, #b, (a), (b))
#define OUT_HAS(text) NST_CHECK_(strstr(out, (text)) != NULL, CU_FALSE, "output has \"%s\"", (text))

static void track(pid_t pid)
{
	for (size_t i = 0; pid > 0 && i < MAX_TRACKED; i++) {
		if (tracked[i] == pid)
			return;
		if (!tracked[i]) {
			tracked[i] = pid;
			return;
		}
	}
}

/* Track the daemon whose pid file dir/nic-<addr>.pid names. */
static void track_nic(const char *dir, const char *addr)
{
	char pidf[FILE_MAX];

	snprintf(pidf, sizeof(pidf), "%s/nic-%s.pid", dir, addr);
	track(nst_read_pid_file(pidf));
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* A fresh directory below tmp with mode 0700; its path in buf. */
static void new_dir(char *buf, size_t size)
{
	snprintf(buf, size, "%s/d%d", tmp, ++dir_no);
	NST_REQUIRE_EQ(mkdir(buf, 0700), 0);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	NST_REQUIRE(f != NULL);
	fputs(text, f);
	NST_REQUIRE_EQ(fclose(f), 0);
}

/* The first line of a file, or "" if it cannot be read. */
static const char *read_line(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");

	buf[0] = '\0';
	if (f) {
		if (!fgets(buf, (int)size, f))
			buf[0] = '\0';
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = '\0';
	return buf;
}

/* Set (value not NULL) or unset an environment variable; the old value is
 * copied into old (NULL in *had when unset). */
static void env_swap(const char *name, const char *value, char *old, size_t size, bool *had)
{
	const char *v = getenv(name);

	*had = v != NULL;
	if (v)
		snprintf(old, size, "%s", v);
	if (value)
		setenv(name, value, 1);
	else
		unsetenv(name);
}

static void env_restore(const char *name, const char *old, bool had)
{
	if (had)
		setenv(name, old, 1);
	else
		unsetenv(name);
}

static int suite_init(void)
{
	return nst_tmpdir(tmp, sizeof(tmp), "rundir") ? -1 : 0;
}

static int suite_clean(void)
{
	nst_kill_nicsimds(tracked, MAX_TRACKED, GONE_MS, "test_rundir");
	if (tmp[0])
		nst_rmtree(tmp);
	return 0;
}

/* ---- One resolver ------------------------------------------------------------ */

/* `nicsim dir` and the provider resolve the directory alike; a relative
 * $XDG_RUNTIME_DIR is ignored by both, as the XDG specification says. */
static void test_one_resolver(void)
{
	char old_dir[PATH_MAX], old_xdg[PATH_MAX], want[64], prov[PATH_MAX], line[PATH_MAX],
	    small[4];
	bool had_dir, had_xdg;
	int rc;

	snprintf(want, sizeof(want), "/tmp/nicsim-%u", (unsigned)getuid());
	env_swap("NICSIM_DIR", NULL, old_dir, sizeof(old_dir), &had_dir);
	env_swap("XDG_RUNTIME_DIR", "run", old_xdg, sizeof(old_xdg), &had_xdg);

	rc = NICSIM("dir");
	snprintf(line, sizeof(line), "%.*s", (int)strcspn(out, "\n"), out);
	NST_EQ(nicsim_run_dir(prov, sizeof(prov)), 0);
	/* WSA codes, as every extra of nicsim_provider.h returns. */
	NST_EQ(nicsim_run_dir(small, sizeof(small)), WSAENOBUFS);
	NST_EQ(nicsim_run_dir(NULL, 4), WSAEFAULT);
	env_restore("NICSIM_DIR", old_dir, had_dir);
	env_restore("XDG_RUNTIME_DIR", old_xdg, had_xdg);
	/* /tmp/nicsim-UID may belong to someone else on a shared machine:
	 * then `nicsim dir` says so and fails; the path is what matters. */
	if (rc == 0)
		STR_EQ(line, want);
	else
		OUT_HAS(want);
	STR_EQ(prov, want);

	rc = NICSIM("dir", "--dir", "/nonexistent/x//");
	NST_EQ(rc, 0);
	OUT_HAS("/nonexistent/x\n");
	rc = NICSIM("help", "dir");
	NST_EQ(rc, 0);
	OUT_HAS("$(nicsim dir)");
}

/* $XDG_RUNTIME_DIR counts only when it is a valid runtime directory: an
 * existing directory of ours that nobody else may write to.  Otherwise the
 * resolver falls back to /tmp/nicsim-UID, and `up` creates nothing there. */
static void test_xdg_must_be_valid(void)
{
	char old_dir[PATH_MAX], old_xdg[PATH_MAX], want[DIR_MAX + 16], tmpdef[64];
	char dir[DIR_MAX], missing[DIR_MAX + 16], prov[PATH_MAX];
	bool had_dir, had_xdg;

	snprintf(tmpdef, sizeof(tmpdef), "/tmp/nicsim-%u\n", (unsigned)getuid());
	new_dir(dir, sizeof(dir));
	snprintf(missing, sizeof(missing), "%s/none", dir);
	env_swap("NICSIM_DIR", NULL, old_dir, sizeof(old_dir), &had_dir);

	env_swap("XDG_RUNTIME_DIR", missing, old_xdg, sizeof(old_xdg), &had_xdg);
	NICSIM("dir");
	OUT_HAS(tmpdef);
	NST_EQ(nicsim_run_dir(prov, sizeof(prov)), 0);
	NST_TRUE(strstr(prov, "/tmp/nicsim-") == prov);
	NST_TRUE(!exists(missing));

	setenv("XDG_RUNTIME_DIR", dir, 1);
	snprintf(want, sizeof(want), "%s/nicsim\n", dir);
	NST_EQ(NICSIM("dir"), 0);
	NST_TRUE(strstr(out, want) != NULL);
	NST_EQ(nicsim_run_dir(prov, sizeof(prov)), 0);
	NST_EQ(strncmp(prov, want, strlen(want) - 1), 0);

	/* Open to others: not valid either. */
	NST_REQUIRE_EQ(chmod(dir, 0777), 0);
	NICSIM("dir");
	OUT_HAS(tmpdef);
	NST_REQUIRE_EQ(chmod(dir, 0700), 0);
	env_restore("NICSIM_DIR", old_dir, had_dir);
	env_restore("XDG_RUNTIME_DIR", old_xdg, had_xdg);
}

/* A relative --dir or $NICSIM_DIR is made absolute from the working
 * directory, so that nicsimd (which runs in "/") and the provider agree. */
static void test_relative_dir_made_absolute(void)
{
	char old_dir[PATH_MAX], cwd[PATH_MAX], dir[DIR_MAX], want[DIR_MAX + 16], prov[PATH_MAX];
	bool had_dir;

	new_dir(dir, sizeof(dir));
	NST_REQUIRE(getcwd(cwd, sizeof(cwd)) != NULL);
	NST_REQUIRE_EQ(chdir(dir), 0);
	snprintf(want, sizeof(want), "%s/rel/x\n", dir);
	NICSIM("dir", "--dir", "rel/x");
	NST_TRUE(strstr(out, want) != NULL);
	env_swap("NICSIM_DIR", "./rel/x/", old_dir, sizeof(old_dir), &had_dir);
	NICSIM("dir");
	NST_TRUE(strstr(out, want) != NULL);
	NST_EQ(nicsim_run_dir(prov, sizeof(prov)), 0);
	NST_EQ(strncmp(prov, want, strlen(want) - 1), 0);
	NST_EQ(strlen(prov), strlen(want) - 1);
	env_restore("NICSIM_DIR", old_dir, had_dir);
	NST_REQUIRE_EQ(chdir(cwd), 0);
}

/* `up` creates the run directory itself, never missing parents, and says
 * what to do; a path too long for the system is not for removing. */
static void test_up_creates_only_the_last_component(void)
{
	char dir[DIR_MAX], deeper[DIR_MAX + 32], parent[DIR_MAX + 16], longdir[DIR_MAX + 400];

	new_dir(dir, sizeof(dir));
	snprintf(parent, sizeof(parent), "%s/new", dir);
	snprintf(deeper, sizeof(deeper), "%s/new/deeper", dir);
	NST_EQ(NICSIM("up", "--dir", deeper, "--hosts", "1"), 1);
	OUT_HAS("its parent directory does not exist");
	OUT_HAS("create the parent first");
	NST_TRUE(!exists(parent));

	snprintf(longdir, sizeof(longdir), "%s/%0300d", dir, 0);
	NST_EQ(NICSIM("dir", "--dir", longdir), 1);
	OUT_HAS("the path is too long: choose a shorter one");
	NST_TRUE(strstr(out, "remove it") == NULL);
}

/* A link planted in place of the lock is named as such, not as ELOOP. */
static void test_lock_link_named(void)
{
	char dir[DIR_MAX], lock[FILE_MAX];

	new_dir(dir, sizeof(dir));
	snprintf(lock, sizeof(lock), "%s/nicsim.lock", dir);
	NST_REQUIRE_EQ(symlink("/nonexistent", lock), 0);
	NST_EQ(NICSIM("--dir", dir, "up", "--hosts", "1"), 1);
	OUT_HAS("nicsim.lock is a symbolic link, which nicsim never follows in a run directory: "
		"remove it");
	NST_TRUE(strstr(out, "Too many levels") == NULL);

	/* And in place of the fabric, for the commands that read it. */
	snprintf(lock, sizeof(lock), "%s/target", dir);
	write_file(lock, "not a fabric\n");
	snprintf(lock, sizeof(lock), "%s/fabric.shm", dir);
	NST_REQUIRE_EQ(symlink("target", lock), 0);
	NST_EQ(NICSIM("--dir", dir, "link", "show"), 1);
	OUT_HAS("fabric.shm is a symbolic link, which nicsim never follows");
	NST_EQ(NICSIM("--dir", dir, "capture", "--count", "1"), 1);
	OUT_HAS("fabric.shm is a symbolic link, which nicsim never follows");
}

/* ---- A directory another user controls ------------------------------------------ */

/* Every program refuses dir, saying why (why_text) and what to do. */
static void check_refused(const char *dir, const char *why_text)
{
	char log[FILE_MAX];
	int rc;

	rc = NICSIM("--dir", dir, "dir");
	NST_EQ(rc, 1);
	OUT_HAS(why_text);
	OUT_HAS("choose another with --dir");

	rc = NICSIM("--dir", dir, "up", "--hosts", "1");
	track_nic(dir, NIC1);
	NST_EQ(rc, 1);
	OUT_HAS(why_text);
	snprintf(log, sizeof(log), "%s/nic-" NIC1 ".log", dir);
	NST_TRUE(!exists(log));

	rc = NICSIM("--dir", dir, "stats");
	NST_EQ(rc, 1);
	OUT_HAS(why_text);

	rc = NICSIM("capture", "--dir", dir, "--count", "1");
	NST_EQ(rc, 1);
	OUT_HAS(why_text);

	rc = NICSIMD("--dir", dir, "--addr", "198.18.0.7");
	NST_EQ(rc, 1);
	OUT_HAS(why_text);

	/* The provider (in a host program) does not search it for NICs. */
	rc = run_in("nicsim-regdemo", (const char *const[]){"--dir", dir, "--addr", NIC1, NULL},
		    out, sizeof(out));
	NST_NE(rc, 0);
	OUT_HAS(why_text);
	OUT_HAS("not searching it for NICs");
	/* Named after the program it runs in, with advice that fits it. */
	OUT_HAS("nicsim-regdemo: nicsim provider: run directory");
	NST_TRUE(strstr(out, "set NICSIM_DIR") == NULL);
	/* No advice to start a NIC in a directory the provider refused. */
	NST_TRUE(strstr(out, "start one with") == NULL);
	OUT_HAS("no usable run directory");
	/* nicsim_run_dir() names it, and says it is refused. */
	{
		char old_dir[PATH_MAX], prov[PATH_MAX];
		bool had_dir;

		env_swap("NICSIM_DIR", dir, old_dir, sizeof(old_dir), &had_dir);
		NST_EQ(nicsim_run_dir(prov, sizeof(prov)), WSAEACCES);
		NST_EQ(strcmp(prov, dir), 0);
		env_restore("NICSIM_DIR", old_dir, had_dir);
	}
}

static void test_foreign_dir_refused(void)
{
	char dir[DIR_MAX], text[128];

	if (geteuid() == 0) {
		/* As root: a directory that uid 65534 owns, as an attacker
		 * creating /tmp/nicsim-0 first would leave it. */
		new_dir(dir, sizeof(dir));
		NST_REQUIRE_EQ(chown(dir, 65534, 65534), 0);
		snprintf(text, sizeof(text), "is a directory owned by uid 65534, not you (0)");
		check_refused(dir, text);
		/* Not "remove it": in a sticky /tmp the victim cannot. */
		OUT_HAS("another user created it");
		NST_TRUE(strstr(out, "remove it") == NULL);
	} else {
		/* As anyone else: a directory that root owns. */
		snprintf(text, sizeof(text), "is owned by uid 0, not you (%u)",
			 (unsigned)geteuid());
		check_refused("/", text);
	}
}

static void test_open_dir_refused(void)
{
	char dir[DIR_MAX], sub[DIR_MAX + 8];

	new_dir(dir, sizeof(dir));
	NST_REQUIRE_EQ(chmod(dir, 0770), 0);
	check_refused(dir, "has mode 0770: group or others may write to it");
	NST_REQUIRE_EQ(chmod(dir, 0757), 0);
	check_refused(dir, "has mode 0757");

	/* Ours and private, but inside a directory where others could
	 * rename it away and plant something else (not sticky, as /tmp is). */
	NST_REQUIRE_EQ(chmod(dir, 0777), 0);
	snprintf(sub, sizeof(sub), "%s/run", dir);
	NST_REQUIRE_EQ(mkdir(sub, 0700), 0);
	check_refused(sub, "which has mode 0777: group or others may replace what is in it");
	NST_REQUIRE_EQ(chmod(dir, 01777), 0);
	NST_EQ(NICSIM("--dir", sub, "dir"), 0);
}

static void test_linked_dir_refused(void)
{
	char dir[DIR_MAX], link[DIR_MAX + 8];

	new_dir(dir, sizeof(dir));
	snprintf(link, sizeof(link), "%s.lnk", dir);
	NST_REQUIRE_EQ(symlink(dir, link), 0);
	check_refused(link, "is a symbolic link");
}

/* ---- Nothing followed through a link ---------------------------------------------- */

/* A link planted where `nicsim up` writes a NIC's log: up fails, and the
 * file the link points to keeps its content. */
static void test_log_link_not_followed(void)
{
	char dir[DIR_MAX], victim[FILE_MAX], log[FILE_MAX], line[64];
	int rc;

	new_dir(dir, sizeof(dir));
	snprintf(victim, sizeof(victim), "%s/victim", tmp);
	write_file(victim, "precious\n");
	snprintf(log, sizeof(log), "%s/nic-" NIC1 ".log", dir);
	NST_REQUIRE_EQ(symlink(victim, log), 0);

	rc = NICSIM("--dir", dir, "up", "--hosts", "1");
	track_nic(dir, NIC1);
	NST_EQ(rc, 1);
	OUT_HAS("is a symbolic link, which nicsim never follows in a run directory: remove it");
	STR_EQ(read_line(victim, line, sizeof(line)), "precious");
	rc = NICSIM("--dir", dir, "down");
	NST_EQ(rc, 0);
}

/* ---- The lock ---------------------------------------------------------------- */

/* While another holder has the lock, `up` waits, then gives up saying so,
 * and touches nothing. */
static void test_up_waits_for_the_lock(void)
{
	char dir[DIR_MAX], lock[FILE_MAX], log[FILE_MAX];
	int fd, rc;

	new_dir(dir, sizeof(dir));
	snprintf(lock, sizeof(lock), "%s/nicsim.lock", dir);
	snprintf(log, sizeof(log), "%s/nic-" NIC1 ".log", dir);
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	NST_REQUIRE(fd >= 0);
	NST_REQUIRE_EQ(flock(fd, LOCK_EX), 0);

	rc = NICSIM("--dir", dir, "up", "--hosts", "1", "--timeout-ms", "300");
	track_nic(dir, NIC1);
	close(fd);
	NST_EQ(rc, 1);
	OUT_HAS("holds the run directory");
	NST_TRUE(!exists(log));
}

/* `down --timeout-ms T` waits at most about T for a held lock, as the help
 * says, not T plus up's own bound. */
static void test_down_lock_wait_bounded(void)
{
	char dir[DIR_MAX], lock[FILE_MAX];
	struct timespec t0, t1;
	long ms;
	int fd, rc;

	new_dir(dir, sizeof(dir));
	snprintf(lock, sizeof(lock), "%s/nicsim.lock", dir);
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	NST_REQUIRE(fd >= 0);
	NST_REQUIRE_EQ(flock(fd, LOCK_EX), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = NICSIM("--dir", dir, "down", "--timeout-ms", "300");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	close(fd);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	NST_EQ(rc, 1);
	OUT_HAS("holds the run directory");
	OUT_HAS("after 300 ms");
	/* Well below the 10300 ms it took when up's bound was added. */
	NST_CHECK_(ms < 5000, CU_FALSE, "down returned after %ld ms (want < 5000)", ms);
}

struct up_run {
	const char *dir;
	char out[8192];
	int rc;
};

static int up_child(void *arg)
{
	struct up_run *u = arg;

	return run_in("nicsim", (const char *const[]){"--dir", u->dir, "up", "--hosts", "2", NULL},
		      u->out, sizeof(u->out));
}

/* Two `nicsim up` at once in one directory: one starts the NICs, the other
 * waits for it and then refuses, and the NICs run with their logs intact. */
static void test_two_ups_at_once(void)
{
	struct up_run *u = calloc(2, sizeof(*u));
	char dir[DIR_MAX], log[FILE_MAX], line[256];
	pid_t pid[2];
	int status, ok = 0;

	NST_REQUIRE(u != NULL);
	new_dir(dir, sizeof(dir));
	for (int i = 0; i < 2; i++) {
		u[i].dir = dir;
		pid[i] = nst_fork(up_child, &u[i]);
		NST_REQUIRE(pid[i] > 0);
	}
	for (int i = 0; i < 2; i++) {
		status = nst_wait(pid[i], RUN_MS + 5000);
		NST_REQUIRE(status >= 0);
		NST_REQUIRE(WIFEXITED(status));
		u[i].rc = WEXITSTATUS(status);
		ok += u[i].rc == 0;
	}
	track_nic(dir, NIC1);
	track_nic(dir, "198.18.0.2");
	NST_EQ(ok, 1);
	NST_EQ(u[0].rc + u[1].rc, 1);

	/* Both NICs answer, and the winner's logs were not truncated by the
	 * loser: each still holds the daemon's start-up lines. */
	NST_EQ(NICSIM("--dir", dir, "stats"), 0);
	for (int i = 1; i <= 2; i++) {
		snprintf(log, sizeof(log), "%s/nic-198.18.0.%d.log", dir, i);
		NST_TRUE(read_line(log, line, sizeof(line))[0] != '\0');
	}
	/* The demo's host program works in it, every step (it connects before
	 * it exposes a buffer). */
	NST_EQ(run_in("nicsim-regdemo", (const char *const[]){"--dir", dir, "--addr", NIC1, NULL},
		      out, sizeof(out)),
	       0);
	OUT_HAS("exposed RDMA buffer");
	NST_EQ(NICSIM("--dir", dir, "down"), 0);
	free(u);
}

/* ---- down stops only this directory's NICs --------------------------------------- */

/* A pid file naming the nicsimd of another run directory: down leaves that
 * NIC alone. */
static void test_down_spares_another_dirs_nic(void)
{
	char a[DIR_MAX], b[DIR_MAX], pidf[FILE_MAX], text[32];
	pid_t other;
	int rc;

	new_dir(a, sizeof(a));
	new_dir(b, sizeof(b));
	other = nst_start_nic(b, NIC1, NULL, START_MS);
	NST_REQUIRE(other > 0);
	snprintf(pidf, sizeof(pidf), "%s/nic-" NIC1 ".pid", a);
	snprintf(text, sizeof(text), "%d\n", (int)other);
	write_file(pidf, text);

	rc = NICSIM("--dir", a, "down");
	NST_EQ(rc, 0);
	OUT_HAS("does not listen on");
	NST_TRUE(nst_pid_alive(other));
	NST_TRUE(nst_stop_clean(other, GONE_MS));
}

/* ---- A full file system ------------------------------------------------------ */

/* Fill the file system of dir to the last block: a file that grows until
 * ENOSPC.  True if it is full now. */
static bool fill(const char *dir, int n)
{
	char path[FILE_MAX], block[4096];
	bool full = false;
	int fd;

	snprintf(path, sizeof(path), "%s/fill%d", dir, n);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return false;
	memset(block, 0xa5, sizeof(block));
	for (;;) {
		ssize_t w = write(fd, block, sizeof(block));

		if (w < 0) {
			full = errno == ENOSPC;
			break;
		}
	}
	close(fd);
	return full;
}

/*
 * A run directory on a 4 MiB tmpfs, in a mount namespace of this test's own
 * (so that nothing outside sees the mount, and it goes with the process).
 * With the NIC up and the file system then full, a host still attaches,
 * registers, connects and exposes memory: nothing of a registration lives
 * in the run directory (the context segment and shared buffers are memfds,
 * pinning is mlock).  What does need room there says so, with the numbers:
 * the fabric `nicsim up` creates, and the pid file of a NIC.
 */
static void test_full_file_system(void)
{
	char dir[DIR_MAX], want[DIR_MAX * 3];
	int rc;

	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		printf("\n    skipped: needs CAP_SYS_ADMIN for a mount namespace (%s) ",
		       strerror(errno));
		return;
	}
	new_dir(dir, sizeof(dir));
	NST_REQUIRE_EQ(
	    mount("nicsim-test", dir, "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=0700"), 0);

	rc = NICSIM("--dir", dir, "up", "--hosts", "1");
	track_nic(dir, NIC1);
	NST_REQUIRE_EQ(rc, 0);
	NST_REQUIRE(fill(dir, 1));
	rc = run_in("nicsim-regdemo", (const char *const[]){"--dir", dir, "--addr", NIC1, NULL},
		    out, sizeof(out));
	NST_EQ(rc, 0);
	OUT_HAS("registered local buffer");
	NST_EQ(NICSIM("--dir", dir, "down"), 0);

	/* Room freed by down is taken again: now nothing new fits. */
	NST_REQUIRE(fill(dir, 2));
	snprintf(want, sizeof(want),
		 "the file system of run directory %s has 0 bytes free of 64 MiB", dir);
	rc = NICSIM("--dir", dir, "up", "--hosts", "1");
	track_nic(dir, NIC1);
	NST_EQ(rc, 1);
	OUT_HAS("cannot create the fabric");
	NST_CHECK_(strstr(out, want) != NULL, CU_FALSE, "output has \"%.300s\"", want);
	OUT_HAS(" needed (df -h ");
	OUT_HAS("): free space there, or choose another run directory with --dir or NICSIM_DIR");
	rc = NICSIMD("--dir", dir, "--addr", "198.18.0.7");
	NST_EQ(rc, 1);
	OUT_HAS("/nic-198.18.0.7.pid: the file system of run directory");
	NST_CHECK_(strstr(out, want) != NULL, CU_FALSE, "output has \"%.300s\"", want);

	NST_EQ(umount2(dir, MNT_DETACH), 0);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"one_resolver", test_one_resolver},
	    {"xdg_must_be_valid", test_xdg_must_be_valid},
	    {"relative_dir_made_absolute", test_relative_dir_made_absolute},
	    {"up_creates_only_the_last_component", test_up_creates_only_the_last_component},
	    {"lock_link_named", test_lock_link_named},
	    {"down_lock_wait_bounded", test_down_lock_wait_bounded},
	    {"foreign_dir_refused", test_foreign_dir_refused},
	    {"open_dir_refused", test_open_dir_refused},
	    {"linked_dir_refused", test_linked_dir_refused},
	    {"log_link_not_followed", test_log_link_not_followed},
	    {"up_waits_for_the_lock", test_up_waits_for_the_lock},
	    {"two_ups_at_once", test_two_ups_at_once},
	    {"down_spares_another_dirs_nic", test_down_spares_another_dirs_nic},
	    {"full_file_system", test_full_file_system},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "rundir", tests, suite_init, suite_clean);
}

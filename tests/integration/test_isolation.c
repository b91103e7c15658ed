/*
 * A test program killed with SIGKILL leaves no process behind.
 *
 * The test runs this program again as a victim ("test_isolation victim"),
 * which starts, in a run directory of its own, two NICs through
 * `nicsim up` (daemons: their own session, not its children), one NIC of
 * its own (nst_start_nic) and one helper process (nst_fork), says where they
 * are on stdout, and waits.  The test kills the victim with SIGKILL and then
 * waits, with a generous deadline, until none of those processes is left:
 * the forked ones die with their parent (PR_SET_PDEATHSIG), the daemons are
 * ended by the victim's guard (nstest.h).  Whatever is left is named, and
 * then killed here so that the failure does not outlive the test either.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nstest.h"
#include "nstnic.h"

#define WAIT_MS 20000
#define MAX_PROCS 16

static char tmp[256];

/* ---- The victim --------------------------------------------------------------- */

static int helper_main(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return 0;
}

/* Start everything, report "ready DIR HELPER_PID", and wait to be killed. */
static void victim_test(void)
{
	const char *const addrs[] = {"198.18.0.1", NULL};
	char dir[256], up_dir[300], own_dir[300], out[4096];
	pid_t nic, helper;
	int rc;

	NST_REQUIRE_EQ(nst_tmpdir(dir, sizeof(dir), "victim"), 0);
	snprintf(up_dir, sizeof(up_dir), "%s/up", dir);
	snprintf(own_dir, sizeof(own_dir), "%s/own", dir);
	rc = nst_run(
	    (const char *const[]){nst_bin("nicsim"), "up", "--dir", up_dir, "--hosts", "2", NULL},
	    out, sizeof(out), WAIT_MS);
	NST_CHECK_(rc == 0, CU_TRUE, "nicsim up: exit %d: %.400s", rc, out);
	NST_REQUIRE_EQ(mkdir(own_dir, 0700), 0);
	NST_REQUIRE_EQ(nst_make_fabric(own_dir, addrs), 0);
	nic = nst_start_nic(own_dir, addrs[0], NULL, WAIT_MS);
	NST_REQUIRE_GT(nic, 0);
	helper = nst_fork(helper_main, NULL);
	NST_REQUIRE_GT(helper, 0);
	printf("\nready %s %d\n", dir, (int)helper);
	fflush(stdout);
	for (;;)
		pause();
}

/* ---- The test ----------------------------------------------------------------- */

/* Whether /proc/<pid>/cmdline holds an argument that is dir or below it. */
static bool names_dir(pid_t pid, const char *dir)
{
	char path[64], buf[8192];
	size_t n = strlen(dir), len = 0;
	ssize_t r;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	while (len + 1 < sizeof(buf) && (r = read(fd, buf + len, sizeof(buf) - len - 1)) > 0)
		len += (size_t)r;
	close(fd);
	buf[len] = '\0';
	for (const char *a = buf; a < buf + len; a += strlen(a) + 1)
		if (!strncmp(a, dir, n) && (a[n] == '\0' || a[n] == '/'))
			return true;
	return false;
}

/* The live nicsimd processes whose arguments name dir or below it. */
static size_t nics_of(const char *dir, pid_t *pids, size_t max)
{
	struct dirent *e;
	size_t n = 0;
	DIR *d = opendir("/proc");

	if (!d)
		return 0;
	while ((e = readdir(d)) && n < max) {
		pid_t pid = (pid_t)strtol(e->d_name, NULL, 10);

		if (pid > 0 && nst_pid_is_nicsimd(pid) && nst_pid_alive(pid) && names_dir(pid, dir))
			pids[n++] = pid;
	}
	closedir(d);
	return n;
}

/* Read from fd until a line "ready DIR PID" arrives (bounded). */
static bool read_ready(int fd, char *dir, size_t size, pid_t *helper)
{
	uint64_t deadline = nst_now_ns() + (uint64_t)WAIT_MS * 1000000u;
	char buf[8192], *line;
	size_t used = 0;

	buf[0] = '\0';
	while (!(line = strstr(buf, "\nready ")) || !strchr(line + 1, '\n')) {
		uint64_t now = nst_now_ns();
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t r;

		if (now >= deadline || used + 1 >= sizeof(buf))
			break;
		if (poll(&p, 1, (int)((deadline - now) / 1000000u) + 1) <= 0)
			continue;
		r = read(fd, buf + used, sizeof(buf) - used - 1);
		if (r <= 0)
			break;
		used += (size_t)r;
		buf[used] = '\0';
	}
	if (!line || !strchr(line + 1, '\n')) {
		fprintf(stderr, "the victim did not get ready; it printed:\n%s\n", buf);
		return false;
	}
	{
		char d[256];
		int pid;

		if (sscanf(line, "\nready %255s %d", d, &pid) != 2)
			return false;
		snprintf(dir, size, "%s", d);
		*helper = pid;
	}
	return true;
}

/*
 * What a killed test left: processes naming dir, its NICs seen before the
 * kill (a dying process loses its command line before it stops being alive,
 * so the scan of dir alone can end the wait early) and its helper process.
 */
struct leftovers {
	const char *dir;
	const pid_t *nics;
	size_t nnics;
	pid_t helper;
	size_t n;
};

static bool nothing_left(void *arg)
{
	struct leftovers *l = arg;
	pid_t now[MAX_PROCS];

	l->n = nics_of(l->dir, now, MAX_PROCS) + nst_pid_alive(l->helper);
	for (size_t i = 0; i < l->nnics; i++)
		l->n += nst_pid_alive(l->nics[i]);
	return l->n == 0;
}

static void test_killed_test_leaves_nothing(void)
{
	char self[PATH_MAX], dir[256];
	pid_t victim, helper = 0, nics[MAX_PROCS];
	struct leftovers left;
	size_t n;
	ssize_t len;
	int fds[2], status;

	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	NST_REQUIRE_GT(len, 0);
	self[len] = '\0';
	NST_REQUIRE_EQ(pipe2(fds, O_CLOEXEC), 0);
	fflush(NULL);
	victim = fork();
	NST_REQUIRE_GE(victim, 0);
	if (victim == 0) {
		dup2(fds[1], STDOUT_FILENO);
		execl(self, self, "victim", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	if (!read_ready(fds[0], dir, sizeof(dir), &helper)) {
		kill(victim, SIGKILL);
		nst_wait(victim, WAIT_MS);
		close(fds[0]);
		CU_FAIL_FATAL("the victim did not start its processes");
	}
	nst_guard_dir(dir); /* should this test fail, its own guard cleans up */
	n = nics_of(dir, nics, MAX_PROCS);
	NST_EQ(n, 3); /* two from nicsim up, one forked */
	NST_TRUE(nst_pid_alive(helper));

	NST_EQ(kill(victim, SIGKILL), 0);
	status = nst_wait(victim, WAIT_MS);
	NST_TRUE(status >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	close(fds[0]);

	/* Everything goes, in its own time: wait for the event, bounded. */
	left.dir = dir;
	left.nics = nics;
	left.nnics = n;
	left.helper = helper;
	(void)nst_wait_until(nothing_left, &left, WAIT_MS, 10);
	NST_EQ(left.n, 0);
	for (size_t i = 0; i < n; i++) {
		NST_CHECK_(!nst_pid_alive(nics[i]), CU_FALSE,
			   "nicsimd %d of the killed test is gone", (int)nics[i]);
		if (nst_pid_alive(nics[i]))
			kill(nics[i], SIGKILL);
	}
	NST_CHECK_(!nst_pid_alive(helper), CU_FALSE, "helper %d of the killed test is gone",
		   (int)helper);
	if (helper > 0 && nst_pid_alive(helper))
		kill(helper, SIGKILL);
	nst_rmtree(dir);
}

static int suite_init(void)
{
	return nst_tmpdir(tmp, sizeof(tmp), "iso") ? -1 : 0;
}

static int suite_clean(void)
{
	nst_done_with_dir(tmp);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"killed_test_leaves_nothing", test_killed_test_leaves_nothing},
	    {NULL, NULL},
	};
	static const struct nst_test victim[] = {{"victim", victim_test}, {NULL, NULL}};

	if (argc == 2 && !strcmp(argv[1], "victim"))
		return nst_main(1, argv, "victim", victim, NULL, NULL);
	return nst_main(argc, argv, "isolation", tests, suite_init, suite_clean);
}

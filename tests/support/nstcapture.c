#include "nstcapture.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fab.h"
#include "fab_capture.h"
#include "nstest.h"

#define MAX_CAPTURES 16
#define ATTACH_WAIT_MS 5000

/* The captures this process started (test support: one table per test
 * program, like nst_bin's path). */
static struct nst_capture {
	pid_t pid;   /* 0: unused */
	pid_t owner; /* the process that started it */
	char dir[PATH_MAX];
	char file[PATH_MAX];
} captures[MAX_CAPTURES];

static const char *capture_root(void)
{
	const char *root = getenv("NICSIM_CAPTURE");

	return root && *root ? root : NULL;
}

pid_t nst_capture_spawn(const char *dir, const char *const *args, int out_fd, const char *log,
			bool parent_death)
{
	const char *argv[32] = {nst_bin("nicsim"), "capture", "--dir", dir};
	pid_t parent = getpid(), pid;
	size_t n = 4;
	int fd;

	for (; args && *args && n < 31; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0)
		return pid;
	if (parent_death) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(1);
	}
	fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd >= 0)
		dup2(fd, STDERR_FILENO);
	fd = out_fd >= 0 ? out_fd : open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (fd >= 0)
		dup2(fd, STDOUT_FILENO);
	execv(argv[0], (char *const *)argv);
	_exit(127);
}

/* The capture pid attached to fab, or pid gone (then it never will). */
struct attach_wait {
	struct fab *fab;
	pid_t pid;
	bool attached;
};

static bool attached_or_gone(void *arg)
{
	struct attach_wait *w = arg;

	w->attached = fab_cap_attached(w->fab, NULL);
	return w->attached || !nst_pid_alive(w->pid);
}

bool nst_capture_attached(const char *dir, pid_t pid, int timeout_ms)
{
	struct attach_wait w = {.pid = pid};

	if (fab_open(dir, &w.fab))
		return false;
	(void)nst_wait_until(attached_or_gone, &w, timeout_ms, 1);
	fab_close(w.fab);
	return w.attached;
}

void nst_capture_start(const char *dir)
{
	const char *root = capture_root(), *base = strrchr(dir, '/');
	char log[PATH_MAX + 8];
	struct nst_capture *c = NULL;
	pid_t pid;
	int i;

	if (!root)
		return;
	for (i = 0; i < MAX_CAPTURES && !c; i++)
		if (!captures[i].pid)
			c = &captures[i];
	if (!c) {
		fprintf(stderr, "NICSIM_CAPTURE: more than %d run directories; %s not captured\n",
			MAX_CAPTURES, dir);
		return;
	}
	if (mkdir(root, 0700) < 0 && errno != EEXIST) {
		fprintf(stderr, "NICSIM_CAPTURE: cannot create %s: %s\n", root, strerror(errno));
		return;
	}
	snprintf(c->dir, sizeof(c->dir), "%s", dir);
	snprintf(c->file, sizeof(c->file), "%s/%s-%s.pcapng", root, program_invocation_short_name,
		 base ? base + 1 : dir);
	snprintf(log, sizeof(log), "%s.log", c->file);
	/* A test killed by its timeout takes its capture with it. */
	pid = nst_capture_spawn(c->dir, (const char *const[]){"--follow", "-w", c->file, NULL}, -1,
				log, true);
	if (pid < 0) {
		fprintf(stderr, "NICSIM_CAPTURE: cannot start a capture: %s\n", strerror(-pid));
		return;
	}
	c->pid = pid;
	c->owner = getpid();
}

static void stop_one(struct nst_capture *c, bool failed)
{
	char log[PATH_MAX + 8];
	int status;

	if (!c->pid || c->owner != getpid())
		return;
	kill(c->pid, SIGTERM);
	status = nst_wait(c->pid, 5000);
	if (status == -ETIMEDOUT) {
		kill(c->pid, SIGKILL);
		nst_wait(c->pid, 5000);
	}
	snprintf(log, sizeof(log), "%s.log", c->file);
	if (failed) {
		fprintf(stderr, "capture kept: %s (nicsim capture's messages: %s)\n", c->file, log);
	} else {
		unlink(c->file);
		unlink(log);
	}
	c->pid = 0;
}

void nst_capture_stop(const char *dir, bool failed)
{
	for (int i = 0; i < MAX_CAPTURES; i++)
		if (captures[i].pid && !strcmp(captures[i].dir, dir))
			stop_one(&captures[i], failed);
}

void nst_capture_stop_all(bool failed)
{
	for (int i = 0; i < MAX_CAPTURES; i++)
		stop_one(&captures[i], failed);
}

/* The capture that follows dir: started for dir or for its parent. */
static struct nst_capture *follower(const char *dir)
{
	size_t n;

	for (int i = 0; i < MAX_CAPTURES; i++) {
		if (!captures[i].pid || captures[i].owner != getpid())
			continue;
		n = strlen(captures[i].dir);
		if (!strncmp(dir, captures[i].dir, n) &&
		    (!dir[n] || (dir[n] == '/' && !strchr(dir + n + 1, '/'))))
			return &captures[i];
	}
	return NULL;
}

void nst_capture_wait(const char *dir)
{
	struct nst_capture *c = follower(dir);

	if (c && !nst_capture_attached(dir, c->pid, ATTACH_WAIT_MS))
		fprintf(stderr, "NICSIM_CAPTURE: the capture of %s did not attach (see %s.log)\n",
			dir, c->file);
}

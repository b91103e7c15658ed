/*
 * `nicsim up` and `nicsim down`: start and stop the nicsimd daemons of a run
 * directory.
 *
 * up creates the fabric that joins the NICs (D/fabric.shm, fab.h), or joins
 * one that running NICs already use, then forks one detached nicsimd per
 * NIC (own session, stdin /dev/null, stdout and stderr to D/nic-ADDR.log)
 * and waits, bounded, until each one answers a management request and has
 * written its pid file.  Until it returns, the daemons are its children, so
 * a daemon that dies during start-up is noticed at once; if any NIC fails,
 * everything started is stopped again and a fabric it created is removed.
 *
 * down is not the daemons' parent: it signals the pids their pid files name
 * after checking that each is alive, is nicsimd (/proc/PID/comm) and is
 * the process listening on this directory's socket for that address (the
 * listener's credentials, SO_PEERCRED, which a connect gets even from a
 * daemon too busy or stopped to accept), then polls /proc until they are
 * gone.  A socket without a usable pid file is asked who listens on it the
 * same way, so a daemon is never missed, and neither a recycled pid nor a
 * nicsimd of another run directory is ever signalled.  Once every NIC is
 * gone, down removes the fabric too (unless --nic named one NIC, or a port
 * is still open by a live process).
 *
 * Both take the run directory's lock (NIC_RUN_LOCK, flock) and hold it
 * until they return, so that two of them never work on one directory at
 * once: a second `nicsim up` waits for the first (bounded by --timeout-ms),
 * then finds its NICs running and refuses to start them again (exit 1,
 * nothing started), instead of truncating their logs and racing them for
 * the sockets.  `nicsim up --nic ADDR` starts that one NIC alone, joining
 * the fabric the others use: how one that died is brought back.
 *
 * Every file they open in the run directory is opened with O_NOFOLLOW; the
 * directory itself is checked first (nic_run_dir_check, in cli_main).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fab.h"
#include "fab_addr.h"
#include "mgmt_client.h"
#include "nicsim_abi_util.h"
#include "nicsim_rundir.h"

#define DAEMON_NAME "nicsimd"
#define POLL_MS 20        /* between checks of processes and sockets */
#define PROBE_MS 1000     /* one management probe while starting or stopping */
#define KILL_WAIT_MS 2000 /* after SIGKILL */
#define LOG_TAIL_BYTES 2048
#define LOG_TAIL_LINES 12

/* Set by SIGINT/SIGTERM while `nicsim up` waits, so that it can stop what it
 * started before exiting: the daemons are in their own session and would
 * otherwise be left half started. */
static volatile sig_atomic_t up_interrupted;

static void on_interrupt(int sig)
{
	(void)sig;
	up_interrupted = 1;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

static int clamp_ms(int64_t ms, int lo, int hi)
{
	return ms < lo ? lo : ms > hi ? hi : (int)ms;
}

/* A line on stdout for the user, unless the caller is a library user that
 * asked for quiet (cli_opts.quiet). */
static void say(const struct cli_opts *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void say(const struct cli_opts *o, const char *fmt, ...)
{
	va_list ap;

	if (o->quiet)
		return;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
}

/* ---- Processes ----------------------------------------------------------- */

/* Read a small /proc file into buf (NUL-terminated); returns its length or
 * a negative errno. */
static ssize_t read_small(const char *path, char *buf, size_t size)
{
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, size - 1);
	if (n < 0)
		n = -errno;
	close(fd);
	if (n >= 0)
		buf[n] = '\0';
	return n;
}

/*
 * Whether pid is a live process.  A zombie counts as gone: a daemon that
 * `nicsim up` left behind is reaped by whoever inherited it, not by us.  But
 * a zombie thread-group leader whose other threads still run is not gone.
 */
static bool proc_alive(pid_t pid)
{
	char path[64], buf[4096], *state, *threads, st;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	n = read_small(path, buf, sizeof(buf));
	if (n == -ENOENT || n == -ESRCH)
		return false;
	if (n < 0) /* /proc hidden from us (hidepid): ask the kernel instead */
		return kill(pid, 0) == 0 || errno == EPERM;
	state = strstr(buf, "\nState:");
	threads = strstr(buf, "\nThreads:");
	if (!state)
		return true;
	st = state[7 + strspn(state + 7, " \t")];
	if (st != 'Z' && st != 'X')
		return true;
	return threads && strtol(threads + 9, NULL, 10) > 1;
}

/* The program name of pid (/proc/PID/comm) into buf; "" if unknown. */
static const char *proc_comm(pid_t pid, char *buf, size_t size)
{
	char path[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	n = read_small(path, buf, size);
	if (n < 0)
		n = 0;
	if (n > 0 && buf[n - 1] == '\n')
		n--;
	buf[n] = '\0';
	return buf;
}

static bool proc_is_daemon(pid_t pid)
{
	char comm[32];

	return proc_alive(pid) && !strcmp(proc_comm(pid, comm, sizeof(comm)), DAEMON_NAME);
}

/* The pid in a pid file: 0, -ENOENT, or -EINVAL when it holds no pid. */
static int read_pid_file(const char *path, pid_t *pid)
{
	char buf[32], *end;
	long v;
	int fd;
	ssize_t n;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EINVAL;
	buf[n] = '\0';
	errno = 0;
	v = strtol(buf, &end, 10);
	if (errno || end == buf || v <= 0 || v > INT_MAX || (*end && *end != '\n'))
		return -EINVAL;
	*pid = (pid_t)v;
	return 0;
}

/* Reap our child pid if it has exited; true (with *status) if it has. */
static bool child_exited(pid_t pid, int *status)
{
	pid_t w;

	do
		w = waitpid(pid, status, WNOHANG);
	while (w < 0 && errno == EINTR);
	return w == pid || (w < 0 && errno == ECHILD);
}

static const char *status_str(int status, char *buf, size_t size)
{
	if (WIFEXITED(status))
		snprintf(buf, size, "exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, size, "was killed by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else
		snprintf(buf, size, "ended (wait status 0x%x)", (unsigned)status);
	return buf;
}

/* ---- Run-directory files -------------------------------------------------- */

static void run_file(const struct cli_opts *o, uint32_t addr, const char *suffix, char *buf,
		     size_t size)
{
	/* o->dir fits PATH_MAX and the socket path was checked; the other
	 * names are no longer than the socket's, so this cannot truncate. */
	if (nic_run_file(buf, size, o->dir, addr, suffix))
		buf[0] = '\0';
}

/* Remove path if it exists; true if it was removed. */
static bool remove_file(const char *path)
{
	return path[0] && unlink(path) == 0;
}

/* How the NIC at sock answers one management probe: 0 (it answers; *peer
 * is the pid listening there, from SO_PEERCRED) or the client's error. */
static int probe(const char *sock, int timeout_ms, pid_t *peer, struct mgmt_client *c)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int rc;

	rc = mgmt_client_open(c, sock, timeout_ms);
	if (rc)
		return rc;
	*peer = (pid_t)c->hello.nic_pid;
	if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.pid > 0)
		*peer = cred.pid;
	mgmt_client_close(c);
	return 0;
}

/*
 * The pid of the process listening on the socket sock: 0 and *pid, or
 * -ENOENT (no socket file), -ECONNREFUSED (nobody listens), -ETIMEDOUT (its
 * backlog stayed full for timeout_ms), or another connect error.  A connect
 * receives the listener's credentials (SO_PEERCRED) before the listener
 * accepts anything, so this works for a daemon that is stopped or too busy
 * to answer; it sends nothing, and the daemon sees a client that leaves.
 */
static int sock_listener(const char *sock, int timeout_ms, pid_t *pid)
{
	int64_t deadline = now_ms() + timeout_ms;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int fd, rc;

	if (strlen(sock) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, sock, strlen(sock) + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	for (;;) {
		rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 0 : -errno;
		if (rc != -EAGAIN && rc != -EINTR)
			break;
		if (now_ms() >= deadline) {
			rc = -ETIMEDOUT;
			break;
		}
		sleep_ms(POLL_MS);
	}
	if (rc == 0) {
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.pid > 0)
			*pid = cred.pid;
		else
			rc = -EPROTO;
	}
	close(fd);
	return rc;
}

/* Print the end of a daemon's log, indented, on stderr. */
static void print_log_tail(const char *path)
{
	char buf[LOG_TAIL_BYTES + 1], *p, *line, *save;
	int fd, lines = 0;
	off_t size;
	ssize_t n;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		fprintf(stderr, "  (no log %s: %s)\n", path, strerror(errno));
		return;
	}
	size = lseek(fd, 0, SEEK_END);
	if (size > LOG_TAIL_BYTES)
		lseek(fd, size - LOG_TAIL_BYTES, SEEK_SET);
	else
		lseek(fd, 0, SEEK_SET);
	n = read(fd, buf, LOG_TAIL_BYTES);
	close(fd);
	if (n <= 0) {
		fprintf(stderr, "  (log %s is empty)\n", path);
		return;
	}
	buf[n] = '\0';
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	/* Start at the LOG_TAIL_LINES-th newline from the end. */
	for (p = buf + n; p > buf; p--) {
		if (p[-1] == '\n' && ++lines == LOG_TAIL_LINES)
			break;
	}
	fprintf(stderr, "  last lines of %s:\n", path);
	for (line = strtok_r(p, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		fprintf(stderr, "  | %s\n", line);
}

/* ---- The run directory's lock ------------------------------------------- */

/*
 * Take the lock of o->dir (an exclusive flock on D/NIC_RUN_LOCK), waiting
 * up to timeout_ms for another `nicsim up` or `nicsim down` to release it.
 * Returns the descriptor that holds it (close it to release), or -1 after
 * saying why.  The descriptor is close-on-exec: the daemons up starts do
 * not inherit the lock.
 */
static int lock_dir(const struct cli_opts *o, const char *cmd, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;
	char path[PATH_MAX];
	bool told = false;
	int fd;

	if ((size_t)snprintf(path, sizeof(path), "%s/" NIC_RUN_LOCK, o->dir) >= sizeof(path)) {
		cli_err("run directory path too long: %s", o->dir);
		return -1;
	}
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
	if (fd < 0 && errno == ELOOP) {
		cli_err("%s", cli_link_planted(path));
		return -1;
	}
	if (fd < 0 && (errno == EACCES || errno == EPERM)) {
		int err = errno;
		struct stat st;

		if (stat(o->dir, &st) == 0 && st.st_uid != geteuid()) {
			cli_err("cannot open the lock %s: %s. The run directory %s belongs to "
				"uid %u: only its owner starts and stops its NICs (a group the "
				"NICs allow may attach hosts, nothing more). Use a run directory "
				"of your own: --dir D or NICSIM_DIR",
				path, strerror(err), o->dir, (unsigned)st.st_uid);
			return -1;
		}
		errno = err;
	}
	if (fd < 0) {
		cli_err("cannot open the lock %s: %s", path, strerror(errno));
		return -1;
	}
	for (;;) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return fd;
		if (errno != EWOULDBLOCK && errno != EINTR) {
			cli_err("cannot lock %s: %s", path, strerror(errno));
			break;
		}
		if (now_ms() >= deadline) {
			cli_err("another 'nicsim up' or 'nicsim down' holds the run directory %s "
				"(lock %s) after %d ms: try again once it has finished, or raise "
				"--timeout-ms",
				o->dir, path, timeout_ms);
			break;
		}
		if (!told) {
			fprintf(stderr,
				"nicsim: %s: waiting for another 'nicsim up' or 'nicsim down' in "
				"%s\n",
				cmd, o->dir);
			told = true;
		}
		sleep_ms(POLL_MS);
	}
	close(fd);
	return -1;
}

/* ---- up ------------------------------------------------------------------ */

struct started {
	uint32_t addr;
	char name[FAB_ADDR_STRLEN];
	char sock[sizeof(((struct sockaddr_un *)0)->sun_path)];
	pid_t pid; /* 0: not started */
	bool ready;
	bool exited;   /* reaped */
	int status;    /* wait status once exited */
	char why[256]; /* why it is not ready yet */
};

int cli_find_program(const char *name, char *buf, size_t size, char *exe_dir, size_t exe_dir_size)
{
	char exe[PATH_MAX], *slash;
	const char *path, *p, *end;
	struct stat st;
	ssize_t n;
	size_t len;

	exe_dir[0] = '\0';
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			snprintf(exe_dir, exe_dir_size, "%s", exe[0] ? exe : "/");
			if ((size_t)snprintf(buf, size, "%s/%s", exe, name) < size &&
			    stat(buf, &st) == 0 && S_ISREG(st.st_mode) && access(buf, X_OK) == 0)
				return 0;
		}
	}
	path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (p = path; *p; p = *end ? end + 1 : end) {
		end = strchr(p, ':');
		if (!end)
			end = p + strlen(p);
		len = (size_t)(end - p);
		if ((size_t)snprintf(buf, size, "%.*s/%s", (int)(len ? len : 1), len ? p : ".",
				     name) >= size)
			continue;
		if (stat(buf, &st) == 0 && S_ISREG(st.st_mode) && access(buf, X_OK) == 0)
			return 0;
	}
	return -ENOENT;
}

/* In the child: become a detached daemon and run nicsimd.  Never returns. */
static void __attribute__((noreturn))
exec_daemon(const char *daemon, char *const *argv, int null_fd, int log_fd)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigset_t none;
	int sig, fd;

	setsid();
	if (dup2(null_fd, STDIN_FILENO) < 0 || dup2(log_fd, STDOUT_FILENO) < 0 ||
	    dup2(log_fd, STDERR_FILENO) < 0)
		_exit(127);
	/* Whatever this process ignored or blocked is not the daemon's business. */
	for (sig = 1; sig < NSIG; sig++)
		sigaction(sig, &dfl, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* Descriptors our caller leaked to us (a test's capture pipe, say)
	 * would be held open for the daemon's life. */
	if (close_range(3, ~0u, 0) < 0)
		for (fd = 3; fd < 1024; fd++)
			close(fd);
	if (chdir("/") < 0)
		_exit(127);
	execv(daemon, argv);
	dprintf(STDERR_FILENO, "nicsim: cannot run %s: %s\n", daemon, strerror(errno));
	_exit(127);
}

/* Open (truncated) the log of the NIC at addr; -1 with the error printed. */
static int open_log(const struct cli_opts *o, uint32_t addr)
{
	char log[PATH_MAX];
	int fd;

	run_file(o, addr, NIC_LOG_SUFFIX, log, sizeof(log));
	/* O_NOFOLLOW: a link planted in the directory must not make us
	 * truncate whatever it points to. */
	fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW, 0600);
	if (fd < 0 && errno == ELOOP)
		cli_err("%s", cli_link_planted(log));
	else if (fd < 0)
		cli_err("cannot create log %s: %s", log, strerror(errno));
	return fd;
}

/*
 * Start the nicsimd that serves the n NICs of s (n > 1: --one-process, its
 * log is s[0]'s and the others' logs say where it is).  0, or -1 with the
 * error printed.
 */
static int spawn(const struct cli_opts *o, const char *daemon, struct started *s, size_t n)
{
	char *argv[18 + 2 * NIC_TIMER_OPTS + 2 * NIC_GROUP_MAX];
	char timer_opt[NIC_TIMER_OPTS][24];
	int argc = 0, null_fd, log_fd;
	pid_t pid;

	argv[argc++] = (char *)DAEMON_NAME;
	for (size_t i = 0; i < n; i++) {
		argv[argc++] = (char *)"--addr";
		argv[argc++] = s[i].name;
	}
	argv[argc++] = (char *)"--dir";
	argv[argc++] = (char *)o->dir;
	if (o->tpt_capacity) {
		argv[argc++] = (char *)"--tpt-capacity";
		argv[argc++] = (char *)o->tpt_capacity;
	}
	if (o->max_reg) {
		argv[argc++] = (char *)"--max-reg";
		argv[argc++] = (char *)o->max_reg;
	}
	if (o->no_mw)
		argv[argc++] = (char *)"--no-mw";
	if (o->no_rdma_read)
		argv[argc++] = (char *)"--no-rdma-read";
	if (o->udp)
		argv[argc++] = (char *)"--udp";
	if (o->allow_group) {
		argv[argc++] = (char *)"--allow-group";
		argv[argc++] = (char *)o->allow_group;
	}
	if (o->log_level) {
		argv[argc++] = (char *)"--log-level";
		argv[argc++] = (char *)o->log_level;
	}
	for (size_t i = 0; i < NIC_TIMER_OPTS; i++) {
		if (!o->timer[i])
			continue;
		snprintf(timer_opt[i], sizeof(timer_opt[i]), "--%s", nic_timer_opts[i].name);
		argv[argc++] = timer_opt[i];
		argv[argc++] = (char *)o->timer[i];
	}
	argv[argc] = NULL;

	for (size_t i = 1; i < n; i++) {
		int fd = open_log(o, s[i].addr);

		if (fd < 0)
			return -1;
		dprintf(fd,
			"nicsim: NIC %s runs in the nicsimd of %s (nicsim up --one-process); "
			"its log is " NIC_SOCK_PREFIX "%s" NIC_LOG_SUFFIX "\n",
			s[i].name, s[0].name, s[0].name);
		close(fd);
	}
	log_fd = open_log(o, s->addr);
	if (log_fd < 0)
		return -1;
	null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null_fd < 0) {
		cli_err("cannot open /dev/null: %s", strerror(errno));
		close(log_fd);
		return -1;
	}
	fflush(NULL);
	pid = fork();
	if (pid == 0)
		exec_daemon(daemon, argv, null_fd, log_fd);
	close(null_fd);
	close(log_fd);
	if (pid < 0) {
		cli_err("cannot start nicsimd for %s: fork: %s", s->name, strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		s[i].pid = pid;
	return 0;
}

/*
 * Whether the daemon of s[i] has exited (reaped, with its status).  NICs
 * that share a process share its end: only the first of them reaps it.
 */
static bool started_exited(struct started *s, size_t i)
{
	size_t first = i;

	while (first > 0 && s[first - 1].pid == s[i].pid)
		first--;
	if (first != i) {
		s[i].exited = s[first].exited;
		s[i].status = s[first].status;
		return s[i].exited;
	}
	s[i].exited = child_exited(s[i].pid, &s[i].status);
	return s[i].exited;
}

/* One readiness check of a started NIC: it answers a stats request as the
 * right address and its pid file names it.  Records why not in s->why. */
static bool check_ready(const struct cli_opts *o, struct started *s, int timeout_ms)
{
	char pidf[PATH_MAX], a[FAB_ADDR_STRLEN];
	struct mgmt_client c;
	struct nic_stats st;
	pid_t pid = 0;
	int rc;

	rc = mgmt_client_open(&c, s->sock, timeout_ms);
	if (!rc) {
		rc = mgmt_client_stats(&c, &st);
		mgmt_client_close(&c);
	}
	if (rc == -ENOENT || rc == -ECONNREFUSED) {
		snprintf(s->why, sizeof(s->why), "it is not listening on %s yet", s->sock);
		return false;
	}
	if (rc) {
		snprintf(s->why, sizeof(s->why), "%s (%s)", c.what ? c.what : "no answer",
			 c.status ? nic_status_str(c.status) : strerror(-rc));
		return false;
	}
	if (c.hello.nic_addr != s->addr) {
		snprintf(s->why, sizeof(s->why), "it answers as %s",
			 fab_addr_format(c.hello.nic_addr, a, sizeof(a)));
		return false;
	}
	run_file(o, s->addr, NIC_PID_SUFFIX, pidf, sizeof(pidf));
	rc = read_pid_file(pidf, &pid);
	if (rc || pid != s->pid) {
		snprintf(s->why, sizeof(s->why),
			 "its pid file " NIC_SOCK_PREFIX "%s" NIC_PID_SUFFIX " %s", s->name,
			 rc == -ENOENT ? "is missing"
			 : rc          ? "holds no pid"
				       : "names another process");
		return false;
	}
	return true;
}

/* Stop every daemon up started (they are our children), then remove the
 * files of those that could not clean up after themselves. */
static void stop_started(const struct cli_opts *o, struct started *s, size_t n)
{
	char pidf[PATH_MAX];
	struct mgmt_client c;
	bool left, killed = false;
	int64_t deadline;
	pid_t pid;
	size_t i;

	for (i = 0; i < n; i++)
		if (s[i].pid > 0 && !s[i].exited)
			kill(s[i].pid, SIGTERM);
	deadline = now_ms() + CLI_DOWN_TERM_MS;
	for (;;) {
		left = false;
		for (i = 0; i < n; i++) {
			if (s[i].pid <= 0 || s[i].exited)
				continue;
			left |= !started_exited(s, i);
		}
		if (!left)
			break;
		if (now_ms() >= deadline) {
			if (killed)
				break;
			for (i = 0; i < n; i++)
				if (s[i].pid > 0 && !s[i].exited)
					kill(s[i].pid, SIGKILL);
			killed = true;
			deadline = now_ms() + KILL_WAIT_MS;
		}
		sleep_ms(POLL_MS);
	}
	for (i = 0; i < n; i++) {
		if (s[i].pid <= 0)
			continue;
		run_file(o, s[i].addr, NIC_PID_SUFFIX, pidf, sizeof(pidf));
		if (read_pid_file(pidf, &pid) == 0 && pid == s[i].pid && !proc_alive(pid))
			remove_file(pidf);
		if (probe(s[i].sock, PROBE_MS, &pid, &c) == -ECONNREFUSED)
			remove_file(s[i].sock);
	}
}

/* Single-quote text for a POSIX shell when it needs it. */
static void print_shell_word(const char *text)
{
	const char *p;

	if (strspn(text,
		   "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_/.,:+@%-") ==
	    strlen(text)) {
		fputs(text, stdout);
		return;
	}
	putchar('\'');
	for (p = text; *p; p++) {
		if (*p == '\'')
			fputs("'\\''", stdout);
		else
			putchar(*p);
	}
	putchar('\'');
}

/* Refuse addresses that a NIC already serves in o->dir; remove the files of
 * NICs that are gone.  Returns 0 or an exit status. */
static int check_free(const struct cli_opts *o, struct started *s, size_t n)
{
	char pidf[PATH_MAX];
	struct mgmt_client c;
	bool refused = false, removed;
	pid_t pid;
	size_t i;
	int rc;

	for (i = 0; i < n; i++) {
		rc = probe(s[i].sock, clamp_ms(o->timeout_ms, 1, PROBE_MS), &pid, &c);
		if (rc == 0) {
			cli_err("a NIC at %s is already answering in %s (nicsimd pid %d); "
				"'nicsim down --dir %s' stops it",
				s[i].name, o->dir, (int)pid, o->dir);
			refused = true;
			continue;
		}
		if (rc != -ENOENT && rc != -ECONNREFUSED) {
			cli_err("%s exists but does not answer as a NIC should: %s (%s); "
				"refusing to start another NIC at %s",
				s[i].sock, c.what ? c.what : "error", strerror(-rc), s[i].name);
			refused = true;
			continue;
		}
		run_file(o, s[i].addr, NIC_PID_SUFFIX, pidf, sizeof(pidf));
		if (read_pid_file(pidf, &pid) == 0 && proc_is_daemon(pid)) {
			cli_err("nicsimd pid %d for %s is running in %s but not answering; "
				"'nicsim down --dir %s' stops it",
				(int)pid, s[i].name, o->dir, o->dir);
			refused = true;
		}
	}
	if (refused) {
		fprintf(stderr,
			"nicsim: started nothing; to start only a NIC that is missing: "
			"'nicsim up --dir %s --nic ADDR'; to start afresh: 'nicsim down --dir %s' "
			"then 'nicsim up'\n",
			o->dir, o->dir);
		return CLI_EXIT_FAIL;
	}
	/* Nothing serves these addresses: leftovers of a daemon that was killed. */
	for (i = 0; i < n; i++) {
		run_file(o, s[i].addr, NIC_PID_SUFFIX, pidf, sizeof(pidf));
		removed = remove_file(s[i].sock);
		removed = remove_file(pidf) || removed;
		if (removed && !o->quiet)
			fprintf(stderr, "nicsim: removed stale files of %s in %s\n", s[i].name,
				o->dir);
	}
	return 0;
}

/* Wait until every started NIC is ready, one dies, the deadline passes or we
 * are interrupted.  Returns the index of the first NIC that failed, or n. */
static size_t wait_ready(const struct cli_opts *o, struct started *s, size_t n)
{
	int64_t deadline = now_ms() + o->timeout_ms;
	size_t i, ready;

	for (;;) {
		ready = 0;
		for (i = 0; i < n; i++) {
			if (s[i].ready) {
				ready++;
				continue;
			}
			if (started_exited(s, i))
				return i;
			s[i].ready =
			    check_ready(o, &s[i], clamp_ms(deadline - now_ms(), 1, PROBE_MS));
			ready += s[i].ready;
		}
		if (ready == n)
			return n;
		if (up_interrupted || now_ms() >= deadline)
			break;
		sleep_ms(clamp_ms(deadline - now_ms(), 1, POLL_MS));
	}
	for (i = 0; i < n && s[i].ready; i++)
		;
	return i;
}

static void report_failed(const struct cli_opts *o, const struct started *s)
{
	char log[PATH_MAX], how[96];

	run_file(o, s->addr, NIC_LOG_SUFFIX, log, sizeof(log));
	if (s->exited)
		cli_err("nicsimd for %s (pid %d) %s while starting", s->name, (int)s->pid,
			status_str(s->status, how, sizeof(how)));
	else if (up_interrupted)
		cli_err("interrupted while waiting for %s (nicsimd pid %d)", s->name, (int)s->pid);
	else
		cli_err("NIC %s (nicsimd pid %d) not ready within %d ms: %s", s->name, (int)s->pid,
			o->timeout_ms, s->why[0] ? s->why : "no answer");
	print_log_tail(log);
}

/* ---- The fabric ----------------------------------------------------------- */

/* A seed for a run nobody asked to replay: random, and printed. */
static uint64_t random_seed(void)
{
	struct timespec ts;
	uint64_t seed;

	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) == (ssize_t)sizeof(seed))
		return seed;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 30 ^ (uint64_t)getpid() << 16;
}

/*
 * Create the fabric for the n NICs in s, with o->seed (or a random seed,
 * stored there); if NICs that are running use the fabric already, join it
 * instead: bind the new addresses to its ports.  *made says whether a new
 * fabric was created.  Returns 0 or an exit status (the error printed).
 */
static int make_fabric(struct cli_opts *o, const struct started *s, size_t n, bool *made)
{
	struct fab_config cfg = {.max_ports = FAB_DEFAULT_PORTS};
	struct fab_info info;
	uint32_t *addrs;
	struct fab *fab;
	size_t i;
	int rc;

	*made = false;
	addrs = calloc(n, sizeof(*addrs));
	if (!addrs) {
		cli_err("out of memory");
		return CLI_EXIT_FAIL;
	}
	for (i = 0; i < n; i++)
		addrs[i] = s[i].addr;
	if (n > cfg.max_ports)
		cfg.max_ports = (uint32_t)n;
	if (!o->seed_set)
		o->seed = random_seed();
	cfg.seed = o->seed;
	cfg.addrs = addrs;
	cfg.naddrs = n;
	rc = fab_create(o->dir, &cfg);
	if (rc == 0) {
		*made = true;
		goto out;
	}
	if (rc != -EBUSY) {
		char why[PATH_MAX * 3];

		cli_err("cannot create the fabric %s/" FAB_SEG_FILE ": %s", o->dir,
			nic_run_dir_full(o->dir, rc, fab_create_bytes(&cfg), why, sizeof(why)));
		goto out;
	}
	/* Running NICs use it: keep it, and its seed. */
	rc = fab_open(o->dir, &fab);
	if (rc) {
		cli_err("the fabric %s/" FAB_SEG_FILE " is in use but cannot be opened: %s", o->dir,
			strerror(-rc));
		goto out;
	}
	for (i = 0; i < n && !rc; i++) {
		rc = fab_port_claim(fab, addrs[i]);
		if (rc)
			cli_err("the fabric %s/" FAB_SEG_FILE " that running NICs use has no "
				"port slot left for %s",
				o->dir, s[i].name);
	}
	fab_info(fab, &info);
	fab_close(fab);
	if (!rc && o->seed_set && o->seed != info.seed)
		fprintf(stderr,
			"nicsim: --seed ignored: the fabric in %s is in use by running NICs; it "
			"keeps its seed %llu\n",
			o->dir, (unsigned long long)info.seed);
	o->seed = info.seed;
out:
	free(addrs);
	return rc ? CLI_EXIT_FAIL : 0;
}

/* Remove the fabric of o->dir once no NIC uses it; says what it did. */
static void remove_fabric(const struct cli_opts *o)
{
	int rc = fab_destroy_files(o->dir);

	if (rc == 0)
		say(o, "removed the fabric %s/" FAB_SEG_FILE "\n", o->dir);
	else if (rc == -EBUSY)
		say(o, "kept the fabric %s/" FAB_SEG_FILE ": a port on it is still open\n", o->dir);
	else if (rc != -ENOENT)
		cli_err("cannot remove the fabric in %s: %s", o->dir, strerror(-rc));
}

int cli_up(struct cli_opts *o)
{
	char daemon[PATH_MAX], exe_dir[PATH_MAX], real[PATH_MAX];
	struct sigaction sa = {.sa_handler = on_interrupt}, old_int, old_term;
	struct started *s;
	size_t i, n = o->hosts, failed, shown;
	bool fabric_made = false;
	int rc, lock_fd = -1;

	if (!o->timeout_ms)
		o->timeout_ms = CLI_UP_TIMEOUT_MS;
	if (o->nic_set)
		n = 1; /* --nic: that NIC alone */
	if (o->one_process && n > NIC_GROUP_MAX) {
		cli_err("--one-process: one nicsimd serves at most %u NICs, not %zu; leave it out "
			"to start one nicsimd per NIC",
			NIC_GROUP_MAX, n);
		return CLI_EXIT_USAGE;
	}
	s = calloc(n, sizeof(*s));
	if (!s) {
		cli_err("out of memory");
		return CLI_EXIT_FAIL;
	}
	/* Check the socket paths before creating anything ... */
	for (i = 0; i < n; i++) {
		s[i].addr = o->nic_set ? o->nic : fab_addr_host((uint32_t)(i + 1));
		fab_addr_format(s[i].addr, s[i].name, sizeof(s[i].name));
		if (cli_sock_path(o, s[i].addr, s[i].sock, sizeof(s[i].sock))) {
			rc = CLI_EXIT_USAGE;
			goto out;
		}
	}
	rc = nic_run_dir_make(o->dir);
	if (rc == -ENOENT) {
		/* nic_run_dir_make creates the last component only. */
		cli_err("cannot create run directory %s: its parent directory does not exist; "
			"nicsim creates only the run directory itself: create the parent first "
			"(mkdir -p), or choose another with --dir or NICSIM_DIR",
			o->dir);
		rc = CLI_EXIT_FAIL;
		goto out;
	}
	if (rc == -ENAMETOOLONG) {
		cli_err("cannot create run directory %s: the path is too long: choose a shorter "
			"one with --dir or NICSIM_DIR",
			o->dir);
		rc = CLI_EXIT_FAIL;
		goto out;
	}
	if (rc) {
		cli_err("cannot create run directory %s: %s: choose another with --dir or "
			"NICSIM_DIR",
			o->dir, strerror(-rc));
		rc = CLI_EXIT_FAIL;
		goto out;
	}
	if (cli_dir_check(o)) {
		rc = CLI_EXIT_FAIL;
		goto out;
	}
	/* ... and again once the directory is absolute, as nicsimd will see it
	 * (it runs in "/"). */
	if (!realpath(o->dir, real)) {
		cli_err("cannot resolve run directory %s: %s", o->dir, strerror(errno));
		rc = CLI_EXIT_FAIL;
		goto out;
	}
	snprintf(o->dir, sizeof(o->dir), "%s", real);
	for (i = 0; i < n; i++) {
		if (cli_sock_path(o, s[i].addr, s[i].sock, sizeof(s[i].sock))) {
			rc = CLI_EXIT_USAGE;
			goto out;
		}
	}
	if (cli_find_program(DAEMON_NAME, daemon, sizeof(daemon), exe_dir, sizeof(exe_dir))) {
		cli_err("cannot find " DAEMON_NAME " beside this program%s%s%s or on PATH",
			exe_dir[0] ? " (in " : "", exe_dir, exe_dir[0] ? ")" : "");
		rc = CLI_EXIT_FAIL;
		goto out;
	}
	lock_fd = lock_dir(o, "up", o->timeout_ms);
	if (lock_fd < 0) {
		rc = CLI_EXIT_FAIL;
		goto out;
	}
	rc = check_free(o, s, n);
	if (rc)
		goto out;
	/* The fabric exists before the NICs, which open their ports on it. */
	rc = make_fabric(o, s, n, &fabric_made);
	if (rc)
		goto out;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	if (o->one_process) {
		i = spawn(o, daemon, s, n) ? 0 : n;
	} else {
		for (i = 0; i < n && !up_interrupted; i++)
			if (spawn(o, daemon, &s[i], 1))
				break;
	}
	failed = i == n ? wait_ready(o, s, n) : i;
	if (failed < n) {
		/* spawn() has said why it failed.  A daemon that died is the
		 * whole story; after a timeout, show a few that are late. */
		if (s[failed].pid <= 0 && up_interrupted)
			cli_err("interrupted while starting NICs");
		for (i = failed, shown = 0; i < n && shown < 3; i++) {
			if (s[i].pid <= 0 || s[i].ready || (i > failed && s[failed].exited))
				continue;
			report_failed(o, &s[i]);
			shown++;
		}
		stop_started(o, s, n);
		fprintf(stderr, "nicsim: stopped the NICs started in %s\n", o->dir);
		if (fabric_made)
			fab_destroy_files(o->dir);
		rc = CLI_EXIT_FAIL;
	}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	if (rc)
		goto out;
	for (i = 0; i < n && o->up_pids; i++)
		o->up_pids[i] = s[i].pid;
	rc = CLI_EXIT_OK;
	if (o->quiet)
		goto out;

	printf("fabric %s/" FAB_SEG_FILE " seed %llu (%s; 'nicsim up --seed %llu' replays "
	       "its fault decisions)\n",
	       o->dir, (unsigned long long)o->seed, fabric_made ? "new" : "joined",
	       (unsigned long long)o->seed);
	for (i = 0; i < n; i++)
		printf("nic %s pid %d sock %s\n", s[i].name, (int)s[i].pid, s[i].sock);
	printf("started %zu NIC%s in %s (logs: %s/" NIC_SOCK_PREFIX "ADDR" NIC_LOG_SUFFIX
	       "); to use them from this shell:\nexport NICSIM_DIR=",
	       n, n == 1 ? "" : "s", o->dir, o->dir);
	print_shell_word(o->dir);
	putchar('\n');
	rc = CLI_EXIT_OK;
out:
	if (lock_fd >= 0)
		close(lock_fd);
	free(s);
	return rc;
}

/* ---- down ---------------------------------------------------------------- */

struct victim {
	uint32_t addr;
	char name[FAB_ADDR_STRLEN];
	pid_t pid;   /* 0: nothing to signal */
	bool killed; /* needed SIGKILL */
	bool gone;
	bool along; /* not asked for: it shares the nicsimd of one that was */
	int err;    /* kill() failed with this errno */
};

/* Merge two sorted address lists into *out (sorted, no duplicates). */
static int merge_addrs(const uint32_t *a, size_t na, const uint32_t *b, size_t nb, uint32_t **out,
		       size_t *n)
{
	uint32_t *m, x, y;
	size_t i = 0, j = 0, k = 0;

	m = malloc((na + nb + 1) * sizeof(*m));
	if (!m)
		return -ENOMEM;
	while (i < na || j < nb) {
		x = i < na ? ntohl(a[i]) : UINT32_MAX;
		y = j < nb ? ntohl(b[j]) : UINT32_MAX;
		if (i < na && (j >= nb || x <= y)) {
			m[k++] = a[i++];
			if (j < nb && x == y)
				j++;
		} else {
			m[k++] = b[j++];
		}
	}
	*out = m;
	*n = k;
	return 0;
}

/* What to do about the NIC at v->addr: find the live nicsimd to signal
 * (v->pid), or clean up after one that is gone.  Returns false when it
 * cannot tell (prints why). */
static bool pick_victim(const struct cli_opts *o, struct victim *v)
{
	char pidf[PATH_MAX], sock[PATH_MAX], comm[32];
	struct mgmt_client c;
	pid_t pid = 0, peer = 0;
	bool removed;
	int rc;

	run_file(o, v->addr, NIC_PID_SUFFIX, pidf, sizeof(pidf));
	run_file(o, v->addr, NIC_SOCK_SUFFIX, sock, sizeof(sock));
	rc = read_pid_file(pidf, &pid);
	if (rc == 0 && proc_is_daemon(pid)) {
		/* A nicsimd, but is it this directory's NIC at this address?  A
		 * stale pid file can name the NIC of another run directory. */
		rc = sock_listener(sock, clamp_ms(o->timeout_ms, 1, PROBE_MS), &peer);
		if (rc == 0 && peer == pid) {
			v->pid = pid;
			return true;
		}
		fprintf(stderr,
			"nicsim: %s names pid %d, a " DAEMON_NAME
			" that does not listen on %s (%s); "
			"not signalling it\n",
			pidf, (int)pid, sock,
			rc == 0               ? "another process does"
			: rc == -ENOENT       ? "no socket there"
			: rc == -ECONNREFUSED ? "nobody listens there"
					      : strerror(-rc));
	} else if (rc == 0 && proc_alive(pid)) {
		fprintf(stderr,
			"nicsim: %s names pid %d, which is '%s', not " DAEMON_NAME
			"; not signalling it\n",
			pidf, (int)pid, proc_comm(pid, comm, sizeof(comm)));
	}
	/* No usable pid file: ask the socket who listens there. */
	rc = probe(sock, clamp_ms(o->timeout_ms, 1, PROBE_MS), &peer, &c);
	if (rc == 0 && c.hello.nic_addr != v->addr) {
		cli_err("%s: %s is served by pid %d as another address; left alone", v->name, sock,
			(int)peer);
		return false;
	}
	if (rc == 0) {
		v->pid = peer;
		return true;
	}
	if (rc != -ENOENT && rc != -ECONNREFUSED) {
		cli_err("%s: %s does not answer (%s) and no live " DAEMON_NAME
			" is recorded for it; left alone",
			v->name, sock, c.what ? c.what : strerror(-rc));
		return false;
	}
	removed = remove_file(sock);
	removed = remove_file(pidf) || removed;
	if (removed)
		printf("nic %s not running; removed its stale files\n", v->name);
	v->gone = true;
	return true;
}

/*
 * With --nic, the other NICs that the chosen one's nicsimd serves (nicsim up
 * --one-process): stopping it stops them too, so they are victims as well,
 * to be reported and cleaned up like it.  A pid file that names the same
 * live nicsimd is enough: that pid cannot have been reused while it runs.
 * Returns the new number of victims (v has room for n).
 */
static size_t add_companions(const struct cli_opts *o, const uint32_t *all, size_t n,
			     struct victim *v, size_t m)
{
	char pidf[PATH_MAX];
	size_t i, k, chosen = m;
	pid_t pid;

	if (!o->nic_set)
		return m;
	for (k = 0; k < chosen; k++) {
		if (!v[k].pid || v[k].gone)
			continue;
		for (i = 0; i < n && m < n; i++) {
			if (all[i] == v[k].addr)
				continue;
			run_file(o, all[i], NIC_PID_SUFFIX, pidf, sizeof(pidf));
			if (read_pid_file(pidf, &pid) || pid != v[k].pid)
				continue;
			v[m] = (struct victim){.addr = all[i], .pid = pid, .along = true};
			fab_addr_format(all[i], v[m].name, sizeof(v[m].name));
			m++;
		}
	}
	return m;
}

/* Signal every victim, wait for them to exit, SIGKILL the ones that do not. */
static void stop_victims(const struct cli_opts *o, struct victim *v, size_t n)
{
	int64_t deadline;
	bool left, killed = false;
	size_t i;

	for (i = 0; i < n; i++) {
		if (!v[i].pid || v[i].gone)
			continue;
		if (kill(v[i].pid, SIGTERM) < 0) {
			v[i].err = errno;
			v[i].gone = errno == ESRCH;
		}
	}
	deadline = now_ms() + o->timeout_ms;
	for (;;) {
		left = false;
		for (i = 0; i < n; i++) {
			if (v[i].pid && !v[i].gone && !v[i].err)
				v[i].gone = !proc_alive(v[i].pid);
			left |= v[i].pid && !v[i].gone && !v[i].err;
		}
		if (!left || now_ms() >= deadline) {
			if (!left || killed)
				break;
			/* Check again that each is still nicsimd before SIGKILL:
			 * its pid may have been reused since. */
			for (i = 0; i < n; i++) {
				if (!v[i].pid || v[i].gone || v[i].err)
					continue;
				if (proc_is_daemon(v[i].pid) && kill(v[i].pid, SIGKILL) == 0)
					v[i].killed = true;
				else
					v[i].gone = true;
			}
			killed = true;
			deadline = now_ms() + KILL_WAIT_MS;
		}
		sleep_ms(POLL_MS);
	}
}

int cli_down(struct cli_opts *o)
{
	uint32_t *pids = NULL, *socks = NULL, *all = NULL;
	size_t npids = 0, nsocks = 0, n = 0, i, m = 0;
	char pidf[PATH_MAX], sock[PATH_MAX];
	struct victim *v = NULL;
	struct mgmt_client c;
	int rc, status = CLI_EXIT_OK, lock_fd = -1, lock_ms;
	pid_t pid;

	/* An `up` in progress finishes first; then its NICs are stopped.  By
	 * default down waits as long as such an up may take; --timeout-ms
	 * bounds this wait too, as it bounds every other. */
	lock_ms = o->timeout_ms ? o->timeout_ms : CLI_UP_TIMEOUT_MS + CLI_DOWN_TERM_MS;
	if (!o->timeout_ms)
		o->timeout_ms = CLI_DOWN_TERM_MS;
	rc = cli_dir_list(o->dir, NIC_PID_SUFFIX, &pids, &npids);
	if (rc == 0) {
		lock_fd = lock_dir(o, "down", lock_ms);
		if (lock_fd < 0) {
			status = CLI_EXIT_FAIL;
			goto out;
		}
		free(pids);
		pids = NULL;
		rc = cli_dir_list(o->dir, NIC_PID_SUFFIX, &pids, &npids);
	}
	if (!rc)
		rc = cli_dir_list(o->dir, NIC_SOCK_SUFFIX, &socks, &nsocks);
	if (rc == -ENOENT) {
		say(o, "no NICs to stop in %s (the directory does not exist)\n", o->dir);
		return CLI_EXIT_OK;
	}
	if (!rc)
		rc = merge_addrs(pids, npids, socks, nsocks, &all, &n);
	if (rc) {
		cli_err("cannot read run directory %s: %s", o->dir, strerror(-rc));
		status = CLI_EXIT_FAIL;
		goto out;
	}
	v = calloc(n + 1, sizeof(*v));
	if (!v) {
		cli_err("out of memory");
		status = CLI_EXIT_FAIL;
		goto out;
	}
	for (i = 0; i < n; i++) {
		if (o->nic_set && all[i] != o->nic)
			continue;
		if (cli_sock_path(o, all[i], sock, sizeof(sock))) {
			status = CLI_EXIT_USAGE;
			goto out;
		}
		v[m].addr = all[i];
		fab_addr_format(all[i], v[m].name, sizeof(v[m].name));
		m++;
	}
	if (m == 0) {
		if (o->nic_set) {
			say(o, "no NIC %s in %s; nothing to stop\n",
			    fab_addr_format(o->nic, sock, sizeof(sock)), o->dir);
		} else {
			say(o, "no NICs to stop in %s\n", o->dir);
			remove_fabric(o);
		}
		goto out;
	}
	for (i = 0; i < m; i++)
		if (!pick_victim(o, &v[i]))
			status = CLI_EXIT_FAIL;
	m = add_companions(o, all, n, v, m);
	stop_victims(o, v, m);
	for (i = 0; i < m; i++) {
		if (!v[i].pid)
			continue;
		if (v[i].err && v[i].err != ESRCH) {
			cli_err("cannot stop nicsimd pid %d of %s: %s", (int)v[i].pid, v[i].name,
				strerror(v[i].err));
			status = CLI_EXIT_FAIL;
			continue;
		}
		if (!v[i].gone) {
			cli_err("nicsimd pid %d of %s is still running after SIGKILL",
				(int)v[i].pid, v[i].name);
			status = CLI_EXIT_FAIL;
			continue;
		}
		/* A daemon that exited on SIGTERM removed its own files; one
		 * that was killed could not. */
		run_file(o, v[i].addr, NIC_PID_SUFFIX, pidf, sizeof(pidf));
		run_file(o, v[i].addr, NIC_SOCK_SUFFIX, sock, sizeof(sock));
		if (read_pid_file(pidf, &pid) == 0 && pid == v[i].pid)
			remove_file(pidf);
		if (probe(sock, PROBE_MS, &pid, &c) == -ECONNREFUSED)
			remove_file(sock);
		if (v[i].along)
			say(o,
			    "stopped nic %s too: it ran in the same nicsimd (pid %d, "
			    "nicsim up --one-process)\n",
			    v[i].name, (int)v[i].pid);
		else if (v[i].killed)
			say(o,
			    "stopped nic %s (nicsimd pid %d) with SIGKILL: it did not exit "
			    "within %d ms of SIGTERM\n",
			    v[i].name, (int)v[i].pid, o->timeout_ms);
		else
			say(o, "stopped nic %s (nicsimd pid %d)\n", v[i].name, (int)v[i].pid);
	}
	if (!o->nic_set && status == CLI_EXIT_OK)
		remove_fabric(o);
out:
	if (lock_fd >= 0)
		close(lock_fd);
	free(v);
	free(all);
	free(pids);
	free(socks);
	return status;
}

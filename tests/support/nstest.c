#include "nstest.h"
#include "nstnet.h"

#include "fab.h"
#include "nstcapture.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef NICSIM_BUILD_BIN_DIR
#define NICSIM_BUILD_BIN_DIR "."
#endif

/* ---- The guard: no process of a test outlives it ------------------------
 *
 * Processes a test forks itself get PR_SET_PDEATHSIG (die_with_parent), but
 * the NICs `nicsim up` starts are daemons (their own session, parent init)
 * and a child can be made without the support code.  So nst_run_suite forks
 * a guard first: a small process that learns each run directory the test
 * makes (nst_tmpdir sends its path down a pipe) and, when the test ends --
 * whether it returned or was killed, even by SIGKILL -- kills with SIGKILL
 * every process of the user that names one of those directories, as
 * --dir DIR (nicsimd, nicsim capture) or NICSIM_DIR=DIR in its environment
 * (programs on the provider), DIR itself or below it.  Directories come
 * from mkdtemp, so no other test's process can match.  The guard learns of
 * the test's end from PR_SET_PDEATHSIG, and checks its parent once a second
 * in case the signal came before it was armed. */

#define GUARD_DIRS 128
#define GUARD_DIR_MAX 256

static int guard_fd = -1; /* the test's end of the pipe */
static volatile sig_atomic_t guard_parent_gone;
static char guard_dirs[GUARD_DIRS][GUARD_DIR_MAX]; /* in the guard */
static size_t guard_ndirs;
/* Network namespaces the test made (nstnet.h), named in /run/netns: the
 * guard removes those still there when the test ends. */
#define GUARD_NETNS 64
#define GUARD_NETNS_TAG "netns:"
static char guard_netns[GUARD_NETNS][GUARD_DIR_MAX];
static size_t guard_nnetns;

/* In a child just forked by parent: it gets SIGKILL when the thread that
 * forked it ends; if the parent is already gone, it ends now. */
static void die_with_parent(pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);
}

static void guard_on_signal(int sig)
{
	(void)sig;
	guard_parent_gone = 1;
}

/* dir registered, or below one that is. */
static bool guard_owns(const char *dir)
{
	for (size_t i = 0; i < guard_ndirs; i++) {
		size_t n = strlen(guard_dirs[i]);

		if (!strncmp(dir, guard_dirs[i], n) && (dir[n] == '\0' || dir[n] == '/'))
			return true;
	}
	return false;
}

/* Read /proc/<pid>/<what> (NUL-separated strings) into buf; its length. */
static size_t proc_strings(const char *pid, const char *what, char *buf, size_t size)
{
	char path[64];
	size_t len = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%s/%s", pid, what);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	while (len + 1 < size && (n = read(fd, buf + len, size - len - 1)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = '\0';
	return len;
}

/* Whether the process pid (a /proc name) names one of the guard's
 * directories in its arguments or environment. */
static bool guard_match(const char *pid)
{
	static char buf[1 << 16];
	size_t len = proc_strings(pid, "cmdline", buf, sizeof(buf));
	bool dir_next = false;

	for (const char *a = buf; a < buf + len; a += strlen(a) + 1) {
		if (dir_next && guard_owns(a))
			return true;
		if (!strncmp(a, "--dir=", 6) && guard_owns(a + 6))
			return true;
		dir_next = !strcmp(a, "--dir");
	}
	len = proc_strings(pid, "environ", buf, sizeof(buf));
	for (const char *a = buf; a < buf + len; a += strlen(a) + 1)
		if (!strncmp(a, "NICSIM_DIR=", 11) && guard_owns(a + 11))
			return true;
	return false;
}

/* Kill every process of the guard's directories; wait (bounded) until they
 * are gone.  Returns how many there were. */
static unsigned guard_sweep(const char *prog)
{
	pid_t killed[256];
	unsigned n = 0;
	struct dirent *e;
	DIR *d;

	if (!guard_ndirs || !(d = opendir("/proc")))
		return 0;
	while ((e = readdir(d)) && n < 256) {
		pid_t pid = (pid_t)strtol(e->d_name, NULL, 10);

		if (pid <= 0 || pid == getpid() || !guard_match(e->d_name))
			continue;
		if (kill(pid, SIGKILL) == 0) {
			killed[n++] = pid;
			fprintf(stderr, "%s: killed pid %d, left running by the test\n", prog,
				(int)pid);
		}
	}
	closedir(d);
	for (unsigned i = 0; i < n; i++) {
		uint64_t deadline = nst_now_ns() + 5000000000ull;

		while (nst_pid_alive(killed[i]) && nst_now_ns() < deadline)
			nst_sleep_ms(5);
	}
	return n;
}

static void guard_add(char *line)
{
	line[strcspn(line, "\n")] = '\0';
	if (!strncmp(line, GUARD_NETNS_TAG, strlen(GUARD_NETNS_TAG))) {
		line += strlen(GUARD_NETNS_TAG);
		/* A plain name: nothing that could climb out of /run/netns. */
		if (*line && !strchr(line, '/') && strcmp(line, "..") &&
		    guard_nnetns < GUARD_NETNS && strlen(line) < GUARD_DIR_MAX)
			snprintf(guard_netns[guard_nnetns++], GUARD_DIR_MAX, "%s", line);
		return;
	}
	if (*line && guard_ndirs < GUARD_DIRS && strlen(line) < GUARD_DIR_MAX && !guard_owns(line))
		snprintf(guard_dirs[guard_ndirs++], GUARD_DIR_MAX, "%s", line);
}

static void __attribute__((noreturn)) guard_main(int rfd, pid_t parent, const char *prog)
{
	struct sigaction sa = {.sa_handler = guard_on_signal};
	char buf[8192];
	size_t used = 0;

	sigaction(SIGTERM, &sa, NULL);
	signal(SIGINT, SIG_IGN); /* Ctrl-C: the test ends, then the guard cleans up */
	prctl(PR_SET_NAME, "nstest-guard");
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	for (;;) {
		struct pollfd p = {.fd = rfd, .events = POLLIN};
		ssize_t n;
		char *nl;

		if (guard_parent_gone || getppid() != parent)
			break;
		if (poll(&p, 1, 1000) <= 0)
			continue;
		n = read(rfd, buf + used, sizeof(buf) - used - 1);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			/* Every writer gone: the test too, or it closed its end. */
			if (n == 0)
				break;
			continue;
		}
		used += (size_t)n;
		buf[used] = '\0';
		while ((nl = strchr(buf, '\n'))) {
			*nl = '\0';
			guard_add(buf);
			used -= (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, used + 1);
		}
		if (used == sizeof(buf) - 1)
			used = 0; /* a line that long is no directory of ours */
	}
	/* The lines still in the pipe: the test's last directories. */
	fcntl(rfd, F_SETFL, O_NONBLOCK);
	while (used < sizeof(buf) - 1) {
		ssize_t n = read(rfd, buf + used, sizeof(buf) - used - 1);

		if (n <= 0)
			break;
		used += (size_t)n;
	}
	buf[used] = '\0';
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
		guard_add(line);
	guard_sweep(prog);
	for (size_t i = 0; i < guard_nnetns; i++) {
		char path[GUARD_DIR_MAX + 16];

		snprintf(path, sizeof(path), "/run/netns/%s", guard_netns[i]);
		/* As `ip netns del`: the mount that keeps it, then its name. */
		if (umount2(path, MNT_DETACH) == 0 && unlink(path) == 0)
			fprintf(stderr, "%s: removed network namespace %s, left by the test\n",
				prog, guard_netns[i]);
	}
	_exit(0);
}

/* Start the guard; without it the test runs unguarded (said on stderr). */
static void guard_start(const char *prog)
{
	pid_t parent = getpid(), pid;
	int fds[2];

	if (guard_fd >= 0)
		return;
	if (pipe2(fds, O_CLOEXEC) < 0) {
		perror("nstest: no guard for this test's processes: pipe");
		return;
	}
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		close(fds[1]);
		guard_main(fds[0], parent, prog);
	}
	close(fds[0]);
	if (pid < 0) {
		perror("nstest: no guard for this test's processes: fork");
		close(fds[1]);
		return;
	}
	guard_fd = fds[1];
}

/* Tell the guard about a run directory of the test. */
static void guard_register(const char *dir)
{
	char line[GUARD_DIR_MAX + 1];
	int n = snprintf(line, sizeof(line), "%s\n", dir);

	if (guard_fd < 0)
		return;
	if (n < 0 || (size_t)n >= sizeof(line) || write(guard_fd, line, (size_t)n) != n)
		fprintf(stderr,
			"nstest: the guard does not know %s: its processes may outlive "
			"the test\n",
			dir);
}

void nst_guard_dir(const char *dir)
{
	guard_register(dir);
}

void nst_guard_netns(const char *name)
{
	char line[GUARD_DIR_MAX];

	snprintf(line, sizeof(line), GUARD_NETNS_TAG "%s", name);
	guard_register(line);
}

int nst_main(int argc, char **argv, const char *suite, const struct nst_test *tests,
	     int (*init)(void), int (*clean)(void))
{
	const struct nst_suite s = {.name = suite, .tests = tests, .init = init, .clean = clean};

	return nst_run_suite(argc, argv, &s);
}

int nst_run_suite(int argc, char **argv, const struct nst_suite *suite)
{
	const char *filter = argc > 1 ? argv[1] : NULL;
	unsigned failed, run, asserts_failed;
	CU_pSuite s;

	/* A reader that goes away must not kill a test with SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	guard_start(suite->name);
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 2;
	s = CU_add_suite_with_setup_and_teardown(suite->name, suite->init, suite->clean,
						 suite->setup, suite->teardown);
	if (!s)
		goto fail;
	for (const struct nst_test *t = suite->tests; t->name; t++) {
		if (filter && !strstr(t->name, filter))
			continue;
		if (!CU_add_test(s, t->name, t->fn))
			goto fail;
	}
	CU_basic_set_mode(CU_BRM_VERBOSE);
	if (CU_basic_run_tests() != CUE_SUCCESS)
		goto fail;
	run = CU_get_number_of_tests_run();
	failed = CU_get_number_of_tests_failed();
	asserts_failed = CU_get_number_of_failures();
	/* A suite whose init failed runs nothing: that is a failure, not a pass. */
	if (CU_get_number_of_suites_failed() > 0 || run == 0) {
		fprintf(stderr, "%s: suite set-up or clean-up failed, or no test ran\n",
			suite->name);
		failed = failed ? failed : 1;
	}
	nst_capture_stop_all(failed || asserts_failed);
	CU_cleanup_registry();
	return failed || asserts_failed ? 1 : 0;
fail:
	fprintf(stderr, "%s: CUnit error: %s\n", suite->name, CU_get_error_msg());
	CU_cleanup_registry();
	return 2;
}

int nst_tmpdir(char *buf, size_t size, const char *tag)
{
	const char *base = getenv("TMPDIR");
	int n;

	if (!base || !*base)
		base = "/tmp";
	/* Short names: UNIX socket paths inside must fit in 108 bytes. */
	n = snprintf(buf, size, "%s/ns-%s-XXXXXX", base, tag ? tag : "t");
	if (n < 0 || (size_t)n >= size)
		return -ENAMETOOLONG;
	if (!mkdtemp(buf))
		return -errno;
	guard_register(buf);
	nst_capture_start(buf);
	return 0;
}

static int rm_entry(int dirfd, const char *name, int depth)
{
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode) && depth < 16) {
		int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
		DIR *d;
		struct dirent *e;

		if (fd < 0)
			return -errno;
		d = fdopendir(fd);
		if (!d) {
			close(fd);
			return -errno;
		}
		while ((e = readdir(d))) {
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
				rm_entry(fd, e->d_name, depth + 1);
		}
		closedir(d);
		return unlinkat(dirfd, name, AT_REMOVEDIR) < 0 ? -errno : 0;
	}
	return unlinkat(dirfd, name, 0) < 0 ? -errno : 0;
}

void nst_rmtree(const char *dir)
{
	if (dir && *dir) {
		nst_capture_stop(dir, CU_get_number_of_failures() != 0);
		rm_entry(AT_FDCWD, dir, 0);
	}
}

void nst_done_with_dir(const char *dir)
{
	nst_capture_stop(dir, CU_get_number_of_failures() != 0);
	if (CU_get_number_of_failures() == 0) {
		nst_rmtree(dir);
		return;
	}
	fprintf(stderr, "test files kept in %s (NIC logs: nic-*.log)\n", dir);
}

int nst_suite_dir(char *buf, size_t size, const char *tag, unsigned how)
{
	if (nst_tmpdir(buf, size, tag))
		return -1;
	if ((how & NST_TMP_CWD) && chdir(buf))
		return -1;
	if ((how & NST_TMP_ENV) && setenv("TMPDIR", buf, 1))
		return -1;
	return 0;
}

int nst_suite_dir_done(const char *dir)
{
	if (chdir("/"))
		return -1;
	nst_done_with_dir(dir);
	return 0;
}

const char *nst_bin(const char *name)
{
	static char path[PATH_MAX];
	const char *dir = getenv("NICSIM_BIN_DIR");

	if (!dir || !*dir)
		dir = NICSIM_BUILD_BIN_DIR;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return path;
}

long nst_proc_status_kib(pid_t pid, const char *field)
{
	char path[64], line[256];
	size_t n = strlen(field);
	long kib = -1;
	FILE *f;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/status");
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, field, n) == 0 && line[n] == ':') {
			if (sscanf(line + n + 1, " %ld kB", &kib) != 1)
				kib = -1;
			break;
		}
	}
	fclose(f);
	return kib;
}

int nst_fd_count(pid_t pid)
{
	char path[64];
	struct dirent *e;
	DIR *d;
	int n = 0;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/fd");
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	/* Listing this process's own holds one for the listing itself. */
	if (!pid || pid == getpid())
		n--;
	closedir(d);
	return n;
}

void nst_fill(void *buf, size_t n, uint32_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull | 1;
	uint8_t *p = buf;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (uint8_t)x;
	}
}

uint32_t nst_sum32(const void *buf, size_t n)
{
	const uint8_t *p = buf;
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

uint64_t nst_splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

int nst_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int nst_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double nst_median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), nst_cmp_double);
	return v[n / 2];
}

double nst_median_u64(uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), nst_cmp_u64);
	return (double)v[n / 2];
}

int nst_pvr_self(void *dst, const void *src, size_t len)
{
	struct iovec l = {.iov_base = dst, .iov_len = len};
	struct iovec r = {.iov_base = (void *)src, .iov_len = len};
	ssize_t n = process_vm_readv(getpid(), &l, 1, &r, 1, 0);
	int err = n < 0 ? -errno : n != (ssize_t)len ? -EIO : 0;

	if (err)
		printf("  process_vm_readv of %zu bytes within this process: %s (copied %zd): "
		       "no reference copy, so no ratio\n",
		       len, strerror(-err), n);
	return err;
}

int nst_copy_refs(const void *src, void *dst, size_t len, unsigned rounds, double *memcpy_ns,
		  double *pvr_ns)
{
	uint64_t *a = calloc(rounds ? rounds : 1, sizeof(*a));
	uint64_t *b = calloc(rounds ? rounds : 1, sizeof(*b));
	int err = 0;

	*memcpy_ns = *pvr_ns = 0;
	if (!a || !b || !rounds) {
		free(a);
		free(b);
		return rounds ? -ENOMEM : -EINVAL;
	}
	for (unsigned i = 0; i < rounds && !err; i++) {
		uint64_t t0 = nst_now_ns();

		memcpy(dst, src, len);
		__asm__ __volatile__("" ::"r"(dst) : "memory");
		a[i] = nst_now_ns() - t0;
		t0 = nst_now_ns();
		err = nst_pvr_self(dst, src, len);
		b[i] = nst_now_ns() - t0;
	}
	if (!err) {
		*memcpy_ns = nst_median_u64(a, rounds);
		*pvr_ns = nst_median_u64(b, rounds);
	}
	free(a);
	free(b);
	return err;
}

uint64_t nst_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void nst_sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

int nst_wait(pid_t pid, int timeout_ms)
{
	uint64_t deadline = nst_now_ns() + (uint64_t)timeout_ms * 1000000u;
	int status, delay = 1;

	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return status;
		if (r < 0 && errno != EINTR)
			return -errno;
		if (nst_now_ns() >= deadline)
			return -ETIMEDOUT;
		nst_sleep_ms(delay);
		if (delay < 20)
			delay *= 2;
	}
}

int nst_stop(pid_t pid, int timeout_ms)
{
	int status;

	if (pid <= 0)
		return -1;
	if (kill(pid, SIGTERM) < 0 && errno == ESRCH)
		return -1;
	status = nst_wait(pid, timeout_ms);
	if (status == -ETIMEDOUT) {
		kill(pid, SIGKILL);
		status = nst_wait(pid, 5000);
	}
	return status < 0 ? -1 : status;
}

bool nst_wait_until(bool (*done)(void *arg), void *arg, int timeout_ms, int pause_ms)
{
	uint64_t deadline = nst_now_ns() + (uint64_t)timeout_ms * 1000000u;

	while (!done(arg)) {
		if (nst_now_ns() >= deadline)
			return done(arg);
		nst_sleep_ms(pause_ms);
	}
	return true;
}

bool nst_stop_clean(pid_t pid, int timeout_ms)
{
	int status = nst_stop(pid, timeout_ms);

	if (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return true;
	fprintf(stderr, "nicsimd %d ended with status 0x%x\n", (int)pid, status);
	return false;
}

/* True once a connection to the UNIX socket at path is accepted. */
static bool sock_accepts(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, ok;

	if (strlen(path) >= sizeof(sa.sun_path))
		return false;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

pid_t nst_start_nic(const char *dir, const char *addr, const char *const *extra, int timeout_ms)
{
	return nst_start_nic_in(NULL, dir, addr, extra, timeout_ms);
}

static pid_t start_nic(const char *netns, const char *dir, const char *addr,
		       const char *const *extra, int drop_cap, int timeout_ms);

pid_t nst_start_nic_in(const char *netns, const char *dir, const char *addr,
		       const char *const *extra, int timeout_ms)
{
	return start_nic(netns, dir, addr, extra, -1, timeout_ms);
}

pid_t nst_start_nic_without(const char *dir, const char *addr, const char *const *extra, int cap,
			    int timeout_ms)
{
	return start_nic(NULL, dir, addr, extra, cap, timeout_ms);
}

/* nst_start_nic_in, with capability drop_cap (>= 0) out of the bounding set. */
static pid_t start_nic(const char *netns, const char *dir, const char *addr,
		       const char *const *extra, int drop_cap, int timeout_ms)
{
	char sock[PATH_MAX], log[PATH_MAX];
	const char *argv[40];
	size_t n = 0;
	uint64_t deadline;
	pid_t pid, parent;

	snprintf(sock, sizeof(sock), "%s/nic-%s.sock", dir, addr);
	snprintf(log, sizeof(log), "%s/nic-%s.log", dir, addr);
	argv[n++] = nst_bin("nicsimd");
	argv[n++] = "--dir";
	argv[n++] = dir;
	argv[n++] = "--addr";
	argv[n++] = addr;
	for (; extra && *extra && n < 38; extra++)
		argv[n++] = *extra;
	argv[n] = NULL;

	parent = getpid();
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

		die_with_parent(parent);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		if (netns && nst_net_enter(netns) < 0) {
			fprintf(stderr, "cannot enter network namespace %s\n", netns);
			_exit(126);
		}
		/* Without CAP_SETPCAP the drop fails: that is fine for a user
		 * other than root, whose nicsimd gets no capability at exec. */
		if (drop_cap >= 0 && prctl(PR_CAPBSET_DROP, (unsigned long)drop_cap, 0, 0, 0) < 0 &&
		    geteuid() == 0) {
			fprintf(stderr, "cannot drop capability %d: %s\n", drop_cap,
				strerror(errno));
			_exit(125);
		}
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	deadline = nst_now_ns() + (uint64_t)timeout_ms * 1000000u;
	/* Its own address, then every further --addr it serves. */
	for (size_t k = 4; k < n; k += 2) {
		if (k > 4) {
			for (; k < n && strcmp(argv[k - 1], "--addr") != 0; k++)
				;
			if (k >= n)
				break;
			snprintf(sock, sizeof(sock), "%s/nic-%s.sock", dir, argv[k]);
		}
		while (!sock_accepts(sock)) {
			int status;

			if (waitpid(pid, &status, WNOHANG) == pid) {
				fprintf(stderr, "nicsimd %s exited early (status 0x%x); see %s\n",
					addr, status, log);
				return -ECHILD;
			}
			if (nst_now_ns() >= deadline) {
				fprintf(stderr, "nicsimd %s not ready after %d ms; see %s\n", addr,
					timeout_ms, log);
				nst_stop(pid, 2000);
				return -ETIMEDOUT;
			}
			nst_sleep_ms(5);
		}
	}
	return pid;
}

int nst_stop_nics_clean(const char *dir, const pid_t *pids, size_t n, int timeout_ms)
{
	bool all = true;

	for (size_t i = 0; i < n; i++)
		if (!nst_stop_clean(pids[i], timeout_ms))
			all = false;
	if (!all) {
		fprintf(stderr, "logs in %s\n", dir);
		return -1;
	}
	nst_done_with_dir(dir);
	return 0;
}

pid_t nst_spawn_output(const char *const *argv, const char *const *env, int *out_fd)
{
	pid_t pid, parent = getpid();
	int fds[2];

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		die_with_parent(parent);
		for (; env && *env; env++)
			putenv((char *)*env);
		dup2(fds[1], STDOUT_FILENO);
		dup2(fds[1], STDERR_FILENO);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(fds[1]);
	if (pid < 0) {
		close(fds[0]);
		return -errno;
	}
	*out_fd = fds[0];
	return pid;
}

bool nst_read_until(int fd, char *buf, size_t size, size_t *len, const char *what, int ms)
{
	uint64_t deadline = nst_now_ns() + (uint64_t)ms * 1000000u;

	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		uint64_t now = nst_now_ns();
		ssize_t r;

		buf[*len] = '\0';
		if (what && strstr(buf, what))
			return true;
		if (now >= deadline || *len + 1 >= size)
			return false;
		if (poll(&p, 1, (int)((deadline - now) / 1000000u) + 1) <= 0)
			continue;
		r = read(fd, buf + *len, size - *len - 1);
		if (r <= 0)
			return !what;
		*len += (size_t)r;
	}
}

int nst_run(const char *const *argv, char *out, size_t size, int timeout_ms)
{
	int pipefd[2], status;
	size_t len = 0;
	uint64_t deadline;
	pid_t pid, parent = getpid();

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return -errno;
	}
	if (pid == 0) {
		die_with_parent(parent);
		dup2(pipefd[1], STDOUT_FILENO);
		dup2(pipefd[1], STDERR_FILENO);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(pipefd[1]);
	deadline = nst_now_ns() + (uint64_t)timeout_ms * 1000000u;
	for (;;) {
		uint64_t now = nst_now_ns();
		struct pollfd p = {.fd = pipefd[0], .events = POLLIN};
		char sink[4096];
		ssize_t r;

		if (now >= deadline) {
			kill(pid, SIGKILL);
			break;
		}
		if (poll(&p, 1, (int)((deadline - now) / 1000000u) + 1) <= 0)
			continue;
		if (out && len + 1 < size)
			r = read(pipefd[0], out + len, size - len - 1);
		else
			r = read(pipefd[0], sink, sizeof(sink));
		if (r <= 0)
			break;
		if (out && len + 1 < size)
			len += (size_t)r;
	}
	close(pipefd[0]);
	if (out && size)
		out[len] = '\0';
	status = nst_wait(pid, 5000);
	if (status == -ETIMEDOUT) {
		kill(pid, SIGKILL);
		status = nst_wait(pid, 5000);
	}
	if (status < 0)
		return status;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

int nst_run_shown(const char *bin, const char *name, const char *const *args, char *out,
		  size_t size, int timeout_ms)
{
	const char *argv[64];
	size_t n = 0;
	int rc;

	argv[n++] = bin;
	for (; *args && n < 63; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	rc = nst_run(argv, out, size, timeout_ms);
	printf("\n  $ %s", name);
	for (n = 1; argv[n]; n++)
		printf(" %s", argv[n]);
	printf("  -> %d\n%s", rc, out);
	return rc;
}

/* Read up to size - 1 bytes of a small file into buf; the length or -1. */
static ssize_t read_small(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return n;
}

int nst_pin(pid_t pid, unsigned cpu)
{
	cpu_set_t allowed, one;
	unsigned n = 0;

	/* The CPUs pid may use now (not the caller's: it may be pinned). */
	if (sched_getaffinity(pid, sizeof(allowed), &allowed) < 0)
		return -errno;
	n = (unsigned)CPU_COUNT(&allowed);
	if (n == 0)
		return -EINVAL;
	cpu %= n;
	CPU_ZERO(&one);
	for (unsigned c = 0; c < CPU_SETSIZE; c++) {
		if (CPU_ISSET(c, &allowed) && cpu-- == 0) {
			CPU_SET(c, &one);
			break;
		}
	}
	return sched_setaffinity(pid, sizeof(one), &one) < 0 ? -errno : 0;
}

bool nst_pid_alive(pid_t pid)
{
	char path[64], buf[512], *p;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (pid <= 0 || read_small(path, buf, sizeof(buf)) <= 0)
		return false;
	p = strrchr(buf, ')');
	return !p || (p[1] == ' ' && p[2] != 'Z' && p[2] != 'X');
}

int nst_wait_blocked(pid_t tid, int timeout_ms)
{
	uint64_t deadline = nst_now_ns() + (uint64_t)timeout_ms * 1000000u;
	char path[64], buf[512], *p;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	for (;;) {
		if (read_small(path, buf, sizeof(buf)) <= 0 || !(p = strrchr(buf, ')')))
			return -ESRCH;
		if (p[1] == ' ' && (p[2] == 'S' || p[2] == 'D'))
			return 0;
		if (p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'))
			return -ESRCH;
		if (nst_now_ns() >= deadline)
			return -ETIMEDOUT;
		/* A bounded back-off of a wait for a condition. */
		nst_sleep_ms(1);
	}
}

bool nst_pid_is_nicsimd(pid_t pid)
{
	char path[64], comm[32];

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	return pid > 0 && read_small(path, comm, sizeof(comm)) > 0 && !strcmp(comm, "nicsimd\n");
}

pid_t nst_read_pid_file(const char *path)
{
	char buf[32];

	return read_small(path, buf, sizeof(buf)) > 0 ? (pid_t)strtol(buf, NULL, 10) : 0;
}

void nst_kill_nicsimds(pid_t *pids, size_t n, int timeout_ms, const char *who)
{
	for (size_t i = 0; i < n; i++) {
		if (pids[i] > 0 && nst_pid_alive(pids[i]) && nst_pid_is_nicsimd(pids[i])) {
			uint64_t deadline = nst_now_ns() + (uint64_t)timeout_ms * 1000000u;

			fprintf(stderr, "%s: killing leftover nicsimd %d\n", who, (int)pids[i]);
			kill(pids[i], SIGKILL);
			while (nst_pid_alive(pids[i]) && nst_now_ns() < deadline)
				nst_sleep_ms(10);
		}
		pids[i] = 0;
	}
}

pid_t nst_fork(int (*fn)(void *), void *arg)
{
	pid_t pid, parent = getpid();

	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		die_with_parent(parent);
		_exit(fn(arg) & 0xff);
	}
	return pid < 0 ? -errno : pid;
}

pid_t nst_fork_ready(int (*fn)(void *arg, int ready_fd), void *arg, int timeout_ms)
{
	struct pollfd p;
	int fds[2];
	char c;
	pid_t pid, parent = getpid();

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		die_with_parent(parent);
		close(fds[0]);
		_exit(fn(arg, fds[1]) & 0xff);
	}
	close(fds[1]);
	if (pid < 0) {
		close(fds[0]);
		return -errno;
	}
	p = (struct pollfd){.fd = fds[0], .events = POLLIN};
	if (poll(&p, 1, timeout_ms) != 1 || read(fds[0], &c, 1) != 1) {
		close(fds[0]);
		kill(pid, SIGKILL);
		nst_wait(pid, 5000);
		return -ETIMEDOUT;
	}
	close(fds[0]);
	return pid;
}

struct fab_port_info nst_fab_port(struct fab *fab, uint32_t addr)
{
	struct fab_port_info *list, info;
	size_t n, i;

	memset(&info, 0, sizeof(info));
	NST_REQUIRE_EQ(fab_port_list(fab, &list, &n), 0);
	for (i = 0; i < n; i++)
		if (list[i].addr == addr)
			info = list[i];
	free(list);
	return info;
}

uint32_t nst_fab_frames_free(struct fab *fab)
{
	struct fab_info info;

	NST_REQUIRE_EQ(fab_info(fab, &info), 0);
	return info.frames_free;
}

#include "nstest.h"

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

static void sleep_ms(int ms)
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
		sleep_ms(delay);
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
	char sock[PATH_MAX], log[PATH_MAX];
	const char *argv[40];
	size_t n = 0;
	uint64_t deadline;
	pid_t pid;

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

	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	deadline = nst_now_ns() + (uint64_t)timeout_ms * 1000000u;
	while (!sock_accepts(sock)) {
		int status;

		if (waitpid(pid, &status, WNOHANG) == pid) {
			fprintf(stderr, "nicsimd %s exited early (status 0x%x); see %s\n", addr,
				status, log);
			return -ECHILD;
		}
		if (nst_now_ns() >= deadline) {
			fprintf(stderr, "nicsimd %s not ready after %d ms; see %s\n", addr,
				timeout_ms, log);
			nst_stop(pid, 2000);
			return -ETIMEDOUT;
		}
		sleep_ms(5);
	}
	return pid;
}

int nst_run(const char *const *argv, char *out, size_t size, int timeout_ms)
{
	int pipefd[2], status;
	size_t len = 0;
	uint64_t deadline;
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return -errno;
	}
	if (pid == 0) {
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
				sleep_ms(10);
		}
		pids[i] = 0;
	}
}

pid_t nst_fork(int (*fn)(void *), void *arg)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid == 0)
		_exit(fn(arg) & 0xff);
	return pid < 0 ? -errno : pid;
}

pid_t nst_fork_ready(int (*fn)(void *arg, int ready_fd), void *arg, int timeout_ms)
{
	struct pollfd p;
	int fds[2];
	char c;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
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

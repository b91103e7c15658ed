/*
 * The attach socket under abuse, both sides of it: processes of another
 * user refused by the NIC (status DENIED, counted) and a listener of another
 * user refused by the host driver before it says a word; an empty hello
 * answered and counted; a connection that never says hello closed at its
 * deadline; descriptors running out at accept refused at once, logged once,
 * without spinning; only as many contexts as the descriptor limit holds,
 * said at start and refused beyond; management clients that send
 * requests and never read, which must not hold the NIC up while another
 * client and a host are served; management sessions that stay open and
 * idle, which must not keep hosts or other clients out; another user's
 * silent connections, refused at once; log lines bounded however many
 * connections misbehave; a fabric whose header is written over, said once
 * in the NIC's log; and nicsimd's words for addresses it refuses.
 *
 * The tests of another user need root (they take uid 65534 for a moment)
 * and say so when they cannot run.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fab.h"
#include "fab_addr.h"
#include "mgmt_client.h"
#include "nicsim_host.h"
#include "nicsim_mgmt.h"
#include "nstest.h"

#define ADDR "198.18.0.1"
#define ADDR_LIMITED "198.18.0.2" /* started with a low descriptor limit */
#define ADDR_FAKE "198.18.0.9"    /* a listener of another user */
#define ADDR_FABRIC "198.18.0.3"  /* on a fabric that gets damaged */
#define WAIT_MS 10000
#define NOBODY 65534
#define HELLO_TIMEOUT_MS ((int)NIC_HELLO_TIMEOUT_MS)

static char dir[256], sock[300], log_path[300];
static pid_t nic = -1;

/* ---- A raw client of the attach socket ------------------------------------------- */

static int raw_connect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (strlen(path) >= sizeof(sa.sun_path)) {
		close(fd);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

static int send_hello(int fd, uint16_t role)
{
	struct nic_hello h = {.magic = NIC_ABI_MAGIC,
			      .abi_version = NIC_ABI_VERSION,
			      .role = role,
			      .pid = (uint32_t)getpid()};

	return send(fd, &h, sizeof(h), MSG_NOSIGNAL) == (ssize_t)sizeof(h) ? 0 : -errno;
}

/* Wait up to ms for fd to be readable: 0 or -ETIMEDOUT. */
static int wait_in(int fd, int ms)
{
	uint64_t deadline = nst_now_ns() + (uint64_t)ms * 1000000u;

	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		uint64_t now = nst_now_ns();
		int r;

		if (now >= deadline)
			return -ETIMEDOUT;
		r = poll(&p, 1, (int)((deadline - now) / 1000000u) + 1);
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

/* The status of the hello reply that comes within ms, or a negative errno. */
static int reply_status(int fd, int ms)
{
	struct nic_hello_reply r;
	ssize_t n;
	int err = wait_in(fd, ms);

	if (err)
		return err;
	n = recv(fd, &r, sizeof(r), MSG_DONTWAIT);
	if (n < 0)
		return -errno;
	if (n != (ssize_t)sizeof(r) || r.magic != NIC_ABI_MAGIC)
		return -EPROTO;
	return r.status;
}

/* True once the NIC closed fd (end of file within ms). */
static bool closed_by_nic(int fd, int ms)
{
	char buf[128];
	ssize_t n;

	if (wait_in(fd, ms))
		return false;
	n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
	return n == 0 || (n < 0 && errno == ECONNRESET);
}

/* A management session: connected, hello answered OK; the fd or a negative errno. */
static int mgmt_open(const char *path)
{
	int fd = raw_connect(path), st;

	if (fd < 0)
		return fd;
	st = send_hello(fd, NIC_ROLE_MGMT);
	if (!st)
		st = reply_status(fd, WAIT_MS);
	if (st != NIC_STATUS_OK) {
		close(fd);
		return st < 0 ? st : -EPROTO;
	}
	return fd;
}

static int mgmt_send_stats_req(int fd, int flags)
{
	struct nic_mgmt_req q = {.magic = NIC_ABI_MAGIC, .op = NIC_MGMT_STATS};

	return send(fd, &q, sizeof(q), MSG_NOSIGNAL | flags) == (ssize_t)sizeof(q) ? 0 : -errno;
}

/* One stats request answered within ms: 0 or a negative errno. */
static int mgmt_stats(int fd, struct nic_stats *st, int ms)
{
	struct {
		struct nic_mgmt_hdr h;
		struct nic_stats st;
	} m;
	ssize_t n;
	int err = mgmt_send_stats_req(fd, 0);

	if (!err)
		err = wait_in(fd, ms);
	if (err)
		return err;
	n = recv(fd, &m, sizeof(m), MSG_DONTWAIT);
	if (n != (ssize_t)sizeof(m) || m.h.status != NIC_STATUS_OK || m.h.count != 1)
		return -EPROTO;
	*st = m.st;
	return 0;
}

/* The counters of the NIC at path, through a session of their own. */
static int stats_of(const char *path, struct nic_stats *st)
{
	int fd = mgmt_open(path), err;

	if (fd < 0)
		return fd;
	err = mgmt_stats(fd, st, WAIT_MS);
	close(fd);
	return err;
}

/* How many lines of the file at path contain what. */
static unsigned count_lines(const char *path, const char *what)
{
	FILE *f = fopen(path, "re");
	char line[1024];
	unsigned n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, what) != NULL;
	fclose(f);
	return n;
}

/*
 * Become uid NOBODY as far as sockets tell (SO_PEERCRED reports the
 * effective uid) while keeping root's access to the private test directory
 * (the filesystem uid).  In a child process only.
 */
static int become_other_user(void)
{
	if (setresuid((uid_t)-1, NOBODY, (uid_t)-1) < 0)
		return -errno;
	setfsuid(0);
	return setfsuid(0) == 0 ? 0 : -EPERM;
}

/* ---- Peers of another user ----------------------------------------------------------- */

/* In a child: as another user, a host hello and a management hello; exit code: both DENIED. */
static int other_user_hellos(void *arg)
{
	int ok = 0;

	(void)arg;
	if (become_other_user() < 0)
		return 10;
	for (int i = 0; i < 2; i++) {
		int fd = raw_connect(sock), st;

		if (fd < 0)
			return 11;
		/* The NIC answers at accept and may have closed before the
		 * hello goes (EPIPE): the answer is there to read either way. */
		st = send_hello(fd, i ? NIC_ROLE_MGMT : NIC_ROLE_HOST);
		if (!st || st == -EPIPE)
			st = reply_status(fd, WAIT_MS);
		if (st != NIC_STATUS_DENIED) {
			fprintf(stderr, "hello %d of uid %d: status %d, want DENIED (%d)\n", i,
				NOBODY, st, NIC_STATUS_DENIED);
			return 12 + i;
		}
		ok += closed_by_nic(fd, WAIT_MS);
		close(fd);
	}
	return ok == 2 ? 0 : 14;
}

/*
 * In a child, as another user: the tool's management client is told DENIED
 * every time, also when the NIC's answer and close beat its hello (a send
 * that fails with EPIPE).  Exit code 0 when all of them were.
 */
static int other_user_tool_opens(void *arg)
{
	(void)arg;
	if (become_other_user() < 0)
		return 10;
	for (int i = 0; i < 100; i++) {
		struct mgmt_client c;
		int rc = mgmt_client_open(&c, sock, WAIT_MS);

		mgmt_client_close(&c);
		if (rc != nic_status_errno(NIC_STATUS_DENIED) || c.status != NIC_STATUS_DENIED) {
			fprintf(stderr, "open %d as uid %d: %d (%s), status %u; want DENIED\n", i,
				NOBODY, rc, c.what ? c.what : "-", c.status);
			return 11;
		}
	}
	return 0;
}

static void test_nic_refuses_other_user(void)
{
	struct nic_stats before, after;
	pid_t child;

	if (geteuid() != 0) {
		printf("\n    skipped: needs root to act as another user ");
		return;
	}
	NST_REQUIRE_EQ(stats_of(sock, &before), 0);
	child = nst_fork(other_user_hellos, NULL);
	NST_REQUIRE(child > 0);
	NST_EQ(nst_wait(child, WAIT_MS), 0);
	NST_REQUIRE_EQ(stats_of(sock, &after), 0);
	NST_EQ(after.attach_denied - before.attach_denied, 2);
	NST_EQ(after.attach_refused - before.attach_refused, 2);
	NST_EQ(after.contexts, before.contexts);
	NST_TRUE(count_lines(log_path, "runs as uid") >= 2);
}

/* Last of the suite: its hundred refusals use up the NIC's log allowance,
 * which the tests above count lines of. */
static void test_tool_told_denied(void)
{
	pid_t child;

	if (geteuid() != 0) {
		printf("\n    skipped: needs root to act as another user ");
		return;
	}
	child = nst_fork(other_user_tool_opens, NULL);
	NST_REQUIRE(child > 0);
	NST_EQ(nst_wait(child, WAIT_MS * 10), 0);
}

/*
 * In a child: listen as another user on the socket path of a NIC, and tell
 * through arg's pipe how many bytes the connecting host sent before it hung
 * up.  Exit code 0 when that was reported.
 */
struct fake_nic {
	char path[300];
	int ready[2]; /* listening */
	int count[2]; /* bytes received, as a uint32_t */
};

static int fake_nic_main(void *arg)
{
	struct fake_nic *f = arg;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	uint32_t got = 0;
	char buf[256];
	int l, c;

	if (become_other_user() < 0)
		return 20;
	if (strlen(f->path) >= sizeof(sa.sun_path))
		return 25;
	memcpy(sa.sun_path, f->path, strlen(f->path) + 1);
	l = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(l, 4) < 0)
		return 21;
	if (write(f->ready[1], "r", 1) != 1)
		return 22;
	c = accept(l, NULL, NULL);
	if (c < 0)
		return 23;
	/* Read until the host hangs up (it must, at once, having sent nothing). */
	for (;;) {
		ssize_t n;

		if (wait_in(c, WAIT_MS))
			break;
		n = recv(c, buf, sizeof(buf), 0);
		if (n <= 0)
			break;
		got += (uint32_t)n;
	}
	return write(f->count[1], &got, sizeof(got)) == (ssize_t)sizeof(got) ? 0 : 24;
}

static void test_host_refuses_nic_of_other_user(void)
{
	struct fake_nic f;
	struct nic_host *h = NULL;
	uint32_t got = UINT32_MAX;
	pid_t child;
	char c;
	int err;

	if (geteuid() != 0) {
		printf("\n    skipped: needs root to act as another user ");
		return;
	}
	snprintf(f.path, sizeof(f.path), "%s/nic-" ADDR_FAKE ".sock", dir);
	NST_REQUIRE_EQ(pipe2(f.ready, O_CLOEXEC), 0);
	NST_REQUIRE_EQ(pipe2(f.count, O_CLOEXEC), 0);
	child = nst_fork(fake_nic_main, &f);
	NST_REQUIRE(child > 0);
	close(f.ready[1]);
	close(f.count[1]);
	NST_REQUIRE_EQ(wait_in(f.ready[0], WAIT_MS), 0);
	NST_REQUIRE_EQ(read(f.ready[0], &c, 1), 1);
	err = nic_host_attach(f.path, &h);
	NST_EQ(err, -EACCES);
	if (!err)
		nic_host_detach(h);
	NST_REQUIRE_EQ(wait_in(f.count[0], WAIT_MS), 0);
	NST_EQ(read(f.count[0], &got, sizeof(got)), sizeof(got));
	/* Not even the hello went out. */
	NST_EQ(got, 0);
	NST_EQ(nst_wait(child, WAIT_MS), 0);
	close(f.ready[0]);
	close(f.count[0]);
	unlink(f.path);
}

/* ---- Hellos: empty, and never sent ----------------------------------------------------- */

static void test_empty_hello_answered(void)
{
	struct nic_stats before, after;
	int fd;

	NST_REQUIRE_EQ(stats_of(sock, &before), 0);
	fd = raw_connect(sock);
	NST_REQUIRE(fd >= 0);
	NST_REQUIRE_EQ(send(fd, "", 0, MSG_NOSIGNAL), 0);
	NST_EQ(reply_status(fd, WAIT_MS), NIC_STATUS_BAD_HELLO);
	NST_TRUE(closed_by_nic(fd, WAIT_MS));
	close(fd);
	NST_REQUIRE_EQ(stats_of(sock, &after), 0);
	NST_EQ(after.attach_refused - before.attach_refused, 1);
}

static void test_silent_connection_closed(void)
{
	struct nic_stats before, after;
	uint64_t t0;
	double ms;
	int fd;

	NST_REQUIRE_EQ(stats_of(sock, &before), 0);
	t0 = nst_now_ns();
	fd = raw_connect(sock);
	NST_REQUIRE(fd >= 0);
	/* Told why, then closed, after the deadline and not long before it. */
	NST_EQ(reply_status(fd, HELLO_TIMEOUT_MS + WAIT_MS), NIC_STATUS_TIMED_OUT);
	ms = (double)(nst_now_ns() - t0) / 1e6;
	NST_TRUE(closed_by_nic(fd, WAIT_MS));
	close(fd);
	printf("\n    closed after %.0f ms without a hello ", ms);
	NST_TRUE(ms >= HELLO_TIMEOUT_MS - 50);
	NST_REQUIRE_EQ(stats_of(sock, &after), 0);
	NST_EQ(after.hello_timeouts - before.hello_timeouts, 1);
}

/*
 * More connections than NIC_CONN_MAX that have not said hello: the next one
 * waits in the backlog (not refused, not accepted) and is served as soon as
 * one of the others goes.
 */
static void test_burst_waits_for_room(void)
{
	int silent[NIC_CONN_MAX], fd;
	struct nic_stats before, after;

	NST_REQUIRE_EQ(stats_of(sock, &before), 0);
	for (unsigned i = 0; i < NIC_CONN_MAX; i++) {
		silent[i] = raw_connect(sock);
		NST_REQUIRE(silent[i] >= 0);
	}
	fd = raw_connect(sock);
	NST_REQUIRE(fd >= 0);
	NST_REQUIRE_EQ(send_hello(fd, NIC_ROLE_MGMT), 0);
	/* One goes: the waiting one is taken and answered. */
	close(silent[0]);
	NST_EQ(reply_status(fd, WAIT_MS), NIC_STATUS_OK);
	close(fd);
	for (unsigned i = 1; i < NIC_CONN_MAX; i++)
		close(silent[i]);
	NST_REQUIRE_EQ(stats_of(sock, &after), 0);
	NST_EQ(after.accept_refused - before.accept_refused, 0);
}

/* ---- Descriptors ---------------------------------------------------------------------- */

/* The lowest descriptor numbers free in pid, in free[0..n). */
static unsigned free_fds_of(pid_t pid, int *free_fds, unsigned n)
{
	char path[64];
	bool used[1024] = {false};
	unsigned k = 0;
	DIR *d;
	struct dirent *de;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		long fd = strtol(de->d_name, NULL, 10);

		if (de->d_name[0] != '.' && fd >= 0 && fd < 1024)
			used[fd] = true;
	}
	closedir(d);
	for (int fd = 0; fd < 1024 && k < n; fd++)
		if (!used[fd])
			free_fds[k++] = fd;
	return k;
}

#define CONNS 6

static void test_out_of_descriptors_at_accept(void)
{
	struct rlimit was, tight;
	struct nic_stats st;
	int conns[CONNS], held = 0, refused = 0, free_fds[2], keep;
	unsigned lines_before = count_lines(log_path, "refusing new connections");

	/* A session kept open: once it is answered, the NIC has closed what
	 * the tests before left it, and it reads the counters afterwards
	 * without a new descriptor. */
	keep = mgmt_open(sock);
	NST_REQUIRE(keep >= 0);
	NST_REQUIRE_EQ(mgmt_stats(keep, &st, WAIT_MS), 0);
	/* Room for two more descriptors (the limit is on descriptor numbers). */
	NST_REQUIRE_EQ(prlimit(nic, RLIMIT_NOFILE, NULL, &was), 0);
	NST_REQUIRE_EQ(free_fds_of(nic, free_fds, 2), 2);
	tight.rlim_cur = (rlim_t)free_fds[1] + 1;
	tight.rlim_max = was.rlim_max;
	NST_REQUIRE_EQ(prlimit(nic, RLIMIT_NOFILE, &tight, NULL), 0);
	/* Connections that say nothing: those the NIC could take wait for
	 * their hello deadline, the others are refused at once, not left in
	 * the backlog while the NIC spins on accept. */
	for (int i = 0; i < CONNS; i++) {
		conns[i] = raw_connect(sock);
		NST_REQUIRE(conns[i] >= 0);
	}
	for (int i = 0; i < CONNS; i++) {
		int status = reply_status(conns[i], HELLO_TIMEOUT_MS + WAIT_MS);

		if (status == NIC_STATUS_TIMED_OUT)
			held++;
		else if (status == NIC_STATUS_NO_RESOURCES)
			refused++;
		else
			NST_EQ(status, NIC_STATUS_NO_RESOURCES);
		NST_TRUE(closed_by_nic(conns[i], WAIT_MS));
		close(conns[i]);
	}
	printf("\n    %d connections held until their deadline, %d refused at once ", held,
	       refused);
	NST_TRUE(held >= 1 && held <= 3);
	NST_EQ(held + refused, CONNS);
	/* Descriptors again: the episode ends at the next connection. */
	NST_REQUIRE_EQ(prlimit(nic, RLIMIT_NOFILE, &was, NULL), 0);
	NST_REQUIRE_EQ(stats_of(sock, &st), 0);
	NST_REQUIRE_EQ(mgmt_stats(keep, &st, WAIT_MS), 0);
	close(keep);
	NST_TRUE(st.accept_refused >= 2);
	/* One line for the episode, however many connections it refused. */
	NST_EQ(count_lines(log_path, "refusing new connections") - lines_before, 1);
	NST_TRUE(count_lines(log_path, "accepting connections again") >= 1);
}

/* A NIC just started: it listens (its pid file names it and its socket
 * exists), or it is gone. */
struct listen_wait {
	char pid_file[400];
	const char *sock_path;
	pid_t pid;
	bool listens;
};

static bool listens_or_gone(void *arg)
{
	struct listen_wait *w = arg;

	w->listens = nst_read_pid_file(w->pid_file) == w->pid && access(w->sock_path, F_OK) == 0;
	return w->listens || !nst_pid_alive(w->pid);
}

/* Start nicsimd in d at addr with a hard descriptor limit of nofile; the pid. */
static pid_t start_nic_nofile(const char *d, const char *addr, rlim_t nofile, const char *sock_path,
			      const char *log_file)
{
	const char *argv[] = {nst_bin("nicsimd"), "--dir", d, "--addr", addr, NULL};
	struct listen_wait w;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		struct rlimit rl = {.rlim_cur = nofile, .rlim_max = nofile};
		int fd = open(log_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			_exit(126);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	if (pid < 0)
		return -errno;
	/* Ready once it listens: its pid file comes after the socket. */
	snprintf(w.pid_file, sizeof(w.pid_file), "%s/nic-%s.pid", d, addr);
	w.sock_path = sock_path;
	w.pid = pid;
	(void)nst_wait_until(listens_or_gone, &w, WAIT_MS, 5);
	if (w.listens)
		return pid;
	nst_stop(pid, WAIT_MS);
	return -ETIMEDOUT;
}

/*
 * A NIC whose hard descriptor limit is limit: it must say at start how many
 * contexts fit, take exactly that many and refuse the next one.
 */
static void test_contexts_fit_the_descriptor_limit(void)
{
	struct rlimit low;
	char dir2[300], sock2[340], log2[340], line[1024];
	struct nic_host **hosts;
	unsigned fit = 0;
	pid_t nic2;
	FILE *f;
	int err;

	snprintf(dir2, sizeof(dir2), "%s/limited", dir);
	NST_REQUIRE_EQ(mkdir(dir2, 0700), 0);
	snprintf(sock2, sizeof(sock2), "%s/nic-" ADDR_LIMITED ".sock", dir2);
	snprintf(log2, sizeof(log2), "%s/nic-" ADDR_LIMITED ".log", dir2);
	/* A quarter of the common limit of 1024, soft and hard (the same
	 * sum, for a quarter of the contexts and their memory). */
	NST_REQUIRE_EQ(getrlimit(RLIMIT_NOFILE, &low), 0);
	low.rlim_cur = low.rlim_max = low.rlim_max < 256 ? low.rlim_max : 256;
	nic2 = start_nic_nofile(dir2, ADDR_LIMITED, low.rlim_max, sock2, log2);
	NST_REQUIRE(nic2 > 0);

	f = fopen(log2, "re");
	NST_REQUIRE(f != NULL);
	while (fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, "up to ");

		if (p && strstr(p, "host contexts"))
			fit = (unsigned)strtoul(p + 6, NULL, 10);
	}
	fclose(f);
	printf("\n    descriptor limit %llu: %u contexts ", (unsigned long long)low.rlim_max, fit);
	NST_TRUE(fit > 0 && fit < low.rlim_max / NIC_CTX_FDS);
	hosts = calloc(fit + 1, sizeof(*hosts));
	NST_REQUIRE(hosts != NULL);
	for (unsigned i = 0; i < fit; i++) {
		err = nic_host_attach(sock2, &hosts[i]);
		if (err) {
			NST_EQ(err, 0);
			printf("attach %u of %u failed ", i + 1, fit);
			break;
		}
	}
	/* One more is refused with a status, not by running out. */
	NST_EQ(nic_host_attach(sock2, &hosts[fit]), nic_status_errno(NIC_STATUS_NO_RESOURCES));
	NST_EQ(count_lines(log2, "Too many open files"), 0);
	for (unsigned i = 0; i <= fit; i++)
		nic_host_detach(hosts[i]);
	free(hosts);
	NST_TRUE(nst_stop_clean(nic2, WAIT_MS));
}

/* ---- Management that never reads -------------------------------------------------------- */

#define FLOODERS 4

static void test_unread_management_does_not_block(void)
{
	int flood[FLOODERS], probe, dropped = 0;
	struct nic_stats before, st;
	struct nic_host *h;
	struct nic_cmd cmd = {.opcode = NIC_CMD_NOP};
	struct nic_cpl cpl;
	uint64_t t0 = nst_now_ns(), worst = 0;
	unsigned probes = 0;

	NST_REQUIRE_EQ(stats_of(sock, &before), 0);
	probe = mgmt_open(sock);
	NST_REQUIRE(probe >= 0);
	NST_REQUIRE_EQ(nic_host_attach(sock, &h), 0);
	for (int i = 0; i < FLOODERS; i++) {
		flood[i] = mgmt_open(sock);
		NST_REQUIRE(flood[i] >= 0);
	}
	/* Requests as fast as the NIC takes them, replies never read; after
	 * each round the other client and the host must be served at once. */
	while (dropped < FLOODERS && nst_now_ns() - t0 < 20ull * WAIT_MS * 1000000u) {
		uint64_t t;

		for (int i = 0; i < FLOODERS; i++) {
			for (int k = 0; flood[i] >= 0 && k < 64; k++) {
				int err = mgmt_send_stats_req(flood[i], MSG_DONTWAIT);

				if (err == -EAGAIN)
					break;
				if (err) {
					close(flood[i]);
					flood[i] = -1;
					dropped++;
				}
			}
		}
		t = nst_now_ns();
		NST_REQUIRE_EQ(mgmt_stats(probe, &st, 2 * WAIT_MS), 0);
		NST_REQUIRE_EQ(nic_host_cmd(h, &cmd, &cpl, 2 * WAIT_MS), 0);
		t = nst_now_ns() - t;
		worst = t > worst ? t : worst;
		probes++;
		/* A flooder the NIC dropped: its socket reports the hang-up. */
		for (int i = 0; i < FLOODERS; i++) {
			struct pollfd p = {.fd = flood[i], .events = POLLOUT};

			if (flood[i] >= 0 && poll(&p, 1, 0) == 1 &&
			    (p.revents & (POLLHUP | POLLERR))) {
				close(flood[i]);
				flood[i] = -1;
				dropped++;
			}
		}
	}
	printf("\n    %d flooders dropped; %u probes, slowest %.1f ms ", dropped, probes,
	       (double)worst / 1e6);
	NST_EQ(dropped, FLOODERS);
	/* A NIC that waits for a reader holds its loop for 2 s per flooder,
	 * and a probe waits for several of them; a loop that never waits
	 * answers in milliseconds, with room here for a loaded machine. */
	NST_TRUE(worst < 3000000000ull);
	NST_REQUIRE_EQ(mgmt_stats(probe, &st, WAIT_MS), 0);
	NST_EQ(st.mgmt_dropped - before.mgmt_dropped, FLOODERS);
	for (int i = 0; i < FLOODERS; i++)
		if (flood[i] >= 0)
			close(flood[i]);
	close(probe);
	nic_host_detach(h);
}

/* ---- Places that hellos wait in -------------------------------------------------------- */

/*
 * Management sessions that stay open and say nothing must not take the
 * places of connections waiting for their hello: with NIC_CONN_MAX of them
 * open, one more management client and a host are still answered at once,
 * and the NIC keeps at most NIC_MGMT_MAX sessions, closing the quietest.
 */
static void test_idle_management_leaves_room(void)
{
	enum { N = NIC_CONN_MAX + 1 };
	int fds[N], closed = 0;
	struct nic_stats before, st;
	struct nic_host *h = NULL;
	uint64_t t0;
	double ms;

	NST_REQUIRE_EQ(stats_of(sock, &before), 0);
	for (int i = 0; i < N; i++)
		fds[i] = -1;
	t0 = nst_now_ns();
	for (int i = 0; i < N; i++) {
		fds[i] = mgmt_open(sock);
		if (fds[i] < 0) {
			printf("\n    management session %d of %d: %s ", i + 1, N,
			       strerror(-fds[i]));
			break;
		}
	}
	ms = (double)(nst_now_ns() - t0) / 1e6;
	printf("\n    %d management sessions opened in %.0f ms ", N, ms);
	NST_TRUE(fds[N - 1] >= 0);
	/* A host is served too. */
	NST_EQ(nic_host_attach(sock, &h), 0);
	if (h)
		nic_host_detach(h);
	/* The NIC closed the oldest, quiet ones: only NIC_MGMT_MAX remain.  It
	 * closed them before it answered the last hello, so only the first
	 * wait may take long. */
	for (int i = 0; i < N - (int)NIC_MGMT_MAX; i++)
		closed += fds[i] >= 0 && closed_by_nic(fds[i], i ? 100 : WAIT_MS);
	NST_EQ(closed, N - (int)NIC_MGMT_MAX);
	if (fds[N - 1] >= 0) {
		NST_EQ(mgmt_stats(fds[N - 1], &st, WAIT_MS), 0);
		NST_EQ(st.mgmt_evicted - before.mgmt_evicted, N - NIC_MGMT_MAX);
		NST_EQ(st.accept_refused - before.accept_refused, 0);
	}
	for (int i = 0; i < N; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/*
 * In a child, as another user: connections that never say hello, each
 * refused (DENIED) at once rather than held until the hello deadline.
 * Exit code 0 when all were.
 */
#define FOREIGN_CONNS (NIC_CONN_MAX + 16)
static int other_user_silent(void *arg)
{
	uint64_t t0 = nst_now_ns();
	double ms;

	(void)arg;
	if (become_other_user() < 0)
		return 10;
	for (int i = 0; i < (int)FOREIGN_CONNS; i++) {
		int fd = raw_connect(sock), st;

		if (fd < 0)
			return 11;
		st = reply_status(fd, WAIT_MS);
		if (st != NIC_STATUS_DENIED) {
			fprintf(stderr,
				"silent connection %d of uid %d: status %d, want DENIED (%d)\n", i,
				NOBODY, st, NIC_STATUS_DENIED);
			return 12;
		}
		if (!closed_by_nic(fd, WAIT_MS))
			return 13;
		close(fd);
	}
	ms = (double)(nst_now_ns() - t0) / 1e6;
	printf("\n    %d connections of uid %d refused in %.0f ms ", FOREIGN_CONNS, NOBODY, ms);
	/* Each waited for the hello deadline would be 3 s at least. */
	return ms < HELLO_TIMEOUT_MS ? 0 : 14;
}

static void test_other_user_refused_at_accept(void)
{
	struct nic_stats before, after;
	unsigned lines;
	pid_t child;

	if (geteuid() != 0) {
		printf("\n    skipped: needs root to act as another user ");
		return;
	}
	lines = count_lines(log_path, "runs as uid");
	NST_REQUIRE_EQ(stats_of(sock, &before), 0);
	child = nst_fork(other_user_silent, NULL);
	NST_REQUIRE(child > 0);
	NST_EQ(nst_wait(child, 2 * WAIT_MS), 0);
	NST_REQUIRE_EQ(stats_of(sock, &after), 0);
	NST_EQ(after.attach_denied - before.attach_denied, FOREIGN_CONNS);
	NST_EQ(after.hello_timeouts - before.hello_timeouts, 0);
	/* Logged at a bounded rate, not once per connection. */
	lines = count_lines(log_path, "runs as uid") - lines;
	printf("\n    %u lines of log for them ", lines);
	NST_TRUE(lines >= 1 && lines <= 8);
}

/* Many connections that never say hello: each counted, a handful logged. */
static void test_silent_connections_log_bounded(void)
{
	enum { N = 24 };
	int fds[N];
	struct nic_stats before, after;
	unsigned lines = count_lines(log_path, "no hello within");

	NST_REQUIRE_EQ(stats_of(sock, &before), 0);
	for (int i = 0; i < N; i++) {
		fds[i] = raw_connect(sock);
		NST_REQUIRE(fds[i] >= 0);
	}
	for (int i = 0; i < N; i++) {
		NST_EQ(reply_status(fds[i], HELLO_TIMEOUT_MS + WAIT_MS), NIC_STATUS_TIMED_OUT);
		close(fds[i]);
	}
	NST_REQUIRE_EQ(stats_of(sock, &after), 0);
	NST_EQ(after.hello_timeouts - before.hello_timeouts, N);
	lines = count_lines(log_path, "no hello within") - lines;
	printf("\n    %d silent connections, %u lines of log ", N, lines);
	NST_TRUE(lines <= 8);
}

/* A host named to write escape sequences to a terminal: attaches, exits. */
static int named_host_main(void *arg)
{
	struct nic_host *h;

	(void)arg;
	if (prctl(PR_SET_NAME,
		  "\x1b]0;pwn\x07\xc2\x9b"
		  "2J",
		  0, 0, 0) < 0)
		return 1;
	if (nic_host_attach(sock, &h))
		return 2;
	nic_host_detach(h);
	return 0;
}

static bool detached_logged(void *arg)
{
	return count_lines(log_path, "?]0;pwn???2J") >= *(unsigned *)arg;
}

/* The NIC's log never carries a control character someone else chose. */
static void test_program_name_logged_plainly(void)
{
	unsigned want = count_lines(log_path, "?]0;pwn???2J") + 2;
	char buf[65536];
	ssize_t n;
	int fd;

	NST_REQUIRE_EQ(nst_wait(nst_fork(named_host_main, NULL), WAIT_MS), 0);
	/* "attached: pid P (name)" and "detached: pid P (name)". */
	NST_TRUE(nst_wait_until(detached_logged, &want, WAIT_MS, 5));
	fd = open(log_path, O_RDONLY | O_CLOEXEC);
	NST_REQUIRE(fd >= 0);
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		NST_TRUE(memchr(buf, 0x1b, (size_t)n) == NULL);
		NST_TRUE(memchr(buf, 0x07, (size_t)n) == NULL);
	}
	close(fd);
}

/* ---- A damaged fabric ------------------------------------------------------------------ */

struct damaged_wait {
	const char *path;
	uint64_t want, got;
};

static bool damaged_reached(void *arg)
{
	struct damaged_wait *w = arg;
	struct nic_stats st;

	if (stats_of(w->path, &st) == 0)
		w->got = st.fabric_damaged;
	return w->got != UINT64_MAX && w->got >= w->want;
}

/*
 * Ask the NIC at path for its counters (each request wakes it, so it runs
 * its checks) until fabric_damaged reaches want or ms pass; the last value.
 */
static uint64_t wait_fabric_damaged(const char *path, uint64_t want, int ms)
{
	struct damaged_wait w = {.path = path, .want = want, .got = UINT64_MAX};

	nst_wait_until(damaged_reached, &w, ms, 50);
	return w.got;
}

/*
 * The fabric's header written over while the NIC runs: the NIC says so in
 * its log once (not at every look) and counts it, and says when the header
 * is sound again.
 */
static void test_damaged_fabric_reported(void)
{
	char dir3[300], sock3[340], log3[340], seg[340];
	uint32_t addr;
	struct fab_config cfg = {.addrs = &addr, .naddrs = 1};
	uint64_t good, bad = 0x5a5a5a5a5a5a5a5aull;
	pid_t nic3;
	int fd;

	snprintf(dir3, sizeof(dir3), "%s/fabric", dir);
	NST_REQUIRE_EQ(mkdir(dir3, 0700), 0);
	snprintf(sock3, sizeof(sock3), "%s/nic-" ADDR_FABRIC ".sock", dir3);
	snprintf(log3, sizeof(log3), "%s/nic-" ADDR_FABRIC ".log", dir3);
	snprintf(seg, sizeof(seg), "%s/" FAB_SEG_FILE, dir3);
	NST_REQUIRE_EQ(fab_addr_parse(ADDR_FABRIC, &addr), 0);
	NST_REQUIRE_EQ(fab_create(dir3, &cfg), 0);
	nic3 = nst_start_nic(dir3, ADDR_FABRIC, NULL, WAIT_MS);
	NST_REQUIRE(nic3 > 0);
	NST_EQ(wait_fabric_damaged(sock3, 0, WAIT_MS), 0);

	fd = open(seg, O_RDWR | O_CLOEXEC);
	NST_REQUIRE(fd >= 0);
	NST_REQUIRE_EQ(pread(fd, &good, sizeof(good), 0), sizeof(good));
	NST_REQUIRE_EQ(pwrite(fd, &bad, sizeof(bad), 0), sizeof(bad));
	NST_EQ(wait_fabric_damaged(sock3, 1, WAIT_MS), 1);
	/* Looked at again and again (once a second), said once. */
	NST_EQ(wait_fabric_damaged(sock3, 2, 2500), 1);
	NST_EQ(count_lines(log3, "is damaged"), 1);
	NST_EQ(pwrite(fd, &good, sizeof(good), 0), sizeof(good));
	close(fd);
	for (uint64_t t = nst_now_ns();
	     !count_lines(log3, "sound again") && nst_now_ns() - t < WAIT_MS * 1000000ull;)
		wait_fabric_damaged(sock3, 2, 100);
	NST_EQ(count_lines(log3, "sound again"), 1);
	NST_TRUE(nst_stop_clean(nic3, WAIT_MS));
}

/* ---- nicsimd's own words ------------------------------------------------------------- */

/*
 * The network and broadcast addresses of 198.18.0.0/15 are inside it: the
 * refusal says why they are no NIC's, not that they are outside.  And the
 * help gives the CM budget as the documents do (3.15 s).
 */
static void test_nicsimd_addr_and_help_words(void)
{
	static const char *const bad[] = {"198.18.0.0", "198.19.255.255"};
	char out[8192];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *argv[] = {nst_bin("nicsimd"), "--dir", dir, "--addr", bad[i], NULL};

		NST_EQ(nst_run(argv, out, sizeof(out), WAIT_MS), 2);
		NST_TRUE(strstr(out, "not a NIC address") != NULL);
		NST_TRUE(strstr(out, "network and broadcast") != NULL);
		if (!strstr(out, "network and broadcast"))
			printf("\n    said: %s ", out);
	}
	{
		const char *argv[] = {nst_bin("nicsimd"), "--help", NULL};

		NST_EQ(nst_run(argv, out, sizeof(out), WAIT_MS), 0);
		NST_TRUE(strstr(out, "fails after 3.15 s") != NULL);
	}
	/* One process serves up to 16 NICs, each address once. */
	{
		const char *argv[] = {nst_bin("nicsimd"), "--dir",  dir,          "--addr",
				      "198.18.0.9",       "--addr", "198.18.0.9", NULL};

		NST_EQ(nst_run(argv, out, sizeof(out), WAIT_MS), 2);
		NST_TRUE(strstr(out, "--addr 198.18.0.9 given twice") != NULL);
	}
	{
		const char *argv[40] = {nst_bin("nicsimd"), "--dir", dir};
		char addrs[17][16];
		size_t n = 3;

		for (int i = 0; i < 17; i++) {
			snprintf(addrs[i], sizeof(addrs[i]), "198.18.1.%d", i + 1);
			argv[n++] = "--addr";
			argv[n++] = addrs[i];
		}
		NST_EQ(nst_run(argv, out, sizeof(out), WAIT_MS), 2);
		NST_TRUE(strstr(out, "at most 16 NICs in one process") != NULL);
	}
}

/* ---- Suite ---------------------------------------------------------------------------- */

static int init(void)
{
	if (nst_tmpdir(dir, sizeof(dir), "attach") < 0)
		return -1;
	snprintf(sock, sizeof(sock), "%s/nic-" ADDR ".sock", dir);
	snprintf(log_path, sizeof(log_path), "%s/nic-" ADDR ".log", dir);
	nic = nst_start_nic(dir, ADDR, NULL, WAIT_MS);
	return nic > 0 ? 0 : -1;
}

static int clean(void)
{
	return nst_stop_nics_clean(dir, &nic, 1, WAIT_MS);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"nic_refuses_other_user", test_nic_refuses_other_user},
	    {"host_refuses_nic_of_other_user", test_host_refuses_nic_of_other_user},
	    {"empty_hello_answered", test_empty_hello_answered},
	    {"silent_connection_closed", test_silent_connection_closed},
	    {"burst_waits_for_room", test_burst_waits_for_room},
	    {"out_of_descriptors_at_accept", test_out_of_descriptors_at_accept},
	    {"contexts_fit_the_descriptor_limit", test_contexts_fit_the_descriptor_limit},
	    {"unread_management_does_not_block", test_unread_management_does_not_block},
	    {"idle_management_leaves_room", test_idle_management_leaves_room},
	    {"other_user_refused_at_accept", test_other_user_refused_at_accept},
	    {"program_name_logged_plainly", test_program_name_logged_plainly},
	    {"silent_connections_log_bounded", test_silent_connections_log_bounded},
	    {"damaged_fabric_reported", test_damaged_fabric_reported},
	    {"nicsimd_addr_and_help_words", test_nicsimd_addr_and_help_words},
	    {"tool_told_denied", test_tool_told_denied},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "attach", tests, init, clean);
}

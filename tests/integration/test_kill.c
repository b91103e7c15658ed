/*
 * Processes killed outright (SIGKILL) in the middle of a transfer: a host
 * program, a NIC, a capture and the scenario runner, each at 20 points of
 * a transfer drawn from a seed (printed; NICSIM_KILL_SEED=N replays it).
 *
 * The transfer: a host process forked on NIC B (or K) sends 4 MiB in
 * 64 KiB messages through the SPI to this program on NIC A, which keeps
 * four receives posted and checks every message; the victim dies once this
 * program has received the point's byte count.  For each kill the test
 * measures, from the SIGKILL, how long the surviving side takes to see it
 * (its pending receive completing with an error; for a capture, the next
 * message arriving: the NICs must not stall) and requires under 1 s, every
 * wait bounded by a generous deadline.  Then it requires, each waited for
 * with a deadline: the surviving NICs' TPT occupancy, descriptors and
 * shared-memory references as before the round, the fabric's free frames as
 * before, no new file in the run directory nor a nicsim one in /dev/shm, and
 * no process of the round left.
 *
 * NICs A and B (198.18.0.1, .2) live through the whole suite; K (.3) is the
 * NIC that is killed, started again for every round (its port reopened is
 * what frees the frames it held: docs/fabric.md, "Processes that die").
 * The scenario runner runs a scenario of its own (two NICs, two agents and
 * an 8 MiB RDMA write) and dies once its receiving NIC has taken the point's
 * frame count; everything it started must then go, and its run directory.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fab.h"
#include "nicsim_mgmt.h"
#include "nstcapture.h"
#include "nstest.h"
#include "nstnic.h"
#include "nstspi.h"
#include "ws2san.h"

#define ADDR_A "198.18.0.1"
#define ADDR_B "198.18.0.2"
#define ADDR_K "198.18.0.3" /* the NIC that is killed */
#define WAIT_MS 10000
#define NPOINTS 20
#define MSG (64u << 10)
#define TOTAL (4u << 20)
#define NMSG (TOTAL / MSG)
#define NREC 4
#define LIMIT_NS 1000000000ull /* the surviving side knows within 1 s */
#define SCN_FRAMES 2000u       /* the runner dies before its NIC a took this many */

static char dir[256], tmp[256], sock_a[300], sock_b[300], sock_k[300];
static pid_t nic_a = -1, nic_b = -1, nic_k = -1;
static struct fab *fab;
static uint16_t next_port = 5000;
static uint64_t seed;

/* ---- What a round must leave as it found ------------------------------------ */

/* Entries of directory path whose name starts with prefix (NULL: all). */
static int count_entries(const char *path, const char *prefix)
{
	struct dirent *e;
	DIR *d = opendir(path);
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && (!prefix || !strncmp(e->d_name, prefix, strlen(prefix))))
			n++;
	closedir(d);
	return n;
}

/* What each descriptor of pid is, on stderr: what a NIC kept is then named. */
static void list_fds(const char *who, pid_t pid)
{
	char path[64], link[340], target[512];
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	while (d && (e = readdir(d))) {
		ssize_t n;

		if (e->d_name[0] == '.')
			continue;
		snprintf(link, sizeof(link), "%s/%s", path, e->d_name);
		n = readlink(link, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = 0;
		fprintf(stderr, "  %s fd %s: %s\n", who, e->d_name, target);
	}
	if (d)
		closedir(d);
}

/*
 * Descriptors pid holds other than the bells of its fabric (-1 if it
 * cannot be read), and the bells in *bells.  A NIC opens a peer's bell the
 * first time it has to wake that peer and keeps it: whether it has had to
 * by a given moment depends on whether the peer was asleep then, so bells
 * are bounded by the ports there are, not compared with a count taken
 * before.
 */
static int nic_fds(pid_t pid, int *bells)
{
	char path[64], link[340], target[512];
	struct dirent *e;
	DIR *d;
	int n = 0;

	*bells = 0;
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		ssize_t len;

		if (e->d_name[0] == '.')
			continue;
		snprintf(link, sizeof(link), "%s/%s", path, e->d_name);
		len = readlink(link, target, sizeof(target) - 1);
		target[len > 0 ? len : 0] = 0;
		if (len > 5 && !strcmp(target + len - 5, ".bell"))
			++*bells;
		else
			n++;
	}
	closedir(d);
	return n;
}

/* Shared-memory references a NIC holds: descriptors and mappings of memfds. */
static int shm_refs(pid_t pid)
{
	static const char *const names[] = {"nicsim-ctx", "nicsim-shm", "nicsim-buffer"};
	int sum = 0;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		int fds = 0, maps = 0;

		if (nst_memfd_refs(pid, names[i], &fds, &maps))
			return -1;
		sum += fds + maps;
	}
	return sum;
}

struct state {
	int tpt_a, tpt_b, fds_a, fds_b, shm_a, shm_b, files, devshm;
	uint32_t frames;
};

static void state_now(struct state *s)
{
	struct fab_info info;
	int bells;

	s->fds_a = nic_fds(nic_a, &bells);
	s->fds_b = nic_fds(nic_b, &bells);
	s->shm_a = shm_refs(nic_a);
	s->shm_b = shm_refs(nic_b);
	s->files = count_entries(dir, NULL);
	s->devshm = count_entries("/dev/shm", "nicsim");
	s->frames = fab_info(fab, &info) ? UINT32_MAX : info.frames_free;
}

static struct state base;
static bool base_taken;

static bool state_is_base(void *arg)
{
	struct state *s = arg;

	state_now(s);
	s->tpt_a = base.tpt_a;
	s->tpt_b = base.tpt_b;
	return !memcmp(s, &base, sizeof(base));
}

/* Two readings in a row alike: into base. */
static bool state_is_stable(void *arg)
{
	struct state now;

	(void)arg;
	state_now(&now);
	now.tpt_a = base.tpt_a;
	now.tpt_b = base.tpt_b;
	if (!memcmp(&now, &base, sizeof(base)))
		return true;
	base = now;
	return false;
}

/* Wait until everything is back to base, then assert each figure. */
static void check_base(const char *what, int round)
{
	struct state s;
	int bells;

	/* The TPT first: asking opens a management session, which the NIC
	 * closes in its own time; the wait below sees it closed. */
	s.tpt_a = nst_wait_tpt_in_use(sock_a, base.tpt_a, WAIT_MS);
	s.tpt_b = nst_wait_tpt_in_use(sock_b, base.tpt_b, WAIT_MS);
	NST_EQ(s.tpt_a, base.tpt_a);
	NST_EQ(s.tpt_b, base.tpt_b);
	if (!nst_wait_until(state_is_base, &s, WAIT_MS, 5))
		fprintf(
		    stderr,
		    "%s round %d: not back: tpt %d/%d %d/%d fds %d/%d %d/%d shm %d/%d %d/%d files "
		    "%d/%d devshm %d/%d frames %u/%u\n",
		    what, round, s.tpt_a, base.tpt_a, s.tpt_b, base.tpt_b, s.fds_a, base.fds_a,
		    s.fds_b, base.fds_b, s.shm_a, base.shm_a, s.shm_b, base.shm_b, s.files,
		    base.files, s.devshm, base.devshm, s.frames, base.frames);
	if (s.fds_a != base.fds_a)
		list_fds("NIC A", nic_a);
	if (s.fds_b != base.fds_b)
		list_fds("NIC B", nic_b);
	if (s.frames != base.frames) {
		struct fab_port_info *l = NULL;
		size_t np = 0;

		if (fab_port_list(fab, &l, &np) == 0)
			for (size_t k = 0; k < np; k++)
				fprintf(stderr, "  port slot %u: %u frames held\n", l[k].slot,
					l[k].frames_held);
		free(l);
	}
	NST_EQ(s.fds_a, base.fds_a);
	NST_EQ(s.fds_b, base.fds_b);
	/* A bell at most for each port of the fabric (A, B and K): none kept
	 * for each round's dead or new K. */
	NST_TRUE(nic_fds(nic_a, &bells) >= 0 && bells <= 3);
	NST_TRUE(nic_fds(nic_b, &bells) >= 0 && bells <= 3);
	NST_EQ(s.shm_a, base.shm_a);
	NST_EQ(s.shm_b, base.shm_b);
	NST_EQ(s.files, base.files);
	NST_EQ(s.devshm, base.devshm);
	NST_EQ(s.frames, base.frames);
}

/* ---- The sending host (a child process) ------------------------------------- */

struct sender {
	const char *addr; /* its NIC */
	uint16_t port;
	uint32_t seed;
};

static SOCKET sock_on(const char *addr, uint16_t port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	int err = 0;
	SOCKET s = WSPSocket(AF_INET, SOCK_STREAM, IPPROTO_TCP, NULL, 0, 0, &err);

	inet_pton(AF_INET, addr, &sa.sin_addr);
	if (s != INVALID_SOCKET && WSPBind(s, (struct sockaddr *)&sa, sizeof(sa), &err)) {
		WSPCloseSocket(s, &err);
		s = INVALID_SOCKET;
	}
	return s;
}

/*
 * Listen, accept one connection, send NMSG messages (message i filled from
 * seed + i), then wait in a receive until the connection or the NIC ends.
 * Exits 0 when the peer closed, 3 when its NIC went (WSAENETDOWN), else
 * a code saying which step failed (10 to 15).
 */
static int sender_main(void *arg, int ready)
{
	const struct sender *a = arg;
	WSPDATA data;
	WSPPROC_TABLE table;
	SOCKET l, s;
	uint8_t *m;
	WSABUF b;
	DWORD n, flags = 0;
	int err = 0;

	if (WSPStartupEx(MAKEWORD(2, 2), &data, NULL, NULL, &table))
		return 10;
	l = sock_on(a->addr, a->port);
	if (l == INVALID_SOCKET || WSPListen(l, 1, &err))
		return 11;
	if (write(ready, "r", 1) != 1)
		return 12;
	s = WSPAccept(l, NULL, NULL, NULL, 0, &err);

	if (s == INVALID_SOCKET)
		return err == WSAENETDOWN ? 3 : 13;
	m = nst_spi_registered(s, MSG);
	if (!m)
		return 14;
	b = (WSABUF){.len = MSG, .buf = (char *)m};
	for (uint32_t i = 0; i < NMSG; i++) {
		nst_fill(m, MSG, a->seed + i);
		if (WSPSend(s, &b, 1, &n, 0, NULL, NULL, NULL, &err))
			return err == WSAENETDOWN ? 3 : 15;
	}
	if (WSPRecv(s, &b, 1, &n, &flags, NULL, NULL, NULL, &err) == 0)
		return 0; /* the peer closed: 0 bytes */
	/* The peer's close ends it as reset, aborted or flushed. */
	return err == WSAENETDOWN ? 3 : 0;
}

/* ---- The receiving side (this process) -------------------------------------- */

struct recv_side {
	SOCKET s;
	uint8_t *buf;
	WSAOVERLAPPED ov[NREC];
	uint32_t next;   /* message expected in ov[next % NREC] */
	uint64_t bytes;  /* received and checked */
	uint32_t bad;    /* messages whose contents were wrong */
	uint8_t *expect; /* scratch for the expected contents */
	uint32_t seed;
	int ev; /* eventfd every receive signals */
};

static int post_one(struct recv_side *r, uint32_t i)
{
	WSABUF b = {.len = MSG, .buf = (char *)r->buf + (size_t)(i % NREC) * MSG};
	WSAOVERLAPPED *ov = &r->ov[i % NREC];
	DWORD n = 0, flags = 0;
	int err = 0;

	memset(ov, 0, sizeof(*ov));
	ov->hEvent = r->ev;
	if (WSPRecv(r->s, &b, 1, &n, &flags, ov, NULL, NULL, &err) == 0)
		return 0;
	return err == WSA_IO_PENDING ? 0 : err;
}

/*
 * Take the next receive's completion within ms: 0 (a message, checked, and
 * its receive posted again while messages remain), its WSA error, or
 * WSAETIMEDOUT.
 */
static int take_one(struct recv_side *r, int ms)
{
	WSAOVERLAPPED *ov = &r->ov[r->next % NREC];
	uint8_t *got = r->buf + (size_t)(r->next % NREC) * MSG;

	uint64_t deadline = nst_now_ns() + (uint64_t)ms * 1000000u;
	DWORD n = 0, flags = 0;
	int err;

	/* The provider completes it in a call of ours, or its own thread when
	 * the connection ends: ask it, and sleep on the event in between. */
	while (!WSPGetOverlappedResult(r->s, ov, &n, FALSE, &flags, &err)) {
		uint64_t v;

		if (err != WSA_IO_INCOMPLETE)
			return err;
		if (nst_now_ns() >= deadline)
			return WSAETIMEDOUT;
		if (poll(&(struct pollfd){.fd = r->ev, .events = POLLIN}, 1, 1) == 1 &&
		    read(r->ev, &v, sizeof(v)) < 0)
			return WSAEINVAL;
	}
	nst_fill(r->expect, MSG, r->seed + r->next);
	if (n != MSG || memcmp(got, r->expect, MSG))
		r->bad++;
	r->bytes += n;
	/* Always NREC posted, past the last message too: a receive is pending
	 * whenever the connection ends. */
	if ((err = post_one(r, r->next + NREC)))
		return err;
	r->next++;
	return 0;
}

/* Connect from NIC A to a new sender on addr; the sender's pid, or < 0. */
static pid_t open_transfer(const char *addr, struct recv_side *r, uint32_t seed32)
{
	static struct sender a;
	struct sockaddr_in to = {.sin_family = AF_INET};
	pid_t pid;
	int err = 0;

	a = (struct sender){.addr = addr, .port = next_port++, .seed = seed32};
	memset(r, 0, sizeof(*r));
	r->seed = seed32;
	r->s = INVALID_SOCKET;
	r->ev = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->ev < 0)
		return -errno;
	pid = nst_fork_ready(sender_main, &a, WAIT_MS);
	if (pid <= 0)
		return pid;
	to.sin_port = htons(a.port);
	inet_pton(AF_INET, addr, &to.sin_addr);
	r->s = sock_on(ADDR_A, 0);
	if (r->s == INVALID_SOCKET ||
	    WSPConnect(r->s, (struct sockaddr *)&to, sizeof(to), NULL, NULL, NULL, NULL, &err)) {
		fprintf(stderr, "connect to the sender: %s\n", nicsim_wsa_name(err));
		return -ECONNREFUSED;
	}
	r->buf = nst_spi_registered(r->s, (size_t)NREC * MSG);
	r->expect = malloc(MSG);
	if (!r->buf || !r->expect)
		return -ENOMEM;
	for (uint32_t i = 0; i < NREC; i++)
		if (post_one(r, i))
			return -EIO;
	return pid;
}

static void close_transfer(struct recv_side *r)
{
	int err = 0;

	if (r->s != INVALID_SOCKET)
		NST_EQ(WSPCloseSocket(r->s, &err), 0); /* completes what is pending first */
	if (r->buf)
		munmap(r->buf, (size_t)NREC * MSG);
	free(r->expect);
	if (r->ev >= 0)
		close(r->ev);
	r->ev = -1;
	r->s = INVALID_SOCKET;
	r->buf = r->expect = NULL;
}

/* ---- Points, figures ----------------------------------------------------------- */

static uint64_t points[NPOINTS];

/* The kind's 20 points in [0, range), from the seed and the kind. */
static void draw_points(unsigned kind, uint64_t range)
{
	uint64_t st = seed ^ (0x9e3779b97f4a7c15ull * (kind + 1));

	for (int i = 0; i < NPOINTS; i++)
		points[i] = nst_splitmix64(&st) % range;
}

static void figures(const char *kind, double *ms, int n)
{
	double max = 0;

	for (int i = 0; i < n; i++)
		max = ms[i] > max ? ms[i] : max;
	printf("\n    %s: %d kills, from SIGKILL to the other side knowing: median %.2f ms, max "
	       "%.2f ms (seed %llu) ",
	       kind, n, n ? nst_median(ms, (size_t)n) : 0, max, (unsigned long long)seed);
}

/* Receive until the point is reached; false if the transfer failed first. */
static bool reach(struct recv_side *r, uint64_t point)
{
	while (r->bytes < point) {
		int err = take_one(r, WAIT_MS);

		if (err) {
			fprintf(stderr, "the transfer failed before the kill: %s\n",
				nicsim_wsa_name(err));
			return false;
		}
	}
	return true;
}

/* After the kill at t0: take completions until the first error; its delay in ms, or -1. */
static double error_after(struct recv_side *r, uint64_t t0)
{
	uint64_t deadline = t0 + (uint64_t)WAIT_MS * 1000000u;

	while (nst_now_ns() < deadline) {
		int err = take_one(r, WAIT_MS);

		if (err == WSAETIMEDOUT)
			return -1;
		if (err)
			return (double)(nst_now_ns() - t0) / 1e6;
	}
	return -1;
}

/*
 * What the NICs hold between rounds, taken once after a whole transfer from
 * B and one from K (a NIC keeps the bell of a peer it has woken; bells are
 * counted apart: nic_fds).
 */
static void take_base(void)
{
	const char *const from[] = {ADDR_B, ADDR_K};

	if (base_taken)
		return;
	for (size_t i = 0; i < 2; i++) {
		struct recv_side r;
		pid_t peer = open_transfer(from[i], &r, 1);
		int err = 0, status;

		NST_REQUIRE_GT(peer, 0);
		while (!err && r.next < NMSG)
			err = take_one(&r, WAIT_MS);
		NST_EQ(err, 0);
		close_transfer(&r);
		status = nst_wait(peer, WAIT_MS);
		NST_REQUIRE(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	NST_REQUIRE_EQ(nst_wait_tpt_in_use(sock_a, 0, WAIT_MS), 0);
	NST_REQUIRE_EQ(nst_wait_tpt_in_use(sock_b, 0, WAIT_MS), 0);
	base.tpt_a = base.tpt_b = 0;
	/* The management sessions of those questions close in the NICs' time. */
	nst_wait_until(state_is_stable, NULL, WAIT_MS, 20);
	base_taken = true;
}

/* ---- (a) The host program --------------------------------------------------------- */

static void test_host_killed(void)
{
	double ms[NPOINTS];
	int n = 0;

	take_base();
	draw_points(0, TOTAL);
	for (int i = 0; i < NPOINTS; i++) {
		struct recv_side r;
		pid_t peer = open_transfer(ADDR_B, &r, (uint32_t)(seed + (uint64_t)i));
		uint64_t t0;
		int status;

		NST_REQUIRE_GT(peer, 0);
		NST_REQUIRE(reach(&r, points[i]));
		t0 = nst_now_ns();
		NST_EQ(kill(peer, SIGKILL), 0);
		ms[n] = error_after(&r, t0);
		NST_CHECK_(ms[n] >= 0 && ms[n] < LIMIT_NS / 1e6, CU_FALSE,
			   "host killed after %llu bytes: the receive failed after %.1f ms",
			   (unsigned long long)points[i], ms[n]);
		NST_EQ(r.bad, 0);
		n += ms[n] >= 0;
		close_transfer(&r);
		status = nst_wait(peer, WAIT_MS);
		NST_TRUE(status >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
		NST_TRUE(!nst_pid_alive(peer));
		check_base("host", i);
	}
	figures("host program", ms, n);
}

/* ---- (b) The NIC ------------------------------------------------------------------ */

static void test_nic_killed(void)
{
	double ms[NPOINTS];
	int n = 0;

	take_base();
	draw_points(1, TOTAL);
	for (int i = 0; i < NPOINTS; i++) {
		struct recv_side r;
		pid_t peer = open_transfer(ADDR_K, &r, (uint32_t)(seed + (uint64_t)i));
		uint64_t t0;
		int status;

		NST_REQUIRE_GT(peer, 0);
		NST_REQUIRE(reach(&r, points[i]));
		t0 = nst_now_ns();
		NST_EQ(kill(nic_k, SIGKILL), 0);
		ms[n] = error_after(&r, t0);
		NST_CHECK_(ms[n] >= 0 && ms[n] < LIMIT_NS / 1e6, CU_FALSE,
			   "NIC killed after %llu bytes: the peer's receive failed after %.1f ms",
			   (unsigned long long)points[i], ms[n]);
		NST_EQ(r.bad, 0);
		n += ms[n] >= 0;
		status = nst_wait(nic_k, WAIT_MS);
		NST_TRUE(status >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
		nic_k = -1;
		/* The host on the dead NIC learns it too (WSAENETDOWN) and ends. */
		status = nst_wait(peer, WAIT_MS);
		NST_CHECK_(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 3, CU_FALSE,
			   "the host on the killed NIC ends with WSAENETDOWN (wait status 0x%x)",
			   (unsigned)status);
		if (status < 0)
			nst_stop(peer, WAIT_MS);
		close_transfer(&r);
		/* Its port opened again frees what the dead one held. */
		nic_k = nst_start_nic(dir, ADDR_K, NULL, WAIT_MS);
		NST_REQUIRE_GT(nic_k, 0);
		check_base("NIC", i);
	}
	figures("NIC", ms, n);
}

/* ---- (c) The capture -------------------------------------------------------------- */

static void test_capture_killed(void)
{
	const char *const args[] = {"-w", "-", NULL};
	char log[300];
	double ms[NPOINTS];
	int n = 0;

	snprintf(log, sizeof(log), "%s/capture.log", tmp);
	take_base();
	draw_points(2, TOTAL - MSG);
	for (int i = 0; i < NPOINTS; i++) {
		struct recv_side r;
		pid_t cap = nst_capture_spawn(dir, args, -1, log, true), peer;
		uint64_t t0, point = points[i];
		int status, err = 0;

		NST_REQUIRE_GT(cap, 0);
		NST_REQUIRE(nst_capture_attached(dir, cap, WAIT_MS));
		peer = open_transfer(ADDR_B, &r, (uint32_t)(seed + (uint64_t)i));
		NST_REQUIRE_GT(peer, 0);
		NST_REQUIRE(reach(&r, point));
		t0 = nst_now_ns();
		NST_EQ(kill(cap, SIGKILL), 0);
		/* The next message, and then the rest, arrive intact. */
		err = take_one(&r, WAIT_MS);
		ms[n] = err ? -1 : (double)(nst_now_ns() - t0) / 1e6;
		while (!err && r.next < NMSG)
			err = take_one(&r, WAIT_MS);
		NST_EQ(err, 0);
		NST_CHECK_(ms[n] >= 0 && ms[n] < LIMIT_NS / 1e6, CU_FALSE,
			   "capture killed after %llu bytes: the next message came after %.1f ms",
			   (unsigned long long)point, ms[n]);
		NST_EQ(r.bytes, TOTAL);
		NST_EQ(r.bad, 0);
		n += ms[n] >= 0;
		status = nst_wait(cap, WAIT_MS);
		NST_TRUE(status >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
		close_transfer(&r);
		status = nst_wait(peer, WAIT_MS);
		NST_CHECK_(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0, CU_FALSE,
			   "the sender ends well (wait status 0x%x)", (unsigned)status);
		if (status < 0)
			nst_stop(peer, WAIT_MS);
		check_base("capture", i);
	}
	figures("capture (to the next message)", ms, n);
}

/* ---- (d) The scenario runner -------------------------------------------------------- */

#define MAX_PIDS 16

struct scn_run {
	char tmpdir[300], dir[600];
	pid_t pids[MAX_PIDS];
	size_t n;
	uint64_t frames;
};

/* Whether /proc/PID/environ holds want. */
static bool env_has(const char *pid, const char *want)
{
	static char env[32768];
	char path[300];
	ssize_t len;
	int fd;

	snprintf(path, sizeof(path), "/proc/%s/environ", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	len = read(fd, env, sizeof(env) - 1);
	close(fd);
	if (len <= 0)
		return false;
	env[len] = '\0';
	for (ssize_t i = 0; i < len; i += (ssize_t)strlen(env + i) + 1)
		if (!strcmp(env + i, want))
			return true;
	return false;
}

/* The scenario's agents (NICSIM_DIR in their environment) and NICs (pid files). */
static size_t scn_pids(const char *rd, pid_t *pids, size_t max)
{
	char want[650], path[900];
	struct dirent *e;
	size_t n = 0;
	DIR *d;

	snprintf(want, sizeof(want), "NICSIM_DIR=%s", rd);
	d = opendir("/proc");
	while (d && (e = readdir(d)) && n < max)
		if (e->d_name[0] >= '1' && e->d_name[0] <= '9' && env_has(e->d_name, want))
			pids[n++] = (pid_t)atoi(e->d_name);
	if (d)
		closedir(d);
	d = opendir(rd);
	while (d && (e = readdir(d)) && n < max) {
		size_t l = strlen(e->d_name);

		if (l > 4 && !strcmp(e->d_name + l - 4, ".pid")) {
			snprintf(path, sizeof(path), "%s/%s", rd, e->d_name);
			pids[n] = nst_read_pid_file(path);
			n += pids[n] > 0;
		}
	}
	if (d)
		closedir(d);
	return n;
}

/* The transfer has reached s->frames at NIC a (which exists by then). */
static bool scn_at_point(void *arg)
{
	struct scn_run *s = arg;
	struct dirent *e;
	char sock[700];
	DIR *d;

	if (!s->dir[0]) {
		d = opendir(s->tmpdir);
		while (d && (e = readdir(d)))
			if (!strncmp(e->d_name, "nicsim-scn-", 11))
				snprintf(s->dir, sizeof(s->dir), "%s/%s", s->tmpdir, e->d_name);
		if (d)
			closedir(d);
		if (!s->dir[0])
			return false;
	}
	snprintf(sock, sizeof(sock), "%s/nic-" ADDR_A ".sock", s->dir);
	return nst_nic_stat(sock, NST_STAT(rx_frames)) >= s->frames;
}

static bool scn_all_gone(void *arg)
{
	const struct scn_run *s = arg;

	for (size_t i = 0; i < s->n; i++)
		if (nst_pid_alive(s->pids[i]))
			return false;
	return access(s->dir, F_OK) != 0;
}

static void test_runner_killed(void)
{
	char path[300], log[300];
	double ms[NPOINTS];
	int n = 0, devshm = count_entries("/dev/shm", "nicsim");
	FILE *f;

	snprintf(path, sizeof(path), "%s/transfer.scn", tmp);
	f = fopen(path, "w");
	NST_REQUIRE(f != NULL);
	fprintf(f, "# An RDMA write of 8 MiB, then a wait that never ends.\n"
		   "nic a " ADDR_A "\n"
		   "nic b " ADDR_B "\n"
		   "host h1 on a\nhost h2 on b\n"
		   "h1: startup\nh2: startup\n"
		   "h1: socket -> s\nh1: bind s a 7000\nh1: listen s\nh1: accept s -> c1 &\n"
		   "h2: socket -> t\nh2: bind t b 0\nh2: connect t a 7000\nwait c1\n"
		   "h1: buffer x 8MiB fill zero\n"
		   "h1: register-rdma c1 x readwrite -> d\n"
		   "h2: buffer y 8MiB fill seq 3\n"
		   "h2: register t y -> hy\n"
		   "h2: write t y d[0] within 60s\n"
		   "h1: accept s -> c2 &\n"
		   "wait c2 within 60s\n");
	NST_REQUIRE_EQ(fclose(f), 0);
	snprintf(log, sizeof(log), "%s/runner.out", tmp);
	take_base();
	draw_points(3, SCN_FRAMES);
	for (int i = 0; i < NPOINTS; i++) {
		static struct scn_run s;
		pid_t runner;
		uint64_t t0;
		int status;

		memset(&s, 0, sizeof(s));
		snprintf(s.tmpdir, sizeof(s.tmpdir), "%s/scn-%d", tmp, i);
		NST_REQUIRE_EQ(mkdir(s.tmpdir, 0700), 0);
		s.frames = points[i] + 1;
		fflush(NULL);
		runner = fork();
		NST_REQUIRE_GE(runner, 0);
		if (runner == 0) {
			int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

			dup2(fd, 1);
			dup2(fd, 2);
			setenv("TMPDIR", s.tmpdir, 1);
			execl(nst_bin("nicsim"), "nicsim", "scenario", "run", path, (char *)NULL);
			_exit(127);
		}
		NST_CHECK_(nst_wait_until(scn_at_point, &s, 30000, 1), CU_FALSE,
			   "the scenario's NIC a took %llu frames", (unsigned long long)s.frames);
		if (s.dir[0])
			nst_guard_dir(s.dir);
		s.n = scn_pids(s.dir, s.pids, MAX_PIDS);
		NST_CHECK_(s.n >= 4, CU_FALSE, "%zu processes of the scenario (2 NICs, 2 agents)",
			   s.n);
		t0 = nst_now_ns();
		NST_EQ(kill(runner, SIGKILL), 0);
		status = nst_wait(runner, WAIT_MS);
		NST_TRUE(status >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
		/* Everything it started ends, and its run directory goes. */
		ms[n] = nst_wait_until(scn_all_gone, &s, WAIT_MS, 1)
			    ? (double)(nst_now_ns() - t0) / 1e6
			    : -1;
		NST_CHECK_(ms[n] >= 0 && ms[n] < LIMIT_NS / 1e6, CU_FALSE,
			   "runner killed after %llu frames: all it started gone after %.1f ms",
			   (unsigned long long)s.frames, ms[n]);
		n += ms[n] >= 0;
		for (size_t k = 0; k < s.n; k++) {
			NST_CHECK_(!nst_pid_alive(s.pids[k]), CU_FALSE, "pid %d is gone",
				   (int)s.pids[k]);
			if (nst_pid_alive(s.pids[k]))
				kill(s.pids[k], SIGKILL);
		}
		NST_EQ(count_entries(s.tmpdir, NULL), 0);
		NST_EQ(count_entries("/dev/shm", "nicsim"), devshm);
		nst_rmtree(s.tmpdir);
	}
	figures("scenario runner (to all it started gone)", ms, n);
	/* The suite's own NICs saw nothing of it. */
	check_base("runner", -1);
}

/* ---- Suite ---------------------------------------------------------------------------- */

static int init(void)
{
	const char *const addrs[] = {ADDR_A, ADDR_B, ADDR_K, NULL};
	const char *env = getenv("NICSIM_KILL_SEED");

	/* The capture rounds run captures of their own. */
	unsetenv("NICSIM_CAPTURE");
	seed = env && *env ? strtoull(env, NULL, 0) : (uint64_t)nst_now_ns();
	printf("\nseed %llu (NICSIM_KILL_SEED=%llu replays it)\n", (unsigned long long)seed,
	       (unsigned long long)seed);
	if (nst_tmpdir(dir, sizeof(dir), "kill") < 0 ||
	    nst_tmpdir(tmp, sizeof(tmp), "kill-aux") < 0 || nst_make_fabric(dir, addrs) < 0 ||
	    fab_open(dir, &fab) < 0)
		return -1;
	snprintf(sock_a, sizeof(sock_a), "%s/nic-" ADDR_A ".sock", dir);
	snprintf(sock_b, sizeof(sock_b), "%s/nic-" ADDR_B ".sock", dir);
	snprintf(sock_k, sizeof(sock_k), "%s/nic-" ADDR_K ".sock", dir);
	nic_a = nst_start_nic(dir, ADDR_A, NULL, WAIT_MS);
	nic_b = nst_start_nic(dir, ADDR_B, NULL, WAIT_MS);
	nic_k = nst_start_nic(dir, ADDR_K, NULL, WAIT_MS);
	if (nic_a < 0 || nic_b < 0 || nic_k < 0)
		return -1;
	setenv("NICSIM_DIR", dir, 1);
	if (nst_spi_startup())
		return -1;
	return 0;
}

static int clean(void)
{
	int err = 0, rc = 0;

	WSPCleanup(&err);
	if (!nst_stop_clean(nic_a, WAIT_MS) || !nst_stop_clean(nic_b, WAIT_MS))
		rc = -1;
	if (nic_k > 0 && !nst_stop_clean(nic_k, WAIT_MS))
		rc = -1;
	fab_close(fab);
	nst_done_with_dir(tmp);
	nst_done_with_dir(dir);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"host_killed", test_host_killed},
	    {"nic_killed", test_nic_killed},
	    {"capture_killed", test_capture_killed},
	    {"runner_killed", test_runner_killed},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "kill", tests, init, clean);
}

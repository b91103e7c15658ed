/*
 * The fabric between real processes: two forked processes exchange 100,000
 * RoCEv2 frames through the segment with flow control, both spinning
 * briefly then sleeping on their bells; a process killed with SIGKILL in the
 * middle of a stream hangs no one, and its frames come back when its port is
 * opened again.  Then the CLI: `nicsim up` creates the fabric, `nicsim link`
 * sets and shows links, `nicsim down` removes it.
 *
 * Every wait is bounded; every process a test starts is ended by pid.  The
 * daemons `nicsim up` starts are not our children: their pids are read from
 * the pid files and killed at clean-up if still there.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fab.h"
#include "fab_addr.h"
#include "fab_wire.h"
#include "nstest.h"

#define A_ADDR "198.18.0.1"
#define B_ADDR "198.18.0.2"
#define FRAMES 100000u
#define WINDOW 512u    /* frames A may have unacknowledged */
#define ACK_EVERY 32u  /* B acknowledges this often */
#define SPIN_NS 20000u /* poll this long before sleeping */
#define CHILD_S 30     /* a child gives up after this long */
#define WAIT_MS 90000  /* the parent's bound on a child */
#define GONE_MS 30000  /* bound on a killed peer being noticed */
#define RUN_MS 30000   /* bound on one nicsim command */
#define HOLD 32u       /* frames the streaming sender keeps taken */

static char tmp[256];
static char dir[512];
static int dir_no;
static uint32_t a_addr, b_addr;
static pid_t children[4];
static pid_t daemons[4];

/* What the children report, in memory shared across fork. */
struct shared {
	uint64_t received, bad, acked, sent;
	uint64_t wakeups[2]; /* bell wake-ups of A and B */
	uint32_t asleep[2];  /* A or B is in epoll_wait */
	uint32_t b_open;     /* B's port is open: A may send */
	uint64_t unreachable;
	uint32_t stop; /* set by the parent after a kill */
};

static struct shared *sh;

/* ---- Frames --------------------------------------------------------------- */

static uint32_t payload_len(uint32_t seq)
{
	static const uint32_t sizes[] = {64, 1000, 4000, 8};

	return sizes[seq % 4];
}

/* SEND_ONLY from A to B: PSN = seq, payload = 8 bytes of seq then a pattern. */
static uint32_t make_data(uint8_t *frame, uint32_t seq)
{
	static uint8_t payload[FAB_MTU];
	uint32_t i, n = payload_len(seq);
	struct fab_pkt pkt;
	size_t len = 0;

	fab_pkt_init(&pkt, FAB_OP_SEND_ONLY);
	pkt.src_ip = a_addr;
	pkt.dst_ip = b_addr;
	pkt.udp_sport = fab_udp_sport(7);
	pkt.dest_qpn = 7;
	pkt.psn = seq & FAB_MASK24;
	fab_put64(payload, seq);
	for (i = 8; i < n; i++)
		payload[i] = (uint8_t)(seq * 7u + i);
	pkt.payload = payload;
	pkt.payload_len = n;
	if (fab_pkt_encode(&pkt, frame, FAB_SLOT_BYTES, &len))
		return 0;
	return (uint32_t)len;
}

/* The sequence number of an intact data frame, or -1. */
static int64_t check_data(const uint8_t *frame, uint32_t len)
{
	struct fab_pkt pkt;
	enum fab_wire_err why;
	uint64_t seq;
	uint32_t i;

	if (fab_pkt_decode(frame, len, &pkt, &why) || pkt.opcode != FAB_OP_SEND_ONLY ||
	    pkt.payload_len < 8)
		return -1;
	seq = fab_get64(pkt.payload);
	if (pkt.payload_len != payload_len((uint32_t)seq) || pkt.psn != (seq & FAB_MASK24))
		return -1;
	for (i = 8; i < pkt.payload_len; i++)
		if (pkt.payload[i] != (uint8_t)(seq * 7u + i))
			return -1;
	return (int64_t)seq;
}

/* ACKNOWLEDGE from B to A whose PSN is the count of frames received. */
static int send_ack(struct fab_port *p, uint32_t count)
{
	struct fab_pkt pkt;
	uint32_t idx;
	size_t len = 0;
	void *data;
	int rc;

	rc = fab_frame_get(p, &idx, &data);
	if (rc)
		return rc;
	fab_pkt_init(&pkt, FAB_OP_ACKNOWLEDGE);
	pkt.src_ip = b_addr;
	pkt.dst_ip = a_addr;
	pkt.udp_sport = fab_udp_sport(9);
	pkt.dest_qpn = 9;
	pkt.psn = count & FAB_MASK24;
	pkt.syndrome = fab_aeth_ack(FAB_AETH_CREDITS_INVALID);
	if (fab_pkt_encode(&pkt, data, FAB_SLOT_BYTES, &len)) {
		fab_frame_put(p, idx);
		return -EINVAL;
	}
	return fab_send(p, idx, (uint32_t)len, a_addr);
}

/* ---- Waiting: spin briefly, then sleep on the bell and a timer ------------------ */

struct waiter {
	struct fab_port *port;
	int ep, timer;
	int who; /* 0: A, 1: B */
};

static int waiter_init(struct waiter *w, struct fab_port *p, int who)
{
	struct epoll_event ev = {.events = EPOLLIN};

	w->port = p;
	w->who = who;
	w->ep = epoll_create1(EPOLL_CLOEXEC);
	w->timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (w->ep < 0 || w->timer < 0)
		return -1;
	if (epoll_ctl(w->ep, EPOLL_CTL_ADD, fab_port_fd(p), &ev) < 0 ||
	    epoll_ctl(w->ep, EPOLL_CTL_ADD, w->timer, &ev) < 0)
		return -1;
	return 0;
}

/* Nothing to do: spin (yielding) for SPIN_NS, then sleep until a frame
 * arrives or is due, at most max_ms. */
static void waiter_wait(struct waiter *w, int max_ms)
{
	struct itimerspec its = {{0, 0}, {0, 0}};
	uint64_t until = fab_now_ns() + SPIN_NS, due, sink;
	struct epoll_event ev[2];

	while (fab_now_ns() < until) {
		if (fab_next_due_ns(w->port) <= fab_now_ns())
			return;
		sched_yield();
	}
	if (fab_port_sleep_prepare(w->port) == -EAGAIN)
		return;
	due = fab_next_due_ns(w->port);
	if (due != UINT64_MAX) {
		its.it_value.tv_sec = (time_t)(due / 1000000000u);
		its.it_value.tv_nsec = (long)(due % 1000000000u);
		timerfd_settime(w->timer, TFD_TIMER_ABSTIME, &its, NULL);
	}
	__atomic_store_n(&sh->asleep[w->who], 1, __ATOMIC_SEQ_CST);
	epoll_wait(w->ep, ev, 2, max_ms);
	__atomic_store_n(&sh->asleep[w->who], 0, __ATOMIC_SEQ_CST);
	fab_port_sleep_cancel(w->port);
	if (read(w->timer, &sink, sizeof(sink)) < 0)
		sink = 0;
}

/* Stall until the other side (0: A, 1: B) is asleep, at most 10 s (a
 * deadline for a loaded machine; the back-off is bounded): the next frame
 * this side sends must then ring its bell. */
static bool is_asleep(void *other)
{
	return __atomic_load_n(&sh->asleep[*(const int *)other], __ATOMIC_SEQ_CST);
}

static void stall_until_asleep(int other)
{
	(void)nst_wait_until(is_asleep, &other, 10000, 1);
}

/* A child's own mapping and port; A waits (bounded) until B's is open. */
static bool b_is_open(void *unused)
{
	(void)unused;
	return __atomic_load_n(&sh->b_open, __ATOMIC_SEQ_CST);
}

static int child_open(uint32_t addr, struct fab **fab, struct fab_port **port)
{
	if (fab_open(dir, fab) || fab_port_open(*fab, addr, port))
		return -1;
	if (addr == b_addr)
		__atomic_store_n(&sh->b_open, 1, __ATOMIC_SEQ_CST);
	return nst_wait_until(b_is_open, NULL, CHILD_S * 1000, 1) ? 0 : -1;
}

/* ---- Children ------------------------------------------------------------------ */

/* A: send FRAMES frames to B, at most WINDOW unacknowledged; pause now and
 * then until B has run dry and gone to sleep. */
static int run_sender(void *arg)
{
	uint64_t deadline = fab_now_ns() + (uint64_t)CHILD_S * 1000000000u;
	uint32_t sent = 0, acked = 0, idx, len;
	struct fab_port *port;
	struct waiter w;
	struct fab_rx rx;
	struct fab *fab;
	bool progress;
	void *data;

	(void)arg;
	if (child_open(a_addr, &fab, &port) || waiter_init(&w, port, 0))
		return 10;
	while (acked < FRAMES) {
		if (fab_now_ns() > deadline)
			return 11;
		progress = false;
		while (sent < FRAMES && sent - acked < WINDOW &&
		       fab_frame_get(port, &idx, &data) == 0) {
			len = make_data(data, sent);
			if (!len || fab_send(port, idx, len, b_addr))
				return 12;
			if (++sent % 25000 == 0 && sent < FRAMES)
				stall_until_asleep(1);
			progress = true;
		}
		while (fab_recv(port, &rx) == 0) {
			struct fab_pkt pkt;
			enum fab_wire_err why;

			if (fab_pkt_decode(rx.data, rx.len, &pkt, &why) == 0 &&
			    pkt.opcode == FAB_OP_ACKNOWLEDGE && pkt.psn > acked && pkt.psn <= sent)
				acked = pkt.psn;
			fab_rx_done(port, rx.idx);
			progress = true;
		}
		if (!progress)
			waiter_wait(&w, 100);
	}
	__atomic_store_n(&sh->sent, sent, __ATOMIC_RELAXED);
	__atomic_store_n(&sh->acked, acked, __ATOMIC_RELAXED);
	__atomic_store_n(&sh->wakeups[0], fab_port_wakeups(port), __ATOMIC_RELAXED);
	fab_port_close(port);
	fab_close(fab);
	return 0;
}

/* B: receive and check FRAMES frames, in order, acknowledging every
 * ACK_EVERY and whenever it runs dry; now and then it stalls until A, its
 * window full, has gone to sleep. */
static int run_receiver(void *arg)
{
	uint64_t deadline = fab_now_ns() + (uint64_t)CHILD_S * 1000000000u;
	uint32_t got = 0, acked = 0;
	struct fab_port *port;
	struct waiter w;
	struct fab_rx rx;
	struct fab *fab;
	int64_t seq;

	(void)arg;
	if (child_open(b_addr, &fab, &port) || waiter_init(&w, port, 1))
		return 20;
	while (got < FRAMES) {
		if (fab_now_ns() > deadline)
			return 21;
		if (fab_recv(port, &rx) == 0) {
			seq = check_data(rx.data, rx.len);
			fab_rx_done(port, rx.idx);
			if (seq != (int64_t)got) {
				__atomic_fetch_add(&sh->bad, 1, __ATOMIC_RELAXED);
				return 22;
			}
			got++;
			if (got % 30000 == 0)
				stall_until_asleep(0);
			if (got - acked >= ACK_EVERY && send_ack(port, got) == 0)
				acked = got;
			continue;
		}
		if (got > acked && send_ack(port, got) == 0)
			acked = got;
		else
			waiter_wait(&w, 100);
	}
	while (send_ack(port, got) == -ENOBUFS && fab_now_ns() < deadline)
		nst_sleep_ms(1);
	__atomic_store_n(&sh->received, got, __ATOMIC_RELAXED);
	__atomic_store_n(&sh->wakeups[1], fab_port_wakeups(port), __ATOMIC_RELAXED);
	fab_port_close(port);
	fab_close(fab);
	return 0;
}

/* A, streaming: keeps HOLD frames taken (as a NIC's transmit queue would),
 * sends to B without flow control until told to stop, killed, or B is gone
 * (-EHOSTUNREACH: then it exits 0). */
static int run_streamer(void *arg)
{
	uint64_t deadline = fab_now_ns() + (uint64_t)CHILD_S * 1000000000u;
	uint32_t seq = 0, idx, len, held[HOLD], i;
	struct fab_port *port;
	struct fab *fab;
	void *data;
	int rc;

	(void)arg;
	if (child_open(a_addr, &fab, &port))
		return 30;
	for (i = 0; i < HOLD; i++)
		if (fab_frame_get(port, &held[i], &data))
			return 31;
	while (fab_now_ns() < deadline) {
		if (fab_frame_get(port, &idx, &data)) {
			sched_yield();
			continue;
		}
		len = make_data(data, seq);
		rc = fab_send(port, idx, len, b_addr);
		if (rc == 0) {
			seq++;
			__atomic_store_n(&sh->sent, seq, __ATOMIC_RELAXED);
		} else if (rc == -EHOSTUNREACH) {
			__atomic_store_n(&sh->unreachable, 1, __ATOMIC_RELAXED);
			fab_port_close(port);
			fab_close(fab);
			return 0;
		} else {
			sched_yield(); /* ring full: B is slow */
		}
	}
	return 32;
}

/* B, counting: checks what arrives, sleeps when idle; once the parent says
 * the peer is gone, exits after 300 ms without frames. */
static int run_counter(void *arg)
{
	uint64_t deadline = fab_now_ns() + (uint64_t)CHILD_S * 1000000000u, last = fab_now_ns();
	struct fab_port *port;
	struct waiter w;
	struct fab_rx rx;
	struct fab *fab;

	(void)arg;
	if (child_open(b_addr, &fab, &port) || waiter_init(&w, port, 1))
		return 40;
	while (fab_now_ns() < deadline) {
		if (fab_recv(port, &rx) == 0) {
			if (check_data(rx.data, rx.len) < 0)
				__atomic_fetch_add(&sh->bad, 1, __ATOMIC_RELAXED);
			fab_rx_done(port, rx.idx);
			__atomic_fetch_add(&sh->received, 1, __ATOMIC_RELAXED);
			last = fab_now_ns();
			continue;
		}
		if (__atomic_load_n(&sh->stop, __ATOMIC_RELAXED) &&
		    fab_now_ns() - last > 300000000u) {
			fab_port_close(port);
			fab_close(fab);
			return 0;
		}
		waiter_wait(&w, 50);
	}
	return 41;
}

/* ---- Parent helpers ------------------------------------------------------------------ */

static pid_t spawn(int (*fn)(void *))
{
	pid_t pid = nst_fork(fn, NULL);
	size_t i;

	for (i = 0; pid > 0 && i < sizeof(children) / sizeof(children[0]); i++) {
		if (!children[i]) {
			children[i] = pid;
			break;
		}
	}
	return pid;
}

static void forget(pid_t pid)
{
	size_t i;

	for (i = 0; i < sizeof(children) / sizeof(children[0]); i++)
		if (children[i] == pid)
			children[i] = 0;
}

/* Reap a child, bounded; its exit code, or -1 (killed, or it did not end). */
static int reap(pid_t pid, int ms)
{
	int status = nst_wait(pid, ms);

	if (status == -ETIMEDOUT) {
		fprintf(stderr, "child %d did not end within %d ms: killing it\n", (int)pid, ms);
		kill(pid, SIGKILL);
		status = nst_wait(pid, 5000);
	}
	forget(pid);
	return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void new_fabric(void)
{
	const uint32_t addrs[] = {a_addr, b_addr};
	const struct fab_config cfg = {.seed = 1, .addrs = addrs, .naddrs = 2};

	snprintf(dir, sizeof(dir), "%s/f%d", tmp, ++dir_no);
	NST_REQUIRE_EQ(mkdir(dir, 0700), 0);
	NST_REQUIRE_EQ(fab_create(dir, &cfg), 0);
	memset(sh, 0, sizeof(*sh));
}

struct counter_at_least {
	const uint64_t *counter;
	uint64_t at_least;
};

static bool counter_reached(void *arg)
{
	const struct counter_at_least *c = arg;

	return __atomic_load_n(c->counter, __ATOMIC_RELAXED) >= c->at_least;
}

static bool wait_until(const uint64_t *counter, uint64_t at_least, int ms)
{
	struct counter_at_least c = {counter, at_least};

	return nst_wait_until(counter_reached, &c, ms, 1);
}

/* Kill exactly the daemons read from pid files that are still nicsimd. */
static void kill_daemons(void)
{
	nst_kill_nicsimds(daemons, sizeof(daemons) / sizeof(daemons[0]), GONE_MS,
			  "test_fabric_procs");
}

static int suite_init(void)
{
	if (nst_tmpdir(tmp, sizeof(tmp), "fabp"))
		return -1;
	fab_addr_parse(A_ADDR, &a_addr);
	fab_addr_parse(B_ADDR, &b_addr);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	return sh == MAP_FAILED ? -1 : 0;
}

static int suite_clean(void)
{
	size_t i;

	for (i = 0; i < sizeof(children) / sizeof(children[0]); i++) {
		if (children[i] > 0) {
			kill(children[i], SIGKILL);
			nst_wait(children[i], 5000);
			children[i] = 0;
		}
	}
	kill_daemons();
	if (sh != MAP_FAILED)
		munmap(sh, sizeof(*sh));
	nst_rmtree(tmp);
	return 0;
}

/* ---- Tests ----------------------------------------------------------------------- */

static void test_exchange_100k(void)
{
	struct fab_link_stats ab, ba;
	struct fab_info info;
	struct fab *fab;
	pid_t a, b;
	uint64_t t0 = fab_now_ns();
	double secs;

	new_fabric();
	b = spawn(run_receiver);
	a = spawn(run_sender);
	NST_REQUIRE(a > 0 && b > 0);
	NST_EQ(reap(a, WAIT_MS), 0);
	NST_EQ(reap(b, WAIT_MS), 0);
	secs = (double)(fab_now_ns() - t0) / 1e9;
	printf("\n    %u frames A -> B in %.2f s; bell wake-ups: A %llu, B %llu", FRAMES, secs,
	       (unsigned long long)sh->wakeups[0], (unsigned long long)sh->wakeups[1]);
	NST_EQ(sh->received, FRAMES);
	NST_EQ(sh->acked, FRAMES);
	NST_EQ(sh->bad, 0);
	/* Both sides slept, and were woken by the other's frames: at least
	 * once per stall of the other side (three each). */
	NST_GE(sh->wakeups[0], 3);
	NST_GE(sh->wakeups[1], 3);

	NST_REQUIRE_EQ(fab_open(dir, &fab), 0);
	NST_REQUIRE_EQ(fab_link_stats(fab, a_addr, b_addr, &ab), 0);
	NST_REQUIRE_EQ(fab_link_stats(fab, b_addr, a_addr, &ba), 0);
	NST_EQ(ab.tx.frames, FRAMES);
	NST_EQ(ab.rx.delivered, FRAMES);
	NST_GE(ba.rx.delivered, FRAMES / ACK_EVERY);
	printf(" (%llu acks)", (unsigned long long)ba.rx.delivered);
	NST_REQUIRE_EQ(fab_info(fab, &info), 0);
	NST_EQ(info.frames_free, info.nframes);
	fab_close(fab);
}

static void test_sender_killed(void)
{
	struct fab_port_info pi;
	struct fab_port *port;
	struct fab_info info;
	struct fab *fab;
	uint64_t t0;
	pid_t a, b;
	int rc;

	new_fabric();
	b = spawn(run_counter);
	a = spawn(run_streamer);
	NST_REQUIRE(a > 0 && b > 0);
	NST_REQUIRE(wait_until(&sh->received, 5000, 30000));
	NST_REQUIRE_EQ(kill(a, SIGKILL), 0);
	NST_EQ(reap(a, GONE_MS), -1);
	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELAXED);
	/* The receiver goes on, and stops on its own: nothing hangs. */
	t0 = fab_now_ns();
	NST_EQ(reap(b, GONE_MS), 0);
	printf("\n    sender killed after %llu frames; the receiver got %llu and ended %.0f ms "
	       "later",
	       (unsigned long long)sh->sent, (unsigned long long)sh->received,
	       (double)(fab_now_ns() - t0) / 1e6);
	NST_EQ(sh->bad, 0);

	NST_REQUIRE_EQ(fab_open(dir, &fab), 0);
	pi = nst_fab_port(fab, a_addr);
	NST_TRUE(pi.open);
	NST_TRUE(!pi.live);
	NST_GE(pi.frames_held, HOLD);
	printf("; the dead port holds %u frames", pi.frames_held);
	/* Opening it again takes them back. */
	rc = fab_port_open(fab, a_addr, &port);
	NST_REQUIRE_EQ(rc, 0);
	pi = nst_fab_port(fab, a_addr);
	NST_GE(pi.counters.reclaimed, HOLD);
	NST_REQUIRE_EQ(fab_info(fab, &info), 0);
	NST_EQ(info.frames_free, info.nframes);
	fab_port_close(port);
	fab_close(fab);
}

static void test_receiver_killed(void)
{
	struct fab_port_info pi;
	struct fab_port *port;
	struct fab_info info;
	struct fab *fab;
	uint64_t t0;
	pid_t a, b;

	new_fabric();
	b = spawn(run_counter);
	a = spawn(run_streamer);
	NST_REQUIRE(a > 0 && b > 0);
	NST_REQUIRE(wait_until(&sh->received, 5000, 30000));
	NST_REQUIRE_EQ(kill(b, SIGKILL), 0);
	NST_EQ(reap(b, GONE_MS), -1);
	/* The sender finds the receiver gone once its ring fills. */
	t0 = fab_now_ns();
	NST_EQ(reap(a, GONE_MS), 0);
	NST_EQ(sh->unreachable, 1);
	printf("\n    receiver killed after %llu frames; the sender saw it gone %.0f ms later",
	       (unsigned long long)sh->received, (double)(fab_now_ns() - t0) / 1e6);

	NST_REQUIRE_EQ(fab_open(dir, &fab), 0);
	pi = nst_fab_port(fab, b_addr);
	NST_TRUE(pi.open && !pi.live);
	NST_GT(pi.frames_held, 0);
	printf("; %u frames were in flight to it or held by it", pi.frames_held);
	NST_REQUIRE_EQ(fab_port_open(fab, b_addr, &port), 0);
	NST_EQ(nst_fab_port(fab, b_addr).counters.reclaimed, pi.frames_held);
	NST_REQUIRE_EQ(fab_info(fab, &info), 0);
	NST_EQ(info.frames_free, info.nframes);
	fab_port_close(port);
	fab_close(fab);
}

/* ---- The CLI ------------------------------------------------------------------------ */

static char out[65536];

static int nicsim(const char *const *args)
{
	char bin[PATH_MAX];

	snprintf(bin, sizeof(bin), "%s", nst_bin("nicsim"));
	return nst_run_shown(bin, "nicsim", args, out, sizeof(out), RUN_MS);
}

#define NICSIM(...) nicsim((const char *const[]){__VA_ARGS__, NULL})
#define OUT_HAS(text) NST_CHECK_(strstr(out, (text)) != NULL, CU_FALSE, "output has \"%s\"", (text))

static void test_cli_up_link_down(void)
{
	char run[600], seg[700], pidf[700];
	struct stat st;
	int rc, i;

	snprintf(run, sizeof(run), "%s/run", tmp);
	snprintf(seg, sizeof(seg), "%s/" FAB_SEG_FILE, run);

	/* No fabric yet: a runtime failure that says what to do. */
	rc = NICSIM("link", "show", "--dir", run);
	NST_EQ(rc, 1);
	OUT_HAS("nicsim up");

	rc = NICSIM("up", "--dir", run, "--hosts", "2", "--seed", "42");
	for (i = 0; i < 2; i++) {
		snprintf(pidf, sizeof(pidf), "%s/nic-198.18.0.%d.pid", run, i + 1);
		daemons[i] = nst_read_pid_file(pidf);
	}
	NST_REQUIRE_EQ(rc, 0);
	OUT_HAS("seed 42");
	NST_EQ(stat(seg, &st), 0);

	/* Usage errors: exit 2, nothing changed. */
	NST_EQ(NICSIM("link", "set", "--dir", run, A_ADDR, B_ADDR), 2);
	OUT_HAS("at least one setting");
	NST_EQ(NICSIM("link", "set", "--dir", run, A_ADDR, B_ADDR, "loss", "101"), 2);
	OUT_HAS("loss 101");
	NST_EQ(NICSIM("link", "set", "--dir", run, "10.0.0.1", B_ADDR, "loss", "1"), 2);
	OUT_HAS("198.18.0.0/15");
	NST_EQ(NICSIM("link", "set", "--dir", run, A_ADDR, B_ADDR, "wobble", "1"), 2);
	OUT_HAS("unknown setting 'wobble'");
	NST_EQ(NICSIM("link", "set", "--dir", run, A_ADDR, B_ADDR, "latency", "-3"), 2);
	OUT_HAS("latency -3: expected microseconds");
	NST_EQ(NICSIM("link", "set", "--dir", run, A_ADDR, "198.18.0.7", "loss", "1"), 1);
	OUT_HAS("no port 198.18.0.7");
	OUT_HAS("add --remote");
	/* A NIC beyond the fabric, said so: a slot, and the rule on its link. */
	NST_EQ(NICSIM("link", "set", "--dir", run, "--remote", "all", "198.18.0.7", "loss", "1"),
	       2);
	OUT_HAS("SRC must be a NIC of the fabric");
	NST_EQ(NICSIM("link", "set", "--dir", run, "--remote", A_ADDR, "198.18.0.7", "loss", "1"),
	       0);
	OUT_HAS("198.18.0.7 is not a NIC of this fabric");
	OUT_HAS("link 198.18.0.1 -> 198.18.0.7: up loss 1");

	rc = NICSIM("link", "set", "--dir", run, A_ADDR, B_ADDR, "latency", "10", "jitter", "2.5",
		    "loss", "5", "drop-nth", "3", "opcode", "SEND_ONLY", "qpn", "17", "seed", "7");
	NST_EQ(rc, 0);
	OUT_HAS("latency 10 jitter 2.5 loss 5 drop-nth 3 opcode RC_SEND_ONLY qpn 17 seed 7");
	rc = NICSIM("link", "set", "--dir", run, "all", "all", "rate", "10");
	NST_EQ(rc, 0);
	OUT_HAS("link 198.18.0.2 -> 198.18.0.1: up rate 10");

	rc = NICSIM("link", "show", "--dir", run);
	NST_EQ(rc, 0);
	OUT_HAS("seed 42");
	OUT_HAS("link 198.18.0.1 -> 198.18.0.2: up latency 10 jitter 2.5 rate 10 loss 5");
	OUT_HAS("frames 0");
	/* The counter the docs send a user to is there even when it is 0. */
	OUT_HAS("dest_ring_full 0");
	rc = NICSIM("link", "show", "--json", "--dir", run);
	NST_EQ(rc, 0);
	OUT_HAS(
	    "\"latency_ns\":10000,\"jitter_ns\":2500,\"rate_mbps\":10000,\"loss_ppb\":50000000");
	OUT_HAS("\"drop_nth\":3,\"opcode\":4,\"qpn\":17,\"seed\":7");
	OUT_HAS("\"seed\":42");

	rc = NICSIM("down", "--dir", run);
	NST_EQ(rc, 0);
	OUT_HAS("removed the fabric");
	NST_EQ(stat(seg, &st), -1);
	kill_daemons();
}

static const struct nst_test tests[] = {
    {"exchange_100k", test_exchange_100k},
    {"sender_killed", test_sender_killed},
    {"receiver_killed", test_receiver_killed},
    {"cli_up_link_down", test_cli_up_link_down},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	return nst_main(argc, argv, "fabric_procs", tests, suite_init, suite_clean);
}

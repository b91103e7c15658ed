/*
 * What a capture costs the fabric: frames per second from process A to
 * process B through the segment with no capture, and with a real
 * `nicsim capture` process writing pcap to a file, in the same run: a
 * lossless capture (the default: the ports wait for it, so the fabric runs
 * at its pace and it misses nothing) and a lossy one (--lossy: the ports
 * never wait, the capture takes at most 5 % of a CPU while behind).
 *
 * A copies a RoCEv2 frame (a SEND Only of 64 bytes of payload, or an RDMA
 * WRITE Middle of 4096) into each frame slot, as the DMA engine fills
 * frames, and sends it to B, which checks and releases it; both poll,
 * yielding, each on its own CPU (the first two).  The capture is a third
 * process on the same CPUs.  Three rows: A as fast as it can with small and
 * with full frames, and A paced at 200,000 small frames a second, a rate
 * the capture can follow.  Runs alternate off, on, off, on ..., so that a
 * drift in the machine's load touches both alike, and the ratio is that of
 * the two medians: one run can lose half its rate when the scheduler puts A
 * and B on one CPU for a while, and a ratio of single runs then says more
 * about that run than about the capture.  The capture's own counts (frames
 * captured, not captured) are printed as shares of the frames A offered:
 * lossless, every frame is captured (checked); lossy, what the capture
 * cannot keep up with is counted, not slowed down.
 *
 * Targets: a lossy capture costs at most 0.2x of the frame rate on every
 * row, and a lossless one at a rate it can follow (the paced row); flat
 * out, a lossless capture sets the pace, and its rate is printed beside
 * the rate without it.  The lossless flat-out rows send fewer frames (every
 * one of them is written to the file).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fab.h"
#include "fab_addr.h"
#include "fab_capture.h"
#include "fab_wire.h"
#include "nstcapture.h"
#include "nstest.h"

#define RUN_FRAMES 2000000u
#define LOSSLESS_SMALL_FRAMES 200000u
#define LOSSLESS_BIG_FRAMES 50000u
#define PACED_FRAMES 100000u
#define ROUNDS 5
#define TARGET 0.8
#define WAIT_MS 120000
#define POLLS_PER_YIELD 64u

static char tmp[256], dir[512];
static int dir_no;
static uint32_t a_addr, b_addr;

struct shared {
	uint32_t len;
	uint32_t frames;  /* A sends this many ... */
	uint64_t pace_ns; /* ... one every pace_ns (0: as fast as it can) */
	uint32_t a_open, b_open;
	uint64_t t0, t1; /* first send, last receive */
	uint64_t bad;
	uint8_t frame[FAB_SLOT_BYTES];
};

static struct shared *sh;

/* The frame A sends: a SEND Only or an RDMA WRITE Middle. */
static uint32_t make_template(uint32_t payload)
{
	static uint8_t data[FAB_MTU];
	struct fab_pkt p;
	size_t len;

	nst_fill(data, payload, payload);
	fab_pkt_init(&p, payload < FAB_MTU ? FAB_OP_SEND_ONLY : FAB_OP_RDMA_WRITE_MIDDLE);
	p.src_ip = a_addr;
	p.dst_ip = b_addr;
	p.dest_qpn = 0x12;
	p.payload = data;
	p.payload_len = payload;
	if (fab_pkt_encode(&p, sh->frame, sizeof(sh->frame), &len))
		return 0;
	return (uint32_t)len;
}

/* ---- A and B ------------------------------------------------------------------ */

/* Map the fabric, open our port, say so, and wait (bounded) for the peer. */
static int start_port(uint32_t addr, uint32_t *mine, uint32_t *peer, struct fab **fab,
		      struct fab_port **port)
{
	uint64_t give_up = nst_now_ns() + 10000000000ull;

	nst_pin(0, addr == a_addr ? 0 : 1); /* A on one CPU, B on another */
	if (fab_open(dir, fab) || fab_port_open(*fab, addr, port))
		return -1;
	__atomic_store_n(mine, 1, __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(peer, __ATOMIC_SEQ_CST) && nst_now_ns() < give_up)
		sched_yield();
	return __atomic_load_n(peer, __ATOMIC_SEQ_CST) ? 0 : -1;
}

static int run_a(void *arg)
{
	uint64_t deadline = nst_now_ns() + 60000000000ull;
	struct fab_port *p;
	struct fab *fab;
	uint32_t i, idx;
	void *data;

	(void)arg;
	if (start_port(a_addr, &sh->a_open, &sh->b_open, &fab, &p))
		return 10;
	sh->t0 = nst_now_ns();
	for (i = 0; i < sh->frames;) {
		while (sh->pace_ns && nst_now_ns() < sh->t0 + i * sh->pace_ns)
			sched_yield();
		if (fab_frame_get(p, &idx, &data)) {
			sched_yield(); /* B has not given frames back yet */
			continue;
		}
		memcpy(data, sh->frame, sh->len);
		memcpy((uint8_t *)data + FAB_HDR_BASE - 4, &i, sizeof(i)); /* the PSN field */
		if (fab_send(p, idx, sh->len, b_addr) == 0)
			i++;
		else
			sched_yield(); /* ring full */
		if (nst_now_ns() > deadline)
			return 11;
	}
	fab_port_close(p);
	fab_close(fab);
	return 0;
}

static int run_b(void *arg)
{
	uint64_t deadline = nst_now_ns() + 60000000000ull;
	struct fab_port *p;
	struct fab_rx rx;
	struct fab *fab;
	uint32_t i, seq, polls = 0;

	(void)arg;
	if (start_port(b_addr, &sh->b_open, &sh->a_open, &fab, &p))
		return 20;
	for (i = 0; i < sh->frames; i++) {
		while (fab_recv(p, &rx)) {
			if (++polls % POLLS_PER_YIELD == 0) {
				if (nst_now_ns() > deadline)
					return 21;
				sched_yield();
			}
		}
		memcpy(&seq, (const uint8_t *)rx.data + FAB_HDR_BASE - 4, sizeof(seq));
		if (seq != i || rx.len != sh->len ||
		    ((const uint8_t *)rx.data)[rx.len - 1] != sh->frame[sh->len - 1])
			sh->bad++;
		fab_rx_done(p, rx.idx);
	}
	sh->t1 = nst_now_ns();
	fab_port_close(p);
	fab_close(fab);
	return 0;
}

/* ---- The capture process ------------------------------------------------------- */

/* Start `nicsim capture -w dir/cap.pcap` (with --lossy if lossy), its
 * stderr into dir/cap.log, and wait until it is attached. */
static pid_t start_capture(bool lossy)
{
	char out[600], log[600];
	pid_t pid;

	snprintf(out, sizeof(out), "%s/cap.pcap", dir);
	snprintf(log, sizeof(log), "%s/cap.log", dir);
	pid = nst_capture_spawn(dir,
				lossy ? (const char *const[]){"-w", out, "--lossy", NULL}
				      : (const char *const[]){"-w", out, NULL},
				-1, log, true);
	if (pid > 0 && !nst_capture_attached(dir, pid, 10000)) {
		nst_stop(pid, 5000);
		return -1;
	}
	return pid;
}

/* Stop it and read its counts from its last line. */
static void stop_capture(pid_t pid, unsigned long long *captured, unsigned long long *missed)
{
	char log[600], buf[4096], *line;
	int status, fd;
	ssize_t n;

	kill(pid, SIGINT);
	status = nst_wait(pid, WAIT_MS);
	if (status == -ETIMEDOUT) {
		kill(pid, SIGKILL);
		nst_wait(pid, 5000);
	}
	NST_TRUE(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	snprintf(log, sizeof(log), "%s/cap.log", dir);
	fd = open(log, O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	line = strstr(buf, "frames captured");
	while (line && line > buf && line[-1] != '\n')
		line--;
	NST_REQUIRE(line != NULL);
	NST_EQ(sscanf(line, "nicsim capture: %llu frames captured, %llu not captured", captured,
		      missed),
	       2);
}

/* Run B and A to their end, each wait bounded; both must exit 0. */
static void run_both(void)
{
	pid_t pid[2] = {nst_fork(run_b, NULL), nst_fork(run_a, NULL)};
	int st;

	for (int k = 0; k < 2; k++) {
		st = pid[k] > 0 ? nst_wait(pid[k], WAIT_MS) : -1;
		if (st == -ETIMEDOUT) {
			kill(pid[k], SIGKILL);
			nst_wait(pid[k], 5000);
		}
		NST_CHECK_(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, CU_FALSE,
			   "%s ended with status 0x%x", k ? "A" : "B", st);
	}
}

/* Frames offered to the link A -> B in the last run (drops at a full ring
 * included: A sends those again). */
static uint64_t offered;

enum cap_mode { CAP_OFF, CAP_LOSSLESS, CAP_LOSSY };

/* One run: frames per second; with capture, its counts too. */
static double run_once(enum cap_mode mode, unsigned long long *captured, unsigned long long *missed)
{
	const uint32_t addrs[] = {a_addr, b_addr};
	const struct fab_config cfg = {.seed = 1, .addrs = addrs, .naddrs = 2};
	struct fab_link_stats st;
	struct fab *fab_of_run;
	pid_t cap = 0;

	snprintf(dir, sizeof(dir), "%s/f%d", tmp, ++dir_no);
	NST_REQUIRE_EQ(mkdir(dir, 0700), 0);
	NST_REQUIRE_EQ(fab_create(dir, &cfg), 0);
	NST_REQUIRE_EQ(fab_open(dir, &fab_of_run), 0);
	if (mode != CAP_OFF) {
		cap = start_capture(mode == CAP_LOSSY);
		NST_REQUIRE(cap > 0);
	}
	sh->a_open = sh->b_open = 0;
	sh->bad = 0;
	run_both();
	if (mode != CAP_OFF)
		stop_capture(cap, captured, missed);
	offered = fab_link_stats(fab_of_run, a_addr, b_addr, &st) ? 0 : st.tx.frames;
	fab_close(fab_of_run);
	NST_EQ(sh->bad, 0);
	nst_rmtree(dir);
	return sh->frames / ((double)(sh->t1 - sh->t0) / 1e9);
}

/* One row: ROUNDS pairs of runs, off then on (mode); returns the on/off
 * ratio of their medians. */
static double row(const char *name, uint32_t payload, uint32_t frames, uint64_t pace_ns,
		  enum cap_mode mode)
{
	double off[ROUNDS], on[ROUNDS];
	unsigned long long captured, missed, cap_sum = 0, miss_sum = 0, sent = 0;

	sh->len = make_template(payload);
	NST_REQUIRE(sh->len > 0);
	sh->frames = frames;
	sh->pace_ns = pace_ns;
	for (int r = 0; r < ROUNDS; r++) {
		off[r] = run_once(CAP_OFF, NULL, NULL);
		on[r] = run_once(mode, &captured, &missed);
		cap_sum += captured;
		miss_sum += missed;
		sent += offered;
		/* Every frame A offered is either in the file or counted;
		 * lossless, every one is in the file. */
		NST_EQ(captured + missed, offered);
		if (mode == CAP_LOSSLESS)
			NST_EQ(missed, 0);
	}
	qsort(off, ROUNDS, sizeof(off[0]), nst_cmp_double);
	qsort(on, ROUNDS, sizeof(on[0]), nst_cmp_double);
	printf("  %-10s %6u %-9s %12.3f %12.3f %7.2f %13.1f%% %13.1f%%\n", name, sh->len,
	       mode == CAP_LOSSY ? "lossy" : "lossless", off[ROUNDS / 2] / 1e6,
	       on[ROUNDS / 2] / 1e6, on[ROUNDS / 2] / off[ROUNDS / 2],
	       100.0 * (double)cap_sum / (double)sent, 100.0 * (double)miss_sum / (double)sent);
	return on[ROUNDS / 2] / off[ROUNDS / 2];
}

static void bench_capture(void)
{
	double fast_small, fast_big, paced, ll_small, ll_big, ll_paced;

	printf("\n\n  frames per second A -> B through the fabric, capture off and on "
	       "(medians of %d runs each, off and on alternating; on/off: ratio of the medians)\n",
	       ROUNDS);
	printf("  %-10s %6s %-9s %12s %12s %7s %14s %14s\n", "A sends", "frame", "capture",
	       "off Mfr/s", "on Mfr/s", "on/off", "captured", "not captured");
	ll_small = row("flat out", 64, LOSSLESS_SMALL_FRAMES, 0, CAP_LOSSLESS);
	ll_big = row("flat out", FAB_MTU, LOSSLESS_BIG_FRAMES, 0, CAP_LOSSLESS);
	ll_paced = row("200k/s", 64, PACED_FRAMES, 5000, CAP_LOSSLESS);
	fast_small = row("flat out", 64, RUN_FRAMES, 0, CAP_LOSSY);
	fast_big = row("flat out", FAB_MTU, RUN_FRAMES, 0, CAP_LOSSY);
	paced = row("200k/s", 64, PACED_FRAMES, 5000, CAP_LOSSY);
	printf("  frame = bytes per frame; captured / not captured = share of the frames A\n"
	       "  offered that the capture wrote to its pcap file / that the ports left out.\n"
	       "  lossless (the default): the ports wait for the capture, which writes every\n"
	       "  frame; lossy (--lossy): the ports never wait, the capture takes at most 5%%\n"
	       "  of a CPU while it is behind\n");
	printf("  lossless, flat out: the capture sets the pace: %.2fx, %.2fx of the rate "
	       "without it\n",
	       ll_small, ll_big);
	printf("  target: capture on >= %.1fx the rate with it off, lossy %.2f, %.2f, %.2f and "
	       "lossless paced %.2f: %s\n",
	       TARGET, fast_small, fast_big, paced, ll_paced,
	       fast_small >= TARGET && fast_big >= TARGET && paced >= TARGET && ll_paced >= TARGET
		   ? "MET"
		   : "MISSED");
	NST_TRUE(fast_small >= TARGET);
	NST_TRUE(fast_big >= TARGET);
	NST_TRUE(paced >= TARGET);
	NST_TRUE(ll_paced >= TARGET);
}

/* The state A, B and the parent share lives in a shared mapping. */
static int suite_init(void)
{
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED || fab_addr_parse("198.18.0.1", &a_addr) ||
	    fab_addr_parse("198.18.0.2", &b_addr))
		return -1;
	return nst_tmpdir(tmp, sizeof(tmp), "capb") ? -1 : 0;
}

static int suite_clean(void)
{
	nst_rmtree(tmp);
	return sh == MAP_FAILED ? 0 : munmap(sh, sizeof(*sh));
}

static const struct nst_test tests[] = {
    {"capture", bench_capture},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	/* This benchmark runs its own captures (one per fabric at a time). */
	unsetenv("NICSIM_CAPTURE");
	return nst_main(argc, argv, "bench_capture", tests, suite_init, suite_clean);
}

/*
 * Data-path benchmark between two NICs on one fabric, with raw work
 * requests: RDMA WRITE and RDMA READ bandwidth for 4 KiB .. 16 MiB, SEND
 * half round-trip latency for 8 B and 4 KiB (ping-pong with a peer process),
 * and the small-message rate.  Same-run references: memcpy and
 * process_vm_readv of the same sizes, and UCX over TCP (ucx_perftest's
 * tag_bw and tag_lat, which the set-up installs) on this machine.
 *
 * The two NICs are pinned, one to each of the first two CPUs; bandwidths are
 * medians of five runs.
 *
 * The same WRITEs and READs of 1 MiB and 16 MiB again with both hosts'
 * buffers in memory shared with their NICs (nic_host_shm_alloc; SPI
 * programs get such buffers from nicsim_buffer_alloc), which the NICs copy
 * through their own mappings instead of process_vm_readv/writev.
 *
 * Targets, each a same-run ratio, each a failure when missed: RDMA WRITE
 * and READ of 1 MiB and 16 MiB at least 0.5x process_vm_readv's single copy
 * (a transfer is two copies), at least 1.0x UCX over TCP at 1 MiB and 1.5x
 * at 16 MiB, each on the better of ordinary and shared buffers; the 8 B SEND
 * half round trip at most UCX's, on the better of the two NIC layouts (a
 * process each, or one for both); and the 8 B message rate at least 1.5x
 * UCX's.  Beside them, each NIC's CPU time per GiB moved and the reference
 * copy's, which read the same on any machine.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fab_addr.h"
#include "mgmt_client.h"
#include "nicsim_ring.h"
#include "nstest.h"
#include "nstnic.h"
#include "nstverbs.h"

#define ADDR_A "198.18.0.1"
#define ADDR_B "198.18.0.2"
/* Two more NICs, served by one nicsimd (nicsim up --one-process). */
#define ADDR_C "198.18.0.3"
#define ADDR_D "198.18.0.4"
#define WAIT_MS 20000
#define DEPTH 16u

static char dir[256], sock_a[300], sock_b[300], sock_c[300], sock_d[300];
static pid_t nic_a = -1, nic_b = -1, nic_cd = -1;
static uint32_t addr_b, addr_d;

/* What a NIC did during one measurement: counters and CPU time. */
struct nic_sample {
	struct nic_stats st;
	double cpu_s;  /* user + system time of the daemon */
	double wait_s; /* time it was runnable but waited for a CPU (schedstat) */
};

/*
 * What /proc/PID/schedstat says of pid: time on a CPU and time runnable on
 * a run queue without one, in seconds (nanosecond resolution, where
 * /proc/PID/stat counts clock ticks).
 */
static void proc_sched(pid_t pid, double *run_s, double *wait_s)
{
	unsigned long long run = 0, wait = 0;
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
	f = fopen(path, "re");
	if (f && fscanf(f, "%llu %llu", &run, &wait) != 2)
		run = wait = 0;
	if (f)
		fclose(f);
	*run_s = (double)run / 1e9;
	*wait_s = (double)wait / 1e9;
}

static double proc_cpu_s(pid_t pid)
{
	double run, wait;

	proc_sched(pid, &run, &wait);
	return run;
}

static double proc_wait_s(pid_t pid)
{
	double run, wait;

	proc_sched(pid, &run, &wait);
	return wait;
}

static void nic_sample(const char *sock, pid_t pid, struct nic_sample *s)
{
	struct mgmt_client c = {.fd = -1};

	memset(s, 0, sizeof(*s));
	if (mgmt_client_open(&c, sock, WAIT_MS) == 0) {
		mgmt_client_stats(&c, &s->st);
		mgmt_client_close(&c);
	}
	s->cpu_s = proc_cpu_s(pid);
	s->wait_s = proc_wait_s(pid);
}

/* One line per NIC: what it did between two samples taken wall_s apart. */
static void nic_report(const char *name, const struct nic_sample *a, const struct nic_sample *b,
		       double wall_s)
{
	printf("      %s: cpu %3.0f%%, waited for a cpu %3.0f%%, tx %llu rx %llu frames, "
	       "dest_ring_full %llu, frame_pool_empty %llu, retransmits %llu, "
	       "timeouts %llu, doorbells %llu\n",
	       name, wall_s > 0 ? 100.0 * (b->cpu_s - a->cpu_s) / wall_s : 0.0,
	       wall_s > 0 ? 100.0 * (b->wait_s - a->wait_s) / wall_s : 0.0,
	       (unsigned long long)(b->st.tx_frames - a->st.tx_frames),
	       (unsigned long long)(b->st.rx_frames - a->st.rx_frames),
	       (unsigned long long)(b->st.dest_ring_full - a->st.dest_ring_full),
	       (unsigned long long)(b->st.frame_pool_empty - a->st.frame_pool_empty),
	       (unsigned long long)(b->st.retransmits - a->st.retransmits),
	       (unsigned long long)(b->st.timeouts - a->st.timeouts),
	       (unsigned long long)(b->st.doorbells - a->st.doorbells));
#define D(f) (unsigned long long)(b->st.f - a->st.f)
	if (D(tx_frames) + D(rx_frames) && D(dma_calls))
		printf("         %.2f us of CPU per frame; %.1f payloads per DMA call, %llu read "
		       "ahead unused\n",
		       (b->cpu_s - a->cpu_s) * 1e6 / (double)(D(tx_frames) + D(rx_frames)),
		       (double)D(dma_frames) / (double)D(dma_calls), D(dma_ahead_unused));
	printf("         passes %llu, sleeps %llu (aborted %llu, idle wakes %llu), woken by bell "
	       "%llu timer %llu doorbell %llu socket %llu, asleep %llu us (longest since start "
	       "%llu us)\n",
	       D(loop_polls), D(sleeps), D(sleep_aborts), D(wake_idle), D(wake_bell), D(wake_timer),
	       D(wake_doorbell), D(wake_socket), D(sleep_us),
	       (unsigned long long)b->st.sleep_max_us);
#undef D
}

/*
 * CPU seconds per GiB moved, of each NIC in the write (s[0] to s[1]) and
 * the read (s[1] to s[2]) of `bytes` each, beside the reference copy's
 * (process_vm_readv, one copy in one process): the figures that compare
 * across machines, whatever the bandwidths were.
 */
static void cpu_per_gib(const struct nic_sample sa[3], const struct nic_sample sb[3], size_t bytes,
			double ref_gib)
{
	double gib = (double)bytes / (double)(1u << 30);
	double ws = (sa[1].cpu_s - sa[0].cpu_s) / gib, wr = (sb[1].cpu_s - sb[0].cpu_s) / gib;
	double rs = (sb[2].cpu_s - sb[1].cpu_s) / gib, rr = (sa[2].cpu_s - sa[1].cpu_s) / gib;

	printf("    CPU per GiB: write sender %.3f s (%.2fx the reference), receiver %.3f s "
	       "(%.2fx); read sender %.3f s (%.2fx), receiver %.3f s (%.2fx); "
	       "process_vm_readv %.3f s\n",
	       ws, ws / ref_gib, wr, wr / ref_gib, rs, rs / ref_gib, rr, rr / ref_gib, ref_gib);
}

/* Bandwidths are the median of ROUNDS runs: this machine's speed drifts
 * by tens of percent from one 50 ms stretch to the next. */
#define ROUNDS 5

/* Iterations of a reference round of len bytes. */
static size_t ref_iters(size_t len)
{
	return len >= (4u << 20) ? 20 : len >= (256u << 10) ? 200 : 5000;
}

/* One round of memcpy (pvm false) or process_vm_readv of len bytes: GB/s. */
static double ref_round(bool pvm, uint8_t *src, uint8_t *dst, size_t len)
{
	size_t iters = ref_iters(len);
	uint64_t t0 = nst_now_ns();

	for (size_t i = 0; i < iters; i++) {
		if (pvm) {
			NST_REQUIRE_EQ(nst_pvr_self(dst, src, len), 0);
		} else {
			memcpy(dst, src, len);
			__asm__ __volatile__("" ::"r"(dst) : "memory");
		}
	}
	return (double)(len * iters) / (double)(nst_now_ns() - t0);
}

/* The reference's rate; *cpu_gib (if not NULL) gets its CPU seconds per GiB. */
static double ref_gbps(bool pvm, uint8_t *src, uint8_t *dst, size_t len, double *cpu_gib)
{
	double g[ROUNDS], c0;

	ref_round(pvm, src, dst, len); /* warm-up */
	c0 = proc_cpu_s(getpid());
	for (int k = 0; k < ROUNDS; k++)
		g[k] = ref_round(pvm, src, dst, len);
	if (cpu_gib)
		*cpu_gib = (proc_cpu_s(getpid()) - c0) /
			   ((double)(ROUNDS * ref_iters(len) * len) / (double)(1u << 30));
	return nst_median(g, ROUNDS);
}

/*
 * A work request for len bytes at buf: inline when they fit and op sends
 * them (as ib_send_lat and UCX's short messages do), else by its SGE.
 */
static struct nic_send_wqe small_wqe(uint64_t id, uint8_t op, const uint8_t *buf, uint32_t len,
				     uint32_t lk)
{
	struct nic_send_wqe w = {.wr_id = id, .opcode = op};

	if (len <= NIC_MAX_INLINE && op != NIC_WR_RDMA_READ) {
		w.flags = NIC_WR_F_INLINE;
		w.inline_len = len;
		memcpy(w.inline_data, buf, len);
	} else {
		w.num_sge = 1;
		w.sge[0] = (struct nic_sge){.va = (uintptr_t)buf, .len = len, .lkey = lk};
	}
	return w;
}

/* n requests of op (WRITE or READ) of len bytes, depth in flight: seconds. */
static double rdma_run(struct nst_qp *qp, uint8_t op, uint8_t *buf, uint32_t lk, uint8_t *rbuf,
		       uint32_t rkey, size_t len, size_t n, size_t depth)
{
	size_t posted = 0, done = 0;
	uint64_t t0 = nst_now_ns();
	struct nic_cqe c;

	while (done < n) {
		while (posted < n && posted - done < depth) {
			struct nic_send_wqe w = small_wqe(posted, op, buf, (uint32_t)len, lk);

			w.remote_va = (uintptr_t)rbuf;
			w.rkey = rkey;
			NST_REQUIRE_EQ(nst_post_send(qp, &w), 0);
			posted++;
		}
		NST_REQUIRE_EQ(nst_sleep_cq(qp, &c, WAIT_MS), 0);
		done++;
		/* Whatever else has completed, before posting again (as
		 * ib_write_bw polls its CQ in batches). */
		while (done < n && nst_take_cqe(qp, &c)) {
			NST_REQUIRE_EQ(nst_cqe_ok(&c), 0);
			done++;
		}
	}
	return (double)(nst_now_ns() - t0) / 1e9;
}

/* Requests of len bytes in one bandwidth round. */
static size_t round_reqs(size_t len)
{
	size_t total = len >= (4u << 20) ? (256u << 20) : (128u << 20);

	return total / len < 64 ? 64 : total / len;
}

/* One bandwidth round of op (WRITE or READ) for one size, DEPTH in flight. */
static double rdma_round(struct nst_qp *qp, uint8_t op, uint8_t *buf, uint32_t lk, uint8_t *rbuf,
			 uint32_t rkey, size_t len)
{
	size_t n = round_reqs(len);

	return (double)(len * n) / rdma_run(qp, op, buf, lk, rbuf, rkey, len, n, DEPTH) / 1e9;
}

/* Bandwidth of op for one size: the median of ROUNDS rounds, each kept in
 * g[0 .. ROUNDS) too. */
static double rdma_gbps(struct nst_qp *qp, uint8_t op, uint8_t *buf, uint32_t lk, uint8_t *rbuf,
			uint32_t rkey, size_t len, double g[ROUNDS])
{
	for (int k = 0; k < ROUNDS; k++)
		g[k] = rdma_round(qp, op, buf, lk, rbuf, rkey, len);
	return nst_median(g, ROUNDS);
}

/* Pairs of paired_ratio.  Its median over 9 pairs moved from 0.43 to 0.54
 * between runs of one build minutes apart.  25 pairs (about 100 ms each,
 * with the CPU probe) narrow the median's spread by 40%, the square root of
 * 25/9. */
#define PAIRS 25
#define PROBE_NS 20000000ull /* how long each prober of cpu_probe runs */

/* One prober of cpu_probe: arithmetic on one CPU for PROBE_NS. */
struct prober {
	unsigned cpu;
	int fd; /* its rate goes here, as a double */
};

/*
 * Eight chained multiply-adds, in G a second.  Unlike memcpy (whose rate
 * moved by 25% at most in the same samples), this rate falls to as little
 * as 40% when the core's other hardware thread is busy, whoever runs there.
 */
static int prober_run(void *arg)
{
	const struct prober *c = arg;
	uint64_t x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, t0, n = 0;
	double g;

	if (nst_pin(0, c->cpu))
		return 1;
	t0 = nst_now_ns();
	do {
		for (int k = 0; k < 10000; k++) {
			x[0] = x[0] * 3 + x[1];
			x[1] = x[1] * 5 + x[2];
			x[2] = x[2] * 7 + x[3];
			x[3] = x[3] * 9 + x[0];
			x[4] = x[4] * 3 + x[5];
			x[5] = x[5] * 5 + x[6];
			x[6] = x[6] * 7 + x[7];
			x[7] = x[7] * 9 + x[4];
		}
		__asm__ __volatile__("" : "+r"(x[0]), "+r"(x[4]));
		n++;
	} while (nst_now_ns() - t0 < PROBE_NS);
	g = (double)n * 8 * 10000 / (double)(nst_now_ns() - t0);
	return write(c->fd, &g, sizeof(g)) == (ssize_t)sizeof(g) ? 0 : 1;
}

/* The rates of probers on CPUs first .. first + n - 1, at once, into g[]. */
static void probers(unsigned first, unsigned n, double *g)
{
	pid_t pid[2];
	int fd[2];

	NST_REQUIRE_EQ(pipe2(fd, O_CLOEXEC), 0);
	for (unsigned k = 0; k < n; k++) {
		struct prober c = {.cpu = first + k, .fd = fd[1]};

		pid[k] = nst_fork(prober_run, &c);
		NST_REQUIRE(pid[k] > 0);
	}
	close(fd[1]);
	for (unsigned k = 0; k < n; k++)
		NST_REQUIRE_EQ(read(fd[0], &g[k], sizeof(g[k])), (ssize_t)sizeof(g[k]));
	close(fd[0]);
	for (unsigned k = 0; k < n; k++) {
		int st = nst_wait(pid[k], WAIT_MS);

		NST_TRUE(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
}

/*
 * What the machine's two CPUs can do now: the probe's rate on CPU 0 alone
 * and on CPU 1 alone, and (both) the rate of the two at once over the mean
 * of the two alone (1.0: two whole cores).  The target's premise is two
 * copies in parallel on two cores.  This guest's two CPUs are hardware
 * threads of a host shared with other work: in 50 ms samples one CPU's
 * rate alone ranged from 2.2 to 5.8 (either CPU, independently of the other),
 * and a few samples of both at once gave near 0.5 (the host ran
 * both on one core).  The pipeline of two NICs goes at the pace of the
 * slower CPU, where process_vm_readv runs on one.
 */
struct cpu_probe {
	double alone[2];
	double both;
};

static void cpu_probe(struct cpu_probe *cp)
{
	double g[2];

	probers(0, 1, &cp->alone[0]);
	probers(1, 1, &cp->alone[1]);
	probers(0, 2, g);
	cp->both =
	    cp->alone[0] + cp->alone[1] > 0 ? (g[0] + g[1]) / (cp->alone[0] + cp->alone[1]) : 0;
}

/*
 * The target's ratio, RDMA WRITE of 1 MiB over process_vm_readv of 1 MiB:
 * a round of each in turn, PAIRS times, and the median of the pairs'
 * ratios.  The two of a pair see the same machine: this guest's speed
 * drifts by tens of percent over seconds, more than the medians of rounds
 * taken a second apart can hide.  Beside each pair, cpu_probe says what the
 * machine's two CPUs could do right after it; each pair is printed.
 */
static double paired_ratio(struct nst_qp *qp, uint8_t *src, uint8_t *ref, uint32_t lk,
			   uint8_t *rbuf, uint32_t rkey, double *lo, double *hi, double w[PAIRS])
{
	const size_t len = 1u << 20;
	double r[PAIRS], one[2 * PAIRS], two[PAIRS], whole[PAIRS];
	struct cpu_probe cps[PAIRS];
	int nwhole = 0;

	printf("  1 MiB RDMA WRITE and process_vm_readv in turn (GB/s), and what each CPU did "
	       "alone right after (G multiply-adds/s) and both at once (over the two alone):\n");
	for (int k = 0; k < PAIRS; k++) {
		const struct cpu_probe *cp = &cps[k];
		double pv;

		w[k] = rdma_round(qp, NIC_WR_RDMA_WRITE, src, lk, rbuf, rkey, len);
		pv = ref_round(true, src, ref, len);
		r[k] = w[k] / pv;
		cpu_probe(&cps[k]);
		one[2 * k] = cp->alone[0];
		one[2 * k + 1] = cp->alone[1];
		two[k] = cp->both;
		printf("    pair %d: write %5.2f  process_vm_readv %5.2f  ratio %.2f  CPU 0 %.2f  "
		       "CPU 1 %.2f  both %.2f\n",
		       k + 1, w[k], pv, r[k], cp->alone[0], cp->alone[1], cp->both);
	}
	qsort(one, 2 * PAIRS, sizeof(one[0]), nst_cmp_double);
	qsort(two, PAIRS, sizeof(two[0]), nst_cmp_double);
	printf("  one CPU alone: %.2f .. %.2f G multiply-adds/s (the slowest %.0f%% of the "
	       "fastest); both at once: %.2f of the two alone (median; %.2f .. %.2f)\n",
	       one[0], one[2 * PAIRS - 1],
	       one[2 * PAIRS - 1] > 0 ? 100 * one[0] / one[2 * PAIRS - 1] : 0, two[PAIRS / 2],
	       two[0], two[PAIRS - 1]);
	/* For the reader, not the target: the pairs after which the probe saw
	 * two whole cores, each CPU alone at 90% of the run's fastest or more
	 * and the two at once at 0.9 of the two alone or more. */
	for (int k = 0; k < PAIRS; k++)
		if (cps[k].alone[0] >= 0.9 * one[2 * PAIRS - 1] &&
		    cps[k].alone[1] >= 0.9 * one[2 * PAIRS - 1] && cps[k].both >= 0.9)
			whole[nwhole++] = r[k];
	if (nwhole)
		printf("  pairs after which both CPUs were whole cores: %d, their ratios' median "
		       "%.2f\n",
		       nwhole, nst_median(whole, nwhole));
	else
		printf("  pairs after which both CPUs were whole cores: none\n");
	qsort(r, PAIRS, sizeof(r[0]), nst_cmp_double);
	*lo = r[0];
	*hi = r[PAIRS - 1];
	return r[PAIRS / 2];
}

static char ucx_path[PATH_MAX];

/* Where ucx_perftest is on PATH, or false. */
static bool ucx_find(void)
{
	const char *path = getenv("PATH");
	char dirs[4096], *save = NULL;

	if (!path || strlen(path) >= sizeof(dirs))
		return false;
	strcpy(dirs, path);
	for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		snprintf(ucx_path, sizeof(ucx_path), "%s/ucx_perftest", d);
		if (access(ucx_path, X_OK) == 0)
			return true;
	}
	return false;
}

static int ucx_server(void *arg)
{
	const char *port = arg;
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

	if (null >= 0) {
		dup2(null, 1);
		dup2(null, 2);
	}
	execl(ucx_path, ucx_path, "-p", port, (char *)NULL);
	return 127;
}

/*
 * One ucx_perftest run over TCP on this machine (server and client, both
 * started here): the "Final:" line's median latency (us, half a round trip
 * for tag_lat), overall bandwidth (GB/s; UCX prints MB/s of 2^20 bytes) and
 * overall message rate.  0, or -1 if it did not run.
 */
static int ucx_measure(const char *test, size_t size, unsigned iters, double *lat_us, double *gbps,
		       double *rate)
{
	static unsigned next_port;
	char port[16], sz[32], n[32];
	static char out[65536];
	const char *argv[] = {ucx_path, "127.0.0.1", "-p", port, "-t", test,
			      "-s",     sz,          "-n", n,    NULL};
	double p50, avg, overall, bw_avg, bw, r_avg, r;
	unsigned long it;
	const char *fin;
	pid_t srv;
	int rc = -1;

	snprintf(port, sizeof(port), "%u", 20000 + (unsigned)getpid() % 20000 + next_port++);
	snprintf(sz, sizeof(sz), "%zu", size);
	snprintf(n, sizeof(n), "%u", iters);
	srv = nst_fork(ucx_server, port);
	if (srv < 0)
		return -1;
	/* The client gives up if the server does not listen yet: try a few times. */
	for (int tries = 0; tries < 20 && rc != 0; tries++) {
		usleep(100000);
		rc = nst_run(argv, out, sizeof(out), WAIT_MS);
	}
	nst_stop(srv, WAIT_MS);
	fin = rc == 0 ? strstr(out, "Final:") : NULL;
	if (!fin || sscanf(fin, "Final: %lu %lf %lf %lf %lf %lf %lf %lf", &it, &p50, &avg, &overall,
			   &bw_avg, &bw, &r_avg, &r) != 8)
		return -1;
	*lat_us = p50;
	*gbps = bw * 1048576.0 / 1e9;
	*rate = r;
	return 0;
}

/* The peer of the ping-pong: answers every message with one of equal size. */
struct pong_arg {
	const char *sock; /* of the NIC this host attaches to */
	int cpu;          /* the CPU to run on, or -1 */
	uint16_t port;
	uint32_t len;
	uint32_t count;
};

static int pong(void *arg, int ready_fd)
{
	struct pong_arg *p = arg;
	struct nic_host *h;
	struct nst_qp qp;
	struct nic_cqe cqe;
	static uint8_t buf[8192];
	uint32_t key;

	if ((p->cpu >= 0 && nst_pin(0, (unsigned)p->cpu)) || nic_host_attach(p->sock, &h) ||
	    nst_qp_create_flags(h, 0, NIC_QP_F_RECV_INLINE, &qp))
		return 1;
	key = nst_reg(h, buf, sizeof(buf), NIC_ACCESS_LOCAL_WRITE);
	for (uint32_t i = 0; i < 64; i++) {
		struct nic_recv_wqe r = {.wr_id = i, .num_sge = 1};

		r.sge[0] = (struct nic_sge){.va = (uintptr_t)buf, .len = 4096, .lkey = key};
		if (nst_post_recv(&qp, &r))
			return 2;
	}
	if (nst_accept_one(&qp, p->port, ready_fd))
		return 3;
	for (uint32_t i = 0; i < p->count; i++) {
		struct nic_send_wqe w = small_wqe(i, NIC_WR_SEND, buf + 4096, p->len, key);
		struct nic_recv_wqe r = {.wr_id = i, .num_sge = 1};

		if (nst_spin_cq(&qp, &cqe, WAIT_MS) || cqe.opcode != NIC_WC_RECV)
			return 6;
		r.sge[0] = (struct nic_sge){.va = (uintptr_t)buf, .len = 4096, .lkey = key};
		if (nst_post_recv(&qp, &r) || nst_post_send(&qp, &w))
			return 7;
		if (nst_spin_cq(&qp, &cqe, WAIT_MS) || cqe.opcode != NIC_WC_SEND)
			return 8;
	}
	return 0;
}

/* The median half round trip of len-byte SENDs between a host of the NIC
 * at sock and a peer process on the NIC at peer_sock (address peer_addr),
 * both hosts on CPU host_cpu if it is not -1. */
static double half_rtt_us(uint32_t len, uint16_t port, const char *sock, const char *peer_sock,
			  uint32_t peer_addr, int host_cpu)
{
	enum { N = 2000 };
	struct pong_arg pa = {
	    .sock = peer_sock, .cpu = host_cpu, .port = port, .len = len, .count = N};
	cpu_set_t was;
	static double t[N];
	struct nic_host *h;
	struct nst_qp qp;
	struct nic_cqe cqe;
	static uint8_t buf[8192];
	uint32_t key;
	int st;
	pid_t peer = nst_fork_ready(pong, &pa, WAIT_MS);

	NST_REQUIRE(peer > 0);
	NST_REQUIRE_EQ(sched_getaffinity(0, sizeof(was), &was), 0);
	if (host_cpu >= 0)
		NST_REQUIRE_EQ(nst_pin(0, (unsigned)host_cpu), 0);
	NST_REQUIRE_EQ(nic_host_attach(sock, &h), 0);
	/* Small SENDs arrive beside their completions, as the provider asks. */
	NST_REQUIRE_EQ(nst_qp_create_flags(h, 0, NIC_QP_F_RECV_INLINE, &qp), 0);
	key = nst_reg(h, buf, sizeof(buf), NIC_ACCESS_LOCAL_WRITE);
	for (uint32_t i = 0; i < 64; i++) {
		struct nic_recv_wqe r = {.wr_id = i, .num_sge = 1};

		r.sge[0] = (struct nic_sge){.va = (uintptr_t)buf, .len = 4096, .lkey = key};
		NST_REQUIRE_EQ(nst_post_recv(&qp, &r), 0);
	}
	NST_REQUIRE_EQ(nst_connect(&qp, peer_addr, port), 0);
	for (uint32_t i = 0; i < N; i++) {
		struct nic_send_wqe w = small_wqe(i, NIC_WR_SEND, buf + 4096, len, key);
		struct nic_recv_wqe r = {.wr_id = i, .num_sge = 1};
		uint64_t t0 = nst_now_ns();
		bool got_send = false, got_recv = false;

		NST_REQUIRE_EQ(nst_post_send(&qp, &w), 0);
		while (!got_send || !got_recv) {
			NST_REQUIRE_EQ(nst_spin_cq(&qp, &cqe, WAIT_MS), 0);
			if (cqe.opcode == NIC_WC_RECV) {
				got_recv = true;
				t[i] = (double)(nst_now_ns() - t0) / 2000.0;
			} else {
				got_send = true;
			}
		}
		r.sge[0] = (struct nic_sge){.va = (uintptr_t)buf, .len = 4096, .lkey = key};
		NST_REQUIRE_EQ(nst_post_recv(&qp, &r), 0);
	}
	st = nst_wait(peer, WAIT_MS);
	NST_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	nic_host_detach(h);
	NST_EQ(sched_setaffinity(0, sizeof(was), &was), 0);
	qsort(t, N, sizeof(t[0]), nst_cmp_double);
	return t[N / 2];
}

/*
 * Host B, a process of its own as on a real pair of hosts (one process
 * attached to both NICs would also make both NICs' DMA contend for one
 * address space's page-table locks): it registers a buffer, exposes it on
 * its QP, passes the window's key and address up info_fd, accepts the
 * connection, and holds everything until done_fd is closed.
 */
struct target_arg {
	int info_fd, done_fd;
	int parent_fds[2]; /* the parent's ends of the two pipes */
	size_t cap;
	uint16_t port;
	bool shm; /* the buffer in memory shared with the NIC */
};

struct target_info {
	uint64_t va;
	uint32_t rkey;
};

#define TARGET_PORT 7000

static int target_host(void *arg, int ready_fd)
{
	const struct target_arg *t = arg;
	void *dst_p = MAP_FAILED;
	uint8_t *dst;
	struct target_info info;
	struct pollfd pfd = {.fd = t->done_fd, .events = POLLIN};
	struct nic_host *h;
	struct nst_qp b;
	uint32_t mr;

	/* Without the parent's write end the pipe reads as closed once the
	 * parent closes it. */
	close(t->parent_fds[0]);
	close(t->parent_fds[1]);
	if (nic_host_attach(sock_b, &h) || nst_qp_create(h, 0, &b))
		return 1;
	if (t->shm && nic_host_shm_alloc(h, t->cap, &dst_p))
		return 1;
	if (!t->shm)
		dst_p =
		    mmap(NULL, t->cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (dst_p == MAP_FAILED)
		return 1;
	dst = dst_p;
	memset(dst, 2, t->cap);
	mr = nst_reg(h, dst, t->cap, NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_MW_BIND);
	info.va = (uintptr_t)dst;
	info.rkey = mr ? nst_window(h, mr, dst, t->cap,
				    NIC_ACCESS_REMOTE_READ | NIC_ACCESS_REMOTE_WRITE, b.qpn)
		       : 0;
	if (!info.rkey || write(t->info_fd, &info, sizeof(info)) != (ssize_t)sizeof(info))
		return 2;
	if (nst_accept_one(&b, t->port, ready_fd))
		return 3;
	/* Until the measuring host is done (bounded: the whole benchmark
	 * takes well under this). */
	if (poll(&pfd, 1, 600000) != 1)
		return 4;
	nic_host_detach(h);
	return 0;
}

/*
 * Start host B (target_host) as targ says and read what it exposed into
 * *info: its pid.  *done_w gets the pipe end to close when B may go.
 */
static pid_t target_start(struct target_arg *targ, struct target_info *info, int *done_w)
{
	int info_pipe[2], done_pipe[2];
	pid_t target;

	NST_REQUIRE_EQ(pipe2(info_pipe, O_CLOEXEC), 0);
	NST_REQUIRE_EQ(pipe2(done_pipe, O_CLOEXEC), 0);
	targ->info_fd = info_pipe[1];
	targ->done_fd = done_pipe[0];
	targ->parent_fds[0] = info_pipe[0];
	targ->parent_fds[1] = done_pipe[1];
	target = nst_fork_ready(target_host, targ, WAIT_MS);
	NST_REQUIRE(target > 0);
	close(info_pipe[1]);
	close(done_pipe[0]);
	NST_REQUIRE_EQ(read(info_pipe[0], info, sizeof(*info)), (ssize_t)sizeof(*info));
	close(info_pipe[0]);
	*done_w = done_pipe[1];
	return target;
}

/* What the shared-buffer rows measured, for the table printed with UCX's. */
struct shm_row {
	size_t size;
	double w, r, pvm;
};

/*
 * RDMA WRITE and READ of 1 MiB and 16 MiB with both hosts' buffers in
 * shared memory: host A (this process) on a second QP of its context, host
 * B a process of its own, as for the plain rows.  pvm and pv_gib: the
 * process_vm_readv reference of the same sizes, of this run.
 */
static void shm_rows(struct nic_host *ha, size_t cap, const double pvm[4], const double pv_gib[4],
		     struct shm_row rows[2], double *rate)
{
	int done_w;
	struct target_arg targ = {.cap = cap, .port = TARGET_PORT + 10, .shm = true};
	struct target_info info;
	struct nst_qp a;
	void *src_p = NULL;
	uint8_t *src, *dst;
	uint32_t lk;
	double g[ROUNDS];
	pid_t target;
	int st;

	target = target_start(&targ, &info, &done_w);
	dst = (uint8_t *)(uintptr_t)info.va;
	NST_REQUIRE_EQ(nic_host_shm_alloc(ha, cap, &src_p), 0);
	src = src_p;
	memset(src, 1, cap);
	NST_REQUIRE_EQ(nst_qp_create(ha, 1, &a), 0);
	NST_REQUIRE_EQ(nst_connect(&a, addr_b, targ.port), 0);
	lk = nst_reg(ha, src, cap, NIC_ACCESS_LOCAL_WRITE);
	NST_REQUIRE(lk);
	rdma_gbps(&a, NIC_WR_RDMA_WRITE, src, lk, dst, info.rkey, 1u << 20, g); /* warm-up */
	printf("\n  RDMA bandwidth with both hosts' buffers in shared memory "
	       "(nic_host_shm_alloc; GB/s)\n");
	printf("  %9s %8s %8s %10s %10s\n", "size", "write", "read", "write/pvm", "read/pvm");
	for (size_t i = 0; i < 2; i++) {
		const size_t len = i == 0 ? 1u << 20 : 16u << 20, k = i + 2;
		struct nic_sample sa[3], sb[3];

		nic_sample(sock_a, nic_a, &sa[0]);
		nic_sample(sock_b, nic_b, &sb[0]);
		rows[i].size = len;
		rows[i].w = rdma_gbps(&a, NIC_WR_RDMA_WRITE, src, lk, dst, info.rkey, len, g);
		nic_sample(sock_a, nic_a, &sa[1]);
		nic_sample(sock_b, nic_b, &sb[1]);
		rows[i].r = rdma_gbps(&a, NIC_WR_RDMA_READ, src, lk, dst, info.rkey, len, g);
		nic_sample(sock_a, nic_a, &sa[2]);
		nic_sample(sock_b, nic_b, &sb[2]);
		rows[i].pvm = pvm[k];
		printf("  %9zu %8.2f %8.2f %10.2f %10.2f\n", len, rows[i].w, rows[i].r,
		       pvm[k] ? rows[i].w / pvm[k] : 0, pvm[k] ? rows[i].r / pvm[k] : 0);
		cpu_per_gib(sa, sb, ROUNDS * round_reqs(len) * len, pv_gib[k]);
		printf("      DMA copies through shared buffers: A %llu, B %llu; DMA calls A "
		       "%llu, B %llu\n",
		       (unsigned long long)(sa[2].st.dma_shm - sa[0].st.dma_shm),
		       (unsigned long long)(sb[2].st.dma_shm - sb[0].st.dma_shm),
		       (unsigned long long)(sa[2].st.dma_calls - sa[0].st.dma_calls),
		       (unsigned long long)(sb[2].st.dma_calls - sb[0].st.dma_calls));
		fflush(stdout);
	}
	/* The small-message rate into the shared buffer too. */
	*rate = 200000.0 / rdma_run(&a, NIC_WR_RDMA_WRITE, src, lk, dst, info.rkey, 8, 200000, 64);
	printf("  small-message rate into a shared buffer (8 B RDMA WRITE, 64 in flight): "
	       "%.0f messages/s\n",
	       *rate);
	NST_EQ(nic_host_shm_free(ha, src, cap), 0);
	close(done_w);
	st = nst_wait(target, WAIT_MS);
	NST_TRUE(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void bench_bandwidth_and_latency(void)
{
	static const size_t sizes[] = {4096, 65536, 1u << 20, 16u << 20};
	size_t cap = 16u << 20;
	int done_w;
	struct target_arg targ = {.cap = cap, .port = TARGET_PORT};
	struct target_info info;
	struct shm_row shm[2] = {{0}};
	double pv_gibs[4] = {0};
	struct nic_host *ha;
	struct nst_qp a;
	uint8_t *src, *dst, *ref;
	uint32_t lk, rkey;
	double wg[ROUNDS + PAIRS], rg[ROUNDS];
	double w1m = 0, ratio1m = 0, rlo = 0, rhi = 0, lat8, lat4k, lat8_one, lat4k_one,
	       wres[4] = {0}, rres[4] = {0}, pvm[4] = {0}, ucx_bw[4] = {0}, ul8 = 0, ur = 0, rate,
	       rate_shm = 0;
	const char *only = getenv("NICSIM_BENCH_SIZE");
	bool have_ucx = ucx_find();
	pid_t target;
	int st;

	target = target_start(&targ, &info, &done_w);
	dst = (uint8_t *)(uintptr_t)info.va; /* in host B: only the NICs touch it */
	rkey = info.rkey;
	src = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ref = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	NST_REQUIRE(src != MAP_FAILED && ref != MAP_FAILED);
	memset(src, 1, cap);
	memset(ref, 2, cap);
	NST_REQUIRE_EQ(nic_host_attach(sock_a, &ha), 0);
	NST_REQUIRE_EQ(nst_qp_create(ha, 0, &a), 0);
	NST_REQUIRE_EQ(nst_connect(&a, addr_b, TARGET_PORT), 0);
	lk = nst_reg(ha, src, cap, NIC_ACCESS_LOCAL_WRITE);
	NST_REQUIRE(lk);
	/* Warm up: the first pass over the fabric's frames faults their pages
	 * in; measure the steady state. */
	rdma_gbps(&a, NIC_WR_RDMA_WRITE, src, lk, dst, rkey, 1u << 20, rg);
	printf("\n\n  RDMA bandwidth between two NICs (GB/s, %u requests in flight)\n", DEPTH);
	printf("  %9s %8s %8s %8s %8s %10s %10s\n", "size", "write", "read", "memcpy", "pvm_rd",
	       "write/pvm", "read/pvm");
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct nic_sample sa[3], sb[3];
		uint64_t t[3];
		double w, r, mc, pv, pv_gib, hc[2], hw[2];

		/* NICSIM_BENCH_SIZE=N measures only that size (for profiling). */
		if (only && strtoull(only, NULL, 0) != sizes[i])
			continue;
		nic_sample(sock_a, nic_a, &sa[0]);
		nic_sample(sock_b, nic_b, &sb[0]);
		hc[0] = proc_cpu_s(getpid());
		hw[0] = proc_wait_s(getpid());
		t[0] = nst_now_ns();
		w = rdma_gbps(&a, NIC_WR_RDMA_WRITE, src, lk, dst, rkey, sizes[i], wg);
		t[1] = nst_now_ns();
		hc[1] = proc_cpu_s(getpid());
		hw[1] = proc_wait_s(getpid());
		nic_sample(sock_a, nic_a, &sa[1]);
		nic_sample(sock_b, nic_b, &sb[1]);
		printf("  %9zu write %.2f GB/s\n", sizes[i], w);
		nic_report("A", &sa[0], &sa[1], (double)(t[1] - t[0]) / 1e9);
		nic_report("B", &sb[0], &sb[1], (double)(t[1] - t[0]) / 1e9);
		printf("      host: cpu %3.0f%%, waited for a cpu %3.0f%%\n",
		       100.0 * (hc[1] - hc[0]) * 1e9 / (double)(t[1] - t[0]),
		       100.0 * (hw[1] - hw[0]) * 1e9 / (double)(t[1] - t[0]));
		fflush(stdout);
		r = rdma_gbps(&a, NIC_WR_RDMA_READ, src, lk, dst, rkey, sizes[i], rg);
		t[2] = nst_now_ns();
		nic_sample(sock_a, nic_a, &sa[2]);
		nic_sample(sock_b, nic_b, &sb[2]);
		mc = ref_gbps(false, src, ref, sizes[i], NULL);
		pv = ref_gbps(true, src, ref, sizes[i], &pv_gib);

		printf("  %9zu %8.2f %8.2f %8.2f %8.2f %10.2f %10.2f\n", sizes[i], w, r, mc, pv,
		       w / pv, r / pv);
		cpu_per_gib(&sa[0], &sb[0], ROUNDS * round_reqs(sizes[i]) * sizes[i], pv_gib);
		printf("    write:\n");
		nic_report("A", &sa[0], &sa[1], (double)(t[1] - t[0]) / 1e9);
		nic_report("B", &sb[0], &sb[1], (double)(t[1] - t[0]) / 1e9);
		printf("    read:\n");
		nic_report("A", &sa[1], &sa[2], (double)(t[2] - t[1]) / 1e9);
		nic_report("B", &sb[1], &sb[2], (double)(t[2] - t[1]) / 1e9);
		wres[i] = w;
		rres[i] = r;
		pvm[i] = pv;
		pv_gibs[i] = pv_gib;
		if (sizes[i] == (1u << 20)) {
			ratio1m =
			    paired_ratio(&a, src, ref, lk, dst, rkey, &rlo, &rhi, wg + ROUNDS);
			printf("  1 MiB RDMA WRITE / process_vm_readv, %d rounds of each in turn: "
			       "%.2f (median of the pairs; %.2f .. %.2f)\n",
			       PAIRS, ratio1m, rlo, rhi);
			/* For the UCX target: every 1 MiB WRITE round of the run. */
			w1m = nst_median(wg, ROUNDS + PAIRS);
			printf("  1 MiB RDMA WRITE, median of all %d rounds: %.2f GB/s\n",
			       ROUNDS + PAIRS, w1m);
		}
	}
	/* Small-message rate: 8-byte RDMA WRITEs, 64 in flight. */
	rate = 200000.0 / rdma_run(&a, NIC_WR_RDMA_WRITE, src, lk, dst, rkey, 8, 200000, 64);
	if (!only)
		shm_rows(ha, cap, pvm, pv_gibs, shm, &rate_shm);
	nic_host_detach(ha);
	close(done_w); /* host B may go */
	st = nst_wait(target, WAIT_MS);
	NST_TRUE(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* The 8 B ping-pong, first between NICs in processes of their own
	 * (A and B, one per CPU), then between two NICs that one process
	 * serves (C and D, nicsim up --one-process), which wakes no other
	 * process on the way: the latency target is judged on the better. */
	{
		struct nic_sample la[2], lb[2], lc[2];
		uint64_t t0 = nst_now_ns(), t1;

		nic_sample(sock_a, nic_a, &la[0]);
		nic_sample(sock_b, nic_b, &lb[0]);
		lat8 = half_rtt_us(8, 7001, sock_a, sock_b, addr_b, -1);
		nic_sample(sock_a, nic_a, &la[1]);
		nic_sample(sock_b, nic_b, &lb[1]);
		t1 = nst_now_ns();
		printf("\n  8 B SEND ping-pong, NICs in processes of their own:\n");
		nic_report("A", &la[0], &la[1], (double)(t1 - t0) / 1e9);
		nic_report("B", &lb[0], &lb[1], (double)(t1 - t0) / 1e9);
		nic_sample(sock_c, nic_cd, &lc[0]);
		lat8_one = half_rtt_us(8, 7003, sock_c, sock_d, addr_d, 0);
		nic_sample(sock_c, nic_cd, &lc[1]);
		printf("  8 B SEND ping-pong, NICs C and D in one process (C's counters, the "
		       "process's CPU):\n");
		nic_report("C", &lc[0], &lc[1], (double)(nst_now_ns() - t1) / 1e9);
	}
	lat4k = half_rtt_us(4096, 7002, sock_a, sock_b, addr_b, -1);
	lat4k_one = half_rtt_us(4096, 7004, sock_c, sock_d, addr_d, 0);
	printf("\n  SEND half round trip (median of 2000 ping-pongs, peer in another process)\n");
	printf("  NICs in processes of their own: 8 B %.2f us, 4 KiB %.2f us\n", lat8, lat4k);
	printf("  NICs in one process:            8 B %.2f us, 4 KiB %.2f us\n", lat8_one,
	       lat4k_one);
	printf("  small-message rate (8 B RDMA WRITE, 64 in flight): %.0f messages/s\n", rate);
	printf("\n  UCX over TCP on this machine (ucx_perftest, UCX_TLS=tcp), same sizes\n");
	if (!have_ucx)
		printf("  ucx_perftest is not installed: the UCX targets cannot be judged (the "
		       "set-up installs it, Debian package ucx-utils)\n");
	NST_TRUE(have_ucx);
	if (have_ucx) {
		static const unsigned iters[] = {100000, 20000, 2000, 200};
		double ul4k, ubw, dummy;
		int err = 0;

		setenv("UCX_TLS", "tcp", 1);
		printf("  %9s %10s %12s %12s\n", "size", "GB/s", "write/UCX", "read/UCX");
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]) && !err; i++) {
			if (!wres[i])
				continue;
			/* The median of three, as noisy as the runs above. */
			double u[3];

			for (int k = 0; k < 3 && !err; k++)
				err = ucx_measure("tag_bw", sizes[i], iters[i], &dummy, &u[k], &ur);
			ucx_bw[i] = err ? 0 : nst_median(u, 3);
			if (!err)
				printf("  %9zu %10.2f %12.2f %12.2f\n", sizes[i], ucx_bw[i],
				       wres[i] / ucx_bw[i], rres[i] / ucx_bw[i]);
		}
		for (size_t i = 0; i < 2 && !err; i++) {
			const double u = ucx_bw[i + 2];

			if (shm[i].size && u)
				printf("  %9zu shared buffers: write %.2f GB/s (%.2fx UCX, %.2fx "
				       "plain), "
				       "read %.2f GB/s (%.2fx UCX, %.2fx plain)\n",
				       shm[i].size, shm[i].w, shm[i].w / u,
				       wres[i + 2] ? shm[i].w / wres[i + 2] : 0, shm[i].r,
				       shm[i].r / u, rres[i + 2] ? shm[i].r / rres[i + 2] : 0);
		}
		if (!err)
			err = ucx_measure("tag_lat", 8, 20000, &ul8, &dummy, &ur);
		if (!err)
			err = ucx_measure("tag_lat", 4096, 20000, &ul4k, &dummy, &ur);
		if (!err)
			err = ucx_measure("tag_bw", 8, 200000, &dummy, &ubw, &ur);
		if (!err) {
			printf("  half round trip 8 B: %.2f us (nicsim/UCX %.2f, in one process "
			       "%.2f), 4 KiB: %.2f us (%.2f, %.2f)\n",
			       ul8, lat8 / ul8, lat8_one / ul8, ul4k, lat4k / ul4k,
			       lat4k_one / ul4k);
			printf("  8 B message rate: %.0f/s (nicsim/UCX %.2f)\n", ur, rate / ur);
		} else {
			printf("  ucx_perftest did not run to the end: no UCX reference\n");
			ul8 = ur = 0;
		}
		NST_EQ(err, 0);
	}
	/* The targets: each printed with its figure, each a failure if missed.
	 * A target whose reference or figure is missing is missed. */
	/* Each bandwidth target is judged on the better of ordinary memory and
	 * buffers shared with the NICs (nicsim_buffer_alloc for SPI programs),
	 * as the latency target is on the better of the two NIC layouts; both
	 * figures are printed beside it. */
	printf("\n  targets (same-run ratios; bandwidth: the better of ordinary and shared "
	       "buffers, both shown; latency: the better NIC layout)\n");
	{
		const double p1w = pvm[2] ? ratio1m : 0, s1w = pvm[2] ? shm[0].w / pvm[2] : 0;
		const double p1r = pvm[2] ? rres[2] / pvm[2] : 0,
			     s1r = pvm[2] ? shm[0].r / pvm[2] : 0;
		const double p16w = pvm[3] ? wres[3] / pvm[3] : 0,
			     s16w = pvm[3] ? shm[1].w / pvm[3] : 0;
		const double p16r = pvm[3] ? rres[3] / pvm[3] : 0,
			     s16r = pvm[3] ? shm[1].r / pvm[3] : 0;
		const double u1 = ucx_bw[2], u16 = ucx_bw[3];
		const struct {
			const char *what;
			double plain, shared; /* ordinary and shared buffers (layouts) */
			double goal;
			bool at_most;
		} tg[] = {
		    {"RDMA WRITE 1 MiB / process_vm_readv >= 0.5", p1w, s1w, 0.5, false},
		    {"RDMA READ 1 MiB / process_vm_readv >= 0.5", p1r, s1r, 0.5, false},
		    {"RDMA WRITE 16 MiB / process_vm_readv >= 0.5", p16w, s16w, 0.5, false},
		    {"RDMA READ 16 MiB / process_vm_readv >= 0.5", p16r, s16r, 0.5, false},
		    {"RDMA WRITE 1 MiB / UCX >= 1.0", u1 ? w1m / u1 : 0, u1 ? shm[0].w / u1 : 0,
		     1.0, false},
		    {"RDMA READ 1 MiB / UCX >= 1.0", u1 ? rres[2] / u1 : 0, u1 ? shm[0].r / u1 : 0,
		     1.0, false},
		    {"RDMA WRITE 16 MiB / UCX >= 1.5", u16 ? wres[3] / u16 : 0,
		     u16 ? shm[1].w / u16 : 0, 1.5, false},
		    {"RDMA READ 16 MiB / UCX >= 1.5", u16 ? rres[3] / u16 : 0,
		     u16 ? shm[1].r / u16 : 0, 1.5, false},
		    {"8 B SEND half round trip / UCX's <= 1.0", ul8 ? lat8 / ul8 : 1e9,
		     ul8 ? lat8_one / ul8 : 1e9, 1.0, true},
		    {"8 B message rate / UCX's >= 1.5", ur ? rate / ur : 0,
		     ur && rate_shm ? rate_shm / ur : 0, 1.5, false},
		};

		for (size_t i = 0; i < sizeof(tg) / sizeof(tg[0]); i++) {
			const double pl = tg[i].plain, sh = tg[i].shared;
			double v = tg[i].at_most ? (pl < sh ? pl : sh) : (pl > sh ? pl : sh);
			bool met = tg[i].at_most ? v <= tg[i].goal : v >= tg[i].goal;

			if (only && (i < 8))
				continue; /* one size measured: no bandwidth targets */
			printf("  %-46s %6.2f  (%s %.2f, %s %.2f)  %s\n", tg[i].what, v,
			       i == 8 ? "own" : "ordinary", tg[i].plain,
			       i == 8 ? "one process" : "shared", tg[i].shared,
			       met ? "MET" : "MISSED");
			NST_CHECK_(met, CU_FALSE, "target missed: %s (%.2f)", tg[i].what, v);
		}
	}
	munmap(src, cap);
	munmap(ref, cap);
}

static int init(void)
{
	const char *const addrs[] = {ADDR_A, ADDR_B, ADDR_C, ADDR_D, NULL};
	const char *const with_d[] = {"--addr", ADDR_D, NULL};

	if (nst_tmpdir(dir, sizeof(dir), "bt") < 0)
		return -1;
	snprintf(sock_a, sizeof(sock_a), "%s/nic-" ADDR_A ".sock", dir);
	snprintf(sock_b, sizeof(sock_b), "%s/nic-" ADDR_B ".sock", dir);
	snprintf(sock_c, sizeof(sock_c), "%s/nic-" ADDR_C ".sock", dir);
	snprintf(sock_d, sizeof(sock_d), "%s/nic-" ADDR_D ".sock", dir);
	fab_addr_parse(ADDR_B, &addr_b);
	fab_addr_parse(ADDR_D, &addr_d);
	if (nst_make_fabric(dir, addrs) < 0)
		return -1;
	/* NICSIM_BENCH_SPIN_US=N starts the NICs with --spin-us N. */
	const char *spin = getenv("NICSIM_BENCH_SPIN_US");
	const char *const extra[] = {"--spin-us", spin, NULL};

	nic_a = nst_start_nic(dir, ADDR_A, spin ? extra : NULL, WAIT_MS);
	nic_b = nst_start_nic(dir, ADDR_B, spin ? extra : NULL, WAIT_MS);
	nic_cd = nst_start_nic(dir, ADDR_C, with_d, WAIT_MS); /* C and D in one process */
	if (nic_a <= 0 || nic_b <= 0 || nic_cd <= 0)
		return -1;
	/* The NICs of one process on a CPU of their own (the ping-pong's two
	 * hosts run on the other), as a NIC's hardware would be. */
	if (nst_pin(nic_cd, 1))
		return -1;
	/* One core each, as the target assumes (the hosts sleep while the
	 * NICs move data); unpinned, a run now and then loses half its rate
	 * while the scheduler keeps both NICs on one core. */
	return nst_pin(nic_a, 0) || nst_pin(nic_b, 1) ? -1 : 0;
}

static int clean(void)
{
	nst_stop(nic_a, WAIT_MS);
	nst_stop(nic_b, WAIT_MS);
	nst_stop(nic_cd, WAIT_MS);
	nst_done_with_dir(dir);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"bandwidth_and_latency", bench_bandwidth_and_latency},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "bench_transport", tests, init, clean);
}

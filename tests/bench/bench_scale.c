/*
 * Scale: many NICs on one fabric, and many connections on one NIC.
 *
 * nics: `nicsim up --hosts N` for N = 16, 64 and 256, as a user starts
 * them, each N in a run directory of its own.  For each N: the start time
 * (until `nicsim up` returns, every NIC having answered a management
 * request), then every port open on the fabric and one management round
 * to every NIC (the NICs are reachable); each NIC's resident memory (VmRSS,
 * and Rss and Pss of /proc/PID/smaps_rollup: Pss shares the fabric's pages
 * out among the processes that map them); the CPU all of them use while
 * idle over 10 s (utime + stime of /proc/PID/stat, and the nanoseconds of
 * /proc/PID/schedstat); and the fabric's file.  Same-run reference: N
 * starts of `nicsimd --version` one after the other (fork, exec, dynamic
 * linking, exit), the least a process per NIC costs.  Growth: each per-NIC
 * figure at N beside the one at 16.
 *
 * qps: two NICs, A and B, and 64, 256 and 1024 connections (QPs) from A
 * to B, through the host interface (nstverbs.h): a context holds
 * NIC_QP_SLOTS QPs, so every 32 connections take one more context on each
 * NIC.  For each count: the NICs' resident memory per QP (grown from their
 * state before the first context), this host's per connection (both ends
 * live in this process), the time to connect; then the bandwidth of RDMA
 * WRITEs of 64 KiB with every connection transferring at once, beside the
 * bandwidth of one connection alone measured just before (the reference,
 * same NICs, same depth per QP), and what the NICs counted meanwhile.
 * Every write's data is checked at the end.
 *
 * Targets, each a failure when missed: every NIC starts, is open on the
 * fabric and answers; the NICs idle use at most 1% of one CPU together;
 * each NIC's Pss at 256 at most 2x its Pss at 16; every connection is
 * made and every write completes intact, and 1024 connections move at
 * least half of what one moves.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fab.h"
#include "fab_addr.h"
#include "mgmt_client.h"
#include "nicsim_host.h"
#include "nicsim_mgmt.h"
#include "nstest.h"
#include "nstnic.h"
#include "nstverbs.h"
#include "qp.h"

#define WAIT_MS 20000
#define UP_MS 300000 /* `nicsim up` of 256 NICs on a busy machine */
#define IDLE_MS 10000
#define MAX_NICS 256u

/* ---- Processes ---------------------------------------------------------- */

/* utime + stime of pid in clock ticks (/proc/PID/stat), or -1. */
static long long proc_ticks(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* Fields after the command, which may hold spaces and parentheses. */
	p = strrchr(buf, ')');
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (long long)(ut + st);
}

/* Nanoseconds pid ran on a CPU (/proc/PID/schedstat), or -1. */
static long long proc_run_ns(pid_t pid)
{
	char path[64];
	long long run = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &run) != 1)
		run = -1;
	fclose(f);
	return run;
}

/* Rss and Pss of pid in KiB (/proc/PID/smaps_rollup): 0 or -1. */
static int proc_rss_pss(pid_t pid, long *rss, long *pss)
{
	char path[64], line[256];
	FILE *f;

	*rss = *pss = -1;
	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", pid ? (int)pid : (int)getpid());
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "Rss:", 4))
			*rss = strtol(line + 4, NULL, 10);
		else if (!strncmp(line, "Pss:", 4))
			*pss = strtol(line + 4, NULL, 10);
	}
	fclose(f);
	return *rss >= 0 && *pss >= 0 ? 0 : -1;
}

/* ---- nics --------------------------------------------------------------- */

struct nics_row {
	unsigned n;
	double up_s, reach_s, ref_s, down_s;
	double vmrss_kib, rss_kib, pss_kib, rss_max_kib, pss_max_kib;
	double idle_ticks, idle_ms;               /* all NICs together, over IDLE_MS */
	unsigned long long wakes, sleeps;         /* all NICs together, over IDLE_MS */
	double fab_mib, fab_alloc_mib, fab_hz_ms; /* the fabric file; ticks per second */
};

/* Start n `nicsimd --version` one after the other: seconds. */
static double ref_starts(unsigned n)
{
	const char *const argv[] = {nst_bin("nicsimd"), "--version", NULL};
	char out[256];
	uint64_t t0 = nst_now_ns();

	for (unsigned i = 0; i < n; i++)
		NST_REQUIRE_EQ(nst_run(argv, out, sizeof(out), WAIT_MS), 0);
	return (double)(nst_now_ns() - t0) / 1e9;
}

/* The pids `nicsim up` printed ("nic ADDR pid P sock S"), in order: how many. */
static unsigned up_pids(const char *out, pid_t *pids, char (*socks)[300], unsigned max)
{
	const char *p = out;
	unsigned n = 0;

	while ((p = strstr(p, "nic ")) && n < max) {
		char addr[32], sock[300];
		int pid;

		if ((p == out || p[-1] == '\n') &&
		    sscanf(p, "nic %31s pid %d sock %299s", addr, &pid, sock) == 3) {
			pids[n] = pid;
			snprintf(socks[n], sizeof(socks[n]), "%s", sock);
			n++;
		}
		p += 4;
	}
	return n;
}

static void nics_at(unsigned n, struct nics_row *r)
{
	static pid_t pids[MAX_NICS];
	static char socks[MAX_NICS][300];
	static char out[1 << 16];
	char dir[256], hosts[16], *run;
	struct fab_port_info *ports = NULL;
	long long t0[MAX_NICS], ns0[MAX_NICS];
	struct nic_stats st0[MAX_NICS], st;
	struct fab *fab = NULL;
	struct stat sb;
	size_t nports = 0, open = 0;
	uint64_t t;
	unsigned got;
	int rc;

	memset(r, 0, sizeof(*r));
	r->n = n;
	r->ref_s = ref_starts(n);
	NST_REQUIRE_EQ(nst_tmpdir(dir, sizeof(dir), "scale"), 0);
	run = dir;
	snprintf(hosts, sizeof(hosts), "%u", n);
	{
		const char *const argv[] = {
		    nst_bin("nicsim"), "up",     "--dir", run, "--hosts", hosts,
		    "--timeout-ms",    "120000", NULL};

		t = nst_now_ns();
		rc = nst_run(argv, out, sizeof(out), UP_MS);
		r->up_s = (double)(nst_now_ns() - t) / 1e9;
	}
	got = up_pids(out, pids, socks, MAX_NICS);
	if (rc != 0 || got != n)
		printf("\n  nicsim up --hosts %u: exit %d, %u NICs\n%s\n", n, rc, got, out);
	NST_REQUIRE_EQ(rc, 0);
	NST_REQUIRE_EQ(got, n);

	/* Reachable: every port open on the fabric, owned by its NIC, and
	 * every NIC answering its management socket. */
	t = nst_now_ns();
	NST_REQUIRE_EQ(fab_open(run, &fab), 0);
	NST_REQUIRE_EQ(fab_port_list(fab, &ports, &nports), 0);
	for (size_t i = 0; i < nports; i++)
		open += ports[i].open && ports[i].live;
	free(ports);
	fab_close(fab);
	NST_EQ(nports, n);
	NST_EQ(open, n);
	for (unsigned i = 0; i < n; i++)
		NST_REQUIRE_EQ(nst_nic_stats(socks[i], &st0[i]), 0);
	r->reach_s = (double)(nst_now_ns() - t) / 1e9;

	/* Idle: ten seconds in which nobody asks anything of them. */
	for (unsigned i = 0; i < n; i++) {
		t0[i] = proc_ticks(pids[i]);
		ns0[i] = proc_run_ns(pids[i]);
		NST_REQUIRE(t0[i] >= 0 && ns0[i] >= 0);
	}
	nst_sleep_ms(IDLE_MS); /* the idle period is what is measured */
	for (unsigned i = 0; i < n; i++) {
		long long t1 = proc_ticks(pids[i]), ns1 = proc_run_ns(pids[i]);
		long vm = nst_proc_status_kib(pids[i], "VmRSS"), rss, pss;

		NST_REQUIRE(t1 >= 0 && ns1 >= 0 && vm > 0);
		NST_REQUIRE_EQ(proc_rss_pss(pids[i], &rss, &pss), 0);
		r->idle_ticks += (double)(t1 - t0[i]);
		r->idle_ms += (double)(ns1 - ns0[i]) / 1e6;
		r->vmrss_kib += (double)vm / n;
		r->rss_kib += (double)rss / n;
		r->pss_kib += (double)pss / n;
		if (rss > r->rss_max_kib)
			r->rss_max_kib = (double)rss;
		if (pss > r->pss_max_kib)
			r->pss_max_kib = (double)pss;
	}
	/* What the NICs' loops did meanwhile (this asks each once more). */
	for (unsigned i = 0; i < n; i++) {
		NST_REQUIRE_EQ(nst_nic_stats(socks[i], &st), 0);
		r->sleeps += st.sleeps - st0[i].sleeps;
		r->wakes += (st.wake_timer - st0[i].wake_timer) +
			    (st.wake_bell - st0[i].wake_bell) +
			    (st.wake_doorbell - st0[i].wake_doorbell);
	}
	{
		char path[512];

		snprintf(path, sizeof(path), "%s/fabric.shm", run);
		NST_REQUIRE_EQ(stat(path, &sb), 0);
		r->fab_mib = (double)sb.st_size / (1 << 20);
		r->fab_alloc_mib = (double)sb.st_blocks * 512 / (1 << 20);
	}
	r->fab_hz_ms = 1000.0 / (double)sysconf(_SC_CLK_TCK);

	{
		const char *const argv[] = {nst_bin("nicsim"), "down", "--dir", run, NULL};

		t = nst_now_ns();
		rc = nst_run(argv, out, sizeof(out), UP_MS);
		r->down_s = (double)(nst_now_ns() - t) / 1e9;
	}
	NST_EQ(rc, 0);
	/* Whatever `nicsim down` left (nothing, if it worked). */
	for (unsigned i = 0; i < n; i++)
		if (nst_pid_alive(pids[i]))
			printf("  NIC pid %d still there after nicsim down\n", (int)pids[i]);
	nst_kill_nicsimds(pids, n, WAIT_MS, "bench_scale");
	nst_done_with_dir(dir);
}

static void bench_nics(void)
{
	static const unsigned ns[] = {16, 64, 256};
	struct nics_row rows[3];
	const size_t k = sizeof(ns) / sizeof(ns[0]);

	printf("\n\n  NICs on one fabric (nicsim up --hosts N; per-NIC figures are means)\n");
	for (size_t i = 0; i < k; i++)
		nics_at(ns[i], &rows[i]);
	printf("  %4s %8s %9s %9s %8s %9s %8s | %8s %8s %7s %8s %8s | %9s %9s %7s | %8s %8s\n", "N",
	       "up s", "per NIC", "ref/NIC", "up/ref", "reach ms", "down s", "VmRSS", "Rss", "Pss",
	       "Rss max", "Pss max", "idle ms", "ticks", "wakes", "fab MiB", "alloc");
	for (size_t i = 0; i < k; i++) {
		const struct nics_row *r = &rows[i];

		printf(
		    "  %4u %8.3f %7.2fms %7.2fms %7.2fx %9.1f %8.3f | %6.0fKiB %6.0fKiB %5.0fKiB "
		    "%6.0fKiB %6.0fKiB | %9.1f %9.0f %7llu | %8.1f %8.1f\n",
		    r->n, r->up_s, r->up_s * 1e3 / r->n, r->ref_s * 1e3 / r->n, r->up_s / r->ref_s,
		    r->reach_s * 1e3, r->down_s, r->vmrss_kib, r->rss_kib, r->pss_kib,
		    r->rss_max_kib, r->pss_max_kib, r->idle_ms, r->idle_ticks, r->wakes, r->fab_mib,
		    r->fab_alloc_mib);
	}
	printf("  (idle: CPU of all N NICs together over %d s, schedstat ms and stat ticks of "
	       "%.0f ms; wakes: sleeps ended by timer, bell or doorbell)\n",
	       IDLE_MS / 1000, rows[0].fab_hz_ms);
	printf("  growth per NIC from N = %u: ", ns[0]);
	for (size_t i = 1; i < k; i++)
		printf("%s%u: start %.2fx, Rss %.2fx, Pss %.2fx, idle CPU %.2f ms vs %.2f ms",
		       i > 1 ? "; " : "", ns[i], (rows[i].up_s / ns[i]) / (rows[0].up_s / ns[0]),
		       rows[i].rss_kib / rows[0].rss_kib, rows[i].pss_kib / rows[0].pss_kib,
		       rows[i].idle_ms / ns[i], rows[0].idle_ms / ns[0]);
	printf("\n");
	for (size_t i = 0; i < k; i++)
		NST_TRUE(rows[i].idle_ms <= 0.01 * IDLE_MS); /* 1% of one CPU */
	NST_TRUE(rows[k - 1].pss_kib <= 2.0 * rows[0].pss_kib);
}

/* ---- qps ---------------------------------------------------------------- */

#define ADDR_A "198.18.0.1"
#define ADDR_B "198.18.0.2"
#define MAX_CONNS 1024u
#define CTXS (MAX_CONNS / NIC_QP_SLOTS)
#define MSG (64u << 10)
#define QP_DEPTH 4u        /* writes in flight per connection */
#define ROUND (256u << 20) /* bytes of one bandwidth round */
#define ROUNDS 3
#define PORT0 6000

static char qdir[256], sock_a[300], sock_b[300];
static pid_t nic_a = -1, nic_b = -1;

struct conn {
	struct nst_qp a, b;
	size_t posted, done, want;
};

static struct nic_host *ha[CTXS], *hb[CTXS];
static uint32_t lk_a[CTXS], rk_b[CTXS];
static struct conn conns[MAX_CONNS];
static uint8_t *src, *dst;

static int any_pending(void *arg)
{
	return nic_host_pending(arg, ~0u);
}

/*
 * n connections from 0 on, each writing `each` messages of MSG bytes from
 * src to its own MSG bytes of dst, QP_DEPTH in flight, all at once:
 * seconds.  Passes over the CQs; one that finds nothing sleeps on the
 * interrupt of a context with writes in flight (bounded; another context's
 * completion is seen at the next pass).
 */
static size_t failed_conns;    /* connections whose write failed, in the last round */
static double first_failure_s; /* when the first one failed, from the round's start */

static double write_all(size_t first, size_t n, size_t each)
{
	uint64_t t0 = nst_now_ns(), deadline = t0 + (uint64_t)UP_MS * 1000000u;
	size_t left = n;
	struct nic_cqe c;

	failed_conns = 0;

	for (size_t i = first; i < first + n; i++) {
		conns[i].posted = conns[i].done = 0;
		conns[i].want = each;
	}
	while (left) {
		size_t idle_ctx = SIZE_MAX;
		bool got = false;

		for (size_t i = first; i < first + n; i++) {
			struct conn *k = &conns[i];

			while (k->done < k->want && nst_take_cqe(&k->a, &c)) {
				got = true;
				if (c.status != NIC_WC_SUCCESS) {
					/* The QP is in error: its other writes complete
					 * flushed; it is done. */
					if (!failed_conns++)
						first_failure_s = (double)(nst_now_ns() - t0) / 1e9;
					nst_cqe_ok(&c);
					k->posted = k->done = k->want;
					left--;
					break;
				}
				if (++k->done == k->want)
					left--;
			}
			while (k->posted < k->want && k->posted - k->done < QP_DEPTH) {
				struct nic_send_wqe w = {
				    .wr_id = k->posted, .opcode = NIC_WR_RDMA_WRITE, .num_sge = 1};

				w.sge[0] = (struct nic_sge){.va = (uintptr_t)src,
							    .len = MSG,
							    .lkey = lk_a[i / NIC_QP_SLOTS]};
				w.remote_va = (uintptr_t)(dst + i * MSG);
				w.rkey = rk_b[i / NIC_QP_SLOTS];
				NST_REQUIRE_EQ(nst_post_send(&k->a, &w), 0);
				k->posted++;
			}
			if (k->done < k->want)
				idle_ctx = i / NIC_QP_SLOTS;
		}
		if (!got && left) {
			uint64_t now = nst_now_ns();

			NST_REQUIRE(now < deadline);
			nic_host_await(ha[idle_ctx], any_pending, ha[idle_ctx], now + 2000000u,
				       20000);
		}
	}
	return failed_conns ? -1 : (double)(nst_now_ns() - t0) / 1e9;
}

/* Bandwidth of n connections at once, GB/s: the median of ROUNDS; -1 when
 * a connection failed (failed_conns says how many). */
static double write_gbps(size_t first, size_t n)
{
	size_t each = ROUND / MSG / n < 2 * QP_DEPTH ? 2 * QP_DEPTH : ROUND / MSG / n;
	double g[ROUNDS];

	for (int k = 0; k < ROUNDS; k++) {
		double s = write_all(first, n, each);

		if (s < 0)
			return -1;
		g[k] = (double)(n * each * MSG) / s / 1e9;
	}
	return nst_median(g, ROUNDS);
}

/* Context k on both NICs, with its registrations and B's listener. */
static void ctx_open(size_t k)
{
	struct nic_cmd c = {.opcode = NIC_CMD_LISTEN};

	NST_REQUIRE_EQ(nic_host_attach(sock_a, &ha[k]), 0);
	NST_REQUIRE_EQ(nic_host_attach(sock_b, &hb[k]), 0);
	lk_a[k] = nst_reg(ha[k], src, MSG, NIC_ACCESS_LOCAL_WRITE);
	rk_b[k] = nst_reg(hb[k], dst + k * NIC_QP_SLOTS * MSG, (uint64_t)NIC_QP_SLOTS * MSG,
			  NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_REMOTE_WRITE);
	NST_REQUIRE(lk_a[k] && rk_b[k]);
	c.u.listen.port = (uint16_t)(PORT0 + k);
	c.u.listen.backlog = 4;
	NST_REQUIRE_EQ(nst_cmd(hb[k], &c, NULL), 0);
}

/* Connection i: a QP in slot i % 32 of context i / 32 on each NIC. */
static void conn_open(size_t i, uint32_t addr_b)
{
	size_t k = i / NIC_QP_SLOTS;
	uint32_t slot = (uint32_t)(i % NIC_QP_SLOTS);
	struct conn *x = &conns[i];
	struct nic_cmd c = {.opcode = NIC_CMD_CONNECT};
	struct nic_event ev;

	if (slot == 0)
		ctx_open(k);
	NST_REQUIRE_EQ(nst_qp_create(ha[k], slot, &x->a), 0);
	NST_REQUIRE_EQ(nst_qp_create(hb[k], slot, &x->b), 0);
	c.u.conn.qpn = x->a.qpn;
	c.u.conn.dst_addr = addr_b;
	c.u.conn.dst_port = (uint16_t)(PORT0 + k);
	NST_REQUIRE_EQ(nst_cmd(ha[k], &c, NULL), 0);
	NST_REQUIRE_EQ(nst_next_event(hb[k], &ev, WAIT_MS), 0);
	NST_REQUIRE_EQ(ev.type, NIC_EV_CONN_REQUEST);
	c = (struct nic_cmd){.opcode = NIC_CMD_ACCEPT};
	c.u.conn.qpn = x->b.qpn;
	c.u.conn.conn_id = ev.conn_id;
	NST_REQUIRE_EQ(nst_cmd(hb[k], &c, NULL), 0);
	NST_REQUIRE_EQ(nst_next_event(hb[k], &ev, WAIT_MS), 0);
	NST_REQUIRE(ev.type == NIC_EV_CONNECTED && ev.qpn == x->b.qpn);
	NST_REQUIRE_EQ(nst_next_event(ha[k], &ev, WAIT_MS), 0);
	NST_REQUIRE(ev.type == NIC_EV_CONNECTED && ev.qpn == x->a.qpn);
}

struct mem {
	long a_rss, a_pss, b_rss, b_pss, h_rss, h_pss;
};

static void mem_now(struct mem *m)
{
	NST_REQUIRE_EQ(proc_rss_pss(nic_a, &m->a_rss, &m->a_pss), 0);
	NST_REQUIRE_EQ(proc_rss_pss(nic_b, &m->b_rss, &m->b_pss), 0);
	NST_REQUIRE_EQ(proc_rss_pss(0, &m->h_rss, &m->h_pss), 0);
}

static double per(long now, long base, size_t n)
{
	return (double)(now - base) * 1024.0 / (double)n;
}

static void bench_qps(void)
{
	static const size_t counts[] = {64, 256, 1024};
	const size_t k = sizeof(counts) / sizeof(counts[0]);
	struct nic_stats sa0, sa1, sb0, sb1;
	double all[3], one[3], conn_ms[3], cpu_a[3], cpu_b[3];
	struct mem base, m[3];
	size_t made = 0, reached = 0;
	uint32_t addr_b;

	NST_REQUIRE_EQ(fab_addr_parse(ADDR_B, &addr_b), 0);
	src = mmap(NULL, MSG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	dst = mmap(NULL, (size_t)MAX_CONNS * MSG, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	NST_REQUIRE(src != MAP_FAILED && dst != MAP_FAILED);
	nst_fill(src, MSG, 7);
	memset(dst, 0, (size_t)MAX_CONNS * MSG);
	mem_now(&base);

	printf("\n\n  connections from NIC A to NIC B (QPs through the host interface; %u QPs a "
	       "context)\n",
	       NIC_QP_SLOTS);
	printf("  sizes from the code: context segment %u KiB (QP slot %zu B: SQ %u x %zu B, "
	       "RQ %u x %zu B, CQ %u x %zu B + %u B inline each), struct qp %zu B in the NIC\n",
	       (unsigned)(NIC_CTX_SEG_SIZE >> 10), (size_t)NIC_QP_SLOT_SIZE, NIC_SQ_DEPTH,
	       sizeof(struct nic_send_wqe), NIC_RQ_DEPTH, sizeof(struct nic_recv_wqe), NIC_CQ_DEPTH,
	       sizeof(struct nic_cqe), NIC_RECV_INLINE_MAX, sizeof(struct qp));
	for (size_t j = 0; j < k; j++) {
		uint64_t t = nst_now_ns();
		double cpu0a, cpu0b, s;

		for (; made < counts[j]; made++)
			conn_open(made, addr_b);
		conn_ms[j] = (double)(nst_now_ns() - t) / 1e6;
		mem_now(&m[j]);
		/* The reference: the last connection alone, then all of them. */
		one[j] = write_gbps(made - 1, 1);
		NST_REQUIRE(one[j] > 0);
		NST_REQUIRE_EQ(nst_nic_stats(sock_a, &sa0), 0);
		NST_REQUIRE_EQ(nst_nic_stats(sock_b, &sb0), 0);
		cpu0a = (double)proc_run_ns(nic_a);
		cpu0b = (double)proc_run_ns(nic_b);
		t = nst_now_ns();
		all[j] = write_gbps(0, made);
		s = (double)(nst_now_ns() - t) / 1e9;
		cpu_a[j] = ((double)proc_run_ns(nic_a) - cpu0a) / 1e9 / s;
		cpu_b[j] = ((double)proc_run_ns(nic_b) - cpu0b) / 1e9 / s;
		NST_REQUIRE_EQ(nst_nic_stats(sock_a, &sa1), 0);
		NST_REQUIRE_EQ(nst_nic_stats(sock_b, &sb1), 0);
		if (all[j] < 0)
			printf("  %4zu connections: all at once FAILED: %zu of them failed, the "
			       "first after %.1f s\n",
			       made, failed_conns, first_failure_s);
		printf("  %4zu connections: made in %.0f ms (%.2f ms each); RDMA WRITE %u KiB, %u "
		       "in flight each: all at once %.2f GB/s, one alone %.2f GB/s, ratio %.2fx; "
		       "NIC CPU A %.0f%% B %.0f%%; A: tx %llu frames, frame_pool_empty %llu, "
		       "dest_ring_full %llu, retransmits %llu, timeouts %llu; B: rx %llu, "
		       "frame_pool_empty %llu\n",
		       made, conn_ms[j], conn_ms[j] / (double)(counts[j] - (j ? counts[j - 1] : 0)),
		       MSG >> 10, QP_DEPTH, all[j], one[j], all[j] / one[j], 100 * cpu_a[j],
		       100 * cpu_b[j], (unsigned long long)(sa1.tx_frames - sa0.tx_frames),
		       (unsigned long long)(sa1.frame_pool_empty - sa0.frame_pool_empty),
		       (unsigned long long)(sa1.dest_ring_full - sa0.dest_ring_full),
		       (unsigned long long)(sa1.retransmits - sa0.retransmits),
		       (unsigned long long)(sa1.timeouts - sa0.timeouts),
		       (unsigned long long)(sb1.rx_frames - sb0.rx_frames),
		       (unsigned long long)(sb1.frame_pool_empty - sb0.frame_pool_empty));
		reached = j + 1;
		if (all[j] < 0) {
			/* Those QPs are in error now: no larger count can follow. */
			NST_CHECK_(
			    false, CU_FALSE,
			    "%zu connections at once: %zu of them failed (first after %.1f s)",
			    made, failed_conns, first_failure_s);
			break;
		}
	}
	printf("  %6s | %12s %12s %12s %12s | %14s %14s | %9s %9s %6s\n", "conns", "A Rss/QP",
	       "A Pss/QP", "B Rss/QP", "B Pss/QP", "host Rss/conn", "host Pss/conn", "all GB/s",
	       "one GB/s", "ratio");
	for (size_t j = 0; j < reached; j++)
		printf(
		    "  %6zu | %10.0f B %10.0f B %10.0f B %10.0f B | %12.0f B %12.0f B | %9.2f "
		    "%9.2f %5.2fx\n",
		    counts[j], per(m[j].a_rss, base.a_rss, counts[j]),
		    per(m[j].a_pss, base.a_pss, counts[j]), per(m[j].b_rss, base.b_rss, counts[j]),
		    per(m[j].b_pss, base.b_pss, counts[j]), per(m[j].h_rss, base.h_rss, counts[j]),
		    per(m[j].h_pss, base.h_pss, counts[j]), all[j], one[j], all[j] / one[j]);
	printf("  (per QP: grown since before the first context, the contexts' share included; "
	       "the host holds both ends and its buffers were touched before; NIC base: A Rss "
	       "%ld KiB Pss %ld KiB)\n",
	       base.a_rss, base.a_pss);
	/* Every connection's last write landed: its MSG bytes of dst are src
	 * (after a failed round, only the rounds before it are known good). */
	for (size_t i = 0; i < (reached == k && all[k - 1] > 0 ? made : counts[0]); i++)
		if (memcmp(dst + i * MSG, src, MSG))
			NST_CHECK_(false, CU_FALSE, "connection %zu: its written data differs", i);
	NST_TRUE(reached == k && all[k - 1] >= 0.5 * one[k - 1]);
}

static int init(void)
{
	const char *const addrs[] = {ADDR_A, ADDR_B, NULL};

	if (nst_tmpdir(qdir, sizeof(qdir), "scaleqp") < 0 || nst_make_fabric(qdir, addrs) < 0)
		return -1;
	snprintf(sock_a, sizeof(sock_a), "%s/nic-" ADDR_A ".sock", qdir);
	snprintf(sock_b, sizeof(sock_b), "%s/nic-" ADDR_B ".sock", qdir);
	nic_a = nst_start_nic(qdir, ADDR_A, NULL, WAIT_MS);
	nic_b = nst_start_nic(qdir, ADDR_B, NULL, WAIT_MS);
	return nic_a > 0 && nic_b > 0 ? 0 : -1;
}

static int clean(void)
{
	for (size_t k = 0; k < CTXS; k++) {
		if (ha[k])
			nic_host_detach(ha[k]);
		if (hb[k])
			nic_host_detach(hb[k]);
	}
	const pid_t pids[] = {nic_a, nic_b};

	return nst_stop_nics_clean(qdir, pids, 2, WAIT_MS);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"nics_on_one_fabric", bench_nics},
	    {"connections_on_one_nic", bench_qps},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "bench_scale", tests, init, clean);
}

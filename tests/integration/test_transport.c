/*
 * Connections and data between real NICs over a real fabric, driven with raw
 * work requests (no provider checks in the way): data integrity for SEND,
 * RDMA WRITE and RDMA READ from 1 byte to 64 MiB at odd offsets, between two
 * NICs and between two processes on one NIC; the protection rules (R3-R6)
 * enforced by the NIC against forged, stale, wrong-connection, out-of-bounds
 * and wrong-access keys with the target memory unchanged; RC over a lossy
 * link; the retry limit on a link that is down; a peer that dies.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fab.h"
#include "fab_addr.h"
#include "nstest.h"
#include "nstnic.h"
#include "nstverbs.h"
#include "nicsim_mgmt.h"
#include "nicsim_ring.h"

#define ADDR_A "198.18.0.1"
#define ADDR_B "198.18.0.2"
#define ADDR_C "198.18.0.3" /* C and D: one nicsimd serves both */
#define ADDR_D "198.18.0.4"
#define WAIT_MS 10000

static char dir[256], sock_a[300], sock_b[300], sock_c[300], sock_d[300];
static const char *nic_args[] = {"--log-level", "info", NULL};
static struct nst_nic nics[] = {{.addr = ADDR_A, .extra = nic_args},
				{.addr = ADDR_B, .extra = nic_args}};
#define NNICS (sizeof(nics) / sizeof(nics[0]))
#define nic_a (nics[0].pid)
#define nic_b (nics[1].pid)
static uint32_t addr_a, addr_b;
static uint16_t next_port = 1000;

static uint8_t *map(size_t n)
{
	uint8_t *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	NST_REQUIRE(p != MAP_FAILED);
	return p;
}

/* When a wait fails: both NICs' counters, for the log. */
static void dump_stats(void)
{
	const char *argv[] = {nst_bin("nicsim"), "--dir", dir, "stats", NULL};
	static char out[65536];

	nst_run(argv, out, sizeof(out), WAIT_MS);
	fprintf(stderr, "\n%s\n", out);
}

static int poll_cq(struct nst_qp *qp, struct nic_cqe *c, int ms)
{
	int err = nst_poll_cq(qp, c, ms);

	if (err)
		dump_stats();
	return err;
}

/* The next completion of qp, checked for its work request and status. */
static struct nic_cqe expect_cqe(struct nst_qp *qp, uint64_t wr_id, uint16_t status)
{
	struct nic_cqe c = {0};

	NST_REQUIRE_EQ(poll_cq(qp, &c, WAIT_MS), 0);
	NST_EQ_U(c.wr_id, wr_id);
	NST_EQ(c.status, status);
	return c;
}

/* A counter of the NIC at addr from `nicsim stats`, or -1 if it cannot be read. */
static long nic_counter(const char *addr, const char *name)
{
	const char *argv[] = {nst_bin("nicsim"), "--dir", dir, "--nic", addr, "stats", NULL};
	static char out[65536];
	const char *r;

	if (nst_run(argv, out, sizeof(out), WAIT_MS) != 0)
		return -1;
	r = strstr(out, name);
	return r ? atol(r + strlen(name)) : -1;
}

/* Two hosts, one per NIC (or both on NIC A), each with a connected QP. */
struct pair {
	struct nic_host *ha, *hb;
	struct nst_qp a, b;
};

/* B's QP created with b_flags (NIC_QP_F_*). */
static void pair_open_flags(struct pair *p, const char *sock_of_a, const char *sock_of_b,
			    uint32_t b_addr, uint32_t b_flags)
{
	NST_REQUIRE_EQ(nic_host_attach(sock_of_a, &p->ha), 0);
	NST_REQUIRE_EQ(nic_host_attach(sock_of_b, &p->hb), 0);
	NST_REQUIRE_EQ(nst_qp_create(p->ha, 0, &p->a), 0);
	NST_REQUIRE_EQ(nst_qp_create_flags(p->hb, 0, b_flags, &p->b), 0);
	NST_REQUIRE_EQ(nst_connect_pair(&p->a, &p->b, b_addr, next_port++), 0);
}

static void pair_open_at(struct pair *p, const char *sock_of_a, const char *sock_of_b,
			 uint32_t b_addr)
{
	pair_open_flags(p, sock_of_a, sock_of_b, b_addr, 0);
}

static void pair_open(struct pair *p, const char *sock_of_b, uint32_t b_addr)
{
	pair_open_at(p, sock_a, sock_of_b, b_addr);
}

/* A to B, with small receives beside their completions at B. */
static void pair_open_recv_inline(struct pair *p)
{
	pair_open_flags(p, sock_a, sock_b, addr_b, NIC_QP_F_RECV_INLINE);
}

static void pair_close(struct pair *p)
{
	nic_host_detach(p->ha);
	nic_host_detach(p->hb);
}

static struct nic_recv_wqe rwqe(uint64_t id, void *buf, uint32_t len, uint32_t lkey)
{
	struct nic_recv_wqe w = {.wr_id = id, .num_sge = 1};

	w.sge[0] = (struct nic_sge){.va = (uintptr_t)buf, .len = len, .lkey = lkey};
	return w;
}

/* buf (n bytes in host B) registered, and a window of it with access bound
 * to B's QP: the window's rkey (0 on failure); *mr gets the region's key. */
static uint32_t expose(struct pair *p, void *buf, size_t n, uint32_t access, uint32_t *mr)
{
	*mr = nst_reg(p->hb, buf, n, NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_MW_BIND);
	return *mr ? nst_window(p->hb, *mr, buf, n, access, p->b.qpn) : 0;
}

/* SEND, WRITE and READ of each size at an odd offset, checksummed, from
 * src (in host A) to dst (in host B) and back into back (in A), each of cap
 * bytes. */
static void integrity_in(struct pair *p, uint8_t *src, uint8_t *dst, uint8_t *back, size_t cap,
			 const size_t *sizes, size_t nsizes)
{
	uint32_t lk = nst_reg(p->ha, src, cap, 0);
	uint32_t bk = nst_reg(p->ha, back, cap, NIC_ACCESS_LOCAL_WRITE);
	uint32_t dmr;
	uint32_t rkey = expose(p, dst, cap, NIC_ACCESS_REMOTE_READ | NIC_ACCESS_REMOTE_WRITE, &dmr);
	struct nic_cqe c;

	NST_REQUIRE(lk && bk && dmr && rkey);
	for (size_t i = 0; i < nsizes; i++) {
		size_t n = sizes[i], so = 1 + i * 7, doff = 3 + i * 11;
		struct nic_send_wqe w;
		struct nic_recv_wqe r;

		nst_fill(src + so, n, (uint32_t)i + 1);
		/* SEND into a posted receive. */
		r = rwqe(100 + i, dst + doff, (uint32_t)n, dmr);
		NST_REQUIRE_EQ(nst_post_recv(&p->b, &r), 0);
		w = nst_swqe(i, NIC_WR_SEND, src + so, (uint32_t)n, lk, 0, 0);
		NST_REQUIRE_EQ(nst_post_send(&p->a, &w), 0);
		NST_REQUIRE_EQ(poll_cq(&p->a, &c, WAIT_MS), 0);
		NST_EQ(c.status, NIC_WC_SUCCESS);
		NST_REQUIRE_EQ(poll_cq(&p->b, &c, WAIT_MS), 0);
		NST_EQ(c.status, NIC_WC_SUCCESS);
		NST_EQ(c.byte_len, n);
		NST_EQ_U(nst_sum32(dst + doff, n), nst_sum32(src + so, n));
		/* RDMA WRITE to another offset, then READ it back. */
		nst_fill(src + so, n, (uint32_t)i + 100);
		w = nst_swqe(i, NIC_WR_RDMA_WRITE, src + so, (uint32_t)n, lk,
			     (uintptr_t)dst + doff + 5, rkey);
		NST_REQUIRE_EQ(nst_post_send(&p->a, &w), 0);
		NST_REQUIRE_EQ(poll_cq(&p->a, &c, WAIT_MS), 0);
		NST_EQ(c.status, NIC_WC_SUCCESS);
		NST_EQ_U(nst_sum32(dst + doff + 5, n), nst_sum32(src + so, n));
		w = nst_swqe(i, NIC_WR_RDMA_READ, back + 9, (uint32_t)n, bk,
			     (uintptr_t)dst + doff + 5, rkey);
		NST_REQUIRE_EQ(nst_post_send(&p->a, &w), 0);
		NST_REQUIRE_EQ(poll_cq(&p->a, &c, WAIT_MS), 0);
		NST_EQ(c.status, NIC_WC_SUCCESS);
		NST_EQ(c.byte_len, n);
		NST_EQ_U(nst_sum32(back + 9, n), nst_sum32(src + so, n));
	}
}

static void integrity(struct pair *p)
{
	static const size_t sizes[] = {1, 63, 4096, 4097, 65537, 1048579, 64u << 20};
	size_t cap = (64u << 20) + 8192;
	uint8_t *src = map(cap), *dst = map(cap), *back = map(cap);

	integrity_in(p, src, dst, back, cap, sizes, sizeof(sizes) / sizeof(sizes[0]));
	munmap(src, cap);
	munmap(dst, cap);
	munmap(back, cap);
}

static void test_two_nics_integrity(void)
{
	struct pair p;

	pair_open(&p, sock_b, addr_b);
	integrity(&p);
	pair_close(&p);
}

struct pid_wait {
	const char *file;
	pid_t pid;
};

/* The pid file names the process (it is written as each NIC comes up). */
static bool pid_file_names(void *arg)
{
	const struct pid_wait *w = arg;

	return nst_read_pid_file(w->file) == w->pid;
}

/*
 * Two NICs served by one nicsimd (--addr given twice): every size of SEND,
 * WRITE and READ arrives intact between them, and one SIGTERM stops both,
 * each removing its own files.
 */
static void test_one_process_two_nics(void)
{
	const char *const with_d[] = {"--addr", ADDR_D, "--log-level", "info", NULL};
	char pid_c[300], pid_d[300];
	uint32_t addr_d;
	struct pair p;
	pid_t pid;

	fab_addr_parse(ADDR_D, &addr_d);
	snprintf(pid_c, sizeof(pid_c), "%s/nic-" ADDR_C ".pid", dir);
	snprintf(pid_d, sizeof(pid_d), "%s/nic-" ADDR_D ".pid", dir);
	pid = nst_start_nic(dir, ADDR_C, with_d, WAIT_MS);
	NST_REQUIRE(pid > 0);
	NST_EQ(nst_read_pid_file(pid_c), pid);
	/* nst_start_nic waited for C's socket; D comes up after it. */
	NST_TRUE(nst_wait_until(pid_file_names, &(struct pid_wait){pid_d, pid}, WAIT_MS, 5));
	NST_EQ(nst_read_pid_file(pid_d), pid);
	pair_open_at(&p, sock_c, sock_d, addr_d);
	integrity(&p);
	pair_close(&p);
	NST_TRUE(nst_stop_clean(pid, WAIT_MS));
	NST_TRUE(access(sock_c, F_OK) < 0 && access(sock_d, F_OK) < 0);
	NST_TRUE(access(pid_c, F_OK) < 0 && access(pid_d, F_OK) < 0);
}

/*
 * One nicsimd serving NICs C and D: a host of C writes random bytes over its
 * whole segment and rings its doorbell, and 64 connections to C never say
 * hello, while a host of D exchanges SENDs with a host of A and a new host
 * attaches to D.  D serves them all, intact, and the process survives.
 */
static void test_one_process_hostile_neighbour(void)
{
	const char *const with_d[] = {"--addr", ADDR_D, "--log-level", "info", NULL};
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	uint64_t rng = 0x2545f4914f6cdd1dull;
	uint8_t *buf = map(65536);
	int silent[64];
	struct nic_host *hc, *late;
	struct nst_qp qc;
	struct pair p;
	uint32_t addr_d, ka, kd;
	unsigned char *seg;
	size_t size;
	pid_t pid;

	fab_addr_parse(ADDR_D, &addr_d);
	pid = nst_start_nic(dir, ADDR_C, with_d, WAIT_MS);
	NST_REQUIRE(pid > 0);
	NST_REQUIRE_EQ(nic_host_attach(sock_c, &hc), 0);
	NST_REQUIRE_EQ(nst_qp_create_flags(hc, 3, NIC_QP_F_RECV_INLINE, &qc), 0);
	seg = nic_host_segment(hc, &size);
	NST_REQUIRE(seg != NULL);
	strcpy(sa.sun_path, sock_c);
	for (int i = 0; i < 64; i++) {
		silent[i] = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		NST_REQUIRE(silent[i] >= 0);
		NST_EQ(connect(silent[i], (struct sockaddr *)&sa, sizeof(sa)), 0);
	}
	pair_open_at(&p, sock_a, sock_d, addr_d);
	ka = nst_reg(p.ha, buf, 32768, NIC_ACCESS_LOCAL_WRITE);
	kd = nst_reg(p.hb, buf + 32768, 32768, NIC_ACCESS_LOCAL_WRITE);
	NST_REQUIRE(ka && kd);
	for (uint32_t round = 0; round < 40; round++) {
		struct nic_send_wqe w;
		struct nic_recv_wqe r;
		struct nic_cqe c;
		uint32_t n = 1 + (round * 97) % 8000;

		for (int k = 0; k < 500; k++) {
			uint64_t v;
			size_t off, len;

			rng ^= rng >> 12;
			rng ^= rng << 25;
			rng ^= rng >> 27;
			v = rng * 0x2545f4914f6cdd1dull;
			off = (size_t)(v % size);
			len = 1 + (size_t)(v >> 40) % 256;
			if (off + len > size)
				len = size - off;
			memset(seg + off, (int)(v >> 32), len);
			if (write(nic_host_doorbell_fd(hc), &v, sizeof(v)) < 0)
				continue;
		}
		/* A -> D and back, checksummed. */
		nst_fill(buf, n, round + 1);
		memset(buf + 32768, 0, 8192);
		r = rwqe(round, buf + 32768, 8192, kd);
		NST_REQUIRE_EQ(nst_post_recv(&p.b, &r), 0);
		w = nst_swqe(round, NIC_WR_SEND, buf, n, ka, 0, 0);
		NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
		NST_REQUIRE_EQ(poll_cq(&p.a, &c, WAIT_MS), 0);
		NST_EQ(c.status, NIC_WC_SUCCESS);
		NST_REQUIRE_EQ(poll_cq(&p.b, &c, WAIT_MS), 0);
		NST_EQ(c.status, NIC_WC_SUCCESS);
		NST_EQ(c.byte_len, n);
		NST_CHECK_(nst_sum32(buf + 32768, n) == nst_sum32(buf, n), CU_FALSE,
			   "round %u: %u bytes differ", round, n);
		r = rwqe(round, buf + 16384, 8192, ka);
		NST_REQUIRE_EQ(nst_post_recv(&p.a, &r), 0);
		w = nst_swqe(round, NIC_WR_SEND, buf + 32768, n, kd, 0, 0);
		NST_REQUIRE_EQ(nst_post_send(&p.b, &w), 0);
		NST_REQUIRE_EQ(poll_cq(&p.b, &c, WAIT_MS), 0);
		NST_EQ(c.status, NIC_WC_SUCCESS);
		NST_REQUIRE_EQ(poll_cq(&p.a, &c, WAIT_MS), 0);
		NST_EQ(c.status, NIC_WC_SUCCESS);
		NST_EQ_U(nst_sum32(buf + 16384, n), nst_sum32(buf, n));
	}
	NST_EQ(kill(pid, 0), 0);
	NST_REQUIRE_EQ(nic_host_attach(sock_d, &late), 0);
	NST_NE(nst_reg(late, buf, 4096, 0), 0);
	nic_host_detach(late);
	for (int i = 0; i < 64; i++)
		close(silent[i]);
	nic_host_detach(hc);
	pair_close(&p);
	NST_TRUE(nst_stop_clean(pid, WAIT_MS));
	munmap(buf, 65536);
}

/* Whether the file at path holds text (read whole, up to 1 MiB). */
static bool file_has(const char *path, const char *text)
{
	static char buf[1 << 20];
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, text) != NULL;
}

/* The lowest descriptor number pid does not use (the next it would get), or -1. */
static int first_free_fd(pid_t pid)
{
	char path[64];
	bool used[1024] = {false};
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		int n = atoi(e->d_name);

		if (e->d_name[0] != '.' && n >= 0 && n < 1024)
			used[n] = true;
	}
	closedir(d);
	for (int n = 0; n < 1024; n++)
		if (!used[n])
			return n;
	return -1;
}

/*
 * NICs C and D in one nicsimd share its descriptors.  With none left (the
 * limit at the lowest number not in use), an attach to D is refused with
 * NO_RESOURCES, and the log says that the limit is shared by the process's
 * NICs (the few D itself holds do not explain it); with descriptors back,
 * D takes the next attach.
 */
static void test_one_process_shared_descriptors(void)
{
	const char *const with_d[] = {"--addr", ADDR_D, "--log-level", "info", NULL};
	char log[300];
	struct rlimit was, tight;
	struct nic_host *h = NULL;
	uint64_t deadline;
	int next;
	pid_t pid;

	snprintf(log, sizeof(log), "%s/nic-" ADDR_C ".log", dir);
	pid = nst_start_nic(dir, ADDR_C, with_d, WAIT_MS);
	NST_REQUIRE(pid > 0);
	NST_REQUIRE_EQ(prlimit(pid, RLIMIT_NOFILE, NULL, &was), 0);
	/* The NIC may still be closing the connections that probed it at
	 * start, which frees descriptors under a limit set just before: an
	 * attach that gets through then is undone and the limit set again. */
	for (int tries = 0;; tries++) {
		int rc;

		next = first_free_fd(pid);
		NST_REQUIRE(next > 0);
		tight.rlim_cur = (rlim_t)next;
		tight.rlim_max = was.rlim_max;
		NST_REQUIRE_EQ(prlimit(pid, RLIMIT_NOFILE, &tight, NULL), 0);
		rc = nic_host_attach(sock_d, &h);
		if (rc != 0)
			break;
		nic_host_detach(h);
		h = NULL;
		NST_REQUIRE_EQ(prlimit(pid, RLIMIT_NOFILE, &was, NULL), 0);
		NST_REQUIRE(tries < 20);
	}
	deadline = nst_now_ns() + (uint64_t)WAIT_MS * 1000000u;
	while (!file_has(log, "shared by the 2 NICs of this process") && nst_now_ns() < deadline)
		nst_sleep_ms(10);
	NST_CHECK_(file_has(log, "shared by the 2 NICs of this process"), CU_FALSE,
		   "%s does not say the descriptors are shared", log);
	NST_REQUIRE_EQ(prlimit(pid, RLIMIT_NOFILE, &was, NULL), 0);
	NST_REQUIRE_EQ(nic_host_attach(sock_d, &h), 0);
	nic_host_detach(h);
	NST_TRUE(nst_stop_clean(pid, WAIT_MS));
}

/* The peer in another process on the same NIC: it echoes one message. */
static int echo_peer(void *arg, int ready_fd)
{
	uint16_t port = *(uint16_t *)arg;
	struct nic_host *h;
	struct nst_qp qp;
	struct nic_cqe cqe;
	static uint8_t buf[1 << 20];
	struct nic_recv_wqe r;
	struct nic_send_wqe w;
	uint32_t key;

	if (nic_host_attach(sock_a, &h) || nst_qp_create(h, 0, &qp))
		return 1;
	key = nst_reg(h, buf, sizeof(buf), NIC_ACCESS_LOCAL_WRITE);
	r = rwqe(1, buf, sizeof(buf), key);
	if (!key || nst_post_recv(&qp, &r) || nst_accept_one(&qp, port, ready_fd))
		return 2;
	if (nst_poll_cq(&qp, &cqe, WAIT_MS) || cqe.status)
		return 3;
	w = nst_swqe(2, NIC_WR_SEND, buf, cqe.byte_len, key, 0, 0);
	if (nst_post_send(&qp, &w) || nst_poll_cq(&qp, &cqe, WAIT_MS) || cqe.status)
		return 4;
	return 0;
}

static void test_two_processes_one_nic(void)
{
	uint16_t port = next_port++;
	struct nic_host *h;
	struct nst_qp qp;
	struct nic_cqe cqe;
	uint8_t *src = map(1 << 20), *dst = map(1 << 20);
	uint32_t sk, dk;
	struct nic_send_wqe w;
	struct nic_recv_wqe r;
	pid_t peer = nst_fork_ready(echo_peer, &port, WAIT_MS);
	int st;

	NST_REQUIRE_GT(peer, 0);
	NST_REQUIRE_EQ(nic_host_attach(sock_a, &h), 0);
	NST_REQUIRE_EQ(nst_qp_create(h, 0, &qp), 0);
	sk = nst_reg(h, src, 1 << 20, 0);
	dk = nst_reg(h, dst, 1 << 20, NIC_ACCESS_LOCAL_WRITE);
	nst_fill(src, 1 << 20, 77);
	r = rwqe(9, dst, 1 << 20, dk);
	NST_REQUIRE_EQ(nst_post_recv(&qp, &r), 0);
	NST_REQUIRE_EQ(nst_connect(&qp, addr_a, port), 0);
	w = nst_swqe(1, NIC_WR_SEND, src, 777777, sk, 0, 0);
	NST_REQUIRE_EQ(nst_post_send(&qp, &w), 0);
	NST_REQUIRE_EQ(poll_cq(&qp, &cqe, WAIT_MS), 0);
	NST_EQ(cqe.status, NIC_WC_SUCCESS);
	NST_REQUIRE_EQ(poll_cq(&qp, &cqe, WAIT_MS), 0);
	NST_EQ(cqe.status, NIC_WC_SUCCESS);
	NST_EQ(cqe.byte_len, 777777);
	NST_EQ_U(nst_sum32(dst, 777777), nst_sum32(src, 777777));
	st = nst_wait(peer, WAIT_MS);
	NST_TRUE(WIFEXITED(st));
	NST_EQ(WEXITSTATUS(st), 0);
	nic_host_detach(h);
	munmap(src, 1 << 20);
	munmap(dst, 1 << 20);
}

/*
 * A remote access with a bad key, done by a raw work request: the requester
 * gets a remote access error, the responder's QP goes to error too, the
 * target is unchanged, and the NIC records the refusal with its reason.
 */
static void refused(uint8_t op, int variant, const char *want_reason)
{
	struct pair p;
	uint8_t *target = map(8192), *src = map(8192), copy[8192];
	uint32_t tmr, rkey, lk;
	uint64_t va;
	struct nic_send_wqe w;
	struct nic_cqe c;
	struct nic_event ev;
	const char *argv[] = {nst_bin("nicsim"), "--dir", dir, "--nic", ADDR_B, "show",
			      "faults",          NULL};
	static char out[65536];

	pair_open(&p, sock_b, addr_b);
	nst_fill(target, 8192, 5);
	memcpy(copy, target, sizeof(copy));
	lk = nst_reg(p.ha, src, 8192, NIC_ACCESS_LOCAL_WRITE);
	tmr = nst_reg(p.hb, target, 8192, NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_MW_BIND);
	rkey = nst_window(p.hb, tmr, target, 4096, NIC_ACCESS_REMOTE_READ | NIC_ACCESS_REMOTE_WRITE,
			  p.b.qpn);
	va = (uintptr_t)target;
	NST_REQUIRE(lk && tmr && rkey);
	switch (variant) {
	case 0: rkey ^= 0x55; break; /* forged key byte */
	case 1: {                    /* stale: deallocated window */
		struct nic_cmd d = {.opcode = NIC_CMD_DEALLOC_MW};

		d.u.key.key = rkey;
		NST_REQUIRE_EQ(nst_cmd(p.hb, &d, NULL), 0);
		break;
	}
	case 2: { /* a window of the same host bound to its other QP */
		struct nst_qp x;

		NST_REQUIRE_EQ(nst_qp_create(p.hb, 1, &x), 0);
		rkey = nst_window(p.hb, tmr, target, 4096,
				  NIC_ACCESS_REMOTE_READ | NIC_ACCESS_REMOTE_WRITE, x.qpn);
		break;
	}
	case 3: va += 4000; break; /* 200 bytes past the window's end */
	case 4:                    /* a window without the access asked for */
		rkey = nst_window(p.hb, tmr, target, 4096,
				  op == NIC_WR_RDMA_READ ? NIC_ACCESS_REMOTE_WRITE
							 : NIC_ACCESS_REMOTE_READ,
				  p.b.qpn);
		break;
	}
	w = nst_swqe(1, op, src, 200, lk, va, rkey);
	NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	NST_REQUIRE_EQ(poll_cq(&p.a, &c, WAIT_MS), 0);
	NST_EQ(c.status, NIC_WC_REM_ACCESS_ERR);
	NST_REQUIRE_EQ(nst_next_event(p.hb, &ev, WAIT_MS), 0);
	NST_EQ(ev.type, NIC_EV_QP_ERROR);
	NST_EQ(ev.qpn, p.b.qpn);
	NST_EQ(memcmp(target, copy, sizeof(copy)), 0);
	NST_EQ(nst_run(argv, out, sizeof(out), WAIT_MS), 0);
	if (!strstr(out, want_reason))
		fprintf(stderr, "\nvariant %d: no \"%s\" in:\n%s\n", variant, want_reason, out);
	NST_TRUE(strstr(out, want_reason) != NULL);
	pair_close(&p);
	munmap(target, 8192);
	munmap(src, 8192);
}

static bool frames_all_free(void *arg)
{
	struct fab_info info;

	NST_REQUIRE_EQ(fab_info(arg, &info), 0);
	return info.frames_free == info.nframes;
}

/*
 * Host memory that goes away under a live registration (the host unmapped
 * it; the TPT entry still grants it): the DMA fails in the middle of a
 * multi-packet transfer, whichever side it is on, and the QPs fail
 * cleanly with the status a NIC gives.  which: 0 the requester's source of
 * a WRITE, 1 the responder's target of a WRITE, 2 the requester's target
 * of a READ; the 8 KiB hole is at offset at: in the middle, where the
 * failure is found while more packets arrive, or at the end, where it is
 * found when the NIC acknowledges or completes.
 */
static void vanished(int which, size_t at)
{
	enum { N = 256 << 10 };
	struct pair p;
	uint8_t *src = map(N), *dst = map(N);
	uint8_t *hole = (which == 1 ? dst : src) + at;
	uint32_t lk, dmr, rkey;
	struct nic_send_wqe w;
	struct nic_cqe c;
	struct fab *f;
	long faults = nic_counter(ADDR_A, "dma_faults");

	pair_open(&p, sock_b, addr_b);
	nst_fill(src, N, 11);
	lk = nst_reg(p.ha, src, N, NIC_ACCESS_LOCAL_WRITE);
	rkey = expose(&p, dst, N, NIC_ACCESS_REMOTE_READ | NIC_ACCESS_REMOTE_WRITE, &dmr);
	NST_REQUIRE(lk && dmr && rkey);
	/* For the READ the requester's buffer is src (it receives), dst the
	 * responder's (it is read). */
	NST_REQUIRE_EQ(munmap(hole, 8192), 0);
	w = nst_swqe(1, which == 2 ? NIC_WR_RDMA_READ : NIC_WR_RDMA_WRITE, src, N, lk,
		     (uintptr_t)dst, rkey);
	NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	NST_REQUIRE_EQ(poll_cq(&p.a, &c, WAIT_MS), 0);
	NST_EQ(c.status, which == 1 ? NIC_WC_REM_OP_ERR : NIC_WC_LOC_PROT_ERR);
	if (which == 1) {
		struct nic_event ev;

		NST_REQUIRE_EQ(nst_next_event(p.hb, &ev, WAIT_MS), 0);
		NST_EQ(ev.type, NIC_EV_QP_ERROR);
		NST_EQ(ev.qpn, p.b.qpn);
	} else {
		NST_GT(nic_counter(ADDR_A, "dma_faults"), faults);
	}
	pair_close(&p);
	/* The frames the failed read had taken went back to the pool. */
	NST_REQUIRE_EQ(fab_open(dir, &f), 0);
	NST_TRUE(nst_wait_until(frames_all_free, f, WAIT_MS, 5));
	fab_close(f);
	munmap(src, N);
	munmap(dst, N);
}

static void test_host_memory_vanished_mid_transfer(void)
{
	for (int which = 0; which < 3; which++) {
		vanished(which, 128 << 10);
		vanished(which, (256 << 10) - 8192);
	}
}

static void test_r4_r6_refused_by_the_nic(void)
{
	static const char *const reasons[] = {"key byte does not match", "not valid",
					      "another connection", "outside the entry's range",
					      "lacks a requested access right"};

	for (int v = 0; v < 5; v++) {
		refused(NIC_WR_RDMA_WRITE, v, reasons[v]);
		refused(NIC_WR_RDMA_READ, v, reasons[v]);
	}
}

/* R5: another process's key never reaches this one's memory, even over a
 * connection of the same NIC. */
static void test_r5_foreign_region_key(void)
{
	struct pair p;
	uint8_t *target = map(4096), *src = map(4096);
	uint32_t lk, foreign;
	struct nic_send_wqe w;
	struct nic_cqe c;

	pair_open(&p, sock_b, addr_b);
	lk = nst_reg(p.ha, src, 4096, 0);
	/* A region with remote rights registered by the requester's own
	 * context: its key is no key at the responder's context. */
	foreign =
	    nst_reg(p.ha, target, 4096,
		    NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_REMOTE_WRITE | NIC_ACCESS_REMOTE_READ);
	w = nst_swqe(1, NIC_WR_RDMA_WRITE, src, 64, lk, (uintptr_t)target, foreign);
	NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	NST_REQUIRE_EQ(poll_cq(&p.a, &c, WAIT_MS), 0);
	NST_EQ(c.status, NIC_WC_REM_ACCESS_ERR);
	pair_close(&p);
	munmap(target, 4096);
	munmap(src, 4096);
}

/* Fault rules on both directions between A and B, in parts per billion. */
static void set_links(uint32_t loss, uint32_t dup, uint32_t reorder, uint32_t corrupt, bool down)
{
	NST_EQ(nst_link_faults(dir, addr_a, addr_b, loss, dup, reorder, corrupt, down), 0);
}

static void test_rc_over_a_lossy_link(void)
{
	long retransmits;
	struct pair p;
	size_t n = 64u << 20;
	uint8_t *src = map(n), *dst = map(n);
	uint32_t lk, dmr, rkey;
	struct nic_send_wqe w;
	struct nic_cqe c;

	pair_open(&p, sock_b, addr_b);
	lk = nst_reg(p.ha, src, n, 0);
	rkey = expose(&p, dst, n, NIC_ACCESS_REMOTE_WRITE, &dmr);
	nst_fill(src, n, 31);
	set_links(50000000, 10000000, 10000000, 1000000, false);
	w = nst_swqe(1, NIC_WR_RDMA_WRITE, src, (uint32_t)n, lk, (uintptr_t)dst, rkey);
	NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	NST_REQUIRE_EQ(poll_cq(&p.a, &c, 120000), 0);
	set_links(0, 0, 0, 0, false);
	NST_EQ(c.status, NIC_WC_SUCCESS);
	NST_EQ_U(nst_sum32(dst, n), nst_sum32(src, n));
	retransmits = nic_counter(ADDR_A, "retransmits");
	NST_GT(retransmits, 0);
	printf("\n    64 MiB over 5%% loss, 1%% dup, 1%% reorder, 0.1%% corrupt: %ld go-back-N "
	       "restarts\n",
	       retransmits);
	pair_close(&p);
	munmap(src, n);
	munmap(dst, n);
}

/* Ring entries and frames link A -> B has carried so far. */
static void ab_ring_and_frames(uint32_t *prod, uint64_t *frames)
{
	struct fab_link_stats st = {0};
	struct fab *f;

	NST_REQUIRE_EQ(fab_open(dir, &f), 0);
	NST_EQ(fab_link_stats(f, addr_a, addr_b, &st), 0);
	fab_close(f);
	*prod = st.prod;
	*frames = st.tx.frames;
}

/*
 * The NIC sends bulk data in burst units where nothing can observe a
 * packet on the way (fab.h), and packet by packet where a rule can: on a
 * plain link a 4 MiB RDMA WRITE takes about one ring entry per 16 frames;
 * with a rule on the link (a duplication chance of one in a billion, which
 * duplicates nothing here) every frame has its own.  The data arrives
 * intact both ways.
 */
static void test_bulk_in_units_only_on_plain_links(void)
{
	struct pair p;
	size_t n = 4u << 20;
	uint8_t *src = map(n), *dst = map(n);
	uint32_t lk, dmr, rkey, prod[3];
	uint64_t frames[3];
	struct nic_send_wqe w;
	struct nic_cqe c;

	pair_open(&p, sock_b, addr_b);
	lk = nst_reg(p.ha, src, n, 0);
	rkey = expose(&p, dst, n, NIC_ACCESS_REMOTE_WRITE, &dmr);
	for (int round = 0; round < 2; round++) {
		if (round == 1)
			set_links(0, 1, 0, 0, false);
		ab_ring_and_frames(&prod[round], &frames[round]);
		nst_fill(src, n, 40u + (uint32_t)round);
		w = nst_swqe(1, NIC_WR_RDMA_WRITE, src, (uint32_t)n, lk, (uintptr_t)dst, rkey);
		NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
		NST_REQUIRE_EQ(poll_cq(&p.a, &c, WAIT_MS), 0);
		NST_EQ(c.status, NIC_WC_SUCCESS);
		NST_EQ_U(nst_sum32(dst, n), nst_sum32(src, n));
	}
	ab_ring_and_frames(&prod[2], &frames[2]);
	set_links(0, 0, 0, 0, false);
	NST_GE(frames[1] - frames[0], n / 4096);
	NST_CHECK_(prod[1] - prod[0] <= (frames[1] - frames[0]) / 8, CU_FALSE,
		   "plain link: %u ring entries for %llu frames", prod[1] - prod[0],
		   (unsigned long long)(frames[1] - frames[0]));
	NST_GE(frames[2] - frames[1], n / 4096);
	NST_EQ(prod[2] - prod[1], frames[2] - frames[1]);
	printf("\n    4 MiB WRITE: %u ring entries for %llu frames on a plain link, %u for %llu "
	       "with a rule\n",
	       prod[1] - prod[0], (unsigned long long)(frames[1] - frames[0]), prod[2] - prod[1],
	       (unsigned long long)(frames[2] - frames[1]));
	pair_close(&p);
	munmap(src, n);
	munmap(dst, n);
}

static void test_retry_limit_when_link_down(void)
{
	struct pair p;
	uint8_t *src = map(4096);
	uint32_t lk;
	struct nic_send_wqe w;
	struct nic_cqe c;
	struct nic_event ev;
	uint64_t t0;

	pair_open(&p, sock_b, addr_b);
	lk = nst_reg(p.ha, src, 4096, 0);
	set_links(0, 0, 0, 0, true);
	t0 = nst_now_ns();
	w = nst_swqe(1, NIC_WR_SEND, src, 100, lk, 0, 0);
	NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	w.wr_id = 2;
	NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	NST_REQUIRE_EQ(poll_cq(&p.a, &c, WAIT_MS), 0);
	NST_EQ(c.status, NIC_WC_RETRY_EXC_ERR);
	NST_REQUIRE_EQ(poll_cq(&p.a, &c, WAIT_MS), 0);
	NST_EQ(c.status, NIC_WC_WR_FLUSH_ERR);
	NST_REQUIRE_EQ(nst_next_event(p.ha, &ev, WAIT_MS), 0);
	NST_EQ(ev.type, NIC_EV_QP_ERROR);
	NST_EQ(ev.status, NIC_WC_RETRY_EXC_ERR);
	printf("\n    retry limit reached after %.0f ms\n", (double)(nst_now_ns() - t0) / 1e6);
	set_links(0, 0, 0, 0, false);
	pair_close(&p);
	munmap(src, 4096);
}

/* A receiver that accepts, posts nothing, and waits to be killed. */
static int sink_peer(void *arg, int ready_fd)
{
	uint16_t port = *(uint16_t *)arg;
	struct nic_host *h;
	struct nst_qp qp;

	if (nic_host_attach(sock_b, &h) || nst_qp_create(h, 0, &qp) ||
	    nst_accept_one(&qp, port, ready_fd))
		return 1;
	pause();
	return 0;
}

static void test_peer_killed_mid_transfer(void)
{
	uint16_t port = next_port++;
	struct nic_host *h;
	struct nst_qp qp;
	struct nic_event ev;
	struct nic_cqe cqe;
	uint8_t *src = map(4096);
	uint32_t sk;
	struct nic_send_wqe w;
	pid_t peer = nst_fork_ready(sink_peer, &port, WAIT_MS);
	uint64_t t0;

	NST_REQUIRE_GT(peer, 0);
	NST_REQUIRE_EQ(nic_host_attach(sock_a, &h), 0);
	NST_REQUIRE_EQ(nst_qp_create(h, 0, &qp), 0);
	sk = nst_reg(h, src, 4096, 0);
	NST_REQUIRE_EQ(nst_connect(&qp, addr_b, port), 0);
	/* The peer posted no receive: our SEND waits on RNR until it dies. */
	w = nst_swqe(1, NIC_WR_SEND, src, 100, sk, 0, 0);
	NST_REQUIRE_EQ(nst_post_send(&qp, &w), 0);
	kill(peer, SIGKILL);
	nst_wait(peer, WAIT_MS);
	t0 = nst_now_ns();
	NST_REQUIRE_EQ(poll_cq(&qp, &cqe, WAIT_MS), 0);
	NST_EQ(cqe.status, NIC_WC_WR_FLUSH_ERR);
	NST_REQUIRE_EQ(nst_next_event(h, &ev, WAIT_MS), 0);
	NST_EQ(ev.type, NIC_EV_DISCONNECTED);
	/* The host's end is an event: WAIT_MS bounds only a hang. */
	printf("\n    flushed and disconnected %.0f ms after the peer died\n",
	       (double)(nst_now_ns() - t0) / 1e6);
	nic_host_detach(h);
	munmap(src, 4096);
}

/*
 * Deregistering the source of an RDMA WRITE in flight: the NIC unpublishes
 * the entry at once but acknowledges only after the transfer drained, so
 * the DEREG_MR completion comes after the write's completion.
 */
static void test_dereg_waits_for_dma_in_flight(void)
{
	struct pair p;
	size_t n = 32u << 20;
	uint8_t *src = map(n), *dst = map(n);
	uint32_t lk, dmr, rkey;
	struct nic_send_wqe w;
	struct nic_cmd d = {.opcode = NIC_CMD_DEREG_MR};
	struct nic_cqe c;

	pair_open(&p, sock_b, addr_b);
	lk = nst_reg(p.ha, src, n, 0);
	rkey = expose(&p, dst, n, NIC_ACCESS_REMOTE_WRITE, &dmr);
	nst_fill(src, n, 8);
	w = nst_swqe(1, NIC_WR_RDMA_WRITE, src, (uint32_t)n, lk, (uintptr_t)dst, rkey);
	NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	/* Wait until the transfer is under way (its first bytes have landed),
	 * so that the NIC holds the source's key. */
	for (int i = 0; i < 100000 && memcmp(dst, src, 4096); i++)
		usleep(10);
	NST_REQUIRE_EQ(memcmp(dst, src, 4096), 0);
	d.u.key.key = lk;
	NST_EQ(nst_cmd(p.ha, &d, NULL), NIC_STATUS_OK);
	/* By the time the deregistration is acknowledged, the write is done. */
	NST_EQ(nst_poll_cq(&p.a, &c, 0), 0);
	NST_EQ(c.status, NIC_WC_SUCCESS);
	NST_EQ_U(nst_sum32(dst, n), nst_sum32(src, n));
	NST_GT(nic_counter(ADDR_A, "invalidations_deferred"), 0);
	pair_close(&p);
	munmap(src, n);
	munmap(dst, n);
}

/* A malformed work request fails the QP; completions stay in order. */
static void test_malformed_request_in_order(void)
{
	struct pair p;
	uint8_t *src = map(4096);
	uint32_t lk;
	struct nic_send_wqe w;
	struct nic_cqe c;
	struct nic_event ev;

	pair_open(&p, sock_b, addr_b);
	lk = nst_reg(p.ha, src, 4096, 0);
	/* No receive at the peer: the first SEND waits on RNR. */
	w = nst_swqe(1, NIC_WR_SEND, src, 10, lk, 0, 0);
	NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	w = nst_swqe(2, 99, src, 10, lk, 0, 0); /* no such opcode */
	NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	w = nst_swqe(3, NIC_WR_RDMA_WRITE, src, 10, lk, 0, 0);
	NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	for (uint64_t id = 1; id <= 3; id++) {
		NST_REQUIRE_EQ(poll_cq(&p.a, &c, WAIT_MS), 0);
		NST_EQ_U(c.wr_id, id);
		NST_EQ(c.status, id == 2 ? NIC_WC_LOC_QP_OP_ERR : NIC_WC_WR_FLUSH_ERR);
	}
	NST_EQ(c.opcode, NIC_WC_RDMA_WRITE);
	NST_REQUIRE_EQ(nst_next_event(p.ha, &ev, WAIT_MS), 0);
	NST_EQ(ev.type, NIC_EV_QP_ERROR);
	NST_EQ(ev.status, NIC_WC_LOC_QP_OP_ERR);
	pair_close(&p);
	munmap(src, 4096);
}

/* A work request carrying its payload (NIC_WR_F_INLINE). */
static struct nic_send_wqe iwqe(uint64_t id, uint8_t op, const void *data, uint32_t len,
				uint64_t rva, uint32_t rkey)
{
	struct nic_send_wqe w = {.wr_id = id, .opcode = op, .flags = NIC_WR_F_INLINE};

	memcpy(w.inline_data, data, len);
	w.inline_len = len;
	w.remote_va = rva;
	w.rkey = rkey;
	return w;
}

/*
 * Inline sends: the payload travels in the work request, so the NIC reads
 * nothing of the host's memory for it; the host may overwrite its buffer
 * as soon as the request is posted.  SEND (with and without immediate data)
 * and RDMA WRITE of 0, 1, 8 and NIC_MAX_INLINE bytes arrive intact, beside
 * ordinary sends; a malformed inline request fails like any other.
 */
static void test_inline_send_and_write(void)
{
	static const uint32_t sizes[] = {0, 1, 8, NIC_MAX_INLINE};
	struct pair p;
	uint8_t *dst = map(65536), data[NIC_MAX_INLINE];
	uint32_t dmr, rkey;
	struct nic_send_wqe w;
	struct nic_recv_wqe r;
	struct nic_cqe c;

	pair_open(&p, sock_b, addr_b);
	rkey = expose(&p, dst, 65536, NIC_ACCESS_REMOTE_WRITE, &dmr);
	NST_REQUIRE(dmr && rkey);
	for (uint32_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t n = sizes[i];
		uint8_t *rx = dst + 4096 * i, *wr = dst + 32768 + 4096 * i;

		nst_fill(data, sizeof(data), 7 + i);
		r = rwqe(10 + i, rx, 4096, dmr);
		NST_REQUIRE_EQ(nst_post_recv(&p.b, &r), 0);
		w = iwqe(i, i % 2 ? NIC_WR_SEND_IMM : NIC_WR_SEND, data, n, 0, 0);
		w.imm = 0xabc0 + i;
		NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
		w = iwqe(100 + i, NIC_WR_RDMA_WRITE, data, n, (uintptr_t)wr, rkey);
		NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
		/* The payload is in the posted requests already. */
		uint32_t sum = nst_sum32(data, n);
		memset(data, 0xee, sizeof(data));
		c = expect_cqe(&p.a, i, NIC_WC_SUCCESS);
		NST_EQ(c.byte_len, n);
		c = expect_cqe(&p.a, 100 + i, NIC_WC_SUCCESS);
		NST_EQ(c.opcode, NIC_WC_RDMA_WRITE);
		NST_REQUIRE_EQ(poll_cq(&p.b, &c, WAIT_MS), 0);
		NST_EQ(c.status, NIC_WC_SUCCESS);
		NST_EQ(c.opcode, NIC_WC_RECV);
		NST_EQ(c.byte_len, n);
		NST_EQ(!!(c.flags & NIC_WC_F_IMM), i % 2);
		if (i % 2)
			NST_EQ_U(c.imm, 0xabc0 + i);
		NST_EQ_U(nst_sum32(rx, n), sum);
		NST_EQ_U(nst_sum32(wr, n), sum);
		NST_TRUE(n == NIC_MAX_INLINE || rx[n] == 0);
	}
	/* An ordinary SEND after them still reads the host's memory. */
	uint32_t lk = nst_reg(p.ha, data, sizeof(data), 0);
	NST_REQUIRE(lk);
	nst_fill(data, sizeof(data), 99);
	r = rwqe(20, dst, 4096, dmr);
	NST_REQUIRE_EQ(nst_post_recv(&p.b, &r), 0);
	w = nst_swqe(20, NIC_WR_SEND, data, sizeof(data), lk, 0, 0);
	NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	NST_REQUIRE_EQ(poll_cq(&p.a, &c, WAIT_MS), 0);
	NST_EQ(c.status, NIC_WC_SUCCESS);
	NST_REQUIRE_EQ(poll_cq(&p.b, &c, WAIT_MS), 0);
	NST_EQ(c.status, NIC_WC_SUCCESS);
	NST_EQ_U(nst_sum32(dst, sizeof(data)), nst_sum32(data, sizeof(data)));
	pair_close(&p);
	munmap(dst, 65536);
}

/*
 * Small receives beside their completions (NIC_QP_F_RECV_INLINE on B's
 * QP): SENDs of 0 to 64 bytes, with and without immediate data, land in
 * the receive's buffers once the completion is taken, spread over two
 * SGEs; 65 bytes go by DMA as before; an RDMA WRITE with immediate
 * consumes its receive in order; and the receive's checks still hold: one
 * too short completes with LOC_LEN_ERR.
 */
static void test_recv_inline(void)
{
	static const uint32_t sizes[] = {0, 1, 8, 40, NIC_RECV_INLINE_MAX, NIC_RECV_INLINE_MAX + 1};
	struct pair p;
	uint8_t *dst = map(65536), *src = map(4096), data[NIC_MAX_INLINE];
	uint32_t dmr, rkey, lk;
	struct nic_send_wqe w;
	struct nic_recv_wqe r;
	struct nic_cqe c;

	pair_open_recv_inline(&p);
	rkey = expose(&p, dst, 65536, NIC_ACCESS_REMOTE_WRITE, &dmr);
	lk = nst_reg(p.ha, src, 4096, 0);
	NST_REQUIRE(dmr && rkey && lk);
	for (uint32_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t n = sizes[i];
		uint8_t *rx = dst + 1024 * i;

		nst_fill(src, n, 30 + i);
		/* Two SGEs: the first 5 bytes, then the rest. */
		r = (struct nic_recv_wqe){.wr_id = 10 + i, .num_sge = 2};
		r.sge[0] = (struct nic_sge){.va = (uintptr_t)rx, .len = 5, .lkey = dmr};
		r.sge[1] = (struct nic_sge){.va = (uintptr_t)rx + 512, .len = 256, .lkey = dmr};
		NST_REQUIRE_EQ(nst_post_recv(&p.b, &r), 0);
		w = nst_swqe(i, i % 2 ? NIC_WR_SEND_IMM : NIC_WR_SEND, src, n, lk, 0, 0);
		w.imm = 0x5150 + i;
		NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
		NST_REQUIRE_EQ(poll_cq(&p.a, &c, WAIT_MS), 0);
		NST_EQ(c.status, NIC_WC_SUCCESS);
		NST_REQUIRE_EQ(poll_cq(&p.b, &c, WAIT_MS), 0);
		NST_EQ_U(c.wr_id, 10 + i);
		NST_EQ(c.status, NIC_WC_SUCCESS);
		NST_EQ(c.byte_len, n);
		NST_EQ(!!(c.flags & NIC_WC_F_INLINE), n <= NIC_RECV_INLINE_MAX);
		NST_EQ(!!(c.flags & NIC_WC_F_IMM), i % 2);
		if (i % 2)
			NST_EQ_U(c.imm, 0x5150 + i);
		NST_EQ_U(nst_sum32(rx, n < 5 ? n : 5), nst_sum32(src, n < 5 ? n : 5));
		if (n > 5)
			NST_EQ_U(nst_sum32(rx + 512, n - 5), nst_sum32(src + 5, n - 5));
		NST_TRUE(rx[512 + (n > 5 ? n - 5 : 0)] == 0); /* nothing past the message */
	}
	/* An RDMA WRITE with immediate takes the next receive, in order. */
	r = rwqe(40, dst + 8192, 64, dmr);
	NST_REQUIRE_EQ(nst_post_recv(&p.b, &r), 0);
	r = rwqe(41, dst + 9000, 64, dmr);
	NST_REQUIRE_EQ(nst_post_recv(&p.b, &r), 0);
	w = nst_swqe(40, NIC_WR_RDMA_WRITE_IMM, src, 16, lk, (uintptr_t)dst + 16384, rkey);
	NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	nst_fill(data, 16, 77);
	memcpy(src + 100, data, 16);
	w = nst_swqe(41, NIC_WR_SEND, src + 100, 16, lk, 0, 0);
	NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	NST_REQUIRE_EQ(poll_cq(&p.b, &c, WAIT_MS), 0);
	NST_EQ_U(c.wr_id, 40);
	NST_EQ(c.opcode, NIC_WC_RECV_RDMA_IMM);
	NST_REQUIRE_EQ(poll_cq(&p.b, &c, WAIT_MS), 0);
	NST_EQ_U(c.wr_id, 41);
	NST_EQ(c.flags & NIC_WC_F_INLINE, NIC_WC_F_INLINE);
	NST_EQ_U(nst_sum32(dst + 9000, 16), nst_sum32(data, 16));
	NST_EQ_U(nst_sum32(dst + 16384, 16), nst_sum32(src, 16));
	for (int k = 0; k < 2; k++)
		NST_REQUIRE_EQ(poll_cq(&p.a, &c, WAIT_MS), 0);
	/* A receive too short for a small SEND: LOC_LEN_ERR, as by DMA. */
	r = rwqe(50, dst + 10000, 4, dmr);
	NST_REQUIRE_EQ(nst_post_recv(&p.b, &r), 0);
	w = nst_swqe(50, NIC_WR_SEND, src, 8, lk, 0, 0);
	NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	NST_REQUIRE_EQ(poll_cq(&p.b, &c, WAIT_MS), 0);
	NST_EQ(c.status, NIC_WC_LOC_LEN_ERR);
	NST_EQ(c.flags & NIC_WC_F_INLINE, 0);
	pair_close(&p);
	munmap(dst, 65536);
	munmap(src, 4096);
}

/* w, on a fresh pair, fails its QP with LOC_QP_OP_ERR (case k, for the log). */
static void refused_as_malformed(const struct nic_send_wqe *w, int k)
{
	struct nic_cqe c;
	struct pair p;

	pair_open(&p, sock_b, addr_b);
	NST_REQUIRE_EQ(nst_post_send(&p.a, w), 0);
	NST_REQUIRE_EQ(poll_cq(&p.a, &c, WAIT_MS), 0);
	NST_CHECK_(c.status == NIC_WC_LOC_QP_OP_ERR, CU_FALSE, "case %d: status %u", k, c.status);
	pair_close(&p);
}

/* Each malformed inline request fails its QP with LOC_QP_OP_ERR. */
static void test_inline_malformed(void)
{
	uint8_t data[NIC_MAX_INLINE] = {1};

	for (int k = 0; k < 4; k++) {
		struct nic_send_wqe w = iwqe(1, NIC_WR_SEND, data, 8, 0, 0);

		switch (k) {
		case 0: w.inline_len = NIC_MAX_INLINE + 1; break; /* too long */
		case 1: w.opcode = NIC_WR_RDMA_READ; break;       /* nothing to send */
		case 2: w.num_sge = 1; break;                     /* SGEs as well */
		case 3: w.flags = 0; break;                       /* a length, no flag */
		}
		refused_as_malformed(&w, k);
	}
}

/*
 * Inline requests a host gets wrong, or that meet trouble on the way: odd
 * field combinations fail with LOC_QP_OP_ERR (and valid odd ones work); an
 * inline RDMA WRITE to a bad key fails with REM_ACCESS_ERR; an inline SEND
 * that meets RNR NAKs is sent again from the NIC's copy once a receive is
 * posted, after the host overwrote its request's ring entry; and inline SENDs
 * over a lossy, duplicating, reordering link all arrive intact and in order,
 * into receives beside their completions.  The NICs keep serving.
 */
static void test_inline_attacks(void)
{
	uint8_t data[NIC_MAX_INLINE], *dst = map(65536);
	struct nic_send_wqe w;
	struct nic_recv_wqe r;
	struct nic_cqe c;
	struct pair p;
	uint32_t dmr, rkey;
	long rnr;

	nst_fill(data, sizeof(data), 5);
	/* Malformed: each fails its QP at once. */
	for (int k = 0; k < 5; k++) {
		w = iwqe(1, NIC_WR_SEND, data, 8, 0, 0);
		switch (k) {
		case 0: w.inline_len = UINT32_MAX; break;
		case 1: w.opcode = 6; break;
		case 2: w.opcode = 0; break;
		case 3: w.num_sge = 5; break;
		case 4: w.flags |= 0x80; break;
		}
		refused_as_malformed(&w, k);
	}
	pair_open(&p, sock_b, addr_b);
	rkey = expose(&p, dst, 65536, NIC_ACCESS_REMOTE_WRITE, &dmr);
	NST_REQUIRE(dmr && rkey);
	/* Valid, if odd: fenced and solicited inline SEND, a 0-byte one with
	 * garbage in the unused inline bytes, an inline RDMA WRITE_IMM. */
	r = rwqe(10, dst, 4096, dmr);
	NST_REQUIRE_EQ(nst_post_recv(&p.b, &r), 0);
	r = rwqe(11, dst + 4096, 4096, dmr);
	NST_REQUIRE_EQ(nst_post_recv(&p.b, &r), 0);
	r = rwqe(12, dst + 8192, 4096, dmr);
	NST_REQUIRE_EQ(nst_post_recv(&p.b, &r), 0);
	w = iwqe(1, NIC_WR_SEND, data, 33, 0, 0);
	w.flags |= NIC_WR_F_FENCE | NIC_WR_F_SOLICITED;
	NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	w = iwqe(2, NIC_WR_SEND, data, 0, 0, 0);
	memset(w.inline_data, 0xa5, sizeof(w.inline_data));
	NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	w = iwqe(3, NIC_WR_RDMA_WRITE_IMM, data, NIC_MAX_INLINE, (uintptr_t)dst + 16384, rkey);
	w.imm = 0x77;
	NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	for (uint64_t id = 1; id <= 3; id++) {
		expect_cqe(&p.a, id, NIC_WC_SUCCESS);
		c = expect_cqe(&p.b, 9 + id, NIC_WC_SUCCESS);
	}
	NST_EQ(c.byte_len, NIC_MAX_INLINE);
	NST_EQ_U(nst_sum32(dst, 33), nst_sum32(data, 33));
	NST_EQ(dst[4096], 0);
	NST_EQ_U(nst_sum32(dst + 16384, NIC_MAX_INLINE), nst_sum32(data, NIC_MAX_INLINE));
	/* RNR: the inline SEND waits in the NIC; its ring entry is reused. */
	rnr = nic_counter(ADDR_A, "rnr_naks");
	w = iwqe(4, NIC_WR_SEND, data, 50, 0, 0);
	NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	{
		uint64_t deadline = nst_now_ns() + (uint64_t)WAIT_MS * 1000000u;
		long now = rnr;

		while (now < rnr + 3 && nst_now_ns() < deadline)
			now = nic_counter(ADDR_A, "rnr_naks");
		NST_REQUIRE(now >= rnr + 3);
	}
	memset(&p.a.sq[(p.a.sq_prod - 1) & (NIC_SQ_DEPTH - 1)], 0xee, sizeof(w));
	r = rwqe(13, dst + 20480, 4096, dmr);
	NST_REQUIRE_EQ(nst_post_recv(&p.b, &r), 0);
	NST_REQUIRE_EQ(poll_cq(&p.a, &c, WAIT_MS), 0);
	NST_EQ(c.status, NIC_WC_SUCCESS);
	NST_REQUIRE_EQ(poll_cq(&p.b, &c, WAIT_MS), 0);
	NST_EQ(c.status, NIC_WC_SUCCESS);
	NST_EQ(c.byte_len, 50);
	NST_EQ_U(nst_sum32(dst + 20480, 50), nst_sum32(data, 50));
	/* An inline RDMA WRITE to a key that is no key. */
	w = iwqe(5, NIC_WR_RDMA_WRITE, data, 16, (uintptr_t)dst, rkey ^ 0x100);
	NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	NST_REQUIRE_EQ(poll_cq(&p.a, &c, WAIT_MS), 0);
	NST_EQ(c.status, NIC_WC_REM_ACCESS_ERR);
	pair_close(&p);

	/* Over a bad link, into a QP with small receives. */
	pair_open_recv_inline(&p);
	dmr = nst_reg(p.hb, dst, 65536, NIC_ACCESS_LOCAL_WRITE);
	NST_REQUIRE(dmr);
	memset(dst, 0, 65536);
	set_links(100000000, 50000000, 50000000, 0, false);
	for (uint32_t i = 0; i < 100; i++) {
		r = rwqe(100 + i, dst + 256 * i, 256, dmr);
		NST_REQUIRE_EQ(nst_post_recv(&p.b, &r), 0);
	}
	for (uint32_t i = 0; i < 100; i++) {
		nst_fill(data, sizeof(data), 1000 + i);
		w = iwqe(100 + i, NIC_WR_SEND, data, 1 + i % NIC_MAX_INLINE, 0, 0);
		NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	}
	for (uint32_t i = 0; i < 100; i++) {
		NST_REQUIRE_EQ(poll_cq(&p.a, &c, 60000), 0);
		NST_EQ_U(c.wr_id, 100 + i);
		NST_EQ(c.status, NIC_WC_SUCCESS);
	}
	set_links(0, 0, 0, 0, false);
	for (uint32_t i = 0; i < 100; i++) {
		uint32_t n = 1 + i % NIC_MAX_INLINE;

		NST_REQUIRE_EQ(poll_cq(&p.b, &c, WAIT_MS), 0);
		NST_EQ_U(c.wr_id, 100 + i);
		NST_EQ(c.status, NIC_WC_SUCCESS);
		NST_EQ(c.byte_len, n);
		NST_EQ(!!(c.flags & NIC_WC_F_INLINE), n <= NIC_RECV_INLINE_MAX);
		nst_fill(data, sizeof(data), 1000 + i);
		NST_CHECK_(nst_sum32(dst + 256 * i, n) == nst_sum32(data, n), CU_FALSE,
			   "message %u of %u bytes differs", i, n);
		NST_EQ(dst[256 * i + n], 0);
	}
	pair_close(&p);
	munmap(dst, 65536);
}

/*
 * Receives beside completions, with receives a host gets wrong: no SGEs,
 * zero-length SGEs, a bad key; receives flushed by a disconnect still match
 * their completions one for one; a held first message lands by DMA; and a
 * host that lets its CQ overrun does not have the data of a completion it
 * has not taken overwritten.
 */
static void test_recv_inline_attacks(void)
{
	uint8_t *dst = map(65536), data[NIC_MAX_INLINE];
	struct nic_send_wqe w;
	struct nic_recv_wqe r;
	struct nic_cqe c;
	struct nic_event ev;
	struct pair p;
	uint32_t dmr;

	pair_open_flags(&p, sock_a, sock_b, addr_b, NIC_QP_F_RECV_INLINE | NIC_QP_F_HOLD_FIRST);
	dmr = nst_reg(p.hb, dst, 65536, NIC_ACCESS_LOCAL_WRITE);
	NST_REQUIRE(dmr);
	/* A held first message, then delivered into two SGEs by DMA. */
	nst_fill(data, sizeof(data), 3);
	w = iwqe(1, NIC_WR_SEND, data, 20, 0, 0);
	NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	NST_REQUIRE_EQ(poll_cq(&p.a, &c, WAIT_MS), 0);
	NST_EQ(c.status, NIC_WC_SUCCESS);
	r = (struct nic_recv_wqe){.wr_id = 1, .num_sge = 2};
	r.sge[0] = (struct nic_sge){.va = (uintptr_t)dst, .len = 7, .lkey = dmr};
	r.sge[1] = (struct nic_sge){.va = (uintptr_t)dst + 100, .len = 50, .lkey = dmr};
	NST_REQUIRE_EQ(nst_post_recv(&p.b, &r), 0);
	NST_REQUIRE_EQ(poll_cq(&p.b, &c, WAIT_MS), 0);
	NST_EQ(c.status, NIC_WC_SUCCESS);
	NST_EQ(c.byte_len, 20);
	NST_EQ(c.flags & NIC_WC_F_INLINE, 0);
	NST_EQ_U(nst_sum32(dst, 7), nst_sum32(data, 7));
	NST_EQ_U(nst_sum32(dst + 100, 13), nst_sum32(data + 7, 13));
	/* No SGEs: a 0-byte SEND fits; zero-length SGEs are skipped. */
	r = (struct nic_recv_wqe){.wr_id = 2, .num_sge = 0};
	NST_REQUIRE_EQ(nst_post_recv(&p.b, &r), 0);
	r = (struct nic_recv_wqe){.wr_id = 3, .num_sge = 4};
	r.sge[0] = (struct nic_sge){.va = (uintptr_t)dst + 1000, .len = 0, .lkey = dmr};
	r.sge[1] = (struct nic_sge){.va = (uintptr_t)dst + 1100, .len = 3, .lkey = dmr};
	r.sge[2] = (struct nic_sge){.va = (uintptr_t)dst + 1200, .len = 0, .lkey = dmr};
	r.sge[3] = (struct nic_sge){.va = (uintptr_t)dst + 1300, .len = 61, .lkey = dmr};
	NST_REQUIRE_EQ(nst_post_recv(&p.b, &r), 0);
	w = iwqe(2, NIC_WR_SEND, data, 0, 0, 0);
	NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	w = iwqe(3, NIC_WR_SEND, data, 64, 0, 0);
	NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	for (uint64_t id = 2; id <= 3; id++) {
		NST_REQUIRE_EQ(poll_cq(&p.b, &c, WAIT_MS), 0);
		NST_EQ_U(c.wr_id, id);
		NST_CHECK_(c.status == NIC_WC_SUCCESS, CU_FALSE, "receive %u: status %u",
			   (unsigned)id, c.status);
		NST_EQ(c.flags & NIC_WC_F_INLINE, NIC_WC_F_INLINE);
		NST_REQUIRE_EQ(poll_cq(&p.a, &c, WAIT_MS), 0);
		NST_EQ(c.status, NIC_WC_SUCCESS);
	}
	NST_EQ_U(nst_sum32(dst + 1100, 3), nst_sum32(data, 3));
	NST_EQ_U(nst_sum32(dst + 1300, 61), nst_sum32(data + 3, 61));
	NST_EQ(dst[1000], 0);
	NST_EQ(dst[1200], 0);
	/* Receives outstanding, then the peer disconnects: two small SENDs
	 * land, the rest complete flushed, each against its own receive. */
	for (uint32_t i = 0; i < 6; i++) {
		r = rwqe(10 + i, dst + 4096 + 64 * i, 64, dmr);
		NST_REQUIRE_EQ(nst_post_recv(&p.b, &r), 0);
	}
	for (uint32_t i = 0; i < 2; i++) {
		nst_fill(data, sizeof(data), 40 + i);
		w = iwqe(10 + i, NIC_WR_SEND, data, 16 + i, 0, 0);
		NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
		NST_REQUIRE_EQ(poll_cq(&p.a, &c, WAIT_MS), 0);
		NST_EQ(c.status, NIC_WC_SUCCESS);
	}
	{
		struct nic_cmd cmd = {.opcode = NIC_CMD_DISCONNECT};

		cmd.u.conn.qpn = p.a.qpn;
		NST_REQUIRE_EQ(nst_cmd(p.ha, &cmd, NULL), 0);
	}
	for (uint32_t i = 0; i < 6; i++) {
		NST_REQUIRE_EQ(poll_cq(&p.b, &c, WAIT_MS), 0);
		NST_EQ_U(c.wr_id, 10 + i);
		NST_EQ(c.status, i < 2 ? NIC_WC_SUCCESS : NIC_WC_WR_FLUSH_ERR);
		NST_EQ(c.opcode, NIC_WC_RECV);
	}
	for (uint32_t i = 0; i < 2; i++) {
		nst_fill(data, sizeof(data), 40 + i);
		NST_EQ_U(nst_sum32(dst + 4096 + 64 * i, 16 + i), nst_sum32(data, 16 + i));
	}
	NST_REQUIRE_EQ(nst_next_event(p.hb, &ev, WAIT_MS), 0);
	pair_close(&p);

	/* A bad receive key: LOC_PROT_ERR with its reason, data nowhere. */
	pair_open_recv_inline(&p);
	dmr = nst_reg(p.hb, dst, 65536, NIC_ACCESS_LOCAL_WRITE);
	NST_REQUIRE(dmr);
	memset(dst, 0, 65536);
	r = rwqe(1, dst, 64, dmr ^ 0x100);
	NST_REQUIRE_EQ(nst_post_recv(&p.b, &r), 0);
	w = iwqe(1, NIC_WR_SEND, data, 8, 0, 0);
	NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	NST_REQUIRE_EQ(poll_cq(&p.b, &c, WAIT_MS), 0);
	NST_EQ(c.status, NIC_WC_LOC_PROT_ERR);
	NST_NE(c.detail, 0);
	NST_EQ(c.flags & NIC_WC_F_INLINE, 0);
	NST_REQUIRE_EQ(poll_cq(&p.a, &c, WAIT_MS), 0);
	NST_EQ(c.status, NIC_WC_REM_OP_ERR);
	NST_EQ(dst[0], 0);
	pair_close(&p);

	/* CQ overrun: B takes no completion; 256 fill its CQ, the 257th is
	 * lost, and the data entry of completion 0 keeps message 0's bytes. */
	pair_open_recv_inline(&p);
	dmr = nst_reg(p.hb, dst, 65536, NIC_ACCESS_LOCAL_WRITE);
	NST_REQUIRE(dmr);
	p.b.flags = 0; /* post past the completions not taken, as a careless host may */
	{
		long overruns = nic_counter(ADDR_B, "cq_overruns");
		uint8_t first[NIC_RECV_INLINE_MAX];

		for (uint32_t round = 0; round < 3; round++) {
			uint32_t n = round < 2 ? 128 : 1;

			for (uint32_t i = 0; i < n; i++) {
				r = rwqe(round * 128 + i, dst, 64, dmr);
				NST_REQUIRE_EQ(nst_post_recv(&p.b, &r), 0);
			}
			for (uint32_t i = 0; i < n; i++) {
				nst_fill(data, sizeof(data), round * 128 + i + 1);
				w = iwqe(round * 128 + i, NIC_WR_SEND, data, 64, 0, 0);
				NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
			}
			for (uint32_t i = 0; i < n; i++) {
				NST_REQUIRE_EQ(poll_cq(&p.a, &c, WAIT_MS), 0);
				NST_EQ(c.status, NIC_WC_SUCCESS);
			}
			if (round == 0)
				memcpy(first, p.b.cq_data, sizeof(first));
		}
		nst_fill(data, sizeof(data), 1);
		NST_EQ_U(nst_sum32(first, 64), nst_sum32(data, 64));
		NST_EQ_U(nst_sum32(p.b.cq_data, 64), nst_sum32(data, 64));
		NST_EQ(ring_observe(&p.b.hdr->cq.prod), NIC_CQ_DEPTH);
		NST_EQ(nic_counter(ADDR_B, "cq_overruns"), overruns + 1);
		NST_REQUIRE_EQ(nst_next_event(p.hb, &ev, WAIT_MS), 0);
		NST_EQ(ev.type, NIC_EV_QP_ERROR);
		NST_EQ(ev.status, NIC_WC_LOC_QP_OP_ERR);
	}
	pair_close(&p);
	munmap(dst, 65536);
}

/*
 * A SEND with no receive posted draws RNR NAKs, each asking the requester
 * to wait the responder's RNR timer (0.64 ms by default, code 12) before it
 * sends again: 20 of them take at least 12.8 ms, where the 10 us of code 1
 * took about one.  The receive posted at last completes the SEND.
 */
static void test_rnr_wait_is_the_responders_timer(void)
{
	const uint64_t naks = 20, wait_ns = 640000;
	struct pair p;
	uint8_t *src = map(4096), *dst = map(4096);
	uint32_t lk, rk;
	uint64_t v1, v2, t1, t2;
	struct nic_send_wqe w;
	struct nic_recv_wqe r;
	struct nic_cqe c;

	pair_open(&p, sock_b, addr_b);
	lk = nst_reg(p.ha, src, 4096, 0);
	rk = nst_reg(p.hb, dst, 4096, NIC_ACCESS_LOCAL_WRITE);
	NST_REQUIRE(lk && rk);
	v1 = nst_nic_stat(sock_a, NST_STAT(rnr_naks));
	w = nst_swqe(1, NIC_WR_SEND, src, 64, lk, 0, 0);
	NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	v1 = nst_wait_nic_stat(sock_a, NST_STAT(rnr_naks), v1 + 1, WAIT_MS);
	t1 = nst_now_ns();
	v2 = nst_wait_nic_stat(sock_a, NST_STAT(rnr_naks), v1 + naks, WAIT_MS);
	t2 = nst_now_ns();
	NST_REQUIRE_GE(v2, v1 + naks);
	/* Each NAK after the first came at least one wait after the one
	 * before; t1 was read at most one poll (2 ms) after NAK v1 came. */
	printf("\n    %llu RNR NAKs in %.2f ms ", (unsigned long long)(v2 - v1),
	       (double)(t2 - t1) / 1e6);
	NST_GE(t2 - t1 + 3000000u, (v2 - v1) * wait_ns);
	r = rwqe(2, dst, 4096, rk);
	NST_REQUIRE_EQ(nst_post_recv(&p.b, &r), 0);
	NST_REQUIRE_EQ(poll_cq(&p.a, &c, WAIT_MS), 0);
	NST_EQ(c.status, NIC_WC_SUCCESS);
	NST_REQUIRE_EQ(poll_cq(&p.b, &c, WAIT_MS), 0);
	NST_EQ(c.status, NIC_WC_SUCCESS);
	NST_EQ(memcmp(dst, src, 64), 0);
	pair_close(&p);
	munmap(src, 4096);
	munmap(dst, 4096);
}

static void test_connect_refused_and_unreachable(void)
{
	struct nic_host *h;
	struct nst_qp qp;
	struct nic_cmd c = {.opcode = NIC_CMD_CONNECT};
	struct nic_event ev;

	NST_REQUIRE_EQ(nic_host_attach(sock_a, &h), 0);
	NST_REQUIRE_EQ(nst_qp_create(h, 0, &qp), 0);
	c.u.conn.qpn = qp.qpn;
	c.u.conn.dst_addr = addr_b;
	c.u.conn.dst_port = 9; /* nobody listens */
	NST_REQUIRE_EQ(nst_cmd(h, &c, NULL), 0);
	NST_REQUIRE_EQ(nst_next_event(h, &ev, WAIT_MS), 0);
	NST_EQ(ev.type, NIC_EV_CONN_FAILED);
	NST_EQ(ev.status, NIC_STATUS_CONN_REFUSED);
	NST_EQ(qp.hdr->state, NIC_QPS_INIT);
	inet_pton(AF_INET, "198.18.0.77", &c.u.conn.dst_addr);
	NST_REQUIRE_EQ(nst_cmd(h, &c, NULL), 0);
	NST_REQUIRE_EQ(nst_next_event(h, &ev, WAIT_MS), 0);
	NST_EQ(ev.type, NIC_EV_CONN_FAILED);
	NST_EQ(ev.status, NIC_STATUS_UNREACHABLE);
	nic_host_detach(h);
}

/* From now on, drop the nth CM message (QP 1) from A to B; 0: none.  The
 * CM messages that rule dropped so far. */
static uint64_t drop_nth_cm(uint32_t nth)
{
	struct fab *f;
	struct fab_link_config cfg;
	struct fab_link_stats st = {0};

	NST_REQUIRE_EQ(fab_open(dir, &f), 0);
	fab_link_config_default(&cfg);
	cfg.nth = nth;
	cfg.nth_opcode = FAB_ANY;
	cfg.nth_qpn = 1; /* the CM's QP */
	NST_EQ(fab_link_stats(f, addr_a, addr_b, &st), 0);
	NST_EQ(fab_link_set(f, addr_a, addr_b, &cfg, FAB_LF_NTH), 0);
	fab_close(f);
	return st.tx.dropped_nth;
}

/* The disconnect's first DREQ is lost: B still hears of it, from a second. */
static void test_lost_dreq_sent_again(void)
{
	struct nic_cmd c = {.opcode = NIC_CMD_DISCONNECT};
	struct nic_event ev;
	struct pair p;
	uint64_t t0, dropped;

	pair_open(&p, sock_b, addr_b);
	dropped = drop_nth_cm(1);
	t0 = nst_now_ns();
	c.u.conn.qpn = p.a.qpn;
	NST_REQUIRE_EQ(nst_cmd(p.ha, &c, NULL), 0);
	NST_EQ(nst_next_event(p.hb, &ev, WAIT_MS), 0);
	NST_EQ(ev.type, NIC_EV_DISCONNECTED);
	NST_EQ(ev.qpn, p.b.qpn);
	printf("\n    peer told of the disconnect after %.0f ms, one DREQ lost\n",
	       (double)(nst_now_ns() - t0) / 1e6);
	NST_EQ(drop_nth_cm(0) - dropped, 1); /* the first DREQ did not arrive */
	pair_close(&p);
}

/* CONNECT of a (on NIC A) to port on NIC B: the conn_id B's listener is given. */
static uint64_t request(struct nst_qp *a, struct nic_host *hb, uint16_t port)
{
	struct nic_cmd c = {.opcode = NIC_CMD_CONNECT};
	struct nic_event ev;

	c.u.conn.qpn = a->qpn;
	c.u.conn.dst_addr = addr_b;
	c.u.conn.dst_port = port;
	NST_REQUIRE_EQ(nst_cmd(a->h, &c, NULL), 0);
	NST_REQUIRE_EQ(nst_next_event(hb, &ev, WAIT_MS), 0);
	NST_REQUIRE_EQ(ev.type, NIC_EV_CONN_REQUEST);
	return ev.conn_id;
}

/* Hosts on A and B with na and nb QPs (slots 0, 1, ...), B listening on port. */
static void cm_hosts(struct nic_host **ha, struct nic_host **hb, struct nst_qp *a, unsigned na,
		     struct nst_qp *b, unsigned nb, uint16_t port, uint16_t backlog)
{
	struct nic_cmd c = {.opcode = NIC_CMD_LISTEN};

	NST_REQUIRE_EQ(nic_host_attach(sock_a, ha), 0);
	NST_REQUIRE_EQ(nic_host_attach(sock_b, hb), 0);
	for (unsigned i = 0; i < na; i++)
		NST_REQUIRE_EQ(nst_qp_create(*ha, i, &a[i]), 0);
	for (unsigned i = 0; i < nb; i++)
		NST_REQUIRE_EQ(nst_qp_create(*hb, i, &b[i]), 0);
	c.u.listen.port = port;
	c.u.listen.backlog = backlog;
	NST_REQUIRE_EQ(nst_cmd(*hb, &c, NULL), 0);
}

/*
 * A request B never accepts fills its backlog of one until A gives up;
 * then B forgets it, and the next request is let in and accepted.
 */
/* B's count of expired connection requests, into *expired: at least one. */
static bool b_expired_one(void *expired)
{
	*(long *)expired = nic_counter(ADDR_B, "conn_requests_expired");
	return *(long *)expired >= 1;
}

static void test_unaccepted_request_expires(void)
{
	struct nic_host *ha, *hb;
	struct nst_qp a[2], b;
	struct nic_cmd c;
	struct nic_event ev;
	uint16_t port = next_port++;
	uint64_t stale;
	long expired = -1;

	cm_hosts(&ha, &hb, a, 2, &b, 1, port, 1);
	stale = request(&a[0], hb, port);
	NST_REQUIRE_EQ(nst_next_event(ha, &ev, WAIT_MS), 0);
	NST_EQ(ev.type, NIC_EV_CONN_FAILED);
	NST_EQ(ev.status, NIC_STATUS_TIMED_OUT);
	/* B drops the request a few hundred ms after A's last REQ. */
	(void)nst_wait_until(b_expired_one, &expired, WAIT_MS, 50);
	NST_REQUIRE_EQ(expired, 1);
	c = (struct nic_cmd){.opcode = NIC_CMD_ACCEPT};
	c.u.conn.qpn = b.qpn;
	c.u.conn.conn_id = stale;
	NST_EQ(nst_cmd(hb, &c, NULL), NIC_STATUS_BAD_CONN); /* it is gone */
	/* The backlog has room again: the next request is let in and accepted. */
	c.u.conn.conn_id = request(&a[1], hb, port);
	NST_REQUIRE_EQ(nst_cmd(hb, &c, NULL), 0);
	NST_REQUIRE_EQ(nst_next_event(ha, &ev, WAIT_MS), 0);
	NST_EQ(ev.type, NIC_EV_CONNECTED);
	NST_EQ(ev.qpn, a[1].qpn);
	nic_host_detach(ha);
	nic_host_detach(hb);
}

/* B accepts conn_id on b; B's QP connects and is then refused by A. */
static void accept_refused(struct nic_host *hb, struct nst_qp *b, uint64_t conn_id)
{
	struct nic_cmd c = {.opcode = NIC_CMD_ACCEPT};
	struct nic_event ev;

	c.u.conn.qpn = b->qpn;
	c.u.conn.conn_id = conn_id;
	NST_REQUIRE_EQ(nst_cmd(hb, &c, NULL), 0);
	NST_REQUIRE_EQ(nst_next_event(hb, &ev, WAIT_MS), 0);
	NST_EQ(ev.type, NIC_EV_CONNECTED);
	/* A's REJ comes back within a round trip; 2 s is generous. */
	NST_REQUIRE_EQ(nst_next_event(hb, &ev, WAIT_MS), 0);
	NST_EQ(ev.type, NIC_EV_DISCONNECTED);
	NST_EQ(ev.status, NIC_STATUS_CONN_REFUSED);
	NST_EQ(ev.qpn, b->qpn);
	NST_EQ(__atomic_load_n(&b->hdr->state, __ATOMIC_ACQUIRE), NIC_QPS_CLOSED);
}

/*
 * B accepts requests whose requester has given up: once after A destroyed
 * its connecting QP, once after A's connect timed out (B still holds the
 * request for a while), and once more after A destroyed its QP, with A's
 * first answer lost.  A refuses B's REP each time (B sends it again while
 * no RTU comes), and B's QP is closed with an event saying so instead of
 * staying connected to nobody.
 */
static void test_late_accept_refused(void)
{
	struct nic_host *ha, *hb;
	struct nst_qp a[3], b[3];
	struct nic_cmd c = {.opcode = NIC_CMD_DESTROY_QP};
	struct nic_event ev;
	uint16_t port = next_port++;
	uint64_t conn_id, dropped;

	cm_hosts(&ha, &hb, a, 3, b, 3, port, 3);
	conn_id = request(&a[0], hb, port);
	c.u.qp.qpn = a[0].qpn;
	NST_REQUIRE_EQ(nst_cmd(ha, &c, NULL), 0);
	accept_refused(hb, &b[0], conn_id);

	/* A gives up after six REQs, 67 ms apart at first and doubling, one
	 * 1.07 s interval after the last; B keeps the request for two such
	 * intervals after the last, so an ACCEPT right after A's failure comes
	 * about a second early enough. */
	conn_id = request(&a[1], hb, port);
	NST_REQUIRE_EQ(nst_next_event(ha, &ev, WAIT_MS), 0);
	NST_EQ(ev.type, NIC_EV_CONN_FAILED);
	NST_EQ(ev.status, NIC_STATUS_TIMED_OUT);
	accept_refused(hb, &b[1], conn_id);
	/* A's QP, back in INIT, was left alone by B's REP. */
	NST_EQ(__atomic_load_n(&a[1].hdr->state, __ATOMIC_ACQUIRE), NIC_QPS_INIT);

	conn_id = request(&a[2], hb, port);
	c.u.qp.qpn = a[2].qpn;
	NST_REQUIRE_EQ(nst_cmd(ha, &c, NULL), 0);
	dropped = drop_nth_cm(1);
	accept_refused(hb, &b[2], conn_id);
	NST_EQ(drop_nth_cm(0) - dropped, 1); /* the first REJ did not arrive */
	nic_host_detach(ha);
	nic_host_detach(hb);
}

/*
 * Nothing A sends reaches B once B has the request, so B never hears A's
 * RTU: A connects, B sends its REP six times (the REQ's CM response
 * timeout, 67.1 ms, doubling up to 1.07 s), closes its QP with
 * DISCONNECTED/TIMED_OUT after the whole budget of 3.15 s, and its DREQ
 * (which the link from B to A still carries) tells A.
 */
static void test_rtu_never_arrives(void)
{
	struct nic_host *ha, *hb;
	struct nst_qp a, b;
	struct nic_cmd c = {.opcode = NIC_CMD_ACCEPT};
	struct nic_event ev;
	uint16_t port = next_port++;
	uint64_t t0;
	double ms;

	cm_hosts(&ha, &hb, &a, 1, &b, 1, port, 1);
	c.u.conn.conn_id = request(&a, hb, port);
	c.u.conn.qpn = b.qpn;
	NST_REQUIRE_EQ(nst_link_down(dir, addr_a, addr_b, true), 0);
	t0 = nst_now_ns();
	NST_EQ(nst_cmd(hb, &c, NULL), 0);
	NST_EQ(nst_next_event(hb, &ev, WAIT_MS), 0);
	NST_EQ(ev.type, NIC_EV_CONNECTED);
	NST_EQ(nst_next_event(ha, &ev, WAIT_MS), 0);
	NST_EQ(ev.type, NIC_EV_CONNECTED);
	NST_EQ(nst_next_event(hb, &ev, WAIT_MS), 0);
	ms = (double)(nst_now_ns() - t0) / 1e6;
	NST_EQ(ev.type, NIC_EV_DISCONNECTED);
	NST_EQ(ev.status, NIC_STATUS_TIMED_OUT);
	NST_EQ(ev.qpn, b.qpn);
	/* The timer itself is tested: never early (67.1 ms * (1 + 2 + 4 + 8 +
	 * 16 + 16) = 3154 ms with the default CM timers); late only as much as
	 * a loaded machine makes it. */
	NST_GE(ms, 3154);
	NST_LT(ms, WAIT_MS);
	NST_EQ(__atomic_load_n(&b.hdr->state, __ATOMIC_ACQUIRE), NIC_QPS_CLOSED);
	NST_EQ(nst_next_event(ha, &ev, WAIT_MS), 0);
	NST_EQ(ev.type, NIC_EV_DISCONNECTED);
	NST_EQ(ev.status, NIC_STATUS_OK);
	NST_EQ(ev.qpn, a.qpn);
	printf("\n    accepting side gave up after %.0f ms without an RTU\n", ms);
	NST_EQ(nst_link_down(dir, addr_a, addr_b, false), 0);
	nic_host_detach(ha);
	nic_host_detach(hb);
}

/* ---- Shared buffers (ABI 6) ---------------------------------------------- */

static uint8_t *shm_alloc(struct nic_host *h, size_t n)
{
	void *p = NULL;

	NST_REQUIRE_EQ(nic_host_shm_alloc(h, n, &p), 0);
	return p;
}

/* A SHM_MAP or SHM_UNMAP the test composes itself: the NIC's status. */
static uint16_t shm_cmd(struct nic_host *h, uint16_t op, const void *va, uint64_t len)
{
	struct nic_cmd c = {.opcode = op};
	struct nic_cpl cpl;

	c.u.shm.va = (uintptr_t)va;
	c.u.shm.len = len;
	NST_REQUIRE_EQ(nic_host_cmd(h, &c, &cpl, WAIT_MS), 0);
	return cpl.status;
}

/* Send fd as a shared-buffer descriptor on h's attach socket. */
static void shm_send_fd(struct nic_host *h, int fd)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u = {0};
	struct iovec iov = {.iov_base = (void *)NIC_SHM_MSG_MAGIC, .iov_len = NIC_SHM_MSG_LEN};
	struct msghdr m = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	NST_REQUIRE_EQ(sendmsg(nic_host_notify_fd(h), &m, MSG_NOSIGNAL), (ssize_t)NIC_SHM_MSG_LEN);
}

/*
 * SEND, WRITE and READ of 1 byte to 3 MiB at odd offsets with the sender's
 * buffers, the receiver's, or both in shared memory: the same bytes arrive,
 * and the NIC of each side with shared buffers copied through them (and
 * only those).
 */
static void test_shared_buffers_integrity(void)
{
	static const size_t sizes[] = {1, 63, 4096, 4097, 65537, 1048579, 3u << 20};
	const size_t cap = 4u << 20;

	for (unsigned mode = 1; mode <= 3; mode++) {
		const bool a_shm = mode & 1, b_shm = mode & 2;
		struct pair p;
		uint8_t *src, *back, *dst;
		long a0, b0, a1, b1;

		pair_open(&p, sock_b, addr_b);
		src = a_shm ? shm_alloc(p.ha, cap) : map(cap);
		back = a_shm ? shm_alloc(p.ha, cap) : map(cap);
		dst = b_shm ? shm_alloc(p.hb, cap) : map(cap);
		a0 = nic_counter(ADDR_A, "dma_shm");
		b0 = nic_counter(ADDR_B, "dma_shm");
		integrity_in(&p, src, dst, back, cap, sizes, sizeof(sizes) / sizeof(sizes[0]));
		a1 = nic_counter(ADDR_A, "dma_shm");
		b1 = nic_counter(ADDR_B, "dma_shm");
		printf("\n    mode %u: shared-buffer copies A %ld, B %ld", mode, a1 - a0, b1 - b0);
		NST_TRUE(a0 >= 0 && b0 >= 0);
		NST_EQ(a1 > a0, a_shm);
		NST_EQ(b1 > b0, b_shm);
		if (a_shm) {
			NST_EQ(nic_host_shm_free(p.ha, src, cap), 0);
			NST_EQ(nic_host_shm_free(p.ha, back, cap), 0);
		} else {
			munmap(src, cap);
			munmap(back, cap);
		}
		if (b_shm)
			NST_EQ(nic_host_shm_free(p.hb, dst, cap), 0);
		else
			munmap(dst, cap);
		pair_close(&p);
	}
}

/* A WRITE of n bytes from A's src to B's dst (through rkey), then a READ
 * of them back into A's back: both arrive intact. */
static void write_read(struct pair *p, uint8_t *src, uint32_t lk, uint8_t *back, uint32_t bk,
		       uint8_t *dst, uint32_t rkey, size_t n, uint32_t seed)
{
	struct nic_send_wqe w;
	struct nic_cqe c;

	nst_fill(src, n, seed);
	memset(back, 0, n);
	w = nst_swqe(1, NIC_WR_RDMA_WRITE, src, (uint32_t)n, lk, (uintptr_t)dst, rkey);
	NST_REQUIRE_EQ(nst_post_send(&p->a, &w), 0);
	NST_REQUIRE_EQ(poll_cq(&p->a, &c, WAIT_MS), 0);
	NST_EQ(c.status, NIC_WC_SUCCESS);
	NST_EQ_U(nst_sum32(dst, n), nst_sum32(src, n));
	w = nst_swqe(2, NIC_WR_RDMA_READ, back, (uint32_t)n, bk, (uintptr_t)dst, rkey);
	NST_REQUIRE_EQ(nst_post_send(&p->a, &w), 0);
	NST_REQUIRE_EQ(poll_cq(&p->a, &c, WAIT_MS), 0);
	NST_EQ(c.status, NIC_WC_SUCCESS);
	NST_EQ(memcmp(back, src, n), 0);
}

/*
 * A buffer that starts in a shared map and runs on into plain memory (the
 * map's end is not the region's): transfers across the boundary land where
 * they would without the map.  Then SHM_UNMAP: the same memory, still
 * mapped in the host, is reached through the kernel again, with the same
 * result, and no more copies go through a map.
 */
static void test_shared_buffer_edges_and_unmap(void)
{
	const size_t half = 1u << 20, n = 256u << 10;
	struct pair p;
	uint8_t *region, *src = map(n), *back = map(n);
	uint32_t lk, bk, dmr, rkey;
	long copies;
	int fd;

	pair_open(&p, sock_b, addr_b);
	region = map(2 * half);
	fd = memfd_create("nst-edge", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	NST_REQUIRE(fd >= 0);
	NST_REQUIRE_EQ(ftruncate(fd, (off_t)half), 0);
	NST_REQUIRE_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
	NST_REQUIRE(mmap(region, half, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) ==
		    region);
	shm_send_fd(p.hb, fd);
	close(fd);
	NST_REQUIRE_EQ(shm_cmd(p.hb, NIC_CMD_SHM_MAP, region, half), NIC_STATUS_OK);
	lk = nst_reg(p.ha, src, n, 0);
	bk = nst_reg(p.ha, back, n, NIC_ACCESS_LOCAL_WRITE);
	rkey = expose(&p, region, 2 * half, NIC_ACCESS_REMOTE_READ | NIC_ACCESS_REMOTE_WRITE, &dmr);
	NST_REQUIRE(lk && bk && rkey);
	/* Inside the map, across its end, and wholly past it. */
	copies = nic_counter(ADDR_B, "dma_shm");
	write_read(&p, src, lk, back, bk, region + 4097, rkey, n, 1);
	NST_TRUE(nic_counter(ADDR_B, "dma_shm") > copies);
	write_read(&p, src, lk, back, bk, region + half - n / 2 - 3, rkey, n, 2);
	write_read(&p, src, lk, back, bk, region + half + 5, rkey, n, 3);
	/* Only the map's start names it; then it is gone. */
	NST_EQ(shm_cmd(p.hb, NIC_CMD_SHM_UNMAP, region + 4096, 0), NIC_STATUS_BAD_RANGE);
	NST_EQ(shm_cmd(p.hb, NIC_CMD_SHM_UNMAP, region, 0), NIC_STATUS_OK);
	NST_EQ(shm_cmd(p.hb, NIC_CMD_SHM_UNMAP, region, 0), NIC_STATUS_BAD_RANGE);
	copies = nic_counter(ADDR_B, "dma_shm");
	write_read(&p, src, lk, back, bk, region + 4097, rkey, n, 4);
	write_read(&p, src, lk, back, bk, region + half - n / 2 - 3, rkey, n, 5);
	NST_EQ(nic_counter(ADDR_B, "dma_shm"), copies);
	pair_close(&p);
	munmap(region, 2 * half);
	munmap(src, n);
	munmap(back, n);
}

/* Punches the whole memfd out, again and again, until told to stop. */
struct puncher {
	int fd;
	size_t len;
	int stop;
	unsigned rounds;
};

static void *punch_loop(void *arg)
{
	struct puncher *pu = arg;

	/* Bounded: the test stops it within its own deadline. */
	while (!__atomic_load_n(&pu->stop, __ATOMIC_ACQUIRE) && pu->rounds < 10000000u) {
		if (fallocate(pu->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
			      (off_t)pu->len) == 0)
			__atomic_add_fetch(&pu->rounds, 1, __ATOMIC_RELEASE);
		sched_yield();
	}
	return NULL;
}

/*
 * A hostile responder B: it has its NIC map a memfd at an address where B
 * has plain memory (its own view of the memfd is elsewhere), then punches
 * the memfd's pages out over and over while its peer WRITEs and READs
 * there, unmaps its own view, and drops the map while a WRITE is in
 * flight.  The NIC never faults: every transfer completes, what it moves
 * is only ever B's memfd (or B's plain memory once the map is gone), and
 * the NIC serves a checksummed transfer afterwards.
 */
static void test_shared_buffer_hostile_responder(void)
{
	const size_t cap = 4u << 20, n = 1u << 20;
	uint8_t *src = map(cap), *back = map(cap), *plain = map(cap), *view;
	struct puncher pu = {.len = cap};
	uint32_t lk, bk, dmr, rkey;
	struct nic_send_wqe w;
	struct nic_cqe c;
	struct pair p;
	pthread_t th;
	size_t bad = 0;

	pair_open(&p, sock_b, addr_b);
	pu.fd = memfd_create("nst-hostile", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	NST_REQUIRE(pu.fd >= 0);
	NST_REQUIRE_EQ(ftruncate(pu.fd, (off_t)cap), 0);
	NST_REQUIRE_EQ(fcntl(pu.fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL), 0);
	view = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_SHARED, pu.fd, 0);
	NST_REQUIRE(view != MAP_FAILED);
	memset(plain, 0xee, cap);
	shm_send_fd(p.hb, pu.fd);
	NST_REQUIRE_EQ(shm_cmd(p.hb, NIC_CMD_SHM_MAP, plain, cap), NIC_STATUS_OK);
	lk = nst_reg(p.ha, src, cap, 0);
	bk = nst_reg(p.ha, back, cap, NIC_ACCESS_LOCAL_WRITE);
	rkey = expose(&p, plain, cap, NIC_ACCESS_REMOTE_READ | NIC_ACCESS_REMOTE_WRITE, &dmr);
	NST_REQUIRE(lk && bk && rkey);
	/* The NIC reaches the memfd at the offsets of the map's va, not what
	 * B has there. */
	nst_fill(src, n, 11);
	w = nst_swqe(1, NIC_WR_RDMA_WRITE, src, (uint32_t)n, lk, (uintptr_t)plain + 5, rkey);
	NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	NST_REQUIRE_EQ(poll_cq(&p.a, &c, WAIT_MS), 0);
	NST_EQ(c.status, NIC_WC_SUCCESS);
	NST_EQ(memcmp(view + 5, src, n), 0);
	memset(view + 5, 0x5a, n);
	w = nst_swqe(2, NIC_WR_RDMA_READ, back, (uint32_t)n, bk, (uintptr_t)plain + 5, rkey);
	NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	NST_REQUIRE_EQ(poll_cq(&p.a, &c, WAIT_MS), 0);
	NST_EQ(c.status, NIC_WC_SUCCESS);
	NST_EQ(back[0], 0x5a);
	NST_EQ(back[n - 1], 0x5a);
	for (size_t i = 0; i < cap; i++)
		bad += plain[i] != 0xee;
	NST_EQ_U(bad, 0);
	/* Pages punched out under the transfers: each completes, each byte
	 * READ back is what was written or a hole's zero. */
	NST_REQUIRE_EQ(pthread_create(&th, NULL, punch_loop, &pu), 0);
	for (uint32_t round = 0; round < 16; round++) {
		uint8_t *at = plain + 4096 * round + round;

		nst_fill(src, n, round);
		w = nst_swqe(1, NIC_WR_RDMA_WRITE, src, (uint32_t)n, lk, (uintptr_t)at, rkey);
		NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
		NST_REQUIRE_EQ(poll_cq(&p.a, &c, WAIT_MS), 0);
		NST_EQ(c.status, NIC_WC_SUCCESS);
		memset(back, 0x11, n);
		w = nst_swqe(2, NIC_WR_RDMA_READ, back, (uint32_t)n, bk, (uintptr_t)at, rkey);
		NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
		NST_REQUIRE_EQ(poll_cq(&p.a, &c, WAIT_MS), 0);
		NST_EQ(c.status, NIC_WC_SUCCESS);
		bad = 0;
		for (size_t i = 0; i < n; i++)
			bad += back[i] != src[i] && back[i] != 0;
		NST_EQ_U(bad, 0);
		/* B's own view of the memfd goes away half way: the NIC's
		 * mapping is its own. */
		if (round == 8) {
			NST_EQ(mprotect(view, cap, PROT_NONE), 0);
			NST_EQ(munmap(view, cap), 0);
		}
	}
	__atomic_store_n(&pu.stop, 1, __ATOMIC_RELEASE);
	NST_EQ(pthread_join(th, NULL), 0);
	printf("\n    memfd punched out %u times under the transfers",
	       __atomic_load_n(&pu.rounds, __ATOMIC_ACQUIRE));
	NST_GT(__atomic_load_n(&pu.rounds, __ATOMIC_ACQUIRE), 0);
	/* The map dropped while a WRITE is in flight: it completes, and the
	 * NIC wrote only the memfd and then B's plain memory. */
	nst_fill(src, 3u << 20, 99);
	w = nst_swqe(3, NIC_WR_RDMA_WRITE, src, 3u << 20, lk, (uintptr_t)plain, rkey);
	NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
	NST_EQ(shm_cmd(p.hb, NIC_CMD_SHM_UNMAP, plain, 0), NIC_STATUS_OK);
	NST_REQUIRE_EQ(poll_cq(&p.a, &c, WAIT_MS), 0);
	NST_EQ(c.status, NIC_WC_SUCCESS);
	bad = 0;
	for (size_t i = 0; i < (3u << 20); i++)
		bad += plain[i] != src[i] && plain[i] != 0xee;
	NST_EQ_U(bad, 0);
	NST_EQ(kill(nic_b, 0), 0);
	pair_close(&p);
	close(pu.fd);
	/* The NIC still serves: a checksummed round trip on a fresh pair. */
	pair_open(&p, sock_b, addr_b);
	lk = nst_reg(p.ha, src, cap, 0);
	bk = nst_reg(p.ha, back, cap, NIC_ACCESS_LOCAL_WRITE);
	rkey = expose(&p, plain, cap, NIC_ACCESS_REMOTE_READ | NIC_ACCESS_REMOTE_WRITE, &dmr);
	NST_REQUIRE(lk && bk && rkey);
	write_read(&p, src, lk, back, bk, plain + 7, rkey, n, 12);
	pair_close(&p);
	munmap(src, cap);
	munmap(back, cap);
	munmap(plain, cap);
}

static bool nic_b_holds_no_shm(void *arg)
{
	int fds, maps;

	(void)arg;
	return nst_memfd_refs(nic_b, "nicsim-shm", &fds, &maps) == 0 && fds == 0 && maps == 0;
}

/* 64 bytes of a WRITE's source that have arrived at its destination. */
struct reach {
	const uint8_t *src, *dst;
};

static bool stream_reached(void *arg)
{
	const struct reach *r = arg;

	return memcmp(r->dst, r->src, 64) == 0;
}

/*
 * A host that goes away (its socket closed, as when it is killed) while
 * its peer's WRITEs stream into its shared buffer, at several points of
 * the stream: its NIC writes or drops what it held, unmaps the buffer,
 * and goes on serving; the peer's WRITE completes, successfully or
 * flushed.
 */
static void test_shared_buffer_detach_mid_write(void)
{
	const size_t cap = 16u << 20;
	uint8_t *src = map(cap), *back = map(cap);

	nst_fill(src, cap, 5);
	for (unsigned round = 0; round < 4; round++) {
		struct nic_send_wqe w;
		struct nic_cqe c;
		struct pair p;
		uint32_t lk, dmr, rkey;
		struct reach arrived;
		uint8_t *dst;

		pair_open(&p, sock_b, addr_b);
		dst = shm_alloc(p.hb, cap);
		lk = nst_reg(p.ha, src, cap, 0);
		rkey = expose(&p, dst, cap, NIC_ACCESS_REMOTE_WRITE, &dmr);
		NST_REQUIRE(lk && rkey);
		w = nst_swqe(1, NIC_WR_RDMA_WRITE, src, (uint32_t)cap, lk, (uintptr_t)dst, rkey);
		NST_REQUIRE_EQ(nst_post_send(&p.a, &w), 0);
		/* Gone at once, or once the stream has reached a quarter, a
		 * half, three quarters of the buffer (or has ended: any point
		 * of it will do). */
		arrived.dst = dst + round * (cap / 4) - (round ? 64 : 0);
		arrived.src = src + round * (cap / 4) - (round ? 64 : 0);
		if (round)
			(void)nst_wait_until(stream_reached, &arrived, WAIT_MS, 1);
		nic_host_detach(p.hb);
		NST_REQUIRE_EQ(poll_cq(&p.a, &c, 4 * WAIT_MS), 0);
		printf("\n    round %u: the WRITE completed with status %u", round, c.status);
		NST_TRUE(c.status == NIC_WC_SUCCESS || c.status == NIC_WC_WR_FLUSH_ERR ||
			 c.status == NIC_WC_REM_ACCESS_ERR || c.status == NIC_WC_REM_OP_ERR ||
			 c.status == NIC_WC_RETRY_EXC_ERR);
		nic_host_detach(p.ha);
		/* The host library cannot free it without its attachment. */
		NST_EQ(munmap(dst, cap), 0);
		NST_TRUE(nst_wait_until(nic_b_holds_no_shm, NULL, WAIT_MS, 5));
		NST_EQ(kill(nic_b, 0), 0);
	}
	/* The NIC still serves: a checksummed round trip. */
	{
		struct pair p;
		uint8_t *dst = map(1u << 20);
		uint32_t lk, bk, dmr, rkey;

		pair_open(&p, sock_b, addr_b);
		lk = nst_reg(p.ha, src, 1u << 20, 0);
		bk = nst_reg(p.ha, back, 1u << 20, NIC_ACCESS_LOCAL_WRITE);
		rkey = expose(&p, dst, 1u << 20, NIC_ACCESS_REMOTE_READ | NIC_ACCESS_REMOTE_WRITE,
			      &dmr);
		NST_REQUIRE(lk && bk && rkey);
		write_read(&p, src, lk, back, bk, dst + 3, rkey, (1u << 20) - 3, 6);
		pair_close(&p);
		munmap(dst, 1u << 20);
	}
	munmap(src, cap);
	munmap(back, cap);
}

static int shm_holder(void *arg, int ready_fd)
{
	struct nic_host *h;
	void *bufs[3];

	(void)arg;
	if (nic_host_attach(sock_a, &h))
		return 1;
	for (unsigned i = 0; i < 3; i++) {
		if (nic_host_shm_alloc(h, (i + 1) * 65536, &bufs[i]))
			return 2;
		memset(bufs[i], 0x77, 65536);
	}
	if (write(ready_fd, "r", 1) != 1)
		return 3;
	for (;;)
		pause();
	return 0;
}

static bool nic_a_holds_no_shm(void *arg)
{
	int fds, maps;

	(void)arg;
	return nst_memfd_refs(nic_a, "nicsim-shm", &fds, &maps) == 0 && fds == 0 && maps == 0;
}

/*
 * A host killed with shared buffers mapped: the NIC unmaps every one as it
 * tears the context down, and it held no descriptor of them meanwhile.
 */
static void test_host_killed_with_shared_buffers(void)
{
	uint64_t maps0 = nst_nic_stat(sock_a, NST_STAT(shm_maps));
	uint64_t unmaps0 = nst_nic_stat(sock_a, NST_STAT(shm_unmaps));
	int fds, maps;
	pid_t child;

	NST_REQUIRE_EQ(nst_memfd_refs(nic_a, "nicsim-shm", &fds, &maps), 0);
	NST_REQUIRE_EQ(fds + maps, 0);
	child = nst_fork_ready(shm_holder, NULL, WAIT_MS);
	NST_REQUIRE(child > 0);
	NST_EQ_U(nst_nic_stat(sock_a, NST_STAT(shm_maps)), maps0 + 3);
	NST_EQ(nst_memfd_refs(nic_a, "nicsim-shm", &fds, &maps), 0);
	NST_EQ(fds, 0);
	NST_EQ(maps, 3);
	NST_EQ(kill(child, SIGKILL), 0);
	nst_wait(child, WAIT_MS);
	NST_EQ_U(nst_wait_nic_stat(sock_a, NST_STAT(shm_unmaps), unmaps0 + 3, WAIT_MS),
		 unmaps0 + 3);
	NST_TRUE(nst_wait_until(nic_a_holds_no_shm, NULL, WAIT_MS, 5));
}

static int init(void)
{
	const char *const addrs[] = {ADDR_A, ADDR_B, ADDR_C, ADDR_D, NULL};

	if (nst_tmpdir(dir, sizeof(dir), "rc") < 0)
		return -1;
	snprintf(sock_a, sizeof(sock_a), "%s/nic-" ADDR_A ".sock", dir);
	snprintf(sock_b, sizeof(sock_b), "%s/nic-" ADDR_B ".sock", dir);
	snprintf(sock_c, sizeof(sock_c), "%s/nic-" ADDR_C ".sock", dir);
	snprintf(sock_d, sizeof(sock_d), "%s/nic-" ADDR_D ".sock", dir);
	fab_addr_parse(ADDR_A, &addr_a);
	fab_addr_parse(ADDR_B, &addr_b);
	if (nst_make_fabric(dir, addrs) < 0)
		return -1;
	if (getenv("NST_LOG"))
		nic_args[1] = getenv("NST_LOG");
	return nst_nics_start(dir, nics, NNICS, WAIT_MS) < 0 ? -1 : 0;
}

/* Each test from the NICs as they were started (one a failed test left
 * holding something, or that died, is restarted: nstnic.h) and both links
 * with their default settings (a failed test may leave one down or lossy). */
static void setup(void)
{
	NST_EQ(nst_nics_ready(dir, nics, NNICS, WAIT_MS), 0);
	NST_EQ(nst_link_down(dir, addr_a, addr_b, false), 0);
	NST_EQ(nst_link_down(dir, addr_b, addr_a, false), 0);
}

static int clean(void)
{
	const pid_t pids[] = {nic_a, nic_b};

	return nst_stop_nics_clean(dir, pids, 2, WAIT_MS);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"two_nics_integrity", test_two_nics_integrity},
	    {"two_processes_one_nic", test_two_processes_one_nic},
	    {"one_process_two_nics", test_one_process_two_nics},
	    {"one_process_hostile_neighbour", test_one_process_hostile_neighbour},
	    {"one_process_shared_descriptors", test_one_process_shared_descriptors},
	    {"r4_r6_refused_by_the_nic", test_r4_r6_refused_by_the_nic},
	    {"r5_foreign_region_key", test_r5_foreign_region_key},
	    {"connect_refused_and_unreachable", test_connect_refused_and_unreachable},
	    {"lost_dreq_sent_again", test_lost_dreq_sent_again},
	    {"unaccepted_request_expires", test_unaccepted_request_expires},
	    {"late_accept_refused", test_late_accept_refused},
	    {"rtu_never_arrives", test_rtu_never_arrives},
	    {"retry_limit_when_link_down", test_retry_limit_when_link_down},
	    {"peer_killed_mid_transfer", test_peer_killed_mid_transfer},
	    {"rc_over_a_lossy_link", test_rc_over_a_lossy_link},
	    {"bulk_in_units_only_on_plain_links", test_bulk_in_units_only_on_plain_links},
	    {"dereg_waits_for_dma_in_flight", test_dereg_waits_for_dma_in_flight},
	    {"malformed_request_in_order", test_malformed_request_in_order},
	    {"inline_send_and_write", test_inline_send_and_write},
	    {"inline_malformed", test_inline_malformed},
	    {"recv_inline", test_recv_inline},
	    {"inline_attacks", test_inline_attacks},
	    {"recv_inline_attacks", test_recv_inline_attacks},
	    {"rnr_wait_is_the_responders_timer", test_rnr_wait_is_the_responders_timer},
	    {"host_memory_vanished_mid_transfer", test_host_memory_vanished_mid_transfer},
	    {"shared_buffers_integrity", test_shared_buffers_integrity},
	    {"shared_buffer_edges_and_unmap", test_shared_buffer_edges_and_unmap},
	    {"shared_buffer_hostile_responder", test_shared_buffer_hostile_responder},
	    {"shared_buffer_detach_mid_write", test_shared_buffer_detach_mid_write},
	    {"host_killed_with_shared_buffers", test_host_killed_with_shared_buffers},
	    {NULL, NULL},
	};

	static const struct nst_suite suite = {
	    .name = "transport", .tests = tests, .init = init, .clean = clean, .setup = setup};

	return nst_run_suite(argc, argv, &suite);
}

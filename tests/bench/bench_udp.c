/*
 * Two NICs in two network namespaces joined by a veth pair of 1500-byte
 * links, every frame a UDP datagram (nicsimd --udp): RDMA WRITE bandwidth
 * at 64 KiB and 1 MiB (16 requests in flight, raw work requests) and the
 * 8 B SEND half round trip, beside the limit of the same path measured in
 * the same run: a plain pair of UDP sockets, one in each namespace, moving
 * datagrams of the size nicsim's carry (a full packet of the 1024-byte
 * path MTU: 1040 bytes of UDP payload), in batches of 32 (sendmmsg,
 * recvmmsg), and ping-ponging 8-byte datagrams.
 *
 * Each NIC is pinned to one CPU, and so is the reference's sender and its
 * receiver, the same CPU as the NIC it stands for.  Bandwidths are medians
 * of five rounds, the two kinds interleaved.
 *
 * Target: RDMA WRITE of 1 MiB at least 0.5x the UDP pair's bandwidth.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fab_addr.h"
#include "nstest.h"
#include "nstnet.h"
#include "nstnic.h"
#include "nstverbs.h"

#define ADDR_A "198.18.0.1"
#define ADDR_B "198.18.0.2"
#define WAIT_MS 20000
#define DEPTH 16u
#define ROUNDS 5
#define DGRAM 1040u /* BTH, 1024 bytes of payload, ICRC */
#define BATCH 32u
#define REF_PORT 9000
#define BUF (16u << 20)

static struct nst_net net;
static char dir[256], dir_a[300], dir_b[300], sock_a[360], sock_b[360];
static pid_t nic_a = -1, nic_b = -1;
static double ref_lost; /* share of the reference's datagrams lost, summed over rounds */

/* ---- nicsim ------------------------------------------------------------------------ */

struct conn {
	struct nic_host *ha, *hb;
	struct nst_qp a, b;
	uint8_t *src, *dst, *rbuf;
	uint32_t lk, rkey, bk;
};

/* n RDMA WRITEs of len bytes, DEPTH in flight: GB/s. */
static double write_round(struct conn *c, size_t len)
{
	size_t n = (64u << 20) / len, posted = 0, done = 0;
	uint64_t t0 = nst_now_ns();
	struct nic_cqe cqe;

	while (done < n) {
		while (posted < n && posted - done < DEPTH) {
			struct nic_send_wqe w = {
			    .wr_id = posted, .opcode = NIC_WR_RDMA_WRITE, .num_sge = 1};

			w.sge[0] = (struct nic_sge){
			    .va = (uintptr_t)c->src, .len = (uint32_t)len, .lkey = c->lk};
			w.remote_va = (uintptr_t)c->dst;
			w.rkey = c->rkey;
			if (nst_post_send(&c->a, &w))
				return 0;
			posted++;
		}
		if (nst_sleep_cq(&c->a, &cqe, WAIT_MS))
			return 0;
		done++;
		while (done < n && nst_take_cqe(&c->a, &cqe)) {
			if (nst_cqe_ok(&cqe))
				return 0;
			done++;
		}
	}
	return (double)(len * n) / (double)(nst_now_ns() - t0);
}

static int post_small_recv(struct nst_qp *qp, uint8_t *buf, uint32_t key, uint64_t id)
{
	struct nic_recv_wqe r = {.wr_id = id, .num_sge = 1};

	r.sge[0] = (struct nic_sge){.va = (uintptr_t)buf, .len = 64, .lkey = key};
	return nst_post_recv(qp, &r);
}

static int send_small(struct nst_qp *qp, uint64_t id)
{
	struct nic_send_wqe w = {
	    .wr_id = id, .opcode = NIC_WR_SEND, .flags = NIC_WR_F_INLINE, .inline_len = 8};

	return nst_post_send(qp, &w);
}

/* Wait for a receive on qp, and for its SEND's completion if it has one
 * outstanding. */
static int await_recv(struct nst_qp *qp, bool *send_out)
{
	struct nic_cqe cqe;
	bool got = false;

	while (!got || *send_out) {
		if (nst_spin_cq(qp, &cqe, WAIT_MS))
			return -EIO;
		if (cqe.opcode == NIC_WC_RECV)
			got = true;
		else
			*send_out = false;
	}
	return 0;
}

/* Median half round trip of 8-byte SENDs, A to B and back, one thread
 * playing both hosts: microseconds. */
static double nicsim_half_rtt(struct conn *c, unsigned n)
{
	double *t = calloc(n, sizeof(*t)), med;
	bool out_a = false, out_b = false;

	NST_REQUIRE(t != NULL);
	for (unsigned i = 0; i < n; i++) {
		uint64_t t0 = nst_now_ns();

		NST_REQUIRE_EQ(send_small(&c->a, i), 0);
		out_a = true;
		NST_REQUIRE_EQ(await_recv(&c->b, &out_b), 0);
		NST_REQUIRE_EQ(post_small_recv(&c->b, c->rbuf, c->bk, i), 0);
		NST_REQUIRE_EQ(send_small(&c->b, i), 0);
		out_b = true;
		NST_REQUIRE_EQ(await_recv(&c->a, &out_a), 0);
		NST_REQUIRE_EQ(post_small_recv(&c->a, c->src, c->lk, i), 0);
		t[i] = (double)(nst_now_ns() - t0) / 2000.0;
	}
	med = nst_median(t, n);
	free(t);
	return med;
}

/* ---- The same path without nicsim: a pair of UDP sockets ---------------------------------- */

struct sock_req {
	const char *addr;
	int fd;
};

static void make_udp(void *arg)
{
	struct sock_req *r = arg;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(REF_PORT)};
	int big = 8 << 20;

	fab_addr_parse(r->addr, &sa.sin_addr.s_addr);
	r->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (r->fd < 0)
		return;
	setsockopt(r->fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
	setsockopt(r->fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big));
	if (bind(r->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(r->fd);
		r->fd = -1;
	}
}

/* A UDP socket bound to addr:REF_PORT in namespace ns (this thread goes
 * there and comes back), or -1. */
static int udp_in(const char *ns, const char *addr)
{
	int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	struct sock_req r = {.addr = addr, .fd = -1};

	if (self < 0)
		return -1;
	if (nst_net_enter(ns) == 0) {
		make_udp(&r);
		if (setns(self, CLONE_NEWNET) < 0)
			abort();
	}
	close(self);
	return r.fd;
}

static void peer_of(int fd, const char *addr)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(REF_PORT)};

	fab_addr_parse(addr, &sa.sin_addr.s_addr);
	NST_REQUIRE_EQ(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
}

/*
 * The receiver of a reference round, a process of its own on CPU 1: the
 * bytes of the datagrams it gets from the first until `bytes` (those the
 * sender sent), or until the sender says it stopped and nothing more came
 * for 50 ms; then the nanoseconds it took, written to out.
 */
struct sink_arg {
	int fd, out;
	uint64_t bytes;
};

static int sink(void *arg, int ready_fd)
{
	struct sink_arg *s = arg;
	static uint8_t bufs[BATCH][2048];
	struct mmsghdr m[BATCH];
	struct iovec iov[BATCH];
	struct timeval tv = {.tv_usec = 50000};
	uint64_t got = 0, t0 = 0, t1 = 0;
	const char one = 1;

	nst_pin(0, 1);
	setsockopt(s->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	for (unsigned k = 0; k < BATCH; k++) {
		iov[k] = (struct iovec){.iov_base = bufs[k], .iov_len = sizeof(bufs[k])};
		m[k] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov[k], .msg_iovlen = 1}};
	}
	if (write(ready_fd, &one, 1) != 1)
		return 1;
	while (got < s->bytes) {
		int n = recvmmsg(s->fd, m, BATCH, 0, NULL);

		if (n <= 0) {
			if (t0)
				break; /* the rest was lost: what came is the rate */
			continue;
		}
		if (!t0)
			t0 = nst_now_ns();
		for (int k = 0; k < n; k++)
			got += m[k].msg_len;
		t1 = nst_now_ns();
	}
	{
		uint64_t r[2] = {got, t1 - t0};

		return write(s->out, r, sizeof(r)) == (ssize_t)sizeof(r) ? 0 : 2;
	}
}

/* One round of the reference: 64 MiB in DGRAM-byte datagrams, A to B: GB/s
 * of what arrived. */
static double ref_round(int fa, int fb)
{
	static uint8_t data[DGRAM];
	const uint64_t total = 64u << 20;
	struct mmsghdr m[BATCH];
	struct iovec iov = {.iov_base = data, .iov_len = DGRAM};
	struct sink_arg sa = {.fd = fb, .bytes = total / DGRAM * DGRAM};
	uint64_t sent = 0, r[2] = {0, 0};
	int p[2];
	pid_t pid;

	NST_REQUIRE_EQ(pipe2(p, O_CLOEXEC), 0);
	sa.out = p[1];
	pid = nst_fork_ready(sink, &sa, WAIT_MS);
	NST_REQUIRE(pid > 0);
	close(p[1]);
	for (unsigned k = 0; k < BATCH; k++)
		m[k] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov, .msg_iovlen = 1}};
	while (sent + DGRAM <= total) {
		int n = sendmmsg(fa, m, BATCH, 0);

		if (n < 0 && errno != ENOBUFS && errno != EAGAIN)
			break;
		sent += n > 0 ? (uint64_t)n * DGRAM : 0;
	}
	NST_EQ(read(p[0], r, sizeof(r)), (ssize_t)sizeof(r));
	close(p[0]);
	nst_wait(pid, WAIT_MS);
	ref_lost += sent > r[0] ? (double)(sent - r[0]) / (double)sent : 0;
	return r[1] ? (double)r[0] / (double)r[1] : 0;
}

/* Median half round trip of 8-byte datagrams, A to B and back. */
static double ref_half_rtt(int fa, int fb, unsigned n)
{
	double *t = calloc(n, sizeof(*t)), med;
	char b[8] = {0};

	NST_REQUIRE(t != NULL);
	for (unsigned i = 0; i < n; i++) {
		uint64_t t0 = nst_now_ns();

		NST_REQUIRE_EQ(send(fa, b, 8, 0), 8);
		NST_REQUIRE_EQ(recv(fb, b, 8, 0), 8);
		NST_REQUIRE_EQ(send(fb, b, 8, 0), 8);
		NST_REQUIRE_EQ(recv(fa, b, 8, 0), 8);
		t[i] = (double)(nst_now_ns() - t0) / 2000.0;
	}
	med = nst_median(t, n);
	free(t);
	return med;
}

/* ---- The benchmark ------------------------------------------------------------------------ */

static void bench_udp_path(void)
{
	static const size_t sizes[] = {64u << 10, 1u << 20};
	struct conn c = {0};
	uint32_t addr_b, mr;
	int fa, fb;
	double g[2][ROUNDS], ref[ROUNDS], gm[2], refm, lat, ref_lat;
	bool pass;

	fab_addr_parse(ADDR_B, &addr_b);
	NST_REQUIRE_EQ(nic_host_attach(sock_a, &c.ha), 0);
	NST_REQUIRE_EQ(nic_host_attach(sock_b, &c.hb), 0);
	NST_REQUIRE_EQ(nst_qp_create_flags(c.ha, 0, NIC_QP_F_RECV_INLINE, &c.a), 0);
	NST_REQUIRE_EQ(nst_qp_create_flags(c.hb, 0, NIC_QP_F_RECV_INLINE, &c.b), 0);
	c.src = mmap(NULL, BUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	c.dst = mmap(NULL, BUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	c.rbuf = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	NST_REQUIRE(c.src != MAP_FAILED && c.dst != MAP_FAILED && c.rbuf != MAP_FAILED);
	memset(c.src, 1, BUF);
	memset(c.dst, 2, BUF);
	c.lk = nst_reg(c.ha, c.src, BUF, NIC_ACCESS_LOCAL_WRITE);
	c.bk = nst_reg(c.hb, c.rbuf, 4096, NIC_ACCESS_LOCAL_WRITE);
	mr = nst_reg(c.hb, c.dst, BUF, NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_MW_BIND);
	NST_REQUIRE(c.lk && c.bk && mr);
	c.rkey = nst_window(c.hb, mr, c.dst, BUF, NIC_ACCESS_REMOTE_WRITE, c.b.qpn);
	NST_REQUIRE(c.rkey != 0);
	for (uint64_t i = 0; i < 64; i++) {
		NST_REQUIRE_EQ(post_small_recv(&c.a, c.src, c.lk, i), 0);
		NST_REQUIRE_EQ(post_small_recv(&c.b, c.rbuf, c.bk, i), 0);
	}
	NST_REQUIRE_EQ(nst_connect_pair(&c.a, &c.b, addr_b, 7100), 0);

	fa = udp_in(net.host[1], ADDR_A);
	fb = udp_in(net.host[2], ADDR_B);
	NST_REQUIRE(fa >= 0 && fb >= 0);
	peer_of(fa, ADDR_B);
	peer_of(fb, ADDR_A);

	NST_REQUIRE_EQ(nst_pin(0, 0), 0);
	/* Warm-up: the NICs' first frames, the reference's first socket buffers. */
	write_round(&c, 1u << 20);
	ref_round(fa, fb);
	for (int k = 0; k < ROUNDS; k++) {
		for (int s = 0; s < 2; s++)
			g[s][k] = write_round(&c, sizes[s]);
		ref[k] = ref_round(fa, fb);
	}
	gm[0] = nst_median(g[0], ROUNDS);
	gm[1] = nst_median(g[1], ROUNDS);
	refm = nst_median(ref, ROUNDS);
	lat = nicsim_half_rtt(&c, 2000);
	ref_lat = ref_half_rtt(fa, fb, 2000);

	printf("\n\n  two namespaces, a veth pair of 1500-byte links (RoCEv2 path MTU 1024)\n");
	printf("  %-34s %10s %12s\n", "", "GB/s", "vs UDP pair");
	printf("  %-34s %10.3f %12s\n", "UDP pair, 1040 B datagrams", refm, "1.00x");
	printf("  %-34s %10.3f %11.2fx\n", "RDMA WRITE 64 KiB, 16 in flight", gm[0], gm[0] / refm);
	printf("  %-34s %10.3f %11.2fx   target >= 0.50x\n", "RDMA WRITE 1 MiB, 16 in flight",
	       gm[1], gm[1] / refm);
	printf("  (the UDP pair's receiver got %.1f%% of what was sent: the rate is what "
	       "arrived)\n",
	       100.0 * (1.0 - ref_lost / (ROUNDS + 1)));
	printf("  rounds (GB/s):");
	for (int k = 0; k < ROUNDS; k++)
		printf(" [UDP %.3f, 64K %.3f, 1M %.3f]", ref[k], g[0][k], g[1][k]);
	printf("\n  %-34s %10.1f us %9.2fx\n", "8 B SEND half round trip", lat, lat / ref_lat);
	printf("  %-34s %10.1f us\n", "8 B UDP datagram half round trip", ref_lat);
	pass = gm[1] >= 0.5 * refm;
	printf("  target: RDMA WRITE 1 MiB at least 0.5x the UDP pair: %s\n\n",
	       pass ? "met" : "MISSED");
	NST_TRUE(pass);
	close(fa);
	close(fb);
	nic_host_detach(c.ha);
	nic_host_detach(c.hb);
}

static int init(void)
{
	const char *const udp[] = {"--udp", NULL};
	char why[128];

	if (!nst_net_available(why, sizeof(why))) {
		fprintf(stderr, "bench_udp: cannot make the test network: %s\n", why);
		return -1;
	}
	if (nst_tmpdir(dir, sizeof(dir), "bu") < 0 || nst_net_up(&net, 2, 1500) < 0)
		return -1;
	snprintf(dir_a, sizeof(dir_a), "%s/a", dir);
	snprintf(dir_b, sizeof(dir_b), "%s/b", dir);
	snprintf(sock_a, sizeof(sock_a), "%s/nic-" ADDR_A ".sock", dir_a);
	snprintf(sock_b, sizeof(sock_b), "%s/nic-" ADDR_B ".sock", dir_b);
	if (mkdir(dir_a, 0700) < 0 || mkdir(dir_b, 0700) < 0 ||
	    nst_make_fabric(dir_a, (const char *const[]){ADDR_A, NULL}) < 0 ||
	    nst_make_fabric(dir_b, (const char *const[]){ADDR_B, NULL}) < 0)
		return -1;
	nic_a = nst_start_nic_in(net.host[1], dir_a, ADDR_A, udp, WAIT_MS);
	nic_b = nst_start_nic_in(net.host[2], dir_b, ADDR_B, udp, WAIT_MS);
	if (nic_a <= 0 || nic_b <= 0)
		return -1;
	return nst_pin(nic_a, 0) || nst_pin(nic_b, 1) ? -1 : 0;
}

static int clean(void)
{
	nst_stop(nic_a, WAIT_MS);
	nst_stop(nic_b, WAIT_MS);
	nst_net_down(&net);
	nst_done_with_dir(dir);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"udp_path", bench_udp_path},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "bench_udp", tests, init, clean);
}

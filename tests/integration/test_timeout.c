/*
 * Timeouts a loaded machine survives: a NIC that gets no CPU for a while
 * (SIGSTOP stands for a starved process) costs its peers retransmissions,
 * not their connections, and a NIC that stops for good fails them with the
 * documented error only after the whole retry budget.
 *
 * NIC A makes every connection, and its timers are small so that the tests
 * run in seconds: a local ACK timeout and a CM response timeout of code 12
 * (4.096 us * 2^12 = 16.8 ms), 7 transport retries and 5 CM retries.  Each
 * retry in a row waits twice as long as the one before, up to 16 times the
 * first, so a requester gives up 79 * 16.8 ms = 1325 ms after the last
 * answer and a CONNECT 47 * 16.8 ms = 789 ms after it began.  NIC B keeps
 * the defaults (67.1 ms: 5.3 s) and, being the passive side, must run with
 * A's timers, which A's REQ carries.
 */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "fab_addr.h"
#include "nicsim_mgmt.h"
#include "nstest.h"
#include "nstnic.h"
#include "nstverbs.h"

#define ADDR_A "198.18.0.1"
#define ADDR_B "198.18.0.2"
#define WAIT_MS 20000

/* NIC A's timers, and what they add up to (see the top of this file). */
#define TIMER_CODE "12"
#define BASE_NS (4096ull << 12)
#define RC_BUDGET_NS (79 * BASE_NS)           /* 1 + 2 + 4 + 8 + 16 * 4 */
#define CM_BUDGET_NS (47 * BASE_NS)           /* 1 + 2 + 4 + 8 + 16 * 2 */
#define B_RC_BUDGET_NS (79 * (4096ull << 14)) /* NIC B's own, 5.3 s */

#define GE_U(a, b)                                                                               \
	NST_CHECK_((uint64_t)(a) >= (uint64_t)(b), CU_FALSE, "%s = %llu, want >= %s = %llu", #a, \
		   (unsigned long long)(a), #b, (unsigned long long)(b))
#define LT_U(a, b)                                                                             \
	NST_CHECK_((uint64_t)(a) < (uint64_t)(b), CU_FALSE, "%s = %llu, want < %s = %llu", #a, \
		   (unsigned long long)(a), #b, (unsigned long long)(b))

static char dir[256], sock_a[300], sock_b[300];
static pid_t nic_a = -1, nic_b = -1;
static uint32_t addr_b;
static uint16_t next_port = 2000;

static uint8_t *map(size_t n)
{
	uint8_t *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	NST_REQUIRE(p != MAP_FAILED);
	return p;
}

/* Stop or continue a NIC: its process gets no CPU in between. */
static void nic_stop(pid_t nic)
{
	NST_REQUIRE_EQ(kill(nic, SIGSTOP), 0);
}

static void nic_cont(pid_t nic)
{
	NST_EQ(kill(nic, SIGCONT), 0);
}

/* A counter of the NIC at sock, or UINT64_MAX if it cannot be read. */
static uint64_t counter(const char *sock, size_t off)
{
	struct nic_stats st;

	if (nst_nic_stats(sock, &st) < 0)
		return UINT64_MAX;
	return *(const uint64_t *)((const char *)&st + off);
}

#define COUNTER(sock, name) counter(sock, offsetof(struct nic_stats, name))

/* Wait up to WAIT_MS for NIC A's counter at off to reach want: true if it did. */
struct counter_want {
	size_t off;
	uint64_t want, v;
};

static bool counter_reached(void *arg)
{
	struct counter_want *c = arg;

	c->v = counter(sock_a, c->off);
	return c->v >= c->want && c->v != UINT64_MAX;
}

static bool wait_counter(size_t off, uint64_t want)
{
	struct counter_want c = {.off = off, .want = want};

	if (nst_wait_until(counter_reached, &c, WAIT_MS, 2))
		return true;
	fprintf(stderr, "counter at %zu stayed at %llu, want %llu\n", off, (unsigned long long)c.v,
		(unsigned long long)want);
	return false;
}

/* Hosts on A and B with a connected QP each: A connects, B accepts. */
struct pair {
	struct nic_host *ha, *hb;
	struct nst_qp a, b;
};

static void pair_open(struct pair *p)
{
	NST_REQUIRE_EQ(nic_host_attach(sock_a, &p->ha), 0);
	NST_REQUIRE_EQ(nic_host_attach(sock_b, &p->hb), 0);
	NST_REQUIRE_EQ(nst_qp_create(p->ha, 0, &p->a), 0);
	NST_REQUIRE_EQ(nst_qp_create(p->hb, 0, &p->b), 0);
	NST_REQUIRE_EQ(nst_connect_pair(&p->a, &p->b, addr_b, next_port++), 0);
}

static void pair_close(struct pair *p)
{
	nic_host_detach(p->ha);
	nic_host_detach(p->hb);
}

static struct nic_send_wqe send_wqe(uint64_t id, void *buf, uint32_t len, uint32_t lkey)
{
	struct nic_send_wqe w = {.wr_id = id, .opcode = NIC_WR_SEND, .num_sge = 1};

	w.sge[0] = (struct nic_sge){.va = (uintptr_t)buf, .len = len, .lkey = lkey};
	return w;
}

static void post_recv(struct nst_qp *qp, uint64_t id, void *buf, uint32_t len, uint32_t lkey)
{
	struct nic_recv_wqe w = {.wr_id = id, .num_sge = 1};

	w.sge[0] = (struct nic_sge){.va = (uintptr_t)buf, .len = len, .lkey = lkey};
	NST_REQUIRE_EQ(nst_post_recv(qp, &w), 0);
}

/*
 * B's NIC stops while A sends it 1 MiB and stays stopped until A has timed
 * out three times in a row (117 ms and more: longer than one timeout); then
 * it runs again, and the data arrives intact with both QPs still up.
 */
static void test_data_survives_a_stopped_peer_nic(void)
{
	const size_t n = 1u << 20;
	uint8_t *src = map(n), *dst = map(n);
	uint64_t timeouts;
	struct nic_send_wqe w;
	struct nic_cqe c;
	struct pair p;

	pair_open(&p);
	nst_fill(src, n, 7);
	post_recv(&p.b, 1, dst, (uint32_t)n, nst_reg(p.hb, dst, n, NIC_ACCESS_LOCAL_WRITE));
	w = send_wqe(2, src, (uint32_t)n, nst_reg(p.ha, src, n, 0));
	timeouts = COUNTER(sock_a, timeouts);
	NST_REQUIRE(timeouts != UINT64_MAX);
	nic_stop(nic_b);
	NST_EQ(nst_post_send(&p.a, &w), 0);
	NST_TRUE(wait_counter(offsetof(struct nic_stats, timeouts), timeouts + 3));
	nic_cont(nic_b);
	NST_REQUIRE_EQ(nst_poll_cq(&p.a, &c, WAIT_MS), 0);
	NST_EQ(c.status, NIC_WC_SUCCESS);
	NST_REQUIRE_EQ(nst_poll_cq(&p.b, &c, WAIT_MS), 0);
	NST_EQ(c.status, NIC_WC_SUCCESS);
	NST_EQ(c.byte_len, n);
	NST_EQ_U(nst_sum32(dst, n), nst_sum32(src, n));
	printf("\n    1 MiB intact after %llu timeouts with the peer NIC stopped ",
	       (unsigned long long)(COUNTER(sock_a, timeouts) - timeouts));
	pair_close(&p);
	munmap(src, n);
	munmap(dst, n);
}

/*
 * B's NIC is stopped when A connects and stays stopped until A has sent
 * its REQ a second time; then the request reaches B's listener and the
 * connection is made and carries data.
 */
static void test_connect_survives_a_stopped_peer_nic(void)
{
	struct nic_cmd c = {.opcode = NIC_CMD_LISTEN};
	struct nic_host *ha, *hb;
	struct nst_qp a, b;
	struct nic_event ev;
	uint16_t port = next_port++;
	uint8_t buf[64];
	struct nic_send_wqe w;
	struct nic_cqe cqe;
	uint64_t frames;

	NST_REQUIRE_EQ(nic_host_attach(sock_a, &ha), 0);
	NST_REQUIRE_EQ(nic_host_attach(sock_b, &hb), 0);
	NST_REQUIRE_EQ(nst_qp_create(ha, 0, &a), 0);
	NST_REQUIRE_EQ(nst_qp_create(hb, 0, &b), 0);
	c.u.listen.port = port;
	c.u.listen.backlog = 1;
	NST_REQUIRE_EQ(nst_cmd(hb, &c, NULL), 0);
	/* A sends nothing else meanwhile: each frame it sends is a REQ. */
	frames = COUNTER(sock_a, tx_frames);
	NST_REQUIRE(frames != UINT64_MAX);
	nic_stop(nic_b);
	c = (struct nic_cmd){.opcode = NIC_CMD_CONNECT};
	c.u.conn.qpn = a.qpn;
	c.u.conn.dst_addr = addr_b;
	c.u.conn.dst_port = port;
	NST_REQUIRE_EQ(nst_cmd(ha, &c, NULL), 0);
	NST_TRUE(wait_counter(offsetof(struct nic_stats, tx_frames), frames + 2));
	nic_cont(nic_b);
	NST_REQUIRE_EQ(nst_next_event(hb, &ev, WAIT_MS), 0);
	NST_REQUIRE_EQ(ev.type, NIC_EV_CONN_REQUEST);
	c = (struct nic_cmd){.opcode = NIC_CMD_ACCEPT};
	c.u.conn.qpn = b.qpn;
	c.u.conn.conn_id = ev.conn_id;
	NST_REQUIRE_EQ(nst_cmd(hb, &c, NULL), 0);
	NST_REQUIRE_EQ(nst_next_event(ha, &ev, WAIT_MS), 0);
	NST_EQ(ev.type, NIC_EV_CONNECTED);
	post_recv(&b, 1, buf, sizeof(buf), nst_reg(hb, buf, sizeof(buf), NIC_ACCESS_LOCAL_WRITE));
	w = send_wqe(2, buf, 8, nst_reg(ha, buf, sizeof(buf), 0));
	NST_REQUIRE_EQ(nst_post_send(&a, &w), 0);
	NST_REQUIRE_EQ(nst_poll_cq(&a, &cqe, WAIT_MS), 0);
	NST_EQ(cqe.status, NIC_WC_SUCCESS);
	nic_host_detach(ha);
	nic_host_detach(hb);
}

/*
 * requester's NIC stopped for good: post a SEND on req and time it until it
 * fails; returns the elapsed ns (0 if it did not fail as documented: the
 * request with RETRY_EXC_ERR, the QP with a QP_ERROR event).
 */
static uint64_t time_to_retry_exc(struct nic_host *h, struct nst_qp *req, void *buf)
{
	struct nic_send_wqe w = send_wqe(9, buf, 100, nst_reg(h, buf, 4096, 0));
	struct nic_event ev;
	struct nic_cqe c;
	uint64_t t0 = nst_now_ns(), t;

	NST_REQUIRE_EQ(nst_post_send(req, &w), 0);
	NST_REQUIRE_EQ(nst_poll_cq(req, &c, WAIT_MS), 0);
	t = nst_now_ns() - t0;
	NST_EQ(c.status, NIC_WC_RETRY_EXC_ERR);
	NST_REQUIRE_EQ(nst_next_event(h, &ev, WAIT_MS), 0);
	NST_EQ(ev.type, NIC_EV_QP_ERROR);
	NST_EQ(ev.status, NIC_WC_RETRY_EXC_ERR);
	return c.status == NIC_WC_RETRY_EXC_ERR ? t : 0;
}

/* A connected pair whose side A (from_a) or B sends while the other side's
 * NIC is stopped: time_to_retry_exc of that SEND.  The NIC runs again and
 * the pair is closed before it returns. */
static uint64_t time_to_retry_exc_peer_stopped(bool from_a)
{
	uint8_t *buf = map(4096);
	pid_t peer = from_a ? nic_b : nic_a;
	struct pair p;
	uint64_t t;

	pair_open(&p);
	nic_stop(peer);
	t = from_a ? time_to_retry_exc(p.ha, &p.a, buf) : time_to_retry_exc(p.hb, &p.b, buf);
	nic_cont(peer);
	pair_close(&p);
	munmap(buf, 4096);
	return t;
}

/* B's NIC stopped for good: A's SEND fails with RETRY_EXC_ERR, and only
 * after A's whole budget of timeouts (no more than ten times that). */
static void test_retry_budget_when_peer_nic_stopped(void)
{
	uint64_t t = time_to_retry_exc_peer_stopped(true);

	GE_U(t, RC_BUDGET_NS);
	LT_U(t, 10 * RC_BUDGET_NS);
	printf("\n    RETRY_EXC_ERR after %.0f ms (budget %.0f ms) ", (double)t / 1e6,
	       (double)RC_BUDGET_NS / 1e6);
}

/*
 * The passive side runs with the timers of the REQ: A's NIC stopped for
 * good, B's SEND fails after A's budget, well before B's own would end.
 */
static void test_passive_side_uses_the_requests_timers(void)
{
	uint64_t t = time_to_retry_exc_peer_stopped(false);

	GE_U(t, RC_BUDGET_NS);
	LT_U(t, B_RC_BUDGET_NS);
	printf("\n    passive side: RETRY_EXC_ERR after %.0f ms (A's budget %.0f ms, its own %.0f "
	       "ms) ",
	       (double)t / 1e6, (double)RC_BUDGET_NS / 1e6, (double)B_RC_BUDGET_NS / 1e6);
}

/* A CONNECT to a NIC stopped for good times out after A's CM budget. */
static void test_connect_budget_when_peer_nic_stopped(void)
{
	struct nic_cmd c = {.opcode = NIC_CMD_CONNECT};
	struct nic_host *h;
	struct nst_qp a;
	struct nic_event ev;
	uint64_t t0, t;

	NST_REQUIRE_EQ(nic_host_attach(sock_a, &h), 0);
	NST_REQUIRE_EQ(nst_qp_create(h, 0, &a), 0);
	c.u.conn.qpn = a.qpn;
	c.u.conn.dst_addr = addr_b;
	c.u.conn.dst_port = next_port++;
	nic_stop(nic_b);
	t0 = nst_now_ns();
	NST_REQUIRE_EQ(nst_cmd(h, &c, NULL), 0);
	NST_EQ(nst_next_event(h, &ev, WAIT_MS), 0);
	t = nst_now_ns() - t0;
	nic_cont(nic_b);
	NST_EQ(ev.type, NIC_EV_CONN_FAILED);
	NST_EQ(ev.status, NIC_STATUS_TIMED_OUT);
	GE_U(t, CM_BUDGET_NS);
	LT_U(t, 10 * CM_BUDGET_NS);
	printf("\n    CONNECT timed out after %.0f ms (budget %.0f ms) ", (double)t / 1e6,
	       (double)CM_BUDGET_NS / 1e6);
	nic_host_detach(h);
}

/* nicsimd refuses a timer out of its field's range, saying what it wants,
 * with exit status 2, and starts no NIC. */
static void test_bad_timer_options_refused(void)
{
	static const struct {
		const char *opt, *val, *says;
	} bad[] = {
	    {"--ack-timeout", "0", "--ack-timeout 0: want a timeout code (not 0"},
	    {"--ack-timeout", "32", "--ack-timeout 32: want a timeout code"},
	    {"--retry-count", "8", "--retry-count 8: want a retry count, 0..7"},
	    {"--rnr-retry", "-1", "--rnr-retry -1: want an RNR retry count"},
	    {"--cm-timeout", "x", "--cm-timeout x: want a timeout code, 0..31"},
	    {"--cm-retries", "16", "--cm-retries 16: want a retry count, 0..15"},
	    {"--rnr-timer", "32", "--rnr-timer 32: want an RNR timer code, 0..31"},
	};
	char out[4096];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *argv[] = {nst_bin("nicsimd"), "--dir",    dir,        "--addr",
				      "198.18.0.9",       bad[i].opt, bad[i].val, NULL};

		NST_EQ(nst_run(argv, out, sizeof(out), WAIT_MS), 2);
		NST_CHECK_(strstr(out, bad[i].says) != NULL, CU_FALSE, "%s %s said: %.300s",
			   bad[i].opt, bad[i].val, out);
	}
}

static int init(void)
{
	const char *const addrs[] = {ADDR_A, ADDR_B, NULL};
	const char *level = getenv("NST_LOG") ? getenv("NST_LOG") : "info";

	if (nst_tmpdir(dir, sizeof(dir), "timeout") < 0)
		return -1;
	snprintf(sock_a, sizeof(sock_a), "%s/nic-" ADDR_A ".sock", dir);
	snprintf(sock_b, sizeof(sock_b), "%s/nic-" ADDR_B ".sock", dir);
	fab_addr_parse(ADDR_B, &addr_b);
	if (nst_make_fabric(dir, addrs) < 0)
		return -1;
	nic_a =
	    nst_start_nic(dir, ADDR_A,
			  (const char *const[]){"--log-level", level, "--ack-timeout", TIMER_CODE,
						"--retry-count", "7", "--cm-timeout", TIMER_CODE,
						"--cm-retries", "5", NULL},
			  WAIT_MS);
	nic_b =
	    nst_start_nic(dir, ADDR_B, (const char *const[]){"--log-level", level, NULL}, WAIT_MS);
	return nic_a > 0 && nic_b > 0 ? 0 : -1;
}

static int clean(void)
{
	const pid_t pids[] = {nic_a, nic_b};

	/* A test that failed half-way may have left a NIC stopped. */
	if (nic_a > 0)
		kill(nic_a, SIGCONT);
	if (nic_b > 0)
		kill(nic_b, SIGCONT);
	return nst_stop_nics_clean(dir, pids, 2, WAIT_MS);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"data_survives_a_stopped_peer_nic", test_data_survives_a_stopped_peer_nic},
	    {"connect_survives_a_stopped_peer_nic", test_connect_survives_a_stopped_peer_nic},
	    {"retry_budget_when_peer_nic_stopped", test_retry_budget_when_peer_nic_stopped},
	    {"passive_side_uses_the_requests_timers", test_passive_side_uses_the_requests_timers},
	    {"connect_budget_when_peer_nic_stopped", test_connect_budget_when_peer_nic_stopped},
	    {"bad_timer_options_refused", test_bad_timer_options_refused},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "timeout", tests, init, clean);
}

/*
 * Endings through the SPI (ws2san.h) against real nicsimd processes:
 * closing a socket with operations in flight and threads blocked on it, a
 * peer process killed mid-transfer, and a NIC killed under its host (the
 * last test: it kills NIC D).  The NICs and helpers are the test_spi_*
 * fixture (nstspidata.h); every test leaves the TPT occupancy of the NICs
 * where it found it (R11).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fab_addr.h"
#include "nstest.h"
#include "nstnic.h"
#include "nstspidata.h"

/* ---- Close ------------------------------------------------------------------------------- */

struct accept_waiter {
	SOCKET l;
	int err;
	SOCKET s;
	pid_t tid; /* set by the thread just before its call */
};

static void *blocked_accept_main(void *arg)
{
	struct accept_waiter *w = arg;

	__atomic_store_n(&w->tid, gettid(), __ATOMIC_RELEASE);
	w->s = WSPAccept(w->l, NULL, NULL, NULL, 0, &w->err);
	return NULL;
}

static void test_close_with_operations_in_flight(void)
{
	uint8_t *m = map(8 * PAGE);
	SOCKET a, b, l = sock_on(ADDR_A, next_port++);
	WSAOVERLAPPED ova[3], ovb[2], ov;
	struct nicsim_rdma_desc d;
	struct accept_waiter aw = {.l = l};
	struct waiter w = {0};
	pthread_t t, t2;
	uint64_t t0;
	int err = 0;

	NST_REQUIRE(m != NULL);
	NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_A, &b, &a), 0);
	reg(a, m, 4 * PAGE, MEM_READWRITE);
	reg(b, m + 4 * PAGE, 4 * PAGE, MEM_READWRITE);
	NST_REQUIRE_EQ(expose(a, m + 3 * PAGE, PAGE, MEM_READWRITE, &d), 0);
	for (int i = 0; i < 3; i++)
		NST_REQUIRE_EQ(post_recv(a, m + (size_t)i * PAGE, PAGE, &ova[i]), WSA_IO_PENDING);
	for (int i = 0; i < 2; i++)
		NST_REQUIRE_EQ(post_recv(b, m + (size_t)(4 + i) * PAGE, PAGE, &ovb[i]),
			       WSA_IO_PENDING);
	/* Blocked threads: one on a's first receive, one in accept. */
	w.s = a;
	w.ov = &ova[0];
	pthread_create(&t, NULL, wait_main, &w);
	NST_EQ(WSPListen(l, 1, &err), 0);
	pthread_create(&t2, NULL, blocked_accept_main, &aw);
	wait_until_blocked(&w.tid);
	wait_until_blocked(&aw.tid);

	t0 = nst_now_ns();
	close_socket(a);
	close_socket(l);
	/* a's operations completed at once, aborted; blocked calls returned. */
	for (int i = 0; i < 3; i++) {
		NST_EQ_U(ova[i].Internal, 0);
		NST_EQ(ova[i].OffsetHigh, WSA_OPERATION_ABORTED);
	}
	pthread_join(t, NULL);
	NST_EQ(w.rc, FALSE);
	NST_EQ(w.err, WSA_OPERATION_ABORTED);
	pthread_join(t2, NULL);
	NST_TRUE(aw.s == INVALID_SOCKET);
	NST_EQ(aw.err, WSAEINTR);
	/* The peer: its receives are flushed, later posts fail at once. */
	for (int i = 0; i < 2; i++)
		NST_EQ(ov_wait(b, &ovb[i], NULL), WSA_OPERATION_ABORTED);
	printf("\n    peer's receives flushed %.0f us after the close ",
	       (double)(nst_now_ns() - t0) / 1e3);
	NST_EQ(post_send(b, m + 4 * PAGE, 8, &ov), WSAECONNRESET);
	close_socket(b);
	munmap(m, 8 * PAGE);
	/* teardown: a's registrations and its exposure are gone from the NIC (R11). */
}

/* ---- Failures: a peer killed, a NIC killed -------------------------------------------- */

static void test_peer_killed_mid_transfer(void)
{
	struct peer pr;
	uint8_t *src = map(BIG), *ctl;
	struct ctl m = {.op = CTL_EXPOSE, .len = BIG, .flags = MEM_READWRITE}, r;
	struct nicsim_rdma_desc d;
	WSAOVERLAPPED ov[4], ovr;
	HANDLE h;
	uint64_t killed = 0, failed = 0;
	int first_err = 0;

	NST_REQUIRE(src != NULL);
	NST_REQUIRE(peer_open(&pr, ADDR_B, ADDR_A));
	h = reg(pr.s, src, BIG, MEM_READ);
	NST_REQUIRE_EQ(peer_call(&pr, &m, &r), 0);
	NST_REQUIRE_EQ(r.err, 0);
	d = r.desc;
	ctl = map(PAGE);
	reg(pr.s, ctl, PAGE, MEM_READWRITE);
	NST_REQUIRE_EQ(post_recv(pr.s, ctl, PAGE, &ovr), WSA_IO_PENDING);
	/* Keep 64 MiB writes flowing; kill the child once the first one is done. */
	for (int i = 0; i < 4; i++)
		NST_REQUIRE_EQ(post_rdma(pr.s, true, src, BIG, h, &d, 0, &ov[i]), WSA_IO_PENDING);
	NST_REQUIRE_EQ(ov_wait(pr.s, &ov[0], NULL), 0);
	NST_EQ(kill(pr.pid, SIGKILL), 0);
	killed = nst_now_ns();
	/* The peer's NIC ends the connection when its host goes: a generous
	 * deadline bounds only a hang. */
	for (int i = 1; nst_now_ns() - killed < PEER_GONE_NS; i = (i + 1) % 4) {
		int e = ov_wait(pr.s, &ov[i], NULL);

		if (!e)
			e = post_rdma(pr.s, true, src, BIG, h, &d, 0, &ov[i]);
		if (e && e != WSA_IO_PENDING) {
			first_err = e;
			failed = nst_now_ns();
			break;
		}
	}
	NST_TRUE(first_err == WSA_OPERATION_ABORTED || first_err == WSAECONNRESET ||
		 first_err == WSAECONNABORTED);
	NST_TRUE(failed != 0);
	printf("\n    peer killed: %s after %.1f ms ", nicsim_wsa_name(first_err),
	       (double)(failed - killed) / 1e6);
	/* Everything in flight ends; later posts fail at once. */
	NST_TRUE(ov_wait(pr.s, &ovr, NULL) != 0);
	for (int i = 0; i < 4; i++)
		ov_wait(pr.s, &ov[i], NULL);
	NST_TRUE(post_send(pr.s, ctl, 1, &ovr) != WSA_IO_PENDING);
	peer_close(&pr, false);
	munmap(src, BIG);
	munmap(ctl, PAGE);
}

static void test_nic_killed_gives_enetdown(void)
{
	uint8_t *m = map(4 * PAGE);
	SOCKET d, b;
	WSAOVERLAPPED ov1, ov2, ov3, ovb;
	struct waiter w = {0};
	void *early = NULL, *late = NULL;
	int ev = eventfd(0, EFD_NONBLOCK), err = 0, rc;
	pthread_t t;
	uint64_t t0, polled = 0;
	DWORD n, flags;
	WSABUF wb;

	NST_REQUIRE(m != NULL && ev >= 0 && nic_d > 0);
	NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_D, &b, &d), 0);
	/* A shared buffer the dying NIC maps. */
	NST_REQUIRE_EQ(nicsim_buffer_alloc(PAGE, &early), 0);
	reg(d, m, 2 * PAGE, MEM_READWRITE);
	reg(b, m + 2 * PAGE, 2 * PAGE, MEM_READWRITE);
	NST_REQUIRE_EQ(post_recv(d, m, 100, &ov1), WSA_IO_PENDING);
	NST_REQUIRE_EQ(post_recv(d, m + 100, 100, &ov2), WSA_IO_PENDING);
	memset(&ov3, 0, sizeof(ov3));
	ov3.hEvent = ev;
	wb.len = 100;
	wb.buf = (char *)m + 200;
	flags = 0;
	NST_EQ(WSPRecv(d, &wb, 1, &n, &flags, &ov3, NULL, NULL, &err), SOCKET_ERROR);
	NST_EQ(err, WSA_IO_PENDING);
	w.s = d;
	w.ov = &ov1;
	pthread_create(&t, NULL, wait_main, &w);
	wait_until_blocked(&w.tid);

	/* The host learns of the NIC's death from its socket: an event, so
	 * the deadlines are generous and only bound a hang. */
	t0 = nst_now_ns();
	NST_EQ(kill(nic_d, SIGKILL), 0);
	/* A thread blocked with fWait TRUE, a poller with fWait FALSE, an event. */
	while (nst_now_ns() - t0 < (uint64_t)WAIT_MS * 1000000u) {
		if (!WSPGetOverlappedResult(d, &ov2, &n, FALSE, &flags, &err) &&
		    err == WSA_IO_INCOMPLETE) {
			usleep(1000); /* the poller's own pace: what is tested */
			continue;
		}
		polled = nst_now_ns();
		break;
	}
	NST_EQ(err, WSAENETDOWN);
	NST_TRUE(event_fires(ev, WAIT_MS));
	NST_EQ(ov3.OffsetHigh, WSAENETDOWN);
	pthread_join(t, NULL);
	NST_EQ(w.rc, FALSE);
	NST_EQ(w.err, WSAENETDOWN);
	NST_TRUE(polled != 0);
	printf("\n    NIC killed: WSAENETDOWN after %.1f ms (blocked), %.1f ms (polling) ",
	       (double)(w.done_ns - t0) / 1e6, (double)(polled - t0) / 1e6);
	/* Later calls fail with WSAENETDOWN. */
	NST_EQ(post_recv(d, m, 10, &ov1), WSAENETDOWN);
	NST_TRUE(WSPRegisterMemory(d, m + 3 * PAGE, PAGE, MEM_READ, &err) == NULL);
	NST_EQ(err, WSAENETDOWN);
	NST_TRUE(sock_on(ADDR_D, 0) == INVALID_SOCKET);
	/* Shared buffers made and given back with a dead NIC attached: the
	 * other NICs serve them, the dead one is skipped, nothing waits on it. */
	t0 = nst_now_ns();
	NST_EQ(nicsim_buffer_alloc(PAGE, &late), 0);
	NST_EQ(nicsim_buffer_free(early), 0);
	NST_EQ(nicsim_buffer_free(late), 0);
	NST_TRUE(nst_now_ns() - t0 < (uint64_t)WAIT_MS * 1000000u);
	/* The peer's NIC: on the shared-memory fabric it sees the dead NIC's
	 * process end and resets the connection (at once, or while this send
	 * is on its way); over UDP it notices when it sends, its retries
	 * running out (docs/transport.md, section 6). */
	rc = post_send(b, m + 2 * PAGE, 10, &ovb);
	if (rc == WSA_IO_PENDING)
		rc = ov_wait(b, &ovb, NULL);
	NST_EQ(rc, spi_udp ? WSAECONNABORTED : WSAECONNRESET);
	close_socket(d);
	close_socket(b);
	nst_wait(nic_d, WAIT_MS);
	nic_d = -1;
	close(ev);
	munmap(m, 4 * PAGE);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"close_with_operations_in_flight", test_close_with_operations_in_flight},
	    {"peer_killed_mid_transfer", test_peer_killed_mid_transfer},
	    {"nic_killed_gives_enetdown", test_nic_killed_gives_enetdown},
	    {NULL, NULL},
	};

	return spi_main(argc, argv, "spi_close", tests);
}

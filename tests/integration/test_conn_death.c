/*
 * A connection that dies completes what is pending on it, promptly and with
 * the documented error, whether or not the application is in a provider
 * call at the time: WSA_OPERATION_ABORTED for the receives and sends the
 * NIC flushed when the peer's process died or the connection broke, the
 * error that broke it for the operation that did, WSAECONNRESET for later
 * posts.  Observed as an application that waits elsewhere would: on the
 * operation's event, and on the WSAOVERLAPPED's Internal field alone.
 *
 * NICs A, B and C (198.18.0.1, .2, .3) on one fabric; the peer is a child
 * process on NIC B, killed by the test; C is killed by the last test, under
 * a receive pending on it (WSAENETDOWN).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "nstest.h"
#include "nstnic.h"
#include "nstspi.h"
#include "nicsim_provider.h"
#include "ws2san.h"

#define ADDR_A "198.18.0.1"
#define ADDR_B "198.18.0.2"
#define ADDR_C "198.18.0.3" /* killed by the last test */
#define WAIT_MS 10000
#define PAGE 4096u

static char dir[256];
static pid_t nic_a = -1, nic_b = -1, nic_c = -1;
static uint16_t next_port = 3000;

static struct sockaddr_in addr_of(const char *addr, uint16_t port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};

	inet_pton(AF_INET, addr, &sa.sin_addr);
	return sa;
}

static SOCKET sock_on(const char *addr, uint16_t port)
{
	struct sockaddr_in sa = addr_of(addr, port);
	int err = 0;
	SOCKET s = WSPSocket(AF_INET, SOCK_STREAM, IPPROTO_TCP, NULL, 0, 0, &err);

	if (s != INVALID_SOCKET && WSPBind(s, (struct sockaddr *)&sa, sizeof(sa), &err)) {
		WSPCloseSocket(s, &err);
		s = INVALID_SOCKET;
	}
	return s;
}

/*
 * The peer, in a child: its own provider, a listener on NIC B, one accepted
 * connection, then nothing until it is killed.  It posts no receive: its
 * NIC holds the connection's first message (ws2san.h, WSPRecv), and a send
 * after that waits for a receive (receiver not ready) until the connection
 * dies.
 */
static int peer_main(void *arg, int ready)
{
	uint16_t port = *(const uint16_t *)arg;
	WSPDATA data;
	WSPPROC_TABLE table;
	SOCKET l, s;
	int err = 0;

	if (WSPStartupEx(MAKEWORD(2, 2), &data, NULL, NULL, &table))
		return 10;
	l = sock_on(ADDR_B, port);
	if (l == INVALID_SOCKET || WSPListen(l, 1, &err))
		return 11;
	if (write(ready, "r", 1) != 1)
		return 12;
	s = WSPAccept(l, NULL, NULL, NULL, 0, &err);
	if (s == INVALID_SOCKET)
		return 13;
	/* Hold the connection until killed (bounded, should the test die). */
	for (int i = 0; i < 600; i++)
		poll(NULL, 0, 100);
	return 14;
}

/* A connection from NIC mine to a fresh peer on NIC B; the peer's pid. */
static pid_t open_peer_from(const char *mine, SOCKET *s)
{
	uint16_t port = next_port++;
	struct sockaddr_in to = addr_of(ADDR_B, port);
	pid_t pid = nst_fork_ready(peer_main, &port, WAIT_MS);
	int err = 0;

	*s = INVALID_SOCKET;
	if (pid <= 0)
		return pid;
	*s = sock_on(mine, 0);
	if (*s == INVALID_SOCKET ||
	    WSPConnect(*s, (struct sockaddr *)&to, sizeof(to), NULL, NULL, NULL, NULL, &err)) {
		fprintf(stderr, "connect to the peer: %s\n", nicsim_wsa_name(err));
		nst_stop(pid, WAIT_MS);
		return -ECONNREFUSED;
	}
	return pid;
}

static pid_t open_peer(SOCKET *s)
{
	return open_peer_from(ADDR_A, s);
}

static int post(SOCKET s, bool send, void *buf, DWORD len, WSAOVERLAPPED *ov, WSAEVENT ev)
{
	WSABUF b = {.len = len, .buf = buf};
	DWORD n = 0, flags = 0;
	int err = 0, rc;

	memset(ov, 0, sizeof(*ov));
	ov->hEvent = ev;
	rc = send ? WSPSend(s, &b, 1, &n, 0, ov, NULL, NULL, &err)
		  : WSPRecv(s, &b, 1, &n, &flags, ov, NULL, NULL, &err);
	return rc == 0 ? 0 : err;
}

/*
 * Send the connection's first message, which the peer's NIC holds, and
 * wait for it: a send after it waits for a receive the peer never posts.
 * 0, or the WSA error (the socket is closed if the send did not end).
 */
static int send_held(SOCKET s, uint8_t *m)
{
	uint64_t deadline = nst_now_ns() + (uint64_t)WAIT_MS * 1000000u;
	WSAOVERLAPPED ov;
	DWORD n = 0, flags = 0;
	int err = post(s, true, m + 200, 16, &ov, WSA_INVALID_EVENT);

	if (err != WSA_IO_PENDING)
		return err;
	while (!WSPGetOverlappedResult(s, &ov, &n, FALSE, &flags, &err)) {
		if (err != WSA_IO_INCOMPLETE)
			return err;
		if (nst_now_ns() >= deadline) {
			/* Closing completes it before ov goes. */
			WSPCloseSocket(s, &err);
			return WSAETIMEDOUT;
		}
		nst_sleep_ms(1);
	}
	return 0;
}

/* Done, as HasOverlappedIoCompleted() tells it: Internal no longer pending. */
static bool ov_done(const WSAOVERLAPPED *ov)
{
	return __atomic_load_n(&ov->Internal, __ATOMIC_ACQUIRE) != WSA_STATUS_PENDING;
}

/* Wait up to ms for the eventfd ev to fire; the milliseconds it took, or -1. */
static double wait_event(int ev, int ms)
{
	uint64_t t0 = nst_now_ns();
	struct pollfd p = {.fd = ev, .events = POLLIN};

	if (poll(&p, 1, ms) != 1)
		return -1;
	return (double)(nst_now_ns() - t0) / 1e6;
}

/* A receive with an event and a send waiting for the peer's receive; the peer dies. */
static void test_peer_killed_event(void)
{
	WSAOVERLAPPED ovr, ovs;
	SOCKET s;
	pid_t peer = open_peer(&s);
	uint8_t *m;
	int evr = eventfd(0, EFD_CLOEXEC), evs = eventfd(0, EFD_CLOEXEC);
	double msr, mss;
	DWORD n = 0, flags = 0;
	int err = 0;

	NST_REQUIRE(peer > 0 && evr >= 0 && evs >= 0);
	m = nst_spi_registered(s, PAGE);
	NST_REQUIRE(m != NULL);
	NST_REQUIRE_EQ(send_held(s, m), 0);
	NST_REQUIRE_EQ(post(s, false, m, 100, &ovr, evr), WSA_IO_PENDING);
	NST_REQUIRE_EQ(post(s, true, m + 100, 100, &ovs, evs), WSA_IO_PENDING);
	NST_EQ(kill(peer, SIGKILL), 0);
	msr = wait_event(evr, WAIT_MS);
	mss = wait_event(evs, WAIT_MS);
	printf("\n    peer killed: receive's event after %.1f ms, send's %.1f ms ", msr, mss);
	NST_TRUE(msr >= 0);
	NST_TRUE(mss >= 0);
	NST_TRUE(ov_done(&ovr));
	NST_EQ(ovr.OffsetHigh, WSA_OPERATION_ABORTED);
	NST_EQ(ovs.OffsetHigh, WSA_OPERATION_ABORTED);
	NST_EQ(WSPGetOverlappedResult(s, &ovr, &n, FALSE, &flags, &err), FALSE);
	NST_EQ(err, WSA_OPERATION_ABORTED);
	/* Later posts fail at once, as reset. */
	NST_EQ(post(s, false, m, 100, &ovr, WSA_INVALID_EVENT), WSAECONNRESET);
	NST_EQ(WSPCloseSocket(s, &err), 0);
	nst_wait(peer, WAIT_MS);
	close(evr);
	close(evs);
	munmap(m, PAGE);
}

/*
 * No event, no provider call: the receive and the send complete in their
 * WSAOVERLAPPED alone, as an application polling HasOverlappedIoCompleted
 * sees them, before anything is closed or cleaned up.
 */
static void test_peer_killed_no_call(void)
{
	WSAOVERLAPPED ovr, ovs;
	SOCKET s;
	pid_t peer = open_peer(&s);
	uint8_t *m;
	double msr, mss;
	int err = 0;

	NST_REQUIRE(peer > 0);
	m = nst_spi_registered(s, PAGE);
	NST_REQUIRE(m != NULL);
	NST_REQUIRE_EQ(send_held(s, m), 0);
	NST_REQUIRE_EQ(post(s, false, m, 100, &ovr, WSA_INVALID_EVENT), WSA_IO_PENDING);
	NST_REQUIRE_EQ(post(s, true, m + 100, 100, &ovs, WSA_INVALID_EVENT), WSA_IO_PENDING);
	NST_EQ(kill(peer, SIGKILL), 0);
	msr = nst_spi_ov_wait_memory(&ovr, WAIT_MS);
	mss = nst_spi_ov_wait_memory(&ovs, WAIT_MS);
	printf("\n    peer killed: receive done after %.1f ms, send %.1f ms ", msr, mss);
	NST_TRUE(msr >= 0);
	NST_TRUE(mss >= 0);
	NST_EQ(ovr.OffsetHigh, WSA_OPERATION_ABORTED);
	NST_EQ(ovs.OffsetHigh, WSA_OPERATION_ABORTED);
	NST_EQ(WSPCloseSocket(s, &err), 0);
	nst_wait(peer, WAIT_MS);
	munmap(m, PAGE);
}

/*
 * The connection breaks at this end: an RDMA write with a key the peer's NIC
 * refuses completes with WSAECONNRESET, and the receive pending beside it
 * completes flushed without the application asking for it.
 */
static void test_broken_connection_no_call(void)
{
	WSAOVERLAPPED ovr, ovw;
	SOCKET s;
	pid_t peer = open_peer(&s);
	struct nicsim_rdma_desc d = {.magic = NICSIM_RDMA_DESC_MAGIC,
				     .version = NICSIM_RDMA_DESC_VERSION,
				     .access = MEM_READWRITE,
				     .rkey = 0x00ffff01u,
				     .va = 0x10000,
				     .len = PAGE};
	WSABUFEX b;
	HANDLE h;
	uint8_t *m;
	double msw, msr;
	DWORD n = 0;
	int err = 0;

	NST_REQUIRE(peer > 0);
	m = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	NST_REQUIRE(m != MAP_FAILED);
	h = WSPRegisterMemory(s, m, PAGE, MEM_READWRITE, &err);
	NST_REQUIRE(h != NULL);
	d.nic_addr = addr_of(ADDR_B, 0).sin_addr.s_addr;
	NST_REQUIRE_EQ(post(s, false, m, 100, &ovr, WSA_INVALID_EVENT), WSA_IO_PENDING);
	b = (WSABUFEX){.len = 64, .buf = (char *)m + 200, .handle = h};
	memset(&ovw, 0, sizeof(ovw));
	NST_EQ(WSPRdmaWrite(s, &b, 1, &d, sizeof(d), 0, &n, 0, &ovw, NULL, NULL, &err),
	       SOCKET_ERROR);
	NST_REQUIRE_EQ(err, WSA_IO_PENDING);
	msw = nst_spi_ov_wait_memory(&ovw, WAIT_MS);
	msr = nst_spi_ov_wait_memory(&ovr, WAIT_MS);
	printf("\n    refused write done after %.1f ms, receive %.1f ms later ", msw, msr);
	NST_TRUE(msw >= 0);
	NST_TRUE(msr >= 0);
	NST_EQ(ovw.OffsetHigh, WSAECONNRESET);
	NST_EQ(ovr.OffsetHigh, WSA_OPERATION_ABORTED);
	NST_EQ(post(s, false, m, 100, &ovr, WSA_INVALID_EVENT), WSAECONNRESET);
	NST_EQ(WSPCloseSocket(s, &err), 0);
	nst_stop(peer, WAIT_MS);
	munmap(m, PAGE);
}

/*
 * This host's NIC dies under a pending receive: the attach socket hangs up,
 * and the receive completes with WSAENETDOWN without a call.
 */
static void test_own_nic_killed_no_call(void)
{
	WSAOVERLAPPED ovr;
	SOCKET s;
	pid_t peer = open_peer_from(ADDR_C, &s);
	uint8_t *m;
	double ms;
	int err = 0;

	NST_REQUIRE(peer > 0 && nic_c > 0);
	m = nst_spi_registered(s, PAGE);
	NST_REQUIRE(m != NULL);
	NST_REQUIRE_EQ(post(s, false, m, 100, &ovr, WSA_INVALID_EVENT), WSA_IO_PENDING);
	NST_EQ(kill(nic_c, SIGKILL), 0);
	ms = nst_spi_ov_wait_memory(&ovr, WAIT_MS);
	printf("\n    NIC killed: receive done after %.1f ms ", ms);
	NST_TRUE(ms >= 0);
	NST_EQ(ovr.OffsetHigh, WSAENETDOWN);
	NST_EQ(WSPCloseSocket(s, &err), 0);
	nst_wait(nic_c, WAIT_MS);
	nic_c = -1;
	nst_stop(peer, WAIT_MS);
	munmap(m, PAGE);
}

/* ---- Suite ---------------------------------------------------------------------------- */

static int init(void)
{
	const char *const addrs[] = {ADDR_A, ADDR_B, ADDR_C, NULL};
	WSPDATA data;
	WSPPROC_TABLE table;

	if (nst_tmpdir(dir, sizeof(dir), "conn-death") < 0 || nst_make_fabric(dir, addrs) < 0)
		return -1;
	nic_a = nst_start_nic(dir, ADDR_A, NULL, WAIT_MS);
	nic_b = nst_start_nic(dir, ADDR_B, NULL, WAIT_MS);
	nic_c = nst_start_nic(dir, ADDR_C, NULL, WAIT_MS);
	if (nic_a < 0 || nic_b < 0 || nic_c < 0)
		return -1;
	setenv("NICSIM_DIR", dir, 1);
	return WSPStartupEx(MAKEWORD(2, 2), &data, NULL, NULL, &table) == 0 ? 0 : -1;
}

static int clean(void)
{
	int err = 0, rc = 0;

	WSPCleanup(&err);
	if (!nst_stop_clean(nic_a, WAIT_MS) || !nst_stop_clean(nic_b, WAIT_MS))
		rc = -1;
	if (nic_c > 0)
		nst_stop(nic_c, WAIT_MS);
	nst_done_with_dir(dir);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"peer_killed_event", test_peer_killed_event},
	    {"peer_killed_no_call", test_peer_killed_no_call},
	    {"broken_connection_no_call", test_broken_connection_no_call},
	    {"own_nic_killed_no_call", test_own_nic_killed_no_call},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "conn_death", tests, init, clean);
}

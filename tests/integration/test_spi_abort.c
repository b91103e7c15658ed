/*
 * A connection whose transport gives up is aborted on both sides: the side
 * whose request exhausted its retries (RETRY_EXC_ERR) disconnects, so the
 * peer, which saw nothing wrong, completes its pending receive (flushed:
 * WSA_OPERATION_ABORTED), signals FD_CLOSE and fails later posts with
 * WSAECONNRESET, with no call of the application on either side.  And a
 * socket whose connection is gone refuses WSPRegisterRdmaMemory with
 * WSAENOTCONN.
 *
 * NICs A and B (198.18.0.1, .2) on one fabric, A with short RC timers (they
 * go in A's connection request, so the connection runs with them).  The test
 * takes the link from B to A down: A's sends reach B, B's acknowledgements
 * never reach A, so A's send fails after its retries while B's NIC stays
 * well; A's disconnect request still reaches B.
 */
#include <arpa/inet.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "nstest.h"
#include "nstnic.h"
#include "nstspi.h"
#include "ws2san.h"

#define ADDR_A "198.18.0.1"
#define ADDR_B "198.18.0.2"
#define WAIT_MS 10000
/* RETRY_EXC_ERR comes after about 0.25 s with A's timers; the rest is slack for a loaded host. */
#define ABORT_WAIT_MS 30000
#define PAGE 4096u

static char dir[256];
static pid_t nic_a = -1, nic_b = -1;
static uint16_t next_port = 4000;

static uint32_t addr_n(const char *addr)
{
	struct in_addr a;

	inet_pton(AF_INET, addr, &a);
	return a.s_addr;
}

static int post(SOCKET s, bool send, void *buf, DWORD len, WSAOVERLAPPED *ov)
{
	WSABUF b = {.len = len, .buf = buf};
	DWORD n = 0, flags = 0;
	int err = 0, rc;

	memset(ov, 0, sizeof(*ov));
	ov->hEvent = WSA_INVALID_EVENT;
	rc = send ? WSPSend(s, &b, 1, &n, 0, ov, NULL, NULL, &err)
		  : WSPRecv(s, &b, 1, &n, &flags, ov, NULL, NULL, &err);
	return rc == 0 ? 0 : err;
}

static int reg_rdma(SOCKET s, void *buf, DWORD len)
{
	struct nicsim_rdma_desc d;
	DWORD dlen = sizeof(d);
	int err = 0;

	if (WSPRegisterRdmaMemory(s, buf, len, MEM_READWRITE, &d, &dlen, &err) == 0) {
		WSPDeregisterRdmaMemory(s, &d, dlen, &err);
		return 0;
	}
	return err;
}

/*
 * A's send exhausts its retries; B, whose receive is pending, learns of it
 * from A's disconnect.  Nobody closes a socket until the end.
 */
static void test_peer_told_on_abort(void)
{
	WSAOVERLAPPED ovr1, ovr2, ovs, ov;
	WSANETWORKEVENTS ne;
	SOCKET b, a;
	uint8_t *ma, *mb;
	int evb = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), err = 0;
	double ms_data, ms_send, ms_peer;
	bool closed;

	NST_REQUIRE(evb >= 0);
	NST_REQUIRE_EQ(nst_spi_pair(ADDR_B, ADDR_A, next_port++, &b, &a), 0);
	ma = nst_spi_registered(a, PAGE);
	mb = nst_spi_registered(b, PAGE);
	NST_REQUIRE(ma != NULL && mb != NULL);
	NST_REQUIRE_EQ(WSPEventSelect(b, evb, FD_CLOSE, &err), 0);
	/* Registering for RDMA works while connected. */
	NST_EQ(reg_rdma(a, ma + PAGE / 2, 64), 0);
	NST_REQUIRE_EQ(post(b, false, mb, 100, &ovr1), WSA_IO_PENDING);
	NST_REQUIRE_EQ(post(b, false, mb + 100, 100, &ovr2), WSA_IO_PENDING);
	NST_REQUIRE_EQ(nst_link_down(dir, addr_n(ADDR_B), addr_n(ADDR_A), true), 0);
	memset(ma, 0x5a, 100);
	NST_REQUIRE_EQ(post(a, true, ma, 100, &ovs), WSA_IO_PENDING);

	/* The data reaches B; its acknowledgement does not reach A. */
	ms_data = nst_spi_ov_wait_memory(&ovr1, WAIT_MS);
	ms_send = nst_spi_ov_wait_memory(&ovs, ABORT_WAIT_MS);
	ms_peer = nst_spi_ov_wait_memory(&ovr2, ABORT_WAIT_MS);
	printf("\n    data after %.1f ms, send failed after %.1f ms, peer's receive after %.1f "
	       "more ms ",
	       ms_data, ms_send, ms_peer);
	NST_TRUE(ms_data >= 0);
	NST_EQ(ovr1.OffsetHigh, 0);
	NST_EQ(ovr1.InternalHigh, 100);
	NST_TRUE(ms_send >= 0);
	NST_EQ(ovs.OffsetHigh, WSAECONNABORTED);
	/* The peer: its receive flushed, FD_CLOSE, later posts reset. */
	NST_TRUE(ms_peer >= 0);
	NST_EQ(ovr2.OffsetHigh, WSA_OPERATION_ABORTED);
	closed =
	    ms_peer >= 0 && (poll(&(struct pollfd){.fd = evb, .events = POLLIN}, 1, WAIT_MS) == 1);
	NST_TRUE(closed);
	memset(&ne, 0, sizeof(ne));
	NST_EQ(WSPEnumNetworkEvents(b, evb, &ne, &err), 0);
	NST_EQ(ne.lNetworkEvents & FD_CLOSE, FD_CLOSE);
	NST_EQ(post(b, true, mb, 8, &ov), WSAECONNRESET);
	NST_EQ(post(a, true, ma, 8, &ov), WSAECONNABORTED);

	/* Neither dead socket takes an RDMA registration. */
	NST_EQ(reg_rdma(a, ma + PAGE / 2, 64), WSAENOTCONN);
	NST_EQ(reg_rdma(b, mb + PAGE / 2, 64), WSAENOTCONN);

	NST_EQ(nst_link_down(dir, addr_n(ADDR_B), addr_n(ADDR_A), false), 0);
	NST_EQ(WSPCloseSocket(a, &err), 0);
	NST_EQ(WSPCloseSocket(b, &err), 0);
	close(evb);
	munmap(ma, PAGE);
	munmap(mb, PAGE);
}

/* ---- Suite ---------------------------------------------------------------------------- */

static int init(void)
{
	const char *const addrs[] = {ADDR_A, ADDR_B, NULL};
	/* 4.096 us x 2^12 = 16.8 ms, doubled per retry: RETRY_EXC_ERR after about 0.25 s. */
	const char *const timers[] = {"--ack-timeout", "12", "--retry-count", "3", NULL};

	if (nst_tmpdir(dir, sizeof(dir), "spi-abort") < 0 || nst_make_fabric(dir, addrs) < 0)
		return -1;
	nic_a = nst_start_nic(dir, ADDR_A, timers, WAIT_MS);
	nic_b = nst_start_nic(dir, ADDR_B, NULL, WAIT_MS);
	if (nic_a < 0 || nic_b < 0)
		return -1;
	setenv("NICSIM_DIR", dir, 1);
	return nst_spi_startup() == 0 ? 0 : -1;
}

static int clean(void)
{
	int err = 0, rc = 0;

	WSPCleanup(&err);
	if (!nst_stop_clean(nic_a, WAIT_MS) || !nst_stop_clean(nic_b, WAIT_MS))
		rc = -1;
	nst_done_with_dir(dir);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"peer_told_on_abort", test_peer_told_on_abort},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "spi_abort", tests, init, clean);
}

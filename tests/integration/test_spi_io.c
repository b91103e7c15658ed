/*
 * Operations through the SPI (ws2san.h) against real nicsimd processes:
 * WSPGetOverlappedResult with fWait FALSE and TRUE, every bad input of
 * WSPSend, WSPRecv, WSPRdmaWrite and WSPRdmaRead with its WSA code,
 * descriptors the NIC must refuse, deregistration while in flight, and a
 * NIC without memory windows or RDMA read.  The NICs and helpers are the
 * test_spi_* fixture (nstspidata.h); every test leaves the TPT occupancy
 * of the NICs where it found it (R11).
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

/* ---- Overlapped results --------------------------------------------------------------- */

static void test_overlapped_results(void)
{
	SOCKET a, b;
	uint8_t *buf = map(4 * PAGE);
	WSAOVERLAPPED ov, ovs, bogus = {.Internal = WSA_STATUS_PENDING};
	struct waiter w = {0};
	DWORD n = 9, flags = 9;
	int err = 0, ev = eventfd(0, EFD_NONBLOCK);
	pthread_t t;
	WSABUF wb;

	NST_REQUIRE(buf != NULL && ev >= 0);
	NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_A, &b, &a), 0);
	reg(a, buf, 2 * PAGE, MEM_READ);
	reg(b, buf + 2 * PAGE, 2 * PAGE, MEM_READWRITE);
	nst_fill(buf, 2 * PAGE, 5);

	/* Pending: fWait FALSE says WSA_IO_INCOMPLETE; the fields say in progress. */
	NST_REQUIRE_EQ(post_recv(b, buf + 2 * PAGE, PAGE, &ov), WSA_IO_PENDING);
	NST_EQ(WSPGetOverlappedResult(b, &ov, &n, FALSE, &flags, &err), FALSE);
	NST_EQ(err, WSA_IO_INCOMPLETE);
	NST_EQ_U(ov.Internal, WSA_STATUS_PENDING);
	/* Bad arguments, and a pending structure that is no operation of b. */
	NST_EQ(WSPGetOverlappedResult(b, NULL, &n, FALSE, &flags, &err), FALSE);
	NST_EQ(err, WSAEFAULT);
	NST_EQ(WSPGetOverlappedResult(b, &ov, NULL, FALSE, &flags, &err), FALSE);
	NST_EQ(err, WSAEFAULT);
	NST_EQ(WSPGetOverlappedResult(b, &ov, &n, FALSE, NULL, &err), FALSE);
	NST_EQ(err, WSAEFAULT);
	NST_EQ(WSPGetOverlappedResult(b, &bogus, &n, TRUE, &flags, &err), FALSE);
	NST_EQ(err, WSAEINVAL);
	NST_EQ(WSPGetOverlappedResult(a, &ov, &n, TRUE, &flags, &err), FALSE);
	NST_EQ(err, WSAEINVAL);
	NST_EQ(WSPGetOverlappedResult((SOCKET)7, &ov, &n, TRUE, &flags, &err), FALSE);
	NST_EQ(err, WSAENOTSOCK);

	/* fWait TRUE in another thread wakes when the message lands. */
	w.s = b;
	w.ov = &ov;
	pthread_create(&t, NULL, wait_main, &w);
	wait_until_blocked(&w.tid);
	NST_REQUIRE_EQ(post_send(a, buf, 100, &ovs), WSA_IO_PENDING);
	pthread_join(t, NULL);
	NST_EQ(w.rc, TRUE);
	NST_EQ(w.bytes, 100);
	NST_EQ_U(ov.Internal, 0);
	NST_EQ_U(ov.InternalHigh, 100);
	NST_EQ(ov.OffsetHigh, 0);
	NST_EQ(ov.Offset, 0);
	NST_EQ(ov_wait(a, &ovs, &n), 0);
	NST_EQ(n, 100);
	NST_EQ_U(nst_sum32(buf + 2 * PAGE, 100), nst_sum32(buf, 100));

	/* hEvent: signalled at completion without anyone calling the provider. */
	memset(&ov, 0, sizeof(ov));
	ov.hEvent = ev;
	wb.len = PAGE;
	wb.buf = (char *)buf + 2 * PAGE;
	flags = 0;
	NST_EQ(WSPRecv(b, &wb, 1, &n, &flags, &ov, NULL, NULL, &err), SOCKET_ERROR);
	NST_EQ(err, WSA_IO_PENDING);
	NST_TRUE(!event_fires(ev, 0));
	NST_REQUIRE_EQ(post_send(a, buf + 7, 33, &ovs), WSA_IO_PENDING);
	NST_TRUE(event_fires(ev, WAIT_MS));
	NST_EQ_U(__atomic_load_n(&ov.Internal, __ATOMIC_ACQUIRE), 0);
	NST_EQ_U(ov.InternalHigh, 33);
	NST_EQ(ov_wait(b, &ov, &n), 0);
	NST_EQ(ov_wait(a, &ovs, &n), 0);

	/* Without an overlapped structure: the call waits and gives the count. */
	w.s = b;
	w.buf = buf + 2 * PAGE;
	w.len = PAGE;
	w.tid = 0;
	pthread_create(&t, NULL, blocking_recv_main, &w);
	wait_until_blocked(&w.tid);
	wb.len = 77;
	wb.buf = (char *)buf;
	NST_EQ(WSPSend(a, &wb, 1, &n, 0, NULL, NULL, NULL, &err), 0);
	NST_EQ(n, 77);
	pthread_join(t, NULL);
	NST_EQ(w.rc, 0);
	NST_EQ(w.bytes, 77);

	close_socket(a);
	close_socket(b);
	close(ev);
	munmap(buf, 4 * PAGE);
}

/* ---- Bad input ----------------------------------------------------------------------- */

static void WSPAPI routine(DWORD e, DWORD n, LPWSAOVERLAPPED ov, DWORD f)
{
	(void)e;
	(void)n;
	(void)ov;
	(void)f;
}

static int send_bufs(SOCKET s, WSABUF *b, DWORD count, DWORD flags,
		     LPWSAOVERLAPPED_COMPLETION_ROUTINE r)
{
	WSAOVERLAPPED ov = {0};
	DWORD n;
	int err = 0;

	if (WSPSend(s, b, count, &n, flags, &ov, r, NULL, &err) == 0)
		return 0;
	if (err == WSA_IO_PENDING)
		ov_wait(s, &ov, NULL); /* not expected: do not leave it pending */
	return err;
}

static int recv_bufs(SOCKET s, WSABUF *b, DWORD count, DWORD *flags)
{
	/* Never expected to start: static, so that one that does is not left
	 * pointing at a dead stack frame. */
	static WSAOVERLAPPED ov;
	DWORD n;
	int err = 0;

	if (WSPRecv(s, b, count, &n, flags, &ov, NULL, NULL, &err) == 0)
		return 0;
	return err;
}

static void test_bad_input_send_recv(void)
{
	uint8_t *m = map(8 * PAGE);
	SOCKET a, b, u, bound = sock_on(ADDR_A, 0), l = sock_on(ADDR_A, next_port++);
	WSABUF bufs[5], one = {.len = 10, .buf = (char *)m};
	WSAOVERLAPPED ov, ovs;
	DWORD flags = 0, n = 0;
	int err = 0;

	NST_REQUIRE(m != NULL);
	/* Not connected: unbound, bound, listening. */
	u = WSPSocket(AF_INET, SOCK_STREAM, 0, NULL, 0, 0, &err);
	NST_EQ(send_bufs(u, &one, 1, 0, NULL), WSAENOTCONN);
	NST_EQ(recv_bufs(u, &one, 1, &flags), WSAENOTCONN);
	reg(bound, m, PAGE, MEM_READWRITE);
	NST_EQ(send_bufs(bound, &one, 1, 0, NULL), WSAENOTCONN);
	NST_EQ(recv_bufs(bound, &one, 1, &flags), WSAENOTCONN);
	NST_EQ(WSPListen(l, 1, &err), 0);
	reg(l, m, PAGE, MEM_READWRITE);
	NST_EQ(send_bufs(l, &one, 1, 0, NULL), WSAENOTCONN);
	NST_EQ(send_bufs((SOCKET)99, &one, 1, 0, NULL), WSAENOTSOCK);
	close_socket(u);
	close_socket(bound);
	close_socket(l);

	NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_A, &b, &a), 0);
	reg(a, m, 2 * PAGE, MEM_READ);                 /* pages 0-1: a's send source */
	reg(a, m + 2 * PAGE, PAGE, MEM_READWRITE);     /* page 2: a's receive buffer */
	reg(b, m + 4 * PAGE, 2 * PAGE, MEM_READWRITE); /* pages 4-5: b's only */
	for (int i = 0; i < 5; i++) {
		bufs[i].len = 8;
		bufs[i].buf = (char *)m + 8 * i;
	}
	NST_EQ(send_bufs(a, NULL, 1, 0, NULL), WSAEFAULT);
	NST_EQ(send_bufs(a, bufs, 0, 0, NULL), WSAEINVAL);
	NST_EQ(send_bufs(a, bufs, 5, 0, NULL), WSAEINVAL);
	NST_EQ(send_bufs(a, bufs, 1, 1 /* MSG_OOB */, NULL), WSAEOPNOTSUPP);
	NST_EQ(send_bufs(a, bufs, 1, 0, routine), WSAEOPNOTSUPP);
	/* Not inside a registration of this socket: unregistered, across the
	 * end, another socket's (R3), NULL. */
	one.buf = (char *)m + 7 * PAGE;
	NST_EQ(send_bufs(a, &one, 1, 0, NULL), WSAEFAULT);
	one.buf = (char *)m + 2 * PAGE - 5;
	NST_EQ(send_bufs(a, &one, 1, 0, NULL), WSAEFAULT); /* across two registrations */
	one.buf = (char *)m + 4 * PAGE;
	NST_EQ(send_bufs(a, &one, 1, 0, NULL), WSAEFAULT);
	one.buf = NULL;
	NST_EQ(send_bufs(a, &one, 1, 0, NULL), WSAEFAULT);
	/* Receives: flags, and a buffer the NIC may not write. */
	NST_EQ(recv_bufs(a, bufs, 1, NULL), WSAEFAULT);
	flags = 2; /* MSG_PEEK */
	NST_EQ(recv_bufs(a, bufs, 1, &flags), WSAEOPNOTSUPP);
	flags = 0;
	NST_EQ(recv_bufs(a, bufs, 1, &flags), WSAEFAULT); /* MEM_READ: not for receiving */

	/* Nothing was posted: the next message is exactly the next send. */
	NST_REQUIRE_EQ(post_recv(b, m + 4 * PAGE, PAGE, &ov), WSA_IO_PENDING);
	bufs[0].len = 3;
	bufs[1].len = 0; /* skipped */
	bufs[2].len = 5;
	memset(&ovs, 0, sizeof(ovs));
	NST_EQ(WSPSend(a, bufs, 3, &n, 0, &ovs, NULL, NULL, &err), SOCKET_ERROR);
	NST_EQ(err, WSA_IO_PENDING);
	NST_EQ(ov_wait(a, &ovs, &n), 0);
	NST_EQ(n, 8);
	NST_EQ(ov_wait(b, &ov, &n), 0);
	NST_EQ(n, 8);
	NST_EQ(memcmp(m + 4 * PAGE, m, 3), 0);
	NST_EQ(memcmp(m + 4 * PAGE + 3, m + 16, 5), 0);
	close_socket(a);
	close_socket(b);
	munmap(m, 8 * PAGE);
}

/*
 * Small messages over several buffers each, at the edges of their
 * registrations: sends of up to 96 bytes travel inline and receives of up
 * to 64 beside their completions, so the provider itself copies the bytes,
 * and must copy exactly what the buffers say, no more.  A buffer whose
 * registration was deregistered is refused before anything is sent.
 */
static void test_small_messages_at_edges(void)
{
	uint8_t *m = map(8 * PAGE), *canary;
	SOCKET a, b;
	WSABUF sb[4], rb[4];
	WSAOVERLAPPED ov, ovs;
	DWORD n = 0, flags = 0;
	HANDLE h;
	int err = 0;

	NST_REQUIRE(m != NULL);
	NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_A, &b, &a), 0);
	reg(a, m, PAGE, MEM_READ);                 /* page 0: a's send source */
	reg(b, m + 2 * PAGE, PAGE, MEM_READWRITE); /* page 2: b's receive buffers */
	nst_fill(m, PAGE, 17);
	memset(m + 2 * PAGE, 0, 2 * PAGE);
	canary = m + 3 * PAGE; /* just past b's registration: must stay 0 */
	for (int size = 0; size < 2; size++) {
		DWORD total = size ? 96 : 64;

		/* Send: the first and last bytes of a's registration, a gap, 0 bytes. */
		sb[0] = (WSABUF){.len = 1, .buf = (char *)m};
		sb[1] = (WSABUF){.len = 0, .buf = (char *)m + 100};
		sb[2] = (WSABUF){.len = total - 31, .buf = (char *)m + 200};
		sb[3] = (WSABUF){.len = 30, .buf = (char *)m + PAGE - 30};
		/* Receive: three pieces, the last ending where b's registration ends. */
		rb[0] = (WSABUF){.len = 2, .buf = (char *)m + 2 * PAGE + 10};
		rb[1] = (WSABUF){.len = 0, .buf = (char *)m + 2 * PAGE + 20};
		rb[2] = (WSABUF){.len = 40, .buf = (char *)m + 2 * PAGE + 100};
		rb[3] = (WSABUF){.len = total - 42, .buf = (char *)m + 3 * PAGE - (total - 42)};
		memset(&ov, 0, sizeof(ov));
		flags = 0;
		NST_EQ(WSPRecv(b, rb, 4, &n, &flags, &ov, NULL, NULL, &err), SOCKET_ERROR);
		NST_EQ(err, WSA_IO_PENDING);
		memset(&ovs, 0, sizeof(ovs));
		NST_EQ(WSPSend(a, sb, 4, &n, 0, &ovs, NULL, NULL, &err), SOCKET_ERROR);
		NST_EQ(err, WSA_IO_PENDING);
		NST_EQ(ov_wait(a, &ovs, &n), 0);
		NST_EQ(n, total);
		NST_EQ(ov_wait(b, &ov, &n), 0);
		NST_EQ(n, total);
		{
			uint8_t want[96], got[96];
			DWORD at = 0;

			for (int i = 0; i < 4; i++) {
				memcpy(want + at, sb[i].buf, sb[i].len);
				at += sb[i].len;
			}
			at = 0;
			for (int i = 0; i < 4; i++) {
				memcpy(got + at, rb[i].buf, rb[i].len);
				at += rb[i].len;
			}
			NST_CHECK_(memcmp(want, got, total) == 0, CU_FALSE,
				   "%u bytes: what arrived differs from what was sent", total);
		}
		NST_EQ(m[2 * PAGE + 12], 0);
		NST_EQ(m[2 * PAGE + 20], 0);
		NST_EQ(m[2 * PAGE + 140], 0);
		NST_EQ(canary[0], 0);
		memset(m + 2 * PAGE, 0, PAGE);
	}
	/* Deregistered: the send is refused, and nothing goes out. */
	h = reg(a, m + 4 * PAGE, PAGE, MEM_READ);
	dereg(a, h);
	sb[0] = (WSABUF){.len = 8, .buf = (char *)m + 4 * PAGE};
	NST_EQ(send_bufs(a, sb, 1, 0, NULL), WSAEFAULT);
	/* One byte past the end of a registration: refused too. */
	sb[0] = (WSABUF){.len = 31, .buf = (char *)m + PAGE - 30};
	NST_EQ(send_bufs(a, sb, 1, 0, NULL), WSAEFAULT);
	/* The connection still carries the next message exactly. */
	NST_REQUIRE_EQ(post_recv(b, m + 2 * PAGE, PAGE, &ov), WSA_IO_PENDING);
	NST_REQUIRE_EQ(post_send(a, m + 5, 9, &ovs), WSA_IO_PENDING);
	NST_EQ(ov_wait(a, &ovs, &n), 0);
	NST_EQ(ov_wait(b, &ov, &n), 0);
	NST_EQ(n, 9);
	NST_EQ(memcmp(m + 2 * PAGE, m + 5, 9), 0);
	close_socket(a);
	close_socket(b);
	munmap(m, 8 * PAGE);
}

static int rdma_call(SOCKET s, bool write, WSABUFEX *b, DWORD count, const void *d, DWORD dlen,
		     DWORD off)
{
	WSAOVERLAPPED ov = {0};
	DWORD n;
	int err = 0, rc;

	if (write)
		rc = WSPRdmaWrite(s, b, count, (void *)d, dlen, off, &n, 0, &ov, NULL, NULL, &err);
	else
		rc = WSPRdmaRead(s, b, count, (void *)d, dlen, off, &n, 0, &ov, NULL, NULL, &err);
	if (rc == 0)
		return 0;
	if (err == WSA_IO_PENDING)
		ov_wait(s, &ov, NULL);
	return err;
}

static void test_bad_input_rdma(void)
{
	uint8_t *m = map(16 * PAGE);
	SOCKET a, b, bound = sock_on(ADDR_A, 0);
	struct nicsim_rdma_desc dw, dr, own, d;
	HANDLE hr, hw, hb;
	WSABUFEX x = {.len = 64, .buf = (char *)m};
	int err = 0;

	NST_REQUIRE(m != NULL);
	/* Not connected: no buffer to expose, no RDMA (with any descriptor). */
	hr = reg(bound, m, PAGE, MEM_READ);
	NST_EQ(expose(bound, m + 8 * PAGE, PAGE, MEM_WRITE, &dw), WSAENOTCONN);
	dw = (struct nicsim_rdma_desc){.magic = NICSIM_RDMA_DESC_MAGIC,
				       .version = NICSIM_RDMA_DESC_VERSION,
				       .access = MEM_WRITE,
				       .rkey = 1,
				       .va = (uintptr_t)(m + 8 * PAGE),
				       .len = PAGE};
	x.handle = hr;
	NST_EQ(rdma_call(bound, true, &x, 1, &dw, sizeof(dw), 0), WSAENOTCONN);
	close_socket(bound);

	NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_A, &b, &a), 0);
	hr = reg(a, m, 2 * PAGE, MEM_READ);
	hw = reg(a, m + 2 * PAGE, 2 * PAGE, MEM_READWRITE);
	hb = reg(b, m + 4 * PAGE, PAGE, MEM_READWRITE);
	NST_REQUIRE_EQ(expose(b, m + 8 * PAGE, 2 * PAGE, MEM_WRITE, &dw), 0);
	NST_REQUIRE_EQ(expose(b, m + 10 * PAGE, 2 * PAGE, MEM_READ, &dr), 0);
	NST_REQUIRE_EQ(expose(a, m + 12 * PAGE, PAGE, MEM_READWRITE, &own), 0);
	x.handle = hr;
	NST_EQ(rdma_call(a, true, NULL, 1, &dw, sizeof(dw), 0), WSAEFAULT);
	NST_EQ(rdma_call(a, true, &x, 0, &dw, sizeof(dw), 0), WSAEINVAL);
	NST_EQ(rdma_call(a, true, &x, 5, &dw, sizeof(dw), 0), WSAEINVAL);
	/* Handles: NULL, forged, another socket's (R3). */
	x.handle = NULL;
	NST_EQ(rdma_call(a, true, &x, 1, &dw, sizeof(dw), 0), WSAEINVAL);
	x.handle = (HANDLE)((uintptr_t)hr ^ 0x1000000);
	NST_EQ(rdma_call(a, true, &x, 1, &dw, sizeof(dw), 0), WSAEINVAL);
	x.handle = hb;
	x.buf = (char *)m + 4 * PAGE;
	NST_EQ(rdma_call(a, true, &x, 1, &dw, sizeof(dw), 0), WSAEINVAL);
	/* Buffers outside the handle's registration, or a read-only sink. */
	x.handle = hr;
	x.buf = (char *)m + 2 * PAGE - 10;
	NST_EQ(rdma_call(a, true, &x, 1, &dw, sizeof(dw), 0), WSAEFAULT);
	x.buf = (char *)m;
	NST_EQ(rdma_call(a, false, &x, 1, &dr, sizeof(dr), 0), WSAEFAULT);
	/* Descriptors: NULL, short, not a descriptor, this side's own (not the
	 * peer's NIC), without the access asked for, past the target's end. */
	NST_EQ(rdma_call(a, true, &x, 1, NULL, sizeof(dw), 0), WSAEFAULT);
	NST_EQ(rdma_call(a, true, &x, 1, &dw, sizeof(dw) - 1, 0), WSAEINVAL);
	d = dw;
	d.magic ^= 1;
	NST_EQ(rdma_call(a, true, &x, 1, &d, sizeof(d), 0), WSAEINVAL);
	NST_EQ(rdma_call(a, true, &x, 1, &own, sizeof(own), 0), WSAEINVAL);
	NST_EQ(rdma_call(a, true, &x, 1, &dr, sizeof(dr), 0), WSAEINVAL);
	x.handle = hw;
	x.buf = (char *)m + 2 * PAGE;
	NST_EQ(rdma_call(a, false, &x, 1, &dw, sizeof(dw), 0), WSAEINVAL);
	x.handle = hr;
	x.buf = (char *)m;
	NST_EQ(rdma_call(a, true, &x, 1, &dw, sizeof(dw), 2 * PAGE - 63), WSAEFAULT);
	NST_EQ(rdma_call(a, true, &x, 1, &dw, sizeof(dw), 3 * PAGE), WSAEFAULT);
	NST_EQ(rdma_call(a, true, &x, 1, &dw, sizeof(dw), 0), WSA_IO_PENDING);
	/* The connection still works: nothing bad reached the NIC. */
	NST_EQ(rdma_call(a, true, &x, 1, &dw, sizeof(dw), 2 * PAGE - 64), WSA_IO_PENDING);
	unexpose(b, &dw);
	unexpose(b, &dr);
	unexpose(a, &own);
	close_socket(a);
	close_socket(b);
	(void)err;
	munmap(m, 16 * PAGE);
}

/* ---- Descriptors the NIC refuses (R4-R6 through the SPI) --------------------------------- */

/*
 * a RDMA-writes (or reads) through descriptor d with 64 bytes: the NIC
 * refuses, the operation completes with WSAECONNRESET, the connection is
 * broken for later posts, and the target memory is unchanged.
 */
static void refused(SOCKET a, HANDLE h, uint8_t *src, const struct nicsim_rdma_desc *d, bool write,
		    const uint8_t *target, size_t target_len)
{
	uint32_t before = nst_sum32(target, target_len);
	WSAOVERLAPPED ov;
	DWORD n;

	NST_REQUIRE_EQ(post_rdma(a, write, src, 64, h, d, 0, &ov), WSA_IO_PENDING);
	NST_EQ(ov_wait(a, &ov, &n), WSAECONNRESET);
	NST_EQ(post_rdma(a, write, src, 64, h, d, 0, &ov), WSAECONNRESET);
	NST_EQ(post_send(a, src, 1, &ov), WSAECONNRESET);
	NST_EQ_U(nst_sum32(target, target_len), before);
}

static void test_descriptors_refused_by_nic(void)
{
	uint8_t *m = map(16 * PAGE), *src = m, *t1 = m + 4 * PAGE, *t2 = m + 8 * PAGE;
	struct nicsim_rdma_desc d, d2, pre;
	SOCKET a, b, a2, b2, c, s, l;
	HANDLE h;
	int err = 0;

	NST_REQUIRE(m != NULL);
	nst_fill(m, 16 * PAGE, 77);

	/* Another connection's descriptor, from the same peer NIC (R4). */
	NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_A, &b, &a), 0);
	NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_A, &b2, &a2), 0);
	NST_REQUIRE_EQ(expose(b2, t2, PAGE, MEM_READWRITE, &d2), 0);
	h = reg(a, src, PAGE, MEM_READWRITE);
	refused(a, h, src, &d2, true, t2, PAGE);
	close_socket(a);
	close_socket(b);
	/* That connection still works with its own descriptor. */
	h = reg(a2, src, PAGE, MEM_READWRITE);
	{
		WSAOVERLAPPED ov;

		NST_REQUIRE_EQ(post_rdma(a2, true, src, 64, h, &d2, 0, &ov), WSA_IO_PENDING);
		NST_EQ(ov_wait(a2, &ov, NULL), 0);
		NST_EQ(memcmp(t2, src, 64), 0);
	}
	unexpose(b2, &d2);
	close_socket(a2);
	close_socket(b2);

	/* Forged key, stale key, read through a write-only window, past the end. */
	for (int k = 0; k < 4; k++) {
		NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_A, &b, &a), 0);
		NST_REQUIRE_EQ(expose(b, t1, PAGE, MEM_WRITE, &d), 0);
		h = reg(a, src, PAGE, MEM_READWRITE);
		if (k == 0) {
			d.rkey ^= 0x100;
		} else if (k == 1) {
			unexpose(b, &d);
		} else if (k == 2) {
			d.access = MEM_READWRITE; /* claims more than the window grants (R6) */
		} else {
			d.len = 4 * PAGE; /* claims more than the window covers */
			d.va -= 0;
		}
		if (k == 3) {
			WSAOVERLAPPED ov;
			uint32_t before = nst_sum32(t1 + PAGE, PAGE);

			NST_REQUIRE_EQ(post_rdma(a, true, src, 64, h, &d, PAGE, &ov),
				       WSA_IO_PENDING);
			NST_EQ(ov_wait(a, &ov, NULL), WSAECONNRESET);
			NST_EQ_U(nst_sum32(t1 + PAGE, PAGE), before);
		} else {
			refused(a, h, src, &d, k != 2, t1, PAGE);
		}
		close_socket(a);
		close_socket(b);
	}

	/* No descriptor before connecting: it could never be valid on the
	 * connection (the window would be bound to no connection). */
	l = sock_on(ADDR_A, next_port);
	NST_EQ(WSPListen(l, 1, &err), 0);
	c = sock_on(ADDR_B, 0);
	memset(&pre, 0, sizeof(pre));
	NST_EQ(expose(c, t1, PAGE, MEM_WRITE, &pre), WSAENOTCONN);
	NST_EQ(pre.rkey, 0);
	{
		struct acceptor acc = {.l = l};
		pthread_t t;

		pthread_create(&t, NULL, accept_main, &acc);
		NST_EQ(try_connect(c, ADDR_A, next_port++), 0);
		pthread_join(t, NULL);
		s = acc.s;
	}
	NST_REQUIRE(s != INVALID_SOCKET);
	/* Registering on the connected socket gives a valid descriptor. */
	NST_REQUIRE_EQ(expose(c, t1, PAGE, MEM_WRITE, &d), 0);
	h = reg(s, src, PAGE, MEM_READWRITE);
	{
		WSAOVERLAPPED ov;

		NST_REQUIRE_EQ(post_rdma(s, true, src + 100, 64, h, &d, 8, &ov), WSA_IO_PENDING);
		NST_EQ(ov_wait(s, &ov, NULL), 0);
		NST_EQ(memcmp(t1 + 8, src + 100, 64), 0);
	}
	close_socket(s);
	close_socket(c);
	close_socket(l);
	munmap(m, 16 * PAGE);
}

/* ---- Deregistration ---------------------------------------------------------------------- */

static void test_r1_dereg_refused_while_in_flight(void)
{
	uint8_t *m = map(4 * PAGE);
	SOCKET a, b;
	WSAOVERLAPPED ov, ovs;
	HANDLE h, h2;
	int err = 0;

	NST_REQUIRE(m != NULL);
	NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_A, &b, &a), 0);
	h = reg(a, m, PAGE, MEM_READWRITE);
	h2 = reg(a, m, PAGE, MEM_READWRITE); /* a second instance: same handle (R2) */
	NST_TRUE(h == h2);
	reg(b, m + 2 * PAGE, PAGE, MEM_READ);
	NST_REQUIRE_EQ(post_recv(a, m, PAGE, &ov), WSA_IO_PENDING);
	/* The socket's other instance may go; its last one may not (R1). */
	NST_EQ(WSPDeregisterMemory(a, h, &err), 0);
	NST_EQ(WSPDeregisterMemory(a, h, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEINVAL);
	/* Nothing changed: the receive still lands, then the release works. */
	NST_REQUIRE_EQ(post_send(b, m + 2 * PAGE, 10, &ovs), WSA_IO_PENDING);
	NST_EQ(ov_wait(a, &ov, NULL), 0);
	NST_EQ(ov_wait(b, &ovs, NULL), 0);
	NST_EQ(WSPDeregisterMemory(a, h, &err), 0);
	close_socket(a);
	close_socket(b);
	munmap(m, 4 * PAGE);
}

/* ---- A NIC without windows or RDMA read ---------------------------------------------------- */

static void test_nic_without_windows_or_rdma_read(void)
{
	uint8_t *m = map(2u << 20);
	SOCKET a, c, lone = sock_on(ADDR_C, 0);
	struct nicsim_rdma_desc d;
	WSAOVERLAPPED ov;
	WSABUF two[2];
	HANDLE h, h1, h2;
	GUID rd = WSAID_RDMAREAD;
	void *fn = NULL;
	DWORD n;
	int err = 0;

	NST_REQUIRE(m != NULL);
	/* RDMA read refused at the call and at the extension lookup. */
	h = reg(lone, m, PAGE, MEM_READWRITE);
	NST_EQ(WSPIoctl(lone, SIO_GET_EXTENSION_FUNCTION_POINTER, &rd, sizeof(rd), &fn, sizeof(fn),
			&n, NULL, NULL, NULL, &err),
	       SOCKET_ERROR);
	NST_EQ(err, WSAEOPNOTSUPP);
	NST_EQ(expose(lone, m + PAGE, PAGE, MEM_READ, &d), WSAENOTCONN);
	d = (struct nicsim_rdma_desc){.magic = NICSIM_RDMA_DESC_MAGIC,
				      .version = NICSIM_RDMA_DESC_VERSION,
				      .access = MEM_READ,
				      .rkey = 1,
				      .va = (uintptr_t)(m + PAGE),
				      .len = PAGE};
	NST_EQ(post_rdma(lone, false, m, 64, h, &d, 0, &ov), WSAEOPNOTSUPP);
	/* Longer than SO_MAX_RDMA_SIZE (1 MiB here): refused before anything else. */
	h1 = reg(lone, m, 1u << 20, MEM_READWRITE);
	h2 = reg(lone, m + (1u << 20), 1u << 20, MEM_READWRITE);
	(void)h1;
	(void)h2;
	two[0].len = 1u << 20;
	two[0].buf = (char *)m;
	two[1].len = 1;
	two[1].buf = (char *)m + (1u << 20);
	NST_EQ(send_bufs(lone, two, 2, 0, NULL), WSAEMSGSIZE);
	close_socket(lone);

	/* RDMA write into C's exposure works; the key is the region's own. */
	NST_REQUIRE_EQ(connect_pair(ADDR_C, ADDR_A, &c, &a), 0);
	nst_fill(m, PAGE, 3);
	memset(m + PAGE, 0, PAGE);
	NST_REQUIRE_EQ(expose(c, m + PAGE, PAGE, MEM_WRITE, &d), 0);
	h = reg(a, m, PAGE, MEM_READ);
	NST_REQUIRE_EQ(post_rdma(a, true, m + 5, 100, h, &d, 9, &ov), WSA_IO_PENDING);
	NST_EQ(ov_wait(a, &ov, &n), 0);
	NST_EQ(memcmp(m + PAGE + 9, m + 5, 100), 0);
	unexpose(c, &d);
	close_socket(a);
	close_socket(c);
	munmap(m, 2u << 20);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"overlapped_results", test_overlapped_results},
	    {"bad_input_send_recv", test_bad_input_send_recv},
	    {"small_messages_at_edges", test_small_messages_at_edges},
	    {"bad_input_rdma", test_bad_input_rdma},
	    {"descriptors_refused_by_nic", test_descriptors_refused_by_nic},
	    {"r1_dereg_refused_while_in_flight", test_r1_dereg_refused_while_in_flight},
	    {"nic_without_windows_or_rdma_read", test_nic_without_windows_or_rdma_read},
	    {NULL, NULL},
	};

	return spi_main(argc, argv, "spi_io", tests);
}

/*
 * The first message of a connection (ws2san.h, WSPRecv): a message of up to
 * 256 bytes that the peer sends before the application's first WSPRecv is
 * held by the receiving NIC (the provider creates every QP with
 * NIC_QP_F_HOLD_FIRST), so that the sender's send completes and no RNR NAK
 * is drawn, and goes to that first receive, whichever side sends first;
 * later messages go to later receives in order.  A receive posted first
 * takes a first message of any size; a longer first message with no
 * receive waits, on RNR NAKs, for one; a first receive shorter than the
 * held message fails with WSAEMSGSIZE, as any receive too short does; a
 * socket closed with a message held leaks nothing.  Real nicsimd processes
 * on a fabric; the NICs and helpers are the test_spi_* fixture
 * (nstspidata.h); a raw host (nstverbs.h) sends what the provider does not,
 * immediate data.  Each wait is on something observable: the sender's
 * completion (the NIC acknowledges a SEND only once a receive or the hold
 * took it), a receive's completion, or a NIC counter.
 */
#include <pthread.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "nicsim_mgmt.h"
#include "nstest.h"
#include "nstnic.h"
#include "nstspi.h"
/* Before the fixture's globals, whose names its inline helpers' arguments share. */
#include "nstverbs.h"
#include "nstspidata.h"

#define HELD NICSIM_FIRST_MESSAGE_MAX

/* RNR NAKs received by either NIC so far. */
static uint64_t rnr_naks(void)
{
	return nst_nic_stat(sock_a, NST_STAT(rnr_naks)) + nst_nic_stat(sock_b, NST_STAT(rnr_naks));
}

/* First messages either NIC held, and dropped, so far. */
static uint64_t held(void)
{
	return nst_nic_stat(sock_a, NST_STAT(first_msg_held)) +
	       nst_nic_stat(sock_b, NST_STAT(first_msg_held));
}

static uint64_t dropped(void)
{
	return nst_nic_stat(sock_a, NST_STAT(first_msg_dropped)) +
	       nst_nic_stat(sock_b, NST_STAT(first_msg_dropped));
}

/* One connected socket and a registered page of its own. */
struct end {
	SOCKET s;
	uint8_t *buf; /* PAGE bytes, MEM_READWRITE */
};

/* A pair across NICs B (accepting) and A (connecting), each with a page. */
static void pair_open(struct end *acc, struct end *con)
{
	NST_REQUIRE_EQ(connect_pair(ADDR_B, ADDR_A, &acc->s, &con->s), 0);
	acc->buf = nst_spi_registered(acc->s, PAGE);
	con->buf = nst_spi_registered(con->s, PAGE);
	NST_REQUIRE(acc->buf != NULL && con->buf != NULL);
}

/* Close what is still open (INVALID_SOCKET: closed already) and unmap. */
static void pair_close(struct end *acc, struct end *con)
{
	if (acc->s != INVALID_SOCKET)
		close_socket(acc->s);
	if (con->s != INVALID_SOCKET)
		close_socket(con->s);
	munmap(acc->buf, PAGE);
	munmap(con->buf, PAGE);
}

/* Wait up to WAIT_MS for ov on s to complete: its WSA code, or -1. */
static int done_within(SOCKET s, WSAOVERLAPPED *ov, DWORD *bytes)
{
	uint64_t deadline = nst_now_ns() + (uint64_t)WAIT_MS * 1000000u;
	DWORD flags = 0;
	int err = 0;

	while (!WSPGetOverlappedResult(s, ov, bytes, FALSE, &flags, &err)) {
		if (err != WSA_IO_INCOMPLETE)
			return err;
		if (nst_now_ns() >= deadline)
			return -1;
		nst_sleep_ms(1);
	}
	return 0;
}

/*
 * from sends len bytes (filled from seed) and the send completes with
 * nobody's receive posted at its peer: the peer's NIC held it.  (Without
 * the hold, the send would wait on RNR NAKs until a receive is posted.)
 */
static void send_unanswered(struct end *from, uint32_t len, uint32_t seed)
{
	WSAOVERLAPPED ov;
	DWORD n = 0;
	int rc;

	nst_fill(from->buf, len, seed);
	NST_REQUIRE_EQ(post_send(from->s, from->buf, len, &ov), WSA_IO_PENDING);
	rc = done_within(from->s, &ov, &n);
	if (rc == -1) {
		/* Not acknowledged: end it (closing aborts the send) and stop. */
		close_socket(from->s);
		from->s = INVALID_SOCKET;
	}
	NST_REQUIRE_EQ(rc, 0);
	NST_EQ(n, len);
}

/*
 * The first receive of to, overlapped with an event, once the message of
 * len bytes filled from seed is held by to's NIC: it completes without
 * another call (the event fires) as any receive reads (byte count, no
 * flags, GetOverlappedResult), with the message and nothing past it.
 */
static void first_recv_held(struct end *to, uint32_t len, uint32_t seed)
{
	uint8_t want[HELD];
	int ev = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	WSABUF b = {.len = PAGE - 8, .buf = (char *)to->buf + 8};
	WSAOVERLAPPED ov = {.hEvent = ev};
	DWORD n = 0, flags = 0;
	int err = 0;

	NST_REQUIRE(ev >= 0 && len <= HELD);
	nst_fill(want, len, seed);
	memset(to->buf, 0, PAGE);
	NST_EQ(WSPRecv(to->s, &b, 1, &n, &flags, &ov, NULL, NULL, &err), SOCKET_ERROR);
	NST_EQ(err, WSA_IO_PENDING);
	NST_TRUE(event_fires(ev, WAIT_MS));
	NST_EQ(ov_wait(to->s, &ov, &n), 0);
	NST_TRUE(WSPGetOverlappedResult(to->s, &ov, &n, FALSE, &flags, &err));
	NST_EQ(n, len);
	NST_EQ(flags, 0);
	NST_EQ(memcmp(to->buf + 8, want, len), 0);
	NST_EQ(to->buf[8 + len], 0); /* nothing past the message */
	close(ev);
}

/*
 * After the first message from from to to: the next two, of any size, go
 * to the receives to posts next, in the order posted.
 */
static void later_messages_in_order(struct end *to, struct end *from)
{
	WSAOVERLAPPED r1, r2, s1, s2;
	DWORD n = 0;

	NST_REQUIRE_EQ(post_recv(to->s, to->buf + 1024, 1024, &r1), WSA_IO_PENDING);
	NST_REQUIRE_EQ(post_recv(to->s, to->buf + 2048, 1024, &r2), WSA_IO_PENDING);
	nst_fill(from->buf + 1024, 700, 21);
	nst_fill(from->buf + 2048, 900, 31);
	NST_REQUIRE_EQ(post_send(from->s, from->buf + 1024, 700, &s1), WSA_IO_PENDING);
	NST_REQUIRE_EQ(post_send(from->s, from->buf + 2048, 900, &s2), WSA_IO_PENDING);
	NST_EQ(ov_wait(from->s, &s1, &n), 0);
	NST_EQ(ov_wait(from->s, &s2, &n), 0);
	NST_EQ(ov_wait(to->s, &r1, &n), 0);
	NST_EQ(n, 700);
	NST_EQ(ov_wait(to->s, &r2, &n), 0);
	NST_EQ(n, 900);
	NST_EQ_U(nst_sum32(to->buf + 1024, 700), nst_sum32(from->buf + 1024, 700));
	NST_EQ_U(nst_sum32(to->buf + 2048, 900), nst_sum32(from->buf + 2048, 900));
}

/* The connecting side sends as soon as it is connected; the accepting side
 * posts its first receive only after that send completed. */
static void test_connector_sends_first(void)
{
	struct end acc, con;
	uint64_t rnr0 = rnr_naks();

	uint64_t held0 = held();

	pair_open(&acc, &con);
	send_unanswered(&con, 200, 1);
	NST_EQ_U(held(), held0 + 1);
	first_recv_held(&acc, 200, 1);
	later_messages_in_order(&acc, &con);
	NST_EQ_U(rnr_naks(), rnr0);
	pair_close(&acc, &con);
}

/* The same the other way, and a blocking first receive (no overlapped
 * structure) returns the held message. */
static void test_acceptor_sends_first(void)
{
	struct end acc, con;
	WSABUF b;
	DWORD n = 0, flags = 0;
	int err = 0;
	uint64_t rnr0 = rnr_naks();

	pair_open(&acc, &con);
	send_unanswered(&acc, HELD, 2);
	memset(con.buf, 0, PAGE);
	b = (WSABUF){.len = PAGE / 2, .buf = (char *)con.buf + PAGE / 2};
	NST_EQ(WSPRecv(con.s, &b, 1, &n, &flags, NULL, NULL, NULL, &err), 0);
	NST_EQ(n, HELD);
	NST_EQ(memcmp(con.buf + PAGE / 2, acc.buf, HELD), 0);
	later_messages_in_order(&con, &acc);
	NST_EQ_U(rnr_naks(), rnr0);
	pair_close(&acc, &con);
}

/* Both sides send at once, as a negotiation does, and receive after. */
static void test_both_send_first(void)
{
	struct end acc, con;
	uint64_t rnr0 = rnr_naks();

	pair_open(&acc, &con);
	send_unanswered(&con, 100, 9);
	send_unanswered(&acc, 120, 10);
	first_recv_held(&acc, 100, 9);
	first_recv_held(&con, 120, 10);
	later_messages_in_order(&acc, &con);
	later_messages_in_order(&con, &acc);
	NST_EQ_U(rnr_naks(), rnr0);
	pair_close(&acc, &con);
}

/* A first receive posted before the message: it completes when the message
 * comes, in several buffers, draws no RNR NAK and holds nothing. */
static void test_first_receive_waits(void)
{
	struct end acc, con;
	int ev = eventfd(0, EFD_CLOEXEC);
	WSABUF b[2];
	WSAOVERLAPPED ov = {.hEvent = ev}, os;
	DWORD n = 0, flags = 0;
	int err = 0;
	uint64_t rnr0 = rnr_naks(), held0 = held();

	NST_REQUIRE(ev >= 0);
	pair_open(&acc, &con);
	memset(acc.buf, 0, PAGE);
	b[0] = (WSABUF){.len = 100, .buf = (char *)acc.buf};
	b[1] = (WSABUF){.len = 1000, .buf = (char *)acc.buf + 2048};
	NST_EQ(WSPRecv(acc.s, b, 2, &n, &flags, &ov, NULL, NULL, &err), SOCKET_ERROR);
	NST_EQ(err, WSA_IO_PENDING);
	NST_EQ_U(ov.Internal, WSA_STATUS_PENDING);
	nst_fill(con.buf, 250, 3);
	NST_REQUIRE_EQ(post_send(con.s, con.buf, 250, &os), WSA_IO_PENDING);
	NST_EQ(ov_wait(con.s, &os, &n), 0);
	/* Completed without a call of this side's: its event fires. */
	NST_TRUE(event_fires(ev, WAIT_MS));
	NST_EQ(ov_wait(acc.s, &ov, &n), 0);
	NST_EQ(n, 250);
	NST_EQ(memcmp(acc.buf, con.buf, 100), 0);
	NST_EQ(memcmp(acc.buf + 2048, con.buf + 100, 150), 0);
	NST_EQ(acc.buf[2048 + 150], 0);
	later_messages_in_order(&acc, &con);
	NST_EQ_U(rnr_naks(), rnr0);
	NST_EQ_U(held(), held0);
	pair_close(&acc, &con);
	close(ev);
}

/*
 * A first message longer than 256 bytes: a receive posted before it takes
 * it, whatever its size, with no RNR NAK; with none posted it is not held
 * but waits, on RNR NAKs, for the receive posted later, and its send
 * completes then.  The connection stays up either way.
 */
static void too_long(bool posted_first)
{
	const uint32_t len = 3000;
	struct end acc, con;
	WSAOVERLAPPED ov, os;
	DWORD n = 0;
	uint64_t rnr0 = rnr_naks(), held0 = held();

	pair_open(&acc, &con);
	memset(acc.buf, 0, PAGE);
	if (posted_first)
		NST_REQUIRE_EQ(post_recv(acc.s, acc.buf, PAGE, &ov), WSA_IO_PENDING);
	nst_fill(con.buf, len, 4);
	NST_REQUIRE_EQ(post_send(con.s, con.buf, len, &os), WSA_IO_PENDING);
	if (!posted_first) {
		/* Refused for want of a receive, and still waiting. */
		NST_REQUIRE_GE(nst_wait_nic_stat(sock_a, NST_STAT(rnr_naks), rnr0 + 1, WAIT_MS),
			       rnr0 + 1);
		NST_EQ_U(os.Internal, WSA_STATUS_PENDING);
		NST_REQUIRE_EQ(post_recv(acc.s, acc.buf, PAGE, &ov), WSA_IO_PENDING);
	}
	NST_EQ(ov_wait(con.s, &os, &n), 0);
	NST_EQ(n, len);
	NST_EQ(ov_wait(acc.s, &ov, &n), 0);
	NST_EQ(n, len);
	NST_EQ(memcmp(acc.buf, con.buf, len), 0);
	NST_EQ_U(held(), held0);
	if (posted_first)
		NST_EQ_U(rnr_naks(), rnr0);
	/* The connection goes on. */
	later_messages_in_order(&acc, &con);
	pair_close(&acc, &con);
}

static void test_first_message_too_long(void)
{
	too_long(false);
}

static void test_first_message_too_long_receive_waiting(void)
{
	too_long(true);
}

/* A first receive shorter than the held message: WSAEMSGSIZE, as the NIC
 * gives any receive too short, and the connection breaks on both sides. */
static void test_first_receive_too_short(void)
{
	struct end acc, con;
	WSAOVERLAPPED ov, oc;
	DWORD n = 0;

	pair_open(&acc, &con);
	NST_REQUIRE_EQ(post_recv(con.s, con.buf + 2048, 1024, &oc), WSA_IO_PENDING);
	send_unanswered(&con, 200, 5);
	NST_EQ(post_recv(acc.s, acc.buf, 100, &ov), WSA_IO_PENDING);
	NST_EQ(ov_wait(acc.s, &ov, &n), WSAEMSGSIZE);
	NST_EQ(post_recv(acc.s, acc.buf, PAGE, &ov), WSAEMSGSIZE);
	/* The peer is told: its receive is flushed, its next send refused. */
	NST_EQ(ov_wait(con.s, &oc, &n), WSA_OPERATION_ABORTED);
	NST_EQ(post_send(con.s, con.buf, 10, &oc), WSAECONNRESET);
	pair_close(&acc, &con);
}

/*
 * A held message nobody received when the connection ends is dropped,
 * counted by the NIC, and leaks nothing: the peer closing after sending
 * (the first receive then fails as after any close), the holder closing,
 * or the holder closing with its first receive waiting instead.  The TPT
 * holds the sockets' registered pages only, and is as it was after.
 */
static void test_close_with_message_held(void)
{
	struct end acc, con;
	WSAOVERLAPPED ov;
	DWORD n = 0;
	int a0 = nst_tpt_in_use(sock_a), b0 = nst_tpt_in_use(sock_b);
	int ev = eventfd(0, EFD_CLOEXEC), err = 0;
	uint64_t disc = nst_nic_stat(sock_b, NST_STAT(disconnects)), drop0 = dropped();

	/* The peer closes after sending. */
	NST_REQUIRE(ev >= 0);
	pair_open(&acc, &con);
	/* Each socket's registered page, nothing more. */
	NST_EQ(nst_tpt_in_use(sock_a), a0 + 1);
	NST_EQ(nst_tpt_in_use(sock_b), b0 + 1);
	send_unanswered(&con, 64, 6);
	NST_REQUIRE_EQ(WSPEventSelect(acc.s, ev, FD_CLOSE, &err), 0);
	close_socket(con.s);
	con.s = INVALID_SOCKET;
	NST_REQUIRE_GE(nst_wait_nic_stat(sock_b, NST_STAT(disconnects), disc + 1, WAIT_MS),
		       disc + 1);
	NST_EQ_U(dropped(), drop0 + 1);
	/* Once the provider saw the close (FD_CLOSE), the receive fails. */
	NST_TRUE(event_fires(ev, WAIT_MS));
	NST_EQ(post_recv(acc.s, acc.buf, PAGE, &ov), WSAECONNRESET);
	close(ev);
	pair_close(&acc, &con);
	NST_EQ(nst_wait_tpt_in_use(sock_a, a0, WAIT_MS), a0);
	NST_EQ(nst_wait_tpt_in_use(sock_b, b0, WAIT_MS), b0);

	/* The holder closes: its peer's receive is aborted. */
	pair_open(&acc, &con);
	NST_REQUIRE_EQ(post_recv(con.s, con.buf, PAGE, &ov), WSA_IO_PENDING);
	send_unanswered(&con, 128, 7);
	close_socket(acc.s);
	acc.s = INVALID_SOCKET;
	NST_EQ(nst_wait_tpt_in_use(sock_b, b0, WAIT_MS), b0);
	NST_EQ_U(dropped(), drop0 + 2);
	NST_EQ(ov_wait(con.s, &ov, &n), WSA_OPERATION_ABORTED);
	pair_close(&acc, &con);
	NST_EQ(nst_wait_tpt_in_use(sock_a, a0, WAIT_MS), a0);

	/* The first receive waiting: aborted when its socket closes. */
	pair_open(&acc, &con);
	NST_REQUIRE_EQ(post_recv(acc.s, acc.buf, PAGE, &ov), WSA_IO_PENDING);
	close_socket(acc.s);
	acc.s = INVALID_SOCKET;
	NST_EQ_U(ov.Internal, 0);
	NST_EQ(ov.OffsetHigh, WSA_OPERATION_ABORTED);
	pair_close(&acc, &con);
	NST_EQ(nst_wait_tpt_in_use(sock_a, a0, WAIT_MS), a0);
	NST_EQ(nst_wait_tpt_in_use(sock_b, b0, WAIT_MS), b0);
	NST_EQ_U(dropped(), drop0 + 2);
}

/*
 * The application gives the first receive's memory back before the message
 * comes (R10): nothing is written there, the receive fails with WSAEFAULT
 * as the NIC's refused DMA does, the send too, and the connection breaks.
 */
static void test_first_receive_memory_given_back(void)
{
	struct end acc, con;
	uint8_t *gone = map(PAGE);
	WSAOVERLAPPED ov, os;
	DWORD n = 0;

	NST_REQUIRE(gone != NULL);
	pair_open(&acc, &con);
	NST_REQUIRE(reg(acc.s, gone, PAGE, MEM_READWRITE) != NULL);
	NST_REQUIRE_EQ(post_recv(acc.s, gone, PAGE, &ov), WSA_IO_PENDING);
	/* The monitor invalidates the registration before the mapping goes. */
	NST_EQ(munmap(gone, PAGE), 0);
	/* The receive took the message, not the hold: the sender is refused
	 * by the receiver's NIC (a remote operational error). */
	nst_fill(con.buf, 32, 8);
	NST_REQUIRE_EQ(post_send(con.s, con.buf, 32, &os), WSA_IO_PENDING);
	NST_EQ(ov_wait(con.s, &os, &n), WSAECONNRESET);
	NST_EQ(ov_wait(acc.s, &ov, &n), WSAEFAULT);
	NST_EQ(post_recv(acc.s, acc.buf, PAGE, &ov), WSAEFAULT);
	pair_close(&acc, &con);
}

/*
 * A raw host on NIC A (the host interface, no provider) connected to a
 * provider socket accepted on NIC B, with a registered page of its own.
 */
struct raw {
	struct nic_host *h;
	struct nst_qp qp;
	uint8_t *buf;
	uint32_t lkey;
};

static SOCKET raw_open(struct raw *r)
{
	uint16_t port = next_port++;
	struct acceptor a = {.s = INVALID_SOCKET};
	struct sockaddr_in b = addr_of(ADDR_B, 0);
	pthread_t t;
	int err = 0, rc;

	a.l = sock_on(ADDR_B, port);
	NST_REQUIRE(a.l != INVALID_SOCKET);
	NST_REQUIRE_EQ(WSPListen(a.l, 1, &err), 0);
	NST_REQUIRE_EQ(nic_host_attach(sock_a, &r->h), 0);
	NST_REQUIRE_EQ(nst_qp_create(r->h, 0, &r->qp), 0);
	r->buf = map(PAGE);
	r->lkey = nst_reg(r->h, r->buf, PAGE, 0);
	NST_REQUIRE(r->buf != NULL && r->lkey != 0);
	NST_REQUIRE_EQ(pthread_create(&t, NULL, accept_main, &a), 0);
	rc = nst_connect(&r->qp, b.sin_addr.s_addr, port);
	/* Closing the listener ends an accept that a failed connect left waiting. */
	close_socket(a.l);
	pthread_join(t, NULL);
	NST_REQUIRE_EQ(rc, 0);
	NST_REQUIRE(a.s != INVALID_SOCKET);
	return a.s;
}

static void raw_close(struct raw *r)
{
	nic_host_detach(r->h);
	munmap(r->buf, PAGE);
}

/* The raw host posts one send request. */
static void raw_post(struct raw *r, uint8_t opcode, uint32_t len, uint64_t rva, uint32_t rkey)
{
	struct nic_send_wqe w = {.wr_id = 1, .opcode = opcode, .num_sge = 1, .imm = 0x5eed};

	w.sge[0] = (struct nic_sge){.va = (uintptr_t)r->buf, .len = len, .lkey = r->lkey};
	w.remote_va = rva;
	w.rkey = rkey;
	NST_REQUIRE_EQ(nst_post_send(&r->qp, &w), 0);
}

/* ... and sees it complete (acknowledged). */
static void raw_done(struct raw *r)
{
	struct nic_cqe c;

	NST_REQUIRE_EQ(nst_poll_cq(&r->qp, &c, WAIT_MS), 0);
	NST_EQ(c.status, NIC_WC_SUCCESS);
}

/*
 * Immediate data in the first message (a host other than the provider can
 * send it): a SEND with immediate data is held and given as any message,
 * its immediate data not (the provider gives none to receives); an RDMA
 * WRITE with immediate data is not held: it waits for the first receive,
 * then writes its target and completes that receive with its length, the
 * receive's buffers untouched, as the NIC completes any receive for one.
 */
static void test_first_message_with_immediate_data(void)
{
	struct raw r;
	SOCKET s = raw_open(&r);
	uint8_t *page = nst_spi_registered(s, PAGE), *target = map(PAGE);
	struct nicsim_rdma_desc d;
	WSAOVERLAPPED ov;
	DWORD n = 0;

	uint64_t held0 = held(), rnr0;

	NST_REQUIRE(page != NULL && target != NULL);
	nst_fill(r.buf, 100, 11);
	raw_post(&r, NIC_WR_SEND_IMM, 100, 0, 0);
	raw_done(&r);
	NST_EQ_U(held(), held0 + 1);
	memset(page, 0, PAGE);
	NST_EQ(post_recv(s, page, PAGE, &ov), WSA_IO_PENDING);
	NST_EQ(ov_wait(s, &ov, &n), 0);
	NST_EQ(n, 100);
	NST_EQ(memcmp(page, r.buf, 100), 0);
	NST_EQ(ov.Offset, 0); /* no flags: nothing of the immediate data */
	close_socket(s);
	raw_close(&r);

	/* An RDMA WRITE with immediate data as the first message. */
	s = raw_open(&r);
	page = nst_spi_registered(s, PAGE);
	NST_REQUIRE(page != NULL);
	NST_REQUIRE_EQ(expose(s, target, PAGE, MEM_WRITE, &d), 0);
	nst_fill(r.buf, 50, 12);
	rnr0 = rnr_naks();
	raw_post(&r, NIC_WR_RDMA_WRITE_IMM, 50, d.va, d.rkey);
	NST_REQUIRE_GE(nst_wait_nic_stat(sock_a, NST_STAT(rnr_naks), rnr0 + 1, WAIT_MS), rnr0 + 1);
	memset(page, 0, PAGE);
	NST_EQ(post_recv(s, page, PAGE, &ov), WSA_IO_PENDING);
	raw_done(&r);
	NST_EQ(ov_wait(s, &ov, &n), 0);
	NST_EQ_U(held(), held0 + 1);
	NST_EQ(n, 50);
	NST_EQ(memcmp(target, r.buf, 50), 0);
	NST_EQ(page[0], 0);
	unexpose(s, &d);
	close_socket(s);
	raw_close(&r);
	munmap(target, PAGE);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"connector_sends_first", test_connector_sends_first},
	    {"acceptor_sends_first", test_acceptor_sends_first},
	    {"both_send_first", test_both_send_first},
	    {"first_receive_waits", test_first_receive_waits},
	    {"first_message_too_long", test_first_message_too_long},
	    {"first_message_too_long_receive_waiting", test_first_message_too_long_receive_waiting},
	    {"first_receive_too_short", test_first_receive_too_short},
	    {"close_with_message_held", test_close_with_message_held},
	    {"first_receive_memory_given_back", test_first_receive_memory_given_back},
	    {"first_message_with_immediate_data", test_first_message_with_immediate_data},
	    {NULL, NULL},
	};

	return spi_main(argc, argv, "spi_first", tests);
}

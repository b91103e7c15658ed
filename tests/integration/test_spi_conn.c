/*
 * Connections through the SPI (ws2san.h) against real nicsimd processes:
 * WSPListen/WSPAccept/WSPConnect, blocking and non-blocking with
 * WSPEventSelect, conditional accept, connectors that leave, requests never
 * confirmed, the 33rd connection of a context, socket options and the
 * address list.  The NICs and helpers are the test_spi_* fixture
 * (nstspidata.h); every test leaves the TPT occupancy of the NICs where it
 * found it (R11).
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

/* ---- Connections ------------------------------------------------------------------ */

struct cond_ctx {
	int verdict;
	int calls;
	struct sockaddr_in caller;
};

static int WSPAPI condition(LPWSABUF caller, LPWSABUF caller_data, LPQOS sqos, LPQOS gqos,
			    LPWSABUF callee, LPWSABUF callee_data, GROUP *g, DWORD_PTR data)
{
	struct cond_ctx *c = (struct cond_ctx *)data;

	(void)caller_data;
	(void)sqos;
	(void)gqos;
	(void)callee;
	(void)callee_data;
	(void)g;
	c->calls++;
	if (caller && caller->len >= sizeof(c->caller))
		memcpy(&c->caller, caller->buf, sizeof(c->caller));
	return c->verdict;
}

struct cond_acceptor {
	SOCKET l, s;
	struct cond_ctx *ctx;
	struct sockaddr_in peer;
	int peer_len, err;
};

static void *cond_accept_main(void *arg)
{
	struct cond_acceptor *a = arg;

	a->peer_len = sizeof(a->peer);
	a->s = WSPAccept(a->l, (struct sockaddr *)&a->peer, &a->peer_len, condition,
			 (DWORD_PTR)a->ctx, &a->err);
	return NULL;
}

static void test_connect_listen_accept_errors(void)
{
	uint16_t port = next_port++;
	struct sockaddr_in to = addr_of(ADDR_B, port), v6 = to;
	struct cond_ctx ctx = {.verdict = CF_REJECT};
	struct cond_acceptor a = {.ctx = &ctx};
	SOCKET s = sock_on(ADDR_A, 0), l, l2, u;
	int err = 0, plen = 4;
	pthread_t t;

	NST_REQUIRE(s != INVALID_SOCKET);
	/* Nobody listens there; no NIC has that address. */
	NST_EQ(try_connect(s, ADDR_B, port), WSAECONNREFUSED);
	NST_EQ(try_connect(s, ADDR_NONE, port), WSAEHOSTUNREACH);
	/* Bad arguments. */
	NST_EQ(WSPConnect(s, NULL, sizeof(to), NULL, NULL, NULL, NULL, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEFAULT);
	NST_EQ(WSPConnect(s, (struct sockaddr *)&to, 4, NULL, NULL, NULL, NULL, &err),
	       SOCKET_ERROR);
	NST_EQ(err, WSAEFAULT);
	v6.sin_family = AF_INET6;
	NST_EQ(WSPConnect(s, (struct sockaddr *)&v6, sizeof(v6), NULL, NULL, NULL, NULL, &err),
	       SOCKET_ERROR);
	NST_EQ(err, WSAEAFNOSUPPORT);
	NST_EQ(try_connect(s, ADDR_B, 0), WSAEADDRNOTAVAIL);
	NST_EQ(try_connect(s, "0.0.0.0", port), WSAEADDRNOTAVAIL);
	NST_EQ(try_connect((SOCKET)12345, ADDR_B, port), WSAENOTSOCK);

	/* Listening: unbound, port taken, then connect/accept misuse. */
	u = WSPSocket(AF_INET, SOCK_STREAM, 0, NULL, 0, 0, &err);
	NST_EQ(WSPListen(u, 4, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEINVAL);
	NST_TRUE(WSPAccept(u, NULL, NULL, NULL, 0, &err) == INVALID_SOCKET);
	NST_EQ(err, WSAEINVAL);
	l = sock_on(ADDR_B, port);
	l2 = sock_on(ADDR_B, port);
	NST_EQ(WSPListen(l, 4, &err), 0);
	NST_EQ(WSPListen(l, 4, &err), 0); /* again: nothing changes */
	NST_EQ(WSPListen(l2, 4, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEADDRINUSE);
	NST_EQ(try_connect(l, ADDR_A, 9), WSAEINVAL);
	NST_TRUE(WSPAccept(l, (struct sockaddr *)&to, &plen, NULL, 0, &err) == INVALID_SOCKET);
	NST_EQ(err, WSAEFAULT);

	/* The condition function refuses: both sides see WSAECONNREFUSED. */
	a.l = l;
	pthread_create(&t, NULL, cond_accept_main, &a);
	NST_EQ(try_connect(s, ADDR_B, port), WSAECONNREFUSED);
	pthread_join(t, NULL);
	NST_TRUE(a.s == INVALID_SOCKET);
	NST_EQ(a.err, WSAECONNREFUSED);
	NST_EQ(ctx.calls, 1);
	NST_EQ(ctx.caller.sin_addr.s_addr, addr_of(ADDR_A, 0).sin_addr.s_addr);

	/* Deferred, then accepted; a failed connect left the socket usable. */
	ctx.verdict = CF_DEFER;
	ctx.calls = 0;
	pthread_create(&t, NULL, cond_accept_main, &a);
	{
		/* The connect waits until the second accept takes the request. */
		struct acceptor later = {.l = l};
		SOCKET c2 = sock_on(ADDR_A, 0);
		int rc;

		(void)later;
		NST_REQUIRE(c2 != INVALID_SOCKET);
		rc = WSPEventSelect(c2, eventfd(0, EFD_NONBLOCK), FD_CONNECT, &err);
		NST_EQ(rc, 0);
		NST_EQ(try_connect(c2, ADDR_B, port), WSAEWOULDBLOCK);
		pthread_join(t, NULL);
		NST_TRUE(a.s == INVALID_SOCKET);
		NST_EQ(a.err, WSATRY_AGAIN);
		ctx.verdict = CF_ACCEPT;
		pthread_create(&t, NULL, cond_accept_main, &a);
		pthread_join(t, NULL);
		NST_TRUE(a.s != INVALID_SOCKET);
		NST_EQ(ctx.calls, 2);
		NST_EQ(a.peer_len, (int)sizeof(struct sockaddr_in));
		NST_EQ(a.peer.sin_addr.s_addr, addr_of(ADDR_A, 0).sin_addr.s_addr);
		close_socket(a.s);
		close_socket(c2);
	}

	/* A blocking connect, then the connected socket refuses connect and listen. */
	pthread_create(&t, NULL, cond_accept_main, &a);
	NST_EQ(try_connect(s, ADDR_B, port), 0);
	pthread_join(t, NULL);
	NST_TRUE(a.s != INVALID_SOCKET);
	NST_EQ(try_connect(s, ADDR_B, port), WSAEISCONN);
	NST_EQ(WSPListen(s, 4, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEISCONN);
	close_socket(a.s);
	close_socket(s);
	close_socket(l);
	close_socket(l2);
	close_socket(u);

	/* An unbound socket binds itself (to the lowest NIC, A) when it connects. */
	l = sock_on(ADDR_B, port);
	NST_EQ(WSPListen(l, 4, &err), 0);
	u = WSPSocket(AF_INET, SOCK_STREAM, 0, NULL, 0, 0, &err);
	a.l = l;
	pthread_create(&t, NULL, cond_accept_main, &a);
	NST_EQ(try_connect(u, ADDR_B, port), 0);
	pthread_join(t, NULL);
	NST_EQ(a.peer.sin_addr.s_addr, addr_of(ADDR_A, 0).sin_addr.s_addr);
	close_socket(a.s);
	close_socket(u);
	close_socket(l);
}

static void test_nonblocking_connect_and_accept(void)
{
	uint16_t port = next_port++;
	int el = eventfd(0, EFD_NONBLOCK), ec = eventfd(0, EFD_NONBLOCK);
	int ec2 = eventfd(0, EFD_NONBLOCK), err = 0;
	SOCKET l = sock_on(ADDR_B, port), c = sock_on(ADDR_A, 0), c2 = sock_on(ADDR_A, 0), s;
	struct sockaddr_in peer;
	int plen = sizeof(peer);
	WSANETWORKEVENTS ne;
	uint64_t t0;

	NST_REQUIRE(el >= 0 && ec >= 0 && ec2 >= 0);
	NST_EQ(WSPListen(l, 4, &err), 0);
	/* Bad selections. */
	NST_EQ(WSPEventSelect(l, el, 1 << 12, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEINVAL);
	NST_EQ(WSPEventSelect(l, WSA_INVALID_EVENT, FD_ACCEPT, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEINVAL);
	NST_EQ(WSPEventSelect(l, STDERR_FILENO, FD_ACCEPT, &err),
	       SOCKET_ERROR); /* not an eventfd */
	NST_EQ(err, WSAEINVAL);
	NST_EQ(WSPEnumNetworkEvents(l, el, NULL, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEFAULT);

	NST_EQ(WSPEventSelect(l, el, FD_ACCEPT, &err), 0);
	NST_TRUE(WSPAccept(l, NULL, NULL, NULL, 0, &err) == INVALID_SOCKET);
	NST_EQ(err, WSAEWOULDBLOCK);
	NST_EQ(WSPEventSelect(c, ec, FD_CONNECT | FD_CLOSE, &err), 0);
	t0 = nst_now_ns();
	NST_EQ(try_connect(c, ADDR_B, port), WSAEWOULDBLOCK);
	/* The events fire with nobody calling the provider. */
	NST_REQUIRE(event_fires(el, WAIT_MS));
	NST_EQ(events_of(l, el, &ne), 0);
	NST_EQ(ne.lNetworkEvents, FD_ACCEPT);
	NST_EQ(ne.iErrorCode[FD_ACCEPT_BIT], 0);
	NST_TRUE(!event_fires(el, 0)); /* reset by WSPEnumNetworkEvents */
	s = WSPAccept(l, (struct sockaddr *)&peer, &plen, NULL, 0, &err);
	NST_REQUIRE(s != INVALID_SOCKET);
	NST_EQ(peer.sin_addr.s_addr, addr_of(ADDR_A, 0).sin_addr.s_addr);
	NST_REQUIRE(event_fires(ec, WAIT_MS));
	printf("\n    non-blocking connect + accept: %.0f us ", (double)(nst_now_ns() - t0) / 1e3);
	NST_EQ(events_of(c, ec, &ne), 0);
	NST_EQ(ne.lNetworkEvents, FD_CONNECT);
	NST_EQ(ne.iErrorCode[FD_CONNECT_BIT], 0);
	NST_EQ(try_connect(c, ADDR_B, port), WSAEISCONN);

	/* Refused without blocking: FD_CONNECT carries the error. */
	NST_EQ(WSPEventSelect(c2, ec2, FD_CONNECT, &err), 0);
	NST_EQ(try_connect(c2, ADDR_B, next_port++), WSAEWOULDBLOCK);
	NST_REQUIRE(event_fires(ec2, WAIT_MS));
	NST_EQ(events_of(c2, ec2, &ne), 0);
	NST_EQ(ne.lNetworkEvents, FD_CONNECT);
	NST_EQ(ne.iErrorCode[FD_CONNECT_BIT], WSAECONNREFUSED);

	/* The peer closes: FD_CLOSE, graceful. */
	close_socket(s);
	NST_REQUIRE(event_fires(ec, WAIT_MS));
	NST_EQ(events_of(c, ec, &ne), 0);
	NST_EQ(ne.lNetworkEvents, FD_CLOSE);
	NST_EQ(ne.iErrorCode[FD_CLOSE_BIT], 0);
	close_socket(c);
	close_socket(c2);
	close_socket(l);
	close(el);
	close(ec);
	close(ec2);
}

/* A listener on B at port, and a request to it from a new socket on A,
 * which selects cev, waiting to be accepted. */
struct pending {
	SOCKET l, c;
	int el, ec; /* the event objects of l and c */
};

static void pending_accept(struct pending *p, uint16_t port, long cev)
{
	WSANETWORKEVENTS ne;
	int err = 0;

	p->el = eventfd(0, EFD_NONBLOCK);
	p->ec = eventfd(0, EFD_NONBLOCK);
	NST_REQUIRE(p->el >= 0 && p->ec >= 0);
	p->l = sock_on(ADDR_B, port);
	p->c = sock_on(ADDR_A, 0);
	NST_EQ(WSPListen(p->l, 4, &err), 0);
	NST_EQ(WSPEventSelect(p->l, p->el, FD_ACCEPT | FD_CLOSE, &err), 0);
	NST_EQ(WSPEventSelect(p->c, p->ec, cev, &err), 0);
	NST_EQ(try_connect(p->c, ADDR_B, port), WSAEWOULDBLOCK);
	NST_REQUIRE(event_fires(p->el, WAIT_MS));
	NST_EQ(events_of(p->l, p->el, &ne), 0);
	NST_EQ(ne.lNetworkEvents, FD_ACCEPT);
}

static void pending_close(struct pending *p)
{
	if (p->c != INVALID_SOCKET)
		close_socket(p->c);
	close_socket(p->l);
	close(p->el);
	close(p->ec);
}

/* Socket s, accepted on a listener with event object el, was closed under
 * it within ms: FD_CLOSE says so with err, and a receive fails with err. */
static void closed_with(SOCKET s, int el, int ms, int err)
{
	WSANETWORKEVENTS ne;
	WSAOVERLAPPED ov;
	char buf[16];
	HANDLE h;

	NST_TRUE(event_fires(el, ms));
	NST_EQ(events_of(s, el, &ne), 0);
	NST_EQ(ne.lNetworkEvents, FD_CLOSE);
	NST_EQ(ne.iErrorCode[FD_CLOSE_BIT], err);
	h = reg(s, buf, sizeof(buf), MEM_READWRITE);
	NST_EQ(post_recv(s, buf, sizeof(buf), &ov), err);
	dereg(s, h);
}

/*
 * The connector closes its socket after its request reached the listener
 * and before the accept: the accepted connection is refused by the
 * connector's NIC.  Either the accept itself fails with WSAECONNRESET (the
 * refusal came first) or the accepted socket gets FD_CLOSE with
 * WSAECONNRESET and its receives fail: never a connection to nobody.
 */
static void test_accept_after_connector_left(void)
{
	struct pending p;
	SOCKET s;
	int err = 0;

	pending_accept(&p, next_port++, FD_CONNECT);
	close_socket(p.c);
	p.c = INVALID_SOCKET;
	s = WSPAccept(p.l, NULL, NULL, NULL, 0, &err);
	if (s == INVALID_SOCKET) {
		NST_EQ(err, WSAECONNRESET);
	} else {
		closed_with(s, p.el, WAIT_MS, WSAECONNRESET);
		close_socket(s);
	}
	pending_close(&p);
}

/*
 * Nothing from A reaches B once B has the request, so B's NIC never hears
 * the RTU: the accepted socket gets FD_CLOSE with WSAECONNABORTED after the
 * NIC's six replies (3.15 s with the default CM timers), and later posts
 * fail the same way.  The connector's
 * socket connected, and hears of the close from B's DREQ.
 */
static void test_accepted_never_confirmed(void)
{
	struct pending p;
	WSANETWORKEVENTS ne;
	uint32_t a = 0, b = 0;
	SOCKET s;
	int err = 0;

	NST_REQUIRE_EQ(fab_addr_parse(ADDR_A, &a), 0);
	NST_REQUIRE_EQ(fab_addr_parse(ADDR_B, &b), 0);
	pending_accept(&p, next_port++, FD_CONNECT | FD_CLOSE);
	NST_REQUIRE_EQ(nst_link_down(dir, a, b, true), 0);
	s = WSPAccept(p.l, NULL, NULL, NULL, 0, &err);
	NST_TRUE(s != INVALID_SOCKET);
	if (s != INVALID_SOCKET) {
		NST_TRUE(event_fires(p.ec, WAIT_MS));
		NST_EQ(events_of(p.c, p.ec, &ne), 0);
		NST_EQ(ne.lNetworkEvents, FD_CONNECT);
		NST_EQ(ne.iErrorCode[FD_CONNECT_BIT], 0);
		closed_with(s, p.el, WAIT_MS, WSAECONNABORTED);
		NST_TRUE(event_fires(p.ec, 2000));
		NST_EQ(events_of(p.c, p.ec, &ne), 0);
		NST_EQ(ne.lNetworkEvents, FD_CLOSE);
		NST_EQ(ne.iErrorCode[FD_CLOSE_BIT], 0);
		close_socket(s);
	}
	NST_EQ(nst_link_down(dir, a, b, false), 0);
	pending_close(&p);
}

/* ---- Slots -------------------------------------------------------------------------------- */

static void test_33rd_connection_has_no_slot(void)
{
	SOCKET cli[NIC_QP_SLOTS + 1], srv[NIC_QP_SLOTS + 1];
	uint16_t port = next_port++;
	SOCKET l = sock_on(ADDR_B, port), extra;
	struct acceptor acc = {.l = l};
	pthread_t t;
	int err = 0;

	NST_EQ(WSPListen(l, 8, &err), 0);
	for (uint32_t i = 0; i < NIC_QP_SLOTS; i++) {
		cli[i] = sock_on(ADDR_A, 0);
		pthread_create(&t, NULL, accept_main, &acc);
		NST_REQUIRE_EQ(try_connect(cli[i], ADDR_B, port), 0);
		pthread_join(t, NULL);
		NST_REQUIRE(acc.s != INVALID_SOCKET);
		srv[i] = acc.s;
	}
	extra = sock_on(ADDR_A, 0);
	NST_EQ(try_connect(extra, ADDR_B, port), WSAENOBUFS);
	/* A slot freed is a slot to use again. */
	close_socket(cli[5]);
	close_socket(srv[5]);
	pthread_create(&t, NULL, accept_main, &acc);
	NST_EQ(try_connect(extra, ADDR_B, port), 0);
	pthread_join(t, NULL);
	NST_TRUE(acc.s != INVALID_SOCKET);
	close_socket(acc.s);
	close_socket(extra);
	for (uint32_t i = 0; i < NIC_QP_SLOTS; i++) {
		if (i == 5)
			continue;
		close_socket(cli[i]);
		close_socket(srv[i]);
	}
	close_socket(l);
}

/* ---- Options and addresses ------------------------------------------------------------ */

static DWORD getopt_dword(SOCKET s, int level, int name, int *err)
{
	DWORD v = 0;
	int len = sizeof(v);

	*err = 0;
	if (WSPGetSockOpt(s, level, name, (char *)&v, &len, err))
		return 0;
	NST_EQ(len, sizeof(v));
	return v;
}

static void test_socket_options(void)
{
	SOCKET a = sock_on(ADDR_A, 0), c = sock_on(ADDR_C, 0);
	SOCKET u = WSPSocket(AF_INET, SOCK_STREAM, 0, NULL, 0, 0, NULL);
	DWORD v = 4096;
	int err = 0, len = 2;

	NST_EQ(getopt_dword(a, SOL_SOCKET, SO_MAX_RDMA_SIZE, &err), 1u << 30);
	NST_EQ(getopt_dword(a, WSA_SOL_SOCKET, SO_MAX_RDMA_SIZE, &err), 1u << 30);
	NST_EQ(getopt_dword(c, SOL_SOCKET, SO_MAX_RDMA_SIZE, &err), 1u << 20);
	NST_EQ(getopt_dword(u, SOL_SOCKET, SO_MAX_RDMA_SIZE, &err), 1u << 30);
	NST_EQ(getopt_dword(a, SOL_SOCKET, SO_RDMA_THRESHOLD_SIZE, &err), 64u << 10);
	NST_EQ(WSPSetSockOpt(a, SOL_SOCKET, SO_RDMA_THRESHOLD_SIZE, (char *)&v, sizeof(v), &err),
	       0);
	NST_EQ(getopt_dword(a, SOL_SOCKET, SO_RDMA_THRESHOLD_SIZE, &err), 4096);
	/* Read-only, unknown, wrong level, too short, NULL. */
	NST_EQ(WSPSetSockOpt(a, SOL_SOCKET, SO_MAX_RDMA_SIZE, (char *)&v, sizeof(v), &err),
	       SOCKET_ERROR);
	NST_EQ(err, WSAENOPROTOOPT);
	getopt_dword(a, SOL_SOCKET, 0x1234, &err);
	NST_EQ(err, WSAENOPROTOOPT);
	getopt_dword(a, IPPROTO_TCP, SO_MAX_RDMA_SIZE, &err);
	NST_EQ(err, WSAEINVAL);
	NST_EQ(WSPGetSockOpt(a, SOL_SOCKET, SO_MAX_RDMA_SIZE, (char *)&v, &len, &err),
	       SOCKET_ERROR);
	NST_EQ(err, WSAEFAULT);
	NST_EQ(WSPSetSockOpt(a, SOL_SOCKET, SO_RDMA_THRESHOLD_SIZE, NULL, 4, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEFAULT);
	getopt_dword((SOCKET)3, SOL_SOCKET, SO_MAX_RDMA_SIZE, &err);
	NST_EQ(err, WSAENOTSOCK);
	close_socket(a);
	close_socket(c);
	close_socket(u);
}

static void test_address_list(void)
{
	SOCKET u = WSPSocket(AF_INET, SOCK_STREAM, 0, NULL, 0, 0, NULL);
	union {
		SOCKET_ADDRESS_LIST list;
		char bytes[1024];
	} out;
	static const char *const want[] = {ADDR_A, ADDR_B, ADDR_C, ADDR_D};
	DWORD ret = 0, need;
	int err = 0;

	NST_EQ(WSPIoctl(u, SIO_ADDRESS_LIST_QUERY, NULL, 0, &out, 8, &ret, NULL, NULL, NULL, &err),
	       SOCKET_ERROR);
	NST_EQ(err, WSAEFAULT);
	need = ret;
	NST_TRUE(need > 8 && need < sizeof(out));
	NST_EQ(WSPIoctl(u, SIO_ADDRESS_LIST_QUERY, NULL, 0, &out, sizeof(out), &ret, NULL, NULL,
			NULL, &err),
	       0);
	NST_EQ(ret, need);
	NST_REQUIRE_EQ(out.list.iAddressCount, 4);
	for (int i = 0; i < 4; i++) {
		const SOCKET_ADDRESS *sa =
		    &((const SOCKET_ADDRESS *)((const char *)&out +
					       offsetof(SOCKET_ADDRESS_LIST, Address)))[i];
		struct sockaddr_in sin;

		NST_EQ(sa->iSockaddrLength, sizeof(struct sockaddr_in));
		NST_TRUE((const char *)sa->lpSockaddr >= out.bytes &&
			 (const char *)sa->lpSockaddr + sizeof(sin) <= out.bytes + ret);
		memcpy(&sin, sa->lpSockaddr, sizeof(sin));
		NST_EQ(sin.sin_family, AF_INET);
		NST_EQ(sin.sin_addr.s_addr, addr_of(want[i], 0).sin_addr.s_addr);
	}
	close_socket(u);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"connect_listen_accept_errors", test_connect_listen_accept_errors},
	    {"nonblocking_connect_and_accept", test_nonblocking_connect_and_accept},
	    {"accept_after_connector_left", test_accept_after_connector_left},
	    {"accepted_never_confirmed", test_accepted_never_confirmed},
	    {"33rd_connection_has_no_slot", test_33rd_connection_has_no_slot},
	    {"socket_options", test_socket_options},
	    {"address_list", test_address_list},
	    {NULL, NULL},
	};

	return spi_main(argc, argv, "spi_conn", tests);
}

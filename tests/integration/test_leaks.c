/*
 * Leaks: 10,000 connect/transfer/close cycles and 100,000 register/
 * deregister cycles through the SPI (ws2san.h), against two real nicsimd
 * processes joined by a fabric, leave everything they use where it was:
 * each NIC's open descriptors, resident memory, TPT occupancy, QPs and host
 * contexts, the fabric's free frames, and this host process's descriptors,
 * resident memory, heap in use, threads, locked memory and registration
 * cache.
 *
 * Each test measures after a warm-up (CONN_WARMUP, REG_WARMUP: heaps and
 * mappings reach their working size there), runs its cycles, and measures
 * again once the NICs have finished what the last cycle started
 * (disconnects, QP and context teardown, frames in flight: waited for,
 * bounded).  It prints both sets of figures as "start" and "end" lines.
 * Counts must be equal; resident memory may grow by at most RSS_SLACK_KIB
 * and the heap in use by HEAP_SLACK_BYTES (see there).
 *
 * NIC A (198.18.0.1) serves, NIC B (198.18.0.2) connects; the test program
 * is the host of both.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fab.h"
#include "mgmt_client.h"
#include "nicsim_mgmt.h"
#include "nicsim_provider.h"
#include "nstest.h"
#include "nstnic.h"
#include "nstspi.h"
#include "ws2san.h"

#define ADDR_A "198.18.0.1"
#define ADDR_B "198.18.0.2"
#define WAIT_MS 10000
#define PAGE 4096u

#define CONN_CYCLES 10000u
#define REG_CYCLES 100000u
/*
 * Cycles before the first measurement.  Registrations: 1%.  Connections:
 * 10%, because a NIC's heap takes several hundred connections to reach its
 * working size (each QP's state is a 39 KiB block, and the blocks settle
 * among the smaller ones around them: the NIC's anonymous memory grows by
 * about 180 KiB over the first 800 or so connections and not at all over
 * the next 30,000), and the fabric's frames are first touched, in the
 * NICs' mappings of the fabric's file, over the first few hundred.
 */
#define CONN_WARMUP 1000u
#define REG_WARMUP 1000u

/* Each connection's transfer: an RDMA WRITE of XFER bytes into the
 * server's exposed buffer, then a SEND of MSG bytes, which the server's
 * NIC delivers after the write's data. */
#define XFER 1024u
#define MSG 64u

/*
 * How much a process's resident memory (VmRSS) may grow between the two
 * measurements.  Leaking 32 bytes a cycle would add 312 KiB over the
 * connection cycles and 3 MiB over the registration cycles: above it.  What
 * may legitimately move is a handful of pages: a heap trimmed or extended
 * at a different moment, a stack touched a little deeper, a page of the
 * fabric's file touched for the first time.
 */
#define RSS_SLACK_KIB 256

/*
 * How much this process's heap in use (the allocator's count of bytes in
 * live blocks) may grow: a leak of 2 bytes a cycle passes it.  A little may
 * move: a buffer the C library allocates once, at a different moment.
 */
#define HEAP_SLACK_BYTES (16 * 1024)

/*
 * Under AddressSanitizer a freed block waits in a quarantine (256 MiB by
 * default) before it is used again, so resident memory grows with every
 * byte freed until the quarantine is full, leak or not: 180 MiB in a NIC
 * over 4,000 connections.  This program and its NICs run without one, so
 * that resident memory counts live blocks as in the plain build; the
 * sanitizer's leak check at exit stays, and the other tests keep the
 * quarantine.  This program's own resident memory is not compared there:
 * the sanitizer's runtime keeps memory for threads that have ended (a
 * program that only starts and joins 10,000 threads grows by 55 MiB under
 * gcc 12's), and the provider starts a thread for each NIC it attaches
 * and ends it at the detach, which every connection cycle does on NIC B:
 * resident memory grew by about 190 bytes a cycle with the heap in use
 * unchanged to the byte.  The heap in use, which the sanitizer counts
 * exactly, is compared in every build.
 */
#if defined(__SANITIZE_ADDRESS__)
#define LEAKS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LEAKS_ASAN 1
#endif
#endif
#ifdef LEAKS_ASAN
#define NO_QUARANTINE "quarantine_size_mb=0"
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return NO_QUARANTINE;
}
/* <sanitizer/allocator_interface.h>, which not every compiler installs. */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

/* Bytes in live blocks of this process's heap. */
static long long heap_in_use(void)
{
#ifdef LEAKS_ASAN
	return (long long)__sanitizer_get_current_allocated_bytes();
#else
	struct mallinfo2 mi = mallinfo2();

	return (long long)(mi.uordblks + mi.hblkhd);
#endif
}

static char dir[256];
static struct nst_nic nics[] = {{.addr = ADDR_A}, {.addr = ADDR_B}};
#define NNICS (sizeof(nics) / sizeof(nics[0]))
static struct fab *fab;
/* A management session with each NIC, open for the whole program: one that
 * opened and closed for each question would leave the NIC's descriptor for
 * it open until the NIC saw it close, which is no moment the test knows. */
static struct mgmt_client mgmt[NNICS];
static uint32_t frames_at_start; /* the fabric's free frames before any test */

/* ---- Figures ------------------------------------------------------------------ */

struct nic_figures {
	int fds, tpt;
	long rss_kib, anon_kib, file_kib; /* VmRSS, and its RssAnon and RssFile */
	long long qps, contexts;
};

struct figures {
	struct nic_figures nic[NNICS];
	uint32_t frames_free;
	/* This process. */
	int fds;
	long rss_kib, threads, locked_kib;
	long long heap;
	struct nicsim_cache_stats cache;
};

static void measure(struct figures *f)
{
	memset(f, 0, sizeof(*f));
	for (size_t i = 0; i < NNICS; i++) {
		struct nic_stats st;

		NST_REQUIRE_EQ(mgmt_client_stats(&mgmt[i], &st), 0);
		/* The NIC closes a context's descriptors as it counts it gone,
		 * and answers in order: what it said is done is closed. */
		f->nic[i].fds = nst_fd_count(nics[i].pid);
		f->nic[i].rss_kib = nst_proc_status_kib(nics[i].pid, "VmRSS");
		f->nic[i].anon_kib = nst_proc_status_kib(nics[i].pid, "RssAnon");
		f->nic[i].file_kib = nst_proc_status_kib(nics[i].pid, "RssFile");
		f->nic[i].tpt = (int)st.tpt_in_use;
		f->nic[i].qps = (long long)st.qps;
		f->nic[i].contexts = (long long)st.contexts;
		NST_REQUIRE(f->nic[i].fds > 0 && f->nic[i].rss_kib > 0);
	}
	f->frames_free = nst_fab_frames_free(fab);
	f->fds = nst_fd_count(0);
	f->rss_kib = nst_proc_status_kib(0, "VmRSS");
	f->threads = nst_proc_status_kib(0, "Threads");
	f->locked_kib = nst_proc_status_kib(0, "VmLck");
	f->heap = heap_in_use();
	NST_REQUIRE_EQ(nicsim_cache_stats(&f->cache), 0);
	NST_REQUIRE(f->fds > 0 && f->rss_kib > 0 && f->threads > 0 && f->locked_kib >= 0);
}

static void show(const char *when, const char *what, unsigned cycles, const struct figures *f)
{
	printf("\n    %s %s (%u cycles):", what, when, cycles);
	for (size_t i = 0; i < NNICS; i++)
		printf(
		    "\n      NIC %s: fds %d, VmRSS %ld KiB (anon %ld, file %ld), TPT %d, QPs %lld, "
		    "contexts %lld",
		    nics[i].addr, f->nic[i].fds, f->nic[i].rss_kib, f->nic[i].anon_kib,
		    f->nic[i].file_kib, f->nic[i].tpt, f->nic[i].qps, f->nic[i].contexts);
	printf("\n      fabric: %u frames free", f->frames_free);
	printf(
	    "\n      host: fds %d, VmRSS %ld KiB, heap in use %lld bytes, threads %ld, VmLck %ld "
	    "KiB",
	    f->fds, f->rss_kib, f->heap, f->threads, f->locked_kib);
	printf("\n      host's registration cache: entries %llu (unused %llu), %llu bytes pinned, "
	       "%llu hits, %llu misses\n",
	       (unsigned long long)f->cache.entries, (unsigned long long)f->cache.unused,
	       (unsigned long long)f->cache.bytes_pinned, (unsigned long long)f->cache.hits,
	       (unsigned long long)f->cache.misses);
	fflush(stdout);
}

/* Everything the last cycle started is finished: the QPs, TPT occupancy
 * and host contexts of both NICs and the fabric's free frames back where
 * want has them. */
static bool quiet(void *arg)
{
	const struct figures *want = arg;

	if (nst_fab_frames_free(fab) != want->frames_free)
		return false;
	for (size_t i = 0; i < NNICS; i++) {
		struct nic_stats st;

		if (mgmt_client_stats(&mgmt[i], &st) || (long long)st.qps != want->nic[i].qps ||
		    (int)st.tpt_in_use != want->nic[i].tpt ||
		    (long long)st.contexts != want->nic[i].contexts)
			return false;
	}
	return true;
}

/* Wait (bounded) until the NICs are quiet as want has them, then measure. */
static void settle_and_measure(const struct figures *want, struct figures *f)
{
	if (!nst_wait_until(quiet, (void *)want, WAIT_MS, 2))
		fprintf(stderr, "test_leaks: the NICs did not settle within %d ms\n", WAIT_MS);
	measure(f);
}

static void check_flat(const struct figures *a, const struct figures *b)
{
	for (size_t i = 0; i < NNICS; i++) {
		NST_EQ(b->nic[i].fds, a->nic[i].fds);
		NST_EQ(b->nic[i].tpt, a->nic[i].tpt);
		NST_EQ(b->nic[i].qps, a->nic[i].qps);
		NST_EQ(b->nic[i].contexts, a->nic[i].contexts);
		NST_LE(b->nic[i].rss_kib - a->nic[i].rss_kib, RSS_SLACK_KIB);
	}
	NST_EQ(b->frames_free, a->frames_free);
	NST_EQ(b->fds, a->fds);
#ifndef LEAKS_ASAN
	NST_LE(b->rss_kib - a->rss_kib, RSS_SLACK_KIB);
#endif
	NST_LE(b->heap - a->heap, HEAP_SLACK_BYTES);
	NST_EQ(b->threads, a->threads);
	NST_EQ(b->locked_kib, a->locked_kib);
	NST_EQ(b->cache.entries, a->cache.entries);
	NST_EQ(b->cache.unused, a->cache.unused);
	NST_EQ(b->cache.bytes_pinned, a->cache.bytes_pinned);
}

/* ---- SPI helpers ---------------------------------------------------------------- */

static struct sockaddr_in addr_of(const char *addr, uint16_t port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};

	inet_pton(AF_INET, addr, &sa.sin_addr);
	return sa;
}

static uint8_t *map(size_t n)
{
	uint8_t *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	NST_REQUIRE(p != MAP_FAILED);
	memset(p, 0, n);
	return p;
}

/* Wait up to WAIT_MS for the event object ev, then read s's network events:
 * true if event bit came, with error 0. */
static bool event_ok(SOCKET s, int ev, int bit)
{
	struct pollfd pfd = {.fd = ev, .events = POLLIN};
	WSANETWORKEVENTS ne;
	int err = 0;

	if (poll(&pfd, 1, WAIT_MS) != 1) {
		NST_CHECK_(false, CU_FALSE, "no network event %d within %d ms", bit, WAIT_MS);
		return false;
	}
	memset(&ne, 0, sizeof(ne));
	if (WSPEnumNetworkEvents(s, ev, &ne, &err)) {
		NST_CHECK_(false, CU_FALSE, "WSPEnumNetworkEvents: %s", nicsim_wsa_name(err));
		return false;
	}
	NST_CHECK_((ne.lNetworkEvents & (1L << bit)) && ne.iErrorCode[bit] == 0, CU_FALSE,
		   "network events 0x%lx, error %d of event %d", (long)ne.lNetworkEvents,
		   ne.iErrorCode[bit], bit);
	return (ne.lNetworkEvents & (1L << bit)) && ne.iErrorCode[bit] == 0;
}

/* Wait for ov's operation on s: 0, or its WSA error; its bytes into *n. */
static int ov_result(SOCKET s, WSAOVERLAPPED *ov, DWORD *n)
{
	DWORD flags = 0;
	int err = 0;

	return WSPGetOverlappedResult(s, ov, n, TRUE, &flags, &err) ? 0 : err;
}

/* ---- Connect, transfer, close ---------------------------------------------------- */

struct conn_rig {
	SOCKET l;       /* listening on A */
	int el, ec, er; /* event objects: the listener's, each client's, refused ones' */
	uint16_t port;
	uint8_t *cbuf, *sbuf; /* client's and server's, 2 pages each */
};

/* A connect from B to a port of A where nobody listens: refused, reported
 * by the connect event.  False if it was not (reported). */
static bool refused(struct conn_rig *r)
{
	struct sockaddr_in to = addr_of(ADDR_A, (uint16_t)(r->port + 1)), any = addr_of(ADDR_B, 0);
	struct pollfd pfd = {.fd = r->er, .events = POLLIN};
	WSANETWORKEVENTS ne;
	int err = 0;
	SOCKET c = WSPSocket(AF_INET, SOCK_STREAM, IPPROTO_TCP, NULL, 0, 0, &err);
	bool ok = c != INVALID_SOCKET && !WSPBind(c, (struct sockaddr *)&any, sizeof(any), &err) &&
		  !WSPEventSelect(c, r->er, FD_CONNECT, &err) &&
		  WSPConnect(c, (struct sockaddr *)&to, sizeof(to), NULL, NULL, NULL, NULL, &err) &&
		  err == WSAEWOULDBLOCK && poll(&pfd, 1, WAIT_MS) == 1;

	memset(&ne, 0, sizeof(ne));
	ok = ok && !WSPEnumNetworkEvents(c, r->er, &ne, &err) && (ne.lNetworkEvents & FD_CONNECT) &&
	     ne.iErrorCode[FD_CONNECT_BIT] == WSAECONNREFUSED;
	NST_CHECK_(ok, CU_FALSE, "a connect to a port without a listener: %s, events 0x%lx, %s",
		   nicsim_wsa_name(err), (long)ne.lNetworkEvents,
		   nicsim_wsa_name(ne.iErrorCode[FD_CONNECT_BIT]));
	if (c != INVALID_SOCKET && WSPCloseSocket(c, &err)) {
		NST_CHECK_(false, CU_FALSE, "WSPCloseSocket: %s", nicsim_wsa_name(err));
		ok = false;
	}
	return ok;
}

/*
 * One cycle, in this thread: a client socket on B connects without
 * blocking; the listener's accept event comes and A accepts; the server
 * exposes its buffer and posts a receive; the client RDMA-writes XFER
 * bytes into it and sends MSG bytes; the server checks both; both sockets
 * close (which first alternates).  Every fourth cycle (from the third) the
 * server closes with a receive still posted, which the close completes
 * with an error; every fourth (from the second) another connect, to a port
 * where nobody listens, is refused meanwhile.  False if something failed (reported).
 */
static bool conn_cycle(struct conn_rig *r, uint32_t i)
{
	struct sockaddr_in to = addr_of(ADDR_A, r->port), any = addr_of(ADDR_B, 0);
	struct nicsim_rdma_desc d;
	DWORD dlen = sizeof(d), n = 0;
	WSAOVERLAPPED ovr, ovs;
	WSABUF msg = {.len = MSG, .buf = (char *)r->cbuf + PAGE};
	WSABUF rcv = {.len = MSG, .buf = (char *)r->sbuf + PAGE};
	DWORD flags = 0;
	SOCKET c, s = INVALID_SOCKET;
	HANDLE hc = NULL, hs = NULL;
	WSAOVERLAPPED ovp; /* the receive left posted */
	bool ok = false, exposed = false, posted = false;
	int err = 0;

	memset(&ovp, 0, sizeof(ovp));
	memset(&ovr, 0, sizeof(ovr));
	memset(&ovs, 0, sizeof(ovs));
	c = WSPSocket(AF_INET, SOCK_STREAM, IPPROTO_TCP, NULL, 0, 0, &err);
	NST_CHECK_(c != INVALID_SOCKET, CU_FALSE, "WSPSocket: %s", nicsim_wsa_name(err));
	if (c == INVALID_SOCKET)
		return false;
	if (WSPBind(c, (struct sockaddr *)&any, sizeof(any), &err) ||
	    WSPEventSelect(c, r->ec, FD_CONNECT, &err)) {
		NST_CHECK_(false, CU_FALSE, "bind or event select: %s", nicsim_wsa_name(err));
		goto out;
	}
	if (!WSPConnect(c, (struct sockaddr *)&to, sizeof(to), NULL, NULL, NULL, NULL, &err) ||
	    err != WSAEWOULDBLOCK) {
		NST_CHECK_(false, CU_FALSE, "WSPConnect: %s", nicsim_wsa_name(err));
		goto out;
	}
	if (!event_ok(r->l, r->el, FD_ACCEPT_BIT))
		goto out;
	s = WSPAccept(r->l, NULL, NULL, NULL, 0, &err);
	NST_CHECK_(s != INVALID_SOCKET, CU_FALSE, "WSPAccept: %s", nicsim_wsa_name(err));
	if (s == INVALID_SOCKET || !event_ok(c, r->ec, FD_CONNECT_BIT))
		goto out;
	if (i % 4 == 1 && !refused(r))
		goto out;

	/* The server: its buffer exposed for writing, a receive posted. */
	memset(r->sbuf, 0, 2 * PAGE);
	hs = WSPRegisterMemory(s, r->sbuf, 2 * PAGE, MEM_READWRITE, &err);
	if (!hs || WSPRegisterRdmaMemory(s, r->sbuf, XFER, MEM_WRITE, &d, &dlen, &err)) {
		NST_CHECK_(false, CU_FALSE, "server registration: %s", nicsim_wsa_name(err));
		goto out;
	}
	exposed = true;
	if (!WSPRecv(s, &rcv, 1, &n, &flags, &ovr, NULL, NULL, &err) || err != WSA_IO_PENDING) {
		NST_CHECK_(false, CU_FALSE, "WSPRecv: %s", nicsim_wsa_name(err));
		goto out;
	}

	/* The client: the write, then the message that follows it. */
	nst_fill(r->cbuf, XFER, i);
	nst_fill(r->cbuf + PAGE, MSG, ~i);
	hc = WSPRegisterMemory(c, r->cbuf, 2 * PAGE, MEM_READ, &err);
	NST_CHECK_(hc != NULL, CU_FALSE, "client registration: %s", nicsim_wsa_name(err));
	if (!hc)
		goto out;
	err = nst_spi_rdma(c, true, r->cbuf, XFER, hc, &d);
	NST_CHECK_(err == 0, CU_FALSE, "RDMA write: %s", nicsim_wsa_name(err));
	if (err)
		goto out;
	if (!WSPSend(c, &msg, 1, &n, 0, &ovs, NULL, NULL, &err) || err != WSA_IO_PENDING) {
		NST_CHECK_(false, CU_FALSE, "WSPSend: %s", nicsim_wsa_name(err));
		goto out;
	}
	err = ov_result(c, &ovs, &n);
	NST_CHECK_(err == 0 && n == MSG, CU_FALSE, "send: %s, %u bytes", nicsim_wsa_name(err),
		   (unsigned)n);
	if (err || n != MSG)
		goto out;
	err = ov_result(s, &ovr, &n);
	NST_CHECK_(err == 0 && n == MSG, CU_FALSE, "receive: %s, %u bytes", nicsim_wsa_name(err),
		   (unsigned)n);
	if (err || n != MSG)
		goto out;
	ok = nst_sum32(r->sbuf, XFER) == nst_sum32(r->cbuf, XFER) &&
	     nst_sum32(r->sbuf + PAGE, MSG) == nst_sum32(r->cbuf + PAGE, MSG) && r->sbuf[XFER] == 0;
	NST_CHECK_(ok, CU_FALSE, "cycle %u: the data arrived changed", (unsigned)i);
	if (ok && i % 4 == 2) {
		WSABUF more = {.len = MSG, .buf = (char *)r->sbuf + PAGE + MSG};

		posted = WSPRecv(s, &more, 1, &n, &flags, &ovp, NULL, NULL, &err) &&
			 err == WSA_IO_PENDING;
		NST_CHECK_(posted, CU_FALSE, "second WSPRecv: %s", nicsim_wsa_name(err));
		ok = posted;
	}

out:
	if (exposed && WSPDeregisterRdmaMemory(s, &d, sizeof(d), &err)) {
		NST_CHECK_(false, CU_FALSE, "WSPDeregisterRdmaMemory: %s", nicsim_wsa_name(err));
		ok = false;
	}
	/* A registration a receive uses cannot go (R1): the close releases it. */
	if (hs && !posted && WSPDeregisterMemory(s, hs, &err)) {
		NST_CHECK_(false, CU_FALSE, "server WSPDeregisterMemory: %s", nicsim_wsa_name(err));
		ok = false;
	}
	if (hc && WSPDeregisterMemory(c, hc, &err)) {
		NST_CHECK_(false, CU_FALSE, "client WSPDeregisterMemory: %s", nicsim_wsa_name(err));
		ok = false;
	}
	/* Either side may close first. */
	for (int k = 0; k < 2; k++) {
		SOCKET x = (k ^ (int)(i & 1)) ? s : c;

		if (x != INVALID_SOCKET && WSPCloseSocket(x, &err)) {
			NST_CHECK_(false, CU_FALSE, "WSPCloseSocket: %s", nicsim_wsa_name(err));
			ok = false;
		}
	}
	if (posted) {
		/* Completed by the server's close, or by the client's first. */
		bool ended =
		    __atomic_load_n(&ovp.Internal, __ATOMIC_ACQUIRE) != WSA_STATUS_PENDING &&
		    ovp.OffsetHigh != 0;

		NST_CHECK_(ended, CU_FALSE, "cycle %u: the receive left posted: Internal 0x%lx, %s",
			   (unsigned)i, (unsigned long)ovp.Internal,
			   nicsim_wsa_name((int)ovp.OffsetHigh));
		ok = ok && ended;
	}
	return ok;
}

static void test_connect_transfer_close(void)
{
	struct conn_rig r = {.port = 7000};
	struct sockaddr_in at = addr_of(ADDR_A, r.port);
	struct figures base, start, end;
	uint64_t t0;
	int err = 0;
	unsigned done = 0;

	r.cbuf = map(2 * PAGE);
	r.sbuf = map(2 * PAGE);
	r.el = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	r.ec = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	r.er = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	NST_REQUIRE(r.el >= 0 && r.ec >= 0 && r.er >= 0);
	r.l = WSPSocket(AF_INET, SOCK_STREAM, IPPROTO_TCP, NULL, 0, 0, &err);
	NST_REQUIRE(r.l != INVALID_SOCKET);
	NST_REQUIRE_EQ(WSPBind(r.l, (struct sockaddr *)&at, sizeof(at), &err), 0);
	NST_REQUIRE_EQ(WSPListen(r.l, 8, &err), 0);
	NST_REQUIRE_EQ(WSPEventSelect(r.l, r.el, FD_ACCEPT, &err), 0);
	measure(&base);

	for (; done < CONN_WARMUP; done++)
		NST_REQUIRE(conn_cycle(&r, done));
	/* As quiet as before the warm-up: closing a socket released what it
	 * registered, cached or not (R11). */
	base.frames_free = frames_at_start;
	settle_and_measure(&base, &start);
	for (size_t i = 0; i < NNICS; i++)
		NST_EQ(start.nic[i].tpt, base.nic[i].tpt);
	show("start", "connect/transfer/close", done, &start);
	t0 = nst_now_ns();
	for (unsigned k = 0; k < CONN_CYCLES; k++, done++)
		NST_REQUIRE(conn_cycle(&r, done));
	settle_and_measure(&start, &end);
	show("end", "connect/transfer/close", done, &end);
	printf("      %u cycles in %.2f s (%.0f us each)\n", CONN_CYCLES,
	       (double)(nst_now_ns() - t0) / 1e9, (double)(nst_now_ns() - t0) / 1e3 / CONN_CYCLES);
	check_flat(&start, &end);

	NST_EQ(WSPCloseSocket(r.l, &err), 0);
	close(r.el);
	close(r.ec);
	close(r.er);
	munmap(r.cbuf, 2 * PAGE);
	munmap(r.sbuf, 2 * PAGE);
}

/* ---- Register, deregister ---------------------------------------------------------- */

/* Registrations span up to REG_SPAN bytes of a mapping of REG_MAP. */
#define REG_SPAN (16u * PAGE)
#define REG_MAP (REG_SPAN + 16u * PAGE)

/* Every EXPOSE_EVERY-th registration cycle also exposes its buffer. */
#define EXPOSE_EVERY 10u

/*
 * One cycle on socket s: a registration of a buffer that varies with i
 * (address, length, flags), registered twice (the second finds the first,
 * R2), on every EXPOSE_EVERY-th cycle exposed for RDMA and withdrawn (a
 * window bound and deallocated), deregistered twice, and dropped from the
 * cache (R9), so that every cycle pins, registers at the NIC, deregisters
 * and unpins.  False if a call failed (reported).
 */
static bool reg_cycle(SOCKET s, uint8_t *m, uint32_t i)
{
	static const DWORD flags[] = {MEM_READ, MEM_WRITE, MEM_READWRITE};
	uint32_t h32 = i * 0x9e3779b1u;
	size_t off = h32 % REG_SPAN, len = 1 + (h32 >> 7) % REG_SPAN;
	DWORD fl = flags[i % 3];
	struct nicsim_rdma_desc d;
	DWORD dlen = sizeof(d);
	HANDLE h, h2;
	int err = 0;

	h = WSPRegisterMemory(s, m + off, (DWORD)len, fl, &err);
	NST_CHECK_(h != NULL, CU_FALSE, "cycle %u: WSPRegisterMemory(+%zu, %zu): %s", (unsigned)i,
		   off, len, nicsim_wsa_name(err));
	if (!h)
		return false;
	h2 = WSPRegisterMemory(s, m + off, (DWORD)len, fl, &err);
	NST_CHECK_(h2 == h, CU_FALSE, "cycle %u: registered again: %p, not %p (%s)", (unsigned)i,
		   h2, h, nicsim_wsa_name(err));
	if (i % EXPOSE_EVERY == 0) {
		if (WSPRegisterRdmaMemory(s, m + off, (DWORD)len, fl, &d, &dlen, &err) ||
		    WSPDeregisterRdmaMemory(s, &d, dlen, &err)) {
			NST_CHECK_(false, CU_FALSE, "cycle %u: exposing: %s", (unsigned)i,
				   nicsim_wsa_name(err));
			return false;
		}
	}
	if (h2 && WSPDeregisterMemory(s, h2, &err)) {
		NST_CHECK_(false, CU_FALSE, "cycle %u: WSPDeregisterMemory: %s", (unsigned)i,
			   nicsim_wsa_name(err));
		return false;
	}
	if (WSPDeregisterMemory(s, h, &err)) {
		NST_CHECK_(false, CU_FALSE, "cycle %u: WSPDeregisterMemory: %s", (unsigned)i,
			   nicsim_wsa_name(err));
		return false;
	}
	if (WSPMemoryRegistrationCacheCallback(m + off, len, &err)) {
		NST_CHECK_(false, CU_FALSE, "cycle %u: WSPMemoryRegistrationCacheCallback: %s",
			   (unsigned)i, nicsim_wsa_name(err));
		return false;
	}
	return h2 == h;
}

static void test_register_deregister(void)
{
	SOCKET s[NNICS];
	uint8_t *m = map(REG_MAP);
	struct figures base, start, end;
	unsigned done = 0;
	uint64_t t0;
	int err = 0;

	/* Connected: exposing needs a connection. */
	NST_REQUIRE_EQ(nst_spi_pair(ADDR_A, ADDR_B, 7100, &s[0], &s[1]), 0);
	measure(&base);
	for (; done < REG_WARMUP; done++)
		NST_REQUIRE(reg_cycle(s[done % NNICS], m, done));
	settle_and_measure(&base, &start);
	show("start", "register/deregister", done, &start);
	t0 = nst_now_ns();
	for (unsigned k = 0; k < REG_CYCLES; k++, done++)
		NST_REQUIRE(reg_cycle(s[done % NNICS], m, done));
	settle_and_measure(&start, &end);
	show("end", "register/deregister", done, &end);
	printf("      %u cycles in %.2f s (%.1f us each)\n", REG_CYCLES,
	       (double)(nst_now_ns() - t0) / 1e9, (double)(nst_now_ns() - t0) / 1e3 / REG_CYCLES);
	check_flat(&start, &end);
	/* Every cycle registered at the NIC (and so did every exposure), and
	 * its second registration did not. */
	NST_EQ(end.cache.misses - start.cache.misses, REG_CYCLES + REG_CYCLES / EXPOSE_EVERY);
	NST_EQ(end.cache.hits - start.cache.hits, REG_CYCLES);
	for (size_t i = 0; i < NNICS; i++)
		NST_EQ(WSPCloseSocket(s[i], &err), 0);
	munmap(m, REG_MAP);
}

/* ---- Suite ---------------------------------------------------------------------- */

static int init(void)
{
	static const char *const addrs[] = {ADDR_A, ADDR_B, NULL};
	struct fab_info info;

	if (nst_tmpdir(dir, sizeof(dir), "leaks") < 0 || nst_make_fabric(dir, addrs))
		return -1;
#ifdef LEAKS_ASAN
	{
		/* The NICs without a quarantine (above); later options win. */
		char opts[1024];
		const char *asan = getenv("ASAN_OPTIONS");

		snprintf(opts, sizeof(opts), "%s%s" NO_QUARANTINE, asan ? asan : "",
			 asan && *asan ? ":" : "");
		setenv("ASAN_OPTIONS", opts, 1);
	}
#endif
	if (nst_nics_start(dir, nics, NNICS, WAIT_MS) < 0 || fab_open(dir, &fab) ||
	    fab_info(fab, &info))
		return -1;
	for (size_t i = 0; i < NNICS; i++)
		if (mgmt_client_open(&mgmt[i], nics[i].sock, WAIT_MS))
			return -1;
	frames_at_start = info.frames_free;
	setenv("NICSIM_DIR", dir, 1);
	return nst_spi_startup() == 0 ? 0 : -1;
}

static int clean(void)
{
	int err = 0, ok = WSPCleanup(&err) == 0;
	pid_t pids[NNICS];

	if (fab)
		fab_close(fab);
	for (size_t i = 0; i < NNICS; i++)
		mgmt_client_close(&mgmt[i]);
	if (!ok) {
		fprintf(stderr, "WSPCleanup failed: %s\n", nicsim_wsa_name(err));
		return -1;
	}
	for (size_t i = 0; i < NNICS; i++)
		pids[i] = nics[i].pid;
	return nst_stop_nics_clean(dir, pids, NNICS, WAIT_MS);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"connect_transfer_close", test_connect_transfer_close},
	    {"register_deregister", test_register_deregister},
	    {NULL, NULL},
	};
	static const struct nst_suite suite = {
	    .name = "leaks", .tests = tests, .init = init, .clean = clean};

	return nst_run_suite(argc, argv, &suite);
}

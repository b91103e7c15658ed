/*
 * Memory registration through the SPI against real nicsimd processes:
 * sizes from 1 byte to 64 MiB at odd alignments, reference counting (R2),
 * per-socket validity (R3), RDMA descriptors, every bad input with its WSA
 * code and nothing changed, and the NIC's TPT back at its starting
 * occupancy after each test and after a host is killed.  A deregistered
 * buffer stays cached (R7, tests/integration/test_cache.c) until its memory
 * is unmapped or the cache callback drops it, which these tests do where
 * they check that everything was released.
 *
 * NIC A (198.18.0.1): defaults (memory windows, RDMA read).
 * NIC B (198.18.0.2): no memory windows, no RDMA read, 8 TPT entries,
 * registrations up to 1 MiB.
 */
#include <errno.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nicsim_host.h"
#include "nstest.h"
#include "nstnic.h"
#include "nstspi.h"
#include "ws2san.h"

#define ADDR_A "198.18.0.1"
#define ADDR_B "198.18.0.2"
#define WAIT_MS 5000
#define PAGE 4096u

static char dir[256], sock_a[300], sock_b[300];
static struct nst_nic nics[] = {
    {.addr = ADDR_A},
    {.addr = ADDR_B,
     .extra = (const char *const[]){"--no-mw", "--no-rdma-read", "--tpt-capacity", "8", "--max-reg",
				    "1M", NULL}},
};
#define NNICS (sizeof(nics) / sizeof(nics[0]))
#define nic_a (nics[0].pid)
#define nic_b (nics[1].pid)
static int base_a = -1, base_b = -1; /* occupancy before each test */

/* A socket on addr connected to another on addr, *peer (exposing a buffer
 * needs a connection). */
static SOCKET connected_socket(const char *addr, SOCKET *peer)
{
	static uint16_t port = 6000;
	SOCKET s = INVALID_SOCKET;

	NST_REQUIRE_EQ(nst_spi_pair(addr, addr, port++, peer, &s), 0);
	return s;
}

static SOCKET bound_socket(const char *addr)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(5000)};
	int err = 0;
	SOCKET s = WSPSocket(AF_INET, SOCK_STREAM, IPPROTO_TCP, NULL, 0, 0, &err);

	NST_REQUIRE(s != INVALID_SOCKET);
	inet_pton(AF_INET, addr, &sa.sin_addr);
	NST_EQ(WSPBind(s, (struct sockaddr *)&sa, sizeof(sa), &err), 0);
	NST_EQ(err, 0);
	return s;
}

static void close_socket(SOCKET s)
{
	int err = 0;

	NST_EQ(WSPCloseSocket(s, &err), 0);
}

/* An anonymous mapping of n bytes (page-rounded), filled so pages exist. */
static char *map(size_t n)
{
	char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	NST_REQUIRE(p != MAP_FAILED);
	return p;
}

static size_t pages_spanned(uintptr_t va, size_t len)
{
	return (va + len + PAGE - 1) / PAGE - va / PAGE;
}

/* Drop the cached registrations of [buf, buf + len) (R9): something was there. */
static void flush(void *buf, size_t len)
{
	int err = 0;

	NST_EQ(WSPMemoryRegistrationCacheCallback(buf, len, &err), 0);
	NST_EQ(err, 0);
}

static void test_sizes_and_alignments(void)
{
	static const size_t sizes[] = {1, 3, 4095, 4096, 4097, 65537, (1u << 20) + 5, 64u << 20};
	static const size_t offsets[] = {0, 1, 2049, 4095};
	SOCKET s = bound_socket(ADDR_A);
	int base = nst_tpt_in_use(sock_a);
	long lck0 = nst_proc_status_kib(0, "VmLck");

	NST_REQUIRE(base >= 0 && lck0 >= 0);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (size_t j = 0; j < sizeof(offsets) / sizeof(offsets[0]); j++) {
			size_t maplen = sizes[i] + offsets[j] + PAGE;
			char *m = map(maplen), *buf = m + offsets[j];
			int err = 0;
			HANDLE h = WSPRegisterMemory(s, buf, (DWORD)sizes[i], MEM_READWRITE, &err);

			NST_TRUE(h != NULL);
			NST_EQ(err, 0);
			NST_EQ(nst_tpt_in_use(sock_a), base + 1);
			/* The pages are pinned: exactly those the buffer spans. */
			NST_EQ(nst_proc_status_kib(0, "VmLck") - lck0,
			       (long)(pages_spanned((uintptr_t)buf, sizes[i]) * PAGE / 1024));
			NST_EQ(WSPDeregisterMemory(s, h, &err), 0);
			/* Cached (R7) until the memory goes (R10). */
			NST_EQ(nst_tpt_in_use(sock_a), base + 1);
			munmap(m, maplen);
			NST_EQ(nst_tpt_in_use(sock_a), base);
			NST_EQ(nst_proc_status_kib(0, "VmLck"), lck0);
		}
	}
	close_socket(s);
}

static void test_r2_same_buffer_same_handle(void)
{
	SOCKET s1 = bound_socket(ADDR_A), s2 = bound_socket(ADDR_A);
	char *buf = map(3 * PAGE);
	int base = nst_tpt_in_use(sock_a), err = 0;
	long lck0 = nst_proc_status_kib(0, "VmLck");
	HANDLE h1, h1b, h2;

	h1 = WSPRegisterMemory(s1, buf + 10, 5000, MEM_READ, &err);
	h1b = WSPRegisterMemory(s1, buf + 10, 5000, MEM_READ, &err);
	h2 = WSPRegisterMemory(s2, buf + 10, 5000, MEM_READ, &err);
	NST_REQUIRE(h1 != NULL);
	NST_EQ_U((uintptr_t)h1b, (uintptr_t)h1);
	NST_EQ_U((uintptr_t)h2, (uintptr_t)h1);
	/* One NIC registration for all three. */
	NST_EQ(nst_tpt_in_use(sock_a), base + 1);
	/* s2 holds one instance, s1 two; only the last release frees. */
	NST_EQ(WSPDeregisterMemory(s2, h2, &err), 0);
	NST_EQ(WSPDeregisterMemory(s2, h2, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEINVAL);
	NST_EQ(WSPDeregisterMemory(s1, h1, &err), 0);
	NST_EQ(nst_tpt_in_use(sock_a), base + 1);
	NST_GT(nst_proc_status_kib(0, "VmLck"), lck0);
	NST_EQ(WSPDeregisterMemory(s1, h1, &err), 0);
	flush(buf + 10, 5000);
	NST_EQ(nst_tpt_in_use(sock_a), base);
	NST_EQ(nst_proc_status_kib(0, "VmLck"), lck0);
	NST_EQ(WSPDeregisterMemory(s1, h1, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEINVAL);
	munmap(buf, 3 * PAGE);
	close_socket(s1);
	close_socket(s2);
}

static void test_overlapping_pins_are_counted(void)
{
	SOCKET s = bound_socket(ADDR_A);
	char *buf = map(4 * PAGE);
	long lck0 = nst_proc_status_kib(0, "VmLck");
	int err = 0;
	HANDLE a = WSPRegisterMemory(s, buf, 3 * PAGE, MEM_READWRITE, &err);
	HANDLE b = WSPRegisterMemory(s, buf + 2 * PAGE, 2 * PAGE, MEM_READWRITE, &err);

	NST_REQUIRE(a != NULL && b != NULL);
	NST_EQ(nst_proc_status_kib(0, "VmLck") - lck0, 4 * PAGE / 1024);
	/* Releasing one must not unpin the page the other still uses. */
	NST_EQ(WSPDeregisterMemory(s, a, &err), 0);
	flush(buf, PAGE); /* overlaps a only */
	NST_EQ(nst_proc_status_kib(0, "VmLck") - lck0, 2 * PAGE / 1024);
	NST_EQ(WSPDeregisterMemory(s, b, &err), 0);
	flush(buf + 3 * PAGE, 1);
	NST_EQ(nst_proc_status_kib(0, "VmLck"), lck0);
	munmap(buf, 4 * PAGE);
	close_socket(s);
}

static void test_rdma_descriptor(void)
{
	SOCKET ps, po, s = connected_socket(ADDR_A, &ps), other = connected_socket(ADDR_A, &po);
	SOCKET unconnected = bound_socket(ADDR_A);
	char *buf = map(2 * PAGE);
	unsigned char desc[64], again[64], forged[64];
	DWORD len = 0;
	int base = nst_tpt_in_use(sock_a), err = 0;

	/* Asking with a short buffer tells the size and changes nothing. */
	NST_EQ(WSPRegisterRdmaMemory(s, buf, PAGE, MEM_WRITE, desc, &len, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEFAULT);
	NST_EQ(len, NICSIM_RDMA_DESC_SIZE);
	NST_EQ(nst_tpt_in_use(sock_a), base);
	NST_EQ(WSPRegisterRdmaMemory(s, buf, PAGE, MEM_WRITE, desc, NULL, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEFAULT);

	/* A socket not connected yet has no peer to expose to: nothing done. */
	len = sizeof(desc);
	NST_EQ(WSPRegisterRdmaMemory(unconnected, buf, PAGE, MEM_WRITE, desc, &len, &err),
	       SOCKET_ERROR);
	NST_EQ(err, WSAENOTCONN);
	NST_EQ(nst_tpt_in_use(sock_a), base);
	close_socket(unconnected);

	NST_EQ(WSPRegisterRdmaMemory(s, buf, PAGE, MEM_WRITE, desc, &len, &err), 0);
	NST_EQ(len, NICSIM_RDMA_DESC_SIZE);
	/* A window over a region on a NIC with windows. */
	NST_EQ(nst_tpt_in_use(sock_a), base + 2);
	len = sizeof(again);
	NST_EQ(WSPRegisterRdmaMemory(s, buf, PAGE, MEM_WRITE, again, &len, &err), 0);
	NST_EQ(memcmp(desc, again, NICSIM_RDMA_DESC_SIZE), 0);
	NST_EQ(nst_tpt_in_use(sock_a), base + 2);

	/* Truncated, forged, and another socket's: refused, nothing changed. */
	NST_EQ(WSPDeregisterRdmaMemory(s, desc, NICSIM_RDMA_DESC_SIZE - 1, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEINVAL);
	memcpy(forged, desc, sizeof(forged));
	forged[12] ^= 0x01; /* rkey's key byte */
	NST_EQ(WSPDeregisterRdmaMemory(s, forged, NICSIM_RDMA_DESC_SIZE, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEINVAL);
	memcpy(forged, desc, sizeof(forged));
	forged[0] ^= 0xff; /* magic */
	NST_EQ(WSPDeregisterRdmaMemory(s, forged, NICSIM_RDMA_DESC_SIZE, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEINVAL);
	NST_EQ(WSPDeregisterRdmaMemory(other, desc, NICSIM_RDMA_DESC_SIZE, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEINVAL);
	NST_EQ(WSPDeregisterRdmaMemory(s, NULL, NICSIM_RDMA_DESC_SIZE, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEINVAL);
	NST_EQ(nst_tpt_in_use(sock_a), base + 2);

	/* Another socket registering the same buffer gets its own window. */
	len = sizeof(again);
	NST_EQ(WSPRegisterRdmaMemory(other, buf, PAGE, MEM_WRITE, again, &len, &err), 0);
	NST_NE(memcmp(desc + 12, again + 12, 4), 0);
	NST_EQ(nst_tpt_in_use(sock_a), base + 3);
	NST_EQ(WSPDeregisterRdmaMemory(other, again, NICSIM_RDMA_DESC_SIZE, &err), 0);

	NST_EQ(WSPDeregisterRdmaMemory(s, desc, NICSIM_RDMA_DESC_SIZE, &err), 0);
	NST_EQ(nst_tpt_in_use(sock_a), base + 2);
	NST_EQ(WSPDeregisterRdmaMemory(s, desc, NICSIM_RDMA_DESC_SIZE, &err), 0);
	/* The window is gone; the region behind it stays cached (R8). */
	NST_EQ(nst_tpt_in_use(sock_a), base + 1);
	/* Stale now. */
	NST_EQ(WSPDeregisterRdmaMemory(s, desc, NICSIM_RDMA_DESC_SIZE, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEINVAL);
	munmap(buf, 2 * PAGE);
	close_socket(s);
	close_socket(other);
	close_socket(ps);
	close_socket(po);
}

static void test_rdma_without_windows(void)
{
	SOCKET peer, s = connected_socket(ADDR_B, &peer);
	char *buf = map(PAGE);
	unsigned char desc[NICSIM_RDMA_DESC_SIZE];
	DWORD len = sizeof(desc);
	int base = nst_tpt_in_use(sock_b), err = 0;

	NST_EQ(WSPRegisterRdmaMemory(s, buf, PAGE, MEM_READWRITE, desc, &len, &err), 0);
	NST_EQ(nst_tpt_in_use(sock_b), base + 1); /* the region's own key is the remote key */
	NST_EQ(WSPDeregisterRdmaMemory(s, desc, sizeof(desc), &err), 0);
	NST_EQ(nst_tpt_in_use(sock_b), base);
	munmap(buf, PAGE);
	close_socket(s);
	close_socket(peer);
}

/* Register buf/len with flags and expect failure with code; nothing changes.
 * The RDMA registration is tried on a connected socket of the same NIC (on
 * any other it fails as not connected first). */
static void expect_refused(SOCKET s, const char *sock_path, void *buf, DWORD len, DWORD flags,
			   int code)
{
	SOCKET peer, c = connected_socket(sock_path == sock_a ? ADDR_A : ADDR_B, &peer);
	int base = nst_tpt_in_use(sock_path), err = 0;
	long lck0 = nst_proc_status_kib(0, "VmLck");
	unsigned char desc[NICSIM_RDMA_DESC_SIZE];
	DWORD dlen = sizeof(desc);

	NST_TRUE(WSPRegisterMemory(s, buf, len, flags, &err) == NULL);
	NST_EQ(err, code);
	err = 0;
	NST_EQ(WSPRegisterRdmaMemory(c, buf, len, flags, desc, &dlen, &err), SOCKET_ERROR);
	NST_EQ(err, code);
	NST_EQ(nst_tpt_in_use(sock_path), base);
	NST_EQ(nst_proc_status_kib(0, "VmLck"), lck0);
	close_socket(c);
	close_socket(peer);
}

static void test_bad_buffers(void)
{
	SOCKET s = bound_socket(ADDR_A);
	char *m = map(4 * PAGE);
	char *ro = mmap(NULL, PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int err = 0;
	HANDLE h;

	NST_REQUIRE(ro != MAP_FAILED);
	expect_refused(s, sock_a, NULL, 100, MEM_READ, WSAEFAULT);
	expect_refused(s, sock_a, m, 0, MEM_READ, WSAEINVAL);
	/* Unmapped wholly, partly unmapped, and inaccessible pages. */
	NST_EQ(munmap(m + 2 * PAGE, 2 * PAGE), 0);
	expect_refused(s, sock_a, m + 2 * PAGE, 100, MEM_READ, WSAEFAULT);
	expect_refused(s, sock_a, m + PAGE, 2 * PAGE, MEM_READ, WSAEFAULT);
	NST_EQ(mprotect(m, PAGE, PROT_NONE), 0);
	expect_refused(s, sock_a, m, 100, MEM_READ, WSAEFAULT);
	/* A range that wraps the address space. */
	expect_refused(s, sock_a, (void *)(UINTPTR_MAX - 10), 100, MEM_READ, WSAEFAULT);
	/* Read-only memory cannot be a DMA target, but can be a source. */
	h = WSPRegisterMemory(s, ro, PAGE, MEM_WRITE, &err);
	NST_TRUE(h == NULL);
	NST_EQ(err, WSAEFAULT);
	h = WSPRegisterMemory(s, ro, PAGE, MEM_READ, &err);
	NST_TRUE(h != NULL);
	NST_EQ(WSPDeregisterMemory(s, h, &err), 0);
	munmap(m, 2 * PAGE);
	munmap(ro, PAGE);
	close_socket(s);
}

static void test_bad_flags(void)
{
	SOCKET s = bound_socket(ADDR_A);
	char *m = map(PAGE);

	expect_refused(s, sock_a, m, PAGE, 0, WSAEINVAL);
	expect_refused(s, sock_a, m, PAGE, 4, WSAEINVAL);
	expect_refused(s, sock_a, m, PAGE, 0xffffffffu, WSAEINVAL);
	munmap(m, PAGE);
	close_socket(s);
}

static void test_r3_forged_and_foreign_handles(void)
{
	SOCKET s = bound_socket(ADDR_A), s2 = bound_socket(ADDR_A);
	char *m = map(PAGE);
	int base = nst_tpt_in_use(sock_a), err = 0;
	HANDLE h = WSPRegisterMemory(s, m, PAGE, MEM_READ, &err);
	HANDLE forged[] = {NULL,
			   (HANDLE)(uintptr_t)1,
			   (HANDLE)((uintptr_t)h + 1),
			   (HANDLE)((uintptr_t)h ^ ((uintptr_t)1 << 40)),
			   (HANDLE)m,
			   (HANDLE) ~(uintptr_t)0};

	NST_REQUIRE(h != NULL);
	for (size_t i = 0; i < sizeof(forged) / sizeof(forged[0]); i++) {
		err = 0;
		NST_EQ(WSPDeregisterMemory(s, forged[i], &err), SOCKET_ERROR);
		NST_EQ(err, WSAEINVAL);
	}
	/* R3: the handle is not valid on a socket that did not register it. */
	NST_EQ(WSPDeregisterMemory(s2, h, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEINVAL);
	NST_EQ(nst_tpt_in_use(sock_a), base + 1);
	NST_EQ(WSPDeregisterMemory(s, h, &err), 0);
	/* Already released (the registration stays cached, the handle is not the socket's). */
	NST_EQ(WSPDeregisterMemory(s, h, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEINVAL);
	NST_EQ(nst_tpt_in_use(sock_a), base + 1);
	munmap(m, PAGE);
	close_socket(s);
	close_socket(s2);
}

static void test_bad_sockets(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	char *m = map(PAGE);
	int err = 0;
	SOCKET s, closed = bound_socket(ADDR_A);
	unsigned char desc[NICSIM_RDMA_DESC_SIZE];
	DWORD dlen = sizeof(desc);

	close_socket(closed);
	NST_TRUE(WSPRegisterMemory((SOCKET)12345, m, PAGE, MEM_READ, &err) == NULL);
	NST_EQ(err, WSAENOTSOCK);
	NST_TRUE(WSPRegisterMemory(closed, m, PAGE, MEM_READ, &err) == NULL);
	NST_EQ(err, WSAENOTSOCK);
	NST_EQ(WSPDeregisterMemory(closed, (HANDLE)1, &err), SOCKET_ERROR);
	NST_EQ(err, WSAENOTSOCK);
	NST_EQ(WSPCloseSocket(closed, &err), SOCKET_ERROR);
	NST_EQ(err, WSAENOTSOCK);

	s = WSPSocket(AF_INET, SOCK_STREAM, 0, NULL, 0, 0, &err);
	NST_REQUIRE(s != INVALID_SOCKET);
	/* Not bound: no NIC to register with. */
	NST_TRUE(WSPRegisterMemory(s, m, PAGE, MEM_READ, &err) == NULL);
	NST_EQ(err, WSAENOTCONN);
	NST_EQ(WSPRegisterRdmaMemory(s, m, PAGE, MEM_READ, desc, &dlen, &err), SOCKET_ERROR);
	NST_EQ(err, WSAENOTCONN);
	/* Addresses no NIC serves, inside and outside the fabric's block. */
	inet_pton(AF_INET, "198.18.0.9", &sa.sin_addr);
	NST_EQ(WSPBind(s, (struct sockaddr *)&sa, sizeof(sa), &err), SOCKET_ERROR);
	NST_EQ(err, WSAEADDRNOTAVAIL);
	inet_pton(AF_INET, "10.1.2.3", &sa.sin_addr);
	NST_EQ(WSPBind(s, (struct sockaddr *)&sa, sizeof(sa), &err), SOCKET_ERROR);
	NST_EQ(err, WSAEADDRNOTAVAIL);
	NST_EQ(WSPBind(s, NULL, sizeof(sa), &err), SOCKET_ERROR);
	NST_EQ(err, WSAEFAULT);
	NST_EQ(WSPBind(s, (struct sockaddr *)&sa, 4, &err), SOCKET_ERROR);
	NST_EQ(err, WSAEFAULT);
	inet_pton(AF_INET, ADDR_A, &sa.sin_addr);
	NST_EQ(WSPBind(s, (struct sockaddr *)&sa, sizeof(sa), &err), 0);
	NST_EQ(WSPBind(s, (struct sockaddr *)&sa, sizeof(sa), &err), SOCKET_ERROR);
	NST_EQ(err, WSAEINVAL);
	/* Other families and types. */
	NST_TRUE(WSPSocket(AF_INET6, SOCK_STREAM, 0, NULL, 0, 0, &err) == INVALID_SOCKET);
	NST_EQ(err, WSAEAFNOSUPPORT);
	NST_TRUE(WSPSocket(AF_INET, SOCK_DGRAM, 0, NULL, 0, 0, &err) == INVALID_SOCKET);
	NST_EQ(err, WSAESOCKTNOSUPPORT);
	munmap(m, PAGE);
	close_socket(s);
}

static void test_tpt_full(void)
{
	SOCKET s = bound_socket(ADDR_B);
	int base = nst_tpt_in_use(sock_b), err = 0, n = 0;
	char *m = map(16 * PAGE);
	HANDLE h[16];

	NST_REQUIRE_GE(base, 0);
	/* Fill the 8-entry TPT with distinct buffers. */
	while (n < 16) {
		h[n] = WSPRegisterMemory(s, m + n * PAGE, PAGE, MEM_READ, &err);
		if (!h[n])
			break;
		n++;
	}
	NST_EQ(n, 8 - base);
	NST_EQ(err, WSAENOBUFS);
	NST_EQ(nst_tpt_in_use(sock_b), 8);
	/* Freeing one entry lets the next registration through: the entry stays
	 * cached, and the full TPT evicts it. */
	NST_EQ(WSPDeregisterMemory(s, h[0], &err), 0);
	h[0] = WSPRegisterMemory(s, m + 15 * PAGE, PAGE, MEM_READ, &err);
	NST_TRUE(h[0] != NULL);
	for (int i = 0; i < n; i++)
		NST_EQ(WSPDeregisterMemory(s, h[i], &err), 0);
	flush(m, 16 * PAGE);
	NST_EQ(nst_tpt_in_use(sock_b), base);
	munmap(m, 16 * PAGE);
	close_socket(s);
}

static void test_larger_than_nic_limit(void)
{
	SOCKET s = bound_socket(ADDR_B);
	char *m = map(2u << 20);

	expect_refused(s, sock_b, m, (2u << 20), MEM_READ, WSAENOBUFS);
	munmap(m, 2u << 20);
	close_socket(s);
}

/*
 * A forked child does not inherit the parent's provider state (sockets,
 * attachments, registrations: memory locks are not inherited either), so it
 * starts the provider itself.
 */
static int child_startup(void)
{
	WSPDATA data;
	WSPPROC_TABLE table;

	return WSPStartupEx(0x0202, &data, NULL, NULL, &table);
}

/* For children: no CUnit assertions there (a failure would unwind into the
 * child's copy of the test runner).  INVALID_SOCKET on failure. */
static SOCKET child_socket(const char *addr)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	int err = 0;
	SOCKET s = WSPSocket(AF_INET, SOCK_STREAM, 0, NULL, 0, 0, &err);

	inet_pton(AF_INET, addr, &sa.sin_addr);
	if (s == INVALID_SOCKET || WSPBind(s, (struct sockaddr *)&sa, sizeof(sa), &err) != 0)
		return INVALID_SOCKET;
	return s;
}

static char *child_map(size_t n)
{
	char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* In a child without CAP_IPC_LOCK and with a 64 KiB lock limit. */
static int register_unpinnable(void *arg)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2];
	struct rlimit rl = {.rlim_cur = 64 << 10, .rlim_max = 64 << 10};
	SOCKET s;
	char *m;
	int err = 0;
	HANDLE h;

	(void)arg;
	if (syscall(SYS_capget, &hdr, data) < 0)
		return 10;
	data[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
	data[CAP_IPC_LOCK / 32].permitted &= ~(1u << (CAP_IPC_LOCK % 32));
	if (syscall(SYS_capset, &hdr, data) < 0 || setrlimit(RLIMIT_MEMLOCK, &rl) < 0)
		return 11;
	if (child_startup() != 0)
		return 15;
	s = child_socket(ADDR_A);
	m = child_map(1u << 20);
	if (s == INVALID_SOCKET || !m)
		return 16;
	h = WSPRegisterMemory(s, m, 1u << 20, MEM_READWRITE, &err);
	if (h != NULL)
		return 12;
	if (err != WSAENOBUFS)
		return 13;
	/* What fits under the limit still works. */
	h = WSPRegisterMemory(s, m, 4 * PAGE, MEM_READWRITE, &err);
	if (!h || WSPDeregisterMemory(s, h, &err) != 0)
		return 14;
	return 0;
}

static void test_pages_that_cannot_be_pinned(void)
{
	int base = nst_tpt_in_use(sock_a);
	pid_t child = nst_fork(register_unpinnable, NULL);
	int status = nst_wait(child, 20000);

	NST_TRUE(WIFEXITED(status));
	NST_EQ(WEXITSTATUS(status), 0);
	NST_EQ(nst_wait_tpt_in_use(sock_a, base, WAIT_MS), base);
}

static void test_close_releases(void)
{
	SOCKET peer, s = connected_socket(ADDR_A, &peer);
	char *m = map(4 * PAGE);
	unsigned char desc[NICSIM_RDMA_DESC_SIZE];
	DWORD dlen = sizeof(desc);
	int base = nst_tpt_in_use(sock_a), err = 0;
	long lck0 = nst_proc_status_kib(0, "VmLck");

	NST_TRUE(WSPRegisterMemory(s, m, PAGE, MEM_READ, &err) != NULL);
	NST_EQ(WSPRegisterRdmaMemory(s, m + 2 * PAGE, PAGE, MEM_READ, desc, &dlen, &err), 0);
	NST_EQ(nst_tpt_in_use(sock_a), base + 3);
	close_socket(s);
	NST_EQ(nst_tpt_in_use(sock_a), base);
	NST_EQ(nst_proc_status_kib(0, "VmLck"), lck0);
	munmap(m, 4 * PAGE);
	close_socket(peer);
}

static void test_extension_pointers(void)
{
	static const GUID ids[] = {WSAID_REGISTERMEMORY,
				   WSAID_DEREGISTERMEMORY,
				   WSAID_REGISTERRDMAMEMORY,
				   WSAID_DEREGISTERRDMAMEMORY,
				   WSAID_RDMAWRITE,
				   WSAID_RDMAREAD,
				   WSAID_MEMORYREGISTRATIONCACHECALLBACK};
	void *const fns[] = {(void *)WSPRegisterMemory,
			     (void *)WSPDeregisterMemory,
			     (void *)WSPRegisterRdmaMemory,
			     (void *)WSPDeregisterRdmaMemory,
			     (void *)WSPRdmaWrite,
			     (void *)WSPRdmaRead,
			     (void *)WSPMemoryRegistrationCacheCallback};
	GUID bogus = WSAID_REGISTERMEMORY, rdma_read = WSAID_RDMAREAD;
	SOCKET a = bound_socket(ADDR_A), b = bound_socket(ADDR_B);
	DWORD got;
	void *fn;
	int err = 0;

	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		fn = NULL;
		NST_EQ(WSPIoctl(a, SIO_GET_EXTENSION_FUNCTION_POINTER, (void *)&ids[i],
				sizeof(GUID), &fn, sizeof(fn), &got, NULL, NULL, NULL, &err),
		       0);
		NST_EQ_U((uintptr_t)fn, (uintptr_t)fns[i]);
		NST_EQ(got, sizeof(fn));
	}
	/* A NIC without RDMA read refuses its pointer. */
	NST_EQ(WSPIoctl(b, SIO_GET_EXTENSION_FUNCTION_POINTER, &rdma_read, sizeof(GUID), &fn,
			sizeof(fn), &got, NULL, NULL, NULL, &err),
	       SOCKET_ERROR);
	NST_EQ(err, WSAEOPNOTSUPP);
	bogus.Data4[7] ^= 1;
	NST_EQ(WSPIoctl(a, SIO_GET_EXTENSION_FUNCTION_POINTER, &bogus, sizeof(GUID), &fn,
			sizeof(fn), &got, NULL, NULL, NULL, &err),
	       SOCKET_ERROR);
	NST_EQ(err, WSAEINVAL);
	NST_EQ(WSPIoctl(a, SIO_GET_EXTENSION_FUNCTION_POINTER, (void *)&ids[0], sizeof(GUID), &fn,
			2, &got, NULL, NULL, NULL, &err),
	       SOCKET_ERROR);
	NST_EQ(err, WSAEFAULT);
	close_socket(a);
	close_socket(b);
}

static void test_startup_arguments(void)
{
	WSPDATA data;
	WSPPROC_TABLE table;

	NST_EQ(WSPStartupEx(0x0101, &data, NULL, NULL, &table), WSAVERNOTSUPPORTED);
	NST_EQ(WSPStartupEx(0x0202, NULL, NULL, NULL, &table), WSAEFAULT);
	NST_EQ(WSPStartupEx(0x0202, &data, NULL, NULL, NULL), WSAEFAULT);
	memset(&table, 0, sizeof(table));
	NST_EQ(WSPStartupEx(0x0202, &data, NULL, NULL, &table), 0);
	NST_TRUE(table.lpWSPSocket == WSPSocket);
	NST_TRUE(table.lpWSPBind == WSPBind);
	NST_TRUE(table.lpWSPIoctl == WSPIoctl);
	NST_TRUE(table.lpWSPCloseSocket == WSPCloseSocket);
	NST_TRUE(table.lpWSPCleanup == WSPCleanup);
	/* Balanced: the suite's own start-up stays in force. */
	NST_EQ(WSPCleanup(&(int){0}), 0);
}

/* `nicsim show tpt` lists our registration with our pid, then not. */
static void test_show_tpt_names_the_owner(void)
{
	SOCKET s = bound_socket(ADDR_A);
	char *m = map(PAGE), out[65536], want[64];
	const char *argv[] = {
	    nst_bin("nicsim"), "--dir", dir, "--nic", ADDR_A, "show", "tpt", NULL};
	int err = 0;
	HANDLE h = WSPRegisterMemory(s, m, PAGE, MEM_READ, &err);

	NST_REQUIRE(h != NULL);
	snprintf(want, sizeof(want), "pid %d ", (int)getpid());
	NST_EQ(nst_run(argv, out, sizeof(out), WAIT_MS), 0);
	NST_TRUE(strstr(out, want) != NULL);
	NST_EQ(WSPDeregisterMemory(s, h, &err), 0);
	flush(m, PAGE);
	NST_EQ(nst_run(argv, out, sizeof(out), WAIT_MS), 0);
	NST_TRUE(strstr(out, want) == NULL);
	munmap(m, PAGE);
	close_socket(s);
}

/* A child that registers three buffers, says so on fd, and waits to die. */
static int hold_registrations(void *arg)
{
	int fd = *(int *)arg, err = 0;
	SOCKET s;
	char *m = child_map(3 * PAGE);

	if (!m || child_startup() != 0)
		return 3;
	s = child_socket(ADDR_A);
	if (s == INVALID_SOCKET)
		return 4;

	for (int i = 0; i < 3; i++) {
		if (!WSPRegisterMemory(s, m + i * PAGE, PAGE, MEM_READWRITE, &err))
			return 1;
	}
	if (write(fd, "r", 1) != 1)
		return 2;
	pause();
	return 0;
}

static void test_killed_host_is_torn_down(void)
{
	int base = nst_tpt_in_use(sock_a), fds[2];
	char c, out[65536], want[64];
	const char *argv[] = {
	    nst_bin("nicsim"), "--dir", dir, "--nic", ADDR_A, "show", "tpt", NULL};
	pid_t child;

	NST_REQUIRE_EQ(pipe(fds), 0);
	child = nst_fork(hold_registrations, &fds[1]);
	NST_REQUIRE_GT(child, 0);
	close(fds[1]);
	NST_REQUIRE_EQ(read(fds[0], &c, 1), 1);
	close(fds[0]);
	NST_EQ(nst_tpt_in_use(sock_a), base + 3);
	snprintf(want, sizeof(want), "pid %d ", (int)child);
	NST_EQ(nst_run(argv, out, sizeof(out), WAIT_MS), 0);
	NST_TRUE(strstr(out, want) != NULL);
	NST_EQ(kill(child, SIGKILL), 0);
	nst_wait(child, WAIT_MS);
	NST_EQ(nst_wait_tpt_in_use(sock_a, base, WAIT_MS), base);
	NST_EQ(nst_run(argv, out, sizeof(out), WAIT_MS), 0);
	NST_TRUE(strstr(out, want) == NULL);
}

/* Registers and deregisters through the SPI until killed; ready_fd gets a
 * byte after the first registration. */
static int churn(void *arg, int ready_fd)
{
	SOCKET s;
	char *m = child_map(64 * PAGE);
	int err = 0;
	bool told = false;

	(void)arg;
	if (!m || child_startup() != 0)
		return 1;
	s = child_socket(ADDR_A);
	if (s == INVALID_SOCKET)
		return 2;
	for (unsigned i = 0;; i++) {
		HANDLE h = WSPRegisterMemory(s, m + (i % 32) * PAGE, (i % 7 + 1) * PAGE,
					     MEM_READWRITE, &err);

		if (!told) {
			told = write(ready_fd, "r", 1) == 1;
			close(ready_fd);
		}
		if (h && i % 3)
			WSPDeregisterMemory(s, h, &err);
	}
	return 0;
}

static void test_killed_while_registering(void)
{
	int base = nst_tpt_in_use(sock_a);

	for (int i = 0; i < 4; i++) {
		pid_t child = nst_fork_ready(churn, NULL, WAIT_MS);

		NST_REQUIRE_GT(child, 0);
		/* Once it registers: moments of its work are what is tested,
		 * so this sleep is the test's, not a synchronisation. */
		nst_sleep_ms(17 * i);
		NST_EQ(kill(child, SIGKILL), 0);
		nst_wait(child, WAIT_MS);
		NST_EQ(nst_wait_tpt_in_use(sock_a, base, WAIT_MS), base);
	}
}

static int init(void)
{
	WSPDATA data;
	WSPPROC_TABLE table;

	static const char *const addrs[] = {ADDR_A, ADDR_B, NULL};

	/* A fabric: exposing a buffer needs a connected socket. */
	if (nst_tmpdir(dir, sizeof(dir), "reg") < 0 || nst_make_fabric(dir, addrs))
		return -1;
	snprintf(sock_a, sizeof(sock_a), "%s/nic-" ADDR_A ".sock", dir);
	snprintf(sock_b, sizeof(sock_b), "%s/nic-" ADDR_B ".sock", dir);
	if (nst_nics_start(dir, nics, NNICS, WAIT_MS) < 0)
		return -1;
	setenv("NICSIM_DIR", dir, 1);
	return WSPStartupEx(0x0202, &data, NULL, NULL, &table) == 0 ? 0 : -1;
}

static int clean(void)
{
	int err = 0, ok = WSPCleanup(&err) == 0;
	bool a = nst_stop_clean(nic_a, WAIT_MS), b = nst_stop_clean(nic_b, WAIT_MS);

	if (!ok || !a || !b) {
		fprintf(stderr, "clean-up failed (WSPCleanup %s); logs in %s\n",
			ok ? "ok" : "failed", dir);
		return -1;
	}
	nst_done_with_dir(dir);
	return 0;
}

/* Every test starts from the NICs as they were started (one a failed test
 * left holding something is made so again, nstspi.h), and leaves both NICs'
 * TPT occupancy where it found it. */
static void setup(void)
{
	int rc;

	NST_SPI_KNOWN_STATE(rc, dir, nics, NNICS, NULL, WAIT_MS);
	NST_EQ(rc, 0);
	base_a = nst_tpt_in_use(sock_a);
	base_b = nst_tpt_in_use(sock_b);
}

static void teardown(void)
{
	NST_TRUE(base_a >= 0 && base_b >= 0);
	NST_EQ(nst_wait_tpt_in_use(sock_a, base_a, WAIT_MS), base_a);
	NST_EQ(nst_wait_tpt_in_use(sock_b, base_b, WAIT_MS), base_b);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"startup_arguments", test_startup_arguments},
	    {"extension_pointers", test_extension_pointers},
	    {"sizes_and_alignments", test_sizes_and_alignments},
	    {"r2_same_buffer_same_handle", test_r2_same_buffer_same_handle},
	    {"overlapping_pins_are_counted", test_overlapping_pins_are_counted},
	    {"rdma_descriptor", test_rdma_descriptor},
	    {"rdma_without_windows", test_rdma_without_windows},
	    {"bad_buffers", test_bad_buffers},
	    {"bad_flags", test_bad_flags},
	    {"r3_forged_and_foreign_handles", test_r3_forged_and_foreign_handles},
	    {"bad_sockets", test_bad_sockets},
	    {"tpt_full", test_tpt_full},
	    {"larger_than_nic_limit", test_larger_than_nic_limit},
	    {"pages_that_cannot_be_pinned", test_pages_that_cannot_be_pinned},
	    {"close_releases", test_close_releases},
	    {"show_tpt_names_the_owner", test_show_tpt_names_the_owner},
	    {"killed_host_is_torn_down", test_killed_host_is_torn_down},
	    {"killed_while_registering", test_killed_while_registering},
	    {NULL, NULL},
	};

	static const struct nst_suite suite = {.name = "register",
					       .tests = tests,
					       .init = init,
					       .clean = clean,
					       .setup = setup,
					       .teardown = teardown};

	return nst_run_suite(argc, argv, &suite);
}

/*
 * The provider's registration cache and memory monitor (R7-R11) against real
 * nicsimd processes joined by a fabric: hits that do no NIC work (the NIC's
 * command counters prove it), remote exposures revoked at once and exposed
 * again under a new key on NICs with and without memory windows, the cache
 * callback on contained, overlapping and adjacent ranges on every NIC, the
 * monitor on munmap + mmap at the same address, mremap, madvise, brk, free
 * and realloc, invalidation while in use and while a transfer is in flight,
 * close, limits and LRU eviction, a full TPT, fork, statistics through the
 * API and `nicsim show hosts`, failing closed when the monitor cannot see
 * the application's calls, and a multithreaded stress run.
 *
 * NICs: A and B (198.18.0.1, .2) with memory windows; C and D (.3, .4)
 * without; E (.5) with an 8-entry TPT; F (.6), killed by the WSAEFAULT test.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mgmt_client.h"
#include "nicsim_mgmt.h"
#include "nstest.h"
#include "nstnet.h"
#include "nstnic.h"
#include "nstspi.h"
#include "nicsim_provider.h"
#include "ws2san.h"

#define ADDR_A "198.18.0.1"
#define ADDR_B "198.18.0.2"
#define ADDR_C "198.18.0.3"
#define ADDR_D "198.18.0.4"
#define ADDR_E "198.18.0.5"
#define ADDR_F "198.18.0.6"
#define NNICS 6
#define WAIT_MS 10000
#define PAGE 4096u

static const char *const addrs[NNICS + 1] = {ADDR_A, ADDR_B, ADDR_C, ADDR_D, ADDR_E, ADDR_F, NULL};
static char dir[256], socks[NNICS][300];
static const char *const no_mw[] = {"--no-mw", NULL};
static const char *const small[] = {"--tpt-capacity", "8", NULL};
static struct nst_nic nics[NNICS];
static int bases[NNICS];
static bool nic_f_killed;
static uint16_t next_port = 3000;

enum { NA, NB, NC, ND, NE, NF };

/* ---- Helpers ------------------------------------------------------------------ */

static uint8_t *map(size_t n)
{
	uint8_t *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	NST_REQUIRE(p != MAP_FAILED);
	memset(p, 0x5a, n);
	return p;
}

static long locked_kib(void)
{
	return nst_proc_status_kib(0, "VmLck");
}

static int tpt(int nic)
{
	return nst_tpt_in_use(socks[nic]);
}

static struct nic_stats nic_stats(int nic)
{
	struct nic_stats st;

	memset(&st, 0, sizeof(st));
	NST_EQ(nst_nic_stats(socks[nic], &st), 0);
	return st;
}

static struct nicsim_cache_stats cache_stats(void)
{
	struct nicsim_cache_stats c;

	memset(&c, 0, sizeof(c));
	NST_EQ(nicsim_cache_stats(&c), 0);
	return c;
}

/* Register (the test stops on failure, naming the error) and deregister. */
static HANDLE reg(SOCKET s, void *buf, DWORD len, DWORD flags)
{
	int err = 0;
	HANDLE h;

	if (!(h = WSPRegisterMemory(s, buf, len, flags, &err)))
		NST_CHECK_(false, CU_TRUE, "WSPRegisterMemory(%p, %u, %u): %s", buf, len, flags,
			   nicsim_wsa_name(err));
	return h;
}

static void dereg(SOCKET s, HANDLE h)
{
	int err = 0, rc = WSPDeregisterMemory(s, h, &err);

	NST_CHECK_(rc == 0 && err == 0, CU_FALSE, "WSPDeregisterMemory: %s", nicsim_wsa_name(err));
}

static void expose(SOCKET s, void *buf, DWORD len, DWORD flags, struct nicsim_rdma_desc *d)
{
	DWORD dlen = sizeof(*d);
	int err = 0;

	NST_EQ(WSPRegisterRdmaMemory(s, buf, len, flags, d, &dlen, &err), 0);
	NST_EQ(err, 0);
}

static void unexpose(SOCKET s, struct nicsim_rdma_desc *d)
{
	int err = 0;

	NST_EQ(WSPDeregisterRdmaMemory(s, d, sizeof(*d), &err), 0);
}

/* The cache callback on [buf, buf + len): its WSA result, 0 for success. */
static int callback(const void *buf, size_t len)
{
	int err = 0;

	return WSPMemoryRegistrationCacheCallback((void *)buf, len, &err) ? err : 0;
}

static void close_socket(SOCKET s)
{
	int err = 0;

	NST_EQ(WSPCloseSocket(s, &err), 0);
}

static SOCKET bound(const char *addr)
{
	SOCKET s = nst_spi_bound(addr, 0);

	NST_REQUIRE(s != INVALID_SOCKET);
	return s;
}

static void pair(const char *srv_addr, const char *cli_addr, SOCKET *srv, SOCKET *cli)
{
	NST_REQUIRE_EQ(nst_spi_pair(srv_addr, cli_addr, next_port++, srv, cli), 0);
}

/* Is there a TPT entry with key on the NIC?  -1 if the listing failed. */
static int tpt_has_key(int nic, uint32_t key)
{
	struct nic_mgmt_tpt_rec *recs = NULL;
	struct mgmt_client c;
	size_t n = 0;
	int found = -1;

	if (mgmt_client_open(&c, socks[nic], WAIT_MS))
		return -1;
	if (!mgmt_client_tpt(&c, &recs, &n)) {
		found = 0;
		for (size_t i = 0; i < n; i++)
			found |= recs[i].key == key;
	}
	mgmt_client_close(&c);
	free(recs);
	return found;
}

/* The key of the region registered at va on the NIC, or 0. */
static uint32_t region_key_at(int nic, const void *va)
{
	struct nic_mgmt_tpt_rec *recs = NULL;
	struct mgmt_client c;
	size_t n = 0;
	uint32_t key = 0;

	if (mgmt_client_open(&c, socks[nic], WAIT_MS))
		return 0;
	if (!mgmt_client_tpt(&c, &recs, &n))
		for (size_t i = 0; i < n; i++)
			if (recs[i].type == NIC_TPT_MR && recs[i].va == (uintptr_t)va)
				key = recs[i].key;
	mgmt_client_close(&c);
	free(recs);
	return key;
}

/* ---- R7: local buffers ---------------------------------------------------------- */

static void test_r7_local_hit_does_no_nic_work(void)
{
	SOCKET s = bound(ADDR_A);
	uint8_t *buf = map(2 * PAGE);
	long lck0 = locked_kib();
	int base = tpt(NA), same = 0;
	struct nic_stats n0, n1;
	struct nicsim_cache_stats c0, c1;
	HANDLE h = reg(s, buf + 100, PAGE, MEM_READWRITE);

	dereg(s, h);
	/* Still registered and pinned: both pages of the buffer. */
	NST_EQ(tpt(NA), base + 1);
	NST_EQ(locked_kib() - lck0, 2 * PAGE / 1024);
	n0 = nic_stats(NA);
	c0 = cache_stats();
	for (int i = 0; i < 100; i++) {
		HANDLE again = reg(s, buf + 100, PAGE, MEM_READWRITE);

		same += again == h;
		dereg(s, again);
	}
	n1 = nic_stats(NA);
	c1 = cache_stats();
	NST_EQ(same, 100);
	/* No command at all reached the NIC: no REG_MR, no DEREG_MR. */
	NST_EQ(n1.cmds - n0.cmds, 0);
	NST_EQ(n1.cmd_reg_mr - n0.cmd_reg_mr, 0);
	NST_EQ(n1.cmd_dereg_mr - n0.cmd_dereg_mr, 0);
	NST_EQ(c1.hits - c0.hits, 100);
	NST_EQ(c1.misses - c0.misses, 0);
	NST_TRUE(c1.flags & NICSIM_CACHE_ON);
	/* Other flags are another registration: a miss. */
	h = reg(s, buf + 100, PAGE, MEM_READ);
	NST_EQ(cache_stats().misses - c1.misses, 1);
	dereg(s, h);
	NST_EQ(tpt(NA), base + 2);
	/* R11: closing the socket releases what it cached. */
	close_socket(s);
	NST_EQ(tpt(NA), base);
	NST_EQ(locked_kib(), lck0);
	munmap(buf, 2 * PAGE);
}

/* ---- R8: remote buffers, with and without memory windows ------------------------- */

/*
 * Expose, RDMA-write, revoke: the peer's access goes at once while the pages
 * stay pinned; expose again on the same connection: from the cache, under a
 * new key that works while the old one is refused with a remote access
 * error (which breaks the connection, as on InfiniBand).
 */
static void remote_revoked_and_reexposed(const char *srv_addr, const char *cli_addr, int srv_nic,
					 bool windows)
{
	SOCKET ss, cs;
	uint8_t *target = map(PAGE), *src = map(PAGE);
	struct nicsim_rdma_desc d1, d2;
	struct nic_stats n0, n1, n2;
	long lck;
	HANDLE hs;

	pair(srv_addr, cli_addr, &ss, &cs);
	hs = reg(cs, src, PAGE, MEM_READ);
	nst_fill(src, PAGE, 1);
	expose(ss, target, PAGE, MEM_WRITE, &d1);
	NST_EQ(nst_spi_rdma(cs, true, src, PAGE, hs, &d1), 0);
	NST_EQ(nst_sum32(target, PAGE), nst_sum32(src, PAGE));

	lck = locked_kib();
	n0 = nic_stats(srv_nic);
	unexpose(ss, &d1);
	n1 = nic_stats(srv_nic);
	if (windows) {
		/* Only the window goes: the region stays registered. */
		NST_EQ(n1.cmd_dealloc_mw - n0.cmd_dealloc_mw, 1);
		NST_EQ(n1.cmd_dereg_mr - n0.cmd_dereg_mr, 0);
	} else {
		/* The region is the remote key: deregistered, but kept pinned. */
		NST_EQ(n1.cmd_dereg_mr - n0.cmd_dereg_mr, 1);
	}
	NST_EQ(locked_kib(), lck);

	/* Exposed again: from the cache, under a new key. */
	expose(ss, target, PAGE, MEM_WRITE, &d2);
	n2 = nic_stats(srv_nic);
	NST_NE(d2.rkey, d1.rkey);
	if (windows) {
		NST_EQ(n2.cmd_reg_mr - n1.cmd_reg_mr, 0);
		NST_EQ(n2.cmd_bind_mw - n1.cmd_bind_mw, 1);
	} else {
		NST_EQ(n2.cmd_reg_mr - n1.cmd_reg_mr, 1);
	}
	NST_EQ(locked_kib(), lck); /* nothing pinned again */
	nst_fill(src, PAGE, 2);
	NST_EQ(nst_spi_rdma(cs, true, src, PAGE, hs, &d2), 0);
	NST_EQ(nst_sum32(target, PAGE), nst_sum32(src, PAGE));
	/* The old key is refused by the NIC: a remote access error. */
	NST_EQ(nst_spi_rdma(cs, true, src, PAGE, hs, &d1), WSAECONNRESET);
	NST_GT(nic_stats(srv_nic).tpt_refusals, n2.tpt_refusals);
	unexpose(ss, &d2);
	dereg(cs, hs);
	close_socket(cs);
	close_socket(ss);
	munmap(target, PAGE);
	munmap(src, PAGE);
}

static void test_r8_remote_with_windows(void)
{
	remote_revoked_and_reexposed(ADDR_B, ADDR_A, NB, true);
}

static void test_r8_remote_without_windows(void)
{
	remote_revoked_and_reexposed(ADDR_D, ADDR_C, ND, false);
}

/* ---- R9: the cache callback ------------------------------------------------------ */

static void test_r9_contained_overlapping_adjacent(void)
{
	SOCKET s = bound(ADDR_A);
	uint8_t *buf = map(6 * PAGE);
	int base = tpt(NA);
	struct nicsim_cache_stats c0 = cache_stats();
	/* a [0, 2P), b [2P, 4P) adjacent to a, c [P, 3P) over both, d inside a and c. */
	HANDLE a = reg(s, buf, 2 * PAGE, MEM_READWRITE);
	HANDLE b = reg(s, buf + 2 * PAGE, 2 * PAGE, MEM_READWRITE);
	HANDLE c = reg(s, buf + PAGE, 2 * PAGE, MEM_READWRITE);
	HANDLE d = reg(s, buf + PAGE + 10, 100, MEM_READWRITE);

	dereg(s, a);
	dereg(s, b);
	dereg(s, c);
	dereg(s, d);
	NST_EQ(tpt(NA), base + 4);
	/* The first byte of b: b and c, not a (adjacent) and not d. */
	NST_EQ(callback(buf + 2 * PAGE, 1), 0);
	NST_EQ(tpt(NA), base + 2);
	NST_EQ(cache_stats().invalidations - c0.invalidations, 2);
	/* Adjacent to everything left, overlapping nothing: "never cached". */
	NST_EQ(callback(buf + 4 * PAGE, PAGE), WSAEINVAL);
	NST_EQ(callback(buf + PAGE + 110, PAGE), 0); /* a only: d ends before */
	NST_EQ(tpt(NA), base + 1);
	NST_EQ(callback(buf + PAGE + 109, 1), 0); /* d's last byte */
	NST_EQ(tpt(NA), base);
	NST_EQ(callback(buf, 6 * PAGE), WSAEINVAL);
	NST_EQ(callback(buf, 0), WSAEINVAL);
	/* Dropped entries are misses again. */
	c0 = cache_stats();
	a = reg(s, buf, 2 * PAGE, MEM_READWRITE);
	NST_EQ(cache_stats().misses - c0.misses, 1);
	dereg(s, a);
	close_socket(s);
	munmap(buf, 6 * PAGE);
}

static void test_r9_every_nic_and_socket(void)
{
	SOCKET s1 = bound(ADDR_A), s2 = bound(ADDR_A), s3 = bound(ADDR_C);
	uint8_t *buf = map(2 * PAGE);
	int base_a = tpt(NA), base_c = tpt(NC);
	long lck0 = locked_kib();

	dereg(s1, reg(s1, buf, PAGE, MEM_READ));
	dereg(s2, reg(s2, buf, PAGE, MEM_READ));
	dereg(s2, reg(s2, buf + 10, PAGE, MEM_WRITE));
	dereg(s3, reg(s3, buf, PAGE, MEM_READ));
	NST_EQ(tpt(NA), base_a + 2);
	NST_EQ(tpt(NC), base_c + 1);
	NST_EQ(callback(buf + PAGE - 1, 1), 0);
	NST_EQ(tpt(NA), base_a);
	NST_EQ(tpt(NC), base_c);
	NST_EQ(locked_kib(), lck0);
	close_socket(s1);
	close_socket(s2);
	close_socket(s3);
	munmap(buf, 2 * PAGE);
}

/* ---- R10: the memory monitor ------------------------------------------------------- */

/*
 * Register, deregister, give the memory back with release(), map a new
 * buffer at the same address, register it and RDMA-write into it from the
 * other host: the data lands in the new buffer and the old entry is gone.
 */
static void remap_case(void (*release)(uint8_t *buf, size_t len))
{
	SOCKET ss, cs;
	const size_t len = 4 * PAGE;
	uint8_t *target = map(len), *src = map(len);
	struct nicsim_rdma_desc d;
	struct nicsim_cache_stats c0;
	uint32_t old_key;
	HANDLE hs;

	pair(ADDR_B, ADDR_A, &ss, &cs);
	hs = reg(cs, src, (DWORD)len, MEM_READ);
	expose(ss, target, (DWORD)len, MEM_WRITE, &d);
	unexpose(ss, &d);
	old_key = region_key_at(NB, target);
	NST_TRUE(old_key != 0); /* cached: still registered */
	c0 = cache_stats();
	release(target, len);
	NST_EQ(cache_stats().invalidations - c0.invalidations, 1);
	NST_EQ(tpt_has_key(NB, old_key), 0);
	NST_REQUIRE(mmap(target, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == target);
	expose(ss, target, (DWORD)len, MEM_WRITE, &d);
	NST_EQ(cache_stats().misses - c0.misses, 1);
	NST_NE(region_key_at(NB, target), old_key);
	nst_fill(src, len, 7);
	NST_EQ(nst_spi_rdma(cs, true, src, (uint32_t)len, hs, &d), 0);
	NST_EQ(nst_sum32(target, len), nst_sum32(src, len));
	unexpose(ss, &d);
	dereg(cs, hs);
	close_socket(cs);
	close_socket(ss);
	munmap(target, len);
	munmap(src, len);
}

static void release_munmap(uint8_t *buf, size_t len)
{
	NST_EQ(munmap(buf, len), 0);
}

static void release_mremap(uint8_t *buf, size_t len)
{
	/* Moved away whole; the old range is unmapped. */
	uint8_t *moved = mremap(buf, len, 2 * len, MREMAP_MAYMOVE);

	NST_REQUIRE(moved != MAP_FAILED);
	if (moved != buf)
		NST_EQ(munmap(moved, 2 * len), 0);
	else
		NST_EQ(munmap(buf + len, len), 0); /* grew in place: the mapping changed */
}

static void release_dontneed(uint8_t *buf, size_t len)
{
	/* Locked pages refuse MADV_DONTNEED: it succeeds only once they are released. */
	NST_EQ(madvise(buf, len, MADV_DONTNEED), 0);
}

static void release_free(uint8_t *buf, size_t len)
{
	NST_EQ(madvise(buf, len, MADV_FREE), 0);
}

static void test_r10_munmap_then_mmap_same_address(void)
{
	remap_case(release_munmap);
}

static void test_r10_mremap(void)
{
	remap_case(release_mremap);
}

static void test_r10_madvise_dontneed(void)
{
	remap_case(release_dontneed);
}

static void test_r10_madvise_free(void)
{
	remap_case(release_free);
}

static void test_r10_madvise_remove(void)
{
	SOCKET s = bound(ADDR_A);
	uint8_t *shm =
	    mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int base = tpt(NA);
	struct nicsim_cache_stats c0 = cache_stats();

	NST_REQUIRE(shm != MAP_FAILED);
	memset(shm, 1, 2 * PAGE);
	dereg(s, reg(s, shm, 2 * PAGE, MEM_READWRITE));
	NST_EQ(tpt(NA), base + 1);
	NST_EQ(madvise(shm + PAGE, PAGE, MADV_REMOVE), 0);
	NST_EQ(tpt(NA), base);
	NST_EQ(cache_stats().invalidations - c0.invalidations, 1);
	close_socket(s);
	munmap(shm, 2 * PAGE);
}

static void test_r10_brk_shrink(void)
{
	SOCKET s = bound(ADDR_A);
	uint8_t *top = sbrk(0), *grown;
	uint8_t *buf = (uint8_t *)(((uintptr_t)top + PAGE - 1) & ~(uintptr_t)(PAGE - 1));
	intptr_t incr = (intptr_t)(buf - top) + 4 * PAGE;
	int base = tpt(NA);
	struct nicsim_cache_stats c0 = cache_stats();

	grown = sbrk(incr);
	NST_REQUIRE(grown == top);
	memset(buf, 3, 4 * PAGE);
	dereg(s, reg(s, buf + PAGE, 2 * PAGE, MEM_READWRITE));
	NST_EQ(tpt(NA), base + 1);
	/* Give back the last two pages: they hold part of the registration. */
	NST_TRUE(sbrk(-2 * (intptr_t)PAGE) != (void *)-1);
	NST_EQ(tpt(NA), base);
	NST_EQ(cache_stats().invalidations - c0.invalidations, 1);
	NST_TRUE(sbrk(-(incr - 2 * (intptr_t)PAGE)) != (void *)-1);
	NST_TRUE(sbrk(0) == top);
	close_socket(s);
}

static void test_r10_free_and_realloc_of_large_blocks(void)
{
	SOCKET s = bound(ADDR_A);
	size_t len = 1u << 20; /* served by mmap: free unmaps it */
	uint8_t *blk = malloc(len), *blk2 = malloc(len);
	int base = tpt(NA);
	struct nicsim_cache_stats c0 = cache_stats();

	NST_REQUIRE(blk && blk2);
	memset(blk, 1, len);
	memset(blk2, 2, len);
	dereg(s, reg(s, blk + 64, 4 * PAGE, MEM_READWRITE));
	dereg(s, reg(s, blk2, (DWORD)len, MEM_READ));
	NST_EQ(tpt(NA), base + 2);
	free(blk);
	NST_EQ(tpt(NA), base + 1);
	blk2 = realloc(blk2, 4 * len);
	NST_REQUIRE(blk2 != NULL);
	NST_EQ(tpt(NA), base);
	NST_EQ(cache_stats().invalidations - c0.invalidations, 2);
	free(blk2);
	close_socket(s);
}

/* The callback drops registrations in use: their handles fail, their deregistration works. */
static void test_r9_r10_invalidate_while_in_use(void)
{
	SOCKET ss, cs;
	uint8_t *target = map(PAGE), *src = map(PAGE);
	struct nicsim_rdma_desc d;
	long lck0 = locked_kib();
	int base_a = tpt(NA), base_b = tpt(NB);
	HANDLE hs;

	pair(ADDR_B, ADDR_A, &ss, &cs);
	hs = reg(cs, src, PAGE, MEM_READ);
	expose(ss, target, PAGE, MEM_WRITE, &d);
	NST_EQ(callback(src, PAGE), 0);
	NST_EQ(tpt(NA), base_a);
	/* The handle names memory given back: refused before it reaches the NIC. */
	NST_EQ(nst_spi_rdma(cs, true, src, PAGE, hs, &d), WSAEFAULT);
	dereg(cs, hs);
	hs = reg(cs, src, PAGE, MEM_READ); /* a fresh registration works */
	NST_EQ(nst_spi_rdma(cs, true, src, PAGE, hs, &d), 0);
	/* The exposure in use: the peer loses access, the descriptor still deregisters. */
	NST_EQ(callback(target, PAGE), 0);
	NST_EQ(tpt(NB), base_b);
	NST_EQ(nst_spi_rdma(cs, true, src, PAGE, hs, &d), WSAECONNRESET);
	unexpose(ss, &d);
	dereg(cs, hs);
	close_socket(cs);
	close_socket(ss);
	NST_EQ(locked_kib(), lck0);
	munmap(target, PAGE);
	munmap(src, PAGE);
}

struct unmapper {
	uint8_t *buf;
	size_t len;
	int rc;
};

static void *unmap_main(void *arg)
{
	struct unmapper *u = arg;

	u->rc = munmap(u->buf, u->len);
	return NULL;
}

/*
 * A 32 MiB RDMA write in flight while another thread unmaps its source:
 * munmap waits until the NIC deregistered (after the DMA drained), the write
 * completes or fails cleanly, and the NIC never touched unmapped memory.
 */
static void test_r10_transfer_in_flight(void)
{
	const size_t len = 32u << 20;
	SOCKET ss, cs;
	uint8_t *target = map(len), *src = map(len);
	struct nicsim_rdma_desc d;
	struct unmapper u = {.buf = src, .len = len};
	WSABUFEX b = {.len = (u_long)len, .buf = (char *)src};
	WSAOVERLAPPED ov;
	DWORD n = 0, flags = 0;
	uint64_t faults0;
	int err = 0, rc;
	pthread_t t;

	pair(ADDR_B, ADDR_A, &ss, &cs);
	b.handle = reg(cs, src, (DWORD)len, MEM_READ);
	expose(ss, target, (DWORD)len, MEM_WRITE, &d);
	faults0 = nic_stats(NA).dma_faults;
	memset(&ov, 0, sizeof(ov));
	rc = WSPRdmaWrite(cs, &b, 1, &d, sizeof(d), 0, &n, 0, &ov, NULL, NULL, &err);
	NST_TRUE(rc == 0 || err == WSA_IO_PENDING);
	NST_REQUIRE_EQ(pthread_create(&t, NULL, unmap_main, &u), 0);
	pthread_join(t, NULL);
	NST_EQ(u.rc, 0);
	/* Done, or failed at the NIC's local key check: either way it completes. */
	if (!WSPGetOverlappedResult(cs, &ov, &n, TRUE, &flags, &err))
		NST_CHECK_(err == WSAEFAULT || err == WSA_OPERATION_ABORTED || err == WSAECONNRESET,
			   CU_FALSE, "the write completed with %s (%d)", nicsim_wsa_name(err), err);
	else
		NST_EQ(n, len);
	NST_EQ(nic_stats(NA).dma_faults, faults0);
	WSPDeregisterMemory(cs, b.handle, &err);
	unexpose(ss, &d);
	close_socket(cs);
	close_socket(ss);
	munmap(target, len);
}

/* ---- R11, limits, a full TPT ------------------------------------------------------ */

static void test_r11_close_releases_cached_buffers(void)
{
	SOCKET s, ps, other = bound(ADDR_A), dead, pd;
	uint8_t *buf = map(8 * PAGE);
	struct nicsim_rdma_desc d;
	long lck0;
	int base_a;

	/* Exposing needs a connection: s and dead are connected, to peers on
	 * other NICs. */
	pair(ADDR_B, ADDR_A, &ps, &s);
	pair(ADDR_C, ADDR_D, &pd, &dead);
	lck0 = locked_kib();
	base_a = tpt(NA);
	for (int i = 0; i < 4; i++)
		dereg(s, reg(s, buf + i * PAGE, PAGE, MEM_READWRITE));
	expose(s, buf + 4 * PAGE, PAGE, MEM_READ, &d);
	unexpose(s, &d);
	expose(dead, buf + 5 * PAGE, PAGE, MEM_READ, &d);
	unexpose(dead, &d);
	/* other uses one of them: it stays, in use. */
	dereg(other, reg(other, buf + 6 * PAGE, PAGE, MEM_READ));
	HANDLE kept = reg(other, buf, PAGE, MEM_READWRITE);
	NST_EQ(tpt(NA), base_a + 6);
	close_socket(s);
	/* Gone: s's unused entries; kept: the one other uses and other's own. */
	NST_EQ(tpt(NA), base_a + 2);
	close_socket(dead);
	dereg(other, kept);
	close_socket(other);
	NST_EQ(tpt(NA), base_a);
	NST_EQ(locked_kib(), lck0);
	close_socket(ps);
	close_socket(pd);
	munmap(buf, 8 * PAGE);
}

static void test_full_tpt_evicts_unused_entries(void)
{
	SOCKET s = bound(ADDR_E);
	uint8_t *buf = map(12 * PAGE);
	int base = tpt(NE), fit = 8 - base;
	struct nicsim_cache_stats c0 = cache_stats();
	HANDLE h[12];

	NST_REQUIRE_GT(fit, 2);
	for (int i = 0; i < fit; i++)
		dereg(s, reg(s, buf + i * PAGE, PAGE, MEM_READ));
	NST_EQ(tpt(NE), 8);
	/* Touch entry 0: entry 1 is now the least recently used. */
	dereg(s, reg(s, buf, PAGE, MEM_READ));
	dereg(s, reg(s, buf + fit * PAGE, PAGE, MEM_READ));
	NST_EQ(cache_stats().evictions - c0.evictions, 1);
	c0 = cache_stats();
	dereg(s, reg(s, buf, PAGE, MEM_READ));
	NST_EQ(cache_stats().hits - c0.hits, 1);
	dereg(s, reg(s, buf + PAGE, PAGE, MEM_READ));
	NST_EQ(cache_stats().misses - c0.misses, 1);
	/* In use, entries are never evicted: a full TPT is then WSAENOBUFS. */
	for (int i = 0; i < fit; i++)
		h[i] = reg(s, buf + i * PAGE, PAGE, MEM_READ);
	{
		int err = 0;

		NST_TRUE(WSPRegisterMemory(s, buf + 11 * PAGE, PAGE, MEM_READ, &err) == NULL);
		NST_EQ(err, WSAENOBUFS);
	}
	for (int i = 0; i < fit; i++)
		dereg(s, h[i]);
	close_socket(s);
	NST_EQ(tpt(NE), base);
	munmap(buf, 12 * PAGE);
}

/* In a child with its own limits: 0 or the number of the check that failed. */
static int limits_child(void *arg)
{
	uint8_t *buf =
	    mmap(NULL, 16 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct nicsim_cache_stats c;
	int err = 0;
	SOCKET s;

	(void)arg;
	setenv("NICSIM_CACHE_MAX_ENTRIES", "4", 1);
	setenv("NICSIM_CACHE_MAX_BYTES", "6k", 1);
	if (buf == MAP_FAILED || nst_spi_startup())
		return 1;
	s = nst_spi_bound(ADDR_A, 0);
	if (s == INVALID_SOCKET)
		return 2;
	/* Four one-page entries: 16 KiB exceed 6k, so only one stays cached. */
	for (int i = 0; i < 4; i++)
		WSPDeregisterMemory(s, WSPRegisterMemory(s, buf + i * PAGE, PAGE, MEM_READ, &err),
				    &err);
	if (nicsim_cache_stats(&c) || c.entries != 1 || c.evictions != 3 || c.unused != 1)
		return 3;
	/* The survivor is the most recent: a hit; the first is a miss. */
	WSPDeregisterMemory(s, WSPRegisterMemory(s, buf + 3 * PAGE, PAGE, MEM_READ, &err), &err);
	if (nicsim_cache_stats(&c) || c.hits != 1)
		return 4;
	/* Small entries: the entry limit (4) applies, least recently used first. */
	for (int i = 0; i < 6; i++)
		WSPDeregisterMemory(
		    s, WSPRegisterMemory(s, buf + 8 * PAGE + i * 64, 64, MEM_READ, &err), &err);
	if (nicsim_cache_stats(&c) || c.entries != 4 || c.bytes != 4 * 64)
		return 5;
	WSPDeregisterMemory(s, WSPRegisterMemory(s, buf + 8 * PAGE + 5 * 64, 64, MEM_READ, &err),
			    &err);
	WSPDeregisterMemory(s, WSPRegisterMemory(s, buf + 8 * PAGE, 64, MEM_READ, &err), &err);
	if (nicsim_cache_stats(&c) || c.hits != 2 || c.misses != 11)
		return 6;
	return WSPCloseSocket(s, &err) ? 7 : 0;
}

static void test_limits_and_lru(void)
{
	pid_t child = nst_fork(limits_child, NULL);
	int status = nst_wait(child, WAIT_MS);

	NST_TRUE(WIFEXITED(status));
	NST_EQ(WEXITSTATUS(status), 0);
}

/* ---- fork, statistics, failing closed -------------------------------------------- */

static uint8_t *fork_buf;

static int fork_child(void *arg)
{
	int *base = arg, err = 0;
	struct nicsim_cache_stats c;
	SOCKET s;
	HANDLE h;

	/* The parent's provider is not the child's. */
	if (nicsim_cache_stats(&c) != WSANOTINITIALISED || nicsim_cache_stats(NULL) != WSAEFAULT)
		return 1;
	if (nst_spi_startup())
		return 2;
	s = nst_spi_bound(ADDR_A, 0);
	h = s == INVALID_SOCKET ? NULL : WSPRegisterMemory(s, fork_buf, PAGE, MEM_READ, &err);
	if (!h)
		return 3;
	/* A miss with an entry of its own, not the parent's cached one. */
	if (nicsim_cache_stats(&c) || c.hits != 0 || c.misses != 1 || c.entries != 1)
		return 4;
	if (nst_tpt_in_use(socks[NA]) != *base + 2)
		return 5;
	return WSPCloseSocket(s, &err) ? 6 : 0;
}

static void test_fork_child_does_not_use_parent_cache(void)
{
	SOCKET s = bound(ADDR_A);
	int base = tpt(NA), status;
	pid_t child;

	fork_buf = map(PAGE);
	dereg(s, reg(s, fork_buf, PAGE, MEM_READ));
	NST_EQ(tpt(NA), base + 1);
	child = nst_fork(fork_child, &base);
	status = nst_wait(child, WAIT_MS);
	NST_TRUE(WIFEXITED(status));
	NST_EQ(WEXITSTATUS(status), 0);
	NST_EQ(nst_wait_tpt_in_use(socks[NA], base + 1, WAIT_MS), base + 1);
	/* The parent's entry is still its own: a hit. */
	{
		struct nicsim_cache_stats c0 = cache_stats();

		dereg(s, reg(s, fork_buf, PAGE, MEM_READ));
		NST_EQ(cache_stats().hits - c0.hits, 1);
	}
	close_socket(s);
	munmap(fork_buf, PAGE);
}

static void test_stats_and_show_hosts(void)
{
	SOCKET s = bound(ADDR_C);
	uint8_t *buf = map(3 * PAGE);
	const char *argv[] = {nst_bin("nicsim"), "--dir", dir, "--nic", ADDR_C, "show",
			      "hosts",           NULL};
	const char *json[] = {nst_bin("nicsim"), "--dir",  dir, "--nic", ADDR_C, "show",
			      "hosts",           "--json", NULL};
	struct nicsim_cache_stats c;
	char out[16384], want[128];

	dereg(s, reg(s, buf, 3 * PAGE, MEM_READWRITE));
	dereg(s, reg(s, buf, 3 * PAGE, MEM_READWRITE));
	c = cache_stats();
	NST_TRUE(c.flags & NICSIM_CACHE_MONITOR);
	NST_GE(c.bytes_pinned, 3 * PAGE);
	NST_TRUE(c.entries >= 1 && c.unused >= 1 && c.bytes >= 3 * PAGE);
	NST_EQ(nicsim_cache_stats(NULL), WSAEFAULT);
	/* NIC C's host record: this process, one hit, one miss, one entry cached. */
	NST_EQ(nst_run(argv, out, sizeof(out), WAIT_MS), 0);
	snprintf(want, sizeof(want),
		 "pid %d qps 0 cache on hits 1 misses 1 evictions 0 invalidations 0 entries 1 "
		 "unused 1 bytes %u",
		 (int)getpid(), 3 * PAGE);
	NST_CHECK_(strstr(out, want) != NULL, CU_FALSE, "'%s' in: %.300s", want, out);
	NST_EQ(nst_run(json, out, sizeof(out), WAIT_MS), 0);
	snprintf(want, sizeof(want), "\"pid\":%d,", (int)getpid());
	NST_TRUE(strstr(out, want) != NULL);
	NST_TRUE(strstr(out, "\"hits\":1,\"misses\":1,") != NULL);
	close_socket(s);
	munmap(buf, 3 * PAGE);
}

/*
 * A second copy of the provider loaded with dlopen after the first took the
 * names: its monitor sees no call, so it warns once and does not cache.
 */
static int fail_closed_child(void *arg)
{
	const char *copy = arg;
	void *lib = dlopen(copy, RTLD_NOW | RTLD_LOCAL);
	int (*startup)(WORD, LPWSPDATA, LPWSAPROTOCOL_INFOW, LPWSPUPCALLTABLEEX, LPWSPPROC_TABLE);
	int (*stats)(struct nicsim_cache_stats *);
	WSPDATA data;
	WSPPROC_TABLE t;
	struct nicsim_cache_stats c;
	struct sockaddr_in sa = {.sin_family = AF_INET};
	uint8_t *buf = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int err = 0, base = nst_tpt_in_use(socks[NA]);
	SOCKET s;
	HANDLE h;

	if (!lib || buf == MAP_FAILED)
		return 1;
	*(void **)&startup = dlsym(lib, "WSPStartupEx");
	*(void **)&stats = dlsym(lib, "nicsim_cache_stats");
	if (!startup || !stats || startup(MAKEWORD(2, 2), &data, NULL, NULL, &t))
		return 2;
	if (stats(&c) || (c.flags & (NICSIM_CACHE_ON | NICSIM_CACHE_MONITOR)))
		return 3;
	s = t.lpWSPSocket(AF_INET, SOCK_STREAM, 0, NULL, 0, 0, &err);
	inet_pton(AF_INET, ADDR_A, &sa.sin_addr);
	if (s == INVALID_SOCKET || t.lpWSPBind(s, (struct sockaddr *)&sa, sizeof(sa), &err))
		return 4;
	/* Through the copy's own entry points: deregistration releases at once. */
	HANDLE (*regf)(SOCKET, PVOID, DWORD, DWORD, LPINT);
	int (*deregf)(SOCKET, HANDLE, LPINT);
	*(void **)&regf = dlsym(lib, "WSPRegisterMemory");
	*(void **)&deregf = dlsym(lib, "WSPDeregisterMemory");
	h = regf ? regf(s, buf, PAGE, MEM_READ, &err) : NULL;
	if (!h || nst_tpt_in_use(socks[NA]) != base + 1 || deregf(s, h, &err))
		return 5;
	if (nst_tpt_in_use(socks[NA]) != base)
		return 6;
	return t.lpWSPCloseSocket(s, &err) ? 7 : 0;
}

/*
 * Copy the provider's file to path under another soname (the loader would
 * otherwise hand back the library already loaded): one byte of its
 * DT_SONAME string ("libnicsimsp.so.<major>", the first occurrence of the
 * name: .dynstr comes before the code and the debugging sections) changes.
 */
static void copy_provider(const char *path)
{
	static const char soname[] = "libnicsimsp.so";
	Dl_info info;
	char *image, *at;
	size_t size = 0, cap = 1u << 20;
	ssize_t n;
	int in, out;

	NST_REQUIRE(dladdr((void *)WSPStartupEx, &info) && info.dli_fname);
	in = open(info.dli_fname, O_RDONLY);
	NST_REQUIRE_GE(in, 0);
	image = malloc(cap);
	NST_REQUIRE(image != NULL);
	while ((n = read(in, image + size, cap - size)) > 0) {
		size += (size_t)n;
		if (size == cap) {
			cap *= 2;
			image = realloc(image, cap);
			NST_REQUIRE(image != NULL);
		}
	}
	close(in);
	at = memmem(image, size, soname, sizeof(soname) - 1);
	NST_REQUIRE(at != NULL);
	at[sizeof(soname) - 5] = 'q'; /* libnicsimsq.so.<major> */
	out = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0700);
	NST_REQUIRE_GE(out, 0);
	NST_REQUIRE(write(out, image, size) == (ssize_t)size);
	close(out);
	free(image);
}

static void test_monitor_missing_fails_closed(void)
{
	char copy[400], log[400], text[2048] = "";
	int fd, saved, status;
	ssize_t n;
	pid_t child;

	snprintf(copy, sizeof(copy), "%s/libnicsimsq.so", dir);
	snprintf(log, sizeof(log), "%s/fail-closed.log", dir);
	copy_provider(copy);
	/* The child's stderr goes to the log. */
	fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	NST_REQUIRE_GE(fd, 0);
	fflush(stderr);
	saved = dup(2);
	dup2(fd, 2);
	child = nst_fork(fail_closed_child, copy);
	dup2(saved, 2);
	close(saved);
	close(fd);
	status = nst_wait(child, WAIT_MS);
	NST_TRUE(WIFEXITED(status));
	NST_EQ(WEXITSTATUS(status), 0);
	fd = open(log, O_RDONLY);
	NST_REQUIRE_GE(fd, 0);
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	text[n > 0 ? n : 0] = '\0';
	NST_CHECK_(strstr(text, "registration cache off: the memory monitor does not see munmap") !=
		       NULL,
		   CU_FALSE, "warning in: %.400s", text);
}

/* A NIC that died cannot confirm a release: WSAEFAULT. */
static void test_r9_release_failure_is_wsaefault(void)
{
	SOCKET s = bound(ADDR_F);
	uint8_t *buf = map(PAGE);

	dereg(s, reg(s, buf, PAGE, MEM_READ));
	NST_EQ(kill(nics[NF].pid, SIGKILL), 0);
	nst_wait(nics[NF].pid, WAIT_MS);
	nics[NF].pid = -1;
	nic_f_killed = true;
	NST_EQ(callback(buf, PAGE), WSAEFAULT);
	/* Forgotten all the same: nothing is cached there any more. */
	NST_EQ(callback(buf, PAGE), WSAEINVAL);
	close_socket(s);
	munmap(buf, PAGE);
}

/* ---- Threads ------------------------------------------------------------------------ */

#define STRESS_THREADS 4
#define STRESS_OPS 3000
#define STRESS_PAGES 64

struct stress {
	uint8_t *pool;
	int id;
	int failures;
	uint64_t regs;
};

static uint32_t stress_rnd(uint32_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

/* Registrations, deregistrations and callbacks on overlapping ranges of one pool. */
static void *stress_main(void *arg)
{
	struct stress *st = arg;
	SOCKET s = nst_spi_bound(st->id % 2 ? ADDR_A : ADDR_C, 0);
	uint32_t x = 0x12345u + (uint32_t)st->id * 7919u;
	HANDLE held[8] = {NULL};
	int err = 0;

	if (s == INVALID_SOCKET) {
		st->failures++;
		return NULL;
	}
	for (int i = 0; i < STRESS_OPS; i++) {
		uint32_t r = stress_rnd(&x), slot = r % 8;
		uint8_t *b = st->pool + (r >> 8) % (STRESS_PAGES - 4) * PAGE + (r >> 4) % 3 * 512;

		if (r % 11 == 0) {
			/* WSAEINVAL (nothing there) is fine; WSAEFAULT is not. */
			if (!WSPMemoryRegistrationCacheCallback(b, PAGE, &err))
				continue;
			st->failures += err != WSAEINVAL;
			continue;
		}
		if (held[slot]) {
			st->failures += WSPDeregisterMemory(s, held[slot], &err) != 0;
			held[slot] = NULL;
			continue;
		}
		held[slot] = WSPRegisterMemory(s, b, PAGE + (r % 3) * 100,
					       r % 2 ? MEM_READ : MEM_READWRITE, &err);
		st->failures += held[slot] == NULL;
		st->regs += held[slot] != NULL;
	}
	for (int i = 0; i < 8; i++)
		if (held[i])
			st->failures += WSPDeregisterMemory(s, held[i], &err) != 0;
	st->failures += WSPCloseSocket(s, &err) != 0;
	return NULL;
}

static void test_threads_register_deregister_invalidate(void)
{
	struct stress st[STRESS_THREADS];
	pthread_t t[STRESS_THREADS];
	uint8_t *pool = map(STRESS_PAGES * PAGE);
	struct nicsim_cache_stats c0 = cache_stats(), c1;
	long lck0 = locked_kib();
	uint64_t regs = 0;

	for (int i = 0; i < STRESS_THREADS; i++) {
		st[i] = (struct stress){.pool = pool, .id = i};
		NST_REQUIRE_EQ(pthread_create(&t[i], NULL, stress_main, &st[i]), 0);
	}
	for (int i = 0; i < STRESS_THREADS; i++) {
		pthread_join(t[i], NULL);
		NST_EQ(st[i].failures, 0);
		regs += st[i].regs;
	}
	c1 = cache_stats();
	/* Every registration was a hit or a miss; every socket closed released all. */
	NST_EQ((c1.hits - c0.hits) + (c1.misses - c0.misses), regs);
	NST_EQ(c1.entries, c0.entries);
	NST_EQ(locked_kib(), lck0);
	munmap(pool, STRESS_PAGES * PAGE);
}

/* ---- Waiting on a contended CPU ------------------------------------------------------ */

/*
 * The provider's sched_yield() calls, counted, and among them the slow ones:
 * those that gave the CPU to another task for longer than the provider's
 * threshold (NIC_HOST_YIELD_SLOW_NS in provider/driver.c), each a time slice
 * taken from the burner below.  This definition takes the place of the C
 * library's for the provider the test loads.
 */
#define SLOW_YIELD_NS 200000u
static unsigned long yields, slow_yields;

int sched_yield(void)
{
	uint64_t t0 = nst_now_ns();
	int rc = (int)syscall(SYS_sched_yield);

	__atomic_add_fetch(&yields, 1, __ATOMIC_RELAXED);
	if (nst_now_ns() - t0 >= SLOW_YIELD_NS)
		__atomic_add_fetch(&slow_yields, 1, __ATOMIC_RELAXED);
	return rc;
}

/*
 * A CPU-burning process, a NIC and this thread on one CPU, the burner at
 * the same priority, as on a busy CI runner: a sched_yield() of a waiter
 * may give the burner a whole time slice, so a waiter that finds the CPU
 * contended must sleep (a doorbell or an interrupt wakes it) rather than
 * keep yielding.  Registrations that miss the cache each wait for two NIC
 * commands; before the waits learnt this, each command yielded at least
 * once and the stress test above took a hundred times longer under load.
 *
 * Yields that return at once (the NIC or a short-lived task ran) cost
 * nobody a slice, and how many there are depends on what else the machine
 * runs; so the check is on the slow ones: after one, the provider's waits
 * do not yield for 100 ms (NIC_HOST_CONTENDED_NS), so there are at most
 * one per 100 ms of the loop, and far fewer than one per command.
 */
static void test_waits_on_a_contended_cpu_sleep(void)
{
	enum { ROUNDS = 100 };
	int cpu = sched_getcpu();
	cpu_set_t one, mine, nic;
	uint8_t *buf = map(PAGE);
	SOCKET s = bound(ADDR_B);
	unsigned long y0, slow0, slow, allowed;
	uint64_t t0;
	pid_t burner;

	NST_REQUIRE_GE(cpu, 0);
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	NST_REQUIRE_EQ(sched_getaffinity(0, sizeof(mine), &mine), 0);
	NST_REQUIRE_EQ(sched_getaffinity(nics[NB].pid, sizeof(nic), &nic), 0);
	burner = fork();
	NST_REQUIRE_GE(burner, 0);
	if (burner == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		sched_setaffinity(0, sizeof(one), &one);
		for (;;)
			__asm__ volatile("" ::: "memory");
	}
	NST_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
	NST_EQ(sched_setaffinity(nics[NB].pid, sizeof(one), &one), 0);
	y0 = __atomic_load_n(&yields, __ATOMIC_RELAXED);
	slow0 = __atomic_load_n(&slow_yields, __ATOMIC_RELAXED);
	t0 = nst_now_ns();
	for (int i = 0; i < ROUNDS; i++) {
		dereg(s, reg(s, buf, PAGE, MEM_READWRITE));
		/* Drop it from the cache: the next round misses again. */
		NST_EQ(callback(buf, PAGE), 0);
	}
	slow = __atomic_load_n(&slow_yields, __ATOMIC_RELAXED) - slow0;
	allowed = 1 + (unsigned long)((nst_now_ns() - t0) / 100000000u);
	printf("\n    %d rounds: %lu yields, %lu of them slow (at most %lu allowed) ", ROUNDS,
	       __atomic_load_n(&yields, __ATOMIC_RELAXED) - y0, slow, allowed);
	NST_LE(slow, allowed);
	NST_LT(slow, (unsigned long)ROUNDS / 4);
	kill(burner, SIGKILL);
	waitpid(burner, NULL, 0);
	sched_setaffinity(nics[NB].pid, sizeof(nic), &nic);
	sched_setaffinity(0, sizeof(mine), &mine);
	close_socket(s);
	munmap(buf, PAGE);
}

/* ---- Suite -------------------------------------------------------------------------- */

/* --udp: every NIC in a network namespace of its own, frames as UDP
 * datagrams between them (nst_nics_udp). */
static bool udp;
static struct nst_net net;

static int init(void)
{
	const char *const *extra[NNICS] = {NULL, NULL, no_mw, no_mw, small, NULL};

	if (nst_tmpdir(dir, sizeof(dir), "cache") < 0)
		return -1;
	for (int i = 0; i < NNICS; i++) {
		snprintf(socks[i], sizeof(socks[i]), "%s/nic-%s.sock", dir, addrs[i]);
		nics[i].addr = addrs[i];
		nics[i].extra = extra[i];
	}
	if (udp ? nst_nics_udp(dir, nics, NNICS, &net, NULL) < 0 : nst_make_fabric(dir, addrs) < 0)
		return -1;
	if (nst_nics_start(dir, nics, NNICS, WAIT_MS) < 0)
		return -1;
	setenv("NICSIM_DIR", dir, 1);
	return nst_spi_startup() == 0 ? 0 : -1;
}

static int clean(void)
{
	int err = 0, ok = WSPCleanup(&err) == 0;

	for (int i = 0; i < NNICS; i++)
		if (nics[i].pid > 0 && !nst_stop_clean(nics[i].pid, WAIT_MS))
			ok = 0;
	if (!ok) {
		fprintf(stderr, "clean-up failed; logs in %s\n", dir);
		return -1;
	}
	nst_net_down(&net);
	nst_done_with_dir(dir);
	return 0;
}

/* Every test starts from the NICs as they were started (one a failed test
 * left holding something is made so again, nstspi.h), and leaves each live
 * NIC's TPT where it found it. */
static void setup(void)
{
	int rc;

	NST_SPI_KNOWN_STATE(rc, dir, nics, NNICS, NULL, WAIT_MS);
	NST_EQ(rc, 0);
	for (int i = 0; i < NNICS; i++)
		bases[i] = nics[i].pid > 0 ? tpt(i) : -1;
}

static void teardown(void)
{
	for (int i = 0; i < NNICS; i++)
		if (nics[i].pid > 0 && !(i == NF && nic_f_killed))
			NST_EQ(nst_wait_tpt_in_use(socks[i], bases[i], WAIT_MS), bases[i]);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"r7_local_hit_does_no_nic_work", test_r7_local_hit_does_no_nic_work},
	    {"r8_remote_with_windows", test_r8_remote_with_windows},
	    {"r8_remote_without_windows", test_r8_remote_without_windows},
	    {"r9_contained_overlapping_adjacent", test_r9_contained_overlapping_adjacent},
	    {"r9_every_nic_and_socket", test_r9_every_nic_and_socket},
	    {"r9_r10_invalidate_while_in_use", test_r9_r10_invalidate_while_in_use},
	    {"r10_munmap_then_mmap_same_address", test_r10_munmap_then_mmap_same_address},
	    {"r10_mremap", test_r10_mremap},
	    {"r10_madvise_dontneed", test_r10_madvise_dontneed},
	    {"r10_madvise_free", test_r10_madvise_free},
	    {"r10_madvise_remove", test_r10_madvise_remove},
	    {"r10_brk_shrink", test_r10_brk_shrink},
	    {"r10_free_and_realloc_of_large_blocks", test_r10_free_and_realloc_of_large_blocks},
	    {"r10_transfer_in_flight", test_r10_transfer_in_flight},
	    {"r11_close_releases_cached_buffers", test_r11_close_releases_cached_buffers},
	    {"full_tpt_evicts_unused_entries", test_full_tpt_evicts_unused_entries},
	    {"limits_and_lru", test_limits_and_lru},
	    {"fork_child_does_not_use_parent_cache", test_fork_child_does_not_use_parent_cache},
	    {"stats_and_show_hosts", test_stats_and_show_hosts},
	    {"monitor_missing_fails_closed", test_monitor_missing_fails_closed},
	    {"threads_register_deregister_invalidate", test_threads_register_deregister_invalidate},
	    {"waits_on_a_contended_cpu_sleep", test_waits_on_a_contended_cpu_sleep},
	    {"r9_release_failure_is_wsaefault", test_r9_release_failure_is_wsaefault},
	    {NULL, NULL},
	};
	static const struct nst_suite suite = {
	    .name = "cache",
	    .tests = tests,
	    .init = init,
	    .clean = clean,
	    .setup = setup,
	    .teardown = teardown,
	};

	if (argc > 1 && !strcmp(argv[1], "--udp")) {
		udp = true;
		argv[1] = argv[0];
		return nst_run_suite(argc - 1, argv + 1, &suite);
	}
	return nst_run_suite(argc, argv, &suite);
}

/*
 * Cold registration cost through the SPI against a real nicsimd, beside the
 * pinning alone (mlock + munlock of the same pages) measured in the same run,
 * and the NIC daemon's resident memory with its TPT full at the default
 * capacity and at 1,048,576 entries.
 *
 * Targets (issue: the NIC process and its TPT): WSPRegisterMemory +
 * WSPDeregisterMemory minus mlock + munlock <= 2 us median for one page;
 * nicsimd resident memory <= 16 MiB at the default capacity and <= 128 MiB at
 * 1M entries.  Same-run references: memcpy and process_vm_readv of the same
 * sizes, printed as ratios.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nicsim_host.h"
#include "nstest.h"
#include "tpt.h"
#include "ws2san.h"

#define ADDR "198.18.0.1"
#define PAGE 4096u
#define WAIT_MS 10000

static char dir[256];

static void bench_cold_registration(void)
{
	static const unsigned pages[] = {1, 16, 256, 4096, 16384};
	struct sockaddr_in sa = {.sin_family = AF_INET};
	WSPDATA data;
	WSPPROC_TABLE table;
	int err = 0;
	SOCKET s;
	pid_t nic = nst_start_nic(dir, ADDR, NULL, WAIT_MS);
	double one_page_overhead = -1;

	NST_REQUIRE(nic > 0);
	/* The host and the NIC on two cores, the case the target is for (on
	 * one core each command costs two context switches, ~9 us). */
	NST_REQUIRE_EQ(nst_pin(0, 0), 0);
	NST_REQUIRE_EQ(nst_pin(nic, 1), 0);
	setenv("NICSIM_DIR", dir, 1);
	/* Cold registrations: each one pins and goes to the NIC (bench_cache
	 * measures the cache). */
	setenv("NICSIM_CACHE", "off", 1);
	NST_REQUIRE_EQ(WSPStartupEx(0x0202, &data, NULL, NULL, &table), 0);
	s = WSPSocket(AF_INET, SOCK_STREAM, 0, NULL, 0, 0, &err);
	inet_pton(AF_INET, ADDR, &sa.sin_addr);
	NST_REQUIRE_EQ(WSPBind(s, (struct sockaddr *)&sa, sizeof(sa), &err), 0);

	printf("\n\n  cold WSPRegisterMemory + WSPDeregisterMemory (medians, us)\n");
	printf("  %6s %10s %12s %10s %8s %10s %10s %9s\n", "pages", "reg+dereg", "mlock+munlk",
	       "overhead", "ratio", "memcpy", "pvm_readv", "reg/pvm");
	for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
		size_t len = (size_t)pages[i] * PAGE;
		size_t iters = pages[i] >= 4096 ? 15 : pages[i] >= 256 ? 101 : 2001;
		char *buf =
		    mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		char *dst =
		    mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		uint64_t *reg = calloc(iters, sizeof(uint64_t));
		uint64_t *pin = calloc(iters, sizeof(uint64_t));
		double r, p, mc, pv;

		NST_REQUIRE(buf != MAP_FAILED && dst != MAP_FAILED && reg && pin);
		/* Prefaulted pages, as pinning costs are usually quoted. */
		memset(buf, 1, len);
		memset(dst, 2, len);
		for (size_t k = 0; k < iters; k++) {
			uint64_t t0 = nst_now_ns();
			HANDLE h = WSPRegisterMemory(s, buf, (DWORD)len, MEM_READWRITE, &err);

			NST_REQUIRE(h != NULL);
			NST_REQUIRE_EQ(WSPDeregisterMemory(s, h, &err), 0);
			reg[k] = nst_now_ns() - t0;
			t0 = nst_now_ns();
			NST_REQUIRE_EQ(mlock(buf, len), 0);
			NST_REQUIRE_EQ(munlock(buf, len), 0);
			pin[k] = nst_now_ns() - t0;
		}
		r = nst_median_u64(reg, iters) / 1000.0;
		p = nst_median_u64(pin, iters) / 1000.0;
		NST_REQUIRE_EQ(nst_copy_refs(buf, dst, len, 31, &mc, &pv), 0);
		mc /= 1000.0;
		pv /= 1000.0;
		printf("  %6u %10.2f %12.2f %10.2f %8.2f %10.2f %10.2f %9.1f\n", pages[i], r, p,
		       r - p, r / p, mc, pv, r / pv);
		if (pages[i] == 1)
			one_page_overhead = r - p;
		free(reg);
		free(pin);
		munmap(buf, len);
		munmap(dst, len);
	}
	printf("  overhead = registration minus pinning (two NIC round trips and bookkeeping);\n"
	       "  memcpy / pvm_readv = one copy of the same size, for scale\n");
	printf("  target: overhead <= 2.00 us for 1 page: %.2f us %s\n", one_page_overhead,
	       one_page_overhead <= 2.0 ? "MET" : "MISSED");
	NST_TRUE(one_page_overhead > 0 && one_page_overhead <= 2.0);
	WSPCloseSocket(s, &err);
	WSPCleanup(&err);
	NST_EQ(WIFEXITED(nst_stop(nic, WAIT_MS)), 1);
}

/* Start a NIC with capacity entries, fill its TPT through the command ring,
 * and return its resident memory (KiB) when empty and when full. */
static void rss_at(uint32_t capacity, long *empty_kib, long *full_kib)
{
	char cap[16], sock[300];
	struct nic_host *h;
	static char buf[PAGE];
	pid_t nic;
	uint64_t t0;

	snprintf(cap, sizeof(cap), "%u", capacity);
	snprintf(sock, sizeof(sock), "%s/nic-%s.sock", dir, ADDR);
	nic = nst_start_nic(dir, ADDR, (const char *const[]){"--tpt-capacity", cap, NULL}, WAIT_MS);
	NST_REQUIRE(nic > 0);
	*empty_kib = nst_proc_status_kib(nic, "VmRSS");
	NST_REQUIRE_EQ(nic_host_attach(sock, &h), 0);
	t0 = nst_now_ns();
	for (uint32_t i = 0; i < capacity; i++) {
		struct nic_cmd c = {.opcode = NIC_CMD_REG_MR};
		struct nic_cpl cpl;

		c.u.reg_mr.va = (uintptr_t)buf;
		c.u.reg_mr.len = PAGE;
		NST_REQUIRE_EQ(nic_host_cmd(h, &c, &cpl, WAIT_MS), 0);
		NST_REQUIRE_EQ(cpl.status, NIC_STATUS_OK);
	}
	*full_kib = nst_proc_status_kib(nic, "VmRSS");
	printf("  filled %u entries in %.2f s\n", capacity, (double)(nst_now_ns() - t0) / 1e9);
	nic_host_detach(h);
	NST_EQ(WIFEXITED(nst_stop(nic, WAIT_MS)), 1);
}

static void bench_nic_resident_memory(void)
{
	long e1, f1, e2, f2;

	printf("\n\n  nicsimd resident memory (VmRSS)\n");
	rss_at(TPT_DEFAULT_CAPACITY, &e1, &f1);
	rss_at(1u << 20, &e2, &f2);
	printf("  %10s %12s %12s %8s\n", "capacity", "empty MiB", "full MiB", "target");
	printf("  %10u %12.1f %12.1f %8s %s\n", TPT_DEFAULT_CAPACITY, e1 / 1024.0, f1 / 1024.0,
	       "16", f1 <= 16 * 1024 ? "MET" : "MISSED");
	printf("  %10u %12.1f %12.1f %8s %s\n", 1u << 20, e2 / 1024.0, f2 / 1024.0, "128",
	       f2 <= 128 * 1024 ? "MET" : "MISSED");
	NST_TRUE(f1 > 0 && f1 <= 16 * 1024);
	NST_TRUE(f2 > 0 && f2 <= 128 * 1024);
}

static int init(void)
{
	return nst_tmpdir(dir, sizeof(dir), "bench") < 0 ? -1 : 0;
}

static int clean(void)
{
	nst_rmtree(dir);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"cold_registration", bench_cold_registration},
	    {"nic_resident_memory", bench_nic_resident_memory},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "bench_register", tests, init, clean);
}

/*
 * Unit tests of the provider's page pinning (provider/pin.h), no NIC needed:
 * per-page pin counts so that overlapping registrations never unlock each
 * other's pages, the probe that tells bad buffers (-EFAULT) from a lack of
 * resources (-ENOBUFS), "a failed pin changes nothing", and the count table
 * against a reference model under random pins and unpins.
 *
 * Locked memory is observed through VmLck in /proc/self/status, relative to
 * what the process had locked before each test.
 */
#include <errno.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pin.h"
#include "nstest.h"

#define PAGE 4096u

static char *map_pages(size_t n)
{
	char *p = mmap(NULL, n * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	NST_REQUIRE(p != MAP_FAILED);
	memset(p, 0x11, n * PAGE);
	return p;
}

static void test_single_and_unaligned(void)
{
	struct prov_pins t;
	char *buf = map_pages(4);
	long base = nst_proc_status_kib(0, "VmLck");

	NST_REQUIRE_EQ(prov_pins_init(&t), 0);
	/* 2 bytes straddling a page boundary pin both pages. */
	NST_EQ(prov_pin(&t, (uintptr_t)buf + PAGE - 1, 2, true), 0);
	NST_EQ(prov_pin_count(&t, (uintptr_t)buf), 1);
	NST_EQ(prov_pin_count(&t, (uintptr_t)buf + PAGE), 1);
	NST_EQ(prov_pin_count(&t, (uintptr_t)buf + 2 * PAGE), 0);
	NST_EQ(prov_pins_pages(&t), 2);
	NST_EQ(nst_proc_status_kib(0, "VmLck") - base, 8);
	prov_unpin(&t, (uintptr_t)buf + PAGE - 1, 2);
	NST_EQ(prov_pins_pages(&t), 0);
	NST_EQ(nst_proc_status_kib(0, "VmLck") - base, 0);
	prov_pins_fini(&t);
	munmap(buf, 4 * PAGE);
}

/* Two buffers sharing a page: releasing one keeps the shared page locked. */
static void test_overlap_keeps_pages_locked(void)
{
	struct prov_pins t;
	char *buf = map_pages(3);
	uintptr_t a = (uintptr_t)buf + 100, b = (uintptr_t)buf + PAGE + 10;
	long base = nst_proc_status_kib(0, "VmLck");

	NST_REQUIRE_EQ(prov_pins_init(&t), 0);
	NST_EQ(prov_pin(&t, a, PAGE + 200, false), 0);    /* pages 0, 1 */
	NST_EQ(prov_pin(&t, b, 2 * PAGE - 100, true), 0); /* pages 1, 2 */
	NST_EQ(prov_pin_count(&t, (uintptr_t)buf + PAGE), 2);
	NST_EQ(nst_proc_status_kib(0, "VmLck") - base, 12);
	prov_unpin(&t, a, PAGE + 200);
	NST_EQ(prov_pin_count(&t, (uintptr_t)buf), 0);
	NST_EQ(prov_pin_count(&t, (uintptr_t)buf + PAGE), 1);
	NST_EQ(nst_proc_status_kib(0, "VmLck") - base, 8); /* pages 1 and 2 still locked */
	/* The same range pinned twice needs two unpins. */
	NST_EQ(prov_pin(&t, b, 2 * PAGE - 100, true), 0);
	prov_unpin(&t, b, 2 * PAGE - 100);
	NST_EQ(nst_proc_status_kib(0, "VmLck") - base, 8);
	prov_unpin(&t, b, 2 * PAGE - 100);
	NST_EQ(nst_proc_status_kib(0, "VmLck") - base, 0);
	NST_EQ(prov_pins_pages(&t), 0);
	prov_pins_fini(&t);
	munmap(buf, 3 * PAGE);
}

static void test_bad_buffers_change_nothing(void)
{
	struct prov_pins t;
	char *buf = map_pages(4);
	long base;

	NST_REQUIRE_EQ(prov_pins_init(&t), 0);
	/* Page 0 pinned beforehand: a failed pin over it must leave it pinned once. */
	NST_EQ(prov_pin(&t, (uintptr_t)buf, PAGE, true), 0);
	base = nst_proc_status_kib(0, "VmLck");

	NST_EQ(prov_pin(&t, (uintptr_t)buf, 0, false), -EINVAL);
	NST_EQ(prov_pin(&t, UINTPTR_MAX - 10, 100, false), -EFAULT);

	/* Page 3 unmapped: wholly and partly unmapped ranges. */
	NST_REQUIRE_EQ(munmap(buf + 3 * PAGE, PAGE), 0);
	NST_EQ(prov_pin(&t, (uintptr_t)buf + 3 * PAGE, PAGE, false), -EFAULT);
	NST_EQ(prov_pin(&t, (uintptr_t)buf, 4 * PAGE, false), -EFAULT);

	/* Page 2 inaccessible, then read-only. */
	NST_REQUIRE_EQ(mprotect(buf + 2 * PAGE, PAGE, PROT_NONE), 0);
	NST_EQ(prov_pin(&t, (uintptr_t)buf + 2 * PAGE, PAGE, false), -EFAULT);
	NST_EQ(prov_pin(&t, (uintptr_t)buf, 3 * PAGE, false), -EFAULT);
	NST_REQUIRE_EQ(mprotect(buf + 2 * PAGE, PAGE, PROT_READ), 0);
	NST_EQ(prov_pin(&t, (uintptr_t)buf, 3 * PAGE, true), -EFAULT);

	/* Nothing changed by any of the failures. */
	NST_EQ(prov_pin_count(&t, (uintptr_t)buf), 1);
	NST_EQ(prov_pin_count(&t, (uintptr_t)buf + PAGE), 0);
	NST_EQ(prov_pins_pages(&t), 1);
	NST_EQ(nst_proc_status_kib(0, "VmLck") - base, 0);

	/* Read-only memory may still be pinned for reading. */
	NST_EQ(prov_pin(&t, (uintptr_t)buf + 2 * PAGE, PAGE, false), 0);
	prov_unpin(&t, (uintptr_t)buf + 2 * PAGE, PAGE);
	prov_unpin(&t, (uintptr_t)buf, PAGE);
	NST_EQ(prov_pins_pages(&t), 0);
	prov_pins_fini(&t);
	munmap(buf, 3 * PAGE);
}

/* Child: no CAP_IPC_LOCK and an 8-page RLIMIT_MEMLOCK, then pin too much. */
static int pin_over_limit(void *arg)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2];
	struct rlimit rl = {.rlim_cur = 8 * PAGE, .rlim_max = 8 * PAGE};
	struct prov_pins t;
	char *buf = arg;
	long base;

	if (syscall(SYS_capget, &hdr, data))
		return 10;
	data[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
	if (syscall(SYS_capset, &hdr, data) || setrlimit(RLIMIT_MEMLOCK, &rl))
		return 11;
	if (prov_pins_init(&t))
		return 12;
	if (prov_pin(&t, (uintptr_t)buf, 4 * PAGE, true))
		return 13;
	base = nst_proc_status_kib(0, "VmLck");
	/* Overlaps the 4 pinned pages and needs 12 more: over the limit. */
	if (prov_pin(&t, (uintptr_t)buf, 16 * PAGE, true) != -ENOBUFS)
		return 14;
	if (nst_proc_status_kib(0, "VmLck") != base || prov_pin_count(&t, (uintptr_t)buf) != 1 ||
	    prov_pins_pages(&t) != 4)
		return 15;
	prov_unpin(&t, (uintptr_t)buf, 4 * PAGE);
	if (prov_pins_pages(&t) != 0)
		return 16;
	prov_pins_fini(&t);
	return 0;
}

static void test_cannot_lock_is_enobufs(void)
{
	char *buf = map_pages(16);
	pid_t pid = nst_fork(pin_over_limit, buf);
	int status;

	NST_REQUIRE(pid > 0);
	status = nst_wait(pid, 10000);
	NST_REQUIRE(status >= 0);
	NST_EQ(WIFEXITED(status), 1);
	NST_EQ(WEXITSTATUS(status), 0);
	munmap(buf, 16 * PAGE);
}

/* Random pins and unpins over 256 pages against a model of the counts. */
static void test_random_against_model(void)
{
	enum { NPAGES = 256, OPS = 4000, MAXLIVE = 64 };
	struct range {
		uintptr_t addr;
		size_t len;
	} live[MAXLIVE];
	unsigned model[NPAGES] = {0}, nlive = 0;
	uint64_t rnd = 0x9e3779b97f4a7c15ull;
	char *buf = map_pages(NPAGES);
	struct prov_pins t;
	long base = nst_proc_status_kib(0, "VmLck");
	int mismatches = 0;

	NST_REQUIRE_EQ(prov_pins_init(&t), 0);
	for (int op = 0; op < OPS; op++) {
		size_t pinned = 0;

		rnd ^= rnd << 13;
		rnd ^= rnd >> 7;
		rnd ^= rnd << 17;
		if (nlive < MAXLIVE && (nlive == 0 || rnd % 3)) {
			size_t first = (size_t)(rnd >> 8) % NPAGES;
			size_t off = (size_t)(rnd >> 20) % PAGE;
			size_t max = (NPAGES - first) * PAGE - off;
			size_t len = 1 + (size_t)(rnd >> 32) % (max < 40 * PAGE ? max : 40 * PAGE);
			uintptr_t a = (uintptr_t)buf + first * PAGE + off;

			NST_REQUIRE_EQ(prov_pin(&t, a, len, (rnd >> 40) & 1), 0);
			live[nlive].addr = a;
			live[nlive++].len = len;
			for (uintptr_t pg = a / PAGE; pg <= (a + len - 1) / PAGE; pg++)
				model[pg - (uintptr_t)buf / PAGE]++;
		} else {
			unsigned i = (unsigned)(rnd >> 16) % nlive;
			struct range r = live[i];

			prov_unpin(&t, r.addr, r.len);
			live[i] = live[--nlive];
			for (uintptr_t pg = r.addr / PAGE; pg <= (r.addr + r.len - 1) / PAGE; pg++)
				model[pg - (uintptr_t)buf / PAGE]--;
		}
		for (size_t pg = 0; pg < NPAGES; pg++) {
			if (prov_pin_count(&t, (uintptr_t)buf + pg * PAGE) != model[pg])
				mismatches++;
			pinned += model[pg] != 0;
		}
		if (prov_pins_pages(&t) != pinned)
			mismatches++;
		if (op % 500 == 0)
			NST_EQ(nst_proc_status_kib(0, "VmLck") - base,
			       (long)pinned * (PAGE / 1024));
	}
	NST_EQ(mismatches, 0);
	while (nlive) {
		nlive--;
		prov_unpin(&t, live[nlive].addr, live[nlive].len);
	}
	NST_EQ(prov_pins_pages(&t), 0);
	NST_EQ(nst_proc_status_kib(0, "VmLck") - base, 0);
	prov_pins_fini(&t);
	munmap(buf, NPAGES * PAGE);
}

/* Pins left at fini are unlocked. */
static void test_fini_unlocks(void)
{
	struct prov_pins t;
	char *buf = map_pages(8);
	long base = nst_proc_status_kib(0, "VmLck");

	NST_REQUIRE_EQ(prov_pins_init(&t), 0);
	NST_EQ(prov_pin(&t, (uintptr_t)buf, 8 * PAGE, true), 0);
	NST_EQ(nst_proc_status_kib(0, "VmLck") - base, 32);
	prov_pins_fini(&t);
	NST_EQ(nst_proc_status_kib(0, "VmLck") - base, 0);
	prov_pins_fini(&t); /* a zeroed table is accepted */
	munmap(buf, 8 * PAGE);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"single_and_unaligned", test_single_and_unaligned},
	    {"overlap_keeps_pages_locked", test_overlap_keeps_pages_locked},
	    {"bad_buffers_change_nothing", test_bad_buffers_change_nothing},
	    {"cannot_lock_is_enobufs", test_cannot_lock_is_enobufs},
	    {"random_against_model", test_random_against_model},
	    {"fini_unlocks", test_fini_unlocks},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "pin", tests, NULL, NULL);
}

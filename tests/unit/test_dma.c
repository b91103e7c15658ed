/*
 * DMA engine (nicsim/dma.c) against a real second process: reads and writes
 * through scatter lists at any offset, more segments than one system call
 * takes, unmapped ranges, a process that is gone, and pieces in shared
 * buffers copied through the NIC's mapping.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dma.h"
#include "nstest.h"

#define AREA (1u << 20)

/* The child's memory: a shared mapping, so the test can also check what the
 * child sees; the DMA engine still goes through the child's address space. */
static unsigned char *area;
static pid_t child = -1;

static unsigned char pattern(size_t i)
{
	return (unsigned char)(i * 131u + 7u);
}

static int hold(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return 0;
}

static int init(void)
{
	area = mmap(NULL, AREA, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		return -1;
	for (size_t i = 0; i < AREA; i++)
		area[i] = pattern(i);
	child = nst_fork(hold, NULL);
	return child > 0 ? 0 : -1;
}

static int clean(void)
{
	kill(child, SIGKILL);
	nst_wait(child, 5000);
	munmap(area, AREA);
	return 0;
}

static struct dma_seg seg(size_t off, size_t len)
{
	return (struct dma_seg){.va = (uintptr_t)area + off, .len = len};
}

static void test_read_one_segment(void)
{
	struct dma_seg s = seg(100, 5000);
	unsigned char buf[5000];

	NST_EQ(dma_read(child, NULL, &s, 1, 0, buf, sizeof(buf)), 0);
	for (size_t i = 0; i < sizeof(buf); i++)
		NST_REQUIRE_EQ(buf[i], pattern(100 + i));
	NST_EQ(dma_read(child, NULL, &s, 1, 4990, buf, 10), 0);
	NST_EQ(buf[0], pattern(100 + 4990));
}

static void test_scatter_list_at_every_offset(void)
{
	/* Segments of uneven sizes, out of address order, some empty. */
	struct dma_seg s[] = {seg(9000, 3), seg(0, 0), seg(50, 4096), seg(70000, 1),
			      seg(20000, 777)};
	size_t total = 3 + 4096 + 1 + 777, expect_off[4877];
	unsigned char buf[4877];
	size_t k = 0;

	NST_EQ_U(dma_segs_len(s, 5), total);
	for (unsigned i = 0; i < 5; i++)
		for (size_t j = 0; j < s[i].len; j++)
			expect_off[k++] = (size_t)(s[i].va - (uintptr_t)area) + j;
	for (size_t off = 0; off < total; off += 97) {
		size_t len = total - off < 1000 ? total - off : 1000;

		memset(buf, 0, sizeof(buf));
		NST_REQUIRE_EQ(dma_read(child, NULL, s, 5, off, buf, len), 0);
		for (size_t i = 0; i < len; i++)
			NST_REQUIRE_EQ(buf[i], pattern(expect_off[off + i]));
	}
}

static void test_write_lands_in_the_host(void)
{
	struct dma_seg s[] = {seg(300000, 10), seg(200000, 20)};
	unsigned char data[25];

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(0xa0 + i);
	NST_EQ(dma_write(child, NULL, s, 2, 5, data, sizeof(data)), 0);
	NST_EQ(memcmp(area + 300005, data, 5), 0);
	NST_EQ(memcmp(area + 200000, data + 5, 20), 0);
	/* Bytes around the written ones are untouched. */
	NST_EQ(area[300004], pattern(300004));
	NST_EQ(area[200020], pattern(200020));
	for (size_t i = 0; i < 5; i++)
		area[300005 + i] = pattern(300005 + i);
	for (size_t i = 0; i < 20; i++)
		area[200000 + i] = pattern(200000 + i);
}

static void test_more_segments_than_one_call(void)
{
	enum { N = 3000 };
	static struct dma_seg s[N];
	static unsigned char buf[N * 2];

	for (size_t i = 0; i < N; i++)
		s[i] = seg((N - 1 - i) * 64, 2);
	NST_EQ(dma_read(child, NULL, s, N, 0, buf, sizeof(buf)), 0);
	for (size_t i = 0; i < N; i++) {
		NST_REQUIRE_EQ(buf[2 * i], pattern((N - 1 - i) * 64));
		NST_REQUIRE_EQ(buf[2 * i + 1], pattern((N - 1 - i) * 64 + 1));
	}
}

static void test_out_of_range_and_unmapped(void)
{
	struct dma_seg s = seg(0, 100);
	struct dma_seg hole[] = {seg(0, 10), {.va = 4096, .len = 10}};
	unsigned char buf[200];

	NST_EQ(dma_read(child, NULL, &s, 1, 50, buf, 51), -EINVAL);
	NST_EQ(dma_read(child, NULL, &s, 1, 101, buf, 0), 0);
	NST_EQ(dma_read(child, NULL, &s, 1, UINT64_MAX, buf, 2), -EINVAL);
	/* Page 1 of the address space is never mapped. */
	NST_EQ(dma_read(child, NULL, hole, 2, 0, buf, 20), -EFAULT);
	NST_EQ(dma_write(child, NULL, hole, 2, 5, buf, 10), -EFAULT);
}

static void test_host_gone(void)
{
	pid_t gone = nst_fork(hold, NULL);
	struct dma_seg s = seg(0, 16);
	unsigned char buf[16];

	NST_REQUIRE(gone > 0);
	kill(gone, SIGKILL);
	nst_wait(gone, 5000);
	NST_EQ(dma_read(gone, NULL, &s, 1, 0, buf, sizeof(buf)), -ESRCH);
}

/*
 * Shared buffers at host addresses the child never maps (below
 * mmap_min_addr): a piece wholly inside one can only have been copied
 * through the map; one that runs past a map's end goes to the kernel (and
 * faults here, proving it was not copied through the map).
 */
static void test_shared_buffers(void)
{
	static unsigned char m1[8192], m2[4096];
	const struct dma_map map[] = {{.va = 4096, .len = sizeof(m1), .ptr = m1},
				      {.va = 16384, .len = sizeof(m2), .ptr = m2}};
	uint64_t copied = 0, calls = 0;
	const struct dma_maps maps = {.map = map, .n = 2, .copied = &copied, .calls = &calls};
	struct dma_seg s[] = {
	    {.va = 4096 + 100, .len = 200}, seg(0, 50), {.va = 16384, .len = 4096}, seg(500, 10)};
	size_t total = 200 + 50 + 4096 + 10;
	static unsigned char buf[4356], expect[4356];
	struct dma_seg past_end = {.va = 4096 + 8190, .len = 4};

	for (size_t i = 0; i < sizeof(m1); i++)
		m1[i] = (unsigned char)(i * 7 + 1);
	for (size_t i = 0; i < sizeof(m2); i++)
		m2[i] = (unsigned char)(i * 13 + 5);
	memcpy(expect, m1 + 100, 200);
	memcpy(expect + 200, area, 50);
	memcpy(expect + 250, m2, 4096);
	memcpy(expect + 4346, area + 500, 10);
	NST_EQ(dma_map_find(&maps, 4096, 8192), &map[0]);
	NST_EQ(dma_map_find(&maps, 4096 + 8191, 2), NULL);
	NST_EQ(dma_map_find(&maps, 4095, 1), NULL);
	NST_EQ(dma_map_find(&maps, 16384 + 4095, 1), &map[1]);
	/* Reads at many offsets, through both kinds of pieces. */
	for (size_t off = 0; off < total; off += 61) {
		size_t len = total - off;

		memset(buf, 0, sizeof(buf));
		NST_REQUIRE_EQ(dma_read(child, &maps, s, 4, off, buf, len), 0);
		NST_REQUIRE_EQ(memcmp(buf, expect + off, len), 0);
	}
	NST_TRUE(copied > 0);
	NST_TRUE(calls > 0);
	/* Wholly inside the maps: copies, and no system call. */
	copied = calls = 0;
	NST_EQ(dma_read(child, &maps, &s[2], 1, 100, buf, 3000), 0);
	NST_EQ(memcmp(buf, m2 + 100, 3000), 0);
	NST_EQ_U(copied, 1);
	NST_EQ_U(calls, 0);
	/* A write lands in the maps and in the child's memory. */
	for (size_t i = 0; i < total; i++)
		buf[i] = (unsigned char)(0x5a ^ i);
	NST_EQ(dma_write(child, &maps, s, 4, 0, buf, total), 0);
	NST_EQ(memcmp(m1 + 100, buf, 200), 0);
	NST_EQ(memcmp(area, buf + 200, 50), 0);
	NST_EQ(memcmp(m2, buf + 250, 4096), 0);
	NST_EQ(memcmp(area + 500, buf + 4346, 10), 0);
	NST_EQ(m1[99], (unsigned char)(99 * 7 + 1));
	NST_EQ(m1[300], (unsigned char)(300 * 7 + 1));
	for (size_t i = 0; i < 50; i++)
		area[i] = pattern(i);
	for (size_t i = 0; i < 10; i++)
		area[500 + i] = pattern(500 + i);
	/* Not wholly inside a map: the kernel's, which finds nothing there. */
	NST_EQ(dma_read(child, &maps, &past_end, 1, 0, buf, 4), -EFAULT);
	NST_EQ(dma_read(child, NULL, &s[0], 1, 0, buf, 200), -EFAULT);
}

/*
 * A page of a shared buffer that the kernel cannot give when the NIC
 * touches it raises SIGBUS (here the memfd ends inside the NIC's mapping;
 * in the NIC, a memfd's page the kernel cannot account under strict
 * overcommit): the transfer fails with -EFAULT, like one the kernel
 * refuses, and the NIC goes on.  The pieces before the page are copied.
 */
static void test_shared_buffer_page_missing(void)
{
	const long page = sysconf(_SC_PAGESIZE);
	int fd = memfd_create("nst-dma", MFD_CLOEXEC);
	unsigned char *p, buf[64];
	uint64_t copied = 0;
	struct dma_map map;
	struct dma_maps maps = {.map = &map, .n = 1, .copied = &copied};
	struct dma_seg in_first = {.va = 4096, .len = 16};
	struct dma_seg in_second = {.va = 4096 + (uint64_t)page + 8, .len = sizeof(buf)};
	int status = 0;
	pid_t pid;

	NST_REQUIRE(fd >= 0);
	NST_REQUIRE_EQ(ftruncate(fd, 2 * page), 0);
	p = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	NST_REQUIRE(p != MAP_FAILED);
	map = (struct dma_map){.va = 4096, .len = 2 * (uint64_t)page, .ptr = p};
	NST_REQUIRE_EQ(ftruncate(fd, page), 0);
	memset(buf, 0x42, sizeof(buf));
	NST_EQ(dma_write(child, &maps, &in_second, 1, 0, buf, sizeof(buf)), -EFAULT);
	NST_EQ(dma_read(child, &maps, &in_second, 1, 0, buf, sizeof(buf)), -EFAULT);
	/* Twice: the first SIGBUS left the guard as it was. */
	NST_EQ(dma_read(child, &maps, &in_second, 1, 0, buf, sizeof(buf)), -EFAULT);
	NST_EQ(dma_write(child, &maps, &in_first, 1, 0, buf, 16), 0);
	NST_EQ(p[15], 0x42);
	/* A SIGBUS outside the copies still ends the process, as before. */
	pid = fork();
	NST_REQUIRE(pid >= 0);
	if (pid == 0) {
		((volatile unsigned char *)p)[page + 1] = 1;
		_exit(0);
	}
	NST_REQUIRE_EQ(waitpid(pid, &status, 0), pid);
	/* (Under a sanitizer, its handler was there before: it reports the
	 * SIGBUS and exits with an error.) */
	NST_CHECK_((WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS) ||
		       (WIFEXITED(status) && WEXITSTATUS(status) != 0),
		   CU_FALSE, "the child ended with status 0x%x, not by its SIGBUS", status);
	NST_EQ(munmap(p, 2 * (size_t)page), 0);
	close(fd);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"read_one_segment", test_read_one_segment},
	    {"scatter_list_at_every_offset", test_scatter_list_at_every_offset},
	    {"shared_buffers", test_shared_buffers},
	    {"shared_buffer_page_missing", test_shared_buffer_page_missing},
	    {"write_lands_in_the_host", test_write_lands_in_the_host},
	    {"more_segments_than_one_call", test_more_segments_than_one_call},
	    {"out_of_range_and_unmapped", test_out_of_range_and_unmapped},
	    {"host_gone", test_host_gone},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "dma", tests, init, clean);
}

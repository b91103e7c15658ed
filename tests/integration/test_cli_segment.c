/*
 * The nicsim tool facing a fabric segment that another process scribbled
 * on, and outputs it cannot write: `nicsim link show` shows a link
 * configuration out of range as invalid, never as a working "up" link, and
 * counters that cannot be as invalid, saying what is wrong; `nicsim
 * capture -w` to a file it cannot write or create says so once and fails
 * cleanly.
 *
 * The fabric is created by the test itself (fab_create, no NIC runs), in a
 * private temporary directory.
 */
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fab.h"
#include "fab_addr.h"
#include "fab_seg.h"
#include "nstest.h"

#define RUN_MS 30000 /* bound on one nicsim command */
#define DIR_MAX 512
#define A_ADDR "198.18.0.1"
#define B_ADDR "198.18.0.2"

static char tmp[256];
static char out[65536];
static int dir_no;

static int nicsim_run(const char *const *args)
{
	char bin[PATH_MAX];

	snprintf(bin, sizeof(bin), "%s", nst_bin("nicsim"));
	return nst_run_shown(bin, "nicsim", args, out, sizeof(out), RUN_MS);
}

#define NICSIM(...) nicsim_run((const char *const[]){__VA_ARGS__, NULL})
#define OUT_HAS(text) NST_CHECK_(strstr(out, (text)) != NULL, CU_FALSE, "output has \"%s\"", (text))
#define OUT_LACKS(text) \
	NST_CHECK_(strstr(out, (text)) == NULL, CU_FALSE, "output lacks \"%s\"", (text))

/* Occurrences of text in out. */
static int out_count(const char *text)
{
	int n = 0;

	for (const char *p = out; (p = strstr(p, text)); p += strlen(text))
		n++;
	return n;
}

/* A new directory holding a fabric with ports A and B bound; its path in
 * dir.  No NIC runs on it. */
static void make_fabric(char *dir, size_t size)
{
	uint32_t addrs[2];
	struct fab_config cfg = {.max_ports = 8, .frames = 1024, .seed = 5, .naddrs = 2};

	NST_REQUIRE_EQ(fab_addr_parse(A_ADDR, &addrs[0]), 0);
	NST_REQUIRE_EQ(fab_addr_parse(B_ADDR, &addrs[1]), 0);
	cfg.addrs = addrs;
	snprintf(dir, size, "%s/f%d", tmp, ++dir_no);
	NST_REQUIRE_EQ(mkdir(dir, 0700), 0);
	NST_REQUIRE_EQ(fab_create(dir, &cfg), 0);
}

/* The segment of dir, mapped shared (munmap seg_size bytes when done). */
static struct fab_seg_hdr *map_segment(const char *dir, size_t *size)
{
	char path[DIR_MAX + 32];
	struct stat st;
	void *p;
	int fd;

	snprintf(path, sizeof(path), "%s/" FAB_SEG_FILE, dir);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return NULL;
	*size = (size_t)st.st_size;
	return p;
}

/* The link from the port of address src to the port of dst. */
static struct fab_seg_link *link_of(struct fab_seg_hdr *h, const char *src, const char *dst)
{
	struct fab_seg_port *ports = (void *)((char *)h + h->ports_off);
	uint32_t s = UINT32_MAX, d = UINT32_MAX, a, b;

	if (fab_addr_parse(src, &a) || fab_addr_parse(dst, &b))
		return NULL;
	for (uint32_t i = 0; i < h->max_ports; i++) {
		if (ports[i].addr == a)
			s = i;
		if (ports[i].addr == b)
			d = i;
	}
	if (s == UINT32_MAX || d == UINT32_MAX)
		return NULL;
	return (void *)((char *)h + h->links_off + ((size_t)s * h->max_ports + d) * h->link_size);
}

/* A new fabric (its directory in dir, DIR_MAX bytes) with its segment
 * mapped in *h (munmap *size bytes when done): the link from src to dst
 * in it, for a test to scribble on. */
static struct fab_seg_link *fabric_link(char *dir, const char *src, const char *dst,
					struct fab_seg_hdr **h, size_t *size)
{
	struct fab_seg_link *l;

	make_fabric(dir, DIR_MAX);
	*h = map_segment(dir, size);
	NST_REQUIRE(*h != NULL);
	l = link_of(*h, src, dst);
	NST_REQUIRE(l != NULL);
	return l;
}

static int suite_init(void)
{
	return nst_tmpdir(tmp, sizeof(tmp), "clseg") ? -1 : 0;
}

static int suite_clean(void)
{
	if (tmp[0])
		nst_rmtree(tmp);
	return 0;
}

/* ---- link show ------------------------------------------------------------------- */

/* A configuration out of range shows as invalid, naming the value, and
 * never as "up"; the other links are shown as usual. */
static void test_scribbled_config_invalid(void)
{
	struct fab_seg_hdr *h;
	struct fab_seg_link *l;
	char dir[DIR_MAX];
	size_t size = 0;
	uint32_t bad = 3000000000u;
	int rc;

	l = fabric_link(dir, A_ADDR, B_ADDR, &h, &size);
	memcpy((char *)l->cfg + offsetof(struct fab_link_config, loss_ppb), &bad, sizeof(bad));

	rc = NICSIM("--dir", dir, "link", "show");
	NST_EQ(rc, 0);
	OUT_HAS("link " A_ADDR " -> " B_ADDR ": configuration invalid: loss_ppb 3000000000 is "
		"over its limit 1000000000");
	OUT_LACKS("link " A_ADDR " -> " B_ADDR ": up");
	OUT_HAS("link " B_ADDR " -> " A_ADDR ": up");

	rc = NICSIM("--dir", dir, "link", "show", "--json");
	NST_EQ(rc, 0);
	OUT_HAS("\"invalid\":[\"configuration: loss_ppb 3000000000 is over its limit");
	OUT_HAS("\"config\":null");

	/* `link set ... clear` rewrites it. */
	rc = NICSIM("--dir", dir, "link", "set", A_ADDR, B_ADDR, "clear");
	NST_EQ(rc, 0);
	rc = NICSIM("--dir", dir, "link", "show");
	NST_EQ(rc, 0);
	OUT_HAS("link " A_ADDR " -> " B_ADDR ": up");
	OUT_LACKS("invalid");
	munmap(h, size);
}

/* Counters that cannot be show as invalid, saying why. */
static void test_scribbled_counters_invalid(void)
{
	struct fab_seg_hdr *h;
	struct fab_seg_link *l;
	char dir[DIR_MAX];
	size_t size = 0;
	int rc;

	l = fabric_link(dir, B_ADDR, A_ADDR, &h, &size);
	l->tx.frames = 3;
	l->tx.bytes = 4ull * FAB_SLOT_BYTES;
	l->tx.dropped_loss = UINT64_MAX;
	l->prod = l->cons + h->ring_depth + 5;

	rc = NICSIM("--dir", dir, "link", "show");
	NST_EQ(rc, 0);
	OUT_HAS("counters invalid: dropped_loss 18446744073709551615 is more than the frames "
		"offered (3)");
	OUT_HAS("counters invalid: bytes");
	OUT_HAS("counters invalid: queued: ring positions producer");
	rc = NICSIM("--dir", dir, "link", "show", "--json");
	NST_EQ(rc, 0);
	OUT_HAS("\"invalid\":[\"dropped_loss 18446744073709551615 is more than");
	munmap(h, size);
}

/* ---- capture -w ------------------------------------------------------------------- */

/* An output that cannot be written or created: one message, exit 1. */
static void test_capture_output_errors_once(void)
{
	char dir[DIR_MAX];
	int rc;

	make_fabric(dir, sizeof(dir));
	rc = NICSIM("capture", "--dir", dir, "-w", "/proc/version", "--count", "1");
	NST_EQ(rc, 1);
	NST_EQ(out_count("cannot write /proc/version"), 1);

	rc = NICSIM("capture", "--dir", dir, "-w", "/nonexistent/x.pcapng", "--count", "1");
	NST_EQ(rc, 1);
	NST_EQ(out_count("cannot create /nonexistent/x.pcapng"), 1);

	rc = NICSIM("capture", "--dir", dir, "-w", "/nonexistent/x.pcap", "--count", "1");
	NST_EQ(rc, 1);
	NST_EQ(out_count("cannot create /nonexistent/x.pcap"), 1);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"scribbled_config_invalid", test_scribbled_config_invalid},
	    {"scribbled_counters_invalid", test_scribbled_counters_invalid},
	    {"capture_output_errors_once", test_capture_output_errors_once},
	    {NULL, NULL},
	};

	/* These tests look at captures' failures: none of the test harness's. */
	unsetenv("NICSIM_CAPTURE");
	return nst_main(argc, argv, "cli_segment", tests, suite_init, suite_clean);
}

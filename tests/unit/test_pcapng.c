/*
 * Unit tests of the tool's pcapng writer (nicsim/tool/include/pcapng.h):
 * every block it writes checked by a block parser written here and by
 * libpcap reading the file back, and write errors reported.
 */
#include <pcap/pcap.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nstest.h"
#include "pcapng.h"

static char tmp[256];

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

/* Options of a block body from p to end: find code's value.  Also checks
 * that the options are well formed and end with opt_endofopt. */
static const uint8_t *find_opt(const uint8_t *p, const uint8_t *end, uint16_t code, uint16_t *len)
{
	const uint8_t *found = NULL;
	uint16_t c, l;

	while (p + 4 <= end) {
		memcpy(&c, p, 2);
		memcpy(&l, p + 2, 2);
		if (c == 0) {
			NST_EQ(l, 0);
			NST_TRUE(p + 4 == end);
			return found;
		}
		NST_REQUIRE(p + 4 + l <= end);
		if (c == code) {
			found = p + 4;
			*len = l;
		}
		p += 4 + ((l + 3u) & ~3u);
	}
	NST_TRUE(false); /* no opt_endofopt */
	return NULL;
}

static void test_pcapng_writer(void)
{
	static uint8_t frame[300];
	char path[600], errbuf[PCAP_ERRBUF_SIZE];
	const char *comment = "nicsim: dropped (loss rule)";
	struct pcap_pkthdr *ph;
	const u_char *data;
	uint8_t *file;
	uint16_t olen;
	const uint8_t *opt;
	size_t size, off, blocks = 0, pkts = 0;
	pcap_t *pc;
	FILE *f;
	long n;

	nst_fill(frame, sizeof(frame), 9);
	snprintf(path, sizeof(path), "%s/w.pcapng", tmp);
	f = fopen(path, "w+");
	NST_REQUIRE(f != NULL);
	NST_EQ(pcapng_begin(f, "test"), 0);
	NST_EQ(pcapng_interface(f, "nicsim fabric x", 262144), 0);
	NST_EQ(pcapng_packet(f, &(struct pcapng_pkt){.ts_ns = 1700000000123456789ull,
						     .data = frame,
						     .caplen = 61,
						     .len = 61}),
	       0);
	NST_EQ(pcapng_packet(f, &(struct pcapng_pkt){.ts_ns = 1700000000123456790ull,
						     .data = frame,
						     .caplen = 100,
						     .len = 300,
						     .flags = PCAPNG_CRC_ERROR,
						     .dropcount = 7,
						     .comment = comment}),
	       0);
	NST_EQ(pcapng_stats(f, 0, 1, 2, 12, 7, 2), 0);
	NST_EQ(fflush(f), 0);
	n = ftell(f);
	NST_REQUIRE(n > 0);
	size = (size_t)n;
	file = malloc(size);
	NST_REQUIRE(file != NULL);
	rewind(f);
	NST_REQUIRE_EQ(fread(file, 1, size, f), size);
	fclose(f);

	/* Every block: length a multiple of 4, the same at both ends. */
	for (off = 0; off + 12 <= size; blocks++) {
		uint32_t type = rd32(file + off), len = rd32(file + off + 4);
		const uint8_t *b = file + off;

		NST_REQUIRE(len >= 12 && len % 4 == 0 && off + len <= size);
		NST_EQ(rd32(b + len - 4), len);
		if (type == 0x0a0d0d0au) {
			NST_EQ_U(rd32(b + 8), 0x1a2b3c4du);
			NST_EQ(rd64(b + 16), UINT64_MAX);
			opt = find_opt(b + 24, b + len - 4, 4, &olen);
			NST_TRUE(opt && olen == 4 && !memcmp(opt, "test", 4));
		} else if (type == 1) {
			NST_EQ(rd32(b + 8) & 0xffff, 1); /* Ethernet */
			NST_EQ(rd32(b + 12), 262144);
			opt = find_opt(b + 16, b + len - 4, 9, &olen);
			NST_TRUE(opt && olen == 1 && opt[0] == 9);
			opt = find_opt(b + 16, b + len - 4, 2, &olen);
			NST_TRUE(opt && olen == 15 && !memcmp(opt, "nicsim fabric x", 15));
		} else if (type == 6) {
			uint32_t cap = rd32(b + 20);
			uint64_t ts = (uint64_t)rd32(b + 12) << 32 | rd32(b + 16);
			const uint8_t *o = b + 28 + ((cap + 3) & ~3u);

			NST_EQ(rd32(b + 8), 0);
			NST_EQ(memcmp(b + 28, frame, cap), 0);
			if (pkts++ == 0) {
				NST_EQ(ts, 1700000000123456789ull);
				NST_EQ(cap, 61);
				NST_TRUE(o == b + len - 4); /* no options at all */
			} else {
				NST_EQ(cap, 100);
				NST_EQ(rd32(b + 24), 300);
				opt = find_opt(o, b + len - 4, 1, &olen);
				NST_TRUE(opt && olen == strlen(comment) &&
					 !memcmp(opt, comment, olen));
				opt = find_opt(o, b + len - 4, 2, &olen);
				NST_TRUE(opt && olen == 4 && rd32(opt) == PCAPNG_CRC_ERROR);
				opt = find_opt(o, b + len - 4, 4, &olen);
				NST_TRUE(opt && olen == 8 && rd64(opt) == 7);
			}
		} else if (type == 5) {
			opt = find_opt(b + 20, b + len - 4, 4, &olen);
			NST_TRUE(opt && rd64(opt) == 12);
			opt = find_opt(b + 20, b + len - 4, 5, &olen);
			NST_TRUE(opt && rd64(opt) == 7);
			opt = find_opt(b + 20, b + len - 4, 6, &olen);
			NST_TRUE(opt && rd64(opt) == 2);
		} else {
			NST_TRUE(false);
		}
		off += len;
	}
	NST_EQ(off, size);
	NST_EQ(blocks, 5);
	NST_EQ(pkts, 2);
	free(file);

	/* libpcap reads it back, nanoseconds intact. */
	pc = pcap_open_offline_with_tstamp_precision(path, PCAP_TSTAMP_PRECISION_NANO, errbuf);
	NST_REQUIRE(pc != NULL);
	NST_EQ(pcap_datalink(pc), DLT_EN10MB);
	NST_REQUIRE_EQ(pcap_next_ex(pc, &ph, &data), 1);
	NST_EQ(ph->ts.tv_sec, 1700000000);
	NST_EQ(ph->ts.tv_usec, 123456789);
	NST_EQ(ph->caplen, 61);
	NST_EQ(memcmp(data, frame, 61), 0);
	NST_REQUIRE_EQ(pcap_next_ex(pc, &ph, &data), 1);
	NST_EQ(ph->caplen, 100);
	NST_EQ(ph->len, 300);
	NST_EQ(pcap_next_ex(pc, &ph, &data), PCAP_ERROR_BREAK);
	pcap_close(pc);
}

static void test_pcapng_write_error(void)
{
	FILE *f = fopen("/dev/full", "w");
	uint8_t frame[64] = {0};
	int rc = 0;

	NST_REQUIRE(f != NULL);
	setvbuf(f, NULL, _IONBF, 0);
	rc = pcapng_begin(f, "x");
	NST_TRUE(rc < 0);
	rc = pcapng_packet(f, &(struct pcapng_pkt){.data = frame, .caplen = 64, .len = 64});
	NST_TRUE(rc < 0);
	fclose(f);
}

static int suite_init(void)
{
	return nst_tmpdir(tmp, sizeof(tmp), "pcapng") == 0 ? 0 : -1;
}

static int suite_clean(void)
{
	nst_rmtree(tmp);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"writer", test_pcapng_writer},
	    {"write_error", test_pcapng_write_error},
	    {NULL, NULL},
	};
	const struct nst_suite suite = {
	    .name = "pcapng",
	    .tests = tests,
	    .init = suite_init,
	    .clean = suite_clean,
	};

	return nst_run_suite(argc, argv, &suite);
}

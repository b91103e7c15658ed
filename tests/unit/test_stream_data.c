/*
 * Unit tests of nicsim-stream's verifiable data (provider/switch/
 * stream_data.h): what a message holds is fixed (a client and a server of
 * different builds agree on it), every message of every direction and
 * seed differs, sdata_check finds a damaged byte at every offset and says
 * what it held and should hold, and the checksum sees reordering and
 * duplication, within a message and between messages.
 */
#include <stdlib.h>
#include <string.h>

#include "nstest.h"
#include "stream_data.h"

/* The first message of seed 1 to the server, and message 7 of seed 1 to the
 * client, 12 bytes each: written down once, so that the generator cannot
 * change without the peers of older builds failing to check. */
static void test_known_bytes(void)
{
	static const uint8_t first[12] = {0xea, 0x9e, 0x62, 0x50, 0xa5, 0x93,
					  0xed, 0x62, 0x18, 0x8a, 0x8e, 0xaf};
	static const uint8_t seventh[12] = {0xa4, 0x16, 0x00, 0x84, 0x07, 0x1f,
					    0xc8, 0xdf, 0x04, 0xa4, 0x30, 0x68};
	uint8_t b[12];

	sdata_fill(b, sizeof(b), 1, SDATA_TO_SERVER, 0);
	for (size_t i = 0; i < sizeof(b); i++)
		NST_EQ_U(b[i], first[i]);
	sdata_fill(b, sizeof(b), 1, SDATA_TO_CLIENT, 7);
	for (size_t i = 0; i < sizeof(b); i++)
		NST_EQ_U(b[i], seventh[i]);
}

/* A shorter message is the start of a longer one, and every length checks
 * and sums the same way through all three functions. */
static void test_fill_check_sum(void)
{
	static uint8_t big[4099], b[4099];
	struct sdata_diff d;
	uint64_t sum;

	sdata_fill(big, sizeof(big), 42, SDATA_TO_SERVER, 3);
	for (size_t len = 0; len <= sizeof(b); len += len < 40 ? 1 : 509) {
		uint64_t filled;

		memset(b, 0x5a, sizeof(b));
		filled = sdata_fill(b, len, 42, SDATA_TO_SERVER, 3);
		NST_TRUE(memcmp(b, big, len) == 0);
		if (len < sizeof(b))
			NST_EQ_U(b[len], 0x5a); /* nothing written past len */
		NST_EQ(sdata_check(b, len, 42, SDATA_TO_SERVER, 3, &sum, &d), 0);
		NST_EQ_U(sum, filled);
		NST_EQ_U(sdata_sum(b, len), filled);
	}
}

/* Each byte damaged in turn is found where it is, with both values. */
static void test_every_offset(void)
{
	uint8_t b[37];
	struct sdata_diff d;
	uint64_t sum, good = sdata_fill(b, sizeof(b), 9, SDATA_TO_CLIENT, 1000);

	for (size_t off = 0; off < sizeof(b); off++) {
		uint8_t want = b[off];

		b[off] ^= (uint8_t)(1u << (off % 8));
		memset(&d, 0, sizeof(d));
		NST_EQ(sdata_check(b, sizeof(b), 9, SDATA_TO_CLIENT, 1000, &sum, &d), 1);
		NST_EQ(d.off, off);
		NST_EQ_U(d.got, b[off]);
		NST_EQ_U(d.want, want);
		NST_NE(sum, good);
		b[off] = want;
	}
	/* Two damaged bytes: the first is reported. */
	b[30] ^= 1;
	b[5] ^= 1;
	NST_EQ(sdata_check(b, sizeof(b), 9, SDATA_TO_CLIENT, 1000, &sum, &d), 1);
	NST_EQ(d.off, 5);
}

/* Another message, direction or seed holds other bytes from the start: a
 * stale buffer or a message delivered twice does not pass. */
static void test_messages_differ(void)
{
	uint8_t b[64];
	struct sdata_diff d;
	uint64_t sum;

	sdata_fill(b, sizeof(b), 5, SDATA_TO_SERVER, 10);
	NST_EQ(sdata_check(b, sizeof(b), 5, SDATA_TO_SERVER, 11, &sum, &d), 1);
	NST_LT(d.off, 8);
	NST_EQ(sdata_check(b, sizeof(b), 5, SDATA_TO_CLIENT, 10, &sum, &d), 1);
	NST_LT(d.off, 8);
	NST_EQ(sdata_check(b, sizeof(b), 6, SDATA_TO_SERVER, 10, &sum, &d), 1);
	NST_LT(d.off, 8);
	/* Seed 0 and sequence 0 still make data, not zeros. */
	sdata_fill(b, sizeof(b), 0, SDATA_TO_SERVER, 0);
	NST_TRUE(b[0] | b[1] | b[2] | b[3] | b[4] | b[5] | b[6] | b[7]);
}

/* The checksum depends on order, within a message and between messages,
 * and on the length (trailing zeros count). */
static void test_checksum_order(void)
{
	uint8_t b[32], swapped[32], zeros[9] = {0};
	uint64_t s1, s2, a, b2;

	sdata_fill(b, sizeof(b), 3, SDATA_TO_SERVER, 0);
	memcpy(swapped, b + 8, 8);
	memcpy(swapped + 8, b, 8);
	memcpy(swapped + 16, b + 16, 16);
	NST_NE(sdata_sum(b, sizeof(b)), sdata_sum(swapped, sizeof(swapped)));
	NST_NE(sdata_sum(zeros, 8), sdata_sum(zeros, 9));
	a = sdata_fill(b, sizeof(b), 3, SDATA_TO_SERVER, 0);
	b2 = sdata_fill(b, sizeof(b), 3, SDATA_TO_SERVER, 1);
	s1 = sdata_fold(sdata_fold(0, a), b2);
	s2 = sdata_fold(sdata_fold(0, b2), a);
	NST_NE(s1, s2);
	NST_NE(sdata_fold(sdata_fold(0, a), a), sdata_fold(0, a));
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"known_bytes", test_known_bytes},       {"fill_check_sum", test_fill_check_sum},
	    {"every_offset", test_every_offset},     {"messages_differ", test_messages_differ},
	    {"checksum_order", test_checksum_order}, {NULL, NULL},
	};

	return nst_main(argc, argv, "stream_data", tests, NULL, NULL);
}

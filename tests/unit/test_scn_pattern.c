/*
 * The scenario data patterns (scn_pattern.h) are the same on every machine:
 * fixed bytes for fixed seeds (random 0 is splitmix64's published first
 * output for seed 0), any slice equal to the same bytes of the whole, and
 * the check naming the first byte that differs.
 */
#include <errno.h>
#include <string.h>

#include "nstest.h"
#include "scn_pattern.h"

static void test_fixed_bytes(void)
{
	static const uint8_t seq7[16] = {0, 0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0};
	static const uint8_t rnd0[8] = {0xaf, 0xcd, 0x1d, 0x7b, 0x39, 0xa8, 0x20, 0xe2};
	struct scn_pattern p;
	uint8_t b[16];

	NST_EQ(scn_pattern_from_name("seq", 7, &p), 0);
	scn_pattern_fill(&p, 0, b, sizeof(b));
	NST_TRUE(!memcmp(b, seq7, sizeof(seq7)));
	NST_EQ(scn_pattern_byte(&p, 8 * 0x1234 + 1), 0x12);
	NST_EQ(scn_pattern_from_name("random", 0, &p), 0);
	scn_pattern_fill(&p, 0, b, 8);
	for (int i = 0; i < 8; i++)
		NST_EQ_U(b[i], rnd0[i]);
	NST_EQ(scn_pattern_from_name("byte", 0xab, &p), 0);
	NST_EQ(scn_pattern_byte(&p, 99), 0xab);
	NST_EQ(scn_pattern_from_name("zero", 5, &p), 0);
	NST_EQ(scn_pattern_byte(&p, 3), 0);
	NST_EQ(scn_pattern_from_name("byte", 256, &p), -EINVAL);
	NST_EQ(scn_pattern_from_name("sequence", 1, &p), -EINVAL);
	NST_TRUE(!strcmp(scn_pattern_name(SCN_PATTERN_RANDOM), "random"));
}

/* Any slice, at any start, is the same bytes as the whole pattern's. */
static void test_slices_agree(void)
{
	struct scn_pattern p;
	uint8_t whole[300], part[300];

	for (int kind = 0; kind < 4; kind++) {
		NST_EQ(scn_pattern_from_name(scn_pattern_name(kind), 42, &p), 0);
		scn_pattern_fill(&p, 0, whole, sizeof(whole));
		for (size_t first = 0; first < 20; first++) {
			size_t len = sizeof(whole) - first - (first % 7);

			memset(part, 0x5a, sizeof(part));
			scn_pattern_fill(&p, first, part, len);
			NST_EQ(memcmp(part, whole + first, len), 0);
			NST_EQ(scn_pattern_check(&p, first, whole + first, len), len);
			for (size_t i = 0; i < len; i++)
				NST_EQ(scn_pattern_byte(&p, first + i), whole[first + i]);
		}
	}
}

static void test_check_names_the_first_difference(void)
{
	struct scn_pattern p;
	uint8_t b[2000];

	NST_EQ(scn_pattern_from_name("random", 9, &p), 0);
	scn_pattern_fill(&p, 3, b, sizeof(b));
	NST_EQ(scn_pattern_check(&p, 3, b, sizeof(b)), sizeof(b));
	b[1500] ^= 1;
	b[1700] ^= 1;
	NST_EQ(scn_pattern_check(&p, 3, b, sizeof(b)), 1500);
	/* Another seed differs at once; so does a shifted slice. */
	NST_EQ(scn_pattern_check(&p, 4, b, 100), 0);
	NST_EQ(scn_pattern_from_name("seq", 9, &p), 0);
	scn_pattern_fill(&p, 0, b, 64);
	NST_LT(scn_pattern_check(&p, 8, b, 64), 64);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"fixed_bytes", test_fixed_bytes},
	    {"slices_agree", test_slices_agree},
	    {"check_names_the_first_difference", test_check_names_the_first_difference},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "scn_pattern", tests, NULL, NULL);
}

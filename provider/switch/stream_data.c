/*
 * stream_data.c: nicsim-stream's verifiable data (stream_data.h).  A
 * message is a sequence of 64-bit words, little-endian whatever the host,
 * the last one cut short when the length is not a multiple of 8.
 */
#include "stream_data.h"

#include <string.h>

#define GOLDEN 0x9e3779b97f4a7c15ull

static uint64_t splitmix64(uint64_t x)
{
	x += GOLDEN;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* The generator's first state for one message: never 0, which xorshift
 * would keep. */
static uint64_t first_state(uint64_t seed, enum sdata_dir dir, uint64_t seq)
{
	uint64_t x = splitmix64(splitmix64(seed ^ ((uint64_t)dir << 63)) ^ (seq * GOLDEN));

	return x ? x : GOLDEN;
}

static uint64_t next_word(uint64_t *x)
{
	*x ^= *x >> 12;
	*x ^= *x << 25;
	*x ^= *x >> 27;
	return *x * 0x2545f4914f6cdd1dull;
}

static void put_le64(uint8_t *p, uint64_t v, size_t n)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	memcpy(p, &v, n);
#else
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
#endif
}

static uint64_t get_le64(const uint8_t *p, size_t n)
{
	uint64_t v = 0;

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	memcpy(&v, p, n);
#else
	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
#endif
	return v;
}

/* Fletcher's two sums over words, then folded with the length, so that
 * trailing zero bytes still count. */
struct sum {
	uint64_t a, b;
};

static void sum_word(struct sum *s, uint64_t w)
{
	s->a += w;
	s->b += s->a;
}

static uint64_t sum_end(const struct sum *s, size_t len)
{
	return splitmix64(s->a ^ splitmix64(s->b ^ (uint64_t)len));
}

uint64_t sdata_fill(void *buf, size_t len, uint64_t seed, enum sdata_dir dir, uint64_t seq)
{
	uint64_t x = first_state(seed, dir, seq);
	struct sum s = {0, 0};
	uint8_t *p = buf;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		uint64_t w = next_word(&x);

		put_le64(p + i, w, 8);
		sum_word(&s, w);
	}
	if (i < len) {
		uint64_t w = next_word(&x) & (~0ull >> (8 * (8 - (len - i))));

		put_le64(p + i, w, len - i);
		sum_word(&s, w);
	}
	return sum_end(&s, len);
}

/* The first byte of len (at most 8) where got and want differ. */
static size_t first_diff(uint64_t got, uint64_t want)
{
	size_t i = 0;

	while (((got ^ want) >> (8 * i) & 0xff) == 0)
		i++;
	return i;
}

int sdata_check(const void *buf, size_t len, uint64_t seed, enum sdata_dir dir, uint64_t seq,
		uint64_t *sum, struct sdata_diff *diff)
{
	uint64_t x = first_state(seed, dir, seq);
	const uint8_t *p = buf;
	struct sum s = {0, 0};
	int differs = 0;
	size_t i;

	for (i = 0; i < len; i += 8) {
		size_t n = len - i < 8 ? len - i : 8;
		uint64_t want = next_word(&x), got = get_le64(p + i, n);

		if (n < 8)
			want &= ~0ull >> (8 * (8 - n));
		sum_word(&s, got);
		if (got != want && !differs) {
			size_t k = first_diff(got, want);

			differs = 1;
			diff->off = i + k;
			diff->got = (uint8_t)(got >> (8 * k));
			diff->want = (uint8_t)(want >> (8 * k));
		}
	}
	*sum = sum_end(&s, len);
	return differs;
}

uint64_t sdata_sum(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	struct sum s = {0, 0};

	for (size_t i = 0; i < len; i += 8)
		sum_word(&s, get_le64(p + i, len - i < 8 ? len - i : 8));
	return sum_end(&s, len);
}

uint64_t sdata_fold(uint64_t running, uint64_t msg_sum)
{
	return splitmix64(running ^ splitmix64(msg_sum));
}

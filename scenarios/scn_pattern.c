/*
 * The data patterns of scenarios (scn_pattern.h): each byte a function of
 * the pattern and of its index alone.
 */
#include "scn_pattern.h"

#include <errno.h>
#include <string.h>

/* The 8-byte word k of a seq or random pattern. */
static uint64_t word(const struct scn_pattern *p, uint64_t k)
{
	uint64_t z;

	if (p->kind == SCN_PATTERN_SEQ)
		return (p->arg & 0xffffffffu) << 32 | (k & 0xffffffffu);
	z = p->arg + (k + 1) * 0x9e3779b97f4a7c15u; /* splitmix64's (k+1)-th state */
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return z ^ (z >> 31);
}

uint8_t scn_pattern_byte(const struct scn_pattern *p, uint64_t index)
{
	switch (p->kind) {
	case SCN_PATTERN_ZERO: return 0;
	case SCN_PATTERN_BYTE: return (uint8_t)p->arg;
	case SCN_PATTERN_SEQ:
	case SCN_PATTERN_RANDOM: return (uint8_t)(word(p, index / 8) >> (index % 8 * 8));
	}
	return 0;
}

void scn_pattern_fill(const struct scn_pattern *p, uint64_t first, void *buf, size_t len)
{
	uint8_t *b = buf;
	size_t i = 0;

	if (p->kind == SCN_PATTERN_ZERO || p->kind == SCN_PATTERN_BYTE) {
		memset(b, scn_pattern_byte(p, 0), len);
		return;
	}
	/* Byte by byte up to a word boundary of the pattern, then whole words. */
	for (; i < len && (first + i) % 8; i++)
		b[i] = scn_pattern_byte(p, first + i);
	for (; i + 8 <= len; i += 8) {
		uint64_t w = word(p, (first + i) / 8);

		for (unsigned j = 0; j < 8; j++)
			b[i + j] = (uint8_t)(w >> (j * 8));
	}
	for (; i < len; i++)
		b[i] = scn_pattern_byte(p, first + i);
}

size_t scn_pattern_check(const struct scn_pattern *p, uint64_t first, const void *buf, size_t len)
{
	const uint8_t *b = buf;
	uint8_t want[512];

	for (size_t done = 0; done < len;) {
		size_t n = len - done < sizeof(want) ? len - done : sizeof(want);

		scn_pattern_fill(p, first + done, want, n);
		if (memcmp(want, b + done, n))
			for (size_t i = 0; i < n; i++)
				if (want[i] != b[done + i])
					return done + i;
		done += n;
	}
	return len;
}

static const char *const names[] = {
    [SCN_PATTERN_ZERO] = "zero",
    [SCN_PATTERN_BYTE] = "byte",
    [SCN_PATTERN_SEQ] = "seq",
    [SCN_PATTERN_RANDOM] = "random",
};

int scn_pattern_from_name(const char *name, uint64_t arg, struct scn_pattern *out)
{
	for (unsigned k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		if (strcmp(name, names[k]))
			continue;
		if (k == SCN_PATTERN_BYTE && arg > 255)
			return -EINVAL;
		*out = (struct scn_pattern){.kind = k, .arg = k == SCN_PATTERN_ZERO ? 0 : arg};
		return 0;
	}
	return -EINVAL;
}

const char *scn_pattern_name(enum scn_pattern_kind kind)
{
	return (unsigned)kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "?";
}

/*
 * The data patterns of scenarios: what `fill seq 7` writes into a host
 * agent's buffer and what `expect ... == seq 7` compares with.  The host
 * agent (nicsim-agent) fills buffers with these generators and the runner
 * computes the bytes it expects with the same ones, so both must agree on
 * every machine: each generator is a pure function of its argument and of
 * the byte's index, with no state, no floating point and no dependence on
 * the host's byte order.
 *
 * Index i counts from the start of the range being filled or compared
 * (`buffer x 1MiB fill seq 7` writes byte i of x as seq(7, i)).  Because
 * every byte is a function of its index alone, any slice of a pattern can be
 * computed without the bytes before it: scn_pattern_fill takes the index of
 * its first byte.
 *
 *   zero      every byte 0.
 *   byte B    every byte B (0..255).
 *   seq N     a counter laid out in 8-byte little-endian words: word k (bytes
 *             8k..8k+7) holds (N mod 2^32) << 32 | (k mod 2^32).  In a hex
 *             dump the low half counts 0, 1, 2 ... and the high half names
 *             N, so a misplaced block shows where it came from.
 *   random N  splitmix64 seeded with N: word k (bytes 8k..8k+7, little
 *             endian) is the (k+1)-th output of splitmix64 with state N,
 *             that is mix(N + (k+1) * 0x9e3779b97f4a7c15) where mix(z) is
 *             z ^= z >> 30; z *= 0xbf58476d1ce4e5b9; z ^= z >> 27;
 *             z *= 0x94d049bb133111eb; z ^= z >> 31 (all mod 2^64).
 *
 * The checksum of a range (the agent's `sum`) is the standard CRC-32 of
 * zlib and Ethernet, fab_crc32 (fab_wire.h): crc32("123456789") = 0xcbf43926.
 */
#ifndef SCN_PATTERN_H
#define SCN_PATTERN_H

#include <stddef.h>
#include <stdint.h>

enum scn_pattern_kind {
	SCN_PATTERN_ZERO,
	SCN_PATTERN_BYTE,
	SCN_PATTERN_SEQ,
	SCN_PATTERN_RANDOM,
};

struct scn_pattern {
	enum scn_pattern_kind kind;
	uint64_t arg; /* B for byte (0..255), N for seq and random; 0 for zero */
};

/* Byte index of pattern p. */
uint8_t scn_pattern_byte(const struct scn_pattern *p, uint64_t index);

/* Fill buf[0..len) with bytes first .. first + len - 1 of pattern p. */
void scn_pattern_fill(const struct scn_pattern *p, uint64_t first, void *buf, size_t len);

/*
 * Whether buf[0..len) holds bytes first .. first + len - 1 of p: len if it
 * does, else the offset in buf of the first byte that differs.
 */
size_t scn_pattern_check(const struct scn_pattern *p, uint64_t first, const void *buf, size_t len);

/*
 * The pattern a name and its argument spell ("zero", "byte", "seq",
 * "random"; arg is ignored for zero and must be at most 255 for byte):
 * 0, or -EINVAL for an unknown name or an argument out of range.
 */
int scn_pattern_from_name(const char *name, uint64_t arg, struct scn_pattern *out);

/* The name of a pattern kind ("seq"), or "?" if unknown. */
const char *scn_pattern_name(enum scn_pattern_kind kind);

#endif /* SCN_PATTERN_H */

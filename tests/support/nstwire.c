#include "nstwire.h"

uint32_t nst_crc_reg(uint32_t reg, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		reg ^= p[i];
		for (int bit = 0; bit < 8; bit++)
			reg = (reg & 1u) ? (reg >> 1) ^ 0xedb88320u : reg >> 1;
	}
	return reg;
}

uint32_t nst_crc32(const uint8_t *p, size_t n)
{
	return ~nst_crc_reg(0xffffffffu, p, n);
}

/* Bytes the ICRC covers as all ones: IPv4 TOS (15), TTL (22) and header
 * checksum (24, 25), UDP checksum (40, 41), the BTH's FECN/BECN byte (46). */
static int masked(size_t off)
{
	return off == 15 || off == 22 || off == 24 || off == 25 || off == 40 || off == 41 ||
	       off == 46;
}

uint32_t nst_icrc(const uint8_t *frame, size_t n)
{
	static const uint8_t lrh[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	uint32_t reg = nst_crc_reg(0xffffffffu, lrh, sizeof(lrh));
	uint8_t b;

	/* The LRH's stand-in, then everything after the Ethernet header. */
	for (size_t i = 14; i < n; i++) {
		b = masked(i) ? 0xff : frame[i];
		reg = nst_crc_reg(reg, &b, 1);
	}
	return ~reg;
}

uint32_t nst_wire_icrc(const uint8_t *frame, size_t len)
{
	const uint8_t *p = frame + len - 4;

	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/*
 * Inside the fabric library: what fab_crc.c gives the codec beside the
 * public fab_crc32, fab_crc32_sliced and fab_icrc (fab_wire.h).
 */
#ifndef FAB_CRC_PRIV_H
#define FAB_CRC_PRIV_H

#include <stddef.h>
#include <stdint.h>

#include "fab_wire.h"

/*
 * Bytes of a frame the decoder copies before it looks at any: the longest
 * headers of any opcode.  An even number (udp_csum_ok in fab_wire.c).
 */
#define FAB_HDR_COPY (FAB_HDR_BASE + FAB_EXT_MAX)

/* Little-endian load; compilers turn it into one load on x86. */
static inline uint32_t fab_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/*
 * fab_icrc of a frame whose first hlen bytes (FAB_HDR_COPY, or all of a
 * shorter frame) are taken from hdr, a private copy of them, and the rest
 * from the frame where it lies.  The decoder checks the ICRC this way, so
 * that the headers it goes on to decode are the bytes the ICRC covered.
 */
uint32_t fab_icrc_from_copy(const uint8_t *hdr, size_t hlen, const uint8_t *frame,
			    size_t len_without_icrc);

#endif /* FAB_CRC_PRIV_H */

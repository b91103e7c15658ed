/*
 * Reference checksums for tests, written independently of the code under
 * test (fabric/fab_wire.c): a CRC-32 one bit at a time, and the RoCEv2 ICRC
 * from its definition, with the masked fields found by their absolute
 * offsets in an Ethernet/IPv4/UDP frame rather than through the header
 * structures.
 */
#ifndef NSTWIRE_H
#define NSTWIRE_H

#include <stddef.h>
#include <stdint.h>

/* CRC register update one bit at a time, reflected polynomial 0xedb88320,
 * no inversion: deliberately unlike the slicing-by-8 tables under test. */
uint32_t nst_crc_reg(uint32_t reg, const uint8_t *p, size_t n);

/* The standard CRC-32 (zlib's, Ethernet's) of n bytes. */
uint32_t nst_crc32(const uint8_t *p, size_t n);

/* The ICRC of a frame whose first n bytes (n >= 54) are given, up to and
 * not including its ICRC. */
uint32_t nst_icrc(const uint8_t *frame, size_t n);

/* The ICRC a frame of len bytes carries in its last 4 bytes, least
 * significant byte first. */
uint32_t nst_wire_icrc(const uint8_t *frame, size_t len);

#endif /* NSTWIRE_H */

/*
 * Fabric addresses.  Every NIC on a nicsim fabric has an IPv4 address in
 * 198.18.0.0/15, the block RFC 2544 sets aside for benchmarking network
 * devices, so that nicsim traffic can never be mistaken for a real network's.
 * Addresses are kept in network byte order, as in struct in_addr.
 */
#ifndef FAB_ADDR_H
#define FAB_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FAB_ADDR_NET 0xc6120000u  /* 198.18.0.0, host order */
#define FAB_ADDR_MASK 0xfffe0000u /* /15 */
#define FAB_ADDR_STRLEN 16

/* True if addr (network order) lies in 198.18.0.0/15 and is not the network
 * or broadcast address of that block. */
bool fab_addr_valid(uint32_t addr);

/*
 * Parse a dotted quad into *addr (network order).  Returns 0, -EINVAL if the
 * text is not an IPv4 address, -EADDRNOTAVAIL if it is one outside
 * 198.18.0.0/15.
 */
int fab_addr_parse(const char *text, uint32_t *addr);

/* Format addr into buf (at least FAB_ADDR_STRLEN bytes); returns buf. */
const char *fab_addr_format(uint32_t addr, char *buf, size_t size);

/* The n-th host address, n >= 1: 198.18.0.0 + n (network order), or 0 when
 * n is past the block. */
uint32_t fab_addr_host(uint32_t n);

#endif /* FAB_ADDR_H */

/*
 * Test support over the SPI (ws2san.h): bound sockets, a connected pair
 * across two NICs, and one RDMA operation waited for.  For the test's own
 * process; children use the SPI directly.
 */
#ifndef NSTSPI_H
#define NSTSPI_H

#include <stdbool.h>
#include <stdint.h>

#include "ws2san.h"

/* WSPStartupEx for version 2.2: 0 or the WSA error. */
int nst_spi_startup(void);

/* A socket bound to NIC addr (dotted quad) and port, or INVALID_SOCKET. */
SOCKET nst_spi_bound(const char *addr, uint16_t port);

/*
 * A connected pair: *srv accepted on NIC srv_addr at port, *cli connected
 * from NIC cli_addr.  0, or the WSA error of the side that failed (both
 * sockets are then closed).
 */
int nst_spi_pair(const char *srv_addr, const char *cli_addr, uint16_t port, SOCKET *srv,
		 SOCKET *cli);

/*
 * One RDMA write (or read) of len bytes between the local buffer buf,
 * registered as h, and offset 0 of the peer's descriptor d, waited for:
 * 0, or the WSA error of the call or of its completion.
 */
int nst_spi_rdma(SOCKET s, bool write, void *buf, uint32_t len, HANDLE h,
		 const struct nicsim_rdma_desc *d);

#endif /* NSTSPI_H */

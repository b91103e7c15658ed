/*
 * Test support over the SPI (ws2san.h): bound sockets, a connected pair
 * across two NICs, and one RDMA operation waited for.  For the test's own
 * process; children use the SPI directly.
 */
#ifndef NSTSPI_H
#define NSTSPI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nicsim_provider.h"
#include "ws2san.h"

/* WSPStartupEx for version 2.2: 0 or the WSA error. */
int nst_spi_startup(void);

/* A socket bound to NIC addr (dotted quad) and port, or INVALID_SOCKET. */
SOCKET nst_spi_bound(const char *addr, uint16_t port);

/*
 * A fresh anonymous mapping of len bytes, registered on s with
 * WSPRegisterMemory for local reads and writes (the handle is not kept: the
 * socket's close releases it), or NULL if either step failed.
 */
uint8_t *nst_spi_registered(SOCKET s, size_t len);

/*
 * Wait up to ms for ov to complete without calling the provider, looking at
 * its Internal field every millisecond, as an application polling
 * HasOverlappedIoCompleted() would; the milliseconds it took, or -1.
 */
double nst_spi_ov_wait_memory(const WSAOVERLAPPED *ov, int ms);

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

/*
 * Before each test of a suite that shares NICs through the SPI (nstnic.h):
 * if every running NIC of nics is as it was started, nothing.  Otherwise an
 * earlier test failed and left things behind: close every socket of this
 * process (WSPCleanup), call end_others (if not NULL) to end the suite's
 * other processes, restart each NIC still not back, and start the SPI
 * again.  0, or -EIO if the NICs or the SPI could not be made as they were.
 *
 * Closing sockets completes their pending operations, whose WSAOVERLAPPED
 * structures may have lived in the failed test's stack frames, where the
 * set-up's frames are now: call it from the suite's set-up function through
 * NST_SPI_KNOWN_STATE, which first lays an unused buffer over those frames
 * for the provider's writes to land in.
 */
struct nst_nic;
int nst_spi_known_state(const char *dir, struct nst_nic *nics, size_t n, void (*end_others)(void),
			int timeout_ms);
#define NST_SPI_KNOWN_STATE(rc, dir, nics, n, end_others, timeout_ms)                       \
	do {                                                                                \
		char nst_over_dead_frames_[256 << 10];                                      \
                                                                                            \
		__asm__ __volatile__("" ::"r"(nst_over_dead_frames_) : "memory");           \
		(rc) = nst_spi_known_state((dir), (nics), (n), (end_others), (timeout_ms)); \
	} while (0)

#endif /* NSTSPI_H */

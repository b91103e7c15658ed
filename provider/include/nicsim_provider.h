/*
 * nicsim_provider.h: the documented nicsim extras of the provider library
 * (libnicsimsp), beside the SPI of ws2san.h.
 */
#ifndef NICSIM_PROVIDER_H
#define NICSIM_PROVIDER_H

#include <stdint.h>

#include "ws2san.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Why a connection broke.  A transfer that fails completes with a WSA code
 * (see the data transfer calls in ws2san.h); that code says what kind of
 * thing happened, and this record says which: the NIC's completion status,
 * both ends of the connection, and a sentence naming the refusal and where
 * to look next.  The WSA codes of the NIC's completion statuses:
 *
 *   nic_status (NIC_WC_*, nicsim_abi.h)     wsa_error               what names
 *   LOC_LEN_ERR (1)                         WSAEMSGSIZE             local length error
 *   LOC_QP_OP_ERR (2)                       WSAEINVAL               malformed work request
 *   LOC_PROT_ERR (3)                        WSAEFAULT               local protection error
 *   WR_FLUSH_ERR (4)                        WSA_OPERATION_ABORTED   flushed
 *   BAD_RESP_ERR (5)                        WSAECONNRESET           bad response
 *   REM_INV_REQ_ERR (6)                     WSAECONNRESET           remote invalid request
 *   REM_ACCESS_ERR (7)                      WSAECONNRESET           remote access error
 *   REM_OP_ERR (8)                          WSAECONNRESET           remote operational error
 *   RETRY_EXC_ERR (9)                       WSAECONNABORTED         retry exceeded
 *   RNR_RETRY_EXC_ERR (10)                  WSAECONNABORTED         RNR retry exceeded
 *
 * A remote access error is the peer's NIC refusing the key (stale, forged,
 * deregistered, of another connection), the range or the access right an
 * RDMA WRITE or READ named: the peer's NIC recorded which rule and what the
 * key's entry holds, and `nicsim show faults --nic PEER` lists it with this
 * socket's address and QP as the requester.  A local protection error is
 * this NIC refusing a local buffer: `nicsim show faults --nic LOCAL`.
 * Connections that end without a NIC error have nic_status 0: the peer
 * disconnected (WSAECONNRESET), its connection failed and its provider
 * disconnected (WSAECONNRESET), or this NIC stopped answering (WSAENETDOWN).
 */
struct nicsim_socket_error {
	int32_t wsa_error;   /* the WSA code the failed operation completed with */
	uint32_t nic_status; /* the NIC's completion status (NIC_WC_* in nicsim_abi.h), 0 if none */
	uint32_t local_addr, peer_addr; /* IPv4, network order */
	uint32_t local_qp, peer_qp;
	char what[160]; /* one sentence: which refusal, and where to look next */
};

/*
 * The first error that broke socket s's connection, into *out.  Returns 0
 * (out filled), or a WSA code: WSAENOTSOCK (s is not a socket),
 * WSAEFAULT (out is NULL), WSAENOTCONN (nothing failed yet: the socket is
 * connected and well, or never was connected), WSANOTINITIALISED (before
 * WSPStartupEx).  The record stays until the socket is closed.
 *
 * The same sentence goes to stderr, as "nicsimsp: ..." lines, when the
 * environment variable NICSIM_DEBUG is 1 as the library loads; so do where
 * the provider looked for NICs and why a bind, an attach or a registration
 * failed.  Nothing is printed otherwise.
 */
int nicsim_socket_error(SOCKET s, struct nicsim_socket_error *out);

#ifdef __cplusplus
}
#endif

#endif /* NICSIM_PROVIDER_H */

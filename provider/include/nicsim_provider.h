/*
 * nicsim_provider.h: what libnicsimsp offers beyond the SPI of ws2san.h, the
 * nicsim extras.  Include it after (or instead of) ws2san.h; it needs what
 * ws2san.h needs (the C library's headers) and nothing else.
 *
 * What the library exports: the SPI (the WSP* functions of ws2san.h), the
 * functions below, and ten functions of the C library it interposes: free,
 * realloc, reallocarray, mmap, mmap64, munmap, mremap, madvise, brk and
 * sbrk.  A program linked with libnicsimsp (or running with it in
 * LD_PRELOAD) calls the library's definitions of those ten first; each one
 * drops the registrations covering the memory about to change and then
 * calls the C library's own.  This is the memory monitor of the
 * registration cache: the provider keeps buffers pinned and registered after
 * WSPDeregisterMemory so that registering them again is free, and must let
 * them go before the memory under them is unmapped, freed or replaced, or
 * the NIC would read and write whatever the addresses hold next.  Calls that
 * touch no registered memory pass straight through (a few loads, no lock).
 * NICSIM_CACHE=off in the environment turns caching off: deregistration
 * then releases at once; the interposers stay, and still guard the
 * registrations in use.  docs/registration-cache.md has the details (what
 * the monitor cannot see, and what happens when another library took the
 * names first: caching turns itself off, with one line on stderr).
 *
 * Every symbol the library defines besides these is internal and not
 * exported.
 */
#ifndef NICSIM_PROVIDER_H
#define NICSIM_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

#include "ws2san.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- The registration cache ---------------------------------------------- */

/* Flags of struct nicsim_cache_stats. */
#define NICSIM_CACHE_ON 0x1u      /* unused registrations are kept (cached) */
#define NICSIM_CACHE_MONITOR 0x2u /* the memory monitor sees unmaps */
#define NICSIM_CACHE_FREE 0x4u    /* ... and frees of malloc blocks */

struct nicsim_cache_stats {
	uint32_t flags;         /* NICSIM_CACHE_* */
	uint32_t reserved;      /* 0 */
	uint64_t hits;          /* registrations served without pinning or registering */
	uint64_t misses;        /* registrations that pinned and registered */
	uint64_t evictions;     /* unused entries released: limits, full TPT, pin limit */
	uint64_t invalidations; /* entries dropped because their memory changed */
	uint64_t entries;       /* registrations tracked now, in use or cached */
	uint64_t unused;        /* of which cached and unused */
	uint64_t bytes;         /* bytes the tracked registrations cover */
	uint64_t bytes_pinned;  /* bytes of pages the process has pinned (all NICs) */
};

/*
 * The extras return 0 or a WSA code, as the SPI does: WSANOTINITIALISED
 * (the provider is not started: call them between WSPStartupEx and the last
 * WSPCleanup), WSAEFAULT (a NULL pointer or an empty buffer), WSAENOBUFS (a
 * buffer too small for what it should hold); nicsim_wsa_name() names them.
 */

/*
 * The registration cache's counters, summed over every NIC of this process
 * (docs/registration-cache.md, "Statistics"); `nicsim show hosts` lists the
 * same counters per NIC and process.  0, WSAEFAULT (out is NULL),
 * WSANOTINITIALISED (the provider is not started).
 */
int nicsim_cache_stats(struct nicsim_cache_stats *out);

/* ---- Errors ---------------------------------------------------------------- */

/*
 * Why a connection broke.  A transfer that fails completes with a WSA code
 * (see the data transfer calls in ws2san.h); that code says what kind of
 * thing happened, and this record says which: the NIC's completion status,
 * both ends of the connection, and a sentence naming the refusal and where
 * to look next.  The WSA codes of the NIC's completion statuses
 * (NICSIM_STATUS_*, the values of the NIC's own NIC_WC_* codes):
 *
 *   nic_status (NICSIM_STATUS_*)            wsa_error               what names
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
/* struct nicsim_socket_error.nic_status: the NIC's completion status. */
#define NICSIM_STATUS_NONE 0u /* no NIC error: the connection ended otherwise */
#define NICSIM_STATUS_LOC_LEN_ERR 1u
#define NICSIM_STATUS_LOC_QP_OP_ERR 2u
#define NICSIM_STATUS_LOC_PROT_ERR 3u
#define NICSIM_STATUS_WR_FLUSH_ERR 4u
#define NICSIM_STATUS_BAD_RESP_ERR 5u
#define NICSIM_STATUS_REM_INV_REQ_ERR 6u
#define NICSIM_STATUS_REM_ACCESS_ERR 7u
#define NICSIM_STATUS_REM_OP_ERR 8u
#define NICSIM_STATUS_RETRY_EXC_ERR 9u
#define NICSIM_STATUS_RNR_RETRY_EXC_ERR 10u

struct nicsim_socket_error {
	int32_t wsa_error;   /* the WSA code the failed operation completed with */
	uint32_t nic_status; /* the NIC's completion status (NICSIM_STATUS_*), 0 if none */
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
 * failed.  Nothing is printed otherwise.  A registration refused for a limit
 * of the system (RLIMIT_MEMLOCK, or the kernel's ptrace rules, Yama's
 * ptrace_scope among them, keeping the NIC from this process's memory) says
 * which limit, its value and how to raise it; `nicsim show hosts` shows the
 * last such refusal of each process whether or not NICSIM_DEBUG is set.
 */
int nicsim_socket_error(SOCKET s, struct nicsim_socket_error *out);

/* ---- Messages ----------------------------------------------------------- */

/*
 * The run directory the provider searches for NICs (see WSPStartupEx), as it
 * would resolve it now: for messages such as "no NIC in D".  Works before
 * WSPStartupEx too.  Returns 0, WSAEACCES (buf holds the directory, but the
 * provider refuses to search it: another user owns it or may write to it,
 * or it is not a directory; the provider said why on stderr), WSAEFAULT
 * (buf NULL or size 0), WSAENOBUFS (it does not fit in size bytes: PATH_MAX
 * always suffices), or WSAEINVAL (a relative $NICSIM_DIR and a working
 * directory that cannot be read).
 */
int nicsim_run_dir(char *buf, size_t size);

/*
 * Memory that the provider shares with the NICs (a sealed memfd, mapped here
 * and by each NIC the process uses, now or later): a transfer into or out of
 * it costs each NIC a memcpy, where ordinary memory costs a
 * process_vm_readv or process_vm_writev that pins and unpins every page
 * (docs/transport.md section 7, "Shared buffers": two to three times the
 * bandwidth of large transfers).  Use it as any memory: register it, send
 * from it, receive and RDMA into it.  *buf gets at least len bytes, page
 * aligned and zeroed.  0, WSAEFAULT (buf NULL), WSAEINVAL (len 0 or too
 * large), WSAENOBUFS (no memory), or WSANOTINITIALISED (no WSPStartupEx).
 * Unlike malloc'd memory, a child made by fork shares the buffer.  Each
 * buffer keeps one descriptor open in the process (RLIMIT_NOFILE counts
 * it), and a NIC maps at most 64 buffers, 64 GiB in all, per process: the
 * ones beyond still work, as ordinary memory (NICSIM_DEBUG=1 says which).
 *
 * nicsim_buffer_free gives the buffer back: registrations inside it are
 * dropped as when ordinary memory is unmapped (docs/registration-cache.md),
 * then the NICs drop their maps and the memory goes.  0, or WSAEINVAL (buf
 * is not a buffer nicsim_buffer_alloc returned, or was given back).
 * Unmapping or replacing any part of a buffer otherwise (munmap, mremap,
 * mmap MAP_FIXED) ends it as well: the NICs drop their maps first, whatever
 * the call leaves mapped is the application's to munmap, and
 * nicsim_buffer_free no longer knows the buffer.
 */
int nicsim_buffer_alloc(size_t len, void **buf);
int nicsim_buffer_free(void *buf);

/* Symbolic name of a WSA error code ("WSAEFAULT"), or "WSA error" if unknown. */
const char *nicsim_wsa_name(int wsa_error);

#ifdef __cplusplus
}
#endif

#endif /* NICSIM_PROVIDER_H */

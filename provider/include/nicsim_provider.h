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
 * The registration cache's counters, summed over every NIC of this process
 * (docs/registration-cache.md, "Statistics"); `nicsim show hosts` lists the
 * same counters per NIC and process.  0, -EINVAL (out is NULL), -ENXIO (the
 * provider is not started: call it between WSPStartupEx and the last
 * WSPCleanup).
 */
int nicsim_cache_stats(struct nicsim_cache_stats *out);

/* ---- Messages ----------------------------------------------------------- */

/*
 * The run directory the provider searches for NICs (see WSPStartupEx), as it
 * would resolve it now: for messages such as "no NIC in D".  Returns 0, or
 * -ENAMETOOLONG when it does not fit in size bytes.
 */
int nicsim_run_dir(char *buf, size_t size);

/* Symbolic name of a WSA error code ("WSAEFAULT"), or "WSA error" if unknown. */
const char *nicsim_wsa_name(int wsa_error);

#ifdef __cplusplus
}
#endif

#endif /* NICSIM_PROVIDER_H */

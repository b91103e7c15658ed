/*
 * A writer of the pcapng format (the IETF draft "PCAP Next Generation
 * Dump File Format"), in this machine's byte order, one section, for
 * Ethernet frames with nanosecond timestamps: `nicsim capture -w x.pcapng`.
 * libpcap 1.10 reads pcapng but cannot write it; nicsim needs it for what
 * plain pcap cannot hold per frame: a comment (opt_comment) with the fault
 * marks, the flags word (epb_flags) with the CRC-error bit for corrupted
 * frames, and the count of frames not captured (epb_dropcount).
 *
 * Each function writes whole blocks with stdio and returns 0, or -EIO (or
 * the errno stdio left) when the stream reported an error.
 */
#ifndef NICSIM_PCAPNG_H
#define NICSIM_PCAPNG_H

#include <stdint.h>
#include <stdio.h>

#define PCAPNG_LINKTYPE_ETHERNET 1u
#define PCAPNG_CRC_ERROR 0x01000000u /* epb_flags: link-layer CRC error */

/* Section header block; appl names the writing program (shb_userappl). */
int pcapng_begin(FILE *f, const char *appl);

/* Interface description block: Ethernet, if_tsresol 9 (nanoseconds),
 * if_name name (may be NULL).  Interfaces are numbered from 0 in the order
 * they are written. */
int pcapng_interface(FILE *f, const char *name, uint32_t snaplen);

struct pcapng_pkt {
	uint32_t ifid;
	uint64_t ts_ns; /* CLOCK_REALTIME nanoseconds */
	const void *data;
	uint32_t caplen;
	uint32_t len;
	uint32_t flags;      /* epb_flags, written when not 0 */
	uint64_t dropcount;  /* epb_dropcount, written when not 0 */
	const char *comment; /* opt_comment, written when not NULL or "" */
};

/* Enhanced packet block. */
int pcapng_packet(FILE *f, const struct pcapng_pkt *pkt);

/* Interface statistics block: the capture's start and end, frames seen
 * (isb_ifrecv), not captured (isb_ifdrop) and written (isb_filteraccept). */
int pcapng_stats(FILE *f, uint32_t ifid, uint64_t start_ns, uint64_t end_ns, uint64_t recv,
		 uint64_t drop, uint64_t accepted);

#endif /* NICSIM_PCAPNG_H */

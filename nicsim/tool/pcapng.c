/*
 * A pcapng writer (pcapng.h): section header, interface description,
 * enhanced packet and interface statistics blocks, in this machine's byte
 * order.  Every block is
 *
 *   type (4) | total length (4) | body | options | total length (4)
 *
 * with the body and each option value padded to 32 bits, and the options
 * ended by opt_endofopt.  Block types, option codes and the flags word are
 * those of the IETF draft "PCAP Next Generation (pcapng) Capture File
 * Format".
 */
#include <errno.h>
#include <string.h>

#include "pcapng.h"

#define BT_SHB 0x0a0d0d0au
#define BT_IDB 0x00000001u
#define BT_ISB 0x00000005u
#define BT_EPB 0x00000006u
#define BYTE_ORDER_MAGIC 0x1a2b3c4du

#define OPT_ENDOFOPT 0
#define OPT_COMMENT 1
#define SHB_USERAPPL 4
#define IF_NAME 2
#define IF_TSRESOL 9
#define EPB_FLAGS 2
#define EPB_DROPCOUNT 4
#define ISB_STARTTIME 2
#define ISB_ENDTIME 3
#define ISB_IFRECV 4
#define ISB_IFDROP 5
#define ISB_FILTERACCEPT 6

/* Longest option value written (comments and names are cut there). */
#define OPT_MAX 1024u

static uint32_t pad4(size_t n)
{
	return (uint32_t)((4 - n % 4) % 4);
}

/* Bytes an option with a value of n bytes takes. */
static uint32_t opt_size(size_t n)
{
	return (uint32_t)(4 + n + pad4(n));
}

static void put(FILE *f, const void *p, size_t n)
{
	if (n)
		fwrite(p, 1, n, f);
}

static void put32(FILE *f, uint32_t v)
{
	put(f, &v, sizeof(v));
}

static void put_pad(FILE *f, size_t n)
{
	static const uint8_t zero[4];

	put(f, zero, pad4(n));
}

static void put_opt(FILE *f, uint16_t code, const void *val, size_t n)
{
	uint16_t h[2] = {code, (uint16_t)n};

	put(f, h, sizeof(h));
	put(f, val, n);
	put_pad(f, n);
}

static void put_opt64(FILE *f, uint16_t code, uint64_t v)
{
	put_opt(f, code, &v, sizeof(v));
}

/* The length of a text option's value: cut at OPT_MAX. */
static size_t text_len(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	return n > OPT_MAX ? OPT_MAX : n;
}

static int status(FILE *f)
{
	if (!ferror(f))
		return 0;
	return errno ? -errno : -EIO;
}

int pcapng_begin(FILE *f, const char *appl)
{
	size_t an = text_len(appl);
	uint32_t total = 24 + (an ? opt_size(an) : 0) + 4 + 4;
	uint16_t version[2] = {1, 0};
	uint64_t section_len = UINT64_MAX; /* not given */

	put32(f, BT_SHB);
	put32(f, total);
	put32(f, BYTE_ORDER_MAGIC);
	put(f, version, sizeof(version));
	put(f, &section_len, sizeof(section_len));
	if (an)
		put_opt(f, SHB_USERAPPL, appl, an);
	put_opt(f, OPT_ENDOFOPT, NULL, 0);
	put32(f, total);
	return status(f);
}

int pcapng_interface(FILE *f, const char *name, uint32_t snaplen)
{
	size_t nn = text_len(name);
	uint32_t total = 16 + (nn ? opt_size(nn) : 0) + opt_size(1) + 4 + 4;
	uint16_t link[2] = {PCAPNG_LINKTYPE_ETHERNET, 0};
	const uint8_t tsresol = 9; /* 10^-9 s */

	put32(f, BT_IDB);
	put32(f, total);
	put(f, link, sizeof(link));
	put32(f, snaplen);
	if (nn)
		put_opt(f, IF_NAME, name, nn);
	put_opt(f, IF_TSRESOL, &tsresol, 1);
	put_opt(f, OPT_ENDOFOPT, NULL, 0);
	put32(f, total);
	return status(f);
}

int pcapng_packet(FILE *f, const struct pcapng_pkt *pkt)
{
	size_t cn = text_len(pkt->comment);
	uint32_t opts = 0, total;

	if (cn)
		opts += opt_size(cn);
	if (pkt->flags)
		opts += opt_size(4);
	if (pkt->dropcount)
		opts += opt_size(8);
	if (opts)
		opts += 4;
	total = 28 + pkt->caplen + pad4(pkt->caplen) + opts + 4;
	put32(f, BT_EPB);
	put32(f, total);
	put32(f, pkt->ifid);
	put32(f, (uint32_t)(pkt->ts_ns >> 32));
	put32(f, (uint32_t)pkt->ts_ns);
	put32(f, pkt->caplen);
	put32(f, pkt->len);
	put(f, pkt->data, pkt->caplen);
	put_pad(f, pkt->caplen);
	if (cn)
		put_opt(f, OPT_COMMENT, pkt->comment, cn);
	if (pkt->flags)
		put_opt(f, EPB_FLAGS, &pkt->flags, 4);
	if (pkt->dropcount)
		put_opt64(f, EPB_DROPCOUNT, pkt->dropcount);
	if (opts)
		put_opt(f, OPT_ENDOFOPT, NULL, 0);
	put32(f, total);
	return status(f);
}

int pcapng_stats(FILE *f, uint32_t ifid, uint64_t start_ns, uint64_t end_ns, uint64_t recv,
		 uint64_t drop, uint64_t accepted)
{
	uint32_t total = 20 + 5 * opt_size(8) + 4 + 4;
	/* Timestamps are two 32-bit words, the high one first. */
	uint32_t start[2] = {(uint32_t)(start_ns >> 32), (uint32_t)start_ns};
	uint32_t end[2] = {(uint32_t)(end_ns >> 32), (uint32_t)end_ns};

	put32(f, BT_ISB);
	put32(f, total);
	put32(f, ifid);
	put(f, end, sizeof(end));
	put_opt(f, ISB_STARTTIME, start, sizeof(start));
	put_opt(f, ISB_ENDTIME, end, sizeof(end));
	put_opt64(f, ISB_IFRECV, recv);
	put_opt64(f, ISB_IFDROP, drop);
	put_opt64(f, ISB_FILTERACCEPT, accepted);
	put_opt(f, OPT_ENDOFOPT, NULL, 0);
	put32(f, total);
	return status(f);
}

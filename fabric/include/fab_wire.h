/*
 * The nicsim wire format.  Every frame on a nicsim fabric is a valid RoCEv2
 * packet, so that a capture opens in Wireshark/tshark as InfiniBand with no
 * configuration:
 *
 *   Ethernet II (14)  dst MAC 02:00:<dst IPv4>, src MAC 02:00:<src IPv4>,
 *                     type 0x0800; no VLAN tag, no FCS
 *   IPv4 (20)         version 4, IHL 5 (no options), DSCP 0, ECN 0, DF set,
 *                     ID 0, TTL 64, protocol 17, header checksum computed
 *   UDP (8)           source port per QP (fab_udp_sport), destination 4791,
 *                     checksum 0 (allowed for UDP over IPv4)
 *   BTH (12)          InfiniBand base transport header
 *   RETH/AETH/ImmDt/DETH as the opcode requires (fab_opcode_info)
 *   payload           0 .. FAB_MTU bytes
 *   pad               0-3 zero bytes so that payload + pad is a multiple of 4;
 *                     the count is in the BTH
 *   ICRC (4)          invariant CRC, computed as Soft-RoCE computes it
 *
 * Byte order: every multi-byte header field is big-endian (network order) on
 * the wire.  The header structures below are arrays of uint8_t, so they have
 * alignment 1, no padding and no byte order of their own; read and write
 * their fields with fab_get16/32/64 and fab_put16/32/64.  A structure may be
 * laid over any byte of a frame.  The one exception to big-endian is the
 * ICRC: it is sent least significant byte first (see fab_icrc).
 *
 * The ICRC.  It is the standard CRC-32 (IEEE 802.3 polynomial, reflected,
 * initial value and final XOR 0xffffffff: the CRC of zlib and Ethernet) over
 *
 *   8 bytes of 0xff              standing for the LRH, which RoCEv2 lacks
 *   the IPv4 header (20 bytes)   with TOS (DSCP+ECN), TTL and header checksum
 *                                replaced by all ones
 *   the UDP header (8 bytes)     with the checksum replaced by all ones
 *   the BTH (12 bytes)           with byte 4 (FECN, BECN and the 6 reserved
 *                                bits resv6a) replaced by all ones
 *   everything after the BTH up to the ICRC: extension headers, payload, pad
 *
 * so that routers may rewrite the masked fields without breaking it.  The
 * Ethernet header is not covered (the Ethernet FCS covers it on real links).
 * Sources: Linux drivers/infiniband/sw/rxe/rxe_icrc.c (rxe_icrc_hdr starts
 * crc32_le from 0xdebb20e3, the CRC register after 8 bytes of 0xff, masks
 * tos, ttl, check, udp check and bth->qpn |= ~BTH_QPN_MASK, and stores ~crc
 * as a native u32, i.e. least significant byte first on x86); a frame
 * captured from a ConnectX-4 Lx (the scapy RoCE tests) whose ICRC bytes
 * 82 fd 00 2a are the CRC 0x2a00fd82 sent LSB first.  Wireshark shows the 4
 * bytes as a big-endian number ("Invariant CRC: 0x82fd002a") and does not
 * check them; the NIC does (fab_pkt_decode).
 *
 * All functions are pure: no state, no allocation, safe from any thread.
 * Errors are 0 or a negative errno, as everywhere in nicsim.
 */
#ifndef FAB_WIRE_H
#define FAB_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- Sizes --------------------------------------------------------------- */

#define FAB_ETH_HLEN 14u
#define FAB_IP4_HLEN 20u
#define FAB_UDP_HLEN 8u
#define FAB_BTH_LEN 12u
#define FAB_RETH_LEN 16u
#define FAB_AETH_LEN 4u
#define FAB_IMMDT_LEN 4u
#define FAB_DETH_LEN 8u
#define FAB_IETH_LEN 4u
#define FAB_ATOMICETH_LEN 28u
#define FAB_ATOMICACKETH_LEN 8u
#define FAB_CNP_PAD_LEN 16u /* reserved bytes after the BTH of a CNP */
#define FAB_ICRC_LEN 4u

#define FAB_ETHERTYPE_IPV4 0x0800u
#define FAB_IPPROTO_UDP 17u
#define FAB_ROCE_PORT 4791u /* IANA port of RoCEv2 */
#define FAB_IP4_TTL 64u
#define FAB_IP4_DF 0x4000u /* in the flags/fragment offset field */
#define FAB_PKEY_DEFAULT 0xffffu
#define FAB_MASK24 0x00ffffffu /* QPNs, PSNs and MSNs are 24 bits */

/* Largest payload of one packet: the path MTU of every nicsim connection. */
#define FAB_MTU 4096u

/* Ethernet through BTH: the headers every frame has. */
#define FAB_HDR_BASE (FAB_ETH_HLEN + FAB_IP4_HLEN + FAB_UDP_HLEN + FAB_BTH_LEN)
/* The shortest frame: fixed headers and ICRC, nothing else. */
#define FAB_FRAME_MIN (FAB_HDR_BASE + FAB_ICRC_LEN)
/* The longest extension headers of any opcode this header knows (atomics). */
#define FAB_EXT_MAX FAB_ATOMICETH_LEN
/*
 * The largest frame: the longest headers of an opcode that carries payload
 * (RDMA WRITE Only with Immediate: RETH + ImmDt), a full MTU of payload
 * (a multiple of 4, so no pad) and the ICRC.  Frames of opcodes without
 * payload are shorter.
 */
#define FAB_FRAME_MAX (FAB_HDR_BASE + FAB_RETH_LEN + FAB_IMMDT_LEN + FAB_MTU + FAB_ICRC_LEN)

/* ---- On-wire structures (all fields big-endian, alignment 1) -------------- */

struct fab_eth_hdr {
	uint8_t dst[6];
	uint8_t src[6];
	uint8_t type[2];
};

struct fab_ip4_hdr {
	uint8_t ver_ihl;    /* 0x45 */
	uint8_t tos;        /* DSCP (6 bits) and ECN (2 bits); masked in the ICRC */
	uint8_t tot_len[2]; /* IPv4 header to ICRC inclusive */
	uint8_t id[2];
	uint8_t frag[2]; /* flags (reserved, DF, MF) and fragment offset */
	uint8_t ttl;     /* masked in the ICRC */
	uint8_t proto;
	uint8_t csum[2]; /* masked in the ICRC */
	uint8_t saddr[4];
	uint8_t daddr[4];
};

struct fab_udp_hdr {
	uint8_t sport[2];
	uint8_t dport[2];
	uint8_t len[2];  /* UDP header to ICRC inclusive */
	uint8_t csum[2]; /* 0: none; masked in the ICRC */
};

/* Base transport header. */
struct fab_bth {
	uint8_t opcode;
	uint8_t flags; /* SE (7), M (6), PadCnt (5:4), TVer (3:0) */
	uint8_t pkey[2];
	uint8_t fb;      /* FECN (7), BECN (6), reserved (5:0); masked in the ICRC */
	uint8_t qpn[3];  /* destination QP */
	uint8_t ack_req; /* AckReq (7), reserved (6:0) */
	uint8_t psn[3];
};

#define FAB_BTH_SE 0x80u
#define FAB_BTH_MIG 0x40u
#define FAB_BTH_PAD_SHIFT 4
#define FAB_BTH_PAD_MASK 0x30u
#define FAB_BTH_TVER_MASK 0x0fu
#define FAB_BTH_FECN 0x80u
#define FAB_BTH_BECN 0x40u
#define FAB_BTH_ACKREQ 0x80u

/* RDMA extended transport header (RDMA WRITE First/Only, READ Request). */
struct fab_reth {
	uint8_t va[8];
	uint8_t rkey[4];
	uint8_t dma_len[4];
};

/* ACK extended transport header: syndrome and 24-bit MSN. */
struct fab_aeth {
	uint8_t syndrome;
	uint8_t msn[3];
};

/* Immediate data. */
struct fab_immdt {
	uint8_t imm[4];
};

/* Datagram extended transport header (UD). */
struct fab_deth {
	uint8_t qkey[4];
	uint8_t reserved;
	uint8_t src_qpn[3];
};

/* Invalidate extended transport header (known, not supported). */
struct fab_ieth {
	uint8_t rkey[4];
};

/* Atomic extended transport headers (known, not supported). */
struct fab_atomiceth {
	uint8_t va[8];
	uint8_t rkey[4];
	uint8_t swap_add[8];
	uint8_t compare[8];
};

struct fab_atomicacketh {
	uint8_t orig[8];
};

/* The headers every frame starts with. */
struct fab_roce_hdr {
	struct fab_eth_hdr eth;
	struct fab_ip4_hdr ip;
	struct fab_udp_hdr udp;
	struct fab_bth bth;
};

_Static_assert(sizeof(struct fab_eth_hdr) == FAB_ETH_HLEN, "Ethernet header is 14 bytes");
_Static_assert(sizeof(struct fab_ip4_hdr) == FAB_IP4_HLEN, "IPv4 header is 20 bytes");
_Static_assert(sizeof(struct fab_udp_hdr) == FAB_UDP_HLEN, "UDP header is 8 bytes");
_Static_assert(sizeof(struct fab_bth) == FAB_BTH_LEN, "BTH is 12 bytes");
_Static_assert(sizeof(struct fab_reth) == FAB_RETH_LEN, "RETH is 16 bytes");
_Static_assert(sizeof(struct fab_aeth) == FAB_AETH_LEN, "AETH is 4 bytes");
_Static_assert(sizeof(struct fab_immdt) == FAB_IMMDT_LEN, "ImmDt is 4 bytes");
_Static_assert(sizeof(struct fab_deth) == FAB_DETH_LEN, "DETH is 8 bytes");
_Static_assert(sizeof(struct fab_ieth) == FAB_IETH_LEN, "IETH is 4 bytes");
_Static_assert(sizeof(struct fab_atomiceth) == FAB_ATOMICETH_LEN, "AtomicETH is 28 bytes");
_Static_assert(sizeof(struct fab_atomicacketh) == FAB_ATOMICACKETH_LEN, "AtomicAckETH is 8 bytes");
_Static_assert(sizeof(struct fab_roce_hdr) == FAB_HDR_BASE, "fixed headers are 54 bytes");
_Static_assert(_Alignof(struct fab_roce_hdr) == 1, "headers may lie at any byte");

_Static_assert(offsetof(struct fab_eth_hdr, type) == 12, "ethertype at 12");
_Static_assert(offsetof(struct fab_ip4_hdr, tos) == 1, "IPv4 TOS at 1");
_Static_assert(offsetof(struct fab_ip4_hdr, tot_len) == 2, "IPv4 total length at 2");
_Static_assert(offsetof(struct fab_ip4_hdr, frag) == 6, "IPv4 fragment field at 6");
_Static_assert(offsetof(struct fab_ip4_hdr, ttl) == 8, "IPv4 TTL at 8");
_Static_assert(offsetof(struct fab_ip4_hdr, proto) == 9, "IPv4 protocol at 9");
_Static_assert(offsetof(struct fab_ip4_hdr, csum) == 10, "IPv4 checksum at 10");
_Static_assert(offsetof(struct fab_ip4_hdr, saddr) == 12, "IPv4 source at 12");
_Static_assert(offsetof(struct fab_ip4_hdr, daddr) == 16, "IPv4 destination at 16");
_Static_assert(offsetof(struct fab_udp_hdr, len) == 4, "UDP length at 4");
_Static_assert(offsetof(struct fab_udp_hdr, csum) == 6, "UDP checksum at 6");
_Static_assert(offsetof(struct fab_bth, pkey) == 2, "BTH P_Key at 2");
_Static_assert(offsetof(struct fab_bth, fb) == 4, "BTH FECN/BECN byte at 4");
_Static_assert(offsetof(struct fab_bth, qpn) == 5, "BTH DestQP at 5");
_Static_assert(offsetof(struct fab_bth, ack_req) == 8, "BTH AckReq at 8");
_Static_assert(offsetof(struct fab_bth, psn) == 9, "BTH PSN at 9");
_Static_assert(offsetof(struct fab_reth, rkey) == 8, "RETH R_Key at 8");
_Static_assert(offsetof(struct fab_reth, dma_len) == 12, "RETH DMA length at 12");
_Static_assert(offsetof(struct fab_deth, src_qpn) == 5, "DETH source QP at 5");
_Static_assert(offsetof(struct fab_atomiceth, swap_add) == 12, "AtomicETH swap/add at 12");
_Static_assert(offsetof(struct fab_atomiceth, compare) == 20, "AtomicETH compare at 20");
_Static_assert(offsetof(struct fab_roce_hdr, ip) == FAB_ETH_HLEN, "IPv4 at 14");
_Static_assert(offsetof(struct fab_roce_hdr, udp) == 34, "UDP at 34");
_Static_assert(offsetof(struct fab_roce_hdr, bth) == 42, "BTH at 42");

/* Big-endian field access; p may have any alignment. */
static inline uint16_t fab_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t fab_get24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static inline uint32_t fab_get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t fab_get64(const uint8_t *p)
{
	return (uint64_t)fab_get32(p) << 32 | fab_get32(p + 4);
}

static inline void fab_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void fab_put24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 16);
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)v;
}

static inline void fab_put32(uint8_t *p, uint32_t v)
{
	fab_put16(p, (uint16_t)(v >> 16));
	fab_put16(p + 2, (uint16_t)v);
}

static inline void fab_put64(uint8_t *p, uint64_t v)
{
	fab_put32(p, (uint32_t)(v >> 32));
	fab_put32(p + 4, (uint32_t)v);
}

/* ---- Opcodes ------------------------------------------------------------- */

/*
 * BTH opcodes: the transport in bits 7:5 (000 RC, 011 UD, 100 CNP), the
 * operation in bits 4:0.  Names follow the IBTA specification (volume 1,
 * table 38) as Linux's ib_pack.h spells them.
 */
enum fab_opcode {
	FAB_OP_SEND_FIRST = 0x00,
	FAB_OP_SEND_MIDDLE = 0x01,
	FAB_OP_SEND_LAST = 0x02,
	FAB_OP_SEND_LAST_WITH_IMMEDIATE = 0x03,
	FAB_OP_SEND_ONLY = 0x04,
	FAB_OP_SEND_ONLY_WITH_IMMEDIATE = 0x05,
	FAB_OP_RDMA_WRITE_FIRST = 0x06,
	FAB_OP_RDMA_WRITE_MIDDLE = 0x07,
	FAB_OP_RDMA_WRITE_LAST = 0x08,
	FAB_OP_RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x09,
	FAB_OP_RDMA_WRITE_ONLY = 0x0a,
	FAB_OP_RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x0b,
	FAB_OP_RDMA_READ_REQUEST = 0x0c,
	FAB_OP_RDMA_READ_RESPONSE_FIRST = 0x0d,
	FAB_OP_RDMA_READ_RESPONSE_MIDDLE = 0x0e,
	FAB_OP_RDMA_READ_RESPONSE_LAST = 0x0f,
	FAB_OP_RDMA_READ_RESPONSE_ONLY = 0x10,
	FAB_OP_ACKNOWLEDGE = 0x11,
	FAB_OP_ATOMIC_ACKNOWLEDGE = 0x12, /* known, not supported */
	FAB_OP_COMPARE_SWAP = 0x13,       /* known, not supported */
	FAB_OP_FETCH_ADD = 0x14,          /* known, not supported */
	/* 0x15 is reserved. */
	FAB_OP_SEND_LAST_WITH_INVALIDATE = 0x16, /* known, not supported */
	FAB_OP_SEND_ONLY_WITH_INVALIDATE = 0x17, /* known, not supported */
	FAB_OP_UD_SEND_ONLY = 0x64,
	FAB_OP_UD_SEND_ONLY_WITH_IMMEDIATE = 0x65,
	FAB_OP_CNP = 0x81, /* congestion notification (RoCEv2 annex), not supported */
};

/* Extension headers after the BTH (fab_opcode_info.hdrs), in wire order. */
#define FAB_HDR_DETH 0x01u
#define FAB_HDR_RETH 0x02u
#define FAB_HDR_AETH 0x04u
#define FAB_HDR_ATOMICETH 0x08u
#define FAB_HDR_ATOMICACKETH 0x10u
#define FAB_HDR_IETH 0x20u
#define FAB_HDR_IMMDT 0x40u
#define FAB_HDR_CNP_PAD 0x80u

/* Opcode properties (fab_opcode_info.flags). */
#define FAB_OPF_PAYLOAD 0x01u   /* may carry payload (else none, and pad 0) */
#define FAB_OPF_FIRST 0x02u     /* first packet of a message */
#define FAB_OPF_MIDDLE 0x04u    /* middle packet */
#define FAB_OPF_LAST 0x08u      /* last packet; FIRST|LAST is "only" */
#define FAB_OPF_REQUEST 0x10u   /* sent by the requester */
#define FAB_OPF_RESPONSE 0x20u  /* sent by the responder (ACKs, read responses) */
#define FAB_OPF_SUPPORTED 0x40u /* nicsim encodes and accepts it */
#define FAB_OPF_ONLY (FAB_OPF_FIRST | FAB_OPF_LAST)

struct fab_opcode_info {
	const char *name; /* "RC_SEND_FIRST", "UD_SEND_ONLY", ... */
	uint8_t hdrs;     /* FAB_HDR_* */
	uint8_t ext_len;  /* bytes of extension headers after the BTH */
	uint8_t flags;    /* FAB_OPF_* */
};

/* The properties of opcode, or NULL if nicsim does not know it. */
const struct fab_opcode_info *fab_opcode_info(uint8_t opcode);

/* The opcode's name, "UNKNOWN" if nicsim does not know it. */
const char *fab_opcode_name(uint8_t opcode);

/* Look an opcode up by name (case-insensitive); 0 or -ENOENT. */
int fab_opcode_parse(const char *name, uint8_t *opcode);

/*
 * Bytes from the start of the Ethernet header to the end of the opcode's last
 * extension header (where the payload starts); 0 for an unknown opcode.
 * Known but unsupported opcodes (atomics, invalidate, CNP) have a length too.
 */
size_t fab_pkt_hdr_len(uint8_t opcode);

/* ---- AETH syndrome ------------------------------------------------------- */

/*
 * Syndrome: bit 7 reserved (0), bits 6:5 the kind, bits 4:0 the value: the
 * credit count of an ACK, the timer code of an RNR NAK, the code of a NAK.
 * Kind 10 is reserved.
 */
#define FAB_AETH_KIND_MASK 0x60u
#define FAB_AETH_VALUE_MASK 0x1fu
#define FAB_AETH_ACK 0x00u
#define FAB_AETH_RNR_NAK 0x20u
#define FAB_AETH_NAK 0x60u
#define FAB_AETH_CREDITS_INVALID 0x1fu /* ACK without end-to-end credits */

enum fab_nak_code {
	FAB_NAK_PSN_SEQ_ERROR = 0,
	FAB_NAK_INVALID_REQUEST = 1,
	FAB_NAK_REMOTE_ACCESS_ERROR = 2,
	FAB_NAK_REMOTE_OP_ERROR = 3,
	FAB_NAK_INVALID_RD_REQUEST = 4,
	FAB_NAK_CODE_MAX_ = 4,
};

static inline uint8_t fab_aeth_ack(unsigned credits)
{
	return (uint8_t)(FAB_AETH_ACK | (credits & FAB_AETH_VALUE_MASK));
}

static inline uint8_t fab_aeth_rnr_nak(unsigned timer_code)
{
	return (uint8_t)(FAB_AETH_RNR_NAK | (timer_code & FAB_AETH_VALUE_MASK));
}

static inline uint8_t fab_aeth_nak(enum fab_nak_code code)
{
	return (uint8_t)(FAB_AETH_NAK | ((unsigned)code & FAB_AETH_VALUE_MASK));
}

/* True if syndrome is an ACK, an RNR NAK or a NAK with a defined code. */
bool fab_aeth_syndrome_valid(uint8_t syndrome);

/*
 * The minimum RNR delay an RNR NAK timer code asks for, in microseconds
 * (IBTA table 45: code 1 is 10 us ... code 31 is 491.52 ms, code 0 is
 * 655.36 ms).  Only the low 5 bits of code count.
 */
uint32_t fab_rnr_timer_us(unsigned code);

/* ---- Decoded view -------------------------------------------------------- */

/*
 * One packet, decoded, or to encode.  Numbers are in host order except the
 * IPv4 addresses, which are in network order like struct in_addr.  The
 * has_* flags say which extension headers the opcode carries; the fields of
 * an absent header are 0 after decoding.  24-bit fields must fit 24 bits.
 */
struct fab_pkt {
	uint32_t src_ip; /* network order */
	uint32_t dst_ip; /* network order */
	uint16_t udp_sport;
	uint8_t opcode;
	uint8_t pad; /* pad count: set by the encoder, reported by the decoder */
	bool se;     /* solicited event */
	bool mig;    /* migration state */
	bool fecn;
	bool becn;
	bool ack_req;
	uint16_t pkey;
	uint32_t dest_qpn;
	uint32_t psn;

	bool has_reth;
	uint64_t va;
	uint32_t rkey;
	uint32_t dma_len;

	bool has_aeth;
	uint8_t syndrome;
	uint32_t msn;

	bool has_imm;
	uint32_t imm; /* the 4 ImmDt bytes read big-endian */

	bool has_deth;
	uint32_t qkey;
	uint32_t src_qpn;

	const uint8_t *payload;
	uint32_t payload_len;
};

/*
 * Zero *p and set it up for opcode: the has_* flags its headers need and
 * P_Key 0xffff.  Returns 0, -EINVAL for an unknown opcode, -EOPNOTSUPP for
 * one nicsim does not support (p is zeroed either way).
 */
int fab_pkt_init(struct fab_pkt *p, uint8_t opcode);

/*
 * Encode p into frame (cap bytes) and store the frame length in *len.
 * Writes the headers, copies the payload, writes the pad and the ICRC.
 * If p->payload is NULL, the caller has already put p->payload_len bytes
 * at frame + fab_pkt_hdr_len(p->opcode) (the DMA engine reads host memory
 * straight into the frame); they are left in place.  p->pad is ignored: the
 * pad follows from payload_len.
 *
 * Returns 0; -EINVAL for an unknown opcode, has_* flags that disagree with
 * the opcode, payload on an opcode without any, a field wider than 24 bits
 * or a reserved AETH syndrome; -EOPNOTSUPP for an opcode nicsim does not
 * support; -EMSGSIZE for a payload over FAB_MTU; -ENOSPC if cap is too
 * small.  On failure nothing is written.
 */
int fab_pkt_encode(const struct fab_pkt *p, uint8_t *frame, size_t cap, size_t *len);

/*
 * The ICRC left out.  A frame that crosses the shared-memory fabric inside
 * a burst unit (fab.h, "Burst units") is observed by nothing on its way, so
 * its sender skips the CRC, the largest cost of a packet after the copy of
 * its payload: fab_pkt_encode_opt with FAB_PKT_NO_ICRC writes the same
 * bytes as fab_pkt_encode but zeros where the ICRC goes, and
 * fab_pkt_icrc_fill later makes the frame byte for byte what
 * fab_pkt_encode would have made.  fab_pkt_decode_opt with the flag checks
 * everything fab_pkt_decode checks but the ICRC: for a frame the fabric
 * delivered as one whose sender left the ICRC out (struct fab_rx.no_icrc).
 */
#define FAB_PKT_NO_ICRC 1u

int fab_pkt_encode_opt(const struct fab_pkt *p, uint8_t *frame, size_t cap, size_t *len,
		       unsigned flags);

/* Compute the ICRC of the complete frame of len bytes and write it in its
 * last four bytes.  0, or -EINVAL (len outside [FAB_FRAME_MIN,
 * FAB_FRAME_MAX]; nothing written). */
int fab_pkt_icrc_fill(uint8_t *frame, size_t len);

/*
 * Recompute the IPv4 header checksum and the ICRC of a complete frame of len
 * bytes after its headers were changed in place; the UDP checksum is set to
 * 0.  Checks only what it needs: len within [FAB_FRAME_MIN, FAB_FRAME_MAX],
 * ethertype IPv4, IHL 5 and an IPv4 total length matching len.  Returns 0 or
 * -EINVAL (nothing written).
 */
int fab_pkt_seal(uint8_t *frame, size_t len);

/* Reasons a frame is refused, in the order fab_pkt_decode checks them. */
#define FAB_WIRE_ERRORS(X)                                                                \
	X(NONE, "no error")                                                               \
	X(SHORT, "frame shorter than Ethernet + IPv4 + UDP + BTH + ICRC")                 \
	X(NOT_IPV4, "Ethernet type is not IPv4")                                          \
	X(IP_HDR, "IPv4 version is not 4, or the header has options")                     \
	X(IP_LEN, "IPv4 total length disagrees with the frame length")                    \
	X(IP_FRAG, "IPv4 fragment, or the reserved flag set")                             \
	X(IP_CSUM, "IPv4 header checksum wrong")                                          \
	X(ETH_ADDR, "Ethernet address is not the one derived from the IPv4 address")      \
	X(NOT_UDP, "IPv4 protocol is not UDP")                                            \
	X(UDP_PORT, "UDP destination port is not 4791 (RoCEv2)")                          \
	X(UDP_LEN, "UDP length disagrees with the IPv4 total length")                     \
	X(UDP_CSUM, "UDP checksum present and wrong")                                     \
	X(ICRC, "ICRC wrong (frame corrupted)")                                           \
	X(BTH_TVER, "BTH transport header version is not 0")                              \
	X(OPCODE_UNKNOWN, "opcode unknown or reserved")                                   \
	X(OPCODE_UNSUPPORTED, "opcode known but not supported (atomic, invalidate, CNP)") \
	X(EXT_TRUNC, "frame ends inside the extension headers its opcode requires")       \
	X(PAYLOAD, "payload on an opcode that carries none")                              \
	X(PAD, "payload + pad not a multiple of 4, or pad count larger than the data")    \
	X(MTU, "payload larger than the path MTU")                                        \
	X(AETH_SYNDROME, "AETH syndrome uses a reserved encoding")

enum fab_wire_err {
#define FAB_WIRE_ERR_ENUM(name, desc) FAB_WIRE_E_##name,
	FAB_WIRE_ERRORS(FAB_WIRE_ERR_ENUM)
#undef FAB_WIRE_ERR_ENUM
	    FAB_WIRE_E_MAX_
};

/* "ICRC", "IP_CSUM", ... ; "?" for a value out of range. */
const char *fab_wire_err_name(enum fab_wire_err err);
/* A sentence a person can act on; "unknown reason" out of range. */
const char *fab_wire_err_str(enum fab_wire_err err);

/*
 * Decode and check the frame of len bytes.  Nothing in it is trusted: every
 * length, version, protocol, port, address, checksum, the ICRC, the opcode,
 * the headers it requires, the pad count and the payload size are checked,
 * and nothing outside [frame, frame + len) is read.  Integrity is checked
 * before meaning: a frame damaged on the wire counts as IP_CSUM or ICRC, and
 * the reasons after ICRC mean an intact frame that a peer built wrongly.
 *
 * The frame may lie in memory another process writes meanwhile (the
 * fabric's shared frame pool): its headers are copied out in one pass before
 * anything is checked, and every check, the ICRC and every field of *out
 * come from that copy, so a header checked is the header returned.  The
 * payload is not copied: the ICRC covers it as it was when checked, and a
 * writer that changes it later only changes the data of its own packet.
 *
 * Returns 0 with *out filled (out->payload points into frame), -EBADMSG with
 * *why set (if why is not NULL) and *out untouched, or -EINVAL for a NULL
 * frame or out.  Frames up to 60 bytes may carry Ethernet padding after the
 * IPv4 packet (the Ethernet minimum); longer frames must end with the ICRC.
 */
int fab_pkt_decode(const uint8_t *frame, size_t len, struct fab_pkt *out, enum fab_wire_err *why);

/* The same; flags FAB_PKT_NO_ICRC leaves the ICRC unchecked (above). */
int fab_pkt_decode_opt(const uint8_t *frame, size_t len, struct fab_pkt *out,
		       enum fab_wire_err *why, unsigned flags);

/* ---- Checksums and addresses --------------------------------------------- */

/*
 * Standard CRC-32 (as zlib's crc32): start with crc 0, feed the result back
 * to continue.  fab_crc32(0, "123456789", 9) == 0xcbf43926.  Uses PCLMULQDQ
 * where the CPU has it.
 */
uint32_t fab_crc32(uint32_t crc, const void *buf, size_t len);

/*
 * The same CRC by the portable table-driven path alone, which fab_crc32 uses
 * on CPUs without carry-less multiply: for tests and benchmarks.
 */
uint32_t fab_crc32_sliced(uint32_t crc, const void *buf, size_t len);

/*
 * The ICRC of the frame whose first len_without_icrc bytes are given (from
 * the Ethernet header up to, not including, the ICRC), as defined at the top
 * of this file.  It goes on the wire least significant byte first.  The
 * frame must have the fixed headers with IHL 5; returns 0 when it is shorter
 * than FAB_HDR_BASE.
 */
uint32_t fab_icrc(const uint8_t *frame, size_t len_without_icrc);

/* The IPv4 header checksum of hdr (its checksum field taken as 0). */
uint16_t fab_ip4_csum(const struct fab_ip4_hdr *hdr);

/* The locally administered unicast MAC of a NIC: 02:00 and its IPv4 address. */
void fab_mac_from_ip(uint32_t ip, uint8_t mac[6]);

/*
 * The UDP source port for a QP: in 0xc000..0xffff (the dynamic range, as
 * rxe uses) and spread by a hash of qpn, so that flows of different QPs
 * differ as ECMP expects.
 */
uint16_t fab_udp_sport(uint32_t qpn);

#endif /* FAB_WIRE_H */

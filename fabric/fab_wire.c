/*
 * The RoCEv2 codec of the nicsim fabric: opcode table, encoder, decoder.
 * fab_wire.h describes the format and the contracts; the CRC-32 and the
 * ICRC are computed in fab_crc.c.
 */
#include "fab_wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "fab_crc_priv.h"

/* ---- Opcode table ---------------------------------------------------------- */

#define HDRS_LEN(h)                                                                            \
	((((h)&FAB_HDR_DETH) ? FAB_DETH_LEN : 0) + (((h)&FAB_HDR_RETH) ? FAB_RETH_LEN : 0) +   \
	 (((h)&FAB_HDR_AETH) ? FAB_AETH_LEN : 0) +                                             \
	 (((h)&FAB_HDR_ATOMICETH) ? FAB_ATOMICETH_LEN : 0) +                                   \
	 (((h)&FAB_HDR_ATOMICACKETH) ? FAB_ATOMICACKETH_LEN : 0) +                             \
	 (((h)&FAB_HDR_IETH) ? FAB_IETH_LEN : 0) + (((h)&FAB_HDR_IMMDT) ? FAB_IMMDT_LEN : 0) + \
	 (((h)&FAB_HDR_CNP_PAD) ? FAB_CNP_PAD_LEN : 0))

/* One entry; the length of the extension headers follows from the headers. */
#define OP(name, hdrs, flags)                         \
	{                                             \
		name, (hdrs), HDRS_LEN(hdrs), (flags) \
	}

#define PAY FAB_OPF_PAYLOAD
#define FIRST FAB_OPF_FIRST
#define MIDDLE FAB_OPF_MIDDLE
#define LAST FAB_OPF_LAST
#define ONLY FAB_OPF_ONLY
#define REQ FAB_OPF_REQUEST
#define RSP FAB_OPF_RESPONSE
#define SUP FAB_OPF_SUPPORTED

/*
 * IBTA volume 1, table 38 (RC and UD) and annex A17 (CNP).  Atomics,
 * invalidate and CNP are here so that their frames are refused as
 * unsupported rather than misparsed as unknown.
 */
static const struct fab_opcode_info op_table[256] = {
    [FAB_OP_SEND_FIRST] = OP("RC_SEND_FIRST", 0, PAY | FIRST | REQ | SUP),
    [FAB_OP_SEND_MIDDLE] = OP("RC_SEND_MIDDLE", 0, PAY | MIDDLE | REQ | SUP),
    [FAB_OP_SEND_LAST] = OP("RC_SEND_LAST", 0, PAY | LAST | REQ | SUP),
    [FAB_OP_SEND_LAST_WITH_IMMEDIATE] =
	OP("RC_SEND_LAST_WITH_IMMEDIATE", FAB_HDR_IMMDT, PAY | LAST | REQ | SUP),
    [FAB_OP_SEND_ONLY] = OP("RC_SEND_ONLY", 0, PAY | ONLY | REQ | SUP),
    [FAB_OP_SEND_ONLY_WITH_IMMEDIATE] =
	OP("RC_SEND_ONLY_WITH_IMMEDIATE", FAB_HDR_IMMDT, PAY | ONLY | REQ | SUP),
    [FAB_OP_RDMA_WRITE_FIRST] = OP("RC_RDMA_WRITE_FIRST", FAB_HDR_RETH, PAY | FIRST | REQ | SUP),
    [FAB_OP_RDMA_WRITE_MIDDLE] = OP("RC_RDMA_WRITE_MIDDLE", 0, PAY | MIDDLE | REQ | SUP),
    [FAB_OP_RDMA_WRITE_LAST] = OP("RC_RDMA_WRITE_LAST", 0, PAY | LAST | REQ | SUP),
    [FAB_OP_RDMA_WRITE_LAST_WITH_IMMEDIATE] =
	OP("RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", FAB_HDR_IMMDT, PAY | LAST | REQ | SUP),
    [FAB_OP_RDMA_WRITE_ONLY] = OP("RC_RDMA_WRITE_ONLY", FAB_HDR_RETH, PAY | ONLY | REQ | SUP),
    [FAB_OP_RDMA_WRITE_ONLY_WITH_IMMEDIATE] = OP(
	"RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", FAB_HDR_RETH | FAB_HDR_IMMDT, PAY | ONLY | REQ | SUP),
    [FAB_OP_RDMA_READ_REQUEST] = OP("RC_RDMA_READ_REQUEST", FAB_HDR_RETH, ONLY | REQ | SUP),
    [FAB_OP_RDMA_READ_RESPONSE_FIRST] =
	OP("RC_RDMA_READ_RESPONSE_FIRST", FAB_HDR_AETH, PAY | FIRST | RSP | SUP),
    [FAB_OP_RDMA_READ_RESPONSE_MIDDLE] =
	OP("RC_RDMA_READ_RESPONSE_MIDDLE", 0, PAY | MIDDLE | RSP | SUP),
    [FAB_OP_RDMA_READ_RESPONSE_LAST] =
	OP("RC_RDMA_READ_RESPONSE_LAST", FAB_HDR_AETH, PAY | LAST | RSP | SUP),
    [FAB_OP_RDMA_READ_RESPONSE_ONLY] =
	OP("RC_RDMA_READ_RESPONSE_ONLY", FAB_HDR_AETH, PAY | ONLY | RSP | SUP),
    [FAB_OP_ACKNOWLEDGE] = OP("RC_ACKNOWLEDGE", FAB_HDR_AETH, ONLY | RSP | SUP),
    [FAB_OP_ATOMIC_ACKNOWLEDGE] =
	OP("RC_ATOMIC_ACKNOWLEDGE", FAB_HDR_AETH | FAB_HDR_ATOMICACKETH, ONLY | RSP),
    [FAB_OP_COMPARE_SWAP] = OP("RC_COMPARE_SWAP", FAB_HDR_ATOMICETH, ONLY | REQ),
    [FAB_OP_FETCH_ADD] = OP("RC_FETCH_ADD", FAB_HDR_ATOMICETH, ONLY | REQ),
    [FAB_OP_SEND_LAST_WITH_INVALIDATE] =
	OP("RC_SEND_LAST_WITH_INVALIDATE", FAB_HDR_IETH, PAY | LAST | REQ),
    [FAB_OP_SEND_ONLY_WITH_INVALIDATE] =
	OP("RC_SEND_ONLY_WITH_INVALIDATE", FAB_HDR_IETH, PAY | ONLY | REQ),
    [FAB_OP_UD_SEND_ONLY] = OP("UD_SEND_ONLY", FAB_HDR_DETH, PAY | ONLY | REQ | SUP),
    [FAB_OP_UD_SEND_ONLY_WITH_IMMEDIATE] =
	OP("UD_SEND_ONLY_WITH_IMMEDIATE", FAB_HDR_DETH | FAB_HDR_IMMDT, PAY | ONLY | REQ | SUP),
    [FAB_OP_CNP] = OP("CNP", FAB_HDR_CNP_PAD, ONLY),
};

_Static_assert(HDRS_LEN(FAB_HDR_ATOMICETH) == FAB_EXT_MAX, "atomics have the longest headers");
_Static_assert(HDRS_LEN(FAB_HDR_RETH | FAB_HDR_IMMDT) + FAB_HDR_BASE + FAB_MTU + FAB_ICRC_LEN ==
		   FAB_FRAME_MAX,
	       "FAB_FRAME_MAX is the longest payload-carrying frame");

const struct fab_opcode_info *fab_opcode_info(uint8_t opcode)
{
	const struct fab_opcode_info *oi = &op_table[opcode];

	return oi->name ? oi : NULL;
}

const char *fab_opcode_name(uint8_t opcode)
{
	return op_table[opcode].name ? op_table[opcode].name : "UNKNOWN";
}

int fab_opcode_parse(const char *name, uint8_t *opcode)
{
	if (!name)
		return -ENOENT;
	for (unsigned i = 0; i < 256; i++) {
		if (op_table[i].name && strcasecmp(op_table[i].name, name) == 0) {
			*opcode = (uint8_t)i;
			return 0;
		}
	}
	return -ENOENT;
}

size_t fab_pkt_hdr_len(uint8_t opcode)
{
	return op_table[opcode].name ? FAB_HDR_BASE + op_table[opcode].ext_len : 0;
}

/* ---- AETH ------------------------------------------------------------------- */

bool fab_aeth_syndrome_valid(uint8_t syndrome)
{
	switch (syndrome & ~FAB_AETH_VALUE_MASK) {
	case FAB_AETH_ACK:
	case FAB_AETH_RNR_NAK: return true;
	case FAB_AETH_NAK: return (syndrome & FAB_AETH_VALUE_MASK) <= FAB_NAK_CODE_MAX_;
	default: return false; /* bit 7 set, or the reserved kind 10 */
	}
}

uint32_t fab_rnr_timer_us(unsigned code)
{
	static const uint32_t us[32] = {
	    655360, 10,    20,    30,    40,    60,     80,     120,    160,    240,    320,
	    480,    640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240,  15360,
	    20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
	};

	return us[code & FAB_AETH_VALUE_MASK];
}

/* ---- Errors ------------------------------------------------------------------ */

static const char *const err_names[] = {
#define ERR_NAME(name, desc) #name,
    FAB_WIRE_ERRORS(ERR_NAME)
#undef ERR_NAME
};

static const char *const err_descs[] = {
#define ERR_DESC(name, desc) desc,
    FAB_WIRE_ERRORS(ERR_DESC)
#undef ERR_DESC
};

_Static_assert(sizeof(err_names) / sizeof(err_names[0]) == FAB_WIRE_E_MAX_, "one name a reason");

const char *fab_wire_err_name(enum fab_wire_err err)
{
	return (unsigned)err < FAB_WIRE_E_MAX_ ? err_names[err] : "?";
}

const char *fab_wire_err_str(enum fab_wire_err err)
{
	return (unsigned)err < FAB_WIRE_E_MAX_ ? err_descs[err] : "unknown reason";
}

/* The ICRC goes on the wire least significant byte first, as rxe writes it. */
static void put_icrc(uint8_t *frame, size_t len_without_icrc)
{
	uint32_t crc = fab_icrc(frame, len_without_icrc);
	uint8_t *p = frame + len_without_icrc;

	p[0] = (uint8_t)crc;
	p[1] = (uint8_t)(crc >> 8);
	p[2] = (uint8_t)(crc >> 16);
	p[3] = (uint8_t)(crc >> 24);
}

/* ---- Internet checksums --------------------------------------------------------- */

/* Add n bytes as big-endian 16-bit words (a last odd byte padded with 0). */
static uint64_t sum16(uint64_t sum, const uint8_t *p, size_t n)
{
	for (; n >= 2; p += 2, n -= 2)
		sum += fab_get16(p);
	if (n)
		sum += (uint32_t)p[0] << 8;
	return sum;
}

/* Fold a sum to 16 bits with end-around carry (ones' complement sum). */
static uint16_t fold16(uint64_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

/*
 * The folded ones' complement sum of an IPv4 header's ten 16-bit words,
 * the checksum field counted as zero when without_csum.  The sum does not
 * depend on byte order (RFC 1071, section 2): the words are added as the
 * CPU loads them, and the sum is in that order too.
 */
static uint16_t ip4_sum(const struct fab_ip4_hdr *hdr, bool without_csum)
{
	uint16_t w[FAB_IP4_HLEN / 2];
	uint64_t sum = 0;

	memcpy(w, hdr, sizeof(w));
	if (without_csum)
		w[offsetof(struct fab_ip4_hdr, csum) / 2] = 0;
	for (size_t i = 0; i < FAB_IP4_HLEN / 2; i++)
		sum += w[i];
	return fold16(sum);
}

uint16_t fab_ip4_csum(const struct fab_ip4_hdr *hdr)
{
	return (uint16_t)~ntohs(ip4_sum(hdr, true));
}

/*
 * The checksum of the header write_headers builds, from its values: the
 * frame's header was just written a byte at a time, and reading it back
 * as words would wait for those stores.  Identical to fab_ip4_csum of it.
 */
static uint16_t ip4_csum_of(uint32_t saddr, uint32_t daddr, size_t ip_len)
{
	uint8_t a[8];
	uint64_t sum =
	    0x4500u + ip_len + FAB_IP4_DF + ((unsigned)FAB_IP4_TTL << 8 | FAB_IPPROTO_UDP);

	memcpy(a, &saddr, 4);
	memcpy(a + 4, &daddr, 4);
	sum = sum16(sum, a, sizeof(a));
	return (uint16_t)~fold16(sum);
}

/* ---- Addresses ------------------------------------------------------------------ */

void fab_mac_from_ip(uint32_t ip, uint8_t mac[6])
{
	mac[0] = 0x02; /* locally administered, unicast */
	mac[1] = 0x00;
	memcpy(mac + 2, &ip, 4); /* network order: the address bytes as written */
}

uint16_t fab_udp_sport(uint32_t qpn)
{
	/* Fibonacci hashing: the top 14 bits of the product spread any QPN. */
	return (uint16_t)(0xc000u | ((qpn & FAB_MASK24) * 0x9e3779b1u) >> 18);
}

/* ---- Encoder -------------------------------------------------------------------- */

/* Check everything about p before anything is written. */
static int check_pkt(const struct fab_pkt *p, const struct fab_opcode_info **oip)
{
	const struct fab_opcode_info *oi = fab_opcode_info(p->opcode);

	if (!oi)
		return -EINVAL;
	if (!(oi->flags & FAB_OPF_SUPPORTED))
		return -EOPNOTSUPP;
	if (p->has_reth != !!(oi->hdrs & FAB_HDR_RETH) ||
	    p->has_aeth != !!(oi->hdrs & FAB_HDR_AETH) ||
	    p->has_imm != !!(oi->hdrs & FAB_HDR_IMMDT) ||
	    p->has_deth != !!(oi->hdrs & FAB_HDR_DETH))
		return -EINVAL;
	if (p->dest_qpn > FAB_MASK24 || p->psn > FAB_MASK24)
		return -EINVAL;
	if (p->has_aeth && (p->msn > FAB_MASK24 || !fab_aeth_syndrome_valid(p->syndrome)))
		return -EINVAL;
	if (p->has_deth && p->src_qpn > FAB_MASK24)
		return -EINVAL;
	if (p->payload_len && !(oi->flags & FAB_OPF_PAYLOAD))
		return -EINVAL;
	if (p->payload_len > FAB_MTU)
		return -EMSGSIZE;
	*oip = oi;
	return 0;
}

static void write_headers(const struct fab_pkt *p, const struct fab_opcode_info *oi, uint8_t *frame,
			  size_t total, unsigned pad)
{
	struct fab_roce_hdr *h = (struct fab_roce_hdr *)frame;
	uint8_t *ext = frame + FAB_HDR_BASE;
	size_t ip_len = total - FAB_ETH_HLEN;

	fab_mac_from_ip(p->dst_ip, h->eth.dst);
	fab_mac_from_ip(p->src_ip, h->eth.src);
	fab_put16(h->eth.type, FAB_ETHERTYPE_IPV4);

	h->ip.ver_ihl = 0x45;
	h->ip.tos = 0;
	fab_put16(h->ip.tot_len, (uint16_t)ip_len);
	fab_put16(h->ip.id, 0); /* allowed with DF set (RFC 6864) */
	fab_put16(h->ip.frag, FAB_IP4_DF);
	h->ip.ttl = FAB_IP4_TTL;
	h->ip.proto = FAB_IPPROTO_UDP;
	memcpy(h->ip.saddr, &p->src_ip, 4);
	memcpy(h->ip.daddr, &p->dst_ip, 4);
	fab_put16(h->ip.csum, ip4_csum_of(p->src_ip, p->dst_ip, ip_len));

	fab_put16(h->udp.sport, p->udp_sport);
	fab_put16(h->udp.dport, FAB_ROCE_PORT);
	fab_put16(h->udp.len, (uint16_t)(ip_len - FAB_IP4_HLEN));
	fab_put16(h->udp.csum, 0);

	h->bth.opcode = p->opcode;
	h->bth.flags = (uint8_t)((p->se ? FAB_BTH_SE : 0) | (p->mig ? FAB_BTH_MIG : 0) |
				 pad << FAB_BTH_PAD_SHIFT); /* TVer 0 */
	fab_put16(h->bth.pkey, p->pkey);
	h->bth.fb = (uint8_t)((p->fecn ? FAB_BTH_FECN : 0) | (p->becn ? FAB_BTH_BECN : 0));
	fab_put24(h->bth.qpn, p->dest_qpn);
	h->bth.ack_req = p->ack_req ? FAB_BTH_ACKREQ : 0;
	fab_put24(h->bth.psn, p->psn);

	/* Extension headers in wire order: DETH, RETH, AETH, ImmDt. */
	if (oi->hdrs & FAB_HDR_DETH) {
		struct fab_deth *d = (struct fab_deth *)ext;

		fab_put32(d->qkey, p->qkey);
		d->reserved = 0;
		fab_put24(d->src_qpn, p->src_qpn);
		ext += sizeof(*d);
	}
	if (oi->hdrs & FAB_HDR_RETH) {
		struct fab_reth *r = (struct fab_reth *)ext;

		fab_put64(r->va, p->va);
		fab_put32(r->rkey, p->rkey);
		fab_put32(r->dma_len, p->dma_len);
		ext += sizeof(*r);
	}
	if (oi->hdrs & FAB_HDR_AETH) {
		struct fab_aeth *a = (struct fab_aeth *)ext;

		a->syndrome = p->syndrome;
		fab_put24(a->msn, p->msn);
		ext += sizeof(*a);
	}
	if (oi->hdrs & FAB_HDR_IMMDT) {
		fab_put32(((struct fab_immdt *)ext)->imm, p->imm);
	}
}

int fab_pkt_init(struct fab_pkt *p, uint8_t opcode)
{
	const struct fab_opcode_info *oi = fab_opcode_info(opcode);

	if (!p)
		return -EINVAL;
	memset(p, 0, sizeof(*p));
	p->opcode = opcode;
	p->pkey = FAB_PKEY_DEFAULT;
	if (!oi)
		return -EINVAL;
	p->has_reth = oi->hdrs & FAB_HDR_RETH;
	p->has_aeth = oi->hdrs & FAB_HDR_AETH;
	p->has_imm = oi->hdrs & FAB_HDR_IMMDT;
	p->has_deth = oi->hdrs & FAB_HDR_DETH;
	return oi->flags & FAB_OPF_SUPPORTED ? 0 : -EOPNOTSUPP;
}

int fab_pkt_encode(const struct fab_pkt *p, uint8_t *frame, size_t cap, size_t *len)
{
	return fab_pkt_encode_opt(p, frame, cap, len, 0);
}

int fab_pkt_encode_opt(const struct fab_pkt *p, uint8_t *frame, size_t cap, size_t *len,
		       unsigned flags)
{
	const struct fab_opcode_info *oi;
	size_t hdr, total;
	unsigned pad;
	int rc;

	if (!p || !frame || !len)
		return -EINVAL;
	rc = check_pkt(p, &oi);
	if (rc)
		return rc;
	hdr = FAB_HDR_BASE + oi->ext_len;
	pad = (4u - (p->payload_len & 3u)) & 3u;
	total = hdr + p->payload_len + pad + FAB_ICRC_LEN;
	if (cap < total)
		return -ENOSPC;

	write_headers(p, oi, frame, total, pad);
	/* memmove: a caller may hand back a payload pointer into this frame. */
	if (p->payload && p->payload_len && p->payload != frame + hdr)
		memmove(frame + hdr, p->payload, p->payload_len);
	memset(frame + hdr + p->payload_len, 0, pad);
	if (flags & FAB_PKT_NO_ICRC)
		memset(frame + total - FAB_ICRC_LEN, 0, FAB_ICRC_LEN);
	else
		put_icrc(frame, total - FAB_ICRC_LEN);
	*len = total;
	return 0;
}

int fab_pkt_seal(uint8_t *frame, size_t len)
{
	struct fab_roce_hdr *h = (struct fab_roce_hdr *)frame;

	if (!frame || len < FAB_FRAME_MIN || len > FAB_FRAME_MAX)
		return -EINVAL;
	if (fab_get16(h->eth.type) != FAB_ETHERTYPE_IPV4 || h->ip.ver_ihl != 0x45 ||
	    fab_get16(h->ip.tot_len) != len - FAB_ETH_HLEN)
		return -EINVAL;
	fab_put16(h->ip.csum, fab_ip4_csum(&h->ip));
	fab_put16(h->udp.csum, 0);
	put_icrc(frame, len - FAB_ICRC_LEN);
	return 0;
}

int fab_pkt_icrc_fill(uint8_t *frame, size_t len)
{
	if (!frame || len < FAB_FRAME_MIN || len > FAB_FRAME_MAX)
		return -EINVAL;
	put_icrc(frame, len - FAB_ICRC_LEN);
	return 0;
}

/* ---- Decoder -------------------------------------------------------------------- */

/* The shortest IPv4 packet: IPv4, UDP, BTH and ICRC. */
#define IP_MIN (FAB_IP4_HLEN + FAB_UDP_HLEN + FAB_BTH_LEN + FAB_ICRC_LEN)
/* Ethernet's minimum frame without FCS; shorter packets are padded to it. */
#define ETH_ZLEN 60u

static bool mac_matches(const uint8_t mac[6], const uint8_t ip[4])
{
	return mac[0] == 0x02 && mac[1] == 0x00 && memcmp(mac + 2, ip, 4) == 0;
}

/*
 * Verify a non-zero UDP checksum over the pseudo-header and the datagram of
 * udp_len bytes, whose first bytes, up to hlen of the frame, are in the
 * header copy hdr and the rest in the frame.  hlen is even or the end of
 * the datagram, so no 16-bit word straddles the two.
 */
static bool udp_csum_ok(const uint8_t *hdr, size_t hlen, const uint8_t *frame, size_t udp_len)
{
	const size_t at = FAB_ETH_HLEN + FAB_IP4_HLEN;
	size_t copied = hlen - at < udp_len ? hlen - at : udp_len;
	uint64_t sum = sum16(0, ((const struct fab_roce_hdr *)hdr)->ip.saddr, 8);

	sum += FAB_IPPROTO_UDP + udp_len;
	sum = sum16(sum, hdr + at, copied);
	sum = sum16(sum, frame + at + copied, udp_len - copied);
	return fold16(sum) == 0xffff;
}

/*
 * The checks before the ICRC: those that find the IPv4 packet and its end,
 * on the header copy hdr (hlen bytes of the frame's len).  Returns the
 * reason, and *ip_len on success.
 */
static enum fab_wire_err check_ip_udp(const uint8_t *hdr, size_t hlen, const uint8_t *frame,
				      size_t len, size_t *ip_len)
{
	const struct fab_roce_hdr *h = (const struct fab_roce_hdr *)hdr;
	size_t tot, udp_len;
	uint16_t csum;

	if (fab_get16(h->eth.type) != FAB_ETHERTYPE_IPV4)
		return FAB_WIRE_E_NOT_IPV4;
	if (h->ip.ver_ihl != 0x45)
		return FAB_WIRE_E_IP_HDR;
	tot = fab_get16(h->ip.tot_len);
	if (tot < IP_MIN || FAB_ETH_HLEN + tot > len ||
	    (FAB_ETH_HLEN + tot < len && len > ETH_ZLEN))
		return FAB_WIRE_E_IP_LEN;
	if (fab_get16(h->ip.frag) & ~FAB_IP4_DF)
		return FAB_WIRE_E_IP_FRAG;
	if (ip4_sum(&h->ip, false) != 0xffff)
		return FAB_WIRE_E_IP_CSUM;
	if (!mac_matches(h->eth.dst, h->ip.daddr) || !mac_matches(h->eth.src, h->ip.saddr))
		return FAB_WIRE_E_ETH_ADDR;
	if (h->ip.proto != FAB_IPPROTO_UDP)
		return FAB_WIRE_E_NOT_UDP;
	if (fab_get16(h->udp.dport) != FAB_ROCE_PORT)
		return FAB_WIRE_E_UDP_PORT;
	udp_len = fab_get16(h->udp.len);
	if (udp_len != tot - FAB_IP4_HLEN)
		return FAB_WIRE_E_UDP_LEN;
	csum = fab_get16(h->udp.csum);
	if (csum && !udp_csum_ok(hdr, hlen, frame, udp_len))
		return FAB_WIRE_E_UDP_CSUM;
	*ip_len = tot;
	return FAB_WIRE_E_NONE;
}

/* Read the extension headers the opcode has into pkt. */
static void read_ext(const uint8_t *ext, uint8_t hdrs, struct fab_pkt *pkt)
{
	if (hdrs & FAB_HDR_DETH) {
		const struct fab_deth *d = (const struct fab_deth *)ext;

		pkt->has_deth = true;
		pkt->qkey = fab_get32(d->qkey);
		pkt->src_qpn = fab_get24(d->src_qpn);
		ext += sizeof(*d);
	}
	if (hdrs & FAB_HDR_RETH) {
		const struct fab_reth *r = (const struct fab_reth *)ext;

		pkt->has_reth = true;
		pkt->va = fab_get64(r->va);
		pkt->rkey = fab_get32(r->rkey);
		pkt->dma_len = fab_get32(r->dma_len);
		ext += sizeof(*r);
	}
	if (hdrs & FAB_HDR_AETH) {
		const struct fab_aeth *a = (const struct fab_aeth *)ext;

		pkt->has_aeth = true;
		pkt->syndrome = a->syndrome;
		pkt->msn = fab_get24(a->msn);
		ext += sizeof(*a);
	}
	if (hdrs & FAB_HDR_IMMDT) {
		pkt->has_imm = true;
		pkt->imm = fab_get32(((const struct fab_immdt *)ext)->imm);
	}
}

#define HDR_COPY FAB_HDR_COPY
_Static_assert(HDR_COPY % 2 == 0, "the copy ends between two 16-bit words");
_Static_assert(HDRS_LEN(FAB_HDR_RETH | FAB_HDR_IMMDT) <= FAB_EXT_MAX &&
		   HDRS_LEN(FAB_HDR_DETH | FAB_HDR_IMMDT) <= FAB_EXT_MAX &&
		   HDRS_LEN(FAB_HDR_AETH | FAB_HDR_ATOMICACKETH) <= FAB_EXT_MAX &&
		   HDRS_LEN(FAB_HDR_IETH) <= FAB_EXT_MAX &&
		   HDRS_LEN(FAB_HDR_CNP_PAD) <= FAB_EXT_MAX,
	       "the copy holds the extension headers of every opcode in the table");

/*
 * The frame may lie in shared memory that another process can write while
 * it is decoded (the fabric's frame pool: fab.h).  So its headers are copied
 * out first, in one pass, and every check and every field decoded reads the
 * copy, never the frame: a header checked is the header used.  The ICRC is
 * checked over the copy's headers followed by the payload where it lies.
 * The payload is not copied: a writer that changes it after the check
 * changes the data of a packet it could have sent with that data in the
 * first place, while the headers, which decide where the data goes and how
 * much of it there is, are the ones the ICRC covered.
 */
static enum fab_wire_err decode(const uint8_t *frame, size_t len, struct fab_pkt *pkt,
				unsigned flags)
{
	uint8_t hdr[HDR_COPY];
	const struct fab_roce_hdr *h = (const struct fab_roce_hdr *)hdr;
	size_t hlen = len < sizeof(hdr) ? len : sizeof(hdr);
	const struct fab_opcode_info *oi;
	enum fab_wire_err err;
	size_t ip_len, end, data;
	uint8_t icrc[FAB_ICRC_LEN];
	unsigned pad;

	if (len < FAB_FRAME_MIN)
		return FAB_WIRE_E_SHORT;
	/* A constant length for the common case: the compiler copies it
	 * with a few vector moves instead of a call. */
	if (hlen == sizeof(hdr))
		memcpy(hdr, frame, sizeof(hdr));
	else
		memcpy(hdr, frame, hlen);
	/* A compiler barrier: the decoder reads hdr from here on, and the
	 * compiler may not read the frame again in its place. */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	err = check_ip_udp(hdr, hlen, frame, len, &ip_len);
	if (err != FAB_WIRE_E_NONE)
		return err;
	end = FAB_ETH_HLEN + ip_len - FAB_ICRC_LEN; /* where the ICRC starts */
	if (!(flags & FAB_PKT_NO_ICRC)) {
		memcpy(icrc, frame + end, sizeof(icrc));
		if (fab_icrc_from_copy(hdr, hlen, frame, end) != fab_le32(icrc))
			return FAB_WIRE_E_ICRC;
	}

	if (h->bth.flags & FAB_BTH_TVER_MASK)
		return FAB_WIRE_E_BTH_TVER;
	oi = fab_opcode_info(h->bth.opcode);
	if (!oi)
		return FAB_WIRE_E_OPCODE_UNKNOWN;
	if (!(oi->flags & FAB_OPF_SUPPORTED))
		return FAB_WIRE_E_OPCODE_UNSUPPORTED;
	if (end - FAB_HDR_BASE < oi->ext_len)
		return FAB_WIRE_E_EXT_TRUNC;
	data = end - FAB_HDR_BASE - oi->ext_len; /* payload and pad */
	pad = (h->bth.flags & FAB_BTH_PAD_MASK) >> FAB_BTH_PAD_SHIFT;
	if (data && !(oi->flags & FAB_OPF_PAYLOAD))
		return FAB_WIRE_E_PAYLOAD;
	if (data % 4 || pad > data)
		return FAB_WIRE_E_PAD;
	if (data - pad > FAB_MTU)
		return FAB_WIRE_E_MTU;

	memset(pkt, 0, sizeof(*pkt));
	/* The extension headers end before the ICRC and within HDR_COPY. */
	read_ext(hdr + FAB_HDR_BASE, oi->hdrs, pkt);
	if (pkt->has_aeth && !fab_aeth_syndrome_valid(pkt->syndrome))
		return FAB_WIRE_E_AETH_SYNDROME;

	memcpy(&pkt->src_ip, h->ip.saddr, 4);
	memcpy(&pkt->dst_ip, h->ip.daddr, 4);
	pkt->udp_sport = fab_get16(h->udp.sport);
	pkt->opcode = h->bth.opcode;
	pkt->se = h->bth.flags & FAB_BTH_SE;
	pkt->mig = h->bth.flags & FAB_BTH_MIG;
	pkt->pad = (uint8_t)pad;
	pkt->pkey = fab_get16(h->bth.pkey);
	pkt->fecn = h->bth.fb & FAB_BTH_FECN;
	pkt->becn = h->bth.fb & FAB_BTH_BECN;
	pkt->dest_qpn = fab_get24(h->bth.qpn);
	pkt->ack_req = h->bth.ack_req & FAB_BTH_ACKREQ;
	pkt->psn = fab_get24(h->bth.psn);
	pkt->payload = frame + FAB_HDR_BASE + oi->ext_len;
	pkt->payload_len = (uint32_t)(data - pad);
	return FAB_WIRE_E_NONE;
}

int fab_pkt_decode(const uint8_t *frame, size_t len, struct fab_pkt *out, enum fab_wire_err *why)
{
	return fab_pkt_decode_opt(frame, len, out, why, 0);
}

int fab_pkt_decode_opt(const uint8_t *frame, size_t len, struct fab_pkt *out,
		       enum fab_wire_err *why, unsigned flags)
{
	struct fab_pkt pkt;
	enum fab_wire_err err;

	if (!frame || !out)
		return -EINVAL;
	err = decode(frame, len, &pkt, flags);
	if (why)
		*why = err;
	if (err != FAB_WIRE_E_NONE)
		return -EBADMSG;
	*out = pkt;
	return 0;
}

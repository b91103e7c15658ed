/*
 * Unit tests of the RoCEv2 wire format (fabric/include/fab_wire.h): the
 * CRC-32 and the ICRC against implementations written here independently
 * (bitwise CRC, masking by absolute frame offsets) and against fixed vectors
 * (the CRC-32 check value, rxe's seed, a frame captured from a ConnectX-4 Lx,
 * a nicsim frame worked out by hand); encode/decode round trips for every
 * supported opcode, payload length class and pad count; one targeted
 * corruption per refusal reason; truncation at every length; random
 * corruption; and the fields the ICRC deliberately leaves out.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fab_addr.h"
#include "fab_wire.h"
#include "nstest.h"
#include "nstwire.h"

/* ---- Independent references (also tests/support/nstwire.h) ---------------- */

/* RFC 1071 checksum of n bytes (n even), 32-bit accumulation. */
static uint16_t ref_inet_csum(const uint8_t *p, size_t n, uint32_t sum)
{
	for (size_t i = 0; i < n; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* The IPv4 header checksum written back, as a router does after a change. */
static void fix_ip_csum(uint8_t *frame)
{
	frame[24] = frame[25] = 0;
	uint16_t c = ref_inet_csum(frame + 14, 20, 0);
	frame[24] = (uint8_t)(c >> 8);
	frame[25] = (uint8_t)c;
}

/* A valid UDP checksum (pseudo-header included) written into the frame. */
static void set_udp_csum(uint8_t *frame, size_t len)
{
	size_t udp_len = len - 34;
	uint32_t pseudo = 0;
	uint16_t c;

	for (int i = 0; i < 8; i += 2)
		pseudo += (uint32_t)(frame[26 + i] << 8 | frame[27 + i]);
	pseudo += 17 + (uint32_t)udp_len;
	frame[40] = frame[41] = 0;
	NST_REQUIRE(udp_len % 2 == 0);
	c = ref_inet_csum(frame + 34, udp_len, pseudo);
	if (c == 0)
		c = 0xffff; /* 0 means "no checksum" */
	frame[40] = (uint8_t)(c >> 8);
	frame[41] = (uint8_t)c;
}

/* ---- Helpers ------------------------------------------------------------------ */

struct rng {
	uint64_t s;
};

/* A fixed seed makes every run the same. */
static uint64_t rnd(struct rng *r)
{
	return nst_splitmix64(&r->s);
}

static const uint8_t every_supported[] = {
    FAB_OP_SEND_FIRST,
    FAB_OP_SEND_MIDDLE,
    FAB_OP_SEND_LAST,
    FAB_OP_SEND_LAST_WITH_IMMEDIATE,
    FAB_OP_SEND_ONLY,
    FAB_OP_SEND_ONLY_WITH_IMMEDIATE,
    FAB_OP_RDMA_WRITE_FIRST,
    FAB_OP_RDMA_WRITE_MIDDLE,
    FAB_OP_RDMA_WRITE_LAST,
    FAB_OP_RDMA_WRITE_LAST_WITH_IMMEDIATE,
    FAB_OP_RDMA_WRITE_ONLY,
    FAB_OP_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
    FAB_OP_RDMA_READ_REQUEST,
    FAB_OP_RDMA_READ_RESPONSE_FIRST,
    FAB_OP_RDMA_READ_RESPONSE_MIDDLE,
    FAB_OP_RDMA_READ_RESPONSE_LAST,
    FAB_OP_RDMA_READ_RESPONSE_ONLY,
    FAB_OP_ACKNOWLEDGE,
    FAB_OP_UD_SEND_ONLY,
    FAB_OP_UD_SEND_ONLY_WITH_IMMEDIATE,
};
#define N_SUPPORTED (sizeof(every_supported) / sizeof(every_supported[0]))

/* A valid syndrome of each kind in turn. */
static uint8_t some_syndrome(struct rng *r)
{
	switch (rnd(r) % 3) {
	case 0: return fab_aeth_ack((unsigned)rnd(r));
	case 1: return fab_aeth_rnr_nak((unsigned)rnd(r));
	default: return fab_aeth_nak((enum fab_nak_code)(rnd(r) % 5));
	}
}

/* A packet of opcode with every field random and payload_len bytes of payload. */
static void random_pkt(struct rng *r, struct fab_pkt *p, uint8_t opcode, const uint8_t *payload,
		       uint32_t payload_len)
{
	NST_REQUIRE_EQ(fab_pkt_init(p, opcode), 0);
	p->src_ip = fab_addr_host(1 + (uint32_t)(rnd(r) % 1000));
	p->dst_ip = fab_addr_host(1 + (uint32_t)(rnd(r) % 1000));
	p->udp_sport = (uint16_t)rnd(r);
	p->se = rnd(r) & 1;
	p->mig = rnd(r) & 1;
	p->fecn = rnd(r) & 1;
	p->becn = rnd(r) & 1;
	p->ack_req = rnd(r) & 1;
	p->pkey = (uint16_t)rnd(r);
	p->dest_qpn = (uint32_t)rnd(r) & FAB_MASK24;
	p->psn = (uint32_t)rnd(r) & FAB_MASK24;
	if (p->has_reth) {
		p->va = rnd(r);
		p->rkey = (uint32_t)rnd(r);
		p->dma_len = (uint32_t)rnd(r);
	}
	if (p->has_aeth) {
		p->syndrome = some_syndrome(r);
		p->msn = (uint32_t)rnd(r) & FAB_MASK24;
	}
	if (p->has_imm)
		p->imm = (uint32_t)rnd(r);
	if (p->has_deth) {
		p->qkey = (uint32_t)rnd(r);
		p->src_qpn = (uint32_t)rnd(r) & FAB_MASK24;
	}
	p->payload = payload;
	p->payload_len = payload_len;
}

/* Every field of the decoded packet d equals what was encoded from e. */
static void check_same(const struct fab_pkt *e, const struct fab_pkt *d, unsigned pad)
{
	NST_EQ_U(d->src_ip, e->src_ip);
	NST_EQ_U(d->dst_ip, e->dst_ip);
	NST_EQ_U(d->udp_sport, e->udp_sport);
	NST_EQ_U(d->opcode, e->opcode);
	NST_EQ(d->se, e->se);
	NST_EQ(d->mig, e->mig);
	NST_EQ(d->fecn, e->fecn);
	NST_EQ(d->becn, e->becn);
	NST_EQ(d->ack_req, e->ack_req);
	NST_EQ(d->pad, pad);
	NST_EQ_U(d->pkey, e->pkey);
	NST_EQ_U(d->dest_qpn, e->dest_qpn);
	NST_EQ_U(d->psn, e->psn);
	NST_EQ(d->has_reth, e->has_reth);
	NST_EQ_U(d->va, e->va);
	NST_EQ_U(d->rkey, e->rkey);
	NST_EQ_U(d->dma_len, e->dma_len);
	NST_EQ(d->has_aeth, e->has_aeth);
	NST_EQ_U(d->syndrome, e->syndrome);
	NST_EQ_U(d->msn, e->msn);
	NST_EQ(d->has_imm, e->has_imm);
	NST_EQ_U(d->imm, e->imm);
	NST_EQ(d->has_deth, e->has_deth);
	NST_EQ_U(d->qkey, e->qkey);
	NST_EQ_U(d->src_qpn, e->src_qpn);
	NST_EQ(d->payload_len, e->payload_len);
	if (d->payload_len == e->payload_len && e->payload_len)
		NST_TRUE(memcmp(d->payload, e->payload, e->payload_len) == 0);
}

/* The IPv4/UDP framing of a frame of len bytes, checked byte by byte. */
static void check_framing(const uint8_t *f, size_t len)
{
	NST_EQ_U(f[0], 0x02);
	NST_EQ_U(f[1], 0x00);
	NST_TRUE(memcmp(f + 2, f + 30, 4) == 0); /* dst MAC carries dst IPv4 */
	NST_EQ_U(f[6], 0x02);
	NST_EQ_U(f[7], 0x00);
	NST_TRUE(memcmp(f + 8, f + 26, 4) == 0); /* src MAC carries src IPv4 */
	NST_EQ_U(f[12] << 8 | f[13], 0x0800);
	NST_EQ_U(f[14], 0x45);
	NST_EQ_U(f[15], 0);                        /* DSCP 0, ECN 0 */
	NST_EQ(f[16] << 8 | f[17], len - 14);      /* total length */
	NST_EQ_U(f[20] << 8 | f[21], 0x4000);      /* DF */
	NST_EQ(f[22], 64);                         /* TTL */
	NST_EQ(f[23], 17);                         /* UDP */
	NST_EQ_U(ref_inet_csum(f + 14, 20, 0), 0); /* checksum valid */
	NST_EQ(f[36] << 8 | f[37], 4791);
	NST_EQ(f[38] << 8 | f[39], len - 34); /* UDP length */
	NST_EQ_U(f[40] << 8 | f[41], 0);      /* no UDP checksum */
	NST_EQ_U(f[43] & 0x0f, 0);            /* TVer */
	NST_EQ(len % 4, (14 + 20 + 8) % 4);   /* IB part a multiple of 4 */
}

static size_t encode_ok(const struct fab_pkt *p, uint8_t *frame, size_t cap)
{
	size_t len = 0;

	NST_REQUIRE_EQ(fab_pkt_encode(p, frame, cap, &len), 0);
	return len;
}

static enum fab_wire_err decode_why(const uint8_t *frame, size_t len)
{
	struct fab_pkt out;
	enum fab_wire_err why = FAB_WIRE_E_MAX_;
	int rc = fab_pkt_decode(frame, len, &out, &why);

	NST_EQ(rc, why == FAB_WIRE_E_NONE ? 0 : -EBADMSG);
	return why;
}

/* A simple valid frame: SEND_ONLY with payload_len bytes 0, 1, 2, ... */
static size_t simple_frame(uint8_t *frame, uint8_t opcode, uint32_t payload_len)
{
	uint8_t payload[FAB_MTU];
	struct fab_pkt p;

	for (uint32_t i = 0; i < payload_len; i++)
		payload[i] = (uint8_t)i;
	NST_REQUIRE_EQ(fab_pkt_init(&p, opcode), 0);
	p.src_ip = fab_addr_host(1);
	p.dst_ip = fab_addr_host(2);
	p.udp_sport = fab_udp_sport(17);
	p.dest_qpn = 0x123456;
	p.psn = 0xabcdef;
	p.payload = payload;
	p.payload_len = payload_len;
	return encode_ok(&p, frame, FAB_FRAME_MAX);
}

/* ---- CRC-32 ---------------------------------------------------------------------- */

static void test_crc32_known_answers(void)
{
	static const uint8_t check[] = "123456789";
	static const uint8_t ffs[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

	/*
	 * 0xcbf43926 is the published check value of CRC-32 (ISO-HDLC, the
	 * zlib/Ethernet CRC) for the ASCII string "123456789" (Williams'
	 * catalogue, reveng "CRC-32/ISO-HDLC").  Both implementations must
	 * give it.
	 */
	NST_EQ_U(fab_crc32(0, check, 9), 0xcbf43926u);
	NST_EQ_U(nst_crc32(check, 9), 0xcbf43926u);
	NST_EQ_U(fab_crc32(0, NULL, 0), 0);
	/* Chaining: the CRC of a message split anywhere equals the whole. */
	for (size_t k = 0; k <= 9; k++)
		NST_EQ_U(fab_crc32(fab_crc32(0, check, k), check + k, 9 - k), 0xcbf43926u);
	/*
	 * rxe starts its ICRC from 0xdebb20e3, "the result of computing a CRC
	 * with a seed of 0xffffffff and 8 bytes of 0xff representing a masked
	 * LRH": the reference must reproduce that register value.
	 */
	NST_EQ_U(nst_crc_reg(0xffffffffu, ffs, 8), 0xdebb20e3u);
}

static void test_crc32_fast_paths_match_bitwise(void)
{
	struct rng r = {1};
	uint8_t buf[4200 + 8];

	/*
	 * Every byte value at every position of an 8-byte block, starting
	 * from a random CRC: touches every entry of all eight tables.
	 */
	for (unsigned pos = 0; pos < 8; pos++) {
		for (unsigned v = 0; v < 256; v++) {
			uint8_t blk[8] = {0};
			uint32_t seed = (uint32_t)rnd(&r);

			blk[pos] = (uint8_t)v;
			NST_EQ_U(fab_crc32_sliced(seed, blk, 8), ~nst_crc_reg(~seed, blk, 8));
		}
	}
	/*
	 * Every length up to 300 at every alignment, and long buffers, by
	 * both the table path and fab_crc32 (which folds with PCLMULQDQ from
	 * 64 bytes on where the CPU has it), from zero and non-zero CRCs.
	 */
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)rnd(&r);
	for (size_t off = 0; off < 8; off++) {
		for (size_t n = 0; n <= 300; n++) {
			uint32_t want = nst_crc32(buf + off, n);
			uint32_t seed = (uint32_t)rnd(&r);

			NST_EQ_U(fab_crc32(0, buf + off, n), want);
			NST_EQ_U(fab_crc32_sliced(0, buf + off, n), want);
			NST_EQ_U(fab_crc32(seed, buf + off, n), ~nst_crc_reg(~seed, buf + off, n));
		}
	}
	/* 256 bytes and more take the 512-bit folding where the CPU has it:
	 * every remainder of its 256- and 64-byte steps. */
	for (size_t n = 256; n <= 1100; n++)
		NST_EQ_U(fab_crc32(0, buf + 5, n), nst_crc32(buf + 5, n));
	for (size_t n = 4090; n <= 4200; n++) {
		NST_EQ_U(fab_crc32(0, buf + 3, n), nst_crc32(buf + 3, n));
		NST_EQ_U(fab_crc32_sliced(0, buf + 3, n), nst_crc32(buf + 3, n));
	}
}

/* ---- ICRC against fixed vectors ------------------------------------------------- */

/*
 * A RoCEv2 CNP captured from a Mellanox ConnectX-4 Lx, as published in the
 * scapy RoCE tests (test/contrib/roce.uts, "RoCE CNP captured on ConnectX-4
 * Lx"): hardware computed its ICRC, the last 4 bytes 82 fd 00 2a.  The
 * frame has TOS 0xc2 and BECN set, so it also checks the masking.
 */
static const uint8_t connectx_cnp[74] = {
    0xe4, 0x1d, 0x2d, 0xab, 0x2b, 0xc2, 0x7c, 0xfe, 0x90, 0x64, 0x3b, 0x32, 0x08, 0x00, 0x45,
    0xc2, 0x00, 0x3c, 0x71, 0x8c, 0x40, 0x00, 0x40, 0x11, 0x91, 0x61, 0x0a, 0x00, 0x11, 0x01,
    0x0a, 0x00, 0x12, 0x01, 0x00, 0x00, 0x12, 0xb7, 0x00, 0x28, 0x00, 0x00, 0x81, 0x00, 0xff,
    0xff, 0x40, 0x00, 0x01, 0x18, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x82, 0xfd, 0x00, 0x2a,
};

/*
 * fab_icrc folds the pseudo-header and the start of the frame as one
 * message: every length around the points where that message reaches 256
 * bytes (the folding's first step) and a full MTU, over random bytes.
 */
static void test_icrc_every_length(void)
{
	static uint8_t f[FAB_FRAME_MAX + 64];
	struct rng r = {7};
	size_t n;

	for (size_t i = 0; i < sizeof(f); i++)
		f[i] = (uint8_t)rnd(&r);
	for (n = FAB_HDR_BASE; n <= FAB_HDR_BASE + 600; n++)
		NST_EQ_U(fab_icrc(f, n), nst_icrc(f, n));
	for (n = FAB_FRAME_MAX - 300; n <= sizeof(f); n++) {
		NST_EQ_U(fab_icrc(f, n), nst_icrc(f, n));
		NST_EQ_U(fab_icrc(f + 1, n - 1), nst_icrc(f + 1, n - 1));
	}
	NST_EQ_U(fab_icrc(f, FAB_HDR_BASE - 1), 0);
}

static void test_icrc_matches_connectx_capture(void)
{
	uint8_t f[sizeof(connectx_cnp)];
	size_t n = sizeof(f) - 4;
	uint32_t src, dst;

	memcpy(f, connectx_cnp, sizeof(f));
	/* The CRC value 0x2a00fd82, sent least significant byte first. */
	NST_EQ_U(fab_icrc(f, n), 0x2a00fd82u);
	NST_EQ_U(nst_icrc(f, n), 0x2a00fd82u);
	NST_EQ_U(nst_wire_icrc(f, sizeof(f)), 0x2a00fd82u);

	/*
	 * Decoding: its MACs are not nicsim's (and not covered by the ICRC).
	 * With them rewritten, the frame passes every integrity check, ICRC
	 * included, and is refused only for being a CNP.
	 */
	NST_EQ(decode_why(f, sizeof(f)), FAB_WIRE_E_ETH_ADDR);
	memcpy(&dst, f + 30, 4);
	memcpy(&src, f + 26, 4);
	fab_mac_from_ip(dst, f);
	fab_mac_from_ip(src, f + 6);
	NST_EQ(decode_why(f, sizeof(f)), FAB_WIRE_E_OPCODE_UNSUPPORTED);
	f[70] ^= 1;
	NST_EQ(decode_why(f, sizeof(f)), FAB_WIRE_E_ICRC);
}

/*
 * RC RDMA WRITE Only, 198.18.0.1 -> 198.18.0.2, UDP source port 0xc123,
 * QP 0x11, PSN 0x100 with AckReq, RETH va 0x7f0000001000, rkey 0x1234,
 * length 5, payload "hello" and 3 bytes of pad, worked out field by field
 * from the formats.  The IPv4 checksum 0xae81 is the ones' complement of the
 * sum of the header's 16-bit words.  The ICRC 0xa400aaec was computed
 * outside nicsim with Python's zlib.crc32 over 8 bytes of 0xff and bytes 14..
 * 77 of the frame with offsets 15, 22, 24-25, 40-41 and 46 set to 0xff, and
 * goes on the wire as ec aa 00 a4.  tshark 4.0 decodes this frame as
 * "RC RDMA Write Only" with QP 0x000011, PSN 256, VA 0x00007f0000001000,
 * R_Key 0x00001234, DMA length 5 and "Invariant CRC: 0xecaa00a4".
 */
/* clang-format off */
static const uint8_t hand_frame[82] = {
	/* Ethernet: dst 02:00:198.18.0.2, src 02:00:198.18.0.1, IPv4 */
	0x02, 0x00, 0xc6, 0x12, 0x00, 0x02,  0x02, 0x00, 0xc6, 0x12, 0x00, 0x01,  0x08, 0x00,
	/* IPv4: 0x45, TOS 0, length 68, ID 0, DF, TTL 64, UDP, checksum, addresses */
	0x45, 0x00, 0x00, 0x44,  0x00, 0x00, 0x40, 0x00,  0x40, 0x11, 0xae, 0x81,
	0xc6, 0x12, 0x00, 0x01,  0xc6, 0x12, 0x00, 0x02,
	/* UDP: 0xc123 -> 4791, length 48, no checksum */
	0xc1, 0x23, 0x12, 0xb7,  0x00, 0x30, 0x00, 0x00,
	/* BTH: opcode 0x0a, pad 3, P_Key 0xffff, QP 0x11, AckReq, PSN 0x100 */
	0x0a, 0x30, 0xff, 0xff,  0x00, 0x00, 0x00, 0x11,  0x80, 0x00, 0x01, 0x00,
	/* RETH: va, rkey, DMA length */
	0x00, 0x00, 0x7f, 0x00, 0x00, 0x00, 0x10, 0x00,  0x00, 0x00, 0x12, 0x34,
	0x00, 0x00, 0x00, 0x05,
	/* "hello" and 3 bytes of pad */
	0x68, 0x65, 0x6c, 0x6c, 0x6f,  0x00, 0x00, 0x00,
	/* ICRC 0xa400aaec, least significant byte first */
	0xec, 0xaa, 0x00, 0xa4,
};
/* clang-format on */

static void test_encode_matches_hand_built_frame(void)
{
	uint8_t f[FAB_FRAME_MAX];
	struct fab_pkt p, d;
	size_t len;

	NST_REQUIRE_EQ(fab_pkt_init(&p, FAB_OP_RDMA_WRITE_ONLY), 0);
	p.src_ip = fab_addr_host(1);
	p.dst_ip = fab_addr_host(2);
	p.udp_sport = 0xc123;
	p.dest_qpn = 0x11;
	p.psn = 0x100;
	p.ack_req = true;
	p.va = 0x7f0000001000ull;
	p.rkey = 0x1234;
	p.dma_len = 5;
	p.payload = (const uint8_t *)"hello";
	p.payload_len = 5;
	len = encode_ok(&p, f, sizeof(f));
	NST_REQUIRE_EQ(len, sizeof(hand_frame));
	for (size_t i = 0; i < len; i++) {
		if (f[i] != hand_frame[i]) {
			NST_CHECK_(false, CU_FALSE, "byte %zu: got 0x%02x, want 0x%02x", i, f[i],
				   hand_frame[i]);
			break;
		}
	}
	NST_EQ_U(fab_icrc(f, len - 4), 0xa400aaecu);
	NST_EQ_U(nst_icrc(hand_frame, len - 4), 0xa400aaecu);
	NST_EQ_U(fab_ip4_csum((const struct fab_ip4_hdr *)(f + 14)), 0xae81);

	NST_REQUIRE_EQ(fab_pkt_decode(hand_frame, sizeof(hand_frame), &d, NULL), 0);
	check_same(&p, &d, 3);
}

/* ---- Round trips ------------------------------------------------------------------ */

static void test_round_trip_every_opcode_length_and_pad(void)
{
	static const uint32_t lens[] = {0,    1,    2,    3,    4,    5,    6,    7,
					8,    9,    31,   32,   33,   63,   64,   65,
					1000, 1001, 1002, 1003, 4093, 4094, 4095, 4096};
	struct rng r = {2};
	uint8_t payload[FAB_MTU];
	uint8_t f[FAB_FRAME_MAX];
	unsigned frames = 0;

	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)rnd(&r);
	for (size_t o = 0; o < N_SUPPORTED; o++) {
		uint8_t op = every_supported[o];
		const struct fab_opcode_info *oi = fab_opcode_info(op);
		unsigned pads_seen = 0;

		NST_REQUIRE(oi != NULL);
		for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
			uint32_t plen = lens[li];
			unsigned pad = (4 - plen % 4) % 4;
			struct fab_pkt p, d;
			enum fab_wire_err why = FAB_WIRE_E_MAX_;
			size_t len;

			if (plen && !(oi->flags & FAB_OPF_PAYLOAD))
				continue;
			random_pkt(&r, &p, op,
				   payload + (plen ? rnd(&r) % (FAB_MTU - plen + 1) : 0), plen);
			len = encode_ok(&p, f, sizeof(f));
			NST_EQ(len, fab_pkt_hdr_len(op) + plen + pad + 4);
			NST_EQ((f[43] >> 4) & 3, pad);
			check_framing(f, len);
			for (unsigned k = 0; k < pad; k++)
				NST_EQ(f[len - 4 - pad + k], 0);
			NST_EQ_U(nst_wire_icrc(f, len), nst_icrc(f, len - 4));
			NST_EQ_U(fab_icrc(f, len - 4), nst_icrc(f, len - 4));
			NST_REQUIRE_EQ(fab_pkt_decode(f, len, &d, &why), 0);
			NST_EQ(why, FAB_WIRE_E_NONE);
			check_same(&p, &d, pad);
			NST_TRUE(d.payload == f + fab_pkt_hdr_len(op));
			pads_seen |= 1u << pad;
			frames++;
		}
		/* Every pad count occurs for every opcode that carries payload. */
		NST_EQ_U(pads_seen, (oi->flags & FAB_OPF_PAYLOAD) ? 0xf : 0x1);
	}
	NST_TRUE(frames > 300);
}

static void test_encode_payload_in_place(void)
{
	static const uint8_t data[7] = {1, 2, 3, 4, 5, 6, 7};
	uint8_t a[FAB_FRAME_MAX], b[FAB_FRAME_MAX];
	struct rng r = {3};
	struct fab_pkt p;
	size_t la, lb, hdr = fab_pkt_hdr_len(FAB_OP_RDMA_WRITE_FIRST);

	random_pkt(&r, &p, FAB_OP_RDMA_WRITE_FIRST, data, sizeof(data));
	la = encode_ok(&p, a, sizeof(a));

	/* The DMA engine has put the payload at its place; the rest is junk. */
	memset(b, 0xa5, sizeof(b));
	memcpy(b + hdr, data, sizeof(data));
	p.payload = NULL;
	lb = encode_ok(&p, b, sizeof(b));
	NST_REQUIRE_EQ(lb, la);
	NST_TRUE(memcmp(a, b, la) == 0);

	/* A payload pointer into the frame itself is fine too. */
	p.payload = b + hdr;
	lb = encode_ok(&p, b, sizeof(b));
	NST_TRUE(memcmp(a, b, la) == 0);
}

/*
 * Without the ICRC: the same bytes with zeros where the ICRC goes, which the
 * decoder takes only when told the ICRC was left out, and which the fill
 * turns into the frame the ordinary encoder makes, for every opcode, length
 * and pad.
 */
static void test_encode_without_icrc_then_fill(void)
{
	static const uint32_t lens[] = {0, 1, 2, 3, 4, 5, 64, 1001, 4095, 4096};
	uint8_t a[FAB_FRAME_MAX], b[FAB_FRAME_MAX];
	uint8_t payload[FAB_MTU];
	struct rng r = {11};
	unsigned frames = 0;

	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)rnd(&r);
	for (size_t o = 0; o < N_SUPPORTED; o++) {
		uint8_t op = every_supported[o];

		for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
			struct fab_pkt p, d, e;
			enum fab_wire_err why = FAB_WIRE_E_NONE;
			size_t la, lb = 0;

			if (lens[li] && !(fab_opcode_info(op)->flags & FAB_OPF_PAYLOAD))
				continue;
			random_pkt(&r, &p, op, payload, lens[li]);
			la = encode_ok(&p, a, sizeof(a));
			memset(b, 0xa5, sizeof(b));
			NST_REQUIRE_EQ(fab_pkt_encode_opt(&p, b, sizeof(b), &lb, FAB_PKT_NO_ICRC),
				       0);
			NST_REQUIRE_EQ(lb, la);
			NST_TRUE(memcmp(a, b, la - FAB_ICRC_LEN) == 0);
			NST_EQ(fab_get32(b + la - FAB_ICRC_LEN), 0);
			NST_EQ(fab_pkt_decode(b, lb, &d, &why), -EBADMSG);
			NST_EQ(why, FAB_WIRE_E_ICRC);
			NST_REQUIRE_EQ(fab_pkt_decode_opt(b, lb, &d, &why, FAB_PKT_NO_ICRC), 0);
			NST_REQUIRE_EQ(fab_pkt_decode(a, la, &e, &why), 0);
			check_same(&p, &d, (uint8_t)e.pad);
			NST_EQ(fab_pkt_icrc_fill(b, lb), 0);
			NST_TRUE(memcmp(a, b, la) == 0);
			frames++;
		}
	}
	NST_TRUE(frames > 100);
	/* Everything but the ICRC is still checked. */
	{
		struct fab_pkt p, d;
		enum fab_wire_err why = FAB_WIRE_E_NONE;
		size_t len = 0;

		random_pkt(&r, &p, FAB_OP_SEND_ONLY, payload, 100);
		NST_REQUIRE_EQ(fab_pkt_encode_opt(&p, b, sizeof(b), &len, FAB_PKT_NO_ICRC), 0);
		b[FAB_ETH_HLEN + 10] ^= 1; /* the IPv4 header checksum */
		NST_EQ(fab_pkt_decode_opt(b, len, &d, &why, FAB_PKT_NO_ICRC), -EBADMSG);
		NST_EQ(why, FAB_WIRE_E_IP_CSUM);
		NST_EQ(fab_pkt_icrc_fill(b, FAB_FRAME_MIN - 1), -EINVAL);
		NST_EQ(fab_pkt_icrc_fill(b, FAB_FRAME_MAX + 1), -EINVAL);
		NST_EQ(fab_pkt_icrc_fill(NULL, len), -EINVAL);
	}
}

static void test_encode_refuses_bad_packets(void)
{
	uint8_t f[FAB_FRAME_MAX], before[FAB_FRAME_MAX];
	uint8_t payload[FAB_MTU + 1] = {0};
	struct rng r = {4};
	struct fab_pkt p, q;
	size_t len = 12345;

	random_pkt(&r, &p, FAB_OP_RDMA_WRITE_ONLY_WITH_IMMEDIATE, payload, 10);
	memset(f, 0x5a, sizeof(f));
	memcpy(before, f, sizeof(f));

	q = p;
	q.opcode = 0x15; /* reserved */
	NST_EQ(fab_pkt_encode(&q, f, sizeof(f), &len), -EINVAL);
	q.opcode = FAB_OP_FETCH_ADD;
	NST_EQ(fab_pkt_encode(&q, f, sizeof(f), &len), -EOPNOTSUPP);
	q.opcode = FAB_OP_CNP;
	NST_EQ(fab_pkt_encode(&q, f, sizeof(f), &len), -EOPNOTSUPP);
	q = p;
	q.has_imm = false; /* the opcode needs ImmDt */
	NST_EQ(fab_pkt_encode(&q, f, sizeof(f), &len), -EINVAL);
	q = p;
	q.has_aeth = true; /* and no AETH */
	NST_EQ(fab_pkt_encode(&q, f, sizeof(f), &len), -EINVAL);
	q = p;
	q.dest_qpn = 1u << 24;
	NST_EQ(fab_pkt_encode(&q, f, sizeof(f), &len), -EINVAL);
	q = p;
	q.psn = 1u << 24;
	NST_EQ(fab_pkt_encode(&q, f, sizeof(f), &len), -EINVAL);
	q = p;
	q.payload_len = FAB_MTU + 1;
	NST_EQ(fab_pkt_encode(&q, f, sizeof(f), &len), -EMSGSIZE);
	q = p;
	q.payload_len = 13; /* 54 + 20 + 13 + 3 + 4 = 94 bytes needed */
	NST_EQ(fab_pkt_encode(&q, f, 93, &len), -ENOSPC);
	NST_EQ(fab_pkt_encode(NULL, f, sizeof(f), &len), -EINVAL);
	NST_EQ(fab_pkt_encode(&p, NULL, sizeof(f), &len), -EINVAL);
	NST_EQ(fab_pkt_encode(&p, f, sizeof(f), NULL), -EINVAL);

	random_pkt(&r, &p, FAB_OP_ACKNOWLEDGE, NULL, 0);
	q = p;
	q.payload = payload;
	q.payload_len = 4; /* ACKs carry no payload */
	NST_EQ(fab_pkt_encode(&q, f, sizeof(f), &len), -EINVAL);
	q = p;
	q.msn = 1u << 24;
	NST_EQ(fab_pkt_encode(&q, f, sizeof(f), &len), -EINVAL);
	q = p;
	q.syndrome = 0x40; /* reserved kind */
	NST_EQ(fab_pkt_encode(&q, f, sizeof(f), &len), -EINVAL);
	q.syndrome = fab_aeth_nak((enum fab_nak_code)5); /* undefined NAK code */
	NST_EQ(fab_pkt_encode(&q, f, sizeof(f), &len), -EINVAL);

	random_pkt(&r, &p, FAB_OP_UD_SEND_ONLY, NULL, 0);
	p.src_qpn = 1u << 24;
	NST_EQ(fab_pkt_encode(&p, f, sizeof(f), &len), -EINVAL);

	/* A failed call writes nothing. */
	NST_TRUE(memcmp(f, before, sizeof(f)) == 0);
	NST_EQ(len, 12345);

	/* An exact fit is enough. */
	random_pkt(&r, &p, FAB_OP_SEND_ONLY, payload, 13);
	NST_EQ(fab_pkt_encode(&p, f, 54 + 13 + 3 + 4, &len), 0);
	NST_EQ(len, 74);
	/* The largest frame is FAB_FRAME_MAX. */
	random_pkt(&r, &p, FAB_OP_RDMA_WRITE_ONLY_WITH_IMMEDIATE, payload, FAB_MTU);
	NST_EQ(fab_pkt_encode(&p, f, FAB_FRAME_MAX, &len), 0);
	NST_EQ(len, FAB_FRAME_MAX);
}

/* ---- Refusals ---------------------------------------------------------------------- */

/* Patch a 16-bit big-endian field. */
static void put16(uint8_t *p, unsigned v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* Change the frame's length to len, keeping IPv4 and UDP lengths consistent. */
static void set_lengths(uint8_t *f, size_t len)
{
	put16(f + 16, (unsigned)(len - 14));
	put16(f + 38, (unsigned)(len - 34));
}

static void test_decode_refuses_each_reason(void)
{
	uint8_t f[FAB_FRAME_MAX + 8];
	bool seen[FAB_WIRE_E_MAX_] = {false};
	size_t len;
	enum fab_wire_err why;

#define EXPECT(frame_len, reason)                 \
	do {                                      \
		why = decode_why(f, (frame_len)); \
		NST_EQ(why, reason);              \
		if (why == (reason))              \
			seen[reason] = true;      \
	} while (0)
#define FRESH(op, plen) (len = simple_frame(f, (op), (plen)))

	FRESH(FAB_OP_SEND_ONLY, 10);
	EXPECT(len, FAB_WIRE_E_NONE);

	EXPECT(FAB_FRAME_MIN - 1, FAB_WIRE_E_SHORT);

	put16(f + 12, 0x86dd);
	EXPECT(len, FAB_WIRE_E_NOT_IPV4);

	FRESH(FAB_OP_SEND_ONLY, 10);
	f[14] = 0x65; /* version 6 */
	EXPECT(len, FAB_WIRE_E_IP_HDR);
	f[14] = 0x46; /* IHL 6: options */
	EXPECT(len, FAB_WIRE_E_IP_HDR);

	FRESH(FAB_OP_SEND_ONLY, 10);
	put16(f + 16, (unsigned)(len - 14 + 1)); /* longer than the frame */
	EXPECT(len, FAB_WIRE_E_IP_LEN);
	put16(f + 16, (unsigned)(len - 14 - 4)); /* shorter, frame over 60 bytes */
	EXPECT(len, FAB_WIRE_E_IP_LEN);
	put16(f + 16, 43); /* below IPv4 + UDP + BTH + ICRC */
	EXPECT(len, FAB_WIRE_E_IP_LEN);

	FRESH(FAB_OP_SEND_ONLY, 10);
	put16(f + 20, 0x2000); /* MF */
	EXPECT(len, FAB_WIRE_E_IP_FRAG);
	put16(f + 20, 0x4001); /* offset 8 */
	EXPECT(len, FAB_WIRE_E_IP_FRAG);
	put16(f + 20, 0xc000); /* reserved flag */
	EXPECT(len, FAB_WIRE_E_IP_FRAG);

	FRESH(FAB_OP_SEND_ONLY, 10);
	f[25] ^= 0x01;
	EXPECT(len, FAB_WIRE_E_IP_CSUM);
	FRESH(FAB_OP_SEND_ONLY, 10);
	f[22] = 63; /* a TTL change without the checksum update */
	EXPECT(len, FAB_WIRE_E_IP_CSUM);

	FRESH(FAB_OP_SEND_ONLY, 10);
	f[5] ^= 0x01; /* dst MAC */
	EXPECT(len, FAB_WIRE_E_ETH_ADDR);
	FRESH(FAB_OP_SEND_ONLY, 10);
	f[6] = 0x00; /* src MAC not locally administered */
	EXPECT(len, FAB_WIRE_E_ETH_ADDR);

	FRESH(FAB_OP_SEND_ONLY, 10);
	f[23] = 6; /* TCP */
	fix_ip_csum(f);
	EXPECT(len, FAB_WIRE_E_NOT_UDP);

	FRESH(FAB_OP_SEND_ONLY, 10);
	put16(f + 36, 4792);
	EXPECT(len, FAB_WIRE_E_UDP_PORT);

	FRESH(FAB_OP_SEND_ONLY, 10);
	put16(f + 38, (unsigned)(len - 34 - 4));
	EXPECT(len, FAB_WIRE_E_UDP_LEN);

	FRESH(FAB_OP_SEND_ONLY, 10);
	set_udp_csum(f, len);
	EXPECT(len, FAB_WIRE_E_NONE); /* a correct UDP checksum is accepted */
	f[41] ^= 0x10;
	EXPECT(len, FAB_WIRE_E_UDP_CSUM);

	FRESH(FAB_OP_SEND_ONLY, 10);
	f[60] ^= 0x80; /* payload */
	EXPECT(len, FAB_WIRE_E_ICRC);
	FRESH(FAB_OP_SEND_ONLY, 10);
	f[len - 1] ^= 0x01; /* the ICRC itself */
	EXPECT(len, FAB_WIRE_E_ICRC);

	/* From here on the frame is resealed: valid ICRC, bad meaning. */
	FRESH(FAB_OP_SEND_ONLY, 10);
	f[43] |= 0x01;
	NST_REQUIRE_EQ(fab_pkt_seal(f, len), 0);
	EXPECT(len, FAB_WIRE_E_BTH_TVER);

	FRESH(FAB_OP_SEND_ONLY, 12);
	f[42] = 0x15; /* reserved */
	NST_REQUIRE_EQ(fab_pkt_seal(f, len), 0);
	EXPECT(len, FAB_WIRE_E_OPCODE_UNKNOWN);
	f[42] = 0x24; /* UC SEND Only: UC is not nicsim's */
	NST_REQUIRE_EQ(fab_pkt_seal(f, len), 0);
	EXPECT(len, FAB_WIRE_E_OPCODE_UNKNOWN);

	FRESH(FAB_OP_SEND_ONLY, 28);
	f[42] = FAB_OP_COMPARE_SWAP;
	f[43] &= (uint8_t)~FAB_BTH_PAD_MASK;
	NST_REQUIRE_EQ(fab_pkt_seal(f, len), 0);
	EXPECT(len, FAB_WIRE_E_OPCODE_UNSUPPORTED);
	f[42] = FAB_OP_SEND_ONLY_WITH_INVALIDATE;
	NST_REQUIRE_EQ(fab_pkt_seal(f, len), 0);
	EXPECT(len, FAB_WIRE_E_OPCODE_UNSUPPORTED);

	FRESH(FAB_OP_SEND_ONLY, 16); /* 16 bytes after the BTH; RETH + ImmDt need 20 */
	f[42] = FAB_OP_RDMA_WRITE_ONLY_WITH_IMMEDIATE;
	NST_REQUIRE_EQ(fab_pkt_seal(f, len), 0);
	EXPECT(len, FAB_WIRE_E_EXT_TRUNC);
	FRESH(FAB_OP_SEND_ONLY, 0);
	f[42] = FAB_OP_ACKNOWLEDGE; /* no room for the AETH */
	NST_REQUIRE_EQ(fab_pkt_seal(f, len), 0);
	EXPECT(len, FAB_WIRE_E_EXT_TRUNC);

	FRESH(FAB_OP_SEND_ONLY, 8);
	f[42] = FAB_OP_ACKNOWLEDGE; /* 4 bytes of AETH, 4 of "payload" */
	NST_REQUIRE_EQ(fab_pkt_seal(f, len), 0);
	EXPECT(len, FAB_WIRE_E_PAYLOAD);
	FRESH(FAB_OP_SEND_ONLY, 20);
	f[42] = FAB_OP_RDMA_READ_REQUEST; /* 16 bytes of RETH, 4 of "payload" */
	NST_REQUIRE_EQ(fab_pkt_seal(f, len), 0);
	EXPECT(len, FAB_WIRE_E_PAYLOAD);

	FRESH(FAB_OP_SEND_ONLY, 0);
	f[43] |= 1u << FAB_BTH_PAD_SHIFT; /* pad 1 with nothing after the headers */
	NST_REQUIRE_EQ(fab_pkt_seal(f, len), 0);
	EXPECT(len, FAB_WIRE_E_PAD);
	FRESH(FAB_OP_SEND_ONLY, 7); /* 7 + pad 1 */
	len -= 1;                   /* drop a pad byte: 7 bytes, not a multiple of 4 */
	set_lengths(f, len);
	NST_REQUIRE_EQ(fab_pkt_seal(f, len), 0);
	EXPECT(len, FAB_WIRE_E_PAD);
	FRESH(FAB_OP_ACKNOWLEDGE, 0);
	f[43] |= 3u << FAB_BTH_PAD_SHIFT; /* pad on an opcode without payload */
	NST_REQUIRE_EQ(fab_pkt_seal(f, len), 0);
	EXPECT(len, FAB_WIRE_E_PAD);

	FRESH(FAB_OP_SEND_ONLY, FAB_MTU);
	len += 4; /* 4100 bytes of payload */
	set_lengths(f, len);
	NST_REQUIRE_EQ(fab_pkt_seal(f, len), 0);
	EXPECT(len, FAB_WIRE_E_MTU);

	FRESH(FAB_OP_ACKNOWLEDGE, 0);
	f[54] = 0x40; /* reserved syndrome kind */
	NST_REQUIRE_EQ(fab_pkt_seal(f, len), 0);
	EXPECT(len, FAB_WIRE_E_AETH_SYNDROME);
	f[54] = 0x80; /* reserved bit 7 */
	NST_REQUIRE_EQ(fab_pkt_seal(f, len), 0);
	EXPECT(len, FAB_WIRE_E_AETH_SYNDROME);
	f[54] = 0x65; /* NAK code 5 is undefined */
	NST_REQUIRE_EQ(fab_pkt_seal(f, len), 0);
	EXPECT(len, FAB_WIRE_E_AETH_SYNDROME);
	f[54] = 0x64; /* NAK invalid RD request is defined */
	NST_REQUIRE_EQ(fab_pkt_seal(f, len), 0);
	EXPECT(len, FAB_WIRE_E_NONE);

#undef EXPECT
#undef FRESH
	/* Every reason has a corruption that produces it. */
	for (int e = 0; e < FAB_WIRE_E_MAX_; e++)
		NST_CHECK_(seen[e], CU_FALSE, "reason %s produced", fab_wire_err_name(e));

	/* Bad arguments. */
	NST_EQ(fab_pkt_decode(NULL, 100, (struct fab_pkt[1]){0}, NULL), -EINVAL);
	NST_EQ(fab_pkt_decode(f, len, NULL, NULL), -EINVAL);
}

static void test_decode_failure_leaves_output_alone(void)
{
	uint8_t f[FAB_FRAME_MAX];
	struct fab_pkt out, before;
	size_t len = simple_frame(f, FAB_OP_SEND_ONLY, 9);

	memset(&out, 0x77, sizeof(out));
	before = out;
	f[len - 2] ^= 0xff;
	NST_EQ(fab_pkt_decode(f, len, &out, NULL), -EBADMSG);
	NST_TRUE(memcmp(&out, &before, sizeof(out)) == 0);
}

static void test_ethernet_padding(void)
{
	uint8_t f[64] = {0};
	size_t len = simple_frame(f, FAB_OP_SEND_ONLY, 0);

	NST_REQUIRE_EQ(len, 58);
	/* Padded to Ethernet's 60-byte minimum: accepted, payload still empty. */
	NST_EQ(decode_why(f, 60), FAB_WIRE_E_NONE);
	/* Past 60 bytes, trailing bytes are an error. */
	NST_EQ(decode_why(f, 61), FAB_WIRE_E_IP_LEN);
}

/* A few valid frames of different shapes, for the tests below. */
static size_t sample_frame(unsigned i, uint8_t *f, struct rng *r)
{
	uint8_t payload[FAB_MTU];
	static const struct {
		uint8_t op;
		uint32_t len;
	} shapes[] = {
	    {FAB_OP_SEND_ONLY, 0},
	    {FAB_OP_SEND_ONLY_WITH_IMMEDIATE, 5},
	    {FAB_OP_RDMA_WRITE_ONLY_WITH_IMMEDIATE, 33},
	    {FAB_OP_RDMA_READ_REQUEST, 0},
	    {FAB_OP_RDMA_READ_RESPONSE_FIRST, 256},
	    {FAB_OP_ACKNOWLEDGE, 0},
	    {FAB_OP_UD_SEND_ONLY_WITH_IMMEDIATE, 3},
	    {FAB_OP_RDMA_WRITE_MIDDLE, FAB_MTU},
	};
	struct fab_pkt p;

	for (size_t k = 0; k < sizeof(payload); k++)
		payload[k] = (uint8_t)(k * 7 + 1);
	i %= sizeof(shapes) / sizeof(shapes[0]);
	random_pkt(r, &p, shapes[i].op, payload, shapes[i].len);
	return encode_ok(&p, f, FAB_FRAME_MAX);
}
#define N_SAMPLES 8u

static void test_decode_never_reads_past_len(void)
{
	struct rng r = {5};
	uint8_t f[FAB_FRAME_MAX];

	/*
	 * Each prefix is copied into a heap block of exactly its size, so
	 * that AddressSanitizer and valgrind catch any read past len.
	 */
	for (unsigned s = 0; s < N_SAMPLES; s++) {
		size_t len = sample_frame(s, f, &r);

		for (size_t n = 0; n < len; n++) {
			uint8_t *copy = malloc(n ? n : 1);
			struct fab_pkt out;
			enum fab_wire_err why = FAB_WIRE_E_NONE;

			NST_REQUIRE(copy != NULL);
			memcpy(copy, f, n);
			NST_EQ(fab_pkt_decode(copy, n, &out, &why), -EBADMSG);
			NST_NE(why, FAB_WIRE_E_NONE);
			free(copy);
		}
		uint8_t *copy = malloc(len);
		struct fab_pkt out;

		NST_REQUIRE(copy != NULL);
		memcpy(copy, f, len);
		NST_EQ(fab_pkt_decode(copy, len, &out, NULL), 0);
		free(copy);
	}
}

static void test_decode_rejects_random_corruption(void)
{
	struct rng r = {6};
	uint8_t f[FAB_FRAME_MAX], g[FAB_FRAME_MAX];
	unsigned flips = 0, masked_ok = 0;

	for (unsigned s = 0; s < N_SAMPLES; s++) {
		size_t len = sample_frame(s, f, &r);

		/* One byte changed anywhere, 2000 times per frame. */
		for (unsigned t = 0; t < 2000; t++) {
			size_t at = rnd(&r) % len;
			uint8_t x = (uint8_t)(1 + rnd(&r) % 255);
			enum fab_wire_err why;

			memcpy(g, f, len);
			g[at] ^= x;
			why = decode_why(g, len);
			if (at == 46) {
				/* FECN, BECN, resv6a: masked in the ICRC, no checksum. */
				NST_EQ(why, FAB_WIRE_E_NONE);
				masked_ok++;
			} else {
				NST_CHECK_(why != FAB_WIRE_E_NONE, CU_FALSE,
					   "byte %zu ^ 0x%02x of a %zu-byte frame accepted", at, x,
					   len);
			}
			flips++;
		}
		/* Bursts of random bits inside what the ICRC covers. */
		for (unsigned t = 0; t < 500; t++) {
			size_t at = 47 + rnd(&r) % (len - 47);
			size_t n = 1 + rnd(&r) % 16;

			memcpy(g, f, len);
			for (size_t k = 0; k < n && at + k < len; k++)
				g[at + k] ^= (uint8_t)rnd(&r);
			if (memcmp(f, g, len) != 0)
				NST_NE(decode_why(g, len), FAB_WIRE_E_NONE);
		}
	}
	NST_TRUE(flips == N_SAMPLES * 2000);
	NST_TRUE(masked_ok > 0);
}

static void test_masked_fields_survive_router_rewrites(void)
{
	struct rng r = {7};
	uint8_t f[FAB_FRAME_MAX];

	for (unsigned s = 0; s < N_SAMPLES; s++) {
		size_t len = sample_frame(s, f, &r);
		uint32_t icrc = nst_wire_icrc(f, len);
		struct fab_pkt d;

		/*
		 * What a router or switch may do: DSCP and ECN CE, TTL, the
		 * IPv4 checksum, FECN/BECN, and a UDP checksum (which covers
		 * the BTH, so it comes last).
		 */
		f[15] = 46 << 2 | 3;
		f[22] = 1;
		fix_ip_csum(f);
		f[46] = FAB_BTH_FECN | FAB_BTH_BECN | 0x15;
		set_udp_csum(f, len);
		NST_REQUIRE_EQ(fab_pkt_decode(f, len, &d, NULL), 0);
		NST_TRUE(d.fecn);
		NST_TRUE(d.becn);
		/* The ICRC on the wire was not touched and still matches. */
		NST_EQ_U(nst_wire_icrc(f, len), icrc);
		NST_EQ_U(fab_icrc(f, len - 4), icrc);
		NST_EQ_U(nst_icrc(f, len - 4), icrc);
		/* A field that is not masked does break it (UDP checksum off first). */
		f[40] = f[41] = 0;
		NST_EQ(decode_why(f, len), FAB_WIRE_E_NONE);
		f[44] ^= 0x01; /* P_Key */
		NST_EQ(decode_why(f, len), FAB_WIRE_E_ICRC);
	}
}

static void test_seal_checks_its_input(void)
{
	uint8_t f[FAB_FRAME_MAX];
	size_t len = simple_frame(f, FAB_OP_SEND_ONLY, 4);

	NST_EQ(fab_pkt_seal(NULL, len), -EINVAL);
	NST_EQ(fab_pkt_seal(f, FAB_FRAME_MIN - 1), -EINVAL);
	NST_EQ(fab_pkt_seal(f, len + 4), -EINVAL); /* IPv4 length disagrees */
	f[14] = 0x46;
	NST_EQ(fab_pkt_seal(f, len), -EINVAL);
	f[14] = 0x45;
	f[40] = 0x12; /* a UDP checksum is cleared */
	NST_EQ(fab_pkt_seal(f, len), 0);
	NST_EQ(f[40], 0);
	NST_EQ(decode_why(f, len), FAB_WIRE_E_NONE);
}

/* ---- Tables and helpers ----------------------------------------------------------- */

static void test_opcode_table(void)
{
	unsigned known = 0;
	uint8_t op = 0;

	NST_EQ(fab_pkt_hdr_len(FAB_OP_SEND_ONLY), 54);
	NST_EQ(fab_pkt_hdr_len(FAB_OP_SEND_ONLY_WITH_IMMEDIATE), 58);
	NST_EQ(fab_pkt_hdr_len(FAB_OP_RDMA_WRITE_FIRST), 70);
	NST_EQ(fab_pkt_hdr_len(FAB_OP_RDMA_WRITE_ONLY_WITH_IMMEDIATE), 74);
	NST_EQ(fab_pkt_hdr_len(FAB_OP_RDMA_READ_REQUEST), 70);
	NST_EQ(fab_pkt_hdr_len(FAB_OP_RDMA_READ_RESPONSE_MIDDLE), 54);
	NST_EQ(fab_pkt_hdr_len(FAB_OP_RDMA_READ_RESPONSE_LAST), 58);
	NST_EQ(fab_pkt_hdr_len(FAB_OP_ACKNOWLEDGE), 58);
	NST_EQ(fab_pkt_hdr_len(FAB_OP_ATOMIC_ACKNOWLEDGE), 66);
	NST_EQ(fab_pkt_hdr_len(FAB_OP_COMPARE_SWAP), 82);
	NST_EQ(fab_pkt_hdr_len(FAB_OP_FETCH_ADD), 82);
	NST_EQ(fab_pkt_hdr_len(FAB_OP_SEND_LAST_WITH_INVALIDATE), 58);
	NST_EQ(fab_pkt_hdr_len(FAB_OP_UD_SEND_ONLY), 62);
	NST_EQ(fab_pkt_hdr_len(FAB_OP_UD_SEND_ONLY_WITH_IMMEDIATE), 66);
	NST_EQ(fab_pkt_hdr_len(FAB_OP_CNP), 70);
	NST_EQ(fab_pkt_hdr_len(0x15), 0);
	NST_EQ(fab_pkt_hdr_len(0xff), 0);
	NST_TRUE(strcmp(fab_opcode_name(FAB_OP_RDMA_READ_RESPONSE_ONLY),
			"RC_RDMA_READ_RESPONSE_ONLY") == 0);
	NST_TRUE(strcmp(fab_opcode_name(0x15), "UNKNOWN") == 0);

	for (unsigned i = 0; i < 256; i++) {
		const struct fab_opcode_info *oi = fab_opcode_info((uint8_t)i);

		if (!oi) {
			NST_EQ(fab_pkt_hdr_len((uint8_t)i), 0);
			continue;
		}
		known++;
		NST_EQ(fab_pkt_hdr_len((uint8_t)i), FAB_HDR_BASE + oi->ext_len);
		NST_TRUE(oi->ext_len <= FAB_EXT_MAX);
		if (oi->flags & FAB_OPF_PAYLOAD)
			NST_TRUE(FAB_HDR_BASE + oi->ext_len + FAB_MTU + FAB_ICRC_LEN <=
				 FAB_FRAME_MAX);
		NST_TRUE((oi->flags & (FAB_OPF_FIRST | FAB_OPF_MIDDLE | FAB_OPF_LAST)) != 0);
		NST_TRUE(!(oi->flags & FAB_OPF_MIDDLE) ||
			 !(oi->flags & (FAB_OPF_FIRST | FAB_OPF_LAST)));
		NST_EQ(fab_opcode_parse(oi->name, &op), 0);
		NST_EQ(op, i);
	}
	/* RC 0x00-0x14 and 0x16-0x17, UD 0x64-0x65, CNP. */
	NST_EQ(known, 21 + 2 + 2 + 1);
	NST_EQ(fab_opcode_parse("rc_acknowledge", &op), 0);
	NST_EQ(op, FAB_OP_ACKNOWLEDGE);
	NST_EQ(fab_opcode_parse("ACK", &op), -ENOENT);
	NST_EQ(fab_opcode_parse(NULL, &op), -ENOENT);

	/* Only the immediate opcodes carry ImmDt; only RETH opcodes a RETH. */
	NST_TRUE(fab_opcode_info(FAB_OP_SEND_LAST_WITH_IMMEDIATE)->hdrs == FAB_HDR_IMMDT);
	NST_TRUE(fab_opcode_info(FAB_OP_RDMA_WRITE_ONLY_WITH_IMMEDIATE)->hdrs ==
		 (FAB_HDR_RETH | FAB_HDR_IMMDT));
	NST_TRUE(fab_opcode_info(FAB_OP_RDMA_READ_RESPONSE_MIDDLE)->hdrs == 0);
	NST_TRUE(!(fab_opcode_info(FAB_OP_RDMA_READ_REQUEST)->flags & FAB_OPF_PAYLOAD));
}

static void test_init_sets_headers_from_the_opcode(void)
{
	struct fab_pkt p;

	NST_EQ(fab_pkt_init(&p, FAB_OP_RDMA_WRITE_ONLY_WITH_IMMEDIATE), 0);
	NST_TRUE(p.has_reth && p.has_imm && !p.has_aeth && !p.has_deth);
	NST_EQ_U(p.pkey, 0xffff);
	NST_EQ(fab_pkt_init(&p, FAB_OP_UD_SEND_ONLY), 0);
	NST_TRUE(p.has_deth && !p.has_imm);
	NST_EQ(fab_pkt_init(&p, FAB_OP_FETCH_ADD), -EOPNOTSUPP);
	NST_EQ(fab_pkt_init(&p, 0x15), -EINVAL);
	NST_EQ(fab_pkt_init(NULL, 0), -EINVAL);
}

static void test_aeth_syndromes_and_rnr_timers(void)
{
	NST_EQ_U(fab_aeth_ack(FAB_AETH_CREDITS_INVALID), 0x1f);
	NST_EQ_U(fab_aeth_rnr_nak(14), 0x2e);
	NST_EQ_U(fab_aeth_nak(FAB_NAK_PSN_SEQ_ERROR), 0x60);
	NST_EQ_U(fab_aeth_nak(FAB_NAK_INVALID_REQUEST), 0x61);
	NST_EQ_U(fab_aeth_nak(FAB_NAK_REMOTE_ACCESS_ERROR), 0x62);
	NST_EQ_U(fab_aeth_nak(FAB_NAK_REMOTE_OP_ERROR), 0x63);
	NST_EQ_U(fab_aeth_nak(FAB_NAK_INVALID_RD_REQUEST), 0x64);
	for (unsigned s = 0; s < 256; s++) {
		bool want = s < 0x40 || (s >= 0x60 && s <= 0x64);

		NST_EQ(fab_aeth_syndrome_valid((uint8_t)s), want);
	}
	/* IBTA table 45, in microseconds. */
	NST_EQ(fab_rnr_timer_us(0), 655360);
	NST_EQ(fab_rnr_timer_us(1), 10);
	NST_EQ(fab_rnr_timer_us(14), 1280);
	NST_EQ(fab_rnr_timer_us(25), 61440);
	NST_EQ(fab_rnr_timer_us(31), 491520);
	for (unsigned c = 2; c < 32; c++)
		NST_TRUE(fab_rnr_timer_us(c) > fab_rnr_timer_us(c - 1));
}

static void test_error_names(void)
{
	for (int e = 0; e < FAB_WIRE_E_MAX_; e++) {
		NST_TRUE(strlen(fab_wire_err_str(e)) > 5);
		for (int k = 0; k < e; k++)
			NST_TRUE(strcmp(fab_wire_err_name(e), fab_wire_err_name(k)) != 0);
	}
	NST_TRUE(strcmp(fab_wire_err_name(FAB_WIRE_E_ICRC), "ICRC") == 0);
	NST_TRUE(strcmp(fab_wire_err_name(FAB_WIRE_E_MAX_), "?") == 0);
	NST_TRUE(strcmp(fab_wire_err_str((enum fab_wire_err) - 1), "unknown reason") == 0);
}

static void test_mac_and_source_port(void)
{
	uint8_t mac[6];
	unsigned distinct = 0;
	uint16_t prev = 0;

	fab_mac_from_ip(fab_addr_host(0x1ff), mac); /* 198.18.1.255 */
	NST_EQ_U(mac[0], 0x02);
	NST_EQ_U(mac[1], 0x00);
	NST_EQ_U(mac[2], 198);
	NST_EQ_U(mac[3], 18);
	NST_EQ_U(mac[4], 1);
	NST_EQ_U(mac[5], 255);
	for (uint32_t q = 0; q < 1000; q++) {
		uint16_t s = fab_udp_sport(q);

		NST_TRUE(s >= 0xc000);
		distinct += s != prev;
		prev = s;
	}
	NST_TRUE(distinct > 990);
}

static const struct nst_test tests[] = {
    {"crc32_known_answers", test_crc32_known_answers},
    {"icrc_every_length", test_icrc_every_length},
    {"crc32_fast_paths_match_bitwise", test_crc32_fast_paths_match_bitwise},
    {"icrc_matches_connectx_capture", test_icrc_matches_connectx_capture},
    {"encode_matches_hand_built_frame", test_encode_matches_hand_built_frame},
    {"round_trip_every_opcode_length_and_pad", test_round_trip_every_opcode_length_and_pad},
    {"encode_payload_in_place", test_encode_payload_in_place},
    {"encode_without_icrc_then_fill", test_encode_without_icrc_then_fill},
    {"encode_refuses_bad_packets", test_encode_refuses_bad_packets},
    {"decode_refuses_each_reason", test_decode_refuses_each_reason},
    {"decode_failure_leaves_output_alone", test_decode_failure_leaves_output_alone},
    {"ethernet_padding", test_ethernet_padding},
    {"decode_never_reads_past_len", test_decode_never_reads_past_len},
    {"decode_rejects_random_corruption", test_decode_rejects_random_corruption},
    {"masked_fields_survive_router_rewrites", test_masked_fields_survive_router_rewrites},
    {"seal_checks_its_input", test_seal_checks_its_input},
    {"opcode_table", test_opcode_table},
    {"init_sets_headers_from_the_opcode", test_init_sets_headers_from_the_opcode},
    {"aeth_syndromes_and_rnr_timers", test_aeth_syndromes_and_rnr_timers},
    {"error_names", test_error_names},
    {"mac_and_source_port", test_mac_and_source_port},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	return nst_main(argc, argv, "wire", tests, NULL, NULL);
}

/*
 * libFuzzer target of the wire decoder (fabric/fab_wire.c): any bytes, taken
 * as a frame received from the fabric, go through fab_pkt_decode (every
 * header check and the ICRC), through fab_pkt_decode_opt without the ICRC,
 * and, sealed first (fab_pkt_seal: IPv4 checksum and ICRC made right), once
 * more, so that mutations reach the checks behind the ICRC.  A UD SEND
 * Only that decodes goes on to the CM decoder (fab_cm_decode), as on a NIC.
 *
 * What it asserts (__builtin_trap on a broken promise, fab_wire.h):
 *   - decoding with and without the ICRC agree: a frame refused without
 *     the ICRC check is refused with it (for the same reason, or for its
 *     ICRC when that is checked first), one refused only with it is refused
 *     for its ICRC, and one accepted by both gives the same packet;
 *   - a decoded packet encodes again (fab_pkt_encode), to the length of
 *     the IPv4 packet it came from, and that frame decodes to the same
 *     packet with the same payload bytes;
 *   - encoding without the ICRC and filling it in later (fab_pkt_icrc_fill)
 *     makes the same bytes as fab_pkt_encode.
 * Seeds: tests/fuzz/corpus/frame/ (frames of every supported opcode).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fab_cm.h"
#include "fab_wire.h"
#include "fuzz.h"

/* Every field of two decoded packets, and the payload bytes, agree. */
static bool same_pkt(const struct fab_pkt *a, const struct fab_pkt *b)
{
	return a->src_ip == b->src_ip && a->dst_ip == b->dst_ip && a->udp_sport == b->udp_sport &&
	       a->opcode == b->opcode && a->pad == b->pad && a->se == b->se && a->mig == b->mig &&
	       a->fecn == b->fecn && a->becn == b->becn && a->ack_req == b->ack_req &&
	       a->pkey == b->pkey && a->dest_qpn == b->dest_qpn && a->psn == b->psn &&
	       a->has_reth == b->has_reth && a->va == b->va && a->rkey == b->rkey &&
	       a->dma_len == b->dma_len && a->has_aeth == b->has_aeth &&
	       a->syndrome == b->syndrome && a->msn == b->msn && a->has_imm == b->has_imm &&
	       a->imm == b->imm && a->has_deth == b->has_deth && a->qkey == b->qkey &&
	       a->src_qpn == b->src_qpn && a->payload_len == b->payload_len &&
	       (!a->payload_len || !memcmp(a->payload, b->payload, a->payload_len));
}

/* Decode frame both ways and check the codec's promises on what decodes. */
static void one(const uint8_t *frame, size_t len)
{
	static uint8_t out[FAB_FRAME_MAX], out2[FAB_FRAME_MAX];
	struct fab_pkt p, q, r;
	struct fab_cm_msg cm;
	enum fab_wire_err why, why_no;
	size_t n, n2;
	bool ok, ok_no;

	ok = fab_pkt_decode(frame, len, &p, &why) == 0;
	ok_no = fab_pkt_decode_opt(frame, len, &q, &why_no, FAB_PKT_NO_ICRC) == 0;
	CHECK(why < FAB_WIRE_E_MAX_ && why_no < FAB_WIRE_E_MAX_);
	CHECK(ok == (why == FAB_WIRE_E_NONE) && ok_no == (why_no == FAB_WIRE_E_NONE));
	/* The ICRC is one check among the others: leaving it out may only
	 * turn an ICRC refusal into an acceptance or a later reason. */
	if (!ok_no)
		CHECK(!ok && (why == why_no || why == FAB_WIRE_E_ICRC));
	else if (!ok)
		CHECK(why >= FAB_WIRE_E_ICRC);
	if (!ok_no)
		return;
	if (ok)
		CHECK(same_pkt(&p, &q));
	/* A datagram to the GSI QP goes on to the CM decoder, as on a NIC. */
	if (q.opcode == FAB_OP_UD_SEND_ONLY)
		(void)fab_cm_decode(&q, &cm, NULL);

	/* Decoded, so encodable; the frame it gives is the IPv4 packet's
	 * length (Ethernet padding of short frames dropped). */
	CHECK(fab_pkt_encode(&q, out, sizeof(out), &n) == 0);
	CHECK(n <= len && n == FAB_ETH_HLEN + fab_get16(frame + FAB_ETH_HLEN + 2));
	CHECK(fab_pkt_decode(out, n, &r, NULL) == 0 && same_pkt(&q, &r));
	CHECK(fab_pkt_encode_opt(&q, out2, sizeof(out2), &n2, FAB_PKT_NO_ICRC) == 0 && n2 == n);
	CHECK(fab_pkt_icrc_fill(out2, n2) == 0 && !memcmp(out, out2, n));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t sealed[FAB_FRAME_MAX + 64];

	one(data, size);
	/* The same bytes with their checksums made right, if they can be. */
	if (size <= sizeof(sealed)) {
		memcpy(sealed, data, size);
		if (fab_pkt_seal(sealed, size) == 0)
			one(sealed, size);
	}
	return 0;
}

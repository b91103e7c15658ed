/*
 * libFuzzer target of the CM message decoder (fabric/fab_cm.c): a packet is
 * built around fuzzed MAD bytes, with fuzzed header fields, and handed to
 * fab_cm_decode as a received packet the wire decoder accepted.
 *
 * Input: a 16-byte control block, then the MAD.
 *   byte 0      which header fields are wrong (bits below), so that most
 *               inputs have a right GSI header and reach the MAD checks
 *   bytes 1-7   the wrong values: opcode, dest QP, source QP, Q_Key low
 *               byte, P_Key low byte, payload length (2 bytes)
 *   bytes 8-15  the packet's source and destination IPv4 addresses, which
 *               a REQ's GIDs and IP CM private data must match
 *   the rest    the MAD, zero-padded or cut to 256 bytes (unless bit 0x20
 *               asks for the length of bytes 6-7, at most what is there)
 *
 * What it asserts (__builtin_trap): a message decoded encodes again
 * (fab_cm_encode) and the MAD it gives decodes to the same message; as a
 * whole frame (fab_cm_frame) it passes fab_pkt_decode and decodes to the
 * same message too.  Seeds: tests/fuzz/corpus/cm/ (every message type
 * nicsim sends, from fab_cm_encode).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fab_cm.h"
#include "fab_wire.h"
#include "fuzz.h"

#define CTL_LEN 16u
#define BAD_OPCODE 0x01u
#define BAD_DEST_QP 0x02u
#define BAD_SRC_QP 0x04u
#define BAD_QKEY 0x08u
#define BAD_PKEY 0x10u
#define RAW_LEN 0x20u

static bool same_msg(const struct fab_cm_msg *a, const struct fab_cm_msg *b)
{
	return a->type == b->type && a->tid == b->tid && a->src_ip == b->src_ip &&
	       a->dst_ip == b->dst_ip && a->local_comm_id == b->local_comm_id &&
	       a->remote_comm_id == b->remote_comm_id && a->src_port == b->src_port &&
	       a->dst_port == b->dst_port && a->mtu == b->mtu && a->retry_count == b->retry_count &&
	       a->ack_timeout == b->ack_timeout && a->remote_cm_timeout == b->remote_cm_timeout &&
	       a->local_cm_timeout == b->local_cm_timeout &&
	       a->max_cm_retries == b->max_cm_retries && a->qpn == b->qpn && a->psn == b->psn &&
	       a->responder_resources == b->responder_resources &&
	       a->initiator_depth == b->initiator_depth &&
	       a->rnr_retry_count == b->rnr_retry_count && a->rej_msg == b->rej_msg &&
	       a->reason == b->reason;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t mad[FAB_MAD_LEN], mad2[FAB_MAD_LEN], frame[FAB_CM_FRAME_LEN];
	struct fab_cm_msg m, m2, m3;
	struct fab_pkt pkt, fp;
	enum fab_cm_err why;
	const uint8_t *c = data;
	size_t rest, n;

	if (size < CTL_LEN)
		return 0;
	rest = size - CTL_LEN;
	memset(mad, 0, sizeof(mad));
	memcpy(mad, data + CTL_LEN, rest < sizeof(mad) ? rest : sizeof(mad));

	fab_pkt_init(&pkt, FAB_OP_UD_SEND_ONLY);
	memcpy(&pkt.src_ip, c + 8, 4);
	memcpy(&pkt.dst_ip, c + 12, 4);
	pkt.dest_qpn = c[0] & BAD_DEST_QP ? c[2] : FAB_GSI_QPN;
	pkt.src_qpn = c[0] & BAD_SRC_QP ? c[3] : FAB_GSI_QPN;
	pkt.qkey = c[0] & BAD_QKEY ? (FAB_GSI_QKEY & ~0xffu) | c[4] : FAB_GSI_QKEY;
	pkt.pkey = c[0] & BAD_PKEY ? (uint16_t)(0xff00u | c[5]) : FAB_PKEY_DEFAULT;
	if (c[0] & BAD_OPCODE)
		pkt.opcode = c[1];
	if (c[0] & RAW_LEN) {
		/* Exactly the bytes given, at most: never read past the input. */
		n = (size_t)(c[6] << 8 | c[7]);
		pkt.payload = data + CTL_LEN;
		pkt.payload_len = (uint32_t)(n < rest ? n : rest);
	} else {
		pkt.payload = mad;
		pkt.payload_len = FAB_MAD_LEN;
	}

	if (fab_cm_decode(&pkt, &m, &why) != 0) {
		CHECK(why > FAB_CM_E_NONE && why < FAB_CM_E_MAX_);
		return 0;
	}
	CHECK(m.src_ip == pkt.src_ip && m.dst_ip == pkt.dst_ip);

	/* MAD round trip: decode, encode, decode agree. */
	CHECK(fab_cm_encode(&m, mad2) == 0);
	pkt.payload = mad2;
	pkt.payload_len = FAB_MAD_LEN;
	CHECK(fab_cm_decode(&pkt, &m2, NULL) == 0 && same_msg(&m, &m2));

	/* The whole frame: the wire decoder accepts it, and it carries m. */
	CHECK(fab_cm_frame(&m, 0x123456, frame, sizeof(frame), &n) == 0 && n == FAB_CM_FRAME_LEN);
	CHECK(fab_pkt_decode(frame, n, &fp, NULL) == 0);
	CHECK(fab_cm_decode(&fp, &m3, NULL) == 0 && same_msg(&m, &m3));
	return 0;
}

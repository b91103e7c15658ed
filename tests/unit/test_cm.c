/*
 * Unit tests of the CM message codec (fabric/include/fab_cm.h): a REQ and a
 * REP checked byte by byte against MADs laid out here by hand from the IBTA
 * tables (absolute offsets, not the header's structures); round trips of
 * every message type through complete frames; every encoder refusal; one
 * targeted corruption per decoder refusal reason (each reason at least once);
 * reserved fields ignored on receipt; and random MADs, random lengths and
 * random corruption of valid MADs, which must never crash (run under ASan),
 * and whatever is accepted must re-encode to the same message.
 *
 * Whether tshark decodes these frames is not checked here: CI installs no
 * tshark for unit tests, and a check that skips itself silently would prove
 * nothing.  Captures are checked with tshark where tshark is installed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fab_addr.h"
#include "fab_cm.h"
#include "fab_wire.h"
#include "nstest.h"

/* ---- Helpers -------------------------------------------------------------- */

struct rng {
	uint64_t s;
};

/* A fixed seed makes every run the same. */
static uint64_t rnd(struct rng *r)
{
	return nst_splitmix64(&r->s);
}

static const enum fab_cm_type every_type[] = {
    FAB_CM_REQ, FAB_CM_REP, FAB_CM_RTU, FAB_CM_REJ, FAB_CM_DREQ, FAB_CM_DREP,
};
#define N_TYPES (sizeof(every_type) / sizeof(every_type[0]))

/*
 * A valid message of each type between 198.18.0.1 and 198.18.0.2, with
 * every byte of the IDs, QPN and PSN nonzero, so that zeroing any of them
 * in a test is a change.
 */
static void sample(struct fab_cm_msg *m, enum fab_cm_type type)
{
	NST_REQUIRE_EQ(fab_cm_init(m, type), 0);
	m->tid = 0x0123456789abcdefull;
	m->src_ip = fab_addr_host(1);
	m->dst_ip = fab_addr_host(2);
	m->local_comm_id = 0x11223344;
	if (type != FAB_CM_REQ)
		m->remote_comm_id = 0x55667788;
	switch (type) {
	case FAB_CM_REQ:
		m->src_port = 0xc001;
		m->dst_port = 5001;
		m->qpn = 0x123456;
		m->psn = 0xabcdef;
		break;
	case FAB_CM_REP:
		m->qpn = 0x654321;
		m->psn = 0x010203;
		m->responder_resources = 8;
		m->initiator_depth = 4;
		m->rnr_retry_count = 6;
		break;
	case FAB_CM_REJ: m->reason = FAB_CM_REJ_INVALID_SERVICE_ID; break;
	case FAB_CM_DREQ: m->qpn = 0x0a0b0c; break;
	default: break;
	}
}

/* Field-by-field equality (the structure has padding: no memcmp). */
static bool msg_equal(const struct fab_cm_msg *a, const struct fab_cm_msg *b)
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

/* The fields a message type carries, with the others zeroed as decode leaves them. */
static void carried_only(struct fab_cm_msg *m)
{
	if (m->type != FAB_CM_REQ) {
		m->src_port = m->dst_port = 0;
		m->mtu = 0;
		m->retry_count = m->ack_timeout = 0;
		m->remote_cm_timeout = m->local_cm_timeout = m->max_cm_retries = 0;
	}
	if (m->type != FAB_CM_REQ && m->type != FAB_CM_REP) {
		m->psn = 0;
		m->responder_resources = m->initiator_depth = m->rnr_retry_count = 0;
		if (m->type != FAB_CM_DREQ)
			m->qpn = 0;
	}
	if (m->type != FAB_CM_REJ) {
		m->rej_msg = 0;
		m->reason = 0;
	}
}

static void check_msg(const struct fab_cm_msg *got, const struct fab_cm_msg *want)
{
	NST_EQ_U(got->type, want->type);
	NST_EQ_U(got->tid, want->tid);
	NST_EQ_U(got->src_ip, want->src_ip);
	NST_EQ_U(got->dst_ip, want->dst_ip);
	NST_EQ_U(got->local_comm_id, want->local_comm_id);
	NST_EQ_U(got->remote_comm_id, want->remote_comm_id);
	NST_EQ(got->src_port, want->src_port);
	NST_EQ(got->dst_port, want->dst_port);
	NST_EQ(got->mtu, want->mtu);
	NST_EQ(got->retry_count, want->retry_count);
	NST_EQ(got->ack_timeout, want->ack_timeout);
	NST_EQ(got->remote_cm_timeout, want->remote_cm_timeout);
	NST_EQ(got->local_cm_timeout, want->local_cm_timeout);
	NST_EQ(got->max_cm_retries, want->max_cm_retries);
	NST_EQ_U(got->qpn, want->qpn);
	NST_EQ_U(got->psn, want->psn);
	NST_EQ(got->responder_resources, want->responder_resources);
	NST_EQ(got->initiator_depth, want->initiator_depth);
	NST_EQ(got->rnr_retry_count, want->rnr_retry_count);
	NST_EQ(got->rej_msg, want->rej_msg);
	NST_EQ(got->reason, want->reason);
	NST_TRUE(msg_equal(got, want));
}

/* A decoded packet around mad as fab_pkt_decode would give it for a CM frame. */
static void gsi_pkt(struct fab_pkt *p, const uint8_t *mad, size_t len, uint32_t src, uint32_t dst)
{
	NST_REQUIRE_EQ(fab_pkt_init(p, FAB_OP_UD_SEND_ONLY), 0);
	p->src_ip = src;
	p->dst_ip = dst;
	p->dest_qpn = FAB_GSI_QPN;
	p->src_qpn = FAB_GSI_QPN;
	p->qkey = FAB_GSI_QKEY;
	p->payload = mad;
	p->payload_len = (uint32_t)len;
}

static void put_be(uint8_t *p, size_t len, uint64_t v)
{
	for (size_t i = len; i-- > 0; v >>= 8)
		p[i] = (uint8_t)v;
}

/* ::ffff:198.18.0.n at p (16 bytes). */
static void put_mapped(uint8_t *p, unsigned n)
{
	memset(p, 0, 16);
	p[10] = p[11] = 0xff;
	p[12] = 198;
	p[13] = 18;
	p[14] = 0;
	p[15] = (uint8_t)n;
}

/* A common MAD header for a CM Send of attribute attr, by absolute offset. */
static void put_hdr(uint8_t *mad, uint16_t attr)
{
	mad[0] = 1;    /* BaseVersion */
	mad[1] = 0x07; /* MgmtClass: CM */
	mad[2] = 2;    /* ClassVersion */
	mad[3] = 0x03; /* Method: Send */
	put_be(mad + 8, 8, 0x0123456789abcdefull);
	put_be(mad + 16, 2, attr);
}

static void check_bytes(const uint8_t *got, const uint8_t *want, size_t n)
{
	size_t diffs = 0;

	for (size_t i = 0; i < n; i++) {
		if (got[i] != want[i] && diffs++ < 8)
			NST_CHECK_(false, CU_FALSE, "byte %zu: got 0x%02x, want 0x%02x", i, got[i],
				   want[i]);
	}
	NST_EQ(diffs, 0);
}

/* ---- Layout --------------------------------------------------------------- */

/*
 * The REQ worked out by hand from IBTA table 106 (offsets in the table are
 * from the end of the 24-byte MAD header, so 24 is added here) and annex
 * A11 for the private data.
 */
static void test_req_matches_hand_built_mad(void)
{
	struct fab_cm_msg m;
	uint8_t got[FAB_MAD_LEN], want[FAB_MAD_LEN] = {0};
	const size_t d = 24;

	sample(&m, FAB_CM_REQ);
	m.remote_cm_timeout = 18;
	m.local_cm_timeout = 17;
	m.max_cm_retries = 9;
	NST_REQUIRE_EQ(fab_cm_encode(&m, got), 0);

	put_hdr(want, 0x0010);
	put_be(want + d + 0, 4, 0x11223344);           /* Local Communication ID */
	put_be(want + d + 8, 8, 0x0000000001061389u);  /* ServiceID: TCP port space, port 5001 */
	put_be(want + d + 16, 8, 0x0000c6fffe120001u); /* CA GUID: EUI-64 of 02:00:c6:12:00:01 */
	put_be(want + d + 32, 3, 0x123456);            /* Local QPN */
	want[d + 35] = 16;                             /* Responder Resources */
	want[d + 39] = 16;                             /* Initiator Depth */
	want[d + 43] = 18 << 3 | 0 << 1 | 0;           /* remote CM timeout, RC, no E2E FC */
	put_be(want + d + 44, 3, 0xabcdef);            /* Starting PSN */
	want[d + 47] = 17 << 3 | 7;                    /* local CM timeout, Retry Count 7 */
	put_be(want + d + 48, 2, 0xffff);              /* P_Key */
	want[d + 50] = 5 << 4 | 0 << 3 | 7;            /* MTU 4096, no RDC, RNR retry 7 */
	want[d + 51] = 9 << 4;                         /* Max CM retries 9, no SRQ, no XRC */
	put_be(want + d + 52, 2, 0xffff);              /* primary local LID: permissive */
	put_be(want + d + 54, 2, 0xffff);              /* primary remote LID */
	put_mapped(want + d + 56, 1);                  /* primary local GID */
	put_mapped(want + d + 72, 2);                  /* primary remote GID */
	put_be(want + d + 88, 4, 16);                  /* flow label 0, packet rate 100 Gb/s */
	want[d + 93] = 64;                             /* hop limit */
	want[d + 95] = 14 << 3;                        /* local ACK timeout */
	/* Alternate path (d + 96 .. d + 139) all zero. */
	want[d + 140] = 0x00;                       /* IP CM version 0.0 */
	want[d + 141] = 0x40;                       /* IP version 4 */
	put_be(want + d + 142, 2, 0xc001);          /* source port */
	put_be(want + d + 144 + 12, 4, 0xc6120001); /* source address */
	put_be(want + d + 160 + 12, 4, 0xc6120002); /* destination address */

	check_bytes(got, want, FAB_MAD_LEN);
}

/* REP (table 110), REJ (108), DREQ (112), RTU (111) and DREP (113) by hand. */
static void test_other_messages_match_hand_built_mads(void)
{
	struct fab_cm_msg m;
	uint8_t got[FAB_MAD_LEN], want[FAB_MAD_LEN];
	const size_t d = 24;

	sample(&m, FAB_CM_REP);
	NST_REQUIRE_EQ(fab_cm_encode(&m, got), 0);
	memset(want, 0, sizeof(want));
	put_hdr(want, 0x0013);
	put_be(want + d + 0, 4, 0x11223344);
	put_be(want + d + 4, 4, 0x55667788);
	put_be(want + d + 12, 3, 0x654321); /* Local QPN */
	put_be(want + d + 20, 3, 0x010203); /* Starting PSN */
	want[d + 24] = 8;                   /* Responder Resources */
	want[d + 25] = 4;                   /* Initiator Depth */
	want[d + 26] = 0 << 3 | 1 << 1 | 0; /* ACK delay 0, failover not supported, no E2E */
	want[d + 27] = 6 << 5;              /* RNR retry 6, no SRQ */
	put_be(want + d + 28, 8, 0x0000c6fffe120001u);
	check_bytes(got, want, FAB_MAD_LEN);

	sample(&m, FAB_CM_REJ);
	m.rej_msg = FAB_CM_REJ_MSG_REP;
	NST_REQUIRE_EQ(fab_cm_encode(&m, got), 0);
	memset(want, 0, sizeof(want));
	put_hdr(want, 0x0012);
	put_be(want + d + 0, 4, 0x11223344);
	put_be(want + d + 4, 4, 0x55667788);
	want[d + 8] = 1 << 6; /* Message REJected: REP */
	want[d + 9] = 0;      /* no ARI */
	put_be(want + d + 10, 2, 8);
	check_bytes(got, want, FAB_MAD_LEN);

	sample(&m, FAB_CM_DREQ);
	NST_REQUIRE_EQ(fab_cm_encode(&m, got), 0);
	memset(want, 0, sizeof(want));
	put_hdr(want, 0x0015);
	put_be(want + d + 0, 4, 0x11223344);
	put_be(want + d + 4, 4, 0x55667788);
	put_be(want + d + 8, 3, 0x0a0b0c); /* Remote QPN */
	check_bytes(got, want, FAB_MAD_LEN);

	for (unsigned i = 0; i < 2; i++) {
		enum fab_cm_type t = i ? FAB_CM_DREP : FAB_CM_RTU;

		sample(&m, t);
		NST_REQUIRE_EQ(fab_cm_encode(&m, got), 0);
		memset(want, 0, sizeof(want));
		put_hdr(want, i ? 0x0016 : 0x0014);
		put_be(want + d + 0, 4, 0x11223344);
		put_be(want + d + 4, 4, 0x55667788);
		check_bytes(got, want, FAB_MAD_LEN);
	}
}

/* The frame around the MAD: UD SEND Only, QP 1 to QP 1, GSI Q_Key. */
static void test_frame_headers(void)
{
	struct fab_cm_msg m;
	uint8_t frame[FAB_FRAME_MAX], mad[FAB_MAD_LEN];
	struct fab_pkt p;
	enum fab_wire_err why = FAB_WIRE_E_NONE;
	size_t len = 0;

	sample(&m, FAB_CM_REQ);
	NST_REQUIRE_EQ(fab_cm_frame(&m, 0x00beef, frame, sizeof(frame), &len), 0);
	NST_EQ(len, FAB_CM_FRAME_LEN);
	NST_EQ(len, 322);
	NST_EQ_U(frame[42], 0x64);                   /* BTH opcode: UD SEND Only */
	NST_EQ_U(fab_get16(frame + 44), 0xffff);     /* P_Key */
	NST_EQ_U(fab_get24(frame + 47), 1);          /* destination QP */
	NST_EQ_U(fab_get24(frame + 51), 0x00beef);   /* PSN */
	NST_EQ_U(fab_get32(frame + 54), 0x80010000); /* DETH Q_Key */
	NST_EQ_U(fab_get24(frame + 59), 1);          /* DETH source QP */
	NST_EQ_U(fab_get16(frame + 36), 4791);       /* UDP destination port */
	NST_REQUIRE_EQ(fab_cm_encode(&m, mad), 0);
	check_bytes(frame + 62, mad, FAB_MAD_LEN);

	NST_REQUIRE_EQ(fab_pkt_decode(frame, len, &p, &why), 0);
	NST_EQ(why, FAB_WIRE_E_NONE);
	NST_EQ_U(p.src_ip, m.src_ip);
	NST_EQ_U(p.dst_ip, m.dst_ip);
	NST_EQ(p.payload_len, FAB_MAD_LEN);
	NST_EQ(p.pad, 0);
}

/* ---- Round trips ----------------------------------------------------------- */

static void round_trip(const struct fab_cm_msg *m, uint32_t bth_psn)
{
	uint8_t frame[FAB_FRAME_MAX];
	struct fab_pkt p;
	struct fab_cm_msg got, want = *m;
	enum fab_wire_err wwhy = FAB_WIRE_E_NONE;
	enum fab_cm_err why = FAB_CM_E_NONE;
	size_t len = 0;

	NST_REQUIRE_EQ(fab_cm_frame(m, bth_psn, frame, sizeof(frame), &len), 0);
	NST_REQUIRE_EQ(fab_pkt_decode(frame, len, &p, &wwhy), 0);
	NST_EQ_U(p.psn, bth_psn);
	memset(&got, 0xa5, sizeof(got));
	NST_REQUIRE_EQ(fab_cm_decode(&p, &got, &why), 0);
	carried_only(&want);
	check_msg(&got, &want);
}

static void test_round_trip_every_type(void)
{
	struct fab_cm_msg m;

	for (size_t i = 0; i < N_TYPES; i++) {
		sample(&m, every_type[i]);
		round_trip(&m, (uint32_t)i);
	}
	/* A REJ of a REQ for which nothing was created: local ID 0. */
	sample(&m, FAB_CM_REJ);
	m.local_comm_id = 0;
	m.rej_msg = FAB_CM_REJ_MSG_OTHER;
	m.reason = 0xffff;
	round_trip(&m, FAB_MASK24);
}

/* Every field at its limits, and random values, survive the round trip. */
static void test_round_trip_field_ranges(void)
{
	static const uint32_t mtus[] = {256, 512, 1024, 2048, 4096};
	struct rng r = {42};
	struct fab_cm_msg m;

	for (unsigned i = 0; i < 5; i++) {
		sample(&m, FAB_CM_REQ);
		m.mtu = mtus[i];
		m.qpn = i & 1 ? FAB_MASK24 : 2;
		m.psn = i & 1 ? 0 : FAB_MASK24;
		m.retry_count = (uint8_t)i;
		m.rnr_retry_count = (uint8_t)(7 - i);
		m.ack_timeout = i & 1 ? 31 : 0;
		m.remote_cm_timeout = i & 1 ? 0 : 31;
		m.local_cm_timeout = i & 1 ? 31 : 0;
		m.max_cm_retries = i & 1 ? 15 : 0;
		m.responder_resources = i & 1 ? 255 : 0;
		m.initiator_depth = i & 1 ? 0 : 255;
		m.src_port = i & 1 ? 0xffff : 1;
		m.dst_port = i & 1 ? 1 : 0xffff;
		m.local_comm_id = i & 1 ? 1 : 0xffffffff;
		m.tid = i & 1 ? 0 : ~0ull;
		round_trip(&m, 0);
	}
	for (unsigned i = 0; i < 2000; i++) {
		enum fab_cm_type t = every_type[rnd(&r) % N_TYPES];
		uint64_t x = rnd(&r);

		sample(&m, t);
		m.tid = rnd(&r);
		m.src_ip = fab_addr_host(1 + (uint32_t)(x % 1000));
		m.dst_ip = fab_addr_host(1 + (uint32_t)(x >> 16) % 1000);
		m.local_comm_id = (uint32_t)rnd(&r) | (t == FAB_CM_REJ ? 0 : 1);
		m.remote_comm_id = t == FAB_CM_REQ ? 0 : (uint32_t)rnd(&r) | 1;
		m.qpn = 2 + (uint32_t)(rnd(&r) % (FAB_MASK24 - 1));
		m.psn = (uint32_t)rnd(&r) & FAB_MASK24;
		m.src_port = (uint16_t)(rnd(&r) % 0xffff + 1);
		m.dst_port = (uint16_t)(rnd(&r) % 0xffff + 1);
		m.mtu = mtus[rnd(&r) % 5];
		m.retry_count = (uint8_t)(rnd(&r) & 7);
		m.rnr_retry_count = (uint8_t)(rnd(&r) & 7);
		m.ack_timeout = (uint8_t)(rnd(&r) & 31);
		m.remote_cm_timeout = (uint8_t)(rnd(&r) & 31);
		m.local_cm_timeout = (uint8_t)(rnd(&r) & 31);
		m.max_cm_retries = (uint8_t)(rnd(&r) & 15);
		m.responder_resources = (uint8_t)rnd(&r);
		m.initiator_depth = (uint8_t)rnd(&r);
		m.rej_msg = (enum fab_cm_rej_msg)(rnd(&r) % 3);
		m.reason = (uint16_t)(rnd(&r) % 0xffff + 1);
		round_trip(&m, (uint32_t)rnd(&r) & FAB_MASK24);
	}
}

/* ---- Encoder refusals ------------------------------------------------------ */

static void expect_encode_refused(const struct fab_cm_msg *m, const char *what)
{
	uint8_t mad[FAB_MAD_LEN], frame[FAB_FRAME_MAX];
	size_t len = 7;
	bool untouched = true;
	int rc;

	memset(mad, 0xa5, sizeof(mad));
	memset(frame, 0xa5, sizeof(frame));
	rc = fab_cm_encode(m, mad);
	NST_CHECK_(rc == -EINVAL, CU_FALSE, "encode %s: got %d, want -EINVAL", what, rc);
	rc = fab_cm_frame(m, 0, frame, sizeof(frame), &len);
	NST_CHECK_(rc == -EINVAL, CU_FALSE, "frame %s: got %d, want -EINVAL", what, rc);
	for (size_t i = 0; i < sizeof(mad); i++)
		untouched &= mad[i] == 0xa5;
	for (size_t i = 0; i < sizeof(frame); i++)
		untouched &= frame[i] == 0xa5;
	NST_CHECK_(untouched && len == 7, CU_FALSE, "%s: refused but wrote", what);
}

static void test_encode_refuses_bad_messages(void)
{
	struct fab_cm_msg m;
	uint8_t frame[FAB_FRAME_MAX];
	size_t len = 7;

#define REFUSE(type, stmt)                        \
	do {                                      \
		sample(&m, type);                 \
		stmt;                             \
		expect_encode_refused(&m, #stmt); \
	} while (0)

	REFUSE(FAB_CM_REQ, m.type = FAB_CM_MRA);
	REFUSE(FAB_CM_REQ, m.type = FAB_CM_LAP);
	REFUSE(FAB_CM_REQ, m.type = (enum fab_cm_type)0);
	REFUSE(FAB_CM_REQ, m.type = (enum fab_cm_type)0x1234);
	REFUSE(FAB_CM_REQ, m.local_comm_id = 0);
	REFUSE(FAB_CM_REQ, m.qpn = 0);
	REFUSE(FAB_CM_REQ, m.qpn = 1);
	REFUSE(FAB_CM_REQ, m.qpn = 0x1000000);
	REFUSE(FAB_CM_REQ, m.psn = 0x1000000);
	REFUSE(FAB_CM_REQ, m.retry_count = 8);
	REFUSE(FAB_CM_REQ, m.rnr_retry_count = 8);
	REFUSE(FAB_CM_REQ, m.ack_timeout = 32);
	REFUSE(FAB_CM_REQ, m.remote_cm_timeout = 32);
	REFUSE(FAB_CM_REQ, m.local_cm_timeout = 32);
	REFUSE(FAB_CM_REQ, m.max_cm_retries = 16);
	REFUSE(FAB_CM_REQ, m.mtu = 0);
	REFUSE(FAB_CM_REQ, m.mtu = 128);
	REFUSE(FAB_CM_REQ, m.mtu = 1500);
	REFUSE(FAB_CM_REQ, m.mtu = 8192);
	REFUSE(FAB_CM_REQ, m.src_port = 0);
	REFUSE(FAB_CM_REQ, m.dst_port = 0);
	REFUSE(FAB_CM_REP, m.local_comm_id = 0);
	REFUSE(FAB_CM_REP, m.remote_comm_id = 0);
	REFUSE(FAB_CM_REP, m.qpn = 1);
	REFUSE(FAB_CM_REP, m.qpn = 0xffffffff);
	REFUSE(FAB_CM_REP, m.psn = 0xffffffff);
	REFUSE(FAB_CM_REP, m.rnr_retry_count = 255);
	REFUSE(FAB_CM_RTU, m.local_comm_id = 0);
	REFUSE(FAB_CM_RTU, m.remote_comm_id = 0);
	REFUSE(FAB_CM_REJ, m.remote_comm_id = 0);
	REFUSE(FAB_CM_REJ, m.reason = 0);
	REFUSE(FAB_CM_REJ, m.rej_msg = (enum fab_cm_rej_msg)3);
	REFUSE(FAB_CM_DREQ, m.local_comm_id = 0);
	REFUSE(FAB_CM_DREQ, m.remote_comm_id = 0);
	REFUSE(FAB_CM_DREQ, m.qpn = 0);
	REFUSE(FAB_CM_DREQ, m.qpn = 0x1000002);
	REFUSE(FAB_CM_DREP, m.local_comm_id = 0);
	REFUSE(FAB_CM_DREP, m.remote_comm_id = 0);
#undef REFUSE

	/* Fields a type does not carry are ignored, however wild. */
	sample(&m, FAB_CM_RTU);
	m.qpn = 0xffffffff;
	m.mtu = 3;
	m.reason = 0;
	m.retry_count = 200;
	NST_EQ(fab_cm_frame(&m, 0, frame, sizeof(frame), &len), 0);

	/* Frame-level refusals. */
	sample(&m, FAB_CM_RTU);
	NST_EQ(fab_cm_frame(&m, 0x1000000, frame, sizeof(frame), &len), -EINVAL);
	NST_EQ(fab_cm_frame(&m, 0, frame, FAB_CM_FRAME_LEN - 1, &len), -ENOSPC);
	NST_EQ(fab_cm_frame(&m, 0, frame, FAB_CM_FRAME_LEN, &len), 0);
	NST_EQ(fab_cm_frame(NULL, 0, frame, sizeof(frame), &len), -EINVAL);
	NST_EQ(fab_cm_frame(&m, 0, NULL, sizeof(frame), &len), -EINVAL);
	NST_EQ(fab_cm_frame(&m, 0, frame, sizeof(frame), NULL), -EINVAL);
	NST_EQ(fab_cm_encode(NULL, frame), -EINVAL);
	NST_EQ(fab_cm_encode(&m, NULL), -EINVAL);
}

/* IBTA timeout codes: 4.096 us * 2^code, every code a 5-bit field holds. */
static void test_ib_timeout_codes(void)
{
	NST_EQ_U(fab_ib_timeout_ns(0), 4096);
	NST_EQ_U(fab_ib_timeout_ns(14), 67108864);         /* 67.1 ms, nicsim's default */
	NST_EQ_U(fab_ib_timeout_ns(20), 4294967296ull);    /* 4.3 s, the RDMA CM's */
	NST_EQ_U(fab_ib_timeout_ns(31), 8796093022208ull); /* 2.4 hours */
	for (unsigned c = 1; c <= FAB_CM_TIMEOUT_MAX; c++)
		NST_EQ_U(fab_ib_timeout_ns(c), 2 * fab_ib_timeout_ns(c - 1));
}

static void test_init_defaults(void)
{
	struct fab_cm_msg m;

	for (size_t i = 0; i < N_TYPES; i++) {
		enum fab_cm_type t = every_type[i];
		bool req = t == FAB_CM_REQ, qp = req || t == FAB_CM_REP, rej = t == FAB_CM_REJ;

		memset(&m, 0xff, sizeof(m));
		NST_EQ(fab_cm_init(&m, t), 0);
		NST_EQ(m.type, t);
		NST_EQ(m.mtu, req ? 4096 : 0);
		NST_EQ(m.retry_count, req ? 7 : 0);
		NST_EQ(m.ack_timeout, req ? 14 : 0);
		NST_EQ(m.remote_cm_timeout, req ? 20 : 0);
		NST_EQ(m.local_cm_timeout, req ? 20 : 0);
		NST_EQ(m.max_cm_retries, req ? 15 : 0);
		NST_EQ(m.rnr_retry_count, qp ? 7 : 0);
		NST_EQ(m.responder_resources, qp ? 16 : 0);
		NST_EQ(m.initiator_depth, qp ? 16 : 0);
		NST_EQ(m.rej_msg, FAB_CM_REJ_MSG_REQ);
		NST_EQ(m.reason, rej ? 28 : 0);
		NST_EQ(m.local_comm_id, 0);
		NST_EQ(m.remote_comm_id, 0);
		NST_EQ(m.qpn, 0);
		NST_EQ(m.psn, 0);
		NST_EQ(m.src_ip, 0);
		NST_EQ(m.tid, 0);
	}
	memset(&m, 0xff, sizeof(m));
	NST_EQ(fab_cm_init(&m, FAB_CM_MRA), -EINVAL);
	NST_EQ(m.local_comm_id, 0);
	NST_EQ(fab_cm_init(NULL, FAB_CM_REQ), -EINVAL);
}

/* ---- Decoder refusals ------------------------------------------------------ */

/*
 * One change to a valid MAD of type base, at an absolute offset: with mask
 * 0, the len bytes there become value (big-endian); with a mask, the bits
 * of the byte at off under mask become value's.
 */
struct mad_case {
	enum fab_cm_type base;
	size_t off;
	size_t len;
	uint8_t mask;
	uint64_t value;
	enum fab_cm_err want;
	const char *what;
};

static const struct mad_case mad_cases[] = {
    {FAB_CM_REQ, 0, 1, 0, 2, FAB_CM_E_BASE_VERSION, "base version 2"},
    {FAB_CM_REQ, 0, 1, 0, 0, FAB_CM_E_BASE_VERSION, "base version 0"},
    {FAB_CM_RTU, 1, 1, 0, 0x03, FAB_CM_E_MGMT_CLASS, "class SA"},
    {FAB_CM_REQ, 1, 1, 0, 0x81, FAB_CM_E_MGMT_CLASS, "class directed-route SMP"},
    {FAB_CM_REQ, 2, 1, 0, 1, FAB_CM_E_CLASS_VERSION, "class version 1"},
    {FAB_CM_REP, 2, 1, 0, 3, FAB_CM_E_CLASS_VERSION, "class version 3"},
    {FAB_CM_REQ, 3, 1, 0, 0x83, FAB_CM_E_METHOD, "response bit"},
    {FAB_CM_REQ, 3, 1, 0, 0x01, FAB_CM_E_METHOD, "method Get"},
    {FAB_CM_DREQ, 3, 1, 0, 0x02, FAB_CM_E_METHOD, "method Set"},
    {FAB_CM_REQ, 4, 1, 0, 0x80, FAB_CM_E_STATUS, "status high byte"},
    {FAB_CM_REJ, 5, 1, 0, 0x1c, FAB_CM_E_STATUS, "status low byte"},
    {FAB_CM_REQ, 16, 2, 0, 0x0000, FAB_CM_E_ATTR_UNKNOWN, "attribute 0"},
    {FAB_CM_REQ, 16, 2, 0, 0x0002, FAB_CM_E_ATTR_UNKNOWN, "attribute 2"},
    {FAB_CM_REQ, 16, 2, 0, 0x000f, FAB_CM_E_ATTR_UNKNOWN, "attribute 0x0f"},
    {FAB_CM_REQ, 16, 2, 0, 0x001b, FAB_CM_E_ATTR_UNKNOWN, "attribute 0x1b"},
    {FAB_CM_REQ, 16, 2, 0, 0x0110, FAB_CM_E_ATTR_UNKNOWN, "attribute 0x0110"},
    {FAB_CM_REQ, 16, 2, 0, 0xffff, FAB_CM_E_ATTR_UNKNOWN, "attribute 0xffff"},
    {FAB_CM_REQ, 16, 2, 0, 0x0001, FAB_CM_E_ATTR_UNSUPPORTED, "ClassPortInfo"},
    {FAB_CM_REQ, 16, 2, 0, 0x0011, FAB_CM_E_ATTR_UNSUPPORTED, "MRA"},
    {FAB_CM_REQ, 16, 2, 0, 0x0017, FAB_CM_E_ATTR_UNSUPPORTED, "SIDR_REQ"},
    {FAB_CM_REQ, 16, 2, 0, 0x0018, FAB_CM_E_ATTR_UNSUPPORTED, "SIDR_REP"},
    {FAB_CM_REQ, 16, 2, 0, 0x0019, FAB_CM_E_ATTR_UNSUPPORTED, "LAP"},
    {FAB_CM_REQ, 16, 2, 0, 0x001a, FAB_CM_E_ATTR_UNSUPPORTED, "APR"},
    /* A valid header naming another message: its own checks apply. */
    {FAB_CM_RTU, 16, 2, 0, 0x0015, FAB_CM_E_QPN, "RTU read as DREQ: remote QPN 0"},
    {FAB_CM_REQ, 24, 4, 0, 0, FAB_CM_E_COMM_ID, "REQ local ID 0"},
    {FAB_CM_REP, 24, 4, 0, 0, FAB_CM_E_COMM_ID, "REP local ID 0"},
    {FAB_CM_REP, 28, 4, 0, 0, FAB_CM_E_COMM_ID, "REP remote ID 0"},
    {FAB_CM_RTU, 24, 4, 0, 0, FAB_CM_E_COMM_ID, "RTU local ID 0"},
    {FAB_CM_RTU, 28, 4, 0, 0, FAB_CM_E_COMM_ID, "RTU remote ID 0"},
    {FAB_CM_REJ, 28, 4, 0, 0, FAB_CM_E_COMM_ID, "REJ remote ID 0"},
    {FAB_CM_DREQ, 24, 4, 0, 0, FAB_CM_E_COMM_ID, "DREQ local ID 0"},
    {FAB_CM_DREQ, 28, 4, 0, 0, FAB_CM_E_COMM_ID, "DREQ remote ID 0"},
    {FAB_CM_DREP, 24, 4, 0, 0, FAB_CM_E_COMM_ID, "DREP local ID 0"},
    {FAB_CM_DREP, 28, 4, 0, 0, FAB_CM_E_COMM_ID, "DREP remote ID 0"},
    {FAB_CM_REQ, 56, 3, 0, 0, FAB_CM_E_QPN, "REQ QPN 0"},
    {FAB_CM_REQ, 56, 3, 0, 1, FAB_CM_E_QPN, "REQ QPN 1"},
    {FAB_CM_REP, 36, 3, 0, 0, FAB_CM_E_QPN, "REP QPN 0"},
    {FAB_CM_REP, 36, 3, 0, 1, FAB_CM_E_QPN, "REP QPN 1"},
    {FAB_CM_DREQ, 32, 3, 0, 0, FAB_CM_E_QPN, "DREQ QPN 0"},
    {FAB_CM_DREQ, 32, 3, 0, 1, FAB_CM_E_QPN, "DREQ QPN 1"},
    {FAB_CM_REQ, 67, 1, 0x06, 0x02, FAB_CM_E_TRANSPORT, "transport UC"},
    {FAB_CM_REQ, 67, 1, 0x06, 0x04, FAB_CM_E_TRANSPORT, "transport RD"},
    {FAB_CM_REQ, 67, 1, 0x06, 0x06, FAB_CM_E_TRANSPORT, "transport UD"},
    {FAB_CM_REQ, 75, 1, 0x07, 0x01, FAB_CM_E_TRANSPORT, "extended transport XRC"},
    {FAB_CM_REQ, 74, 1, 0x08, 0x08, FAB_CM_E_TRANSPORT, "RDC exists"},
    {FAB_CM_REQ, 74, 1, 0xf0, 0x00, FAB_CM_E_MTU, "MTU code 0"},
    {FAB_CM_REQ, 74, 1, 0xf0, 0x60, FAB_CM_E_MTU, "MTU code 6"},
    {FAB_CM_REQ, 74, 1, 0xf0, 0xf0, FAB_CM_E_MTU, "MTU code 15"},
    {FAB_CM_REQ, 32, 8, 0, 0x0000000001060000ull, FAB_CM_E_SERVICE_ID, "port 0"},
    {FAB_CM_REQ, 32, 8, 0, 0x0000000001111389ull, FAB_CM_E_SERVICE_ID, "UDP port space"},
    {FAB_CM_REQ, 32, 8, 0, 0x0000000001131389ull, FAB_CM_E_SERVICE_ID, "IB port space"},
    {FAB_CM_REQ, 32, 8, 0, 0x0000000000011389ull, FAB_CM_E_SERVICE_ID, "SDP service ID"},
    {FAB_CM_REQ, 32, 8, 0, 0x0200000001061389ull, FAB_CM_E_SERVICE_ID, "assigned service ID"},
    {FAB_CM_REQ, 32, 8, 0, 0, FAB_CM_E_SERVICE_ID, "service ID 0"},
    {FAB_CM_REQ, 80 + 10, 2, 0, 0, FAB_CM_E_GID, "local GID not IPv4-mapped"},
    {FAB_CM_REQ, 80, 1, 0, 0xfe, FAB_CM_E_GID, "local GID link-local"},
    {FAB_CM_REQ, 80 + 15, 1, 0, 9, FAB_CM_E_GID, "local GID another address"},
    {FAB_CM_REQ, 96 + 15, 1, 0, 9, FAB_CM_E_GID, "remote GID another address"},
    {FAB_CM_REQ, 96 + 9, 1, 0, 1, FAB_CM_E_GID, "remote GID not IPv4-mapped"},
    {FAB_CM_REQ, 164, 1, 0, 0x10, FAB_CM_E_IP_CM_VERSION, "IP CM major version 1"},
    {FAB_CM_REQ, 164, 1, 0, 0x01, FAB_CM_E_IP_CM_VERSION, "IP CM minor version 1"},
    {FAB_CM_REQ, 165, 1, 0xf0, 0x60, FAB_CM_E_IP_CM_VERSION, "IP CM for IPv6"},
    {FAB_CM_REQ, 165, 1, 0xf0, 0x00, FAB_CM_E_IP_CM_VERSION, "IP CM IP version 0"},
    {FAB_CM_REQ, 166, 2, 0, 0, FAB_CM_E_IP_CM_ADDR, "source port 0"},
    {FAB_CM_REQ, 168 + 10, 2, 0, 0xffff, FAB_CM_E_IP_CM_ADDR, "source IPv4-mapped"},
    {FAB_CM_REQ, 168, 1, 0, 0x20, FAB_CM_E_IP_CM_ADDR, "source an IPv6 address"},
    {FAB_CM_REQ, 168 + 15, 1, 0, 9, FAB_CM_E_IP_CM_ADDR, "source another address"},
    {FAB_CM_REQ, 184 + 15, 1, 0, 9, FAB_CM_E_IP_CM_ADDR, "destination another address"},
    {FAB_CM_REQ, 184 + 3, 1, 0, 1, FAB_CM_E_IP_CM_ADDR, "destination pad not zero"},
    {FAB_CM_REJ, 32, 1, 0xc0, 0xc0, FAB_CM_E_REJ_MSG, "message rejected 3"},
    {FAB_CM_REJ, 33, 1, 0xfe, 73 << 1, FAB_CM_E_REJ_ARI_LEN, "ARI length 73"},
    {FAB_CM_REJ, 33, 1, 0xfe, 0xfe, FAB_CM_E_REJ_ARI_LEN, "ARI length 127"},
    {FAB_CM_REJ, 34, 2, 0, 0, FAB_CM_E_REJ_REASON, "reason 0"},
};

static void apply(uint8_t *mad, const struct mad_case *c)
{
	if (c->mask)
		mad[c->off] = (uint8_t)((mad[c->off] & ~c->mask) | (c->value & c->mask));
	else
		put_be(mad + c->off, c->len, c->value);
}

/* Decode pkt expecting refusal for want; *out must stay as it was. */
static void expect_refused(const struct fab_pkt *p, enum fab_cm_err want, const char *what,
			   bool *hit)
{
	struct fab_cm_msg out;
	enum fab_cm_err why = FAB_CM_E_NONE;
	int rc;

	memset(&out, 0x5a, sizeof(out));
	rc = fab_cm_decode(p, &out, &why);
	NST_CHECK_(rc == -EBADMSG && why == want, CU_FALSE, "%s: got %d %s, want -EBADMSG %s", what,
		   rc, fab_cm_err_name(why), fab_cm_err_name(want));
	NST_CHECK_(out.local_comm_id == 0x5a5a5a5a && out.qpn == 0x5a5a5a5a, CU_FALSE,
		   "%s: refused but wrote the output", what);
	hit[want] = true;
}

static void test_decode_refuses_each_reason(void)
{
	bool hit[FAB_CM_E_MAX_] = {false};
	struct fab_cm_msg m, out;
	uint8_t mad[FAB_MAD_LEN + 8];
	struct fab_pkt p;
	enum fab_cm_err why = FAB_CM_E_NONE;

	for (size_t i = 0; i < sizeof(mad_cases) / sizeof(mad_cases[0]); i++) {
		const struct mad_case *c = &mad_cases[i];

		sample(&m, c->base);
		NST_REQUIRE_EQ(fab_cm_encode(&m, mad), 0);
		gsi_pkt(&p, mad, FAB_MAD_LEN, m.src_ip, m.dst_ip);
		NST_REQUIRE_EQ(fab_cm_decode(&p, &out, NULL), 0); /* valid before the change */
		apply(mad, c);
		expect_refused(&p, c->want, c->what, hit);
	}

	/* The packet around the MAD. */
	sample(&m, FAB_CM_REQ);
	NST_REQUIRE_EQ(fab_cm_encode(&m, mad), 0);
#define PKT_CASE(stmt, want)                                       \
	do {                                                       \
		gsi_pkt(&p, mad, FAB_MAD_LEN, m.src_ip, m.dst_ip); \
		stmt;                                              \
		expect_refused(&p, want, #stmt, hit);              \
	} while (0)
	PKT_CASE(p.opcode = FAB_OP_SEND_ONLY, FAB_CM_E_OPCODE);
	PKT_CASE((p.opcode = FAB_OP_SEND_ONLY, p.has_deth = false), FAB_CM_E_OPCODE);
	PKT_CASE(p.opcode = FAB_OP_UD_SEND_ONLY_WITH_IMMEDIATE, FAB_CM_E_OPCODE);
	PKT_CASE(p.has_deth = false, FAB_CM_E_OPCODE);
	PKT_CASE(p.dest_qpn = 0, FAB_CM_E_DEST_QP);
	PKT_CASE(p.dest_qpn = 2, FAB_CM_E_DEST_QP);
	PKT_CASE(p.dest_qpn = 0x1000001, FAB_CM_E_DEST_QP);
	PKT_CASE(p.src_qpn = 0, FAB_CM_E_SRC_QP);
	PKT_CASE(p.src_qpn = 0x123456, FAB_CM_E_SRC_QP);
	PKT_CASE(p.qkey = 0x80010001, FAB_CM_E_QKEY);
	PKT_CASE(p.qkey = 0, FAB_CM_E_QKEY);
	PKT_CASE(p.pkey = 0x7fff, FAB_CM_E_PKEY);
	PKT_CASE(p.payload_len = 0, FAB_CM_E_MAD_LEN);
	PKT_CASE(p.payload_len = FAB_MAD_LEN - 1, FAB_CM_E_MAD_LEN);
	PKT_CASE(p.payload_len = FAB_MAD_LEN + 4, FAB_CM_E_MAD_LEN);
	PKT_CASE(p.payload_len = 24, FAB_CM_E_MAD_LEN);
	/* A REQ whose addresses are right but the frame's are not. */
	PKT_CASE(p.src_ip = fab_addr_host(3), FAB_CM_E_GID);
	PKT_CASE(p.dst_ip = fab_addr_host(3), FAB_CM_E_GID);
#undef PKT_CASE

	for (int e = 1; e < FAB_CM_E_MAX_; e++)
		NST_CHECK_(hit[e], CU_FALSE, "no test for refusal %s", fab_cm_err_name(e));

	/* Bad arguments. */
	gsi_pkt(&p, mad, FAB_MAD_LEN, m.src_ip, m.dst_ip);
	NST_EQ(fab_cm_decode(NULL, &out, &why), -EINVAL);
	NST_EQ(fab_cm_decode(&p, NULL, &why), -EINVAL);
	p.payload = NULL;
	NST_EQ(fab_cm_decode(&p, &out, &why), -EINVAL);
	p.payload_len = 0;
	NST_EQ(fab_cm_decode(&p, &out, &why), -EBADMSG);
	NST_EQ(why, FAB_CM_E_MAD_LEN);
}

/*
 * Reserved fields (and ones nicsim gives no meaning) are ignored on receipt,
 * as the IBTA asks: filling them all with ones changes nothing.
 */
static void test_decode_ignores_reserved_fields(void)
{
	static const struct {
		enum fab_cm_type type;
		size_t off, len;
	} ignored[] = {
	    {FAB_CM_REQ, 6, 2},    /* MAD class specific */
	    {FAB_CM_REQ, 18, 2},   /* MAD reserved */
	    {FAB_CM_REQ, 20, 4},   /* MAD attribute modifier */
	    {FAB_CM_REQ, 28, 4},   /* reserved (vendor ID) */
	    {FAB_CM_REQ, 40, 12},  /* CA GUID, reserved */
	    {FAB_CM_REQ, 52, 4},   /* local Q_Key */
	    {FAB_CM_REQ, 60, 3},   /* local EECN */
	    {FAB_CM_REQ, 64, 3},   /* remote EECN */
	    {FAB_CM_REQ, 72, 2},   /* P_Key */
	    {FAB_CM_REQ, 76, 4},   /* primary LIDs */
	    {FAB_CM_REQ, 112, 7},  /* flow label, rate, class, hop limit, SL */
	    {FAB_CM_REQ, 120, 44}, /* alternate path */
	    {FAB_CM_REQ, 200, 56}, /* consumer private data */
	    {FAB_CM_REP, 32, 4},   /* local Q_Key */
	    {FAB_CM_REP, 39, 5},   /* reserved, local EECN, reserved */
	    {FAB_CM_REP, 47, 1},   /* reserved */
	    {FAB_CM_REP, 50, 1},   /* ACK delay, failover, E2E */
	    {FAB_CM_REP, 52, 204}, /* CA GUID, private data */
	    {FAB_CM_RTU, 32, 224},  {FAB_CM_REJ, 36, 220}, /* ARI, private data */
	    {FAB_CM_DREQ, 35, 221}, {FAB_CM_DREP, 32, 224},
	};
	struct fab_cm_msg m, out, want;
	uint8_t mad[FAB_MAD_LEN];
	struct fab_pkt p;
	enum fab_cm_err why = FAB_CM_E_NONE;

	for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++) {
		sample(&m, ignored[i].type);
		NST_REQUIRE_EQ(fab_cm_encode(&m, mad), 0);
		memset(mad + ignored[i].off, 0xff, ignored[i].len);
		gsi_pkt(&p, mad, FAB_MAD_LEN, m.src_ip, m.dst_ip);
		NST_CHECK_(fab_cm_decode(&p, &out, &why) == 0, CU_FALSE,
			   "%s bytes %zu..%zu: refused (%s)", fab_cm_type_name(ignored[i].type),
			   ignored[i].off, ignored[i].off + ignored[i].len - 1,
			   fab_cm_err_name(why));
		want = m;
		carried_only(&want);
		NST_TRUE(msg_equal(&out, &want));
	}

	/*
	 * The bits beside meaningful ones in shared bytes: end-to-end flow
	 * control, SRQ, failover, ACK delay and reserved bits.
	 */
	sample(&m, FAB_CM_REQ);
	NST_REQUIRE_EQ(fab_cm_encode(&m, mad), 0);
	mad[67] |= 0x01; /* E2E flow control */
	mad[75] |= 0x08; /* SRQ */
	mad[119] |= 0x07;
	gsi_pkt(&p, mad, FAB_MAD_LEN, m.src_ip, m.dst_ip);
	NST_EQ(fab_cm_decode(&p, &out, &why), 0);
	NST_TRUE(msg_equal(&out, &m));

	sample(&m, FAB_CM_REP);
	NST_REQUIRE_EQ(fab_cm_encode(&m, mad), 0);
	mad[51] |= 0x1f; /* SRQ, reserved */
	gsi_pkt(&p, mad, FAB_MAD_LEN, m.src_ip, m.dst_ip);
	NST_EQ(fab_cm_decode(&p, &out, &why), 0);
	want = m;
	carried_only(&want);
	NST_TRUE(msg_equal(&out, &want));

	sample(&m, FAB_CM_REJ);
	NST_REQUIRE_EQ(fab_cm_encode(&m, mad), 0);
	mad[32] |= 0x3f; /* reserved */
	mad[33] |= 0x01;
	gsi_pkt(&p, mad, FAB_MAD_LEN, m.src_ip, m.dst_ip);
	NST_EQ(fab_cm_decode(&p, &out, &why), 0);
	want = m;
	carried_only(&want);
	NST_TRUE(msg_equal(&out, &want));
}

/* ---- Hostile input ---------------------------------------------------------- */

/* If p decodes, re-encoding the result must decode to the same message. */
static bool accepted_is_stable(const struct fab_pkt *p, unsigned *accepted)
{
	struct fab_cm_msg a, b;
	uint8_t mad[FAB_MAD_LEN];
	struct fab_pkt q;

	if (fab_cm_decode(p, &a, NULL) != 0)
		return true;
	++*accepted;
	if (fab_cm_encode(&a, mad) != 0)
		return false;
	gsi_pkt(&q, mad, FAB_MAD_LEN, p->src_ip, p->dst_ip);
	return fab_cm_decode(&q, &b, NULL) == 0 && msg_equal(&a, &b);
}

static void test_random_mads_never_crash(void)
{
	struct rng r = {7};
	unsigned accepted = 0, unstable = 0;
	struct fab_cm_msg m;
	struct fab_pkt p;

	for (unsigned i = 0; i < 200000; i++) {
		unsigned mode = i % 4;
		/*
		 * Random lengths in an exact-size heap block, so that ASan
		 * catches any read past payload_len.
		 */
		size_t len = mode == 0 ? rnd(&r) % (2 * FAB_MAD_LEN) : FAB_MAD_LEN;
		uint8_t *mad = malloc(len ? len : 1);

		NST_REQUIRE(mad != NULL);
		if (mode <= 1) {
			/* Anything at all. */
			for (size_t k = 0; k < len; k++)
				mad[k] = (uint8_t)rnd(&r);
		} else if (mode == 2) {
			/* A valid CM header over random bytes: reaches every message parser. */
			for (size_t k = 0; k < len; k++)
				mad[k] = (uint8_t)rnd(&r);
			put_hdr(mad, (uint16_t)(0x0010 + rnd(&r) % 7));
			mad[4] = mad[5] = 0;
		} else {
			/* A valid message with a few bytes changed. */
			sample(&m, every_type[rnd(&r) % N_TYPES]);
			NST_REQUIRE_EQ(fab_cm_encode(&m, mad), 0);
			for (unsigned k = 1 + rnd(&r) % 4; k > 0; k--)
				mad[rnd(&r) % len] ^= (uint8_t)(1u << rnd(&r) % 8);
		}
		gsi_pkt(&p, mad, len, fab_addr_host(1), fab_addr_host(2));
		unstable += !accepted_is_stable(&p, &accepted);
		free(mad);
	}
	NST_EQ(unstable, 0);
	/* The corpus reaches acceptance, so the checks above are not vacuous. */
	NST_TRUE(accepted > 1000);
}

/* Every valid-header type with random content decodes or is refused with a reason. */
static void test_refusals_always_name_a_reason(void)
{
	struct rng r = {99};
	uint8_t mad[FAB_MAD_LEN];
	struct fab_cm_msg out;
	struct fab_pkt p;

	for (unsigned i = 0; i < 20000; i++) {
		enum fab_cm_err why = FAB_CM_E_MAX_;
		int rc;

		for (size_t k = 0; k < sizeof(mad); k++)
			mad[k] = (uint8_t)rnd(&r);
		if (i & 1)
			put_hdr(mad, (uint16_t)(0x0010 + rnd(&r) % 7));
		gsi_pkt(&p, mad, sizeof(mad), fab_addr_host(1), fab_addr_host(2));
		rc = fab_cm_decode(&p, &out, &why);
		if (rc != 0 && (rc != -EBADMSG || why == FAB_CM_E_NONE || why >= FAB_CM_E_MAX_)) {
			NST_CHECK_(false, CU_FALSE, "iteration %u: rc %d why %d", i, rc, why);
			break;
		}
	}
}

/* ---- Names ------------------------------------------------------------------ */

static void test_names(void)
{
	for (int e = 0; e < FAB_CM_E_MAX_; e++) {
		NST_TRUE(strcmp(fab_cm_err_name(e), "?") != 0);
		NST_TRUE(strcmp(fab_cm_err_str(e), "unknown reason") != 0);
		for (int f = 0; f < e; f++)
			NST_TRUE(strcmp(fab_cm_err_name(e), fab_cm_err_name(f)) != 0);
	}
	NST_TRUE(strcmp(fab_cm_err_name(FAB_CM_E_MAX_), "?") == 0);
	NST_TRUE(strcmp(fab_cm_err_name((enum fab_cm_err) - 1), "?") == 0);
	NST_TRUE(strcmp(fab_cm_err_str(FAB_CM_E_MAX_), "unknown reason") == 0);
	NST_TRUE(strcmp(fab_cm_err_name(FAB_CM_E_GID), "GID") == 0);

	NST_TRUE(strcmp(fab_cm_type_name(FAB_CM_REQ), "REQ") == 0);
	NST_TRUE(strcmp(fab_cm_type_name(FAB_CM_REP), "REP") == 0);
	NST_TRUE(strcmp(fab_cm_type_name(FAB_CM_RTU), "RTU") == 0);
	NST_TRUE(strcmp(fab_cm_type_name(FAB_CM_REJ), "REJ") == 0);
	NST_TRUE(strcmp(fab_cm_type_name(FAB_CM_DREQ), "DREQ") == 0);
	NST_TRUE(strcmp(fab_cm_type_name(FAB_CM_DREP), "DREP") == 0);
	NST_TRUE(strcmp(fab_cm_type_name(FAB_CM_MRA), "MRA") == 0);
	NST_TRUE(strcmp(fab_cm_type_name((enum fab_cm_type)0), "?") == 0);
	NST_TRUE(strcmp(fab_cm_type_name((enum fab_cm_type)0x1b), "?") == 0);
}

static const struct nst_test tests[] = {
    {"req_matches_hand_built_mad", test_req_matches_hand_built_mad},
    {"other_messages_match_hand_built_mads", test_other_messages_match_hand_built_mads},
    {"frame_headers", test_frame_headers},
    {"round_trip_every_type", test_round_trip_every_type},
    {"round_trip_field_ranges", test_round_trip_field_ranges},
    {"encode_refuses_bad_messages", test_encode_refuses_bad_messages},
    {"init_defaults", test_init_defaults},
    {"ib_timeout_codes", test_ib_timeout_codes},
    {"decode_refuses_each_reason", test_decode_refuses_each_reason},
    {"decode_ignores_reserved_fields", test_decode_ignores_reserved_fields},
    {"random_mads_never_crash", test_random_mads_never_crash},
    {"refusals_always_name_a_reason", test_refusals_always_name_a_reason},
    {"names", test_names},
    {NULL, NULL},
};

int main(int argc, char **argv)
{
	return nst_main(argc, argv, "cm", tests, NULL, NULL);
}

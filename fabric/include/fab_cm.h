/*
 * Connection management (CM) messages on the nicsim wire.  nicsim sets up,
 * refuses and tears down connections as InfiniBand does, so that a capture
 * shows them: every CM message is one 256-byte management datagram (MAD) of
 * the CM class, carried in a UD SEND Only packet from QP 1 to QP 1 (the
 * general services interface, GSI) with Q_Key 0x80010000:
 *
 *   Ethernet / IPv4 / UDP 4791 / BTH (UD SEND Only, dest QP 1) /
 *   DETH (Q_Key 0x80010000, source QP 1) / MAD (256) / ICRC
 *
 * The MAD is the IBTA common MAD header (24 bytes: base version 1, class
 * 0x07, class version 2, method Send, the transaction ID, the attribute ID
 * naming the message) and 232 bytes of message (IBTA volume 1, chapter 12,
 * tables 106 to 113; Linux include/rdma/ibta_vol1_c12.h gives the same
 * offsets, counted from the end of the MAD header).  Connections are
 * addressed as the RDMA CM addresses them over RoCE (IBTA annex A11, "RDMA
 * IP CM service"): the REQ's service ID is 0x0000000001060000 | destination
 * port (the TCP port space), its primary path GIDs are the IPv4-mapped
 * addresses ::ffff:a.b.c.d of the two NICs, and its private data starts with
 * the IP CM header (version 0.0, IP version 4, source port, source and
 * destination addresses).  Wireshark decodes all of it with no
 * configuration ("CM: ConnectRequest", the service ID's destination port,
 * "IP CM Private Data").  Two quirks are Wireshark's own (4.0): it shows a
 * REQ's source as the LID ("LID: 65535 -> 198.18.0.2") and reads the
 * primary packet rate from byte 88 instead of 91, so shows it as 0.
 *
 * The exchanges (the requester is the side that connects):
 *
 *   set-up      requester REQ ->, <- REP, RTU ->
 *   refusal     requester REQ ->, <- REJ (message rejected: REQ)
 *   tear-down   either side DREQ ->, <- DREP
 *
 * A reply carries the transaction ID of the message it answers (REP and
 * REJ that of the REQ, RTU that of the REP, DREP that of the DREQ), as
 * Linux's CM does; the codec does not enforce it, the CM state machine may.
 *
 * Communication IDs: each side picks a nonzero local ID for the connection;
 * the "remote" ID of a message is the receiver's.  0 means "not known yet":
 * a REQ has no remote ID, and a REJ answering a REQ for which nothing was
 * created (no listener) may have local ID 0.  Everything else needs both.
 *
 * Fields the IBTA reserves are written as 0 and ignored on receipt, as the
 * IBTA asks; everything with a meaning is checked (fab_cm_decode).  All
 * functions are pure: no state, no allocation, safe from any thread.
 * Errors are 0 or a negative errno.
 */
#ifndef FAB_CM_H
#define FAB_CM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fab_wire.h"

/* ---- Constants ----------------------------------------------------------- */

#define FAB_MAD_LEN 256u    /* every MAD, padded with zeros */
#define FAB_MAD_HDR_LEN 24u /* the common MAD header */
#define FAB_GSI_QPN 1u      /* CM messages go from QP 1 to QP 1 */
#define FAB_GSI_QKEY 0x80010000u

/* A complete CM frame: fixed headers, DETH, one MAD, ICRC (322 bytes). */
#define FAB_CM_FRAME_LEN (FAB_HDR_BASE + FAB_DETH_LEN + FAB_MAD_LEN + FAB_ICRC_LEN)

#define FAB_MAD_BASE_VERSION 1u
#define FAB_MAD_CLASS_CM 0x07u
#define FAB_CM_CLASS_VERSION 2u
#define FAB_MAD_METHOD_SEND 0x03u
#define FAB_MAD_METHOD_R 0x80u /* response bit of the method byte */

/* RDMA CM's TCP port space (IBTA annex A11): service ID = base | port. */
#define FAB_CM_SID_TCP 0x0000000001060000ull
#define FAB_CM_SID_PORT_MASK 0x000000000000ffffull

/* The IP CM private data header (annex A11) at the start of a REQ's. */
#define FAB_CM_IP_CM_VERSION 0x00u /* major 0 (7:4), minor 0 (3:0) */
#define FAB_CM_IP_VERSION_SHIFT 4

/* Values nicsim writes where the IBTA wants one and nothing depends on it. */
#define FAB_CM_LID_PERMISSIVE 0xffffu  /* RoCE has no LIDs; Linux sends this */
#define FAB_CM_HOP_LIMIT FAB_IP4_TTL   /* routed (RoCEv2), not subnet-local */
#define FAB_CM_PACKET_RATE 16u         /* IB rate code of 100 Gb/s: nominal */
#define FAB_CM_FAILOVER_UNSUPPORTED 1u /* REP: no alternate path accepted */
#define FAB_CM_RESOURCES_DEFAULT 16u   /* responder resources, initiator depth */

/*
 * What fab_cm_init puts in a REQ's timer fields; the NIC writes its own
 * configuration over them.  The CM response timeout and max CM retries are
 * the RDMA CM's (4.096 us * 2^20 = 4.3 s, 15), the ACK timeout, retry count
 * and RNR retry count the common ones (67 ms, 7, 7 = forever).
 */
#define FAB_CM_RESPONSE_TIMEOUT 20u
#define FAB_CM_MAX_CM_RETRIES 15u
#define FAB_CM_ACK_TIMEOUT_DEFAULT 14u
#define FAB_CM_RETRY_DEFAULT 7u /* retry count and RNR retry count */

/* Limits of the encoded fields (IBTA table 106). */
#define FAB_CM_TIMEOUT_MAX 31u     /* 5-bit timeout codes */
#define FAB_CM_MAX_RETRIES_MAX 15u /* 4-bit max CM retries */

/*
 * An IBTA timeout code (the local ACK timeout, the CM response timeouts) in
 * nanoseconds: 4.096 us * 2^code, code 0..31 (up to about 2.4 hours).  What
 * code 0 means is the user's to say: IB calls a local ACK timeout of 0
 * infinite.
 */
static inline uint64_t fab_ib_timeout_ns(unsigned code)
{
	return 4096ull << (code & FAB_CM_TIMEOUT_MAX);
}

/* ---- On-wire structures (all fields big-endian, alignment 1) -------------- */

/* The common MAD header (IBTA 13.4.3). */
struct fab_mad_hdr {
	uint8_t base_version;
	uint8_t mgmt_class;
	uint8_t class_version;
	uint8_t method; /* R (7), method (6:0) */
	uint8_t status[2];
	uint8_t class_specific[2];
	uint8_t tid[8];
	uint8_t attr_id[2];
	uint8_t reserved[2];
	uint8_t attr_mod[4];
};

/* A path as a REQ describes it (primary and alternate). */
struct fab_cm_path {
	uint8_t local_lid[2];
	uint8_t remote_lid[2];
	uint8_t local_gid[16];
	uint8_t remote_gid[16];
	uint8_t flow_rate[4]; /* flow label (31:12), reserved (11:6), packet rate (5:0) */
	uint8_t traffic_class;
	uint8_t hop_limit;
	uint8_t sl_local;    /* SL (7:4), subnet local (3), reserved (2:0) */
	uint8_t ack_timeout; /* local ACK timeout (7:3), reserved (2:0) */
};

/* ConnectRequest (attribute 0x0010, IBTA table 106). */
struct fab_cm_req {
	struct fab_mad_hdr hdr;
	uint8_t local_comm_id[4];
	uint8_t reserved4[4]; /* vendor ID (ECE) in later IBTA releases: 0 */
	uint8_t service_id[8];
	uint8_t local_ca_guid[8];
	uint8_t reserved24[4];
	uint8_t local_qkey[4]; /* UD/RD only: 0 */
	uint8_t local_qpn[3];
	uint8_t responder_resources;
	uint8_t local_eecn[3]; /* RD only: 0 */
	uint8_t initiator_depth;
	uint8_t remote_eecn[3]; /* RD only: 0 */
	uint8_t timeout_type;   /* remote CM response timeout (7:3), transport (2:1), E2E FC (0) */
	uint8_t starting_psn[3];
	uint8_t timeout_retry; /* local CM response timeout (7:3), retry count (2:0) */
	uint8_t pkey[2];
	uint8_t mtu_rnr;    /* path MTU (7:4), RDC exists (3), RNR retry count (2:0) */
	uint8_t cm_retries; /* max CM retries (7:4), SRQ (3), extended transport type (2:0) */
	struct fab_cm_path primary;
	struct fab_cm_path alternate; /* all 0: nicsim has no alternate paths */
	uint8_t private_data[92];
};

/* The IP CM header at the start of a REQ's private data (annex A11). */
struct fab_cm_ip_cm {
	uint8_t version;    /* major (7:4), minor (3:0) */
	uint8_t ip_version; /* IP version (7:4), reserved (3:0) */
	uint8_t src_port[2];
	uint8_t src_addr[16]; /* IPv4: 12 zero bytes, then the address */
	uint8_t dst_addr[16];
};

/* ConnectReply (0x0013, table 110). */
struct fab_cm_rep {
	struct fab_mad_hdr hdr;
	uint8_t local_comm_id[4];
	uint8_t remote_comm_id[4];
	uint8_t local_qkey[4];
	uint8_t local_qpn[3];
	uint8_t reserved15;
	uint8_t local_eecn[3];
	uint8_t reserved19;
	uint8_t starting_psn[3];
	uint8_t reserved23;
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t
	    ack_delay_failover; /* target ACK delay (7:3), failover accepted (2:1), E2E FC (0) */
	uint8_t rnr_srq;        /* RNR retry count (7:5), SRQ (4), reserved (3:0) */
	uint8_t local_ca_guid[8];
	uint8_t private_data[196];
};

/* ReadyToUse (0x0014, table 111) and DisconnectReply (0x0016, table 113). */
struct fab_cm_rtu {
	struct fab_mad_hdr hdr;
	uint8_t local_comm_id[4];
	uint8_t remote_comm_id[4];
	uint8_t private_data[224];
};

/* ConnectReject (0x0012, table 108). */
struct fab_cm_rej {
	struct fab_mad_hdr hdr;
	uint8_t local_comm_id[4];
	uint8_t remote_comm_id[4];
	uint8_t msg_rejected; /* message rejected (7:6), reserved (5:0) */
	uint8_t ari_len;      /* reject information length (7:1), reserved (0) */
	uint8_t reason[2];
	uint8_t ari[72];
	uint8_t private_data[148];
};

/* DisconnectRequest (0x0015, table 112). */
struct fab_cm_dreq {
	struct fab_mad_hdr hdr;
	uint8_t local_comm_id[4];
	uint8_t remote_comm_id[4];
	uint8_t remote_qpn[3];
	uint8_t reserved11;
	uint8_t private_data[220];
};

#define FAB_CM_TYPE_SHIFT 1 /* transport service type in timeout_type */
#define FAB_CM_TYPE_MASK 0x06u
#define FAB_CM_MTU_SHIFT 4
#define FAB_CM_RDC_EXISTS 0x08u
#define FAB_CM_EXT_TRANSPORT_MASK 0x07u
#define FAB_CM_RETRY_MASK 0x07u
#define FAB_CM_TIMEOUT_SHIFT 3     /* 5-bit timeouts in bits 7:3 */
#define FAB_CM_MAX_RETRIES_SHIFT 4 /* max CM retries in bits 7:4 */
#define FAB_CM_REP_RNR_SHIFT 5
#define FAB_CM_REJ_MSG_SHIFT 6
#define FAB_CM_ARI_LEN_SHIFT 1
#define FAB_CM_ARI_MAX 72u
#define FAB_CM_TRANSPORT_RC 0u

_Static_assert(sizeof(struct fab_mad_hdr) == FAB_MAD_HDR_LEN, "MAD header is 24 bytes");
_Static_assert(sizeof(struct fab_cm_path) == 44, "CM path is 44 bytes");
_Static_assert(sizeof(struct fab_cm_ip_cm) == 36, "IP CM header is 36 bytes");
_Static_assert(sizeof(struct fab_cm_req) == FAB_MAD_LEN, "REQ is one MAD");
_Static_assert(sizeof(struct fab_cm_rep) == FAB_MAD_LEN, "REP is one MAD");
_Static_assert(sizeof(struct fab_cm_rtu) == FAB_MAD_LEN, "RTU is one MAD");
_Static_assert(sizeof(struct fab_cm_rej) == FAB_MAD_LEN, "REJ is one MAD");
_Static_assert(sizeof(struct fab_cm_dreq) == FAB_MAD_LEN, "DREQ is one MAD");
_Static_assert(_Alignof(struct fab_cm_req) == 1, "MADs may lie at any byte");

/* Offsets from the start of the MAD; the IBTA's are 24 less. */
_Static_assert(offsetof(struct fab_mad_hdr, status) == 4, "MAD status at 4");
_Static_assert(offsetof(struct fab_mad_hdr, tid) == 8, "MAD transaction ID at 8");
_Static_assert(offsetof(struct fab_mad_hdr, attr_id) == 16, "MAD attribute ID at 16");
_Static_assert(offsetof(struct fab_mad_hdr, attr_mod) == 20, "MAD attribute modifier at 20");
_Static_assert(offsetof(struct fab_cm_req, service_id) == 24 + 8, "REQ service ID at 8");
_Static_assert(offsetof(struct fab_cm_req, local_ca_guid) == 24 + 16, "REQ CA GUID at 16");
_Static_assert(offsetof(struct fab_cm_req, local_qkey) == 24 + 28, "REQ Q_Key at 28");
_Static_assert(offsetof(struct fab_cm_req, local_qpn) == 24 + 32, "REQ local QPN at 32");
_Static_assert(offsetof(struct fab_cm_req, responder_resources) == 24 + 35, "REQ resources at 35");
_Static_assert(offsetof(struct fab_cm_req, initiator_depth) == 24 + 39, "REQ depth at 39");
_Static_assert(offsetof(struct fab_cm_req, timeout_type) == 24 + 43, "REQ transport at 43");
_Static_assert(offsetof(struct fab_cm_req, starting_psn) == 24 + 44, "REQ PSN at 44");
_Static_assert(offsetof(struct fab_cm_req, timeout_retry) == 24 + 47, "REQ retry count at 47");
_Static_assert(offsetof(struct fab_cm_req, pkey) == 24 + 48, "REQ P_Key at 48");
_Static_assert(offsetof(struct fab_cm_req, mtu_rnr) == 24 + 50, "REQ MTU at 50");
_Static_assert(offsetof(struct fab_cm_req, cm_retries) == 24 + 51, "REQ CM retries at 51");
_Static_assert(offsetof(struct fab_cm_req, primary) == 24 + 52, "REQ primary path at 52");
_Static_assert(offsetof(struct fab_cm_req, primary.local_gid) == 24 + 56, "REQ local GID at 56");
_Static_assert(offsetof(struct fab_cm_req, primary.remote_gid) == 24 + 72, "REQ remote GID at 72");
_Static_assert(offsetof(struct fab_cm_req, primary.flow_rate) == 24 + 88, "REQ flow label at 88");
_Static_assert(offsetof(struct fab_cm_req, primary.ack_timeout) == 24 + 95,
	       "REQ ACK timeout at 95");
_Static_assert(offsetof(struct fab_cm_req, alternate) == 24 + 96, "REQ alternate path at 96");
_Static_assert(offsetof(struct fab_cm_req, private_data) == 24 + 140, "REQ private data at 140");
_Static_assert(offsetof(struct fab_cm_ip_cm, src_addr) == 4, "IP CM source address at 4");
_Static_assert(offsetof(struct fab_cm_ip_cm, dst_addr) == 20, "IP CM destination address at 20");
_Static_assert(offsetof(struct fab_cm_rep, local_qkey) == 24 + 8, "REP Q_Key at 8");
_Static_assert(offsetof(struct fab_cm_rep, local_qpn) == 24 + 12, "REP local QPN at 12");
_Static_assert(offsetof(struct fab_cm_rep, starting_psn) == 24 + 20, "REP PSN at 20");
_Static_assert(offsetof(struct fab_cm_rep, responder_resources) == 24 + 24, "REP resources at 24");
_Static_assert(offsetof(struct fab_cm_rep, rnr_srq) == 24 + 27, "REP RNR retry at 27");
_Static_assert(offsetof(struct fab_cm_rep, local_ca_guid) == 24 + 28, "REP CA GUID at 28");
_Static_assert(offsetof(struct fab_cm_rep, private_data) == 24 + 36, "REP private data at 36");
_Static_assert(offsetof(struct fab_cm_rtu, private_data) == 24 + 8, "RTU private data at 8");
_Static_assert(offsetof(struct fab_cm_rej, msg_rejected) == 24 + 8, "REJ message rejected at 8");
_Static_assert(offsetof(struct fab_cm_rej, reason) == 24 + 10, "REJ reason at 10");
_Static_assert(offsetof(struct fab_cm_rej, ari) == 24 + 12, "REJ ARI at 12");
_Static_assert(offsetof(struct fab_cm_rej, private_data) == 24 + 84, "REJ private data at 84");
_Static_assert(offsetof(struct fab_cm_dreq, remote_qpn) == 24 + 8, "DREQ remote QPN at 8");
_Static_assert(offsetof(struct fab_cm_dreq, private_data) == 24 + 12, "DREQ private data at 12");

/* ---- Decoded view -------------------------------------------------------- */

/* CM messages by their MAD attribute ID. */
enum fab_cm_type {
	FAB_CM_REQ = 0x0010,
	FAB_CM_MRA = 0x0011, /* known, not used by nicsim */
	FAB_CM_REJ = 0x0012,
	FAB_CM_REP = 0x0013,
	FAB_CM_RTU = 0x0014,
	FAB_CM_DREQ = 0x0015,
	FAB_CM_DREP = 0x0016,
	FAB_CM_SIDR_REQ = 0x0017, /* known, not used */
	FAB_CM_SIDR_REP = 0x0018, /* known, not used */
	FAB_CM_LAP = 0x0019,      /* known, not used */
	FAB_CM_APR = 0x001a,      /* known, not used */
};

/* Which message a REJ refuses (its "message rejected" field). */
enum fab_cm_rej_msg {
	FAB_CM_REJ_MSG_REQ = 0,
	FAB_CM_REJ_MSG_REP = 1,
	FAB_CM_REJ_MSG_OTHER = 2, /* 3 is reserved */
};

/* Reject reasons nicsim sends (IBTA table 109; Linux enum ib_cm_rej_reason). */
#define FAB_CM_REJ_NO_QP 1u
#define FAB_CM_REJ_NO_RESOURCES 3u
#define FAB_CM_REJ_TIMEOUT 4u
#define FAB_CM_REJ_INVALID_SERVICE_ID 8u /* nobody listens on the port */
#define FAB_CM_REJ_STALE_CONN 10u
#define FAB_CM_REJ_CONSUMER 28u /* the application refused */

/*
 * One CM message, decoded or to encode.  IPv4 addresses are in network
 * order (as in struct fab_pkt); everything else in host order.  Fields a
 * message type does not carry are 0 after decoding and ignored when
 * encoding.
 */
struct fab_cm_msg {
	enum fab_cm_type type;
	uint64_t tid;            /* MAD transaction ID */
	uint32_t src_ip;         /* the sender's NIC (network order) */
	uint32_t dst_ip;         /* the receiver's NIC */
	uint32_t local_comm_id;  /* the sender's communication ID */
	uint32_t remote_comm_id; /* the receiver's; 0 in a REQ */

	/* REQ: the connection's ports and path. */
	uint16_t src_port;   /* the connecting socket's port (IP CM private data) */
	uint16_t dst_port;   /* the listening port (service ID) */
	uint32_t mtu;        /* path MTU in bytes: 256, 512, 1024, 2048 or 4096 */
	uint8_t retry_count; /* transport retries after timeouts, 0..7 */
	uint8_t ack_timeout; /* local ACK timeout code: 4.096 us * 2^code, < 32 */
	/*
	 * How long the sender will wait for the receiver's answer (remote CM
	 * response timeout) and the receiver for the sender's (local CM
	 * response timeout), codes < 32, and how often the receiver should send
	 * a message again that gets no answer (max CM retries, 0..15).
	 */
	uint8_t remote_cm_timeout;
	uint8_t local_cm_timeout;
	uint8_t max_cm_retries;

	/*
	 * REQ, REP: the sender's QP; DREQ: the receiver's QP (the one to
	 * disconnect).  24 bits, never 0 or 1.
	 */
	uint32_t qpn;
	/*
	 * REQ, REP: the starting PSN (24 bits): the first PSN the sender's QP
	 * expects to receive, so the first the receiver of the message will
	 * send.  That is how Linux's CM reads the field (ib_send_cm_req sets
	 * its receive PSN from the REQ's, cm_req_handler the passive side's
	 * send PSN; the REP's the other way round), and so every RoCE stack
	 * built on it: a side that sent its own first PSN here would be
	 * answered with PSN sequence error NAKs.
	 */
	uint32_t psn;
	uint8_t responder_resources; /* RDMA READs the sender accepts at once */
	uint8_t initiator_depth;     /* RDMA READs the sender issues at once */
	uint8_t rnr_retry_count;     /* 0..7; 7 means retry forever */

	/* REJ */
	enum fab_cm_rej_msg rej_msg;
	uint16_t reason; /* FAB_CM_REJ_*, never 0 */
};

/* ---- Errors -------------------------------------------------------------- */

/* Reasons fab_cm_decode refuses a packet, in the order it checks them. */
#define FAB_CM_ERRORS(X)                                                                  \
	X(NONE, "no error")                                                               \
	X(OPCODE, "not a UD SEND Only packet")                                            \
	X(DEST_QP, "destination QP is not 1 (the GSI QP)")                                \
	X(SRC_QP, "DETH source QP is not 1 (the GSI QP)")                                 \
	X(QKEY, "DETH Q_Key is not the GSI Q_Key 0x80010000")                             \
	X(PKEY, "P_Key is not the default partition 0xffff")                              \
	X(MAD_LEN, "payload is not one 256-byte MAD")                                     \
	X(BASE_VERSION, "MAD base version is not 1")                                      \
	X(MGMT_CLASS, "MAD class is not communication management (0x07)")                 \
	X(CLASS_VERSION, "CM class version is not 2")                                     \
	X(METHOD, "MAD method is not Send (0x03)")                                        \
	X(STATUS, "MAD status is not 0")                                                  \
	X(ATTR_UNKNOWN, "attribute ID is not a CM message")                               \
	X(ATTR_UNSUPPORTED, "CM message nicsim does not use (MRA, SIDR, LAP, APR, ...)")  \
	X(COMM_ID, "communication ID 0 where the message needs one")                      \
	X(QPN, "QP number 0 or 1 (special QPs cannot be connected)")                      \
	X(TRANSPORT, "REQ asks for a transport other than RC")                            \
	X(MTU, "REQ path MTU code is not one of 256 .. 4096 bytes")                       \
	X(SERVICE_ID, "REQ service ID is not in RDMA CM's TCP port space, or port 0")     \
	X(GID, "REQ primary path GIDs are not the IPv4-mapped addresses of the frame")    \
	X(IP_CM_VERSION, "REQ IP CM private data is not version 0.0 for IPv4")            \
	X(IP_CM_ADDR, "REQ IP CM addresses disagree with the frame, or source port is 0") \
	X(REJ_MSG, "REJ names the reserved message type 3")                               \
	X(REJ_ARI_LEN, "REJ additional information longer than 72 bytes")                 \
	X(REJ_REASON, "REJ reason is 0")

enum fab_cm_err {
#define FAB_CM_ERR_ENUM(name, desc) FAB_CM_E_##name,
	FAB_CM_ERRORS(FAB_CM_ERR_ENUM)
#undef FAB_CM_ERR_ENUM
	    FAB_CM_E_MAX_
};

/* "QKEY", "GID", ... ; "?" for a value out of range. */
const char *fab_cm_err_name(enum fab_cm_err err);
/* A sentence a person can act on; "unknown reason" out of range. */
const char *fab_cm_err_str(enum fab_cm_err err);

/* ---- Codec --------------------------------------------------------------- */

/* "REQ", "REP", "RTU", "REJ", "DREQ", "DREP", "MRA", ...; "?" if unknown. */
const char *fab_cm_type_name(enum fab_cm_type type);

/*
 * Zero *m and set type and the defaults for the fields the type carries:
 * in a REQ path MTU 4096, retry count 7, ACK timeout code 14, CM response
 * timeouts code 20 and 15 max CM retries; in a REQ or REP RNR retry count 7 and 16 responder resources and initiator
 * depth; in a REJ "message rejected: REQ" and reason "consumer reject".  The
 * caller fills in addresses, IDs, ports, QPN and PSN.  Returns 0, or -EINVAL
 * (m zeroed) for a type nicsim does not send.
 */
int fab_cm_init(struct fab_cm_msg *m, enum fab_cm_type type);

/*
 * Encode m into the 256-byte MAD at mad.  Fails with -EINVAL, writing
 * nothing, unless fab_cm_decode would accept the result: a type nicsim
 * sends, communication IDs as the top of this file says, 24-bit QPN (not 0
 * or 1) and PSN, retry counts under 8, max CM retries under 16, a valid
 * MTU, timeout codes under 32, nonzero
 * ports in a REQ, a REJ with a defined message and a nonzero reason.
 */
int fab_cm_encode(const struct fab_cm_msg *m, uint8_t mad[FAB_MAD_LEN]);

/*
 * Encode m as a complete frame from m->src_ip to m->dst_ip: UD SEND Only
 * to QP 1, P_Key 0xffff, BTH PSN bth_psn (the sending GSI QP's own 24-bit
 * sequence), DETH Q_Key 0x80010000 and source QP 1, the MAD, the ICRC.
 * Stores the length (FAB_CM_FRAME_LEN) in *len.  Returns 0, -EINVAL as
 * fab_cm_encode or for bth_psn over 24 bits, -ENOSPC if cap is too small;
 * nothing is written on failure.
 */
int fab_cm_frame(const struct fab_cm_msg *m, uint32_t bth_psn, uint8_t *frame, size_t cap,
		 size_t *len);

/*
 * Decode the CM message in pkt, a packet fab_pkt_decode accepted.  Nothing
 * in it is trusted: the packet must be a UD SEND Only from QP 1 to QP 1 with
 * the GSI Q_Key and default P_Key carrying exactly one MAD; the MAD must be
 * a CM Send of class version 2 with a status of 0 naming a message nicsim
 * uses; and the message must make sense (see FAB_CM_ERRORS), including, in
 * a REQ, addresses that agree with the packet's IPv4 header in the GIDs and
 * the IP CM private data.  Only pkt->payload_len bytes are read.
 *
 * Returns 0 with *out filled (src_ip and dst_ip from the packet), -EBADMSG
 * with *why set (if why is not NULL) and *out untouched, or -EINVAL for a
 * NULL pkt or out.
 */
int fab_cm_decode(const struct fab_pkt *pkt, struct fab_cm_msg *out, enum fab_cm_err *why);

#endif /* FAB_CM_H */

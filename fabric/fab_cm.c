/*
 * The CM message codec: see fab_cm.h for the formats and the contracts.
 * Encoding validates the whole message before writing a byte; decoding
 * reads the packet's MAD once, checking each field it gives meaning to, and
 * fills the caller's view only when everything holds.
 */
#include <errno.h>
#include <string.h>

#include "fab_cm.h"
#include "fab_wire.h"

/* ---- Names --------------------------------------------------------------- */

static const char *const err_names[] = {
#define FAB_CM_ERR_NAME(name, desc) #name,
    FAB_CM_ERRORS(FAB_CM_ERR_NAME)
#undef FAB_CM_ERR_NAME
};

static const char *const err_strs[] = {
#define FAB_CM_ERR_STR(name, desc) desc,
    FAB_CM_ERRORS(FAB_CM_ERR_STR)
#undef FAB_CM_ERR_STR
};

_Static_assert(sizeof(err_names) / sizeof(err_names[0]) == FAB_CM_E_MAX_, "a name per error");

const char *fab_cm_err_name(enum fab_cm_err err)
{
	return (unsigned)err < FAB_CM_E_MAX_ ? err_names[err] : "?";
}

const char *fab_cm_err_str(enum fab_cm_err err)
{
	return (unsigned)err < FAB_CM_E_MAX_ ? err_strs[err] : "unknown reason";
}

const char *fab_cm_type_name(enum fab_cm_type type)
{
	switch (type) {
	case FAB_CM_REQ: return "REQ";
	case FAB_CM_MRA: return "MRA";
	case FAB_CM_REJ: return "REJ";
	case FAB_CM_REP: return "REP";
	case FAB_CM_RTU: return "RTU";
	case FAB_CM_DREQ: return "DREQ";
	case FAB_CM_DREP: return "DREP";
	case FAB_CM_SIDR_REQ: return "SIDR_REQ";
	case FAB_CM_SIDR_REP: return "SIDR_REP";
	case FAB_CM_LAP: return "LAP";
	case FAB_CM_APR: return "APR";
	}
	return "?";
}

/* ---- Helpers ------------------------------------------------------------- */

/* True for the message types nicsim sends and accepts. */
static bool type_used(enum fab_cm_type type)
{
	switch (type) {
	case FAB_CM_REQ:
	case FAB_CM_REP:
	case FAB_CM_RTU:
	case FAB_CM_REJ:
	case FAB_CM_DREQ:
	case FAB_CM_DREP: return true;
	default: return false;
	}
}

/* True for attribute IDs the IBTA defines for the CM class (table 105). */
static bool attr_known(uint16_t attr)
{
	return attr == 0x0001 /* ClassPortInfo */ || (attr >= FAB_CM_REQ && attr <= FAB_CM_APR);
}

/* A QPN that can be one end of a connection: 24 bits, not QP 0 or QP 1. */
static bool qpn_connectable(uint32_t qpn)
{
	return qpn > FAB_GSI_QPN && qpn <= FAB_MASK24;
}

/* IB MTU code (IBTA table 214 / enum ib_mtu): 1 = 256 .. 5 = 4096; 0 if none. */
static unsigned mtu_code(uint32_t mtu)
{
	for (unsigned code = 1; code <= 5; code++)
		if (mtu == 128u << code)
			return code;
	return 0;
}

static uint32_t mtu_bytes(unsigned code)
{
	return code >= 1 && code <= 5 ? 128u << code : 0;
}

/*
 * The CA GUID of a NIC: the modified EUI-64 of its MAC (as Soft-RoCE forms
 * its node GUID from the netdev's MAC), so that it is unique per address.
 */
static void ca_guid_from_ip(uint32_t ip, uint8_t guid[8])
{
	uint8_t mac[6];

	fab_mac_from_ip(ip, mac);
	guid[0] = mac[0] ^ 0x02; /* invert the universal/local bit */
	guid[1] = mac[1];
	guid[2] = mac[2];
	guid[3] = 0xff;
	guid[4] = 0xfe;
	guid[5] = mac[3];
	guid[6] = mac[4];
	guid[7] = mac[5];
}

/* The IPv4-mapped IPv6 address ::ffff:ip, as RoCEv2 forms the GID of an IPv4 address. */
static void gid_from_ip(uint32_t ip, uint8_t gid[16])
{
	memset(gid, 0, 10);
	gid[10] = 0xff;
	gid[11] = 0xff;
	memcpy(gid + 12, &ip, 4);
}

static bool gid_is_ip(const uint8_t gid[16], uint32_t ip)
{
	uint8_t want[16];

	gid_from_ip(ip, want);
	return memcmp(gid, want, sizeof(want)) == 0;
}

/* An IP CM address (annex A11): IPv4 in the last 4 of 16 bytes, the rest 0. */
static void ip_cm_addr_put(uint8_t addr[16], uint32_t ip)
{
	memset(addr, 0, 12);
	memcpy(addr + 12, &ip, 4);
}

static bool ip_cm_addr_is(const uint8_t addr[16], uint32_t ip)
{
	static const uint8_t zero[12];

	return memcmp(addr, zero, sizeof(zero)) == 0 && memcmp(addr + 12, &ip, 4) == 0;
}

/* ---- Encoder ------------------------------------------------------------- */

/* Everything fab_cm_encode checks, so that decode accepts what encode writes. */
static int check_msg(const struct fab_cm_msg *m)
{
	if (!type_used(m->type))
		return -EINVAL;
	/* Every message but a REQ names the receiver's connection. */
	if (m->type != FAB_CM_REQ && m->remote_comm_id == 0)
		return -EINVAL;
	/* Only a REJ may come from a side that created nothing. */
	if (m->type != FAB_CM_REJ && m->local_comm_id == 0)
		return -EINVAL;

	/* A REQ and a REP both describe the sender's QP. */
	if ((m->type == FAB_CM_REQ || m->type == FAB_CM_REP) &&
	    (!qpn_connectable(m->qpn) || m->psn > FAB_MASK24 ||
	     m->rnr_retry_count > FAB_CM_RETRY_MASK))
		return -EINVAL;

	switch (m->type) {
	case FAB_CM_REQ:
		if (m->src_port == 0 || m->dst_port == 0 || !mtu_code(m->mtu) ||
		    m->retry_count > FAB_CM_RETRY_MASK || m->ack_timeout > FAB_CM_TIMEOUT_MAX ||
		    m->remote_cm_timeout > FAB_CM_TIMEOUT_MAX ||
		    m->local_cm_timeout > FAB_CM_TIMEOUT_MAX ||
		    m->max_cm_retries > FAB_CM_MAX_RETRIES_MAX)
			return -EINVAL;
		break;
	case FAB_CM_DREQ:
		if (!qpn_connectable(m->qpn))
			return -EINVAL;
		break;
	case FAB_CM_REJ:
		if ((unsigned)m->rej_msg > FAB_CM_REJ_MSG_OTHER || m->reason == 0)
			return -EINVAL;
		break;
	default: break;
	}
	return 0;
}

static void put_mad_hdr(struct fab_mad_hdr *h, const struct fab_cm_msg *m)
{
	h->base_version = FAB_MAD_BASE_VERSION;
	h->mgmt_class = FAB_MAD_CLASS_CM;
	h->class_version = FAB_CM_CLASS_VERSION;
	h->method = FAB_MAD_METHOD_SEND;
	fab_put64(h->tid, m->tid);
	fab_put16(h->attr_id, (uint16_t)m->type);
}

static void put_req(struct fab_cm_req *r, const struct fab_cm_msg *m)
{
	struct fab_cm_ip_cm *ip = (struct fab_cm_ip_cm *)r->private_data;

	fab_put32(r->local_comm_id, m->local_comm_id);
	fab_put64(r->service_id, FAB_CM_SID_TCP | m->dst_port);
	ca_guid_from_ip(m->src_ip, r->local_ca_guid);
	fab_put24(r->local_qpn, m->qpn);
	r->responder_resources = m->responder_resources;
	r->initiator_depth = m->initiator_depth;
	r->timeout_type = (uint8_t)(m->remote_cm_timeout << FAB_CM_TIMEOUT_SHIFT |
				    FAB_CM_TRANSPORT_RC << FAB_CM_TYPE_SHIFT);
	fab_put24(r->starting_psn, m->psn);
	r->timeout_retry = (uint8_t)(m->local_cm_timeout << FAB_CM_TIMEOUT_SHIFT | m->retry_count);
	fab_put16(r->pkey, FAB_PKEY_DEFAULT);
	r->mtu_rnr = (uint8_t)(mtu_code(m->mtu) << FAB_CM_MTU_SHIFT | m->rnr_retry_count);
	r->cm_retries = (uint8_t)(m->max_cm_retries << FAB_CM_MAX_RETRIES_SHIFT);

	/*
	 * The primary path as Linux's CM describes a routed RoCEv2 path:
	 * permissive LIDs, IPv4-mapped GIDs, the hop limit of the IP TTL and
	 * "subnet local" clear.  The alternate path stays all zero.
	 */
	fab_put16(r->primary.local_lid, FAB_CM_LID_PERMISSIVE);
	fab_put16(r->primary.remote_lid, FAB_CM_LID_PERMISSIVE);
	gid_from_ip(m->src_ip, r->primary.local_gid);
	gid_from_ip(m->dst_ip, r->primary.remote_gid);
	fab_put32(r->primary.flow_rate, FAB_CM_PACKET_RATE);
	r->primary.hop_limit = FAB_CM_HOP_LIMIT;
	r->primary.ack_timeout = (uint8_t)(m->ack_timeout << FAB_CM_TIMEOUT_SHIFT);

	ip->version = FAB_CM_IP_CM_VERSION;
	ip->ip_version = 4u << FAB_CM_IP_VERSION_SHIFT;
	fab_put16(ip->src_port, m->src_port);
	ip_cm_addr_put(ip->src_addr, m->src_ip);
	ip_cm_addr_put(ip->dst_addr, m->dst_ip);
}

static void put_rep(struct fab_cm_rep *r, const struct fab_cm_msg *m)
{
	fab_put32(r->local_comm_id, m->local_comm_id);
	fab_put32(r->remote_comm_id, m->remote_comm_id);
	fab_put24(r->local_qpn, m->qpn);
	fab_put24(r->starting_psn, m->psn);
	r->responder_resources = m->responder_resources;
	r->initiator_depth = m->initiator_depth;
	/* Target ACK delay 0: the NIC acknowledges at once.  No end-to-end credits. */
	r->ack_delay_failover = (uint8_t)(FAB_CM_FAILOVER_UNSUPPORTED << 1);
	r->rnr_srq = (uint8_t)(m->rnr_retry_count << FAB_CM_REP_RNR_SHIFT);
	ca_guid_from_ip(m->src_ip, r->local_ca_guid);
}

int fab_cm_encode(const struct fab_cm_msg *m, uint8_t mad[FAB_MAD_LEN])
{
	int rc;

	if (!m || !mad)
		return -EINVAL;
	rc = check_msg(m);
	if (rc)
		return rc;

	memset(mad, 0, FAB_MAD_LEN);
	put_mad_hdr((struct fab_mad_hdr *)mad, m);
	switch (m->type) {
	case FAB_CM_REQ: put_req((struct fab_cm_req *)mad, m); break;
	case FAB_CM_REP: put_rep((struct fab_cm_rep *)mad, m); break;
	case FAB_CM_REJ: {
		struct fab_cm_rej *r = (struct fab_cm_rej *)mad;

		fab_put32(r->local_comm_id, m->local_comm_id);
		fab_put32(r->remote_comm_id, m->remote_comm_id);
		r->msg_rejected = (uint8_t)((unsigned)m->rej_msg << FAB_CM_REJ_MSG_SHIFT);
		fab_put16(r->reason, m->reason);
		break;
	}
	case FAB_CM_DREQ: {
		struct fab_cm_dreq *r = (struct fab_cm_dreq *)mad;

		fab_put32(r->local_comm_id, m->local_comm_id);
		fab_put32(r->remote_comm_id, m->remote_comm_id);
		fab_put24(r->remote_qpn, m->qpn);
		break;
	}
	default: { /* RTU and DREP share one layout */
		struct fab_cm_rtu *r = (struct fab_cm_rtu *)mad;

		fab_put32(r->local_comm_id, m->local_comm_id);
		fab_put32(r->remote_comm_id, m->remote_comm_id);
		break;
	}
	}
	return 0;
}

int fab_cm_frame(const struct fab_cm_msg *m, uint32_t bth_psn, uint8_t *frame, size_t cap,
		 size_t *len)
{
	uint8_t mad[FAB_MAD_LEN];
	struct fab_pkt p;
	int rc;

	if (!frame || !len || bth_psn > FAB_MASK24)
		return -EINVAL;
	rc = fab_cm_encode(m, mad);
	if (rc)
		return rc;

	rc = fab_pkt_init(&p, FAB_OP_UD_SEND_ONLY);
	if (rc)
		return rc;
	p.src_ip = m->src_ip;
	p.dst_ip = m->dst_ip;
	p.udp_sport = fab_udp_sport(FAB_GSI_QPN);
	p.dest_qpn = FAB_GSI_QPN;
	p.psn = bth_psn;
	p.qkey = FAB_GSI_QKEY;
	p.src_qpn = FAB_GSI_QPN;
	p.payload = mad;
	p.payload_len = FAB_MAD_LEN;
	return fab_pkt_encode(&p, frame, cap, len);
}

int fab_cm_init(struct fab_cm_msg *m, enum fab_cm_type type)
{
	if (!m)
		return -EINVAL;
	/* Only the fields the type carries, so that a decoded copy compares equal. */
	memset(m, 0, sizeof(*m));
	m->type = type;
	if (type == FAB_CM_REQ) {
		m->mtu = FAB_MTU;
		m->retry_count = FAB_CM_RETRY_DEFAULT;
		m->ack_timeout = FAB_CM_ACK_TIMEOUT_DEFAULT;
		m->remote_cm_timeout = m->local_cm_timeout = FAB_CM_RESPONSE_TIMEOUT;
		m->max_cm_retries = FAB_CM_MAX_CM_RETRIES;
	}
	if (type == FAB_CM_REQ || type == FAB_CM_REP) {
		m->rnr_retry_count = FAB_CM_RETRY_DEFAULT;
		m->responder_resources = FAB_CM_RESOURCES_DEFAULT;
		m->initiator_depth = FAB_CM_RESOURCES_DEFAULT;
	}
	if (type == FAB_CM_REJ) {
		m->rej_msg = FAB_CM_REJ_MSG_REQ;
		m->reason = FAB_CM_REJ_CONSUMER;
	}
	return type_used(type) ? 0 : -EINVAL;
}

/* ---- Decoder ------------------------------------------------------------- */

/* The packet around the MAD: UD SEND Only, GSI QP to GSI QP, one MAD. */
static enum fab_cm_err check_pkt(const struct fab_pkt *pkt)
{
	if (pkt->opcode != FAB_OP_UD_SEND_ONLY || !pkt->has_deth)
		return FAB_CM_E_OPCODE;
	if (pkt->dest_qpn != FAB_GSI_QPN)
		return FAB_CM_E_DEST_QP;
	if (pkt->src_qpn != FAB_GSI_QPN)
		return FAB_CM_E_SRC_QP;
	if (pkt->qkey != FAB_GSI_QKEY)
		return FAB_CM_E_QKEY;
	if (pkt->pkey != FAB_PKEY_DEFAULT)
		return FAB_CM_E_PKEY;
	if (pkt->payload_len != FAB_MAD_LEN)
		return FAB_CM_E_MAD_LEN;
	return FAB_CM_E_NONE;
}

static enum fab_cm_err check_mad_hdr(const struct fab_mad_hdr *h)
{
	uint16_t attr = fab_get16(h->attr_id);

	if (h->base_version != FAB_MAD_BASE_VERSION)
		return FAB_CM_E_BASE_VERSION;
	if (h->mgmt_class != FAB_MAD_CLASS_CM)
		return FAB_CM_E_MGMT_CLASS;
	if (h->class_version != FAB_CM_CLASS_VERSION)
		return FAB_CM_E_CLASS_VERSION;
	/* A CM message is a Send; the R bit (a response) makes it something else. */
	if (h->method != FAB_MAD_METHOD_SEND)
		return FAB_CM_E_METHOD;
	if (fab_get16(h->status) != 0)
		return FAB_CM_E_STATUS;
	if (!attr_known(attr))
		return FAB_CM_E_ATTR_UNKNOWN;
	if (!type_used((enum fab_cm_type)attr))
		return FAB_CM_E_ATTR_UNSUPPORTED;
	return FAB_CM_E_NONE;
}

static enum fab_cm_err get_req(const struct fab_cm_req *r, const struct fab_pkt *pkt,
			       struct fab_cm_msg *m)
{
	const struct fab_cm_ip_cm *ip = (const struct fab_cm_ip_cm *)r->private_data;
	uint64_t sid = fab_get64(r->service_id);
	unsigned transport = (r->timeout_type & FAB_CM_TYPE_MASK) >> FAB_CM_TYPE_SHIFT;

	m->local_comm_id = fab_get32(r->local_comm_id);
	if (m->local_comm_id == 0)
		return FAB_CM_E_COMM_ID;
	m->qpn = fab_get24(r->local_qpn);
	if (!qpn_connectable(m->qpn))
		return FAB_CM_E_QPN;
	/* RC only: not UC/RD/UD, no extended transport (XRC), no RD channel. */
	if (transport != FAB_CM_TRANSPORT_RC || (r->cm_retries & FAB_CM_EXT_TRANSPORT_MASK) ||
	    (r->mtu_rnr & FAB_CM_RDC_EXISTS))
		return FAB_CM_E_TRANSPORT;
	m->mtu = mtu_bytes(r->mtu_rnr >> FAB_CM_MTU_SHIFT);
	if (m->mtu == 0)
		return FAB_CM_E_MTU;
	if ((sid & ~FAB_CM_SID_PORT_MASK) != FAB_CM_SID_TCP || (sid & FAB_CM_SID_PORT_MASK) == 0)
		return FAB_CM_E_SERVICE_ID;
	m->dst_port = (uint16_t)(sid & FAB_CM_SID_PORT_MASK);
	if (!gid_is_ip(r->primary.local_gid, pkt->src_ip) ||
	    !gid_is_ip(r->primary.remote_gid, pkt->dst_ip))
		return FAB_CM_E_GID;
	if (ip->version != FAB_CM_IP_CM_VERSION || ip->ip_version >> FAB_CM_IP_VERSION_SHIFT != 4)
		return FAB_CM_E_IP_CM_VERSION;
	m->src_port = fab_get16(ip->src_port);
	if (m->src_port == 0 || !ip_cm_addr_is(ip->src_addr, pkt->src_ip) ||
	    !ip_cm_addr_is(ip->dst_addr, pkt->dst_ip))
		return FAB_CM_E_IP_CM_ADDR;

	m->psn = fab_get24(r->starting_psn);
	m->responder_resources = r->responder_resources;
	m->initiator_depth = r->initiator_depth;
	m->retry_count = r->timeout_retry & FAB_CM_RETRY_MASK;
	m->rnr_retry_count = r->mtu_rnr & FAB_CM_RETRY_MASK;
	m->ack_timeout = r->primary.ack_timeout >> FAB_CM_TIMEOUT_SHIFT;
	m->remote_cm_timeout = r->timeout_type >> FAB_CM_TIMEOUT_SHIFT;
	m->local_cm_timeout = r->timeout_retry >> FAB_CM_TIMEOUT_SHIFT;
	m->max_cm_retries = r->cm_retries >> FAB_CM_MAX_RETRIES_SHIFT;
	return FAB_CM_E_NONE;
}

static enum fab_cm_err get_rep(const struct fab_cm_rep *r, struct fab_cm_msg *m)
{
	m->qpn = fab_get24(r->local_qpn);
	if (!qpn_connectable(m->qpn))
		return FAB_CM_E_QPN;
	m->psn = fab_get24(r->starting_psn);
	m->responder_resources = r->responder_resources;
	m->initiator_depth = r->initiator_depth;
	m->rnr_retry_count = r->rnr_srq >> FAB_CM_REP_RNR_SHIFT;
	return FAB_CM_E_NONE;
}

static enum fab_cm_err get_rej(const struct fab_cm_rej *r, struct fab_cm_msg *m)
{
	unsigned which = r->msg_rejected >> FAB_CM_REJ_MSG_SHIFT;

	if (which > FAB_CM_REJ_MSG_OTHER)
		return FAB_CM_E_REJ_MSG;
	if ((r->ari_len >> FAB_CM_ARI_LEN_SHIFT) > FAB_CM_ARI_MAX)
		return FAB_CM_E_REJ_ARI_LEN;
	m->rej_msg = (enum fab_cm_rej_msg)which;
	m->reason = fab_get16(r->reason);
	if (m->reason == 0)
		return FAB_CM_E_REJ_REASON;
	return FAB_CM_E_NONE;
}

/* The message after the MAD header, into m (m->type already set). */
static enum fab_cm_err get_msg(const uint8_t *mad, const struct fab_pkt *pkt, struct fab_cm_msg *m)
{
	/*
	 * Every message but the REQ starts with the sender's and the
	 * receiver's communication IDs, at the same place as in an RTU.
	 */
	const struct fab_cm_rtu *ids = (const struct fab_cm_rtu *)mad;

	if (m->type == FAB_CM_REQ)
		return get_req((const struct fab_cm_req *)mad, pkt, m);

	m->local_comm_id = fab_get32(ids->local_comm_id);
	m->remote_comm_id = fab_get32(ids->remote_comm_id);
	if (m->remote_comm_id == 0 || (m->type != FAB_CM_REJ && m->local_comm_id == 0))
		return FAB_CM_E_COMM_ID;

	switch (m->type) {
	case FAB_CM_REP: return get_rep((const struct fab_cm_rep *)mad, m);
	case FAB_CM_REJ: return get_rej((const struct fab_cm_rej *)mad, m);
	case FAB_CM_DREQ:
		m->qpn = fab_get24(((const struct fab_cm_dreq *)mad)->remote_qpn);
		return qpn_connectable(m->qpn) ? FAB_CM_E_NONE : FAB_CM_E_QPN;
	default: return FAB_CM_E_NONE; /* RTU, DREP: the IDs are all */
	}
}

/*
 * Check the packet, the MAD header and the message; fill m.  The MAD is
 * the payload of a frame that may lie in shared memory another process can
 * write (fab_pkt_decode leaves payloads in place): it is copied out once
 * and only the copy is checked and read, so that the attribute checked is
 * the message type returned.
 */
static enum fab_cm_err get_pkt(const struct fab_pkt *pkt, struct fab_cm_msg *m)
{
	uint8_t mad[FAB_MAD_LEN];
	const struct fab_mad_hdr *h = (const struct fab_mad_hdr *)mad;
	enum fab_cm_err err;

	err = check_pkt(pkt);
	if (err != FAB_CM_E_NONE)
		return err;
	memcpy(mad, pkt->payload, sizeof(mad));
	__atomic_signal_fence(__ATOMIC_SEQ_CST); /* the copy is read, never the payload */
	err = check_mad_hdr(h);
	if (err != FAB_CM_E_NONE)
		return err;
	memset(m, 0, sizeof(*m));
	m->type = (enum fab_cm_type)fab_get16(h->attr_id);
	m->tid = fab_get64(h->tid);
	m->src_ip = pkt->src_ip;
	m->dst_ip = pkt->dst_ip;
	return get_msg(mad, pkt, m);
}

int fab_cm_decode(const struct fab_pkt *pkt, struct fab_cm_msg *out, enum fab_cm_err *why)
{
	struct fab_cm_msg m;
	enum fab_cm_err err;

	if (!pkt || !out || (pkt->payload_len && !pkt->payload))
		return -EINVAL;
	/* Decode into a copy, so that a refused message leaves *out untouched. */
	err = get_pkt(pkt, &m);
	if (err != FAB_CM_E_NONE) {
		if (why)
			*why = err;
		return -EBADMSG;
	}
	*out = m;
	return 0;
}

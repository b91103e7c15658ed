/*
 * Writes the binary seed corpora of the libFuzzer targets under the folder
 * given (tests/fuzz/corpus), each input made by the project's own encoders
 * and checked to decode before it is written:
 *
 *   gen_seeds tests/fuzz/corpus
 *
 * Not a test: run by hand (scripts/fuzz --seeds) when a format changes; the
 * seeds it writes are kept in the repository.  Exits non-zero if an encoder
 * refuses what it is given or a seed does not decode.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fab_cm.h"
#include "fab_wire.h"
#include "fuzz.h"
#include "nicsim_abi.h"
#include "nicsim_mgmt.h"
#include "nss_proto.h"
#include "tpt.h"

static const char *root;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "gen_seeds: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

/* Write len bytes as <root>/<target>/<name>. */
static void put(const char *target, const char *name, const void *buf, size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, target);
	if (mkdir(path, 0755) && errno != EEXIST)
		die("cannot create %s: %s", path, strerror(errno));
	snprintf(path, sizeof(path), "%s/%s/%s", root, target, name);
	f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, len, f) != len || fclose(f))
		die("cannot write %s", path);
}

static uint32_t ip(const char *text)
{
	struct in_addr a;

	if (inet_pton(AF_INET, text, &a) != 1)
		die("bad address %s", text);
	return a.s_addr;
}

/* ---- fuzz_frame: one frame of every supported opcode ----------------------- */

/* One frame of opcode op with len bytes of payload, into the frame corpus. */
static void frame_one(uint8_t op, uint32_t len)
{
	static uint8_t frame[FAB_FRAME_MAX], payload[FAB_MTU];
	const struct fab_opcode_info *oi = fab_opcode_info(op);
	struct fab_pkt p, back;
	size_t n;
	char name[64];

	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 7 + 1);
	fab_pkt_init(&p, op);
	p.src_ip = ip("198.18.0.1");
	p.dst_ip = ip("198.18.0.2");
	p.udp_sport = fab_udp_sport(0x12);
	p.dest_qpn = 0x12;
	p.psn = 0xfffffe;
	p.ack_req = !!(oi->flags & FAB_OPF_LAST);
	p.se = op == FAB_OP_SEND_ONLY;
	if (p.has_reth) {
		p.va = 0x7f0000001000ull;
		p.rkey = 0x1234;
		p.dma_len = len ? len : 8192;
	}
	if (p.has_aeth) {
		p.syndrome = fab_aeth_nak(FAB_NAK_PSN_SEQ_ERROR);
		p.msn = 7;
	}
	if (p.has_imm)
		p.imm = 0xdeadbeef;
	if (p.has_deth) {
		p.qkey = 0x11111111;
		p.src_qpn = 0x34;
	}
	p.payload = payload;
	p.payload_len = len;
	if (fab_pkt_encode(&p, frame, sizeof(frame), &n))
		die("cannot encode opcode 0x%02x", op);
	if (fab_pkt_decode(frame, n, &back, NULL))
		die("opcode 0x%02x does not decode", op);
	snprintf(name, sizeof(name), "%s-%u", fab_opcode_name(op), len);
	put("frame", name, frame, n);
	/* The same packet as a datagram to 198.18.0.2, for fuzz_udp: a flags
	 * byte (0) and the frame without its Ethernet header. */
	if (len != FAB_MTU && (op == FAB_OP_SEND_ONLY || op == FAB_OP_RDMA_WRITE_FIRST ||
			       op == FAB_OP_RDMA_READ_REQUEST || op == FAB_OP_ACKNOWLEDGE ||
			       op == FAB_OP_UD_SEND_ONLY)) {
		frame[FAB_ETH_HLEN - 1] = 0;
		put("udp", name, frame + FAB_ETH_HLEN - 1, n - FAB_ETH_HLEN + 1);
	}
}

/* ---- fuzz_frame: one frame of every supported opcode ----------------------- */

static void frames(void)
{
	for (unsigned op = 0; op < 256; op++) {
		const struct fab_opcode_info *oi = fab_opcode_info((uint8_t)op);

		/* 3 bytes of payload (and a pad of 1) where the opcode has any. */
		if (oi && (oi->flags & FAB_OPF_SUPPORTED))
			frame_one((uint8_t)op, oi->flags & FAB_OPF_PAYLOAD ? 3 : 0);
	}
	frame_one(FAB_OP_SEND_ONLY, 0);
	frame_one(FAB_OP_RDMA_WRITE_ONLY, FAB_MTU);
}

/* ---- fuzz_cm: every message nicsim sends ------------------------------------ */

static void cm_msg(struct fab_cm_msg *m, enum fab_cm_type type)
{
	if (fab_cm_init(m, type))
		die("fab_cm_init %d", (int)type);
	m->tid = 0x0102030405060708ull;
	m->src_ip = ip("198.18.0.1");
	m->dst_ip = ip("198.18.0.2");
	m->local_comm_id = 0x1001;
	m->remote_comm_id = type == FAB_CM_REQ ? 0 : 0x2002;
	m->src_port = 40000;
	m->dst_port = 7471;
	m->qpn = 0x12;
	m->psn = 0xabcdef;
}

static void cms(void)
{
	static const enum fab_cm_type types[] = {FAB_CM_REQ, FAB_CM_REP,  FAB_CM_RTU,
						 FAB_CM_REJ, FAB_CM_DREQ, FAB_CM_DREP};
	uint8_t seed[16 + FAB_MAD_LEN], frame[FAB_CM_FRAME_LEN];
	struct fab_cm_msg m;
	struct fab_pkt p;
	size_t len;

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		cm_msg(&m, types[i]);
		/* The control block of fuzz_cm.c: a right header, the addresses. */
		memset(seed, 0, 16);
		memcpy(seed + 8, &m.src_ip, 4);
		memcpy(seed + 12, &m.dst_ip, 4);
		if (fab_cm_encode(&m, seed + 16))
			die("cannot encode CM %s", fab_cm_type_name(types[i]));
		put("cm", fab_cm_type_name(types[i]), seed, sizeof(seed));
		/* The whole frame, for fuzz_frame. */
		if (fab_cm_frame(&m, 5, frame, sizeof(frame), &len) ||
		    fab_pkt_decode(frame, len, &p, NULL) || fab_cm_decode(&p, &m, NULL))
			die("CM %s does not decode", fab_cm_type_name(types[i]));
		{
			char name[32];

			snprintf(name, sizeof(name), "CM-%s", fab_cm_type_name(types[i]));
			put("frame", name, frame, len);
		}
	}
}

/* ---- fuzz_nss_decode: every message type of the session protocol ----------- */

static void nss_one(const char *name, const struct nss_hdr *h, const void *desc, const void *data)
{
	uint8_t buf[1024];
	struct nss_msg m;
	const char *why = "refused by nss_encode";
	long n = nss_encode(h, desc, data, buf, sizeof(buf));

	if (n < 0 || nss_decode(buf, (size_t)n, &m, &why))
		die("session message %s does not encode and decode: %s", name, why);
	put("nss_decode", name, buf, (size_t)n);
}

static void nsss(void)
{
	struct nss_hello hello = {.version = NSS_VERSION,
				  .features = NSS_F_CAN_READ | NSS_F_READABLE,
				  .recv_count = 16,
				  .recv_size = 4096,
				  .max_rdma = 1u << 20,
				  .rdma_threshold = 65536,
				  .desc_len = 32,
				  .xfers = 4};
	uint8_t body[NSS_HELLO_LEN], desc[32], data[100];
	struct nss_hdr h;

	memset(desc, 0xd5, sizeof(desc));
	memset(data, 0x5a, sizeof(data));
	nss_hello_encode(&hello, body);
	h = (struct nss_hdr){.type = NSS_HELLO, .data_len = NSS_HELLO_LEN};
	nss_one("hello", &h, NULL, body);
	h = (struct nss_hdr){
	    .type = NSS_DATA, .seq = 1, .credit_limit = 17, .data_len = sizeof(data)};
	nss_one("data", &h, NULL, data);
	h = (struct nss_hdr){.type = NSS_DATA, .seq = 2, .credit_limit = 18};
	nss_one("credit", &h, NULL, NULL);
	h = (struct nss_hdr){.type = NSS_SRC_AVAIL,
			     .seq = 3,
			     .credit_limit = 18,
			     .desc_len = sizeof(desc),
			     .rdma_len = 1u << 20,
			     .data_len = sizeof(data)};
	nss_one("src-avail", &h, desc, data);
	h = (struct nss_hdr){.type = NSS_SINK_AVAIL,
			     .seq = 4,
			     .credit_limit = 19,
			     .desc_len = sizeof(desc),
			     .rdma_len = 1u << 20};
	nss_one("sink-avail", &h, desc, NULL);
	h = (struct nss_hdr){
	    .type = NSS_RD_DONE, .seq = 5, .credit_limit = 19, .rdma_len = 1u << 20};
	nss_one("rd-done", &h, NULL, NULL);
	h = (struct nss_hdr){.type = NSS_WR_DONE, .seq = 6, .credit_limit = 19, .rdma_len = 4096};
	nss_one("wr-done", &h, NULL, NULL);
	h = (struct nss_hdr){
	    .type = NSS_SHUTDOWN, .seq = 7, .credit_limit = 19, .stream_off = 123456};
	nss_one("shutdown", &h, NULL, NULL);
	h = (struct nss_hdr){.type = NSS_ABORT, .arg = NSS_ABORT_PROTOCOL};
	nss_one("abort", &h, NULL, NULL);
}

/* ---- fuzz_nss_conn: two sides talking, as scripts of actions ---------------- */

/* A script under way: HELLO parameters, then 4-byte records. */
struct script {
	uint8_t buf[1024];
	size_t len;
};

/* Start a script: both sides with features feat, 8 receives, 2 transfers
 * as a sink, version 2; each takes the other's HELLO. */
static void script_start(struct script *sc, uint8_t feat)
{
	const uint8_t side[5] = {feat, 4, 2, 1, 0};

	memcpy(sc->buf, side, 5);
	memcpy(sc->buf + 5, side, 5);
	sc->len = 10;
}

/* Side who (0 A, 1 B) does act with argument arg (24 bits, little-endian). */
static void act(struct script *sc, unsigned who, enum fz_conn_act a, uint32_t arg)
{
	if (sc->len + 4 > sizeof(sc->buf))
		die("nss_conn script too long");
	sc->buf[sc->len++] = (uint8_t)((unsigned)a << 1 | who);
	sc->buf[sc->len++] = (uint8_t)arg;
	sc->buf[sc->len++] = (uint8_t)(arg >> 8);
	sc->buf[sc->len++] = (uint8_t)(arg >> 16);
}

/* who takes the next message and posts its receive again. */
static void take(struct script *sc, unsigned who)
{
	act(sc, who, FZ_CONN_TAKE, 0);
	act(sc, who, FZ_CONN_REPOST, 0);
}

/* A large send from A to B: head 10 bytes, 5000 by RDMA; then, on the read
 * path, B reads it in two parts, on the write path B offers it in one
 * SINK_AVAIL and A writes it.  forge: B first gets each of its messages with
 * one field changed (field forge - 1). */
static void large_send(struct script *sc, bool read_path, unsigned forge)
{
	enum fz_conn_act b_takes = forge ? FZ_CONN_FORGE : FZ_CONN_TAKE;
	uint32_t forged = forge ? (forge - 1) | 0x0100u : 0;

	act(sc, 0, FZ_CONN_SRC_AVAIL, 9 | 4999u << 8);
	act(sc, 1, b_takes, forged);
	act(sc, 1, FZ_CONN_REPOST, 0);
	if (read_path) {
		act(sc, 1, FZ_CONN_RD_DONE, 1999);
		take(sc, 0);
		act(sc, 1, FZ_CONN_RD_DONE, 2999);
		take(sc, 0);
	} else {
		act(sc, 1, FZ_CONN_SINK_AVAIL, 4999);
		take(sc, 0);
		act(sc, 0, FZ_CONN_WR_DONE, 0);
		act(sc, 1, b_takes, forged);
		act(sc, 1, FZ_CONN_REPOST, 0);
	}
}

static void conns(void)
{
	struct script sc;

	for (unsigned path = 0; path < 2; path++) {
		const char *name = path ? "read-path" : "write-path";

		/* Data, a large send, data again, then both ends shut. */
		script_start(&sc, path ? NSS_F_CAN_READ | NSS_F_READABLE : 0);
		take(&sc, 1);
		take(&sc, 0);
		act(&sc, 0, FZ_CONN_DATA, 99);
		take(&sc, 1);
		large_send(&sc, path, 0);
		act(&sc, 0, FZ_CONN_DATA, 1000);
		take(&sc, 1);
		act(&sc, 0, FZ_CONN_SHUTDOWN, 0);
		take(&sc, 1);
		act(&sc, 1, FZ_CONN_SHUTDOWN, 0);
		take(&sc, 0);
		put("nss_conn", name, sc.buf, sc.len);
	}
	/* Credit: A sends until it may not, B takes them all, then tells. */
	script_start(&sc, 0);
	take(&sc, 1);
	take(&sc, 0);
	for (unsigned i = 0; i < 10; i++)
		act(&sc, 0, FZ_CONN_DATA, 100 + i);
	for (unsigned i = 0; i < 10; i++)
		take(&sc, 1);
	act(&sc, 1, FZ_CONN_CREDIT, 0);
	take(&sc, 0);
	act(&sc, 0, FZ_CONN_DATA, 7);
	take(&sc, 1);
	put("nss_conn", "credit", sc.buf, sc.len);
	/* Forgeries of every field, on both paths. */
	for (unsigned f = 1; f <= 7; f++) {
		for (unsigned path = 0; path < 2; path++) {
			char name[32];

			script_start(&sc, path ? NSS_F_CAN_READ | NSS_F_READABLE : 0);
			take(&sc, 1);
			take(&sc, 0);
			act(&sc, 0, FZ_CONN_DATA, 99);
			act(&sc, 1, FZ_CONN_FORGE, (f - 1) | 0x0100u);
			act(&sc, 1, FZ_CONN_REPOST, 0);
			large_send(&sc, path, f);
			snprintf(name, sizeof(name), "forge-%u-%s", f - 1, path ? "read" : "write");
			put("nss_conn", name, sc.buf, sc.len);
		}
	}
}

/* ---- fuzz_mgmt: listings as a NIC sends them -------------------------------- */

/* Append one reply message (2-byte little-endian length, header, records
 * of rec_size bytes, each filled with its number) to seed at *at. */
static void mgmt_msg(uint8_t *seed, size_t *at, uint16_t op, uint32_t count, size_t rec_size,
		     bool last)
{
	struct nic_mgmt_hdr h = {.magic = NIC_ABI_MAGIC,
				 .op = op,
				 .status = NIC_STATUS_OK,
				 .count = count,
				 .flags = last ? NIC_MGMT_F_LAST : 0};
	size_t len = sizeof(h) + count * rec_size;

	seed[(*at)++] = (uint8_t)len;
	seed[(*at)++] = (uint8_t)(len >> 8);
	memcpy(seed + *at, &h, sizeof(h));
	*at += sizeof(h);
	for (uint32_t i = 0; i < count; i++) {
		memset(seed + *at, (int)(i + 1), rec_size);
		*at += rec_size;
	}
}

static void mgmts(void)
{
	static uint8_t seed[4096];
	static const struct {
		const char *name;
		uint16_t op;
		size_t rec_size;
	} kinds[] = {
	    /* In the order of fuzz_mgmt.c's selector byte. */
	    {"stats", NIC_MGMT_STATS, sizeof(struct nic_stats)},
	    {"tpt", NIC_MGMT_TPT, sizeof(struct nic_mgmt_tpt_rec)},
	    {"faults", NIC_MGMT_FAULTS, sizeof(struct nic_mgmt_fault_rec)},
	    {"hosts", NIC_MGMT_HOSTS, sizeof(struct nic_mgmt_host_rec)},
	};
	struct nic_mgmt_hdr refused = {.magic = NIC_ABI_MAGIC,
				       .op = NIC_MGMT_TPT,
				       .status = NIC_STATUS_BAD_OPCODE,
				       .flags = NIC_MGMT_F_LAST};
	size_t at;

	for (uint8_t k = 0; k < 4; k++) {
		at = 0;
		seed[at++] = k;
		if (kinds[k].op == NIC_MGMT_STATS) {
			mgmt_msg(seed, &at, kinds[k].op, 1, kinds[k].rec_size, true);
		} else {
			/* Two messages, the second the last, then an empty listing's. */
			mgmt_msg(seed, &at, kinds[k].op, 2, kinds[k].rec_size, false);
			mgmt_msg(seed, &at, kinds[k].op, 1, kinds[k].rec_size, true);
		}
		put("mgmt", kinds[k].name, seed, at);
	}
	at = 0;
	seed[at++] = 1;
	mgmt_msg(seed, &at, NIC_MGMT_TPT, 0, 72, true);
	put("mgmt", "tpt-empty", seed, at);
	at = 0;
	seed[at++] = 1;
	seed[at++] = sizeof(refused);
	seed[at++] = 0;
	memcpy(seed + at, &refused, sizeof(refused));
	at += sizeof(refused);
	put("mgmt", "refused", seed, at);
}

/* ---- fuzz_cmd: commands and work requests of a host ------------------------- */

/*
 * A seed of fuzz_cmd.c's records, with a TPT beside it that executes the
 * commands the same way, so that the keys in the work requests are the
 * ones the fuzzer's TPT hands out.
 */
struct cmd_seed {
	uint8_t buf[4096];
	size_t len;
	struct tpt *tpt;
};

static const struct tpt_owner seed_owner = {.ctx_id = 7, .pid = 1234};

static void rec(struct cmd_seed *sd, uint8_t tag, const void *body, size_t n)
{
	if (sd->len + 1 + n > sizeof(sd->buf))
		die("cmd seed too long");
	sd->buf[sd->len++] = tag;
	if (n)
		memcpy(sd->buf + sd->len, body, n);
	sd->len += n;
}

/* Register [va, va + len) with access; the key. */
static uint32_t seed_reg(struct cmd_seed *sd, uint64_t va, uint64_t len, uint32_t access)
{
	struct nic_cmd c = {.opcode = NIC_CMD_REG_MR, .tag = 1};
	uint32_t key;

	c.u.reg_mr.va = va;
	c.u.reg_mr.len = len;
	c.u.reg_mr.access = access;
	rec(sd, 0, &c, sizeof(c));
	if (tpt_reg_mr(sd->tpt, &seed_owner, va, len, access, &key))
		die("tpt_reg_mr");
	return key;
}

static void seed_start(struct cmd_seed *sd)
{
	sd->len = 0;
	tpt_destroy(sd->tpt);
	/* As fuzz_cmd.c makes it: 16 entries, pages of 4096 bytes. */
	if (tpt_create(&sd->tpt, 16, 4096))
		die("tpt_create");
}

static void cmds(void)
{
	static const uint32_t all = NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_REMOTE_READ |
				    NIC_ACCESS_REMOTE_WRITE | NIC_ACCESS_MW_BIND;
	struct cmd_seed sd = {.tpt = NULL};
	struct nic_send_wqe sw;
	struct nic_recv_wqe rw;
	struct nic_cmd c;
	uint8_t reth[16], len;
	uint32_t key, mw;

	/* Every command once, with fields it accepts. */
	seed_start(&sd);
	for (uint16_t op = 0; op < NIC_CMD_MAX_; op++) {
		memset(&c, 0, sizeof(c));
		c.opcode = op;
		c.tag = op;
		switch (op) {
		case NIC_CMD_REG_MR:
			c.u.reg_mr.va = 0x10000;
			c.u.reg_mr.len = 0x10000;
			c.u.reg_mr.access = all;
			break;
		case NIC_CMD_DEREG_MR:
		case NIC_CMD_INVALIDATE_MW:
		case NIC_CMD_DEALLOC_MW: c.u.key.key = 0x100; break;
		case NIC_CMD_BIND_MW:
			c.u.bind_mw.va = 0x10000;
			c.u.bind_mw.len = 0x1000;
			c.u.bind_mw.access = NIC_ACCESS_REMOTE_READ;
			break;
		case NIC_CMD_LISTEN:
			c.u.listen.port = 7471;
			c.u.listen.backlog = 4;
			break;
		case NIC_CMD_UNLISTEN: c.u.listen.port = 7471; break;
		case NIC_CMD_CONNECT:
			c.u.conn.dst_addr = 0x010012c6;
			c.u.conn.dst_port = 7471;
			break;
		case NIC_CMD_SHM_MAP:
			c.u.shm.va = 0x20000;
			c.u.shm.len = 0x1000;
			break;
		default: break;
		}
		rec(&sd, 0, &c, sizeof(c));
	}
	put("cmd", "commands", sd.buf, sd.len);

	/* A SEND from a registered buffer, acknowledged. */
	seed_start(&sd);
	key = seed_reg(&sd, 0x10000, 0x10000, all);
	memset(&sw, 0, sizeof(sw));
	sw.wr_id = 1;
	sw.opcode = NIC_WR_SEND;
	sw.num_sge = 1;
	sw.sge[0] = (struct nic_sge){.va = 0x10000, .len = 5000, .lkey = key};
	rec(&sd, 1, &sw, sizeof(sw));
	rec(&sd, 3, NULL, 0);
	put("cmd", "send", sd.buf, sd.len);

	/* An RDMA READ into it, and an inline RDMA WRITE with immediate. */
	seed_start(&sd);
	key = seed_reg(&sd, 0x10000, 0x10000, all);
	memset(&sw, 0, sizeof(sw));
	sw.wr_id = 2;
	sw.opcode = NIC_WR_RDMA_READ;
	sw.num_sge = 2;
	sw.remote_va = 0x7f0000000000ull;
	sw.rkey = 0x4242;
	sw.sge[0] = (struct nic_sge){.va = 0x10000, .len = 100, .lkey = key};
	sw.sge[1] = (struct nic_sge){.va = 0x11000, .len = 100, .lkey = key};
	rec(&sd, 1, &sw, sizeof(sw));
	memset(&sw, 0, sizeof(sw));
	sw.wr_id = 3;
	sw.opcode = NIC_WR_RDMA_WRITE_IMM;
	sw.flags = NIC_WR_F_INLINE | NIC_WR_F_SOLICITED;
	sw.inline_len = 16;
	sw.imm = 0x01020304;
	rec(&sd, 1, &sw, sizeof(sw));
	rec(&sd, 3, NULL, 0);
	put("cmd", "read-write", sd.buf, sd.len);

	/* A receive posted, and a SEND of 170 bytes taking it. */
	seed_start(&sd);
	key = seed_reg(&sd, 0x10000, 0x10000, all);
	memset(&rw, 0, sizeof(rw));
	rw.wr_id = 4;
	rw.num_sge = 1;
	rw.sge[0] = (struct nic_sge){.va = 0x10000, .len = 4096, .lkey = key};
	rec(&sd, 2, &rw, sizeof(rw));
	len = 10;
	memcpy(sd.buf + sd.len, &len, 1);
	sd.len++;
	put("cmd", "recv", sd.buf, sd.len);

	/* A window bound to a region, then an RDMA WRITE through it. */
	seed_start(&sd);
	key = seed_reg(&sd, 0x10000, 0x10000, all);
	memset(&c, 0, sizeof(c));
	c.opcode = NIC_CMD_ALLOC_MW;
	rec(&sd, 0, &c, sizeof(c));
	if (tpt_alloc_mw(sd.tpt, &seed_owner, &mw))
		die("tpt_alloc_mw");
	memset(&c, 0, sizeof(c));
	c.opcode = NIC_CMD_BIND_MW;
	c.u.bind_mw.mw_key = mw;
	c.u.bind_mw.mr_key = key;
	c.u.bind_mw.va = 0x10000;
	c.u.bind_mw.len = 0x1000;
	c.u.bind_mw.access = NIC_ACCESS_REMOTE_WRITE;
	c.u.bind_mw.qpn = 0x1002; /* fuzz_cmd.c's QP */
	rec(&sd, 0, &c, sizeof(c));
	if (tpt_bind_mw(sd.tpt, &seed_owner, mw, key, 0x10000, 0x1000, NIC_ACCESS_REMOTE_WRITE,
			0x1002, &mw))
		die("tpt_bind_mw");
	fab_put64(reth, 0x10000);
	fab_put32(reth + 8, mw);
	fab_put32(reth + 12, 16);
	rec(&sd, 4, reth, sizeof(reth));
	put("cmd", "window-write", sd.buf, sd.len);
	tpt_destroy(sd.tpt);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR (tests/fuzz/corpus)\n", argv[0]);
		return 2;
	}
	root = argv[1];
	frames();
	cms();
	nsss();
	conns();
	mgmts();
	cmds();
	return 0;
}

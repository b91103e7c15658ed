/*
 * libFuzzer target of what a host writes for the NIC to check: commands
 * (nicsim/cmd.c: cmd_validate and cmd_execute against a real TPT), send
 * work requests (nicsim/rc_req.c: rc_post_send, then the engine checks
 * their local keys through rc_tpt.c) and receive work requests (taken by
 * an arriving SEND, their SGEs checked for writing).  The harness is the
 * smallest NIC those need, in this process: a TPT, two host contexts, one
 * RC engine whose operations transmit and place nothing (no memory is
 * touched) but check every key against the TPT, as the NIC's do.
 *
 * Input: records, each a tag byte and the bytes of what it carries (cut
 * short: the rest is zero).  tag % 5:
 *   0  a struct nic_cmd, from context 7 (tag bit 3 clear) or 8 (set)
 *   1  a struct nic_send_wqe of context 7, posted to the engine as the NIC
 *      takes one from the send ring (a malformed one fails the QP)
 *   2  a struct nic_recv_wqe of context 7, posted; then a SEND Only of
 *      next-byte * 17 bytes arrives with the expected PSN and takes it
 *   3  an ACK of everything sent arrives, and time passes (timers run)
 *   4  an RDMA WRITE Only arrives with the RETH of the next 16 bytes and
 *      16 bytes of payload (a remote key check)
 *
 * What it asserts (__builtin_trap): a command cmd_validate refuses
 * completes with that status and leaves the TPT as it was; the TPT never
 * holds more than its capacity; a send work request's refusal is the
 * documented one; and at the end, once the QP has failed (every grant
 * released) and both contexts are gone, the TPT is empty: no key check of
 * any path leaked a grant.  Seeds: tests/fuzz/corpus/cmd/.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cmd.h"
#include "rc.h"
#include "rc_tpt.h"
#include "tpt.h"
#include "fuzz.h"

#define CAPACITY 16u
#define PAGE 4096u
#define QPN 0x1002u
#define RQ_MAX 16u

static const struct tpt_owner owners[2] = {{.ctx_id = 7, .pid = 1234}, {.ctx_id = 8, .pid = 4321}};

static struct {
	struct tpt *tpt;
	struct rc rc;
	struct nic_recv_wqe rq[RQ_MAX];
	uint32_t rq_head, rq_tail;
	uint64_t completions;
} h;

/* ---- The engine's operations: keys checked, nothing moved ------------------ */

static int op_xmit(void *arg, struct fab_pkt *pkt, const struct rc_mem *mem, uint64_t off)
{
	(void)arg;
	(void)pkt;
	(void)mem;
	(void)off;
	return 0;
}

static int op_place(void *arg, const struct rc_mem *mem, uint64_t off, const void *buf, size_t len)
{
	(void)arg;
	(void)buf;
	CHECK(off <= mem->len && len <= mem->len - off);
	return 0;
}

static int op_check_local(void *arg, const struct nic_sge *sge, uint32_t nsge, bool write,
			  struct rc_mem *mem, enum nic_tpt_reason *why)
{
	(void)arg;
	return rc_tpt_local(h.tpt, &owners[0], sge, nsge, write, mem, why);
}

static int op_check_remote(void *arg, uint32_t rkey, uint64_t va, uint64_t len, uint32_t access,
			   struct rc_mem *mem, enum nic_tpt_reason *why)
{
	(void)arg;
	return rc_tpt_remote(h.tpt, &owners[0], QPN, rkey, va, len, access, mem, why) < 0 ? -EACCES
											  : 0;
}

static void op_release(void *arg, struct rc_mem *mem)
{
	(void)arg;
	rc_tpt_release(h.tpt, mem, NULL, NULL);
}

static void op_complete(void *arg, const struct nic_cqe *cqe)
{
	(void)arg;
	(void)cqe;
	h.completions++;
}

static void op_complete_inline(void *arg, const struct nic_cqe *cqe, const void *data)
{
	(void)arg;
	(void)cqe;
	(void)data;
	h.completions++;
}

static int op_take_recv(void *arg, struct nic_recv_wqe *wqe)
{
	(void)arg;
	if (h.rq_head == h.rq_tail)
		return -EAGAIN;
	*wqe = h.rq[h.rq_head++ % RQ_MAX];
	return 0;
}

static void op_error(void *arg, uint16_t status)
{
	(void)arg;
	(void)status;
}

/* The stand-in for the NIC's QP and connection commands: accepted. */
static uint16_t fake_conn_exec(void *arg, void *ctx, const struct nic_cmd *cmd, uint32_t *key)
{
	(void)arg;
	(void)ctx;
	if (cmd->opcode == NIC_CMD_CREATE_QP)
		*key = QPN;
	return NIC_STATUS_OK;
}

/* Copy the next record's n bytes into out, zero-padded; advance *at. */
static void take(const uint8_t *data, size_t size, size_t *at, void *out, size_t n)
{
	size_t k = size - *at < n ? size - *at : n;

	memset(out, 0, n);
	memcpy(out, data + *at, k);
	*at += k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct rc_ops ops = {.xmit = op_xmit,
					  .place = op_place,
					  .check_local = op_check_local,
					  .check_remote = op_check_remote,
					  .release = op_release,
					  .complete = op_complete,
					  .complete_inline = op_complete_inline,
					  .take_recv = op_take_recv,
					  .error = op_error};
	static uint8_t payload[255 * 17];
	struct nic_counters stats;
	struct rc_config cfg;
	struct cmd_env env;
	uint64_t now = 1000000;
	size_t at = 0;

	memset(&h.rq, 0, sizeof(h.rq));
	h.rq_head = h.rq_tail = 0;
	h.completions = 0;
	CHECK(tpt_create(&h.tpt, CAPACITY, PAGE) == 0);
	memset(&stats, 0, sizeof(stats));
	env = (struct cmd_env){.tpt = h.tpt,
			       .stats = &stats,
			       .conn_exec = fake_conn_exec,
			       .caps = NIC_CAP_MW | NIC_CAP_RDMA_READ,
			       .max_reg_len = 1u << 20,
			       .page_size = PAGE,
			       .nic_addr = 0x020012c6};
	rc_config_default(&cfg);
	rc_init(&h.rc, &cfg, &ops, QPN, 0x2003, 0x020012c6, 0x010012c6, 100, 5000);

	while (at < size) {
		uint8_t tag = data[at++];
		struct fab_pkt pkt;

		switch (tag % 5) {
		case 0: {
			const struct tpt_owner *who = &owners[(tag >> 3) & 1];
			uint32_t before = tpt_in_use(h.tpt);
			struct nic_cmd cmd;
			struct nic_cpl cpl;
			uint16_t valid;

			take(data, size, &at, &cmd, sizeof(cmd));
			valid = cmd_validate(&env, &cmd);
			cmd_execute(&env, who, NULL, &cmd, &cpl);
			CHECK(cpl.tag == cmd.tag && cpl.opcode == cmd.opcode);
			if (valid != NIC_STATUS_OK)
				CHECK(cpl.status == valid && tpt_in_use(h.tpt) == before);
			break;
		}
		case 1: {
			struct nic_send_wqe w;
			int rc;

			take(data, size, &at, &w, sizeof(w));
			rc = rc_post_send(&h.rc, &w);
			CHECK(rc == 0 || rc == -EINVAL || rc == -ENOSPC || rc == -ENOTCONN);
			if (rc == -EINVAL) /* as the NIC does (qpio_poll) */
				rc_fail(&h.rc, NIC_WC_LOC_QP_OP_ERR);
			rc_progress(&h.rc, now);
			break;
		}
		case 2: {
			uint8_t len = 0;

			take(data, size, &at, &h.rq[h.rq_tail % RQ_MAX], sizeof(h.rq[0]));
			if (h.rq_tail - h.rq_head < RQ_MAX)
				h.rq_tail++;
			take(data, size, &at, &len, 1);
			fab_pkt_init(&pkt, FAB_OP_SEND_ONLY);
			pkt.dest_qpn = QPN;
			pkt.psn = h.rc.epsn;
			pkt.ack_req = true;
			pkt.payload = payload;
			pkt.payload_len = len * 17u;
			rc_recv(&h.rc, &pkt, now);
			rc_progress(&h.rc, now);
			break;
		}
		case 3:
			fab_pkt_init(&pkt, FAB_OP_ACKNOWLEDGE);
			pkt.dest_qpn = QPN;
			pkt.psn = rc_psn_add(h.rc.max_psn, FAB_MASK24); /* max_psn - 1 */
			pkt.syndrome = fab_aeth_ack(FAB_AETH_CREDITS_INVALID);
			rc_recv(&h.rc, &pkt, now);
			now += 100000000; /* 100 ms: past the ACK timeout */
			rc_progress(&h.rc, now);
			break;
		default: {
			uint8_t reth[16];

			take(data, size, &at, reth, sizeof(reth));
			fab_pkt_init(&pkt, FAB_OP_RDMA_WRITE_ONLY);
			pkt.dest_qpn = QPN;
			pkt.psn = h.rc.epsn;
			pkt.ack_req = true;
			pkt.va = fab_get64(reth);
			pkt.rkey = fab_get32(reth + 8);
			pkt.dma_len = fab_get32(reth + 12);
			pkt.payload = payload;
			pkt.payload_len = 16;
			rc_recv(&h.rc, &pkt, now);
			rc_progress(&h.rc, now);
			break;
		}
		}
		CHECK(tpt_in_use(h.tpt) <= CAPACITY);
	}

	/* The QP fails and both hosts go: nothing may stay in the TPT. */
	rc_fail(&h.rc, NIC_WC_WR_FLUSH_ERR);
	tpt_release_owner(h.tpt, owners[0].ctx_id);
	tpt_release_owner(h.tpt, owners[1].ctx_id);
	CHECK(tpt_in_use(h.tpt) == 0);
	tpt_destroy(h.tpt);
	h.tpt = NULL;
	return 0;
}

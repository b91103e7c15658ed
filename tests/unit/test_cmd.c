/*
 * Command decoding and execution (nicsim/cmd.c): every malformed field is
 * refused with its own status and counter, and a refused command changes
 * nothing in the TPT.
 */
#include <errno.h>
#include <string.h>

#include "cmd.h"
#include "nstest.h"

#define PAGE 4096u

static struct tpt *tpt;
static struct nic_counters stats;
static struct cmd_env env;
static const struct tpt_owner me = {.ctx_id = 7, .pid = 1234};
static const struct tpt_owner other = {.ctx_id = 8, .pid = 4321};

/* A stand-in for the NIC's QP and connection commands: one slot, enough to
 * see what the command processor passes on and what it refuses first. */
static uint32_t fake_slot = UINT32_MAX, fake_qpn;
static unsigned fake_calls;

static uint16_t fake_conn_exec(void *arg, void *ctx, const struct nic_cmd *cmd, uint32_t *key)
{
	(void)arg;
	(void)ctx;
	fake_calls++;
	switch (cmd->opcode) {
	case NIC_CMD_CREATE_QP:
		if (fake_slot != UINT32_MAX)
			return NIC_STATUS_BAD_QP;
		fake_slot = cmd->u.qp.slot;
		*key = fake_qpn = 0x1002;
		return NIC_STATUS_OK;
	case NIC_CMD_DESTROY_QP:
		if (fake_slot == UINT32_MAX || cmd->u.qp.qpn != fake_qpn)
			return NIC_STATUS_BAD_QP;
		fake_slot = UINT32_MAX;
		return NIC_STATUS_OK;
	default: return NIC_STATUS_OK;
	}
}

static void setup(uint32_t caps, uint32_t capacity)
{
	tpt_destroy(tpt);
	tpt = NULL;
	NST_REQUIRE_EQ(tpt_create(&tpt, capacity, PAGE), 0);
	memset(&stats, 0, sizeof(stats));
	env = (struct cmd_env){.tpt = tpt,
			       .stats = &stats,
			       .conn_exec = fake_conn_exec,
			       .caps = caps,
			       .max_reg_len = 1u << 20,
			       .page_size = PAGE,
			       .nic_addr = 0x010012c6};
}

static struct nic_cmd reg_cmd(uint64_t va, uint64_t len, uint32_t access)
{
	struct nic_cmd c = {.opcode = NIC_CMD_REG_MR, .tag = 99};

	c.u.reg_mr.va = va;
	c.u.reg_mr.len = len;
	c.u.reg_mr.access = access;
	return c;
}

static struct nic_cmd key_cmd(uint16_t opcode, uint32_t key)
{
	struct nic_cmd c = {.opcode = opcode, .tag = 5};

	c.u.key.key = key;
	return c;
}

/* Execute and return the status; the TPT occupancy is checked by callers. */
static uint16_t run(const struct tpt_owner *who, const struct nic_cmd *c, struct nic_cpl *cpl)
{
	struct nic_cpl local;

	if (!cpl)
		cpl = &local;
	cmd_execute(&env, who, NULL, c, cpl);
	NST_EQ_U(cpl->tag, c->tag);
	NST_EQ(cpl->opcode, c->opcode);
	return cpl->status;
}

static uint32_t reg(uint64_t va, uint64_t len, uint32_t access)
{
	struct nic_cmd c = reg_cmd(va, len, access);
	struct nic_cpl cpl;

	NST_REQUIRE_EQ(run(&me, &c, &cpl), NIC_STATUS_OK);
	NST_NE(cpl.key, 0);
	return cpl.key;
}

static void test_unknown_opcode(void)
{
	struct nic_cmd c = {.opcode = NIC_CMD_MAX_, .tag = 1};

	setup(NIC_CAP_MW, 16);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_OPCODE);
	c.opcode = 0xffff;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_OPCODE);
	NST_EQ(stats.err_bad_opcode, 2);
	NST_EQ(stats.cmds_failed, 2);
	NST_EQ(stats.cmds, 2);
}

static void test_reserved_fields(void)
{
	struct nic_cmd c;

	setup(NIC_CAP_MW, 16);
	c = reg_cmd(0x10000, PAGE, 0);
	c.flags = 1;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_FIELD);
	c = reg_cmd(0x10000, PAGE, 0);
	c.reserved0 = 0x80000000u;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_FIELD);
	c = reg_cmd(0x10000, PAGE, 0);
	c.u.reg_mr.reserved = 1;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_FIELD);
	/* Each byte past the opcode's fields is checked, up to the last one. */
	for (size_t i = sizeof(struct nic_cmd_reg_mr); i < sizeof(c.u.raw); i++) {
		c = reg_cmd(0x10000, PAGE, 0);
		c.u.raw[i] = 0x5a;
		NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_FIELD);
	}
	c = key_cmd(NIC_CMD_DEREG_MR, 0x100);
	c.u.key.reserved = 3;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_FIELD);
	c = (struct nic_cmd){.opcode = NIC_CMD_NOP};
	c.u.raw[0] = 1;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_FIELD);
	c = (struct nic_cmd){.opcode = NIC_CMD_QUERY_DEVICE};
	c.u.raw[47] = 1;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_FIELD);
	c = key_cmd(NIC_CMD_ALLOC_MW, 1); /* ALLOC_MW takes no key */
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_FIELD);
	NST_EQ(stats.err_bad_field, 7 + (48 - 24));
	NST_EQ(tpt_in_use(tpt), 0);
}

static void test_reg_access_bits(void)
{
	struct nic_cmd c;

	setup(NIC_CAP_MW, 16);
	c = reg_cmd(0x10000, PAGE, 0x10);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_ACCESS);
	c = reg_cmd(0x10000, PAGE, 0x80000000u);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_ACCESS);
	/* Remote write without local write is refused, as on InfiniBand. */
	c = reg_cmd(0x10000, PAGE, NIC_ACCESS_REMOTE_WRITE);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_ACCESS);
	NST_EQ(stats.err_bad_access, 3);
	NST_EQ(tpt_in_use(tpt), 0);
	reg(0x10000, PAGE, NIC_ACCESS_ALL);
	NST_EQ(tpt_in_use(tpt), 1);
}

static void test_reg_ranges(void)
{
	struct nic_cmd c;

	setup(NIC_CAP_MW, 16);
	c = reg_cmd(0x10000, 0, 0);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_RANGE);
	c = reg_cmd(UINT64_MAX - 100, 102, 0); /* wraps past the top */
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_RANGE);
	c = reg_cmd(UINT64_MAX - 100, 101, 0); /* end address 2^64 is not representable */
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_RANGE);
	c = reg_cmd(UINT64_MAX - 100, 100, 0); /* ends at the highest address */
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_OK);
	c = reg_cmd(0x10000, (1u << 20) + 1, 0);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_TOO_LARGE);
	c = reg_cmd(0x10000, 1u << 20, 0);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_OK);
	NST_EQ(stats.err_bad_range, 3);
	NST_EQ(stats.err_too_large, 1);
	NST_EQ(tpt_in_use(tpt), 2);
}

static void test_tpt_full_then_recovers(void)
{
	struct nic_cmd c;
	uint32_t k1;

	setup(0, 2);
	k1 = reg(0x10000, PAGE, 0);
	reg(0x20000, PAGE, 0);
	c = reg_cmd(0x30000, PAGE, 0);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_TPT_FULL);
	NST_EQ(stats.err_tpt_full, 1);
	c = key_cmd(NIC_CMD_DEREG_MR, k1);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_OK);
	c = reg_cmd(0x30000, PAGE, 0);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_OK);
}

static void test_dereg_keys(void)
{
	struct nic_cmd c;
	uint32_t k;

	setup(NIC_CAP_MW, 16);
	k = reg(0x10000, PAGE, NIC_ACCESS_LOCAL_WRITE);
	/* Another context cannot deregister it. */
	c = key_cmd(NIC_CMD_DEREG_MR, k);
	NST_EQ(run(&other, &c, NULL), NIC_STATUS_BAD_KEY);
	NST_EQ(tpt_in_use(tpt), 1);
	/* A forged key byte, an index past the table, and key 0. */
	c = key_cmd(NIC_CMD_DEREG_MR, k ^ 0x1);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_KEY);
	c = key_cmd(NIC_CMD_DEREG_MR, NIC_KEY_MAKE(1000, 0));
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_KEY);
	c = key_cmd(NIC_CMD_DEREG_MR, 0);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_KEY);
	NST_EQ(tpt_in_use(tpt), 1);
	c = key_cmd(NIC_CMD_DEREG_MR, k);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_OK);
	/* Already released. */
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_KEY);
	NST_EQ(stats.err_bad_key, 5);
	NST_EQ(tpt_in_use(tpt), 0);
}

static void test_windows(void)
{
	struct nic_cmd c = {.opcode = NIC_CMD_ALLOC_MW, .tag = 3};
	struct nic_cpl cpl;
	uint32_t mr, mw;

	setup(NIC_CAP_MW, 16);
	mr = reg(0x10000, 4 * PAGE,
		 NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_REMOTE_WRITE | NIC_ACCESS_REMOTE_READ |
		     NIC_ACCESS_MW_BIND);
	NST_EQ(run(&me, &c, &cpl), NIC_STATUS_OK);
	mw = cpl.key;
	c = (struct nic_cmd){.opcode = NIC_CMD_BIND_MW, .tag = 4};
	c.u.bind_mw = (struct nic_cmd_bind_mw){.mw_key = mw,
					       .mr_key = mr,
					       .va = 0x10000 + PAGE,
					       .len = PAGE,
					       .access = NIC_ACCESS_REMOTE_READ,
					       .qpn = 12};
	NST_EQ(run(&me, &c, &cpl), NIC_STATUS_OK);
	NST_NE(cpl.key, mw); /* a bind changes the key byte */
	mw = cpl.key;
	/* Local access bits in a bind, no access, and a range past the region. */
	c.u.bind_mw.mw_key = mw;
	c.u.bind_mw.access = NIC_ACCESS_LOCAL_WRITE;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_ACCESS);
	c.u.bind_mw.access = 0;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_ACCESS);
	c.u.bind_mw.access = NIC_ACCESS_REMOTE_READ;
	c.u.bind_mw.len = 4 * PAGE;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_RANGE);
	/* Keys of the wrong kind: a region as the window, a window as the region. */
	c.u.bind_mw.len = PAGE;
	c.u.bind_mw.mw_key = mr;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_KEY);
	c.u.bind_mw.mw_key = mw;
	c.u.bind_mw.mr_key = mw;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_KEY);
	/* The region cannot go while a window is bound to it. */
	c = key_cmd(NIC_CMD_DEREG_MR, mr);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BUSY);
	/* DEREG_MR of a window key is refused. */
	c = key_cmd(NIC_CMD_DEREG_MR, mw);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_KEY);
	c = key_cmd(NIC_CMD_INVALIDATE_MW, mw);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_OK);
	c = key_cmd(NIC_CMD_DEALLOC_MW, mw);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_OK);
	c = key_cmd(NIC_CMD_DEREG_MR, mr);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_OK);
	NST_EQ(tpt_in_use(tpt), 0);
	NST_EQ(stats.cmd_bind_mw, 6);
	NST_EQ(stats.cmd_alloc_mw, 1);
}

static void test_without_windows(void)
{
	struct nic_cmd c = {.opcode = NIC_CMD_ALLOC_MW};

	setup(0, 16);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_NOT_SUPPORTED);
	c = reg_cmd(0x10000, PAGE, NIC_ACCESS_MW_BIND);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_NOT_SUPPORTED);
	c = key_cmd(NIC_CMD_INVALIDATE_MW, 0x100);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_NOT_SUPPORTED);
	c = (struct nic_cmd){.opcode = NIC_CMD_BIND_MW};
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_NOT_SUPPORTED);
	NST_EQ(stats.err_not_supported, 4);
	NST_EQ(tpt_in_use(tpt), 0);
}

static void test_query_device(void)
{
	struct nic_cmd c = {.opcode = NIC_CMD_QUERY_DEVICE, .tag = 77};
	struct nic_cpl cpl;

	setup(NIC_CAP_RDMA_READ, 16);
	reg(0x10000, PAGE, 0);
	NST_EQ(run(&me, &c, &cpl), NIC_STATUS_OK);
	NST_EQ(cpl.u.query_device.abi_version, NIC_ABI_VERSION);
	NST_EQ(cpl.u.query_device.caps, NIC_CAP_RDMA_READ);
	NST_EQ(cpl.u.query_device.tpt_capacity, 16);
	NST_EQ(cpl.u.query_device.tpt_in_use, 1);
	NST_EQ_U(cpl.u.query_device.max_reg_len, 1u << 20);
	NST_EQ(cpl.u.query_device.ctx_id, me.ctx_id);
	NST_EQ(stats.cmd_query_device, 1);
	NST_EQ(stats.cmds_failed, 0);
}

static void test_queue_pair_commands(void)
{
	struct nic_cmd c = {.opcode = NIC_CMD_CREATE_QP, .tag = 11};
	struct nic_cpl cpl;

	setup(0, 16);
	fake_slot = UINT32_MAX;
	c.u.qp.slot = NIC_QP_SLOTS;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_QP);
	c.u.qp.slot = 3;
	c.u.qp.qpn = 5; /* CREATE_QP takes no number */
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_FIELD);
	c.u.qp.qpn = 0;
	c.u.qp.flags = NIC_QP_F_ALL + 1; /* a flag this NIC does not know */
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_FIELD);
	c.u.qp.flags = NIC_QP_F_HOLD_FIRST;
	c.u.qp.reserved = 1;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_FIELD);
	c.u.qp.reserved = 0;
	NST_EQ(run(&me, &c, &cpl), NIC_STATUS_OK);
	NST_EQ(cpl.key, 0x1002);
	NST_EQ(fake_slot, 3);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_QP); /* slot in use */
	c = (struct nic_cmd){.opcode = NIC_CMD_DESTROY_QP};
	c.u.qp.qpn = 0x1003;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_QP);
	c.u.qp.slot = 1; /* DESTROY_QP takes no slot */
	c.u.qp.qpn = 0x1002;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_FIELD);
	c.u.qp.slot = 0;
	c.u.qp.flags = NIC_QP_F_HOLD_FIRST; /* DESTROY_QP takes no flags */
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_FIELD);
	c.u.qp.flags = 0;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_OK);
	NST_EQ(fake_slot, UINT32_MAX);
	NST_EQ(stats.cmd_create_qp, 6);
	NST_EQ(stats.cmd_destroy_qp, 4);
	NST_EQ(stats.err_bad_qp, 3);
}

/* Connection commands: every field the command does not use must be 0,
 * and a refused command never reaches the connection code. */
static void test_connection_command_fields(void)
{
	struct nic_cmd c;

	setup(0, 16);
	fake_calls = 0;
	c = (struct nic_cmd){.opcode = NIC_CMD_LISTEN};
	c.u.listen.port = 0;
	c.u.listen.backlog = 4;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_FIELD);
	c.u.listen.port = 80;
	c.u.listen.backlog = 0;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_FIELD);
	c.u.listen.backlog = NIC_EQ_DEPTH + 1;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_FIELD);
	c.u.listen.backlog = NIC_EQ_DEPTH;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_OK);
	c.opcode = NIC_CMD_UNLISTEN;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_FIELD); /* UNLISTEN takes no backlog */
	c = (struct nic_cmd){.opcode = NIC_CMD_CONNECT};
	c.u.conn.qpn = 0x1002;
	c.u.conn.dst_addr = 0x020012c6;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_FIELD); /* no port */
	c.u.conn.dst_port = 80;
	c.u.conn.conn_id = 1;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_FIELD);
	c.u.conn.conn_id = 0;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_OK);
	c.opcode = NIC_CMD_ACCEPT; /* addresses are CONNECT's only */
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_FIELD);
	c = (struct nic_cmd){.opcode = NIC_CMD_REJECT};
	c.u.conn.qpn = 5;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_FIELD);
	c = (struct nic_cmd){.opcode = NIC_CMD_DISCONNECT};
	c.u.conn.conn_id = 9;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_FIELD);
	c.u.conn.conn_id = 0;
	c.u.conn.reserved = 1;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_FIELD);
	NST_EQ(fake_calls, 2);
	NST_EQ(stats.cmd_conn, 12);
}

static unsigned fake_shm_calls;

static uint16_t fake_shm_exec(void *arg, void *ctx, const struct nic_cmd *cmd)
{
	(void)arg;
	(void)ctx;
	(void)cmd;
	fake_shm_calls++;
	return NIC_STATUS_OK;
}

static struct nic_cmd shm_cmd(uint16_t opcode, uint64_t va, uint64_t len)
{
	struct nic_cmd c = {.opcode = opcode, .tag = 7};

	c.u.shm.va = va;
	c.u.shm.len = len;
	return c;
}

/* SHM_MAP's range is page-aligned, non-empty and does not wrap; SHM_UNMAP
 * names a start only; both need the NIC's shared-buffer support. */
static void test_shm_command_fields(void)
{
	struct nic_cmd c;

	setup(0, 16);
	c = shm_cmd(NIC_CMD_SHM_MAP, 0x10000, PAGE);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_NOT_SUPPORTED);
	env.shm_exec = fake_shm_exec;
	fake_shm_calls = 0;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_OK);
	c = shm_cmd(NIC_CMD_SHM_MAP, 0x10000 + 8, PAGE);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_RANGE);
	c = shm_cmd(NIC_CMD_SHM_MAP, 0x10000, PAGE + 1);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_RANGE);
	c = shm_cmd(NIC_CMD_SHM_MAP, 0x10000, 0);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_RANGE);
	c = shm_cmd(NIC_CMD_SHM_MAP, UINT64_MAX - PAGE + 1, 2 * PAGE);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_RANGE);
	c = shm_cmd(NIC_CMD_SHM_MAP, 0x10000, PAGE);
	c.u.raw[16] = 1;
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_FIELD);
	c = shm_cmd(NIC_CMD_SHM_UNMAP, 0x10000, PAGE); /* UNMAP takes no length */
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_BAD_FIELD);
	c = shm_cmd(NIC_CMD_SHM_UNMAP, 0x10000, 0);
	NST_EQ(run(&me, &c, NULL), NIC_STATUS_OK);
	NST_EQ(fake_shm_calls, 2);
	NST_EQ(stats.cmd_shm_map, 7);
	NST_EQ(stats.cmd_shm_unmap, 2);
}

static int clean(void)
{
	tpt_destroy(tpt);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"unknown_opcode", test_unknown_opcode},
	    {"reserved_fields", test_reserved_fields},
	    {"shm_command_fields", test_shm_command_fields},
	    {"reg_access_bits", test_reg_access_bits},
	    {"reg_ranges", test_reg_ranges},
	    {"tpt_full_then_recovers", test_tpt_full_then_recovers},
	    {"dereg_keys", test_dereg_keys},
	    {"windows", test_windows},
	    {"without_windows", test_without_windows},
	    {"query_device", test_query_device},
	    {"queue_pair_commands", test_queue_pair_commands},
	    {"connection_command_fields", test_connection_command_fields},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "cmd", tests, NULL, clean);
}

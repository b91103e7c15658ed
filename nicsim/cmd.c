#include "cmd.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

/* True if bytes [from, 48) of the command body are all zero. */
static bool body_zero_from(const struct nic_cmd *cmd, size_t from)
{
	for (size_t i = from; i < sizeof(cmd->u.raw); i++) {
		if (cmd->u.raw[i])
			return false;
	}
	return true;
}

/* Bytes of the body each opcode uses; the rest must be zero. */
static size_t body_len(uint16_t opcode)
{
	switch (opcode) {
	case NIC_CMD_REG_MR: return sizeof(struct nic_cmd_reg_mr);
	case NIC_CMD_DEREG_MR:
	case NIC_CMD_ALLOC_MW:
	case NIC_CMD_INVALIDATE_MW:
	case NIC_CMD_DEALLOC_MW: return sizeof(struct nic_cmd_key);
	case NIC_CMD_BIND_MW: return sizeof(struct nic_cmd_bind_mw);
	case NIC_CMD_CREATE_QP:
	case NIC_CMD_DESTROY_QP: return sizeof(struct nic_cmd_qp);
	case NIC_CMD_LISTEN:
	case NIC_CMD_UNLISTEN: return sizeof(struct nic_cmd_listen);
	case NIC_CMD_CONNECT:
	case NIC_CMD_ACCEPT:
	case NIC_CMD_REJECT:
	case NIC_CMD_DISCONNECT: return sizeof(struct nic_cmd_conn);
	case NIC_CMD_SHM_MAP: return sizeof(struct nic_cmd_shm);
	case NIC_CMD_SHM_UNMAP: return sizeof(uint64_t); /* va; len must be 0 */
	default: return 0;
	}
}

/* Non-empty, and the end address va + len is representable (as in the TPT). */
static bool range_ok(uint64_t va, uint64_t len)
{
	return len > 0 && va <= UINT64_MAX - len;
}

uint16_t cmd_validate(const struct cmd_env *env, const struct nic_cmd *cmd)
{
	const bool mw = env->caps & NIC_CAP_MW;

	if (cmd->opcode >= NIC_CMD_MAX_)
		return NIC_STATUS_BAD_OPCODE;
	if (cmd->flags || cmd->reserved0 || !body_zero_from(cmd, body_len(cmd->opcode)))
		return NIC_STATUS_BAD_FIELD;

	switch (cmd->opcode) {
	case NIC_CMD_REG_MR: {
		const struct nic_cmd_reg_mr *r = &cmd->u.reg_mr;

		if (r->reserved)
			return NIC_STATUS_BAD_FIELD;
		if (r->access & ~NIC_ACCESS_ALL)
			return NIC_STATUS_BAD_ACCESS;
		/* As on InfiniBand, remote write needs local write. */
		if ((r->access & NIC_ACCESS_REMOTE_WRITE) && !(r->access & NIC_ACCESS_LOCAL_WRITE))
			return NIC_STATUS_BAD_ACCESS;
		if ((r->access & NIC_ACCESS_MW_BIND) && !mw)
			return NIC_STATUS_NOT_SUPPORTED;
		if (!range_ok(r->va, r->len))
			return NIC_STATUS_BAD_RANGE;
		if (r->len > env->max_reg_len)
			return NIC_STATUS_TOO_LARGE;
		return NIC_STATUS_OK;
	}
	case NIC_CMD_ALLOC_MW:
		if (cmd->u.key.key || cmd->u.key.reserved)
			return NIC_STATUS_BAD_FIELD;
		return mw ? NIC_STATUS_OK : NIC_STATUS_NOT_SUPPORTED;
	case NIC_CMD_DEREG_MR:
	case NIC_CMD_INVALIDATE_MW:
	case NIC_CMD_DEALLOC_MW:
		if (cmd->u.key.reserved)
			return NIC_STATUS_BAD_FIELD;
		if (cmd->opcode != NIC_CMD_DEREG_MR && !mw)
			return NIC_STATUS_NOT_SUPPORTED;
		return NIC_STATUS_OK;
	case NIC_CMD_BIND_MW: {
		const struct nic_cmd_bind_mw *b = &cmd->u.bind_mw;
		const uint32_t remote = NIC_ACCESS_REMOTE_READ | NIC_ACCESS_REMOTE_WRITE;

		if (!mw)
			return NIC_STATUS_NOT_SUPPORTED;
		if (!b->access || (b->access & ~remote))
			return NIC_STATUS_BAD_ACCESS;
		if (!range_ok(b->va, b->len))
			return NIC_STATUS_BAD_RANGE;
		return NIC_STATUS_OK;
	}
	case NIC_CMD_CREATE_QP:
		if (cmd->u.qp.qpn || cmd->u.qp.reserved || (cmd->u.qp.flags & ~NIC_QP_F_ALL))
			return NIC_STATUS_BAD_FIELD;
		return cmd->u.qp.slot < NIC_QP_SLOTS ? NIC_STATUS_OK : NIC_STATUS_BAD_QP;
	case NIC_CMD_DESTROY_QP:
		return cmd->u.qp.slot || cmd->u.qp.flags || cmd->u.qp.reserved
			   ? NIC_STATUS_BAD_FIELD
			   : NIC_STATUS_OK;
	case NIC_CMD_LISTEN:
	case NIC_CMD_UNLISTEN: {
		const struct nic_cmd_listen *l = &cmd->u.listen;

		if (l->reserved || l->port == 0)
			return NIC_STATUS_BAD_FIELD;
		if (cmd->opcode == NIC_CMD_UNLISTEN)
			return l->backlog ? NIC_STATUS_BAD_FIELD : NIC_STATUS_OK;
		return l->backlog >= 1 && l->backlog <= NIC_EQ_DEPTH ? NIC_STATUS_OK
								     : NIC_STATUS_BAD_FIELD;
	}
	case NIC_CMD_CONNECT:
	case NIC_CMD_ACCEPT:
	case NIC_CMD_REJECT:
	case NIC_CMD_DISCONNECT: {
		const struct nic_cmd_conn *c = &cmd->u.conn;
		bool connect = cmd->opcode == NIC_CMD_CONNECT;

		if (c->reserved || (!connect && (c->dst_addr || c->dst_port || c->src_port)))
			return NIC_STATUS_BAD_FIELD;
		if (connect && (c->dst_port == 0 || c->conn_id))
			return NIC_STATUS_BAD_FIELD;
		if (cmd->opcode == NIC_CMD_DISCONNECT && c->conn_id)
			return NIC_STATUS_BAD_FIELD;
		if (cmd->opcode == NIC_CMD_REJECT && c->qpn)
			return NIC_STATUS_BAD_FIELD;
		return NIC_STATUS_OK;
	}
	case NIC_CMD_SHM_MAP: {
		const struct nic_cmd_shm *m = &cmd->u.shm;
		const uint64_t page = env->page_size ? env->page_size : 4096;

		if (!range_ok(m->va, m->len) || m->va % page || m->len % page)
			return NIC_STATUS_BAD_RANGE;
		return NIC_STATUS_OK;
	}
	default: return NIC_STATUS_OK;
	}
}

/* True unless key names a live entry of another type (the TPT itself
 * refuses keys that are invalid, stale or foreign). */
static bool key_is(const struct tpt *t, uint32_t key, enum tpt_type type)
{
	struct tpt_entry_view v;

	return tpt_lookup(t, key, &v) < 0 || v.type == type;
}

/* Map a TPT error to the status of the command that caused it. */
static uint16_t tpt_status(uint16_t opcode, int err)
{
	switch (err) {
	case 0: return NIC_STATUS_OK;
	case -ENOSPC: return NIC_STATUS_TPT_FULL;
	case -ENOENT: return NIC_STATUS_BAD_KEY;
	case -EBUSY: return NIC_STATUS_BUSY;
	case -EACCES: return NIC_STATUS_BAD_ACCESS;
	case -EINVAL:
		/* A registration or a bind names a range the TPT refuses (kinds
		 * of bind keys are checked before); other commands name a key of
		 * the wrong kind (a window for DEREG_MR, a region for a window
		 * command). */
		return opcode == NIC_CMD_BIND_MW || opcode == NIC_CMD_REG_MR ? NIC_STATUS_BAD_RANGE
									     : NIC_STATUS_BAD_KEY;
	default: return NIC_STATUS_BAD_STATE;
	}
}

static void count_status(struct nic_counters *s, uint16_t status)
{
	switch (status) {
	case NIC_STATUS_OK: return;
	case NIC_STATUS_BAD_OPCODE: s->err_bad_opcode++; break;
	case NIC_STATUS_BAD_FIELD: s->err_bad_field++; break;
	case NIC_STATUS_BAD_ACCESS: s->err_bad_access++; break;
	case NIC_STATUS_BAD_RANGE: s->err_bad_range++; break;
	case NIC_STATUS_TOO_LARGE: s->err_too_large++; break;
	case NIC_STATUS_TPT_FULL: s->err_tpt_full++; break;
	case NIC_STATUS_BAD_KEY: s->err_bad_key++; break;
	case NIC_STATUS_BUSY: s->err_busy++; break;
	case NIC_STATUS_NOT_SUPPORTED: s->err_not_supported++; break;
	case NIC_STATUS_BAD_QP: s->err_bad_qp++; break;
	case NIC_STATUS_NO_RESOURCES: s->err_no_resources++; break;
	case NIC_STATUS_ADDR_IN_USE:
	case NIC_STATUS_BAD_CONN: s->err_conn++; break;
	/* Counted as a DMA fault by the check that refused it. */
	case NIC_STATUS_NO_DMA: break;
	default: s->err_bad_state++; break;
	}
	s->cmds_failed++;
}

static void count_opcode(struct nic_counters *s, uint16_t opcode)
{
	switch (opcode) {
	case NIC_CMD_NOP: s->cmd_nop++; break;
	case NIC_CMD_QUERY_DEVICE: s->cmd_query_device++; break;
	case NIC_CMD_REG_MR: s->cmd_reg_mr++; break;
	case NIC_CMD_DEREG_MR: s->cmd_dereg_mr++; break;
	case NIC_CMD_ALLOC_MW: s->cmd_alloc_mw++; break;
	case NIC_CMD_BIND_MW: s->cmd_bind_mw++; break;
	case NIC_CMD_INVALIDATE_MW: s->cmd_invalidate_mw++; break;
	case NIC_CMD_DEALLOC_MW: s->cmd_dealloc_mw++; break;
	case NIC_CMD_CREATE_QP: s->cmd_create_qp++; break;
	case NIC_CMD_DESTROY_QP: s->cmd_destroy_qp++; break;
	case NIC_CMD_LISTEN:
	case NIC_CMD_UNLISTEN:
	case NIC_CMD_CONNECT:
	case NIC_CMD_ACCEPT:
	case NIC_CMD_REJECT:
	case NIC_CMD_DISCONNECT: s->cmd_conn++; break;
	case NIC_CMD_SHM_MAP: s->cmd_shm_map++; break;
	case NIC_CMD_SHM_UNMAP: s->cmd_shm_unmap++; break;
	default: break;
	}
}

bool cmd_execute(const struct cmd_env *env, const struct tpt_owner *owner, void *ctx,
		 const struct nic_cmd *cmd, struct nic_cpl *cpl)
{
	bool deferred = false;
	uint16_t status = cmd_validate(env, cmd);
	uint32_t key = 0;
	int err = 0;

	memset(cpl, 0, sizeof(*cpl));
	cpl->tag = cmd->tag;
	cpl->opcode = cmd->opcode;
	env->stats->cmds++;
	count_opcode(env->stats, cmd->opcode);
	if (status != NIC_STATUS_OK)
		goto out;

	switch (cmd->opcode) {
	case NIC_CMD_NOP: break;
	case NIC_CMD_QUERY_DEVICE: {
		struct nic_cpl_query_device *q = &cpl->u.query_device;

		q->abi_version = NIC_ABI_VERSION;
		q->caps = env->caps;
		q->tpt_capacity = tpt_capacity(env->tpt);
		q->tpt_in_use = tpt_in_use(env->tpt);
		q->max_reg_len = env->max_reg_len;
		q->page_size = env->page_size;
		q->ctx_id = owner->ctx_id;
		q->nic_addr = env->nic_addr;
		break;
	}
	case NIC_CMD_REG_MR:
		if (env->reg_check)
			status = env->reg_check(env->conn_arg, ctx, cmd->u.reg_mr.va);
		if (status == NIC_STATUS_OK)
			err = tpt_reg_mr(env->tpt, owner, cmd->u.reg_mr.va, cmd->u.reg_mr.len,
					 cmd->u.reg_mr.access, &key);
		break;
	case NIC_CMD_DEREG_MR: err = tpt_dereg_mr(env->tpt, owner->ctx_id, cmd->u.key.key); break;
	case NIC_CMD_ALLOC_MW: err = tpt_alloc_mw(env->tpt, owner, &key); break;
	case NIC_CMD_BIND_MW: {
		const struct nic_cmd_bind_mw *b = &cmd->u.bind_mw;

		/* A key of the wrong kind is a bad key, as for the other
		 * commands; tpt_bind_mw's -EINVAL then means a bad range. */
		if (!key_is(env->tpt, b->mw_key, TPT_MW) || !key_is(env->tpt, b->mr_key, TPT_MR)) {
			err = -ENOENT;
			break;
		}
		err = tpt_bind_mw(env->tpt, owner, b->mw_key, b->mr_key, b->va, b->len, b->access,
				  b->qpn, &key);
		break;
	}
	case NIC_CMD_INVALIDATE_MW:
		err = tpt_invalidate_mw(env->tpt, owner->ctx_id, cmd->u.key.key);
		break;
	case NIC_CMD_DEALLOC_MW:
		err = tpt_dealloc_mw(env->tpt, owner->ctx_id, cmd->u.key.key);
		break;
	case NIC_CMD_CREATE_QP:
	case NIC_CMD_DESTROY_QP:
	case NIC_CMD_LISTEN:
	case NIC_CMD_UNLISTEN:
	case NIC_CMD_CONNECT:
	case NIC_CMD_ACCEPT:
	case NIC_CMD_REJECT:
	case NIC_CMD_DISCONNECT: status = env->conn_exec(env->conn_arg, ctx, cmd, &key); break;
	case NIC_CMD_SHM_MAP:
	case NIC_CMD_SHM_UNMAP:
		status = env->shm_exec ? env->shm_exec(env->conn_arg, ctx, cmd)
				       : NIC_STATUS_NOT_SUPPORTED;
		break;
	default: status = NIC_STATUS_BAD_OPCODE; break;
	}
	/* Unpublished, DMA still in flight: the completion waits for the
	 * drain (invalidation is acknowledged only after it). */
	if (err == -EINPROGRESS) {
		err = 0;
		deferred = true;
	}
	if (status == NIC_STATUS_OK)
		status = tpt_status(cmd->opcode, err);
	if (status == NIC_STATUS_OK || key)
		cpl->key = key;
out:
	cpl->status = status;
	count_status(env->stats, status);
	return deferred;
}

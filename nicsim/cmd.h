/*
 * Command processor: decodes one command copied out of a context's command
 * ring, checks every field, executes it against the TPT and fills the
 * completion.  It never trusts the command: an unknown opcode, a reserved
 * field that is not zero, bad access bits, an empty or wrapping range, a
 * size over the limit, or a key that is not the context's each complete with
 * their own status and counter, and change nothing.
 */
#ifndef NICSIM_CMD_H
#define NICSIM_CMD_H

#include <stdbool.h>
#include <stdint.h>

#include "counters.h"
#include "nicsim_abi.h"
#include "tpt.h"

/*
 * What a command may touch: the NIC's TPT, counters and properties, and,
 * through conn_exec, its queue pairs and connections: conn_exec(conn_arg,
 * ctx, cmd, &key) executes a QP or connection command whose fields
 * cmd_validate() accepted and returns its status (and the QP number of
 * CREATE_QP in key).  shm_exec(conn_arg, ctx, cmd) does the same for
 * SHM_MAP and SHM_UNMAP (NULL: they complete NIC_STATUS_NOT_SUPPORTED).
 */
struct cmd_env {
	struct tpt *tpt;
	uint16_t (*conn_exec)(void *conn_arg, void *ctx, const struct nic_cmd *cmd, uint32_t *key);
	uint16_t (*shm_exec)(void *conn_arg, void *ctx, const struct nic_cmd *cmd);
	/* REG_MR, before the TPT: may the NIC reach the host's memory at va?
	 * NIC_STATUS_OK, or the status to refuse with.  NULL: not checked. */
	uint16_t (*reg_check)(void *conn_arg, void *ctx, uint64_t va);
	void *conn_arg;
	struct nic_counters *stats;
	uint32_t caps;        /* NIC_CAP_* */
	uint64_t max_reg_len; /* bytes */
	uint32_t page_size;
	uint32_t nic_addr; /* network byte order */
};

/*
 * Check the fields of a command without executing it: returns NIC_STATUS_OK
 * or the status the command must complete with.
 */
uint16_t cmd_validate(const struct cmd_env *env, const struct nic_cmd *cmd);

/*
 * Execute one command for the context `owner` (ctx: the NIC's object for it,
 * passed on to conn_exec) and fill *cpl (tag, opcode, status, key, body).
 * cmd must be a private copy.  Counts the command and any failure in
 * env->stats.  Returns true when the completion must wait: a DEREG_MR or
 * DEALLOC_MW whose entry has DMA in flight is unpublished now and
 * acknowledged when tpt_put() reports its key drained.
 */
bool cmd_execute(const struct cmd_env *env, const struct tpt_owner *owner, void *ctx,
		 const struct nic_cmd *cmd, struct nic_cpl *cpl);

#endif /* NICSIM_CMD_H */

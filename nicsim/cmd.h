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

#include <stdint.h>

#include "nicsim_abi.h"
#include "nicsim_mgmt.h"
#include "tpt.h"

/*
 * What a command may touch: the NIC's TPT, counters and properties, and its
 * queue pairs through qp_create/qp_destroy (called with qp_arg and the
 * context that sent the command; 0 or -EBUSY (slot in use), -EINVAL (no such
 * slot), -ENOENT (no such QP of this context), -ENOSPC (no QP number left)).
 */
struct cmd_env {
	struct tpt *tpt;
	int (*qp_create)(void *qp_arg, void *ctx, uint32_t slot, uint32_t *qpn);
	int (*qp_destroy)(void *qp_arg, void *ctx, uint32_t qpn);
	void *qp_arg;
	struct nic_stats *stats;
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
 * passed on to the QP calls) and fill *cpl (tag, opcode, status, key, body).
 * cmd must be a private copy.  Counts the command and any failure in
 * env->stats.
 */
void cmd_execute(const struct cmd_env *env, const struct tpt_owner *owner, void *ctx,
		 const struct nic_cmd *cmd, struct nic_cpl *cpl);

#endif /* NICSIM_CMD_H */

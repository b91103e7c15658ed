/*
 * Host driver for a nicsim NIC: attach to a NIC, post commands on the
 * context's command ring and wait for their completions.
 *
 * This is the layer the provider (ws2san.h) is built on; tests and benchmarks
 * use it directly to talk to a NIC without the provider's own checks.
 *
 * One struct nic_host is one attachment: one context, one protection domain.
 * nic_host_cmd() may be called from several threads; it serialises posting
 * and waiting with a mutex.  Waiting spins briefly (yielding the CPU), then
 * sleeps on the interrupt eventfd; every wait is bounded.
 *
 * Errors: 0 or a negative errno.  Command failures are reported as the NIC's
 * status in the completion; nic_status_errno() (nicsim_abi_util.h) maps them.
 */
#ifndef NICSIM_HOST_H
#define NICSIM_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "nicsim_abi.h"
#include "nicsim_abi_util.h"

#ifdef __cplusplus
extern "C" {
#endif

struct nic_host;

/* Default bound on a command's round trip before the NIC is declared gone. */
#define NIC_HOST_CMD_TIMEOUT_MS 5000

/*
 * Attach to the NIC listening on the UNIX socket at path.  Calls
 * prctl(PR_SET_PTRACER, nic_pid) so that the NIC may reach this process's
 * memory.  Returns 0, or -ENOENT/-ECONNREFUSED (no NIC there), -EPROTO (the
 * NIC answered something malformed or a different ABI), -ENOMEM, or the
 * NIC's refusal mapped with nic_status_errno().
 */
int nic_host_attach(const char *path, struct nic_host **out);

/* Detach: unmaps the segment and closes the socket; the NIC then tears the
 * context down.  Accepts NULL. */
void nic_host_detach(struct nic_host *h);

/* What the NIC said in its hello reply. */
const struct nic_hello_reply *nic_host_info(const struct nic_host *h);

/*
 * Post one command and wait for its completion (cmd->tag is overwritten).
 * Returns 0 with *cpl filled (check cpl->status), -ETIMEDOUT if no
 * completion came within timeout_ms, -ENETDOWN if the NIC went away or put
 * the context in error.
 */
int nic_host_cmd(struct nic_host *h, struct nic_cmd *cmd, struct nic_cpl *cpl, int timeout_ms);

/*
 * Raw access for tests that play a hostile host: the mapped context segment,
 * its size, and the doorbell eventfd.
 */
void *nic_host_segment(struct nic_host *h, size_t *size);
int nic_host_doorbell_fd(const struct nic_host *h);

#ifdef __cplusplus
}
#endif

#endif /* NICSIM_HOST_H */

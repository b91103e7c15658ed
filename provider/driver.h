/*
 * Provider-private additions to the host driver (nicsim_host.h): posting a
 * command and waiting for it as two steps, so that the provider can pin
 * pages while the NIC executes a registration.
 *
 * Contract: at most one command posted with nic_host_post() may be waiting
 * for its nic_host_wait() on an attachment at a time, and nobody else may
 * use the attachment in between (nic_host_wait() fails with -EPROTO if
 * another command's completion comes first).  The provider guarantees this
 * by holding its own lock across both steps.
 */
#ifndef PROV_DRIVER_H
#define PROV_DRIVER_H

#include <stdint.h>

#include "nicsim_host.h"

/* Post cmd (its tag is set); 0, -ENETDOWN (context in error), -EBUSY (ring full). */
int nic_host_post(struct nic_host *h, struct nic_cmd *cmd);

/*
 * Wait for the completion of the command posted with tag; as nic_host_cmd():
 * 0 with *cpl filled, -ETIMEDOUT, -ENETDOWN, -EPROTO.  After a failure the
 * command's late completion, if any, is dropped.
 */
int nic_host_wait(struct nic_host *h, uint64_t tag, struct nic_cpl *cpl, int timeout_ms);

#endif /* PROV_DRIVER_H */

/*
 * Provider-private additions to the host driver (nicsim_host.h): posting a
 * command and collecting its completion as two steps, so that the provider
 * can pin pages while the NIC executes a registration, and can wait for the
 * completion with its own progress engine (progress.c), which also drains
 * the event queue and the completion queues while it waits.
 *
 * Contract: at most one command posted with nic_host_post() may be waiting
 * for its completion on an attachment at a time, and nobody else may use the
 * command ring in between (nic_host_cmd_poll() fails with -EPROTO if another
 * command's completion comes first).  The provider guarantees this by
 * issuing commands only under its own lock.
 */
#ifndef PROV_DRIVER_H
#define PROV_DRIVER_H

#include <stdint.h>

#include "nicsim_host.h"

/* Post cmd (its tag is set); 0, -ENETDOWN (context in error), -EBUSY (ring full). */
int nic_host_post(struct nic_host *h, struct nic_cmd *cmd);

/*
 * Send the memfd fd on the attach socket and post cmd, its SHM_MAP (opcode,
 * u.shm.va and u.shm.len set; its tag is set), together: the NIC gives each
 * SHM_MAP the oldest descriptor sent, so nothing may come between them.  0,
 * -ENETDOWN, -EBUSY (ring full: nothing sent), or the error of sending the
 * descriptor (then nothing is posted).  The completion is taken with
 * nic_host_cmd_poll(), as for nic_host_post().
 */
int nic_host_post_shm_map(struct nic_host *h, int fd, struct nic_cmd *cmd);

/*
 * Without blocking, take the completion of the command posted with tag:
 * 0 with *cpl filled, -EAGAIN when it has not come yet, -EPROTO when another
 * command's completion came instead or the NIC's index is implausible.
 * Late completions of abandoned commands are dropped on the way.
 */
int nic_host_cmd_poll(struct nic_host *h, uint64_t tag, struct nic_cpl *cpl);

/* Give up on the command posted with tag: its completion is dropped if it comes. */
void nic_host_cmd_abandon(struct nic_host *h, uint64_t tag);

#endif /* PROV_DRIVER_H */

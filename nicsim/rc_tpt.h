/*
 * The TPT side of the RC engine's operations: turning local SGEs or a
 * remote key into the host memory a transfer may touch (struct rc_mem),
 * with every key checked by tpt_check() and held as an in-flight grant until
 * released.  The NIC's QPs and the engine's tests use the same code.
 */
#ifndef NICSIM_RC_TPT_H
#define NICSIM_RC_TPT_H

#include <stdbool.h>
#include <stdint.h>

#include "rc.h"
#include "tpt.h"

/*
 * Fill *mem from nsge local SGEs of owner (write: the NIC writes them, so
 * each needs LOCAL_WRITE).  0, or -EACCES with *why set and nothing held.
 */
int rc_tpt_local(struct tpt *t, const struct tpt_owner *owner, const struct nic_sge *sge,
		 uint32_t nsge, bool write, struct rc_mem *mem, enum nic_tpt_reason *why);

/*
 * Fill *mem for a remote access of [va, va + len) with rkey, arriving on
 * connection qpn of owner's context.  0, or -EACCES with *why set.
 */
int rc_tpt_remote(struct tpt *t, const struct tpt_owner *owner, uint32_t qpn, uint32_t rkey,
		  uint64_t va, uint64_t len, uint32_t access, struct rc_mem *mem,
		  enum nic_tpt_reason *why);

/*
 * End the grants of mem.  For each one that was the last on an entry
 * being invalidated, drained(arg, key) is called (may be NULL).
 */
void rc_tpt_release(struct tpt *t, struct rc_mem *mem, void (*drained)(void *arg, uint32_t key),
		    void *arg);

#endif /* NICSIM_RC_TPT_H */

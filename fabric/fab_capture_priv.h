/*
 * Inside the fabric library: the producer side of the capture tap, which
 * fab_port.c calls for every frame while a capture is attached
 * (fab_capture.h).
 */
#ifndef FAB_CAPTURE_PRIV_H
#define FAB_CAPTURE_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "fab_priv.h"

/* The header's tap_ctl: its low half is 0 when no capture is attached.
 * Acquire: what the capture set up before turning the tap on (the rings'
 * consumer positions) is seen by the port that sees it on. */
static inline uint64_t fab_tap_ctl(const struct fab *fab)
{
	return __atomic_load_n(&fab->hdr->tap_ctl, __ATOMIC_ACQUIRE);
}

/*
 * Copy frame f into the ring of port slot (the caller owns the port, and w
 * is its own state of the ring: struct fab_tap_wait), with ctl the tap_ctl
 * it read (low half not 0); rx for a frame the receiver drops on delivery.
 * Frames the capture's filter turns away are counted and not copied.  A
 * full ring makes the port wait for room while the capture makes progress
 * on this ring (not in lossy mode): its consumer position moved within the
 * last FAB_TAP_STALL_NS; a frame that still finds no room is counted as not
 * captured.  Turns the tap off if the capture is gone (checked before
 * waiting, and at most every FAB_CAP_CHECK_NS while leaving frames out).
 */
void fab_tap_ring_put(struct fab *fab, uint32_t slot, struct fab_tap_wait *w, uint64_t ctl,
		      const struct fab_tap_frame *f, bool rx);

#endif /* FAB_CAPTURE_PRIV_H */

/*
 * Packet capture from the fabric: the tap rings in the segment, which
 * `nicsim capture` drains (its writers are the tool's: nicsim/tool).
 *
 * The tap.  While a capture is attached, every port copies each frame it
 * sends (dropped, duplicated, delayed and corrupted ones included, with
 * their fault marks) and each frame it drops on delivery into its own ring
 * in the segment's capture section (layout: fab_seg.h), from inside
 * fab_send and fab_recv: the NIC does nothing for it.  The capture drains
 * the rings (fab_cap_read).  A record keeps the frame's first copy_bytes
 * bytes (fab_cap_attach), its length, addresses, marks and times.
 *
 * Lossless, within bounds.  A ring has one producer, the port's owner, and
 * one consumer, the capture.  A port that finds no room in its ring waits
 * for the capture to make some: it yields a few times, then sleeps on a
 * futex (the ring's wake word, which the capture bumps when it frees room
 * while the port says it waits: Dekker, as the fabric's bells), each sleep
 * at most FAB_CAP_WAIT_NS.  So the fabric runs at the capture's pace and
 * the capture misses nothing.  It waits only while the capture makes
 * progress on its ring: the capture gives each ring back what it read at
 * the end of each pass (and, during a long one, what it has handed out,
 * every 256 records and every FAB_CAP_WAIT_NS), and a port whose ring's
 * consumer position has not moved for FAB_TAP_STALL_NS (the capture
 * stopped, its output blocks, or whatever holds its lock does not read)
 * leaves the frame out and counts it (not_captured, and stalled), until the
 * capture reads again.  The capture's stamp of its passes (tap_beat_ns)
 * only cuts a wait short when it is that old.  The bound is the consumer's
 * progress, not a port's patience per frame: a stalled capture costs the
 * fabric one FAB_TAP_STALL_NS, not one per frame.  A port never waits for
 * another port.  In lossy mode (FAB_TAP_F_LOSSY, for measuring speed with a
 * capture running) a port never waits: a full ring counts the frame as not
 * captured (like pcap's ps_drop).  Without a capture a port pays one load
 * of the header's tap_ctl per frame; with one, a 64-byte record header and
 * a copy of up to copy_bytes bytes.
 *
 * Filters before drops.  The capture's filter (host, destination QP,
 * opcode) is in the header, written before the tap is turned on; a port
 * applies it before it looks for room, so frames the filter turns away
 * take no ring space, never wait and are never counted as not captured
 * (they are counted as filtered).  A port copies the filter out of the
 * segment once per frame and only compares values with it: a garbled
 * filter can make a port keep or skip the wrong frames, never crash it.
 *
 * One capture at a time.  The capture holds an OFD write lock on byte
 * FAB_TAP_LOCK_OFF of fabric.shm (through an open file description of its
 * own); attaching while a live process holds it is -EBUSY.  A capture that
 * dies leaves tap_ctl on, but the kernel drops its lock: a port that is
 * about to wait for room looks whether anyone still holds it (and again
 * after every sleep), and a port leaving frames out looks every 1024 frames
 * and at most every FAB_CAP_CHECK_NS; if no one does, it turns tap_ctl off,
 * so the ports stop copying and no one waits for a dead capture.
 * The next capture takes over in any case: a new generation, and every
 * ring's consumer position moved up to its producer's.
 *
 * Order.  fab_cap_read gathers the records of every ring once, then hands
 * them out in timestamp order (ties in ring order).  A record that a later
 * pass brings can be older than the last one handed out, when its port was
 * descheduled between taking its timestamp and writing it.
 *
 * Hostile rings.  Anything in the segment can be scribbled on.  The capture
 * copies each record's header out before it looks at it; a ring whose
 * positions are impossible, or a record whose length, flags or frame length
 * do not add up, is counted (bad) and the ring skipped up to its producer;
 * nothing is read outside the ring.  The frame bytes are handed out where
 * they lie (the producer does not reuse them before the pass ends): a
 * scribbler can change what is written out, never where it is read from.
 * A producer reads the consumer's position only to find room, and takes an
 * impossible one for a full ring.
 *
 * The capture section is reserved on disk (fallocate) by the capture when
 * it attaches, not when the fabric is created: -ENOSPC then, never a SIGBUS
 * in a NIC.
 *
 * Threads: a struct fab_cap is used by one thread at a time.  Errors: 0 or
 * a negative errno.
 */
#ifndef FAB_CAPTURE_H
#define FAB_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fab.h"

/* A port with a full ring checks that the capture lives this often. */
#define FAB_CAP_CHECK_NS 100000000ull
/* A port waiting for room sleeps at most this long at a time. */
#define FAB_CAP_WAIT_NS 10000000ull
/* Ports always copy at least the headers up to the BTH, so that a capture
 * can filter on addresses, QP and opcode whatever its snap length. */
#define FAB_CAP_COPY_MIN 54u

struct fab_cap; /* an attached capture */

/*
 * Attach to fab's tap: reserve the capture section, take the lock, and turn
 * the tap on with ports copying copy_bytes of each frame (clamped to
 * [FAB_CAP_COPY_MIN, FAB_SLOT_BYTES]).  Returns 0, -EBUSY if another live
 * capture is attached (fab_cap_attached gives its pid), -ENOSPC if the
 * section cannot be reserved, -ENOMEM, or a system error.
 */
int fab_cap_attach(struct fab *fab, uint32_t copy_bytes, struct fab_cap **cap);

/* Which frames a capture wants; a field counts only when its _set is. */
struct fab_cap_filter {
	bool host_set, qpn_set, opcode_set;
	uint32_t host;  /* frames from or to this address (network order) */
	uint32_t qpn;   /* frames to this destination QP (24 bits) */
	uint8_t opcode; /* frames with this BTH opcode */
};

struct fab_cap_config {
	uint32_t copy_bytes; /* as fab_cap_attach's */
	bool lossy;          /* ports never wait: a full ring leaves frames out */
	struct fab_cap_filter filter;
};

/* fab_cap_attach with a mode and a filter the ports apply. */
int fab_cap_attach_cfg(struct fab *fab, const struct fab_cap_config *cfg, struct fab_cap **cap);

/*
 * Whether filter f wants the frame of len bytes at data (at least its
 * first FAB_CAP_COPY_MIN bytes readable when len says so) from src to dst.
 * A frame too short to have a BTH matches no QP or opcode filter.
 */
bool fab_cap_filter_match(const struct fab_cap_filter *f, const uint8_t *data, uint32_t len,
			  uint32_t src, uint32_t dst);

/*
 * Turn the tap off: ports stop copying.  What they copied already can
 * still be read.  Idempotent.
 */
void fab_cap_stop(struct fab_cap *cap);

/* Stop, release the lock and free.  Unread records are lost.  Accepts NULL. */
void fab_cap_detach(struct fab_cap *cap);

/* One captured frame, valid during the callback only. */
struct fab_cap_rec {
	const uint8_t *data; /* caplen bytes */
	uint32_t caplen;
	uint32_t len;       /* the frame's length */
	uint32_t src, dst;  /* addresses, network byte order */
	uint32_t marks;     /* FAB_MARK_* */
	bool rx_drop;       /* recorded by the receiver: dropped on delivery */
	uint32_t port_slot; /* the ring it came from */
	uint64_t ts_ns;     /* CLOCK_MONOTONIC: when sent, or dropped on delivery */
	uint64_t due_ns;    /* when it was (or would have been) delivered; 0: dropped at send */
	uint64_t link_seq;
	uint64_t lost_before; /* frames of the same port left out just before this one */
};

/* Return 0 to go on, anything else to end the pass. */
typedef int (*fab_cap_fn)(void *arg, const struct fab_cap_rec *rec);

/*
 * One pass: gather the records of every ring (32,768 at most), call fn for
 * each in timestamp order, then give the rings' space back.  *n (if not
 * NULL) gets the number of records handed out.  Returns 0, or fn's
 * non-zero return (the records after it in this pass are dropped).
 */
int fab_cap_read(struct fab_cap *cap, fab_cap_fn fn, void *arg, size_t *n);

struct fab_cap_stats {
	uint64_t read;         /* records handed out */
	uint64_t not_captured; /* frames the ports left out since the attach: ring full */
	uint64_t stalled;      /* of not_captured: the capture had stalled (lossless mode) */
	uint64_t filtered;     /* frames the ports' copy of the filter turned away */
	uint64_t bad;          /* rings or records refused (hostile or broken writers) */
	/* What other processes wrote in the capture's own fields, found by its
	 * passes (each is written back or resynced): */
	uint64_t mode_written;   /* its mode (FAB_TAP_F_LOSSY): the one that leaves frames out */
	uint64_t filter_written; /* its filter */
	uint64_t pos_written;    /* a ring's consumer position */
};

void fab_cap_get_stats(const struct fab_cap *cap, struct fab_cap_stats *st);

/*
 * Whether a live capture is attached to fab (the tap is on and a process
 * holds the capture lock), and its pid.  Any process may ask.
 */
bool fab_cap_attached(struct fab *fab, uint32_t *pid);

/* What a port has counted for captures since the fabric was created. */
struct fab_cap_port_counters {
	uint64_t records;      /* frames written to its capture ring */
	uint64_t not_captured; /* frames left out: the ring was full */
	uint64_t stalled;      /* of not_captured: the capture had stalled (lossless mode) */
	uint64_t filtered;     /* frames the capture's filter turned away */
};

/* The capture of a fabric as the segment says, for `nicsim link show`. */
struct fab_cap_status {
	bool ever;     /* a capture attached since the fabric was created */
	bool attached; /* one is attached now and alive (fab_cap_attached) */
	uint32_t pid;  /* the capture that attached last */
	bool lossy;
	struct fab_cap_filter filter;
	uint64_t last_pass_ns; /* how long ago it made its last pass over the rings */
};

/* Any process may ask; the segment's values are reported as read. */
void fab_cap_status(struct fab *fab, struct fab_cap_status *st);

/*
 * The capture counters of the port bound to addr (all 0 when no capture
 * ever attached: the capture section is then not read, as it may not be
 * reserved).  0 or -ENOENT if addr is not bound.
 */
int fab_cap_port_counters(struct fab *fab, uint32_t addr, struct fab_cap_port_counters *c);

/*
 * The fault marks of a record in words, for a pcapng comment or a line of
 * text: "nicsim: dropped (loss rule)", "nicsim: duplicate (dup rule),
 * delayed (delay rule)"; "" when there are none.  Returns buf.
 */
const char *fab_cap_describe(uint32_t marks, bool rx_drop, char *buf, size_t size);

#endif /* FAB_CAPTURE_H */

/*
 * The fabric segment, version 3 (FAB_SEG_VERSION): the layout of
 * D/fabric.shm, which every process of a fabric maps (each nicsimd, the
 * nicsim tool, a capture, tests).  fab.h is the API over it and describes
 * the design; this header is the layout alone, for the code that must read
 * the segment directly (a capture, hostile tests).
 *
 * Layout (every offset is recorded in the header and is a pure function of
 * max_ports, nframes and ring_depth, so fab_open() recomputes and compares
 * them all):
 *
 *   0             struct fab_seg_hdr                    one page
 *   ports_off     struct fab_seg_port[max_ports]        page aligned
 *   links_off     struct fab_seg_link[max_ports^2]      index src * max_ports + dst
 *   rings_off     uint32_t[max_ports^2][ring_depth]     frame indices, same index
 *   meta_off      struct fab_seg_frame[nframes]         one cache line per frame
 *   frames_off    uint8_t[nframes][FAB_SLOT_BYTES]      the frames' bytes
 *   tap_off       struct fab_tap_ring[max_ports]        page aligned; one per port slot
 *   tap_off + fab_tap_data_off(max_ports)
 *                 uint8_t[max_ports][tap_ring_bytes]    the capture rings' records
 *
 * The capture section (tap_off to the end) is not reserved on disk when the
 * segment is created: a capture reserves it (fallocate) when it attaches,
 * so that fabrics nobody captures cost no memory for it.
 *
 * Every field is fixed width; the struct sizes and the offsets that matter
 * are checked below.  Fields named "reserved" are zero.  Words that more than
 * one process writes, or that one process writes while others read, are
 * accessed with the GCC/Clang __atomic builtins (as nicsim_ring.h does).
 *
 * Everything in the segment is hostile input to every reader, and may
 * change between two reads: every index, length and time is read once into
 * a local, the local is validated and only the local is used; a bad value
 * is counted (struct fab_port_counters) and dropped.
 */
#ifndef FAB_SEG_H
#define FAB_SEG_H

#include <stddef.h>
#include <stdint.h>

#define FAB_SEG_MAGIC 0x4241464eu /* "NFAB" in file order */
#define FAB_SEG_VERSION 3u
#define FAB_SEG_FILE "fabric.shm"
#define FAB_BELL_PREFIX "fab-" /* D/fab-<addr>.bell: a port's wake-up FIFO */
#define FAB_BELL_SUFFIX ".bell"

#define FAB_CACHELINE 64u
#define FAB_PAGE 4096u
/* Bytes of one frame slot: the largest RoCEv2 frame (4096 bytes of payload
 * plus every header, pad and ICRC) with room to spare, a multiple of 64. */
#define FAB_SLOT_BYTES 4352u
#define FAB_MAX_PORTS 256u
#define FAB_MAX_FRAMES (1u << 20)
#define FAB_MAX_RING_DEPTH (1u << 16)

/* "Any value" for the opcode and QP filters of the drop-nth rule. */
#define FAB_ANY 0xffffffffu

/*
 * Who holds a frame: one 64-bit word per frame.  0 is free.  Otherwise the
 * state (HELD: the port owns it; INFLIGHT: it sits in a ring towards the
 * port), the port's slot and the generation the port had when the frame was
 * given to it.  A port's generation changes every time the port is opened,
 * so the frames a dead owner held are told apart from the new owner's and
 * reclaimed (fab.h, "Dead processes").
 */
#define FAB_HOLD_HELD 1u
#define FAB_HOLD_INFLIGHT 2u
#define FAB_HOLDER(state, slot, gen) \
	((uint64_t)(gen) << 32 | (uint64_t)((slot)&0xffffu) << 16 | (uint64_t)(state))
#define FAB_HOLDER_STATE(h) ((uint32_t)((h)&0xffffu))
#define FAB_HOLDER_SLOT(h) ((uint32_t)((h) >> 16 & 0xffffu))
#define FAB_HOLDER_GEN(h) ((uint32_t)((h) >> 32))

/*
 * Fault marks, per frame.  The first four travel with a delivered frame
 * (struct fab_rx.marks, struct fab_seg_frame.marks); the DROP marks only
 * appear in tap events (fab.h), since a dropped frame is delivered to no one.
 */
#define FAB_MARK_DUPLICATE (1u << 0)   /* the extra copy made by the dup rule */
#define FAB_MARK_CORRUPTED (1u << 1)   /* one bit flipped: the ICRC no longer matches */
#define FAB_MARK_DELAYED (1u << 2)     /* extra delay from the delay rule */
#define FAB_MARK_REORDERED (1u << 3)   /* held back by the reorder rule */
#define FAB_MARK_DROP_LOSS (1u << 8)   /* the loss rule */
#define FAB_MARK_DROP_NTH (1u << 9)    /* the drop-nth rule */
#define FAB_MARK_DROP_DOWN (1u << 10)  /* the link was down (at send or in flight) */
#define FAB_MARK_DROP_QUEUE (1u << 11) /* the rate-limited link queued too long */
#define FAB_MARK_DROP_FULL (1u << 12)  /* refused: the destination's ring was full */
#define FAB_MARKS_DELIVERED 0x000fu
#define FAB_MARKS_DROP 0x1f00u

/* struct fab_seg_port.state */
#define FAB_PORT_CLOSED 0u
#define FAB_PORT_OPEN 1u

/* struct fab_link_config.flags */
#define FAB_LINK_DOWN (1u << 0)
#define FAB_LINK_SEEDED (1u << 1) /* seed was set; else derived from the fabric's */
#define FAB_LINK_FLAGS_ALL 0x3u

/* ---- Header ------------------------------------------------------------- */

struct fab_seg_hdr {
	uint32_t magic;   /* FAB_SEG_MAGIC */
	uint16_t version; /* FAB_SEG_VERSION */
	uint16_t hdr_size;
	uint32_t port_size;  /* sizeof(struct fab_seg_port) */
	uint32_t link_size;  /* sizeof(struct fab_seg_link) */
	uint32_t meta_size;  /* sizeof(struct fab_seg_frame) */
	uint32_t slot_bytes; /* FAB_SLOT_BYTES */
	uint64_t seg_size;   /* the file's size */
	uint32_t max_ports;  /* 1 .. FAB_MAX_PORTS */
	uint32_t nframes;    /* 1 .. FAB_MAX_FRAMES */
	uint32_t ring_depth; /* power of two, 2 .. FAB_MAX_RING_DEPTH */
	uint32_t creator_pid;
	uint64_t ports_off;
	uint64_t links_off;
	uint64_t rings_off;
	uint64_t meta_off;
	uint64_t frames_off;
	uint64_t tap_off;    /* the capture section: rings, then their records */
	uint64_t tap_size;   /* tap_off + tap_size == seg_size */
	uint64_t seed;       /* the links' default PRNG seeds derive from it */
	uint64_t created_ns; /* CLOCK_REALTIME */
	/* The capture's switch (FAB_TAP_CTL): the attached capture's
	 * generation in the high half, the bytes of each frame the ports copy
	 * in the low half; a low half of 0 means no capture is attached.
	 * Written by the capture when it attaches and detaches, and cleared by
	 * a port that finds the capture dead (fab_capture.h). */
	uint64_t tap_ctl;
	uint32_t tap_ring_bytes; /* bytes of records per port: fab_tap_ring_bytes(max_ports) */
	uint32_t tap_pid;        /* pid of the capture that attached last (messages only) */
	/* The attached capture's requests to the ports, written by it before
	 * it turns tap_ctl on and read by a port after it saw tap_ctl on
	 * (fab_capture.h): FAB_TAP_F_* (0, as in a segment no capture ever
	 * touched: wait for room, no filter), and the filter's values. */
	uint32_t tap_flags;
	uint32_t tap_host;   /* FAB_TAP_F_HOST: only frames from or to it (network order) */
	uint32_t tap_qpn;    /* FAB_TAP_F_QPN: only frames to this destination QP */
	uint32_t tap_opcode; /* FAB_TAP_F_OPCODE: only this BTH opcode */
	/* CLOCK_MONOTONIC of the capture's last progress (the end of a pass
	 * over the rings, or more records handed out during a long one): a
	 * port waiting for room stops when it is FAB_TAP_STALL_NS old (it
	 * waits no longer than its own ring's position stands still anyway). */
	uint64_t tap_beat_ns;
	uint64_t tap_passes; /* passes the capture has made: its progress, counted */
	uint64_t reserved[11];
};

/* ---- Ports -------------------------------------------------------------- */

/* Counters of hostile or stale input a port's owner refused, and of frames
 * it reclaimed; written by the owner only. */
#define FAB_PORT_COUNTERS(X)                                                          \
	X(bad_ring, "source rings whose indices were impossible (reset)")             \
	X(bad_index, "ring entries naming a frame index out of range")                \
	X(bad_meta, "frames whose length or delivery time was invalid (dropped)")     \
	X(stale, "ring entries whose frame was not in flight to this port (skipped)") \
	X(reclaimed, "frames reclaimed from an earlier owner of this port")           \
	X(heap_full, "frames dropped because the receive heap was full")              \
	X(bad_config, "link configurations read with invalid values (ignored)")

struct fab_port_counters {
#define FAB_X_FIELD(name, desc) uint64_t name;
	FAB_PORT_COUNTERS(FAB_X_FIELD)
#undef FAB_X_FIELD
};

struct fab_seg_port {
	/* Line 0, identity: addr is claimed once (CAS from 0) and never
	 * changes while the segment exists; the owner writes the rest when it
	 * opens and closes the port. */
	uint32_t addr;  /* network byte order; 0: slot unused */
	uint32_t state; /* FAB_PORT_CLOSED or FAB_PORT_OPEN */
	uint32_t gen;   /* bumped by every open; never 0 once opened */
	uint32_t owner_pid;
	uint64_t opened_ns; /* CLOCK_REALTIME of the last open */
	uint8_t reserved0[40];
	/* Line 1: the owner's counters. */
	struct fab_port_counters counters;
	uint8_t reserved1[FAB_CACHELINE - sizeof(struct fab_port_counters)];
	/* Line 2: 1 while the owner sleeps (or is about to); a sender that
	 * finds it set clears it and rings the bell. */
	uint32_t sleeping;
	uint8_t reserved2[60];
	/* Line 3: one bit per source slot whose ring towards this port got
	 * frames since the owner last looked (a hint; see fab.h). */
	uint64_t pending[FAB_MAX_PORTS / 64];
	uint8_t reserved3[FAB_CACHELINE - FAB_MAX_PORTS / 8];
};

/* ---- Links -------------------------------------------------------------- */

/*
 * The configuration of one directed link.  Times in nanoseconds (at most
 * FAB_LINK_MAX_NS each), probabilities in parts per billion of frames.
 */
struct fab_link_config {
	uint64_t latency_ns;     /* propagation delay of every frame */
	uint64_t jitter_ns;      /* + uniform 0..jitter_ns (order kept) */
	uint64_t delay_ns;       /* delay rule: extra delay (+ jitter) ... */
	uint64_t reorder_gap_ns; /* reorder rule: hold-back; 0: FAB_REORDER_GAP_NS */
	uint64_t seed;           /* PRNG seed (effective value when read) */
	uint32_t rate_mbps;      /* Mbit/s; 0: unlimited */
	uint32_t loss_ppb;
	uint32_t dup_ppb;
	uint32_t reorder_ppb;
	uint32_t corrupt_ppb;
	uint32_t delay_ppb;  /* ... for this share of the frames */
	uint32_t nth;        /* drop the nth matching frame (once); 0: off */
	uint32_t nth_opcode; /* BTH opcode to match, or FAB_ANY */
	uint32_t nth_qpn;    /* BTH destination QP to match, or FAB_ANY */
	uint32_t flags;      /* FAB_LINK_DOWN, FAB_LINK_SEEDED */
};

#define FAB_LINK_CFG_WORDS (sizeof(struct fab_link_config) / 8)
#define FAB_LINK_MAX_NS 10000000000ull /* 10 s */
#define FAB_LINK_MAX_MBPS 1000000u     /* 1 Tbit/s */
#define FAB_PPB_ONE 1000000000u        /* 100 % */
#define FAB_REORDER_GAP_NS 50000ull    /* default hold-back of a reordered frame */
#define FAB_LINK_QUEUE_NS 50000000ull  /* 50 ms: longest queue a rate limit builds */

/* What the source port counts on a link (it alone writes them). */
#define FAB_LINK_TX_COUNTERS(X)                                                       \
	X(frames, "frames offered to the link")                                       \
	X(bytes, "bytes offered to the link")                                         \
	X(dropped_loss, "dropped by the loss rule")                                   \
	X(dropped_down, "dropped because the link was down when sent")                \
	X(dropped_nth, "dropped by the drop-nth rule")                                \
	X(dropped_queue, "dropped because the rate limit had queued too long")        \
	X(dest_ring_full, "refused: the destination's ring was full (not delivered)") \
	X(duplicated, "extra copies sent by the duplicate rule")                      \
	X(dup_nobuf, "copies the duplicate rule could not make (no free frame)")      \
	X(reordered, "frames held back by the reorder rule")                          \
	X(corrupted, "frames with a bit flipped by the corrupt rule")                 \
	X(delayed, "frames given extra delay by the delay rule")

/* What the destination port counts on a link (it alone writes them). */
#define FAB_LINK_RX_COUNTERS(X)                                  \
	X(delivered, "frames delivered to the destination")      \
	X(delivered_bytes, "bytes delivered to the destination") \
	X(dropped_down_rx, "dropped on arrival: the link went down in flight")

struct fab_link_tx_counters {
#define FAB_X_FIELD(name, desc) uint64_t name;
	FAB_LINK_TX_COUNTERS(FAB_X_FIELD)
#undef FAB_X_FIELD
};

struct fab_link_rx_counters {
#define FAB_X_FIELD(name, desc) uint64_t name;
	FAB_LINK_RX_COUNTERS(FAB_X_FIELD)
#undef FAB_X_FIELD
};

struct fab_seg_link {
	/* Lines 0-1, configuration: written by fab_link_set() under the
	 * seqlock cfg_seq, read by both ends.  cfg_seq's low 32 bits are the
	 * sequence, odd while a writer is at work; its high 32 bits are that
	 * writer's pid, so that a writer that died can be taken over. */
	uint64_t cfg_seq;
	uint32_t seed_gen;                /* bumped when the seed is set: the PRNG restarts */
	uint32_t nth_gen;                 /* bumped when drop-nth is set: counting restarts */
	uint64_t cfg[FAB_LINK_CFG_WORDS]; /* a struct fab_link_config */
	uint8_t reserved0[2 * FAB_CACHELINE - 16 - sizeof(struct fab_link_config)];
	/* Lines 2-4, written only by the source port's owner. */
	uint32_t prod;          /* ring producer index */
	uint32_t seed_gen_seen; /* seed_gen the PRNG counter belongs to */
	uint32_t nth_gen_seen;  /* nth_gen nth_matched belongs to */
	uint32_t nth_matched;   /* frames that matched the drop-nth filter */
	uint64_t rng_seq;       /* frames offered since the seed was set */
	uint64_t busy_until_ns; /* the last frame leaves the sender then */
	uint64_t last_due_ns;   /* in-order frames arrive no earlier than this */
	struct fab_link_tx_counters tx;
	uint8_t reserved1[3 * FAB_CACHELINE - 40 - sizeof(struct fab_link_tx_counters)];
	/* Line 5, written only by the destination port's owner. */
	uint32_t cons; /* ring consumer index */
	uint32_t reserved2;
	struct fab_link_rx_counters rx;
	uint8_t reserved3[FAB_CACHELINE - 8 - sizeof(struct fab_link_rx_counters)];
};

/* ---- Frames ------------------------------------------------------------- */

/* A frame's metadata.  The sender fills it before it publishes the frame;
 * the receiver copies it out and validates it once it holds the frame. */
struct fab_seg_frame {
	uint64_t holder;   /* FAB_HOLDER(), 0: free */
	uint64_t due_ns;   /* delivery time, CLOCK_MONOTONIC */
	uint64_t sent_ns;  /* when it was sent, CLOCK_MONOTONIC */
	uint64_t link_seq; /* its number on its link (the PRNG counter) */
	uint32_t len;      /* bytes, 1 .. FAB_SLOT_BYTES */
	uint32_t src_addr; /* network byte order */
	uint32_t dst_addr;
	uint32_t ring_pos; /* the producer index it was published at */
	uint16_t src_slot;
	uint16_t dst_slot;
	uint32_t marks; /* FAB_MARK_*, delivered marks only */
	/* Burst units (fab.h): 0 for a frame sent alone, with its ICRC.  For
	 * a frame of a unit, whose ICRC its sender left out, the number of
	 * frames from this one to the unit's end (the head holds the unit's
	 * length, 1 .. FAB_UNIT_MAX), and unit_next the index of the frame
	 * after it (when unit > 1).  Every frame of a unit carries the ring
	 * position of the one ring entry that names its head. */
	uint32_t unit;
	uint32_t unit_next;
};

/* ---- Capture ------------------------------------------------------------ */

/*
 * The capture section (fab_capture.h describes the design).  One ring of
 * records per port slot: its port's owner is the only producer, the
 * attached capture the only consumer, so a port that dies or stalls holds
 * up no other port; a port waits for the capture only while it makes
 * progress on its ring (FAB_TAP_STALL_NS) and never in --lossy mode.  Positions count bytes
 * since the segment was created; a record lies whole at position % bytes,
 * 8-byte aligned, and a record that would cross the end of the ring is
 * preceded by a pad record (flags FAB_TAP_REC_PAD, 8 bytes read) that
 * fills the rest.
 */
#define FAB_TAP_CTL(gen, snap) ((uint64_t)(gen) << 32 | (uint32_t)(snap))
#define FAB_TAP_CTL_GEN(ctl) ((uint32_t)((ctl) >> 32))
#define FAB_TAP_CTL_SNAP(ctl) ((uint32_t)(ctl))
#define FAB_TAP_BUDGET (32u << 20)   /* record bytes of all the rings together */
#define FAB_TAP_RING_MIN (64u << 10) /* bytes of one ring, at least ... */
#define FAB_TAP_RING_MAX (1u << 20)  /* ... and at most */
#define FAB_TAP_ALIGN 8u             /* records start and end on this */
#define FAB_TAP_REC_PAD (1u << 0)    /* filler to the end of the ring: skip it */
#define FAB_TAP_REC_RX (1u << 1)     /* written by the receiver: dropped on delivery */
/* A frame of a burst unit, whole (caplen == len), its ICRC left out: the
 * capture computes it from the record's copy. */
#define FAB_TAP_REC_NO_ICRC (1u << 2)
/* struct fab_seg_hdr.tap_flags.  Without FAB_TAP_F_LOSSY a port whose ring
 * is full waits for the capture to make room, for as long as the capture
 * makes progress (FAB_TAP_STALL_NS); with it, it leaves the frame out. */
#define FAB_TAP_F_LOSSY (1u << 0)
#define FAB_TAP_F_HOST (1u << 1)
#define FAB_TAP_F_QPN (1u << 2)
#define FAB_TAP_F_OPCODE (1u << 3)
#define FAB_TAP_F_ALL 0xfu
/* A capture that has given a full ring no room back for this long (or
 * whose last pass is older) is stalled: the port stops waiting for it and
 * leaves frames out (counted in stalled). */
#define FAB_TAP_STALL_NS 1000000000ull
/* The byte of fabric.shm on which the attached capture holds an OFD write
 * lock while it lives (the kernel drops it when the capture dies). */
#define FAB_TAP_LOCK_OFF 120u

/* One port's ring: the producer's line, then the consumer's. */
struct fab_tap_ring {
	/* Line 0, written by the port's owner only. */
	uint64_t prod;         /* end of the last record written */
	uint64_t records;      /* records written */
	uint64_t not_captured; /* frames left out because the ring was full */
	uint64_t check_ns;     /* when the owner last looked whether the capture lives */
	uint64_t stalled;      /* of not_captured: while the capture was stalled */
	uint64_t filtered;     /* frames the capture's filter turned away (not written) */
	uint32_t waiting;      /* 1 while the owner waits for room (futex on wake) */
	uint8_t reserved0[12];
	/* Line 1, written by the capture only. */
	uint64_t cons; /* start of the first record not yet read */
	uint32_t wake; /* bumped after cons moved while the owner was waiting */
	uint8_t reserved1[52];
};

/* One record: this header, then caplen bytes of the frame, then zeros up to
 * rec_len. */
struct fab_tap_rec {
	uint32_t rec_len; /* bytes, header included, a multiple of FAB_TAP_ALIGN */
	uint32_t flags;   /* FAB_TAP_REC_* */
	uint32_t len;     /* the frame's length, 1 .. FAB_SLOT_BYTES */
	uint32_t caplen;  /* bytes of it kept: <= len */
	uint32_t src;     /* addresses, network byte order */
	uint32_t dst;
	uint32_t marks;    /* FAB_MARK_* */
	uint32_t seq;      /* the ring's record count when written (low half) */
	uint64_t ts_ns;    /* CLOCK_MONOTONIC: sent, or dropped on delivery */
	uint64_t due_ns;   /* when it was (or would have been) delivered; 0 if dropped at send */
	uint64_t link_seq; /* its number on its link */
	uint64_t not_captured; /* the ring's not_captured when written */
};

/* Bytes of records in each port's ring: FAB_TAP_BUDGET shared by the port
 * slots, a power of two within [FAB_TAP_RING_MIN, FAB_TAP_RING_MAX]. */
static inline uint32_t fab_tap_ring_bytes(uint32_t max_ports)
{
	uint32_t b = FAB_TAP_RING_MAX;

	while (b > FAB_TAP_RING_MIN && (uint64_t)b * max_ports > FAB_TAP_BUDGET)
		b /= 2;
	return b;
}

/* Offset of the records from tap_off: the rings' headers, page aligned. */
static inline uint64_t fab_tap_data_off(uint32_t max_ports)
{
	return ((uint64_t)max_ports * sizeof(struct fab_tap_ring) + FAB_PAGE - 1) &
	       ~(uint64_t)(FAB_PAGE - 1);
}

/* Bytes of the capture section (tap_size). */
static inline uint64_t fab_tap_size(uint32_t max_ports)
{
	return fab_tap_data_off(max_ports) + (uint64_t)max_ports * fab_tap_ring_bytes(max_ports);
}

_Static_assert(sizeof(struct fab_seg_hdr) == 256, "segment header is 256 bytes");
_Static_assert(offsetof(struct fab_seg_hdr, ports_off) == 48, "header offsets");
_Static_assert(offsetof(struct fab_seg_hdr, seed) == 104, "header seed");
_Static_assert(sizeof(struct fab_port_counters) <= FAB_CACHELINE, "port counters fit a line");
_Static_assert(sizeof(struct fab_seg_port) == 4 * FAB_CACHELINE, "port is four lines");
_Static_assert(offsetof(struct fab_seg_port, counters) == FAB_CACHELINE, "port line 1");
_Static_assert(offsetof(struct fab_seg_port, sleeping) == 2 * FAB_CACHELINE, "port line 2");
_Static_assert(offsetof(struct fab_seg_port, pending) == 3 * FAB_CACHELINE, "port line 3");
_Static_assert(sizeof(struct fab_link_config) == 80, "link config is 80 bytes");
_Static_assert(sizeof(struct fab_link_config) % 8 == 0, "link config is whole words");
_Static_assert(sizeof(struct fab_seg_link) == 6 * FAB_CACHELINE, "link is six lines");
_Static_assert(offsetof(struct fab_seg_link, cfg) == 16, "link config words");
_Static_assert(offsetof(struct fab_seg_link, prod) == 2 * FAB_CACHELINE, "sender lines");
_Static_assert(offsetof(struct fab_seg_link, cons) == 5 * FAB_CACHELINE, "receiver line");
_Static_assert(sizeof(struct fab_seg_frame) == FAB_CACHELINE, "frame metadata is one line");
_Static_assert(offsetof(struct fab_seg_frame, len) == 32, "frame metadata layout");
_Static_assert(FAB_SLOT_BYTES % FAB_CACHELINE == 0, "frame slots are whole lines");
_Static_assert(FAB_MAX_PORTS % 64 == 0 && FAB_MAX_PORTS <= 0xffffu, "port slots fit the holder");
_Static_assert(offsetof(struct fab_seg_hdr, tap_ctl) == FAB_TAP_LOCK_OFF,
	       "the capture's lock byte");
_Static_assert(offsetof(struct fab_seg_hdr, tap_ctl) % 8 == 0, "tap_ctl is one atomic word");
_Static_assert(sizeof(struct fab_tap_ring) == 2 * FAB_CACHELINE, "a capture ring is two lines");
_Static_assert(offsetof(struct fab_tap_ring, cons) == FAB_CACHELINE, "consumer line");
_Static_assert(offsetof(struct fab_tap_ring, wake) % 4 == 0, "wake is a futex word");
_Static_assert(offsetof(struct fab_seg_hdr, tap_beat_ns) % 8 == 0, "tap_beat_ns is one word");
_Static_assert(sizeof(struct fab_tap_rec) == 64, "a record header is 64 bytes");
_Static_assert(sizeof(struct fab_tap_rec) % FAB_TAP_ALIGN == 0, "records stay aligned");
_Static_assert(FAB_TAP_RING_MIN % FAB_PAGE == 0, "rings are whole pages");

#endif /* FAB_SEG_H */

/*
 * Inside the fabric library: the process-local objects behind struct fab
 * and struct fab_port, and what fab_seg.c, fab_link.c and the ports'
 * files (fab_port.c, fab_port_tx.c, fab_port_rx.c) share.
 *
 * The sizes in struct fab are copied out of the segment header once, when
 * fab_open() has checked them; nothing later re-reads them from the segment.
 */
#ifndef FAB_PRIV_H
#define FAB_PRIV_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "fab.h"
#include "fab_wire.h"

_Static_assert(FAB_FRAME_MAX <= FAB_SLOT_BYTES, "a frame slot holds the largest frame");

struct fab {
	int fd;
	uint8_t *base;
	size_t size;
	struct fab_seg_hdr *hdr;
	struct fab_seg_port *ports;
	struct fab_seg_link *links;
	uint32_t *rings;
	struct fab_seg_frame *meta;
	uint8_t *frames;
	uint32_t max_ports, nframes, ring_depth;
	uint64_t seed;
	char dir[PATH_MAX];
};

/* A port's copy of one link's configuration, refreshed when cfg_seq moves. */
struct fab_link_view {
	struct fab_link_config cfg;
	uint64_t seed;     /* effective seed */
	uint32_t cfg_seq;  /* the even cfg_seq it was read at */
	uint32_t seed_gen; /* read with it */
	uint32_t nth_gen;
	bool valid;
};

/* Sender side of a link (indexed by destination slot). */
struct fab_tx {
	struct fab_link_view view;
	uint32_t cons_seen; /* last consumer index read: ring space without a shared read */
	int bell_fd;        /* the destination's bell, opened on first wake-up */
	uint32_t bell_gen;  /* the destination's generation when it was opened */
};

/* A frame pulled out of a ring, waiting for its delivery time. */
struct fab_heap_ent {
	uint64_t due_ns;
	uint64_t order; /* pull order: ties keep the ring's order */
	uint64_t sent_ns;
	uint64_t link_seq;
	uint32_t idx;
	uint32_t len;
	uint32_t src_addr;
	uint16_t src_slot;
	uint16_t marks; /* FAB_MARKS_DELIVERED, and FAB_ENT_NO_ICRC */
};

/* A frame of a burst unit: its sender left the ICRC out (fab.h). */
#define FAB_ENT_NO_ICRC 0x8000u
/* A datagram received on the port's UDP side (fab_udp.c): no link, no slot. */
#define FAB_ENT_UDP 0x4000u

#define FAB_HELD_MAX 8u

/*
 * A port's own view of its capture ring's progress (fab_capture.c), kept in
 * the process, where nothing in the segment can change it: the consumer
 * position at which the port found its ring full, and since when.  A
 * position that has not moved for FAB_TAP_STALL_NS is a stalled capture,
 * whatever else the segment says.
 */
struct fab_tap_wait {
	uint64_t cons;     /* the furthest consumer position seen with the ring full */
	uint64_t since_ns; /* when it was first seen; 0: not waiting */
};

struct fab_port {
	struct fab *fab;
	struct fab_seg_port *seg;
	uint32_t slot, addr, gen;
	uint64_t holder; /* FAB_HOLDER(HELD, slot, gen) */
	int bell_fd;
	uint32_t cursor;           /* next frame fab_frame_get looks at */
	uint32_t hot_base;         /* first frame of the span it prefers (fab_frame_get) */
	uint32_t hot_cursor;       /* next frame it looks at in that span */
	uint32_t spill;            /* gets left that skip the span after it was full */
	uint32_t ctl_cursor;       /* next kept frame fab_frame_get_ctl looks at */
	uint64_t clock;            /* a recent fab_now_ns() (fab_recv, send_clock) */
	struct fab_tx *tx;         /* [max_ports] */
	struct fab_link_view *rx;  /* [max_ports], by source slot */
	struct fab_heap_ent *heap; /* [nframes] */
	uint32_t heap_n;
	struct fab_heap_ent *queue; /* [nframes]: in order (wait_push) */
	uint32_t queue_head, queue_n;
	uint64_t order;
	uint32_t recv_calls;
	bool scan_all; /* pull every ring at the next fab_recv */
	uint64_t wakeups;
	fab_tap_fn tap;
	void *tap_arg;
	struct fab_tap_wait tap_wait;
	/* fab_port_hold_kicks: destinations not yet told of their frames. */
	bool holding;
	uint32_t held_frames; /* sent since holding began */
	uint32_t clock_sends; /* sent on the reading in clock (send_clock) */
	uint32_t nheld;
	uint32_t held[FAB_HELD_MAX];
	struct fab_udp *udp;  /* its UDP side (fab_udp.c), or NULL */
	uint32_t udp_waiting; /* datagrams among the frames waiting for fab_recv */
};

/* Section accessors; slots and indices already checked by the caller. */
static inline struct fab_seg_link *fab_link_at(const struct fab *fab, uint32_t src, uint32_t dst)
{
	return &fab->links[(size_t)src * fab->max_ports + dst];
}

static inline uint32_t *fab_ring_at(const struct fab *fab, uint32_t src, uint32_t dst)
{
	return &fab->rings[((size_t)src * fab->max_ports + dst) * fab->ring_depth];
}

static inline uint8_t *fab_frame_at(const struct fab *fab, uint32_t idx)
{
	return fab->frames + (size_t)idx * FAB_SLOT_BYTES;
}

/* fab_seg.c */

/* Slot of the bound address addr, or -ENOENT. */
int fab_slot_find(const struct fab *fab, uint32_t addr);
/* Slot of addr, binding a free slot to it if needed; -ENOSPC. */
int fab_slot_claim(struct fab *fab, uint32_t addr);
/* dir/fab-<addr>.bell; 0 or -ENAMETOOLONG. */
int fab_bell_path(char *buf, size_t size, const char *dir, uint32_t addr);
/* Whether a live process holds the bell of addr (owns the port). */
bool fab_bell_locked(const char *dir, uint32_t addr);

/* fab_link.c */

/*
 * Refresh view from link l when its configuration changed.  Returns false
 * if the segment held an invalid configuration (the view is kept, the
 * caller counts it).  A writer in progress leaves the view as it was.
 */
bool fab_link_view_refresh(const struct fab *fab, const struct fab_seg_link *l, uint32_t src,
			   uint32_t dst, struct fab_link_view *view);

/* What the link model decided for one frame. */
struct fab_verdict {
	uint32_t marks;       /* FAB_MARK_*: a DROP mark means drop it */
	uint64_t due_ns;      /* delivery time */
	uint32_t corrupt_bit; /* bit to flip when FAB_MARK_CORRUPTED */
	bool duplicate;       /* send a copy too */
	uint64_t link_seq;
};

/*
 * Decide the fate of a frame of len bytes (frame: its bytes) offered to
 * link l at time now, with view the sender's current configuration, and
 * advance the link's sender state and counters.  The sender alone calls it.
 */
void fab_link_decide(struct fab_seg_link *l, const struct fab_link_view *view, const uint8_t *frame,
		     uint32_t len, uint64_t now, struct fab_verdict *v);

/*
 * One read of a field of the segment that another process may write at any
 * moment (the Linux kernel's READ_ONCE): the value is copied into a local
 * once, checked, and only the copy is used from then on.  Everything in the
 * segment is hostile input (fab_seg.h); a field read twice may differ
 * between the check and the use.
 */
#define FAB_READ_ONCE(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

/* Relaxed single-writer counter increment (only one process writes it). */
static inline void fab_count(uint64_t *c, uint64_t n)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

/* ---- fab_port.c, fab_port_tx.c, fab_port_rx.c ---- */

/* Port counters: the owner is their only writer. */
#define FAB_PORT_COUNT(p, name) fab_count(&(p)->seg->counters.name, 1)

/* Whether port p holds frame idx (any idx: it is checked). */
static inline bool fab_port_holds(const struct fab_port *p, uint32_t idx)
{
	return idx < p->fab->nframes &&
	       __atomic_load_n(&p->fab->meta[idx].holder, __ATOMIC_ACQUIRE) == p->holder;
}

/* Free a frame this port holds; release: our reads of it come first. */
static inline void fab_port_release(struct fab_port *p, uint32_t idx)
{
	__atomic_store_n(&p->fab->meta[idx].holder, 0, __ATOMIC_RELEASE);
}

/*
 * fab_port.c: a frame for the taps: the port's callback, and the port's
 * capture ring while a capture is attached (fab_capture.h).  rx: the
 * receiver drops it on delivery.  Without either, one load of the
 * header's tap_ctl.
 */
void fab_port_tap(struct fab_port *p, uint32_t idx, uint32_t len, uint32_t src, uint32_t dst,
		  uint32_t marks, uint64_t sent_ns, uint64_t due_ns, uint64_t link_seq, bool rx);
/* fab_port_tap for a frame of a burst unit sent whole (its ICRC left out),
 * while a capture is attached: the capture rings only. */
void fab_port_tap_unit(struct fab_port *p, uint32_t idx, uint32_t len, uint32_t dst,
		       uint64_t sent_ns, uint64_t due_ns, uint64_t link_seq);

/* fab_port_rx.c: read what the bell holds (the wake-ups it stands for are
 * taken already). */
void fab_port_drain_bell(struct fab_port *p);
/* fab_port_rx.c: at close, pull what has arrived and free every frame
 * waiting for delivery. */
void fab_port_rx_close(struct fab_port *p);
/* fab_port_rx.c: queue a frame this port holds for delivery (e->order is
 * set here); false if the queue is full (the frame is released, counted). */
bool fab_port_deliver_later(struct fab_port *p, struct fab_heap_ent *e);
/* fab_port_rx.c: a min-heap of *n entries on (due_ns, order): add e, or
 * take the first into *out (*n > 0). */
void fab_heap_push(struct fab_heap_ent *h, uint32_t *n, const struct fab_heap_ent *e);
void fab_heap_pop(struct fab_heap_ent *h, uint32_t *n, struct fab_heap_ent *out);
/* fab_port_rx.c: frames waiting for delivery. */
uint32_t fab_port_waiting(const struct fab_port *p);

/* fab_udp.c: send frame idx (held, len bytes) to dst, an address with no
 * open port here, as a datagram (fab_send's contract). */
int fab_udp_send(struct fab_port *p, uint32_t idx, uint32_t len, uint32_t dst);
/* fab_udp.c: send the delayed frames due by now, then take what the socket
 * holds (a batch at most) into the delivery queue; the frames queued. */
uint32_t fab_udp_pull(struct fab_port *p, uint64_t now);
/* fab_udp.c: send the frames a burst left waiting (no-op without UDP). */
void fab_udp_tx_flush(struct fab_port *p);
/* fab_udp.c: when the earliest delayed frame is due, or UINT64_MAX. */
uint64_t fab_udp_next_due_ns(struct fab_port *p);

/*
 * fab_udp.c, the receive path's checks without the socket (and what
 * fuzz_udp feeds): the judgement of one datagram of n bytes from its IPv4
 * header on, at ip, received by the port of address addr (network order),
 * truncated if the kernel cut it to fit a frame slot.  FAB_UDP_RX_OK if it
 * can be a RoCEv2 packet to that port, else why not (each is counted).
 */
enum fab_udp_rx {
	FAB_UDP_RX_OK,
	FAB_UDP_RX_OVERSIZE,
	FAB_UDP_RX_SHORT,
	FAB_UDP_RX_NOT_ROCE,
	FAB_UDP_RX_BAD_LENGTH,
	FAB_UDP_RX_WRONG_DST,
};

enum fab_udp_rx fab_udp_rx_judge(const uint8_t *ip, size_t n, bool truncated, uint32_t addr);
/* Write the Ethernet header of the frame whose accepted datagram starts at
 * frame + FAB_ETH_HLEN, as the fabric's frames have it (addresses derived
 * from the IPv4 header's); the frame then goes to fab_pkt_decode. */
void fab_udp_rx_eth(uint8_t *frame);

#endif /* FAB_PRIV_H */

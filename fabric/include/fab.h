/*
 * The fabric: the wire between emulated NICs.
 *
 * One shared-memory segment per run directory, the file D/fabric.shm
 * (layout: fab_seg.h), joins the NICs of that directory.  `nicsim up`
 * creates it before it starts the NICs and `nicsim down` removes it; each
 * nicsimd maps it and opens one port, named by the NIC's address.
 *
 * Frames.  A pool of nframes fixed-size slots (FAB_SLOT_BYTES each).  Frames
 * move by index, never by copy: a sender takes a free slot
 * (fab_frame_get), writes the frame into it in place, and sends the index; the
 * receiver reads the frame where it lies and gives the slot back
 * (fab_rx_done).  Who holds a slot is one word per frame (FAB_HOLDER: free,
 * held by port P, in flight to port P), changed with compare-and-swap, so the
 * pool needs no lock and no free list that a dead process could leave
 * broken: fab_frame_get scans for a free word from a per-port cursor (frames
 * come back roughly in the order they were taken, so the first probe nearly
 * always succeeds; an exhausted pool costs one full scan and -ENOBUFS).  It
 * looks first in a span of 512 frames of its own, so that a busy port
 * reuses frames still in the CPU caches, and in the whole pool when the
 * span is all in use.  The pool's last frames are kept for packets without
 * payload (fab_frame_get_ctl), so that acknowledgements go out while data
 * has taken every other frame.
 *
 * Rings.  One single-producer single-consumer ring of frame indices per
 * directed pair of ports (source, destination).  A process that dies can
 * block no one: its rings have no other producer or consumer.  A sender
 * publishes into the ring, then sets its bit in the destination's pending
 * bitmap, so the receiver looks only at rings that got something; a full
 * scan of every ring (before sleeping, and every 1024th fab_recv call) makes
 * the bitmap a hint that no hostile write can turn into a lost frame.
 *
 * Delivery.  The receiver pulls every arrived frame out of its rings into a
 * private min-heap keyed by delivery time and hands them out in that order
 * once due (fab_recv); fab_next_due_ns says when the next one is due, for a
 * timerfd.
 *
 * Links.  Every directed link has a configuration (struct fab_link_config:
 * latency, jitter, rate, and the fault rules loss, duplicate, reorder,
 * corrupt, delay, drop-nth, down) that any process may change at run time
 * (fab_link_set, under a seqlock that readers never wait on: they keep their
 * last good copy), and counters that only its two ends write.  The sender
 * decides each frame's fate when it sends it: down, drop-nth, loss; then the
 * time it leaves (a link is busy until its previous frame has been
 * serialised at the rate) and arrives (+ latency + jitter, never before the
 * link's previous in-order frame), the delay rule (+ delay + jitter, out of
 * order), the reorder rule (+ reorder gap, out of order), corrupt (one bit
 * flipped after the BTH, so the ICRC no longer matches) and duplicate (a
 * copy in a second slot: the one copy the fabric makes).  The receiver
 * applies the rest when it delivers: delivery-time order, and a link that
 * went down while the frame was in flight drops it.
 *
 * Replay.  Every random decision comes from a counter-based PRNG: the
 * frame's number on its link since the seed was set, hashed with the seed
 * (splitmix64), one stream per rule.  The same frames on a link with the
 * same seed get the same decisions, whichever other rules are on; a link's
 * seed defaults to a hash of the fabric's seed and the two addresses, and
 * `nicsim up --seed N` replays a run.
 *
 * Wake-ups without fd passing.  Each port has a named FIFO, D/fab-ADDR.bell.
 * The receiver puts the read end (fab_port_fd) in its epoll set.  Before it
 * sleeps it calls fab_port_sleep_prepare: flag set, full fence, every ring
 * checked again; a sender publishes, fences, and writes one byte to the bell
 * only if it finds the flag set (and clears it, so one sender rings, not
 * all).  Either the receiver sees the frame or the sender sees the flag
 * (Dekker, as in nicsim_ring.h), so no wake-up is lost and the data path
 * makes no system call while the receiver is awake.  Senders open the FIFO
 * read-write, so a dead receiver can never raise SIGPIPE.
 *
 * Dead processes.  A port's owner holds an OFD write lock on its bell, which
 * the kernel drops when the process dies; that is how a port is known to be
 * live, and why opening a live port fails with -EADDRINUSE.  Opening a port
 * bumps its generation and frees every frame whose holder word names the
 * port with an older generation: frames the old owner held, frames in its
 * receive heap, and frames in flight to it.  A frame in flight to the
 * previous generation that a sender publishes after that scan is freed by
 * the receiver when it meets it.  So the frames a dead port held stay out of
 * the pool only until a port for its address is opened again.  One frame can
 * stay out longer: one a sender had marked in flight to a receiver but not
 * yet published when the sender was killed (a window of a few instructions)
 * comes back only when the receiver's port is next reopened.
 *
 * Hostile segment.  Any process that maps the segment can write anything in
 * it.  Every ring index, frame index, length, source, ring position and
 * delivery time is validated before use; a bad one is counted in the port's
 * counters (fab_port_list) and dropped.  Link configurations with values out
 * of range are ignored.  What is not defended: a process that truncates
 * D/fabric.shm makes the others fault (SIGBUS) on their next access.
 *
 * Threads.  A port is used by one thread at a time; different ports, and
 * the fab_link_* and fab_info calls, may be used from any thread.
 *
 * Capture tap.  fab_port_set_tap installs a callback that sees every frame
 * the port sends (with its fault marks, including the frames the rules
 * drop, before they are released) and every frame dropped on delivery.  The
 * same frames go to the segment's capture rings while a capture is attached
 * (fab_capture.h, `nicsim capture`): one ring per port, which only its
 * owner writes, inside fab_send and fab_recv, after the capture's filter; a
 * full ring makes the port wait for the capture while it makes progress (at
 * most FAB_TAP_STALL_NS without a pass), or in lossy mode counts the frame
 * as not captured.  Without a capture, one load of the header's tap_ctl
 * per frame.
 *
 * Errors: 0 or a negative errno everywhere.  Addresses are IPv4 in
 * 198.18.0.0/15, network byte order (fab_addr.h).  Times are
 * CLOCK_MONOTONIC nanoseconds (fab_now_ns).
 */
#ifndef FAB_H
#define FAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fab_seg.h"

#define FAB_DEFAULT_PORTS 32u
#define FAB_DEFAULT_FRAMES 4096u

struct fab;      /* one process's mapping of a fabric segment */
struct fab_port; /* one open port */

/* ---- Segment ------------------------------------------------------------ */

struct fab_config {
	uint32_t max_ports;    /* port slots; 0: FAB_DEFAULT_PORTS */
	uint32_t frames;       /* frame slots; 0: FAB_DEFAULT_FRAMES */
	uint32_t ring_depth;   /* entries per link ring (power of two); 0: chosen */
	uint64_t seed;         /* the fabric's seed */
	const uint32_t *addrs; /* addresses to bind to port slots now (may be NULL) */
	size_t naddrs;
};

/*
 * Create dir/fabric.shm (atomically: written aside, then renamed into
 * place).  An existing fabric is replaced unless one of its ports is open by
 * a live process: then -EBUSY and nothing changes.  Returns 0, -EINVAL for
 * a bad configuration, -EADDRNOTAVAIL for an address outside
 * 198.18.0.0/15, -ENOSPC if the addresses do not fit max_ports, or a
 * system error.
 */
int fab_create(const char *dir, const struct fab_config *cfg);
/*
 * The bytes fab_create reserves on disk for cfg (the capture section stays
 * sparse), for a message when the file system is too full: 0 for a bad
 * configuration.
 */
uint64_t fab_create_bytes(const struct fab_config *cfg);

/*
 * Remove dir/fabric.shm and the ports' bells.  -EBUSY (nothing removed) if a
 * port is open by a live process; -ENOENT if there was no fabric.
 * Processes that still map the segment keep their mapping.
 */
int fab_destroy_files(const char *dir);

/*
 * Map dir/fabric.shm.  -ENOENT if there is none, -EPROTO if it is not a
 * fabric segment of this version or its layout does not add up.
 */
int fab_open(const char *dir, struct fab **fab);

/*
 * Whether the header of the mapped segment still says what fab_open found
 * (the same checks): 0, or -EPROTO when it has been written over since.
 * Cheap (one header read); what the header describes is not walked.
 */
int fab_check(const struct fab *fab);

/* Unmap; the ports opened through fab must be closed first.  Accepts NULL. */
void fab_close(struct fab *fab);

/* Bind addr to a port slot without opening it (so that its links can be
 * configured before its NIC starts).  0 if bound (now or before), -ENOSPC if
 * every slot is taken, -EADDRNOTAVAIL. */
int fab_port_claim(struct fab *fab, uint32_t addr);

struct fab_info {
	uint32_t max_ports, nframes, ring_depth, slot_bytes;
	uint64_t seg_size, seed, created_ns;
	uint32_t creator_pid;
	uint32_t ports_bound;
	uint32_t frames_free, frames_held, frames_in_flight; /* a snapshot */
};

int fab_info(struct fab *fab, struct fab_info *info);

struct fab_port_info {
	uint32_t addr;
	uint32_t slot;
	bool open; /* the segment says open ... */
	bool live; /* ... and its owner is alive (holds the bell's lock) */
	uint32_t pid, gen;
	uint64_t opened_ns;   /* CLOCK_REALTIME */
	uint32_t frames_held; /* frames whose holder word names this slot */
	struct fab_port_counters counters;
};

/* Every bound port, in slot order; *list is malloc'ed (NULL when *n is 0). */
int fab_port_list(struct fab *fab, struct fab_port_info **list, size_t *n);

/*
 * Who owns the port of addr now: the pid of the live process that has it
 * open and the port's generation (bumped by every open), so that a peer can
 * learn the moment that process ends (pidfd_open) and tell a port reopened
 * by a new owner from the one it knew.  The pid is read from the segment,
 * which anyone who maps it can write: the answer is a hint, checked only
 * against the bell's lock (the port is open by a live process).  0,
 * -EHOSTUNREACH when no live process has the port open, -EADDRNOTAVAIL.
 */
int fab_port_owner(struct fab *fab, uint32_t addr, uint32_t *pid, uint32_t *gen);

/* ---- Ports -------------------------------------------------------------- */

/*
 * Open the port with address addr, creating its bell.  Reclaims what an
 * earlier owner left (see "Dead processes").  Returns 0, -EADDRINUSE if a
 * live process has it open, -ENOSPC if no slot is free, -EADDRNOTAVAIL,
 * -ENOMEM, or a system error.
 */
int fab_port_open(struct fab *fab, uint32_t addr, struct fab_port **port);

/* Close: frees every frame the port holds or has waiting.  Accepts NULL. */
void fab_port_close(struct fab_port *port);

/* The bell's read end: readable when a sender rang.  For an epoll set. */
int fab_port_fd(const struct fab_port *port);

uint32_t fab_port_addr(const struct fab_port *port);

/*
 * Take a free frame: *idx and *data (FAB_SLOT_BYTES writable bytes).
 * -ENOBUFS when the pool is exhausted.
 *
 * The last fab_ctl_frames(nframes) frames of the pool are kept for
 * packets that carry no payload (acknowledgements, NAKs, read requests,
 * CM messages): fab_frame_get never takes them, fab_frame_get_ctl takes
 * them first and the others after.  Data in flight can then take every
 * frame the others may, and still the receivers' acknowledgements go out:
 * without them the senders would time out and send their windows again,
 * into the same exhausted pool.
 */
int fab_frame_get(struct fab_port *port, uint32_t *idx, void **data);
int fab_frame_get_ctl(struct fab_port *port, uint32_t *idx, void **data);

/* The frames kept for packets without payload in a pool of nframes: a
 * sixteenth, at most 1024; none in a pool of fewer than 256. */
static inline uint32_t fab_ctl_frames(uint32_t nframes)
{
	return nframes < 256u ? 0u : nframes / 16u < 1024u ? nframes / 16u : 1024u;
}

/* Give back a frame this port holds (taken or received).  -EINVAL if the
 * port does not hold idx. */
int fab_frame_put(struct fab_port *port, uint32_t idx);

/* The bytes of a frame this port holds, or NULL. */
void *fab_frame_data(struct fab_port *port, uint32_t idx);

/*
 * Send len bytes of frame idx to the port with address dst, through the
 * link's model.  The frame is the fabric's from then on, whatever the
 * result (released on every error).  Returns 0 (also when a fault rule
 * dropped it: the sender cannot tell), -EINVAL if the port does not hold idx
 * (nothing released) or len is 0, -EMSGSIZE if len > FAB_SLOT_BYTES,
 * -EHOSTUNREACH if no open port has address dst, -ENOBUFS if the ring to dst
 * is full (its owner is not draining it).
 */
int fab_send(struct fab_port *port, uint32_t idx, uint32_t len, uint32_t dst);

/*
 * Batched notification.  Telling a receiver of a frame (its pending bit, its
 * bell if it sleeps) costs a fence and two loads of lines the receiver
 * writes, more than the rest of a send; a sender that sends several frames
 * in a row can tell each receiver once.  Between fab_port_hold_kicks and
 * fab_port_release_kicks, fab_send publishes frames without telling their
 * receivers (past eight receivers it tells at once); release tells
 * each of them.  A receiver may not look at held frames before that, so
 * release before waiting for anything.
 */
void fab_port_hold_kicks(struct fab_port *port);
void fab_port_release_kicks(struct fab_port *port);

/*
 * Burst units.  Most of a packet's cost in the fabric and its two ports
 * does not depend on its bytes: a ring entry, a wake-up, and the ICRC that
 * its sender computes and its receiver checks, which only a fault rule that
 * corrupts, or a capture, could ever need.  As GSO and GRO do for TCP, a
 * sender may hand the fabric a run of up to FAB_UNIT_MAX frames to one
 * destination (the packets of one message, in order), each a complete
 * frame of its own but with its ICRC left out (fab_pkt_encode_opt with
 * FAB_PKT_NO_ICRC).  fab_send_unit sends them as one ring entry when no
 * rule can decide on a packet on the way: the link has no rule at all (no
 * latency, jitter, rate, loss, duplication, reordering, corruption, delay,
 * drop-nth, and it is up), and no tap callback is installed on the port.
 * The link model still numbers and counts each frame as it would have one
 * sent alone at that moment, and the receiver gets them one by one from
 * fab_recv, in order, with no_icrc set.  An attached capture records each
 * frame as one sent alone, and computes its ICRC from its own copy when it
 * reads the record (the port computes it for a capture that keeps less
 * than the whole frame).  Otherwise the unit is split where the packets
 * become observable, before any rule decides: each frame gets its ICRC
 * (fab_pkt_icrc_fill) and goes through fab_send alone, byte for byte the
 * frame the sender would have sent without units, meeting each rule and
 * the tap as such a frame does.  A frame of a unit that the receiver drops
 * on delivery (the link went down meanwhile) gets its ICRC before the tap
 * and the capture see it.  Bridging a port off this machine's fabric would
 * be one more such place.
 */
#define FAB_UNIT_MAX 64u

/* What became of a unit's frames. */
struct fab_unit_res {
	uint32_t sent;        /* accepted by the fabric (a rule may still drop them) */
	uint32_t ring_full;   /* refused: the destination's ring was full */
	uint32_t unreachable; /* refused: no open port at dst */
	uint32_t refused;     /* refused: not a frame this port holds, or a bad length */
	bool whole;           /* crossed as one unit (else split, or refused) */
};

/*
 * Whether a unit sent to dst now would cross whole: 1, or 0 when it would be
 * split (a rule on the link, a tap callback, or the ring full), or
 * -EHOSTUNREACH.  Nothing but this port sends into that ring, so room found
 * here stays until this port sends something else to dst.
 */
int fab_unit_whole(struct fab_port *port, uint32_t dst);

/*
 * Send the n frames idx[0..n-1] of lengths len[] to dst as one unit, or
 * split (above).  The frames are the fabric's from then on, whatever the
 * result; *res says what became of them.  Returns 0, or -EHOSTUNREACH when
 * no open port has address dst (every frame released).
 */
int fab_send_unit(struct fab_port *port, const uint32_t *idx, const uint32_t *len, uint32_t n,
		  uint32_t dst, struct fab_unit_res *res);

/* A received frame, valid until fab_rx_done(idx). */
struct fab_rx {
	uint32_t idx;
	uint32_t len;
	void *data;
	uint32_t src;   /* source address */
	uint32_t marks; /* FAB_MARK_DUPLICATE/CORRUPTED/DELAYED/REORDERED */
	/* It crossed in a burst unit and its sender left the ICRC out (zeros):
	 * decode it with FAB_PKT_NO_ICRC, and fill the ICRC in
	 * (fab_pkt_icrc_fill) before sending it on or showing it to anyone. */
	bool no_icrc;
	uint64_t due_ns;
	uint64_t sent_ns;
	uint64_t link_seq; /* the frame's number on its link */
};

/* The next frame that is due, in delivery-time order.  -EAGAIN when none is
 * due (fab_next_due_ns says when one will be). */
int fab_recv(struct fab_port *port, struct fab_rx *rx);

/* Done with a received frame: same as fab_frame_put.  A received frame may
 * also be sent on with fab_send instead. */
int fab_rx_done(struct fab_port *port, uint32_t idx);

/* When the earliest frame that has arrived is due (CLOCK_MONOTONIC ns; at
 * or before now: fab_recv has one), or UINT64_MAX if none has arrived. */
uint64_t fab_next_due_ns(struct fab_port *port);

/*
 * About to sleep in epoll on fab_port_fd (and a timer at fab_next_due_ns):
 * announces it, then checks every ring again.  0: sleep now; -EAGAIN: frames
 * arrived, do not sleep (the announcement is withdrawn; call fab_recv and
 * fab_next_due_ns again).  After waking, whatever woke it, call
 * fab_port_sleep_cancel.
 */
int fab_port_sleep_prepare(struct fab_port *port);
void fab_port_sleep_cancel(struct fab_port *port);

/* Bell bytes read by fab_port_sleep_cancel over the port's life (tests and
 * benchmarks count wake-ups with it). */
uint64_t fab_port_wakeups(const struct fab_port *port);

/* ---- UDP: beyond this machine ------------------------------------------- */

/*
 * A port may also reach NICs that are not on its fabric: RoCEv2 datagrams
 * on UDP port 4791 of its own address, which must be configured on an
 * interface here (fab_udp.c has the sockets).  Once open, fab_send to an
 * address with no open port on the fabric sends a datagram through the
 * kernel's routing; if the address is bound to a slot (fab_port_claim),
 * that link's model and fault rules decide on each frame as for fabric
 * frames.  fab_recv hands out received datagrams among the fabric's
 * frames, each made a frame (the fabric's Ethernet header in front of the
 * IPv4 header as it arrived), with src the IPv4 source.  Datagrams that
 * cannot be RoCEv2 packets to this port are counted and dropped here; the
 * rest get every check of a fabric frame from the receiver's decoder.
 *
 * Needs CAP_NET_RAW (raw sockets: the ICRC covers IP header fields a UDP
 * socket does not show).  Returns 0, -EPERM without it, -EADDRNOTAVAIL if
 * the address is not configured here, -EADDRINUSE if another program has
 * UDP port 4791 on it, -EALREADY, or another system error.
 */
int fab_port_udp_open(struct fab_port *port);

/* Close the UDP side (fab_port_close does it too).  Accepts a port without. */
void fab_port_udp_close(struct fab_port *port);

/* The receive socket, for an epoll set (readable: datagrams wait), or -1. */
int fab_port_udp_fd(const struct fab_port *port);

/* X(name, description) */
#define FAB_UDP_STATS(X)                                                                     \
	X(rx_datagrams, "datagrams received on port 4791 of this address")                   \
	X(rx_bytes, "bytes of them, from the IPv4 header on")                                \
	X(rx_short, "dropped: shorter than any RoCEv2 packet")                               \
	X(rx_oversize, "dropped: longer than a frame slot")                                  \
	X(rx_not_roce, "dropped: IP options or a fragment")                                  \
	X(rx_bad_length, "dropped: IP or UDP length differs from what arrived")              \
	X(rx_wrong_dst, "dropped: to another address")                                       \
	X(rx_nobuf, "times datagrams had to wait: no free frame or the delivery queue full") \
	X(tx_datagrams, "datagrams sent")                                                    \
	X(tx_bytes, "bytes of them, from the IPv4 header on")                                \
	X(tx_refused, "frames not sent: their IPv4 header did not match the port and dst")   \
	X(tx_unreachable, "datagrams the kernel could not route")                            \
	X(tx_too_big, "datagrams over the interface's MTU")                                  \
	X(tx_nobufs, "datagrams dropped: the socket's buffer was full")                      \
	X(tx_errors, "datagrams refused for another reason")

struct fab_udp_stats {
#define FAB_X_FIELD(name, desc) uint64_t name;
	FAB_UDP_STATS(FAB_X_FIELD)
#undef FAB_X_FIELD
};

/* The UDP side's counters: 0, or -ENOENT without one. */
int fab_port_udp_stats(const struct fab_port *port, struct fab_udp_stats *st);

/*
 * The largest IB MTU (256 .. FAB_MTU) that frames to dst can use: FAB_MTU
 * on the fabric, else the largest that fits the route's IP MTU with every
 * header (a 1500-byte Ethernet path: 1024, as Soft-RoCE finds).
 */
uint32_t fab_port_path_mtu(struct fab_port *port, uint32_t dst);

/* The largest IB MTU whose packets fit an IP MTU of ip_mtu bytes, or 0. */
uint32_t fab_ib_mtu_for(uint32_t ip_mtu);

/* ---- Capture tap -------------------------------------------------------- */

struct fab_tap_frame {
	const void *data; /* valid during the call only */
	uint32_t len;
	uint32_t idx;
	uint32_t src, dst; /* addresses */
	uint32_t marks;    /* FAB_MARK_*, DROP marks for frames no one receives */
	uint64_t sent_ns;
	uint64_t due_ns; /* 0 for frames dropped at send */
	uint64_t link_seq;
	/* Its ICRC is left out (a frame of a burst unit).  Only the capture
	 * rings get such frames, and the capture fills the ICRC in before it
	 * hands the frame out (fab_capture.h); a tap callback never sees one. */
	bool no_icrc;
};

/* Called by the sender for each frame it sends or the rules drop (and each
 * duplicate), before the frame is published or released, and by the
 * receiver for each frame dropped on delivery.  Must not block. */
typedef void (*fab_tap_fn)(void *arg, const struct fab_tap_frame *frame);

/* Install (or with fn NULL remove) the port's tap. */
void fab_port_set_tap(struct fab_port *port, fab_tap_fn fn, void *arg);

/* ---- Links -------------------------------------------------------------- */

/* Fields of struct fab_link_config that fab_link_set changes. */
#define FAB_LF_LATENCY (1u << 0)
#define FAB_LF_JITTER (1u << 1)
#define FAB_LF_RATE (1u << 2)
#define FAB_LF_LOSS (1u << 3)
#define FAB_LF_DUP (1u << 4)
#define FAB_LF_REORDER (1u << 5)
#define FAB_LF_REORDER_GAP (1u << 6)
#define FAB_LF_CORRUPT (1u << 7)
#define FAB_LF_DELAY (1u << 8)
#define FAB_LF_DELAY_PPB (1u << 9)
#define FAB_LF_NTH (1u << 10)  /* nth, nth_opcode and nth_qpn: counting restarts */
#define FAB_LF_DOWN (1u << 11) /* the FAB_LINK_DOWN flag */
#define FAB_LF_SEED (1u << 12) /* seed (and FAB_LINK_SEEDED): the PRNG restarts */
#define FAB_LF_ALL 0x1fffu

/* The configuration of a link nobody has changed. */
void fab_link_config_default(struct fab_link_config *cfg);

/* Copy the fields of src that mask (FAB_LF_*) selects into dst, as
 * fab_link_set() does; FAB_LF_SEED also sets FAB_LINK_SEEDED. */
void fab_link_config_merge(struct fab_link_config *dst, const struct fab_link_config *src,
			   uint32_t mask);

/* The fields (FAB_LF_*, the seed left out) in which a and b differ. */
uint32_t fab_link_config_diff(const struct fab_link_config *a, const struct fab_link_config *b);

/*
 * Change the fields of link src -> dst that fields selects, from cfg.  Both
 * addresses must be bound (fab_port_claim; src == dst is the port's
 * loop-back link).  Returns 0, -ENOENT if an address is not bound, -EINVAL
 * for a value out of range (nothing changed), -EBUSY if another live writer
 * kept the link for a second.
 */
int fab_link_set(struct fab *fab, uint32_t src, uint32_t dst, const struct fab_link_config *cfg,
		 uint32_t fields);

/*
 * The configuration of link src -> dst, with its effective seed.  Returns
 * 0, -ENOENT if an address is not bound, or -EBADMSG when the segment holds
 * a configuration with a value out of range (something other than
 * fab_link_set wrote it; the ports keep the last valid settings, the
 * defaults if none, and count bad_config):
 * *cfg is then what was read, and fab_link_config_check() says what is
 * wrong with it.  fab_link_set() with FAB_LF_CLEAR repairs it.
 */
int fab_link_get(struct fab *fab, uint32_t src, uint32_t dst, struct fab_link_config *cfg);

/*
 * 0 if every value of cfg is in range, else -EINVAL and, in why (if not
 * NULL), the first that is not: "loss_ppb 3000000000 is over its limit
 * 1000000000".
 */
int fab_link_config_check(const struct fab_link_config *cfg, char *why, size_t size);

/*
 * A link's counters, copied from the segment, where anyone can scribble on
 * them: a reader shows values that cannot be as invalid.  tx.frames is read
 * last, so for a link only nicsim wrote, every other tx counter is at most
 * tx.frames (each counts some of the frames offered; duplicated counts one
 * extra copy per frame at most) and tx.bytes at most FAB_SLOT_BYTES per
 * frame.
 */
struct fab_link_stats {
	struct fab_link_tx_counters tx;
	struct fab_link_rx_counters rx;
	uint32_t queued; /* ring entries (a burst unit is one) not yet pulled by the receiver */
	uint32_t nth_matched; /* frames matched by the drop-nth filter so far */
	uint32_t prod, cons;  /* the ring's positions as read */
	bool ring_bad;        /* they are impossible (more than the ring holds): queued 0 */
};

int fab_link_stats(struct fab *fab, uint32_t src, uint32_t dst, struct fab_link_stats *st);

/*
 * Parse link settings as `nicsim link set` takes them (after SRC DST):
 * words such as "latency 10 jitter 2.5 rate 10 loss 5 drop-nth 3 opcode
 * SEND_ONLY qpn 17 down seed 42", into cfg and the FAB_LF_* bits in
 * *fields.  Units: microseconds, Gbit/s, percent (decimals allowed).
 * Returns 0 or -EINVAL with a message in err.
 */
int fab_link_parse(const char *const *words, size_t n, struct fab_link_config *cfg,
		   uint32_t *fields, char *err, size_t errsize);

/*
 * A BTH opcode as fab_link_parse takes it after "opcode": the name
 * fab_wire.h gives it ("RC_SEND_ONLY"), without case, '-' for '_', the
 * "RC_" prefix optional, "ACK" for RC_ACKNOWLEDGE; or a number 0..255.
 * Returns 0 or -EINVAL.
 */
int fab_link_opcode_parse(const char *text, uint32_t *code);

/* The settings of cfg that differ from the default, in the words
 * fab_link_parse takes ("latency 10 loss 5 down"), or "" if none; the seed
 * is not included.  Returns buf. */
const char *fab_link_describe(const struct fab_link_config *cfg, char *buf, size_t size);

/* ---- Time --------------------------------------------------------------- */

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t fab_now_ns(void);

#endif /* FAB_H */

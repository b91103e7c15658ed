/*
 * The emulated NIC daemon object: one per emulated host.
 *
 * nic_create() sets up the TPT and the attach socket in the run directory
 * (refusing if another NIC already serves that address there), nic_run()
 * serves host contexts and management clients on one event-loop thread until
 * SIGTERM or SIGINT, and nic_destroy() tears every context down and removes
 * the socket and pid files.
 *
 * Waiting: while commands keep arriving the loop polls the command rings,
 * yielding the CPU between polls; after spin_us without work (longer, up to
 * 500 us, while its sleeps keep ending soon: nic.c) it tells every
 * context it is going to sleep (nic_sleeping) and blocks in epoll until a
 * doorbell, an attach, a hang-up or a signal.
 */
#ifndef NICSIM_NIC_H
#define NICSIM_NIC_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "log.h"
#include "nicsim_abi.h"
#include "nicsim_rundir.h" /* NIC_GROUP_MAX */

#define NIC_DEFAULT_MAX_REG (1ull << 30)
#define NIC_DEFAULT_SPIN_US 50u
/*
 * Host contexts: at most NIC_MAX_CONTEXTS, and no more than the descriptor
 * limit allows (nicsim_abi.h, docs/hardware-interface.md section 2.7), with
 * NIC_FD_SLACK descriptors kept for the NIC's own brief needs.  nic_create()
 * raises the soft RLIMIT_NOFILE to the hard limit and computes how many
 * contexts fit (nic_max_contexts()); nic_run() says it at start.
 */
#define NIC_FD_SLACK 8u

/*
 * The timers a NIC asks for in the CM REQ of each connection it makes, in
 * InfiniBand's encodings; the passive side takes them from the REQ, so both
 * sides of a connection run with the connecting NIC's (docs/transport.md,
 * "Timeouts").  Timeout codes mean 4.096 us * 2^code.
 */
struct nic_timers {
	uint8_t ack_timeout; /* local ACK timeout code, 1..31 (0, no timer, is not offered) */
	uint8_t retry_cnt;   /* transport retries, 0..7 */
	uint8_t rnr_retry;   /* RNR retries, 0..7 (7: forever) */
	uint8_t cm_timeout;  /* CM response timeout code, 0..31 */
	uint8_t cm_retries;  /* CM retransmissions of a REQ, REP or DREQ, 0..15 */
};

#define NIC_DEFAULT_CM_TIMEOUT 14u /* 4.096 us * 2^14 = 67.1 ms */
#define NIC_DEFAULT_CM_RETRIES 5u

struct nic_opts {
	uint32_t addr;         /* network byte order, in 198.18.0.0/15 */
	char dir[PATH_MAX];    /* run directory (must exist) */
	uint32_t tpt_capacity; /* entries */
	uint64_t max_reg_len;  /* bytes */
	uint32_t caps;         /* NIC_CAP_* */
	uint32_t spin_us;      /* idle polling before sleeping, at least */
	struct nic_timers timers;
	/* The RNR NAK timer code this NIC's responders send (IBTA encoding,
	 * 0..31): a responder's own, not negotiated in the REQ. */
	uint8_t rnr_timer;
	enum nic_log_level log_level;
	uint32_t hello_timeout_ms; /* NIC_HELLO_TIMEOUT_MS */
	/* NICs that share this process's descriptor limit (nic_run_group):
	 * each counts on its share of what is left.  0 or 1: alone. */
	unsigned fd_share;
	/* Also send and receive frames as UDP datagrams (fab_port_udp_open). */
	bool udp;
	/* --allow-group: processes of another user in group allow_gid (its
	 * primary or a supplementary group) may attach as hosts, never as
	 * management clients; the socket is made 0660 and group allow_gid's. */
	bool allow_group;
	uint32_t allow_gid;
};

struct nic;

/* Defaults: capacity TPT_DEFAULT_CAPACITY, 1 GiB registrations, all caps. */
void nic_opts_default(struct nic_opts *o);

/* 0 or -errno (-EADDRINUSE: another NIC serves the address in that dir). */
int nic_create(const struct nic_opts *o, struct nic **out);

/*
 * The event loop's next idle spin, in ns, after a sleep of slept ns that
 * work ended, when the spin was spin and --spin-us is base: twice as long
 * if a spin of up to max(base, 500 us) would have caught the work, half as
 * long (not under base) otherwise; 0 when base is 0.  A wake-up that found
 * no work counts as a long sleep.
 */
uint64_t nic_spin_next(uint64_t spin, uint64_t base, uint64_t slept);

/* Serve until SIGTERM/SIGINT (blocked by nic_create and read through a
 * signalfd).  Returns 0, or -errno on a fatal error of the loop itself. */
int nic_run(struct nic *nic);

/*
 * Serve n NICs (1..NIC_GROUP_MAX) from this one thread, as nic_run serves
 * one: each pass polls them all, and the thread sleeps only when none has
 * work.  A frame one of them sends another is then taken on the next pass,
 * with no wake-up of another process between them, which is most of what a
 * small message's round trip costs when processes share CPUs.  A signal
 * stops them all.
 */
int nic_run_group(struct nic **nics, unsigned n);

/* Accepts NULL. */
void nic_destroy(struct nic *nic);

/* How many host contexts this NIC can hold (at most NIC_MAX_CONTEXTS). */
unsigned nic_max_contexts(const struct nic *nic);

#endif /* NICSIM_NIC_H */

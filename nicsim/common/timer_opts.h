/*
 * The connection-timer options of a NIC, one table for every program that
 * takes or passes them: nicsimd (--ack-timeout ...), `nicsim up`, which
 * passes them on, and the scenario language's `nic` line.  The first five
 * are what a connecting NIC puts in its CM REQ; the last, the RNR NAK timer,
 * is what a receiving NIC asks senders to wait.  An ACK timeout code of 0
 * would turn the timer off (a lost packet with nothing after it would never
 * be sent again), so the range leaves it out.
 */
#ifndef NICSIM_TIMER_OPTS_H
#define NICSIM_TIMER_OPTS_H

enum nic_timer_opt {
	NIC_TOPT_ACK_TIMEOUT,
	NIC_TOPT_RETRY_COUNT,
	NIC_TOPT_RNR_RETRY,
	NIC_TOPT_CM_TIMEOUT,
	NIC_TOPT_CM_RETRIES,
	NIC_TOPT_RNR_TIMER,
	NIC_TIMER_OPTS
};

struct nic_timer_opt_spec {
	const char *name; /* spelled --name on command lines, name in scenarios */
	unsigned min, max;
	const char *what; /* what the number is, for messages */
};

extern const struct nic_timer_opt_spec nic_timer_opts[NIC_TIMER_OPTS];

#endif /* NICSIM_TIMER_OPTS_H */

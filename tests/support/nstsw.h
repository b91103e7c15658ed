/*
 * Integer socket options of the switch's stream sockets (nicsim_switch.h),
 * each call asserted to succeed, for the tests and the soak that drive
 * them.  Header only: its users link the switch library, the support
 * libraries do not.
 */
#ifndef NSTSW_H
#define NSTSW_H

#include "nicsim_switch.h"
#include "nstest.h"

static inline void nst_sw_set_int(int s, int level, int opt, int v)
{
	NST_EQ(nsw_setsockopt(s, level, opt, &v, sizeof(v)), 0);
}

/* The option's value, or -1 (the failure asserted) if it cannot be read. */
static inline int nst_sw_get_int(int s, int level, int opt)
{
	int v = -1;
	socklen_t l = sizeof(v);

	NST_EQ(nsw_getsockopt(s, level, opt, &v, &l), 0);
	return v;
}

#endif /* NSTSW_H */

/*
 * Test support that talks to a NIC through the host driver: its TPT
 * occupancy, asked through a context of the test's own (which holds no
 * entries, so it does not change what it measures).
 */
#ifndef NSTNIC_H
#define NSTNIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* TPT entries in use on the NIC listening at sock, or -1. */
int nst_tpt_in_use(const char *sock);

/*
 * Every counter of the NIC listening at sock, through its management
 * interface: 0 or a negative errno.  (struct nic_stats is in nicsim_mgmt.h.)
 */
struct nic_stats;
int nst_nic_stats(const char *sock, struct nic_stats *out);

/*
 * One counter of the NIC at sock: off is its offset in struct nic_stats,
 * NST_STAT(name) (which needs nicsim_mgmt.h).  nst_nic_stat reads it (0 if
 * the NIC does not answer); nst_wait_nic_stat waits up to timeout_ms until
 * it is at least min and returns the last value read: the way to wait for
 * something the NIC did (a NAK received, a disconnect) instead of sleeping.
 */
#define NST_STAT(name) offsetof(struct nic_stats, name)
uint64_t nst_nic_stat(const char *sock, size_t off);
uint64_t nst_wait_nic_stat(const char *sock, size_t off, uint64_t min, int timeout_ms);

/* Wait up to timeout_ms for the occupancy to be want; returns the last seen. */
int nst_wait_tpt_in_use(const char *sock, int want, int timeout_ms);

/*
 * Create the fabric of run directory dir (dir/fabric.shm) joining the NICs
 * with the given addresses (dotted quads, NULL-terminated list), as
 * `nicsim up` does, before the NICs start.  0 or a negative errno.
 */
int nst_make_fabric(const char *dir, const char *const *addrs);

/* Take the fabric link of run directory dir from the NIC at address from to
 * the one at to (network byte order) down, or bring it up; the link's other
 * settings go back to their defaults.  0 or a negative errno. */
int nst_link_down(const char *dir, uint32_t from, uint32_t to, bool down);

#endif /* NSTNIC_H */

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
#include <sys/types.h>

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

/*
 * NICs a suite shares between its tests, and the state each test must find
 * them in.  A failed test can leave a NIC holding what it made (contexts,
 * QPs, TPT entries); the next test must not fail for it.
 */
struct nst_nic_state {
	long long tpt_in_use, qps, contexts;
};

struct nst_nic {
	const char *addr;         /* dotted quad */
	const char *const *extra; /* more nicsimd arguments (NULL-terminated), or NULL */
	/* Where it runs: a network namespace (nstnet.h) and a run directory
	 * of its own; NULL: this namespace, the directory the suite names. */
	const char *netns;
	const char *dir;
	pid_t pid; /* 0 or less: not running (a test may stop one) */
	char sock[300];
	struct nst_nic_state base; /* as it was when started */
};

/* The state of the NIC at sock: 0 or a negative errno. */
int nst_nic_state(const char *sock, struct nst_nic_state *st);

/* Start nics[0..n) in dir (whose fabric exists) and record each one's
 * state.  0, or the first error (the NICs started are left running). */
int nst_nics_start(const char *dir, struct nst_nic *nics, size_t n, int timeout_ms);

/*
 * Before a test: wait up to timeout_ms until every running NIC of nics is
 * back at its recorded state; one that is not (or has died) is restarted,
 * and stderr says what it held.  0 if every NIC is now as recorded, else a
 * negative errno.  Contexts the test program still holds on a restarted NIC
 * are dead: a suite that keeps some (the provider does) closes them first.
 */
int nst_nics_ready(const char *dir, struct nst_nic *nics, size_t n, int timeout_ms);

/* Whether every running NIC of nics is at its recorded state within
 * timeout_ms; says on stderr which is not, naming who. */
bool nst_nics_settled(const struct nst_nic *nics, size_t n, int timeout_ms, const char *who);

/*
 * What process pid holds of memfds named name (memfd_create's name): open
 * descriptors (*fds) and mappings (*maps, lines of /proc/pid/maps).  0 or
 * a negative errno.  How a test sees that a NIC keeps no shared buffer.
 */
int nst_memfd_refs(pid_t pid, const char *name, int *fds, int *maps);

/* Wait up to timeout_ms for the occupancy to be want; returns the last seen. */
int nst_wait_tpt_in_use(const char *sock, int want, int timeout_ms);

/*
 * Create the fabric of run directory dir (dir/fabric.shm) joining the NICs
 * with the given addresses (dotted quads, NULL-terminated list), as
 * `nicsim up` does, before the NICs start.  0 or a negative errno.
 */
int nst_make_fabric(const char *dir, const char *const *addrs);

/* Fault rules on both directions between NICs a and b of dir's fabric,
 * in parts per billion, and the link down or up (docs/fabric.md); all 0
 * and false: a plain link again.  0 or a negative errno. */
int nst_link_faults(const char *dir, uint32_t a, uint32_t b, uint32_t loss_ppb, uint32_t dup_ppb,
		    uint32_t reorder_ppb, uint32_t corrupt_ppb, bool down);

/* Take the fabric link of run directory dir from the NIC at address from to
 * the one at to (network byte order) down, or bring it up; the link's other
 * settings go back to their defaults.  0 or a negative errno. */
int nst_link_down(const char *dir, uint32_t from, uint32_t to, bool down);

/*
 * Instead of one fabric in dir: each of nics[0..n) (whose addresses must be
 * 198.18.0.1 .. 198.18.0.n) in a network namespace of its own, hosts of
 * one Ethernet segment made in *net (nstnet.h), each with a run directory
 * and fabric of its own, dir/host-ADDR, and "--udp" added to its extra
 * arguments: every frame between them is a UDP datagram.  dir gets a link
 * to each NIC's socket, all the provider needs to find it.  unreachable
 * (CIDR, may be NULL) gets an unreachable route in every namespace, as the
 * fabric says of an address with no port.  Then nst_nics_start(dir, ...).
 * 0 or a negative errno; nst_net_down(net) at the end (the exit handler
 * and the guard remove the network too).
 */
struct nst_net;
int nst_nics_udp(const char *dir, struct nst_nic *nics, size_t n, struct nst_net *net,
		 const char *unreachable);

#endif /* NSTNIC_H */

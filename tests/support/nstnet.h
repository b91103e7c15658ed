/*
 * Test networks: hosts in network namespaces of the test's own, joined by
 * veth pairs to a bridge in one more namespace, as machines on one
 * Ethernet segment.  Host i (1..n) has address 198.18.0.i/15 on its eth0.
 *
 * Names are randomised ("nst-<pid>-<random>-h1", "...-br"), so that tests
 * running at once never meet.  They are removed by nst_net_down, at exit,
 * and, if the test is killed, by the suite's guard process (nstest.h),
 * which learns of each namespace as it is made.  A later test also
 * removes any it finds whose test process is gone.
 *
 * Needs root and iproute2's ip; nst_net_available says why not.
 */
#ifndef NSTNET_H
#define NSTNET_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define NST_NET_MAX 8
#define NST_NET_NAME 48

struct nst_net {
	unsigned n;                               /* hosts */
	char host[NST_NET_MAX + 1][NST_NET_NAME]; /* host[i]: namespace of 198.18.0.i */
	char bridge[NST_NET_NAME];
	bool up;
};

/* Whether this machine can make test networks: true, or false and why. */
bool nst_net_available(char *why, size_t size);

/*
 * Make a network of n hosts (1..NST_NET_MAX) whose links have the given
 * MTU (0: 1500).  0, or a negative errno with what failed on stderr (what
 * was made is removed again).
 */
int nst_net_up(struct nst_net *net, unsigned n, unsigned mtu);

/* Remove the network's namespaces (and with them every interface).
 * Processes still inside keep theirs alive until they end. */
void nst_net_down(struct nst_net *net);

/* Move the calling process (single-threaded, just forked) into namespace
 * ns: 0 or a negative errno. */
int nst_net_enter(const char *ns);

/* Run `ip -n ns ARGS...` (argv NULL-terminated, after "ip -n ns"): its exit
 * status, or a negative errno; what it printed goes to stderr when it fails. */
int nst_net_ip(const char *ns, const char *const *argv);

/*
 * Fork a process in namespace ns that runs argv[0] with argv, its stdout
 * and stderr to log (appended; NULL: inherited), SIGKILL'ed when this
 * thread ends.  Its pid, or a negative errno.
 */
pid_t nst_net_spawn(const char *ns, const char *const *argv, const char *log);

#endif /* NSTNET_H */

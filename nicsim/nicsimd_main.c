/* nicsimd: one emulated NIC.  Parses options and runs struct nic. */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/capability.h>

#include "fab_addr.h"
#include "fab_cm.h"
#include "fab_wire.h"
#include "nic.h"
#include "opts.h"
#include "timer_opts.h"
#include "nicsim_rundir.h"
#include "rc.h"
#include "tpt.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: nicsimd [--addr A]... [--dir D] [options]\n"
		"\n"
		"Runs one emulated SAN NIC (or several: --addr more than once). Host\n"
		"processes attach through the socket D/nic-A.sock; the pid is written to\n"
		"D/nic-A.pid. Stops on SIGTERM or SIGINT.\n"
		"\n"
		"  --addr A           NIC address in 198.18.0.0/15 (default 198.18.0.1). Given\n"
		"                     more than once (up to %u), one thread serves all those\n"
		"                     NICs: a small message between two of them then needs no\n"
		"                     other process to wake, which halves its round trip on a\n"
		"                     busy machine, but their bulk transfers share one CPU,\n"
		"                     and a signal or a crash ends them all\n"
		"  --dir D            run directory (default $NICSIM_DIR, else\n"
		"                     $XDG_RUNTIME_DIR/nicsim if valid, else /tmp/nicsim-UID)\n"
		"  --tpt-capacity N   TPT entries, 1..%u (default %u)\n"
		"  --max-reg SIZE     largest registration, e.g. 4096, 64K, 1G (default 1G)\n"
		"  --no-mw            no memory windows: remote access cannot be revoked alone\n"
		"  --no-rdma-read     the NIC does not serve RDMA READ\n"
		"  --spin-us N        poll at least this long after the last work before\n"
		"                     sleeping (default %u); up to 500 us while sleeps keep\n"
		"                     ending soon (0: never poll)\n"
		"  --log-level L      error, warn, info (default) or debug\n"
		"  --udp              also reach NICs beyond this fabric: RoCEv2 datagrams on\n"
		"                     UDP port 4791 of the NIC's address, which must be on an\n"
		"                     interface here (ip addr add A/15 dev IF); needs\n"
		"                     CAP_NET_RAW (root). Frames to NICs of this fabric keep\n"
		"                     shared memory (docs/fabric.md, \"Beyond this machine\")\n"
		"  --allow-group G    also let processes of other users attach as hosts if\n"
		"                     group G (a name or a gid) is their primary or a\n"
		"                     supplementary group; management (nicsim show, stats)\n"
		"                     stays this user's and root's. The run directory\n"
		"                     becomes group G's with mode 0750 and the sockets 0660.\n"
		"                     The NIC reaches another user's memory only with\n"
		"                     CAP_SYS_PTRACE, so it must run as root (or hold that\n"
		"                     capability): nicsimd refuses the option otherwise.\n"
		"                     Without it only this user's and root's processes may\n"
		"                     attach (docs/security.md)\n"
		"\n"
		"Timers of the connections this NIC makes, in InfiniBand's encodings; they go\n"
		"in the CM request and the accepting NIC uses them too. A timeout code C means\n"
		"4.096 us x 2^C; each retry in a row waits twice as long as the one before, up\n"
		"to 16 times the first (docs/transport.md, \"Timeouts\"):\n"
		"  --ack-timeout C    local ACK timeout code, 1..31 (default %u: %.1f ms)\n"
		"  --retry-count N    retransmission timeouts before the request fails with\n"
		"                     RETRY_EXC_ERR, 0..7 (default %u: %.1f s without an answer)\n"
		"  --rnr-retry N      RNR NAKs before RNR_RETRY_EXC_ERR, 0..7; 7 retries\n"
		"                     forever (default %u)\n"
		"  --cm-timeout C     CM response timeout code, 0..31 (default %u: %.1f ms)\n"
		"  --cm-retries N     CM REQ, REP and DREQ retransmissions, 0..15 (default %u:\n"
		"                     a CONNECT to a dead NIC fails after %.2f s)\n"
		"\n"
		"This NIC's own, as a receiver:\n"
		"  --rnr-timer C      RNR NAK timer code, 0..31: how long a sender waits after\n"
		"                     an RNR NAK (no receive posted) before it sends again\n"
		"                     (IBTA table: 1 = 0.01 ms, 12 = 0.64 ms, 31 = 491.52 ms,\n"
		"                     0 = 655.36 ms; default %u: %.2f ms)\n"
		"\n"
		"  --help             this text\n"
		"  --version          version\n",
		NIC_GROUP_MAX, NIC_TPT_MAX_CAPACITY, TPT_DEFAULT_CAPACITY, NIC_DEFAULT_SPIN_US,
		RC_ACK_TIMEOUT_DEFAULT, (double)rc_ack_timeout_ns(RC_ACK_TIMEOUT_DEFAULT) / 1e6,
		RC_RETRY_CNT_DEFAULT,
		(double)rc_retry_budget_ns(rc_ack_timeout_ns(RC_ACK_TIMEOUT_DEFAULT),
					   RC_RETRY_CNT_DEFAULT) /
		    1e9,
		RC_RNR_RETRY_DEFAULT, NIC_DEFAULT_CM_TIMEOUT,
		(double)fab_ib_timeout_ns(NIC_DEFAULT_CM_TIMEOUT) / 1e6, NIC_DEFAULT_CM_RETRIES,
		(double)rc_retry_budget_ns(fab_ib_timeout_ns(NIC_DEFAULT_CM_TIMEOUT),
					   NIC_DEFAULT_CM_RETRIES) /
		    1e9,
		RC_RNR_TIMER_DEFAULT, (double)fab_rnr_timer_us(RC_RNR_TIMER_DEFAULT) / 1e3);
}

/*
 * One timer option: a whole number in lo..hi into *out, or a message and
 * false.  what says what the number is, for the message.
 */
static bool timer_opt(enum nic_timer_opt which, const char *text, uint8_t *out)
{
	const struct nic_timer_opt_spec *t = &nic_timer_opts[which];
	uint64_t v;

	if (opts_parse_u64(text, &v) < 0 || v < t->min || v > t->max) {
		fprintf(stderr, "nicsimd: --%s %s: want %s, %u..%u\n", t->name, text, t->what,
			t->min, t->max);
		return false;
	}
	*out = (uint8_t)v;
	return true;
}

/* Whether this process holds capability cap in its effective set. */
static bool has_cap(unsigned cap)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

	memset(data, 0, sizeof(data));
	if (syscall(SYS_capget, &hdr, data) < 0)
		return false;
	return (data[CAP_TO_INDEX(cap)].effective & CAP_TO_MASK(cap)) != 0;
}

/* Yama's ptrace_scope, or -1 without Yama. */
static int yama_scope(void)
{
	FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	int v = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%d", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/*
 * --allow-group is of use only if this NIC can reach the memory of another
 * user's process: process_vm_readv/writev need ptrace access to it, which
 * the kernel grants across users only with CAP_SYS_PTRACE.  Each transfer
 * then runs with the host's own ids (struct dma_as: CAP_SETUID and
 * CAP_SETGID), which Yama's ptrace_scope 2 and 3 refuse.  Hosts of the group
 * would attach and then see every registration refused (NO_DMA); refusing
 * to start says why at once.
 */
static bool group_reachable(const char *group)
{
	int scope = yama_scope();

	if (!has_cap(CAP_SYS_PTRACE)) {
		fprintf(stderr,
			"nicsimd: --allow-group %s: this nicsimd (uid %u) could let other users' "
			"hosts attach but never reach their memory: a NIC reads and writes a "
			"host's memory with process_vm_readv/writev, which the kernel allows into "
			"another user's process only with CAP_SYS_PTRACE, and this process lacks "
			"it. Start the NIC as root (or give it CAP_SYS_PTRACE), or let each user "
			"run a NIC of their own\n",
			group, (unsigned)geteuid());
		return false;
	}
	/* Each transfer runs with the host's own ids (struct dma_as), which
	 * this process must be able to take and give back. */
	if (!has_cap(CAP_SETUID) || !has_cap(CAP_SETGID)) {
		fprintf(stderr,
			"nicsimd: --allow-group %s: this nicsimd (uid %u) holds CAP_SYS_PTRACE "
			"but not CAP_SETUID and CAP_SETGID: it reaches another user's memory "
			"only with that user's rights, so that a host that executes a "
			"set-user-ID program never hands that program's memory over, and "
			"needs both to take them. Start the NIC as root, or let each user run "
			"a NIC of their own\n",
			group, (unsigned)geteuid());
		return false;
	}
	if (scope >= 2) {
		fprintf(stderr,
			"nicsimd: --allow-group %s: Yama's ptrace_scope is %d "
			"(/proc/sys/kernel/yama/ptrace_scope): only a process with "
			"CAP_SYS_PTRACE may reach another's memory, and a NIC shared with a "
			"group reaches each host's with that host's user's rights alone, so no "
			"host of another user could register memory here. Lower it (sysctl "
			"kernel.yama.ptrace_scope=1), or let each user run a NIC of their own\n",
			group, scope);
		return false;
	}
	return true;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"addr", required_argument, NULL, 'a'},
	    {"dir", required_argument, NULL, 'd'},
	    {"tpt-capacity", required_argument, NULL, 't'},
	    {"max-reg", required_argument, NULL, 'm'},
	    {"no-mw", no_argument, NULL, 'W'},
	    {"no-rdma-read", no_argument, NULL, 'R'},
	    {"spin-us", required_argument, NULL, 's'},
	    {"log-level", required_argument, NULL, 'l'},
	    {"ack-timeout", required_argument, NULL, 'A'},
	    {"retry-count", required_argument, NULL, 'C'},
	    {"rnr-retry", required_argument, NULL, 'N'},
	    {"cm-timeout", required_argument, NULL, 'T'},
	    {"cm-retries", required_argument, NULL, 'M'},
	    {"rnr-timer", required_argument, NULL, 'r'},
	    {"udp", no_argument, NULL, 'U'},
	    {"allow-group", required_argument, NULL, 'G'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	char why[NIC_RUN_WHY_MAX];
	const char *dir_opt = NULL, *group_opt = NULL;
	struct nic_opts o;
	struct nic *nics[NIC_GROUP_MAX];
	uint32_t addrs[NIC_GROUP_MAX];
	unsigned naddrs = 0, created = 0;
	uint64_t v;
	int c, err;

	nic_opts_default(&o);
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'a':
			if (naddrs == NIC_GROUP_MAX) {
				fprintf(stderr,
					"nicsimd: --addr %s: at most %u NICs in one process\n",
					optarg, NIC_GROUP_MAX);
				return 2;
			}
			err = fab_addr_parse(optarg, &addrs[naddrs]);
			for (unsigned i = 0; err == 0 && i < naddrs; i++) {
				if (addrs[i] == addrs[naddrs]) {
					fprintf(stderr, "nicsimd: --addr %s given twice\n", optarg);
					return 2;
				}
			}
			naddrs += err == 0;
			if (err < 0) {
				fprintf(stderr, "nicsimd: --addr %s: %s\n", optarg,
					err == -EADDRNOTAVAIL
					    ? "not a NIC address: NICs take 198.18.0.1 to "
					      "198.19.255.254 (198.18.0.0/15 without its network "
					      "and broadcast addresses)"
					    : "not an IPv4 address");
				return 2;
			}
			break;
		case 'd': dir_opt = optarg; break;
		case 't':
			if (opts_parse_u64(optarg, &v) < 0 || v < 1 || v > NIC_TPT_MAX_CAPACITY) {
				fprintf(stderr, "nicsimd: --tpt-capacity %s: want 1..%u\n", optarg,
					NIC_TPT_MAX_CAPACITY);
				return 2;
			}
			o.tpt_capacity = (uint32_t)v;
			break;
		case 'm':
			if (opts_parse_size(optarg, &v) < 0 || v == 0) {
				fprintf(
				    stderr,
				    "nicsimd: --max-reg %s: want a size such as 65536, 64K, 1G\n",
				    optarg);
				return 2;
			}
			o.max_reg_len = v;
			break;
		case 'W': o.caps &= ~NIC_CAP_MW; break;
		case 'R': o.caps &= ~NIC_CAP_RDMA_READ; break;
		case 's':
			if (opts_parse_u64(optarg, &v) < 0 || v > 1000000) {
				fprintf(stderr, "nicsimd: --spin-us %s: want 0..1000000\n", optarg);
				return 2;
			}
			o.spin_us = (uint32_t)v;
			break;
		case 'l':
			if (nic_log_level_parse(optarg, &o.log_level) < 0) {
				fprintf(
				    stderr,
				    "nicsimd: --log-level %s: want error, warn, info or debug\n",
				    optarg);
				return 2;
			}
			break;
		/* A local ACK timeout of 0 turns InfiniBand's timer off: a lost
		 * packet with nothing after it would never be sent again and a
		 * dead peer never noticed, so the option does not offer it. */
		case 'A':
			if (!timer_opt(NIC_TOPT_ACK_TIMEOUT, optarg, &o.timers.ack_timeout))
				return 2;
			break;
		case 'C':
			if (!timer_opt(NIC_TOPT_RETRY_COUNT, optarg, &o.timers.retry_cnt))
				return 2;
			break;
		case 'N':
			if (!timer_opt(NIC_TOPT_RNR_RETRY, optarg, &o.timers.rnr_retry))
				return 2;
			break;
		case 'T':
			if (!timer_opt(NIC_TOPT_CM_TIMEOUT, optarg, &o.timers.cm_timeout))
				return 2;
			break;
		case 'M':
			if (!timer_opt(NIC_TOPT_CM_RETRIES, optarg, &o.timers.cm_retries))
				return 2;
			break;
		case 'r':
			if (!timer_opt(NIC_TOPT_RNR_TIMER, optarg, &o.rnr_timer))
				return 2;
			break;
		case 'U': o.udp = true; break;
		case 'G':
			if (nic_group_parse(optarg, &o.allow_gid, why, sizeof(why)) < 0) {
				fprintf(stderr, "nicsimd: --allow-group: %s\n", why);
				return 2;
			}
			o.allow_group = true;
			group_opt = optarg;
			break;
		case 'h': usage(stdout); return 0;
		case 'V':
			printf("nicsimd %s (ABI %u)\n", NICSIM_VERSION, NIC_ABI_VERSION);
			return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "nicsimd: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (o.allow_group && !group_reachable(group_opt))
		return 1;
	err = nic_run_dir(o.dir, sizeof(o.dir), dir_opt);
	if (err == 0)
		err = nic_run_dir_make(o.dir);
	if (err < 0) {
		fprintf(stderr, "nicsimd: cannot create run directory %s: %s%s\n",
			o.dir[0] ? o.dir : "?", strerror(-err),
			err == -ENOENT ? " (only the run directory itself is created, not its "
					 "parents): create the parent first or choose another "
					 "with --dir"
				       : ": choose another with --dir");
		return 1;
	}
	/* Never listen, log or map the fabric in a directory another user
	 * controls (nicsim_rundir.h). */
	if (nic_run_dir_check(o.dir, why, sizeof(why)) < 0) {
		fprintf(stderr, "nicsimd: %s\n", why);
		return 1;
	}
	if (o.allow_group && nic_run_dir_share(o.dir, o.allow_gid, why, sizeof(why)) < 0) {
		fprintf(stderr, "nicsimd: --allow-group %s: %s\n", group_opt, why);
		return 1;
	}
	if (naddrs == 0)
		addrs[naddrs++] = o.addr;
	o.fd_share = naddrs;
	for (err = 0; created < naddrs && err == 0; created += err == 0) {
		char a[FAB_ADDR_STRLEN];

		o.addr = addrs[created];
		err = nic_create(&o, &nics[created]);
		if (err < 0)
			fprintf(stderr, "nicsimd: cannot start %s: %s\n",
				fab_addr_format(o.addr, a, sizeof(a)), strerror(-err));
	}
	if (err == 0)
		err = nic_run_group(nics, created);
	while (created)
		nic_destroy(nics[--created]);
	return err < 0 ? 1 : 0;
}

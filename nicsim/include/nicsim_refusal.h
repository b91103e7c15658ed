/*
 * Registrations refused for a limit of the system, in words a person can act
 * on: which limit, its value, and how to raise it.
 *
 * The provider fills the refusal fields of its registration-cache counters
 * (struct nic_host_cache_stats, nicsim_abi.h) when a registration fails for
 * such a limit, and prints the sentence below with NICSIM_DEBUG=1; `nicsim
 * show hosts` prints the same sentence from the copy the NIC reports.  The
 * fields come from the host's memory: nic_refusal_text() only formats
 * numbers and never trusts them to index anything.
 *
 *   kind                 limit                      in_use          needed
 *   NIC_REFUSAL_MEMLOCK  RLIMIT_MEMLOCK, bytes      bytes locked    bytes more to lock
 *   NIC_REFUSAL_PTRACE   Yama's ptrace_scope, or    NIC_REFUSAL_F_* 0
 *                        UINT64_MAX without Yama
 *
 * UINT64_MAX as a limit means unlimited (or, for ptrace, no Yama).
 */
#ifndef NICSIM_REFUSAL_H
#define NICSIM_REFUSAL_H

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

enum nic_refusal {
	NIC_REFUSAL_NONE = 0,
	NIC_REFUSAL_MEMLOCK = 1, /* mlock refused: RLIMIT_MEMLOCK, or memory */
	NIC_REFUSAL_PTRACE = 2,  /* the NIC may not reach the host's memory */
};

/* NIC_REFUSAL_PTRACE's in_use: what the host knew of itself. */
#define NIC_REFUSAL_F_NOT_DUMPABLE 0x1u /* prctl(PR_GET_DUMPABLE) was not 1 */
#define NIC_REFUSAL_F_NO_TRACER 0x2u    /* the NIC's pid was unknown: no PR_SET_PTRACER */

/* n bytes as "64 KiB", "3 MiB", "5 GiB" when exact, else "4097 bytes". */
static inline const char *nic_refusal_size(uint64_t n, char buf[32])
{
	static const char *const unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
	unsigned u = 0;

	while (u < 4 && n >= 1024 && n % 1024 == 0) {
		n /= 1024;
		u++;
	}
	snprintf(buf, 32, "%" PRIu64 " %s", n, unit[u]);
	return buf;
}

static inline void nic_refusal_memlock(uint64_t limit, uint64_t in_use, uint64_t needed,
				       uint32_t err, char *buf, size_t size)
{
	static const char raise[] =
	    "raise it with `ulimit -l unlimited` (up to the hard limit, `ulimit -Hl`; beyond "
	    "it, as root: memlock in /etc/security/limits.conf, then log in again, or "
	    "LimitMEMLOCK= for a systemd service)";
	char l[32], u[32], n[32];

	if (limit == UINT64_MAX || (err == ENOMEM && in_use <= limit && needed <= limit - in_use))
		snprintf(buf, size,
			 "the kernel could not lock %s more with %s locked (RLIMIT_MEMLOCK is %s, "
			 "not the cause): memory is short; free some, or raise the memory "
			 "cgroup's memory.max",
			 nic_refusal_size(needed, n), nic_refusal_size(in_use, u),
			 limit == UINT64_MAX ? "unlimited" : nic_refusal_size(limit, l));
	else if (limit == 0)
		snprintf(buf, size,
			 "RLIMIT_MEMLOCK is 0 (ulimit -l) and the process lacks CAP_IPC_LOCK; this "
			 "registration needs %s locked: %s",
			 nic_refusal_size(needed, n), raise);
	else
		snprintf(buf, size,
			 "RLIMIT_MEMLOCK is %s (ulimit -l: %" PRIu64
			 "); the process has %s locked and this registration needs %s more: %s",
			 nic_refusal_size(limit, l), limit / 1024, nic_refusal_size(in_use, u),
			 nic_refusal_size(needed, n), raise);
}

static inline void nic_refusal_ptrace(uint64_t scope, uint64_t flags, char *buf, size_t size)
{
	const char *what;

	/* The kernel checks dumpability before Yama: it decides first. */
	if (flags & NIC_REFUSAL_F_NOT_DUMPABLE) {
		snprintf(
		    buf, size,
		    "this process is not dumpable (prctl PR_SET_DUMPABLE 0, setuid or file "
		    "capabilities), so only a NIC with CAP_SYS_PTRACE may read its memory: "
		    "call prctl(PR_SET_DUMPABLE, 1), or `setcap cap_sys_ptrace+ep $(command -v "
		    "nicsimd)`%s",
		    scope >= 1 && scope != UINT64_MAX
			? " (Yama's ptrace_scope, /proc/sys/kernel/yama/ptrace_scope, is above 0 "
			  "as well)"
			: "");
		return;
	}
	if (scope == 1 && (flags & NIC_REFUSAL_F_NO_TRACER)) {
		snprintf(buf, size,
			 "Yama's ptrace_scope is 1 (/proc/sys/kernel/yama/ptrace_scope) and "
			 "nicsimd runs in another pid namespace, so this process could not name it "
			 "its tracer (PR_SET_PTRACER): run nicsimd in this pid namespace, or lower "
			 "it with `sysctl kernel.yama.ptrace_scope=0`");
		return;
	}
	switch (scope) {
	case 1:
		what = "Yama's ptrace_scope is 1 (/proc/sys/kernel/yama/ptrace_scope) and the NIC "
		       "is not this process's declared tracer (PR_SET_PTRACER failed): lower it "
		       "with `sysctl kernel.yama.ptrace_scope=0`";
		break;
	case 2:
		what = "Yama's ptrace_scope is 2 (/proc/sys/kernel/yama/ptrace_scope): only a "
		       "NIC with CAP_SYS_PTRACE may reach this process's memory: `setcap "
		       "cap_sys_ptrace+ep $(command -v nicsimd)`, or lower it with `sysctl "
		       "kernel.yama.ptrace_scope=1`";
		break;
	case 3:
		what = "Yama's ptrace_scope is 3 (/proc/sys/kernel/yama/ptrace_scope): no process "
		       "may reach another's memory until reboot: set kernel.yama.ptrace_scope=1 "
		       "in /etc/sysctl.d and reboot";
		break;
	default:
		what = "the kernel refused the NIC access to this process's memory (EPERM from "
		       "process_vm_readv; no Yama ptrace_scope above 0): the process is not "
		       "dumpable (prctl PR_SET_DUMPABLE, setuid or file capabilities), runs as "
		       "another user or holds capabilities the NIC lacks, and the NIC lacks "
		       "CAP_SYS_PTRACE; or a security module refuses ptrace";
		break;
	}
	snprintf(buf, size, "%s", what);
}

/*
 * The sentence for one refusal into buf (always NUL-terminated): which
 * limit, its value, and how to raise it.  Returns buf.
 */
static inline const char *nic_refusal_text(uint32_t kind, uint32_t err, uint64_t limit,
					   uint64_t in_use, uint64_t needed, char *buf, size_t size)
{
	if (!size)
		return buf;
	switch (kind) {
	case NIC_REFUSAL_MEMLOCK: nic_refusal_memlock(limit, in_use, needed, err, buf, size); break;
	case NIC_REFUSAL_PTRACE: nic_refusal_ptrace(limit, in_use, buf, size); break;
	case NIC_REFUSAL_NONE: snprintf(buf, size, "none"); break;
	default: snprintf(buf, size, "refusal of kind %u, unknown to this version", kind); break;
	}
	return buf;
}

#endif /* NICSIM_REFUSAL_H */

/*
 * The sentences of registrations refused for a limit of the system
 * (nicsim_refusal.h): each names the limit, its value, and how to raise it,
 * whatever numbers a host wrote.  Integration tests provoke RLIMIT_MEMLOCK
 * and a ptrace refusal for real (test_spi_errors); Yama's scopes are checked
 * here only, by their sentences: setting kernel.yama.ptrace_scope would
 * change the whole machine, and many machines that run the tests have no
 * Yama (/proc/sys/kernel/yama is absent).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "nicsim_refusal.h"
#include "nstest.h"

#define HAS(out, text)                                                                          \
	NST_CHECK_(strstr((out), (text)) != NULL, CU_FALSE, "\"%.200s\" has \"%.200s\"", (out), \
		   (text))

static const char *text(uint32_t kind, uint32_t err, uint64_t limit, uint64_t in_use,
			uint64_t needed)
{
	static char buf[512];

	return nic_refusal_text(kind, err, limit, in_use, needed, buf, sizeof(buf));
}

static void test_sizes(void)
{
	char b[32];

	NST_TRUE(!strcmp(nic_refusal_size(0, b), "0 bytes"));
	NST_TRUE(!strcmp(nic_refusal_size(4097, b), "4097 bytes"));
	NST_TRUE(!strcmp(nic_refusal_size(64 << 10, b), "64 KiB"));
	NST_TRUE(!strcmp(nic_refusal_size(3u << 20, b), "3 MiB"));
	NST_TRUE(!strcmp(nic_refusal_size((uint64_t)5 << 30, b), "5 GiB"));
	NST_TRUE(!strcmp(nic_refusal_size((uint64_t)1 << 50, b), "1024 TiB"));
	NST_TRUE(!strcmp(nic_refusal_size(UINT64_MAX, b), "18446744073709551615 bytes"));
}

static void test_memlock(void)
{
	const char *t = text(NIC_REFUSAL_MEMLOCK, ENOMEM, 8u << 20, 6u << 20, 4u << 20);

	HAS(t, "RLIMIT_MEMLOCK is 8 MiB (ulimit -l: 8192); the process has 6 MiB locked and this "
	       "registration needs 4 MiB more: raise it with `ulimit -l unlimited` (up to the "
	       "hard limit, `ulimit -Hl`; beyond it, as root: memlock in "
	       "/etc/security/limits.conf, then log in again, or LimitMEMLOCK= for a systemd "
	       "service)");
	t = text(NIC_REFUSAL_MEMLOCK, EPERM, 0, 0, 4096);
	HAS(t, "RLIMIT_MEMLOCK is 0 (ulimit -l) and the process lacks CAP_IPC_LOCK; this "
	       "registration needs 4 KiB locked: raise it with `ulimit -l unlimited`");
	/* Within the limit (or none): the limit is not the cause, memory is. */
	t = text(NIC_REFUSAL_MEMLOCK, ENOMEM, UINT64_MAX, 1u << 20, 1u << 20);
	HAS(t, "the kernel could not lock 1 MiB more with 1 MiB locked (RLIMIT_MEMLOCK is "
	       "unlimited, not the cause): memory is short");
	t = text(NIC_REFUSAL_MEMLOCK, ENOMEM, 8u << 20, 1u << 20, 1u << 20);
	HAS(t, "(RLIMIT_MEMLOCK is 8 MiB, not the cause)");
	/* Numbers that overflow any sum stay numbers. */
	t = text(NIC_REFUSAL_MEMLOCK, ENOMEM, UINT64_MAX - 1, UINT64_MAX, UINT64_MAX);
	HAS(t, "RLIMIT_MEMLOCK is 18446744073709551614 bytes");
}

static void test_yama_scopes(void)
{
	HAS(text(NIC_REFUSAL_PTRACE, EPERM, 1, 0, 0),
	    "Yama's ptrace_scope is 1 (/proc/sys/kernel/yama/ptrace_scope) and the NIC is not "
	    "this process's declared tracer (PR_SET_PTRACER failed): lower it with `sysctl "
	    "kernel.yama.ptrace_scope=0`");
	HAS(text(NIC_REFUSAL_PTRACE, EPERM, 1, NIC_REFUSAL_F_NO_TRACER, 0),
	    "Yama's ptrace_scope is 1 (/proc/sys/kernel/yama/ptrace_scope) and nicsimd runs in "
	    "another pid namespace, so this process could not name it its tracer "
	    "(PR_SET_PTRACER): run nicsimd in this pid namespace, or lower it with `sysctl "
	    "kernel.yama.ptrace_scope=0`");
	HAS(text(NIC_REFUSAL_PTRACE, EPERM, 2, 0, 0),
	    "Yama's ptrace_scope is 2 (/proc/sys/kernel/yama/ptrace_scope): only a NIC with "
	    "CAP_SYS_PTRACE may reach this process's memory: `setcap cap_sys_ptrace+ep "
	    "$(command -v nicsimd)`, or lower it with `sysctl kernel.yama.ptrace_scope=1`");
	HAS(text(NIC_REFUSAL_PTRACE, EPERM, 3, 0, 0),
	    "Yama's ptrace_scope is 3 (/proc/sys/kernel/yama/ptrace_scope): no process may reach "
	    "another's memory until reboot: set kernel.yama.ptrace_scope=1 in /etc/sysctl.d and "
	    "reboot");
	/* No Yama, or scope 0: the other rules of the kernel. */
	HAS(text(NIC_REFUSAL_PTRACE, EPERM, UINT64_MAX, 0, 0),
	    "(EPERM from process_vm_readv; no Yama ptrace_scope above 0)");
	HAS(text(NIC_REFUSAL_PTRACE, EPERM, 0, 0, 0), "no Yama ptrace_scope above 0");
	/* Not dumpable decides first, and Yama is named beside it. */
	HAS(text(NIC_REFUSAL_PTRACE, EPERM, UINT64_MAX, NIC_REFUSAL_F_NOT_DUMPABLE, 0),
	    "this process is not dumpable (prctl PR_SET_DUMPABLE 0, setuid or file capabilities), "
	    "so only a NIC with CAP_SYS_PTRACE may read its memory: call prctl(PR_SET_DUMPABLE, "
	    "1), or `setcap cap_sys_ptrace+ep $(command -v nicsimd)`");
	HAS(text(NIC_REFUSAL_PTRACE, EPERM, 2, NIC_REFUSAL_F_NOT_DUMPABLE, 0),
	    "(Yama's ptrace_scope, /proc/sys/kernel/yama/ptrace_scope, is above 0 as well)");
	NST_TRUE(strstr(text(NIC_REFUSAL_PTRACE, EPERM, UINT64_MAX, NIC_REFUSAL_F_NOT_DUMPABLE, 0),
			"as well") == NULL);
}

static void test_hostile_values(void)
{
	char small[8];
	/* Not a constant, so that the compiler does not warn of the
	 * truncation this checks. */
	volatile size_t small_size = sizeof(small);

	HAS(text(NIC_REFUSAL_NONE, 0, 0, 0, 0), "none");
	HAS(text(99, 0, 0, 0, 0), "refusal of kind 99, unknown to this version");
	HAS(text(NIC_REFUSAL_PTRACE, EPERM, 12345, UINT64_MAX & ~(uint64_t)1, 0),
	    "no Yama ptrace_scope above 0");
	/* Truncated, never overrun, always terminated. */
	memset(small, 'x', sizeof(small));
	nic_refusal_text(NIC_REFUSAL_MEMLOCK, ENOMEM, 1024, 0, 4096, small, small_size);
	NST_EQ(small[sizeof(small) - 1], '\0');
	NST_TRUE(!strcmp(small, "RLIMIT_"));
	small[0] = 'x';
	nic_refusal_text(NIC_REFUSAL_MEMLOCK, ENOMEM, 1024, 0, 4096, small, 0);
	NST_EQ(small[0], 'x');
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"sizes", test_sizes},
	    {"memlock", test_memlock},
	    {"yama_scopes", test_yama_scopes},
	    {"hostile_values", test_hostile_values},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "refusal", tests, NULL, NULL);
}

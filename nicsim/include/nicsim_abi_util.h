/*
 * Small helpers over nicsim_abi.h that the NIC, the CLI and any host driver
 * share: status names and the socket naming of a run directory.
 * Header-only so that a driver needs no nicsim library to use them.
 */
#ifndef NICSIM_ABI_UTIL_H
#define NICSIM_ABI_UTIL_H

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <sys/un.h>

#include "nicsim_abi.h"

static inline const char *nic_status_str(unsigned status)
{
	switch (status) {
	case NIC_STATUS_OK: return "ok";
	case NIC_STATUS_BAD_OPCODE: return "unknown opcode";
	case NIC_STATUS_BAD_FIELD: return "reserved field or flag not zero";
	case NIC_STATUS_BAD_ACCESS: return "invalid access bits";
	case NIC_STATUS_BAD_RANGE: return "empty or wrapping address range";
	case NIC_STATUS_TOO_LARGE: return "registration larger than the NIC's limit";
	case NIC_STATUS_TPT_FULL: return "TPT full";
	case NIC_STATUS_BAD_KEY: return "invalid, stale or foreign key";
	case NIC_STATUS_BAD_STATE: return "entry in the wrong state";
	case NIC_STATUS_BUSY: return "entry still in use";
	case NIC_STATUS_BAD_VERSION: return "ABI version not supported";
	case NIC_STATUS_BAD_HELLO: return "malformed hello";
	case NIC_STATUS_NO_RESOURCES: return "NIC out of resources";
	case NIC_STATUS_NOT_SUPPORTED: return "capability switched off on this NIC";
	case NIC_STATUS_BAD_QP: return "no such QP or slot, or slot in use";
	case NIC_STATUS_ADDR_IN_USE: return "port already in use on this NIC";
	case NIC_STATUS_CONN_REFUSED: return "connection refused";
	case NIC_STATUS_UNREACHABLE: return "no NIC with that address on the fabric";
	case NIC_STATUS_TIMED_OUT: return "connection request timed out";
	case NIC_STATUS_BAD_CONN: return "no such pending connection request";
	case NIC_STATUS_DENIED:
		return "the NIC serves only processes of its own user (or root; hosts of a group "
		       "it was started with --allow-group for)";
	case NIC_STATUS_NO_DMA:
		return "the kernel refuses the NIC access to the host's memory (ptrace rules)";
	default: return "unknown status";
	}
}

/* Map a NIC status to a negative errno (0 for NIC_STATUS_OK). */
static inline int nic_status_errno(unsigned status)
{
	switch (status) {
	case NIC_STATUS_OK: return 0;
	case NIC_STATUS_BAD_OPCODE: return -EOPNOTSUPP;
	case NIC_STATUS_NOT_SUPPORTED: return -EOPNOTSUPP;
	case NIC_STATUS_BAD_FIELD:
	case NIC_STATUS_BAD_ACCESS:
	case NIC_STATUS_BAD_RANGE: return -EINVAL;
	case NIC_STATUS_TOO_LARGE: return -E2BIG;
	case NIC_STATUS_TPT_FULL: return -ENOSPC;
	case NIC_STATUS_BAD_KEY: return -ENOENT;
	case NIC_STATUS_BAD_STATE: return -EINVAL;
	case NIC_STATUS_BUSY: return -EBUSY;
	case NIC_STATUS_BAD_VERSION:
	case NIC_STATUS_BAD_HELLO: return -EPROTO;
	case NIC_STATUS_NO_RESOURCES: return -ENOMEM;
	case NIC_STATUS_BAD_QP: return -EBADSLT;
	case NIC_STATUS_ADDR_IN_USE: return -EADDRINUSE;
	case NIC_STATUS_CONN_REFUSED: return -ECONNREFUSED;
	case NIC_STATUS_UNREACHABLE: return -EHOSTUNREACH;
	case NIC_STATUS_TIMED_OUT: return -ETIMEDOUT;
	case NIC_STATUS_BAD_CONN: return -ENOENT;
	case NIC_STATUS_DENIED: return -EACCES;
	case NIC_STATUS_NO_DMA: return -EPERM;
	default: return -EPROTO;
	}
}

/*
 * Path of the socket of the NIC with IPv4 address addr (network byte order)
 * in directory dir.  Returns 0, or -ENAMETOOLONG when it would not fit in
 * sockaddr_un.sun_path.
 */
static inline int nic_sock_path(char *buf, size_t size, const char *dir, uint32_t addr)
{
	char a[INET_ADDRSTRLEN];
	struct in_addr in = {.s_addr = addr};
	size_t max = sizeof(((struct sockaddr_un *)0)->sun_path);
	int n;

	if (!inet_ntop(AF_INET, &in, a, sizeof(a)))
		return -EINVAL;
	n = snprintf(buf, size, "%s/" NIC_SOCK_PREFIX "%s" NIC_SOCK_SUFFIX, dir, a);
	if (n < 0 || (size_t)n >= size || (size_t)n >= max)
		return -ENAMETOOLONG;
	return 0;
}

#endif /* NICSIM_ABI_UTIL_H */

/*
 * Socket options (WSPGetSockOpt, WSPSetSockOpt) and the address list
 * (WSPIoctl SIO_ADDRESS_LIST_QUERY).
 *
 * SO_MAX_RDMA_SIZE (read-only): the largest single transfer, the NIC's
 * largest registration capped at PROV_MAX_XFER (1 GiB); before a socket is
 * bound, the cap alone.  SO_RDMA_THRESHOLD_SIZE: a hint to the switch,
 * PROV_RDMA_THRESHOLD_DEFAULT (64 KiB) until set, inherited by accepted
 * sockets; the provider itself does not use it.  Both are DWORDs at level
 * SOL_SOCKET (Linux's value) or WSA_SOL_SOCKET (Windows' 0xffff).
 */
#include <stdlib.h>
#include <string.h>

#include "prov.h"

static bool sol_socket(int level)
{
	return level == SOL_SOCKET || level == WSA_SOL_SOCKET;
}

int WSPAPI WSPGetSockOpt(SOCKET s, int level, int optname, char *optval, LPINT optlen,
			 LPINT lpErrno)
{
	struct prov *p = prov_lock();
	struct prov_sock *sk;
	DWORD v = 0;
	int err = prov_sock_get(p, s, &sk);

	if (!err && !sol_socket(level))
		err = -EINVAL;
	else if (!err && optname == SO_MAX_RDMA_SIZE)
		v = sk->nic ? prov_nic_max_xfer(sk->nic) : PROV_MAX_XFER;
	else if (!err && optname == SO_RDMA_THRESHOLD_SIZE)
		v = sk->rdma_threshold;
	else if (!err)
		err = -ENOPROTOOPT;
	if (!err && (!optval || !optlen || *optlen < (int)sizeof(DWORD)))
		err = -EFAULT;
	if (!err) {
		memcpy(optval, &v, sizeof(v));
		*optlen = (int)sizeof(v);
	}
	prov_unlock(p);
	return err ? prov_fail(err, lpErrno) : 0;
}

int WSPAPI WSPSetSockOpt(SOCKET s, int level, int optname, const char *optval, int optlen,
			 LPINT lpErrno)
{
	struct prov *p = prov_lock();
	struct prov_sock *sk;
	DWORD v;
	int err = prov_sock_get(p, s, &sk);

	if (!err && !sol_socket(level))
		err = -EINVAL;
	else if (!err && optname != SO_RDMA_THRESHOLD_SIZE)
		err = -ENOPROTOOPT; /* SO_MAX_RDMA_SIZE is read-only, others unknown */
	else if (!err && (!optval || optlen < (int)sizeof(DWORD)))
		err = -EFAULT;
	if (!err) {
		memcpy(&v, optval, sizeof(v));
		sk->rdma_threshold = v;
	}
	prov_unlock(p);
	return err ? prov_fail(err, lpErrno) : 0;
}

int prov_address_list(struct prov *p, void *out, DWORD out_len, LPDWORD returned)
{
	uint32_t *addrs = NULL;
	size_t n = 0, cap = 0, need;
	SOCKET_ADDRESS_LIST *list = out;
	SOCKET_ADDRESS *arr;
	struct sockaddr_in *sa;

	if (!returned)
		return -EFAULT;
	/* The directory may change between two reads: read until it fits. */
	do {
		uint32_t *a;

		cap = n + 8;
		a = realloc(addrs, cap * sizeof(*addrs));
		if (!a) {
			free(addrs);
			return -ENOBUFS;
		}
		addrs = a;
		prov_nic_addrs(p->dir, addrs, cap, &n);
	} while (n > cap);

	/* Winsock's layout: the list, then the addresses it points to. */
	need = offsetof(SOCKET_ADDRESS_LIST, Address) + n * sizeof(SOCKET_ADDRESS);
	if (need < sizeof(SOCKET_ADDRESS_LIST))
		need = sizeof(SOCKET_ADDRESS_LIST);
	need = (need + sizeof(uint64_t) - 1) & ~(sizeof(uint64_t) - 1);
	sa = (struct sockaddr_in *)((char *)out + need);
	need += n * sizeof(struct sockaddr_in);
	*returned = (DWORD)need;
	if (!out || out_len < need) {
		free(addrs);
		return -EFAULT;
	}
	memset(out, 0, need);
	list->iAddressCount = (INT)n;
	/* Address[] is declared with one element, as in Winsock: index past it
	 * through a pointer of its own. */
	arr = (SOCKET_ADDRESS *)((char *)out + offsetof(SOCKET_ADDRESS_LIST, Address));
	for (size_t i = 0; i < n; i++) {
		sa[i].sin_family = AF_INET;
		sa[i].sin_addr.s_addr = addrs[i];
		arr[i].lpSockaddr = (struct sockaddr *)&sa[i];
		arr[i].iSockaddrLength = (INT)sizeof(sa[i]);
	}
	free(addrs);
	return 0;
}

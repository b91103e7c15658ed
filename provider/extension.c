/*
 * WSPIoctl (SIO_GET_EXTENSION_FUNCTION_POINTER, SIO_ADDRESS_LIST_QUERY) and
 * WSPMemoryRegistrationCacheCallback.  The RDMA functions are in xfer.c.
 *
 * WSPMemoryRegistrationCacheCallback (R9) drops every registration the
 * cache tracks that overlaps any byte of [lpvAddress, lpvAddress + Size),
 * on every NIC, whichever sockets registered it (cache.c): cached ones are
 * deregistered, unpinned and forgotten; ones still in use lose their NIC
 * registration and pins at once and their handles fail later transfers.
 * WSAEINVAL when the cache tracks nothing there (including Size 0),
 * WSAEFAULT when a NIC could not confirm a release.  The memory monitor
 * (monitor.c) runs the same code before the application's memory changes.
 */
#include <string.h>

#include "prov.h"

_Static_assert(sizeof(GUID) == 16, "GUID has no padding");

static const struct extension {
	GUID guid;
	enum {
		EXT_REG,
		EXT_DEREG,
		EXT_REG_RDMA,
		EXT_DEREG_RDMA,
		EXT_WRITE,
		EXT_READ,
		EXT_CACHE
	} id;
} extensions[] = {
    {WSAID_REGISTERMEMORY, EXT_REG},
    {WSAID_DEREGISTERMEMORY, EXT_DEREG},
    {WSAID_REGISTERRDMAMEMORY, EXT_REG_RDMA},
    {WSAID_DEREGISTERRDMAMEMORY, EXT_DEREG_RDMA},
    {WSAID_RDMAWRITE, EXT_WRITE},
    {WSAID_RDMAREAD, EXT_READ},
    {WSAID_MEMORYREGISTRATIONCACHECALLBACK, EXT_CACHE},
};

/* Write the function's address at out; function pointers are copied, not converted. */
static void put_fn(void *out, int id)
{
	LPFN_WSPREGISTERMEMORY reg = WSPRegisterMemory;
	LPFN_WSPDEREGISTERMEMORY dereg = WSPDeregisterMemory;
	LPFN_WSPREGISTERRDMAMEMORY reg_rdma = WSPRegisterRdmaMemory;
	LPFN_WSPDEREGISTERRDMAMEMORY dereg_rdma = WSPDeregisterRdmaMemory;
	LPFN_WSPRDMAWRITE wr = WSPRdmaWrite;
	LPFN_WSPRDMAREAD rd = WSPRdmaRead;
	LPFN_WSPMEMORYREGISTRATIONCACHECALLBACK cache = WSPMemoryRegistrationCacheCallback;

	switch (id) {
	case EXT_REG: memcpy(out, &reg, sizeof(reg)); break;
	case EXT_DEREG: memcpy(out, &dereg, sizeof(dereg)); break;
	case EXT_REG_RDMA: memcpy(out, &reg_rdma, sizeof(reg_rdma)); break;
	case EXT_DEREG_RDMA: memcpy(out, &dereg_rdma, sizeof(dereg_rdma)); break;
	case EXT_WRITE: memcpy(out, &wr, sizeof(wr)); break;
	case EXT_READ: memcpy(out, &rd, sizeof(rd)); break;
	default: memcpy(out, &cache, sizeof(cache)); break;
	}
}

static int get_extension(const struct prov_sock *sk, const void *in, DWORD in_len, void *out,
			 DWORD out_len, LPDWORD returned)
{
	GUID guid;

	if (!in || in_len != sizeof(GUID) || !out || out_len < sizeof(void (*)(void)) || !returned)
		return -EFAULT;
	memcpy(&guid, in, sizeof(guid));
	for (size_t i = 0; i < sizeof(extensions) / sizeof(extensions[0]); i++) {
		if (memcmp(&guid, &extensions[i].guid, sizeof(guid)))
			continue;
		/*
		 * RDMA read needs a NIC that serves it.  An unbound socket has no
		 * NIC yet: it gets the pointer, and WSPRdmaRead refuses later.
		 */
		if (extensions[i].id == EXT_READ && sk->nic && !(sk->nic->caps & NIC_CAP_RDMA_READ))
			return -EOPNOTSUPP;
		put_fn(out, extensions[i].id);
		*returned = sizeof(void (*)(void));
		return 0;
	}
	return -EINVAL;
}

int WSPAPI WSPIoctl(SOCKET s, DWORD dwIoControlCode, LPVOID lpvInBuffer, DWORD cbInBuffer,
		    LPVOID lpvOutBuffer, DWORD cbOutBuffer, LPDWORD lpcbBytesReturned,
		    LPWSAOVERLAPPED lpOverlapped,
		    LPWSAOVERLAPPED_COMPLETION_ROUTINE lpCompletionRoutine,
		    LPWSATHREADID lpThreadId, LPINT lpErrno)
{
	struct prov *p = prov_lock();
	struct prov_sock *sk;
	int err = prov_sock_get(p, s, &sk);

	/* Every code served completes at once: nothing to signal. */
	(void)lpOverlapped;
	(void)lpCompletionRoutine;
	(void)lpThreadId;
	if (!err && dwIoControlCode == SIO_GET_EXTENSION_FUNCTION_POINTER)
		err = get_extension(sk, lpvInBuffer, cbInBuffer, lpvOutBuffer, cbOutBuffer,
				    lpcbBytesReturned);
	else if (!err && dwIoControlCode == SIO_ADDRESS_LIST_QUERY)
		err = prov_address_list(p, lpvOutBuffer, cbOutBuffer, lpcbBytesReturned);
	else if (!err)
		err = -EINVAL;
	prov_unlock(p);
	return err ? prov_fail(err, lpErrno) : 0;
}

int WSPAPI WSPMemoryRegistrationCacheCallback(PVOID lpvAddress, SIZE_T Size, LPINT lpErrno)
{
	struct prov *p = prov_lock();
	int err =
	    p->starts ? prov_cache_invalidate(p, (uintptr_t)lpvAddress, Size) : -PROV_ENOTINIT;

	prov_unlock(p);
	/* Nothing tracked there: "the provider never cached it". */
	if (err == -ENOENT)
		err = -EINVAL;
	return err ? prov_fail(err, lpErrno) : 0;
}

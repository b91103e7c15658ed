/*
 * Sockets: WSPSocket, WSPBind, WSPCloseSocket.
 *
 * A SOCKET is a slot-table handle (slot.h), never a file descriptor and never
 * a pointer: every call validates it against the table first.  Binding picks
 * the NIC by address and attaches to it (nic.c); registrations need a bound
 * socket, since the NIC is what they are registered with.  This provider
 * does not connect sockets yet.
 */
#include <arpa/inet.h>
#include <string.h>

#include "prov.h"

int prov_sock_get(struct prov *p, SOCKET s, struct prov_sock **out)
{
	if (!p->starts)
		return -PROV_ENOTINIT;
	*out = prov_slot_lookup(&p->socks, (uint64_t)s);
	return *out ? 0 : -ENOTSOCK;
}

static void sock_close(struct prov *p, struct prov_sock *sk)
{
	prov_sock_release_regs(p, sk);
	if (sk->nic)
		prov_nic_put(p, sk->nic);
	prov_slot_free(&p->socks, sk);
}

void prov_sock_close_all(struct prov *p)
{
	for (uint32_t i = 0; i < p->socks.hwm; i++) {
		struct prov_sock *sk = prov_slot_at(&p->socks, i);

		if (sk)
			sock_close(p, sk);
	}
}

SOCKET WSPAPI WSPSocket(int af, int type, int protocol, LPWSAPROTOCOL_INFOW lpProtocolInfo, GROUP g,
			DWORD dwFlags, LPINT lpErrno)
{
	struct prov *p;
	struct prov_sock *sk = NULL;
	SOCKET s = INVALID_SOCKET;
	int err = 0;

	/* One protocol only (ws2san.h): its info, groups and flags change nothing. */
	(void)lpProtocolInfo;
	(void)g;
	(void)dwFlags;
	p = prov_lock();
	if (!p->starts)
		err = -PROV_ENOTINIT;
	else if (af != AF_INET)
		err = -EAFNOSUPPORT;
	else if (type != SOCK_STREAM)
		err = -ESOCKTNOSUPPORT;
	else if (protocol != 0 && protocol != IPPROTO_TCP)
		err = -EPROTONOSUPPORT;
	else if (!(sk = prov_slot_alloc(&p->socks)))
		err = -ENOBUFS;
	if (!err)
		s = (SOCKET)prov_slot_handle(&p->socks, sk);
	prov_unlock(p);
	if (err)
		prov_fail(err, lpErrno);
	return s;
}

static int sock_bind(struct prov *p, struct prov_sock *sk, const struct sockaddr *name, int namelen)
{
	struct sockaddr_in sin;
	struct prov_nic *nic;
	int err;

	if (!name || namelen < (int)sizeof(struct sockaddr_in))
		return -EFAULT;
	memcpy(&sin, name, sizeof(sin));
	if (sin.sin_family != AF_INET)
		return -EAFNOSUPPORT;
	if (sk->bound)
		return -EINVAL;
	err = prov_nic_get(p, sin.sin_addr.s_addr, &nic);
	if (err)
		return err;
	sin.sin_addr.s_addr = nic->addr; /* INADDR_ANY resolved */
	memset(sin.sin_zero, 0, sizeof(sin.sin_zero));
	sk->local = sin;
	sk->nic = nic;
	sk->bound = true;
	return 0;
}

int WSPAPI WSPBind(SOCKET s, const struct sockaddr *name, int namelen, LPINT lpErrno)
{
	struct prov *p = prov_lock();
	struct prov_sock *sk;
	int err = prov_sock_get(p, s, &sk);

	if (!err)
		err = sock_bind(p, sk, name, namelen);
	prov_unlock(p);
	return err ? prov_fail(err, lpErrno) : 0;
}

int WSPAPI WSPCloseSocket(SOCKET s, LPINT lpErrno)
{
	struct prov *p = prov_lock();
	struct prov_sock *sk;
	int err = prov_sock_get(p, s, &sk);

	if (!err)
		sock_close(p, sk);
	prov_unlock(p);
	return err ? prov_fail(err, lpErrno) : 0;
}

/*
 * Sockets: WSPSocket, WSPBind, WSPCloseSocket, and waiting on a socket's NIC.
 *
 * A SOCKET is a slot-table handle (slot.h), never a file descriptor and never
 * a pointer: every call validates it against the table first.  Binding picks
 * the NIC by address and attaches to it (nic.c); registrations need a bound
 * socket, since the NIC is what they are registered with.
 *
 * Closing a socket, in this order: under the NIC's lock, mark it closing,
 * take it off the NIC's listeners, complete every operation still in flight
 * with WSA_OPERATION_ABORTED (receives too) and wake every thread blocked on
 * it; then UNLISTEN (the NIC rejects the requests not yet accepted) and
 * DESTROY_QP (which disconnects: the peer sees DISCONNECTED); then release
 * every registration and exposure the socket holds (R11), after the QP is
 * gone so that no work request still names them; then free the handle.
 * A bound socket's record is freed under its NIC's lock too, so that a thread
 * blocked on it, which holds only that lock, can tell by the generation that
 * the socket went away.
 */
#include <arpa/inet.h>
#include <string.h>
#include <time.h>

#include "prov.h"

int prov_sock_get(struct prov *p, SOCKET s, struct prov_sock **out)
{
	if (!p->starts)
		return -PROV_ENOTINIT;
	*out = prov_slot_lookup(&p->socks, (uint64_t)s);
	return *out ? 0 : -ENOTSOCK;
}

void prov_sock_close(struct prov *p, struct prov_sock *sk)
{
	struct prov_nic *nic = sk->nic;
	struct nic_cmd unlisten = {.opcode = NIC_CMD_UNLISTEN};
	bool listening = false;

	if (nic) {
		pthread_mutex_lock(&nic->lock);
		sk->closing = true;
		if (sk->state == PROV_SK_LISTENING) {
			struct prov_sock **pp;

			for (pp = &nic->listeners; *pp && *pp != sk; pp = &(*pp)->lnext)
				;
			if (*pp)
				*pp = sk->lnext;
			listening = true;
			unlisten.u.listen.port = ntohs(sk->local.sin_port);
		}
		if (sk->qp) {
			prov_qp_abort(nic, sk->qp, -ECANCELED);
			sk->qp->closing = true;
		}
		prov_sock_ev_update(nic, sk);
		prov_nic_wake(nic);
		pthread_mutex_unlock(&nic->lock);
		if (listening)
			prov_nic_exec(nic, &unlisten, NULL);
		prov_qp_release(p, sk);
	}
	prov_sock_release_regs(p, sk);
	if (nic) {
		pthread_mutex_lock(&nic->lock);
		prov_slot_free(&p->socks, sk);
		pthread_mutex_unlock(&nic->lock);
		prov_nic_put(p, nic);
	} else {
		prov_slot_free(&p->socks, sk);
	}
}

void prov_sock_close_all(struct prov *p)
{
	for (uint32_t i = 0; i < p->socks.hwm; i++) {
		struct prov_sock *sk = prov_slot_at(&p->socks, i);

		if (sk)
			prov_sock_close(p, sk);
	}
}

int prov_sock_wait(struct prov *p, struct prov_sock *sk, int (*pred)(void *), void *arg,
		   uint64_t deadline)
{
	struct prov_nic *nic = sk->nic;
	int err;

	/* The reference keeps the NIC, and p->waiters the socket records, alive. */
	nic->users++;
	p->waiters++;
	pthread_mutex_lock(&nic->lock);
	prov_unlock(p);
	err = prov_nic_wait(nic, pred, arg, deadline, true);
	pthread_mutex_unlock(&nic->lock);
	p = prov_lock();
	p->waiters--;
	prov_nic_put(p, nic);
	return err;
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
	if (!err) {
		sk->rdma_threshold = PROV_RDMA_THRESHOLD_DEFAULT;
		sk->event = WSA_INVALID_EVENT;
		s = (SOCKET)prov_slot_handle(&p->socks, sk);
	}
	prov_unlock(p);
	if (err)
		prov_fail(err, lpErrno);
	return s;
}

int prov_sock_bind(struct prov *p, struct prov_sock *sk, const struct sockaddr_in *name)
{
	struct sockaddr_in sin = *name;
	struct prov_nic *nic;
	int err;

	if (sin.sin_family != AF_INET)
		return -EAFNOSUPPORT;
	if (sk->bound)
		return -EINVAL;
	err = prov_nic_get(p, sin.sin_addr.s_addr, &nic);
	if (err)
		return err;
	sin.sin_addr.s_addr = nic->addr; /* INADDR_ANY resolved */
	memset(sin.sin_zero, 0, sizeof(sin.sin_zero));
	pthread_mutex_lock(&nic->lock);
	sk->local = sin;
	sk->nic = nic;
	sk->bound = true;
	/* An event selected before binding starts counting now. */
	prov_sock_ev_update(nic, sk);
	pthread_mutex_unlock(&nic->lock);
	return 0;
}

int WSPAPI WSPBind(SOCKET s, const struct sockaddr *name, int namelen, LPINT lpErrno)
{
	struct prov *p = prov_lock();
	struct prov_sock *sk;
	struct sockaddr_in sin;
	int err = prov_sock_get(p, s, &sk);

	if (!err && (!name || namelen < (int)sizeof(struct sockaddr_in)))
		err = -EFAULT;
	if (!err) {
		memcpy(&sin, name, sizeof(sin));
		err = prov_sock_bind(p, sk, &sin);
	}
	prov_unlock(p);
	return err ? prov_fail(err, lpErrno) : 0;
}

int WSPAPI WSPCloseSocket(SOCKET s, LPINT lpErrno)
{
	struct prov *p = prov_lock();
	struct prov_sock *sk;
	int err = prov_sock_get(p, s, &sk);

	if (!err)
		prov_sock_close(p, sk);
	prov_unlock(p);
	return err ? prov_fail(err, lpErrno) : 0;
}

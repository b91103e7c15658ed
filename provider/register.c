/*
 * Local registrations: WSPRegisterMemory and WSPDeregisterMemory.
 *
 * The handle is the slot handle of a shared region (prov_mr of kind LOCAL),
 * one per (NIC, buffer, length, flags) in the process: registering the same
 * buffer again, on the same socket or another bound to the same NIC, finds
 * the region in the hash and only counts an instance (R2).  Per socket, a
 * prov_inst counts the instances that socket holds; a handle is accepted only
 * on a socket holding one (R3), and the last instance in the process
 * deregisters from the NIC and unpins.  A prov_inst also counts the
 * socket's transfers in flight that use the region (xfer.c): the socket's
 * last instance cannot be deregistered while that count is not 0 (R1).
 *
 * The fast path of a repeated registration does no system call; a new one
 * costs a probe, the mlock of new pages and one NIC round trip, and its
 * deregistration one round trip and the munlock.  Instance records are
 * recycled through a free list, so steady state does not allocate.
 */
#include <stdlib.h>

#include "prov.h"

struct prov_inst *prov_inst_find(const struct prov_mr *mr, const struct prov_sock *sk)
{
	for (struct prov_inst *i = mr->insts; i; i = i->mr_next)
		if (i->sock == sk)
			return i;
	return NULL;
}

static struct prov_inst *inst_new(struct prov *p)
{
	struct prov_inst *i = p->inst_free;

	if (i)
		p->inst_free = i->mr_next;
	else
		i = malloc(sizeof(*i));
	return i;
}

/* Give back an instance record that was never linked. */
static void inst_recycle(struct prov *p, struct prov_inst *i)
{
	i->mr_next = p->inst_free;
	p->inst_free = i;
}

static void inst_link(struct prov_inst *i, struct prov_mr *mr, struct prov_sock *sk)
{
	i->mr = mr;
	i->sock = sk;
	i->count = 0;
	i->inflight = 0;
	i->mr_next = mr->insts;
	mr->insts = i;
	i->sk_prev = NULL;
	i->sk_next = sk->insts;
	if (sk->insts)
		sk->insts->sk_prev = i;
	sk->insts = i;
}

static void inst_unlink(struct prov *p, struct prov_inst *i)
{
	struct prov_inst **pp;

	for (pp = &i->mr->insts; *pp != i; pp = &(*pp)->mr_next)
		;
	*pp = i->mr_next;
	if (i->sk_prev)
		i->sk_prev->sk_next = i->sk_next;
	else
		i->sock->insts = i->sk_next;
	if (i->sock->last_inst == i)
		i->sock->last_inst = NULL;
	if (i->sk_next)
		i->sk_next->sk_prev = i->sk_prev;
	inst_recycle(p, i);
}

int prov_reg_local(struct prov *p, struct prov_sock *sk, void *buf, uint32_t len, uint32_t flags,
		   uint64_t *handle)
{
	uint64_t va = (uintptr_t)buf;
	struct prov_inst *inst;
	struct prov_mr *mr;
	int err;

	err = prov_check_buffer(sk, buf, len, flags);
	if (err)
		return err;
	mr = prov_mr_find(p, sk->nic, va, len, flags, PROV_MR_LOCAL);
	if (mr) {
		if (mr->refs == UINT32_MAX)
			return -ENOBUFS;
		inst = prov_inst_find(mr, sk);
		if (!inst) {
			inst = inst_new(p);
			if (!inst)
				return -ENOBUFS;
			inst_link(inst, mr, sk);
		}
		inst->count++;
		mr->refs++;
		*handle = prov_slot_handle(&p->mrs, mr);
		return 0;
	}

	inst = inst_new(p);
	if (!inst)
		return -ENOBUFS;
	/* MEM_READ: the NIC only reads (local read is implied in the TPT). */
	err =
	    prov_mr_create(p, sk->nic, va, len, flags, PROV_MR_LOCAL,
			   flags == MEM_READ ? 0 : NIC_ACCESS_LOCAL_WRITE, flags != MEM_READ, &mr);
	if (err) {
		inst_recycle(p, inst);
		return err;
	}
	inst_link(inst, mr, sk);
	inst->count = 1;
	mr->refs = 1;
	*handle = prov_slot_handle(&p->mrs, mr);
	return 0;
}

/*
 * Do transfers of sk still use inst?  Completions that came but were not
 * dispatched yet are dispatched first, so that an operation the NIC finished
 * does not hold the registration.
 */
static bool inst_busy(struct prov_sock *sk, struct prov_inst *inst)
{
	struct prov_nic *nic = sk->nic;
	bool busy;

	pthread_mutex_lock(&nic->lock);
	if (inst->inflight)
		prov_progress(nic);
	busy = inst->inflight != 0;
	pthread_mutex_unlock(&nic->lock);
	return busy;
}

int prov_dereg_local(struct prov *p, struct prov_sock *sk, uint64_t handle)
{
	struct prov_mr *mr = prov_slot_lookup(&p->mrs, handle);
	struct prov_inst *inst;
	int err;

	if (!mr || mr->kind != PROV_MR_LOCAL)
		return -EINVAL;
	inst = prov_inst_find(mr, sk);
	if (!inst)
		return -EINVAL;
	/* R1: the socket's last instance stays while its transfers use it. */
	if (inst->count == 1 && inst_busy(sk, inst))
		return -EINVAL;
	if (mr->refs == 1) {
		err = prov_mr_dereg(p, mr, false);
		if (err)
			return -EINVAL; /* in use: nothing changed */
		inst_unlink(p, inst);
		prov_mr_free(p, mr);
		return 0;
	}
	mr->refs--;
	if (--inst->count == 0)
		inst_unlink(p, inst);
	return 0;
}

/* Release a closing socket's instances, then its exposures (rdma.c). */
void prov_sock_release_regs(struct prov *p, struct prov_sock *sk)
{
	prov_sock_release_wins(p, sk);
	while (sk->insts) {
		struct prov_inst *inst = sk->insts;
		struct prov_mr *mr = inst->mr;

		mr->refs -= inst->count;
		inst_unlink(p, inst);
		if (mr->refs == 0) {
			prov_mr_dereg(p, mr, true);
			prov_mr_free(p, mr);
		}
	}
}

void prov_reg_fini(struct prov *p)
{
	while (p->inst_free) {
		struct prov_inst *i = p->inst_free;

		p->inst_free = i->mr_next;
		free(i);
	}
}

HANDLE WSPAPI WSPRegisterMemory(SOCKET s, PVOID lpBuffer, DWORD dwBufferLength, DWORD dwFlags,
				LPINT lpErrno)
{
	struct prov *p = prov_lock();
	struct prov_sock *sk;
	uint64_t handle = 0;
	int err = prov_sock_get(p, s, &sk);

	if (!err)
		err = prov_reg_local(p, sk, lpBuffer, dwBufferLength, dwFlags, &handle);
	prov_unlock(p);
	if (err) {
		prov_fail(err, lpErrno);
		return NULL;
	}
	return (HANDLE)(uintptr_t)handle;
}

int WSPAPI WSPDeregisterMemory(SOCKET s, HANDLE handle, LPINT lpErrno)
{
	struct prov *p = prov_lock();
	struct prov_sock *sk;
	int err = prov_sock_get(p, s, &sk);

	if (!err)
		err = prov_dereg_local(p, sk, (uint64_t)(uintptr_t)handle);
	prov_unlock(p);
	return err ? prov_fail(err, lpErrno) : 0;
}

/*
 * Local registrations: WSPRegisterMemory and WSPDeregisterMemory.
 *
 * The handle is the slot handle of a shared region (prov_mr of kind LOCAL),
 * one per (NIC, buffer, length, flags) in the process: registering the same
 * buffer again, on the same socket or another bound to the same NIC, finds
 * the region in the hash and only counts an instance (R2).  Per socket, a
 * prov_inst counts the instances that socket holds; a handle is accepted only
 * on a socket holding one (R3).  A prov_inst also counts the socket's
 * transfers in flight that use the region (xfer.c): the socket's last
 * instance cannot be deregistered while that count is not 0 (R1).
 *
 * When the last instance in the process goes, the region stays pinned and
 * registered in the cache (R7, cache.c) and the socket keeps an idle
 * instance (count 0, on sk->idle) so that closing it releases what it
 * cached (R11).  Registering a cached buffer again is a hash lookup and a
 * few pointer moves under the provider lock: no system call, no NIC command.
 * A miss costs a probe, the mlock of new pages and one NIC round trip.
 * Instance records are recycled through a free list, so steady state does
 * not allocate.
 */
#include <stdlib.h>

#include "prov.h"

/* sk's instance of mr, active or idle. */
static struct prov_inst *inst_any(const struct prov_mr *mr, const struct prov_sock *sk)
{
	for (struct prov_inst *i = mr->insts; i; i = i->mr_next)
		if (i->sock == sk)
			return i;
	return NULL;
}

struct prov_inst *prov_inst_find(const struct prov_mr *mr, const struct prov_sock *sk)
{
	struct prov_inst *i = inst_any(mr, sk);

	return i && i->count ? i : NULL;
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

/* Put i at the head of one of sk's lists (active or idle). */
static void sk_push(struct prov_inst **head, struct prov_inst *i)
{
	i->sk_prev = NULL;
	i->sk_next = *head;
	if (*head)
		(*head)->sk_prev = i;
	*head = i;
}

static void sk_pop(struct prov_inst **head, struct prov_inst *i)
{
	if (i->sk_prev)
		i->sk_prev->sk_next = i->sk_next;
	else
		*head = i->sk_next;
	if (i->sk_next)
		i->sk_next->sk_prev = i->sk_prev;
	if (i->sock->last_inst == i)
		i->sock->last_inst = NULL;
}

/* Link a new instance of mr for sk with count 0 (on sk's idle list). */
static void inst_link(struct prov_inst *i, struct prov_mr *mr, struct prov_sock *sk)
{
	i->mr = mr;
	i->sock = sk;
	i->count = 0;
	i->inflight = 0;
	i->mr_next = mr->insts;
	mr->insts = i;
	sk_push(&sk->idle, i);
}

void prov_inst_unlink(struct prov *p, struct prov_inst *i)
{
	struct prov_inst **pp;

	for (pp = &i->mr->insts; *pp != i; pp = &(*pp)->mr_next)
		;
	*pp = i->mr_next;
	sk_pop(i->count ? &i->sock->insts : &i->sock->idle, i);
	inst_recycle(p, i);
}

void prov_inst_idle(struct prov *p, struct prov_mr *mr, struct prov_sock *sk)
{
	struct prov_inst *i;

	if (!mr->tracked || !p->cache.enabled || inst_any(mr, sk))
		return;
	i = inst_new(p);
	if (i)
		inst_link(i, mr, sk);
}

void prov_inst_unidle(struct prov *p, struct prov_mr *mr, struct prov_sock *sk)
{
	struct prov_inst *i = inst_any(mr, sk);

	if (i && !i->count)
		prov_inst_unlink(p, i);
}

/* One more instance for sk (moves an idle one to the active list). */
static void inst_get(struct prov_inst *i)
{
	if (i->count++ == 0) {
		sk_pop(&i->sock->idle, i);
		sk_push(&i->sock->insts, i);
	}
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
		if (mr->users == UINT32_MAX)
			return -ENOBUFS;
		inst = inst_any(mr, sk);
		if (!inst) {
			inst = inst_new(p);
			if (!inst)
				return -ENOBUFS;
			inst_link(inst, mr, sk);
		}
		inst_get(inst);
		prov_cache_use(p, mr, true);
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
	inst_get(inst);
	*handle = prov_slot_handle(&p->mrs, mr);
	return 0;
}

/*
 * Do transfers of sk still use inst?  Posting counts a transfer under both
 * locks and completing uncounts it under the NIC's lock alone, so under
 * prov.lock a count of 0 stays 0: the common case needs no other lock.
 * Otherwise completions that came but were not dispatched yet are
 * dispatched first, so that an operation the NIC finished does not hold
 * the registration.  A posted receive counts as in flight until its
 * completion is taken, and taking it is what copies a small SEND that the
 * NIC left beside the completion (NIC_QP_F_RECV_INLINE) into the buffer:
 * so no registration, and no memory behind it, goes before that copy.
 */
static bool inst_busy(struct prov_sock *sk, struct prov_inst *inst)
{
	struct prov_nic *nic = sk->nic;
	bool busy;

	if (!__atomic_load_n(&inst->inflight, __ATOMIC_ACQUIRE))
		return false;
	pthread_mutex_lock(&nic->lock);
	prov_progress(nic);
	busy = __atomic_load_n(&inst->inflight, __ATOMIC_ACQUIRE) != 0;
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
	/* Without caching, the last release asks the NIC first: it may refuse. */
	if (mr->users == 1 && !(mr->tracked && p->cache.enabled)) {
		err = prov_mr_dereg(p, mr, false);
		if (err == -EBUSY)
			return -EINVAL; /* in use: nothing changed */
	}
	mr->users--;
	if (--inst->count == 0) {
		sk_pop(&sk->insts, inst);
		sk_push(&sk->idle, inst);
		if (!mr->tracked || !p->cache.enabled)
			prov_inst_unlink(p, inst);
	}
	if (mr->users == 0)
		prov_cache_unuse(p, mr);
	return 0;
}

/* Release a closing socket's exposures, instances and cached entries (R11). */
void prov_sock_release_regs(struct prov *p, struct prov_sock *sk)
{
	prov_sock_release_wins(p, sk);
	while (sk->insts) {
		struct prov_inst *inst = sk->insts;
		struct prov_mr *mr = inst->mr;

		mr->users -= inst->count;
		prov_inst_unlink(p, inst);
		/* Closing releases: the entry is not cached for later (R11). */
		if (mr->users == 0)
			prov_mr_release(p, mr);
	}
	prov_cache_release_sock(p, sk);
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
		if (prov_debug)
			prov_dbg_reg("WSPRegisterMemory", lpBuffer, dwBufferLength, dwFlags, err);
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

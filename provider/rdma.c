/*
 * Remote registrations: WSPRegisterRdmaMemory and WSPDeregisterRdmaMemory.
 *
 * Each socket exposing a buffer gets an exposure (prov_win) with a remote key
 * of its own, so that the descriptor works only for that socket's peer (R4)
 * and revoking it touches no other socket:
 *   - NIC with memory windows (NIC_CAP_MW): the pages are registered once per
 *     (NIC, buffer, length, flags) as a shared region with NIC_ACCESS_MW_BIND
 *     and no remote bits of its own (prov_mr kind RDMA), and each exposure
 *     is a window: ALLOC_MW, then BIND_MW over the whole buffer with the
 *     remote access, bound to the socket's QP.  The window's key is the
 *     rkey, and it works only for the peer of that one connection (R4).
 * Only a connected socket exposes buffers: before it connects there is no
 * connection to bind a window to (and no peer to use it), after its
 * connection ended there never will be (WSAENOTCONN either way).
 *   - NIC without windows: each exposure registers a region of its own
 *     (prov_mr kind PRIVATE) with the remote access bits; its key is the
 *     rkey.  The per-page pin counts keep the shared pages pinned once.
 *     Such a key is not tied to a connection: any peer of this NIC context
 *     that learns it can use it while it is registered.  Revoking it
 *     (deregistration) is the only protection such a NIC offers.
 * The same buffer exposed again on the same socket returns the same
 * descriptor and counts a reference (R2).  The last deregistration takes the
 * peer's access away at once: it deallocates the window, or without windows
 * deregisters the exposure's region from the NIC.  The region itself stays
 * in the registration cache (R8, cache.c): with windows still registered and
 * pinned, so that exposing the buffer again costs a window (ALLOC_MW,
 * BIND_MW) and no registration; without windows pinned only, and registered
 * again on reuse under a new key.
 *
 * Access: MEM_READ lets the peer RDMA-read (REMOTE_READ), MEM_WRITE lets it
 * RDMA-write (REMOTE_WRITE, which needs LOCAL_WRITE), MEM_READWRITE both.
 */
#include <string.h>

#include "prov.h"

static uint64_t win_hash(const struct prov_sock *sk, uint64_t va, uint64_t len, uint32_t flags)
{
	uint64_t h = prov_hash_mix((uintptr_t)sk, va);

	h = prov_hash_mix(h, len);
	return prov_hash_mix(h, flags);
}

/* sk's exposure of that buffer with key rkey, or (rkey 0) its live one. */
static struct prov_win *win_find(struct prov *p, const struct prov_sock *sk, uint64_t va,
				 uint64_t len, uint32_t flags, uint32_t rkey)
{
	uint64_t h = win_hash(sk, va, len, flags);

	for (struct prov_hnode *n = prov_hash_chain(&p->win_hash, h); n; n = n->next) {
		struct prov_win *w = prov_container_of(n, struct prov_win, hnode);

		if (n->hash == h && w->sock == sk && w->va == va && w->len == len &&
		    w->flags == flags && (rkey ? w->rkey == rkey : !w->dead))
			return w;
	}
	return NULL;
}

static uint32_t remote_access(uint32_t flags)
{
	uint32_t a = 0;

	if (flags & MEM_READ)
		a |= NIC_ACCESS_REMOTE_READ;
	if (flags & MEM_WRITE)
		a |= NIC_ACCESS_REMOTE_WRITE | NIC_ACCESS_LOCAL_WRITE;
	return a;
}

static void fill_desc(const struct prov_win *w, struct nicsim_rdma_desc *d)
{
	memset(d, 0, sizeof(*d));
	d->magic = NICSIM_RDMA_DESC_MAGIC;
	d->version = NICSIM_RDMA_DESC_VERSION;
	d->access = (uint16_t)w->flags;
	d->nic_addr = w->mr->nic->addr;
	d->rkey = w->rkey;
	d->va = w->va;
	d->len = w->len;
}

/* Run a command on a key (DEALLOC_MW, ...): as prov_nic_exec. */
static int key_cmd(struct prov_nic *nic, uint16_t opcode, uint32_t key)
{
	struct nic_cmd cmd = {.opcode = opcode};

	cmd.u.key.key = key;
	return prov_nic_exec(nic, &cmd, NULL);
}

/* A user of a cached region gives up before it exposed anything. */
static void region_put(struct prov *p, struct prov_mr *mr)
{
	if (--mr->users == 0)
		prov_cache_unuse(p, mr);
}

/*
 * The region of an exposure, from the cache or new: one more user of it.
 * With windows, the shared region (kind RDMA) stays registered while cached;
 * without, the exposure's own region (PRIVATE) stays pinned only and is
 * registered again here (R8).
 */
static int region_get(struct prov *p, struct prov_sock *sk, uint64_t va, uint64_t len,
		      uint32_t flags, struct prov_mr **out)
{
	struct prov_nic *nic = sk->nic;
	bool mw = nic->caps & NIC_CAP_MW;
	uint32_t kind = mw ? PROV_MR_RDMA : PROV_MR_PRIVATE;
	uint32_t remote = remote_access(flags);
	struct prov_mr *mr = prov_mr_find(p, nic, va, len, flags, kind);
	int err;

	if (mr) {
		if (mr->users == UINT32_MAX)
			return -ENOBUFS;
		prov_cache_use(p, mr, true);
		if (!mw) {
			err = prov_mr_reg(p, mr);
			if (err) {
				region_put(p, mr);
				return err;
			}
		}
		*out = mr;
		return 0;
	}
	/* With windows, no remote bits on the region: only the windows reach it
	 * remotely, each for its own connection (R4). */
	return prov_mr_create(p, nic, va, len, flags, kind,
			      mw ? (remote & NIC_ACCESS_LOCAL_WRITE) | NIC_ACCESS_MW_BIND : remote,
			      (flags & MEM_WRITE) != 0, out);
}

/* A window over mr for connection qpn: *mw_key and *rkey on success, nothing otherwise. */
static int bind_window(struct prov *p, struct prov_mr *mr, uint32_t flags, uint32_t qpn,
		       uint32_t *mw_key, uint32_t *rkey)
{
	struct nic_cmd bind = {.opcode = NIC_CMD_BIND_MW};
	struct nic_cmd alloc = {.opcode = NIC_CMD_ALLOC_MW};
	int err = prov_nic_exec(mr->nic, &alloc, mw_key);

	while (err == -ENOSPC && prov_cache_evict(p, mr->nic, PROV_EVICT_TPT))
		err = prov_nic_exec(mr->nic, &alloc, mw_key);
	if (err)
		return err;
	bind.u.bind_mw.mw_key = *mw_key;
	bind.u.bind_mw.mr_key = mr->key;
	bind.u.bind_mw.va = mr->va;
	bind.u.bind_mw.len = mr->len;
	bind.u.bind_mw.access =
	    remote_access(flags) & (NIC_ACCESS_REMOTE_READ | NIC_ACCESS_REMOTE_WRITE);
	bind.u.bind_mw.qpn = qpn;
	err = prov_nic_exec(mr->nic, &bind, rkey);
	if (err) {
		key_cmd(mr->nic, NIC_CMD_DEALLOC_MW, *mw_key);
		return err;
	}
	/* Binding gave the window a new key byte: the old key is stale now. */
	*mw_key = *rkey;
	return 0;
}

/*
 * Whether sk is connected: only then has it a peer to expose buffers to.
 * Not yet (a window bound now would belong to no connection: no descriptor
 * made before connecting can ever work), or not any more (the peer
 * disconnected, the transport gave up, a request broke it): ws2san.h's
 * WSAENOTCONN, whatever error ended the connection.
 */
static bool connected(const struct prov_sock *sk)
{
	bool yes;

	/* The progress engine moves the state, under the NIC's lock. */
	pthread_mutex_lock(&sk->nic->lock);
	yes = sk->state == PROV_SK_CONNECTED && sk->qp;
	pthread_mutex_unlock(&sk->nic->lock);
	return yes;
}

int prov_reg_rdma(struct prov *p, struct prov_sock *sk, void *buf, uint32_t len, uint32_t flags,
		  struct nicsim_rdma_desc *desc)
{
	uint64_t va = (uintptr_t)buf;
	struct prov_mr *mr;
	struct prov_win *w;
	int err;

	err = prov_check_buffer(sk, buf, len, flags);
	if (!err && !connected(sk))
		err = -ENOTCONN;
	if (err)
		return err;
	w = win_find(p, sk, va, len, flags, 0);
	if (w) {
		if (w->refs == UINT32_MAX)
			return -ENOBUFS;
		w->refs++;
		fill_desc(w, desc);
		return 0;
	}

	w = prov_slot_alloc(&p->wins);
	if (!w)
		return -ENOBUFS;
	err = region_get(p, sk, va, len, flags, &mr);
	if (!err && (sk->nic->caps & NIC_CAP_MW)) {
		err = bind_window(p, mr, flags, sk->qp->qpn, &w->mw_key, &w->rkey);
		if (err)
			region_put(p, mr);
	} else if (!err) {
		w->rkey = mr->key;
	}
	if (err) {
		prov_slot_free(&p->wins, w);
		/* TPT full or NIC out of memory for the window: no resources. */
		return err == -ENOSPC || err == -ENOMEM ? -ENOBUFS : err;
	}
	prov_inst_unidle(p, mr, sk);
	w->mr = mr;
	w->mr_next = mr->wins;
	mr->wins = w;
	w->sock = sk;
	w->va = va;
	w->len = len;
	w->flags = flags;
	w->refs = 1;
	prov_hash_insert(&p->win_hash, &w->hnode, win_hash(sk, va, len, flags));
	w->sk_prev = NULL;
	w->sk_next = sk->wins;
	if (sk->wins)
		sk->wins->sk_prev = w;
	sk->wins = w;
	fill_desc(w, desc);
	return 0;
}

/*
 * Remove an exposure: the peer loses access at once (the window is
 * deallocated, or without windows the region deregistered, both after
 * in-flight DMA drained), the region stays cached (R8).  Unless force, a
 * NIC refusing because the memory is in use gives -EBUSY with nothing
 * changed.  A dead exposure (its memory was invalidated) has nothing left
 * at the NIC.
 */
static int win_release(struct prov *p, struct prov_win *w, bool force)
{
	struct prov_mr *mr = w->mr;
	struct prov_win **pp;
	int err;

	if (!w->dead && w->mw_key) {
		err = key_cmd(mr->nic, NIC_CMD_DEALLOC_MW, w->mw_key);
		if (err == -EBUSY && !force)
			return -EBUSY;
	} else if (!w->dead) {
		err = prov_mr_dereg(p, mr, force);
		if (err == -EBUSY)
			return -EBUSY;
	}
	for (pp = &mr->wins; *pp != w; pp = &(*pp)->mr_next)
		;
	*pp = w->mr_next;
	if (mr->users == 1)
		prov_inst_idle(p, mr, w->sock);
	region_put(p, mr);
	prov_hash_remove(&p->win_hash, &w->hnode);
	if (w->sk_prev)
		w->sk_prev->sk_next = w->sk_next;
	else
		w->sock->wins = w->sk_next;
	if (w->sk_next)
		w->sk_next->sk_prev = w->sk_prev;
	prov_slot_free(&p->wins, w);
	return 0;
}

int prov_dereg_rdma(struct prov *p, struct prov_sock *sk, const struct nicsim_rdma_desc *d)
{
	struct prov_win *w;

	if (d->magic != NICSIM_RDMA_DESC_MAGIC || d->version != NICSIM_RDMA_DESC_VERSION)
		return -EINVAL;
	if (!sk->nic || d->nic_addr != sk->nic->addr || !d->rkey)
		return -EINVAL;
	/* The rkey changes with every registration: an old descriptor is stale. */
	w = win_find(p, sk, d->va, d->len, d->access, d->rkey);
	if (!w)
		return -EINVAL;
	if (w->refs > 1) {
		w->refs--;
		return 0;
	}
	return win_release(p, w, false) ? -EINVAL : 0;
}

void prov_sock_release_wins(struct prov *p, struct prov_sock *sk)
{
	while (sk->wins)
		win_release(p, sk->wins, true);
}

int WSPAPI WSPRegisterRdmaMemory(SOCKET s, PVOID lpBuffer, DWORD dwBufferLength, DWORD dwFlags,
				 LPVOID lpRdmaBufferDescriptor, LPDWORD lpdwDescriptorLength,
				 LPINT lpErrno)
{
	struct prov *p = prov_lock();
	struct nicsim_rdma_desc desc;
	struct prov_sock *sk;
	bool size_query = false;
	int err = prov_sock_get(p, s, &sk);

	/* The size query comes first: a switch asks it with a short buffer. */
	if (!err && !lpdwDescriptorLength) {
		err = -EFAULT;
	} else if (!err && *lpdwDescriptorLength < NICSIM_RDMA_DESC_SIZE) {
		*lpdwDescriptorLength = NICSIM_RDMA_DESC_SIZE;
		err = -EFAULT;
		size_query = true;
	} else if (!err && !lpRdmaBufferDescriptor) {
		err = -EFAULT;
	}
	if (!err)
		err = prov_reg_rdma(p, sk, lpBuffer, dwBufferLength, dwFlags, &desc);
	prov_unlock(p);
	/* The size query is no failure to report. */
	if (err && prov_debug && !size_query)
		prov_dbg_reg("WSPRegisterRdmaMemory", lpBuffer, dwBufferLength, dwFlags, err);
	if (err)
		return prov_fail(err, lpErrno);
	memcpy(lpRdmaBufferDescriptor, &desc, sizeof(desc));
	*lpdwDescriptorLength = NICSIM_RDMA_DESC_SIZE;
	return 0;
}

int WSPAPI WSPDeregisterRdmaMemory(SOCKET s, LPVOID lpRdmaBufferDescriptor,
				   DWORD dwDescriptorLength, LPINT lpErrno)
{
	struct prov *p = prov_lock();
	struct nicsim_rdma_desc desc;
	struct prov_sock *sk;
	int err = prov_sock_get(p, s, &sk);

	if (!err && (!lpRdmaBufferDescriptor || dwDescriptorLength != NICSIM_RDMA_DESC_SIZE))
		err = -EINVAL;
	if (!err) {
		/* Copy first: the caller's bytes are read once. */
		memcpy(&desc, lpRdmaBufferDescriptor, sizeof(desc));
		err = prov_dereg_rdma(p, sk, &desc);
	}
	prov_unlock(p);
	return err ? prov_fail(err, lpErrno) : 0;
}

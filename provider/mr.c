/*
 * Regions: one NIC registration of [va, va + len) with its pinned pages, the
 * entries of the registration cache (cache.c).
 *
 * prov_mr_create() is the only place that pins new pages: record, then
 * REG_MR posted and the pages pinned while the NIC works, then tracking
 * (hash, index), which cannot fail.  Every step that can fail comes first,
 * so a failure unwinds completely.  A full TPT or a pin refused for lack of
 * locked memory is first answered by evicting unused cached entries (least
 * recently used first) and trying again: the cache never makes a
 * registration fail that would have succeeded without it.
 * Removal is split so that callers can keep "nothing changed" on a refusal:
 * prov_mr_dereg() asks the NIC (and may be refused with -EBUSY), the pins
 * and the record go after.
 */
#include <string.h>

#include "prov.h"

static uint64_t mr_hash(const struct prov_nic *nic, uint64_t va, uint64_t len, uint32_t flags,
			uint32_t kind)
{
	uint64_t h = prov_hash_mix((uintptr_t)nic, va);

	h = prov_hash_mix(h, len);
	return prov_hash_mix(h, (uint64_t)flags << 8 | kind);
}

uint64_t prov_mr_hash(const struct prov_mr *mr)
{
	return mr_hash(mr->nic, mr->va, mr->len, mr->flags, mr->kind);
}

int prov_check_buffer(const struct prov_sock *sk, const void *buf, uint32_t len, uint32_t flags)
{
	if (!sk->nic)
		return -ENOTCONN;
	if (flags != MEM_READ && flags != MEM_WRITE && flags != MEM_READWRITE)
		return -EINVAL;
	if (!buf)
		return -EFAULT;
	if (!len)
		return -EINVAL;
	if (len - 1 > UINTPTR_MAX - (uintptr_t)buf)
		return -EFAULT;
	if (prov_nic_is_down(sk->nic))
		return -ENETDOWN;
	return 0;
}

struct prov_mr *prov_mr_find(struct prov *p, const struct prov_nic *nic, uint64_t va, uint64_t len,
			     uint32_t flags, uint32_t kind)
{
	uint64_t h = mr_hash(nic, va, len, flags, kind);

	for (struct prov_hnode *n = prov_hash_chain(&p->mr_hash, h); n; n = n->next) {
		struct prov_mr *mr = prov_container_of(n, struct prov_mr, hnode);

		if (n->hash == h && mr->nic == nic && mr->va == va && mr->len == len &&
		    mr->flags == flags && mr->kind == kind &&
		    (kind != PROV_MR_PRIVATE || mr->users == 0))
			return mr;
	}
	return NULL;
}

/* TPT full, too large, NIC out of memory, the NIC kept from this process's
 * memory (-EPERM: NIC_STATUS_NO_DMA): all are "no resources". */
static int no_resources(int err)
{
	return err == -ENOSPC || err == -E2BIG || err == -ENOMEM || err == -EPERM ? -ENOBUFS : err;
}

static int exec_reg(struct prov_nic *nic, const struct prov_mr *mr, uint32_t *key)
{
	struct nic_cmd cmd = {.opcode = NIC_CMD_REG_MR};

	cmd.u.reg_mr.va = mr->va;
	cmd.u.reg_mr.len = mr->len;
	cmd.u.reg_mr.access = mr->access;
	return prov_nic_exec(nic, &cmd, key);
}

int prov_mr_create(struct prov *p, struct prov_nic *nic, uint64_t va, uint64_t len, uint32_t flags,
		   uint32_t kind, uint32_t access, bool nic_writes, struct prov_mr **out)
{
	struct prov_cmd pc = {.cmd.opcode = NIC_CMD_REG_MR};
	struct prov_mr *mr;
	uint32_t key = 0;
	int err, pin_err;

	/* Refuse before pinning what the NIC would refuse anyway. */
	if (len > nic->max_reg_len) {
		PROV_DBG("registration of %llu bytes refused: larger than the NIC's limit of %llu "
			 "bytes (nicsimd --max-reg)",
			 (unsigned long long)len, (unsigned long long)nic->max_reg_len);
		return -ENOBUFS;
	}
	mr = prov_slot_alloc(&p->mrs);
	if (!mr)
		return -ENOBUFS;
	mr->nic = nic;
	mr->va = va;
	mr->len = len;
	mr->flags = flags;
	mr->kind = kind;
	mr->access = access;
	/*
	 * The NIC executes REG_MR while this thread pins the pages, which hides
	 * the round trip behind the mlock.  Nobody knows the key before both
	 * are done, so no DMA can reach the pages before they are pinned; if
	 * pinning fails, the fresh entry is deregistered again.
	 */
	pc.cmd.u.reg_mr.va = va;
	pc.cmd.u.reg_mr.len = len;
	pc.cmd.u.reg_mr.access = access;
	err = prov_nic_post(nic, &pc);
	if (err)
		goto free_mr;
	pin_err = prov_pin(&p->pins, (uintptr_t)va, (size_t)len, nic_writes);
	err = prov_nic_cmd_wait(nic, &pc, &key);
	while (err == -ENOSPC && prov_cache_evict(p, nic, PROV_EVICT_TPT))
		err = exec_reg(nic, mr, &key);
	while (pin_err == -ENOBUFS && prov_cache_evict(p, NULL, PROV_EVICT_PINS))
		pin_err = prov_pin(&p->pins, (uintptr_t)va, (size_t)len, nic_writes);
	if (pin_err == -ENOBUFS)
		prov_refused_memlock(p, nic, va, len);
	else if (pin_err)
		PROV_DBG("registration of %llu bytes at 0x%llx refused: cannot pin: not wholly "
			 "mapped memory of this process with the access asked",
			 (unsigned long long)len, (unsigned long long)va);
	if (pin_err) {
		if (!err) {
			struct nic_cmd dereg = {.opcode = NIC_CMD_DEREG_MR};

			dereg.u.key.key = key;
			prov_nic_exec(nic, &dereg, NULL);
		}
		err = pin_err;
		goto free_mr;
	}
	if (err) {
		if (err == -EPERM)
			prov_refused_ptrace(nic, va, len);
		else
			PROV_DBG("registration of %llu bytes at 0x%llx refused by the NIC: %s",
				 (unsigned long long)len, (unsigned long long)va,
				 err == -ENOSPC ? "its TPT is full, even after evicting the cache "
						  "(nicsimd --tpt-capacity)"
						: strerror(-err));
		err = no_resources(err);
		goto unpin;
	}
	mr->key = key;
	mr->registered = true;
	mr->pinned = true;
	mr->users = 1;
	prov_cache_pins_changed(p);
	prov_cache_track(p, mr);
	prov_cache_miss(p, nic);
	*out = mr;
	return 0;

unpin:
	prov_unpin(&p->pins, (uintptr_t)va, (size_t)len);
free_mr:
	prov_slot_free(&p->mrs, mr);
	return err;
}

int prov_mr_reg(struct prov *p, struct prov_mr *mr)
{
	uint32_t key;
	int err = exec_reg(mr->nic, mr, &key);

	while (err == -ENOSPC && prov_cache_evict(p, mr->nic, PROV_EVICT_TPT))
		err = exec_reg(mr->nic, mr, &key);
	if (err == -EPERM)
		prov_refused_ptrace(mr->nic, mr->va, mr->len);
	if (err)
		return no_resources(err);
	mr->key = key;
	mr->registered = true;
	return 0;
}

int prov_mr_dereg(struct prov *p, struct prov_mr *mr, bool force)
{
	struct nic_cmd cmd = {.opcode = NIC_CMD_DEREG_MR};
	int err;

	(void)p;
	if (!mr->registered)
		return 0;
	cmd.u.key.key = mr->key;
	err = prov_nic_exec(mr->nic, &cmd, NULL);
	/*
	 * -EBUSY: windows still use it; the caller reports WSAEINVAL and
	 * changes nothing, unless it must release anyway (socket close, cleanup:
	 * the entry then stays until the context is torn down).  Any other
	 * failure means the entry (-ENOENT) or the NIC (-ENETDOWN) is gone.
	 * DMA in flight does not refuse: the NIC completes DEREG_MR once it
	 * drained, so after this no DMA reaches the pages through the key.
	 */
	if (err == -EBUSY && !force)
		return -EBUSY;
	mr->registered = false;
	return err == -ENOENT ? 0 : err;
}

void prov_mr_unpin(struct prov *p, struct prov_mr *mr)
{
	if (!mr->pinned)
		return;
	prov_unpin(&p->pins, (uintptr_t)mr->va, (size_t)mr->len);
	mr->pinned = false;
	prov_cache_pins_changed(p);
}

int prov_mr_release(struct prov *p, struct prov_mr *mr)
{
	int err = prov_mr_dereg(p, mr, true);

	prov_mr_unpin(p, mr);
	prov_mr_destroy(p, mr);
	return err;
}

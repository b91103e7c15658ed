#include "rc_tpt.h"

#include <errno.h>
#include <string.h>

void rc_tpt_release(struct tpt *t, struct rc_mem *mem, void (*drained)(void *arg, uint32_t key),
		    void *arg)
{
	for (uint32_t i = 0; i < mem->ngrant; i++) {
		uint32_t key;

		if (tpt_put(t, mem->grant[i], &key) && drained)
			drained(arg, key);
	}
	mem->ngrant = 0;
}

int rc_tpt_local(struct tpt *t, const struct tpt_owner *owner, const struct nic_sge *sge,
		 uint32_t nsge, bool write, struct rc_mem *mem, enum nic_tpt_reason *why)
{
	memset(mem, 0, sizeof(*mem));
	for (uint32_t i = 0; i < nsge && i < NIC_MAX_SGE; i++) {
		struct tpt_grant g;

		if (tpt_check(t, owner, sge[i].lkey, write ? NIC_ACCESS_LOCAL_WRITE : 0,
			      NIC_QPN_NONE, sge[i].va, sge[i].len, &g, why) < 0) {
			rc_tpt_release(t, mem, NULL, NULL);
			return -EACCES;
		}
		mem->grant[mem->ngrant++] = g.index;
		mem->seg[mem->nseg++] = (struct dma_seg){.va = g.va, .len = g.len};
		mem->len += g.len;
	}
	return 0;
}

int rc_tpt_remote(struct tpt *t, const struct tpt_owner *owner, uint32_t qpn, uint32_t rkey,
		  uint64_t va, uint64_t len, uint32_t access, struct rc_mem *mem,
		  enum nic_tpt_reason *why)
{
	struct tpt_grant g;

	memset(mem, 0, sizeof(*mem));
	if (tpt_check(t, owner, rkey, access, qpn, va, len, &g, why) < 0)
		return -EACCES;
	mem->grant[mem->ngrant++] = g.index;
	mem->seg[mem->nseg++] = (struct dma_seg){.va = g.va, .len = g.len};
	mem->len = g.len;
	return 0;
}

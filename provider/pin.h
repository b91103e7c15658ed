/*
 * Page pinning for registrations: the provider's MmProbeAndLockPages.
 *
 * prov_pin() locks the pages nobody pins yet, then probes the whole range,
 * so that a buffer the NIC could not use is refused as a bad buffer
 * (-EFAULT) rather than as a lack of resources: madvise(MADV_POPULATE_WRITE)
 * when the NIC may write the pages, MADV_POPULATE_READ otherwise, fails on
 * unmapped pages, PROT_NONE pages, read-only pages asked for writing and
 * pages that would fault with SIGBUS.  Locking uses mlock2(MLOCK_ONFAULT)
 * there, so the probe is what faults the pages in (one page-table walk, not
 * two).  When mlock fails, the same probe decides: a bad buffer is -EFAULT,
 * a good one that cannot be locked (RLIMIT_MEMLOCK, memory) -ENOBUFS.  On a
 * kernel without MADV_POPULATE_* (before 5.14) plain mlock() populates and
 * mincore() checks only that every page is mapped.
 *
 * The kernel does not count mlock() calls: one munlock() unlocks a page
 * however often it was locked.  Registrations overlap (two buffers sharing a
 * page, the same buffer for local and remote access), so the provider counts
 * pins per page in a hash (page number -> count), mlocks only the pages whose
 * count leaves 0 and munlocks only those whose count returns to 0.
 * Consequence, documented for applications: pages the application mlocked
 * itself are unlocked when their last registration goes.
 *
 * A failed prov_pin() changes nothing.  Not thread-safe: the caller holds the
 * provider lock.
 */
#ifndef PROV_PIN_H
#define PROV_PIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct prov_pin_ent {
	uintptr_t page; /* address >> page_shift */
	uint32_t count; /* 0: empty slot */
};

struct prov_pins {
	struct prov_pin_ent *tab; /* open addressing, linear probing */
	size_t cap;               /* power of two */
	size_t used;
	unsigned bits; /* log2(cap) */
	unsigned page_shift;
	bool populate; /* MADV_POPULATE_* available */
	bool onfault;  /* mlock2(MLOCK_ONFAULT) available */
	/* Why the last prov_pin() that returned -ENOBUFS failed: mlock's
	 * errno and the bytes of pages it had to lock, the ones no
	 * registration pinned yet; both 0 when the count table could not take
	 * the pins (no memory, or a page pinned UINT32_MAX times). */
	int lock_errno;
	size_t lock_need;
};

/* 0 or -ENOMEM.  Detects the page size and MADV_POPULATE_* support. */
int prov_pins_init(struct prov_pins *t);
/* Unlocks every page still pinned and frees the table.  Accepts a zeroed one. */
void prov_pins_fini(struct prov_pins *t);
/* Frees the table without unlocking (a forked child holds no locks).  Accepts a zeroed one. */
void prov_pins_forget(struct prov_pins *t);

/*
 * Pin the pages of [addr, addr + len); write: the NIC may write them.
 * 0, -EINVAL (len 0), -EFAULT (wraps, or not wholly accessible as asked),
 * -ENOBUFS (cannot lock, or no memory for the count table).
 */
int prov_pin(struct prov_pins *t, uintptr_t addr, size_t len, bool write);
/* Undo one successful prov_pin() of the same range. */
void prov_unpin(struct prov_pins *t, uintptr_t addr, size_t len);

/* Pins held on the page containing addr (for tests and diagnostics). */
uint32_t prov_pin_count(const struct prov_pins *t, uintptr_t addr);
/* Number of distinct pages pinned. */
static inline size_t prov_pins_pages(const struct prov_pins *t)
{
	return t->used;
}

#endif /* PROV_PIN_H */

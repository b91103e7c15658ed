/* Per-page pin counting over mlock: see pin.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pin.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MLOCK_ONFAULT
#define MLOCK_ONFAULT 0x01
#endif

#define PIN_MIN_CAP 64u
#define MINCORE_BATCH 256u /* pages checked per mincore() call in the fallback */

/*
 * mlock and munlock as system calls: AddressSanitizer intercepts the libc
 * functions and turns them into no-ops, which would make the sanitizer
 * build pin nothing and hide pinning bugs.
 *
 * With MADV_POPULATE_* available, pages are locked with MLOCK_ONFAULT: the
 * range is locked (and counted against RLIMIT_MEMLOCK) at once, and the
 * probe that follows faults the pages in with the access the NIC needs, so
 * the page tables are walked once instead of twice (mlock's populate, then
 * the probe's).
 */
static int sys_mlock(const struct prov_pins *t, uintptr_t addr, size_t len)
{
	if (t->populate && t->onfault)
		return (int)syscall(SYS_mlock2, addr, len, MLOCK_ONFAULT);
	return (int)syscall(SYS_mlock, addr, len);
}

static void sys_munlock(uintptr_t addr, size_t len)
{
	(void)syscall(SYS_munlock, addr, len);
}

static size_t slot_of(const struct prov_pins *t, uintptr_t page)
{
	/* Fibonacci hashing: consecutive pages spread over the table. */
	return (size_t)(((uint64_t)page * 0x9e3779b97f4a7c15ull) >> (64 - t->bits));
}

static struct prov_pin_ent *find(const struct prov_pins *t, uintptr_t page)
{
	size_t mask = t->cap - 1;

	for (size_t i = slot_of(t, page);; i = (i + 1) & mask) {
		struct prov_pin_ent *e = &t->tab[i];

		if (!e->count)
			return NULL;
		if (e->page == page)
			return e;
	}
}

/* Insert a page known to be absent; the caller made room with reserve(). */
static struct prov_pin_ent *insert(struct prov_pins *t, uintptr_t page)
{
	size_t mask = t->cap - 1, i = slot_of(t, page);

	while (t->tab[i].count)
		i = (i + 1) & mask;
	t->tab[i].page = page;
	t->used++;
	return &t->tab[i];
}

/* Remove an entry whose count dropped to 0 (backward-shift deletion). */
static void erase(struct prov_pins *t, struct prov_pin_ent *e)
{
	size_t mask = t->cap - 1, i = (size_t)(e - t->tab), j = i;

	for (;;) {
		size_t k;

		j = (j + 1) & mask;
		if (!t->tab[j].count)
			break;
		k = slot_of(t, t->tab[j].page);
		/* Entry j may move to i unless its home k lies cyclically in (i, j]. */
		if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		t->tab[i] = t->tab[j];
		i = j;
	}
	t->tab[i].count = 0;
	t->used--;
}

static int rehash(struct prov_pins *t, size_t cap)
{
	struct prov_pin_ent *old = t->tab;
	size_t old_cap = t->cap;
	unsigned bits = 0;

	while (((size_t)1 << bits) < cap)
		bits++;
	t->tab = calloc(cap, sizeof(*t->tab));
	if (!t->tab) {
		t->tab = old;
		return -ENOMEM;
	}
	t->cap = cap;
	t->bits = bits;
	t->used = 0;
	for (size_t i = 0; i < old_cap; i++) {
		if (old[i].count)
			insert(t, old[i].page)->count = old[i].count;
	}
	free(old);
	return 0;
}

/* Room for n more pages at a load factor of at most 1/2. */
static int reserve(struct prov_pins *t, size_t n)
{
	size_t cap = t->cap;

	if (n > SIZE_MAX / 4 - t->used)
		return -ENOMEM;
	while ((t->used + n) * 2 > cap)
		cap *= 2;
	return cap == t->cap ? 0 : rehash(t, cap);
}

int prov_pins_init(struct prov_pins *t)
{
	long ps = sysconf(_SC_PAGESIZE);
	void *page;

	memset(t, 0, sizeof(*t));
	if (ps <= 0 || (ps & (ps - 1)))
		ps = 4096;
	while ((1L << t->page_shift) < ps)
		t->page_shift++;
	t->cap = PIN_MIN_CAP;
	t->bits = 6;
	t->tab = calloc(t->cap, sizeof(*t->tab));
	if (!t->tab)
		return -ENOMEM;
	/* Does this kernel know MADV_POPULATE_READ?  Unknown advice is EINVAL. */
	page = mmap(NULL, (size_t)ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED) {
		free(t->tab);
		memset(t, 0, sizeof(*t));
		return -ENOMEM;
	}
	t->populate = madvise(page, (size_t)ps, MADV_POPULATE_READ) == 0;
	/*
	 * A kernel with MADV_POPULATE_* (5.14) has mlock2 (4.4), but valgrind
	 * may not know it.  A zero length locks nothing; EPERM (no memlock
	 * allowance at all) still means the call exists.
	 */
	t->onfault = syscall(SYS_mlock2, (uintptr_t)page, (size_t)0, MLOCK_ONFAULT) == 0 ||
		     (errno != ENOSYS && errno != EINVAL);
	munmap(page, (size_t)ps);
	return 0;
}

void prov_pins_fini(struct prov_pins *t)
{
	size_t ps = (size_t)1 << t->page_shift;

	for (size_t i = 0; t->tab && i < t->cap; i++)
		if (t->tab[i].count)
			sys_munlock(t->tab[i].page << t->page_shift, ps);
	free(t->tab);
	memset(t, 0, sizeof(*t));
}

void prov_pins_forget(struct prov_pins *t)
{
	free(t->tab);
	memset(t, 0, sizeof(*t));
}

/* Is every page of [start, start + len) (page-aligned) usable as asked? */
static int probe(const struct prov_pins *t, uintptr_t start, size_t len, bool write)
{
	unsigned char vec[MINCORE_BATCH];
	size_t batch = (size_t)MINCORE_BATCH << t->page_shift;

	if (t->populate) {
		int advice = write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ;

		while (madvise((void *)start, len, advice) < 0) {
			/*
			 * ENOMEM: not mapped; EINVAL: PROT_NONE, read-only for a
			 * write, or I/O mappings; EFAULT: access would fault;
			 * EHWPOISON.  All mean the buffer is not usable memory.
			 */
			if (errno != EINTR)
				return -EFAULT;
		}
		return 0;
	}
	/* Older kernels: only "is every page mapped" can be checked cheaply. */
	for (size_t off = 0; off < len; off += batch) {
		size_t n = len - off < batch ? len - off : batch;

		if (mincore((void *)(start + off), n, vec) < 0)
			return -EFAULT;
	}
	return 0;
}

/* munlock every page of [from, to) that has no entry: pages no registration pins. */
static void unlock_absent(const struct prov_pins *t, uintptr_t from, uintptr_t to)
{
	uintptr_t run = 0;
	bool open = false;

	for (uintptr_t pg = from; pg < to; pg++) {
		if (!find(t, pg)) {
			if (!open)
				run = pg;
			open = true;
			continue;
		}
		if (open)
			sys_munlock(run << t->page_shift, (size_t)(pg - run) << t->page_shift);
		open = false;
	}
	if (open)
		sys_munlock(run << t->page_shift, (size_t)(to - run) << t->page_shift);
}

static int lock_run(const struct prov_pins *t, uintptr_t from, uintptr_t to)
{
	return sys_mlock(t, from << t->page_shift, (size_t)(to - from) << t->page_shift);
}

int prov_pin(struct prov_pins *t, uintptr_t addr, size_t len, bool write)
{
	uintptr_t first, last, pg, run = 0;
	bool open = false, count_full = false;
	int err;

	if (!len)
		return -EINVAL;
	if (len - 1 > UINTPTR_MAX - addr)
		return -EFAULT;
	first = addr >> t->page_shift;
	last = (addr + len - 1) >> t->page_shift;
	if (reserve(t, (size_t)(last - first + 1))) {
		t->lock_errno = 0;
		t->lock_need = 0;
		return -ENOBUFS;
	}

	/*
	 * Pass 1: lock the runs of pages nobody pins yet; the table is
	 * unchanged.  Locking comes first so that the probe below faults the
	 * pages in once, as locked pages (see sys_mlock).
	 */
	for (pg = first; pg <= last; pg++) {
		struct prov_pin_ent *e = find(t, pg);

		if (!e) {
			if (!open)
				run = pg;
			open = true;
			continue;
		}
		if (e->count == UINT32_MAX) {
			count_full = true;
			goto undo;
		}
		if (open && lock_run(t, run, pg))
			goto undo;
		open = false;
	}
	if (open && lock_run(t, run, last + 1)) {
		pg = last + 1;
		goto undo;
	}
	err = probe(t, first << t->page_shift, (size_t)(last - first + 1) << t->page_shift, write);
	if (err) {
		unlock_absent(t, first, last + 1);
		return err;
	}

	/* Pass 2: count; cannot fail, reserve() made room. */
	for (pg = first; pg <= last; pg++) {
		struct prov_pin_ent *e = find(t, pg);

		if (e)
			e->count++;
		else
			insert(t, pg)->count = 1;
	}
	return 0;

undo:
	/* The table is unchanged: count what this call had to lock, for the
	 * caller's explanation (errno is still mlock's, or 0 for a full count). */
	t->lock_errno = count_full ? 0 : errno;
	t->lock_need = 0;
	for (uintptr_t p = first; !count_full && p <= last; p++)
		if (!find(t, p))
			t->lock_need += (size_t)1 << t->page_shift;
	/* Every absent page before pg was locked (or partly locked) by this call. */
	unlock_absent(t, first, pg);
	/* mlock fails on unmapped pages too: a bad buffer is -EFAULT, not -ENOBUFS. */
	err = probe(t, first << t->page_shift, (size_t)(last - first + 1) << t->page_shift, write);
	return err ? err : -ENOBUFS;
}

void prov_unpin(struct prov_pins *t, uintptr_t addr, size_t len)
{
	uintptr_t first, last;

	if (!len || len - 1 > UINTPTR_MAX - addr)
		return;
	first = addr >> t->page_shift;
	last = (addr + len - 1) >> t->page_shift;
	for (uintptr_t pg = first; pg <= last; pg++) {
		struct prov_pin_ent *e = find(t, pg);

		if (e && --e->count == 0)
			erase(t, e);
	}
	/* The pages nobody pins any more are now the absent ones. */
	unlock_absent(t, first, last + 1);
}

uint32_t prov_pin_count(const struct prov_pins *t, uintptr_t addr)
{
	const struct prov_pin_ent *e = t->tab ? find(t, addr >> t->page_shift) : NULL;

	return e ? e->count : 0;
}

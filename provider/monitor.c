/*
 * The memory monitor: R10 without the application's help.
 *
 * Before the application gives memory back, the registrations covering it
 * must be gone from the NIC, or DMA through their keys would land in
 * whatever the addresses hold next (on hardware: in pages the kernel gave to
 * someone else).  The provider learns of it by symbol interposition:
 * libnicsimsp defines munmap, mremap, madvise, mmap/mmap64 (MAP_FIXED),
 * brk, sbrk, free, realloc and reallocarray.  A program linked with the
 * library (or running with it in LD_PRELOAD) looks these up in libnicsimsp
 * before libc, so each call comes here first; the wrapper runs the cache
 * callback for the range (cache.c, prov_cache_invalidate: DEREG_MR, which
 * the NIC completes only after in-flight DMA drained, then the unpin) and
 * only then calls the real function, with the provider lock held across it
 * so that no registration of the range can slip in between.
 *
 * free and realloc matter because glibc's own munmap of a large block (and
 * its heap trimming) calls the system directly, not through the symbol: the
 * range of the block (malloc_usable_size) is checked before the real free.
 * Under AddressSanitizer or ThreadSanitizer the sanitizer's allocator
 * replaces malloc and unmaps by raw system calls; there the sanitizer's
 * documented free hook (__sanitizer_install_malloc_and_free_hooks, called
 * before a block is released) does the same job.
 *
 * Fast path: a filter of counters over 2 MiB granules of the address space
 * (hashed into 4096 slots) says whether any registration may lie in a
 * range; a call whose range hits no counter costs a few loads and no lock.
 * Calls made by the provider itself (prov_tls_depth, see prov.h) pass
 * straight through: the provider never gives back application memory.
 *
 * Start-up (prov_mon_start, once per process): a self-test calls munmap and
 * free through the global symbol lookup, as an application would, and checks
 * that the calls arrived here.  They do not when libnicsimsp was loaded
 * after libc took the names (dlopen), or when a malloc replacement without
 * sanitizer hooks sits in front; the cache then stays off (cache.c fails
 * closed with one warning).
 *
 * What it cannot see (docs/registration-cache.md): raw system calls
 * (syscall(SYS_munmap, ...)), libc-internal unmaps other than malloc's
 * (a thread's stack at its exit, dlclose, shmdt), process_madvise, and
 * changes made from outside the process; a thread that registers a range
 * while another gives it back races with the release, as any use after
 * free does.
 *
 * The state below is static because the interposed functions receive no
 * context; it is written once at start-up, except the filter's counters
 * (atomics, changed under prov.lock).
 */
#include <dlfcn.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "prov.h"

#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24
#endif
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define MON_GRAIN_SHIFT 21 /* 2 MiB */
#define MON_SLOT_BITS 12
#define MON_SLOTS (1u << MON_SLOT_BITS)
#define MON_PROBE_BLOCK (256u << 10) /* a malloc block glibc serves with mmap */

/* glibc's own entry points, for calls that arrive before dlsym answered. */
extern void __libc_free(void *ptr);
extern void *__libc_realloc(void *ptr, size_t size);

typedef int (*munmap_fn)(void *, size_t);
typedef void *(*mremap_fn)(void *, size_t, size_t, int, ...);
typedef int (*madvise_fn)(void *, size_t, int);
typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);
typedef int (*brk_fn)(void *);
typedef void *(*sbrk_fn)(intptr_t);
typedef void (*free_fn)(void *);
typedef void *(*realloc_fn)(void *, size_t);
typedef void *(*reallocarray_fn)(void *, size_t, size_t);
typedef size_t (*san_size_fn)(const volatile void *);
typedef int (*san_hooks_fn)(void (*)(const volatile void *, size_t),
			    void (*)(const volatile void *));
typedef void (*tsan_sync_fn)(void *);

static struct monitor {
	/* The next definitions in lookup order (libc's, or a sanitizer's). */
	munmap_fn munmap;
	mremap_fn mremap;
	madvise_fn madvise;
	mmap_fn mmap, mmap64;
	brk_fn brk;
	sbrk_fn sbrk;
	free_fn free;
	realloc_fn realloc;
	reallocarray_fn reallocarray;
	san_size_fn san_size; /* a sanitizer's __sanitizer_get_allocated_size */
	/*
	 * ThreadSanitizer's __tsan_acquire/__tsan_release: it does not record
	 * locks taken inside its own interceptors in some states (a thread
	 * being torn down), and the wrappers run inside its munmap interceptor.
	 */
	tsan_sync_fn tsan_acquire, tsan_release;
	uint32_t resolved; /* atomic: the pointers above are set */
	uint32_t armed;    /* atomic: started and working */
	int started;       /* 0: not tried; 1: working; -1: failed */
	unsigned flags;    /* PROV_MON_* */
	char why[256];
	uint64_t tracked;           /* atomic: ranges in the filter (0: skip every check) */
	uint32_t filter[MON_SLOTS]; /* atomics: registrations per granule slot */
} mon;

static __thread __attribute__((tls_model("initial-exec"))) int mon_resolving;
/* Self-test: the address the wrappers should see next, in this thread. */
static __thread __attribute__((tls_model("initial-exec"))) const volatile void *mon_probe;

static void *next_sym(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

static void resolve(void)
{
	if (__atomic_load_n(&mon.resolved, __ATOMIC_ACQUIRE) || mon_resolving)
		return;
	/* dlsym may allocate and free: those calls take the fallbacks meanwhile. */
	mon_resolving = 1;
	mon.munmap = (munmap_fn)next_sym("munmap");
	mon.mremap = (mremap_fn)next_sym("mremap");
	mon.madvise = (madvise_fn)next_sym("madvise");
	mon.mmap = (mmap_fn)next_sym("mmap");
	mon.mmap64 = (mmap_fn)next_sym("mmap64");
	mon.brk = (brk_fn)next_sym("brk");
	mon.sbrk = (sbrk_fn)next_sym("sbrk");
	mon.free = (free_fn)next_sym("free");
	mon.realloc = (realloc_fn)next_sym("realloc");
	mon.reallocarray = (reallocarray_fn)next_sym("reallocarray");
	__atomic_store_n(&mon.resolved, 1, __ATOMIC_RELEASE);
	mon_resolving = 0;
}

/* ---- The filter --------------------------------------------------------- */

static uint32_t slot_of(uint64_t granule)
{
	return (uint32_t)((granule * 0x9e3779b97f4a7c15ull) >> (64 - MON_SLOT_BITS));
}

/* Apply d to the counters of every granule of [va, va + len) (len > 0). */
static void filter_change(uint64_t va, uint64_t len, int32_t d)
{
	uint64_t last = len - 1 > UINT64_MAX - va ? UINT64_MAX : va + len - 1;
	uint64_t g0 = va >> MON_GRAIN_SHIFT, g1 = last >> MON_GRAIN_SHIFT;

	if (g1 - g0 >= MON_SLOTS) {
		for (uint32_t i = 0; i < MON_SLOTS; i++)
			__atomic_fetch_add(&mon.filter[i], (uint32_t)d, __ATOMIC_RELAXED);
		return;
	}
	for (uint64_t g = g0; g <= g1; g++)
		__atomic_fetch_add(&mon.filter[slot_of(g)], (uint32_t)d, __ATOMIC_RELAXED);
}

void prov_mon_add(uint64_t va, uint64_t len)
{
	filter_change(va, len, 1);
	__atomic_fetch_add(&mon.tracked, 1, __ATOMIC_RELAXED);
}

void prov_mon_del(uint64_t va, uint64_t len)
{
	filter_change(va, len, -1);
	__atomic_fetch_sub(&mon.tracked, 1, __ATOMIC_RELAXED);
}

void prov_mon_reset(void)
{
	__atomic_store_n(&mon.tracked, 0, __ATOMIC_RELAXED);
	for (uint32_t i = 0; i < MON_SLOTS; i++)
		__atomic_store_n(&mon.filter[i], 0, __ATOMIC_RELAXED);
}

/* May a registration lie in [va, va + len) (len > 0)? */
static bool filter_hit(uint64_t va, uint64_t len)
{
	uint64_t last = len - 1 > UINT64_MAX - va ? UINT64_MAX : va + len - 1;
	uint64_t g0 = va >> MON_GRAIN_SHIFT, g1 = last >> MON_GRAIN_SHIFT;

	if (g1 - g0 >= MON_SLOTS)
		return true;
	for (uint64_t g = g0; g <= g1; g++)
		if (__atomic_load_n(&mon.filter[slot_of(g)], __ATOMIC_RELAXED))
			return true;
	return false;
}

/* ---- Before and after a change -------------------------------------------- */

struct mon_guard {
	bool locked; /* prov.lock held until mon_after() */
};

/*
 * The application is about to change the mapping of [addr, addr + len):
 * drop the registrations there first, keeping prov.lock until mon_after().
 * gone: the range is about to be unmapped or replaced, so a shared buffer
 * there ends too (the NICs must stop reaching its memfd at those addresses);
 * advice that only drops pages leaves it.  May be called twice for one
 * guard (mremap: old and new range).
 */
static void mon_before(struct mon_guard *g, uintptr_t addr, size_t len, bool gone)
{
	const volatile void *probe = mon_probe;
	struct prov *p;

	if (probe && (uintptr_t)probe >= addr && (uintptr_t)probe - addr < len)
		mon_probe = NULL;
	if (!len || !__atomic_load_n(&mon.armed, __ATOMIC_ACQUIRE))
		return;
	if (!g->locked && (prov_tls_depth || !filter_hit(addr, len)))
		return;
	if (!g->locked) {
		p = prov_lock();
		g->locked = true;
		if (mon.tsan_acquire)
			mon.tsan_acquire(&p->lock);
	} else {
		p = prov_instance_get();
	}
	if (p->starts)
		prov_cache_invalidate(p, addr, len);
	if (gone)
		prov_bufs_gone(p, addr, len);
}

static void mon_after(struct mon_guard *g)
{
	int saved = errno;
	struct prov *p = prov_instance_get();

	if (g->locked) {
		if (mon.tsan_release)
			mon.tsan_release(&p->lock);
		prov_unlock(p);
	}
	errno = saved;
}

/* ---- The interposed functions -------------------------------------------- */

int munmap(void *addr, size_t len)
{
	struct mon_guard g = {0};
	int rc;

	resolve();
	mon_before(&g, (uintptr_t)addr, len, true);
	rc = mon.munmap ? mon.munmap(addr, len) : (int)syscall(SYS_munmap, addr, len);
	mon_after(&g);
	return rc;
}

void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	struct mon_guard g = {0};
	void *new_addr = NULL, *rc;
	va_list ap;

	va_start(ap, flags);
	if (flags & MREMAP_FIXED)
		new_addr = va_arg(ap, void *);
	va_end(ap);
	resolve();
	/* The old range moves or shrinks; with MREMAP_FIXED the new one is replaced.
	 * An old length of 0 duplicates a shared mapping and changes nothing. */
	if (old_len)
		mon_before(&g, (uintptr_t)old, old_len, true);
	if (flags & MREMAP_FIXED)
		mon_before(&g, (uintptr_t)new_addr, new_len, true);
	if (mon.mremap)
		rc = mon.mremap(old, old_len, new_len, flags, new_addr);
	else
		rc = (void *)syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
	mon_after(&g);
	return rc;
}

int madvise(void *addr, size_t len, int advice)
{
	struct mon_guard g = {0};
	int rc;

	resolve();
	/* The advice that throws pages away; the rest keeps the mapping. */
	if (advice == MADV_DONTNEED || advice == MADV_DONTNEED_LOCKED || advice == MADV_FREE ||
	    advice == MADV_REMOVE)
		mon_before(&g, (uintptr_t)addr, len, false);
	rc = mon.madvise ? mon.madvise(addr, len, advice)
			 : (int)syscall(SYS_madvise, addr, len, advice);
	mon_after(&g);
	return rc;
}

static void *mmap_common(mmap_fn real, void *addr, size_t len, int prot, int flags, int fd,
			 off_t off)
{
	struct mon_guard g = {0};
	void *rc;

	/* MAP_FIXED replaces whatever was mapped there. */
	if ((flags & MAP_FIXED) && !(flags & MAP_FIXED_NOREPLACE))
		mon_before(&g, (uintptr_t)addr, len, true);
	rc = real ? real(addr, len, prot, flags, fd, off)
		  : (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
	mon_after(&g);
	return rc;
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	resolve();
	return mmap_common(mon.mmap, addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	resolve();
	return mmap_common(mon.mmap64, addr, len, prot, flags, fd, off);
}

int brk(void *addr)
{
	struct mon_guard g = {0};
	void *cur;
	int rc;

	resolve();
	if (!mon.brk || !mon.sbrk) {
		errno = ENOSYS;
		return -1;
	}
	cur = mon.sbrk(0);
	if (cur != (void *)-1 && (uintptr_t)addr < (uintptr_t)cur)
		mon_before(&g, (uintptr_t)addr, (uintptr_t)cur - (uintptr_t)addr, true);
	rc = mon.brk(addr);
	mon_after(&g);
	return rc;
}

void *sbrk(intptr_t incr)
{
	struct mon_guard g = {0};
	void *cur, *rc;

	resolve();
	if (!mon.sbrk) {
		errno = ENOSYS;
		return (void *)-1;
	}
	if (incr < 0) {
		cur = mon.sbrk(0);
		if (cur != (void *)-1 && (uintptr_t)cur >= (uintptr_t)(-incr))
			mon_before(&g, (uintptr_t)cur - (uintptr_t)(-incr), (size_t)(-incr), true);
	}
	rc = mon.sbrk(incr);
	mon_after(&g);
	return rc;
}

/* Before a malloc block goes back to the allocator. */
static void block_before(struct mon_guard *g, void *ptr)
{
	if (ptr == mon_probe)
		mon_probe = NULL;
	/* Nothing registered: no need to ask the allocator for the block's size. */
	if (!ptr || prov_tls_depth || !__atomic_load_n(&mon.armed, __ATOMIC_ACQUIRE) ||
	    !__atomic_load_n(&mon.tracked, __ATOMIC_RELAXED))
		return;
	mon_before(g, (uintptr_t)ptr, malloc_usable_size(ptr), false);
}

void free(void *ptr)
{
	struct mon_guard g = {0};

	resolve();
	block_before(&g, ptr);
	if (mon.free)
		mon.free(ptr);
	else
		__libc_free(ptr);
	mon_after(&g);
}

void *realloc(void *ptr, size_t size)
{
	struct mon_guard g = {0};
	void *rc;

	resolve();
	block_before(&g, ptr);
	rc = mon.realloc ? mon.realloc(ptr, size) : __libc_realloc(ptr, size);
	mon_after(&g);
	return rc;
}

void *reallocarray(void *ptr, size_t n, size_t size)
{
	struct mon_guard g = {0};
	void *rc;

	resolve();
	if (!mon.reallocarray) {
		errno = ENOMEM;
		return NULL;
	}
	block_before(&g, ptr);
	rc = mon.reallocarray(ptr, n, size);
	mon_after(&g);
	return rc;
}

/* ---- Sanitizer allocators --------------------------------------------------- */

static void san_malloc_hook(const volatile void *ptr, size_t size)
{
	(void)ptr;
	(void)size;
}

/* Called by the sanitizer just before it takes a block back. */
static void san_free_hook(const volatile void *ptr)
{
	struct mon_guard g = {0};

	if (ptr == mon_probe)
		mon_probe = NULL;
	if (!ptr || prov_tls_depth || !__atomic_load_n(&mon.armed, __ATOMIC_ACQUIRE) ||
	    !__atomic_load_n(&mon.tracked, __ATOMIC_RELAXED))
		return;
	mon_before(&g, (uintptr_t)ptr, mon.san_size(ptr), false);
	mon_after(&g);
}

/*
 * At load time, in the main thread (the sanitizers want their hooks set
 * before other threads start): resolve the real functions and hook a
 * sanitizer's allocator if one is there.
 */
__attribute__((constructor)) static void mon_load(void)
{
	san_hooks_fn install;

	resolve();
	install = (san_hooks_fn)dlsym(RTLD_DEFAULT, "__sanitizer_install_malloc_and_free_hooks");
	mon.san_size = (san_size_fn)dlsym(RTLD_DEFAULT, "__sanitizer_get_allocated_size");
	mon.tsan_acquire = (tsan_sync_fn)dlsym(RTLD_DEFAULT, "__tsan_acquire");
	mon.tsan_release = (tsan_sync_fn)dlsym(RTLD_DEFAULT, "__tsan_release");
	if (install && mon.san_size)
		install(san_malloc_hook, san_free_hook);
}

/* ---- Start-up -------------------------------------------------------------- */

/* Does a call of name through the global lookup, as the application makes it, arrive here? */
static bool selftest_munmap(void)
{
	long ps = sysconf(_SC_PAGESIZE);
	munmap_fn fn = (munmap_fn)dlsym(RTLD_DEFAULT, "munmap");
	void *page = (void *)syscall(SYS_mmap, NULL, (size_t)ps, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	bool seen;

	if (page == MAP_FAILED || !fn)
		return false;
	mon_probe = page;
	fn(page, (size_t)ps);
	seen = mon_probe == NULL;
	if (!seen)
		syscall(SYS_munmap, page, (size_t)ps);
	mon_probe = NULL;
	return seen;
}

static bool selftest_free(void)
{
	void *(*alloc)(size_t) = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "malloc");
	free_fn release = (free_fn)dlsym(RTLD_DEFAULT, "free");
	void *block;
	bool seen;

	if (!alloc || !release)
		return false;
	block = alloc(MON_PROBE_BLOCK);
	if (!block)
		return false;
	mon_probe = block;
	release(block);
	seen = mon_probe == NULL;
	mon_probe = NULL;
	return seen;
}

int prov_mon_start(unsigned *flags, char *why, size_t size)
{
	if (!mon.started) {
		resolve();
		if (!selftest_munmap()) {
			snprintf(mon.why, sizeof(mon.why),
				 "the memory monitor does not see munmap (link the program with "
				 "libnicsimsp or LD_PRELOAD it; a dlopen comes too late)");
			mon.started = -1;
		} else if (!selftest_free()) {
			snprintf(mon.why, sizeof(mon.why),
				 "the memory monitor does not see free (a malloc replacement "
				 "without sanitizer hooks comes first)");
			mon.started = -1;
		} else {
			mon.flags = PROV_MON_UNMAP | PROV_MON_FREE;
			mon.started = 1;
			__atomic_store_n(&mon.armed, 1, __ATOMIC_RELEASE);
		}
	}
	*flags = mon.flags;
	if (mon.started < 0) {
		snprintf(why, size, "%s", mon.why);
		return -ENOSYS;
	}
	return 0;
}

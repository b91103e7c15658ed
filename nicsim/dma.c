#include "dma.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* iovecs per system call; IOV_MAX is 1024 on Linux. */
#define DMA_IOV_BATCH 64u

uint64_t dma_segs_len(const struct dma_seg *segs, unsigned nsegs)
{
	uint64_t total = 0;

	for (unsigned i = 0; i < nsegs; i++) {
		if (segs[i].len > UINT64_MAX - total)
			return UINT64_MAX;
		total += segs[i].len;
	}
	return total;
}

/* A position in a list of buffers: element i, offset off within it. */
struct pos {
	unsigned i;
	uint64_t off;
};

/*
 * Up to DMA_IOV_BATCH iovecs for at most max bytes from position p of n
 * buffers (base and length read through get); returns the count, *bytes the
 * bytes they cover.
 */
static unsigned gather(struct iovec *v, struct pos p, unsigned n, size_t max, size_t *bytes,
		       void (*get)(const void *list, unsigned i, uint64_t *base, uint64_t *len),
		       const void *list)
{
	unsigned k = 0;
	uint64_t base, len;

	*bytes = 0;
	for (; p.i < n && k < DMA_IOV_BATCH && *bytes < max; p.i++, p.off = 0) {
		get(list, p.i, &base, &len);
		len -= p.off;
		if (len > max - *bytes)
			len = max - *bytes;
		if (len == 0)
			continue;
		v[k].iov_base = (void *)(uintptr_t)(base + p.off);
		v[k].iov_len = (size_t)len;
		*bytes += (size_t)len;
		k++;
	}
	return k;
}

/* Move p forward by n bytes. */
static void advance(struct pos *p, size_t n,
		    void (*get)(const void *list, unsigned i, uint64_t *base, uint64_t *len),
		    const void *list)
{
	uint64_t base, len;

	while (n > 0) {
		get(list, p->i, &base, &len);
		if (len - p->off > n) {
			p->off += n;
			return;
		}
		n -= (size_t)(len - p->off);
		p->i++;
		p->off = 0;
	}
}

static void seg_get(const void *list, unsigned i, uint64_t *base, uint64_t *len)
{
	const struct dma_seg *s = (const struct dma_seg *)list + i;

	*base = s->va;
	*len = s->len;
}

static void iov_get(const void *list, unsigned i, uint64_t *base, uint64_t *len)
{
	const struct iovec *v = (const struct iovec *)list + i;

	*base = (uintptr_t)v->iov_base;
	*len = v->iov_len;
}

const struct dma_map *dma_map_find(const struct dma_maps *maps, uint64_t va, uint64_t len)
{
	const struct dma_map *m;
	unsigned lo = 0, hi;

	if (!maps || !maps->n || len == 0)
		return NULL;
	/* The last map that starts at or before va. */
	hi = maps->n;
	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;

		if (maps->map[mid].va <= va)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	m = &maps->map[lo - 1];
	if (va - m->va >= m->len || len > m->len - (va - m->va))
		return NULL;
	return m;
}

/* This process's own ids, taken before the first change. */
static uid_t own_ruid, own_euid;
static gid_t own_rgid, own_egid;
static pthread_once_t own_once = PTHREAD_ONCE_INIT;

static void own_ids(void)
{
	uid_t s;
	gid_t g;

	getresuid(&own_ruid, &own_euid, &s);
	getresgid(&own_rgid, &own_egid, &g);
}

/* Run with as's ids (0, or -errno with nothing changed), and back to this
 * process's own (aborts if it cannot: going on with the wrong rights is
 * worse than stopping).  The raw system calls change the calling thread's
 * ids only (glibc's wrappers would change every thread's); gid first,
 * while still allowed. */
static int dma_as_enter(const struct dma_as *as)
{
	int err;

	pthread_once(&own_once, own_ids);
	if (syscall(SYS_setresgid, (gid_t)as->gid, (gid_t)as->gid, (gid_t)-1) < 0)
		return -errno;
	if (syscall(SYS_setresuid, (uid_t)as->uid, (uid_t)as->uid, (uid_t)-1) < 0) {
		err = -errno;
		if (syscall(SYS_setresgid, own_rgid, own_egid, (gid_t)-1) < 0)
			abort();
		return err;
	}
	return 0;
}

static void dma_as_leave(void)
{
	if (syscall(SYS_setresuid, own_ruid, own_euid, (uid_t)-1) < 0 ||
	    syscall(SYS_setresgid, own_rgid, own_egid, (gid_t)-1) < 0)
		abort();
}

/*
 * bytes of the transfer from host position r and local position l through
 * process_vm_*, as few system calls as the iovec limit allows (one, unless
 * the segments or buffers are many); both positions move on.  A short
 * count means the kernel stopped at an element it could not reach.
 */
static int pvm(pid_t pid, const struct dma_seg *segs, unsigned nsegs, struct pos *r,
	       const struct iovec *local, unsigned nlocal, struct pos *l, uint64_t bytes, int write,
	       uint64_t *calls, const struct dma_as *as)
{
	struct iovec rv[DMA_IOV_BATCH], lv[DMA_IOV_BATCH];

	while (bytes > 0) {
		size_t rbytes, lbytes;
		unsigned nr = gather(rv, *r, nsegs, (size_t)bytes, &rbytes, seg_get, segs);
		unsigned nl = gather(lv, *l, nlocal, rbytes, &lbytes, iov_get, local);
		ssize_t done;
		int err;

		if (as && (err = dma_as_enter(as)) < 0)
			return err;
		done = write ? process_vm_writev(pid, lv, nl, rv, nr, 0)
			     : process_vm_readv(pid, lv, nl, rv, nr, 0);
		err = done < 0 ? -errno : 0;
		if (as)
			dma_as_leave();
		if (calls)
			(*calls)++;
		if (err < 0)
			return err;
		if ((size_t)done != lbytes || done == 0)
			return -EFAULT;
		advance(r, (size_t)done, seg_get, segs);
		advance(l, (size_t)done, iov_get, local);
		bytes -= (size_t)done;
	}
	return 0;
}

/* n bytes between the NIC's mapping of a shared buffer at p and the local
 * buffers from position l, which moves on. */
static void shm_copy(uint8_t *p, const struct iovec *local, struct pos *l, uint64_t n, int write)
{
	while (n > 0) {
		const struct iovec *v = &local[l->i];
		uint64_t k = v->iov_len - l->off;

		if (k > n)
			k = n;
		if (k == 0) {
			l->i++;
			l->off = 0;
			continue;
		}
		if (write)
			memcpy(p, (const uint8_t *)v->iov_base + l->off, (size_t)k);
		else
			memcpy((uint8_t *)v->iov_base + l->off, p, (size_t)k);
		p += k;
		n -= k;
		advance(l, (size_t)k, iov_get, local);
	}
}

/*
 * A page of a shared buffer can still fail to appear when the NIC touches
 * it, although the memfd cannot shrink: the kernel accounts a memfd's pages
 * one by one as they are first touched (and a host may punch them out at
 * any time), and when it cannot (strict overcommit, vm.overcommit_memory =
 * 2, at its limit) the fault is a SIGBUS.  So each copy through a map is
 * guarded: a SIGBUS at an address of the map while it runs makes the
 * transfer fail with -EFAULT, as a fault of process_vm_* does, instead of
 * ending the NIC.  Any other SIGBUS ends the process as before.
 */
static __thread sigjmp_buf *volatile guard_jmp;
static __thread const uint8_t *volatile guard_lo;
static __thread const uint8_t *volatile guard_hi;
static struct sigaction guard_prev;
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;

static void guard_on_sigbus(int sig, siginfo_t *si, void *uc)
{
	sigjmp_buf *j = guard_jmp;
	const uint8_t *a = si->si_addr;

	(void)uc;
	if (j && a >= guard_lo && a < guard_hi) {
		guard_jmp = NULL;
		siglongjmp(*j, 1);
	}
	/* Not a copy's: the disposition there was before, then the fault
	 * happens again on return (or the signal, if it was sent). */
	sigaction(SIGBUS, &guard_prev, NULL);
	if (si->si_code <= 0)
		raise(sig);
}

static void guard_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = guard_on_sigbus;
	/* Not blocked in the handler: siglongjmp leaves the mask as it is. */
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &guard_prev);
}

/* shm_copy, guarded: 0, or -EFAULT when a page of the map was not there. */
static int shm_copy_guarded(uint8_t *p, const struct iovec *local, struct pos *l, uint64_t n,
			    int write)
{
	/* What the copy needs after sigsetjmp lives in memory, not in
	 * registers a siglongjmp could leave stale. */
	uint8_t *volatile vp = p;
	const struct iovec *volatile vlocal = local;
	struct pos *volatile vl = l;
	volatile uint64_t vn = n;
	volatile int vwrite = write;
	sigjmp_buf jb;

	pthread_once(&guard_once, guard_install);
	guard_lo = p;
	guard_hi = p + n;
	if (sigsetjmp(jb, 0)) {
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		return -EFAULT;
	}
	guard_jmp = &jb;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	shm_copy(vp, vlocal, vl, vn, vwrite);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	guard_jmp = NULL;
	return 0;
}

/*
 * One transfer between [off, off + total) of the segments and the local
 * buffers.  Each piece of a segment that lies wholly inside a shared buffer
 * is copied through the NIC's mapping; each run of other pieces goes to the
 * kernel in one batch.
 */
static int transfer(pid_t pid, const struct dma_maps *maps, const struct dma_seg *segs,
		    unsigned nsegs, uint64_t off, const struct iovec *local, unsigned nlocal,
		    int write)
{
	struct pos r = {0, 0}, l = {0, 0};
	uint64_t total = 0;

	for (unsigned i = 0; i < nlocal; i++) {
		if (local[i].iov_len > SIZE_MAX - total)
			return -EINVAL;
		total += local[i].iov_len;
	}
	if (total == 0)
		return 0;
	if (off > dma_segs_len(segs, nsegs) || total > dma_segs_len(segs, nsegs) - off)
		return -EINVAL;
	advance(&r, (size_t)off, seg_get, segs);
	if (!maps || !maps->n)
		return pvm(pid, segs, nsegs, &r, local, nlocal, &l, total, write,
			   maps ? maps->calls : NULL, maps ? maps->as : NULL);
	while (total > 0) {
		struct pos q = r;
		uint64_t run = 0;
		int err = 0;

		/* The bytes from r up to the next shared piece. */
		while (run < total) {
			uint64_t va = segs[q.i].va + q.off, len = segs[q.i].len - q.off;
			const struct dma_map *m;

			if (len > total - run)
				len = total - run;
			m = dma_map_find(maps, va, len);
			if (m && run == 0) {
				err =
				    shm_copy_guarded(m->ptr + (va - m->va), local, &l, len, write);
				if (err)
					return err;
				if (maps->copied)
					(*maps->copied)++;
				advance(&r, (size_t)len, seg_get, segs);
				total -= len;
				break;
			}
			if (m)
				break;
			run += len;
			q.i++;
			q.off = 0;
		}
		if (run == 0)
			continue;
		err =
		    pvm(pid, segs, nsegs, &r, local, nlocal, &l, run, write, maps->calls, maps->as);
		if (err)
			return err;
		total -= run;
	}
	return 0;
}

int dma_readv(pid_t pid, const struct dma_maps *maps, const struct dma_seg *segs, unsigned nsegs,
	      uint64_t off, const struct iovec *local, unsigned nlocal)
{
	return transfer(pid, maps, segs, nsegs, off, local, nlocal, 0);
}

int dma_writev(pid_t pid, const struct dma_maps *maps, const struct dma_seg *segs, unsigned nsegs,
	       uint64_t off, const struct iovec *local, unsigned nlocal)
{
	return transfer(pid, maps, segs, nsegs, off, local, nlocal, 1);
}

int dma_read(pid_t pid, const struct dma_maps *maps, const struct dma_seg *segs, unsigned nsegs,
	     uint64_t off, void *buf, size_t len)
{
	struct iovec v = {.iov_base = buf, .iov_len = len};

	return transfer(pid, maps, segs, nsegs, off, &v, 1, 0);
}

int dma_write(pid_t pid, const struct dma_maps *maps, const struct dma_seg *segs, unsigned nsegs,
	      uint64_t off, const void *buf, size_t len)
{
	struct iovec v = {.iov_base = (void *)buf, .iov_len = len};

	return transfer(pid, maps, segs, nsegs, off, &v, 1, 1);
}

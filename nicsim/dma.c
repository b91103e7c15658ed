#include "dma.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <sys/uio.h>

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

/*
 * One transfer between [off, off + total) of the segments and the local
 * buffers, as few system calls as the iovec limit allows (one, unless the
 * segments or buffers are many).  A short count means the kernel stopped at
 * an element it could not reach.
 */
static int transfer(pid_t pid, const struct dma_seg *segs, unsigned nsegs, uint64_t off,
		    const struct iovec *local, unsigned nlocal, int write)
{
	struct iovec rv[DMA_IOV_BATCH], lv[DMA_IOV_BATCH];
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
	while (total > 0) {
		size_t rbytes, lbytes;
		unsigned nr = gather(rv, r, nsegs, (size_t)total, &rbytes, seg_get, segs);
		unsigned nl = gather(lv, l, nlocal, rbytes, &lbytes, iov_get, local);
		ssize_t done = write ? process_vm_writev(pid, lv, nl, rv, nr, 0)
				     : process_vm_readv(pid, lv, nl, rv, nr, 0);

		if (done < 0)
			return -errno;
		if ((size_t)done != lbytes || done == 0)
			return -EFAULT;
		advance(&r, (size_t)done, seg_get, segs);
		advance(&l, (size_t)done, iov_get, local);
		total -= (size_t)done;
	}
	return 0;
}

int dma_readv(pid_t pid, const struct dma_seg *segs, unsigned nsegs, uint64_t off,
	      const struct iovec *local, unsigned nlocal)
{
	return transfer(pid, segs, nsegs, off, local, nlocal, 0);
}

int dma_writev(pid_t pid, const struct dma_seg *segs, unsigned nsegs, uint64_t off,
	       const struct iovec *local, unsigned nlocal)
{
	return transfer(pid, segs, nsegs, off, local, nlocal, 1);
}

int dma_read(pid_t pid, const struct dma_seg *segs, unsigned nsegs, uint64_t off, void *buf,
	     size_t len)
{
	struct iovec v = {.iov_base = buf, .iov_len = len};

	return transfer(pid, segs, nsegs, off, &v, 1, 0);
}

int dma_write(pid_t pid, const struct dma_seg *segs, unsigned nsegs, uint64_t off, const void *buf,
	      size_t len)
{
	struct iovec v = {.iov_base = (void *)buf, .iov_len = len};

	return transfer(pid, segs, nsegs, off, &v, 1, 1);
}

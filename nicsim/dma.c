#include "dma.h"

#include <errno.h>
#include <limits.h>
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

/*
 * One transfer: the remote iovecs cover [off, off + len) of the segments, a
 * batch at a time; the local side is the single buffer.  A short count means
 * the kernel stopped at an element it could not reach.
 */
static int transfer(pid_t pid, const struct dma_seg *segs, unsigned nsegs, uint64_t off, char *buf,
		    size_t len, int write)
{
	struct iovec remote[DMA_IOV_BATCH];
	unsigned i = 0;

	if (len == 0)
		return 0;
	if (off > dma_segs_len(segs, nsegs) || len > dma_segs_len(segs, nsegs) - off)
		return -EINVAL;
	/* Skip the segments wholly before off. */
	while (off >= segs[i].len) {
		off -= segs[i].len;
		i++;
	}
	while (len > 0) {
		struct iovec local = {.iov_base = buf, .iov_len = 0};
		unsigned n = 0;
		ssize_t done;

		for (; i < nsegs && n < DMA_IOV_BATCH && local.iov_len < len; i++) {
			uint64_t take = segs[i].len - off;

			if (take > len - local.iov_len)
				take = len - local.iov_len;
			if (take == 0)
				continue;
			remote[n].iov_base = (void *)(uintptr_t)(segs[i].va + off);
			remote[n].iov_len = (size_t)take;
			local.iov_len += (size_t)take;
			n++;
			off = 0;
		}
		done = write ? process_vm_writev(pid, &local, 1, remote, n, 0)
			     : process_vm_readv(pid, &local, 1, remote, n, 0);
		if (done < 0)
			return -errno;
		if ((size_t)done != local.iov_len)
			return -EFAULT;
		buf += done;
		len -= (size_t)done;
	}
	return 0;
}

int dma_read(pid_t pid, const struct dma_seg *segs, unsigned nsegs, uint64_t off, void *buf,
	     size_t len)
{
	return transfer(pid, segs, nsegs, off, buf, len, 0);
}

int dma_write(pid_t pid, const struct dma_seg *segs, unsigned nsegs, uint64_t off, const void *buf,
	      size_t len)
{
	return transfer(pid, segs, nsegs, off, (char *)buf, len, 1);
}

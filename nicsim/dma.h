/*
 * DMA engine: moves bytes between an attached host process's memory and the
 * NIC's own buffers (fabric frames), the way a device reaches host memory.
 *
 * The host is another process, so its memory is reached with
 * process_vm_readv/process_vm_writev.  A transfer is described by segments
 * of the host's address space (each one the range a TPT grant allowed: a
 * region's pages are one virtually contiguous run, so one segment per
 * scatter/gather element) and an offset and length within their
 * concatenation.  Each call turns that into one iovec array and one system
 * call (more only past DMA_IOV_BATCH segments or buffers): no per-page calls and no staging
 * copy, so data goes from host memory straight into a frame and from a frame
 * straight into host memory.
 *
 * Shared buffers: a host may share some of its memory with the NIC (memfds
 * it sent, mapped by both: struct dma_maps).  A piece of a transfer that
 * lies wholly inside one of those maps is copied with memcpy through the
 * NIC's own mapping, with no system call and no page pinning; the rest goes
 * through process_vm_* as above, batched the same way.  The bytes land in
 * the same places either way.  A SIGBUS in such a copy (a page the kernel
 * could not give) fails the transfer with -EFAULT: the functions install a
 * SIGBUS handler the first time they copy through a map, which passes any
 * other SIGBUS to the disposition before it.
 *
 * The TPT check comes first and is the caller's: these functions trust the
 * segments they are given and only report what the kernel says.
 *
 * Errors: 0, -EFAULT (part of the range is not mapped in the host: a local
 * protection error), -ESRCH (the host process is gone), -EPERM (the NIC may
 * not reach the host's memory: see PR_SET_PTRACER in the attach handshake),
 * -EINVAL (offset and length outside the segments), -ENOMEM.
 */
#ifndef NICSIM_DMA_H
#define NICSIM_DMA_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct dma_seg {
	uint64_t va;  /* start in the host's address space */
	uint64_t len; /* bytes */
};

/* One shared buffer: host addresses [va, va + len) are the NIC's
 * [ptr, ptr + len). */
struct dma_map {
	uint64_t va;
	uint64_t len;
	uint8_t *ptr;
};

/* A host's shared buffers: n maps, sorted by va, disjoint (NULL or n == 0:
 * none).  When not NULL, *copied counts the pieces copied through them and
 * *calls the system calls made for the rest. */
struct dma_maps {
	const struct dma_map *map;
	unsigned n;
	uint64_t *copied;
	uint64_t *calls;
	const struct dma_as *as; /* NULL: with this process's own rights */
};

/*
 * Whose rights a process_vm_* call runs with.  A NIC that reaches other
 * users' memory (--allow-group: root) must not reach it with root's: the
 * pid it names stays the host's across execve(), and a host that executes
 * a set-user-ID program would hand that program's memory to its user
 * (another process of theirs keeps the context).  With an identity, each
 * call is made with the calling thread's real and effective ids set to
 * those (the saved ones kept, to come back), which clears its effective
 * capabilities: the kernel then allows exactly what that user could do
 * with ptrace, decided under the target's exec lock, so a process that is
 * now someone else's (or not dumpable) is refused with EPERM.
 */
struct dma_as {
	uint32_t uid, gid;
};

/* Copy len bytes at offset off of the host's segments into buf. */
int dma_read(pid_t pid, const struct dma_maps *maps, const struct dma_seg *segs, unsigned nsegs,
	     uint64_t off, void *buf, size_t len);

/* Copy len bytes from buf to offset off of the host's segments. */
int dma_write(pid_t pid, const struct dma_maps *maps, const struct dma_seg *segs, unsigned nsegs,
	      uint64_t off, const void *buf, size_t len);

struct iovec;

/* The same, to and from several local buffers in order (one system call
 * for all of them): how the NIC moves a batch of frames' payloads. */
int dma_readv(pid_t pid, const struct dma_maps *maps, const struct dma_seg *segs, unsigned nsegs,
	      uint64_t off, const struct iovec *local, unsigned nlocal);
int dma_writev(pid_t pid, const struct dma_maps *maps, const struct dma_seg *segs, unsigned nsegs,
	       uint64_t off, const struct iovec *local, unsigned nlocal);

/* The map holding all of [va, va + len) (len > 0), or NULL. */
const struct dma_map *dma_map_find(const struct dma_maps *maps, uint64_t va, uint64_t len);

/* Total bytes the segments describe (saturating at UINT64_MAX). */
uint64_t dma_segs_len(const struct dma_seg *segs, unsigned nsegs);

#endif /* NICSIM_DMA_H */

/*
 * Buffers the application shares with its NICs (nicsim_buffer_alloc,
 * nicsim_provider.h).  Each is a sealed memfd mapped in the application;
 * every NIC the provider is attached to maps it too (SHM_MAP, the host
 * interface's section 6.7), now and whenever the provider attaches to
 * another NIC, and its DMA engine then copies to and from the buffer with
 * memcpy instead of process_vm_readv/process_vm_writev.  A map is only an
 * accelerator: a NIC that could not map a buffer reaches it as any other
 * memory, so a failure to map is never an error of the transfer.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "nicsim_provider.h"
#include "prov.h"
#include "ws2san.h"

/* Have nic map buf (prov.lock held); a failure only costs speed. */
static void map_on(struct prov_nic *nic, const struct prov_buf *buf)
{
	int err;

	if (prov_nic_is_down(nic))
		return;
	err = prov_nic_shm(nic, buf->fd, buf->va, buf->len);
	if (err) {
		char a[16];

		PROV_DBG("shared buffer at %p (%zu bytes) not mapped by NIC %s: %s; it is "
			 "reached as ordinary memory",
			 buf->va, buf->len, prov_addr_str(nic->addr, a), strerror(-err));
	}
}

void prov_bufs_attach(struct prov *p, struct prov_nic *nic)
{
	for (const struct prov_buf *b = p->bufs; b; b = b->next)
		map_on(nic, b);
}

int nicsim_buffer_alloc(size_t len, void **buf)
{
	const unsigned seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
	long page = sysconf(_SC_PAGESIZE);
	struct prov_buf *b;
	struct prov *p;
	void *va;
	int fd, err = 0;

	if (!buf)
		return WSAEFAULT;
	*buf = NULL;
	if (len == 0 || page <= 0 || len > SIZE_MAX - (size_t)page)
		return WSAEINVAL;
	len = (len + (size_t)page - 1) / (size_t)page * (size_t)page;
	b = calloc(1, sizeof(*b));
	if (!b)
		return WSAENOBUFS;
	fd = memfd_create("nicsim-buffer", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, (off_t)len) < 0 || fcntl(fd, F_ADD_SEALS, seals) < 0 ||
	    (va = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
		if (fd >= 0)
			close(fd);
		free(b);
		return WSAENOBUFS;
	}
	*b = (struct prov_buf){.va = va, .len = len, .fd = fd};
	p = prov_lock();
	if (!p->starts) {
		err = WSANOTINITIALISED;
	} else {
		for (struct prov_nic *nic = p->nics; nic; nic = nic->next)
			map_on(nic, b);
		b->next = p->bufs;
		p->bufs = b;
		/* The monitor watches it: see prov_bufs_gone. */
		prov_mon_add((uintptr_t)va, len);
	}
	prov_unlock(p);
	if (err) {
		munmap(va, len);
		close(fd);
		free(b);
		return err;
	}
	*buf = va;
	return 0;
}

/* Have every NIC drop its map of b (prov.lock held). */
static void unmap_all(struct prov *p, const struct prov_buf *b)
{
	for (struct prov_nic *nic = p->nics; nic; nic = nic->next)
		if (!prov_nic_is_down(nic))
			(void)prov_nic_shm(nic, -1, b->va, 0);
}

/*
 * The application unmaps or replaces memory of a buffer itself (munmap,
 * mremap, mmap MAP_FIXED), not through nicsim_buffer_free.  The NICs reach
 * a map's memfd at its addresses whatever the process has there later
 * (docs/hardware-interface.md section 6.7), so they must drop their maps
 * before the change: the buffer ends here and its addresses become ordinary
 * memory to them.  What the application's call leaves mapped is its own to
 * unmap; nicsim_buffer_free no longer knows the buffer.
 */
void prov_bufs_gone(struct prov *p, uintptr_t addr, size_t len)
{
	struct prov_buf **pp = &p->bufs;

	while (*pp) {
		struct prov_buf *b = *pp;
		uintptr_t va = (uintptr_t)b->va;

		/* Overlap, without computing an end that could wrap. */
		if (va >= addr ? va - addr < len : addr - va < b->len) {
			*pp = b->next;
			unmap_all(p, b);
			prov_mon_del(va, b->len);
			close(b->fd);
			free(b);
		} else {
			pp = &b->next;
		}
	}
}

int nicsim_buffer_free(void *buf)
{
	struct prov_buf **pp, *b = NULL;
	struct prov *p = prov_lock();

	for (pp = &p->bufs; *pp; pp = &(*pp)->next) {
		if ((*pp)->va == buf) {
			b = *pp;
			*pp = b->next;
			break;
		}
	}
	if (b) {
		/* What unmapping ordinary memory does to the registrations in it
		 * (R10), then the NICs' maps. */
		prov_cache_invalidate(p, (uintptr_t)b->va, b->len);
		unmap_all(p, b);
		prov_mon_del((uintptr_t)b->va, b->len);
		munmap(b->va, b->len);
		close(b->fd);
	}
	prov_unlock(p);
	if (!b)
		return WSAEINVAL;
	free(b);
	return 0;
}

/*
 * Ports: opening and reclaiming, the frame pool and the tap (fab.h).  The
 * send side (the link model's verdict, rings, kicks and bells) is in
 * fab_port_tx.c, the receive side (rings into the delivery heap, sleeping)
 * in fab_port_rx.c.
 *
 * Who writes what.  The sender fills a frame's metadata, stores its holder
 * word (in flight to the destination's slot and generation) with release,
 * writes the ring slot and publishes prod with release.  The receiver reads
 * prod, then takes the frame with a compare-and-swap of the holder word (in
 * flight to me -> held by me, acquire), and only then reads the metadata,
 * which it validates before use.  The receiver alone writes cons.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fab_addr.h"
#include "fab_capture.h"
#include "fab_capture_priv.h"
#include "fab_priv.h"
#include "fab_wire.h"

uint64_t fab_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- Tap ------------------------------------------------------------------------- */

void fab_port_tap(struct fab_port *p, uint32_t idx, uint32_t len, uint32_t src, uint32_t dst,
		  uint32_t marks, uint64_t sent_ns, uint64_t due_ns, uint64_t link_seq, bool rx)
{
	uint64_t ctl = fab_tap_ctl(p->fab);
	struct fab_tap_frame f;

	if (!p->tap && !FAB_TAP_CTL_SNAP(ctl))
		return;
	f = (struct fab_tap_frame){
	    .data = fab_frame_at(p->fab, idx),
	    .len = len,
	    .idx = idx,
	    .src = src,
	    .dst = dst,
	    .marks = marks,
	    .sent_ns = sent_ns,
	    .due_ns = due_ns,
	    .link_seq = link_seq,
	};
	if (FAB_TAP_CTL_SNAP(ctl))
		fab_tap_ring_put(p->fab, p->slot, &p->tap_wait, ctl, &f, rx);
	if (p->tap)
		p->tap(p->tap_arg, &f);
}

void fab_port_tap_unit(struct fab_port *p, uint32_t idx, uint32_t len, uint32_t dst,
		       uint64_t sent_ns, uint64_t due_ns, uint64_t link_seq)
{
	uint64_t ctl = fab_tap_ctl(p->fab);
	uint32_t snap = FAB_TAP_CTL_SNAP(ctl);
	uint8_t *data = fab_frame_at(p->fab, idx);
	struct fab_tap_frame f;

	if (!snap)
		return;
	/* The capture computes the ICRC from a whole copy; one that keeps less
	 * than the frame gets it from here (the snap as fab_tap_ring_put
	 * clamps it). */
	if (snap < FAB_CAP_COPY_MIN)
		snap = FAB_CAP_COPY_MIN;
	f = (struct fab_tap_frame){
	    .data = data,
	    .len = len,
	    .idx = idx,
	    .src = p->addr,
	    .dst = dst,
	    .sent_ns = sent_ns,
	    .due_ns = due_ns,
	    .link_seq = link_seq,
	    .no_icrc = true,
	};
	if (snap < len) {
		fab_pkt_icrc_fill(data, len);
		f.no_icrc = false;
	}
	fab_tap_ring_put(p->fab, p->slot, &p->tap_wait, ctl, &f, false);
}

void fab_port_set_tap(struct fab_port *p, fab_tap_fn fn, void *arg)
{
	p->tap = fn;
	p->tap_arg = arg;
}

/* ---- Frames ---------------------------------------------------------------------------- */

/* Take frame i if it is free. */
static bool frame_take(struct fab_port *p, uint32_t i)
{
	uint64_t expect = 0;

	return __atomic_load_n(&p->fab->meta[i].holder, __ATOMIC_RELAXED) == 0 &&
	       __atomic_compare_exchange_n(&p->fab->meta[i].holder, &expect, p->holder, false,
					   __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

/*
 * Frames come from a span of FAB_HOT_FRAMES of the pool while it has a free
 * one, so that the frames a busy port writes are the ones it wrote a moment
 * ago and are still in the CPU's caches (cycling through the whole pool
 * halved bandwidth: every frame was a cache miss on both sides).  Frames
 * come back about in the order they were taken, so the first probe after
 * the span's cursor nearly always succeeds.  When the span is all in use
 * the next SPILL_GETS gets scan the whole pool.
 */
#define FAB_HOT_FRAMES 512u
#define SPILL_GETS 64u

int fab_frame_get(struct fab_port *p, uint32_t *idx, void **data)
{
	struct fab *fab = p->fab;
	/* The frames data may take: the pool but for the kept ones. */
	uint32_t n = fab->nframes - fab_ctl_frames(fab->nframes);
	uint32_t span = n < FAB_HOT_FRAMES ? n : FAB_HOT_FRAMES;
	uint32_t i, k;

	if (p->spill) {
		p->spill--;
	} else {
		for (k = 0, i = p->hot_cursor; k < span; k++) {
			uint32_t f = p->hot_base + i < n ? p->hot_base + i : p->hot_base + i - n;

			i = i + 1 == span ? 0 : i + 1;
			if (frame_take(p, f)) {
				p->hot_cursor = i;
				*idx = f;
				goto found;
			}
		}
		p->spill = SPILL_GETS;
	}
	for (k = 0, i = p->cursor; k < n; k++) {
		if (frame_take(p, i)) {
			p->cursor = i + 1 == n ? 0 : i + 1;
			*idx = i;
			goto found;
		}
		i = i + 1 == n ? 0 : i + 1;
	}
	return -ENOBUFS;
found:
	if (data)
		*data = fab_frame_at(fab, *idx);
	return 0;
}

int fab_frame_get_ctl(struct fab_port *p, uint32_t *idx, void **data)
{
	struct fab *fab = p->fab;
	uint32_t kept = fab_ctl_frames(fab->nframes), first = fab->nframes - kept;

	for (uint32_t k = 0, i = p->ctl_cursor; k < kept; k++) {
		if (frame_take(p, first + i)) {
			p->ctl_cursor = i + 1 == kept ? 0 : i + 1;
			*idx = first + i;
			if (data)
				*data = fab_frame_at(fab, *idx);
			return 0;
		}
		i = i + 1 == kept ? 0 : i + 1;
	}
	return fab_frame_get(p, idx, data);
}

int fab_frame_put(struct fab_port *p, uint32_t idx)
{
	if (!fab_port_holds(p, idx))
		return -EINVAL;
	fab_port_release(p, idx);
	return 0;
}

int fab_rx_done(struct fab_port *p, uint32_t idx)
{
	return fab_frame_put(p, idx);
}

void *fab_frame_data(struct fab_port *p, uint32_t idx)
{
	return fab_port_holds(p, idx) ? fab_frame_at(p->fab, idx) : NULL;
}

/* ---- Opening and closing ------------------------------------------------------------- */

int fab_port_fd(const struct fab_port *p)
{
	return p->bell_fd;
}

uint32_t fab_port_addr(const struct fab_port *p)
{
	return p->addr;
}

/* Create (or reuse) the bell FIFO and take its lock: the port's ownership. */
static int bell_open(const struct fab *fab, uint32_t addr, int *fd_out)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	char path[PATH_MAX];
	struct stat st;
	int fd, rc;

	rc = fab_bell_path(path, sizeof(path), fab->dir, addr);
	if (rc)
		return rc;
	if (mkfifo(path, 0600) < 0 && errno != EEXIST)
		return -errno;
	/* Read-write: the open does not wait for a writer, and the FIFO
	 * never reports end-of-file. */
	fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode)) {
		close(fd);
		return -EEXIST;
	}
	if (fcntl(fd, F_OFD_SETLK, &fl) < 0) {
		rc = errno == EAGAIN || errno == EACCES ? -EADDRINUSE : -errno;
		close(fd);
		return rc;
	}
	*fd_out = fd;
	return 0;
}

static void port_free(struct fab_port *p)
{
	uint32_t i;

	if (p->tx)
		for (i = 0; i < p->fab->max_ports; i++)
			if (p->tx[i].bell_fd >= 0)
				close(p->tx[i].bell_fd);
	if (p->bell_fd >= 0)
		close(p->bell_fd); /* drops the lock: the port is free */
	free(p->tx);
	free(p->rx);
	free(p->heap);
	free(p->queue);
	free(p);
}

/* Free every frame whose holder word names slot with a generation other
 * than keep (0: any generation).  Returns how many. */
static uint64_t reclaim(struct fab *fab, uint32_t slot, uint32_t keep)
{
	uint64_t h, n = 0;
	uint32_t i;

	for (i = 0; i < fab->nframes; i++) {
		h = __atomic_load_n(&fab->meta[i].holder, __ATOMIC_RELAXED);
		if (!h || FAB_HOLDER_SLOT(h) != slot || (keep && FAB_HOLDER_GEN(h) == keep))
			continue;
		if (__atomic_compare_exchange_n(&fab->meta[i].holder, &h, 0, false,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			n++;
	}
	return n;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int fab_port_open(struct fab *fab, uint32_t addr, struct fab_port **out)
{
	struct fab_seg_port *seg;
	struct fab_port *p;
	uint32_t i, gen, ndata;
	int slot, rc;

	*out = NULL;
	if (!fab_addr_valid(addr))
		return -EADDRNOTAVAIL;
	slot = fab_slot_claim(fab, addr);
	if (slot < 0)
		return slot;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->fab = fab;
	p->bell_fd = -1;
	p->tx = calloc(fab->max_ports, sizeof(*p->tx));
	p->rx = calloc(fab->max_ports, sizeof(*p->rx));
	p->heap = malloc((size_t)fab->nframes * sizeof(*p->heap));
	p->queue = malloc((size_t)fab->nframes * sizeof(*p->queue));
	if (!p->tx || !p->rx || !p->heap || !p->queue) {
		rc = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < fab->max_ports; i++) {
		p->tx[i].bell_fd = -1;
		fab_link_config_default(&p->tx[i].view.cfg);
		fab_link_config_default(&p->rx[i].cfg);
		/* Odd: never a settled sequence, so the first use reads the link. */
		p->tx[i].view.cfg_seq = UINT32_MAX;
		p->rx[i].cfg_seq = UINT32_MAX;
	}
	rc = bell_open(fab, addr, &p->bell_fd);
	if (rc)
		goto fail;

	/* The port is ours.  Take it over from whoever had it before. */
	p->slot = (uint32_t)slot;
	p->addr = addr;
	seg = p->seg = &fab->ports[slot];
	__atomic_store_n(&seg->state, FAB_PORT_CLOSED, __ATOMIC_RELEASE);
	/* Entries left in our rings belong to the old generation. */
	for (i = 0; i < fab->max_ports; i++) {
		struct fab_seg_link *l = fab_link_at(fab, i, p->slot);

		__atomic_store_n(&l->cons, __atomic_load_n(&l->prod, __ATOMIC_ACQUIRE),
				 __ATOMIC_RELEASE);
	}
	gen = __atomic_load_n(&seg->gen, __ATOMIC_RELAXED) + 1;
	p->gen = gen ? gen : 1;
	__atomic_store_n(&seg->gen, p->gen, __ATOMIC_RELEASE);
	p->holder = FAB_HOLDER(FAB_HOLD_HELD, p->slot, p->gen);
	fab_count(&seg->counters.reclaimed, reclaim(fab, p->slot, p->gen));
	fab_port_drain_bell(p);
	p->wakeups = 0;
	/* Spread the ports' allocation cursors over the pool. */
	ndata = fab->nframes - fab_ctl_frames(fab->nframes);
	p->cursor = (uint32_t)((uint64_t)ndata * p->slot / fab->max_ports);
	p->hot_base = (uint32_t)((uint64_t)p->slot * FAB_HOT_FRAMES % ndata);
	p->ctl_cursor = 0;
	p->scan_all = true;
	__atomic_store_n(&seg->owner_pid, (uint32_t)getpid(), __ATOMIC_RELAXED);
	__atomic_store_n(&seg->opened_ns, realtime_ns(), __ATOMIC_RELAXED);
	__atomic_store_n(&seg->sleeping, 0, __ATOMIC_RELAXED);
	for (i = 0; i < FAB_MAX_PORTS / 64; i++)
		__atomic_store_n(&seg->pending[i], 0, __ATOMIC_RELAXED);
	__atomic_store_n(&seg->state, FAB_PORT_OPEN, __ATOMIC_RELEASE);
	*out = p;
	return 0;
fail:
	port_free(p);
	return rc;
}

void fab_port_close(struct fab_port *p)
{
	if (!p)
		return;
	fab_udp_tx_flush(p);
	fab_port_udp_close(p);
	__atomic_store_n(&p->seg->state, FAB_PORT_CLOSED, __ATOMIC_RELEASE);
	__atomic_store_n(&p->seg->sleeping, 0, __ATOMIC_RELAXED);
	/* What has arrived, then everything else this generation holds (frames
	 * taken and not sent).  Frames still on their way are freed by the
	 * next open. */
	fab_port_rx_close(p);
	reclaim(p->fab, p->slot, 0);
	port_free(p);
}

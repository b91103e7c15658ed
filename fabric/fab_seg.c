/* The fabric segment: creating, checking, mapping and removing it; port
 * slots; snapshots for the CLI (fab.h, fab_seg.h). */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fab_addr.h"
#include "fab_priv.h"

/* Links and rings together stay under this by default (sparse until used). */
#define RING_BUDGET (64ull << 20)
#define RING_DEPTH_DEFAULT 1024u
#define RING_DEPTH_MIN_DEFAULT 64u
#define SEG_MAX_BYTES (16ull << 30)

struct layout {
	uint64_t ports_off, links_off, rings_off, meta_off, frames_off, tap_off, tap_size, size;
};

static uint64_t align_page(uint64_t v)
{
	return (v + FAB_PAGE - 1) & ~(uint64_t)(FAB_PAGE - 1);
}

static bool pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

/* The layout for these sizes: a pure function of them, so that fab_open()
 * can recompute it and compare.  -EINVAL when the sizes are out of range. */
static int layout_of(uint32_t ports, uint32_t frames, uint32_t depth, struct layout *lo)
{
	uint64_t pairs = (uint64_t)ports * ports;

	if (ports < 1 || ports > FAB_MAX_PORTS || frames < 1 || frames > FAB_MAX_FRAMES ||
	    depth < 2 || depth > FAB_MAX_RING_DEPTH || !pow2(depth))
		return -EINVAL;
	lo->ports_off = FAB_PAGE;
	lo->links_off = align_page(lo->ports_off + ports * sizeof(struct fab_seg_port));
	lo->rings_off = align_page(lo->links_off + pairs * sizeof(struct fab_seg_link));
	lo->meta_off = align_page(lo->rings_off + pairs * depth * sizeof(uint32_t));
	lo->frames_off = align_page(lo->meta_off + (uint64_t)frames * sizeof(struct fab_seg_frame));
	lo->tap_off = align_page(lo->frames_off + (uint64_t)frames * FAB_SLOT_BYTES);
	lo->tap_size = fab_tap_size(ports);
	lo->size = lo->tap_off + lo->tap_size;
	return lo->size > SEG_MAX_BYTES ? -EINVAL : 0;
}

static uint32_t default_depth(uint32_t ports)
{
	uint64_t pairs = (uint64_t)ports * ports;
	uint32_t depth = RING_DEPTH_DEFAULT;

	while (depth > RING_DEPTH_MIN_DEFAULT && pairs * depth * sizeof(uint32_t) > RING_BUDGET)
		depth /= 2;
	return depth;
}

static int seg_path(char *buf, size_t size, const char *dir, const char *name)
{
	int n = snprintf(buf, size, "%s/%s", dir, name);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int fab_bell_path(char *buf, size_t size, const char *dir, uint32_t addr)
{
	char a[FAB_ADDR_STRLEN];
	int n;

	fab_addr_format(addr, a, sizeof(a));
	n = snprintf(buf, size, "%s/" FAB_BELL_PREFIX "%s" FAB_BELL_SUFFIX, dir, a);
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* Whether a live process holds the OFD write lock on the bell at path. */
static bool bell_path_locked(const char *path)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	bool locked;
	int fd;

	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return false;
	locked = fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
	close(fd);
	return locked;
}

bool fab_bell_locked(const char *dir, uint32_t addr)
{
	char path[PATH_MAX];

	return fab_bell_path(path, sizeof(path), dir, addr) == 0 && bell_path_locked(path);
}

/* ---- Slots ---------------------------------------------------------------- */

/* Slots are found by linear probing from the address's home slot (host
 * number modulo max_ports, so 198.18.0.N sits in slot N for small
 * fabrics).  A slot is bound once and never released while the segment
 * exists, so a probe sequence ends at the first unbound slot. */
static uint32_t home_slot(const struct fab *fab, uint32_t addr)
{
	return (ntohl(addr) - FAB_ADDR_NET) % fab->max_ports;
}

int fab_slot_find(const struct fab *fab, uint32_t addr)
{
	uint32_t s = home_slot(fab, addr), i, a;

	for (i = 0; i < fab->max_ports; i++) {
		a = __atomic_load_n(&fab->ports[s].addr, __ATOMIC_ACQUIRE);
		if (a == addr)
			return (int)s;
		if (a == 0)
			return -ENOENT;
		s = s + 1 == fab->max_ports ? 0 : s + 1;
	}
	return -ENOENT;
}

int fab_slot_claim(struct fab *fab, uint32_t addr)
{
	uint32_t s = home_slot(fab, addr), i, a;

	for (i = 0; i < fab->max_ports; i++) {
		a = __atomic_load_n(&fab->ports[s].addr, __ATOMIC_ACQUIRE);
		if (a == 0 && __atomic_compare_exchange_n(&fab->ports[s].addr, &a, addr, false,
							  __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			return (int)s;
		/* Bound, by us or by whoever won the race for it. */
		if (a == addr)
			return (int)s;
		s = s + 1 == fab->max_ports ? 0 : s + 1;
	}
	return -ENOSPC;
}

int fab_port_claim(struct fab *fab, uint32_t addr)
{
	int s;

	if (!fab_addr_valid(addr))
		return -EADDRNOTAVAIL;
	s = fab_slot_claim(fab, addr);
	return s < 0 ? s : 0;
}

/* ---- Mapping -------------------------------------------------------------- */

static void fab_map(struct fab *fab, uint8_t *base, size_t size, const struct fab_seg_hdr *h,
		    const struct layout *lo)
{
	fab->base = base;
	fab->size = size;
	fab->hdr = (struct fab_seg_hdr *)base;
	fab->ports = (struct fab_seg_port *)(base + lo->ports_off);
	fab->links = (struct fab_seg_link *)(base + lo->links_off);
	fab->rings = (uint32_t *)(base + lo->rings_off);
	fab->meta = (struct fab_seg_frame *)(base + lo->meta_off);
	fab->frames = base + lo->frames_off;
	fab->max_ports = h->max_ports;
	fab->nframes = h->nframes;
	fab->ring_depth = h->ring_depth;
	fab->seed = h->seed;
}

/* Check a header read from a file of file_size bytes; fills lo. */
static int check_hdr(const struct fab_seg_hdr *h, uint64_t file_size, struct layout *lo)
{
	if (h->magic != FAB_SEG_MAGIC || h->version != FAB_SEG_VERSION ||
	    h->hdr_size != sizeof(*h) || h->port_size != sizeof(struct fab_seg_port) ||
	    h->link_size != sizeof(struct fab_seg_link) ||
	    h->meta_size != sizeof(struct fab_seg_frame) || h->slot_bytes != FAB_SLOT_BYTES)
		return -EPROTO;
	if (layout_of(h->max_ports, h->nframes, h->ring_depth, lo))
		return -EPROTO;
	if (h->ports_off != lo->ports_off || h->links_off != lo->links_off ||
	    h->rings_off != lo->rings_off || h->meta_off != lo->meta_off ||
	    h->frames_off != lo->frames_off || h->seg_size != lo->size ||
	    h->tap_off != lo->tap_off || h->tap_size != lo->tap_size ||
	    h->tap_ring_bytes != fab_tap_ring_bytes(h->max_ports) || file_size != lo->size)
		return -EPROTO;
	return 0;
}

int fab_check(const struct fab *fab)
{
	struct fab_seg_hdr h;
	struct layout lo;

	/* A copy: other processes may be writing over the one in the segment. */
	memcpy(&h, fab->hdr, sizeof(h));
	if (check_hdr(&h, fab->size, &lo) || h.max_ports != fab->max_ports ||
	    h.nframes != fab->nframes || h.ring_depth != fab->ring_depth)
		return -EPROTO;
	return 0;
}

int fab_open(const char *dir, struct fab **out)
{
	char path[PATH_MAX];
	struct fab_seg_hdr h;
	struct layout lo;
	struct fab *fab;
	struct stat st;
	void *base;
	ssize_t n;
	int rc;

	*out = NULL;
	fab = calloc(1, sizeof(*fab));
	if (!fab)
		return -ENOMEM;
	fab->fd = -1;
	rc = -ENAMETOOLONG;
	if ((size_t)snprintf(fab->dir, sizeof(fab->dir), "%s", dir) >= sizeof(fab->dir))
		goto fail;
	rc = seg_path(path, sizeof(path), dir, FAB_SEG_FILE);
	if (rc)
		goto fail;
	fab->fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fab->fd < 0) {
		rc = -errno;
		goto fail;
	}
	if (fstat(fab->fd, &st) < 0) {
		rc = -errno;
		goto fail;
	}
	rc = -EPROTO;
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size < sizeof(h))
		goto fail;
	n = pread(fab->fd, &h, sizeof(h), 0);
	if (n != (ssize_t)sizeof(h))
		goto fail;
	rc = check_hdr(&h, (uint64_t)st.st_size, &lo);
	if (rc)
		goto fail;
	base = mmap(NULL, lo.size, PROT_READ | PROT_WRITE, MAP_SHARED, fab->fd, 0);
	if (base == MAP_FAILED) {
		rc = -errno;
		goto fail;
	}
	/* The sizes come from the copy that was checked, not from the map. */
	fab_map(fab, base, lo.size, &h, &lo);
	*out = fab;
	return 0;
fail:
	if (fab->fd >= 0)
		close(fab->fd);
	free(fab);
	return rc;
}

void fab_close(struct fab *fab)
{
	if (!fab)
		return;
	if (fab->base)
		munmap(fab->base, fab->size);
	if (fab->fd >= 0)
		close(fab->fd);
	free(fab);
}

/* ---- Create and destroy --------------------------------------------------- */

/* Whether a live process owns any port whose bell is in dir. */
static bool any_bell_locked(const char *dir)
{
	size_t plen = strlen(FAB_BELL_PREFIX), slen = strlen(FAB_BELL_SUFFIX), len;
	char path[PATH_MAX];
	struct dirent *de;
	bool locked = false;
	DIR *d;

	d = opendir(dir);
	if (!d)
		return false;
	while (!locked && (de = readdir(d))) {
		len = strlen(de->d_name);
		if (len <= plen + slen || strncmp(de->d_name, FAB_BELL_PREFIX, plen) ||
		    strcmp(de->d_name + len - slen, FAB_BELL_SUFFIX))
			continue;
		if (seg_path(path, sizeof(path), dir, de->d_name) == 0)
			locked = bell_path_locked(path);
	}
	closedir(d);
	return locked;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t fab_create_bytes(const struct fab_config *cfg)
{
	uint32_t ports = cfg->max_ports ? cfg->max_ports : FAB_DEFAULT_PORTS;
	uint32_t frames = cfg->frames ? cfg->frames : FAB_DEFAULT_FRAMES;
	uint32_t depth = cfg->ring_depth ? cfg->ring_depth : default_depth(ports);
	struct layout lo;

	return layout_of(ports, frames, depth, &lo) ? 0 : (uint64_t)lo.tap_off;
}

int fab_create(const char *dir, const struct fab_config *cfg)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	struct fab fab = {.fd = -1};
	struct fab_seg_hdr *h;
	struct layout lo;
	uint32_t ports, frames, depth;
	void *base;
	size_t i;
	int fd, rc;

	ports = cfg->max_ports ? cfg->max_ports : FAB_DEFAULT_PORTS;
	frames = cfg->frames ? cfg->frames : FAB_DEFAULT_FRAMES;
	depth = cfg->ring_depth ? cfg->ring_depth : default_depth(ports);
	rc = layout_of(ports, frames, depth, &lo);
	if (rc)
		return rc;
	if (cfg->naddrs > ports)
		return -ENOSPC;
	for (i = 0; i < cfg->naddrs; i++)
		if (!fab_addr_valid(cfg->addrs[i]))
			return -EADDRNOTAVAIL;
	rc = seg_path(path, sizeof(path), dir, FAB_SEG_FILE);
	if (rc)
		return rc;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	if (any_bell_locked(dir))
		return -EBUSY;

	unlink(tmp);
	fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)lo.size) < 0) {
		rc = -errno;
		goto fail;
	}
	/* Reserve the space now, so that a full disk is an error here rather
	 * than a SIGBUS in a NIC later; file systems without fallocate keep a
	 * sparse file.  The capture section stays sparse: a capture reserves
	 * it when it attaches (fab_capture.h). */
	rc = posix_fallocate(fd, 0, (off_t)lo.tap_off);
	if (rc && rc != EOPNOTSUPP && rc != EINVAL) {
		rc = -rc;
		goto fail;
	}
	base = mmap(NULL, lo.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		rc = -errno;
		goto fail;
	}
	h = base;
	*h = (struct fab_seg_hdr){
	    .magic = FAB_SEG_MAGIC,
	    .version = FAB_SEG_VERSION,
	    .hdr_size = sizeof(*h),
	    .port_size = sizeof(struct fab_seg_port),
	    .link_size = sizeof(struct fab_seg_link),
	    .meta_size = sizeof(struct fab_seg_frame),
	    .slot_bytes = FAB_SLOT_BYTES,
	    .seg_size = lo.size,
	    .max_ports = ports,
	    .nframes = frames,
	    .ring_depth = depth,
	    .creator_pid = (uint32_t)getpid(),
	    .ports_off = lo.ports_off,
	    .links_off = lo.links_off,
	    .rings_off = lo.rings_off,
	    .meta_off = lo.meta_off,
	    .frames_off = lo.frames_off,
	    .tap_off = lo.tap_off,
	    .tap_size = lo.tap_size,
	    .seed = cfg->seed,
	    .created_ns = realtime_ns(),
	    .tap_ring_bytes = fab_tap_ring_bytes(ports),
	};
	/* Everything else starts as zero: free frames, empty rings, unbound
	 * slots, default links. */
	fab_map(&fab, base, lo.size, h, &lo);
	for (i = 0; i < cfg->naddrs; i++) {
		int s = fab_slot_claim(&fab, cfg->addrs[i]);

		if (s < 0) {
			rc = s;
			munmap(base, lo.size);
			goto fail;
		}
	}
	munmap(base, lo.size);
	if (fsync(fd) < 0 && errno != EINVAL && errno != EROFS) {
		rc = -errno;
		goto fail;
	}
	close(fd);
	if (rename(tmp, path) < 0) {
		rc = -errno;
		unlink(tmp);
		return rc;
	}
	return 0;
fail:
	close(fd);
	unlink(tmp);
	return rc;
}

int fab_destroy_files(const char *dir)
{
	size_t plen = strlen(FAB_BELL_PREFIX), slen = strlen(FAB_BELL_SUFFIX), len;
	char path[PATH_MAX], tmp_prefix[64];
	struct dirent *de;
	bool found = false;
	DIR *d;

	d = opendir(dir);
	if (!d)
		return -errno;
	if (any_bell_locked(dir)) {
		closedir(d);
		return -EBUSY;
	}
	snprintf(tmp_prefix, sizeof(tmp_prefix), "%s.tmp.", FAB_SEG_FILE);
	while ((de = readdir(d))) {
		len = strlen(de->d_name);
		bool bell = len > plen + slen && !strncmp(de->d_name, FAB_BELL_PREFIX, plen) &&
			    !strcmp(de->d_name + len - slen, FAB_BELL_SUFFIX);
		bool seg = !strcmp(de->d_name, FAB_SEG_FILE) ||
			   !strncmp(de->d_name, tmp_prefix, strlen(tmp_prefix));

		if (!bell && !seg)
			continue;
		if (seg_path(path, sizeof(path), dir, de->d_name) == 0 && unlink(path) == 0)
			found |= seg;
	}
	closedir(d);
	return found ? 0 : -ENOENT;
}

/* ---- Snapshots ------------------------------------------------------------ */

int fab_info(struct fab *fab, struct fab_info *info)
{
	uint64_t h;
	uint32_t i;

	memset(info, 0, sizeof(*info));
	info->max_ports = fab->max_ports;
	info->nframes = fab->nframes;
	info->ring_depth = fab->ring_depth;
	info->slot_bytes = FAB_SLOT_BYTES;
	info->seg_size = fab->size;
	info->seed = fab->seed;
	info->created_ns = fab->hdr->created_ns;
	info->creator_pid = fab->hdr->creator_pid;
	for (i = 0; i < fab->max_ports; i++)
		info->ports_bound += __atomic_load_n(&fab->ports[i].addr, __ATOMIC_RELAXED) != 0;
	for (i = 0; i < fab->nframes; i++) {
		h = __atomic_load_n(&fab->meta[i].holder, __ATOMIC_RELAXED);
		if (h == 0)
			info->frames_free++;
		else if (FAB_HOLDER_STATE(h) == FAB_HOLD_INFLIGHT)
			info->frames_in_flight++;
		else
			info->frames_held++;
	}
	return 0;
}

int fab_port_owner(struct fab *fab, uint32_t addr, uint32_t *pid, uint32_t *gen)
{
	const struct fab_seg_port *p;
	int slot;

	if (!fab_addr_valid(addr))
		return -EADDRNOTAVAIL;
	slot = fab_slot_find(fab, addr);
	if (slot < 0)
		return -EHOSTUNREACH;
	p = &fab->ports[slot];
	if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != FAB_PORT_OPEN)
		return -EHOSTUNREACH;
	*gen = __atomic_load_n(&p->gen, __ATOMIC_ACQUIRE);
	*pid = __atomic_load_n(&p->owner_pid, __ATOMIC_RELAXED);
	/* The lock last: an owner that died after the loads above is not live. */
	if (!*pid || !fab_bell_locked(fab->dir, addr))
		return -EHOSTUNREACH;
	return 0;
}

int fab_port_list(struct fab *fab, struct fab_port_info **list, size_t *count)
{
	struct fab_port_info *l;
	uint32_t *held, i, a;
	uint64_t h;
	size_t n = 0;

	*list = NULL;
	*count = 0;
	l = calloc(fab->max_ports, sizeof(*l));
	held = calloc(fab->max_ports, sizeof(*held));
	if (!l || !held) {
		free(l);
		free(held);
		return -ENOMEM;
	}
	for (i = 0; i < fab->nframes; i++) {
		h = __atomic_load_n(&fab->meta[i].holder, __ATOMIC_RELAXED);
		if (h && FAB_HOLDER_SLOT(h) < fab->max_ports)
			held[FAB_HOLDER_SLOT(h)]++;
	}
	for (i = 0; i < fab->max_ports; i++) {
		const struct fab_seg_port *p = &fab->ports[i];

		a = __atomic_load_n(&p->addr, __ATOMIC_ACQUIRE);
		if (!a)
			continue;
		l[n].addr = a;
		l[n].slot = i;
		l[n].open = __atomic_load_n(&p->state, __ATOMIC_ACQUIRE) == FAB_PORT_OPEN;
		l[n].live = fab_addr_valid(a) && fab_bell_locked(fab->dir, a);
		l[n].pid = __atomic_load_n(&p->owner_pid, __ATOMIC_RELAXED);
		l[n].gen = __atomic_load_n(&p->gen, __ATOMIC_RELAXED);
		l[n].opened_ns = __atomic_load_n(&p->opened_ns, __ATOMIC_RELAXED);
		l[n].frames_held = held[i];
#define FAB_X_COPY(name, desc) \
	l[n].counters.name = __atomic_load_n(&p->counters.name, __ATOMIC_RELAXED);
		FAB_PORT_COUNTERS(FAB_X_COPY)
#undef FAB_X_COPY
		n++;
	}
	free(held);
	if (!n) {
		free(l);
		l = NULL;
	}
	*list = l;
	*count = n;
	return 0;
}

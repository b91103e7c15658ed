/*
 * The registration cache (R7-R11; docs/registration-cache.md).
 *
 * Every registration the provider holds is an entry (struct prov_mr) that
 * the cache tracks: in prov.mr_hash by its exact key (NIC, address, length,
 * flags, kind) for the registration calls, in an interval index by its
 * virtual range for invalidation, and in the memory monitor's filter.  The
 * cache's own reference is `tracked`; `users` counts the registrations and
 * exposures using it.
 *
 *   R7  When the last local registration of an entry goes, the entry stays
 *       pinned and registered, unused, at the tail of an LRU list, and keeps
 *       an idle instance for each socket that registered it (R11 below).  A
 *       later WSPRegisterMemory of the same key finds it in the hash and
 *       takes it off the LRU: no pinning, no NIC command, no system call.
 *   R8  Remote exposures: with memory windows (rdma.c) the region behind
 *       them is an entry like any other, and only the window goes when the
 *       exposure does (DEALLOC_MW: the peer's key dies at once); without
 *       windows, the exposure's own region is deregistered from the NIC but
 *       stays pinned as an unused entry, registered again on reuse.
 *   R9  prov_cache_invalidate() drops every entry overlapping a range, on
 *       every NIC, whoever registered it: unused entries are released,
 *       entries in use lose their windows, NIC registration and pins and
 *       wait for their users to let go (their handles stay valid for that).
 *   R10 The memory monitor (monitor.c) calls prov_cache_invalidate() before
 *       the application's munmap, mremap, madvise, brk, sbrk, free or
 *       realloc of memory a registration covers changes the mapping.
 *   R11 A closing socket releases the unused entries it registered.
 *
 * Limits: when the tracked entries or the bytes they cover exceed the
 * configured maxima, unused entries are evicted, least recently used first;
 * entries in use are never evicted, so the limits never make a registration
 * fail.  A full TPT or a pin refused for lack of locked memory evicts too
 * (mr.c).  An unused entry is kept only while caching is on and some socket
 * holds an idle instance of it, so every cached entry goes at the latest
 * when the last socket that registered it closes (and before its NIC is
 * detached).
 *
 * Everything here runs under prov.lock.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nicsim_rundir.h"
#include "prov.h"

#define CACHE_MAX_ENTRIES_DEFAULT 262144u
#define CACHE_MAX_BYTES_DEFAULT (4ull << 30)
#define INVALIDATE_BATCH 64u

/* Add d to a counter, process-wide and in nic's context header. */
#define STAT_ADD(p, nic, field, d)                                                                \
	do {                                                                                      \
		(p)->cache.stats.field += (uint64_t)(d);                                          \
		if ((nic)->hstats)                                                                \
			__atomic_store_n(&(nic)->hstats->field,                                   \
					 (nic)->hstats->field + (uint64_t)(d), __ATOMIC_RELAXED); \
	} while (0)

/* ---- Configuration -------------------------------------------------------- */

/* A size from the environment: digits with an optional k, m, g or t suffix (x1024). */
static int env_size(const char *name, uint64_t *out)
{
	const char *v = getenv(name);
	unsigned long long n;
	char *end;
	int shift = 0;

	if (!v || !*v)
		return 0;
	errno = 0;
	n = strtoull(v, &end, 10);
	switch (*end) {
	case 'k':
	case 'K': shift = 10; break;
	case 'm':
	case 'M': shift = 20; break;
	case 'g':
	case 'G': shift = 30; break;
	case 't':
	case 'T': shift = 40; break;
	case '\0': break;
	default: shift = -1; break;
	}
	if (shift > 0)
		end++;
	if (errno || end == v || *end || shift < 0 || v[0] == '-' ||
	    (shift && n > (UINT64_MAX >> shift))) {
		fprintf(stderr,
			"nicsim: %s=\"%s\" is not a size (digits with k, m, g or t); "
			"using the default\n",
			name, v);
		return -EINVAL;
	}
	*out = (uint64_t)n << shift;
	return 0;
}

void prov_cache_start(struct prov *p)
{
	struct prov_cache *c = &p->cache;
	const char *on = getenv("NICSIM_CACHE");
	uint64_t v;
	unsigned mon = 0;
	char why[256];
	bool want = true;

	memset(&c->index, 0, sizeof(c->index));
	c->lru_head = c->lru_tail = NULL;
	memset(&c->stats, 0, sizeof(c->stats));
	c->max_entries = CACHE_MAX_ENTRIES_DEFAULT;
	c->max_bytes = CACHE_MAX_BYTES_DEFAULT;
	if (on && (!strcmp(on, "0") || !strcmp(on, "off")))
		want = false;
	else if (on && *on && strcmp(on, "1") && strcmp(on, "on")) {
		char shown[256];

		fprintf(stderr, "nicsim: NICSIM_CACHE=\"%s\": expected on or off; caching on\n",
			nic_escape(shown, sizeof(shown), on));
	}
	if (!env_size("NICSIM_CACHE_MAX_ENTRIES", &v) && getenv("NICSIM_CACHE_MAX_ENTRIES"))
		c->max_entries = v;
	if (!env_size("NICSIM_CACHE_MAX_BYTES", &v) && getenv("NICSIM_CACHE_MAX_BYTES"))
		c->max_bytes = v;

	/* The monitor protects registrations in use too, so it starts anyway. */
	if (prov_mon_start(&mon, why, sizeof(why))) {
		/* Fail closed: nothing may stay registered that nobody watches. */
		if (want && !c->warned)
			fprintf(stderr, "nicsim: registration cache off: %s\n", why);
		c->warned = c->warned || want;
		want = false;
	}
	c->enabled = want;
	c->stats.magic = NIC_HOST_CACHE_MAGIC;
	c->stats.flags = (want ? NIC_HOST_CACHE_ON : 0) |
			 (mon & PROV_MON_UNMAP ? NIC_HOST_CACHE_MONITOR : 0) |
			 (mon & PROV_MON_FREE ? NIC_HOST_CACHE_FREE : 0);
}

void prov_cache_attach(struct prov *p, struct prov_nic *nic)
{
	struct nic_ctx_hdr *hdr = nic_host_segment(nic->host, NULL);
	struct nic_host_cache_stats *h = &hdr->host_cache;

	/* The NIC zero-filled the segment: only what is published counts. */
	__atomic_store_n(&h->flags, p->cache.stats.flags, __ATOMIC_RELAXED);
	__atomic_store_n(&h->bytes_pinned, p->cache.stats.bytes_pinned, __ATOMIC_RELAXED);
	__atomic_store_n(&h->magic, NIC_HOST_CACHE_MAGIC, __ATOMIC_RELEASE);
	nic->hstats = h;
}

void prov_cache_pins_changed(struct prov *p)
{
	uint64_t b = (uint64_t)prov_pins_pages(&p->pins) << p->pins.page_shift;

	p->cache.stats.bytes_pinned = b;
	for (struct prov_nic *nic = p->nics; nic; nic = nic->next)
		if (nic->hstats)
			__atomic_store_n(&nic->hstats->bytes_pinned, b, __ATOMIC_RELAXED);
}

/* ---- Tracking and the LRU ------------------------------------------------- */

static void lru_push(struct prov_cache *c, struct prov_mr *mr)
{
	mr->lru_next = NULL;
	mr->lru_prev = c->lru_tail;
	if (c->lru_tail)
		c->lru_tail->lru_next = mr;
	else
		c->lru_head = mr;
	c->lru_tail = mr;
	mr->lru = true;
}

static void lru_remove(struct prov_cache *c, struct prov_mr *mr)
{
	if (mr->lru_prev)
		mr->lru_prev->lru_next = mr->lru_next;
	else
		c->lru_head = mr->lru_next;
	if (mr->lru_next)
		mr->lru_next->lru_prev = mr->lru_prev;
	else
		c->lru_tail = mr->lru_prev;
	mr->lru_prev = mr->lru_next = NULL;
	mr->lru = false;
}

void prov_cache_track(struct prov *p, struct prov_mr *mr)
{
	prov_hash_insert(&p->mr_hash, &mr->hnode, prov_mr_hash(mr));
	mr->ivn.start = mr->va;
	mr->ivn.last = mr->va + mr->len - 1;
	prov_iv_insert(&p->cache.index, &mr->ivn);
	prov_mon_add(mr->va, mr->len);
	mr->tracked = true;
	STAT_ADD(p, mr->nic, entries, 1);
	STAT_ADD(p, mr->nic, bytes, mr->len);
}

static void untrack(struct prov *p, struct prov_mr *mr)
{
	if (mr->lru) {
		lru_remove(&p->cache, mr);
		STAT_ADD(p, mr->nic, unused, -1);
	}
	prov_hash_remove(&p->mr_hash, &mr->hnode);
	prov_iv_remove(&p->cache.index, &mr->ivn);
	prov_mon_del(mr->va, mr->len);
	mr->tracked = false;
	STAT_ADD(p, mr->nic, entries, -1);
	STAT_ADD(p, mr->nic, bytes, -(int64_t)mr->len);
}

void prov_mr_destroy(struct prov *p, struct prov_mr *mr)
{
	if (mr->tracked)
		untrack(p, mr);
	while (mr->insts)
		prov_inst_unlink(p, mr->insts);
	prov_slot_free(&p->mrs, mr);
}

void prov_cache_miss(struct prov *p, struct prov_nic *nic)
{
	STAT_ADD(p, nic, misses, 1);
}

void prov_cache_use(struct prov *p, struct prov_mr *mr, bool hit)
{
	if (mr->lru) {
		lru_remove(&p->cache, mr);
		STAT_ADD(p, mr->nic, unused, -1);
	}
	mr->users++;
	if (hit)
		STAT_ADD(p, mr->nic, hits, 1);
}

/* Release an unused entry to make room; counted as an eviction. */
static void evict(struct prov *p, struct prov_mr *mr)
{
	STAT_ADD(p, mr->nic, evictions, 1);
	prov_mr_release(p, mr);
}

static void enforce_limits(struct prov *p)
{
	struct prov_cache *c = &p->cache;

	while (c->lru_head && (c->stats.entries > c->max_entries || c->stats.bytes > c->max_bytes))
		evict(p, c->lru_head);
}

void prov_cache_unuse(struct prov *p, struct prov_mr *mr)
{
	if (mr->tracked && p->cache.enabled && mr->insts) {
		lru_push(&p->cache, mr);
		STAT_ADD(p, mr->nic, unused, 1);
		enforce_limits(p);
		return;
	}
	prov_mr_release(p, mr);
}

bool prov_cache_evict(struct prov *p, struct prov_nic *nic, int need)
{
	for (struct prov_mr *mr = p->cache.lru_head; mr; mr = mr->lru_next) {
		if (need == PROV_EVICT_TPT ? mr->nic == nic && mr->registered : mr->pinned) {
			evict(p, mr);
			return true;
		}
	}
	return false;
}

/* ---- Invalidation (R9, R10) ------------------------------------------------ */

struct collect {
	struct prov_mr **v;
	size_t n, cap;
	struct prov_mr *stack[INVALIDATE_BATCH];
	bool nomem;
};

static int collect_one(struct prov_ivnode *n, void *arg)
{
	struct collect *c = arg;

	if (c->n == c->cap) {
		size_t cap = c->cap * 2;
		struct prov_mr **v = malloc(cap * sizeof(*v));

		if (!v) {
			c->nomem = true;
			return 1;
		}
		memcpy(v, c->v, c->n * sizeof(*v));
		if (c->v != c->stack)
			free(c->v);
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n++] = prov_container_of(n, struct prov_mr, ivn);
	return 0;
}

/* Take every window's access away from an entry in use (NIC first, then the record). */
static int kill_windows(struct prov_mr *mr)
{
	int rc = 0;

	for (struct prov_win *w = mr->wins; w; w = w->mr_next) {
		if (w->dead)
			continue;
		if (w->mw_key) {
			struct nic_cmd cmd = {.opcode = NIC_CMD_DEALLOC_MW};
			int err;

			cmd.u.key.key = w->mw_key;
			err = prov_nic_exec(mr->nic, &cmd, NULL);
			if (err && err != -ENOENT)
				rc = err;
			w->mw_key = 0;
		}
		w->dead = true;
	}
	return rc;
}

/* Drop one entry from the cache; 0 or the NIC's error. */
static int drop(struct prov *p, struct prov_mr *mr)
{
	int err, rc;

	STAT_ADD(p, mr->nic, invalidations, 1);
	untrack(p, mr);
	if (mr->users == 0)
		return prov_mr_release(p, mr);
	/* In use: the NIC forgets it now, its users' records stay until they go. */
	rc = kill_windows(mr);
	err = prov_mr_dereg(p, mr, true);
	prov_mr_unpin(p, mr);
	return rc ? rc : err;
}

int prov_cache_invalidate(struct prov *p, uint64_t va, uint64_t len)
{
	struct collect c = {.cap = INVALIDATE_BATCH};
	uint64_t last;
	size_t total = 0;
	int rc = 0;

	if (!len)
		return -ENOENT;
	last = len - 1 > UINT64_MAX - va ? UINT64_MAX : va + len - 1;
	c.v = c.stack;
	/*
	 * Collect first, then drop: dropping changes the index.  Should the
	 * list not fit in memory, drop what was collected and look again.
	 */
	do {
		c.n = 0;
		c.nomem = false;
		prov_iv_overlap(&p->cache.index, va, last, collect_one, &c);
		for (size_t i = 0; i < c.n; i++)
			if (drop(p, c.v[i]))
				rc = -EFAULT;
		total += c.n;
	} while (c.nomem && c.n);
	if (c.v != c.stack)
		free(c.v);
	if (c.nomem && !c.n)
		return -EFAULT; /* not even one entry could be collected */
	if (!total)
		return -ENOENT;
	return rc;
}

/* ---- Sockets and clean-up --------------------------------------------------- */

void prov_cache_release_sock(struct prov *p, struct prov_sock *sk)
{
	while (sk->idle) {
		struct prov_inst *inst = sk->idle;
		struct prov_mr *mr = inst->mr;

		prov_inst_unlink(p, inst);
		if (mr->users == 0)
			prov_mr_release(p, mr);
	}
}

void prov_cache_flush(struct prov *p)
{
	while (p->cache.lru_head)
		prov_mr_release(p, p->cache.lru_head);
}

/*
 * The public counters (nicsim_provider.h) are a copy of the ones published in
 * the context headers (nicsim_abi.h), field by field: the application's
 * structure does not change when the shared layout does.
 */
int nicsim_cache_stats(struct nicsim_cache_stats *out)
{
	struct nic_host_cache_stats s;
	struct prov *p;
	int err = 0;

	if (!out)
		return WSAEFAULT;
	p = prov_lock();
	if (p->starts)
		s = p->cache.stats;
	else
		err = WSANOTINITIALISED;
	prov_unlock(p);
	if (err)
		return err;
	*out = (struct nicsim_cache_stats){
	    .flags = (s.flags & NIC_HOST_CACHE_ON ? NICSIM_CACHE_ON : 0) |
		     (s.flags & NIC_HOST_CACHE_MONITOR ? NICSIM_CACHE_MONITOR : 0) |
		     (s.flags & NIC_HOST_CACHE_FREE ? NICSIM_CACHE_FREE : 0),
	    .hits = s.hits,
	    .misses = s.misses,
	    .evictions = s.evictions,
	    .invalidations = s.invalidations,
	    .entries = s.entries,
	    .unused = s.unused,
	    .bytes = s.bytes,
	    .bytes_pinned = s.bytes_pinned,
	};
	return 0;
}

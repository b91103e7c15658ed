/*
 * Translation/protection table: see tpt.h for the contract.
 *
 * Layout.  The table is one anonymous mapping of capacity + 1 entries of 64
 * bytes, page-aligned and so cache-line aligned: checking a key touches
 * exactly one line (two for a window, whose grant reaches its region's
 * owner).  Index 0 is never handed out.  The mapping's pages are zero and
 * become resident only when first touched, whatever the allocator (calloc
 * would leave that to malloc's choices, and valgrind's fills it), so an index
 * costs resident memory only once it is first used; the
 * high-water mark hands out never-used indices in order, and freed indices
 * go on a LIFO free list threaded through the entries themselves, so that a
 * reused index is one the cache has probably seen recently.  Because a fresh
 * index is taken only when the free list is empty, the high-water mark is
 * also the largest number of entries ever in use at once.
 *
 * Keys.  The key byte of an index is incremented (mod 256) on every
 * allocation and every window bind, and left alone when the entry is freed:
 * an old key for a freed, not yet reused, entry still names that entry and
 * is refused as "not valid" with the entry's history in the fault record;
 * once the index is reused, the old key is refused as stale.  The byte of a
 * never-used index is 0 and the first allocation makes it 1; a key naming an
 * index above the high-water mark was never issued and is refused as stale
 * (forged), with entry key 0 in the record.
 *
 * Page list.  The NIC reaches host memory by virtual address with
 * process_vm_readv, so a region's "physical page list" is the page-aligned
 * run of the owner's address space covering [va, va + len).  That run is a
 * pure function of va, len and the table's page size, so it is computed when
 * asked for (page_run()) rather than stored: storing it would cost 16 bytes
 * per entry and push the entry past one cache line.
 *
 * Windows and their region.  A window holds a link to the region it was
 * bound to, and the region counts its linked windows (nbound).  A region
 * cannot be deregistered while the count is not zero (-EBUSY), so a window's
 * DMA can never outlive the pages it reaches.  Invalidating a window revokes
 * it at once but, as on Soft-RoCE, also unbinds it from the region, so that
 * the region can be deregistered afterwards; if DMA is still in flight on the
 * window, the link is kept until the last tpt_put() on the window drops it.
 *
 * Who changed an entry.  Commands other than reg/alloc/bind name only the
 * context, and a context is one attached process, so changes made through
 * them are attributed to the entry's owner pid.
 */
#include "tpt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

/* The access bits tpt_check() can be asked for; MW_BIND is not a data access. */
#define TPT_DATA_ACCESS (NIC_ACCESS_LOCAL_WRITE | NIC_ACCESS_REMOTE_READ | NIC_ACCESS_REMOTE_WRITE)
#define TPT_MW_ACCESS (NIC_ACCESS_REMOTE_READ | NIC_ACCESS_REMOTE_WRITE)

struct tpt_entry {
	uint64_t va; /* region: registered range; window: bound range */
	uint64_t len;
	uint64_t reg_ns;     /* CLOCK_REALTIME of the registration, allocation or bind */
	uint64_t changed_ns; /* CLOCK_REALTIME of the last key or state change */
	uint32_t ctx_id;     /* owner context (protection domain) */
	uint32_t pid;        /* owner process */
	uint32_t changed_pid;
	uint32_t inflight; /* accesses granted by tpt_check() and not yet put */
	uint32_t qpn;      /* window: connection allowed to use it */
	/*
	 * Window: index of the region it is linked to (0: none).  Free entry:
	 * next index on the free list (0: end).  Region: unused.
	 */
	uint32_t link;
	uint32_t nbound; /* region: windows linked to it */
	uint8_t type;    /* enum tpt_type */
	uint8_t state;   /* enum tpt_state */
	uint8_t access;  /* NIC_ACCESS_* */
	uint8_t key_byte;
};

_Static_assert(sizeof(struct tpt_entry) == NIC_CACHELINE, "a TPT entry is one cache line");
_Static_assert(NIC_ACCESS_ALL <= UINT8_MAX, "access bits fit the entry's byte");

struct tpt {
	/* Read on every check: kept together at the start. */
	struct tpt_entry *entries; /* capacity + 1 entries, cache-line aligned */
	uint32_t capacity;
	uint32_t hwm;       /* indices 1..hwm have been used at least once */
	uint32_t free_head; /* LIFO free list of used-then-freed indices, 0: empty */
	uint32_t in_use;
	uint64_t page_size;
	size_t map_len; /* bytes mapped for entries */
	uint64_t refusals[NIC_TPT_R_MAX_];
	uint64_t refusals_total; /* also the number of records ever logged */
	struct tpt_fault faults[TPT_FAULT_LOG];
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint32_t entry_key(const struct tpt *t, const struct tpt_entry *e)
{
	return NIC_KEY_MAKE((uint32_t)(e - t->entries), e->key_byte);
}

/*
 * [va, va + len) inside [start, start + span), written so that nothing can
 * wrap: with va >= start and len <= span, both subtractions are exact.  An
 * empty access is inside iff va lies in [start, start + span].
 */
static bool range_inside(uint64_t start, uint64_t span, uint64_t va, uint64_t len)
{
	return va >= start && len <= span && va - start <= span - len;
}

int tpt_create(struct tpt **out, uint32_t capacity, uint32_t page_size)
{
	struct tpt *t;
	size_t n = (size_t)capacity + 1;
	void *mem;

	*out = NULL;
	if (capacity == 0 || capacity > NIC_TPT_MAX_CAPACITY)
		return -EINVAL;
	if (page_size == 0 || (page_size & (page_size - 1)) != 0)
		return -EINVAL;
	if (n > (SIZE_MAX - NIC_CACHELINE) / sizeof(struct tpt_entry))
		return -ENOMEM;

	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->map_len = n * sizeof(struct tpt_entry);
	mem = mmap(NULL, t->map_len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (mem == MAP_FAILED) {
		free(t);
		return -ENOMEM;
	}
	t->entries = mem;
	t->capacity = capacity;
	t->page_size = page_size;
	*out = t;
	return 0;
}

void tpt_destroy(struct tpt *t)
{
	if (!t)
		return;
	munmap(t->entries, t->map_len);
	free(t);
}

uint32_t tpt_capacity(const struct tpt *t)
{
	return t->capacity;
}

uint32_t tpt_in_use(const struct tpt *t)
{
	return t->in_use;
}

uint32_t tpt_high_water(const struct tpt *t)
{
	return t->hwm;
}

/*
 * Take an index (free list first, then a never-used one) and make it a live
 * entry of owner with a new key byte.  Returns NULL when the table is full.
 */
static struct tpt_entry *alloc_entry(struct tpt *t, const struct tpt_owner *owner,
				     enum tpt_type type, enum tpt_state state)
{
	struct tpt_entry *e;
	uint64_t now;

	if (t->free_head != 0) {
		e = &t->entries[t->free_head];
		t->free_head = e->link;
	} else if (t->hwm < t->capacity) {
		e = &t->entries[++t->hwm];
	} else {
		return NULL;
	}
	now = now_ns();
	e->va = 0;
	e->len = 0;
	e->reg_ns = now;
	e->changed_ns = now;
	e->ctx_id = owner->ctx_id;
	e->pid = owner->pid;
	e->changed_pid = owner->pid;
	e->inflight = 0;
	e->qpn = NIC_QPN_NONE;
	e->link = 0;
	e->nbound = 0;
	e->type = (uint8_t)type;
	e->state = (uint8_t)state;
	e->access = 0;
	e->key_byte = (uint8_t)(e->key_byte + 1);
	t->in_use++;
	return e;
}

static void free_entry(struct tpt *t, struct tpt_entry *e);

/*
 * Drop a window's link to its region.  A region left INVALIDATING with its
 * own DMA drained is freed here (only tpt_release_owner() leaves a region in
 * that state while windows are linked); returns that region's key, else 0.
 */
static uint32_t unlink_window(struct tpt *t, struct tpt_entry *w)
{
	struct tpt_entry *r = &t->entries[w->link];
	uint32_t freed = 0;

	w->link = 0;
	r->nbound--;
	if (r->state == TPT_INVALIDATING && r->nbound == 0 && r->inflight == 0) {
		freed = entry_key(t, r);
		free_entry(t, r);
	}
	return freed;
}

/* The entry keeps its key byte and history for fault records; see the top. */
static void free_entry(struct tpt *t, struct tpt_entry *e)
{
	if (e->type == TPT_MW && e->link != 0)
		unlink_window(t, e);
	e->state = TPT_FREE;
	e->changed_ns = now_ns();
	e->link = t->free_head;
	t->free_head = (uint32_t)(e - t->entries);
	t->in_use--;
}

/*
 * The entry of type `type` that key names for a command of context ctx_id.
 * -ENOENT when the key is out of range, stale, foreign, or names an entry
 * that is free or already unpublished (a second dereg of a draining entry is
 * refused like any other dead key); -EINVAL when it names a live entry of the
 * other type.
 */
static int find_owned(struct tpt *t, uint32_t ctx_id, uint32_t key, enum tpt_type type,
		      struct tpt_entry **out)
{
	uint32_t idx = NIC_KEY_INDEX(key);
	struct tpt_entry *e;

	if (idx == 0 || idx > t->hwm)
		return -ENOENT;
	e = &t->entries[idx];
	if (e->key_byte != NIC_KEY_BYTE(key) || e->ctx_id != ctx_id)
		return -ENOENT;
	if (e->state == TPT_FREE || e->state == TPT_INVALIDATING)
		return -ENOENT;
	if (e->type != type)
		return -EINVAL;
	*out = e;
	return 0;
}

/*
 * Unpublish an entry, then free it at once if nothing holds it: no DMA in
 * flight and (for a region) no window linked.  Otherwise the last tpt_put()
 * (or the last window unlinking) frees it.
 */
static int unpublish(struct tpt *t, struct tpt_entry *e)
{
	e->state = TPT_INVALIDATING;
	e->changed_ns = now_ns();
	e->changed_pid = e->pid;
	if (e->inflight == 0 && e->nbound == 0) {
		free_entry(t, e);
		return 0;
	}
	return -EINPROGRESS;
}

int tpt_reg_mr(struct tpt *t, const struct tpt_owner *owner, uint64_t va, uint64_t len,
	       uint32_t access, uint32_t *key)
{
	struct tpt_entry *e;

	/* The end must be representable: [va, va + len) with va + len <= UINT64_MAX. */
	if (len == 0 || len > UINT64_MAX - va || (access & ~NIC_ACCESS_ALL) != 0)
		return -EINVAL;
	e = alloc_entry(t, owner, TPT_MR, TPT_VALID);
	if (!e)
		return -ENOSPC;
	e->va = va;
	e->len = len;
	e->access = (uint8_t)access;
	*key = entry_key(t, e);
	return 0;
}

int tpt_dereg_mr(struct tpt *t, uint32_t ctx_id, uint32_t key)
{
	struct tpt_entry *e;
	int err = find_owned(t, ctx_id, key, TPT_MR, &e);

	if (err)
		return err;
	if (e->nbound != 0)
		return -EBUSY;
	return unpublish(t, e);
}

int tpt_alloc_mw(struct tpt *t, const struct tpt_owner *owner, uint32_t *key)
{
	struct tpt_entry *e = alloc_entry(t, owner, TPT_MW, TPT_REVOKED);

	if (!e)
		return -ENOSPC;
	*key = entry_key(t, e);
	return 0;
}

int tpt_bind_mw(struct tpt *t, const struct tpt_owner *owner, uint32_t mw_key, uint32_t mr_key,
		uint64_t va, uint64_t len, uint32_t access, uint32_t qpn, uint32_t *new_key)
{
	struct tpt_entry *w, *r;
	uint32_t mr_idx = NIC_KEY_INDEX(mr_key);
	uint64_t now;
	int err;

	err = find_owned(t, owner->ctx_id, mw_key, TPT_MW, &w);
	if (err)
		return err;
	err = find_owned(t, owner->ctx_id, mr_key, TPT_MR, &r);
	if (err)
		return err;
	if (access == 0 || (access & ~TPT_MW_ACCESS) != 0)
		return -EINVAL;
	if (len == 0 || !range_inside(r->va, r->len, va, len))
		return -EINVAL;
	/*
	 * As on InfiniBand, the window's remote rights do not come from the
	 * region's remote bits (a region behind windows should have none, or its
	 * own key would reach it over any connection): the region must allow
	 * binding, and local write for a remotely writable window.
	 */
	if (!(r->access & NIC_ACCESS_MW_BIND) ||
	    ((access & NIC_ACCESS_REMOTE_WRITE) && !(r->access & NIC_ACCESS_LOCAL_WRITE)))
		return -EACCES;
	if (w->inflight != 0)
		return -EBUSY;

	/*
	 * The old region cannot be freed by this unlink: it is not
	 * INVALIDATING, since dereg refuses a region with linked windows.
	 */
	if (w->link != 0)
		unlink_window(t, w);
	w->link = mr_idx;
	r->nbound++;
	now = now_ns();
	w->va = va;
	w->len = len;
	w->access = (uint8_t)access;
	w->qpn = qpn;
	w->state = TPT_VALID;
	w->key_byte = (uint8_t)(w->key_byte + 1);
	w->reg_ns = now;
	w->changed_ns = now;
	w->changed_pid = owner->pid;
	*new_key = entry_key(t, w);
	return 0;
}

int tpt_invalidate_mw(struct tpt *t, uint32_t ctx_id, uint32_t key)
{
	struct tpt_entry *w;
	int err = find_owned(t, ctx_id, key, TPT_MW, &w);

	if (err)
		return err;
	if (w->state == TPT_VALID) {
		w->state = TPT_REVOKED;
		w->changed_ns = now_ns();
		w->changed_pid = w->pid;
	}
	/* The region is VALID (it has a linked window), so this frees nothing. */
	if (w->link != 0 && w->inflight == 0)
		unlink_window(t, w);
	return 0;
}

int tpt_dealloc_mw(struct tpt *t, uint32_t ctx_id, uint32_t key)
{
	struct tpt_entry *w;
	int err = find_owned(t, ctx_id, key, TPT_MW, &w);

	if (err)
		return err;
	return unpublish(t, w);
}

/*
 * Count a refusal and fill its ring slot; e is NULL for an index never
 * issued.  Out of line and marked cold so that the checking path, which runs
 * for every DMA operation, stays short.
 */
static __attribute__((noinline, cold)) void
record_refusal(struct tpt *t, const struct tpt_owner *requester, uint32_t key, uint32_t access,
	       uint32_t qpn, uint64_t va, uint64_t len, enum nic_tpt_reason reason,
	       const struct tpt_entry *e)
{
	struct tpt_fault *f = &t->faults[t->refusals_total % TPT_FAULT_LOG];

	t->refusals[reason]++;
	t->refusals_total++;
	memset(f, 0, sizeof(*f));
	f->when_ns = now_ns();
	f->key = key;
	f->reason = reason;
	f->access = access;
	f->va = va;
	f->len = len;
	f->ctx_id = requester->ctx_id;
	f->pid = requester->pid;
	f->qpn = qpn;
	f->peer_qpn = NIC_QPN_NONE;
	f->entry_type = TPT_NONE;
	f->entry_state = TPT_FREE;
	if (!e)
		return;
	f->entry_type = (enum tpt_type)e->type;
	f->entry_state = (enum tpt_state)e->state;
	f->entry_key = entry_key(t, e);
	f->entry_va = e->va;
	f->entry_len = e->len;
	f->entry_access = e->access;
	f->entry_pid = e->changed_pid;
	f->entry_changed_ns = e->changed_ns;
	f->entry_ctx_id = e->ctx_id;
	f->entry_qpn = e->qpn;
}

/*
 * The checks, in the contract's order; returns the first rule broken, or
 * NIC_TPT_R_NONE.  *entry is set when the key's index names an issued entry.
 */
static inline enum nic_tpt_reason check_entry(const struct tpt *t,
					      const struct tpt_owner *requester, uint32_t key,
					      uint32_t access, uint32_t qpn, uint64_t va,
					      uint64_t len, struct tpt_entry **entry)
{
	uint32_t idx = NIC_KEY_INDEX(key);
	struct tpt_entry *e;

	*entry = NULL;
	if (idx == 0 || idx > t->hwm)
		return idx == 0 || idx > t->capacity ? NIC_TPT_R_BAD_INDEX : NIC_TPT_R_STALE_KEY;
	e = &t->entries[idx];
	*entry = e;
	if (e->key_byte != NIC_KEY_BYTE(key))
		return NIC_TPT_R_STALE_KEY;
	if (e->ctx_id != requester->ctx_id)
		return NIC_TPT_R_WRONG_PD;
	/* Local read is implied; anything beyond the data-access bits is never granted. */
	if ((access & ~(e->access & TPT_DATA_ACCESS)) != 0)
		return NIC_TPT_R_NO_ACCESS;
	if (e->state != TPT_VALID)
		return NIC_TPT_R_BAD_STATE;
	if (qpn != NIC_QPN_NONE && e->type == TPT_MW && e->qpn != qpn)
		return NIC_TPT_R_WRONG_QP;
	if (!range_inside(e->va, e->len, va, len))
		return NIC_TPT_R_OUT_OF_RANGE;
	return NIC_TPT_R_NONE;
}

int tpt_check(struct tpt *t, const struct tpt_owner *requester, uint32_t key, uint32_t access,
	      uint32_t qpn, uint64_t va, uint64_t len, struct tpt_grant *grant,
	      enum nic_tpt_reason *reason)
{
	struct tpt_entry *e;
	enum nic_tpt_reason r = check_entry(t, requester, key, access, qpn, va, len, &e);

	if (reason)
		*reason = r;
	if (r != NIC_TPT_R_NONE) {
		record_refusal(t, requester, key, access, qpn, va, len, r, e);
		return -EACCES;
	}
	e->inflight++;
	grant->index = NIC_KEY_INDEX(key);
	grant->va = va;
	grant->len = len;
	/* A valid window is always linked; its accesses reach the region's owner. */
	grant->pid = e->type == TPT_MW ? t->entries[e->link].pid : e->pid;
	return 0;
}

bool tpt_put(struct tpt *t, uint32_t index, uint32_t *key)
{
	struct tpt_entry *e;
	uint32_t done;

	/* An index with nothing in flight is a caller bug; ignoring it keeps the counts sane. */
	if (index == 0 || index > t->hwm)
		return false;
	e = &t->entries[index];
	if (e->inflight == 0 || --e->inflight != 0 || e->state == TPT_VALID)
		return false;

	if (e->state == TPT_INVALIDATING && e->nbound == 0) {
		/*
		 * Freeing a window may also free a region that tpt_release_owner()
		 * left waiting for it; its owner is gone, so nobody awaits that
		 * acknowledgement and the window's key is the one reported.
		 */
		done = entry_key(t, e);
		free_entry(t, e);
	} else if (e->state == TPT_REVOKED && e->link != 0) {
		/* An invalidated window has drained: finish unbinding it. */
		done = unlink_window(t, e);
	} else {
		done = 0;
	}
	if (done == 0)
		return false;
	if (key)
		*key = done;
	return true;
}

/*
 * Windows first, so that their regions' window counts drop before the
 * regions are unpublished.  Entries already being invalidated were released
 * before and are not counted again; entries left draining are counted, since
 * the context has lost them.
 */
uint32_t tpt_release_owner(struct tpt *t, uint32_t ctx_id)
{
	static const uint8_t order[] = {TPT_MW, TPT_MR};
	uint32_t released = 0;

	for (size_t pass = 0; pass < sizeof(order); pass++) {
		for (uint32_t idx = 1; idx <= t->hwm; idx++) {
			struct tpt_entry *e = &t->entries[idx];

			if (e->type != order[pass] || e->ctx_id != ctx_id || e->state == TPT_FREE ||
			    e->state == TPT_INVALIDATING)
				continue;
			unpublish(t, e);
			released++;
		}
	}
	return released;
}

/* First page and page count of the run covering [va, va + len), len > 0, no wrap. */
static void page_run(const struct tpt *t, uint64_t va, uint64_t len, uint64_t *page_va,
		     uint64_t *npages)
{
	uint64_t off = va & (t->page_size - 1);

	*page_va = va - off;
	/* off + len <= va + len, which registration keeps representable. */
	*npages = (off + len - 1) / t->page_size + 1;
}

static void fill_view(const struct tpt *t, const struct tpt_entry *e, struct tpt_entry_view *v)
{
	memset(v, 0, sizeof(*v));
	v->key = entry_key(t, e);
	v->type = (enum tpt_type)e->type;
	v->state = (enum tpt_state)e->state;
	v->access = e->access;
	v->va = e->va;
	v->len = e->len;
	v->ctx_id = e->ctx_id;
	v->pid = e->pid;
	v->reg_ns = e->reg_ns;
	v->changed_ns = e->changed_ns;
	v->changed_pid = e->changed_pid;
	v->inflight = e->inflight;
	if (e->type == TPT_MW) {
		/* A window holds no pages of its own: it reaches its region's. */
		v->qpn = e->qpn;
		if (e->link != 0)
			v->mr_key = entry_key(t, &t->entries[e->link]);
	} else {
		page_run(t, e->va, e->len, &v->page_va, &v->npages);
	}
}

int tpt_lookup(const struct tpt *t, uint32_t key, struct tpt_entry_view *view)
{
	uint32_t idx = NIC_KEY_INDEX(key);
	const struct tpt_entry *e;

	if (idx == 0 || idx > t->hwm)
		return -ENOENT;
	e = &t->entries[idx];
	if (e->key_byte != NIC_KEY_BYTE(key) || e->state == TPT_FREE)
		return -ENOENT;
	fill_view(t, e, view);
	return 0;
}

size_t tpt_list(const struct tpt *t, uint32_t *cursor, struct tpt_entry_view *views, size_t max)
{
	uint32_t idx = *cursor == 0 ? 1 : *cursor;
	size_t n = 0;

	/* Indices above the high-water mark were never used: nothing to visit there. */
	for (; idx <= t->hwm && n < max; idx++) {
		const struct tpt_entry *e = &t->entries[idx];

		if (e->state != TPT_FREE)
			fill_view(t, e, &views[n++]);
	}
	*cursor = idx;
	return n;
}

uint64_t tpt_refusals(const struct tpt *t, enum nic_tpt_reason reason)
{
	if ((unsigned)reason >= NIC_TPT_R_MAX_)
		return 0;
	return t->refusals[reason];
}

uint64_t tpt_refusals_total(const struct tpt *t)
{
	return t->refusals_total;
}

void tpt_fault_set_peer(struct tpt *t, uint32_t addr, uint32_t qpn, uint32_t psn, uint8_t opcode)
{
	struct tpt_fault *f;

	if (t->refusals_total == 0)
		return;
	f = &t->faults[(t->refusals_total - 1) % TPT_FAULT_LOG];
	f->peer_addr = addr;
	f->peer_qpn = qpn;
	f->peer_psn = psn;
	f->peer_opcode = opcode;
}

/* When more are kept than asked for, the newest max are returned, still oldest first. */
size_t tpt_faults(const struct tpt *t, struct tpt_fault *out, size_t max)
{
	uint64_t kept = t->refusals_total < TPT_FAULT_LOG ? t->refusals_total : TPT_FAULT_LOG;
	size_t n = kept < max ? (size_t)kept : max;
	uint64_t first = t->refusals_total - n;

	for (size_t i = 0; i < n; i++)
		out[i] = t->faults[(first + i) % TPT_FAULT_LOG];
	return n;
}

static const char *const reason_strs[] = {
#define TPT_REASON_STR(name, desc) [NIC_TPT_R_##name] = desc,
    NIC_TPT_REASONS(TPT_REASON_STR)
#undef TPT_REASON_STR
};

static const char *const reason_names[] = {
#define TPT_REASON_NAME(name, desc) [NIC_TPT_R_##name] = #name,
    NIC_TPT_REASONS(TPT_REASON_NAME)
#undef TPT_REASON_NAME
};

const char *tpt_reason_str(enum nic_tpt_reason reason)
{
	if ((unsigned)reason >= NIC_TPT_R_MAX_)
		return "unknown reason";
	return reason_strs[reason];
}

const char *tpt_reason_name(enum nic_tpt_reason reason)
{
	if ((unsigned)reason >= NIC_TPT_R_MAX_)
		return "UNKNOWN";
	return reason_names[reason];
}

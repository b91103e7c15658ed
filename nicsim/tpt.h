/*
 * Translation/protection table (TPT) of one emulated NIC.
 *
 * A fixed-capacity array of entries, indexed by the 24-bit index of a key
 * (nicsim_abi.h: key = index << 8 | key byte).  Lookup by key is one array
 * access, whatever the number of live entries.  Free entries are kept on a
 * LIFO free list; indices that were never used are handed out from a
 * high-water mark, so a large table costs resident memory only for the
 * entries actually used.
 *
 * Entries are memory regions (MR: a range of the owner's address space with
 * its page list) and memory windows (MW: a remotely accessible part of a
 * region, bound to one connection).  The key byte of an index changes on
 * every allocation and every window bind, so a key handed out earlier is
 * refused once the entry is reused.
 *
 * tpt_check() applies the checks in the fixed order index -> full key ->
 * owner (protection domain) -> access bits -> state -> bound connection ->
 * range (overflow-safe), as Soft-RoCE does.  Every refusal is counted per
 * reason and recorded in a ring of recent refusals with what the entry holds
 * now, so that a person can see which key, which rule, and since when.
 *
 * Invalidation: tpt_dereg_mr() and tpt_dealloc_mw() first unpublish the entry
 * (state INVALIDATING: every later check fails), then free it once no DMA is
 * in flight on it.  While DMA is in flight they return -EINPROGRESS and the
 * last tpt_put() on the entry frees it and reports the completed invalidation,
 * so that the caller acknowledges only after the drain.
 *
 * Threading: a TPT belongs to the NIC's event-loop thread; nothing here locks.
 * Errors: 0 or a negative errno, as everywhere in nicsim.
 */
#ifndef NICSIM_TPT_H
#define NICSIM_TPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nicsim_abi.h"
#include "nicsim_mgmt.h"

#define TPT_DEFAULT_CAPACITY 65536u
#define TPT_FAULT_LOG 256u /* refusals remembered for `nicsim show faults` */

struct tpt;

/*
 * Entry types and states: the TPT's own.  mgmt.c converts them to the
 * values the management protocol lists (enum nic_tpt_type, nic_tpt_state).
 */
enum tpt_type {
	TPT_NONE = 0, /* no entry: a fault record whose key index names none */
	TPT_MR = 1,
	TPT_MW = 2,
};

enum tpt_state {
	TPT_FREE = 0,
	TPT_VALID = 1,
	TPT_REVOKED = 2,      /* window invalidated, or allocated and never bound */
	TPT_INVALIDATING = 3, /* unpublished, draining DMA */
};

/*
 * The refusal reasons are not the TPT's own: tpt_check() yields the value
 * the host interface defines (enum nic_tpt_reason, in check order), which
 * the NIC reports unchanged in a completion's detail and a fault record.
 */

/* Who asks: the context (protection domain) and its process. */
struct tpt_owner {
	uint32_t ctx_id;
	uint32_t pid;
};

/* A view of one entry, for listings and tests. */
struct tpt_entry_view {
	uint32_t key;
	enum tpt_type type;
	enum tpt_state state;
	uint32_t access;
	uint64_t va, len;
	uint32_t ctx_id, pid;
	uint32_t qpn;         /* windows: bound connection */
	uint32_t mr_key;      /* windows: region bound to, 0 if unbound */
	uint64_t page_va;     /* page list: first page of the run */
	uint64_t npages;      /* page list: pages in the run */
	uint64_t reg_ns;      /* when registered or bound (CLOCK_REALTIME) */
	uint64_t changed_ns;  /* when the key last changed */
	uint32_t changed_pid; /* who changed it */
	uint32_t inflight;
};

/*
 * One refusal as the fault log keeps it: the access refused, and what the
 * entry its key's index names held at that moment (all zero, type
 * TPT_NONE and state TPT_FREE, when the index names no issued entry).
 */
struct tpt_fault {
	uint64_t when_ns; /* CLOCK_REALTIME of the refusal */
	uint32_t key;     /* key presented */
	enum nic_tpt_reason reason;
	uint32_t access; /* access requested, NIC_ACCESS_* */
	uint64_t va;     /* range requested */
	uint64_t len;
	uint32_t ctx_id; /* requester's context */
	uint32_t pid;    /* requester's process */
	uint32_t qpn;    /* requester's connection, NIC_QPN_NONE for local */
	uint32_t entry_key;
	enum tpt_type entry_type;
	enum tpt_state entry_state;
	uint32_t entry_access;
	uint64_t entry_va;
	uint64_t entry_len;
	uint32_t entry_ctx_id;
	uint32_t entry_qpn;
	uint32_t entry_pid;        /* who last changed the entry */
	uint64_t entry_changed_ns; /* when the entry's key last changed */
	/* A remote access: who sent the request across the fabric, as
	 * tpt_fault_set_peer() names it; peer_qpn NIC_QPN_NONE otherwise. */
	uint32_t peer_addr; /* network byte order */
	uint32_t peer_qpn;
	uint32_t peer_psn;   /* the request's PSN */
	uint8_t peer_opcode; /* the request's BTH opcode */
};

/* Result of a successful check: what the DMA engine needs. */
struct tpt_grant {
	uint32_t index; /* pass to tpt_put() when done */
	uint64_t va;    /* start of the access in the owner's address space */
	uint64_t len;
	uint32_t pid; /* the owner process whose memory is reached */
};

/*
 * tpt_create: capacity in 1 .. NIC_TPT_MAX_CAPACITY, page_size a power of
 * two.  Returns 0 or -EINVAL, -ENOMEM.  tpt_destroy accepts NULL.
 */
int tpt_create(struct tpt **out, uint32_t capacity, uint32_t page_size);
void tpt_destroy(struct tpt *t);

uint32_t tpt_capacity(const struct tpt *t);
uint32_t tpt_in_use(const struct tpt *t);
uint32_t tpt_high_water(const struct tpt *t);

/*
 * Register a region [va, va + len) of the owner's address space.  access is
 * NIC_ACCESS_* (any combination).  Returns 0 and the key, or -EINVAL (len 0,
 * range wraps, unknown access bits), -ENOSPC (table full).
 */
int tpt_reg_mr(struct tpt *t, const struct tpt_owner *owner, uint64_t va, uint64_t len,
	       uint32_t access, uint32_t *key);

/*
 * Invalidate a region.  -ENOENT: key invalid, stale or not the owner's
 * (ctx_id); -EINVAL: key names a window; -EBUSY: windows still bound to it
 * (nothing changed).  0: freed.  -EINPROGRESS: unpublished, DMA in flight;
 * the final tpt_put() frees it.
 */
int tpt_dereg_mr(struct tpt *t, uint32_t ctx_id, uint32_t key);

/* Allocate an unbound window (state REVOKED: no access until bound). */
int tpt_alloc_mw(struct tpt *t, const struct tpt_owner *owner, uint32_t *key);

/*
 * Bind a window to [va, va + len) of a region with remote access bits
 * (REMOTE_READ/REMOTE_WRITE only, at least one), usable by connection qpn.
 * The region needs MW_BIND, and LOCAL_WRITE for a window with REMOTE_WRITE;
 * its own remote bits play no part (a region behind windows has none).  The window gets a new key byte:
 * *new_key.  Binding a bound window rebinds it.  -ENOENT: either key invalid
 * or foreign; -EINVAL: range outside the region, bad access, or mw_key not a
 * window / mr_key not a region; -EACCES: region lacks MW_BIND, or LOCAL_WRITE for REMOTE_WRITE;
 * -EBUSY: window has DMA in flight.
 */
int tpt_bind_mw(struct tpt *t, const struct tpt_owner *owner, uint32_t mw_key, uint32_t mr_key,
		uint64_t va, uint64_t len, uint32_t access, uint32_t qpn, uint32_t *new_key);

/*
 * Revoke a window's access at once (state REVOKED); the key stays so that a
 * late access is refused with "revoked" rather than "stale".  -ENOENT, -EINVAL
 * as above.  In-flight DMA finishes; new checks fail.
 */
int tpt_invalidate_mw(struct tpt *t, uint32_t ctx_id, uint32_t key);

/* Free a window; same contract as tpt_dereg_mr (no -EBUSY). */
int tpt_dealloc_mw(struct tpt *t, uint32_t ctx_id, uint32_t key);

/*
 * Check an access and, on success, count it as in flight (tpt_put ends it).
 * requester: the context asking (local access: the host itself; remote: the
 * context owning the QP the request arrived on), and its pid for the record.
 * access: NIC_ACCESS_LOCAL_WRITE for a local write, 0 for a local read,
 * NIC_ACCESS_REMOTE_READ / _REMOTE_WRITE for remote access.  qpn: the
 * connection of a remote access, NIC_QPN_NONE for a local one (then the
 * bound-connection check does not apply).
 * Returns 0 and fills *grant, or -EACCES with *reason set and the refusal
 * recorded.  reason may be NULL.
 */
int tpt_check(struct tpt *t, const struct tpt_owner *requester, uint32_t key, uint32_t access,
	      uint32_t qpn, uint64_t va, uint64_t len, struct tpt_grant *grant,
	      enum nic_tpt_reason *reason);

/*
 * End an access counted by tpt_check.  Returns true when this was the last
 * access on an entry being invalidated and the entry is now free; *key gets
 * the key whose invalidation completed (so the caller can acknowledge it).
 */
bool tpt_put(struct tpt *t, uint32_t index, uint32_t *key);

/* Free every entry of a context (its host went away); windows first.  Returns
 * the number of entries released; entries with DMA in flight are left
 * INVALIDATING and freed by their last tpt_put(). */
uint32_t tpt_release_owner(struct tpt *t, uint32_t ctx_id);

/* Look at one entry by key (any state but FREE): 0 or -ENOENT. */
int tpt_lookup(const struct tpt *t, uint32_t key, struct tpt_entry_view *view);

/*
 * Visit live entries in index order starting at index *cursor (start at 0);
 * fills up to max views, advances *cursor, returns the number filled
 * (0 at the end).
 */
size_t tpt_list(const struct tpt *t, uint32_t *cursor, struct tpt_entry_view *views, size_t max);

/*
 * Name the remote requester of the refusal tpt_check() recorded last: the
 * fabric address and QP number of the peer that sent the request, and the
 * request's PSN and BTH opcode.  Called by the NIC right after a remote
 * check failed, before anything else can be recorded.
 */
void tpt_fault_set_peer(struct tpt *t, uint32_t addr, uint32_t qpn, uint32_t psn, uint8_t opcode);

/* Refusal counters: per reason (indexed by enum nic_tpt_reason) and total. */
uint64_t tpt_refusals(const struct tpt *t, enum nic_tpt_reason reason);
uint64_t tpt_refusals_total(const struct tpt *t);

/*
 * Recent refusals, oldest first: copies up to max records into out and
 * returns how many.  At most TPT_FAULT_LOG are kept.
 */
size_t tpt_faults(const struct tpt *t, struct tpt_fault *out, size_t max);

/* Text of a reason, for logs and the CLI. */
const char *tpt_reason_str(enum nic_tpt_reason reason);
const char *tpt_reason_name(enum nic_tpt_reason reason);

#endif /* NICSIM_TPT_H */

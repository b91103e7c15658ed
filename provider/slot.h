/*
 * Slot tables: fixed-size records addressed by index, with a generation per
 * index, from which the provider issues opaque handles (SOCKET values,
 * WSPRegisterMemory handles).
 *
 * A handle is (tag << 56) | (generation << 24) | (index + 1): the tag says
 * which table issued it, the generation changes every time the index is
 * freed, and index 0 is never encoded, so 0 and all ones are never handles.
 * prov_slot_lookup() validates a handle arithmetically against the table
 * before touching any record: a caller's value is never dereferenced.
 *
 * Records live in chunks that never move, so pointers to records stay valid
 * while they are live.  Freed indices are reused LIFO (with a new
 * generation); a table only grows until prov_slots_fini().
 *
 * Every record type starts with struct prov_slot_hdr.  Not thread-safe: the
 * caller holds the provider lock.
 */
#ifndef PROV_SLOT_H
#define PROV_SLOT_H

#include <stddef.h>
#include <stdint.h>

#define PROV_SLOT_CHUNK 256u
#define PROV_SLOT_MAX ((1u << 24) - 2u) /* index + 1 fits in 24 bits */

struct prov_slot_hdr {
	uint32_t gen; /* changes on every free */
	uint32_t idx;
	uint32_t next_free;
	uint32_t live;
};

struct prov_slots {
	size_t rec_size;
	uint8_t tag; /* 1 .. 0xfe */
	uint8_t **chunks;
	uint32_t nchunks;   /* chunks allocated */
	uint32_t chunk_cap; /* room in chunks[] */
	uint32_t hwm;       /* indices below it have been handed out */
	uint32_t free_head;
	uint32_t live;
	uint32_t gen_seed; /* generation of an index's first use */
};

/*
 * rec_size includes the header; no allocation happens until the first alloc.
 * gen_seed is the generation of each index's first use: a table made again
 * with another seed never reissues the handles of the previous one.
 */
void prov_slots_init(struct prov_slots *t, size_t rec_size, uint8_t tag, uint32_t gen_seed);
/* Frees all storage (live records included).  Accepts a zeroed table. */
void prov_slots_fini(struct prov_slots *t);

/* A zeroed live record, or NULL when out of memory or indices. */
void *prov_slot_alloc(struct prov_slots *t);
void prov_slot_free(struct prov_slots *t, void *rec);

uint64_t prov_slot_handle(const struct prov_slots *t, const void *rec);
/* The live record a handle names, or NULL for anything else. */
void *prov_slot_lookup(const struct prov_slots *t, uint64_t handle);
/* The live record at index idx (for iteration up to t->hwm), or NULL. */
void *prov_slot_at(const struct prov_slots *t, uint32_t idx);

#endif /* PROV_SLOT_H */

/* Slot tables with generations: see slot.h. */
#include <stdlib.h>
#include <string.h>

#include "slot.h"

#define SLOT_NONE UINT32_MAX

static struct prov_slot_hdr *hdr_at(const struct prov_slots *t, uint32_t idx)
{
	return (struct prov_slot_hdr *)(t->chunks[idx / PROV_SLOT_CHUNK] +
					(size_t)(idx % PROV_SLOT_CHUNK) * t->rec_size);
}

void prov_slots_init(struct prov_slots *t, size_t rec_size, uint8_t tag, uint32_t gen_seed)
{
	memset(t, 0, sizeof(*t));
	t->rec_size = rec_size;
	t->tag = tag;
	t->free_head = SLOT_NONE;
	t->gen_seed = gen_seed ? gen_seed : 1;
}

void prov_slots_fini(struct prov_slots *t)
{
	for (uint32_t i = 0; i < t->nchunks; i++)
		free(t->chunks[i]);
	free(t->chunks);
	prov_slots_init(t, t->rec_size, t->tag, t->gen_seed);
}

/* Make sure index t->hwm has storage. */
static int grow(struct prov_slots *t)
{
	uint8_t *chunk;

	if (t->hwm / PROV_SLOT_CHUNK < t->nchunks)
		return 0;
	if (t->nchunks == t->chunk_cap) {
		uint32_t cap = t->chunk_cap ? t->chunk_cap * 2 : 8;
		uint8_t **c = realloc(t->chunks, cap * sizeof(*c));

		if (!c)
			return -1;
		t->chunks = c;
		t->chunk_cap = cap;
	}
	chunk = calloc(PROV_SLOT_CHUNK, t->rec_size);
	if (!chunk)
		return -1;
	t->chunks[t->nchunks++] = chunk;
	return 0;
}

void *prov_slot_alloc(struct prov_slots *t)
{
	struct prov_slot_hdr *h;

	if (t->free_head != SLOT_NONE) {
		h = hdr_at(t, t->free_head);
		t->free_head = h->next_free;
	} else {
		if (t->hwm >= PROV_SLOT_MAX || grow(t))
			return NULL;
		h = hdr_at(t, t->hwm);
		h->idx = t->hwm++;
		h->gen = t->gen_seed;
	}
	memset((char *)h + sizeof(*h), 0, t->rec_size - sizeof(*h));
	h->live = 1;
	h->next_free = SLOT_NONE;
	t->live++;
	return h;
}

void prov_slot_free(struct prov_slots *t, void *rec)
{
	struct prov_slot_hdr *h = rec;

	h->live = 0;
	if (++h->gen == 0)
		h->gen = 1;
	h->next_free = t->free_head;
	t->free_head = h->idx;
	t->live--;
}

uint64_t prov_slot_handle(const struct prov_slots *t, const void *rec)
{
	const struct prov_slot_hdr *h = rec;

	return (uint64_t)t->tag << 56 | (uint64_t)h->gen << 24 | (uint64_t)(h->idx + 1);
}

void *prov_slot_lookup(const struct prov_slots *t, uint64_t handle)
{
	uint32_t idx1 = (uint32_t)(handle & 0xffffffu);
	struct prov_slot_hdr *h;

	if ((handle >> 56) != t->tag || idx1 == 0 || idx1 > t->hwm)
		return NULL;
	h = hdr_at(t, idx1 - 1);
	if (!h->live || h->gen != (uint32_t)(handle >> 24))
		return NULL;
	return h;
}

void *prov_slot_at(const struct prov_slots *t, uint32_t idx)
{
	struct prov_slot_hdr *h;

	if (idx >= t->hwm)
		return NULL;
	h = hdr_at(t, idx);
	return h->live ? h : NULL;
}

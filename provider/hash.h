/*
 * A small intrusive chained hash: records embed struct prov_hnode and are
 * found by a 64-bit hash of their key; the caller compares keys.  Insertion
 * never fails (the bucket array grows best effort, so an allocation failure
 * only makes chains longer), which keeps "no side effect on failure" simple
 * for the code that inserts last.  Not thread-safe: the caller holds the
 * provider lock.
 */
#ifndef PROV_HASH_H
#define PROV_HASH_H

#include <stdint.h>

struct prov_hnode {
	struct prov_hnode *next;
	uint64_t hash;
};

struct prov_hash {
	struct prov_hnode **buckets;
	uint32_t mask;
	uint32_t count;
};

/* nbuckets: a power of two.  0 or -ENOMEM. */
int prov_hash_init(struct prov_hash *h, uint32_t nbuckets);
/* Frees the buckets (not the records).  Accepts a zeroed table. */
void prov_hash_fini(struct prov_hash *h);
void prov_hash_insert(struct prov_hash *h, struct prov_hnode *n, uint64_t hash);
void prov_hash_remove(struct prov_hash *h, struct prov_hnode *n);

/* First node of hash's chain; follow ->next and compare ->hash, then the key. */
static inline struct prov_hnode *prov_hash_chain(const struct prov_hash *h, uint64_t hash)
{
	return h->buckets[hash & h->mask];
}

/* Mix a value into a running hash (64-bit finaliser of splitmix64). */
static inline uint64_t prov_hash_mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebull;
	return h ^ (h >> 31);
}

#endif /* PROV_HASH_H */

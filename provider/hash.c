/* Intrusive chained hash: see hash.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

int prov_hash_init(struct prov_hash *h, uint32_t nbuckets)
{
	memset(h, 0, sizeof(*h));
	h->buckets = calloc(nbuckets, sizeof(*h->buckets));
	if (!h->buckets)
		return -ENOMEM;
	h->mask = nbuckets - 1;
	return 0;
}

void prov_hash_fini(struct prov_hash *h)
{
	free(h->buckets);
	memset(h, 0, sizeof(*h));
}

/* Double the bucket array; on allocation failure keep the old one. */
static void grow(struct prov_hash *h)
{
	uint32_t n = (h->mask + 1) * 2;
	struct prov_hnode **b;

	if (n == 0)
		return;
	b = calloc(n, sizeof(*b));
	if (!b)
		return;
	for (uint32_t i = 0; i <= h->mask; i++) {
		struct prov_hnode *node = h->buckets[i], *next;

		for (; node; node = next) {
			next = node->next;
			node->next = b[node->hash & (n - 1)];
			b[node->hash & (n - 1)] = node;
		}
	}
	free(h->buckets);
	h->buckets = b;
	h->mask = n - 1;
}

void prov_hash_insert(struct prov_hash *h, struct prov_hnode *n, uint64_t hash)
{
	if (h->count >= h->mask + 1)
		grow(h);
	n->hash = hash;
	n->next = h->buckets[hash & h->mask];
	h->buckets[hash & h->mask] = n;
	h->count++;
}

void prov_hash_remove(struct prov_hash *h, struct prov_hnode *n)
{
	struct prov_hnode **pp = &h->buckets[n->hash & h->mask];

	for (; *pp; pp = &(*pp)->next) {
		if (*pp == n) {
			*pp = n->next;
			n->next = NULL;
			h->count--;
			return;
		}
	}
}

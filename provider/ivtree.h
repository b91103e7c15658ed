/*
 * An intrusive interval index: which records cover any part of a range of
 * virtual addresses.
 *
 * An AVL tree ordered by (start, node address), each node augmented with the
 * largest `last` of its subtree.  Intervals are closed, [start, last], so a
 * range that ends at the top of the address space is representable.  Several
 * nodes may share a start (the same buffer registered with other lengths,
 * flags or NICs); the node address breaks ties, so every node has a unique
 * place and removal finds it by key without a search of equals.
 *
 * Cost: insert and remove O(log n).  prov_iv_overlap() visits only nodes on
 * the paths to the nodes it reports: O(log n + k) for k results when the
 * intervals do not nest (registrations of disjoint or abutting buffers), and
 * O((k + 1) log n) at worst.  Depth is at most 1.44 log2(n + 2), so the
 * recursive helpers need no more than about 40 frames at 2^24 nodes.
 *
 * Not thread-safe: the caller holds the lock of the structure the tree
 * belongs to.  Nothing here allocates.
 */
#ifndef PROV_IVTREE_H
#define PROV_IVTREE_H

#include <stddef.h>
#include <stdint.h>

struct prov_ivnode {
	struct prov_ivnode *left, *right;
	uint64_t start, last; /* the interval, set by the caller before insertion */
	uint64_t max_last;    /* largest last in this subtree */
	int height;           /* of this subtree; a leaf is 1 */
};

struct prov_ivtree {
	struct prov_ivnode *root;
	size_t count;
};

/* Insert n with n->start <= n->last already set; n must not be in a tree. */
void prov_iv_insert(struct prov_ivtree *t, struct prov_ivnode *n);

/* Remove n, which must be in t (same start and last as when inserted). */
void prov_iv_remove(struct prov_ivtree *t, struct prov_ivnode *n);

/*
 * Call fn(node, arg) for every node whose interval shares at least one
 * address with [start, last], in (start, address) order, until fn returns
 * non-zero.  fn must not change the tree.  Returns the number of calls.
 */
size_t prov_iv_overlap(const struct prov_ivtree *t, uint64_t start, uint64_t last,
		       int (*fn)(struct prov_ivnode *n, void *arg), void *arg);

/*
 * Check every invariant (order, balance, heights, max_last, count): 0, or
 * -EINVAL at the first violation.  For tests; O(n).
 */
int prov_iv_check(const struct prov_ivtree *t);

#endif /* PROV_IVTREE_H */

/*
 * Unit tests of the registration cache's interval index (provider/ivtree.h),
 * no NIC needed: contained, overlapping and adjacent ranges, the ends of the
 * address space, equal starts, early stop, and the tree against a naive
 * model (an array scanned in full) under random inserts, removals and
 * queries, with every invariant checked as it goes.
 */
#include <stdlib.h>
#include <string.h>

#include "ivtree.h"
#include "nstest.h"

#define MAX_NODES 2048

struct node {
	struct prov_ivnode n;
	bool in;
	bool seen;
};

static struct node nodes[MAX_NODES];

static int mark(struct prov_ivnode *n, void *arg)
{
	struct node *x = (struct node *)n;

	(void)arg;
	x->seen = true;
	return 0;
}

static void clear_seen(void)
{
	for (size_t i = 0; i < MAX_NODES; i++)
		nodes[i].seen = false;
}

static void add(struct prov_ivtree *t, size_t i, uint64_t start, uint64_t last)
{
	nodes[i].n.start = start;
	nodes[i].n.last = last;
	prov_iv_insert(t, &nodes[i].n);
	nodes[i].in = true;
}

/* The query [s, l] reports exactly the nodes the model says overlap. */
static bool query_matches(const struct prov_ivtree *t, size_t used, uint64_t s, uint64_t l)
{
	size_t want = 0, got;

	clear_seen();
	got = prov_iv_overlap(t, s, l, mark, NULL);
	for (size_t i = 0; i < used; i++) {
		bool overlap = nodes[i].in && nodes[i].n.start <= l && nodes[i].n.last >= s;

		if (overlap != nodes[i].seen)
			return false;
		want += overlap;
	}
	return got == want;
}

static void test_contained_overlapping_adjacent(void)
{
	struct prov_ivtree t = {0};

	add(&t, 0, 0x1000, 0x1fff); /* [4K, 8K) */
	add(&t, 1, 0x2000, 0x2fff); /* adjacent: [8K, 12K) */
	add(&t, 2, 0x1800, 0x27ff); /* overlapping both */
	add(&t, 3, 0x1100, 0x11ff); /* contained in 0 */
	add(&t, 4, 0x0000, 0xffff); /* containing everything */
	NST_EQ(prov_iv_check(&t), 0);
	NST_EQ(t.count, 5);
	/* One byte at the end of 0 touches 0, 2 and 4, not 1. */
	NST_TRUE(query_matches(&t, 5, 0x1fff, 0x1fff));
	clear_seen();
	NST_EQ(prov_iv_overlap(&t, 0x1fff, 0x1fff, mark, NULL), 3);
	NST_TRUE(nodes[0].seen && nodes[2].seen && nodes[4].seen && !nodes[1].seen);
	/* Adjacent ranges do not overlap: [12K, 16K) touches only 4. */
	clear_seen();
	NST_EQ(prov_iv_overlap(&t, 0x3000, 0x3fff, mark, NULL), 1);
	NST_TRUE(nodes[4].seen);
	/* A query inside 3 finds 3 and those containing it. */
	clear_seen();
	NST_EQ(prov_iv_overlap(&t, 0x1150, 0x1160, mark, NULL), 3);
	NST_TRUE(nodes[3].seen && nodes[0].seen && nodes[4].seen);
	/* Nothing past the end. */
	NST_EQ(prov_iv_overlap(&t, 0x10000, 0x20000, mark, NULL), 0);
	/* An empty (inverted) query reports nothing. */
	NST_EQ(prov_iv_overlap(&t, 0x2000, 0x1000, mark, NULL), 0);
	for (size_t i = 0; i < 5; i++) {
		prov_iv_remove(&t, &nodes[i].n);
		nodes[i].in = false;
		NST_EQ(prov_iv_check(&t), 0);
	}
	NST_TRUE(t.root == NULL);
	NST_EQ(t.count, 0);
}

static void test_edges_of_the_address_space(void)
{
	struct prov_ivtree t = {0};

	add(&t, 0, 0, 0);
	add(&t, 1, UINT64_MAX, UINT64_MAX);
	add(&t, 2, UINT64_MAX - 4095, UINT64_MAX);
	NST_EQ(prov_iv_check(&t), 0);
	NST_EQ(prov_iv_overlap(&t, 0, UINT64_MAX, mark, NULL), 3);
	NST_EQ(prov_iv_overlap(&t, UINT64_MAX, UINT64_MAX, mark, NULL), 2);
	NST_EQ(prov_iv_overlap(&t, 0, 0, mark, NULL), 1);
	NST_EQ(prov_iv_overlap(&t, 1, UINT64_MAX - 4096, mark, NULL), 0);
	for (size_t i = 0; i < 3; i++)
		prov_iv_remove(&t, &nodes[i].n);
	NST_EQ(prov_iv_check(&t), 0);
	NST_EQ(t.count, 0);
}

static int stop_after_two(struct prov_ivnode *n, void *arg)
{
	int *calls = arg;

	(void)n;
	return ++*calls == 2;
}

static void test_equal_starts_and_early_stop(void)
{
	struct prov_ivtree t = {0};
	int calls = 0;

	/* The same buffer with several lengths: equal starts, distinct nodes. */
	for (size_t i = 0; i < 64; i++)
		add(&t, i, 0x10000, 0x10000 + i);
	NST_EQ(prov_iv_check(&t), 0);
	NST_EQ(prov_iv_overlap(&t, 0x10000, 0x10000, mark, NULL), 64);
	NST_EQ(prov_iv_overlap(&t, 0x10020, 0x10020, mark, NULL), 32);
	NST_EQ(prov_iv_overlap(&t, 0, UINT64_MAX, stop_after_two, &calls), 2);
	NST_EQ(calls, 2);
	/* Remove every other one: the rest is still found, in a valid tree. */
	for (size_t i = 0; i < 64; i += 2) {
		prov_iv_remove(&t, &nodes[i].n);
		nodes[i].in = false;
	}
	NST_EQ(prov_iv_check(&t), 0);
	NST_TRUE(query_matches(&t, 64, 0x10010, 0x10010));
	for (size_t i = 1; i < 64; i += 2)
		prov_iv_remove(&t, &nodes[i].n);
	NST_EQ(t.count, 0);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* A random range in a small space, so that overlaps are common. */
static void random_range(uint64_t space, uint64_t *s, uint64_t *l)
{
	uint64_t a = rnd() % space, len = rnd() % 3 == 0 ? rnd() % (space / 4) : rnd() % 64;

	*s = a;
	*l = len > UINT64_MAX - a ? UINT64_MAX : a + len;
}

static void test_random_against_model(void)
{
	struct prov_ivtree t = {0};
	size_t mismatches = 0, bad_trees = 0, live = 0;

	memset(nodes, 0, sizeof(nodes));
	for (int step = 0; step < 20000; step++) {
		size_t i = rnd() % MAX_NODES;
		uint64_t s, l;

		if (rnd() % 3 != 0) {
			if (nodes[i].in) {
				prov_iv_remove(&t, &nodes[i].n);
				nodes[i].in = false;
				live--;
			} else {
				random_range(1u << 20, &s, &l);
				add(&t, i, s, l);
				live++;
			}
		}
		random_range(1u << 20, &s, &l);
		if (!query_matches(&t, MAX_NODES, s, l))
			mismatches++;
		if (step % 97 == 0 && prov_iv_check(&t))
			bad_trees++;
	}
	NST_EQ(mismatches, 0);
	NST_EQ(bad_trees, 0);
	NST_EQ(t.count, live);
	NST_EQ(prov_iv_check(&t), 0);
	/* Depth stays logarithmic: AVL bounds it by 1.44 log2(n + 2). */
	NST_TRUE(t.root == NULL || t.root->height <= 16);
}

int main(int argc, char **argv)
{
	static const struct nst_test tests[] = {
	    {"contained_overlapping_adjacent", test_contained_overlapping_adjacent},
	    {"edges_of_the_address_space", test_edges_of_the_address_space},
	    {"equal_starts_and_early_stop", test_equal_starts_and_early_stop},
	    {"random_against_model", test_random_against_model},
	    {NULL, NULL},
	};

	return nst_main(argc, argv, "cache_index", tests, NULL, NULL);
}

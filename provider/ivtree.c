/* Intrusive interval AVL tree: see ivtree.h. */
#include <errno.h>
#include <stdbool.h>

#include "ivtree.h"

static int height(const struct prov_ivnode *n)
{
	return n ? n->height : 0;
}

/* Recompute n's height and max_last from its children. */
static void update(struct prov_ivnode *n)
{
	int hl = height(n->left), hr = height(n->right);

	n->height = (hl > hr ? hl : hr) + 1;
	n->max_last = n->last;
	if (n->left && n->left->max_last > n->max_last)
		n->max_last = n->left->max_last;
	if (n->right && n->right->max_last > n->max_last)
		n->max_last = n->right->max_last;
}

/* Strict order of nodes: by start, then by address. */
static bool before(const struct prov_ivnode *a, const struct prov_ivnode *b)
{
	if (a->start != b->start)
		return a->start < b->start;
	return (uintptr_t)a < (uintptr_t)b;
}

static struct prov_ivnode *rotate_right(struct prov_ivnode *n)
{
	struct prov_ivnode *l = n->left;

	n->left = l->right;
	l->right = n;
	update(n);
	update(l);
	return l;
}

static struct prov_ivnode *rotate_left(struct prov_ivnode *n)
{
	struct prov_ivnode *r = n->right;

	n->right = r->left;
	r->left = n;
	update(n);
	update(r);
	return r;
}

/* Restore the AVL balance at n (children balanced, heights off by <= 2). */
static struct prov_ivnode *rebalance(struct prov_ivnode *n)
{
	int bal;

	update(n);
	bal = height(n->left) - height(n->right);
	if (bal > 1) {
		if (height(n->left->left) < height(n->left->right))
			n->left = rotate_left(n->left);
		return rotate_right(n);
	}
	if (bal < -1) {
		if (height(n->right->right) < height(n->right->left))
			n->right = rotate_right(n->right);
		return rotate_left(n);
	}
	return n;
}

static struct prov_ivnode *insert(struct prov_ivnode *root, struct prov_ivnode *n)
{
	if (!root)
		return n;
	if (before(n, root))
		root->left = insert(root->left, n);
	else
		root->right = insert(root->right, n);
	return rebalance(root);
}

void prov_iv_insert(struct prov_ivtree *t, struct prov_ivnode *n)
{
	n->left = n->right = NULL;
	n->height = 1;
	n->max_last = n->last;
	t->root = insert(t->root, n);
	t->count++;
}

/* Detach the leftmost node of root's subtree into *min; returns the new subtree. */
static struct prov_ivnode *take_min(struct prov_ivnode *root, struct prov_ivnode **min)
{
	if (!root->left) {
		*min = root;
		return root->right;
	}
	root->left = take_min(root->left, min);
	return rebalance(root);
}

static struct prov_ivnode *remove_node(struct prov_ivnode *root, struct prov_ivnode *n)
{
	struct prov_ivnode *succ;

	if (!root)
		return NULL; /* not in the tree: the caller broke the contract */
	if (root != n) {
		if (before(n, root))
			root->left = remove_node(root->left, n);
		else
			root->right = remove_node(root->right, n);
		return rebalance(root);
	}
	if (!n->left || !n->right)
		return n->left ? n->left : n->right;
	n->right = take_min(n->right, &succ);
	succ->left = n->left;
	succ->right = n->right;
	return rebalance(succ);
}

void prov_iv_remove(struct prov_ivtree *t, struct prov_ivnode *n)
{
	t->root = remove_node(t->root, n);
	n->left = n->right = NULL;
	t->count--;
}

struct overlap_walk {
	uint64_t start, last;
	int (*fn)(struct prov_ivnode *n, void *arg);
	void *arg;
	size_t calls;
	bool stop;
};

static void walk(struct prov_ivnode *n, struct overlap_walk *w)
{
	/* Nothing in this subtree reaches the query's start. */
	if (!n || n->max_last < w->start || w->stop)
		return;
	walk(n->left, w);
	if (w->stop || n->start > w->last)
		return; /* n and everything to its right start after the query */
	if (n->last >= w->start) {
		w->calls++;
		if (w->fn(n, w->arg)) {
			w->stop = true;
			return;
		}
	}
	walk(n->right, w);
}

size_t prov_iv_overlap(const struct prov_ivtree *t, uint64_t start, uint64_t last,
		       int (*fn)(struct prov_ivnode *n, void *arg), void *arg)
{
	struct overlap_walk w = {.start = start, .last = last, .fn = fn, .arg = arg};

	if (start <= last)
		walk(t->root, &w);
	return w.calls;
}

/* Check n's subtree; *count accumulates nodes, *lo the previous node in order. */
static int check(const struct prov_ivnode *n, size_t *count, const struct prov_ivnode **prev)
{
	int hl, hr;
	uint64_t max;

	if (!n)
		return 0;
	if (check(n->left, count, prev))
		return -EINVAL;
	if (*prev && !before(*prev, n))
		return -EINVAL;
	if (n->start > n->last)
		return -EINVAL;
	*prev = n;
	(*count)++;
	if (check(n->right, count, prev))
		return -EINVAL;
	hl = height(n->left);
	hr = height(n->right);
	if (n->height != (hl > hr ? hl : hr) + 1 || hl - hr > 1 || hr - hl > 1)
		return -EINVAL;
	max = n->last;
	if (n->left && n->left->max_last > max)
		max = n->left->max_last;
	if (n->right && n->right->max_last > max)
		max = n->right->max_last;
	return n->max_last == max ? 0 : -EINVAL;
}

int prov_iv_check(const struct prov_ivtree *t)
{
	const struct prov_ivnode *prev = NULL;
	size_t count = 0;

	if (check(t->root, &count, &prev))
		return -EINVAL;
	return count == t->count ? 0 : -EINVAL;
}

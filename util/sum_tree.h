/* The one summation tree of dist.split_invariant: the shape in which nn/grad_tree.c adds a
 * process's batch slices and dist/shm.c adds the ranks' sums. Both drive this code with their
 * own storage, so the shape cannot drift apart between them.
 *
 * Float addition is not associative, so the bits of a sum depend on its shape. The shape here:
 * leaves 0..n-1 (slices in batch order, ranks in rank order) are added as
 *     sum(lo, n) = sum(lo, p) + sum(lo + p, n - p),  p the largest power of two below n,
 * so a power of two is neighbours in pairs, then pairs of pairs, and an instance holding 2^k
 * consecutive slices holds a whole subtree; a count that is not a power of two adds its smaller
 * tail first: 7 is ((0+1)+(2+3)) + ((4+5)+6). The earlier leaves are always on the left.
 *
 * It runs as a stack of partial sums, so leaves can arrive one at a time and only 1 + log2(n)
 * partial sums are held. The caller owns the entries (buffers, pointers) and the addition:
 *     dt_sum_tree_begin(&t);
 *     for each leaf: write it into entry dt_sum_tree_next(&t); dt_sum_tree_push(&t, add, ctx);
 *     top = dt_sum_tree_finish(&t, add, ctx);   (entry 0 holds the sum; -1: no leaves)
 * add(ctx, into, from) must set entry into = entry into + entry from, element by element; from is
 * the entry just above into and is free afterwards. */
#ifndef DT_UTIL_SUM_TREE_H
#define DT_UTIL_SUM_TREE_H

struct dt_sum_tree {
    unsigned long leaves; /* pushed so far */
    int depth;            /* entries holding partial sums */
};

typedef void dt_sum_tree_add_fn(void *ctx, int into, int from);

/* Entries a sum of up to n leaves needs: 1 + floor(log2(n)), 0 for none. */
int dt_sum_tree_depth(unsigned long n);

void dt_sum_tree_begin(struct dt_sum_tree *t);
/* The entry the next leaf goes into. */
int dt_sum_tree_next(const struct dt_sum_tree *t);
/* Takes the leaf written into entry dt_sum_tree_next() and adds the subtrees it completes. */
void dt_sum_tree_push(struct dt_sum_tree *t, dt_sum_tree_add_fn *add, void *ctx);
/* Adds the unequal subtrees left, the latest first. Returns the entry holding the sum of every
 * leaf (0), or -1 when none was pushed. The tree is then empty again. */
int dt_sum_tree_finish(struct dt_sum_tree *t, dt_sum_tree_add_fn *add, void *ctx);

#endif

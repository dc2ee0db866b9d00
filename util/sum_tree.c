/* The fixed summation tree as a stack of partial sums (see sum_tree.h).
 *
 * Entry d holds the sum of a run of consecutive leaves, a power of two long, the runs shrinking
 * up the stack: after n leaves the entries are n's binary digits, largest first. A leaf that
 * makes the count a multiple of 2^k completes k pairs of equal runs, added at once (a binary
 * counter's carries); at the end the unequal runs are added from the top down, which is the
 * recursive definition's "largest power of two, plus the rest". */
#include "util/sum_tree.h"

int dt_sum_tree_depth(unsigned long n)
{
    int depth = 0;
    for (; n; n >>= 1)
        depth++;
    return depth;
}

void dt_sum_tree_begin(struct dt_sum_tree *t)
{
    t->leaves = 0;
    t->depth = 0;
}

int dt_sum_tree_next(const struct dt_sum_tree *t)
{
    return t->depth;
}

/* The top entry added into the one below it, and popped. */
static void merge_top(struct dt_sum_tree *t, dt_sum_tree_add_fn *add, void *ctx)
{
    add(ctx, t->depth - 2, t->depth - 1);
    t->depth--;
}

void dt_sum_tree_push(struct dt_sum_tree *t, dt_sum_tree_add_fn *add, void *ctx)
{
    t->depth++;
    t->leaves++;
    for (unsigned long carry = t->leaves; !(carry & 1ul); carry >>= 1)
        merge_top(t, add, ctx);
}

int dt_sum_tree_finish(struct dt_sum_tree *t, dt_sum_tree_add_fn *add, void *ctx)
{
    while (t->depth > 1)
        merge_top(t, add, ctx);
    int top = t->depth ? 0 : -1;
    dt_sum_tree_begin(t);
    return top;
}

/* Weight gradients whose bits do not depend on how the global batch is split across processes.
 *
 * A weight gradient is a sum over the batch's samples. Summed per process and then across
 * processes, its float rounding depends on where the split falls, and a deep net amplifies
 * that ulp into a different trajectory within tens of steps (docs/resnet.md). So the sum has a
 * fixed shape: the global batch is cut into slices of dt_grad_slice() samples, each slice's
 * gradient is computed from zero by the layer's kernel, and the slices combine in the fixed
 * tree of util/sum_tree.h (neighbours in pairs, then pairs of pairs, in batch order). A process
 * whose share is a power-of-two number of slices holds a complete subtree; the shm all-reduce
 * (dist/shm.c) adds the ranks' sums in the same tree, driving the same code, so 1, 2, 4 or 8
 * processes give the same bits.
 *
 * The tree holds 1 + log2(slices) partial sums, each a buffer of the largest layer's size. */
#ifndef DT_NN_GRAD_TREE_H
#define DT_NN_GRAD_TREE_H

#include <stddef.h>

#include "util/sum_tree.h"

/* The most processes a batch split can be aligned for: slices = global batch / this (or the
 * largest power of two below it that divides the batch). */
#define DT_GRAD_SLICES 8

/* Samples per slice for a global batch: batch / 2^k for the largest k with 2^k <= DT_GRAD_SLICES
 * dividing the batch (a batch of 100 gives slices of 25). */
int dt_grad_slice(int global_batch);

struct dt_grad_tree {
    float *mem;    /* entries * cap floats: the sum tree's entry d at mem + d * cap */
    size_t cap, n; /* floats per entry: allocated, and in the current sum */
    int entries;   /* dt_sum_tree_depth(the most slices reserved for) */
    struct dt_sum_tree tree;
};

/* Buffers for sums of up to `slices` slices of n floats each. 0 or DT_ERUNTIME. */
int dt_grad_tree_reserve(struct dt_grad_tree *t, size_t n, int slices);
void dt_grad_tree_release(struct dt_grad_tree *t);

/* Starts a sum of n-float slices (n <= the reserved size). */
void dt_grad_tree_begin(struct dt_grad_tree *t, size_t n);
/* The buffer the next slice's gradient goes into (n floats, NOT zeroed), then push it. */
float *dt_grad_tree_slot(const struct dt_grad_tree *t);
void dt_grad_tree_push(struct dt_grad_tree *t);
/* Writes the sum of every pushed slice to out (n floats; zeros when none was pushed). */
void dt_grad_tree_finish(struct dt_grad_tree *t, float *out);

#endif

/* Weight gradients whose bits do not depend on how the global batch is split across processes.
 *
 * A weight gradient is a sum over the batch's samples. Summed per process and then across
 * processes, its float rounding depends on where the split falls, and a deep net amplifies
 * that ulp into a different trajectory within tens of steps (docs/resnet.md). So the sum has a
 * fixed shape: the global batch is cut into slices of dt_grad_slice() samples, each slice's
 * gradient is computed from zero by the layer's kernel, and the slices combine in a binary
 * tree (neighbours in pairs, then pairs of pairs, in batch order). A process whose share is a
 * power-of-two number of slices holds a complete subtree; the shm all-reduce (dist/shm.c)
 * adds the ranks' sums in the same tree shape, so 1, 2, 4 or 8 processes give the same bits.
 *
 * The tree is a binary counter: level k holds the sum of 2^k consecutive slices, and pushing a
 * slice carries it up through the occupied levels. It needs 1 + log2(slices) buffers. */
#ifndef DT_NN_GRAD_TREE_H
#define DT_NN_GRAD_TREE_H

#include <stdbool.h>
#include <stddef.h>

#define DT_GRAD_TREE_MAX_LEVELS 24

/* The most processes a batch split can be aligned for: slices = global batch / this (or the
 * largest power of two below it that divides the batch). */
#define DT_GRAD_SLICES 8

/* Samples per slice for a global batch: batch / 2^k for the largest k with 2^k <= DT_GRAD_SLICES
 * dividing the batch (a batch of 100 gives slices of 25). */
int dt_grad_slice(int global_batch);

struct dt_grad_tree {
    float *mem;    /* (levels + 1) * cap floats */
    size_t cap, n; /* floats per buffer: allocated, and in the current sum */
    int levels;    /* buffers for partial sums, besides the one being filled */
    float *level[DT_GRAD_TREE_MAX_LEVELS];
    float *spare[DT_GRAD_TREE_MAX_LEVELS + 1]; /* free buffers; spare[nspare - 1] is filled next */
    int nspare;
    unsigned full; /* bit k: level[k] holds a partial sum */
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

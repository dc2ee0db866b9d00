/* The fixed-shape sum of per-slice gradients (see grad_tree.h). */
#include "nn/grad_tree.h"

#include <string.h>

#include "nn/layer_common.h"
#include "util/alloc.h"
#include "util/err.h"

int dt_grad_slice(int global_batch)
{
    int parts = DT_GRAD_SLICES;
    while (parts > 1 && global_batch % parts)
        parts /= 2;
    return global_batch > parts ? global_batch / parts : 1;
}

int dt_grad_tree_reserve(struct dt_grad_tree *t, size_t n, int slices)
{
    int levels = 1;
    while (levels < DT_GRAD_TREE_MAX_LEVELS && (1L << levels) < slices)
        levels++;
    levels++; /* the carry out of a full counter of 2^levels - 1 slices */
    if (levels > DT_GRAD_TREE_MAX_LEVELS)
        return dt_fail(DT_ERUNTIME, "gradient tree: %d slices is too many", slices);
    if (t->mem && t->cap >= n && t->levels >= levels)
        return 0;
    dt_grad_tree_release(t);
    if (!(t->mem = dt_alloc((size_t)(levels + 1) * n, sizeof(float))))
        return dt_fail(DT_ERUNTIME, "gradient tree: out of memory for %d x %zu floats", levels + 1,
                       n);
    t->cap = n;
    t->levels = levels;
    return 0;
}

void dt_grad_tree_release(struct dt_grad_tree *t)
{
    dt_free(t->mem);
    memset(t, 0, sizeof *t);
}

void dt_grad_tree_begin(struct dt_grad_tree *t, size_t n)
{
    t->n = n;
    t->full = 0;
    t->nspare = t->levels + 1;
    for (int i = 0; i < t->nspare; i++)
        t->spare[i] = t->mem + (size_t)i * t->cap;
}

float *dt_grad_tree_slot(const struct dt_grad_tree *t)
{
    return t->spare[t->nspare - 1];
}

/* into[i] += from[i]: the earlier slices' sum on the left (float addition commutes exactly). */
static void add_into(float *into, const float *from, size_t n)
{
#pragma omp parallel for simd if (n > DT_PARALLEL_MIN)
    for (size_t i = 0; i < n; i++)
        into[i] += from[i];
}

void dt_grad_tree_push(struct dt_grad_tree *t)
{
    float *carry = t->spare[--t->nspare];
    int k = 0;
    for (; t->full >> k & 1u; k++) {
        add_into(t->level[k], carry, t->n);
        t->spare[t->nspare++] = carry;
        carry = t->level[k];
    }
    t->full &= ~((1u << k) - 1u);
    t->level[k] = carry;
    t->full |= 1u << k;
}

void dt_grad_tree_finish(struct dt_grad_tree *t, float *out)
{
    int top = t->levels;
    while (top >= 0 && !(t->full >> top & 1u))
        top--;
    if (top < 0) {
        memset(out, 0, t->n * sizeof *out);
        return;
    }
    /* Unequal subtrees (a slice count that is not a power of two): earlier, larger first. */
    float *acc = t->level[top];
    for (int k = top - 1; k >= 0; k--)
        if (t->full >> k & 1u)
            add_into(acc, t->level[k], t->n);
    memcpy(out, acc, t->n * sizeof *out);
    t->full = 0;
}

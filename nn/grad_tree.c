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
    int entries = dt_sum_tree_depth(slices > 1 ? (unsigned long)slices : 1ul);
    if (t->mem && t->cap >= n && t->entries >= entries)
        return 0;
    dt_grad_tree_release(t);
    if (!(t->mem = dt_alloc((size_t)entries * n, sizeof(float))))
        return dt_fail(DT_ERUNTIME, "gradient tree: out of memory for %d x %zu floats", entries, n);
    t->cap = n;
    t->entries = entries;
    return 0;
}

void dt_grad_tree_release(struct dt_grad_tree *t)
{
    dt_free(t->mem);
    memset(t, 0, sizeof *t);
}

static float *entry(const struct dt_grad_tree *t, int d)
{
    return t->mem + (size_t)d * t->cap;
}

void dt_grad_tree_begin(struct dt_grad_tree *t, size_t n)
{
    t->n = n;
    dt_sum_tree_begin(&t->tree);
}

float *dt_grad_tree_slot(const struct dt_grad_tree *t)
{
    return entry(t, dt_sum_tree_next(&t->tree));
}

/* The sum tree's addition: entry into += entry from, the earlier slices' sum on the left. */
static void add_entries(void *ctx, int into, int from)
{
    const struct dt_grad_tree *t = ctx;
    float *acc = entry(t, into);
    const float *later = entry(t, from);
    size_t n = t->n;
#pragma omp parallel for simd if (parallel : n > DT_PARALLEL_MIN)
    for (size_t i = 0; i < n; i++)
        acc[i] += later[i];
}

void dt_grad_tree_push(struct dt_grad_tree *t)
{
    dt_sum_tree_push(&t->tree, add_entries, t);
}

void dt_grad_tree_finish(struct dt_grad_tree *t, float *out)
{
    int top = dt_sum_tree_finish(&t->tree, add_entries, t);
    if (top < 0)
        memset(out, 0, t->n * sizeof *out);
    else
        memcpy(out, entry(t, top), t->n * sizeof *out);
}

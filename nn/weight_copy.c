/* The bf16 weight copies: their arena, their pieces and the optimizer step that makes them
 * (weight_copy.h). */
#include "nn/weight_copy.h"

#include <stdlib.h>

#include "nn/layers.h"
#include "util/alloc.h"
#include "util/err.h"

/* The parameters of no layer's copy (biases, batchnorms) go in pieces of at most this many
 * floats: an update's thread start-up costs about as much as a piece this size. */
#define PLAIN_PIECE 65536

struct dt_weight_copy {
    int count;            /* pieces */
    size_t *cuts;         /* count + 1 arena offsets */
    struct dt_layer **by; /* per piece: the layer whose copy it holds, or NULL */
    size_t *at;           /* per piece: the offset of that layer's params */
};

/* Appends piece [lo, hi), whose copy layer l (its params at arena offset at) makes, or none
 * (l NULL); count_only: counts it, the arrays not yet allocated. */
static void add_piece(struct dt_weight_copy *w, bool count_only, size_t lo, size_t hi,
                      struct dt_layer *l, size_t at)
{
    if (!count_only) {
        w->cuts[w->count] = lo;
        w->cuts[w->count + 1] = hi;
        w->by[w->count] = l;
        w->at[w->count] = at;
    }
    w->count++;
}

/* [lo, hi) of no layer's copy, in plain pieces. */
static void add_plain(struct dt_weight_copy *w, bool count_only, size_t lo, size_t hi)
{
    for (size_t p = lo; p < hi; p += PLAIN_PIECE)
        add_piece(w, count_only, p, hi - p < PLAIN_PIECE ? hi : p + PLAIN_PIECE, NULL, 0);
}

/* Every piece in arena order; returns whether any layer keeps a copy. */
static bool cut(const struct dt_model *m, struct dt_weight_copy *w, bool count_only)
{
    bool any = false;
    size_t done = 0; /* arena offset cut so far */
    w->count = 0;
    for (int i = 0; i < m->nlayers; i++) {
        struct dt_layer *l = m->layers[i];
        size_t at = (size_t)(l->params - m->params), count = 0;
        size_t piece = l->kind->ops->copy_piece ? l->kind->ops->copy_piece(l, &count) : 0;
        if (!piece || !count)
            continue;
        any = true;
        add_plain(w, count_only, done, at);
        for (size_t p = 0; p < count; p += piece)
            add_piece(w, count_only, at + p, count - p < piece ? at + count : at + p + piece, l,
                      at);
        done = at + count;
    }
    add_plain(w, count_only, done, m->nparams);
    return any;
}

size_t dt_weight_copy_round(size_t bytes)
{
    return (bytes + 63) / 64 * 64;
}

int dt_weight_copy_arena(struct dt_model *m, size_t bytes, void *storage, size_t capacity)
{
    m->copies_bytes = bytes;
    m->copies_external = storage && bytes; /* an fp32 model keeps none, shared or not */
    if (storage && bytes > capacity)
        return dt_fail(DT_ERUNTIME, "bf16 weight copies: %zu bytes needed, %zu given", bytes,
                       capacity);
    m->copies = m->copies_external ? storage : bytes ? dt_alloc(bytes, 1) : NULL;
    if (bytes && !m->copies)
        return dt_fail_context(-DT_ERUNTIME, "bf16 weight copies");
    return 0;
}

void *dt_model_copy_take(struct dt_model *m, size_t bytes)
{
    void *p = m->copies + m->copies_used;
    m->copies_used += dt_weight_copy_round(bytes);
    return p;
}

void dt_weight_copy_free(struct dt_model *m)
{
    struct dt_weight_copy *w = m->weight_copy;
    if (w) {
        free(w->cuts);
        free(w->by);
        free(w->at);
        free(w);
    }
    m->weight_copy = NULL;
    if (!m->copies_external)
        dt_free(m->copies);
    m->copies = NULL;
}

int dt_weight_copy_plan(struct dt_model *m)
{
    struct dt_weight_copy probe;
    if (!cut(m, &probe, true))
        return 0;
    struct dt_weight_copy *w = calloc(1, sizeof *w);
    if (w) {
        w->cuts = calloc((size_t)probe.count + 1, sizeof *w->cuts);
        w->by = calloc((size_t)probe.count, sizeof *w->by);
        w->at = calloc((size_t)probe.count, sizeof *w->at);
    }
    m->weight_copy = w;
    if (!w || !w->cuts || !w->by || !w->at) {
        dt_weight_copy_free(m);
        return dt_fail(DT_ERUNTIME, "out of memory planning the bf16 weight copy");
    }
    cut(m, w, false);
    return 0;
}

/* Piece i's copy, made by its layer (nothing for a piece of no layer's copy). */
static void copy_one(const struct dt_weight_copy *w, int i)
{
    struct dt_layer *l = w->by[i];
    if (l)
        l->kind->ops->copy_weights(l, w->cuts[i] - w->at[i], w->cuts[i + 1] - w->at[i]);
}

/* Pieces [first, first + count) of the plan, for dt_optim_step_pieces. */
struct piece_run {
    const struct dt_weight_copy *w;
    int first;
};

/* After a piece's update: its layer copies it. */
static void copy_after(void *ctx, int i)
{
    const struct piece_run *r = ctx;
    copy_one(r->w, r->first + i);
}

/* The step of pieces [first, end), each copied after its update. */
static int step_pieces(struct dt_model *m, struct dt_optim *o, int first, int end, double lr)
{
    const struct dt_weight_copy *w = m->weight_copy;
    struct piece_run r = {w, first};
    struct dt_optim_pieces pc = {w->cuts + first, end - first, copy_after, &r};
    return dt_optim_step_pieces(o, m->params, m->grads, m->nparams, lr, &pc);
}

int dt_model_optim_step(struct dt_model *m, struct dt_optim *o, double lr)
{
    struct dt_weight_copy *w = m->weight_copy;
    if (!w)
        return dt_optim_step(o, m->params, m->grads, m->nparams, lr);
    int rc = step_pieces(m, o, 0, w->count, lr);
    m->weights_copied = rc == 0;
    return rc;
}

/* The index of the first cut at or after `at` (at <= the arena's size). */
static int first_cut(const struct dt_weight_copy *w, size_t at)
{
    int lo = 0, hi = w->count;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (w->cuts[mid] < at)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The index of cut `at` among the plan's (-1 when it is none). */
static int cut_index(const struct dt_weight_copy *w, size_t at)
{
    int i = first_cut(w, at);
    return w->cuts[i] == at ? i : -1;
}

size_t dt_weight_copy_cut(const struct dt_model *m, size_t at)
{
    const struct dt_weight_copy *w = m->weight_copy;
    if (at >= m->nparams)
        return m->nparams;
    return w ? w->cuts[first_cut(w, at)] : at & ~(size_t)15;
}

/* The pieces [*first, *end) that slice [lo, hi) is made of; false (no pieces) when the model
 * keeps no copy, lo or hi is not a cut, or the slice is empty. */
static bool slice_pieces(const struct dt_weight_copy *w, size_t lo, size_t hi, int *first, int *end)
{
    *first = w ? cut_index(w, lo) : -1;
    *end = w ? cut_index(w, hi) : -1;
    return *first >= 0 && *end > *first;
}

int dt_model_optim_step_slice(struct dt_model *m, struct dt_optim *o, size_t lo, size_t hi,
                              double lr)
{
    const struct dt_weight_copy *w = m->weight_copy;
    int first, end;
    if (!slice_pieces(w, lo, hi, &first, &end))
        return dt_optim_step_range(o, m->params, m->grads, lo, hi, lr);
    return step_pieces(m, o, first, end, lr);
}

void dt_model_copy_slice(struct dt_model *m, size_t lo, size_t hi)
{
    const struct dt_weight_copy *w = m->weight_copy;
    int first, end;
    if (!slice_pieces(w, lo, hi, &first, &end))
        return;
#pragma omp parallel for schedule(dynamic, 1) if (end - first > 1)
    for (int i = first; i < end; i++)
        copy_one(w, i);
}

/* The optimizer step that makes a bf16 model's weight copies (weight_copy.h). */
#include "nn/weight_copy.h"

#include <stdlib.h>

#include "nn/layers.h"
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

/* After piece i's update: its layer copies it. */
static void copy_piece(void *ctx, int i)
{
    const struct dt_weight_copy *w = ctx;
    struct dt_layer *l = w->by[i];
    if (l)
        l->kind->ops->copy_weights(l, w->cuts[i] - w->at[i], w->cuts[i + 1] - w->at[i]);
}

int dt_model_optim_step(struct dt_model *m, struct dt_optim *o, double lr)
{
    struct dt_weight_copy *w = m->weight_copy;
    if (!w)
        return dt_optim_step(o, m->params, m->grads, m->nparams, lr);
    struct dt_optim_pieces pc = {w->cuts, w->count, copy_piece, w};
    int rc = dt_optim_step_pieces(o, m->params, m->grads, m->nparams, lr, &pc);
    m->weights_copied = rc == 0;
    return rc;
}

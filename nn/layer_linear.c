/* linear: y = x W^T + b with W [out, in], like torch.nn.Linear. A non-flat input (c x h x w)
 * is read as its flattened c*h*w vector, exactly what an nn.Flatten in front would give, so a
 * flatten layer before it is optional. The three products are OpenBLAS GEMMs, one per batch
 * when no gradient slice is set, else one per slice (nn/grad_tree.h): OpenBLAS rounds
 * differently with the GEMM's height, and the weight gradient is summed in the slices' tree.
 * In a bf16 model the products are bf16 (nn/bf16_layers.h): dt_gemm_bf16 on the tile paths,
 * else these GEMMs on bf16-rounded copies of x, the weights and dy. */
#include <stdlib.h>
#include <string.h>

#include "nn/bf16_layers.h"
#include "nn/kernels/bf16/bf16.h"
#include "nn/kernels/fp32/blas.h"
#include "nn/init.h"
#include "nn/layer_common.h"
#include "nn/weight_copy.h"
#include "util/err.h"

struct linear {
    int in, out;
    bool bias;
    struct dt_bf16_linear *bf; /* bf16 model */
    float *round_w; /* bf16, emulated: the rounded weights, in the model's copy arena (x and dy:
                       in the call scratch) */
};

static int linear_setup(struct dt_layer *l, const struct dt_layer_spec *spec, struct dt_shape in,
                        struct dt_layer_setup *s)
{
    if (spec->out_features < 1)
        return dt_fail(DT_EUSAGE, "out_features %d, expected >= 1", spec->out_features);
    struct linear *li = calloc(1, sizeof *li);
    if (!li)
        return dt_fail(DT_ERUNTIME, "out of memory");
    l->state = li;
    li->in = (int)dt_shape_size(in);
    li->out = spec->out_features;
    li->bias = spec->bias;
    l->out = (struct dt_shape){li->out, 1, 1};
    l->nparams = (size_t)li->out * li->in + (li->bias ? (size_t)li->out : 0);
    if (l->model->precision == DT_PRECISION_BF16) {
        int rc =
            dt_bf16_linear_setup(&li->bf, li->in, li->out, l->model->max_batch, &s->copy_bytes);
        if (rc < 0)
            return rc;
        size_t rows = (size_t)l->model->max_batch;
        if (!dt_bf16_linear_tiles(li->bf)) {
            s->copy_bytes = 4.0 * (double)li->out * li->in;
            s->call_scratch_bytes = (double)dt_bf16_rounded_bytes(rows * li->in, rows * li->out);
        } else {
            s->call_scratch_bytes = (double)dt_bf16_linear_call_bytes(li->bf);
        }
        s->precision = dt_bf16_linear_note(li->bf);
    }
    return 0;
}

static int linear_init(struct dt_layer *l, uint64_t seed)
{
    struct linear *li = l->state;
    size_t nw = (size_t)li->out * li->in;
    if (li->bf && dt_bf16_linear_tiles(li->bf))
        dt_bf16_linear_init(li->bf, &l->model->call_scratch,
                            dt_model_copy_take(l->model, dt_bf16_linear_copy_bytes(li->bf)));
    else if (li->bf)
        li->round_w = dt_model_copy_take(l->model, nw * sizeof(float));
    int wshape[2] = {li->out, li->in};
    dt_layer_describe(l, "weight", true, 0, 2, wshape);
    if (li->bias)
        dt_layer_describe(l, "bias", true, nw, 1, &li->out);
    dt_init_fan_in(l->params, nw, li->bias ? l->params + nw : NULL, (size_t)li->out, (size_t)li->in,
                   seed, l->index);
    return 0;
}

static void forward_rows(const struct dt_layer *l, const float *x, const float *weight, float *y,
                         int rows)
{
    const struct linear *li = l->state;
    if (li->bf && dt_bf16_linear_tiles(li->bf)) {
        dt_bf16_linear_forward(li->bf, x, li->bias ? l->params + (size_t)li->out * li->in : NULL, y,
                               rows);
        return;
    }
    float beta = 0.0f;
    if (li->bias) {
        const float *bias = l->params + (size_t)li->out * li->in;
        for (int b = 0; b < rows; b++)
            memcpy(y + (size_t)b * li->out, bias, li->out * sizeof *y);
        beta = 1.0f;
    }
    dt_sgemm(false, true, rows, li->out, li->in, 1.0f, x, li->in, weight, li->in, beta, y, li->out);
}

static void linear_forward(struct dt_layer *l, const float *x, float *y, int batch,
                           const struct dt_layer_fwd *c)
{
    struct linear *li = l->state;
    int slice = c->run.training ? dt_layer_grad_slice(l, batch) : 0; /* eval: no sums */
    if (!slice)
        slice = batch;
    const float *weight = l->params;
    if (li->bf && dt_bf16_linear_tiles(li->bf)) {
        if (!c->weights_copied)
            dt_bf16_linear_pack_weights(li->bf, weight, c->run.training);
    } else if (li->bf) {
        struct dt_bf16_rounded r;
        dt_bf16_rounded_take(&r, &l->model->call_scratch, (size_t)batch * li->in, 0);
        weight = c->weights_copied
                     ? li->round_w
                     : dt_bf16_round_into(li->round_w, weight, (size_t)li->out * li->in);
        x = dt_bf16_round_into(r.x, x, (size_t)batch * li->in);
    }
    for (int b0 = 0; b0 < batch; b0 += slice)
        forward_rows(l, x + (size_t)b0 * li->in, weight, y + (size_t)b0 * li->out,
                     batch - b0 < slice ? batch - b0 : slice);
}

/* Rows [0, rows) of x and dy: the weight and bias gradients written to g, dx unless NULL. */
static void backward_rows(const struct dt_layer *l, const float *x, const float *weight,
                          const float *dy, float *dx, int rows, float *g)
{
    const struct linear *li = l->state;
    bool tiles = li->bf && dt_bf16_linear_tiles(li->bf);
    if (tiles)
        dt_bf16_linear_backward(li->bf, x, dy, dx, rows, g);
    else
        dt_sgemm(true, false, li->out, li->in, rows, 1.0f, dy, li->out, x, li->in, 0.0f, g, li->in);
    if (li->bias) {
        float *db = g + (size_t)li->out * li->in;
        for (int o = 0; o < li->out; o++)
            db[o] = 0.0f;
        for (int b = 0; b < rows; b++)
            for (int o = 0; o < li->out; o++)
                db[o] += li->bf ? dt_bf16_round(dy[(size_t)b * li->out + o])
                                : dy[(size_t)b * li->out + o]; /* bf16: autocast's dy */
    }
    if (dx && !tiles)
        dt_sgemm(false, false, rows, li->in, li->out, 1.0f, dy, li->out, weight, li->in, 0.0f, dx,
                 li->in);
}

static void linear_backward(struct dt_layer *l, const float *x, const float *y, const float *dy,
                            float *dx, int batch, const struct dt_layer_bwd *c)
{
    (void)c;
    (void)y;
    const struct linear *li = l->state;
    const float *weight = l->params;
    if (li->bf && !dt_bf16_linear_tiles(li->bf)) { /* the weights forward rounded; x, dy */
        struct dt_bf16_rounded r;
        size_t nx = (size_t)batch * li->in, ny = (size_t)batch * li->out;
        dt_bf16_rounded_take(&r, &l->model->call_scratch, nx, ny);
        x = dt_bf16_round_into(r.x, x, nx); /* the same x forward rounded: the same values */
        weight = li->round_w;
        dy = dt_bf16_round_into(r.dy, dy, ny);
    }
    int slice = dt_layer_grad_slice(l, batch);
    if (!slice) {
        backward_rows(l, x, weight, dy, dx, batch, l->grads);
    } else {
        struct dt_grad_tree *t = &l->model->grad_tree;
        dt_grad_tree_begin(t, l->nparams);
        for (int b0 = 0; b0 < batch; b0 += slice) {
            backward_rows(l, x + (size_t)b0 * li->in, weight, dy + (size_t)b0 * li->out,
                          dx ? dx + (size_t)b0 * li->in : NULL,
                          batch - b0 < slice ? batch - b0 : slice, dt_grad_tree_slot(t));
            dt_grad_tree_push(t);
        }
        dt_grad_tree_finish(t, l->grads);
    }
    if (li->bf && dx) /* a bf16 linear's input gradient, as autocast returns it */
        dt_bf16_round_n(dx, dx, (size_t)batch * li->in);
}

static void linear_destroy(struct dt_layer *l)
{
    struct linear *li = l->state;
    if (li) /* the weight copy is the model's (its copy arena) */
        dt_bf16_linear_free(li->bf);
    free(li);
}

/* The bf16 weight copy (nn/weight_copy.h): the tiles mode's packs 32 rows at a time where the
 * weights are whole tiles (a row block's A tiles and one tile of B's depth; else whole), the
 * emulated mode's rounded weights in pieces of any cut. */
static size_t linear_copy_piece(const struct dt_layer *l, size_t *count)
{
    const struct linear *li = l->state;
    *count = (size_t)li->out * li->in;
    if (!li->bf)
        return 0;
    return dt_bf16_linear_tiles(li->bf) ? (size_t)dt_bf16_linear_pack_piece(li->bf) * li->in
                                        : DT_BF16_ROUNDED_PIECE;
}

static void linear_copy_weights(struct dt_layer *l, size_t lo, size_t hi)
{
    struct linear *li = l->state;
    if (dt_bf16_linear_tiles(li->bf))
        dt_bf16_linear_pack_rows(li->bf, l->params, (int)(lo / li->in), (int)(hi / li->in));
    else
        dt_bf16_round_into(li->round_w + lo, l->params + lo, hi - lo);
}

const struct dt_layer_ops dt_linear_ops = {.setup = linear_setup,
                                           .init = linear_init,
                                           .forward = linear_forward,
                                           .backward = linear_backward,
                                           .destroy = linear_destroy,
                                           .copy_piece = linear_copy_piece,
                                           .copy_weights = linear_copy_weights};

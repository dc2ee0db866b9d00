/* dropout (element-wise, torch.nn.Dropout) and dropout2d (whole channels, torch.nn.Dropout2d):
 * one implementation, two kinds, differing only in the unit a keep/drop decision covers (one
 * value or one h x w plane), so both live in this file.
 *
 * Training: each unit is kept with probability 1 - p and scaled by 1 / (1 - p); eval: identity.
 * The mask of a sample comes from its own RNG stream keyed by (seed, DT_RNG_DROPOUT, epoch,
 * sample_id * 64 + layer index): it does not depend on the rank or the batch position that
 * processes the sample, which keeps N instances on 1 instance's trajectory. Without sample ids
 * the position in the batch is used. The mask (one byte per unit, max_batch x units) is kept
 * for backward; a backward after an eval forward is the identity.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn/kernels/fp32/elementwise.h"
#include "nn/layer_common.h"
#include "util/alloc.h"
#include "util/rng.h"

struct dropout {
    float p;
    size_t unit;  /* floats per keep/drop decision */
    size_t units; /* decisions per sample */
    uint8_t *mask;
    bool training; /* mode of the last forward */
};

static int setup(struct dt_layer *l, const struct dt_layer_spec *spec, struct dt_shape in,
                 struct dt_layer_setup *s, size_t unit)
{
    if (!(spec->p >= 0.0f && spec->p <= 1.0f))
        return dt_fail(DT_EUSAGE, "p %g, expected 0 <= p <= 1", (double)spec->p);
    struct dropout *d = calloc(1, sizeof *d);
    if (!d)
        return dt_fail(DT_ERUNTIME, "out of memory");
    l->state = d;
    l->out = in;
    d->p = spec->p;
    d->unit = unit;
    d->units = dt_shape_size(in) / unit;
    s->scratch_bytes = (double)l->model->max_batch * (double)d->units;
    return 0; /* the mask at init, once the model's size has been checked (nn/model.c) */
}

static int dropout_init(struct dt_layer *l, uint64_t seed)
{
    (void)seed;
    struct dropout *d = l->state;
    d->mask = dt_alloc((size_t)l->model->max_batch * d->units, 1);
    return d->mask ? 0 : dt_fail_context(-DT_ERUNTIME, "dropout mask");
}

static int dropout_setup(struct dt_layer *l, const struct dt_layer_spec *spec, struct dt_shape in,
                         struct dt_layer_setup *s)
{
    return setup(l, spec, in, s, 1);
}

static int dropout2d_setup(struct dt_layer *l, const struct dt_layer_spec *spec, struct dt_shape in,
                           struct dt_layer_setup *s)
{
    return setup(l, spec, in, s, (size_t)in.h * in.w);
}

static void draw_mask(const struct dropout *d, uint8_t *mask, uint64_t key)
{
    struct dt_rng r;
    dt_rng_init(&r, key);
    for (size_t u = 0; u < d->units; u++)
        mask[u] = dt_rng_uniform(&r) >= d->p;
}

/* y = x * mask * scale per unit; dx = dy * mask * scale is the same operation. */
static void apply_mask(const struct dropout *d, const float *in, float *out, int batch)
{
    float scale = d->p < 1.0f ? 1.0f / (1.0f - d->p) : 0.0f;
    dt_dropout_apply(d->mask, d->units, d->unit, scale, in, out, batch);
}

static void dropout_forward(struct dt_layer *l, const float *x, float *y, int batch,
                            const struct dt_layer_fwd *c)
{
    const struct dt_forward_ctx *ctx = &c->run;
    struct dropout *d = l->state;
    d->training = ctx->training;
    if (!ctx->training) {
        memcpy(y, x, (size_t)batch * d->units * d->unit * sizeof *y);
        return;
    }
#pragma omp parallel for if ((size_t)batch * d->units > DT_PARALLEL_MIN)
    for (int b = 0; b < batch; b++) {
        uint64_t sample = ctx->sample_ids ? ctx->sample_ids[b] : (uint64_t)b;
        uint64_t key =
            dt_rng_key(ctx->seed, DT_RNG_DROPOUT, ctx->epoch, sample * 64 + (uint64_t)l->index);
        draw_mask(d, d->mask + (size_t)b * d->units, key);
    }
    apply_mask(d, x, y, batch);
}

static void dropout_backward(struct dt_layer *l, const float *x, const float *y, const float *dy,
                             float *dx, int batch, const struct dt_layer_bwd *c)
{
    (void)x, (void)y, (void)c;
    struct dropout *d = l->state;
    if (!dx)
        return;
    if (d->training)
        apply_mask(d, dy, dx, batch);
    else
        memcpy(dx, dy, (size_t)batch * d->units * d->unit * sizeof *dx);
}

static void dropout_destroy(struct dt_layer *l)
{
    struct dropout *d = l->state;
    if (d)
        dt_free(d->mask);
    free(d);
}

const struct dt_layer_ops dt_dropout_ops = {.setup = dropout_setup,
                                            .init = dropout_init,
                                            .forward = dropout_forward,
                                            .backward = dropout_backward,
                                            .destroy = dropout_destroy};
const struct dt_layer_ops dt_dropout2d_ops = {.setup = dropout2d_setup,
                                              .init = dropout_init,
                                              .forward = dropout_forward,
                                              .backward = dropout_backward,
                                              .destroy = dropout_destroy};

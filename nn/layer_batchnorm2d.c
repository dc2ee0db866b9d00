/* batchnorm2d: per-channel normalisation over (batch, h, w), like torch.nn.BatchNorm2d(c, eps,
 * momentum, affine) with track_running_stats=True.
 *
 * Training: normalises with the batch's mean and biased variance and updates the running
 * statistics as PyTorch does: running = (1 - momentum) * running + momentum * batch statistic,
 * using the UNBIASED variance (n / (n - 1)) for running_var; num_batches_tracked += 1. Eval:
 * normalises with the running statistics. Parameters: weight (gamma, init 1) and bias (beta,
 * init 0) when affine. Buffers: running_mean (0), running_var (1) and num_batches_tracked,
 * which PyTorch stores as int64 and dtrain keeps as a float count in the buffer arena (exact up
 * to 2^24 steps); checkpoint writers convert it.
 *
 * Statistics are accumulated in double; forward keeps mean and 1/std per channel for backward.
 *
 * Global batch (torch.nn.SyncBatchNorm): when the model's allreduce hook is set, training
 * statistics and the two gradient sums of backward cover the batch of every process, so the
 * instance count does not change the maths. Forward takes one reduction per layer, of
 * [sum (x - s), sum (x - s)^2, count] per channel with the running mean as the shift s (see
 * forward_train); backward one, of [sum dy, sum dy xhat]. gamma's and beta's gradients are
 * the global sums, written by rank 0 only (the gradient all-reduce adds zeros to them).
 * Without the hook each process uses its own batch's statistics, like DDP without
 * SyncBatchNorm.
 *
 * The reductions are exact (exact_sum): every process's double sums reach every process
 * unrounded and are added in rank order, in double. So one process and several compute the
 * same double totals up to double rounding (1e-16), and the float mean and 1/std they keep are
 * the same bits except in the rare case of a total within 1e-16 of a float rounding boundary.
 * A float all-reduce rounded each process's sums first, and a one-ulp difference in a mean
 * moved activations by an ulp, enough to flip ReLU inputs near zero: the forward pass then
 * depended on the instance count (docs/resnet.md). One process runs the same code with no
 * reduction.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn/init.h"
#include "nn/kernels/fp32/batchnorm.h"
#include "nn/layer_common.h"
#include "util/alloc.h"

struct batchnorm {
    int c;
    size_t plane;
    size_t sample; /* floats per sample, c x plane: the stride between a channel's planes */
    float eps, momentum;
    bool affine;
    bool training;     /* mode of the last forward */
    bool x_bf16;       /* the last forward's x was stored as bf16 (struct dt_layer_fwd) */
    bool y_bf16;       /* and it stored y as bf16 */
    bool affine_above; /* and left its affine to the layer above (bn_input): no y */
    float *mean, *invstd;
    /* with affine_above, the affine the layer above applies, then the relu: scale and shift
     * [c], and the view of them handed to it */
    float *scale, *shift;
    struct dt_bn_relu relu_above;
    double *stats;     /* forward: per-channel sums of x - s, of (x - s)^2, and the count */
    double *grad_sums; /* backward: sum dy, then sum dy xhat, per channel */
    /* backward over x stored as bf16 (a bf16 model's; NULL in an fp32 one): each sample's two
     * sums, [max_batch][2][c] (bn_grad.h's order; sum dy xhat still without the 1/std), made
     * here or by the conv2d above (bn_sums), then added in sample order */
    double *parts;
    double n;      /* training: elements per channel over every process, last forward */
    float *gather; /* exact_sum's all-reduce buffer, sized at the first reduction */
    size_t gather_floats;
    /* the input gradient's per-channel factors for the layer below (grad_in_below), k then
     * mean_dy then mean_dy_xhat (struct dt_bn_grad) */
    float *terms;
};

static int batchnorm2d_setup(struct dt_layer *l, const struct dt_layer_spec *spec,
                             struct dt_shape in, struct dt_layer_setup *s)
{
    if (!(spec->eps > 0.0f))
        return dt_fail(DT_EUSAGE, "eps %g, expected > 0", (double)spec->eps);
    if (!(spec->momentum >= 0.0f && spec->momentum <= 1.0f))
        return dt_fail(DT_EUSAGE, "momentum %g, expected 0 to 1", (double)spec->momentum);
    struct batchnorm *bn = calloc(1, sizeof *bn);
    if (!bn)
        return dt_fail(DT_ERUNTIME, "out of memory");
    l->state = bn;
    bn->c = in.c;
    bn->plane = (size_t)in.h * in.w;
    bn->sample = (size_t)in.c * bn->plane;
    bn->eps = spec->eps;
    bn->momentum = spec->momentum;
    bn->affine = spec->affine;
    l->out = in;
    s->caps = DT_CAP_RELU_AT_STORE | DT_CAP_ADD_AT_STORE | DT_CAP_IS_BATCHNORM | DT_CAP_COLLECTIVE |
              DT_CAP_BF16_INPUT | DT_CAP_BF16_STORE | DT_CAP_BF16_SKIP;
    l->nparams = bn->affine ? 2 * (size_t)in.c : 0;
    l->nbuffers = 2 * (size_t)in.c + 1;
    bn->mean = dt_alloc((size_t)in.c, sizeof(float));
    bn->invstd = dt_alloc((size_t)in.c, sizeof(float));
    bn->stats = dt_alloc(2 * (size_t)in.c + 1, sizeof(double));
    bn->grad_sums = dt_alloc(2 * (size_t)in.c, sizeof(double));
    if (l->model->precision == DT_PRECISION_BF16) /* parts: x is stored as bf16 only there */
        s->scratch_bytes = (double)l->model->max_batch * 2 * in.c * sizeof(double);
    bn->terms = dt_alloc(3 * (size_t)in.c, sizeof(float));
    bn->scale = dt_alloc((size_t)in.c, sizeof(float));
    bn->shift = dt_alloc((size_t)in.c, sizeof(float));
    bn->relu_above = (struct dt_bn_relu){bn->scale, bn->shift, bn->mean};
    return bn->mean && bn->invstd && bn->stats && bn->grad_sums && bn->terms && bn->scale &&
                   bn->shift
               ? 0
               : dt_fail_context(-DT_ERUNTIME, "batchnorm2d statistics");
}

static int batchnorm2d_init(struct dt_layer *l, uint64_t seed)
{
    (void)seed;
    struct batchnorm *bn = l->state;
    size_t c = (size_t)bn->c;
    /* batch-sized: at init, once the model's size has been checked */
    if (!bn->parts && l->model->precision == DT_PRECISION_BF16 &&
        !(bn->parts = dt_alloc((size_t)l->model->max_batch * 2 * c, sizeof(double))))
        return dt_fail(DT_ERUNTIME, "batchnorm2d: out of memory for the gradient sums");
    if (bn->affine) {
        dt_layer_describe(l, "weight", true, 0, 1, &bn->c);
        dt_layer_describe(l, "bias", true, c, 1, &bn->c);
        dt_init_fill(l->params, c, 1.0f);
        dt_init_fill(l->params + c, c, 0.0f);
    }
    dt_layer_describe(l, "running_mean", false, 0, 1, &bn->c);
    dt_layer_describe(l, "running_var", false, c, 1, &bn->c);
    dt_layer_describe(l, "num_batches_tracked", false, 2 * c, 0, NULL);
    dt_init_fill(l->buffers, c, 0.0f);
    dt_init_fill(l->buffers + c, c, 1.0f);
    l->buffers[2 * c] = 0.0f;
    return 0;
}

/* Channel ch's first plane in activation p, NULL for none (an empty share's collective calls
 * pass NULL tensors, and NULL + offset is undefined). A macro: p may be const or not. */
#define AT_CHANNEL(bn, p, ch) ((p) ? (p) + (size_t)(ch) * (bn)->plane : NULL)

/* Whether this layer's sums are reduced across processes: synchronized batchnorm with more
 * than one (the model's hook is set only then), and no collective has failed yet. */
static bool reduces(const struct dt_layer *l)
{
    const struct dt_model_allreduce *r = l->model ? &l->model->allreduce : NULL;
    return r && r->sum && !r->rc;
}

/* Pieces of 16 bits a double travels in: integers below 2^16 are exact floats, and the
 * all-reduce adds each to zeros only (x + 0 = x), so the bits arrive unchanged. */
enum { PIECES = 4 };

/* v[0..n) = the sum over every process of its v, added in double in rank order: the same bits
 * on every process, and equal to one process's sum over the whole batch up to double rounding.
 * The float all-reduce carries it as a gather: each process writes its doubles' bits into its
 * own slot of a zeroed buffer. No-op without the hook. Returns whether v now holds the
 * sums over every process. */
static bool exact_sum(struct dt_layer *l, double *v, size_t n)
{
    if (!reduces(l)) /* before l->model is dereferenced: it may be NULL */
        return false;
    struct batchnorm *bn = l->state;
    struct dt_model_allreduce *r = &l->model->allreduce;
    int size = r->size > 1 ? r->size : 1, rank = r->rank >= 0 && r->rank < size ? r->rank : 0;
    size_t slot = n * PIECES, need = slot * (size_t)size;
    if (need > bn->gather_floats) {
        dt_free(bn->gather);
        bn->gather_floats = 0;
        bn->gather = dt_alloc(need, sizeof(float));
        if (!bn->gather) {
            r->rc = dt_fail(DT_ERUNTIME, "batchnorm2d: out of memory for the statistics");
            return false;
        }
        bn->gather_floats = need;
    }
    memset(bn->gather, 0, need * sizeof(float));
    float *mine = bn->gather + (size_t)rank * slot;
    for (size_t i = 0; i < n; i++) {
        uint64_t bits;
        memcpy(&bits, &v[i], sizeof bits);
        for (int q = 0; q < PIECES; q++)
            mine[i * PIECES + q] = (float)((bits >> (16 * q)) & 0xffff);
    }
    if ((r->rc = r->sum(r->ctx, bn->gather, need)))
        return false;
    for (size_t i = 0; i < n; i++) {
        double total = 0;
        for (int k = 0; k < size; k++) {
            const float *p = bn->gather + (size_t)k * slot + i * PIECES;
            uint64_t bits = 0;
            for (int q = 0; q < PIECES; q++)
                bits |= (uint64_t)p[q] << (16 * q);
            double d;
            memcpy(&d, &bits, sizeof d);
            total = k == 0 ? d : total + d;
        }
        v[i] = total;
    }
    return true;
}

/* Channel ch's first plane of x, as stored: bf16 elements when bn->x_bf16. */
static const void *x_channel(const struct batchnorm *bn, const float *x, int ch)
{
    return x ? dt_act_from(x, bn->x_bf16, (size_t)ch * bn->plane) : NULL;
}

/* With c->relu, the following relu at the store (backward never reads y); with c->skip_x,
 * the identity add above (y is then its output), then the relu fused into that. */
static void normalise(const struct dt_layer *l, const struct dt_bn_loops *k, const float *x,
                      float *y, int batch, int ch, const struct dt_layer_fwd *c)
{
    const struct batchnorm *bn = l->state;
    float gamma = bn->affine ? l->params[ch] : 1.0f;
    float beta = bn->affine ? l->params[bn->c + ch] : 0.0f;
    float scale = bn->invstd[ch] * gamma, shift = beta - bn->mean[ch] * scale;
    if (bn->affine_above) { /* the layer above applies it as it reads x */
        bn->scale[ch] = scale;
        bn->shift[ch] = shift;
        return;
    }
    const void *xc = x_channel(bn, x, ch);
    float *yc = AT_CHANNEL(bn, y, ch);
    const void *skip =
        c->skip_x ? dt_act_from(c->skip_x, c->skip_bf16, (size_t)ch * bn->plane) : NULL;
    enum dt_bn_skip as = c->skip_bf16    ? DT_SKIP_BF16
                         : c->round_skip ? DT_SKIP_ROUNDED
                                         : DT_SKIP_F32;
    if (bn->y_bf16)
        k->affine_to_bf16(xc, bn->x_bf16, y ? (dt_bf16 *)y + (size_t)ch * bn->plane : NULL,
                          bn->plane, bn->sample, batch, scale, shift, c->relu, skip, as);
    else if (bn->x_bf16)
        k->affine_bf16(xc, yc, bn->plane, bn->sample, batch, scale, shift, c->relu, skip, as);
    else
        k->affine(xc, yc, bn->plane, bn->sample, batch, scale, shift, c->relu, skip, as);
}

/* Channel ch's mean and 1/std from its sums st over n elements (every process's), and its
 * running statistics. */
static void finish_channel(struct dt_layer *l, int ch, double n)
{
    struct batchnorm *bn = l->state;
    float *run_mean = l->buffers, *run_var = l->buffers + bn->c;
    const double *st = bn->stats;
    double shifted = n > 0 ? st[ch] / n : 0, mean = run_mean[ch] + shifted;
    double var = n > 0 ? st[bn->c + ch] / n - shifted * shifted : 0;
    var = var > 0 ? var : 0;
    bn->mean[ch] = (float)mean;
    bn->invstd[ch] = (float)(1.0 / sqrt(var + bn->eps));
    double unbiased = n > 1 ? var * n / (n - 1) : var;
    run_mean[ch] = (float)((1.0 - bn->momentum) * run_mean[ch] + bn->momentum * mean);
    run_var[ch] = (float)((1.0 - bn->momentum) * run_var[ch] + bn->momentum * unbiased);
}

/* Training forward: this process's sums, made global by exact_sum when the hook is set. One
 * pass over x for them: the variance is E[(x - s)^2] - E[x - s]^2 in double, with the running
 * mean as the shift s (the same on every process), so the subtraction cannot cancel the
 * float-sized variance: its error is 1e-16 x (mean - s)^2 / variance. Without a reduction a
 * channel is normalised right after its sums, while its planes are still in cache (a
 * ResNet-20 stage-1 channel is 512 KB at batch 128): one trip from memory instead of two, the
 * same bits. */
static void forward_train(struct dt_layer *l, const float *x, float *y, int batch,
                          const struct dt_layer_fwd *call)
{
    struct batchnorm *bn = l->state;
    const float *run_mean = l->buffers;
    double *st = bn->stats, local = (double)batch * bn->plane;
    int c = bn->c;
    const struct dt_bn_loops *k = dt_bn_loops();
    bool global = reduces(l);
#pragma omp parallel for if (local * c > DT_PARALLEL_MIN)
    for (int ch = 0; ch < c; ch++) {
        const void *xc = x_channel(bn, x, ch);
        if (bn->x_bf16)
            k->moments_bf16(xc, bn->plane, bn->sample, batch, run_mean[ch], &st[ch], &st[c + ch]);
        else
            k->moments(xc, bn->plane, bn->sample, batch, run_mean[ch], &st[ch], &st[c + ch]);
        if (!global) {
            finish_channel(l, ch, local);
            normalise(l, k, x, y, batch, ch, call);
        }
    }
    st[2 * c] = local;
    bn->n = local;
    if (global) {
        exact_sum(l, st, 2 * (size_t)c + 1); /* on failure (r->rc set): this process's sums */
        double n = st[2 * c];
        bn->n = n;
#pragma omp parallel for if (local * c > DT_PARALLEL_MIN)
        for (int ch = 0; ch < c; ch++) {
            finish_channel(l, ch, n);
            normalise(l, k, x, y, batch, ch, call);
        }
    }
    l->buffers[2 * bn->c] += 1.0f;
}

static void batchnorm2d_forward(struct dt_layer *l, const float *x, float *y, int batch,
                                const struct dt_layer_fwd *c)
{
    struct batchnorm *bn = l->state;
    bn->training = c->run.training;
    bn->x_bf16 = c->x_bf16;
    bn->y_bf16 = c->y_bf16;
    bn->affine_above = c->affine_above;
    if (bn->training) {
        forward_train(l, x, y, batch, c);
        return;
    }
    bn->n = 0;
    const float *run_mean = l->buffers, *run_var = l->buffers + bn->c;
    double n = (double)batch * bn->plane;
    const struct dt_bn_loops *k = dt_bn_loops();
#pragma omp parallel for if (n * bn->c > DT_PARALLEL_MIN)
    for (int ch = 0; ch < bn->c; ch++) {
        bn->mean[ch] = run_mean[ch];
        bn->invstd[ch] = (float)(1.0 / sqrt((double)run_var[ch] + bn->eps));
        normalise(l, k, x, y, batch, ch, c);
    }
}

/* Channel ch's two gradient sums over this process's batch, sum dy and sum dy xhat, into
 * grad_sums, and gamma's and beta's gradients from them. Over x stored as bf16 they are each
 * sample's sums (parts) added in sample order: made here, or (given) by the conv2d above as it
 * stored dy (bn_sums). */
static void channel_sums(struct dt_layer *l, const struct dt_bn_loops *k, const float *x,
                         const float *dy, int batch, int ch, bool given)
{
    struct batchnorm *bn = l->state;
    double sum_dy = 0, sum_dy_xhat = 0;
    const void *xc = x_channel(bn, x, ch);
    const float *dyc = AT_CHANNEL(bn, dy, ch);
    if (bn->x_bf16) {
        size_t c = (size_t)bn->c, stride = 2 * c;
        if (!given)
            k->grad_sums_bf16(xc, dyc, bn->plane, bn->sample, batch, bn->mean[ch], bn->parts + ch,
                              bn->parts + c + ch, stride);
        for (int b = 0; b < batch; b++) {
            sum_dy += bn->parts[b * stride + ch];
            sum_dy_xhat += bn->parts[b * stride + c + ch];
        }
    } else {
        k->grad_sums(xc, dyc, bn->plane, bn->sample, batch, bn->mean[ch], &sum_dy, &sum_dy_xhat);
    }
    sum_dy_xhat *= bn->invstd[ch];
    if (bn->affine) {
        l->grads[ch] = (float)sum_dy_xhat;
        l->grads[bn->c + ch] = (float)sum_dy;
    }
    bn->grad_sums[ch] = sum_dy;
    bn->grad_sums[bn->c + ch] = sum_dy_xhat;
}

/* Channel ch's input-gradient factors from the sums in grad_sums, taken over n elements:
 * k, mean_dy and mean_dy_xhat of struct dt_bn_grad. */
static void channel_terms(const struct dt_layer *l, int ch, double n, float t[3])
{
    const struct batchnorm *bn = l->state;
    double sum_dy = bn->grad_sums[ch], sum_dy_xhat = bn->grad_sums[bn->c + ch];
    float gamma = bn->affine ? l->params[ch] : 1.0f;
    t[0] = gamma * bn->invstd[ch];
    t[1] = bn->training ? (float)(sum_dy / n) : 0.0f;
    t[2] = bn->training ? (float)(sum_dy_xhat / n) : 0.0f;
}

/* Channel ch's input gradient from the sums in grad_sums, taken over n elements. */
static void channel_input_grad(const struct dt_layer *l, const struct dt_bn_loops *k,
                               const float *x, const float *dy, float *dx, int batch, int ch,
                               double n)
{
    const struct batchnorm *bn = l->state;
    float t[3];
    channel_terms(l, ch, n, t);
    k->input_grad(AT_CHANNEL(bn, x, ch), AT_CHANNEL(bn, dy, ch), AT_CHANNEL(bn, dx, ch), bn->plane,
                  bn->sample, batch, bn->mean[ch], bn->invstd[ch], t[0], t[1], t[2]);
}

/* c->grad_in_below: the factors the layer below applies instead of this layer's dx pass. */
static void keep_terms(struct dt_layer *l, double n)
{
    struct batchnorm *bn = l->state;
    for (int ch = 0; ch < bn->c; ch++) {
        float t[3];
        channel_terms(l, ch, n, t);
        for (int j = 0; j < 3; j++)
            bn->terms[(size_t)j * bn->c + ch] = t[j];
    }
}

double *dt_batchnorm2d_sample_sums(const struct dt_layer *l)
{
    const struct batchnorm *bn = l->state;
    return bn->parts;
}

const struct dt_bn_relu *dt_batchnorm2d_relu(const struct dt_layer *l)
{
    const struct batchnorm *bn = l->state;
    return &bn->relu_above;
}

void dt_batchnorm2d_grad(const struct dt_layer *l, const float *x, struct dt_bn_grad *out)
{
    const struct batchnorm *bn = l->state;
    size_t c = (size_t)bn->c;
    *out = (struct dt_bn_grad){.x = bn->x_bf16 ? NULL : x,
                               .xh = bn->x_bf16 ? (const dt_bf16 *)x : NULL,
                               .mean = bn->mean,
                               .invstd = bn->invstd,
                               .k = bn->terms,
                               .mean_dy = bn->terms + c,
                               .mean_dy_xhat = bn->terms + 2 * c};
}

/* This process's sums go into the reduction; dx and gamma's and beta's gradients use the
 * global ones. Without a reduction (one process) each channel's input gradient follows its
 * sums while its planes are still in cache, as in forward_train. With c->grad_in_below the
 * model passes no dx: the layer below computes it from the factors kept here. */
static void batchnorm2d_backward(struct dt_layer *l, const float *x, const float *y,
                                 const float *dy, float *dx, int batch,
                                 const struct dt_layer_bwd *c)
{
    (void)y;
    struct batchnorm *bn = l->state;
    double local = (double)batch * bn->plane;
    double n = bn->training ? bn->n : local;
    bool global = bn->training && reduces(l);
    const struct dt_bn_loops *k = dt_bn_loops();
#pragma omp parallel for if (local * bn->c > DT_PARALLEL_MIN)
    for (int ch = 0; ch < bn->c; ch++) {
        channel_sums(l, k, x, dy, batch, ch, c->sums_given);
        if (!global && dx)
            channel_input_grad(l, k, x, dy, dx, batch, ch, n);
    }
    if (!global) {
        if (c->grad_in_below)
            keep_terms(l, n);
        return;
    }
    double *sums = bn->grad_sums;
    if (exact_sum(l, sums, 2 * (size_t)bn->c) && bn->affine) {
        /* gamma's and beta's gradients: the global sums on rank 0, zeros elsewhere, so the
         * gradient all-reduce adds exact zeros and they do not depend on the batch's split */
        bool first = l->model->allreduce.rank == 0;
        for (int ch = 0; ch < bn->c; ch++) {
            l->grads[ch] = first ? (float)sums[bn->c + ch] : 0.0f;
            l->grads[bn->c + ch] = first ? (float)sums[ch] : 0.0f;
        }
    }
    if (c->grad_in_below)
        keep_terms(l, n);
    if (!dx)
        return;
#pragma omp parallel for if (local * bn->c > DT_PARALLEL_MIN)
    for (int ch = 0; ch < bn->c; ch++)
        channel_input_grad(l, k, x, dy, dx, batch, ch, n);
}

static void batchnorm2d_destroy(struct dt_layer *l)
{
    struct batchnorm *bn = l->state;
    if (bn) {
        dt_free(bn->mean);
        dt_free(bn->invstd);
        dt_free(bn->stats);
        dt_free(bn->grad_sums);
        dt_free(bn->parts);
        dt_free(bn->gather);
        dt_free(bn->terms);
        dt_free(bn->scale);
        dt_free(bn->shift);
    }
    free(bn);
}

const struct dt_layer_ops dt_batchnorm2d_ops = {.setup = batchnorm2d_setup,
                                                .init = batchnorm2d_init,
                                                .forward = batchnorm2d_forward,
                                                .backward = batchnorm2d_backward,
                                                .destroy = batchnorm2d_destroy};

/* conv2d: 2-D convolution, NCHW, weight [out, in, k, k] and optional bias [out], like
 * torch.nn.Conv2d(in, out, k, stride, padding, bias).
 *
 * Three algorithms, chosen once per layer at setup by conv2d_choose_algo() from the shape alone
 * (never by timing: the choice, and so the rounding, must not vary from run to run):
 *   winograd nn/kernels/fp32/conv_winograd (F(4x4, 3x3) for 3x3 convs, stride 1 or 2, pad 0
 *           or 1, AVX-512 or AVX2): about 3x fewer flops than direct; used where
 *           dt_conv_winograd_preferred() says it was measured faster (with AVX-512, enough
 *           channels: the ConvNet's and the CIFAR CNN's second convs; with AVX2 only, nearly
 *           every shape it can run).
 *           The forward transforms the filter once per batch (at the chunk with first_sample
 *           0: the model runs a batch's chunks in order, with the same weights) into cv->u;
 *           the backward computes both gradients in one call that transforms dy once.
 *   direct  nn/kernels/fp32/conv_direct (AVX-512 stride-1 kernels, 2-4x faster than im2col +
 *           sgemm at the reference models' shapes and with no column matrix): used for every
 *           other shape dt_conv_direct_supported() accepts when the CPU takes the AVX-512 path.
 *   gemm    everything else (other strides, 1x1 projections, pad >= kernel, CPUs without
 *           AVX2, where the direct kernels' portable loops are slower than OpenBLAS),
 *           described below.
 * The layer's `algo` key (auto|gemm|direct|winograd) overrides the rule, falling back
 * winograd -> direct -> gemm where an algorithm cannot run the shape. The kernels' scratch
 * (winograd, direct) is sized at setup for the process's OpenMP thread count then
 * (dt_nn_set_threads runs before the model is built); a later call uses that many threads at
 * most.
 * All can apply a ReLU at the store (c->relu, when the model's plan fused the relu layer that
 * follows): backward never reads y, so the relu layer can run in place on our output.
 * The winograd and direct paths can also run a following maxpool2d (c->pool): each thread
 * convolves CHUNK_BYTES of output at a time into a scratch that stays in its L2 and pools it
 * from there, so the full-size activation (9.4 MB for the ConvNet's conv2 at batch 128) is never
 * written to and read back from memory. The results are the same bits as unfused: each sample's
 * arithmetic does not depend on the chunking. (Backward is not chunked: a weight-gradient call
 * per chunk costs a reduction over per-thread partials each time, and measured no faster.)
 *
 * The "gemm" path: batched im2col. The columns of the whole batch form one matrix
 * col[C*K*K][B*P] (P = output pixels; row r = (c, ky, kx), channel-major like the weight), so
 * each gradient is ONE large GEMM whose N = B*P keeps OpenBLAS efficient at small channel
 * counts, and the layout keeps every copy contiguous along output rows (vectorisable):
 *   forward        y[b] = W x col[:, b*P .. (b+1)*P), one GEMM per sample (its rounding then
 *                  does not depend on the batch size: see conv2d_forward), plus bias
 *   weight grad    dW[OC][CKK]  = dyt x col^T          (dyt: dy regrouped to [OC][B*P])
 *   input grad     dcol         = W^T x dyt, reusing col's memory, then col2im into dx
 * col is kept from forward to backward (no second im2col). Scratch, allocated once at setup for
 * max_batch: col (CKK*B*P floats) and yt (OC*B*P floats).
 *
 * With a gradient slice set (dist.split_invariant, nn/grad_tree.h) every algorithm's backward
 * runs per slice of the batch: the weight gradient of each slice from zero, summed in the
 * slices' fixed tree, and the GEMM path's input gradient per slice too, since OpenBLAS rounds
 * differently with the GEMM's width.
 *
 * conv2d_choose_algo() is the single place where a per-shape choice between this path and a
 * direct (non-GEMM) kernel belongs: it sees the full shape at setup time.
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "nn/bf16_layers.h"
#include "nn/kernels/fp32/blas.h"
#include "nn/kernels/fp32/conv_direct.h"
#include "nn/kernels/fp32/conv_winograd.h"
#include "nn/kernels/fp32/im2col.h"
#include "nn/init.h"
#include "nn/layer_common.h"
#include "nn/weight_copy.h"
#include "util/alloc.h"
#include "util/err.h"

struct conv {
    enum dt_conv2d_algo algo; /* GEMM, DIRECT or WINOGRAD */
    int c, h, w, oc, oh, ow, k, stride, pad;
    int ckk, pix;
    bool bias;
    float *col;              /* gemm: [ckk][max_batch * pix] */
    float *yt;               /* gemm: [oc][max_batch * pix] */
    struct dt_conv_shape ds; /* direct, winograd: the shape, n = max_batch (set per call) */
    float *scratch;          /* direct, winograd: sized for `threads` */
    size_t scratch_floats;
    int threads;
    float *chunk_out;   /* pool fused: per thread, conv output of `chunk` samples */
    int chunk;          /* samples per thread per pooled chunk */
    float *fwd_scratch; /* pool fused: per thread, single-threaded kernel scratch */
    size_t fwd_scratch_floats;
    float *u; /* winograd: the forward's transformed filter */
    /* bf16 model (nn/bf16_layers.h): the bf16 products, and in their emulated mode the
     * rounded weights the fp32 algorithm above reads (x and dy rounded: in the call scratch) */
    struct dt_bf16_conv *bf;
    float *round_w; /* in the model's copy arena (nn/weight_copy.h) */
};

/* Output bytes per thread convolved before pooling: well inside a core's L2. */
#define CHUNK_BYTES (256 * 1024)

/* Process-wide test switch (see nn/layers.h); read at setup only. */
static enum dt_conv2d_algo forced_algo = DT_CONV2D_AUTO;

enum dt_conv2d_algo dt_conv2d_force_algo(enum dt_conv2d_algo algo)
{
    enum dt_conv2d_algo was = forced_algo;
    forced_algo = algo;
    return was;
}

/* A static rule on the shape and the CPU, so the same config always takes the same path. */
static enum dt_conv2d_algo conv2d_choose_algo(const struct conv *cv,
                                              const struct dt_layer_spec *spec)
{
    enum dt_conv2d_algo want = forced_algo != DT_CONV2D_AUTO ? forced_algo : spec->algo;
    bool direct = dt_conv_direct_supported(&cv->ds);
    bool winograd = dt_conv_winograd_supported(&cv->ds);
    switch (want) {
    case DT_CONV2D_GEMM:
        return DT_CONV2D_GEMM;
    case DT_CONV2D_WINOGRAD:
        if (winograd)
            return DT_CONV2D_WINOGRAD;
        return direct ? DT_CONV2D_DIRECT : DT_CONV2D_GEMM;
    case DT_CONV2D_DIRECT:
        return direct ? DT_CONV2D_DIRECT : DT_CONV2D_GEMM;
    case DT_CONV2D_AUTO:
    case DT_CONV2D_ALGO_COUNT: /* not a value: the rule */
        break;
    }
    if (dt_conv_winograd_preferred(&cv->ds))
        return DT_CONV2D_WINOGRAD;
    return direct && dt_conv_direct_uses_simd() ? DT_CONV2D_DIRECT : DT_CONV2D_GEMM;
}

extern const struct dt_layer_ops dt_conv2d_ops; /* at the end of this file */

enum dt_conv2d_algo dt_conv2d_algo_of(const struct dt_layer *l)
{
    const struct conv *cv = l->state;
    return l->kind->ops == &dt_conv2d_ops && cv ? cv->algo : DT_CONV2D_AUTO;
}

/* Samples per chunk: `bytes` of output per thread, at least one per thread, at most a batch. */
static int chunk_samples(size_t sample_bytes, size_t bytes, int threads, int max_batch)
{
    size_t per_thread = sample_bytes < bytes ? bytes / sample_bytes : 1;
    size_t chunk = per_thread * (size_t)threads;
    return chunk > (size_t)max_batch ? max_batch : (int)chunk;
}

/* Scratch floats of the direct or winograd kernels for `threads` threads. */
static size_t kernel_scratch_floats(const struct conv *cv, int threads)
{
    return cv->algo == DT_CONV2D_WINOGRAD ? dt_conv_winograd_scratch_floats(&cv->ds, threads)
                                          : dt_conv_direct_scratch_floats(&cv->ds, threads);
}

/* Bytes scratch_setup will allocate, worked out the same way before anything is. */
static double scratch_bytes(const struct conv *cv, int max_batch)
{
    double floats;
    if (cv->algo == DT_CONV2D_DIRECT || cv->algo == DT_CONV2D_WINOGRAD) {
        int threads = omp_get_max_threads() > 1 ? omp_get_max_threads() : 1;
        size_t sample = (size_t)cv->oc * cv->pix * sizeof(float);
        int chunk = chunk_samples(sample, CHUNK_BYTES, 1, max_batch);
        floats = (double)kernel_scratch_floats(cv, threads) +
                 (double)threads * chunk * cv->oc * cv->pix +
                 (double)threads * (double)kernel_scratch_floats(cv, 1) +
                 (cv->algo == DT_CONV2D_WINOGRAD ? (double)dt_conv_winograd_filter_floats(&cv->ds)
                                                 : 0.0);
    } else {
        floats = (double)max_batch * cv->pix * ((double)cv->ckk + cv->oc);
    }
    return floats * sizeof(float);
}

/* The fusions the Winograd kernels take: per-sample kernels at stride 1 (the filter state is
 * rebuilt at each batch's first chunk); the backward's store and dy read take the relu below
 * and the batchnorm above. */
static unsigned winograd_caps(int stride)
{
    return (stride == 1 ? DT_CAP_POOL_IN_FORWARD | DT_CAP_CHUNKS : 0u) | DT_CAP_RELU_BELOW_GRAD |
           DT_CAP_BN_ABOVE_GRAD;
}

/* The emulated bf16 mode's backward rounds x again only where the fp32 algorithm's backward
 * reads it: the GEMM path keeps the columns forward made from the rounded x. */
static bool emulated_backward_reads_x(const struct conv *cv)
{
    return cv->algo != DT_CONV2D_GEMM;
}

/* The emulated bf16 mode on Winograd rounds x, dy and dx inside the kernels
 * (dt_conv_winograd_forward_bf16 / _backward_bf16), so it takes the fp32 algorithm's fusions
 * and needs no rounded copies; the other algorithms round in passes of their own. */
static bool rounds_in_kernel(const struct conv *cv)
{
    return cv->bf && !dt_bf16_conv_tiles(cv->bf) && cv->algo == DT_CONV2D_WINOGRAD;
}

/* Call-scratch bytes of the emulated mode: forward's rounded x, or backward's rounded dy (and
 * x again where it is read). */
static size_t emulated_call_bytes(const struct conv *cv, const struct dt_layer *l, int max_batch)
{
    if (rounds_in_kernel(cv))
        return 0;
    size_t nx = (size_t)max_batch * dt_shape_size(l->in);
    size_t ny = (size_t)max_batch * dt_shape_size(l->out);
    size_t fwd = dt_bf16_rounded_bytes(nx, 0);
    size_t bwd = dt_bf16_rounded_bytes(emulated_backward_reads_x(cv) ? nx : 0, ny);
    return fwd > bwd ? fwd : bwd;
}

static int scratch_setup(struct conv *cv, int max_batch)
{
    if (cv->algo == DT_CONV2D_DIRECT || cv->algo == DT_CONV2D_WINOGRAD) {
        cv->threads = omp_get_max_threads();
        if (cv->threads < 1)
            cv->threads = 1;
        cv->scratch_floats = kernel_scratch_floats(cv, cv->threads);
        cv->scratch = dt_alloc(cv->scratch_floats, sizeof(float));
        size_t sample = (size_t)cv->oc * cv->pix * sizeof(float);
        cv->chunk = chunk_samples(sample, CHUNK_BYTES, 1, max_batch);
        cv->chunk_out = dt_alloc((size_t)cv->threads * cv->chunk * cv->oc * cv->pix, sizeof(float));
        cv->fwd_scratch_floats = kernel_scratch_floats(cv, 1);
        cv->fwd_scratch = dt_alloc((size_t)cv->threads * cv->fwd_scratch_floats, sizeof(float));
        if (!cv->scratch || !cv->chunk_out || !cv->fwd_scratch)
            return dt_fail_context(-DT_ERUNTIME, "conv2d scratch");
        if (cv->algo == DT_CONV2D_WINOGRAD) {
            cv->u = dt_alloc(dt_conv_winograd_filter_floats(&cv->ds), sizeof(float));
            if (!cv->u)
                return dt_fail_context(-DT_ERUNTIME, "conv2d scratch");
        }
        return 0;
    }
    size_t rows = (size_t)max_batch * cv->pix;
    cv->col = dt_alloc(rows * cv->ckk, sizeof(float));
    cv->yt = dt_alloc(rows * cv->oc, sizeof(float));
    if (!cv->col || !cv->yt)
        return dt_fail_context(-DT_ERUNTIME, "conv2d scratch");
    return 0;
}

/* The direct kernels' thread count for this call: the current OpenMP setting, capped by what
 * the scratch was sized for. */
static int direct_threads(const struct conv *cv)
{
    int t = omp_get_max_threads();
    return t < 1 ? 1 : t > cv->threads ? cv->threads : t;
}

static int conv2d_setup(struct dt_layer *l, const struct dt_layer_spec *spec, struct dt_shape in,
                        struct dt_layer_setup *s)
{
    if (spec->out_channels < 1)
        return dt_fail(DT_EUSAGE, "out_channels %d, expected >= 1", spec->out_channels);
    if (spec->kernel < 1)
        return dt_fail(DT_EUSAGE, "kernel %d, expected >= 1", spec->kernel);
    int stride = spec->stride ? spec->stride : 1;
    if (stride < 1 || spec->padding < 0)
        return dt_fail(DT_EUSAGE, "stride %d / padding %d, expected stride >= 1, padding >= 0",
                       stride, spec->padding);
    int oh = dt_window_out(in.h, spec->kernel, stride, spec->padding);
    int ow = dt_window_out(in.w, spec->kernel, stride, spec->padding);
    if (oh < 1 || ow < 1)
        return dt_fail(DT_EUSAGE, "kernel %d is larger than the padded input %dx%d (padding %d)",
                       spec->kernel, in.h + 2 * spec->padding, in.w + 2 * spec->padding,
                       spec->padding);
    struct conv *cv = calloc(1, sizeof *cv);
    if (!cv)
        return dt_fail(DT_ERUNTIME, "out of memory");
    l->state = cv;
    *cv = (struct conv){.c = in.c,
                        .h = in.h,
                        .w = in.w,
                        .oc = spec->out_channels,
                        .oh = oh,
                        .ow = ow,
                        .k = spec->kernel,
                        .stride = stride,
                        .pad = spec->padding,
                        .bias = spec->bias};
    cv->ckk = cv->c * cv->k * cv->k;
    cv->pix = oh * ow;
    cv->ds = (struct dt_conv_shape){.n = l->model->max_batch,
                                    .c = in.c,
                                    .h = in.h,
                                    .w = in.w,
                                    .k = cv->oc,
                                    .kh = cv->k,
                                    .kw = cv->k,
                                    .stride = stride,
                                    .pad = cv->pad};
    cv->algo = conv2d_choose_algo(cv, spec);
    l->out = (struct dt_shape){cv->oc, oh, ow};
    l->nparams = (size_t)cv->oc * cv->ckk + (cv->bias ? (size_t)cv->oc : 0);
    s->caps = DT_CAP_RELU_AT_STORE;
    s->scratch_bytes = scratch_bytes(cv, l->model->max_batch);
    if (l->model->precision == DT_PRECISION_BF16) {
        /* bf16 takes the relu at its store and, on tiles, per sample: the pool above, the
         * relu below at dx's store and the batchnorm above's input gradient as it reads dy.
         * Emulated on Winograd takes the fp32 algorithm's fusions (it rounds in the kernels);
         * on the others only the relu: they round the whole batch's x and dy first (into the
         * model's call scratch: the fp32 kernels read whole batches). */
        int rc = dt_bf16_conv_setup(&cv->bf, &cv->ds, cv->algo == DT_CONV2D_WINOGRAD,
                                    l->model->bf16_winograd, &s->copy_bytes);
        if (rc < 0)
            return rc;
        s->caps |= DT_CAP_DX_ROUNDED;      /* its input gradient, tiles or emulated */
        if (!dt_bf16_conv_tiles(cv->bf)) { /* the rounded weights; x and dy per call */
            s->copy_bytes = 4.0 * (double)cv->oc * cv->ckk;
            s->call_scratch_bytes = (double)emulated_call_bytes(cv, l, l->model->max_batch);
            if (rounds_in_kernel(cv)) /* and reads x stored as bf16 */
                s->caps |= winograd_caps(stride) | DT_CAP_BF16_INPUT;
            else
                s->caps |= DT_CAP_READS_DY_ROUNDED;
        } else { /* the fp32 algorithm's scratch is not allocated */
            s->scratch_bytes = 0;
            s->call_scratch_bytes = (double)dt_bf16_conv_call_bytes(cv->bf);
            s->caps |= DT_CAP_RELU_BELOW_GRAD | DT_CAP_POOL_IN_FORWARD | DT_CAP_POOL_ABOVE_GRAD |
                       DT_CAP_BN_ABOVE_GRAD | DT_CAP_BF16_STORE;
            if (dt_bf16_conv_reads_bf16(cv->bf))
                s->caps |= DT_CAP_BF16_INPUT;
            if (dt_bf16_conv_reads_bn_relu(cv->bf))
                s->caps |= DT_CAP_BN_RELU_INPUT;
            if (dt_bf16_conv_dx_even(cv->bf))
                s->caps |= DT_CAP_DX_EVEN;
            if (dt_bf16_conv_extra_even(cv->bf))
                s->caps |= DT_CAP_EXTRA_EVEN;
        }
        s->precision = dt_bf16_conv_note(cv->bf);
        return 0;
    }
    if (cv->algo == DT_CONV2D_WINOGRAD)
        s->caps |= winograd_caps(stride);
    else if (cv->algo == DT_CONV2D_DIRECT && stride == 1) /* per-sample kernels */
        s->caps |= DT_CAP_POOL_IN_FORWARD | DT_CAP_CHUNKS;
    return 0; /* scratch at init, once the model's size has been checked (nn/model.c) */
}

static int conv2d_init(struct dt_layer *l, uint64_t seed)
{
    struct conv *cv = l->state;
    size_t nw = (size_t)cv->oc * cv->ckk;
    if (cv->bf && dt_bf16_conv_tiles(cv->bf)) {
        dt_bf16_conv_init(cv->bf, &l->model->call_scratch,
                          dt_model_copy_take(l->model, dt_bf16_conv_copy_bytes(cv->bf)));
    } else {
        if (cv->bf)
            cv->round_w = dt_model_copy_take(l->model, nw * sizeof(float));
        int rc = scratch_setup(cv, l->model->max_batch);
        if (rc < 0)
            return rc;
    }
    int wshape[4] = {cv->oc, cv->c, cv->k, cv->k};
    dt_layer_describe(l, "weight", true, 0, 4, wshape);
    if (cv->bias)
        dt_layer_describe(l, "bias", true, nw, 1, &cv->oc);
    dt_init_fan_in(l->params, nw, cv->bias ? l->params + nw : NULL, (size_t)cv->oc, (size_t)cv->ckk,
                   seed, l->index);
    return 0;
}

/* Winograd's forward (pooled 2x2 with argmax), on the filter transformed at the batch's first
 * chunk; the bf16 emulated mode's rounds x as it reads it, or reads it stored as bf16
 * (x_bf16). Cannot fail: the shape was accepted and the scratch sized at setup. */
static void winograd_forward(const struct conv *cv, const struct dt_conv_shape *s, const float *x,
                             bool x_bf16, const float *bias, float *y, int32_t *argmax, int relu,
                             float *scratch, size_t scratch_floats, int threads)
{
    if (cv->bf)
        (void)dt_conv_winograd_forward_bf16(s, x, x_bf16, dt_bf16_conv_products(cv->bf), cv->u,
                                            bias, y, argmax, relu, scratch, scratch_floats,
                                            threads);
    else if (argmax)
        (void)dt_conv_winograd_forward_pool2(s, x, cv->u, bias, y, argmax, relu, scratch,
                                             scratch_floats, threads);
    else
        (void)dt_conv_winograd_forward_filtered(s, x, cv->u, bias, y, relu, scratch, scratch_floats,
                                                threads);
}

/* conv (+ReLU) then c->pool's maxpool, one L2-sized chunk of samples at a time; y is the
 * pool's output. The Winograd path pools a 2x2 window itself, in its output stage (writing the
 * pool's indices), so even the chunk's full-size output is never stored. */
static void forward_pooled(struct dt_layer *l, const float *x, const float *weight,
                           const float *bias, float *y, int batch, const struct dt_layer_fwd *c)
{
    struct conv *cv = l->state;
    struct dt_layer *pool = c->pool;
    int first_sample = c->first_sample;
    size_t in_sample = (size_t)cv->c * cv->h * cv->w, out_sample = dt_shape_size(pool->out);
    size_t chunk_floats = (size_t)cv->chunk * cv->oc * cv->pix;
    int32_t *indices = cv->algo == DT_CONV2D_WINOGRAD && cv->oh >= 2 && cv->ow >= 2
                           ? dt_maxpool2d_indices_2x2(pool, first_sample)
                           : NULL;
    /* One fork/join for the whole batch: each thread convolves and pools its own contiguous
     * samples, a chunk at a time, with single-threaded kernel calls on its own scratch. */
#pragma omp parallel num_threads(direct_threads(cv))
    {
        int t = omp_get_thread_num(), team = omp_get_num_threads();
        int n0 = (int)((long long)batch * t / team), n1 = (int)((long long)batch * (t + 1) / team);
        float *scratch = cv->fwd_scratch + (size_t)t * cv->fwd_scratch_floats;
        float *out = cv->chunk_out + (size_t)t * chunk_floats;
        for (int s0 = n0; s0 < n1; s0 += cv->chunk) {
            struct dt_conv_shape s = cv->ds;
            s.n = n1 - s0 < cv->chunk ? n1 - s0 : cv->chunk;
            const float *xs = dt_act_from(x, c->x_bf16, s0 * in_sample);
            if (indices) {
                winograd_forward(cv, &s, xs, c->x_bf16, bias, y + s0 * out_sample,
                                 indices + s0 * out_sample, c->relu, scratch,
                                 cv->fwd_scratch_floats, 1);
                continue;
            }
            if (cv->algo == DT_CONV2D_WINOGRAD)
                winograd_forward(cv, &s, xs, c->x_bf16, bias, out, NULL, c->relu, scratch,
                                 cv->fwd_scratch_floats, 1);
            else
                (void)dt_conv_direct_forward(&s, x + s0 * in_sample, weight, bias, out, c->relu,
                                             scratch, cv->fwd_scratch_floats, 1);
            dt_maxpool2d_forward_samples(pool, out, y + s0 * out_sample, first_sample + s0, s.n);
        }
    }
}

/* The tile path's pool fusion: each sample's (relu'd) output pooled into the pool's y while
 * it is in cache. */
struct pool_sink {
    struct dt_layer *pool;
    float *y;
    int first_sample;
};

static void pool_one(void *ctx, const float *y, int sample)
{
    struct pool_sink *ps = ctx;
    dt_maxpool2d_forward_samples(ps->pool, y, ps->y + (size_t)sample * dt_shape_size(ps->pool->out),
                                 ps->first_sample + sample, 1);
}

/* On tiles a bf16 model's output is bf16 values, as autocast's conv returns (stored as bf16
 * with c->y_bf16, the plan's bf16_store), rounded in the store that writes it. The emulated
 * mode keeps its fp32 algorithm's output as it is: rounding it would be a pass of its own over
 * the whole output (the ConvNet's 1-channel first conv, 12.8 MB per step at batch 128: its
 * bf16 step 11 % slower, quiet sitting of 2026-11-26 21:33), and no layer reads it as bf16. */
static void conv2d_forward(struct dt_layer *l, const float *x, float *y, int batch,
                           const struct dt_layer_fwd *c)
{
    struct conv *cv = l->state;
    const float *weight = l->params;
    const float *bias = cv->bias ? l->params + (size_t)cv->oc * cv->ckk : NULL;
    if (cv->bf && dt_bf16_conv_tiles(cv->bf)) {
        struct pool_sink ps = {c->pool, y, c->first_sample};
        struct dt_bf16_conv_sink sink = {pool_one, &ps, NULL, NULL, 0};
        /* a 2x2 pool: the conv runs it as it compacts its output, where its mode can */
        int32_t *indices = c->pool ? dt_maxpool2d_indices_2x2(c->pool, c->first_sample) : NULL;
        if (indices) {
            sink.pool_y = y;
            sink.pool_argmax = indices;
            sink.pool_size = dt_shape_size(c->pool->out);
        }
        dt_bf16_conv_forward(cv->bf, x, c->x_bf16,
                             c->bn_below ? dt_batchnorm2d_relu(c->bn_below) : NULL,
                             c->weights_copied ? NULL : weight, bias, y, batch, c->relu,
                             c->pool ? &sink : NULL, c->y_bf16);
        return;
    }
    if (cv->bf) { /* emulated: the fp32 algorithm on bf16-rounded x and weights */
        if (!c->weights_copied && c->first_sample == 0) /* chunks: the batch's first */
            dt_bf16_round_into(cv->round_w, weight, (size_t)cv->oc * cv->ckk);
        weight = cv->round_w;
        if (!rounds_in_kernel(cv)) {
            struct dt_bf16_rounded r;
            size_t nx = (size_t)batch * dt_shape_size(l->in);
            dt_bf16_rounded_take(&r, &l->model->call_scratch, nx, 0);
            x = dt_bf16_round_into(r.x, x, nx);
        }
    }
    if (cv->algo == DT_CONV2D_WINOGRAD && c->first_sample == 0) {
        if (cv->bf && dt_bf16_conv_products(cv->bf))
            (void)dt_conv_winograd_filter_bf16(&cv->ds, weight, cv->u);
        else
            (void)dt_conv_winograd_filter(&cv->ds, weight, cv->u);
    }
    if (cv->algo != DT_CONV2D_GEMM && c->pool) {
        forward_pooled(l, x, weight, bias, y, batch, c);
        return;
    }
    if (cv->algo == DT_CONV2D_WINOGRAD) {
        struct dt_conv_shape s = cv->ds;
        s.n = batch;
        winograd_forward(cv, &s, x, c->x_bf16, bias, y, NULL, c->relu, cv->scratch,
                         cv->scratch_floats, direct_threads(cv));
        return;
    }
    if (cv->algo == DT_CONV2D_DIRECT) {
        struct dt_conv_shape s = cv->ds;
        s.n = batch;
        /* cannot fail: the shape was accepted and the scratch sized at setup */
        (void)dt_conv_direct_forward(&s, x, weight, bias, y, c->relu, cv->scratch,
                                     cv->scratch_floats, direct_threads(cv));
        return;
    }
    bool relu = c->relu;
    int n = batch * cv->pix;
    dt_im2col(&cv->ds, x, cv->col, batch);
    /* One GEMM per sample, each on one thread, straight into the sample's output: OpenBLAS's
     * rounding depends on the GEMM's width (a batched GEMM of 32768 columns and one of 16384
     * differ in 321 of 524288 elements), so a batched forward changed activations by an ulp
     * with the instance count, enough to flip ReLU inputs near zero and the trajectory with
     * them. Per sample, an activation depends only on its sample. */
#pragma omp parallel for if ((size_t)n * cv->oc > DT_PARALLEL_MIN)
    for (int b = 0; b < batch; b++) {
        float *yb = y + (size_t)b * cv->oc * cv->pix;
        dt_sgemm(false, false, cv->oc, cv->pix, cv->ckk, 1.0f, weight, cv->ckk,
                 cv->col + (size_t)b * cv->pix, n, 0.0f, yb, cv->pix);
        if (!bias && !relu)
            continue;
        for (int o = 0; o < cv->oc; o++) {
            float *dst = yb + (size_t)o * cv->pix, add = bias ? bias[o] : 0.0f;
            if (relu)
                for (int p = 0; p < cv->pix; p++)
                    dst[p] = dst[p] + add > 0.0f ? dst[p] + add : 0.0f;
            else
                for (int p = 0; p < cv->pix; p++)
                    dst[p] += add;
        }
    }
}

/* dyt[o][b*P + p] = dy[b][o][p]. */
static void regroup_dy(const struct conv *cv, const float *dy, float *dyt, int batch)
{
    size_t n = (size_t)batch * cv->pix;
#pragma omp parallel for if (n * cv->oc > DT_PARALLEL_MIN)
    for (int o = 0; o < cv->oc; o++)
        for (int b = 0; b < batch; b++)
            memcpy(dyt + (size_t)o * n + (size_t)b * cv->pix,
                   dy + ((size_t)b * cv->oc + o) * cv->pix, cv->pix * sizeof *dyt);
}

/* The bias gradient of samples [b0, b0 + count): the sum of dy per channel, per sample in
 * float, across samples in double. */
static void bias_grad(const struct conv *cv, const float *dy, int b0, int count, float *dbias)
{
#pragma omp parallel for if ((size_t)count * cv->pix * cv->oc > DT_PARALLEL_MIN)
    for (int o = 0; o < cv->oc; o++) {
        double s = 0;
        for (int b = b0; b < b0 + count; b++) {
            const float *src = dy + ((size_t)b * cv->oc + o) * cv->pix;
            float part = 0;
            for (int p = 0; p < cv->pix; p++)
                part += src[p];
            s += part;
        }
        dbias[o] = (float)s;
    }
}

/* Both gradients of samples [b0, b0 + count): the weight's (and bias's) into g, which is
 * written, not accumulated; dx for those samples unless NULL. bn (Winograd and bf16 tiles,
 * else NULL): dy is a batchnorm's output gradient, read through its backward (c->bn_above);
 * pool (bf16 tiles): dy is the fused maxpool2d's output gradient (c->pool_above). */
static void backward_samples(struct dt_layer *l, const float *x, const float *dy, float *dx, int b0,
                             int count, int batch, float *g, const struct dt_bn_grad *bn,
                             const struct dt_pool_grad *pool, const struct dt_layer_bwd *c,
                             const float *weight)
{
    struct conv *cv = l->state;
    if (cv->bf && dt_bf16_conv_tiles(cv->bf)) {
        dt_bf16_conv_backward(
            cv->bf, x, c->x_bf16, c->bn_below ? dt_batchnorm2d_relu(c->bn_below) : NULL, dy, bn,
            pool, dx, c->relu_below ? x : NULL, c->relu_below ? c->below_extra : NULL,
            c->sums.out ? &c->sums : NULL,
            (c->dx_even ? DT_DX_EVEN : 0u) | (c->extra_even && c->relu_below ? DT_EXTRA_EVEN : 0u),
            b0, count, g, cv->bias);
        return;
    }
    size_t nw = (size_t)cv->oc * cv->ckk, in_sample = dt_shape_size(l->in);
    size_t out_sample = dt_shape_size(l->out);
    float *gb = cv->bias ? g + nw : NULL;
    struct dt_conv_shape s = cv->ds;
    s.n = count;
    if (cv->algo == DT_CONV2D_WINOGRAD) {
        struct dt_bn_grad part;
        memset(g, 0, l->nparams * sizeof *g); /* the kernel accumulates */
        const float *extra = c->below_extra ? c->below_extra + b0 * in_sample : NULL;
        const struct dt_bn_grad *bs = dt_bn_grad_from(bn, b0 * out_sample, &part);
        if (cv->bf)
            (void)dt_conv_winograd_backward_bf16(
                &s, dt_act_from(x, c->x_bf16, b0 * in_sample), c->x_bf16,
                dt_bf16_conv_products(cv->bf), dy + b0 * out_sample, bs, weight, g, gb,
                dx ? dx + b0 * in_sample : NULL, c->relu_below, extra, cv->scratch,
                cv->scratch_floats, direct_threads(cv));
        else
            (void)dt_conv_winograd_backward(&s, x + b0 * in_sample, dy + b0 * out_sample, bs,
                                            weight, g, gb, dx ? dx + b0 * in_sample : NULL,
                                            c->relu_below, extra, cv->scratch, cv->scratch_floats,
                                            direct_threads(cv));
        return;
    }
    if (cv->algo == DT_CONV2D_DIRECT) {
        memset(g, 0, l->nparams * sizeof *g); /* the kernel accumulates */
        (void)dt_conv_direct_backward_weight(&s, x + b0 * in_sample, dy + b0 * out_sample, g, gb,
                                             cv->scratch, cv->scratch_floats, direct_threads(cv));
        return; /* dx: conv2d_backward, over the whole batch (no sum across samples) */
    }
    /* GEMM: columns [b0 * P, (b0 + count) * P) of dyt and col, whose rows are batch * P long */
    size_t n = (size_t)batch * cv->pix, first = (size_t)b0 * cv->pix;
    int k = count * cv->pix;
    dt_sgemm(false, true, cv->oc, cv->ckk, k, 1.0f, cv->yt + first, n, cv->col + first, n, 0.0f, g,
             cv->ckk);
    if (gb)
        bias_grad(cv, dy, b0, count, gb);
    if (dx) /* dcol overwrites the same columns of col, which this slice no longer needs */
        dt_sgemm(true, false, cv->ckk, k, cv->oc, 1.0f, weight, cv->ckk, cv->yt + first, n, 0.0f,
                 cv->col + first, n);
}

/* With a gradient slice set (nn/grad_tree.h) the weight gradient is summed per slice in a
 * fixed tree; so is the GEMM path's dx, whose OpenBLAS rounding depends on the GEMM's width. */
static void conv2d_backward(struct dt_layer *l, const float *x, const float *y, const float *dy,
                            float *dx, int batch, const struct dt_layer_bwd *c)
{
    struct conv *cv = l->state;
    /* y is read only as the input of the batchnorm above (bn_above); otherwise the model's
     * relu and pool fusion may have overwritten it or never written it */
    struct dt_bn_grad bn_grad, *bn = NULL;
    if (c->bn_above) {
        dt_batchnorm2d_grad(c->bn_above, y, &bn_grad);
        bn = &bn_grad;
    }
    struct dt_pool_grad pool_grad, *pool = NULL;
    if (c->pool_above) {
        dt_maxpool2d_grad_source(c->pool_above, c->pool_y, dy, &pool_grad);
        pool = &pool_grad;
    }
    const float *weight = l->params;
    bool tiles = cv->bf && dt_bf16_conv_tiles(cv->bf);
    if (cv->bf && !tiles)
        weight = cv->round_w;                        /* rounded by forward */
    if (cv->bf && !tiles && !rounds_in_kernel(cv)) { /* emulated: dy and x rounded */
        struct dt_bf16_rounded r;
        bool reads_x = emulated_backward_reads_x(cv);
        size_t nx = reads_x ? (size_t)batch * dt_shape_size(l->in) : 0;
        size_t ny = (size_t)batch * dt_shape_size(l->out);
        dt_bf16_rounded_take(&r, &l->model->call_scratch, nx, ny);
        if (reads_x) /* the same x forward rounded: the same values */
            x = dt_bf16_round_into(r.x, x, nx);
        if (!c->dy_rounded) /* dx_rounded: the conv above stored it rounded */
            dy = dt_bf16_round_into(r.dy, dy, ny);
    }
    if (cv->algo == DT_CONV2D_GEMM && !tiles)
        regroup_dy(cv, dy, cv->yt, batch);
    int slice = dt_layer_grad_slice(l, batch);
    if (!slice) {
        backward_samples(l, x, dy, dx, 0, batch, batch, l->grads, bn, pool, c, weight);
    } else {
        struct dt_grad_tree *t = &l->model->grad_tree;
        dt_grad_tree_begin(t, l->nparams);
        for (int b0 = 0; b0 < batch; b0 += slice) {
            backward_samples(l, x, dy, dx, b0, batch - b0 < slice ? batch - b0 : slice, batch,
                             dt_grad_tree_slot(t), bn, pool, c, weight);
            dt_grad_tree_push(t);
        }
        dt_grad_tree_finish(t, l->grads);
    }
    if (tiles) /* dx was written with each slice's samples, rounded */
        return;
    if (dx && cv->algo == DT_CONV2D_DIRECT) {
        struct dt_conv_shape s = cv->ds;
        s.n = batch;
        (void)dt_conv_direct_backward_input(&s, dy, weight, dx, cv->scratch, cv->scratch_floats,
                                            direct_threads(cv));
    }
    if (dx && cv->algo == DT_CONV2D_GEMM)
        dt_col2im(&cv->ds, cv->col, dx, batch);
    if (dx && cv->bf && !rounds_in_kernel(cv)) /* emulated: dx rounded as the tiles round it */
        dt_bf16_round_n(dx, dx, (size_t)batch * dt_shape_size(l->in));
}

static void conv2d_destroy(struct dt_layer *l)
{
    struct conv *cv = l->state;
    if (!cv)
        return;
    dt_free(cv->col);
    dt_free(cv->yt);
    dt_free(cv->scratch);
    dt_free(cv->chunk_out);
    dt_free(cv->fwd_scratch);
    dt_free(cv->u);
    dt_bf16_conv_free(cv->bf); /* the weight copy is the model's (its copy arena) */
    free(cv);
}

/* The bf16 weight copy (nn/weight_copy.h): the tiles mode's packs are made whole (one piece:
 * a conv's weights are a few thousand to a few hundred thousand floats), the emulated mode's
 * rounded weights in pieces of any cut. */
static size_t conv2d_copy_piece(const struct dt_layer *l, size_t *count)
{
    const struct conv *cv = l->state;
    *count = (size_t)cv->oc * cv->ckk;
    if (!cv->bf)
        return 0;
    return dt_bf16_conv_tiles(cv->bf) ? *count : DT_BF16_ROUNDED_PIECE;
}

static void conv2d_copy_weights(struct dt_layer *l, size_t lo, size_t hi)
{
    struct conv *cv = l->state;
    if (dt_bf16_conv_tiles(cv->bf))
        dt_bf16_conv_pack_weights(cv->bf, l->params);
    else
        dt_bf16_round_into(cv->round_w + lo, l->params + lo, hi - lo);
}

const struct dt_layer_ops dt_conv2d_ops = {.setup = conv2d_setup,
                                           .init = conv2d_init,
                                           .forward = conv2d_forward,
                                           .backward = conv2d_backward,
                                           .destroy = conv2d_destroy,
                                           .copy_piece = conv2d_copy_piece,
                                           .copy_weights = conv2d_copy_weights};

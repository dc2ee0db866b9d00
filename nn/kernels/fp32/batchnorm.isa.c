/* batchnorm2d's four passes over the activations, built once per instruction set (generic:
 * the binary's x86-64-v2; avx2: AVX2 + FMA; avx512: AVX-512 F/BW/VL/DQ, Makefile), each build's
 * functions named by DT_ISA_FN and gathered in its table dt_bn_loops_<isa> (batchnorm.h). They are
 * most of batchnorm's time, and batchnorm is a quarter of a ResNet step: the v2 build converts and
 * adds 2 doubles per instruction, the AVX2 and AVX-512 builds 4 and 8 (measured: batchnorm 100-105
 * -> 75 ms per ResNet-20 step at one thread, docs/kernels.md). Every build gives the same bits:
 * each double lane adds in order, and ISO C (-std=c11) keeps GCC from contracting a * b + c into an
 * FMA.
 *
 * affine and input_grad walk the samples last to first. Without a reduction they follow the
 * sums over the same channel (nn/layer_batchnorm2d.c), which read its planes first to last,
 * and a ResNet-20 stage-1 channel (x and dy, 1 MB at batch 128) does not all stay in L2: the
 * planes read last are the ones still there (batchnorm 3-5 ms less per step at one thread).
 * They are elementwise, so the order changes no bit.
 *
 * moments, grad_sums and affine also read x stored as bf16 (the *_bf16 entries: a bf16 model's
 * tiles conv2d stores its output so when only this batchnorm reads it, nn/fusion.h's bf16_store),
 * and affine_to_bf16 stores y so (for a tiles conv2d above that reads it so): one body per pass,
 * the element types constant arguments, so each entry is its own loop and the fp32 one is the
 * code it always was. A bf16 value widens to fp32 exactly, so the entries give the same bits
 * on the same values; a stored bf16 y is the fp32 one rounded (util/bf16.h). grad_sums_bf16 is
 * the exception: it sums each sample apart, in the order the conv2d above takes the same sums
 * in as it stores dy (bn_grad.h, the bn_sums fusion), so that fused or not a bf16 model has
 * the same bits.
 */
#include "nn/kernels/fp32/batchnorm.h"
#include "nn/kernels/fp32/bn_grad.h"
#include "nn/kernels/isa_fn.h"
#include "util/bf16.h"

#define BODY static inline __attribute__((always_inline))

/* Sums over one channel's planes in double, in LANES independent accumulators: one running
 * double sum has a 4-cycle dependency per element, which made batchnorm a third of a ResNet
 * step; separate lanes vectorize (each lane adds in order, so no -ffast-math is needed) and
 * keep the result independent of the thread count. */
#define LANES 8

static double lanes_total(const double *acc)
{
    double s = 0;
    for (int k = 0; k < LANES; k++)
        s += acc[k];
    return s;
}

/* A pass reads one channel's planes, `sample` elements apart: a new page and a new stream
 * every plane, and a ResNet's stage-3 plane is 2-4 lines (8x8), too short for the hardware
 * prefetcher to start on before it ends. So each pass asks for the plane PREFETCH_AHEAD
 * samples on while it works on this one: its first PREFETCH_LINES lines (the prefetcher takes
 * a longer plane from there). Measured per element, stage 3's batchnorm forward cost 3x stage
 * 1's without it (ResNet-20, --profile). No bit changes. */
#define PREFETCH_AHEAD 4
#define PREFETCH_LINES 8

/* The start of the plane PREFETCH_AHEAD planes on from p (planes of n elements of elem_bytes,
 * `step` elements apart: negative for a pass walking down), asked for when it is one of the
 * pass's (it has done `done` planes of `batch`); for_write: it will be stored to. */
BODY void prefetch_plane(const void *p, ptrdiff_t step, size_t elem_bytes, size_t n, int done,
                         int batch, bool for_write)
{
    if (done + PREFETCH_AHEAD >= batch)
        return;
    const char *q = (const char *)p + PREFETCH_AHEAD * step * (ptrdiff_t)elem_bytes;
    size_t bytes = n * elem_bytes, end = bytes < PREFETCH_LINES * 64 ? bytes : PREFETCH_LINES * 64;
    for (size_t off = 0; off < end; off += 64)
        if (for_write)
            __builtin_prefetch(q + off, 1);
        else
            __builtin_prefetch(q + off, 0);
}

/* Sums over `batch` planes of n floats (stride `sample` apart) of x - shift and (x - shift)^2. */
BODY void moments_of(const void *x, bool half, size_t n, size_t sample, int batch, double shift,
                     double *sum, double *sum_sq)
{
    double a[LANES] = {0}, q[LANES] = {0};
    size_t whole = n / LANES * LANES;
    for (int b = 0; b < batch; b++) {
        const void *p = dt_act_from(x, half, (size_t)b * sample);
        prefetch_plane(p, (ptrdiff_t)sample, half ? 2 : 4, n, b, batch, false);
        size_t i = 0;
        for (; i < whole; i += LANES)
            for (int k = 0; k < LANES; k++) {
                double d = (double)dt_act_at(p, half, i + k) - shift;
                a[k] += d;
                q[k] += d * d;
            }
        for (; i < n; i++) {
            double d = (double)dt_act_at(p, half, i) - shift;
            a[i % LANES] += d;
            q[i % LANES] += d * d;
        }
    }
    *sum = lanes_total(a);
    *sum_sq = lanes_total(q);
}

static void DT_ISA_FN(moments)(const float *x, size_t n, size_t sample, int batch, double shift,
                               double *sum, double *sum_sq)
{
    moments_of(x, false, n, sample, batch, shift, sum, sum_sq);
}

static void DT_ISA_FN(moments_bf16)(const dt_bf16 *x, size_t n, size_t sample, int batch,
                                    double shift, double *sum, double *sum_sq)
{
    moments_of(x, true, n, sample, batch, shift, sum, sum_sq);
}

/* Backward's two sums over the same planes: sum dy and sum dy * (x - mean). */
BODY void grad_sums_of(const float *x, const float *dy, size_t n, size_t sample, int batch,
                       double mean, double *sum_dy, double *sum_dy_xm)
{
    double a[LANES] = {0}, q[LANES] = {0};
    size_t whole = n / LANES * LANES;
    for (int b = 0; b < batch; b++) {
        size_t i = 0;
        const float *px = x + (size_t)b * sample, *pd = dy + (size_t)b * sample;
        prefetch_plane(px, (ptrdiff_t)sample, 4, n, b, batch, false);
        prefetch_plane(pd, (ptrdiff_t)sample, 4, n, b, batch, false);
        for (; i < whole; i += LANES)
            for (int k = 0; k < LANES; k++) {
                a[k] += pd[i + k];
                q[k] += (double)pd[i + k] * ((double)px[i + k] - mean);
            }
        for (; i < n; i++) {
            a[i % LANES] += pd[i];
            q[i % LANES] += (double)pd[i] * ((double)px[i] - mean);
        }
    }
    *sum_dy = lanes_total(a);
    *sum_dy_xm = lanes_total(q);
}

static void DT_ISA_FN(grad_sums)(const float *x, const float *dy, size_t n, size_t sample,
                                 int batch, double mean, double *sum_dy, double *sum_dy_xm)
{
    grad_sums_of(x, dy, n, sample, batch, mean, sum_dy, sum_dy_xm);
}

/* The same two sums over x stored as bf16, sample by sample in bn_grad.h's order (DT_BN_LANES
 * lanes over each plane, added pairwise), sample b's into sum_dy[b * stride] and
 * sum_dy_xm[b * stride]: the order a conv2d above takes them in as it stores dy (bn_sums). */
static void DT_ISA_FN(grad_sums_bf16)(const dt_bf16 *x, const float *dy, size_t n, size_t sample,
                                      int batch, double mean, double *sum_dy, double *sum_dy_xm,
                                      size_t stride)
{
    size_t whole = n / DT_BN_LANES * DT_BN_LANES;
    for (int b = 0; b < batch; b++) {
        double a[DT_BN_LANES] = {0}, q[DT_BN_LANES] = {0};
        const dt_bf16 *px = x + (size_t)b * sample;
        const float *pd = dy + (size_t)b * sample;
        prefetch_plane(px, (ptrdiff_t)sample, 2, n, b, batch, false);
        prefetch_plane(pd, (ptrdiff_t)sample, 4, n, b, batch, false);
        size_t i = 0;
        for (; i < whole; i += DT_BN_LANES) /* dt_bn_lanes_add, lane k spelled out: vectorized */
            for (int k = 0; k < DT_BN_LANES; k++) {
                a[k] += pd[i + k];
                q[k] += (double)pd[i + k] * ((double)dt_bf16_to_f32(px[i + k]) - mean);
            }
        for (; i < n; i++)
            dt_bn_lanes_add(a, q, i, pd[i], dt_bf16_to_f32(px[i]), mean);
        sum_dy[(size_t)b * stride] = dt_bn_lanes_total(a);
        sum_dy_xm[(size_t)b * stride] = dt_bn_lanes_total(q);
    }
}

/* Element i of y = v, stored as fp32 or (half) rounded to bf16. */
BODY void y_put(void *y, bool half, size_t i, float v)
{
    if (half)
        ((dt_bf16 *)y)[i] = dt_bf16_from_f32(v);
    else
        ((float *)y)[i] = v;
}

/* Element i of the skip, as the add reads it (batchnorm.h's enum dt_bn_skip). */
BODY float skip_at(const void *skip, enum dt_bn_skip as, size_t i)
{
    if (as == DT_SKIP_BF16)
        return dt_bf16_to_f32(((const dt_bf16 *)skip)[i]);
    float v = ((const float *)skip)[i];
    return as == DT_SKIP_ROUNDED ? dt_bf16_round(v) : v;
}

/* y = x * scale + shift over the planes, plus skip (laid out as x) when not NULL (a following
 * add's, in its order: (x * scale + shift) + skip, the skip read as `as` says), and max(y, 0)
 * with relu (the fused following relu); x read and y stored as fp32 or (x_half, y_half)
 * bf16. */
BODY void affine_of(const void *x, bool x_half, void *y, bool y_half, size_t n, size_t sample,
                    int batch, float scale, float shift, bool relu, const void *skip,
                    enum dt_bn_skip as)
{
    size_t skip_bytes = as == DT_SKIP_BF16 ? 2 : 4;
    for (int b = batch - 1; b >= 0; b--) { /* last read first (see the top) */
        const void *px = dt_act_from(x, x_half, (size_t)b * sample);
        void *py = y_half ? (void *)((dt_bf16 *)y + (size_t)b * sample)
                          : (void *)((float *)y + (size_t)b * sample);
        const void *ps = skip ? (const char *)skip + (size_t)b * sample * skip_bytes : NULL;
        /* walking down: the plane PREFETCH_AHEAD samples before (see prefetch_plane) */
        prefetch_plane(py, -(ptrdiff_t)sample, y_half ? 2 : 4, n, batch - 1 - b, batch, true);
        if (ps)
            prefetch_plane(ps, -(ptrdiff_t)sample, skip_bytes, n, batch - 1 - b, batch, false);
        if (ps && relu)
            for (size_t i = 0; i < n; i++) {
                float v = (dt_act_at(px, x_half, i) * scale + shift) + skip_at(ps, as, i);
                y_put(py, y_half, i, v > 0.0f ? v : 0.0f);
            }
        else if (ps)
            for (size_t i = 0; i < n; i++)
                y_put(py, y_half, i,
                      (dt_act_at(px, x_half, i) * scale + shift) + skip_at(ps, as, i));
        else if (relu)
            for (size_t i = 0; i < n; i++) {
                float v = dt_act_at(px, x_half, i) * scale + shift;
                y_put(py, y_half, i, v > 0.0f ? v : 0.0f);
            }
        else
            for (size_t i = 0; i < n; i++)
                y_put(py, y_half, i, dt_act_at(px, x_half, i) * scale + shift);
    }
}

/* affine_of with x's, y's and the skip's types constants: each case its own loop. */
BODY void affine_as(const void *x, bool x_half, void *y, bool y_half, size_t n, size_t sample,
                    int batch, float scale, float shift, bool relu, const void *skip,
                    enum dt_bn_skip as)
{
    if (as == DT_SKIP_BF16)
        affine_of(x, x_half, y, y_half, n, sample, batch, scale, shift, relu, skip, DT_SKIP_BF16);
    else if (as == DT_SKIP_ROUNDED)
        affine_of(x, x_half, y, y_half, n, sample, batch, scale, shift, relu, skip,
                  DT_SKIP_ROUNDED);
    else
        affine_of(x, x_half, y, y_half, n, sample, batch, scale, shift, relu, skip, DT_SKIP_F32);
}

static void DT_ISA_FN(affine)(const float *x, float *y, size_t n, size_t sample, int batch,
                              float scale, float shift, bool relu, const void *skip,
                              enum dt_bn_skip as)
{
    affine_as(x, false, y, false, n, sample, batch, scale, shift, relu, skip, as);
}

static void DT_ISA_FN(affine_bf16)(const dt_bf16 *x, float *y, size_t n, size_t sample, int batch,
                                   float scale, float shift, bool relu, const void *skip,
                                   enum dt_bn_skip as)
{
    affine_as(x, true, y, false, n, sample, batch, scale, shift, relu, skip, as);
}

static void DT_ISA_FN(affine_to_bf16)(const void *x, bool x_bf16, dt_bf16 *y, size_t n,
                                      size_t sample, int batch, float scale, float shift, bool relu,
                                      const void *skip, enum dt_bn_skip as)
{
    if (x_bf16)
        affine_as(x, true, y, true, n, sample, batch, scale, shift, relu, skip, as);
    else
        affine_as(x, false, y, true, n, sample, batch, scale, shift, relu, skip, as);
}

/* dx = k * (dy - mean_dy - xhat * mean_dy_xhat), xhat = (x - mean) * invstd, over the planes. */
BODY void input_grad_of(const void *x, bool half, const float *dy, float *dx, size_t n,
                        size_t sample, int batch, float mean, float invstd, float k, float mean_dy,
                        float mean_dy_xhat)
{
    for (int b = batch - 1; b >= 0; b--) { /* last read first (see the top) */
        const void *px = dt_act_from(x, half, (size_t)b * sample);
        const float *pd = dy + (size_t)b * sample;
        float *po = dx + (size_t)b * sample;
        prefetch_plane(po, -(ptrdiff_t)sample, 4, n, batch - 1 - b, batch, true);
        for (size_t i = 0; i < n; i++) {
            float xhat = (dt_act_at(px, half, i) - mean) * invstd;
            po[i] = k * (pd[i] - mean_dy - xhat * mean_dy_xhat);
        }
    }
}

static void DT_ISA_FN(input_grad)(const float *x, const float *dy, float *dx, size_t n,
                                  size_t sample, int batch, float mean, float invstd, float k,
                                  float mean_dy, float mean_dy_xhat)
{
    input_grad_of(x, false, dy, dx, n, sample, batch, mean, invstd, k, mean_dy, mean_dy_xhat);
}

/* x stored as bf16: the bf16 tile conv below a batchnorm runs it per sample (bn_grad,
 * nn/bf16_layers.c). */
static void DT_ISA_FN(input_grad_bf16)(const dt_bf16 *x, const float *dy, float *dx, size_t n,
                                       size_t sample, int batch, float mean, float invstd, float k,
                                       float mean_dy, float mean_dy_xhat)
{
    input_grad_of(x, true, dy, dx, n, sample, batch, mean, invstd, k, mean_dy, mean_dy_xhat);
}

const struct dt_bn_loops DT_ISA_FN(dt_bn_loops) = {
    .moments = DT_ISA_FN(moments),
    .grad_sums = DT_ISA_FN(grad_sums),
    .affine = DT_ISA_FN(affine),
    .input_grad = DT_ISA_FN(input_grad),
    .input_grad_bf16 = DT_ISA_FN(input_grad_bf16),
    .moments_bf16 = DT_ISA_FN(moments_bf16),
    .grad_sums_bf16 = DT_ISA_FN(grad_sums_bf16),
    .affine_bf16 = DT_ISA_FN(affine_bf16),
    .affine_to_bf16 = DT_ISA_FN(affine_to_bf16),
};

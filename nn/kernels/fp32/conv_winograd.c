/* Winograd F(4x4, 3x3) convolution: forward, weight gradient, input gradient.
 *
 * Math. Output is cut into 4x4 tiles; tile t reads the 6x6 input block d_t at (4ty, 4tx) of
 * the padded input (tiles that run past the output are computed on zeros and cropped). With
 * Lavin & Gray's matrices B^T (6x6), G (6x3) and A^T (4x6) for the points 0, +-1, +-2, inf:
 *   forward          U = G w G^T per (k, c),  V = B^T d B per (tile, c),
 *                    M[p] = V[p] x U[p] (per position p of the 6x6 domain: [tiles]x[C] times
 *                    [C]x[K]),  y tile = A^T M A
 * and the two gradients are its exact adjoints, computed in the same domain:
 *   weight grad      dM = A dy A^T,  dU[p] += V[p]^T x dM[p] (summed over tiles and samples),
 *                    dw = G^T dU G once at the end
 *   input grad       dV[p] = dM[p] x U[p]^T,  dx += B dV B^T scattered into the overlapping
 *                    6x6 input blocks.
 * A 4x4 output tile costs 36 multiplications per channel pair instead of direct convolution's
 * 9 x 16 = 144; with the transforms, about 3x fewer flops at the ConvNet's 16->32 channels.
 * The bias gradient is read off dM: position (1, 1) of A dy A^T is the tile's sum.
 *
 * Layout. Channels are the vector dimension: each sample is first transposed (16x16 register
 * transposes) into a channels-last plane [row][col][C16] (C16 = C rounded up to 16, the extra
 * lanes zero), so a transform is plain vector arithmetic on 36 vectors with no shuffles, and
 * the products are small GEMMs vectorised along K (forward, weight gradient) or C (input
 * gradient) with one broadcast operand, like the direct kernels' register blocks (<= 12 rows x
 * <= 4 vectors of accumulators). V and M are stored tile-major ([tile][p][channel]) so the
 * transforms read and write them sequentially. Results are transposed back to NCHW at the end,
 * where the forward also adds the bias and applies the ReLU; or the forward max-pools 2x2 in
 * its output transform (the tiles align with the windows) and only the pooled output and the
 * winners' indices are transposed back (forward_pool2).
 *
 * Cache. A sample's tiles are processed in blocks sized so the block's V and M (36 positions x
 * tiles x (C16 + K16) floats) stay in L2 next to U; for the ConvNet a block is the whole sample.
 * Work is partitioned by sample over the OpenMP team; the weight gradient keeps one dU per thread
 * and sums them in thread order, so results depend only on the thread count.
 *
 * When Winograd pays (dt_conv_winograd_preferred): channels are padded to 16 lanes, and with
 * few of them the transforms cost more than the products save; small planes favour it, as the
 * direct kernels' backward is slow there. The rule: C >= 8, K >= 8 and C * K >= 128 (the
 * measurements behind it: BENCHMARKS.md, "Where Winograd pays").
 *
 * Stride 2. A stride-2 conv's output is every other pixel of the stride-1 output with the same
 * padding: y2[i][j] = y1[2i][2j]. So the kernels compute the stride-1 grid and pick those
 * pixels as they transpose back to NCHW. The backward spreads dy onto the stride-1 grid with
 * zeros between, which is exactly the adjoint of that pick, and runs unchanged. That is 4x the
 * arithmetic a stride-2 conv needs, and still faster than im2col + sgemm (the only other path
 * for stride 2) on ResNet-20's stride-2 convs (BENCHMARKS.md). The rule at stride 2, either
 * width, is the AVX-512 stride-1 rule: the waste needs enough channels to pay for itself.
 *
 * Widths. The kernels (nn/kernels/fp32/conv_winograd.isa.c) are built at 16 lanes (AVX-512) and at
 * 8 (AVX2
 * + FMA); the layout stays padded to 16 channels, each block walked as two 8-lane halves, and
 * both builds give the same bits. Without AVX-512 the direct kernels' 8-lane loops are slower
 * than im2col + sgemm, so there Winograd's rival is sgemm, and it wins at every shape measured
 * (BENCHMARKS.md). The rule at 8 lanes: C * K >= 16.
 *
 * bf16 products (train.bf16_winograd, the `products` argument). The three products run on
 * pairs of bf16 in 32-bit lanes, VDPBF16PS's operand (the avx512bf16 build; FMAs elsewhere):
 * the forward pairs adjacent channels of V (input_transform stores it as bf16 in place) with
 * U packed in pairs of input channels [p][c16 / 2][k16][2]; the input gradient pairs adjacent
 * channels of dM (output_adjoint stores it as bf16, taking the bias sums from the unrounded
 * values) with U^T packed in pairs of output channels; the weight gradient pairs adjacent
 * tiles, so V (in place) and dM (into the m section's second half; a row to spare where the
 * section's capacity is odd) are repacked as pairs of rows. The transforms and the
 * accumulators stay fp32; the avx512bf16 build rounds with VCVTNE(2)PS2BF16, the others with
 * round_bf16 (they differ on denormals only).
 */
#include "nn/kernels/fp32/conv_winograd.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

#include <omp.h>

#include "nn/kernels/fp32/winograd_impl.h"
#include "nn/kernels/isa.h"
#include "util/bf16.h"
#include "util/err.h"

enum {
    PREFER_MIN_CHANNELS = 8,
    PREFER_MIN_PRODUCT = 128,     /* C * K, against the AVX-512 direct kernels */
    PREFER_MIN_PRODUCT_AVX2 = 16, /* C * K, against im2col + sgemm */
};

/* ---- shape bookkeeping ---------------------------------------------------------------- */

bool dt_conv_winograd_supported(const struct dt_conv_shape *s)
{
    if (!s || s->n < 1 || s->c < 1 || s->h < 1 || s->w < 1 || s->k < 1)
        return false;
    if (s->kh != 3 || s->kw != 3 || (s->stride != 1 && s->stride != 2) ||
        (s->pad != 0 && s->pad != 1))
        return false;
    if (s->h > INT_MAX / 4 || s->w > INT_MAX / 4 || s->c > INT_MAX / 64 || s->k > INT_MAX / 64)
        return false;
    int oh = s->h + 2 * s->pad - 2, ow = s->w + 2 * s->pad - 2;
    if (oh < 1 || ow < 1)
        return false;
    long long th = (oh + 3) / 4, tw = (ow + 3) / 4;
    int c16 = (int)round_lanes((size_t)s->c), k16 = (int)round_lanes((size_t)s->k);
    if (!fits_int(s->n, s->c, s->h, s->w) || !fits_int(s->n, s->k, oh, ow) ||
        !fits_int(4 * th + 2, 4 * tw + 2, c16, 1) || !fits_int(4 * th, 4 * tw, k16, 1) ||
        !fits_int(POS, c16, k16, 1) || !fits_int(POS, th * tw, c16 + k16, 1))
        return false;
    return dt_conv_simd_lanes() > 0;
}

bool dt_conv_winograd_preferred(const struct dt_conv_shape *s)
{
    if (!dt_conv_winograd_supported(s))
        return false;
    if (dt_conv_simd_lanes() == 8 && s->stride == 1)
        return (long long)s->c * s->k >= PREFER_MIN_PRODUCT_AVX2;
    return s->c >= PREFER_MIN_CHANNELS && s->k >= PREFER_MIN_CHANNELS &&
           (long long)s->c * s->k >= PREFER_MIN_PRODUCT;
}

static struct geom geom_of(const struct dt_conv_shape *s)
{
    struct geom g = {.n = s->n, .c = s->c, .h = s->h, .w = s->w, .k = s->k, .pad = s->pad};
    g.step = s->stride;
    g.oh = g.h + 2 * g.pad - 2;
    g.ow = g.w + 2 * g.pad - 2;
    g.yh = (g.oh - 1) / g.step + 1;
    g.yw = (g.ow - 1) / g.step + 1;
    g.th = (g.oh + 3) / 4;
    g.tw = (g.ow + 3) / 4;
    g.tiles = g.th * g.tw;
    g.hi = 4 * g.th + 2;
    g.wi = 4 * g.tw + 2;
    g.ho = 4 * g.th;
    g.wo = 4 * g.tw;
    g.c16 = (int)round_lanes((size_t)g.c);
    g.k16 = (int)round_lanes((size_t)g.k);
    int nt = BLOCK_FLOATS / (POS * (g.c16 + g.k16));
    nt = nt < MAX_RB ? MAX_RB : nt;
    g.nt = nt < g.tiles ? nt : g.tiles;
    g.group = nt / g.nt; /* 1 unless a whole sample fits a block more than once */
    g.filter = round_lanes((size_t)POS * g.c16 * g.k16);
    g.in = round_lanes((size_t)g.hi * g.wi * g.c16);
    g.out = round_lanes((size_t)g.ho * g.wo * g.k16);
    g.v = round_lanes((size_t)POS * g.nt * g.group * g.c16);
    /* an odd capacity gets a row to spare: the products' tile pairs of dM (backward_samples)
     * end half a row past an odd block's rows. Not a row for all: the sections' offsets
     * shifted by it made fp32 ResNet-20 3 % slower on Zen 4 (the AVX-512 build) */
    int rows = g.nt * g.group;
    g.m = round_lanes((size_t)POS * (rows + rows % 2) * g.k16);
    g.acc = g.filter;
    g.db = round_lanes((size_t)g.k16);
    g.per_thread = 2 * g.in + g.out + g.v + g.m + g.acc + g.db;
    return g;
}

size_t dt_conv_winograd_scratch_floats(const struct dt_conv_shape *s, int threads)
{
    if (!dt_conv_winograd_supported(s) || threads < 1)
        return 0;
    struct geom g = geom_of(s);
    return g.filter + (size_t)threads * g.per_thread;
}

size_t dt_conv_winograd_filter_floats(const struct dt_conv_shape *s)
{
    return dt_conv_winograd_supported(s) ? geom_of(s).filter : 0;
}

static int check_call(const struct dt_conv_shape *s, size_t have, int threads, const char *what)
{
    return dt_conv_check_call("conv_winograd", what, s, dt_conv_winograd_supported(s),
                              "a 3x3 kernel, stride 1 or 2, pad 0 or 1, AVX2 or AVX-512", threads,
                              have, dt_conv_winograd_scratch_floats(s, threads));
}

/* The kernels of the path in use; supported() has checked there is one. */
static const struct wg_kernels *kernels(void)
{
    switch (dt_isa_build(DT_KERNEL_WINOGRAD)) {
    case DT_ISA_AVX512BF16:
        return &dt_winograd_avx512bf16;
    case DT_ISA_AVX512:
        return &dt_winograd_avx512;
    default:
        return &dt_winograd_avx2;
    }
}

/* ---- public kernels ------------------------------------------------------------------- */

int dt_conv_winograd_filter(const struct dt_conv_shape *s, const float *w, float *u)
{
    if (!dt_conv_winograd_supported(s))
        return check_call(s, 0, 1, "filter");
    struct geom g = geom_of(s);
    kernels()->transform_filter(&g, w, false, u);
    return 0;
}

int dt_conv_winograd_filter_bf16(const struct dt_conv_shape *s, const float *w, float *u)
{
    if (!dt_conv_winograd_supported(s))
        return check_call(s, 0, 1, "filter_bf16");
    struct geom g = geom_of(s);
    g.bf16 = g.products = true;
    kernels()->transform_filter(&g, w, false, u);
    return 0;
}

/* Spreads the prefetch of ah's regions over a sample's calls of ahead_step: one per position
 * of each tile block, per product pass (forward: 1; backward: weight and input gradients). */
static void ahead_plan(struct ahead *ah, const struct geom *g, int passes)
{
    size_t total = ah->bytes[0] + ah->bytes[1] + ah->bytes[2];
    size_t steps = (size_t)((g->tiles + g->nt - 1) / g->nt) * POS * (size_t)passes;
    ah->per_step = steps ? (total / steps + 63) / 64 * 64 : total;
}

/* Bytes of n activation elements, stored as fp32 or (x_bf16) bf16. */
static size_t act_bytes(size_t n, bool x_bf16)
{
    return n * (x_bf16 ? sizeof(dt_bf16) : sizeof(float));
}

static int forward(const struct dt_conv_shape *s, const void *x, bool x_bf16, const float *u,
                   const float *b, float *y, int32_t *argmax, int relu, bool bf16, bool products,
                   float *scratch, size_t scratch_floats, int threads, const char *what)
{
    int rc = check_call(s, scratch_floats, threads, what);
    if (rc)
        return rc;
    struct geom g = geom_of(s);
    g.bf16 = bf16;
    g.x_bf16 = x_bf16;
    g.products = products;
    if (argmax && (g.oh < 2 || g.ow < 2 || g.step != 1))
        return dt_fail(DT_EUSAGE, "conv_winograd %s: output %dx%d (stride %d) cannot be pooled 2x2",
                       what, g.yh, g.yw, g.step);
    size_t in_sample = (size_t)g.c * g.h * g.w, out_sample = (size_t)g.k * g.yh * g.yw;
    if (argmax)
        out_sample = (size_t)g.k * (g.oh / 2) * (g.ow / 2);
    const struct wg_kernels *kw = kernels();
#pragma omp parallel num_threads(threads)
    {
        struct wscratch ws = wscratch_of(&g, scratch, omp_get_thread_num());
#pragma omp for schedule(static)
        for (int n = 0; n < g.n; n++) {
            struct ahead ah = {0}; /* the next sample's input */
            if (n + 1 < g.n) {
                ah.p[0] = (const char *)dt_act_from(x, x_bf16, (n + 1) * in_sample);
                ah.bytes[0] = act_bytes(in_sample, x_bf16);
            }
            ahead_plan(&ah, &g, 1);
            kw->forward_sample(&g, dt_act_from(x, x_bf16, n * in_sample), u, b, y + n * out_sample,
                               argmax ? argmax + n * out_sample : NULL, relu, &ws, &ah);
        }
    }
    return 0;
}

int dt_conv_winograd_forward_filtered(const struct dt_conv_shape *s, const float *x, const float *u,
                                      const float *b, float *y, int relu, float *scratch,
                                      size_t scratch_floats, int threads)
{
    return forward(s, x, false, u, b, y, NULL, relu, false, false, scratch, scratch_floats, threads,
                   "forward");
}

int dt_conv_winograd_forward_pool2(const struct dt_conv_shape *s, const float *x, const float *u,
                                   const float *b, float *y, int32_t *argmax, int relu,
                                   float *scratch, size_t scratch_floats, int threads)
{
    return forward(s, x, false, u, b, y, argmax, relu, false, false, scratch, scratch_floats,
                   threads, "forward_pool2");
}

int dt_conv_winograd_forward_bf16(const struct dt_conv_shape *s, const void *x, bool x_bf16,
                                  bool products, const float *u, const float *b, float *y,
                                  int32_t *argmax, int relu, float *scratch, size_t scratch_floats,
                                  int threads)
{
    return forward(s, x, x_bf16, u, b, y, argmax, relu, true, products, scratch, scratch_floats,
                   threads, "forward_bf16");
}

int dt_conv_winograd_forward(const struct dt_conv_shape *s, const float *x, const float *w,
                             const float *b, float *y, int relu, float *scratch,
                             size_t scratch_floats, int threads)
{
    int rc = check_call(s, scratch_floats, threads, "forward");
    if (rc)
        return rc;
    struct geom g = geom_of(s);
    kernels()->transform_filter(&g, w, false, scratch);
    return dt_conv_winograd_forward_filtered(s, x, scratch, b, y, relu, scratch, scratch_floats,
                                             threads);
}

static int backward(const struct dt_conv_shape *s, const void *x, bool x_bf16, const float *dy,
                    const struct dt_bn_grad *bn, const float *w, float *dw, float *db, float *dx,
                    bool relu_below, const float *extra, bool bf16, bool products, float *scratch,
                    size_t scratch_floats, int threads, const char *what)
{
    int rc = check_call(s, scratch_floats, threads, what);
    if (rc)
        return rc;
    if (relu_below && dx && !x)
        return dt_fail(DT_EUSAGE, "conv_winograd %s: relu_below needs x, the relu's output", what);
    const void *mask = relu_below && dx ? x : NULL;
    extra = mask ? extra : NULL;
    struct geom g = geom_of(s);
    g.bf16 = bf16;
    g.x_bf16 = x_bf16;
    g.products = products;
    const struct wg_kernels *kw = kernels();
    if (dx)
        kw->transform_filter(&g, w, true, scratch);
    if (!dw)
        x = NULL, db = NULL; /* backward_samples' signal: no weight gradient */
    size_t in_sample = (size_t)g.c * g.h * g.w, out_sample = (size_t)g.k * g.yh * g.yw;
#pragma omp parallel num_threads(threads)
    {
        int tid = omp_get_thread_num(), team = omp_get_num_threads();
        struct wscratch ws = wscratch_of(&g, scratch, tid);
        if (x)
            memset(ws.acc, 0, sizeof(float) * (g.acc + g.db)); /* acc and db are adjacent */
        int n0 = (int)((long long)g.n * tid / team), n1 = (int)((long long)g.n * (tid + 1) / team);
        for (int n = n0; n < n1; n += g.group) {
            int count = n1 - n < g.group ? n1 - n : g.group;
            int next = n1 - n - count < g.group ? n1 - n - count : g.group;
            struct ahead ah = {0}; /* the next samples' dy, batchnorm input and x */
            if (next > 0) {
                ah.p[0] = (const char *)(dy + (n + count) * out_sample);
                ah.bytes[0] = out_sample * next * sizeof(float);
                if (bn) {
                    ah.p[1] = (const char *)(bn->x + (n + count) * out_sample);
                    ah.bytes[1] = ah.bytes[0];
                }
                if (x) {
                    ah.p[2] = (const char *)dt_act_from(x, x_bf16, (n + count) * in_sample);
                    ah.bytes[2] = act_bytes(in_sample * next, x_bf16);
                }
            }
            ahead_plan(&ah, &g, (x ? 1 : 0) + (dx ? 1 : 0));
            struct dt_bn_grad part;
            kw->backward_samples(&g, x ? dt_act_from(x, x_bf16, n * in_sample) : NULL,
                                 dy + n * out_sample, dt_bn_grad_from(bn, n * out_sample, &part),
                                 scratch, db != NULL, dx ? dx + n * in_sample : NULL,
                                 mask ? dt_act_from(mask, x_bf16, n * in_sample) : NULL,
                                 extra ? extra + n * in_sample : NULL, &ws, count, &ah);
        }
        if (x) {
#pragma omp barrier
            /* in thread order, in 16-float pieces of dU and db */
            size_t pieces = (g.acc + g.db) / LANES;
            size_t p0 = pieces * tid / team, p1 = pieces * (tid + 1) / team;
            kw->reduce_threads(&g, scratch, team, p0 * LANES, p1 * LANES);
#pragma omp barrier
            struct wscratch w0 = wscratch_of(&g, scratch, 0);
            int c0 = (int)((long long)g.c * tid / team);
            int c1 = (int)((long long)g.c * (tid + 1) / team);
            kw->weight_from_domain(&g, w0.acc, c0, c1, dw);
            if (tid == 0)
                for (int k = 0; db && k < g.k; k++)
                    db[k] += w0.db[k];
        }
    }
    return 0;
}

int dt_conv_winograd_backward(const struct dt_conv_shape *s, const float *x, const float *dy,
                              const struct dt_bn_grad *bn, const float *w, float *dw, float *db,
                              float *dx, bool relu_below, const float *extra, float *scratch,
                              size_t scratch_floats, int threads)
{
    return backward(s, x, false, dy, bn, w, dw, db, dx, relu_below, extra, false, false, scratch,
                    scratch_floats, threads, "backward");
}

int dt_conv_winograd_backward_bf16(const struct dt_conv_shape *s, const void *x, bool x_bf16,
                                   bool products, const float *dy, const struct dt_bn_grad *bn,
                                   const float *w, float *dw, float *db, float *dx, bool relu_below,
                                   const float *extra, float *scratch, size_t scratch_floats,
                                   int threads)
{
    return backward(s, x, x_bf16, dy, bn, w, dw, db, dx, relu_below, extra, true, products, scratch,
                    scratch_floats, threads, "backward_bf16");
}

int dt_conv_winograd_backward_weight(const struct dt_conv_shape *s, const float *x, const float *dy,
                                     float *dw, float *db, float *scratch, size_t scratch_floats,
                                     int threads)
{
    return backward(s, x, false, dy, NULL, NULL, dw, db, NULL, false, NULL, false, false, scratch,
                    scratch_floats, threads, "backward_weight");
}

int dt_conv_winograd_backward_input(const struct dt_conv_shape *s, const float *dy, const float *w,
                                    float *dx, float *scratch, size_t scratch_floats, int threads)
{
    return backward(s, NULL, false, dy, NULL, w, NULL, NULL, dx, false, NULL, false, false, scratch,
                    scratch_floats, threads, "backward_input");
}

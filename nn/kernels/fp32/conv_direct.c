/* Direct stride-1 convolution kernels: forward, weight gradient, input gradient.
 *
 * Design. All three products are written as sums over taps t = (c, i, j) of a shifted input
 * plane times a scalar or a vector, computed on an "extended" pixel index: output pixel
 * (r, col) of an image whose (padded) input is wp wide gets q = r * wp + col. With that index
 * the input pixel of tap (i, j) is simply q + i * wp + j in the channel's plane, so one
 * contiguous 16-float load serves 16 output pixels even across row ends. The columns
 * col >= ow of the extended index are junk: the forward drops them at the store (masked stores,
 * one per output row a vector touches), the weight gradient multiplies them by zeros (dy is
 * copied into the extended layout with zero gaps). The index runs to Q = (oh-1)*wp + ow, which
 * keeps every load inside the input plane; the last vector is masked.
 *
 *  - forward: register block of KB <= 12 output channels x 32 pixels (24 zmm accumulators);
 *    per tap two pixel vectors are loaded and each channel's weight is broadcast (weights are
 *    repacked per call into [channel block][tap][KB] so the KB scalars of a tap are adjacent).
 *    Bias initialises the accumulators; ReLU is applied before the store.
 *  - input gradient: the same kernel run on dy padded by (kh-1-pad, kw-1-pad) with weights
 *    transposed to [c][k] and flipped; it needs stride 1, which is why only stride 1 is
 *    supported.
 *  - weight gradient: register block of KB <= 4 output channels x TB <= 6 taps, each
 *    accumulator a 16-lane vector of partial dot products over pixels; per 16 pixels KB dy
 *    loads and TB input loads feed KB*TB FMAs. The vectors persist per thread in scratch
 *    across that thread's samples and are summed over threads in thread order and then over
 *    lanes once at the end, so the result depends only on the thread count.
 *
 * Padding is done by copying a sample into a zero-bordered scratch plane (cheap next to the
 * O(taps) work per pixel) so the inner loops never test bounds.
 *
 * This file holds the shapes, the checks, the scratch layout, the threads and the choice of
 * build; the per-sample kernels are conv_direct.isa.c, built per instruction set (generic,
 * avx2, avx512) and picked with nn/kernels/isa.c, so sanitizer builds without -march=native
 * still exercise the AVX-512 one.
 */
#include "nn/kernels/fp32/conv_direct.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

#include <omp.h>

#include "nn/kernels/isa.h"
#include "nn/kernels/fp32/conv_direct_impl.h"
#include "nn/kernels/fp32/simd.h"
#include "util/err.h"

bool dt_conv_direct_allow_simd(bool allow)
{
    return dt_isa_allow_conv_vectors(allow);
}

bool dt_conv_direct_uses_simd(void)
{
    return dt_isa_build(DT_KERNEL_CONV_DIRECT) == DT_ISA_AVX512;
}

int dt_conv_simd_lanes(void)
{
    switch (dt_isa_build(DT_KERNEL_WINOGRAD)) {
    case DT_ISA_AVX512:
    case DT_ISA_AVX512BF16: /* the AVX-512 kernels plus VDPBF16PS */
        return 16;
    case DT_ISA_AVX2:
        return 8;
    default:
        return 0;
    }
}

/* ---- shape bookkeeping ---------------------------------------------------------------- */

int dt_conv_direct_out_h(const struct dt_conv_shape *s)
{
    return (s->h + 2 * s->pad - s->kh) / s->stride + 1;
}

int dt_conv_direct_out_w(const struct dt_conv_shape *s)
{
    return (s->w + 2 * s->pad - s->kw) / s->stride + 1;
}

bool dt_conv_direct_supported(const struct dt_conv_shape *s)
{
    if (!s || s->n < 1 || s->c < 1 || s->h < 1 || s->w < 1 || s->k < 1 || s->kh < 1 || s->kw < 1 ||
        s->stride != 1)
        return false;
    if (s->kh > DT_CONV_DIRECT_MAX_KERNEL || s->kw > DT_CONV_DIRECT_MAX_KERNEL)
        return false;
    if (s->pad < 0 || s->pad >= s->kh || s->pad >= s->kw)
        return false;
    if (s->h > INT_MAX / 4 || s->w > INT_MAX / 4)
        return false;
    int oh = dt_conv_direct_out_h(s), ow = dt_conv_direct_out_w(s);
    if (oh < 1 || ow < 1)
        return false;
    int ph = s->kh - 1 - s->pad, pw = s->kw - 1 - s->pad;
    return fits_int(s->n, s->c, s->h, s->w) && fits_int(s->n, s->k, oh, ow) &&
           fits_int(s->k, s->c, (long long)s->kh * s->kw, LANES) &&
           fits_int(1, s->c, s->h + 2LL * s->pad, s->w + 2LL * s->pad) &&
           fits_int(1, s->k, oh + 2LL * ph, ow + 2LL * pw);
}

static struct geom geom_of(const struct dt_conv_shape *s)
{
    struct geom g = {.n = s->n,
                     .c = s->c,
                     .h = s->h,
                     .w = s->w,
                     .k = s->k,
                     .kh = s->kh,
                     .kw = s->kw,
                     .pad = s->pad};
    g.oh = dt_conv_direct_out_h(s);
    g.ow = dt_conv_direct_out_w(s);
    g.hp = g.h + 2 * g.pad;
    g.wp = g.w + 2 * g.pad;
    g.taps = g.c * g.kh * g.kw;
    g.q = (g.oh - 1) * g.wp + g.ow;
    g.shared = round_lanes((size_t)g.k * g.taps);
    g.pad_floats = g.pad ? round_lanes((size_t)g.c * g.hp * g.wp) : 0;
    int ph = g.kh - 1 - g.pad, pw = g.kw - 1 - g.pad;
    size_t bin = (ph || pw) ? round_lanes((size_t)g.k * (g.oh + 2 * ph) * (g.ow + 2 * pw)) : 0;
    size_t bwt = g.pad_floats + (size_t)g.k * round_lanes((size_t)g.q) +
                 round_lanes((size_t)g.k * g.taps * LANES) + round_lanes((size_t)g.k);
    g.per_thread = bwt > bin ? bwt : bin;
    if (g.pad_floats > g.per_thread)
        g.per_thread = g.pad_floats;
    return g;
}

size_t dt_conv_direct_scratch_floats(const struct dt_conv_shape *s, int threads)
{
    if (!dt_conv_direct_supported(s) || threads < 1)
        return 0;
    struct geom g = geom_of(s);
    return g.shared + (size_t)threads * g.per_thread;
}

int dt_conv_check_call(const char *kernel, const char *what, const struct dt_conv_shape *s,
                       bool supported, const char *needs, int threads, size_t have, size_t need)
{
    if (!supported)
        return dt_fail(DT_EUSAGE,
                       "%s %s: unsupported shape n=%d c=%d h=%d w=%d k=%d kernel=%dx%d stride=%d "
                       "pad=%d (needs %s)",
                       kernel, what, s ? s->n : 0, s ? s->c : 0, s ? s->h : 0, s ? s->w : 0,
                       s ? s->k : 0, s ? s->kh : 0, s ? s->kw : 0, s ? s->stride : 0,
                       s ? s->pad : 0, needs);
    if (threads < 1)
        return dt_fail(DT_EUSAGE, "%s %s: threads must be >= 1, got %d", kernel, what, threads);
    if (have < need)
        return dt_fail(DT_EUSAGE, "%s %s: scratch has %zu floats, needs %zu for %d threads", kernel,
                       what, have, need, threads);
    return 0;
}

#define STR_(x) #x
#define STR(x)  STR_(x)

static int check_call(const struct dt_conv_shape *s, size_t have, int threads, const char *what)
{
    return dt_conv_check_call(
        "conv_direct", what, s, dt_conv_direct_supported(s),
        "stride 1, kernel <= " STR(DT_CONV_DIRECT_MAX_KERNEL) ", pad < kernel", threads, have,
        dt_conv_direct_scratch_floats(s, threads));
}

/* Copies ch planes of h x w into buf with a zero border of ph rows and pw columns; returns x
 * itself when there is no border. */
static const float *pad_planes(const float *x, int ch, int h, int w, int ph, int pw, float *buf)
{
    if (ph == 0 && pw == 0)
        return x;
    int hp = h + 2 * ph, wp = w + 2 * pw;
    memset(buf, 0, sizeof(float) * (size_t)ch * hp * wp);
    for (int c = 0; c < ch; c++)
        for (int r = 0; r < h; r++)
            memcpy(buf + ((size_t)c * hp + r + ph) * wp + pw, x + ((size_t)c * h + r) * w,
                   sizeof(float) * w);
    return buf;
}

/* Packs weights as [block][tap][kb] for blocks of kbs output channels (the last may be
 * smaller). The natural weights are [out][in][kh][kw]; with `transpose_flip` the operand is
 * instead w'[c][k][i][j] = w[k][c][kh-1-i][kw-1-j] (out = c, in = k), the input gradient's. */
static void pack_weights(const float *w, int k, int c, int kh, int kw, bool transpose_flip, int kbs,
                         float *wpk)
{
    int khw = kh * kw;
    int outs = transpose_flip ? c : k, ins = transpose_flip ? k : c;
    int taps = ins * khw;
    for (int o0 = 0; o0 < outs; o0 += kbs) {
        int kb = outs - o0 < kbs ? outs - o0 : kbs;
        float *blk = wpk + (size_t)o0 * taps;
        for (int t = 0; t < taps; t++) {
            int in = t / khw, r = t % khw;
            for (int b = 0; b < kb; b++) {
                int o = o0 + b;
                size_t src = transpose_flip ? ((size_t)in * c + o) * khw + (size_t)(khw - 1 - r)
                                            : (size_t)o * taps + t;
                blk[(size_t)t * kb + b] = w[src];
            }
        }
    }
}

/* One sample through the build isa.c chose for this call. */
static void conv_sample(enum dt_isa build, const struct plane_conv *p)
{
    switch (build) {
    case DT_ISA_AVX512:
        dt_conv_direct_sample_avx512(p);
        break;
    case DT_ISA_AVX2:
        dt_conv_direct_sample_avx2(p);
        break;
    default:
        dt_conv_direct_sample_generic(p);
        break;
    }
}

/* ---- public kernels ------------------------------------------------------------------- */

int dt_conv_direct_forward(const struct dt_conv_shape *s, const float *x, const float *w,
                           const float *b, float *y, int relu, float *scratch,
                           size_t scratch_floats, int threads)
{
    int rc = check_call(s, scratch_floats, threads, "forward");
    if (rc)
        return rc;
    struct geom g = geom_of(s);
    enum dt_isa build = dt_isa_build(DT_KERNEL_CONV_DIRECT);
    bool blocked = build == DT_ISA_AVX512;
    pack_weights(w, g.k, g.c, g.kh, g.kw, false, blocked ? block_size(g.k, FWD_MAX_KB) : 1,
                 scratch);
    float *thread_base = scratch + g.shared;
#pragma omp parallel num_threads(threads)
    {
        float *buf = thread_base + (size_t)omp_get_thread_num() * g.per_thread;
#pragma omp for schedule(static)
        for (int n = 0; n < g.n; n++) {
            struct plane_conv p = {
                .in = pad_planes(x + (size_t)n * g.c * g.h * g.w, g.c, g.h, g.w, g.pad, g.pad, buf),
                .ci = g.c,
                .hp = g.hp,
                .wp = g.wp,
                .kh = g.kh,
                .kw = g.kw,
                .wpk = scratch,
                .bias = b,
                .ko = g.k,
                .oh = g.oh,
                .ow = g.ow,
                .relu = relu,
                .out = y + (size_t)n * g.k * g.oh * g.ow};
            conv_sample(build, &p);
        }
    }
    return 0;
}

int dt_conv_direct_backward_input(const struct dt_conv_shape *s, const float *dy, const float *w,
                                  float *dx, float *scratch, size_t scratch_floats, int threads)
{
    int rc = check_call(s, scratch_floats, threads, "backward_input");
    if (rc)
        return rc;
    struct geom g = geom_of(s);
    enum dt_isa build = dt_isa_build(DT_KERNEL_CONV_DIRECT);
    bool blocked = build == DT_ISA_AVX512;
    pack_weights(w, g.k, g.c, g.kh, g.kw, true, blocked ? block_size(g.c, FWD_MAX_KB) : 1, scratch);
    int ph = g.kh - 1 - g.pad, pw = g.kw - 1 - g.pad;
    float *thread_base = scratch + g.shared;
#pragma omp parallel num_threads(threads)
    {
        float *buf = thread_base + (size_t)omp_get_thread_num() * g.per_thread;
#pragma omp for schedule(static)
        for (int n = 0; n < g.n; n++) {
            struct plane_conv p = {
                .in = pad_planes(dy + (size_t)n * g.k * g.oh * g.ow, g.k, g.oh, g.ow, ph, pw, buf),
                .ci = g.k,
                .hp = g.oh + 2 * ph,
                .wp = g.ow + 2 * pw,
                .kh = g.kh,
                .kw = g.kw,
                .wpk = scratch,
                .bias = NULL,
                .ko = g.c,
                .oh = g.h,
                .ow = g.w,
                .relu = 0,
                .out = dx + (size_t)n * g.c * g.h * g.w};
            conv_sample(build, &p);
        }
    }
    return 0;
}

/* Sum in 16 independent lanes, then the lanes in order: vectorisable without reassociating
 * (a single running float sum is one long dependency chain, slower than the whole gradient). */
static float sum_floats(const float *p, size_t n)
{
    float lane[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int l = 0; l < LANES; l++)
            lane[l] += p[i + l];
    for (; i < n; i++)
        lane[i % LANES] += p[i];
    float sum = 0.0f;
    for (int l = 0; l < LANES; l++)
        sum += lane[l];
    return sum;
}

/* dy[k][oh][ow] -> dye[k][q_end] in the extended layout, junk columns zero. */
static void extend_dy(const struct geom *g, const float *dy, float *dye)
{
    for (int k = 0; k < g->k; k++) {
        float *d = dye + k * round_lanes((size_t)g->q);
        const float *src = dy + (size_t)k * g->oh * g->ow;
        for (int r = 0; r < g->oh; r++) {
            memcpy(d + (size_t)r * g->wp, src + (size_t)r * g->ow, sizeof(float) * g->ow);
            if (r + 1 < g->oh)
                memset(d + (size_t)r * g->wp + g->ow, 0, sizeof(float) * (g->wp - g->ow));
        }
    }
}

/* Layout of one thread's weight-gradient scratch. */
struct wgt_scratch {
    float *pad, *dye, *acc, *db;
};

static struct wgt_scratch wgt_scratch_of(const struct geom *g, float *base)
{
    struct wgt_scratch w;
    w.pad = base;
    w.dye = w.pad + g->pad_floats;
    w.acc = w.dye + (size_t)g->k * round_lanes((size_t)g->q);
    w.db = w.acc + round_lanes((size_t)g->k * g->taps * LANES);
    return w;
}

int dt_conv_direct_backward_weight(const struct dt_conv_shape *s, const float *x, const float *dy,
                                   float *dw, float *db, float *scratch, size_t scratch_floats,
                                   int threads)
{
    int rc = check_call(s, scratch_floats, threads, "backward_weight");
    if (rc)
        return rc;
    struct geom g = geom_of(s);
    bool simd = dt_isa_build(DT_KERNEL_CONV_DIRECT_WEIGHT) == DT_ISA_AVX512;
    size_t nw = (size_t)g.k * g.taps, oplane = (size_t)g.oh * g.ow;
    float *thread_base = scratch + g.shared;
#pragma omp parallel num_threads(threads)
    {
        int tid = omp_get_thread_num(), team = omp_get_num_threads();
        struct wgt_scratch ws = wgt_scratch_of(&g, thread_base + (size_t)tid * g.per_thread);
        memset(ws.acc, 0, sizeof(float) * nw * (simd ? LANES : 1));
        memset(ws.db, 0, sizeof(float) * g.k);
        int n0 = (int)((long long)g.n * tid / team), n1 = (int)((long long)g.n * (tid + 1) / team);
        for (int n = n0; n < n1; n++) {
            const float *in =
                pad_planes(x + (size_t)n * g.c * g.h * g.w, g.c, g.h, g.w, g.pad, g.pad, ws.pad);
            const float *dyn = dy + (size_t)n * g.k * oplane;
            for (int k = 0; db && k < g.k; k++)
                ws.db[k] += sum_floats(dyn + k * oplane, oplane);
            if (simd) {
                extend_dy(&g, dyn, ws.dye);
                dt_conv_direct_weight_sample_avx512(&g, in, ws.dye, ws.acc);
            } else {
                dt_conv_direct_weight_sample_generic(&g, in, dyn, ws.acc);
            }
        }
#pragma omp barrier
        const float *acc0 = wgt_scratch_of(&g, thread_base).acc;
#pragma omp for schedule(static)
        for (size_t i = 0; i < nw; i++) {
            if (simd) {
                dt_conv_direct_weight_reduce_avx512(acc0, g.per_thread, team, i, dw);
            } else {
                float sum = 0.0f;
                for (int t = 0; t < team; t++)
                    sum += acc0[t * g.per_thread + i];
                dw[i] += sum;
            }
        }
        if (db) {
#pragma omp for schedule(static)
            for (int k = 0; k < g.k; k++) {
                float sum = 0.0f;
                for (int t = 0; t < team; t++)
                    sum += wgt_scratch_of(&g, thread_base + t * g.per_thread).db[k];
                db[k] += sum;
            }
        }
    }
    return 0;
}

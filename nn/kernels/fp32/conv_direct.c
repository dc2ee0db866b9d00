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
 * O(taps) work per pixel) so the inner loops never test bounds. The AVX-512 code is compiled
 * with a target attribute and chosen at run time, so sanitizer builds without -march=native
 * still exercise it; the portable path is plain loops that the compiler may vectorise.
 */
#include "nn/conv_direct.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

#include <omp.h>

#include "nn/isa.h"
#include "nn/simd.h"
#include "util/err.h"

enum {
    FWD_MAX_KB = 12, /* forward channels per register block (x 2 pixel vectors) */
    WGT_MAX_KB = 4,  /* weight-gradient channels per block */
    WGT_MAX_TB = 6,  /* weight-gradient taps per block */
    MAX_SEGS = 20,   /* output rows one 16-pixel vector can touch, wp >= 1: <= 16 + 2 */
};

static bool simd_allowed = true;

bool dt_conv_direct_allow_simd(bool allow)
{
    bool was = simd_allowed;
    simd_allowed = allow;
    return was;
}

bool dt_conv_direct_uses_simd(void)
{
#if DT_HAVE_AVX512
    return simd_allowed && dt_isa_get() == DT_ISA_AVX512;
#else
    return false;
#endif
}

int dt_conv_simd_lanes(void)
{
#if DT_HAVE_AVX512
    if (simd_allowed && dt_isa_get() == DT_ISA_AVX512)
        return 16;
    if (simd_allowed && dt_isa_get() == DT_ISA_AVX2)
        return 8;
#endif
    return 0;
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

/* Per-call geometry derived once from the public shape. */
struct geom {
    int n, c, h, w, k, kh, kw, pad;
    int oh, ow, hp, wp; /* output size; padded input size */
    int taps;           /* c * kh * kw */
    int q;              /* extended pixel count (oh-1)*wp + ow */
    size_t shared;      /* floats of packed weights at the start of scratch */
    size_t pad_floats;  /* padded input copy, 0 when pad == 0 */
    size_t per_thread;  /* floats of scratch per thread */
};

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

/* Output-channel block size: the fewest blocks of at most `max`, balanced. */
static int block_size(int total, int max)
{
    int blocks = (total + max - 1) / max;
    return (total + blocks - 1) / blocks;
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

/* One sample's forward-style convolution of a padded input (the forward and the input
 * gradient both reduce to this). */
struct plane_conv {
    const float *in; /* [ci][hp][wp] */
    int ci, hp, wp, kh, kw;
    const float *wpk; /* packed with block_size(ko, FWD_MAX_KB), or 1 for the portable path */
    const float *bias;
    int ko, oh, ow, relu;
    float *out; /* [ko][oh][ow] */
};

static inline __attribute__((always_inline)) void conv_sample_loops(const struct plane_conv *p)
{
    size_t plane = (size_t)p->hp * p->wp, oplane = (size_t)p->oh * p->ow;
    int taps = p->ci * p->kh * p->kw;
    for (int o = 0; o < p->ko; o++) {
        float *y = p->out + o * oplane;
        float b = p->bias ? p->bias[o] : 0.0f;
        for (size_t i = 0; i < oplane; i++)
            y[i] = b;
        const float *wt = p->wpk + (size_t)o * taps;
        for (int c = 0; c < p->ci; c++)
            for (int i = 0; i < p->kh; i++)
                for (int j = 0; j < p->kw; j++) {
                    float wv = *wt++;
                    for (int r = 0; r < p->oh; r++) {
                        const float *xr = p->in + c * plane + (size_t)(r + i) * p->wp + j;
                        float *yr = y + (size_t)r * p->ow;
                        for (int col = 0; col < p->ow; col++)
                            yr[col] += wv * xr[col];
                    }
                }
        if (p->relu)
            for (size_t i = 0; i < oplane; i++)
                y[i] = y[i] > 0.0f ? y[i] : 0.0f;
    }
}

static void conv_sample_portable(const struct plane_conv *p)
{
    conv_sample_loops(p);
}

#if DT_HAVE_AVX512
/* The AVX2 path: the same loops vectorised 8 wide (the row loop is a plain axpy). Results
 * match the generic path exactly: -std=c11 keeps mul and add separate (no contraction). */
static __attribute__((target("avx2,fma"))) void conv_sample_avx2(const struct plane_conv *p)
{
    conv_sample_loops(p);
}
#else
static void conv_sample_avx2(const struct plane_conv *p)
{
    conv_sample_loops(p);
}
#endif

/* Sums, for each weight, one sample's dy * x over pixels into part[k][taps]. */
static void weight_sample_portable(const struct geom *g, const float *in, const float *dy,
                                   float *part)
{
    size_t plane = (size_t)g->hp * g->wp, oplane = (size_t)g->oh * g->ow;
    for (int k = 0; k < g->k; k++)
        for (int t = 0; t < g->taps; t++) {
            int c = t / (g->kh * g->kw), r = t % (g->kh * g->kw);
            const float *x = in + c * plane + (size_t)(r / g->kw) * g->wp + r % g->kw;
            const float *d = dy + k * oplane;
            float sum = 0.0f;
            for (int row = 0; row < g->oh; row++)
                for (int col = 0; col < g->ow; col++)
                    sum += d[row * g->ow + col] * x[(size_t)row * g->wp + col];
            part[(size_t)k * g->taps + t] += sum;
        }
}

#if DT_HAVE_AVX512

static uint16_t lane_mask(int valid)
{
    if (valid <= 0)
        return 0;
    return valid >= LANES ? 0xffff : (uint16_t)((1u << valid) - 1);
}

/* Where the `valid` lanes of the vector at extended index qs go in the [oh][ow] output: one
 * (offset, mask) per output row it touches, junk columns masked off. */
struct seg {
    int off;
    uint16_t mask;
};

static int row_segments(int qs, int valid, int wp, int ow, struct seg *seg)
{
    int n = 0;
    valid = valid < LANES ? valid : LANES;
    for (int r = qs / wp; valid > 0 && r * wp < qs + valid; r++) {
        int lo = r * wp - qs, hi = r * wp + ow - qs;
        lo = lo < 0 ? 0 : lo;
        hi = hi > valid ? valid : hi;
        if (hi > lo) {
            seg[n].off = qs - r * (wp - ow);
            seg[n].mask = (uint16_t)(lane_mask(hi) & ~lane_mask(lo));
            n++;
        }
    }
    return n;
}

struct fwd_tile_at {
    int q;
    uint16_t m0, m1;
    int n0, n1;
    struct seg s0[MAX_SEGS], s1[MAX_SEGS];
};

INLINE SIMD void fwd_tile(const struct plane_conv *p, const float *wblk, const float *bias,
                          float *out, const struct fwd_tile_at *at, const int kb)
{
    __m512 a0[FWD_MAX_KB], a1[FWD_MAX_KB];
#pragma GCC unroll 12
    for (int b = 0; b < kb; b++) {
        a0[b] = bias ? _mm512_set1_ps(bias[b]) : _mm512_setzero_ps();
        a1[b] = a0[b];
    }
    size_t plane = (size_t)p->hp * p->wp;
    const float *wt = wblk;
    for (int c = 0; c < p->ci; c++)
        for (int i = 0; i < p->kh; i++) {
            const float *row = p->in + c * plane + (size_t)i * p->wp + at->q;
            for (int j = 0; j < p->kw; j++) {
                __m512 x0 = _mm512_maskz_loadu_ps(at->m0, row + j);
                __m512 x1 = _mm512_maskz_loadu_ps(at->m1, row + j + LANES);
#pragma GCC unroll 12
                for (int b = 0; b < kb; b++) {
                    __m512 wv = _mm512_set1_ps(wt[b]);
                    a0[b] = _mm512_fmadd_ps(wv, x0, a0[b]);
                    a1[b] = _mm512_fmadd_ps(wv, x1, a1[b]);
                }
                wt += kb;
            }
        }
    size_t oplane = (size_t)p->oh * p->ow;
#pragma GCC unroll 12
    for (int b = 0; b < kb; b++) {
        if (p->relu) {
            a0[b] = _mm512_max_ps(a0[b], _mm512_setzero_ps());
            a1[b] = _mm512_max_ps(a1[b], _mm512_setzero_ps());
        }
        float *o = out + b * oplane;
        for (int s = 0; s < at->n0; s++)
            _mm512_mask_storeu_ps(o + at->s0[s].off, at->s0[s].mask, a0[b]);
        for (int s = 0; s < at->n1; s++)
            _mm512_mask_storeu_ps(o + at->s1[s].off, at->s1[s].mask, a1[b]);
    }
}

static SIMD void fwd_tile_any(const struct plane_conv *p, const float *wblk, const float *bias,
                              float *out, const struct fwd_tile_at *at, int kb)
{
    switch (kb) {
#define FWD_CASE(n)                                                                                \
    case n:                                                                                        \
        fwd_tile(p, wblk, bias, out, at, n);                                                       \
        break;
        FWD_CASE(1)
        FWD_CASE(2)
        FWD_CASE(3)
        FWD_CASE(4)
        FWD_CASE(5)
        FWD_CASE(6)
        FWD_CASE(7)
        FWD_CASE(8)
        FWD_CASE(9)
        FWD_CASE(10)
        FWD_CASE(11)
        FWD_CASE(12)
#undef FWD_CASE
    default:
        break;
    }
}

static void conv_sample_simd(const struct plane_conv *p)
{
    int q_end = (p->oh - 1) * p->wp + p->ow;
    int taps = p->ci * p->kh * p->kw;
    int kbs = block_size(p->ko, FWD_MAX_KB);
    size_t oplane = (size_t)p->oh * p->ow;
    struct fwd_tile_at at;
    for (int q = 0; q < q_end; q += 2 * LANES) {
        at.q = q;
        at.m0 = lane_mask(q_end - q);
        at.m1 = lane_mask(q_end - q - LANES);
        at.n0 = row_segments(q, q_end - q, p->wp, p->ow, at.s0);
        at.n1 = row_segments(q + LANES, q_end - q - LANES, p->wp, p->ow, at.s1);
        for (int o0 = 0; o0 < p->ko; o0 += kbs) {
            int kb = p->ko - o0 < kbs ? p->ko - o0 : kbs;
            fwd_tile_any(p, p->wpk + (size_t)o0 * taps, p->bias ? p->bias + o0 : NULL,
                         p->out + o0 * oplane, &at, kb);
        }
    }
}

/* acc[b][t] (vectors at pv + b*pv_stride + t*16) += sum over the extended pixels of
 * dye[b][q] * x[off[t] + q]. */
INLINE SIMD void wgt_tile(const float *dye, size_t dstride, int q_end, const float *in,
                          const int *off, float *pv, size_t pv_stride, const int kb, const int tb)
{
    __m512 acc[WGT_MAX_KB][WGT_MAX_TB];
    const float *xp[WGT_MAX_TB];
#pragma GCC unroll 6
    for (int t = 0; t < tb; t++)
        xp[t] = in + off[t];
#pragma GCC unroll 4
    for (int b = 0; b < kb; b++)
#pragma GCC unroll 6
        for (int t = 0; t < tb; t++)
            acc[b][t] = _mm512_loadu_ps(pv + b * pv_stride + t * LANES);
    int q = 0;
    for (; q + LANES <= q_end; q += LANES) {
        __m512 d[WGT_MAX_KB];
#pragma GCC unroll 4
        for (int b = 0; b < kb; b++)
            d[b] = _mm512_loadu_ps(dye + b * dstride + q);
#pragma GCC unroll 6
        for (int t = 0; t < tb; t++) {
            __m512 x = _mm512_loadu_ps(xp[t] + q);
            /* keep x in a register: gcc otherwise folds this load into each of the kb FMAs,
             * quadrupling the (mostly cache-line-splitting) loads and halving the speed */
            __asm__("" : "+v"(x));
#pragma GCC unroll 4
            for (int b = 0; b < kb; b++)
                acc[b][t] = _mm512_fmadd_ps(d[b], x, acc[b][t]);
        }
    }
    if (q < q_end) {
        __mmask16 m = lane_mask(q_end - q);
        __m512 d[WGT_MAX_KB];
#pragma GCC unroll 4
        for (int b = 0; b < kb; b++)
            d[b] = _mm512_maskz_loadu_ps(m, dye + b * dstride + q);
#pragma GCC unroll 6
        for (int t = 0; t < tb; t++) {
            __m512 x = _mm512_maskz_loadu_ps(m, xp[t] + q);
#pragma GCC unroll 4
            for (int b = 0; b < kb; b++)
                acc[b][t] = _mm512_fmadd_ps(d[b], x, acc[b][t]);
        }
    }
#pragma GCC unroll 4
    for (int b = 0; b < kb; b++)
#pragma GCC unroll 6
        for (int t = 0; t < tb; t++)
            _mm512_storeu_ps(pv + b * pv_stride + t * LANES, acc[b][t]);
}

static SIMD void wgt_tile_any(const float *dye, size_t dstride, int q_end, const float *in,
                              const int *off, float *pv, size_t pv_stride, int kb, int tb)
{
    switch ((kb - 1) * WGT_MAX_TB + tb - 1) {
#define WGT_CASE(b, t)                                                                             \
    case ((b)-1) * WGT_MAX_TB + (t)-1:                                                             \
        wgt_tile(dye, dstride, q_end, in, off, pv, pv_stride, b, t);                               \
        break;
#define WGT_ROW(b)                                                                                 \
    WGT_CASE(b, 1) WGT_CASE(b, 2) WGT_CASE(b, 3) WGT_CASE(b, 4) WGT_CASE(b, 5) WGT_CASE(b, 6)
        WGT_ROW(1)
        WGT_ROW(2)
        WGT_ROW(3)
        WGT_ROW(4)
#undef WGT_ROW
#undef WGT_CASE
    default:
        break;
    }
}

/* One sample's weight-gradient contribution; dye is dy in the extended layout [k][q_end]. */
static void weight_sample_simd(const struct geom *g, const float *in, const float *dye, float *pv)
{
    size_t plane = (size_t)g->hp * g->wp;
    int khw = g->kh * g->kw;
    int kbs = block_size(g->k, WGT_MAX_KB), tbs = block_size(g->taps, WGT_MAX_TB);
    size_t pv_stride = (size_t)g->taps * LANES;
    size_t dstride = round_lanes((size_t)g->q);
    for (int t0 = 0; t0 < g->taps; t0 += tbs) {
        int tb = g->taps - t0 < tbs ? g->taps - t0 : tbs;
        int off[WGT_MAX_TB];
        for (int t = 0; t < tb; t++) {
            int c = (t0 + t) / khw, r = (t0 + t) % khw;
            off[t] = (int)(c * plane) + (r / g->kw) * g->wp + r % g->kw;
        }
        for (int k0 = 0; k0 < g->k; k0 += kbs) {
            int kb = g->k - k0 < kbs ? g->k - k0 : kbs;
            wgt_tile_any(dye + (size_t)k0 * dstride, dstride, g->q, in, off,
                         pv + (size_t)k0 * pv_stride + (size_t)t0 * LANES, pv_stride, kb, tb);
        }
    }
}

/* dw[i] += lane sum of the threads' vectors, added in thread order. */
static SIMD void reduce_lanes_simd(const float *pv0, size_t thread_stride, int threads, size_t i,
                                   float *dw)
{
    __m512 v = _mm512_loadu_ps(pv0 + i * LANES);
    for (int t = 1; t < threads; t++)
        v = _mm512_add_ps(v, _mm512_loadu_ps(pv0 + t * thread_stride + i * LANES));
    dw[i] += _mm512_reduce_add_ps(v);
}

#else /* !DT_HAVE_AVX512: never called, uses_simd() is false */

static void conv_sample_simd(const struct plane_conv *p)
{
    conv_sample_portable(p);
}

static void weight_sample_simd(const struct geom *g, const float *in, const float *dye, float *pv)
{
    (void)g, (void)in, (void)dye, (void)pv;
}

static void reduce_lanes_simd(const float *pv0, size_t thread_stride, int threads, size_t i,
                              float *dw)
{
    (void)pv0, (void)thread_stride, (void)threads, (void)i, (void)dw;
}

#endif

/* ---- public kernels ------------------------------------------------------------------- */

int dt_conv_direct_forward(const struct dt_conv_shape *s, const float *x, const float *w,
                           const float *b, float *y, int relu, float *scratch,
                           size_t scratch_floats, int threads)
{
    int rc = check_call(s, scratch_floats, threads, "forward");
    if (rc)
        return rc;
    struct geom g = geom_of(s);
    bool simd = dt_conv_direct_uses_simd(), avx2 = !simd && dt_isa_get() == DT_ISA_AVX2;
    pack_weights(w, g.k, g.c, g.kh, g.kw, false, simd ? block_size(g.k, FWD_MAX_KB) : 1, scratch);
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
            if (simd)
                conv_sample_simd(&p);
            else if (avx2)
                conv_sample_avx2(&p);
            else
                conv_sample_portable(&p);
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
    bool simd = dt_conv_direct_uses_simd(), avx2 = !simd && dt_isa_get() == DT_ISA_AVX2;
    pack_weights(w, g.k, g.c, g.kh, g.kw, true, simd ? block_size(g.c, FWD_MAX_KB) : 1, scratch);
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
            if (simd)
                conv_sample_simd(&p);
            else if (avx2)
                conv_sample_avx2(&p);
            else
                conv_sample_portable(&p);
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
    bool simd = dt_conv_direct_uses_simd();
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
                weight_sample_simd(&g, in, ws.dye, ws.acc);
            } else {
                weight_sample_portable(&g, in, dyn, ws.acc);
            }
        }
#pragma omp barrier
        const float *acc0 = wgt_scratch_of(&g, thread_base).acc;
#pragma omp for schedule(static)
        for (size_t i = 0; i < nw; i++) {
            if (simd) {
                reduce_lanes_simd(acc0, g.per_thread, team, i, dw);
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

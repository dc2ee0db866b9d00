/* The direct convolution's per-sample kernels (conv_direct.c explains the method), built for
 * generic, avx2 and avx512 with those ISAs' flags (Makefile):
 *  - generic: plain loops the compiler may vectorise (x86-64-v2: 4 lanes);
 *  - avx2: the same loops compiled for AVX2 (8 lanes; the row loop is a plain axpy). Results
 *    match the generic build exactly: -std=c11 keeps mul and add separate (no contraction).
 *    Its weight gradient is the generic build's (nn/kernels/isa.c);
 *  - avx512: the register-blocked intrinsics kernels. */
#include <stdint.h>
#include <string.h>

#include "nn/kernels/fp32/conv_direct_impl.h"
#include "nn/kernels/fp32/simd.h"
#include "nn/kernels/isa_fn.h"

#if defined(DT_BUILD_GENERIC) || defined(DT_BUILD_AVX2)

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

void DT_ISA_FN(dt_conv_direct_sample)(const struct plane_conv *p)
{
    conv_sample_loops(p);
}

#endif

#if defined(DT_BUILD_GENERIC)
/* Sums, for each weight, one sample's dy * x over pixels into part[k][taps]. */
void DT_ISA_FN(dt_conv_direct_weight_sample)(const struct geom *g, const float *in, const float *dy,
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

#elif defined(DT_BUILD_AVX512)

#include <immintrin.h>

static uint16_t DT_ISA_FN(lane_mask)(int valid)
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

static int DT_ISA_FN(row_segments)(int qs, int valid, int wp, int ow, struct seg *seg)
{
    int n = 0;
    valid = valid < LANES ? valid : LANES;
    for (int r = qs / wp; valid > 0 && r * wp < qs + valid; r++) {
        int lo = r * wp - qs, hi = r * wp + ow - qs;
        lo = lo < 0 ? 0 : lo;
        hi = hi > valid ? valid : hi;
        if (hi > lo) {
            seg[n].off = qs - r * (wp - ow);
            seg[n].mask = (uint16_t)(DT_ISA_FN(lane_mask)(hi) & ~DT_ISA_FN(lane_mask)(lo));
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

INLINE void fwd_tile(const struct plane_conv *p, const float *wblk, const float *bias, float *out,
                     const struct fwd_tile_at *at, const int kb)
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

static void DT_ISA_FN(fwd_tile_any)(const struct plane_conv *p, const float *wblk,
                                    const float *bias, float *out, const struct fwd_tile_at *at,
                                    int kb)
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

void DT_ISA_FN(dt_conv_direct_sample)(const struct plane_conv *p)
{
    int q_end = (p->oh - 1) * p->wp + p->ow;
    int taps = p->ci * p->kh * p->kw;
    int kbs = block_size(p->ko, FWD_MAX_KB);
    size_t oplane = (size_t)p->oh * p->ow;
    struct fwd_tile_at at;
    for (int q = 0; q < q_end; q += 2 * LANES) {
        at.q = q;
        at.m0 = DT_ISA_FN(lane_mask)(q_end - q);
        at.m1 = DT_ISA_FN(lane_mask)(q_end - q - LANES);
        at.n0 = DT_ISA_FN(row_segments)(q, q_end - q, p->wp, p->ow, at.s0);
        at.n1 = DT_ISA_FN(row_segments)(q + LANES, q_end - q - LANES, p->wp, p->ow, at.s1);
        for (int o0 = 0; o0 < p->ko; o0 += kbs) {
            int kb = p->ko - o0 < kbs ? p->ko - o0 : kbs;
            DT_ISA_FN(fwd_tile_any)
            (p, p->wpk + (size_t)o0 * taps, p->bias ? p->bias + o0 : NULL, p->out + o0 * oplane,
             &at, kb);
        }
    }
}

/* acc[b][t] (vectors at pv + b*pv_stride + t*16) += sum over the extended pixels of
 * dye[b][q] * x[off[t] + q]. */
INLINE void wgt_tile(const float *dye, size_t dstride, int q_end, const float *in, const int *off,
                     float *pv, size_t pv_stride, const int kb, const int tb)
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
        __mmask16 m = DT_ISA_FN(lane_mask)(q_end - q);
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

static void DT_ISA_FN(wgt_tile_any)(const float *dye, size_t dstride, int q_end, const float *in,
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
void DT_ISA_FN(dt_conv_direct_weight_sample)(const struct geom *g, const float *in,
                                             const float *dye, float *pv)
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
            DT_ISA_FN(wgt_tile_any)
            (dye + (size_t)k0 * dstride, dstride, g->q, in, off,
             pv + (size_t)k0 * pv_stride + (size_t)t0 * LANES, pv_stride, kb, tb);
        }
    }
}

/* dw[i] += lane sum of the threads' vectors, added in thread order. */
void DT_ISA_FN(dt_conv_direct_weight_reduce)(const float *pv0, size_t thread_stride, int threads,
                                             size_t i, float *dw)
{
    __m512 v = _mm512_loadu_ps(pv0 + i * LANES);
    for (int t = 1; t < threads; t++)
        v = _mm512_add_ps(v, _mm512_loadu_ps(pv0 + t * thread_stride + i * LANES));
    dw[i] += _mm512_reduce_add_ps(v);
}

#endif

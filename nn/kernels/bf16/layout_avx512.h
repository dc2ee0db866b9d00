/* Helpers of the AVX-512 layout passes (conv_bf16_layout.isa.c, conv_s2_bf16_layout.isa.c):
 * lane masks for row tails, bf16.h's rounding in integer lanes, loads of fp32 or bf16
 * activations and the compaction of a padded-width output both convs share. Include only from a
 * build with AVX-512 F/BW/VL. */
#ifndef DT_NN_KERNELS_BF16_LAYOUT_AVX512_H
#define DT_NN_KERNELS_BF16_LAYOUT_AVX512_H

#include <immintrin.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nn/kernels/fp32/bn_grad.h"
#include "util/bf16.h"

/* The first n of 16 lanes: none for n <= 0, all for n >= 16. */
static inline __mmask16 dt_lanes(int n)
{
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* 16 floats rounded to bf16 as dt_bf16_from_f32 does (u + 0x7fff + lsb, a NaN kept quiet),
 * each in the top half of its 32-bit lane (the bottom half zero). Not VCVTNE2PS2BF16: it
 * flushes denormal inputs to zero. */
static inline __m512i dt_round_high(__m512 v)
{
    __m512i u = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                            _mm512_set1_epi32(0x7f800000));
    r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(u, _mm512_set1_epi32(0x00400000)));
    return _mm512_and_si512(r, _mm512_set1_epi32((int)0xffff0000u));
}

/* v rounded to bf16, as fp32 values (dt_bf16_round). */
static inline __m512 dt_rounded(__m512 v)
{
    return _mm512_castsi512_ps(dt_round_high(v));
}

/* The lanes m of 16 elements of an activation from element i, as fp32: x stored as fp32, or
 * (x_bf16) as bf16, widened exactly. */
static inline __m512 dt_load_act(const void *x, bool x_bf16, size_t i, __mmask16 m)
{
    if (!x_bf16)
        return _mm512_maskz_loadu_ps(m, (const float *)x + i);
    __m256i h = _mm256_maskz_loadu_epi16(m, (const dt_bf16 *)x + i);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* The lanes m of 16 elements of an activation from element i rounded to bf16, each in the top
 * half of its lane (dt_round_high's form): a bf16 x needs no rounding. */
static inline __m512i dt_load_act_high(const void *x, bool x_bf16, size_t i, __mmask16 m)
{
    if (!x_bf16)
        return dt_round_high(_mm512_maskz_loadu_ps(m, (const float *)x + i));
    __m256i h = _mm256_maskz_loadu_epi16(m, (const dt_bf16 *)x + i);
    return _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16);
}

/* The lanes m of h, bf16 values in the top halves of the lanes (dt_round_high's form), stored
 * as 16-bit elements at dst. */
static inline void dt_store_high(dt_bf16 *dst, __mmask16 m, __m512i h)
{
    _mm256_mask_storeu_epi16(dst, m, _mm512_cvtepi32_epi16(_mm512_srli_epi32(h, 16)));
}

/* The lanes m of v rounded to bf16 and stored as 16-bit elements at dst. */
static inline void dt_store_bf16(dt_bf16 *dst, __mmask16 m, __m512 v)
{
    dt_store_high(dst, m, dt_round_high(v));
}

/* Planes smaller than this are not asked for ahead: a few lines each, the hardware has the
 * next ones in flight already (the ConvNet's 14 x 14 planes: its bf16 step 2-5 % slower with
 * the prefetches, alternated runs). */
#define DT_PREFETCH_PLANE_BYTES 1024

/* The n elements of an activation from element i (fp32, or bf16 when x_bf16; planes of `plane`
 * elements) asked for into L1 ahead of their use. The layout passes read a sample's channel
 * planes row by row, each plane its own stream, and a plane is at most a 4 KB page here
 * (ResNet-20: 32 x 32 fp32), at which the hardware prefetcher stops and starts over: so each
 * pass asks for the rows it reads next (the same row of the next channels, or two rows on)
 * while it works on this one. A prefetch of an address past an array (the last sample's next)
 * does not fault. ResNet-20 bf16 step 118.5 -> 113.3 ms at 1 x 1 (medians of 4 alternated
 * pairs, Xeon with AMX, one thread); its layers' times 2-6 % less at 1 x 2 and 2 x 1. */
static inline void dt_prefetch_act(const void *x, bool x_bf16, size_t i, size_t n, size_t plane)
{
    size_t e = x_bf16 ? 2 : 4;
    if (plane * e < DT_PREFETCH_PLANE_BYTES)
        return;
    uintptr_t at = (uintptr_t)x + i * e, end = at + n * e;
    for (at &= ~(uintptr_t)63; at < end; at += 64) /* each line the elements touch */
        _mm_prefetch((const char *)at, _MM_HINT_T0);
}

/* The same row (n elements from element r) of the next channel pair's two planes: what a pass
 * over channel pairs reads after this pair's row. */
static inline void dt_prefetch_next_pair(const void *x, bool x_bf16, size_t r, size_t n,
                                         size_t plane)
{
    dt_prefetch_act(x, x_bf16, r + 2 * plane, n, plane);
    dt_prefetch_act(x, x_bf16, r + 3 * plane, n, plane);
}

/* What a compaction does to each row (conv_bf16_layout.isa.c, conv_s2_bf16_layout.isa.c). */
struct dt_compact_rows {
    int k, oh, ow; /* y is [k][oh][ow] */
    size_t qpad;   /* yq's channel planes, this many floats apart */
    int qrow;      /* yq's rows, this many floats apart */
    bool relu;
    /* fp32 stores only: rows whose whole 64-byte vectors lie aligned are written with
     * non-temporal stores (a batch-wide output is not read again before the whole batch is
     * done, and a plain store first reads each line for ownership: a third more memory
     * traffic; the compaction's stores were two thirds of its time, ResNet-20 bf16, perf) */
    bool stream;
};

/* y [k][oh][ow] = yq's rows + b[k] (b may be NULL), then the relu when asked, stored as `store`
 * says (bf16.h); inline where `store` is a constant, so that each store is its own loop. */
static inline __attribute__((always_inline)) void dt_compact_rows(const struct dt_compact_rows *r,
                                                                  const float *yq, const float *b,
                                                                  enum dt_bf16_store store, void *y)
{
    __m512 zero = _mm512_setzero_ps();
    for (int k = 0; k < r->k; k++) {
        __m512 bias = _mm512_set1_ps(b ? b[k] : 0.0f);
        for (int oh = 0; oh < r->oh; oh++) {
            const float *src = yq + (size_t)k * r->qpad + (size_t)oh * r->qrow;
            size_t at = ((size_t)k * r->oh + oh) * r->ow;
            float *dst = (float *)y + at;
            bool nt =
                store != DT_STORE_BF16 && r->stream && r->ow % 16 == 0 && (uintptr_t)dst % 64 == 0;
            for (int ow = 0; ow < r->ow; ow += 16) {
                __mmask16 m = dt_lanes(r->ow - ow);
                __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, src + ow), bias);
                if (r->relu) /* v > 0 ? v : 0, MAXPS's order: NaN and -0 give +0 */
                    v = _mm512_max_ps(v, zero);
                if (store == DT_STORE_BF16)
                    dt_store_bf16((dt_bf16 *)y + at + ow, m, v);
                else if (store == DT_STORE_ROUNDED)
                    v = dt_rounded(v);
                if (store != DT_STORE_BF16 && nt)
                    _mm512_stream_ps(dst + ow, v);
                else if (store != DT_STORE_BF16)
                    _mm512_mask_storeu_ps(dst + ow, m, v);
            }
        }
    }
    _mm_sfence();
}

/* dt_compact_rows with `store` a constant in each call. */
static inline void dt_compact_rows_as(const struct dt_compact_rows *r, const float *yq,
                                      const float *b, enum dt_bf16_store store, void *y)
{
    if (store == DT_STORE_BF16)
        dt_compact_rows(r, yq, b, DT_STORE_BF16, y);
    else if (store == DT_STORE_ROUNDED)
        dt_compact_rows(r, yq, b, DT_STORE_ROUNDED, y);
    else
        dt_compact_rows(r, yq, b, DT_STORE_F32, y);
}

/* 16 elements of one channel of the batchnorm above's input gradient, from element i of the
 * sample's dy and the batchnorm's input (bn_grad.h's formula: the same single fp32
 * operations in the same order), rounded, in the top halves of the lanes. */
static inline __m512i dt_bn_dy_high(const struct dt_bn_grad *bn, bool x_bf16, const float *dy,
                                    int k, size_t i, __mmask16 m)
{
    __m512 x = dt_load_act(x_bf16 ? (const void *)bn->xh : (const void *)bn->x, x_bf16, i, m);
    __m512 xhat =
        _mm512_mul_ps(_mm512_sub_ps(x, _mm512_set1_ps(bn->mean[k])), _mm512_set1_ps(bn->invstd[k]));
    __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, dy + i), _mm512_set1_ps(bn->mean_dy[k]));
    d = _mm512_sub_ps(d, _mm512_mul_ps(xhat, _mm512_set1_ps(bn->mean_dy_xhat[k])));
    return dt_round_high(_mm512_mul_ps(_mm512_set1_ps(bn->k[k]), d));
}

/* The bn_dy_image passes' step (conv_bf16_layout.isa.c, conv_s2_bf16_layout.isa.c): 16
 * positions of channel k's and, when second, channel k + 1's (a plane on) values, each stored
 * as its dY row (row, row + qrow); returned as the pair's interleaved lanes (k low, k + 1 high)
 * for the pass's pair-plane store. */
static inline __m512i dt_bn_dy_pair(const struct dt_bn_grad *bn, bool x_bf16, const float *dy,
                                    int k, bool second, size_t i, size_t plane, __mmask16 m,
                                    dt_bf16 *row, size_t qrow)
{
    __m512i a = dt_bn_dy_high(bn, x_bf16, dy, k, i, m);
    __m512i b =
        second ? dt_bn_dy_high(bn, x_bf16, dy, k + 1, i + plane, m) : _mm512_setzero_si512();
    dt_store_high(row, m, a);
    if (second)
        dt_store_high(row + qrow, m, b);
    return _mm512_or_si512(_mm512_srli_epi32(a, 16), b);
}

#endif

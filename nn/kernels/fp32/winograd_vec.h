/* The vector vocabulary of nn/kernels/fp32/conv_winograd.isa.c, one block per width: the
 * AVX-512F build (and the avx512bf16 one, which adds VDPBF16PS for the bf16 products) works at
 * 16 lanes, the AVX2 + FMA build (for the CPUs without AVX-512: Zen
 * 2/3, Broadwell to Skylake client parts) at 8. Same layout and the same order of every sum in
 * both, so the same bits: tests/unit/test_conv_winograd.c compares the two. Each build is
 * compiled with its ISA's flags (Makefile ISA_FLAGS_<isa>), so no target attributes here. */
#ifndef DT_NN_KERNELS_FP32_WINOGRAD_VEC_H
#define DT_NN_KERNELS_FP32_WINOGRAD_VEC_H

#include <immintrin.h>

#include "nn/kernels/fp32/simd.h"

#if defined(DT_BUILD_AVX512) || defined(DT_BUILD_AVX512BF16)

#define W            16
#define VEC          __m512
#define VECI         __m512i
#define LOAD         _mm512_loadu_ps
#define STORE        _mm512_storeu_ps
#define ZERO         _mm512_setzero_ps
#define SET1         _mm512_set1_ps
#define ADD          _mm512_add_ps
#define SUB          _mm512_sub_ps
#define MUL          _mm512_mul_ps
#define FMA          _mm512_fmadd_ps
#define FNMA         _mm512_fnmadd_ps
#define MAXV         _mm512_max_ps
#define SET1I        _mm512_set1_epi32
#define STOREI(p, v) _mm512_storeu_si512((void *)(p), v)

/* v where m > 0, else +0: a relu's backward mask */
#define KEEP_POS(v, m) _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(m, ZERO(), _CMP_GT_OQ), v)

/* v rounded to the nearest bf16, ties to even, as an fp32; a NaN stays a quiet NaN: the bits
 * of util/bf16.h's dt_bf16_round, lane by lane. */
INLINE VEC round_bf16(VEC v)
{
    __m512i u = _mm512_castps_si512(v), high = _mm512_set1_epi32((int)0xffff0000u);
    __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff)));
    __m512i nan = _mm512_or_si512(_mm512_and_si512(u, high), _mm512_set1_epi32(0x400000));
    r = _mm512_mask_mov_epi32(_mm512_and_si512(r, high), _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q),
                              nan);
    return _mm512_castsi512_ps(r);
}

/* ---- bf16 products (geom.products): pairs of bf16 in 32-bit lanes, low half first, held
 * in float arrays (LOAD and STORE move their bits unchanged; SET1_PAIR broadcasts one) ---- */

#define HIGH_HALVES(v)                                                                             \
    _mm512_castsi512_ps(                                                                           \
        _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32((int)0xffff0000u)))
#define LOW_HALVES(v) _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(v), 16))
typedef int dt_pair_bits __attribute__((may_alias)); /* a pair read from a float array */
#define SET1_PAIR(p)                                                                               \
    _mm512_castsi512_ps(_mm512_set1_epi32(*(const dt_pair_bits *)(const void *)(p)))
/* Lane i = (hi[i], lo[i]) for lo and hi whose values are bf16's (low halves zero). */
INLINE VEC pair_halves(VEC lo, VEC hi)
{
    return _mm512_castsi512_ps(
        _mm512_or_si512(_mm512_castps_si512(hi), _mm512_srli_epi32(_mm512_castps_si512(lo), 16)));
}
#if defined(DT_BUILD_AVX512BF16)
/* acc + a.lo * b.lo + a.hi * b.hi per lane: VDPBF16PS */
#define DPBF16(acc, a, b) _mm512_dpbf16_ps(acc, (__m512bh)(a), (__m512bh)(b))
/* The products' roundings by VCVTNE(2)PS2BF16: nearest even as dt_bf16_round, but denormals
 * flushed to zero (the products mode's numerics are its own: conv_winograd.h). */
INLINE VEC pack_pair(VEC lo, VEC hi)
{
    const __m512i interleave =
        _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                         21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    __m512i both = (__m512i)_mm512_cvtne2ps_pbh(hi, lo); /* words: lo's 16, then hi's 16 */
    return _mm512_castsi512_ps(_mm512_permutexvar_epi16(interleave, both));
}
INLINE void store_bf16(uint16_t *p, VEC v)
{
    _mm256_storeu_si256((__m256i *)(void *)p, (__m256i)_mm512_cvtneps_pbh(v));
}
#else
/* The pairs of lo's and hi's lanes rounded to bf16: lane i = (hi[i], lo[i]). */
INLINE VEC pack_pair(VEC lo, VEC hi)
{
    return pair_halves(round_bf16(lo), round_bf16(hi));
}
/* v's W lanes rounded to bf16, stored as W consecutive bf16. */
INLINE void store_bf16(uint16_t *p, VEC v)
{
    __m512i h = _mm512_srli_epi32(_mm512_castps_si512(round_bf16(v)), 16);
    _mm256_storeu_si256((__m256i *)(void *)p, _mm512_cvtepi32_epi16(h));
}
#endif

/* registers: 32 zmm */
#define MAX_VB 4
#define ROWS_OF_VB                                                                                 \
    {                                                                                              \
        0, 12, 12, 8, 6                                                                            \
    }
#define GEMM_SHAPES GEMM_ROWS12(1) GEMM_ROWS12(2) GEMM_ROWS8(3) GEMM_ROWS6(4)

static __mmask16 lane_mask(int valid)
{
    if (valid <= 0)
        return 0;
    return valid >= W ? 0xffff : (__mmask16)((1u << valid) - 1);
}

INLINE VEC load_first(const float *p, int n)
{
    return _mm512_maskz_loadu_ps(lane_mask(n), p);
}

INLINE void store_first(float *p, int n, VEC v)
{
    _mm512_mask_storeu_ps(p, lane_mask(n), v);
}

/* W bf16 elements widened to fp32 (exact): an activation a bf16 model stores as bf16. */
INLINE VEC load_bf16(const uint16_t *p)
{
    __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* Transposes 16 rows of 16 floats in place. */
INLINE void transpose(VEC r[16])
{
    VEC t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* s[4g + j] holds, in 128-bit lane L, rows 4g..4g+3 of column 4L + j */
    VEC s[16];
    for (int q = 0; q < 4; q++) {
        __m512d a = _mm512_castps_pd(t[4 * q]), b = _mm512_castps_pd(t[4 * q + 1]);
        __m512d c = _mm512_castps_pd(t[4 * q + 2]), d = _mm512_castps_pd(t[4 * q + 3]);
        s[4 * q + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        s[4 * q + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        s[4 * q + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        s[4 * q + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    for (int j = 0; j < 4; j++) {
        VEC u0 = _mm512_shuffle_f32x4(s[j], s[4 + j], 0x88);
        VEC u1 = _mm512_shuffle_f32x4(s[8 + j], s[12 + j], 0x88);
        VEC w0 = _mm512_shuffle_f32x4(s[j], s[4 + j], 0xdd);
        VEC w1 = _mm512_shuffle_f32x4(s[8 + j], s[12 + j], 0xdd);
        r[j] = _mm512_shuffle_f32x4(u0, u1, 0x88);
        r[8 + j] = _mm512_shuffle_f32x4(u0, u1, 0xdd);
        r[4 + j] = _mm512_shuffle_f32x4(w0, w1, 0x88);
        r[12 + j] = _mm512_shuffle_f32x4(w0, w1, 0xdd);
    }
}

/* mx, best = the window's running maximum and its index: v at index i wins when greater or NaN
 * (the first maximum, NaN propagating: nn/layer_maxpool2d.c's rule). */
INLINE void pool_step(VEC *mx, VECI *best, VEC v, int i)
{
    __mmask16 t = _mm512_cmp_ps_mask(v, *mx, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    *mx = _mm512_mask_mov_ps(*mx, t, v);
    *best = _mm512_mask_mov_epi32(*best, t, _mm512_set1_epi32(i));
}

#elif defined(DT_BUILD_AVX2)

#define W              8
#define VEC            __m256
#define VECI           __m256i
#define LOAD           _mm256_loadu_ps
#define STORE          _mm256_storeu_ps
#define ZERO           _mm256_setzero_ps
#define SET1           _mm256_set1_ps
#define ADD            _mm256_add_ps
#define SUB            _mm256_sub_ps
#define MUL            _mm256_mul_ps
#define FMA            _mm256_fmadd_ps
#define FNMA           _mm256_fnmadd_ps
#define MAXV           _mm256_max_ps
#define SET1I          _mm256_set1_epi32
#define STOREI(p, v)   _mm256_storeu_si256((__m256i *)(void *)(p), v)

/* v where m > 0, else +0: a relu's backward mask */
#define KEEP_POS(v, m) _mm256_and_ps(_mm256_cmp_ps(m, ZERO(), _CMP_GT_OQ), v)

/* v rounded to the nearest bf16, ties to even, as an fp32; a NaN stays a quiet NaN: the bits
 * of util/bf16.h's dt_bf16_round, lane by lane. */
INLINE VEC round_bf16(VEC v)
{
    __m256i u = _mm256_castps_si256(v), high = _mm256_set1_epi32((int)0xffff0000u);
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff)));
    __m256i nan = _mm256_or_si256(_mm256_and_si256(u, high), _mm256_set1_epi32(0x400000));
    __m256 unordered = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    return _mm256_blendv_ps(_mm256_castsi256_ps(_mm256_and_si256(r, high)),
                            _mm256_castsi256_ps(nan), unordered);
}

/* ---- bf16 products (geom.products), as in the 16-lane block ---- */
#define HIGH_HALVES(v)                                                                             \
    _mm256_castsi256_ps(                                                                           \
        _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32((int)0xffff0000u)))
#define LOW_HALVES(v) _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(v), 16))
typedef int dt_pair_bits __attribute__((may_alias));
#define SET1_PAIR(p)                                                                               \
    _mm256_castsi256_ps(_mm256_set1_epi32(*(const dt_pair_bits *)(const void *)(p)))
INLINE VEC pair_halves(VEC lo, VEC hi)
{
    return _mm256_castsi256_ps(
        _mm256_or_si256(_mm256_castps_si256(hi), _mm256_srli_epi32(_mm256_castps_si256(lo), 16)));
}
INLINE VEC pack_pair(VEC lo, VEC hi)
{
    return pair_halves(round_bf16(lo), round_bf16(hi));
}
INLINE void store_bf16(uint16_t *p, VEC v)
{
    __m256i h = _mm256_srli_epi32(_mm256_castps_si256(round_bf16(v)), 16);
    __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    _mm_storeu_si128((__m128i *)(void *)p, packed);
}

/* registers: 16 ymm, 12 of them accumulators */
#define MAX_VB 3
#define ROWS_OF_VB                                                                                 \
    {                                                                                              \
        0, 12, 6, 4                                                                                \
    }
#define GEMM_SHAPES GEMM_ROWS12(1) GEMM_ROWS6(2) GEMM_ROWS4(3)

/* All-ones in the first n int32 lanes: maskload/maskstore's mask. */
INLINE __m256i lane_mask(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The masked-off lanes are not read, so p may end inside a buffer's last vector. */
INLINE VEC load_first(const float *p, int n)
{
    return n >= W ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, lane_mask(n));
}

/* W bf16 elements widened to fp32 (exact): an activation a bf16 model stores as bf16. */
INLINE VEC load_bf16(const uint16_t *p)
{
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)p);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

INLINE void store_first(float *p, int n, VEC v)
{
    if (n >= W)
        _mm256_storeu_ps(p, v);
    else
        _mm256_maskstore_ps(p, lane_mask(n), v);
}

/* Transposes 8 rows of 8 floats in place. */
INLINE void transpose(VEC r[8])
{
    VEC t[8], s[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* s[4g + j] holds, in 128-bit lane L, rows 4g..4g+3 of column 4L + j */
    for (int q = 0; q < 2; q++) {
        __m256d a = _mm256_castps_pd(t[4 * q]), b = _mm256_castps_pd(t[4 * q + 1]);
        __m256d c = _mm256_castps_pd(t[4 * q + 2]), d = _mm256_castps_pd(t[4 * q + 3]);
        s[4 * q + 0] = _mm256_castpd_ps(_mm256_unpacklo_pd(a, c));
        s[4 * q + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(a, c));
        s[4 * q + 2] = _mm256_castpd_ps(_mm256_unpacklo_pd(b, d));
        s[4 * q + 3] = _mm256_castpd_ps(_mm256_unpackhi_pd(b, d));
    }
    for (int j = 0; j < 4; j++) {
        r[j] = _mm256_permute2f128_ps(s[j], s[4 + j], 0x20);
        r[4 + j] = _mm256_permute2f128_ps(s[j], s[4 + j], 0x31);
    }
}

/* As the 16-lane pool_step: v at index i wins when greater than the maximum so far or NaN. */
INLINE void pool_step(VEC *mx, VECI *best, VEC v, int i)
{
    VEC t = _mm256_or_ps(_mm256_cmp_ps(v, *mx, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    *mx = _mm256_blendv_ps(*mx, v, t);
    *best = _mm256_castps_si256(
        _mm256_blendv_ps(_mm256_castsi256_ps(*best), _mm256_castsi256_ps(_mm256_set1_epi32(i)), t));
}

#else
#error "winograd_vec.h: the Winograd kernels have AVX-512 and AVX2 builds only (Makefile)"
#endif

#ifndef DPBF16
/* VDPBF16PS's arithmetic without it: the products of two bf16 are exact in fp32, so an FMA
 * per half adds each as the instruction does (low half first, as the plain-C tiles do; the
 * instruction's own order and its flushing of denormals may differ in the last bit). */
#define DPBF16(acc, a, b)                                                                          \
    FMA(HIGH_HALVES(a), HIGH_HALVES(b), FMA(LOW_HALVES(a), LOW_HALVES(b), acc))
#endif

#endif

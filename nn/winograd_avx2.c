/* The Winograd kernels at 8 lanes (AVX2 + FMA): nn/winograd_kernels.inc with this width's
 * vector operations, for the CPUs without AVX-512 (Zen 2/3, Broadwell to Skylake client
 * parts). Same layout and the same order of every sum as the 16-lane build, so the same bits:
 * tests/unit/test_conv_winograd.c compares the two. */
#include <string.h>

#include "nn/winograd_impl.h"

#if DT_HAVE_AVX512 /* i.e. an x86-64 compiler that can target these extensions */

#define W            8
#define VEC          __m256
#define VECI         __m256i
#define TARGET       __attribute__((target("avx2,fma")))
#define LOAD         _mm256_loadu_ps
#define STORE        _mm256_storeu_ps
#define ZERO         _mm256_setzero_ps
#define SET1         _mm256_set1_ps
#define ADD          _mm256_add_ps
#define SUB          _mm256_sub_ps
#define MUL          _mm256_mul_ps
#define FMA          _mm256_fmadd_ps
#define FNMA         _mm256_fnmadd_ps
#define MAXV         _mm256_max_ps
#define SET1I        _mm256_set1_epi32
#define STOREI(p, v) _mm256_storeu_si256((__m256i *)(void *)(p), v)

/* v where m > 0, else +0: a relu's backward mask */
#define KEEP_POS(v, m) _mm256_and_ps(_mm256_cmp_ps(m, ZERO(), _CMP_GT_OQ), v)

/* registers: 16 ymm, 12 of them accumulators */
#define MAX_VB 3
#define ROWS_OF_VB                                                                                 \
    {                                                                                              \
        0, 12, 6, 4                                                                                \
    }
#define GEMM_SHAPES GEMM_ROWS12(1) GEMM_ROWS6(2) GEMM_ROWS4(3)
#define WG_TABLE    dt_winograd_avx2

/* All-ones in the first n int32 lanes: maskload/maskstore's mask. */
INLINE TARGET __m256i lane_mask(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* The masked-off lanes are not read, so p may end inside a buffer's last vector. */
INLINE TARGET VEC load_first(const float *p, int n)
{
    return n >= W ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, lane_mask(n));
}

INLINE TARGET void store_first(float *p, int n, VEC v)
{
    if (n >= W)
        _mm256_storeu_ps(p, v);
    else
        _mm256_maskstore_ps(p, lane_mask(n), v);
}

/* Transposes 8 rows of 8 floats in place. */
INLINE TARGET void transpose(VEC r[8])
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
INLINE TARGET void pool_step(VEC *mx, VECI *best, VEC v, int i)
{
    VEC t = _mm256_or_ps(_mm256_cmp_ps(v, *mx, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    *mx = _mm256_blendv_ps(*mx, v, t);
    *best = _mm256_castps_si256(
        _mm256_blendv_ps(_mm256_castsi256_ps(*best), _mm256_castsi256_ps(_mm256_set1_epi32(i)), t));
}

#include "nn/winograd_kernels.inc"

#endif

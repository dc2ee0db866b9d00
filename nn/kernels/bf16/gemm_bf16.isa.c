/* The bf16 GEMM over the tile vocabulary (nn/kernels/bf16/tile.h), built once per implementation
 * (the Makefile compiles every *.isa.c with -DDT_ISA_<X>; DT_ISA_FN names the function).
 *
 * Blocking: 2 x 2 accumulator tiles (tiles 0-3, a 32 x 32 block of C), two A tiles (4-5) and
 * two B tiles (6-7) per 32-deep step: 4 loads feed 4 products, the most the 8 tiles allow.
 * Edge blocks (fewer than 32 rows or columns of tiles) use the same code with the missing
 * tiles skipped; tiles that hang over C's edge go through a 16 x 16 buffer. */
#include "nn/kernels/bf16/gemm_bf16.h"

#include <omp.h>

#include "nn/kernels/isa_fn.h"
#include "nn/kernels/bf16/tile.h"

#define TILE_ELEMS 512 /* bf16 per packed tile */

/* One 16 x 16 tile of C in or out of the accumulator tile t: straight from C when it lies
 * wholly inside, else through buf (zero-padded). */
#define C_IN(t, m0, n0)                                                                            \
    do {                                                                                           \
        if (!accumulate) {                                                                         \
            TILE_ZERO(t);                                                                          \
        } else if ((m0) + 16 <= m && (n0) + 16 <= n) {                                             \
            TILE_LOAD(t, c + (m0)*ldc + (n0), ldc * 4);                                            \
        } else {                                                                                   \
            edge_copy_in(buf, c, ldc, m0, n0, m, n);                                               \
            __asm__ volatile("" : : "r"(buf) : "memory"); /* tile.h: tile_load_2x2 */              \
            TILE_LOAD(t, buf, 64);                                                                 \
        }                                                                                          \
    } while (0)

#define C_OUT(t, m0, n0)                                                                           \
    do {                                                                                           \
        if ((m0) + 16 <= m && (n0) + 16 <= n) {                                                    \
            TILE_STORE(t, c + (m0)*ldc + (n0), ldc * 4);                                           \
        } else {                                                                                   \
            TILE_STORE(t, buf, 64);                                                                \
            edge_copy_out(buf, c, ldc, m0, n0, m, n);                                              \
        }                                                                                          \
    } while (0)

static void edge_copy_in(float *buf, const float *c, ptrdiff_t ldc, int m0, int n0, int m, int n)
{
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            buf[i * 16 + j] = m0 + i < m && n0 + j < n ? c[(m0 + i) * ldc + n0 + j] : 0.0f;
}

static void edge_copy_out(const float *buf, float *c, ptrdiff_t ldc, int m0, int n0, int m, int n)
{
    for (int i = 0; i < 16 && m0 + i < m; i++)
        for (int j = 0; j < 16 && n0 + j < n; j++)
            c[(m0 + i) * ldc + n0 + j] = buf[i * 16 + j];
}

/* The block of C whose top-left tile is (mt, nt), two tiles each way where they exist. */
static void block(int m, int n, int kt_count, const dt_bf16 *a, const dt_bf16 *b, float *c,
                  ptrdiff_t ldc, bool accumulate, int mt, int nt, bool two_m, bool two_n)
{
    _Alignas(64) float buf[256];
    int m0 = mt * 16, n0 = nt * 16;
    const dt_bf16 *a0 = a + (size_t)mt * kt_count * TILE_ELEMS, *a1 = a0 + kt_count * TILE_ELEMS;
    const dt_bf16 *b0 = b + (size_t)nt * kt_count * TILE_ELEMS, *b1 = b0 + kt_count * TILE_ELEMS;
    C_IN(0, m0, n0);
    if (two_n)
        C_IN(1, m0, n0 + 16);
    if (two_m)
        C_IN(2, m0 + 16, n0);
    if (two_m && two_n)
        C_IN(3, m0 + 16, n0 + 16);
    for (int kt = 0; kt < kt_count; kt++) {
        size_t at = (size_t)kt * TILE_ELEMS;
        tile_step_2x2(a0 + at, a1 + at, 64, b0 + at, b1 + at, 64, two_m, two_n);
    }
    C_OUT(0, m0, n0);
    if (two_n)
        C_OUT(1, m0, n0 + 16);
    if (two_m)
        C_OUT(2, m0 + 16, n0);
    if (two_m && two_n)
        C_OUT(3, m0 + 16, n0 + 16);
}

void DT_ISA_FN(dt_gemm_bf16)(int m, int n, int k, const dt_bf16 *a, const dt_bf16 *b, float *c,
                             ptrdiff_t ldc, bool accumulate)
{
    int mt_count = (m + 15) / 16, nt_count = (n + 15) / 16, kt_count = (k + 31) / 32;
    int mb = (mt_count + 1) / 2, nb = (nt_count + 1) / 2;
    if (m <= 0 || n <= 0)
        return;
        /* Column blocks inside row blocks: a row block's A tiles stay in cache across them. */
#pragma omp parallel for schedule(static) if (!omp_in_parallel() && (long)mb * nb > 1 &&           \
                                              (double)m * n * k > 4e6)
    for (int blk = 0; blk < mb * nb; blk++) {
        TILE_BEGIN();
        int mt = 2 * (blk / nb), nt = 2 * (blk % nb);
        block(m, n, kt_count, a, b, c, ldc, accumulate, mt, nt, mt + 1 < mt_count,
              nt + 1 < nt_count);
    }
}

/* Two B tile rows from two A tile rows a0, a1 (32 values each): columns 0-15 of both rows
 * interleaved into b0, columns 16-31 into b1. */
static inline void interleave_rows(const dt_bf16 *a0, const dt_bf16 *a1, dt_bf16 *b0, dt_bf16 *b1)
{
#if defined(DT_BUILD_CTILE)
    for (int c = 0; c < 16; c++) {
        b0[2 * c] = a0[c];
        b0[2 * c + 1] = a1[c];
        b1[2 * c] = a0[16 + c];
        b1[2 * c + 1] = a1[16 + c];
    }
#else
    /* element e of the result is a0[e / 2] (even e) or a1[e / 2] (odd e: index 32 + e / 2) */
    const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40,
                                        8, 39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
    __m512i r0 = _mm512_loadu_si512(a0), r1 = _mm512_loadu_si512(a1);
    _mm512_storeu_si512(b0, _mm512_permutex2var_epi16(r0, lo, r1));
    _mm512_storeu_si512(b1, _mm512_permutex2var_epi16(r0, hi, r1));
#endif
}

/* Row blocks [rb0, rb1) (32 rows each) of w, one block at a time, 32 columns at a time: each row
 * pair's two A tile rows (each row's 32 values; into a local buffer when wa is NULL), then the two
 * B tile rows they make, read back from the A rows while in L1. The block's 16 pairs fill one B
 * tile per 16 columns, written whole before the next. The conversion is a plain loop over the
 * scalar one, which the AVX-512 builds vectorise: the bits of dt_bf16_from_f32. */
void DT_ISA_FN(dt_bf16_pack_rows_both)(const float *w, int m, int k, int rb0, int rb1, dt_bf16 *wa,
                                       dt_bf16 *wb)
{
    int a_depth = k / 32, b_depth = m / 32; /* tiles along each packing's K */
#pragma omp parallel for schedule(static) if (!omp_in_parallel() && (double)(rb1 - rb0) * 32 * k > \
                                                                        DT_BF16_PACK_PARALLEL_MIN)
    for (int rb = rb0; rb < rb1; rb++)
        for (int kt = 0; kt < a_depth; kt++)
            for (int p = 0; p < 16; p++) {
                int r = 32 * rb + 2 * p;
                const float *w0 = w + (size_t)r * k + kt * 32, *w1 = w0 + k;
                _Alignas(64) dt_bf16 rows[64]; /* B alone: the A rows go through here */
                dt_bf16 *a0 =
                    wa ? wa + ((size_t)(r / 16) * a_depth + kt) * TILE_ELEMS + (r % 16) * 32 : rows;
                dt_bf16 *a1 = a0 + 32;
                for (int c = 0; c < 32; c++) {
                    a0[c] = dt_bf16_from_f32(w0[c]);
                    a1[c] = dt_bf16_from_f32(w1[c]);
                }
                if (wb) {
                    dt_bf16 *b0 = wb + ((size_t)(2 * kt) * b_depth + rb) * TILE_ELEMS + p * 32;
                    interleave_rows(a0, a1, b0, b0 + (size_t)b_depth * TILE_ELEMS);
                }
            }
}

/* B of x^T (k = cols, n = rows) from the row-major rows x cols fp32 x (rows a multiple of 16,
 * cols of 32): per tile, its 16 rows' 32 values converted in turn (the loop the AVX-512 builds
 * vectorise), each row's 16 bf16 pairs then a column of the tile (a 16 x 16 transpose of
 * 32-bit words, in L1). */
void DT_ISA_FN(dt_bf16_pack_b_rows_t)(const float *x, int rows, int cols, dt_bf16 *dst)
{
    int kt_count = cols / 32, nt_count = rows / 16;
#pragma omp parallel for schedule(static) if (!omp_in_parallel() &&                                \
                                              (double)rows * cols > DT_BF16_PACK_PARALLEL_MIN)
    for (int nt = 0; nt < nt_count; nt++)
        for (int kt = 0; kt < kt_count; kt++) {
            _Alignas(64) dt_bf16 stage[16][32]; /* row c's 32 values: its 16 pairs */
            for (int c = 0; c < 16; c++) {
                const float *src = x + (size_t)(16 * nt + c) * cols + 32 * kt;
                for (int j = 0; j < 32; j++)
                    stage[c][j] = dt_bf16_from_f32(src[j]);
            }
            dt_bf16 *t = dst + ((size_t)nt * kt_count + kt) * TILE_ELEMS;
#if defined(DT_BUILD_CTILE)
            for (int p = 0; p < 16; p++)
                for (int c = 0; c < 16; c++) {
                    t[p * 32 + 2 * c] = stage[c][2 * p];
                    t[p * 32 + 2 * c + 1] = stage[c][2 * p + 1];
                }
#else
            /* tile row p: pair p of each staged row, 16 words 64 bytes apart */
            const __m512i column = _mm512_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160,
                                                     176, 192, 208, 224, 240);
            for (int p = 0; p < 16; p++)
                _mm512_storeu_si512(t + p * 32,
                                    _mm512_i32gather_epi32(
                                        _mm512_add_epi32(column, _mm512_set1_epi32(p)), stage, 4));
#endif
        }
}

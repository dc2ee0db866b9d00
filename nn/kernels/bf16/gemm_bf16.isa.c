/* The bf16 GEMM over the tile vocabulary (nn/kernels/bf16/tile.h), built once per implementation
 * (the Makefile compiles every *.isa.c with -DDT_ISA_<X>; DT_ISA_FN names the function).
 *
 * Blocking: 2 x 2 accumulator tiles (tiles 0-3, a 32 x 32 block of C), two A tiles (4-5) and
 * two B tiles (6-7) per 32-deep step: 4 loads feed 4 products, the most the 8 tiles allow.
 * Edge blocks (fewer than 32 rows or columns of tiles) use the same code with the missing
 * tiles skipped; tiles that hang over C's edge go through a 16 x 16 buffer. */
#include "nn/kernels/bf16/gemm_bf16.h"
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

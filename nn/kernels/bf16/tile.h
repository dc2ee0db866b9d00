/* The tile vocabulary the matrix kernels are written in: eight tile registers of 16 rows x 64
 * bytes (16 x 16 fp32 accumulators, 16 x 32 bf16 A operands, or 16 bf16 pairs x 16 columns of
 * B in the VNNI layout), and five operations:
 *
 *   TILE_ZERO(t)              t = 0
 *   TILE_LOAD(t, ptr, stride) t's 16 rows of 64 bytes from ptr, ptr + stride, ...
 *   TILE_STORE(t, ptr, stride)
 *   TILE_DPBF16(c, a, b)      c[m][n] += sum over k of a[m][2k]*b[k][n][0] + a[m][2k+1]*b[k][n][1]
 *   TILE_BEGIN()              configure this thread's tiles (once; cheap after that)
 *
 * A kernel source (nn/kernels/bf16/NAME.isa.c) is compiled once per implementation: DT_BUILD_AMX
 * maps the operations to the AMX instructions (tile numbers must be constants),
 * DT_BUILD_AVX512BF16 keeps the tiles in per-thread arrays and does each product as VDPBF16PS
 * on zmm registers (CPUs with AVX512-BF16 and no AMX: Zen 4, Cooper Lake), DT_BUILD_CTILE is
 * plain C on per-thread arrays with the same arithmetic in fp32. The C build runs on every
 * machine, so the blocking and packing logic above the vocabulary is tested everywhere, not
 * only where AMX exists; the builds then differ only in these five operations. */
#ifndef DT_NN_KERNELS_TILE_H
#define DT_NN_KERNELS_TILE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "nn/kernels/bf16/amx.h"
#include "nn/kernels/bf16/bf16.h"

#define TILE_ROWS  16
#define TILE_BYTES 64

#if defined(DT_BUILD_AMX)

#include <immintrin.h>

#define TILE_ZERO(t)               _tile_zero(t)
#define TILE_LOAD(t, ptr, stride)  _tile_loadd(t, ptr, stride)
#define TILE_STORE(t, ptr, stride) _tile_stored(t, ptr, stride)
#define TILE_DPBF16(c, a, b)       _tile_dpbf16ps(c, a, b)
#define TILE_BEGIN()               dt_amx_configure_thread()

#elif defined(DT_BUILD_CTILE)

struct ctile {
    _Alignas(64) uint8_t b[TILE_ROWS][TILE_BYTES];
};
static _Thread_local struct ctile ctiles[8];

static inline void ctile_load(int t, const void *ptr, long stride)
{
    for (int r = 0; r < TILE_ROWS; r++)
        memcpy(ctiles[t].b[r], (const uint8_t *)ptr + r * stride, TILE_BYTES);
}

static inline void ctile_store(int t, void *ptr, long stride)
{
    for (int r = 0; r < TILE_ROWS; r++)
        memcpy((uint8_t *)ptr + r * stride, ctiles[t].b[r], TILE_BYTES);
}

/* TDPBF16PS's order: per row, per pair k, both products added in turn in fp32. */
static inline void ctile_dpbf16(int c, int a, int b)
{
    for (int m = 0; m < TILE_ROWS; m++) {
        float acc[16];
        const dt_bf16 *ar = (const dt_bf16 *)ctiles[a].b[m];
        memcpy(acc, ctiles[c].b[m], sizeof acc);
        for (int k = 0; k < 16; k++) {
            const dt_bf16 *br = (const dt_bf16 *)ctiles[b].b[k];
            float a0 = dt_bf16_to_f32(ar[2 * k]), a1 = dt_bf16_to_f32(ar[2 * k + 1]);
            for (int n = 0; n < 16; n++) {
                acc[n] += a0 * dt_bf16_to_f32(br[2 * n]);
                acc[n] += a1 * dt_bf16_to_f32(br[2 * n + 1]);
            }
        }
        memcpy(ctiles[c].b[m], acc, sizeof acc);
    }
}

#define TILE_ZERO(t)               memset(ctiles[t].b, 0, sizeof ctiles[t].b)
#define TILE_LOAD(t, ptr, stride)  ctile_load(t, ptr, stride)
#define TILE_STORE(t, ptr, stride) ctile_store(t, ptr, stride)
#define TILE_DPBF16(c, a, b)       ctile_dpbf16(c, a, b)
#define TILE_BEGIN()               ((void)0)

#elif defined(DT_BUILD_AVX512BF16)

#include <immintrin.h>

/* Tiles are per-thread arrays as in the C build, and a load copies, as TILELOADD does (a kernel
 * may reuse a load's source, e.g. an edge buffer, before the product). The product is 256
 * VDPBF16PS with C's 16 rows in zmm registers: for each pair row k of B (one zmm: 16 columns
 * x 2), every row m of C adds A[m][2k..2k+1], broadcast from memory, times it. The 16 rows are
 * independent chains, so VDPBF16PS's latency is hidden; C is loaded and stored once per product (32
 * accesses per 256 products). A union, so the A pairs are read as 32-bit words without breaking the
 * aliasing rules. */
union vtile {
    _Alignas(64) uint8_t b[TILE_ROWS][TILE_BYTES];
    int32_t pair[TILE_ROWS][16];
    float f[TILE_ROWS][16];
};
static _Thread_local union vtile vtiles[8];

__attribute__((always_inline)) static inline void vtile_load(int t, const void *ptr, long stride)
{
    for (int r = 0; r < TILE_ROWS; r++)
        _mm512_store_si512(vtiles[t].b[r], _mm512_loadu_si512((const uint8_t *)ptr + r * stride));
}

__attribute__((always_inline)) static inline void vtile_store(int t, void *ptr, long stride)
{
    for (int r = 0; r < TILE_ROWS; r++)
        _mm512_storeu_si512((uint8_t *)ptr + r * stride, _mm512_load_si512(vtiles[t].b[r]));
}

__attribute__((always_inline)) static inline void vtile_zero(int t)
{
    for (int r = 0; r < TILE_ROWS; r++)
        _mm512_store_si512(vtiles[t].b[r], _mm512_setzero_si512());
}

/* Out of line: one copy per kernel source, its 16 accumulators in registers (the loops are
 * unrolled whole). VDPBF16PS adds a pair's odd product, then its even one, each rounded.
 *
 * A group of 4 pairs (8 channels) whose A columns and B rows are all zero bits is skipped: a
 * 16-channel input fills half of each 32-deep step with zero planes and zero weights (the
 * channels padded to 32), and a GEMM's last step its depth beyond K. The instruction costs the
 * same on zeros, so this halves the products of ResNet's first stage; AMX cannot skip. The
 * result differs only where adding +0 would turn a -0 or a denormal accumulator into +0. */
__attribute__((noinline, unused)) static void vtile_dpbf16(union vtile *c, const union vtile *a,
                                                           const union vtile *b)
{
    __m512i any = _mm512_load_si512(a->b[0]);
#pragma GCC unroll 16
    for (int m = 1; m < TILE_ROWS; m++)
        any = _mm512_or_si512(any, _mm512_load_si512(a->b[m]));
    __mmask16 a_pairs = _mm512_test_epi32_mask(any, any); /* bit k: pair k nonzero in some row */
    __m512 acc[TILE_ROWS];
#pragma GCC unroll 16
    for (int m = 0; m < TILE_ROWS; m++)
        acc[m] = _mm512_load_ps(c->f[m]);
#pragma GCC unroll 4
    for (int g = 0; g < 16; g += 4) {
        __m512i bk[4];
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++)
            bk[k] = _mm512_load_si512(b->b[g + k]);
        if (!((a_pairs >> g) & 0xf)) {
            __m512i rows =
                _mm512_or_si512(_mm512_or_si512(bk[0], bk[1]), _mm512_or_si512(bk[2], bk[3]));
            if (!_mm512_test_epi32_mask(rows, rows))
                continue;
        }
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++)
#pragma GCC unroll 16
            for (int m = 0; m < TILE_ROWS; m++)
                acc[m] = _mm512_dpbf16_ps(acc[m], (__m512bh)_mm512_set1_epi32(a->pair[m][g + k]),
                                          (__m512bh)bk[k]);
    }
#pragma GCC unroll 16
    for (int m = 0; m < TILE_ROWS; m++)
        _mm512_store_ps(c->f[m], acc[m]);
}

#define TILE_ZERO(t)               vtile_zero(t)
#define TILE_LOAD(t, ptr, stride)  vtile_load(t, ptr, stride)
#define TILE_STORE(t, ptr, stride) vtile_store(t, ptr, stride)
#define TILE_DPBF16(c, a, b)       vtile_dpbf16(&vtiles[c], &vtiles[a], &vtiles[b])
#define TILE_BEGIN()               ((void)0)

#else
#error "nn/kernels/bf16/tile.h: compile with -DDT_BUILD_<AMX|AVX512BF16|CTILE> (see the Makefile)"
#endif

/* One 32-deep step of a block of up to 2 x 2 accumulators, tiles 0 1 / 2 3 (rows x columns):
 * A tiles from a0 (and a1 for the second row) at stride sa into tiles 4-5, B tiles from b0
 * (and b1 for the second column) at stride sb into 6-7. Four loads feed four products, the
 * most eight tiles allow; a missing second row or column is skipped (edges of the output). */
__attribute__((always_inline)) static inline void tile_step_2x2(const void *a0, const void *a1,
                                                                long sa, const void *b0,
                                                                const void *b1, long sb,
                                                                bool two_rows, bool two_cols)
{
    TILE_LOAD(4, a0, sa);
    TILE_LOAD(6, b0, sb);
    TILE_DPBF16(0, 4, 6);
    if (two_cols) {
        TILE_LOAD(7, b1, sb);
        TILE_DPBF16(1, 4, 7);
    }
    if (two_rows) {
        TILE_LOAD(5, a1, sa);
        TILE_DPBF16(2, 5, 6);
        if (two_cols)
            TILE_DPBF16(3, 5, 7);
    }
}

/* Elements of one packed bf16 operand tile (16 rows x 32). */
#define TILE_ELEMS 512

/* Accumulator tile t into 16 rows of `row` floats from dst on, or only the first `rows` of
 * them when the tile holds the last output channels (its other rows are padding); LOAD_ROWS
 * the other way, padding rows zero. Both need `buf` and `ystride` (= row * 4) in scope: used
 * through tile_store_2x2 / tile_load_2x2 below. */
#define STORE_ROWS(t, rows, dst, row)                                                              \
    do {                                                                                           \
        if ((rows) >= 16) {                                                                        \
            TILE_STORE(t, dst, ystride);                                                           \
        } else {                                                                                   \
            TILE_STORE(t, buf, 64);                                                                \
            for (int r_ = 0; r_ < (rows); r_++)                                                    \
                memcpy((dst) + (size_t)r_ * (row), buf + r_ * 16, 64);                             \
        }                                                                                          \
    } while (0)
#define LOAD_ROWS(t, rows, src, row)                                                               \
    do {                                                                                           \
        if ((rows) >= 16) {                                                                        \
            TILE_LOAD(t, src, ystride);                                                            \
        } else {                                                                                   \
            memset(buf, 0, sizeof buf);                                                            \
            for (int r_ = 0; r_ < (rows); r_++)                                                    \
                memcpy(buf + r_ * 16, (src) + (size_t)r_ * (row), 64);                             \
            __asm__ volatile("" : : "r"(buf) : "memory"); /* see tile_load_2x2 */                  \
            TILE_LOAD(t, buf, 64);                                                                 \
        }                                                                                          \
    } while (0)

/* The 2 x 2 accumulator block (tiles 0 1 / 2 3) to rows of `row` floats from y0 on: tile 1 at
 * y0 + 16, tiles 2 and 3 sixteen rows down. rows0 is the number of output rows from y0 on; a
 * block past the output (two_rows / two_cols false) is skipped. tile_load_2x2 the other way:
 * gcc does not see that AMX's tile load reads memory (as with ldtilecfg, amx.c), so without the
 * barrier in LOAD_ROWS it drops the writes into buf, a local nothing else reads, as dead. */
__attribute__((always_inline)) static inline void tile_store_2x2(float *y0, long row, int rows0,
                                                                 bool two_rows, bool two_cols)
{
    long ystride = row * 4;
    float *y1 = y0 + (size_t)16 * row;
    int rows1 = rows0 - 16;
    _Alignas(64) float buf[256];
    STORE_ROWS(0, rows0, y0, row);
    if (two_cols)
        STORE_ROWS(1, rows0, y0 + 16, row);
    if (two_rows)
        STORE_ROWS(2, rows1, y1, row);
    if (two_rows && two_cols)
        STORE_ROWS(3, rows1, y1 + 16, row);
}

__attribute__((always_inline)) static inline void
tile_load_2x2(const float *y0, long row, int rows0, bool two_rows, bool two_cols)
{
    long ystride = row * 4;
    const float *y1 = y0 + (size_t)16 * row;
    int rows1 = rows0 - 16;
    _Alignas(64) float buf[256];
    LOAD_ROWS(0, rows0, y0, row);
    if (two_cols)
        LOAD_ROWS(1, rows0, y0 + 16, row);
    if (two_rows)
        LOAD_ROWS(2, rows1, y1, row);
    if (two_rows && two_cols)
        LOAD_ROWS(3, rows1, y1 + 16, row);
}

#endif

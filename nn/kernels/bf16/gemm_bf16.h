/* bf16 matrix products with fp32 accumulation: C (fp32) = [C +] A * B.
 *
 * Operands are packed first into 1 KiB tiles, the layout the AMX tile loads read with a 64-byte
 * stride (and that stays in cache as a unit):
 *   A, M x K: tiles of 16 rows x 32 bf16, ordered [M/16][K/32]; element (m, k) of tile
 *             (mt, kt) at row m % 16, column k % 32;
 *   B, K x N: tiles of 16 pairs x 16 columns x 2 (VNNI: rows k and k+1 of a column side by
 *             side), ordered [N/16][K/32]; element (k, n) at [(k % 32) / 2][n % 16][k % 2].
 * Sizes round up to whole tiles and the padding is zero, so any M, N, K work. The source of a
 * pack is addressed through two strides (rs between rows, cs between columns), so a
 * transposed operand (the backward products' W^T and X^T) packs the same way.
 *
 * Paths: "amx" (TDPBF16PS), "avx512bf16" (the same kernel source, each tile product as
 * VDPBF16PS on zmm registers), "ctile" (the same source over the plain-C tile vocabulary,
 * nn/kernels/bf16/tile.h), and "reference" (a plain triple loop, fp32 arithmetic on the bf16
 * values: the emulation any CPU can run and the tests' yardstick). */
#ifndef DT_NN_KERNELS_GEMM_BF16_H
#define DT_NN_KERNELS_GEMM_BF16_H

#include <stdbool.h>
#include <stddef.h>

#include "nn/kernels/bf16/bf16.h"
#include "nn/kernels/isa.h"

/* enum dt_bf16_path, its names and availability, and the choice: nn/kernels/isa.h */

/* The packs split their tile rows over the threads from this many source elements on: a
 * pack is a conversion that waits on memory, and the fork costs a few microseconds (at a
 * million, the ConvNet's linear layer, 128 x 4608, packed on one thread at 1 x 2 and took as
 * long as at 1 x 1). */
#define DT_BF16_PACK_PARALLEL_MIN 65536.0

/* bf16 elements of a packed operand (a multiple of 512: whole tiles). */
size_t dt_bf16_packed_a_size(int m, int k);
size_t dt_bf16_packed_b_size(int k, int n);

/* Packs the m x k matrix at src (element (i, j) at src[i * rs + j * cs]) as A, from fp32
 * (rounded to nearest even) or bf16. */
void dt_bf16_pack_a_f32(const float *src, ptrdiff_t rs, ptrdiff_t cs, int m, int k, dt_bf16 *dst);
void dt_bf16_pack_a_bf16(const dt_bf16 *src, ptrdiff_t rs, ptrdiff_t cs, int m, int k,
                         dt_bf16 *dst);
/* Packs the k x n matrix at src (element (i, j) at src[i * rs + j * cs]) as B. */
void dt_bf16_pack_b_f32(const float *src, ptrdiff_t rs, ptrdiff_t cs, int k, int n, dt_bf16 *dst);
void dt_bf16_pack_b_bf16(const dt_bf16 *src, ptrdiff_t rs, ptrdiff_t cs, int k, int n,
                         dt_bf16 *dst);

/* The row-major m x k fp32 matrix w (element (i, j) at w[i * k + j]: a linear layer's weights
 * [out][in]) packed as A (wa: m x k, the forward's y^T = W x^T) and, unless wb is NULL, as B of
 * the product it is the right operand of (wb: its m rows the depth, its k columns the width:
 * the input gradient's dx = dy W), in one pass over w; either may be NULL (wb alone: a
 * row-major operand whose rows are the product's depth, the linear's x in its weight
 * gradient). The same bits as
 * dt_bf16_pack_a_f32(w, k, 1, m, k, wa) and dt_bf16_pack_b_f32(w, k, 1, m, k, wb): a second
 * pack_b over fp32 rows costs 4x this pass (4096 x 512: 1.9 ms against 0.45, docs/bf16.md).
 * Runs path p's build: the AVX-512 ones vectorise the conversion and the pair interleave. */
void dt_bf16_pack_rows_both(enum dt_bf16_path p, const float *w, int m, int k, dt_bf16 *wa,
                            dt_bf16 *wb);
/* The same for rows [r0, r1) of w only, into the whole matrix's packs (the rest of wa and wb
 * untouched): the optimizer step packs a linear layer's weights a few rows at a time, as it
 * updates them (nn/weight_copy.h). r0 and r1 multiples of dt_bf16_pack_rows_piece(m, k), or r1
 * = m; the bits of the whole pass for those rows. */
void dt_bf16_pack_rows_range(enum dt_bf16_path p, const float *w, int m, int k, int r0, int r1,
                             dt_bf16 *wa, dt_bf16 *wb);
/* The rows a piece of dt_bf16_pack_rows_range is made of: 32 (a block of A tile rows and one
 * tile of B's depth) when m and k are whole tiles; m otherwise (the element loops pack the
 * edge tiles of the whole matrix at once). */
int dt_bf16_pack_rows_piece(int m, int k);

/* The row-major rows x cols fp32 matrix x packed as B of x^T (k = cols, n = rows: the linear
 * forward's x^T), the bits of dt_bf16_pack_b_f32(x, 1, cols, cols, rows, dst), on path p's
 * build; the general packer takes other shapes (the fast loop wants rows a multiple of 16,
 * cols of 32). */
void dt_bf16_pack_b_rows_t(enum dt_bf16_path p, const float *x, int rows, int cols, dt_bf16 *dst);

/* C (m x n, row stride ldc floats) = [C +] A * B from packed A (m x k) and B (k x n), on the
 * path in use (dt_isa_bf16_path). Splits its blocks over the OpenMP team unless called inside a
 * parallel region. */
void dt_gemm_bf16(int m, int n, int k, const dt_bf16 *a, const dt_bf16 *b, float *c, ptrdiff_t ldc,
                  bool accumulate);
/* The same on a chosen path (tests, benchmarks); p must be available. */
void dt_gemm_bf16_on(enum dt_bf16_path p, int m, int n, int k, const dt_bf16 *a, const dt_bf16 *b,
                     float *c, ptrdiff_t ldc, bool accumulate);

/* The per-ISA builds of nn/kernels/bf16/gemm_bf16.isa.c (dispatch goes through the calls above). */
void dt_gemm_bf16_amx(int m, int n, int k, const dt_bf16 *a, const dt_bf16 *b, float *c,
                      ptrdiff_t ldc, bool accumulate);
void dt_gemm_bf16_avx512bf16(int m, int n, int k, const dt_bf16 *a, const dt_bf16 *b, float *c,
                             ptrdiff_t ldc, bool accumulate);
void dt_gemm_bf16_ctile(int m, int n, int k, const dt_bf16 *a, const dt_bf16 *b, float *c,
                        ptrdiff_t ldc, bool accumulate);
/* Their builds of dt_bf16_pack_rows_both's whole-tile case (m and k multiples of 32), for the
 * row blocks [rb0, rb1) of 32 rows. */
void dt_bf16_pack_rows_both_amx(const float *w, int m, int k, int rb0, int rb1, dt_bf16 *wa,
                                dt_bf16 *wb);
void dt_bf16_pack_rows_both_avx512bf16(const float *w, int m, int k, int rb0, int rb1, dt_bf16 *wa,
                                       dt_bf16 *wb);
void dt_bf16_pack_rows_both_ctile(const float *w, int m, int k, int rb0, int rb1, dt_bf16 *wa,
                                  dt_bf16 *wb);
void dt_bf16_pack_b_rows_t_amx(const float *x, int rows, int cols, dt_bf16 *dst);
void dt_bf16_pack_b_rows_t_avx512bf16(const float *x, int rows, int cols, dt_bf16 *dst);
void dt_bf16_pack_b_rows_t_ctile(const float *x, int rows, int cols, dt_bf16 *dst);

#endif

/* The stride-2 convolution's two tap-table kernels over the tile vocabulary (conv_s2_bf16.h),
 * built once per implementation like conv_bf16.isa.c. Both keep a block of 2 x 2 accumulator
 * tiles across every K step; a tap's operand is found through its table entry, so the same
 * code serves the forward (taps spread over four parity planes), each parity plane of the
 * input gradient (a subset of the taps over dY's planes) and the weight gradient. */
#include "nn/kernels/bf16/conv_s2_bf16.h"
#include "nn/kernels/isa_fn.h"
#include "nn/kernels/bf16/tile.h"

/* Blocks of 32 rows x 32 positions; one 32-deep step per (tap, 32 channels). */
void DT_ISA_FN(dt_conv_s2_taps_forward)(int m, int depth, int ntaps, const long *at, long plane,
                                        int qpad, const dt_bf16 *a, const dt_bf16 *b, float *y)
{
    int cb_count = depth / 32, kt_count = ntaps * cb_count;
    int mt_count = (m + 15) / 16, qt_count = qpad / 16;
    int mb = (mt_count + 1) / 2, qb = (qt_count + 1) / 2;
    long pstride = plane * 4;
#pragma omp parallel for schedule(static) if (!omp_in_parallel() && mb * qb > 1 &&                 \
                                              (double)qpad * m * kt_count * 32 > 4e6)
    for (int blk = 0; blk < mb * qb; blk++) {
        TILE_BEGIN();
        int mt = 2 * (blk / qb), qt = 2 * (blk % qb);
        bool two_m = mt + 1 < mt_count, two_q = qt + 1 < qt_count;
        const dt_bf16 *a0 = a + (size_t)mt * kt_count * TILE_ELEMS;
        const dt_bf16 *a1 = a0 + (size_t)kt_count * TILE_ELEMS;
        TILE_ZERO(0);
        TILE_ZERO(1);
        TILE_ZERO(2);
        TILE_ZERO(3);
        for (int kt = 0; kt < kt_count; kt++) {
            int u = kt / cb_count, cb = kt % cb_count;
            const dt_bf16 *b0 = b + at[u] + ((size_t)cb * 16 * plane + (size_t)qt * 16) * 2;
            size_t ka = (size_t)kt * TILE_ELEMS;
            tile_step_2x2(a0 + ka, a1 + ka, 64, b0, b0 + 32, pstride, two_m, two_q);
        }
        float *y0 = y + (size_t)mt * 16 * qpad + qt * 16;
        int rows0 = m - mt * 16;
        tile_store_2x2(y0, qpad, rows0, two_m, two_q);
    }
}

/* Blocks of 32 rows x 32 channels of one tap, kept in the tiles across every sample's
 * positions: A = 16 dY rows x 32 positions, B = 16 position pairs x 16 channels. */
void DT_ISA_FN(dt_conv_s2_taps_weight_grad)(int m, int c16, int ntaps, const long *at,
                                            const int *shift, int qrow, int n, const dt_bf16 *a,
                                            size_t astep, const dt_bf16 *b, size_t bstep,
                                            float *dwt, bool accumulate)
{
    int mt_count = (m + 15) / 16, ct_count = c16 / 16;
    int mb = (mt_count + 1) / 2, cb = (ct_count + 1) / 2, blocks = mb * cb * ntaps;
    long astride = (long)qrow * 2, bstride = (long)c16 * 4;
    int row = ntaps * c16;
#pragma omp parallel for schedule(dynamic) if (!omp_in_parallel() && blocks > 1)
    for (int blk = 0; blk < blocks; blk++) {
        TILE_BEGIN();
        int u = blk % ntaps, mt = 2 * (blk / ntaps / cb), ct = 2 * (blk / ntaps % cb);
        bool two_m = mt + 1 < mt_count, two_c = ct + 1 < ct_count;
        float *y0 = dwt + ((size_t)mt * 16 * ntaps + u) * c16 + ct * 16;
        int rows0 = m - mt * 16;
        if (!accumulate) {
            TILE_ZERO(0);
            TILE_ZERO(1);
            TILE_ZERO(2);
            TILE_ZERO(3);
        } else {
            tile_load_2x2(y0, row, rows0, two_m, two_c);
        }
        for (int i = 0; i < n; i++) {
            const dt_bf16 *a0 = a + i * astep + (size_t)mt * 16 * qrow;
            const dt_bf16 *x = b + i * bstep + at[u];
            for (int q = 0; q < qrow; q += 32) {
                const dt_bf16 *b0 = x + ((size_t)((q + shift[u]) / 2) * c16 + ct * 16) * 2;
                tile_step_2x2(a0 + q, a0 + (size_t)16 * qrow + q, astride, b0, b0 + 32, bstride,
                              two_m, two_c);
            }
        }
        tile_store_2x2(y0, row, rows0, two_m, two_c);
    }
}

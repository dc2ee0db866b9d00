/* The bf16 stride-1 convolution over the tile vocabulary (conv_bf16.h for the layouts),
 * built once per implementation like gemm_bf16.isa.c.
 *
 * A: the packed weights, tile (output channels mt, K step kt). B: read in place from the
 * channel-pair planes, tile (kt, positions qt) = 16 pair planes from cb * 16 on, 64 bytes at
 * position qt * 16 + the offset of kernel tap (i, j), stride one pair plane. Blocks of 2 x 2
 * accumulator tiles (32 channels x 32 positions), stored straight into yq. */
#include "nn/kernels/conv_bf16.h"
#include "nn/kernels/isa_fn.h"
#include "nn/kernels/tile.h"

#define TILE_ELEMS 512

/* Accumulator tile t into 16 rows of yq from dst on, or only the first `rows` of them when
 * the tile holds the last output channels (its other rows are padding). */
#define STORE_C(t, rows, dst)                                                                      \
    do {                                                                                           \
        if ((rows) >= 16) {                                                                        \
            TILE_STORE(t, dst, ystride);                                                           \
        } else {                                                                                   \
            TILE_STORE(t, buf, 64);                                                                \
            for (int r_ = 0; r_ < (rows); r_++)                                                    \
                memcpy((dst) + (size_t)r_ * g->qpad, buf + r_ * 16, 64);                           \
        }                                                                                          \
    } while (0)

void DT_ISA_FN(dt_conv_bf16_forward)(const struct dt_conv_shape *s,
                                     const struct dt_conv_bf16_geom *g, const dt_bf16 *xv,
                                     const dt_bf16 *wp, float *yq)
{
    int cb_count = g->cpad / 32, kt_count = s->kh * s->kw * cb_count;
    int mt_count = (s->k + 15) / 16, qt_count = g->qpad / 16;
    int mb = (mt_count + 1) / 2, qb = (qt_count + 1) / 2;
    long plane = (long)g->positions * 4, ystride = (long)g->qpad * 4;
#pragma omp parallel for schedule(static) if (!omp_in_parallel() && mb * qb > 1 &&                 \
                                              (double)g->q * s->k * kt_count * 32 > 4e6)
    for (int blk = 0; blk < mb * qb; blk++) {
        TILE_BEGIN();
        int mt = 2 * (blk / qb), qt = 2 * (blk % qb);
        bool two_m = mt + 1 < mt_count, two_q = qt + 1 < qt_count;
        const dt_bf16 *a0 = wp + (size_t)mt * kt_count * TILE_ELEMS;
        const dt_bf16 *a1 = a0 + (size_t)kt_count * TILE_ELEMS;
        TILE_ZERO(0);
        TILE_ZERO(1);
        TILE_ZERO(2);
        TILE_ZERO(3);
        for (int kt = 0; kt < kt_count; kt++) {
            int ij = kt / cb_count, cb = kt % cb_count;
            int at = qt * 16 + ij / s->kw * g->wp + ij % s->kw;
            const dt_bf16 *b0 = xv + ((size_t)cb * 16 * g->positions + at) * 2;
            size_t ka = (size_t)kt * TILE_ELEMS;
            TILE_LOAD(4, a0 + ka, 64);
            TILE_LOAD(6, b0, plane);
            TILE_DPBF16(0, 4, 6);
            if (two_q) {
                TILE_LOAD(7, b0 + 32, plane);
                TILE_DPBF16(1, 4, 7);
            }
            if (two_m) {
                TILE_LOAD(5, a1 + ka, 64);
                TILE_DPBF16(2, 5, 6);
                if (two_q)
                    TILE_DPBF16(3, 5, 7);
            }
        }
        float *y0 = yq + (size_t)mt * 16 * g->qpad + qt * 16, *y1 = y0 + (size_t)16 * g->qpad;
        int rows0 = s->k - mt * 16, rows1 = rows0 - 16;
        _Alignas(64) float buf[256];
        STORE_C(0, rows0, y0);
        if (two_q)
            STORE_C(1, rows0, y0 + 16);
        if (two_m)
            STORE_C(2, rows1, y1);
        if (two_m && two_q)
            STORE_C(3, rows1, y1 + 16);
    }
}

/* The bf16 stride-1 convolution over the tile vocabulary (conv_bf16.h for the layouts),
 * built once per implementation like gemm_bf16.isa.c.
 *
 * A: the packed weights, tile (output channels mt, K step kt). B: read in place from the
 * channel-pair planes, tile (kt, positions qt) = 16 pair planes from the step's first on, 64
 * bytes at position qt * 16 + the step's tap offset, stride one pair plane
 * (dt_conv_bf16_step; with tap_pairs a step covers two taps). Blocks of 2 x 2
 * accumulator tiles (32 channels x 32 positions), stored straight into yq. */
#include "nn/kernels/bf16/conv_bf16.h"
#include "nn/kernels/isa_fn.h"
#include "nn/kernels/bf16/tile.h"

void DT_ISA_FN(dt_conv_bf16_forward)(const struct dt_conv_shape *s,
                                     const struct dt_conv_bf16_geom *g, const dt_bf16 *xv,
                                     const dt_bf16 *wp, float *yq)
{
    int kt_count = g->steps;
    int mt_count = (s->k + 15) / 16, qt_count = g->qpad / 16;
    int mb = (mt_count + 1) / 2, qb = (qt_count + 1) / 2;
    long plane = (long)g->positions * 4;
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
            int plane0, offset;
            dt_conv_bf16_step(s, g, kt, &plane0, &offset);
            const dt_bf16 *b0 = xv + ((size_t)plane0 * g->positions + qt * 16 + offset) * 2;
            size_t ka = (size_t)kt * TILE_ELEMS;
            tile_step_2x2(a0 + ka, a1 + ka, 64, b0, b0 + 32, plane, two_m, two_q);
        }
        float *y0 = yq + (size_t)mt * 16 * g->qpad + qt * 16;
        int rows0 = s->k - mt * 16;
        tile_store_2x2(y0, g->qpad, rows0, two_m, two_q);
    }
}

/* Up to three taps' accumulators (tiles 0-2: taps t0, t0 + 1, t0 + 2) of a block of at most
 * 16 output x 16 input channels, to and from dwt [k][tap][16] (tile.h's STORE_ROWS and
 * LOAD_ROWS: `rows` output channels). */
static inline void taps3_store(float *dwt, int t0, int nt, long row, int rows)
{
    long ystride = row * 4;
    _Alignas(64) float buf[256];
    STORE_ROWS(0, rows, dwt + (size_t)t0 * 16, row);
    if (nt > 1)
        STORE_ROWS(1, rows, dwt + (size_t)(t0 + 1) * 16, row);
    if (nt > 2)
        STORE_ROWS(2, rows, dwt + (size_t)(t0 + 2) * 16, row);
}

static inline void taps3_load(const float *dwt, int t0, int nt, long row, int rows)
{
    long ystride = row * 4;
    _Alignas(64) float buf[256];
    LOAD_ROWS(0, rows, dwt + (size_t)t0 * 16, row);
    if (nt > 1)
        LOAD_ROWS(1, rows, dwt + (size_t)(t0 + 1) * 16, row);
    if (nt > 2)
        LOAD_ROWS(2, rows, dwt + (size_t)(t0 + 2) * 16, row);
}

/* The weight gradient of a layer of at most 16 output and 16 input channels (a ResNet's first
 * stage), where a block is one accumulator tile per tap and each product loaded both its
 * operands: three taps at a time share each dY-row tile (A, tile 3), loaded once for their
 * three products (4 tile loads per 3 products, not 6). Each tap's accumulator adds the same
 * products in the same order as one tap at a time: the same bits. */
static void weight_grad_taps3(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                              int n, const dt_bf16 *dyq, const dt_bf16 *even, const dt_bf16 *odd,
                              float *dwt, bool accumulate)
{
    int taps = s->kh * s->kw, groups = (taps + 2) / 3;
    long astride = (long)g->qrow * 2, bstride = 16 * 4, row = (long)taps * 16;
#pragma omp parallel for schedule(dynamic) if (!omp_in_parallel() && groups > 1)
    for (int grp = 0; grp < groups; grp++) {
        TILE_BEGIN();
        int t0 = 3 * grp, nt = taps - t0 < 3 ? taps - t0 : 3, shift[3] = {0, 0, 0};
        const dt_bf16 *copy[3] = {even, even, even};
        for (int j = 0; j < nt; j++) {
            int ij = t0 + j;
            shift[j] = ij / s->kw * g->wp + ij % s->kw;
            copy[j] = shift[j] % 2 ? odd : even;
        }
        if (!accumulate) {
            TILE_ZERO(0);
            TILE_ZERO(1);
            TILE_ZERO(2);
        } else {
            taps3_load(dwt, t0, nt, row, s->k);
        }
        for (int i = 0; i < n; i++) {
            const dt_bf16 *a = dyq + i * g->dyq;
            size_t x = (size_t)i * g->xt;
            for (int q = 0; q < g->qrow; q += 32) {
                TILE_LOAD(3, a + q, astride);
                TILE_LOAD(4, copy[0] + x + (size_t)((q + shift[0]) / 2) * 32, bstride);
                TILE_DPBF16(0, 3, 4);
                if (nt > 1) {
                    TILE_LOAD(5, copy[1] + x + (size_t)((q + shift[1]) / 2) * 32, bstride);
                    TILE_DPBF16(1, 3, 5);
                }
                if (nt > 2) {
                    TILE_LOAD(6, copy[2] + x + (size_t)((q + shift[2]) / 2) * 32, bstride);
                    TILE_DPBF16(2, 3, 6);
                }
            }
        }
        taps3_store(dwt, t0, nt, row, s->k);
    }
}

/* dwt [k][tap][c16] over n samples: blocks of 2 x 2 accumulator tiles (32 output channels x
 * 32 input channels of one tap) kept in the tiles across every sample's positions. A: dY
 * rows, 16 channels x 32 positions at stride qrow. B: 16 position pairs x 16 channels from
 * the copy whose pairs start at the tap's parity. */
void DT_ISA_FN(dt_conv_bf16_weight_grad)(const struct dt_conv_shape *s,
                                         const struct dt_conv_bf16_geom *g, int n,
                                         const dt_bf16 *dyq, const dt_bf16 *even,
                                         const dt_bf16 *odd, float *dwt, bool accumulate)
{
    int taps = s->kh * s->kw, mt_count = (s->k + 15) / 16, ct_count = g->c16 / 16;
    if (mt_count == 1 && ct_count == 1) {
        weight_grad_taps3(s, g, n, dyq, even, odd, dwt, accumulate);
        return;
    }
    int mb = (mt_count + 1) / 2, cb = (ct_count + 1) / 2, blocks = mb * cb * taps;
    long astride = (long)g->qrow * 2, bstride = (long)g->c16 * 4;
#pragma omp parallel for schedule(dynamic) if (!omp_in_parallel() && blocks > 1)
    for (int blk = 0; blk < blocks; blk++) {
        TILE_BEGIN();
        int ij = blk % taps, mt = 2 * (blk / taps / cb), ct = 2 * (blk / taps % cb);
        bool two_m = mt + 1 < mt_count, two_c = ct + 1 < ct_count;
        int shift = ij / s->kw * g->wp + ij % s->kw;
        const dt_bf16 *copy = shift % 2 ? odd : even;
        float *y0 = dwt + ((size_t)mt * 16 * taps + ij) * g->c16 + ct * 16;
        int rows0 = s->k - mt * 16;
        if (!accumulate) {
            TILE_ZERO(0);
            TILE_ZERO(1);
            TILE_ZERO(2);
            TILE_ZERO(3);
        } else {
            tile_load_2x2(y0, taps * g->c16, rows0, two_m, two_c);
        }
        for (int i = 0; i < n; i++) {
            const dt_bf16 *a0 = dyq + i * g->dyq + (size_t)mt * 16 * g->qrow;
            const dt_bf16 *x = copy + i * g->xt;
            for (int q = 0; q < g->qrow; q += 32) {
                const dt_bf16 *b0 = x + ((size_t)((q + shift) / 2) * g->c16 + ct * 16) * 2;
                tile_step_2x2(a0 + q, a0 + (size_t)16 * g->qrow + q, astride, b0, b0 + 32, bstride,
                              two_m, two_c);
            }
        }
        tile_store_2x2(y0, taps * g->c16, rows0, two_m, two_c);
    }
}

/* Channels-last forward (conv_bf16.h): A = 16 positions x 32 channels read in place from xc
 * (one contiguous 1 KB run), B = the packed weights, blocks of 2 x 2 accumulator tiles (32
 * positions x 32 output channels), each stored as one contiguous 1 KB run of yc. */
void DT_ISA_FN(dt_conv_bf16_forward_cl)(const struct dt_conv_shape *s,
                                        const struct dt_conv_bf16_geom *g, const dt_bf16 *xc,
                                        const dt_bf16 *wp, float *yc)
{
    int cb_count = g->cpad / 32, kt_count = s->kh * s->kw * cb_count;
    int qt_count = g->qpad / 16, nt_count = (s->k + 15) / 16;
    int qb = (qt_count + 1) / 2, nb = (nt_count + 1) / 2;
#pragma omp parallel for schedule(static) if (!omp_in_parallel() && qb * nb > 1 &&                 \
                                              (double)g->q * s->k * kt_count * 32 > 4e6)
    for (int blk = 0; blk < qb * nb; blk++) {
        TILE_BEGIN();
        int qt = 2 * (blk % qb), nt = 2 * (blk / qb);
        bool two_q = qt + 1 < qt_count, two_n = nt + 1 < nt_count;
        const dt_bf16 *b0 = wp + (size_t)nt * kt_count * TILE_ELEMS;
        const dt_bf16 *b1 = b0 + (size_t)kt_count * TILE_ELEMS;
        TILE_ZERO(0);
        TILE_ZERO(1);
        TILE_ZERO(2);
        TILE_ZERO(3);
        for (int kt = 0; kt < kt_count; kt++) {
            int ij = kt / cb_count, cb = kt % cb_count;
            int at = qt * 16 + ij / s->kw * g->wp + ij % s->kw;
            const dt_bf16 *a0 = xc + ((size_t)cb * g->positions + at) * 32;
            size_t kb = (size_t)kt * TILE_ELEMS;
            tile_step_2x2(a0, a0 + 16 * 32, 64, b0 + kb, b1 + kb, 64, two_q, two_n);
        }
        /* Accumulator (q tile, n tile) = 16 positions x 16 channels: yc's block of 16
         * channels, 16 consecutive positions, 64 bytes each. */
        float *y00 = yc + ((size_t)nt * g->qpad + (size_t)qt * 16) * 16;
        TILE_STORE(0, y00, 64);
        if (two_n)
            TILE_STORE(1, y00 + (size_t)g->qpad * 16, 64);
        if (two_q)
            TILE_STORE(2, y00 + 256, 64);
        if (two_q && two_n)
            TILE_STORE(3, y00 + (size_t)g->qpad * 16 + 256, 64);
    }
}

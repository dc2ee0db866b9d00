/* bf16 convolution, stride 1, as an implicit GEMM on tiles (nn/kernels/bf16/tile.h).
 *
 * The product is Y[k][q] = W[k][(i, j, c)] * X[(i, j, c)][q]: output channels are the tile
 * rows (A = the weights, packed once per step, gemm_bf16.h's A layout with K in (i, j, c)
 * order and c running to cpad = C rounded up to 32), output positions the tile columns.
 *
 * X is read in place from one sample's input converted once into channel-pair planes:
 * xv[cpad / 2][positions][2], the zero-padded plane flattened (Wp = W + 2 pad wide) with the
 * two channels of a pair side by side, which is exactly the VNNI row a B tile wants. Output
 * positions are counted over the padded width, q = oh * Wp + ow, so for kernel offset (i, j)
 * the input of q is position q + i * Wp + j: a B tile is 16 pair planes (32 channels) x 16
 * consecutive positions, 16 rows of 64 contiguous bytes at one stride, with no im2col copy.
 * Positions with ow >= OW (2 pad per row) are computed and dropped, about 2 pad / Wp of the
 * work. The conversion from fp32 NCHW reads two channel rows and interleaves them.
 *
 * The accumulators are stored as they are into yq[k][qpad] (fp32, positions over the padded
 * width); dt_conv_bf16_compact() then writes the NCHW output, bias added, one row copy per
 * (k, oh). A consumer that reads the padded-width layout itself can skip that pass.
 *
 * Paths as gemm_bf16.h: "amx", "avx512bf16" and "ctile" (the same source over VDPBF16PS and
 * plain-C tiles) and "reference"
 * (fp32 arithmetic on the same bf16 values). */
#ifndef DT_NN_KERNELS_CONV_BF16_H
#define DT_NN_KERNELS_CONV_BF16_H

#include <stddef.h>
#include <stdint.h>

#include "nn/kernels/fp32/bn_grad.h"     /* struct dt_bn_relu, dt_bn_grad */
#include "nn/kernels/fp32/conv_direct.h" /* struct dt_conv_shape */
#include "nn/kernels/bf16/gemm_bf16.h"
#include "nn/kernels/fp32/pool.h" /* struct dt_pool_grad */

/* Derived sizes of a stride-1 shape. */
struct dt_conv_bf16_geom {
    int cpad;      /* channels rounded up to 32 */
    int hp, wp;    /* padded plane */
    int oh, ow;    /* output plane */
    int q;         /* output positions over the padded width: oh * wp */
    int qpad;      /* q rounded up to whole tiles (16) */
    int positions; /* positions of each pair plane of the input (tail included) */
    /* Tap pairing (channels <= 16): the 16 padding channels of a 32-deep step carry the next
     * kernel tap instead of zeros. Pair planes 8-15 of xv then hold planes 0-7 shifted one
     * position on (plane 8 + p at position q = plane p at q + 1), so one B tile at a tap's
     * offset reads taps (i, j) and (i, j + 1): a 3x3 kernel takes 6 steps, not 9. */
    bool tap_pairs;
    int steps;    /* K steps of the pair-plane forward: kh kw cpad / 32, or kh ceil(kw / 2) */
    size_t xv;    /* bf16 elements of one sample's converted input: cpad * positions */
    size_t yq;    /* floats of one sample's padded-width output: k * qpad */
    size_t wpack; /* bf16 elements of the packed weights (either variant) */
    size_t ycl;   /* floats of one sample's channels-last output: k (to 16) * qpad */
    /* The weight gradient's operands (dt_conv_bf16_weight_grad): */
    int qrow;   /* dY row length: q rounded up to 32 (one A tile's depth) */
    int c16;    /* channels rounded up to 16 (one B tile's width) */
    int pairs;  /* position pairs of each position-pair copy of the input */
    size_t dyq; /* bf16 elements of one sample's dY rows: k (to a multiple of 16) * qrow */
    size_t xt;  /* bf16 elements of one position-pair copy: pairs * c16 * 2 */
    size_t dwt; /* floats of the gradient in tap-major order: k * kh * kw * c16 */
};

/* 0, or -DT_EUSAGE when the kernels do not take this shape (stride 1 only, positive sizes). */
int dt_conv_bf16_geometry(const struct dt_conv_shape *s, struct dt_conv_bf16_geom *g);

/* w [K][C][kh][kw] fp32 -> packed A (g->wpack elements), rounded to nearest even. */
void dt_conv_bf16_pack_weights(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                               const float *w, dt_bf16 *wp);

/* The input gradient of a stride-1 convolution s is the stride-1 convolution t of dY
 * [K][OH][OW] with the weights transposed and rotated by 180 degrees, padded kh - 1 - pad
 * (square kernels with pad <= kh - 1, as every model here has): t's input is dY, its output
 * dX [C][H][W]. Fills t from s. */
void dt_conv_bf16_input_grad_shape(const struct dt_conv_shape *s, struct dt_conv_shape *t);

/* s's weights w [K][C][kh][kw] packed as A for t (dt_conv_bf16_input_grad_shape), g = t's
 * geometry. Then dX = compact(forward(pad_input(t, dY), wp)). */
void dt_conv_bf16_pack_weights_input_grad(const struct dt_conv_shape *t,
                                          const struct dt_conv_bf16_geom *g, const float *w,
                                          dt_bf16 *wp);

/* Pair-plane forward step kt: the first channel pair plane its B tile reads and the offset
 * of its (first) kernel tap, i Wp + j. */
static inline void dt_conv_bf16_step(const struct dt_conv_shape *s,
                                     const struct dt_conv_bf16_geom *g, int kt, int *plane0,
                                     int *offset)
{
    if (g->tap_pairs) {
        int per_row = (s->kw + 1) / 2;
        *plane0 = 0;
        *offset = kt / per_row * g->wp + 2 * (kt % per_row);
    } else {
        int cb_count = g->cpad / 32, ij = kt / cb_count;
        *plane0 = kt % cb_count * 16;
        *offset = ij / s->kw * g->wp + ij % s->kw;
    }
}

/* One sample's x [C][H][W] fp32 -> xv (g->xv elements, padding and tail zeroed; with
 * tap_pairs the shifted copy too). */
void dt_conv_bf16_pad_input(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                            const float *x, dt_bf16 *xv);
/* The same but writes only the image's elements: for a buffer of this geometry that only
 * this function writes after it was zeroed once, whose padding therefore stays zero (the
 * layers' per-thread buffers: no padding rewritten per sample). */
void dt_conv_bf16_pad_input_image(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                                  const void *x, bool x_bf16, const struct dt_bn_relu *bn,
                                  dt_bf16 *xv);

/* One sample: yq [K][qpad] = conv(xv, wp) over the padded width, on path p. */
void dt_conv_bf16_forward_on(enum dt_bf16_path p, const struct dt_conv_shape *s,
                             const struct dt_conv_bf16_geom *g, const dt_bf16 *xv,
                             const dt_bf16 *wp, float *yq);

/* yq -> y [K][OH][OW], adding b[k] when b is not NULL, then the relu when `relu`, stored as
 * `store` says (bf16.h). `stream`: y is a batch-wide output, not read again soon (the AVX-512
 * build then writes it with non-temporal stores; the plain C has none to use and ignores it;
 * false for a buffer read back at once, e.g. a per-thread one). */
void dt_conv_bf16_compact(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                          const float *yq, const float *b, bool relu, bool stream,
                          enum dt_bf16_store store, void *y);

/* The weight gradient dW[k][c][i][j] = sum over samples and q of dY[k][q] X[c][q + i Wp + j]
 * is a GEMM whose depth is the positions: A = dY as bf16 rows [k][qrow] (zero at the junk
 * columns), read in place; B = the input in position-pair layout, [pairs][c16][2] (two
 * consecutive positions of a channel side by side), in two copies, pairs starting at even
 * and at odd positions, because a tap's shift i Wp + j may be odd. Both are made once per
 * sample and serve all kh kw taps. */
void dt_conv_bf16_dy_rows(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                          const float *dy, dt_bf16 *dyq);
void dt_conv_bf16_position_pairs(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                                 const float *x, dt_bf16 *even, dt_bf16 *odd);
/* Both as pad_input_image: only the image's elements written, into buffers of this geometry
 * zeroed once and written only by these (the layers' chunk buffers). */
void dt_conv_bf16_dy_rows_image(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                                const float *dy, dt_bf16 *dyq);
void dt_conv_bf16_position_pairs_image(const struct dt_conv_shape *s,
                                       const struct dt_conv_bf16_geom *g, const void *x,
                                       bool x_bf16, const struct dt_bn_relu *bn, dt_bf16 *even,
                                       dt_bf16 *odd);

/* dwt [k][kh kw][c16] (fp32) = [dwt +] the sum over n samples (sample i's operands at
 * dyq + i * g->dyq, even/odd + i * g->xt). */
void dt_conv_bf16_weight_grad_on(enum dt_bf16_path p, const struct dt_conv_shape *s,
                                 const struct dt_conv_bf16_geom *g, int n, const dt_bf16 *dyq,
                                 const dt_bf16 *even, const dt_bf16 *odd, float *dwt,
                                 bool accumulate);

/* dwt -> dw [K][C][kh][kw]. */
void dt_conv_bf16_weight_grad_unpack(const struct dt_conv_shape *s,
                                     const struct dt_conv_bf16_geom *g, const float *dwt,
                                     float *dw);

/* yq -> the 2x2 / stride 2 max pool (no padding) of relu(y + b) rounded to bf16, y the output
 * compact() stores with relu and DT_STORE_ROUNDED: py [K][OH / 2][OW / 2] and each window's
 * winner index within the [OH][OW] plane, the bits dt_maxpool_forward gives on compact()'s y
 * (the first maximum, row-major; an odd last row or column in no window). The conv2d ->
 * relu -> maxpool2d forward of the tiles (the pool fusion), without writing y. */
void dt_conv_bf16_compact_pool2x2(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                                  const float *yq, const float *b, float *py, int32_t *argmax);

/* The padded-width input gradient yq of one sample (t = dt_conv_bf16_input_grad_shape's
 * shape, g its geometry) compacted into dx [t->k][OH][OW] through the backward of a relu
 * below: dx = x > 0 ? yq + extra : +0 (the relu layer's bits: dy + extra, then the mask);
 * extra may be NULL, or dx itself (each element is read before it is written). With round,
 * yq is rounded to bf16 first, the conv's own input gradient as a bf16 conv returns it
 * (autocast's): dx = x > 0 ? bf16(yq) + extra : +0, fp32 values.
 *
 * The passes that read the layer's input x (pad_input_image, position_pairs_image and the
 * relu mask of compact_relu_below) read it as fp32, or as bf16 elements when x_bf16 (the
 * model's bf16_store: a batchnorm2d -> relu below stored it so); the same bits either way on
 * the same bf16 values. With bn (the bn_input fusion) x is the input of the batchnorm2d ->
 * relu below, which these passes apply as they read it (dt_conv_bf16_input_at): the bits of
 * the bf16 output that batchnorm would have stored.
 *
 * With sums (bn_grad.h's struct dt_dx_sums: the bn_sums fusion, sums->x then this x, only
 * with bn and x_bf16; the add_sums fusion, the input of the batchnorm whose output reaches x
 * through a relu, or an identity add and a relu), that batchnorm's two backward sums over this
 * sample, its dy being the dx stored here: sums->out[ch] = sum dx, sums->out[t->k + ch] =
 * sum dx * (sums->x - sums->mean[ch]), in double, in bn_grad.h's order (DT_BN_LANES lanes by
 * position in the plane): the bits of the batchnorm's own grad_sums_bf16 on that dx. NULL:
 * none. */
void dt_conv_bf16_compact_relu_below(const struct dt_conv_shape *t,
                                     const struct dt_conv_bf16_geom *g, const float *yq,
                                     const void *x, bool x_bf16, const struct dt_bn_relu *bn,
                                     const float *extra, bool round, float *dx,
                                     const struct dt_dx_sums *sums);

/* Element i of the layer's input, in channel ch, as those passes read it: x as stored, or
 * through the batchnorm2d -> relu below (bn not NULL). */
static inline float dt_conv_bf16_input_at(const void *x, bool x_bf16, const struct dt_bn_relu *bn,
                                          int ch, size_t i)
{
    float v = dt_act_at(x, x_bf16, i);
    return bn ? dt_bn_relu_value(bn, ch, v) : v;
}

/* The backward of the maxpool2d above this conv2d -> relu (the pool_grad fusion) for one sample,
 * laid out at once as the conv's backward operands: dY rows (dy_rows_image's) and, unless xv is
 * NULL, the input gradient's pair planes (pad_input_image's for t, dt_conv_bf16_input_grad_shape,
 * gt its geometry, reading dY), both only the image's elements, from the pool's dy, winners and
 * output (pool's relu mask). The bits of dt_maxpool_backward_sample's dY through those two
 * passes, without that fp32 dY [K][OH][OW] written and read twice. A 2x2 / stride 2 pool
 * without padding over an even OH and OW only (dt_conv_bf16_unpool_fits). */
bool dt_conv_bf16_unpool_fits(const struct dt_conv_bf16_geom *g, const struct dt_pool_grad *pool);
void dt_conv_bf16_unpool_image(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                               const struct dt_conv_shape *t, const struct dt_conv_bf16_geom *gt,
                               const struct dt_pool_grad *pool, int sample, dt_bf16 *dyq,
                               dt_bf16 *xv);

/* The same from the gradient dy at the output of the batchnorm2d above (the bn_grad fusion;
 * dy and bn's input from sample 0 on, [sample][K][OH][OW]): the batchnorm's input gradient
 * (bn_grad.h's formula, the bits of its input_grad loop) laid out as the two operands, without
 * the fp32 dY between. */
void dt_conv_bf16_bn_dy_image(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                              const struct dt_conv_shape *t, const struct dt_conv_bf16_geom *gt,
                              const struct dt_bn_grad *bn, const float *dy, int sample,
                              dt_bf16 *dyq, dt_bf16 *xv);

/* One sample's bias gradient part per channel from its k dY rows of qrow (a multiple of 16)
 * bf16 at dyq (the bf16-rounded dy, zero at the junk columns) while they are in cache: 16
 * interleaved partial sums in float, lane j taking positions j, j + 16, ... in order, then
 * added pairwise (lane j += lane j + w for w = 8, 4, 2, 1), the same bits in every build (one
 * sequential sum would cost an add's latency per element). */
void dt_conv_bf16_bias_parts(const dt_bf16 *dyq, int k, int qrow, float *part);

/* The layout passes of one build, with the plain C's signatures above. Each build writes the
 * same bits; they differ only in speed. */
struct dt_conv_bf16_layout {
    const char *name; /* for benchmark headers: "plain C", "avx512" */
    void (*pad_input_image)(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                            const void *x, bool x_bf16, const struct dt_bn_relu *bn, dt_bf16 *xv);
    void (*compact)(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                    const float *yq, const float *b, bool relu, bool stream,
                    enum dt_bf16_store store, void *y);
    void (*compact_pool2x2)(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                            const float *yq, const float *b, float *py, int32_t *argmax);
    void (*compact_relu_below)(const struct dt_conv_shape *t, const struct dt_conv_bf16_geom *g,
                               const float *yq, const void *x, bool x_bf16,
                               const struct dt_bn_relu *bn, const float *extra, bool round,
                               float *dx, const struct dt_dx_sums *sums);
    void (*dy_rows_image)(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                          const float *dy, dt_bf16 *dyq);
    void (*position_pairs_image)(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                                 const void *x, bool x_bf16, const struct dt_bn_relu *bn,
                                 dt_bf16 *even, dt_bf16 *odd);
    void (*bias_parts)(const dt_bf16 *dyq, int k, int qrow, float *part);
    void (*unpool_image)(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                         const struct dt_conv_shape *t, const struct dt_conv_bf16_geom *gt,
                         const struct dt_pool_grad *pool, int sample, dt_bf16 *dyq, dt_bf16 *xv);
    void (*bn_dy_image)(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                        const struct dt_conv_shape *t, const struct dt_conv_bf16_geom *gt,
                        const struct dt_bn_grad *bn, const float *dy, int sample, dt_bf16 *dyq,
                        dt_bf16 *xv);
};

/* The layout passes path p runs: the amx and avx512bf16 paths an AVX-512 build
 * (conv_bf16_layout.isa.c), every other path the plain C above. */
const struct dt_conv_bf16_layout *dt_conv_bf16_layout_on(enum dt_bf16_path p);

/* Channels-last variant of the forward product, the layout a channels-last bf16 network would
 * keep between layers: the input as xc[cpad / 32][positions][32] (one position's 32 channels
 * of a block side by side), read as A (16 positions x 32 channels: 16 consecutive 64-byte rows,
 * one 1 KB run); the weights packed as B (gemm_bf16.h's layout, K in (i, j, c) order); the
 * output as yc[K16 / 16][qpad][16] fp32 (16 channels of one position side by side), stored
 * with one contiguous tile store. Sizes: g->xv for xc, g->ycl for yc, g->wpack for the
 * weights. pad_input_cl and compact_cl convert from and to NCHW for tests and benchmarks. */
void dt_conv_bf16_pack_weights_cl(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                                  const float *w, dt_bf16 *wp);
void dt_conv_bf16_pad_input_cl(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                               const float *x, dt_bf16 *xc);
void dt_conv_bf16_compact_cl(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                             const float *yc, const float *b, float *y);
/* On path p (a tile path; the reference path runs the ctile build). */
void dt_conv_bf16_forward_cl_on(enum dt_bf16_path p, const struct dt_conv_shape *s,
                                const struct dt_conv_bf16_geom *g, const dt_bf16 *xc,
                                const dt_bf16 *wp, float *yc);

/* The per-ISA builds of conv_bf16.isa.c. */
void dt_conv_bf16_forward_amx(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                              const dt_bf16 *xv, const dt_bf16 *wp, float *yq);
void dt_conv_bf16_forward_avx512bf16(const struct dt_conv_shape *s,
                                     const struct dt_conv_bf16_geom *g, const dt_bf16 *xv,
                                     const dt_bf16 *wp, float *yq);
void dt_conv_bf16_forward_ctile(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                                const dt_bf16 *xv, const dt_bf16 *wp, float *yq);
void dt_conv_bf16_forward_cl_amx(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                                 const dt_bf16 *xc, const dt_bf16 *wp, float *yc);
void dt_conv_bf16_forward_cl_avx512bf16(const struct dt_conv_shape *s,
                                        const struct dt_conv_bf16_geom *g, const dt_bf16 *xc,
                                        const dt_bf16 *wp, float *yc);
void dt_conv_bf16_forward_cl_ctile(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                                   const dt_bf16 *xc, const dt_bf16 *wp, float *yc);
void dt_conv_bf16_weight_grad_amx(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                                  int n, const dt_bf16 *dyq, const dt_bf16 *even,
                                  const dt_bf16 *odd, float *dwt, bool accumulate);
void dt_conv_bf16_weight_grad_avx512bf16(const struct dt_conv_shape *s,
                                         const struct dt_conv_bf16_geom *g, int n,
                                         const dt_bf16 *dyq, const dt_bf16 *even,
                                         const dt_bf16 *odd, float *dwt, bool accumulate);
void dt_conv_bf16_weight_grad_ctile(const struct dt_conv_shape *s,
                                    const struct dt_conv_bf16_geom *g, int n, const dt_bf16 *dyq,
                                    const dt_bf16 *even, const dt_bf16 *odd, float *dwt,
                                    bool accumulate);

/* The AVX-512 builds of the layout passes (conv_bf16_layout.isa.c), one per path that has
 * AVX-512: the same code, each built with its path's flags. */
extern const struct dt_conv_bf16_layout dt_conv_bf16_layout_amx, dt_conv_bf16_layout_avx512bf16;

#endif

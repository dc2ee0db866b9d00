/* bf16 convolution, stride 1, as an implicit GEMM on tiles (nn/kernels/tile.h).
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
 * Paths as gemm_bf16.h: "amx", "ctile" (the same source over plain-C tiles) and "reference"
 * (fp32 arithmetic on the same bf16 values). */
#ifndef DT_NN_KERNELS_CONV_BF16_H
#define DT_NN_KERNELS_CONV_BF16_H

#include <stddef.h>

#include "nn/conv_direct.h" /* struct dt_conv_shape */
#include "nn/kernels/gemm_bf16.h"

/* Derived sizes of a stride-1 shape. */
struct dt_conv_bf16_geom {
    int cpad;      /* channels rounded up to 32 */
    int hp, wp;    /* padded plane */
    int oh, ow;    /* output plane */
    int q;         /* output positions over the padded width: oh * wp */
    int qpad;      /* q rounded up to whole tiles (16) */
    int positions; /* positions of each pair plane of the input (tail included) */
    size_t xv;     /* bf16 elements of one sample's converted input: cpad * positions */
    size_t yq;     /* floats of one sample's padded-width output: k * qpad */
    size_t wpack;  /* bf16 elements of the packed weights */
};

/* 0, or -DT_EUSAGE when the kernels do not take this shape (stride 1 only, positive sizes). */
int dt_conv_bf16_geometry(const struct dt_conv_shape *s, struct dt_conv_bf16_geom *g);

/* w [K][C][kh][kw] fp32 -> packed A (g->wpack elements), rounded to nearest even. */
void dt_conv_bf16_pack_weights(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                               const float *w, dt_bf16 *wp);

/* One sample's x [C][H][W] fp32 -> xv (g->xv elements, padding and tail zeroed). */
void dt_conv_bf16_pad_input(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                            const float *x, dt_bf16 *xv);

/* One sample: yq [K][qpad] = conv(xv, wp) over the padded width, on path p. */
void dt_conv_bf16_forward_on(enum dt_bf16_path p, const struct dt_conv_shape *s,
                             const struct dt_conv_bf16_geom *g, const dt_bf16 *xv,
                             const dt_bf16 *wp, float *yq);

/* yq -> y [K][OH][OW], adding b[k] when b is not NULL. */
void dt_conv_bf16_compact(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                          const float *yq, const float *b, float *y);

/* The per-ISA builds of conv_bf16.isa.c. */
void dt_conv_bf16_forward_amx(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                              const dt_bf16 *xv, const dt_bf16 *wp, float *yq);
void dt_conv_bf16_forward_ctile(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                                const dt_bf16 *xv, const dt_bf16 *wp, float *yq);

#endif

/* im2col / col2im for the GEMM convolution: plain pointers and a shape (kh == kw; s->n unused,
 * `batch` samples). col is [c * kh * kw][batch * oh * ow], row r = (c, ky, kx), column
 * b * oh * ow + oy * ow + ox; x and dx are [batch][c][h][w]. */
#ifndef DT_NN_KERNELS_FP32_IM2COL_H
#define DT_NN_KERNELS_FP32_IM2COL_H

#include "nn/kernels/fp32/conv_direct.h" /* struct dt_conv_shape */

/* col = the input pixel under each kernel tap of each output pixel, 0 in the padding. */
void dt_im2col(const struct dt_conv_shape *s, const float *x, float *col, int batch);

/* dx = the adjoint of im2col: every column entry added into the pixel it came from
 * (overwrites dx). */
void dt_col2im(const struct dt_conv_shape *s, const float *col, float *dx, int batch);

#endif

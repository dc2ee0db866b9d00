/* Winograd F(4x4, 3x3) convolution kernels for 3x3 convolutions, stride 1 (or 2: the stride-1
 * grid, every other pixel kept), float32, NCHW.
 *
 * The third conv2d algorithm, next to im2col + sgemm and the direct kernels
 * (nn/kernels/fp32/conv_direct.h). Each 4x4 block of output is computed from a 6x6 block of input
 * with 36 multiplications per channel pair instead of 144, so at channel counts where the
 * elementwise stage dominates (the ConvNet's 16->32 conv) all three passes run about three times
 * fewer flops than direct. Same layouts and the same contract as the direct kernels: activations
 * [N][C][H][W], weights [K][C][3][3]; check dt_conv_winograd_supported() once at layer setup, size
 * the scratch with dt_conv_winograd_scratch_floats() for the thread count you will pass, then call
 * the kernels. Each kernel runs an OpenMP team of `threads` threads and partitions work by sample;
 * the weight gradient reduces per-thread partials in thread order, so results are bit-identical run
 * to run for a fixed thread count. Nothing is allocated.
 *
 * Precision: the transforms (points 0, +-1, +-2, infinity) add rounding that direct summation
 * does not have; on data of unit scale the results agree with a double-precision reference to
 * about 1e-6 of the largest magnitude (tests/unit/test_conv_winograd.c checks 1e-4 relative to
 * max |ref| with wide margin). There is no portable path: the kernels need AVX-512 or AVX2 + FMA
 * at run time (both give the same bits).
 */
#ifndef DT_NN_CONV_WINOGRAD_H
#define DT_NN_CONV_WINOGRAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nn/kernels/fp32/bn_grad.h"
#include "nn/kernels/fp32/conv_direct.h" /* struct dt_conv_shape */

/* True when the kernels handle this shape on this CPU: all sizes positive, a 3x3 kernel,
 * stride 1 or 2, pad 0 or 1, a non-empty output, tensors small enough for int indexing, and
 * AVX-512F or AVX2 + FMA at run time (dt_conv_simd_lanes() > 0). Any channel counts. */
bool dt_conv_winograd_supported(const struct dt_conv_shape *s);

/* True when Winograd is expected to beat the direct kernels on this shape (a measured rule on
 * the channel counts, see the top of nn/kernels/fp32/conv_winograd.c); implies supported. */
bool dt_conv_winograd_preferred(const struct dt_conv_shape *s);

/* Floats of scratch any of the three kernels needs for this shape and up to `threads` threads
 * (0 for an unsupported shape). No alignment or initialisation needed (64-byte alignment is
 * faster). */
size_t dt_conv_winograd_scratch_floats(const struct dt_conv_shape *s, int threads);

/* Floats of a forward-transformed filter (dt_conv_winograd_filter). */
size_t dt_conv_winograd_filter_floats(const struct dt_conv_shape *s);

/* Transforms the weights w [K][C][3][3] into u (dt_conv_winograd_filter_floats floats), for
 * dt_conv_winograd_forward_filtered: callers that convolve one batch in several calls
 * (chunks of samples) transform once. Single-threaded; returns 0 or -DT_EUSAGE. */
int dt_conv_winograd_filter(const struct dt_conv_shape *s, const float *w, float *u);

/* y = conv(x, w) + b, ReLU applied at the store when relu != 0; b may be NULL. Returns 0, or
 * -DT_EUSAGE (unsupported shape, scratch smaller than the size query). */
int dt_conv_winograd_forward(const struct dt_conv_shape *s, const float *x, const float *w,
                             const float *b, float *y, int relu, float *scratch,
                             size_t scratch_floats, int threads);

/* The same with the filter already transformed by dt_conv_winograd_filter (u may be the start
 * of the scratch, where dt_conv_winograd_forward puts it, or separate memory). Bit-identical to
 * dt_conv_winograd_forward. */
int dt_conv_winograd_forward_filtered(const struct dt_conv_shape *s, const float *x, const float *u,
                                      const float *b, float *y, int relu, float *scratch,
                                      size_t scratch_floats, int threads);

/* Both gradients in one pass over the samples (dy is transformed once for both): the weight
 * gradient as dt_conv_winograd_backward_weight when dw is not NULL (x needed then), the input
 * gradient as dt_conv_winograd_backward_input when dx is not NULL (w needed then). The results
 * are the same bits as the two separate calls. With relu_below, x is a relu's output and dx
 * the gradient at the relu's input: the input gradient plus extra (laid out as dx, or NULL:
 * what else reached the relu's output, e.g. through a skip connection), 0 where x is not > 0;
 * the same bits as the relu's backward after (x needed then). With bn (NULL: none), dy is the
 * gradient at the output of a batchnorm2d whose input bn->x is this conv's output [N][K][OH][OW],
 * and the conv's output gradient is that batchnorm's input gradient, computed as dy is read:
 * the same bits as passing the gradient the batchnorm's backward writes. */
int dt_conv_winograd_backward(const struct dt_conv_shape *s, const float *x, const float *dy,
                              const struct dt_bn_grad *bn, const float *w, float *dw, float *db,
                              float *dx, bool relu_below, const float *extra, float *scratch,
                              size_t scratch_floats, int threads);

/* dt_conv_winograd_forward_filtered followed by a 2x2 stride-2 max-pool (torch.nn.MaxPool2d(2),
 * dropping an odd last row or column): y [N][K][OH/2][OW/2] gets the maxima of the (biased,
 * ReLU'd when relu) outputs, argmax (same shape) the index of each winner in its [OH][OW]
 * output plane, with nn/layer_maxpool2d.c's rule (the first maximum in row-major window order;
 * a NaN wins). The full output is never stored; the values are the same bits as pooling the
 * forward's output. Needs OH, OW >= 2 and stride 1. */
int dt_conv_winograd_forward_pool2(const struct dt_conv_shape *s, const float *x, const float *u,
                                   const float *b, float *y, int32_t *argmax, int relu,
                                   float *scratch, size_t scratch_floats, int threads);

/* The bf16 model's emulated mode on this algorithm (nn/bf16_layers.h; the weights w, or the
 * filter u was made from, are already rounded to bf16): the kernels above with their bf16
 * operands rounded as the kernels read them, not in passes of their own. Forward (argmax NULL:
 * dt_conv_winograd_forward_filtered, else dt_conv_winograd_forward_pool2) rounds x; backward
 * (dt_conv_winograd_backward) rounds x, and dy after bn's backward, and rounds the input
 * gradient before extra is added and the relu's mask applied. The same bits as rounding x and
 * the conv's output gradient in passes before the fp32 call and its own input gradient after
 * it, as autocast's bf16 conv returns it. With x_bf16, x (and so the relu's mask) is stored as
 * bf16 elements (a bf16 model's bf16_store, nn/fusion.h): read widened, half the bytes, and
 * not rounded again. */
int dt_conv_winograd_forward_bf16(const struct dt_conv_shape *s, const void *x, bool x_bf16,
                                  bool products, const float *u, const float *b, float *y,
                                  int32_t *argmax, int relu, float *scratch, size_t scratch_floats,
                                  int threads);
int dt_conv_winograd_backward_bf16(const struct dt_conv_shape *s, const void *x, bool x_bf16,
                                   bool products, const float *dy, const struct dt_bn_grad *bn,
                                   const float *w, float *dw, float *db, float *dx, bool relu_below,
                                   const float *extra, float *scratch, size_t scratch_floats,
                                   int threads);

/* With `products` (train.bf16_winograd) the two above also multiply in bf16 in the Winograd
 * domain: the transformed input V, the transformed filter U (U^T) and the transformed output
 * gradient dM are rounded to bf16 and their products, pairs of channels (of tiles in the weight
 * gradient) at a time, accumulate in fp32: VDPBF16PS where the avx512bf16 build runs (the
 * avx512bf16 and amx paths), its arithmetic in FMAs elsewhere (the same values but for the
 * instruction's order of the pair's two products and its flushing of denormals). Half the cost
 * of the fp32 products on Zen 4, and not autocast's numerics: V and dM are rounded after the
 * transforms, which adds their error (docs/bf16.md, "bf16 products in the Winograd domain").
 * The forward's u then comes from dt_conv_winograd_filter_bf16: the filter transform rounded
 * and packed in pairs of input channels (the same floats of scratch). */
int dt_conv_winograd_filter_bf16(const struct dt_conv_shape *s, const float *w, float *u);

/* dw[k][c][i][j] += sum over samples and output pixels of dy * x; db[k] += sum of dy (db may
 * be NULL). Accumulates, so the caller zeroes gradients once per step. */
int dt_conv_winograd_backward_weight(const struct dt_conv_shape *s, const float *x, const float *dy,
                                     float *dw, float *db, float *scratch, size_t scratch_floats,
                                     int threads);

/* dx = the input gradient of the convolution (overwrites dx). */
int dt_conv_winograd_backward_input(const struct dt_conv_shape *s, const float *dy, const float *w,
                                    float *dx, float *scratch, size_t scratch_floats, int threads);

#endif

/* Element-wise kernels: relu, gelu, the residual add, dropout's mask, and the copies and sums
 * that carry gradients between skip connections. Plain pointers and counts (n floats), never
 * a layer, so each is tested alone (tests/unit/test_elementwise.c); the layers
 * (nn/layer_relu.c, layer_gelu.c, layer_add.c, layer_dropout.c) and the model's gradient
 * bookkeeping (nn/model.c) call them. Built once, for the binary's x86-64-v2: the loops
 * autovectorise (SSE) and go parallel over OpenMP above DT_PARALLEL_MIN (`if (parallel : ...)`:
 * a plain `if` on `parallel for simd` turns the simd off below the threshold too). */
#ifndef DT_NN_KERNELS_FP32_ELEMENTWISE_H
#define DT_NN_KERNELS_FP32_ELEMENTWISE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* y = max(x, 0). */
void dt_relu_forward(const float *x, float *y, long n);

/* dx = dy (+ extra, when extra is not NULL) where y > 0, else 0: the mask is read from relu's
 * output (y > 0 exactly where x > 0; the gradient at 0 is 0, as in PyTorch). */
void dt_relu_backward(const float *y, const float *dy, const float *extra, float *dx, long n);

/* y = x * Phi(x), torch.nn.GELU()'s exact (erf) form. */
void dt_gelu_forward(const float *x, float *y, long n);

/* dx = dy * (Phi(x) + x * phi(x)), phi the standard normal density. */
void dt_gelu_backward(const float *x, const float *dy, float *dx, long n);

/* y = x + s, or relu(x + s) when relu is set (a relu fused at the store); with round_skip s
 * is read rounded to bf16 (a bf16 model's identity add, struct dt_layer_fwd). */
void dt_add_forward(const float *x, const float *s, float *y, long n, bool relu, bool round_skip);

/* dst = src, over the thread team (one thread's memcpy of a large gradient cost 1.5% of a
 * ResNet step). */
void dt_copy(float *dst, const float *src, long n);

/* dst += src. */
void dt_add_into(float *dst, const float *src, long n);

/* Dropout's mask applied to `batch` samples of units * unit floats each: out = in * scale
 * where the unit's mask byte is set, else 0 (mask: units bytes per sample). Forward (in = x)
 * and backward (in = dy) are the same operation. */
void dt_dropout_apply(const uint8_t *mask, size_t units, size_t unit, float scale, const float *in,
                      float *out, int batch);

#endif

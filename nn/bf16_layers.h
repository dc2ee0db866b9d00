/* The bf16 products of conv2d and linear in a bf16 model (train.precision = "bf16",
 * nn/precision.h); internal to nn/.
 *
 * Each such layer chooses once, at setup, one of two modes and says which in its note (the
 * dry run's and --verbose's "bf16" column):
 *   tiles     the bf16 tile kernels (nn/kernels/bf16/) on the amx or avx512bf16 path, or on the
 *             plain-C ctile build when a test forces it: conv2d with stride 1 and pad < kernel
 *             through conv_bf16 (forward, input gradient through the forward kernel, weight
 *             gradient as a GEMM over positions), conv2d with stride 2 and pad < kernel <= 7
 *             through conv_s2_bf16 (the same three over parity planes), linear through
 *             dt_gemm_bf16 (all three products), conv2d of under 4 input channels whose
 *             channels x taps are 17 to 32, stride 1 or 2, as im2col GEMMs through
 *             dt_gemm_bf16 (the stem mode). Operands are rounded to bf16 as they are
 *             packed; the kernels accumulate in fp32.
 *   emulated  the layer's own fp32 kernels on bf16-rounded copies of its input, its weights and,
 *             in backward, its output gradient: the same products of bf16 values, accumulated
 *             in fp32 (in another order; on Winograd the kernels round as they read, without
 *             copies, and the layer keeps the fp32 algorithm's fusions). This is the reference
 *             path (every CPU without AMX or AVX512-BF16) and the fallback for conv shapes the
 *             tile kernels do not take (stride 3+, pad >= kernel, under 4 input channels outside
 *             the stem mode), named in the note. The avx512bf16 path also runs emulated the
 *             stride-1 convs whose fp32 algorithm is Winograd: F(4x4,3x3) does a quarter of a
 *             direct conv's products, and VDPBF16PS runs at most twice fp32's flops (Zen 4;
 *             half of fp32's on the AMX Xeon: docs/bf16.md, "The avx512bf16 path on Zen 4").
 *             With train.bf16_winograd an emulated mode on Winograd also multiplies in bf16 in
 *             the Winograd domain (dt_conv_winograd_filter_bf16: V, U and dM rounded; not
 *             autocast's numerics), named in the note.
 * Either way the layer keeps a bf16 copy of its weights (packed, or rounded) made from the fp32
 * masters: in a training step by the optimizer step, as it updates them (nn/weight_copy.h),
 * else at the forward call (the layer's forward is told which); weight and bias gradients are
 * written in fp32; bias is added in fp32.
 *
 * Backward reads what the same batch's forward packed (the weights): the model always runs a
 * training forward and then the backward of that batch.
 *
 * Memory: what a layer needs only inside one call (the tiles mode's operand layouts, the
 * emulated mode's rounded x and dy) is in the model's call scratch (nn/call_scratch.h), which
 * all layers share; each layer's bf16 weights are in the model's copy arena (nn/weight_copy.h),
 * which the ranks of one host share (docs/bf16.md, "Memory").
 */
#ifndef DT_NN_BF16_LAYERS_H
#define DT_NN_BF16_LAYERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nn/call_scratch.h"
#include "nn/kernels/fp32/bn_grad.h"     /* struct dt_bn_grad */
#include "nn/kernels/fp32/conv_direct.h" /* struct dt_conv_shape */
#include "nn/kernels/fp32/pool.h"        /* struct dt_pool_grad */

/* ---- emulated mode: rounded copies for the fp32 kernels ----
 * The rounded x and dy live in the model's call scratch, only inside the call that made them:
 * forward rounds x there; backward rounds dy there and, where the fp32 kernel's backward reads
 * x, rounds x again from the same fp32 x, the values forward used (the model keeps every
 * layer's input unchanged until that layer's backward). Kept per batch, the rounded x of
 * every emulated layer would cost as much as its fp32 input (all of them on CPUs without AMX);
 * rounding again costs one pass over x. The rounded weights, which backward reads as forward
 * made them, are the layer's own. */

/* The emulated mode's rounded weights are made in pieces of this many floats when the optimizer
 * step makes them (nn/weight_copy.h; any cut gives the same values). */
#define DT_BF16_ROUNDED_PIECE 16384

/* Where x (nx floats) and dy (ndy floats) rounded go, disjoint, in the call scratch. */
struct dt_bf16_rounded {
    float *x, *dy;
};
/* Call-scratch bytes dt_bf16_rounded_take needs for nx and ndy floats. */
size_t dt_bf16_rounded_bytes(size_t nx, size_t ndy);
void dt_bf16_rounded_take(struct dt_bf16_rounded *r, struct dt_call_scratch *scratch, size_t nx,
                          size_t ndy);
/* dst[0..n) = src rounded to bf16 (nearest even), as floats; returns dst. */
float *dt_bf16_round_into(float *dst, const float *src, size_t n);

/* ---- conv2d ---- */

struct dt_bf16_conv;

/* Chooses the mode of a conv2d of shape s (s->n = max_batch) on the bf16 path in use and
 * writes its note; winograd: the layer's fp32 algorithm, which the emulated mode runs, is
 * Winograd; products (train.bf16_winograd): an emulated mode on Winograd multiplies in bf16 in
 * its domain (dt_conv_winograd_filter_bf16). Allocates only the small state (nothing
 * batch-sized). *copy_bytes: dt_bf16_conv_copy_bytes. 0 or DT_ERUNTIME. */
int dt_bf16_conv_setup(struct dt_bf16_conv **out, const struct dt_conv_shape *s, bool winograd,
                       bool products, double *copy_bytes);
/* The emulated mode on Winograd with bf16 products was chosen (setup's products, not tiles). */
bool dt_bf16_conv_products(const struct dt_bf16_conv *bf);
/* Bytes the tiles mode takes from the call scratch in each forward and backward (0 when
 * emulated: the layer sizes its rounded copies itself, dt_bf16_rounded_bytes). */
size_t dt_bf16_conv_call_bytes(const struct dt_bf16_conv *bf);
/* Bytes of the tiles mode's packed weights, the layer's bf16 weight copy (0 when emulated:
 * the layer keeps its rounded weights itself). */
size_t dt_bf16_conv_copy_bytes(const struct dt_bf16_conv *bf);
/* Binds the tiles mode's packed weights to `copy` (dt_bf16_conv_copy_bytes, 64-byte aligned:
 * the model's copy arena, nn/weight_copy.h, perhaps shared by the ranks of a host); its other
 * buffers are in `scratch`, the model's call scratch of at least dt_bf16_conv_call_bytes. */
void dt_bf16_conv_init(struct dt_bf16_conv *bf, struct dt_call_scratch *scratch, void *copy);
void dt_bf16_conv_free(struct dt_bf16_conv *bf);
/* The tiles mode was chosen; otherwise the layer runs emulated. */
bool dt_bf16_conv_tiles(const struct dt_bf16_conv *bf);
/* "amx", "reference (emulated: ...)", "emulated (...) fallback: stride 2 ..." */
const char *dt_bf16_conv_note(const struct dt_bf16_conv *bf);

/* Where a forward hands each sample's output instead of storing it in y (the pool fusion:
 * the maxpool2d above pools it while it is in cache): fn(ctx, output of sample i, i), on the
 * thread that computed it, for samples in any order. */
struct dt_bf16_conv_sink {
    void (*fn)(void *ctx, const float *y, int sample);
    void *ctx;
    /* Or, for a relu then a 2x2 / stride 2 max pool without padding: where the mode can (the
     * stride-1 tiles, the stem mode; else fn) the conv pools each sample as it compacts its
     * output, which is never written (dt_conv_bf16_compact_pool2x2): sample i's pooled output
     * at pool_y + i * pool_size, its winner indices at pool_argmax + i * pool_size. */
    float *pool_y;
    int32_t *pool_argmax;
    size_t pool_size;
};

/* Whether the tiles mode reads x stored as bf16 (x_bf16 below): on the stride-1 and stride-2
 * tiles; and through a batchnorm2d -> relu below (x_bn): on the stride-1 tiles. */
bool dt_bf16_conv_reads_bf16(const struct dt_bf16_conv *bf);
bool dt_bf16_conv_reads_bn_relu(const struct dt_bf16_conv *bf);
/* The proj_dx fusion's two ends (backward's `even`): DT_DX_EVEN, dx stored at the even rows'
 * even columns only, [C][(H + 1) / 2][(W + 1) / 2] a sample, where the stride-2 tiles' input
 * gradient reaches no other position (dt_bf16_conv_dx_even: a 1x1 projection without padding);
 * DT_EXTRA_EVEN, extra given so (zero elsewhere), on any stride-2 tiles
 * (dt_bf16_conv_extra_even). */
enum { DT_DX_EVEN = 1u << 0, DT_EXTRA_EVEN = 1u << 1 };
bool dt_bf16_conv_dx_even(const struct dt_bf16_conv *bf);
bool dt_bf16_conv_extra_even(const struct dt_bf16_conv *bf);

/* Tiles mode: packs w [K][C][kh][kw] for the forward and the input gradient, the layer's bf16
 * weight copy. */
void dt_bf16_conv_pack_weights(struct dt_bf16_conv *bf, const float *w);
/* Tiles mode. forward: y = conv(x, w) + b (b may be NULL), relu'd when relu, rounded to bf16
 * (autocast's conv output) and stored as bf16 elements when y_bf16 (the model's bf16_store);
 * packs w first unless w is NULL (packed since the weights last changed). x_bf16: x is stored as
 * bf16 elements (only where dt_bf16_conv_reads_bf16), here and in backward (x and relu_x). x_bn
 * (the bn_input fusion, only where dt_bf16_conv_reads_bn_relu): x is the input of a batchnorm2d ->
 * relu below, whose output the conv reads by applying them (nn/kernels/fp32/bn_grad.h), here and in
 * backward; NULL: x is the conv's input. With a sink, y is not written (may be NULL); the sink gets
 * the rounded values. */
void dt_bf16_conv_forward(struct dt_bf16_conv *bf, const float *x, bool x_bf16,
                          const struct dt_bn_relu *x_bn, const float *w, const float *b, float *y,
                          int batch, bool relu, const struct dt_bf16_conv_sink *sink, bool y_bf16);
/* Backward of samples [b0, b0 + count) (pointers are to the whole batch): the weight
 * gradient WRITTEN to g ([K][C][kh][kw], then the bias gradient [K] when bias) and, unless
 * dx is NULL, those samples' input gradient, with the weights the last forward packed. With
 * bn (the bn_grad fusion, nn/kernels/fp32/bn_grad.h) dy is the gradient at the output of the
 * batchnorm above, read through its backward; with pool (the pool_grad fusion) dy is the
 * gradient at the output of the maxpool2d the forward ran, each sample's unpooled into a
 * per-thread buffer as it is read. With relu_x (the relu_below fusion) x is a
 * relu's output (with x_bn, read through it from relu_x, the batchnorm's input) and dx is
 * written as that relu's backward would write it,
 * dx = x > 0 ? dx + extra : 0 (extra, what skip connections sent to the relu's output, may
 * be NULL). The conv's own dx is rounded to bf16 before that (as autocast's bf16 conv returns
 * its input gradient), each sample's by its store. With sums (the bn_sums fusion: x_bn, relu_x
 * and dx given, sums->x the batchnorm's input relu_x; the add_sums fusion: relu_x and dx given,
 * sums->x the input of the batchnorm whose output reaches relu_x's relu, through an identity
 * add or not; pointers are to sample 0) each sample's two backward sums of that batchnorm are
 * taken from that dx as it is stored, into sums->out + sample x 2C
 * (dt_conv_bf16_compact_relu_below): stride-1 tiles only (dt_bf16_conv_reads_bn_relu).
 * even (the proj_dx fusion, DT_DX_EVEN and DT_EXTRA_EVEN above): dx, or extra, a quarter's
 * layout, sample i's at i C ((H + 1) / 2) ((W + 1) / 2). */
void dt_bf16_conv_backward(struct dt_bf16_conv *bf, const float *x, bool x_bf16,
                           const struct dt_bn_relu *x_bn, const float *dy,
                           const struct dt_bn_grad *bn, const struct dt_pool_grad *pool, float *dx,
                           const float *relu_x, const float *extra, const struct dt_dx_sums *sums,
                           unsigned even, int b0, int count, float *g, bool bias);

/* ---- linear ---- */

struct dt_bf16_linear;

/* Chooses the mode of a linear layer (in -> out features, max_batch rows) and writes its note;
 * *copy_bytes as for conv2d. 0 or DT_ERUNTIME. */
int dt_bf16_linear_setup(struct dt_bf16_linear **out, int in, int out_features, int max_batch,
                         double *copy_bytes);
/* As for conv2d: the call-scratch bytes of the tiles mode (its operands and the forward's
 * transposed output), the packed weights' bytes (both layouts), and init binding them. */
size_t dt_bf16_linear_call_bytes(const struct dt_bf16_linear *bf);
size_t dt_bf16_linear_copy_bytes(const struct dt_bf16_linear *bf);
void dt_bf16_linear_init(struct dt_bf16_linear *bf, struct dt_call_scratch *scratch, void *copy);
void dt_bf16_linear_free(struct dt_bf16_linear *bf);
bool dt_bf16_linear_tiles(const struct dt_bf16_linear *bf);
const char *dt_bf16_linear_note(const struct dt_bf16_linear *bf);

/* Tiles mode. A forward call: pack_weights (w [out][in]) once, then forward for each group of
 * rows; `training` packs the input gradient's layout too, kept for the backward call that
 * follows (backward for each group of rows). Operands go in the call scratch: no other layer
 * may run inside a call. */
void dt_bf16_linear_pack_weights(struct dt_bf16_linear *bf, const float *w, bool training);
/* The optimizer step's pack (nn/weight_copy.h): rows [r0, r1) of w in both layouts, r0 and r1
 * multiples of dt_bf16_linear_pack_piece (or r1 = out); after every piece, the bits of
 * pack_weights(w, true). */
int dt_bf16_linear_pack_piece(const struct dt_bf16_linear *bf);
void dt_bf16_linear_pack_rows(struct dt_bf16_linear *bf, const float *w, int r0, int r1);
/* y [rows][out] = x w^T (+ b). */
void dt_bf16_linear_forward(struct dt_bf16_linear *bf, const float *x, const float *b, float *y,
                            int rows);
/* The weight gradient of these rows WRITTEN to g ([out][in]; the bias gradient after it is the
 * caller's), and dx [rows][in] unless NULL (with the weights the training forward packed). */
void dt_bf16_linear_backward(struct dt_bf16_linear *bf, const float *x, const float *dy, float *dx,
                             int rows, float *g);

#endif

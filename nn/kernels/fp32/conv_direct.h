/* Direct convolution kernels for small channel counts (stride 1), float32, NCHW.
 *
 * These are the fast path of the conv2d layer for the shapes the reference models use (1->16,
 * 16->32, 3->32, 32->64 channels, 3x3): at such shapes im2col + sgemm spends most of its time
 * building and scattering column matrices and runs the GEMMs at poor efficiency. The kernels here
 * work on PyTorch's layouts directly (activations [N][C][H][W], weights [K][C][kh][kw]) so the
 * layer, checkpoints and the im2col path all share one layout; any repacking happens inside a
 * call, into caller-provided scratch, because nothing may be allocated per training step.
 *
 * Contract: check dt_conv_direct_supported() once at layer setup, size the scratch with
 * dt_conv_direct_scratch_floats() for the thread count you will pass, then call the kernels.
 * Each kernel runs an OpenMP team of `threads` threads and partitions work by sample, so results
 * are bit-identical run to run for a fixed thread count (the weight gradient reduces per-thread
 * partials in thread order). The AVX-512 path is chosen at run time when the CPU has it; a
 * portable path computes the same values elsewhere (not bit-identical to the SIMD path).
 */
#ifndef DT_NN_CONV_DIRECT_H
#define DT_NN_CONV_DIRECT_H

#include <stdbool.h>
#include <stddef.h>

/* Geometry of one convolution: input [n][c][h][w], weights [k][c][kh][kw], output
 * [n][k][oh][ow] with oh = (h + 2 pad - kh) / stride + 1 (likewise ow). */
struct dt_conv_shape {
    int n, c, h, w;
    int k, kh, kw;
    int stride, pad;
};

/* The argument check of every conv kernel entry point (direct and Winograd): a shape the
 * kernel supports (else the message lists the shape and what the kernel `needs`), threads
 * >= 1 and at least `need` floats of scratch. DT_EUSAGE naming `kernel` and the call `what`. */
int dt_conv_check_call(const char *kernel, const char *what, const struct dt_conv_shape *s,
                       bool supported, const char *needs, int threads, size_t have, size_t need);

/* Largest kernel side the direct kernels accept. */
#define DT_CONV_DIRECT_MAX_KERNEL 11

/* True when the direct kernels handle this shape: all sizes positive, stride 1, kernel sides
 * <= DT_CONV_DIRECT_MAX_KERNEL, 0 <= pad < min(kh, kw) (so the input gradient is itself a
 * padded convolution), a non-empty output, and every tensor small enough for int indexing.
 * Any channel counts are handled; multiples of 16 output channels are not required. */
bool dt_conv_direct_supported(const struct dt_conv_shape *s);

int dt_conv_direct_out_h(const struct dt_conv_shape *s);
int dt_conv_direct_out_w(const struct dt_conv_shape *s);

/* Floats of scratch any of the three kernels needs for this shape and up to `threads` threads
 * (0 for an unsupported shape). Scratch needs no alignment and no initialisation. */
size_t dt_conv_direct_scratch_floats(const struct dt_conv_shape *s, int threads);

/* y = conv(x, w) + b, ReLU applied at the store when relu != 0. b may be NULL (no bias).
 * Returns 0, or -DT_EUSAGE (unsupported shape, scratch smaller than the size query). */
int dt_conv_direct_forward(const struct dt_conv_shape *s, const float *x, const float *w,
                           const float *b, float *y, int relu, float *scratch,
                           size_t scratch_floats, int threads);

/* dw[k][c][i][j] += sum over samples and output pixels of dy * x; db[k] += sum of dy (db may
 * be NULL). Accumulates, so the caller zeroes gradients once per step. */
int dt_conv_direct_backward_weight(const struct dt_conv_shape *s, const float *x, const float *dy,
                                   float *dw, float *db, float *scratch, size_t scratch_floats,
                                   int threads);

/* dx = full correlation of dy with the flipped weights (overwrites dx). */
int dt_conv_direct_backward_input(const struct dt_conv_shape *s, const float *dy, const float *w,
                                  float *dx, float *scratch, size_t scratch_floats, int threads);

/* Whether the AVX-512 path may be used (when the CPU has it); returns the previous setting.
 * Process-wide, for tests and benchmarks that compare both paths; set it before any call. */
bool dt_conv_direct_allow_simd(bool allow);
/* True when calls made now take the AVX-512 path. */
bool dt_conv_direct_uses_simd(void);
/* Lanes of the vector kernels calls made now take: 16 (AVX-512), 8 (AVX2 + FMA) or 0 (none, or
 * switched off by dt_conv_direct_allow_simd); nn/kernels/fp32/conv_winograd.c runs at either width.
 */
int dt_conv_simd_lanes(void);

#endif

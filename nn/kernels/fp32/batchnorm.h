/* batchnorm2d's four passes over the activations (batchnorm.isa.c), one table of functions per
 * build; nn/layer_batchnorm2d.c calls the table of the build nn/kernels/isa.c picks. x, y, dy
 * and dx point at one channel's first plane; `batch` planes of n floats, `sample` apart. The
 * *_bf16 entries read x stored as bf16 (a bf16 model's conv output, nn/fusion.h's bf16_store)
 * and give the bits their fp32 entries give on the same values, but for grad_sums_bf16, which
 * sums in the order a conv2d above can take the sums in (bn_grad.h, DT_BN_LANES). */
#ifndef DT_NN_KERNELS_FP32_BATCHNORM_H
#define DT_NN_KERNELS_FP32_BATCHNORM_H

#include <stdbool.h>
#include <stddef.h>

#include "util/bf16.h"

/* How affine reads the skip of the add it computes (y = (x * scale + shift) + skip): as
 * stored in fp32, rounded to bf16 as it is read (a bf16 model's identity add, whose skip is a
 * bf16 value as autocast's), or stored as bf16 elements (the same values, half the bytes). */
enum dt_bn_skip { DT_SKIP_F32, DT_SKIP_ROUNDED, DT_SKIP_BF16 };

struct dt_bn_loops {
    void (*moments)(const float *x, size_t n, size_t sample, int batch, double shift, double *sum,
                    double *sum_sq);
    void (*grad_sums)(const float *x, const float *dy, size_t n, size_t sample, int batch,
                      double mean, double *sum_dy, double *sum_dy_xm);
    void (*affine)(const float *x, float *y, size_t n, size_t sample, int batch, float scale,
                   float shift, bool relu, const void *skip, enum dt_bn_skip as);
    void (*input_grad)(const float *x, const float *dy, float *dx, size_t n, size_t sample,
                       int batch, float mean, float invstd, float k, float mean_dy,
                       float mean_dy_xhat);
    void (*moments_bf16)(const dt_bf16 *x, size_t n, size_t sample, int batch, double shift,
                         double *sum, double *sum_sq);
    /* per sample, in bn_grad.h's order (DT_BN_LANES): sample b's sums into sum_dy[b * stride]
     * and sum_dy_xm[b * stride] */
    void (*grad_sums_bf16)(const dt_bf16 *x, const float *dy, size_t n, size_t sample, int batch,
                           double mean, double *sum_dy, double *sum_dy_xm, size_t stride);
    void (*affine_bf16)(const dt_bf16 *x, float *y, size_t n, size_t sample, int batch, float scale,
                        float shift, bool relu, const void *skip, enum dt_bn_skip as);
    void (*input_grad_bf16)(const dt_bf16 *x, const float *dy, float *dx, size_t n, size_t sample,
                            int batch, float mean, float invstd, float k, float mean_dy,
                            float mean_dy_xhat);
    /* y stored as bf16 (rounded to nearest even), from x as fp32 or (x_bf16) as bf16 */
    void (*affine_to_bf16)(const void *x, bool x_bf16, dt_bf16 *y, size_t n, size_t sample,
                           int batch, float scale, float shift, bool relu, const void *skip,
                           enum dt_bn_skip as);
};

/* The loops of the build in use (generic, avx2 or avx512: nn/kernels/isa.c). */
const struct dt_bn_loops *dt_bn_loops(void);

/* The builds of batchnorm.isa.c. */
extern const struct dt_bn_loops dt_bn_loops_generic, dt_bn_loops_avx2, dt_bn_loops_avx512;

#endif

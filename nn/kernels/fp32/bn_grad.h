/* What a batchnorm2d hands a neighbour to compute for it: its input gradient to the layer below
 * (struct dt_bn_grad), its forward with the relu above it to the layer above (struct
 * dt_bn_relu).
 *
 * The input gradient, computed by the layer below as it reads its own output gradient instead
 * of reading one batchnorm2d wrote (nn/layers.h, grad_in_below).
 *
 * Per channel ch of the batchnorm's c, with x its input (the layer below's output) and dy the
 * gradient at its output:
 *     dx = k[ch] * (dy - mean_dy[ch] - ((x - mean[ch]) * invstd[ch]) * mean_dy_xhat[ch])
 * in exactly that order of float operations (nn/kernels/fp32/batchnorm.isa.c, input_grad), so a
 * layer that applies it gets the same bits as the batchnorm's own pass. */
#ifndef DT_NN_BN_GRAD_H
#define DT_NN_BN_GRAD_H

#include <stddef.h>

#include "util/bf16.h"

struct dt_bn_grad {
    /* the batchnorm's input, laid out as dy: x in fp32, or xh when it is stored as bf16 (the
     * layer below's bf16_store, nn/fusion.h; the other NULL) */
    const float *x;
    const dt_bf16 *xh;
    const float *mean, *invstd, *k, *mean_dy, *mean_dy_xhat; /* [c] each */
};

/* The formula at element i of x and dy, channel ch (x read as stored: fp32 or bf16). */
static inline float dt_bn_grad_at(const struct dt_bn_grad *bn, int ch, size_t i, const float *dy)
{
    float xhat = ((bn->xh ? dt_bf16_to_f32(bn->xh[i]) : bn->x[i]) - bn->mean[ch]) * bn->invstd[ch];
    return bn->k[ch] * (dy[i] - bn->mean_dy[ch] - xhat * bn->mean_dy_xhat[ch]);
}

/* bn for the samples from float `offset` of its x on (the factors are per channel), in *part;
 * NULL for no bn. */
static inline const struct dt_bn_grad *dt_bn_grad_from(const struct dt_bn_grad *bn, size_t offset,
                                                       struct dt_bn_grad *part)
{
    if (!bn)
        return NULL;
    *part = *bn;
    if (part->x)
        part->x += offset;
    else
        part->xh += offset;
    return part;
}

/* A batchnorm2d -> relu's output, computed by the layer above as it reads the batchnorm's input
 * x instead of reading the output the batchnorm stored (the bn_input fusion, nn/fusion.h): per
 * channel ch,
 *     y = max(x * scale[ch] + shift[ch], 0) rounded to bf16
 * in exactly that order of float operations (batchnorm.isa.c's affine with the relu, stored
 * as bf16), so the layer reads the bits the batchnorm would have stored. */
struct dt_bn_relu {
    const float *scale, *shift; /* [c] each */
    /* the batch mean [c], for the backward's sums taken by the layer above (bn_sums) */
    const float *mean;
};

/* Channel ch's y for x (dt_bn_relu's formula), as the fp32 value of the bf16. */
static inline float dt_bn_relu_value(const struct dt_bn_relu *a, int ch, float x)
{
    float v = x * a->scale[ch] + a->shift[ch];
    return dt_bf16_to_f32(dt_bf16_from_f32(v > 0.0f ? v : 0.0f));
}

/* The order of the two sums of a batchnorm2d's backward over its input stored as bf16 (sum dy and
 * sum dy (x - mean), in double): one sample's plane at a time, in DT_BN_LANES lanes, element i
 * of the plane into lane i % DT_BN_LANES in order, the lanes then added pairwise (lane j +=
 * lane j + w for w = 8, 4, 2, 1, dt_bn_lanes_total); the samples' sums then added in sample
 * order. It depends on the elements' positions alone, so the conv2d above, which makes dy one
 * sample and one row at a time on whichever thread has the sample, takes them as it stores dy
 * with the same bits (the bn_sums fusion, nn/fusion.h), and any team gives the same bits. */
enum { DT_BN_LANES = 16 };

/* Element i of a plane (dy, and x as its fp32 value) into the lanes: dy into a, dy (x - mean)
 * into q. */
static inline void dt_bn_lanes_add(double *a, double *q, size_t i, double dy, double x, double mean)
{
    a[i % DT_BN_LANES] += dy;
    q[i % DT_BN_LANES] += dy * (x - mean);
}

/* Where a conv2d takes a batchnorm2d's two backward sums of one sample, in this order, as it
 * stores its dx, that batchnorm's dy: the batchnorm -> relu below (bn_sums), or the batchnorm
 * below whose output reaches the conv's input through a relu, or an identity add the batchnorm
 * computes and a relu (add_sums). out[ch] = sum dx, out[K + ch] = sum dx (x - mean[ch]), over
 * the batchnorm's input x stored as bf16 (that sample's [K][OH][OW]). */
struct dt_dx_sums {
    double *out;
    const dt_bf16 *x;
    const float *mean; /* [K] */
};

/* lane[0] after the pairwise additions (lane is overwritten). */
static inline double dt_bn_lanes_total(double *lane)
{
    for (int w = DT_BN_LANES / 2; w > 0; w /= 2)
        for (int j = 0; j < w; j++)
            lane[j] += lane[j + w];
    return lane[0];
}

#endif

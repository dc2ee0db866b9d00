/* A batchnorm2d's input gradient handed to the layer below it, to compute as it reads its own
 * output gradient instead of reading one batchnorm2d wrote (nn/layers.h, grad_in_below).
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

#endif

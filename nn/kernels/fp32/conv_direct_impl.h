/* What nn/kernels/fp32/conv_direct.c shares with its per-ISA kernels (conv_direct.isa.c): the
 * register-block limits, the geometry of a call, one sample's convolution, and the builds'
 * functions. Include only from those two files. */
#ifndef DT_NN_KERNELS_FP32_CONV_DIRECT_IMPL_H
#define DT_NN_KERNELS_FP32_CONV_DIRECT_IMPL_H

#include <stddef.h>

#include "nn/kernels/isa.h"

enum {
    FWD_MAX_KB = 12, /* forward channels per register block (x 2 pixel vectors) */
    WGT_MAX_KB = 4,  /* weight-gradient channels per block */
    WGT_MAX_TB = 6,  /* weight-gradient taps per block */
    MAX_SEGS = 20,   /* output rows one 16-pixel vector can touch, wp >= 1: <= 16 + 2 */
};

/* Per-call geometry derived once from the public shape. */
struct geom {
    int n, c, h, w, k, kh, kw, pad;
    int oh, ow, hp, wp; /* output size; padded input size */
    int taps;           /* c * kh * kw */
    int q;              /* extended pixel count (oh-1)*wp + ow */
    size_t shared;      /* floats of packed weights at the start of scratch */
    size_t pad_floats;  /* padded input copy, 0 when pad == 0 */
    size_t per_thread;  /* floats of scratch per thread */
};

/* Output-channel block size: the fewest blocks of at most `max`, balanced. */
static inline int block_size(int total, int max)
{
    int blocks = (total + max - 1) / max;
    return (total + blocks - 1) / blocks;
}
/* One sample's forward-style convolution of a padded input (the forward and the input
 * gradient both reduce to this). */
struct plane_conv {
    const float *in; /* [ci][hp][wp] */
    int ci, hp, wp, kh, kw;
    const float *wpk; /* packed with block_size(ko, FWD_MAX_KB), or 1 for the portable path */
    const float *bias;
    int ko, oh, ow, relu;
    float *out; /* [ko][oh][ow] */
};

/* One sample's forward-style convolution (all builds; the avx512 build needs wpk packed in
 * blocks of block_size(ko, FWD_MAX_KB), the others in blocks of 1). */
DT_FP32_ISA_DECLARE(void, dt_conv_direct_sample, (const struct plane_conv *p));

/* One sample's weight-gradient contribution into this thread's partial sums (generic and
 * avx512 builds). generic: dy is [k][oh][ow], acc [k][taps]; avx512: dy is dy in the extended
 * layout [k][round_lanes(q)], acc holds a 16-lane vector per weight. */
DT_FP32_ISA_DECLARE(void, dt_conv_direct_weight_sample,
                    (const struct geom *g, const float *in, const float *dy, float *acc));

/* dw[i] += the lane sum of the threads' vectors of weight i, added in thread order (avx512). */
DT_FP32_ISA_DECLARE(void, dt_conv_direct_weight_reduce,
                    (const float *acc0, size_t thread_stride, int threads, size_t i, float *dw));

#endif

/* bfloat16 for the kernel room: the type and its conversions live in util/bf16.h, shared with
 * dist's bf16 all-reduce, so both round the same way. */
#ifndef DT_NN_KERNELS_BF16_H
#define DT_NN_KERNELS_BF16_H

#include <stdbool.h>

#include "util/bf16.h"

/* What a compaction of a conv's fp32 sums stores: the sums (an input gradient), the sums
 * rounded to bf16 and kept as fp32 (a bf16 conv's output, autocast's), or those values as bf16
 * (y then holds dt_bf16 elements: the model's bf16_store, nn/fusion.h). */
enum dt_bf16_store { DT_STORE_F32, DT_STORE_ROUNDED, DT_STORE_BF16 };

/* Element i of y, as `store` says, from its fp32 value v; relu first when asked (v > 0 ? v : 0:
 * a NaN and -0 give +0), which commutes with the rounding. */
static inline void dt_bf16_store_at(void *y, size_t i, float v, bool relu, enum dt_bf16_store store)
{
    v = relu && !(v > 0.0f) ? 0.0f : v;
    if (store == DT_STORE_BF16)
        ((dt_bf16 *)y)[i] = dt_bf16_from_f32(v);
    else
        ((float *)y)[i] = store == DT_STORE_ROUNDED ? dt_bf16_round(v) : v;
}

#endif

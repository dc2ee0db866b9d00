/* The bf16 all-reduce's loops (bf16_sum.h). Plain loops that gcc vectorises at -O3; no
 * VCVTNEPS2BF16, which flushes denormals to zero and would make a rank with AVX512-BF16 round
 * differently from one without. */
#include "dist/bf16_sum.h"

void dt_bf16_add_n(float *acc, const dt_bf16 *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        acc[i] += dt_bf16_to_f32(src[i]);
}

void dt_bf16_add_own_n(float *acc, const dt_bf16 *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        acc[i] = dt_bf16_round(acc[i]) + dt_bf16_to_f32(src[i]);
}

void dt_bf16_sum_packed_n(dt_bf16 *inout, const dt_bf16 *in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        inout[i] = dt_bf16_from_f32(dt_bf16_to_f32(in[i]) + dt_bf16_to_f32(inout[i]));
}

/* The array conversions of util/bf16.h, one place for nn and dist. */
#include "util/bf16.h"

void dt_bf16_from_f32_n(const float *src, dt_bf16 *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = dt_bf16_from_f32(src[i]);
}

void dt_bf16_to_f32_n(const dt_bf16 *src, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = dt_bf16_to_f32(src[i]);
}

void dt_bf16_round_n(const float *src, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = dt_bf16_round(src[i]);
}

/* bfloat16: the top 16 bits of an IEEE binary32, stored as uint16_t.
 *
 * Conversion from fp32 rounds to nearest, ties to even (what VCVTNEPS2BF16 and PyTorch's
 * autocast do); a NaN stays a NaN (quiet). bf16 -> fp32 is exact. Here in util, not in the
 * kernel room, because two modules that may not include each other round the same way: nn's
 * bf16 layers (train.precision) and dist's bf16 all-reduce (dist.grad_dtype). */
#ifndef DT_UTIL_BF16_H
#define DT_UTIL_BF16_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef uint16_t dt_bf16;

static inline dt_bf16 dt_bf16_from_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    /* Written as a select, not a branch, so that the conversion loops vectorise. */
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1)) >> 16; /* nearest, ties to even */
    uint32_t nan = (u >> 16) | 0x40; /* NaN: keep the sign, force a quiet payload */
    return (dt_bf16)((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

static inline float dt_bf16_to_f32(dt_bf16 h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* f rounded to the nearest bf16, as an fp32 (the reference kernels' arithmetic). */
static inline float dt_bf16_round(float f)
{
    return dt_bf16_to_f32(dt_bf16_from_f32(f));
}

/* Element i of an activation stored as fp32, or (x_bf16) as bf16 (a bf16 model's bf16_store,
 * nn/fusion.h), widened exactly. */
static inline float dt_act_at(const void *x, bool x_bf16, size_t i)
{
    return x_bf16 ? dt_bf16_to_f32(((const dt_bf16 *)x)[i]) : ((const float *)x)[i];
}

/* That activation from its element `at` on. */
static inline const void *dt_act_from(const void *x, bool x_bf16, size_t at)
{
    return x_bf16 ? (const void *)((const dt_bf16 *)x + at) : (const void *)((const float *)x + at);
}

/* n values each way. */
void dt_bf16_from_f32_n(const float *src, dt_bf16 *dst, size_t n);
void dt_bf16_to_f32_n(const dt_bf16 *src, float *dst, size_t n);
/* dst[i] = src[i] rounded to the nearest bf16 (dst == src rounds in place). */
void dt_bf16_round_n(const float *src, float *dst, size_t n);

#endif

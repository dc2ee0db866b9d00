/* The bf16 all-reduce's loops (bf16_sum.h), built once per vector level (util/vec_isa.h).
 * Plain elementwise loops that gcc vectorises at each build's width: the rounding is integer
 * arithmetic (util/bf16.h, no VCVTNEPS2BF16, which flushes denormals to zero) and each element
 * gets one fp32 addition (a NaN sum made the one quiet NaN), so every build gives the bits of the
 * scalar arithmetic, and ranks on CPUs of different levels sum alike. */
#include "dist/bf16_sum_loops.h"
#include "util/vec_isa.h"

/* a + b, a NaN sum as the one quiet NaN 0x7fc00000. When both terms are NaNs, IEEE leaves open
 * which one's sign and payload the sum keeps; x86 returns the first operand's, and gcc, free to
 * swap an addition's operands, swaps them in the vector body and not in the scalar tail. Without
 * this the same terms could sum to different NaNs by build and by position. */
static inline float fp32_add(float a, float b)
{
    float s = a + b;
    return s != s ? dt_bf16_to_f32(0x7fc0) : s;
}

static void DT_VEC_FN(add_n)(float *acc, const dt_bf16 *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        acc[i] = fp32_add(acc[i], dt_bf16_to_f32(src[i]));
}

static void DT_VEC_FN(add_own_n)(float *acc, const dt_bf16 *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        acc[i] = fp32_add(dt_bf16_round(acc[i]), dt_bf16_to_f32(src[i]));
}

static void DT_VEC_FN(sum_packed_n)(dt_bf16 *inout, const dt_bf16 *in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        inout[i] = dt_bf16_from_f32(fp32_add(dt_bf16_to_f32(in[i]), dt_bf16_to_f32(inout[i])));
}

const struct dt_bf16_sum_loops DT_VEC_FN(dt_bf16_sum_loops) = {
    DT_VEC_FN(add_n), DT_VEC_FN(add_own_n), DT_VEC_FN(sum_packed_n)};

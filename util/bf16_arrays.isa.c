/* util/bf16.h's array conversions, built once per vector level (util/vec_isa.h). Plain loops
 * over the scalar conversions that gcc vectorises at each build's width: integer arithmetic
 * only, so every build gives the scalar function's bits. Not VCVTNEPS2BF16, which flushes
 * denormals to zero and would round differently from a CPU without AVX512-BF16. */
#include "util/bf16_arrays.h"
#include "util/vec_isa.h"

static void DT_VEC_FN(from_f32_n)(const float *src, dt_bf16 *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = dt_bf16_from_f32(src[i]);
}

static void DT_VEC_FN(to_f32_n)(const dt_bf16 *src, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = dt_bf16_to_f32(src[i]);
}

/* dst may be src (rounding in place): each element is read before it is written. */
static void DT_VEC_FN(round_n)(const float *src, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = dt_bf16_round(src[i]);
}

const struct dt_bf16_array_loops DT_VEC_FN(dt_bf16_array_loops) = {
    DT_VEC_FN(from_f32_n), DT_VEC_FN(to_f32_n), DT_VEC_FN(round_n)};

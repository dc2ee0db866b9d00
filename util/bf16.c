/* The array conversions of util/bf16.h, one place for nn and dist: the build of
 * util/bf16_arrays.isa.c for this CPU's vector level (util/vec_isa.h), all of them bit for bit
 * the scalar conversions. */
#include "util/bf16.h"

#include "util/bf16_arrays.h"
#include "util/vec_isa.h"

static const struct dt_bf16_array_loops *const builds[DT_VEC_ISA_COUNT] = {
    &dt_bf16_array_loops_generic, &dt_bf16_array_loops_avx2, &dt_bf16_array_loops_avx512};

void dt_bf16_from_f32_n(const float *src, dt_bf16 *dst, size_t n)
{
    builds[dt_vec_isa_get()]->from_f32_n(src, dst, n);
}

void dt_bf16_to_f32_n(const dt_bf16 *src, float *dst, size_t n)
{
    builds[dt_vec_isa_get()]->to_f32_n(src, dst, n);
}

void dt_bf16_round_n(const float *src, float *dst, size_t n)
{
    builds[dt_vec_isa_get()]->round_n(src, dst, n);
}

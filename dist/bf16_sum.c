/* The bf16 all-reduce's loops (bf16_sum.h): the build of dist/bf16_sum.isa.c for this CPU's
 * vector level (util/vec_isa.h), every build bit for bit the scalar arithmetic. */
#include "dist/bf16_sum.h"

#include "dist/bf16_sum_loops.h"
#include "util/vec_isa.h"

static const struct dt_bf16_sum_loops *const builds[DT_VEC_ISA_COUNT] = {
    &dt_bf16_sum_loops_generic, &dt_bf16_sum_loops_avx2, &dt_bf16_sum_loops_avx512};

void dt_bf16_add_n(float *acc, const dt_bf16 *src, size_t n)
{
    builds[dt_vec_isa_get()]->add_n(acc, src, n);
}

void dt_bf16_add_own_n(float *acc, const dt_bf16 *src, size_t n)
{
    builds[dt_vec_isa_get()]->add_own_n(acc, src, n);
}

void dt_bf16_sum_packed_n(dt_bf16 *inout, const dt_bf16 *in, size_t n)
{
    builds[dt_vec_isa_get()]->sum_packed_n(inout, in, n);
}

/* dist/bf16_sum.h's loops as one table per vector build (util/vec_isa.h): dist/bf16_sum.isa.c
 * defines each build's table, dist/bf16_sum.c calls the chosen one. Private to those two. */
#ifndef DT_DIST_BF16_SUM_LOOPS_H
#define DT_DIST_BF16_SUM_LOOPS_H

#include "dist/bf16_sum.h"

struct dt_bf16_sum_loops {
    void (*add_n)(float *acc, const dt_bf16 *src, size_t n);
    void (*add_own_n)(float *acc, const dt_bf16 *src, size_t n);
    void (*sum_packed_n)(dt_bf16 *inout, const dt_bf16 *in, size_t n);
};

extern const struct dt_bf16_sum_loops dt_bf16_sum_loops_generic;
extern const struct dt_bf16_sum_loops dt_bf16_sum_loops_avx2;
extern const struct dt_bf16_sum_loops dt_bf16_sum_loops_avx512;

#endif

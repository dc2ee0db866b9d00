/* The array conversions of util/bf16.h as one table per vector build (util/vec_isa.h):
 * util/bf16_arrays.isa.c defines each build's table, util/bf16.c calls the chosen one. Private
 * to those two files. */
#ifndef DT_UTIL_BF16_ARRAYS_H
#define DT_UTIL_BF16_ARRAYS_H

#include "util/bf16.h"

struct dt_bf16_array_loops {
    void (*from_f32_n)(const float *src, dt_bf16 *dst, size_t n);
    void (*to_f32_n)(const dt_bf16 *src, float *dst, size_t n);
    void (*round_n)(const float *src, float *dst, size_t n);
};

extern const struct dt_bf16_array_loops dt_bf16_array_loops_generic;
extern const struct dt_bf16_array_loops dt_bf16_array_loops_avx2;
extern const struct dt_bf16_array_loops dt_bf16_array_loops_avx512;

#endif

/* The arithmetic of the bf16 all-reduce (dist.grad_dtype = "bf16"), shared by the shm, tcp and
 * mpi communicators so that every backend rounds and adds the same way.
 *
 * The rules (docs/distributed.md, "bf16 gradients"): each rank's terms are rounded to bf16,
 * nearest even (util/bf16.h), before they leave it; every addition is an fp32 addition of the
 * values as they arrived; a partial sum that travels on to another rank is rounded to bf16
 * again (a ring's hop, MPI's tree); the final sum is rounded to bf16 too, so that what every
 * rank ends with is exactly what the all-gather carried. */
#ifndef DT_DIST_BF16_SUM_H
#define DT_DIST_BF16_SUM_H

#include <stddef.h>

#include "util/bf16.h"

/* acc[i] += src[i] (fp32 addition of the bf16 values). */
void dt_bf16_add_n(float *acc, const dt_bf16 *src, size_t n);
/* acc[i] = round(acc[i]) + src[i]: a ring hop, where acc holds this rank's own fp32 terms,
 * rounded here exactly as they would have been had they been sent. */
void dt_bf16_add_own_n(float *acc, const dt_bf16 *src, size_t n);
/* inout[i] = round(in[i] + inout[i]), the sum in fp32: a reduction step whose result travels
 * on as bf16 (the MPI operator). */
void dt_bf16_sum_packed_n(dt_bf16 *inout, const dt_bf16 *in, size_t n);

#endif

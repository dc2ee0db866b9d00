/* The optimizers' update loops as plain functions (optim_steps.isa.c; nn/optim.c owns the
 * optimizer object, its state and the weight-decay groups, and calls these). */
#ifndef DT_NN_KERNELS_FP32_OPTIM_STEPS_H
#define DT_NN_KERNELS_FP32_OPTIM_STEPS_H

#include <stddef.h>
#include <stdint.h>

#include "nn/kernels/isa.h"
#include "nn/optim.h"

/* One update of the n parameters p from their gradients g, as c->type does it: state[] the
 * optimizer's per-parameter arrays at p's offset (sgd with momentum: the momentum buffer;
 * adam/adamw: exp_avg, exp_avg_sq (, max_exp_avg_sq); adadelta: square_avg, acc_delta), steps
 * PyTorch's state["step"] (Adam's already counts this step). Bits independent of the build. */
void dt_optim_update(const struct dt_optim_config *c, float *const *state, uint64_t steps, float *p,
                     const float *g, size_t n, double lr);

/* The builds of optim_steps.isa.c (its ISA set: generic avx2). */
DT_FP32_ISA_DECLARE(void, dt_optim_update,
                    (const struct dt_optim_config *c, float *const *state, uint64_t steps, float *p,
                     const float *g, size_t n, double lr));

#endif

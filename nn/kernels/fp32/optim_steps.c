/* Which build of the optimizer loops runs (optim_steps.h). */
#include "nn/kernels/fp32/optim_steps.h"

void dt_optim_update(const struct dt_optim_config *c, float *const *state, uint64_t steps, float *p,
                     const float *g, size_t n, double lr)
{
    if (dt_isa_build(DT_KERNEL_OPTIM) == DT_ISA_AVX2)
        dt_optim_update_avx2(c, state, steps, p, g, n, lr);
    else
        dt_optim_update_generic(c, state, steps, p, g, n, lr);
}

/* Which build of batchnorm's loops runs (batchnorm.h). */
#include "nn/kernels/fp32/batchnorm.h"

#include "nn/kernels/isa.h"

const struct dt_bn_loops *dt_bn_loops(void)
{
    switch (dt_isa_build(DT_KERNEL_BATCHNORM)) {
    case DT_ISA_AVX512:
        return &dt_bn_loops_avx512;
    case DT_ISA_AVX2:
        return &dt_bn_loops_avx2;
    default:
        return &dt_bn_loops_generic;
    }
}

/* Per-ISA symbol names for kernel sources built once per instruction set (nn/kernels/NAME.isa.c):
 * DT_ISA_FN(dt_gemm_bf16) is dt_gemm_bf16_amx in the -DDT_ISA_AMX build, dt_gemm_bf16_ctile
 * in the -DDT_ISA_CTILE one, so perf, gdb and the linker see distinct names. */
#ifndef DT_NN_KERNELS_ISA_FN_H
#define DT_NN_KERNELS_ISA_FN_H

#include <omp.h>

#if defined(DT_ISA_AMX)
#define DT_ISA_SUFFIX amx
#elif defined(DT_ISA_CTILE)
#define DT_ISA_SUFFIX ctile
#else
#error "nn/kernels/isa_fn.h: built without -DDT_ISA_<X> (see the Makefile's ISA_BUILDS)"
#endif

#define DT_ISA_CAT2(a, b) a##_##b
#define DT_ISA_CAT(a, b)  DT_ISA_CAT2(a, b)
#define DT_ISA_FN(name)   DT_ISA_CAT(name, DT_ISA_SUFFIX)

#endif

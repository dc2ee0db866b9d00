/* Per-ISA symbol names and the one guard macro family for kernel sources built once per
 * instruction set (nn/kernels/fp32/NAME.isa.c, nn/kernels/bf16/NAME.isa.c).
 *
 * The Makefile compiles each such source once per entry of its ISA set, with -DDT_BUILD_<X> and
 * that ISA's -m flags (ISA_FLAGS_<x>). Inside, `#if defined(DT_BUILD_AVX512)` and friends are the
 * only guards a kernel uses, and DT_ISA_FN(name) names a function for its build:
 * DT_ISA_FN(dt_gemm_bf16) is dt_gemm_bf16_amx in the AMX build, dt_gemm_bf16_avx512bf16 in the
 * VDPBF16PS one, dt_gemm_bf16_ctile in the plain-C tile one; static functions are named the same
 * way, so perf, gdb and the linker see distinct names (winograd's gemm_avx2 and gemm_avx512, not
 * two `gemm`). Which build runs is decided in one place: nn/kernels/isa.c. */
#ifndef DT_NN_KERNELS_ISA_FN_H
#define DT_NN_KERNELS_ISA_FN_H

#include <omp.h>

#if defined(DT_BUILD_GENERIC)
#define DT_ISA_SUFFIX generic
#elif defined(DT_BUILD_AVX2)
#define DT_ISA_SUFFIX avx2
#elif defined(DT_BUILD_AVX512)
#define DT_ISA_SUFFIX avx512
#elif defined(DT_BUILD_AVX512BF16)
#define DT_ISA_SUFFIX avx512bf16
#elif defined(DT_BUILD_AMX)
#define DT_ISA_SUFFIX amx
#elif defined(DT_BUILD_CTILE)
#define DT_ISA_SUFFIX ctile
#else
#error "nn/kernels/isa_fn.h: built without -DDT_BUILD_<X> (see the Makefile's ISA sets)"
#endif

#define DT_ISA_CAT2(a, b) a##_##b
#define DT_ISA_CAT(a, b)  DT_ISA_CAT2(a, b)
#define DT_ISA_FN(name)   DT_ISA_CAT(name, DT_ISA_SUFFIX)

#endif

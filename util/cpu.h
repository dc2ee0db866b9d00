/* What this CPU can run, from cpuid: the instruction-set levels dtrain's kernels and its
 * choice of OpenBLAS kernels care about. */
#ifndef DT_UTIL_CPU_H
#define DT_UTIL_CPU_H

#include <stdbool.h>

enum dt_cpu_vendor { DT_CPU_OTHER, DT_CPU_INTEL, DT_CPU_AMD };

struct dt_cpu_features {
    enum dt_cpu_vendor vendor;
    bool avx, avx2, fma;
    bool avx512; /* F, BW, VL and DQ: what OpenBLAS's SkylakeX kernels and ours need */
};

/* This CPU (and this OS: AVX state enabled in XCR0). */
void dt_cpu_features_read(struct dt_cpu_features *f);

#endif

/* What this CPU can run, from cpuid: the instruction-set levels dtrain's kernels and its
 * choice of OpenBLAS kernels care about. */
#ifndef DT_UTIL_CPU_H
#define DT_UTIL_CPU_H

#include <stdbool.h>

enum dt_cpu_vendor { DT_CPU_OTHER, DT_CPU_INTEL, DT_CPU_AMD };

struct dt_cpu_features {
    enum dt_cpu_vendor vendor;
    bool avx, avx2, fma;
    bool avx512;      /* F, BW, VL and DQ: what OpenBLAS's SkylakeX kernels and ours need */
    bool avx512_bf16; /* VDPBF16PS / VCVTNE2PS2BF16 (Cooper Lake, Sapphire Rapids, Zen 4) */
    bool amx_bf16;    /* AMX-TILE + AMX-BF16 in the CPU and tile state in XCR0; the process
                       * must still ask Linux for the tile data (nn/kernels/bf16/amx.c) */
};

/* This CPU (and this OS: AVX state enabled in XCR0). */
void dt_cpu_features_read(struct dt_cpu_features *f);

/* CPUs this process may run on: its affinity mask (a taskset, a Slurm allocation), else the
 * online processors; at least 1. */
int dt_cpu_usable(void);

#endif

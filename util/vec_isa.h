/* Which vector build of util's and dist's array loops runs: the bf16 conversions (util/bf16.h)
 * and the bf16 all-reduce's sums (dist/bf16_sum.h).
 *
 * Those loops are plain C written once in a NAME.isa.c beside their module and compiled once per
 * level (the Makefile's ISA_SET_util / ISA_SET_dist: generic = the binary's own x86-64-v2, avx2,
 * avx512), so gcc vectorises the same source at 4, 8 and 16 lanes. Each build exports one table
 * of function pointers named for its level (DT_VEC_FN); the module's .c picks the table once.
 * This is the kernel room's scheme (nn/kernels/isa.h) at util's level: util and dist may not
 * include nn, and the scheme needs nothing of nn but the choice of level, which is made here
 * from cpuid and DTRAIN_ISA with the same meaning (generic, avx2; avx512, avx512bf16 and amx all
 * mean the avx512 build). An ifunc (target_clones) would be less code but cannot honour
 * DTRAIN_ISA, which the tests use to run every path on one machine.
 *
 * Every level gives the same bits: the loops do integer rounding and fp32 additions only, each
 * exact in IEEE arithmetic whatever the lane count, in the same order (no reassociation: the
 * loops are elementwise). So the level decides speed, never results, and ranks on different
 * CPUs of one job agree. */
#ifndef DT_UTIL_VEC_ISA_H
#define DT_UTIL_VEC_ISA_H

#include <stdbool.h>

enum dt_vec_isa { DT_VEC_GENERIC, DT_VEC_AVX2, DT_VEC_AVX512, DT_VEC_ISA_COUNT };

/* The level in use: chosen at the first call from DTRAIN_ISA (a level this CPU lacks, or a name
 * that is not one, gives the best level instead; main.c has already refused both with exit 2)
 * or else the best level the CPU has. Thread-safe. */
enum dt_vec_isa dt_vec_isa_get(void);
bool dt_vec_isa_available(enum dt_vec_isa isa);
const char *dt_vec_isa_name(enum dt_vec_isa isa);
/* Tests: run the given level from now on; returns the previous one. A level this CPU lacks
 * (dt_vec_isa_available) changes nothing: its instructions would fault. */
enum dt_vec_isa dt_vec_isa_force(enum dt_vec_isa isa);

/* In a NAME.isa.c: DT_VEC_FN(name) is name_generic, name_avx2 or name_avx512 by the build. */
#if defined(DT_BUILD_GENERIC)
#define DT_VEC_SUFFIX generic
#elif defined(DT_BUILD_AVX2)
#define DT_VEC_SUFFIX avx2
#elif defined(DT_BUILD_AVX512)
#define DT_VEC_SUFFIX avx512
#endif
#define DT_VEC_CAT2(a, b) a##_##b
#define DT_VEC_CAT(a, b)  DT_VEC_CAT2(a, b)
#define DT_VEC_FN(name)   DT_VEC_CAT(name, DT_VEC_SUFFIX)

#endif

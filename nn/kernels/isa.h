/* Which instruction-set path dtrain's own kernels (nn/conv_direct.c, nn/conv_winograd.c) take.
 *
 * The binary is built for plain x86-64 (Makefile) and carries the wider kernels compiled with
 * target attributes; one path is chosen once, at the first kernel call or dt_isa_init_env(),
 * from cpuid, or from DTRAIN_ISA=generic|avx2|avx512 when the user forces one. */
#ifndef DT_NN_ISA_H
#define DT_NN_ISA_H

#include <stdbool.h>
#include <stddef.h>

enum dt_isa { DT_ISA_GENERIC, DT_ISA_AVX2, DT_ISA_AVX512, DT_ISA_COUNT };

/* "generic", "avx2", "avx512". */
const char *dt_isa_label(enum dt_isa isa);

/* The name of the path in use (choosing it first if nothing chose it yet). */
const char *dt_isa_name(void);

/* The path in use (choosing it first if nothing chose it yet). */
enum dt_isa dt_isa_get(void);

/* This CPU and this build can run isa (AVX2 means AVX2 + FMA). */
bool dt_isa_available(enum dt_isa isa);

/* The widest path this CPU can run. */
enum dt_isa dt_isa_best(void);

/* Name -> isa; 0, or -2 with a message naming the accepted values. */
int dt_isa_parse(const char *name, enum dt_isa *isa, char *err, size_t errlen);

/* Use isa from now on; 0, or -2 with a message when this CPU cannot run it. */
int dt_isa_set(enum dt_isa isa, char *err, size_t errlen);

/* Choose once from DTRAIN_ISA (unset or empty: the best path): 0, or -2 with a message
 * for an unknown name or a path this CPU lacks. */
int dt_isa_init_env(char *err, size_t errlen);

#endif

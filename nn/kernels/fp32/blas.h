/* dtrain's use of OpenBLAS: which build and kernels run, a GEMM that keeps to dtrain's thread
 * count whatever the build's threading, and the choice of kernels when OpenBLAS's own is too
 * old for the CPU.
 *
 * The Makefile links Debian's OpenMP build of OpenBLAS explicitly (an rpath to its directory),
 * so BLAS and dtrain's loops share one OpenMP pool. When another build is loaded anyway
 * (LD_LIBRARY_PATH, a system without the OpenMP variant), BLAS is kept single-threaded and
 * dt_sgemm splits each GEMM over dtrain's own OpenMP threads: two thread pools fighting over
 * the same cores cost 3x on the linear layer.
 *
 * OpenBLAS 0.3.21's DYNAMIC_ARCH does not know CPUs newer than it and falls back to its
 * Prescott (SSE3) kernels: 6x slower GEMMs on an AVX-512 core. dt_blas_select_kernels
 * compares its choice with what cpuid says and re-executes dtrain once with OPENBLAS_CORETYPE
 * set to the best kernels the CPU runs, unless the user set OPENBLAS_CORETYPE.
 */
#ifndef DT_NN_BLAS_H
#define DT_NN_BLAS_H

#include <stdbool.h>
#include <stddef.h>

#include "util/cpu.h"

enum dt_blas_threading { DT_BLAS_SEQUENTIAL, DT_BLAS_PTHREADS, DT_BLAS_OPENMP };

struct dt_blas_info {
    const char *core;   /* OpenBLAS's kernel set, e.g. "SkylakeX", "Haswell", "Prescott" */
    const char *config; /* openblas_get_config() */
    enum dt_blas_threading threading;
    char choice[160]; /* how the kernels were chosen, for --verbose and bench headers */
};

void dt_blas_info_read(struct dt_blas_info *info);
const char *dt_blas_threading_name(enum dt_blas_threading t);

/* The decision, pure for tests: the OPENBLAS_CORETYPE to run instead of `core` on a CPU with
 * features `cpu`, or NULL to keep it (an unknown core name is kept). `why` says which and
 * why. */
const char *dt_blas_core_choice(const char *core, const struct dt_cpu_features *cpu, char *why,
                                size_t size);

/* At start, before anything else: re-executes /proc/self/exe with argv once when
 * dt_blas_core_choice asks for other kernels (and OPENBLAS_CORETYPE is not set). Returns only
 * when no re-execution is needed or it failed. */
void dt_blas_select_kernels(char **argv);

/* C = alpha op(A) op(B) + beta C, row-major, as cblas_sgemm, on the threads set by
 * dt_nn_set_threads whatever the BLAS build's threading. */
void dt_sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a, int lda,
              const float *b, int ldb, float beta, float *c, int ldc);

/* Called by dt_nn_set_threads: the threads dt_sgemm may use. */
void dt_blas_set_threads(int threads);
/* Tests and benchmarks: split GEMMs over `threads` whatever the build (1 = never split). */
void dt_blas_set_split_threads(int threads);

#endif

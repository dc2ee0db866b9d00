#include "nn/kernels/fp32/blas.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Not in every cblas.h: declared as OpenBLAS exports them. */
char *openblas_get_corename(void);
char *openblas_get_config(void);
int openblas_get_parallel(void);

#define REEXEC_GUARD "DTRAIN_BLAS_REEXEC"

/* Set once at start (dt_blas_set_threads): how many threads dt_sgemm splits a GEMM over when
 * the BLAS itself runs single-threaded. Process-wide, as the thread count is. */
static int split_threads = 1;

const char *dt_blas_threading_name(enum dt_blas_threading t)
{
    return t == DT_BLAS_OPENMP ? "openmp" : t == DT_BLAS_PTHREADS ? "pthreads" : "sequential";
}

/* OpenBLAS 0.3.21's kernel sets by the instruction set they use: 3 AVX-512, 2 AVX2+FMA,
 * 1 AVX, 0 older. Names it may report that are not here are kept as they are. */
static int core_level(const char *core)
{
    static const struct {
        const char *name;
        int level;
    } cores[] = {
        {"SapphireRapids", 3}, {"Cooperlake", 3}, {"SkylakeX", 3},
        {"Haswell", 2},        {"Zen", 2},        {"Excavator", 2},
        {"Sandybridge", 1},    {"Bulldozer", 1},  {"Piledriver", 1},
        {"Steamroller", 1},    {"Prescott", 0},   {"Core2", 0},
        {"Penryn", 0},         {"Dunnington", 0}, {"Nehalem", 0},
        {"Atom", 0},           {"Barcelona", 0},  {"Opteron", 0},
        {"Opteron_SSE3", 0},   {"Bobcat", 0},     {"Nano", 0},
        {"Northwood", 0},      {"Athlon", 0},     {"Katmai", 0},
        {"Coppermine", 0},     {"Banias", 0},
    };
    for (size_t i = 0; i < sizeof cores / sizeof cores[0]; i++)
        if (!strcasecmp(core, cores[i].name))
            return cores[i].level;
    return -1;
}

const char *dt_blas_core_choice(const char *core, const struct dt_cpu_features *cpu, char *why,
                                size_t size)
{
    int have = core_level(core ? core : "");
    int can = cpu->avx512 ? 3 : cpu->avx2 && cpu->fma ? 2 : cpu->avx ? 1 : 0;
    static const char *const isa[] = {"SSE", "AVX", "AVX2", "AVX-512"};
    if (have < 0) {
        snprintf(why, size, "OpenBLAS chose %s (not a core dtrain knows: kept)",
                 core ? core : "an unnamed core");
        return NULL;
    }
    if (have >= can) {
        snprintf(why, size, "OpenBLAS chose %s (%s), the best this CPU runs", core, isa[have]);
        return NULL;
    }
    const char *pick = can == 3   ? "SkylakeX"
                       : can == 2 ? (cpu->vendor == DT_CPU_AMD ? "Zen" : "Haswell")
                                  : "Sandybridge";
    snprintf(why, size, "OpenBLAS chose %s (%s) but the CPU has %s: %s kernels instead", core,
             isa[have], isa[can], pick);
    return pick;
}

void dt_blas_select_kernels(char **argv)
{
    if (getenv("OPENBLAS_CORETYPE") || getenv(REEXEC_GUARD))
        return;
    struct dt_cpu_features cpu;
    dt_cpu_features_read(&cpu);
    char why[160];
    const char *pick = dt_blas_core_choice(openblas_get_corename(), &cpu, why, sizeof why);
    if (!pick)
        return;
    /* The guard carries the reason into the new process (for --verbose) and stops a loop. */
    setenv(REEXEC_GUARD, why, 1);
    setenv("OPENBLAS_CORETYPE", pick, 1);
    execv("/proc/self/exe", argv);
    unsetenv("OPENBLAS_CORETYPE"); /* could not re-execute: run on as we are */
}

void dt_blas_info_read(struct dt_blas_info *info)
{
    memset(info, 0, sizeof *info);
    info->core = openblas_get_corename();
    info->config = openblas_get_config();
    int p = openblas_get_parallel();
    info->threading = p == 2 ? DT_BLAS_OPENMP : p == 1 ? DT_BLAS_PTHREADS : DT_BLAS_SEQUENTIAL;
    const char *reexec = getenv(REEXEC_GUARD), *user = getenv("OPENBLAS_CORETYPE");
    if (reexec)
        snprintf(info->choice, sizeof info->choice, "re-executed: %s", reexec);
    else if (user)
        snprintf(info->choice, sizeof info->choice, "OPENBLAS_CORETYPE=%s set by the user", user);
    else {
        struct dt_cpu_features cpu;
        dt_cpu_features_read(&cpu);
        dt_blas_core_choice(info->core, &cpu, info->choice, sizeof info->choice);
    }
}

void dt_blas_set_threads(int threads)
{
    /* An OpenMP build shares our pool; any other keeps to one thread and we split. */
    bool openmp = openblas_get_parallel() == 2;
    openblas_set_num_threads(openmp ? threads : 1);
    split_threads = openmp ? 1 : threads;
}

void dt_blas_set_split_threads(int threads)
{
    split_threads = threads > 0 ? threads : 1;
}

static void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float *a, int lda,
                 const float *b, int ldb, float beta, float *c, int ldc)
{
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
                k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void dt_sgemm(bool ta, bool tb, int m, int n, int k, float alpha, const float *a, int lda,
              const float *b, int ldb, float beta, float *c, int ldc)
{
    int t = split_threads;
    /* Too small to split, or already inside a parallel region (the conv layers call GEMMs
     * per sample from their own threads). */
    if (t <= 1 || omp_in_parallel() || (long)m * n * k < 32768L * t) {
        gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    /* Split C's rows when there are enough, else its columns: each block is an independent
     * GEMM with the same k, so the result is what one call computes, block by block. */
    bool rows = m >= n || m >= 4 * t;
    int len = rows ? m : n;
#pragma omp parallel num_threads(t)
    {
        int nt = omp_get_num_threads(), id = omp_get_thread_num();
        int lo = (int)((long)len * id / nt), hi = (int)((long)len * (id + 1) / nt);
        if (hi > lo) {
            if (rows)
                gemm(ta, tb, hi - lo, n, k, alpha, ta ? a + lo : a + (size_t)lo * lda, lda, b, ldb,
                     beta, c + (size_t)lo * ldc, ldc);
            else
                gemm(ta, tb, m, hi - lo, k, alpha, a, lda, tb ? b + (size_t)lo * ldb : b + lo, ldb,
                     beta, c + lo, ldc);
        }
    }
}

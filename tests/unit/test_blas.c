/* nn/kernels/fp32/blas.c: the choice of OpenBLAS kernels for every kind of core OpenBLAS may report
 * and every CPU level (fake core names and cpuid bits), and dt_sgemm's split over dtrain's threads
 * computing what one GEMM call does, for every transposition and both split directions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/kernels/fp32/blas.h"

/* Designated: the struct gains fields (bf16, AMX) that these tables do not care about. */
static const struct dt_cpu_features
    SSE = {.vendor = DT_CPU_INTEL},
    AVX = {.vendor = DT_CPU_INTEL, .avx = true},
    AVX2_INTEL = {.vendor = DT_CPU_INTEL, .avx = true, .avx2 = true, .fma = true},
    AVX2_AMD = {.vendor = DT_CPU_AMD, .avx = true, .avx2 = true, .fma = true},
    AVX512 = {.vendor = DT_CPU_INTEL, .avx = true, .avx2 = true, .fma = true, .avx512 = true},
    AVX512_AMD = {.vendor = DT_CPU_AMD, .avx = true, .avx2 = true, .fma = true, .avx512 = true};

static void test_core_choice_table(void **state)
{
    (void)state;
    static const struct {
        const char *core;
        const struct dt_cpu_features *cpu;
        const char *pick; /* NULL: keep OpenBLAS's */
        const char *why;
    } rows[] = {
        /* 0.3.21 on a CPU it does not know: the SSE3 fallback, replaced */
        {"Prescott", &AVX512, "SkylakeX", "chose Prescott (SSE) but the CPU has AVX-512"},
        {"Prescott", &AVX512_AMD, "SkylakeX", "AVX-512"},
        {"Prescott", &AVX2_INTEL, "Haswell", "AVX2: Haswell"},
        {"Prescott", &AVX2_AMD, "Zen", "AVX2: Zen"},
        {"Nehalem", &AVX, "Sandybridge", "AVX: Sandybridge"},
        {"Sandybridge", &AVX2_INTEL, "Haswell", "chose Sandybridge (AVX)"},
        {"haswell", &AVX512, "SkylakeX", "AVX2"}, /* names compare without case */
        {"Zen", &AVX512_AMD, "SkylakeX", "Zen (AVX2)"},
        /* already the best the CPU runs: kept */
        {"SkylakeX", &AVX512, NULL, "the best this CPU runs"},
        {"Cooperlake", &AVX512, NULL, "Cooperlake (AVX-512)"},
        {"SapphireRapids", &AVX512, NULL, "best"},
        {"Haswell", &AVX2_INTEL, NULL, "best"},
        {"Zen", &AVX2_AMD, NULL, "best"},
        {"Prescott", &SSE, NULL, "best"},
        /* newer than the CPU (a forced OPENBLAS_CORETYPE): not ours to undo */
        {"SkylakeX", &AVX2_INTEL, NULL, "best"},
        /* names dtrain does not know are left alone */
        {"Neoverse", &AVX512, NULL, "not a core dtrain knows"},
        {NULL, &AVX512, NULL, "an unnamed core"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char why[160];
        const char *pick = dt_blas_core_choice(rows[i].core, rows[i].cpu, why, sizeof why);
        if ((pick == NULL) != (rows[i].pick == NULL) || (pick && strcmp(pick, rows[i].pick) != 0) ||
            !strstr(why, rows[i].why))
            fail_msg("row %zu (%s): picked %s, '%s'", i, rows[i].core ? rows[i].core : "NULL",
                     pick ? pick : "nothing", why);
    }
}

static float *random_matrix(size_t n, unsigned seed)
{
    float *m = malloc(n * sizeof *m);
    srand(seed);
    for (size_t i = 0; i < n; i++)
        m[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    return m;
}

/* Every transposition, a tall and a wide C (row and column splits), beta 0 and 1. */
static void test_split_gemm_equals_one_call(void **state)
{
    (void)state;
    const int shapes[][3] = {{300, 40, 70}, {7, 500, 90}, {64, 64, 64}, {3, 2, 1000}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        for (int t = 0; t < 4; t++) {
            bool ta = t & 1, tb = t & 2;
            float *a = random_matrix((size_t)m * k, 1), *b = random_matrix((size_t)k * n, 2);
            float *c1 = random_matrix((size_t)m * n, 3), *c2 = malloc((size_t)m * n * sizeof *c2);
            memcpy(c2, c1, (size_t)m * n * sizeof *c2);
            int lda = ta ? m : k, ldb = tb ? k : n;
            float beta = s % 2 ? 1.0f : 0.0f;
            dt_blas_set_split_threads(1);
            dt_sgemm(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, beta, c1, n);
            dt_blas_set_split_threads(3);
            dt_sgemm(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, beta, c2, n);
            dt_blas_set_split_threads(1);
            for (size_t i = 0; i < (size_t)m * n; i++)
                if (fabsf(c1[i] - c2[i]) > 1e-5f * (1.0f + fabsf(c1[i])))
                    fail_msg("%dx%dx%d ta %d tb %d: element %zu: %g vs %g", m, n, k, ta, tb, i,
                             (double)c1[i], (double)c2[i]);
            free(a), free(b), free(c1), free(c2);
        }
    }
}

static void test_info(void **state)
{
    (void)state;
    struct dt_blas_info info;
    dt_blas_info_read(&info);
    assert_non_null(info.core);
    assert_true(info.choice[0] != '\0');
    assert_string_equal(dt_blas_threading_name(DT_BLAS_OPENMP), "openmp");
    assert_string_equal(dt_blas_threading_name(DT_BLAS_PTHREADS), "pthreads");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_core_choice_table),
        cmocka_unit_test(test_split_gemm_equals_one_call),
        cmocka_unit_test(test_info),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

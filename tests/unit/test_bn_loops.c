/* batchnorm2d's loops (nn/kernels/fp32/batchnorm.h), every build this CPU runs (generic, avx2,
 * avx512; a build it lacks is skipped with the reason printed): the entries that read x stored
 * as bf16 (a bf16 model's conv output, nn/fusion.h's bf16_store) give exactly the bits their
 * fp32 entries give on the same values widened to fp32, at plane sizes with and without a
 * tail of the 8-lane sums, with and without the skip and relu of affine (and input_grad, which
 * the bf16 tile conv runs per sample for bn_grad); the affine that
 * stores y as bf16 stores the fp32 one's y rounded; and every build gives the generic build's
 * bits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/kernels/fp32/batchnorm.h"
#include "nn/kernels/isa.h"
#include "util/rng.h"

enum { BATCH = 3, CHANNELS = 2 };

static const struct dt_bn_loops *build_of(enum dt_isa isa)
{
    return isa == DT_ISA_AVX512 ? &dt_bn_loops_avx512
           : isa == DT_ISA_AVX2 ? &dt_bn_loops_avx2
                                : &dt_bn_loops_generic;
}

/* What one build computes over channel 1 of a [BATCH][CHANNELS][n] tensor: the moments, the
 * gradient sums, the four affine variants and the input gradient, from x as fp32 or as bf16. */
struct result {
    double sums[4];
    float *y;  /* 4 x BATCH x CHANNELS x n */
    float *dx; /* BATCH x CHANNELS x n */
};

static void run(const struct dt_bn_loops *k, bool half, const float *x, const dt_bf16 *xh,
                const float *dy, const float *skip, size_t n, struct result *r)
{
    size_t sample = CHANNELS * n, all = BATCH * sample;
    const float *xc = x + n;
    const dt_bf16 *xhc = xh + n;
    if (half) {
        k->moments_bf16(xhc, n, sample, BATCH, 0.25, &r->sums[0], &r->sums[1]);
        k->grad_sums_bf16(xhc, dy + n, n, sample, BATCH, -0.5, &r->sums[2], &r->sums[3]);
    } else {
        k->moments(xc, n, sample, BATCH, 0.25, &r->sums[0], &r->sums[1]);
        k->grad_sums(xc, dy + n, n, sample, BATCH, -0.5, &r->sums[2], &r->sums[3]);
    }
    if (half)
        k->input_grad_bf16(xhc, dy + n, r->dx + n, n, sample, BATCH, 0.3f, 1.7f, 0.9f, 0.05f,
                           -0.2f);
    else
        k->input_grad(xc, dy + n, r->dx + n, n, sample, BATCH, 0.3f, 1.7f, 0.9f, 0.05f, -0.2f);
    for (int v = 0; v < 4; v++) {
        float *y = r->y + v * all + n;
        const float *s = v & 1 ? skip + n : NULL;
        if (half)
            k->affine_bf16(xhc, y, n, sample, BATCH, 1.75f, -0.125f, v & 2, s);
        else
            k->affine(xc, y, n, sample, BATCH, 1.75f, -0.125f, v & 2, s);
    }
}

static void test_bf16_entries_match(void **state)
{
    (void)state;
    static const size_t sizes[] = {1, 7, 8, 64, 100, 1024};
    struct dt_rng rng;
    dt_rng_init(&rng, dt_rng_key(5, DT_RNG_TEST, 12, 0));
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        size_t n = sizes[si], all = BATCH * CHANNELS * n;
        float *x = malloc(all * 4), *dy = malloc(all * 4), *skip = malloc(all * 4);
        dt_bf16 *xh = malloc(all * 2);
        for (size_t i = 0; i < all; i++) {
            xh[i] = dt_bf16_from_f32(4.0f * dt_rng_uniform(&rng) - 2.0f);
            x[i] = dt_bf16_to_f32(xh[i]);
            dy[i] = dt_rng_uniform(&rng) - 0.5f;
            skip[i] = dt_rng_uniform(&rng) - 0.5f;
        }
        struct result want = {.y = calloc(4 * all, 4), .dx = calloc(all, 4)};
        run(&dt_bn_loops_generic, false, x, xh, dy, skip, n, &want);
        for (int isa = DT_ISA_GENERIC; isa <= DT_ISA_AVX512; isa++) {
            if (!dt_isa_available((enum dt_isa)isa)) {
                if (si == 0)
                    printf("test_bn_loops: %s skipped: this CPU lacks it\n",
                           dt_isa_label((enum dt_isa)isa));
                continue;
            }
            for (int half = 0; half < 2; half++) {
                struct result got = {.y = calloc(4 * all, 4), .dx = calloc(all, 4)};
                run(build_of((enum dt_isa)isa), half, x, xh, dy, skip, n, &got);
                assert_memory_equal(got.sums, want.sums, sizeof want.sums);
                assert_memory_equal(got.y, want.y, 4 * all * 4);
                assert_memory_equal(got.dx, want.dx, all * 4);
                free(got.y);
                free(got.dx);
                /* y stored as bf16: the fp32 y rounded */
                dt_bf16 *yh = calloc(all, 2);
                for (int v = 0; v < 4; v++) {
                    build_of((enum dt_isa)isa)
                        ->affine_to_bf16(half ? (const void *)(xh + n) : (const void *)(x + n),
                                         half, yh + n, n, CHANNELS * n, BATCH, 1.75f, -0.125f,
                                         v & 2, v & 1 ? skip + n : NULL);
                    for (size_t i = 0; i < all; i++)
                        assert_int_equal(yh[i], dt_bf16_from_f32(want.y[v * all + i]));
                }
                free(yh);
            }
        }
        free(want.y);
        free(want.dx);
        free(x), free(dy), free(skip), free(xh);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_entries_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

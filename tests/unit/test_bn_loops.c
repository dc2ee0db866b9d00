/* batchnorm2d's loops (nn/kernels/fp32/batchnorm.h), every build this CPU runs (generic, avx2,
 * avx512; a build it lacks is skipped with the reason printed): the entries that read x stored
 * as bf16 (a bf16 model's conv output, nn/fusion.h's bf16_store) give exactly the bits their
 * fp32 entries give on the same values widened to fp32 (the gradient sums, taken per sample,
 * give bn_grad.h's order's bits and the fp32 entry's sums to 1e-12), at plane sizes with and
 * without a tail of the 8-lane sums, with and without the skip and relu of affine (and input_grad,
 * which the bf16 tile conv runs per sample for bn_grad); the affine that stores y as bf16 stores
 * the fp32 one's y rounded; and every build gives the generic build's bits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/kernels/fp32/batchnorm.h"
#include "nn/kernels/fp32/bn_grad.h"
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
 * gradient sums (over x as bf16: each sample's, in parts), the four affine variants and the
 * input gradient, from x as fp32 or as bf16. */
struct result {
    double sums[4];
    double parts[2 * BATCH];
    float *y;  /* 4 x BATCH x CHANNELS x n */
    float *dx; /* BATCH x CHANNELS x n */
};

/* The affine variants: v & 1 with a skip, v & 2 with the relu, v & 4 the skip read as a bf16
 * value (rounded as it is read, or with x as bf16 (half) stored as bf16: skiph). */
enum { VARIANTS = 8 };

/* The skip of variant v, and how the affine reads it. */
static const void *skip_of(int v, bool half, const float *skip, const dt_bf16 *skiph,
                           enum dt_bn_skip *as)
{
    *as = !(v & 4) ? DT_SKIP_F32 : half ? DT_SKIP_BF16 : DT_SKIP_ROUNDED;
    if (!(v & 1))
        return NULL;
    return *as == DT_SKIP_BF16 ? (const void *)skiph : (const void *)skip;
}

static void run(const struct dt_bn_loops *k, bool half, const float *x, const dt_bf16 *xh,
                const float *dy, const float *skip, const dt_bf16 *skiph, size_t n,
                struct result *r)
{
    size_t sample = CHANNELS * n, all = BATCH * sample;
    const float *xc = x + n;
    const dt_bf16 *xhc = xh + n;
    if (half) {
        k->moments_bf16(xhc, n, sample, BATCH, 0.25, &r->sums[0], &r->sums[1]);
        k->grad_sums_bf16(xhc, dy + n, n, sample, BATCH, -0.5, r->parts, r->parts + 1, 2);
    } else {
        k->moments(xc, n, sample, BATCH, 0.25, &r->sums[0], &r->sums[1]);
        k->grad_sums(xc, dy + n, n, sample, BATCH, -0.5, &r->sums[2], &r->sums[3]);
    }
    if (half)
        k->input_grad_bf16(xhc, dy + n, r->dx + n, n, sample, BATCH, 0.3f, 1.7f, 0.9f, 0.05f,
                           -0.2f);
    else
        k->input_grad(xc, dy + n, r->dx + n, n, sample, BATCH, 0.3f, 1.7f, 0.9f, 0.05f, -0.2f);
    for (int v = 0; v < VARIANTS; v++) {
        float *y = r->y + v * all + n;
        enum dt_bn_skip as;
        const void *s = skip_of(v, half, skip, skiph, &as);
        s = s ? dt_act_from(s, as == DT_SKIP_BF16, n) : NULL;
        if (half)
            k->affine_bf16(xhc, y, n, sample, BATCH, 1.75f, -0.125f, v & 2, s, as);
        else
            k->affine(xc, y, n, sample, BATCH, 1.75f, -0.125f, v & 2, s, as);
    }
}

/* grad_sums_bf16's parts as bn_grad.h orders them: per sample, lane i % DT_BN_LANES, then the
 * lanes added pairwise. */
static void reference_parts(const dt_bf16 *xh, const float *dy, size_t n, double *parts)
{
    for (int b = 0; b < BATCH; b++) {
        double a[DT_BN_LANES] = {0}, q[DT_BN_LANES] = {0};
        size_t at = (size_t)b * CHANNELS * n + n; /* channel 1 */
        for (size_t i = 0; i < n; i++) {
            a[i % DT_BN_LANES] += dy[at + i];
            q[i % DT_BN_LANES] += (double)dy[at + i] * ((double)dt_bf16_to_f32(xh[at + i]) + 0.5);
        }
        parts[2 * b] = dt_bn_lanes_total(a);
        parts[2 * b + 1] = dt_bn_lanes_total(q);
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
        dt_bf16 *xh = malloc(all * 2), *skiph = malloc(all * 2);
        float *skipr = malloc(all * 4);
        for (size_t i = 0; i < all; i++) {
            xh[i] = dt_bf16_from_f32(4.0f * dt_rng_uniform(&rng) - 2.0f);
            x[i] = dt_bf16_to_f32(xh[i]);
            dy[i] = dt_rng_uniform(&rng) - 0.5f;
            skip[i] = dt_rng_uniform(&rng) - 0.5f;
            skiph[i] = dt_bf16_from_f32(skip[i]);
            skipr[i] = dt_bf16_to_f32(skiph[i]);
        }
        struct result want = {.y = calloc(VARIANTS * all, 4), .dx = calloc(all, 4)};
        run(&dt_bn_loops_generic, false, x, xh, dy, skip, skiph, n, &want);
        /* the skip read rounded: the bits of the skip rounded beforehand */
        float *yr = calloc(all, 4);
        for (int v = 5; v < VARIANTS; v += 2) {
            dt_bn_loops_generic.affine(x + n, yr + n, n, CHANNELS * n, BATCH, 1.75f, -0.125f, v & 2,
                                       skipr + n, DT_SKIP_F32);
            assert_memory_equal(yr, want.y + v * all, all * 4);
        }
        free(yr);
        for (int isa = DT_ISA_GENERIC; isa <= DT_ISA_AVX512; isa++) {
            if (!dt_isa_available((enum dt_isa)isa)) {
                if (si == 0)
                    printf("test_bn_loops: %s skipped: this CPU lacks it\n",
                           dt_isa_label((enum dt_isa)isa));
                continue;
            }
            for (int half = 0; half < 2; half++) {
                struct result got = {.y = calloc(VARIANTS * all, 4), .dx = calloc(all, 4)};
                run(build_of((enum dt_isa)isa), half, x, xh, dy, skip, skiph, n, &got);
                if (half) { /* the gradient sums per sample, in bn_grad.h's order */
                    double parts[2 * BATCH], total[2] = {0, 0};
                    reference_parts(xh, dy, n, parts);
                    assert_memory_equal(got.parts, parts, sizeof parts);
                    for (int b = 0; b < BATCH; b++)
                        for (int j = 0; j < 2; j++)
                            total[j] += parts[2 * b + j];
                    for (int j = 0; j < 2; j++) /* the same sums as the fp32 entry's */
                        assert_true(fabs(total[j] - want.sums[2 + j]) <=
                                    1e-12 * (fabs(want.sums[2 + j]) + 1));
                    memcpy(got.sums + 2, want.sums + 2, 2 * sizeof *got.sums);
                }
                assert_memory_equal(got.sums, want.sums, sizeof want.sums);
                assert_memory_equal(got.y, want.y, VARIANTS * all * 4);
                assert_memory_equal(got.dx, want.dx, all * 4);
                free(got.y);
                free(got.dx);
                /* y stored as bf16: the fp32 y rounded */
                dt_bf16 *yh = calloc(all, 2);
                for (int v = 0; v < VARIANTS; v++) {
                    enum dt_bn_skip as;
                    const void *s = skip_of(v, half, skip, skiph, &as);
                    build_of((enum dt_isa)isa)
                        ->affine_to_bf16(half ? (const void *)(xh + n) : (const void *)(x + n),
                                         half, yh + n, n, CHANNELS * n, BATCH, 1.75f, -0.125f,
                                         v & 2, s ? dt_act_from(s, as == DT_SKIP_BF16, n) : NULL,
                                         as);
                    for (size_t i = 0; i < all; i++)
                        assert_int_equal(yh[i], dt_bf16_from_f32(want.y[v * all + i]));
                }
                free(yh);
            }
        }
        free(want.y);
        free(want.dx);
        free(x), free(dy), free(skip), free(xh), free(skiph), free(skipr);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_entries_match),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

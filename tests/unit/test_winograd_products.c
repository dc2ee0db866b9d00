/* The Winograd kernels' bf16 products (train.bf16_winograd: dt_conv_winograd_filter_bf16 and the
 * `products` argument of the _bf16 entry points) on every build this CPU runs: the avx2 and
 * avx512 builds (VDPBF16PS's arithmetic in FMAs) and, where the CPU has AVX512-BF16, the
 * avx512bf16 build (VDPBF16PS itself; skipped with a printed reason elsewhere).
 *
 * Two checks:
 *   exact     operands whose transforms V, U and dM are exactly bf16 and whose sums are exact
 *             in fp32 (x and dy in {-1, 0, 1}, each filter one tap of +-36): rounding changes
 *             nothing there and every order of addition gives the same sum, so the products
 *             mode must give the bits of the fp32 products (the emulated mode) in forward,
 *             pooled forward and both gradients. Any slip in the pair layouts (channels, tiles,
 *             an odd last tile or channel, a sample's second block, a group of samples, a
 *             thread's share) changes a value.
 *   rounding  random operands: within a bound of a double-precision conv of the bf16-rounded
 *             operands (the error of rounding V, U and dM), and not the emulated mode's bits
 *             (the transforms were rounded).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/kernels/fp32/conv_winograd.h"
#include "nn/kernels/isa.h"
#include "util/bf16.h"
#include "util/err.h"
#include "tests/unit/conv_fixture.h"
#include "tests/unit/winograd_builds.h"
#include "util/rng.h"

/* Bound of the rounding check, relative to the tensor's largest reference value. Rounding V, U
 * and dM to bf16 (8 significant bits) where the transforms have scaled terms by up to 100 (V)
 * and 225 (dM), which the inverse transforms then cancel, costs up to 7.6 % of the largest
 * value on these shapes (forward 1.3-6.2 %, weight gradient 1.3-5.3 %, input gradient
 * 1.0-7.6 %; the same on every build), where the fp32 products on the same bf16 operands
 * (autocast's arithmetic) are within 0.01 % (forward, weight gradient) and 0.35 % (the input
 * gradient, rounded to bf16 as it is stored). The exact check is what catches a slip in the
 * layouts. */
#define ROUNDING_TOL 0.12

static const struct dt_conv_shape cases[] = {
    {2, 5, 9, 9, 7, 3, 3, 1, 1},     /* odd channels both ways, 9 tiles: an odd pair */
    {3, 24, 9, 9, 30, 3, 3, 1, 1},   /* 3 samples of 9 tiles a block: an odd full block */
    {3, 16, 32, 32, 16, 3, 3, 1, 1}, /* ResNet-20 stage 1: a sample in two blocks */
    {7, 64, 8, 8, 64, 3, 3, 1, 1},   /* stage 3: three samples a block, a partial group */
    {2, 20, 13, 6, 24, 3, 3, 1, 1},  /* partial tiles and channel vectors */
    {2, 16, 15, 16, 32, 3, 3, 2, 1}, /* stride 2 */
};

static float trit(struct dt_rng *rng)
{
    return (float)dt_rng_below(rng, 3) - 1.0f;
}

/* x and dy in {-1, 0, 1}; w: one tap of +-36 per filter, so U = (6 G e_a)(6 G e_b)^T, whose
 * entries are products of two of 6G's (multiples of 1/4 of at most 6). */
static void make_exact(struct tensors *t, uint64_t seed)
{
    struct dt_rng rng;
    dt_rng_init(&rng, seed);
    for (size_t i = 0; i < t->nx; i++)
        t->x[i] = trit(&rng);
    for (size_t i = 0; i < t->ny; i++)
        t->dy[i] = trit(&rng);
    memset(t->w, 0, sizeof(float) * t->nw);
    for (size_t f = 0; f < t->nw / 9; f++)
        t->w[f * 9 + dt_rng_below(&rng, 9)] = dt_rng_below(&rng, 2) ? 36.0f : -36.0f;
}

/* The outputs of one mode: forward (relu), pooled forward (stride 1), both gradients with the
 * relu below and an extra term. */
struct run {
    float *y, *py, *dw, *dx;
    int32_t *idx;
};

static struct run run_mode(const struct tensors *t, const float *extra, bool products, int threads)
{
    const struct dt_conv_shape *s = &t->s;
    size_t np = (size_t)s->n * s->k * (t->oh / 2) * (t->ow / 2), ng = t->nw + (size_t)s->k;
    size_t nscratch = dt_conv_winograd_scratch_floats(s, threads);
    float *scratch = malloc(sizeof(float) * nscratch);
    float *u = malloc(sizeof(float) * dt_conv_winograd_filter_floats(s));
    struct run r = {malloc(sizeof(float) * t->ny), calloc(np + 1, sizeof(float)),
                    calloc(ng, sizeof(float)), malloc(sizeof(float) * t->nx),
                    calloc(np + 1, sizeof(int32_t))};
    assert_true(scratch && u && r.y && r.py && r.dw && r.dx && r.idx);
    if (products)
        assert_int_equal(dt_conv_winograd_filter_bf16(s, t->w, u), 0);
    else
        assert_int_equal(dt_conv_winograd_filter(s, t->w, u), 0);
    assert_int_equal(dt_conv_winograd_forward_bf16(s, t->x, false, products, u, t->b, r.y, NULL, 1,
                                                   scratch, nscratch, threads),
                     0);
    if (s->stride == 1)
        assert_int_equal(dt_conv_winograd_forward_bf16(s, t->x, false, products, u, t->b, r.py,
                                                       r.idx, 0, scratch, nscratch, threads),
                         0);
    assert_int_equal(dt_conv_winograd_backward_bf16(s, t->x, false, products, t->dy, NULL, t->w,
                                                    r.dw, r.dw + t->nw, r.dx, true, extra, scratch,
                                                    nscratch, threads),
                     0);
    free(scratch), free(u);
    return r;
}

static void free_run(struct run *r)
{
    free(r->y), free(r->py), free(r->dw), free(r->dx), free(r->idx);
}

static void check_exact(void)
{
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        struct tensors t = make_tensors(cases[ci], 2600 + ci, false);
        const struct dt_conv_shape *s = &t.s;
        make_exact(&t, 2700 + ci);
        struct dt_rng rng;
        dt_rng_init(&rng, 2800 + ci);
        float *extra = random_floats(&rng, t.nx);
        size_t np = (size_t)s->n * s->k * (t.oh / 2) * (t.ow / 2), ng = t.nw + (size_t)s->k;
        for (int threads = 1; threads <= 2; threads++) {
            struct run want = run_mode(&t, extra, false, threads);
            struct run got = run_mode(&t, extra, true, threads);
            assert_memory_equal(got.y, want.y, sizeof(float) * t.ny);
            assert_memory_equal(got.py, want.py, sizeof(float) * np);
            assert_memory_equal(got.idx, want.idx, sizeof(int32_t) * np);
            assert_memory_equal(got.dw, want.dw, sizeof(float) * ng);
            assert_memory_equal(got.dx, want.dx, sizeof(float) * t.nx);
            free_run(&want), free_run(&got);
        }
        free(extra);
        free_tensors(&t);
    }
}

/* The largest |got - want| over the largest |want|. */
static double relative_error(const float *got, const double *want, size_t n)
{
    double scale = 0, err = 0;
    for (size_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(want[i]));
    for (size_t i = 0; i < n; i++)
        err = fmax(err, fabs(got[i] - want[i]));
    return err / (scale > 0 ? scale : 1);
}

static void check_rounding(void)
{
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        struct tensors t = make_tensors(cases[ci], 2900 + ci, false);
        const struct dt_conv_shape *s = &t.s;
        /* the reference of the operands autocast's conv reads: x, w and dy rounded */
        dt_bf16_round_n(t.x, t.x, t.nx);
        dt_bf16_round_n(t.w, t.w, t.nw);
        dt_bf16_round_n(t.dy, t.dy, t.ny);
        size_t k = (size_t)s->k;
        memset(t.y_ref, 0, sizeof(double) * t.ny), memset(t.dw_ref, 0, sizeof(double) * t.nw);
        memset(t.db_ref, 0, sizeof(double) * k), memset(t.dx_ref, 0, sizeof(double) * t.nx);
        conv_reference(&t, false);
        struct run want = run_mode(&t, NULL, false, 2), got = run_mode(&t, NULL, true, 2);
        /* the forward with no relu's clipping: relu(y + b) against the reference below */
        double *y = malloc(sizeof(double) * t.ny), *dx = malloc(sizeof(double) * t.nx);
        assert_true(y && dx);
        size_t plane = (size_t)t.oh * t.ow;
        for (size_t i = 0; i < t.ny; i++) {
            double v = t.y_ref[i] + t.b[i / plane % k];
            y[i] = v > 0 ? v : 0;
        }
        for (size_t i = 0; i < t.nx; i++) /* the relu below's mask, x > 0 */
            dx[i] = t.x[i] > 0 ? (double)dt_bf16_round((float)t.dx_ref[i]) : 0.0;
        double err[4] = {relative_error(got.y, y, t.ny), relative_error(got.dw, t.dw_ref, t.nw),
                         relative_error(got.dw + t.nw, t.db_ref, k),
                         relative_error(got.dx, dx, t.nx)};
        const char *names[4] = {"forward", "weight gradient", "bias gradient", "input gradient"};
        for (int i = 0; i < 4; i++)
            if (!(err[i] <= ROUNDING_TOL))
                fail_msg("c=%d k=%d h=%d w=%d stride %d: %s error %.3g of the largest value "
                         "(bound %.3g)",
                         s->c, s->k, s->h, s->w, s->stride, names[i], err[i], ROUNDING_TOL);
        /* the bias gradient reads dM unrounded: the emulated mode's bits */
        assert_memory_equal(got.dw + t.nw, want.dw + t.nw, sizeof(float) * k);
        /* V, U and dM were rounded: the products are not the fp32 ones */
        assert_true(memcmp(got.y, want.y, sizeof(float) * t.ny) != 0);
        assert_true(memcmp(got.dw, want.dw, sizeof(float) * t.nw) != 0);
        assert_true(memcmp(got.dx, want.dx, sizeof(float) * t.nx) != 0);
        free(y), free(dx);
        free_run(&want), free_run(&got);
        free_tensors(&t);
    }
}

static void test_exact_operands_give_fp32_bits(void **state)
{
    (void)state;
    on_each_build(check_exact);
}

static void test_rounded_transforms_within_bound(void **state)
{
    (void)state;
    on_each_build(check_rounding);
}

/* The filter entry point refuses what the kernels do not take, with the call named. */
static void test_filter_bf16_rejects_bad_shape(void **state)
{
    (void)state;
    struct dt_conv_shape s = {1, 4, 8, 8, 4, 5, 5, 1, 2};
    float w[4 * 4 * 25] = {0}, u[16];
    assert_int_equal(dt_conv_winograd_filter_bf16(&s, w, u), -DT_EUSAGE);
    assert_non_null(strstr(dt_last_error(), "filter_bf16"));
    dt_clear_error();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_operands_give_fp32_bits),
        cmocka_unit_test(test_rounded_transforms_within_bound),
        cmocka_unit_test(test_filter_bf16_rejects_bad_shape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

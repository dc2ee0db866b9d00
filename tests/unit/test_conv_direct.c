/* nn/kernels/fp32/conv_direct: every kernel against a naive double-precision reference, on both the
 * AVX-512 and the portable path and with 1 and 2 threads; determinism; shape support; error paths.
 *
 * Tolerance: a float result may differ from the double reference by the rounding of its
 * summation, which is bounded relative to the sum of the absolute values of the terms, so each
 * element must satisfy |got - ref| <= 1e-5 * sum|terms| + 1e-6.
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

#include "nn/kernels/fp32/conv_direct.h"
#include "util/err.h"
#include "tests/unit/conv_fixture.h"
#include "util/rng.h"

static void expect_close(const char *what, const struct dt_conv_shape *s, const float *got,
                         const double *ref, const double *abs_sum, size_t n, double offset,
                         int relu)
{
    for (size_t i = 0; i < n; i++) {
        double want = ref[i] + offset;
        if (relu && want < 0)
            want = 0;
        double tol = 1e-5 * abs_sum[i] + 1e-6;
        if (fabs(got[i] - want) > tol) {
            fail_msg("%s: c=%d k=%d h=%d w=%d kernel=%dx%d pad=%d n=%d: element %zu is %.9g, "
                     "expected %.9g (tolerance %.3g)",
                     what, s->c, s->k, s->h, s->w, s->kh, s->kw, s->pad, s->n, i, got[i], want,
                     tol);
        }
    }
}

/* Runs the three kernels on the current path with `threads` threads and checks them. */
static void check_kernels(struct tensors *t, int threads)
{
    const struct dt_conv_shape *s = &t->s;
    size_t nscratch = dt_conv_direct_scratch_floats(s, threads);
    assert_true(nscratch > 0);
    float *scratch = malloc(sizeof(float) * nscratch);
    float *y = malloc(sizeof(float) * t->ny);
    float *dw = malloc(sizeof(float) * t->nw);
    float *db = malloc(sizeof(float) * (size_t)s->k);
    float *dx = malloc(sizeof(float) * t->nx);
    assert_true(scratch && y && dw && db && dx);
    for (int relu = 0; relu <= 1; relu++) {
        memset(y, 0xff, sizeof(float) * t->ny); /* NaN: every element must be written */
        assert_int_equal(
            dt_conv_direct_forward(s, t->x, t->w, t->b, y, relu, scratch, nscratch, threads), 0);
        expect_close(relu ? "forward+relu" : "forward", s, y, t->y_ref, t->y_abs, t->ny, 0.0, relu);
    }
    for (size_t i = 0; i < t->nw; i++)
        dw[i] = 0.5f; /* the kernel accumulates */
    for (int k = 0; k < s->k; k++)
        db[k] = 0.5f;
    assert_int_equal(
        dt_conv_direct_backward_weight(s, t->x, t->dy, dw, db, scratch, nscratch, threads), 0);
    expect_close("weight grad", s, dw, t->dw_ref, t->dw_abs, t->nw, 0.5, 0);
    expect_close("bias grad", s, db, t->db_ref, t->db_abs, (size_t)s->k, 0.5, 0);
    assert_int_equal(
        dt_conv_direct_backward_weight(s, t->x, t->dy, dw, NULL, scratch, nscratch, threads), 0);
    memset(dx, 0xff, sizeof(float) * t->nx); /* the kernel overwrites */
    assert_int_equal(dt_conv_direct_backward_input(s, t->dy, t->w, dx, scratch, nscratch, threads),
                     0);
    expect_close("input grad", s, dx, t->dx_ref, t->dx_abs, t->nx, 0.0, 0);
    free(scratch), free(y), free(dw), free(db), free(dx);
}

static const struct dt_conv_shape shapes[] = {
    /* n  c   h   w   k  kh kw s pad */
    {3, 1, 28, 28, 16, 3, 3, 1, 0},  /* ConvNet conv1 */
    {1, 16, 26, 26, 32, 3, 3, 1, 0}, /* ConvNet conv2 */
    {1, 3, 32, 32, 32, 3, 3, 1, 1},  /* CIFAR conv1 */
    {1, 32, 16, 16, 64, 3, 3, 1, 1}, /* CIFAR conv2 */
    {3, 3, 9, 11, 16, 3, 3, 1, 1},   {1, 16, 10, 7, 16, 5, 5, 1, 2}, {3, 32, 7, 8, 32, 5, 5, 1, 0},
    {1, 1, 13, 12, 64, 5, 5, 1, 1},  {3, 16, 6, 5, 64, 3, 3, 1, 0},  {1, 32, 9, 9, 16, 3, 3, 1, 1},
    {3, 3, 5, 4, 32, 3, 3, 1, 1},  /* rows narrower than a vector */
    {1, 5, 12, 40, 7, 3, 5, 1, 1}, /* odd channel counts, rectangular kernel, wide rows */
    {3, 2, 4, 3, 13, 1, 1, 1, 0},  /* 1x1 kernel */
    {1, 3, 3, 3, 16, 3, 3, 1, 0},  /* a single output pixel */
};

static void run_all_shapes(bool simd)
{
    bool was = dt_conv_direct_allow_simd(simd);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        assert_true(dt_conv_direct_supported(&shapes[i]));
        struct tensors t = make_tensors(shapes[i], 1000 + i, true);
        check_kernels(&t, 1);
        check_kernels(&t, 2);
        free_tensors(&t);
    }
    dt_conv_direct_allow_simd(was);
}

static void test_simd_path_matches_reference(void **state)
{
    (void)state;
    dt_conv_direct_allow_simd(true);
    if (!dt_conv_direct_uses_simd())
        skip();
    run_all_shapes(true);
}

static void test_portable_path_matches_reference(void **state)
{
    (void)state;
    run_all_shapes(false);
}

static void test_results_are_deterministic(void **state)
{
    (void)state;
    struct dt_conv_shape s = {5, 16, 12, 12, 32, 3, 3, 1, 1};
    struct tensors t = make_tensors(s, 7, true);
    size_t nscratch = dt_conv_direct_scratch_floats(&s, 2);
    float *scratch = malloc(sizeof(float) * nscratch);
    float *out[2][3];
    for (int run = 0; run < 2; run++) {
        out[run][0] = calloc(t.ny, sizeof(float));
        out[run][1] = calloc(t.nw, sizeof(float));
        out[run][2] = calloc(t.nx, sizeof(float));
        assert_int_equal(
            dt_conv_direct_forward(&s, t.x, t.w, t.b, out[run][0], 1, scratch, nscratch, 2), 0);
        assert_int_equal(
            dt_conv_direct_backward_weight(&s, t.x, t.dy, out[run][1], NULL, scratch, nscratch, 2),
            0);
        assert_int_equal(
            dt_conv_direct_backward_input(&s, t.dy, t.w, out[run][2], scratch, nscratch, 2), 0);
    }
    assert_memory_equal(out[0][0], out[1][0], sizeof(float) * t.ny);
    assert_memory_equal(out[0][1], out[1][1], sizeof(float) * t.nw);
    assert_memory_equal(out[0][2], out[1][2], sizeof(float) * t.nx);
    for (int run = 0; run < 2; run++)
        for (int i = 0; i < 3; i++)
            free(out[run][i]);
    free(scratch);
    free_tensors(&t);
}

static void test_supported_shapes(void **state)
{
    (void)state;
    static const struct dt_conv_shape no[] = {
        {1, 1, 8, 8, 16, 3, 3, 2, 0},               /* stride 2 */
        {1, 1, 8, 8, 16, 3, 3, 1, 3},               /* pad >= kernel */
        {1, 1, 8, 8, 16, 3, 3, 1, -1},              /* negative pad */
        {1, 1, 20, 20, 16, 12, 12, 1, 0},           /* kernel too large */
        {1, 1, 2, 8, 16, 3, 3, 1, 0},               /* empty output */
        {0, 1, 8, 8, 16, 3, 3, 1, 0},               /* no samples */
        {1, 0, 8, 8, 16, 3, 3, 1, 0},               /* no channels */
        {1, 1, 8, 8, 0, 3, 3, 1, 0},                /* no output channels */
        {1 << 16, 1 << 10, 64, 64, 16, 3, 3, 1, 0}, /* input beyond int indexing */
    };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        assert_false(dt_conv_direct_supported(&no[i]));
        assert_int_equal(dt_conv_direct_scratch_floats(&no[i], 1), 0);
    }
    assert_false(dt_conv_direct_supported(NULL));
    struct dt_conv_shape ok = {1, 1, 8, 8, 16, 3, 5, 1, 2};
    assert_true(dt_conv_direct_supported(&ok));
    assert_int_equal(dt_conv_direct_out_h(&ok), 10);
    assert_int_equal(dt_conv_direct_out_w(&ok), 8);
    assert_int_equal(dt_conv_direct_scratch_floats(&ok, 0), 0);
    assert_true(dt_conv_direct_scratch_floats(&ok, 2) > dt_conv_direct_scratch_floats(&ok, 1));
}

static void test_bad_calls_fail_with_message(void **state)
{
    (void)state;
    struct dt_conv_shape s = {1, 2, 6, 6, 16, 3, 3, 1, 1};
    size_t need = dt_conv_direct_scratch_floats(&s, 1);
    float *scratch = calloc(need, sizeof(float));
    float x[72] = {0}, w[288] = {0}, y[576], dx[72];
    assert_int_equal(dt_conv_direct_forward(&s, x, w, NULL, y, 0, scratch, need - 1, 1),
                     -DT_EUSAGE);
    assert_non_null(strstr(dt_last_error(), "conv_direct forward: scratch has"));
    assert_int_equal(dt_conv_direct_backward_input(&s, y, w, dx, scratch, need, 0), -DT_EUSAGE);
    assert_string_equal(dt_last_error(), "conv_direct backward_input: threads must be >= 1, got 0");
    s.stride = 2;
    assert_int_equal(dt_conv_direct_backward_weight(&s, x, y, w, NULL, scratch, need, 1),
                     -DT_EUSAGE);
    assert_non_null(strstr(dt_last_error(), "conv_direct backward_weight: unsupported shape"));
    assert_non_null(strstr(dt_last_error(), "stride=2"));
    assert_int_equal(dt_conv_direct_forward(NULL, x, w, NULL, y, 0, scratch, need, 1), -DT_EUSAGE);
    free(scratch);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simd_path_matches_reference),
        cmocka_unit_test(test_portable_path_matches_reference),
        cmocka_unit_test(test_results_are_deterministic),
        cmocka_unit_test(test_supported_shapes),
        cmocka_unit_test(test_bad_calls_fail_with_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

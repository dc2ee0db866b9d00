/* nn/kernels/fp32/elementwise and softmax, each kernel alone against a naive reference: relu
 * (both backward forms, the gradient at 0), gelu (forward against erf in double, backward
 * against the derivative in double), the residual add with and without its fused relu, the
 * gradient copy and sum, dropout's mask (per value and per plane), log_softmax forward and
 * backward. Every length is run below and above DT_PARALLEL_MIN, so the one-thread and the
 * OpenMP paths are both covered. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nn/kernels/fp32/elementwise.h"
#include "util/bf16.h"
#include "nn/kernels/fp32/softmax.h"
#include "nn/kernels/parallel.h"

static const long lengths[] = {1, 7, 1000, 3 * DT_PARALLEL_MIN + 5};
#define NLEN (sizeof lengths / sizeof lengths[0])

/* A reproducible value in [-2, 2), exact zeros among them (every 11th). */
static float value(long i, unsigned salt)
{
    unsigned h = (unsigned)i * 2654435761u + salt * 40503u;
    return i % 11 == 3 ? 0.0f : (float)(h % 4001u) / 1000.0f - 2.0f;
}

static float *filled(long n, unsigned salt)
{
    float *p = malloc((size_t)(n + 1) * sizeof *p); /* + 1: never malloc(0) */
    assert_non_null(p);
    for (long i = 0; i < n; i++)
        p[i] = value(i, salt);
    return p;
}

static float *blank(long n)
{
    float *p = malloc((size_t)(n + 1) * sizeof *p); /* + 1: never malloc(0) */
    assert_non_null(p);
    for (long i = 0; i < n; i++)
        p[i] = NAN; /* every element must be written */
    return p;
}

static void test_relu(void **state)
{
    (void)state;
    for (size_t t = 0; t < NLEN; t++) {
        long n = lengths[t];
        float *x = filled(n, 1), *dy = filled(n, 2), *extra = filled(n, 3);
        float *y = blank(n), *dx = blank(n), *dx2 = blank(n);
        dt_relu_forward(x, y, n);
        dt_relu_backward(y, dy, NULL, dx, n);
        dt_relu_backward(y, dy, extra, dx2, n);
        for (long i = 0; i < n; i++) {
            assert_true(y[i] == (x[i] > 0.0f ? x[i] : 0.0f));
            /* the gradient at 0 is 0, as in PyTorch; a positive zero either way */
            float want = x[i] > 0.0f ? dy[i] : 0.0f;
            assert_memory_equal(&dx[i], &want, sizeof want);
            want = x[i] > 0.0f ? dy[i] + extra[i] : 0.0f;
            assert_memory_equal(&dx2[i], &want, sizeof want);
        }
        free(x), free(dy), free(extra), free(y), free(dx), free(dx2);
    }
}

static void test_gelu(void **state)
{
    (void)state;
    for (size_t t = 0; t < NLEN; t++) {
        long n = lengths[t];
        float *x = filled(n, 4), *dy = filled(n, 5), *y = blank(n), *dx = blank(n);
        dt_gelu_forward(x, y, n);
        dt_gelu_backward(x, dy, dx, n);
        for (long i = 0; i < n; i++) {
            double v = x[i], cdf = 0.5 * (1.0 + erf(v / sqrt(2.0)));
            double pdf = exp(-0.5 * v * v) / sqrt(2.0 * M_PI);
            assert_true(fabs(y[i] - v * cdf) <= 1e-6 * (1.0 + fabs(v)));
            assert_true(fabs(dx[i] - dy[i] * (cdf + v * pdf)) <= 1e-6 * (1.0 + fabs(dy[i])));
        }
        free(x), free(dy), free(y), free(dx);
    }
}

static void test_add_copy_sum(void **state)
{
    (void)state;
    for (size_t t = 0; t < NLEN; t++) {
        long n = lengths[t];
        float *x = filled(n, 6), *s = filled(n, 7), *y = blank(n), *yr = blank(n);
        float *c = blank(n), *acc = filled(n, 8), *yb = blank(n), *ybr = blank(n);
        dt_add_forward(x, s, y, n, false, false);
        dt_add_forward(x, s, yr, n, true, false);
        dt_add_forward(x, s, yb, n, false, true);
        dt_add_forward(x, s, ybr, n, true, true);
        dt_copy(c, s, n);
        dt_add_into(acc, x, n);
        for (long i = 0; i < n; i++) {
            float sum = x[i] + s[i];
            assert_true(y[i] == sum);
            assert_true(yr[i] == (sum > 0.0f ? sum : 0.0f));
            /* round_skip: the skip as a bf16 value */
            float sum_b = x[i] + dt_bf16_round(s[i]);
            assert_memory_equal(&yb[i], &sum_b, sizeof sum_b);
            sum_b = sum_b > 0.0f ? sum_b : 0.0f;
            assert_memory_equal(&ybr[i], &sum_b, sizeof sum_b);
            assert_memory_equal(&c[i], &s[i], sizeof c[i]);
            assert_true(acc[i] == value(i, 8) + x[i]);
        }
        free(x), free(s), free(y), free(yr), free(c), free(acc), free(yb), free(ybr);
    }
}

/* units of `unit` floats per sample; every third unit dropped. */
static void check_dropout(size_t units, size_t unit, int batch)
{
    size_t n = (size_t)batch * units * unit;
    uint8_t *mask = malloc((size_t)batch * units + 1);
    assert_non_null(mask);
    for (size_t u = 0; u < (size_t)batch * units; u++)
        mask[u] = u % 3 != 1;
    float *in = filled((long)n, 9), *out = blank((long)n);
    const float scale = 1.0f / (1.0f - 0.25f);
    dt_dropout_apply(mask, units, unit, scale, in, out, batch);
    for (size_t i = 0; i < n; i++) {
        size_t b = i / (units * unit), u = i % (units * unit) / unit;
        float want = in[i] * (mask[b * units + u] ? scale : 0.0f);
        assert_memory_equal(&out[i], &want, sizeof want);
    }
    free(mask), free(in), free(out);
}

static void test_dropout_mask(void **state)
{
    (void)state;
    check_dropout(10, 1, 3);       /* dropout: one decision per value */
    check_dropout(5, 7 * 7, 4);    /* dropout2d: one per 7x7 plane */
    check_dropout(64, 32 * 32, 3); /* above the threshold: over the team */
    check_dropout(1000, 1, 0);     /* an empty share of a batch */
}

static void test_log_softmax(void **state)
{
    (void)state;
    const int shapes[][2] = {{1, 1}, {3, 10}, {5, 1000}, {64, 7}};
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        int rows = shapes[t][0], n = shapes[t][1];
        long all = (long)rows * n;
        float *x = filled(all, 10), *dy = filled(all, 11), *y = blank(all), *dx = blank(all);
        x[0] = 80.0f; /* a large logit: the maximum is factored out, nothing overflows */
        dt_log_softmax_forward(x, y, rows, n);
        dt_log_softmax_backward(y, dy, dx, rows, n);
        for (int b = 0; b < rows; b++) {
            const float *xr = x + (size_t)b * n, *yr = y + (size_t)b * n;
            const float *dyr = dy + (size_t)b * n, *dxr = dx + (size_t)b * n;
            double max = xr[0], s = 0, sdy = 0;
            for (int k = 1; k < n; k++)
                max = xr[k] > max ? xr[k] : max;
            for (int k = 0; k < n; k++)
                s += exp(xr[k] - max), sdy += dyr[k];
            double lse = max + log(s);
            for (int k = 0; k < n; k++) {
                assert_true(fabs(yr[k] - (xr[k] - lse)) <= 1e-5 * (1.0 + fabs(xr[k] - lse)));
                double want = dyr[k] - exp(xr[k] - lse) * sdy;
                assert_true(fabs(dxr[k] - want) <= 1e-5 * (1.0 + fabs(want)));
            }
        }
        free(x), free(dy), free(y), free(dx);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relu),         cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_add_copy_sum), cmocka_unit_test(test_dropout_mask),
        cmocka_unit_test(test_log_softmax),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

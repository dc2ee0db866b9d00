/* nn/kernels/fp32/pool, each kernel alone against a naive reference: max pooling on the
 * vectorised 2x2 path and the general one (padding, overlapping windows, the first maximum on
 * ties, NaN winning), its backward (the 2x2 path's row-pair stores and the general scatter,
 * the same bits: a -0 gradient lands as +0) with and without the fused relu's mask, average
 * pooling with padded zeros counted and its backward as the exact adjoint, global average
 * pooling. Plane counts run below and above DT_PARALLEL_MIN. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nn/kernels/fp32/pool.h"

struct shape {
    int planes, h, w, k, stride, pad;
};

static const struct shape shapes[] = {
    {3, 4, 4, 2, 2, 0},     /* the 2x2 path */
    {5, 7, 9, 2, 2, 0},     /* 2x2 with an odd edge dropped */
    {4, 7, 7, 3, 2, 1},     /* padded, overlapping */
    {2, 6, 5, 3, 1, 1},     /* stride 1 */
    {2, 8, 8, 4, 4, 2},     /* padding = k / 2 */
    {600, 16, 16, 2, 2, 0}, /* above the threshold: over the team */
    {300, 15, 15, 3, 2, 1},
};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

static struct dt_pool_geom geom(const struct shape *s)
{
    struct dt_pool_geom g = {.k = s->k, .stride = s->stride, .pad = s->pad};
    g.oh = (s->h + 2 * s->pad - s->k) / s->stride + 1;
    g.ow = (s->w + 2 * s->pad - s->k) / s->stride + 1;
    return g;
}

/* Values on a coarse grid, so windows hold ties. */
static float *filled(size_t n, unsigned salt)
{
    float *p = malloc((n + 1) * sizeof *p);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++)
        p[i] = (float)((i * 2654435761u + salt * 40503u) % 7u) - 3.0f;
    return p;
}

static float *blank(size_t n)
{
    float *p = malloc((n + 1) * sizeof *p);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++)
        p[i] = NAN;
    return p;
}

/* The winner of window (oy, ox) of plane xp: the first maximum in row-major order, NaN wins. */
static int naive_argmax(const float *xp, const struct shape *s, int oy, int ox)
{
    int best = -1;
    for (int ky = 0; ky < s->k; ky++)
        for (int kx = 0; kx < s->k; kx++) {
            int iy = oy * s->stride - s->pad + ky, ix = ox * s->stride - s->pad + kx;
            if (iy < 0 || iy >= s->h || ix < 0 || ix >= s->w)
                continue;
            int i = iy * s->w + ix;
            if (best < 0 || isnan(xp[i]) || (!isnan(xp[best]) && xp[i] > xp[best]))
                best = i;
            if (isnan(xp[best]))
                return best;
        }
    return best;
}

static void test_maxpool(void **state)
{
    (void)state;
    for (size_t t = 0; t < NSHAPES; t++) {
        const struct shape *s = &shapes[t];
        struct dt_pool_geom g = geom(s);
        size_t in_plane = (size_t)s->h * s->w, out_plane = (size_t)g.oh * g.ow;
        size_t nin = (size_t)s->planes * in_plane, nout = (size_t)s->planes * out_plane;
        float *x = filled(nin, (unsigned)t), *y = blank(nout), *dy = filled(nout, 99);
        float *dx = blank(nin), *dxr = blank(nin), *want = calloc(nin + 1, sizeof *want);
        float *want_r = calloc(nin + 1, sizeof *want_r);
        int32_t *idx = malloc((nout + 1) * sizeof *idx);
        assert_non_null(want);
        assert_non_null(want_r);
        assert_non_null(idx);
        x[5] = NAN; /* NaN propagates, as in PyTorch */
        /* a -0 gradient lands as +0 (0 + -0), a NaN as NaN, on either backward loop */
        dy[1] = -0.0f;
        dy[2] = NAN;
        dt_maxpool_forward(&g, x, y, idx, s->planes, s->h, s->w);
        for (int p = 0; p < s->planes; p++)
            for (int oy = 0; oy < g.oh; oy++)
                for (int ox = 0; ox < g.ow; ox++) {
                    size_t o = (size_t)p * out_plane + (size_t)oy * g.ow + ox;
                    int best = naive_argmax(x + p * in_plane, s, oy, ox);
                    assert_int_equal(idx[o], best);
                    assert_memory_equal(&y[o], &x[p * in_plane + best], sizeof y[o]);
                    want[p * in_plane + best] += dy[o];
                    want_r[p * in_plane + best] += y[o] > 0.0f ? dy[o] : 0.0f;
                }
        dt_maxpool_backward(&g, idx, NULL, dy, dx, s->planes, s->h, s->w);
        dt_maxpool_backward(&g, idx, y, dy, dxr, s->planes, s->h, s->w);
        assert_memory_equal(dx, want, nin * sizeof *dx);
        assert_memory_equal(dxr, want_r, nin * sizeof *dxr);
        free(x), free(y), free(dy), free(dx), free(dxr), free(want), free(want_r), free(idx);
    }
}

static void test_avgpool(void **state)
{
    (void)state;
    for (size_t t = 0; t < NSHAPES; t++) {
        const struct shape *s = &shapes[t];
        struct dt_pool_geom g = geom(s);
        size_t in_plane = (size_t)s->h * s->w, out_plane = (size_t)g.oh * g.ow;
        size_t nin = (size_t)s->planes * in_plane, nout = (size_t)s->planes * out_plane;
        float *x = filled(nin, (unsigned)t + 7), *y = blank(nout), *dy = filled(nout, 5);
        float *dx = blank(nin);
        dt_avgpool_forward(&g, x, y, s->planes, s->h, s->w);
        dt_avgpool_backward(&g, dy, dx, s->planes, s->h, s->w);
        double lhs = 0, rhs = 0; /* <avgpool(x), dy> == <x, avgpool'(dy)>: the adjoint */
        for (int p = 0; p < s->planes; p++)
            for (int oy = 0; oy < g.oh; oy++)
                for (int ox = 0; ox < g.ow; ox++) {
                    double sum = 0; /* padded zeros count: always k*k */
                    for (int ky = 0; ky < s->k; ky++)
                        for (int kx = 0; kx < s->k; kx++) {
                            int iy = oy * s->stride - s->pad + ky;
                            int ix = ox * s->stride - s->pad + kx;
                            if (iy >= 0 && iy < s->h && ix >= 0 && ix < s->w)
                                sum += x[p * in_plane + (size_t)iy * s->w + ix];
                        }
                    size_t o = (size_t)p * out_plane + (size_t)oy * g.ow + ox;
                    assert_true(fabs(y[o] - sum / (s->k * s->k)) <= 1e-6);
                    lhs += (double)y[o] * dy[o];
                }
        for (size_t i = 0; i < nin; i++)
            rhs += (double)x[i] * dx[i];
        assert_true(fabs(lhs - rhs) <= 1e-4 * (1.0 + fabs(lhs)));
        free(x), free(y), free(dy), free(dx);
    }
}

static void test_global_avgpool(void **state)
{
    (void)state;
    const int cases[][2] = {{1, 1}, {6, 49}, {3000, 64}};
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        int planes = cases[t][0];
        size_t hw = (size_t)cases[t][1], n = (size_t)planes * hw;
        float *x = filled(n, 3), *y = blank((size_t)planes), *dy = filled((size_t)planes, 4);
        float *dx = blank(n);
        dt_global_avgpool_forward(x, y, planes, hw);
        dt_global_avgpool_backward(dy, dx, planes, hw);
        for (int p = 0; p < planes; p++) {
            double sum = 0;
            for (size_t k = 0; k < hw; k++) {
                sum += x[p * hw + k];
                assert_true(dx[p * hw + k] == dy[p] / (float)hw);
            }
            assert_true(fabs(y[p] - sum / (double)hw) <= 1e-6);
        }
        free(x), free(y), free(dy), free(dx);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_maxpool),
        cmocka_unit_test(test_avgpool),
        cmocka_unit_test(test_global_avgpool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* nn/kernels/fp32/im2col: the column matrix against a naive gather, and col2im as its exact
 * adjoint (<im2col(x), c> == <x, col2im(c)>), on padded, strided and unpadded shapes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "nn/kernels/fp32/im2col.h"

static const struct dt_conv_shape shapes[] = {
    {.c = 1, .h = 5, .w = 5, .k = 1, .kh = 3, .kw = 3, .stride = 1, .pad = 0},
    {.c = 3, .h = 6, .w = 7, .k = 1, .kh = 3, .kw = 3, .stride = 1, .pad = 1},
    {.c = 2, .h = 9, .w = 8, .k = 1, .kh = 3, .kw = 3, .stride = 2, .pad = 1},
    {.c = 2, .h = 7, .w = 7, .k = 1, .kh = 5, .kw = 5, .stride = 2, .pad = 2},
    {.c = 4, .h = 4, .w = 6, .k = 1, .kh = 1, .kw = 1, .stride = 1, .pad = 0},
};

static int out_side(int in, int k, int stride, int pad)
{
    return (in + 2 * pad - k) / stride + 1;
}

/* x[b][c][iy][ix] under tap (c, ky, kx) of output pixel (oy, ox), 0 in the padding. */
static float naive_entry(const struct dt_conv_shape *s, const float *x, int b, int r, int oy,
                         int ox)
{
    int c = r / (s->kh * s->kw), ky = r / s->kw % s->kh, kx = r % s->kw;
    int iy = oy * s->stride - s->pad + ky, ix = ox * s->stride - s->pad + kx;
    if (iy < 0 || iy >= s->h || ix < 0 || ix >= s->w)
        return 0.0f;
    return x[(((size_t)b * s->c + c) * s->h + iy) * s->w + ix];
}

static void test_columns_and_adjoint(void **state)
{
    (void)state;
    const int batch = 3;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const struct dt_conv_shape *s = &shapes[i];
        int oh = out_side(s->h, s->kh, s->stride, s->pad);
        int ow = out_side(s->w, s->kw, s->stride, s->pad);
        size_t rows = (size_t)s->c * s->kh * s->kw, cols = (size_t)batch * oh * ow;
        size_t nx = (size_t)batch * s->c * s->h * s->w;
        float *x = malloc(nx * sizeof *x), *dx = malloc(nx * sizeof *dx);
        float *col = malloc(rows * cols * sizeof *col), *c2 = malloc(rows * cols * sizeof *c2);
        assert_non_null(x);
        assert_non_null(dx);
        assert_non_null(col);
        assert_non_null(c2);
        for (size_t j = 0; j < nx; j++)
            x[j] = (float)((j * 7919) % 101) / 50.0f - 1.0f;
        for (size_t j = 0; j < rows * cols; j++) {
            col[j] = NAN; /* every entry must be written */
            c2[j] = (float)((j * 104729) % 97) / 48.0f - 1.0f;
        }
        dt_im2col(s, x, col, batch);
        for (size_t r = 0; r < rows; r++)
            for (int b = 0; b < batch; b++)
                for (int oy = 0; oy < oh; oy++)
                    for (int ox = 0; ox < ow; ox++) {
                        size_t at = r * cols + ((size_t)b * oh + oy) * ow + ox;
                        assert_true(col[at] == naive_entry(s, x, b, (int)r, oy, ox));
                    }
        for (size_t j = 0; j < nx; j++)
            dx[j] = NAN; /* col2im overwrites */
        dt_col2im(s, c2, dx, batch);
        double lhs = 0, rhs = 0;
        for (size_t j = 0; j < rows * cols; j++)
            lhs += (double)col[j] * c2[j];
        for (size_t j = 0; j < nx; j++)
            rhs += (double)x[j] * dx[j];
        /* dx sums up to kh * kw float terms per pixel: float rounding, not a wrong tap */
        assert_true(fabs(lhs - rhs) <= 1e-5 * (fabs(lhs) + 1.0));
        free(x);
        free(dx);
        free(col);
        free(c2);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_columns_and_adjoint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

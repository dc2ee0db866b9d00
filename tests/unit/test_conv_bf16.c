/* nn/kernels/conv_bf16: the stride-1 bf16 convolution (channel-pair planes read in place as
 * tiles, packed weights, padded-width output compacted to NCHW) on every path against a
 * double-precision direct convolution of the bf16-rounded operands, with the fp32-accumulation
 * bound of test_gemm_bf16.c: |y - exact| <= 2 (K + 1) 2^-24 sum |x w|, K = C kh kw. Shapes cover
 * channel counts below, at and above a 32-channel tile row, plane widths whose padded rows
 * do not fill a 16-position tile, 1x1 and 5x5 kernels, no padding, and output channels that
 * do not fill a 16-wide tile. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "nn/kernels/conv_bf16.h"

static uint64_t rng = 2463534242ull;
static float uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / (1 << 23))) - 1.0f;
}

static double check_conv(enum dt_bf16_path p, struct dt_conv_shape s, bool bias)
{
    struct dt_conv_bf16_geom g;
    assert_int_equal(dt_conv_bf16_geometry(&s, &g), 0);
    size_t nx = (size_t)s.c * s.h * s.w, nw = (size_t)s.k * s.c * s.kh * s.kw;
    size_t ny = (size_t)s.k * g.oh * g.ow;
    float *x = malloc(nx * 4), *w = malloc(nw * 4), *b = malloc((size_t)s.k * 4);
    float *y = malloc(ny * 4);
    for (size_t i = 0; i < nx; i++)
        x[i] = uniform();
    for (size_t i = 0; i < nw; i++)
        w[i] = uniform();
    for (int i = 0; i < s.k; i++)
        b[i] = uniform();
    for (size_t i = 0; i < ny; i++)
        y[i] = NAN; /* every output must be written */
    dt_bf16 *xv = malloc(g.xv * 2), *wp = malloc(g.wpack * 2);
    float *yq = malloc(g.yq * 4);
    dt_conv_bf16_pad_input(&s, &g, x, xv);
    dt_conv_bf16_pack_weights(&s, &g, w, wp);
    dt_conv_bf16_forward_on(p, &s, &g, xv, wp, yq);
    dt_conv_bf16_compact(&s, &g, yq, bias ? b : NULL, y);
    double worst = 0;
    for (int k = 0; k < s.k; k++)
        for (int oh = 0; oh < g.oh; oh++)
            for (int ow = 0; ow < g.ow; ow++) {
                double exact = bias ? b[k] : 0, mag = fabs(exact);
                for (int c = 0; c < s.c; c++)
                    for (int i = 0; i < s.kh; i++)
                        for (int j = 0; j < s.kw; j++) {
                            int ih = oh + i - s.pad, iw = ow + j - s.pad;
                            if (ih < 0 || iw < 0 || ih >= s.h || iw >= s.w)
                                continue;
                            double t = (double)dt_bf16_round(x[(c * s.h + ih) * s.w + iw]) *
                                       dt_bf16_round(w[((k * s.c + c) * s.kh + i) * s.kw + j]);
                            exact += t;
                            mag += fabs(t);
                        }
                double bound = 2.0 * (s.c * s.kh * s.kw + 2) * 0x1p-24 * mag + 1e-30;
                double got = y[(k * g.oh + oh) * g.ow + ow];
                double r = isnan(got) ? INFINITY : fabs(got - exact) / bound;
                worst = r > worst ? r : worst;
            }
    free(x), free(w), free(b), free(y), free(xv), free(wp), free(yq);
    return worst;
}

static void run_shapes(enum dt_bf16_path p)
{
    const char *why;
    if (!dt_bf16_path_available(p, &why)) {
        print_message("skip %s path: %s\n", dt_bf16_path_name(p), why);
        skip();
    }
    static const struct dt_conv_shape shapes[] = {
        {1, 3, 32, 32, 16, 3, 3, 1, 1},  /* ResNet's stem: 3 channels in a 32-wide row */
        {1, 16, 32, 32, 16, 3, 3, 1, 1}, /* stage 1 */
        {1, 32, 16, 16, 32, 3, 3, 1, 1}, /* stage 2 */
        {1, 64, 8, 8, 64, 3, 3, 1, 1},   /* stage 3: a padded row of 10 positions */
        {1, 40, 7, 9, 20, 3, 3, 1, 1},   /* channels over one row, outputs under two tiles */
        {1, 5, 6, 11, 7, 5, 5, 1, 2},    /* 5x5 */
        {1, 33, 5, 5, 17, 1, 1, 1, 0},   /* 1x1 */
        {1, 8, 9, 9, 3, 3, 3, 1, 0},     /* no padding */
    };
    double worst = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        double r = check_conv(p, shapes[i], i % 2);
        if (r > 1)
            fail_msg("%s: shape %zu off by %.2f times the bound", dt_bf16_path_name(p), i, r);
        worst = r > worst ? r : worst;
    }
    print_message("%s: worst error %.3f of the bound\n", dt_bf16_path_name(p), worst);
}

static void test_reference_path(void **state)
{
    (void)state;
    run_shapes(DT_BF16_REFERENCE);
}

static void test_ctile_path(void **state)
{
    (void)state;
    run_shapes(DT_BF16_CTILE);
}

static void test_amx_path(void **state)
{
    (void)state;
    run_shapes(DT_BF16_AMX);
}

static void test_unsupported_shapes_are_refused(void **state)
{
    (void)state;
    struct dt_conv_bf16_geom g;
    struct dt_conv_shape s2 = {1, 16, 32, 32, 16, 3, 3, 2, 1};
    assert_int_equal(dt_conv_bf16_geometry(&s2, &g), -2);
    struct dt_conv_shape tiny = {1, 16, 1, 1, 16, 3, 3, 1, 0};
    assert_int_equal(dt_conv_bf16_geometry(&tiny, &g), -2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_path),
        cmocka_unit_test(test_ctile_path),
        cmocka_unit_test(test_amx_path),
        cmocka_unit_test(test_unsupported_shapes_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

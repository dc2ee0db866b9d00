/* nn/kernels/conv_bf16: the stride-1 bf16 convolution (channel-pair planes read in place as
 * tiles, packed weights, padded-width output compacted to NCHW) on every path against a
 * double-precision direct convolution of the bf16-rounded operands, within the fp32-accumulation
 * bound of bf16_checks.h: |y - exact| <= 2 (K + 2) 2^-24 sum |x w|, K = C kh kw. Shapes cover
 * channel counts below, at and above a 32-channel tile row, plane widths whose padded rows
 * do not fill a 16-position tile, 1x1 and 5x5 kernels, no padding, and output channels that
 * do not fill a 16-wide tile, tap pairing (16 channels or fewer) over odd and even kernel
 * widths; the two backward products the same way. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/kernels/bf16/conv_bf16.h"
#include "nn/kernels/fp32/batchnorm.h"
#include "nn/kernels/fp32/pool.h"
#include "tests/unit/bf16_checks.h"

static uint64_t rng = 2463534242ull;
static float uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / (1 << 23))) - 1.0f;
}

/* The forward product in the pair-plane layout, or channels-last (cl). */
static double check_conv_layout(enum dt_bf16_path p, struct dt_conv_shape s, bool bias, bool cl)
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
    float *yq = malloc((cl ? g.ycl : g.yq) * 4);
    if (cl) {
        dt_conv_bf16_pad_input_cl(&s, &g, x, xv);
        dt_conv_bf16_pack_weights_cl(&s, &g, w, wp);
        dt_conv_bf16_forward_cl_on(p, &s, &g, xv, wp, yq);
        dt_conv_bf16_compact_cl(&s, &g, yq, bias ? b : NULL, y);
    } else {
        dt_conv_bf16_pad_input(&s, &g, x, xv);
        dt_conv_bf16_pack_weights(&s, &g, w, wp);
        dt_conv_bf16_forward_on(p, &s, &g, xv, wp, yq);
        dt_conv_bf16_compact(&s, &g, yq, bias ? b : NULL, false, false, DT_STORE_F32, y);
    }
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
                worst = fmax(worst, bf16_bound_ratio(y[(k * g.oh + oh) * g.ow + ow], exact, mag,
                                                     (long)s.c * s.kh * s.kw + 2));
            }
    free(x), free(w), free(b), free(y), free(xv), free(wp), free(yq);
    return worst;
}

/* dX through the forward kernel (transposed, rotated weights) against
 * dX[c][ih][iw] = sum over k, i, j of dY[k][ih + pad - i][iw + pad - j] W[k][c][i][j]. */
static double check_conv(enum dt_bf16_path p, struct dt_conv_shape s, bool bias)
{
    return check_conv_layout(p, s, bias, false);
}

static double check_conv_cl(enum dt_bf16_path p, struct dt_conv_shape s, bool bias)
{
    return check_conv_layout(p, s, bias, true);
}

static double check_input_grad(enum dt_bf16_path p, struct dt_conv_shape s, bool variant)
{
    (void)variant;
    struct dt_conv_shape t;
    struct dt_conv_bf16_geom g;
    dt_conv_bf16_input_grad_shape(&s, &t);
    assert_int_equal(dt_conv_bf16_geometry(&t, &g), 0);
    assert_int_equal(g.oh, s.h);
    assert_int_equal(g.ow, s.w);
    int oh = t.h, ow = t.w;
    size_t ndy = (size_t)s.k * oh * ow, nw = (size_t)s.k * s.c * s.kh * s.kw;
    size_t ndx = (size_t)s.c * s.h * s.w;
    float *dy = malloc(ndy * 4), *w = malloc(nw * 4), *dx = malloc(ndx * 4);
    for (size_t i = 0; i < ndy; i++)
        dy[i] = uniform();
    for (size_t i = 0; i < nw; i++)
        w[i] = uniform();
    dt_bf16 *xv = malloc(g.xv * 2), *wp = malloc(g.wpack * 2);
    float *yq = malloc(g.yq * 4);
    dt_conv_bf16_pad_input(&t, &g, dy, xv);
    dt_conv_bf16_pack_weights_input_grad(&t, &g, w, wp);
    dt_conv_bf16_forward_on(p, &t, &g, xv, wp, yq);
    dt_conv_bf16_compact(&t, &g, yq, NULL, false, false, DT_STORE_F32, dx);
    double worst = 0;
    for (int c = 0; c < s.c; c++)
        for (int ih = 0; ih < s.h; ih++)
            for (int iw = 0; iw < s.w; iw++) {
                double exact = 0, mag = 0;
                for (int k = 0; k < s.k; k++)
                    for (int i = 0; i < s.kh; i++)
                        for (int j = 0; j < s.kw; j++) {
                            int y0 = ih + s.pad - i, x0 = iw + s.pad - j;
                            if (y0 < 0 || x0 < 0 || y0 >= oh || x0 >= ow)
                                continue;
                            double v = (double)dt_bf16_round(dy[(k * oh + y0) * ow + x0]) *
                                       dt_bf16_round(w[((k * s.c + c) * s.kh + i) * s.kw + j]);
                            exact += v;
                            mag += fabs(v);
                        }
                worst = fmax(worst, bf16_bound_ratio(dx[(c * s.h + ih) * s.w + iw], exact, mag,
                                                     (long)s.k * s.kh * s.kw + 1));
            }
    free(dy), free(w), free(dx), free(xv), free(wp), free(yq);
    return worst;
}

/* dW over 3 samples, accumulated onto a non-zero start or not, against
 * dW[k][c][i][j] = start + sum over samples, oh, ow of dY[k][oh][ow] X[c][oh + i - pad][ow + j -
 * pad]. */
static double check_weight_grad(enum dt_bf16_path p, struct dt_conv_shape s, bool accumulate)
{
    enum { N = 3 };
    struct dt_conv_bf16_geom g;
    assert_int_equal(dt_conv_bf16_geometry(&s, &g), 0);
    size_t sx = (size_t)s.c * s.h * s.w, sy = (size_t)s.k * g.oh * g.ow;
    size_t nw = (size_t)s.k * s.c * s.kh * s.kw;
    float *x = malloc(N * sx * 4), *dy = malloc(N * sy * 4), *dw = malloc(nw * 4);
    float *start = malloc(nw * 4), *dwt = malloc(g.dwt * 4);
    for (size_t i = 0; i < N * sx; i++)
        x[i] = uniform();
    for (size_t i = 0; i < N * sy; i++)
        dy[i] = uniform();
    for (size_t i = 0; i < nw; i++)
        start[i] = uniform();
    dt_bf16 *dyq = malloc(N * g.dyq * 2), *even = malloc(N * g.xt * 2), *odd = malloc(N * g.xt * 2);
    for (int n = 0; n < N; n++) {
        dt_conv_bf16_dy_rows(&s, &g, dy + n * sy, dyq + n * g.dyq);
        dt_conv_bf16_position_pairs(&s, &g, x + n * sx, even + n * g.xt, odd + n * g.xt);
    }
    /* The accumulation start, laid out as the kernel keeps it (or garbage it must not read). */
    int taps = s.kh * s.kw;
    for (size_t i = 0; i < g.dwt; i++)
        dwt[i] = accumulate ? 0 : NAN;
    for (int k = 0; k < s.k; k++)
        for (int c = 0; c < s.c; c++)
            for (int t = 0; t < taps; t++)
                dwt[((size_t)k * taps + t) * g.c16 + c] =
                    accumulate ? start[((size_t)k * s.c + c) * taps + t] : NAN;
    dt_conv_bf16_weight_grad_on(p, &s, &g, N, dyq, even, odd, dwt, accumulate);
    dt_conv_bf16_weight_grad_unpack(&s, &g, dwt, dw);
    double worst = 0;
    for (int k = 0; k < s.k; k++)
        for (int c = 0; c < s.c; c++)
            for (int i = 0; i < s.kh; i++)
                for (int j = 0; j < s.kw; j++) {
                    size_t at = (((size_t)k * s.c + c) * s.kh + i) * s.kw + j;
                    double exact = accumulate ? start[at] : 0, mag = fabs(exact);
                    for (int n = 0; n < N; n++)
                        for (int oh = 0; oh < g.oh; oh++)
                            for (int ow = 0; ow < g.ow; ow++) {
                                int ih = oh + i - s.pad, iw = ow + j - s.pad;
                                if (ih < 0 || iw < 0 || ih >= s.h || iw >= s.w)
                                    continue;
                                double v = (double)dt_bf16_round(
                                               dy[n * sy + (k * g.oh + oh) * g.ow + ow]) *
                                           dt_bf16_round(x[n * sx + (c * s.h + ih) * s.w + iw]);
                                exact += v;
                                mag += fabs(v);
                            }
                    worst = fmax(worst, bf16_bound_ratio(dw[at], exact, mag, (long)N * g.qrow + 2));
                }
    free(x), free(dy), free(dw), free(start), free(dwt), free(dyq), free(even), free(odd);
    return worst;
}

/* The shapes every product is checked on: channel counts below, at and above a 32-channel
 * tile row, padded rows that do not fill a 16-position tile, 1x1 and 5x5 kernels, no padding,
 * and output channels that do not fill a 16-wide tile. */
static const struct dt_conv_shape shapes[] = {
    {1, 3, 32, 32, 16, 3, 3, 1, 1},  /* ResNet's stem: 3 channels in a 32-wide row */
    {1, 16, 32, 32, 16, 3, 3, 1, 1}, /* stage 1 */
    {1, 32, 16, 16, 32, 3, 3, 1, 1}, /* stage 2 */
    {1, 64, 8, 8, 64, 3, 3, 1, 1},   /* stage 3: a padded row of 10 positions */
    {1, 40, 7, 9, 20, 3, 3, 1, 1},   /* channels over one row, outputs under two tiles */
    {1, 5, 6, 11, 7, 5, 5, 1, 2},    /* 5x5 */
    {1, 33, 5, 5, 17, 1, 1, 1, 0},   /* 1x1 */
    {1, 8, 9, 9, 3, 3, 3, 1, 0},     /* no padding */
    {1, 12, 7, 8, 9, 4, 4, 1, 1},    /* tap pairs over an even kernel width */
    {1, 16, 5, 6, 20, 2, 2, 1, 0},   /* tap pairs, a row at position 0 (no padding) */
};

/* Every shape through `check` on one path (alternating its variant: bias, accumulation). */
static void each_shape(enum dt_bf16_path p, const char *what, bf16_conv_check *check)
{
    bf16_check_conv_shapes(p, what, check, shapes, sizeof shapes / sizeof *shapes);
}

/* One test per product and path: the path is the test's prestate. */
static void test_forward(void **state)
{
    each_shape(*(enum dt_bf16_path *)*state, "forward", check_conv);
}

static void test_forward_channels_last(void **state)
{
    each_shape(*(enum dt_bf16_path *)*state, "forward, channels-last", check_conv_cl);
}

static void test_input_gradient(void **state)
{
    each_shape(*(enum dt_bf16_path *)*state, "input gradient", check_input_grad);
}

static void test_weight_gradient(void **state)
{
    each_shape(*(enum dt_bf16_path *)*state, "weight gradient", check_weight_grad);
}

/* pad_input_image (and dy_rows_image, position_pairs_image) on a buffer zeroed once leave
 * the padding zero: after one sample and then another it holds what pad_input writes (from a
 * buffer of 0xff bytes) for the second; odd and even channel counts, with and without
 * padding. */
static void test_pad_input_image_keeps_padding(void **state)
{
    (void)state;
    struct dt_conv_shape shapes[] = {
        {.n = 1, .c = 5, .h = 7, .w = 6, .k = 4, .kh = 3, .kw = 3, .stride = 1, .pad = 1},
        {.n = 1, .c = 16, .h = 9, .w = 9, .k = 8, .kh = 5, .kw = 5, .stride = 1, .pad = 2},
        {.n = 1, .c = 34, .h = 4, .w = 5, .k = 3, .kh = 3, .kw = 3, .stride = 1, .pad = 0}};
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        const struct dt_conv_shape *s = &shapes[t];
        struct dt_conv_bf16_geom g;
        assert_int_equal(dt_conv_bf16_geometry(s, &g), 0);
        size_t nx = (size_t)s->c * s->h * s->w;
        float *x1 = malloc(nx * 4), *x2 = malloc(nx * 4);
        for (size_t i = 0; i < nx; i++) {
            x1[i] = uniform();
            x2[i] = uniform();
        }
        dt_bf16 *image = calloc(g.xv, 2), *whole = malloc(g.xv * 2);
        memset(whole, 0xff, g.xv * 2);
        dt_conv_bf16_pad_input_image(s, &g, x1, false, NULL, image);
        dt_conv_bf16_pad_input_image(s, &g, x2, false, NULL, image);
        dt_conv_bf16_pad_input(s, &g, x2, whole);
        assert_memory_equal(image, whole, g.xv * 2);
        /* the weight gradient's operands: dY rows (of an output-sized dy) and position pairs */
        assert_true((size_t)s->k * g.oh * g.ow <= nx); /* x1, x2 serve as dy too */
        dt_bf16 *rows = calloc(g.dyq, 2), *rows_whole = malloc(g.dyq * 2);
        dt_bf16 *pairs = calloc(2 * g.xt, 2), *pairs_whole = malloc(2 * g.xt * 2);
        memset(rows_whole, 0xff, g.dyq * 2);
        memset(pairs_whole, 0xff, 2 * g.xt * 2);
        dt_conv_bf16_dy_rows_image(s, &g, x1, rows);
        dt_conv_bf16_dy_rows_image(s, &g, x2, rows);
        dt_conv_bf16_dy_rows(s, &g, x2, rows_whole);
        assert_memory_equal(rows, rows_whole, g.dyq * 2);
        dt_conv_bf16_position_pairs_image(s, &g, x1, false, NULL, pairs, pairs + g.xt);
        dt_conv_bf16_position_pairs_image(s, &g, x2, false, NULL, pairs, pairs + g.xt);
        dt_conv_bf16_position_pairs(s, &g, x2, pairs_whole, pairs_whole + g.xt);
        assert_memory_equal(pairs, pairs_whole, 2 * g.xt * 2);
        free(rows);
        free(rows_whole);
        free(pairs);
        free(pairs_whole);
        free(x1);
        free(x2);
        free(image);
        free(whole);
    }
}

/* A value for the layout tests: mostly uniform, with the conversion's hard cases mixed in
 * (ties to even, denormals, +-0, infinities, NaNs, the largest finite values). */
static float layout_value(void)
{
    static const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x00000001u, 0x807fffffu,
                                       0x00008000u, 0x80000000u, 0x00000000u, 0x7f800000u,
                                       0xff800000u, 0x7fc00001u, 0xff812345u, 0x7f7fffffu};
    float f = uniform();
    if (rng % 5 == 0) {
        uint32_t u = special[rng / 5 % (sizeof special / sizeof *special)];
        memcpy(&f, &u, sizeof f);
    }
    return f;
}

/* The layout tests' shapes: `shapes`, then a test's own (more). */
#define SHAPES (sizeof shapes / sizeof *shapes)
static struct dt_conv_shape shape_or_more(const struct dt_conv_shape *more, size_t t)
{
    return t < SHAPES ? shapes[t] : more[t - SHAPES];
}

/* The paths whose layout passes are AVX-512 builds. */
static enum dt_bf16_path avx512_paths[] = {DT_BF16_AMX, DT_BF16_AVX512BF16};

/* The amx and avx512bf16 paths' layout passes (AVX-512, conv_bf16_layout.isa.c) write the plain C's
 * bytes: pair planes, dY rows and their bias parts, position pairs (into buffers zeroed once, two
 * samples in turn), the
 * compaction with and without bias, relu and streaming stores, and the relu below's backward with
 * and without the skip gradient (extra given as dx itself; a sum of two NaNs may keep either's
 * payload). */
static void test_layout_passes_match_plain_c(void **state)
{
    enum dt_bf16_path path = *(const enum dt_bf16_path *)*state;
    bf16_skip_unless_available(path, "layout passes");
    struct dt_conv_shape more[] = {{1, 5, 7, 6, 4, 3, 3, 1, 1},
                                   {1, 16, 9, 9, 8, 5, 5, 1, 2},
                                   {1, 34, 4, 5, 3, 3, 3, 1, 0},
                                   {1, 17, 28, 28, 19, 3, 3, 1, 0},
                                   {1, 16, 26, 26, 32, 3, 3, 1, 1}};
    size_t count = SHAPES + sizeof more / sizeof *more;
    for (size_t t = 0; t < count; t++) {
        struct dt_conv_shape s = shape_or_more(more, t);
        struct dt_conv_bf16_geom g;
        assert_int_equal(dt_conv_bf16_geometry(&s, &g), 0);
        size_t nx = (size_t)s.c * s.h * s.w, ny = (size_t)s.k * g.oh * g.ow;
        size_t nd = nx > ny ? nx : ny; /* x's values serve as dy too */
        float *x[2] = {malloc(nd * 4), malloc(nd * 4)}, *yq = malloc(g.yq * 4);
        /* 64-byte aligned outputs, so that rows of 16 floats or more are streamed */
        size_t out_bytes = (ny * 4 + 63) / 64 * 64;
        float *b = malloc(s.k * 4);
        float *out[2] = {aligned_alloc(64, out_bytes), aligned_alloc(64, out_bytes)};
        for (int sample = 0; sample < 2; sample++)
            for (size_t i = 0; i < nd; i++)
                x[sample][i] = layout_value();
        for (size_t i = 0; i < g.yq; i++)
            yq[i] = layout_value();
        for (int k = 0; k < s.k; k++)
            b[k] = k % 3 ? uniform() : 0.0f;
        const struct dt_conv_bf16_layout *layout[2] = {dt_conv_bf16_layout_on(DT_BF16_CTILE),
                                                       dt_conv_bf16_layout_on(path)};
        assert_ptr_not_equal(layout[0], layout[1]); /* the plain C, the AVX-512 build */
        dt_bf16 *xv[2], *dyq[2], *pairs[2];
        for (int p = 0; p < 2; p++) {
            xv[p] = calloc(g.xv, 2);
            dyq[p] = calloc(g.dyq, 2);
            pairs[p] = calloc(2 * g.xt, 2);
            for (int sample = 0; sample < 2; sample++) {
                layout[p]->pad_input_image(&s, &g, x[sample], false, NULL, xv[p]);
                layout[p]->dy_rows_image(&s, &g, x[sample], dyq[p]);
                layout[p]->position_pairs_image(&s, &g, x[sample], false, NULL, pairs[p],
                                                pairs[p] + g.xt);
            }
        }
        assert_memory_equal(xv[0], xv[1], g.xv * 2);
        assert_memory_equal(dyq[0], dyq[1], g.dyq * 2);
        float *part[2] = {malloc(s.k * 4), malloc(s.k * 4)};
        for (int p = 0; p < 2; p++) /* the bias parts of the last sample's dY rows */
            layout[p]->bias_parts(dyq[p], s.k, g.qrow, part[p]);
        bf16_assert_same_floats(part[0], part[1], s.k); /* NaN sums: either payload */
        free(part[0]), free(part[1]);
        assert_memory_equal(pairs[0], pairs[1], 4 * g.xt);
        /* x stored as bf16 (the model's bf16_store; its gathers may read 32 elements past the
         * end): the layouts made from its fp32 values, and the relu mask of its values */
        dt_bf16 *xh = calloc(nd + 32, 2);
        float *xr = malloc(nd * 4);
        for (size_t i = 0; i < nd; i++) {
            xh[i] = dt_bf16_from_f32(x[1][i]);
            xr[i] = dt_bf16_to_f32(xh[i]);
        }
        for (int p = 0; p < 2; p++) {
            dt_bf16 *v = calloc(g.xv, 2), *q = calloc(2 * g.xt, 2);
            layout[p]->pad_input_image(&s, &g, xh, true, NULL, v);
            layout[p]->position_pairs_image(&s, &g, xh, true, NULL, q, q + g.xt);
            assert_memory_equal(v, xv[0], g.xv * 2);
            assert_memory_equal(q, pairs[0], 4 * g.xt);
            free(v), free(q);
            layout[p]->compact_relu_below(&s, &g, yq, xh, true, NULL, NULL, false, out[0], NULL);
            layout[p]->compact_relu_below(&s, &g, yq, xr, false, NULL, NULL, false, out[1], NULL);
            bf16_assert_same_floats(out[0], out[1], ny);
        }
        free(xh), free(xr);
        /* bias, relu, stream and the three stores: ROUNDED's values are bf16 values, and
         * BF16's elements are exactly those values */
        float *rounded = malloc(ny * 4);
        for (int variant = 0; variant < 24; variant++) {
            enum dt_bf16_store store = (enum dt_bf16_store)(variant / 8);
            for (int p = 0; p < 2; p++)
                layout[p]->compact(&s, &g, yq, variant & 1 ? b : NULL, variant & 2, variant & 4,
                                   store, out[p]);
            assert_memory_equal(out[0], out[1], ny * (store == DT_STORE_BF16 ? 2 : 4));
            if (store == DT_STORE_F32)
                continue;
            layout[0]->compact(&s, &g, yq, variant & 1 ? b : NULL, variant & 2, false,
                               DT_STORE_ROUNDED, rounded);
            for (size_t i = 0; i < ny; i++) {
                float v = store == DT_STORE_BF16 ? dt_bf16_to_f32(((dt_bf16 *)out[0])[i])
                                                 : dt_bf16_round(rounded[i]);
                assert_memory_equal(&v, &rounded[i], 4);
            }
        }
        free(rounded);
        /* the relu below's backward (s standing for an input gradient's shape), dx holding
         * the skip gradient; with round, the conv's own dx rounded before the skip gradient's
         * add: the bits of the unrounded pass on yq rounded first */
        float *yq_r = malloc(g.yq * 4), *want = malloc(ny * 4);
        for (size_t i = 0; i < g.yq; i++)
            yq_r[i] = dt_bf16_round(yq[i]);
        for (int with_extra = 0; with_extra < 2; with_extra++)
            for (int round = 0; round < 2; round++) {
                for (int p = 0; p < 2; p++) {
                    memcpy(out[p], x[1], ny * 4);
                    layout[p]->compact_relu_below(&s, &g, yq, x[0], false, NULL,
                                                  with_extra ? out[p] : NULL, round, out[p], NULL);
                }
                bf16_assert_same_floats(out[0], out[1], ny);
                if (!round)
                    continue;
                memcpy(want, x[1], ny * 4);
                layout[0]->compact_relu_below(&s, &g, yq_r, x[0], false, NULL,
                                              with_extra ? want : NULL, false, want, NULL);
                bf16_assert_same_floats(out[0], want, ny);
            }
        free(yq_r), free(want);
        for (int p = 0; p < 2; p++)
            free(xv[p]), free(dyq[p]), free(pairs[p]), free(out[p]), free(x[p]);
        free(yq), free(b);
    }
}

/* What a batchnorm2d -> relu stores as bf16 from x [channels][plane] (fp32 or bf16): the
 * batchnorm's own affine_to_bf16 pass, with the relu at its store, channel by channel. */
static void bn_stored(const void *x, bool x_bf16, int channels, size_t plane,
                      const struct dt_bn_relu *bn, dt_bf16 *y)
{
    for (int c = 0; c < channels; c++)
        dt_bn_loops()->affine_to_bf16(dt_act_from(x, x_bf16, c * plane), x_bf16, y + c * plane,
                                      plane, plane, 1, bn->scale[c], bn->shift[c], true, NULL,
                                      DT_SKIP_F32);
}

/* bn_sums, add_sums: compact_relu_below (relu mask from x, through bn or not) with the sums of
 * a batchnorm whose input is sx (bf16) and mean stores the dx it stores without them, and takes
 * the sums grad_sums_bf16 takes on that dx and sx (a NaN's sign and payload not kept; with
 * finite_data, every sum finite). */
static void check_sums(const struct dt_conv_bf16_layout *layout, const struct dt_conv_shape *s,
                       const struct dt_conv_bf16_geom *g, const float *yq, const void *x,
                       bool x_bf16, const struct dt_bn_relu *bn, const dt_bf16 *sx,
                       const float *mean, const float *extra, bool finite_data)
{
    size_t mplane = (size_t)g->oh * g->ow, n = s->k * mplane;
    float *dx = malloc(n * 4), *plain = malloc(n * 4);
    double *sums = malloc(2 * s->k * sizeof *sums), *want = malloc(2 * s->k * sizeof *want);
    struct dt_dx_sums to = {sums, sx, mean};
    layout->compact_relu_below(s, g, yq, x, x_bf16, bn, extra, false, plain, NULL);
    layout->compact_relu_below(s, g, yq, x, x_bf16, bn, extra, false, dx, &to);
    assert_memory_equal(dx, plain, n * 4);
    int finite = 0;
    for (int c = 0; c < s->k; c++)
        dt_bn_loops()->grad_sums_bf16(sx + c * mplane, dx + c * mplane, mplane, mplane, 1, mean[c],
                                      &want[c], &want[s->k + c], 1);
    for (int c = 0; c < 2 * s->k; c++) {
        assert_true(isnan(sums[c]) ? isnan(want[c]) : !memcmp(&sums[c], &want[c], sizeof *sums));
        finite += !isnan(sums[c]);
    }
    if (finite_data)
        assert_int_equal(finite, 2 * s->k);
    free(dx), free(plain), free(sums), free(want);
}

/* bn_input: the passes that read x through a batchnorm2d -> relu below (bn, on that
 * batchnorm's input, stored as bf16 or fp32) write the bytes they write reading what the
 * batchnorm stores (bn_stored), which the model reads without the fusion: the pair planes,
 * the position pairs and compact_relu_below's relu mask, with and without the skip gradient.
 * bn_sums: the batchnorm's two backward sums compact_relu_below takes as it stores dx are the
 * bits of the batchnorm's own grad_sums_bf16 on that dx, on rows of every width here (8, 28: a
 * row that starts off the 16 lanes), the stores unchanged; add_sums: the same for another
 * batchnorm's input, the relu mask read from x (fp32 or bf16) without a batchnorm.
 * In `path`'s build of the layouts (the plain C for ctile, AVX-512 for amx and avx512bf16).
 * The affines include a zero scale, a negative one, one whose products are around 2^-133 (those
 * below round to zero: the mask follows the stored zero) and the rounding's boundary, on inputs
 * with the conversion's hard cases (NaN, infinities, denormals, ties). */
static void test_bn_relu_input(void **state)
{
    enum dt_bf16_path path = *(const enum dt_bf16_path *)*state;
    bf16_skip_unless_available(path, "bn_input layout passes");
    const struct dt_conv_bf16_layout *layout = dt_conv_bf16_layout_on(path);
    struct dt_conv_shape more[] = {
        {1, 5, 7, 6, 4, 3, 3, 1, 1}, {1, 17, 9, 9, 8, 3, 3, 1, 1}, {1, 16, 28, 28, 16, 3, 3, 1, 1}};
    size_t count = SHAPES + sizeof more / sizeof *more;
    for (size_t t = 0; t < count; t++) {
        struct dt_conv_shape s = shape_or_more(more, t);
        struct dt_conv_bf16_geom g;
        assert_int_equal(dt_conv_bf16_geometry(&s, &g), 0);
        /* x [s.c][h][w] for the layouts; [s.k][oh][ow] for the mask (s standing for an input
         * gradient's shape, as compact_relu_below takes it) */
        size_t plane = (size_t)s.h * s.w, mplane = (size_t)g.oh * g.ow;
        size_t n = (size_t)s.c * plane > s.k * mplane ? (size_t)s.c * plane : s.k * mplane;
        int channels = s.c > s.k ? s.c : s.k;
        float *scale = malloc(channels * 4), *shift = malloc(channels * 4);
        for (int c = 0; c < channels; c++) {
            scale[c] = c % 4 == 0 ? 0.0f : c % 4 == 1 ? -1.5f * uniform() : 2.0f * uniform();
            shift[c] = c % 3 == 0 ? 0.0f : uniform();
        }
        /* products around 2^-133, which round to zero below it, and the boundary itself
         * (bits 0x8000 rounds to zero, ties to even; 0x8001 does not) */
        uint32_t edge[2] = {0x8000u, 0x8001u};
        scale[1] = 1e-40f;
        shift[1] = 0.0f;
        scale[2] = scale[3] = 0.0f;
        memcpy(&shift[2], &edge[0], 4);
        memcpy(&shift[3], &edge[1], 4);
        float *mean = malloc(channels * 4);
        for (int c = 0; c < channels; c++)
            mean[c] = uniform() - 0.5f;
        struct dt_bn_relu bn = {scale, shift, mean};
        float *x = malloc(n * 4), *yq = malloc(g.yq * 4);
        /* 64-byte aligned outputs: rows of 16 floats or more are streamed */
        size_t out_bytes = (s.k * mplane * 4 + 63) / 64 * 64;
        float *dx[2] = {aligned_alloc(64, out_bytes), aligned_alloc(64, out_bytes)};
        float *extra = malloc(s.k * mplane * 4);
        dt_bf16 *xh = calloc(n + 32, 2), *y = calloc(n + 32, 2);
        for (size_t i = 0; i < n; i++) {
            x[i] = layout_value();
            xh[i] = dt_bf16_from_f32(x[i]);
        }
        for (size_t i = 0; i < g.yq; i++)
            yq[i] = layout_value();
        for (size_t i = 0; i < s.k * mplane; i++)
            extra[i] = uniform();
        for (int x_bf16 = 0; x_bf16 < 2; x_bf16++) {
            const void *raw = x_bf16 ? (const void *)xh : (const void *)x;
            dt_bf16 *xv[2] = {calloc(g.xv, 2), calloc(g.xv, 2)};
            dt_bf16 *pairs[2] = {calloc(2 * g.xt, 2), calloc(2 * g.xt, 2)};
            bn_stored(raw, x_bf16, s.c, plane, &bn, y);
            layout->pad_input_image(&s, &g, raw, x_bf16, &bn, xv[0]);
            layout->pad_input_image(&s, &g, y, true, NULL, xv[1]);
            assert_memory_equal(xv[0], xv[1], g.xv * 2);
            layout->position_pairs_image(&s, &g, raw, x_bf16, &bn, pairs[0], pairs[0] + g.xt);
            layout->position_pairs_image(&s, &g, y, true, NULL, pairs[1], pairs[1] + g.xt);
            assert_memory_equal(pairs[0], pairs[1], 4 * g.xt);
            bn_stored(raw, x_bf16, s.k, mplane, &bn, y);
            for (int with_extra = 0; with_extra < 2; with_extra++) {
                layout->compact_relu_below(&s, &g, yq, raw, x_bf16, &bn, with_extra ? extra : NULL,
                                           false, dx[0], NULL);
                layout->compact_relu_below(&s, &g, yq, y, true, NULL, with_extra ? extra : NULL,
                                           false, dx[1], NULL);
                assert_memory_equal(dx[0], dx[1], s.k * mplane * 4);
                if (x_bf16) /* the batchnorm sums bf16 x so (bn_grad.h's order) */
                    check_sums(layout, &s, &g, yq, xh, true, &bn, xh, bn.mean,
                               with_extra ? extra : NULL, false);
                /* add_sums: the mask from x, the sums over another batchnorm's input (y) */
                check_sums(layout, &s, &g, yq, raw, x_bf16, NULL, y, mean,
                           with_extra ? extra : NULL, false);
            }
            free(xv[0]), free(xv[1]), free(pairs[0]), free(pairs[1]);
        }
        /* and on finite values, whose sums are not all NaN, of magnitudes 2^-20 to 2^20, so
         * that the order of the additions shows in the rounding */
        for (size_t i = 0; i < n; i++)
            xh[i] = dt_bf16_from_f32(ldexpf(2.0f * uniform() - 1.0f, (int)(rng % 41) - 20));
        for (size_t i = 0; i < g.yq; i++)
            yq[i] = ldexpf(uniform() - 0.5f, (int)(rng % 41) - 20);
        check_sums(layout, &s, &g, yq, xh, true, &bn, xh, bn.mean, extra, true);
        for (size_t i = 0; i < s.k * mplane; i++)
            y[i] = dt_bf16_from_f32(ldexpf(2.0f * uniform() - 1.0f, (int)(rng % 41) - 20));
        check_sums(layout, &s, &g, yq, x, false, NULL, y, mean, extra, true);
        free(scale), free(shift), free(mean);
        free(x), free(yq), free(xh), free(y), free(extra);
        free(dx[0]), free(dx[1]);
    }
}

/* compact_pool2x2 (the plain C on every machine, the AVX-512 build where the path exists) gives
 * the bits of compact() with the relu and DT_STORE_ROUNDED followed by dt_maxpool_forward's
 * 2x2 / stride 2 pool: the pooled values and the winners' indices, with ties (the relu's zeros,
 * repeated values), odd planes (a last row or column in no window), more windows than a vector
 * and the specials (NaN, infinities, denormals) in the product. */
static void test_compact_pool2x2(void **state)
{
    enum dt_bf16_path path = *(const enum dt_bf16_path *)*state;
    bf16_skip_unless_available(path, "compact_pool2x2");
    struct dt_conv_shape more[] = {{1, 5, 7, 6, 4, 3, 3, 1, 1},
                                   {1, 16, 9, 9, 8, 5, 5, 1, 2},
                                   {1, 3, 40, 37, 5, 3, 3, 1, 1},
                                   {1, 16, 26, 26, 32, 3, 3, 1, 0}};
    const struct dt_conv_bf16_layout *layout = dt_conv_bf16_layout_on(path);
    for (size_t t = 0; t < sizeof more / sizeof *more; t++) {
        struct dt_conv_shape s = more[t];
        struct dt_conv_bf16_geom g;
        assert_int_equal(dt_conv_bf16_geometry(&s, &g), 0);
        struct dt_pool_geom pg = {.k = 2, .stride = 2, .oh = g.oh / 2, .ow = g.ow / 2};
        size_t ny = (size_t)s.k * g.oh * g.ow, np = (size_t)s.k * pg.oh * pg.ow;
        float *yq = malloc(g.yq * 4), *b = malloc(s.k * 4), *y = malloc(ny * 4);
        float *want = malloc(np * 4), *got = malloc(np * 4);
        int32_t *want_i = malloc(np * 4), *got_i = malloc(np * 4);
        for (size_t i = 0; i < g.yq; i++)
            yq[i] = i % 7 == 3 ? yq[i - 1] : layout_value(); /* ties beside the specials */
        for (int k = 0; k < s.k; k++)
            b[k] = k % 3 ? uniform() : 0.0f;
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            const float *bias = with_bias ? b : NULL;
            layout->compact(&s, &g, yq, bias, true, false, DT_STORE_ROUNDED, y);
            dt_maxpool_forward(&pg, y, want, want_i, s.k, g.oh, g.ow);
            layout->compact_pool2x2(&s, &g, yq, bias, got, got_i);
            assert_memory_equal(got, want, np * 4);
            assert_memory_equal(got_i, want_i, np * 4);
        }
        free(yq), free(b), free(y), free(want), free(got), free(want_i), free(got_i);
    }
}

/* The shapes of the passes that lay out dY as they make it (unpool_image, bn_dy_image): even
 * planes (a 2x2 pool's windows cover them), an odd channel count, tap pairs (16 channels or
 * fewer) and not, a 1x1 kernel (its input gradient unpadded: no position before the first),
 * more windows than a vector. */
static const struct dt_conv_shape dy_shapes[] = {{1, 16, 26, 26, 32, 3, 3, 1, 0},
                                                 {1, 3, 34, 34, 16, 3, 3, 1, 1},
                                                 {1, 4, 10, 12, 5, 3, 3, 1, 1},
                                                 {1, 8, 40, 66, 3, 1, 1, 1, 0},
                                                 {1, 2, 36, 36, 34, 5, 5, 1, 2}};

/* A pass under test: `want` makes sample i's fp32 dY [K][OH][OW] as the backward without it
 * does, `got` lays the same out (xv NULL: the dY rows alone). */
struct dy_pass {
    void (*want)(const void *ctx, int sample, float *dy);
    void (*got)(const struct dt_conv_bf16_layout *layout, const void *ctx,
                const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                const struct dt_conv_shape *t, const struct dt_conv_bf16_geom *gt, int sample,
                dt_bf16 *dyq, dt_bf16 *xv);
    const void *ctx;
};

/* The pass writes the bytes of the plain C dy_rows_image and, for the input gradient's shape,
 * pad_input_image on want's dY: two samples in turn into buffers zeroed once, with and without
 * the pair planes. */
static void check_dy_pass(const struct dt_conv_bf16_layout *layout, const struct dt_conv_shape *s,
                          const struct dy_pass *p)
{
    struct dt_conv_shape t;
    struct dt_conv_bf16_geom g, gt;
    assert_int_equal(dt_conv_bf16_geometry(s, &g), 0);
    dt_conv_bf16_input_grad_shape(s, &t);
    assert_int_equal(dt_conv_bf16_geometry(&t, &gt), 0);
    float *dy = malloc((size_t)s->k * g.oh * g.ow * 4);
    for (int pairs = 0; pairs < 2; pairs++) {
        dt_bf16 *want_q = calloc(g.dyq, 2), *got_q = calloc(g.dyq, 2);
        dt_bf16 *want_v = calloc(gt.xv, 2), *got_v = calloc(gt.xv, 2);
        for (int sample = 0; sample < 2; sample++) {
            p->want(p->ctx, sample, dy);
            dt_conv_bf16_dy_rows_image(s, &g, dy, want_q);
            if (pairs)
                dt_conv_bf16_pad_input_image(&t, &gt, dy, false, NULL, want_v);
            p->got(layout, p->ctx, s, &g, &t, &gt, sample, got_q, pairs ? got_v : NULL);
        }
        assert_memory_equal(got_q, want_q, g.dyq * 2);
        assert_memory_equal(got_v, want_v, gt.xv * 2);
        free(want_q), free(got_q), free(want_v), free(got_v);
    }
    free(dy);
}

static void unpool_want(const void *ctx, int sample, float *dy)
{
    dt_maxpool_backward_sample(ctx, sample, dy);
}

static void unpool_got(const struct dt_conv_bf16_layout *layout, const void *ctx,
                       const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                       const struct dt_conv_shape *t, const struct dt_conv_bf16_geom *gt,
                       int sample, dt_bf16 *dyq, dt_bf16 *xv)
{
    layout->unpool_image(s, g, t, gt, ctx, sample, dyq, xv);
}

/* unpool_image (the pool_grad fusion's dY, conv_bf16.h) writes the bytes of
 * dt_maxpool_backward_sample's fp32 dY laid out (check_dy_pass): winners at every corner, dy
 * and pooled values with the conversion's hard cases (a -0 dy gives +0, a NaN stays quiet),
 * position 0 nonzero (nothing may land before it). What it does not take: an odd plane,
 * another window. */
static void test_unpool_image(void **state)
{
    enum dt_bf16_path path = *(const enum dt_bf16_path *)*state;
    bf16_skip_unless_available(path, "unpool_image");
    for (size_t u = 0; u < sizeof dy_shapes / sizeof *dy_shapes; u++) {
        const struct dt_conv_shape *s = &dy_shapes[u];
        struct dt_conv_bf16_geom g;
        assert_int_equal(dt_conv_bf16_geometry(s, &g), 0);
        struct dt_pool_grad pool = {.g = {.k = 2, .stride = 2, .oh = g.oh / 2, .ow = g.ow / 2},
                                    .c = s->k,
                                    .h = g.oh,
                                    .w = g.ow};
        assert_true(dt_conv_bf16_unpool_fits(&g, &pool));
        size_t plane = (size_t)pool.g.oh * pool.g.ow, np = (size_t)s->k * plane;
        int32_t *argmax = malloc(2 * np * 4);
        float *dy = malloc(2 * np * 4), *relu_y = malloc(2 * np * 4);
        for (size_t i = 0; i < 2 * np; i++) {
            int oy = (int)(i % plane / pool.g.ow), ox = (int)(i % plane % pool.g.ow);
            int corner = (int)(rng % 4);
            dy[i] = layout_value();
            relu_y[i] = layout_value();
            if (i % plane == 0)
                corner = 0, dy[i] = 1.0f, relu_y[i] = 1.0f;
            argmax[i] = (2 * oy + corner / 2) * pool.w + 2 * ox + corner % 2;
        }
        pool.argmax = argmax, pool.dy = dy, pool.relu_y = relu_y;
        check_dy_pass(dt_conv_bf16_layout_on(path), s,
                      &(struct dy_pass){unpool_want, unpool_got, &pool});
        free(argmax), free(dy), free(relu_y);
    }
    struct dt_conv_shape odd = {1, 4, 11, 12, 5, 3, 3, 1, 1};
    struct dt_conv_bf16_geom g;
    assert_int_equal(dt_conv_bf16_geometry(&odd, &g), 0);
    struct dt_pool_grad pool = {
        .g = {.k = 2, .stride = 2, .oh = 5, .ow = 6}, .c = 5, .h = 11, .w = 12};
    assert_false(dt_conv_bf16_unpool_fits(&g, &pool));
    struct dt_conv_shape even = {1, 4, 12, 12, 5, 3, 3, 1, 1};
    assert_int_equal(dt_conv_bf16_geometry(&even, &g), 0);
    pool = (struct dt_pool_grad){
        .g = {.k = 3, .stride = 2, .oh = 5, .ow = 5}, .c = 5, .h = 12, .w = 12};
    assert_false(dt_conv_bf16_unpool_fits(&g, &pool));
}

/* A batchnorm's input gradient case: its factors and input, the whole dy, a plane. */
struct bn_case {
    struct dt_bn_grad bn;
    const float *dy;
    int k;
    size_t plane;
};

/* The batchnorm's own input_grad loop, channel by channel (every build gives the same bits). */
static void bn_want(const void *ctx, int sample, float *dy)
{
    const struct bn_case *b = ctx;
    const struct dt_bn_grad *bn = &b->bn;
    for (int c = 0; c < b->k; c++) {
        size_t at = ((size_t)sample * b->k + c) * b->plane, n = b->plane;
        if (bn->xh)
            dt_bn_loops()->input_grad_bf16(bn->xh + at, b->dy + at, dy + c * n, n, n, 1,
                                           bn->mean[c], bn->invstd[c], bn->k[c], bn->mean_dy[c],
                                           bn->mean_dy_xhat[c]);
        else
            dt_bn_loops()->input_grad(bn->x + at, b->dy + at, dy + c * n, n, n, 1, bn->mean[c],
                                      bn->invstd[c], bn->k[c], bn->mean_dy[c], bn->mean_dy_xhat[c]);
    }
}

static void bn_got(const struct dt_conv_bf16_layout *layout, const void *ctx,
                   const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                   const struct dt_conv_shape *t, const struct dt_conv_bf16_geom *gt, int sample,
                   dt_bf16 *dyq, dt_bf16 *xv)
{
    const struct bn_case *b = ctx;
    layout->bn_dy_image(s, g, t, gt, &b->bn, b->dy, sample, dyq, xv);
}

/* bn_dy_image (the bn_grad fusion's dY, conv_bf16.h) writes the bytes of the batchnorm's
 * input_grad loop laid out (check_dy_pass): the batchnorm's input as fp32 and as bf16, dy with
 * the conversion's hard cases, a zero factor and a negative one; dy_shapes and two odd planes. */
static void test_bn_dy_image(void **state)
{
    enum dt_bf16_path path = *(const enum dt_bf16_path *)*state;
    bf16_skip_unless_available(path, "bn_dy_image");
    struct dt_conv_shape odd[] = {{1, 4, 9, 13, 5, 3, 3, 1, 1}, {1, 8, 40, 33, 3, 1, 1, 1, 0}};
    size_t count = sizeof dy_shapes / sizeof *dy_shapes;
    for (size_t u = 0; u < count + 2; u++) {
        const struct dt_conv_shape *s = u < count ? &dy_shapes[u] : &odd[u - count];
        struct dt_conv_bf16_geom g;
        assert_int_equal(dt_conv_bf16_geometry(s, &g), 0);
        size_t plane = (size_t)g.oh * g.ow, ny = (size_t)s->k * plane;
        float *dy = malloc(2 * ny * 4), *x = malloc(2 * ny * 4);
        dt_bf16 *xh = malloc(2 * ny * 2);
        for (size_t i = 0; i < 2 * ny; i++) {
            dy[i] = layout_value();
            x[i] = uniform();
            xh[i] = dt_bf16_from_f32(x[i]);
        }
        float *f = malloc(5 * s->k * 4); /* mean, invstd, k, mean_dy, mean_dy_xhat */
        for (int i = 0; i < 5 * s->k; i++)
            f[i] = uniform();
        f[2 * s->k] = 0.0f;                        /* a zero factor */
        f[3 * s->k - 1] = -fabsf(f[3 * s->k - 1]); /* a negative one */
        for (int half = 0; half < 2; half++) {
            struct bn_case b = {{half ? NULL : x, half ? xh : NULL, f, f + s->k, f + 2 * s->k,
                                 f + 3 * s->k, f + 4 * s->k},
                                dy,
                                s->k,
                                plane};
            check_dy_pass(dt_conv_bf16_layout_on(path), s, &(struct dy_pass){bn_want, bn_got, &b});
        }
        free(dy), free(x), free(xh), free(f);
    }
}

/* Tap pairing (conv_bf16.h): chosen for 16 channels or fewer, with kh ceil(kw / 2) steps; the
 * pair planes 8-15 of a padded input hold planes 0-7 one position on, and the last position,
 * which has no next, zero. */
static void test_tap_pairs_layout(void **state)
{
    (void)state;
    struct {
        struct dt_conv_shape s;
        bool pairs;
        int steps;
    } cases[] = {
        {{1, 16, 32, 32, 16, 3, 3, 1, 1}, true, 6}, {{1, 5, 6, 11, 7, 5, 5, 1, 2}, true, 15},
        {{1, 16, 5, 6, 20, 2, 2, 1, 0}, true, 2},   {{1, 17, 8, 8, 16, 3, 3, 1, 1}, false, 9},
        {{1, 40, 7, 9, 20, 3, 3, 1, 1}, false, 18},
    };
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        const struct dt_conv_shape *s = &cases[t].s;
        struct dt_conv_bf16_geom g;
        assert_int_equal(dt_conv_bf16_geometry(s, &g), 0);
        assert_int_equal(g.tap_pairs, cases[t].pairs);
        assert_int_equal(g.steps, cases[t].steps);
        if (!g.tap_pairs)
            continue;
        size_t nx = (size_t)s->c * s->h * s->w;
        float *x = malloc(nx * 4);
        for (size_t i = 0; i < nx; i++)
            x[i] = uniform();
        dt_bf16 *xv = malloc(g.xv * 2);
        dt_conv_bf16_pad_input(s, &g, x, xv);
        size_t plane = (size_t)g.positions * 2;
        for (int p = 0; p < 8; p++) {
            const dt_bf16 *src = xv + p * plane, *shifted = xv + (p + 8) * plane;
            assert_memory_equal(shifted, src + 2, (plane - 2) * 2);
            assert_int_equal(shifted[plane - 2], 0);
            assert_int_equal(shifted[plane - 1], 0);
        }
        free(x);
        free(xv);
    }
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
    static enum dt_bf16_path paths[] = {DT_BF16_REFERENCE, DT_BF16_CTILE, DT_BF16_AVX512BF16,
                                        DT_BF16_AMX};
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_prestate(test_forward, &paths[0]),
        cmocka_unit_test_prestate(test_forward, &paths[1]),
        cmocka_unit_test_prestate(test_forward, &paths[2]),
        cmocka_unit_test_prestate(test_forward, &paths[3]),
        cmocka_unit_test_prestate(test_forward_channels_last, &paths[1]),
        cmocka_unit_test_prestate(test_forward_channels_last, &paths[2]),
        cmocka_unit_test_prestate(test_forward_channels_last, &paths[3]),
        cmocka_unit_test_prestate(test_input_gradient, &paths[0]),
        cmocka_unit_test_prestate(test_input_gradient, &paths[1]),
        cmocka_unit_test_prestate(test_input_gradient, &paths[2]),
        cmocka_unit_test_prestate(test_input_gradient, &paths[3]),
        cmocka_unit_test_prestate(test_weight_gradient, &paths[0]),
        cmocka_unit_test_prestate(test_weight_gradient, &paths[1]),
        cmocka_unit_test_prestate(test_weight_gradient, &paths[2]),
        cmocka_unit_test_prestate(test_weight_gradient, &paths[3]),
        cmocka_unit_test(test_pad_input_image_keeps_padding),
        cmocka_unit_test_prestate(test_layout_passes_match_plain_c, &avx512_paths[0]),
        cmocka_unit_test_prestate(test_layout_passes_match_plain_c, &avx512_paths[1]),
        cmocka_unit_test_prestate(test_compact_pool2x2, &paths[1]),
        cmocka_unit_test_prestate(test_compact_pool2x2, &avx512_paths[0]),
        cmocka_unit_test_prestate(test_compact_pool2x2, &avx512_paths[1]),
        cmocka_unit_test_prestate(test_unpool_image, &paths[1]),
        cmocka_unit_test_prestate(test_unpool_image, &avx512_paths[0]),
        cmocka_unit_test_prestate(test_unpool_image, &avx512_paths[1]),
        cmocka_unit_test_prestate(test_bn_dy_image, &paths[1]),
        cmocka_unit_test_prestate(test_bn_dy_image, &avx512_paths[0]),
        cmocka_unit_test_prestate(test_bn_dy_image, &avx512_paths[1]),
        cmocka_unit_test_prestate(test_bn_relu_input, &paths[1]),
        cmocka_unit_test_prestate(test_bn_relu_input, &avx512_paths[0]),
        cmocka_unit_test_prestate(test_bn_relu_input, &avx512_paths[1]),
        cmocka_unit_test(test_tap_pairs_layout),
        cmocka_unit_test(test_unsupported_shapes_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* nn/kernels/bf16/conv_s2_bf16: the stride-2 bf16 convolution through parity planes, its three
 * products on every tile path the CPU has (ctile always, avx512bf16 and amx where present) against
 * double sums of the bf16-rounded operands, within the fp32-accumulation bound of bf16_checks.h:
 * |got - exact| <= 2 (terms + 2) 2^-24 sum |a b|. Shapes: ResNet-20's downsampling 3x3 convs
 * and 1x1 projections on 32x32 and on 28x28 (28 -> 14 -> 7: odd outputs), odd input sizes,
 * odd channel counts, output channels that fill no 16-wide tile, 5x5, no padding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/kernels/bf16/conv_s2_bf16.h"
#include "nn/kernels/fp32/batchnorm.h"
#include "tests/unit/bf16_checks.h"

static uint64_t rng = 88172645463325252ull;
static float uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / (1 << 23))) - 1.0f;
}

static float *random_floats(size_t n)
{
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = uniform();
    return v;
}

static double rb(float v)
{
    return dt_bf16_round(v);
}

/* y = conv(x, w) + b (b every other shape). */
static double check_forward(enum dt_bf16_path p, struct dt_conv_shape s, bool bias)
{
    struct dt_conv_s2_geom g;
    assert_int_equal(dt_conv_s2_bf16_geometry(&s, &g), 0);
    size_t nx = (size_t)s.c * s.h * s.w, nw = (size_t)s.k * s.c * s.kh * s.kw;
    size_t ny = (size_t)s.k * g.oh * g.ow;
    float *x = random_floats(nx), *w = random_floats(nw), *b = random_floats((size_t)s.k);
    float *y = malloc(ny * 4), *yq = malloc(g.yq * 4);
    for (size_t i = 0; i < ny; i++)
        y[i] = NAN; /* every output must be written */
    dt_bf16 *xv = calloc(g.xv, 2), *wp = malloc(g.wpack * 2);
    dt_conv_s2_bf16_parity_planes_image(&s, &g, x, false, xv);
    dt_conv_s2_bf16_pack_weights(&s, &g, w, wp);
    dt_conv_s2_bf16_forward_on(p, &s, &g, xv, wp, yq);
    dt_conv_s2_bf16_compact(&s, &g, yq, bias ? b : NULL, false, DT_STORE_F32, y);
    double worst = 0;
    for (int k = 0; k < s.k; k++)
        for (int oh = 0; oh < g.oh; oh++)
            for (int ow = 0; ow < g.ow; ow++) {
                double exact = bias ? b[k] : 0, mag = fabs(exact);
                for (int c = 0; c < s.c; c++)
                    for (int i = 0; i < s.kh; i++)
                        for (int j = 0; j < s.kw; j++) {
                            int ih = 2 * oh + i - s.pad, iw = 2 * ow + j - s.pad;
                            if (ih < 0 || iw < 0 || ih >= s.h || iw >= s.w)
                                continue;
                            double t = rb(x[((size_t)c * s.h + ih) * s.w + iw]) *
                                       rb(w[(((size_t)k * s.c + c) * s.kh + i) * s.kw + j]);
                            exact += t;
                            mag += fabs(t);
                        }
                double got = y[((size_t)k * g.oh + oh) * g.ow + ow];
                worst = fmax(worst, bf16_bound_ratio(got, exact, mag, (long)s.c * s.kh * s.kw + 2));
            }
    free(x), free(w), free(b), free(y), free(yq), free(xv), free(wp);
    return worst;
}

/* dX[c][ih][iw] = sum over k, oh, ow with 2 oh + i - pad = ih, 2 ow + j - pad = iw of
 * dY[k][oh][ow] W[k][c][i][j]; with `relu` (every other shape) through a relu below: dx =
 * x > 0 ? dX + extra : 0, and extra the very buffer dx is written to. */
static double check_input_grad(enum dt_bf16_path p, struct dt_conv_shape s, bool relu)
{
    struct dt_conv_s2_geom g;
    assert_int_equal(dt_conv_s2_bf16_geometry(&s, &g), 0);
    size_t ndy = (size_t)s.k * g.oh * g.ow, nw = (size_t)s.k * s.c * s.kh * s.kw;
    size_t ndx = (size_t)s.c * s.h * s.w;
    float *dy = random_floats(ndy), *w = random_floats(nw), *dx = malloc(ndx * 4);
    float *relu_x = random_floats(ndx), *extra = random_floats(ndx);
    float *dxq = malloc(g.dxq * 4);
    for (size_t i = 0; i < ndx; i++)
        dx[i] = relu ? extra[i] : NAN; /* extra in place, as the skip_in_dy fusion has it */
    dt_bf16 *dv = calloc(g.dv, 2), *wpi = malloc(g.wpack_dx * 2);
    dt_conv_s2_bf16_dy_planes_image(&s, &g, dy, dv);
    dt_conv_s2_bf16_pack_weights_input_grad(&s, &g, w, wpi);
    dt_conv_s2_bf16_input_grad_on(p, &s, &g, dv, wpi, dxq);
    dt_conv_s2_bf16_compact_dx(&s, &g, dxq, relu ? relu_x : NULL, false, relu ? dx : NULL, false,
                               false, dx);
    double worst = 0;
    for (int c = 0; c < s.c; c++)
        for (int ih = 0; ih < s.h; ih++)
            for (int iw = 0; iw < s.w; iw++) {
                double exact = 0, mag = 0;
                for (int k = 0; k < s.k; k++)
                    for (int i = 0; i < s.kh; i++)
                        for (int j = 0; j < s.kw; j++) {
                            int yh = ih + s.pad - i, yw = iw + s.pad - j;
                            if (yh < 0 || yw < 0 || yh % 2 || yw % 2 || yh / 2 >= g.oh ||
                                yw / 2 >= g.ow)
                                continue;
                            double v = rb(dy[((size_t)k * g.oh + yh / 2) * g.ow + yw / 2]) *
                                       rb(w[(((size_t)k * s.c + c) * s.kh + i) * s.kw + j]);
                            exact += v;
                            mag += fabs(v);
                        }
                size_t at = ((size_t)c * s.h + ih) * s.w + iw;
                if (relu) {
                    exact = relu_x[at] > 0 ? exact + extra[at] : 0;
                    mag += fabs(extra[at]);
                }
                worst =
                    fmax(worst, bf16_bound_ratio(dx[at], exact, mag, (long)s.k * s.kh * s.kw + 2));
            }
    free(dy), free(w), free(dx), free(relu_x), free(extra), free(dxq), free(dv), free(wpi);
    return worst;
}

/* dW over 3 samples, onto a non-zero start (every other shape) or not. */
static double check_weight_grad(enum dt_bf16_path p, struct dt_conv_shape s, bool accumulate)
{
    enum { N = 3 };
    struct dt_conv_s2_geom g;
    assert_int_equal(dt_conv_s2_bf16_geometry(&s, &g), 0);
    size_t sx = (size_t)s.c * s.h * s.w, sy = (size_t)s.k * g.oh * g.ow;
    size_t nw = (size_t)s.k * s.c * s.kh * s.kw;
    float *x = random_floats(N * sx), *dy = random_floats(N * sy), *start = random_floats(nw);
    float *dw = malloc(nw * 4), *dwt = malloc(g.dwt * 4);
    dt_bf16 *dyq = calloc(N * g.dyq, 2), *xp = calloc(N * g.xp, 2);
    for (int n = 0; n < N; n++) {
        dt_conv_s2_bf16_dy_rows_image(&s, &g, dy + n * sy, dyq + n * g.dyq);
        dt_conv_s2_bf16_position_pairs_image(&s, &g, x + n * sx, false, xp + n * g.xp);
    }
    int taps = s.kh * s.kw;
    for (size_t i = 0; i < g.dwt; i++)
        dwt[i] = accumulate ? 0 : NAN; /* garbage the kernel must not read */
    for (int k = 0; accumulate && k < s.k; k++)
        for (int c = 0; c < s.c; c++)
            for (int t = 0; t < taps; t++)
                dwt[((size_t)k * taps + t) * g.c16 + c] = start[((size_t)k * s.c + c) * taps + t];
    dt_conv_s2_bf16_weight_grad_on(p, &s, &g, N, dyq, xp, dwt, accumulate);
    dt_conv_s2_bf16_weight_grad_unpack(&s, &g, dwt, dw);
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
                                int ih = 2 * oh + i - s.pad, iw = 2 * ow + j - s.pad;
                                if (ih < 0 || iw < 0 || ih >= s.h || iw >= s.w)
                                    continue;
                                double v = rb(dy[n * sy + ((size_t)k * g.oh + oh) * g.ow + ow]) *
                                           rb(x[n * sx + ((size_t)c * s.h + ih) * s.w + iw]);
                                exact += v;
                                mag += fabs(v);
                            }
                    worst = fmax(worst, bf16_bound_ratio(dw[at], exact, mag, (long)N * g.qrow + 2));
                }
    free(x), free(dy), free(start), free(dw), free(dwt), free(dyq), free(xp);
    return worst;
}

/* {n, c, h, w, k, kh, kw, stride, pad} */
static const struct dt_conv_shape shapes[] = {
    {1, 16, 32, 32, 32, 3, 3, 2, 1}, /* ResNet-20 stage 2's first conv */
    {1, 16, 32, 32, 32, 1, 1, 2, 0}, /* its projection */
    {1, 32, 16, 16, 64, 3, 3, 2, 1}, /* stage 3 */
    {1, 32, 16, 16, 64, 1, 1, 2, 0},
    {1, 32, 14, 14, 64, 3, 3, 2, 1}, /* fashion-resnet: 14 -> 7 */
    {1, 32, 14, 14, 64, 1, 1, 2, 0},
    {1, 5, 7, 9, 20, 3, 3, 2, 1},  /* odd sizes and channels; outputs under two tiles */
    {1, 40, 9, 8, 17, 1, 1, 2, 0}, /* odd height, channels over one tile row */
    {1, 6, 11, 10, 7, 5, 5, 2, 2}, /* 5x5 */
    {1, 8, 9, 9, 3, 3, 3, 2, 0},   /* no padding */
};

static void each_shape(enum dt_bf16_path p, const char *what, bf16_conv_check *check)
{
    bf16_check_conv_shapes(p, what, check, shapes, sizeof shapes / sizeof *shapes);
}

static void test_forward(void **state)
{
    each_shape(*(enum dt_bf16_path *)*state, "stride-2 forward", check_forward);
}

static void test_input_gradient(void **state)
{
    each_shape(*(enum dt_bf16_path *)*state, "stride-2 input gradient", check_input_grad);
}

static void test_weight_gradient(void **state)
{
    each_shape(*(enum dt_bf16_path *)*state, "stride-2 weight gradient", check_weight_grad);
}

/* The *_image layouts write only the image: a buffer zeroed once and written for one sample
 * and then another holds what a fresh zeroed buffer holds for the second. */
static void test_images_keep_padding(void **state)
{
    (void)state;
    for (size_t t = 0; t < sizeof shapes / sizeof *shapes; t++) {
        const struct dt_conv_shape *s = &shapes[t];
        struct dt_conv_s2_geom g;
        assert_int_equal(dt_conv_s2_bf16_geometry(s, &g), 0);
        size_t nx = (size_t)s->c * s->h * s->w, ny = (size_t)s->k * g.oh * g.ow;
        float *x1 = random_floats(nx), *x2 = random_floats(nx);
        float *y1 = random_floats(ny), *y2 = random_floats(ny);
        size_t sizes[] = {g.xv, g.dv, g.dyq, g.xp};
        for (int kind = 0; kind < 4; kind++) {
            dt_bf16 *reused = calloc(sizes[kind], 2), *fresh = calloc(sizes[kind], 2);
            for (int pass = 0; pass < 3; pass++) {
                dt_bf16 *dst = pass < 2 ? reused : fresh;
                const float *x = pass == 0 ? x1 : x2, *y = pass == 0 ? y1 : y2;
                if (kind == 0)
                    dt_conv_s2_bf16_parity_planes_image(s, &g, x, false, dst);
                else if (kind == 1)
                    dt_conv_s2_bf16_dy_planes_image(s, &g, y, dst);
                else if (kind == 2)
                    dt_conv_s2_bf16_dy_rows_image(s, &g, y, dst);
                else
                    dt_conv_s2_bf16_position_pairs_image(s, &g, x, false, dst);
            }
            assert_memory_equal(reused, fresh, sizes[kind] * 2);
            free(reused);
            free(fresh);
        }
        free(x1), free(x2), free(y1), free(y2);
    }
}

/* A 1x1 pad-0 conv reads only the even-even plane; its input gradient is zero elsewhere. */
static void test_projection_reads_one_plane(void **state)
{
    (void)state;
    struct dt_conv_shape s = {1, 16, 32, 32, 32, 1, 1, 2, 0};
    struct dt_conv_s2_geom g;
    assert_int_equal(dt_conv_s2_bf16_geometry(&s, &g), 0);
    assert_int_equal(g.planes, 1);
    assert_int_equal(g.dx_taps[0], 1);
    assert_int_equal(g.dx_taps[1] + g.dx_taps[2] + g.dx_taps[3], 0);
    assert_int_equal(g.oh, 16);
    assert_int_equal(g.wq, 16); /* no junk column */
    struct dt_conv_shape s3 = {1, 16, 32, 32, 32, 3, 3, 2, 1};
    assert_int_equal(dt_conv_s2_bf16_geometry(&s3, &g), 0);
    assert_int_equal(g.planes, 15);
    assert_int_equal(g.dx_taps[0] + g.dx_taps[1] + g.dx_taps[2] + g.dx_taps[3], 9);
}

/* A value for the layout test: mostly uniform, with the conversion's hard cases mixed in
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

static float *layout_values(size_t n)
{
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = layout_value();
    return v;
}

/* x and relu_x stored as bf16 (a ResNet block's output, the model's bf16_store; its gathers
 * read 2 bytes past an element: 32 elements of tail): each build writes the bytes it writes
 * from the same values as fp32, in the parity planes, the position pairs and compact_dx's
 * relu mask. */
static void check_bf16_x(const struct dt_conv_s2_bf16_layout *const *layout,
                         const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                         const float *x, const float *dxq, const float *relu_x)
{
    size_t nx = (size_t)s->c * s->h * s->w;
    dt_bf16 *xh = calloc(nx + 32, 2), *rh = calloc(nx + 32, 2);
    float *xr = malloc(nx * 4), *rr = malloc(nx * 4);
    for (size_t i = 0; i < nx; i++) {
        xh[i] = dt_bf16_from_f32(x[i]), xr[i] = dt_bf16_to_f32(xh[i]);
        rh[i] = dt_bf16_from_f32(relu_x[i]), rr[i] = dt_bf16_to_f32(rh[i]);
    }
    for (int p = 0; p < 2; p++) {
        dt_bf16 *v[2] = {calloc(g->xv, 2), calloc(g->xv, 2)};
        dt_bf16 *q[2] = {calloc(g->xp, 2), calloc(g->xp, 2)};
        float *dx[2] = {malloc(nx * 4), malloc(nx * 4)};
        layout[p]->parity_planes_image(s, g, xh, true, v[0]);
        layout[p]->parity_planes_image(s, g, xr, false, v[1]);
        assert_memory_equal(v[0], v[1], g->xv * 2);
        layout[p]->position_pairs_image(s, g, xh, true, q[0]);
        layout[p]->position_pairs_image(s, g, xr, false, q[1]);
        assert_memory_equal(q[0], q[1], g->xp * 2);
        for (int with_extra = 0; with_extra < 2; with_extra++) {
            for (int k = 0; k < 2; k++) { /* the skip gradient, in dx */
                memcpy(dx[k], x, nx * 4);
                layout[p]->compact_dx(s, g, dxq, k ? (const void *)rr : (const void *)rh, !k,
                                      with_extra ? dx[k] : NULL, false, false, dx[k]);
            }
            bf16_assert_same_floats(dx[0], dx[1], nx);
        }
        free(v[0]), free(v[1]), free(q[0]), free(q[1]), free(dx[0]), free(dx[1]);
    }
    free(xh), free(rh), free(xr), free(rr);
}

/* The paths whose layout passes are AVX-512 builds. */
static enum dt_bf16_path avx512_paths[] = {DT_BF16_AMX, DT_BF16_AVX512BF16};

/* The amx and avx512bf16 paths' layout passes (AVX-512, conv_s2_bf16_layout.isa.c) write the plain
 * C's bytes: parity planes, dY pair planes, dY rows and position pairs (into buffers zeroed once,
 * two samples in turn), the compaction with and without bias, and compact_dx without the relu
 * below, with it, and with it and the skip gradient (given as dx itself; a sum of two NaNs may
 * keep either's payload); and each with x and relu_x stored as bf16 (check_bf16_x). Shapes:
 * the tests' own, 28 -> 14, and rows over 32 columns, even and odd, so that every other column
 * is picked across vectors. */
static void test_layout_passes_match_plain_c(void **state)
{
    enum dt_bf16_path path = *(const enum dt_bf16_path *)*state;
    bf16_skip_unless_available(path, "stride-2 layout passes");
    struct dt_conv_shape more[] = {{1, 16, 28, 28, 32, 3, 3, 2, 1},
                                   {1, 16, 28, 28, 32, 1, 1, 2, 0},
                                   {1, 3, 66, 67, 5, 3, 3, 2, 1},
                                   {1, 17, 5, 70, 3, 1, 1, 2, 0},
                                   {1, 2, 35, 33, 33, 5, 5, 2, 1}};
    size_t count = sizeof shapes / sizeof *shapes + sizeof more / sizeof *more;
    for (size_t t = 0; t < count; t++) {
        struct dt_conv_shape s = t < sizeof shapes / sizeof *shapes
                                     ? shapes[t]
                                     : more[t - sizeof shapes / sizeof *shapes];
        struct dt_conv_s2_geom g;
        assert_int_equal(dt_conv_s2_bf16_geometry(&s, &g), 0);
        size_t nx = (size_t)s.c * s.h * s.w, ny = (size_t)s.k * g.oh * g.ow;
        float *x[2] = {layout_values(nx), layout_values(nx)};
        float *dy[2] = {layout_values(ny), layout_values(ny)};
        float *yq = layout_values(g.yq), *dxq = layout_values(g.dxq), *b = random_floats(s.k);
        float *relu_x = layout_values(nx);
        const struct dt_conv_s2_bf16_layout *layout[2] = {dt_conv_s2_bf16_layout_on(DT_BF16_CTILE),
                                                          dt_conv_s2_bf16_layout_on(path)};
        assert_ptr_not_equal(layout[0], layout[1]); /* the plain C, the AVX-512 build */
        dt_bf16 *xv[2], *dv[2], *dyq[2], *xp[2];
        float *y[2], *dx[2];
        for (int p = 0; p < 2; p++) {
            xv[p] = calloc(g.xv, 2), dv[p] = calloc(g.dv, 2), dyq[p] = calloc(g.dyq, 2);
            xp[p] = calloc(g.xp, 2), y[p] = malloc(ny * 4), dx[p] = malloc(nx * 4);
            for (int sample = 0; sample < 2; sample++) {
                layout[p]->parity_planes_image(&s, &g, x[sample], false, xv[p]);
                layout[p]->dy_planes_image(&s, &g, dy[sample], dv[p]);
                layout[p]->dy_rows_image(&s, &g, dy[sample], dyq[p]);
                layout[p]->position_pairs_image(&s, &g, x[sample], false, xp[p]);
            }
        }
        assert_memory_equal(xv[0], xv[1], g.xv * 2);
        assert_memory_equal(dv[0], dv[1], g.dv * 2);
        assert_memory_equal(dyq[0], dyq[1], g.dyq * 2);
        assert_memory_equal(xp[0], xp[1], g.xp * 2);
        /* bias, relu and the three stores: BF16's elements are ROUNDED's values */
        float *rounded = malloc(ny * 4);
        for (int variant = 0; variant < 12; variant++) {
            enum dt_bf16_store store = (enum dt_bf16_store)(variant / 4);
            const float *bias = variant & 1 ? b : NULL;
            for (int p = 0; p < 2; p++)
                layout[p]->compact(&s, &g, yq, bias, variant & 2, store, y[p]);
            assert_memory_equal(y[0], y[1], ny * (store == DT_STORE_BF16 ? 2 : 4));
            if (store == DT_STORE_F32)
                continue;
            layout[0]->compact(&s, &g, yq, bias, variant & 2, DT_STORE_ROUNDED, rounded);
            for (size_t i = 0; i < ny; i++) {
                float v = store == DT_STORE_BF16 ? dt_bf16_to_f32(((dt_bf16 *)y[0])[i])
                                                 : dt_bf16_round(rounded[i]);
                assert_memory_equal(&v, &rounded[i], 4);
            }
        }
        free(rounded);
        /* without and with the relu below, and the skip gradient; unrounded and rounded.
         * Rounded is the unrounded on dxq rounded first (before the skip gradient's add) */
        float *dxq_r = malloc(g.dxq * 4), *want = malloc(nx * 4);
        for (size_t i = 0; i < g.dxq; i++)
            dxq_r[i] = dt_bf16_round(dxq[i]);
        for (int variant = 0; variant < 6; variant++) {
            int v = variant % 3;
            bool round = variant >= 3;
            for (int p = 0; p < 2; p++) {
                memcpy(dx[p], x[1], nx * 4); /* the skip gradient, in dx */
                layout[p]->compact_dx(&s, &g, dxq, v ? relu_x : NULL, false, v == 2 ? dx[p] : NULL,
                                      false, round, dx[p]);
            }
            bf16_assert_same_floats(dx[0], dx[1], nx);
            if (!round)
                continue;
            memcpy(want, x[1], nx * 4);
            layout[0]->compact_dx(&s, &g, dxq_r, v ? relu_x : NULL, false, v == 2 ? want : NULL,
                                  false, false, want);
            bf16_assert_same_floats(want, dx[0], nx);
        }
        free(dxq_r), free(want);
        check_bf16_x(layout, &s, &g, x[0], dxq, relu_x);
        for (int p = 0; p < 2; p++) {
            free(xv[p]), free(dv[p]), free(dyq[p]), free(xp[p]), free(y[p]), free(dx[p]);
            free(x[p]), free(dy[p]);
        }
        free(yq), free(dxq), free(b), free(relu_x);
    }
}

/* The layout builds this CPU runs: the plain C, then the AVX-512 one where its paths run. */
static int layout_builds(const struct dt_conv_s2_bf16_layout **out)
{
    const char *why;
    out[0] = dt_conv_s2_bf16_layout_on(DT_BF16_CTILE);
    for (int i = 0; i < 2; i++)
        if (dt_bf16_path_available(avx512_paths[i], &why)) {
            out[1] = dt_conv_s2_bf16_layout_on(avx512_paths[i]);
            return 2;
        }
    print_message("skip the AVX-512 layout build: %s\n", why);
    return 1;
}

/* The shapes of the proj_dx and bn_dy_image tests: the tests' own, 28 -> 14, rows over 32
 * columns, odd ones. */
static const struct dt_conv_shape even_shapes[] = {
    {1, 16, 28, 28, 32, 3, 3, 2, 1}, {1, 16, 28, 28, 32, 1, 1, 2, 0}, {1, 3, 66, 67, 5, 3, 3, 2, 1},
    {1, 17, 5, 70, 3, 1, 1, 2, 0},   {1, 2, 35, 33, 33, 5, 5, 2, 1},  {1, 5, 67, 9, 4, 1, 1, 2, 0}};

/* check(layout builds, their count, shape, its geometry) on each of the tests' own shapes and
 * even_shapes. */
static void each_layout_shape(void (*check)(const struct dt_conv_s2_bf16_layout *const *, int,
                                            const struct dt_conv_shape *, struct dt_conv_s2_geom))
{
    const struct dt_conv_s2_bf16_layout *layout[2];
    int builds = layout_builds(layout);
    size_t own = sizeof shapes / sizeof *shapes;
    for (size_t t = 0; t < own + sizeof even_shapes / sizeof *even_shapes; t++) {
        const struct dt_conv_shape *s = t < own ? &shapes[t] : &even_shapes[t - own];
        struct dt_conv_s2_geom g;
        assert_int_equal(dt_conv_s2_bf16_geometry(s, &g), 0);
        check(layout, builds, s, g);
    }
}

/* The proj_dx fusion's two ends (conv_s2_bf16.h). Where dX reaches only the even rows' even
 * columns (1x1 without padding, nowhere else), compact_dx_even stores compact_dx's values of
 * those positions. And compact_dx given only those positions' extra (extra_even) writes what it
 * writes given the whole extra with +0 between (+0 added to a -0 is +0: dxq holds -0s), in
 * every layout build, the relu mask read from fp32 and from bf16. */
static void check_dx_even(const struct dt_conv_s2_bf16_layout *const *layout, int builds,
                          const struct dt_conv_shape *s, struct dt_conv_s2_geom g)
{
    bool only = dt_conv_s2_bf16_dx_even_only(s, &g);
    assert_int_equal(only, s->kh == 1 && s->pad == 0);
    int eh = (s->h + 1) / 2, ew = (s->w + 1) / 2;
    size_t nx = (size_t)s->c * s->h * s->w, nq = (size_t)s->c * eh * ew;
    float *dxq = layout_values(g.dxq), *relu_x = layout_values(nx);
    float *quarter = layout_values(nq), *whole = calloc(nx, 4);
    for (int c = 0; c < s->c; c++)
        for (int r = 0; r < eh; r++)
            for (int q = 0; q < ew; q++)
                whole[((size_t)c * s->h + 2 * r) * s->w + 2 * q] =
                    quarter[((size_t)c * eh + r) * ew + q];
    dt_bf16 *relu_h = calloc(nx + 32, 2);
    for (size_t i = 0; i < nx; i++)
        relu_h[i] = dt_bf16_from_f32(relu_x[i]);
    float *a = malloc(nx * 4), *b = malloc(nx * 4);
    if (only) {
        dt_conv_s2_bf16_compact_dx(s, &g, dxq, NULL, false, NULL, false, false, a);
        dt_conv_s2_bf16_compact_dx_even(s, &g, dxq, b);
        for (int c = 0; c < s->c; c++)
            for (int r = 0; r < eh; r++)
                for (int q = 0; q < ew; q++)
                    assert_memory_equal(&b[((size_t)c * eh + r) * ew + q],
                                        &a[((size_t)c * s->h + 2 * r) * s->w + 2 * q], 4);
    }
    for (int p = 0; p < builds; p++)
        for (int half = 0; half < 2; half++) {
            const void *rx = half ? (const void *)relu_h : (const void *)relu_x;
            layout[p]->compact_dx(s, &g, dxq, rx, half, whole, false, false, a);
            layout[p]->compact_dx(s, &g, dxq, rx, half, quarter, true, false, b);
            bf16_assert_same_floats(a, b, nx);
        }
    free(dxq), free(relu_x), free(quarter), free(whole), free(relu_h), free(a), free(b);
}

static void test_dx_even(void **state)
{
    (void)state;
    each_layout_shape(check_dx_even);
}

/* bn_dy_image (the bn_grad fusion's dY on stride 2) writes the bytes dy_rows_image and
 * dy_planes_image write from the batchnorm's own input_grad loop's output, two samples in turn
 * into buffers zeroed once, with and without the pair planes, in every layout build: the
 * batchnorm's input as fp32 and as bf16, dy with the conversion's hard cases, a zero factor and
 * a negative one. */
static void check_bn_dy_image(const struct dt_conv_s2_bf16_layout *const *layout, int builds,
                              const struct dt_conv_shape *s, struct dt_conv_s2_geom g)
{
    size_t plane = (size_t)g.oh * g.ow, ny = (size_t)s->k * plane;
    float *dy = layout_values(2 * ny), *x = random_floats(2 * ny), *want = malloc(ny * 4);
    dt_bf16 *xh = malloc(2 * ny * 2);
    for (size_t i = 0; i < 2 * ny; i++)
        xh[i] = dt_bf16_from_f32(x[i]);
    float *f = random_floats(5 * (size_t)s->k); /* mean, invstd, k, mean_dy, mean_dy_xhat */
    f[2 * s->k] = 0.0f;
    f[3 * s->k - 1] = -fabsf(f[3 * s->k - 1]);
    for (int half = 0; half < 2; half++) {
        struct dt_bn_grad bn = {half ? NULL : x, half ? xh : NULL, f,           f + s->k,
                                f + 2 * s->k,    f + 3 * s->k,     f + 4 * s->k};
        for (int p = 0; p < builds; p++)
            for (int pairs = 0; pairs < 2; pairs++) {
                dt_bf16 *want_q = calloc(g.dyq, 2), *got_q = calloc(g.dyq, 2);
                dt_bf16 *want_v = calloc(g.dv, 2), *got_v = calloc(g.dv, 2);
                for (int sample = 0; sample < 2; sample++) {
                    for (int c = 0; c < s->k; c++) {
                        size_t at = ((size_t)sample * s->k + c) * plane;
                        if (half)
                            dt_bn_loops()->input_grad_bf16(
                                xh + at, dy + at, want + c * plane, plane, plane, 1, bn.mean[c],
                                bn.invstd[c], bn.k[c], bn.mean_dy[c], bn.mean_dy_xhat[c]);
                        else
                            dt_bn_loops()->input_grad(x + at, dy + at, want + c * plane, plane,
                                                      plane, 1, bn.mean[c], bn.invstd[c], bn.k[c],
                                                      bn.mean_dy[c], bn.mean_dy_xhat[c]);
                    }
                    dt_conv_s2_bf16_dy_rows_image(s, &g, want, want_q);
                    dt_conv_s2_bf16_dy_planes_image(s, &g, want, want_v);
                    layout[p]->bn_dy_image(s, &g, &bn, dy, sample, got_q, pairs ? got_v : NULL);
                }
                assert_memory_equal(want_q, got_q, g.dyq * 2);
                if (pairs)
                    assert_memory_equal(want_v, got_v, g.dv * 2);
                free(want_q), free(got_q), free(want_v), free(got_v);
            }
    }
    free(dy), free(x), free(want), free(xh), free(f);
}

static void test_bn_dy_image(void **state)
{
    (void)state;
    each_layout_shape(check_bn_dy_image);
}

static void test_unsupported_shapes_are_refused(void **state)
{
    (void)state;
    struct dt_conv_s2_geom g;
    struct dt_conv_shape shapes_refused[] = {
        {1, 16, 32, 32, 16, 3, 3, 1, 1}, /* stride 1: conv_bf16.h */
        {1, 16, 32, 32, 16, 3, 3, 3, 1}, /* stride 3 */
        {1, 16, 32, 32, 16, 3, 3, 2, 3}, /* pad >= kernel */
        {1, 16, 32, 32, 16, 9, 9, 2, 4}, /* over the largest kernel */
        {1, 16, 1, 1, 16, 3, 3, 2, 0},   /* empty output */
    };
    for (size_t i = 0; i < sizeof shapes_refused / sizeof *shapes_refused; i++)
        assert_int_equal(dt_conv_s2_bf16_geometry(&shapes_refused[i], &g), -2);
}

int main(void)
{
    static enum dt_bf16_path paths[] = {DT_BF16_CTILE, DT_BF16_AVX512BF16, DT_BF16_AMX};
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_prestate(test_forward, &paths[0]),
        cmocka_unit_test_prestate(test_forward, &paths[1]),
        cmocka_unit_test_prestate(test_forward, &paths[2]),
        cmocka_unit_test_prestate(test_input_gradient, &paths[0]),
        cmocka_unit_test_prestate(test_input_gradient, &paths[1]),
        cmocka_unit_test_prestate(test_input_gradient, &paths[2]),
        cmocka_unit_test_prestate(test_weight_gradient, &paths[0]),
        cmocka_unit_test_prestate(test_weight_gradient, &paths[1]),
        cmocka_unit_test_prestate(test_weight_gradient, &paths[2]),
        cmocka_unit_test(test_images_keep_padding),
        cmocka_unit_test(test_projection_reads_one_plane),
        cmocka_unit_test_prestate(test_layout_passes_match_plain_c, &avx512_paths[0]),
        cmocka_unit_test_prestate(test_layout_passes_match_plain_c, &avx512_paths[1]),
        cmocka_unit_test(test_dx_even),
        cmocka_unit_test(test_bn_dy_image),
        cmocka_unit_test(test_unsupported_shapes_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* nn/bf16_layers.c through the conv2d and linear layers of a bf16 model (train.precision):
 * forward, input gradient and weight gradient against a double-precision computation on the
 * bf16-rounded operands (x, the weights, dy), on every bf16 path this CPU has (reference,
 * ctile, avx512bf16, amx; a path the CPU lacks is skipped with its reason printed). Covers both
 * modes: the tile kernels (stride-1 and stride-2 conv, the stem mode's im2col GEMMs for inputs
 * of under 4 channels whose channels x taps fit 32, linear) and the emulated fallback (stride 3
 * on the tile paths, everything on the reference path).
 *
 * Tolerance: a product of two bf16 values is exact in fp32, so the layer differs from the
 * double sum only by its fp32 accumulation: per element at most 1e-5 x sum |a b| over the
 * terms (+1e-7), about 100x the worst seen (1e-7 on every path); an operand left unrounded
 * would show as about 2^-9 / sqrt(terms), 7e-5 or more at these shapes. The
 * emulated conv runs on the GEMM algorithm here (forced), whose rounding is of that kind, and
 * again on the direct and Winograd algorithms, whose backward reads x: the emulated mode
 * rounds it again there, in the model's call scratch (test_emulated_rounds_x_again). The bias
 * gradient is an fp32 sum of the bf16-rounded dy (autocast's). A tile conv's output is bf16
 * values (autocast's conv returns bf16): checked as such, within one bf16 step of the exact
 * sum; the emulated mode's stays its fp32 algorithm's (nn/layer_conv2d.c says why). Every
 * mode's input gradient is bf16 values too (autocast's bf16 conv and linear return theirs so):
 * checked the same way.
 * Also: an fp32 model names no bf16 path, and forward/backward are deterministic. */
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/kernels/bf16/bf16.h"
#include "nn/kernels/fp32/conv_direct.h"
#include "nn/kernels/fp32/conv_winograd.h"
#include "nn/kernels/isa.h"
#include "nn/layers.h"
#include "nn/model.h"
#include "util/rng.h"

#define TOL 1e-5

static void fill(float *p, size_t n, uint64_t seed)
{
    struct dt_rng rng;
    dt_rng_init(&rng, dt_rng_key(seed, DT_RNG_TEST, 11, 0));
    for (size_t i = 0; i < n; i++)
        p[i] = 2.0f * dt_rng_uniform(&rng) - 1.0f;
}

static double rb(float v)
{
    return dt_bf16_round(v);
}

/* The exact sums and their magnitudes, filled by the references below. */
struct expect {
    double *v, *mag;
    size_t n;
};

static struct expect expect_new(size_t n)
{
    struct expect e = {calloc(n, sizeof(double)), calloc(n, sizeof(double)), n};
    assert_non_null(e.v);
    assert_non_null(e.mag);
    return e;
}

static void add_term(struct expect *e, size_t at, double a, double b)
{
    e->v[at] += a * b;
    e->mag[at] += fabs(a * b);
}

/* got against the exact sums; `rounded`: got is those sums rounded to bf16 (a bf16 conv's
 * output, autocast's), so each element must be a bf16 value within one bf16 step (2^-8 of
 * its magnitude: the rounding's half step, plus the accumulation's error moving the value
 * across a rounding boundary) of the sum. */
static void check_as(const struct expect *e, const float *got, const char *path, const char *what,
                     bool rounded)
{
    double worst = 0;
    for (size_t i = 0; i < e->n; i++) {
        double err = fabs((double)got[i] - e->v[i]), bound = TOL * e->mag[i] + 1e-7;
        if (rounded) {
            if (got[i] != dt_bf16_round(got[i]))
                fail_msg("%s %s: element %zu is %.9g, not a bf16 value", path, what, i, got[i]);
            bound += fabs(e->v[i]) * 0x1p-8;
        }
        if (!(err <= bound))
            fail_msg("%s %s: element %zu is %.9g, expected %.9g (bound %.3g)", path, what, i,
                     got[i], e->v[i], bound);
        if (e->mag[i] > 0)
            worst = fmax(worst, err / e->mag[i]);
    }
    print_message("  %s %s: worst error %.2e x sum|ab|\n", path, what, worst);
    free(e->v);
    free(e->mag);
}

static void check(const struct expect *e, const float *got, const char *path, const char *what)
{
    check_as(e, got, path, what, false);
}

/* The fp32 algorithm an emulated conv runs on (forced at build), and train.bf16_winograd. */
static enum dt_conv2d_algo emulated_algo = DT_CONV2D_GEMM;
static bool winograd_products;

/* Builds a one-layer bf16 model of spec on path p and runs forward and backward. */
struct run {
    struct dt_model *m;
    float *x, *y, *dy, *dx;
    size_t nin, nout;
    char note[112];
};

static bool run_layer(struct run *r, enum dt_bf16_path p, struct dt_layer_spec spec,
                      struct dt_shape in, int batch, enum dt_precision precision)
{
    struct dt_model_options opt = {
        .fusions = DT_FUSE_ALL, .precision = precision, .bf16_winograd = winograd_products};
    enum dt_bf16_path was = dt_isa_force_bf16_path(p);
    enum dt_conv2d_algo algo = dt_conv2d_force_algo(emulated_algo);
    assert_int_equal(dt_model_build_with(&r->m, &spec, 1, in, batch, DT_LOSS_NLL, 9, &opt), 0);
    dt_conv2d_force_algo(algo);
    dt_isa_force_bf16_path(was);
    struct dt_layer *l = r->m->layers[0];
    struct dt_layer_summary s;
    dt_model_layer_summary(r->m, 0, &s);
    snprintf(r->note, sizeof r->note, "%s", s.precision);
    r->nin = (size_t)batch * in.c * in.h * in.w;
    r->nout = (size_t)batch * l->out.c * l->out.h * l->out.w;
    r->x = malloc(r->nin * sizeof(float));
    r->dx = malloc(r->nin * sizeof(float));
    r->y = malloc(r->nout * sizeof(float));
    r->dy = malloc(r->nout * sizeof(float));
    fill(r->x, r->nin, 1);
    fill(r->dy, r->nout, 2);
    fill(l->params, l->nparams, 3);
    struct dt_layer_fwd fwd = {.run = {.training = true}};
    struct dt_layer_bwd alone = {0};
    l->kind->ops->forward(l, r->x, r->y, batch, &fwd);
    for (size_t i = 0; i < l->nparams; i++) /* backward writes, never accumulates */
        l->grads[i] = 77.0f;
    l->kind->ops->backward(l, r->x, r->y, r->dy, r->dx, batch, &alone);
    return true;
}

static void run_free(struct run *r)
{
    free(r->x);
    free(r->y);
    free(r->dy);
    free(r->dx);
    dt_model_free(r->m);
}

static void check_conv(enum dt_bf16_path p, int c, int h, int w, int k, int ks, int stride, int pad,
                       int batch, const char *mode)
{
    struct dt_layer_spec spec = {.type = "conv2d",
                                 .out_channels = k,
                                 .kernel = ks,
                                 .stride = stride,
                                 .padding = pad,
                                 .bias = true};
    struct run r;
    run_layer(&r, p, spec, (struct dt_shape){c, h, w}, batch, DT_PRECISION_BF16);
    assert_non_null(strstr(r.note, mode));
    const struct dt_layer *l = r.m->layers[0];
    if (strstr(r.note, "emulated")) /* the algorithm asked for (the tests ask for one it runs) */
        assert_int_equal(dt_conv2d_algo_of(l), emulated_algo);
    int oh = l->out.h, ow = l->out.w;
    const float *wt = l->params, *bias = l->params + (size_t)k * c * ks * ks;
    struct expect y = expect_new(r.nout), dx = expect_new(r.nin);
    struct expect dw = expect_new((size_t)k * c * ks * ks);
    for (int n = 0; n < batch; n++)
        for (int o = 0; o < k; o++)
            for (int i = 0; i < oh; i++)
                for (int j = 0; j < ow; j++) {
                    size_t yat = (((size_t)n * k + o) * oh + i) * ow + j;
                    y.v[yat] += bias[o];
                    y.mag[yat] += fabs(bias[o]);
                    for (int ch = 0; ch < c; ch++)
                        for (int a = 0; a < ks; a++)
                            for (int b = 0; b < ks; b++) {
                                int hh = i * stride - pad + a, ww = j * stride - pad + b;
                                if (hh < 0 || hh >= h || ww < 0 || ww >= w)
                                    continue;
                                size_t xat = (((size_t)n * c + ch) * h + hh) * w + ww;
                                size_t wat = (((size_t)o * c + ch) * ks + a) * ks + b;
                                add_term(&y, yat, rb(r.x[xat]), rb(wt[wat]));
                                add_term(&dx, xat, rb(r.dy[yat]), rb(wt[wat]));
                                add_term(&dw, wat, rb(r.dy[yat]), rb(r.x[xat]));
                            }
                }
    const char *name = dt_bf16_path_name(p);
    check_as(&y, r.y, name, "conv forward", !strstr(r.note, "emulated"));
    check_as(&dx, r.dx, name, "conv input gradient", true);
    check(&dw, l->grads, name, "conv weight gradient");
    for (int o = 0; o < k; o++) {
        double sum = 0;
        for (int n = 0; n < batch; n++)
            for (int i = 0; i < oh * ow; i++)
                sum += rb(r.dy[((size_t)n * k + o) * oh * ow + i]);
        assert_true(fabs(l->grads[(size_t)k * c * ks * ks + o] - sum) <= 1e-5 * (1 + fabs(sum)));
    }
    run_free(&r);
}

static void check_linear(enum dt_bf16_path p, int in, int out, int batch)
{
    struct dt_layer_spec spec = {.type = "linear", .out_features = out, .bias = true};
    struct run r;
    run_layer(&r, p, spec, (struct dt_shape){in, 1, 1}, batch, DT_PRECISION_BF16);
    assert_non_null(strstr(r.note, p == DT_BF16_REFERENCE ? "emulated" : dt_bf16_path_name(p)));
    const struct dt_layer *l = r.m->layers[0];
    const float *wt = l->params, *bias = l->params + (size_t)out * in;
    struct expect y = expect_new(r.nout), dx = expect_new(r.nin);
    struct expect dw = expect_new((size_t)out * in);
    for (int n = 0; n < batch; n++)
        for (int o = 0; o < out; o++) {
            size_t yat = (size_t)n * out + o;
            y.v[yat] += bias[o];
            y.mag[yat] += fabs(bias[o]);
            for (int i = 0; i < in; i++) {
                size_t xat = (size_t)n * in + i, wat = (size_t)o * in + i;
                add_term(&y, yat, rb(r.x[xat]), rb(wt[wat]));
                add_term(&dx, xat, rb(r.dy[yat]), rb(wt[wat]));
                add_term(&dw, wat, rb(r.dy[yat]), rb(r.x[xat]));
            }
        }
    const char *name = dt_bf16_path_name(p);
    check(&y, r.y, name, "linear forward");
    check_as(&dx, r.dx, name, "linear input gradient", true);
    check(&dw, l->grads, name, "linear weight gradient");
    run_free(&r);
}

static bool path_or_skip(enum dt_bf16_path p)
{
    const char *why;
    if (dt_bf16_path_available(p, &why))
        return true;
    print_message("skip bf16 path %s: %s\n", dt_bf16_path_name(p), why);
    return false;
}

static void test_conv_every_path(void **state)
{
    (void)state;
    for (int p = 0; p < DT_BF16_PATH_COUNT; p++) {
        if (!path_or_skip((enum dt_bf16_path)p))
            continue;
        const char *tiles = p == DT_BF16_REFERENCE ? "emulated" : dt_bf16_path_name(p);
        /* channel and position counts off the tile sizes; 3x3 pad 1, 5x5 pad 2, 1x1 */
        check_conv((enum dt_bf16_path)p, 5, 7, 9, 20, 3, 1, 1, 3, tiles);
        check_conv((enum dt_bf16_path)p, 34, 6, 5, 17, 5, 1, 2, 2, tiles);
        check_conv((enum dt_bf16_path)p, 4, 8, 8, 16, 1, 1, 0, 17, tiles); /* > one wgrad chunk */
        check_conv((enum dt_bf16_path)p, 4, 8, 8, 16, 3, 1, 1, 1, tiles);  /* one part empty */
        /* stride 2 (parity planes): 3x3 pad 1 on odd and even sizes, 1x1 pad 0 (a
         * projection), 5x5, and more samples than one weight-gradient chunk */
        check_conv((enum dt_bf16_path)p, 6, 9, 8, 12, 3, 2, 1, 2, tiles);
        check_conv((enum dt_bf16_path)p, 16, 14, 14, 32, 3, 2, 1, 3, tiles); /* 14 -> 7 */
        check_conv((enum dt_bf16_path)p, 16, 14, 14, 32, 1, 2, 0, 3, tiles);
        check_conv((enum dt_bf16_path)p, 5, 7, 7, 17, 1, 2, 0, 17, tiles);
        check_conv((enum dt_bf16_path)p, 4, 11, 10, 7, 5, 2, 2, 2, tiles);
        /* inputs of under 4 channels whose channels x taps are 17 to 32 (the stem mode): the
         * CIFAR nets' 3x3x3 (27), 5x5 on one channel (25), 2x3x3 (18), stride 2, odd sizes,
         * more samples than one thread takes; outside 17-32 the emulated fallback (the
         * ConvNet's 1x3x3, 3x5x5) */
        check_conv((enum dt_bf16_path)p, 3, 8, 8, 16, 3, 1, 1, 3, tiles);
        check_conv((enum dt_bf16_path)p, 3, 8, 8, 32, 3, 1, 1, 3, tiles); /* dY whole tiles */
        check_conv((enum dt_bf16_path)p, 3, 13, 10, 33, 3, 1, 0, 5, tiles);
        check_conv((enum dt_bf16_path)p, 1, 9, 7, 6, 5, 1, 2, 2, tiles);
        check_conv((enum dt_bf16_path)p, 1, 11, 9, 17, 5, 1, 0, 3, tiles);
        check_conv((enum dt_bf16_path)p, 2, 7, 6, 5, 3, 1, 1, 2, tiles);
        check_conv((enum dt_bf16_path)p, 3, 9, 8, 12, 3, 2, 1, 2, tiles);
        check_conv((enum dt_bf16_path)p, 1, 8, 8, 16, 3, 1, 1, 3, "emulated");   /* 9 deep */
        check_conv((enum dt_bf16_path)p, 3, 10, 11, 16, 5, 2, 2, 3, "emulated"); /* 75 deep */
        /* stride 3: the emulated fallback on every path */
        check_conv((enum dt_bf16_path)p, 6, 9, 8, 12, 3, 3, 1, 2, "emulated");
        check_conv((enum dt_bf16_path)p, 3, 9, 8, 12, 3, 3, 1, 2, "emulated");
        /* a 3x3 stride-1 shape fp32 Winograd prefers: the avx512bf16 path runs it emulated on
         * Winograd (a quarter of the products), rounding in the kernels; the others on tiles */
        emulated_algo = DT_CONV2D_WINOGRAD;
        check_conv((enum dt_bf16_path)p, 16, 8, 7, 24, 3, 1, 1, 3,
                   p == DT_BF16_AVX512BF16 ? "avx512bf16, emulated on fp32 Winograd" : tiles);
        emulated_algo = DT_CONV2D_GEMM;
    }
}

/* train.bf16_winograd: a conv that runs emulated on Winograd (on the avx512bf16 path by its
 * rule; on the reference path, asked for) takes the bf16 products, says so, and gives the
 * kernels' bits: dt_conv_winograd_filter_bf16 of its rounded weights, then the _bf16 entry
 * points with products, at the layer's thread count. A conv on tiles (amx, ctile) keeps them. */
static void test_conv_winograd_products(void **state)
{
    (void)state;
    for (int p = 0; p < DT_BF16_PATH_COUNT; p++) {
        if (!path_or_skip((enum dt_bf16_path)p))
            continue;
        bool emulated = p == DT_BF16_REFERENCE || p == DT_BF16_AVX512BF16;
        struct dt_layer_spec spec = {.type = "conv2d",
                                     .out_channels = 24,
                                     .kernel = 3,
                                     .stride = 1,
                                     .padding = 1,
                                     .bias = true};
        struct run r;
        emulated_algo = DT_CONV2D_WINOGRAD;
        winograd_products = true;
        run_layer(&r, (enum dt_bf16_path)p, spec, (struct dt_shape){16, 8, 7}, 3,
                  DT_PRECISION_BF16);
        winograd_products = false;
        emulated_algo = DT_CONV2D_GEMM;
        print_message("  %s: %s\n", dt_bf16_path_name(p), r.note);
        if (!emulated) {
            assert_null(strstr(r.note, "products"));
            run_free(&r);
            continue;
        }
        assert_non_null(strstr(r.note, "bf16 products on Winograd"));
        const struct dt_layer *l = r.m->layers[0];
        struct dt_conv_shape s = {3, 16, 8, 7, 24, 3, 3, 1, 1};
        size_t nw = (size_t)24 * 16 * 9, threads = (size_t)omp_get_max_threads();
        size_t nscratch = dt_conv_winograd_scratch_floats(&s, (int)threads);
        float *w = malloc(sizeof(float) * nw), *u = malloc(sizeof(float) * nscratch);
        float *scratch = malloc(sizeof(float) * nscratch), *y = malloc(sizeof(float) * r.nout);
        float *g = calloc(nw + 24, sizeof(float)), *dx = malloc(sizeof(float) * r.nin);
        assert_true(w && u && scratch && y && g && dx);
        dt_bf16_round_n(l->params, w, nw);
        assert_int_equal(dt_conv_winograd_filter_bf16(&s, w, u), 0);
        assert_int_equal(dt_conv_winograd_forward_bf16(&s, r.x, false, true, u, l->params + nw, y,
                                                       NULL, 0, scratch, nscratch, (int)threads),
                         0);
        assert_memory_equal(y, r.y, sizeof(float) * r.nout);
        assert_int_equal(dt_conv_winograd_backward_bf16(&s, r.x, false, true, r.dy, NULL, w, g,
                                                        g + nw, dx, false, NULL, scratch, nscratch,
                                                        (int)threads),
                         0);
        assert_memory_equal(g, l->grads, sizeof(float) * (nw + 24));
        assert_memory_equal(dx, r.dx, sizeof(float) * r.nin);
        free(w), free(u), free(scratch), free(y), free(g), free(dx);
        run_free(&r);
    }
}

static void test_linear_every_path(void **state)
{
    (void)state;
    for (int p = 0; p < DT_BF16_PATH_COUNT; p++) {
        if (!path_or_skip((enum dt_bf16_path)p))
            continue;
        check_linear((enum dt_bf16_path)p, 37, 13, 5);
        check_linear((enum dt_bf16_path)p, 300, 40, 33);
        /* whole tiles both ways: the weights' one-pass pack (dt_bf16_pack_rows_both) */
        check_linear((enum dt_bf16_path)p, 96, 64, 20);
    }
}

/* The emulated mode on the direct and Winograd algorithms, whose backward reads x: rounded
 * again from the fp32 x there, it must be the x forward rounded (an unrounded x would miss
 * the bound by far). On the reference path (the tile paths take these shapes on tiles). */
static void test_emulated_rounds_x_again(void **state)
{
    (void)state;
    enum dt_conv2d_algo algos[2] = {DT_CONV2D_DIRECT, DT_CONV2D_WINOGRAD};
    for (int a = 0; a < 2; a++) {
        emulated_algo = algos[a];
        struct dt_conv_shape s2 = {
            .n = 2, .c = 3, .h = 9, .w = 8, .k = 12, .kh = 3, .kw = 3, .stride = 2, .pad = 1};
        bool runs = a == 0 ? dt_conv_direct_supported(&s2) : dt_conv_winograd_supported(&s2);
        for (int p = 0; p < DT_BF16_PATH_COUNT; p++) {
            if (!path_or_skip((enum dt_bf16_path)p))
                continue;
            if (p != DT_BF16_REFERENCE)
                continue;
            check_conv((enum dt_bf16_path)p, 5, 7, 9, 20, 3, 1, 1, 3, "emulated");
            if (runs)
                check_conv((enum dt_bf16_path)p, 3, 9, 8, 12, 3, 2, 1, 2, "emulated");
            check_conv((enum dt_bf16_path)p, 3, 8, 8, 16, 3, 1, 1, 3, "emulated");
        }
    }
    emulated_algo = DT_CONV2D_GEMM;
}

/* An fp32 model names nothing, and a bf16 layer gives the same bits when run twice. */
static void test_fp32_unnamed_and_deterministic(void **state)
{
    (void)state;
    struct dt_layer_spec spec = {.type = "conv2d", .out_channels = 8, .kernel = 3, .bias = true};
    struct run a, b, f;
    run_layer(&f, DT_BF16_PATH_COUNT, spec, (struct dt_shape){4, 6, 6}, 2, DT_PRECISION_FP32);
    assert_string_equal(f.note, "");
    run_free(&f);
    run_layer(&a, DT_BF16_PATH_COUNT, spec, (struct dt_shape){4, 6, 6}, 2, DT_PRECISION_BF16);
    run_layer(&b, DT_BF16_PATH_COUNT, spec, (struct dt_shape){4, 6, 6}, 2, DT_PRECISION_BF16);
    assert_string_equal(a.note, b.note);
    assert_memory_equal(a.y, b.y, a.nout * sizeof(float));
    assert_memory_equal(a.dx, b.dx, a.nin * sizeof(float));
    assert_memory_equal(a.m->grads, b.m->grads, a.m->nparams * sizeof(float));
    run_free(&a);
    run_free(&b);
}

/* A bf16 conv on path p gives the same bits (output, input gradient, weight and bias
 * gradients) on one, two and three threads. */
static void same_bits_any_team(enum dt_bf16_path p, struct dt_layer_spec spec, struct dt_shape in,
                               int batch)
{
    struct run r[3];
    for (int t = 0; t < 3; t++) {
        omp_set_num_threads(t + 1);
        run_layer(&r[t], p, spec, in, batch, DT_PRECISION_BF16);
        assert_non_null(strstr(r[t].note, dt_bf16_path_name(p)));
    }
    for (int t = 1; t < 3; t++) {
        assert_memory_equal(r[0].y, r[t].y, r[0].nout * sizeof(float));
        assert_memory_equal(r[0].dx, r[t].dx, r[0].nin * sizeof(float));
        assert_memory_equal(r[0].m->grads, r[t].m->grads, r[0].m->nparams * sizeof(float));
    }
    for (int t = 0; t < 3; t++)
        run_free(&r[t]);
}

/* Every tile conv mode gives the same bits whatever the team, on every tile path: the stem
 * mode (one sample per thread, the weight gradient summed in sample order) and the stride-1
 * and stride-2 tiles (the weight gradient's two parts, WGRAD_PARTS in nn/bf16_layers.c: two
 * threads take one each, one thread both, three split each part's chunks), with one sample (an
 * empty first part), an odd count and more samples than a part's chunk. */
static void test_tiles_same_bits_any_team(void **state)
{
    (void)state;
    struct dt_layer_spec stem = {.type = "conv2d", .out_channels = 16, .kernel = 3, .bias = true};
    /* 8 -> 12: under fp32 Winograd's rule, which avx512bf16 runs emulated (its weight
     * gradient sums per thread, as in fp32) */
    struct dt_layer_spec s1 = {
        .type = "conv2d", .out_channels = 12, .kernel = 3, .padding = 1, .bias = true};
    struct dt_layer_spec s2 = {
        .type = "conv2d", .out_channels = 16, .kernel = 3, .stride = 2, .padding = 1};
    int was = omp_get_max_threads();
    for (int p = 0; p < DT_BF16_PATH_COUNT; p++) {
        if (p == DT_BF16_REFERENCE || !path_or_skip((enum dt_bf16_path)p))
            continue;
        same_bits_any_team((enum dt_bf16_path)p, stem, (struct dt_shape){3, 10, 10}, 5);
        for (int b = 0; b < 3; b++) {
            int batch = (int[]){1, 5, 37}[b];
            same_bits_any_team((enum dt_bf16_path)p, s1, (struct dt_shape){8, 9, 10}, batch);
            same_bits_any_team((enum dt_bf16_path)p, s2, (struct dt_shape){6, 9, 8}, batch);
        }
    }
    omp_set_num_threads(was);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_every_path),
        cmocka_unit_test(test_conv_winograd_products),
        cmocka_unit_test(test_linear_every_path),
        cmocka_unit_test(test_emulated_rounds_x_again),
        cmocka_unit_test(test_fp32_unnamed_and_deterministic),
        cmocka_unit_test(test_tiles_same_bits_any_team),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* nn/kernels/fp32/conv_winograd: the three kernels against a naive double-precision reference and
 * against the direct kernels, with 1 and 2 threads; determinism; the pre-transformed filter; the 8-
 * and 16-lane builds giving the same bits; shape support; error paths.
 *
 * Tolerance: Winograd's transforms round differently from a direct sum (they scale terms by up
 * to 8 and back), so the bound is relative to the tensor, not to each element's terms: every
 * element must satisfy |got - ref| <= 1e-4 * max |ref| over that tensor. On these unit-scale
 * inputs the observed error is 1e-6..1e-5 of max |ref|, so the bound has a wide margin.
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
#include "nn/kernels/fp32/conv_winograd.h"
#include "nn/kernels/isa.h"
#include "util/bf16.h"
#include "util/err.h"
#include "tests/unit/conv_fixture.h"
#include "tests/unit/winograd_builds.h"
#include "util/rng.h"

#define REL_TOL 1e-4

/* want[i] = ref[i] * scale + add[i % period / every] (add may be NULL), ReLU'd if relu. */
struct expected {
    const double *ref;
    const float *add;
    size_t every, period;
    double offset;
    int relu;
};

static double want_at(const struct expected *e, size_t i)
{
    double v = e->ref[i] + e->offset;
    if (e->add)
        v += e->add[i % e->period / e->every];
    return e->relu && v < 0 ? 0 : v;
}

/* Checks got against the expectation with REL_TOL * max |want|; returns the error relative to
 * that maximum. */
static double expect_close(const char *what, const struct dt_conv_shape *s, const float *got,
                           const struct expected *e, size_t n)
{
    double scale = 0, err = 0;
    for (size_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(want_at(e, i)));
    scale = scale > 0 ? scale : 1;
    for (size_t i = 0; i < n; i++) {
        double want = want_at(e, i), d = fabs(got[i] - want);
        err = fmax(err, d / scale);
        if (!(d <= REL_TOL * scale))
            fail_msg("%s: c=%d k=%d h=%d w=%d pad=%d n=%d: element %zu is %.9g, expected %.9g "
                     "(tolerance %.3g)",
                     what, s->c, s->k, s->h, s->w, s->pad, s->n, i, got[i], want, REL_TOL * scale);
    }
    return err;
}

/* float results of another kernel as a reference */
static double *widen(const float *p, size_t n)
{
    double *d = malloc(sizeof(double) * n);
    assert_non_null(d);
    for (size_t i = 0; i < n; i++)
        d[i] = p[i];
    return d;
}

/* Runs the Winograd kernels with `threads` threads and checks them against the double
 * reference, and (stride 1) the forward and input gradient against the direct kernels too. */
static void check_kernels(struct tensors *t, int threads)
{
    const struct dt_conv_shape *s = &t->s;
    size_t nscratch = dt_conv_winograd_scratch_floats(s, threads);
    assert_true(nscratch > 0);
    float *scratch = malloc(sizeof(float) * nscratch);
    float *y = malloc(sizeof(float) * t->ny), *yd = malloc(sizeof(float) * t->ny);
    float *dw = malloc(sizeof(float) * t->nw);
    float *db = malloc(sizeof(float) * (size_t)s->k);
    float *dx = malloc(sizeof(float) * t->nx), *dxd = malloc(sizeof(float) * t->nx);
    size_t ndirect = dt_conv_direct_scratch_floats(s, 1);
    float *direct = malloc(sizeof(float) * ndirect);
    assert_true(scratch && y && yd && dw && db && dx && dxd && direct);
    size_t plane = (size_t)t->oh * t->ow;
    for (int relu = 0; relu <= 1; relu++)
        for (int bias = 0; bias <= 1; bias++) {
            const float *b = bias ? t->b : NULL;
            memset(y, 0xff, sizeof(float) * t->ny); /* NaN: every element must be written */
            assert_int_equal(
                dt_conv_winograd_forward(s, t->x, t->w, b, y, relu, scratch, nscratch, threads), 0);
            struct expected e = {t->y_ref, b, plane, (size_t)s->k * plane, 0.0, relu};
            expect_close("forward", s, y, &e, t->ny);
            if (s->stride != 1)
                continue;
            assert_int_equal(dt_conv_direct_forward(s, t->x, t->w, b, yd, relu, direct, ndirect, 1),
                             0);
            double *ydd = widen(yd, t->ny);
            struct expected ed = {ydd, NULL, 1, 1, 0.0, 0};
            expect_close("forward vs direct", s, y, &ed, t->ny);
            free(ydd);
        }
    for (size_t i = 0; i < t->nw; i++)
        dw[i] = 0.5f; /* the kernel accumulates */
    for (int k = 0; k < s->k; k++)
        db[k] = 0.5f;
    assert_int_equal(
        dt_conv_winograd_backward_weight(s, t->x, t->dy, dw, db, scratch, nscratch, threads), 0);
    struct expected ew = {t->dw_ref, NULL, 1, 1, 0.5, 0}, eb = {t->db_ref, NULL, 1, 1, 0.5, 0};
    expect_close("weight grad", s, dw, &ew, t->nw);
    expect_close("bias grad", s, db, &eb, (size_t)s->k);
    assert_int_equal(
        dt_conv_winograd_backward_weight(s, t->x, t->dy, dw, NULL, scratch, nscratch, threads), 0);
    struct expected ew2 = {t->dw_ref, NULL, 1, 1, 0.5, 0};
    for (size_t i = 0; i < t->nw; i++)
        dw[i] -= (float)t->dw_ref[i]; /* accumulated twice: subtract one reference */
    expect_close("weight grad, accumulated", s, dw, &ew2, t->nw);
    memset(dx, 0xff, sizeof(float) * t->nx); /* the kernel overwrites */
    assert_int_equal(
        dt_conv_winograd_backward_input(s, t->dy, t->w, dx, scratch, nscratch, threads), 0);
    struct expected ex = {t->dx_ref, NULL, 1, 1, 0.0, 0};
    expect_close("input grad", s, dx, &ex, t->nx);
    if (s->stride == 1) {
        assert_int_equal(dt_conv_direct_backward_input(s, t->dy, t->w, dxd, direct, ndirect, 1), 0);
        double *dxdd = widen(dxd, t->nx);
        struct expected exd = {dxdd, NULL, 1, 1, 0.0, 0};
        expect_close("input grad vs direct", s, dx, &exd, t->nx);
        free(dxdd);
    }
    free(scratch), free(y), free(yd), free(dw), free(db), free(dx), free(dxd), free(direct);
}

static const struct dt_conv_shape shapes[] = {
    /* n  c   h   w   k  kh kw s pad */
    {1, 16, 26, 26, 32, 3, 3, 1, 0}, /* ConvNet conv2 */
    {5, 16, 26, 26, 32, 3, 3, 1, 0}, /* ... batch 5 */
    {1, 32, 16, 16, 64, 3, 3, 1, 1}, /* CIFAR conv2 */
    {5, 3, 9, 11, 7, 3, 3, 1, 1},    /* odd sizes: partial tiles, channels < 16 */
    {1, 17, 7, 10, 33, 3, 3, 1, 0},  /* channels just past multiples of 16: 3 vectors of k */
    {2, 8, 5, 6, 8, 3, 3, 1, 1},     /* a single row of tiles */
    {1, 1, 3, 3, 1, 3, 3, 1, 0},     /* a single output pixel */
    {3, 20, 13, 5, 70, 3, 3, 1, 1},  /* 5 vectors of k: register blocks of 3 + 2 */
    {1, 40, 30, 30, 24, 3, 3, 1, 0}, /* 49 tiles in blocks of 22 */
    {5, 1, 28, 28, 16, 3, 3, 1, 0},  /* ConvNet conv1 */
    /* stride 2: the stride-1 grid, every other pixel kept */
    {2, 16, 32, 32, 32, 3, 3, 2, 1}, /* ResNet-20's stage-2 entry */
    {3, 32, 16, 16, 64, 3, 3, 2, 1}, /* ... stage 3 */
    {2, 5, 9, 7, 11, 3, 3, 2, 1},    /* odd sizes: the last grid row and column kept */
    {2, 6, 10, 9, 3, 3, 3, 2, 0},    /* pad 0, even and odd */
    {1, 2, 3, 3, 4, 3, 3, 2, 0},     /* a single output pixel */
};

static void test_kernels_match_reference(void **state)
{
    (void)state;
    if (!dt_conv_winograd_supported(&shapes[0]))
        skip();
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        assert_true(dt_conv_winograd_supported(&shapes[i]));
        struct tensors t = make_tensors(shapes[i], 2000 + i, false);
        check_kernels(&t, 1);
        check_kernels(&t, 2);
        free_tensors(&t);
    }
}

static void test_results_are_deterministic(void **state)
{
    (void)state;
    struct dt_conv_shape s = {5, 16, 12, 12, 32, 3, 3, 1, 1};
    if (!dt_conv_winograd_supported(&s))
        skip();
    struct tensors t = make_tensors(s, 7, false);
    size_t nscratch = dt_conv_winograd_scratch_floats(&s, 2);
    float *scratch = malloc(sizeof(float) * nscratch);
    float *u = malloc(sizeof(float) * dt_conv_winograd_filter_floats(&s));
    float *out[2][4];
    for (int run = 0; run < 2; run++) {
        out[run][0] = calloc(t.ny, sizeof(float));
        out[run][1] = calloc(t.nw + (size_t)s.k, sizeof(float));
        out[run][2] = calloc(t.nx, sizeof(float));
        out[run][3] = calloc(t.ny, sizeof(float));
        assert_int_equal(
            dt_conv_winograd_forward(&s, t.x, t.w, t.b, out[run][0], 1, scratch, nscratch, 2), 0);
        assert_int_equal(dt_conv_winograd_backward_weight(&s, t.x, t.dy, out[run][1],
                                                          out[run][1] + t.nw, scratch, nscratch, 2),
                         0);
        assert_int_equal(
            dt_conv_winograd_backward_input(&s, t.dy, t.w, out[run][2], scratch, nscratch, 2), 0);
        /* a filter transformed once, the batch in two calls of one thread each */
        assert_int_equal(dt_conv_winograd_filter(&s, t.w, u), 0);
        struct dt_conv_shape part = s;
        part.n = 2;
        assert_int_equal(dt_conv_winograd_forward_filtered(&part, t.x, u, t.b, out[run][3], 1,
                                                           scratch, nscratch, 1),
                         0);
        part.n = 3;
        assert_int_equal(dt_conv_winograd_forward_filtered(
                             &part, t.x + 2 * (size_t)s.c * s.h * s.w, u, t.b,
                             out[run][3] + 2 * (size_t)s.k * t.oh * t.ow, 1, scratch, nscratch, 1),
                         0);
    }
    assert_memory_equal(out[0][0], out[1][0], sizeof(float) * t.ny);
    assert_memory_equal(out[0][1], out[1][1], sizeof(float) * (t.nw + (size_t)s.k));
    assert_memory_equal(out[0][2], out[1][2], sizeof(float) * t.nx);
    /* per-sample arithmetic: chunking and thread count do not change the forward's bits */
    assert_memory_equal(out[0][0], out[0][3], sizeof(float) * t.ny);
    for (int run = 0; run < 2; run++)
        for (int i = 0; i < 4; i++)
            free(out[run][i]);
    free(scratch), free(u);
    free_tensors(&t);
}

/* forward_pool2 against the forward followed by a scalar 2x2 max-pool with the maxpool layer's
 * rule (first maximum in window order): values and indices identical. With ReLU, zeros tie. */
static void test_pooled_forward_matches_unpooled(void **state)
{
    (void)state;
    static const struct dt_conv_shape cases[] = {
        {3, 16, 26, 26, 32, 3, 3, 1, 0}, /* the ConvNet's conv2 */
        {2, 9, 11, 8, 20, 3, 3, 1, 1},   /* odd output rows: the last is dropped */
        {1, 3, 5, 6, 5, 3, 3, 1, 0},     /* 3x4 output: one row dropped */
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        struct dt_conv_shape s = cases[ci];
        if (!dt_conv_winograd_supported(&s))
            skip();
        struct tensors t = make_tensors(s, 300 + ci, false);
        int ph = t.oh / 2, pw = t.ow / 2;
        size_t np = (size_t)s.n * s.k * ph * pw;
        size_t nscratch = dt_conv_winograd_scratch_floats(&s, 2);
        float *scratch = malloc(sizeof(float) * nscratch);
        float *u = malloc(sizeof(float) * dt_conv_winograd_filter_floats(&s));
        float *y = malloc(sizeof(float) * t.ny), *py = malloc(sizeof(float) * np);
        int32_t *idx = malloc(sizeof(int32_t) * np);
        assert_int_equal(dt_conv_winograd_filter(&s, t.w, u), 0);
        for (int relu = 0; relu <= 1; relu++) {
            assert_int_equal(
                dt_conv_winograd_forward_filtered(&s, t.x, u, t.b, y, relu, scratch, nscratch, 2),
                0);
            memset(py, 0xff, sizeof(float) * np);
            memset(idx, 0xff, sizeof(int32_t) * np);
            assert_int_equal(dt_conv_winograd_forward_pool2(&s, t.x, u, t.b, py, idx, relu, scratch,
                                                            nscratch, 2),
                             0);
            for (size_t o = 0; o < np; o++) {
                size_t plane = o / ((size_t)ph * pw);
                int oy = (int)(o % ((size_t)ph * pw)) / pw, ox = (int)(o % pw);
                const float *yp = y + plane * t.oh * t.ow;
                int best = 2 * oy * t.ow + 2 * ox;
                int cand[3] = {best + 1, best + t.ow, best + t.ow + 1};
                for (int i = 0; i < 3; i++)
                    if (yp[cand[i]] > yp[best])
                        best = cand[i];
                assert_int_equal(idx[o], best);
                assert_memory_equal(&py[o], &yp[best], sizeof(float));
            }
        }
        free(scratch), free(u), free(y), free(py), free(idx);
        free_tensors(&t);
    }
}

/* A batch's weight gradient sums thousands of tiles: against the direct kernels (whose own error
 * is ~1e-5 of the largest magnitude) at batch 96 of the ConvNet's conv2, 1 and 2 threads. */
static void test_large_batch_weight_gradient(void **state)
{
    (void)state;
    struct dt_conv_shape s = {96, 16, 26, 26, 32, 3, 3, 1, 0};
    if (!dt_conv_winograd_supported(&s))
        skip();
    struct dt_rng rng;
    dt_rng_init(&rng, 77);
    size_t nx = (size_t)s.n * s.c * s.h * s.w, ny = (size_t)s.n * s.k * 24 * 24, nw = 32 * 16 * 9;
    float *x = random_floats(&rng, nx), *dy = random_floats(&rng, ny);
    for (size_t i = 0; i < nx; i++) /* post-ReLU activations: non-negative */
        x[i] = fabsf(x[i]);
    float dw[2][32 * 16 * 9], db[2][32];
    size_t nd = dt_conv_direct_scratch_floats(&s, 2), nwi = dt_conv_winograd_scratch_floats(&s, 2);
    float *sd = malloc(sizeof(float) * nd), *sw = malloc(sizeof(float) * nwi);
    for (int threads = 1; threads <= 2; threads++) {
        memset(dw, 0, sizeof dw), memset(db, 0, sizeof db);
        assert_int_equal(dt_conv_direct_backward_weight(&s, x, dy, dw[0], db[0], sd, nd, threads),
                         0);
        assert_int_equal(
            dt_conv_winograd_backward_weight(&s, x, dy, dw[1], db[1], sw, nwi, threads), 0);
        double *ref = widen(dw[0], nw), *bref = widen(db[0], 32);
        struct expected e = {ref, NULL, 1, 1, 0.0, 0}, eb = {bref, NULL, 1, 1, 0.0, 0};
        expect_close("weight grad, batch 96", &s, dw[1], &e, nw);
        expect_close("bias grad, batch 96", &s, db[1], &eb, 32);
        free(ref), free(bref);
    }
    free(x), free(dy), free(sd), free(sw);
}

/* All four kernels' outputs for one shape, with the path in use (2 threads). */
struct outputs {
    float *y, *py, *dw, *dx;
    int32_t *idx;
};

static struct outputs run_all(const struct tensors *t)
{
    const struct dt_conv_shape *s = &t->s;
    size_t np = (size_t)s->n * s->k * (t->oh / 2) * (t->ow / 2);
    size_t nscratch = dt_conv_winograd_scratch_floats(s, 2);
    float *scratch = malloc(sizeof(float) * nscratch);
    float *u = malloc(sizeof(float) * dt_conv_winograd_filter_floats(s));
    struct outputs o = {malloc(sizeof(float) * t->ny), calloc(np, sizeof(float)),
                        calloc(t->nw + (size_t)s->k, sizeof(float)), malloc(sizeof(float) * t->nx),
                        calloc(np, sizeof(int32_t))};
    assert_true(scratch && u && o.y && o.py && o.dw && o.dx && o.idx);
    assert_int_equal(dt_conv_winograd_forward(s, t->x, t->w, t->b, o.y, 1, scratch, nscratch, 2),
                     0);
    assert_int_equal(dt_conv_winograd_filter(s, t->w, u), 0);
    int rc = dt_conv_winograd_forward_pool2(s, t->x, u, t->b, o.py, o.idx, 0, scratch, nscratch, 2);
    assert_int_equal(rc, s->stride == 1 ? 0 : -DT_EUSAGE); /* pools only at stride 1 */
    assert_int_equal(dt_conv_winograd_backward(s, t->x, t->dy, NULL, t->w, o.dw, o.dw + t->nw, o.dx,
                                               false, NULL, scratch, nscratch, 2),
                     0);
    free(scratch), free(u);
    return o;
}

/* The AVX2 build (8 lanes) against the AVX-512 one (16), and the avx512bf16 one (the AVX-512
 * kernels plus VDPBF16PS, which the avx512bf16 and amx paths run) where the CPU has it: same
 * layout, same order of every sum, so every output is bit-identical, whichever path a machine
 * takes. Needs a CPU with AVX-512 and AVX2. */
static void test_widths_give_same_bits(void **state)
{
    (void)state;
    static const struct dt_conv_shape cases[] = {
        {3, 16, 26, 26, 32, 3, 3, 1, 0}, /* the ConvNet's conv2 */
        {3, 20, 13, 6, 70, 3, 3, 1, 1},  /* partial tiles and vectors, 3 register blocks of k */
        {2, 3, 9, 11, 7, 3, 3, 1, 1},    /* channels < 8: the second half-vector all padding */
        {2, 16, 15, 16, 32, 3, 3, 2, 1}, /* stride 2 */
    };
    if (!dt_isa_available(DT_ISA_AVX512) || !dt_isa_available(DT_ISA_AVX2))
        skip();
    enum dt_isa was = dt_isa_get(), isas[] = {DT_ISA_AVX512, DT_ISA_AVX2, DT_ISA_AVX512BF16};
    int builds = dt_isa_available(DT_ISA_AVX512BF16) ? 3 : 2;
    char err[160];
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        struct tensors t = make_tensors(cases[ci], 900 + ci, false);
        const struct dt_conv_shape *s = &t.s;
        size_t np = (size_t)s->n * s->k * (t.oh / 2) * (t.ow / 2);
        struct outputs o[3];
        for (int i = 0; i < builds; i++) {
            assert_int_equal(dt_isa_set(isas[i], err, sizeof err), 0);
            assert_true(dt_conv_winograd_supported(s));
            o[i] = run_all(&t);
        }
        for (int i = 1; i < builds; i++) {
            assert_memory_equal(o[0].y, o[i].y, sizeof(float) * t.ny);
            assert_memory_equal(o[0].py, o[i].py, sizeof(float) * np);
            assert_memory_equal(o[0].idx, o[i].idx, sizeof(int32_t) * np);
            assert_memory_equal(o[0].dw, o[i].dw, sizeof(float) * (t.nw + (size_t)s->k));
            assert_memory_equal(o[0].dx, o[i].dx, sizeof(float) * t.nx);
        }
        for (int i = 0; i < builds; i++)
            free(o[i].y), free(o[i].py), free(o[i].dw), free(o[i].dx), free(o[i].idx);
        free_tensors(&t);
    }
    assert_int_equal(dt_isa_set(was, err, sizeof err), 0);
}

/* relu_below: dx written as a relu's backward would write it after, the same bits: (dx +
 * extra) where x > 0, else 0 (0 at x = 0, NaN not > 0); the weight gradient is unchanged.
 * Shapes with one sample's tiles in several blocks, several samples in one block (8x8 planes)
 * and stride 2, at 1 and 2 threads, on the path in use. */
static void check_relu_below(void)
{
    static const struct dt_conv_shape cases[] = {
        {3, 16, 32, 32, 16, 3, 3, 1, 1}, /* ResNet-20 stage 1: a sample in two blocks */
        {7, 64, 8, 8, 64, 3, 3, 1, 1},   /* stage 3: three samples a block, a partial group */
        {2, 20, 13, 6, 24, 3, 3, 1, 1},  /* partial tiles and channel vectors */
        {2, 16, 15, 16, 32, 3, 3, 2, 1}, /* stride 2 */
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        assert_true(dt_conv_winograd_supported(&cases[ci]));
        struct tensors t = make_tensors(cases[ci], 1300 + ci, false);
        const struct dt_conv_shape *s = &t.s;
        for (size_t i = 0; i < t.nx; i += 7) /* a relu's output has zeros; NaN is not > 0 */
            t.x[i] = i % 5 ? 0.0f : NAN;
        size_t nscratch = dt_conv_winograd_scratch_floats(s, 2), ng = t.nw + (size_t)s->k;
        float *scratch = malloc(sizeof(float) * nscratch);
        float *dw[2] = {calloc(ng, sizeof(float)), calloc(ng, sizeof(float))};
        float *dx[2] = {malloc(sizeof(float) * t.nx), malloc(sizeof(float) * t.nx)};
        float *extra = malloc(sizeof(float) * t.nx);
        assert_true(scratch && dw[0] && dw[1] && dx[0] && dx[1] && extra);
        for (size_t i = 0; i < t.nx; i++)
            extra[i] = t.dy[i % (t.ny - 1)] * 0.37f;
        for (int run = 0; run < 4; run++) { /* threads 1, 2; without extra, with */
            int threads = 1 + run % 2;
            const float *add = run >= 2 ? extra : NULL;
            for (int masked = 0; masked <= 1; masked++) {
                memset(dw[masked], 0, sizeof(float) * ng);
                assert_int_equal(dt_conv_winograd_backward(s, t.x, t.dy, NULL, t.w, dw[masked],
                                                           dw[masked] + t.nw, dx[masked], masked,
                                                           add, scratch, nscratch, threads),
                                 0);
            }
            size_t zeroed = 0;
            for (size_t i = 0; i < t.nx; i++) {
                float d = add ? dx[0][i] + add[i] : dx[0][i], want = t.x[i] > 0.0f ? d : 0.0f;
                zeroed += !(t.x[i] > 0.0f);
                assert_memory_equal(&dx[1][i], &want, sizeof want);
            }
            assert_true(zeroed > t.nx / 4 && zeroed < t.nx); /* the mask did something */
            assert_memory_equal(dw[0], dw[1], sizeof(float) * ng);
        }
        /* the mask is x: without it (no weight gradient given) the call is refused */
        assert_int_equal(dt_conv_winograd_backward(s, NULL, t.dy, NULL, t.w, NULL, NULL, dx[1],
                                                   true, NULL, scratch, nscratch, 1),
                         -DT_EUSAGE);
        assert_non_null(strstr(dt_last_error(), "relu_below needs x"));
        free(scratch), free(dw[0]), free(dw[1]), free(dx[0]), free(dx[1]), free(extra);
        free_tensors(&t);
    }
}

/* bn: dy read through a batchnorm's backward (struct dt_bn_grad) gives the same bits as the
 * batchnorm's input gradient computed first (nn/kernels/fp32/batchnorm.isa.c's order of operations)
 * and passed as dy: weight, bias and input gradients, alone and with relu_below and an extra
 * gradient (a ResNet conv takes all three), at 1 and 2 threads, on the relu_below shapes. */
/* A batchnorm below the conv's output: its input bx, its factors, and dyc, its input gradient
 * for the output gradient t->dy computed first (the conv's dy then), in
 * nn/kernels/fp32/batchnorm.isa.c's order of operations. */
struct bn_case {
    struct dt_bn_grad bn;
    float *bx, *f[5], *dyc;
};

static struct bn_case make_bn_case(const struct tensors *t, struct dt_rng *rng)
{
    struct bn_case b;
    size_t plane = (size_t)t->oh * t->ow, nk = (size_t)t->s.k;
    b.bx = random_floats(rng, t->ny);
    for (int j = 0; j < 5; j++)
        b.f[j] = random_floats(rng, nk);
    for (size_t c = 0; c < nk; c++)
        b.f[1][c] = 0.5f + b.f[1][c] * b.f[1][c] * 3.0f; /* invstd > 0 */
    b.bn = (struct dt_bn_grad){.x = b.bx,
                               .mean = b.f[0],
                               .invstd = b.f[1],
                               .k = b.f[2],
                               .mean_dy = b.f[3],
                               .mean_dy_xhat = b.f[4]};
    b.dyc = malloc(sizeof(float) * t->ny);
    assert_non_null(b.dyc);
    for (size_t i = 0; i < t->ny; i++) {
        size_t c = i / plane % nk;
        float xhat = (b.bx[i] - b.bn.mean[c]) * b.bn.invstd[c];
        b.dyc[i] = b.bn.k[c] * (t->dy[i] - b.bn.mean_dy[c] - xhat * b.bn.mean_dy_xhat[c]);
    }
    return b;
}

static void free_bn_case(struct bn_case *b)
{
    free(b->bx), free(b->dyc);
    for (int j = 0; j < 5; j++)
        free(b->f[j]);
}

/* The relu_below shapes the bn and bf16 checks run on. */
static const struct dt_conv_shape resnet_cases[] = {
    {3, 16, 32, 32, 16, 3, 3, 1, 1}, /* ResNet-20 stage 1: a sample in two blocks */
    {7, 64, 8, 8, 64, 3, 3, 1, 1},   /* stage 3: three samples a block, a partial group */
    {2, 20, 13, 6, 24, 3, 3, 1, 1},  /* partial tiles and channel vectors */
    {2, 16, 15, 16, 32, 3, 3, 2, 1}, /* stride 2: dy spread onto the stride-1 grid */
};

static void check_bn_grad(void)
{
    for (size_t ci = 0; ci < sizeof resnet_cases / sizeof resnet_cases[0]; ci++) {
        struct tensors t = make_tensors(resnet_cases[ci], 1700 + ci, false);
        const struct dt_conv_shape *s = &t.s;
        size_t nk = (size_t)s->k;
        struct dt_rng rng;
        dt_rng_init(&rng, 77 + ci);
        struct bn_case b = make_bn_case(&t, &rng);
        size_t nscratch = dt_conv_winograd_scratch_floats(s, 2), ng = t.nw + nk;
        float *scratch = malloc(sizeof(float) * nscratch), *extra = random_floats(&rng, t.nx);
        float *dw[2] = {malloc(sizeof(float) * ng), malloc(sizeof(float) * ng)};
        float *dx[2] = {malloc(sizeof(float) * t.nx), malloc(sizeof(float) * t.nx)};
        assert_true(scratch && dw[0] && dw[1] && dx[0] && dx[1]);
        for (int run = 0; run < 4; run++) { /* threads 1, 2; alone, with relu_below + extra */
            int threads = 1 + run % 2;
            bool relu = run >= 2;
            for (int fused = 0; fused <= 1; fused++) {
                memset(dw[fused], 0, sizeof(float) * ng);
                assert_int_equal(
                    dt_conv_winograd_backward(s, t.x, fused ? t.dy : b.dyc, fused ? &b.bn : NULL,
                                              t.w, dw[fused], dw[fused] + t.nw, dx[fused], relu,
                                              relu ? extra : NULL, scratch, nscratch, threads),
                    0);
            }
            assert_memory_equal(dw[0], dw[1], sizeof(float) * ng);
            assert_memory_equal(dx[0], dx[1], sizeof(float) * t.nx);
        }
        free(scratch), free(extra);
        free_bn_case(&b);
        for (int i = 0; i < 2; i++)
            free(dw[i]), free(dx[i]);
        free_tensors(&t);
    }
}

/* The _bf16 entry points give the bits of rounding in passes of their own around the fp32
 * calls (the emulated bf16 mode's arithmetic): forward and pooled forward on x rounded; the
 * backward on x rounded and the batchnorm's input gradient rounded, its input gradient rounded
 * before extra is added and the relu's mask (x unrounded) applied. x holds bf16 ties, which
 * round to even both ways, values that round up and a signalling NaN. The same with x stored
 * as bf16 (x_bf16: the rounded values, their own mask). */
static void check_bf16_entry_points(void)
{
    for (size_t ci = 0; ci < sizeof resnet_cases / sizeof resnet_cases[0]; ci++) {
        struct tensors t = make_tensors(resnet_cases[ci], 1800 + ci, false);
        const struct dt_conv_shape *s = &t.s;
        size_t nk = (size_t)s->k, ng = t.nw + nk;
        struct dt_rng rng;
        dt_rng_init(&rng, 88 + ci);
        for (size_t i = 0; i < t.nx; i += 7) /* ties: 1 + 2^-8 down to 1, 1 + 3 * 2^-8 up */
            t.x[i] = i % 2 ? 1.0f + 1.0f / 256 : 1.0f + 3.0f / 256;
        if (ci == 0) { /* a signalling NaN: a quiet NaN rounded, not the infinity of a carry */
            uint32_t snan = 0x7f800001u;
            memcpy(&t.x[5], &snan, sizeof snan);
        }
        struct bn_case b = make_bn_case(&t, &rng);
        float *xr = malloc(sizeof(float) * t.nx), *dyr = malloc(sizeof(float) * t.ny);
        float *extra = random_floats(&rng, t.nx);
        assert_true(xr && dyr);
        dt_bf16_round_n(t.x, xr, t.nx);
        dt_bf16 *xb = malloc(sizeof(dt_bf16) * t.nx);
        assert_non_null(xb);
        dt_bf16_from_f32_n(t.x, xb, t.nx);
        dt_bf16_round_n(t.w, t.w, t.nw); /* the layer's weights: rounded by the layer */
        dt_bf16_round_n(b.dyc, dyr, t.ny);
        size_t nscratch = dt_conv_winograd_scratch_floats(s, 2);
        size_t nu = dt_conv_winograd_filter_floats(s), npool = t.ny / 4;
        float *scratch = malloc(sizeof(float) * nscratch), *u = malloc(sizeof(float) * nu);
        float *y[2] = {malloc(sizeof(float) * t.ny), malloc(sizeof(float) * t.ny)};
        int32_t *arg[2] = {malloc(sizeof(int32_t) * npool), malloc(sizeof(int32_t) * npool)};
        float *dw[2] = {malloc(sizeof(float) * ng), malloc(sizeof(float) * ng)};
        float *dx[2] = {malloc(sizeof(float) * t.nx), malloc(sizeof(float) * t.nx)};
        assert_true(scratch && u && y[0] && y[1] && arg[0] && arg[1] && dw[0] && dw[1]);
        assert_true(dx[0] && dx[1]);
        assert_int_equal(dt_conv_winograd_filter(s, t.w, u), 0);
        /* threads 1, 2; alone, with relu + extra; x as fp32, as bf16 */
        for (int run = 0; run < 8; run++) {
            int threads = 1 + run % 2;
            bool relu = run % 4 >= 2, stored = run >= 4;
            const void *x = stored ? (const void *)xb : (const void *)t.x;
            const float *mask = stored ? xr : t.x;
            assert_int_equal(dt_conv_winograd_forward_filtered(s, xr, u, t.b, y[0], relu, scratch,
                                                               nscratch, threads),
                             0);
            assert_int_equal(dt_conv_winograd_forward_bf16(s, x, stored, false, u, t.b, y[1], NULL,
                                                           relu, scratch, nscratch, threads),
                             0);
            assert_memory_equal(y[0], y[1], sizeof(float) * t.ny);
            if (s->stride == 1) {
                assert_int_equal(dt_conv_winograd_forward_pool2(s, xr, u, t.b, y[0], arg[0], relu,
                                                                scratch, nscratch, threads),
                                 0);
                assert_int_equal(dt_conv_winograd_forward_bf16(s, x, stored, false, u, t.b, y[1],
                                                               arg[1], relu, scratch, nscratch,
                                                               threads),
                                 0);
                size_t pooled = (size_t)s->n * s->k * (t.oh / 2) * (t.ow / 2);
                assert_memory_equal(y[0], y[1], sizeof(float) * pooled);
                assert_memory_equal(arg[0], arg[1], sizeof(int32_t) * pooled);
            }
            memset(dw[0], 0, sizeof(float) * ng), memset(dw[1], 0, sizeof(float) * ng);
            assert_int_equal(dt_conv_winograd_backward(s, xr, dyr, NULL, t.w, dw[0], dw[0] + t.nw,
                                                       dx[0], false, NULL, scratch, nscratch,
                                                       threads),
                             0);
            for (size_t i = 0; i < t.nx; i++) {
                float v = dt_bf16_round(dx[0][i]);
                dx[0][i] = !relu ? v : mask[i] > 0 ? v + extra[i] : 0.0f;
            }
            assert_int_equal(dt_conv_winograd_backward_bf16(
                                 s, x, stored, false, t.dy, &b.bn, t.w, dw[1], dw[1] + t.nw, dx[1],
                                 relu, relu ? extra : NULL, scratch, nscratch, threads),
                             0);
            assert_memory_equal(dw[0], dw[1], sizeof(float) * ng);
            assert_memory_equal(dx[0], dx[1], sizeof(float) * t.nx);
        }
        free(scratch), free(u), free(extra), free(xr), free(xb), free(dyr);
        free_bn_case(&b);
        for (int i = 0; i < 2; i++)
            free(y[i]), free(arg[i]), free(dw[i]), free(dx[i]);
        free_tensors(&t);
    }
}

/* check_relu_below on each build (the mask is a per-width vector operation). */
static void test_relu_below_masks_dx(void **state)
{
    (void)state;
    on_each_build(check_relu_below);
}

/* check_bn_grad on each build (the batchnorm's arithmetic is per-width vector code). */
static void test_bn_grad_matches_batchnorm_pass(void **state)
{
    (void)state;
    on_each_build(check_bn_grad);
}

/* check_bf16_entry_points on each build (the rounding is per-width vector code). */
static void test_bf16_entry_points_round_as_passes(void **state)
{
    (void)state;
    on_each_build(check_bf16_entry_points);
}

static void test_supported_shapes(void **state)
{
    (void)state;
    static const struct dt_conv_shape no[] = {
        {1, 16, 8, 8, 16, 3, 3, 3, 0},              /* stride 3 */
        {1, 16, 8, 8, 16, 3, 3, 1, 2},              /* pad 2 */
        {1, 16, 8, 8, 16, 5, 5, 1, 0},              /* 5x5 */
        {1, 16, 8, 8, 16, 3, 1, 1, 0},              /* 3x1 */
        {1, 16, 2, 8, 16, 3, 3, 1, 0},              /* empty output */
        {0, 16, 8, 8, 16, 3, 3, 1, 0},              /* no samples */
        {1, 0, 8, 8, 16, 3, 3, 1, 0},               /* no channels */
        {1, 16, 8, 8, 0, 3, 3, 1, 0},               /* no output channels */
        {1 << 16, 1 << 10, 64, 64, 16, 3, 3, 1, 0}, /* input beyond int indexing */
    };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        assert_false(dt_conv_winograd_supported(&no[i]));
        assert_false(dt_conv_winograd_preferred(&no[i]));
        assert_int_equal(dt_conv_winograd_scratch_floats(&no[i], 1), 0);
        assert_int_equal(dt_conv_winograd_filter_floats(&no[i]), 0);
    }
    assert_false(dt_conv_winograd_supported(NULL));
    struct dt_conv_shape ok = {1, 16, 26, 26, 32, 3, 3, 1, 0};
    if (!dt_conv_winograd_supported(&ok))
        skip();
    assert_true(dt_conv_winograd_preferred(&ok));
    /* with AVX-512 few channels stay on the direct kernels; with AVX2 only (rival: sgemm)
     * everything but a tiny C x K takes Winograd */
    bool avx512 = dt_conv_simd_lanes() == 16;
    struct dt_conv_shape few[] = {
        {1, 1, 28, 28, 16, 3, 3, 1, 0}, {1, 8, 8, 8, 8, 3, 3, 1, 1}, {1, 4, 8, 8, 64, 3, 3, 1, 1}};
    for (size_t i = 0; i < sizeof few / sizeof few[0]; i++) {
        assert_true(dt_conv_winograd_supported(&few[i]));
        assert_int_equal(dt_conv_winograd_preferred(&few[i]), !avx512);
    }
    struct dt_conv_shape tiny = {1, 3, 8, 8, 5, 3, 3, 1, 1};
    assert_true(dt_conv_winograd_supported(&tiny));
    assert_false(dt_conv_winograd_preferred(&tiny));
    struct dt_conv_shape enough = {1, 8, 8, 8, 16, 3, 3, 1, 1};
    assert_true(dt_conv_winograd_preferred(&enough));
    assert_int_equal(dt_conv_winograd_scratch_floats(&ok, 0), 0);
    assert_true(dt_conv_winograd_scratch_floats(&ok, 2) > dt_conv_winograd_scratch_floats(&ok, 1));
    /* the switch that turns the direct kernels' vector paths off turns Winograd off too */
    bool was = dt_conv_direct_allow_simd(false);
    assert_false(dt_conv_winograd_supported(&ok));
    dt_conv_direct_allow_simd(was);
}

static void test_bad_calls_fail_with_message(void **state)
{
    (void)state;
    struct dt_conv_shape s = {1, 2, 6, 6, 16, 3, 3, 1, 1};
    if (!dt_conv_winograd_supported(&s))
        skip();
    size_t need = dt_conv_winograd_scratch_floats(&s, 1);
    float *scratch = calloc(need, sizeof(float));
    float x[72] = {0}, w[288] = {0}, y[576], dx[72];
    assert_int_equal(dt_conv_winograd_forward(&s, x, w, NULL, y, 0, scratch, need - 1, 1),
                     -DT_EUSAGE);
    assert_non_null(strstr(dt_last_error(), "conv_winograd forward: scratch has"));
    assert_int_equal(dt_conv_winograd_backward_input(&s, y, w, dx, scratch, need, 0), -DT_EUSAGE);
    assert_string_equal(dt_last_error(),
                        "conv_winograd backward_input: threads must be >= 1, got 0");
    s.pad = 2;
    assert_int_equal(dt_conv_winograd_backward_weight(&s, x, y, w, NULL, scratch, need, 1),
                     -DT_EUSAGE);
    assert_non_null(strstr(dt_last_error(), "conv_winograd backward_weight: unsupported shape"));
    assert_non_null(strstr(dt_last_error(), "pad=2"));
    assert_int_equal(dt_conv_winograd_filter(&s, w, scratch), -DT_EUSAGE);
    assert_int_equal(dt_conv_winograd_forward(NULL, x, w, NULL, y, 0, scratch, need, 1),
                     -DT_EUSAGE);
    free(scratch);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernels_match_reference),
        cmocka_unit_test(test_results_are_deterministic),
        cmocka_unit_test(test_pooled_forward_matches_unpooled),
        cmocka_unit_test(test_large_batch_weight_gradient),
        cmocka_unit_test(test_widths_give_same_bits),
        cmocka_unit_test(test_relu_below_masks_dx),
        cmocka_unit_test(test_bn_grad_matches_batchnorm_pass),
        cmocka_unit_test(test_bf16_entry_points_round_as_passes),
        cmocka_unit_test(test_supported_shapes),
        cmocka_unit_test(test_bad_calls_fail_with_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

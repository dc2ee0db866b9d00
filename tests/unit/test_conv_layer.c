/* nn/: the conv2d layer's three algorithms and the model's fusions.
 *
 *  - algorithms: conv2d layers forced onto the direct kernels, onto Winograd and onto im2col +
 *    sgemm (same seed, so the same weights) give the same output, input gradient, weight and
 *    bias gradients within float rounding (relative to the largest magnitude of the tensor:
 *    1e-5 for direct, 1e-4 for Winograd, whose transforms round more); the automatic choice is
 *    a static rule on the shape (stride 2 always takes GEMM, 3x3 with enough channels
 *    Winograd), and the layer's `algo` key picks an algorithm, with fallbacks.
 *  - fusion: a model built with fusion (conv2d+relu, conv2d+relu+maxpool2d) and the same model
 *    built without it compute the SAME BITS: output, loss and every parameter gradient, in
 *    training and eval, for batches that span several of the fused forward's chunks, with 1
 *    and 2 threads, for the 2x2 pool and a padded 3x3 stride-2 pool.
 *  - the backward stop below the first layer with parameters (no input gradient for layer 0
 *    or anything below it) is covered by test_gradcheck's pool-first model and here by the
 *    fused/unfused comparison of a model whose first layer is a pool.
 *  - determinism: the same model stepped twice on the same batch gives the same bits.
 *  - the 2x2 max-pool's backward on an odd-sized plane.
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
#include "nn/layers.h"
#include "nn/model.h"
#include "model_run.h"
#include "nn_specs.h"
#include "util/rng.h"

static void fill(float *p, size_t n, uint64_t seed)
{
    struct dt_rng rng;
    dt_rng_init(&rng, dt_rng_key(seed, DT_RNG_TEST, 7, 0));
    for (size_t i = 0; i < n; i++)
        p[i] = 2.0f * dt_rng_uniform(&rng) - 1.0f;
}

/* max |a - b| <= tol * max(max |b|, 1e-3) */
static void expect_close(const float *a, const float *b, size_t n, double tol, const char *what)
{
    double err = 0, mag = 1e-3;
    for (size_t i = 0; i < n; i++) {
        err = fmax(err, fabs((double)a[i] - b[i]));
        mag = fmax(mag, fabs((double)b[i]));
    }
    if (!(err <= tol * mag))
        fail_msg("%s: max difference %.3e, largest value %.3e", what, err, mag);
}

/* One conv2d layer built with `algo`: forward and backward on fixed x and dy. */
struct conv_run {
    struct dt_model *m;
    float *y, *dx, *grads;
    enum dt_conv2d_algo used;
};

static struct conv_run run_conv(struct dt_layer_spec spec, struct dt_shape in, int batch,
                                enum dt_conv2d_algo algo, const float *x, const float *dy)
{
    struct conv_run r;
    enum dt_conv2d_algo was = dt_conv2d_force_algo(algo);
    assert_int_equal(dt_model_build(&r.m, &spec, 1, in, batch, DT_LOSS_NLL, 5), 0);
    dt_conv2d_force_algo(was);
    struct dt_layer *l = r.m->layers[0];
    r.used = dt_conv2d_algo_of(l);
    size_t nin = (size_t)batch * in.c * in.h * in.w;
    size_t nout = (size_t)batch * l->out.c * l->out.h * l->out.w;
    r.y = malloc(nout * sizeof(float));
    r.dx = malloc(nin * sizeof(float));
    r.grads = malloc(l->nparams * sizeof(float));
    struct dt_layer_fwd fwd = {.run = {.training = true}};
    struct dt_layer_bwd alone = {0};
    l->kind->ops->forward(l, x, r.y, batch, &fwd);
    for (size_t i = 0; i < l->nparams; i++) /* backward must overwrite, not accumulate */
        l->grads[i] = 123.0f;
    l->kind->ops->backward(l, x, r.y, dy, r.dx, batch, &alone);
    memcpy(r.grads, l->grads, l->nparams * sizeof(float));
    return r;
}

static void free_run(struct conv_run *r)
{
    free(r->y);
    free(r->dx);
    free(r->grads);
    dt_model_free(r->m);
}

static void compare_algos(struct dt_layer_spec spec, struct dt_shape in, int batch)
{
    struct dt_model *probe;
    assert_int_equal(dt_model_build(&probe, &spec, 1, in, batch, DT_LOSS_NLL, 5), 0);
    struct dt_shape out = probe->layers[0]->out;
    size_t nparams = probe->nparams;
    dt_model_free(probe);
    size_t nin = (size_t)batch * in.c * in.h * in.w;
    size_t nout = (size_t)batch * out.c * out.h * out.w;
    float *x = malloc(nin * sizeof(float)), *dy = malloc(nout * sizeof(float));
    fill(x, nin, 1);
    fill(dy, nout, 2);
    struct conv_run g = run_conv(spec, in, batch, DT_CONV2D_GEMM, x, dy);
    struct conv_run d = run_conv(spec, in, batch, DT_CONV2D_DIRECT, x, dy);
    struct conv_run w = run_conv(spec, in, batch, DT_CONV2D_WINOGRAD, x, dy);
    assert_int_equal(g.used, DT_CONV2D_GEMM);
    struct dt_conv_shape s = {batch,
                              in.c,
                              in.h,
                              in.w,
                              spec.out_channels,
                              spec.kernel,
                              spec.kernel,
                              spec.stride ? spec.stride : 1,
                              spec.padding};
    assert_int_equal(d.used, dt_conv_direct_supported(&s) ? DT_CONV2D_DIRECT : DT_CONV2D_GEMM);
    assert_memory_equal(g.m->params, d.m->params, nparams * sizeof(float));
    expect_close(d.y, g.y, nout, 1e-5, "output");
    expect_close(d.dx, g.dx, nin, 1e-5, "input gradient");
    expect_close(d.grads, g.grads, nparams, 1e-5, "parameter gradients");
    assert_int_equal(w.used, dt_conv_winograd_supported(&s) ? DT_CONV2D_WINOGRAD : d.used);
    assert_memory_equal(g.m->params, w.m->params, nparams * sizeof(float));
    expect_close(w.y, g.y, nout, 1e-4, "Winograd output");
    expect_close(w.dx, g.dx, nin, 1e-4, "Winograd input gradient");
    expect_close(w.grads, g.grads, nparams, 1e-4, "Winograd parameter gradients");
    free_run(&g);
    free_run(&d);
    free_run(&w);
    free(x);
    free(dy);
}

static void test_algorithms_agree(void **state)
{
    (void)state;
    compare_algos(conv_spec(7, 3, 1, 0), (struct dt_shape){3, 9, 8}, 3);
    compare_algos(conv_spec(16, 3, 1, 1), (struct dt_shape){5, 7, 7}, 2);
    compare_algos(conv_spec(4, 5, 1, 2), (struct dt_shape){2, 6, 11}, 2);
    compare_algos(conv_spec(32, 1, 1, 0), (struct dt_shape){16, 4, 4}, 2);
    struct dt_layer_spec nobias = conv_spec(13, 3, 1, 1);
    nobias.bias = false;
    compare_algos(nobias, (struct dt_shape){3, 5, 6}, 3);
    compare_algos(conv_spec(6, 3, 2, 1), (struct dt_shape){3, 9, 9}, 2);    /* stride 2: GEMM */
    compare_algos(conv_spec(32, 3, 1, 0), (struct dt_shape){16, 10, 9}, 3); /* Winograd's */
    compare_algos(conv_spec(20, 3, 1, 1), (struct dt_shape){17, 6, 11}, 2);
}

static void test_auto_choice_is_static(void **state)
{
    (void)state;
    struct dt_layer_spec s[2] = {conv_spec(8, 3, 1, 1), conv_spec(8, 3, 2, 1)};
    struct dt_model *m;
    assert_int_equal(dt_model_build(&m, s, 2, (struct dt_shape){3, 8, 8}, 2, DT_LOSS_NLL, 1), 0);
    /* few channels: direct with AVX-512, Winograd with AVX2 only (its rival there is sgemm) */
    int lanes = dt_conv_simd_lanes();
    enum dt_conv2d_algo few = lanes == 16  ? DT_CONV2D_DIRECT
                              : lanes == 8 ? DT_CONV2D_WINOGRAD
                                           : DT_CONV2D_GEMM;
    assert_int_equal(dt_conv2d_algo_of(m->layers[0]), few);
    assert_int_equal(dt_conv2d_algo_of(m->layers[1]), DT_CONV2D_GEMM);
    dt_model_free(m);
    /* the ConvNet's conv2 takes Winograd where the CPU runs it; conv1 (1 channel) likewise */
    struct dt_layer_spec c[3] = {conv_spec(16, 3, 1, 0), spec_of("relu"), conv_spec(32, 3, 1, 0)};
    assert_int_equal(dt_model_build(&m, c, 3, (struct dt_shape){1, 28, 28}, 2, DT_LOSS_NLL, 1), 0);
    assert_int_equal(dt_conv2d_algo_of(m->layers[0]), few);
    assert_int_equal(dt_conv2d_algo_of(m->layers[2]), lanes ? DT_CONV2D_WINOGRAD : DT_CONV2D_GEMM);
    dt_model_free(m);
}

/* The layer's algo key: it picks the algorithm, falling back where one cannot run the shape;
 * the process-wide test switch overrides it. */
static void test_algo_key(void **state)
{
    (void)state;
    bool simd = dt_conv_simd_lanes() > 0;
    struct dt_layer_spec s[4] = {conv_spec(16, 3, 1, 1), conv_spec(16, 3, 1, 1),
                                 conv_spec(16, 5, 1, 2), conv_spec(16, 3, 2, 1)};
    s[0].algo = DT_CONV2D_DIRECT;
    s[1].algo = DT_CONV2D_GEMM;
    s[2].algo = DT_CONV2D_WINOGRAD; /* 5x5: direct */
    s[3].algo = DT_CONV2D_WINOGRAD; /* stride 2: the stride-1 grid, subsampled */
    struct dt_model *m;
    assert_int_equal(dt_model_build(&m, s, 4, (struct dt_shape){16, 8, 8}, 2, DT_LOSS_NLL, 1), 0);
    /* an explicit key never depends on the instruction set: direct has portable loops */
    assert_int_equal(dt_conv2d_algo_of(m->layers[0]), DT_CONV2D_DIRECT);
    assert_int_equal(dt_conv2d_algo_of(m->layers[1]), DT_CONV2D_GEMM);
    assert_int_equal(dt_conv2d_algo_of(m->layers[2]), DT_CONV2D_DIRECT);
    assert_int_equal(dt_conv2d_algo_of(m->layers[3]), simd ? DT_CONV2D_WINOGRAD : DT_CONV2D_GEMM);
    dt_model_free(m);
    enum dt_conv2d_algo was = dt_conv2d_force_algo(DT_CONV2D_WINOGRAD);
    assert_int_equal(dt_model_build(&m, s, 2, (struct dt_shape){16, 8, 8}, 2, DT_LOSS_NLL, 1), 0);
    dt_conv2d_force_algo(was);
    for (int i = 0; i < 2; i++)
        assert_int_equal(dt_conv2d_algo_of(m->layers[i]),
                         simd ? DT_CONV2D_WINOGRAD : DT_CONV2D_DIRECT);
    dt_model_free(m);
}

enum fused { FUSED_RELU, FUSED_POOL, FUSED_ADD, RELU_BELOW, BN_ABOVE, SKIP_IN_DY };

static int count_fused(const struct dt_model *m, enum fused what)
{
    int n = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const struct dt_layer_plan *p = &m->plan[i];
        n += what == FUSED_RELU   ? p->relu_at_store
             : what == FUSED_POOL ? p->runs_pool
             : what == FUSED_ADD  ? p->runs_add
             : what == BN_ABOVE   ? p->bn_above && m->plan[i + 1].grad_in_below
             : what == SKIP_IN_DY ? p->skip_in_dy
                                  : p->relu_below && (p->caps & DT_CAP_RELU_BELOW_GRAD);
    }
    return n;
}

/* What the fused build of a case takes: relus fused into the layer below; pools fused where
 * the vector kernels run; layers on Winograd with AVX-512 / AVX2 only; relu backwards run by
 * a Winograd conv above (with AVX-512 / AVX2); adds computed by the batchnorm below;
 * batchnorm input gradients computed by the Winograd conv below (with AVX-512 / AVX2);
 * identity adds whose skip gradient stays in dy (with AVX-512 / AVX2). */
struct wants {
    int relu, pool, wino16, wino8, below16, below8, add, bn16, bn8, indy16, indy8;
};

/* Fused and unfused builds of `specs` give identical bits, and the fused one takes `want`. */
static void compare_fusion(const struct dt_layer_spec *specs, int n, struct dt_shape in, int batch,
                           struct wants want)
{
    size_t nin = (size_t)batch * in.c * in.h * in.w;
    float *x = malloc(nin * sizeof(float));
    fill(x, nin, 9);
    struct model_run f = model_run(specs, n, in, batch, DT_FUSE_ALL, false, x);
    struct model_run u = model_run(specs, n, in, batch, DT_FUSE_NONE, false, x);
    assert_int_equal(count_fused(f.m, FUSED_RELU), want.relu);
    int lanes = dt_conv_simd_lanes();
    assert_int_equal(count_fused(f.m, FUSED_POOL), lanes ? want.pool : 0);
    assert_int_equal(count_fused(f.m, FUSED_ADD), want.add);
    int below = lanes == 16 ? want.below16 : lanes == 8 ? want.below8 : 0;
    assert_int_equal(count_fused(f.m, RELU_BELOW), below);
    int bn_above = lanes == 16 ? want.bn16 : lanes == 8 ? want.bn8 : 0;
    assert_int_equal(count_fused(f.m, BN_ABOVE), bn_above);
    int in_dy = lanes == 16 ? want.indy16 : lanes == 8 ? want.indy8 : 0;
    assert_int_equal(count_fused(f.m, SKIP_IN_DY), in_dy);
    int winograd = 0;
    for (int i = 0; i < f.m->nlayers; i++) { /* the same algorithm in both builds */
        assert_int_equal(dt_conv2d_algo_of(f.m->layers[i]), dt_conv2d_algo_of(u.m->layers[i]));
        winograd += dt_conv2d_algo_of(f.m->layers[i]) == DT_CONV2D_WINOGRAD;
    }
    assert_int_equal(winograd, lanes == 16 ? want.wino16 : lanes == 8 ? want.wino8 : 0);
    for (int k = FUSED_RELU; k <= SKIP_IN_DY; k++)
        assert_int_equal(count_fused(u.m, (enum fused)k), 0);
    for (int i = 0; i < n; i++) /* relus take skip gradients in their pass only when fused */
        assert_false(u.m->plan[i].dy_extra);
    model_runs_expect_equal(&f, &u, batch);
    model_run_free(&f);
    model_run_free(&u);
    free(x);
}

/* conv -> batchnorm -> relu, then a residual block of `convs` such 16-channel convs (no relu
 * after the last batchnorm) closed by an identity add from the first relu, then relu, flatten
 * and linear(3): 3 convs + 6 specs into out, returned. */
static int block_specs(int convs, struct dt_layer_spec *out)
{
    int n = 0;
    for (int c = 0; c <= convs; c++) {
        out[n++] = conv_spec(16, 3, 1, 1);
        out[n++] = spec_of("batchnorm2d");
        if (c < convs)
            out[n++] = spec_of("relu");
    }
    out[n] = spec_of("add");
    out[n].from = -3 * convs;
    n++;
    out[n++] = spec_of("relu");
    out[n++] = spec_of("flatten");
    out[n++] = linear_spec(3);
    return n;
}

static void fusion_cases(void)
{
    /* the ConvNet's shapes: conv1 -> conv2 run in chunks of the batch (43 KB a sample between
     * them), and conv2's output (72 KB a sample) is pooled in smaller chunks */
    struct dt_layer_spec convnet[8] = {conv_spec(16, 3, 1, 0),
                                       spec_of("relu"),
                                       conv_spec(32, 3, 1, 0),
                                       spec_of("relu"),
                                       pool_spec("maxpool2d", 2, 0, 0),
                                       spec_of("flatten"),
                                       linear_spec(5),
                                       spec_of("relu")};
    compare_fusion(convnet, 8, (struct dt_shape){1, 28, 28}, 13,
                   (struct wants){2, 1, 1, 2, 1, 1, 0, 0, 0, 0, 0});
    /* odd sizes (the pool drops the last row and column), a padded overlapping pool, relu
     * twice in a row (only the first fuses), a pool as the first layer (backward stops at
     * layer 1, which gets no dx) */
    struct dt_layer_spec odd[9] = {pool_spec("maxpool2d", 2, 1, 0),
                                   conv_spec(5, 3, 1, 1),
                                   spec_of("relu"),
                                   spec_of("relu"),
                                   conv_spec(6, 3, 1, 0),
                                   spec_of("relu"),
                                   pool_spec("maxpool2d", 3, 2, 1),
                                   spec_of("flatten"),
                                   linear_spec(4)};
    compare_fusion(odd, 9, (struct dt_shape){2, 12, 11}, 5,
                   (struct wants){2, 1, 0, 1, 0, 1, 0, 0, 0, 0, 0});
    /* Winograd's own 2x2 pool (conv 8->16, 3x3 pad 1) on odd sizes: the pool drops the last
     * row and column, and ReLU zeros tie in many windows */
    struct dt_layer_spec wino[7] = {conv_spec(8, 3, 1, 0),
                                    spec_of("relu"),
                                    conv_spec(16, 3, 1, 1),
                                    spec_of("relu"),
                                    pool_spec("maxpool2d", 2, 0, 0),
                                    spec_of("flatten"),
                                    linear_spec(3)};
    compare_fusion(wino, 7, (struct dt_shape){2, 13, 11}, 6,
                   (struct wants){2, 1, 1, 2, 1, 1, 0, 0, 0, 0, 0});
    /* stride 2 (GEMM path): relu fuses, the pool does not */
    struct dt_layer_spec strided[5] = {conv_spec(4, 3, 2, 1), spec_of("relu"),
                                       pool_spec("maxpool2d", 2, 0, 0), spec_of("flatten"),
                                       linear_spec(3)};
    compare_fusion(strided, 5, (struct dt_shape){3, 9, 9}, 3,
                   (struct wants){1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
    /* batchnorm2d -> relu and add -> relu: the relu at the store, also where a skip
     * connection reads the relu's output (its gradient arrives there: added in the relu's
     * backward, or in a pass of its own); batchnorm2d -> add: the add (and its relu) at the
     * batchnorm's store; with AVX2 the second conv (Winograd) takes its batchnorm's input
     * gradient, and the add's skip gradient stays in dy until that conv reads it */
    struct dt_layer_spec add = spec_of("add");
    add.from = -3;
    struct dt_layer_spec residual[9] = {
        conv_spec(4, 3, 1, 1), spec_of("batchnorm2d"), spec_of("relu"),
        conv_spec(4, 3, 1, 1), spec_of("batchnorm2d"), add,
        spec_of("relu"),       spec_of("flatten"),     linear_spec(3)};
    compare_fusion(residual, 9, (struct dt_shape){1, 7, 7}, 6,
                   (struct wants){2, 0, 0, 1, 0, 1, 1, 0, 1, 0, 1});
    /* a ResNet basic block of 16 channels (on Winograd with AVX-512 too): the backward of its
     * inner relu and of the block input's (with the add's skip gradient) run by the conv
     * above each, each Winograd conv takes the input gradient of the batchnorm above it, and
     * the add's skip gradient stays in dy until the block's first conv reads it */
    struct dt_layer_spec block[15];
    compare_fusion(block, block_specs(2, block), (struct dt_shape){3, 8, 8}, 5,
                   (struct wants){3, 0, 2, 3, 2, 2, 1, 2, 3, 1, 1});
    /* three convs in the block: backward writes the add's dy buffer again (the middle conv's
     * input gradient) before the first conv reads the skip gradient, so it is copied */
    compare_fusion(block, block_specs(3, block), (struct dt_shape){3, 8, 8}, 5,
                   (struct wants){4, 0, 3, 4, 3, 3, 1, 3, 4, 0, 0});
}

static void test_fusion_is_exact_1_thread(void **state)
{
    (void)state;
    dt_nn_set_threads(1);
    fusion_cases();
}

static void test_fusion_is_exact_2_threads(void **state)
{
    (void)state;
    dt_nn_set_threads(2);
    fusion_cases();
}

static void test_steps_are_deterministic(void **state)
{
    (void)state;
    dt_nn_set_threads(2);
    struct dt_layer_spec s[16];
    int n = convnet_specs(s);
    struct dt_shape in = {1, 28, 28};
    enum { B = 9 };
    float *x = malloc(B * 784 * sizeof(float));
    fill(x, B * 784, 3);
    struct model_run a = model_run(s, n, in, B, DT_FUSE_ALL, false, x);
    struct model_run b = model_run(s, n, in, B, DT_FUSE_ALL, false, x);
    model_runs_expect_equal(&a, &b, B);
    model_run_free(&a);
    model_run_free(&b);
    free(x);
}

/* The 2x2 pool's backward on an odd-sized plane: winners get dy, everything else (the rows and
 * columns the windows leave out included) exactly +0, whatever dx held before. */
static void test_maxpool_2x2_backward_odd(void **state)
{
    (void)state;
    struct dt_layer_spec spec = pool_spec("maxpool2d", 2, 0, 0);
    struct dt_model *m;
    assert_int_equal(dt_model_build(&m, &spec, 1, (struct dt_shape){1, 5, 5}, 1, DT_LOSS_NLL, 1),
                     0);
    struct dt_layer *l = m->layers[0];
    float x[25], y[4], dx[25], dy[4] = {1.0f, -2.0f, -0.0f, 4.0f};
    for (int i = 0; i < 25; i++)
        x[i] = (float)((i * 7) % 25); /* winners at different corners of the windows */
    struct dt_layer_fwd fwd = {.run = {.training = false}};
    struct dt_layer_bwd alone = {0};
    l->kind->ops->forward(l, x, y, 1, &fwd);
    for (int i = 0; i < 25; i++)
        dx[i] = NAN;
    l->kind->ops->backward(l, x, y, dy, dx, 1, &alone);
    int winners = 0;
    for (int i = 0; i < 25; i++) {
        int r = i / 5, c = i % 5, o = r / 2 * 2 + c / 2;
        bool win = r < 4 && c < 4 && x[i] == y[o];
        if (win) {
            winners++;
            assert_true(dx[i] == dy[o]);
        } else {
            assert_true(dx[i] == 0.0f && !signbit(dx[i]));
        }
    }
    assert_int_equal(winners, 4);
    /* window 2 (rows 2-3, columns 0-1) got dy = -0: stored as +0 (clear, then add) */
    assert_false(signbit(dx[10]) || signbit(dx[11]) || signbit(dx[15]) || signbit(dx[16]));
    dt_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_algorithms_agree),
        cmocka_unit_test(test_auto_choice_is_static),
        cmocka_unit_test(test_algo_key),
        cmocka_unit_test(test_fusion_is_exact_1_thread),
        cmocka_unit_test(test_fusion_is_exact_2_threads),
        cmocka_unit_test(test_steps_are_deterministic),
        cmocka_unit_test(test_maxpool_2x2_backward_odd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The fusion plan (nn/fusion.h), one fusion at a time: for each, a small graph that exercises
 * it is built twice, with the fusions it needs and with that fusion added, and both builds
 * must give the same bits: eval and training outputs, loss, parameter gradients and the
 * gradient w.r.t. the input (memcmp). Each case also checks that the fused build took the
 * fusion (where this CPU's kernels allow it: the Winograd ones need AVX2 or AVX-512) and the
 * other did not. Then DTRAIN_FUSE's syntax and errors, and the input gradient itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/fusion.h"
#include "nn/kernels/isa.h"
#include "nn/layers.h"
#include "nn/model.h"
#include "model_run.h"
#include "nn_specs.h"
#include "util/err.h"
#include "util/rng.h"

static void fill(float *p, size_t n, uint64_t seed)
{
    struct dt_rng rng;
    dt_rng_init(&rng, dt_rng_key(seed, DT_RNG_TEST, 11, 0));
    for (size_t i = 0; i < n; i++)
        p[i] = 2.0f * dt_rng_uniform(&rng) - 1.0f;
}

/* How many layers of m the plan gave `fusion`'s decision, an add's projection that runs it
 * inside counted as one. */
static int taken(const struct dt_model *m, unsigned fusion)
{
    int n = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const struct dt_layer_plan *p = &m->plan[i];
        n += (dt_add_projection_fusions(m->layers[i]) & fusion) != 0;
        /* relu_below: the conv's (a maxpool's comes with pool); dy_extra: a relu a skip
         * connection reads, the only one it changes anything for */
        n += fusion == DT_FUSE_RELU         ? p->relu_at_store
             : fusion == DT_FUSE_POOL       ? p->runs_pool
             : fusion == DT_FUSE_ADD        ? p->runs_add
             : fusion == DT_FUSE_RELU_BELOW ? p->relu_below && (p->caps & DT_CAP_RELU_BELOW_GRAD)
             : fusion == DT_FUSE_BN_GRAD    ? p->bn_above
             : fusion == DT_FUSE_DY_EXTRA   ? p->dy_extra && p->referenced
             : fusion == DT_FUSE_SKIP_IN_DY ? p->skip_in_dy
             : fusion == DT_FUSE_BF16_STORE ? p->bf16_store
             : fusion == DT_FUSE_POOL_GRAD  ? p->pool_above
             : fusion == DT_FUSE_DX_ROUNDED ? p->dy_rounded
             : fusion == DT_FUSE_BN_INPUT   ? p->bn_below
             : fusion == DT_FUSE_BN_SUMS    ? p->sums_below && p->bn_below
             : fusion == DT_FUSE_ADD_SUMS   ? p->sums_below && !p->bn_below
             : fusion == DT_FUSE_PROJ_DX    ? p->dx_even
             : fusion == DT_FUSE_VIEW       ? p->in_place && (p->caps & DT_CAP_Y_IS_X)
                                            : p->run_end > 0;
    }
    return n;
}

/* `specs` built with `needs` and with needs | fusion give the same bits; the second takes
 * `fusion` at `want` layers, the first at none. */
static void compare(const struct dt_layer_spec *specs, int n, struct dt_shape in, int batch,
                    unsigned needs, unsigned fusion, int want)
{
    size_t nin = (size_t)batch * in.c * in.h * in.w;
    float *x = malloc(nin * sizeof(float));
    fill(x, nin, 9);
    struct model_run f = model_run(specs, n, in, batch, needs | fusion, true, x);
    struct model_run u = model_run(specs, n, in, batch, needs, true, x);
    assert_int_equal(taken(f.m, fusion), want);
    assert_int_equal(taken(u.m, fusion), 0);
    model_runs_expect_equal(&f, &u, batch);
    model_run_free(&f);
    model_run_free(&u);
    free(x);
}

/* Every conv2d of `specs` built with `algo` forced; the count of them that took it. */
static int convs_on(const struct dt_layer_spec *specs, int n, struct dt_shape in,
                    enum dt_conv2d_algo algo)
{
    struct dt_model *m;
    struct dt_model_options opt = {.fusions = DT_FUSE_NONE};
    enum dt_conv2d_algo was = dt_conv2d_force_algo(algo);
    assert_int_equal(dt_model_build_with(&m, specs, n, in, 2, DT_LOSS_CROSS_ENTROPY, 3, &opt), 0);
    dt_conv2d_force_algo(was);
    int count = 0;
    for (int i = 0; i < m->nlayers; i++)
        count += dt_conv2d_algo_of(m->layers[i]) == algo;
    dt_model_free(m);
    return count;
}

/* compare() with every conv2d forced to `algo` (falling back where it cannot run), at one
 * thread and at two. */
static void compare_on(enum dt_conv2d_algo algo, const struct dt_layer_spec *specs, int n,
                       struct dt_shape in, int batch, unsigned needs, unsigned fusion, int want)
{
    enum dt_conv2d_algo was = dt_conv2d_force_algo(algo);
    for (int threads = 1; threads <= 2; threads++) {
        dt_nn_set_threads(threads);
        compare(specs, n, in, batch, needs, fusion, want);
    }
    dt_conv2d_force_algo(was);
}

static const struct dt_shape IN = {3, 9, 8};
static const struct dt_shape EVEN = {3, 8, 10}; /* a 2x2 pool's windows cover the plane */

/* conv2d -> relu and batchnorm2d -> relu: the relu at the store, run in place. */
static void test_relu(void **state)
{
    (void)state;
    struct dt_layer_spec s[] = {conv_spec(4, 3, 1, 1),  spec_of("relu"), conv_spec(5, 3, 1, 0),
                                spec_of("batchnorm2d"), spec_of("relu"), spec_of("flatten"),
                                linear_spec(3)};
    int n = sizeof s / sizeof s[0];
    compare_on(DT_CONV2D_GEMM, s, n, IN, 5, DT_FUSE_NONE, DT_FUSE_RELU, 2);
    compare_on(DT_CONV2D_DIRECT, s, n, IN, 5, DT_FUSE_NONE, DT_FUSE_RELU, 2);
}

/* A flatten is a view of its input (view): after a relu fused into the conv below (a chain
 * of aliases), after a dropout, and after an add whose skip input is referenced. */
static void test_view(void **state)
{
    (void)state;
    struct dt_layer_spec s[] = {conv_spec(4, 3, 1, 1), spec_of("relu"), spec_of("flatten"),
                                linear_spec(3)};
    compare_on(DT_CONV2D_GEMM, s, 4, IN, 5, DT_FUSE_NONE, DT_FUSE_VIEW, 1);
    compare_on(DT_CONV2D_GEMM, s, 4, IN, 5, DT_FUSE_ALL & ~DT_FUSE_VIEW, DT_FUSE_VIEW, 1);
    struct dt_layer_spec d[] = {conv_spec(4, 3, 1, 1), spec_of("relu"),
                                dropout_spec("dropout2d", 0.25f), spec_of("flatten"),
                                linear_spec(3)};
    compare_on(DT_CONV2D_GEMM, d, 5, IN, 5, DT_FUSE_ALL & ~DT_FUSE_VIEW, DT_FUSE_VIEW, 1);
    struct dt_layer_spec a[] = {conv_spec(4, 3, 1, 1), spec_of("relu"),    conv_spec(4, 3, 1, 1),
                                spec_of("add"),        spec_of("flatten"), linear_spec(3)};
    a[3].from = -2;
    compare_on(DT_CONV2D_GEMM, a, 6, IN, 5, DT_FUSE_ALL & ~DT_FUSE_VIEW, DT_FUSE_VIEW, 1);
}

/* conv2d -> relu -> maxpool2d in the conv's chunked forward: the direct path with any pool,
 * the Winograd path with its own 2x2 pool (odd sizes: the pool drops a row and a column). */
static void test_pool(void **state)
{
    (void)state;
    struct dt_layer_spec s[] = {conv_spec(16, 3, 1, 1), spec_of("relu"),
                                pool_spec("maxpool2d", 2, 0, 0), spec_of("flatten"),
                                linear_spec(3)};
    struct dt_layer_spec overlap[] = {conv_spec(6, 3, 1, 0), spec_of("relu"),
                                      pool_spec("maxpool2d", 3, 2, 1), spec_of("flatten"),
                                      linear_spec(4)};
    struct dt_shape in = {8, 13, 11};
    int direct = convs_on(s, 5, in, DT_CONV2D_DIRECT);
    int winograd = convs_on(s, 5, in, DT_CONV2D_WINOGRAD);
    compare_on(DT_CONV2D_DIRECT, s, 5, in, 6, DT_FUSE_RELU, DT_FUSE_POOL, direct);
    compare_on(DT_CONV2D_WINOGRAD, s, 5, in, 6, DT_FUSE_RELU, DT_FUSE_POOL, winograd ? 1 : direct);
    compare_on(DT_CONV2D_DIRECT, overlap, 5, in, 6, DT_FUSE_RELU, DT_FUSE_POOL,
               convs_on(overlap, 5, in, DT_CONV2D_DIRECT));
    /* stride 2: the conv cannot pool */
    struct dt_layer_spec strided[] = {conv_spec(4, 3, 2, 1), spec_of("relu"),
                                      pool_spec("maxpool2d", 2, 0, 0), spec_of("flatten"),
                                      linear_spec(3)};
    compare_on(DT_CONV2D_DIRECT, strided, 5, in, 3, DT_FUSE_RELU, DT_FUSE_POOL, 0);
}

/* A residual block: conv -> batchnorm -> relu -> conv -> batchnorm -> add (from the first
 * relu) -> relu; the add at the second batchnorm's store, alone and with its relu fused. */
static int block(struct dt_layer_spec *s)
{
    int n = 0;
    s[n++] = conv_spec(16, 3, 1, 1);
    s[n++] = spec_of("batchnorm2d");
    s[n++] = spec_of("relu");
    s[n++] = conv_spec(16, 3, 1, 1);
    s[n++] = spec_of("batchnorm2d");
    s[n] = spec_of("add");
    s[n++].from = -3;
    s[n++] = spec_of("relu");
    s[n++] = spec_of("flatten");
    s[n++] = linear_spec(3);
    return n;
}

static void test_add(void **state)
{
    (void)state;
    struct dt_layer_spec s[16];
    int n = block(s);
    compare_on(DT_CONV2D_GEMM, s, n, IN, 5, DT_FUSE_NONE, DT_FUSE_ADD, 1);
    compare_on(DT_CONV2D_GEMM, s, n, IN, 5, DT_FUSE_RELU, DT_FUSE_ADD, 1);
    /* a projection shortcut (8 -> 16 channels) is no identity add for the batchnorm below,
     * but the projection's own batchnorm computes it (nn/layer_add.c) */
    s[5].shortcut = DT_SHORTCUT_PROJECTION;
    s[0] = conv_spec(8, 3, 1, 1);
    compare_on(DT_CONV2D_GEMM, s, n, IN, 5, DT_FUSE_RELU, DT_FUSE_ADD, 1);
    compare_on(DT_CONV2D_GEMM, s, n, IN, 5, DT_FUSE_ALL & ~DT_FUSE_ADD, DT_FUSE_ADD, 1);
}

/* conv -> relu -> conv -> add (reading the relu) -> relu, then the head: a skip connection
 * from a relu's output, the convs `channels` wide. */
static int relu_skip(struct dt_layer_spec *s, int channels)
{
    int n = 0;
    s[n++] = conv_spec(channels, 3, 1, 1);
    s[n++] = spec_of("relu");
    s[n++] = conv_spec(channels, 3, 1, 1);
    s[n] = spec_of("add");
    s[n++].from = -2;
    s[n++] = spec_of("relu");
    s[n++] = spec_of("flatten");
    s[n++] = linear_spec(3);
    return n;
}

/* relu -> conv2d (Winograd): the relu's backward in the conv's, also with a skip gradient
 * sent to the relu's output (an add reading it). */
static void test_relu_below(void **state)
{
    (void)state;
    struct dt_layer_spec s[16];
    int n = relu_skip(s, 16);
    int winograd = convs_on(s, n, IN, DT_CONV2D_WINOGRAD) > 0;
    compare_on(DT_CONV2D_WINOGRAD, s, n, IN, 5, DT_FUSE_NONE, DT_FUSE_RELU_BELOW, winograd);
    compare_on(DT_CONV2D_WINOGRAD, s, n, IN, 5, DT_FUSE_RELU | DT_FUSE_DY_EXTRA, DT_FUSE_RELU_BELOW,
               winograd);
    compare_on(DT_CONV2D_GEMM, s, n, IN, 5, DT_FUSE_NONE, DT_FUSE_RELU_BELOW, 0);
}

/* test_bf16_fusions' cases with the tile conv at stride 2 (parity planes, 9x8 -> 5x4: odd
 * sizes), and a projection shortcut (its 1x1 stride-2 conv on tiles too, fused with its
 * batchnorm inside the add: bn_grad, bf16_store, and the add at the batchnorm's store). */
static void bf16_stride2_fusions(void)
{
    struct dt_layer_spec s[] = {conv_spec(16, 3, 1, 1), spec_of("relu"), conv_spec(16, 3, 2, 1),
                                spec_of("add"),         spec_of("relu"), spec_of("flatten"),
                                linear_spec(3)};
    s[3].from = -2;
    s[3].shortcut = DT_SHORTCUT_PROJECTION;
    compare_on(DT_CONV2D_GEMM, s, 7, IN, 5, DT_FUSE_NONE, DT_FUSE_RELU_BELOW, 1);
    compare_on(DT_CONV2D_GEMM, s, 7, IN, 5, DT_FUSE_RELU | DT_FUSE_DY_EXTRA, DT_FUSE_RELU_BELOW, 1);
    struct dt_layer_spec pool[] = {conv_spec(16, 3, 1, 1),
                                   spec_of("relu"),
                                   conv_spec(16, 3, 2, 1),
                                   spec_of("relu"),
                                   pool_spec("maxpool2d", 2, 0, 0),
                                   spec_of("flatten"),
                                   linear_spec(3)};
    compare_on(DT_CONV2D_GEMM, pool, 7, IN, 5, DT_FUSE_RELU, DT_FUSE_POOL, 1);
    compare_on(DT_CONV2D_GEMM, pool, 7, IN, 5, DT_FUSE_ALL & ~DT_FUSE_POOL, DT_FUSE_POOL, 1);
    /* ResNet's downsampling block: conv (stride 2) - bn - relu - conv - bn - add (projection) */
    struct dt_layer_spec b[16];
    int nb = block(b);
    b[0] = conv_spec(16, 3, 1, 1);
    b[3] = conv_spec(16, 3, 2, 1); /* the block's input is the first relu's output */
    b[5].shortcut = DT_SHORTCUT_PROJECTION;
    /* (the projection's 1x1 stride-2 conv takes them inside the add: the third) */
    compare_on(DT_CONV2D_GEMM, b, nb, IN, 5, DT_FUSE_NONE, DT_FUSE_BN_GRAD, 3);
    compare_on(DT_CONV2D_GEMM, b, nb, IN, 5, DT_FUSE_ALL & ~DT_FUSE_BN_GRAD, DT_FUSE_BN_GRAD, 3);
    compare_on(DT_CONV2D_GEMM, b, nb, IN, 5, DT_FUSE_BN_GRAD, DT_FUSE_BF16_STORE, 3);
    /* ... and with the relu, add and relu_below fusions the block's input (the first relu's
     * output), which the stride-2 conv and the projection's read: 5 */
    compare_on(DT_CONV2D_GEMM, b, nb, IN, 5, DT_FUSE_ALL & ~DT_FUSE_BF16_STORE, DT_FUSE_BF16_STORE,
               5);
    compare_on(DT_CONV2D_GEMM, b, nb, IN, 5, DT_FUSE_ALL & ~DT_FUSE_ADD, DT_FUSE_ADD, 1);
    /* the projection's input gradient stored at the even positions it reaches alone (9x8:
     * 5x4 of them), read so by the stride-2 conv running the block input's relu's backward
     * (proj_dx); not without relu_below, nor when a second add sends that relu's output a
     * gradient */
    compare_on(DT_CONV2D_GEMM, b, nb, IN, 5, DT_FUSE_RELU_BELOW, DT_FUSE_PROJ_DX, 1);
    compare_on(DT_CONV2D_GEMM, b, nb, IN, 5, DT_FUSE_ALL & ~DT_FUSE_PROJ_DX, DT_FUSE_PROJ_DX, 1);
    compare_on(DT_CONV2D_GEMM, b, nb, IN, 5, DT_FUSE_ALL & ~(DT_FUSE_PROJ_DX | DT_FUSE_RELU_BELOW),
               DT_FUSE_PROJ_DX, 0);
    struct dt_layer_spec two[11];
    memcpy(two, b, 7 * sizeof *two);
    two[7] = spec_of("add");
    two[7].from = -5;
    two[7].shortcut = DT_SHORTCUT_PROJECTION;
    two[8] = spec_of("relu"), two[9] = spec_of("flatten"), two[10] = linear_spec(3);
    compare_on(DT_CONV2D_GEMM, two, 11, IN, 5, DT_FUSE_ALL & ~DT_FUSE_PROJ_DX, DT_FUSE_PROJ_DX, 0);
    /* then an identity block: the downsampling block's output (its add's, stored by the
     * projection's batchnorm, and the relu's) read by its stride-1 conv and its add, 2 more;
     * its inner batchnorm -> relu and its two convs' outputs, 4 more */
    struct dt_layer_spec d[16];
    memcpy(d, b, 7 * sizeof *d);
    int nd = 7 + block(d + 7);
    d[12].from = -6;
    compare_on(DT_CONV2D_GEMM, d, nd, IN, 5, DT_FUSE_ALL & ~DT_FUSE_BF16_STORE, DT_FUSE_BF16_STORE,
               11);
    compare_on(DT_CONV2D_GEMM, d, nd, IN, 5, DT_FUSE_ALL & ~DT_FUSE_PROJ_DX, DT_FUSE_PROJ_DX, 1);
}

/* The same on a bf16 model, on every bf16 tile path the CPU has (the plain-C tiles always):
 * the tile conv writes dx as the relu's backward would, runs the relu and maxpool2d above
 * it (pool) and the batchnorm above's input gradient (bn_grad). The first conv (3 channels, 27
 * deep: the stem mode) takes them as well; where only the second has a taker above, one. With
 * bn_grad, a tile conv stores its output as bf16 for the batchnorm above (bf16_store). */
static void test_bf16_fusions(void **state)
{
    (void)state;
    struct dt_layer_spec s[] = {conv_spec(16, 3, 1, 1), spec_of("relu"), conv_spec(16, 3, 1, 1),
                                spec_of("add"),         spec_of("relu"), spec_of("flatten"),
                                linear_spec(3)};
    s[3].from = -2;
    model_run_precision = DT_PRECISION_BF16;
    for (int p = DT_BF16_CTILE; p <= DT_BF16_AMX; p++) {
        const char *why;
        if (!dt_bf16_path_available((enum dt_bf16_path)p, &why)) {
            printf("test_bf16_fusions: %s skipped: %s\n", dt_bf16_path_name((enum dt_bf16_path)p),
                   why);
            continue;
        }
        enum dt_bf16_path was = dt_isa_force_bf16_path((enum dt_bf16_path)p);
        compare_on(DT_CONV2D_GEMM, s, 7, IN, 5, DT_FUSE_NONE, DT_FUSE_RELU_BELOW, 1);
        compare_on(DT_CONV2D_GEMM, s, 7, IN, 5, DT_FUSE_RELU | DT_FUSE_DY_EXTRA, DT_FUSE_RELU_BELOW,
                   1);
        compare_on(DT_CONV2D_GEMM, s, 7, IN, 5, DT_FUSE_RELU_BELOW, DT_FUSE_SKIP_IN_DY, 1);
        /* conv2d -> relu -> maxpool2d: the tile conv pools each sample (odd sizes: 9x8) */
        struct dt_layer_spec pool[] = {conv_spec(16, 3, 1, 1),
                                       spec_of("relu"),
                                       conv_spec(16, 3, 1, 1),
                                       spec_of("relu"),
                                       pool_spec("maxpool2d", 2, 0, 0),
                                       spec_of("flatten"),
                                       linear_spec(3)};
        compare_on(DT_CONV2D_GEMM, pool, 7, IN, 5, DT_FUSE_RELU, DT_FUSE_POOL, 1);
        compare_on(DT_CONV2D_GEMM, pool, 7, IN, 5, DT_FUSE_ALL & ~DT_FUSE_POOL, DT_FUSE_POOL, 1);
        /* ... and the pool's backward in the conv's (pool_grad): on the stride-1 tiles (whose
         * relu below it runs too) and in the stem mode (the CIFAR nets' first conv -> relu ->
         * pool, an odd plane: 9x8), each sample unpooled as the conv reads it */
        compare_on(DT_CONV2D_GEMM, pool, 7, IN, 5, DT_FUSE_RELU | DT_FUSE_POOL, DT_FUSE_POOL_GRAD,
                   1);
        compare_on(DT_CONV2D_GEMM, pool, 7, IN, 5, DT_FUSE_ALL & ~DT_FUSE_POOL_GRAD,
                   DT_FUSE_POOL_GRAD, 1);
        compare_on(DT_CONV2D_GEMM, pool, 7, IN, 5, DT_FUSE_RELU, DT_FUSE_POOL_GRAD, 0);
        /* on an even plane the tile conv lays the unpooled dY out as it unpools it
         * (unpool_image, conv_bf16.h) */
        compare_on(DT_CONV2D_GEMM, pool, 7, EVEN, 5, DT_FUSE_RELU | DT_FUSE_POOL, DT_FUSE_POOL_GRAD,
                   1);
        compare_on(DT_CONV2D_GEMM, pool, 7, EVEN, 5, DT_FUSE_ALL & ~DT_FUSE_POOL_GRAD,
                   DT_FUSE_POOL_GRAD, 1);
        struct dt_layer_spec stem_pool[] = {
            conv_spec(16, 3, 1, 1), spec_of("relu"), pool_spec("maxpool2d", 2, 0, 0),
            conv_spec(16, 3, 1, 1), spec_of("relu"), pool_spec("maxpool2d", 2, 0, 0),
            spec_of("flatten"),     linear_spec(3)};
        compare_on(DT_CONV2D_GEMM, stem_pool, 8, IN, 5, DT_FUSE_RELU | DT_FUSE_POOL,
                   DT_FUSE_POOL_GRAD, 2);
        compare_on(DT_CONV2D_GEMM, stem_pool, 8, IN, 5, DT_FUSE_ALL & ~DT_FUSE_POOL_GRAD,
                   DT_FUSE_POOL_GRAD, 2);
        /* conv2d -> batchnorm2d: the batchnorm's input gradient in the tile conv's backward
         * (the block's first conv, 3 input channels, in the stem mode: two takers) */
        struct dt_layer_spec b[16];
        int nb = block(b);
        compare_on(DT_CONV2D_GEMM, b, nb, IN, 5, DT_FUSE_NONE, DT_FUSE_BN_GRAD, 2);
        compare_on(DT_CONV2D_GEMM, b, nb, IN, 5, DT_FUSE_ALL & ~DT_FUSE_BN_GRAD, DT_FUSE_BN_GRAD,
                   2);
        /* ... and the conv's output stored as bf16 for that batchnorm (bf16_store), in the
         * stem mode and on the stride-1 tiles; not without bn_grad. With the relu, add and
         * relu_below fusions, the first batchnorm -> relu's output too, which the second conv
         * and the add's skip read (the add computed by the second batchnorm, reading the skip
         * as bf16 values either way): 4 */
        compare_on(DT_CONV2D_GEMM, b, nb, IN, 5, DT_FUSE_BN_GRAD, DT_FUSE_BF16_STORE, 2);
        compare_on(DT_CONV2D_GEMM, b, nb, IN, 5, DT_FUSE_ALL & ~DT_FUSE_BF16_STORE,
                   DT_FUSE_BF16_STORE, 4);
        compare_on(DT_CONV2D_GEMM, b, nb, IN, 5, DT_FUSE_ALL & ~(DT_FUSE_BF16_STORE | DT_FUSE_ADD),
                   DT_FUSE_BF16_STORE, 2);
        compare_on(DT_CONV2D_GEMM, b, nb, IN, 5, DT_FUSE_NONE, DT_FUSE_BF16_STORE, 0);
        /* the identity add computed by the batchnorm or alone: its skip read as bf16 values
         * either way (a bf16 model's add) */
        compare_on(DT_CONV2D_GEMM, b, nb, IN, 5, DT_FUSE_ALL & ~DT_FUSE_ADD, DT_FUSE_ADD, 1);
        /* a basic block after a stem: its batchnorm -> relu output, which only the second
         * conv reads (running the relu's backward), stored as bf16 too (at the batchnorm and
         * the relu: 2) besides the three convs' outputs, and the stem's batchnorm -> relu
         * output, which the block's add reads too (2) */
        struct dt_layer_spec r[] = {conv_spec(16, 3, 1, 1), spec_of("batchnorm2d"), spec_of("relu"),
                                    conv_spec(16, 3, 1, 1), spec_of("batchnorm2d"), spec_of("relu"),
                                    conv_spec(16, 3, 1, 1), spec_of("batchnorm2d"), spec_of("add"),
                                    spec_of("relu"),        spec_of("flatten"),     linear_spec(3)};
        r[8].from = -6;
        compare_on(DT_CONV2D_GEMM, r, 12, IN, 5, DT_FUSE_ALL & ~DT_FUSE_BF16_STORE,
                   DT_FUSE_BF16_STORE, 7);
        compare_on(DT_CONV2D_GEMM, r, 12, IN, 5, DT_FUSE_BN_GRAD, DT_FUSE_BF16_STORE, 3);
        /* ... and then that batchnorm -> relu stores nothing: the third conv applies both to
         * the second conv's bf16 output as it reads it (bn_input); not without bf16_store */
        unsigned stored = DT_FUSE_RELU | DT_FUSE_RELU_BELOW | DT_FUSE_BN_GRAD | DT_FUSE_BF16_STORE;
        compare_on(DT_CONV2D_GEMM, r, 12, IN, 5, stored, DT_FUSE_BN_INPUT, 1);
        compare_on(DT_CONV2D_GEMM, r, 12, IN, 5, DT_FUSE_ALL & ~DT_FUSE_BN_INPUT, DT_FUSE_BN_INPUT,
                   1);
        compare_on(DT_CONV2D_GEMM, r, 12, IN, 5,
                   DT_FUSE_ALL & ~(DT_FUSE_BN_INPUT | DT_FUSE_BF16_STORE), DT_FUSE_BN_INPUT, 0);
        /* ... and the third conv takes that batchnorm's two backward sums as it stores its dx
         * (bn_sums); not without bn_input */
        compare_on(DT_CONV2D_GEMM, r, 12, IN, 5, stored | DT_FUSE_BN_INPUT, DT_FUSE_BN_SUMS, 1);
        compare_on(DT_CONV2D_GEMM, r, 12, IN, 5, DT_FUSE_ALL & ~DT_FUSE_BN_SUMS, DT_FUSE_BN_SUMS,
                   1);
        compare_on(DT_CONV2D_GEMM, r, 12, IN, 5,
                   DT_FUSE_ALL & ~(DT_FUSE_BN_SUMS | DT_FUSE_BN_INPUT), DT_FUSE_BN_SUMS, 0);
        /* a conv running the relu below's backward takes, as it stores dx, the two backward
         * sums of the batchnorm -> relu below it (the stem's) or of the batchnorm computing
         * the identity add -> relu below it (the first block's second) (add_sums): 2 with two
         * blocks; only the stem's without the add computed by the batchnorm; none without
         * relu_below */
        struct dt_layer_spec r2[] = {
            conv_spec(16, 3, 1, 1), spec_of("batchnorm2d"), spec_of("relu"),
            conv_spec(16, 3, 1, 1), spec_of("batchnorm2d"), spec_of("relu"),
            conv_spec(16, 3, 1, 1), spec_of("batchnorm2d"), spec_of("add"),
            spec_of("relu"),        conv_spec(16, 3, 1, 1), spec_of("batchnorm2d"),
            spec_of("relu"),        conv_spec(16, 3, 1, 1), spec_of("batchnorm2d"),
            spec_of("add"),         spec_of("relu"),        spec_of("flatten"),
            linear_spec(3)};
        r2[8].from = r2[15].from = -6;
        int n2 = sizeof r2 / sizeof r2[0];
        compare_on(DT_CONV2D_GEMM, r, 12, IN, 5, DT_FUSE_ALL & ~DT_FUSE_ADD_SUMS, DT_FUSE_ADD_SUMS,
                   1);
        compare_on(DT_CONV2D_GEMM, r2, n2, IN, 5, DT_FUSE_ALL & ~DT_FUSE_ADD_SUMS, DT_FUSE_ADD_SUMS,
                   2);
        compare_on(DT_CONV2D_GEMM, r2, n2, IN, 5, DT_FUSE_ALL & ~(DT_FUSE_ADD_SUMS | DT_FUSE_ADD),
                   DT_FUSE_ADD_SUMS, 1);
        compare_on(DT_CONV2D_GEMM, r2, n2, IN, 5,
                   DT_FUSE_ALL & ~(DT_FUSE_ADD_SUMS | DT_FUSE_RELU_BELOW), DT_FUSE_ADD_SUMS, 0);
        /* a stem-mode conv (3 -> 16, 27 deep) with a relu below it takes relu_below */
        struct dt_layer_spec stem[] = {conv_spec(3, 3, 1, 1),  spec_of("relu"),
                                       conv_spec(16, 3, 1, 1), spec_of("relu"),
                                       spec_of("flatten"),     linear_spec(3)};
        compare_on(DT_CONV2D_GEMM, stem, 6, IN, 5, DT_FUSE_NONE, DT_FUSE_RELU_BELOW, 1);
        compare_on(DT_CONV2D_GEMM, stem, 6, IN, 5, DT_FUSE_RELU | DT_FUSE_DY_EXTRA,
                   DT_FUSE_RELU_BELOW, 1);
        /* an emulated conv (1 channel, 9 deep: the ConvNet's first) below a relu and a tile
         * conv that runs the relu's backward, stride 1 and 2: the tile conv rounds dx per
         * sample, the emulated conv skips its rounding pass (dx_rounded); not without
         * relu_below, nor with a skip connection reading the relu's output */
        struct dt_shape one = {1, 9, 8};
        struct dt_layer_spec em[] = {conv_spec(16, 3, 1, 1), spec_of("relu"),
                                     conv_spec(16, 3, 1, 1), spec_of("relu"),
                                     spec_of("flatten"),     linear_spec(3)};
        unsigned below = DT_FUSE_RELU | DT_FUSE_RELU_BELOW;
        compare_on(DT_CONV2D_GEMM, em, 6, one, 5, below, DT_FUSE_DX_ROUNDED, 1);
        compare_on(DT_CONV2D_GEMM, em, 6, one, 5, DT_FUSE_ALL & ~DT_FUSE_DX_ROUNDED,
                   DT_FUSE_DX_ROUNDED, 1);
        compare_on(DT_CONV2D_GEMM, em, 6, one, 5, DT_FUSE_RELU, DT_FUSE_DX_ROUNDED, 0);
        em[2] = conv_spec(16, 3, 2, 1);
        compare_on(DT_CONV2D_GEMM, em, 6, one, 5, below, DT_FUSE_DX_ROUNDED, 1);
        struct dt_layer_spec skip[] = {
            conv_spec(16, 3, 1, 1), spec_of("relu"),    conv_spec(16, 3, 1, 1), spec_of("add"),
            spec_of("relu"),        spec_of("flatten"), linear_spec(3)};
        skip[3].from = -2;
        compare_on(DT_CONV2D_GEMM, skip, 7, one, 5, below, DT_FUSE_DX_ROUNDED, 0);
        bf16_stride2_fusions();
        dt_isa_force_bf16_path(was);
    }
    model_run_precision = DT_PRECISION_FP32;
}

/* conv2d (Winograd) -> batchnorm2d: the batchnorm's input gradient in the conv's backward. */
static void test_bn_grad(void **state)
{
    (void)state;
    struct dt_layer_spec s[16];
    int n = block(s);
    int winograd = convs_on(s, n, IN, DT_CONV2D_WINOGRAD);
    compare_on(DT_CONV2D_WINOGRAD, s, n, IN, 5, DT_FUSE_NONE, DT_FUSE_BN_GRAD, winograd);
    compare_on(DT_CONV2D_WINOGRAD, s, n, IN, 5, DT_FUSE_ALL & ~DT_FUSE_BN_GRAD, DT_FUSE_BN_GRAD,
               winograd);
    compare_on(DT_CONV2D_GEMM, s, n, IN, 5, DT_FUSE_NONE, DT_FUSE_BN_GRAD, 0);
}

/* A bf16 model's emulated convs on Winograd (the reference path here; on avx512bf16 its
 * stride-1 convs) round in the kernels and take the fp32 algorithm's fusions with the same
 * bits as without them: the batchnorm above's input gradient, the relu below (with a skip
 * gradient), the 2x2 pool in forward, and chunks; and they read an input stored as bf16. */
static void test_bf16_emulated_winograd(void **state)
{
    (void)state;
    model_run_precision = DT_PRECISION_BF16;
    enum dt_bf16_path was = dt_isa_force_bf16_path(DT_BF16_REFERENCE);
    struct dt_layer_spec b[16], r[16];
    int nb = block(b), nr = relu_skip(r, 16);
    int winograd = convs_on(b, nb, IN, DT_CONV2D_WINOGRAD);
    compare_on(DT_CONV2D_WINOGRAD, b, nb, IN, 5, DT_FUSE_NONE, DT_FUSE_BN_GRAD, winograd);
    compare_on(DT_CONV2D_WINOGRAD, b, nb, IN, 5, DT_FUSE_ALL & ~DT_FUSE_BN_GRAD, DT_FUSE_BN_GRAD,
               winograd);
    compare_on(DT_CONV2D_WINOGRAD, r, nr, IN, 5, DT_FUSE_RELU | DT_FUSE_DY_EXTRA,
               DT_FUSE_RELU_BELOW, winograd > 0);
    /* the batchnorm -> relu output the second conv reads (running the relu's backward) stored
     * as bf16, which the conv reads widened (at the batchnorm and the relu: 2) */
    compare_on(DT_CONV2D_WINOGRAD, b, nb, IN, 5, DT_FUSE_ALL & ~DT_FUSE_BF16_STORE,
               DT_FUSE_BF16_STORE, winograd == 2 ? 2 : 0);
    struct dt_layer_spec pool[] = {conv_spec(16, 3, 1, 1), spec_of("relu"),
                                   pool_spec("maxpool2d", 2, 0, 0), spec_of("flatten"),
                                   linear_spec(3)};
    struct dt_shape in = {8, 13, 11};
    compare_on(DT_CONV2D_WINOGRAD, pool, 5, in, 6, DT_FUSE_RELU, DT_FUSE_POOL,
               convs_on(pool, 5, in, DT_CONV2D_WINOGRAD));
    /* test_chunks' graph, at one thread (two take no runs) */
    struct dt_layer_spec c[] = {
        conv_spec(8, 3, 1, 0),           spec_of("relu"),    conv_spec(8, 3, 1, 0), spec_of("relu"),
        pool_spec("maxpool2d", 2, 0, 0), spec_of("flatten"), linear_spec(3)};
    struct dt_shape cin = {2, 20, 19};
    enum dt_conv2d_algo algo = dt_conv2d_force_algo(DT_CONV2D_WINOGRAD);
    dt_nn_set_threads(1);
    compare(c, 7, cin, 13, DT_FUSE_RELU | DT_FUSE_POOL, DT_FUSE_CHUNKS,
            convs_on(c, 7, cin, DT_CONV2D_WINOGRAD) == 2);
    dt_conv2d_force_algo(algo);
    dt_isa_force_bf16_path(was);
    model_run_precision = DT_PRECISION_FP32;
}

/* A relu whose output a skip connection reads adds the skip gradient in its own pass. */
static void test_dy_extra(void **state)
{
    (void)state;
    struct dt_layer_spec s[16];
    int n = relu_skip(s, 4);
    compare_on(DT_CONV2D_GEMM, s, n, IN, 5, DT_FUSE_NONE, DT_FUSE_DY_EXTRA, 1);
    compare_on(DT_CONV2D_GEMM, s, n, IN, 5, DT_FUSE_RELU, DT_FUSE_DY_EXTRA, 1);
    /* a concat reading the relu too */
    s[3] = spec_of("concat");
    s[3].from = -2;
    compare_on(DT_CONV2D_GEMM, s, n, IN, 5, DT_FUSE_NONE, DT_FUSE_DY_EXTRA, 1);
}

/* An identity add whose skip gradient the Winograd conv above the skip's source reads before
 * the add's dy buffer is written again: it stays there, with no buffer of its own. */
static void test_skip_in_dy(void **state)
{
    (void)state;
    struct dt_layer_spec s[16];
    int n = relu_skip(s, 16);
    int winograd = convs_on(s, n, IN, DT_CONV2D_WINOGRAD) > 0;
    compare_on(DT_CONV2D_WINOGRAD, s, n, IN, 5, DT_FUSE_RELU_BELOW, DT_FUSE_SKIP_IN_DY, winograd);
    struct dt_layer_spec b[16];
    int nb = block(b);
    compare_on(DT_CONV2D_WINOGRAD, b, nb, IN, 5, DT_FUSE_ALL & ~DT_FUSE_SKIP_IN_DY,
               DT_FUSE_SKIP_IN_DY, convs_on(b, nb, IN, DT_CONV2D_WINOGRAD) > 0);
    /* without the relu's backward in the conv, nothing reads the skip gradient in time */
    compare_on(DT_CONV2D_WINOGRAD, s, n, IN, 5, DT_FUSE_NONE, DT_FUSE_SKIP_IN_DY, 0);
}

/* conv2d -> relu -> conv2d -> relu -> maxpool2d on the direct path, chunk by chunk through
 * both convs, at one thread (two threads take no runs). */
static void test_chunks(void **state)
{
    (void)state;
    struct dt_layer_spec s[] = {
        conv_spec(8, 3, 1, 0),           spec_of("relu"),    conv_spec(8, 3, 1, 0), spec_of("relu"),
        pool_spec("maxpool2d", 2, 0, 0), spec_of("flatten"), linear_spec(3)};
    struct dt_shape in = {2, 20, 19};
    int direct = convs_on(s, 7, in, DT_CONV2D_DIRECT) == 2;
    enum dt_conv2d_algo was = dt_conv2d_force_algo(DT_CONV2D_DIRECT);
    dt_nn_set_threads(1);
    compare(s, 7, in, 13, DT_FUSE_RELU, DT_FUSE_CHUNKS, direct);
    compare(s, 7, in, 13, DT_FUSE_RELU | DT_FUSE_POOL, DT_FUSE_CHUNKS, direct);
    dt_nn_set_threads(2);
    compare(s, 7, in, 13, DT_FUSE_RELU, DT_FUSE_CHUNKS, 0);
    dt_conv2d_force_algo(was);
}

static void test_fusion_parse(void **state)
{
    (void)state;
    unsigned f;
    assert_int_equal(dt_fusion_parse("none", &f), 0);
    assert_int_equal(f, DT_FUSE_NONE);
    assert_int_equal(dt_fusion_parse("all", &f), 0);
    assert_int_equal(f, DT_FUSE_ALL);
    assert_int_equal(dt_fusion_parse("relu,pool", &f), 0);
    assert_int_equal(f, DT_FUSE_RELU | DT_FUSE_POOL);
    assert_int_equal(dt_fusion_parse("all,-pool,-chunks", &f), 0);
    assert_int_equal(f, DT_FUSE_ALL & ~(DT_FUSE_POOL | DT_FUSE_CHUNKS));
    assert_int_equal(dt_fusion_parse("relu_below,bn_grad,dy_extra,skip_in_dy,add", &f), 0);
    assert_int_equal(f, DT_FUSE_RELU_BELOW | DT_FUSE_BN_GRAD | DT_FUSE_DY_EXTRA |
                            DT_FUSE_SKIP_IN_DY | DT_FUSE_ADD);
    assert_int_equal(
        dt_fusion_parse("bn_grad,bf16_store,bn_input,view,bn_sums,add_sums,proj_dx", &f), 0);
    assert_int_equal(f, DT_FUSE_BN_GRAD | DT_FUSE_BF16_STORE | DT_FUSE_BN_INPUT | DT_FUSE_VIEW |
                            DT_FUSE_BN_SUMS | DT_FUSE_ADD_SUMS | DT_FUSE_PROJ_DX);
    assert_int_equal(dt_fusion_parse("relu,bogus", &f), -DT_EUSAGE);
    assert_non_null(strstr(dt_last_error(), "'bogus' is not a fusion"));
    assert_non_null(strstr(dt_last_error(), "skip_in_dy"));
    assert_int_equal(dt_fusion_parse("relu,", &f), -DT_EUSAGE);
    assert_non_null(strstr(dt_last_error(), "'' is not a fusion"));
    assert_int_equal(dt_fusion_parse("-", &f), -DT_EUSAGE);
}

/* DTRAIN_FUSE sets what dt_model_build fuses; a word it does not know fails the build. */
static void test_fuse_env(void **state)
{
    (void)state;
    struct dt_layer_spec s[] = {conv_spec(4, 3, 1, 1), spec_of("relu"), spec_of("flatten"),
                                linear_spec(3)};
    struct dt_model *m;
    setenv("DTRAIN_FUSE", "none", 1);
    assert_int_equal(dt_model_build(&m, s, 4, IN, 2, DT_LOSS_CROSS_ENTROPY, 1), 0);
    assert_false(m->plan[0].relu_at_store);
    dt_model_free(m);
    setenv("DTRAIN_FUSE", "all,-relu", 1);
    assert_int_equal(dt_model_build(&m, s, 4, IN, 2, DT_LOSS_CROSS_ENTROPY, 1), 0);
    assert_false(m->plan[0].relu_at_store);
    dt_model_free(m);
    setenv("DTRAIN_FUSE", "relu", 1);
    assert_int_equal(dt_model_build(&m, s, 4, IN, 2, DT_LOSS_CROSS_ENTROPY, 1), 0);
    assert_true(m->plan[0].relu_at_store);
    dt_model_free(m);
    setenv("DTRAIN_FUSE", "relu,fast", 1);
    assert_int_equal(dt_model_build(&m, s, 4, IN, 2, DT_LOSS_CROSS_ENTROPY, 1), -DT_EUSAGE);
    assert_null(m);
    assert_non_null(strstr(dt_last_error(), "DTRAIN_FUSE"));
    assert_non_null(strstr(dt_last_error(), "'fast' is not a fusion"));
    struct dt_model_memory mem;
    assert_int_equal(dt_model_estimate(s, 4, IN, 2, DT_LOSS_CROSS_ENTROPY, &mem), -DT_EUSAGE);
    unsetenv("DTRAIN_FUSE");
    assert_int_equal(dt_model_build(&m, s, 4, IN, 2, DT_LOSS_CROSS_ENTROPY, 1), 0);
    assert_true(m->plan[0].relu_at_store); /* every fusion by default */
    dt_model_free(m);
}

/* The input gradient against central differences of the loss, through a skip connection
 * from the input itself (a concat of the input and a conv of it) and one from a layer. */
static void test_input_grad(void **state)
{
    (void)state;
    enum { B = 2 };
    struct dt_layer_spec s[] = {conv_spec(3, 3, 1, 1), spec_of("add"), spec_of("concat"),
                                spec_of("flatten"), linear_spec(4)};
    s[1].from = -2; /* the input */
    s[2].from = -3; /* the input again */
    struct dt_shape in = {3, 4, 4};
    size_t nin = (size_t)B * 48;
    float x[B * 48];
    fill(x, nin, 5);
    uint8_t labels[B] = {1, 3};
    struct dt_model *m;
    struct dt_model_options opt = {.fusions = DT_FUSE_ALL, .input_grad = true};
    assert_int_equal(dt_model_build_with(&m, s, 5, in, B, DT_LOSS_CROSS_ENTROPY, 2, &opt), 0);
    struct dt_forward_ctx ctx = {.training = true};
    int correct;
    assert_int_equal(dt_model_forward(m, x, B, &ctx), 0);
    assert_int_equal(dt_model_backward(m, labels, B, 1.0f), 0);
    float ana[B * 48];
    memcpy(ana, m->input_grad, sizeof ana);
    double max_err = 0, max_ana = 1e-3;
    const float h = 1e-2f;
    for (size_t i = 0; i < nin; i++) {
        float keep = x[i];
        double plus, minus;
        x[i] = keep + h;
        assert_int_equal(dt_model_forward(m, x, B, &ctx), 0);
        dt_model_loss(m, labels, B, &plus, &correct);
        x[i] = keep - h;
        assert_int_equal(dt_model_forward(m, x, B, &ctx), 0);
        dt_model_loss(m, labels, B, &minus, &correct);
        x[i] = keep;
        double num = (plus - minus) / (2.0 * h);
        max_err = fmax(max_err, fabs(num - ana[i]));
        max_ana = fmax(max_ana, fabs(ana[i]));
    }
    if (!(max_err / max_ana <= 5e-3))
        fail_msg("input gradient: relative error %.3e", max_err / max_ana);
    dt_model_free(m);
    /* without the option there is none */
    assert_int_equal(dt_model_build(&m, s, 5, in, B, DT_LOSS_CROSS_ENTROPY, 2), 0);
    assert_int_equal(dt_model_forward(m, x, B, &ctx), 0);
    assert_int_equal(dt_model_backward(m, labels, B, 1.0f), 0);
    assert_null(m->input_grad);
    dt_model_free(m);
}

int main(void)
{
    unsetenv("DTRAIN_FUSE"); /* the cases set the fusions themselves */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relu),       cmocka_unit_test(test_view),
        cmocka_unit_test(test_pool),       cmocka_unit_test(test_add),
        cmocka_unit_test(test_relu_below), cmocka_unit_test(test_bf16_fusions),
        cmocka_unit_test(test_bn_grad),    cmocka_unit_test(test_bf16_emulated_winograd),
        cmocka_unit_test(test_dy_extra),   cmocka_unit_test(test_skip_in_dy),
        cmocka_unit_test(test_chunks),     cmocka_unit_test(test_fusion_parse),
        cmocka_unit_test(test_fuse_env),   cmocka_unit_test(test_input_grad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* nn/: model building (reference models' sizes, tensor names, build errors naming the layer),
 * initialisation, determinism, batch 0, the grad_scale contract, dropout keying, batchnorm
 * statistics and profiling. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"
#include "nn/model.h"
#include "nn_specs.h"
#include "util/err.h"
#include "util/rng.h"

static const struct dt_shape MNIST = {1, 28, 28}, CIFAR = {3, 32, 32};

static float *random_input(size_t n, uint64_t seed)
{
    float *x = malloc(n * sizeof *x);
    struct dt_rng r;
    dt_rng_init(&r, dt_rng_key(seed, DT_RNG_TEST, 0, 0));
    for (size_t i = 0; i < n; i++)
        x[i] = (float)dt_rng_normal(&r);
    return x;
}

static const struct dt_tensor_info *find_tensor(const struct dt_tensor_info *t, int n,
                                                const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(t[i].name, name) == 0)
            return &t[i];
    return NULL;
}

static void test_convnet_size_and_names(void **state)
{
    (void)state;
    struct dt_layer_spec s[16];
    int n = convnet_specs(s);
    struct dt_model *m;
    assert_int_equal(dt_model_build(&m, s, n, MNIST, 4, DT_LOSS_NLL, 1), 0);
    assert_int_equal(m->nparams, 300426);
    assert_int_equal(m->classes, 10);
    assert_int_equal(m->ntensors, 8);
    assert_int_equal(m->nbuffers, 0);
    const char *names[8] = {"layers.0.weight",  "layers.0.bias",   "layers.2.weight",
                            "layers.2.bias",    "layers.7.weight", "layers.7.bias",
                            "layers.10.weight", "layers.10.bias"};
    size_t offset = 0;
    for (int i = 0; i < 8; i++) { /* in order and contiguous, like parameters() */
        assert_string_equal(m->tensors[i].name, names[i]);
        assert_int_equal(m->tensors[i].offset, offset);
        offset += m->tensors[i].count;
    }
    assert_int_equal(offset, m->nparams);
    const struct dt_tensor_info *w = find_tensor(m->tensors, m->ntensors, "layers.2.weight");
    assert_int_equal(w->ndim, 4);
    assert_int_equal(w->shape[0], 32);
    assert_int_equal(w->shape[1], 16);
    assert_int_equal(w->shape[2], 3);
    assert_int_equal(w->shape[3], 3);
    w = find_tensor(m->tensors, m->ntensors, "layers.7.weight");
    assert_int_equal(w->ndim, 2);
    assert_int_equal(w->shape[0], 64);
    assert_int_equal(w->shape[1], 4608);
    dt_model_free(m);
}

static void test_cifar_cnn_size(void **state)
{
    (void)state;
    struct dt_layer_spec s[16];
    int n = cifar_cnn_specs(s);
    struct dt_model *m;
    assert_int_equal(dt_model_build(&m, s, n, CIFAR, 2, DT_LOSS_CROSS_ENTROPY, 1), 0);
    assert_int_equal(m->nparams, 2122186);
    assert_int_equal(m->classes, 10);
    dt_model_free(m);
}

static void test_batchnorm_tensors(void **state)
{
    (void)state;
    struct dt_layer_spec s[3] = {conv_spec(4, 3, 1, 1), spec_of("batchnorm2d"), linear_spec(3)};
    struct dt_model *m;
    assert_int_equal(dt_model_build(&m, s, 3, (struct dt_shape){2, 4, 4}, 2, DT_LOSS_NLL, 1), 0);
    assert_int_equal(m->nbuffers, 9);
    assert_int_equal(m->nbuffer_tensors, 3);
    assert_string_equal(m->buffer_tensors[0].name, "layers.1.running_mean");
    assert_string_equal(m->buffer_tensors[1].name, "layers.1.running_var");
    assert_string_equal(m->buffer_tensors[2].name, "layers.1.num_batches_tracked");
    assert_int_equal(m->buffer_tensors[2].ndim, 0);
    assert_int_equal(m->buffer_tensors[2].count, 1);
    const struct dt_tensor_info *g = find_tensor(m->tensors, m->ntensors, "layers.1.weight");
    const struct dt_tensor_info *b = find_tensor(m->tensors, m->ntensors, "layers.1.bias");
    for (int c = 0; c < 4; c++) {
        assert_true(m->params[g->offset + c] == 1.0f);
        assert_true(m->params[b->offset + c] == 0.0f);
        assert_true(m->buffers[c] == 0.0f);
        assert_true(m->buffers[4 + c] == 1.0f);
    }
    dt_model_free(m);
}

static void expect_build_error(const struct dt_layer_spec *s, int n, struct dt_shape in,
                               int max_batch, const char *message)
{
    struct dt_model *m = (struct dt_model *)1;
    assert_int_equal(dt_model_build(&m, s, n, in, max_batch, DT_LOSS_NLL, 1), -DT_EUSAGE);
    assert_null(m);
    assert_string_equal(dt_last_error(), message);
}

static void test_build_errors_name_the_layer(void **state)
{
    (void)state;
    struct dt_shape in = {1, 5, 5};
    struct dt_layer_spec s[2] = {spec_of("relu"), conv_spec(4, 7, 1, 0)};
    s[1].line = 12;
    expect_build_error(s, 2, in, 2,
                       "layer 1 (conv2d, config line 12): kernel 7 is larger than the padded "
                       "input 5x5 (padding 0)");
    s[1] = conv_spec(0, 3, 1, 0);
    expect_build_error(s, 2, in, 2, "layer 1 (conv2d): out_channels 0, expected >= 1");
    s[1] = conv_spec(2, 0, 1, 0);
    expect_build_error(s, 2, in, 2, "layer 1 (conv2d): kernel 0, expected >= 1");
    s[1] = conv_spec(2, 3, -1, 0);
    expect_build_error(s, 2, in, 2,
                       "layer 1 (conv2d): stride -1 / padding 0, expected stride >= 1, "
                       "padding >= 0");
    s[1] = pool_spec("maxpool2d", 3, 0, 2);
    expect_build_error(s, 2, in, 2, "layer 1 (maxpool2d): padding 2, expected 0 to kernel/2 = 1");
    s[1] = pool_spec("avgpool2d", 6, 0, 0);
    expect_build_error(s, 2, in, 2,
                       "layer 1 (avgpool2d): kernel 6 is larger than the padded input 5x5 "
                       "(padding 0)");
    s[1] = pool_spec("maxpool2d", 0, 0, 0);
    expect_build_error(s, 2, in, 2, "layer 1 (maxpool2d): kernel 0, expected >= 1");
    s[1] = pool_spec("maxpool2d", 2, -2, 0);
    expect_build_error(s, 2, in, 2, "layer 1 (maxpool2d): stride -2, expected >= 1");
    s[1] = linear_spec(0);
    expect_build_error(s, 2, in, 2, "layer 1 (linear): out_features 0, expected >= 1");
    s[1] = dropout_spec("dropout", 1.5f);
    expect_build_error(s, 2, in, 2, "layer 1 (dropout): p 1.5, expected 0 <= p <= 1");
    s[1] = dropout_spec("dropout2d", -0.1f);
    expect_build_error(s, 2, in, 2, "layer 1 (dropout2d): p -0.1, expected 0 <= p <= 1");
    s[1] = spec_of("batchnorm2d");
    s[1].eps = 0;
    expect_build_error(s, 2, in, 2, "layer 1 (batchnorm2d): eps 0, expected > 0");
    s[1] = spec_of("batchnorm2d");
    s[1].momentum = 2;
    expect_build_error(s, 2, in, 2, "layer 1 (batchnorm2d): momentum 2, expected 0 to 1");
    s[1] = spec_of("log_softmax");
    expect_build_error(s, 2, in, 2,
                       "layer 1 (log_softmax): input 1x5x5 is not flat; add a flatten layer "
                       "before it");
    s[0] = spec_of("softmax");
    s[0].line = 3;
    expect_build_error(s, 2, in, 2,
                       "layer 0 (softmax, config line 3): unknown layer type 'softmax' (known: "
                       "conv2d, linear, maxpool2d, avgpool2d, relu, dropout, dropout2d, "
                       "flatten, batchnorm2d, log_softmax, add, concat, global_avgpool, gelu)");
    expect_build_error(s, 0, in, 2, "model has 0 layers, expected 1 to 512");
    s[0] = spec_of("relu");
    expect_build_error(s, 1, in, 0, "batch size 0, expected at least 1");
    expect_build_error(s, 1, (struct dt_shape){0, 5, 5}, 2, "input shape 0x5x5 is empty");
}

static void test_init_distribution(void **state)
{
    (void)state;
    struct dt_layer_spec s[16];
    int n = convnet_specs(s);
    struct dt_model *m;
    assert_int_equal(dt_model_build(&m, s, n, MNIST, 2, DT_LOSS_NLL, 42), 0);
    /* layers.7.weight: 64 x 4608, U(-b, b) with b = 1/sqrt(4608): mean 0, variance b^2/3. */
    const struct dt_tensor_info *w = find_tensor(m->tensors, m->ntensors, "layers.7.weight");
    double b = 1.0 / sqrt(4608.0), sum = 0, sq = 0, max = 0;
    for (size_t i = 0; i < w->count; i++) {
        double v = m->params[w->offset + i];
        sum += v, sq += v * v, max = fmax(max, fabs(v));
    }
    double mean = sum / w->count, var = sq / w->count;
    assert_true(max <= b && max > 0.999 * b);
    assert_true(fabs(mean) < 0.01 * b);
    assert_true(fabs(var / (b * b / 3) - 1) < 0.01);
    const struct dt_tensor_info *bias = find_tensor(m->tensors, m->ntensors, "layers.2.bias");
    double bb = 1.0 / sqrt(16 * 9.0);
    for (size_t i = 0; i < bias->count; i++)
        assert_true(fabs(m->params[bias->offset + i]) <= bb);
    dt_model_free(m);
}

static void test_same_seed_same_params(void **state)
{
    (void)state;
    struct dt_layer_spec s[16];
    int n = convnet_specs(s);
    struct dt_model *a, *b, *c;
    assert_int_equal(dt_model_build(&a, s, n, MNIST, 2, DT_LOSS_NLL, 9), 0);
    assert_int_equal(dt_model_build(&b, s, n, MNIST, 5, DT_LOSS_NLL, 9), 0);
    assert_int_equal(dt_model_build(&c, s, n, MNIST, 2, DT_LOSS_NLL, 10), 0);
    assert_memory_equal(a->params, b->params, a->nparams * sizeof(float));
    assert_true(memcmp(a->params, c->params, a->nparams * sizeof(float)) != 0);
    dt_model_free(a);
    dt_model_free(b);
    dt_model_free(c);
}

/* Two full training steps on the same inputs give bit-identical outputs and gradients (and,
 * since nothing is allocated per step, no stale state leaks between steps). */
static void test_steps_are_repeatable(void **state)
{
    (void)state;
    enum { B = 3 };
    struct dt_layer_spec s[16];
    int n = convnet_specs(s);
    struct dt_model *m;
    assert_int_equal(dt_model_build(&m, s, n, MNIST, B, DT_LOSS_NLL, 3), 0);
    float *x = random_input(B * 784, 1);
    uint8_t labels[B] = {3, 7, 0};
    uint64_t ids[B] = {10, 11, 12};
    struct dt_forward_ctx ctx = {.training = true, .seed = 1, .epoch = 0, .sample_ids = ids};
    float out[B * 10], *grads = malloc(m->nparams * sizeof(float));
    double loss1, loss2;
    int c1, c2;
    assert_int_equal(dt_model_forward(m, x, B, &ctx), 0);
    memcpy(out, m->output, sizeof out);
    dt_model_loss(m, labels, B, &loss1, &c1);
    assert_int_equal(dt_model_backward(m, labels, B, 1.0f / B), 0);
    memcpy(grads, m->grads, m->nparams * sizeof(float));
    assert_int_equal(dt_model_forward(m, x, B, &ctx), 0);
    assert_memory_equal(out, m->output, sizeof out);
    dt_model_loss(m, labels, B, &loss2, &c2);
    assert_true(loss1 == loss2 && c1 == c2);
    assert_true(loss1 > 0 && isfinite(loss1));
    assert_int_equal(dt_model_backward(m, labels, B, 1.0f / B), 0);
    assert_memory_equal(grads, m->grads, m->nparams * sizeof(float));
    free(grads);
    free(x);
    dt_model_free(m);
}

static void test_batch_zero(void **state)
{
    (void)state;
    struct dt_layer_spec s[16];
    int n = cifar_cnn_specs(s);
    struct dt_model *m;
    assert_int_equal(dt_model_build(&m, s, n, CIFAR, 2, DT_LOSS_CROSS_ENTROPY, 3), 0);
    float *x = random_input(2 * 3072, 2);
    uint8_t labels[2] = {1, 2};
    struct dt_forward_ctx ctx = {.training = true};
    assert_int_equal(dt_model_forward(m, x, 2, &ctx), 0);
    assert_int_equal(dt_model_backward(m, labels, 2, 0.5f), 0);
    assert_int_equal(dt_model_forward(m, NULL, 0, &ctx), 0);
    double loss = -1;
    int correct = -1;
    dt_model_loss(m, NULL, 0, &loss, &correct);
    assert_true(loss == 0 && correct == 0);
    assert_int_equal(dt_model_backward(m, NULL, 0, 1.0f), 0);
    for (size_t i = 0; i < m->nparams; i++)
        assert_true(m->grads[i] == 0.0f);
    free(x);
    dt_model_free(m);
}

static void test_step_errors(void **state)
{
    (void)state;
    struct dt_layer_spec s[1] = {linear_spec(3)};
    struct dt_model *m;
    assert_int_equal(dt_model_build(&m, s, 1, (struct dt_shape){4, 1, 1}, 2, DT_LOSS_NLL, 1), 0);
    float x[8] = {0};
    assert_int_equal(dt_model_forward(m, x, 3, NULL), -DT_EUSAGE);
    assert_string_equal(dt_last_error(), "forward of 3 samples, the model was built for at most 2");
    assert_int_equal(dt_model_forward(m, x, 2, NULL), 0);
    uint8_t labels[2] = {0, 3};
    assert_int_equal(dt_model_backward(m, labels, 1, 1.0f), -DT_EUSAGE);
    assert_string_equal(dt_last_error(), "backward of 1 samples after a forward of 2");
    assert_int_equal(dt_model_backward(m, labels, 2, 1.0f), -DT_EDATA);
    assert_string_equal(dt_last_error(),
                        "sample 1 of the batch: label 3 is not below the 3 classes");
    double loss;
    int correct;
    dt_model_loss(m, labels, 2, &loss, &correct);
    assert_true(isnan(loss));
    dt_model_free(m);
}

/* Gradients of a batch of 4 with grad_scale 1/4 equal the sum of two half-batch backwards
 * with the same scale: what a sum all-reduce across 2 ranks computes. */
static void test_grad_scale_splits_across_ranks(void **state)
{
    (void)state;
    enum { B = 4 };
    struct dt_layer_spec s[16];
    int n = cifar_cnn_specs(s);
    s[7] = linear_spec(16); /* keep it small */
    struct dt_model *m;
    assert_int_equal(dt_model_build(&m, s, n, CIFAR, B, DT_LOSS_CROSS_ENTROPY, 5), 0);
    float *x = random_input(B * 3072, 3);
    uint8_t labels[B] = {1, 2, 3, 4};
    struct dt_forward_ctx ctx = {.training = true};
    float *full = malloc(m->nparams * sizeof(float));
    float *halves = calloc(m->nparams, sizeof(float));
    assert_int_equal(dt_model_forward(m, x, B, &ctx), 0);
    assert_int_equal(dt_model_backward(m, labels, B, 1.0f / B), 0);
    memcpy(full, m->grads, m->nparams * sizeof(float));
    for (int h = 0; h < 2; h++) {
        assert_int_equal(dt_model_forward(m, x + h * 2 * 3072, 2, &ctx), 0);
        assert_int_equal(dt_model_backward(m, labels + 2 * h, 2, 1.0f / B), 0);
        for (size_t i = 0; i < m->nparams; i++)
            halves[i] += m->grads[i];
    }
    double err = 0, norm = 0;
    for (size_t i = 0; i < m->nparams; i++) {
        err = fmax(err, fabs(full[i] - halves[i]));
        norm = fmax(norm, fabs(full[i]));
    }
    assert_true(norm > 0 && err / norm < 1e-5);
    free(full);
    free(halves);
    free(x);
    dt_model_free(m);
}

/* A sample's dropout mask depends on its id, not its position in the batch; eval is the
 * identity; about 1 - p of the values survive, scaled by 1 / (1 - p). */
static void test_dropout_masks_follow_the_sample(void **state)
{
    (void)state;
    enum { B = 3, N = 4000 };
    struct dt_layer_spec s[1] = {dropout_spec("dropout", 0.25f)};
    struct dt_model *m;
    assert_int_equal(dt_model_build(&m, s, 1, (struct dt_shape){N, 1, 1}, B, DT_LOSS_NLL, 1), 0);
    float *x = malloc(B * N * sizeof(float)), *first = malloc(B * N * sizeof(float));
    for (int i = 0; i < B * N; i++)
        x[i] = 1.0f;
    uint64_t ids[B] = {5, 6, 7}, swapped[B] = {7, 6, 5};
    struct dt_forward_ctx ctx = {.training = true, .seed = 4, .epoch = 2, .sample_ids = ids};
    assert_int_equal(dt_model_forward(m, x, B, &ctx), 0);
    memcpy(first, m->output, B * N * sizeof(float));
    int kept = 0;
    for (int i = 0; i < B * N; i++) {
        assert_true(first[i] == 0.0f || first[i] == 1.0f / 0.75f);
        kept += first[i] != 0.0f;
    }
    assert_true(fabs((double)kept / (B * N) - 0.75) < 0.02);
    ctx.sample_ids = swapped;
    assert_int_equal(dt_model_forward(m, x, B, &ctx), 0);
    assert_memory_equal(m->output, first + 2 * N, N * sizeof(float));
    assert_memory_equal(m->output + 2 * N, first, N * sizeof(float));
    ctx.epoch = 3; /* a new epoch draws new masks */
    assert_int_equal(dt_model_forward(m, x, B, &ctx), 0);
    assert_true(memcmp(m->output + 2 * N, first, N * sizeof(float)) != 0);
    assert_int_equal(dt_model_forward(m, x, B, NULL), 0);
    assert_memory_equal(m->output, x, B * N * sizeof(float));
    free(x);
    free(first);
    dt_model_free(m);
}

static void test_batchnorm_running_stats(void **state)
{
    (void)state;
    enum { B = 4 };
    struct dt_layer_spec s[1] = {spec_of("batchnorm2d")};
    struct dt_model *m;
    assert_int_equal(dt_model_build(&m, s, 1, (struct dt_shape){1, 1, 1}, B, DT_LOSS_NLL, 1), 0);
    float x[B] = {1, 2, 3, 6}; /* mean 3, biased var 3.5, unbiased 14/3 */
    struct dt_forward_ctx train = {.training = true};
    assert_int_equal(dt_model_forward(m, x, B, &train), 0);
    assert_float_equal(m->buffers[0], 0.3, 1e-6);
    assert_float_equal(m->buffers[1], 0.9 + 0.1 * 14.0 / 3.0, 1e-6);
    assert_float_equal(m->buffers[2], 1.0, 0);
    assert_float_equal(m->output[0], -2.0 / sqrt(3.5 + 1e-5), 1e-5);
    assert_int_equal(dt_model_forward(m, x, B, NULL), 0); /* eval: running stats, no update */
    assert_float_equal(m->buffers[2], 1.0, 0);
    assert_float_equal(m->output[0], (1 - 0.3) / sqrt(m->buffers[1] + 1e-5), 1e-5);
    dt_model_free(m);
}

static void test_profile_accumulates(void **state)
{
    (void)state;
    struct dt_layer_spec s[16];
    int n = convnet_specs(s);
    struct dt_model *m;
    assert_int_equal(dt_model_build(&m, s, n, MNIST, 2, DT_LOSS_NLL, 1), 0);
    m->profile = true;
    float *x = random_input(2 * 784, 4);
    uint8_t labels[2] = {1, 2};
    struct dt_forward_ctx ctx = {.training = true};
    assert_int_equal(dt_model_forward(m, x, 2, &ctx), 0);
    assert_int_equal(dt_model_backward(m, labels, 2, 0.5f), 0);
    /* the two relus after the convs are fused into them: no forward of their own; where the
     * conv also runs the maxpool forward, the pool's backward applies the relu's mask, and a
     * Winograd conv above a relu runs the relu's backward (relu_below either way); the
     * flatten is a view of its input (no forward) */
    assert_true(m->plan[0].relu_at_store && m->plan[2].relu_at_store);
    assert_false(m->plan[7].relu_at_store); /* linear does not fuse */
    assert_true(m->plan[6].in_place);       /* flatten */
    for (int i = 0; i < n; i++) {
        bool pooled = i > 1 && m->plan[i - 2].runs_pool;
        bool no_fwd = m->plan[i].in_place || pooled;
        bool no_bwd = i + 1 < n && m->plan[i + 1].relu_below;
        assert_true(no_fwd ? m->profile_fwd[i] == 0 : m->profile_fwd[i] > 0);
        assert_true(no_bwd ? m->profile_bwd[i] == 0 : m->profile_bwd[i] > 0);
    }
    free(x);
    dt_model_free(m);
}

/* The memory a model takes is known before any of it is allocated: dt_model_estimate sets
 * the layers up and counts their scratch (im2col columns, pooling indices, dropout masks)
 * without allocating a batch of anything, and the build allocates what it counted. */
static void test_memory_estimate(void **state)
{
    (void)state;
    enum dt_conv2d_algo old = dt_conv2d_force_algo(DT_CONV2D_GEMM);
    struct dt_layer_spec s[5] = {conv_spec(4, 3, 1, 0), pool_spec("maxpool2d", 2, 0, 0),
                                 dropout_spec("dropout", 0.5f), spec_of("flatten"),
                                 linear_spec(10)};
    struct dt_shape in = {1, 8, 8};
    /* per sample: im2col 36 x (9 + 4) floats, 36 int32 indices, 36 mask bytes */
    const double scratch = 36 * 13 * 4 + 36 * 4 + 36;
    struct dt_model_memory est, huge;
    assert_int_equal(dt_model_estimate(s, 5, in, 16, DT_LOSS_CROSS_ENTROPY, &est), 0);
    assert_true(est.scratch == 16 * scratch);
    assert_true(est.params == 4.0 * (4 * 9 + 4 + 36 * 10 + 10));
    struct dt_model *m;
    assert_int_equal(dt_model_build(&m, s, 5, in, 16, DT_LOSS_CROSS_ENTROPY, 1), 0);
    assert_memory_equal(&m->memory, &est, sizeof est);
    dt_model_free(m);
    /* 2^30 samples: over 2 TB of scratch alone, counted, not allocated */
    assert_int_equal(dt_model_estimate(s, 5, in, 1 << 30, DT_LOSS_CROSS_ENTROPY, &huge), 0);
    assert_true(huge.scratch == (double)(1 << 30) * scratch);
    assert_true(huge.activations == est.activations / 16 * (1 << 30));
    assert_true(huge.params == est.params);
    /* shape errors are the build's */
    s[1] = pool_spec("maxpool2d", 9, 0, 0);
    assert_int_equal(dt_model_estimate(s, 5, in, 16, DT_LOSS_CROSS_ENTROPY, &est), -DT_EUSAGE);
    dt_conv2d_force_algo(old);
}

/* Built straight into caller storage (the ranks' shared copy): the same initial weights as a
 * model of its own, sized by dt_model_estimate with nothing built, left alone by the free;
 * storage too small for the parameters is refused. */
static void test_build_in_storage(void **state)
{
    (void)state;
    struct dt_layer_spec s[16];
    int n = convnet_specs(s);
    struct dt_model_memory mem;
    assert_int_equal(dt_model_estimate(s, n, MNIST, 4, DT_LOSS_NLL, &mem), 0);
    size_t floats = (size_t)(mem.params / sizeof(float));
    float *storage = malloc((floats + 1) * sizeof(float));
    assert_non_null(storage);
    storage[floats] = 12345.0f;
    struct dt_model *own, *in;
    assert_int_equal(dt_model_build(&own, s, n, MNIST, 4, DT_LOSS_NLL, 7), 0);
    assert_int_equal(dt_model_build_in(&in, s, n, MNIST, 2, DT_LOSS_NLL, 7, storage, floats, NULL),
                     0);
    assert_int_equal(own->nparams, floats);
    assert_ptr_equal(in->params, storage);
    assert_memory_equal(own->params, storage, floats * sizeof(float));
    assert_true(storage[floats] == 12345.0f); /* nothing written past the parameters */
    dt_model_free(in);
    dt_model_free(own);
    assert_true(storage[0] == storage[0]); /* still ours to read: the model did not free it */
    assert_int_equal(
        dt_model_build_in(&in, s, n, MNIST, 2, DT_LOSS_NLL, 7, storage, floats - 1, NULL),
        -DT_ERUNTIME);
    assert_null(in);
    free(storage);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_convnet_size_and_names),
        cmocka_unit_test(test_build_in_storage),
        cmocka_unit_test(test_cifar_cnn_size),
        cmocka_unit_test(test_batchnorm_tensors),
        cmocka_unit_test(test_build_errors_name_the_layer),
        cmocka_unit_test(test_init_distribution),
        cmocka_unit_test(test_same_seed_same_params),
        cmocka_unit_test(test_steps_are_repeatable),
        cmocka_unit_test(test_batch_zero),
        cmocka_unit_test(test_step_errors),
        cmocka_unit_test(test_grad_scale_splits_across_ranks),
        cmocka_unit_test(test_dropout_masks_follow_the_sample),
        cmocka_unit_test(test_batchnorm_running_stats),
        cmocka_unit_test(test_profile_accumulates),
        cmocka_unit_test(test_memory_estimate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

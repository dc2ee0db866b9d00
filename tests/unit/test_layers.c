/* nn/: forward values of each layer kind on hand-computed cases (padding conventions, pooling
 * divisors, numerical stability of the losses), the kind table, and batchnorm's bits on every
 * instruction-set path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "nn/kernels/isa.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/model.h"
#include "nn_specs.h"

/* Builds a one-layer model, sets its parameters, runs an eval forward. */
static struct dt_model *run_one(struct dt_layer_spec spec, struct dt_shape in, int batch,
                                const float *params, const float *x)
{
    struct dt_model *m;
    assert_int_equal(dt_model_build(&m, &spec, 1, in, batch, DT_LOSS_NLL, 1), 0);
    if (params)
        memcpy(m->params, params, m->nparams * sizeof(float));
    assert_int_equal(dt_model_forward(m, x, batch, NULL), 0);
    return m;
}

static void expect_floats(const float *got, const float *want, int n)
{
    for (int i = 0; i < n; i++)
        assert_float_equal(got[i], want[i], 1e-5);
}

static void test_kind_table_is_complete(void **state)
{
    (void)state;
    const char *names[] = {"conv2d",  "linear",    "maxpool2d", "avgpool2d",   "relu",
                           "dropout", "dropout2d", "flatten",   "batchnorm2d", "log_softmax"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const struct dt_layer_kind *k = dt_layer_kind_find(names[i]);
        assert_non_null(k);
        assert_non_null(k->ops);
        assert_non_null(strstr(dt_layer_kind_names(), names[i]));
    }
    assert_null(dt_layer_kind_find("softmax"));
}

static void test_conv2d_values(void **state)
{
    (void)state;
    /* 1 -> 1 channel, k2, stride 2, padding 1 on a 3x3 input: the 2x2 output windows cover
     * {pad,pad,pad,x0}, {pad,pad,x1,x2}, {pad,x3,pad,x6}, {x4,x5,x7,x8}. */
    float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    float p[5] = {1, 2, 3, 4, 0.5f}; /* weight [[1,2],[3,4]], bias 0.5 */
    struct dt_model *m = run_one(conv_spec(1, 2, 2, 1), (struct dt_shape){1, 3, 3}, 1, p, x);
    float want[4] = {4 * 1 + 0.5f, 3 * 2 + 4 * 3 + 0.5f, 2 * 4 + 4 * 7 + 0.5f,
                     1 * 5 + 2 * 6 + 3 * 8 + 4 * 9 + 0.5f};
    assert_int_equal(m->classes, 4);
    expect_floats(m->output, want, 4);
    dt_model_free(m);
}

static void test_conv2d_without_bias_has_one_tensor(void **state)
{
    (void)state;
    struct dt_layer_spec s = conv_spec(2, 3, 1, 0);
    s.bias = false;
    struct dt_model *m;
    assert_int_equal(dt_model_build(&m, &s, 1, (struct dt_shape){3, 4, 4}, 1, DT_LOSS_NLL, 1), 0);
    assert_int_equal(m->ntensors, 1);
    assert_int_equal(m->nparams, 2 * 3 * 9);
    dt_model_free(m);
}

static void test_linear_values(void **state)
{
    (void)state;
    float x[4] = {1, 2, 3, 4}; /* two samples of 2 */
    float p[6 + 3] = {1, 0, 0, 1, 1, 1, 10, 20, 30};
    struct dt_model *m = run_one(linear_spec(3), (struct dt_shape){2, 1, 1}, 2, p, x);
    float want[6] = {11, 22, 33, 13, 24, 37};
    expect_floats(m->output, want, 6);
    dt_model_free(m);
}

static void test_maxpool_pads_with_minus_infinity(void **state)
{
    (void)state;
    float x[4] = {-1, -2, -3, -4};
    struct dt_model *m =
        run_one(pool_spec("maxpool2d", 2, 1, 1), (struct dt_shape){1, 2, 2}, 1, NULL, x);
    float want[9] = {-1, -1, -2, -1, -1, -2, -3, -3, -4};
    expect_floats(m->output, want, 9);
    dt_model_free(m);
}

static void test_avgpool_counts_padding(void **state)
{
    (void)state;
    float x[4] = {4, 8, 12, 16};
    struct dt_model *m =
        run_one(pool_spec("avgpool2d", 2, 0, 1), (struct dt_shape){1, 2, 2}, 1, NULL, x);
    float want[4] = {1, 2, 3, 4}; /* each window holds one value and three padded zeros */
    expect_floats(m->output, want, 4);
    dt_model_free(m);
}

static void test_relu_and_flatten(void **state)
{
    (void)state;
    float x[4] = {-1, 0, 2, -3};
    struct dt_model *m = run_one(spec_of("relu"), (struct dt_shape){1, 2, 2}, 1, NULL, x);
    float want[4] = {0, 0, 2, 0};
    expect_floats(m->output, want, 4);
    dt_model_free(m);
    m = run_one(spec_of("flatten"), (struct dt_shape){1, 2, 2}, 1, NULL, x);
    assert_int_equal(m->classes, 4);
    assert_int_equal(m->layers[0]->out.c, 4);
    expect_floats(m->output, x, 4);
    dt_model_free(m);
}

static void test_log_softmax_is_stable(void **state)
{
    (void)state;
    float x[3] = {1000, 1001, 1002};
    struct dt_model *m = run_one(spec_of("log_softmax"), (struct dt_shape){3, 1, 1}, 1, NULL, x);
    double s = 0;
    for (int k = 0; k < 3; k++) {
        assert_true(isfinite(m->output[k]));
        s += exp(m->output[k]);
    }
    /* float32 spacing near 1000 is 6e-5: that, not the method, bounds the error */
    assert_float_equal(s, 1.0, 1e-4);
    assert_float_equal(m->output[2], -log(1 + exp(-1) + exp(-2)), 1e-4);
    dt_model_free(m);
}

static void test_losses_are_stable(void **state)
{
    (void)state;
    float logits[4] = {1000, 0, 0, 1000};
    uint8_t labels[2] = {0, 0};
    int correct;
    double sum = dt_loss_sum(DT_LOSS_CROSS_ENTROPY, 0.0f, logits, 2, labels, 2, &correct);
    assert_float_equal(sum, 1000.0, 1e-6);
    assert_int_equal(correct, 1);
    float d[4];
    assert_int_equal(dt_loss_grad(DT_LOSS_CROSS_ENTROPY, 0.0f, logits, 2, labels, 2, 0.5f, d), 0);
    float want[4] = {0, 0, -0.5f, 0.5f};
    expect_floats(d, want, 4);
    float logp[4] = {-0.1f, -2.3f, -1.2f, -0.4f};
    sum = dt_loss_sum(DT_LOSS_NLL, 0.0f, logp, 2, labels, 2, &correct);
    assert_float_equal(sum, 1.3, 1e-6);
    assert_int_equal(correct, 1);
    assert_int_equal(dt_loss_grad(DT_LOSS_NLL, 0.0f, logp, 2, labels, 2, 1.0f, d), 0);
    float want_nll[4] = {-1, 0, -1, 0};
    expect_floats(d, want_nll, 4);
}

/* What a batchnorm model computes in two training steps and an eval pass, to compare paths. */
struct bn_run {
    float out[2][6 * 10], grads[2][1100], buffers[32], eval[6 * 10];
};

static void run_batchnorms(struct bn_run *r)
{
    /* batchnorm -> relu (fused into its store), batchnorm (unfused) -> linear; planes of 5x7
     * leave a tail after whole vectors at every width */
    struct dt_layer_spec s[5] = {spec_of("batchnorm2d"), spec_of("relu"), spec_of("batchnorm2d"),
                                 spec_of("flatten"), linear_spec(10)};
    struct dt_shape in = {3, 5, 7};
    enum { BATCH = 6, N = BATCH * 3 * 5 * 7 };
    struct dt_model *m;
    assert_int_equal(dt_model_build(&m, s, 5, in, BATCH, DT_LOSS_CROSS_ENTROPY, 7), 0);
    assert_true(m->nparams <= 1100 && m->nbuffers <= 32);
    static float x[N];
    uint8_t y[BATCH];
    for (int i = 0; i < N; i++) /* an offset, so the running mean's shift matters at step 2 */
        x[i] = 3.0f + sinf(0.37f * (float)i) * (1.0f + (float)(i % 5));
    for (int b = 0; b < BATCH; b++)
        y[b] = (uint8_t)(b * 3 % 10);
    struct dt_forward_ctx ctx = {.training = true, .seed = 1};
    for (int step = 0; step < 2; step++) {
        assert_int_equal(dt_model_forward(m, x, BATCH, &ctx), 0);
        memcpy(r->out[step], m->output, sizeof r->out[step]);
        assert_int_equal(dt_model_backward(m, y, BATCH, 1.0f / BATCH), 0);
        memcpy(r->grads[step], m->grads, m->nparams * sizeof(float));
        for (size_t i = 0; i < m->nparams; i++) /* an update, so step 2 sees new gamma, beta */
            m->params[i] -= 0.1f * m->grads[i];
    }
    memcpy(r->buffers, m->buffers, m->nbuffers * sizeof(float));
    assert_int_equal(dt_model_forward(m, x, BATCH, NULL), 0);
    memcpy(r->eval, m->output, sizeof r->eval);
    dt_model_free(m);
}

/* batchnorm's loops are built once per instruction-set path (nn/kernels/fp32/batchnorm.isa.c);
 * every path this CPU runs must give the portable build's bits. */
static void test_batchnorm_same_bits_on_every_isa(void **state)
{
    (void)state;
    char err[256];
    enum dt_isa was = dt_isa_get();
    static struct bn_run want, got;
    memset(&want, 0, sizeof want);
    assert_int_equal(dt_isa_set(DT_ISA_GENERIC, err, sizeof err), 0);
    run_batchnorms(&want);
    int compared = 0;
    for (int isa = DT_ISA_GENERIC + 1; isa < DT_ISA_COUNT; isa++) {
        if (!dt_isa_available((enum dt_isa)isa))
            continue;
        assert_int_equal(dt_isa_set((enum dt_isa)isa, err, sizeof err), 0);
        memset(&got, 0, sizeof got);
        run_batchnorms(&got);
        assert_memory_equal(&got, &want, sizeof want);
        compared++;
    }
    print_message("batchnorm: %d instruction-set path(s) compared with the portable one\n",
                  compared);
    assert_true(want.out[1][0] != want.out[0][0]); /* the steps did something */
    assert_int_equal(dt_isa_set(was, err, sizeof err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kind_table_is_complete),
        cmocka_unit_test(test_conv2d_values),
        cmocka_unit_test(test_conv2d_without_bias_has_one_tensor),
        cmocka_unit_test(test_linear_values),
        cmocka_unit_test(test_maxpool_pads_with_minus_infinity),
        cmocka_unit_test(test_avgpool_counts_padding),
        cmocka_unit_test(test_relu_and_flatten),
        cmocka_unit_test(test_log_softmax_is_stable),
        cmocka_unit_test(test_losses_are_stable),
        cmocka_unit_test(test_batchnorm_same_bits_on_every_isa),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

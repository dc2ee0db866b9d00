/* nn/: finite-difference gradient checks for every layer kind (input and parameter gradients)
 * and both losses.
 *
 * Layer checks use the scalar objective L = sum_i r_i * y_i (r fixed random), so dL/dy = r is
 * fed to backward. Each input and parameter element is moved by +-H; the central difference
 * (L+ - L-) / 2H, with L summed in double from the float32 outputs, must match the analytic
 * gradient: max_i |num_i - ana_i| <= TOL * max(max_i |ana_i|, 1e-3) per tensor (TOL = 5e-3).
 * Inputs are a permutation of evenly spaced values (spacing >= 4/n, none closer to 0 than
 * 2/n), and H is below half of that spacing, so no perturbation crosses a ReLU kink or
 * changes a max-pool winner. Model-level checks (losses included) perturb parameters only.
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

#include "nn/layers.h"
#include "nn/model.h"
#include "nn_specs.h"
#include "util/rng.h"

#define H   3e-3
#define TOL 5e-3

struct fixture {
    struct dt_model *m;
    struct dt_layer *l;
    int batch;
    size_t nin, nout;
    float *x, *y, *dx, *r;
    struct dt_layer_fwd ctx;
    uint64_t ids[8];
};

static void fill_distinct(float *x, size_t n, uint64_t seed)
{
    struct dt_rng rng;
    dt_rng_init(&rng, dt_rng_key(seed, DT_RNG_TEST, 1, 0));
    for (size_t i = 0; i < n; i++)
        x[i] = (float)i;
    for (size_t i = n; i > 1; i--) { /* Fisher-Yates */
        size_t j = (size_t)dt_rng_below(&rng, i);
        float t = x[i - 1];
        x[i - 1] = x[j];
        x[j] = t;
    }
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(((x[i] + 0.5) / n - 0.5) * 4.0);
}

static void fill_normal(float *x, size_t n, uint64_t seed)
{
    struct dt_rng rng;
    dt_rng_init(&rng, dt_rng_key(seed, DT_RNG_TEST, 2, 0));
    for (size_t i = 0; i < n; i++)
        x[i] = (float)dt_rng_normal(&rng);
}

static double objective(struct fixture *f)
{
    f->l->kind->ops->forward(f->l, f->x, f->y, f->batch, &f->ctx);
    double s = 0;
    for (size_t i = 0; i < f->nout; i++)
        s += (double)f->r[i] * f->y[i];
    return s;
}

/* Compares the central differences of objective() over v[0..n) with ana[0..n). */
static void check_tensor(struct fixture *f, float *v, const float *ana, size_t n, const char *what)
{
    double max_err = 0, max_ana = 1e-3;
    for (size_t i = 0; i < n; i++) {
        float keep = v[i];
        v[i] = keep + (float)H;
        double plus = objective(f);
        v[i] = keep - (float)H;
        double minus = objective(f);
        v[i] = keep;
        double num = (plus - minus) / (2 * H);
        max_err = fmax(max_err, fabs(num - ana[i]));
        max_ana = fmax(max_ana, fabs(ana[i]));
    }
    double rel = max_err / max_ana;
    printf("  %-40s %-12s rel err %.2e\n", f->l->kind->name, what, rel);
    if (!(rel <= TOL))
        fail_msg("%s %s: relative error %.3e > %.1e", f->l->kind->name, what, rel, TOL);
}

static void gradcheck_layer(struct dt_layer_spec spec, struct dt_shape in, int batch, bool training)
{
    struct fixture f = {.batch = batch};
    assert_int_equal(dt_model_build(&f.m, &spec, 1, in, batch, DT_LOSS_NLL, 7), 0);
    f.l = f.m->layers[0];
    f.nin = (size_t)batch * in.c * in.h * in.w;
    f.nout = (size_t)batch * f.l->out.c * f.l->out.h * f.l->out.w;
    f.x = calloc(f.nin, sizeof(float));
    f.dx = calloc(f.nin, sizeof(float));
    f.y = calloc(f.nout, sizeof(float));
    f.r = calloc(f.nout, sizeof(float));
    float *grads = calloc(f.l->nparams + 1, sizeof(float));
    for (int b = 0; b < batch; b++)
        f.ids[b] = 100 + 3 * (uint64_t)b;
    f.ctx.run =
        (struct dt_forward_ctx){.training = training, .seed = 5, .epoch = 2, .sample_ids = f.ids};
    fill_distinct(f.x, f.nin, 11);
    fill_normal(f.r, f.nout, 12);
    if (f.l->nparams) /* move batchnorm's gamma/beta off their 1/0 init */
        fill_normal(f.l->params, f.l->nparams, 13);

    objective(&f);
    f.l->kind->ops->backward(f.l, f.x, f.y, f.r, f.dx, batch, &(struct dt_layer_bwd){0});
    memcpy(grads, f.l->grads, f.l->nparams * sizeof(float));
    check_tensor(&f, f.x, f.dx, f.nin, "input");
    if (f.l->nparams)
        check_tensor(&f, f.l->params, grads, f.l->nparams, "params");
    free(grads);
    free(f.x);
    free(f.dx);
    free(f.y);
    free(f.r);
    dt_model_free(f.m);
}

static void test_conv2d_stride2_padding(void **state)
{
    (void)state;
    struct dt_layer_spec s = spec_of("conv2d");
    s.out_channels = 3, s.kernel = 3, s.stride = 2, s.padding = 1;
    gradcheck_layer(s, (struct dt_shape){2, 5, 6}, 2, true);
}

static void test_conv2d_no_bias(void **state)
{
    (void)state;
    struct dt_layer_spec s = spec_of("conv2d");
    s.out_channels = 2, s.kernel = 2, s.bias = false;
    gradcheck_layer(s, (struct dt_shape){3, 4, 4}, 2, true);
}

static void test_linear(void **state)
{
    (void)state;
    struct dt_layer_spec s = spec_of("linear");
    s.out_features = 5;
    gradcheck_layer(s, (struct dt_shape){2, 2, 3}, 3, true); /* non-flat input */
}

static void test_maxpool2d_padding(void **state)
{
    (void)state;
    struct dt_layer_spec s = spec_of("maxpool2d");
    s.kernel = 3, s.stride = 2, s.padding = 1;
    gradcheck_layer(s, (struct dt_shape){2, 5, 5}, 2, true);
}

static void test_avgpool2d_padding(void **state)
{
    (void)state;
    struct dt_layer_spec s = spec_of("avgpool2d");
    s.kernel = 2, s.padding = 1;
    gradcheck_layer(s, (struct dt_shape){2, 5, 4}, 2, true);
}

static void test_relu(void **state)
{
    (void)state;
    gradcheck_layer(spec_of("relu"), (struct dt_shape){2, 3, 3}, 2, true);
}

static void test_dropout_training(void **state)
{
    (void)state;
    struct dt_layer_spec s = spec_of("dropout");
    s.p = 0.3f;
    gradcheck_layer(s, (struct dt_shape){2, 3, 3}, 2, true);
}

static void test_dropout2d_training(void **state)
{
    (void)state;
    struct dt_layer_spec s = spec_of("dropout2d");
    s.p = 0.5f;
    gradcheck_layer(s, (struct dt_shape){4, 2, 2}, 3, true);
}

static void test_flatten(void **state)
{
    (void)state;
    gradcheck_layer(spec_of("flatten"), (struct dt_shape){2, 2, 2}, 2, true);
}

static void test_batchnorm2d_training(void **state)
{
    (void)state;
    gradcheck_layer(spec_of("batchnorm2d"), (struct dt_shape){3, 3, 2}, 3, true);
}

static void test_batchnorm2d_eval(void **state)
{
    (void)state;
    gradcheck_layer(spec_of("batchnorm2d"), (struct dt_shape){2, 2, 2}, 2, false);
}

static void test_batchnorm2d_no_affine(void **state)
{
    (void)state;
    struct dt_layer_spec s = spec_of("batchnorm2d");
    s.affine = false;
    gradcheck_layer(s, (struct dt_shape){2, 2, 3}, 2, true);
}

static void test_log_softmax(void **state)
{
    (void)state;
    gradcheck_layer(spec_of("log_softmax"), (struct dt_shape){6, 1, 1}, 3, true);
}

/* ---- whole models: the loss's own gradient and the chain through every layer ---- */

static double model_objective(struct dt_model *m, const float *x, const uint8_t *labels, int batch,
                              const struct dt_forward_ctx *ctx)
{
    double loss;
    int correct;
    assert_int_equal(dt_model_forward(m, x, batch, ctx), 0);
    dt_model_loss(m, labels, batch, &loss, &correct);
    return loss / batch;
}

static void gradcheck_model(const struct dt_layer_spec *specs, int n, struct dt_shape in,
                            enum dt_loss_kind loss, const char *what)
{
    enum { B = 3 };
    struct dt_model *m;
    assert_int_equal(dt_model_build(&m, specs, n, in, B, loss, 21), 0);
    size_t nin = (size_t)B * in.c * in.h * in.w;
    float *x = calloc(nin, sizeof(float));
    fill_distinct(x, nin, 22);
    uint8_t labels[B] = {1, 0, 3};
    uint64_t ids[B] = {4, 9, 2};
    struct dt_forward_ctx ctx = {.training = true, .seed = 3, .epoch = 1, .sample_ids = ids};
    model_objective(m, x, labels, B, &ctx);
    assert_int_equal(dt_model_backward(m, labels, B, 1.0f / B), 0);
    float *ana = malloc(m->nparams * sizeof(float));
    memcpy(ana, m->grads, m->nparams * sizeof(float));
    double max_err = 0, max_ana = 1e-3;
    for (size_t i = 0; i < m->nparams; i++) {
        float keep = m->params[i];
        m->params[i] = keep + (float)H;
        double plus = model_objective(m, x, labels, B, &ctx);
        m->params[i] = keep - (float)H;
        double minus = model_objective(m, x, labels, B, &ctx);
        m->params[i] = keep;
        max_err = fmax(max_err, fabs((plus - minus) / (2 * H) - ana[i]));
        max_ana = fmax(max_ana, fabs(ana[i]));
    }
    printf("  model %-34s params       rel err %.2e\n", what, max_err / max_ana);
    if (!(max_err / max_ana <= TOL))
        fail_msg("model %s: relative error %.3e > %.1e", what, max_err / max_ana, TOL);
    free(ana);
    free(x);
    dt_model_free(m);
}

static void test_linear_cross_entropy(void **state)
{
    (void)state;
    struct dt_layer_spec s = spec_of("linear");
    s.out_features = 4;
    gradcheck_model(&s, 1, (struct dt_shape){5, 1, 1}, DT_LOSS_CROSS_ENTROPY, "cross_entropy");
}

static void test_linear_log_softmax_nll(void **state)
{
    (void)state;
    struct dt_layer_spec s[2] = {spec_of("linear"), spec_of("log_softmax")};
    s[0].out_features = 4;
    gradcheck_model(s, 2, (struct dt_shape){5, 1, 1}, DT_LOSS_NLL, "log_softmax+nll");
}

static void test_small_convnet(void **state)
{
    (void)state;
    struct dt_layer_spec s[9] = {spec_of("conv2d"),    spec_of("batchnorm2d"), spec_of("relu"),
                                 spec_of("maxpool2d"), spec_of("dropout2d"),   spec_of("flatten"),
                                 spec_of("linear"),    spec_of("dropout"),     spec_of("linear")};
    s[0].out_channels = 3, s[0].kernel = 3, s[0].stride = 2, s[0].padding = 1;
    s[3].kernel = 2;
    s[4].p = 0.2f;
    s[6].out_features = 6;
    s[7].p = 0.25f;
    s[8].out_features = 4;
    gradcheck_model(s, 9, (struct dt_shape){2, 7, 7}, DT_LOSS_CROSS_ENTROPY, "conv-bn-pool-fc");
}

/* A pool first: backward stops at layer 1, which gets no dx. No relu: parameter steps of H
 * would move conv outputs across its kink, and the differences would mean nothing. (The fused
 * conv-relu-pool is checked against the unfused model bit for bit in test_conv_layer.) */
static void test_pool_first_convnet(void **state)
{
    (void)state;
    struct dt_layer_spec s[5] = {pool_spec("maxpool2d", 2, 1, 0), conv_spec(3, 3, 1, 1),
                                 spec_of("flatten"), linear_spec(4), spec_of("log_softmax")};
    gradcheck_model(s, 5, (struct dt_shape){2, 6, 6}, DT_LOSS_NLL, "pool-conv-fc");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv2d_stride2_padding),
        cmocka_unit_test(test_conv2d_no_bias),
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_maxpool2d_padding),
        cmocka_unit_test(test_avgpool2d_padding),
        cmocka_unit_test(test_relu),
        cmocka_unit_test(test_dropout_training),
        cmocka_unit_test(test_dropout2d_training),
        cmocka_unit_test(test_flatten),
        cmocka_unit_test(test_batchnorm2d_training),
        cmocka_unit_test(test_batchnorm2d_eval),
        cmocka_unit_test(test_batchnorm2d_no_affine),
        cmocka_unit_test(test_log_softmax),
        cmocka_unit_test(test_linear_cross_entropy),
        cmocka_unit_test(test_linear_log_softmax_nll),
        cmocka_unit_test(test_small_convnet),
        cmocka_unit_test(test_pool_first_convnet),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

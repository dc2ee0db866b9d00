/* nn/ against PyTorch 1.13: every layer kind (forward, input gradient, parameter gradients,
 * batchnorm running statistics), both losses, and two whole models (the reference ConvNet and
 * a small batchnorm CNN) forward + backward, with PyTorch's own weights loaded by their
 * state_dict names (which also checks dtrain's names, shapes and memory layout).
 *
 * Reference values come from tests/parity/gen_layers.py. The group setup runs it with
 * /usr/bin/python3 into a fresh temporary directory (removed afterwards), so `make test` needs
 * nothing else; with DTRAIN_PARITY_DIR set it reads an existing directory instead. A missing
 * torch is a FAILURE, not a skip.
 *
 * Tolerance: per tensor, max_i |c_i - t_i| / max(max_i |t_i|, 1e-6) <= 1e-4 (relative to the
 * tensor's largest magnitude, so tiny elements compare with an absolute error).
 * Dropout is compared by mechanism, not by random numbers: eval mode must be the identity, and
 * in training every kept value must carry the same 1/(1-p) scale as PyTorch's (forward and
 * backward), with whole channels kept or dropped by dropout2d.
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
#include <unistd.h>

#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/model.h"
#include "nn_specs.h"
#include "parity_oracle.h"

#define TOL 1e-4

static char dir[4096];
static bool own_dir;

static int generate(void **state)
{
    (void)state;
    const char *env = getenv("DTRAIN_PARITY_DIR");
    if (env && *env) {
        snprintf(dir, sizeof dir, "%s", env);
        return 0;
    }
    snprintf(dir, sizeof dir, "%s/dtrain-parity-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    own_dir = true; /* cleanup removes it, also after a failed generation */
    return parity_oracle_generate(dir, "tests/parity/gen_layers.py");
}

static int cleanup(void **state)
{
    (void)state;
    if (own_dir)
        parity_oracle_remove(dir);
    return 0;
}

/* Loads <dir>/<case>.<name>.bin, which must hold exactly `count` floats. */
static float *load(const char *tcase, const char *name, size_t count)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s.%s.bin", dir, tcase, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    float *v = malloc((count + 1) * sizeof *v);
    size_t got = fread(v, sizeof *v, count + 1, f);
    fclose(f);
    if (got != count)
        fail_msg("%s holds %zu floats, expected %zu", path, got, count);
    return v;
}

static void expect_close(const char *tcase, const char *what, const float *c, const float *t,
                         size_t n, double tol)
{
    double err = 0, scale = 1e-6;
    for (size_t i = 0; i < n; i++) {
        err = fmax(err, fabs((double)c[i] - t[i]));
        scale = fmax(scale, fabs(t[i]));
    }
    if (isnan(err))
        err = INFINITY;
    printf("  %-14s %-32s rel err %.2e\n", tcase, what, err / scale);
    if (!(err / scale <= tol))
        fail_msg("%s %s: relative error %.3e > %.1e", tcase, what, err / scale, tol);
}

static void expect_close_to_file(const char *tcase, const char *name, const float *c, size_t n)
{
    float *t = load(tcase, name, n);
    expect_close(tcase, name, c, t, n, TOL);
    free(t);
}

/* Copies PyTorch's state_dict values into the model, by dtrain's tensor names. */
static void load_state(struct dt_model *m, const char *tcase)
{
    for (int i = 0; i < m->ntensors; i++) {
        float *v = load(tcase, m->tensors[i].name, m->tensors[i].count);
        memcpy(m->params + m->tensors[i].offset, v, m->tensors[i].count * sizeof *v);
        free(v);
    }
    for (int i = 0; i < m->nbuffer_tensors; i++) {
        float *v = load(tcase, m->buffer_tensors[i].name, m->buffer_tensors[i].count);
        memcpy(m->buffers + m->buffer_tensors[i].offset, v, m->buffer_tensors[i].count * sizeof *v);
        free(v);
    }
}

static void expect_grads_and_buffers(struct dt_model *m, const char *tcase, bool training)
{
    char name[128];
    for (int i = 0; i < m->ntensors; i++) {
        snprintf(name, sizeof name, "grad.%s", m->tensors[i].name);
        expect_close_to_file(tcase, name, m->grads + m->tensors[i].offset, m->tensors[i].count);
    }
    for (int i = 0; training && i < m->nbuffer_tensors; i++) {
        snprintf(name, sizeof name, "after.%s", m->buffer_tensors[i].name);
        expect_close_to_file(tcase, name, m->buffers + m->buffer_tensors[i].offset,
                             m->buffer_tensors[i].count);
    }
}

static size_t volume(struct dt_shape s)
{
    return (size_t)s.c * s.h * s.w;
}

static void layer_case(const char *tcase, struct dt_layer_spec spec, struct dt_shape in, int batch,
                       bool training)
{
    struct dt_model *m;
    assert_int_equal(dt_model_build(&m, &spec, 1, in, batch, DT_LOSS_NLL, 1), 0);
    struct dt_layer *l = m->layers[0];
    load_state(m, tcase);
    size_t nin = batch * volume(in), nout = batch * volume(l->out);
    float *x = load(tcase, "x", nin), *dy = load(tcase, "dy", nout);
    float *dx = calloc(nin, sizeof *dx);
    struct dt_forward_ctx ctx = {.training = training};
    assert_int_equal(dt_model_forward(m, x, batch, &ctx), 0);
    expect_close_to_file(tcase, "y", m->output, nout);
    l->kind->ops->backward(l, x, m->output, dy, dx, batch, &(struct dt_layer_bwd){0});
    expect_close_to_file(tcase, "dx", dx, nin);
    expect_grads_and_buffers(m, tcase, training);
    if (training && m->nbuffers) {
        assert_int_equal(dt_model_forward(m, x, batch, NULL), 0);
        expect_close_to_file(tcase, "eval_y", m->output, nout);
    }
    free(x);
    free(dy);
    free(dx);
    dt_model_free(m);
}

static void test_conv2d(void **state)
{
    (void)state;
    layer_case("conv_s2p1", conv_spec(4, 3, 2, 1), (struct dt_shape){3, 7, 6}, 2, true);
    struct dt_layer_spec s = conv_spec(3, 2, 1, 0);
    s.bias = false;
    layer_case("conv_nobias", s, (struct dt_shape){2, 5, 5}, 2, true);
    layer_case("conv_k5", conv_spec(8, 5, 1, 2), (struct dt_shape){3, 9, 9}, 3, true);
    /* 3x3 with 16 channels: Winograd where the CPU runs it (its transforms round more) */
    layer_case("conv_wino", conv_spec(24, 3, 1, 1), (struct dt_shape){16, 9, 10}, 2, true);
    /* ... at stride 2: the stride-1 grid, every other pixel kept (odd width: the last kept) */
    layer_case("conv_wino_s2", conv_spec(24, 3, 2, 1), (struct dt_shape){16, 9, 10}, 2, true);
}

static void test_linear(void **state)
{
    (void)state;
    layer_case("linear", linear_spec(4), (struct dt_shape){2, 1, 3}, 3, true);
}

static void test_pools(void **state)
{
    (void)state;
    layer_case("maxpool", pool_spec("maxpool2d", 3, 2, 1), (struct dt_shape){2, 6, 5}, 2, true);
    layer_case("maxpool2", pool_spec("maxpool2d", 2, 0, 0), (struct dt_shape){3, 6, 6}, 2, true);
    layer_case("avgpool", pool_spec("avgpool2d", 2, 2, 1), (struct dt_shape){2, 5, 5}, 2, true);
    layer_case("avgpool3", pool_spec("avgpool2d", 3, 1, 1), (struct dt_shape){2, 4, 5}, 2, true);
}

static void test_relu_log_softmax(void **state)
{
    (void)state;
    layer_case("relu", spec_of("relu"), (struct dt_shape){3, 4, 4}, 2, true);
    layer_case("log_softmax", spec_of("log_softmax"), (struct dt_shape){5, 1, 1}, 3, true);
}

static void test_batchnorm2d(void **state)
{
    (void)state;
    layer_case("batchnorm", spec_of("batchnorm2d"), (struct dt_shape){3, 4, 4}, 2, true);
    struct dt_layer_spec s = spec_of("batchnorm2d");
    s.eps = 1e-3f, s.momentum = 0.3f;
    layer_case("batchnorm_mom", s, (struct dt_shape){2, 3, 3}, 3, true);
    layer_case("batchnorm_eval", spec_of("batchnorm2d"), (struct dt_shape){3, 4, 4}, 2, false);
}

/* The scale PyTorch applied to kept values (t / x where t != 0); all kept values agree. */
static double torch_scale(const float *t, const float *x, size_t n)
{
    double scale = 0;
    for (size_t i = 0; i < n; i++)
        if (t[i] != 0.0f) {
            double s = (double)t[i] / x[i];
            if (scale != 0)
                assert_true(fabs(s - scale) <= 1e-6 * scale);
            scale = s;
        }
    assert_true(scale > 0);
    return scale;
}

static void dropout_case(const char *tcase, const char *type, float p, struct dt_shape in,
                         int batch)
{
    struct dt_layer_spec spec = dropout_spec(type, p);
    struct dt_model *m;
    assert_int_equal(dt_model_build(&m, &spec, 1, in, batch, DT_LOSS_NLL, 1), 0);
    size_t n = batch * volume(in), plane = (size_t)in.h * in.w;
    float *x = load(tcase, "x", n), *y = load(tcase, "y", n), *dy = load(tcase, "dy", n);
    float *tdx = load(tcase, "dx", n), *dx = calloc(n, sizeof *dx);
    double fwd_scale = torch_scale(y, x, n), bwd_scale = torch_scale(tdx, dy, n);
    uint64_t ids[8] = {3, 1, 4, 1, 5, 9, 2, 6};
    struct dt_forward_ctx ctx = {.training = true, .seed = 8, .epoch = 1, .sample_ids = ids};
    assert_int_equal(dt_model_forward(m, x, batch, &ctx), 0);
    m->layers[0]->kind->ops->backward(m->layers[0], x, m->output, dy, dx, batch,
                                      &(struct dt_layer_bwd){0});
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        bool keep = m->output[i] != 0.0f;
        kept += keep;
        assert_true(fabs(m->output[i] - (keep ? x[i] * fwd_scale : 0)) <= 1e-6 * fabs(x[i]) * 2);
        assert_true(fabs(dx[i] - (keep ? dy[i] * bwd_scale : 0)) <= 1e-6 * fabs(dy[i]) * 2);
        if (plane > 1 && i % plane) /* dropout2d: one decision per channel */
            assert_true(keep == (m->output[i - 1] != 0.0f));
    }
    printf("  %-14s kept %zu of %zu, scale %.7f (torch %.7f)\n", tcase, kept, n, 1.0 / (1.0 - p),
           fwd_scale);
    assert_true(kept > 0 && kept < n);
    assert_int_equal(dt_model_forward(m, x, batch, NULL), 0);
    expect_close_to_file(tcase, "eval_y", m->output, n);
    assert_memory_equal(m->output, x, n * sizeof *x);
    free(x);
    free(y);
    free(dy);
    free(tdx);
    free(dx);
    dt_model_free(m);
}

static void test_dropout(void **state)
{
    (void)state;
    dropout_case("dropout", "dropout", 0.25f, (struct dt_shape){50, 1, 1}, 4);
    dropout_case("dropout2d", "dropout2d", 0.5f, (struct dt_shape){16, 3, 3}, 4);
}

static void loss_case(const char *tcase, enum dt_loss_kind kind)
{
    enum { B = 4, C = 5 };
    float *x = load(tcase, "x", B * C), *fl = load(tcase, "labels", B);
    float *loss = load(tcase, "loss_sum", 1), dx[B * C];
    uint8_t labels[B];
    for (int b = 0; b < B; b++)
        labels[b] = (uint8_t)fl[b];
    int correct;
    float sum = (float)dt_loss_sum(kind, 0.0f, x, C, labels, B, &correct);
    expect_close(tcase, "loss_sum", &sum, loss, 1, 1e-5);
    assert_int_equal(dt_loss_grad(kind, 0.0f, x, C, labels, B, 1.0f / B, dx), 0);
    expect_close_to_file(tcase, "dx", dx, B * C);
    free(x);
    free(fl);
    free(loss);
}

static void test_losses(void **state)
{
    (void)state;
    loss_case("nll", DT_LOSS_NLL);
    loss_case("cross_entropy", DT_LOSS_CROSS_ENTROPY);
}

static void model_case(const char *tcase, const struct dt_layer_spec *specs, int n,
                       struct dt_shape in, int batch, enum dt_loss_kind kind, bool training)
{
    struct dt_model *m;
    assert_int_equal(dt_model_build(&m, specs, n, in, batch, kind, 1), 0);
    load_state(m, tcase);
    float *x = load(tcase, "x", batch * volume(in)), *fl = load(tcase, "labels", batch);
    float *loss = load(tcase, "loss_sum", 1);
    uint8_t labels[16];
    for (int b = 0; b < batch; b++)
        labels[b] = (uint8_t)fl[b];
    struct dt_forward_ctx ctx = {.training = training};
    assert_int_equal(dt_model_forward(m, x, batch, &ctx), 0);
    expect_close_to_file(tcase, "y", m->output, (size_t)batch * m->classes);
    double sum;
    int correct;
    dt_model_loss(m, labels, batch, &sum, &correct);
    float fsum = (float)sum;
    expect_close(tcase, "loss_sum", &fsum, loss, 1, 1e-5);
    assert_int_equal(dt_model_backward(m, labels, batch, 1.0f / batch), 0);
    expect_grads_and_buffers(m, tcase, training);
    free(x);
    free(fl);
    free(loss);
    dt_model_free(m);
}

static void test_convnet(void **state)
{
    (void)state;
    struct dt_layer_spec s[16];
    int n = convnet_specs(s);
    model_case("convnet", s, n, (struct dt_shape){1, 28, 28}, 3, DT_LOSS_NLL, false);
}

static void test_batchnorm_cnn(void **state)
{
    (void)state;
    struct dt_layer_spec s[9] = {
        conv_spec(4, 3, 1, 1),           spec_of("batchnorm2d"), spec_of("relu"),
        pool_spec("maxpool2d", 2, 0, 0), conv_spec(6, 3, 2, 1),  spec_of("relu"),
        pool_spec("avgpool2d", 2, 0, 0), spec_of("flatten"),     linear_spec(7)};
    s[0].bias = false;
    model_case("bncnn", s, 9, (struct dt_shape){3, 8, 8}, 4, DT_LOSS_CROSS_ENTROPY, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv2d),        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_pools),         cmocka_unit_test(test_relu_log_softmax),
        cmocka_unit_test(test_batchnorm2d),   cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_losses),        cmocka_unit_test(test_convnet),
        cmocka_unit_test(test_batchnorm_cnn),
    };
    return cmocka_run_group_tests(tests, generate, cleanup);
}

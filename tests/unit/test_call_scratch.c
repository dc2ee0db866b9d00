/* nn/call_scratch: the buffer every layer of a model shares for what it uses inside one call.
 *  - zeros by key: cleared when the key changes, kept for the same key and across a take
 *    that fits after them, ended by one that does not;
 *  - a bf16 model whose convs and linear share it (tile convs of one shape sharing their zero
 *    padding, convs of other shapes and emulated ones clearing or overwriting it in between)
 *    computes, over two rounds of forward and backward, the bits that each layer gives alone
 *    in a model of its own (its own scratch, fresh zeros), on every bf16 path this CPU has;
 *    the emulated convs run an fp32 algorithm whose backward reads x (rounded again there);
 *  - the model's call scratch is the largest layer's need, not the sum, and the estimate
 *    counts what the build allocates. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "nn/call_scratch.h"
#include "nn/kernels/isa.h"
#include "nn/layers.h"
#include "nn/model.h"
#include "nn_specs.h"
#include "util/rng.h"

static void test_zeroed_by_key(void **state)
{
    (void)state;
    struct dt_call_scratch s;
    assert_int_equal(dt_call_scratch_alloc(&s, 256), 0);
    const int a = 1, b = 2;
    unsigned char *p = dt_call_scratch_zeroed(&s, &a, sizeof a, 128);
    p[5] = 7, p[200] = 9;
    p = dt_call_scratch_zeroed(&s, &a, sizeof a, 128);
    assert_int_equal(p[5], 7); /* same key: what its users wrote stays */
    p = dt_call_scratch_zeroed(&s, &b, sizeof b, 128);
    assert_int_equal(p[5], 0); /* another key: cleared up to `zero` */
    assert_int_equal(p[200], 9);
    p[5] = 3;
    unsigned char *t = dt_call_scratch_take(&s, 128); /* fits after the zeros: kept */
    assert_ptr_equal(t, s.base + 128);
    p = dt_call_scratch_zeroed(&s, &b, sizeof b, 128);
    assert_int_equal(p[5], 3);
    t = dt_call_scratch_take(&s, 129); /* does not fit: from the start, ends the zeros */
    assert_ptr_equal(t, s.base);
    p = dt_call_scratch_zeroed(&s, &b, sizeof b, 128);
    assert_int_equal(p[5], 0);
    dt_call_scratch_free(&s);
    assert_null(s.base);
}

/* in 16x6x7: 16->3 convs (one tile layout) with 3->16 convs between them (under 4 input
 * channels: the stem mode on the tile paths, emulated on the reference path; either way their
 * calls fit after the tile layout's zeros), a stride-2 conv
 * on the odd 6x7 plane (tiles through parity planes, conv_s2_bf16.h; emulated on the reference
 * path), 16->8 and 8->16 convs (layouts of their own), a stride-2 1x1 projection (parity
 * planes again, three of four never computed), a linear. */
#define NLAYERS 9
#define BATCH   3
static const struct dt_shape IN = {16, 6, 7};

static void specs(struct dt_layer_spec *s)
{
    s[0] = conv_spec(3, 3, 1, 1), s[1] = conv_spec(16, 3, 1, 1), s[2] = conv_spec(3, 3, 1, 1);
    s[3] = conv_spec(16, 3, 1, 1), s[4] = conv_spec(16, 3, 2, 1), s[5] = conv_spec(8, 3, 1, 1);
    s[6] = conv_spec(16, 3, 1, 1), s[7] = conv_spec(16, 1, 2, 0), s[8] = linear_spec(10);
}

static struct dt_model *build(const struct dt_layer_spec *s, int n, struct dt_shape in,
                              enum dt_bf16_path p)
{
    struct dt_model_options opt = {.fusions = 0, .precision = DT_PRECISION_BF16};
    enum dt_bf16_path was = dt_isa_force_bf16_path(p);
    enum dt_conv2d_algo algo = dt_conv2d_force_algo(DT_CONV2D_DIRECT);
    struct dt_model *m;
    assert_int_equal(dt_model_build_with(&m, s, n, in, BATCH, DT_LOSS_NLL, 5, &opt), 0);
    struct dt_model_memory est;
    assert_int_equal(dt_model_estimate_with(s, n, in, BATCH, DT_LOSS_NLL, &opt, &est), 0);
    assert_memory_equal(&est, &m->memory, sizeof est);
    dt_conv2d_force_algo(algo);
    dt_isa_force_bf16_path(was);
    return m;
}

static float *random_floats(size_t n, uint64_t seed)
{
    float *p = malloc(n * sizeof(float));
    assert_non_null(p);
    struct dt_rng rng;
    dt_rng_init(&rng, dt_rng_key(seed, DT_RNG_TEST, 30, 0));
    for (size_t i = 0; i < n; i++)
        p[i] = 2.0f * dt_rng_uniform(&rng) - 1.0f;
    return p;
}

static size_t batch_size(struct dt_shape s)
{
    return (size_t)BATCH * s.c * s.h * s.w;
}

static void check_path(enum dt_bf16_path p)
{
    struct dt_layer_spec s[NLAYERS];
    specs(s);
    struct dt_model *m = build(s, NLAYERS, IN, p), *alone[NLAYERS];
    float *x[NLAYERS + 1], *dy[NLAYERS + 1], *dx[NLAYERS + 1];
    size_t most = 0;
    for (int i = 0; i < NLAYERS; i++) {
        struct dt_layer *l = m->layers[i];
        alone[i] = build(&s[i], 1, l->in, p);
        memcpy(alone[i]->params, l->params, l->nparams * sizeof(float));
        size_t need = alone[i]->call_scratch.bytes;
        most = need > most ? need : most;
        x[i + 1] = calloc(batch_size(l->out), sizeof(float));
        dx[i] = calloc(batch_size(l->in), sizeof(float));
        assert_non_null(x[i + 1]);
        assert_non_null(dx[i]);
    }
    assert_int_equal(m->call_scratch.bytes, most); /* the largest need, not the sum */
    struct dt_layer_fwd fwd = {.run = {.training = true}};
    struct dt_layer_bwd alone_bwd = {0};
    for (int round = 0; round < 2; round++) {
        x[0] = random_floats(batch_size(IN), 10 + round);
        dy[NLAYERS] = random_floats(BATCH * 10, 20 + round);
        for (int i = 0; i < NLAYERS; i++) /* the model: one scratch for all */
            m->layers[i]->kind->ops->forward(m->layers[i], x[i], x[i + 1], BATCH, &fwd);
        for (int i = NLAYERS - 1; i >= 0; i--) {
            struct dt_layer *l = m->layers[i];
            l->kind->ops->backward(l, x[i], x[i + 1], dy[i + 1], dx[i], BATCH, &alone_bwd);
            dy[i] = dx[i];
        }
        for (int i = 0; i < NLAYERS; i++) { /* each layer alone on the same operands */
            struct dt_layer *l = alone[i]->layers[0];
            size_t nout = batch_size(l->out), nin = batch_size(l->in);
            float *y = malloc(nout * sizeof(float)), *d = malloc(nin * sizeof(float));
            assert_non_null(y);
            assert_non_null(d);
            l->kind->ops->forward(l, x[i], y, BATCH, &fwd);
            assert_memory_equal(y, x[i + 1], nout * sizeof(float));
            l->kind->ops->backward(l, x[i], y, dy[i + 1], d, BATCH, &alone_bwd);
            assert_memory_equal(d, dx[i], nin * sizeof(float));
            assert_memory_equal(l->grads, m->layers[i]->grads, l->nparams * sizeof(float));
            free(y);
            free(d);
        }
        free(x[0]);
        free(dy[NLAYERS]);
    }
    print_message("  %s: call scratch %zu bytes for %d layers\n", dt_bf16_path_name(p),
                  m->call_scratch.bytes, NLAYERS);
    for (int i = 0; i < NLAYERS; i++) {
        free(x[i + 1]);
        free(dx[i]);
        dt_model_free(alone[i]);
    }
    dt_model_free(m);
}

static void test_bf16_layers_share_it(void **state)
{
    (void)state;
    for (int p = 0; p < DT_BF16_PATH_COUNT; p++) {
        const char *why;
        if (!dt_bf16_path_available((enum dt_bf16_path)p, &why)) {
            print_message("skip bf16 path %s: %s\n", dt_bf16_path_name((enum dt_bf16_path)p), why);
            continue;
        }
        check_path((enum dt_bf16_path)p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zeroed_by_key),
        cmocka_unit_test(test_bf16_layers_share_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

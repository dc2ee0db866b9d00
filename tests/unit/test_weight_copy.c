/* nn/weight_copy.c: the bf16 weight copy the optimizer step makes (dt_model_optim_step). A
 * bf16 model with every kind of copy (a stem-mode conv, stride-1 and stride-2 tile convs, a
 * projection shortcut's conv, a whole-tile linear layer packed 32 rows a piece, an edge-tile
 * one packed whole; on the reference path all of them rounded, in pieces) trains with the
 * copies made in the step and, a second build, made at each forward from the fp32 masters:
 * outputs, losses and weights must be the same bits, step after step, on every bf16 path
 * and on 1 and 2 threads. Then what keeps a copy from going stale. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nn/checkpoint.h"
#include "nn/bf16_layers.h"
#include "nn/kernels/isa.h"
#include "nn/layers.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "nn/weight_copy.h"
#include "nn_specs.h"
#include "util/alloc.h"
#include "util/err.h"
#include "util/rng.h"

enum { BATCH = 6, NSPECS = 13, STEPS = 3 };
static const struct dt_shape IN = {3, 8, 8};

/* stem conv - bn - relu - conv s2 - bn - add (projection) - relu - conv - relu - flatten (512)
 * - linear 64 (whole tiles: two 32-row pieces) - relu - linear 3 (edge tiles) */
static void specs(struct dt_layer_spec *s)
{
    s[0] = conv_spec(16, 3, 1, 1);
    s[1] = spec_of("batchnorm2d");
    s[2] = spec_of("relu");
    s[3] = conv_spec(32, 3, 2, 1);
    s[4] = spec_of("batchnorm2d");
    s[5] = spec_of("add");
    s[5].from = -3;
    s[5].shortcut = DT_SHORTCUT_PROJECTION;
    s[6] = spec_of("relu");
    s[7] = conv_spec(32, 3, 1, 1);
    s[8] = spec_of("relu");
    s[9] = spec_of("flatten");
    s[10] = linear_spec(64);
    s[11] = spec_of("relu");
    s[12] = linear_spec(3);
}

/* The model, its parameters and weight copies in the caller's storage when params is not
 * NULL (as the ranks of one host build it); every byte of its copy arena taken by a layer. */
static struct dt_model *build_in(enum dt_precision precision, uint64_t seed, float *params,
                                 size_t capacity, void *copies, size_t copy_capacity)
{
    struct dt_layer_spec s[NSPECS];
    specs(s);
    struct dt_model_options opt;
    assert_int_equal(dt_model_default_options(&opt), 0);
    opt.precision = precision;
    opt.copy_storage = copies;
    opt.copy_capacity = copy_capacity;
    struct dt_model *m = NULL;
    assert_int_equal(dt_model_build_in(&m, s, NSPECS, IN, BATCH, DT_LOSS_CROSS_ENTROPY, seed,
                                       params, capacity, &opt),
                     0);
    assert_true(m->copies_used == m->copies_bytes);
    assert_true(m->memory.copies == (double)m->copies_bytes);
    return m;
}

static struct dt_model *build(enum dt_precision precision, uint64_t seed)
{
    return build_in(precision, seed, NULL, 0, NULL, 0);
}

static struct dt_optim *adam_for(const struct dt_model *m)
{
    struct dt_optim_config c;
    dt_optim_config_defaults(&c, DT_OPTIM_ADAM);
    c.lr = 0.01, c.weight_decay = 0.01;
    struct dt_optim *o = NULL;
    assert_int_equal(dt_optim_create(&o, &c, m->nparams), 0);
    return o;
}

static float *input(uint64_t seed)
{
    size_t n = (size_t)BATCH * IN.c * IN.h * IN.w;
    float *x = malloc(n * sizeof *x);
    struct dt_rng rng;
    dt_rng_init(&rng, dt_rng_key(seed, DT_RNG_TEST, 31, 0));
    for (size_t i = 0; i < n; i++)
        x[i] = 2.0f * dt_rng_uniform(&rng) - 1.0f;
    return x;
}

static const uint8_t labels[BATCH] = {0, 1, 2, 0, 1, 2};

/* A training forward and backward of m on x; the loss. */
static double train_pass(struct dt_model *m, const float *x)
{
    static const uint64_t ids[BATCH] = {1, 2, 3, 4, 5, 6};
    struct dt_forward_ctx ctx = {.training = true, .seed = 1, .epoch = 1, .sample_ids = ids};
    assert_int_equal(dt_model_forward(m, x, BATCH, &ctx), 0);
    double loss;
    int correct;
    dt_model_loss(m, labels, BATCH, &loss, &correct);
    assert_int_equal(dt_model_backward(m, labels, BATCH, 1.0f / BATCH), 0);
    return loss;
}

static void expect_same_outputs(const struct dt_model *a, const struct dt_model *b)
{
    assert_memory_equal(a->output, b->output, sizeof(float) * BATCH * a->classes);
}

/* The pieces each layer's copy is made in on path p: a tile conv's packs whole, a whole-tile
 * linear layer's 32 rows at a time, an edge-tile one's whole; every copy rounded in pieces of
 * DT_BF16_ROUNDED_PIECE in the emulated mode (the reference path, and the avx512bf16 path's
 * Winograd convs). */
static void expect_pieces(const struct dt_model *m, enum dt_bf16_path p)
{
    for (int i = 0; i < m->nlayers; i++) {
        const struct dt_layer *l = m->layers[i];
        size_t count = 0;
        size_t piece = l->kind->ops->copy_piece ? l->kind->ops->copy_piece(l, &count) : 0;
        bool copies = !strcmp(l->spec.type, "conv2d") || !strcmp(l->spec.type, "linear") ||
                      (!strcmp(l->spec.type, "add") && l->spec.shortcut == DT_SHORTCUT_PROJECTION);
        assert_int_equal(piece != 0, copies);
        if (!copies)
            continue;
        struct dt_layer_summary sum;
        dt_model_layer_summary(m, i, &sum);
        bool emulated = p == DT_BF16_REFERENCE || strstr(sum.precision, "emulated");
        size_t want = emulated                        ? DT_BF16_ROUNDED_PIECE
                      : i == 10 /* linear 64 x 512 */ ? 32 * 512
                                                      : count;
        assert_int_equal(piece, want);
    }
}

/* STEPS steps of a (copies made in the step) and b (made at each forward) on one batch, with
 * an evaluation forward between steps (it reads the copy too, and leaves the next training
 * forward to make its own). */
static void train_both(enum dt_bf16_path p)
{
    struct dt_model *a = build(DT_PRECISION_BF16, 5), *b = build(DT_PRECISION_BF16, 5);
    struct dt_optim *oa = adam_for(a), *ob = adam_for(b);
    assert_non_null(a->weight_copy);
    expect_pieces(a, p);
    float *x = input(7);
    for (int step = 0; step < STEPS; step++) {
        double la = train_pass(a, x), lb = train_pass(b, x);
        assert_memory_equal(&la, &lb, sizeof la);
        expect_same_outputs(a, b);
        assert_false(a->weights_copied);
        assert_int_equal(dt_model_optim_step(a, oa, 0.01), 0);
        assert_true(a->weights_copied);
        assert_int_equal(dt_optim_step(ob, b->params, b->grads, b->nparams, 0.01), 0);
        assert_false(b->weights_copied);
        assert_memory_equal(a->params, b->params, sizeof(float) * a->nparams);
        if (step == 1) { /* an evaluation forward consumes the copy */
            assert_int_equal(dt_model_forward(a, x, BATCH, NULL), 0);
            assert_int_equal(dt_model_forward(b, x, BATCH, NULL), 0);
            expect_same_outputs(a, b);
            assert_false(a->weights_copied);
        }
    }
    train_pass(a, x), train_pass(b, x);
    expect_same_outputs(a, b);
    free(x);
    dt_optim_free(oa), dt_optim_free(ob);
    dt_model_free(a), dt_model_free(b);
}

/* fn on every bf16 path this CPU has (a path it lacks skipped with a printed reason), each on
 * 1 and 2 threads. */
static void on_every_path(const char *test, void (*fn)(enum dt_bf16_path p))
{
    int was_threads = omp_get_max_threads();
    for (int p = DT_BF16_REFERENCE; p < DT_BF16_PATH_COUNT; p++) {
        const char *why;
        if (!dt_bf16_path_available((enum dt_bf16_path)p, &why)) {
            printf("%s: %s skipped: %s\n", test, dt_bf16_path_name((enum dt_bf16_path)p), why);
            continue;
        }
        enum dt_bf16_path was = dt_isa_force_bf16_path((enum dt_bf16_path)p);
        for (int t = 1; t <= 2; t++) {
            omp_set_num_threads(t);
            fn((enum dt_bf16_path)p);
        }
        dt_isa_force_bf16_path(was);
    }
    omp_set_num_threads(was_threads);
}

static void test_same_bits_every_path(void **state)
{
    (void)state;
    on_every_path("test_same_bits_every_path", train_both);
}

/* An fp32 model keeps no copy: the step is dt_optim_step's, and nothing says copied; built
 * into storage for copies (as the ranks of a host build it), it keeps none there either and
 * leaves the storage alone. */
static void test_fp32_has_none(void **state)
{
    (void)state;
    struct dt_model *m = build(DT_PRECISION_FP32, 5);
    assert_null(m->weight_copy);
    assert_true(m->copies_bytes == 0);
    struct dt_optim *o = adam_for(m);
    float *x = input(7);
    train_pass(m, x);
    assert_int_equal(dt_model_optim_step(m, o, 0.01), 0);
    assert_false(m->weights_copied);
    float *params = malloc(m->nparams * sizeof(float));
    void *copies = dt_alloc(64, 1);
    struct dt_model *in = build_in(DT_PRECISION_FP32, 5, params, m->nparams, copies, 64);
    assert_false(in->copies_external);
    dt_model_free(in);
    dt_free(copies), free(params), free(x);
    dt_optim_free(o);
    dt_model_free(m);
}

/* Storage too small for the copies (the ranks' shared region sized from another estimate) is
 * refused at build with a message giving both sizes, and nothing is left built. */
static void test_storage_too_small(void **state)
{
    (void)state;
    struct dt_model *own = build(DT_PRECISION_BF16, 5);
    size_t need = own->copies_bytes;
    assert_true(need > 64);
    struct dt_layer_spec s[NSPECS];
    specs(s);
    struct dt_model_options opt;
    assert_int_equal(dt_model_default_options(&opt), 0);
    opt.precision = DT_PRECISION_BF16;
    opt.copy_storage = dt_alloc(need, 1);
    opt.copy_capacity = need - 64;
    struct dt_model *m = (struct dt_model *)1;
    assert_int_equal(
        dt_model_build_in(&m, s, NSPECS, IN, BATCH, DT_LOSS_CROSS_ENTROPY, 5, NULL, 0, &opt),
        -DT_ERUNTIME);
    assert_null(m);
    char want[128];
    snprintf(want, sizeof want, "bf16 weight copies: %zu bytes needed, %zu given", need, need - 64);
    assert_non_null(strstr(dt_last_error(), want));
    dt_free(opt.copy_storage);
    dt_model_free(own);
}

/* A checkpoint loaded between a step and the next forward: that forward runs on the loaded
 * weights, not on the copy the step made of the old ones (a model built from the checkpoint's
 * seed gives its outputs). */
static void test_load_after_step(void **state)
{
    (void)state;
    char path[] = "/tmp/dtrain-weight-copy-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct dt_model *other = build(DT_PRECISION_BF16, 9);
    assert_int_equal(dt_checkpoint_save(path, other, NULL, NULL), 0);
    struct dt_model *m = build(DT_PRECISION_BF16, 5);
    struct dt_optim *o = adam_for(m);
    float *x = input(7);
    train_pass(m, x);
    assert_int_equal(dt_model_optim_step(m, o, 0.01), 0);
    assert_true(m->weights_copied);
    assert_int_equal(dt_checkpoint_load(path, m, NULL, NULL), 0);
    assert_false(m->weights_copied);
    assert_int_equal(dt_model_forward(m, x, BATCH, NULL), 0);
    assert_int_equal(dt_model_forward(other, x, BATCH, NULL), 0);
    expect_same_outputs(m, other);
    unlink(path);
    free(x);
    dt_optim_free(o);
    dt_model_free(m);
    dt_model_free(other);
}

/* Two ranks of one host (shared weights, optimizer state and copies: two models built into one
 * storage, each with its own optimizer over the shared state) against one model: each rank
 * steps its slice of the weights, cut at a piece (dt_weight_copy_cut), and copies its pieces;
 * after both, the shared weights are the one model's bits and so are both ranks' outputs, on
 * copies no forward makes again (m->copies_external). Every bf16 path, 1 and 2 threads. */
static void ranks_share(enum dt_bf16_path p)
{
    (void)p;
    struct dt_model *one = build(DT_PRECISION_BF16, 5);
    size_t n = one->nparams, bytes = one->copies_bytes;
    struct dt_optim *o1 = adam_for(one);
    float *params = malloc(n * sizeof(float)), *state = calloc(2 * n, sizeof(float));
    void *copies = dt_alloc(bytes, 1);
    struct dt_model *r[2];
    struct dt_optim *o[2];
    for (int k = 0; k < 2; k++) {
        r[k] = build_in(DT_PRECISION_BF16, 5, params, n, copies, bytes);
        assert_true(r[k]->copies_external);
        struct dt_optim_config c = *dt_optim_config(o1);
        assert_int_equal(dt_optim_create_in(&o[k], &c, n, state), 0);
    }
    size_t cut = dt_weight_copy_cut(r[0], n / 2), at[3] = {0, cut, n};
    assert_true(cut > 0 && cut < n);
    assert_true(dt_weight_copy_cut(r[0], cut) == cut); /* a cut is its own */
    for (int k = 0; k < 2; k++) /* share_weights: each rank's first copies, then its barrier */
        dt_model_copy_slice(r[k], at[k], at[k + 1]);
    r[0]->weights_copied = r[1]->weights_copied = true;
    float *x = input(7);
    for (int step = 0; step < STEPS; step++) {
        train_pass(one, x);
        for (int k = 0; k < 2; k++) {
            train_pass(r[k], x);
            expect_same_outputs(one, r[k]);
            assert_true(r[k]->weights_copied); /* kept: the ranks' step makes them */
        }
        assert_int_equal(dt_model_optim_step(one, o1, 0.01), 0);
        for (int k = 0; k < 2; k++)
            assert_int_equal(dt_model_optim_step_slice(r[k], o[k], at[k], at[k + 1], 0.01), 0);
        assert_memory_equal(params, one->params, n * sizeof(float));
    }
    for (int k = 0; k < 2; k++) {
        assert_int_equal(dt_model_forward(r[k], x, BATCH, NULL), 0);
        assert_int_equal(dt_model_forward(one, x, BATCH, NULL), 0);
        expect_same_outputs(one, r[k]);
        dt_optim_free(o[k]);
        dt_model_free(r[k]); /* leaves the caller's storage */
    }
    free(x), free(params), free(state), dt_free(copies);
    dt_optim_free(o1);
    dt_model_free(one);
}

static void test_ranks_share_copies(void **state)
{
    (void)state;
    on_every_path("test_ranks_share_copies", ranks_share);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_bits_every_path), cmocka_unit_test(test_ranks_share_copies),
        cmocka_unit_test(test_fp32_has_none),        cmocka_unit_test(test_storage_too_small),
        cmocka_unit_test(test_load_after_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* nn/optim.c: each optimizer and option against values worked out by hand (closed forms noted
 * next to each case), fixed state sizes, and every configuration error. Exact agreement with
 * torch over many steps is tests/unit/test_parity_optim.c's job. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "nn/optim.h"
#include "util/err.h"

static struct dt_optim *make(const struct dt_optim_config *cfg, size_t n)
{
    struct dt_optim *o = NULL;
    assert_int_equal(dt_optim_create(&o, cfg, n), 0);
    assert_non_null(o);
    return o;
}

static struct dt_optim_config config(enum dt_optim_type type)
{
    struct dt_optim_config c;
    dt_optim_config_defaults(&c, type);
    return c;
}

static void test_sgd_plain_and_weight_decay(void **state)
{
    (void)state;
    struct dt_optim_config c = config(DT_OPTIM_SGD);
    float p[2] = {1.0f, -2.0f}, g[2] = {0.5f, 0.25f};
    struct dt_optim *o = make(&c, 2);
    assert_int_equal(dt_optim_step(o, p, g, 2, 0.1), 0);
    assert_float_equal(p[0], 0.95f, 1e-7); /* 1 - 0.1 * 0.5 */
    assert_float_equal(p[1], -2.025f, 1e-7);
    dt_optim_free(o);

    c.weight_decay = 0.1;
    o = make(&c, 2);
    p[0] = 1.0f;
    assert_int_equal(dt_optim_step(o, p, g, 2, 0.1), 0);
    assert_float_equal(p[0], 0.94f, 1e-7); /* d = 0.5 + 0.1 * 1 */
    dt_optim_free(o);
}

static void test_sgd_momentum_dampening_nesterov(void **state)
{
    (void)state;
    struct dt_optim_config c = config(DT_OPTIM_SGD);
    c.momentum = 0.9;
    float p = 1.0f, g = 0.5f;
    struct dt_optim *o = make(&c, 1);
    dt_optim_step(o, &p, &g, 1, 0.1); /* buf = 0.5 (first step: no dampening), p = 0.95 */
    dt_optim_step(o, &p, &g, 1, 0.1); /* buf = 0.45 + 0.5 = 0.95, p = 0.855 */
    assert_float_equal(p, 0.855f, 1e-6);
    struct dt_optim_state s[DT_OPTIM_MAX_STATES];
    assert_int_equal(dt_optim_states(o, s), 1);
    assert_string_equal(s[0].name, "momentum_buffer");
    assert_float_equal(s[0].data[0], 0.95f, 1e-6);
    dt_optim_free(o);

    c.dampening = 0.5;
    o = make(&c, 1);
    p = 1.0f;
    dt_optim_step(o, &p, &g, 1, 0.1); /* buf = 0.5, p = 0.95 */
    dt_optim_step(o, &p, &g, 1, 0.1); /* buf = 0.45 + 0.25 = 0.7, p = 0.88 */
    assert_float_equal(p, 0.88f, 1e-6);
    dt_optim_free(o);

    c.dampening = 0;
    c.nesterov = true;
    o = make(&c, 1);
    p = 1.0f;
    dt_optim_step(o, &p, &g, 1, 0.1); /* buf = 0.5, d = 0.5 + 0.45 = 0.95, p = 0.905 */
    assert_float_equal(p, 0.905f, 1e-6);
    dt_optim_step(o, &p, &g, 1, 0.1); /* buf = 0.95, d = 0.5 + 0.855, p = 0.7695 */
    assert_float_equal(p, 0.7695f, 1e-6);
    assert_int_equal(dt_optim_steps(o), 2);
    dt_optim_free(o);
}

/* A constant gradient makes Adam's bias-corrected ratio m^/sqrt(v^) exactly 1: each step moves
 * by lr (minus the eps effect). */
static void test_adam_constant_gradient(void **state)
{
    (void)state;
    struct dt_optim_config c = config(DT_OPTIM_ADAM);
    float p[2] = {1.0f, 1.0f}, g[2] = {0.5f, -3.0f};
    struct dt_optim *o = make(&c, 2);
    for (int k = 0; k < 3; k++)
        assert_int_equal(dt_optim_step(o, p, g, 2, 0.1), 0);
    assert_float_equal(p[0], 0.7f, 1e-5);
    assert_float_equal(p[1], 1.3f, 1e-5);
    struct dt_optim_state s[DT_OPTIM_MAX_STATES];
    assert_int_equal(dt_optim_states(o, s), 2);
    assert_string_equal(s[0].name, "exp_avg");
    assert_string_equal(s[1].name, "exp_avg_sq");
    assert_float_equal(s[0].data[0], 0.5f * (1 - 0.9f * 0.9f * 0.9f), 1e-6);
    assert_float_equal(s[1].data[1], 9.0 * (1 - pow(0.999, 3)), 1e-6);
    assert_int_equal(dt_optim_steps(o), 3);
    dt_optim_free(o);
}

static void test_adam_weight_decay_is_l2(void **state)
{
    (void)state;
    struct dt_optim_config c = config(DT_OPTIM_ADAM);
    c.weight_decay = 0.5;
    c.eps = 0;
    float p = 2.0f, g = 0.0f; /* g' = 0 + 0.5 * 2 = 1: first step moves by exactly lr */
    struct dt_optim *o = make(&c, 1);
    dt_optim_step(o, &p, &g, 1, 0.01);
    assert_float_equal(p, 1.99f, 1e-6);
    dt_optim_free(o);
}

static void test_adamw_decouples_decay(void **state)
{
    (void)state;
    struct dt_optim_config c = config(DT_OPTIM_ADAMW);
    assert_true(c.weight_decay == 0.01);
    c.weight_decay = 0.5;
    c.eps = 0;
    float p = 2.0f, g = 0.25f;
    struct dt_optim *o = make(&c, 1);
    dt_optim_step(o, &p, &g, 1, 0.1); /* p = 2 * (1 - 0.05) - 0.1 * 1 */
    assert_float_equal(p, 1.8f, 1e-6);
    dt_optim_free(o);
}

/* v1 = 0.001 * 1, v2 = 0.999 * 0.001 + 0.001 * 1e-4 < v1: AMSGrad keeps v1 in the denominator. */
static void test_amsgrad_keeps_the_maximum(void **state)
{
    (void)state;
    struct dt_optim_config c = config(DT_OPTIM_ADAM);
    c.amsgrad = true;
    c.eps = 0;
    float p = 0.0f, g1 = 1.0f, g2 = 0.01f;
    struct dt_optim *o = make(&c, 1);
    dt_optim_step(o, &p, &g1, 1, 0.1);
    assert_float_equal(p, -0.1f, 1e-6);
    dt_optim_step(o, &p, &g2, 1, 0.1);
    struct dt_optim_state s[DT_OPTIM_MAX_STATES];
    assert_int_equal(dt_optim_states(o, s), 3);
    assert_string_equal(s[2].name, "max_exp_avg_sq");
    assert_float_equal(s[2].data[0], 0.001f, 1e-9);
    assert_true(s[1].data[0] < s[2].data[0]);
    double m = 0.9 * 0.1 + 0.1 * 0.01, bc1 = 1 - 0.81, bc2 = 1 - 0.999 * 0.999;
    double want = -0.1 - 0.1 / bc1 * m / (sqrt(0.001) / sqrt(bc2));
    assert_float_equal(p, want, 1e-6);
    dt_optim_free(o);
}

static void test_adadelta(void **state)
{
    (void)state;
    struct dt_optim_config c = config(DT_OPTIM_ADADELTA);
    assert_true(c.lr == 1.0 && c.rho == 0.9 && c.eps == 1e-6);
    c.weight_decay = 0.1;
    float p = 1.0f, g = 0.4f;
    struct dt_optim *o = make(&c, 1);
    dt_optim_step(o, &p, &g, 1, 1.0);
    double gi = 0.4 + 0.1 * 1.0, sa = 0.1 * gi * gi;
    double delta = sqrt(1e-6) / sqrt(sa + 1e-6) * gi, ad = 0.1 * delta * delta;
    double want = 1.0 - delta;
    assert_float_equal(p, want, 1e-7);
    struct dt_optim_state s[DT_OPTIM_MAX_STATES];
    assert_int_equal(dt_optim_states(o, s), 2);
    assert_string_equal(s[0].name, "square_avg");
    assert_string_equal(s[1].name, "acc_delta");
    assert_float_equal(s[0].data[0], sa, 1e-8);
    assert_float_equal(s[1].data[0], ad, 1e-10);
    dt_optim_free(o);
}

/* State is allocated once: steps never move or resize it. */
static void test_state_is_fixed(void **state)
{
    (void)state;
    enum dt_optim_type types[] = {DT_OPTIM_SGD, DT_OPTIM_ADAM, DT_OPTIM_ADAMW, DT_OPTIM_ADADELTA};
    float p[100] = {0}, g[100];
    for (int i = 0; i < 100; i++)
        g[i] = (float)i / 100;
    for (int t = 0; t < 4; t++) {
        struct dt_optim_config c = config(types[t]);
        c.momentum = 0.9;
        c.amsgrad = true;
        struct dt_optim *o = make(&c, 100);
        struct dt_optim_state before[DT_OPTIM_MAX_STATES], after[DT_OPTIM_MAX_STATES];
        int n = dt_optim_states(o, before);
        for (int k = 0; k < 5; k++)
            assert_int_equal(dt_optim_step(o, p, g, 100, 0.01), 0);
        assert_int_equal(dt_optim_states(o, after), n);
        for (int i = 0; i < n; i++)
            assert_ptr_equal(before[i].data, after[i].data);
        assert_int_equal(dt_optim_size(o), 100);
        assert_int_equal(dt_optim_steps(o), 5);
        dt_optim_free(o);
    }
}

static void test_type_names(void **state)
{
    (void)state;
    enum dt_optim_type t;
    assert_int_equal(dt_optim_type_parse("adamw", &t), 0);
    assert_int_equal(t, DT_OPTIM_ADAMW);
    assert_string_equal(dt_optim_type_name(DT_OPTIM_ADADELTA), "adadelta");
    assert_int_equal(dt_optim_type_parse("rmsprop", &t), -DT_EUSAGE);
    assert_string_equal(dt_last_error(),
                        "unknown optimizer \"rmsprop\" (valid: sgd, adam, adamw, adadelta)");
}

static void expect_invalid(const struct dt_optim_config *c, const char *message)
{
    struct dt_optim *o = (struct dt_optim *)1;
    assert_int_equal(dt_optim_create(&o, c, 4), -DT_EUSAGE);
    assert_null(o);
    assert_string_equal(dt_last_error(), message);
}

static void test_invalid_configs(void **state)
{
    (void)state;
    struct dt_optim_config c = config(DT_OPTIM_SGD);
    c.nesterov = true;
    expect_invalid(&c, "sgd: nesterov requires momentum > 0 and dampening 0 (found momentum 0, "
                       "dampening 0)");
    c = config(DT_OPTIM_SGD);
    c.lr = -1;
    expect_invalid(&c, "sgd: invalid learning rate -1 (expected >= 0)");
    c.lr = NAN;
    expect_invalid(&c, "sgd: invalid learning rate nan (expected >= 0)");
    c = config(DT_OPTIM_SGD);
    c.momentum = -0.5;
    expect_invalid(&c, "sgd: invalid momentum -0.5 (expected >= 0)");
    c = config(DT_OPTIM_ADAM);
    c.weight_decay = -1;
    expect_invalid(&c, "adam: invalid weight_decay -1 (expected >= 0)");
    c = config(DT_OPTIM_ADAMW);
    c.beta1 = 1;
    expect_invalid(&c, "adamw: invalid beta1 1 (expected 0 <= beta1 < 1)");
    c = config(DT_OPTIM_ADAM);
    c.beta2 = -0.1;
    expect_invalid(&c, "adam: invalid beta2 -0.1 (expected 0 <= beta2 < 1)");
    c = config(DT_OPTIM_ADAM);
    c.eps = -1e-8;
    expect_invalid(&c, "adam: invalid eps -1e-08 (expected >= 0)");
    c = config(DT_OPTIM_ADADELTA);
    c.rho = 1.5;
    expect_invalid(&c, "adadelta: invalid rho 1.5 (expected 0 <= rho <= 1)");
    c = config(DT_OPTIM_ADADELTA);
    c.eps = -1;
    expect_invalid(&c, "adadelta: invalid eps -1 (expected >= 0)");
    c = config(DT_OPTIM_SGD);
    c.type = (enum dt_optim_type)9;
    expect_invalid(&c, "optimizer type 9 is not one of sgd, adam, adamw, adadelta");
}

static void test_step_size_mismatch(void **state)
{
    (void)state;
    struct dt_optim_config c = config(DT_OPTIM_ADAM);
    struct dt_optim *o = make(&c, 4);
    float p[5] = {1, 2, 3, 4, 5}, g[5] = {1, 1, 1, 1, 1};
    assert_int_equal(dt_optim_step(o, p, g, 5, 0.1), -DT_ERUNTIME);
    assert_string_equal(dt_last_error(), "adam: step over 5 parameters, but the state holds 4");
    assert_true(p[0] == 1.0f && dt_optim_steps(o) == 0);
    dt_optim_free(o);
}

/* Shared weights: slices stepped by different "ranks" over state in caller storage give the
 * same bits as one full step, for every optimizer (the update is elementwise). */
static void test_step_in_slices_over_external_state(void **state)
{
    (void)state;
    enum dt_optim_type types[] = {DT_OPTIM_SGD, DT_OPTIM_ADAM, DT_OPTIM_ADAMW, DT_OPTIM_ADADELTA};
    enum { N = 37 };
    for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
        struct dt_optim_config c = config(types[t]);
        c.momentum = types[t] == DT_OPTIM_SGD ? 0.9 : c.momentum;
        c.weight_decay = 0.01;
        struct dt_optim *full = make(&c, N), *sliced = NULL;
        float storage[3 * N + 1];
        memset(storage, 0, sizeof storage);
        storage[3 * N] = 42.0f; /* a guard past the states */
        assert_int_equal(dt_optim_create_in(&sliced, &c, N, storage), 0);
        assert_true(dt_optim_state_floats(sliced) <= 3 * N);
        float p1[N], p2[N], g[N];
        for (int i = 0; i < N; i++) {
            p1[i] = p2[i] = 0.1f * (float)(i - 18);
            g[i] = 0.01f * (float)((i * 7) % 11 - 5);
        }
        for (int step = 0; step < 3; step++) {
            assert_int_equal(dt_optim_step(full, p1, g, N, 0.1), 0);
            assert_int_equal(dt_optim_step_range(sliced, p2, g, 0, 16, 0.1), 0);
            dt_optim_set_steps(sliced, (uint64_t)step); /* one step per rank, as in training */
            assert_int_equal(dt_optim_step_range(sliced, p2, g, 16, N, 0.1), 0);
        }
        assert_memory_equal(p1, p2, sizeof p1);
        assert_true(dt_optim_steps(sliced) == dt_optim_steps(full));
        assert_true(storage[3 * N] == 42.0f);
        assert_int_equal(dt_optim_step_range(sliced, p2, g, 20, N + 1, 0.1), -DT_ERUNTIME);
        dt_optim_free(full);
        dt_optim_free(sliced); /* must not free the caller's storage (ASan would say) */
    }
}

static void test_skip_decay_ranges(void **state)
{
    (void)state;
    struct dt_optim_config c = config(DT_OPTIM_ADAMW);
    c.weight_decay = 0.1;
    struct dt_optim *o = make(&c, 8);
    assert_int_equal(dt_optim_skip_decay(o, 2, 4), 0);
    assert_int_equal(dt_optim_skip_decay(o, 4, 5), 0); /* adjacent: merged */
    assert_int_equal(dt_optim_skip_decay(o, 3, 6), -DT_EUSAGE);
    assert_non_null(strstr(dt_last_error(), "overlaps"));
    assert_int_equal(dt_optim_skip_decay(o, 7, 9), -DT_EUSAGE);
    assert_non_null(strstr(dt_last_error(), "outside"));
    float p[8], g[8] = {0};
    for (int i = 0; i < 8; i++)
        p[i] = 1.0f;
    /* zero gradient: AdamW moves only the decayed elements (p * (1 - lr wd)) */
    assert_int_equal(dt_optim_step(o, p, g, 8, 0.5), 0);
    for (int i = 0; i < 8; i++)
        assert_true(i >= 2 && i < 5 ? p[i] == 1.0f : p[i] == (float)(1.0 - 0.05));
    assert_int_equal((int)dt_optim_steps(o), 1);
    dt_optim_free(o);
}

/* Groups as torch's param_groups: a range at lr x 2 moves as a step at 2 x lr would (the
 * same bits), a frozen range moves not at all, keeps its momentum at zero and has its gradients
 * zeroed for a norm, and the rest is the plain step. Overlapping or out-of-order ranges and
 * negative scales are refused. */
static void test_parameter_groups_scale_and_freeze(void **state)
{
    (void)state;
    struct dt_optim_config c = config(DT_OPTIM_SGD);
    c.momentum = 0.9;
    c.weight_decay = 0.1;
    float p[6] = {1, 2, 3, 4, 5, 6}, g[6] = {0.5f, 0.25f, -1, 2, 0.125f, 3};
    float q[6], r[6];
    memcpy(q, p, sizeof q);
    memcpy(r, p, sizeof r);
    struct dt_optim *o = make(&c, 6), *plain = make(&c, 6), *twice = make(&c, 6);
    struct dt_optim_group scaled = {.lr_scale = 2, .decay = true};
    struct dt_optim_group frozen = {.lr_scale = 1, .decay = true, .frozen = true};
    assert_int_equal(dt_optim_set_group(o, 1, 3, &scaled), 0);
    assert_int_equal(dt_optim_set_group(o, 4, 5, &frozen), 0);
    assert_int_equal(dt_optim_set_group(o, 4, 6, &frozen), -DT_EUSAGE);
    struct dt_optim_group bad = {.lr_scale = -1, .decay = true};
    assert_int_equal(dt_optim_set_group(o, 5, 6, &bad), -DT_EUSAGE);
    for (int step = 0; step < 3; step++) {
        assert_int_equal(dt_optim_step(o, p, g, 6, 0.1), 0);
        assert_int_equal(dt_optim_step(plain, q, g, 6, 0.1), 0);
        assert_int_equal(dt_optim_step(twice, r, g, 6, 0.2), 0);
    }
    assert_memory_equal(&p[0], &q[0], sizeof(float));
    assert_memory_equal(&p[1], &r[1], 2 * sizeof(float));
    assert_memory_equal(&p[3], &q[3], sizeof(float));
    assert_true(p[4] == 5.0f);
    assert_memory_equal(&p[5], &q[5], sizeof(float));
    struct dt_optim_state st[DT_OPTIM_MAX_STATES];
    dt_optim_states(o, st);
    assert_true(st[0].data[4] == 0.0f);
    /* a frozen range's gradients are zeroed before a norm is taken; the rest left alone */
    float gz[6];
    memcpy(gz, g, sizeof gz);
    dt_optim_zero_frozen_grads(o, gz);
    for (int i = 0; i < 6; i++)
        assert_true(gz[i] == (i == 4 ? 0.0f : g[i]));
    dt_optim_zero_frozen_grads(plain, gz); /* no groups: nothing changes */
    assert_true(gz[5] == g[5]);
    dt_optim_free(o);
    dt_optim_free(plain);
    dt_optim_free(twice);
}

/* What test_step_pieces' after() saw: each piece's parameters as they were when it was
 * called (they must already be the step's), and how often each piece was reported. */
struct seen {
    const float *params;
    const size_t *cuts;
    float snapshot[140000];
    int calls[64];
};

static void record_piece(void *ctx, int i)
{
    struct seen *s = ctx;
#pragma omp atomic
    s->calls[i]++;
    memcpy(s->snapshot + s->cuts[i], s->params + s->cuts[i],
           (s->cuts[i + 1] - s->cuts[i]) * sizeof(float));
}

/* dt_optim_step_pieces gives dt_optim_step's bits for every optimizer, with parameter groups
 * (a decay-free range, a scaled one, a frozen one) that the pieces cut across, on 1, 2 and 3
 * threads, over pieces both smaller and larger than a parallel loop's threshold; after() runs
 * once per piece, with the piece already updated; cuts out of order or past the arena are
 * refused with nothing changed. Then two ranks' slices of one arena and state, each cut into
 * pieces (shared weights): dt_optim_step_range's bits, the elements outside a slice left
 * alone. */
static void test_step_pieces(void **state)
{
    (void)state;
    enum dt_optim_type types[] = {DT_OPTIM_SGD, DT_OPTIM_ADAM, DT_OPTIM_ADAMW, DT_OPTIM_ADADELTA};
    enum { N = 140000 }; /* pieces below and above the update loops' parallel threshold */
    static const size_t cuts[] = {0, 7, 300, 301, 1024, 2500, 2501, 3999, 73000, N};
    enum { PIECES = sizeof cuts / sizeof cuts[0] - 1 };
    static struct seen seen;
    static float p1[N], p2[N], g[N];
    int was = omp_get_max_threads();
    for (size_t t = 0; t < sizeof types / sizeof *types; t++)
        for (int threads = 1; threads <= 3; threads++) {
            omp_set_num_threads(threads);
            struct dt_optim_config c = config(types[t]);
            c.momentum = types[t] == DT_OPTIM_SGD ? 0.9 : c.momentum;
            c.weight_decay = 0.01;
            struct dt_optim *whole = make(&c, N), *cut = make(&c, N);
            struct dt_optim_group scaled = {.lr_scale = 3, .decay = true};
            struct dt_optim_group frozen = {.lr_scale = 1, .decay = true, .frozen = true};
            for (int k = 0; k < 2; k++) {
                struct dt_optim *o = k ? cut : whole;
                assert_int_equal(dt_optim_skip_decay(o, 5, 290), 0);
                assert_int_equal(dt_optim_set_group(o, 1000, 2600, &scaled), 0);
                assert_int_equal(dt_optim_set_group(o, 3000, 80000, &frozen), 0);
            }
            for (int i = 0; i < N; i++) {
                p1[i] = p2[i] = 0.001f * (float)(i % 97 - 48) + 1e-5f * (float)(i % 13);
                g[i] = 0.0003f * (float)((i * 7) % 113 - 56);
            }
            seen = (struct seen){.params = p2, .cuts = cuts};
            struct dt_optim_pieces pc = {cuts, PIECES, record_piece, &seen};
            for (int step = 0; step < 3; step++) {
                assert_int_equal(dt_optim_step(whole, p1, g, N, 0.1), 0);
                assert_int_equal(dt_optim_step_pieces(cut, p2, g, N, 0.1, &pc), 0);
                assert_memory_equal(seen.snapshot, p2, sizeof p2);
            }
            assert_memory_equal(p1, p2, sizeof p1);
            assert_true(dt_optim_steps(cut) == dt_optim_steps(whole));
            for (int i = 0; i < PIECES; i++)
                assert_int_equal(seen.calls[i], 3);
            /* refused: out of order, past the arena, no pieces */
            static const size_t back[] = {0, 10, 9, N}, past[] = {0, 10, N + 1};
            struct dt_optim_pieces bad[] = {
                {back, 3, NULL, NULL}, {past, 2, NULL, NULL}, {cuts, 0, NULL, NULL}};
            for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++)
                assert_int_equal(dt_optim_step_pieces(cut, p2, g, N, 0.1, &bad[b]), -DT_ERUNTIME);
            assert_memory_equal(p1, p2, sizeof p1);
            assert_true(dt_optim_steps(cut) == dt_optim_steps(whole));
            /* the slices [0, 2501) and [2501, N) of one state, as two ranks step them */
            struct dt_optim_state st[DT_OPTIM_MAX_STATES];
            int ns = dt_optim_states(cut, st);
            float *storage = calloc((size_t)(ns ? ns : 1) * N, sizeof(float));
            for (int k = 0; k < ns; k++)
                memcpy(storage + (size_t)k * N, st[k].data, N * sizeof(float));
            struct dt_optim *ranks = NULL;
            assert_int_equal(dt_optim_create_in(&ranks, &c, N, storage), 0);
            dt_optim_set_steps(ranks, dt_optim_steps(cut));
            assert_int_equal(dt_optim_skip_decay(ranks, 5, 290), 0);
            assert_int_equal(dt_optim_set_group(ranks, 1000, 2600, &scaled), 0);
            assert_int_equal(dt_optim_set_group(ranks, 3000, 80000, &frozen), 0);
            struct dt_optim_pieces first = {cuts, 6, NULL, NULL},
                                   second = {cuts + 6, 3, NULL, NULL};
            uint64_t at = dt_optim_steps(ranks);
            assert_int_equal(dt_optim_step(whole, p1, g, N, 0.1), 0);
            assert_int_equal(dt_optim_step_pieces(ranks, p2, g, N, 0.1, &first), 0);
            assert_memory_equal(p2 + 2501, seen.snapshot + 2501, (N - 2501) * sizeof(float));
            dt_optim_set_steps(ranks, at); /* the second rank's count of the same step */
            assert_int_equal(dt_optim_step_pieces(ranks, p2, g, N, 0.1, &second), 0);
            assert_memory_equal(p1, p2, sizeof p1);
            dt_optim_free(ranks);
            free(storage);
            dt_optim_free(whole);
            dt_optim_free(cut);
        }
    omp_set_num_threads(was);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgd_plain_and_weight_decay),
        cmocka_unit_test(test_skip_decay_ranges),
        cmocka_unit_test(test_parameter_groups_scale_and_freeze),
        cmocka_unit_test(test_sgd_momentum_dampening_nesterov),
        cmocka_unit_test(test_adam_constant_gradient),
        cmocka_unit_test(test_adam_weight_decay_is_l2),
        cmocka_unit_test(test_adamw_decouples_decay),
        cmocka_unit_test(test_amsgrad_keeps_the_maximum),
        cmocka_unit_test(test_adadelta),
        cmocka_unit_test(test_state_is_fixed),
        cmocka_unit_test(test_type_names),
        cmocka_unit_test(test_invalid_configs),
        cmocka_unit_test(test_step_size_mismatch),
        cmocka_unit_test(test_step_in_slices_over_external_state),
        cmocka_unit_test(test_step_pieces),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

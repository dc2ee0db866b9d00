/* Synchronized batchnorm (nn/layer_batchnorm2d.c with the model's allreduce hook): N models,
 * one per thread standing in for N processes, each run forward and backward on its share of a
 * batch with the hook summing across the threads; the outputs, the summed gradients and every
 * model's running statistics must equal one model's on the whole batch (within 1e-5 scaled),
 * for even shares, uneven shares, and shares that leave a thread with no samples (logits
 * scaled from 0.1, see OUTPUT_FLOOR); the first step's running statistics bit for bit, the
 * reductions being exact (later steps differ by the float rounding of the summed gradients,
 * which this test adds up itself). Without the
 * hook the shares' statistics differ, which the last test shows is visible. With a gradient
 * slice set (nn/grad_tree.h, dist.split_invariant) and the all-reduce's tree over ranks, even
 * shares of 2 and 4 give one model's bits at every step: outputs, statistics, weights.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nn/model.h"
#include "nn_specs.h"

#define TOLERANCE 1e-5
#define FLOOR     1e-2
/* Logits are sums of 180 products: where they cancel to near 0 the float rounding of the
 * terms (1 ulp of an O(1) value, ~1e-7) is all that is left, so they are scaled from 0.1. */
#define OUTPUT_FLOOR 1e-1
#define MAX_RANKS    4
#define MAX_SUM      256
#define BATCH        12
#define SAMPLE       (2 * 6 * 6)
#define CLASSES      10
#define STEPS        3

/* v[0] + ... + v[n-1] in the shm all-reduce's binary tree over ranks: ((0+1)+(2+3)) for 4. */
static float tree_sum(const float *v, int n)
{
    float t[MAX_RANKS];
    memcpy(t, v, (size_t)n * sizeof *t);
    for (int width = 1; width < n; width *= 2)
        for (int i = 0; i + width < n; i += 2 * width)
            t[i] += t[i + width];
    return t[0];
}

/* An in-process all-reduce: every thread publishes its buffer, each sums all of them in the
 * same tree (so every thread gets the same bits), then writes its own. */
struct group {
    pthread_barrier_t barrier;
    float *bufs[MAX_RANKS];
    int size;
};

struct member {
    struct group *g;
    int rank;
    struct dt_model *m;
    const float *x;
    const uint8_t *y;
    int lo, hi; /* this thread's samples */
    int rc;
};

static int group_sum(void *ctx, float *data, size_t n)
{
    struct member *me = ctx;
    float tmp[MAX_SUM];
    assert_true(n <= MAX_SUM);
    me->g->bufs[me->rank] = data;
    pthread_barrier_wait(&me->g->barrier);
    for (size_t i = 0; i < n; i++) {
        float v[MAX_RANKS];
        for (int r = 0; r < me->g->size; r++)
            v[r] = me->g->bufs[r][i];
        tmp[i] = tree_sum(v, me->g->size);
    }
    pthread_barrier_wait(&me->g->barrier);
    memcpy(data, tmp, n * sizeof *tmp);
    return 0;
}

static void model_specs(struct dt_layer_spec *s)
{
    s[0] = conv_spec(4, 3, 1, 1);
    s[1] = spec_of("batchnorm2d");
    s[2] = spec_of("relu");
    s[3] = conv_spec(5, 3, 2, 1);
    s[4] = spec_of("batchnorm2d");
    s[5] = spec_of("relu");
    s[6] = spec_of("flatten");
    s[7] = linear_spec(CLASSES);
}

/* slice: samples per weight-gradient slice, 0 = none */
static struct dt_model *build(int slice)
{
    struct dt_layer_spec s[8];
    model_specs(s);
    struct dt_model *m;
    struct dt_shape in = {2, 6, 6};
    assert_int_equal(dt_model_build(&m, s, 8, in, BATCH, DT_LOSS_CROSS_ENTROPY, 3), 0);
    assert_int_equal(dt_model_set_grad_slice(m, slice), 0);
    return m;
}

/* One training step of a member on its share: forward, backward with the global scale. */
static int member_step(struct member *me)
{
    struct dt_forward_ctx ctx = {.training = true, .seed = 1};
    int n = me->hi - me->lo;
    int rc = dt_model_forward(me->m, me->x + (size_t)me->lo * SAMPLE, n, &ctx);
    return rc ? rc : dt_model_backward(me->m, me->y + me->lo, n, 1.0f / BATCH);
}

static void *member_main(void *arg)
{
    struct member *me = arg;
    me->rc = member_step(me);
    return NULL;
}

static double worst_floor(const float *got, const float *want, size_t n, double floor)
{
    double w = 0;
    for (size_t i = 0; i < n; i++)
        w = fmax(w, fabs((double)got[i] - want[i]) / fmax(fabs(want[i]), floor));
    return w;
}

static double worst(const float *got, const float *want, size_t n)
{
    return worst_floor(got, want, n, FLOOR);
}

static void fill_batch(float *x, uint8_t *y)
{
    uint64_t s = 12345;
    for (size_t i = 0; i < (size_t)BATCH * SAMPLE; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 4.0 - 1.5);
    }
    for (int b = 0; b < BATCH; b++)
        y[b] = (uint8_t)(b * 7 % CLASSES);
}

/* Runs STEPS SGD steps (plain update p -= 0.1 g on the summed gradient) on one model and on
 * `size` synchronized members with the given shares; returns the worst scaled difference over
 * outputs, gradients, parameters and buffers. sync false leaves the hook unset. */
/* The worst relative difference from one model on the whole batch; with a slice, asserts the
 * same bits throughout. */
static double compare(int size, const int *cuts, bool sync, int slice)
{
    float x[BATCH * SAMPLE];
    uint8_t y[BATCH];
    fill_batch(x, y);
    struct dt_model *ref = build(slice);
    struct group g = {.size = size};
    pthread_barrier_init(&g.barrier, NULL, (unsigned)size);
    struct member ms[MAX_RANKS];
    for (int r = 0; r < size; r++) {
        ms[r] =
            (struct member){.g = &g, .rank = r, .x = x, .y = y, .lo = cuts[r], .hi = cuts[r + 1]};
        ms[r].m = build(slice);
        if (sync) {
            ms[r].m->allreduce.sum = group_sum;
            ms[r].m->allreduce.ctx = &ms[r];
            ms[r].m->allreduce.rank = r;
            ms[r].m->allreduce.size = size;
        }
    }
    double w = 0;
    float *sum = calloc(ref->nparams, sizeof *sum);
    assert_non_null(sum);
    for (int step = 0; step < STEPS; step++) {
        struct member whole = {.m = ref, .x = x, .y = y, .lo = 0, .hi = BATCH};
        assert_int_equal(member_step(&whole), 0);
        pthread_t th[MAX_RANKS];
        for (int r = 0; r < size; r++)
            assert_int_equal(pthread_create(&th[r], NULL, member_main, &ms[r]), 0);
        for (int r = 0; r < size; r++) {
            pthread_join(th[r], NULL);
            assert_int_equal(ms[r].rc, 0);
        }
        for (size_t i = 0; i < ref->nparams; i++) {
            float v[MAX_RANKS];
            for (int r = 0; r < size; r++)
                v[r] = ms[r].m->grads[i];
            sum[i] = tree_sum(v, size);
        }
        if (slice)
            assert_memory_equal(sum, ref->grads, ref->nparams * sizeof *sum);
        for (int r = 0; r < size; r++) {
            const struct member *me = &ms[r];
            size_t rows = (size_t)(me->hi - me->lo) * CLASSES;
            /* the first step's statistics are exact sums, and the convs compute each sample
             * alone: the running statistics are the same bits as one model's (the logits
             * are not: the linear layer's GEMM over the batch rounds with its height) */
            if (sync && (step == 0 || slice))
                assert_memory_equal(me->m->buffers, ref->buffers, ref->nbuffers * sizeof(float));
            if (slice)
                assert_memory_equal(me->m->output, ref->output + (size_t)me->lo * CLASSES,
                                    rows * sizeof(float));
            w = fmax(w, worst_floor(me->m->output, ref->output + (size_t)me->lo * CLASSES, rows,
                                    OUTPUT_FLOOR));
            w = fmax(w, worst(me->m->buffers, ref->buffers, ref->nbuffers));
        }
        w = fmax(w, worst(sum, ref->grads, ref->nparams));
        for (size_t i = 0; i < ref->nparams; i++) {
            ref->params[i] -= 0.1f * ref->grads[i];
            for (int r = 0; r < size; r++)
                ms[r].m->params[i] -= 0.1f * sum[i];
        }
    }
    for (int r = 0; r < size; r++) {
        w = fmax(w, worst(ms[r].m->params, ref->params, ref->nparams));
        if (slice)
            assert_memory_equal(ms[r].m->params, ref->params, ref->nparams * sizeof(float));
        dt_model_free(ms[r].m);
    }
    free(sum);
    dt_model_free(ref);
    pthread_barrier_destroy(&g.barrier);
    return w;
}

static void test_even_shares(void **state)
{
    (void)state;
    int two[] = {0, 6, 12}, four[] = {0, 3, 6, 9, 12};
    double w2 = compare(2, two, true, 0), w4 = compare(4, four, true, 0);
    printf("2 x 6: %.3g, 4 x 3: %.3g\n", w2, w4);
    assert_true(w2 <= TOLERANCE);
    assert_true(w4 <= TOLERANCE);
}

static void test_uneven_and_empty_shares(void **state)
{
    (void)state;
    int uneven[] = {0, 5, 12}, empty[] = {0, 4, 4, 11, 12};
    double wu = compare(2, uneven, true, 0), we = compare(4, empty, true, 0);
    printf("5 + 7: %.3g, 4 + 0 + 7 + 1: %.3g\n", wu, we);
    assert_true(wu <= TOLERANCE);
    assert_true(we <= TOLERANCE);
}

/* 12 samples in slices of 3: 1, 2 and 4 members compute the same bits (compare asserts it) */
static void test_split_invariant_shares(void **state)
{
    (void)state;
    int two[] = {0, 6, 12}, four[] = {0, 3, 6, 9, 12};
    assert_true(compare(2, two, true, 3) == 0);
    assert_true(compare(4, four, true, 3) == 0);
}

static void test_per_instance_statistics_differ(void **state)
{
    (void)state;
    int two[] = {0, 6, 12};
    double w = compare(2, two, false, 0);
    printf("per instance, 2 x 6: %.3g\n", w);
    assert_true(w > 1e-3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_even_shares),
        cmocka_unit_test(test_uneven_and_empty_shares),
        cmocka_unit_test(test_split_invariant_shares),
        cmocka_unit_test(test_per_instance_statistics_differ),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

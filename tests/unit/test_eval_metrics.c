/* eval's figures on hand-made inputs: per-class precision, recall and F1 and their macro
 * average from a confusion matrix (a class with no samples, one never predicted, one absent
 * from both); the label's rank for top-k with ties broken as argmax breaks them; output
 * probabilities under each loss; the worst-errors list keeps the surest wrong predictions in
 * order within its capacity. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <cmocka.h>

#include "nn/loss.h"
#include "train/eval_errors.h"
#include "train/evaluate.h"

#define EPS 1e-12
/* cmocka 1.1 compares floats only; these are doubles. */
#define assert_close(a, b, eps) assert_true(fabs((double)(a) - (double)(b)) <= (eps))

/* rows: true class; columns: predicted. Class 2 has no samples but is predicted once; class 3
 * has neither, so the macro average leaves it out. */
static const float confusion[4][4] = {
    {5, 1, 0, 0},
    {2, 3, 1, 0},
    {0, 0, 0, 0},
    {0, 0, 0, 0},
};

static void fill(struct dt_eval_result *r)
{
    assert_int_equal(dt_eval_result_init(r, 4), 0);
    for (int t = 0; t < 4; t++)
        for (int p = 0; p < 4; p++)
            r->sums[4 + t * 4 + p] = confusion[t][p];
}

static void test_class_metrics(void **state)
{
    (void)state;
    struct dt_eval_result r;
    fill(&r);
    struct dt_class_metrics m = dt_eval_class_metrics(&r, 0);
    assert_close(m.support, 6, EPS);
    assert_close(m.precision, 5.0 / 7, EPS);
    assert_close(m.recall, 5.0 / 6, EPS);
    assert_close(m.f1, 10.0 / 13, EPS);
    m = dt_eval_class_metrics(&r, 1);
    assert_close(m.precision, 3.0 / 4, EPS);
    assert_close(m.recall, 1.0 / 2, EPS);
    assert_close(m.f1, 3.0 / 5, EPS);
    m = dt_eval_class_metrics(&r, 2); /* predicted once, never right, no samples: all 0 */
    assert_close(m.support, 0, EPS);
    assert_close(m.precision, 0, EPS);
    assert_close(m.recall, 0, EPS);
    assert_close(m.f1, 0, EPS);
    dt_eval_result_free(&r);
}

static void test_macro_average(void **state)
{
    (void)state;
    struct dt_eval_result r;
    fill(&r);
    struct dt_class_metrics m = dt_eval_macro_metrics(&r);
    assert_close(m.support, 12, EPS);
    assert_close(m.precision, (5.0 / 7 + 3.0 / 4 + 0) / 3, EPS);
    assert_close(m.recall, (5.0 / 6 + 1.0 / 2 + 0) / 3, EPS);
    assert_close(m.f1, (10.0 / 13 + 3.0 / 5 + 0) / 3, EPS);
    dt_eval_result_free(&r);
}

static void test_label_rank(void **state)
{
    (void)state;
    const float row[5] = {0.1f, 0.7f, 0.3f, 0.7f, -1.0f};
    assert_int_equal(dt_argmax(row, 5), 1);
    assert_int_equal(dt_label_rank(row, 5, 1), 0); /* the first of the tied maxima */
    assert_int_equal(dt_label_rank(row, 5, 3), 1); /* tied, but after class 1 */
    assert_int_equal(dt_label_rank(row, 5, 2), 2);
    assert_int_equal(dt_label_rank(row, 5, 0), 3);
    assert_int_equal(dt_label_rank(row, 5, 4), 4);
}

static void test_probabilities(void **state)
{
    (void)state;
    const float logits[3] = {1.0f, 2.0f, 3.0f};
    double p[3];
    dt_loss_probabilities(DT_LOSS_CROSS_ENTROPY, logits, 3, p);
    double z = exp(1.0) + exp(2.0) + exp(3.0);
    for (int i = 0; i < 3; i++)
        assert_close(p[i], exp(1.0 + i) / z, 1e-12);
    const float logp[2] = {(float)log(0.25), (float)log(0.75)};
    dt_loss_probabilities(DT_LOSS_NLL, logp, 2, p);
    assert_close(p[0], 0.25, 1e-7);
    assert_close(p[1], 0.75, 1e-7);
}

/* A two-class row whose predicted (wrong) class 1 has probability q, from log-probabilities. */
static void offer(struct dt_eval_errors *e, size_t sample, double q)
{
    const float row[2] = {(float)log(1 - q), (float)log(q)};
    assert_int_equal(dt_eval_errors_add(e, DT_LOSS_NLL, row, 2, sample, 0), 0);
}

static void test_worst_errors(void **state)
{
    (void)state;
    struct dt_eval_errors e;
    assert_int_equal(dt_eval_errors_init(&e, 3, 2), 0);
    offer(&e, 10, 0.6);
    offer(&e, 11, 0.9);
    offer(&e, 12, 0.7);
    offer(&e, 13, 0.55); /* not among the worst 3 */
    offer(&e, 14, 0.9);  /* ties with 11, comes later */
    assert_int_equal(e.n, 3);
    assert_int_equal(e.worst[0].sample, 11);
    assert_int_equal(e.worst[1].sample, 14);
    assert_int_equal(e.worst[2].sample, 12);
    assert_int_equal(e.worst[0].truth, 0);
    assert_int_equal(e.worst[0].predicted, 1);
    assert_close(e.worst[0].p_predicted, 0.9, 1e-6);
    assert_close(e.worst[0].p_truth, 0.1, 1e-6);
    dt_eval_errors_free(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_class_metrics), cmocka_unit_test(test_macro_average),
        cmocka_unit_test(test_label_rank),    cmocka_unit_test(test_probabilities),
        cmocka_unit_test(test_worst_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* train/best: on validation accuracy the highest wins, on training loss the lowest; the first
 * epoch is always best and a tie keeps the earlier epoch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <cmocka.h>

#include "train/best.h"

static void test_on_val_accuracy(void **state)
{
    (void)state;
    struct dt_best b;
    dt_best_init(&b, true);
    assert_true(dt_best_update(&b, 0.0, 9.0, 1, 10));  /* first epoch, even at 0% */
    assert_true(dt_best_update(&b, 0.5, 9.0, 2, 20));  /* train loss is ignored */
    assert_false(dt_best_update(&b, 0.5, 0.1, 3, 30)); /* a tie keeps the earlier */
    assert_false(dt_best_update(&b, 0.4, 0.01, 4, 40));
    assert_true(dt_best_update(&b, 0.6, 5.0, 5, 50));
}

static void test_on_train_loss(void **state)
{
    (void)state;
    struct dt_best b;
    dt_best_init(&b, false);
    assert_true(dt_best_update(&b, 0.9, 2.5, 6, 60));  /* losses above 1 too */
    assert_false(dt_best_update(&b, 1.0, 2.6, 7, 70)); /* val accuracy is ignored */
    assert_true(dt_best_update(&b, 0.0, 0.7, 8, 80));
    assert_false(dt_best_update(&b, 0.0, 0.7, 9, 90));
}

/* The record says which epoch and step it holds, and the score in the metric's units. */
static void test_position_and_score(void **state)
{
    (void)state;
    struct dt_best b;
    dt_best_init(&b, false);
    assert_string_equal(dt_best_metric(&b), "train_loss");
    assert_true(dt_best_update(&b, 0.0, 0.9, 1, 50));
    assert_true(dt_best_update(&b, 0.0, 0.4, 2, 100));
    assert_false(dt_best_update(&b, 0.0, 0.5, 3, 150));
    assert_int_equal(b.epoch, 2);
    assert_int_equal(b.step, 100);
    assert_true(dt_best_metric_value(&b, b.score) == 0.4);
    dt_best_init(&b, true);
    assert_string_equal(dt_best_metric(&b), "val_accuracy");
    assert_true(dt_best_update(&b, 0.75, 0.9, 4, 200));
    assert_true(dt_best_metric_value(&b, b.score) == 0.75);
    assert_int_equal(b.epoch, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_on_val_accuracy),
        cmocka_unit_test(test_on_train_loss),
        cmocka_unit_test(test_position_and_score),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

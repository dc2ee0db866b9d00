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
    assert_true(dt_best_update(&b, 0.0, 9.0));   /* first epoch, even at 0% */
    assert_true(dt_best_update(&b, 0.5, 9.0));   /* train loss is ignored */
    assert_false(dt_best_update(&b, 0.5, 0.1));  /* a tie keeps the earlier */
    assert_false(dt_best_update(&b, 0.4, 0.01));
    assert_true(dt_best_update(&b, 0.6, 5.0));
}

static void test_on_train_loss(void **state)
{
    (void)state;
    struct dt_best b;
    dt_best_init(&b, false);
    assert_true(dt_best_update(&b, 0.9, 2.5));   /* losses above 1 too */
    assert_false(dt_best_update(&b, 1.0, 2.6));  /* val accuracy is ignored */
    assert_true(dt_best_update(&b, 0.0, 0.7));
    assert_false(dt_best_update(&b, 0.0, 0.7));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_on_val_accuracy),
        cmocka_unit_test(test_on_train_loss),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

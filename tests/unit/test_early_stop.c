/* train/early_stop: the metric names resolve (test metrics refused with the reason, val metrics
 * need a split), improvement by more than min_delta in the metric's direction resets the count,
 * the run stops when the count reaches the patience, and the state round-trips through a
 * checkpoint's metadata only for the same metric. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include "nn/checkpoint.h"
#include "train/early_stop.h"

static struct dt_early_stop make(const char *metric, int patience, double min_delta)
{
    struct dt_early_stop_config c = {.patience = patience, .min_delta = min_delta};
    char msg[300];
    strcpy(c.metric_name, metric);
    assert_null(dt_early_stop_resolve(&c, true, msg, sizeof msg));
    struct dt_early_stop s;
    dt_early_stop_init(&s, &c);
    return s;
}

static void test_resolve(void **state)
{
    (void)state;
    char msg[300];
    struct dt_early_stop_config c = {.patience = 1};
    strcpy(c.metric_name, "none");
    assert_null(dt_early_stop_resolve(&c, false, msg, sizeof msg));
    assert_int_equal(c.metric, DT_ES_NONE);
    strcpy(c.metric_name, "val_loss");
    assert_string_equal(dt_early_stop_resolve(&c, false, msg, sizeof msg),
                        "train.early_stop.metric");
    assert_non_null(strstr(msg, "needs a validation split"));
    assert_null(dt_early_stop_resolve(&c, true, msg, sizeof msg));
    assert_int_equal(c.metric, DT_ES_VAL_LOSS);
    strcpy(c.metric_name, "test_accuracy");
    assert_non_null(dt_early_stop_resolve(&c, true, msg, sizeof msg));
    assert_non_null(strstr(msg, "use val_accuracy"));
    strcpy(c.metric_name, "Val_accuracy");
    assert_non_null(dt_early_stop_resolve(&c, true, msg, sizeof msg));
    assert_non_null(strstr(msg, "unknown metric \"Val_accuracy\""));
}

static void test_accuracy_patience(void **state)
{
    (void)state;
    struct dt_early_stop s = make("val_accuracy", 2, 0.01);
    struct dt_epoch_scores e = {.val_accuracy = 0.5};
    assert_false(dt_early_stop_update(&s, &e, 1)); /* the first epoch sets the best */
    e.val_accuracy = 0.505;                        /* not by more than min_delta */
    assert_false(dt_early_stop_update(&s, &e, 2));
    assert_int_equal(s.bad_epochs, 1);
    e.val_accuracy = 0.52; /* improves: the count starts over */
    assert_false(dt_early_stop_update(&s, &e, 3));
    assert_int_equal(s.bad_epochs, 0);
    assert_int_equal(s.best_epoch, 3);
    e.val_accuracy = 0.1;
    assert_false(dt_early_stop_update(&s, &e, 4));
    assert_true(dt_early_stop_update(&s, &e, 5));
    assert_true(dt_early_stop_due(&s));
    char why[200];
    dt_early_stop_describe(&s, why, sizeof why);
    assert_string_equal(why, "val_accuracy did not improve by more than 0.01 for 2 epochs (best "
                             "0.52 at epoch 3)");
}

static void test_loss_lower_is_better(void **state)
{
    (void)state;
    struct dt_early_stop s = make("train_loss", 1, 0);
    struct dt_epoch_scores e = {.train_loss = 2.0, .val_accuracy = 0.9};
    assert_false(dt_early_stop_update(&s, &e, 1));
    e.train_loss = 1.5;
    assert_false(dt_early_stop_update(&s, &e, 2));
    e.train_loss = NAN; /* a diverged run never improves */
    assert_true(dt_early_stop_update(&s, &e, 3));
}

static void test_off(void **state)
{
    (void)state;
    struct dt_early_stop s = make("none", 1, 0);
    struct dt_epoch_scores e = {0};
    for (int i = 1; i < 5; i++)
        assert_false(dt_early_stop_update(&s, &e, i));
    assert_false(dt_early_stop_due(&s));
}

static void test_metadata_round_trip(void **state)
{
    (void)state;
    struct dt_early_stop s = make("val_loss", 3, 0);
    struct dt_epoch_scores e = {.val_loss = 0.75};
    dt_early_stop_update(&s, &e, 1);
    e.val_loss = 0.8;
    dt_early_stop_update(&s, &e, 2);
    struct dt_checkpoint_meta meta = {0};
    assert_int_equal(dt_early_stop_save(&s, &meta), 0);
    struct dt_early_stop back = make("val_loss", 3, 0);
    dt_early_stop_load(&back, &meta);
    assert_true(back.any);
    assert_true(back.best == 0.75);
    assert_int_equal(back.best_epoch, 1);
    assert_int_equal(back.bad_epochs, 1);
    struct dt_early_stop other = make("train_loss", 3, 0); /* another metric: afresh */
    dt_early_stop_load(&other, &meta);
    assert_false(other.any);
    assert_int_equal(other.bad_epochs, 0);
    dt_checkpoint_meta_free(&meta);
    struct dt_checkpoint_meta bad = {0};
    assert_int_equal(dt_checkpoint_meta_set(&bad, "early_stop", "val_loss 1 x -3"), 0);
    struct dt_early_stop junk = make("val_loss", 3, 0);
    dt_early_stop_load(&junk, &bad);
    assert_false(junk.any);
    assert_int_equal(junk.bad_epochs, 0);
    dt_checkpoint_meta_free(&bad);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resolve),
        cmocka_unit_test(test_accuracy_patience),
        cmocka_unit_test(test_loss_lower_is_better),
        cmocka_unit_test(test_off),
        cmocka_unit_test(test_metadata_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

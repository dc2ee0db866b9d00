/* nn/schedule.c: each schedule's rate at the steps that define it (torch.optim.lr_scheduler's
 * StepLR and CosineAnnealingLR formulas), the warmup in front of any of them, the purity a
 * resumed run relies on, and the validation messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "nn/schedule.h"
#include "util/err.h"

static struct dt_schedule make(enum dt_schedule_type type)
{
    struct dt_schedule s = {.type = type, .lr = 0.1, .step_size = 2, .gamma = 0.5, .min_lr = 0.01};
    assert_int_equal(dt_schedule_validate(&s), 0);
    return s;
}

static void test_constant(void **state)
{
    (void)state;
    struct dt_schedule s = make(DT_SCHEDULE_CONSTANT);
    for (long step = 0; step < 50; step += 7)
        assert_true(dt_schedule_lr(&s, step, step / 10, 50) == 0.1);
}

static void test_step_decays_per_epoch(void **state)
{
    (void)state;
    struct dt_schedule s = make(DT_SCHEDULE_STEP);
    const double expect[] = {0.1, 0.1, 0.05, 0.05, 0.025, 0.025};
    for (long epoch = 0; epoch < 6; epoch++)
        assert_float_equal(dt_schedule_lr(&s, epoch * 10 + 3, epoch, 60), expect[epoch], 1e-15);
}

static void test_cosine_endpoints_and_middle(void **state)
{
    (void)state;
    struct dt_schedule s = make(DT_SCHEDULE_COSINE);
    assert_float_equal(dt_schedule_lr(&s, 0, 0, 100), 0.1, 1e-15);
    assert_float_equal(dt_schedule_lr(&s, 50, 0, 100), 0.055, 1e-15);
    assert_float_equal(dt_schedule_lr(&s, 100, 0, 100), 0.01, 1e-15);
    assert_float_equal(dt_schedule_lr(&s, 25, 0, 100), 0.01 + 0.09 * (1 + cos(M_PI * 0.25)) / 2,
                       1e-15);
    /* Monotone non-increasing over the run. */
    double prev = 1;
    for (long t = 0; t <= 100; t++) {
        double lr = dt_schedule_lr(&s, t, 0, 100);
        assert_true(lr <= prev);
        prev = lr;
    }
}

static void test_warmup_in_front(void **state)
{
    (void)state;
    struct dt_schedule s = make(DT_SCHEDULE_COSINE);
    s.warmup_steps = 10;
    assert_float_equal(dt_schedule_lr(&s, 0, 0, 110), 0.01, 1e-15); /* 0.1 x 1/10 */
    assert_float_equal(dt_schedule_lr(&s, 4, 0, 110), 0.05, 1e-15);
    assert_float_equal(dt_schedule_lr(&s, 9, 0, 110), 0.1, 1e-15);
    /* The cosine starts after the warmup and still ends at min_lr. */
    assert_float_equal(dt_schedule_lr(&s, 10, 0, 110), 0.1, 1e-15);
    assert_float_equal(dt_schedule_lr(&s, 110, 0, 110), 0.01, 1e-15);
    struct dt_schedule c = make(DT_SCHEDULE_CONSTANT);
    c.warmup_steps = 4;
    assert_float_equal(dt_schedule_lr(&c, 1, 0, 100), 0.05, 1e-15);
}

/* The rate depends on the step alone: asked in any order, the same value (resume relies on
 * it). */
static void test_pure_function_of_step(void **state)
{
    (void)state;
    struct dt_schedule s = make(DT_SCHEDULE_COSINE);
    s.warmup_steps = 5;
    double forward[40];
    for (long t = 0; t < 40; t++)
        forward[t] = dt_schedule_lr(&s, t, t / 10, 40);
    for (long t = 39; t >= 0; t--)
        assert_true(dt_schedule_lr(&s, t, t / 10, 40) == forward[t]);
}

static void test_validation(void **state)
{
    (void)state;
    enum dt_schedule_type t;
    assert_int_equal(dt_schedule_type_parse("cosine", &t), 0);
    assert_int_equal(t, DT_SCHEDULE_COSINE);
    assert_int_equal(dt_schedule_type_parse("linear", &t), -DT_EUSAGE);
    assert_non_null(strstr(dt_last_error(), "linear"));
    struct dt_schedule s = make(DT_SCHEDULE_STEP);
    s.step_size = 0;
    assert_int_equal(dt_schedule_validate(&s), -DT_EUSAGE);
    assert_non_null(strstr(dt_last_error(), "step_size"));
    s = make(DT_SCHEDULE_STEP);
    s.gamma = NAN;
    assert_int_equal(dt_schedule_validate(&s), -DT_EUSAGE);
    assert_non_null(strstr(dt_last_error(), "gamma"));
    s = make(DT_SCHEDULE_COSINE);
    s.min_lr = 0.2;
    assert_int_equal(dt_schedule_validate(&s), -DT_EUSAGE);
    assert_non_null(strstr(dt_last_error(), "min_lr"));
    s = make(DT_SCHEDULE_CONSTANT);
    s.warmup_steps = -1;
    assert_int_equal(dt_schedule_validate(&s), -DT_EUSAGE);
    s = make(DT_SCHEDULE_CONSTANT);
    s.lr = -1;
    assert_int_equal(dt_schedule_validate(&s), -DT_EUSAGE);
}

static void test_one_cycle_validation_and_shape(void **state)
{
    (void)state;
    enum dt_schedule_type t;
    assert_int_equal(dt_schedule_type_parse("one_cycle", &t), 0);
    assert_int_equal(t, DT_SCHEDULE_ONE_CYCLE);
    assert_string_equal(dt_schedule_type_name(t), "one_cycle");
    struct dt_schedule s = {.type = DT_SCHEDULE_ONE_CYCLE,
                            .lr = 0.1,
                            .pct_start = 0.3,
                            .div_factor = 25,
                            .final_div_factor = 1e4};
    assert_int_equal(dt_schedule_validate(&s), 0);
    /* starts at lr / 25, peaks at lr at step 0.3 T - 1, ends at lr / 25e4 */
    assert_true(fabs(dt_schedule_lr(&s, 0, 0, 100) - s.lr / 25) < 1e-15);
    assert_true(fabs(dt_schedule_lr(&s, 29, 0, 100) - s.lr) < 1e-15);
    assert_true(fabs(dt_schedule_lr(&s, 99, 0, 100) - s.lr / 25e4) < 1e-15);
    assert_true(dt_schedule_lr(&s, 150, 1, 100) == dt_schedule_lr(&s, 99, 0, 100));
    const char *fields[] = {"pct_start", "pct_start", "div_factor", "final_div_factor",
                            "warmup_steps"};
    for (int i = 0; i < 5; i++) {
        struct dt_schedule b = s;
        if (i == 0)
            b.pct_start = 0;
        else if (i == 1)
            b.pct_start = 1;
        else if (i == 2)
            b.div_factor = NAN;
        else if (i == 3)
            b.final_div_factor = 0;
        else
            b.warmup_steps = 5;
        assert_int_equal(dt_schedule_validate(&b), -DT_EUSAGE);
        assert_non_null(strstr(dt_last_error(), fields[i]));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_constant),
        cmocka_unit_test(test_step_decays_per_epoch),
        cmocka_unit_test(test_cosine_endpoints_and_middle),
        cmocka_unit_test(test_warmup_in_front),
        cmocka_unit_test(test_pure_function_of_step),
        cmocka_unit_test(test_validation),
        cmocka_unit_test(test_one_cycle_validation_and_shape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

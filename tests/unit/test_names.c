/* util/names: lookups, lists and typo hints over an enum's name table, and the tables the
 * config reads (each as long as its enum, every named value found under its name). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "dist/backend.h"
#include "dist/pin.h"
#include "nn/loss.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "nn/schedule.h"
#include "util/names.h"

static const char *const fruit[] = {"apple", NULL, "cherry", ""};
static const struct dt_names fruits = DT_NAMES(fruit);

static void test_lookups(void **state)
{
    (void)state;
    assert_int_equal(fruits.count, 4);
    assert_int_equal(dt_names_find(&fruits, "cherry"), 2);
    assert_int_equal(dt_names_find(&fruits, ""), 3);
    assert_int_equal(dt_names_find(&fruits, "banana"), -1);
    assert_string_equal(dt_names_name(&fruits, 0), "apple");
    assert_string_equal(dt_names_name(&fruits, 1), "unknown"); /* no name */
    assert_string_equal(dt_names_name(&fruits, 4), "unknown");
    assert_string_equal(dt_names_name(&fruits, -1), "unknown");
}

static void test_join_and_suggest(void **state)
{
    (void)state;
    char out[64];
    dt_names_join(&fruits, out, sizeof out);
    assert_string_equal(out, "apple, cherry, \"\"");
    dt_names_join(&fruits, out, 8); /* cut, still a string */
    assert_true(strlen(out) < 8);
    assert_string_equal(dt_names_suggest(&fruits, "aple"), "apple");
    assert_string_equal(dt_names_suggest(&fruits, "chery"), "cherry");
    assert_null(dt_names_suggest(&fruits, "banana"));
    assert_int_equal(dt_edit_distance("kitten", "sitting"), 3);
}

/* The config's tables: every value named (but dist.pin's list), found under its name. */
static void test_config_tables(void **state)
{
    (void)state;
    const struct dt_names *tables[] = {&dt_optim_type_names,    &dt_decay_skip_names,
                                       &dt_schedule_type_names, &dt_loss_kind_names,
                                       &dt_bn_stats_names,      &dt_backend_request_names,
                                       &dt_pin_mode_names};
    const int counts[] = {DT_OPTIM_COUNT,   DT_DECAY_SKIP_COUNT, DT_SCHEDULE_COUNT,
                          DT_LOSS_COUNT,    DT_BN_STATS_COUNT,   DT_BACKEND_REQUEST_COUNT,
                          DT_PIN_MODE_COUNT};
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++) {
        assert_int_equal(tables[t]->count, counts[t]);
        for (int v = 0; v < tables[t]->count; v++) {
            const char *name = tables[t]->names[v];
            if (tables[t] == &dt_pin_mode_names && v == DT_PIN_LIST) {
                assert_null(name);
                continue;
            }
            assert_non_null(name);
            assert_int_equal(dt_names_find(tables[t], name), v);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookups),
        cmocka_unit_test(test_join_and_suggest),
        cmocka_unit_test(test_config_tables),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

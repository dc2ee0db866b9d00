/* train/restart: --max-restarts waits 1, 2, 4, ... up to 30 s, and a failure that repeats (the
 * rank pids aside) is recognised. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <cmocka.h>

#include "train/restart.h"

static void test_delay_doubles_to_a_cap(void **state)
{
    (void)state;
    const double want[] = {1, 2, 4, 8, 16, 30, 30};
    for (int n = 1; n <= 7; n++)
        assert_true(dt_restart_delay(n) == want[n - 1]);
    assert_true(dt_restart_delay(1000) == DT_RESTART_MAX_DELAY);
}

static void test_same_failure(void **state)
{
    (void)state;
    assert_true(
        dt_restart_same_failure("/d/last.safetensors: write failed: No space left on device",
                                "/d/last.safetensors: write failed: No space left on device"));
    /* the launcher's message names a new pid at every start */
    assert_true(
        dt_restart_same_failure("rank 0 (pid 28930) exited with code 1; stopped the other 1 rank",
                                "rank 0 (pid 1) exited with code 1; stopped the other 1 rank"));
    assert_false(dt_restart_same_failure("rank 0 (pid 28930) exited with code 1",
                                         "rank 1 (pid 28930) exited with code 1"));
    assert_false(dt_restart_same_failure("rank 0 (pid 5) was killed by SIGKILL",
                                         "rank 0 (pid 5) exited with code 1"));
    assert_false(dt_restart_same_failure("abc", "abcd"));
    assert_false(dt_restart_same_failure("pid 12 x", "pid x"));
    assert_true(dt_restart_same_failure("", ""));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delay_doubles_to_a_cap),
        cmocka_unit_test(test_same_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

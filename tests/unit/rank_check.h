/* For tests that fork ranks: a failed check inside a child cannot use cmocka's asserts (they
 * longjmp into the parent's copy of the runner), so it prints where and why, with the last
 * dtrain error, and exits 1; the parent's waitpid sees the failure. */
#ifndef DT_TESTS_RANK_CHECK_H
#define DT_TESTS_RANK_CHECK_H

#include <stdio.h>
#include <unistd.h>

#include "util/err.h"

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank check failed at line %d: ", __LINE__);                           \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, " [%s]\n", dt_last_error());                                           \
            _exit(1);                                                                              \
        }                                                                                          \
    } while (0)

#endif

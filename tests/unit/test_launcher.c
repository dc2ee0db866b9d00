/* dist/launcher: clean runs, a rank that fails or is killed (the others are stopped, the
 * failure hook runs once, the message names the rank and how it ended), a rank that ignores
 * SIGTERM (SIGKILL after the grace period), a stop request to the supervisor, a rank that
 * stops making progress outside any collective (the heartbeat watchdog), and a parent that
 * would fork with an OpenMP pool alive (refused). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dist/launcher.h"
#include "util/clock.h"
#include "util/err.h"

/* Shared with the children (MAP_SHARED), so the parent sees what each rank did. */
struct board {
    int ran[8];
    int failures; /* on_failure calls, in the parent */
    char reason[256];
    int mode;
};

enum { ALL_OK, RANK1_EXITS_3, RANK2_KILLED, STUBBORN, SLEEPERS, RANK1_STALLS, NEVER_SET_UP };

static struct board *board;

static int rank_main(int rank, void *arg)
{
    (void)arg;
    board->ran[rank] = 1;
    switch (board->mode) {
    case RANK1_EXITS_3:
        if (rank == 1)
            return dt_fail(DT_EDATA, "rank 1 found bad data");
        pause(); /* the others wait until the supervisor stops them */
        return 0;
    case RANK2_KILLED:
        if (rank == 2)
            raise(SIGKILL);
        pause();
        return 0;
    case STUBBORN:
        signal(SIGTERM, SIG_IGN);
        if (rank == 0) {
            usleep(100000); /* rank 1 ignores SIGTERM by then */
            _exit(1);
        }
        for (;;)
            pause();
    case SLEEPERS:
        pause();
        return -DT_ETERM;
    case NEVER_SET_UP: /* rank 0 sets up and steps; rank 1 never finishes its set-up */
        if (rank == 1)
            pause();
        dt_launch_alive();
        for (long step = 0;; step++) {
            dt_launch_beat(step);
            usleep(10000);
        }
    case RANK1_STALLS: /* both beat; rank 1 stops after step 7, outside any collective */
        for (long step = 0;; step++) {
            if (rank == 1 && step > 7)
                pause();
            dt_launch_beat(step);
            usleep(10000);
        }
    default:
        return 0;
    }
}

static void on_failure(void *arg, const char *reason)
{
    (void)arg;
    board->failures++;
    snprintf(board->reason, sizeof board->reason, "%s", reason);
}

static int launch_setup(int n, int mode, double grace, double stall_timeout, double setup_timeout)
{
    memset(board, 0, sizeof *board);
    board->mode = mode;
    struct dt_launch_opts o = {.n = n,
                               .rank_main = rank_main,
                               .on_failure = on_failure,
                               .grace = grace,
                               .stall_timeout = stall_timeout,
                               .setup_timeout = setup_timeout};
    return dt_launch_run(&o);
}

static int launch_watched(int n, int mode, double grace, double stall_timeout)
{
    return launch_setup(n, mode, grace, stall_timeout, 0);
}

static int launch(int n, int mode, double grace)
{
    return launch_watched(n, mode, grace, 0);
}

static void test_all_ranks_run_and_succeed(void **state)
{
    (void)state;
    assert_int_equal(launch(4, ALL_OK, 0), 0);
    for (int r = 0; r < 4; r++)
        assert_int_equal(board->ran[r], 1);
    assert_int_equal(board->failures, 0);
}

static void test_failing_rank_stops_the_others(void **state)
{
    (void)state;
    double t0 = dt_now();
    int rc = launch(3, RANK1_EXITS_3, 0);
    assert_int_equal(rc, -DT_ERUNTIME);
    assert_true(dt_now() - t0 < 5.0);
    assert_non_null(strstr(dt_last_error(), "rank 1"));
    assert_non_null(strstr(dt_last_error(), "exited with code 3"));
    assert_int_equal(board->failures, 1);
    assert_non_null(strstr(board->reason, "rank 1"));
}

static void test_killed_rank_is_named_with_its_signal(void **state)
{
    (void)state;
    int rc = launch(3, RANK2_KILLED, 0);
    assert_int_equal(rc, -DT_ERUNTIME);
    assert_non_null(strstr(dt_last_error(), "rank 2"));
    assert_non_null(strstr(dt_last_error(), "SIGKILL"));
}

static void test_rank_ignoring_sigterm_gets_sigkill(void **state)
{
    (void)state;
    double t0 = dt_now();
    int rc = launch(2, STUBBORN, 0.3);
    assert_int_equal(rc, -DT_ERUNTIME);
    assert_non_null(strstr(dt_last_error(), "rank 0"));
    assert_true(dt_now() - t0 < 5.0);
}

static void test_sigterm_to_supervisor_stops_every_rank(void **state)
{
    (void)state;
    pid_t me = getpid();
    pid_t killer = fork();
    if (killer == 0) {
        usleep(200000);
        kill(me, SIGTERM);
        _exit(0);
    }
    int rc = launch(3, SLEEPERS, 0);
    assert_int_equal(rc, -DT_ETERM);
    while (waitpid(killer, NULL, 0) < 0)
        ;
}

static void test_stalled_rank_is_caught_by_the_watchdog(void **state)
{
    (void)state;
    double t0 = dt_now();
    int rc = launch_watched(2, RANK1_STALLS, 0.3, 0.5);
    assert_int_equal(rc, -DT_ERUNTIME);
    assert_true(dt_now() - t0 < 5.0);
    assert_non_null(strstr(dt_last_error(), "rank 1"));
    assert_non_null(strstr(dt_last_error(), "made no progress"));
    assert_non_null(strstr(dt_last_error(), "after step 7"));
    assert_int_equal(board->failures, 1);
}

/* Before its first heartbeat a rank has setup_timeout (a rendezvous may take long), not the
 * per-step stall_timeout, and a rank that never sets up is still caught. */
static void test_setup_has_its_own_limit(void **state)
{
    (void)state;
    double t0 = dt_now();
    int rc = launch_setup(2, NEVER_SET_UP, 0.3, 0.2, 1.0);
    double took = dt_now() - t0;
    assert_int_equal(rc, -DT_ERUNTIME);
    assert_true(took >= 1.0 && took < 5.0);
    assert_non_null(strstr(dt_last_error(), "rank 1"));
    assert_non_null(strstr(dt_last_error(), "while setting up"));
}

static void *idle_thread(void *arg)
{
    return arg;
}

/* Threads joined before the fork are gone: launching is fine. */
static void test_joined_threads_do_not_block_the_fork(void **state)
{
    (void)state;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, idle_thread, NULL), 0);
    pthread_join(t, NULL);
    assert_int_equal(dt_launch_check_no_threads(), 0);
    assert_int_equal(launch(2, ALL_OK, 0), 0);
}

/* An OpenMP parallel region leaves GNU OpenMP's pool alive; forking then would hang the
 * ranks' first parallel region. Run last: the pool stays for the rest of the process. */
static void test_openmp_pool_before_fork_is_refused(void **state)
{
    (void)state;
    int team = 0;
#pragma omp parallel num_threads(2)
    {
#pragma omp atomic
        team++;
    }
    assert_int_equal(team, 2);
    assert_int_equal(launch(2, ALL_OK, 0), -DT_ERUNTIME);
    assert_non_null(strstr(dt_last_error(), "before the ranks are forked"));
    assert_int_equal(board->ran[0] + board->ran[1], 0);
}

static void test_zero_ranks_is_a_usage_error(void **state)
{
    (void)state;
    struct dt_launch_opts o = {.n = 0, .rank_main = rank_main};
    assert_int_equal(dt_launch_run(&o), -DT_EUSAGE);
}

int main(void)
{
    board = mmap(NULL, sizeof *board, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_ranks_run_and_succeed),
        cmocka_unit_test(test_failing_rank_stops_the_others),
        cmocka_unit_test(test_killed_rank_is_named_with_its_signal),
        cmocka_unit_test(test_rank_ignoring_sigterm_gets_sigkill),
        cmocka_unit_test(test_sigterm_to_supervisor_stops_every_rank),
        cmocka_unit_test(test_zero_ranks_is_a_usage_error),
        cmocka_unit_test(test_stalled_rank_is_caught_by_the_watchdog),
        cmocka_unit_test(test_setup_has_its_own_limit),
        cmocka_unit_test(test_joined_threads_do_not_block_the_fork),
        cmocka_unit_test(test_openmp_pool_before_fork_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

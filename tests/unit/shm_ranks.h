/* For tests that fork the ranks of one shm segment (dist/shm.h): the parent's wait for them.
 * A rank that died is reported to the segment at once, as the launcher does, so the others
 * stop waiting on it and the test fails instead of hanging. */
#ifndef DT_TESTS_SHM_RANKS_H
#define DT_TESTS_SHM_RANKS_H

#include <sys/types.h>
#include <sys/wait.h>

#include "dist/shm.h"

/* Waits for the n ranks in pids; returns how many did not exit 0. */
static inline int shm_ranks_wait(const pid_t *pids, int n, struct dt_shm_segment *seg)
{
    int failed = 0, st;
    for (int r = 0; r < n; r++) {
        waitpid(pids[r], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            failed++;
            dt_shm_segment_abort(seg, "test: a rank failed");
        }
    }
    return failed;
}

#endif

/* The local launcher: forks the ranks of this host, supervises them, and tears the job down
 * when anything goes wrong.
 *
 * dt_launch_run() forks `n` children; child r runs rank_main(r, arg) and _exits with its
 * status mapped to an exit code (it never returns into the caller's stack); a negative status
 * is an error the child prints (dt_last_error) first, a positive one an error rank_main has
 * reported its own way. Children die with the parent (PR_SET_PDEATHSIG). The parent waits:
 *   - a child exits non-zero or is killed by a signal: on_failure(arg, reason) is called (e.g.
 *     to abort the shared-memory segment), the other children get SIGTERM, then SIGKILL after
 *     the grace period; returns DT_ERUNTIME "rank R exited with code C" / "rank R was killed by
 *     SIGKILL", within 5 s of the death;
 *   - SIGINT/SIGTERM to the parent: forwarded to the children, which stop cleanly at a step
 *     boundary; the same grace/SIGKILL rules; returns DT_EINTR / DT_ETERM;
 *   - every child exits 0: returns 0.
 *   - a child makes no progress (no dt_launch_beat or dt_launch_alive) for stall_timeout
 *     seconds once it has beaten, or setup_timeout before: a failure as above, "rank R (pid P)
 *     made no progress for S s (after step N; dist.timeout)";
 * All children are reaped before it returns: no orphans.
 *
 * It refuses (DT_ERUNTIME) to fork while threads started since the program began are alive
 * in the caller: forked children would inherit a dead thread pool (GNU OpenMP) and hang.
 */
#ifndef DT_DIST_LAUNCHER_H
#define DT_DIST_LAUNCHER_H

struct dt_launch_opts {
    int n;                                             /* ranks to fork (>= 1) */
    int (*rank_main)(int rank, void *arg);             /* returns 0 or a dt_status: negative
                                                          printed, positive already reported */
    void (*on_failure)(void *arg, const char *reason); /* may be NULL; called once */
    void *arg;
    double grace;         /* seconds between SIGTERM and SIGKILL; 0 -> 2 */
    double stall_timeout; /* seconds without a heartbeat that fail a set-up rank; 0 = none */
    double setup_timeout; /* the same before a rank's first heartbeat; 0 = no limit */
    /* How messages and the ranks' log tags name rank r: global rank rank_base + r, and in a
     * job of several hosts also "(host H, local r)". Zero: one host, ranks 0..n-1. */
    int rank_base, host, hosts;
};

int dt_launch_run(const struct dt_launch_opts *o);

/* In a rank: "I am alive and at this step" (a relaxed store; cheap enough for every step).
 * Does nothing outside a rank forked by dt_launch_run. */
void dt_launch_beat(long step);
/* The same without a step: a rank calls it when its set-up is done (from then on
 * stall_timeout applies), and in long work that is not a step (evaluation batches). */
void dt_launch_alive(void);

/* 0, or DT_ERUNTIME when threads started since the program began are still running. */
int dt_launch_check_no_threads(void);

#endif

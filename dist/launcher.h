/* The local launcher: forks the ranks of this host, supervises them, and tears the job down
 * when anything goes wrong.
 *
 * dt_launch_run() forks `n` children; child r runs rank_main(r, arg) and _exits with its
 * status mapped to an exit code (it never returns into the caller's stack). Children die with
 * the parent (PR_SET_PDEATHSIG). The parent waits:
 *   - a child exits non-zero or is killed by a signal: on_failure(arg, reason) is called (e.g.
 *     to abort the shared-memory segment), the other children get SIGTERM, then SIGKILL after
 *     the grace period; returns DT_ERUNTIME "rank R exited with code C" / "rank R was killed by
 *     SIGKILL", within 5 s of the death;
 *   - SIGINT/SIGTERM to the parent: forwarded to the children, which stop cleanly at a step
 *     boundary; the same grace/SIGKILL rules; returns DT_EINTR / DT_ETERM;
 *   - every child exits 0: returns 0.
 * All children are reaped before it returns: no orphans.
 */
#ifndef DT_DIST_LAUNCHER_H
#define DT_DIST_LAUNCHER_H

struct dt_launch_opts {
    int n;                                             /* ranks to fork (>= 1) */
    int (*rank_main)(int rank, void *arg);             /* returns 0 or a negative dt_status */
    void (*on_failure)(void *arg, const char *reason); /* may be NULL; called once */
    void *arg;
    double grace; /* seconds between SIGTERM and SIGKILL; 0 -> 2 */
};

int dt_launch_run(const struct dt_launch_opts *o);

#endif

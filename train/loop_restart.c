/* --max-restarts' supervision: the job run again from its newest checkpoint after a runtime
 * failure, the wait before each restart, and a stop signal that comes during that wait. The
 * policy (how long to wait, a failure that repeats) is train/restart.c's. Split out of
 * train/loop.c (train/loop_internal.h). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train/loop_internal.h"
#include "train/ranks.h"
#include "train/restart.h"
#include "train/rundir.h"
#include "nn/checkpoint.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/log.h"

/* A signal while the job waits to restart stops it there: no rank runs, so the checkpoint to
 * continue from is whatever last.safetensors holds. */
/* `from` is the checkpoint the next attempt would have resumed from: the run's own
 * last.safetensors, or the --resume checkpoint it began with, or NULL. */
static int stopped_between_restarts(const struct run *run, const char *from)
{
    const struct dt_config *cfg = run->cfg;
    int sig = stop_signal == SIGINT ? SIGINT : SIGTERM;
    const char *name = sig == SIGINT ? "SIGINT" : stop_signal == SIGTERM ? "SIGTERM" : "SIGUSR1";
    bool have = from && access(from, R_OK) == 0;
    long long step = -1;
    struct dt_checkpoint_meta meta = {0};
    if (have && dt_checkpoint_read_meta(from, &meta) == 0) {
        const char *v = dt_checkpoint_meta_get(&meta, "step");
        step = v ? strtoll(v, NULL, 10) : -1;
    }
    dt_checkpoint_meta_free(&meta);
    dt_clear_error();
    if (!cfg->log.quiet)
        dt_log_info("stopped by %s while waiting to restart; %s", name,
                    have ? "continue with --resume auto (or the stop event's command)"
                         : "no checkpoint was written yet");
    emit_stop_json(run->history, name, step, have ? from : NULL, run->opt->resume_command);
    return sig == SIGINT ? -DT_EINTR : -DT_ETERM;
}

/* Sleeps `seconds` unless a stop signal comes first (true then). SIGUSR1 with on_usr1 =
 * "continue" asks for a checkpoint, and with no rank running there is none to write. */
static bool wait_to_restart(const struct dt_config *cfg, double seconds)
{
    for (double end = dt_now() + seconds; dt_now() < end;) {
        if (stop_signal == SIGUSR1 && cfg->checkpoint.on_usr1 == DT_USR1_CONTINUE)
            stop_signal = 0;
        if (stop_signal)
            return true;
        usleep(20000);
    }
    return stop_signal != 0;
}

/* torchrun's --max-restarts: when a rank dies or a collective fails (a runtime failure; not a
 * signal, a config or a data error), every rank has been stopped; start the job again from the
 * newest last.safetensors (or from where it started), up to max_restarts times, after
 * dt_restart_delay seconds (1, 2, 4, ... 30), and not again when the failure is the one the
 * last restart ran into (train/restart.h). Across hosts each host restarts its own ranks and
 * the rendezvous runs again. */
int run_with_restarts(struct run *run)
{
    const struct dt_config *cfg = run->cfg;
    const struct dt_train_options *opt = run->opt;
    struct dt_train_options again = *opt;
    char last[1100], before[512] = "";
    snprintf(last, sizeof last, "%s/last.safetensors", run->dir);
    for (int restart = 0;; restart++) {
        if (run->shared) /* a fresh start must find zeroed optimizer state, as mmap gave it */
            memset(run->shared, 0, run->shared_floats * sizeof(float));
        int rc = dt_run_ranks(cfg, opt->plan, &again.job, rank_main, run);
        if (rc == 0 || dt_exit_code(rc) != DT_ERUNTIME || restart >= opt->max_restarts ||
            stop_signal)
            return rc;
        char reason[512];
        snprintf(reason, sizeof reason, "%s", dt_last_error());
        if (restart > 0 && dt_restart_same_failure(reason, before))
            return dt_fail(DT_ERUNTIME,
                           "%s; the same failure again after restart %d of %d: not restarting "
                           "again",
                           reason, restart, opt->max_restarts);
        snprintf(before, sizeof before, "%s", reason);
        again.resume = access(last, R_OK) == 0 ? last : opt->resume;
        double delay = dt_restart_delay(restart + 1);
        dt_log_warn("restart %d of %d after: %s; resuming from %s in %g s", restart + 1,
                    opt->max_restarts, reason, again.resume ? again.resume : "step 0", delay);
        emit_restart_json(run->history, restart + 1, opt->max_restarts, reason, again.resume,
                          delay);
        dt_clear_error();
        if (wait_to_restart(cfg, delay))
            return stopped_between_restarts(run, again.resume);
        int stale = opt->create_dir ? dt_run_dir_sweep(run->dir) : 0;
        if (stale)
            dt_log_info("%s: removed %d temp file%s of the failed job's checkpoint write", run->dir,
                        stale, stale == 1 ? "" : "s");
        run->opt = &again;
    }
}

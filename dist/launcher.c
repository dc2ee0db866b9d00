/* The local launcher: fork, supervise, tear down.
 *
 * The parent blocks SIGCHLD, SIGINT, SIGTERM, SIGHUP and SIGUSR1 (passed on to the ranks, which
 * agree on a step to checkpoint at) before forking and then waits for them
 * with sigtimedwait(), so every event (a child's death, a stop request) is handled in plain
 * code, not in a signal handler, and none is lost between two checks. Children restore the
 * caller's signal mask, so the handlers the caller installed (train's "stop at the next step")
 * are theirs too.
 *
 * Teardown is one path for every cause: the first failure (a non-zero exit, a death by signal,
 * or a stop request) is recorded, on_failure() wakes ranks blocked in collectives, the live
 * children get SIGTERM, and whatever is still alive after the grace period gets SIGKILL. The
 * parent returns only when every child has been reaped.
 */
#include "dist/launcher.h"

#include <errno.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/err.h"
#include "util/log.h"

#define DEFAULT_GRACE 2.0
/* How often the parent re-checks deadlines while nothing happens. */
#define POLL_SECONDS 0.1

struct child {
    pid_t pid;
    int status; /* wait status once reaped */
    int done;
};

struct supervisor {
    const struct dt_launch_opts *o;
    struct child *kids;
    int live;
    int failed_rank;      /* first rank that failed, -1 when none */
    char reason[256];     /* what happened to it */
    int stop_signal;      /* SIGINT/SIGTERM received by the parent, 0 when none */
    bool usr1;            /* SIGUSR1 was passed on to the ranks */
    bool aborted;         /* on_failure() has run */
    double kill_deadline; /* when SIGKILL follows SIGTERM; 0 = not tearing down */
};

static void describe_status(int status, char *buf, size_t cap)
{
    if (WIFEXITED(status))
        snprintf(buf, cap, "exited with code %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, cap, "was killed by SIG%s",
                 sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "UNKNOWN");
    else
        snprintf(buf, cap, "ended with wait status %d", status);
}

static void signal_live(struct supervisor *s, int sig)
{
    for (int r = 0; r < s->o->n; r++)
        if (s->kids[r].pid > 0 && !s->kids[r].done)
            kill(s->kids[r].pid, sig);
}

static double grace(const struct supervisor *s)
{
    return s->o->grace > 0 ? s->o->grace : DEFAULT_GRACE;
}

/* Wakes ranks blocked in collectives (once) and asks the live ones to stop, with SIGKILL after
 * the grace period (once). */
static void begin_teardown(struct supervisor *s, const char *why)
{
    if (!s->aborted && s->o->on_failure)
        s->o->on_failure(s->o->arg, why);
    s->aborted = true;
    if (s->kill_deadline > 0)
        return;
    signal_live(s, SIGTERM);
    s->kill_deadline = dt_now() + grace(s);
}

/* Collects the ranks that ended. Only our own pids: the caller may have other children. */
static void reap(struct supervisor *s)
{
    for (int r = 0; r < s->o->n; r++) {
        struct child *k = &s->kids[r];
        int status;
        if (k->pid <= 0 || k->done || waitpid(k->pid, &status, WNOHANG) != k->pid)
            continue;
        k->done = 1;
        k->status = status;
        s->live--;
        bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!clean && s->usr1 && !s->stop_signal && WIFEXITED(status) &&
            WEXITSTATUS(status) == DT_ETERM)
            s->stop_signal = SIGTERM; /* stopped on SIGUSR1 after its checkpoint */
        if (!clean && s->failed_rank < 0 && !s->stop_signal) {
            char what[128];
            describe_status(status, what, sizeof what);
            s->failed_rank = r;
            snprintf(s->reason, sizeof s->reason, "rank %d (pid %d) %s", r, (int)k->pid, what);
            begin_teardown(s, s->reason);
        } else if (!clean && s->stop_signal) {
            /* The ranks agree on the step they stop after, so one that exited 130/143 has
             * left the others a checkpoint to write, not a collective to wait in: let them
             * finish (the kill deadline still bounds it). A rank that ended any other way
             * must not leave the others waiting for it. */
            bool stopped = WIFEXITED(status) &&
                           (WEXITSTATUS(status) == DT_EINTR || WEXITSTATUS(status) == DT_ETERM);
            if (!stopped)
                begin_teardown(s, "the job was stopped");
        }
    }
}

static void wait_for_event(struct supervisor *s, const sigset_t *set)
{
    double wait = POLL_SECONDS;
    if (s->kill_deadline > 0) {
        double left = s->kill_deadline - dt_now();
        if (left <= 0) {
            signal_live(s, SIGKILL);
            s->kill_deadline = dt_now() + 3600; /* SIGKILL cannot be ignored: just reap */
            return;
        }
        if (left < wait)
            wait = left;
    }
    struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
    siginfo_t info;
    int sig = sigtimedwait(set, &info, &ts);
    if (sig == SIGUSR1) {
        /* Slurm's --signal=B:USR1: the ranks agree on a step and checkpoint there; whether
         * they then stop is theirs to say (their exit 143 is then a stop, not a failure). */
        s->usr1 = true;
        signal_live(s, SIGUSR1);
        return;
    }
    if ((sig == SIGINT || sig == SIGTERM || sig == SIGHUP) && !s->stop_signal) {
        s->stop_signal = sig == SIGINT ? SIGINT : SIGTERM;
        /* Ranks stop cleanly at their next step boundary; the grace period bounds it. */
        signal_live(s, s->stop_signal);
        s->kill_deadline = dt_now() + grace(s) + 3.0;
    }
}

static void run_child(const struct dt_launch_opts *o, int rank, pid_t parent,
                      const sigset_t *old_mask)
{
    /* Die with the parent: a SIGKILLed supervisor must not leave ranks behind. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
    sigprocmask(SIG_SETMASK, old_mask, NULL);
    char tag[32];
    snprintf(tag, sizeof tag, "rank %d", rank);
    dt_log_set_tag(tag);
    dt_clear_error();
    int rc = o->rank_main(rank, o->arg);
    int code = dt_exit_code(rc);
    if (rc < 0 && code != DT_EINTR && code != DT_ETERM)
        dt_log_error("%s", dt_last_error());
    fflush(stdout);
    fflush(stderr);
    _exit(code);
}

int dt_launch_run(const struct dt_launch_opts *o)
{
    if (o->n < 1 || !o->rank_main)
        return dt_fail(DT_EUSAGE, "launcher: %d ranks requested, expected >= 1", o->n);
    struct supervisor s = {.o = o, .failed_rank = -1};
    s.kids = calloc((size_t)o->n, sizeof *s.kids);
    if (!s.kids)
        return dt_fail(DT_ERUNTIME, "out of memory");

    sigset_t set, old_mask;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_BLOCK, &set, &old_mask);
    /* Output buffered before the fork would otherwise be written once per child. */
    fflush(stdout);
    fflush(stderr);

    pid_t parent = getpid();
    int rc = 0;
    for (int r = 0; r < o->n; r++) {
        pid_t pid = fork();
        if (pid == 0)
            run_child(o, r, parent, &old_mask);
        if (pid < 0) {
            rc = dt_fail(DT_ERUNTIME, "cannot fork rank %d: %s", r, strerror(errno));
            begin_teardown(&s, dt_last_error());
            break;
        }
        s.kids[r].pid = pid;
        s.live++;
    }

    while (s.live > 0) {
        reap(&s);
        if (s.live > 0)
            wait_for_event(&s, &set);
    }
    sigprocmask(SIG_SETMASK, &old_mask, NULL);

    if (rc)
        ; /* the fork failure is the message */
    else if (s.stop_signal)
        rc = s.stop_signal == SIGINT ? -DT_EINTR : -DT_ETERM;
    else if (s.failed_rank >= 0)
        rc = dt_fail(DT_ERUNTIME, "%s; stopped the other %d rank%s", s.reason, o->n - 1,
                     o->n - 1 == 1 ? "" : "s");
    free(s.kids);
    return rc;
}

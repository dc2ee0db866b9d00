/* The local launcher: fork, supervise, tear down.
 *
 * The parent blocks SIGCHLD, SIGINT, SIGTERM, SIGHUP and SIGUSR1 (passed on to the ranks, which
 * agree on a step to checkpoint at) before forking and then waits for them
 * with sigtimedwait(), so every event (a child's death, a stop request) is handled in plain
 * code, not in a signal handler, and none is lost between two checks. Children restore the
 * caller's signal mask, so the handlers the caller installed (train's "stop at the next step")
 * are theirs too.
 *
 * A watchdog covers what no collective sees: each rank stamps a heartbeat in a page shared
 * with the parent (dt_launch_beat, once a step); a rank whose stamp is older than
 * stall_timeout is a failure like a death. Ranks stuck in computation (every rank inside a
 * parallel region that never starts, say) wait in no collective, so no collective timeout
 * would ever fire for them.
 *
 * Forking with threads alive is refused: only the forking thread survives a fork, so a pool
 * started before it (GNU OpenMP's, after any parallel region) is gone in the children while
 * the pool's bookkeeping says it is there, and their first parallel region waits for ever.
 * The parent counts its threads against the count when the program started.
 *
 * Teardown is one path for every cause: the first failure (a non-zero exit, a death by signal,
 * or a stop request) is recorded, on_failure() wakes ranks blocked in collectives, the live
 * children get SIGTERM, and whatever is still alive after the grace period gets SIGKILL. The
 * parent returns only when every child has been reaped.
 */
#include "dist/launcher.h"

#include <dirent.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

/* One rank's heartbeat, in a page shared with the parent. */
struct beat {
    _Atomic double at;  /* dt_now() of the last beat (or of the fork) */
    _Atomic long step;  /* the step it reported; -1 before the first */
    _Atomic bool armed; /* set up: stall_timeout applies, not setup_timeout */
};

/* The child's own slot (NULL in the parent and in processes not started by dt_launch_run). */
static struct beat *my_beat;

void dt_launch_beat(long step)
{
    if (my_beat)
        atomic_store_explicit(&my_beat->step, step, memory_order_relaxed);
    dt_launch_alive();
}

void dt_launch_alive(void)
{
    if (my_beat) {
        atomic_store_explicit(&my_beat->at, dt_now(), memory_order_relaxed);
        atomic_store_explicit(&my_beat->armed, true, memory_order_relaxed);
    }
}

/* Threads of this process, from /proc/self/task; -1 when it cannot be read. */
static int thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Threads alive when the program started: a library's own pool started while loading
 * (OpenBLAS's pthread build) is accounted for and handles fork itself (pthread_atfork). */
static int baseline_threads = -1;

__attribute__((constructor)) static void count_baseline_threads(void)
{
    baseline_threads = thread_count();
}

int dt_launch_check_no_threads(void)
{
    int now = thread_count();
    if (now < 0 || baseline_threads < 0 || now <= baseline_threads)
        return 0;
    return dt_fail(DT_ERUNTIME,
                   "internal error: %d thread%s started since the program began still running "
                   "before the ranks are forked (an OpenMP parallel region or a helper thread in "
                   "the parent?); the forked ranks would hang",
                   now - baseline_threads, now - baseline_threads == 1 ? "" : "s");
}

struct supervisor {
    const struct dt_launch_opts *o;
    struct child *kids;
    struct beat *beats; /* shared with the children, one per rank */
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

/* "rank 3 (host 1, local 1, pid 4711)": global numbering always, the host and the local index
 * when there are several hosts, so a message reads the same on every host of the job. */
static void rank_name(const struct dt_launch_opts *o, int r, pid_t pid, char *out, size_t cap)
{
    if (o->hosts > 1)
        snprintf(out, cap, "rank %d (host %d, local %d, pid %d)", o->rank_base + r, o->host, r,
                 (int)pid);
    else
        snprintf(out, cap, "rank %d (pid %d)", o->rank_base + r, (int)pid);
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
            char name[96];
            rank_name(s->o, r, k->pid, name, sizeof name);
            snprintf(s->reason, sizeof s->reason, "%s %s", name, what);
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

/* The first live rank with no heartbeat for its limit fails the job: stall_timeout once it
 * has beaten, setup_timeout before (a rendezvous across hosts may legitimately take long). */
static void check_stalls(struct supervisor *s)
{
    if (s->aborted || s->stop_signal)
        return;
    double now = dt_now();
    for (int r = 0; r < s->o->n; r++) {
        struct child *k = &s->kids[r];
        bool armed = atomic_load(&s->beats[r].armed);
        double limit = armed ? s->o->stall_timeout : s->o->setup_timeout;
        double idle = now - atomic_load(&s->beats[r].at);
        if (k->pid <= 0 || k->done || limit <= 0 || idle < limit)
            continue;
        long step = atomic_load(&s->beats[r].step);
        char last[64] = "while setting up; the rendezvous timeout + dist.timeout";
        if (armed)
            snprintf(last, sizeof last,
                     step >= 0 ? "after step %ld; dist.timeout"
                               : "before its first step; dist.timeout",
                     step);
        s->failed_rank = r;
        char name[96];
        rank_name(s->o, r, k->pid, name, sizeof name);
        snprintf(s->reason, sizeof s->reason, "%s made no progress for %.1f s (%s)", name, idle,
                 last);
        begin_teardown(s, s->reason);
        return;
    }
}

/* Ranks still alive when SIGKILL must follow SIGTERM are named: a silent kill after a stop
 * request would leave the user guessing why it took the grace period. */
static void kill_stragglers(struct supervisor *s)
{
    for (int r = 0; r < s->o->n; r++)
        if (s->kids[r].pid > 0 && !s->kids[r].done) {
            char name[96];
            rank_name(s->o, r, s->kids[r].pid, name, sizeof name);
            dt_log_warn("%s did not stop within the grace period; killing it", name);
        }
    signal_live(s, SIGKILL);
}

static void wait_for_event(struct supervisor *s, const sigset_t *set)
{
    double wait = POLL_SECONDS;
    if (s->kill_deadline > 0) {
        double left = s->kill_deadline - dt_now();
        if (left <= 0) {
            kill_stragglers(s);
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
                      const sigset_t *old_mask, struct beat *beats)
{
    my_beat = &beats[rank];
    /* Die with the parent: a SIGKILLed supervisor must not leave ranks behind. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
    sigprocmask(SIG_SETMASK, old_mask, NULL);
    char tag[32];
    snprintf(tag, sizeof tag, "rank %d", o->rank_base + rank); /* global, as in every message */
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
    int rc = dt_launch_check_no_threads();
    if (rc)
        return rc;
    struct supervisor s = {.o = o, .failed_rank = -1};
    size_t beat_bytes = (size_t)o->n * sizeof *s.beats;
    s.beats = mmap(NULL, beat_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (s.beats == MAP_FAILED)
        return dt_fail(DT_ERUNTIME, "launcher: cannot map the heartbeat page: %s", strerror(errno));
    s.kids = calloc((size_t)o->n, sizeof *s.kids);
    if (!s.kids) {
        munmap(s.beats, beat_bytes);
        return dt_fail(DT_ERUNTIME, "out of memory");
    }

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
    for (int r = 0; r < o->n; r++) {
        atomic_init(&s.beats[r].at, dt_now());
        atomic_init(&s.beats[r].step, -1);
        atomic_init(&s.beats[r].armed, false);
        pid_t pid = fork();
        if (pid == 0)
            run_child(o, r, parent, &old_mask, s.beats);
        if (pid < 0) {
            rc = dt_fail(DT_ERUNTIME, "cannot fork rank %d: %s", o->rank_base + r, strerror(errno));
            begin_teardown(&s, dt_last_error());
            break;
        }
        s.kids[r].pid = pid;
        s.live++;
    }

    while (s.live > 0) {
        reap(&s);
        check_stalls(&s);
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
    munmap(s.beats, beat_bytes);
    return rc;
}

/* The training sweep of `dtrain bench CONFIG`: every combination of instances x threads runs as
 * a child process of this same binary,
 *
 *   /proc/self/exe train CONFIG --instances I --threads T --json --quiet --log-every 1
 *                  --set checkpoint.dir=<temp> ... --set train.max_steps=W+S
 *
 * whose JSON events (one per line on a pipe) carry everything measured: `step` events with
 * "elapsed_s" (training seconds since the run's first step, evaluation excluded) give the time
 * of the S steps after W warm-up steps; `epoch` and `final` events give epoch times, the loss
 * and the test accuracy. Running `train` itself means the figures are those of a real run, and
 * a child process isolates failures: a combination whose run fails (a rank crashes, a config
 * value is refused) is a non-zero exit plus the last line of its stderr, reported in its row
 * while the sweep goes on. SIGINT/SIGTERM reach the child (forwarded when they were sent to
 * this process alone); the sweep stops after it and prints the rows done.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmd/bench/bench.h"
#include "train/config.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/json.h"
#include "util/log.h"

/* The signal that stopped the sweep and the child it must reach: signals are process-wide, so
 * this state is too. */
static volatile sig_atomic_t stop_signal;
static volatile pid_t running_child;

static void on_stop_signal(int sig)
{
    stop_signal = sig;
    if (running_child > 0)
        kill(running_child, sig);
}

/* One combination's result: the median of its runs, or why it failed. */
struct dt_bench_sweep_row {
    struct dt_bench_combo combo;
    bool ok;
    char error[400];
    double unit_s, samples_s, lo, hi, loss, accuracy;
    int runs;
};

/* ---- one run ---- */

#define ERROR_CAP 400 /* a run's last stderr line (300) plus how it ended */

struct run_result {
    bool ok;
    char error[ERROR_CAP];
    double unit_s;    /* seconds per step or per epoch */
    double samples_s; /* samples per second */
    double loss, accuracy;
};

/* What the child's events told so far. */
struct run_events {
    long long last_step;
    double t_warm, t_last; /* elapsed_s at the last warm-up step and at the last step */
    double step_loss;
    int epochs;
    double epoch_seconds, epoch_samples, epoch_loss, accuracy;
    long long batch, instances;
    bool per_instance, final;
};

struct progress {
    bool show, live;
    int index, count, rep, repeats;
    const struct dt_bench_combo *combo;
    long long total; /* steps the run will make (0 = unknown) */
    double last_draw;
};

/* A terminal gets one line redrawn in place; a log file gets a line every 10 s of a run (and
 * the start and end lines of each combination, written by the sweep). */
static void progress_draw(struct progress *p, long long step, bool force)
{
    if (!p->show)
        return;
    double now = dt_now();
    if (force)
        p->last_draw = now;
    if (!p->live ? force || now - p->last_draw < 10 : !force && now - p->last_draw < 0.2)
        return;
    p->last_draw = now;
    char reps[32] = "", of[32] = "";
    if (p->repeats > 1)
        snprintf(reps, sizeof reps, ", run %d/%d", p->rep + 1, p->repeats);
    if (p->total > 0)
        snprintf(of, sizeof of, "/%lld", p->total);
    fprintf(stderr, "%sdtrain: bench [%d/%d] %d x %d%s: step %lld%s%s", p->live ? "\r\033[K" : "",
            p->index + 1, p->count, p->combo->instances, p->combo->threads, reps, step, of,
            p->live ? "" : "\n");
    fflush(stderr);
}

static double num(const struct dt_json *obj, const char *key, double dflt)
{
    const struct dt_json *v = dt_json_get(obj, key);
    if (v && v->type == DT_JSON_NUM)
        return v->num;
    if (v && v->type == DT_JSON_BOOL)
        return v->b;
    return dflt;
}

static void take_event(struct run_events *ev, const char *line, size_t len, long long warmup,
                       struct progress *p)
{
    struct dt_json *o = dt_json_parse(line, len);
    if (!o)
        return; /* not ours (a library printing to stdout): ignore */
    const struct dt_json *e = dt_json_get(o, "event");
    const char *name = e && e->type == DT_JSON_STR ? e->str : "";
    if (!strcmp(name, "step")) {
        long long step = (long long)num(o, "step", 0);
        double t = num(o, "elapsed_s", NAN);
        ev->last_step = step;
        ev->t_last = t;
        ev->step_loss = num(o, "loss", NAN);
        if (step == warmup)
            ev->t_warm = t;
        progress_draw(p, step, false);
    } else if (!strcmp(name, "epoch")) {
        double s = num(o, "seconds", 0);
        ev->epochs++;
        ev->epoch_seconds += s;
        ev->epoch_samples += s * num(o, "samples_per_s", 0);
        ev->epoch_loss = num(o, "train_loss", NAN);
        ev->accuracy = num(o, "test_accuracy", NAN);
    } else if (!strcmp(name, "final")) {
        ev->final = true;
        ev->batch = (long long)num(o, "batch_size", 0);
        ev->instances = (long long)num(o, "instances", 1);
        ev->per_instance = num(o, "batch_per_instance", 0) != 0;
        ev->accuracy = num(o, "test_accuracy", ev->accuracy);
    }
    dt_json_free(o);
}

static void result_from_events(struct run_result *r, const struct run_events *ev,
                               const struct dt_bench_sweep_opts *o)
{
    if (!ev->final && o->epochs > 0) {
        snprintf(r->error, sizeof r->error, "the run ended without its final event");
        return;
    }
    r->loss = isfinite(ev->epoch_loss) ? ev->epoch_loss : ev->step_loss;
    r->accuracy = o->epochs > 0 ? ev->accuracy : NAN;
    if (o->epochs > 0) {
        if (ev->epochs == 0 || !(ev->epoch_seconds > 0)) {
            snprintf(r->error, sizeof r->error, "the run reported no epoch");
            return;
        }
        r->unit_s = ev->epoch_seconds / ev->epochs;
        r->samples_s = ev->epoch_samples / ev->epoch_seconds;
    } else {
        /* Steps after the warm-up; when the run was shorter than the warm-up, all of it. */
        long long from = ev->last_step > o->warmup ? o->warmup : 0;
        double t0 = from ? ev->t_warm : 0;
        long long steps = ev->last_step - from;
        double global = ev->per_instance ? (double)ev->batch * ev->instances : (double)ev->batch;
        if (steps <= 0 || !isfinite(ev->t_last) || !isfinite(t0) || !(ev->t_last > t0)) {
            snprintf(r->error, sizeof r->error,
                     "the run reported no timed steps (a dtrain without step \"elapsed_s\"?)");
            return;
        }
        r->unit_s = (ev->t_last - t0) / (double)steps;
        r->samples_s = global / r->unit_s;
    }
    r->ok = true;
}

struct child {
    pid_t pid;
    int out_fd, err_fd;
};

static int spawn(struct child *c, char **argv)
{
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0)
        return dt_fail(DT_ERUNTIME, "bench: pipe: %m");
    if (pipe2(err, O_CLOEXEC) != 0) {
        close(out[0]), close(out[1]);
        return dt_fail(DT_ERUNTIME, "bench: pipe: %m");
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(out[0]), close(out[1]), close(err[0]), close(err[1]);
        return dt_fail(DT_ERUNTIME, "bench: fork: %m");
    }
    if (pid == 0) {
        dup2(out[1], 1);
        dup2(err[1], 2);
        execv("/proc/self/exe", argv);
        dprintf(2, "dtrain: bench: cannot run /proc/self/exe: %s\n", strerror(errno));
        _exit(127);
    }
    close(out[1]);
    close(err[1]);
    c->pid = pid;
    c->out_fd = out[0];
    c->err_fd = err[0];
    return 0;
}

/* Keeps the last non-empty line of the child's stderr (its one-line error). */
static void take_stderr(char *last, size_t cap, char *pending, size_t *plen, const char *buf,
                        size_t n, bool eof)
{
    for (size_t i = 0; i <= n; i++) {
        bool end = i == n ? eof : buf[i] == '\n';
        if (i < n && buf[i] != '\n' && *plen + 1 < cap)
            pending[(*plen)++] = buf[i];
        if (end && *plen > 0) {
            pending[*plen] = 0;
            const char *msg = pending;
            if (!strncmp(msg, "dtrain: ", 8))
                msg += 8;
            if (!strncmp(msg, "error: ", 7))
                msg += 7;
            snprintf(last, cap, "%s", msg);
            *plen = 0;
        }
        if (i == n)
            break;
    }
}

static int describe_exit(char *buf, size_t cap, int status)
{
    if (WIFSIGNALED(status))
        return snprintf(buf, cap, "killed by signal %d (%s)", WTERMSIG(status),
                        strsignal(WTERMSIG(status)));
    return snprintf(buf, cap, "exit code %d", WEXITSTATUS(status));
}

/* The batch semantics come from the config (loaded once by the sweep); a run's `final` event
 * confirms them, but a steps-mode run is stopped before it gets there. */
static void run_child(struct run_result *r, char **argv, const struct dt_bench_sweep_opts *o,
                      struct progress *p, const struct run_events *init)
{
    struct child c = {-1, -1, -1};
    memset(r, 0, sizeof *r);
    if (spawn(&c, argv)) {
        snprintf(r->error, sizeof r->error, "%s", dt_last_error());
        return;
    }
    running_child = c.pid;
    if (stop_signal) /* arrived between the check and the fork */
        kill(c.pid, stop_signal);
    struct run_events ev = *init;
    static char line[1 << 16];
    size_t llen = 0, plen = 0;
    char last_err[300] = "", pending[300];
    double start = dt_now();
    bool out_open = true, err_open = true, killed = false, hard_killed = false, measured = false;
    while (out_open || err_open) {
        struct pollfd fds[2] = {{out_open ? c.out_fd : -1, POLLIN, 0},
                                {err_open ? c.err_fd : -1, POLLIN, 0}};
        int n = poll(fds, 2, 250);
        if (n < 0 && errno != EINTR)
            break;
        /* Past --timeout: SIGTERM first, so the run's launcher can tear its ranks and its
         * shared memory down; SIGKILL if that has not ended it 5 s later. */
        double late = o->timeout > 0 ? dt_now() - start - o->timeout : -1;
        if (late > 0 && !killed) {
            kill(c.pid, SIGTERM);
            killed = true;
        } else if (late > 5 && !hard_killed) {
            kill(c.pid, SIGKILL);
            hard_killed = true;
        }
        char buf[8192];
        if (out_open && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t got = read(c.out_fd, buf, sizeof buf);
            if (got <= 0)
                out_open = false;
            for (ssize_t i = 0; i < got; i++) {
                if (buf[i] == '\n') {
                    take_event(&ev, line, llen, o->epochs > 0 ? 0 : o->warmup, p);
                    llen = 0;
                    /* Steps mode has all it needs at the last timed step: stop the run there
                     * rather than wait for its test-set evaluation and checkpoint. */
                    if (o->epochs == 0 && !measured && ev.last_step >= o->warmup + o->steps) {
                        measured = true;
                        kill(c.pid, SIGTERM);
                    }
                } else if (llen < sizeof line) {
                    line[llen++] = buf[i];
                }
            }
        }
        if (err_open && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t got = read(c.err_fd, buf, sizeof buf);
            if (got <= 0)
                err_open = false;
            take_stderr(last_err, sizeof last_err, pending, &plen, buf, got > 0 ? (size_t)got : 0,
                        got <= 0);
        }
    }
    close(c.out_fd);
    close(c.err_fd);
    int status = 0;
    while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR)
        ;
    running_child = 0;
    if (measured) {
        result_from_events(r, &ev, o); /* however the stopped run ended */
    } else if (killed) {
        snprintf(r->error, sizeof r->error, "timed out after %g s (--timeout)", o->timeout);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char how[80];
        describe_exit(how, sizeof how, status);
        if (last_err[0])
            snprintf(r->error, sizeof r->error, "%s (%s)", last_err, how);
        else
            snprintf(r->error, sizeof r->error, "%s", how);
    } else {
        result_from_events(r, &ev, o);
    }
}

/* ---- argv of a run ---- */

struct argv_buf {
    char *v[64 + 2 * 256];
    char own[8][96];
    int n;
};

static void arg(struct argv_buf *a, char *s)
{
    if (a->n < (int)(sizeof a->v / sizeof a->v[0]) - 1)
        a->v[a->n++] = s;
    a->v[a->n] = NULL;
}

static void build_argv(struct argv_buf *a, const struct dt_bench_sweep_opts *o,
                       const struct dt_bench_combo *c, const char *ckpt_dir)
{
    a->n = 0;
    snprintf(a->own[0], sizeof a->own[0], "%d", c->instances);
    snprintf(a->own[1], sizeof a->own[1], "%d", c->threads);
    snprintf(a->own[2], sizeof a->own[2], "checkpoint.dir=%s", ckpt_dir);
    if (o->epochs > 0) {
        snprintf(a->own[3], sizeof a->own[3], "train.epochs=%d", o->epochs);
        snprintf(a->own[4], sizeof a->own[4], "train.max_steps=0");
    } else {
        /* One epoch at most per run would cut a long --steps short: let max_steps stop it. */
        snprintf(a->own[3], sizeof a->own[3], "train.epochs=100000");
        snprintf(a->own[4], sizeof a->own[4], "train.max_steps=%ld", o->warmup + o->steps);
    }
    arg(a, "dtrain");
    arg(a, "train");
    arg(a, (char *)o->config);
    arg(a, "--instances"), arg(a, a->own[0]);
    arg(a, "--threads"), arg(a, a->own[1]);
    arg(a, "--json"), arg(a, "--quiet"), arg(a, "--log-every"), arg(a, "1");
    arg(a, "--overwrite"); /* every run of the sweep writes to the same temp directory */
    for (int i = 0; i < o->nsets && i < 256; i++)
        arg(a, "--set"), arg(a, o->sets[i]);
    /* After the user's --set options: these must win. */
    arg(a, "--set"), arg(a, a->own[2]);
    arg(a, "--set"), arg(a, "checkpoint.best=false");
    arg(a, "--set"), arg(a, "checkpoint.every=0");
    arg(a, "--set"), arg(a, a->own[3]);
    arg(a, "--set"), arg(a, a->own[4]);
}

/* ---- the table ---- */

enum {
    COL_INSTANCES,
    COL_THREADS,
    COL_UNIT,
    COL_SAMPLES,
    COL_SPREAD,
    COL_SPEEDUP,
    COL_EFFICIENCY,
    COL_LOSS,
    COL_ACCURACY,
    COL_MIN,
    COL_MAX,
    COL_RUNS,
    NCOLS
};

static const struct dt_bench_col step_cols[NCOLS] = {
    {"instances", "instances", DT_BENCH_INT, NULL, false},
    {"threads", "threads", DT_BENCH_INT, NULL, false},
    {"s/step", "s_per_step", DT_BENCH_NUM, "%.4f", false},
    {"samples/s", "samples_per_s", DT_BENCH_NUM, "%.1f", false},
    {"+-%", "spread_pct", DT_BENCH_NUM, "%.1f", false},
    {"speedup", "speedup", DT_BENCH_NUM, "%.2f", false},
    {"efficiency", "efficiency", DT_BENCH_NUM, "%.2f", false},
    {"loss", "loss", DT_BENCH_NUM, "%.4f", false},
    {"accuracy", "test_accuracy", DT_BENCH_NUM, "%.4f", false},
    {"min samples/s", "samples_per_s_min", DT_BENCH_NUM, "%.1f", true},
    {"max samples/s", "samples_per_s_max", DT_BENCH_NUM, "%.1f", true},
    {"runs", "runs", DT_BENCH_INT, NULL, true},
};

static void measure_combo(struct dt_bench_sweep_row *row, const struct dt_bench_sweep_opts *o,
                          struct progress *p, const char *ckpt_dir, const struct dt_config *cfg)
{
    const struct run_events init = {.t_warm = NAN,
                                    .t_last = NAN,
                                    .epoch_loss = NAN,
                                    .accuracy = NAN,
                                    .batch = cfg->train.batch_size,
                                    .instances = row->combo.instances,
                                    .per_instance = cfg->train.batch_per_instance};
    double unit[64], samples[64], loss = NAN, acc = NAN;
    int done = 0, repeat = o->repeat < 64 ? o->repeat : 64;
    struct argv_buf a;
    build_argv(&a, o, &row->combo, ckpt_dir);
    if (o->out.verbose) {
        char cmd[2048] = "";
        for (int i = 0; i < a.n; i++) {
            size_t len = strlen(cmd);
            snprintf(cmd + len, sizeof cmd - len, "%s%s", i ? " " : "", a.v[i]);
        }
        dt_log_debug("bench: each run of %d x %d: %s", row->combo.instances, row->combo.threads,
                     cmd);
    }
    for (int r = 0; r < repeat && !stop_signal; r++) {
        p->rep = r;
        progress_draw(p, 0, true);
        struct run_result res;
        run_child(&res, a.v, o, p, &init);
        if (stop_signal)
            break;
        if (!res.ok) {
            snprintf(row->error, sizeof row->error, "%s", res.error);
            return;
        }
        unit[done] = res.unit_s;
        samples[done] = res.samples_s;
        loss = res.loss, acc = res.accuracy;
        done++;
    }
    if (stop_signal || done == 0)
        return;
    row->ok = true;
    row->runs = done;
    row->unit_s = dt_bench_median(unit, done);
    row->samples_s = dt_bench_median(samples, done);
    row->lo = row->hi = samples[0];
    for (int i = 1; i < done; i++)
        row->lo = fmin(row->lo, samples[i]), row->hi = fmax(row->hi, samples[i]);
    row->loss = loss;
    row->accuracy = acc;
}

static const struct dt_bench_sweep_row *find_row(const struct dt_bench_sweep_row *rows, int n,
                                                 int instances, int threads)
{
    for (int i = 0; i < n; i++)
        if (rows[i].ok && rows[i].combo.instances == instances && rows[i].combo.threads == threads)
            return &rows[i];
    return NULL;
}

static int fill_table(struct dt_bench_table *t, const struct dt_bench_sweep_row *rows, int n,
                      const struct dt_bench_sweep_opts *o)
{
    /* Speedup over 1 x C (1 x 1 for the thread sweep), else over the first row that ran. */
    const struct dt_bench_sweep_row *base = find_row(rows, n, 1, o->threads_only ? 1 : o->cores);
    for (int i = 0; i < n && !base; i++)
        if (rows[i].ok)
            base = &rows[i];
    /* Efficiency: samples/s per core against 1 x 1's, or against the baseline's per core. */
    const struct dt_bench_sweep_row *single = find_row(rows, n, 1, 1);
    const struct dt_bench_sweep_row *eff = single ? single : base;
    for (int i = 0; i < n; i++) {
        const struct dt_bench_sweep_row *r = &rows[i];
        struct dt_bench_cell c[NCOLS];
        memset(c, 0, sizeof c);
        c[COL_INSTANCES].num = r->combo.instances;
        c[COL_THREADS].num = r->combo.threads;
        if (r->ok) {
            double cores = (double)r->combo.instances * r->combo.threads;
            double eff_cores = eff ? (double)eff->combo.instances * eff->combo.threads : 1;
            c[COL_UNIT].num = r->unit_s;
            c[COL_SAMPLES].num = r->samples_s;
            c[COL_SPREAD].num = 100 * (r->hi - r->lo) / r->samples_s;
            c[COL_SPEEDUP].num = base ? r->samples_s / base->samples_s : NAN;
            c[COL_EFFICIENCY].num =
                eff ? (r->samples_s / cores) / (eff->samples_s / eff_cores) : NAN;
            c[COL_LOSS].num = r->loss;
            c[COL_ACCURACY].num = r->accuracy;
            c[COL_ACCURACY].missing = !isfinite(r->accuracy);
            c[COL_MIN].num = r->lo;
            c[COL_MAX].num = r->hi;
            c[COL_RUNS].num = r->runs;
        }
        int rc = dt_bench_table_add(t, c, r->ok ? NULL : r->error);
        if (rc)
            return rc;
    }
    return 0;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static void report_progress_row(const struct progress *p, const struct dt_bench_sweep_row *row,
                                const struct dt_bench_sweep_opts *o)
{
    if (!p->show)
        return;
    if (p->live)
        fputs("\r\033[K", stderr);
    if (row->ok)
        fprintf(stderr, "dtrain: bench [%d/%d] %d x %d: %.4f s/%s, %.1f samples/s\n", p->index + 1,
                p->count, row->combo.instances, row->combo.threads, row->unit_s,
                o->epochs > 0 ? "epoch" : "step", row->samples_s);
    else
        fprintf(stderr, "dtrain: bench [%d/%d] %d x %d: FAILED: %s\n", p->index + 1, p->count,
                row->combo.instances, row->combo.threads, row->error);
    fflush(stderr);
}

/* The measuring half of the sweep, no table: rows[0..ncombos) in order, *done_out of them run.
 * -DT_EINTR / -DT_ETERM when a signal stopped it (the rows done are kept), a config error as
 * dt_config_load reports it. */
static int sweep_measure(const struct dt_bench_sweep_opts *o, struct dt_bench_sweep_row *rows,
                         int *done_out)
{
    *done_out = 0;
    /* A config or --set that every run would refuse is a usage error, not N failed rows. */
    struct dt_config cfg;
    memset(&cfg, 0, sizeof cfg);
    int crc = dt_config_load(&cfg, o->config, (const char *const *)o->sets, o->nsets);
    if (crc) {
        dt_config_free(&cfg);
        return crc;
    }
    char ckpt_dir[] = "/tmp/dtrain-bench-XXXXXX";
    if (!mkdtemp(ckpt_dir)) {
        dt_config_free(&cfg);
        return dt_fail(DT_ERUNTIME, "bench: cannot create a temporary directory: %m");
    }
    stop_signal = 0;
    struct sigaction sa = {.sa_handler = on_stop_signal}, old_int, old_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);

    struct progress p = {
        .show = !o->out.quiet, .live = dt_log_is_tty(), .count = o->ncombos, .repeats = o->repeat};
    int done = 0;
    for (int i = 0; i < o->ncombos && !stop_signal; i++) {
        rows[i].combo = o->combos[i];
        p.index = i;
        p.combo = &o->combos[i];
        p.total = o->epochs > 0 ? 0 : o->warmup + o->steps;
        if (p.show && !p.live)
            fprintf(stderr, "dtrain: bench [%d/%d] %d x %d: running\n", i + 1, o->ncombos,
                    o->combos[i].instances, o->combos[i].threads);
        measure_combo(&rows[i], o, &p, ckpt_dir, &cfg);
        if (stop_signal)
            break;
        report_progress_row(&p, &rows[i], o);
        done++;
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    nftw(ckpt_dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
    dt_config_free(&cfg);
    *done_out = done;
    if (stop_signal)
        return stop_signal == SIGINT ? -DT_EINTR : -DT_ETERM;
    return 0;
}

int dt_bench_sweep(const struct dt_bench_sweep_opts *o, const struct dt_bench_machine *m)
{
    struct dt_bench_sweep_row *rows = calloc((size_t)o->ncombos, sizeof *rows);
    if (!rows)
        return dt_fail(DT_ERUNTIME, "out of memory");
    int done = 0;
    int stopped = sweep_measure(o, rows, &done);
    if (stopped && stopped != -DT_EINTR && stopped != -DT_ETERM) {
        free(rows);
        return stopped;
    }
    char what[600];
    if (o->epochs > 0)
        snprintf(what, sizeof what, "%s, %d epoch%s per run, %d run%s each", o->config, o->epochs,
                 o->epochs == 1 ? "" : "s", o->repeat, o->repeat == 1 ? "" : "s");
    else
        snprintf(what, sizeof what, "%s, %ld steps after %ld warm-up per run, %d run%s each",
                 o->config, o->steps, o->warmup, o->repeat, o->repeat == 1 ? "" : "s");
    struct dt_bench_table t;
    dt_bench_table_init(&t, "bench_row", step_cols, NCOLS);
    t.label_cols = 2;
    t.value_col = COL_SAMPLES;
    t.lo_col = COL_MIN;
    t.hi_col = COL_MAX;
    t.value_name = "samples/s (higher is better)";
    struct dt_bench_col cols[NCOLS];
    if (o->epochs > 0) {
        memcpy(cols, step_cols, sizeof cols);
        cols[COL_UNIT].head = "s/epoch";
        cols[COL_UNIT].key = "s_per_epoch";
        cols[COL_UNIT].fmt = "%.2f";
        t.cols = cols;
    }
    int rc = fill_table(&t, rows, done, o);
    int succeeded = 0;
    for (int i = 0; i < done; i++)
        succeeded += rows[i].ok;
    /* Said above the table, so a person sees it first and a CI job fails on it. */
    if (!rc && done > 0 && succeeded == 0)
        dt_log_error("bench: every combination failed (%d of %d): see the error column", done,
                     done);
    if (!rc) {
        char title[300];
        snprintf(title, sizeof title, "dtrain bench: samples/s per instances x threads");
        rc = dt_bench_emit(&t, m, &o->out, what, title);
    }
    dt_bench_table_free(&t);
    free(rows);
    if (!rc && stopped) {
        dt_log_info("bench: stopped by %s after %d of %d combinations",
                    stopped == -DT_EINTR ? "SIGINT" : "SIGTERM", done, o->ncombos);
        rc = stopped;
    } else if (!rc && done > 0 && succeeded == 0) {
        rc = dt_fail(DT_ERUNTIME, "bench: all %d combinations failed", done);
    }
    return rc;
}

/* The shape probe (see probe.h): per shape, the run's own ranks for a few timed steps on the
 * parent's loaded data. Uses loop.c's rank set-up and step (train/loop_internal.h), so what
 * is timed is what the run will do. */
#include "train/probe.h"
#include "train/loop_internal.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "train/ranks.h"
#include "train/setup.h"
#include "dist/launcher.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/log.h"

/* What the ranks of one shape leave for the parent: in a page mapped MAP_SHARED before the
 * fork, written by rank 0 (the figures) or by the first rank that fails (its error). */
struct probe_result {
    atomic_int failed; /* a rank has claimed `error` */
    char error[300];
    bool measured;
    int steps;
    double seconds, samples;
};

struct probe_job {
    struct run run;
    const struct dt_probe_opts *o;
    struct probe_result *result;
    long long steps_per_epoch, total_steps;
};

/* Timed steps for about o->seconds at `step_s` a step (the last warm-up step's time). */
static int timed_steps(const struct dt_probe_opts *o, double step_s)
{
    double want = step_s > 0 ? ceil(o->seconds / step_s) : o->min_steps;
    return want < o->min_steps ? o->min_steps : want > o->max_steps ? o->max_steps : (int)want;
}

/* One training step at the probe's step counter: the run's epochs laid end to end, at the
 * learning rate the run would have there (the last one past the run's end), so a short run's
 * probe does not train past a schedule's end into rates it would never use. */
static int probe_step(struct rank_state *st, const struct probe_job *pj, long long step)
{
    long long spe = pj->steps_per_epoch, at = step < pj->total_steps ? step : pj->total_steps - 1;
    float lr = dt_run_lr(&pj->run.schedule, at, spe, pj->total_steps);
    st->step = step;
    int rc = train_step(st, &pj->run, (uint64_t)(step / spe), (size_t)(step % spe), lr, false);
    dt_launch_beat(step);
    return rc;
}

static void claim_error(struct probe_result *res, int rank)
{
    if (atomic_exchange(&res->failed, 1) == 0)
        snprintf(res->error, sizeof res->error, "rank %d: %s", rank, dt_last_error());
}

static int probe_rank(struct dt_comm *comm, void *arg)
{
    const struct probe_job *pj = arg;
    struct rank_state st = {.comm = comm};
    int rc = rank_setup(&st, &pj->run);
    if (rc == 0 && pj->run.shared)
        rc = share_weights(&st); /* its barrier orders every rank's set-up writes */
    dt_launch_alive();
    long long step = 0;
    double last = 0;
    for (int i = 0; rc == 0 && i < pj->o->warmup; i++) {
        double t0 = dt_now();
        rc = probe_step(&st, pj, step++);
        last = dt_now() - t0;
    }
    /* rank 0's count for every rank: the ranks step together (one all-reduce a step) */
    int steps = comm->rank == 0 ? timed_steps(pj->o, last) : 0;
    if (rc == 0)
        rc = comm->broadcast(comm, &steps, sizeof steps, 0);
    double samples = 0, t0 = dt_now();
    for (int i = 0; rc == 0 && i < steps; i++) {
        rc = probe_step(&st, pj, step++);
        samples += st.job[T_COUNT]; /* the whole job's samples of the step */
    }
    double seconds = dt_now() - t0;
    if (rc == 0 && comm->rank == 0) {
        pj->result->steps = steps;
        pj->result->seconds = seconds;
        pj->result->samples = samples;
        pj->result->measured = true;
    } else if (rc && rc != -DT_EINTR && rc != -DT_ETERM) {
        claim_error(pj->result, comm->rank);
    }
    rank_teardown(&st);
    /* reported: the row holds the error, so the launcher does not print it too */
    return rc < 0 ? -rc : rc;
}

/* The run's config at this shape. data.mean/std = "auto" are left unset (0 and 1): the batcher
 * maps bytes through a table, so the values do not change the speed, and the run computes
 * them once, after the probe. */
static struct dt_config shape_config(const struct dt_config *cfg, const struct dt_probe_row *row)
{
    struct dt_config c = *cfg; /* shallow: read only, never freed */
    c.dist.instances = row->instances;
    c.dist.threads = row->threads;
    if (c.data.nmean == DT_CONFIG_AUTO)
        c.data.nmean = 0;
    if (c.data.nstd == DT_CONFIG_AUTO)
        c.data.nstd = 0;
    return c;
}

/* Everything the run does before its fork, for this shape: plan, memory check, steps per epoch
 * and schedule, shared weights. Fills pj; the caller unmaps pj->run.shared. */
static int prepare_shape(const struct dt_config *c, const struct dt_job_opts *job,
                         const struct dt_data *data, struct dt_job_plan *plan, struct probe_job *pj)
{
    struct dt_run_memory mem;
    struct dt_job_steps steps;
    int rc = dt_job_plan_make(plan, c, job);
    if (rc == 0)
        rc = dt_run_memory(c, plan, &data->train, &mem);
    if (rc == 0)
        rc = dt_run_check_memory(c, &mem);
    if (rc == 0)
        rc = dt_job_plan_steps(plan, c, data->train.n, &steps);
    if (rc == 0)
        rc = dt_run_schedule(c, steps.steps_per_epoch, &pj->run.schedule);
    if (rc)
        return rc;
    pj->steps_per_epoch = steps.steps_per_epoch;
    pj->total_steps = steps.steps_per_epoch * c->train.epochs;
    if (c->train.max_steps > 0 && c->train.max_steps < pj->total_steps)
        pj->total_steps = c->train.max_steps;
    if (!dt_job_plan_shares_memory(plan))
        return 0;
    return shared_map(&pj->run, &mem);
}

/* One shape into its row; -DT_EINTR / -DT_ETERM when a signal stopped it, else 0. */
static int probe_shape(const struct dt_config *cfg, const struct dt_job_opts *job,
                       const struct dt_data *data, const struct dt_probe_opts *o,
                       struct probe_result *res, struct dt_probe_row *row)
{
    struct dt_config c = shape_config(cfg, row);
    struct dt_job_plan plan;
    memset(res, 0, sizeof *res);
    struct probe_job pj = {
        .run = {.cfg = &c, .data = data, .clock_base = dt_now()}, .o = o, .result = res};
    int rc = prepare_shape(&c, job, data, &plan, &pj);
    if (rc == 0)
        rc = dt_run_ranks_forked(&c, &plan, job, probe_rank, &pj);
    shared_unmap(&pj.run);
    if (rc == -DT_EINTR || rc == -DT_ETERM)
        return rc;
    if (rc && res->error[0]) /* the rank's own words, not the launcher's "exited with code" */
        snprintf(row->error, sizeof row->error, "%s", res->error);
    else if (rc)
        snprintf(row->error, sizeof row->error, "%s", dt_last_error());
    else if (!res->measured || !(res->seconds > 0) || res->steps < 1)
        snprintf(row->error, sizeof row->error, "the ranks ended without a timed step");
    else {
        row->ok = true;
        row->steps = res->steps;
        row->step_s = res->seconds / res->steps;
        row->samples_s = res->samples / res->seconds;
    }
    dt_clear_error();
    return 0;
}

int dt_probe_shapes(const struct dt_config *cfg, const struct dt_job_opts *job,
                    const struct dt_data *data, const struct dt_probe_opts *o,
                    struct dt_probe_row *rows, int n, int *done)
{
    *done = 0;
    struct probe_result *res =
        mmap(NULL, sizeof *res, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (res == MAP_FAILED)
        return dt_fail(DT_ERUNTIME, "auto shape: cannot map the probe's result page: %s",
                       strerror(errno));
    /* The ranks' lines (an oversubscribed shape's warning, say) would read as the run's. */
    enum dt_log_level level = dt_log_get_level();
    if (level < DT_LOG_VERBOSE)
        dt_log_set_level(DT_LOG_QUIET);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        struct dt_probe_row *row = &rows[i];
        row->ok = false;
        row->error[0] = '\0';
        double t0 = dt_now();
        if ((rc = probe_shape(cfg, job, data, o, res, row)))
            break;
        (*done)++;
        /* --verbose: what the shape cost beyond its timed steps (fork, set-up, warm-up) */
        if (row->ok)
            dt_log_debug("auto shape: %d x %d: %d timed steps in %.3f s, %.3f s in all",
                         row->instances, row->threads, row->steps, row->steps * row->step_s,
                         dt_now() - t0);
    }
    dt_log_set_level(level);
    munmap(res, sizeof *res);
    return rc;
}

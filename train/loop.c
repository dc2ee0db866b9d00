/* The training loop of `dtrain train`, as the design brief's "data path of one training step"
 * lays it out (docs/design.md):
 *
 *   parent: load the datasets once (uint8), then run rank_main in-process (one instance) or
 *           fork the ranks through dist/launcher (they share the dataset pages copy-on-write).
 *   rank:   pin + threads, build the model from the seed (identical everywhere, verified by a
 *           checksum broadcast), then per step: sampler -> batch -> forward -> backward with
 *           grad_scale = 1/(global samples in the step) -> all-reduce (sum) of the gradient
 *           arena -> optimizer. Every rank holds identical weights after every step.
 *   epoch end: every rank evaluates its shard of the test set and the counts are summed; rank 0
 *           logs, emits --json events and writes checkpoints atomically.
 *
 * This file is glue: it is the one place that knows about nn/, data/ and dist/ together. What
 * the run says (log lines, --json events) is in loop_report.c, the run directory's own files
 * and the trace merge in loop_rundir.c, --max-restarts' supervision in loop_restart.c; the
 * structs they share in loop_internal.h.
 */
#include "train/loop.h"
#include "train/loop_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "train/best.h"
#include "train/ckpt_writer.h"
#include "train/early_stop.h"
#include "train/evaluate.h"
#include "train/history.h"
#include "train/init_from.h"
#include "train/norm_stats.h"
#include "train/param_groups.h"
#include "train/progress.h"
#include "train/rundir.h"
#include "train/setup.h"
#include "train/timing.h"
#include "train/trace.h"
#include "data/batch.h"
#include "data/sampler.h"
#include "dist/comm.h"
#include "dist/launcher.h"
#include "nn/layers.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "nn/schedule.h"
#include "nn/weight_copy.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/log.h"

static const char *const usr1_action_names[] = {
    [DT_USR1_STOP] = "stop",
    [DT_USR1_CONTINUE] = "continue",
};
_Static_assert(sizeof usr1_action_names / sizeof usr1_action_names[0] == DT_USR1_ACTION_COUNT,
               "one name per SIGUSR1 action");
const struct dt_names dt_usr1_action_names = DT_NAMES(usr1_action_names);

/* Set by SIGINT, SIGTERM or SIGUSR1 in this process. Process-wide by nature: signals are. A
 * rank never acts on its own flag: it rides with the step's gradients (struct step_tail), so
 * every rank stops, or checkpoints, after the same step. */
volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
    if (sig != SIGUSR1 || !stop_signal) /* USR1 never masks a pending INT or TERM */
        stop_signal = sig;
}

/* The end of a span of kind k that began at t0, named `name` in the trace (NULL: the kind's
 * name): its seconds to the timing, its event to the trace. Returns the time read, the next
 * span's start: one clock read per span. */
static double span_end_as(struct rank_state *st, enum dt_time_kind k, const char *name, double t0)
{
    double t1 = dt_now();
    dt_timing_add(&st->timing, k, t1 - t0);
    dt_trace_span(st->trace, DT_TRACE_MAIN, dt_time_kind_category(k),
                  name ? name : dt_time_kind_trace_name(k), t0, t1, st->step);
    return t1;
}

static double span_end(struct rank_state *st, enum dt_time_kind k, double t0)
{
    return span_end_as(st, k, NULL, t0);
}

/* A cheap order-sensitive fingerprint of the parameters, to prove every rank starts from the
 * same weights. */
static double params_checksum(const struct dt_model *m)
{
    double sum = 0;
    for (size_t i = 0; i < m->nparams; i++)
        sum += (double)m->params[i] * (double)((i % 1021) + 1);
    return sum;
}

static int verify_identical_weights(struct dt_comm *comm, const struct dt_model *m)
{
    if (comm->size == 1)
        return 0;
    double mine = params_checksum(m), root = mine;
    int rc = comm->broadcast(comm, &root, sizeof root, 0);
    if (rc)
        return rc;
    float mismatch = mine != root ? 1.0f : 0.0f;
    if ((rc = comm->allreduce_sum(comm, &mismatch, 1)))
        return rc;
    if (mismatch != 0.0f)
        return dt_fail(DT_ERUNTIME,
                       "initial weights differ between ranks (%g ranks disagree "
                       "with rank 0): all ranks must run the same dtrain build",
                       (double)mismatch);
    return 0;
}

static int comm_sum(void *comm, float *data, size_t n)
{
    struct dt_comm *c = comm;
    return c->allreduce_sum(c, data, n);
}

int rank_setup(struct rank_state *st, const struct run *run)
{
    const struct dt_config *cfg = run->cfg;
    const struct dt_dataset *train = &run->data->train;
    struct dt_comm *comm = st->comm;

    struct dt_sampler_opts so = {
        .n = train->n,
        .batch = (size_t)cfg->train.batch_size,
        .rank = comm->rank,
        .size = comm->size,
        .seed = (uint64_t)cfg->train.seed,
        .drop_last = cfg->train.drop_last,
        .per_instance = cfg->train.batch_per_instance,
    };
    int rc = dt_sampler_init(&st->sampler, &so);
    if (rc)
        return rc;
    int max_count = dt_sampler_max_count(&st->sampler);
    int eval_batch = cfg->train.eval_batch_size > 0 ? cfg->train.eval_batch_size : max_count;
    if (eval_batch < 1)
        eval_batch = 1;
    int model_batch = max_count > eval_batch ? max_count : eval_batch;

    struct dt_batch_opts bo = dt_run_batch_opts(cfg);
    if ((rc = dt_batcher_init(&st->batcher, train, &bo)))
        return dt_fail_context(rc, "%s: data", cfg->path);

    /* Shared weights: the parameters are built straight into the job's shared copy, with the
     * optimizer state after them (zeroed by mmap); never a private copy. */
    struct dt_shape in = {train->c, train->h, train->w};
    void *copies = run->shared ? run->shared + run->shared_copies_at : NULL;
    size_t copy_bytes = (run->shared_floats - run->shared_copies_at) * sizeof(float);
    if ((rc = dt_run_build_model_in(cfg, in, model_batch, train->classes, run->shared,
                                    run->shared_copies_at, copies, copy_bytes, &st->model)))
        return rc;
    if (comm->rank == 0)
        dt_run_log_precision(st->model);
    st->model->profile = cfg->log.profile;
    /* weight gradients in a fixed tree of batch slices: the same bits for 1, 2, 4 or 8
     * instances (nn/grad_tree.h) */
    if (cfg->dist.split_invariant &&
        (rc = dt_model_set_grad_slice(st->model, dt_grad_slice(cfg->train.batch_size))))
        return rc;
    if (comm->size > 1 && cfg->dist.batchnorm == DT_BN_STATS_SYNC) {
        st->model->allreduce.sum = comm_sum;
        st->model->allreduce.ctx = comm;
        st->model->allreduce.rank = comm->rank;
        st->model->allreduce.size = comm->size;
    }

    float *state = run->shared ? run->shared + st->model->nparams : NULL;
    if ((rc = dt_run_make_optimizer(&st->optim, cfg, st->model->nparams, state)) ||
        (rc = dt_run_param_groups(cfg, st->model, st->optim)))
        return rc;
    if (run->shared &&
        st->model->nparams + dt_optim_state_floats(st->optim) > run->shared_copies_at)
        return dt_fail(DT_ERUNTIME, "shared weights: %zu floats needed, %zu mapped",
                       st->model->nparams + dt_optim_state_floats(st->optim),
                       run->shared_copies_at);
    size_t sample = (size_t)train->c * train->h * train->w;
    st->x = dt_alloc((size_t)max_count * sample, sizeof(float));
    st->y = dt_alloc((size_t)max_count, 1);
    st->idx = dt_alloc((size_t)max_count, sizeof(uint32_t));
    st->ids = dt_alloc((size_t)max_count, sizeof(uint64_t));
    if (!st->x || !st->y || !st->idx || !st->ids)
        return -DT_ERUNTIME;
    if ((rc = dt_eval_scratch_init(&st->eval, eval_batch, sample)))
        return rc;
    if ((rc = dt_eval_result_init(&st->val_result, train->classes)))
        return rc;
    return dt_eval_result_init(&st->result, train->classes);
}

void rank_teardown(struct rank_state *st)
{
    dt_eval_result_free(&st->result);
    dt_eval_result_free(&st->val_result);
    dt_eval_scratch_free(&st->eval);
    dt_free(st->x);
    dt_free(st->y);
    dt_free(st->idx);
    dt_free(st->ids);
    dt_optim_free(st->optim);
    dt_model_free(st->model);
    dt_sampler_free(&st->sampler);
}

/* The step's all-reduce of the n gradients and the tail after them: one fp32 sum; or, with
 * dist.grad_dtype = "bf16", the gradients in bf16 and the tail (the loss, the counts and the
 * stop flags, which must not be rounded) in a second, fp32 one of T_FLOATS values. */
static int sum_step(struct dt_comm *comm, float *grads, size_t n, enum dt_grad_dtype dtype)
{
    if (dtype == DT_GRAD_FP32)
        return comm->allreduce_sum(comm, grads, n + T_FLOATS);
    int rc = comm->allreduce_sum_bf16(comm, grads, n);
    return rc ? rc : comm->allreduce_sum(comm, grads + n, T_FLOATS);
}

/* Whether the ranks share the model's bf16 weight copies (a bf16 model built into the shared
 * storage): each makes its slice's, and a forward never makes them. */
static bool copies_shared(const struct dt_model *m)
{
    return m->weight_copy && m->copies_external;
}

/* One optimisation step on this rank's share of (epoch, step). */
/* due: rank 0's clock says a timed checkpoint is due (checkpoint.every_minutes). */
int train_step(struct rank_state *st, const struct run *run, uint64_t epoch, size_t step, float lr,
               bool due)
{
    const struct dt_dataset *train = &run->data->train;
    int count, global_count;
    double t_start = dt_now(), t = t_start;
    int rc = dt_sampler_batch(&st->sampler, epoch, step, st->idx, &count, &global_count);
    if (rc)
        return rc;
    dt_batch_assemble(&st->batcher, train, st->idx, count, epoch, 1, st->x, st->y);
    for (int i = 0; i < count; i++)
        st->ids[i] = st->idx[i];
    t = span_end(st, DT_TIME_DATA, t);
    struct dt_forward_ctx ctx = {
        .training = true,
        .seed = (uint64_t)run->cfg->train.seed,
        .epoch = epoch,
        .sample_ids = st->ids,
    };
    if ((rc = dt_model_forward(st->model, st->x, count, &ctx)))
        return rc;
    double loss_sum = 0;
    int correct = 0;
    dt_model_loss(st->model, st->y, count, &loss_sum, &correct);
    t = span_end(st, DT_TIME_FORWARD, t);
    float scale = global_count > 0 ? 1.0f / (float)global_count : 0.0f;
    if ((rc = dt_model_backward(st->model, st->y, count, scale)))
        return rc;
    t = span_end(st, DT_TIME_BACKWARD, t);
    size_t n = st->model->nparams;
    float *tail = st->model->grads + n;
    int sig = stop_signal;
    tail[T_LOSS] = (float)loss_sum;
    tail[T_CORRECT] = (float)correct;
    tail[T_COUNT] = (float)count;
    tail[T_INT] = sig == SIGINT;
    tail[T_TERM] = sig == SIGTERM;
    tail[T_USR1] = sig == SIGUSR1;
    tail[T_DUE] = due;
    if ((rc = sum_step(st->comm, st->model->grads, n, run->cfg->dist.grad_dtype)))
        return rc;
    t = span_end(st, DT_TIME_ALLREDUCE, t);
    memcpy(st->job, tail, sizeof st->job);
    for (int i = 0; i < 3; i++)
        st->stats[i] += tail[T_LOSS + i];
    /* Every rank holds the same summed gradients, so every rank clips them identically. */
    if (run->cfg->optimizer.clip_grad_norm > 0) {
        dt_optim_zero_frozen_grads(st->optim, st->model->grads); /* train.freeze's ranges */
        dt_clip_grad_norm(st->model->grads, n, run->cfg->optimizer.clip_grad_norm);
    }
    if (!run->shared) {
        rc = dt_model_optim_step(st->model, st->optim, lr); /* and bf16 weight copies */
        t = span_end(st, DT_TIME_OPTIMIZER, t);
    } else {
        /* Shared weights: each rank updates its own slice and makes its pieces' bf16 weight
         * copies; the barrier publishes every slice before anyone's next forward reads the
         * weights, and every copy with them. */
        rc = dt_model_optim_step_slice(st->model, st->optim, st->shard_lo, st->shard_hi, lr);
        t = span_end(st, DT_TIME_OPTIMIZER, t);
        if (rc == 0)
            rc = st->comm->barrier(st->comm);
        st->model->weights_copied = rc == 0 && copies_shared(st->model);
        t = span_end_as(st, DT_TIME_ALLREDUCE, "barrier", t);
    }
    dt_trace_span(st->trace, DT_TRACE_MAIN, "step", "step", t_start, t, st->step);
    return rc;
}

/* Shared weights: the slice of weights and optimizer state this rank updates, cut at 64-byte
 * boundaries so no two ranks write one cache line, or in a bf16 model at the pieces its
 * weight copies are made in (nn/weight_copy.h: each rank copies whole pieces; two ranks may
 * then share the one cache line at their boundary, correct and barely slower); the barrier
 * orders every rank's set-up writes to the shared copy (the same values from each), and its
 * first weight copies, before anyone trains on them. */
int share_weights(struct rank_state *st)
{
    struct dt_model *m = st->model;
    size_t n = m->nparams;
    size_t r = (size_t)st->comm->rank, size = (size_t)st->comm->size;
    st->shard_lo = dt_weight_copy_cut(m, n * r / size);
    st->shard_hi = r + 1 == size ? n : dt_weight_copy_cut(m, n * (r + 1) / size);
    if (copies_shared(m))
        dt_model_copy_slice(m, st->shard_lo, st->shard_hi);
    int rc = st->comm->barrier(st->comm);
    m->weights_copied = rc == 0 && copies_shared(m);
    return rc;
}

int shared_map(struct run *run, const struct dt_run_memory *mem)
{
    /* Sized from the layer list (dt_run_memory's estimate): nothing is built here, so the
     * parent starts no thread before the fork and holds no model the ranks inherit. The
     * copies start on a cache line. */
    size_t weights = (size_t)((mem->model.params + mem->optimizer) / sizeof(float));
    run->shared_copies_at = (weights + 15) & ~(size_t)15;
    run->shared_floats = run->shared_copies_at + (size_t)(mem->model.copies / sizeof(float));
    void *p = mmap(NULL, run->shared_floats * sizeof(float), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return dt_fail(DT_ERUNTIME, "cannot map %zu bytes of shared weights: %s",
                       run->shared_floats * sizeof(float), strerror(errno));
    run->shared = p;
    return 0;
}

void shared_unmap(struct run *run)
{
    if (run->shared)
        munmap(run->shared, run->shared_floats * sizeof(float));
    run->shared = NULL;
}

/* --resume: weights, optimizer state and position from the checkpoint. A finished run resumed
 * again (a re-queued job, say) trains nothing, and reports the checkpoint's figures. */
static int resume(struct loop *lp)
{
    const struct run *run = lp->run;
    struct rank_state *st = lp->st;
    struct dt_comm *comm = st->comm;
    struct dt_run_resume r = {.early_stop = &lp->es};
    /* Shared weights: rank 0 alone writes the shared optimizer state; the others take its
     * step count. */
    bool own_state = !run->shared || comm->rank == 0;
    int rc = dt_run_load_checkpoint(run->opt->resume, st->model, own_state ? st->optim : NULL, &r);
    if (rc)
        return rc;
    if (run->shared) {
        uint64_t steps = dt_optim_steps(st->optim);
        if ((rc = comm->broadcast(comm, &steps, sizeof steps, 0)))
            return rc;
        dt_optim_set_steps(st->optim, steps);
    }
    lp->step = r.step;
    lp->best_acc = r.best_accuracy;
    if (r.has_best && r.best_on_val == lp->best.on_val)
        lp->best = (struct dt_best){.on_val = r.best_on_val,
                                    .any = true,
                                    .score = r.best_score,
                                    .epoch = r.best_epoch,
                                    .step = r.best_step};
    if (r.has_epoch_sums && lp->step % lp->steps_per_epoch) {
        for (int i = 0; i < 3; i++)
            st->stats[i] = (float)r.epoch_sums[i];
        lp->carried_samples = st->stats[2];
        lp->sums_from = lp->step - lp->step % lp->steps_per_epoch;
        lp->resumed_sums = true;
    }
    if (lp->leader && !lp->quiet)
        log_resume_position(lp);
    if (lp->leader)
        emit_resume_json(lp);
    if (dt_early_stop_due(&lp->es)) { /* the counter came with the checkpoint */
        lp->early_stopped = true;
        if (lp->leader && !lp->quiet) {
            char why[300];
            dt_early_stop_describe(&lp->es, why, sizeof why);
            dt_log_info("the run stopped early (%s): nothing left to train (raise "
                        "train.early_stop.patience to go on); evaluating the checkpoint",
                        why);
        }
        return dt_evaluate(st->model, &run->data->test, &st->batcher, &st->eval, comm, &st->result);
    }
    if (lp->step < lp->total_steps)
        return 0;
    if (lp->leader && !lp->quiet)
        dt_log_info("the run has %lld steps: nothing left to train (raise train.epochs to go "
                    "on); evaluating the checkpoint",
                    lp->total_steps);
    return dt_evaluate(st->model, &run->data->test, &st->batcher, &st->eval, comm, &st->result);
}

/* What a checkpoint at the current step records beside the weights: the position, the best
 * epoch so far, and inside an epoch its running sums (a resume continues the epoch's figures). */
static struct dt_run_resume checkpoint_meta(struct loop *lp)
{
    const struct rank_state *st = lp->st;
    struct dt_run_resume meta = {.step = lp->step,
                                 .epoch = lp->step / lp->steps_per_epoch,
                                 .best_accuracy = lp->best_acc,
                                 .test_accuracy = dt_eval_accuracy(&st->result),
                                 .has_best = lp->best.any,
                                 .best_on_val = lp->best.on_val,
                                 .best_score = lp->best.score,
                                 .best_epoch = lp->best.epoch,
                                 .best_step = lp->best.step,
                                 .test_loss = dt_eval_loss(&st->result),
                                 .class_names = lp->run->class_names,
                                 .has_epoch_sums = lp->step % lp->steps_per_epoch != 0,
                                 .early_stop = &lp->es};
    for (int i = 0; i < 3; i++)
        meta.epoch_sums[i] = st->stats[i];
    return meta;
}

/* Rank 0 writes last.safetensors at the current step, mid-epoch or not: the step is the
 * whole position (the sampler, augmentation and dropout are functions of it), so a resume from
 * here continues bit for bit. */
static int save_step_checkpoint(struct loop *lp)
{
    if (!lp->leader || lp->saved_step == lp->step)
        return 0;
    struct rank_state *st = lp->st;
    struct dt_run_resume meta = checkpoint_meta(lp);
    double t0 = dt_now();
    int rc = dt_run_save_checkpoints(lp->run->cfg, lp->run->dir, st->model, st->optim, &meta, true,
                                     false, &lp->writer);
    span_end(lp->st, DT_TIME_CHECKPOINT, t0);
    if (rc == 0) {
        lp->saved_step = lp->step;
        lp->last_save = dt_now();
    }
    return rc;
}

/* After each step, on what every rank now knows alike: a signal stops the job here (after a
 * checkpoint), SIGUSR1 with on_usr1 = "continue" and the step or time period only checkpoint. */
static int after_step(struct loop *lp)
{
    const struct dt_config *cfg = lp->run->cfg;
    const float *job = lp->st->job;
    int sig = job[T_INT] > 0 ? SIGINT : job[T_TERM] > 0 ? SIGTERM : job[T_USR1] > 0 ? SIGUSR1 : 0;
    bool due = job[T_DUE] > 0 ||
               (cfg->checkpoint.every_steps > 0 && lp->step % cfg->checkpoint.every_steps == 0);
    if (sig == SIGUSR1 && cfg->checkpoint.on_usr1 == DT_USR1_CONTINUE) {
        if (stop_signal == SIGUSR1)
            stop_signal = 0; /* served: this rank's request is the checkpoint below */
        if (lp->leader && !lp->quiet) {
            dt_progress_clear(&lp->progress);
            dt_log_info("SIGUSR1: checkpoint at step %lld, training goes on", lp->step);
        }
        sig = 0;
        due = true;
    }
    lp->stop = sig;
    return sig || due ? save_step_checkpoint(lp) : 0;
}

static bool timed_checkpoint_due(const struct loop *lp)
{
    double minutes = lp->run->cfg->checkpoint.every_minutes;
    return lp->leader && minutes > 0 && dt_now() - lp->last_save >= 60 * minutes;
}

/* The training steps of one epoch (or of what is left of it); ends early when the job stops. */
static int run_epoch(struct loop *lp, int epoch, double epoch_start)
{
    const struct dt_config *cfg = lp->run->cfg;
    struct rank_state *st = lp->st;
    long long end = (long long)(epoch + 1) * lp->steps_per_epoch;
    if (end > lp->total_steps)
        end = lp->total_steps;
    while (lp->step < end && !lp->stop) {
        lp->lr = dt_run_lr(&lp->run->schedule, lp->step, lp->steps_per_epoch, lp->total_steps);
        size_t in_epoch = (size_t)(lp->step % lp->steps_per_epoch);
        st->step = lp->step;
        int rc =
            train_step(st, lp->run, (uint64_t)epoch, in_epoch, lp->lr, timed_checkpoint_due(lp));
        if (rc)
            return rc;
        dt_launch_beat(lp->step);
        if (lp->leader) {
            double elapsed = dt_now() - epoch_start;
            /* The whole job's running figures: the step's tail carried every rank's. */
            double seen = st->stats[2] > 0 ? st->stats[2] : 1;
            double done = st->stats[2] - lp->carried_samples;
            dt_progress_step(&lp->progress, epoch, (long)in_epoch, st->stats[0] / seen,
                             st->stats[1] / seen, elapsed > 0 ? done / elapsed : 0);
            if (cfg->log.every > 0 && (lp->step + 1) % cfg->log.every == 0)
                emit_step_json(lp, epoch, elapsed, done);
        }
        lp->step++;
        if ((rc = after_step(lp)))
            return rc;
    }
    return 0;
}

/* Rank 0 after an epoch's evaluation: the epoch line and event, best and last checkpoints. */
static int report_epoch(struct loop *lp, int epoch, double train_seconds,
                        const struct dt_timing_report *times)
{
    const struct dt_config *cfg = lp->run->cfg;
    struct rank_state *st = lp->st;
    double seen = st->stats[2] > 0 ? st->stats[2] : 1;
    double train_loss = st->stats[0] / seen, train_acc = st->stats[1] / seen;
    double test_acc = dt_eval_accuracy(&st->result);
    bool have_val = lp->run->data->val.n > 0;
    double val_acc = have_val ? dt_eval_accuracy(&st->val_result) : 0;
    char val_part[64] = "";
    if (have_val)
        snprintf(val_part, sizeof val_part, " | val loss %.4f acc %.2f%%",
                 dt_eval_loss(&st->val_result), 100 * val_acc);
    double samples = st->stats[2] - lp->carried_samples;
    bool best = dt_best_update(&lp->best, val_acc, train_loss, epoch + 1, lp->step);
    char best_part[80] = "";
    if (best)
        dt_best_describe(&lp->best, best_part + 3, sizeof best_part - 3);
    if (best)
        memcpy(best_part, " | ", 3);
    dt_progress_clear(&lp->progress);
    char time_part[200];
    dt_timing_format(times, st->comm->size, time_part, sizeof time_part);
    if (!lp->quiet)
        dt_log_info("epoch %d/%d: train loss %.4f acc %.2f%%%s | test loss %.4f acc %.2f%% | "
                    "%.1f s, %.0f samples/s%s%s",
                    epoch + 1, cfg->train.epochs, train_loss, 100 * train_acc, val_part,
                    dt_eval_loss(&st->result), 100 * test_acc, train_seconds,
                    samples / train_seconds, time_part, best_part);
    struct epoch_record rec = {.train_steps = lp->step - lp->sums_from,
                               .resumed_at =
                                   lp->epoch_first % lp->steps_per_epoch ? lp->epoch_first : -1,
                               .new_best = best,
                               .best = &lp->best};
    emit_epoch_json(lp->run, st, epoch, lp->step, train_loss, train_acc, train_seconds, samples,
                    lp->lr, times, &rec);
    if (test_acc > lp->best_acc)
        lp->best_acc = test_acc;
    long long step = lp->step, spe = lp->steps_per_epoch;
    bool epoch_done = step % spe == 0;
    bool due =
        step >= lp->total_steps || lp->early_stopped ||
        (cfg->checkpoint.every > 0 && epoch_done && (step / spe) % cfg->checkpoint.every == 0);
    if (!due && !(best && cfg->checkpoint.best))
        return 0;
    struct dt_run_resume meta = checkpoint_meta(lp);
    double t0 = dt_now();
    int rc = dt_run_save_checkpoints(cfg, lp->run->dir, st->model, st->optim, &meta, due,
                                     best && cfg->checkpoint.best, &lp->writer);
    span_end(st, DT_TIME_CHECKPOINT, t0);
    if (rc == 0 && due)
        lp->saved_step = step;
    if (rc == 0 && best && cfg->checkpoint.best)
        lp->wrote_best = true;
    return rc;
}

/* Every rank scores the epoch on the job's figures; rank 0's verdict is the one all follow, so
 * no rank can go on into an epoch the others skip. */
static int decide_early_stop(struct loop *lp, int epoch)
{
    const struct rank_state *st = lp->st;
    double seen = st->stats[2] > 0 ? st->stats[2] : 1;
    struct dt_epoch_scores e = {.train_loss = st->stats[0] / seen,
                                .train_accuracy = st->stats[1] / seen};
    if (lp->run->data->val.n) {
        e.val_accuracy = dt_eval_accuracy(&st->val_result);
        e.val_loss = dt_eval_loss(&st->val_result);
    }
    int stop = dt_early_stop_update(&lp->es, &e, epoch + 1);
    int rc = st->comm->broadcast(st->comm, &stop, sizeof stop, 0);
    lp->early_stopped = rc == 0 && stop;
    return rc;
}

/* After an epoch's steps (whose figures are already the job's: each step's tail carried
 * them): the test set evaluated on every rank's shard, then rank 0's report. */
static int end_epoch(struct loop *lp, int epoch, long long first, double epoch_start)
{
    const struct dt_config *cfg = lp->run->cfg;
    struct rank_state *st = lp->st;
    double train_seconds = dt_now() - epoch_start;
    lp->trained_s += train_seconds;
    lp->run_samples += st->stats[2] - lp->carried_samples;
    lp->run_steps += lp->step - first;
    st->model->profile = false; /* the profile is per training step: eval is not in it */
    int rc = 0;
    double t0 = dt_now();
    const struct dt_dataset *val = &lp->run->data->val;
    if (val->n)
        rc = dt_evaluate(st->model, val, &st->batcher, &st->eval, st->comm, &st->val_result);
    if (rc == 0)
        rc = dt_evaluate(st->model, &lp->run->data->test, &st->batcher, &st->eval, st->comm,
                         &st->result);
    span_end(st, DT_TIME_EVAL, t0);
    st->model->profile = cfg->log.profile;
    struct dt_timing_report times;
    if (rc == 0) /* every rank, as every collective */
        rc = dt_timing_gather(&st->timing, st->comm, false, &times);
    if (rc == 0 && dt_early_stop_enabled(&lp->es))
        rc = decide_early_stop(lp, epoch);
    dt_trace_flush(st->trace); /* a rank killed later loses at most one epoch's events */
    if (rc || !lp->leader)
        return rc;
    return report_epoch(lp, epoch, train_seconds, &times);
}

static int train_epochs(struct loop *lp)
{
    while (lp->step < lp->total_steps && !lp->stop && !lp->early_stopped) {
        int epoch = (int)(lp->step / lp->steps_per_epoch);
        if (!lp->resumed_sums) {
            memset(lp->st->stats, 0, sizeof lp->st->stats);
            lp->sums_from = lp->step;
        }
        lp->epoch_first = lp->step;
        dt_progress_epoch_start(&lp->progress);
        double epoch_start = dt_now();
        long long first = lp->step;
        int rc = run_epoch(lp, epoch, epoch_start);
        if (rc == 0 && !lp->stop)
            rc = end_epoch(lp, epoch, first, epoch_start);
        if (rc)
            return rc;
        lp->resumed_sums = false;
        lp->carried_samples = 0;
    }
    /* everything the run reports as written is on disk before it says so */
    double t0 = dt_now();
    int rc = dt_ckpt_writer_wait(&lp->writer);
    span_end(lp->st, DT_TIME_CHECKPOINT, t0);
    if (rc)
        return rc;
    return lp->stop ? report_stop(lp) : 0;
}

/* --trace: this rank's part of the trace, the checkpoint writer's thread included. */
static int open_trace(struct rank_state *st, const struct run *run, struct dt_ckpt_writer *w)
{
    if (!run->opt->trace)
        return 0;
    st->trace = malloc(sizeof *st->trace);
    if (!st->trace)
        return dt_fail(DT_ERUNTIME, "--trace: out of memory");
    int rc = dt_trace_open(st->trace, run->opt->trace, st->comm->rank, run->clock_base);
    if (rc) {
        free(st->trace);
        st->trace = NULL;
        return rc;
    }
    w->trace = st->trace;
    return 0;
}

int rank_main(struct dt_comm *comm, void *arg)
{
    const struct run *run = arg;
    const struct dt_config *cfg = run->cfg;
    struct rank_state st = {.comm = comm};
    struct loop lp = {.run = run,
                      .st = &st,
                      .leader = comm->rank == 0,
                      .saved_step = -1,
                      .best_acc = -1,
                      .lr = cfg->optimizer.lr};
    lp.quiet = cfg->log.quiet || !lp.leader;
    dt_ckpt_writer_init(&lp.writer);
    dt_best_init(&lp.best, run->data->val.n > 0);
    dt_early_stop_init(&lp.es, &cfg->train.early_stop);
    int rc = open_trace(&st, run, &lp.writer);
    if (rc == 0)
        rc = rank_setup(&st, run);
    /* Shared weights: every rank has written the initial weights (the same values) before any
     * resume loads others over them. */
    if (rc == 0 && run->shared)
        rc = comm->barrier(comm);
    if (rc == 0)
        rc = dt_trace_attach_model(st.trace, st.model);
    if (rc)
        goto out;
    lp.steps_per_epoch = (long long)dt_sampler_steps(&st.sampler);
    lp.total_steps = lp.steps_per_epoch * cfg->train.epochs;
    if (cfg->train.max_steps > 0 && cfg->train.max_steps < lp.total_steps)
        lp.total_steps = cfg->train.max_steps;
    if (run->opt->resume && (rc = resume(&lp)))
        goto out;
    /* fine-tuning starts from init_from's tensors; a resume has its own */
    if (!run->opt->resume && (rc = dt_run_init_from(cfg, st.model, !lp.quiet, NULL)))
        goto out;
    if ((rc = verify_identical_weights(comm, st.model)))
        goto out;
    if (run->shared && (rc = share_weights(&st)))
        goto out;
    dt_progress_init(&lp.progress, lp.quiet, cfg->log.every, cfg->train.epochs,
                     (long)lp.steps_per_epoch);
    lp.run_start = lp.last_save = dt_now();
    dt_launch_alive(); /* set up: from here the watchdog gives dist.timeout per step */
    rc = train_epochs(&lp);
    struct dt_timing_report times;
    if (rc == 0) /* every rank: the run's totals */
        rc = dt_timing_gather(&st.timing, comm, true, &times);
    if (rc == 0 && lp.leader)
        report_final(&lp, &times);
    else if (rc == 0)
        report_host_done(&lp);
out:;
    int wrc = dt_ckpt_writer_close(&lp.writer); /* on an error path too: no torn half-queue */
    /* what was recorded is kept on an error path too: the parent merges it */
    int trc = dt_trace_close(st.trace);
    free(st.trace);
    rank_teardown(&st);
    return rc ? rc : wrc ? wrc : trc;
}

/* The run once its data has loaded (and data.mean/std = "auto" are resolved in cfg). */
static int train_loaded(const struct dt_config *cfg, const struct dt_train_options *opt,
                        struct dt_data *loaded)
{
    struct dt_data data = *loaded;
    int rc;
    if (dt_es_metric_needs_val(cfg->train.early_stop.metric) && data.val.n == 0) {
        dt_data_free(&data);
        return dt_fail(DT_EUSAGE,
                       "%s: train.early_stop.metric: %s needs a validation split, and %s has "
                       "none (set data.val_fraction, or use train_loss)",
                       cfg->path, dt_es_metric_name(cfg->train.early_stop.metric), cfg->data.dir);
    }
    /* Before any batch-sized buffer is allocated (or a rank forked): the whole run at its real
     * per-rank batch against the memory available, as the dry run reports it. */
    struct dt_run_memory mem;
    if ((rc = dt_run_memory(cfg, opt->plan, &data.train, &mem)) ||
        (rc = dt_run_check_memory(cfg, &mem))) {
        dt_data_free(&data);
        return rc;
    }
    struct run run = {.cfg = cfg,
                      .opt = opt,
                      .data = &data,
                      .dir = opt->checkpoint_dir ? opt->checkpoint_dir : cfg->checkpoint.dir,
                      .clock_base = dt_now()};
    struct dt_job_steps steps;
    if ((rc = dt_job_plan_steps(opt->plan, cfg, data.train.n, &steps)) ||
        (rc = dt_run_schedule(cfg, steps.steps_per_epoch, &run.schedule))) {
        dt_data_free(&data);
        return rc;
    }
    run.class_names = dt_run_class_names_json(&data.train);
    if (dt_job_plan_shares_memory(opt->plan) && (rc = shared_map(&run, &mem))) {
        free(run.class_names);
        dt_data_free(&data);
        return rc;
    }
    /* The run directory and the start event last: the data has loaded, the run fits and its
     * shared memory exists, so nothing before the ranks can fail after them. */
    char made[1024] = "";
    if (opt->create_dir && (rc = create_run_dir(run.dir, made, sizeof made))) {
        shared_unmap(&run);
        free(run.class_names);
        dt_data_free(&data);
        return rc;
    }
    struct dt_history history;
    dt_history_init(&history, cfg->log.json);
    run.history = &history;
    if (opt->create_dir) /* the process that writes the run directory */
        rc = dt_history_open(&history, run.dir, cfg, opt->argc, opt->argv, opt->resume != NULL);
    if (rc == 0 && opt->probe_json && opt->create_dir)
        rc = write_probe_json(run.dir, opt->probe_json);
    if (rc) {
        dt_history_close(&history, 0);
        if (made[0])
            discard_run_files(&history, opt, run.dir);
        dt_run_dir_remove_if_empty(run.dir, made);
        shared_unmap(&run);
        free(run.class_names);
        dt_data_free(&data);
        return rc;
    }
    if (opt->probe_json) /* how --instances/--threads auto chose the shape */
        dt_history_emit_text(&history, opt->probe_json);
    if (opt->plan->job.rank_base == 0)
        emit_start_json(&run);
    struct sigaction sa = {.sa_handler = on_stop_signal};
    sigemptyset(&sa.sa_mask);
    struct sigaction old_int, old_term, old_usr1;
    stop_signal = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGUSR1, &sa, &old_usr1);
    if (opt->trace)
        dt_trace_prepare(opt->trace, opt->plan->job.rank_base, opt->plan->job.local_n);
    rc = run_with_restarts(&run);
    if (opt->trace) { /* a failed run's trace too: what was recorded */
        int trc = merge_trace(&run, rc);
        rc = rc ? rc : trc;
    }
    dt_history_close(&history, rc);
    if (rc && made[0] && !dt_run_dir_holds_checkpoints(run.dir)) {
        /* failed before its first checkpoint: no run directory left behind */
        discard_run_files(&history, opt, run.dir);
        dt_run_dir_remove_if_empty(run.dir, made);
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGUSR1, &old_usr1, NULL);
    shared_unmap(&run);
    free(run.class_names);
    dt_data_free(&data);
    return rc;
}

int dt_train_run(const struct dt_config *cfg, const struct dt_train_options *opt)
{
    struct dt_data data;
    memset(&data, 0, sizeof data);
    int rc = 0;
    if (opt->data) /* loaded by the shape probe: the run reads no file twice */
        data = *opt->data;
    else if ((rc = dt_run_load_data(cfg, &data)))
        return rc;
    struct dt_config *resolved;
    if ((rc = dt_run_stats_resolve(cfg, &data.train, &resolved))) {
        dt_data_free(&data);
        return rc;
    }
    rc = train_loaded(resolved ? resolved : cfg, opt, &data);
    free(resolved);
    return rc;
}

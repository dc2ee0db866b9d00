/* The training run's reports: the log lines and the --json events (start, step, epoch, resume,
 * stop, restart, final) rank 0 and the hosts say, built here and handed to train/history.c.
 * Split out of train/loop.c, which decides when each is said (train/loop_internal.h). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "train/loop_internal.h"
#include "train/norm_stats.h"
#include "dist/backend.h"
#include "nn/layers.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/json.h"
#include "util/log.h"

static double peak_rss_mb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

/* "time_rank0" and "time_slowest": where the time went (train/timing.h). */
static void add_times_json(struct dt_json_writer *w, const struct dt_timing_report *times)
{
    char *mine = dt_timing_json(times->rank0, -1);
    char *slow = dt_timing_json(times->slowest_s, times->slowest);
    dt_jw_raw(w, "time_rank0", mine ? mine : "null");
    dt_jw_raw(w, "time_slowest", slow ? slow : "null");
    free(mine);
    free(slow);
}

void emit_epoch_json(const struct run *run, const struct rank_state *st, int epoch, long long step,
                     double train_loss, double train_acc, double seconds, double samples, float lr,
                     const struct dt_timing_report *times, const struct epoch_record *rec)
{
    struct dt_json_writer w;
    dt_jw_begin(&w, "epoch");
    dt_jw_int(&w, "epoch", epoch + 1);
    dt_jw_int(&w, "epochs", run->cfg->train.epochs);
    dt_jw_int(&w, "step", step);
    dt_jw_num(&w, "lr", lr);
    dt_jw_num(&w, "train_loss", train_loss);
    dt_jw_num(&w, "train_accuracy", train_acc);
    if (run->data->val.n) {
        dt_jw_num(&w, "val_loss", dt_eval_loss(&st->val_result));
        dt_jw_num(&w, "val_accuracy", dt_eval_accuracy(&st->val_result));
    }
    dt_jw_num(&w, "test_loss", dt_eval_loss(&st->result));
    dt_jw_num(&w, "test_accuracy", dt_eval_accuracy(&st->result));
    dt_jw_num(&w, "seconds", seconds);
    dt_jw_num(&w, "samples_per_s", seconds > 0 ? samples / seconds : 0);
    add_times_json(&w, times);
    dt_jw_int(&w, "train_steps", rec->train_steps);
    if (rec->resumed_at >= 0)
        dt_jw_int(&w, "resumed_at", rec->resumed_at);
    dt_best_json(rec->best, rec->new_best, &w);
    dt_history_emit(run->history, &w);
}

static void print_profile(const struct dt_model *m, long long steps)
{
    if (steps <= 0)
        return;
    double total = 0;
    for (int i = 0; i < m->nlayers && i < DT_MAX_PROFILE_LAYERS; i++)
        total += m->profile_fwd[i] + m->profile_bwd[i];
    dt_log_info("per-layer time per step (ms), %lld steps:", steps);
    for (int i = 0; i < m->nlayers && i < DT_MAX_PROFILE_LAYERS; i++)
        dt_log_info("  %2d %-12s fwd %8.3f  bwd %8.3f  %5.1f%%", i, m->layers[i]->kind->name,
                    1e3 * m->profile_fwd[i] / (double)steps,
                    1e3 * m->profile_bwd[i] / (double)steps,
                    total > 0 ? 100 * (m->profile_fwd[i] + m->profile_bwd[i]) / total : 0);
}

/* Where a resumed run stands, in the epoch lines' numbering (epoch E/N counts from 1, its
 * step S/M is the steps of it done). */
void log_resume_position(const struct loop *lp)
{
    int epochs = lp->run->cfg->train.epochs;
    long long spe = lp->steps_per_epoch > 0 ? lp->steps_per_epoch : 1;
    long long epoch = lp->step / spe, in_epoch = lp->step % spe;
    const char *from = lp->run->opt->resume;
    if (lp->step >= lp->total_steps)
        dt_log_info("resuming from %s at step %lld: the end of the run", from, lp->step);
    else if (in_epoch == 0)
        dt_log_info("resuming from %s at step %lld: the start of epoch %lld/%d", from, lp->step,
                    epoch + 1, epochs);
    else
        dt_log_info("resuming from %s at step %lld: epoch %lld/%d step %lld/%lld", from, lp->step,
                    epoch + 1, epochs, in_epoch, spe);
}

/* Where a resumed (or restarted) run continues: metrics.csv and TensorBoard drop what an
 * earlier attempt logged past this step. */
void emit_resume_json(const struct loop *lp)
{
    struct dt_json_writer w;
    dt_jw_begin(&w, "resume");
    dt_jw_str(&w, "checkpoint", lp->run->opt->resume);
    dt_jw_int(&w, "step", lp->step);
    dt_jw_int(&w, "epoch", lp->step / lp->steps_per_epoch + 1);
    dt_history_emit(lp->run->history, &w);
}

void emit_step_json(const struct loop *lp, int epoch, double elapsed, double done)
{
    const struct rank_state *st = lp->st;
    double seen = st->stats[2] > 0 ? st->stats[2] : 1;
    struct dt_json_writer w;
    dt_jw_begin(&w, "step");
    dt_jw_int(&w, "epoch", epoch + 1);
    dt_jw_int(&w, "step", lp->step + 1);
    dt_jw_num(&w, "loss", st->stats[0] / seen);
    dt_jw_num(&w, "accuracy", st->stats[1] / seen);
    dt_jw_num(&w, "lr", lp->lr);
    dt_jw_num(&w, "samples_per_s", elapsed > 0 ? done / elapsed : 0);
    /* Training seconds since this run's first step, evaluation excluded: `bench` takes
     * differences of it to leave out warm-up steps. */
    dt_jw_num(&w, "elapsed_s", lp->trained_s + elapsed);
    dt_history_emit(lp->run->history, &w);
}

/* --json: a stopped run's `stop` event, the last line on stdout: why, the step of the
 * checkpoint it continues from (null when there is none), and the command that continues it. */
void emit_stop_json(struct dt_history *h, const char *reason, long long step,
                    const char *checkpoint, const char *resume_command)
{
    struct dt_json_writer w;
    dt_jw_begin(&w, "stop");
    dt_jw_str(&w, "reason", reason);
    if (step >= 0)
        dt_jw_int(&w, "step", step);
    else
        dt_jw_raw(&w, "step", "null");
    if (checkpoint)
        dt_jw_str(&w, "checkpoint", checkpoint);
    else
        dt_jw_raw(&w, "checkpoint", "null");
    if (checkpoint && resume_command)
        dt_jw_str(&w, "resume", resume_command);
    else
        dt_jw_raw(&w, "resume", "null");
    dt_history_emit(h, &w);
}

/* The one line a stopped run prints: where it stopped and how to go on. Every rank stopped
 * after the same step, where rank 0 wrote last.safetensors. */
int report_stop(struct loop *lp)
{
    const char *name = lp->stop == SIGINT ? "SIGINT" : lp->stop == SIGTERM ? "SIGTERM" : "SIGUSR1";
    if (lp->leader) {
        dt_progress_clear(&lp->progress);
        if (!lp->quiet)
            dt_log_info("stopped by %s at step %lld; continue from step %lld with --resume "
                        "%s/last.safetensors (or --resume auto)",
                        name, lp->step, lp->saved_step, lp->run->dir);
        char path[1100];
        snprintf(path, sizeof path, "%s/last.safetensors", lp->run->dir);
        emit_stop_json(lp->run->history, name, lp->step, lp->saved_step >= 0 ? path : NULL,
                       lp->run->opt->resume_command);
    }
    return lp->stop == SIGINT ? -DT_EINTR : -DT_ETERM;
}

/* "early_stop": the rule, where the metric stands and, when it stopped the run, why. */
static void add_early_stop_json(struct dt_json_writer *w, const struct dt_early_stop *es,
                                const char *reason)
{
    struct dt_json_writer o = {0};
    dt_json_escape_to(&o, reason ? reason : "");
    char text[700];
    char best[40] = "null";
    if (es->any)
        snprintf(best, sizeof best, "%.9g", es->best);
    snprintf(text, sizeof text,
             "{\"metric\":\"%s\",\"patience\":%d,\"min_delta\":%.9g,\"best\":%s,"
             "\"best_epoch\":%d,\"epochs_without_improvement\":%d,\"stopped\":%s,"
             "\"reason\":%s}",
             dt_es_metric_name(es->metric), es->patience, es->min_delta, best, es->best_epoch,
             es->bad_epochs, reason ? "true" : "false", reason && o.buf ? o.buf : "null");
    free(o.buf);
    dt_jw_raw(w, "early_stop", text);
}

/* The `final` event's word on what each checkpoint file holds: last.safetensors' step and
 * epoch (epochs completed), best.safetensors' epoch, step and score. */
static void checkpoint_positions_json(const struct loop *lp, struct dt_json_writer *w)
{
    char buf[256];
    if (lp->saved_step >= 0) {
        snprintf(buf, sizeof buf, "{\"file\":\"last.safetensors\",\"epoch\":%lld,\"step\":%lld}",
                 lp->saved_step / lp->steps_per_epoch, lp->saved_step);
        dt_jw_raw(w, "last_checkpoint", buf);
    }
    if (lp->best.any && lp->run->cfg->checkpoint.best) {
        snprintf(buf, sizeof buf,
                 "{\"file\":\"best.safetensors\",\"epoch\":%lld,\"step\":%lld,"
                 "\"metric\":\"%s\",\"score\":%.9g}",
                 lp->best.epoch, lp->best.step, dt_best_metric(&lp->best),
                 dt_best_metric_value(&lp->best, lp->best.score));
        dt_jw_raw(w, "best_checkpoint", buf);
    }
}

/* Rank 0 at the end: the profile and the `final` event. */
void report_final(const struct loop *lp, const struct dt_timing_report *times)
{
    const struct dt_config *cfg = lp->run->cfg;
    const struct rank_state *st = lp->st;
    double seconds = dt_now() - lp->run_start;
    if (cfg->log.profile) {
        print_profile(st->model, lp->run_steps);
        dt_timing_print_profile(times, st->comm->size, lp->run_steps);
    }
    char why[300] = "";
    if (lp->early_stopped)
        dt_early_stop_describe(&lp->es, why, sizeof why);
    if (lp->early_stopped && !lp->quiet)
        dt_log_info("early stop after epoch %lld/%d: %s; %s/last.safetensors holds step %lld",
                    lp->step / lp->steps_per_epoch + (lp->step % lp->steps_per_epoch != 0),
                    cfg->train.epochs, why, lp->run->dir, lp->step);
    struct dt_json_writer w;
    dt_jw_begin(&w, "final");
    dt_jw_str(&w, "impl", "dtrain");
    dt_jw_str(&w, "config", cfg->path);
    dt_jw_int(&w, "instances", st->comm->size);
    dt_jw_int(&w, "threads", lp->run->opt->plan->threads);
    dt_jw_int(&w, "batch_size", cfg->train.batch_size);
    dt_jw_bool(&w, "batch_per_instance", cfg->train.batch_per_instance);
    dt_jw_bool(&w, "split_invariant", cfg->dist.split_invariant);
    dt_jw_str(&w, "grad_dtype", dt_names_name(&dt_grad_dtype_names, (int)cfg->dist.grad_dtype));
    dt_jw_int(&w, "steps", lp->step);
    /* why the run ended: all its epochs, train.max_steps, or train.early_stop */
    dt_jw_str(&w, "stop_reason",
              lp->early_stopped                                                ? "early_stop"
              : lp->step >= lp->steps_per_epoch * (long long)cfg->train.epochs ? "epochs"
                                                                               : "max_steps");
    if (dt_early_stop_enabled(&lp->es))
        add_early_stop_json(&w, &lp->es, lp->early_stopped ? why : NULL);
    dt_jw_num(&w, "seconds", seconds);
    dt_jw_num(&w, "samples_per_s", seconds > 0 ? lp->run_samples / seconds : 0);
    dt_jw_num(&w, "test_loss", dt_eval_loss(&st->result));
    dt_jw_num(&w, "test_accuracy", dt_eval_accuracy(&st->result));
    dt_jw_num(&w, "best_test_accuracy", lp->best_acc);
    dt_jw_num(&w, "peak_rss_mb", peak_rss_mb());
    add_times_json(&w, times);
    dt_jw_str(&w, "checkpoint_dir", lp->run->dir);
    /* The files this run wrote, so a pipeline need not guess runs/NAME-N. */
    dt_jw_raw(&w, "checkpoints",
              lp->saved_step >= 0 && lp->wrote_best ? "[\"last.safetensors\",\"best.safetensors\"]"
              : lp->saved_step >= 0                 ? "[\"last.safetensors\"]"
              : lp->wrote_best                      ? "[\"best.safetensors\"]"
                                                    : "[]");
    checkpoint_positions_json(lp, &w);
    dt_history_emit(lp->run->history, &w);
}

/* A host other than the leader's says, once, that its ranks are done: a multi-host run's
 * non-leader nodes must not end silently (a script cannot tell success from a lost log).
 * Said by the host's first rank; --quiet (log.quiet) keeps it silent. Ranks are global. */
void report_host_done(const struct loop *lp)
{
    const struct dt_job_plan *p = lp->run->opt->plan;
    const struct dt_comm *c = lp->st->comm;
    if (lp->run->cfg->log.quiet || p->env.node_rank <= 0)
        return;
    if (p->job.per_rank) { /* every rank its own process: local rank 0 speaks for the host */
        if (p->env.local_rank == 0)
            dt_log_info("host %d: %d rank%s finished, %lld steps", p->env.node_rank,
                        p->job.host_ranks, p->job.host_ranks == 1 ? "" : "s", lp->step);
        return;
    }
    if (c->rank != p->job.rank_base)
        return;
    if (p->job.local_n == 1)
        dt_log_info("host %d: rank %d finished, %lld steps", p->env.node_rank, p->job.rank_base,
                    lp->step);
    else
        dt_log_info("host %d: ranks %d-%d finished, %lld steps", p->env.node_rank, p->job.rank_base,
                    p->job.rank_base + p->job.local_n - 1, lp->step);
}

void emit_restart_json(struct dt_history *h, int restart, int max, const char *reason,
                       const char *resume, double delay)
{
    struct dt_json_writer w;
    dt_jw_begin(&w, "restart");
    dt_jw_int(&w, "restart", restart);
    dt_jw_int(&w, "max_restarts", max);
    dt_jw_str(&w, "reason", reason);
    if (resume)
        dt_jw_str(&w, "resume", resume);
    else
        dt_jw_raw(&w, "resume", "null");
    dt_jw_num(&w, "delay_s", delay);
    dt_history_emit(h, &w);
}

/* --json: what the run is, before its first step: where it writes, what it reads, its shape. */
void emit_start_json(const struct run *run)
{
    const struct dt_config *cfg = run->cfg;
    const struct dt_job_plan *p = run->opt->plan;
    struct dt_json_writer w;
    dt_jw_begin(&w, "start");
    dt_jw_str(&w, "config", cfg->path);
    dt_jw_str(&w, "checkpoint_dir", run->dir);
    if (run->opt->resume)
        dt_jw_str(&w, "resume", run->opt->resume);
    else
        dt_jw_raw(&w, "resume", "null");
    dt_jw_int(&w, "train_samples", (long long)run->data->train.n);
    dt_jw_int(&w, "val_samples", (long long)run->data->val.n);
    dt_jw_int(&w, "test_samples", (long long)run->data->test.n);
    dt_jw_int(&w, "classes", run->data->train.classes);
    /* the normalization in effect: data.mean/std = "auto" resolved (train/norm_stats.h) */
    char *mean = dt_run_stats_json(cfg->data.mean, cfg->data.nmean);
    char *std = dt_run_stats_json(cfg->data.std, cfg->data.nstd);
    if (mean && std) {
        dt_jw_raw(&w, "data_mean", mean);
        dt_jw_raw(&w, "data_std", std);
    }
    free(mean);
    free(std);
    dt_jw_int(&w, "hosts", p->env.nodes);
    dt_jw_int(&w, "instances", p->job.world);
    dt_jw_int(&w, "threads", p->threads);
    dt_jw_str(&w, "backend", dt_backend_name(p->job.backend));
    dt_jw_int(&w, "epochs", cfg->train.epochs);
    dt_jw_str(&w, "precision", dt_names_name(&dt_precision_names, (int)cfg->train.precision));
    dt_history_emit(run->history, &w);
}

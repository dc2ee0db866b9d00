/* What train/loop.c shares with the files split out of it, and with nothing else: the run, a
 * rank's state and the loop's position (the structs loop.c's steps and epochs work on), and the
 * functions loop_report.c (the log lines and --json events), loop_rundir.c (the run
 * directory's own files, the trace merge) and loop_restart.c (--max-restarts) give it, and the
 * rank pieces probe.c (`--instances auto`'s probe) runs. Private to these five files. */
#ifndef DT_TRAIN_LOOP_INTERNAL_H
#define DT_TRAIN_LOOP_INTERNAL_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "train/best.h"
#include "train/ckpt_writer.h"
#include "train/config.h"
#include "train/early_stop.h"
#include "train/evaluate.h"
#include "train/history.h"
#include "train/setup.h"
#include "train/loop.h"
#include "train/progress.h"
#include "train/timing.h"
#include "train/trace.h"
#include "data/batch.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "dist/comm.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "nn/schedule.h"

/* What each rank adds after its gradients (DT_MODEL_GRAD_SPARE floats), summed with them: the
 * step's loss and accuracy counts of the whole job, and how many ranks saw each signal. */
enum step_tail { T_LOSS, T_CORRECT, T_COUNT, T_INT, T_TERM, T_USR1, T_DUE, T_FLOATS };
_Static_assert(T_FLOATS <= DT_MODEL_GRAD_SPARE, "the step tail must fit the spare floats");

struct run {
    const struct dt_config *cfg;
    const struct dt_train_options *opt;
    const struct dt_data *data;
    const char *dir;             /* the checkpoint directory (opt->checkpoint_dir) */
    struct dt_schedule schedule; /* the learning rate of every step, made once */
    /* One host, forked ranks: the parameters and the optimizer state, one copy in memory
     * shared by every rank (MAP_SHARED before the fork), then from float shared_copies_at on
     * a bf16 model's weight copies (nn/weight_copy.h); NULL otherwise. */
    float *shared;
    size_t shared_floats, shared_copies_at;
    char *class_names;          /* JSON, stored in every checkpoint for `predict` */
    double clock_base;          /* dt_now() at the start: the trace's time 0 for every rank */
    struct dt_history *history; /* where every event goes (stdout, the run directory) */
};

/* Everything one rank owns during training. */
struct rank_state {
    struct dt_comm *comm;
    struct dt_model *model;
    struct dt_optim *optim;
    struct dt_sampler sampler;
    struct dt_batcher batcher;
    struct dt_eval_scratch eval;
    struct dt_eval_result result;
    struct dt_eval_result val_result; /* of data->val, when there is one */
    float *x;
    uint8_t *y;
    uint32_t *idx;
    uint64_t *ids;
    float stats[3];            /* loss sum, correct, samples of this epoch, whole job */
    float job[T_FLOATS];       /* the last step's reduced tail */
    size_t shard_lo, shard_hi; /* the slice of the shared weights this rank updates */
    struct dt_timing timing;   /* where this rank's time goes (train/timing.h) */
    struct dt_trace *trace;    /* --trace: this rank's events; NULL when off */
    long long step;            /* the step being trained, for the trace's args */
};

/* What an epoch event says about the epoch beyond its figures: the steps its train figures
 * cover, where a resume inside it continued (-1: none), and the best epoch so far. */
struct epoch_record {
    long long train_steps, resumed_at;
    bool new_best;
    const struct dt_best *best;
};

/* Where a rank's run stands between steps and epochs. */
struct loop {
    const struct run *run;
    struct rank_state *st;
    bool leader, quiet;
    long long steps_per_epoch, total_steps;
    long long step, saved_step; /* saved_step: that of the last last.safetensors, or -1 */
    double best_acc;            /* the highest test accuracy seen, for the final report */
    struct dt_best best;        /* which epoch best.safetensors holds (train/best.h) */
    float lr;
    struct dt_progress progress;
    double run_start, run_samples;
    double trained_s; /* seconds in training steps of finished epochs (no evaluation) */
    long long run_steps;
    int stop;                     /* the signal every rank agreed to stop for, 0 while training */
    bool wrote_best;              /* best.safetensors was written by this run */
    double last_save;             /* when rank 0 last wrote last.safetensors (every_minutes) */
    struct dt_ckpt_writer writer; /* rank 0's checkpoint files, written in the background */
    struct dt_early_stop es;      /* train.early_stop's state (train/early_stop.h) */
    bool early_stopped;           /* every rank agreed: no epoch after this one */
    /* A run resumed inside an epoch continues that epoch's running sums (st->stats) from the
     * checkpoint, so its epoch figures are the whole epoch's, bit for bit; rates count this
     * run's samples only, so carried_samples (the restored count) is taken off them. */
    double carried_samples;
    long long sums_from;   /* the first step the epoch's train figures cover */
    long long epoch_first; /* this run's first step of the epoch */
    bool resumed_sums;     /* st->stats holds the checkpoint's sums for the epoch */
};

/* loop.c: the stop signal (SIGINT, SIGTERM, SIGUSR1) this process received, 0 for none; and a
 * rank's whole run, as dt_run_ranks runs it. */
extern volatile sig_atomic_t stop_signal;
int rank_main(struct dt_comm *comm, void *arg);
/* loop.c: the pieces of a rank's run that the shape probe (probe.c) runs too: a rank's set-up
 * and teardown, one training step at (epoch, step of the epoch), and the slice of the shared
 * weights this rank updates. */
int rank_setup(struct rank_state *st, const struct run *run);
void rank_teardown(struct rank_state *st);
int train_step(struct rank_state *st, const struct run *run, uint64_t epoch, size_t step, float lr,
               bool due);
int share_weights(struct rank_state *st);
/* The parent's mapping of run->shared for a run of `mem` (dt_run_memory), before the fork;
 * DT_ERUNTIME naming the bytes when it cannot be mapped. shared_unmap undoes it. */
int shared_map(struct run *run, const struct dt_run_memory *mem);
void shared_unmap(struct run *run);

/* loop_restart.c: the job run, and run again after a runtime failure (--max-restarts). */
int run_with_restarts(struct run *run);

/* loop_report.c: what the run says, as log lines and --json events (train/history.h). */
void emit_epoch_json(const struct run *run, const struct rank_state *st, int epoch, long long step,
                     double train_loss, double train_acc, double seconds, double samples, float lr,
                     const struct dt_timing_report *times, const struct epoch_record *rec);
void log_resume_position(const struct loop *lp);
void emit_resume_json(const struct loop *lp);
void emit_step_json(const struct loop *lp, int epoch, double elapsed, double done);
void emit_stop_json(struct dt_history *h, const char *reason, long long step,
                    const char *checkpoint, const char *resume_command);
int report_stop(struct loop *lp);
void report_final(const struct loop *lp, const struct dt_timing_report *times);
void report_host_done(const struct loop *lp);
void emit_restart_json(struct dt_history *h, int restart, int max, const char *reason,
                       const char *resume, double delay);
void emit_start_json(const struct run *run);

/* loop_rundir.c: the run directory's files beside the checkpoints, and --trace's merge. */
int merge_trace(const struct run *run, int run_rc);
int write_probe_json(const char *dir, const char *json);
void discard_run_files(struct dt_history *h, const struct dt_train_options *opt, const char *dir);
int create_run_dir(const char *dir, char *made, size_t made_size);

#endif

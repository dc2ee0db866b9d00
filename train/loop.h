/* The training run behind `dtrain train`: loads the data once, then runs one rank in this
 * process or forks N ranks through dist/launcher, each executing the same loop. */
#ifndef DT_TRAIN_LOOP_H
#define DT_TRAIN_LOOP_H

#include <stdbool.h>

#include "train/config.h"
#include "train/plan.h"
#include "data/dataset.h"

/* What `train` needs besides the config (the config's log.* keys hold the output options). */
struct dt_train_options {
    const char *resume;             /* checkpoint to continue from, or NULL */
    struct dt_job_opts job;         /* multi-host flags, --verbose */
    const struct dt_job_plan *plan; /* made from cfg and job by dt_job_plan_make */
    int max_restarts;               /* restart a failed job this many times (torchrun's) */
    const char *checkpoint_dir;     /* where checkpoints go: dt_run_dir_choose's choice (rank 0's
                                       process), else the config's checkpoint.dir */
    bool create_dir;                /* this process writes checkpoints: create checkpoint_dir
                                       once the data has loaded */
    const char *resume_command;     /* the command line that continues the run, for the
                                       `stop` event; NULL leaves it out */
    const char *trace;              /* --trace FILE: a Chrome trace of the run, or NULL */
    const char *probe_json;         /* --instances/--threads auto: the probe's result, written
                                       to checkpoint_dir/probe.json and emitted as the `probe`
                                       event before `start`; NULL = none */
    struct dt_data *data;           /* the datasets, already loaded (`--instances auto` loads
                                       them for its probe): taken over and freed by
                                       dt_train_run, whatever it returns; NULL = load them */
    int argc;                       /* the command line, for the run directory's cmdline.txt */
    char *const *argv;
};

int dt_train_run(const struct dt_config *cfg, const struct dt_train_options *opt);

#endif

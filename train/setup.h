/* Glue shared by `train`, `eval` and `bench`: turning a config into the pieces of nn/, data/
 * and dist/ (datasets with class names, optimizer, LR at a step, checkpoints, the ranks). */
#ifndef DT_TRAIN_SETUP_H
#define DT_TRAIN_SETUP_H

#include <stdbool.h>

#include "train/config.h"
#include "train/plan.h"
#include "data/batch.h"
#include "data/dataset.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "nn/schedule.h"

struct dt_optim;
struct dt_ckpt_writer;

/* What a checkpoint records about where the run stands. */
struct dt_early_stop;

struct dt_run_resume {
    long long step, epoch;
    double best_accuracy, test_accuracy, test_loss;
    const char *class_names; /* JSON array of the training set's class names, or NULL */
    /* The score of the epoch best.safetensors holds (train/best.h), so a resumed run does not
     * replace it with a worse epoch: has_best, on validation accuracy or on training loss. */
    bool has_best, best_on_val;
    double best_score;
    /* Early stopping's state (train/early_stop.h): saved from it, and loaded into it when the
     * checkpoint's metric is the run's; NULL = none. */
    struct dt_early_stop *early_stop;
    long long best_epoch, best_step; /* where that epoch is (epoch from 1; 0: not recorded) */
    /* The running sums of the epoch the step is in (loss sum, correct, samples; the whole
     * job's), so a run resumed inside an epoch reports that whole epoch's train figures. */
    bool has_epoch_sums;
    double epoch_sums[3];
};

/* The dataset's class names as a JSON array (malloc'd; NULL when out of memory): what a
 * checkpoint stores so `predict` can name classes without the training data. */
char *dt_run_class_names_json(const struct dt_dataset *d);

/* The batcher's options from data.mean, data.std, data.hflip, data.crop_padding, train.seed:
 * what training uses and the dry run checks (dt_batcher_init refuses a crop_padding not below
 * the image size). */
struct dt_batch_opts dt_run_batch_opts(const struct dt_config *cfg);

/* The model and loss the config describes, for inputs of shape `in` and batches of up to
 * max_batch. classes > 0: DT_EUSAGE when the last layer has fewer outputs. Errors start
 * "CONFIG: model". */
/* --verbose: one line per conv2d and linear of a bf16 model naming the path its products
 * take (dt_layer_summary.precision); nothing for an fp32 model. */
void dt_run_log_precision(const struct dt_model *m);

int dt_run_build_model(const struct dt_config *cfg, struct dt_shape in, int max_batch, int classes,
                       struct dt_model **out);
/* The same with the parameters built straight into caller-owned storage of `capacity` floats
 * (dt_model_build_in: the ranks of one host share one copy), and a bf16 model's weight copies
 * into `copies` (copy_capacity bytes, 64-byte aligned; dt_model_options.copy_storage); NULL =
 * the model's own. */
int dt_run_build_model_in(const struct dt_config *cfg, struct dt_shape in, int max_batch,
                          int classes, float *params, size_t capacity, void *copies,
                          size_t copy_capacity, struct dt_model **out);

/* What a run takes in this process's memory (its ranks, their models at the real per-rank
 * batch, the optimizer state, the input batches), worked out before anything batch-sized is
 * allocated, and what the machine has available for it. */
struct dt_run_memory {
    int batch;                    /* samples each rank's model is built for */
    int ranks;                    /* ranks this process runs (forked ranks on this host) */
    double parameters;            /* the model's parameter count */
    struct dt_model_memory model; /* one rank's model */
    double optimizer;             /* optimizer state, each rank's or the one shared copy */
    double batches;               /* one rank's input and label buffers (training, evaluation) */
    double total;                 /* all of it, for every rank */
    double available;             /* bytes available; 0 = unknown (no check) */
    char available_from[96];      /* where `available` came from */
};

/* Works out `out` for a run of cfg on the job plan with training data of `train`'s shape.
 * Fails as the model build would when the layers do not fit the input. */
int dt_run_memory(const struct dt_config *cfg, const struct dt_job_plan *plan,
                  const struct dt_dataset *train, struct dt_run_memory *out);
/* DT_EUSAGE ("CONFIG: model needs X GiB at batch B ...: more than the Y GiB available (...)")
 * when the run does not fit: the config asks for more than the machine has. */
int dt_run_check_memory(const struct dt_config *cfg, const struct dt_run_memory *mem);
/* Memory available to this process in bytes: MemAvailable from /proc/meminfo, or less when a
 * cgroup (v2 memory.max, v1 memory.limit_in_bytes) leaves less room; 0 when neither can be
 * read. `from` (may be NULL) names the source. */
double dt_run_memory_available(char *from, size_t size);
/* One line of /proc/self/cgroup: true when it is the v2 hierarchy's ("0::PATH"), or with
 * v2 false a v1 hierarchy that has the memory controller ("4:memory:PATH"); out gets PATH,
 * "" for the root. */
bool dt_cgroup_memory_path(const char *line, bool v2, char *out, size_t size);

/* eval and predict without --data, from another directory: when cfg's data.dir (as the
 * checkpoint stored it, perhaps relative) is not there, the absolute path the checkpoint
 * recorded, or the registry dataset under $DTRAIN_DATA. Leaves cfg alone when neither is. */
void dt_run_locate_data(struct dt_config *cfg, const char *checkpoint);

/* The test split alone (eval): no training data needed. */
int dt_run_load_test(const struct dt_config *cfg, struct dt_dataset *test);

/* One split alone (eval --split): test as dt_run_load_test; train or val through
 * dt_run_load_data (val: the folder's val/ or data.val_fraction), DT_EDATA when the config
 * makes no val split. */
int dt_run_load_split(const struct dt_config *cfg, enum dt_split split, struct dt_dataset *out);

/* Loads the config's datasets from data.dir and fills class names from the registry. */
int dt_run_load_data(const struct dt_config *cfg, struct dt_data *data);
/* storage: NULL, or zeroed memory for the optimizer's state arrays (see dt_optim_create_in). */
int dt_run_make_optimizer(struct dt_optim **out, const struct dt_config *cfg, size_t nparams,
                          float *storage);
/* The optimizer the config describes (nn/optim's settings, type defaults under the keys). */
void dt_run_optim_config(const struct dt_config *cfg, struct dt_optim_config *oc);
/* The run's learning-rate schedule, made once: optimizer.schedule, its warmup_epochs counted
 * in this job's steps per epoch. DT_EUSAGE naming the config when it is not valid. */
int dt_run_schedule(const struct dt_config *cfg, long long steps_per_epoch,
                    struct dt_schedule *out);
/* Learning rate at a global step (pure function: resume reproduces it exactly). */
float dt_run_lr(const struct dt_schedule *s, long long step, long long steps_per_epoch,
                long long total_steps);
/* Queues last.safetensors (when `last`) and best.safetensors (when `best`) under dir (the
 * run's checkpoint directory, dt_run_dir_choose's) on w, which writes each atomically from its
 * thread (the tensors are copied before this returns, so training may go on). */
int dt_run_save_checkpoints(const struct dt_config *cfg, const char *dir, const struct dt_model *m,
                            const struct dt_optim *o, const struct dt_run_resume *meta, bool last,
                            bool best, struct dt_ckpt_writer *w);
/* Loads weights (and optimizer state when o != NULL) and the run position. */
int dt_run_load_checkpoint(const char *path, struct dt_model *m, struct dt_optim *o,
                           struct dt_run_resume *meta);

/* Before a resume reads any data: path is a whole safetensors file whose run step and
 * optimizer step agree (every training step is one optimizer step); DT_EDATA naming the file
 * and both numbers otherwise. The rank's load checks the optimizer.step tensor itself too. */
int dt_run_check_resume(const char *path);

/* The config text stored in a checkpoint's metadata (malloc'd). DT_EDATA when absent. */
int dt_run_checkpoint_config(const char *path, char **text);

/* The config of `eval` and `predict`: config_file when given, else the one the checkpoint
 * stores; then the overrides, in order. */
int dt_run_config_for_checkpoint(struct dt_config *cfg, const char *checkpoint,
                                 const char *config_file, const char *const *overrides, int n);

/* Threads per process: dist.threads, or when it is 0 ("auto") the usable CPUs divided among
 * `processes` (eval: 1; train's job plan passes the ranks on this host). */
int dt_run_threads(const struct dt_config *cfg, int processes);

#endif

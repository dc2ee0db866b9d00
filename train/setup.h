/* Glue shared by `train`, `eval` and `bench`: turning a config into the pieces of nn/, data/
 * and dist/ (datasets with class names, optimizer, LR at a step, checkpoints, the ranks). */
#ifndef DT_TRAIN_SETUP_H
#define DT_TRAIN_SETUP_H

#include <stdbool.h>

#include "train/config.h"
#include "data/dataset.h"
#include "nn/model.h"

struct dt_optim;
struct dt_ckpt_writer;

/* What a checkpoint records about where the run stands. */
struct dt_run_resume {
    long long step, epoch;
    double best_accuracy, test_accuracy, test_loss;
    const char *class_names; /* JSON array of the training set's class names, or NULL */
    /* The score of the epoch best.safetensors holds (train/best.h), so a resumed run does not
     * replace it with a worse epoch: has_best, on validation accuracy or on training loss. */
    bool has_best, best_on_val;
    double best_score;
};

/* The dataset's class names as a JSON array (malloc'd; NULL when out of memory): what a
 * checkpoint stores so `predict` can name classes without the training data. */
char *dt_run_class_names_json(const struct dt_dataset *d);

/* The model and loss the config describes, for inputs of shape `in` and batches of up to
 * max_batch. classes > 0: DT_EUSAGE when the last layer has fewer outputs. Errors start
 * "CONFIG: model". */
int dt_run_build_model(const struct dt_config *cfg, struct dt_shape in, int max_batch, int classes,
                       struct dt_model **out);

/* eval and predict without --data, from another directory: when cfg's data.dir (as the
 * checkpoint stored it, perhaps relative) is not there, the absolute path the checkpoint
 * recorded, or the registry dataset under $DTRAIN_DATA. Leaves cfg alone when neither is. */
void dt_run_locate_data(struct dt_config *cfg, const char *checkpoint);

/* The test split alone (eval): no training data needed. */
int dt_run_load_test(const struct dt_config *cfg, struct dt_dataset *test);

/* Loads the config's datasets from data.dir and fills class names from the registry. */
int dt_run_load_data(const struct dt_config *cfg, struct dt_data *data);
/* storage: NULL, or zeroed memory for the optimizer's state arrays (see dt_optim_create_in). */
/* optimizer.weight_decay_skip: excludes m's biases and norm parameters from o's decay. */
int dt_run_skip_decay(const struct dt_config *cfg, const struct dt_model *m, struct dt_optim *o);
int dt_run_make_optimizer(struct dt_optim **out, const struct dt_config *cfg, size_t nparams,
                          float *storage);
/* Learning rate at a global step (pure function: resume reproduces it exactly). */
float dt_run_lr(const struct dt_config *cfg, long long step, long long steps_per_epoch,
                long long total_steps);
/* Queues last.safetensors (when `last`) and best.safetensors (when `best`) under
 * checkpoint.dir on w, which writes each atomically from its thread (the tensors are copied
 * before this returns, so training may go on). */
int dt_run_save_checkpoints(const struct dt_config *cfg, const struct dt_model *m,
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

/* data.mean = "auto" / data.std = "auto": the training split's per-channel statistics,
 * computed once by the parent from the decoded images (before any augmentation, so the same
 * for any instance count) and then used like values written in the config.
 *
 * A run resolves them into a copy of its config; checkpoints store the normalization they
 * were trained with (metadata data_mean, data_std), and eval and predict resolve "auto" from
 * there, without the training data.
 */
#ifndef DT_TRAIN_NORM_STATS_H
#define DT_TRAIN_NORM_STATS_H

#include <stdbool.h>

#include "train/config.h"
#include "data/dataset.h"
#include "nn/checkpoint.h"

/* data.mean or data.std is "auto". */
bool dt_run_stats_auto(const struct dt_config *cfg);

/* When cfg has "auto": *resolved is a malloc'd copy of cfg (sharing cfg->text, free it with
 * free()) whose mean/std hold train's statistics, and the values are logged in one line.
 * Otherwise *resolved = NULL. DT_EDATA when std = "auto" finds a constant channel. */
int dt_run_stats_resolve(const struct dt_config *cfg, const struct dt_dataset *train,
                         struct dt_config **resolved);

/* The values as a JSON array of n numbers (malloc'd; NULL when out of memory). */
char *dt_run_stats_json(const float *v, int n);

/* Adds data_mean and data_std (when the config has them) to a checkpoint's metadata. */
int dt_run_stats_to_meta(const struct dt_config *cfg, struct dt_checkpoint_meta *meta);

/* eval and predict: fills an "auto" mean or std from the checkpoint's metadata. DT_EDATA
 * naming the checkpoint when it lacks them or they are not 1 to DT_MAX_CHANNELS numbers. */
int dt_run_stats_from_checkpoint(struct dt_config *cfg, const char *checkpoint);

#endif

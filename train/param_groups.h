/* The optimizer's parameter groups from the config: optimizer.weight_decay_skip (no decay for
 * biases and norms), optimizer.param_groups (lr scales by tensor name) and train.freeze (not
 * trained), resolved once per tensor against the model's names. */
#ifndef DT_TRAIN_PARAM_GROUPS_H
#define DT_TRAIN_PARAM_GROUPS_H

#include <stdbool.h>

#include "nn/model.h"
#include "nn/optim.h"
#include "train/config.h"

/* Parameter tensor t's group: lr scale from the last param_groups entry that matches it (1
 * when none), decay off for a 1-d tensor under bias_and_norm, frozen when train.freeze matches
 * it. A pattern matches the tensor's name or its layers.N name (train/finetune_config.h). */
struct dt_optim_group dt_run_tensor_group(const struct dt_config *cfg,
                                          const struct dt_tensor_info *t);

/* Every pattern of train.freeze and optimizer.param_groups matches at least one parameter of m:
 * DT_EUSAGE "CONFIG: KEY: \"P\" matches no parameter (...)" otherwise. Freezing everything is
 * refused too: nothing would train. */
int dt_run_check_groups(const struct dt_config *cfg, const struct dt_model *m);

/* Checks the patterns, then puts each of m's parameter tensors in its group on o. */
int dt_run_param_groups(const struct dt_config *cfg, const struct dt_model *m, struct dt_optim *o);

/* Parameters (in floats) that train.freeze stops. */
size_t dt_run_frozen_floats(const struct dt_config *cfg, const struct dt_model *m);

/* (A step zeroes the frozen tensors' gradients through the optimizer's groups, set here once:
 * dt_optim_zero_frozen_grads.) */

#endif

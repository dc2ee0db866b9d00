/* Fine-tuning's start: train.init_from names a checkpoint (a dtrain one, or a safetensors file
 * saved from PyTorch with the same state_dict names) whose tensors replace the model's initial
 * values where name and shape match. Each model tensor is then
 *   loaded   the file has it (by name, or by its layers.N name) with the same shape;
 *   skipped  the file has it with another shape or dtype (a new head): both shapes reported;
 *   new      the file does not have it: it keeps its initialisation from train.seed.
 * File tensors the model does not have (an old head, optimizer state) are counted as unused.
 * Optimizer state is never taken: fine-tuning starts a fresh optimizer. A --resume of a
 * fine-tuning run loads its own checkpoint instead and does not read init_from again.
 */
#ifndef DT_TRAIN_INIT_FROM_H
#define DT_TRAIN_INIT_FROM_H

#include <stdbool.h>

#include "nn/model.h"
#include "train/config.h"

struct dt_init_report {
    int loaded, skipped, fresh, unused; /* tensors, parameters and buffers together */
};

/* Applies cfg->train.init_from to m (nothing when it is ""). With `report`, logs what was
 * loaded, skipped and new. Errors, with m unchanged: DT_EDATA when the file cannot be read or
 * is not a safetensors file; DT_EUSAGE when no tensor of it matches the model. */
int dt_run_init_from(const struct dt_config *cfg, struct dt_model *m, bool report,
                     struct dt_init_report *out);

#endif

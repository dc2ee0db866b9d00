/* `dtrain train --dry-run` (see dry_run.c). */
#ifndef DT_TRAIN_DRY_RUN_H
#define DT_TRAIN_DRY_RUN_H

#include <stdbool.h>

#include "train/config.h"
#include "train/plan.h"

/* Validates cfg against the data and the plan and prints the summary (json: one object on
 * stdout). Touches no checkpoint and trains nothing. */
int dt_dry_run(const struct dt_config *cfg, const struct dt_job_plan *plan, bool json);

#endif

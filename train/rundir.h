/* A run's checkpoint directory, settled before any data is read: created and test-written (an
 * unwritable directory fails in a second, not after the first epoch), never another run's
 * checkpoints replaced by accident, temp files of a crashed write removed, and `--resume auto`
 * resolved to the newest complete checkpoint there. */
#ifndef DT_TRAIN_RUNDIR_H
#define DT_TRAIN_RUNDIR_H

#include <stdbool.h>
#include <stddef.h>

#include "train/config.h"

struct dt_run_dir_opts {
    bool resume;    /* the run continues the checkpoints in the directory */
    bool overwrite; /* --overwrite: replacing another run's checkpoints is intended */
};

/* For the process that writes checkpoints (global rank 0's). When checkpoint.dir holds
 * another run's last/best checkpoint and neither resume nor overwrite is set: a derived
 * runs/NAME moves on to the first free runs/NAME-2, -3, ... (cfg->checkpoint.dir is changed;
 * *moved set), a directory the config named is refused with DT_EUSAGE saying what to pass.
 * Then the directory is made and a probe file written and removed (DT_ERUNTIME naming the
 * directory and the system's reason), and stale "*.tmp.PID" files of dead writers removed
 * (*stale counts them). */
int dt_run_dir_claim(struct dt_config *cfg, const struct dt_run_dir_opts *o, bool *moved,
                     int *stale);

/* The dry run's check, with no side effect: the directory exists and is writable, or its
 * nearest existing parent is. DT_ERUNTIME as dt_run_dir_claim would fail. *holds: a run's
 * checkpoints are already there. */
int dt_run_dir_check(const struct dt_config *cfg, bool *holds);

/* --resume auto: DIR/last.safetensors when it exists (path filled, *found set), otherwise a
 * fresh start. */
void dt_run_dir_resume_auto(const struct dt_config *cfg, char *path, size_t size, bool *found);

#endif

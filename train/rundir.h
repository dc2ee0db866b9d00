/* A run's checkpoint directory. Chosen and checked before any data is read (an unwritable
 * directory fails in a second, not after the first epoch; another run's checkpoints are never
 * replaced by accident), created only once the data has loaded (a run that fails on its data
 * leaves no empty directory behind), temp files of dtrain's own crashed writes removed, and
 * `--resume auto` resolved to the newest checkpoint there. */
#ifndef DT_TRAIN_RUNDIR_H
#define DT_TRAIN_RUNDIR_H

#include <stdbool.h>
#include <stddef.h>

#include "train/config.h"

struct dt_run_dir_opts {
    bool resume;    /* the run continues the checkpoints in the directory */
    bool overwrite; /* --overwrite: replacing another run's checkpoints is intended */
};

/* For the process that writes checkpoints (global rank 0's), with no side effect: the
 * directory the run writes to, into out (the config stays as loaded). checkpoint.dir, unless
 * it holds another run's last/best checkpoint and neither resume nor overwrite is set: then a
 * derived runs/NAME moves on to the first free runs/NAME-2, -3, ... (*moved set), a directory
 * the config named is refused with DT_EUSAGE saying what to pass. Then the directory, or its
 * nearest existing parent, must be writable (DT_ERUNTIME as dt_run_dir_check). */
int dt_run_dir_choose(const struct dt_config *cfg, const struct dt_run_dir_opts *o, char *out,
                      size_t size, bool *moved);

/* After the data has loaded: makes the chosen directory, writes and removes a probe file
 * (DT_ERUNTIME naming the directory and the system's reason), then dt_run_dir_sweep
 * (*stale counts the files it removed). made: the outermost directory this call created, ""
 * when the directory was there already. */
int dt_run_dir_create(const char *dir, int *stale, char *made, size_t made_size);

/* A run that failed before writing anything: removes dir and its parents up to `made` (from
 * dt_run_dir_create) while they are empty, so no empty run directory is left behind. */
void dt_run_dir_remove_if_empty(const char *dir, const char *made);

/* last.safetensors or best.safetensors is in dir. */
bool dt_run_dir_holds_checkpoints(const char *dir);

/* The dry run's check, with no side effect: the directory exists and is writable, or its
 * nearest existing parent is. *holds: a run's checkpoints are already there. */
int dt_run_dir_check(const struct dt_config *cfg, bool *holds);

/* --resume auto: which checkpoint of checkpoint.dir a run continues from (path filled for
 * LAST and BEST). last.safetensors when it exists; otherwise best.safetensors when that does
 * (an earlier step: the steps after it are trained again, on the same trajectory); otherwise
 * a fresh start. */
enum dt_resume_auto { DT_RESUME_FRESH, DT_RESUME_LAST, DT_RESUME_BEST };
enum dt_resume_auto dt_run_dir_resume_auto(const struct dt_config *cfg, char *path, size_t size);

/* The temp file this process writes `path` under before renaming it into place:
 * "DIR/.BASE.tmp.HOST.PID.START", HOST this machine's name (characters other than letters,
 * digits, '-' and '_' as '_'), PID this process and START its start time (clock ticks after
 * boot, /proc/PID/stat), so a sweep can tell a write in progress from a dead one on any host
 * that shares the directory, and a reused PID from the writer. */
int dt_run_dir_temp_path(const char *path, char *tmp, size_t size);

/* Removes from dir the temp files of dtrain checkpoint writes that will never finish, and
 * nothing else: a name of dt_run_dir_temp_path's form, content that starts like a dtrain
 * safetensors file (or is shorter than that start), no process holding its lock (the writer
 * flock()s it for the whole write; the lock dies with the process), and when HOST is this
 * machine no live process PID started at START either. A file of another host whose lock
 * cannot be tested (a filesystem without flock) is kept. Returns how many were removed. */
int dt_run_dir_sweep(const char *dir);

#endif

/* The shape probe behind `train --instances auto` / `--threads auto`: how fast this config
 * trains at each instances x threads shape, measured on the datasets the run has already
 * loaded, before the run's own ranks start.
 *
 * Each shape is a short job of the run's own ranks (train/ranks.c: pinning, shm segment, shared
 * weights, forked even for one rank) executing the run's own set-up and training step
 * (train/loop.c), on the parent's data pages, which the ranks share copy-on-write: no process
 * start, no second read or decode of the data. So this process starts no thread, and the
 * run's fork after the probe is as safe as without it. After `warmup` steps, rank 0 times the
 * last warm-up step and sets the timed steps to fill about `seconds` (at least min_steps, at
 * most max_steps), the same count on every rank. Samples per second are then the job's
 * samples over rank 0's wall time of the timed steps, which end in an all-reduce every rank
 * must reach: the job's speed.
 *
 * Nothing is written: no run directory, checkpoint, event or trace. Log lines of the probe's
 * ranks are held back unless --verbose; a rank's error is its row's error.
 */
#ifndef DT_TRAIN_PROBE_H
#define DT_TRAIN_PROBE_H

#include <stdbool.h>

#include "train/config.h"
#include "train/plan.h"
#include "data/dataset.h"

struct dt_probe_opts {
    int warmup;     /* untimed steps first (the first touches every buffer) */
    double seconds; /* timed steps: about this long, */
    int min_steps;  /* but at least this many */
    int max_steps;  /* and at most this many */
};

struct dt_probe_row {
    int instances, threads;
    bool ok;
    char error[400]; /* why the shape could not run (!ok) */
    double samples_s, step_s;
    int steps; /* timed steps it ran */
};

/* Probes rows[i].instances x rows[i].threads for i < n, in order, with cfg's other settings and
 * job's flags; *done says how many ran. A shape that cannot run (its plan, its memory, a rank
 * failing) is a row with ok false and the reason; the probe goes on. Returns 0, or
 * -DT_EINTR / -DT_ETERM when SIGINT / SIGTERM stopped it (the rows done are kept). */
int dt_probe_shapes(const struct dt_config *cfg, const struct dt_job_opts *job,
                    const struct dt_data *data, const struct dt_probe_opts *o,
                    struct dt_probe_row *rows, int n, int *done);

#endif

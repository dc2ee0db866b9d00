/* `train --instances auto` / `--threads auto`: the instances x threads shape that trains this
 * config fastest on this machine, found by a short probe before training starts and cached.
 *
 * The probe (train/probe.h) runs on the run's own datasets, loaded here once and handed to the
 * run (struct dt_auto_shape's data): each candidate shape is a short job of the run's ranks,
 * forked from this process, for AUTO_WARMUP warm-up steps and then timed steps for about
 * AUTO_SECONDS (AUTO_MIN_STEPS to AUTO_MAX_STEPS); the shape with the most samples/s wins.
 * The ranks do all the work, so this process starts no thread before it forks the run's ranks
 * (dist/launcher.c refuses to fork with threads alive).
 *
 * Candidates divide the usable CPUs (dt_cpu_usable, or --cores): both auto, every I x T with
 * I x T = C (the shapes `dtrain bench` sweeps); instances auto with T threads, I = 1, 2, 4, ...
 * and C / T; threads auto with I instances, T = 1, 2, 4, ... and C / I.
 *
 * The result is cached in $XDG_CACHE_HOME/dtrain (else ~/.cache/dtrain) as
 * shape-<hash>.json, keyed on everything that decides the speed and nothing else: the model
 * section, optimizer type, batch size and semantics, the data's shape (dataset, format,
 * channels, size; a folder's path), the dist keys that change the work (backend, batchnorm,
 * split_invariant, grad_dtype, pin, cpu_list), which of instances / threads was fixed, and the
 * machine (CPU model, usable CPU set, DTRAIN_ISA, dtrain version). The file holds the key in full;
 * a file whose key differs is not used. A cached choice needs no data before the run loads it.
 */
#ifndef DT_CMD_AUTO_SHAPE_H
#define DT_CMD_AUTO_SHAPE_H

#include <stdbool.h>

#include "train/config.h"
#include "train/plan.h"
#include "data/dataset.h"

#define AUTO_WARMUP    2    /* steps each shape makes before the clock starts */
#define AUTO_SECONDS   0.05 /* then timed steps for about this long, */
#define AUTO_MIN_STEPS 4    /* but at least this many (a slow model's few steps still */
#define AUTO_MAX_STEPS 200  /* average out its step-to-step jitter), at most this many */

struct dt_auto_shape_opts {
    const struct dt_job_opts *job; /* the run's job flags (--verbose), for the probe's ranks */
    bool auto_instances, auto_threads;
    int cores;  /* CPUs to divide; 0 = dt_cpu_usable() */
    bool again; /* --probe-again: measure even when the cache has the answer */
    bool quiet;
};

struct dt_auto_shape {
    int instances, threads;
    bool cached;
    char *json;  /* what probe.json in the run directory holds, and the `probe` event the run
                    emits through its history before the start event (malloc'd) */
    bool loaded; /* data holds the datasets the probe loaded: the run takes them */
    struct dt_data data;
};

/* Picks the shape (probing or from the cache) and says so on stderr (the table); out->json is
 * the `probe` event (train/loop.c emits it as the run's first). A probe loads the datasets
 * first (out->loaded, out->data: the caller hands them to the run or frees them, on every
 * path); their errors are the run's (DT_EDATA). DT_EUSAGE when no candidate fits, DT_ERUNTIME
 * when every shape failed (the first failure named), DT_EINTR/DT_ETERM when stopped. */
int dt_auto_shape_choose(const struct dt_config *cfg, const struct dt_auto_shape_opts *o,
                         struct dt_auto_shape *out);

#endif

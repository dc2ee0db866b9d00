/* `train --instances auto` / `--threads auto`: the instances x threads shape that trains this
 * config fastest on this machine, found by a short probe before training starts and cached.
 *
 * The probe is bench's sweep (cmd/bench/sweep.c) in steps mode: each candidate shape runs as a
 * child `dtrain train` for AUTO_WARMUP warm-up and AUTO_STEPS timed steps, and the shape with
 * the most samples/s wins. Child processes do all the work, so this process starts no thread
 * before it forks the ranks (dist/launcher.c refuses to fork with threads alive).
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
 * a file whose key differs is not used.
 */
#ifndef DT_CMD_AUTO_SHAPE_H
#define DT_CMD_AUTO_SHAPE_H

#include <stdbool.h>

#include "train/config.h"

#define AUTO_WARMUP 2 /* steps each probe run makes before the clock starts */
#define AUTO_STEPS  8 /* timed steps per probe run */

struct dt_auto_shape_opts {
    const char *config;
    char **sets; /* the run's --set options (flags included), passed to every probe run */
    int nsets;
    bool auto_instances, auto_threads;
    int cores;  /* CPUs to divide; 0 = dt_cpu_usable() */
    bool again; /* --probe-again: measure even when the cache has the answer */
    bool quiet;
};

struct dt_auto_shape {
    int instances, threads;
    bool cached;
    char *json; /* what probe.json in the run directory holds, and the `probe` event the run
                   emits through its history before the start event (malloc'd) */
};

/* Picks the shape (probing or from the cache) and says so on stderr (the table); out->json is
 * the `probe` event (train/loop.c emits it as the run's first). DT_EUSAGE when no candidate fits,
 * DT_ERUNTIME when every probe run failed (the first failure named), DT_EINTR/DT_ETERM when
 * stopped. */
int dt_auto_shape_choose(const struct dt_config *cfg, const struct dt_auto_shape_opts *o,
                         struct dt_auto_shape *out);

#endif

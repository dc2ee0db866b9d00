/* Starting the ranks of a job plan (train/plan.h): pinning, the backend's parent-side
 * resources, forking and supervising the ranks (dist/launcher), and in each rank the thread
 * count and the communicator it joins, around the caller's rank_main. The shm segment and
 * sockets made before the fork are released by this process on every path. */
#ifndef DT_TRAIN_RANKS_H
#define DT_TRAIN_RANKS_H

#include "dist/comm.h"
#include "train/config.h"
#include "train/plan.h"

/* Runs rank_main once per rank of this process's share of the job and returns the job's
 * status: 0, or the first failure (a rank's error, "rank R was killed by SIGKILL", a lost
 * peer), DT_EINTR/DT_ETERM when stopped by a signal. */
int dt_run_ranks(const struct dt_config *cfg, const struct dt_job_plan *plan,
                 const struct dt_job_opts *o, int (*rank_main)(struct dt_comm *comm, void *arg),
                 void *arg);

/* The same, with a job of one rank forked too (as a child under the launcher's watch, on the
 * trivial communicator) instead of run in this process: the shape probe (train/probe.h) runs
 * one job after another from a parent that must stay free of threads for the run's own fork.
 * Not for a plan whose ranks an outside launcher started (DT_EUSAGE). */
int dt_run_ranks_forked(const struct dt_config *cfg, const struct dt_job_plan *plan,
                        const struct dt_job_opts *o,
                        int (*rank_main)(struct dt_comm *comm, void *arg), void *arg);

#endif

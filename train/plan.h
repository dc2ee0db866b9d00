/* The job plan: a config's `dist` section and the launch environment (flags, mpirun, Slurm,
 * torchrun variables) turned, once, into the facts every later step reads: how many ranks, how
 * many of them this process runs, on how many threads, joined by which backend, and how many
 * steps an epoch has. `train`, its dry run and the rank launcher all read the same plan.
 *
 *   one host, one instance       the rank runs in this process, the trivial communicator
 *   one host, N instances        N forked ranks over one shm segment
 *   M hosts, dtrain per host     (--nodes/--node-rank/--master, NNODES/NODE_RANK) N forked ranks
 *                                per host; global rank = node * N + local rank; backend hier
 *                                (shm inside the host, TCP between host leaders) or tcp
 *   a rank per process           (mpirun, srun, torchrun RANK/WORLD_SIZE) no fork; pinned by
 *                                local rank; backend tcp or mpi
 */
#ifndef DT_TRAIN_PLAN_H
#define DT_TRAIN_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "dist/backend.h"
#include "dist/launch_env.h"
#include "train/config.h"

/* What the command line adds to the config for a job. */
struct dt_job_opts {
    bool verbose;                  /* print each rank's cores */
    struct dt_launch_flags launch; /* --nodes, --node-rank, --master */
    const char *iface;             /* --iface, else DTRAIN_SOCKET_IFNAME */
    const char *token_file;        /* --token-file, else DTRAIN_TOKEN */
    double rendezvous_timeout;     /* seconds; 0 = default (120) */
};

void dt_job_opts_init(struct dt_job_opts *o);

/* The job: made once from the config and the command line, read by everything after (the dry
 * run, the ranks, their loop), never written back into the config. `job` is at once the
 * job's shape and the backend's description of it (dist/backend.h): dt_run_ranks prepares a
 * copy of it for each start of the ranks, nothing is copied field by field. */
struct dt_job_plan {
    struct dt_launch_env env;
    /* job.per_rank: an outside launcher started every rank, this process is one, no fork;
     * job.world: ranks in the job; job.local_n: ranks this process runs; job.host_ranks:
     * ranks on this host (pinning divides the host among them); job.rank_base: the global
     * rank of this process's local rank 0; job.backend: the transport */
    struct dt_backend_job job;
    int threads; /* per rank: dist.threads, or the usable CPUs / host_ranks when 0 */
};

/* DT_EUSAGE naming the flag, variable or key when they do not fit together. */
int dt_job_plan_make(struct dt_job_plan *p, const struct dt_config *cfg,
                     const struct dt_job_opts *o);

/* Every rank is forked from this process and talks through one shm segment: memory mapped
 * MAP_SHARED before the ranks start is then seen by all of them. */
bool dt_job_plan_shares_memory(const struct dt_job_plan *p);

/* An epoch of `train_samples` as the job's sampler cuts it: steps, the global batch and the
 * most samples one rank takes in a step. */
struct dt_job_steps {
    long long steps_per_epoch;
    int global_batch, rank_batch;
};
int dt_job_plan_steps(const struct dt_job_plan *p, const struct dt_config *cfg,
                      size_t train_samples, struct dt_job_steps *out);

#endif

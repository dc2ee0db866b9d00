/* Turning a config's `dist` section and the launch environment into a running job: which
 * ranks this process runs, where they are pinned, which communicator joins them.
 *
 *   one host, one instance       rank_main in this process, the trivial communicator
 *   one host, N instances        N forked ranks (dist/launcher) over one shm segment
 *   M hosts, dtrain per host     (--nodes/--node-rank/--master, NNODES/NODE_RANK) N forked ranks
 *                                per host; global rank = node * N + local rank; backend hier
 *                                (shm inside the host, TCP between host leaders) or tcp
 *   a rank per process           (mpirun, srun, torchrun RANK/WORLD_SIZE) no fork; pinned by
 *                                local rank; backend tcp or mpi
 * The shm segment is created before the fork and destroyed by this process on every path.
 */
#ifndef DT_TRAIN_RANKS_H
#define DT_TRAIN_RANKS_H

#include <stdbool.h>

#include "train/config.h"
#include "dist/comm.h"
#include "dist/launch_env.h"

struct dt_job_opts {
    bool verbose;                  /* print each rank's cores */
    struct dt_launch_flags launch; /* --nodes, --node-rank, --master */
    const char *iface;             /* --iface, else DTRAIN_SOCKET_IFNAME */
    const char *token_file;        /* --token-file, else DTRAIN_TOKEN */
    double rendezvous_timeout;     /* seconds; 0 = default (120) */
};

void dt_job_opts_init(struct dt_job_opts *o);

/* Instances that will run on this host and the threads each gets (dist.threads, or the
 * usable CPUs divided among the local ranks when it is 0). For messages and dry runs. */
int dt_job_local_shape(const struct dt_config *cfg, const struct dt_job_opts *o, int *instances,
                       int *threads);

/* True when every rank of the job is forked from this process and talks through one shm
 * segment: memory mapped MAP_SHARED before dt_run_ranks() is then seen by all of them. */
bool dt_job_shares_memory(const struct dt_config *cfg, const struct dt_job_opts *o);

/* Runs rank_main once per rank of this process's share of the job and returns the job's
 * status: 0, or the first failure (a rank's error, "rank R was killed by SIGKILL", a lost
 * peer), DT_EINTR/DT_ETERM when stopped by a signal. */
int dt_run_ranks(const struct dt_config *cfg, const struct dt_job_opts *o,
                 int (*rank_main)(struct dt_comm *comm, void *arg), void *arg);

#endif

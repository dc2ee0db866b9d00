/* Who am I in a multi-host job? Reads it from the command line or from the environment that
 * mpirun, srun or a torchrun-style wrapper left us.
 *
 * Sources, highest precedence first (the first that is present decides the identity; a field
 * given on the command line always wins over the environment):
 *   1. flags    --nodes M --node-rank K --master HOST:PORT
 *   2. ompi     OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK / _LOCAL_SIZE   (mpirun)
 *   3. slurm    SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID, SLURM_NNODES, and the
 *               master from the first host of SLURM_JOB_NODELIST              (srun)
 *   4. torchrun RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE (one process per rank) or
 *               NNODES / NODE_RANK (one dtrain per host), MASTER_ADDR / MASTER_PORT
 * With flags.instances N > 1 (this dtrain forks N ranks) a launcher from 2-4 must have started
 * one process per host (local size 1; a Kubernetes PyTorchJob sets RANK / WORLD_SIZE per pod
 * and no LOCAL_*): its rank and size then count hosts, as NODE_RANK / NNODES do, and the job is
 * a per-node one of size x N ranks. Several processes per host with N > 1: DT_EUSAGE.
 * The master address comes from --master, else MASTER_ADDR/MASTER_PORT, else (Slurm) the first
 * node of the allocation with port 29500 + SLURM_JOB_ID % 1000 (distinct jobs sharing a node
 * rarely collide), else 127.0.0.1 for a one-host job.
 *
 * Two shapes of job result: "per rank" (the outside launcher started every rank: rank, size,
 * local_rank, local_size are set) and "per node" (it started one dtrain per host, which forks
 * its local ranks: rank etc. are -1 and only nodes/node_rank are known).
 */
#ifndef DT_DIST_LAUNCH_ENV_H
#define DT_DIST_LAUNCH_ENV_H

#include <stdbool.h>

#define DT_LAUNCH_HOST_MAX     255
#define DT_LAUNCH_DEFAULT_PORT 29500

struct dt_launch_flags {
    int nodes, node_rank; /* -1 when not given */
    const char *master;   /* "HOST:PORT", "[V6ADDR]:PORT", or NULL */
    bool no_master;       /* the job needs no rendezvous (MPI's own launcher connects it) */
    int instances;        /* ranks this dtrain forks (dist.instances; 1 by default): > 1 makes
                           * a launcher's ranks count hosts (see above) */
};

struct dt_launch_env {
    const char *source;   /* "flags", "ompi", "slurm", "torchrun" or "none" */
    int nodes, node_rank; /* hosts in the job, this host's index */
    int rank, size;       /* per-rank launch; -1 in a per-node launch */
    int local_rank, local_size;
    char master_host[DT_LAUNCH_HOST_MAX + 1];
    int master_port;
    /* Every rank of a per-rank launch (mpirun, srun) on this one host and no master given: the
     * ranks meet on loopback through a file named after the launcher's job id ("ompi-<ns>",
     * "slurm-<job>.<step>"), so no variable and no token is needed (dist/backend.h). */
    char local_key[128];
};

void dt_launch_flags_init(struct dt_launch_flags *f);

/* envp: NULL-terminated "NAME=value" strings, or NULL for the process environment. DT_EUSAGE
 * naming the variable or flag for anything malformed or inconsistent. */
int dt_launch_env_detect(struct dt_launch_env *out, const struct dt_launch_flags *flags,
                         char *const *envp);

/* "host:port", "[v6]:port" -> host and port (1..65535). DT_EUSAGE naming `what`. */
int dt_launch_parse_hostport(const char *s, char *host, int *port, const char *what);

/* First host name of a Slurm hostlist: "node[01-04,07],gpu3" -> "node01". DT_EUSAGE on a
 * malformed list. */
int dt_launch_slurm_first_host(const char *list, char *out, int cap);

#endif

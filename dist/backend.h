/* The transports behind struct dt_comm, as one table: their names, the automatic choice, the
 * resources a parent sets up before it forks its ranks, and a rank's join. `train` and `bench
 * allreduce` both go through here, so the two cannot drift apart (the socket variables, the
 * rendezvous timeout, the token and the loopback master are decided once).
 *
 *   single  one rank: every collective is a no-op
 *   shm     ranks forked from one process, one POSIX shared-memory segment
 *   tcp     a ring of sockets; rank 0 runs the rendezvous
 *   hier    shm inside each host, a tcp ring between one leader per host
 *   mpi     MPI_Allreduce, every process of an mpirun is a rank
 *
 * Knows nothing of configs or the command line: callers fill struct dt_backend_job.
 */
#ifndef DT_DIST_BACKEND_H
#define DT_DIST_BACKEND_H

#include <stdbool.h>

#include "dist/auth.h"
#include "dist/comm.h"
#include "dist/launch_env.h"
#include "util/names.h"

enum dt_backend {
    DT_BACKEND_SINGLE,
    DT_BACKEND_SHM,
    DT_BACKEND_TCP,
    DT_BACKEND_HIER,
    DT_BACKEND_MPI
};

/* What a job asks for (dist.backend): auto or a backend by name. Never single, which a
 * one-rank job gets whatever it asks. */
enum dt_backend_request {
    DT_BACKEND_REQUEST_AUTO,
    DT_BACKEND_REQUEST_SHM,
    DT_BACKEND_REQUEST_TCP,
    DT_BACKEND_REQUEST_HIER,
    DT_BACKEND_REQUEST_MPI
};
#define DT_BACKEND_REQUEST_COUNT (DT_BACKEND_REQUEST_MPI + 1)
/* "auto", "shm", "tcp", "hier", "mpi" */
extern const struct dt_names dt_backend_request_names;

#define DT_BACKEND_MAX_GROUPS 1024

const char *dt_backend_name(enum dt_backend b);
/* A backend by its name ("auto" is not one); DT_EUSAGE listing the names otherwise. */
int dt_backend_parse(const char *name, enum dt_backend *out);

struct dt_backend_job;

/* Sets j->backend from the request and the job's shape (world, nodes, per_rank, launcher).
 * auto: single for one rank, shm on one host, tcp for ranks started one per process, hier
 * across hosts. DT_EUSAGE with a one-line reason when the request does not fit the shape. A
 * one-rank job always runs single (except mpi). */
int dt_backend_choose(enum dt_backend_request request, struct dt_backend_job *j);

/* The environment's say: DTRAIN_SOCKET_BUFFER (bytes, at most 1G; 0 when unset) and
 * DTRAIN_SOCKET_IFNAME (NULL when unset). DT_EUSAGE for a malformed size. */
int dt_backend_env(int *sockbuf, const char **iface);

/* One process's share of a job and the resources its ranks inherit. Fill the fields above
 * `prepared` (dt_backend_job_init first; they are the job's description, train's job plan
 * holds one), call dt_backend_prepare in the parent, then dt_backend_join in each rank
 * (forked or this process), dt_backend_release in the parent. */
struct dt_backend_job {
    enum dt_backend backend;
    const char *launcher; /* who started the ranks: "flags", "ompi", "slurm", ... (messages,
                             the mpi check); NULL = "flags" */
    int world;            /* ranks in the job */
    int rank_base;        /* global rank of this process's local rank 0 */
    int local_n;          /* ranks this process runs (forks) */
    int host_ranks;       /* ranks on this host */
    bool per_rank;        /* this process is one rank of an outside launch */
    int local_rank;       /* per_rank: this process's rank within the host */
    /* Hosts: `nodes` in the job; this process stands for `groups` consecutive ones from
     * node_base (1 for a real host; bench allreduce simulates several on one machine), each
     * of local_n / groups ranks with its own shm segment. */
    int nodes, node_base, groups;
    const char *master_host; /* rank 0's rendezvous host; NULL = 127.0.0.1 (one machine) */
    int master_port;         /* 0 = pick a free loopback port before the fork */
    const char *iface;       /* NULL = DTRAIN_SOCKET_IFNAME */
    const char *token_file;  /* NULL = DTRAIN_TOKEN, or a generated token on one machine */
    double timeout;          /* collective timeout, seconds (0 = the transport's default) */
    double rendezvous_timeout;
    bool oversubscribed; /* more threads than CPUs here: wait in poll(), never spin */
    /* A per-rank launch on one host with no master (dist/launch_env.h's local_key): rank 0
     * binds a loopback port and publishes it with a fresh token in a file only this user can
     * read, named after the key; the other ranks wait for that file. NULL otherwise. */
    const char *local_key;

    /* Set by dt_backend_prepare. */
    bool prepared;
    int sockbuf;
    struct dt_auth_token token;
    int master_fd; /* a listening loopback socket, inherited by rank 0 */
    struct dt_shm_segment *seg[DT_BACKEND_MAX_GROUPS];
    int nsegs;
    char rendezvous_file[256]; /* rank 0 of a local_key job: removed by dt_backend_release */
};

void dt_backend_job_init(struct dt_backend_job *j);

/* Parent side: the environment, the token, the shm segments and (one machine over TCP) the
 * bound master socket. On failure everything made so far is released. */
int dt_backend_prepare(struct dt_backend_job *j);

/* Rank side: the communicator of this process's local rank r (0 <= r < local_n). */
int dt_backend_join(const struct dt_backend_job *j, int r, struct dt_comm **out);

/* When a rank failed: wakes every rank blocked in a shm collective with `reason`. */
void dt_backend_abort(struct dt_backend_job *j, const char *reason);

/* Parent side, on every path: removes the segments, closes the master socket. */
void dt_backend_release(struct dt_backend_job *j);

#endif

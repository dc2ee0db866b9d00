/* Communicators: collective operations over plain float arrays between the ranks of one job.
 *
 * shm (one host), tcp (across hosts), hierarchical (shm inside a host + tcp between hosts),
 * mpi (optional build) and the trivial single-process one all implement this struct. Every
 * blocking call has a timeout and returns a negative status (DT_ERUNTIME, message naming the
 * lost rank) instead of hanging when a peer is gone. Knows nothing of layers or datasets.
 */
#ifndef DT_DIST_COMM_H
#define DT_DIST_COMM_H

#include <stddef.h>

struct dt_comm {
    int rank, size;             /* global */
    int local_rank, local_size; /* within this host */
    const char *backend;        /* "single", "shm", "tcp", "hier", "mpi" */
    /* In-place sum of buf[0..n) across all ranks; every rank ends with the same result. */
    int (*allreduce_sum)(struct dt_comm *c, float *buf, size_t n);
    /* Copies root's bytes to every rank. */
    int (*broadcast)(struct dt_comm *c, void *buf, size_t bytes, int root);
    int (*barrier)(struct dt_comm *c);
    /* Releases resources; safe after a failure. Frees the struct. */
    void (*close)(struct dt_comm *c);
    void *impl;
};

/* The trivial communicator of a one-process run: every collective is a no-op. */
struct dt_comm *dt_comm_single(void);

#endif

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

#include "util/names.h"

/* dist.grad_dtype: what the gradient all-reduce sends. fp32: the floats as they are. bf16:
 * every rank's terms rounded to bf16 (nearest even), half the bytes on every link, every
 * addition in fp32, partial sums rounded again where they travel on (dist/bf16_sum.h). */
enum dt_grad_dtype { DT_GRAD_FP32, DT_GRAD_BF16 };
#define DT_GRAD_DTYPE_COUNT (DT_GRAD_BF16 + 1)
/* "fp32", "bf16" */
extern const struct dt_names dt_grad_dtype_names;

struct dt_comm {
    int rank, size;             /* global */
    int local_rank, local_size; /* within this host */
    const char *backend;        /* "single", "shm", "tcp", "hier", "mpi" */
    /* In-place sum of buf[0..n) across all ranks; every rank ends with the same result. */
    int (*allreduce_sum)(struct dt_comm *c, float *buf, size_t n);
    /* The same sum sent as bf16 (dist/bf16_sum.h's rules): every rank ends with the same
     * bf16-representable values. A rank that calls it while another calls allreduce_sum fails
     * (shm: "mismatched collectives"; tcp: a frame of the wrong length). */
    int (*allreduce_sum_bf16)(struct dt_comm *c, float *buf, size_t n);
    /* Copies root's bytes to every rank. */
    int (*broadcast)(struct dt_comm *c, void *buf, size_t bytes, int root);
    int (*barrier)(struct dt_comm *c);
    /* Releases resources; safe after a failure. Frees the struct. */
    void (*close)(struct dt_comm *c);
    void *impl;
};

/* allreduce_sum or allreduce_sum_bf16, as dtype says. */
int dt_comm_allreduce_sum(struct dt_comm *c, float *buf, size_t n, enum dt_grad_dtype dtype);

/* The trivial communicator of a one-process run: every collective is a no-op. */
struct dt_comm *dt_comm_single(void);

#endif

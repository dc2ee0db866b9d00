/* Hierarchical communicator; the algorithms are described in hier.h. */
#include "dist/hier.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/err.h"

struct hier {
    struct dt_comm *local, *leaders; /* leaders: NULL on non-leader ranks */
    int failed;
    char error[1024];
};

static int hier_check(struct hier *h)
{
    return h->failed ? dt_fail(-h->failed, "%s", h->error) : 0;
}

/* Records the first failure; a leader also drops its host's local comm so its peers notice. */
static int hier_fail(struct hier *h, int rc)
{
    if (rc >= 0 || rc == -DT_EUSAGE)
        return rc;
    h->failed = rc;
    snprintf(h->error, sizeof h->error, "%s", dt_last_error());
    if (h->leaders && h->local) {
        h->local->close(h->local);
        h->local = NULL;
    }
    return dt_fail(-rc, "%s", h->error);
}

/* Local sum, leaders' sum, local broadcast. With bf16 the two sums each follow their own
 * communicator's rules, so a host's partial sum is rounded to bf16 before it goes on the
 * leaders' ring (it is the shm sum's result); the broadcast copies the leader's fp32 buffer,
 * whose values are already bf16's, inside the host. */
static int allreduce(struct dt_comm *c, float *buf, size_t n, enum dt_grad_dtype dtype)
{
    struct hier *h = c->impl;
    int rc = hier_check(h);
    if (rc == 0)
        rc = dt_comm_allreduce_sum(h->local, buf, n, dtype);
    if (rc == 0 && h->leaders)
        rc = dt_comm_allreduce_sum(h->leaders, buf, n, dtype);
    if (rc == 0)
        rc = h->local->broadcast(h->local, buf, n * sizeof *buf, 0);
    return rc < 0 ? hier_fail(h, rc) : 0;
}

static int hier_allreduce_sum(struct dt_comm *c, float *buf, size_t n)
{
    return allreduce(c, buf, n, DT_GRAD_FP32);
}

static int hier_allreduce_sum_bf16(struct dt_comm *c, float *buf, size_t n)
{
    return allreduce(c, buf, n, DT_GRAD_BF16);
}

static int hier_broadcast(struct dt_comm *c, void *buf, size_t bytes, int root)
{
    struct hier *h = c->impl;
    if (root < 0 || root >= c->size)
        return dt_fail(DT_EUSAGE, "broadcast root %d out of range (size %d)", root, c->size);
    int rc = hier_check(h), root_node = root / c->local_size, root_local = root % c->local_size;
    bool my_node = c->rank / c->local_size == root_node;
    if (rc == 0 && my_node)
        rc = h->local->broadcast(h->local, buf, bytes, root_local);
    if (rc == 0 && h->leaders)
        rc = h->leaders->broadcast(h->leaders, buf, bytes, root_node);
    if (rc == 0 && !my_node)
        rc = h->local->broadcast(h->local, buf, bytes, 0);
    return rc < 0 ? hier_fail(h, rc) : 0;
}

static int hier_barrier(struct dt_comm *c)
{
    struct hier *h = c->impl;
    int rc = hier_check(h);
    if (rc == 0)
        rc = h->local->barrier(h->local);
    if (rc == 0 && h->leaders)
        rc = h->leaders->barrier(h->leaders);
    if (rc == 0)
        rc = h->local->barrier(h->local);
    return rc < 0 ? hier_fail(h, rc) : 0;
}

static void hier_close(struct dt_comm *c)
{
    if (!c)
        return;
    struct hier *h = c->impl;
    if (h->local)
        h->local->close(h->local);
    if (h->leaders)
        h->leaders->close(h->leaders);
    free(h);
    free(c);
}

int dt_hier_comm_create(struct dt_comm **out, struct dt_comm *local, struct dt_comm *leaders,
                        int node_rank, int nodes)
{
    *out = NULL;
    int rc = 0;
    if (!local)
        rc = dt_fail(DT_EUSAGE, "hier: no local communicator");
    else if ((local->rank == 0) != (leaders != NULL))
        rc = dt_fail(DT_EUSAGE, "hier: local rank %d %s a leaders' communicator", local->rank,
                     leaders ? "must not have" : "needs");
    else if (nodes < 1 || node_rank < 0 || node_rank >= nodes)
        rc = dt_fail(DT_EUSAGE, "hier: node %d of %d is out of range", node_rank, nodes);
    else if (leaders && (leaders->size != nodes || leaders->rank != node_rank))
        rc = dt_fail(DT_EUSAGE, "hier: leaders' communicator is rank %d of %d, expected %d of %d",
                     leaders->rank, leaders->size, node_rank, nodes);
    struct dt_comm *c = rc == 0 ? calloc(1, sizeof *c) : NULL;
    struct hier *h = c ? calloc(1, sizeof *h) : NULL;
    if (rc == 0 && !h)
        rc = dt_fail(DT_ERUNTIME, "out of memory");
    if (rc < 0) {
        free(c);
        if (local)
            local->close(local);
        if (leaders)
            leaders->close(leaders);
        return rc;
    }
    h->local = local, h->leaders = leaders;
    c->impl = h;
    c->local_rank = local->rank, c->local_size = local->size;
    c->rank = node_rank * local->size + local->rank;
    c->size = nodes * local->size;
    c->backend = "hier";
    c->allreduce_sum = hier_allreduce_sum;
    c->allreduce_sum_bf16 = hier_allreduce_sum_bf16;
    c->broadcast = hier_broadcast;
    c->barrier = hier_barrier;
    c->close = hier_close;
    *out = c;
    return 0;
}

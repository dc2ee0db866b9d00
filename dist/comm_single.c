#include <stdlib.h>

#include "dist/comm.h"
#include "util/err.h"

static int single_allreduce(struct dt_comm *c, float *buf, size_t n)
{
    (void)c, (void)buf, (void)n;
    return 0;
}

/* Nothing is sent, so nothing is rounded: a one-rank run keeps its fp32 gradients. */
static int single_allreduce_bf16(struct dt_comm *c, float *buf, size_t n)
{
    (void)c, (void)buf, (void)n;
    return 0;
}

static int single_broadcast(struct dt_comm *c, void *buf, size_t bytes, int root)
{
    (void)c, (void)buf, (void)bytes;
    return root == 0 ? 0 : dt_fail(DT_EUSAGE, "broadcast root %d out of range (size 1)", root);
}

static int single_barrier(struct dt_comm *c)
{
    (void)c;
    return 0;
}

static void single_close(struct dt_comm *c)
{
    free(c);
}

struct dt_comm *dt_comm_single(void)
{
    struct dt_comm *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->rank = 0;
    c->size = 1;
    c->local_rank = 0;
    c->local_size = 1;
    c->backend = "single";
    c->allreduce_sum = single_allreduce;
    c->allreduce_sum_bf16 = single_allreduce_bf16;
    c->broadcast = single_broadcast;
    c->barrier = single_barrier;
    c->close = single_close;
    return c;
}

/* The MPI communicator: MPI_Allreduce (in place, MPI_FLOAT, MPI_SUM), MPI_Bcast and
 * MPI_Barrier on MPI_COMM_WORLD. Compiled in only with -DDTRAIN_MPI=1 (`make MPI=1`), so the
 * normal build neither needs nor links MPI. Counts are int in MPI, so large buffers go in
 * slices. Timeouts are MPI's business here (the runtime aborts the job when a rank dies). */
#include "dist/mpi.h"

#include "util/err.h"

#ifndef DTRAIN_MPI

int dt_mpi_comm_create(struct dt_comm **out)
{
    *out = NULL;
    return dt_fail(DT_EUSAGE, "--backend mpi: this dtrain was built without MPI (use "
                              "build-mpi/dtrain from make dtrain-mpi)");
}

#else

#include <limits.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdlib.h>

#define SLICE ((size_t)1 << 30) /* elements per MPI call, well below INT_MAX */

struct mpi_impl {
    bool we_initialized;
};

static int mpi_error(int code, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(code, msg, &len);
    return dt_fail(DT_ERUNTIME, "mpi: %s: %s", what, msg);
}

static int mpi_allreduce_sum(struct dt_comm *c, float *buf, size_t n)
{
    (void)c;
    for (size_t off = 0; off < n; off += SLICE) {
        int cnt = (int)(n - off < SLICE ? n - off : SLICE);
        int rc = MPI_Allreduce(MPI_IN_PLACE, buf + off, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS)
            return mpi_error(rc, "MPI_Allreduce");
    }
    return 0;
}

static int mpi_broadcast(struct dt_comm *c, void *buf, size_t bytes, int root)
{
    if (root < 0 || root >= c->size)
        return dt_fail(DT_EUSAGE, "broadcast root %d out of range (size %d)", root, c->size);
    for (size_t off = 0; off < bytes; off += SLICE) {
        int cnt = (int)(bytes - off < SLICE ? bytes - off : SLICE);
        int rc = MPI_Bcast((char *)buf + off, cnt, MPI_BYTE, root, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS)
            return mpi_error(rc, "MPI_Bcast");
    }
    return 0;
}

static int mpi_barrier(struct dt_comm *c)
{
    (void)c;
    int rc = MPI_Barrier(MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : mpi_error(rc, "MPI_Barrier");
}

static void mpi_close(struct dt_comm *c)
{
    if (!c)
        return;
    struct mpi_impl *m = c->impl;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (m->we_initialized && !finalized)
        MPI_Finalize();
    free(m);
    free(c);
}

int dt_mpi_comm_create(struct dt_comm **out)
{
    *out = NULL;
    struct dt_comm *c = calloc(1, sizeof *c);
    struct mpi_impl *m = calloc(1, sizeof *m);
    if (!c || !m) {
        free(c), free(m);
        return dt_fail(DT_ERUNTIME, "out of memory");
    }
    int inited = 0, rc = MPI_Initialized(&inited);
    if (rc == MPI_SUCCESS && !inited) {
        rc = MPI_Init(NULL, NULL);
        m->we_initialized = rc == MPI_SUCCESS;
    }
    if (rc == MPI_SUCCESS)
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm local;
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    if (rc == MPI_SUCCESS) {
        MPI_Comm_rank(local, &c->local_rank);
        MPI_Comm_size(local, &c->local_size);
        MPI_Comm_free(&local);
    }
    if (rc != MPI_SUCCESS) {
        free(c), free(m);
        return mpi_error(rc, "initialization");
    }
    c->backend = "mpi";
    c->allreduce_sum = mpi_allreduce_sum;
    c->broadcast = mpi_broadcast;
    c->barrier = mpi_barrier;
    c->close = mpi_close;
    c->impl = m;
    *out = c;
    return 0;
}

#endif

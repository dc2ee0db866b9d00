/* The MPI communicator: MPI_Allreduce (in place, MPI_FLOAT, MPI_SUM), MPI_Bcast and
 * MPI_Barrier on MPI_COMM_WORLD. The bf16 all-reduce packs the terms into a 2-byte datatype of
 * its own and reduces them with a user-defined operator that adds two bf16 values in fp32 and
 * rounds the sum back to bf16 (dist/bf16_sum.h): MPI decides the order of the additions (its
 * algorithm for the message size and rank count, the same from run to run), and every partial
 * sum it passes between ranks is bf16. Compiled in only with -DDTRAIN_MPI=1 (`make MPI=1`), so the
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

#include "dist/bf16_sum.h"

#define SLICE ((size_t)1 << 30) /* elements per MPI call, well below INT_MAX */

struct mpi_impl {
    bool we_initialized;
    MPI_Datatype bf16; /* 2 bytes, contiguous */
    MPI_Op bf16_sum;   /* bf16 + bf16 in fp32, rounded to bf16 */
    dt_bf16 *packed;   /* the bf16 all-reduce's buffer, grown as needed */
    size_t packed_cap;
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

/* The operator: MPI hands it `len` elements of our datatype. */
static void bf16_sum_op(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    dt_bf16_sum_packed_n(inout, in, (size_t)*len);
}

static int mpi_allreduce_sum_bf16(struct dt_comm *c, float *buf, size_t n)
{
    struct mpi_impl *m = c->impl;
    if (n > m->packed_cap) {
        dt_bf16 *p = realloc(m->packed, n * sizeof *p);
        if (!p)
            return dt_fail(DT_ERUNTIME, "mpi: out of memory for a bf16 all-reduce of %zu values",
                           n);
        m->packed = p, m->packed_cap = n;
    }
    dt_bf16_from_f32_n(buf, m->packed, n);
    for (size_t off = 0; off < n; off += SLICE) {
        int cnt = (int)(n - off < SLICE ? n - off : SLICE);
        int rc =
            MPI_Allreduce(MPI_IN_PLACE, m->packed + off, cnt, m->bf16, m->bf16_sum, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS)
            return mpi_error(rc, "MPI_Allreduce (bf16)");
    }
    dt_bf16_to_f32_n(m->packed, buf, n);
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
    if (!finalized) {
        MPI_Op_free(&m->bf16_sum);
        MPI_Type_free(&m->bf16);
    }
    if (m->we_initialized && !finalized)
        MPI_Finalize();
    free(m->packed);
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
    if (rc == MPI_SUCCESS)
        rc = MPI_Type_contiguous(1, MPI_UINT16_T, &m->bf16);
    if (rc == MPI_SUCCESS)
        rc = MPI_Type_commit(&m->bf16);
    /* commutative: a + b and b + a round the same, so MPI may pair the terms as it likes */
    if (rc == MPI_SUCCESS)
        rc = MPI_Op_create(bf16_sum_op, 1, &m->bf16_sum);
    if (rc != MPI_SUCCESS) {
        free(c), free(m);
        return mpi_error(rc, "initialization");
    }
    c->backend = "mpi";
    c->allreduce_sum = mpi_allreduce_sum;
    c->allreduce_sum_bf16 = mpi_allreduce_sum_bf16;
    c->broadcast = mpi_broadcast;
    c->barrier = mpi_barrier;
    c->close = mpi_close;
    c->impl = m;
    *out = c;
    return 0;
}

#endif

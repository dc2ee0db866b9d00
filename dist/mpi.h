/* The MPI communicator (optional build: `make MPI=1`, which compiles with mpicc and defines
 * DTRAIN_MPI). Without it, dt_mpi_comm_create() reports that MPI support is not built in. */
#ifndef DT_DIST_MPI_H
#define DT_DIST_MPI_H

#include "dist/comm.h"

/* Initializes MPI (if the program has not) and wraps MPI_COMM_WORLD. close() finalizes MPI
 * when this call initialized it. DT_EUSAGE when built without MPI. */
int dt_mpi_comm_create(struct dt_comm **out);

#endif

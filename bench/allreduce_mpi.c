/* The all-reduce sweep of `dtrain bench allreduce`, with MPI_Allreduce, to compare against
 * Open MPI's transports on the same machine.
 *   mpicc -O2 -o build/allreduce_mpi bench/allreduce_mpi.c
 *   mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl tcp,self build/allreduce_mpi [MAX]
 * MAX: the largest message in bytes (default 64 MiB; bench/compare.py passes its own).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t max = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : (size_t)64 << 20;
    if (max < 1024)
        max = 1024;
    float *buf = calloc(max / 4, sizeof *buf);
    if (rank == 0)
        printf("%10s %12s %10s   (%d ranks, MPI)\n", "bytes", "time", "busbw", size);
    for (size_t bytes = 1024; bytes <= max; bytes *= 4) {
        int n = (int)(bytes / 4);
        for (int i = 0; i < 3; i++)
            MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        int iters = (int)(0.3 / (MPI_Wtime() - t0 + 1e-7));
        iters = iters < 3 ? 3 : iters > 5000 ? 5000 : iters;
        MPI_Bcast(&iters, 1, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++)
            MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double t = (MPI_Wtime() - t0) / iters;
        double busbw = (double)bytes / t * 2.0 * (size - 1) / size / 1e9;
        if (rank == 0) {
            if (t < 1e-3)
                printf("%10zu %9.1f us %7.2f GB/s\n", bytes, t * 1e6, busbw);
            else
                printf("%10zu %9.2f ms %7.2f GB/s\n", bytes, t * 1e3, busbw);
            fflush(stdout);
        }
    }
    free(buf);
    MPI_Finalize();
    return 0;
}

/* All-reduce benchmark of dtrain's shared-memory communicator, the same sweep and output as
 * bench/allreduce_tcp.c and bench/allreduce_mpi.c so the three can be compared line by line.
 *
 * Forks N ranks (default 2) over one segment, then for each size from 1 KiB to 64 MiB runs a
 * few warm-up all-reduces and times enough of them to fill ~0.3 s; rank 0 prints the mean
 * latency and bus bandwidth (bytes/time x 2(N-1)/N, the convention of REFERENCE.md).
 *
 * Build and run from the repository root:
 *   make -C bench ../build/bench/allreduce_shm
 *   build/bench/allreduce_shm [ranks] [chunk-bytes (0: default)] [pin (1: one core per rank)]
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dist/shm.h"
#include "util/clock.h"
#include "util/err.h"

/* One core per rank, as dtrain's launcher and mpirun (--bind-to core for np <= 2) do: unpinned
 * ranks on a busy machine often share one core and then measure the scheduler. */
static void pin(int rank)
{
    cpu_set_t all, one;
    if (sched_getaffinity(0, sizeof all, &all) != 0)
        return;
    int want = rank % CPU_COUNT(&all), seen = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &all) && seen++ == want) {
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            sched_setaffinity(0, sizeof one, &one);
            return;
        }
}

static void run_rank(struct dt_shm_segment *seg, int rank, int size, int pinned)
{
    if (pinned)
        pin(rank);
    struct dt_comm *c;
    if (dt_shm_comm_create(&c, seg, rank) < 0) {
        fprintf(stderr, "rank %d: %s\n", rank, dt_last_error());
        _exit(1);
    }
    size_t max = (size_t)64 << 20;
    float *buf = malloc(max);
    for (size_t i = 0; i < max / 4; i++)
        buf[i] = 0.0f;
    if (rank == 0)
        printf("%10s %12s %10s   (%d ranks, shm)\n", "bytes", "time", "busbw", size);
    for (size_t bytes = 1024; bytes <= max; bytes *= 4) {
        size_t n = bytes / 4;
        for (int i = 0; i < 3; i++)
            c->allreduce_sum(c, buf, n);
        /* Everyone runs the same count: rank 0 decides and broadcasts it. */
        double t0 = dt_now();
        c->allreduce_sum(c, buf, n);
        int iters = (int)(0.3 / (dt_now() - t0 + 1e-7));
        iters = iters < 3 ? 3 : iters > 5000 ? 5000 : iters;
        c->broadcast(c, &iters, sizeof iters, 0);
        c->barrier(c);
        t0 = dt_now();
        for (int i = 0; i < iters; i++)
            if (c->allreduce_sum(c, buf, n) < 0) {
                fprintf(stderr, "rank %d: %s\n", rank, dt_last_error());
                _exit(1);
            }
        double t = (dt_now() - t0) / iters;
        double busbw = (double)bytes / t * 2.0 * (size - 1) / size / 1e9;
        if (rank == 0) {
            if (t < 1e-3)
                printf("%10zu %9.1f us %7.2f GB/s\n", bytes, t * 1e6, busbw);
            else
                printf("%10zu %9.2f ms %7.2f GB/s\n", bytes, t * 1e3, busbw);
            fflush(stdout);
        }
    }
    c->close(c);
    free(buf);
    _exit(0);
}

int main(int argc, char **argv)
{
    int size = argc > 1 ? atoi(argv[1]) : 2;
    size_t chunk = argc > 2 ? (size_t)atol(argv[2]) : 0;
    int pinned = argc > 3 ? atoi(argv[3]) : 1;
    struct dt_shm_segment *seg;
    if (dt_shm_segment_create(&seg, size, chunk, 60) < 0) {
        fprintf(stderr, "%s\n", dt_last_error());
        return 1;
    }
    for (int r = 0; r < size; r++)
        if (fork() == 0)
            run_rank(seg, r, size, pinned);
    /* A rank that dies (e.g. SIGPIPE under `| head`) must not leave the others waiting. */
    int failed = 0, st;
    while (wait(&st) > 0)
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            failed++;
            dt_shm_segment_abort(seg, "a rank died");
        }
    dt_shm_segment_destroy(seg);
    return failed != 0;
}

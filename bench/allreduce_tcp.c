/* All-reduce benchmark of dtrain's TCP ring communicator on loopback.
 *
 * Forks N ranks (default 2) on 127.0.0.1, then for each size from 1 KiB to 64 MiB runs a few
 * warm-up all-reduces and times enough of them to fill ~0.3 s; rank 0 prints the median-free
 * mean latency and bus bandwidth (bytes/time x 2(N-1)/N, the convention of REFERENCE.md).
 *
 * Build (after `make`, from the repository root):
 *   cc -O2 -I. -D_GNU_SOURCE -o build/allreduce_tcp bench/allreduce_tcp.c \
 *      $(ls build/dist/*.o build/util/*.o) -lcrypto -lm -lpthread
 * Run:  build/allreduce_tcp [ranks] [sockbuf-bytes|-1]
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dist/tcp.h"
#include "util/clock.h"
#include "util/err.h"

static const char token[] = "bench-token-0123456789abcdef";

static void run_rank(int rank, int size, int fd, int port, int sockbuf)
{
    struct dt_tcp_opts o;
    dt_tcp_opts_init(&o);
    o.rank = rank, o.size = size, o.local_rank = rank, o.local_size = size;
    o.master_host = "127.0.0.1", o.master_port = port, o.master_fd = rank == 0 ? fd : -1;
    o.token = (const uint8_t *)token, o.token_len = strlen(token);
    o.sockbuf = sockbuf;
    struct dt_comm *c;
    if (dt_tcp_comm_create(&c, &o) < 0) {
        fprintf(stderr, "rank %d: %s\n", rank, dt_last_error());
        _exit(1);
    }
    size_t max = (size_t)64 << 20;
    float *buf = malloc(max);
    for (size_t i = 0; i < max / 4; i++)
        buf[i] = 0.0f;
    if (rank == 0)
        printf("%10s %12s %10s   (%d ranks, loopback)\n", "bytes", "time", "busbw", size);
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
    int size = argc > 1 ? atoi(argv[1]) : 2, sockbuf = argc > 2 ? atoi(argv[2]) : 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 64) < 0) {
        perror("listen");
        return 1;
    }
    getsockname(fd, (struct sockaddr *)&a, &len);
    for (int r = 0; r < size; r++)
        if (fork() == 0)
            run_rank(r, size, fd, ntohs(a.sin_port), sockbuf);
    close(fd);
    int failed = 0, st;
    while (wait(&st) > 0)
        failed += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    return failed != 0;
}

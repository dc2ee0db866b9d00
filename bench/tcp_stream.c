/* The ceiling under dtrain's TCP all-reduce on one machine: how fast a plain loopback TCP stream
 * between two processes (pinned to CPUs 0 and 1) moves bytes, one direction and both directions
 * at once, and how fast memcpy and an a += b float reduction run at large sizes.
 *   make -C bench ../build/bench/tcp_stream && ./build/bench/tcp_stream [MiB] [sockbuf-KiB]
 * MiB: bytes moved per measurement (default 256); sockbuf: SO_SNDBUF/SO_RCVBUF (default 4096,
 * dtrain's default). Each figure is the median of 5 runs.
 *
 * Both directions use one thread per process with non-blocking sockets and poll(), sending
 * from and receiving into 2 MiB chunks that cycle through a 16 MiB buffer: the shape of one
 * ring step of a 2-rank all-reduce, without the framing and the reduction. The receive side
 * also runs with an L2-sized (256 KiB) destination to show what the cache-friendly case costs,
 * and in lock-step 512 KiB steps (each side waits for the other's step before its next one),
 * which is how dtrain's ring moves large messages: in rounds, so what is in flight stays cached.
 * A 2-rank ring all-reduce of B bytes moves B/2 each way twice and reduces B/2 floats' worth,
 * so its bus bandwidth (B / time) is at most 1 / (1 / both + 0.5 / reduce) in GB/s, where both
 * is the per-direction rate with both directions busy and reduce the a += b rate.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (2u << 20)
#define BUF   (16u << 20)
#define RUNS  5

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    (void)sched_setaffinity(0, sizeof s, &s);
}

static void tune(int fd, int sockbuf)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (sockbuf > 0) {
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sockbuf, sizeof sockbuf);
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sockbuf, sizeof sockbuf);
    }
}

/* A connected pair of loopback TCP sockets. */
static void tcp_pair(int fds[2], int sockbuf)
{
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1) ||
        getsockname(l, (struct sockaddr *)&a, &len))
        die("listen");
    fds[0] = socket(AF_INET, SOCK_STREAM, 0);
    tune(fds[0], sockbuf); /* before connect, so the window scales to the buffer */
    if (connect(fds[0], (struct sockaddr *)&a, sizeof a))
        die("connect");
    fds[1] = accept(l, NULL, NULL);
    if (fds[1] < 0)
        die("accept");
    tune(fds[1], sockbuf);
    close(l);
}

/* Sends `total` bytes on fd while receiving `total` bytes from it (either may be 0). */
/* Sends total_s bytes on sfd while receiving total_r bytes from rfd (may be the same socket). */
static void pump(int sfd, int rfd, uint8_t *sbuf, uint8_t *rbuf, size_t rwrap, size_t total_s,
                 size_t total_r)
{
    size_t s = 0, r = 0;
    while (s < total_s || r < total_r) {
        int progress = 0;
        if (s < total_s) {
            size_t off = s % BUF, n = CHUNK - s % CHUNK;
            if (n > total_s - s)
                n = total_s - s;
            ssize_t w = send(sfd, sbuf + off, n, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (w > 0)
                s += (size_t)w, progress = 1;
            else if (w < 0 && errno != EAGAIN)
                die("send");
        }
        if (r < total_r) {
            size_t off = r % rwrap, n = rwrap - off;
            if (n > CHUNK - r % CHUNK)
                n = CHUNK - r % CHUNK;
            if (n > total_r - r)
                n = total_r - r;
            ssize_t g = recv(rfd, rbuf + off, n, MSG_DONTWAIT);
            if (g > 0)
                r += (size_t)g, progress = 1;
            else if (g == 0)
                die("peer closed");
            else if (errno != EAGAIN)
                die("recv");
        }
        if (!progress) {
            struct pollfd p[2] = {{.fd = sfd, .events = s < total_s ? POLLOUT : 0},
                                  {.fd = rfd, .events = r < total_r ? POLLIN : 0}};
            if (sfd == rfd)
                p[0].events |= p[1].events;
            poll(p, sfd == rfd ? 1 : 2, 1000);
        }
    }
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* GB/s per direction: the parent (CPU 0) sends `total` bytes to the child (CPU 1), and with
 * `both` the child sends as many back at the same time: on the same connection (1) or on a
 * second one (2, as the ring does: each connection carries data one way only). */
static double stream(size_t total, int both, size_t rwrap, int sockbuf, size_t step)
{
    double t[RUNS];
    for (int k = 0; k < RUNS; k++) {
        int a[2], b[2];
        tcp_pair(a, sockbuf);
        if (both == 2)
            tcp_pair(b, sockbuf);
        pid_t pid = fork();
        int me = pid == 0;
        pin(me);
        uint8_t *sb = malloc(BUF), *rb = malloc(BUF);
        memset(sb, me + 1, BUF), memset(rb, 0, BUF);
        int fd = a[me], sfd = fd, rfd = fd;
        close(a[!me]);
        if (both == 2) {
            close(b[me]);
            sfd = me ? b[!me] : fd, rfd = me ? fd : b[!me];
        }
        char go = 0;
        /* One byte each way as a start line, so neither side's setup is timed. */
        if (send(fd, &go, 1, 0) != 1 || recv(fd, &go, 1, MSG_WAITALL) != 1)
            die("sync");
        double t0 = now();
        size_t out = me == 0 || both ? total : 0, in = me == 1 || both ? total : 0;
        if (step) /* lock-step: each side waits for the other's step before the next */
            for (size_t done = 0; done < total; done += step)
                pump(sfd, rfd, sb + done % BUF, rb, rwrap, step, step);
        else
            pump(sfd, rfd, sb, rb, rwrap, out, in);
        if (send(fd, &go, 1, 0) != 1 || recv(fd, &go, 1, MSG_WAITALL) != 1)
            die("sync");
        double dt = now() - t0;
        free(sb), free(rb), close(fd);
        if (both == 2)
            close(b[!me]);
        if (me)
            _exit(0);
        waitpid(pid, NULL, 0);
        t[k] = dt;
    }
    qsort(t, RUNS, sizeof *t, cmp);
    return (double)total / t[RUNS / 2] / 1e9;
}

static double mem_rate(size_t bytes, int reduce)
{
    size_t n = bytes / sizeof(float);
    float *a = malloc(bytes), *b = malloc(bytes);
    for (size_t i = 0; i < n; i++)
        a[i] = (float)i, b[i] = 1.0f;
    double t[RUNS];
    for (int k = 0; k < RUNS; k++) {
        double t0 = now();
        if (reduce) {
            for (size_t i = 0; i < n; i++)
                a[i] += b[i];
        } else {
            memcpy(a, b, bytes);
        }
        t[k] = now() - t0;
        __asm__ volatile("" : : "r"(a) : "memory");
    }
    free(a), free(b);
    qsort(t, RUNS, sizeof *t, cmp);
    return (double)bytes / t[RUNS / 2] / 1e9;
}

int main(int argc, char **argv)
{
    size_t total = (argc > 1 ? (size_t)atol(argv[1]) : 256) << 20;
    int sockbuf = (argc > 2 ? atoi(argv[2]) : 4096) << 10;
    pin(0);
    printf("loopback TCP, %zu MiB per run, sockbuf %d KiB, median of %d (GB/s per direction)\n",
           total >> 20, sockbuf >> 10, RUNS);
    printf("  one direction, recv into 16 MiB:  %6.2f\n", stream(total, 0, BUF, sockbuf, 0));
    printf("  one direction, recv into 256 KiB: %6.2f\n", stream(total, 0, 256u << 10, sockbuf, 0));
    printf("  both directions on one connection, recv into 16 MiB: %6.2f\n",
           stream(total, 1, BUF, sockbuf, 0));
    double both = stream(total, 2, BUF, sockbuf, 0);
    printf("  both directions, a connection each (as the ring), recv into 16 MiB:  %6.2f\n", both);
    printf("  both directions, a connection each, recv into 256 KiB: %6.2f\n",
           stream(total, 2, 256u << 10, sockbuf, 0));
    double steps = stream(total, 2, 256u << 10, sockbuf, 512u << 10);
    printf("  both directions, a connection each, lock-step 512 KiB steps, recv into 256 KiB: "
           "%6.2f\n",
           steps);
    double red = 0;
    for (size_t mib = 16; mib <= 64; mib *= 4) {
        double r = mem_rate(mib << 20, 1);
        red = mib == 16 ? r : red;
        printf("memory, %zu MiB: memcpy %6.2f GB/s, a += b %6.2f GB/s (bytes of a)\n", mib,
               mem_rate(mib << 20, 0), r);
    }
    printf("2-rank ring all-reduce bound: busbw <= 1 / (1/both + 0.5/reduce) = %.2f GB/s "
           "streaming, %.2f GB/s in 512 KiB steps\n",
           1.0 / (1.0 / both + 0.5 / red), 1.0 / (1.0 / steps + 0.5 / red));
    return 0;
}

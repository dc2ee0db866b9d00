/* dist/tcp + dist/rendezvous: ring collectives between forked ranks on 127.0.0.1 and [::1],
 * hostile connections during rendezvous, lost and stalled ranks, rendezvous timeout.
 *
 * Each test forks its ranks; a rank checks its own results and reports through its exit
 * status (cmocka asserts must not run in a child), printing what went wrong on stderr. The
 * master port is a socket the parent bound to port 0 and hands to rank 0: no port races. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dist/auth.h"
#include "dist/mpi.h"
#include "dist/rendezvous.h"
#include "dist/tcp.h"
#include "dist/wire.h"
#include "util/clock.h"
#include "util/err.h"
#include "tests/unit/rank_check.h"
#include "util/rng.h"

static const char token[] = "test-token-0123456789abcdef";

struct job {
    const char *host;
    int n, port, master_fd;
    double timeout, rdzv_timeout, handshake_timeout;
    const char *token;
    const char *iface;
};

typedef void (*rank_body)(struct dt_comm *c, const struct job *j, void *arg);

/* Listens on host port 0; returns the fd and the port chosen, or -1 when host is unusable. */
static int master_listen(const char *host, int *port)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST}, *ai;
    if (getaddrinfo(host, "0", &hints, &ai) != 0)
        return -1;
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 64) < 0) {
        freeaddrinfo(ai);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    freeaddrinfo(ai);
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &len);
    *port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                           : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

static struct job job_new(const char *host, int n)
{
    struct job j = {.host = host,
                    .n = n,
                    .timeout = 10,
                    .rdzv_timeout = 10,
                    .handshake_timeout = 2,
                    .token = token};
    j.master_fd = master_listen(host, &j.port);
    return j;
}

static int rank_join(const struct job *j, int rank, struct dt_comm **c)
{
    struct dt_tcp_opts o;
    dt_tcp_opts_init(&o);
    o.rank = rank, o.size = j->n, o.local_rank = rank, o.local_size = j->n;
    o.master_host = j->host, o.master_port = j->port;
    o.master_fd = rank == 0 ? j->master_fd : -1;
    o.token = (const uint8_t *)j->token, o.token_len = strlen(j->token);
    o.timeout = j->timeout, o.rendezvous_timeout = j->rdzv_timeout;
    o.handshake_timeout = j->handshake_timeout;
    o.iface = j->iface;
    return dt_tcp_comm_create(c, &o);
}

static pid_t spawn_rank(const struct job *j, int rank, rank_body body, void *arg,
                        const char *stderr_file)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    if (stderr_file) {
        int fd = open(stderr_file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 2);
        close(fd);
    }
    if (rank != 0)
        close(j->master_fd);
    struct dt_comm *c;
    int rc = rank_join(j, rank, &c);
    CHECK(rc == 0, "rank %d: join failed", rank);
    CHECK(c->rank == rank && c->size == j->n && strcmp(c->backend, "tcp") == 0, "comm fields");
    body(c, j, arg);
    c->close(c);
    _exit(0);
}

/* Waits for every child; kills them all after `limit` seconds. Returns how many failed. */
static int wait_all(pid_t *pids, int n, double limit)
{
    double end = dt_now() + limit;
    int failed = 0, left = n;
    while (left > 0) {
        for (int i = 0; i < n; i++) {
            int st;
            if (pids[i] <= 0 || waitpid(pids[i], &st, WNOHANG) != pids[i])
                continue;
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                fprintf(stderr, "child %d failed (status 0x%x)\n", i, st);
                failed++;
            }
            pids[i] = 0;
            left--;
        }
        if (left > 0 && dt_now() > end) {
            for (int i = 0; i < n; i++)
                if (pids[i] > 0) {
                    fprintf(stderr, "child %d hung: killed\n", i);
                    kill(pids[i], SIGKILL);
                    waitpid(pids[i], NULL, 0);
                    pids[i] = 0, failed++, left--;
                }
        }
        dt_sleep(0.005);
    }
    return failed;
}

static int run_job(struct job *j, rank_body body, void *arg, double limit)
{
    pid_t pids[8];
    for (int r = 0; r < j->n; r++)
        pids[r] = spawn_rank(j, r, body, arg, NULL);
    close(j->master_fd);
    return wait_all(pids, j->n, limit);
}

/* ---- correctness -------------------------------------------------------------------------- */

static uint64_t fnv(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static const size_t lengths[] = {0, 1, 7, 65537, 1000003};

static void body_allreduce(struct dt_comm *c, const struct job *j, void *arg)
{
    (void)arg;
    int n = j->n;
    for (size_t li = 0; li < sizeof lengths / sizeof *lengths; li++) {
        size_t len = lengths[li];
        float *a = malloc((len + 1) * sizeof *a);
        for (size_t i = 0; i < len; i++)
            a[i] = (float)((c->rank + 1) * (int)(i % 13 + 1));
        CHECK(c->allreduce_sum(c, a, len) == 0, "allreduce ints len %zu", len);
        for (size_t i = 0; i < len; i++)
            CHECK(a[i] == (float)(n * (n + 1) / 2 * (int)(i % 13 + 1)), "sum at %zu/%zu: %g", i,
                  len, (double)a[i]);
        /* Random floats: compare with a double reference and bit-compare across ranks. */
        for (size_t i = 0; i < len; i++) {
            struct dt_rng g;
            dt_rng_init(&g, dt_rng_key(7, DT_RNG_TEST, (uint64_t)c->rank, i));
            a[i] = (float)dt_rng_normal(&g);
        }
        CHECK(c->allreduce_sum(c, a, len) == 0, "allreduce floats len %zu", len);
        for (size_t i = 0; i < len; i += 997) {
            double ref = 0;
            for (int r = 0; r < n; r++) {
                struct dt_rng g;
                dt_rng_init(&g, dt_rng_key(7, DT_RNG_TEST, (uint64_t)r, i));
                ref += (float)dt_rng_normal(&g);
            }
            CHECK(fabs(a[i] - ref) < 1e-5, "float sum at %zu: %g vs %g", i, (double)a[i], ref);
        }
        uint64_t h = fnv(a, len * sizeof *a), h0 = h;
        CHECK(c->broadcast(c, &h0, sizeof h0, 0) == 0, "broadcast hash");
        CHECK(h == h0, "rank %d result differs from rank 0's (len %zu)", c->rank, len);
        free(a);
    }
    CHECK(c->barrier(c) == 0, "barrier");
}

static void test_allreduce_2_3_4_ranks(void **state)
{
    (void)state;
    for (int n = 2; n <= 4; n++) {
        struct job j = job_new("127.0.0.1", n);
        assert_true(j.master_fd >= 0);
        assert_int_equal(run_job(&j, body_allreduce, NULL, 25), 0);
    }
}

/* The small-message path (one all-gather, summed in rank order) around its limit T: lengths
 * 0, 1, T-1 and T take it, T+1 takes the ring. Random floats, so the order of the additions
 * shows in the bits: on the small path every rank must hold exactly v0 + v1 + ... + v(n-1)
 * computed in that order, and on both paths every rank the same bits. */
static float small_value(int rank, size_t i)
{
    struct dt_rng g;
    dt_rng_init(&g, dt_rng_key(11, DT_RNG_TEST, (uint64_t)rank, i));
    return (float)dt_rng_normal(&g) * (float)(1 + (int)(i % 5) * 1000);
}

static void body_small_path(struct dt_comm *c, const struct job *j, void *arg)
{
    (void)arg;
    int n = j->n;
    size_t lim = dt_tcp_small_max(n);
    const size_t lens[] = {0, 1, lim - 1, lim, lim + 1};
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
        size_t len = lens[li];
        float *a = malloc((len + 1) * sizeof *a);
        for (size_t i = 0; i < len; i++)
            a[i] = small_value(c->rank, i);
        CHECK(c->allreduce_sum(c, a, len) == 0, "allreduce len %zu", len);
        for (size_t i = 0; i < len; i++) {
            float ref = small_value(0, i);
            for (int r = 1; r < n; r++)
                ref += small_value(r, i);
            if (len <= lim)
                CHECK(memcmp(&a[i], &ref, sizeof ref) == 0, "len %zu [%zu]: %a, rank order %a", len,
                      i, (double)a[i], (double)ref);
            else
                CHECK(fabsf(a[i] - ref) <= 1e-3f * (1 + fabsf(ref)), "len %zu [%zu]: %g vs %g", len,
                      i, (double)a[i], (double)ref);
        }
        uint64_t h = fnv(a, len * sizeof *a), h0 = h;
        CHECK(c->broadcast(c, &h0, sizeof h0, 0) == 0, "broadcast hash");
        CHECK(h == h0, "rank %d result differs from rank 0's (len %zu)", c->rank, len);
        free(a);
    }
}

static void test_small_path_1_to_4_ranks(void **state)
{
    (void)state;
    assert_int_equal(dt_tcp_small_max(1), 0);
    struct dt_tcp_opts o; /* 1 rank: every length comes back untouched */
    dt_tcp_opts_init(&o);
    struct dt_comm *c;
    assert_int_equal(dt_tcp_comm_create(&c, &o), 0);
    float v[3] = {1.5f, -2.25f, 3e7f};
    for (size_t len = 0; len <= 3; len++) {
        assert_int_equal(c->allreduce_sum(c, v, len), 0);
        assert_true(v[0] == 1.5f && v[1] == -2.25f && v[2] == 3e7f);
    }
    c->close(c);
    for (int n = 2; n <= 4; n++) {
        assert_true(dt_tcp_small_max(n) > 1 &&
                    (n == 2 || dt_tcp_small_max(n) < dt_tcp_small_max(n - 1)));
        struct job j = job_new("127.0.0.1", n);
        assert_true(j.master_fd >= 0);
        assert_int_equal(run_job(&j, body_small_path, NULL, 25), 0);
    }
}

static void test_ipv6_loopback(void **state)
{
    (void)state;
    struct job j = job_new("::1", 3);
    if (j.master_fd < 0)
        skip(); /* no IPv6 in this namespace */
    assert_int_equal(run_job(&j, body_allreduce, NULL, 25), 0);
}

static void body_broadcast(struct dt_comm *c, const struct job *j, void *arg)
{
    (void)arg;
    const size_t sizes[] = {1, 3, 262145, 1000003};
    for (int root = 0; root < j->n; root++)
        for (size_t si = 0; si < 4; si++) {
            size_t len = sizes[si];
            uint8_t *b = malloc(len);
            for (size_t i = 0; i < len; i++)
                b[i] = c->rank == root ? (uint8_t)(i * 31 + (size_t)root) : 0xee;
            CHECK(c->broadcast(c, b, len, root) == 0, "broadcast root %d len %zu", root, len);
            for (size_t i = 0; i < len; i++)
                CHECK(b[i] == (uint8_t)(i * 31 + (size_t)root), "byte %zu root %d", i, root);
            free(b);
        }
    CHECK(c->broadcast(c, NULL, 0, 1) == 0, "empty broadcast");
    int x = 0;
    CHECK(c->broadcast(c, &x, sizeof x, j->n) == -DT_EUSAGE, "bad root accepted");
    CHECK(strstr(dt_last_error(), "root 3 out of range"), "bad root message");
    for (int i = 0; i < 5; i++)
        CHECK(c->barrier(c) == 0, "barrier %d", i);
}

static void test_broadcast_every_root_and_barrier(void **state)
{
    (void)state;
    struct job j = job_new("127.0.0.1", 3);
    assert_int_equal(run_job(&j, body_broadcast, NULL, 25), 0);
}

static void test_single_rank_and_bad_options(void **state)
{
    (void)state;
    struct dt_tcp_opts o;
    dt_tcp_opts_init(&o);
    struct dt_comm *c;
    assert_int_equal(dt_tcp_comm_create(&c, &o), 0);
    float x = 3;
    assert_int_equal(c->allreduce_sum(c, &x, 1), 0);
    assert_true(x == 3);
    assert_int_equal(c->barrier(c), 0);
    c->close(c);

    o.size = 2, o.rank = 2;
    assert_int_equal(dt_tcp_comm_create(&c, &o), -DT_EUSAGE);
    assert_string_equal(dt_last_error(), "tcp: rank 2 of 2 is out of range");
    o.rank = 1;
    assert_int_equal(dt_tcp_comm_create(&c, &o), -DT_EUSAGE);
    assert_string_equal(dt_last_error(), "tcp: no master address (--master HOST:PORT)");
    o.master_host = "127.0.0.1", o.master_port = 70000;
    assert_int_equal(dt_tcp_comm_create(&c, &o), -DT_EUSAGE);
    assert_string_equal(dt_last_error(), "tcp: master port 70000 out of range 1..65535");
    o.master_port = 1;
    assert_int_equal(dt_tcp_comm_create(&c, &o), -DT_EUSAGE);
    assert_string_equal(dt_last_error(), "tcp: job token too short (0 bytes, need at least 16)");
    o.token = (const uint8_t *)token, o.token_len = strlen(token);
    o.iface = "no-such-if0";
    assert_int_equal(dt_tcp_comm_create(&c, &o), -DT_EUSAGE);
    assert_string_equal(dt_last_error(), "--iface no-such-if0: no such interface");
#ifndef DTRAIN_MPI
    assert_int_equal(dt_mpi_comm_create(&c), -DT_EUSAGE);
    assert_string_equal(dt_last_error(), "--backend mpi: this dtrain was built without MPI (use "
                                         "build-mpi/dtrain from make dtrain-mpi)");
#endif
}

static void body_small(struct dt_comm *c, const struct job *j, void *arg)
{
    (void)arg;
    float v[5] = {1, 2, 3, 4, 5};
    CHECK(c->allreduce_sum(c, v, 5) == 0, "allreduce");
    for (int i = 0; i < 5; i++)
        CHECK(v[i] == (float)((i + 1) * j->n), "sum %d", i);
}

static void test_iface_lo(void **state)
{
    (void)state;
    char addr[64];
    assert_int_equal(dt_rdzv_iface_address("lo", AF_INET, addr, sizeof addr), 0);
    assert_string_equal(addr, "127.0.0.1");
    struct job j = job_new("127.0.0.1", 2);
    j.iface = "lo";
    assert_int_equal(run_job(&j, body_small, NULL, 15), 0);
}

/* ---- hostile connections during rendezvous ------------------------------------------------- */

static int connect_port(const char *host, int port)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
    char serv[16];
    snprintf(serv, sizeof serv, "%d", port);
    if (getaddrinfo(host, serv, &hints, &ai) != 0)
        return -1;
    int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    return fd;
}

/* kind 0: wrong token, 1: random bytes, 2: oversized length, 3: silent. */
static pid_t spawn_intruder(const struct job *j, int kind)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    close(j->master_fd);
    int fd = connect_port(j->host, j->port);
    CHECK(fd >= 0, "intruder %d cannot connect", kind);
    if (kind == 0) {
        struct dt_auth_token bad;
        dt_auth_token_set(&bad, "not-the-job-token-at-all", 24, "test");
        int rc = dt_auth_client(fd, &bad, 1, 0, dt_now() + 5, "master");
        CHECK(rc == -DT_ERUNTIME, "wrong token was accepted");
    } else if (kind == 1) {
        uint8_t junk[4096];
        for (size_t i = 0; i < sizeof junk; i++)
            junk[i] = (uint8_t)(i * 7919 >> 3);
        (void)!write(fd, junk, sizeof junk);
        dt_sleep(0.5);
    } else if (kind == 2) {
        uint8_t hdr[DT_WIRE_HDR];
        dt_wire_pack(hdr, DT_OP_AUTH, 0, 0xfffffff0u);
        (void)!write(fd, hdr, sizeof hdr);
        dt_sleep(0.5);
    } else {
        dt_sleep(2.0);
    }
    close(fd);
    _exit(0);
}

static char *slurp(const char *path)
{
    static char buf[16384];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = 0;
    if (f)
        fclose(f);
    return buf;
}

static void test_intruders_are_dropped_and_job_completes(void **state)
{
    (void)state;
    struct job j = job_new("127.0.0.1", 3);
    j.handshake_timeout = 0.5;
    char log[] = "/tmp/dtrain-test-tcp-XXXXXX";
    int lfd = mkstemp(log);
    close(lfd);
    pid_t pids[7];
    pids[0] = spawn_rank(&j, 0, body_small, NULL, log);
    for (int k = 0; k < 4; k++)
        pids[3 + k] = spawn_intruder(&j, k);
    dt_sleep(0.8); /* the intruders get there first */
    pids[1] = spawn_rank(&j, 1, body_small, NULL, NULL);
    pids[2] = spawn_rank(&j, 2, body_small, NULL, NULL);
    close(j.master_fd);
    assert_int_equal(wait_all(pids, 7, 20), 0);
    const char *text = slurp(log);
    unlink(log);
    assert_non_null(strstr(text, "dropped connection from 127.0.0.1:"));
    assert_non_null(strstr(text, "authentication failed (wrong job token?)"));
    assert_non_null(strstr(text, "bad message magic"));
    assert_non_null(strstr(text, "AUTH message length 4294967280, expected 68"));
    assert_non_null(strstr(text, "handshake timed out"));
}

/* ---- failures ------------------------------------------------------------------------------- */

/* arg: the all-reduce length (both paths: the small one reads header and payload at once). */
static void body_rank2_exits(struct dt_comm *c, const struct job *j, void *arg)
{
    (void)j;
    size_t n = *(const size_t *)arg;
    float *a = calloc(n, sizeof *a);
    CHECK(c->allreduce_sum(c, a, n) == 0, "first allreduce");
    if (c->rank == 2)
        _exit(0); /* dies without a word */
    double t0 = dt_now();
    int rc = c->allreduce_sum(c, a, n);
    CHECK(rc == -DT_ERUNTIME, "rank %d: allreduce with a dead rank returned %d", c->rank, rc);
    CHECK(strstr(dt_last_error(), "lost rank 2 (127.0.0.1)"), "rank %d: message '%s'", c->rank,
          dt_last_error());
    CHECK(dt_now() - t0 < 3.0, "took %.1f s", dt_now() - t0);
    CHECK(c->allreduce_sum(c, a, n) == -DT_ERUNTIME, "comm still usable after a failure");
    CHECK(strstr(dt_last_error(), "lost rank 2"), "sticky error");
    free(a);
}

static void test_lost_rank_is_named(void **state)
{
    (void)state;
    size_t lens[] = {300000, 100};
    for (int i = 0; i < 2; i++) {
        struct job j = job_new("127.0.0.1", 3);
        j.timeout = 2;
        assert_int_equal(run_job(&j, body_rank2_exits, &lens[i], 15), 0);
    }
}

static void body_rank1_stalls(struct dt_comm *c, const struct job *j, void *arg)
{
    (void)j, (void)arg;
    float a[64] = {0};
    if (c->rank == 1) {
        dt_sleep(2.5);
        return;
    }
    double t0 = dt_now();
    int rc = c->allreduce_sum(c, a, 64);
    CHECK(rc == -DT_ERUNTIME, "stalled peer: rc %d", rc);
    CHECK(strcmp(dt_last_error(),
                 "lost rank 1 (127.0.0.1): no progress for 1.0 s (collective timeout)") == 0,
          "message '%s'", dt_last_error());
    CHECK(dt_now() - t0 < 2.0, "took %.1f s", dt_now() - t0);
}

static void test_stalled_rank_times_out(void **state)
{
    (void)state;
    struct job j = job_new("127.0.0.1", 2);
    j.timeout = 1;
    assert_int_equal(run_job(&j, body_rank1_stalls, NULL, 15), 0);
}

static void test_rendezvous_timeout_names_missing_ranks(void **state)
{
    (void)state;
    struct job j = job_new("127.0.0.1", 4);
    j.rdzv_timeout = 1;
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            if (r)
                close(j.master_fd);
            struct dt_comm *c;
            int rc = rank_join(&j, r, &c);
            CHECK(rc == -DT_ERUNTIME, "rank %d: rc %d", r, rc);
            CHECK(strstr(dt_last_error(), "rendezvous timed out after 1.0 s: ranks 2, 3 never "
                                          "arrived (2 of 4 registered)"),
                  "rank %d: '%s'", r, dt_last_error());
            if (r == 1)
                CHECK(strstr(dt_last_error(), "(reported by master 127.0.0.1:"), "'%s'",
                      dt_last_error());
            _exit(0);
        }
    }
    close(j.master_fd);
    assert_int_equal(wait_all(pids, 2, 10), 0);
}

static void test_no_master_times_out(void **state)
{
    (void)state;
    struct job j = job_new("127.0.0.1", 2);
    close(j.master_fd); /* nobody listens there now */
    j.rdzv_timeout = 0.5;
    struct dt_comm *c;
    double t0 = dt_now();
    assert_int_equal(rank_join(&j, 1, &c), -DT_ERUNTIME);
    assert_true(dt_now() - t0 < 2.0);
    assert_non_null(strstr(dt_last_error(), "rendezvous timed out after 0.5 s: rank 1 could not "
                                            "join master 127.0.0.1:"));
    assert_non_null(strstr(dt_last_error(), "Connection refused"));
}

int main(void)
{
    signal(SIGPIPE, SIG_DFL); /* prove MSG_NOSIGNAL: a SIGPIPE would kill a rank */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_rank_and_bad_options),
        cmocka_unit_test(test_allreduce_2_3_4_ranks),
        cmocka_unit_test(test_small_path_1_to_4_ranks),
        cmocka_unit_test(test_ipv6_loopback),
        cmocka_unit_test(test_broadcast_every_root_and_barrier),
        cmocka_unit_test(test_iface_lo),
        cmocka_unit_test(test_intruders_are_dropped_and_job_completes),
        cmocka_unit_test(test_lost_rank_is_named),
        cmocka_unit_test(test_stalled_rank_times_out),
        cmocka_unit_test(test_rendezvous_timeout_names_missing_ranks),
        cmocka_unit_test(test_no_master_times_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* dist/hier: 2 "hosts" x 2 local ranks, with TCP communicators standing in for the local
 * (shm) ones: all-reduce sums, bit-identical results, broadcast from every root, barrier,
 * shape validation, and a lost leader failing its host's ranks quickly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dist/hier.h"
#include "dist/tcp.h"
#include "util/clock.h"
#include "util/err.h"
#include "tests/unit/rank_check.h"
#include "util/rng.h"

#define NODES 2
#define LOCAL 2

static const char token[] = "hier-test-token-0123456789";

static int listen_any(int *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    socklen_t len = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 16) < 0)
        return -1;
    getsockname(fd, (struct sockaddr *)&a, &len);
    *port = ntohs(a.sin_port);
    return fd;
}

static struct dt_comm *tcp_join(int rank, int size, int fd, int port, double timeout)
{
    struct dt_tcp_opts o;
    dt_tcp_opts_init(&o);
    o.rank = rank, o.size = size, o.local_rank = rank, o.local_size = size;
    o.master_host = "127.0.0.1", o.master_port = port, o.master_fd = rank == 0 ? fd : -1;
    o.token = (const uint8_t *)token, o.token_len = strlen(token);
    o.timeout = timeout, o.rendezvous_timeout = 10;
    struct dt_comm *c;
    CHECK(dt_tcp_comm_create(&c, &o) == 0, "tcp join rank %d of %d", rank, size);
    return c;
}

struct ports {
    int local_fd[NODES], local_port[NODES], lead_fd, lead_port;
};

static struct dt_comm *hier_join(const struct ports *p, int node, int lr, double timeout)
{
    for (int i = 0; i < NODES; i++)
        if (i != node || lr != 0)
            close(p->local_fd[i]);
    if (lr != 0 || node != 0)
        close(p->lead_fd);
    struct dt_comm *local = tcp_join(lr, LOCAL, p->local_fd[node], p->local_port[node], timeout);
    struct dt_comm *lead =
        lr == 0 ? tcp_join(node, NODES, p->lead_fd, p->lead_port, timeout) : NULL;
    struct dt_comm *c;
    CHECK(dt_hier_comm_create(&c, local, lead, node, NODES) == 0, "hier create");
    CHECK(c->rank == node * LOCAL + lr && c->size == NODES * LOCAL, "rank %d size %d", c->rank,
          c->size);
    CHECK(strcmp(c->backend, "hier") == 0 && c->local_rank == lr, "fields");
    return c;
}

static uint64_t fnv(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static void body_collectives(struct dt_comm *c)
{
    const size_t lens[] = {0, 1, 3, 65537, 300007};
    for (size_t li = 0; li < 5; li++) {
        size_t n = lens[li];
        float *a = malloc((n + 1) * sizeof *a);
        for (size_t i = 0; i < n; i++)
            a[i] = (float)((c->rank + 1) * (int)(i % 11 + 1));
        CHECK(c->allreduce_sum(c, a, n) == 0, "allreduce %zu", n);
        for (size_t i = 0; i < n; i++)
            CHECK(a[i] == (float)(10 * (int)(i % 11 + 1)), "sum at %zu: %g", i, (double)a[i]);
        for (size_t i = 0; i < n; i++) {
            struct dt_rng g;
            dt_rng_init(&g, dt_rng_key(3, DT_RNG_TEST, (uint64_t)c->rank, i));
            a[i] = dt_rng_uniform(&g) - 0.5f;
        }
        CHECK(c->allreduce_sum(c, a, n) == 0, "allreduce floats %zu", n);
        uint64_t h = fnv(a, n * sizeof *a), h0 = h;
        CHECK(c->broadcast(c, &h0, sizeof h0, 0) == 0, "broadcast hash");
        CHECK(h == h0, "rank %d differs (len %zu)", c->rank, n);
        free(a);
    }
    for (int root = 0; root < c->size; root++) {
        char msg[32] = "";
        if (c->rank == root)
            snprintf(msg, sizeof msg, "hello from %d", root);
        CHECK(c->broadcast(c, msg, sizeof msg, root) == 0, "broadcast root %d", root);
        char want[32];
        snprintf(want, sizeof want, "hello from %d", root);
        CHECK(strcmp(msg, want) == 0, "root %d: got '%s'", root, msg);
    }
    char x = 0;
    CHECK(c->broadcast(c, &x, 1, 4) == -DT_EUSAGE, "bad root");
    CHECK(c->barrier(c) == 0, "barrier");
}

static struct ports ports_new(void)
{
    struct ports p;
    for (int i = 0; i < NODES; i++)
        p.local_fd[i] = listen_any(&p.local_port[i]);
    p.lead_fd = listen_any(&p.lead_port);
    return p;
}

static void ports_close(struct ports *p)
{
    for (int i = 0; i < NODES; i++)
        close(p->local_fd[i]);
    close(p->lead_fd);
}

static int wait_all(pid_t *pids, int n, double limit)
{
    double end = dt_now() + limit;
    int failed = 0;
    for (int done = 0; done < n;) {
        for (int i = 0; i < n; i++) {
            int st;
            if (pids[i] > 0 && waitpid(pids[i], &st, WNOHANG) == pids[i]) {
                failed += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
                pids[i] = 0, done++;
            } else if (pids[i] > 0 && dt_now() > end) {
                kill(pids[i], SIGKILL);
                waitpid(pids[i], NULL, 0);
                pids[i] = 0, done++, failed++;
            }
        }
        dt_sleep(0.005);
    }
    return failed;
}

static void test_two_hosts_two_local(void **state)
{
    (void)state;
    struct ports p = ports_new();
    pid_t pids[NODES * LOCAL];
    for (int r = 0; r < NODES * LOCAL; r++)
        if ((pids[r] = fork()) == 0) {
            struct dt_comm *c = hier_join(&p, r / LOCAL, r % LOCAL, 10);
            body_collectives(c);
            c->close(c);
            _exit(0);
        }
    ports_close(&p);
    assert_int_equal(wait_all(pids, NODES * LOCAL, 25), 0);
}

static void test_lost_host_fails_everyone(void **state)
{
    (void)state;
    struct ports p = ports_new();
    pid_t pids[NODES * LOCAL];
    for (int r = 0; r < NODES * LOCAL; r++)
        if ((pids[r] = fork()) == 0) {
            struct dt_comm *c = hier_join(&p, r / LOCAL, r % LOCAL, 2);
            float a[1000] = {0};
            CHECK(c->allreduce_sum(c, a, 1000) == 0, "first allreduce");
            if (r >= LOCAL)
                _exit(0); /* the whole second host goes away */
            double t0 = dt_now();
            CHECK(c->allreduce_sum(c, a, 1000) == -DT_ERUNTIME, "rank %d: no error", r);
            CHECK(strstr(dt_last_error(), "lost rank"), "rank %d: '%s'", r, dt_last_error());
            CHECK(dt_now() - t0 < 4, "rank %d took %.1f s", r, dt_now() - t0);
            CHECK(c->barrier(c) == -DT_ERUNTIME, "sticky failure");
            c->close(c);
            _exit(0);
        }
    ports_close(&p);
    assert_int_equal(wait_all(pids, NODES * LOCAL, 15), 0);
}

static void test_shapes_are_checked(void **state)
{
    (void)state;
    struct dt_comm *c;
    assert_int_equal(dt_hier_comm_create(&c, NULL, NULL, 0, 1), -DT_EUSAGE);
    assert_string_equal(dt_last_error(), "hier: no local communicator");
    assert_int_equal(dt_hier_comm_create(&c, dt_comm_single(), NULL, 0, 1), -DT_EUSAGE);
    assert_string_equal(dt_last_error(), "hier: local rank 0 needs a leaders' communicator");
    assert_int_equal(dt_hier_comm_create(&c, dt_comm_single(), dt_comm_single(), 1, 2), -DT_EUSAGE);
    assert_string_equal(dt_last_error(),
                        "hier: leaders' communicator is rank 0 of 1, expected 1 of 2");
    assert_int_equal(dt_hier_comm_create(&c, dt_comm_single(), dt_comm_single(), 3, 2), -DT_EUSAGE);
    assert_string_equal(dt_last_error(), "hier: node 3 of 2 is out of range");
    /* One host of one rank: everything degenerates to no-ops. */
    assert_int_equal(dt_hier_comm_create(&c, dt_comm_single(), dt_comm_single(), 0, 1), 0);
    float v = 2;
    assert_int_equal(c->allreduce_sum(c, &v, 1), 0);
    assert_true(v == 2);
    assert_int_equal(c->broadcast(c, &v, sizeof v, 0), 0);
    assert_int_equal(c->barrier(c), 0);
    c->close(c);
}

int main(void)
{
    signal(SIGPIPE, SIG_DFL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes_are_checked),
        cmocka_unit_test(test_two_hosts_two_local),
        cmocka_unit_test(test_lost_host_fails_everyone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* dist/backend.c: the automatic choice for every job shape, what an explicit choice must fit,
 * the names, and DTRAIN_SOCKET_BUFFER / DTRAIN_SOCKET_IFNAME read in one place. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "dist/backend.h"
#include "util/err.h"

struct row {
    const char *name;
    int world, nodes;
    bool per_rank;
    const char *source;
    int expect; /* a backend, or -1 for DT_EUSAGE */
    const char *message;
};

static const struct row table[] = {
    /* auto */
    {"auto", 1, 1, false, "none", DT_BACKEND_SINGLE, NULL},
    {"auto", 4, 1, false, "none", DT_BACKEND_SHM, NULL},
    {"auto", 8, 2, false, "flags", DT_BACKEND_HIER, NULL},
    {"auto", 8, 2, true, "ompi", DT_BACKEND_TCP, NULL},
    {"auto", 4, 1, true, "slurm", DT_BACKEND_TCP, NULL},
    {"auto", 1, 1, true, "torchrun", DT_BACKEND_SINGLE, NULL},
    /* explicit */
    {"shm", 4, 1, false, "none", DT_BACKEND_SHM, NULL},
    {"shm", 1, 1, false, "none", DT_BACKEND_SINGLE, NULL},
    {"shm", 8, 2, false, "flags", -1, "spans 2 hosts"},
    {"shm", 4, 1, true, "slurm", -1, "do not share a parent"},
    {"hier", 4, 1, false, "none", DT_BACKEND_SHM, NULL},
    {"hier", 8, 2, false, "flags", DT_BACKEND_HIER, NULL},
    {"hier", 8, 2, true, "ompi", -1, "do not share a parent"},
    {"tcp", 4, 1, false, "none", DT_BACKEND_TCP, NULL},
    {"tcp", 1, 1, false, "none", DT_BACKEND_SINGLE, NULL},
    {"tcp", 8, 2, true, "ompi", DT_BACKEND_TCP, NULL},
    {"mpi", 4, 1, true, "ompi", DT_BACKEND_MPI, NULL},
    {"mpi", 1, 1, true, "ompi", DT_BACKEND_MPI, NULL},
    {"mpi", 4, 1, true, "slurm", -1, "mpirun"},
    {"mpi", 4, 1, false, "none", -1, "mpirun"},
};

static void test_choice_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        const struct row *r = &table[i];
        struct dt_backend_job j;
        dt_backend_job_init(&j);
        j.world = r->world, j.nodes = r->nodes, j.per_rank = r->per_rank, j.launcher = r->source;
        int request = dt_names_find(&dt_backend_request_names, r->name);
        assert_true(request >= 0);
        int rc = dt_backend_choose((enum dt_backend_request)request, &j);
        enum dt_backend b = j.backend;
        if (r->expect < 0) {
            if (rc != -DT_EUSAGE || !strstr(dt_last_error(), r->message))
                fail_msg("row %zu (%s, %d ranks, %d hosts): rc %d, '%s'", i, r->name, r->world,
                         r->nodes, rc, dt_last_error());
        } else if (rc != 0 || (int)b != r->expect) {
            fail_msg("row %zu (%s, %d ranks, %d hosts): rc %d, got %s, expected %s", i, r->name,
                     r->world, r->nodes, rc, dt_backend_name(b),
                     dt_backend_name((enum dt_backend)r->expect));
        }
    }
}

/* dist.backend's names are requests: auto and every backend but single, which no config
 * asks for (a one-rank job gets it); "nccl" is not one. */
static void test_request_names(void **state)
{
    (void)state;
    assert_int_equal(dt_backend_request_names.count, DT_BACKEND_REQUEST_COUNT);
    assert_int_equal(dt_names_find(&dt_backend_request_names, "auto"), DT_BACKEND_REQUEST_AUTO);
    assert_int_equal(dt_names_find(&dt_backend_request_names, "single"), -1);
    assert_int_equal(dt_names_find(&dt_backend_request_names, "nccl"), -1);
    for (int r = DT_BACKEND_REQUEST_SHM; r < DT_BACKEND_REQUEST_COUNT; r++) {
        enum dt_backend b;
        assert_int_equal(dt_backend_parse(dt_names_name(&dt_backend_request_names, r), &b), 0);
    }
}

static void test_names_round_trip(void **state)
{
    (void)state;
    for (int b = DT_BACKEND_SINGLE; b <= DT_BACKEND_MPI; b++) {
        enum dt_backend got;
        assert_int_equal(dt_backend_parse(dt_backend_name((enum dt_backend)b), &got), 0);
        assert_int_equal(got, b);
    }
    enum dt_backend got;
    assert_int_equal(dt_backend_parse("auto", &got), -DT_EUSAGE);
    assert_string_equal(dt_backend_name((enum dt_backend)42), "unknown");
}

static void test_environment(void **state)
{
    (void)state;
    int sockbuf;
    const char *iface;
    unsetenv("DTRAIN_SOCKET_BUFFER");
    unsetenv("DTRAIN_SOCKET_IFNAME");
    assert_int_equal(dt_backend_env(&sockbuf, &iface), 0);
    assert_int_equal(sockbuf, 0);
    assert_null(iface);
    setenv("DTRAIN_SOCKET_BUFFER", "4M", 1);
    setenv("DTRAIN_SOCKET_IFNAME", "veth0", 1);
    assert_int_equal(dt_backend_env(&sockbuf, &iface), 0);
    assert_int_equal(sockbuf, 4 << 20);
    assert_string_equal(iface, "veth0");
    setenv("DTRAIN_SOCKET_BUFFER", "2G", 1);
    assert_int_equal(dt_backend_env(&sockbuf, &iface), -DT_EUSAGE);
    assert_non_null(strstr(dt_last_error(), "DTRAIN_SOCKET_BUFFER"));
    setenv("DTRAIN_SOCKET_BUFFER", "lots", 1);
    assert_int_equal(dt_backend_env(&sockbuf, &iface), -DT_EUSAGE);
    unsetenv("DTRAIN_SOCKET_BUFFER");
    unsetenv("DTRAIN_SOCKET_IFNAME");
}

/* A job whose ranks do not split evenly into its simulated hosts is refused before anything is
 * made; a one-rank single job prepares nothing and joins the trivial communicator. */
static void test_prepare_and_join_single(void **state)
{
    (void)state;
    struct dt_backend_job j;
    dt_backend_job_init(&j);
    j.backend = DT_BACKEND_HIER;
    j.world = j.local_n = j.host_ranks = 5;
    j.nodes = j.groups = 2;
    assert_int_equal(dt_backend_prepare(&j), -DT_EUSAGE);
    assert_int_equal(j.nsegs, 0);
    assert_int_equal(j.master_fd, -1);

    dt_backend_job_init(&j);
    assert_int_equal(dt_backend_prepare(&j), 0);
    struct dt_comm *c = NULL;
    assert_int_equal(dt_backend_join(&j, 0, &c), 0);
    assert_int_equal(c->size, 1);
    assert_string_equal(c->backend, "single");
    c->close(c);
    dt_backend_release(&j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_choice_table),
        cmocka_unit_test(test_names_round_trip),
        cmocka_unit_test(test_request_names),
        cmocka_unit_test(test_environment),
        cmocka_unit_test(test_prepare_and_join_single),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

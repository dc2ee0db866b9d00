/* dist/launch_env: flags, faked mpirun / srun / torchrun environments, precedence, Slurm
 * hostlists, HOST:PORT parsing, and every malformed input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "dist/launch_env.h"
#include "util/err.h"

static struct dt_launch_env detect_ok(const struct dt_launch_flags *f, char **envp)
{
    struct dt_launch_env e;
    int rc = dt_launch_env_detect(&e, f, envp);
    if (rc < 0)
        fail_msg("detect failed: %s", dt_last_error());
    return e;
}

static void detect_bad(const struct dt_launch_flags *f, char **envp, const char *msg)
{
    struct dt_launch_env e;
    assert_int_equal(dt_launch_env_detect(&e, f, envp), -DT_EUSAGE);
    assert_string_equal(dt_last_error(), msg);
}

static void test_nothing_is_one_host(void **state)
{
    (void)state;
    char *env[] = {"HOME=/root", NULL};
    struct dt_launch_env e = detect_ok(NULL, env);
    assert_string_equal(e.source, "none");
    assert_int_equal(e.nodes, 1);
    assert_int_equal(e.node_rank, 0);
    assert_int_equal(e.rank, -1);
    assert_string_equal(e.master_host, "127.0.0.1");
    assert_int_equal(e.master_port, 0);
}

static void test_flags(void **state)
{
    (void)state;
    struct dt_launch_flags f;
    dt_launch_flags_init(&f);
    f.nodes = 4, f.node_rank = 2, f.master = "node01:29501";
    char *env[] = {"OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=8", NULL};
    struct dt_launch_env e = detect_ok(&f, env);
    assert_string_equal(e.source, "flags");
    assert_int_equal(e.nodes, 4);
    assert_int_equal(e.node_rank, 2);
    assert_int_equal(e.rank, -1);
    assert_string_equal(e.master_host, "node01");
    assert_int_equal(e.master_port, 29501);

    f.master = "[fe80::1]:7000";
    e = detect_ok(&f, env);
    assert_string_equal(e.master_host, "fe80::1");
    assert_int_equal(e.master_port, 7000);

    f.master = NULL;
    detect_bad(&f, (char *[]){NULL},
               "4 nodes need a master address: pass --master HOST:PORT or set MASTER_ADDR and "
               "MASTER_PORT");
    f.master = "h:1", f.node_rank = 4;
    detect_bad(&f, (char *[]){NULL}, "--node-rank 4 out of range for 4 nodes");
    f.node_rank = 0, f.nodes = 0;
    detect_bad(&f, (char *[]){NULL}, "--nodes 0: need at least 1");
}

static void test_ompi(void **state)
{
    (void)state;
    char *env[] = {"OMPI_COMM_WORLD_RANK=5",
                   "OMPI_COMM_WORLD_SIZE=8",
                   "OMPI_COMM_WORLD_LOCAL_RANK=1",
                   "OMPI_COMM_WORLD_LOCAL_SIZE=4",
                   "MASTER_ADDR=10.0.0.1",
                   "MASTER_PORT=4000",
                   "SLURM_PROCID=3",
                   "SLURM_NTASKS=8",
                   "RANK=7",
                   "WORLD_SIZE=8",
                   NULL};
    struct dt_launch_env e = detect_ok(NULL, env);
    assert_string_equal(e.source, "ompi"); /* OMPI beats Slurm and torchrun */
    assert_int_equal(e.rank, 5);
    assert_int_equal(e.size, 8);
    assert_int_equal(e.local_rank, 1);
    assert_int_equal(e.local_size, 4);
    assert_int_equal(e.nodes, 2);
    assert_int_equal(e.node_rank, 1);
    assert_string_equal(e.master_host, "10.0.0.1");
    assert_int_equal(e.master_port, 4000);

    /* --master beats MASTER_ADDR; the identity still comes from mpirun. */
    struct dt_launch_flags f;
    dt_launch_flags_init(&f);
    f.master = "head:5000";
    e = detect_ok(&f, env);
    assert_string_equal(e.source, "ompi");
    assert_string_equal(e.master_host, "head");

    detect_bad(NULL, (char *[]){"OMPI_COMM_WORLD_RANK=1", NULL},
               "OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not");
    detect_bad(NULL, (char *[]){"OMPI_COMM_WORLD_RANK=8", "OMPI_COMM_WORLD_SIZE=8", NULL},
               "OMPI_COMM_WORLD_RANK: '8' is not an integer in 0..7");
    detect_bad(NULL, (char *[]){"OMPI_COMM_WORLD_RANK=x1", "OMPI_COMM_WORLD_SIZE=8", NULL},
               "OMPI_COMM_WORLD_RANK: 'x1' is not an integer in 0..7");
    detect_bad(NULL,
               (char *[]){"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
                          "OMPI_COMM_WORLD_LOCAL_RANK=1", NULL},
               "OMPI_COMM_WORLD_LOCAL_RANK is set but OMPI_COMM_WORLD_LOCAL_SIZE is not");
    detect_bad(NULL, (char *[]){"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", NULL},
               "2 nodes need a master address: pass --master HOST:PORT or set MASTER_ADDR and "
               "MASTER_PORT");
}

static void test_slurm(void **state)
{
    (void)state;
    char *env[] = {"SLURM_PROCID=5",      "SLURM_NTASKS=8",
                   "SLURM_LOCALID=1",     "SLURM_NODEID=2",
                   "SLURM_NNODES=4",      "SLURM_JOB_NODELIST=node[01-04,07],gpu3",
                   "SLURM_JOB_ID=123456", "NNODES=9",
                   "NODE_RANK=3",         NULL};
    struct dt_launch_env e = detect_ok(NULL, env);
    assert_string_equal(e.source, "slurm"); /* Slurm beats torchrun-style variables */
    assert_int_equal(e.rank, 5);
    assert_int_equal(e.size, 8);
    assert_int_equal(e.local_rank, 1);
    assert_int_equal(e.local_size, 2);
    assert_int_equal(e.nodes, 4);
    assert_int_equal(e.node_rank, 2);
    assert_string_equal(e.master_host, "node01");
    assert_int_equal(e.master_port, 29500 + 456);

    char *env2[] = {"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_JOB_NODELIST=a,b",
                    "MASTER_PORT=6000", NULL};
    e = detect_ok(NULL, env2);
    assert_string_equal(e.master_host, "a");
    assert_int_equal(e.master_port, 6000);
    assert_int_equal(e.nodes, 1);

    detect_bad(NULL,
               (char *[]){"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_JOB_NODELIST=n[01-", NULL},
               "SLURM_JOB_NODELIST: malformed range in 'n[01-'");
}

static void test_slurm_hostlists(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"node[01-04]", "node01"},
        {"a,b", "a"},
        {"gpu[3,5-6]", "gpu3"},
        {"host-1", "host-1"},
        {"node[01-04,07],gpu3", "node01"},
        {"rack[2-3]-n[009-010]", "rack2-n009"},
        {"x[7]", "x7"},
    };
    char out[64];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        assert_int_equal(dt_launch_slurm_first_host(cases[i][0], out, sizeof out), 0);
        assert_string_equal(out, cases[i][1]);
    }
    static const char *const bad[][2] = {
        {"", "SLURM_JOB_NODELIST: no host in ''"},
        {",a", "SLURM_JOB_NODELIST: no host in ',a'"},
        {"n[]", "SLURM_JOB_NODELIST: malformed range in 'n[]'"},
        {"n[a-b]", "SLURM_JOB_NODELIST: malformed range in 'n[a-b]'"},
        {"n[-3]", "SLURM_JOB_NODELIST: malformed range in 'n[-3]'"},
        {"n]1", "SLURM_JOB_NODELIST: unbalanced ']' in 'n]1'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(dt_launch_slurm_first_host(bad[i][0], out, sizeof out), -DT_EUSAGE);
        assert_string_equal(dt_last_error(), bad[i][1]);
    }
    assert_int_equal(dt_launch_slurm_first_host("averyveryverylonghostname", out, 8), -DT_EUSAGE);
}

static void test_torchrun(void **state)
{
    (void)state;
    char *per_node[] = {"MASTER_ADDR=head", "MASTER_PORT=29400", "NNODES=3", "NODE_RANK=1", NULL};
    struct dt_launch_env e = detect_ok(NULL, per_node);
    assert_string_equal(e.source, "torchrun");
    assert_int_equal(e.nodes, 3);
    assert_int_equal(e.node_rank, 1);
    assert_int_equal(e.rank, -1);
    assert_string_equal(e.master_host, "head");
    assert_int_equal(e.master_port, 29400);

    char *per_rank[] = {"MASTER_ADDR=::1",    "RANK=3", "WORLD_SIZE=4", "LOCAL_RANK=1",
                        "LOCAL_WORLD_SIZE=2", NULL};
    e = detect_ok(NULL, per_rank);
    assert_int_equal(e.rank, 3);
    assert_int_equal(e.local_rank, 1);
    assert_int_equal(e.nodes, 2);
    assert_int_equal(e.node_rank, 1);
    assert_string_equal(e.master_host, "::1");
    assert_int_equal(e.master_port, 29500);

    detect_bad(NULL, (char *[]){"NNODES=2", NULL}, "NNODES is set but NODE_RANK is not");
    detect_bad(NULL, (char *[]){"NNODES=2", "NODE_RANK=2", "MASTER_ADDR=h", NULL},
               "NODE_RANK: '2' is not an integer in 0..1");
    detect_bad(NULL, (char *[]){"NNODES=2", "NODE_RANK=1", "MASTER_ADDR=h", "MASTER_PORT=0", NULL},
               "MASTER_PORT: '0' is not an integer in 1..65535");
    detect_bad(NULL, (char *[]){"NNODES=2", "NODE_RANK=1", "MASTER_ADDR=", NULL},
               "MASTER_ADDR: '' is not a host name");
}

/* --instances N > 1 under a launcher: its ranks count hosts when it started one process per
 * host. Kubernetes PyTorchJob: the operator sets RANK (the pod's index), WORLD_SIZE (pods),
 * MASTER_ADDR and MASTER_PORT in every pod, no LOCAL_*; mpirun --npernode 1; srun
 * --ntasks-per-node=1. Several processes per host with N > 1 are refused. */
static void test_instances_under_launchers(void **state)
{
    (void)state;
    char *pod[] = {"MASTER_ADDR=job-master-0", "MASTER_PORT=23456", "RANK=2", "WORLD_SIZE=3", NULL};
    struct dt_launch_flags f;
    dt_launch_flags_init(&f);
    assert_int_equal(f.instances, 1);
    f.instances = 4;
    struct dt_launch_env e = detect_ok(&f, pod);
    assert_string_equal(e.source, "torchrun");
    assert_int_equal(e.nodes, 3);
    assert_int_equal(e.node_rank, 2);
    assert_int_equal(e.rank, -1); /* per host: this dtrain forks its ranks */
    assert_int_equal(e.size, -1);
    assert_int_equal(e.local_rank, -1);
    assert_int_equal(e.local_size, -1);
    assert_string_equal(e.master_host, "job-master-0");
    assert_int_equal(e.master_port, 23456);

    /* one instance: a rank per pod, as before */
    f.instances = 1;
    e = detect_ok(&f, pod);
    assert_int_equal(e.rank, 2);
    assert_int_equal(e.size, 3);
    assert_int_equal(e.nodes, 3);
    assert_int_equal(e.node_rank, 2);
    e = detect_ok(NULL, pod);
    assert_int_equal(e.rank, 2);

    /* --nodes/--node-rank on the command line still win */
    f.instances = 2, f.nodes = 5, f.node_rank = 4, f.master = "m:1";
    e = detect_ok(&f, pod);
    assert_string_equal(e.source, "flags");
    assert_int_equal(e.nodes, 5);
    assert_int_equal(e.node_rank, 4);
    dt_launch_flags_init(&f);
    f.instances = 2;

    /* torchrun --nproc-per-node 1 inside each pod: LOCAL_WORLD_SIZE 1, the same */
    e = detect_ok(&f, (char *[]){"MASTER_ADDR=h", "RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=0",
                                 "LOCAL_WORLD_SIZE=1", NULL});
    assert_int_equal(e.nodes, 2);
    assert_int_equal(e.node_rank, 1);
    assert_int_equal(e.rank, -1);
    /* torchrun started 2 ranks per host: --instances would fork 2 in each */
    detect_bad(&f,
               (char *[]){"MASTER_ADDR=h", "RANK=1", "WORLD_SIZE=4", "LOCAL_RANK=1",
                          "LOCAL_WORLD_SIZE=2", NULL},
               "dist.instances is 2, but torchrun started 2 processes on this host, one per "
               "rank: leave instances at 1, or start one dtrain per host (torchrun "
               "--nproc-per-node 1, or no torchrun: RANK and WORLD_SIZE then count hosts) and "
               "let it fork the ranks");
    detect_bad(&f, (char *[]){"MASTER_ADDR=h", "RANK=1", NULL},
               "RANK is set but WORLD_SIZE is not");
    detect_bad(&f, (char *[]){"MASTER_ADDR=h", "RANK=3", "WORLD_SIZE=3", NULL},
               "RANK: '3' is not an integer in 0..2");
    /* several pods need the master's address */
    detect_bad(&f, (char *[]){"RANK=0", "WORLD_SIZE=2", NULL},
               "2 nodes need a master address: pass --master HOST:PORT or set MASTER_ADDR and "
               "MASTER_PORT");
    /* one pod: no master needed, the ranks meet on loopback */
    e = detect_ok(&f, (char *[]){"RANK=0", "WORLD_SIZE=1", NULL});
    assert_int_equal(e.nodes, 1);
    assert_int_equal(e.rank, -1);
    assert_string_equal(e.master_host, "127.0.0.1");

    /* mpirun --npernode 1 (Kubeflow's MPIJob with slotsPerWorker 1) */
    e = detect_ok(&f, (char *[]){"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4",
                                 "OMPI_COMM_WORLD_LOCAL_RANK=0", "OMPI_COMM_WORLD_LOCAL_SIZE=1",
                                 "MASTER_ADDR=w0", NULL});
    assert_string_equal(e.source, "ompi");
    assert_int_equal(e.nodes, 4);
    assert_int_equal(e.node_rank, 1);
    assert_int_equal(e.rank, -1);
    detect_bad(&f,
               (char *[]){"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4",
                          "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=2",
                          "MASTER_ADDR=w0", NULL},
               "dist.instances is 2, but ompi started 2 processes on this host, one per rank: "
               "leave instances at 1, or start one dtrain per host (mpirun --npernode 1) and let "
               "it fork the ranks");
    /* srun --ntasks-per-node=1 over 2 nodes; the master from the node list as before */
    e = detect_ok(&f, (char *[]){"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_LOCALID=0",
                                 "SLURM_NODEID=1", "SLURM_NNODES=2", "SLURM_JOB_NODELIST=n[1-2]",
                                 "SLURM_JOB_ID=5", NULL});
    assert_string_equal(e.source, "slurm");
    assert_int_equal(e.nodes, 2);
    assert_int_equal(e.node_rank, 1);
    assert_int_equal(e.rank, -1);
    assert_string_equal(e.master_host, "n1");
    assert_int_equal(e.master_port, 29505);
    /* srun -n 4 over 2 nodes: 2 tasks per node */
    detect_bad(&f,
               (char *[]){"SLURM_PROCID=1", "SLURM_NTASKS=4", "SLURM_LOCALID=1", "SLURM_NODEID=0",
                          "SLURM_NNODES=2", "SLURM_JOB_NODELIST=n[1-2]", "SLURM_JOB_ID=5", NULL},
               "dist.instances is 2, but slurm started 2 processes on this host, one per rank: "
               "leave instances at 1, or start one dtrain per host (srun --ntasks-per-node=1) "
               "and let it fork the ranks");
}

static void test_hostport(void **state)
{
    (void)state;
    char host[256];
    int port;
    assert_int_equal(dt_launch_parse_hostport("10.1.2.3:80", host, &port, "--master"), 0);
    assert_string_equal(host, "10.1.2.3");
    assert_int_equal(port, 80);
    assert_int_equal(dt_launch_parse_hostport("[::1]:29500", host, &port, "--master"), 0);
    assert_string_equal(host, "::1");
    static const char *const bad[][2] = {
        {"host", "--master: 'host' is not HOST:PORT (write IPv6 as [ADDRESS]:PORT)"},
        {"::1:80", "--master: '::1:80' is not HOST:PORT (write IPv6 as [ADDRESS]:PORT)"},
        {"[::1]80", "--master: '[::1]80' is not [ADDRESS]:PORT"},
        {":80", "--master: ':80' has no usable host"},
        {"h:0", "--master: '0' is not an integer in 1..65535"},
        {"h:65536", "--master: '65536' is not an integer in 1..65535"},
        {"h:", "--master: '' is not an integer in 1..65535"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(dt_launch_parse_hostport(bad[i][0], host, &port, "--master"), -DT_EUSAGE);
        assert_string_equal(dt_last_error(), bad[i][1]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nothing_is_one_host),
        cmocka_unit_test(test_flags),
        cmocka_unit_test(test_ompi),
        cmocka_unit_test(test_slurm),
        cmocka_unit_test(test_slurm_hostlists),
        cmocka_unit_test(test_torchrun),
        cmocka_unit_test(test_instances_under_launchers),
        cmocka_unit_test(test_hostport),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

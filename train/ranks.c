#include "train/ranks.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cmd/cli.h"
#include "train/setup.h"
#include "dist/auth.h"
#include "dist/hier.h"
#include "dist/launcher.h"
#include "dist/mpi_comm.h"
#include "dist/shm.h"
#include "dist/tcp.h"
#include "dist/topology.h"
#include "nn/model.h"
#include "util/err.h"
#include "util/log.h"

enum backend { B_SINGLE, B_SHM, B_TCP, B_HIER, B_MPI };
static const char *const backend_names[] = {"single", "shm", "tcp", "hier", "mpi"};

struct job {
    const struct dt_config *cfg;
    const struct dt_job_opts *o;
    struct dt_launch_env env;
    bool per_rank;  /* an outside launcher started every rank: this process is one, no fork */
    int local_n;    /* ranks this process runs */
    int host_ranks; /* ranks on this host (pinning divides the host among them) */
    int rank_base;  /* global rank of this process's local rank 0 */
    int world;
    enum backend backend;
    struct dt_pin_plan plan;
    bool pinned;
    struct dt_shm_segment *seg;
    struct dt_auth_token token;
    int master_fd; /* one host over TCP: rank 0's listening socket, bound before the fork */
    int master_port;
    int sockbuf; /* DTRAIN_SOCKET_BUFFER, 0 = dist/tcp's default */
    int (*rank_main)(struct dt_comm *, void *);
    void *arg;
};

void dt_job_opts_init(struct dt_job_opts *o)
{
    memset(o, 0, sizeof *o);
    dt_launch_flags_init(&o->launch);
}

static int job_shape(struct job *j)
{
    const struct dt_config *cfg = j->cfg;
    struct dt_launch_flags flags = j->o->launch;
    flags.no_master = !strcmp(cfg->dist.backend, "mpi");
    int rc = dt_launch_env_detect(&j->env, &flags, NULL);
    if (rc)
        return rc;
    j->per_rank = j->env.rank >= 0;
    if (j->per_rank) {
        if (cfg->dist.instances > 1)
            return dt_fail(DT_EUSAGE,
                           "dist.instances is %d, but %s started every rank as its own process: "
                           "leave instances at 1 (one process = one rank)",
                           cfg->dist.instances, j->env.source);
        j->local_n = 1;
        j->host_ranks = j->env.local_size;
        j->rank_base = j->env.rank;
        j->world = j->env.size;
    } else {
        j->local_n = cfg->dist.instances;
        j->host_ranks = j->local_n;
        j->rank_base = j->env.node_rank * j->local_n;
        j->world = j->env.nodes * j->local_n;
    }
    return 0;
}

int dt_job_local_shape(const struct dt_config *cfg, const struct dt_job_opts *o, int *instances,
                       int *threads)
{
    struct job j = {.cfg = cfg, .o = o};
    int rc = job_shape(&j);
    if (rc)
        return rc;
    *instances = j.host_ranks;
    *threads = dt_run_threads(cfg, j.host_ranks);
    return 0;
}

static int pick_backend(struct job *j)
{
    const char *b = j->cfg->dist.backend;
    bool one_host = j->env.nodes == 1 && !j->per_rank;
    if (!strcmp(b, "auto")) {
        if (j->world == 1)
            j->backend = B_SINGLE;
        else if (one_host)
            j->backend = B_SHM;
        else if (j->per_rank)
            j->backend = B_TCP;
        else
            j->backend = B_HIER;
        return 0;
    }
    if (!strcmp(b, "mpi")) {
        if (!j->per_rank || strcmp(j->env.source, "ompi"))
            return dt_fail(DT_EUSAGE, "dist.backend mpi: start dtrain with mpirun, one process "
                                      "per rank (found no Open MPI environment)");
        j->backend = B_MPI;
    } else if (!strcmp(b, "tcp")) {
        j->backend = B_TCP;
    } else if (!strcmp(b, "shm") || !strcmp(b, "hier")) {
        if (j->per_rank)
            return dt_fail(DT_EUSAGE,
                           "dist.backend %s: ranks started by %s do not share a parent; use tcp "
                           "or mpi, or start one dtrain per host with --instances",
                           b, j->env.source);
        if (!strcmp(b, "shm") && !one_host)
            return dt_fail(DT_EUSAGE, "dist.backend shm: the job spans %d hosts; use hier or tcp",
                           j->env.nodes);
        j->backend = one_host ? B_SHM : B_HIER;
    } else {
        return dt_fail(DT_EUSAGE, "dist.backend: unknown backend '%s'", b);
    }
    if (j->world == 1 && j->backend != B_MPI)
        j->backend = B_SINGLE;
    return 0;
}

bool dt_job_shares_memory(const struct dt_config *cfg, const struct dt_job_opts *o)
{
    struct job j = {.cfg = cfg, .o = o};
    return job_shape(&j) == 0 && pick_backend(&j) == 0 && j.backend == B_SHM;
}

static enum dt_pin_mode pin_mode(const struct dt_config *cfg)
{
    if (cfg->dist.cpu_list[0])
        return DT_PIN_LIST;
    if (!strcmp(cfg->dist.pin, "none"))
        return DT_PIN_NONE;
    return strcmp(cfg->dist.pin, "sockets") ? DT_PIN_CORES : DT_PIN_SOCKETS;
}

/* Plans the CPUs of every rank on this host; warns once when they are oversubscribed. A host
 * whose topology cannot be read still trains, unpinned. */
static int plan_pinning(struct job *j)
{
    struct dt_topology t;
    if (dt_topology_read(&t, NULL, NULL) < 0) {
        dt_log_warn("cannot read the CPU topology (%s); ranks are not pinned", dt_last_error());
        return 0;
    }
    int threads = j->cfg->dist.threads > 0 ? j->cfg->dist.threads : 1;
    int rc = dt_pin_plan_make(&j->plan, &t, pin_mode(j->cfg), j->cfg->dist.cpu_list, j->host_ranks,
                              threads);
    bool first_on_host = !j->per_rank || j->env.local_rank == 0;
    if (rc == 0) {
        j->pinned = true;
        if (j->plan.oversubscribed && first_on_host)
            dt_log_warn("%d instance%s x %d thread%s = %d exceeds the %d usable CPUs: the run "
                        "is oversubscribed and will be slower than it could be",
                        j->host_ranks, j->host_ranks == 1 ? "" : "s", threads,
                        threads == 1 ? "" : "s", j->host_ranks * threads, t.ncpus);
        if (j->o->verbose && first_on_host) {
            char desc[160];
            dt_topology_describe(&t, desc, sizeof desc);
            dt_log_info("topology: %s; pinning: %s", desc,
                        pin_mode(j->cfg) == DT_PIN_LIST ? j->cfg->dist.cpu_list : j->cfg->dist.pin);
            for (int r = 0; r < j->host_ranks && j->plan.cpus; r++) {
                char list[256];
                dt_cpu_list_format(j->plan.cpus + (size_t)r * j->plan.stride, j->plan.ncpus[r],
                                   list, sizeof list);
                dt_log_info("rank %d: cpus %s, %d thread%s", j->rank_base + r, list, threads,
                            threads == 1 ? "" : "s");
            }
        }
    }
    dt_topology_free(&t);
    return rc;
}

/* One host over TCP: rank 0's listening socket is bound before the fork, on a free port of
 * the loopback interface, so concurrent jobs never collide on a fixed port. */
static int bind_local_master(struct job *j)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 128) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        if (fd >= 0)
            close(fd);
        return dt_fail(DT_ERUNTIME, "cannot listen on 127.0.0.1 for the rendezvous");
    }
    j->master_fd = fd;
    j->master_port = ntohs(a.sin_port);
    return 0;
}

static int tcp_join(const struct job *j, int rank, int size, int local_rank, int local_size,
                    int ranks_per_peer, struct dt_comm **out)
{
    struct dt_tcp_opts t;
    dt_tcp_opts_init(&t);
    t.rank = rank, t.size = size, t.local_rank = local_rank, t.local_size = local_size;
    t.master_host = j->env.master_host;
    t.master_port = j->master_port;
    t.master_fd = rank == 0 ? j->master_fd : -1;
    t.token = j->token.bytes, t.token_len = j->token.len;
    t.iface = j->o->iface ? j->o->iface : getenv("DTRAIN_SOCKET_IFNAME");
    t.rendezvous_timeout = j->o->rendezvous_timeout;
    t.timeout = j->cfg->dist.timeout;
    t.ranks_per_peer = ranks_per_peer;
    t.sockbuf = j->sockbuf;
    t.oversubscribed = j->pinned && j->plan.oversubscribed;
    return dt_tcp_comm_create(out, &t);
}

/* The communicator of local rank r of this process. */
static int make_comm(const struct job *j, int r, struct dt_comm **out)
{
    int lr = j->per_rank ? j->env.local_rank : r;
    switch (j->backend) {
    case B_SINGLE:
        return (*out = dt_comm_single()) ? 0 : dt_fail(DT_ERUNTIME, "out of memory");
    case B_SHM:
        return dt_shm_comm_create(out, j->seg, r);
    case B_TCP:
        return tcp_join(j, j->rank_base + r, j->world, lr, j->host_ranks, 1, out);
    case B_MPI:
        return dt_mpi_comm_create(out);
    case B_HIER: {
        struct dt_comm *local = NULL, *leaders = NULL;
        int rc = dt_shm_comm_create(&local, j->seg, r);
        if (rc == 0 && r == 0)
            rc = tcp_join(j, j->env.node_rank, j->env.nodes, 0, 1, j->local_n, &leaders);
        if (rc) {
            if (local)
                local->close(local);
            return rc;
        }
        return dt_hier_comm_create(out, local, leaders, j->env.node_rank, j->env.nodes);
    }
    }
    return dt_fail(DT_EUSAGE, "internal error: backend %d", (int)j->backend);
}

/* Everything one rank does around the caller's rank_main: pin, threads, communicator. */
static int run_rank(int r, void *arg)
{
    struct job *j = arg;
    if (j->pinned) {
        int rc = dt_pin_apply(&j->plan, j->per_rank ? j->env.local_rank : r);
        if (rc)
            return rc;
    }
    dt_nn_set_threads(j->cfg->dist.threads);
    struct dt_comm *comm = NULL;
    int rc = make_comm(j, r, &comm);
    if (rc)
        return rc;
    rc = j->rank_main(comm, j->arg);
    comm->close(comm);
    return rc;
}

static void abort_segment(void *arg, const char *reason)
{
    struct job *j = arg;
    if (j->seg)
        dt_shm_segment_abort(j->seg, reason);
}

static int load_token(struct job *j)
{
    if (j->backend != B_TCP && j->backend != B_HIER)
        return 0;
    bool one_host = j->env.nodes == 1 && !j->per_rank;
    if (!one_host || j->o->token_file || getenv("DTRAIN_TOKEN"))
        return dt_auth_token_load(&j->token, j->o->token_file);
    char hex[2 * 32 + 1];
    int rc = dt_auth_token_generate(hex);
    return rc ? rc : dt_auth_token_set(&j->token, hex, strlen(hex), "generated token");
}

int dt_run_ranks(const struct dt_config *cfg, const struct dt_job_opts *o,
                 int (*rank_main)(struct dt_comm *comm, void *arg), void *arg)
{
    struct job j = {.cfg = cfg, .o = o, .master_fd = -1, .rank_main = rank_main, .arg = arg};
    int rc = job_shape(&j);
    if (rc == 0)
        rc = pick_backend(&j);
    if (rc == 0)
        rc = load_token(&j);
    if (rc == 0)
        rc = dt_cli_env_sockbuf(&j.sockbuf);
    if (rc == 0)
        rc = plan_pinning(&j);
    if (rc)
        goto out;
    j.master_port = j.env.master_port;
    if (o->verbose && (!j.per_rank || j.env.rank == 0))
        dt_log_info("job: %d rank%s on %d host%s, backend %s, launch %s", j.world,
                    j.world == 1 ? "" : "s", j.env.nodes, j.env.nodes == 1 ? "" : "s",
                    backend_names[j.backend], j.env.source);

    if (j.local_n == 1 && !j.per_rank && j.backend == B_SINGLE) {
        rc = run_rank(0, &j);
        goto out;
    }
    if (j.per_rank) {
        rc = run_rank(0, &j);
        goto out;
    }
    if (j.backend == B_SHM || j.backend == B_HIER) {
        if ((rc = dt_shm_segment_create(&j.seg, j.local_n, 0, cfg->dist.timeout)))
            goto out;
    }
    if (j.backend == B_TCP && j.env.nodes == 1 && (rc = bind_local_master(&j)))
        goto out;
    struct dt_launch_opts lo = {
        .n = j.local_n, .rank_main = run_rank, .on_failure = abort_segment, .arg = &j};
    rc = dt_launch_run(&lo);
out:
    if (j.seg)
        dt_shm_segment_destroy(j.seg);
    if (j.master_fd >= 0)
        close(j.master_fd);
    if (j.pinned)
        dt_pin_plan_free(&j.plan);
    return rc;
}

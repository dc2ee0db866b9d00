#include "train/ranks.h"

#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "dist/launcher.h"
#include "dist/tcp.h"
#include "dist/topology.h"
#include "nn/kernels/fp32/blas.h"
#include "nn/kernels/isa.h"
#include "nn/model.h"
#include "util/err.h"
#include "util/log.h"

struct job {
    const struct dt_config *cfg;
    const struct dt_job_plan *plan;
    const struct dt_job_opts *o;
    struct dt_backend_job bj;
    struct dt_pin_plan pins;
    bool pinned;
    int (*rank_main)(struct dt_comm *, void *);
    void *arg;
};

static enum dt_pin_mode pin_mode(const struct dt_config *cfg)
{
    if (cfg->dist.cpu_list[0])
        return DT_PIN_LIST;
    if (!strcmp(cfg->dist.pin, "none"))
        return DT_PIN_NONE;
    return strcmp(cfg->dist.pin, "sockets") ? DT_PIN_CORES : DT_PIN_SOCKETS;
}

/* A rank started by mpirun/srun that the launcher already bound to some CPUs (its affinity
 * mask is narrower than the machine): that binding is the placement. Report it as it is and
 * warn only when this rank's own threads exceed its own CPUs: the other ranks' masks are not
 * ours to see, and under mpirun's default binding they are other cores. */
static bool launcher_bound(struct job *j)
{
    cpu_set_t set;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (!j->plan->per_rank || sched_getaffinity(0, sizeof set, &set) != 0 ||
        CPU_COUNT(&set) >= online)
        return false;
    int threads = j->cfg->dist.threads > 0 ? j->cfg->dist.threads : 1, n = 0;
    int ids[CPU_SETSIZE];
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            ids[n++] = c;
    char list[256];
    dt_cpu_list_format(ids, n, list, sizeof list);
    if (threads > n)
        dt_log_warn("rank %d: %d threads on the %d CPU%s %s bound it to (%s): oversubscribed",
                    j->plan->rank_base, threads, n, n == 1 ? "" : "s", j->plan->env.source, list);
    if (j->o->verbose)
        dt_log_info("rank %d: cpus %s (bound by %s), %d thread%s", j->plan->rank_base, list,
                    j->plan->env.source, threads, threads == 1 ? "" : "s");
    return true;
}

/* Plans the CPUs of every rank on this host; warns once when they are oversubscribed. A host
 * whose topology cannot be read still trains, unpinned. */
static int plan_pinning(struct job *j)
{
    const struct dt_job_plan *p = j->plan;
    if (launcher_bound(j))
        return 0;
    struct dt_topology t;
    if (dt_topology_read(&t, NULL, NULL) < 0) {
        dt_log_warn("cannot read the CPU topology (%s); ranks are not pinned", dt_last_error());
        return 0;
    }
    int threads = j->cfg->dist.threads > 0 ? j->cfg->dist.threads : 1;
    int rc = dt_pin_plan_make(&j->pins, &t, pin_mode(j->cfg), j->cfg->dist.cpu_list, p->host_ranks,
                              threads);
    bool first_on_host = !p->per_rank || p->env.local_rank == 0;
    if (rc == 0) {
        j->pinned = true;
        if (j->pins.oversubscribed && first_on_host)
            dt_log_warn("%d instance%s x %d thread%s = %d exceeds the %d usable CPUs: the run "
                        "is oversubscribed and will be slower than it could be",
                        p->host_ranks, p->host_ranks == 1 ? "" : "s", threads,
                        threads == 1 ? "" : "s", p->host_ranks * threads, t.ncpus);
        if (j->o->verbose && first_on_host) {
            char desc[160];
            dt_topology_describe(&t, desc, sizeof desc);
            dt_log_info("topology: %s; pinning: %s", desc,
                        pin_mode(j->cfg) == DT_PIN_LIST ? j->cfg->dist.cpu_list : j->cfg->dist.pin);
            for (int r = 0; r < p->host_ranks && j->pins.cpus; r++) {
                char list[256];
                dt_cpu_list_format(j->pins.cpus + (size_t)r * j->pins.stride, j->pins.ncpus[r],
                                   list, sizeof list);
                dt_log_info("rank %d: cpus %s, %d thread%s", p->rank_base + r, list, threads,
                            threads == 1 ? "" : "s");
            }
        }
    }
    dt_topology_free(&t);
    return rc;
}

/* The backend's view of the plan. */
static void describe_job(struct job *j)
{
    const struct dt_job_plan *p = j->plan;
    struct dt_backend_job *b = &j->bj;
    b->backend = p->backend;
    b->world = p->world;
    b->rank_base = p->rank_base;
    b->local_n = p->local_n;
    b->host_ranks = p->host_ranks;
    b->per_rank = p->per_rank;
    b->local_rank = p->env.local_rank;
    b->nodes = p->env.nodes;
    b->node_base = p->env.node_rank;
    b->groups = 1;
    /* One host, forked ranks: a loopback master picked before the fork. */
    if (p->per_rank || p->env.nodes > 1) {
        b->master_host = p->env.master_host;
        b->master_port = p->env.master_port;
    }
    b->iface = j->o->iface;
    b->token_file = j->o->token_file;
    b->local_key = p->env.local_key[0] ? p->env.local_key : NULL;
    b->timeout = j->cfg->dist.timeout;
    b->rendezvous_timeout = j->o->rendezvous_timeout;
    b->oversubscribed = j->pinned && j->pins.oversubscribed;
}

/* Everything one rank does around the caller's rank_main: pin, threads, communicator. */
static int run_rank(int r, void *arg)
{
    struct job *j = arg;
    if (j->pinned) {
        int rc = dt_pin_apply(&j->pins, j->plan->per_rank ? j->plan->env.local_rank : r);
        if (rc)
            return rc;
    }
    dt_nn_set_threads(j->cfg->dist.threads);
    struct dt_comm *comm = NULL;
    int rc = dt_backend_join(&j->bj, r, &comm);
    if (rc)
        return rc;
    rc = j->rank_main(comm, j->arg);
    comm->close(comm);
    return rc;
}

static void abort_job(void *arg, const char *reason)
{
    struct job *j = arg;
    dt_backend_abort(&j->bj, reason);
}

int dt_run_ranks(const struct dt_config *cfg, const struct dt_job_plan *plan,
                 const struct dt_job_opts *o, int (*rank_main)(struct dt_comm *comm, void *arg),
                 void *arg)
{
    struct job j = {.cfg = cfg, .plan = plan, .o = o, .rank_main = rank_main, .arg = arg};
    dt_backend_job_init(&j.bj);
    if (o->verbose && (!plan->per_rank || plan->env.local_rank == 0)) {
        struct dt_blas_info blas;
        dt_blas_info_read(&blas);
        dt_log_info("BLAS: %s threading, %s kernels (%s)", dt_blas_threading_name(blas.threading),
                    blas.core, blas.choice);
        dt_log_info("kernels: %s instruction set (DTRAIN_ISA to force one)", dt_isa_name());
    }
    int rc = plan_pinning(&j);
    if (rc)
        goto out;
    describe_job(&j);
    if ((rc = dt_backend_prepare(&j.bj)))
        goto out;
    if (o->verbose && (!plan->per_rank || plan->env.rank == 0))
        dt_log_info("job: %d rank%s on %d host%s, backend %s, launch %s", plan->world,
                    plan->world == 1 ? "" : "s", plan->env.nodes, plan->env.nodes == 1 ? "" : "s",
                    dt_backend_name(plan->backend), plan->env.source);
    /* only the shm all-reduce sums ranks in nn/grad_tree.h's tree; 2 ranks agree in any order */
    if (cfg->dist.split_invariant && plan->world > 2 && plan->backend != DT_BACKEND_SHM &&
        (!plan->per_rank || plan->env.rank == 0))
        dt_log_warn("dist.split_invariant: the %s backend does not sum %d ranks in a fixed tree; "
                    "the bits may depend on the instance count (one host with shm keeps them)",
                    dt_backend_name(plan->backend), plan->world);
    if (plan->per_rank || (plan->local_n == 1 && plan->backend == DT_BACKEND_SINGLE)) {
        rc = run_rank(0, &j);
        goto out;
    }
    /* The watchdog's limit is the collectives': ranks that stall outside any collective (in
     * computation, say) fail after the same time a stalled peer would. Until a rank's set-up
     * is done (a rendezvous across hosts among it) it has the rendezvous's time on top. */
    double rdv =
        j.o->rendezvous_timeout > 0 ? j.o->rendezvous_timeout : DT_TCP_DEFAULT_RENDEZVOUS_TIMEOUT;
    struct dt_launch_opts lo = {.n = plan->local_n,
                                .rank_main = run_rank,
                                .on_failure = abort_job,
                                .arg = &j,
                                .stall_timeout = j.cfg->dist.timeout,
                                .setup_timeout = j.cfg->dist.timeout + rdv,
                                .rank_base = plan->rank_base,
                                .host = plan->env.node_rank,
                                .hosts = plan->env.nodes};
    rc = dt_launch_run(&lo);
out:
    dt_backend_release(&j.bj);
    if (j.pinned)
        dt_pin_plan_free(&j.pins);
    return rc;
}

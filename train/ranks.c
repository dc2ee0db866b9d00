#include "train/ranks.h"

#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "dist/launcher.h"
#include "dist/tcp.h"
#include "dist/pin.h"
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

/* dist.cpu_list, when given, overrides dist.pin. */
static enum dt_pin_mode pin_mode(const struct dt_config *cfg)
{
    return cfg->dist.cpu_list[0] ? DT_PIN_LIST : cfg->dist.pin;
}

/* A rank started by mpirun/srun that the launcher already bound to some CPUs (its affinity
 * mask is narrower than the machine): that binding is the placement. Report it as it is and
 * warn only when this rank's own threads exceed its own CPUs: the other ranks' masks are not
 * ours to see, and under mpirun's default binding they are other cores. */
static bool launcher_bound(struct job *j)
{
    cpu_set_t set;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (!j->plan->job.per_rank || sched_getaffinity(0, sizeof set, &set) != 0 ||
        CPU_COUNT(&set) >= online)
        return false;
    int threads = j->plan->threads > 0 ? j->plan->threads : 1, n = 0;
    int ids[CPU_SETSIZE];
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            ids[n++] = c;
    char list[256];
    dt_cpu_list_format(ids, n, list, sizeof list);
    if (threads > n)
        dt_log_warn("rank %d: %d threads on the %d CPU%s %s bound it to (%s): oversubscribed",
                    j->plan->job.rank_base, threads, n, n == 1 ? "" : "s", j->plan->env.source,
                    list);
    if (j->o->verbose)
        dt_log_info("rank %d: cpus %s (bound by %s), %d thread%s", j->plan->job.rank_base, list,
                    j->plan->env.source, threads, threads == 1 ? "" : "s");
    return true;
}

/* Plans the CPUs of every rank on this host; warns once when they are oversubscribed. A host
 * whose topology cannot be read still trains, unpinned. */
static int plan_pinning(struct job *j)
{
    const struct dt_backend_job *p = &j->plan->job;
    if (launcher_bound(j))
        return 0;
    struct dt_topology t;
    if (dt_topology_read(&t, NULL, NULL) < 0) {
        dt_log_warn("cannot read the CPU topology (%s); ranks are not pinned", dt_last_error());
        return 0;
    }
    int threads = j->plan->threads > 0 ? j->plan->threads : 1;
    int rc = dt_pin_plan_make(&j->pins, &t, pin_mode(j->cfg), j->cfg->dist.cpu_list, p->host_ranks,
                              threads);
    bool first_on_host = !p->per_rank || p->local_rank == 0;
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
                        pin_mode(j->cfg) == DT_PIN_LIST ? j->cfg->dist.cpu_list
                                                        : dt_pin_mode_name(j->cfg->dist.pin));
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

/* Everything one rank does around the caller's rank_main: pin, threads, communicator. */
static int run_rank(int r, void *arg)
{
    struct job *j = arg;
    if (j->pinned) {
        int rc = dt_pin_apply(&j->pins, j->bj.per_rank ? j->bj.local_rank : r);
        if (rc)
            return rc;
    }
    dt_nn_set_threads(j->plan->threads);
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

static int run_ranks(const struct dt_config *cfg, const struct dt_job_plan *plan,
                     const struct dt_job_opts *o, int (*rank_main)(struct dt_comm *comm, void *arg),
                     void *arg, bool always_fork)
{
    /* This start's own copy of the plan's job: prepare and release fill and clear its
     * resources (a restart prepares afresh, a new loopback port among them). */
    struct job j = {
        .cfg = cfg, .plan = plan, .o = o, .bj = plan->job, .rank_main = rank_main, .arg = arg};
    const struct dt_backend_job *p = &plan->job;
    if (o->verbose && (!p->per_rank || p->local_rank == 0)) {
        struct dt_blas_info blas;
        dt_blas_info_read(&blas);
        dt_log_info("BLAS: %s threading, %s kernels (%s)", dt_blas_threading_name(blas.threading),
                    blas.core, blas.choice);
        dt_log_info("kernels: %s instruction set (DTRAIN_ISA to force one)", dt_isa_name());
    }
    int rc = plan_pinning(&j);
    if (rc)
        goto out;
    j.bj.oversubscribed = j.pinned && j.pins.oversubscribed;
    if ((rc = dt_backend_prepare(&j.bj)))
        goto out;
    if (o->verbose && (!p->per_rank || p->rank_base == 0))
        dt_log_info("job: %d rank%s on %d host%s, backend %s, launch %s", p->world,
                    p->world == 1 ? "" : "s", p->nodes, p->nodes == 1 ? "" : "s",
                    dt_backend_name(p->backend), plan->env.source);
    /* only the shm all-reduce sums ranks in util/sum_tree.h's tree; 2 ranks agree in any order */
    if (cfg->dist.split_invariant && p->world > 2 && p->backend != DT_BACKEND_SHM &&
        (!p->per_rank || p->rank_base == 0))
        dt_log_warn("dist.split_invariant: the %s backend does not sum %d ranks in a fixed tree; "
                    "the bits may depend on the instance count (one host with shm keeps them)",
                    dt_backend_name(p->backend), p->world);
    if (p->per_rank || (p->local_n == 1 && p->backend == DT_BACKEND_SINGLE && !always_fork)) {
        rc = run_rank(0, &j);
        goto out;
    }
    /* The watchdog's limit is the collectives': ranks that stall outside any collective (in
     * computation, say) fail after the same time a stalled peer would. Until a rank's set-up
     * is done (a rendezvous across hosts among it) it has the rendezvous's time on top. */
    double rdv =
        p->rendezvous_timeout > 0 ? p->rendezvous_timeout : DT_TCP_DEFAULT_RENDEZVOUS_TIMEOUT;
    struct dt_launch_opts lo = {.n = p->local_n,
                                .rank_main = run_rank,
                                .on_failure = abort_job,
                                .arg = &j,
                                .stall_timeout = p->timeout,
                                .setup_timeout = p->timeout + rdv,
                                .rank_base = p->rank_base,
                                .host = p->node_base,
                                .hosts = p->nodes};
    rc = dt_launch_run(&lo);
out:
    dt_backend_release(&j.bj);
    if (j.pinned)
        dt_pin_plan_free(&j.pins);
    return rc;
}

int dt_run_ranks(const struct dt_config *cfg, const struct dt_job_plan *plan,
                 const struct dt_job_opts *o, int (*rank_main)(struct dt_comm *comm, void *arg),
                 void *arg)
{
    return run_ranks(cfg, plan, o, rank_main, arg, false);
}

int dt_run_ranks_forked(const struct dt_config *cfg, const struct dt_job_plan *plan,
                        const struct dt_job_opts *o,
                        int (*rank_main)(struct dt_comm *comm, void *arg), void *arg)
{
    if (plan->job.per_rank)
        return dt_fail(DT_EUSAGE, "internal error: an outside launcher's rank cannot fork ranks");
    return run_ranks(cfg, plan, o, rank_main, arg, true);
}

#include "train/plan.h"

#include <string.h>

#include "data/sampler.h"
#include "train/setup.h"
#include "util/err.h"

void dt_job_opts_init(struct dt_job_opts *o)
{
    memset(o, 0, sizeof *o);
    dt_launch_flags_init(&o->launch);
}

static int shape(struct dt_job_plan *p, const struct dt_config *cfg, const struct dt_job_opts *o)
{
    struct dt_launch_flags flags = o->launch;
    flags.no_master = cfg->dist.backend == DT_BACKEND_REQUEST_MPI;
    flags.instances = cfg->dist.instances;
    int rc = dt_launch_env_detect(&p->env, &flags, NULL);
    if (rc)
        return rc;
    struct dt_backend_job *j = &p->job;
    j->per_rank = p->env.rank >= 0;
    if (j->per_rank) {
        if (cfg->dist.instances > 1)
            return dt_fail(DT_EUSAGE,
                           "dist.instances is %d, but %s started every rank as its own process: "
                           "leave instances at 1 (one process = one rank)",
                           cfg->dist.instances, p->env.source);
        j->local_n = 1;
        j->host_ranks = p->env.local_size;
        j->rank_base = p->env.rank;
        j->world = p->env.size;
    } else {
        j->local_n = cfg->dist.instances;
        j->host_ranks = j->local_n;
        j->rank_base = p->env.node_rank * j->local_n;
        j->world = p->env.nodes * j->local_n;
    }
    j->launcher = p->env.source;
    j->local_rank = p->env.local_rank;
    j->nodes = p->env.nodes;
    j->node_base = p->env.node_rank;
    /* One host, forked ranks: a loopback master picked before the fork (master_host NULL). */
    if (j->per_rank || p->env.nodes > 1) {
        j->master_host = p->env.master_host;
        j->master_port = p->env.master_port;
    }
    j->local_key = p->env.local_key[0] ? p->env.local_key : NULL;
    j->iface = o->iface;
    j->token_file = o->token_file;
    j->timeout = cfg->dist.timeout;
    j->rendezvous_timeout = o->rendezvous_timeout;
    return 0;
}

int dt_job_plan_make(struct dt_job_plan *p, const struct dt_config *cfg,
                     const struct dt_job_opts *o)
{
    memset(p, 0, sizeof *p);
    dt_backend_job_init(&p->job);
    int rc = shape(p, cfg, o);
    if (rc)
        return rc;
    if ((rc = dt_backend_choose(cfg->dist.backend, &p->job)))
        return rc;
    p->threads = dt_run_threads(cfg, p->job.host_ranks);
    return 0;
}

bool dt_job_plan_shares_memory(const struct dt_job_plan *p)
{
    return p->job.backend == DT_BACKEND_SHM;
}

int dt_job_plan_steps(const struct dt_job_plan *p, const struct dt_config *cfg,
                      size_t train_samples, struct dt_job_steps *out)
{
    struct dt_sampler_opts so = {
        .n = train_samples,
        .batch = (size_t)cfg->train.batch_size,
        .size = p->job.world,
        .drop_last = cfg->train.drop_last,
        .per_instance = cfg->train.batch_per_instance,
    };
    size_t steps, per_rank;
    int rc = dt_sampler_steps_for(&so, &steps, &per_rank);
    if (rc)
        return rc;
    int b = cfg->train.batch_size;
    out->steps_per_epoch = (long long)steps;
    out->global_batch = cfg->train.batch_per_instance ? b * p->job.world : b;
    out->rank_batch = cfg->train.batch_per_instance ? b : (b + p->job.world - 1) / p->job.world;
    return 0;
}

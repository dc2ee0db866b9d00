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
    flags.no_master = !strcmp(cfg->dist.backend, "mpi");
    flags.instances = cfg->dist.instances;
    int rc = dt_launch_env_detect(&p->env, &flags, NULL);
    if (rc)
        return rc;
    p->per_rank = p->env.rank >= 0;
    if (p->per_rank) {
        if (cfg->dist.instances > 1)
            return dt_fail(DT_EUSAGE,
                           "dist.instances is %d, but %s started every rank as its own process: "
                           "leave instances at 1 (one process = one rank)",
                           cfg->dist.instances, p->env.source);
        p->local_n = 1;
        p->host_ranks = p->env.local_size;
        p->rank_base = p->env.rank;
        p->world = p->env.size;
    } else {
        p->local_n = cfg->dist.instances;
        p->host_ranks = p->local_n;
        p->rank_base = p->env.node_rank * p->local_n;
        p->world = p->env.nodes * p->local_n;
    }
    return 0;
}

int dt_job_plan_make(struct dt_job_plan *p, const struct dt_config *cfg,
                     const struct dt_job_opts *o)
{
    memset(p, 0, sizeof *p);
    int rc = shape(p, cfg, o);
    if (rc)
        return rc;
    struct dt_backend_shape s = {
        .world = p->world, .nodes = p->env.nodes, .per_rank = p->per_rank, .source = p->env.source};
    if ((rc = dt_backend_choose(cfg->dist.backend, &s, &p->backend)))
        return rc;
    p->threads = dt_run_threads(cfg, p->host_ranks);
    return 0;
}

bool dt_job_plan_shares_memory(const struct dt_job_plan *p)
{
    return p->backend == DT_BACKEND_SHM;
}

int dt_job_plan_steps(const struct dt_job_plan *p, const struct dt_config *cfg,
                      size_t train_samples, struct dt_job_steps *out)
{
    struct dt_sampler_opts so = {
        .n = train_samples,
        .batch = (size_t)cfg->train.batch_size,
        .size = p->world,
        .drop_last = cfg->train.drop_last,
        .per_instance = cfg->train.batch_per_instance,
    };
    size_t steps, per_rank;
    int rc = dt_sampler_steps_for(&so, &steps, &per_rank);
    if (rc)
        return rc;
    int b = cfg->train.batch_size;
    out->steps_per_epoch = (long long)steps;
    out->global_batch = cfg->train.batch_per_instance ? b * p->world : b;
    out->rank_batch = cfg->train.batch_per_instance ? b : (b + p->world - 1) / p->world;
    return 0;
}

/* Parameter groups: which optimizer group each parameter tensor of the model falls in. The
 * tensors are contiguous in the arena in the model's order, so the groups go to the optimizer
 * as one range per tensor, in increasing order (adjacent ranges of one group merge there). */
#include "train/param_groups.h"

#include <string.h>

#include "util/err.h"

static bool any_matches(const struct dt_name_patterns *p, const struct dt_tensor_info *t)
{
    for (int i = 0; i < p->n; i++)
        if (dt_pattern_matches(p->p[i], t->name) || dt_pattern_matches(p->p[i], t->index_name))
            return true;
    return false;
}

struct dt_optim_group dt_run_tensor_group(const struct dt_config *cfg,
                                          const struct dt_tensor_info *t)
{
    struct dt_optim_group g = {.lr_scale = 1, .decay = true};
    const struct dt_param_groups *gs = &cfg->optimizer.param_groups;
    for (int i = 0; i < gs->n; i++)
        if (any_matches(&gs->g[i].match, t))
            g.lr_scale = gs->g[i].lr_scale;
    /* Tensors come in arena order; one-dimensional ones are biases and norm scales/shifts. */
    if (cfg->optimizer.weight_decay_skip == DT_DECAY_SKIP_BIAS_AND_NORM && t->ndim <= 1)
        g.decay = false;
    g.frozen = any_matches(&cfg->train.freeze, t);
    return g;
}

/* Pattern p matches one of m's parameters. */
static bool matches_any(const char *p, const struct dt_model *m)
{
    for (int t = 0; t < m->ntensors; t++)
        if (dt_pattern_matches(p, m->tensors[t].name) ||
            dt_pattern_matches(p, m->tensors[t].index_name))
            return true;
    return false;
}

static int no_match(const struct dt_config *cfg, const char *key, const char *p,
                    const struct dt_model *m)
{
    return dt_fail(DT_EUSAGE,
                   "%s: %s: \"%s\" matches no parameter (names look like \"%s\"; "
                   "`dtrain train --dry-run` lists the layers' names)",
                   cfg->path, key, p, m->ntensors ? m->tensors[0].name : "none");
}

int dt_run_check_groups(const struct dt_config *cfg, const struct dt_model *m)
{
    const struct dt_name_patterns *fz = &cfg->train.freeze;
    for (int i = 0; i < fz->n; i++)
        if (!matches_any(fz->p[i], m))
            return no_match(cfg, "train.freeze", fz->p[i], m);
    const struct dt_param_groups *gs = &cfg->optimizer.param_groups;
    for (int g = 0; g < gs->n; g++)
        for (int i = 0; i < gs->g[g].match.n; i++)
            if (!matches_any(gs->g[g].match.p[i], m)) {
                char key[64];
                snprintf(key, sizeof key, "optimizer.param_groups.%d.match", g);
                return no_match(cfg, key, gs->g[g].match.p[i], m);
            }
    if (fz->n > 0 && dt_run_frozen_floats(cfg, m) == m->nparams)
        return dt_fail(DT_EUSAGE,
                       "%s: train.freeze: every parameter is frozen: nothing would train",
                       cfg->path);
    return 0;
}

int dt_run_param_groups(const struct dt_config *cfg, const struct dt_model *m, struct dt_optim *o)
{
    int rc = dt_run_check_groups(cfg, m);
    for (int t = 0; t < m->ntensors && !rc; t++) {
        const struct dt_tensor_info *ti = &m->tensors[t];
        struct dt_optim_group g = dt_run_tensor_group(cfg, ti);
        if (g.lr_scale != 1 || !g.decay || g.frozen)
            rc = dt_optim_set_group(o, ti->offset, ti->offset + ti->count, &g);
    }
    return rc;
}

size_t dt_run_frozen_floats(const struct dt_config *cfg, const struct dt_model *m)
{
    size_t n = 0;
    for (int t = 0; t < m->ntensors && cfg->train.freeze.n > 0; t++)
        if (any_matches(&cfg->train.freeze, &m->tensors[t]))
            n += m->tensors[t].count;
    return n;
}

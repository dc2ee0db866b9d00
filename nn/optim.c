/* Optimizer updates, transcribed from torch/optim/{sgd,adam,adamw,adadelta}.py of PyTorch 1.13
 * (the single-tensor, non-foreach path that 1.13 uses on CPU by default).
 *
 * Every tensor operation there becomes one float expression here, rounded where ATen's CPU
 * kernels round: `x.add_(y, alpha=a)` is a fused multiply-add (ATen's vectorised add kernel is
 * vec::fmadd), `x.addcmul_(t, t, value=v)` is fmaf(v * t, t, x) (fused the same way), addcdiv is
 * `x + (v * t1) / t2`, mul_/div_/sqrt_ round once each. Scalars that torch derives in Python
 * double (1 - beta1, lr / bias_correction1, ...) are derived in double here and converted to
 * float once per step, as ATen converts a Python scalar applied to a float tensor. The result
 * is bit-identical to torch 1.13 on x86-64 with AVX2 (tests/unit/test_parity_optim.c), and,
 * since fmaf is correctly rounded by definition, identical on every machine dtrain runs on
 * (the build's -std=c11 stops gcc from contracting any other a * b + c on its own).
 *
 * The loops are elementwise over the arena, so splitting them across OpenMP threads cannot
 * change a single bit of the result.
 */
#include "nn/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/kernels/fp32/optim_steps.h"
#include "util/alloc.h"
#include "util/err.h"

/* Below this many floats the thread start-up costs more than the loop (the clipping norm's;
 * the update loops are nn/kernels/fp32/optim_steps.isa.c). */
#define PARALLEL_MIN 65536

struct dt_optim {
    struct dt_optim_config cfg;
    size_t n;
    uint64_t steps;
    int nstates;
    const char *state_names[DT_OPTIM_MAX_STATES];
    float *state[DT_OPTIM_MAX_STATES];
    bool state_external; /* state[] points into caller-owned storage */
    size_t base;         /* arena offset of element 0 (a dt_optim_step_range view) */
    /* Sorted, disjoint arena ranges [lo, hi) with their own parameter group (no weight decay
     * for biases and norms, an lr scale, frozen); elements outside every range take the
     * default group (lr x 1, decay on). */
    struct group_range *groups;
    int ngroups;
};

struct group_range {
    size_t lo, hi;
    struct dt_optim_group g;
};

static const char *const type_names[] = {
    [DT_OPTIM_SGD] = "sgd",
    [DT_OPTIM_ADAM] = "adam",
    [DT_OPTIM_ADAMW] = "adamw",
    [DT_OPTIM_ADADELTA] = "adadelta",
};
_Static_assert(sizeof type_names / sizeof type_names[0] == DT_OPTIM_COUNT,
               "one name per optimizer type");
const struct dt_names dt_optim_type_names = DT_NAMES(type_names);

static const char *const decay_skip_names[] = {
    [DT_DECAY_SKIP_NONE] = "none",
    [DT_DECAY_SKIP_BIAS_AND_NORM] = "bias_and_norm",
};
_Static_assert(sizeof decay_skip_names / sizeof decay_skip_names[0] == DT_DECAY_SKIP_COUNT,
               "one name per weight_decay_skip value");
const struct dt_names dt_decay_skip_names = DT_NAMES(decay_skip_names);

int dt_optim_type_parse(const char *name, enum dt_optim_type *type)
{
    int v = dt_names_find(&dt_optim_type_names, name);
    if (v < 0) {
        char valid[96];
        dt_names_join(&dt_optim_type_names, valid, sizeof valid);
        return dt_fail(DT_EUSAGE, "unknown optimizer \"%s\" (valid: %s)", name, valid);
    }
    *type = (enum dt_optim_type)v;
    return 0;
}

const char *dt_optim_type_name(enum dt_optim_type type)
{
    return dt_names_name(&dt_optim_type_names, (int)type);
}

void dt_optim_config_defaults(struct dt_optim_config *cfg, enum dt_optim_type type)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->type = type;
    cfg->beta1 = 0.9;
    cfg->beta2 = 0.999;
    cfg->eps = 1e-8;
    cfg->rho = 0.9;
    switch (type) {
    case DT_OPTIM_SGD:
        cfg->lr = 0.01; /* torch has no default for SGD; this is the common choice */
        break;
    case DT_OPTIM_ADAM:
        cfg->lr = 1e-3;
        break;
    case DT_OPTIM_ADAMW:
        cfg->lr = 1e-3;
        cfg->weight_decay = 1e-2;
        break;
    case DT_OPTIM_ADADELTA:
        cfg->lr = 1.0;
        cfg->eps = 1e-6;
        break;
    }
}

/* `!(x >= 0)` also rejects NaN. */
static int check_config(const struct dt_optim_config *c)
{
    const char *t = dt_optim_type_name(c->type);
    if ((int)c->type < 0 || (int)c->type >= DT_OPTIM_COUNT) {
        char valid[96];
        dt_names_join(&dt_optim_type_names, valid, sizeof valid);
        return dt_fail(DT_EUSAGE, "optimizer type %d is not one of %s", (int)c->type, valid);
    }
    if (!(c->lr >= 0))
        return dt_fail(DT_EUSAGE, "%s: invalid learning rate %g (expected >= 0)", t, c->lr);
    if (!(c->weight_decay >= 0))
        return dt_fail(DT_EUSAGE, "%s: invalid weight_decay %g (expected >= 0)", t,
                       c->weight_decay);
    switch (c->type) {
    case DT_OPTIM_SGD:
        if (!(c->momentum >= 0))
            return dt_fail(DT_EUSAGE, "sgd: invalid momentum %g (expected >= 0)", c->momentum);
        if (c->nesterov && (c->momentum <= 0 || c->dampening != 0))
            return dt_fail(DT_EUSAGE,
                           "sgd: nesterov requires momentum > 0 and dampening 0 (found "
                           "momentum %g, dampening %g)",
                           c->momentum, c->dampening);
        break;
    case DT_OPTIM_ADAM:
    case DT_OPTIM_ADAMW:
        if (!(c->beta1 >= 0 && c->beta1 < 1))
            return dt_fail(DT_EUSAGE, "%s: invalid beta1 %g (expected 0 <= beta1 < 1)", t,
                           c->beta1);
        if (!(c->beta2 >= 0 && c->beta2 < 1))
            return dt_fail(DT_EUSAGE, "%s: invalid beta2 %g (expected 0 <= beta2 < 1)", t,
                           c->beta2);
        if (!(c->eps >= 0))
            return dt_fail(DT_EUSAGE, "%s: invalid eps %g (expected >= 0)", t, c->eps);
        break;
    case DT_OPTIM_ADADELTA:
        if (!(c->rho >= 0 && c->rho <= 1))
            return dt_fail(DT_EUSAGE, "adadelta: invalid rho %g (expected 0 <= rho <= 1)", c->rho);
        if (!(c->eps >= 0))
            return dt_fail(DT_EUSAGE, "adadelta: invalid eps %g (expected >= 0)", c->eps);
        break;
    }
    return 0;
}

static void add_state(struct dt_optim *o, const char *name)
{
    o->state_names[o->nstates++] = name;
}

static void name_states(struct dt_optim *o)
{
    switch (o->cfg.type) {
    case DT_OPTIM_SGD:
        if (o->cfg.momentum != 0)
            add_state(o, "momentum_buffer");
        break;
    case DT_OPTIM_ADAM:
    case DT_OPTIM_ADAMW:
        add_state(o, "exp_avg");
        add_state(o, "exp_avg_sq");
        if (o->cfg.amsgrad)
            add_state(o, "max_exp_avg_sq");
        break;
    case DT_OPTIM_ADADELTA:
        add_state(o, "square_avg");
        add_state(o, "acc_delta");
        break;
    }
}

int dt_optim_state_count(const struct dt_optim_config *cfg)
{
    struct dt_optim o = {.cfg = *cfg};
    name_states(&o);
    return o.nstates;
}

int dt_optim_create(struct dt_optim **out, const struct dt_optim_config *cfg, size_t n)
{
    return dt_optim_create_in(out, cfg, n, NULL);
}

int dt_optim_create_in(struct dt_optim **out, const struct dt_optim_config *cfg, size_t n,
                       float *storage)
{
    *out = NULL;
    int rc = check_config(cfg);
    if (rc)
        return rc;
    struct dt_optim *o = calloc(1, sizeof *o);
    if (!o)
        return dt_fail(DT_ERUNTIME, "out of memory creating the optimizer");
    o->cfg = *cfg;
    o->n = n;
    name_states(o);
    o->state_external = storage != NULL;
    for (int i = 0; i < o->nstates; i++) {
        o->state[i] = storage ? storage + (size_t)i * n : dt_alloc(n, sizeof(float));
        if (!o->state[i]) {
            const char *name = o->state_names[i];
            dt_optim_free(o);
            return dt_fail_context(-DT_ERUNTIME, "optimizer state %s", name);
        }
    }
    *out = o;
    return 0;
}

void dt_optim_free(struct dt_optim *o)
{
    if (!o)
        return;
    for (int i = 0; i < o->nstates && !o->state_external; i++)
        dt_free(o->state[i]);
    free(o->groups);
    free(o);
}

static bool same_group(const struct dt_optim_group *a, const struct dt_optim_group *b)
{
    return a->lr_scale == b->lr_scale && a->decay == b->decay && a->frozen == b->frozen;
}

int dt_optim_set_group(struct dt_optim *o, size_t lo, size_t hi, const struct dt_optim_group *g)
{
    const char *t = dt_optim_type_name(o->cfg.type);
    if (lo > hi || hi > o->n)
        return dt_fail(DT_EUSAGE, "%s: group range [%zu, %zu) is outside the %zu parameters", t, lo,
                       hi, o->n);
    if (!(g->lr_scale >= 0))
        return dt_fail(DT_EUSAGE, "%s: invalid lr scale %g (expected >= 0)", t, g->lr_scale);
    int k = o->ngroups;
    if (k > 0 && lo < o->groups[k - 1].hi)
        return dt_fail(DT_EUSAGE, "%s: group range [%zu, %zu) overlaps or precedes [%zu, %zu)", t,
                       lo, hi, o->groups[k - 1].lo, o->groups[k - 1].hi);
    if (lo == hi)
        return 0;
    if (k > 0 && lo == o->groups[k - 1].hi && same_group(&o->groups[k - 1].g, g)) {
        o->groups[k - 1].hi = hi; /* adjacent and alike: extend */
        return 0;
    }
    struct group_range *grown = realloc(o->groups, (size_t)(k + 1) * sizeof *grown);
    if (!grown)
        return dt_fail(DT_ERUNTIME, "out of memory recording parameter groups");
    o->groups = grown;
    o->groups[k] = (struct group_range){lo, hi, *g};
    o->ngroups = k + 1;
    return 0;
}

int dt_optim_skip_decay(struct dt_optim *o, size_t lo, size_t hi)
{
    struct dt_optim_group g = {.lr_scale = 1, .decay = false};
    return dt_optim_set_group(o, lo, hi, &g);
}

void dt_optim_zero_frozen_grads(const struct dt_optim *o, float *grads)
{
    for (int k = 0; k < o->ngroups; k++)
        if (o->groups[k].g.frozen)
            memset(grads + o->groups[k].lo, 0, (o->groups[k].hi - o->groups[k].lo) * sizeof *grads);
}

/* The update of elements [lo, hi) of this (possibly view) optimizer in parameter group g:
 * torch's param_groups (weight_decay 0, its own lr); a frozen group is not updated at all, as
 * torch skips parameters without gradients (no decay, no momentum or moment update). One call
 * of the step kernel per range. */
static void update_in_group(const struct dt_optim *o, float *params, const float *grads, size_t lo,
                            size_t hi, double lr, const struct dt_optim_group *g)
{
    if (lo >= hi || g->frozen)
        return;
    struct dt_optim_config cfg = o->cfg;
    lr *= g->lr_scale;
    if (!g->decay)
        cfg.weight_decay = 0;
    float *state[DT_OPTIM_MAX_STATES] = {0};
    for (int i = 0; i < o->nstates; i++)
        state[i] = o->state[i] + lo;
    dt_optim_update(&cfg, state, o->steps, params + lo, grads + lo, hi - lo, lr);
}

/* The update of every element of o (a view's, or the whole arena's), its groups as set, at
 * the step count o->steps; counts nothing. */
static void update(const struct dt_optim *o, float *params, const float *grads, double lr)
{
    size_t n = o->n;
    if (o->ngroups == 0) {
        dt_optim_update(&o->cfg, o->state, o->steps, params, grads, n, lr);
        return;
    }
    static const struct dt_optim_group plain = {.lr_scale = 1, .decay = true};
    size_t at = 0, end = o->base + n;
    for (int r = 0; r < o->ngroups && at < n; r++) {
        size_t lo = o->groups[r].lo, hi = o->groups[r].hi;
        if (hi <= o->base || lo >= end)
            continue;
        lo = lo > o->base ? lo - o->base : 0;
        hi = hi < end ? hi - o->base : n;
        update_in_group(o, params, grads, at, lo, lr, &plain);
        update_in_group(o, params, grads, lo, hi, lr, &o->groups[r].g);
        at = hi;
    }
    update_in_group(o, params, grads, at, n, lr, &plain);
}

/* Elements [lo, hi) of o as an optimizer of their own: the update is elementwise, so the
 * slice's arithmetic is exactly the full step's for those elements. */
static struct dt_optim view_of(const struct dt_optim *o, size_t lo, size_t hi)
{
    struct dt_optim view = *o;
    view.n = hi - lo;
    view.base = o->base + lo;
    for (int i = 0; i < o->nstates; i++)
        view.state[i] = o->state[i] + lo;
    return view;
}

static bool counts_first(const struct dt_optim *o)
{
    /* torch increments before using it in Adam's bias corrections */
    return o->cfg.type == DT_OPTIM_ADAM || o->cfg.type == DT_OPTIM_ADAMW;
}

static int check_size(const struct dt_optim *o, size_t n)
{
    if (n != o->n)
        return dt_fail(DT_ERUNTIME, "%s: step over %zu parameters, but the state holds %zu",
                       dt_optim_type_name(o->cfg.type), n, o->n);
    return 0;
}

int dt_optim_step(struct dt_optim *o, float *params, const float *grads, size_t n, double lr)
{
    int rc = check_size(o, n);
    if (rc)
        return rc;
    bool first = counts_first(o);
    o->steps += first;
    update(o, params, grads, lr);
    o->steps += !first;
    return 0;
}

int dt_optim_step_range(struct dt_optim *o, float *params, const float *grads, size_t lo, size_t hi,
                        double lr)
{
    if (lo > hi || hi > o->n)
        return dt_fail(DT_ERUNTIME, "%s: step over [%zu, %zu) of %zu parameters",
                       dt_optim_type_name(o->cfg.type), lo, hi, o->n);
    struct dt_optim view = view_of(o, lo, hi);
    int rc = dt_optim_step(&view, params + lo, grads + lo, hi - lo, lr);
    o->steps = view.steps;
    return rc;
}

int dt_optim_step_pieces(struct dt_optim *o, float *params, const float *grads, size_t n, double lr,
                         const struct dt_optim_pieces *pc)
{
    int rc = check_size(o, n);
    bool cuts = pc->count >= 1 && pc->cuts[pc->count] <= n;
    for (int i = 0; cuts && i < pc->count; i++)
        cuts = pc->cuts[i] < pc->cuts[i + 1];
    if (rc == 0 && !cuts)
        rc = dt_fail(DT_ERUNTIME, "%s: the step's %d pieces do not cut its %zu parameters in order",
                     dt_optim_type_name(o->cfg.type), pc->count, n);
    if (rc)
        return rc;
    bool first = counts_first(o);
    o->steps += first;
    /* The pieces are few (a model's tensors, a large one in blocks of rows), so each is one
     * thread's: the update loops see the parallel region and run on their thread alone. */
#pragma omp parallel for schedule(dynamic, 1) if (n >= PARALLEL_MIN && pc->count > 1)
    for (int i = 0; i < pc->count; i++) {
        struct dt_optim view = view_of(o, pc->cuts[i], pc->cuts[i + 1]);
        update(&view, params + pc->cuts[i], grads + pc->cuts[i], lr);
        if (pc->after)
            pc->after(pc->ctx, i);
    }
    o->steps += !first;
    return 0;
}

size_t dt_optim_state_floats(const struct dt_optim *o)
{
    return (size_t)o->nstates * o->n;
}

const struct dt_optim_config *dt_optim_config(const struct dt_optim *o)
{
    return &o->cfg;
}

size_t dt_optim_size(const struct dt_optim *o)
{
    return o->n;
}

uint64_t dt_optim_steps(const struct dt_optim *o)
{
    return o->steps;
}

void dt_optim_set_steps(struct dt_optim *o, uint64_t steps)
{
    o->steps = steps;
}

int dt_optim_states(struct dt_optim *o, struct dt_optim_state states[DT_OPTIM_MAX_STATES])
{
    for (int i = 0; i < o->nstates; i++) {
        states[i].name = o->state_names[i];
        states[i].data = o->state[i];
    }
    return o->nstates;
}

double dt_clip_grad_norm(float *grads, size_t n, double max_norm)
{
    double sumsq = 0;
#pragma omp parallel for reduction(+ : sumsq) if (n >= PARALLEL_MIN)
    for (size_t i = 0; i < n; i++)
        sumsq += (double)grads[i] * grads[i];
    double norm = sqrt(sumsq);
    /* torch computes the coefficient as a float tensor and multiplies by it (clamped to 1). */
    float coef = (float)(max_norm / (norm + 1e-6));
    if (max_norm > 0 && coef < 1.0f) {
#pragma omp parallel for simd if (parallel : n >= PARALLEL_MIN)
        for (size_t i = 0; i < n; i++)
            grads[i] *= coef;
    }
    return norm;
}

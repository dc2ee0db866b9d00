/* Learning-rate schedules as closed-form functions of the step (see nn/schedule.h for why).
 *
 *   constant: lr
 *   step:     lr * gamma^floor(epoch / step_size)              (torch StepLR, stepped per epoch)
 *   cosine:   min_lr + (lr - min_lr) * (1 + cos(pi * t / T)) / 2  with t = step - warmup,
 *             T = total_steps - warmup, t clamped to [0, T]     (torch CosineAnnealingLR's
 *             closed form, stepped per update, starting where the warmup ends)
 *   warmup:   the above times (step + 1) / warmup_steps while step < warmup_steps, which is
 *             torch LinearLR(start_factor=1/warmup_steps, end_factor=1, total_iters=
 *             warmup_steps - 1): the first update uses lr/warmup_steps, the last warmup
 *             update the full rate.
 *   one_cycle: torch OneCycleLR(max_lr=lr, total_steps=T, pct_start, div_factor,
 *             final_div_factor, anneal_strategy="cos", cycle_momentum=False): phase 1 anneals
 *             lr/div_factor -> lr over steps [0, pct_start*T - 1], phase 2 lr -> lr/(div_factor
 *             * final_div_factor) over [pct_start*T - 1, T - 1], each by the cosine
 *             end + (start - end) (1 + cos(pi * pct)) / 2. Steps past T keep the final rate
 *             (torch raises there; a run's total is fixed in advance, so only a resumed run
 *             with more epochs could get there).
 */
#include "nn/schedule.h"

#include <math.h>
#include <string.h>

#include "util/err.h"

static const char *const type_names[] = {
    [DT_SCHEDULE_CONSTANT] = "constant",
    [DT_SCHEDULE_STEP] = "step",
    [DT_SCHEDULE_COSINE] = "cosine",
    [DT_SCHEDULE_ONE_CYCLE] = "one_cycle",
};
_Static_assert(sizeof type_names / sizeof type_names[0] == DT_SCHEDULE_COUNT,
               "one name per schedule type");
const struct dt_names dt_schedule_type_names = DT_NAMES(type_names);
#define NTYPES DT_SCHEDULE_COUNT

int dt_schedule_type_parse(const char *name, enum dt_schedule_type *type)
{
    int v = dt_names_find(&dt_schedule_type_names, name);
    if (v < 0) {
        char valid[96];
        dt_names_join(&dt_schedule_type_names, valid, sizeof valid);
        return dt_fail(DT_EUSAGE, "unknown schedule \"%s\" (valid: %s)", name, valid);
    }
    *type = (enum dt_schedule_type)v;
    return 0;
}

const char *dt_schedule_type_name(enum dt_schedule_type type)
{
    return dt_names_name(&dt_schedule_type_names, (int)type);
}

int dt_schedule_validate(const struct dt_schedule *s)
{
    if ((int)s->type < 0 || (int)s->type >= NTYPES) {
        char valid[96];
        dt_names_join(&dt_schedule_type_names, valid, sizeof valid);
        return dt_fail(DT_EUSAGE, "schedule type %d is not one of %s", (int)s->type, valid);
    }
    if (!(s->lr >= 0))
        return dt_fail(DT_EUSAGE, "schedule: invalid lr %g (expected >= 0)", s->lr);
    if (s->warmup_steps < 0)
        return dt_fail(DT_EUSAGE, "schedule: invalid warmup_steps %ld (expected >= 0)",
                       s->warmup_steps);
    if (s->type == DT_SCHEDULE_STEP && s->step_size <= 0)
        return dt_fail(DT_EUSAGE, "step schedule: invalid step_size %d (expected > 0 epochs)",
                       s->step_size);
    if (s->type == DT_SCHEDULE_STEP && !(s->gamma > 0))
        return dt_fail(DT_EUSAGE, "step schedule: invalid gamma %g (expected > 0)", s->gamma);
    if (s->type == DT_SCHEDULE_COSINE && !(s->min_lr >= 0 && s->min_lr <= s->lr))
        return dt_fail(DT_EUSAGE,
                       "cosine schedule: invalid min_lr %g (expected 0 <= min_lr <= lr %g)",
                       s->min_lr, s->lr);
    if (s->type == DT_SCHEDULE_ONE_CYCLE) {
        if (!(s->pct_start > 0 && s->pct_start < 1))
            return dt_fail(DT_EUSAGE,
                           "one_cycle schedule: invalid pct_start %g (expected 0 < pct_start < 1)",
                           s->pct_start);
        if (!(s->div_factor > 0))
            return dt_fail(DT_EUSAGE, "one_cycle schedule: invalid div_factor %g (expected > 0)",
                           s->div_factor);
        if (!(s->final_div_factor > 0))
            return dt_fail(DT_EUSAGE,
                           "one_cycle schedule: invalid final_div_factor %g (expected > 0)",
                           s->final_div_factor);
        if (s->warmup_steps != 0)
            return dt_fail(DT_EUSAGE,
                           "one_cycle schedule: warmup_steps %ld given, but one_cycle has its own "
                           "warmup (pct_start); set warmup_steps to 0",
                           s->warmup_steps);
    }
    return 0;
}

static double cos_anneal(double start, double end, double pct)
{
    return end + (start - end) / 2.0 * (cos(M_PI * pct) + 1.0);
}

/* Transcribed from OneCycleLR.get_lr (torch 1.13), two phases. */
static double one_cycle_lr(const struct dt_schedule *s, long step, long total_steps)
{
    double initial = s->lr / s->div_factor, final = initial / s->final_div_factor;
    double end1 = s->pct_start * (double)total_steps - 1.0, end2 = (double)total_steps - 1.0;
    double t = (double)(step < total_steps ? step : total_steps - 1);
    if (t <= end1)
        return cos_anneal(initial, s->lr, end1 > 0 ? t / end1 : 1.0);
    return cos_anneal(s->lr, final, end2 > end1 ? (t - end1) / (end2 - end1) : 1.0);
}

static double cosine_lr(const struct dt_schedule *s, long step, long total_steps)
{
    long span = total_steps - s->warmup_steps;
    if (span <= 0)
        return s->lr;
    long t = step - s->warmup_steps;
    t = t < 0 ? 0 : t > span ? span : t;
    return s->min_lr + (s->lr - s->min_lr) * (1.0 + cos(M_PI * (double)t / (double)span)) / 2.0;
}

double dt_schedule_lr(const struct dt_schedule *s, long step, long epoch, long total_steps)
{
    double lr = s->lr;
    switch (s->type) {
    case DT_SCHEDULE_CONSTANT:
        break;
    case DT_SCHEDULE_STEP:
        lr = s->lr * pow(s->gamma, (double)(epoch / s->step_size));
        break;
    case DT_SCHEDULE_COSINE:
        lr = cosine_lr(s, step, total_steps);
        break;
    case DT_SCHEDULE_ONE_CYCLE:
        lr = one_cycle_lr(s, step, total_steps);
        break;
    }
    if (step < s->warmup_steps)
        lr *= (double)(step + 1) / (double)s->warmup_steps;
    return lr;
}

/* Learning-rate schedules: constant, step (per epoch), cosine (per step), each optionally
 * preceded by a linear warmup, and one-cycle (per step, its own warmup).
 *
 * The rate is a pure function of (step, epoch, total steps) and the schedule's parameters, with
 * no state carried from one step to the next, so a run resumed from a checkpoint at step s gets
 * exactly the rates an uninterrupted run would have used. Formulas: docs/optim.md.
 */
#ifndef DT_NN_SCHEDULE_H
#define DT_NN_SCHEDULE_H

#include "util/names.h"

enum dt_schedule_type {
    DT_SCHEDULE_CONSTANT,
    DT_SCHEDULE_STEP,
    DT_SCHEDULE_COSINE,
    DT_SCHEDULE_ONE_CYCLE
};
#define DT_SCHEDULE_COUNT (DT_SCHEDULE_ONE_CYCLE + 1)
/* optimizer.schedule.type's names: "constant", "step", "cosine", "one_cycle". */
extern const struct dt_names dt_schedule_type_names;

struct dt_schedule {
    enum dt_schedule_type type;
    double lr;         /* base (peak) rate */
    int step_size;     /* step: epochs between decays (> 0) */
    double gamma;      /* step: decay factor (> 0) */
    double min_lr;     /* cosine: rate reached after total_steps (0 <= min_lr <= lr) */
    long warmup_steps; /* linear warmup over the first warmup_steps steps (0 = none) */
    /* one_cycle (torch OneCycleLR, anneal_strategy "cos", three_phase False, cycle_momentum
     * False): lr is max_lr; the rate rises from lr / div_factor over the first pct_start of
     * the run, then falls to lr / (div_factor * final_div_factor). */
    double pct_start;        /* in (0, 1) */
    double div_factor;       /* > 0 */
    double final_div_factor; /* > 0 */
};

/* "constant", "step", "cosine", "one_cycle" -> type; DT_EUSAGE listing the valid names otherwise.
 */
int dt_schedule_type_parse(const char *name, enum dt_schedule_type *type);
const char *dt_schedule_type_name(enum dt_schedule_type type);
/* DT_EUSAGE naming the bad field and value. */
int dt_schedule_validate(const struct dt_schedule *s);

/* The rate for the update at 0-based global step `step`, which falls in 0-based `epoch`, in a
 * run of `total_steps` updates (used by cosine and one_cycle). */
double dt_schedule_lr(const struct dt_schedule *s, long step, long epoch, long total_steps);

#endif

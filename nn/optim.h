/* Optimizers: SGD (momentum, dampening, Nesterov, weight decay), Adam (optionally AMSGrad),
 * AdamW and Adadelta, each reproducing PyTorch 1.13's single-tensor update rule operation by
 * operation in float32, so a dtrain run and the equivalent torch.optim run stay within float
 * rounding of each other.
 *
 * An optimizer updates one flat arena (the model's `params` with its `grads`): all its state
 * arrays are allocated once at creation, sized like the arena, and mirror its layout, so the
 * state of parameter tensor t is the slice [t.offset, t.offset + t.count) of every state array.
 * A step allocates nothing and is elementwise, hence deterministic under any thread count.
 */
#ifndef DT_NN_OPTIM_H
#define DT_NN_OPTIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/names.h"

enum dt_optim_type { DT_OPTIM_SGD, DT_OPTIM_ADAM, DT_OPTIM_ADAMW, DT_OPTIM_ADADELTA };
#define DT_OPTIM_COUNT (DT_OPTIM_ADADELTA + 1)
/* optimizer.type's names: "sgd", "adam", "adamw", "adadelta". */
extern const struct dt_names dt_optim_type_names;

/* optimizer.weight_decay_skip: which parameters weight decay leaves alone. */
enum dt_decay_skip { DT_DECAY_SKIP_NONE, DT_DECAY_SKIP_BIAS_AND_NORM };
#define DT_DECAY_SKIP_COUNT (DT_DECAY_SKIP_BIAS_AND_NORM + 1)
/* "none", "bias_and_norm" */
extern const struct dt_names dt_decay_skip_names;

/* Hyper-parameters, in double like PyTorch's Python floats; each update converts a derived
 * coefficient (1 - beta1, -lr, ...) to float exactly where torch does. Fields that the chosen
 * type does not use are ignored. `lr` is the base rate the schedule scales. */
struct dt_optim_config {
    enum dt_optim_type type;
    double lr;
    double weight_decay;
    double momentum, dampening; /* sgd */
    bool nesterov;              /* sgd */
    double beta1, beta2;        /* adam, adamw */
    bool amsgrad;               /* adam, adamw */
    double eps;                 /* adam, adamw, adadelta */
    double rho;                 /* adadelta */
};

#define DT_OPTIM_MAX_STATES 3

/* One per-element state array ("exp_avg"), as many floats as the arena. */
struct dt_optim_state {
    const char *name;
    float *data;
};

struct dt_optim;

/* "sgd", "adam", "adamw", "adadelta" -> type; DT_EUSAGE listing the valid names otherwise. */
int dt_optim_type_parse(const char *name, enum dt_optim_type *type);
const char *dt_optim_type_name(enum dt_optim_type type);
/* The state arrays `cfg` needs (momentum_buffer, exp_avg, ...): what the optimizer allocates,
 * known before it exists (the parent sizes the ranks' shared copy with it). */
int dt_optim_state_count(const struct dt_optim_config *cfg);
/* PyTorch's defaults for `type` (lr included: 0.01 sgd... see docs/optim.md). */
void dt_optim_config_defaults(struct dt_optim_config *cfg, enum dt_optim_type type);

/* Validates cfg the way torch.optim's constructors do (DT_EUSAGE naming the bad value) and
 * allocates the state for an arena of n floats, zeroed. */
int dt_optim_create(struct dt_optim **out, const struct dt_optim_config *cfg, size_t n);
/* The same with the state arrays in caller-owned, zeroed storage of (number of states) x n
 * floats, one array after the other (the ranks of one host share it): nothing is allocated
 * for the state, and dt_optim_free leaves the storage alone. storage NULL = dt_optim_create. */
int dt_optim_create_in(struct dt_optim **out, const struct dt_optim_config *cfg, size_t n,
                       float *storage);
void dt_optim_free(struct dt_optim *o);

/* A parameter group, as torch.optim's param_groups: the rate is the step's lr x lr_scale,
 * decay off = weight_decay 0, frozen = not updated (nor its state: torch skips a parameter
 * without a gradient). */
struct dt_optim_group {
    double lr_scale;
    bool decay;
    bool frozen;
};
/* Puts arena elements [lo, hi) in group g (elements never given one: lr x 1, decay on). Ranges
 * are given in increasing order, without overlap; DT_EUSAGE otherwise. Adjacent ranges of the
 * same group merge. */
int dt_optim_set_group(struct dt_optim *o, size_t lo, size_t hi, const struct dt_optim_group *g);
/* Excludes arena elements [lo, hi) from weight decay (torch: a second parameter group with
 * weight_decay 0, as recipes do for biases and batchnorm weights): dt_optim_set_group with
 * lr x 1, decay off. */
int dt_optim_skip_decay(struct dt_optim *o, size_t lo, size_t hi);
/* Zeroes grads (the arena's n floats) in every frozen group's ranges, so a gradient norm taken
 * afterwards (clip_grad_norm) counts only what trains, as torch's does with frozen parameters'
 * grad None. The ranges are the ones set at set-up; no names are matched here. */
void dt_optim_zero_frozen_grads(const struct dt_optim *o, float *grads);

/* One update of params (n floats) from grads at learning rate lr (the schedule's value for this
 * step). n must be the size given at creation: DT_ERUNTIME otherwise, with nothing changed. */
int dt_optim_step(struct dt_optim *o, float *params, const float *grads, size_t n, double lr);

/* The same update restricted to elements [lo, hi) of the arena (params and grads are the whole
 * arenas): the ranks of one host each update their own slice of shared parameters and state.
 * Counts as one step. Identical, element for element, to the full step. */
int dt_optim_step_range(struct dt_optim *o, float *params, const float *grads, size_t lo, size_t hi,
                        double lr);

/* One step (dt_optim_step's, the same bits) cut into pieces, pieces [cuts[i], cuts[i + 1])
 * for i < count (increasing, cuts[count] <= n; elements outside [cuts[0], cuts[count]) are
 * left alone, as dt_optim_step_range leaves those outside its slice), spread over the OpenMP
 * team; after each piece's update, after(ctx, i) on the thread that made it, while the piece
 * is in its cache: a bf16 model's weight copy is made there (nn/weight_copy.h). Counts as one
 * step. DT_ERUNTIME for cuts out of order or past n, with nothing changed. */
struct dt_optim_pieces {
    const size_t *cuts;
    int count;
    void (*after)(void *ctx, int piece);
    void *ctx;
};
int dt_optim_step_pieces(struct dt_optim *o, float *params, const float *grads, size_t n, double lr,
                         const struct dt_optim_pieces *pc);

/* torch.nn.utils.clip_grad_norm_: the L2 norm of all n gradients (accumulated in double, so it
 * does not depend on the thread count beyond rounding of the last bits) and, when it exceeds
 * max_norm, every gradient scaled by max_norm / (norm + 1e-6). max_norm <= 0 only measures.
 * Returns the norm before clipping. */
double dt_clip_grad_norm(float *grads, size_t n, double max_norm);

/* Floats of state (every state array) for this optimizer. */
size_t dt_optim_state_floats(const struct dt_optim *o);

const struct dt_optim_config *dt_optim_config(const struct dt_optim *o);
size_t dt_optim_size(const struct dt_optim *o);
/* Number of steps taken (PyTorch's state["step"]); settable for resuming from a checkpoint. */
uint64_t dt_optim_steps(const struct dt_optim *o);
void dt_optim_set_steps(struct dt_optim *o, uint64_t steps);
/* The state arrays (names as in torch.optim's per-parameter state: momentum_buffer, exp_avg,
 * exp_avg_sq, max_exp_avg_sq, square_avg, acc_delta). Returns how many (0 for plain SGD). */
int dt_optim_states(struct dt_optim *o, struct dt_optim_state states[DT_OPTIM_MAX_STATES]);

#endif

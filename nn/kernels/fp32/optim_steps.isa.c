/* The optimizers' update loops (nn/optim.c documents the arithmetic), built twice: generic,
 * for any x86-64 CPU, and avx2 (AVX2 + FMA), whose fmaf is one instruction and whose loops run
 * 8 wide; nn/kernels/isa.c picks one (the avx2 build on the AVX-512 path too). Both give the same
 * bits: fmaf is correctly rounded either way. Without this a portable (x86-64-v2) build calls
 * libm's fmaf once per element, a tenth of a ConvNet step.
 *
 * The Makefile builds this file with -fno-math-errno: sqrtf of a non-negative float never sets
 * errno, but gcc vectorises the Adam and Adadelta loops only when told that errno does not
 * matter (scalar, Adam alone took a quarter of a CIFAR CNN step at one thread). Vector and
 * scalar square roots and divisions are all correctly rounded: the same bits either way. */
#include "nn/kernels/fp32/optim_steps.h"

#include <math.h>
#include <omp.h>

#include "nn/kernels/isa_fn.h"

/* Below this many floats the thread start-up costs more than the loop; inside a parallel
 * region (dt_optim_step_pieces) a loop is its thread's alone. The clause says `parallel :`: an
 * `if` on `parallel for simd` applies to the simd part too (OpenMP 5.0), and a loop below the
 * threshold then ran scalar. */
#define PARALLEL_MIN 65536
#define PARALLEL(n)  ((n) >= PARALLEL_MIN && !omp_in_parallel())

/* Adam's per-step float constants. */
struct adam_k {
    float neg_step, bc2_sqrt, b1, b2, eps, a1, a2, wd, shrink;
};

/* torch: d_p = g (+ wd * p); buf = d_p on the first step, else buf * momentum + (1 - dampening)
 * * d_p; d_p = nesterov ? d_p + momentum * buf : buf; p = p + (-lr) * d_p. */
static void DT_ISA_FN(sgd_step)(const struct dt_optim_config *c, float *const *state,
                                uint64_t steps, float *restrict p, const float *restrict g,
                                size_t n, double lr)
{
    const float wd = (float)c->weight_decay, neg_lr = (float)-lr;
    const bool decay = c->weight_decay != 0;
    if (c->momentum == 0) {
#pragma omp parallel for simd if (parallel : PARALLEL(n))
        for (size_t i = 0; i < n; i++) {
            float d = decay ? fmaf(p[i], wd, g[i]) : g[i];
            p[i] = fmaf(d, neg_lr, p[i]);
        }
        return;
    }
    float *restrict buf = state[0];
    const float mom = (float)c->momentum, keep = (float)(1.0 - c->dampening);
    const bool first = steps == 0, nesterov = c->nesterov;
#pragma omp parallel for simd if (parallel : PARALLEL(n))
    for (size_t i = 0; i < n; i++) {
        float d = decay ? fmaf(p[i], wd, g[i]) : g[i];
        float b = first ? d : fmaf(d, keep, buf[i] * mom);
        buf[i] = b;
        d = nesterov ? fmaf(b, mom, d) : b;
        p[i] = fmaf(d, neg_lr, p[i]);
    }
}

/* torch Adam/AdamW: (AdamW: p = p * (1 - lr * wd)); g = g (+ wd * p for Adam);
 * m = m * b1 + (1 - b1) * g; v = v * b2 + ((1 - b2) * g) * g; (amsgrad: vmax = max(vmax, v));
 * denom = sqrt(v) / sqrt(1 - b2^t) + eps; p = p + (-lr / (1 - b1^t) * m) / denom. */
/* One Adam element; the flags are compile-time constants at every call, so each loop below is
 * specialised and vectorises. */
static inline __attribute__((always_inline)) void
DT_ISA_FN(adam_elem)(float *restrict p, const float *restrict g, float *restrict m,
                     float *restrict v, float *restrict vmax, size_t i, bool adamw, bool l2,
                     bool amsgrad, const struct adam_k *k)
{
    float pi = adamw ? p[i] * k->shrink : p[i];
    float gi = l2 ? fmaf(pi, k->wd, g[i]) : g[i];
    float mi = fmaf(gi, k->a1, m[i] * k->b1);
    float vi = fmaf(k->a2 * gi, gi, v[i] * k->b2);
    m[i] = mi;
    v[i] = vi;
    float vd = vi;
    if (amsgrad) {
        vd = vmax[i] > vi ? vmax[i] : vi;
        vmax[i] = vd;
    }
    float denom = sqrtf(vd) / k->bc2_sqrt + k->eps;
    p[i] = pi + k->neg_step * mi / denom;
}

/* The loop for one combination of flags. */
#undef ADAM_LOOP
#define ADAM_LOOP(adamw, l2, amsgrad)                                                              \
    do {                                                                                           \
        _Pragma("omp parallel for simd if (parallel : PARALLEL(n))") for (size_t i = 0; i < n;     \
                                                                          i++)                     \
            DT_ISA_FN(adam_elem)(p, g, m, v, vmax, i, adamw, l2, amsgrad, &k);                     \
    } while (0)

static void DT_ISA_FN(adam_step)(const struct dt_optim_config *c, float *const *state,
                                 uint64_t steps, float *restrict p, const float *restrict g,
                                 size_t n, double lr)
{
    const double t = (double)steps; /* already counts this step */
    const double bc1 = 1.0 - pow(c->beta1, t), bc2 = 1.0 - pow(c->beta2, t);
    const struct adam_k k = {.neg_step = (float)-(lr / bc1),
                             .bc2_sqrt = (float)sqrt(bc2),
                             .b1 = (float)c->beta1,
                             .b2 = (float)c->beta2,
                             .eps = (float)c->eps,
                             .a1 = (float)(1.0 - c->beta1),
                             .a2 = (float)(1.0 - c->beta2),
                             .wd = (float)c->weight_decay,
                             .shrink = (float)(1.0 - lr * c->weight_decay)};
    const bool adamw = c->type == DT_OPTIM_ADAMW, l2 = !adamw && c->weight_decay != 0;
    float *restrict m = state[0], *restrict v = state[1];
    float *restrict vmax = c->amsgrad ? state[2] : NULL;
    if (c->amsgrad)
        ADAM_LOOP(adamw, l2, true); /* rare: not specialised further */
    else if (adamw)
        ADAM_LOOP(true, false, false);
    else if (l2)
        ADAM_LOOP(false, true, false);
    else
        ADAM_LOOP(false, false, false);
}

/* torch: g = g (+ wd * p); sa = sa * rho + ((1 - rho) * g) * g; std = sqrt(sa + eps);
 * delta = sqrt(ad + eps) / std * g; ad = ad * rho + ((1 - rho) * delta) * delta;
 * p = p + (-lr) * delta. */
static inline __attribute__((always_inline)) void
DT_ISA_FN(adadelta_elem)(float *restrict p, const float *restrict g, float *restrict sa,
                         float *restrict ad, size_t i, bool decay, float wd, float neg_lr,
                         float rho, float keep, float eps)
{
    float gi = decay ? fmaf(p[i], wd, g[i]) : g[i];
    float s = fmaf(keep * gi, gi, sa[i] * rho);
    sa[i] = s;
    float std = sqrtf(s + eps);
    float delta = sqrtf(ad[i] + eps) / std * gi;
    ad[i] = fmaf(keep * delta, delta, ad[i] * rho);
    p[i] = fmaf(delta, neg_lr, p[i]);
}

#undef ADADELTA_LOOP
#define ADADELTA_LOOP(decay)                                                                       \
    do {                                                                                           \
        _Pragma("omp parallel for simd if (parallel : PARALLEL(n))") for (size_t i = 0; i < n;     \
                                                                          i++)                     \
            DT_ISA_FN(adadelta_elem)(p, g, sa, ad, i, decay, wd, neg_lr, rho, keep, eps);          \
    } while (0)

static void DT_ISA_FN(adadelta_step)(const struct dt_optim_config *c, float *const *state,
                                     float *restrict p, const float *restrict g, size_t n,
                                     double lr)
{
    const float wd = (float)c->weight_decay, neg_lr = (float)-lr;
    const float rho = (float)c->rho, keep = (float)(1.0 - c->rho), eps = (float)c->eps;
    float *restrict sa = state[0], *restrict ad = state[1];
    if (c->weight_decay != 0)
        ADADELTA_LOOP(true);
    else
        ADADELTA_LOOP(false);
}

void DT_ISA_FN(dt_optim_update)(const struct dt_optim_config *c, float *const *state,
                                uint64_t steps, float *params, const float *grads, size_t n,
                                double lr)
{
    switch (c->type) {
    case DT_OPTIM_SGD:
        DT_ISA_FN(sgd_step)(c, state, steps, params, grads, n, lr);
        break;
    case DT_OPTIM_ADAM:
    case DT_OPTIM_ADAMW:
        DT_ISA_FN(adam_step)(c, state, steps, params, grads, n, lr);
        break;
    case DT_OPTIM_ADADELTA:
        DT_ISA_FN(adadelta_step)(c, state, params, grads, n, lr);
        break;
    }
}

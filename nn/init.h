/* Parameter initialisation with PyTorch's default distributions, drawn from dtrain's keyed RNG.
 *
 * Each tensor gets its own stream keyed by (seed, DT_RNG_INIT, layer index, tensor id), so a
 * tensor's values depend on nothing but the seed and its position in the model: adding a layer
 * at the end never changes the weights of the layers before it, and every rank builds the same
 * model. The numbers differ from PyTorch's (different generator) but the distributions match.
 */
#ifndef DT_NN_INIT_H
#define DT_NN_INIT_H

#include <stddef.h>
#include <stdint.h>

enum { DT_INIT_WEIGHT = 0, DT_INIT_BIAS = 1 };

/* p[i] ~ U(-bound, bound), i < n. */
void dt_init_uniform(float *p, size_t n, float bound, uint64_t seed, int layer, int tensor);

/* PyTorch's conv/linear default: kaiming_uniform(a = sqrt(5)) for the weight and
 * U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the bias; both bounds are 1/sqrt(fan_in).
 * bias may be NULL. */
void dt_init_fan_in(float *weight, size_t nweight, float *bias, size_t nbias, size_t fan_in,
                    uint64_t seed, int layer);

void dt_init_fill(float *p, size_t n, float value);

#endif

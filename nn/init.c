/* PyTorch-equivalent default initialisation (see nn/init.h for the keying scheme).
 *
 * kaiming_uniform_(w, a = sqrt(5)) has gain sqrt(2 / (1 + a^2)) = sqrt(1/3) and bound
 * gain * sqrt(3 / fan_in) = 1 / sqrt(fan_in): the same bound as the bias, which is why one
 * helper covers both. */
#include "nn/init.h"

#include <math.h>

#include "util/rng.h"

void dt_init_uniform(float *p, size_t n, float bound, uint64_t seed, int layer, int tensor)
{
    struct dt_rng r;
    dt_rng_init(&r, dt_rng_key(seed, DT_RNG_INIT, (uint64_t)layer, (uint64_t)tensor));
    for (size_t i = 0; i < n; i++)
        p[i] = (float)((2.0 * dt_rng_uniform_double(&r) - 1.0) * bound);
}

void dt_init_fan_in(float *weight, size_t nweight, float *bias, size_t nbias, size_t fan_in,
                    uint64_t seed, int layer)
{
    float bound = fan_in ? (float)(1.0 / sqrt((double)fan_in)) : 0.0f;
    dt_init_uniform(weight, nweight, bound, seed, layer, DT_INIT_WEIGHT);
    if (bias)
        dt_init_uniform(bias, nbias, bound, seed, layer, DT_INIT_BIAS);
}

void dt_init_fill(float *p, size_t n, float value)
{
    for (size_t i = 0; i < n; i++)
        p[i] = value;
}

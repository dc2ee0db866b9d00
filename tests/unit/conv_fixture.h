/* Buffers for the convolution kernel tests (test_conv_direct.c, test_conv_winograd.c): random
 * inputs in [-1, 1) from dtrain's own RNG (so a failure reproduces from its seed) and zeroed
 * double accumulators for the naive references. Include after <cmocka.h>. */
#ifndef DT_TESTS_CONV_FIXTURE_H
#define DT_TESTS_CONV_FIXTURE_H

#include <stdlib.h>

#include "util/rng.h"

static inline float *random_floats(struct dt_rng *rng, size_t n)
{
    float *p = malloc(sizeof(float) * n);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++)
        p[i] = 2.0f * dt_rng_uniform(rng) - 1.0f;
    return p;
}

static inline double *zeros(size_t n)
{
    double *p = calloc(n, sizeof(double));
    assert_non_null(p);
    return p;
}

#endif

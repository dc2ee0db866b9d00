/* Deterministic random numbers.
 *
 * Every random decision in dtrain (weight init, shuffling, dropout masks, augmentation) is a
 * pure function of a key built from the run's seed and *what* is being decided (epoch, sample
 * index, layer), never of which rank or thread draws it. That is what makes 1, 2 or 4
 * instances follow the same trajectory and makes resume bit-identical. The generator is
 * xoshiro256** seeded through splitmix64 from that key.
 */
#ifndef DT_UTIL_RNG_H
#define DT_UTIL_RNG_H

#include <stdint.h>

struct dt_rng {
    uint64_t s[4];
};

/* A well-mixed 64-bit hash (splitmix64 finalizer). */
uint64_t dt_mix64(uint64_t x);
/* Key for a (seed, a, b, c) tuple, e.g. (seed, DT_RNG_DROPOUT, epoch, sample). */
uint64_t dt_rng_key(uint64_t seed, uint64_t a, uint64_t b, uint64_t c);

void dt_rng_init(struct dt_rng *r, uint64_t key);
uint64_t dt_rng_next(struct dt_rng *r);
/* Uniform in [0, 1) with 24 random bits (float) or 53 (double). */
float dt_rng_uniform(struct dt_rng *r);
double dt_rng_uniform_double(struct dt_rng *r);
/* Uniform integer in [0, n), unbiased; n > 0. */
uint64_t dt_rng_below(struct dt_rng *r, uint64_t n);
/* Standard normal (Box-Muller, double precision internally). */
double dt_rng_normal(struct dt_rng *r);

/* Stream identifiers for dt_rng_key's first field, so different uses never share numbers. */
enum {
    DT_RNG_INIT = 1,
    DT_RNG_SHUFFLE = 2,
    DT_RNG_DROPOUT = 3,
    DT_RNG_AUGMENT = 4,
    DT_RNG_VAL_SPLIT = 5,
    DT_RNG_TEST = 99,
};

#endif

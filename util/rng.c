#include "util/rng.h"

#include <math.h>

uint64_t dt_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

uint64_t dt_rng_key(uint64_t seed, uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t k = dt_mix64(seed);
    k = dt_mix64(k ^ a);
    k = dt_mix64(k ^ b);
    return dt_mix64(k ^ c);
}

void dt_rng_init(struct dt_rng *r, uint64_t key)
{
    uint64_t x = key;
    for (int i = 0; i < 4; i++) {
        x = dt_mix64(x);
        r->s[i] = x;
    }
    if (!(r->s[0] | r->s[1] | r->s[2] | r->s[3]))
        r->s[0] = 1; /* xoshiro's one forbidden state */
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t dt_rng_next(struct dt_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

float dt_rng_uniform(struct dt_rng *r)
{
    return (float)(dt_rng_next(r) >> 40) * 0x1.0p-24f;
}

double dt_rng_uniform_double(struct dt_rng *r)
{
    return (double)(dt_rng_next(r) >> 11) * 0x1.0p-53;
}

uint64_t dt_rng_below(struct dt_rng *r, uint64_t n)
{
    /* Rejection sampling: retry the few values of the top partial range. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do {
        x = dt_rng_next(r);
    } while (x >= limit);
    return x % n;
}

double dt_rng_normal(struct dt_rng *r)
{
    double u1 = dt_rng_uniform_double(r), u2 = dt_rng_uniform_double(r);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Distributed sampler (see sampler.h for the semantics of both modes).
 *
 * The sampler keeps one permutation, that of the last epoch asked for, so the per-step call
 * is a slice of an array; a new epoch costs one O(n) shuffle. Everything a rank computes is
 * derived from (seed, epoch, n, batch, size), which is why ranks never need to talk to agree
 * on the sample order and why a resumed run continues exactly where it stopped.
 */
#include "data/sampler.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/rng.h"

void dt_sampler_permutation(uint64_t seed, uint64_t epoch, size_t n, uint32_t *perm)
{
    for (size_t i = 0; i < n; i++)
        perm[i] = (uint32_t)i;
    struct dt_rng r;
    dt_rng_init(&r, dt_rng_key(seed, DT_RNG_SHUFFLE, epoch, 0));
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)dt_rng_below(&r, i);
        uint32_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
}

static size_t div_up(size_t a, size_t b)
{
    return a / b + (a % b != 0);
}

static int sampler_check(const struct dt_sampler_opts *o)
{
    if (o->n == 0)
        return dt_fail(DT_EDATA, "sampler: the dataset is empty");
    if (o->n > UINT32_MAX)
        return dt_fail(DT_EDATA, "sampler: %zu samples is more than 2^32-1", o->n);
    if (o->size < 1 || o->rank < 0 || o->rank >= o->size)
        return dt_fail(DT_EUSAGE, "sampler: rank %d is not in 0..%d", o->rank, o->size - 1);
    if (o->batch == 0 || o->batch > (size_t)(INT_MAX / o->size))
        return dt_fail(DT_EUSAGE, "train.batch_size: %zu is out of range (1 to %d)", o->batch,
                       INT_MAX / o->size);
    return 0;
}

int dt_sampler_steps_for(const struct dt_sampler_opts *o, size_t *steps, size_t *per_rank)
{
    int rc = sampler_check(o);
    if (rc < 0)
        return rc;
    size_t n = o->n, size = (size_t)o->size, b = o->batch;
    *per_rank = 0;
    if (o->per_instance) {
        *per_rank = o->drop_last ? n / size : div_up(n, size);
        *steps = o->drop_last ? *per_rank / b : div_up(*per_rank, b);
    } else {
        *steps = o->drop_last ? n / b : div_up(n, b);
    }
    if (*steps == 0)
        return dt_fail(DT_EUSAGE,
                       "train.batch_size: %zu%s is more than the %zu samples of the "
                       "dataset and drop_last leaves no step",
                       b, o->per_instance ? " per instance" : "", n);
    return 0;
}

int dt_sampler_init(struct dt_sampler *s, const struct dt_sampler_opts *opts)
{
    memset(s, 0, sizeof(*s));
    int rc = dt_sampler_steps_for(opts, &s->steps, &s->per_rank);
    if (rc < 0)
        return rc;
    s->o = *opts;
    s->perm = malloc(opts->n * sizeof(*s->perm));
    if (!s->perm)
        return dt_fail(DT_ERUNTIME, "sampler: out of memory for %zu samples", opts->n);
    return 0;
}

void dt_sampler_free(struct dt_sampler *s)
{
    free(s->perm);
    memset(s, 0, sizeof(*s));
}

size_t dt_sampler_steps(const struct dt_sampler *s)
{
    return s->steps;
}

int dt_sampler_max_count(const struct dt_sampler *s)
{
    size_t b = s->o.batch, size = (size_t)s->o.size;
    return (int)(s->o.per_instance ? b : div_up(b, size));
}

static void sampler_prepare(struct dt_sampler *s, uint64_t epoch)
{
    if (s->have_perm && s->perm_epoch == epoch)
        return;
    if (s->o.sequential)
        for (size_t i = 0; i < s->o.n; i++)
            s->perm[i] = (uint32_t)i;
    else
        dt_sampler_permutation(s->o.seed, epoch, s->o.n, s->perm);
    s->perm_epoch = epoch;
    s->have_perm = 1;
}

int dt_sampler_batch(struct dt_sampler *s, uint64_t epoch, size_t step, uint32_t *idx, int *count,
                     int *global_count)
{
    if (step >= s->steps)
        return dt_fail(DT_ERUNTIME, "sampler: step %zu is past the epoch's %zu steps", step,
                       s->steps);
    sampler_prepare(s, epoch);
    size_t n = s->o.n, b = s->o.batch, size = (size_t)s->o.size, r = (size_t)s->o.rank;
    if (s->o.per_instance) {
        size_t first = step * b;
        size_t k = s->per_rank - first < b ? s->per_rank - first : b;
        for (size_t i = 0; i < k; i++)
            idx[i] = s->perm[(r + (first + i) * size) % n]; /* wraps like DistributedSampler */
        *count = (int)k;
        *global_count = (int)(k * size);
        return 0;
    }
    size_t first = step * b;
    size_t m = n - first < b ? n - first : b;
    size_t base = m / size, extra = m % size;
    size_t start = first + r * base + (r < extra ? r : extra);
    size_t k = base + (r < extra);
    memcpy(idx, s->perm + start, k * sizeof(*idx));
    *count = (int)k;
    *global_count = (int)m;
    return 0;
}

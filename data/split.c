/* dt_dataset_split (see split.h). */
#include "data/split.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/rng.h"

/* A copy of src's shape and class names with room for n samples. */
static int like(const struct dt_dataset *src, size_t n, struct dt_dataset *d)
{
    memset(d, 0, sizeof *d);
    d->c = src->c;
    d->h = src->h;
    d->w = src->w;
    d->classes = src->classes;
    d->n = n;
    memcpy(d->source, src->source, sizeof d->source);
    d->x = malloc(n * dt_dataset_sample_bytes(src) + 1);
    d->y = malloc(n + 1);
    if (!d->x || !d->y)
        return dt_fail(DT_ERUNTIME, "out of memory splitting %zu samples", src->n);
    if (src->names) {
        if (!(d->names = calloc((size_t)src->classes, sizeof *d->names)))
            return dt_fail(DT_ERUNTIME, "out of memory");
        for (int i = 0; i < src->classes; i++)
            if (src->names[i] && !(d->names[i] = strdup(src->names[i])))
                return dt_fail(DT_ERUNTIME, "out of memory");
    }
    if (src->files && !(d->files = calloc(n + 1, sizeof *d->files)))
        return dt_fail(DT_ERUNTIME, "out of memory");
    return 0;
}

int dt_dataset_split(const struct dt_dataset *src, double fraction, uint64_t seed,
                     struct dt_dataset *train, struct dt_dataset *val)
{
    memset(train, 0, sizeof *train);
    memset(val, 0, sizeof *val);
    if (!(fraction > 0 && fraction < 1))
        return dt_fail(DT_EUSAGE, "data.val_fraction: %g is not between 0 and 1", fraction);
    size_t n = src->n, nval = 0;
    uint8_t *to_val = calloc(n + 1, 1);
    size_t *idx = malloc(sizeof *idx * (n + 1));
    if (!to_val || !idx) {
        free(to_val);
        free(idx);
        return dt_fail(DT_ERUNTIME, "out of memory splitting %zu samples", n);
    }
    for (int c = 0; c < src->classes; c++) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (src->y[i] == c)
                idx[k++] = i;
        struct dt_rng r;
        dt_rng_init(&r, dt_rng_key(seed, DT_RNG_VAL_SPLIT, (uint64_t)c, 0));
        for (size_t i = k; i > 1; i--) {
            size_t j = (size_t)dt_rng_below(&r, i);
            size_t t = idx[i - 1];
            idx[i - 1] = idx[j];
            idx[j] = t;
        }
        size_t take = (size_t)llround(fraction * (double)k);
        for (size_t i = 0; i < take; i++)
            to_val[idx[i]] = 1;
        nval += take;
    }
    free(idx);
    int rc = 0;
    if (nval == 0 || nval == n)
        rc = dt_fail(DT_EDATA, "%s: data.val_fraction %g of %zu samples leaves %s empty",
                     src->source, fraction, n, nval == 0 ? "the validation split" : "training");
    if (!rc)
        rc = like(src, n - nval, train);
    if (!rc)
        rc = like(src, nval, val);
    if (!rc) {
        size_t sample = dt_dataset_sample_bytes(src), a = 0, b = 0;
        for (size_t i = 0; i < n; i++) {
            struct dt_dataset *d = to_val[i] ? val : train;
            size_t *k = to_val[i] ? &b : &a;
            memcpy(d->x + *k * sample, src->x + i * sample, sample);
            d->y[*k] = src->y[i];
            if (src->files && src->files[i] && !(d->files[*k] = strdup(src->files[i])))
                rc = dt_fail(DT_ERUNTIME, "out of memory");
            ++*k;
        }
    }
    if (rc) {
        dt_dataset_free(train);
        dt_dataset_free(val);
    }
    free(to_val);
    return rc;
}

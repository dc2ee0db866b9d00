/* Batch assembly (see batch.h).
 *
 * The plain path is a table lookup per byte. The augmented path computes, per output row, the
 * source row and the range of columns that fall inside the image; everything outside is the
 * padding value lut[ch][0], exactly what torchvision produces by padding the uint8 image with
 * zeros before ToTensor and Normalize.
 */
#include "data/batch.h"

#include <stddef.h>
#include <string.h>

#include "util/err.h"
#include "util/rng.h"

static int batch_stat(const float *v, int nv, int c, int ch, float none, float *out,
                      const char *key)
{
    if (nv != 0 && nv != 1 && nv != c)
        return dt_fail(DT_EUSAGE, "data.%s: %d values, expected 1 or %d (one per channel)", key, nv,
                       c);
    *out = nv == 0 ? none : v[nv == 1 ? 0 : ch];
    return 0;
}

int dt_batcher_init(struct dt_batcher *b, const struct dt_dataset *d, const struct dt_batch_opts *o)
{
    memset(b, 0, sizeof(*b));
    if (d->c < 1 || d->c > DT_BATCH_MAX_CHANNELS)
        return dt_fail(DT_EUSAGE, "batch: %d channels, at most %d supported", d->c,
                       DT_BATCH_MAX_CHANNELS);
    if (o->crop_padding < 0 || o->crop_padding >= d->h || o->crop_padding >= d->w)
        return dt_fail(DT_EUSAGE,
                       "data.crop_padding: %d must be 0 or more and below the image "
                       "size %dx%d",
                       o->crop_padding, d->h, d->w);
    for (int ch = 0; ch < d->c; ch++) {
        float mean = 0.0f, std = 1.0f;
        int rc = batch_stat(o->mean, o->nmean, d->c, ch, 0.0f, &mean, "mean");
        if (rc == 0)
            rc = batch_stat(o->std, o->nstd, d->c, ch, 1.0f, &std, "std");
        if (rc < 0)
            return rc;
        if (!(std > 0.0f))
            return dt_fail(DT_EUSAGE, "data.std: %g for channel %d, must be positive", (double)std,
                           ch);
        for (int v = 0; v < 256; v++)
            b->lut[ch][v] = ((float)v / 255.0f - mean) / std;
        b->mean[ch] = mean;
        b->std[ch] = std;
    }
    if (o->augment && dt_augment_enabled(o->augment)) {
        int rc = dt_augment_check_channels(o->augment, d->c);
        if (rc)
            return rc;
        b->aug = *o->augment;
        b->augment_on = true;
    }
    b->c = d->c;
    b->h = d->h;
    b->w = d->w;
    b->hflip = o->hflip;
    b->crop_padding = o->crop_padding;
    b->seed = o->seed;
    return 0;
}

/* The first draws of a sample's generator, as they were before data.augment existed. */
static void draw_crop_flip(const struct dt_batcher *b, struct dt_rng *r, int *oy, int *ox,
                           int *flip)
{
    int p = b->crop_padding;
    *oy = p ? (int)dt_rng_below(r, (uint64_t)(2 * p + 1)) : p;
    *ox = p ? (int)dt_rng_below(r, (uint64_t)(2 * p + 1)) : p;
    *flip = b->hflip ? dt_rng_uniform(r) < 0.5f : 0;
}

void dt_batch_augment_params(const struct dt_batcher *b, uint64_t epoch, uint32_t sample, int *oy,
                             int *ox, int *flip)
{
    struct dt_rng r;
    dt_rng_init(&r, dt_rng_key(b->seed, DT_RNG_AUGMENT, epoch, sample));
    draw_crop_flip(b, &r, oy, ox, flip);
}

void dt_batch_sample_draw(const struct dt_batcher *b, uint64_t epoch, uint32_t sample,
                          struct dt_augment_draw *d)
{
    struct dt_rng r;
    dt_rng_init(&r, dt_rng_key(b->seed, DT_RNG_AUGMENT, epoch, sample));
    d->pad = b->crop_padding;
    draw_crop_flip(b, &r, &d->oy, &d->ox, &d->flip);
    struct dt_augment_opts none = {0};
    dt_augment_draw(b->augment_on ? &b->aug : &none, &r, b->h, b->w, d);
}

static void batch_plain(const struct dt_batcher *b, const uint8_t *src, float *dst)
{
    size_t plane = (size_t)b->h * (size_t)b->w;
    for (int ch = 0; ch < b->c; ch++) {
        const float *lut = b->lut[ch];
        const uint8_t *s = src + ch * plane;
        float *o = dst + ch * plane;
        for (size_t i = 0; i < plane; i++)
            o[i] = lut[s[i]];
    }
}

/* Output (i, j) shows padded-image pixel (i + oy, jj + ox), jj = flip ? w-1-j : j; the
 * original pixel is that minus p in each direction. */
static void batch_augmented(const struct dt_batcher *b, const uint8_t *src, float *dst, int oy,
                            int ox, int flip)
{
    int h = b->h, w = b->w, p = b->crop_padding;
    for (int ch = 0; ch < b->c; ch++) {
        const float *lut = b->lut[ch];
        const uint8_t *plane = src + (size_t)ch * h * w;
        for (int i = 0; i < h; i++) {
            float *o = dst + ((size_t)ch * h + i) * w;
            int sy = i + oy - p;
            if (sy < 0 || sy >= h) {
                for (int j = 0; j < w; j++)
                    o[j] = lut[0];
                continue;
            }
            const uint8_t *row = plane + (size_t)sy * w;
            for (int j = 0; j < w; j++) {
                int sx = (flip ? w - 1 - j : j) + ox - p;
                o[j] = sx >= 0 && sx < w ? lut[row[sx]] : lut[0];
            }
        }
    }
}

void dt_batch_assemble(const struct dt_batcher *b, const struct dt_dataset *d, const uint32_t *idx,
                       int count, uint64_t epoch, int augment, float *x, uint8_t *y)
{
    size_t sample = dt_dataset_sample_bytes(d);
    bool full = augment && b->augment_on;
    augment = augment && (b->hflip || b->crop_padding);
    struct dt_augment_image im = {b->c, b->h, b->w, b->mean, b->std};
#pragma omp parallel for schedule(static) if (full && count > 1)
    for (int k = 0; k < count; k++) {
        const uint8_t *src = d->x + (size_t)idx[k] * sample;
        float *dst = x + (size_t)k * sample;
        y[k] = d->y[idx[k]];
        if (full) {
            struct dt_augment_draw draw;
            dt_batch_sample_draw(b, epoch, idx[k], &draw);
            dt_augment_apply(&b->aug, &draw, &im, src, dst);
            continue;
        }
        int oy, ox, flip;
        if (augment)
            dt_batch_augment_params(b, epoch, idx[k], &oy, &ox, &flip);
        if (augment && (flip || oy != b->crop_padding || ox != b->crop_padding))
            batch_augmented(b, src, dst, oy, ox, flip);
        else
            batch_plain(b, src, dst);
    }
}

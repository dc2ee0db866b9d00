/* Training augmentations beyond the padded crop and flip: random-resized-crop, rotation, colour
 * jitter and random erasing, each modelled on its torchvision namesake.
 *
 * The options (struct dt_augment_opts) are the config's data.augment group, filled and
 * checked once at load; this module owns their meaning. The random draws for one sample
 * (struct dt_augment_draw) come from the caller's generator, which data/batch.c keys by
 * (seed, epoch, sample): whichever rank and thread assembles a sample, it gets the same crop
 * box, angle, factors and erased rectangle. Applying a draw is a pure function of the uint8
 * image and the draw.
 *
 * Order of application (docs/data.md): resized crop, padded crop, horizontal flip, rotation
 * (geometry, each output value sampled once from the decoded image through the chain), then
 * brightness, contrast, saturation on pixel values (0..255, clamped), then normalization,
 * then erasing (its value is in normalized units, as torchvision's RandomErasing after
 * Normalize).
 */
#ifndef DT_DATA_AUGMENT_H
#define DT_DATA_AUGMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct dt_rng;

/* data.augment.* (docs/config.md). The n* counts are the config's list lengths; a valid
 * range list has exactly 2 values. */
struct dt_augment_opts {
    bool resized_crop;
    int ncrop_scale, ncrop_ratio, nerase_scale, nerase_ratio;
    float crop_scale[2]; /* share of the image's area, (0, 1] */
    float crop_ratio[2]; /* width / height of the crop box */
    float rotate;        /* degrees: the angle is uniform in [-rotate, rotate] */
    int rotate_fill;     /* pixel value (0..255) of what the rotation brings in */
    float brightness, contrast, saturation; /* factor uniform in [max(0, 1-v), 1+v] */
    float erase;                            /* probability of erasing a rectangle */
    float erase_scale[2];                   /* its share of the image's area */
    float erase_ratio[2];                   /* its width / height */
    float erase_value;                      /* in normalized units (after mean and std) */
};

/* What one sample gets. The padded crop and flip are data/batch.c's draws, carried here so
 * one function applies the whole chain. */
struct dt_augment_draw {
    int pad, oy, ox, flip;                  /* padded crop: offsets 0..2*pad; flip 0/1 */
    int crop_y, crop_x, crop_h, crop_w;     /* resized crop box in the decoded image */
    float angle;                            /* degrees counter-clockwise; 0 = none */
    float brightness, contrast, saturation; /* factors; 1 = none */
    int erase_y, erase_x, erase_h, erase_w; /* erase_h == 0: nothing erased */
};

/* Any of the transforms of this module is on. */
bool dt_augment_enabled(const struct dt_augment_opts *o);

/* The checks one key alone cannot make (list lengths, min <= max). Returns 0, or -1 with
 * *key set to the offending key's full path and `why` to what is wrong. */
int dt_augment_check(const struct dt_augment_opts *o, const char **key, char *why, size_t size);

/* Checks against the data's channel count: saturation needs 3. DT_EUSAGE with the key. */
int dt_augment_check_channels(const struct dt_augment_opts *o, int c);

/* Draws this module's part of d (d->pad, oy, ox, flip are left alone) for an h x w image,
 * in a fixed order, only for the transforms that are on. */
void dt_augment_draw(const struct dt_augment_opts *o, struct dt_rng *r, int h, int w,
                     struct dt_augment_draw *d);

/* torchvision RandomResizedCrop.get_params: 10 tries of (area share, log-uniform ratio),
 * then a centre crop clamped to the ratio range. The box always lies inside h x w. */
void dt_augment_crop_box(struct dt_rng *r, int h, int w, const float scale[2], const float ratio[2],
                         int *y, int *x, int *bh, int *bw);

/* torchvision RandomErasing.get_params: 10 tries; *eh = 0 when none fits. */
void dt_augment_erase_box(struct dt_rng *r, int h, int w, const float scale[2],
                          const float ratio[2], int *y, int *x, int *eh, int *ew);

/* The image a transform works on: c planes of h x w. */
struct dt_augment_image {
    int c, h, w;
    const float *mean, *std; /* per channel, for normalization */
};

/* Writes the augmented, normalized sample: ((v / 255) - mean) / std per channel, in the
 * same float arithmetic as data/batch.c's table, so a draw that changes nothing gives
 * exactly the plain batch. */
void dt_augment_apply(const struct dt_augment_opts *o, const struct dt_augment_draw *d,
                      const struct dt_augment_image *im, const uint8_t *src, float *dst);

#endif

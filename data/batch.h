/* Batch assembly: gathers samples by index into a float NCHW batch, normalized and
 * optionally augmented, plus their labels.
 *
 * Normalization is torchvision's ToTensor + Normalize in float arithmetic: ((v / 255) - mean)
 * / std per channel, precomputed for all 256 byte values of each channel, so assembling a
 * batch is one table lookup per value and allocates nothing.
 *
 * Augmentation (training only) is torchvision's RandomCrop(padding=p) (zero padding in pixel
 * space) followed by RandomHorizontalFlip(0.5). Its random numbers come from
 * dt_rng_key(seed, DT_RNG_AUGMENT, epoch, sample index): the same image gets the same crop and
 * flip in an epoch whichever rank processes it and however many ranks there are.
 *
 * The data.augment transforms (data/augment.h: resized crop, rotation, colour jitter, erasing)
 * draw from the same per-sample generator after the crop and flip, so turning them on leaves
 * those draws as they were. A batch with them on is assembled by the rank's OpenMP threads,
 * one sample per iteration: a sample's values never depend on the thread or the batch.
 */
#ifndef DT_DATA_BATCH_H
#define DT_DATA_BATCH_H

#include <stdint.h>

#include "data/augment.h"
#include "data/dataset.h"

#define DT_BATCH_MAX_CHANNELS 4

struct dt_batch_opts {
    const float *mean; /* nmean values (0, 1 or c): 0 means 0 */
    int nmean;
    const float *std; /* nstd values (0, 1 or c): 0 means 1 */
    int nstd;
    int hflip;        /* random horizontal flip */
    int crop_padding; /* random crop after zero padding by this many pixels (0 = off) */
    const struct dt_augment_opts *augment; /* data.augment; NULL = none */
    uint64_t seed;
};

struct dt_batcher {
    int c, h, w;
    int hflip, crop_padding;
    bool augment_on; /* any of aug's transforms */
    struct dt_augment_opts aug;
    uint64_t seed;
    float mean[DT_BATCH_MAX_CHANNELS], std[DT_BATCH_MAX_CHANNELS];
    float lut[DT_BATCH_MAX_CHANNELS][256];
};

/* Prepares for batches of dataset d's shape. DT_EUSAGE for a mean/std count other than 0, 1
 * or c, a non-positive std, too many channels, padding not below the image size, or an
 * augmentation the data's shape cannot take (saturation without 3 channels). */
int dt_batcher_init(struct dt_batcher *b, const struct dt_dataset *d,
                    const struct dt_batch_opts *opts);

/* Writes count samples d[idx[i]] into x (count * c*h*w floats) and their labels into y.
 * augment = 0 for evaluation (the flip/crop options are then ignored). */
void dt_batch_assemble(const struct dt_batcher *b, const struct dt_dataset *d, const uint32_t *idx,
                       int count, uint64_t epoch, int augment, float *x, uint8_t *y);

/* The crop offsets (0..2p each) and flip a sample gets in an epoch: what dt_batch_assemble
 * applies, exposed for tests and for anyone reproducing a batch. */
void dt_batch_augment_params(const struct dt_batcher *b, uint64_t epoch, uint32_t sample, int *oy,
                             int *ox, int *flip);

/* Everything a sample gets in an epoch, the crop and flip above included. */
void dt_batch_sample_draw(const struct dt_batcher *b, uint64_t epoch, uint32_t sample,
                          struct dt_augment_draw *d);

#endif

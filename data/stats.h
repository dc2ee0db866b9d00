/* Per-channel statistics of a dataset's images, for data.mean = "auto" / data.std = "auto".
 *
 * The sums are exact (64-bit integer sums of bytes and of their squares), so the result is the
 * same whatever order or process computes it: every host's parent gets identical values from
 * identical data, and a resumed run gets the values the first run had.
 */
#ifndef DT_DATA_STATS_H
#define DT_DATA_STATS_H

#include "data/dataset.h"

/* mean[ch] and std[ch] (population standard deviation, numpy's default) of the values x/255
 * of channel ch over all of d's samples, for ch < d->c. d->n must be above 0. */
void dt_dataset_channel_stats(const struct dt_dataset *d, float *mean, float *std);

#endif

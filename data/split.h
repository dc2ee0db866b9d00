/* A held-out validation split of a training set, deterministic per seed.
 *
 * Stratified: within each class, the class's samples are shuffled by a Fisher-Yates pass keyed
 * on (seed, DT_RNG_VAL_SPLIT, class) and the first round(fraction * count) go to validation,
 * so every class keeps its share (a class of one sample keeps it for training when the
 * rounding gives 0). Both outputs keep the source's order among their samples, so the split
 * does not change how a sampler walks the training part. The pixels are copied: both outputs
 * are ordinary datasets the caller frees, and the source can be freed at once.
 */
#ifndef DT_DATA_SPLIT_H
#define DT_DATA_SPLIT_H

#include <stdint.h>

#include "data/dataset.h"

/* Splits src into train and val; fraction in (0, 1). Fails (-DT_EDATA) when validation or
 * training would be empty, -DT_EUSAGE for a fraction out of range. */
int dt_dataset_split(const struct dt_dataset *src, double fraction, uint64_t seed,
                     struct dt_dataset *train, struct dt_dataset *val);

#endif

/* Class selection: a dataset cut down to some of its classes, relabelled in the order given,
 * for training on part of a labelled set (data.select_classes; fine-tuning experiments train on
 * classes 0-4 of a set, then on 5-9). */
#ifndef DT_DATA_SELECT_H
#define DT_DATA_SELECT_H

#include "data/dataset.h"

/* Keeps the samples whose label is one of classes[0..n-1], in their order, relabelled to its
 * position in the list, and the class names to match; d->classes becomes n. Each class must be
 * below d->classes and appear once: DT_EUSAGE naming `what` (the config key) otherwise. The
 * arrays shrink in place (the images keep their order). */
int dt_dataset_select_classes(struct dt_dataset *d, const int *classes, int n, const char *what);

#endif

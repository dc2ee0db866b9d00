/* Archive datasets by format name: the dispatch to the readers (data/idx.h, data/cifar.h).
 * Kept apart from data/dataset.c, which the readers include, so that no two files include
 * each other. Image folders have their own loader (data/folder.h). */
#ifndef DT_DATA_LOAD_H
#define DT_DATA_LOAD_H

#include "data/dataset.h"
#include "util/names.h"

/* data.format's values: "" (the registry's format for the dataset), "idx", "cifar10",
 * "cifar100", "folder" (the last is data/folder.h's loader, not dispatched here). */
extern const struct dt_names dt_data_format_names;

/* Loads the train and test splits of a dataset kind from `dir`:
 *   kind "idx"      train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz,
 *                   t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz (MNIST family)
 *   kind "cifar10"  cifar-10-binary.tar.gz
 *   kind "cifar100" cifar-100-binary.tar.gz (fine labels unless coarse_labels)
 * `classes` is the expected class count (labels must be below it); 0 means the format's own.
 * Returns 0, or -DT_EDATA with a one-line message naming the file and the problem. */
int dt_data_load(struct dt_data *out, const char *kind, const char *dir, int classes,
                 int coarse_labels);

/* The test split alone, for evaluation: IDX reads only the t10k files; a CIFAR archive holds
 * both splits, so the training half is read and dropped. */
int dt_data_load_test(struct dt_dataset *test, const char *kind, const char *dir, int classes,
                      int coarse_labels);

#endif

/* Archive datasets by format name: the dispatch to the readers (data/idx.h, data/cifar.h).
 * Kept apart from data/dataset.c, which the readers include, so that no two files include
 * each other. Image folders have their own loader (data/folder.h). */
#ifndef DT_DATA_LOAD_H
#define DT_DATA_LOAD_H

#include "data/dataset.h"
#include "util/names.h"

/* data.format (and a registry entry's format): how a dataset's files are laid out. FOLDER is
 * data/folder.h's loader, not dispatched here; UNSET ("" in a config) stands for the
 * registry's format of data.dataset until the config's load replaces it. */
enum dt_data_format {
    DT_DATA_FORMAT_UNSET,
    DT_DATA_IDX,
    DT_DATA_CIFAR10,
    DT_DATA_CIFAR100,
    DT_DATA_FOLDER,
    DT_DATA_FORMAT_COUNT
};

/* The config spellings: "", "idx", "cifar10", "cifar100", "folder". */
extern const struct dt_names dt_data_format_names;

/* Loads the train and test splits of an archive dataset from `dir`:
 *   DT_DATA_IDX      train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz,
 *                    t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz (MNIST family)
 *   DT_DATA_CIFAR10  cifar-10-binary.tar.gz
 *   DT_DATA_CIFAR100 cifar-100-binary.tar.gz (fine labels unless coarse_labels)
 * `classes` is the expected class count (labels must be below it); 0 means the format's own.
 * Returns 0, or -DT_EDATA with a one-line message naming the file and the problem. */
int dt_data_load(struct dt_data *out, enum dt_data_format format, const char *dir, int classes,
                 int coarse_labels);

/* The test split alone, for evaluation: IDX reads only the t10k files; a CIFAR archive holds
 * both splits, so the training half is read and dropped. */
int dt_data_load_test(struct dt_dataset *test, enum dt_data_format format, const char *dir,
                      int classes, int coarse_labels);

#endif

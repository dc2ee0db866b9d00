/* An in-memory dataset: uint8 samples in NCHW order plus one uint8 label per sample.
 *
 * Format readers (data/idx.c, data/cifar.c) fill it after validating everything they read.
 * The arrays are allocated once by the parent process before it forks the ranks, so every
 * rank reads the same pages (copy-on-write, never written after load).
 */
#ifndef DT_DATA_DATASET_H
#define DT_DATA_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "util/names.h"

#define DT_MAX_CLASSES 256

/* data.format's values: "" (the registry's format for the dataset), "idx", "cifar10",
 * "cifar100", "folder". */
extern const struct dt_names dt_data_format_names;

struct dt_dataset {
    size_t n;    /* samples */
    int c, h, w; /* channels, height, width */
    uint8_t *x;  /* n * c * h * w bytes, NCHW */
    uint8_t *y;  /* n labels, each < classes */
    int classes;
    char **names;     /* classes class names (NULL entries allowed), or NULL */
    char source[512]; /* what was read, for summaries: "dir/train-images-idx3-ubyte.gz, ..." */
    size_t skipped;       /* image folders with skip_bad: bad files left out */
    char first_bad[512]; /* ...and the first one's error, for the report */
};

/* The two splits a training run uses. */
struct dt_data {
    struct dt_dataset train, test;
    struct dt_dataset val; /* held out of training to choose the best epoch; n = 0 when none */
};

size_t dt_dataset_sample_bytes(const struct dt_dataset *d);
void dt_dataset_free(struct dt_dataset *d);
void dt_data_free(struct dt_data *d);
/* Counts per class into hist[classes]. */
void dt_dataset_histogram(const struct dt_dataset *d, size_t *hist);

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

/* Control characters (terminal escapes, newlines) in a class name read from a file or a
 * directory name become '?', in place: names are printed to terminals and logs. */
void dt_class_name_sanitize(char *name);

/* The name of class i: d->names[i] when there is one, else its number written into buf. */
const char *dt_dataset_class_name(const struct dt_dataset *d, int i, char *buf, size_t size);

#endif

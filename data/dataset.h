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

#define DT_MAX_CLASSES 256

struct dt_dataset {
    size_t n;    /* samples */
    int c, h, w; /* channels, height, width */
    uint8_t *x;  /* n * c * h * w bytes, NCHW */
    uint8_t *y;  /* n labels, each < classes */
    int classes;
    char **names;        /* classes class names (NULL entries allowed), or NULL */
    char source[512];    /* what was read, for summaries: "dir/train-images-idx3-ubyte.gz, ..." */
    size_t skipped;      /* image folders with skip_bad: bad files left out */
    char first_bad[512]; /* ...and the first one's error, for the report */
    /* n sample file names relative to the data directory ("test/cat/0001.png"), for data
     * read from one file per sample (image folders); NULL for archives (IDX, CIFAR). */
    char **files;
};

/* The two splits a training run uses. */
struct dt_data {
    struct dt_dataset train, test;
    struct dt_dataset val; /* held out of training to choose the best epoch; n = 0 when none */
};

/* A split by name (eval --split, predict --split), parsed once where the command line is read. */
enum dt_split { DT_SPLIT_TRAIN, DT_SPLIT_VAL, DT_SPLIT_TEST, DT_SPLIT_COUNT };
/* "train", "val", "test". */
const char *dt_split_name(enum dt_split s);
/* The name -> the split; -DT_EUSAGE naming `what` (the option) and the valid names otherwise. */
int dt_split_parse(const char *what, const char *name, enum dt_split *out);
/* That split of d. */
const struct dt_dataset *dt_data_split(const struct dt_data *d, enum dt_split s);
/* How sample i is named in reports: its file (d->files) or, for an archive, "SPLIT#i". */
const char *dt_dataset_sample_name(const struct dt_dataset *d, enum dt_split split, size_t i,
                                   char *buf, size_t size);

size_t dt_dataset_sample_bytes(const struct dt_dataset *d);
void dt_dataset_free(struct dt_dataset *d);
void dt_data_free(struct dt_data *d);
/* Counts per class into hist[classes]. */
void dt_dataset_histogram(const struct dt_dataset *d, size_t *hist);

/* Control characters (terminal escapes, newlines) in a class name read from a file or a
 * directory name become '?', in place: names are printed to terminals and logs. */
void dt_class_name_sanitize(char *name);

/* The name of class i: d->names[i] when there is one, else its number written into buf. */
const char *dt_dataset_class_name(const struct dt_dataset *d, int i, char *buf, size_t size);

#endif

/* dt_data_load and the small helpers of struct dt_dataset (see dataset.h).
 *
 * This file only dispatches on the format name and owns the dataset's memory rules: x, y,
 * names and every name string are malloc'd and freed here, whatever reader filled them.
 */
#include "data/dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/cifar.h"
#include "data/idx.h"
#include "util/err.h"

size_t dt_dataset_sample_bytes(const struct dt_dataset *d)
{
    return (size_t)d->c * (size_t)d->h * (size_t)d->w;
}

void dt_dataset_free(struct dt_dataset *d)
{
    free(d->x);
    free(d->y);
    if (d->names)
        for (int i = 0; i < d->classes; i++)
            free(d->names[i]);
    free(d->names);
    memset(d, 0, sizeof(*d));
}

void dt_data_free(struct dt_data *d)
{
    dt_dataset_free(&d->train);
    dt_dataset_free(&d->test);
    dt_dataset_free(&d->val);
}

void dt_dataset_histogram(const struct dt_dataset *d, size_t *hist)
{
    memset(hist, 0, (size_t)d->classes * sizeof(*hist));
    for (size_t i = 0; i < d->n; i++)
        if (d->y[i] < d->classes)
            hist[d->y[i]]++;
}

static const char *const format_names[] = {"", "idx", "cifar10", "cifar100", "folder"};
const struct dt_names dt_data_format_names = DT_NAMES(format_names);

int dt_data_load(struct dt_data *out, const char *kind, const char *dir, int classes,
                 int coarse_labels)
{
    memset(out, 0, sizeof(*out));
    if (classes < 0 || classes > DT_MAX_CLASSES)
        return dt_fail(DT_EUSAGE, "data.classes: %d is out of range (0 to %d)", classes,
                       DT_MAX_CLASSES);
    if (strcmp(kind, "idx") == 0)
        return dt_idx_load(out, dir, classes);
    int cifar100 = strcmp(kind, "cifar100") == 0;
    if (!cifar100 && strcmp(kind, "cifar10") != 0)
        return dt_fail(DT_EUSAGE,
                       "data.format: unknown dataset format '%s' (expected idx, "
                       "cifar10 or cifar100)",
                       kind);
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", dir,
             cifar100 ? "cifar-100-binary.tar.gz" : "cifar-10-binary.tar.gz");
    return dt_cifar_load(out, path, cifar100, classes, coarse_labels);
}

int dt_data_load_test(struct dt_dataset *test, const char *kind, const char *dir, int classes,
                      int coarse_labels)
{
    memset(test, 0, sizeof *test);
    if (strcmp(kind, "idx") == 0) {
        if (classes < 0 || classes > DT_MAX_CLASSES)
            return dt_fail(DT_EUSAGE, "data.classes: %d is out of range (0 to %d)", classes,
                           DT_MAX_CLASSES);
        return dt_idx_load_test(test, dir, classes);
    }
    struct dt_data both;
    int rc = dt_data_load(&both, kind, dir, classes, coarse_labels);
    if (rc)
        return rc;
    *test = both.test;
    memset(&both.test, 0, sizeof both.test);
    dt_data_free(&both);
    return 0;
}

void dt_class_name_sanitize(char *name)
{
    for (unsigned char *c = (unsigned char *)name; c && *c; c++)
        if (*c < 0x20 || *c == 0x7f)
            *c = '?';
}

const char *dt_dataset_class_name(const struct dt_dataset *d, int i, char *buf, size_t size)
{
    if (d->names && d->names[i])
        return d->names[i];
    snprintf(buf, size, "%d", i);
    return buf;
}

/* The small helpers of struct dt_dataset (see dataset.h), and the dataset's memory rules: x,
 * y, names, files and every string in them are malloc'd and freed here, whatever reader
 * filled them. The format readers (idx.c, cifar.c, folder.c) include this module; the
 * dispatch on the format name that includes them is data/load.c, so no circle. */
#include "data/dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    if (d->files)
        for (size_t i = 0; i < d->n; i++)
            free(d->files[i]);
    free(d->files);
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

static const char *const split_names[] = {"train", "val", "test"};
_Static_assert(sizeof split_names / sizeof split_names[0] == DT_SPLIT_COUNT,
               "a name for every enum dt_split");

const char *dt_split_name(enum dt_split s)
{
    return s < DT_SPLIT_COUNT ? split_names[s] : "?";
}

int dt_split_parse(const char *what, const char *name, enum dt_split *out)
{
    for (int s = 0; s < DT_SPLIT_COUNT; s++)
        if (!strcmp(name, split_names[s])) {
            *out = (enum dt_split)s;
            return 0;
        }
    return dt_fail(DT_EUSAGE, "%s: expected train, val or test, got '%s'", what, name);
}

const struct dt_dataset *dt_data_split(const struct dt_data *d, enum dt_split s)
{
    return s == DT_SPLIT_TRAIN ? &d->train : s == DT_SPLIT_VAL ? &d->val : &d->test;
}

const char *dt_dataset_sample_name(const struct dt_dataset *d, enum dt_split split, size_t i,
                                   char *buf, size_t size)
{
    if (d->files && d->files[i])
        return d->files[i];
    snprintf(buf, size, "%s#%zu", dt_split_name(split), i);
    return buf;
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

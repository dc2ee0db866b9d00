#include "data/select.h"

#include <stdlib.h>
#include <string.h>

#include "util/err.h"

int dt_dataset_select_classes(struct dt_dataset *d, const int *classes, int n, const char *what)
{
    int map[256];
    for (int i = 0; i < 256; i++)
        map[i] = -1;
    for (int i = 0; i < n; i++) {
        if (classes[i] < 0 || classes[i] >= d->classes)
            return dt_fail(DT_EUSAGE, "%s: class %d is not one of the dataset's %d (0..%d)", what,
                           classes[i], d->classes, d->classes - 1);
        if (map[classes[i]] >= 0)
            return dt_fail(DT_EUSAGE, "%s: class %d is listed twice", what, classes[i]);
        map[classes[i]] = i;
    }
    size_t sample = dt_dataset_sample_bytes(d), kept = 0;
    for (size_t i = 0; i < d->n; i++) {
        int to = map[d->y[i]];
        if (to < 0)
            continue;
        if (kept != i)
            memmove(d->x + kept * sample, d->x + i * sample, sample);
        d->y[kept++] = (uint8_t)to;
    }
    d->n = kept;
    if (d->names) {
        char **names = calloc((size_t)n, sizeof *names);
        if (!names)
            return dt_fail(DT_ERUNTIME, "%s: out of memory", what);
        for (int i = 0; i < n; i++) {
            names[i] = d->names[classes[i]];
            d->names[classes[i]] = NULL;
        }
        for (int i = 0; i < d->classes; i++)
            free(d->names[i]);
        free(d->names);
        d->names = names;
    }
    d->classes = n;
    return 0;
}

/* dt_data_load and dt_data_load_test (see load.h): which reader a format name means. */
#include "data/load.h"

#include <stdio.h>
#include <string.h>

#include "data/cifar.h"
#include "data/idx.h"
#include "util/err.h"

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

/* dt_data_load and dt_data_load_test (see load.h): which reader a format means, and the
 * formats' config names. */
#include "data/load.h"

#include <stdio.h>
#include <string.h>

#include "data/cifar.h"
#include "data/idx.h"
#include "util/err.h"

static const char *const format_names[] = {
    [DT_DATA_FORMAT_UNSET] = "",     [DT_DATA_IDX] = "idx",       [DT_DATA_CIFAR10] = "cifar10",
    [DT_DATA_CIFAR100] = "cifar100", [DT_DATA_FOLDER] = "folder",
};
_Static_assert(sizeof format_names / sizeof format_names[0] == DT_DATA_FORMAT_COUNT,
               "one name per data format");
const struct dt_names dt_data_format_names = DT_NAMES(format_names);

int dt_data_load(struct dt_data *out, enum dt_data_format format, const char *dir, int classes,
                 int coarse_labels)
{
    memset(out, 0, sizeof(*out));
    if (classes < 0 || classes > DT_MAX_CLASSES)
        return dt_fail(DT_EUSAGE, "data.classes: %d is out of range (0 to %d)", classes,
                       DT_MAX_CLASSES);
    if (format == DT_DATA_IDX)
        return dt_idx_load(out, dir, classes);
    int cifar100 = format == DT_DATA_CIFAR100;
    if (!cifar100 && format != DT_DATA_CIFAR10)
        return dt_fail(DT_EUSAGE,
                       "data.format: \"%s\" is not an archive format (expected idx, cifar10 or "
                       "cifar100)",
                       dt_names_name(&dt_data_format_names, (int)format));
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", dir,
             cifar100 ? "cifar-100-binary.tar.gz" : "cifar-10-binary.tar.gz");
    return dt_cifar_load(out, path, cifar100, classes, coarse_labels);
}

int dt_data_load_test(struct dt_dataset *test, enum dt_data_format format, const char *dir,
                      int classes, int coarse_labels)
{
    memset(test, 0, sizeof *test);
    if (format == DT_DATA_IDX) {
        if (classes < 0 || classes > DT_MAX_CLASSES)
            return dt_fail(DT_EUSAGE, "data.classes: %d is out of range (0 to %d)", classes,
                           DT_MAX_CLASSES);
        return dt_idx_load_test(test, dir, classes);
    }
    struct dt_data both;
    int rc = dt_data_load(&both, format, dir, classes, coarse_labels);
    if (rc)
        return rc;
    *test = both.test;
    memset(&both.test, 0, sizeof both.test);
    dt_data_free(&both);
    return 0;
}

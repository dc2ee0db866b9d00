#include "nn/precision.h"

static const char *const precision_names[] = {
    [DT_PRECISION_FP32] = "fp32",
    [DT_PRECISION_BF16] = "bf16",
};
_Static_assert(sizeof precision_names / sizeof precision_names[0] == DT_PRECISION_COUNT,
               "one name per precision");
const struct dt_names dt_precision_names = DT_NAMES(precision_names);

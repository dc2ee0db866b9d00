#include "nn/layer_spec.h"

#include <string.h>

static const char *const algo_names[] = {
    [DT_CONV2D_AUTO] = "auto",
    [DT_CONV2D_GEMM] = "gemm",
    [DT_CONV2D_DIRECT] = "direct",
    [DT_CONV2D_WINOGRAD] = "winograd",
};
_Static_assert(sizeof algo_names / sizeof algo_names[0] == DT_CONV2D_ALGO_COUNT,
               "one name per conv2d algorithm");
const struct dt_names dt_layer_algo_names = DT_NAMES(algo_names);

static const char *const shortcut_names[] = {
    [DT_SHORTCUT_IDENTITY] = "identity",
    [DT_SHORTCUT_PROJECTION] = "projection",
};
_Static_assert(sizeof shortcut_names / sizeof shortcut_names[0] == DT_SHORTCUT_COUNT,
               "one name per shortcut");
const struct dt_names dt_layer_shortcut_names = DT_NAMES(shortcut_names);

void dt_layer_spec_defaults(struct dt_layer_spec *s)
{
    memset(s, 0, sizeof *s);
    s->stride = 0; /* 0 = the kind's default: 1 for conv2d, kernel for pools */
    s->bias = true;
    s->algo = DT_CONV2D_AUTO;
    s->p = 0.5f;
    s->eps = 1e-5f;
    s->momentum = 0.1f;
    s->affine = true;
    s->shortcut = DT_SHORTCUT_IDENTITY;
    s->batchnorm = true;
}

#include "nn/layer_spec.h"

#include <string.h>

static const char *const algo_names[] = {"auto", "gemm", "direct", "winograd"};
const struct dt_names dt_layer_algo_names = DT_NAMES(algo_names);
static const char *const shortcut_names[] = {"identity", "projection"};
const struct dt_names dt_layer_shortcut_names = DT_NAMES(shortcut_names);

void dt_layer_spec_defaults(struct dt_layer_spec *s)
{
    memset(s, 0, sizeof *s);
    s->stride = 0; /* 0 = the kind's default: 1 for conv2d, kernel for pools */
    s->bias = true;
    strcpy(s->algo, "auto");
    s->p = 0.5f;
    s->eps = 1e-5f;
    s->momentum = 0.1f;
    s->affine = true;
    strcpy(s->shortcut, "identity");
    s->batchnorm = true;
}

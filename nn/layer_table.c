/* The one table of layer kinds. A kind's ops come from its own file (nn/layer_<kind>.c);
 * until a kind's file exists its ops pointer is NULL and dt_model_build rejects it. */
#include <string.h>

#include "nn/layers.h"

#define KEYS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NO_KEYS   ((const char *const[]){NULL})

static const struct dt_layer_kind kinds[] = {
    {"conv2d", KEYS("out_channels", "kernel", "stride", "padding", "bias"), NULL},
    {"linear", KEYS("out_features", "bias"), NULL},
    {"maxpool2d", KEYS("kernel", "stride", "padding"), NULL},
    {"avgpool2d", KEYS("kernel", "stride", "padding"), NULL},
    {"relu", NO_KEYS, NULL},
    {"dropout", KEYS("p"), NULL},
    {"dropout2d", KEYS("p"), NULL},
    {"flatten", NO_KEYS, NULL},
    {"batchnorm2d", KEYS("eps", "momentum", "affine"), NULL},
    {"log_softmax", NO_KEYS, NULL},
};

const struct dt_layer_kind *dt_layer_kind_find(const char *name)
{
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(kinds[i].name, name) == 0)
            return &kinds[i];
    return NULL;
}

const char *dt_layer_kind_names(void)
{
    return "conv2d, linear, maxpool2d, avgpool2d, relu, dropout, dropout2d, flatten, "
           "batchnorm2d, log_softmax";
}

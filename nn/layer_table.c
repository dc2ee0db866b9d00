/* The one table of layer kinds. A kind's ops come from its own file (nn/layer_<kind>.c);
 * a kind whose ops pointer is NULL is rejected by dt_model_build. */
#include <string.h>

#include "nn/layers.h"

/* Each kind's ops, defined in nn/layer_<kind>.c: nothing else names them (what a kind can
 * fuse is in the capabilities its setup reports, nn/fusion.h). */
extern const struct dt_layer_ops dt_conv2d_ops, dt_linear_ops, dt_maxpool2d_ops, dt_avgpool2d_ops,
    dt_relu_ops, dt_dropout_ops, dt_dropout2d_ops, dt_flatten_ops, dt_batchnorm2d_ops,
    dt_log_softmax_ops, dt_add_ops, dt_concat_ops, dt_global_avgpool_ops, dt_gelu_ops;

#define KEYS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NO_KEYS   ((const char *const[]){NULL})

static const struct dt_layer_kind kinds[] = {
    {"conv2d", KEYS("out_channels", "kernel", "stride", "padding", "bias", "algo"), &dt_conv2d_ops},
    {"linear", KEYS("out_features", "bias"), &dt_linear_ops},
    {"maxpool2d", KEYS("kernel", "stride", "padding"), &dt_maxpool2d_ops},
    {"avgpool2d", KEYS("kernel", "stride", "padding"), &dt_avgpool2d_ops},
    {"relu", NO_KEYS, &dt_relu_ops},
    {"dropout", KEYS("p"), &dt_dropout_ops},
    {"dropout2d", KEYS("p"), &dt_dropout2d_ops},
    {"flatten", NO_KEYS, &dt_flatten_ops},
    {"batchnorm2d", KEYS("eps", "momentum", "affine"), &dt_batchnorm2d_ops},
    {"log_softmax", NO_KEYS, &dt_log_softmax_ops},
    {"add", KEYS("from", "shortcut", "batchnorm"), &dt_add_ops},
    {"concat", KEYS("from"), &dt_concat_ops},
    {"global_avgpool", NO_KEYS, &dt_global_avgpool_ops},
    {"gelu", NO_KEYS, &dt_gelu_ops},
};

const struct dt_layer_kind *dt_layer_kind_find(const char *name)
{
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(kinds[i].name, name) == 0)
            return &kinds[i];
    return NULL;
}

bool dt_layer_kind_takes(const struct dt_layer_kind *kind, const char *key)
{
    for (int i = 0; kind->keys[i]; i++)
        if (strcmp(kind->keys[i], key) == 0)
            return true;
    return false;
}

const char *dt_layer_kind_names(void)
{
    return "conv2d, linear, maxpool2d, avgpool2d, relu, dropout, dropout2d, flatten, "
           "batchnorm2d, log_softmax, add, concat, global_avgpool, gelu";
}

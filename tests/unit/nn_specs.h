/* Layer-spec builders shared by the nn/ unit tests (header-only, test code). */
#ifndef DT_TESTS_NN_SPECS_H
#define DT_TESTS_NN_SPECS_H

#include <stdio.h>

#include "nn/layer_spec.h"

static inline struct dt_layer_spec spec_of(const char *type)
{
    struct dt_layer_spec s;
    dt_layer_spec_defaults(&s);
    snprintf(s.type, sizeof s.type, "%s", type);
    return s;
}

static inline struct dt_layer_spec conv_spec(int out, int k, int stride, int pad)
{
    struct dt_layer_spec s = spec_of("conv2d");
    s.out_channels = out, s.kernel = k, s.stride = stride, s.padding = pad;
    return s;
}

static inline struct dt_layer_spec linear_spec(int out)
{
    struct dt_layer_spec s = spec_of("linear");
    s.out_features = out;
    return s;
}

static inline struct dt_layer_spec pool_spec(const char *type, int k, int stride, int pad)
{
    struct dt_layer_spec s = spec_of(type);
    s.kernel = k, s.stride = stride, s.padding = pad;
    return s;
}

static inline struct dt_layer_spec dropout_spec(const char *type, float p)
{
    struct dt_layer_spec s = spec_of(type);
    s.p = p;
    return s;
}

/* The reference ConvNet (Mastering PyTorch ch. 11), 1x28x28 -> 10, 12 layers. */
static inline int convnet_specs(struct dt_layer_spec *s)
{
    int n = 0;
    s[n++] = conv_spec(16, 3, 1, 0);
    s[n++] = spec_of("relu");
    s[n++] = conv_spec(32, 3, 1, 0);
    s[n++] = spec_of("relu");
    s[n++] = pool_spec("maxpool2d", 2, 0, 0);
    s[n++] = dropout_spec("dropout2d", 0.10f);
    s[n++] = spec_of("flatten");
    s[n++] = linear_spec(64);
    s[n++] = spec_of("relu");
    s[n++] = dropout_spec("dropout", 0.25f);
    s[n++] = linear_spec(10);
    s[n++] = spec_of("log_softmax");
    return n;
}

/* The reference CIFAR CNN (Accelerate Model Training ch. 9), 3x32x32 -> 10, 10 layers. */
static inline int cifar_cnn_specs(struct dt_layer_spec *s)
{
    int n = 0;
    s[n++] = conv_spec(32, 3, 1, 1);
    s[n++] = spec_of("relu");
    s[n++] = pool_spec("maxpool2d", 2, 0, 0);
    s[n++] = conv_spec(64, 3, 1, 1);
    s[n++] = spec_of("relu");
    s[n++] = pool_spec("maxpool2d", 2, 0, 0);
    s[n++] = spec_of("flatten");
    s[n++] = linear_spec(512);
    s[n++] = linear_spec(10);
    return n;
}

#endif

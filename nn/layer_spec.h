/* What the config says about one layer, before the model exists.
 *
 * train/config.c fills one of these per entry of `model.layers`, accepting only the keys that
 * the layer kind lists in its descriptor (nn/layers.h); nn/model.c turns the list into layers.
 * Fields a kind does not use keep their defaults.
 */
#ifndef DT_NN_LAYER_SPEC_H
#define DT_NN_LAYER_SPEC_H

#include <stdbool.h>

#include "util/names.h"

/* Longest layer name (train/config_blocks.c builds "stage2.1.conv1" from block instances); with
 * a sub-layer prefix and the longest tensor name it stays within DT_TENSOR_NAME_MAX. */
#define DT_LAYER_NAME_MAX 64

/* conv2d's `algo` key (nn/layer_conv2d.c). AUTO: Winograd (nn/kernels/fp32/conv_winograd.h)
 * where it is supported and measured faster (dt_conv_winograd_preferred), else the direct
 * kernels (nn/kernels/fp32/conv_direct.h) where they support the shape and run AVX-512, else
 * im2col + sgemm. */
enum dt_conv2d_algo {
    DT_CONV2D_AUTO,
    DT_CONV2D_GEMM,
    DT_CONV2D_DIRECT,
    DT_CONV2D_WINOGRAD,
    DT_CONV2D_ALGO_COUNT
};

/* add's `shortcut` key (nn/layer_add.c): the skip as it is, or He et al.'s projection (a 1x1
 * conv whose stride fits the shapes, then a batchnorm2d). */
enum dt_shortcut { DT_SHORTCUT_IDENTITY, DT_SHORTCUT_PROJECTION, DT_SHORTCUT_COUNT };

struct dt_layer_spec {
    char type[32];                /* "conv2d", "linear", "relu", ... */
    char name[DT_LAYER_NAME_MAX]; /* prefix of the layer's tensor names ("stage2.1.conv1");
                                     "" = "layers.<index>" */
    int out_channels;             /* conv2d */
    int out_features;             /* linear */
    int kernel;                   /* conv2d, maxpool2d, avgpool2d */
    int stride;                   /* conv2d (default 1); pools (default = kernel) */
    int padding;                  /* conv2d, pools (default 0) */
    bool bias;                    /* conv2d, linear (default true) */
    enum dt_conv2d_algo algo;     /* conv2d (default DT_CONV2D_AUTO) */
    float p;                      /* dropout, dropout2d: drop probability (default 0.5) */
    float eps;                    /* batchnorm2d (default 1e-5) */
    float momentum;               /* batchnorm2d running-stat momentum (default 0.1) */
    bool affine;                  /* batchnorm2d (default true) */
    int from; /* add, concat: the layer whose output joins this one's input, counted
                 back from here as Darknet's [shortcut] does: -2 = two layers back
                 (default 0 = none; required) */
    enum dt_shortcut shortcut; /* add (default DT_SHORTCUT_IDENTITY) */
    bool batchnorm; /* add with projection: a batchnorm2d after the 1x1 conv (default true) */
    int line;       /* line in the config file, for error messages (0 if unknown) */
};

/* The config spellings of enum dt_conv2d_algo ("auto", "gemm", "direct", "winograd") and
 * enum dt_shortcut ("identity", "projection"): train/config.c reads `algo` and `shortcut`
 * through them once, at load. */
extern const struct dt_names dt_layer_algo_names;
extern const struct dt_names dt_layer_shortcut_names;

/* Sets every field to its default (type left empty). */
void dt_layer_spec_defaults(struct dt_layer_spec *s);

#endif

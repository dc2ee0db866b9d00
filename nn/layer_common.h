/* Small helpers shared by the nn/layer_*.c kinds (internal to nn/). */
#ifndef DT_NN_LAYER_COMMON_H
#define DT_NN_LAYER_COMMON_H

#include <stddef.h>

#include <stdint.h>

#include "nn/kernels/fp32/pool.h" /* struct dt_pool_geom */
#include "nn/kernels/parallel.h"  /* DT_PARALLEL_MIN */
#include "nn/layers.h"
#include "util/err.h"

/* Samples per weight-gradient slice for a backward of `batch` samples (nn/grad_tree.h), or 0
 * when the whole batch is one sum: no slicing set, or the batch fits one slice. */
static inline int dt_layer_grad_slice(const struct dt_layer *l, int batch)
{
    int slice = l->model ? l->model->grad_slice : 0;
    return slice > 0 && batch > slice ? slice : 0;
}

static inline size_t dt_shape_size(struct dt_shape s)
{
    return (size_t)s.c * s.h * s.w;
}

/* Output length of a sliding window (PyTorch's floor formula); < 1 when it does not fit. */
static inline int dt_window_out(int in, int kernel, int stride, int padding)
{
    int span = in + 2 * padding - kernel;
    return span < 0 ? 0 : span / stride + 1;
}

/* A pool spec's window geometry (stride defaults to the kernel, as in PyTorch), checked against
 * its input the way torch.nn.MaxPool2d/AvgPool2d do. */
static inline int dt_pool_setup(struct dt_pool_geom *g, const struct dt_layer_spec *spec,
                                struct dt_shape in)
{
    g->k = spec->kernel;
    g->stride = spec->stride ? spec->stride : spec->kernel;
    g->pad = spec->padding;
    if (g->k < 1)
        return dt_fail(DT_EUSAGE, "kernel %d, expected >= 1", g->k);
    if (g->stride < 1)
        return dt_fail(DT_EUSAGE, "stride %d, expected >= 1", g->stride);
    if (g->pad < 0 || g->pad > g->k / 2)
        return dt_fail(DT_EUSAGE, "padding %d, expected 0 to kernel/2 = %d", g->pad, g->k / 2);
    g->oh = dt_window_out(in.h, g->k, g->stride, g->pad);
    g->ow = dt_window_out(in.w, g->k, g->stride, g->pad);
    if (g->oh < 1 || g->ow < 1)
        return dt_fail(DT_EUSAGE, "kernel %d is larger than the padded input %dx%d (padding %d)",
                       g->k, in.h + 2 * g->pad, in.w + 2 * g->pad, g->pad);
    return 0;
}

/* maxpool2d forward on samples [first, first + count) of the batch: x and y point at sample
 * `first` of the layer's input and output (nn/layer_maxpool2d.c; the fused conv2d calls it). */
void dt_maxpool2d_forward_samples(struct dt_layer *l, const float *x, float *y, int first,
                                  int count);

/* The maxpool2d layer l's backward for the conv2d below it to run (pool_grad, nn/fusion.h):
 * its output y (the relu mask) and dy, whole batch. */
void dt_maxpool2d_grad_source(const struct dt_layer *l, const float *y, const float *dy,
                              struct dt_pool_grad *out);

/* The maxpool2d layer l's winner indices from sample `first` on (int32, [sample][c][oh][ow],
 * each the index of the maximum within its input plane), for a conv2d that pools 2x2 itself
 * (nn/kernels/fp32/conv_winograd.h); backward reads them. NULL unless l pools 2x2 with stride
 * 2, no padding. */
int32_t *dt_maxpool2d_indices_2x2(struct dt_layer *l, int first);

#endif

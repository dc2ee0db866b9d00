/* global_avgpool: the mean of each channel's plane, C x H x W -> C x 1 x 1, as
 * torch.nn.AdaptiveAvgPool2d(1). Backward spreads dy / (H*W) over the plane. The loops:
 * nn/kernels/fp32/pool.c. */
#include "nn/layer_common.h"

static int gap_setup(struct dt_layer *l, const struct dt_layer_spec *spec, struct dt_shape in,
                     struct dt_layer_setup *s)
{
    (void)s;
    (void)spec;
    l->out = (struct dt_shape){in.c, 1, 1};
    return 0;
}

static void gap_forward(struct dt_layer *l, const float *x, float *y, int batch,
                        const struct dt_layer_fwd *c)
{
    (void)c;
    dt_global_avgpool_forward(x, y, batch * l->in.c, (size_t)l->in.h * l->in.w);
}

static void gap_backward(struct dt_layer *l, const float *x, const float *y, const float *dy,
                         float *dx, int batch, const struct dt_layer_bwd *c)
{
    (void)c;
    (void)x, (void)y;
    if (!dx)
        return;
    dt_global_avgpool_backward(dy, dx, batch * l->in.c, (size_t)l->in.h * l->in.w);
}

const struct dt_layer_ops dt_global_avgpool_ops = {
    .setup = gap_setup, .forward = gap_forward, .backward = gap_backward};

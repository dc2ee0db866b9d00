/* flatten: c x h x w -> (c*h*w) x 1 x 1, like torch.nn.Flatten(). NCHW memory is already in
 * flattened order: the model makes y x itself (DT_CAP_Y_IS_X, the view fusion; forward is
 * then never called, else a plain copy), and backward does nothing (DT_CAP_DX_IS_DY: the
 * model passes dy on as x's gradient, the same floats in the same order). */
#include <string.h>

#include "nn/layer_common.h"

static int flatten_setup(struct dt_layer *l, const struct dt_layer_spec *spec, struct dt_shape in,
                         struct dt_layer_setup *s)
{
    (void)spec;
    l->out = (struct dt_shape){(int)dt_shape_size(in), 1, 1};
    s->caps = DT_CAP_DX_IS_DY | DT_CAP_Y_IS_X;
    return 0;
}

static void flatten_forward(struct dt_layer *l, const float *x, float *y, int batch,
                            const struct dt_layer_fwd *c)
{
    (void)c;
    memcpy(y, x, (size_t)batch * dt_shape_size(l->in) * sizeof *y);
}

static void flatten_backward(struct dt_layer *l, const float *x, const float *y, const float *dy,
                             float *dx, int batch, const struct dt_layer_bwd *c)
{
    (void)c;
    (void)x, (void)y;
    if (dx) /* a caller other than the model, which passes dy on (DT_CAP_DX_IS_DY) */
        memcpy(dx, dy, (size_t)batch * dt_shape_size(l->in) * sizeof *dx);
}

const struct dt_layer_ops dt_flatten_ops = {
    .setup = flatten_setup, .forward = flatten_forward, .backward = flatten_backward};

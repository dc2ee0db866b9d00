/* relu: y = max(x, 0). The backward mask is read from y (y > 0 exactly where x > 0), so the
 * layer keeps no state. The gradient at 0 is 0, as in PyTorch. Backward adds the gradient
 * skip connections sent back to y (c->dy_extra) in its own pass: a ResNet's block outputs are
 * relus, and a separate pass to add it cost 2% of a step. The loops: nn/kernels/fp32/elementwise.c.
 */
#include "nn/kernels/fp32/elementwise.h"
#include "nn/layer_common.h"

static int relu_setup(struct dt_layer *l, const struct dt_layer_spec *spec, struct dt_shape in,
                      struct dt_layer_setup *s)
{
    (void)spec;
    l->out = in;
    s->caps = DT_CAP_IS_RELU | DT_CAP_DY_EXTRA;
    return 0;
}

static void relu_forward(struct dt_layer *l, const float *x, float *y, int batch,
                         const struct dt_layer_fwd *c)
{
    (void)c;
    dt_relu_forward(x, y, (long)(batch * dt_shape_size(l->in)));
}

static void relu_backward(struct dt_layer *l, const float *x, const float *y, const float *dy,
                          float *dx, int batch, const struct dt_layer_bwd *c)
{
    (void)x;
    if (!dx)
        return;
    dt_relu_backward(y, dy, c->dy_extra, dx, (long)(batch * dt_shape_size(l->in)));
}

const struct dt_layer_ops dt_relu_ops = {
    .setup = relu_setup, .forward = relu_forward, .backward = relu_backward};

/* gelu: y = x * Phi(x) = x/2 * (1 + erf(x / sqrt 2)), torch.nn.GELU()'s exact form (not the
 * tanh approximation). dy/dx = Phi(x) + x * phi(x), phi the standard normal density. The
 * loops: nn/kernels/fp32/elementwise.c. */
#include "nn/kernels/fp32/elementwise.h"
#include "nn/layer_common.h"

static int gelu_setup(struct dt_layer *l, const struct dt_layer_spec *spec, struct dt_shape in,
                      struct dt_layer_setup *s)
{
    (void)s;
    (void)spec;
    l->out = in;
    return 0;
}

static void gelu_forward(struct dt_layer *l, const float *x, float *y, int batch,
                         const struct dt_layer_fwd *c)
{
    (void)c;
    dt_gelu_forward(x, y, (long)(batch * dt_shape_size(l->in)));
}

static void gelu_backward(struct dt_layer *l, const float *x, const float *y, const float *dy,
                          float *dx, int batch, const struct dt_layer_bwd *c)
{
    (void)c;
    (void)y;
    if (!dx)
        return;
    dt_gelu_backward(x, dy, dx, (long)(batch * dt_shape_size(l->in)));
}

const struct dt_layer_ops dt_gelu_ops = {
    .setup = gelu_setup, .forward = gelu_forward, .backward = gelu_backward};

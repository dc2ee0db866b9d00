/* avgpool2d: mean over k x k windows, like torch.nn.AvgPool2d(k, stride, padding) with its
 * defaults count_include_pad=True and ceil_mode=False: padded zeros count, so every window
 * divides by k*k. Stateless: backward spreads dy / (k*k) over the window. The loops:
 * nn/kernels/fp32/pool.c. */
#include "nn/layer_common.h"

static int avgpool2d_setup(struct dt_layer *l, const struct dt_layer_spec *spec, struct dt_shape in,
                           struct dt_layer_setup *s)
{
    (void)s;
    struct dt_pool_geom g = {0};
    int rc = dt_pool_setup(&g, spec, in);
    if (rc < 0)
        return rc;
    l->out = (struct dt_shape){in.c, g.oh, g.ow};
    return 0;
}

static struct dt_pool_geom geom_of(const struct dt_layer *l)
{
    struct dt_pool_geom g = {0};
    dt_pool_setup(&g, &l->spec, l->in); /* validated at setup: cannot fail */
    return g;
}

static void avgpool2d_forward(struct dt_layer *l, const float *x, float *y, int batch,
                              const struct dt_layer_fwd *c)
{
    (void)c;
    const struct dt_pool_geom g = geom_of(l);
    dt_avgpool_forward(&g, x, y, batch * l->in.c, l->in.h, l->in.w);
}

static void avgpool2d_backward(struct dt_layer *l, const float *x, const float *y, const float *dy,
                               float *dx, int batch, const struct dt_layer_bwd *c)
{
    (void)c;
    (void)x, (void)y;
    if (!dx)
        return;
    const struct dt_pool_geom g = geom_of(l);
    dt_avgpool_backward(&g, dy, dx, batch * l->in.c, l->in.h, l->in.w);
}

const struct dt_layer_ops dt_avgpool2d_ops = {
    .setup = avgpool2d_setup, .forward = avgpool2d_forward, .backward = avgpool2d_backward};

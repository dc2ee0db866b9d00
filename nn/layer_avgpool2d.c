/* avgpool2d: mean over k x k windows, like torch.nn.AvgPool2d(k, stride, padding) with its
 * defaults count_include_pad=True and ceil_mode=False: padded zeros count, so every window
 * divides by k*k. Stateless: backward spreads dy / (k*k) over the window. */
#include <string.h>

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
    int h = l->in.h, w = l->in.w, planes = batch * l->in.c;
    float scale = 1.0f / (float)(g.k * g.k);
#pragma omp parallel for if ((size_t)planes * h * w > DT_PARALLEL_MIN)
    for (int pl = 0; pl < planes; pl++) {
        const float *xp = x + (size_t)pl * h * w;
        float *yp = y + (size_t)pl * g.oh * g.ow;
        for (int oy = 0; oy < g.oh; oy++)
            for (int ox = 0; ox < g.ow; ox++) {
                int y0 = oy * g.stride - g.pad, x0 = ox * g.stride - g.pad;
                float s = 0.0f;
                for (int iy = y0 < 0 ? 0 : y0; iy < y0 + g.k && iy < h; iy++)
                    for (int ix = x0 < 0 ? 0 : x0; ix < x0 + g.k && ix < w; ix++)
                        s += xp[iy * w + ix];
                yp[oy * g.ow + ox] = s * scale;
            }
    }
}

static void avgpool2d_backward(struct dt_layer *l, const float *x, const float *y, const float *dy,
                               float *dx, int batch, const struct dt_layer_bwd *c)
{
    (void)c;
    (void)x, (void)y;
    if (!dx)
        return;
    const struct dt_pool_geom g = geom_of(l);
    int h = l->in.h, w = l->in.w, planes = batch * l->in.c;
    float scale = 1.0f / (float)(g.k * g.k);
#pragma omp parallel for if ((size_t)planes * h * w > DT_PARALLEL_MIN)
    for (int pl = 0; pl < planes; pl++) {
        float *dxp = dx + (size_t)pl * h * w;
        const float *dyp = dy + (size_t)pl * g.oh * g.ow;
        memset(dxp, 0, (size_t)h * w * sizeof *dxp);
        for (int oy = 0; oy < g.oh; oy++)
            for (int ox = 0; ox < g.ow; ox++) {
                int y0 = oy * g.stride - g.pad, x0 = ox * g.stride - g.pad;
                float d = dyp[oy * g.ow + ox] * scale;
                for (int iy = y0 < 0 ? 0 : y0; iy < y0 + g.k && iy < h; iy++)
                    for (int ix = x0 < 0 ? 0 : x0; ix < x0 + g.k && ix < w; ix++)
                        dxp[iy * w + ix] += d;
            }
    }
}

const struct dt_layer_ops dt_avgpool2d_ops = {avgpool2d_setup, NULL, avgpool2d_forward,
                                              avgpool2d_backward, NULL};

/* gelu: y = x * Phi(x) = x/2 * (1 + erf(x / sqrt 2)), torch.nn.GELU()'s exact form (not the
 * tanh approximation). dy/dx = Phi(x) + x * phi(x), phi the standard normal density. */
#include <math.h>

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
    long n = (long)(batch * dt_shape_size(l->in));
#pragma omp parallel for if (n > DT_PARALLEL_MIN)
    for (long i = 0; i < n; i++)
        y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * (float)M_SQRT1_2));
}

static void gelu_backward(struct dt_layer *l, const float *x, const float *y, const float *dy,
                          float *dx, int batch, const struct dt_layer_bwd *c)
{
    (void)c;
    (void)y;
    if (!dx)
        return;
    long n = (long)(batch * dt_shape_size(l->in));
    const float inv_sqrt_2pi = 0.3989422804014327f;
#pragma omp parallel for if (n > DT_PARALLEL_MIN)
    for (long i = 0; i < n; i++) {
        float cdf = 0.5f * (1.0f + erff(x[i] * (float)M_SQRT1_2));
        float pdf = inv_sqrt_2pi * expf(-0.5f * x[i] * x[i]);
        dx[i] = dy[i] * (cdf + x[i] * pdf);
    }
}

const struct dt_layer_ops dt_gelu_ops = {gelu_setup, NULL, gelu_forward, gelu_backward, NULL};

/* relu: y = max(x, 0). The backward mask is read from y (y > 0 exactly where x > 0), so the
 * layer keeps no state. The gradient at 0 is 0, as in PyTorch. Backward adds the gradient
 * skip connections sent back to y (c->dy_extra) in its own pass: a ResNet's block outputs are
 * relus, and a separate pass to add it cost 2% of a step. */
#include <stdint.h>
#include <string.h>

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
    long n = (long)(batch * dt_shape_size(l->in));
#pragma omp parallel for simd if (n > DT_PARALLEL_MIN)
    for (long i = 0; i < n; i++)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

static void relu_backward(struct dt_layer *l, const float *x, const float *y, const float *dy,
                          float *dx, int batch, const struct dt_layer_bwd *c)
{
    (void)x;
    if (!dx)
        return;
    long n = (long)(batch * dt_shape_size(l->in));
    const float *extra = c->dy_extra;
    if (extra) {
#pragma omp parallel for simd if (n > DT_PARALLEL_MIN)
        for (long i = 0; i < n; i++) {
            /* the sum masked by bits: written as a select, GCC kept the addition under the
             * condition (it may trap) and ran the loop scalar, 3.5x slower */
            float d = dy[i] + extra[i];
            uint32_t bits;
            memcpy(&bits, &d, sizeof bits);
            bits &= y[i] > 0.0f ? 0xffffffffu : 0u;
            memcpy(&dx[i], &bits, sizeof bits);
        }
        return;
    }
#pragma omp parallel for simd if (n > DT_PARALLEL_MIN)
    for (long i = 0; i < n; i++) {
        /* dy read whatever y says: a load under the condition vectorises only with AVX-512's
         * masked loads, and the portable (x86-64-v2) build ran this loop scalar, 3.5x slower */
        float d = dy[i];
        dx[i] = y[i] > 0.0f ? d : 0.0f;
    }
}

const struct dt_layer_ops dt_relu_ops = {relu_setup, NULL, relu_forward, relu_backward, NULL};

/* maxpool2d: max over k x k windows (stride defaults to k, implicit -inf padding), like
 * torch.nn.MaxPool2d(k, stride, padding). Forward records, per output, the index of the winning
 * input within its plane (first maximum on ties, like PyTorch), so backward is a scatter. The
 * index array (int32, max_batch x output) is the layer's scratch.
 *
 * Fused above a conv2d -> relu (nn/model.c): the conv calls dt_maxpool2d_forward_samples on
 * cache-sized chunks of samples (or, on its Winograd path, pools 2x2 itself and writes the
 * indices, dt_maxpool2d_indices_2x2), and backward applies the relu's mask too (c->relu_below;
 * relu(x) is 0 at the winner exactly when the pooled value is not > 0). The loops:
 * nn/kernels/fp32/pool.c. */
#include <stdint.h>
#include <stdlib.h>

#include "nn/layer_common.h"
#include "util/alloc.h"

struct maxpool {
    struct dt_pool_geom g;
    int32_t *argmax;
};

static int maxpool2d_setup(struct dt_layer *l, const struct dt_layer_spec *spec, struct dt_shape in,
                           struct dt_layer_setup *s)
{
    struct maxpool *mp = calloc(1, sizeof *mp);
    if (!mp)
        return dt_fail(DT_ERUNTIME, "out of memory");
    l->state = mp;
    int rc = dt_pool_setup(&mp->g, spec, in);
    if (rc < 0)
        return rc;
    l->out = (struct dt_shape){in.c, mp->g.oh, mp->g.ow};
    s->caps = DT_CAP_IS_MAXPOOL;
    s->scratch_bytes =
        (double)l->model->max_batch * (double)dt_shape_size(l->out) * sizeof(int32_t);
    return 0; /* the indices at init, once the model's size has been checked (nn/model.c) */
}

static int maxpool2d_init(struct dt_layer *l, uint64_t seed)
{
    (void)seed;
    struct maxpool *mp = l->state;
    mp->argmax = dt_alloc((size_t)l->model->max_batch * dt_shape_size(l->out), sizeof(int32_t));
    return mp->argmax ? 0 : dt_fail_context(-DT_ERUNTIME, "maxpool2d indices");
}

void dt_maxpool2d_forward_samples(struct dt_layer *l, const float *x, float *y, int first,
                                  int count)
{
    struct maxpool *mp = l->state;
    size_t out_plane = (size_t)mp->g.oh * mp->g.ow;
    int32_t *argmax = mp->argmax + (size_t)first * l->in.c * out_plane;
    dt_maxpool_forward(&mp->g, x, y, argmax, count * l->in.c, l->in.h, l->in.w);
}

int32_t *dt_maxpool2d_indices_2x2(struct dt_layer *l, int first)
{
    struct maxpool *mp = l->state;
    if (mp->g.k != 2 || mp->g.stride != 2 || mp->g.pad != 0)
        return NULL;
    return mp->argmax + (size_t)first * dt_shape_size(l->out);
}

void dt_maxpool2d_grad_source(const struct dt_layer *l, const float *y, const float *dy,
                              struct dt_pool_grad *out)
{
    const struct maxpool *mp = l->state;
    *out = (struct dt_pool_grad){.g = mp->g,
                                 .c = l->in.c,
                                 .h = l->in.h,
                                 .w = l->in.w,
                                 .argmax = mp->argmax,
                                 .relu_y = y,
                                 .dy = dy};
}

static void maxpool2d_forward(struct dt_layer *l, const float *x, float *y, int batch,
                              const struct dt_layer_fwd *c)
{
    (void)c;
    dt_maxpool2d_forward_samples(l, x, y, 0, batch);
}

static void maxpool2d_backward(struct dt_layer *l, const float *x, const float *y, const float *dy,
                               float *dx, int batch, const struct dt_layer_bwd *c)
{
    (void)x;
    if (!dx)
        return;
    struct maxpool *mp = l->state;
    /* a fused relu below: its gradient is dy where the winner (the pooled value) is > 0 */
    dt_maxpool_backward(&mp->g, mp->argmax, c->relu_below ? y : NULL, dy, dx, batch * l->in.c,
                        l->in.h, l->in.w);
}

static void maxpool2d_destroy(struct dt_layer *l)
{
    struct maxpool *mp = l->state;
    if (mp)
        dt_free(mp->argmax);
    free(mp);
}

const struct dt_layer_ops dt_maxpool2d_ops = {.setup = maxpool2d_setup,
                                              .init = maxpool2d_init,
                                              .forward = maxpool2d_forward,
                                              .backward = maxpool2d_backward,
                                              .destroy = maxpool2d_destroy};

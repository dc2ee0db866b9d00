/* log_softmax: y = x - logsumexp(x) over a sample's features, like torch.nn.LogSoftmax(dim=1)
 * on a (batch, features) tensor. It needs a flat input (put flatten or linear in front): on a
 * c x h x w input PyTorch's dim=1 would normalise over channels per pixel, a different
 * operation, so that is rejected rather than silently reinterpreted.
 * Backward: dx = dy - softmax(x) * sum(dy), with softmax = exp(y). The loops:
 * nn/kernels/fp32/softmax.c. */
#include "nn/kernels/fp32/softmax.h"
#include "nn/layer_common.h"

static int log_softmax_setup(struct dt_layer *l, const struct dt_layer_spec *spec,
                             struct dt_shape in, struct dt_layer_setup *s)
{
    (void)s;
    (void)spec;
    if (in.h != 1 || in.w != 1)
        return dt_fail(DT_EUSAGE, "input %dx%dx%d is not flat; add a flatten layer before it", in.c,
                       in.h, in.w);
    l->out = in;
    return 0;
}

static void log_softmax_forward(struct dt_layer *l, const float *x, float *y, int batch,
                                const struct dt_layer_fwd *c)
{
    (void)c;
    dt_log_softmax_forward(x, y, batch, l->in.c);
}

static void log_softmax_backward(struct dt_layer *l, const float *x, const float *y,
                                 const float *dy, float *dx, int batch,
                                 const struct dt_layer_bwd *c)
{
    (void)c;
    (void)x;
    if (!dx)
        return;
    dt_log_softmax_backward(y, dy, dx, batch, l->in.c);
}

const struct dt_layer_ops dt_log_softmax_ops = {
    .setup = log_softmax_setup, .forward = log_softmax_forward, .backward = log_softmax_backward};

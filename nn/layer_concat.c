/* concat: the input and the output of the layer `from` back, stacked along channels:
 * y = cat([x, skip], dim=1) (x's channels first). Both must have the same height and width.
 * Backward splits dy: the first channels to dx, the rest added to the skip's gradient. */
#include <string.h>

#include "nn/layer_common.h"

static int concat_setup(struct dt_layer *l, const struct dt_layer_spec *spec, struct dt_shape in,
                        struct dt_layer_setup *setup)
{
    (void)spec;
    struct dt_shape s = setup->skip;
    if (s.h != in.h || s.w != in.w)
        return dt_fail(DT_EUSAGE,
                       "cannot concatenate the output of layer %d (%dx%dx%d) with this layer's "
                       "input (%dx%dx%d): heights and widths differ",
                       setup->skip_from, s.c, s.h, s.w, in.c, in.h, in.w);
    l->out = (struct dt_shape){in.c + s.c, in.h, in.w};
    return 0;
}

/* Floats per sample of the skip's output: the channels the output has beyond the input's. */
static size_t skip_size(const struct dt_layer *l)
{
    return dt_shape_size(l->out) - dt_shape_size(l->in);
}

static void concat_forward(struct dt_layer *l, const float *x, float *y, int batch,
                           const struct dt_layer_fwd *c)
{
    size_t a = dt_shape_size(l->in), b = skip_size(l);
    for (int n = 0; n < batch; n++) {
        memcpy(y + (size_t)n * (a + b), x + (size_t)n * a, a * sizeof *y);
        memcpy(y + (size_t)n * (a + b) + a, c->skip_x + (size_t)n * b, b * sizeof *y);
    }
}

static void concat_backward(struct dt_layer *l, const float *x, const float *y, const float *dy,
                            float *dx, int batch, const struct dt_layer_bwd *c)
{
    (void)x, (void)y;
    size_t a = dt_shape_size(l->in), b = skip_size(l);
    for (int n = 0; n < batch; n++) {
        const float *d = dy + (size_t)n * (a + b);
        if (dx)
            memcpy(dx + (size_t)n * a, d, a * sizeof *dx);
        float *s = c->skip_dx ? c->skip_dx + (size_t)n * b : NULL;
        if (s && c->skip_dx_fresh)
            memcpy(s, d + a, b * sizeof *s);
        else if (s)
            for (size_t k = 0; k < b; k++)
                s[k] += d[a + k];
    }
}

const struct dt_layer_ops dt_concat_ops = {
    .setup = concat_setup, .forward = concat_forward, .backward = concat_backward};

/* maxpool2d: max over k x k windows (stride defaults to k, implicit -inf padding), like
 * torch.nn.MaxPool2d(k, stride, padding). Forward records, per output, the index of the winning
 * input within its plane (first maximum on ties, like PyTorch), so backward is a scatter. The
 * index array (int32, max_batch x output) is the layer's scratch.
 *
 * Fused above a conv2d -> relu (nn/model.c): the conv calls dt_maxpool2d_forward_samples on
 * cache-sized chunks of samples (or, on its Winograd path, pools 2x2 itself and writes the
 * indices, dt_maxpool2d_indices_2x2), and backward applies the relu's mask too (c->relu_below;
 * relu(x) is 0 at the winner exactly when the pooled value is not > 0). */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* The common 2x2 / stride 2 window without padding, written branch-free so it vectorises (same
 * first-maximum tie rule and NaN propagation as the general loop). */
static void pool2x2(const float *xp, float *yp, int32_t *ip, int w, int oh, int ow)
{
    for (int oy = 0; oy < oh; oy++) {
        const float *r0 = xp + (size_t)2 * oy * w, *r1 = r0 + w;
        float *yr = yp + (size_t)oy * ow;
        int32_t *ir = ip + (size_t)oy * ow;
        int base = 2 * oy * w;
#pragma omp simd
        for (int ox = 0; ox < ow; ox++) {
            float a = r0[2 * ox], b = r0[2 * ox + 1], c = r1[2 * ox], d = r1[2 * ox + 1];
            int i = base + 2 * ox, best = i;
            float max = a;
            bool t = b > max || b != b;
            max = t ? b : max;
            best = t ? i + 1 : best;
            t = c > max || c != c;
            max = t ? c : max;
            best = t ? i + w : best;
            t = d > max || d != d;
            max = t ? d : max;
            best = t ? i + w + 1 : best;
            yr[ox] = max;
            ir[ox] = best;
        }
    }
}

static void pool_plane(const struct dt_pool_geom *gp, const float *xp, float *yp, int32_t *ip,
                       int h, int w)
{
    const struct dt_pool_geom g = *gp;
    if (g.k == 2 && g.stride == 2 && g.pad == 0) {
        pool2x2(xp, yp, ip, w, g.oh, g.ow);
        return;
    }
    for (int oy = 0; oy < g.oh; oy++)
        for (int ox = 0; ox < g.ow; ox++) {
            int y0 = oy * g.stride - g.pad, x0 = ox * g.stride - g.pad;
            int best = -1;
            float max = 0.0f;
            for (int iy = y0 < 0 ? 0 : y0; iy < y0 + g.k && iy < h; iy++)
                for (int ix = x0 < 0 ? 0 : x0; ix < x0 + g.k && ix < w; ix++) {
                    float v = xp[iy * w + ix];
                    if (best < 0 || v > max || v != v) {
                        max = v;
                        best = iy * w + ix;
                    }
                }
            yp[oy * g.ow + ox] = max;
            ip[oy * g.ow + ox] = best;
        }
}

void dt_maxpool2d_forward_samples(struct dt_layer *l, const float *x, float *y, int first,
                                  int count)
{
    struct maxpool *mp = l->state;
    int h = l->in.h, w = l->in.w, planes = count * l->in.c;
    size_t out_plane = (size_t)mp->g.oh * mp->g.ow;
    int32_t *argmax = mp->argmax + (size_t)first * l->in.c * out_plane;
    /* inside a fused conv's parallel region (nn/layer_conv2d.c) each thread pools its own */
#pragma omp parallel for if (!omp_in_parallel() && (size_t)planes * h * w > DT_PARALLEL_MIN)
    for (int pl = 0; pl < planes; pl++)
        pool_plane(&mp->g, x + (size_t)pl * h * w, y + pl * out_plane, argmax + pl * out_plane, h,
                   w);
}

int32_t *dt_maxpool2d_indices_2x2(struct dt_layer *l, int first)
{
    struct maxpool *mp = l->state;
    if (mp->g.k != 2 || mp->g.stride != 2 || mp->g.pad != 0)
        return NULL;
    return mp->argmax + (size_t)first * dt_shape_size(l->out);
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
    size_t in_plane = (size_t)l->in.h * l->in.w, out_plane = (size_t)mp->g.oh * mp->g.ow;
    int planes = batch * l->in.c;
    bool mask = c->relu_below;
#pragma omp parallel for if (planes * in_plane > DT_PARALLEL_MIN)
    for (int pl = 0; pl < planes; pl++) {
        float *dxp = dx + pl * in_plane;
        const float *dyp = dy + pl * out_plane;
        const int32_t *ip = mp->argmax + pl * out_plane;
        memset(dxp, 0, in_plane * sizeof *dxp);
        if (mask) { /* a fused relu below: its gradient is dy where the winner is > 0 */
            const float *yp = y + pl * out_plane;
            for (size_t o = 0; o < out_plane; o++)
                dxp[ip[o]] += yp[o] > 0.0f ? dyp[o] : 0.0f;
        } else {
            for (size_t o = 0; o < out_plane; o++)
                dxp[ip[o]] += dyp[o];
        }
    }
}

static void maxpool2d_destroy(struct dt_layer *l)
{
    struct maxpool *mp = l->state;
    if (mp)
        dt_free(mp->argmax);
    free(mp);
}

const struct dt_layer_ops dt_maxpool2d_ops = {maxpool2d_setup, maxpool2d_init, maxpool2d_forward,
                                              maxpool2d_backward, maxpool2d_destroy};

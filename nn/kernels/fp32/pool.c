/* The pooling loops (nn/kernels/fp32/pool.h), as they were inside the layers: the same loops and
 * OpenMP pragmas, so the same instructions (objdump) and the same bits. */
#include "nn/kernels/fp32/pool.h"

#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "nn/kernels/parallel.h"

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
            int best;
            yr[ox] = dt_pool2x2_window(r0[2 * ox], r0[2 * ox + 1], r1[2 * ox], r1[2 * ox + 1],
                                       base + 2 * ox, w, &best);
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

void dt_maxpool_forward(const struct dt_pool_geom *g, const float *x, float *y, int32_t *argmax,
                        int planes, int h, int w)
{
    size_t out_plane = (size_t)g->oh * g->ow;
    /* inside a fused conv's parallel region (nn/layer_conv2d.c) each thread pools its own */
#pragma omp parallel for if (!omp_in_parallel() && (size_t)planes * h * w > DT_PARALLEL_MIN)
    for (int pl = 0; pl < planes; pl++)
        pool_plane(g, x + (size_t)pl * h * w, y + pl * out_plane, argmax + pl * out_plane, h, w);
}

/* v where `on`, else +0: bits and a mask, no branch (the winner is data). */
static inline float select_bits(float v, bool on)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    bits &= 0u - (uint32_t)on;
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* dy, or +0 where the relu mask (y > 0) is off, plus +0 (a -0 gradient becomes +0, as the
 * clear-and-add gives) */
static inline float masked_grad(float dy, const float *relu_y, size_t o)
{
    return 0.0f + select_bits(dy, !relu_y || relu_y[o] > 0.0f);
}

/* The 2x2 / stride 2 window without padding: dx written once, row pair by row pair, where the
 * general loop clears the plane and scatters into it (a dependent read-modify-write per
 * window); the same bits. */
static void unpool2x2(const int32_t *ip, const float *relu_y, const float *dyp, float *dxp, int h,
                      int w, int oh, int ow)
{
    for (int oy = 0; oy < oh; oy++) {
        float *r0 = dxp + (size_t)2 * oy * w, *r1 = r0 + w;
        size_t o0 = (size_t)oy * ow;
        int base = 2 * oy * w;
        for (int ox = 0; ox < ow; ox++) {
            float g = masked_grad(dyp[o0 + ox], relu_y, o0 + ox);
            int at = ip[o0 + ox] - base - 2 * ox; /* 0, 1, w or w + 1 */
            r0[2 * ox] = select_bits(g, at == 0);
            r0[2 * ox + 1] = select_bits(g, at == 1);
            r1[2 * ox] = select_bits(g, at == w);
            r1[2 * ox + 1] = select_bits(g, at == w + 1);
        }
        for (int x = 2 * ow; x < w; x++) /* an odd width's last column: in no window */
            r0[x] = r1[x] = 0.0f;
    }
    if (2 * oh < h) /* an odd height's last row */
        memset(dxp + (size_t)2 * oh * w, 0, (size_t)(h - 2 * oh) * w * sizeof *dxp);
}

void dt_maxpool_backward(const struct dt_pool_geom *g, const int32_t *argmax, const float *relu_y,
                         const float *dy, float *dx, int planes, int h, int w)
{
    size_t in_plane = (size_t)h * w, out_plane = (size_t)g->oh * g->ow;
    bool two = g->k == 2 && g->stride == 2 && g->pad == 0;
    /* inside a conv's parallel region (pool_grad) each thread unpools its own samples */
#pragma omp parallel for if (!omp_in_parallel() && planes * in_plane > DT_PARALLEL_MIN)
    for (int pl = 0; pl < planes; pl++) {
        float *dxp = dx + pl * in_plane;
        const float *dyp = dy + pl * out_plane;
        const int32_t *ip = argmax + pl * out_plane;
        if (two) {
            unpool2x2(ip, relu_y ? relu_y + pl * out_plane : NULL, dyp, dxp, h, w, g->oh, g->ow);
            continue;
        }
        memset(dxp, 0, in_plane * sizeof *dxp);
        if (relu_y) { /* a fused relu below: its gradient is dy where the winner is > 0 */
            const float *yp = relu_y + pl * out_plane;
            for (size_t o = 0; o < out_plane; o++)
                dxp[ip[o]] += yp[o] > 0.0f ? dyp[o] : 0.0f;
        } else {
            for (size_t o = 0; o < out_plane; o++)
                dxp[ip[o]] += dyp[o];
        }
    }
}

void dt_maxpool_backward_sample(const struct dt_pool_grad *p, int i, float *dst)
{
    size_t out = (size_t)p->c * p->g.oh * p->g.ow, at = (size_t)i * out;
    dt_maxpool_backward(&p->g, p->argmax + at, p->relu_y + at, p->dy + at, dst, p->c, p->h, p->w);
}

void dt_avgpool_forward(const struct dt_pool_geom *gp, const float *x, float *y, int planes, int h,
                        int w)
{
    const struct dt_pool_geom g = *gp;
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

void dt_avgpool_backward(const struct dt_pool_geom *gp, const float *dy, float *dx, int planes,
                         int h, int w)
{
    const struct dt_pool_geom g = *gp;
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

void dt_global_avgpool_forward(const float *x, float *y, int planes, size_t hw)
{
#pragma omp parallel for if ((size_t)planes * hw > DT_PARALLEL_MIN)
    for (int p = 0; p < planes; p++) {
        const float *xp = x + (size_t)p * hw;
        float s = 0.0f;
        for (size_t k = 0; k < hw; k++)
            s += xp[k];
        y[p] = s / (float)hw;
    }
}

void dt_global_avgpool_backward(const float *dy, float *dx, int planes, size_t hw)
{
#pragma omp parallel for if ((size_t)planes * hw > DT_PARALLEL_MIN)
    for (int p = 0; p < planes; p++) {
        float d = dy[p] / (float)hw;
        float *dxp = dx + (size_t)p * hw;
        for (size_t k = 0; k < hw; k++)
            dxp[k] = d;
    }
}

/* im2col and its adjoint col2im: the column matrix of the "gemm" conv path (nn/layer_conv2d.c
 * multiplies it with the weights through nn/kernels/fp32/blas.h). Plain loops, built once (the
 * binary's x86-64-v2): memcpy and strided copies that gain nothing from wider vectors. */
#include "nn/kernels/fp32/im2col.h"

#include <string.h>

/* Below this many floats moved the thread start-up costs more than the loop. */
#define PARALLEL_MIN 32768

/* The shape in the loops' terms: a square kernel of side k (the conv2d layer's). */
struct geom {
    int c, h, w, k, stride, pad, oh, ow, ckk, pix;
};

static struct geom geom_of(const struct dt_conv_shape *s)
{
    struct geom g = {
        .c = s->c, .h = s->h, .w = s->w, .k = s->kh, .stride = s->stride, .pad = s->pad};
    g.oh = (s->h + 2 * s->pad - s->kh) / s->stride + 1;
    g.ow = (s->w + 2 * s->pad - s->kw) / s->stride + 1;
    g.ckk = g.c * g.k * g.k;
    g.pix = g.oh * g.ow;
    return g;
}

/* Output columns [lo, hi) whose input column ox*stride - pad + kx lies inside [0, w). */
static void valid_range(const struct geom *cv, int kx, int *lo, int *hi)
{
    int off = kx - cv->pad; /* ix = ox * stride + off */
    *lo = off >= 0 ? 0 : (-off + cv->stride - 1) / cv->stride;
    *hi = cv->w - off <= 0 ? 0 : (cv->w - off - 1) / cv->stride + 1;
    if (*hi > cv->ow)
        *hi = cv->ow;
    if (*lo > *hi)
        *lo = *hi;
}

/* col[(c, ky, kx)][b*P + oy*OW + ox] = x[b][c][oy*s - pad + ky][ox*s - pad + kx], 0 outside. */
void dt_im2col(const struct dt_conv_shape *s, const float *x, float *col, int batch)
{
    const struct geom g = geom_of(s), *cv = &g;
    size_t n = (size_t)batch * cv->pix, plane = (size_t)cv->h * cv->w;
    int tasks = cv->ckk * batch;
#pragma omp parallel for if (n * cv->ckk > PARALLEL_MIN)
    for (int t = 0; t < tasks; t++) {
        int r = t / batch, b = t % batch;
        int c = r / (cv->k * cv->k), ky = r / cv->k % cv->k, kx = r % cv->k;
        const float *xp = x + ((size_t)b * cv->c + c) * plane;
        float *dst = col + (size_t)r * n + (size_t)b * cv->pix;
        int lo, hi;
        valid_range(cv, kx, &lo, &hi);
        for (int oy = 0; oy < cv->oh; oy++, dst += cv->ow) {
            int iy = oy * cv->stride - cv->pad + ky;
            if (iy < 0 || iy >= cv->h) {
                memset(dst, 0, (size_t)cv->ow * sizeof *dst);
                continue;
            }
            const float *src = xp + (size_t)iy * cv->w;
            int off = kx - cv->pad;
            for (int ox = 0; ox < lo; ox++)
                dst[ox] = 0.0f;
            if (cv->stride == 1)
                memcpy(dst + lo, src + lo + off, (size_t)(hi - lo) * sizeof *dst);
            else
                for (int ox = lo; ox < hi; ox++)
                    dst[ox] = src[ox * cv->stride + off];
            for (int ox = hi; ox < cv->ow; ox++)
                dst[ox] = 0.0f;
        }
    }
}

/* The adjoint of im2col: every column entry adds back into the input pixel it came from.
 * Parallel over (sample, channel) planes of dx, which are disjoint. */
void dt_col2im(const struct dt_conv_shape *s, const float *col, float *dx, int batch)
{
    const struct geom g = geom_of(s), *cv = &g;
    size_t n = (size_t)batch * cv->pix, plane = (size_t)cv->h * cv->w;
    int planes = batch * cv->c;
#pragma omp parallel for if (n * cv->ckk > PARALLEL_MIN)
    for (int pl = 0; pl < planes; pl++) {
        int b = pl / cv->c, c = pl % cv->c;
        float *dxp = dx + (size_t)pl * plane;
        memset(dxp, 0, plane * sizeof *dxp);
        for (int ky = 0; ky < cv->k; ky++)
            for (int kx = 0; kx < cv->k; kx++) {
                int r = (c * cv->k + ky) * cv->k + kx, lo, hi;
                valid_range(cv, kx, &lo, &hi);
                const float *src = col + (size_t)r * n + (size_t)b * cv->pix;
                for (int oy = 0; oy < cv->oh; oy++, src += cv->ow) {
                    int iy = oy * cv->stride - cv->pad + ky;
                    if (iy < 0 || iy >= cv->h)
                        continue;
                    float *d = dxp + (size_t)iy * cv->w;
                    int off = kx - cv->pad;
                    if (cv->stride == 1) /* the common case, kept apart so it vectorises */
                        for (int ox = lo; ox < hi; ox++)
                            d[ox + off] += src[ox];
                    else
                        for (int ox = lo; ox < hi; ox++)
                            d[ox * cv->stride + off] += src[ox];
                }
            }
    }
}

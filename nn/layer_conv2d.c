/* conv2d: 2-D convolution, NCHW, weight [out, in, k, k] and optional bias [out], like
 * torch.nn.Conv2d(in, out, k, stride, padding, bias).
 *
 * Algorithm (the "gemm" path): batched im2col. The columns of the whole batch form one matrix
 * col[B*P][C*K*K] (P = output pixels, one row per output pixel, channel-major like the weight),
 * so each direction is ONE large GEMM whose M = B*P keeps OpenBLAS efficient at small channel
 * counts:
 *   forward        yt[B*P][OC]  = col x W^T, then transposed into NCHW y with the bias added
 *   weight grad    dW[OC][CKK]  = dyt^T x col        (dyt: dy transposed to [B*P][OC])
 *   input grad     dcol         = dyt x W, reusing col's memory, then col2im into dx
 * col is kept from forward to backward (no second im2col). Scratch, allocated once at setup for
 * max_batch: col (B*P*CKK floats) and yt (B*P*OC floats).
 *
 * conv2d_choose_algo() is the single place where a per-shape choice between this path and a
 * direct (non-GEMM) kernel belongs: it sees the full shape at setup time.
 */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "nn/init.h"
#include "nn/layer_common.h"
#include "util/alloc.h"
#include "util/err.h"

enum conv_algo { CONV_GEMM };

struct conv {
    enum conv_algo algo;
    int c, h, w, oc, oh, ow, k, stride, pad;
    int ckk, pix;
    bool bias;
    float *col; /* [max_batch * pix][ckk] */
    float *yt;  /* [max_batch * pix][oc] */
};

/* Per-shape algorithm selection. A direct kernel (e.g. dt_conv_direct_supported(c, oc, k,
 * stride, pad)) would be tried here first; GEMM handles every shape. */
static enum conv_algo conv2d_choose_algo(const struct conv *cv)
{
    (void)cv;
    return CONV_GEMM;
}

static int conv2d_setup(struct dt_layer *l, const struct dt_layer_spec *spec, struct dt_shape in)
{
    if (spec->out_channels < 1)
        return dt_fail(DT_EUSAGE, "out_channels %d, expected >= 1", spec->out_channels);
    if (spec->kernel < 1)
        return dt_fail(DT_EUSAGE, "kernel %d, expected >= 1", spec->kernel);
    int stride = spec->stride ? spec->stride : 1;
    if (stride < 1 || spec->padding < 0)
        return dt_fail(DT_EUSAGE, "stride %d / padding %d, expected stride >= 1, padding >= 0",
                       stride, spec->padding);
    int oh = dt_window_out(in.h, spec->kernel, stride, spec->padding);
    int ow = dt_window_out(in.w, spec->kernel, stride, spec->padding);
    if (oh < 1 || ow < 1)
        return dt_fail(DT_EUSAGE, "kernel %d is larger than the padded input %dx%d (padding %d)",
                       spec->kernel, in.h + 2 * spec->padding, in.w + 2 * spec->padding,
                       spec->padding);
    struct conv *cv = calloc(1, sizeof *cv);
    if (!cv)
        return dt_fail(DT_ERUNTIME, "out of memory");
    l->state = cv;
    *cv = (struct conv){.c = in.c,
                        .h = in.h,
                        .w = in.w,
                        .oc = spec->out_channels,
                        .oh = oh,
                        .ow = ow,
                        .k = spec->kernel,
                        .stride = stride,
                        .pad = spec->padding,
                        .bias = spec->bias};
    cv->ckk = cv->c * cv->k * cv->k;
    cv->pix = oh * ow;
    cv->algo = conv2d_choose_algo(cv);
    l->out = (struct dt_shape){cv->oc, oh, ow};
    l->nparams = (size_t)cv->oc * cv->ckk + (cv->bias ? (size_t)cv->oc : 0);
    size_t rows = (size_t)l->max_batch * cv->pix;
    cv->col = dt_alloc(rows * cv->ckk, sizeof(float));
    cv->yt = dt_alloc(rows * cv->oc, sizeof(float));
    if (!cv->col || !cv->yt)
        return dt_fail_context(-DT_ERUNTIME, "conv2d scratch");
    return 0;
}

static int conv2d_init(struct dt_layer *l, uint64_t seed)
{
    struct conv *cv = l->state;
    size_t nw = (size_t)cv->oc * cv->ckk;
    int wshape[4] = {cv->oc, cv->c, cv->k, cv->k};
    dt_layer_describe(l, "weight", true, 0, 4, wshape);
    if (cv->bias)
        dt_layer_describe(l, "bias", true, nw, 1, &cv->oc);
    dt_init_fan_in(l->params, nw, cv->bias ? l->params + nw : NULL, (size_t)cv->oc, (size_t)cv->ckk,
                   seed, l->index);
    return 0;
}

/* One row of col per output pixel: the receptive field, zeros where it hangs over the
 * padding. */
static void im2col(const struct conv *cv, const float *x, float *col, int batch)
{
    int rows = batch * cv->oh;
#pragma omp parallel for if ((size_t)rows * cv->ow * cv->ckk > DT_PARALLEL_MIN)
    for (int r = 0; r < rows; r++) {
        int b = r / cv->oh, oy = r % cv->oh;
        const float *xb = x + (size_t)b * cv->c * cv->h * cv->w;
        float *dst = col + ((size_t)b * cv->pix + (size_t)oy * cv->ow) * cv->ckk;
        for (int ox = 0; ox < cv->ow; ox++) {
            int y0 = oy * cv->stride - cv->pad, x0 = ox * cv->stride - cv->pad;
            for (int c = 0; c < cv->c; c++) {
                const float *plane = xb + (size_t)c * cv->h * cv->w;
                for (int ky = 0; ky < cv->k; ky++) {
                    int iy = y0 + ky;
                    bool row_in = iy >= 0 && iy < cv->h;
                    for (int kx = 0; kx < cv->k; kx++) {
                        int ix = x0 + kx;
                        *dst++ = row_in && ix >= 0 && ix < cv->w ? plane[iy * cv->w + ix] : 0.0f;
                    }
                }
            }
        }
    }
}

/* The adjoint of im2col: every column entry adds back into the input pixel it came from.
 * Parallel over samples, whose dx regions are disjoint. */
static void col2im(const struct conv *cv, const float *col, float *dx, int batch)
{
    size_t in_size = (size_t)cv->c * cv->h * cv->w;
#pragma omp parallel for if ((size_t)batch * cv->pix * cv->ckk > DT_PARALLEL_MIN)
    for (int b = 0; b < batch; b++) {
        float *dxb = dx + (size_t)b * in_size;
        memset(dxb, 0, in_size * sizeof *dxb);
        const float *src = col + (size_t)b * cv->pix * cv->ckk;
        for (int oy = 0; oy < cv->oh; oy++)
            for (int ox = 0; ox < cv->ow; ox++) {
                int y0 = oy * cv->stride - cv->pad, x0 = ox * cv->stride - cv->pad;
                for (int c = 0; c < cv->c; c++) {
                    float *plane = dxb + (size_t)c * cv->h * cv->w;
                    for (int ky = 0; ky < cv->k; ky++) {
                        int iy = y0 + ky;
                        if (iy < 0 || iy >= cv->h) {
                            src += cv->k;
                            continue;
                        }
                        for (int kx = 0; kx < cv->k; kx++, src++) {
                            int ix = x0 + kx;
                            if (ix >= 0 && ix < cv->w)
                                plane[iy * cv->w + ix] += *src;
                        }
                    }
                }
            }
    }
}

static void conv2d_forward(struct dt_layer *l, const float *x, float *y, int batch,
                           const struct dt_forward_ctx *ctx)
{
    (void)ctx;
    struct conv *cv = l->state;
    const float *weight = l->params, *bias = cv->bias ? l->params + (size_t)cv->oc * cv->ckk : NULL;
    im2col(cv, x, cv->col, batch);
    int rows = batch * cv->pix;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cv->oc, cv->ckk, 1.0f, cv->col,
                cv->ckk, weight, cv->ckk, 0.0f, cv->yt, cv->oc);
#pragma omp parallel for if ((size_t)rows * cv->oc > DT_PARALLEL_MIN)
    for (int b = 0; b < batch; b++)
        for (int o = 0; o < cv->oc; o++) {
            float *dst = y + ((size_t)b * cv->oc + o) * cv->pix;
            const float *src = cv->yt + (size_t)b * cv->pix * cv->oc + o;
            float add = bias ? bias[o] : 0.0f;
            for (int p = 0; p < cv->pix; p++)
                dst[p] = src[(size_t)p * cv->oc] + add;
        }
}

/* dyt[b*P + p][o] = dy[b][o][p], and the bias gradient, the sum of dy per channel. */
static void transpose_dy(const struct conv *cv, const float *dy, float *dyt, float *dbias,
                         int batch)
{
#pragma omp parallel for if ((size_t)batch * cv->pix * cv->oc > DT_PARALLEL_MIN)
    for (int b = 0; b < batch; b++)
        for (int o = 0; o < cv->oc; o++) {
            const float *src = dy + ((size_t)b * cv->oc + o) * cv->pix;
            float *dst = dyt + (size_t)b * cv->pix * cv->oc + o;
            for (int p = 0; p < cv->pix; p++)
                dst[(size_t)p * cv->oc] = src[p];
        }
    if (!dbias)
        return;
    for (int o = 0; o < cv->oc; o++) {
        double s = 0;
        for (int b = 0; b < batch; b++) {
            const float *src = dy + ((size_t)b * cv->oc + o) * cv->pix;
            float part = 0;
            for (int p = 0; p < cv->pix; p++)
                part += src[p];
            s += part;
        }
        dbias[o] = (float)s;
    }
}

static void conv2d_backward(struct dt_layer *l, const float *x, const float *y, const float *dy,
                            float *dx, int batch)
{
    (void)x, (void)y;
    struct conv *cv = l->state;
    size_t nw = (size_t)cv->oc * cv->ckk;
    int rows = batch * cv->pix;
    transpose_dy(cv, dy, cv->yt, cv->bias ? l->grads + nw : NULL, batch);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cv->oc, cv->ckk, rows, 1.0f, cv->yt,
                cv->oc, cv->col, cv->ckk, 0.0f, l->grads, cv->ckk);
    if (!dx)
        return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, cv->ckk, cv->oc, 1.0f, cv->yt,
                cv->oc, l->params, cv->ckk, 0.0f, cv->col, cv->ckk);
    col2im(cv, cv->col, dx, batch);
}

static void conv2d_destroy(struct dt_layer *l)
{
    struct conv *cv = l->state;
    if (!cv)
        return;
    dt_free(cv->col);
    dt_free(cv->yt);
    free(cv);
}

const struct dt_layer_ops dt_conv2d_ops = {conv2d_setup, conv2d_init, conv2d_forward,
                                           conv2d_backward, conv2d_destroy};

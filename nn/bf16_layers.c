/* bf16 products of conv2d and linear: the mode chosen at setup, the rounded copies of the
 * emulated mode and the tiles mode's calls into nn/kernels/bf16/ (see nn/bf16_layers.h). */
#include "nn/bf16_layers.h"

#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/kernels/bf16/bf16.h"
#include "nn/kernels/bf16/conv_bf16.h"
#include "nn/kernels/bf16/conv_s2_bf16.h"
#include "nn/kernels/bf16/gemm_bf16.h"
#include "nn/kernels/isa.h"
#include "util/alloc.h"
#include "util/err.h"

/* Samples whose weight-gradient operands are laid out at once (a few MB at most). */
#define WGRAD_CHUNK 16

/* Inputs with fewer channels than this run emulated: a 32-deep tile step would be at least
 * 7/8 zeros, and the operand layouts cost more than the products (the ConvNet's 1-channel
 * first conv: 4.3 ms per step on tiles, 2.3 ms emulated; docs/bf16.md). */
#define SMALL_INPUT_CHANNELS 4

/* ---- emulated mode ---- */

float *dt_bf16_round_into(float *dst, const float *src, size_t n)
{
#pragma omp parallel for if (n > 65536 && !omp_in_parallel())
    for (size_t i = 0; i < n; i++)
        dst[i] = dt_bf16_round(src[i]);
    return dst;
}

int dt_bf16_copies_alloc(struct dt_bf16_copies *c, size_t nx, size_t nw, size_t ndy)
{
    *c = (struct dt_bf16_copies){.nx = nx, .nw = nw, .ndy = ndy};
    c->x = dt_alloc(nx, sizeof(float));
    c->w = dt_alloc(nw, sizeof(float));
    c->dy = dt_alloc(ndy, sizeof(float));
    if (!c->x || !c->w || !c->dy) {
        dt_bf16_copies_free(c);
        return dt_fail(DT_ERUNTIME, "out of memory for the bf16 copies");
    }
    return 0;
}

void dt_bf16_copies_free(struct dt_bf16_copies *c)
{
    dt_free(c->x);
    dt_free(c->w);
    dt_free(c->dy);
    memset(c, 0, sizeof *c);
}

/* The note of a layer in emulated mode: the path's own text on the reference path, else why
 * the tile kernels do not take the shape. */
static void emulated_note(char *note, size_t size, enum dt_bf16_path path, const char *why)
{
    if (path == DT_BF16_REFERENCE)
        snprintf(note, size, "%s", dt_isa_bf16_path_text());
    else
        snprintf(note, size, "emulated, %s fallback: %s", dt_bf16_path_name(path), why);
}

/* Threads the per-sample loops may use (the OpenMP setting at init, capped at call time). */
static int team_size(int sized_for)
{
    int t = omp_get_max_threads();
    return t < 1 ? 1 : t > sized_for ? sized_for : t;
}

/* ---- conv2d ---- */

struct dt_bf16_conv {
    bool tiles;
    bool stride2; /* tiles through conv_s2_bf16.h (parity planes), else conv_bf16.h */
    enum dt_bf16_path path;
    char note[112];
    struct dt_conv_shape s, t;      /* the layer's shape and its input gradient's (n unused) */
    struct dt_conv_bf16_geom g, gt; /* stride 1 */
    struct dt_conv_s2_geom g2;      /* stride 2 */
    int oh, ow;                     /* the output plane */
    int threads;                    /* per-thread buffers below */
    dt_bf16 *wp, *wpi;              /* the forward's and the input gradient's packed weights */
    dt_bf16 *xv, *xvt; /* per thread: a sample's input, or dY, in pair planes (padding zero
                          from init: only the image is written, pad_input_image) */
    float *yq;         /* per thread: a sample's padded-width output */
    size_t yq_per;
    dt_bf16 *dyq, *even, *odd; /* WGRAD_CHUNK samples' weight-gradient operands (padding zero
                                  from init: only the image is written, *_image) */
    dt_bf16 *xp;               /* stride 2: their parity planes' position pairs, in place of
                                  even and odd */
    float *dwt;                /* the weight gradient in tap-major order */
    float *bparts;             /* [max_batch][K]: each sample's bias gradient part */
    float *ysample;            /* per thread: a sample's output for a forward's sink */
};

/* The tiles mode of a stride-2 shape (conv_s2_bf16.h): its geometry, note and scratch. */
static int stride2_setup(struct dt_bf16_conv *bf, double *scratch_bytes)
{
    const struct dt_conv_s2_geom *g = &bf->g2;
    if (dt_conv_s2_bf16_geometry(&bf->s, &bf->g2) < 0) {
        /* cannot happen for the shapes setup sends; keep the layer correct anyway */
        dt_clear_error();
        emulated_note(bf->note, sizeof bf->note, bf->path, "shape not in the bf16 conv kernels");
        return 0;
    }
    bf->tiles = bf->stride2 = true;
    snprintf(bf->note, sizeof bf->note, "%s", dt_bf16_path_name(bf->path));
    bf->threads = omp_get_max_threads() > 1 ? omp_get_max_threads() : 1;
    bf->oh = g->oh;
    bf->ow = g->ow;
    bf->yq_per = g->yq > g->dxq ? g->yq : g->dxq;
    *scratch_bytes = 2.0 * (g->wpack + g->wpack_dx) +
                     (double)bf->threads * (2.0 * (g->xv + g->dv) + 4.0 * bf->yq_per) +
                     WGRAD_CHUNK * 2.0 * (g->dyq + g->xp) + 4.0 * g->dwt + 4.0 * bf->s.n * bf->s.k +
                     4.0 * bf->threads * bf->s.k * g->oh * g->ow;
    return 0;
}

int dt_bf16_conv_setup(struct dt_bf16_conv **out, const struct dt_conv_shape *s,
                       double *scratch_bytes)
{
    struct dt_bf16_conv *bf = calloc(1, sizeof *bf);
    if (!bf)
        return dt_fail(DT_ERUNTIME, "out of memory");
    *out = bf;
    bf->s = *s;
    bf->path = dt_isa_bf16_path();
    *scratch_bytes = 0;
    const char *why = NULL;
    if (s->stride > 2)
        why = "stride 3+ is not in the bf16 conv kernels";
    else if (s->pad >= s->kh || s->kh != s->kw)
        why = "pad >= kernel is not in the bf16 conv kernels";
    else if (s->c < SMALL_INPUT_CHANNELS)
        why = "under 4 input channels fill too little of a 32-deep tile step";
    else if (s->stride == 2 && s->kh > DT_CONV_S2_MAX_KERNEL)
        why = "stride 2 with a kernel over 7x7 is not in the bf16 conv kernels";
    if (bf->path == DT_BF16_REFERENCE || why) {
        emulated_note(bf->note, sizeof bf->note, bf->path, why);
        return 0;
    }
    if (s->stride == 2)
        return stride2_setup(bf, scratch_bytes);
    dt_conv_bf16_input_grad_shape(s, &bf->t);
    int rc = dt_conv_bf16_geometry(s, &bf->g);
    if (rc == 0)
        rc = dt_conv_bf16_geometry(&bf->t, &bf->gt);
    if (rc < 0) { /* cannot happen for the shapes above; keep the layer correct anyway */
        dt_clear_error();
        emulated_note(bf->note, sizeof bf->note, bf->path, "shape not in the bf16 conv kernels");
        return 0;
    }
    bf->tiles = true;
    snprintf(bf->note, sizeof bf->note, "%s", dt_bf16_path_name(bf->path));
    bf->threads = omp_get_max_threads() > 1 ? omp_get_max_threads() : 1;
    bf->oh = bf->g.oh;
    bf->ow = bf->g.ow;
    bf->yq_per = bf->g.yq > bf->gt.yq ? bf->g.yq : bf->gt.yq;
    *scratch_bytes = 2.0 * (bf->g.wpack + bf->gt.wpack) +
                     (double)bf->threads * (2.0 * (bf->g.xv + bf->gt.xv) + 4.0 * bf->yq_per) +
                     WGRAD_CHUNK * 2.0 * (bf->g.dyq + 2 * bf->g.xt) + 4.0 * bf->g.dwt +
                     4.0 * s->n * s->k + 4.0 * bf->threads * s->k * bf->g.oh * bf->g.ow;
    return 0;
}

/* The stride-2 tiles mode's buffers (as dt_bf16_conv_init's, the weight-gradient copies in
 * xp). */
static int stride2_init(struct dt_bf16_conv *bf)
{
    const struct dt_conv_s2_geom *g = &bf->g2;
    bf->wp = dt_alloc(g->wpack, sizeof(dt_bf16));
    bf->wpi = dt_alloc(g->wpack_dx, sizeof(dt_bf16));
    bf->xv = dt_alloc((size_t)bf->threads * g->xv, sizeof(dt_bf16));
    bf->xvt = dt_alloc((size_t)bf->threads * g->dv, sizeof(dt_bf16));
    bf->yq = dt_alloc((size_t)bf->threads * bf->yq_per, sizeof(float));
    bf->dyq = dt_alloc((size_t)WGRAD_CHUNK * g->dyq, sizeof(dt_bf16));
    bf->xp = dt_alloc((size_t)WGRAD_CHUNK * g->xp, sizeof(dt_bf16));
    bf->dwt = dt_alloc(g->dwt, sizeof(float));
    bf->bparts = dt_alloc((size_t)bf->s.n * bf->s.k, sizeof(float));
    bf->ysample = dt_alloc((size_t)bf->threads * bf->s.k * g->oh * g->ow, sizeof(float));
    if (!bf->wp || !bf->wpi || !bf->xv || !bf->xvt || !bf->yq || !bf->dyq || !bf->xp || !bf->dwt ||
        !bf->bparts || !bf->ysample)
        return dt_fail_context(-DT_ERUNTIME, "conv2d bf16 scratch");
    return 0;
}

int dt_bf16_conv_init(struct dt_bf16_conv *bf)
{
    if (!bf->tiles)
        return 0;
    if (bf->stride2)
        return stride2_init(bf);
    bf->wp = dt_alloc(bf->g.wpack, sizeof(dt_bf16));
    bf->wpi = dt_alloc(bf->gt.wpack, sizeof(dt_bf16));
    bf->xv = dt_alloc((size_t)bf->threads * bf->g.xv, sizeof(dt_bf16));
    bf->xvt = dt_alloc((size_t)bf->threads * bf->gt.xv, sizeof(dt_bf16));
    bf->yq = dt_alloc((size_t)bf->threads * bf->yq_per, sizeof(float));
    bf->dyq = dt_alloc((size_t)WGRAD_CHUNK * bf->g.dyq, sizeof(dt_bf16));
    bf->even = dt_alloc((size_t)WGRAD_CHUNK * bf->g.xt, sizeof(dt_bf16));
    bf->odd = dt_alloc((size_t)WGRAD_CHUNK * bf->g.xt, sizeof(dt_bf16));
    bf->dwt = dt_alloc(bf->g.dwt, sizeof(float));
    bf->bparts = dt_alloc((size_t)bf->s.n * bf->s.k, sizeof(float));
    bf->ysample = dt_alloc((size_t)bf->threads * bf->s.k * bf->oh * bf->ow, sizeof(float));
    if (!bf->wp || !bf->wpi || !bf->xv || !bf->xvt || !bf->yq || !bf->dyq || !bf->even ||
        !bf->odd || !bf->dwt || !bf->bparts || !bf->ysample)
        return dt_fail_context(-DT_ERUNTIME, "conv2d bf16 scratch");
    return 0;
}

void dt_bf16_conv_free(struct dt_bf16_conv *bf)
{
    if (!bf)
        return;
    dt_free(bf->wp);
    dt_free(bf->wpi);
    dt_free(bf->xv);
    dt_free(bf->xvt);
    dt_free(bf->yq);
    dt_free(bf->dyq);
    dt_free(bf->even);
    dt_free(bf->odd);
    dt_free(bf->xp);
    dt_free(bf->dwt);
    dt_free(bf->bparts);
    dt_free(bf->ysample);
    free(bf);
}

bool dt_bf16_conv_tiles(const struct dt_bf16_conv *bf)
{
    return bf->tiles;
}

const char *dt_bf16_conv_note(const struct dt_bf16_conv *bf)
{
    return bf->note;
}

/* One sample's y (bias added) on thread t's buffers. */
static void forward_sample(struct dt_bf16_conv *bf, int t, const float *x, const float *b,
                           bool relu, bool stream, float *y)
{
    const struct dt_conv_shape *s = &bf->s;
    float *yq = bf->yq + (size_t)t * bf->yq_per;
    if (bf->stride2) {
        dt_bf16 *xv = bf->xv + (size_t)t * bf->g2.xv;
        dt_conv_s2_bf16_parity_planes_image_on(bf->path, s, &bf->g2, x, xv);
        dt_conv_s2_bf16_forward_on(bf->path, s, &bf->g2, xv, bf->wp, yq);
        dt_conv_s2_bf16_compact_on(bf->path, s, &bf->g2, yq, b, y);
        if (relu)
            for (size_t j = 0, out = (size_t)s->k * bf->oh * bf->ow; j < out; j++)
                y[j] = y[j] > 0.0f ? y[j] : 0.0f;
        return;
    }
    dt_bf16 *xv = bf->xv + (size_t)t * bf->g.xv;
    dt_conv_bf16_pad_input_image_on(bf->path, s, &bf->g, x, xv);
    dt_conv_bf16_forward_on(bf->path, s, &bf->g, xv, bf->wp, yq);
    dt_conv_bf16_compact_on(bf->path, s, &bf->g, yq, b, relu, stream, y);
}

void dt_bf16_conv_forward(struct dt_bf16_conv *bf, const float *x, const float *w, const float *b,
                          float *y, int batch, bool relu, const struct dt_bf16_conv_sink *sink)
{
    const struct dt_conv_shape *s = &bf->s;
    if (bf->stride2) {
        dt_conv_s2_bf16_pack_weights(s, &bf->g2, w, bf->wp);
        dt_conv_s2_bf16_pack_weights_input_grad(s, &bf->g2, w, bf->wpi);
    } else {
        dt_conv_bf16_pack_weights(s, &bf->g, w, bf->wp);
        dt_conv_bf16_pack_weights_input_grad(&bf->t, &bf->gt, w, bf->wpi);
    }
    size_t in = (size_t)s->c * s->h * s->w, out = (size_t)s->k * bf->oh * bf->ow;
    /* One sample per iteration on each thread; the kernels see the parallel region and run
     * single-threaded. An output depends on its sample only, whatever the team. */
#pragma omp parallel for schedule(static) num_threads(team_size(bf->threads)) if (batch > 1)
    for (int i = 0; i < batch; i++) {
        int t = omp_get_thread_num();
        float *yi = sink ? bf->ysample + (size_t)t * out : y + (size_t)i * out;
        forward_sample(bf, t, x + (size_t)i * in, b, relu, !sink, yi);
        if (sink)
            sink->fn(sink->ctx, yi, i);
    }
}

/* One sample's bias gradient part per channel, from its dY rows (the bf16-rounded dy, zero
 * at the junk columns) while they are in cache: 16 interleaved partial sums in float, added
 * pairwise (one sequential sum costs an add's latency per element), in a fixed order. */
static void bias_parts(const struct dt_bf16_conv *bf, const dt_bf16 *dyq, int qrow, float *part)
{
    /* qrow: the dY rows' length, a multiple of 32 */
    for (int k = 0; k < bf->s.k; k++) {
        const dt_bf16 *row = dyq + (size_t)k * qrow;
        float lane[16] = {0};
        for (int q = 0; q < qrow; q += 16)
            for (int j = 0; j < 16; j++)
                lane[j] += dt_bf16_to_f32(row[q + j]);
        for (int w = 8; w > 0; w /= 2)
            for (int j = 0; j < w; j++)
                lane[j] += lane[j + w];
        part[k] = lane[0];
    }
}

/* One sample's dy through the batchnorm above (bn_grad.h's formula and order of operations,
 * the batchnorm's own bits), into dst. */
static void bn_dy(const struct dt_bf16_conv *bf, const struct dt_bn_grad *bn, const float *dy,
                  int sample, float *dst)
{
    size_t pix = (size_t)bf->oh * bf->ow, at = (size_t)sample * bf->s.k * pix;
    for (int c = 0; c < bf->s.k; c++, at += pix) {
        const float *d = dy + at, *x = bn->x + at;
        float *o = dst + (size_t)c * pix;
        float k = bn->k[c], mean = bn->mean[c], invstd = bn->invstd[c];
        float mean_dy = bn->mean_dy[c], mean_dy_xhat = bn->mean_dy_xhat[c];
        for (size_t j = 0; j < pix; j++) {
            float xhat = (x[j] - mean) * invstd;
            o[j] = k * (d[j] - mean_dy - xhat * mean_dy_xhat);
        }
    }
}

/* Sample `sample`'s input gradient from its dy (already through the batchnorm above): the
 * forward kernel on the rotated weights, in this thread's buffers. */
static void input_grad(struct dt_bf16_conv *bf, const float *dy, float *dx, int sample,
                       const float *relu_x, const float *extra)
{
    const struct dt_conv_shape *t = &bf->t;
    size_t out = (size_t)bf->s.c * bf->s.h * bf->s.w, at = (size_t)sample * out;
    int th = omp_get_thread_num();
    float *yq = bf->yq + (size_t)th * bf->yq_per;
    if (bf->stride2) {
        dt_bf16 *dv = bf->xvt + (size_t)th * bf->g2.dv;
        dt_conv_s2_bf16_dy_planes_image_on(bf->path, &bf->s, &bf->g2, dy, dv);
        dt_conv_s2_bf16_input_grad_on(bf->path, &bf->s, &bf->g2, dv, bf->wpi, yq);
        dt_conv_s2_bf16_compact_dx_on(bf->path, &bf->s, &bf->g2, yq, relu_x ? relu_x + at : NULL,
                                      relu_x && extra ? extra + at : NULL, dx + at);
        return;
    }
    dt_bf16 *xv = bf->xvt + (size_t)th * bf->gt.xv;
    dt_conv_bf16_pad_input_image_on(bf->path, t, &bf->gt, dy, xv);
    dt_conv_bf16_forward_on(bf->path, t, &bf->gt, xv, bf->wpi, yq);
    if (relu_x) /* the relu below's backward, with the skip gradient (relu_below fusion) */
        dt_conv_bf16_compact_relu_below_on(bf->path, t, &bf->gt, yq, relu_x + at,
                                           extra ? extra + at : NULL, dx + at);
    else
        dt_conv_bf16_compact_on(bf->path, t, &bf->gt, yq, NULL, false, true, dx + at);
}

/* Chunk slot i's weight-gradient operands from one sample's dy and x, and its bias part when
 * part is not NULL. */
static void wgrad_operands(struct dt_bf16_conv *bf, int i, const float *dy, const float *x,
                           float *part)
{
    const struct dt_conv_shape *s = &bf->s;
    if (bf->stride2) {
        dt_bf16 *dyq = bf->dyq + i * bf->g2.dyq;
        dt_conv_s2_bf16_dy_rows_image_on(bf->path, s, &bf->g2, dy, dyq);
        if (part)
            bias_parts(bf, dyq, bf->g2.qrow, part);
        dt_conv_s2_bf16_position_pairs_image_on(bf->path, s, &bf->g2, x, bf->xp + i * bf->g2.xp);
        return;
    }
    dt_conv_bf16_dy_rows_image_on(bf->path, s, &bf->g, dy, bf->dyq + i * bf->g.dyq);
    if (part)
        bias_parts(bf, bf->dyq + i * bf->g.dyq, bf->g.qrow, part);
    dt_conv_bf16_position_pairs_image_on(bf->path, s, &bf->g, x, bf->even + i * bf->g.xt,
                                         bf->odd + i * bf->g.xt);
}

/* The n laid-out samples' weight gradient added into (or, first, written to) dwt. */
static void wgrad_chunk(struct dt_bf16_conv *bf, int n, bool accumulate)
{
    if (bf->stride2)
        dt_conv_s2_bf16_weight_grad_on(bf->path, &bf->s, &bf->g2, n, bf->dyq, bf->xp, bf->dwt,
                                       accumulate);
    else
        dt_conv_bf16_weight_grad_on(bf->path, &bf->s, &bf->g, n, bf->dyq, bf->even, bf->odd,
                                    bf->dwt, accumulate);
}

void dt_bf16_conv_backward(struct dt_bf16_conv *bf, const float *x, const float *dy,
                           const struct dt_bn_grad *bn, float *dx, const float *relu_x,
                           const float *extra, int b0, int count, float *g, bool bias)
{
    const struct dt_conv_shape *s = &bf->s;
    size_t in = (size_t)s->c * s->h * s->w, out = (size_t)s->k * bf->oh * bf->ow;
    /* Chunks in sample order, each added into the tile-major sum: every element is one fp32
     * sum over the samples in order, the same bits for any team. Each sample's dy and x are
     * read once from memory: its weight-gradient operands, bias part and input gradient are
     * made while they are in cache. */
    for (int c0 = 0; c0 < count; c0 += WGRAD_CHUNK) {
        int n = count - c0 < WGRAD_CHUNK ? count - c0 : WGRAD_CHUNK;
#pragma omp parallel for schedule(static) num_threads(team_size(bf->threads)) if (n > 1)
        for (int i = 0; i < n; i++) {
            int sample = b0 + c0 + i;
            const float *dyi = dy + (size_t)sample * out;
            if (bn) {
                float *own = bf->ysample + (size_t)omp_get_thread_num() * out;
                bn_dy(bf, bn, dy, sample, own);
                dyi = own;
            }
            wgrad_operands(bf, i, dyi, x + (size_t)sample * in,
                           bias ? bf->bparts + (size_t)(c0 + i) * s->k : NULL);
            if (dx)
                input_grad(bf, dyi, dx, sample, relu_x, extra);
        }
        wgrad_chunk(bf, n, c0 > 0);
    }
    size_t nw = (size_t)s->k * s->c * s->kh * s->kw;
    if (count > 0 && bf->stride2)
        dt_conv_s2_bf16_weight_grad_unpack(s, &bf->g2, bf->dwt, g);
    else if (count > 0)
        dt_conv_bf16_weight_grad_unpack(s, &bf->g, bf->dwt, g);
    else
        memset(g, 0, nw * sizeof *g);
    /* The bias gradient as autocast's bf16 conv has it (the sum of the rounded dy): per
     * sample in float (bias_parts), across samples in double, in sample order. */
    for (int k = 0; bias && k < s->k; k++) {
        double sum = 0;
        for (int i = 0; i < count; i++)
            sum += bf->bparts[(size_t)i * s->k + k];
        g[nw + k] = (float)sum;
    }
}

/* ---- linear ---- */

struct dt_bf16_linear {
    bool tiles;
    enum dt_bf16_path path;
    char note[112];
    int in, out, max_batch;
    dt_bf16 *wt; /* B = W^T [in x out]: the forward's */
    dt_bf16 *w;  /* B = W [out x in]: the input gradient's */
    dt_bf16 *a;  /* A: x [rows x in], then dy^T [out x rows] */
    dt_bf16 *b;  /* B: x [rows x in] for the weight gradient */
    dt_bf16 *a2; /* A: dy [rows x out] for the input gradient */
};

static size_t max3(size_t a, size_t b, size_t c)
{
    size_t m = a > b ? a : b;
    return m > c ? m : c;
}

int dt_bf16_linear_setup(struct dt_bf16_linear **out, int in, int out_features, int max_batch,
                         double *scratch_bytes)
{
    struct dt_bf16_linear *bf = calloc(1, sizeof *bf);
    if (!bf)
        return dt_fail(DT_ERUNTIME, "out of memory");
    *out = bf;
    *bf = (struct dt_bf16_linear){
        .path = dt_isa_bf16_path(), .in = in, .out = out_features, .max_batch = max_batch};
    *scratch_bytes = 0;
    if (bf->path == DT_BF16_REFERENCE) {
        emulated_note(bf->note, sizeof bf->note, bf->path, NULL);
        return 0;
    }
    bf->tiles = true;
    snprintf(bf->note, sizeof bf->note, "%s", dt_bf16_path_name(bf->path));
    *scratch_bytes = 2.0 * (2.0 * dt_bf16_packed_b_size(in, out_features) +
                            max3(dt_bf16_packed_a_size(max_batch, in),
                                 dt_bf16_packed_a_size(out_features, max_batch), 0) +
                            dt_bf16_packed_b_size(max_batch, in) +
                            dt_bf16_packed_a_size(max_batch, out_features));
    return 0;
}

int dt_bf16_linear_init(struct dt_bf16_linear *bf)
{
    if (!bf->tiles)
        return 0;
    bf->wt = dt_alloc(dt_bf16_packed_b_size(bf->in, bf->out), sizeof(dt_bf16));
    bf->w = dt_alloc(dt_bf16_packed_b_size(bf->out, bf->in), sizeof(dt_bf16));
    bf->a = dt_alloc(max3(dt_bf16_packed_a_size(bf->max_batch, bf->in),
                          dt_bf16_packed_a_size(bf->out, bf->max_batch), 0),
                     sizeof(dt_bf16));
    bf->b = dt_alloc(dt_bf16_packed_b_size(bf->max_batch, bf->in), sizeof(dt_bf16));
    bf->a2 = dt_alloc(dt_bf16_packed_a_size(bf->max_batch, bf->out), sizeof(dt_bf16));
    if (!bf->wt || !bf->w || !bf->a || !bf->b || !bf->a2)
        return dt_fail_context(-DT_ERUNTIME, "linear bf16 scratch");
    return 0;
}

void dt_bf16_linear_free(struct dt_bf16_linear *bf)
{
    if (!bf)
        return;
    dt_free(bf->wt);
    dt_free(bf->w);
    dt_free(bf->a);
    dt_free(bf->b);
    dt_free(bf->a2);
    free(bf);
}

bool dt_bf16_linear_tiles(const struct dt_bf16_linear *bf)
{
    return bf->tiles;
}

const char *dt_bf16_linear_note(const struct dt_bf16_linear *bf)
{
    return bf->note;
}

void dt_bf16_linear_pack_weights(struct dt_bf16_linear *bf, const float *w)
{
    dt_bf16_pack_b_f32(w, 1, bf->in, bf->in, bf->out, bf->wt); /* (i, o) = w[o][i] */
    dt_bf16_pack_b_f32(w, bf->in, 1, bf->out, bf->in, bf->w);  /* (o, i) = w[o][i] */
}

void dt_bf16_linear_forward(struct dt_bf16_linear *bf, const float *x, const float *b, float *y,
                            int rows)
{
    if (b)
        for (int r = 0; r < rows; r++)
            memcpy(y + (size_t)r * bf->out, b, (size_t)bf->out * sizeof *y);
    dt_bf16_pack_a_f32(x, bf->in, 1, rows, bf->in, bf->a);
    dt_gemm_bf16_on(bf->path, rows, bf->out, bf->in, bf->a, bf->wt, y, bf->out, b != NULL);
}

void dt_bf16_linear_backward(struct dt_bf16_linear *bf, const float *x, const float *dy, float *dx,
                             int rows, float *g)
{
    /* dW [out x in] = dy^T [out x rows] x [rows x in] */
    dt_bf16_pack_a_f32(dy, 1, bf->out, bf->out, rows, bf->a);
    dt_bf16_pack_b_f32(x, bf->in, 1, rows, bf->in, bf->b);
    if (rows > 0)
        dt_gemm_bf16_on(bf->path, bf->out, bf->in, rows, bf->a, bf->b, g, bf->in, false);
    else
        memset(g, 0, (size_t)bf->out * bf->in * sizeof *g);
    if (!dx || rows == 0)
        return;
    /* dx [rows x in] = dy [rows x out] x W [out x in] */
    dt_bf16_pack_a_f32(dy, bf->out, 1, rows, bf->out, bf->a2);
    dt_gemm_bf16_on(bf->path, rows, bf->in, bf->out, bf->a2, bf->w, dx, bf->in, false);
}

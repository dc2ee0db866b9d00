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

/* Offsets into the call scratch are kept to whole cache lines. */
#define SCRATCH_ALIGN 64

static size_t aligned(size_t bytes)
{
    return (bytes + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN;
}

/* ---- emulated mode ---- */

float *dt_bf16_round_into(float *dst, const float *src, size_t n)
{
#pragma omp parallel for if (n > 65536 && !omp_in_parallel())
    for (size_t i = 0; i < n; i++)
        dst[i] = dt_bf16_round(src[i]);
    return dst;
}

size_t dt_bf16_rounded_bytes(size_t nx, size_t ndy)
{
    return aligned(ndy * sizeof(float)) + nx * sizeof(float);
}

void dt_bf16_rounded_take(struct dt_bf16_rounded *r, struct dt_call_scratch *scratch, size_t nx,
                          size_t ndy)
{
    unsigned char *base = dt_call_scratch_take(scratch, dt_bf16_rounded_bytes(nx, ndy));
    r->dy = (float *)base;
    r->x = (float *)(base + aligned(ndy * sizeof(float)));
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
    dt_bf16 *wp, *wpi;              /* the forward's and the input gradient's packed weights (the
                                       layer's own: backward reads what forward packed) */
    /* The rest lives in the model's call scratch, bound at each call (bind_scratch), in the
     * order listed; the first five keep their padding zero from one call to the next (only
     * the image is written: pad_input_image, *_image; conv_s2_bf16.h's *_image for stride 2),
     * shared by every conv of this layout (key): */
    struct dt_call_scratch *scratch;
    int key[10];       /* the shape and thread count: equal keys, equal offsets */
    size_t at[9];      /* byte offsets of the buffers below in the call scratch */
    size_t zero_bytes; /* the part whose padding stays zero: xv .. odd */
    size_t call_bytes;
    dt_bf16 *xv, *xvt;         /* per thread: a sample's input, or dY, in pair planes (stride
                                  2: parity planes, dY planes) */
    dt_bf16 *dyq, *even, *odd; /* WGRAD_CHUNK samples' weight-gradient operands */
    dt_bf16 *xp;               /* stride 2: their parity planes' position pairs, in place of
                                  even and odd (bound at even's offset; odd's is empty) */
    float *yq;                 /* per thread: a sample's padded-width output */
    size_t yq_per;
    float *ysample; /* per thread: a sample's output for a forward's sink, or its dy */
    float *dwt;     /* the weight gradient in tap-major order */
    float *bparts;  /* [max_batch][K]: each sample's bias gradient part */
};

/* The offsets of the call-scratch buffers, in struct order, and the call's key (the shape
 * holds the stride, so stride-1 and stride-2 layouts never share a key). */
static void plan_scratch(struct dt_bf16_conv *bf)
{
    const struct dt_conv_shape *s = &bf->s;
    size_t t = (size_t)bf->threads;
    size_t bytes[9] = {
        t * bf->g.xv * sizeof(dt_bf16),             /* xv */
        t * bf->gt.xv * sizeof(dt_bf16),            /* xvt */
        WGRAD_CHUNK * bf->g.dyq * sizeof(dt_bf16),  /* dyq */
        WGRAD_CHUNK * bf->g.xt * sizeof(dt_bf16),   /* even */
        WGRAD_CHUNK * bf->g.xt * sizeof(dt_bf16),   /* odd */
        t * bf->yq_per * sizeof(float),             /* yq */
        t * s->k * bf->oh * bf->ow * sizeof(float), /* ysample */
        bf->g.dwt * sizeof(float),                  /* dwt */
        (size_t)s->n * s->k * sizeof(float),        /* bparts */
    };
    if (bf->stride2) { /* the parity layouts, zeroed the same way (conv_s2_bf16.h) */
        bytes[0] = t * bf->g2.xv * sizeof(dt_bf16);
        bytes[1] = t * bf->g2.dv * sizeof(dt_bf16);
        bytes[2] = WGRAD_CHUNK * bf->g2.dyq * sizeof(dt_bf16);
        bytes[3] = WGRAD_CHUNK * bf->g2.xp * sizeof(dt_bf16); /* xp */
        bytes[4] = 0;
        bytes[7] = bf->g2.dwt * sizeof(float);
    }
    size_t at = 0;
    for (int i = 0; i < 9; i++) {
        bf->at[i] = at;
        at += aligned(bytes[i]);
        if (i == 4)
            bf->zero_bytes = at;
    }
    bf->call_bytes = at;
    int key[10] = {s->n, s->c, s->h, s->w, s->k, s->kh, s->kw, s->stride, s->pad, bf->threads};
    memcpy(bf->key, key, sizeof key);
}

/* This call's buffers: the call scratch, its zero padding kept for this layout. */
static void bind_scratch(struct dt_bf16_conv *bf)
{
    unsigned char *b = dt_call_scratch_zeroed(bf->scratch, bf->key, sizeof bf->key, bf->zero_bytes);
    bf->xv = (dt_bf16 *)(b + bf->at[0]);
    bf->xvt = (dt_bf16 *)(b + bf->at[1]);
    bf->dyq = (dt_bf16 *)(b + bf->at[2]);
    if (bf->stride2) {
        bf->xp = (dt_bf16 *)(b + bf->at[3]);
    } else {
        bf->even = (dt_bf16 *)(b + bf->at[3]);
        bf->odd = (dt_bf16 *)(b + bf->at[4]);
    }
    bf->yq = (float *)(b + bf->at[5]);
    bf->ysample = (float *)(b + bf->at[6]);
    bf->dwt = (float *)(b + bf->at[7]);
    bf->bparts = (float *)(b + bf->at[8]);
}

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
    plan_scratch(bf);
    *scratch_bytes = 2.0 * (g->wpack + g->wpack_dx);
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
    plan_scratch(bf);
    *scratch_bytes = 2.0 * (bf->g.wpack + bf->gt.wpack);
    return 0;
}

size_t dt_bf16_conv_call_bytes(const struct dt_bf16_conv *bf)
{
    return bf->tiles ? bf->call_bytes : 0;
}

int dt_bf16_conv_init(struct dt_bf16_conv *bf, struct dt_call_scratch *scratch)
{
    if (!bf->tiles)
        return 0;
    bf->scratch = scratch;
    bf->wp = dt_alloc(bf->stride2 ? bf->g2.wpack : bf->g.wpack, sizeof(dt_bf16));
    bf->wpi = dt_alloc(bf->stride2 ? bf->g2.wpack_dx : bf->gt.wpack, sizeof(dt_bf16));
    if (!bf->wp || !bf->wpi)
        return dt_fail_context(-DT_ERUNTIME, "conv2d bf16 packed weights");
    return 0;
}

void dt_bf16_conv_free(struct dt_bf16_conv *bf)
{
    if (!bf)
        return;
    dt_free(bf->wp);
    dt_free(bf->wpi);
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
    bind_scratch(bf);
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
    bind_scratch(bf);
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
    /* All in the model's call scratch, bound by the pack calls (forward's, backward's): */
    struct dt_call_scratch *scratch;
    size_t wt_bytes, a_bytes, b_bytes;
    dt_bf16 *wt; /* B = W^T [in x out] for the forward; in backward B = W [out x in] for the
                    input gradient (the same bytes) */
    dt_bf16 *a;  /* A: x [rows x in], then dy^T [out x rows] */
    dt_bf16 *b;  /* B: x [rows x in] for the weight gradient */
    dt_bf16 *a2; /* A: dy [rows x out] for the input gradient */
};

static size_t max3(size_t a, size_t b, size_t c)
{
    size_t m = a > b ? a : b;
    return m > c ? m : c;
}

/* This call's buffers in the call scratch, in struct order. */
static void bind_linear_scratch(struct dt_bf16_linear *bf)
{
    unsigned char *base = dt_call_scratch_take(bf->scratch, dt_bf16_linear_call_bytes(bf));
    size_t at = aligned(bf->wt_bytes);
    bf->wt = (dt_bf16 *)base;
    bf->a = (dt_bf16 *)(base + at);
    at += aligned(bf->a_bytes);
    bf->b = (dt_bf16 *)(base + at);
    bf->a2 = (dt_bf16 *)(base + at + aligned(bf->b_bytes));
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
    bf->wt_bytes = sizeof(dt_bf16) * max3(dt_bf16_packed_b_size(in, out_features),
                                          dt_bf16_packed_b_size(out_features, in), 0);
    bf->a_bytes = sizeof(dt_bf16) * max3(dt_bf16_packed_a_size(max_batch, in),
                                         dt_bf16_packed_a_size(out_features, max_batch), 0);
    bf->b_bytes = sizeof(dt_bf16) * dt_bf16_packed_b_size(max_batch, in);
    return 0;
}

size_t dt_bf16_linear_call_bytes(const struct dt_bf16_linear *bf)
{
    if (!bf->tiles)
        return 0;
    return aligned(bf->wt_bytes) + aligned(bf->a_bytes) + aligned(bf->b_bytes) +
           sizeof(dt_bf16) * dt_bf16_packed_a_size(bf->max_batch, bf->out);
}

int dt_bf16_linear_init(struct dt_bf16_linear *bf, struct dt_call_scratch *scratch)
{
    bf->scratch = scratch;
    return 0;
}

void dt_bf16_linear_free(struct dt_bf16_linear *bf)
{
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
    bind_linear_scratch(bf);
    dt_bf16_pack_b_f32(w, 1, bf->in, bf->in, bf->out, bf->wt); /* (i, o) = w[o][i] */
}

void dt_bf16_linear_pack_weights_grad(struct dt_bf16_linear *bf, const float *w)
{
    bind_linear_scratch(bf);
    dt_bf16_pack_b_f32(w, bf->in, 1, bf->out, bf->in, bf->wt); /* (o, i) = w[o][i] */
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
    dt_gemm_bf16_on(bf->path, rows, bf->in, bf->out, bf->a2, bf->wt, dx, bf->in, false);
}

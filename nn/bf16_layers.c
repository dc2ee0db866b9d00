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
#include "nn/kernels/fp32/batchnorm.h"
#include "nn/kernels/fp32/im2col.h"
#include "nn/kernels/isa.h"
#include "util/err.h"

/* Samples whose weight-gradient operands are laid out at once (a few MB at most). */
#define WGRAD_CHUNK 16

/* The weight gradient is the sum of two parts, the call's first and second half of samples,
 * each one fp32 sum over its samples in order: a fixed split, so the bits do not depend on the
 * team. Two threads each take a part whole (their operands stay in their own core's cache,
 * where a product split by tap blocks read the other core's, at twice the CPU time). */
#define WGRAD_PARTS 2

/* Inputs with fewer channels than this run emulated: a 32-deep tile step would be at least
 * 7/8 zeros, and the operand layouts cost more than the products (the ConvNet's 1-channel
 * first conv: 4.3 ms per step on tiles, 2.3 ms emulated; docs/bf16.md). */
#define SMALL_INPUT_CHANNELS 4

/* Such inputs whose whole column (channels x taps) fits one 32-deep tile step, and fills more
 * than half of it, run as im2col GEMMs instead (the stem mode, below): the CIFAR nets' 3x3x3 is
 * 27 deep (the CIFAR CNN's step 0.86-0.94x emulated's, under load). The ConvNet's 1x3x3 (9
 * deep) stays emulated: its step was 1.08-1.10x emulated's in the stem mode (docs/bf16.md). */
#define STEM_MAX_DEPTH 32
#define STEM_MIN_DEPTH 17

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
    bool stem;    /* tiles as im2col GEMMs through gemm_bf16.h (C * kh * kw <= 32) */
    bool stride2; /* tiles through conv_s2_bf16.h (parity planes), else conv_bf16.h */
    enum dt_bf16_path path;
    bool products; /* emulated on Winograd with bf16 products (train.bf16_winograd) */
    char note[112];
    struct dt_conv_shape s, t;      /* the layer's shape and its input gradient's (n unused) */
    struct dt_conv_bf16_geom g, gt; /* stride 1 */
    struct dt_conv_s2_geom g2;      /* stride 2 */
    int oh, ow;                     /* the output plane */
    bool x_bf16;                    /* this call's x is stored as bf16 (stride-1 tiles only) */
    const struct dt_bn_relu *x_bn;  /* and is read through the batchnorm2d -> relu below */
    int threads;                    /* per-thread buffers below */
    dt_bf16 *wp, *wpi;              /* the forward's and the input gradient's packed weights (the
                                       layer's own: backward reads what forward packed) */
    /* The rest lives in the model's call scratch, bound at each call (bind_scratch), in the
     * order listed; the first five keep their padding zero from one call to the next (only
     * the image is written: pad_input_image, *_image; conv_s2_bf16.h's *_image for stride 2),
     * shared by every conv of this layout (key): */
    struct dt_call_scratch *scratch;
    int key[10];       /* the shape and thread count: equal keys, equal offsets */
    size_t at[10];     /* byte offsets of the buffers below in the call scratch */
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
    float *dwt;     /* the weight gradient in tap-major order: its first part's sum */
    float *bparts;  /* [max_batch][K]: each sample's bias gradient part */
    float *dwt2;    /* ... and its second part's (WGRAD_PARTS) */
    /* The stem mode's (the call scratch too, bound in the same way; nothing kept zero): */
    int ckk, pix;                   /* a column's depth (C * kh * kw) and the output positions */
    struct dt_conv_bf16_geom plane; /* the product [K][oh][ow] as the layout passes read a
                                       padded-width output (wp = ow: no padding) */
    size_t wp_elems, wpi_elems;     /* the packed weights: W [K x ckk], W^T [ckk x K] */
    size_t colp_per, dya_per;       /* per thread, bf16 elements of colp and dya */
    float *col;                     /* per thread: a sample's dx columns W^T dY [ckk][pix] */
    dt_bf16 *colh;                  /* per thread: a sample's im2col [ckk][pix] in bf16 */
    dt_bf16 *xh;                    /* per thread: a sample's x in bf16 */
    size_t xh_per;
    dt_bf16 *colp; /* per thread: colh packed as B (ckk x pix, or pix x ckk) */
    dt_bf16 *dya;  /* per thread: dY packed as A (K x pix), or as B (K x pix) */
    float *wparts; /* [max_batch][K * ckk]: each sample's weight gradient */
};

/* The offsets of the call-scratch buffers, in struct order, and the call's key (the shape
 * holds the stride, so stride-1 and stride-2 layouts never share a key). */
static void plan_scratch(struct dt_bf16_conv *bf)
{
    const struct dt_conv_shape *s = &bf->s;
    size_t t = (size_t)bf->threads;
    size_t bytes[10] = {
        t * bf->g.xv * sizeof(dt_bf16),             /* xv */
        t * bf->gt.xv * sizeof(dt_bf16),            /* xvt */
        WGRAD_CHUNK * bf->g.dyq * sizeof(dt_bf16),  /* dyq */
        WGRAD_CHUNK * bf->g.xt * sizeof(dt_bf16),   /* even */
        WGRAD_CHUNK * bf->g.xt * sizeof(dt_bf16),   /* odd */
        t * bf->yq_per * sizeof(float),             /* yq */
        t * s->k * bf->oh * bf->ow * sizeof(float), /* ysample */
        bf->g.dwt * sizeof(float),                  /* dwt */
        (size_t)s->n * s->k * sizeof(float),        /* bparts */
        bf->g.dwt * sizeof(float),                  /* dwt2 */
    };
    if (bf->stem) { /* col, colp, dya, colh, xh, yq, ysample, wparts, bparts; none kept zero */
        size_t ckk = (size_t)bf->ckk, pix = (size_t)bf->pix;
        bytes[0] = t * ckk * pix * sizeof(float);
        bytes[1] = t * bf->colp_per * sizeof(dt_bf16);
        bytes[2] = t * bf->dya_per * sizeof(dt_bf16);
        bytes[3] = t * ckk * pix * sizeof(dt_bf16); /* colh */
        bytes[4] = t * bf->xh_per * sizeof(dt_bf16);
        bytes[5] = t * (size_t)s->k * pix * sizeof(float); /* yq: a sample's product */
        bytes[7] = (size_t)s->n * s->k * ckk * sizeof(float);
        bytes[9] = 0;
    }
    if (bf->stride2) { /* the parity layouts, zeroed the same way (conv_s2_bf16.h) */
        bytes[0] = t * bf->g2.xv * sizeof(dt_bf16);
        bytes[1] = t * bf->g2.dv * sizeof(dt_bf16);
        bytes[2] = WGRAD_CHUNK * bf->g2.dyq * sizeof(dt_bf16);
        bytes[3] = WGRAD_CHUNK * bf->g2.xp * sizeof(dt_bf16); /* xp */
        bytes[4] = 0;
        bytes[7] = bytes[9] = bf->g2.dwt * sizeof(float);
    }
    size_t at = 0;
    for (int i = 0; i < 10; i++) {
        bf->at[i] = at;
        at += aligned(bytes[i]);
        if (i == 4)
            bf->zero_bytes = at;
    }
    bf->call_bytes = at;
    if (bf->stem)
        bf->zero_bytes = 0;
    int key[10] = {s->n, s->c, s->h, s->w, s->k, s->kh, s->kw, s->stride, s->pad, bf->threads};
    memcpy(bf->key, key, sizeof key);
}

/* This call's buffers: the call scratch, its zero padding kept for this layout. */
static void bind_scratch(struct dt_bf16_conv *bf)
{
    if (bf->stem) { /* the packers write their padding: nothing to keep zero */
        unsigned char *b = dt_call_scratch_take(bf->scratch, bf->call_bytes);
        bf->col = (float *)(b + bf->at[0]);
        bf->colp = (dt_bf16 *)(b + bf->at[1]);
        bf->dya = (dt_bf16 *)(b + bf->at[2]);
        bf->colh = (dt_bf16 *)(b + bf->at[3]);
        bf->xh = (dt_bf16 *)(b + bf->at[4]);
        bf->yq = (float *)(b + bf->at[5]);
        bf->ysample = (float *)(b + bf->at[6]);
        bf->wparts = (float *)(b + bf->at[7]);
        bf->bparts = (float *)(b + bf->at[8]);
        return;
    }
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
    bf->dwt2 = (float *)(b + bf->at[9]);
}

/* The tiles mode of a stride-2 shape (conv_s2_bf16.h): its geometry, note and scratch. */
static int stride2_setup(struct dt_bf16_conv *bf)
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
    return 0;
}

static size_t max_size(size_t a, size_t b)
{
    return a > b ? a : b;
}

/* The stem mode's operands from a sample's columns col [ckk][pix] (ckk <= 32), already bf16,
 * zero-padded to whole tiles in gemm_bf16.h's B layout: cols as B (ckk x pix: one 32-deep
 * step, tile nt the positions 16 nt ..) for the forward, cols^T as B (pix x ckk: tile
 * (nt, kt) the columns 16 nt .. at positions 32 kt ..) for the weight gradient. The general
 * packers take these all-edge tiles element by element from fp32 (a quarter of a ConvNet
 * step). */
static void stem_pack_cols(const dt_bf16 *col, int ckk, int pix, dt_bf16 *dst)
{
    for (int p0 = 0; p0 < pix; p0 += 16, dst += 512) {
        int w = pix - p0 < 16 ? pix - p0 : 16;
        for (int pr = 0; pr < 16; pr++) { /* the rows 2 pr and 2 pr + 1, side by side */
            dt_bf16 *o = dst + pr * 32;
            if (2 * pr >= ckk) {
                memset(o, 0, 32 * sizeof *o);
                continue;
            }
            const dt_bf16 *a = col + (size_t)2 * pr * pix + p0, *b = a + pix;
            if (w == 16 && 2 * pr + 1 < ckk) { /* the common case, as whole words */
                uint32_t pair[16];
                for (int c = 0; c < 16; c++)
                    pair[c] = (uint32_t)a[c] | (uint32_t)b[c] << 16;
                memcpy(o, pair, sizeof pair);
            } else {
                for (int c = 0; c < 16; c++) {
                    o[2 * c] = c < w ? a[c] : 0;
                    o[2 * c + 1] = 2 * pr + 1 < ckk && c < w ? b[c] : 0;
                }
            }
        }
    }
}

static void stem_pack_cols_t(const dt_bf16 *col, int ckk, int pix, dt_bf16 *dst)
{
    int kt_count = (pix + 31) / 32;
    for (int nt = 0; nt * 16 < ckk; nt++)
        for (int kt = 0; kt < kt_count; kt++) {
            dt_bf16 *t = dst + ((size_t)nt * kt_count + kt) * 512;
            int n = pix - kt * 32 < 32 ? pix - kt * 32 : 32;
            for (int rr = 0; rr < 16; rr++) { /* positions q, q + 1 of column r side by side */
                int r = nt * 16 + rr, w = r < ckk ? n : 0;
                const dt_bf16 *src = col + (size_t)(r < ckk ? r : 0) * pix + kt * 32;
                for (int q = 0; q < 32; q += 2) {
                    t[q * 16 + rr * 2] = q < w ? src[q] : 0;
                    t[q * 16 + rr * 2 + 1] = q + 1 < w ? src[q + 1] : 0;
                }
            }
        }
}

/* The stem mode's columns of one sample from its input in bf16: colh [ckk][pix], row
 * (c, ky, kx) the input under that tap of each output position, 0 in the padding (as
 * dt_im2col, on bf16: one conversion of the input instead of one per tap). */
static void stem_im2col(const struct dt_bf16_conv *bf, const dt_bf16 *x, dt_bf16 *col)
{
    const struct dt_conv_shape *s = &bf->s;
    int k = s->kh, st = s->stride;
    for (int r = 0; r < bf->ckk; r++) {
        int c = r / (k * k), ky = r / k % k, kx = r % k, off = kx - s->pad;
        /* output columns [lo, hi) read inside the row */
        int lo = off >= 0 ? 0 : (-off + st - 1) / st;
        int hi = s->w - off <= 0 ? 0 : (s->w - off - 1) / st + 1;
        hi = hi > bf->ow ? bf->ow : hi;
        lo = lo > hi ? hi : lo;
        dt_bf16 *dst = col + (size_t)r * bf->pix;
        for (int oy = 0; oy < bf->oh; oy++, dst += bf->ow) {
            int iy = oy * st - s->pad + ky;
            if (iy < 0 || iy >= s->h) {
                memset(dst, 0, (size_t)bf->ow * sizeof *dst);
                continue;
            }
            const dt_bf16 *src = x + ((size_t)c * s->h + iy) * s->w;
            memset(dst, 0, (size_t)lo * sizeof *dst);
            if (st == 1)
                memcpy(dst + lo, src + lo + off, (size_t)(hi - lo) * sizeof *dst);
            else
                for (int ox = lo; ox < hi; ox++)
                    dst[ox] = src[ox * st + off];
            memset(dst + hi, 0, (size_t)(bf->ow - hi) * sizeof *dst);
        }
    }
}

/* m rows of n fp32 (row stride n) rounded and packed as A (gemm_bf16.h) in one pass: 32 values
 * of a row at a time (the general packer takes a row's tail tile element by element). */
static void stem_pack_rows(const float *src, int m, int n, dt_bf16 *dst)
{
    int kt_count = (n + 31) / 32;
    for (int mt = 0; mt * 16 < m; mt++)
        for (int kt = 0; kt < kt_count; kt++, dst += 512)
            for (int r = 0; r < 16; r++) {
                int i = mt * 16 + r, w = i < m ? (n - kt * 32 < 32 ? n - kt * 32 : 32) : 0;
                for (int c = 0; c < w; c++)
                    dst[r * 32 + c] = dt_bf16_from_f32(src[(size_t)i * n + kt * 32 + c]);
                memset(dst + r * 32 + w, 0, (size_t)(32 - w) * sizeof *dst);
            }
}

/* The stem mode of a shape with a column of at most 32 (one tile step): forward
 * Y [K x pix] = W [K x ckk] x cols [ckk x pix], weight gradient dY [K x pix] x cols^T summed
 * over samples, input gradient col2im(W^T [ckk x K] x dY), one sample per thread. */
static int stem_setup(struct dt_bf16_conv *bf)
{
    const struct dt_conv_shape *s = &bf->s;
    bf->tiles = bf->stem = true;
    snprintf(bf->note, sizeof bf->note, "%s", dt_bf16_path_name(bf->path));
    bf->threads = omp_get_max_threads() > 1 ? omp_get_max_threads() : 1;
    bf->oh = (s->h + 2 * s->pad - s->kh) / s->stride + 1;
    bf->ow = (s->w + 2 * s->pad - s->kw) / s->stride + 1;
    bf->ckk = s->c * s->kh * s->kw;
    bf->pix = bf->oh * bf->ow;
    bf->plane = (struct dt_conv_bf16_geom){
        .oh = bf->oh, .ow = bf->ow, .wp = bf->ow, .q = bf->pix, .qpad = bf->pix};
    bf->wp_elems = dt_bf16_packed_a_size(s->k, bf->ckk);
    bf->wpi_elems = dt_bf16_packed_a_size(bf->ckk, s->k);
    bf->colp_per =
        max_size(dt_bf16_packed_b_size(bf->ckk, bf->pix), dt_bf16_packed_b_size(bf->pix, bf->ckk));
    bf->xh_per = (size_t)s->c * s->h * s->w;
    bf->dya_per =
        max_size(dt_bf16_packed_a_size(s->k, bf->pix), dt_bf16_packed_b_size(s->k, bf->pix));
    plan_scratch(bf);
    return 0;
}

/* The elements of the forward's and the input gradient's packed weights in the tiles mode. */
static size_t packed_forward(const struct dt_bf16_conv *bf)
{
    return bf->stem ? bf->wp_elems : bf->stride2 ? bf->g2.wpack : bf->g.wpack;
}

static size_t packed_input_grad(const struct dt_bf16_conv *bf)
{
    return bf->stem ? bf->wpi_elems : bf->stride2 ? bf->g2.wpack_dx : bf->gt.wpack;
}

size_t dt_bf16_conv_copy_bytes(const struct dt_bf16_conv *bf)
{
    if (!bf->tiles)
        return 0;
    return aligned(packed_forward(bf) * sizeof(dt_bf16)) +
           aligned(packed_input_grad(bf) * sizeof(dt_bf16));
}

/* The mode chosen (emulated, or one of the tiles modes set up). */
static int conv_mode(struct dt_bf16_conv *bf, const struct dt_conv_shape *s, bool winograd)
{
    bf->path = dt_isa_bf16_path();
    const char *why = NULL;
    if (bf->path != DT_BF16_REFERENCE && s->c < SMALL_INPUT_CHANNELS && s->stride <= 2 &&
        s->kh == s->kw && s->c * s->kh * s->kw <= STEM_MAX_DEPTH &&
        s->c * s->kh * s->kw >= STEM_MIN_DEPTH)
        return stem_setup(bf);
    if (s->stride > 2)
        why = "stride 3+ is not in the bf16 conv kernels";
    else if (s->pad >= s->kh || s->kh != s->kw)
        why = "pad >= kernel is not in the bf16 conv kernels";
    else if (s->c < SMALL_INPUT_CHANNELS)
        why = "under 4 input channels fill too little of a 32-deep tile step";
    else if (s->stride == 2 && s->kh > DT_CONV_S2_MAX_KERNEL)
        why = "stride 2 with a kernel over 7x7 is not in the bf16 conv kernels";
    if (!why && bf->path == DT_BF16_AVX512BF16 && s->stride == 1 && winograd) {
        /* a choice, not a fallback: Winograd F(4x4,3x3) does a quarter of the products, and
         * VDPBF16PS runs at most 2x fp32's flops (Zen 4; 0.5x on the AMX Xeon: docs/bf16.md) */
        snprintf(bf->note, sizeof bf->note,
                 "avx512bf16, emulated on fp32 Winograd: 1/4 of the products (VDPBF16PS: at most "
                 "2x fp32's flops)");
        return 0;
    }
    if (bf->path == DT_BF16_REFERENCE || why) {
        emulated_note(bf->note, sizeof bf->note, bf->path, why);
        return 0;
    }
    if (s->stride == 2)
        return stride2_setup(bf);
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
    return 0;
}

int dt_bf16_conv_setup(struct dt_bf16_conv **out, const struct dt_conv_shape *s, bool winograd,
                       bool products, double *copy_bytes)
{
    struct dt_bf16_conv *bf = calloc(1, sizeof *bf);
    if (!bf)
        return dt_fail(DT_ERUNTIME, "out of memory");
    *out = bf;
    bf->s = *s;
    int rc = conv_mode(bf, s, winograd);
    if (rc == 0 && !bf->tiles && winograd && products) {
        bf->products = true;
        if (bf->path == DT_BF16_AVX512BF16)
            snprintf(bf->note, sizeof bf->note,
                     "avx512bf16, bf16 products on Winograd: VDPBF16PS on V, U, dM rounded "
                     "(train.bf16_winograd)");
        else
            snprintf(bf->note, sizeof bf->note,
                     "%s, bf16 products on Winograd in FMAs: V, U, dM rounded "
                     "(train.bf16_winograd)",
                     dt_bf16_path_name(bf->path));
    }
    *copy_bytes = (double)dt_bf16_conv_copy_bytes(bf);
    return rc;
}

bool dt_bf16_conv_products(const struct dt_bf16_conv *bf)
{
    return bf->products;
}

size_t dt_bf16_conv_call_bytes(const struct dt_bf16_conv *bf)
{
    return bf->tiles ? bf->call_bytes : 0;
}

void dt_bf16_conv_init(struct dt_bf16_conv *bf, struct dt_call_scratch *scratch, void *copy)
{
    if (!bf->tiles)
        return;
    bf->scratch = scratch;
    bf->wp = copy;
    bf->wpi = (dt_bf16 *)((unsigned char *)copy + aligned(packed_forward(bf) * sizeof(dt_bf16)));
}

void dt_bf16_conv_free(struct dt_bf16_conv *bf)
{
    free(bf);
}

bool dt_bf16_conv_tiles(const struct dt_bf16_conv *bf)
{
    return bf->tiles;
}

bool dt_bf16_conv_reads_bf16(const struct dt_bf16_conv *bf)
{
    return bf->tiles && !bf->stem;
}

bool dt_bf16_conv_reads_bn_relu(const struct dt_bf16_conv *bf)
{
    return bf->tiles && !bf->stem && !bf->stride2;
}

bool dt_bf16_conv_dx_even(const struct dt_bf16_conv *bf)
{
    return bf->tiles && bf->stride2 && dt_conv_s2_bf16_dx_even_only(&bf->s, &bf->g2);
}

bool dt_bf16_conv_extra_even(const struct dt_bf16_conv *bf)
{
    return bf->tiles && bf->stride2;
}

const char *dt_bf16_conv_note(const struct dt_bf16_conv *bf)
{
    return bf->note;
}

/* One sample's y (bias added, relu'd when relu) on thread t's buffers, stored as `store` says
 * (ROUNDED or BF16: a conv's output is bf16 values). x is fp32 but on the stride-1 tiles,
 * where bf->x_bf16 says how it is stored. */
static void forward_sample(struct dt_bf16_conv *bf, int t, const void *x, const float *b, bool relu,
                           bool stream, enum dt_bf16_store store, void *y, float *py, int32_t *pidx)
{
    const struct dt_conv_shape *s = &bf->s;
    if (bf->stem) { /* yq = W x cols in this thread's buffer, then y = yq + b (relu'd) once */
        dt_bf16 *colp = bf->colp + (size_t)t * bf->colp_per;
        dt_bf16 *colh = bf->colh + (size_t)t * bf->ckk * bf->pix;
        dt_bf16 *xh = bf->xh + (size_t)t * bf->xh_per;
        dt_bf16_from_f32_n(x, xh, (size_t)s->c * s->h * s->w);
        stem_im2col(bf, xh, colh);
        stem_pack_cols(colh, bf->ckk, bf->pix, colp);
        float *yq = bf->yq + (size_t)t * s->k * bf->pix;
        dt_gemm_bf16_on(bf->path, s->k, bf->pix, bf->ckk, bf->wp, colp, yq, bf->pix, false);
        /* y written once, from the product in cache, by the path's compaction (AVX-512 where
         * the path has it: the plain loop ran 4 lanes wide, 40 % of the CIFAR CNN's stem), or
         * pooled as it is compacted */
        const struct dt_conv_bf16_layout *layout = dt_conv_bf16_layout_on(bf->path);
        if (py)
            layout->compact_pool2x2(s, &bf->plane, yq, b, py, pidx);
        else
            layout->compact(s, &bf->plane, yq, b, relu, stream, store, y);
        return;
    }
    float *yq = bf->yq + (size_t)t * bf->yq_per;
    if (bf->stride2) {
        const struct dt_conv_s2_bf16_layout *layout = dt_conv_s2_bf16_layout_on(bf->path);
        dt_bf16 *xv = bf->xv + (size_t)t * bf->g2.xv;
        layout->parity_planes_image(s, &bf->g2, x, bf->x_bf16, xv);
        dt_conv_s2_bf16_forward_on(bf->path, s, &bf->g2, xv, bf->wp, yq);
        layout->compact(s, &bf->g2, yq, b, relu, store, y);
        return;
    }
    const struct dt_conv_bf16_layout *layout = dt_conv_bf16_layout_on(bf->path);
    dt_bf16 *xv = bf->xv + (size_t)t * bf->g.xv;
    layout->pad_input_image(s, &bf->g, x, bf->x_bf16, bf->x_bn, xv);
    dt_conv_bf16_forward_on(bf->path, s, &bf->g, xv, bf->wp, yq);
    if (py)
        layout->compact_pool2x2(s, &bf->g, yq, b, py, pidx);
    else
        layout->compact(s, &bf->g, yq, b, relu, stream, store, y);
}

void dt_bf16_conv_pack_weights(struct dt_bf16_conv *bf, const float *w)
{
    const struct dt_conv_shape *s = &bf->s;
    if (bf->stem) { /* W [K x ckk] and W^T, the weights' own order [K][C][kh][kw] */
        dt_bf16_pack_a_f32(w, bf->ckk, 1, s->k, bf->ckk, bf->wp);
        dt_bf16_pack_a_f32(w, 1, bf->ckk, bf->ckk, s->k, bf->wpi);
    } else if (bf->stride2) {
        dt_conv_s2_bf16_pack_weights(s, &bf->g2, w, bf->wp);
        dt_conv_s2_bf16_pack_weights_input_grad(s, &bf->g2, w, bf->wpi);
    } else {
        dt_conv_bf16_pack_weights(s, &bf->g, w, bf->wp);
        dt_conv_bf16_pack_weights_input_grad(&bf->t, &bf->gt, w, bf->wpi);
    }
}

void dt_bf16_conv_forward(struct dt_bf16_conv *bf, const float *x, bool x_bf16,
                          const struct dt_bn_relu *x_bn, const float *w, const float *b, float *y,
                          int batch, bool relu, const struct dt_bf16_conv_sink *sink, bool y_bf16)
{
    const struct dt_conv_shape *s = &bf->s;
    bind_scratch(bf);
    bf->x_bf16 = x_bf16;
    bf->x_bn = x_bn;
    if (w)
        dt_bf16_conv_pack_weights(bf, w);
    size_t in = (size_t)s->c * s->h * s->w, out = (size_t)s->k * bf->oh * bf->ow;
    bool pooled = sink && sink->pool_y && relu && !bf->stride2; /* compact_pool2x2's layouts */
    /* One sample per iteration on each thread; the kernels see the parallel region and run
     * single-threaded. An output depends on its sample only, whatever the team. */
#pragma omp parallel for schedule(static) num_threads(team_size(bf->threads)) if (batch > 1)
    for (int i = 0; i < batch; i++) {
        int t = omp_get_thread_num();
        const void *xi = dt_act_from(x, x_bf16, (size_t)i * in);
        if (pooled) { /* the pool's output and indices, y never written */
            forward_sample(bf, t, xi, b, relu, false, DT_STORE_ROUNDED, NULL,
                           sink->pool_y + (size_t)i * sink->pool_size,
                           sink->pool_argmax + (size_t)i * sink->pool_size);
            continue;
        }
        void *yi = sink     ? (void *)(bf->ysample + (size_t)t * out)
                   : y_bf16 ? (void *)((dt_bf16 *)y + (size_t)i * out)
                            : (void *)(y + (size_t)i * out);
        forward_sample(bf, t, xi, b, relu, !sink,
                       y_bf16 && !sink ? DT_STORE_BF16 : DT_STORE_ROUNDED, yi, NULL, NULL);
        if (sink)
            sink->fn(sink->ctx, yi, i);
    }
}

/* One sample's dy through the batchnorm above into dst: the batchnorm's own input_grad loop
 * (bn_grad.h's formula and order of operations, its bits) on each channel's plane, in the
 * vector build the batchnorm uses (the plain loop here ran 4 lanes wide). */
static void bn_dy(const struct dt_bf16_conv *bf, const struct dt_bn_grad *bn, const float *dy,
                  int sample, float *dst)
{
    const struct dt_bn_loops *loops = dt_bn_loops();
    size_t pix = (size_t)bf->oh * bf->ow, at = (size_t)sample * bf->s.k * pix;
    for (int c = 0; c < bf->s.k; c++, at += pix) {
        float *o = dst + (size_t)c * pix;
        if (bn->xh) /* x stored as bf16 (bf16_store): its values widen exactly */
            loops->input_grad_bf16(bn->xh + at, dy + at, o, pix, pix, 1, bn->mean[c], bn->invstd[c],
                                   bn->k[c], bn->mean_dy[c], bn->mean_dy_xhat[c]);
        else
            loops->input_grad(bn->x + at, dy + at, o, pix, pix, 1, bn->mean[c], bn->invstd[c],
                              bn->k[c], bn->mean_dy[c], bn->mean_dy_xhat[c]);
    }
}

/* Sample `sample`'s dy [K][oh][ow]: in place in dy, or read through the batchnorm above (bn)
 * or the maxpool2d above (pool) into this thread's buffer. */
static const float *sample_dy(struct dt_bf16_conv *bf, const struct dt_bn_grad *bn,
                              const struct dt_pool_grad *pool, const float *dy, int sample)
{
    size_t out = (size_t)bf->s.k * bf->oh * bf->ow;
    float *own = bf->ysample + (size_t)omp_get_thread_num() * out;
    if (bn)
        bn_dy(bf, bn, dy, sample, own);
    else if (pool)
        dt_maxpool_backward_sample(pool, sample, own);
    return bn || pool ? own : dy + (size_t)sample * out;
}

/* Sample `sample`'s input gradient from its dy (already through the batchnorm above): the
 * forward kernel on the rotated weights, in this thread's buffers. dy NULL (stride 1): this
 * thread's pair planes hold dY already (unpool_image, bn_dy_image). */
static void input_grad(struct dt_bf16_conv *bf, const float *dy, float *dx, int sample,
                       const float *relu_x, const float *extra, const struct dt_dx_sums *sums,
                       unsigned even)
{
    const struct dt_conv_shape *t = &bf->t;
    size_t out = (size_t)bf->s.c * bf->s.h * bf->s.w, at = (size_t)sample * out;
    int th = omp_get_thread_num();
    float *yq = bf->yq + (size_t)th * bf->yq_per;
    if (bf->stride2) {
        const struct dt_conv_s2_bf16_layout *layout = dt_conv_s2_bf16_layout_on(bf->path);
        dt_bf16 *dv = bf->xvt + (size_t)th * bf->g2.dv;
        /* proj_dx: a sample's even positions, a quarter of its plane */
        size_t quarter = (size_t)bf->s.c * ((bf->s.h + 1) / 2) * ((bf->s.w + 1) / 2);
        if (dy)
            layout->dy_planes_image(&bf->s, &bf->g2, dy, dv);
        dt_conv_s2_bf16_input_grad_on(bf->path, &bf->s, &bf->g2, dv, bf->wpi, yq);
        if (even & DT_DX_EVEN) {
            at = (size_t)sample * quarter;
            dt_conv_s2_bf16_compact_dx_even(&bf->s, &bf->g2, yq, dx + at);
            dt_bf16_round_n(dx + at, dx + at, quarter); /* no extra: rounded as stored */
            return;
        }
        const float *e = !relu_x || !extra      ? NULL
                         : even & DT_EXTRA_EVEN ? extra + (size_t)sample * quarter
                                                : extra + at;
        layout->compact_dx(&bf->s, &bf->g2, yq, relu_x ? dt_act_from(relu_x, bf->x_bf16, at) : NULL,
                           bf->x_bf16, e, even & DT_EXTRA_EVEN, true, dx + at);
        return;
    }
    const struct dt_conv_bf16_layout *layout = dt_conv_bf16_layout_on(bf->path);
    dt_bf16 *xv = bf->xvt + (size_t)th * bf->gt.xv;
    if (dy)
        layout->pad_input_image(t, &bf->gt, dy, false, NULL, xv);
    dt_conv_bf16_forward_on(bf->path, t, &bf->gt, xv, bf->wpi, yq);
    /* bn_sums, add_sums: this sample's sums and the batchnorm's input */
    struct dt_dx_sums sample_sums = {0};
    if (sums)
        sample_sums =
            (struct dt_dx_sums){sums->out + (size_t)sample * 2 * t->k, sums->x + at, sums->mean};
    /* dx rounded as autocast's bf16 conv returns it, by the store itself (before the skip
     * gradient's add) */
    if (relu_x) /* the relu below's backward, with the skip gradient (relu_below fusion) */
        layout->compact_relu_below(t, &bf->gt, yq, dt_act_from(relu_x, bf->x_bf16, at), bf->x_bf16,
                                   bf->x_bn, extra ? extra + at : NULL, true, dx + at,
                                   sums ? &sample_sums : NULL);
    else
        layout->compact(t, &bf->gt, yq, NULL, false, true, DT_STORE_ROUNDED, dx + at);
}

/* Chunk slot i's weight-gradient operands from one sample's dy and x, and its bias part when
 * part is not NULL. dy NULL (stride 1): slot i's dY rows are made already (the same). */
static void wgrad_operands(struct dt_bf16_conv *bf, int i, const float *dy, const void *x,
                           float *part)
{
    const struct dt_conv_shape *s = &bf->s;
    if (bf->stride2) {
        const struct dt_conv_s2_bf16_layout *layout = dt_conv_s2_bf16_layout_on(bf->path);
        dt_bf16 *dyq = bf->dyq + i * bf->g2.dyq;
        if (dy)
            layout->dy_rows_image(s, &bf->g2, dy, dyq);
        if (part)
            dt_conv_bf16_layout_on(bf->path)->bias_parts(dyq, s->k, bf->g2.qrow, part);
        layout->position_pairs_image(s, &bf->g2, x, bf->x_bf16, bf->xp + i * bf->g2.xp);
        return;
    }
    const struct dt_conv_bf16_layout *layout = dt_conv_bf16_layout_on(bf->path);
    if (dy)
        layout->dy_rows_image(s, &bf->g, dy, bf->dyq + i * bf->g.dyq);
    if (part)
        layout->bias_parts(bf->dyq + i * bf->g.dyq, s->k, bf->g.qrow, part);
    layout->position_pairs_image(s, &bf->g, x, bf->x_bf16, bf->x_bn, bf->even + i * bf->g.xt,
                                 bf->odd + i * bf->g.xt);
}

/* The stem mode's bias part of one sample from its dY packed as A (gemm_bf16.h: row k of
 * tile (k / 16, kt) holds positions 32 kt ..): the layout passes' bias_parts sums
 * (conv_bf16.h), position j in lane j % 16 (the padding adds zeros). */
static void stem_bias_parts(const struct dt_bf16_conv *bf, const dt_bf16 *dya, float *part)
{
    int kt_count = (bf->pix + 31) / 32;
    for (int k = 0; k < bf->s.k; k++) {
        float lane[16] = {0};
        for (int kt = 0; kt < kt_count; kt++) {
            const dt_bf16 *row = dya + ((size_t)(k / 16) * kt_count + kt) * 512 + k % 16 * 32;
            for (int j = 0; j < 16; j++)
                lane[j] += dt_bf16_to_f32(row[j]);
            for (int j = 0; j < 16; j++)
                lane[j] += dt_bf16_to_f32(row[16 + j]);
        }
        for (int w = 8; w > 0; w /= 2)
            for (int j = 0; j < w; j++)
                lane[j] += lane[j + w];
        part[k] = lane[0];
    }
}

/* The stem mode's backward of one sample on this thread's buffers: its weight gradient
 * dY x cols^T into wparts' slot, its bias part when part is not NULL, and unless dx is NULL
 * its input gradient col2im(W^T dY) (the relu below's backward with relu_x, as input_grad). */
static void stem_backward_sample(struct dt_bf16_conv *bf, int slot, const float *dy, const float *x,
                                 float *dx, int sample, const float *relu_x, const float *extra,
                                 float *part)
{
    const struct dt_conv_shape *s = &bf->s;
    int th = omp_get_thread_num(), ckk = bf->ckk, pix = bf->pix;
    float *col = bf->col + (size_t)th * ckk * pix;
    dt_bf16 *colp = bf->colp + (size_t)th * bf->colp_per;
    dt_bf16 *dya = bf->dya + (size_t)th * bf->dya_per;
    dt_bf16 *colh = bf->colh + (size_t)th * ckk * pix;
    dt_bf16 *xh = bf->xh + (size_t)th * bf->xh_per;
    dt_bf16_from_f32_n(x, xh, (size_t)s->c * s->h * s->w);
    stem_im2col(bf, xh, colh);
    stem_pack_cols_t(colh, ckk, pix, colp);
    if (s->k % 32 == 0 && pix % 32 == 0) /* whole tiles: the path's vectorised pack */
        dt_bf16_pack_rows_both(bf->path, dy, s->k, pix, dya, NULL);
    else
        stem_pack_rows(dy, s->k, pix, dya);
    dt_gemm_bf16_on(bf->path, s->k, ckk, pix, dya, colp, bf->wparts + (size_t)slot * s->k * ckk,
                    ckk, false);
    if (part)
        stem_bias_parts(bf, dya, part);
    if (!dx)
        return;
    size_t in = (size_t)s->c * s->h * s->w, at = (size_t)sample * in;
    dt_bf16_pack_b_f32(dy, pix, 1, s->k, pix, dya);
    dt_gemm_bf16_on(bf->path, ckk, pix, s->k, bf->wpi, dya, col, pix, false);
    dt_col2im(s, col, dx + at, 1);
    dt_bf16_round_n(dx + at, dx + at, in); /* as autocast's bf16 conv returns it */
    if (relu_x) /* the relu below's backward, with the skip gradient (relu_below fusion) */
        for (size_t j = 0; j < in; j++)
            dx[at + j] = relu_x[at + j] > 0.0f ? dx[at + j] + (extra ? extra[at + j] : 0.0f) : 0.0f;
}

/* The stem mode's backward (dt_bf16_conv_backward's contract): one sample per thread, the
 * weight gradient summed over the samples' parts in sample order (the same bits for any team). */
static void stem_backward(struct dt_bf16_conv *bf, const float *x, const float *dy,
                          const struct dt_bn_grad *bn, const struct dt_pool_grad *pool, float *dx,
                          const float *relu_x, const float *extra, int b0, int count, float *g,
                          bool bias)
{
    const struct dt_conv_shape *s = &bf->s;
    size_t in = (size_t)s->c * s->h * s->w;
#pragma omp parallel for schedule(static) num_threads(team_size(bf->threads)) if (count > 1)
    for (int i = 0; i < count; i++) {
        int sample = b0 + i;
        const float *dyi = sample_dy(bf, bn, pool, dy, sample);
        stem_backward_sample(bf, i, dyi, x + (size_t)sample * in, dx, sample, relu_x, extra,
                             bias ? bf->bparts + (size_t)i * s->k : NULL);
    }
    size_t nw = (size_t)s->k * bf->ckk;
    for (size_t e = 0; e < nw; e++) {
        float sum = 0.0f;
        for (int i = 0; i < count; i++)
            sum += bf->wparts[(size_t)i * nw + e];
        g[e] = sum;
    }
}

/* The weight gradient of the n samples laid out from chunk slot `slot` on, added into (or,
 * first, written to) dwt. */
static void wgrad_chunk(struct dt_bf16_conv *bf, int slot, int n, float *dwt, bool accumulate)
{
    if (bf->stride2)
        dt_conv_s2_bf16_weight_grad_on(bf->path, &bf->s, &bf->g2, n, bf->dyq + slot * bf->g2.dyq,
                                       bf->xp + slot * bf->g2.xp, dwt, accumulate);
    else
        dt_conv_bf16_weight_grad_on(bf->path, &bf->s, &bf->g, n, bf->dyq + slot * bf->g.dyq,
                                    bf->even + slot * bf->g.xt, bf->odd + slot * bf->g.xt, dwt,
                                    accumulate);
}

/* One backward call's arguments (dt_bf16_conv_backward's), for its parts. The pool's backward
 * is laid out as it is unpooled, the batchnorm's as it is computed: no fp32 dY between
 * (unpool, bn_laid: unpool_image, bn_dy_image). */
struct conv_bwd {
    const float *x;
    bool x_bf16;
    const float *dy;
    const struct dt_bn_grad *bn;
    const struct dt_pool_grad *pool;
    float *dx;
    const float *relu_x, *extra;
    const struct dt_dx_sums *sums;
    bool bias, unpool, bn_laid;
    unsigned even;
    int b0;
};

/* Sample b0 + j of the call: its weight-gradient operands into chunk slot `slot`, its bias part
 * and its input gradient, from its dy and x read once from memory (each made while they are in
 * cache). */
static void sample_backward(struct dt_bf16_conv *bf, const struct conv_bwd *a, int j, int slot)
{
    const struct dt_conv_shape *s = &bf->s;
    const struct dt_conv_bf16_layout *layout = dt_conv_bf16_layout_on(bf->path);
    int sample = a->b0 + j;
    const float *dyi = NULL;
    int th = omp_get_thread_num();
    if (a->bn_laid && bf->stride2)
        dt_conv_s2_bf16_layout_on(bf->path)->bn_dy_image(
            s, &bf->g2, a->bn, a->dy, sample, bf->dyq + slot * bf->g2.dyq,
            a->dx ? bf->xvt + (size_t)th * bf->g2.dv : NULL);
    else if (a->unpool || a->bn_laid) {
        dt_bf16 *dyq = bf->dyq + slot * bf->g.dyq;
        dt_bf16 *xv = a->dx ? bf->xvt + (size_t)th * bf->gt.xv : NULL;
        if (a->unpool)
            layout->unpool_image(s, &bf->g, &bf->t, &bf->gt, a->pool, sample, dyq, xv);
        else
            layout->bn_dy_image(s, &bf->g, &bf->t, &bf->gt, a->bn, a->dy, sample, dyq, xv);
    } else
        dyi = sample_dy(bf, a->bn, a->pool, a->dy, sample);
    size_t in = (size_t)s->c * s->h * s->w;
    wgrad_operands(bf, slot, dyi, dt_act_from(a->x, a->x_bf16, (size_t)sample * in),
                   a->bias ? bf->bparts + (size_t)j * s->k : NULL);
    if (a->dx)
        input_grad(bf, dyi, a->dx, sample, a->relu_x, a->extra, a->sums, a->even);
}

/* Samples [lo, hi) of the call, chunk by chunk (chunk slots from slot0 on), their weight
 * gradient summed into dwt (each chunk added in sample order: one fp32 sum over the samples in
 * order, whatever the chunk). The sample loop runs on the team, or inside a parallel region on
 * the calling thread alone (a nested region's threads are numbered from 0 again, and the
 * per-thread buffers go by that number). */
static void wgrad_part(struct dt_bf16_conv *bf, const struct conv_bwd *a, int lo, int hi,
                       float *dwt, int slot0, int chunk)
{
    for (int c0 = lo; c0 < hi; c0 += chunk) {
        int n = hi - c0 < chunk ? hi - c0 : chunk;
        if (omp_in_parallel()) {
            for (int i = 0; i < n; i++)
                sample_backward(bf, a, c0 + i, slot0 + i);
        } else {
#pragma omp parallel for schedule(static) num_threads(team_size(bf->threads)) if (n > 1)
            for (int i = 0; i < n; i++)
                sample_backward(bf, a, c0 + i, slot0 + i);
        }
        wgrad_chunk(bf, slot0, n, dwt, c0 > lo);
    }
}

/* The tile-major weight gradient of the call's count samples (WGRAD_PARTS): in dwt, or in
 * dwt2 alone for a single sample. */
static const float *weight_grad_parts(struct dt_bf16_conv *bf, const struct conv_bwd *a, int count)
{
    int half = count / 2;
    if (team_size(bf->threads) == WGRAD_PARTS && half > 0) {
#pragma omp parallel num_threads(WGRAD_PARTS)
        for (int p = omp_get_thread_num(); p < WGRAD_PARTS; p += omp_get_num_threads())
            wgrad_part(bf, a, p ? half : 0, p ? count : half, p ? bf->dwt2 : bf->dwt,
                       p * (WGRAD_CHUNK / WGRAD_PARTS), WGRAD_CHUNK / WGRAD_PARTS);
    } else {
        wgrad_part(bf, a, 0, half, bf->dwt, 0, WGRAD_CHUNK);
        wgrad_part(bf, a, half, count, bf->dwt2, 0, WGRAD_CHUNK);
    }
    if (half == 0)
        return bf->dwt2;
    size_t n = bf->stride2 ? bf->g2.dwt : bf->g.dwt;
    for (size_t e = 0; e < n; e++)
        bf->dwt[e] += bf->dwt2[e];
    return bf->dwt;
}

void dt_bf16_conv_backward(struct dt_bf16_conv *bf, const float *x, bool x_bf16,
                           const struct dt_bn_relu *x_bn, const float *dy,
                           const struct dt_bn_grad *bn, const struct dt_pool_grad *pool, float *dx,
                           const float *relu_x, const float *extra, const struct dt_dx_sums *sums,
                           unsigned even, int b0, int count, float *g, bool bias)
{
    const struct dt_conv_shape *s = &bf->s;
    bind_scratch(bf);
    bf->x_bf16 = x_bf16;
    bf->x_bn = x_bn;
    size_t nw = (size_t)s->k * s->c * s->kh * s->kw;
    if (bf->stem) {
        stem_backward(bf, x, dy, bn, pool, dx, relu_x, extra, b0, count, g, bias);
    } else if (count == 0) {
        memset(g, 0, nw * sizeof *g);
    } else {
        struct conv_bwd a = {
            .x = x,
            .x_bf16 = x_bf16,
            .dy = dy,
            .bn = bn,
            .pool = pool,
            .dx = dx,
            .relu_x = relu_x,
            .extra = extra,
            .sums = sums,
            .bias = bias,
            .unpool = pool && !bf->stride2 && dt_conv_bf16_unpool_fits(&bf->g, pool),
            .bn_laid = bn != NULL,
            .even = even,
            .b0 = b0,
        };
        const float *dwt = weight_grad_parts(bf, &a, count);
        if (bf->stride2)
            dt_conv_s2_bf16_weight_grad_unpack(s, &bf->g2, dwt, g);
        else
            dt_conv_bf16_weight_grad_unpack(s, &bf->g, dwt, g);
    }
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

/* The forward runs transposed, y^T [out x rows] = W x^T, so that W is A: its pack is then a
 * plain row conversion, made with the input gradient's B (W, K = out) in the same pass over
 * the fp32 weights (dt_bf16_pack_rows_both). Each C element sums the same products in the same
 * order either way round, so the bits are those of y = x W^T. */
struct dt_bf16_linear {
    bool tiles;
    enum dt_bf16_path path;
    char note[112];
    int in, out, max_batch;
    /* Kept from a training forward to its backward (each packed once a step): */
    dt_bf16 *wa; /* A = W [out x in], the forward's */
    dt_bf16 *wb; /* B = W [out x in] with K = out, the input gradient's */
    size_t wa_elems, wb_elems;
    /* In the model's call scratch, bound by each call (forward's and backward's overlap): */
    struct dt_call_scratch *scratch;
    size_t xt_bytes, ct_bytes, a_bytes, b_bytes, a2_bytes;
    dt_bf16 *xt; /* forward: B = x^T [in x rows] */
    float *ct;   /* forward: y^T [out x rows], bias first */
    dt_bf16 *a;  /* backward: A = dy^T [out x rows] */
    dt_bf16 *b;  /* backward: B = x [rows x in] for the weight gradient */
    dt_bf16 *a2; /* backward: A = dy [rows x out] for the input gradient */
};

static size_t forward_bytes(const struct dt_bf16_linear *bf)
{
    return aligned(bf->xt_bytes) + bf->ct_bytes;
}

static size_t backward_bytes(const struct dt_bf16_linear *bf)
{
    return aligned(bf->a_bytes) + aligned(bf->b_bytes) + bf->a2_bytes;
}

int dt_bf16_linear_setup(struct dt_bf16_linear **out, int in, int out_features, int max_batch,
                         double *copy_bytes)
{
    struct dt_bf16_linear *bf = calloc(1, sizeof *bf);
    if (!bf)
        return dt_fail(DT_ERUNTIME, "out of memory");
    *out = bf;
    *bf = (struct dt_bf16_linear){
        .path = dt_isa_bf16_path(), .in = in, .out = out_features, .max_batch = max_batch};
    *copy_bytes = 0;
    if (bf->path == DT_BF16_REFERENCE) {
        emulated_note(bf->note, sizeof bf->note, bf->path, NULL);
        return 0;
    }
    bf->tiles = true;
    snprintf(bf->note, sizeof bf->note, "%s", dt_bf16_path_name(bf->path));
    bf->wa_elems = dt_bf16_packed_a_size(out_features, in);
    bf->wb_elems = dt_bf16_packed_b_size(out_features, in);
    *copy_bytes = (double)dt_bf16_linear_copy_bytes(bf);
    bf->xt_bytes = sizeof(dt_bf16) * dt_bf16_packed_b_size(in, max_batch);
    bf->ct_bytes = sizeof(float) * (size_t)out_features * max_batch;
    bf->a_bytes = sizeof(dt_bf16) * dt_bf16_packed_a_size(out_features, max_batch);
    bf->b_bytes = sizeof(dt_bf16) * dt_bf16_packed_b_size(max_batch, in);
    bf->a2_bytes = sizeof(dt_bf16) * dt_bf16_packed_a_size(max_batch, out_features);
    return 0;
}

size_t dt_bf16_linear_call_bytes(const struct dt_bf16_linear *bf)
{
    if (!bf->tiles)
        return 0;
    size_t f = forward_bytes(bf), b = backward_bytes(bf);
    return f > b ? f : b;
}

size_t dt_bf16_linear_copy_bytes(const struct dt_bf16_linear *bf)
{
    return bf->tiles ? aligned(bf->wa_elems * sizeof(dt_bf16)) + bf->wb_elems * sizeof(dt_bf16) : 0;
}

void dt_bf16_linear_init(struct dt_bf16_linear *bf, struct dt_call_scratch *scratch, void *copy)
{
    bf->scratch = scratch;
    if (!bf->tiles)
        return;
    bf->wa = copy;
    bf->wb = (dt_bf16 *)((unsigned char *)copy + aligned(bf->wa_elems * sizeof(dt_bf16)));
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

void dt_bf16_linear_pack_weights(struct dt_bf16_linear *bf, const float *w, bool training)
{
    dt_bf16_pack_rows_both(bf->path, w, bf->out, bf->in, bf->wa, training ? bf->wb : NULL);
}

int dt_bf16_linear_pack_piece(const struct dt_bf16_linear *bf)
{
    return dt_bf16_pack_rows_piece(bf->out, bf->in);
}

void dt_bf16_linear_pack_rows(struct dt_bf16_linear *bf, const float *w, int r0, int r1)
{
    dt_bf16_pack_rows_range(bf->path, w, bf->out, bf->in, r0, r1, bf->wa, bf->wb);
}

void dt_bf16_linear_forward(struct dt_bf16_linear *bf, const float *x, const float *b, float *y,
                            int rows)
{
    unsigned char *base = dt_call_scratch_take(bf->scratch, forward_bytes(bf));
    bf->xt = (dt_bf16 *)base;
    bf->ct = (float *)(base + aligned(bf->xt_bytes));
    if (b)
        for (int o = 0; o < bf->out; o++)
            for (int r = 0; r < rows; r++)
                bf->ct[(size_t)o * rows + r] = b[o];
    dt_bf16_pack_b_rows_t(bf->path, x, rows, bf->in, bf->xt); /* (i, r) = x[r][i] */
    dt_gemm_bf16_on(bf->path, bf->out, rows, bf->in, bf->wa, bf->xt, bf->ct, rows, b != NULL);
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < bf->out; o++)
            y[(size_t)r * bf->out + o] = bf->ct[(size_t)o * rows + r];
}

void dt_bf16_linear_backward(struct dt_bf16_linear *bf, const float *x, const float *dy, float *dx,
                             int rows, float *g)
{
    unsigned char *base = dt_call_scratch_take(bf->scratch, backward_bytes(bf));
    bf->a = (dt_bf16 *)base;
    bf->b = (dt_bf16 *)(base + aligned(bf->a_bytes));
    bf->a2 = (dt_bf16 *)(base + aligned(bf->a_bytes) + aligned(bf->b_bytes));
    /* dW [out x in] = dy^T [out x rows] x [rows x in] */
    dt_bf16_pack_a_f32(dy, 1, bf->out, bf->out, rows, bf->a);
    dt_bf16_pack_rows_both(bf->path, x, rows, bf->in, NULL, bf->b); /* rows the depth */
    if (rows > 0)
        dt_gemm_bf16_on(bf->path, bf->out, bf->in, rows, bf->a, bf->b, g, bf->in, false);
    else
        memset(g, 0, (size_t)bf->out * bf->in * sizeof *g);
    if (!dx || rows == 0)
        return;
    /* dx [rows x in] = dy [rows x out] x W [out x in] */
    dt_bf16_pack_a_f32(dy, bf->out, 1, rows, bf->out, bf->a2);
    dt_gemm_bf16_on(bf->path, rows, bf->in, bf->out, bf->a2, bf->wb, dx, bf->in, false);
}

/* Layouts, packing and the reference for the bf16 convolution (conv_bf16.h); the tile kernel
 * is conv_bf16.isa.c. */
#include "nn/kernels/bf16/conv_bf16.h"

#include <stdint.h>
#include <string.h>

#include "nn/kernels/fp32/pool.h" /* dt_pool2x2_window */
#include "util/err.h"

#define TILE_ELEMS 512

int dt_conv_bf16_geometry(const struct dt_conv_shape *s, struct dt_conv_bf16_geom *g)
{
    if (s->stride != 1 || s->c < 1 || s->k < 1 || s->kh < 1 || s->kw < 1 || s->pad < 0 ||
        s->h + 2 * s->pad < s->kh || s->w + 2 * s->pad < s->kw)
        return dt_fail(DT_EUSAGE,
                       "bf16 conv: shape %dx%dx%d, kernel %dx%d, stride %d, pad %d not "
                       "supported (stride 1 and a non-empty output needed)",
                       s->c, s->h, s->w, s->kh, s->kw, s->stride, s->pad);
    memset(g, 0, sizeof *g);
    g->cpad = (s->c + 31) / 32 * 32;
    g->hp = s->h + 2 * s->pad;
    g->wp = s->w + 2 * s->pad;
    g->oh = g->hp - s->kh + 1;
    g->ow = g->wp - s->kw + 1;
    g->q = g->oh * g->wp;
    g->qpad = (g->q + 15) / 16 * 16;
    /* The last tile of positions reads up to qpad - 1, shifted by the largest offset. */
    g->positions = g->qpad + (s->kh - 1) * g->wp + s->kw - 1;
    if (g->positions < g->hp * g->wp)
        g->positions = g->hp * g->wp;
    g->xv = (size_t)g->cpad * g->positions;
    g->yq = (size_t)s->k * g->qpad;
    g->tap_pairs = s->c <= 16;
    g->steps = g->tap_pairs ? s->kh * ((s->kw + 1) / 2) : s->kh * s->kw * (g->cpad / 32);
    /* The channels-last packing keeps one tap per step: room for either. */
    g->wpack = dt_bf16_packed_a_size(s->k, s->kh * s->kw * g->cpad);
    g->ycl = (size_t)((s->k + 15) / 16 * 16) * g->qpad;
    g->qrow = (g->q + 31) / 32 * 32;
    g->c16 = (s->c + 15) / 16 * 16;
    /* The odd copy's last pair starts at qrow - 1 + the largest shift. */
    g->pairs = (g->qrow + (s->kh - 1) * g->wp + s->kw - 1) / 2 + 1;
    /* A tiles read dY in place, 16 channel rows at a time: rows up to the next 16 are zero. */
    g->dyq = (size_t)((s->k + 15) / 16 * 16) * g->qrow;
    g->xt = (size_t)g->pairs * g->c16 * 2;
    g->dwt = (size_t)s->k * s->kh * s->kw * g->c16;
    return 0;
}

/* K step kt of a packed weight matrix: kernel tap (i, j) and the first of its 32 channels. */
static void tap_of(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g, int kt, int *i,
                   int *j, int *c0)
{
    int cb_count = g->cpad / 32, ij = kt / cb_count;
    *i = ij / s->kw;
    *j = ij % s->kw;
    *c0 = kt % cb_count * 32;
}

/* Weight (output k, input c, tap i, j) of the convolution s as bf16, zero in the padding of k
 * and c. `transposed`: w is the weights of the convolution s is the input gradient of,
 * [C][K][kh][kw], taken transposed and rotated by 180 degrees. */
static dt_bf16 tap_weight(const struct dt_conv_shape *s, const float *w, bool transposed, int k,
                          int c, int i, int j)
{
    if (k >= s->k || c >= s->c)
        return 0;
    size_t at = transposed
                    ? (((size_t)c * s->k + k) * s->kh + s->kh - 1 - i) * s->kw + s->kw - 1 - j
                    : (((size_t)k * s->c + c) * s->kh + i) * s->kw + j;
    return dt_bf16_from_f32(w[at]);
}

/* Packs the weights as A: output channels are rows, the steps' (i, j, c) the depth; with
 * tap_pairs a step's depth 16-31 is the next tap's channels (zero past the kernel's edge). */
static void pack_weights(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                         const float *w, bool transposed, dt_bf16 *wp)
{
    int mt_count = (s->k + 15) / 16;
    for (int mt = 0; mt < mt_count; mt++)
        for (int kt = 0; kt < g->steps; kt++, wp += TILE_ELEMS) {
            int plane0, offset;
            dt_conv_bf16_step(s, g, kt, &plane0, &offset);
            int i = offset / g->wp, j = offset % g->wp;
            for (int r = 0; r < 16; r++)
                for (int col = 0; col < 32; col++) {
                    int c = g->tap_pairs ? col % 16 : plane0 * 2 + col;
                    int jj = g->tap_pairs ? j + col / 16 : j;
                    wp[r * 32 + col] =
                        jj < s->kw ? tap_weight(s, w, transposed, mt * 16 + r, c, i, jj) : 0;
                }
        }
}

void dt_conv_bf16_pack_weights(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                               const float *w, dt_bf16 *wp)
{
    pack_weights(s, g, w, false, wp);
}

void dt_conv_bf16_input_grad_shape(const struct dt_conv_shape *s, struct dt_conv_shape *t)
{
    int oh = s->h + 2 * s->pad - s->kh + 1, ow = s->w + 2 * s->pad - s->kw + 1;
    *t = (struct dt_conv_shape){.n = s->n,
                                .c = s->k,
                                .h = oh,
                                .w = ow,
                                .k = s->c,
                                .kh = s->kh,
                                .kw = s->kw,
                                .stride = 1,
                                .pad = s->kh - 1 - s->pad};
}

void dt_conv_bf16_pack_weights_input_grad(const struct dt_conv_shape *t,
                                          const struct dt_conv_bf16_geom *g, const float *w,
                                          dt_bf16 *wp)
{
    pack_weights(t, g, w, true, wp);
}

void dt_conv_bf16_pad_input_image(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                                  const void *x, bool x_bf16, const struct dt_bn_relu *bn,
                                  dt_bf16 *xv)
{
    size_t plane = (size_t)s->h * s->w, pair_plane = (size_t)g->positions * 2;
    /* The image rows are written whole, both channels of a pair together (contiguous stores);
     * an odd channel count's last pair has no second channel, which stays zero. */
    for (int p = 0; 2 * p < s->c; p++) {
        dt_bf16 *top = xv + p * pair_plane + (size_t)s->pad * g->wp * 2;
        /* tap_pairs: the row again, one position earlier, in plane 8 + p (a row starting at
         * position 0, pad 0, drops its first element there). */
        dt_bf16 *shifted = g->tap_pairs ? top + 8 * pair_plane - 2 : NULL;
        size_t c0 = 2 * p * plane;
        bool c1 = 2 * p + 1 < s->c;
        for (int h = 0; h < s->h; h++) {
            dt_bf16 *out = top + ((size_t)h * g->wp + s->pad) * 2;
            size_t r0 = c0 + (size_t)h * s->w, r1 = r0 + plane;
            for (int w = 0; w < s->w; w++) {
                out[2 * w] = dt_bf16_from_f32(dt_conv_bf16_input_at(x, x_bf16, bn, 2 * p, r0 + w));
                if (c1)
                    out[2 * w + 1] =
                        dt_bf16_from_f32(dt_conv_bf16_input_at(x, x_bf16, bn, 2 * p + 1, r1 + w));
            }
            if (shifted) {
                size_t first = (size_t)h * g->wp + s->pad, skip = first == 0 ? 2 : 0;
                memcpy(shifted + first * 2 + skip, out + skip,
                       ((size_t)s->w * 2 - skip) * sizeof *out);
            }
        }
    }
}

void dt_conv_bf16_pad_input(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                            const float *x, dt_bf16 *xv)
{
    memset(xv, 0, g->xv * sizeof *xv);
    dt_conv_bf16_pad_input_image(s, g, x, false, NULL, xv);
}

void dt_conv_bf16_pack_weights_cl(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                                  const float *w, dt_bf16 *wp)
{
    int kt_count = s->kh * s->kw * (g->cpad / 32), nt_count = (s->k + 15) / 16;
    for (int nt = 0; nt < nt_count; nt++)
        for (int kt = 0; kt < kt_count; kt++, wp += TILE_ELEMS) {
            int i, j, c0;
            tap_of(s, g, kt, &i, &j, &c0);
            for (int p = 0; p < 16; p++)
                for (int col = 0; col < 16; col++)
                    for (int half = 0; half < 2; half++)
                        wp[p * 32 + col * 2 + half] =
                            tap_weight(s, w, false, nt * 16 + col, c0 + 2 * p + half, i, j);
        }
}

void dt_conv_bf16_pad_input_cl(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                               const float *x, dt_bf16 *xc)
{
    memset(xc, 0, g->xv * sizeof *xc);
    size_t plane = (size_t)s->h * s->w;
    for (int h = 0; h < s->h; h++)
        for (int w = 0; w < s->w; w++) {
            size_t pos = (size_t)(h + s->pad) * g->wp + w + s->pad;
            for (int c = 0; c < s->c; c++)
                xc[((size_t)(c / 32) * g->positions + pos) * 32 + c % 32] =
                    dt_bf16_from_f32(x[c * plane + (size_t)h * s->w + w]);
        }
}

void dt_conv_bf16_compact_cl(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                             const float *yc, const float *b, float *y)
{
    for (int k = 0; k < s->k; k++) {
        float bias = b ? b[k] : 0.0f;
        const float *blk = yc + (size_t)(k / 16) * g->qpad * 16 + k % 16;
        for (int oh = 0; oh < g->oh; oh++)
            for (int ow = 0; ow < g->ow; ow++)
                y[((size_t)k * g->oh + oh) * g->ow + ow] =
                    blk[((size_t)oh * g->wp + ow) * 16] + bias;
    }
}

void dt_conv_bf16_forward_cl_on(enum dt_bf16_path p, const struct dt_conv_shape *s,
                                const struct dt_conv_bf16_geom *g, const dt_bf16 *xc,
                                const dt_bf16 *wp, float *yc)
{
    if (p == DT_BF16_AMX)
        dt_conv_bf16_forward_cl_amx(s, g, xc, wp, yc);
    else if (p == DT_BF16_AVX512BF16)
        dt_conv_bf16_forward_cl_avx512bf16(s, g, xc, wp, yc);
    else
        dt_conv_bf16_forward_cl_ctile(s, g, xc, wp, yc);
}

void dt_conv_bf16_compact(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                          const float *yq, const float *b, bool relu, bool stream,
                          enum dt_bf16_store store, void *y)
{
    (void)stream; /* a hint for the AVX-512 build's stores */
    for (int k = 0; k < s->k; k++) {
        float bias = b ? b[k] : 0.0f;
        for (int oh = 0; oh < g->oh; oh++) {
            const float *src = yq + (size_t)k * g->qpad + (size_t)oh * g->wp;
            size_t at = ((size_t)k * g->oh + oh) * g->ow;
            for (int ow = 0; ow < g->ow; ow++)
                dt_bf16_store_at(y, at + ow, src[ow] + bias, relu, store);
        }
    }
}

void dt_conv_bf16_compact_pool2x2(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                                  const float *yq, const float *b, float *py, int32_t *argmax)
{
    int poh = g->oh / 2, pow = g->ow / 2;
    for (int k = 0; k < s->k; k++) {
        float bias = b ? b[k] : 0.0f;
        for (int oy = 0; oy < poh; oy++) {
            const float *r0 = yq + (size_t)k * g->qpad + (size_t)2 * oy * g->wp, *r1 = r0 + g->wp;
            size_t at = ((size_t)k * poh + oy) * pow;
            for (int ox = 0; ox < pow; ox++) {
                float v[4]; /* compact()'s values: relu, then rounded */
                const float *src[4] = {r0 + 2 * ox, r0 + 2 * ox + 1, r1 + 2 * ox, r1 + 2 * ox + 1};
                for (int j = 0; j < 4; j++) {
                    float x = *src[j] + bias;
                    v[j] = dt_bf16_round(x > 0.0f ? x : 0.0f);
                }
                int best;
                py[at + ox] = dt_pool2x2_window(v[0], v[1], v[2], v[3], 2 * oy * g->ow + 2 * ox,
                                                g->ow, &best);
                argmax[at + ox] = best;
            }
        }
    }
}

void dt_conv_bf16_compact_relu_below(const struct dt_conv_shape *t,
                                     const struct dt_conv_bf16_geom *g, const float *yq,
                                     const void *x, bool x_bf16, const struct dt_bn_relu *bn,
                                     const float *extra, bool round, float *dx,
                                     const struct dt_dx_sums *sums)
{
    for (int k = 0; k < t->k; k++) {
        double a[DT_BN_LANES] = {0}, q[DT_BN_LANES] = {0};
        double mean = sums ? (double)sums->mean[k] : 0.0;
        for (int oh = 0; oh < g->oh; oh++) {
            const float *src = yq + (size_t)k * g->qpad + (size_t)oh * g->wp;
            size_t at = ((size_t)k * g->oh + oh) * g->ow;
            /* a bit mask, not a branch (the mask is data: a branch mispredicts half the
             * time); x > 0 ? v : +0, the same bits */
            for (int ow = 0; ow < g->ow; ow++) {
                float v = round ? dt_bf16_round(src[ow]) : src[ow];
                if (extra)
                    v += extra[at + ow];
                float in = dt_conv_bf16_input_at(x, x_bf16, bn, k, at + ow);
                uint32_t bits, keep = 0u - (uint32_t)(in > 0.0f);
                memcpy(&bits, &v, sizeof bits);
                bits &= keep;
                memcpy(&v, &bits, sizeof bits);
                dx[at + ow] = v;
                if (sums)
                    dt_bn_lanes_add(a, q, (size_t)oh * g->ow + ow, dx[at + ow],
                                    dt_bf16_to_f32(sums->x[at + ow]), mean);
            }
        }
        if (sums) {
            sums->out[k] = dt_bn_lanes_total(a);
            sums->out[t->k + k] = dt_bn_lanes_total(q);
        }
    }
}

void dt_conv_bf16_dy_rows_image(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                                const float *dy, dt_bf16 *dyq)
{
    for (int k = 0; k < s->k; k++)
        for (int oh = 0; oh < g->oh; oh++) {
            const float *src = dy + ((size_t)k * g->oh + oh) * g->ow;
            dt_bf16 *dst = dyq + (size_t)k * g->qrow + (size_t)oh * g->wp;
            for (int ow = 0; ow < g->ow; ow++) /* inline: rows are short (8-32) */
                dst[ow] = dt_bf16_from_f32(src[ow]);
        }
}

void dt_conv_bf16_dy_rows(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                          const float *dy, dt_bf16 *dyq)
{
    memset(dyq, 0, g->dyq * sizeof *dyq);
    dt_conv_bf16_dy_rows_image(s, g, dy, dyq);
}

bool dt_conv_bf16_unpool_fits(const struct dt_conv_bf16_geom *g, const struct dt_pool_grad *pool)
{
    return pool->g.k == 2 && pool->g.stride == 2 && pool->g.pad == 0 && g->oh % 2 == 0 &&
           g->ow % 2 == 0 && pool->h == g->oh && pool->w == g->ow;
}

/* One sample's dY as the backward's operands (unpool_image, bn_dy_image): element (k, y, x),
 * value(src, k, y, x), rounded into the dY rows and, unless xv is NULL, into pad_input_image's
 * positions for t: channel k's half of pair k / 2, and with tap_pairs the same one position
 * earlier in plane 8 + k / 2 (none before position 0). */
static void dy_image(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                     const struct dt_conv_shape *t, const struct dt_conv_bf16_geom *gt,
                     float (*value)(const void *src, int k, int y, int x), const void *src,
                     dt_bf16 *dyq, dt_bf16 *xv)
{
    size_t pair_plane = (size_t)gt->positions * 2;
    for (int k = 0; k < s->k; k++)
        for (int y = 0; y < g->oh; y++) {
            dt_bf16 *row = dyq + (size_t)k * g->qrow + (size_t)y * g->wp;
            size_t pos = (size_t)(t->pad + y) * gt->wp + t->pad;
            dt_bf16 *pairs = xv ? xv + (size_t)(k / 2) * pair_plane + pos * 2 + k % 2 : NULL;
            for (int x = 0; x < g->ow; x++) {
                dt_bf16 v = dt_bf16_from_f32(value(src, k, y, x));
                row[x] = v;
                if (!pairs)
                    continue;
                pairs[2 * x] = v;
                if (gt->tap_pairs && pos + x > 0)
                    pairs[8 * pair_plane + 2 * x - 2] = v;
            }
        }
}

/* One sample's pool data: its first window, the pool. */
struct pool_sample {
    const struct dt_pool_grad *p;
    size_t at;
};

/* dY at (k, y, x) as dt_maxpool_backward writes it: the window's dy, + 0, where (y, x) is its
 * winner and its pooled value is > 0; +0 elsewhere. */
static float unpooled_at(const void *src, int k, int y, int x)
{
    const struct pool_sample *ps = src;
    const struct dt_pool_grad *p = ps->p;
    size_t o = ps->at + ((size_t)k * p->g.oh + y / 2) * p->g.ow + x / 2;
    bool on = p->argmax[o] == y * p->w + x && p->relu_y[o] > 0.0f;
    return on ? 0.0f + p->dy[o] : 0.0f;
}

void dt_conv_bf16_unpool_image(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                               const struct dt_conv_shape *t, const struct dt_conv_bf16_geom *gt,
                               const struct dt_pool_grad *pool, int sample, dt_bf16 *dyq,
                               dt_bf16 *xv)
{
    struct pool_sample ps = {pool, (size_t)sample * pool->c * pool->g.oh * pool->g.ow};
    dy_image(s, g, t, gt, unpooled_at, &ps, dyq, xv);
}

/* One sample's dy [k][oh][ow] and the batchnorm above's input (its x or xh from the sample's
 * offset on). */
struct bn_sample {
    const struct dt_bn_grad *bn;
    const float *dy;
    size_t at;
    int oh, ow;
};

/* The batchnorm's input gradient at (k, y, x): bn_grad.h's formula, its order of operations. */
static float bn_dy_at(const void *src, int k, int y, int x)
{
    const struct bn_sample *b = src;
    return dt_bn_grad_at(b->bn, k, b->at + ((size_t)k * b->oh + y) * b->ow + x, b->dy);
}

void dt_conv_bf16_bn_dy_image(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                              const struct dt_conv_shape *t, const struct dt_conv_bf16_geom *gt,
                              const struct dt_bn_grad *bn, const float *dy, int sample,
                              dt_bf16 *dyq, dt_bf16 *xv)
{
    struct bn_sample b = {bn, dy, (size_t)sample * s->k * g->oh * g->ow, g->oh, g->ow};
    dy_image(s, g, t, gt, bn_dy_at, &b, dyq, xv);
}

void dt_conv_bf16_position_pairs_image(const struct dt_conv_shape *s,
                                       const struct dt_conv_bf16_geom *g, const void *x,
                                       bool x_bf16, const struct dt_bn_relu *bn, dt_bf16 *even,
                                       dt_bf16 *odd)
{
    /* Each image pixel lands once in each copy. Positions walk the image row by row and the
     * channels innermost, so the writes of one position are adjacent (a position pair holds
     * its channels side by side). */
    size_t plane = (size_t)s->h * s->w;
    for (int h = 0; h < s->h; h++)
        for (int w = 0; w < s->w; w++) {
            int pos = (h + s->pad) * g->wp + w + s->pad;
            dt_bf16 *e = even + ((size_t)(pos / 2) * g->c16) * 2 + pos % 2;
            dt_bf16 *o =
                pos > 0 ? odd + ((size_t)((pos - 1) / 2) * g->c16) * 2 + (pos - 1) % 2 : NULL;
            size_t px = (size_t)h * s->w + w;
            for (int c = 0; c < s->c; c++) {
                dt_bf16 v =
                    dt_bf16_from_f32(dt_conv_bf16_input_at(x, x_bf16, bn, c, px + c * plane));
                e[2 * c] = v;
                if (o)
                    o[2 * c] = v;
            }
        }
}

void dt_conv_bf16_position_pairs(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                                 const float *x, dt_bf16 *even, dt_bf16 *odd)
{
    memset(even, 0, g->xt * sizeof *even);
    memset(odd, 0, g->xt * sizeof *odd);
    dt_conv_bf16_position_pairs_image(s, g, x, false, NULL, even, odd);
}

static void weight_grad_reference(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                                  int n, const dt_bf16 *dyq, const dt_bf16 *even,
                                  const dt_bf16 *odd, float *dwt, bool accumulate)
{
    (void)odd; /* the even copy holds every position */
    int taps = s->kh * s->kw;
    for (int k = 0; k < s->k; k++)
        for (int ij = 0; ij < taps; ij++)
            for (int c = 0; c < g->c16; c++) {
                int shift = ij / s->kw * g->wp + ij % s->kw;
                float sum = accumulate ? dwt[((size_t)k * taps + ij) * g->c16 + c] : 0.0f;
                for (int i = 0; i < n; i++)
                    for (int q = 0; q < g->qrow; q++) {
                        int pos = q + shift;
                        float xval = dt_bf16_to_f32(
                            even[i * g->xt + ((size_t)(pos / 2) * g->c16 + c) * 2 + pos % 2]);
                        sum += dt_bf16_to_f32(dyq[i * g->dyq + (size_t)k * g->qrow + q]) * xval;
                    }
                dwt[((size_t)k * taps + ij) * g->c16 + c] = sum;
            }
}

void dt_conv_bf16_weight_grad_on(enum dt_bf16_path p, const struct dt_conv_shape *s,
                                 const struct dt_conv_bf16_geom *g, int n, const dt_bf16 *dyq,
                                 const dt_bf16 *even, const dt_bf16 *odd, float *dwt,
                                 bool accumulate)
{
    if (p == DT_BF16_AMX)
        dt_conv_bf16_weight_grad_amx(s, g, n, dyq, even, odd, dwt, accumulate);
    else if (p == DT_BF16_AVX512BF16)
        dt_conv_bf16_weight_grad_avx512bf16(s, g, n, dyq, even, odd, dwt, accumulate);
    else if (p == DT_BF16_CTILE)
        dt_conv_bf16_weight_grad_ctile(s, g, n, dyq, even, odd, dwt, accumulate);
    else
        weight_grad_reference(s, g, n, dyq, even, odd, dwt, accumulate);
}

void dt_conv_bf16_weight_grad_unpack(const struct dt_conv_shape *s,
                                     const struct dt_conv_bf16_geom *g, const float *dwt, float *dw)
{
    int taps = s->kh * s->kw;
    for (int k = 0; k < s->k; k++)
        for (int c = 0; c < s->c; c++)
            for (int ij = 0; ij < taps; ij++)
                dw[((size_t)k * s->c + c) * taps + ij] = dwt[((size_t)k * taps + ij) * g->c16 + c];
}

/* fp32 sums of the bf16 values, in (i, j, c) order. */
static void forward_reference(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                              const dt_bf16 *xv, const dt_bf16 *wp, float *yq)
{
    for (int k = 0; k < s->k; k++)
        for (int q = 0; q < g->qpad; q++) {
            float sum = 0;
            for (int kt = 0; kt < g->steps; kt++) {
                int plane0, offset;
                dt_conv_bf16_step(s, g, kt, &plane0, &offset);
                int at = q + offset;
                const dt_bf16 *a = wp + ((size_t)(k / 16) * g->steps + kt) * TILE_ELEMS;
                for (int c = 0; c < 32; c++) {
                    float xval = dt_bf16_to_f32(
                        xv[((size_t)(plane0 + c / 2) * g->positions + at) * 2 + c % 2]);
                    sum += dt_bf16_to_f32(a[(k % 16) * 32 + c]) * xval;
                }
            }
            yq[(size_t)k * g->qpad + q] = sum;
        }
}

void dt_conv_bf16_forward_on(enum dt_bf16_path p, const struct dt_conv_shape *s,
                             const struct dt_conv_bf16_geom *g, const dt_bf16 *xv,
                             const dt_bf16 *wp, float *yq)
{
    switch (p) {
    case DT_BF16_AMX:
        dt_conv_bf16_forward_amx(s, g, xv, wp, yq);
        break;
    case DT_BF16_AVX512BF16:
        dt_conv_bf16_forward_avx512bf16(s, g, xv, wp, yq);
        break;
    case DT_BF16_CTILE:
        dt_conv_bf16_forward_ctile(s, g, xv, wp, yq);
        break;
    default:
        forward_reference(s, g, xv, wp, yq);
        break;
    }
}

void dt_conv_bf16_bias_parts(const dt_bf16 *dyq, int k, int qrow, float *part)
{
    for (int c = 0; c < k; c++) {
        const dt_bf16 *row = dyq + (size_t)c * qrow;
        float lane[16] = {0};
        for (int q = 0; q < qrow; q += 16)
            for (int j = 0; j < 16; j++)
                lane[j] += dt_bf16_to_f32(row[q + j]);
        for (int w = 8; w > 0; w /= 2)
            for (int j = 0; j < w; j++)
                lane[j] += lane[j + w];
        part[c] = lane[0];
    }
}

/* The plain C layout passes above, as conv_bf16.h's table. */
static const struct dt_conv_bf16_layout plain_c = {
    .name = "plain C",
    .pad_input_image = dt_conv_bf16_pad_input_image,
    .compact = dt_conv_bf16_compact,
    .compact_pool2x2 = dt_conv_bf16_compact_pool2x2,
    .compact_relu_below = dt_conv_bf16_compact_relu_below,
    .dy_rows_image = dt_conv_bf16_dy_rows_image,
    .position_pairs_image = dt_conv_bf16_position_pairs_image,
    .bias_parts = dt_conv_bf16_bias_parts,
    .unpool_image = dt_conv_bf16_unpool_image,
    .bn_dy_image = dt_conv_bf16_bn_dy_image,
};

const struct dt_conv_bf16_layout *dt_conv_bf16_layout_on(enum dt_bf16_path p)
{
    return p == DT_BF16_AMX          ? &dt_conv_bf16_layout_amx
           : p == DT_BF16_AVX512BF16 ? &dt_conv_bf16_layout_avx512bf16
                                     : &plain_c;
}

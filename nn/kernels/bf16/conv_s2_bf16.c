/* Geometry, tap tables, layouts and packing of the stride-2 bf16 convolution
 * (conv_s2_bf16.h); the tile kernels are conv_s2_bf16.isa.c. */
#include "nn/kernels/bf16/conv_s2_bf16.h"

#include <stdint.h>
#include <string.h>

#include "util/err.h"

#define TILE_ELEMS 512

static int round_up(int v, int to)
{
    return (v + to - 1) / to * to;
}

static int max_int(int a, int b)
{
    return a > b ? a : b;
}

/* The dY pair planes and tap tables of the input gradient's four parity planes. */
static void input_grad_geometry(const struct dt_conv_shape *s, struct dt_conv_s2_geom *g)
{
    g->wd = g->wq + g->tw - 1;
    g->qd = g->r * g->wd;
    g->qdpad = round_up(g->qd, 16);
    g->positions_d =
        max_int((g->r + g->th - 1) * g->wd, g->qdpad + (g->th - 1) * g->wd + g->tw - 1);
    g->dv = (size_t)g->kpad * g->positions_d;
    g->dxq = (size_t)4 * s->c * g->qdpad;
    for (int pl = 0; pl < 4; pl++) {
        int a = pl / 2, b = pl % 2, u = 0;
        for (int i = 0; a + 2 * i < s->kh; i++)
            for (int j = 0; b + 2 * j < s->kw; j++)
                g->dx_at[pl][u++] = ((long)(g->th - 1 - i) * g->wd + (g->tw - 1 - j)) * 2;
        g->dx_taps[pl] = u;
        g->dx_wp[pl] = g->wpack_dx;
        g->wpack_dx += dt_bf16_packed_a_size(s->c, u * g->kpad);
    }
}

int dt_conv_s2_bf16_geometry(const struct dt_conv_shape *s, struct dt_conv_s2_geom *g)
{
    if (s->stride != 2 || s->c < 1 || s->k < 1 || s->kh < 1 || s->kw < 1 ||
        s->kh > DT_CONV_S2_MAX_KERNEL || s->kw > DT_CONV_S2_MAX_KERNEL || s->pad < 0 ||
        s->pad >= s->kh || s->pad >= s->kw || s->h + 2 * s->pad < s->kh ||
        s->w + 2 * s->pad < s->kw)
        return dt_fail(DT_EUSAGE,
                       "bf16 stride-2 conv: shape %dx%dx%d, kernel %dx%d, stride %d, pad %d not "
                       "supported (stride 2, pad < kernel <= %d and a non-empty output needed)",
                       s->c, s->h, s->w, s->kh, s->kw, s->stride, s->pad, DT_CONV_S2_MAX_KERNEL);
    memset(g, 0, sizeof *g);
    g->cpad = round_up(s->c, 32);
    g->kpad = round_up(s->k, 32);
    g->c16 = round_up(s->c, 16);
    g->hp = s->h + 2 * s->pad;
    g->wp = s->w + 2 * s->pad;
    g->oh = (g->hp - s->kh) / 2 + 1;
    g->ow = (g->wp - s->kw) / 2 + 1;
    g->r = (g->hp + 1) / 2;
    g->wq = (g->wp + 1) / 2;
    g->th = (s->kh + 1) / 2;
    g->tw = (s->kw + 1) / 2;
    g->taps = s->kh * s->kw;
    g->q = g->oh * g->wq;
    g->qpad = round_up(g->q, 16);
    int max_shift = (s->kh - 1) / 2 * g->wq + (s->kw - 1) / 2;
    /* The last tile of positions reads up to qpad - 1, shifted by the largest offset. */
    g->positions = max_int(g->r * g->wq, g->qpad + max_shift);
    g->xv = (size_t)4 * g->cpad * g->positions;
    g->yq = (size_t)s->k * g->qpad;
    g->wpack = dt_bf16_packed_a_size(s->k, g->taps * g->cpad);
    g->qrow = round_up(g->q, 32);
    /* The odd copy's last pair starts at qrow - 1 + the largest shift; every image position
     * of a plane has its pair. */
    g->pairs = max_int((g->qrow + max_shift) / 2 + 1, g->r * g->wq / 2 + 1);
    g->dyq = (size_t)round_up(s->k, 16) * g->qrow;
    g->xt = (size_t)g->pairs * g->c16 * 2;
    g->xp = 8 * g->xt;
    g->dwt = (size_t)s->k * g->taps * g->c16;
    for (int ij = 0; ij < g->taps; ij++) {
        int i = ij / s->kw, j = ij % s->kw, plane = i % 2 * 2 + j % 2;
        int shift = i / 2 * g->wq + j / 2;
        g->planes |= 1u << plane;
        g->copies |= 1u << (plane * 2 + shift % 2);
        g->fwd_at[ij] = (long)plane * g->cpad * g->positions + (long)shift * 2;
        g->wg_at[ij] = (long)(plane * 2 + shift % 2) * (long)g->xt;
        g->wg_shift[ij] = shift;
    }
    input_grad_geometry(s, g);
    return 0;
}

void dt_conv_s2_bf16_pack_weights(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                                  const float *w, dt_bf16 *wp)
{
    int cb_count = g->cpad / 32, kt_count = g->taps * cb_count, mt_count = (s->k + 15) / 16;
    for (int mt = 0; mt < mt_count; mt++)
        for (int kt = 0; kt < kt_count; kt++, wp += TILE_ELEMS) {
            int ij = kt / cb_count, c0 = kt % cb_count * 32;
            for (int r = 0; r < 16; r++)
                for (int col = 0; col < 32; col++) {
                    int k = mt * 16 + r, c = c0 + col;
                    wp[r * 32 + col] =
                        k < s->k && c < s->c
                            ? dt_bf16_from_f32(w[((size_t)k * s->c + c) * g->taps + ij])
                            : 0;
                }
        }
}

void dt_conv_s2_bf16_pack_weights_input_grad(const struct dt_conv_shape *s,
                                             const struct dt_conv_s2_geom *g, const float *w,
                                             dt_bf16 *wpi)
{
    int kb_count = g->kpad / 32, mt_count = (s->c + 15) / 16;
    for (int pl = 0; pl < 4; pl++) {
        int a = pl / 2, b = pl % 2, kt_count = g->dx_taps[pl] * kb_count, tw = (s->kw - b + 1) / 2;
        dt_bf16 *wp = wpi + g->dx_wp[pl];
        for (int mt = 0; mt < mt_count; mt++)
            for (int kt = 0; kt < kt_count; kt++, wp += TILE_ELEMS) {
                /* tap u = (i', j') in the order of dx_at: i = a + 2 i', j = b + 2 j' */
                int u = kt / kb_count, k0 = kt % kb_count * 32;
                int i = a + 2 * (u / tw), j = b + 2 * (u % tw);
                for (int r = 0; r < 16; r++)
                    for (int col = 0; col < 32; col++) {
                        int c = mt * 16 + r, k = k0 + col;
                        wp[r * 32 + col] =
                            c < s->c && k < s->k
                                ? dt_bf16_from_f32(
                                      w[(((size_t)k * s->c + c) * s->kh + i) * s->kw + j])
                                : 0;
                    }
            }
    }
}

/* The first w of [0, W) whose padded column has parity b. */
static int first_of_parity(int pad, int b)
{
    return ((b - pad) % 2 + 2) % 2;
}

void dt_conv_s2_bf16_parity_planes_image(const struct dt_conv_shape *s,
                                         const struct dt_conv_s2_geom *g, const void *x,
                                         bool x_bf16, dt_bf16 *xv)
{
    size_t plane = (size_t)s->h * s->w;
    for (int p = 0; 2 * p < s->c; p++) {
        size_t c0 = 2 * p * plane, c1 = c0 + plane;
        bool second = 2 * p + 1 < s->c;
        for (int h = 0; h < s->h; h++) {
            int hp = h + s->pad;
            for (int b = 0; b < 2; b++) {
                int pl = hp % 2 * 2 + b;
                if (!(g->planes & 1u << pl))
                    continue;
                dt_bf16 *out = xv + (size_t)pl * g->cpad * g->positions +
                               ((size_t)p * g->positions + (size_t)(hp / 2) * g->wq) * 2;
                size_t row = (size_t)h * s->w;
                for (int w = first_of_parity(s->pad, b); w < s->w; w += 2) {
                    int col = (w + s->pad) / 2;
                    out[2 * col] = dt_bf16_from_f32(dt_act_at(x, x_bf16, c0 + row + w));
                    if (second)
                        out[2 * col + 1] = dt_bf16_from_f32(dt_act_at(x, x_bf16, c1 + row + w));
                }
            }
        }
    }
}

/* The build of the tap kernels for path p (every tile build; ctile for the rest, which tests
 * force). */
typedef void taps_forward_fn(int m, int depth, int ntaps, const long *at, long plane, int qpad,
                             const dt_bf16 *a, const dt_bf16 *b, float *y);
typedef void taps_weight_grad_fn(int m, int c16, int ntaps, const long *at, const int *shift,
                                 int qrow, int n, const dt_bf16 *a, size_t astep, const dt_bf16 *b,
                                 size_t bstep, float *dwt, bool accumulate);

static taps_forward_fn *taps_forward(enum dt_bf16_path p)
{
    return p == DT_BF16_AMX          ? dt_conv_s2_taps_forward_amx
           : p == DT_BF16_AVX512BF16 ? dt_conv_s2_taps_forward_avx512bf16
                                     : dt_conv_s2_taps_forward_ctile;
}

static taps_weight_grad_fn *taps_weight_grad(enum dt_bf16_path p)
{
    return p == DT_BF16_AMX          ? dt_conv_s2_taps_weight_grad_amx
           : p == DT_BF16_AVX512BF16 ? dt_conv_s2_taps_weight_grad_avx512bf16
                                     : dt_conv_s2_taps_weight_grad_ctile;
}

void dt_conv_s2_bf16_forward_on(enum dt_bf16_path p, const struct dt_conv_shape *s,
                                const struct dt_conv_s2_geom *g, const dt_bf16 *xv,
                                const dt_bf16 *wp, float *yq)
{
    taps_forward(p)(s->k, g->cpad, g->taps, g->fwd_at, g->positions, g->qpad, wp, xv, yq);
}

void dt_conv_s2_bf16_compact(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                             const float *yq, const float *b, bool relu, enum dt_bf16_store store,
                             void *y)
{
    for (int k = 0; k < s->k; k++) {
        float bias = b ? b[k] : 0.0f;
        for (int oh = 0; oh < g->oh; oh++) {
            const float *src = yq + (size_t)k * g->qpad + (size_t)oh * g->wq;
            size_t at = ((size_t)k * g->oh + oh) * g->ow;
            for (int ow = 0; ow < g->ow; ow++)
                dt_bf16_store_at(y, at + ow, src[ow] + bias, relu, store);
        }
    }
}

void dt_conv_s2_bf16_dy_planes_image(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                                     const float *dy, dt_bf16 *dv)
{
    /* Without padding columns (wd == OW: 1x1) a channel pair is one run (as dy_rows) */
    size_t plane = (size_t)g->oh * g->ow;
    int rows = g->wd == g->ow ? 1 : g->oh, len = g->wd == g->ow ? g->oh * g->ow : g->ow;
    for (int p = 0; 2 * p < s->k; p++) {
        const float *c0 = dy + 2 * p * plane, *c1 = 2 * p + 1 < s->k ? c0 + plane : NULL;
        for (int oh = 0; oh < rows; oh++) {
            dt_bf16 *out =
                dv +
                ((size_t)p * g->positions_d + (size_t)(oh + g->th - 1) * g->wd + g->tw - 1) * 2;
            const float *r0 = c0 + (size_t)oh * g->ow, *r1 = c1 ? c1 + (size_t)oh * g->ow : NULL;
            for (int ow = 0; ow < len; ow++) {
                out[2 * ow] = dt_bf16_from_f32(r0[ow]);
                if (r1)
                    out[2 * ow + 1] = dt_bf16_from_f32(r1[ow]);
            }
        }
    }
}

void dt_conv_s2_bf16_bn_dy_image(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                                 const struct dt_bn_grad *bn, const float *dy, int sample,
                                 dt_bf16 *dyq, dt_bf16 *dv)
{
    size_t plane = (size_t)g->oh * g->ow, at = (size_t)sample * s->k * plane;
    for (int k = 0; k < s->k; k++)
        for (int oh = 0; oh < g->oh; oh++) {
            dt_bf16 *row = dyq + (size_t)k * g->qrow + (size_t)oh * g->wq;
            dt_bf16 *pairs = dv ? dv +
                                      ((size_t)(k / 2) * g->positions_d +
                                       (size_t)(oh + g->th - 1) * g->wd + g->tw - 1) *
                                          2 +
                                      k % 2
                                : NULL;
            for (int ow = 0; ow < g->ow; ow++) {
                size_t i = at + (size_t)k * plane + (size_t)oh * g->ow + ow;
                dt_bf16 v = dt_bf16_from_f32(dt_bn_grad_at(bn, k, i, dy));
                row[ow] = v;
                if (pairs)
                    pairs[2 * ow] = v;
            }
        }
}

void dt_conv_s2_bf16_input_grad_on(enum dt_bf16_path p, const struct dt_conv_shape *s,
                                   const struct dt_conv_s2_geom *g, const dt_bf16 *dv,
                                   const dt_bf16 *wpi, float *dxq)
{
    for (int pl = 0; pl < 4; pl++) {
        if (!g->dx_taps[pl])
            continue; /* compact_dx writes its zeros */
        float *out = dxq + (size_t)pl * s->c * g->qdpad;
        taps_forward(p)(s->c, g->kpad, g->dx_taps[pl], g->dx_at[pl], g->positions_d, g->qdpad,
                        wpi + g->dx_wp[pl], dv, out);
    }
}

/* One value of dx through the relu below's backward, its bits: (dy + extra), then
 * x > 0 ? v : +0 as a bit mask, not a branch (the mask is data: a branch mispredicts half the
 * time). */
static inline float relu_below(float v, float x)
{
    uint32_t bits, keep = 0u - (uint32_t)(x > 0.0f);
    memcpy(&bits, &v, sizeof bits);
    bits &= keep;
    memcpy(&v, &bits, sizeof bits);
    return v;
}

/* The parity plane holding dX's even rows' even columns: padded row and column 2r + pad. */
static int even_plane(const struct dt_conv_shape *s)
{
    return s->pad % 2 * 3;
}

bool dt_conv_s2_bf16_dx_even_only(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g)
{
    for (int pl = 0; pl < 4; pl++)
        if (pl != even_plane(s) && g->dx_taps[pl])
            return false;
    return g->dx_taps[even_plane(s)] > 0;
}

void dt_conv_s2_bf16_compact_dx_even(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                                     const float *dxq, float *dx)
{
    int eh = (s->h + 1) / 2, ew = (s->w + 1) / 2, pl = even_plane(s);
    for (int c = 0; c < s->c; c++)
        for (int r = 0; r < eh; r++)
            memcpy(dx + ((size_t)c * eh + r) * ew,
                   dxq + ((size_t)pl * s->c + c) * g->qdpad + (size_t)(r + s->pad / 2) * g->wd +
                       s->pad / 2,
                   (size_t)ew * sizeof *dx);
}

void dt_conv_s2_bf16_compact_dx(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                                const float *dxq, const void *relu_x, bool x_bf16,
                                const float *extra, bool extra_even, bool round, float *dx)
{
    /* A row of dx interleaves two parity planes' rows: even columns w = 2k from the plane of
     * padded column parity pad % 2 at column k + pad / 2, odd ones from the other at
     * k + (pad + 1) / 2; a plane no tap reaches gives zeros. Written in order, two columns
     * at a time (thread CPU time under load: 1.1-1.5x faster than a pass per parity writing
     * every other column). */
    int odd = s->w / 2, even = s->w - odd;
    for (int c = 0; c < s->c; c++)
        for (int h = 0; h < s->h; h++) {
            int hp = h + s->pad;
            size_t at = ((size_t)c * s->h + h) * s->w;
            const float *src[2]; /* even and odd columns */
            for (int b = 0; b < 2; b++) {
                int pl = hp % 2 * 2 + (s->pad + b) % 2;
                src[b] = g->dx_taps[pl] ? dxq + ((size_t)pl * s->c + c) * g->qdpad +
                                              (size_t)(hp / 2) * g->wd + (s->pad + b) / 2
                                        : NULL;
            }
            const float *a = src[0], *b = src[1];
            const void *x = relu_x ? dt_act_from(relu_x, x_bf16, at) : NULL;
            /* extra_even: an even row's even columns at ee (the odd ones 0), an odd row 0 */
            bool with_extra = relu_x && extra;
            const float *e = with_extra && !extra_even ? extra + at : NULL;
            const float *ee = with_extra && extra_even && h % 2 == 0
                                  ? extra + ((size_t)c * ((s->h + 1) / 2) + h / 2) * even
                                  : NULL;
            float *d = dx + at;
            if (!a && !b && !with_extra) { /* a row no tap reaches (1x1: every other one) */
                memset(d, 0, (size_t)s->w * sizeof *d);
                continue;
            }
            for (int k = 0; k < odd; k++) {
                float v0 = a ? a[k] : 0.0f, v1 = b ? b[k] : 0.0f;
                if (round)
                    v0 = dt_bf16_round(v0), v1 = dt_bf16_round(v1);
                if (with_extra) {
                    v0 += e ? e[2 * k] : ee ? ee[k] : 0.0f;
                    v1 += e ? e[2 * k + 1] : 0.0f;
                }
                if (x) {
                    v0 = relu_below(v0, dt_act_at(x, x_bf16, 2 * k));
                    v1 = relu_below(v1, dt_act_at(x, x_bf16, 2 * k + 1));
                }
                d[2 * k] = v0;
                d[2 * k + 1] = v1;
            }
            if (even > odd) { /* the last, even column of an odd width */
                float v = a ? a[odd] : 0.0f;
                if (round)
                    v = dt_bf16_round(v);
                if (with_extra)
                    v += e ? e[2 * odd] : ee ? ee[odd] : 0.0f;
                d[2 * odd] = x ? relu_below(v, dt_act_at(x, x_bf16, 2 * odd)) : v;
            }
        }
}

void dt_conv_s2_bf16_dy_rows_image(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                                   const float *dy, dt_bf16 *dyq)
{
    /* Without junk columns (wq == OW: 1x1 pad 0) a channel is one run: one loop, not OH
     * short ones (rows of 7-16 cost their loop overhead). */
    int rows = g->wq == g->ow ? 1 : g->oh, len = g->wq == g->ow ? g->q : g->ow;
    for (int k = 0; k < s->k; k++)
        for (int oh = 0; oh < rows; oh++) {
            const float *src = dy + ((size_t)k * g->oh + oh) * g->ow;
            dt_bf16 *dst = dyq + (size_t)k * g->qrow + (size_t)oh * g->wq;
            for (int ow = 0; ow < len; ow++)
                dst[ow] = dt_bf16_from_f32(src[ow]);
        }
}

void dt_conv_s2_bf16_position_pairs_image(const struct dt_conv_shape *s,
                                          const struct dt_conv_s2_geom *g, const void *x,
                                          bool x_bf16, dt_bf16 *xp)
{
    /* Each image pixel of a read plane lands once in each copy of its plane that a tap reads
     * (1x1: the even copy of plane 00 only), its channels side by side (a position pair holds
     * them so). */
    size_t plane = (size_t)s->h * s->w;
    for (int h = 0; h < s->h; h++)
        for (int w = 0; w < s->w; w++) {
            int hp = h + s->pad, wp = w + s->pad, pl = hp % 2 * 2 + wp % 2;
            if (!(g->planes & 1u << pl))
                continue;
            int pos = hp / 2 * g->wq + wp / 2;
            dt_bf16 *e = g->copies & 1u << (pl * 2) ? xp + (size_t)pl * 2 * g->xt +
                                                          (size_t)(pos / 2) * g->c16 * 2 + pos % 2
                                                    : NULL;
            dt_bf16 *o = pos > 0 && g->copies & 1u << (pl * 2 + 1)
                             ? xp + ((size_t)pl * 2 + 1) * g->xt +
                                   (size_t)((pos - 1) / 2) * g->c16 * 2 + (pos - 1) % 2
                             : NULL;
            size_t px = (size_t)h * s->w + w;
            for (int c = 0; c < s->c; c++) {
                dt_bf16 v = dt_bf16_from_f32(dt_act_at(x, x_bf16, px + c * plane));
                if (e)
                    e[2 * c] = v;
                if (o)
                    o[2 * c] = v;
            }
        }
}

void dt_conv_s2_bf16_weight_grad_on(enum dt_bf16_path p, const struct dt_conv_shape *s,
                                    const struct dt_conv_s2_geom *g, int n, const dt_bf16 *dyq,
                                    const dt_bf16 *xp, float *dwt, bool accumulate)
{
    taps_weight_grad(p)(s->k, g->c16, g->taps, g->wg_at, g->wg_shift, g->qrow, n, dyq, g->dyq, xp,
                        g->xp, dwt, accumulate);
}

void dt_conv_s2_bf16_weight_grad_unpack(const struct dt_conv_shape *s,
                                        const struct dt_conv_s2_geom *g, const float *dwt,
                                        float *dw)
{
    for (int k = 0; k < s->k; k++)
        for (int c = 0; c < s->c; c++)
            for (int ij = 0; ij < g->taps; ij++)
                dw[((size_t)k * s->c + c) * g->taps + ij] =
                    dwt[((size_t)k * g->taps + ij) * g->c16 + c];
}

/* The plain C layout passes above, as conv_s2_bf16.h's table. */
static const struct dt_conv_s2_bf16_layout plain_c = {
    .name = "plain C",
    .parity_planes_image = dt_conv_s2_bf16_parity_planes_image,
    .compact = dt_conv_s2_bf16_compact,
    .dy_planes_image = dt_conv_s2_bf16_dy_planes_image,
    .compact_dx = dt_conv_s2_bf16_compact_dx,
    .dy_rows_image = dt_conv_s2_bf16_dy_rows_image,
    .bn_dy_image = dt_conv_s2_bf16_bn_dy_image,
    .position_pairs_image = dt_conv_s2_bf16_position_pairs_image,
};

const struct dt_conv_s2_bf16_layout *dt_conv_s2_bf16_layout_on(enum dt_bf16_path p)
{
    return p == DT_BF16_AMX          ? &dt_conv_s2_bf16_layout_amx
           : p == DT_BF16_AVX512BF16 ? &dt_conv_s2_bf16_layout_avx512bf16
                                     : &plain_c;
}

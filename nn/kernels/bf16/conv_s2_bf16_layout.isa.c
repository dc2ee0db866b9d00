/* The stride-2 bf16 convolution's layout passes (conv_s2_bf16.h) in AVX-512: the parity planes
 * of the input, the dY pair planes and dY rows, the position-pair copies of the weight
 * gradient, and the compactions of the output and of the input gradient's four parity planes.
 * Built for the amx and avx512bf16 paths (the Makefile's ISA_SET_conv_s2_bf16_layout), its
 * passes exported as one table per build that dt_conv_s2_bf16_layout_on() hands those paths;
 * every other path runs the plain C in conv_s2_bf16.c, the reference these write the bits
 * of (test_conv_s2_bf16 compares them byte for byte). The rounding to bf16 is bf16.h's in integer
 * lanes, as in conv_bf16_layout.isa.c (VCVTNE2PS2BF16 flushes denormals); the adds and the relu
 * masks are the plain C's single fp32 operations. Like the stride-1 passes these wait on memory:
 * the gain is whole 64-byte loads and stores with masked tails instead of one bf16 at a time. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "nn/kernels/bf16/conv_s2_bf16.h"
#include "nn/kernels/bf16/layout_avx512.h"
#include "nn/kernels/isa_fn.h"

#define BODY inline __attribute__((always_inline))

/* 16 pairs of bf16, as conv_bf16.h's pair planes hold two channels: a's in the low half of
 * each 32-bit lane, b's in the high half (b NULL: zero). */
static inline __m512i pair_lanes(__m512 a, const __m512 *b)
{
    __m512i pair = _mm512_srli_epi32(dt_round_high(a), 16);
    return b ? _mm512_or_si512(pair, dt_round_high(*b)) : pair;
}

/* Every other float of src from 0: n of them (n <= 16), reading no further than 2 n - 1. */
static inline __m512 every_other(const float *src, int n)
{
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    __m512 lo = _mm512_maskz_loadu_ps(dt_lanes(2 * n - 1), src);
    __m512 hi = _mm512_maskz_loadu_ps(dt_lanes(2 * n - 1 - 16), src + 16);
    return _mm512_permutex2var_ps(lo, even, hi);
}

/* every_other over bf16 elements: the even ones are the low halves of 32-bit lanes. */
static inline __m512 every_other_bf16(const dt_bf16 *src, int n)
{
    __m512i v = _mm512_maskz_loadu_epi16((__mmask32)((1u << (2 * n - 1)) - 1), src);
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}

/* every_other from x stored as fp32 or (x_bf16) bf16, from element at. */
static inline __m512 every_other_act(const void *x, bool x_bf16, size_t at, int n)
{
    return x_bf16 ? every_other_bf16((const dt_bf16 *)x + at, n)
                  : every_other((const float *)x + at, n);
}

static BODY void parity_planes_image_body(const struct dt_conv_shape *s,
                                          const struct dt_conv_s2_geom *g, const void *x,
                                          bool x_bf16, dt_bf16 *xv)
{
    size_t plane = (size_t)s->h * s->w;
    for (int p = 0; 2 * p < s->c; p++) {
        size_t c0 = 2 * p * plane, c1 = c0 + plane;
        bool second = 2 * p + 1 < s->c;
        for (int h = 0; h < s->h; h++) {
            int hp = h + s->pad;
            dt_prefetch_next_pair(x, x_bf16, c0 + (size_t)h * s->w, (size_t)s->w, plane);
            for (int b = 0; b < 2; b++) {
                int pl = hp % 2 * 2 + b;
                if (!(g->planes & 1u << pl))
                    continue;
                /* columns w = first, first + 2, ...: n of them, from parity column col0 on */
                int first = ((b - s->pad) % 2 + 2) % 2, n = (s->w - first + 1) / 2;
                int col0 = (first + s->pad) / 2;
                dt_bf16 *out = xv + (size_t)pl * g->cpad * g->positions +
                               ((size_t)p * g->positions + (size_t)(hp / 2) * g->wq + col0) * 2;
                size_t r0 = c0 + (size_t)h * s->w + first, r1 = c1 + (size_t)h * s->w + first;
                for (int i = 0; i < n; i += 16) {
                    int m = n - i < 16 ? n - i : 16;
                    __m512 v1 =
                        second ? every_other_act(x, x_bf16, r1 + 2 * i, m) : _mm512_setzero_ps();
                    _mm512_mask_storeu_epi32(
                        out + 2 * i, dt_lanes(m),
                        pair_lanes(every_other_act(x, x_bf16, r0 + 2 * i, m), second ? &v1 : NULL));
                }
            }
        }
    }
}

static void parity_planes_image(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                                const void *x, bool x_bf16, dt_bf16 *xv)
{
    if (x_bf16)
        parity_planes_image_body(s, g, x, true, xv);
    else
        parity_planes_image_body(s, g, x, false, xv);
}

static void compact(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g, const float *yq,
                    const float *b, bool relu, enum dt_bf16_store store, void *y)
{
    struct dt_compact_rows r = {s->k, g->oh, g->ow, g->qpad, g->wq, relu, false};
    dt_compact_rows_as(&r, yq, b, store, y);
}

static void dy_planes_image(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                            const float *dy, dt_bf16 *dv)
{
    size_t plane = (size_t)g->oh * g->ow;
    int rows = g->wd == g->ow ? 1 : g->oh, len = g->wd == g->ow ? g->oh * g->ow : g->ow;
    for (int p = 0; 2 * p < s->k; p++) {
        const float *c0 = dy + 2 * p * plane, *c1 = 2 * p + 1 < s->k ? c0 + plane : NULL;
        for (int oh = 0; oh < rows; oh++) {
            dt_bf16 *out =
                dv +
                ((size_t)p * g->positions_d + (size_t)(oh + g->th - 1) * g->wd + g->tw - 1) * 2;
            const float *r0 = c0 + (size_t)oh * g->ow, *r1 = c1 ? c1 + (size_t)oh * g->ow : NULL;
            for (int ow = 0; ow < len; ow += 16) {
                __mmask16 m = dt_lanes(len - ow);
                __m512 v1 = r1 ? _mm512_maskz_loadu_ps(m, r1 + ow) : _mm512_setzero_ps();
                _mm512_mask_storeu_epi32(
                    out + 2 * ow, m,
                    pair_lanes(_mm512_maskz_loadu_ps(m, r0 + ow), r1 ? &v1 : NULL));
            }
        }
    }
}

static void dy_rows_image(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                          const float *dy, dt_bf16 *dyq)
{
    int rows = g->wq == g->ow ? 1 : g->oh, len = g->wq == g->ow ? g->q : g->ow;
    for (int k = 0; k < s->k; k++)
        for (int oh = 0; oh < rows; oh++) {
            const float *src = dy + ((size_t)k * g->oh + oh) * g->ow;
            dt_bf16 *dst = dyq + (size_t)k * g->qrow + (size_t)oh * g->wq;
            for (int ow = 0; ow < len; ow += 16) {
                __mmask16 m = dt_lanes(len - ow);
                dt_store_bf16(dst + ow, m, _mm512_maskz_loadu_ps(m, src + ow));
            }
        }
}

/* bn_dy_image (conv_s2_bf16.h): a channel pair's rows 16 positions at a time, each channel's
 * values stored as its dY row and the pair into the dY pair plane (dy_rows_image's and
 * dy_planes_image's stores). */
static BODY void bn_dy_image_body(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                                  const struct dt_bn_grad *bn, bool x_bf16, const float *dy,
                                  int sample, dt_bf16 *dyq, dt_bf16 *dv)
{
    size_t plane = (size_t)g->oh * g->ow, at = (size_t)sample * s->k * plane;
    const void *xb = x_bf16 ? (const void *)bn->xh : (const void *)bn->x;
    for (int k = 0; k < s->k; k += 2) {
        bool second = k + 1 < s->k;
        for (int oh = 0; oh < g->oh; oh++) {
            size_t i0 = at + (size_t)k * plane + (size_t)oh * g->ow;
            /* the next pair's rows (the next sample's first pair's after the last) */
            dt_prefetch_next_pair(dy, false, i0, (size_t)g->ow, plane);
            dt_prefetch_next_pair(xb, x_bf16, i0, (size_t)g->ow, plane);
            dt_bf16 *row = dyq + (size_t)k * g->qrow + (size_t)oh * g->wq;
            dt_bf16 *out = dv ? dv + ((size_t)(k / 2) * g->positions_d +
                                      (size_t)(oh + g->th - 1) * g->wd + g->tw - 1) *
                                         2
                              : NULL;
            for (int ow = 0; ow < g->ow; ow += 16) {
                __mmask16 m = dt_lanes(g->ow - ow);
                __m512i pair =
                    dt_bn_dy_pair(bn, x_bf16, dy, k, second, i0 + ow, plane, m, row + ow, g->qrow);
                if (out)
                    _mm512_mask_storeu_epi32(out + 2 * ow, m, pair);
            }
        }
    }
}

static void bn_dy_image(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                        const struct dt_bn_grad *bn, const float *dy, int sample, dt_bf16 *dyq,
                        dt_bf16 *dv)
{
    if (bn->xh)
        bn_dy_image_body(s, g, bn, true, dy, sample, dyq, dv);
    else
        bn_dy_image_body(s, g, bn, false, dy, sample, dyq, dv);
}

/* Position pos of parity plane a b: its pixel's channels of one block (lanes cm, index: each
 * lane's plane offset), rounded, in the top halves of the lanes; zero outside the image (the
 * padding, the junk column). */
static inline __m512i position_channels(const struct dt_conv_shape *s, int wq, const void *x,
                                        bool x_bf16, int a, int b, int pos, __mmask16 cm,
                                        __m512i index)
{
    int h = pos / wq * 2 + a - s->pad, w = pos % wq * 2 + b - s->pad;
    if (h < 0 || h >= s->h || w < 0 || w >= s->w)
        return _mm512_setzero_si512();
    if (x_bf16) /* 32 bits from each element on (the activation is allocated 64 bytes longer):
                 * the element in the low half, moved up */
        return _mm512_slli_epi32(_mm512_mask_i32gather_epi32(_mm512_setzero_si512(), cm, index,
                                                             (const dt_bf16 *)x + h * s->w + w, 2),
                                 16);
    return dt_round_high(_mm512_mask_i32gather_ps(_mm512_setzero_ps(), cm, index,
                                                  (const float *)x + h * s->w + w, 4));
}

/* Per parity plane a b a copy reads, its position pairs from the first to the one of its last
 * image position, each position's 16 channels of a block gathered once: the even copy's pair
 * P is positions (2P, 2P + 1), the odd copy's (2P + 1, 2P + 2). A position outside the image
 * is zero, what the buffer (zeroed once by its owner) holds there, so whole 64-byte pairs are
 * written. */
static BODY void position_pairs_image_body(const struct dt_conv_shape *s,
                                           const struct dt_conv_s2_geom *g, const void *x,
                                           bool x_bf16, dt_bf16 *xp)
{
    int plane = s->h * s->w;
    __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int pl = 0; pl < 4; pl++) {
        int a = pl / 2, b = pl % 2;
        dt_bf16 *even = g->copies & 1u << (pl * 2) ? xp + (size_t)pl * 2 * g->xt : NULL;
        dt_bf16 *odd = g->copies & 1u << (pl * 2 + 1) ? xp + ((size_t)pl * 2 + 1) * g->xt : NULL;
        if (!(g->planes & 1u << pl) || (!even && !odd))
            continue;
        /* the plane's image rows and columns: padded row 2r + a, column 2c + b in the image */
        int r0 = (s->pad - a + 1) / 2, r1 = (s->pad + s->h - 1 - a) / 2;
        int q0 = (s->pad - b + 1) / 2, q1 = (s->pad + s->w - 1 - b) / 2;
        if (r1 < r0 || q1 < q0)
            continue;
        int first = r0 * g->wq + q0, last = r1 * g->wq + q1;
        int p0 = first > 0 ? (first - 1) / 2 : 0, p1 = last / 2;
        for (int cb = 0; cb < g->c16; cb += 16) {
            __mmask16 cm = dt_lanes(s->c - cb);
            __m512i index = _mm512_mullo_epi32(_mm512_add_epi32(_mm512_set1_epi32(cb), lane),
                                               _mm512_set1_epi32(plane));
            __m512i u = position_channels(s, g->wq, x, x_bf16, a, b, 2 * p0, cm, index);
            for (int p = p0; p <= p1; p++) {
                __m512i v = position_channels(s, g->wq, x, x_bf16, a, b, 2 * p + 1, cm, index);
                __m512i w = position_channels(s, g->wq, x, x_bf16, a, b, 2 * p + 2, cm, index);
                size_t at = ((size_t)p * g->c16 + cb) * 2;
                if (even)
                    _mm512_storeu_si512(even + at, _mm512_or_si512(_mm512_srli_epi32(u, 16), v));
                if (odd)
                    _mm512_storeu_si512(odd + at, _mm512_or_si512(_mm512_srli_epi32(v, 16), w));
                u = w;
            }
        }
    }
}

static void position_pairs_image(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                                 const void *x, bool x_bf16, dt_bf16 *xp)
{
    if (x_bf16)
        position_pairs_image_body(s, g, x, true, xp);
    else
        position_pairs_image_body(s, g, x, false, xp);
}

/* A row of dx interleaves two parity planes' rows (conv_s2_bf16.c's compact_dx): 32 columns
 * at a time from 16 of each, through the relu below's backward as a mask. extra_even: an even
 * row's extra is expanded into the even lanes from its even columns' run, zeros between (an
 * odd row's is zero: added, for the bits of -0 + 0). */
static BODY void compact_dx_body(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                                 const float *dxq, const void *relu_x, bool x_bf16,
                                 const float *extra, bool extra_even, bool round, float *dx)
{
    const __m512i lo_idx =
        _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi_idx =
        _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    __m512 zero = _mm512_setzero_ps();
    int even_w = (s->w + 1) / 2;
    for (int c = 0; c < s->c; c++)
        for (int h = 0; h < s->h; h++) {
            int hp = h + s->pad;
            size_t at = ((size_t)c * s->h + h) * s->w;
            const float *src[2];
            for (int b = 0; b < 2; b++) {
                int pl = hp % 2 * 2 + (s->pad + b) % 2;
                src[b] = g->dx_taps[pl] ? dxq + ((size_t)pl * s->c + c) * g->qdpad +
                                              (size_t)(hp / 2) * g->wd + (s->pad + b) / 2
                                        : NULL;
            }
            const float *a = src[0], *b = src[1];
            const void *x = relu_x ? dt_act_from(relu_x, x_bf16, at) : NULL;
            bool with_extra = relu_x && extra;
            const float *e = with_extra && !extra_even ? extra + at : NULL;
            const float *ee = with_extra && extra_even && h % 2 == 0
                                  ? extra + ((size_t)c * ((s->h + 1) / 2) + h / 2) * even_w
                                  : NULL;
            float *d = dx + at;
            /* the same row of the next channel (the next sample's first), asked for ahead */
            size_t plane = (size_t)s->h * s->w, ahead = at + plane;
            if (x)
                dt_prefetch_act(relu_x, x_bf16, ahead, (size_t)s->w, plane);
            if (e)
                dt_prefetch_act(extra, false, ahead, (size_t)s->w, plane);
            if (!a && !b && !with_extra) {
                memset(d, 0, (size_t)s->w * sizeof *d);
                continue;
            }
            for (int w = 0; w < s->w; w += 32) {
                int n = s->w - w < 32 ? s->w - w : 32, k = w / 2;
                __m512 va = a ? _mm512_maskz_loadu_ps(dt_lanes((n + 1) / 2), a + k) : zero;
                __m512 vb = b ? _mm512_maskz_loadu_ps(dt_lanes(n / 2), b + k) : zero;
                if (round)
                    va = dt_rounded(va), vb = dt_rounded(vb);
                __mmask16 m[2] = {dt_lanes(n), dt_lanes(n - 16)};
                __m512 v[2] = {_mm512_permutex2var_ps(va, lo_idx, vb),
                               _mm512_permutex2var_ps(va, hi_idx, vb)};
                for (int half = 0; half < 2 && m[half]; half++) {
                    size_t j = (size_t)w + 16 * (size_t)half;
                    if (e) /* read before d is written: extra may be dx */
                        v[half] = _mm512_add_ps(v[half], _mm512_maskz_loadu_ps(m[half], e + j));
                    else if (ee) /* the even lanes from j / 2 on */
                        v[half] = _mm512_add_ps(
                            v[half], _mm512_maskz_expandloadu_ps(m[half] & 0x5555, ee + j / 2));
                    else if (with_extra)
                        v[half] = _mm512_add_ps(v[half], zero);
                    if (x)
                        v[half] = _mm512_maskz_mov_ps(
                            _mm512_cmp_ps_mask(dt_load_act(x, x_bf16, j, m[half]), zero,
                                               _CMP_GT_OQ),
                            v[half]);
                    _mm512_mask_storeu_ps(d + j, m[half], v[half]);
                }
            }
        }
}

static void compact_dx(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                       const float *dxq, const void *relu_x, bool x_bf16, const float *extra,
                       bool extra_even, bool round, float *dx)
{
    if (x_bf16)
        compact_dx_body(s, g, dxq, relu_x, true, extra, extra_even, round, dx);
    else
        compact_dx_body(s, g, dxq, relu_x, false, extra, extra_even, round, dx);
}

const struct dt_conv_s2_bf16_layout DT_ISA_FN(dt_conv_s2_bf16_layout) = {
    .name = "avx512",
    .parity_planes_image = parity_planes_image,
    .compact = compact,
    .dy_planes_image = dy_planes_image,
    .compact_dx = compact_dx,
    .dy_rows_image = dy_rows_image,
    .bn_dy_image = bn_dy_image,
    .position_pairs_image = position_pairs_image,
};

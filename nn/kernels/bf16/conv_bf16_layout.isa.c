/* The stride-1 bf16 convolution's layout passes (conv_bf16.h) in AVX-512: the conversion of
 * fp32 NCHW into channel-pair planes, the dY rows and the position-pair copies of the weight
 * gradient, and the compaction of the padded-width output back to NCHW (with the bias, the
 * relu above or the relu below's backward; the passes that read x read it as stored or through
 * the batchnorm2d -> relu below, bn_input). Built for the two paths with AVX-512, amx and
 * avx512bf16 (the Makefile's ISA_SET_conv_bf16_layout), its passes exported as one table per
 * build, dt_conv_bf16_layout_amx and _avx512bf16, that dt_conv_bf16_layout_on() hands those
 * paths; every other path runs the plain C in conv_bf16.c.
 *
 * Each writes the plain C's bits exactly (test_conv_bf16 compares them byte for byte): the
 * rounding to bf16 is bf16.h's, done in integer lanes (u + 0x7fff + lsb, a NaN kept quiet),
 * not VCVTNE2PS2BF16, which flushes denormal inputs to zero; the adds and the relu are the
 * same single fp32 operations. The passes wait on memory, not on arithmetic: the gain over
 * the plain C is whole 64-byte loads and stores with masked row tails instead of one element
 * (or one interleaved pair of bf16) at a time.
 *
 * A pass that reads x as fp32 or bf16, or stores fp32, rounded or bf16 values, is one body
 * inlined once per case (BODY, the case a constant): a test per vector of the element type
 * cost the ConvNet's input layout a third more time. */
#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>

#include "nn/kernels/bf16/conv_bf16.h"
#include "nn/kernels/bf16/layout_avx512.h"
#include "nn/kernels/isa_fn.h"

#define BODY inline __attribute__((always_inline))

/* One channel's batchnorm2d -> relu below (bn_input, conv_bf16.h's dt_bn_relu), broadcast;
 * `on` false: x is read as stored. */
struct channel_bn {
    bool on;
    __m512 scale, shift;
};

static BODY struct channel_bn channel_bn(const struct dt_bn_relu *bn, int ch)
{
    if (!bn)
        return (struct channel_bn){false, _mm512_setzero_ps(), _mm512_setzero_ps()};
    return (struct channel_bn){true, _mm512_set1_ps(bn->scale[ch]), _mm512_set1_ps(bn->shift[ch])};
}

/* v through the batchnorm2d's affine: v * scale + shift, two single fp32 operations as the
 * batchnorm's affine pass does them. */
static BODY __m512 bn_affine(__m512 v, __m512 scale, __m512 shift)
{
    return _mm512_add_ps(_mm512_mul_ps(v, scale), shift);
}

/* ... then the relu, rounded to bf16, in the top halves (dt_round_high's form): MAXPS returns
 * its second operand, +0, for a NaN or a -0, as v > 0 ? v : 0 does, so no NaN is left to
 * keep quiet and the rounding is bf16.h's add of 0x7fff + lsb alone. */
static BODY __m512i bn_relu_high(__m512 v, __m512 scale, __m512 shift)
{
    __m512i u = _mm512_castps_si512(_mm512_max_ps(bn_affine(v, scale, shift), _mm512_setzero_ps()));
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb);
    return _mm512_and_si512(r, _mm512_set1_epi32((int)0xffff0000u));
}

/* The lanes m of 16 elements of x from element i as the conv reads them, rounded, in the top
 * halves of the lanes (dt_load_act_high's form). */
static BODY __m512i input_high(const void *x, bool x_bf16, struct channel_bn a, size_t i,
                               __mmask16 m)
{
    if (!a.on)
        return dt_load_act_high(x, x_bf16, i, m);
    return bn_relu_high(dt_load_act(x, x_bf16, i, m), a.scale, a.shift);
}

/* 16 positions' channel pairs (lanes m) stored at out and, with tap pairing (shifted not
 * NULL), again at shifted, the same positions one earlier in plane 8 on; the first of them
 * dropped there when `drop_first` (position 0 has no position before it). */
static BODY void store_pairs(dt_bf16 *out, dt_bf16 *shifted, bool drop_first, __mmask16 m,
                             __m512i pair)
{
    _mm512_mask_storeu_epi32(out, m, pair);
    if (shifted)
        _mm512_mask_storeu_epi32(shifted, drop_first ? m & ~1u : m, pair);
}

/* Two channel rows of n elements of x (from elements r0 and r1, read through a0 and a1) into n
 * interleaved pairs (the first channel in the low half of each 32-bit pair); without
 * `second`, the second channel's half is zero. With tap pairing (shifted not NULL) the same
 * pairs again from shifted on, the first of them dropped when `drop_first` (a row at position
 * 0 has no position before it). */
static BODY void pair_row(const void *x, bool x_bf16, struct channel_bn a0, struct channel_bn a1,
                          size_t r0, size_t r1, bool second, int n, dt_bf16 *out, dt_bf16 *shifted,
                          bool drop_first)
{
    for (int w = 0; w < n; w += 16) {
        __mmask16 m = dt_lanes(n - w);
        __m512i pair = _mm512_srli_epi32(input_high(x, x_bf16, a0, r0 + w, m), 16);
        if (second)
            pair = _mm512_or_si512(pair, input_high(x, x_bf16, a1, r1 + w, m));
        store_pairs(out + 2 * w, shifted ? shifted + 2 * w : NULL, w == 0 && drop_first, m, pair);
    }
}

/* The missing second channel of an odd count's last pair is written zero: it is padding, zero
 * already in every buffer this function may write (conv_bf16.h). With tap pairing, planes 8-15
 * get planes 0-7 one position earlier. */
static BODY void pad_input_image_body(const struct dt_conv_shape *s,
                                      const struct dt_conv_bf16_geom *g, const void *x, bool x_bf16,
                                      const struct dt_bn_relu *bn, dt_bf16 *xv)
{
    size_t plane = (size_t)s->h * s->w, pair_plane = (size_t)g->positions * 2;
    for (int p = 0; 2 * p < s->c; p++) {
        size_t first = (size_t)s->pad * g->wp + s->pad, c0 = 2 * p * plane;
        bool second = 2 * p + 1 < s->c;
        struct channel_bn a0 = channel_bn(bn, 2 * p),
                          a1 = channel_bn(second ? bn : NULL, 2 * p + 1);
        for (int h = 0; h < s->h; h++) {
            size_t at = (p * pair_plane) + (first + (size_t)h * g->wp) * 2;
            size_t r0 = c0 + (size_t)h * s->w;
            dt_prefetch_next_pair(x, x_bf16, r0, (size_t)s->w, plane);
            /* the position before the row's first, in plane 8 + p (within xv: 8 planes on) */
            dt_bf16 *shifted = g->tap_pairs ? xv + at + 8 * pair_plane - 2 : NULL;
            pair_row(x, x_bf16, a0, a1, r0, r0 + plane, second, s->w, xv + at, shifted,
                     first == 0 && h == 0);
        }
    }
}

/* Each pass that reads x is inlined once per case: x fp32 or bf16, with or without bn. */
static void pad_input_image(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                            const void *x, bool x_bf16, const struct dt_bn_relu *bn, dt_bf16 *xv)
{
    if (bn && x_bf16)
        pad_input_image_body(s, g, x, true, bn, xv);
    else if (bn)
        pad_input_image_body(s, g, x, false, bn, xv);
    else if (x_bf16)
        pad_input_image_body(s, g, x, true, NULL, xv);
    else
        pad_input_image_body(s, g, x, false, NULL, xv);
}

static void dy_rows_image(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                          const float *dy, dt_bf16 *dyq)
{
    for (int k = 0; k < s->k; k++)
        for (int oh = 0; oh < g->oh; oh++) {
            const float *src = dy + ((size_t)k * g->oh + oh) * g->ow;
            dt_bf16 *dst = dyq + (size_t)k * g->qrow + (size_t)oh * g->wp;
            for (int ow = 0; ow < g->ow; ow += 16) {
                __mmask16 m = dt_lanes(g->ow - ow);
                dt_store_bf16(dst + ow, m, _mm512_maskz_loadu_ps(m, src + ow));
            }
        }
}

/* Position pos's channels of one block (lanes cm, index: each lane's plane offset) as the conv
 * reads them (through the batchnorm2d -> relu below with a: the block's scales and shifts,
 * zero in the lanes past the channels), rounded, in the top halves of the lanes; zero outside
 * the image (the padding). x stored as bf16: each lane gathers 32 bits from its element on,
 * the element in the low half (the next one, in the high half, is shifted out; the model's
 * bf16 activations have room after their last). */
static BODY __m512i position_channels(const struct dt_conv_shape *s, const void *x, bool x_bf16,
                                      const struct channel_bn *a, int row, int col, __mmask16 cm,
                                      __m512i index)
{
    if (row < 0 || row >= s->h || col < 0 || col >= s->w)
        return _mm512_setzero_si512();
    size_t at = (size_t)row * s->w + col;
    __m512 v;
    if (x_bf16) {
        __m512i h = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), cm, index,
                                                (const dt_bf16 *)x + at, 2);
        if (!a->on) /* a bf16 value needs no rounding */
            return _mm512_slli_epi32(h, 16);
        v = _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
    } else {
        v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), cm, index, (const float *)x + at, 4);
    }
    return a->on ? bn_relu_high(v, a->scale, a->shift) : dt_round_high(v);
}

/* The image row and column of the position after (row, col) in the padded plane, wp wide. */
static BODY void next_position(const struct dt_conv_shape *s, int wp, int *row, int *col)
{
    if (++*col == wp - s->pad) {
        *col = -s->pad;
        ++*row;
    }
}

/* Image row `row` of the block's channels (lanes cm from plane c0 on), asked for ahead
 * (dt_prefetch_act): a position's gather reads 16 planes, 16 streams for the hardware. */
static BODY void prefetch_rows(const struct dt_conv_shape *s, const void *x, bool x_bf16, int c0,
                               __mmask16 cm, int row)
{
    if (row >= s->h)
        return;
    size_t plane = (size_t)s->h * s->w;
    for (int c = 0; c < 16 && (cm >> c & 1); c++)
        dt_prefetch_act(x, x_bf16, (size_t)(c0 + c) * plane + (size_t)row * s->w, (size_t)s->w,
                        plane);
}

/* Position pairs: every pair of positions (2P, 2P + 1) of the even copy and (2P + 1, 2P + 2)
 * of the odd one, from the pair before the first image position's to the last's; each
 * position's 16 channels of a block gathered once (one lane per channel plane). A position
 * outside the image (the padding columns between rows) is zero, what the buffer holds there,
 * so whole 64-byte pairs are written. */
static BODY void position_pairs_image_body(const struct dt_conv_shape *s,
                                           const struct dt_conv_bf16_geom *g, const void *x,
                                           bool x_bf16, const struct dt_bn_relu *bn, dt_bf16 *even,
                                           dt_bf16 *odd)
{
    int plane = s->h * s->w;
    int first = s->pad * g->wp + s->pad, last = (s->pad + s->h - 1) * g->wp + s->pad + s->w - 1;
    int p0 = first > 0 ? (first - 1) / 2 : 0, p1 = last / 2;
    __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int cb = 0; cb < g->c16; cb += 16) {
        __mmask16 cm = dt_lanes(s->c - cb);
        __m512i index = _mm512_mullo_epi32(_mm512_add_epi32(_mm512_set1_epi32(cb), lane),
                                           _mm512_set1_epi32(plane));
        /* zero scale and shift past the channels: those lanes stay zero */
        struct channel_bn a = {bn != NULL, _mm512_setzero_ps(), _mm512_setzero_ps()};
        if (bn) {
            a.scale = _mm512_maskz_loadu_ps(cm, bn->scale + cb);
            a.shift = _mm512_maskz_loadu_ps(cm, bn->shift + cb);
        }
        /* the image row and column of position 2 p0, then of each next one (no division) */
        int row = 2 * p0 / g->wp - s->pad, col = 2 * p0 % g->wp - s->pad;
        __m512i pa = position_channels(s, x, x_bf16, &a, row, col, cm, index);
        for (int p = p0; p <= p1; p++) {
            if (col == -s->pad) /* a row begins: two rows on */
                prefetch_rows(s, x, x_bf16, cb, cm, row + 2);
            next_position(s, g->wp, &row, &col);
            if (col == -s->pad)
                prefetch_rows(s, x, x_bf16, cb, cm, row + 2);
            __m512i pb = position_channels(s, x, x_bf16, &a, row, col, cm, index);
            next_position(s, g->wp, &row, &col);
            __m512i pc = position_channels(s, x, x_bf16, &a, row, col, cm, index);
            size_t at = ((size_t)p * g->c16 + cb) * 2;
            _mm512_storeu_si512(even + at, _mm512_or_si512(_mm512_srli_epi32(pa, 16), pb));
            _mm512_storeu_si512(odd + at, _mm512_or_si512(_mm512_srli_epi32(pb, 16), pc));
            pa = pc;
        }
    }
}

static void position_pairs_image(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                                 const void *x, bool x_bf16, const struct dt_bn_relu *bn,
                                 dt_bf16 *even, dt_bf16 *odd)
{
    if (bn && x_bf16)
        position_pairs_image_body(s, g, x, true, bn, even, odd);
    else if (bn)
        position_pairs_image_body(s, g, x, false, bn, even, odd);
    else if (x_bf16)
        position_pairs_image_body(s, g, x, true, NULL, even, odd);
    else
        position_pairs_image_body(s, g, x, false, NULL, even, odd);
}

/* dx's rows streamed where their 64-byte vectors lie aligned (the reason: struct
 * dt_compact_rows' stream, layout_avx512.h). */
static inline void store_row(float *dst, int ow, __mmask16 m, __m512 v, bool stream)
{
    if (stream)
        _mm512_stream_ps(dst + ow, v);
    else
        _mm512_mask_storeu_ps(dst + ow, m, v);
}

static inline bool streamable(const struct dt_conv_bf16_geom *g, const float *row, bool stream)
{
    return stream && g->ow % 16 == 0 && (uintptr_t)row % 64 == 0;
}

static void compact(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                    const float *yq, const float *b, bool relu, bool stream,
                    enum dt_bf16_store store, void *y)
{
    struct dt_compact_rows r = {s->k, g->oh, g->ow, g->qpad, g->wp, relu, stream};
    dt_compact_rows_as(&r, yq, b, store, y);
}

/* compact_pool2x2 (conv_bf16.h): 16 windows at a time, the two rows' 32 values each made as
 * compact() makes them (bias, MAXPS against 0, rounded), split into the windows' four corners
 * and compared in dt_maxpool_forward's order (the first maximum; a NaN, which the relu leaves
 * none of, would win). */
static void compact_pool2x2(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                            const float *yq, const float *b, float *py, int32_t *argmax)
{
    int poh = g->oh / 2, pow = g->ow / 2;
    __m512 zero = _mm512_setzero_ps();
    __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    __m512i lane2 = _mm512_slli_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 1);
    for (int k = 0; k < s->k; k++) {
        __m512 bias = _mm512_set1_ps(b ? b[k] : 0.0f);
        for (int oy = 0; oy < poh; oy++) {
            const float *r0 = yq + (size_t)k * g->qpad + (size_t)2 * oy * g->wp, *r1 = r0 + g->wp;
            size_t at = ((size_t)k * poh + oy) * pow;
            for (int ox = 0; ox < pow; ox += 16) {
                int cols = 2 * (pow - ox); /* the windows' columns from 2 ox on */
                __mmask16 lo = dt_lanes(cols), hi = dt_lanes(cols - 16), m = dt_lanes(pow - ox);
                const float *p0 = r0 + 2 * ox, *p1 = r1 + 2 * ox;
                __m512 v[4];
                __m512 row[4] = {_mm512_maskz_loadu_ps(lo, p0), _mm512_maskz_loadu_ps(hi, p0 + 16),
                                 _mm512_maskz_loadu_ps(lo, p1), _mm512_maskz_loadu_ps(hi, p1 + 16)};
                for (int j = 0; j < 4; j++)
                    row[j] = dt_rounded(_mm512_max_ps(_mm512_add_ps(row[j], bias), zero));
                v[0] = _mm512_permutex2var_ps(row[0], even, row[1]);
                v[1] = _mm512_permutex2var_ps(row[0], odd, row[1]);
                v[2] = _mm512_permutex2var_ps(row[2], even, row[3]);
                v[3] = _mm512_permutex2var_ps(row[2], odd, row[3]);
                __m512i i = _mm512_add_epi32(_mm512_set1_epi32(2 * oy * g->ow + 2 * ox), lane2);
                __m512i best = i;
                __m512 max = v[0];
                const int offset[4] = {0, 1, g->ow, g->ow + 1};
                for (int j = 1; j < 4; j++) {
                    __mmask16 t = _mm512_cmp_ps_mask(v[j], max, _CMP_GT_OQ) |
                                  _mm512_cmp_ps_mask(v[j], v[j], _CMP_UNORD_Q);
                    max = _mm512_mask_mov_ps(max, t, v[j]);
                    best = _mm512_mask_add_epi32(best, t, i, _mm512_set1_epi32(offset[j]));
                }
                _mm512_mask_storeu_ps(py + at + ox, m, max);
                _mm512_mask_storeu_epi32(argmax + at + ox, m, best);
            }
        }
    }
}

/* The batchnorm's two backward sums of one channel (bn_sums, conv_bf16.h): DT_BN_LANES double
 * lanes, lo for lanes 0-7, hi for 8-15. */
struct bn_sums {
    __m512d a_lo, a_hi, q_lo, q_hi, mean;
};

/* The lanes m of 16 stored dx values v, at position p of the plane on, with x there (as stored,
 * fp32 values) into s: element p + j into lane (p + j) % 16, so a chunk that starts off a
 * multiple of 16 (a row of 8 or 28) is rotated into its lanes first. */
static BODY void bn_sums_add(struct bn_sums *s, size_t p, __mmask16 m, __m512 v, __m512 x)
{
    int r = (int)(p % DT_BN_LANES);
    if (r) {
        __m512i idx = _mm512_and_si512(
            _mm512_sub_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                             _mm512_set1_epi32(r)),
            _mm512_set1_epi32(15));
        v = _mm512_permutexvar_ps(idx, v);
        x = _mm512_permutexvar_ps(idx, x);
        m = (__mmask16)((m << r) | (m >> (16 - r)));
    }
    __m512d v_lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    __m512d v_hi =
        _mm512_cvtps_pd(_mm256_castsi256_ps(_mm512_extracti64x4_epi64(_mm512_castps_si512(v), 1)));
    __m512d x_lo = _mm512_cvtps_pd(_mm512_castps512_ps256(x));
    __m512d x_hi =
        _mm512_cvtps_pd(_mm256_castsi256_ps(_mm512_extracti64x4_epi64(_mm512_castps_si512(x), 1)));
    __mmask8 lo = (__mmask8)m, hi = (__mmask8)(m >> 8);
    s->a_lo = _mm512_mask_add_pd(s->a_lo, lo, s->a_lo, v_lo);
    s->a_hi = _mm512_mask_add_pd(s->a_hi, hi, s->a_hi, v_hi);
    /* a product, then a sum: no FMA, as the plain C (ISO C does not contract) */
    s->q_lo =
        _mm512_mask_add_pd(s->q_lo, lo, s->q_lo, _mm512_mul_pd(v_lo, _mm512_sub_pd(x_lo, s->mean)));
    s->q_hi =
        _mm512_mask_add_pd(s->q_hi, hi, s->q_hi, _mm512_mul_pd(v_hi, _mm512_sub_pd(x_hi, s->mean)));
}

/* Lanes lo then hi added pairwise (dt_bn_lanes_total). */
static BODY double bn_sums_total(__m512d lo, __m512d hi)
{
    double lane[DT_BN_LANES];
    _mm512_storeu_pd(lane, lo);
    _mm512_storeu_pd(lane + 8, hi);
    return dt_bn_lanes_total(lane);
}

/* dx is batch-wide: streamed (store_row). */
static BODY void compact_relu_below_body(const struct dt_conv_shape *t,
                                         const struct dt_conv_bf16_geom *g, const float *yq,
                                         const void *x, bool x_bf16, const struct dt_bn_relu *bn,
                                         const float *extra, bool round, float *dx,
                                         const struct dt_dx_sums *sums, bool sums_own_x)
{
    __m512 zero = _mm512_setzero_ps();
    __m512 rounds_to_zero = _mm512_castsi512_ps(_mm512_set1_epi32(0x8000));
    for (int k = 0; k < t->k; k++) {
        struct channel_bn a = channel_bn(bn, k);
        struct bn_sums s = {_mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(),
                            _mm512_setzero_pd(),
                            _mm512_set1_pd(sums ? (double)sums->mean[k] : 0.0)};
        for (int oh = 0; oh < g->oh; oh++) {
            const float *src = yq + (size_t)k * g->qpad + (size_t)oh * g->wp;
            size_t at = ((size_t)k * g->oh + oh) * g->ow;
            bool nt = streamable(g, dx + at, true);
            /* the same row of the next channel (the next sample's first), asked for ahead */
            size_t plane = (size_t)g->oh * g->ow, ahead = at + plane;
            dt_prefetch_act(x, x_bf16, ahead, (size_t)g->ow, plane);
            if (extra)
                dt_prefetch_act(extra, false, ahead, (size_t)g->ow, plane);
            if (sums && !sums_own_x)
                dt_prefetch_act(sums->x, true, ahead, (size_t)g->ow, plane);
            for (int ow = 0; ow < g->ow; ow += 16) {
                __mmask16 m = dt_lanes(g->ow - ow);
                __m512 v = _mm512_maskz_loadu_ps(m, src + ow);
                if (round) /* the conv's own dx, as autocast returns it */
                    v = dt_rounded(v);
                if (extra) /* read before dx is written: extra may be dx */
                    v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, extra + at + ow));
                __m512 in = dt_load_act(x, x_bf16, at + ow, m);
                /* the value the conv read, relu(affine) rounded, is > 0 where the affine is
                 * above 2^-133 (bits 0x8000, which rounds to zero, ties to even): no relu and
                 * no rounding needed for the mask */
                __mmask16 keep = a.on ? _mm512_cmp_ps_mask(bn_affine(in, a.scale, a.shift),
                                                           rounds_to_zero, _CMP_GT_OQ)
                                      : _mm512_cmp_ps_mask(in, zero, _CMP_GT_OQ);
                v = _mm512_maskz_mov_ps(keep, v);
                store_row(dx + at, ow, m, v, nt);
                if (sums) /* the batchnorm's input: this x (bn_sums) or its own (add_sums) */
                    bn_sums_add(&s, (size_t)oh * g->ow + ow, m, v,
                                sums_own_x ? in : dt_load_act(sums->x, true, at + ow, m));
            }
        }
        if (sums) {
            sums->out[k] = bn_sums_total(s.a_lo, s.a_hi);
            sums->out[t->k + k] = bn_sums_total(s.q_lo, s.q_hi);
        }
    }
    _mm_sfence();
}

/* Each case its own loop (the element type, the batchnorm and the sums constants). */
static void compact_relu_below(const struct dt_conv_shape *t, const struct dt_conv_bf16_geom *g,
                               const float *yq, const void *x, bool x_bf16,
                               const struct dt_bn_relu *bn, const float *extra, bool round,
                               float *dx, const struct dt_dx_sums *sums)
{
    if (bn && x_bf16 && sums)
        compact_relu_below_body(t, g, yq, x, true, bn, extra, round, dx, sums, true);
    else if (bn && x_bf16)
        compact_relu_below_body(t, g, yq, x, true, bn, extra, round, dx, NULL, false);
    else if (bn)
        compact_relu_below_body(t, g, yq, x, false, bn, extra, round, dx, NULL, false);
    else if (x_bf16 && sums)
        compact_relu_below_body(t, g, yq, x, true, NULL, extra, round, dx, sums, false);
    else if (x_bf16)
        compact_relu_below_body(t, g, yq, x, true, NULL, extra, round, dx, NULL, false);
    else if (sums)
        compact_relu_below_body(t, g, yq, x, false, NULL, extra, round, dx, sums, false);
    else
        compact_relu_below_body(t, g, yq, x, false, NULL, extra, round, dx, NULL, false);
}

/* bias_parts (conv_bf16.h): the 16 lanes are one vector's, the pairwise sums the plain C's. */
static void bias_parts(const dt_bf16 *dyq, int k, int qrow, float *part)
{
    for (int c = 0; c < k; c++) {
        const dt_bf16 *row = dyq + (size_t)c * qrow;
        __m512 acc = _mm512_setzero_ps();
        for (int q = 0; q < qrow; q += 16) {
            __m256i h = _mm256_loadu_si256((const __m256i *)(row + q));
            acc = _mm512_add_ps(
                acc, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
        }
        _Alignas(64) float lane[16];
        _mm512_store_ps(lane, acc);
        for (int w = 8; w > 0; w /= 2)
            for (int j = 0; j < w; j++)
                lane[j] += lane[j + w];
        part[c] = lane[0];
    }
}

/* One channel's 16 windows of one pooled row (from window o of the sample's pool data, the
 * first window's winner index if it were the top-left corner: base) unpooled as
 * dt_maxpool_backward does: the window's dy, + 0, where its pooled value is > 0, rounded, in
 * the top halves of the lanes (dt_round_high's form), at the corner that won, zero at the other
 * three. corner[0] and [1] hold the top row's even and odd columns, [2] and [3] the bottom's. */
static BODY void unpool_windows(const struct dt_pool_grad *p, size_t o, int base, __mmask16 m,
                                __m512i corner[4])
{
    __m512 zero = _mm512_setzero_ps();
    __m512 dy = _mm512_maskz_loadu_ps(m, p->dy + o);
    __mmask16 on =
        _mm512_mask_cmp_ps_mask(m, _mm512_maskz_loadu_ps(m, p->relu_y + o), zero, _CMP_GT_OQ);
    __m512i g = dt_round_high(_mm512_add_ps(zero, _mm512_maskz_mov_ps(on, dy)));
    __m512i lane2 = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    __m512i at = _mm512_sub_epi32(_mm512_maskz_loadu_epi32(m, p->argmax + o),
                                  _mm512_add_epi32(_mm512_set1_epi32(base), lane2));
    const int offset[4] = {0, 1, p->w, p->w + 1};
    for (int j = 0; j < 4; j++)
        corner[j] = _mm512_maskz_mov_epi32(
            _mm512_mask_cmpeq_epi32_mask(m, at, _mm512_set1_epi32(offset[j])), g);
}

/* unpool_image (conv_bf16.h): two channels at a time, 16 windows at a time. A dY row takes a
 * channel's even and odd columns as the low and high halves of 32-bit lanes (32 bf16 columns
 * in one store); the pair planes take the pair's two channels per column, interleaved back
 * into column order. */
static void unpool_image(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                         const struct dt_conv_shape *t, const struct dt_conv_bf16_geom *gt,
                         const struct dt_pool_grad *pool, int sample, dt_bf16 *dyq, dt_bf16 *xv)
{
    int poh = pool->g.oh, pow = pool->g.ow;
    size_t at = (size_t)sample * pool->c * poh * pow, pair_plane = (size_t)gt->positions * 2;
    __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
    for (int k = 0; k < s->k; k += 2) {
        bool second = k + 1 < s->k;
        for (int oy = 0; oy < poh; oy++)
            for (int ox = 0; ox < pow; ox += 16) {
                __mmask16 m = dt_lanes(pow - ox);
                int base = 2 * oy * pool->w + 2 * ox;
                __m512i c[2][4];
                for (int j = 0; j < 2; j++) {
                    if (j == 1 && !second) {
                        for (int r = 0; r < 4; r++)
                            c[1][r] = _mm512_setzero_si512();
                        break;
                    }
                    unpool_windows(pool, at + ((size_t)(k + j) * poh + oy) * pow + ox, base, m,
                                   c[j]);
                    for (int r = 0; r < 2; r++) {
                        dt_bf16 *row =
                            dyq + (size_t)(k + j) * g->qrow + (size_t)(2 * oy + r) * g->wp + 2 * ox;
                        __m512i cols =
                            _mm512_or_si512(_mm512_srli_epi32(c[j][2 * r], 16), c[j][2 * r + 1]);
                        _mm512_mask_storeu_epi32(row, m, cols);
                    }
                }
                if (!xv)
                    continue;
                __mmask16 mlo = dt_lanes(2 * (pow - ox)), mhi = dt_lanes(2 * (pow - ox) - 16);
                for (int r = 0; r < 2; r++) {
                    __m512i even = _mm512_or_si512(_mm512_srli_epi32(c[0][2 * r], 16), c[1][2 * r]);
                    __m512i odd =
                        _mm512_or_si512(_mm512_srli_epi32(c[0][2 * r + 1], 16), c[1][2 * r + 1]);
                    __m512i a = _mm512_permutex2var_epi32(even, lo, odd);
                    __m512i b = _mm512_permutex2var_epi32(even, hi, odd);
                    size_t pos = (size_t)(t->pad + 2 * oy + r) * gt->wp + t->pad + 2 * ox;
                    dt_bf16 *dst = xv + (size_t)(k / 2) * pair_plane + pos * 2;
                    dt_bf16 *shifted = gt->tap_pairs ? dst + 8 * pair_plane - 2 : NULL;
                    store_pairs(dst, shifted, pos == 0, mlo, a);
                    store_pairs(dst + 32, shifted ? shifted + 32 : NULL, false, mhi, b);
                }
            }
    }
}

/* bn_dy_image (conv_bf16.h): a channel pair's rows 16 positions at a time, each channel's
 * values stored as its dY row and the pair interleaved into the pair plane (pair_row's
 * stores). */
static BODY void bn_dy_image_body(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                                  const struct dt_conv_shape *t, const struct dt_conv_bf16_geom *gt,
                                  const struct dt_bn_grad *bn, bool x_bf16, const float *dy,
                                  int sample, dt_bf16 *dyq, dt_bf16 *xv)
{
    size_t plane = (size_t)g->oh * g->ow, at = (size_t)sample * s->k * plane;
    size_t pair_plane = (size_t)gt->positions * 2;
    const void *xb = x_bf16 ? (const void *)bn->xh : (const void *)bn->x;
    for (int k = 0; k < s->k; k += 2) {
        bool second = k + 1 < s->k;
        for (int y = 0; y < g->oh; y++) {
            size_t i0 = at + (size_t)k * plane + (size_t)y * g->ow;
            size_t pos = (size_t)(t->pad + y) * gt->wp + t->pad;
            /* the next pair's rows (the next sample's first pair's after the last) */
            dt_prefetch_next_pair(dy, false, i0, (size_t)g->ow, plane);
            dt_prefetch_next_pair(xb, x_bf16, i0, (size_t)g->ow, plane);
            dt_bf16 *row = dyq + (size_t)k * g->qrow + (size_t)y * g->wp;
            for (int x = 0; x < g->ow; x += 16) {
                __mmask16 m = dt_lanes(g->ow - x);
                __m512i pair =
                    dt_bn_dy_pair(bn, x_bf16, dy, k, second, i0 + x, plane, m, row + x, g->qrow);
                if (!xv)
                    continue;
                dt_bf16 *dst = xv + (size_t)(k / 2) * pair_plane + (pos + x) * 2;
                store_pairs(dst, gt->tap_pairs ? dst + 8 * pair_plane - 2 : NULL, pos + x == 0, m,
                            pair);
            }
        }
    }
}

static void bn_dy_image(const struct dt_conv_shape *s, const struct dt_conv_bf16_geom *g,
                        const struct dt_conv_shape *t, const struct dt_conv_bf16_geom *gt,
                        const struct dt_bn_grad *bn, const float *dy, int sample, dt_bf16 *dyq,
                        dt_bf16 *xv)
{
    if (bn->xh)
        bn_dy_image_body(s, g, t, gt, bn, true, dy, sample, dyq, xv);
    else
        bn_dy_image_body(s, g, t, gt, bn, false, dy, sample, dyq, xv);
}

const struct dt_conv_bf16_layout DT_ISA_FN(dt_conv_bf16_layout) = {
    .name = "avx512",
    .pad_input_image = pad_input_image,
    .compact = compact,
    .compact_pool2x2 = compact_pool2x2,
    .compact_relu_below = compact_relu_below,
    .dy_rows_image = dy_rows_image,
    .position_pairs_image = position_pairs_image,
    .bias_parts = bias_parts,
    .unpool_image = unpool_image,
    .bn_dy_image = bn_dy_image,
};

/* Winograd F(4x4, 3x3) convolution: forward, weight gradient, input gradient.
 *
 * Math. Output is cut into 4x4 tiles; tile t reads the 6x6 input block d_t at (4ty, 4tx) of
 * the padded input (tiles that run past the output are computed on zeros and cropped). With
 * Lavin & Gray's matrices B^T (6x6), G (6x3) and A^T (4x6) for the points 0, +-1, +-2, inf:
 *   forward          U = G w G^T per (k, c),  V = B^T d B per (tile, c),
 *                    M[p] = V[p] x U[p] (per position p of the 6x6 domain: [tiles]x[C] times
 *                    [C]x[K]),  y tile = A^T M A
 * and the two gradients are its exact adjoints, computed in the same domain:
 *   weight grad      dM = A dy A^T,  dU[p] += V[p]^T x dM[p] (summed over tiles and samples),
 *                    dw = G^T dU G once at the end
 *   input grad       dV[p] = dM[p] x U[p]^T,  dx += B dV B^T scattered into the overlapping
 *                    6x6 input blocks.
 * A 4x4 output tile costs 36 multiplications per channel pair instead of direct convolution's
 * 9 x 16 = 144; with the transforms, about 3x fewer flops at the ConvNet's 16->32 channels.
 * The bias gradient is read off dM: position (1, 1) of A dy A^T is the tile's sum.
 *
 * Layout. Channels are the vector dimension: each sample is first transposed (16x16 register
 * transposes) into a channels-last plane [row][col][C16] (C16 = C rounded up to 16, the extra
 * lanes zero), so a transform is plain vector arithmetic on 36 vectors with no shuffles, and
 * the products are small GEMMs vectorised along K (forward, weight gradient) or C (input
 * gradient) with one broadcast operand, like the direct kernels' register blocks (<= 12 rows x
 * <= 4 vectors of accumulators). V and M are stored tile-major ([tile][p][channel]) so the
 * transforms read and write them sequentially. Results are transposed back to NCHW at the end,
 * where the forward also adds the bias and applies the ReLU; or the forward max-pools 2x2 in
 * its output transform (the tiles align with the windows) and only the pooled output and the
 * winners' indices are transposed back (forward_pool2).
 *
 * Cache. A sample's tiles are processed in blocks sized so the block's V and M (36 positions x
 * tiles x (C16 + K16) floats) stay in L2 next to U; for the ConvNet a block is the whole sample.
 * Work is partitioned by sample over the OpenMP team; the weight gradient keeps one dU per thread
 * and sums them in thread order, so results depend only on the thread count.
 *
 * When Winograd pays (dt_conv_winograd_preferred). Measured on this project's Zen 5 VM, one
 * thread, forward + both gradients at batch 128 against the direct kernels (ms, Winograd vs
 * direct, 26x26 input unless noted): 16->32 5.1 vs 13.1; 8->32 4.0 vs 6.8; 8->16 2.6 vs 3.4;
 * 16->8 2.9 vs 3.2; 4->32 3.8 vs 4.1; 16->16 3.2 vs 6.4; but 3->32 3.8 vs 3.7, 6->16 2.6 vs 2.7,
 * 8->8 2.4 vs 1.8, 4->16 2.5 vs 2.1 and 1->16 2.4 vs 1.6: channels are padded to 16 lanes, and
 * with few of them the transforms cost more than the products save. 32->64 with pad 1 wins at
 * every size from 16x16 (9.3 vs 23.9) down to 2x2 (2.9 vs 5.0), because the direct kernels'
 * backward is slow on small planes. The rule: C >= 8, K >= 8 and C * K >= 128.
 */
#include "nn/conv_winograd.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

#include <omp.h>

#include "nn/simd.h"
#include "util/err.h"

enum {
    POS = 36,             /* positions of the 6x6 Winograd domain */
    MAX_RB = 12,          /* rows per register block of the products */
    MAX_VB = 4,           /* 16-float vectors per register block */
    BLOCK_FLOATS = 65536, /* V + M floats of one tile block: 256 KB, a quarter of L2 */
    PREFER_MIN_CHANNELS = 8,
    PREFER_MIN_PRODUCT = 128, /* C * K */
};

/* ---- shape bookkeeping ---------------------------------------------------------------- */

bool dt_conv_winograd_supported(const struct dt_conv_shape *s)
{
    if (!DT_HAVE_AVX512 || !s || s->n < 1 || s->c < 1 || s->h < 1 || s->w < 1 || s->k < 1)
        return false;
    if (s->kh != 3 || s->kw != 3 || s->stride != 1 || (s->pad != 0 && s->pad != 1))
        return false;
    if (s->h > INT_MAX / 4 || s->w > INT_MAX / 4 || s->c > INT_MAX / 64 || s->k > INT_MAX / 64)
        return false;
    int oh = s->h + 2 * s->pad - 2, ow = s->w + 2 * s->pad - 2;
    if (oh < 1 || ow < 1)
        return false;
    long long th = (oh + 3) / 4, tw = (ow + 3) / 4;
    int c16 = (int)round_lanes((size_t)s->c), k16 = (int)round_lanes((size_t)s->k);
    if (!fits_int(s->n, s->c, s->h, s->w) || !fits_int(s->n, s->k, oh, ow) ||
        !fits_int(4 * th + 2, 4 * tw + 2, c16, 1) || !fits_int(4 * th, 4 * tw, k16, 1) ||
        !fits_int(POS, c16, k16, 1) || !fits_int(POS, th * tw, c16 + k16, 1))
        return false;
    return dt_conv_direct_uses_simd();
}

bool dt_conv_winograd_preferred(const struct dt_conv_shape *s)
{
    return dt_conv_winograd_supported(s) && s->c >= PREFER_MIN_CHANNELS &&
           s->k >= PREFER_MIN_CHANNELS && (long long)s->c * s->k >= PREFER_MIN_PRODUCT;
}

/* Per-call geometry derived once from the public shape. */
struct geom {
    int n, c, h, w, k, pad;
    int oh, ow, th, tw, tiles;
    int nt;     /* tiles per block */
    int hi, wi; /* tiled input plane: (4 th + 2) x (4 tw + 2) */
    int ho, wo; /* tiled output plane: 4 th x 4 tw */
    int c16, k16;
    size_t filter;                 /* floats of U (or U^T) at the start of scratch */
    size_t in, out, v, m, acc, db; /* sections of one thread's scratch (din: as in) */
    size_t per_thread;
};

static struct geom geom_of(const struct dt_conv_shape *s)
{
    struct geom g = {.n = s->n, .c = s->c, .h = s->h, .w = s->w, .k = s->k, .pad = s->pad};
    g.oh = g.h + 2 * g.pad - 2;
    g.ow = g.w + 2 * g.pad - 2;
    g.th = (g.oh + 3) / 4;
    g.tw = (g.ow + 3) / 4;
    g.tiles = g.th * g.tw;
    g.hi = 4 * g.th + 2;
    g.wi = 4 * g.tw + 2;
    g.ho = 4 * g.th;
    g.wo = 4 * g.tw;
    g.c16 = (int)round_lanes((size_t)g.c);
    g.k16 = (int)round_lanes((size_t)g.k);
    int nt = BLOCK_FLOATS / (POS * (g.c16 + g.k16));
    nt = nt < MAX_RB ? MAX_RB : nt;
    g.nt = nt < g.tiles ? nt : g.tiles;
    g.filter = round_lanes((size_t)POS * g.c16 * g.k16);
    g.in = round_lanes((size_t)g.hi * g.wi * g.c16);
    g.out = round_lanes((size_t)g.ho * g.wo * g.k16);
    g.v = round_lanes((size_t)POS * g.nt * g.c16);
    g.m = round_lanes((size_t)POS * g.nt * g.k16);
    g.acc = g.filter;
    g.db = round_lanes((size_t)g.k16);
    g.per_thread = 2 * g.in + g.out + g.v + g.m + g.acc + g.db;
    return g;
}

size_t dt_conv_winograd_scratch_floats(const struct dt_conv_shape *s, int threads)
{
    if (!dt_conv_winograd_supported(s) || threads < 1)
        return 0;
    struct geom g = geom_of(s);
    return g.filter + (size_t)threads * g.per_thread;
}

size_t dt_conv_winograd_filter_floats(const struct dt_conv_shape *s)
{
    return dt_conv_winograd_supported(s) ? geom_of(s).filter : 0;
}

static int check_call(const struct dt_conv_shape *s, size_t have, int threads, const char *what)
{
    return dt_conv_check_call("conv_winograd", what, s, dt_conv_winograd_supported(s),
                              "a 3x3 kernel, stride 1, pad 0 or 1, AVX-512", threads, have,
                              dt_conv_winograd_scratch_floats(s, threads));
}

/* One thread's scratch sections. */
struct wscratch {
    float *in;  /* channels-last input plane [hi][wi][c16] (x) */
    float *din; /* the same for dx being accumulated */
    float *out; /* channels-last output plane [ho][wo][k16] (y or dy) */
    float *v;   /* V or dV of a tile block: [nt][POS][c16] */
    float *m;   /* M or dM of a tile block: [nt][POS][k16] */
    float *acc; /* weight gradient: dU [POS][c16][k16] */
    float *db;  /* weight gradient: bias sums [k16] */
};

static struct wscratch wscratch_of(const struct geom *g, float *scratch, int thread)
{
    struct wscratch w;
    w.in = scratch + g->filter + (size_t)thread * g->per_thread;
    w.din = w.in + g->in;
    w.out = w.din + g->in;
    w.v = w.out + g->out;
    w.m = w.v + g->v;
    w.acc = w.m + g->m;
    w.db = w.acc + g->acc;
    return w;
}

#if DT_HAVE_AVX512

static __mmask16 lane_mask(int valid)
{
    if (valid <= 0)
        return 0;
    return valid >= LANES ? 0xffff : (__mmask16)((1u << valid) - 1);
}

/* ---- 1-D transforms on vectors (each lane an independent channel) ---------------------- */

#define SET1 _mm512_set1_ps
#define ADD  _mm512_add_ps
#define SUB  _mm512_sub_ps
#define MUL  _mm512_mul_ps
#define FMA  _mm512_fmadd_ps  /* a * b + c */
#define FNMA _mm512_fnmadd_ps /* -(a * b) + c */

/* r = B^T d (6 -> 6). */
INLINE SIMD void bt6(const __m512 d[6], __m512 r[6])
{
    __m512 four = SET1(4.0f), five = SET1(5.0f), two = SET1(2.0f);
    __m512 t0 = FNMA(four, d[2], d[4]), t1 = FNMA(four, d[1], d[3]);
    __m512 t2 = SUB(d[4], d[2]), t3 = MUL(two, SUB(d[3], d[1]));
    r[0] = FMA(four, d[0], FNMA(five, d[2], d[4]));
    r[1] = ADD(t0, t1);
    r[2] = SUB(t0, t1);
    r[3] = ADD(t2, t3);
    r[4] = SUB(t2, t3);
    r[5] = FMA(four, d[1], FNMA(five, d[3], d[5]));
}

/* h = B v (6 -> 6), the adjoint of bt6. */
INLINE SIMD void b6(const __m512 v[6], __m512 h[6])
{
    __m512 four = SET1(4.0f), five = SET1(5.0f), two = SET1(2.0f);
    __m512 s12 = SUB(v[1], v[2]), a12 = ADD(v[1], v[2]);
    __m512 s34 = SUB(v[3], v[4]), a34 = ADD(v[3], v[4]);
    h[0] = MUL(four, v[0]);
    h[1] = FNMA(two, s34, MUL(four, SUB(v[5], s12)));
    h[2] = SUB(FNMA(four, a12, FNMA(five, v[0], _mm512_setzero_ps())), a34);
    h[3] = FNMA(five, v[5], FMA(two, s34, s12));
    h[4] = ADD(ADD(v[0], a12), a34);
    h[5] = v[5];
}

/* o = A^T m (6 -> 4). */
INLINE SIMD void at6(const __m512 m[6], __m512 o[4])
{
    __m512 s12 = SUB(m[1], m[2]), a12 = ADD(m[1], m[2]);
    __m512 s34 = SUB(m[3], m[4]), a34 = ADD(m[3], m[4]);
    o[0] = ADD(ADD(m[0], a12), a34);
    o[1] = FMA(SET1(2.0f), s34, s12);
    o[2] = FMA(SET1(4.0f), a34, a12);
    o[3] = ADD(FMA(SET1(8.0f), s34, s12), m[5]);
}

/* h = A g (4 -> 6), the adjoint of at6. */
INLINE SIMD void a6(const __m512 g[4], __m512 h[6])
{
    __m512 e = ADD(g[0], g[2]), o = ADD(g[1], g[3]);
    __m512 e2 = FMA(SET1(4.0f), g[2], g[0]), o2 = FMA(SET1(8.0f), g[3], MUL(SET1(2.0f), g[1]));
    h[0] = g[0];
    h[1] = ADD(e, o);
    h[2] = SUB(e, o);
    h[3] = ADD(e2, o2);
    h[4] = SUB(e2, o2);
    h[5] = g[3];
}

/* h = G g (3 -> 6). */
INLINE SIMD void g6(const __m512 g[3], __m512 h[6])
{
    __m512 s = ADD(g[0], g[2]), sixth = SET1(-1.0f / 6.0f);
    __m512 q = FMA(SET1(1.0f / 24.0f), g[0], MUL(SET1(1.0f / 6.0f), g[2]));
    __m512 r = MUL(SET1(1.0f / 12.0f), g[1]);
    h[0] = MUL(SET1(0.25f), g[0]);
    h[1] = MUL(sixth, ADD(s, g[1]));
    h[2] = MUL(sixth, SUB(s, g[1]));
    h[3] = ADD(q, r);
    h[4] = SUB(q, r);
    h[5] = g[2];
}

/* r = G^T a (6 -> 3), the adjoint of g6. */
INLINE SIMD void gt3(const __m512 a[6], __m512 r[3])
{
    __m512 a12 = ADD(a[1], a[2]), s12 = SUB(a[1], a[2]);
    __m512 a34 = ADD(a[3], a[4]), s34 = SUB(a[3], a[4]);
    __m512 sixth = SET1(1.0f / 6.0f);
    r[0] = FMA(SET1(1.0f / 24.0f), a34, FNMA(sixth, a12, MUL(SET1(0.25f), a[0])));
    r[1] = FMA(SET1(1.0f / 12.0f), s34, MUL(SET1(-1.0f / 6.0f), s12));
    r[2] = FMA(sixth, SUB(a34, a12), a[5]);
}

/* ---- layout: NCHW planes <-> channels-last planes ------------------------------------ */

/* Transposes 16 rows of 16 floats in place. */
INLINE SIMD void transpose16(__m512 r[16])
{
    __m512 t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* s[4g + j] holds, in 128-bit lane L, rows 4g..4g+3 of column 4L + j */
    __m512 s[16];
    for (int q = 0; q < 4; q++) {
        __m512d a = _mm512_castps_pd(t[4 * q]), b = _mm512_castps_pd(t[4 * q + 1]);
        __m512d c = _mm512_castps_pd(t[4 * q + 2]), d = _mm512_castps_pd(t[4 * q + 3]);
        s[4 * q + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        s[4 * q + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        s[4 * q + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        s[4 * q + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    for (int j = 0; j < 4; j++) {
        __m512 u0 = _mm512_shuffle_f32x4(s[j], s[4 + j], 0x88);
        __m512 u1 = _mm512_shuffle_f32x4(s[8 + j], s[12 + j], 0x88);
        __m512 w0 = _mm512_shuffle_f32x4(s[j], s[4 + j], 0xdd);
        __m512 w1 = _mm512_shuffle_f32x4(s[8 + j], s[12 + j], 0xdd);
        r[j] = _mm512_shuffle_f32x4(u0, u1, 0x88);
        r[8 + j] = _mm512_shuffle_f32x4(u0, u1, 0xdd);
        r[4 + j] = _mm512_shuffle_f32x4(w0, w1, 0x88);
        r[12 + j] = _mm512_shuffle_f32x4(w0, w1, 0xdd);
    }
}

static SIMD void zero_floats(float *p, size_t n)
{
    memset(p, 0, n * sizeof *p);
}

/* Loads 16 rows of 16 floats at p + i * stride; rows >= nr and lanes >= nx read as zero. */
INLINE SIMD void load_rows(__m512 r[16], const float *p, size_t stride, int nr, int nx)
{
    if (nr == LANES && nx == LANES) {
#pragma GCC unroll 16
        for (int i = 0; i < LANES; i++)
            r[i] = _mm512_loadu_ps(p + i * stride);
        return;
    }
    __mmask16 m = lane_mask(nx);
#pragma GCC unroll 16
    for (int i = 0; i < LANES; i++)
        r[i] = _mm512_maskz_loadu_ps(i < nr ? m : 0, p + (i < nr ? i * stride : 0));
}

/* src [ch][h][w] -> dst [dh][dw][dc] at (off, off); dst is zero outside that region and in the
 * lanes ch..dc-1. dc is a multiple of 16 >= ch; off + h <= dh, off + w <= dw. The plane is
 * walked as one run of h * w pixels in blocks of 16 (whatever rows they span), so every load
 * but the plane's last is a full vector. */
static SIMD void to_channels_last(const float *src, int ch, int h, int w, float *dst, int dh,
                                  int dw, int dc, int off)
{
    size_t row = (size_t)dw * dc, plane = (size_t)h * w;
    zero_floats(dst, (size_t)off * row);
    zero_floats(dst + (size_t)(off + h) * row, (size_t)(dh - off - h) * row);
    for (int y = 0; y < h; y++) {
        float *d = dst + (size_t)(y + off) * row;
        zero_floats(d, (size_t)off * dc);
        zero_floats(d + (size_t)(off + w) * dc, (size_t)(dw - off - w) * dc);
    }
    for (int c0 = 0; c0 < dc; c0 += LANES) {
        int nc = ch - c0 < LANES ? ch - c0 : LANES;
        float *d = dst + ((size_t)off * dw + off) * dc + c0; /* pixel (0, 0) */
        int y = 0, x = 0;
        for (size_t q0 = 0; q0 < plane; q0 += LANES) {
            int nq = plane - q0 < LANES ? (int)(plane - q0) : LANES;
            __m512 r[16];
            load_rows(r, src + (size_t)c0 * plane + q0, plane, nc, nq);
            transpose16(r);
#pragma GCC unroll 16
            for (int i = 0; i < LANES; i++)
                if (i < nq) {
                    _mm512_storeu_ps(d + ((size_t)y * dw + x) * dc, r[i]);
                    if (++x == w)
                        x = 0, y++;
                }
        }
    }
}

/* dst [ch][h][w] = src [sh][sw][sc] at (off, off), plus bias (when not NULL), ReLU'd when
 * relu != 0. Walks the output plane in runs of 16 pixels like to_channels_last. Without bias
 * and ReLU only moves bits (it also carries int32 pool indices). */
static SIMD void from_channels_last(const float *src, int sw, int sc, int off, float *dst, int ch,
                                    int h, int w, const float *bias, int relu)
{
    size_t plane = (size_t)h * w;
    for (int c0 = 0; c0 < ch; c0 += LANES) {
        int nc = ch - c0 < LANES ? ch - c0 : LANES;
        __mmask16 cm = lane_mask(nc);
        __m512 b = bias ? _mm512_maskz_loadu_ps(cm, bias + c0) : _mm512_setzero_ps();
        const float *s = src + ((size_t)off * sw + off) * sc + c0; /* pixel (0, 0) */
        int y = 0, x = 0;
        for (size_t q0 = 0; q0 < plane; q0 += LANES) {
            int nq = plane - q0 < LANES ? (int)(plane - q0) : LANES;
            __m512 r[16];
#pragma GCC unroll 16
            for (int i = 0; i < LANES; i++) {
                r[i] = _mm512_setzero_ps();
                if (i < nq) {
                    r[i] = _mm512_loadu_ps(s + ((size_t)y * sw + x) * sc);
                    if (bias)
                        r[i] = ADD(r[i], b);
                    if (relu)
                        r[i] = _mm512_max_ps(r[i], _mm512_setzero_ps());
                    if (++x == w)
                        x = 0, y++;
                }
            }
            transpose16(r);
            float *d = dst + (size_t)c0 * plane + q0;
            __mmask16 m = lane_mask(nq);
            if (nq == LANES && nc == LANES) {
#pragma GCC unroll 16
                for (int c = 0; c < LANES; c++)
                    _mm512_storeu_ps(d + c * plane, r[c]);
            } else {
#pragma GCC unroll 16
                for (int c = 0; c < LANES; c++)
                    if (c < nc)
                        _mm512_mask_storeu_ps(d + c * plane, m, r[c]);
            }
        }
    }
}

/* ---- tile transforms ------------------------------------------------------------------ */

/* V[t][p][c16] = B^T d B for the nb tiles from t0 (d read from the channels-last input). */
static SIMD void input_transform(const struct geom *g, const float *in, int t0, int nb, float *v)
{
    size_t pstride = (size_t)g->c16, row = (size_t)g->wi * g->c16;
    for (int t = 0; t < nb; t++) {
        int ty = (t0 + t) / g->tw, tx = (t0 + t) % g->tw;
        const float *base = in + (size_t)(4 * ty) * row + (size_t)(4 * tx) * g->c16;
        float *dst = v + (size_t)t * POS * g->c16;
        for (int cv = 0; cv < g->c16; cv += LANES) {
            __m512 r[6][6];
            for (int i = 0; i < 6; i++) {
                __m512 d[6];
                for (int j = 0; j < 6; j++)
                    d[j] = _mm512_loadu_ps(base + i * row + (size_t)j * g->c16 + cv);
                bt6(d, r[i]);
            }
            for (int j = 0; j < 6; j++) {
                __m512 col[6], o[6];
                for (int i = 0; i < 6; i++)
                    col[i] = r[i][j];
                bt6(col, o);
                for (int i = 0; i < 6; i++)
                    _mm512_storeu_ps(dst + (size_t)(i * 6 + j) * pstride + cv, o[i]);
            }
        }
    }
}

/* in[6x6 block of tile] += B dV B^T for the nb tiles from t0: the adjoint of input_transform. */
static SIMD void input_adjoint(const struct geom *g, const float *v, int t0, int nb, float *in)
{
    size_t pstride = (size_t)g->c16, row = (size_t)g->wi * g->c16;
    for (int t = 0; t < nb; t++) {
        int ty = (t0 + t) / g->tw, tx = (t0 + t) % g->tw;
        float *base = in + (size_t)(4 * ty) * row + (size_t)(4 * tx) * g->c16;
        const float *src = v + (size_t)t * POS * g->c16;
        for (int cv = 0; cv < g->c16; cv += LANES) {
            __m512 r[6][6];
            for (int j = 0; j < 6; j++) {
                __m512 col[6], o[6];
                for (int i = 0; i < 6; i++)
                    col[i] = _mm512_loadu_ps(src + (size_t)(i * 6 + j) * pstride + cv);
                b6(col, o);
                for (int i = 0; i < 6; i++)
                    r[i][j] = o[i];
            }
            for (int i = 0; i < 6; i++) {
                __m512 o[6];
                b6(r[i], o);
                for (int j = 0; j < 6; j++) {
                    float *p = base + i * row + (size_t)j * g->c16 + cv;
                    _mm512_storeu_ps(p, ADD(_mm512_loadu_ps(p), o[j]));
                }
            }
        }
    }
}

/* out[4x4 block of tile] = A^T M A for the nb tiles from t0. */
static SIMD void output_transform(const struct geom *g, const float *m, int t0, int nb, float *out)
{
    size_t pstride = (size_t)g->k16, row = (size_t)g->wo * g->k16;
    for (int t = 0; t < nb; t++) {
        int ty = (t0 + t) / g->tw, tx = (t0 + t) % g->tw;
        float *base = out + (size_t)(4 * ty) * row + (size_t)(4 * tx) * g->k16;
        const float *src = m + (size_t)t * POS * g->k16;
        for (int kv = 0; kv < g->k16; kv += LANES) {
            __m512 r[4][6];
            for (int j = 0; j < 6; j++) {
                __m512 col[6], o[4];
                for (int i = 0; i < 6; i++)
                    col[i] = _mm512_loadu_ps(src + (size_t)(i * 6 + j) * pstride + kv);
                at6(col, o);
                for (int a = 0; a < 4; a++)
                    r[a][j] = o[a];
            }
            for (int a = 0; a < 4; a++) {
                __m512 o[4];
                at6(r[a], o);
                for (int b = 0; b < 4; b++)
                    _mm512_storeu_ps(base + a * row + (size_t)b * g->k16 + kv, o[b]);
            }
        }
    }
}

/* mx, best = the window's running maximum and its index: v at index i wins when greater or NaN
 * (the first maximum, NaN propagating: nn/layer_maxpool2d.c's rule). */
INLINE SIMD void pool_step(__m512 *mx, __m512i *best, __m512 v, int i)
{
    __mmask16 t = _mm512_cmp_ps_mask(v, *mx, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    *mx = _mm512_mask_mov_ps(*mx, t, v);
    *best = _mm512_mask_mov_epi32(*best, t, _mm512_set1_epi32(i));
}

/* The output tiles of output_transform plus bias, ReLU'd when relu, then max-pooled 2x2: val
 * [ho/2][wo/2][k16] the maxima, idx (same layout, int32) each winner's index in its [oh][ow]
 * output plane. The same float operations per element as the unpooled path. */
static SIMD void output_transform_pool2(const struct geom *g, const float *m, int t0, int nb,
                                        const float *bias, int relu, float *val, int32_t *idx)
{
    size_t pstride = (size_t)g->k16, prow = (size_t)(g->wo / 2) * g->k16;
    for (int t = 0; t < nb; t++) {
        int ty = (t0 + t) / g->tw, tx = (t0 + t) % g->tw;
        const float *src = m + (size_t)t * POS * g->k16;
        for (int kv = 0; kv < g->k16; kv += LANES) {
            __m512 r[4][6], o[4][4];
            for (int j = 0; j < 6; j++) {
                __m512 col[6], c4[4];
                for (int i = 0; i < 6; i++)
                    col[i] = _mm512_loadu_ps(src + (size_t)(i * 6 + j) * pstride + kv);
                at6(col, c4);
                for (int a = 0; a < 4; a++)
                    r[a][j] = c4[a];
            }
            __m512 bv =
                bias ? _mm512_maskz_loadu_ps(lane_mask(g->k - kv), bias + kv) : _mm512_setzero_ps();
            for (int a = 0; a < 4; a++) {
                at6(r[a], o[a]);
                for (int b = 0; b < 4; b++) {
                    if (bias)
                        o[a][b] = ADD(o[a][b], bv);
                    if (relu)
                        o[a][b] = _mm512_max_ps(o[a][b], _mm512_setzero_ps());
                }
            }
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 2; j++) {
                    int at = (4 * ty + 2 * i) * g->ow + 4 * tx + 2 * j;
                    __m512 mx = o[2 * i][2 * j];
                    __m512i best = _mm512_set1_epi32(at);
                    pool_step(&mx, &best, o[2 * i][2 * j + 1], at + 1);
                    pool_step(&mx, &best, o[2 * i + 1][2 * j], at + g->ow);
                    pool_step(&mx, &best, o[2 * i + 1][2 * j + 1], at + g->ow + 1);
                    size_t d = (size_t)(2 * ty + i) * prow + (size_t)(2 * tx + j) * g->k16 + kv;
                    _mm512_storeu_ps(val + d, mx);
                    _mm512_storeu_si512(idx + d, best);
                }
        }
    }
}

/* dM[t][p][k16] = A dY A^T for the nb tiles from t0: the adjoint of output_transform. */
static SIMD void output_adjoint(const struct geom *g, const float *out, int t0, int nb, float *m)
{
    size_t pstride = (size_t)g->k16, row = (size_t)g->wo * g->k16;
    for (int t = 0; t < nb; t++) {
        int ty = (t0 + t) / g->tw, tx = (t0 + t) % g->tw;
        const float *base = out + (size_t)(4 * ty) * row + (size_t)(4 * tx) * g->k16;
        float *dst = m + (size_t)t * POS * g->k16;
        for (int kv = 0; kv < g->k16; kv += LANES) {
            __m512 r[4][6];
            for (int a = 0; a < 4; a++) {
                __m512 d[4];
                for (int b = 0; b < 4; b++)
                    d[b] = _mm512_loadu_ps(base + a * row + (size_t)b * g->k16 + kv);
                a6(d, r[a]);
            }
            for (int j = 0; j < 6; j++) {
                __m512 col[4], o[6];
                for (int a = 0; a < 4; a++)
                    col[a] = r[a][j];
                a6(col, o);
                for (int i = 0; i < 6; i++)
                    _mm512_storeu_ps(dst + (size_t)(i * 6 + j) * pstride + kv, o[i]);
            }
        }
    }
}

/* ---- the products --------------------------------------------------------------------- */

/* c[r][0 .. 16 vb) (+)= sum over q < nq of a[r ars + q aqs] * b[q bs + 0 .. 16 vb), r < rb.
 * The sum starts from zero and is added to c once: the weight gradient accumulates a batch's
 * thousands of tiles, and one long chain of FMAs onto the same accumulator lost an order of
 * magnitude of precision (8.7e-5 of max |dw| at batch 128, now as good as direct). */
INLINE SIMD void gemm_block(const float *a, size_t ars, size_t aqs, const float *b, size_t bs,
                            int nq, float *c, size_t cs, bool accumulate, const int rb,
                            const int vb)
{
    __m512 acc[MAX_RB][MAX_VB];
#pragma GCC unroll 12
    for (int r = 0; r < rb; r++)
#pragma GCC unroll 4
        for (int j = 0; j < vb; j++)
            acc[r][j] = _mm512_setzero_ps();
    for (int q = 0; q < nq; q++) {
        __m512 bv[MAX_VB];
#pragma GCC unroll 4
        for (int j = 0; j < vb; j++)
            bv[j] = _mm512_loadu_ps(b + q * bs + j * LANES);
        const float *aq = a + q * aqs;
#pragma GCC unroll 12
        for (int r = 0; r < rb; r++) {
            __m512 s = _mm512_set1_ps(aq[r * ars]);
#pragma GCC unroll 4
            for (int j = 0; j < vb; j++)
                acc[r][j] = _mm512_fmadd_ps(s, bv[j], acc[r][j]);
        }
    }
#pragma GCC unroll 12
    for (int r = 0; r < rb; r++)
#pragma GCC unroll 4
        for (int j = 0; j < vb; j++) {
            float *cp = c + r * cs + j * LANES;
            _mm512_storeu_ps(cp, accumulate ? ADD(_mm512_loadu_ps(cp), acc[r][j]) : acc[r][j]);
        }
}

/* Rows per register block for vb vectors: about 24-28 accumulators. */
static int max_rows(int vb)
{
    static const int rows[MAX_VB + 1] = {0, 12, 12, 8, 6};
    return rows[vb];
}

static SIMD void gemm_block_any(const float *a, size_t ars, size_t aqs, const float *b, size_t bs,
                                int nq, float *c, size_t cs, bool accumulate, int rb, int vb)
{
    switch ((vb - 1) * MAX_RB + rb - 1) {
#define GEMM_CASE(v, r)                                                                            \
    case ((v)-1) * MAX_RB + (r)-1:                                                                 \
        gemm_block(a, ars, aqs, b, bs, nq, c, cs, accumulate, r, v);                               \
        break;
#define GEMM_ROWS6(v)                                                                              \
    GEMM_CASE(v, 1) GEMM_CASE(v, 2) GEMM_CASE(v, 3) GEMM_CASE(v, 4) GEMM_CASE(v, 5) GEMM_CASE(v, 6)
#define GEMM_ROWS8(v) GEMM_ROWS6(v) GEMM_CASE(v, 7) GEMM_CASE(v, 8)
#define GEMM_ROWS12(v)                                                                             \
    GEMM_ROWS8(v) GEMM_CASE(v, 9) GEMM_CASE(v, 10) GEMM_CASE(v, 11) GEMM_CASE(v, 12)
        GEMM_ROWS12(1)
        GEMM_ROWS12(2)
        GEMM_ROWS8(3)
        GEMM_ROWS6(4)
#undef GEMM_ROWS12
#undef GEMM_ROWS8
#undef GEMM_ROWS6
#undef GEMM_CASE
    default:
        break;
    }
}

/* Block size: the fewest blocks of at most `max`, balanced. */
static int block_size(int total, int max)
{
    int blocks = (total + max - 1) / max;
    return (total + blocks - 1) / blocks;
}

/* c[rows][16 vecs] (+)= a[rows][nq] x b[nq][16 vecs], a addressed with strides (ars, aqs). */
static SIMD void gemm(const float *a, size_t ars, size_t aqs, int rows, const float *b, size_t bs,
                      int nq, int vecs, float *c, size_t cs, bool accumulate)
{
    int vbs = block_size(vecs, MAX_VB);
    for (int v0 = 0; v0 < vecs; v0 += vbs) {
        int vb = vecs - v0 < vbs ? vecs - v0 : vbs;
        int rbs = block_size(rows, max_rows(vb));
        for (int r0 = 0; r0 < rows; r0 += rbs) {
            int rb = rows - r0 < rbs ? rows - r0 : rbs;
            gemm_block_any(a + r0 * ars, ars, aqs, b + v0 * LANES, bs, nq, c + r0 * cs + v0 * LANES,
                           cs, accumulate, rb, vb);
        }
    }
}

/* ---- filters -------------------------------------------------------------------------- */

/* u[p][o][i16] = (G w G^T)[p] for the operand w[k][c][3][3] viewed as out o / in i: with
 * `transpose` false o = c, i = k (the forward's U, vectorised along k); with it o = k, i = c
 * (the input gradient's U^T, vectorised along c). Lanes past the channel count are zero. */
static SIMD void transform_filter(const struct geom *g, const float *w, bool transpose, float *u)
{
    int outs = transpose ? g->k : g->c, ins = transpose ? g->c : g->k;
    int outs16 = transpose ? g->k16 : g->c16, ins16 = transpose ? g->c16 : g->k16;
    /* lane l of vector i0 is input channel i0 + l: stride in w between lanes */
    int lane_stride = transpose ? 9 : g->c * 9, out_stride = transpose ? g->c * 9 : 9;
    __m512i idx =
        _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                           _mm512_set1_epi32(lane_stride));
    size_t pstride = (size_t)outs16 * ins16;
    zero_floats(u, (size_t)POS * pstride);
    for (int o = 0; o < outs; o++)
        for (int i0 = 0; i0 < ins; i0 += LANES) {
            __mmask16 m = lane_mask(ins - i0);
            const float *base = w + (size_t)o * out_stride + (size_t)i0 * lane_stride;
            __m512 r[3][6];
            for (int a = 0; a < 3; a++) {
                __m512 d[3];
                for (int b = 0; b < 3; b++)
                    d[b] =
                        _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, base + a * 3 + b, 4);
                g6(d, r[a]);
            }
            for (int j = 0; j < 6; j++) {
                __m512 col[3] = {r[0][j], r[1][j], r[2][j]}, h[6];
                g6(col, h);
                for (int i = 0; i < 6; i++)
                    _mm512_storeu_ps(u + (size_t)(i * 6 + j) * pstride + (size_t)o * ins16 + i0,
                                     h[i]);
            }
        }
}

/* dw[k][c][3][3] += (G^T dU G) for dU [POS][c16][k16]; channels c in [c0, c1). */
static SIMD void weight_from_domain(const struct geom *g, const float *du, int c0, int c1,
                                    float *dw)
{
    size_t pstride = (size_t)g->c16 * g->k16;
    for (int c = c0; c < c1; c++)
        for (int k0 = 0; k0 < g->k; k0 += LANES) {
            __m512 r[6][3];
            for (int i = 0; i < 6; i++) {
                __m512 a[6];
                for (int j = 0; j < 6; j++)
                    a[j] = _mm512_loadu_ps(du + (size_t)(i * 6 + j) * pstride + (size_t)c * g->k16 +
                                           k0);
                gt3(a, r[i]);
            }
            float out[9][LANES];
            for (int s = 0; s < 3; s++) {
                __m512 col[6], o[3];
                for (int i = 0; i < 6; i++)
                    col[i] = r[i][s];
                gt3(col, o);
                for (int a = 0; a < 3; a++)
                    _mm512_storeu_ps(out[a * 3 + s], o[a]);
            }
            int nk = g->k - k0 < LANES ? g->k - k0 : LANES;
            for (int l = 0; l < nk; l++)
                for (int t = 0; t < 9; t++)
                    dw[((size_t)(k0 + l) * g->c + c) * 9 + t] += out[t][l];
        }
}

/* Asks for n floats at p to be brought into L2, a cache line at a time: the next sample's
 * input, while this one is computed (the batch's activations come from memory). */
static void prefetch_l2(const float *p, size_t n)
{
    for (size_t i = 0; i < n; i += LANES)
        _mm_prefetch((const char *)(p + i), _MM_HINT_T1);
}

/* ---- one sample ----------------------------------------------------------------------- */

/* One sample's forward; with argmax, pooled 2x2 (y is then the pooled output). */
static SIMD void forward_sample(const struct geom *g, const float *x, const float *u,
                                const float *b, float *y, int32_t *argmax, int relu,
                                const struct wscratch *ws)
{
    to_channels_last(x, g->c, g->h, g->w, ws->in, g->hi, g->wi, g->c16, g->pad);
    size_t vrow = (size_t)POS * g->c16, mrow = (size_t)POS * g->k16;
    size_t pooled = (size_t)(g->ho / 2) * (g->wo / 2) * g->k16; /* a quarter of ws->out */
    int32_t *idx = (int32_t *)(ws->out + pooled);
    for (int t0 = 0; t0 < g->tiles; t0 += g->nt) {
        int nb = g->tiles - t0 < g->nt ? g->tiles - t0 : g->nt;
        input_transform(g, ws->in, t0, nb, ws->v);
        for (int p = 0; p < POS; p++)
            gemm(ws->v + (size_t)p * g->c16, vrow, 1, nb, u + (size_t)p * g->c16 * g->k16, g->k16,
                 g->c, g->k16 / LANES, ws->m + (size_t)p * g->k16, mrow, false);
        if (argmax)
            output_transform_pool2(g, ws->m, t0, nb, b, relu, ws->out, idx);
        else
            output_transform(g, ws->m, t0, nb, ws->out);
    }
    if (!argmax) {
        from_channels_last(ws->out, g->wo, g->k16, 0, y, g->k, g->oh, g->ow, b, relu);
        return;
    }
    from_channels_last(ws->out, g->wo / 2, g->k16, 0, y, g->k, g->oh / 2, g->ow / 2, NULL, 0);
    from_channels_last((const float *)idx, g->wo / 2, g->k16, 0, (float *)argmax, g->k, g->oh / 2,
                       g->ow / 2, NULL, 0);
}

/* db += the sums of the nb tiles' dy, read off dM: position (1, 1) of A dY A^T is the sum of
 * the tile's 16 values (row 1 of A^T is all ones over the tile), so this is 1/16 of the work of
 * summing the plane (a fixed order: determinism holds). */
static SIMD void bias_sums(const struct geom *g, const float *m, int nb, float *db)
{
    for (int kv = 0; kv < g->k16; kv += LANES) {
        __m512 sum = _mm512_loadu_ps(db + kv);
        for (int t = 0; t < nb; t++)
            sum = ADD(sum, _mm512_loadu_ps(m + ((size_t)t * POS + 7) * g->k16 + kv));
        _mm512_storeu_ps(db + kv, sum);
    }
}

/* One sample's share of the gradients: with x, dU (and, with bias, db) accumulate in the
 * thread's scratch; with dx, the sample's input gradient is written. dy is converted and
 * transformed once for both. */
static SIMD void backward_sample(const struct geom *g, const float *x, const float *dy,
                                 const float *ut, bool bias, float *dx, const struct wscratch *ws)
{
    to_channels_last(dy, g->k, g->oh, g->ow, ws->out, g->ho, g->wo, g->k16, 0);
    if (x)
        to_channels_last(x, g->c, g->h, g->w, ws->in, g->hi, g->wi, g->c16, g->pad);
    if (dx)
        zero_floats(ws->din, (size_t)g->hi * g->wi * g->c16);
    size_t vrow = (size_t)POS * g->c16, mrow = (size_t)POS * g->k16;
    for (int t0 = 0; t0 < g->tiles; t0 += g->nt) {
        int nb = g->tiles - t0 < g->nt ? g->tiles - t0 : g->nt;
        output_adjoint(g, ws->out, t0, nb, ws->m);
        if (x && bias)
            bias_sums(g, ws->m, nb, ws->db);
        if (x) {
            input_transform(g, ws->in, t0, nb, ws->v);
            for (int p = 0; p < POS; p++)
                gemm(ws->v + (size_t)p * g->c16, 1, vrow, g->c, ws->m + (size_t)p * g->k16, mrow,
                     nb, g->k16 / LANES, ws->acc + (size_t)p * g->c16 * g->k16, g->k16, true);
        }
        if (dx) {
            for (int p = 0; p < POS; p++)
                gemm(ws->m + (size_t)p * g->k16, mrow, 1, nb, ut + (size_t)p * g->k16 * g->c16,
                     g->c16, g->k, g->c16 / LANES, ws->v + (size_t)p * g->c16, vrow, false);
            input_adjoint(g, ws->v, t0, nb, ws->din);
        }
    }
    if (dx)
        from_channels_last(ws->din, g->wi, g->c16, g->pad, dx, g->c, g->h, g->w, NULL, 0);
}

/* Sums the threads' dU and bias partials in thread order into thread 0's, elements
 * [i0, i1) of the adjacent acc and db sections. */
static SIMD void reduce_threads(const struct geom *g, float *scratch, int team, size_t i0,
                                size_t i1)
{
    struct wscratch w0 = wscratch_of(g, scratch, 0);
    for (size_t i = i0; i < i1; i += LANES) {
        __m512 v = _mm512_loadu_ps(w0.acc + i);
        for (int t = 1; t < team; t++)
            v = ADD(v, _mm512_loadu_ps(wscratch_of(g, scratch, t).acc + i));
        _mm512_storeu_ps(w0.acc + i, v);
    }
}

#else /* !DT_HAVE_AVX512: never called, supported() is false */

static void transform_filter(const struct geom *g, const float *w, bool transpose, float *u)
{
    (void)g, (void)w, (void)transpose, (void)u;
}
static void forward_sample(const struct geom *g, const float *x, const float *u, const float *b,
                           float *y, int32_t *argmax, int relu, const struct wscratch *ws)
{
    (void)g, (void)x, (void)u, (void)b, (void)y, (void)argmax, (void)relu, (void)ws;
}
static void backward_sample(const struct geom *g, const float *x, const float *dy, const float *ut,
                            bool bias, float *dx, const struct wscratch *ws)
{
    (void)g, (void)x, (void)dy, (void)ut, (void)bias, (void)dx, (void)ws;
}
static void reduce_threads(const struct geom *g, float *scratch, int team, size_t i0, size_t i1)
{
    (void)g, (void)scratch, (void)team, (void)i0, (void)i1;
}
static void prefetch_l2(const float *p, size_t n)
{
    (void)p, (void)n;
}
static void weight_from_domain(const struct geom *g, const float *du, int c0, int c1, float *dw)
{
    (void)g, (void)du, (void)c0, (void)c1, (void)dw;
}

#endif

/* ---- public kernels ------------------------------------------------------------------- */

int dt_conv_winograd_filter(const struct dt_conv_shape *s, const float *w, float *u)
{
    if (!dt_conv_winograd_supported(s))
        return check_call(s, 0, 1, "filter");
    struct geom g = geom_of(s);
    transform_filter(&g, w, false, u);
    return 0;
}

static int forward(const struct dt_conv_shape *s, const float *x, const float *u, const float *b,
                   float *y, int32_t *argmax, int relu, float *scratch, size_t scratch_floats,
                   int threads, const char *what)
{
    int rc = check_call(s, scratch_floats, threads, what);
    if (rc)
        return rc;
    struct geom g = geom_of(s);
    if (argmax && (g.oh < 2 || g.ow < 2))
        return dt_fail(DT_EUSAGE, "conv_winograd %s: output %dx%d is too small to pool 2x2", what,
                       g.oh, g.ow);
    size_t in_sample = (size_t)g.c * g.h * g.w, out_sample = (size_t)g.k * g.oh * g.ow;
    if (argmax)
        out_sample = (size_t)g.k * (g.oh / 2) * (g.ow / 2);
#pragma omp parallel num_threads(threads)
    {
        struct wscratch ws = wscratch_of(&g, scratch, omp_get_thread_num());
#pragma omp for schedule(static)
        for (int n = 0; n < g.n; n++) {
            if (n + 1 < g.n)
                prefetch_l2(x + (n + 1) * in_sample, in_sample);
            forward_sample(&g, x + n * in_sample, u, b, y + n * out_sample,
                           argmax ? argmax + n * out_sample : NULL, relu, &ws);
        }
    }
    return 0;
}

int dt_conv_winograd_forward_filtered(const struct dt_conv_shape *s, const float *x, const float *u,
                                      const float *b, float *y, int relu, float *scratch,
                                      size_t scratch_floats, int threads)
{
    return forward(s, x, u, b, y, NULL, relu, scratch, scratch_floats, threads, "forward");
}

int dt_conv_winograd_forward_pool2(const struct dt_conv_shape *s, const float *x, const float *u,
                                   const float *b, float *y, int32_t *argmax, int relu,
                                   float *scratch, size_t scratch_floats, int threads)
{
    return forward(s, x, u, b, y, argmax, relu, scratch, scratch_floats, threads, "forward_pool2");
}

int dt_conv_winograd_forward(const struct dt_conv_shape *s, const float *x, const float *w,
                             const float *b, float *y, int relu, float *scratch,
                             size_t scratch_floats, int threads)
{
    int rc = check_call(s, scratch_floats, threads, "forward");
    if (rc)
        return rc;
    struct geom g = geom_of(s);
    transform_filter(&g, w, false, scratch);
    return dt_conv_winograd_forward_filtered(s, x, scratch, b, y, relu, scratch, scratch_floats,
                                             threads);
}

static int backward(const struct dt_conv_shape *s, const float *x, const float *dy, const float *w,
                    float *dw, float *db, float *dx, float *scratch, size_t scratch_floats,
                    int threads, const char *what)
{
    int rc = check_call(s, scratch_floats, threads, what);
    if (rc)
        return rc;
    struct geom g = geom_of(s);
    if (dx)
        transform_filter(&g, w, true, scratch);
    if (!dw)
        x = NULL, db = NULL; /* backward_sample's signal: no weight gradient */
    size_t in_sample = (size_t)g.c * g.h * g.w, out_sample = (size_t)g.k * g.oh * g.ow;
#pragma omp parallel num_threads(threads)
    {
        int tid = omp_get_thread_num(), team = omp_get_num_threads();
        struct wscratch ws = wscratch_of(&g, scratch, tid);
        if (x)
            memset(ws.acc, 0, sizeof(float) * (g.acc + g.db)); /* acc and db are adjacent */
        int n0 = (int)((long long)g.n * tid / team), n1 = (int)((long long)g.n * (tid + 1) / team);
        for (int n = n0; n < n1; n++) {
            if (n + 1 < n1) {
                prefetch_l2(dy + (n + 1) * out_sample, out_sample);
                if (x)
                    prefetch_l2(x + (n + 1) * in_sample, in_sample);
            }
            backward_sample(&g, x ? x + n * in_sample : NULL, dy + n * out_sample, scratch,
                            db != NULL, dx ? dx + n * in_sample : NULL, &ws);
        }
        if (x) {
#pragma omp barrier
            /* in thread order, in 16-float pieces of dU and db */
            size_t pieces = (g.acc + g.db) / LANES;
            size_t p0 = pieces * tid / team, p1 = pieces * (tid + 1) / team;
            reduce_threads(&g, scratch, team, p0 * LANES, p1 * LANES);
#pragma omp barrier
            struct wscratch w0 = wscratch_of(&g, scratch, 0);
            int c0 = (int)((long long)g.c * tid / team);
            int c1 = (int)((long long)g.c * (tid + 1) / team);
            weight_from_domain(&g, w0.acc, c0, c1, dw);
            if (tid == 0)
                for (int k = 0; db && k < g.k; k++)
                    db[k] += w0.db[k];
        }
    }
    return 0;
}

int dt_conv_winograd_backward(const struct dt_conv_shape *s, const float *x, const float *dy,
                              const float *w, float *dw, float *db, float *dx, float *scratch,
                              size_t scratch_floats, int threads)
{
    return backward(s, x, dy, w, dw, db, dx, scratch, scratch_floats, threads, "backward");
}

int dt_conv_winograd_backward_weight(const struct dt_conv_shape *s, const float *x, const float *dy,
                                     float *dw, float *db, float *scratch, size_t scratch_floats,
                                     int threads)
{
    return backward(s, x, dy, NULL, dw, db, NULL, scratch, scratch_floats, threads,
                    "backward_weight");
}

int dt_conv_winograd_backward_input(const struct dt_conv_shape *s, const float *dy, const float *w,
                                    float *dx, float *scratch, size_t scratch_floats, int threads)
{
    return backward(s, NULL, dy, w, NULL, NULL, dx, scratch, scratch_floats, threads,
                    "backward_input");
}

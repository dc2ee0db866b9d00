/* The Winograd kernels, built once per vector width: the avx512 build (W = 16) and the avx2
 * build (W = 8), each with its ISA's flags (Makefile) and its vocabulary from winograd_vec.h;
 * nn/kernels/fp32/conv_winograd.c explains the method and calls the build nn/kernels/isa.c
 * picks, through the table at the end (dt_winograd_avx512, dt_winograd_avx2).
 *
 * The vocabulary: VEC, VECI (int32 lanes), W, LOAD, STORE, ZERO, SET1, ADD, SUB, MUL, FMA
 * (a * b + c), FNMA (c - a * b), MAXV, KEEP_POS (v where m > 0, else +0: a relu's backward
 * mask), SET1I, STOREI, load_first / store_first (the first n lanes, the rest zero or
 * untouched), transpose (W rows of W floats in place), pool_step, and the register blocks of
 * the products (MAX_VB, ROWS_OF_VB, GEMM_SHAPES). The layout is the same at both widths
 * (channels padded to 16, winograd_impl.h), and every sum is taken in the same order, so the
 * two builds give the same bits. Functions that are not always inlined carry the build's name
 * (DT_ISA_FN: gemm_avx512, gemm_avx2), so a profile tells the builds apart. */
#include <string.h>

#include "nn/kernels/fp32/winograd_impl.h"
#include "nn/kernels/fp32/winograd_vec.h"
#include "nn/kernels/isa_fn.h"
#include "util/bf16.h"

/* r = B^T d (6 -> 6). */
INLINE void bt6(const VEC d[6], VEC r[6])
{
    VEC four = SET1(4.0f), five = SET1(5.0f), two = SET1(2.0f);
    VEC t0 = FNMA(four, d[2], d[4]), t1 = FNMA(four, d[1], d[3]);
    VEC t2 = SUB(d[4], d[2]), t3 = MUL(two, SUB(d[3], d[1]));
    r[0] = FMA(four, d[0], FNMA(five, d[2], d[4]));
    r[1] = ADD(t0, t1);
    r[2] = SUB(t0, t1);
    r[3] = ADD(t2, t3);
    r[4] = SUB(t2, t3);
    r[5] = FMA(four, d[1], FNMA(five, d[3], d[5]));
}

/* h = B v (6 -> 6), the adjoint of bt6. */
INLINE void b6(const VEC v[6], VEC h[6])
{
    VEC four = SET1(4.0f), five = SET1(5.0f), two = SET1(2.0f);
    VEC s12 = SUB(v[1], v[2]), a12 = ADD(v[1], v[2]);
    VEC s34 = SUB(v[3], v[4]), a34 = ADD(v[3], v[4]);
    h[0] = MUL(four, v[0]);
    h[1] = FNMA(two, s34, MUL(four, SUB(v[5], s12)));
    h[2] = SUB(FNMA(four, a12, FNMA(five, v[0], ZERO())), a34);
    h[3] = FNMA(five, v[5], FMA(two, s34, s12));
    h[4] = ADD(ADD(v[0], a12), a34);
    h[5] = v[5];
}

/* o = A^T m (6 -> 4). */
INLINE void at6(const VEC m[6], VEC o[4])
{
    VEC s12 = SUB(m[1], m[2]), a12 = ADD(m[1], m[2]);
    VEC s34 = SUB(m[3], m[4]), a34 = ADD(m[3], m[4]);
    o[0] = ADD(ADD(m[0], a12), a34);
    o[1] = FMA(SET1(2.0f), s34, s12);
    o[2] = FMA(SET1(4.0f), a34, a12);
    o[3] = ADD(FMA(SET1(8.0f), s34, s12), m[5]);
}

/* h = A g (4 -> 6), the adjoint of at6. */
INLINE void a6(const VEC g[4], VEC h[6])
{
    VEC e = ADD(g[0], g[2]), o = ADD(g[1], g[3]);
    VEC e2 = FMA(SET1(4.0f), g[2], g[0]), o2 = FMA(SET1(8.0f), g[3], MUL(SET1(2.0f), g[1]));
    h[0] = g[0];
    h[1] = ADD(e, o);
    h[2] = SUB(e, o);
    h[3] = ADD(e2, o2);
    h[4] = SUB(e2, o2);
    h[5] = g[3];
}

/* h = G g (3 -> 6). */
INLINE void g6(const VEC g[3], VEC h[6])
{
    VEC s = ADD(g[0], g[2]), sixth = SET1(-1.0f / 6.0f);
    VEC q = FMA(SET1(1.0f / 24.0f), g[0], MUL(SET1(1.0f / 6.0f), g[2]));
    VEC r = MUL(SET1(1.0f / 12.0f), g[1]);
    h[0] = MUL(SET1(0.25f), g[0]);
    h[1] = MUL(sixth, ADD(s, g[1]));
    h[2] = MUL(sixth, SUB(s, g[1]));
    h[3] = ADD(q, r);
    h[4] = SUB(q, r);
    h[5] = g[2];
}

/* r = G^T a (6 -> 3), the adjoint of g6. */
INLINE void gt3(const VEC a[6], VEC r[3])
{
    VEC a12 = ADD(a[1], a[2]), s12 = SUB(a[1], a[2]);
    VEC a34 = ADD(a[3], a[4]), s34 = SUB(a[3], a[4]);
    VEC sixth = SET1(1.0f / 6.0f);
    r[0] = FMA(SET1(1.0f / 24.0f), a34, FNMA(sixth, a12, MUL(SET1(0.25f), a[0])));
    r[1] = FMA(SET1(1.0f / 12.0f), s34, MUL(SET1(-1.0f / 6.0f), s12));
    r[2] = FMA(sixth, SUB(a34, a12), a[5]);
}

/* ---- layout: NCHW planes <-> channels-last planes ------------------------------------ */

static void DT_ISA_FN(zero_floats)(float *p, size_t n)
{
    memset(p, 0, n * sizeof *p);
}

/* Loads W rows of W floats at p + i * stride; rows >= nr and lanes >= nx read as zero. */
INLINE void load_rows(VEC r[W], const float *p, size_t stride, int nr, int nx)
{
    if (nr == W && nx == W) {
#pragma GCC unroll 16
        for (int i = 0; i < W; i++)
            r[i] = LOAD(p + i * stride);
        return;
    }
#pragma GCC unroll 16
    for (int i = 0; i < W; i++)
        r[i] = i < nr ? load_first(p + i * stride, nx) : ZERO();
}

/* The first n of W bf16 elements widened, the rest zero. */
INLINE VEC load_first_bf16(const dt_bf16 *p, int n)
{
    if (n >= W)
        return load_bf16(p);
    dt_bf16 lane[W] = {0};
    memcpy(lane, p, (size_t)n * sizeof *p);
    return load_bf16(lane);
}

/* load_rows of bf16 elements, widened to fp32 (exact). */
INLINE void load_rows_bf16(VEC r[W], const dt_bf16 *p, size_t stride, int nr, int nx)
{
#pragma GCC unroll 16
    for (int i = 0; i < W; i++)
        r[i] = i < nr ? load_first_bf16(p + i * stride, nx) : ZERO();
}

/* load_rows of a batchnorm's output gradient dy through its backward bn, x (laid out as dy)
 * its input: channel c0 + i's row is struct dt_bn_grad's float operations, in its order. Row
 * by row, so no second array of W vectors competes for the registers. */
INLINE void load_rows_bn(VEC r[W], const float *dy, const float *x, size_t stride, int nr, int nx,
                         const struct dt_bn_grad *bn, int c0)
{
#pragma GCC unroll 16
    for (int i = 0; i < W; i++) {
        r[i] = ZERO();
        if (i < nr) {
            int c = c0 + i;
            VEC d = nx == W ? LOAD(dy + i * stride) : load_first(dy + i * stride, nx);
            VEC v = nx == W ? LOAD(x + i * stride) : load_first(x + i * stride, nx);
            VEC xhat = MUL(SUB(v, SET1(bn->mean[c])), SET1(bn->invstd[c]));
            VEC t = SUB(SUB(d, SET1(bn->mean_dy[c])), MUL(xhat, SET1(bn->mean_dy_xhat[c])));
            r[i] = MUL(SET1(bn->k[c]), t);
        }
    }
}

/* src [ch][h][w] -> dst [dh][dw][dc], pixel (y, x) to (off + step y, off + step x); dst is
 * zero everywhere else and in the lanes ch..dc-1 (step 2: a stride-2 conv's dy spread onto the
 * stride-1 grid). dc is a multiple of 16 >= ch; off + step (h - 1) < dh, likewise for w. The
 * plane is walked as one run of h * w pixels in blocks of W (whatever rows they span), so
 * every load but the plane's last is a full vector. With bn (else NULL), src is a batchnorm's
 * output gradient and bn->x its input (laid out as src), and what is stored is the
 * batchnorm's input gradient. With src_bf16, src holds bf16 elements (bn NULL then); with
 * round, what is stored is rounded to bf16 (a bf16 src is so already). */
static void DT_ISA_FN(to_channels_last)(const void *src, int ch, int h, int w, float *dst, int dh,
                                        int dw, int dc, int off, int step,
                                        const struct dt_bn_grad *bn, bool src_bf16, bool round)
{
    size_t row = (size_t)dw * dc, plane = (size_t)h * w;
    if (step != 1)
        DT_ISA_FN(zero_floats)(dst, (size_t)dh * row);
    else {
        DT_ISA_FN(zero_floats)(dst, (size_t)off * row);
        DT_ISA_FN(zero_floats)(dst + (size_t)(off + h) * row, (size_t)(dh - off - h) * row);
        for (int y = 0; y < h; y++) {
            float *d = dst + (size_t)(y + off) * row;
            DT_ISA_FN(zero_floats)(d, (size_t)off * dc);
            DT_ISA_FN(zero_floats)(d + (size_t)(off + w) * dc, (size_t)(dw - off - w) * dc);
        }
    }
    for (int c0 = 0; c0 < dc; c0 += W) {
        int nc = ch - c0 < W ? ch - c0 : W;
        float *d = dst + ((size_t)off * dw + off) * dc + c0; /* pixel (0, 0) */
        int y = 0, x = 0;
        for (size_t q0 = 0; q0 < plane; q0 += W) {
            int nq = plane - q0 < W ? (int)(plane - q0) : W;
            VEC r[W];
            size_t at = (size_t)c0 * plane + q0;
            if (bn)
                load_rows_bn(r, (const float *)src + at, bn->x + at, plane, nc, nq, bn, c0);
            else if (src_bf16)
                load_rows_bf16(r, (const dt_bf16 *)src + at, plane, nc, nq);
            else
                load_rows(r, (const float *)src + at, plane, nc, nq);
            if (round && !src_bf16)
#pragma GCC unroll 16
                for (int i = 0; i < W; i++)
                    r[i] = round_bf16(r[i]);
            transpose(r);
#pragma GCC unroll 16
            for (int i = 0; i < W; i++)
                if (i < nq) {
                    STORE(d + ((size_t)y * dw + x) * step * dc, r[i]);
                    if (++x == w)
                        x = 0, y++;
                }
        }
    }
}

/* What from_channels_last does to the values on their way out, each part optional (NULL/0). */
struct store {
    const float *bias; /* forward: plus bias[channel], */
    int relu;          /* then ReLU */
    /* backward: rounded to bf16 (round), then through a relu whose output is mask (laid out
     * as dst): plus extra (what else reached the relu's output, laid out as dst), then 0 where
     * mask is not > 0 */
    bool round;
    const void *mask; /* bf16 elements with mask_bf16 */
    bool mask_bf16;
    const float *extra;
};

/* The mask's n (<= W) elements at `at`, widened (zero past n). */
INLINE VEC mask_at(const struct store *st, size_t at, int n)
{
    if (st->mask_bf16)
        return load_first_bf16((const dt_bf16 *)st->mask + at, n);
    return n == W ? LOAD((const float *)st->mask + at)
                  : load_first((const float *)st->mask + at, n);
}

/* dst [ch][h][w] = src [sh][sw][sc] at (off + step y, off + step x), through st (step 2: a
 * stride-2 conv's output picked off the stride-1 grid). Walks the output plane in runs of W
 * pixels like to_channels_last. Without anything in st it only moves bits (it also carries
 * int32 pool indices). */
static void DT_ISA_FN(from_channels_last)(const float *src, int sw, int sc, int off, int step,
                                          float *dst, int ch, int h, int w, const struct store *st)
{
    size_t plane = (size_t)h * w;
    const float *bias = st->bias, *extra = st->extra;
    bool mask = st->mask != NULL;
    int relu = st->relu;
    bool round = st->round;
    for (int c0 = 0; c0 < ch; c0 += W) {
        int nc = ch - c0 < W ? ch - c0 : W;
        VEC b = bias ? load_first(bias + c0, nc) : ZERO();
        const float *s = src + ((size_t)off * sw + off) * sc + c0; /* pixel (0, 0) */
        int y = 0, x = 0;
        for (size_t q0 = 0; q0 < plane; q0 += W) {
            int nq = plane - q0 < W ? (int)(plane - q0) : W;
            VEC r[W];
#pragma GCC unroll 16
            for (int i = 0; i < W; i++) {
                r[i] = ZERO();
                if (i < nq) {
                    r[i] = LOAD(s + ((size_t)y * sw + x) * step * sc);
                    if (bias)
                        r[i] = ADD(r[i], b);
                    if (relu)
                        r[i] = MAXV(r[i], ZERO());
                    if (++x == w)
                        x = 0, y++;
                }
            }
            transpose(r);
            if (round)
#pragma GCC unroll 16
                for (int c = 0; c < W; c++)
                    r[c] = round_bf16(r[c]);
            size_t at = (size_t)c0 * plane + q0;
            float *d = dst + at;
            if (nq == W && nc == W) {
#pragma GCC unroll 16
                for (int c = 0; c < W; c++) {
                    if (extra)
                        r[c] = ADD(r[c], LOAD(extra + at + c * plane));
                    STORE(d + c * plane,
                          mask ? KEEP_POS(r[c], mask_at(st, at + c * plane, W)) : r[c]);
                }
            } else {
#pragma GCC unroll 16
                for (int c = 0; c < W; c++)
                    if (c < nc) {
                        if (extra)
                            r[c] = ADD(r[c], load_first(extra + at + c * plane, nq));
                        if (mask)
                            r[c] = KEEP_POS(r[c], mask_at(st, at + c * plane, nq));
                        store_first(d + c * plane, nq, r[c]);
                    }
            }
        }
    }
}

/* ---- tile transforms ------------------------------------------------------------------ */

/* V[t][p][c16] = B^T d B for the nb tiles from t0 (d read from the channels-last input);
 * with `packed`, stored rounded to bf16 at the same element positions of v as a bf16 array
 * (the forward's products operand: adjacent channels are its pairs). */
static void DT_ISA_FN(input_transform)(const struct geom *g, const float *in, int t0, int nb,
                                       float *v, bool packed)
{
    size_t pstride = (size_t)g->c16, row = (size_t)g->wi * g->c16;
    for (int t = 0; t < nb; t++) {
        int ty = (t0 + t) / g->tw, tx = (t0 + t) % g->tw;
        const float *base = in + (size_t)(4 * ty) * row + (size_t)(4 * tx) * g->c16;
        for (int cv = 0; cv < g->c16; cv += W) {
            VEC r[6][6];
            for (int i = 0; i < 6; i++) {
                VEC d[6];
                for (int j = 0; j < 6; j++)
                    d[j] = LOAD(base + i * row + (size_t)j * g->c16 + cv);
                bt6(d, r[i]);
            }
            for (int j = 0; j < 6; j++) {
                VEC col[6], o[6];
                for (int i = 0; i < 6; i++)
                    col[i] = r[i][j];
                bt6(col, o);
                for (int i = 0; i < 6; i++) {
                    size_t at = (size_t)t * POS * g->c16 + (size_t)(i * 6 + j) * pstride + cv;
                    if (packed)
                        store_bf16((uint16_t *)(void *)v + at, o[i]);
                    else
                        STORE(v + at, o[i]);
                }
            }
        }
    }
}

/* in[6x6 block of tile] += B dV B^T for the nb tiles from t0: the adjoint of input_transform.
 * The tiles cover the plane, overlapping by 2 rows and columns, and are taken in row-major
 * order (t0 from 0): a tile's first 2 rows (columns) were written by the tile above (to the
 * left) unless it is in the first row (column), and the rest is its own, so `in` needs no
 * clearing first. Fresh elements are stored as 0 + value, the same bits as a cleared plane. */
static void DT_ISA_FN(input_adjoint)(const struct geom *g, const float *v, int t0, int nb,
                                     float *in)
{
    size_t pstride = (size_t)g->c16, row = (size_t)g->wi * g->c16;
    for (int t = 0; t < nb; t++) {
        int ty = (t0 + t) / g->tw, tx = (t0 + t) % g->tw;
        float *base = in + (size_t)(4 * ty) * row + (size_t)(4 * tx) * g->c16;
        const float *src = v + (size_t)t * POS * g->c16;
        for (int cv = 0; cv < g->c16; cv += W) {
            VEC r[6][6];
            for (int j = 0; j < 6; j++) {
                VEC col[6], o[6];
                for (int i = 0; i < 6; i++)
                    col[i] = LOAD(src + (size_t)(i * 6 + j) * pstride + cv);
                b6(col, o);
                for (int i = 0; i < 6; i++)
                    r[i][j] = o[i];
            }
            for (int i = 0; i < 6; i++) {
                VEC o[6];
                b6(r[i], o);
                for (int j = 0; j < 6; j++) {
                    float *p = base + i * row + (size_t)j * g->c16 + cv;
                    bool fresh = (i >= 2 || ty == 0) && (j >= 2 || tx == 0);
                    STORE(p, ADD(fresh ? ZERO() : LOAD(p), o[j]));
                }
            }
        }
    }
}

/* out[4x4 block of tile] = A^T M A for the nb tiles from t0. */
static void DT_ISA_FN(output_transform)(const struct geom *g, const float *m, int t0, int nb,
                                        float *out)
{
    size_t pstride = (size_t)g->k16, row = (size_t)g->wo * g->k16;
    for (int t = 0; t < nb; t++) {
        int ty = (t0 + t) / g->tw, tx = (t0 + t) % g->tw;
        float *base = out + (size_t)(4 * ty) * row + (size_t)(4 * tx) * g->k16;
        const float *src = m + (size_t)t * POS * g->k16;
        for (int kv = 0; kv < g->k16; kv += W) {
            VEC r[4][6];
            for (int j = 0; j < 6; j++) {
                VEC col[6], o[4];
                for (int i = 0; i < 6; i++)
                    col[i] = LOAD(src + (size_t)(i * 6 + j) * pstride + kv);
                at6(col, o);
                for (int a = 0; a < 4; a++)
                    r[a][j] = o[a];
            }
            for (int a = 0; a < 4; a++) {
                VEC o[4];
                at6(r[a], o);
                for (int b = 0; b < 4; b++)
                    STORE(base + a * row + (size_t)b * g->k16 + kv, o[b]);
            }
        }
    }
}

/* The output tiles of output_transform plus bias, ReLU'd when relu, then max-pooled 2x2: val
 * [ho/2][wo/2][k16] the maxima, idx (same layout, int32) each winner's index in its [oh][ow]
 * output plane. The same float operations per element as the unpooled path. */
static void DT_ISA_FN(output_transform_pool2)(const struct geom *g, const float *m, int t0, int nb,
                                              const float *bias, int relu, float *val, int32_t *idx)
{
    size_t pstride = (size_t)g->k16, prow = (size_t)(g->wo / 2) * g->k16;
    for (int t = 0; t < nb; t++) {
        int ty = (t0 + t) / g->tw, tx = (t0 + t) % g->tw;
        const float *src = m + (size_t)t * POS * g->k16;
        for (int kv = 0; kv < g->k16; kv += W) {
            VEC r[4][6], o[4][4];
            for (int j = 0; j < 6; j++) {
                VEC col[6], c4[4];
                for (int i = 0; i < 6; i++)
                    col[i] = LOAD(src + (size_t)(i * 6 + j) * pstride + kv);
                at6(col, c4);
                for (int a = 0; a < 4; a++)
                    r[a][j] = c4[a];
            }
            VEC bv = bias ? load_first(bias + kv, g->k - kv) : ZERO();
            for (int a = 0; a < 4; a++) {
                at6(r[a], o[a]);
                for (int b = 0; b < 4; b++) {
                    if (bias)
                        o[a][b] = ADD(o[a][b], bv);
                    if (relu)
                        o[a][b] = MAXV(o[a][b], ZERO());
                }
            }
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 2; j++) {
                    int at = (4 * ty + 2 * i) * g->ow + 4 * tx + 2 * j;
                    VEC mx = o[2 * i][2 * j];
                    VECI best = SET1I(at);
                    pool_step(&mx, &best, o[2 * i][2 * j + 1], at + 1);
                    pool_step(&mx, &best, o[2 * i + 1][2 * j], at + g->ow);
                    pool_step(&mx, &best, o[2 * i + 1][2 * j + 1], at + g->ow + 1);
                    size_t d = (size_t)(2 * ty + i) * prow + (size_t)(2 * tx + j) * g->k16 + kv;
                    STORE(val + d, mx);
                    STOREI(idx + d, best);
                }
        }
    }
}

/* dM[row0 + t][p][k16] = A dY A^T for the nb tiles from t0: the adjoint of output_transform.
 * With `packed`, stored rounded to bf16 at the same element positions of m as a bf16 array (the
 * input gradient's products operand). db (unless NULL) += the tiles' sums of dy, in tile order,
 * read off the unrounded dM: position (1, 1) of A dY A^T is the sum of the tile's 16 values
 * (row 1 of A^T is all ones over the tile), 1/16 of the work of summing the plane. */
static void DT_ISA_FN(output_adjoint)(const struct geom *g, const float *out, int t0, int nb,
                                      float *m, int row0, bool packed, float *db)
{
    size_t pstride = (size_t)g->k16, row = (size_t)g->wo * g->k16;
    for (int t = 0; t < nb; t++) {
        int ty = (t0 + t) / g->tw, tx = (t0 + t) % g->tw;
        const float *base = out + (size_t)(4 * ty) * row + (size_t)(4 * tx) * g->k16;
        size_t at = (size_t)(row0 + t) * POS * g->k16;
        for (int kv = 0; kv < g->k16; kv += W) {
            VEC r[4][6];
            for (int a = 0; a < 4; a++) {
                VEC d[4];
                for (int b = 0; b < 4; b++)
                    d[b] = LOAD(base + a * row + (size_t)b * g->k16 + kv);
                a6(d, r[a]);
            }
            for (int j = 0; j < 6; j++) {
                VEC col[4], o[6];
                for (int a = 0; a < 4; a++)
                    col[a] = r[a][j];
                a6(col, o);
                if (j == 1 && db) /* position 7, (1, 1): the tile's sum */
                    STORE(db + kv, ADD(LOAD(db + kv), o[1]));
                for (int i = 0; i < 6; i++) {
                    size_t e = at + (size_t)(i * 6 + j) * pstride + kv;
                    if (packed)
                        store_bf16((uint16_t *)(void *)m + e, o[i]);
                    else
                        STORE(m + e, o[i]);
                }
            }
        }
    }
}

/* ---- the products --------------------------------------------------------------------- */

/* The next slice of struct ahead's prefetch, a cache line at a time. */
static void DT_ISA_FN(ahead_step)(struct ahead *a)
{
    for (size_t left = a->per_step; left && a->region < 3;) {
        if (a->at >= a->bytes[a->region]) {
            a->region++, a->at = 0;
            continue;
        }
        _mm_prefetch(a->p[a->region] + a->at, _MM_HINT_T1);
        a->at += 64;
        left = left > 64 ? left - 64 : 0;
    }
}

/* c[r][0 .. W vb) (+)= sum over q < nq of a[r ars + q aqs] * b[q bs + 0 .. W vb), r < rb.
 * The sum starts from zero and is added to c once: the weight gradient accumulates a batch's
 * thousands of tiles, and one long chain of FMAs onto the same accumulator lost an order of
 * magnitude of precision (8.7e-5 of max |dw| at batch 128, now as good as direct).
 * With `pairs` (geom.products) each 32-bit element of a and b holds two bf16, the reduction's
 * elements 2q and 2q + 1, and DPBF16 adds both products (float arrays hold their bits; a is
 * broadcast as an integer, which measured 2-3 % faster on Zen 4 than as a float). */
INLINE void gemm_block(const float *a, size_t ars, size_t aqs, const float *b, size_t bs, int nq,
                       float *c, size_t cs, bool accumulate, const int rb, const int vb,
                       const bool pairs)
{
    VEC acc[MAX_RB][MAX_VB];
#pragma GCC unroll 12
    for (int r = 0; r < rb; r++)
#pragma GCC unroll 4
        for (int j = 0; j < vb; j++)
            acc[r][j] = ZERO();
    for (int q = 0; q < nq; q++) {
        VEC bv[MAX_VB];
#pragma GCC unroll 4
        for (int j = 0; j < vb; j++)
            bv[j] = LOAD(b + q * bs + j * W);
        const float *aq = a + q * aqs;
#pragma GCC unroll 12
        for (int r = 0; r < rb; r++) {
            VEC s = pairs ? SET1_PAIR(aq + r * ars) : SET1(aq[r * ars]);
#pragma GCC unroll 4
            for (int j = 0; j < vb; j++)
                acc[r][j] = pairs ? DPBF16(acc[r][j], s, bv[j]) : FMA(s, bv[j], acc[r][j]);
        }
    }
#pragma GCC unroll 12
    for (int r = 0; r < rb; r++)
#pragma GCC unroll 4
        for (int j = 0; j < vb; j++) {
            float *cp = c + r * cs + j * W;
            STORE(cp, accumulate ? ADD(LOAD(cp), acc[r][j]) : acc[r][j]);
        }
}

/* Rows per register block for vb vectors: ROWS_OF_VB fills the register file (24-28 of the
 * 32 zmm registers, 12 of the 16 ymm ones, as accumulators). */
static int DT_ISA_FN(max_rows)(int vb)
{
    static const int rows[MAX_VB + 1] = ROWS_OF_VB;
    return rows[vb];
}

/* The register-block shapes of the products (GEMM_SHAPES lists them per width), each a case
 * of a switch on (vb - 1) * MAX_RB + rb - 1 that GEMM_CASE fills. */
#define GEMM_ROWS4(v) GEMM_CASE(v, 1) GEMM_CASE(v, 2) GEMM_CASE(v, 3) GEMM_CASE(v, 4)
#define GEMM_ROWS6(v) GEMM_ROWS4(v) GEMM_CASE(v, 5) GEMM_CASE(v, 6)
#define GEMM_ROWS8(v) GEMM_ROWS6(v) GEMM_CASE(v, 7) GEMM_CASE(v, 8)
#define GEMM_ROWS12(v)                                                                             \
    GEMM_ROWS8(v) GEMM_CASE(v, 9) GEMM_CASE(v, 10) GEMM_CASE(v, 11) GEMM_CASE(v, 12)

/* gemm_block at a run-time shape, one function per kind of element (each case inlines a shape). */
#define GEMM_BLOCK_ANY(name)                                                                       \
    static void DT_ISA_FN(name)(const float *a, size_t ars, size_t aqs, const float *b, size_t bs, \
                                int nq, float *c, size_t cs, bool accumulate, int rb, int vb)      \
    {                                                                                              \
        switch ((vb - 1) * MAX_RB + rb - 1) {                                                      \
            GEMM_SHAPES                                                                            \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    }
#define GEMM_CASE(v, r)                                                                            \
    case ((v)-1) * MAX_RB + (r)-1:                                                                 \
        gemm_block(a, ars, aqs, b, bs, nq, c, cs, accumulate, r, v, PAIRS);                        \
        break;
#define PAIRS false
GEMM_BLOCK_ANY(gemm_block_any)
#undef PAIRS
#define PAIRS true
GEMM_BLOCK_ANY(gemm_block_pairs_any)
#undef PAIRS
#undef GEMM_CASE

/* Block size: the fewest blocks of at most `max`, balanced. */
static int DT_ISA_FN(block_size)(int total, int max)
{
    int blocks = (total + max - 1) / max;
    return (total + blocks - 1) / blocks;
}

/* c[rows][W vecs] (+)= a[rows][nq] x b[nq][W vecs], a addressed with strides (ars, aqs); with
 * pairs, nq pairs of bf16 (gemm_block). */
static void DT_ISA_FN(gemm)(const float *a, size_t ars, size_t aqs, int rows, const float *b,
                            size_t bs, int nq, int vecs, float *c, size_t cs, bool accumulate,
                            bool pairs)
{
    int vbs = DT_ISA_FN(block_size)(vecs, MAX_VB);
    for (int v0 = 0; v0 < vecs; v0 += vbs) {
        int vb = vecs - v0 < vbs ? vecs - v0 : vbs;
        int rbs = DT_ISA_FN(block_size)(rows, DT_ISA_FN(max_rows)(vb));
        for (int r0 = 0; r0 < rows; r0 += rbs) {
            int rb = rows - r0 < rbs ? rows - r0 : rbs;
            const float *ar = a + r0 * ars, *bv = b + v0 * W;
            float *cr = c + r0 * cs + v0 * W;
            /* direct calls: gcc specialises them on constant strides (not through a pointer) */
            if (pairs) {
                DT_ISA_FN(gemm_block_pairs_any)
                (ar, ars, aqs, bv, bs, nq, cr, cs, accumulate, rb, vb);
            } else {
                DT_ISA_FN(gemm_block_any)(ar, ars, aqs, bv, bs, nq, cr, cs, accumulate, rb, vb);
            }
        }
    }
}

/* ---- bf16 operands of the products (geom.products) ------------------------------------- */

/* rows x len elements (len a multiple of W: floats, or with src_bf16 bf16 values) rounded to
 * bf16 as pairs of rows: dst[q][e] = (src[2q + 1][e], src[2q][e]), a missing last row zero.
 * dst may be src when src is floats: each pair of rows is read before the packed row, which lies
 * at or before them, is written; bf16 rows must not overlap dst. */
static void DT_ISA_FN(pack_row_pairs)(const void *src, bool src_bf16, int rows, size_t len,
                                      float *dst)
{
    for (int q = 0; q < (rows + 1) / 2; q++) {
        size_t lo = (size_t)2 * q * len, hi = lo + len;
        bool odd = 2 * q + 1 == rows;
        float *d = dst + (size_t)q * len;
        for (size_t e = 0; e < len; e += W)
            if (src_bf16) { /* already rounded: paired as they are */
                const uint16_t *b = src;
                STORE(d + e,
                      pair_halves(load_bf16(b + lo + e), odd ? ZERO() : load_bf16(b + hi + e)));
            } else {
                const float *f = src;
                STORE(d + e, pack_pair(LOAD(f + lo + e), odd ? ZERO() : LOAD(f + hi + e)));
            }
    }
}

/* ---- filters -------------------------------------------------------------------------- */

/* u[p][o][i16] = (G w G^T)[p] for the operand w[k][c][3][3] viewed as out o / in i: with
 * `transpose` false o = c, i = k (the forward's U, vectorised along k); with it o = k, i = c
 * (the input gradient's U^T, vectorised along c). Lanes past the channel count are zero. */
static void DT_ISA_FN(transform_filter)(const struct geom *g, const float *w, bool transpose,
                                        float *u)
{
    int outs = transpose ? g->k : g->c, ins = transpose ? g->c : g->k;
    int outs16 = transpose ? g->k16 : g->c16, ins16 = transpose ? g->c16 : g->k16;
    /* lane l of vector i0 is input channel i0 + l: stride in w between lanes */
    int lane_stride = transpose ? 9 : g->c * 9, out_stride = transpose ? g->c * 9 : 9;
    size_t pstride = (size_t)outs16 * ins16;
    DT_ISA_FN(zero_floats)(u, (size_t)POS * pstride);
    for (int o = 0; o < outs; o++)
        for (int i0 = 0; i0 < ins; i0 += W) {
            int n = ins - i0 < W ? ins - i0 : W;
            const float *base = w + (size_t)o * out_stride + (size_t)i0 * lane_stride;
            VEC r[3][6];
            for (int a = 0; a < 3; a++) {
                VEC d[3];
                for (int b = 0; b < 3; b++) {
                    /* a strided gather, once per step: plain loads are as fast here */
                    float lane[W] = {0};
                    for (int l = 0; l < n; l++)
                        lane[l] = base[a * 3 + b + (size_t)l * lane_stride];
                    d[b] = LOAD(lane);
                }
                g6(d, r[a]);
            }
            for (int j = 0; j < 6; j++) {
                VEC col[3] = {r[0][j], r[1][j], r[2][j]}, h[6];
                g6(col, h);
                for (int i = 0; i < 6; i++)
                    STORE(u + (size_t)(i * 6 + j) * pstride + (size_t)o * ins16 + i0, h[i]);
            }
        }
    if (g->products) /* each position's rows in pairs, at the start of its block */
        for (int p = 0; p < POS; p++)
            DT_ISA_FN(pack_row_pairs)
    (u + p * pstride, false, outs16, (size_t)ins16, u + p * pstride);
}

/* dw[k][c][3][3] += (G^T dU G) for dU [POS][c16][k16]; channels c in [c0, c1). */
static void DT_ISA_FN(weight_from_domain)(const struct geom *g, const float *du, int c0, int c1,
                                          float *dw)
{
    size_t pstride = (size_t)g->c16 * g->k16;
    for (int c = c0; c < c1; c++)
        for (int k0 = 0; k0 < g->k; k0 += W) {
            VEC r[6][3];
            for (int i = 0; i < 6; i++) {
                VEC a[6];
                for (int j = 0; j < 6; j++)
                    a[j] = LOAD(du + (size_t)(i * 6 + j) * pstride + (size_t)c * g->k16 + k0);
                gt3(a, r[i]);
            }
            float out[9][W];
            for (int s = 0; s < 3; s++) {
                VEC col[6], o[3];
                for (int i = 0; i < 6; i++)
                    col[i] = r[i][s];
                gt3(col, o);
                for (int a = 0; a < 3; a++)
                    STORE(out[a * 3 + s], o[a]);
            }
            int nk = g->k - k0 < W ? g->k - k0 : W;
            for (int l = 0; l < nk; l++)
                for (int t = 0; t < 9; t++)
                    dw[((size_t)(k0 + l) * g->c + c) * 9 + t] += out[t][l];
        }
}

/* ---- one sample ----------------------------------------------------------------------- */

/* One sample's forward; with argmax, pooled 2x2 (y is then the pooled output). Runs ahead's
 * prefetch. */
static void DT_ISA_FN(forward_sample)(const struct geom *g, const void *x, const float *u,
                                      const float *b, float *y, int32_t *argmax, int relu,
                                      const struct wscratch *ws, struct ahead *ahead)
{
    DT_ISA_FN(to_channels_last)
    (x, g->c, g->h, g->w, ws->in, g->hi, g->wi, g->c16, g->pad, 1, NULL, g->x_bf16, g->bf16);
    size_t vrow = (size_t)POS * g->c16, mrow = (size_t)POS * g->k16;
    size_t pooled = (size_t)(g->ho / 2) * (g->wo / 2) * g->k16; /* a quarter of ws->out */
    int h = g->products ? 2 : 1; /* channels per element of V: bf16 pairs */
    int32_t *idx = (int32_t *)(ws->out + pooled);
    for (int t0 = 0; t0 < g->tiles; t0 += g->nt) {
        int nb = g->tiles - t0 < g->nt ? g->tiles - t0 : g->nt;
        DT_ISA_FN(input_transform)(g, ws->in, t0, nb, ws->v, g->products);
        for (int p = 0; p < POS; p++) {
            DT_ISA_FN(gemm)
            (ws->v + (size_t)p * g->c16 / h, vrow / h, 1, nb, u + (size_t)p * g->c16 * g->k16,
             g->k16, (g->c + h - 1) / h, g->k16 / W, ws->m + (size_t)p * g->k16, mrow, false,
             g->products);
            DT_ISA_FN(ahead_step)(ahead);
        }
        if (argmax)
            DT_ISA_FN(output_transform_pool2)(g, ws->m, t0, nb, b, relu, ws->out, idx);
        else
            DT_ISA_FN(output_transform)(g, ws->m, t0, nb, ws->out);
    }
    if (!argmax) {
        struct store st = {.bias = b, .relu = relu};
        DT_ISA_FN(from_channels_last)
        (ws->out, g->wo, g->k16, 0, g->step, y, g->k, g->yh, g->yw, &st);
        return;
    }
    const struct store bits = {0};
    DT_ISA_FN(from_channels_last)
    (ws->out, g->wo / 2, g->k16, 0, 1, y, g->k, g->oh / 2, g->ow / 2, &bits);
    DT_ISA_FN(from_channels_last)
    ((const float *)idx, g->wo / 2, g->k16, 0, 1, (float *)argmax, g->k, g->oh / 2, g->ow / 2,
     &bits);
}

/* The gradients of `count` consecutive samples (count <= g->group): with x, dU (and, with
 * bias, db) accumulate in the thread's scratch; with dx, the samples' input gradients are
 * written; with mask (the samples' inputs, a relu's output), the relu's input gradient: plus
 * extra (or NULL), 0 where mask is not > 0. dy is converted (through the batchnorm backward
 * bn, when not NULL) and transformed once for both. Runs ahead's prefetch.
 * The samples' tiles share one block of V and M: on small planes (ResNet's 8x8: 4 tiles a
 * sample) one sample's block made the weight gradient's GEMMs 4 rows deep, and the dU
 * accumulator's traffic, not the products, set its speed. */
static void DT_ISA_FN(backward_samples)(const struct geom *g, const void *x, const float *dy,
                                        const struct dt_bn_grad *bn, const float *ut, bool bias,
                                        float *dx, const void *mask, const float *extra,
                                        const struct wscratch *ws, int count, struct ahead *ahead)
{
    size_t vrow = (size_t)POS * g->c16, mrow = (size_t)POS * g->k16;
    size_t in_sample = (size_t)g->c * g->h * g->w, out_sample = (size_t)g->k * g->yh * g->yw;
    int h = g->products ? 2 : 1; /* channels (tiles) per element of dM (V, dM): bf16 pairs */
    for (int t0 = 0; t0 < g->tiles; t0 += g->nt) {
        int nb = g->tiles - t0 < g->nt ? g->tiles - t0 : g->nt; /* tiles of one sample */
        for (int s = 0; s < count; s++) {
            /* a sample's planes are converted at its first block (count > 1: its only one) */
            if (t0 == 0) {
                struct dt_bn_grad part;
                DT_ISA_FN(to_channels_last)
                (dy + s * out_sample, g->k, g->yh, g->yw, ws->out, g->ho, g->wo, g->k16, 0, g->step,
                 dt_bn_grad_from(bn, s * out_sample, &part), false, g->bf16);
            }
            /* products: dM stored as bf16, its channels in pairs (the input gradient's
             * operand); the bias sums are taken from the unrounded values either way */
            DT_ISA_FN(output_adjoint)
            (g, ws->out, t0, nb, ws->m, s * nb, g->products, x && bias ? ws->db : NULL);
            if (x) {
                if (t0 == 0)
                    DT_ISA_FN(to_channels_last)
                (dt_act_from(x, g->x_bf16, s * in_sample), g->c, g->h, g->w, ws->in, g->hi, g->wi,
                 g->c16, g->pad, 1, NULL, g->x_bf16, g->bf16);
                DT_ISA_FN(input_transform)(g, ws->in, t0, nb, ws->v + s * nb * vrow, false);
            }
        }
        int rows = count * nb;
        /* products, the weight gradient's operands: V in place and dM after it as pairs of
         * tiles (half a row past an odd block: the m section has a row to spare when its
         * capacity is odd, and room to spare when the block is not full) */
        float *mt = g->products ? ws->m + (size_t)rows * mrow / 2 : ws->m;
        if (x && g->products) {
            DT_ISA_FN(pack_row_pairs)(ws->v, false, rows, vrow, ws->v);
            DT_ISA_FN(pack_row_pairs)(ws->m, true, rows, mrow, mt);
        }
        if (x)
            for (int p = 0; p < POS; p++) {
                DT_ISA_FN(gemm)
                (ws->v + (size_t)p * g->c16, 1, vrow, g->c, mt + (size_t)p * g->k16, mrow,
                 (rows + h - 1) / h, g->k16 / W, ws->acc + (size_t)p * g->c16 * g->k16, g->k16,
                 true, g->products);
                DT_ISA_FN(ahead_step)(ahead);
            }
        if (!dx)
            continue;
        for (int p = 0; p < POS; p++) {
            DT_ISA_FN(gemm)
            (ws->m + (size_t)p * g->k16 / h, mrow / h, 1, rows, ut + (size_t)p * g->k16 * g->c16,
             g->c16, (g->k + h - 1) / h, g->c16 / W, ws->v + (size_t)p * g->c16, vrow, false,
             g->products);
            DT_ISA_FN(ahead_step)(ahead);
        }
        for (int s = 0; s < count; s++) {
            DT_ISA_FN(input_adjoint)(g, ws->v + s * nb * vrow, t0, nb, ws->din);
            if (t0 + nb == g->tiles) {
                struct store st = {.round = g->bf16,
                                   .mask =
                                       mask ? dt_act_from(mask, g->x_bf16, s * in_sample) : NULL,
                                   .mask_bf16 = g->x_bf16,
                                   .extra = extra ? extra + s * in_sample : NULL};
                DT_ISA_FN(from_channels_last)
                (ws->din, g->wi, g->c16, g->pad, 1, dx + s * in_sample, g->c, g->h, g->w, &st);
            }
        }
    }
}

/* Sums the threads' dU and bias partials in thread order into thread 0's, elements
 * [i0, i1) of the adjacent acc and db sections. */
static void DT_ISA_FN(reduce_threads)(const struct geom *g, float *scratch, int team, size_t i0,
                                      size_t i1)
{
    struct wscratch w0 = wscratch_of(g, scratch, 0);
    for (size_t i = i0; i < i1; i += W) {
        VEC v = LOAD(w0.acc + i);
        for (int t = 1; t < team; t++)
            v = ADD(v, LOAD(wscratch_of(g, scratch, t).acc + i));
        STORE(w0.acc + i, v);
    }
}

const struct wg_kernels DT_ISA_FN(dt_winograd) = {
    .transform_filter = DT_ISA_FN(transform_filter),
    .forward_sample = DT_ISA_FN(forward_sample),
    .backward_samples = DT_ISA_FN(backward_samples),
    .reduce_threads = DT_ISA_FN(reduce_threads),
    .weight_from_domain = DT_ISA_FN(weight_from_domain),
};

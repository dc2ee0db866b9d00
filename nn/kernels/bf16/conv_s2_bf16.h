/* bf16 convolution with stride 2 on tiles (ResNet's downsampling 3x3 convs and 1x1
 * projections), through parity planes.
 *
 * A stride-2 tap cannot be read in place from conv_bf16.h's pair planes: a B tile row is 16
 * consecutive positions, and stride 2 wants every other one. So the zero-padded input is split
 * once per sample into its four parity planes, P_ab[r][c] = Xpad[2r + a][2c + b] (a, b in
 * {0, 1}), each in conv_bf16.h's pair-plane layout, all wq = ceil(Wp / 2) wide. Output (oh, ow)
 * reads Xpad[2 oh + i][2 ow + j] = P_(i%2)(j%2)[oh + i/2][ow + j/2]: with positions counted
 * over the parity width, q = oh * wq + ow, tap (i, j) is the constant shift (i/2) wq + j/2 in
 * one parity plane, a stride-1 read. Every tap reads one plane: no product is wasted (computing
 * the stride-1 grid and keeping one output in four would waste 3/4), and the junk columns are
 * wq - OW per row (1 in 17 at 32x32 -> 16x16, none for 1x1 pad 0).
 *
 * The three products, each a tap table over the same two kernels (conv_s2_bf16.isa.c):
 *   forward          yq[k][q] = sum over taps and c of W[k][c][i][j] P_(i%2)(j%2)[c][q + shift]:
 *                    A = the packed weights, K in (tap, c) order, c to cpad;
 *   input gradient   parity plane (a, b) of dXpad is a stride-1 convolution of dY with the taps
 *                    i = a + 2i', j = b + 2j' (for 3x3: 2x2, 2x1, 1x2, 1x1 taps, 9 in all):
 *                    dXpad[2r + a][2c + b] = sum over k, i', j' of dY[k][r - i'][c - j']
 *                    W[k][.][i][j]. dY is laid out once in pair planes padded th - 1 at the top
 *                    and tw - 1 at the left (th = ceil(kh / 2)), wd = wq + tw - 1 wide, and each
 * parity plane of dX is one forward-kernel call reading it in place with shift (th-1-i') wd +
 * (tw-1-j'); then compact_dx interleaves the four planes into dX (with the relu below's backward,
 * optionally). A plane no tap reaches (1x1 pad 0: three of the four) is zero and not computed;
 *   weight gradient  dW[k][c][i][j] = sum over samples and q of dY[k][q] P_(i%2)(j%2)[c][q +
 * shift]: conv_bf16.h's GEMM over positions, A = dY rows over the parity width, B = position-pair
 * copies of each parity plane (even and odd starts). Only the planes some tap reads are written
 * (1x1 pad 0: plane 00 only); buffers are zeroed once by their owner and only the image is written
 * per sample (the *_image functions), as in conv_bf16.h.
 *
 * Paths: "amx", "avx512bf16" and "ctile" (the same source over tile.h's builds); there is no
 * reference build (the emulated layer is the reference). */
#ifndef DT_NN_KERNELS_CONV_S2_BF16_H
#define DT_NN_KERNELS_CONV_S2_BF16_H

#include <stdbool.h>
#include <stddef.h>

#include "nn/kernels/fp32/bn_grad.h"
#include "nn/kernels/fp32/conv_direct.h" /* struct dt_conv_shape */
#include "nn/kernels/bf16/gemm_bf16.h"

/* Largest kernel side taken (taps per product: 49). */
#define DT_CONV_S2_MAX_KERNEL 7
#define DT_CONV_S2_MAX_TAPS   (DT_CONV_S2_MAX_KERNEL * DT_CONV_S2_MAX_KERNEL)

/* Derived sizes and tap tables of a stride-2 shape. */
struct dt_conv_s2_geom {
    int cpad, kpad, c16; /* input channels to 32 and 16, output channels to 32 */
    int hp, wp;          /* padded input */
    int oh, ow;          /* output plane */
    int r, wq;           /* a parity plane's rows and width: ceil(hp / 2), ceil(wp / 2) */
    int th, tw;          /* taps per side of one parity: ceil(kh / 2), ceil(kw / 2) */
    unsigned planes;     /* bit a * 2 + b: parity plane ab is read by some tap */
    unsigned copies;     /* bit (a * 2 + b) * 2 + odd: the weight gradient reads that copy */
    /* forward */
    int q, qpad;   /* output positions over the parity width, to whole tiles */
    int positions; /* positions of each pair plane of a parity plane */
    size_t xv;     /* bf16 elements of one sample's parity planes: 4 cpad positions */
    size_t yq;     /* floats of one sample's output over the parity width: k qpad */
    size_t wpack;  /* bf16 elements of the forward's packed weights */
    int taps;      /* kh kw */
    long fwd_at[DT_CONV_S2_MAX_TAPS]; /* tap (i, j)'s first B element in xv (plane + shift) */
    /* weight gradient */
    int qrow;                        /* dY row length: q to 32 */
    int pairs;                       /* position pairs of one copy of a parity plane */
    size_t dyq;                      /* bf16 elements of one sample's dY rows: k (to 16) qrow */
    size_t xt;                       /* bf16 elements of one copy: pairs c16 2 */
    size_t xp;                       /* a sample's eight copies (plane a b, even/odd): 8 xt */
    size_t dwt;                      /* floats of the gradient, [k][tap][c16] */
    long wg_at[DT_CONV_S2_MAX_TAPS]; /* tap's copy in a sample's xp */
    int wg_shift[DT_CONV_S2_MAX_TAPS];
    /* input gradient */
    int wd, qd, qdpad, positions_d; /* dY pair planes: width, output positions, tail */
    size_t dv;                      /* bf16 elements of one sample's dY pair planes */
    size_t dxq;                     /* floats of one sample's four dX parity planes: 4 c qdpad */
    size_t wpack_dx;                /* bf16 elements of the four planes' packed weights */
    int dx_taps[4];                 /* taps of parity plane ab of dX */
    size_t dx_wp[4];                /* its packed weights' first element */
    long dx_at[4][DT_CONV_S2_MAX_TAPS];
};

/* 0, or -DT_EUSAGE when these kernels do not take the shape (stride 2, pad < kernel, kernel
 * sides up to DT_CONV_S2_MAX_KERNEL, a non-empty output). */
int dt_conv_s2_bf16_geometry(const struct dt_conv_shape *s, struct dt_conv_s2_geom *g);

/* w [K][C][kh][kw] fp32 -> the forward's packed A (g->wpack), and the input gradient's four
 * (g->wpack_dx), rounded to nearest even. */
void dt_conv_s2_bf16_pack_weights(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                                  const float *w, dt_bf16 *wp);
void dt_conv_s2_bf16_pack_weights_input_grad(const struct dt_conv_shape *s,
                                             const struct dt_conv_s2_geom *g, const float *w,
                                             dt_bf16 *wpi);

/* x (parity_planes_image, position_pairs_image) and relu_x (compact_dx) are read as fp32, or
 * as bf16 elements when x_bf16 (the model's bf16_store: a ResNet block's output stored so),
 * the same bits on the same bf16 values.
 *
 * Forward. x [C][H][W] -> xv's parity planes (image only: xv zeroed once by its owner); then
 * yq = the product on path p (ctile or amx); then y [K][OH][OW] = yq + b (b may be NULL). */
void dt_conv_s2_bf16_parity_planes_image(const struct dt_conv_shape *s,
                                         const struct dt_conv_s2_geom *g, const void *x,
                                         bool x_bf16, dt_bf16 *xv);
void dt_conv_s2_bf16_forward_on(enum dt_bf16_path p, const struct dt_conv_shape *s,
                                const struct dt_conv_s2_geom *g, const dt_bf16 *xv,
                                const dt_bf16 *wp, float *yq);
void dt_conv_s2_bf16_compact(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                             const float *yq, const float *b, bool relu, enum dt_bf16_store store,
                             void *y);

/* Input gradient. dy [K][OH][OW] -> dv (image only); dxq = the four parity planes of dXpad on
 * path p; dx [C][H][W] = dxq interleaved, or with relu_x (the relu below's output) that relu's
 * backward: dx = relu_x > 0 ? v + extra : 0 (extra may be NULL, or dx itself: each element is
 * read before it is written). With round, dxq's values are rounded to bf16 first, the
 * conv's own input gradient as a bf16 conv returns it (autocast's): x > 0 ? bf16(v) + extra :
 * +0. extra_even: extra holds only the even rows' even columns,
 * [C][(H + 1) / 2][(W + 1) / 2] (compact_dx_even's dx: a projection's), and is +0 elsewhere:
 * v + 0.0f there, so the bits are those of the whole extra (-0 + 0 is +0). */
void dt_conv_s2_bf16_dy_planes_image(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                                     const float *dy, dt_bf16 *dv);
/* Both operands made from dy at once, where dy is the output gradient of the batchnorm above
 * (bn_grad.h: sample `sample`'s input gradient of that batchnorm, its bits): dyq as
 * dy_rows_image and, unless dv is NULL, dv as dy_planes_image would make them from it. */
void dt_conv_s2_bf16_bn_dy_image(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                                 const struct dt_bn_grad *bn, const float *dy, int sample,
                                 dt_bf16 *dyq, dt_bf16 *dv);
void dt_conv_s2_bf16_input_grad_on(enum dt_bf16_path p, const struct dt_conv_shape *s,
                                   const struct dt_conv_s2_geom *g, const dt_bf16 *dv,
                                   const dt_bf16 *wpi, float *dxq);
void dt_conv_s2_bf16_compact_dx(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                                const float *dxq, const void *relu_x, bool x_bf16,
                                const float *extra, bool extra_even, bool round, float *dx);
/* Whether dX is zero off the even rows' even columns: no tap reaches the other three parity
 * planes (a 1x1 conv without padding, a projection). Then dt_conv_s2_bf16_compact_dx_even
 * stores only those, [C][(H + 1) / 2][(W + 1) / 2], a quarter of the bytes, the values
 * compact_dx stores there; every layout build runs it (row copies). */
bool dt_conv_s2_bf16_dx_even_only(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g);
void dt_conv_s2_bf16_compact_dx_even(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                                     const float *dxq, float *dx);

/* Weight gradient. dy -> dyq (bf16 rows over the parity width, image only), x -> xp (the
 * position-pair copies the taps read, image only); dwt [k][tap][c16] = [dwt +]
 * the sum over n samples (sample i's operands at dyq + i g->dyq, xp + i g->xp) on path p;
 * dwt -> dw [K][C][kh][kw]. */
void dt_conv_s2_bf16_dy_rows_image(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                                   const float *dy, dt_bf16 *dyq);
void dt_conv_s2_bf16_position_pairs_image(const struct dt_conv_shape *s,
                                          const struct dt_conv_s2_geom *g, const void *x,
                                          bool x_bf16, dt_bf16 *xp);
void dt_conv_s2_bf16_weight_grad_on(enum dt_bf16_path p, const struct dt_conv_shape *s,
                                    const struct dt_conv_s2_geom *g, int n, const dt_bf16 *dyq,
                                    const dt_bf16 *xp, float *dwt, bool accumulate);
void dt_conv_s2_bf16_weight_grad_unpack(const struct dt_conv_shape *s,
                                        const struct dt_conv_s2_geom *g, const float *dwt,
                                        float *dw);

/* The layout passes of one build, with the plain C's signatures above. Each build writes the
 * same bits; they differ only in speed. */
struct dt_conv_s2_bf16_layout {
    const char *name; /* for benchmark headers: "plain C", "avx512" */
    void (*parity_planes_image)(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                                const void *x, bool x_bf16, dt_bf16 *xv);
    void (*compact)(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g, const float *yq,
                    const float *b, bool relu, enum dt_bf16_store store, void *y);
    void (*dy_planes_image)(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                            const float *dy, dt_bf16 *dv);
    void (*compact_dx)(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                       const float *dxq, const void *relu_x, bool x_bf16, const float *extra,
                       bool extra_even, bool round, float *dx);
    void (*dy_rows_image)(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                          const float *dy, dt_bf16 *dyq);
    void (*bn_dy_image)(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                        const struct dt_bn_grad *bn, const float *dy, int sample, dt_bf16 *dyq,
                        dt_bf16 *dv);
    void (*position_pairs_image)(const struct dt_conv_shape *s, const struct dt_conv_s2_geom *g,
                                 const void *x, bool x_bf16, dt_bf16 *xp);
};

/* The layout passes path p runs: the amx and avx512bf16 paths an AVX-512 build
 * (conv_s2_bf16_layout.isa.c), every other path the plain C above. */
const struct dt_conv_s2_bf16_layout *dt_conv_s2_bf16_layout_on(enum dt_bf16_path p);

/* The AVX-512 builds of the layout passes (conv_s2_bf16_layout.isa.c), as conv_bf16.h's. */
extern const struct dt_conv_s2_bf16_layout dt_conv_s2_bf16_layout_amx,
    dt_conv_s2_bf16_layout_avx512bf16;

/* The two tap-table kernels of conv_s2_bf16.isa.c, per build.
 * taps_forward: y[m][q] (q < qpad, row stride qpad) = sum over taps u < ntaps and d < depth
 * (a multiple of 32) of A[m][(u, d)] B_u[d][q], A packed as gemm_bf16.h's A (m rows, depth
 * ntaps depth), B_u[d][q] = b[at[u] + ((d / 2) plane + q) 2 + d % 2] (pair planes `plane`
 * positions long). Rows of y past m are not written.
 * taps_weight_grad: dwt[m][u][c] (c < c16, u < ntaps) = [dwt +] the sum over samples i < n
 * and q < qrow of a_i[m][q] b_i[at[u] + ((q + shift[u]) / 2 c16 + c) 2 + (q + shift[u]) % 2],
 * a_i = a + i astep ([m to 16][qrow] bf16 rows), b_i = b + i bstep; at[u] must name the copy
 * whose pairs start at shift[u]'s parity. */
void dt_conv_s2_taps_forward_amx(int m, int depth, int ntaps, const long *at, long plane, int qpad,
                                 const dt_bf16 *a, const dt_bf16 *b, float *y);
void dt_conv_s2_taps_forward_ctile(int m, int depth, int ntaps, const long *at, long plane,
                                   int qpad, const dt_bf16 *a, const dt_bf16 *b, float *y);
void dt_conv_s2_taps_weight_grad_amx(int m, int c16, int ntaps, const long *at, const int *shift,
                                     int qrow, int n, const dt_bf16 *a, size_t astep,
                                     const dt_bf16 *b, size_t bstep, float *dwt, bool accumulate);
void dt_conv_s2_taps_weight_grad_ctile(int m, int c16, int ntaps, const long *at, const int *shift,
                                       int qrow, int n, const dt_bf16 *a, size_t astep,
                                       const dt_bf16 *b, size_t bstep, float *dwt, bool accumulate);

void dt_conv_s2_taps_forward_avx512bf16(int m, int depth, int ntaps, const long *at, long plane,
                                        int qpad, const dt_bf16 *a, const dt_bf16 *b, float *y);
void dt_conv_s2_taps_weight_grad_avx512bf16(int m, int c16, int ntaps, const long *at,
                                            const int *shift, int qrow, int n, const dt_bf16 *a,
                                            size_t astep, const dt_bf16 *b, size_t bstep,
                                            float *dwt, bool accumulate);

#endif

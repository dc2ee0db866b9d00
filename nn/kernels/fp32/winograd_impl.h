/* What nn/kernels/fp32/conv_winograd.c shares with its per-width kernels (conv_winograd.isa.c,
 * built as its avx512 and avx2 builds): the geometry of a call, one thread's
 * scratch sections and the table of kernels of one vector width.
 *
 * The layout does not depend on the width: channels are padded to 16 (LANES) whichever path
 * runs, so scratch sizes, the cached filter transform and every result are the same on both
 * paths; the AVX2 kernels walk each 16-channel block as two 8-lane halves. The sums are taken
 * in the same order too, so the two paths give the same bits. Include only from those files. */
#ifndef DT_NN_KERNELS_FP32_WINOGRAD_IMPL_H
#define DT_NN_KERNELS_FP32_WINOGRAD_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nn/kernels/fp32/bn_grad.h"
#include "nn/kernels/fp32/simd.h"

enum {
    POS = 36,             /* positions of the 6x6 Winograd domain */
    MAX_RB = 12,          /* rows per register block of the products */
    BLOCK_FLOATS = 65536, /* V + M floats of one tile block: 256 KB, a quarter of L2 */
};

/* Per-call geometry derived once from the public shape. */
struct geom {
    int n, c, h, w, k, pad;
    int step;   /* the conv's stride: 2 computes the stride-1 grid and keeps every other pixel */
    int yh, yw; /* the conv's output: oh x ow at step 1, (oh + 1) / 2 x (ow + 1) / 2 at step 2 */
    int oh, ow; /* the stride-1 output grid the tiles cover */
    int th, tw, tiles;
    int nt;     /* tiles per block, of one sample */
    int group;  /* backward: samples per block (> 1 when a sample's tiles fill few rows) */
    int hi, wi; /* tiled input plane: (4 th + 2) x (4 tw + 2) */
    int ho, wo; /* tiled output plane: 4 th x 4 tw */
    int c16, k16;
    bool bf16;     /* operands rounded to bf16 as read, the input gradient as stored (the _bf16
                      entry points of conv_winograd.h) */
    bool x_bf16;   /* x (and the relu mask, the same array) stored as bf16 elements */
    bool products; /* with bf16: the products in the Winograd domain on bf16 pairs (V, U, dM
                      rounded to bf16, accumulated in fp32; the filter given packed) */
    size_t filter; /* floats of U (or U^T) at the start of scratch */
    size_t in, out, v, m, acc, db; /* sections of one thread's scratch (din: as in) */
    size_t per_thread;
};

/* The next samples' arrays (up to three), brought into L2 while the current ones are computed:
 * the kernels prefetch `per_step` bytes of them after each product (ahead_step), so the
 * misses spread over the sample's work. Asked for all at once before the sample, as before,
 * they queued ahead of the kernels' own misses (docs/kernels.md). */
struct ahead {
    const char *p[3];
    size_t bytes[3];
    int region; /* where the next prefetch is: p[region] + at */
    size_t at;
    size_t per_step;
};

/* One thread's scratch sections. */
struct wscratch {
    float *in;  /* channels-last input plane [hi][wi][c16] (x) */
    float *din; /* the same for dx being accumulated */
    float *out; /* channels-last output plane [ho][wo][k16] (y or dy) */
    float *v;   /* V or dV of a tile block: [nt][POS][c16] */
    float *m;   /* M or dM of a tile block: [nt][POS][k16] (an even count of rows) */
    float *acc; /* weight gradient: dU [POS][c16][k16] */
    float *db;  /* weight gradient: bias sums [k16] */
};

static inline struct wscratch wscratch_of(const struct geom *g, float *scratch, int thread)
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

/* The kernels of one vector width (conv_winograd.isa.c documents each). */
struct wg_kernels {
    /* u[p][o][i16] = (G w G^T)[p]; transpose: the input gradient's U^T; with g->products,
     * packed: u[p][o / 2][i16] pairs of rows (o, o + 1) rounded to bf16 */
    void (*transform_filter)(const struct geom *g, const float *w, bool transpose, float *u);
    /* one sample's forward; with argmax, pooled 2x2 */
    void (*forward_sample)(const struct geom *g, const void *x, const float *u, const float *b,
                           float *y, int32_t *argmax, int relu, const struct wscratch *ws,
                           struct ahead *ahead);
    /* `count` (<= group) consecutive samples' share of the gradients (x NULL: no weight
     * gradient; dx NULL: no input's; mask: dx plus extra, 0 where mask is not > 0; bn: dy
     * read through a batchnorm's backward, bn->x at these samples; x and mask are bf16
     * elements when g->x_bf16) */
    void (*backward_samples)(const struct geom *g, const void *x, const float *dy,
                             const struct dt_bn_grad *bn, const float *ut, bool bias, float *dx,
                             const void *mask, const float *extra, const struct wscratch *ws,
                             int count, struct ahead *ahead);
    /* the threads' dU and bias partials summed in thread order, elements [i0, i1) */
    void (*reduce_threads)(const struct geom *g, float *scratch, int team, size_t i0, size_t i1);
    /* dw += G^T dU G for channels [c0, c1) */
    void (*weight_from_domain)(const struct geom *g, const float *du, int c0, int c1, float *dw);
};

/* The builds of conv_winograd.isa.c (its ISA set in the Makefile: avx2 avx512 avx512bf16). */
extern const struct wg_kernels dt_winograd_avx512bf16, dt_winograd_avx512, dt_winograd_avx2;

#endif

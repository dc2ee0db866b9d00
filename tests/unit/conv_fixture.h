/* The convolution kernel tests' fixture (test_conv_direct.c, test_conv_winograd.c): random
 * inputs in [-1, 1) from dtrain's own RNG (so a failure reproduces from its seed) and a naive
 * double-precision reference of all three products, with the sum of the absolute values of each
 * element's terms (the scale of its rounding error). Include after <cmocka.h>. */
#ifndef DT_TESTS_CONV_FIXTURE_H
#define DT_TESTS_CONV_FIXTURE_H

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "nn/kernels/fp32/conv_direct.h"
#include "util/rng.h"

struct tensors {
    struct dt_conv_shape s;
    int oh, ow;
    size_t nx, nw, ny;
    float *x, *w, *b, *dy;
    double *y_ref, *y_abs, *dw_ref, *dw_abs, *db_ref, *db_abs, *dx_ref, *dx_abs;
};

static inline float *random_floats(struct dt_rng *rng, size_t n)
{
    float *p = malloc(sizeof(float) * n);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++)
        p[i] = 2.0f * dt_rng_uniform(rng) - 1.0f;
    return p;
}

static inline double *zeros(size_t n)
{
    double *p = calloc(n, sizeof(double));
    assert_non_null(p);
    return p;
}

/* y_ref = conv(x, w) (+ b when bias_in_y), dw_ref and db_ref from dy, dx_ref = dy correlated
 * with the flipped weights; the *_abs arrays sum the magnitudes of the same terms. */
static inline void conv_reference(struct tensors *t, bool bias_in_y)
{
    const struct dt_conv_shape *s = &t->s;
    for (int n = 0; n < s->n; n++)
        for (int k = 0; k < s->k; k++)
            for (int r = 0; r < t->oh; r++)
                for (int col = 0; col < t->ow; col++) {
                    size_t yi = (((size_t)n * s->k + k) * t->oh + r) * t->ow + col;
                    double dy = t->dy[yi];
                    if (bias_in_y) {
                        t->y_ref[yi] = t->b[k];
                        t->y_abs[yi] = fabs(t->b[k]);
                    }
                    t->db_ref[k] += dy;
                    t->db_abs[k] += fabs(dy);
                    for (int c = 0; c < s->c; c++)
                        for (int i = 0; i < s->kh; i++)
                            for (int j = 0; j < s->kw; j++) {
                                int xr = r * s->stride + i - s->pad;
                                int xc = col * s->stride + j - s->pad;
                                if (xr < 0 || xr >= s->h || xc < 0 || xc >= s->w)
                                    continue;
                                size_t wi = (((size_t)k * s->c + c) * s->kh + i) * s->kw + j;
                                size_t xi = (((size_t)n * s->c + c) * s->h + xr) * s->w + xc;
                                double xv = t->x[xi];
                                t->y_ref[yi] += t->w[wi] * xv;
                                t->y_abs[yi] += fabs(t->w[wi] * xv);
                                t->dw_ref[wi] += dy * xv;
                                t->dw_abs[wi] += fabs(dy * xv);
                                t->dx_ref[xi] += dy * t->w[wi];
                                t->dx_abs[xi] += fabs(dy * t->w[wi]);
                            }
                }
}

static inline struct tensors make_tensors(struct dt_conv_shape s, uint64_t seed, bool bias_in_y)
{
    struct tensors t = {.s = s};
    t.oh = dt_conv_direct_out_h(&s);
    t.ow = dt_conv_direct_out_w(&s);
    t.nx = (size_t)s.n * s.c * s.h * s.w;
    t.nw = (size_t)s.k * s.c * s.kh * s.kw;
    t.ny = (size_t)s.n * s.k * t.oh * t.ow;
    struct dt_rng rng;
    dt_rng_init(&rng, seed);
    t.x = random_floats(&rng, t.nx);
    t.w = random_floats(&rng, t.nw);
    t.b = random_floats(&rng, (size_t)s.k);
    t.dy = random_floats(&rng, t.ny);
    t.y_ref = zeros(t.ny), t.y_abs = zeros(t.ny);
    t.dw_ref = zeros(t.nw), t.dw_abs = zeros(t.nw);
    t.db_ref = zeros((size_t)s.k), t.db_abs = zeros((size_t)s.k);
    t.dx_ref = zeros(t.nx), t.dx_abs = zeros(t.nx);
    conv_reference(&t, bias_in_y);
    return t;
}

static inline void free_tensors(struct tensors *t)
{
    free(t->x), free(t->w), free(t->b), free(t->dy);
    free(t->y_ref), free(t->y_abs), free(t->dw_ref), free(t->dw_abs);
    free(t->db_ref), free(t->db_abs), free(t->dx_ref), free(t->dx_abs);
}

#endif

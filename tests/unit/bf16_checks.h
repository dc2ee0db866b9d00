/* The checks the bf16 kernel tests share (test_gemm_bf16.c, test_conv_bf16.c,
 * test_conv_s2_bf16.c): the error bound of a product and the loop that holds each path to it,
 * and the bitwise comparison of two builds of a layout pass.
 *
 * A product of two bf16 values is exact in fp32 (8 + 8 significant bits), so a kernel's only
 * error is the fp32 accumulation, in whatever order its path adds: |got - exact| <= terms 2^-24
 * sum |a b| for a sum of `terms` products (the standard bound), doubled here for margin. A test
 * computes exact and sum |a b| in double from the same bf16-rounded operands and keeps the
 * worst ratio of error to bound over its outputs: at most 1 passes. A path this CPU lacks is
 * skipped with its reason printed, never silently.
 *
 * Header-only (static inline), like nn_specs.h; include it after <cmocka.h>.
 */
#ifndef DT_TESTS_BF16_CHECKS_H
#define DT_TESTS_BF16_CHECKS_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "nn/kernels/bf16/gemm_bf16.h"   /* enum dt_bf16_path */
#include "nn/kernels/fp32/conv_direct.h" /* struct dt_conv_shape */

/* One output's error as a share of its bound; an output never written (NaN) is infinitely
 * off. */
static inline double bf16_bound_ratio(double got, double exact, double mag, long terms)
{
    double bound = 2.0 * (double)terms * 0x1p-24 * mag + 1e-30;
    return isnan(got) ? INFINITY : fabs(got - exact) / bound;
}

/* Skips the test where this CPU lacks path p, printing "skip <path> <what>: <reason>". */
static inline void bf16_skip_unless_available(enum dt_bf16_path p, const char *what)
{
    const char *why;
    if (!dt_bf16_path_available(p, &why)) {
        print_message("skip %s %s: %s\n", dt_bf16_path_name(p), what, why);
        skip();
    }
}

/* One check (`what`) of one path over its cases: the worst ratio so far. */
struct bf16_worst {
    enum dt_bf16_path path;
    const char *what;
    double ratio;
};

/* Case `name`'s worst ratio into w; the test fails on the first case over the bound. */
static inline void bf16_worst_add(struct bf16_worst *w, double ratio, const char *name)
{
    if (!(ratio <= 1))
        fail_msg("%s %s: %s off by %.2f times the bound", dt_bf16_path_name(w->path), w->what, name,
                 ratio);
    w->ratio = fmax(w->ratio, ratio);
}

static inline void bf16_worst_print(const struct bf16_worst *w)
{
    print_message("%s %s: worst error %.3f of the bound\n", dt_bf16_path_name(w->path), w->what,
                  w->ratio);
}

/* One product of a convolution on path p for shape s against the exact one, its variant
 * (bias, accumulation, the relu below) on or off: the worst ratio of its outputs. */
typedef double bf16_conv_check(enum dt_bf16_path p, struct dt_conv_shape s, bool variant);

/* Every shape through check on path p, the variant on for every other one. */
static inline void bf16_check_conv_shapes(enum dt_bf16_path p, const char *what,
                                          bf16_conv_check *check,
                                          const struct dt_conv_shape *shapes, size_t count)
{
    bf16_skip_unless_available(p, what);
    struct bf16_worst w = {p, what, 0};
    for (size_t i = 0; i < count; i++) {
        char name[32];
        snprintf(name, sizeof name, "shape %zu", i);
        bf16_worst_add(&w, check(p, shapes[i], i % 2), name);
    }
    bf16_worst_print(&w);
}

/* a and b hold the same bits, except that a NaN may be either of two NaNs: which operand's
 * payload a sum of two NaNs keeps is the compiler's choice (it may swap an add's operands). */
static inline void bf16_assert_same_floats(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!(isnan(a[i]) && isnan(b[i])) && memcmp(&a[i], &b[i], sizeof *a) != 0)
            fail_msg("element %zu: %a vs %a", i, (double)a[i], (double)b[i]);
}

#endif

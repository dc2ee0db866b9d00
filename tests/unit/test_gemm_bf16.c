/* nn/kernels/gemm_bf16: bf16 rounding (nearest even, NaN kept), packing through strides (a
 * transposed source packs like a plain one), and every path's product against the exact one.
 *
 * Tolerance: bf16_checks.h's fp32-accumulation bound, |c - exact| <= 2 (k + 1) 2^-24 sum |a b|.
 * The reference, C-tile, AVX512-BF16 and AMX paths must all meet it; a path this CPU lacks is
 * skipped with its reason printed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/kernels/bf16/gemm_bf16.h"
#include "tests/unit/bf16_checks.h"

static uint64_t rng = 88172645463325252ull;
static float uniform(void) /* in [-1, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / (1 << 23))) - 1.0f;
}

static void test_rounding_is_nearest_even(void **state)
{
    (void)state;
    assert_int_equal(dt_bf16_from_f32(1.0f), 0x3f80);
    /* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even one (1). */
    assert_int_equal(dt_bf16_from_f32(1.0f + 0x1p-8f), 0x3f80);
    /* 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: even is 1 + 2^-6. */
    assert_int_equal(dt_bf16_from_f32(1.0f + 3 * 0x1p-8f), 0x3f82);
    assert_int_equal(dt_bf16_from_f32(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81); /* above half */
    assert_int_equal(dt_bf16_from_f32(-2.0f), 0xc000);
    assert_int_equal(dt_bf16_from_f32(INFINITY), 0x7f80);
    assert_true(isnan(dt_bf16_to_f32(dt_bf16_from_f32(NAN))));
    /* The largest float rounds up to infinity, as RNE demands. */
    assert_int_equal(dt_bf16_from_f32(3.4028235e38f), 0x7f80);
    for (int i = 0; i < 1000; i++) {
        float f = uniform() * 1000;
        float r = dt_bf16_round(f);
        assert_true(fabsf(r - f) <= fabsf(f) * 0x1p-8f);
        assert_true(dt_bf16_round(r) == r); /* idempotent */
    }
}

/* Packing a transposed view (strides swapped) gives the packing of the transposed copy. */
static void test_packing_through_strides(void **state)
{
    (void)state;
    int m = 19, k = 45;
    float *src = malloc(sizeof(float) * m * k), *tr = malloc(sizeof(float) * m * k);
    for (int i = 0; i < m * k; i++)
        src[i] = uniform();
    for (int i = 0; i < m; i++)
        for (int j = 0; j < k; j++)
            tr[j * m + i] = src[i * k + j];
    size_t na = dt_bf16_packed_a_size(m, k), nb = dt_bf16_packed_b_size(k, m);
    assert_int_equal(na, 2 * 2 * 512);
    dt_bf16 *p1 = malloc(na * 2), *p2 = malloc(na * 2), *h = malloc(sizeof(dt_bf16) * m * k);
    dt_bf16_pack_a_f32(src, k, 1, m, k, p1);
    dt_bf16_pack_a_f32(tr, 1, m, m, k, p2); /* tr holds A^T: A(i, j) = tr[j * m + i] */
    assert_memory_equal(p1, p2, na * 2);
    dt_bf16_from_f32_n(src, h, (size_t)m * k);
    dt_bf16_pack_a_bf16(h, k, 1, m, k, p2); /* from bf16: the same bits */
    assert_memory_equal(p1, p2, na * 2);
    dt_bf16 *q1 = malloc(nb * 2), *q2 = malloc(nb * 2);
    dt_bf16_pack_b_f32(tr, m, 1, k, m, q1); /* B = A^T, k x m */
    dt_bf16_pack_b_f32(src, 1, k, k, m, q2);
    assert_memory_equal(q1, q2, nb * 2);
    free(src), free(tr), free(p1), free(p2), free(h), free(q1), free(q2);
}

/* One product on path p against the exact one; returns the worst error / bound ratio. */
static double check_product(enum dt_bf16_path p, int m, int n, int k, bool accumulate)
{
    float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n);
    float *c = malloc(sizeof(float) * m * (n + 3)), *c0 = malloc(sizeof(float) * m * (n + 3));
    for (int i = 0; i < m * k; i++)
        a[i] = uniform();
    for (int i = 0; i < k * n; i++)
        b[i] = uniform();
    int ldc = n + 3; /* a row stride wider than the row: the padding must stay untouched */
    for (int i = 0; i < m * ldc; i++)
        c0[i] = c[i] = uniform();
    dt_bf16 *pa = malloc(2 * dt_bf16_packed_a_size(m, k)),
            *pb = malloc(2 * dt_bf16_packed_b_size(k, n));
    dt_bf16_pack_a_f32(a, k, 1, m, k, pa);
    dt_bf16_pack_b_f32(b, n, 1, k, n, pb);
    dt_gemm_bf16_on(p, m, n, k, pa, pb, c, ldc, accumulate);
    double worst = 0;
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
            double exact = accumulate ? c0[i * ldc + j] : 0, mag = fabs(exact);
            for (int q = 0; q < k; q++) {
                double t = (double)dt_bf16_round(a[i * k + q]) * dt_bf16_round(b[q * n + j]);
                exact += t;
                mag += fabs(t);
            }
            worst = fmax(worst, bf16_bound_ratio(c[i * ldc + j], exact, mag, k + 1));
        }
        for (int j = n; j < ldc; j++)
            assert_true(c[i * ldc + j] == c0[i * ldc + j]);
    }
    free(a), free(b), free(c), free(c0), free(pa), free(pb);
    return worst;
}

static void run_shapes(enum dt_bf16_path p)
{
    bf16_skip_unless_available(p, "product");
    static const int sizes[] = {1, 15, 16, 17, 32, 33, 47, 64, 100};
    struct bf16_worst worst = {p, "product", 0};
    for (int x = 0; x < 9; x++)
        for (int y = 0; y < 9; y += 2)
            for (int z = 0; z < 9; z += 3) {
                int m = sizes[x], n = sizes[(x + y) % 9], k = sizes[(y + z + 1) % 9];
                char name[32];
                snprintf(name, sizeof name, "%dx%dx%d", m, n, k);
                bf16_worst_add(&worst, check_product(p, m, n, k, (x + y + z) % 2), name);
            }
    /* A product large enough to be split over threads, and a deep one. */
    bf16_worst_add(&worst, check_product(p, 96, 200, 288, false), "96x200x288");
    bf16_worst_add(&worst, check_product(p, 40, 24, 1152, true), "40x24x1152");
    bf16_worst_print(&worst);
}

static void test_reference_path(void **state)
{
    (void)state;
    run_shapes(DT_BF16_REFERENCE);
}

static void test_ctile_path(void **state)
{
    (void)state;
    run_shapes(DT_BF16_CTILE);
}

static void test_avx512bf16_path(void **state)
{
    (void)state;
    run_shapes(DT_BF16_AVX512BF16);
}

static void test_amx_path(void **state)
{
    (void)state;
    run_shapes(DT_BF16_AMX);
}

/* The C tiles and a hardware path (the prestate) run the same blocking; they differ only in
 * the order the instruction adds a pair's two products (TDPBF16PS's is not specified bit for
 * bit; VDPBF16PS adds the odd one first), so they agree to rounding. */
static void test_matches_ctile(void **state)
{
    enum dt_bf16_path p = *(enum dt_bf16_path *)*state;
    bf16_skip_unless_available(p, "vs ctile");
    int m = 50, n = 70, k = 130;
    float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n);
    float *c1 = calloc((size_t)m * n, sizeof(float)), *c2 = calloc((size_t)m * n, sizeof(float));
    for (int i = 0; i < m * k; i++)
        a[i] = uniform();
    for (int i = 0; i < k * n; i++)
        b[i] = uniform();
    dt_bf16 *pa = malloc(2 * dt_bf16_packed_a_size(m, k)),
            *pb = malloc(2 * dt_bf16_packed_b_size(k, n));
    dt_bf16_pack_a_f32(a, k, 1, m, k, pa);
    dt_bf16_pack_b_f32(b, n, 1, k, n, pb);
    dt_gemm_bf16_on(p, m, n, k, pa, pb, c1, n, false);
    dt_gemm_bf16_on(DT_BF16_CTILE, m, n, k, pa, pb, c2, n, false);
    int differ = 0;
    for (int i = 0; i < m * n; i++)
        differ += c1[i] != c2[i];
    print_message("%s vs ctile: %d of %d outputs differ in any bit\n", dt_bf16_path_name(p), differ,
                  m * n);
    for (int i = 0; i < m * n; i++)
        assert_true(fabsf(c1[i] - c2[i]) <= 1e-5f * (1 + fabsf(c2[i])));
    free(a), free(b), free(c1), free(c2), free(pa), free(pb);
}

/* A group of pairs that is zero in A but holds an infinity in B (or the other way round) must
 * still be multiplied: 0 x inf is NaN, as on AMX. The avx512bf16 build skips a group only
 * when both sides are zero bits (the channel padding), so the NaN shows on every tile path. */
static void test_zero_groups_still_multiply_infinities(void **state)
{
    enum dt_bf16_path p = *(enum dt_bf16_path *)*state;
    bf16_skip_unless_available(p, "zero groups");
    enum { M = 16, N = 16, K = 32 };
    float a[M * K], b[K * N], c[M * N];
    dt_bf16 pa[512], pb[512];
    for (int side = 0; side < 2; side++) {
        for (int i = 0; i < M * K; i++)
            a[i] = uniform();
        for (int i = 0; i < K * N; i++)
            b[i] = uniform();
        /* depth 16-23 (pairs 8-11, one group): zero on one side, one infinity on the other */
        for (int d = 16; d < 24; d++) {
            for (int i = 0; i < M; i++)
                a[i * K + d] = side ? (i == 3 && d == 17 ? INFINITY : uniform()) : 0.0f;
            for (int j = 0; j < N; j++)
                b[d * N + j] = side ? 0.0f : (d == 17 && j == 5 ? INFINITY : uniform());
        }
        dt_bf16_pack_a_f32(a, K, 1, M, K, pa);
        dt_bf16_pack_b_f32(b, N, 1, K, N, pb);
        dt_gemm_bf16_on(p, M, N, K, pa, pb, c, N, false);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                bool nan_expected = side ? i == 3 : j == 5;
                if (nan_expected != (bool)isnan(c[i * N + j]))
                    fail_msg("%s: side %d, c[%d][%d] = %g", dt_bf16_path_name(p), side, i, j,
                             c[i * N + j]);
            }
    }
}

/* A rows x cols matrix of uniform values with the conversion's specials: a NaN, an infinity, a
 * tie (1 + 2^-8, halfway between two bf16) and a denormal. */
static float *with_specials(int rows, int cols)
{
    float *x = malloc(sizeof(float) * rows * cols);
    for (int i = 0; i < rows * cols; i++)
        x[i] = uniform();
    x[0] = NAN, x[1] = -INFINITY, x[cols + 2] = 1.0f + 0x1p-8f, x[rows * cols - 1] = 0x1p-130f;
    return x;
}

/* dt_bf16_pack_rows_both on path p (the prestate) writes the bits of the two general packs, A
 * and B of the same rows, including the specials' (NaN, infinities, ties, denormals), on
 * whole-tile shapes (its own loops) and edge shapes (the general packs'); with wb NULL it
 * writes A alone, with wa NULL B alone. */
static void test_pack_rows_both(void **state)
{
    enum dt_bf16_path p = *(enum dt_bf16_path *)*state;
    bf16_skip_unless_available(p, "pack rows both");
    static const int shapes[][2] = {{64, 96}, {32, 32}, {512, 128}, {19, 45}, {40, 64}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int m = shapes[s][0], k = shapes[s][1];
        float *w = with_specials(m, k);
        size_t na = dt_bf16_packed_a_size(m, k), nb = dt_bf16_packed_b_size(m, k);
        dt_bf16 *wa = malloc(2 * na), *wb = malloc(2 * nb), *ea = malloc(2 * na),
                *eb = malloc(2 * nb);
        dt_bf16_pack_a_f32(w, k, 1, m, k, ea);
        dt_bf16_pack_b_f32(w, k, 1, m, k, eb);
        dt_bf16_pack_rows_both(p, w, m, k, wa, wb);
        assert_memory_equal(wa, ea, 2 * na);
        assert_memory_equal(wb, eb, 2 * nb);
        memset(wa, 0xff, 2 * na);
        dt_bf16_pack_rows_both(p, w, m, k, wa, NULL);
        assert_memory_equal(wa, ea, 2 * na);
        memset(wb, 0xff, 2 * nb);
        dt_bf16_pack_rows_both(p, w, m, k, NULL, wb);
        assert_memory_equal(wb, eb, 2 * nb);
        free(w), free(wa), free(wb), free(ea), free(eb);
    }
}

/* dt_bf16_pack_rows_range on path p (the prestate), piece by piece out of order (the optimizer
 * step packs a linear layer's weights so, nn/weight_copy.h), writes the rows of its piece and
 * nothing else: after each piece, the packs hold the whole pass's bits for a matrix whose
 * packed pieces have the new values and the others the old (halved) ones, in both layouts,
 * specials included. The piece is 32 rows on whole tiles (32 x 32 too) and the whole matrix on
 * edge shapes. */
static void test_pack_rows_range(void **state)
{
    enum dt_bf16_path p = *(enum dt_bf16_path *)*state;
    bf16_skip_unless_available(p, "pack rows range");
    static const int shapes[][3] = {
        {128, 64, 32}, {32, 32, 32}, {96, 160, 32}, {19, 45, 19}, {40, 64, 40}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int m = shapes[s][0], k = shapes[s][1], piece = dt_bf16_pack_rows_piece(m, k);
        assert_int_equal(piece, shapes[s][2]);
        float *w = with_specials(m, k), *mix = malloc(sizeof(float) * m * k);
        for (int i = 0; i < m * k; i++)
            mix[i] = 0.5f * w[i]; /* the weights before the step */
        size_t na = dt_bf16_packed_a_size(m, k), nb = dt_bf16_packed_b_size(m, k);
        dt_bf16 *wa = malloc(2 * na), *wb = malloc(2 * nb), *ea = malloc(2 * na),
                *eb = malloc(2 * nb);
        dt_bf16_pack_rows_both(p, mix, m, k, wa, wb);
        int pieces = m / piece;
        for (int j = 0; j < pieces; j++) {
            int r0 = ((j * 5 + 2) % pieces) * piece; /* 5 is prime to 3 and 4: every piece */
            dt_bf16_pack_rows_range(p, w, m, k, r0, r0 + piece, wa, wb);
            memcpy(mix + (size_t)r0 * k, w + (size_t)r0 * k, sizeof(float) * piece * k);
            dt_bf16_pack_rows_both(p, mix, m, k, ea, eb);
            assert_memory_equal(wa, ea, 2 * na);
            assert_memory_equal(wb, eb, 2 * nb);
        }
        assert_memory_equal(mix, w, sizeof(float) * m * k);
        free(w), free(mix), free(wa), free(wb), free(ea), free(eb);
    }
}

/* dt_bf16_pack_b_rows_t on path p (the prestate) writes the general packer's bits for x^T,
 * whole tiles (its own loops) and edges (the general packer's), specials included. */
static void test_pack_b_rows_t(void **state)
{
    enum dt_bf16_path p = *(enum dt_bf16_path *)*state;
    bf16_skip_unless_available(p, "pack b rows t");
    static const int shapes[][2] = {{32, 64}, {16, 32}, {128, 96}, {20, 64}, {32, 45}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int rows = shapes[s][0], cols = shapes[s][1];
        float *x = with_specials(rows, cols);
        size_t nb = dt_bf16_packed_b_size(cols, rows);
        dt_bf16 *got = malloc(2 * nb), *want = malloc(2 * nb);
        dt_bf16_pack_b_f32(x, 1, cols, cols, rows, want);
        dt_bf16_pack_b_rows_t(p, x, rows, cols, got);
        assert_memory_equal(got, want, 2 * nb);
        free(x), free(got), free(want);
    }
}

int main(void)
{
    static enum dt_bf16_path hardware[] = {DT_BF16_AVX512BF16, DT_BF16_AMX};
    static enum dt_bf16_path tiles[] = {DT_BF16_CTILE, DT_BF16_AVX512BF16, DT_BF16_AMX};
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rounding_is_nearest_even),
        cmocka_unit_test(test_packing_through_strides),
        cmocka_unit_test(test_reference_path),
        cmocka_unit_test(test_ctile_path),
        cmocka_unit_test(test_avx512bf16_path),
        cmocka_unit_test(test_amx_path),
        cmocka_unit_test_prestate(test_matches_ctile, &hardware[0]),
        cmocka_unit_test_prestate(test_matches_ctile, &hardware[1]),
        cmocka_unit_test_prestate(test_pack_b_rows_t, &tiles[0]),
        cmocka_unit_test_prestate(test_pack_b_rows_t, &tiles[1]),
        cmocka_unit_test_prestate(test_pack_b_rows_t, &tiles[2]),
        cmocka_unit_test_prestate(test_pack_rows_both, &tiles[0]),
        cmocka_unit_test_prestate(test_pack_rows_both, &tiles[1]),
        cmocka_unit_test_prestate(test_pack_rows_both, &tiles[2]),
        cmocka_unit_test_prestate(test_pack_rows_range, &tiles[0]),
        cmocka_unit_test_prestate(test_pack_rows_range, &tiles[1]),
        cmocka_unit_test_prestate(test_pack_rows_range, &tiles[2]),
        cmocka_unit_test_prestate(test_zero_groups_still_multiply_infinities, &tiles[0]),
        cmocka_unit_test_prestate(test_zero_groups_still_multiply_infinities, &tiles[1]),
        cmocka_unit_test_prestate(test_zero_groups_still_multiply_infinities, &tiles[2]),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

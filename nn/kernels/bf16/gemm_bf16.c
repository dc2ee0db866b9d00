/* Packing, the reference product and path choice for the bf16 GEMM (gemm_bf16.h); the tile
 * kernels themselves are gemm_bf16.isa.c. */
#include "nn/kernels/bf16/gemm_bf16.h"

#include <omp.h>

#define TILE_ELEMS 512

static int tiles(int n, int per)
{
    return n > 0 ? (n + per - 1) / per : 0;
}

size_t dt_bf16_packed_a_size(int m, int k)
{
    return (size_t)tiles(m, 16) * tiles(k, 32) * TILE_ELEMS;
}

size_t dt_bf16_packed_b_size(int k, int n)
{
    return (size_t)tiles(k, 32) * tiles(n, 16) * TILE_ELEMS;
}

/* The source element as bf16, from either element type (one of f32 / h is NULL). */
static inline dt_bf16 element(const float *f32, const dt_bf16 *h, ptrdiff_t at)
{
    return f32 ? dt_bf16_from_f32(f32[at]) : h[at];
}

/* A whole 16 x 32 tile of A from fp32 at src (its element (0, 0)): the conversion pass that
 * runs at every forward (weights, activations), so the contiguous case gets its own loop
 * the compiler vectorises. */
static void pack_a_tile_f32(const float *src, ptrdiff_t rs, ptrdiff_t cs, dt_bf16 *dst)
{
    for (int r = 0; r < 16; r++, src += rs, dst += 32)
        if (cs == 1)
            for (int c = 0; c < 32; c++)
                dst[c] = dt_bf16_from_f32(src[c]);
        else
            for (int c = 0; c < 32; c++)
                dst[c] = dt_bf16_from_f32(src[c * cs]);
}

/* A whole 32 x 16 tile of B from fp32: rows 2p and 2p + 1 of a column side by side. */
static void pack_b_tile_f32(const float *src, ptrdiff_t rs, ptrdiff_t cs, dt_bf16 *dst)
{
    if (rs == 1) { /* columns contiguous: one column's 32 values to its 16 pairs */
        for (int c = 0; c < 16; c++) {
            const float *col = src + c * cs;
            for (int p = 0; p < 16; p++) {
                dst[p * 32 + 2 * c] = dt_bf16_from_f32(col[2 * p]);
                dst[p * 32 + 2 * c + 1] = dt_bf16_from_f32(col[2 * p + 1]);
            }
        }
        return;
    }
    for (int p = 0; p < 16; p++) {
        const float *r0 = src + 2 * p * rs, *r1 = r0 + rs;
        if (cs == 1) { /* rows contiguous: two rows interleaved */
            for (int c = 0; c < 16; c++) {
                dst[p * 32 + 2 * c] = dt_bf16_from_f32(r0[c]);
                dst[p * 32 + 2 * c + 1] = dt_bf16_from_f32(r1[c]);
            }
            continue;
        }
        for (int c = 0; c < 16; c++) {
            dst[p * 32 + 2 * c] = dt_bf16_from_f32(r0[c * cs]);
            dst[p * 32 + 2 * c + 1] = dt_bf16_from_f32(r1[c * cs]);
        }
    }
}

/* Tiles wholly inside the matrix take the fp32 fast loops above; edge tiles (and bf16
 * sources) the element loop, padding with zeros. Tile rows are independent: threads take
 * them unless called inside a parallel region. */
static void pack_a(const float *f32, const dt_bf16 *h, ptrdiff_t rs, ptrdiff_t cs, int m, int k,
                   dt_bf16 *dst)
{
    int mt_count = tiles(m, 16), kt_count = tiles(k, 32);
#pragma omp parallel for schedule(static) if (!omp_in_parallel() &&                                \
                                              (double)m * k > DT_BF16_PACK_PARALLEL_MIN)
    for (int mt = 0; mt < mt_count; mt++)
        for (int kt = 0; kt < kt_count; kt++) {
            dt_bf16 *t = dst + ((size_t)mt * kt_count + kt) * TILE_ELEMS;
            if (f32 && (mt + 1) * 16 <= m && (kt + 1) * 32 <= k) {
                pack_a_tile_f32(f32 + mt * 16 * rs + kt * 32 * cs, rs, cs, t);
                continue;
            }
            for (int r = 0; r < 16; r++)
                for (int c = 0; c < 32; c++) {
                    int i = mt * 16 + r, j = kt * 32 + c;
                    t[r * 32 + c] = i < m && j < k ? element(f32, h, i * rs + j * cs) : 0;
                }
        }
}

static void pack_b(const float *f32, const dt_bf16 *h, ptrdiff_t rs, ptrdiff_t cs, int k, int n,
                   dt_bf16 *dst)
{
    int nt_count = tiles(n, 16), kt_count = tiles(k, 32);
#pragma omp parallel for schedule(static) if (!omp_in_parallel() &&                                \
                                              (double)k * n > DT_BF16_PACK_PARALLEL_MIN)
    for (int nt = 0; nt < nt_count; nt++)
        for (int kt = 0; kt < kt_count; kt++) {
            dt_bf16 *t = dst + ((size_t)nt * kt_count + kt) * TILE_ELEMS;
            if (f32 && (nt + 1) * 16 <= n && (kt + 1) * 32 <= k) {
                pack_b_tile_f32(f32 + kt * 32 * rs + nt * 16 * cs, rs, cs, t);
                continue;
            }
            for (int p = 0; p < 16; p++)
                for (int c = 0; c < 16; c++)
                    for (int half = 0; half < 2; half++) {
                        int i = kt * 32 + 2 * p + half, j = nt * 16 + c;
                        t[p * 32 + c * 2 + half] =
                            i < k && j < n ? element(f32, h, i * rs + j * cs) : 0;
                    }
        }
}

void dt_bf16_pack_a_f32(const float *src, ptrdiff_t rs, ptrdiff_t cs, int m, int k, dt_bf16 *dst)
{
    pack_a(src, NULL, rs, cs, m, k, dst);
}

void dt_bf16_pack_a_bf16(const dt_bf16 *src, ptrdiff_t rs, ptrdiff_t cs, int m, int k, dt_bf16 *dst)
{
    pack_a(NULL, src, rs, cs, m, k, dst);
}

void dt_bf16_pack_b_f32(const float *src, ptrdiff_t rs, ptrdiff_t cs, int k, int n, dt_bf16 *dst)
{
    pack_b(src, NULL, rs, cs, k, n, dst);
}

void dt_bf16_pack_b_bf16(const dt_bf16 *src, ptrdiff_t rs, ptrdiff_t cs, int k, int n, dt_bf16 *dst)
{
    pack_b(NULL, src, rs, cs, k, n, dst);
}

void dt_bf16_pack_rows_both(enum dt_bf16_path p, const float *w, int m, int k, dt_bf16 *wa,
                            dt_bf16 *wb)
{
    dt_bf16_pack_rows_range(p, w, m, k, 0, m, wa, wb);
}

static bool whole_tiles(int m, int k)
{
    return m > 0 && k > 0 && m % 32 == 0 && k % 32 == 0;
}

int dt_bf16_pack_rows_piece(int m, int k)
{
    return whole_tiles(m, k) ? 32 : m;
}

void dt_bf16_pack_rows_range(enum dt_bf16_path p, const float *w, int m, int k, int r0, int r1,
                             dt_bf16 *wa, dt_bf16 *wb)
{
    if (!whole_tiles(m, k)) { /* edge tiles: the element loops pad them */
        if (wa)
            dt_bf16_pack_a_f32(w, k, 1, m, k, wa);
        if (wb)
            dt_bf16_pack_b_f32(w, k, 1, m, k, wb);
    } else if (p == DT_BF16_AMX) {
        dt_bf16_pack_rows_both_amx(w, m, k, r0 / 32, r1 / 32, wa, wb);
    } else if (p == DT_BF16_AVX512BF16) {
        dt_bf16_pack_rows_both_avx512bf16(w, m, k, r0 / 32, r1 / 32, wa, wb);
    } else {
        dt_bf16_pack_rows_both_ctile(w, m, k, r0 / 32, r1 / 32, wa, wb);
    }
}

void dt_bf16_pack_b_rows_t(enum dt_bf16_path p, const float *x, int rows, int cols, dt_bf16 *dst)
{
    if (rows % 16 || cols % 32 || rows <= 0 || cols <= 0)
        dt_bf16_pack_b_f32(x, 1, cols, cols, rows, dst);
    else if (p == DT_BF16_AMX)
        dt_bf16_pack_b_rows_t_amx(x, rows, cols, dst);
    else if (p == DT_BF16_AVX512BF16)
        dt_bf16_pack_b_rows_t_avx512bf16(x, rows, cols, dst);
    else
        dt_bf16_pack_b_rows_t_ctile(x, rows, cols, dst);
}

/* Element (i, j) of packed A and packed B. */
static float a_at(const dt_bf16 *a, int kt_count, int i, int j)
{
    return dt_bf16_to_f32(
        a[((size_t)(i / 16) * kt_count + j / 32) * TILE_ELEMS + (i % 16) * 32 + j % 32]);
}

static float b_at(const dt_bf16 *b, int kt_count, int i, int j)
{
    return dt_bf16_to_f32(b[((size_t)(j / 16) * kt_count + i / 32) * TILE_ELEMS +
                            (i % 32) / 2 * 32 + (j % 16) * 2 + i % 2]);
}

/* fp32 arithmetic on the bf16 values, k in order: what the hardware paths approximate. */
static void gemm_reference(int m, int n, int k, const dt_bf16 *a, const dt_bf16 *b, float *c,
                           ptrdiff_t ldc, bool accumulate)
{
    int kt_count = tiles(k, 32);
#pragma omp parallel for if (!omp_in_parallel() && (double)m * n * k > 4e6)
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float s = accumulate ? c[i * ldc + j] : 0.0f;
            for (int p = 0; p < k; p++)
                s += a_at(a, kt_count, i, p) * b_at(b, kt_count, p, j);
            c[i * ldc + j] = s;
        }
}

void dt_gemm_bf16_on(enum dt_bf16_path p, int m, int n, int k, const dt_bf16 *a, const dt_bf16 *b,
                     float *c, ptrdiff_t ldc, bool accumulate)
{
    switch (p) {
    case DT_BF16_AMX:
        dt_gemm_bf16_amx(m, n, k, a, b, c, ldc, accumulate);
        break;
    case DT_BF16_AVX512BF16:
        dt_gemm_bf16_avx512bf16(m, n, k, a, b, c, ldc, accumulate);
        break;
    case DT_BF16_CTILE:
        dt_gemm_bf16_ctile(m, n, k, a, b, c, ldc, accumulate);
        break;
    default:
        gemm_reference(m, n, k, a, b, c, ldc, accumulate);
        break;
    }
}

void dt_gemm_bf16(int m, int n, int k, const dt_bf16 *a, const dt_bf16 *b, float *c, ptrdiff_t ldc,
                  bool accumulate)
{
    dt_gemm_bf16_on(dt_isa_bf16_path(), m, n, k, a, b, c, ldc, accumulate);
}

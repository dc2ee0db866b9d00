/* The vector builds of the bf16 array loops (util/vec_isa.h): util/bf16.h's conversions and
 * dist/bf16_sum.h's sums. Every build this CPU runs must give the bits of the scalar
 * arithmetic (util/bf16.h's dt_bf16_from_f32, one fp32 addition per element) on the inputs
 * where a vector path could differ: ties with odd and even last bits, denormals (which
 * VCVTNEPS2BF16 would flush), +-0, +-inf, quiet and signalling NaNs, finite values that round
 * to inf, random bit patterns, and lengths around the vector widths, at an aligned and a
 * misaligned start, the elements past the end untouched. A build the CPU lacks is skipped
 * with the reason printed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "dist/bf16_sum.h"
#include "util/bf16.h"
#include "util/vec_isa.h"

/* fp32 bit patterns; every pair of them is summed (specials x specials), so the count must
 * stay under sqrt(MAX_N). */
static const uint32_t specials[] = {
    0x00000000, 0x80000000, /* +-0 */
    0x7f800000, 0xff800000, /* +-inf */
    0x7fc00000, 0xffc00000, /* quiet NaNs */
    0x7f800001, 0xff800001, /* signalling NaNs whose payload is all in the dropped half */
    0x7fa00000, 0x7fffffff, /* a signalling NaN, the largest payload */
    0x7f7fffff, 0xff7fffff, /* +-FLT_MAX: round to +-inf */
    0x7f7f8000, 0x7f7f7fff, /* a tie at the top (odd last bit: up to inf), just below it */
    0x00000001, 0x80000001, /* the smallest denormals */
    0x00008000, 0x00018000, /* denormal ties: even last bit (stays), odd (goes up) */
    0x007fffff,             /* the largest denormal: rounds up to the smallest normal */
    0x3f808000, 0x3f818000, /* ties at 1: even (down to 1), odd (up) */
    0xbf818000,             /* a negative odd tie */
    0x3f808001, 0x3f807fff, /* just above and below a tie */
    0x3f800000, 0xc0490fdb, /* 1, -pi */
    0x00800000, 0x33800000, /* the smallest normal, 2^-24 */
};
#define NSPECIAL (sizeof specials / sizeof specials[0])

enum { MAX_N = 1003, GUARD = 8, CAP = MAX_N + 1 + GUARD };

static const size_t lengths[] = {0, 1, 15, 17, 31, 33, MAX_N};

static float f32_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* The two input streams: specials against specials first (a's index runs fastest, so every
 * pair meets), then random bits. */
static uint32_t stream(int which, size_t i)
{
    if (i < NSPECIAL * NSPECIAL)
        return specials[which ? i / NSPECIAL : i % NSPECIAL];
    uint32_t x = (uint32_t)i * 2654435761u ^ (uint32_t)(which + 1) * 0x9e3779b9u;
    x ^= x >> 15, x *= 0x2c1b3c6du, x ^= x >> 12, x *= 0x297a2d39u, x ^= x >> 15;
    return x;
}

/* ---- the scalar arithmetic, one element per call (noinline: never vectorised) ------------ */

__attribute__((noinline)) static dt_bf16 scalar_from_f32(float f)
{
    return dt_bf16_from_f32(f);
}

/* dist/bf16_sum.h's addition: fp32, a NaN sum the quiet NaN 0x7fc00000 whichever terms made it. */
__attribute__((noinline)) static float scalar_add(float a, float b)
{
    float s = a + b;
    return s != s ? f32_bits(0x7fc00000) : s;
}

/* ---- one build against the scalar arithmetic ----------------------------------------------- */

struct buffers {
    float f[CAP], f2[CAP], want_f[CAP];
    dt_bf16 h[CAP], h2[CAP], want_h[CAP];
};

/* The buffers from offset `at`: stream 0 in f and (its top half) h, stream 1 in h2; the rest,
 * guards included, a marker that no loop writes. */
static void fill(struct buffers *b, size_t at)
{
    for (size_t i = 0; i < CAP; i++) {
        uint32_t a = i >= at ? stream(0, i - at) : 0x12345678u;
        uint32_t c = i >= at ? stream(1, i - at) : 0x9abcdef0u;
        b->f[i] = b->f2[i] = f32_bits(a);
        b->h[i] = (dt_bf16)(a >> 16);
        b->h2[i] = (dt_bf16)(c >> 16);
    }
    memcpy(b->want_f, b->f, sizeof b->f);
    memcpy(b->want_h, b->h, sizeof b->h);
}

static void expect_f32(const float *got, const float *want, const char *loop, size_t n, size_t at)
{
    for (size_t i = 0; i < CAP; i++)
        if (bits_of(got[i]) != bits_of(want[i]))
            fail_msg("%s (%s build), n %zu from %zu: element %zu is 0x%08x, expected 0x%08x", loop,
                     dt_vec_isa_name(dt_vec_isa_get()), n, at, i, (unsigned)bits_of(got[i]),
                     (unsigned)bits_of(want[i]));
}

static void expect_bf16(const dt_bf16 *got, const dt_bf16 *want, const char *loop, size_t n,
                        size_t at)
{
    for (size_t i = 0; i < CAP; i++)
        if (got[i] != want[i])
            fail_msg("%s (%s build), n %zu from %zu: element %zu is 0x%04x, expected 0x%04x", loop,
                     dt_vec_isa_name(dt_vec_isa_get()), n, at, i, got[i], want[i]);
}

static void check_loops(size_t n, size_t at)
{
    static struct buffers b;
    const size_t end = at + n;

    fill(&b, at);
    dt_bf16_from_f32_n(b.f + at, b.h + at, n);
    for (size_t i = at; i < end; i++)
        b.want_h[i] = scalar_from_f32(b.f[i]);
    expect_bf16(b.h, b.want_h, "dt_bf16_from_f32_n", n, at);

    fill(&b, at);
    dt_bf16_to_f32_n(b.h2 + at, b.f + at, n);
    for (size_t i = at; i < end; i++)
        b.want_f[i] = f32_bits((uint32_t)b.h2[i] << 16);
    expect_f32(b.f, b.want_f, "dt_bf16_to_f32_n", n, at);

    fill(&b, at);
    dt_bf16_round_n(b.f + at, b.f2 + at, n);
    dt_bf16_round_n(b.f + at, b.f + at, n); /* in place, as tcp.c does */
    for (size_t i = at; i < end; i++)
        b.want_f[i] = f32_bits((uint32_t)scalar_from_f32(b.want_f[i]) << 16);
    expect_f32(b.f2, b.want_f, "dt_bf16_round_n", n, at);
    expect_f32(b.f, b.want_f, "dt_bf16_round_n in place", n, at);

    fill(&b, at);
    dt_bf16_add_n(b.f + at, b.h2 + at, n);
    for (size_t i = at; i < end; i++)
        b.want_f[i] = scalar_add(b.want_f[i], f32_bits((uint32_t)b.h2[i] << 16));
    expect_f32(b.f, b.want_f, "dt_bf16_add_n", n, at);

    fill(&b, at);
    dt_bf16_add_own_n(b.f + at, b.h2 + at, n);
    for (size_t i = at; i < end; i++) {
        float own = f32_bits((uint32_t)scalar_from_f32(b.want_f[i]) << 16);
        b.want_f[i] = scalar_add(own, f32_bits((uint32_t)b.h2[i] << 16));
    }
    expect_f32(b.f, b.want_f, "dt_bf16_add_own_n", n, at);

    fill(&b, at);
    dt_bf16_sum_packed_n(b.h + at, b.h2 + at, n);
    for (size_t i = at; i < end; i++)
        b.want_h[i] = scalar_from_f32(
            scalar_add(f32_bits((uint32_t)b.h2[i] << 16), f32_bits((uint32_t)b.want_h[i] << 16)));
    expect_bf16(b.h, b.want_h, "dt_bf16_sum_packed_n", n, at);
}

static void check_build(enum dt_vec_isa isa)
{
    if (!dt_vec_isa_available(isa)) {
        print_message("skip the %s build of the bf16 loops: this CPU lacks %s\n",
                      dt_vec_isa_name(isa),
                      isa == DT_VEC_AVX2 ? "AVX2 + FMA" : "AVX-512 (F, BW, VL and DQ)");
        skip();
    }
    enum dt_vec_isa was = dt_vec_isa_force(isa);
    assert_int_equal(dt_vec_isa_get(), isa);
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++)
        for (size_t at = 0; at < 2; at++)
            check_loops(lengths[l], at);
    dt_vec_isa_force(was);
}

static void test_generic_build(void **state)
{
    (void)state;
    check_build(DT_VEC_GENERIC);
}

static void test_avx2_build(void **state)
{
    (void)state;
    check_build(DT_VEC_AVX2);
}

static void test_avx512_build(void **state)
{
    (void)state;
    check_build(DT_VEC_AVX512);
}

/* The level chosen without a test's force: DTRAIN_ISA's (tests/run.sh reruns this binary with
 * DTRAIN_ISA=generic and avx2), else the widest this CPU has. Runs first, before any force. */
static void test_level_follows_dtrain_isa(void **state)
{
    (void)state;
    const char *v = getenv("DTRAIN_ISA");
    enum dt_vec_isa want = DT_VEC_GENERIC;
    for (int i = DT_VEC_ISA_COUNT - 1; i > 0 && want == DT_VEC_GENERIC; i--)
        if (dt_vec_isa_available((enum dt_vec_isa)i))
            want = (enum dt_vec_isa)i;
    if (v && !strcmp(v, "generic"))
        want = DT_VEC_GENERIC;
    else if (v && !strcmp(v, "avx2") && dt_vec_isa_available(DT_VEC_AVX2))
        want = DT_VEC_AVX2;
    print_message("DTRAIN_ISA=%s: the %s loops\n", v ? v : "(unset)",
                  dt_vec_isa_name(dt_vec_isa_get()));
    assert_string_equal(dt_vec_isa_name(dt_vec_isa_get()), dt_vec_isa_name(want));
}

/* The specials' roundings that the comparisons above only take from the scalar function,
 * pinned here so that a change to it cannot move every build at once. */
static void test_scalar_rounding_of_specials(void **state)
{
    (void)state;
    static const uint32_t cases[][2] = {
        {0x3f808000, 0x3f80}, {0x3f818000, 0x3f82}, {0xbf818000, 0xbf82}, {0x3f808001, 0x3f81},
        {0x3f807fff, 0x3f80}, {0x00008000, 0x0000}, {0x00018000, 0x0002}, {0x00000001, 0x0000},
        {0x007fffff, 0x0080}, {0x7f7fffff, 0x7f80}, {0xff7fffff, 0xff80}, {0x7f7f8000, 0x7f80},
        {0x7f7f7fff, 0x7f7f}, {0x7f800000, 0x7f80}, {0x80000000, 0x8000}, {0x7f800001, 0x7fc0},
        {0xff800001, 0xffc0}, {0x7fa00000, 0x7fe0}, {0x7fffffff, 0x7fff},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dt_bf16 h = dt_bf16_from_f32(f32_bits(cases[i][0]));
        if (h != cases[i][1])
            fail_msg("0x%08x rounds to 0x%04x, expected 0x%04x", (unsigned)cases[i][0], h,
                     (unsigned)cases[i][1]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_level_follows_dtrain_isa),
        cmocka_unit_test(test_scalar_rounding_of_specials),
        cmocka_unit_test(test_generic_build),
        cmocka_unit_test(test_avx2_build),
        cmocka_unit_test(test_avx512_build),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

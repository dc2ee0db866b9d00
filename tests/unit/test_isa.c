/* nn/kernels/isa.c: parsing DTRAIN_ISA names, refusing unknown names and paths this CPU lacks,
 * the choice from the environment (unset: the widest path the CPU runs), and the bf16 products
 * each path runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "nn/kernels/isa.h"

static void test_parse_names(void **state)
{
    (void)state;
    char err[160];
    enum dt_isa isa = DT_ISA_COUNT;
    assert_int_equal(dt_isa_parse("generic", &isa, err, sizeof err), 0);
    assert_int_equal(isa, DT_ISA_GENERIC);
    assert_int_equal(dt_isa_parse("avx2", &isa, err, sizeof err), 0);
    assert_int_equal(isa, DT_ISA_AVX2);
    assert_int_equal(dt_isa_parse("avx512", &isa, err, sizeof err), 0);
    assert_int_equal(isa, DT_ISA_AVX512);
    for (enum dt_isa i = 0; i < DT_ISA_COUNT; i++)
        assert_int_equal(dt_isa_parse(dt_isa_label(i), &isa, err, sizeof err), 0);
}

static void test_unknown_names_refused(void **state)
{
    (void)state;
    static const char *bad[] = {"AVX2", "avx", "sse4", "avx512f", "", " avx2"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char err[160] = "";
        enum dt_isa isa = DT_ISA_GENERIC;
        assert_int_equal(dt_isa_parse(bad[i], &isa, err, sizeof err), -2);
        assert_non_null(strstr(err, "unknown instruction set"));
        assert_non_null(strstr(err, "expected generic, avx2, avx512, avx512bf16 or amx"));
    }
}

static void test_set_follows_availability(void **state)
{
    (void)state;
    char err[160];
    assert_true(dt_isa_available(DT_ISA_GENERIC));
    assert_true(dt_isa_available(dt_isa_best()));
    for (enum dt_isa i = 0; i < DT_ISA_COUNT; i++) {
        err[0] = '\0';
        int rc = dt_isa_set(i, err, sizeof err);
        if (dt_isa_available(i)) {
            assert_int_equal(rc, 0);
            assert_int_equal(dt_isa_get(), i);
            assert_string_equal(dt_isa_name(), dt_isa_label(i));
        } else {
            assert_int_equal(rc, -2);
            assert_non_null(strstr(err, "this CPU cannot run"));
        }
    }
    /* a wider path than the best is never available */
    for (enum dt_isa i = dt_isa_best() + 1; i < DT_ISA_COUNT; i++)
        assert_false(dt_isa_available(i));
    enum dt_isa keep = dt_isa_get();
    assert_int_equal(dt_isa_set(DT_ISA_COUNT, err, sizeof err), -2);
    assert_int_equal(dt_isa_get(), keep);
}

static void test_init_from_env(void **state)
{
    (void)state;
    char err[160];
    assert_int_equal(unsetenv("DTRAIN_ISA"), 0);
    assert_int_equal(dt_isa_init_env(err, sizeof err), 0);
    assert_int_equal(dt_isa_get(), dt_isa_best());

    assert_int_equal(setenv("DTRAIN_ISA", "generic", 1), 0);
    assert_int_equal(dt_isa_init_env(err, sizeof err), 0);
    assert_string_equal(dt_isa_name(), "generic");

    assert_int_equal(setenv("DTRAIN_ISA", "neon", 1), 0);
    assert_int_equal(dt_isa_init_env(err, sizeof err), -2);
    assert_non_null(strstr(err, "'neon'"));

    for (enum dt_isa i = 0; i < DT_ISA_COUNT; i++) {
        assert_int_equal(setenv("DTRAIN_ISA", dt_isa_label(i), 1), 0);
        int rc = dt_isa_init_env(err, sizeof err);
        assert_int_equal(rc, dt_isa_available(i) ? 0 : -2);
    }
    unsetenv("DTRAIN_ISA");
}

/* Each path's bf16 products: the tile kernels' build of that path (amx, avx512bf16), else the
 * emulated reference; a bf16 path is available exactly where its path is, and one the CPU
 * lacks says why. */
static void test_bf16_path_of_each_path(void **state)
{
    (void)state;
    char err[160];
    static const enum dt_bf16_path expected[DT_ISA_COUNT] = {
        DT_BF16_REFERENCE, DT_BF16_REFERENCE, DT_BF16_REFERENCE, DT_BF16_AVX512BF16, DT_BF16_AMX};
    enum dt_isa keep = dt_isa_get();
    for (enum dt_isa i = 0; i < DT_ISA_COUNT; i++) {
        if (dt_isa_set(i, err, sizeof err)) {
            print_message("skip path %s: %s\n", dt_isa_label(i), err);
            continue;
        }
        assert_int_equal(dt_isa_bf16_path(), expected[i]);
        const char *text = dt_isa_bf16_path_text();
        if (expected[i] == DT_BF16_REFERENCE)
            assert_non_null(strstr(text, "reference (emulated"));
        else
            assert_string_equal(text, dt_isa_label(i));
    }
    const char *why = NULL;
    bool vdp = dt_bf16_path_available(DT_BF16_AVX512BF16, &why);
    assert_int_equal(vdp, dt_isa_available(DT_ISA_AVX512BF16));
    if (!vdp)
        assert_string_equal(why, "the CPU has no AVX512-BF16 (VDPBF16PS)");
    assert_true(dt_bf16_path_available(DT_BF16_CTILE, NULL));
    assert_true(dt_bf16_path_available(DT_BF16_REFERENCE, NULL));
    assert_int_equal(dt_isa_set(keep, err, sizeof err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_names),
        cmocka_unit_test(test_unknown_names_refused),
        cmocka_unit_test(test_set_follows_availability),
        cmocka_unit_test(test_init_from_env),
        cmocka_unit_test(test_bf16_path_of_each_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

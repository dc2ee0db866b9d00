/* cmd/bench/ (combos, report, plot): combination lists, --grid parsing, the median, and the table
 * writers' quoting (CSV fields with commas and quotes, SVG text with markup characters). The runs
 * themselves are tested end to end in tests/cli/bench.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/bench/bench.h"
#include "util/err.h"

static void expect_combos(const struct dt_bench_combo *c, int n, const int *want, int nwant)
{
    assert_int_equal(n, nwant);
    for (int i = 0; i < n; i++) {
        assert_int_equal(c[i].instances, want[2 * i]);
        assert_int_equal(c[i].threads, want[2 * i + 1]);
    }
}

static void test_combination_lists(void **state)
{
    (void)state;
    struct dt_bench_combo *c;
    int n = dt_bench_combos_split(16, &c);
    expect_combos(c, n, (int[]){1, 16, 2, 8, 4, 4, 8, 2, 16, 1}, 5);
    free(c);
    n = dt_bench_combos_split(12, &c);
    expect_combos(c, n, (int[]){1, 12, 2, 6, 3, 4, 4, 3, 6, 2, 12, 1}, 6);
    free(c);
    n = dt_bench_combos_threads(16, &c);
    expect_combos(c, n, (int[]){1, 1, 1, 2, 1, 4, 1, 8, 1, 16}, 5);
    free(c);
    n = dt_bench_combos_threads(12, &c);
    expect_combos(c, n, (int[]){1, 1, 1, 2, 1, 4, 1, 8, 1, 12}, 5);
    free(c);
    n = dt_bench_combos_threads(1, &c);
    expect_combos(c, n, (int[]){1, 1}, 1);
    free(c);
}

static void test_grid_parsing(void **state)
{
    (void)state;
    struct dt_bench_combo *c;
    int n = dt_bench_combos_parse("1x16,2x8,4X4", &c);
    expect_combos(c, n, (int[]){1, 16, 2, 8, 4, 4}, 3);
    free(c);
    const char *bad[] = {"", "2", "2x", "x2", "2x2,", "2x2;4x4", "0x4", "2x0", "2x2x2"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        c = NULL;
        assert_int_equal(dt_bench_combos_parse(bad[i], &c), -DT_EUSAGE);
        assert_null(c);
        assert_non_null(strstr(dt_last_error(), "--grid"));
    }
}

static void test_median(void **state)
{
    (void)state;
    assert_true(isnan(dt_bench_median(NULL, 0)));
    assert_true(dt_bench_median((double[]){3}, 1) == 3);
    assert_true(dt_bench_median((double[]){5, 1, 3}, 3) == 3);
    assert_true(dt_bench_median((double[]){4, 1, 3, 2}, 4) == 2.5);
}

static const struct dt_bench_col cols[] = {
    {"name", "name", DT_BENCH_STR, NULL, false},
    {"value", "value", DT_BENCH_NUM, "%.2f", false},
};

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static void test_csv_and_svg_quoting(void **state)
{
    (void)state;
    struct dt_bench_table t;
    dt_bench_table_init(&t, "row", cols, 2);
    t.value_col = 1;
    struct dt_bench_cell a[2] = {{.str = "a,\"b\""}, {.num = 1.5}};
    struct dt_bench_cell b[2] = {{.str = "<x & y>"}, {.num = 0}};
    assert_int_equal(dt_bench_table_add(&t, a, NULL), 0);
    assert_int_equal(dt_bench_table_add(&t, b, "rank 1 said \"no\", then <died>"), 0);
    char path[] = "/tmp/dtrain-test-bench-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(dt_bench_table_write_csv(&t, path), 0);
    assert_string_equal(slurp(path), "name,value,error\n"
                                     "\"a,\"\"b\"\"\",1.5,\n"
                                     "<x & y>,,\"rank 1 said \"\"no\"\", then <died>\"\n");
    assert_int_equal(dt_bench_table_write_svg(&t, path, "t & <t>", "s"), 0);
    const char *svg = slurp(path);
    assert_non_null(strstr(svg, "t &amp; &lt;t&gt;"));
    assert_non_null(strstr(svg, "&lt;x &amp; y&gt;"));
    assert_non_null(strstr(svg, "failed: rank 1 said &quot;no&quot;, then &lt;died&gt;"));
    assert_null(strstr(svg, "<died>"));
    unlink(path);
    dt_bench_table_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_combination_lists),
        cmocka_unit_test(test_grid_parsing),
        cmocka_unit_test(test_median),
        cmocka_unit_test(test_csv_and_svg_quoting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

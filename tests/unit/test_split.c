/* data/split: the validation split is stratified, disjoint, order-keeping, the same for the
 * same seed and different for another; file names travel with their samples; bad fractions
 * and empty sides are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "data/split.h"
#include "util/err.h"

/* 1x1x2 samples: pixel 0 is the sample's index (mod 256), pixel 1 its index / 256. */
static void make(struct dt_dataset *d, size_t n, int classes)
{
    memset(d, 0, sizeof *d);
    d->n = n;
    d->c = 1;
    d->h = 1;
    d->w = 2;
    d->classes = classes;
    d->x = malloc(2 * n);
    d->y = malloc(n);
    for (size_t i = 0; i < n; i++) {
        d->x[2 * i] = (uint8_t)(i % 256);
        d->x[2 * i + 1] = (uint8_t)(i / 256);
        d->y[i] = (uint8_t)(i % (size_t)classes);
    }
}

static size_t index_of(const struct dt_dataset *d, size_t i)
{
    return d->x[2 * i] + 256u * d->x[2 * i + 1];
}

static void test_stratified_disjoint_ordered(void **state)
{
    (void)state;
    struct dt_dataset src, tr, va;
    make(&src, 1000, 10);
    assert_int_equal(dt_dataset_split(&src, 0.1, 7, &tr, &va), 0);
    assert_int_equal(va.n, 100);
    assert_int_equal(tr.n, 900);
    size_t hist[10];
    dt_dataset_histogram(&va, hist);
    for (int c = 0; c < 10; c++)
        assert_int_equal(hist[c], 10);
    uint8_t *seen = calloc(1000, 1);
    const struct dt_dataset *parts[2] = {&tr, &va};
    for (int p = 0; p < 2; p++)
        for (size_t i = 0; i < parts[p]->n; i++) {
            size_t k = index_of(parts[p], i);
            assert_int_equal(seen[k], 0);
            seen[k] = 1;
            assert_int_equal(parts[p]->y[i], k % 10); /* label travelled with its pixels */
            if (i > 0)
                assert_true(index_of(parts[p], i - 1) < k); /* source order kept */
        }
    free(seen);
    dt_dataset_free(&tr);
    dt_dataset_free(&va);
    dt_dataset_free(&src);
}

static void test_deterministic_per_seed(void **state)
{
    (void)state;
    struct dt_dataset src, a1, v1, a2, v2, a3, v3;
    make(&src, 500, 5);
    assert_int_equal(dt_dataset_split(&src, 0.2, 1, &a1, &v1), 0);
    assert_int_equal(dt_dataset_split(&src, 0.2, 1, &a2, &v2), 0);
    assert_int_equal(dt_dataset_split(&src, 0.2, 2, &a3, &v3), 0);
    assert_int_equal(v1.n, v2.n);
    assert_memory_equal(v1.x, v2.x, 2 * v1.n);
    assert_int_equal(v1.n, v3.n);
    assert_true(memcmp(v1.x, v3.x, 2 * v1.n) != 0);
    struct dt_dataset *all[] = {&a1, &v1, &a2, &v2, &a3, &v3, &src};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        dt_dataset_free(all[i]);
}

static void test_refusals(void **state)
{
    (void)state;
    struct dt_dataset src, tr, va;
    make(&src, 10, 10);
    snprintf(src.source, sizeof src.source, "tiny");
    assert_int_equal(dt_dataset_split(&src, 0, 1, &tr, &va), -DT_EUSAGE);
    assert_int_equal(dt_dataset_split(&src, 1, 1, &tr, &va), -DT_EUSAGE);
    /* One sample a class: 0.2 rounds to none anywhere. */
    assert_int_equal(dt_dataset_split(&src, 0.2, 1, &tr, &va), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "tiny: data.val_fraction 0.2 of 10 samples leaves "
                                            "the validation split empty"));
    assert_int_equal(dt_dataset_split(&src, 0.9, 1, &tr, &va), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "leaves training empty"));
    dt_dataset_free(&src);
}

/* An image folder's samples keep their file names in both parts (eval --errors names them). */
static void test_file_names_follow(void **state)
{
    (void)state;
    struct dt_dataset src, tr, va;
    make(&src, 40, 4);
    src.files = calloc(src.n, sizeof *src.files);
    for (size_t i = 0; i < src.n; i++) {
        char name[32];
        snprintf(name, sizeof name, "train/%zu.png", i);
        src.files[i] = strdup(name);
    }
    assert_int_equal(dt_dataset_split(&src, 0.25, 3, &tr, &va), 0);
    const struct dt_dataset *parts[2] = {&tr, &va};
    for (int p = 0; p < 2; p++) {
        assert_non_null(parts[p]->files);
        for (size_t i = 0; i < parts[p]->n; i++) {
            char want[32], buf[32];
            snprintf(want, sizeof want, "train/%zu.png", index_of(parts[p], i));
            assert_string_equal(parts[p]->files[i], want);
            assert_string_equal(dt_dataset_sample_name(parts[p], DT_SPLIT_VAL, i, buf, sizeof buf),
                                want);
        }
    }
    dt_dataset_free(&src);
    dt_dataset_free(&va);
    /* Without file names (an archive) a sample is named by its split and index. */
    for (size_t i = 0; i < tr.n; i++)
        free(tr.files[i]);
    free(tr.files);
    tr.files = NULL;
    char buf[32];
    assert_string_equal(dt_dataset_sample_name(&tr, DT_SPLIT_TRAIN, 5, buf, sizeof buf), "train#5");
    dt_dataset_free(&tr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stratified_disjoint_ordered),
        cmocka_unit_test(test_file_names_follow),
        cmocka_unit_test(test_deterministic_per_seed),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The real Fashion-MNIST as Debian ships it (package dataset-fashion-mnist, a required test
 * dependency installed by tests/check-deps.sh): the IDX reader must load it with the published
 * shape and class balance. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <sys/stat.h>

#include "data/dataset.h"
#include "data/load.h"
#include "util/clock.h"
#include "util/err.h"

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"

static void check_split(const struct dt_dataset *s, size_t n, size_t per_class)
{
    assert_int_equal(s->n, n);
    assert_int_equal(s->c, 1);
    assert_int_equal(s->h, 28);
    assert_int_equal(s->w, 28);
    assert_int_equal(s->classes, 10);
    size_t hist[10];
    dt_dataset_histogram(s, hist);
    for (int c = 0; c < 10; c++)
        assert_int_equal(hist[c], per_class);
    /* not all zero, and bytes use the whole range */
    int max = 0;
    for (size_t i = 0; i < 784 * 100; i++)
        max = s->x[i] > max ? s->x[i] : max;
    assert_int_equal(max, 255);
}

static void test_fashion_mnist_loads(void **state)
{
    (void)state;
    struct stat st;
    if (stat(FASHION_DIR, &st) != 0)
        fail_msg(FASHION_DIR
                 " is missing: install the Debian package dataset-fashion-mnist "
                 "(sh tests/check-deps.sh --install); it is a required test dependency");
    struct dt_data d;
    double t0 = dt_now();
    int rc = dt_data_load(&d, DT_DATA_IDX, FASHION_DIR, 10, 0);
    double t1 = dt_now();
    if (rc != 0)
        fail_msg("%s", dt_last_error());
    fprintf(stderr, "loaded Fashion-MNIST (70,000 images) in %.3f s\n", t1 - t0);
    check_split(&d.train, 60000, 6000);
    check_split(&d.test, 10000, 1000);
    /* first training label of Fashion-MNIST is 9 (ankle boot), first test label too */
    assert_int_equal(d.train.y[0], 9);
    assert_int_equal(d.test.y[0], 9);
    dt_data_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fashion_mnist_loads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

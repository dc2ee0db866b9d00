/* data/idx and dt_data_load(DT_DATA_IDX): a good directory loads with the right shapes, labels and
 * pixels; every kind of bad IDX data fails with DT_EDATA and a message naming the file and
 * the problem. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "data/dataset.h"
#include "data/idx.h"
#include "data/load.h"
#include "tests/unit/fixtures.h"
#include "util/err.h"

static char dir[256];

static int setup_dir(void **state)
{
    (void)state;
    fx_mkdtemp(dir, sizeof(dir));
    fx_idx_dir(dir, 50, 20, 10);
    return 0;
}

static int teardown_dir(void **state)
{
    (void)state;
    fx_rmtree(dir);
    return 0;
}

/* Replaces dir/name with the given (uncompressed) bytes, gzip'd. */
static void replace(const char *name, const struct fx_buf *b)
{
    char path[600];
    fx_path(path, sizeof(path), dir, name);
    fx_write_gz(path, b->p, b->n);
}

static void expect_load_error(int classes, const char *file, const char *substring)
{
    struct dt_data d;
    int rc = dt_data_load(&d, DT_DATA_IDX, dir, classes, 0);
    assert_int_equal(rc, -DT_EDATA);
    assert_null(d.train.x);
    assert_null(d.test.x);
    const char *msg = dt_last_error();
    if (!strstr(msg, file) || !strstr(msg, substring))
        fail_msg("message '%s' lacks '%s' or '%s'", msg, file, substring);
}

static void check_split(const struct dt_dataset *s, size_t n, uint64_t first)
{
    assert_int_equal(s->n, n);
    assert_int_equal(s->c, 1);
    assert_int_equal(s->h, 28);
    assert_int_equal(s->w, 28);
    assert_int_equal(s->classes, 10);
    assert_null(s->names);
    assert_int_equal(dt_dataset_sample_bytes(s), 784);
    size_t probes[] = {0, 1, n / 2, n - 1};
    for (int p = 0; p < 4; p++) {
        size_t i = probes[p];
        assert_int_equal(s->y[i], i % 10);
        for (size_t k = 0; k < 784; k += 97)
            assert_int_equal(s->x[i * 784 + k], fx_pixel(first + i, k));
    }
}

static void test_good_directory_loads(void **state)
{
    (void)state;
    struct dt_data d;
    assert_int_equal(dt_data_load(&d, DT_DATA_IDX, dir, 0, 0), 0);
    check_split(&d.train, 50, 0);
    check_split(&d.test, 20, FX_TEST_BASE);
    assert_non_null(strstr(d.train.source, "train-images-idx3-ubyte.gz"));
    assert_non_null(strstr(d.train.source, "train-labels-idx1-ubyte.gz"));
    assert_non_null(strstr(d.test.source, "t10k-images-idx3-ubyte.gz"));
    size_t hist[10];
    dt_dataset_histogram(&d.train, hist);
    for (int c = 0; c < 10; c++)
        assert_int_equal(hist[c], 5);
    dt_data_free(&d);
    assert_null(d.train.x);
}

static void test_uncompressed_files_are_accepted(void **state)
{
    (void)state;
    char sub[600], gz[700], plain[700];
    snprintf(sub, sizeof(sub), "%s/plain", dir);
    mkdir(sub, 0700);
    fx_idx_dir(sub, 30, 10, 10);
    /* the test images without .gz, uncompressed */
    struct fx_buf b = {0};
    fx_idx_images(&b, 10, 28, 28, FX_TEST_BASE);
    snprintf(gz, sizeof(gz), "%s/t10k-images-idx3-ubyte.gz", sub);
    snprintf(plain, sizeof(plain), "%s/t10k-images-idx3-ubyte", sub);
    unlink(gz);
    fx_write(plain, b.p, b.n);
    fx_free(&b);
    struct dt_data d;
    assert_int_equal(dt_data_load(&d, DT_DATA_IDX, sub, 10, 0), 0);
    check_split(&d.test, 10, FX_TEST_BASE);
    assert_non_null(strstr(d.test.source, "t10k-images-idx3-ubyte, "));
    dt_data_free(&d);
    fx_rmtree(sub);
}

static void test_missing_file(void **state)
{
    (void)state;
    char gz[600], keep[600];
    fx_path(gz, sizeof(gz), dir, "t10k-labels-idx1-ubyte.gz");
    fx_path(keep, sizeof(keep), dir, "keep");
    rename(gz, keep);
    expect_load_error(0, "t10k-labels-idx1-ubyte.gz", "file not found");
    rename(keep, gz);
}

static void test_file_not_gzip(void **state)
{
    (void)state;
    struct fx_buf b = {0};
    fx_idx_labels(&b, 50, 10);
    char path[600];
    fx_path(path, sizeof(path), dir, "train-labels-idx1-ubyte.gz");
    fx_write(path, b.p, b.n);
    expect_load_error(0, "train-labels-idx1-ubyte.gz", "not a gzip file");
    replace("train-labels-idx1-ubyte.gz", &b);
    fx_free(&b);
}

static void test_truncated_gzip(void **state)
{
    (void)state;
    struct fx_buf b = {0}, gz = {0};
    fx_idx_images(&b, 50, 28, 28, 0);
    fx_gzip_append(&gz, b.p, b.n);
    char path[600];
    fx_path(path, sizeof(path), dir, "train-images-idx3-ubyte.gz");
    fx_write(path, gz.p, gz.n - 20);
    expect_load_error(0, "train-images-idx3-ubyte.gz", "truncated gzip data");
    gz.p[gz.n - 6] ^= 1; /* CRC */
    fx_write(path, gz.p, gz.n);
    expect_load_error(0, "train-images-idx3-ubyte.gz", "CRC mismatch");
    replace("train-images-idx3-ubyte.gz", &b);
    fx_free(&b);
    fx_free(&gz);
}

static void test_wrong_magic(void **state)
{
    (void)state;
    struct fx_buf b = {0}, good = {0};
    fx_idx_labels(&b, 50, 10); /* a labels file where the images belong */
    replace("train-images-idx3-ubyte.gz", &b);
    expect_load_error(0, "train-images-idx3-ubyte.gz",
                      "bad IDX magic 0x00000801, expected 0x00000803");
    fx_idx_images(&good, 50, 28, 28, 0);
    replace("train-images-idx3-ubyte.gz", &good);
    replace("train-labels-idx1-ubyte.gz", &good);
    expect_load_error(0, "train-labels-idx1-ubyte.gz",
                      "bad IDX magic 0x00000803, expected 0x00000801");
    replace("train-labels-idx1-ubyte.gz", &b);
    fx_free(&b);
    fx_free(&good);
}

static void test_short_header(void **state)
{
    (void)state;
    struct fx_buf b = {0};
    fx_put(&b, "\0\0\x08", 3);
    replace("t10k-images-idx3-ubyte.gz", &b);
    expect_load_error(0, "t10k-images-idx3-ubyte.gz", "too short for an IDX header");
    fx_put(&b, "\x03\0\0\0\x05", 5);
    replace("t10k-images-idx3-ubyte.gz", &b);
    expect_load_error(0, "t10k-images-idx3-ubyte.gz", "truncated IDX header");
    fx_free(&b);
    fx_idx_images(&b, 20, 28, 28, FX_TEST_BASE);
    replace("t10k-images-idx3-ubyte.gz", &b);
    fx_free(&b);
}

static void test_dims_disagree_with_data(void **state)
{
    (void)state;
    struct fx_buf b = {0};
    fx_idx_images(&b, 50, 28, 28, 0);
    b.n -= 1; /* short data */
    replace("train-images-idx3-ubyte.gz", &b);
    expect_load_error(0, "train-images-idx3-ubyte.gz",
                      "dims 50x28x28 need 39200 bytes of data, found 39199");
    b.n += 2; /* trailing garbage: refused at the first byte past the data, unread beyond */
    replace("train-images-idx3-ubyte.gz", &b);
    expect_load_error(0, "train-images-idx3-ubyte.gz",
                      "dims 50x28x28 need 39200 bytes of data, found more");
    /* a header claiming 4 billion images must not be believed, nor allocated for */
    b.n -= 1;
    b.p[4] = 0xff;
    replace("train-images-idx3-ubyte.gz", &b);
    expect_load_error(0, "train-images-idx3-ubyte.gz",
                      "dims 4278190130x28x28 need 3354101061920 bytes of data, more than the "
                      "file can hold");
    fx_free(&b);
    fx_idx_images(&b, 50, 28, 28, 0);
    replace("train-images-idx3-ubyte.gz", &b);
    fx_free(&b);
    fx_idx_labels(&b, 50, 10);
    b.n -= 1;
    replace("train-labels-idx1-ubyte.gz", &b);
    expect_load_error(0, "train-labels-idx1-ubyte.gz", "dims 50 need 50 bytes of data, found 49");
    fx_free(&b);
    fx_idx_labels(&b, 50, 10);
    replace("train-labels-idx1-ubyte.gz", &b);
    fx_free(&b);
}

static void test_bad_image_size(void **state)
{
    (void)state;
    struct fx_buf b = {0};
    fx_idx_images(&b, 50, 28, 0, 0);
    replace("train-images-idx3-ubyte.gz", &b);
    expect_load_error(0, "train-images-idx3-ubyte.gz", "bad image size 28x0");
    fx_free(&b);
    fx_idx_images(&b, 50, 28, 28, 0);
    replace("train-images-idx3-ubyte.gz", &b);
    fx_free(&b);
}

static void test_count_mismatch(void **state)
{
    (void)state;
    struct fx_buf b = {0};
    fx_idx_labels(&b, 19, 10);
    replace("t10k-labels-idx1-ubyte.gz", &b);
    expect_load_error(0, "t10k-labels-idx1-ubyte.gz", "19 labels, but");
    assert_non_null(strstr(dt_last_error(), "t10k-images-idx3-ubyte.gz has 20 images"));
    fx_free(&b);
    fx_idx_labels(&b, 20, 10);
    replace("t10k-labels-idx1-ubyte.gz", &b);
    fx_free(&b);
}

static void test_label_out_of_range(void **state)
{
    (void)state;
    struct fx_buf b = {0};
    fx_idx_labels(&b, 50, 10);
    b.p[8 + 7] = 10;
    replace("train-labels-idx1-ubyte.gz", &b);
    expect_load_error(0, "train-labels-idx1-ubyte.gz",
                      "label 10 of sample 7 is out of range (classes 10)");
    fx_free(&b);
    fx_idx_labels(&b, 50, 10);
    replace("train-labels-idx1-ubyte.gz", &b);
    fx_free(&b);
    /* good data, but the caller expects fewer classes */
    expect_load_error(5, "train-labels-idx1-ubyte.gz", "label 5 of sample 5 is out of range");
}

static void test_empty_dataset(void **state)
{
    (void)state;
    struct fx_buf b = {0};
    fx_idx_images(&b, 0, 28, 28, 0);
    replace("train-images-idx3-ubyte.gz", &b);
    expect_load_error(0, "train-images-idx3-ubyte.gz", "empty dataset (0 images)");
    fx_free(&b);
    fx_idx_images(&b, 50, 28, 28, 0);
    replace("train-images-idx3-ubyte.gz", &b);
    fx_free(&b);
}

static void test_test_shape_differs(void **state)
{
    (void)state;
    struct fx_buf b = {0};
    fx_idx_images(&b, 20, 14, 28, FX_TEST_BASE);
    replace("t10k-images-idx3-ubyte.gz", &b);
    expect_load_error(0, "t10k-images-idx3-ubyte.gz",
                      "images are 14x28, but the training images are 28x28");
    fx_free(&b);
    fx_idx_images(&b, 20, 28, 28, FX_TEST_BASE);
    replace("t10k-images-idx3-ubyte.gz", &b);
    fx_free(&b);
}

static void test_bad_arguments_are_usage_errors(void **state)
{
    (void)state;
    struct dt_data d;
    assert_int_equal(dt_data_load(&d, DT_DATA_FOLDER, dir, 0, 0), -DT_EUSAGE);
    assert_non_null(strstr(dt_last_error(), "\"folder\" is not an archive format"));
    assert_int_equal(dt_data_load(&d, DT_DATA_IDX, dir, 300, 0), -DT_EUSAGE);
    assert_non_null(strstr(dt_last_error(), "data.classes: 300 is out of range"));
    /* and the directory still loads after all the damage was repaired */
    assert_int_equal(dt_data_load(&d, DT_DATA_IDX, dir, 10, 0), 0);
    dt_data_free(&d);
}

/* tests/fixtures/mkdata.py (used by CLI tests) writes what the reader expects, and each of
 * its --corrupt kinds produces the documented error. */
static void mkdata(const char *sub, const char *extra)
{
    char cmd[1200];
    snprintf(cmd, sizeof(cmd),
             "rm -rf %s/%s && /usr/bin/python3 tests/fixtures/mkdata.py idx %s/%s --train 30 "
             "--test 20 %s",
             dir, sub, dir, sub, extra);
    if (system(cmd) != 0)
        fail_msg("failed: %s (run the tests from the repository root)", cmd);
}

static void test_mkdata_script(void **state)
{
    (void)state;
    static const char *cases[][2] = {
        {"truncate", "truncated gzip data"},
        {"crc", "CRC mismatch"},
        {"not-gzip", "not a gzip file"},
        {"bad-magic", "bad IDX magic"},
        {"dims", "bytes of data, found"},
        {"count", "labels, but"},
        {"label-range", "out of range"},
        {"missing", "file not found"},
        {"empty", "empty dataset"},
        {"fifo", "is a FIFO"},
        {"fifo --plain", "t10k-labels-idx1-ubyte: is a FIFO (named pipe), not a regular file"},
    };
    char sub[600];
    struct dt_data d;
    mkdata("py", "");
    snprintf(sub, sizeof(sub), "%s/py", dir);
    assert_int_equal(dt_data_load(&d, DT_DATA_IDX, sub, 10, 0), 0);
    check_split(&d.train, 30, 0);
    check_split(&d.test, 20, FX_TEST_BASE);
    dt_data_free(&d);
    mkdata("py", "--plain");
    assert_int_equal(dt_data_load(&d, DT_DATA_IDX, sub, 10, 0), 0);
    check_split(&d.test, 20, FX_TEST_BASE);
    dt_data_free(&d);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char extra[64];
        snprintf(extra, sizeof(extra), "--corrupt %s", cases[i][0]);
        mkdata("py", extra);
        alarm(30); /* a FIFO that blocks the open: fail, do not hang */
        assert_int_equal(dt_data_load(&d, DT_DATA_IDX, sub, 10, 0), -DT_EDATA);
        alarm(0);
        if (!strstr(dt_last_error(), cases[i][1]))
            fail_msg("--corrupt %s: '%s' lacks '%s'", cases[i][0], dt_last_error(), cases[i][1]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_directory_loads),
        cmocka_unit_test(test_uncompressed_files_are_accepted),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_file_not_gzip),
        cmocka_unit_test(test_truncated_gzip),
        cmocka_unit_test(test_wrong_magic),
        cmocka_unit_test(test_short_header),
        cmocka_unit_test(test_dims_disagree_with_data),
        cmocka_unit_test(test_bad_image_size),
        cmocka_unit_test(test_count_mismatch),
        cmocka_unit_test(test_label_out_of_range),
        cmocka_unit_test(test_empty_dataset),
        cmocka_unit_test(test_test_shape_differs),
        cmocka_unit_test(test_bad_arguments_are_usage_errors),
        cmocka_unit_test(test_mkdata_script),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}

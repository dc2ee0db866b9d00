/* data/gzip: whole-file and streaming reads, multi-member files, and one test per way a gzip
 * file can be bad (missing, not gzip, empty, truncated, CRC, length, corrupt deflate data,
 * trailing garbage), each checking the status and the message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "data/gzip.h"
#include "tests/unit/fixtures.h"
#include "util/err.h"

static char dir[256];
static char path[512];

static int setup(void **state)
{
    (void)state;
    fx_mkdtemp(dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/f.gz", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    fx_rmtree(dir);
    return 0;
}

static void fill(struct fx_buf *b, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t v = fx_pixel(seed + i / 512, i % 512);
        fx_put(b, &v, 1);
    }
}

/* Writes a gzip of n bytes; returns the plain data in *plain and the gzip bytes in *gz. */
static void make(struct fx_buf *plain, struct fx_buf *gz, size_t n)
{
    memset(plain, 0, sizeof(*plain));
    memset(gz, 0, sizeof(*gz));
    fill(plain, n, 1);
    fx_gzip_append(gz, plain->p, plain->n);
}

static void expect_error(const char *substring)
{
    uint8_t *data = (uint8_t *)"x";
    size_t len = 7;
    int rc = dt_gz_read_all(path, &data, &len);
    assert_int_equal(rc, -DT_EDATA);
    assert_null(data);
    const char *msg = dt_last_error();
    assert_non_null(strstr(msg, path));
    if (!strstr(msg, substring))
        fail_msg("message '%s' lacks '%s'", msg, substring);
}

static void test_reads_whole_file(void **state)
{
    (void)state;
    struct fx_buf plain, gz;
    make(&plain, &gz, 100000);
    fx_write(path, gz.p, gz.n);
    uint8_t *data;
    size_t len;
    assert_int_equal(dt_gz_read_all(path, &data, &len), 0);
    assert_int_equal(len, plain.n);
    assert_memory_equal(data, plain.p, len);
    free(data);
    fx_free(&plain);
    fx_free(&gz);
}

static void test_reads_empty_member(void **state)
{
    (void)state;
    struct fx_buf gz = {0};
    fx_gzip_append(&gz, "", 0);
    fx_write(path, gz.p, gz.n);
    uint8_t *data;
    size_t len = 1;
    assert_int_equal(dt_gz_read_all(path, &data, &len), 0);
    assert_int_equal(len, 0);
    free(data);
    fx_free(&gz);
}

/* A big first member and a tiny last one: the ISIZE hint (last member only) is too small,
 * so the buffer must grow. Trailing zero padding is accepted. */
static void test_reads_multi_member_and_grows(void **state)
{
    (void)state;
    struct fx_buf a = {0}, gz = {0};
    fill(&a, 3 << 20, 5);
    fx_gzip_append(&gz, a.p, a.n);
    fx_gzip_append(&gz, "tail", 4);
    fx_put_zeros(&gz, 100);
    fx_write(path, gz.p, gz.n);
    uint8_t *data;
    size_t len;
    assert_int_equal(dt_gz_read_all(path, &data, &len), 0);
    assert_int_equal(len, a.n + 4);
    assert_memory_equal(data, a.p, a.n);
    assert_memory_equal(data + a.n, "tail", 4);
    free(data);
    fx_free(&a);
    fx_free(&gz);
}

static void test_streams_in_small_chunks(void **state)
{
    (void)state;
    struct fx_buf plain, gz;
    make(&plain, &gz, 70000);
    fx_gzip_append(&gz, plain.p, 1000); /* second member: the first 1000 bytes again */
    fx_write(path, gz.p, gz.n);
    struct dt_gz_reader *r;
    assert_int_equal(dt_gz_open(&r, path), 0);
    assert_string_equal(dt_gz_path(r), path);
    assert_true(dt_gz_plausible_size(r) >= 71000);
    uint8_t buf[333];
    size_t got, total = 0;
    assert_int_equal(dt_gz_skip(r, 5000, &got), 0);
    assert_int_equal(got, 5000);
    total = 5000;
    for (;;) {
        assert_int_equal(dt_gz_read(r, buf, sizeof(buf), &got), 0);
        for (size_t i = 0; i < got; i++) {
            size_t at = total + i;
            assert_int_equal(buf[i], at < plain.n ? plain.p[at] : plain.p[at - plain.n]);
        }
        total += got;
        if (got < sizeof(buf))
            break;
    }
    assert_int_equal(total, plain.n + 1000);
    assert_int_equal(dt_gz_offset(r), total);
    assert_int_equal(dt_gz_read(r, buf, sizeof(buf), &got), 0);
    assert_int_equal(got, 0);
    dt_gz_close(r);
    fx_free(&plain);
    fx_free(&gz);
}

static void test_read_any_accepts_plain_and_gzip(void **state)
{
    (void)state;
    char plain_path[600];
    snprintf(plain_path, sizeof(plain_path), "%s/plain", dir);
    fx_write(plain_path, "hello world", 11);
    uint8_t *data;
    size_t len;
    assert_int_equal(dt_gz_read_any(plain_path, &data, &len), 0);
    assert_int_equal(len, 11);
    assert_memory_equal(data, "hello world", 11);
    free(data);
    fx_write_gz(plain_path, "zipped", 6);
    assert_int_equal(dt_gz_read_any(plain_path, &data, &len), 0);
    assert_int_equal(len, 6);
    assert_memory_equal(data, "zipped", 6);
    free(data);
}

static void test_missing_file(void **state)
{
    (void)state;
    unlink(path);
    expect_error("file not found");
    uint8_t *data;
    size_t len;
    assert_int_equal(dt_gz_read_any(path, &data, &len), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "file not found"));
}

static void test_directory_is_not_a_file(void **state)
{
    (void)state;
    char sub[600];
    snprintf(sub, sizeof(sub), "%s/f.gz", dir);
    unlink(sub);
    mkdir(sub, 0700);
    expect_error("is a directory");
    rmdir(sub);
}

/* Members that each inflate to well under the limit must still be stopped once their sum
 * passes it: the limit is a running total over the file, not per member. */
static void test_limit_counts_all_members(void **state)
{
    (void)state;
    uint8_t zeros[1000] = {0};
    struct fx_buf gz = {0};
    for (int i = 0; i < 64; i++)
        fx_gzip_append(&gz, zeros, sizeof(zeros));
    fx_write(path, gz.p, gz.n);
    fx_free(&gz);
    struct dt_gz_reader *r;
    size_t got;
    assert_int_equal(dt_gz_open(&r, path), 0);
    dt_gz_set_limit(r, 10000);
    assert_int_equal(dt_gz_limit(r), 10000);
    assert_int_equal(dt_gz_plausible_size(r), 10000);
    assert_int_equal(dt_gz_skip(r, 1 << 20, &got), -DT_EDATA);
    assert_true(dt_gz_offset(r) <= 10001);
    const char *msg = dt_last_error();
    if (!strstr(msg, path) || !strstr(msg, "decompressed data exceeds the 10000-byte limit"))
        fail_msg("message '%s'", msg);
    /* a read after the failure fails again rather than reading on */
    assert_int_equal(dt_gz_read(r, zeros, 10, &got), -DT_EDATA);
    dt_gz_close(r);

    /* exactly at the limit is fine: 10 members of 1000 bytes */
    gz = (struct fx_buf){0};
    for (int i = 0; i < 10; i++)
        fx_gzip_append(&gz, zeros, sizeof(zeros));
    fx_write(path, gz.p, gz.n);
    fx_free(&gz);
    assert_int_equal(dt_gz_open(&r, path), 0);
    dt_gz_set_limit(r, 10000);
    assert_int_equal(dt_gz_skip(r, 1 << 20, &got), 0);
    assert_int_equal(got, 10000);
    dt_gz_close(r);

    /* the same limit applies to an uncompressed file read through the reader */
    struct fx_buf plain = {0};
    fx_put_zeros(&plain, 10001);
    fx_write(path, plain.p, plain.n);
    fx_free(&plain);
    assert_int_equal(dt_gz_open_plain(&r, path), 0);
    dt_gz_set_limit(r, 10000);
    assert_int_equal(dt_gz_skip(r, 1 << 20, &got), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "exceeds the 10000-byte limit"));
    dt_gz_close(r);
}

/* A FIFO with no writer would block a plain open(2) forever; alarm() turns a hang into a
 * failure instead of a stuck test run. */
static void test_fifo_is_refused(void **state)
{
    (void)state;
    unlink(path);
    assert_int_equal(mkfifo(path, 0600), 0);
    alarm(10);
    expect_error("is a FIFO (named pipe), not a regular file");
    uint8_t *data;
    size_t len;
    assert_int_equal(dt_gz_read_any(path, &data, &len), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "is a FIFO"));
    struct dt_gz_reader *r;
    assert_int_equal(dt_gz_open_plain(&r, path), -DT_EDATA);
    alarm(0);
    unlink(path);
}

static void test_not_gzip(void **state)
{
    (void)state;
    fx_write(path, "\x00\x00\x08\x03 not gzip", 13);
    expect_error("not a gzip file (bad magic 0x0000, expected 0x1f8b)");
}

static void test_empty_file(void **state)
{
    (void)state;
    fx_write(path, "", 0);
    expect_error("not a gzip file (empty)");
}

static void test_truncated(void **state)
{
    (void)state;
    struct fx_buf plain, gz;
    make(&plain, &gz, 50000);
    fx_write(path, gz.p, gz.n / 2);
    expect_error("truncated gzip data");
    fx_write(path, gz.p, gz.n - 3); /* inside the trailer */
    expect_error("truncated gzip data");
    fx_write(path, gz.p, 5); /* inside the header */
    expect_error("truncated gzip data");
    fx_free(&plain);
    fx_free(&gz);
}

static void test_crc_mismatch(void **state)
{
    (void)state;
    struct fx_buf plain, gz;
    make(&plain, &gz, 10000);
    gz.p[gz.n - 8] ^= 0x55; /* CRC-32 field of the trailer */
    fx_write(path, gz.p, gz.n);
    expect_error("CRC mismatch");
    fx_free(&plain);
    fx_free(&gz);
}

static void test_length_mismatch(void **state)
{
    (void)state;
    struct fx_buf plain, gz;
    make(&plain, &gz, 10000);
    gz.p[gz.n - 1] ^= 0x40; /* ISIZE: a 1 GiB lie must not become a 1 GiB allocation */
    fx_write(path, gz.p, gz.n);
    expect_error("length mismatch");
    fx_free(&plain);
    fx_free(&gz);
}

static void test_corrupt_deflate_data(void **state)
{
    (void)state;
    struct fx_buf plain, gz;
    make(&plain, &gz, 10000);
    gz.p[10] = 0x07; /* first deflate block: final, reserved block type 3 */
    fx_write(path, gz.p, gz.n);
    expect_error("corrupt deflate data (invalid block type)");
    fx_free(&plain);
    fx_free(&gz);
}

static void test_bad_header_flags(void **state)
{
    (void)state;
    struct fx_buf plain, gz;
    make(&plain, &gz, 100);
    gz.p[2] = 9; /* compression method other than deflate */
    fx_write(path, gz.p, gz.n);
    expect_error("bad gzip header");
    fx_free(&plain);
    fx_free(&gz);
}

static void test_trailing_garbage(void **state)
{
    (void)state;
    struct fx_buf plain, gz;
    make(&plain, &gz, 1000);
    fx_put(&gz, "\0\0garbage", 9);
    fx_write(path, gz.p, gz.n);
    expect_error("trailing garbage after gzip data");
    fx_free(&plain);
    fx_free(&gz);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_whole_file),
        cmocka_unit_test(test_reads_empty_member),
        cmocka_unit_test(test_reads_multi_member_and_grows),
        cmocka_unit_test(test_streams_in_small_chunks),
        cmocka_unit_test(test_read_any_accepts_plain_and_gzip),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_directory_is_not_a_file),
        cmocka_unit_test(test_not_gzip),
        cmocka_unit_test(test_empty_file),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_crc_mismatch),
        cmocka_unit_test(test_length_mismatch),
        cmocka_unit_test(test_corrupt_deflate_data),
        cmocka_unit_test(test_bad_header_flags),
        cmocka_unit_test(test_trailing_garbage),
        cmocka_unit_test(test_limit_counts_all_members),
        cmocka_unit_test(test_fifo_is_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

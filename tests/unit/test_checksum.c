/* data/checksum: digests against known vectors, gzip content digests across members and read
 * chunks, and the verification rule (which checksum matched, what a mismatch says). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "data/checksum.h"
#include "util/err.h"

#define MD5_ABC     "900150983cd24fb0d6963f7d28e17f72"
#define SHA_ABC     "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
#define MD5_EMPTY   "d41d8cd98f00b204e9800998ecf8427e"
#define SHA_EMPTY   "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define ZERO_SHA256 "0000000000000000000000000000000000000000000000000000000000000000"

/* One gzip member of `len` bytes of `data`, appended to buf at *used. */
static void gzip_member(const void *data, size_t len, unsigned char *buf, size_t cap, size_t *used)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    z.next_in = (unsigned char *)data;
    z.avail_in = (uInt)len;
    z.next_out = buf + *used;
    z.avail_out = (uInt)(cap - *used);
    assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
    *used = cap - z.avail_out;
    deflateEnd(&z);
}

static char *temp_file(const void *data, size_t len)
{
    char *path = strdup("/tmp/dtrain-checksum-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
    return path;
}

static void test_known_vectors(void **state)
{
    (void)state;
    struct dt_digests d;
    assert_int_equal(dt_checksum_buffer("abc", 3, 1, &d), 0);
    assert_string_equal(d.md5, MD5_ABC);
    assert_string_equal(d.sha256, SHA_ABC);
    assert_int_equal(d.size, 3);
    assert_false(d.is_gzip);
    assert_string_equal(d.content_sha256, "");
    assert_int_equal(dt_checksum_buffer("", 0, 1, &d), 0);
    assert_string_equal(d.md5, MD5_EMPTY);
    assert_string_equal(d.sha256, SHA_EMPTY);
}

static void test_gzip_content_digest(void **state)
{
    (void)state;
    unsigned char gz[256];
    size_t used = 0;
    gzip_member("abc", 3, gz, sizeof gz, &used);
    struct dt_digests d;
    assert_int_equal(dt_checksum_buffer(gz, used, 1, &d), 0);
    assert_true(d.is_gzip && d.gzip_ok);
    assert_string_equal(d.content_sha256, SHA_ABC);
    assert_int_equal(d.content_size, 3);
    /* without want_content, no inflating */
    assert_int_equal(dt_checksum_buffer(gz, used, 0, &d), 0);
    assert_string_equal(d.content_sha256, "");
}

static void test_gzip_members_concatenate(void **state)
{
    (void)state;
    unsigned char gz[512];
    size_t used = 0;
    gzip_member("ab", 2, gz, sizeof gz, &used);
    gzip_member("c", 1, gz, sizeof gz, &used);
    struct dt_digests d;
    assert_int_equal(dt_checksum_buffer(gz, used, 1, &d), 0);
    assert_true(d.gzip_ok);
    assert_string_equal(d.content_sha256, SHA_ABC);
}

static void test_gzip_padding_and_trailing_garbage(void **state)
{
    (void)state;
    unsigned char gz[512] = {0};
    size_t used = 0;
    gzip_member("abc", 3, gz, sizeof gz, &used);
    struct dt_digests d;
    assert_int_equal(dt_checksum_buffer(gz, used + 100, 1, &d), 0); /* zero padding */
    assert_true(d.gzip_ok);
    assert_string_equal(d.content_sha256, SHA_ABC);
    gz[used + 50] = 'x';
    assert_int_equal(dt_checksum_buffer(gz, used + 100, 1, &d), 0);
    assert_false(d.gzip_ok);
    assert_string_equal(d.content_sha256, "");
}

static void test_truncated_gzip_has_no_content_digest(void **state)
{
    (void)state;
    unsigned char gz[256];
    size_t used = 0;
    gzip_member("abcabcabcabc", 12, gz, sizeof gz, &used);
    struct dt_digests d;
    assert_int_equal(dt_checksum_buffer(gz, used - 4, 1, &d), 0);
    assert_true(d.is_gzip);
    assert_false(d.gzip_ok);
    assert_string_equal(d.content_sha256, "");
    gz[used / 2] ^= 0xff; /* corrupt deflate data or CRC */
    assert_int_equal(dt_checksum_buffer(gz, used, 1, &d), 0);
    assert_false(d.gzip_ok);
}

/* Larger than the read chunk, so member and chunk boundaries fall anywhere. */
static void test_file_matches_buffer_across_chunks(void **state)
{
    (void)state;
    size_t n = 300000;
    unsigned char *raw = malloc(n), *gz = malloc(2 * n);
    for (size_t i = 0; i < n; i++)
        raw[i] = (unsigned char)(i * 2654435761u >> 13);
    size_t used = 0;
    gzip_member(raw, n / 3, gz, 2 * n, &used);
    gzip_member(raw + n / 3, n - n / 3, gz, 2 * n, &used);
    struct dt_digests whole, parts, file;
    assert_int_equal(dt_checksum_buffer(raw, n, 0, &whole), 0);
    assert_int_equal(dt_checksum_buffer(gz, used, 1, &parts), 0);
    char *path = temp_file(gz, used);
    assert_int_equal(dt_checksum_file(path, 1, &file), 0);
    assert_string_equal(parts.content_sha256, whole.sha256);
    assert_string_equal(file.content_sha256, whole.sha256);
    assert_string_equal(file.sha256, parts.sha256);
    assert_string_equal(file.md5, parts.md5);
    assert_int_equal(file.size, used);
    assert_int_equal(file.content_size, n);
    unlink(path);
    free(path);
    free(raw);
    free(gz);
}

static void test_missing_file(void **state)
{
    (void)state;
    struct dt_digests d;
    assert_int_equal(dt_checksum_file("/nonexistent/x.gz", 1, &d), -DT_EDATA);
    assert_string_equal(dt_last_error(), "/nonexistent/x.gz: file not found");
}

/* The content limit is a running total over all members: 64 members of 1000 zero bytes each
 * stay under a 10000-byte limit one by one, not together. */
static void test_content_limit_counts_all_members(void **state)
{
    (void)state;
    static unsigned char zeros[1000], gz[64 * 1100];
    size_t used = 0;
    for (int i = 0; i < 64; i++)
        gzip_member(zeros, sizeof zeros, gz, sizeof gz, &used);
    char *path = temp_file(gz, used);
    struct dt_digests d;
    assert_int_equal(dt_checksum_file_limited(path, 1, 10000, &d), 0);
    assert_true(d.content_too_large);
    assert_false(d.gzip_ok);
    assert_string_equal(d.content_sha256, "");
    assert_true(d.content_size > 10000 && d.content_size < 64000);
    assert_int_equal(d.size, used); /* the archive digests still cover the whole file */
    assert_int_equal(dt_checksum_file_limited(path, 1, 64000, &d), 0);
    assert_false(d.content_too_large);
    assert_true(d.gzip_ok);
    assert_int_equal(d.content_size, 64000);
    unlink(path);
    free(path);
}

static void test_fifo_is_refused(void **state)
{
    (void)state;
    char path[] = "/tmp/dtrain-checksum-fifo-XXXXXX";
    assert_non_null(mkdtemp(path));
    char fifo[64];
    snprintf(fifo, sizeof fifo, "%s/f.gz", path);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    alarm(10); /* a blocking open would hang: fail instead */
    struct dt_digests d;
    assert_int_equal(dt_checksum_file(fifo, 1, &d), -DT_EDATA);
    alarm(0);
    assert_non_null(strstr(dt_last_error(), "is a FIFO (named pipe), not a regular file"));
    unlink(fifo);
    rmdir(path);
}

static void test_hex_equal(void **state)
{
    (void)state;
    assert_true(dt_hex_equal("ABCdef", "abcDEF"));
    assert_false(dt_hex_equal("abc", "abd"));
    assert_false(dt_hex_equal(NULL, "abc"));
    assert_false(dt_hex_equal("", ""));
}

static void test_verify_reports_what_matched(void **state)
{
    (void)state;
    unsigned char gz[256];
    size_t used = 0;
    gzip_member("abc", 3, gz, sizeof gz, &used);
    struct dt_digests d;
    dt_checksum_buffer(gz, used, 1, &d);
    char *path = temp_file(gz, used);
    enum dt_match m;
    struct dt_reg_file f = {"a.gz", 0, d.md5, d.sha256, SHA_ABC};
    assert_int_equal(dt_checksum_verify(path, &f, "a.gz", &m), 0);
    assert_int_equal(m, DT_MATCH_SHA256);
    f.sha256 = NULL;
    assert_int_equal(dt_checksum_verify(path, &f, "a.gz", &m), 0);
    assert_int_equal(m, DT_MATCH_MD5);
    f.md5 = MD5_ABC; /* a repackaged archive: only the content matches */
    assert_int_equal(dt_checksum_verify(path, &f, "a.gz", &m), 0);
    assert_int_equal(m, DT_MATCH_CONTENT_SHA256);
    assert_string_equal(dt_match_name(m), "content-sha256");
    unlink(path);
    free(path);
}

static void test_verify_mismatch_shows_both(void **state)
{
    (void)state;
    char *path = temp_file("abc", 3);
    enum dt_match m;
    struct dt_reg_file f = {"a", 0, MD5_EMPTY, NULL, NULL};
    assert_int_equal(dt_checksum_verify(path, &f, "a", &m), -DT_EDATA);
    assert_int_equal(m, DT_MATCH_NONE);
    assert_string_equal(dt_last_error(),
                        "a: checksum mismatch: expected md5 " MD5_EMPTY ", found md5 " MD5_ABC);
    struct dt_reg_file g = {"a", 0, MD5_EMPTY, SHA_EMPTY, ZERO_SHA256};
    assert_int_equal(dt_checksum_verify(path, &g, NULL, &m), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(),
                           "expected sha256 " SHA_EMPTY " or md5 " MD5_EMPTY
                           " or content-sha256 " ZERO_SHA256 ", found sha256 " SHA_ABC
                           ", md5 " MD5_ABC ", content-sha256 (not a valid gzip stream)"));
    assert_non_null(strstr(dt_last_error(), path)); /* label NULL: the path */
    unlink(path);
    free(path);
}

static void test_verify_without_checksum(void **state)
{
    (void)state;
    unsigned char gz[256];
    size_t used = 0;
    gzip_member("abc", 3, gz, sizeof gz, &used);
    char *path = temp_file(gz, used);
    enum dt_match m;
    struct dt_reg_file f = {"a.gz", used, NULL, NULL, NULL};
    assert_int_equal(dt_checksum_verify(path, &f, "a.gz", &m), 0);
    assert_int_equal(m, DT_MATCH_UNCHECKED);
    f.size = used + 1;
    assert_int_equal(dt_checksum_verify(path, &f, "a.gz", &m), -DT_EDATA);
    char want[128];
    snprintf(want, sizeof want, "a.gz: size mismatch: expected %zu bytes, found %zu", used + 1,
             used);
    assert_string_equal(dt_last_error(), want);
    unlink(path);
    free(path);
    path = temp_file(gz, used - 3);
    f.size = 0;
    assert_int_equal(dt_checksum_verify(path, &f, "a.gz", &m), -DT_EDATA);
    assert_string_equal(dt_last_error(), "a.gz: corrupt gzip stream (truncated or bad CRC)");
    unlink(path);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_vectors),
        cmocka_unit_test(test_gzip_content_digest),
        cmocka_unit_test(test_gzip_members_concatenate),
        cmocka_unit_test(test_gzip_padding_and_trailing_garbage),
        cmocka_unit_test(test_truncated_gzip_has_no_content_digest),
        cmocka_unit_test(test_file_matches_buffer_across_chunks),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_hex_equal),
        cmocka_unit_test(test_verify_reports_what_matched),
        cmocka_unit_test(test_verify_mismatch_shows_both),
        cmocka_unit_test(test_verify_without_checksum),
        cmocka_unit_test(test_content_limit_counts_all_members),
        cmocka_unit_test(test_fifo_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

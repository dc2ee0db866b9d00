/* data/cifar (and its tar reader) through dt_data_load(DT_DATA_CIFAR10 / DT_DATA_CIFAR100): good
 * archives load with the right shapes, order, labels, pixels and class names, whatever tar dialect
 * wrote them; every kind of bad archive fails with DT_EDATA and a message naming the archive,
 * the member where there is one, and the problem. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "data/cifar.h"
#include "data/dataset.h"
#include "data/load.h"
#include "tests/unit/fixtures.h"
#include "util/err.h"

#define C10 "cifar-10-binary.tar.gz"

static char dir[256];

static int setup(void **state)
{
    (void)state;
    fx_mkdtemp(dir, sizeof(dir));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    fx_rmtree(dir);
    return 0;
}

/* Writes tar (gzip'd) as the CIFAR-10 archive and frees it. */
static void write_c10(struct fx_buf *tar)
{
    fx_write_tar_gz(dir, C10, tar);
    fx_free(tar);
}

static void expect_error(enum dt_data_format format, int classes, const char *substring)
{
    struct dt_data d;
    int rc = dt_data_load(&d, format, dir, classes, 0);
    const char *msg = dt_last_error();
    if (rc != -DT_EDATA || !strstr(msg, "-binary.tar.gz: ") || !strstr(msg, substring))
        fail_msg("rc %d, message '%s' lacks the archive name or '%s'", rc, msg, substring);
    assert_null(d.train.x);
    assert_null(d.test.names);
}

/* The offset of the header of the member whose name ends in `base`. */
static size_t header_of(const struct fx_buf *tar, const char *base)
{
    for (size_t off = 0; off + 512 <= tar->n; off += 512) {
        const char *name = (const char *)tar->p + off;
        size_t len = strnlen(name, 100), blen = strlen(base);
        if (len >= blen && memcmp(name + len - blen, base, blen) == 0 &&
            memcmp(tar->p + off + 257, "ustar", 5) == 0)
            return off;
    }
    fail_msg("no member %s", base);
    return 0;
}

static void check_sample(const struct dt_dataset *s, size_t i, uint64_t id, int label)
{
    assert_int_equal(s->y[i], label);
    for (size_t k = 0; k < 3072; k += 101)
        assert_int_equal(s->x[i * 3072 + k], fx_pixel(id, k));
    assert_int_equal(s->x[i * 3072 + 3071], fx_pixel(id, 3071));
}

static void check_c10(const struct dt_data *d, size_t per_batch, size_t ntest)
{
    assert_int_equal(d->train.n, 5 * per_batch);
    assert_int_equal(d->test.n, ntest);
    assert_int_equal(d->train.c, 3);
    assert_int_equal(d->train.h, 32);
    assert_int_equal(d->train.w, 32);
    assert_int_equal(d->train.classes, 10);
    assert_int_equal(dt_dataset_sample_bytes(&d->train), 3072);
    /* batches arrive 1, 3, 4, 2, 5 and must come out in numeric order */
    for (size_t i = 0; i < d->train.n; i++)
        check_sample(&d->train, i, i, (int)(i % 10));
    for (size_t j = 0; j < ntest; j++)
        check_sample(&d->test, j, FX_TEST_BASE + j, (int)(j % 10));
    for (int c = 0; c < 10; c++) {
        assert_string_equal(d->train.names[c], fx_cifar10_names[c]);
        assert_string_equal(d->test.names[c], fx_cifar10_names[c]);
    }
}

static void test_cifar10_loads_in_batch_order(void **state)
{
    (void)state;
    struct fx_buf tar = {0};
    fx_cifar10_tar(&tar, "cifar-10-batches-bin", 7, 9, NULL);
    fx_tar_end(&tar);
    write_c10(&tar);
    struct dt_data d;
    assert_int_equal(dt_data_load(&d, DT_DATA_CIFAR10, dir, 0, 0), 0);
    check_c10(&d, 7, 9);
    assert_non_null(strstr(d.train.source, C10 " (data_batch_1.bin..data_batch_5.bin)"));
    assert_non_null(strstr(d.test.source, C10 " (test_batch.bin)"));
    size_t hist[10];
    dt_dataset_histogram(&d.train, hist);
    for (int c = 0; c < 10; c++)
        assert_int_equal(hist[c], 35 / 10 + (c < 5));
    dt_data_free(&d);
}

static void test_cifar10_other_directory_name(void **state)
{
    (void)state;
    struct fx_buf tar = {0};
    fx_cifar10_tar(&tar, "somewhere/else", 3, 4, NULL);
    fx_tar_end(&tar);
    write_c10(&tar);
    struct dt_data d;
    assert_int_equal(dt_data_load(&d, DT_DATA_CIFAR10, dir, 10, 0), 0);
    check_c10(&d, 3, 4);
    dt_data_free(&d);
}

static void test_cifar100_fine_and_coarse(void **state)
{
    (void)state;
    struct fx_buf tar = {0};
    fx_cifar100_tar(&tar, 130, 30, NULL);
    fx_tar_end(&tar);
    fx_write_tar_gz(dir, "cifar-100-binary.tar.gz", &tar);
    fx_free(&tar);
    struct dt_data d;
    assert_int_equal(dt_data_load(&d, DT_DATA_CIFAR100, dir, 0, 0), 0);
    assert_int_equal(d.train.n, 130);
    assert_int_equal(d.test.n, 30);
    assert_int_equal(d.train.classes, 100);
    for (size_t i = 0; i < 130; i++)
        check_sample(&d.train, i, i, (int)(i % 100));
    for (size_t j = 0; j < 30; j++)
        check_sample(&d.test, j, FX_TEST_BASE + j, (int)(j % 100));
    assert_string_equal(d.train.names[0], "fine00");
    assert_string_equal(d.test.names[99], "fine99");
    assert_non_null(strstr(d.train.source, "cifar-100-binary.tar.gz (train.bin)"));
    dt_data_free(&d);

    assert_int_equal(dt_data_load(&d, DT_DATA_CIFAR100, dir, 0, 1), 0);
    assert_int_equal(d.train.classes, 20);
    for (size_t i = 0; i < 130; i++)
        check_sample(&d.train, i, i, (int)(i % 100 / 5));
    assert_string_equal(d.train.names[19], "coarse19");
    dt_data_free(&d);
}

static void test_gnu_long_names_and_pax_headers(void **state)
{
    (void)state;
    struct fx_buf tar = {0}, recs = {0};
    char longname[300];
    /* data_batch_1.bin under a 200-character directory, by GNU 'L' header */
    memset(longname, 'd', 200);
    snprintf(longname + 200, 100, "/data_batch_1.bin");
    fx_tar_header(&tar, "././@LongLink", strlen(longname) + 1, 'L');
    fx_tar_data(&tar, longname, strlen(longname) + 1);
    fx_cifar_records(&recs, 2, 0, 1, 10);
    fx_tar_member(&tar, "truncated-name-ignored", recs.p, recs.n);
    fx_free(&recs);
    /* data_batch_2.bin by pax path (and a global header, and a pax size override) */
    const char *pax = "29 path=x/y/data_batch_2.bin\n13 size=6146\n17 comment=hello\n";
    fx_tar_header(&tar, "pax_global_header", 11, 'g');
    fx_tar_data(&tar, "11 a=bcdef\n", 11);
    fx_tar_header(&tar, "PaxHeaders/x", strlen(pax), 'x');
    fx_tar_data(&tar, pax, strlen(pax));
    fx_cifar_records(&recs, 2, 2, 1, 10);
    fx_tar_header(&tar, "wrong-name", 0, '0');
    fx_tar_data(&tar, recs.p, recs.n);
    fx_free(&recs);
    /* data_batch_3.bin by ustar prefix */
    size_t at = tar.n;
    fx_cifar_records(&recs, 2, 4, 1, 10);
    fx_tar_member(&tar, "data_batch_3.bin", recs.p, recs.n);
    fx_free(&recs);
    memcpy(tar.p + at + 345, "a/long/prefix", 13);
    fx_tar_checksum(tar.p + at);
    /* the rest as usual (a symlink and a directory to skip as well) */
    fx_tar_header(&tar, "link", 0, '2');
    const char *rest[] = {"data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};
    for (int m = 0; m < 3; m++) {
        char name[64];
        snprintf(name, sizeof(name), "c/%s", rest[m]);
        fx_cifar_member(&tar, name, 2, m < 2 ? 6 + 2 * (uint64_t)m : FX_TEST_BASE, 1, 10);
    }
    struct fx_buf all = {0};
    fx_cifar10_tar(&all, "c", 0, 0, NULL); /* only for its meta member */
    size_t meta = header_of(&all, "batches.meta.txt");
    fx_put(&tar, all.p + meta, 1024);
    fx_free(&all);
    fx_tar_end(&tar);
    write_c10(&tar);
    struct dt_data d;
    if (dt_data_load(&d, DT_DATA_CIFAR10, dir, 0, 0) != 0)
        fail_msg("%s", dt_last_error());
    check_c10(&d, 2, 2);
    dt_data_free(&d);
}

static void test_tar_basename(void **state)
{
    (void)state;
    assert_string_equal(dt_tar_basename("a/b/c.bin"), "c.bin");
    assert_string_equal(dt_tar_basename("c.bin"), "c.bin");
    assert_string_equal(dt_tar_basename("a/b/"), "");
}

static void test_missing_archive(void **state)
{
    (void)state;
    unlink(C10);
    char path[600];
    fx_path(path, sizeof(path), dir, C10);
    unlink(path);
    expect_error(DT_DATA_CIFAR10, 0, "file not found");
}

static void test_not_gzip(void **state)
{
    (void)state;
    struct fx_buf tar = {0};
    fx_cifar10_tar(&tar, "cifar-10-batches-bin", 1, 1, NULL);
    fx_tar_end(&tar);
    char path[600];
    fx_path(path, sizeof(path), dir, C10);
    fx_write(path, tar.p, tar.n);
    fx_free(&tar);
    expect_error(DT_DATA_CIFAR10, 0, "not a gzip file");
}

static void test_truncated_gzip(void **state)
{
    (void)state;
    struct fx_buf tar = {0}, gz = {0};
    fx_cifar10_tar(&tar, "cifar-10-batches-bin", 2, 2, NULL);
    fx_tar_end(&tar);
    fx_gzip_append(&gz, tar.p, tar.n);
    char path[600];
    fx_path(path, sizeof(path), dir, C10);
    fx_write(path, gz.p, gz.n - 100);
    expect_error(DT_DATA_CIFAR10, 0, "truncated gzip data");
    gz.p[gz.n - 7] ^= 0x10;
    fx_write(path, gz.p, gz.n);
    expect_error(DT_DATA_CIFAR10, 0, "CRC mismatch");
    fx_free(&tar);
    fx_free(&gz);
}

static void test_missing_member(void **state)
{
    (void)state;
    struct fx_buf tar = {0};
    fx_cifar10_tar(&tar, "cifar-10-batches-bin", 2, 2, "data_batch_3.bin");
    fx_tar_end(&tar);
    write_c10(&tar);
    expect_error(DT_DATA_CIFAR10, 0, "tar member cifar-10-batches-bin/data_batch_3.bin missing");
    fx_cifar10_tar(&tar, "cifar-10-batches-bin", 2, 2, "batches.meta.txt");
    fx_tar_end(&tar);
    write_c10(&tar);
    expect_error(DT_DATA_CIFAR10, 0, "tar member cifar-10-batches-bin/batches.meta.txt missing");
    fx_cifar100_tar(&tar, 5, 5, "test.bin");
    fx_tar_end(&tar);
    fx_write_tar_gz(dir, "cifar-100-binary.tar.gz", &tar);
    fx_free(&tar);
    expect_error(DT_DATA_CIFAR100, 0, "tar member cifar-100-binary/test.bin missing");
}

static void test_duplicate_member(void **state)
{
    (void)state;
    struct fx_buf tar = {0};
    fx_cifar10_tar(&tar, "cifar-10-batches-bin", 2, 2, NULL);
    fx_cifar_member(&tar, "other/data_batch_2.bin", 2, 0, 1, 10);
    fx_tar_end(&tar);
    write_c10(&tar);
    expect_error(DT_DATA_CIFAR10, 0,
                 "member data_batch_2.bin appears twice (cifar-10-batches-bin/data_batch_2.bin "
                 "and other/data_batch_2.bin)");
}

static void test_record_size_not_multiple(void **state)
{
    (void)state;
    struct fx_buf tar = {0}, recs = {0};
    fx_cifar10_tar(&tar, "cifar-10-batches-bin", 2, 2, "data_batch_4.bin");
    fx_cifar_records(&recs, 2, 0, 1, 10);
    fx_tar_member(&tar, "cifar-10-batches-bin/data_batch_4.bin", recs.p, recs.n - 1);
    fx_free(&recs);
    fx_tar_end(&tar);
    write_c10(&tar);
    expect_error(DT_DATA_CIFAR10, 0,
                 "member cifar-10-batches-bin/data_batch_4.bin is 6145 bytes, not a multiple of "
                 "the 3073-byte record size");
}

static void test_label_out_of_range(void **state)
{
    (void)state;
    struct fx_buf tar = {0};
    fx_cifar10_tar(&tar, "cifar-10-batches-bin", 2, 2, NULL);
    size_t h = header_of(&tar, "test_batch.bin");
    tar.p[h + 512 + 3073] = 10; /* label of test record 1 */
    fx_tar_end(&tar);
    write_c10(&tar);
    expect_error(DT_DATA_CIFAR10, 0,
                 "cifar-10-batches-bin/test_batch.bin: label 10 of record 1 is out of range "
                 "(classes 10)");
    fx_cifar10_tar(&tar, "cifar-10-batches-bin", 2, 2, NULL);
    fx_tar_end(&tar);
    write_c10(&tar);
    expect_error(DT_DATA_CIFAR10, 5, "data_batch_3.bin: label 5 of record 1 is out of range");
}

static void test_bad_header_checksum(void **state)
{
    (void)state;
    struct fx_buf tar = {0};
    fx_cifar10_tar(&tar, "cifar-10-batches-bin", 2, 2, NULL);
    size_t h = header_of(&tar, "data_batch_3.bin");
    tar.p[h + 140] ^= 1; /* mtime, not covered by a fresh checksum */
    fx_tar_end(&tar);
    char want[128];
    snprintf(want, sizeof(want), "bad tar header checksum at offset %zu", h);
    write_c10(&tar);
    expect_error(DT_DATA_CIFAR10, 0, want);
    /* a gzip'd file that is no tar at all */
    struct fx_buf junk = {0};
    fx_put_zeros(&junk, 100);
    fx_put(&junk, "not a tar archive", 17);
    fx_put_zeros(&junk, 1000);
    write_c10(&junk);
    expect_error(DT_DATA_CIFAR10, 0, "bad tar header checksum at offset 0 (not a tar archive");
}

static void test_bad_size_field(void **state)
{
    (void)state;
    struct fx_buf tar = {0};
    fx_cifar10_tar(&tar, "cifar-10-batches-bin", 2, 2, NULL);
    size_t h = header_of(&tar, "test_batch.bin");
    tar.p[h + 124 + 5] = '9';
    fx_tar_checksum(tar.p + h);
    fx_tar_end(&tar);
    char want[128];
    snprintf(want, sizeof(want), "bad size field in tar header at offset %zu", h);
    write_c10(&tar);
    expect_error(DT_DATA_CIFAR10, 0, want);
}

/* GNU base-256 sizes near 2^64: rounding the size up to whole blocks must not wrap around to a
 * small number (which would read the next member's bytes as this one's). */
static void test_size_that_would_wrap(void **state)
{
    (void)state;
    static const uint64_t sizes[] = {UINT64_MAX, UINT64_MAX - 100, (uint64_t)1 << 63};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        struct fx_buf tar = {0};
        fx_cifar10_tar(&tar, "cifar-10-batches-bin", 2, 2, NULL);
        size_t h = header_of(&tar, "test_batch.bin");
        memset(tar.p + h + 124, 0, 12);
        tar.p[h + 124] = 0x80;
        for (int i = 0; i < 8; i++)
            tar.p[h + 124 + 4 + i] = (uint8_t)(sizes[k] >> (8 * (7 - i)));
        fx_tar_checksum(tar.p + h);
        fx_tar_end(&tar);
        write_c10(&tar);
        expect_error(DT_DATA_CIFAR10, 0, "tar");
    }
}

/* The same sizes on members that are skipped, not read (the directory entry, readme.html):
 * their size plus padding must not wrap either, and the error names the member. */
static void test_skipped_member_size_that_would_wrap(void **state)
{
    (void)state;
    static const uint64_t sizes[] = {UINT64_MAX, UINT64_MAX - 100, (uint64_t)1 << 63};
    static const char *const members[] = {"cifar-10-batches-bin/", "readme.html"};
    for (size_t m = 0; m < 2; m++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            struct fx_buf tar = {0};
            fx_cifar10_tar(&tar, "cifar-10-batches-bin", 2, 2, NULL);
            size_t h = m == 0 ? 0 : header_of(&tar, members[m]);
            memset(tar.p + h + 124, 0, 12);
            tar.p[h + 124] = 0x80;
            for (int i = 0; i < 8; i++)
                tar.p[h + 124 + 4 + i] = (uint8_t)(sizes[k] >> (8 * (7 - i)));
            fx_tar_checksum(tar.p + h);
            fx_tar_end(&tar);
            write_c10(&tar);
            char want[256];
            snprintf(want, sizeof want,
                     "tar member cifar-10-batches-bin/%s (header at offset %zu) claims %llu bytes, "
                     "more than the archive can hold",
                     m == 0 ? "" : members[m], h, (unsigned long long)sizes[k]);
            expect_error(DT_DATA_CIFAR10, 0, want);
        }
}

/* A gzip bomb made of many members: 300 tar members of 1 MiB of zeros (readme.html over and
 * over: an unwanted member may repeat), each its own gzip member of about 1 KiB. Every member
 * is small and plausible for the file; their sum passes the CIFAR limit (DT_CIFAR_MAX_BYTES,
 * 256 MiB), so the archive is refused there instead of being inflated whole. The file is a
 * few hundred KiB. */
static void test_many_member_bomb(void **state)
{
    (void)state;
    const size_t mib = 1 << 20, n = 300;
    struct fx_buf zeros = {0}, member = {0}, tail = {0}, gz = {0};
    fx_tar_header(&zeros, "cifar-10-batches-bin/readme.html", mib, '0');
    fx_put_zeros(&zeros, mib);
    fx_gzip_append(&member, zeros.p, zeros.n);
    for (size_t i = 0; i < n; i++)
        fx_put(&gz, member.p, member.n);
    fx_cifar10_tar(&tail, "cifar-10-batches-bin", 2, 2, NULL);
    fx_tar_end(&tail);
    fx_gzip_append(&gz, tail.p, tail.n);
    assert_true(gz.n < mib);
    char path[600];
    fx_path(path, sizeof path, dir, C10);
    fx_write(path, gz.p, gz.n);
    expect_error(DT_DATA_CIFAR10, 0, "decompressed data exceeds the 256 MiB limit");

    /* the limit is a parameter: the same archive without the bomb, under a small one */
    struct fx_buf small = {0};
    fx_gzip_append(&small, tail.p, tail.n);
    fx_write(path, small.p, small.n);
    struct dt_data d;
    assert_int_equal(dt_cifar_load_limited(&d, path, 0, 0, 0, 20000), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "exceeds the 20000-byte limit"));
    assert_int_equal(dt_cifar_load_limited(&d, path, 0, 0, 0, tail.n), 0);
    dt_data_free(&d);
    fx_free(&zeros);
    fx_free(&member);
    fx_free(&tail);
    fx_free(&gz);
    fx_free(&small);
}

static void test_truncated_tar(void **state)
{
    (void)state;
    struct fx_buf tar = {0};
    fx_cifar10_tar(&tar, "cifar-10-batches-bin", 2, 2, NULL);
    write_c10(&tar); /* no end-of-archive blocks */
    expect_error(DT_DATA_CIFAR10, 0, "truncated tar archive (no end-of-archive marker at offset");
    fx_cifar10_tar(&tar, "cifar-10-batches-bin", 2, 2, NULL);
    size_t h = header_of(&tar, "data_batch_5.bin");
    tar.n = h + 512 + 3000;
    write_c10(&tar);
    expect_error(DT_DATA_CIFAR10, 0, "truncated tar archive (member data at offset");
    fx_cifar10_tar(&tar, "cifar-10-batches-bin", 2, 2, NULL);
    tar.n -= 100;
    fx_put_zeros(&tar, 100 + 300); /* ends in the middle of a block */
    tar.n = (tar.n / 512) * 512 + 300;
    write_c10(&tar);
    expect_error(DT_DATA_CIFAR10, 0, "truncated tar archive");
}

static void test_wrong_class_name_count(void **state)
{
    (void)state;
    struct fx_buf tar = {0};
    fx_cifar10_tar(&tar, "cifar-10-batches-bin", 2, 2, "batches.meta.txt");
    fx_tar_member(&tar, "cifar-10-batches-bin/batches.meta.txt", "a\nb\nc\nd\ne\nf\ng\nh\ni\n", 18);
    fx_tar_end(&tar);
    write_c10(&tar);
    expect_error(DT_DATA_CIFAR10, 0,
                 "cifar-10-batches-bin/batches.meta.txt lists 9 class names, expected 10");
}

static void test_empty_dataset(void **state)
{
    (void)state;
    struct fx_buf tar = {0};
    fx_cifar10_tar(&tar, "cifar-10-batches-bin", 0, 0, NULL);
    fx_tar_end(&tar);
    write_c10(&tar);
    expect_error(DT_DATA_CIFAR10, 0, "empty dataset (0 training and 0 test records)");
}

static void test_bad_extension_headers(void **state)
{
    (void)state;
    struct fx_buf tar = {0};
    fx_tar_header(&tar, "PaxHeaders/x", 11, 'x');
    fx_tar_data(&tar, "99 path=a\n\n", 11);
    fx_cifar10_tar(&tar, "cifar-10-batches-bin", 1, 1, NULL);
    fx_tar_end(&tar);
    write_c10(&tar);
    expect_error(DT_DATA_CIFAR10, 0, "bad pax header record at offset 0");
    fx_tar_header(&tar, "././@LongLink", 5000, 'L');
    fx_put_zeros(&tar, 5120);
    fx_cifar10_tar(&tar, "cifar-10-batches-bin", 1, 1, NULL);
    fx_tar_end(&tar);
    write_c10(&tar);
    expect_error(DT_DATA_CIFAR10, 0,
                 "tar extension header at offset 512 is too large (5000 bytes)");
}

/* tests/fixtures/mkdata.py (used by CLI tests) writes what the reader expects, and each of
 * its --corrupt kinds produces the documented error. */
static void mkdata(const char *kind, const char *extra)
{
    char cmd[1200];
    snprintf(cmd, sizeof(cmd),
             "rm -rf %s/py && /usr/bin/python3 tests/fixtures/mkdata.py %s %s/py --train 50 "
             "--test 10 %s",
             dir, kind, dir, extra);
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
        {"missing", "file not found"},
        {"missing-member", " missing"},
        {"record-size", "not a multiple of the"},
        {"label-range", "out of range"},
        {"checksum", "bad tar header checksum"},
        {"tar-truncated", "truncated tar archive"},
        {"skip-size", "claims 18446744073709551615 bytes, more than the archive can hold"},
        {"bomb", "decompressed data exceeds the 256 MiB limit"},
        {"fifo", "is a FIFO (named pipe), not a regular file"},
    };
    char sub[600];
    snprintf(sub, sizeof(sub), "%s/py", dir);
    struct dt_data d;
    mkdata("cifar10", "");
    assert_int_equal(dt_data_load(&d, DT_DATA_CIFAR10, sub, 0, 0), 0);
    check_c10(&d, 10, 10);
    dt_data_free(&d);
    mkdata("cifar100", "");
    assert_int_equal(dt_data_load(&d, DT_DATA_CIFAR100, sub, 0, 1), 0);
    assert_int_equal(d.train.n, 50);
    for (size_t i = 0; i < 50; i++)
        check_sample(&d.train, i, i, (int)(i / 5));
    assert_string_equal(d.test.names[3], "coarse03");
    dt_data_free(&d);
    for (int k = 0; k < 2; k++) {
        const char *kind = k ? "cifar100" : "cifar10";
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            char extra[64];
            snprintf(extra, sizeof(extra), "--corrupt %s", cases[i][0]);
            mkdata(kind, extra);
            alarm(30); /* a FIFO that blocks, a bomb inflated whole: fail, do not hang */
            assert_int_equal(dt_data_load(&d, k ? DT_DATA_CIFAR100 : DT_DATA_CIFAR10, sub, 0, 0),
                             -DT_EDATA);
            alarm(0);
            if (!strstr(dt_last_error(), cases[i][1]))
                fail_msg("%s --corrupt %s: '%s' lacks '%s'", kind, cases[i][0], dt_last_error(),
                         cases[i][1]);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cifar10_loads_in_batch_order),
        cmocka_unit_test(test_cifar10_other_directory_name),
        cmocka_unit_test(test_cifar100_fine_and_coarse),
        cmocka_unit_test(test_gnu_long_names_and_pax_headers),
        cmocka_unit_test(test_tar_basename),
        cmocka_unit_test(test_missing_archive),
        cmocka_unit_test(test_not_gzip),
        cmocka_unit_test(test_truncated_gzip),
        cmocka_unit_test(test_missing_member),
        cmocka_unit_test(test_duplicate_member),
        cmocka_unit_test(test_record_size_not_multiple),
        cmocka_unit_test(test_label_out_of_range),
        cmocka_unit_test(test_bad_header_checksum),
        cmocka_unit_test(test_bad_size_field),
        cmocka_unit_test(test_size_that_would_wrap),
        cmocka_unit_test(test_skipped_member_size_that_would_wrap),
        cmocka_unit_test(test_many_member_bomb),
        cmocka_unit_test(test_truncated_tar),
        cmocka_unit_test(test_wrong_class_name_count),
        cmocka_unit_test(test_empty_dataset),
        cmocka_unit_test(test_bad_extension_headers),
        cmocka_unit_test(test_mkdata_script),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

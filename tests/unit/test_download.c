/* data/download over file:// (no server needed): whole transfers, resume from a part file,
 * a part file longer than the source (start over), and the failure classes. The HTTP paths
 * (Range, 200-instead-of-206, 416, 404/500, cut connections) are covered end to end by
 * tests/cli/fetch.sh against tests/fetch_server.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/download.h"
#include "util/err.h"
#include "util/fileio.h"

struct fixture {
    char dir[64];
    char src[128], part[128], url[160];
    unsigned char data[100000];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/dtrain-dl-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->src, sizeof f->src, "%s/src.bin", f->dir);
    snprintf(f->part, sizeof f->part, "%s/out.bin.part", f->dir);
    snprintf(f->url, sizeof f->url, "file://%s", f->src);
    for (size_t i = 0; i < sizeof f->data; i++)
        f->data[i] = (unsigned char)(i * 31 + 7);
    if (dt_write_file_atomic(f->src, f->data, sizeof f->data))
        return -1;
    *state = f;
    return dt_download_global_init();
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    unlink(f->src);
    unlink(f->part);
    rmdir(f->dir);
    free(f);
    dt_download_global_cleanup();
    return 0;
}

static void expect_part_is_source(const struct fixture *f)
{
    char *got;
    size_t len;
    assert_int_equal(dt_read_file(f->part, &got, &len), 0);
    assert_int_equal(len, sizeof f->data);
    assert_memory_equal(got, f->data, len);
    free(got);
}

static const struct dt_dl_options opts = {
    .connect_timeout_s = 5, .stall_time_s = 5, .stall_bytes_per_s = 1};

static void test_whole_file(void **state)
{
    struct fixture *f = *state;
    unlink(f->part);
    struct dt_dl_result r;
    assert_int_equal(dt_download(f->url, f->part, &opts, &r), 0);
    assert_int_equal(r.failure, DT_DL_OK);
    assert_int_equal(r.resumed, 0);
    assert_int_equal(r.received, sizeof f->data);
    expect_part_is_source(f);
}

static void test_resume_appends_the_rest(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(dt_write_file_atomic(f->part, f->data, 40000), 0);
    struct dt_dl_result r;
    assert_int_equal(dt_download(f->url, f->part, &opts, &r), 0);
    assert_int_equal(r.resumed, 40000);
    assert_int_equal(r.received, sizeof f->data - 40000);
    assert_false(r.restarted);
    expect_part_is_source(f);
}

static void test_part_longer_than_source_starts_over(void **state)
{
    struct fixture *f = *state;
    unsigned char longer[120000] = {0};
    assert_int_equal(dt_write_file_atomic(f->part, longer, sizeof longer), 0);
    struct dt_dl_result r;
    assert_int_equal(dt_download(f->url, f->part, &opts, &r), 0);
    assert_true(r.restarted);
    expect_part_is_source(f);
}

static void progress(void *ctx, uint64_t have, uint64_t total, uint64_t resumed)
{
    uint64_t *last = ctx;
    assert_true(have >= resumed);
    assert_true(total == 0 || have <= total);
    *last = have;
}

static void test_progress_reports_bytes(void **state)
{
    struct fixture *f = *state;
    unlink(f->part);
    uint64_t last = 0;
    struct dt_dl_options o = opts;
    o.progress = progress;
    o.progress_ctx = &last;
    struct dt_dl_result r;
    assert_int_equal(dt_download(f->url, f->part, &o, &r), 0);
    assert_int_equal(last, sizeof f->data);
}

static void test_failures_are_classified(void **state)
{
    struct fixture *f = *state;
    struct dt_dl_result r;
    unlink(f->part);
    assert_int_equal(dt_download("file:///nonexistent/x.gz", f->part, &opts, &r), -DT_ERUNTIME);
    assert_int_equal(r.failure, DT_DL_NEXT);
    assert_non_null(strstr(dt_last_error(), "file:///nonexistent/x.gz: "));
    assert_int_equal(dt_download("gopher-nope://host/x", f->part, &opts, &r), -DT_ERUNTIME);
    assert_int_equal(r.failure, DT_DL_NEXT);
    assert_int_equal(dt_download(f->url, "/nonexistent/dir/x.part", &opts, &r), -DT_ERUNTIME);
    assert_int_equal(r.failure, DT_DL_FATAL);
    assert_string_equal(dt_last_error(),
                        "/nonexistent/dir/x.part: cannot write: No such file or directory");
}

static void test_full_disk_is_fatal(void **state)
{
    if (access("/dev/full", W_OK) != 0)
        skip();
    struct fixture *f = *state;
    struct dt_dl_result r;
    assert_int_equal(dt_download(f->url, "/dev/full", &opts, &r), -DT_ERUNTIME);
    assert_int_equal(r.failure, DT_DL_FATAL);
    assert_string_equal(dt_last_error(), "/dev/full: write failed: No space left on device");
}

static void test_remote_urls(void **state)
{
    (void)state;
    assert_true(dt_url_is_remote("https://example.org/x"));
    assert_true(dt_url_is_remote("http://127.0.0.1/x"));
    assert_false(dt_url_is_remote("file:///srv/x"));
    assert_false(dt_url_is_remote("FILE:///srv/x"));
    assert_false(dt_url_is_remote("/srv/x"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_file),
        cmocka_unit_test(test_resume_appends_the_rest),
        cmocka_unit_test(test_part_longer_than_source_starts_over),
        cmocka_unit_test(test_progress_reports_bytes),
        cmocka_unit_test(test_failures_are_classified),
        cmocka_unit_test(test_full_disk_is_fatal),
        cmocka_unit_test(test_remote_urls),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

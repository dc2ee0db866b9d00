/* train/ckpt_writer: files written in the background, in order, whole; a failed write is
 * reported once, by the next submit or wait, naming the file; close waits for the queue. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train/ckpt_writer.h"
#include "util/err.h"
#include "util/fileio.h"

/* Queues a copy of text for path. */
static int submit(struct dt_ckpt_writer *w, const char *path, const char *text)
{
    size_t len = strlen(text);
    unsigned char *b = malloc(len);
    memcpy(b, text, len);
    return dt_ckpt_writer_submit(w, path, b, len);
}

static void assert_file(const char *path, const char *want)
{
    char *data;
    size_t len;
    assert_int_equal(dt_read_file(path, &data, &len), 0);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(data, want, len);
    free(data);
}

static void test_in_order_and_whole(void **state)
{
    (void)state;
    char dir[] = "/tmp/dtrain-ckw-XXXXXX", a[64], b[64];
    assert_non_null(mkdtemp(dir));
    snprintf(a, sizeof a, "%s/last", dir);
    snprintf(b, sizeof b, "%s/best", dir);
    struct dt_ckpt_writer w;
    dt_ckpt_writer_init(&w);
    assert_int_equal(dt_ckpt_writer_wait(&w), 0); /* nothing queued, no thread yet */
    for (int i = 0; i < 50; i++) { /* the same file over and over: the last one wins */
        char text[32];
        snprintf(text, sizeof text, "step %d", i);
        assert_int_equal(submit(&w, a, text), 0);
    }
    assert_int_equal(submit(&w, b, "best"), 0);
    assert_int_equal(dt_ckpt_writer_wait(&w), 0);
    assert_file(a, "step 49");
    assert_file(b, "best");
    assert_int_equal(submit(&w, a, "final"), 0);
    assert_int_equal(dt_ckpt_writer_close(&w), 0); /* waits for it */
    assert_file(a, "final");
    unlink(a);
    unlink(b);
    rmdir(dir);
}

static void test_failed_write_is_reported_once(void **state)
{
    (void)state;
    struct dt_ckpt_writer w;
    dt_ckpt_writer_init(&w);
    const char *bad = "/nonexistent-dtrain-dir/last.safetensors";
    assert_int_equal(submit(&w, bad, "x"), 0); /* queued */
    int rc = dt_ckpt_writer_wait(&w);
    assert_int_equal(dt_exit_code(rc), DT_ERUNTIME);
    assert_non_null(strstr(dt_last_error(), bad));
    assert_int_equal(dt_ckpt_writer_wait(&w), 0); /* reported once */
    /* a failure the writer finds refuses the next submit, which queues nothing */
    char dir[] = "/tmp/dtrain-ckw-XXXXXX", good[64];
    assert_non_null(mkdtemp(dir));
    snprintf(good, sizeof good, "%s/last", dir);
    assert_int_equal(submit(&w, bad, "x"), 0);
    int rc2, queued = 0;
    while ((rc2 = submit(&w, good, "y")) == 0) {
        queued++;
        usleep(1000); /* until the writer has got to the bad one */
    }
    assert_int_equal(dt_exit_code(rc2), DT_ERUNTIME);
    assert_non_null(strstr(dt_last_error(), bad));
    assert_int_equal(dt_ckpt_writer_close(&w), 0);
    /* the good ones queued before the refusal were written; the writer may have failed the
     * bad one before the first good submit (a busy machine), and then there is none */
    if (queued > 0) {
        assert_file(good, "y");
        unlink(good);
    } else {
        assert_int_equal(access(good, F_OK), -1);
    }
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_order_and_whole),
        cmocka_unit_test(test_failed_write_is_reported_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

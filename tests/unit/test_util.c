/* util/: error buffer, RNG determinism, JSON writer and parser, atomic files, shell words. */
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

#include "util/err.h"
#include "util/fileio.h"
#include "util/json.h"
#include "util/rng.h"
#include "util/shell.h"

static void test_fail_records_message_and_code(void **state)
{
    (void)state;
    assert_int_equal(dt_fail(DT_EDATA, "%s: bad magic 0x%08x", "f.gz", 0x1234), -DT_EDATA);
    assert_string_equal(dt_last_error(), "f.gz: bad magic 0x00001234");
    assert_int_equal(dt_last_error_code(), DT_EDATA);
    assert_int_equal(dt_fail_context(-DT_EDATA, "loading %s", "train"), -DT_EDATA);
    assert_string_equal(dt_last_error(), "loading train: f.gz: bad magic 0x00001234");
    assert_int_equal(dt_exit_code(-DT_EUSAGE), 2);
    assert_int_equal(dt_exit_code(-77), 1);
}

static void test_rng_is_deterministic_and_keyed(void **state)
{
    (void)state;
    struct dt_rng a, b, c;
    dt_rng_init(&a, dt_rng_key(42, DT_RNG_DROPOUT, 3, 17));
    dt_rng_init(&b, dt_rng_key(42, DT_RNG_DROPOUT, 3, 17));
    dt_rng_init(&c, dt_rng_key(42, DT_RNG_DROPOUT, 3, 18));
    int differ = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t x = dt_rng_next(&a);
        assert_true(x == dt_rng_next(&b));
        differ += x != dt_rng_next(&c);
    }
    assert_true(differ > 90);
    double sum = 0, sq = 0;
    for (int i = 0; i < 100000; i++) {
        float u = dt_rng_uniform(&a);
        assert_true(u >= 0.0f && u < 1.0f);
        double z = dt_rng_normal(&a);
        sum += z;
        sq += z * z;
        assert_true(dt_rng_below(&a, 7) < 7);
    }
    assert_true(sum / 100000 < 0.02 && sum / 100000 > -0.02);
    assert_true(sq / 100000 > 0.97 && sq / 100000 < 1.03);
}

static void test_json_writer_escapes(void **state)
{
    (void)state;
    struct dt_json_writer w;
    dt_jw_begin(&w, "epoch");
    dt_jw_int(&w, "epoch", 3);
    dt_jw_num(&w, "loss", 0.5);
    dt_jw_num(&w, "nan", 0.0 / 0.0);
    dt_jw_str(&w, "name", "a\"b\\c\n");
    dt_jw_bool(&w, "ok", true);
    char *s = dt_jw_finish(&w);
    assert_string_equal(s, "{\"event\":\"epoch\",\"epoch\":3,\"loss\":0.5,\"nan\":null,\"name\":"
                           "\"a\\\"b\\\\c\\n\",\"ok\":true}");
    struct dt_json *v = dt_json_parse(s, strlen(s));
    assert_non_null(v);
    assert_string_equal(dt_json_get(v, "name")->str, "a\"b\\c\n");
    assert_int_equal((int)dt_json_get(v, "epoch")->num, 3);
    assert_int_equal(dt_json_get(v, "nan")->type, DT_JSON_NULL);
    dt_json_free(v);
    free(s);
}

static void test_json_parser_rejects_garbage(void **state)
{
    (void)state;
    const char *bad[] = {
        "",           "{",
        "{\"a\":}",   "[1,2",
        "{\"a\":1}x", "\"unterminated",
        "{'a':1}",    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_null(dt_json_parse(bad[i], strlen(bad[i])));
        assert_int_equal(dt_last_error_code(), DT_EDATA);
        assert_non_null(strstr(dt_last_error(), "invalid JSON"));
    }
    const char *ok = "{\"t\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}";
    struct dt_json *v = dt_json_parse(ok, strlen(ok));
    assert_non_null(v);
    const struct dt_json *shape = dt_json_get(dt_json_get(v, "t"), "shape");
    assert_int_equal(shape->count, 2);
    assert_int_equal((int)shape->child->next->num, 3);
    dt_json_free(v);
}

static void test_atomic_write_replaces_whole_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/dtrain-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char sub[256], path[300];
    snprintf(sub, sizeof sub, "%s/a/b", dir);
    assert_int_equal(dt_mkdir_p(sub), 0);
    snprintf(path, sizeof path, "%s/file", sub);
    assert_int_equal(dt_write_file_atomic(path, "hello", 5), 0);
    struct dt_atomic_file af;
    assert_int_equal(dt_atomic_open(&af, path), 0);
    fputs("half-written", af.f);
    dt_atomic_abort(&af); /* an aborted write leaves the old content */
    char *data;
    size_t len;
    assert_int_equal(dt_read_file(path, &data, &len), 0);
    assert_int_equal(len, 5);
    assert_memory_equal(data, "hello", 5);
    free(data);
    assert_int_equal(access(af.tmp_path, F_OK), -1);
    assert_int_equal(dt_read_file("/nonexistent/x", &data, &len), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "/nonexistent/x"));
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* dt_read_file_max: a byte cap (exactly the cap is fine, one more is not), and only regular
 * files: a FIFO would block the open or the read forever, /dev/zero would never end. */
static void test_read_file_is_bounded(void **state)
{
    (void)state;
    char dir[] = "/tmp/dtrain-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[300], fifo[300];
    snprintf(path, sizeof path, "%s/file", dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    char big[100];
    memset(big, 'x', sizeof big);
    assert_int_equal(dt_write_file_atomic(path, big, sizeof big), 0);
    char *data;
    size_t len;
    assert_int_equal(dt_read_file_max(path, 100, &data, &len), 0);
    assert_int_equal(len, 100);
    free(data);
    assert_int_equal(dt_read_file_max(path, 99, &data, &len), -DT_EDATA);
    char want[400];
    snprintf(want, sizeof want, "%s: larger than 99 bytes", path);
    assert_string_equal(dt_last_error(), want);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    alarm(10); /* a blocking open would hang: fail instead */
    assert_int_equal(dt_read_file_max(fifo, 100, &data, &len), -DT_EDATA);
    alarm(0);
    snprintf(want, sizeof want, "%s: is a FIFO (named pipe), not a regular file", fifo);
    assert_string_equal(dt_last_error(), want);
    assert_int_equal(dt_read_file_max("/dev/zero", 100, &data, &len), -DT_EDATA);
    assert_string_equal(dt_last_error(), "/dev/zero: is a character device, not a regular file");
    assert_int_equal(dt_read_file_max(dir, 100, &data, &len), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "is a directory, not a regular file"));
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* dt_shell_word: plain words as they are, anything else single-quoted so a shell reads back
 * the same bytes (cmdline.txt and the stop event's resume command both rely on it). */
static void test_shell_word_quotes(void **state)
{
    (void)state;
    static const char *const in[] = {"train", "--set", "checkpoint.dir=runs/a-2", "", "a b", "it's",
                                     "$HOME", "x\ny"};
    static const char *const want[] = {"train",   "--set", "checkpoint.dir=runs/a-2",
                                       "''",      "'a b'", "'it'\\''s'",
                                       "'$HOME'", "'x\ny'"};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        char *text = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&text, &len);
        assert_non_null(out);
        dt_shell_word(out, in[i]);
        fclose(out);
        assert_string_equal(text, want[i]);
        free(text);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fail_records_message_and_code),
        cmocka_unit_test(test_rng_is_deterministic_and_keyed),
        cmocka_unit_test(test_json_writer_escapes),
        cmocka_unit_test(test_json_parser_rejects_garbage),
        cmocka_unit_test(test_atomic_write_replaces_whole_file),
        cmocka_unit_test(test_read_file_is_bounded),
        cmocka_unit_test(test_shell_word_quotes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

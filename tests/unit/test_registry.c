/* data/registry: the built-in table and registry files (override, add, reject bad input). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/registry.h"
#include "util/err.h"

static char reg_path[64];

static int write_registry(const char *json)
{
    snprintf(reg_path, sizeof reg_path, "/tmp/dtrain-reg-XXXXXX");
    int fd = mkstemp(reg_path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, json, strlen(json)), (ssize_t)strlen(json));
    close(fd);
    int rc = dt_registry_load(reg_path);
    unlink(reg_path);
    return rc;
}

static void test_builtin_entries(void **state)
{
    (void)state;
    size_t n;
    const struct dt_reg_dataset *all = dt_registry_all(&n);
    assert_int_equal(n, 5);
    for (size_t i = 0; i < n; i++) {
        assert_true(all[i].nfiles >= 1 && all[i].nfiles <= DT_REG_MAX_FILES);
        assert_non_null(all[i].mirrors[0]);
        for (int f = 0; f < all[i].nfiles; f++) {
            assert_true(dt_reg_file_has_checksum(&all[i].files[f]));
            assert_true(all[i].files[f].size > 0);
            if (all[i].files[f].md5)
                assert_int_equal(strlen(all[i].files[f].md5), 32);
        }
    }
    const struct dt_reg_dataset *fm = dt_registry_find("fashion-mnist");
    assert_non_null(fm);
    assert_string_equal(fm->system_dir, "/usr/share/datasets/fashion-mnist");
    assert_non_null(fm->files[0].content_sha256);
    assert_null(dt_registry_find("imagenet"));
    assert_string_equal(dt_registry_names(), "mnist, fashion-mnist, kmnist, cifar10, cifar100");
}

static void test_registry_file_overrides_and_adds(void **state)
{
    (void)state;
    assert_int_equal(
        write_registry(
            "{\"datasets\": [{\"name\": \"mnist\", \"format\": \"idx\", \"mirrors\": "
            "[\"file:///srv/mnist/\"], \"files\": [{\"name\": \"a.gz\", \"size\": 12, \"md5\": "
            "\"0123456789abcdef0123456789ABCDEF\"}]}, {\"name\": \"internal\", \"format\": "
            "\"cifar10\", \"classes\": 7, \"system_dir\": \"/srv/x\", \"files\": [{\"name\": "
            "\"b.tar.gz\"}]}]}"),
        0);
    size_t n;
    dt_registry_all(&n);
    assert_int_equal(n, 6);
    const struct dt_reg_dataset *m = dt_registry_find("mnist");
    assert_int_equal(m->nfiles, 1);
    assert_string_equal(m->files[0].name, "a.gz");
    assert_int_equal(m->files[0].size, 12);
    assert_string_equal(m->mirrors[0], "file:///srv/mnist/");
    assert_null(m->mirrors[1]);
    const struct dt_reg_dataset *x = dt_registry_find("internal");
    assert_non_null(x);
    assert_int_equal(x->classes, 7);
    assert_string_equal(x->system_dir, "/srv/x");
    assert_false(dt_reg_file_has_checksum(&x->files[0]));
    assert_string_equal(dt_registry_names(),
                        "mnist, fashion-mnist, kmnist, cifar10, cifar100, internal");
    dt_registry_unload();
    dt_registry_all(&n);
    assert_int_equal(n, 5);
    assert_int_equal(dt_registry_find("mnist")->nfiles, 4);
}

static void expect_rejected(const char *json, const char *message)
{
    assert_int_equal(write_registry(json), -DT_EUSAGE);
    const char *msg = dt_last_error();
    if (!strstr(msg, message))
        fail_msg("message '%s' lacks '%s'", msg, message);
    if (!strstr(msg, reg_path))
        fail_msg("message '%s' does not name the file", msg);
    size_t n;
    dt_registry_all(&n);
    assert_int_equal(n, 5); /* a failed load leaves the built-in table */
}

static void test_registry_file_errors(void **state)
{
    (void)state;
    expect_rejected("[1]", "expected an object with a \"datasets\" array");
    expect_rejected("{\"datasets\": [], \"x\": 1}", "unknown key \"x\"");
    expect_rejected("{\"datasets\": [", "");
    expect_rejected("{\"datasets\": [{\"format\": \"idx\"}]}", "datasets[0]: missing key \"name\"");
    expect_rejected("{\"datasets\": [{\"name\": \"a\", \"format\": \"png\", \"files\": []}]}",
                    "dataset \"a\": \"format\" must be");
    expect_rejected("{\"datasets\": [{\"name\": \"a\", \"format\": \"idx\", \"files\": []}]}",
                    "\"files\" must be an array of 1 to 4 entries");
    expect_rejected("{\"datasets\": [{\"name\": \"a\", \"format\": \"idx\", \"files\": "
                    "[{\"name\": \"../etc/passwd\"}]}]}",
                    "file \"name\" must be a plain file name");
    expect_rejected("{\"datasets\": [{\"name\": \"a\", \"format\": \"idx\", \"files\": "
                    "[{\"name\": \"f\", \"sha256\": \"abc\"}]}]}",
                    "\"sha256\" must be 64 hex digits, found \"abc\"");
    expect_rejected("{\"datasets\": [{\"name\": \"a\", \"format\": \"idx\", \"files\": "
                    "[{\"name\": \"f\", \"size\": -1}]}]}",
                    "\"size\" must be a non-negative number of bytes");
    expect_rejected("{\"datasets\": [{\"name\": \"a\", \"format\": \"idx\", \"mirrors\": [1], "
                    "\"files\": [{\"name\": \"f\"}]}]}",
                    "each mirror must be a string");
    expect_rejected("{\"datasets\": [{\"name\": \"a\", \"format\": \"idx\", \"classes\": 1.5, "
                    "\"files\": [{\"name\": \"f\"}]}]}",
                    "\"classes\" must be an integer from 2 to 256");
    assert_int_equal(dt_registry_load("/nonexistent/registry.json"), -DT_EUSAGE);
    assert_non_null(strstr(dt_last_error(), "/nonexistent/registry.json"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_entries),
        cmocka_unit_test(test_registry_file_overrides_and_adds),
        cmocka_unit_test(test_registry_file_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

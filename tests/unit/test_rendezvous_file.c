/* dist/rdvfile: where the one-host rendezvous file lives and what is refused. Another local
 * user is simulated by chown to uid 65534 (as root; those cases are skipped otherwise), a
 * planted symbolic link by symlink(). Every case runs in its own TMPDIR. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dist/rdvfile.h"
#include "util/err.h"

#define OTHER_UID 65534

struct fx {
    char tmp[64];   /* TMPDIR of this case */
    char dir[128];  /* $TMPDIR/dtrain-<uid> */
    char path[256]; /* the file of key "slurm-7.0" */
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    snprintf(f->tmp, sizeof f->tmp, "/tmp/test_rdvfile.XXXXXX");
    if (!f || !mkdtemp(f->tmp))
        return -1;
    snprintf(f->dir, sizeof f->dir, "%s/dtrain-%u", f->tmp, (unsigned)geteuid());
    snprintf(f->path, sizeof f->path, "%s/dtrain-rdv-slurm-7.0", f->dir);
    setenv("TMPDIR", f->tmp, 1);
    unsetenv("XDG_RUNTIME_DIR");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", f->tmp);
    unsetenv("TMPDIR");
    free(f);
    return 0;
}

static void write_file(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    assert_int_equal(chmod(path, mode), 0);
}

static void expect_refused(int rc, const char *needle)
{
    assert_int_equal(rc, -DT_ERUNTIME);
    if (!strstr(dt_last_error(), needle))
        fail_msg("error '%s' lacks '%s'", dt_last_error(), needle);
    assert_null(strchr(dt_last_error(), '\n'));
}

static void test_private_dir_created_0700(void **state)
{
    struct fx *f = *state;
    char path[256];
    assert_int_equal(dt_rdvfile_path("slurm-7.0", path, sizeof path), 0);
    assert_string_equal(path, f->path);
    struct stat st;
    assert_int_equal(lstat(f->dir, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_int_equal(st.st_uid, geteuid());
    /* the launcher's key is kept to file-name characters */
    assert_int_equal(dt_rdvfile_path("ompi-1/2 x", path, sizeof path), 0);
    assert_non_null(strstr(path, "/dtrain-rdv-ompi-1_2_x"));
}

static void test_publish_then_read(void **state)
{
    struct fx *f = *state;
    char path[256], hex[DT_RDVFILE_HEX_MAX + 2];
    int port = 0;
    assert_int_equal(dt_rdvfile_path("slurm-7.0", path, sizeof path), 0);
    assert_int_equal(dt_rdvfile_read(path, &port, hex), 1); /* not there yet */
    assert_int_equal(dt_rdvfile_publish(path, 4242, "00ff00ff00ff00ff"), 0);
    struct stat st;
    assert_int_equal(lstat(f->path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(dt_rdvfile_read(path, &port, hex), 0);
    assert_int_equal(port, 4242);
    assert_string_equal(hex, "00ff00ff00ff00ff");
    /* a second publish (a stale file of ours) replaces it */
    assert_int_equal(dt_rdvfile_publish(path, 4243, "11"), 0);
    assert_int_equal(dt_rdvfile_read(path, &port, hex), 0);
    assert_int_equal(port, 4243);
}

static void test_stale_file_is_waited_past(void **state)
{
    struct fx *f = *state;
    char path[256], hex[DT_RDVFILE_HEX_MAX + 2];
    int port = 0;
    assert_int_equal(dt_rdvfile_path("slurm-7.0", path, sizeof path), 0);
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    assert_true(dead > 0);
    assert_int_equal(waitpid(dead, NULL, 0), dead);
    char line[64];
    snprintf(line, sizeof line, "%d 4000 abcd\n", (int)dead);
    write_file(f->path, line, 0600);
    assert_int_equal(dt_rdvfile_read(path, &port, hex), 1);
}

static void test_symlinked_file_refused(void **state)
{
    struct fx *f = *state;
    char path[256], hex[DT_RDVFILE_HEX_MAX + 2], target[300];
    int port = 0;
    assert_int_equal(dt_rdvfile_path("slurm-7.0", path, sizeof path), 0);
    /* the link points at a valid-looking file of ours: following it would "work" */
    snprintf(target, sizeof target, "%s/elsewhere", f->tmp);
    char line[64];
    snprintf(line, sizeof line, "%d 4000 abcd\n", (int)getpid());
    write_file(target, line, 0600);
    assert_int_equal(symlink(target, f->path), 0);
    expect_refused(dt_rdvfile_read(path, &port, hex), "it is a symbolic link");
    expect_refused(dt_rdvfile_publish(path, 4000, "abcd"), "it is a symbolic link");
    struct stat st;
    assert_int_equal(lstat(f->path, &st), 0);
    assert_true(S_ISLNK(st.st_mode)); /* left alone, not replaced through */
}

static void test_open_mode_file_refused(void **state)
{
    struct fx *f = *state;
    char path[256], hex[DT_RDVFILE_HEX_MAX + 2], line[64];
    int port = 0;
    assert_int_equal(dt_rdvfile_path("slurm-7.0", path, sizeof path), 0);
    snprintf(line, sizeof line, "%d 4000 abcd\n", (int)getpid());
    write_file(f->path, line, 0666);
    expect_refused(dt_rdvfile_read(path, &port, hex), "mode 0666 lets others read or write it");
    expect_refused(dt_rdvfile_publish(path, 4000, "abcd"), "mode 0666");
}

static void test_foreign_file_refused(void **state)
{
    struct fx *f = *state;
    if (geteuid() != 0)
        skip();
    char path[256], hex[DT_RDVFILE_HEX_MAX + 2], line[64];
    int port = 0;
    assert_int_equal(dt_rdvfile_path("slurm-7.0", path, sizeof path), 0);
    snprintf(line, sizeof line, "%d 4000 abcd\n", (int)getpid());
    write_file(f->path, line, 0600);
    assert_int_equal(chown(f->path, OTHER_UID, OTHER_UID), 0);
    expect_refused(dt_rdvfile_read(path, &port, hex), "belongs to uid 65534, not to you");
    expect_refused(dt_rdvfile_publish(path, 4000, "abcd"), "belongs to uid 65534");
}

static void test_foreign_dir_refused(void **state)
{
    struct fx *f = *state;
    if (geteuid() != 0)
        skip();
    char path[256];
    assert_int_equal(mkdir(f->dir, 0700), 0);
    assert_int_equal(chown(f->dir, OTHER_UID, OTHER_UID), 0);
    expect_refused(dt_rdvfile_path("slurm-7.0", path, sizeof path),
                   "belongs to uid 65534, not to you");
    assert_non_null(strstr(dt_last_error(), f->dir));
}

static void test_writable_dir_refused(void **state)
{
    struct fx *f = *state;
    char path[256];
    assert_int_equal(mkdir(f->dir, 0700), 0);
    assert_int_equal(chmod(f->dir, 0777), 0);
    expect_refused(dt_rdvfile_path("slurm-7.0", path, sizeof path), "mode 0777 lets others write");
}

static void test_symlinked_dir_refused(void **state)
{
    struct fx *f = *state;
    char path[256], real[200];
    snprintf(real, sizeof real, "%s/real", f->tmp);
    assert_int_equal(mkdir(real, 0700), 0);
    assert_int_equal(symlink(real, f->dir), 0);
    expect_refused(dt_rdvfile_path("slurm-7.0", path, sizeof path), "it is a symbolic link");
    assert_int_equal(rmdir(real), 0); /* nothing was created through the link */
}

static void test_xdg_runtime_dir(void **state)
{
    struct fx *f = *state;
    char path[256], xdg[200];
    snprintf(xdg, sizeof xdg, "%s/run", f->tmp);
    assert_int_equal(mkdir(xdg, 0700), 0);
    setenv("XDG_RUNTIME_DIR", xdg, 1);
    assert_int_equal(dt_rdvfile_path("slurm-7.0", path, sizeof path), 0);
    char want[300];
    snprintf(want, sizeof want, "%s/dtrain-rdv-slurm-7.0", xdg);
    assert_string_equal(path, want);
    /* one others may write to is passed over for the private /tmp directory */
    assert_int_equal(chmod(xdg, 0777), 0);
    assert_int_equal(dt_rdvfile_path("slurm-7.0", path, sizeof path), 0);
    assert_string_equal(path, f->path);
    /* as is one that does not exist, or a relative one */
    setenv("XDG_RUNTIME_DIR", "/nonexistent/run/user/1000", 1);
    assert_int_equal(dt_rdvfile_path("slurm-7.0", path, sizeof path), 0);
    assert_string_equal(path, f->path);
    setenv("XDG_RUNTIME_DIR", "run", 1);
    assert_int_equal(dt_rdvfile_path("slurm-7.0", path, sizeof path), 0);
    assert_string_equal(path, f->path);
    unsetenv("XDG_RUNTIME_DIR");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_private_dir_created_0700, setup, teardown),
        cmocka_unit_test_setup_teardown(test_publish_then_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_file_is_waited_past, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlinked_file_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_mode_file_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_file_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_dir_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writable_dir_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlinked_dir_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_xdg_runtime_dir, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

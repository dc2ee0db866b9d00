/* train/rundir: the stale temp-file sweep removes dtrain's own dead writes and nothing else
 * (a user's file, a write in progress here or on another host); --resume auto's choice; the
 * directory is chosen without touching the disk and created afterwards. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "train/config.h"
#include "train/rundir.h"
#include "util/err.h"

static const char HEADER[] = "\x60\x13\0\0\0\0\0\0{\"__metadata__\":{\"format\":\"pt\","
                             "\"dtrain_version\":\"0.1.0\",\"optimizer\":\"adadelta\"";

static void put(const char *dir, const char *name, const void *bytes, size_t len)
{
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, len, f), len);
    fclose(f);
}

static bool there(const char *dir, const char *name)
{
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

/* A pid that was alive a moment ago and is not now. */
static long dead_pid(void)
{
    pid_t p = fork();
    if (p == 0)
        _exit(0);
    assert_true(p > 0);
    waitpid(p, NULL, 0);
    return (long)p;
}

static void test_temp_path_says_whose(void **state)
{
    (void)state;
    char tmp[512], want[64];
    assert_int_equal(dt_run_dir_temp_path("/r/x/last.safetensors", tmp, sizeof tmp), 0);
    assert_memory_equal(tmp, "/r/x/.last.safetensors.tmp.", 27);
    snprintf(want, sizeof want, ".%ld.", (long)getpid());
    assert_non_null(strstr(tmp + 27, want));
    assert_true(strlen(strrchr(tmp, '.')) > 1); /* a start time after the pid */
}

static void test_sweep_removes_only_dead_dtrain_writes(void **state)
{
    (void)state;
    char dir[] = "/tmp/dtrain-rundir-XXXXXX";
    assert_non_null(mkdtemp(dir));
    /* this host's name and this process's start time, as the writer spells them */
    char mine[512], host[200], name[300];
    assert_int_equal(dt_run_dir_temp_path("/x/last.safetensors", mine, sizeof mine), 0);
    const char *h = mine + strlen("/x/.last.safetensors.tmp.");
    const char *start = strrchr(mine, '.') + 1;
    const char *pid_dot = start - 1;
    do
        pid_dot--;
    while (*pid_dot != '.');
    snprintf(host, sizeof host, "%.*s", (int)(pid_dot - h), h);
    unsigned long long my_start = strtoull(start, NULL, 10);
    size_t hl = sizeof HEADER - 1;

    /* kept: files dtrain did not write under this scheme */
    put(dir, "last.safetensors.tmp.999999999", "torn", 4); /* a user's, old pattern */
    put(dir, "notes.tmp.1", "mine", 4);
    snprintf(name, sizeof name, ".last.safetensors.tmp.%s.%ld.1", host, dead_pid());
    char foreign[sizeof name];
    snprintf(foreign, sizeof foreign, "%s", name);
    put(dir, foreign, "12345678my own notes, not a checkpoint", 38);
    /* kept: a live writer here (this process, its own start time) */
    char alive[300];
    snprintf(alive, sizeof alive, ".last.safetensors.tmp.%s.%ld.%llu", host, (long)getpid(),
             my_start);
    put(dir, alive, HEADER, hl);
    /* kept: another host's write whose writer holds the lock */
    put(dir, ".best.safetensors.tmp.otherhost.77.5", HEADER, 20);
    char locked[512];
    snprintf(locked, sizeof locked, "%s/.best.safetensors.tmp.otherhost.77.5", dir);
    int lfd = open(locked, O_RDWR);
    assert_true(lfd >= 0);
    assert_int_equal(flock(lfd, LOCK_EX), 0);

    /* removed: a dead writer here, a reused pid (alive, other start time), another host's
     * unlocked file, an empty one (died right after creating it) */
    char dead[300], reused[300];
    snprintf(dead, sizeof dead, ".last.safetensors.tmp.%s.%ld.%llu", host, dead_pid(), my_start);
    put(dir, dead, HEADER, hl);
    snprintf(reused, sizeof reused, ".last.safetensors.tmp.%s.%ld.%llu", host, (long)getpid(),
             my_start + 1);
    put(dir, reused, HEADER, 30);
    put(dir, ".last.safetensors.tmp.otherhost.12.34", HEADER, hl);
    snprintf(name, sizeof name, ".best.safetensors.tmp.%s.%ld.9", host, dead_pid());
    put(dir, name, "", 0);

    assert_int_equal(dt_run_dir_sweep(dir), 4);
    assert_true(there(dir, "last.safetensors.tmp.999999999"));
    assert_true(there(dir, "notes.tmp.1"));
    assert_true(there(dir, foreign));
    assert_true(there(dir, alive));
    assert_true(there(dir, ".best.safetensors.tmp.otherhost.77.5"));
    assert_false(there(dir, dead));
    assert_false(there(dir, reused));
    assert_false(there(dir, ".last.safetensors.tmp.otherhost.12.34"));
    assert_false(there(dir, name));

    close(lfd); /* the other host's writer died: now its file goes */
    assert_int_equal(dt_run_dir_sweep(dir), 1);
    assert_false(there(dir, ".best.safetensors.tmp.otherhost.77.5"));
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_choose_touches_nothing_create_makes_it(void **state)
{
    (void)state;
    char dir[] = "/tmp/dtrain-rundir-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct dt_config cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.checkpoint.dir, sizeof cfg.checkpoint.dir, "%s/runs/x", dir);
    struct dt_run_dir_opts o = {0};
    bool moved = true;
    char chosen[1024];
    assert_int_equal(dt_run_dir_choose(&cfg, &o, chosen, sizeof chosen, &moved), 0);
    assert_false(moved);
    assert_string_equal(chosen, cfg.checkpoint.dir);
    assert_false(there(dir, "runs")); /* nothing made before the data has loaded */
    int stale = -1;
    char made[1024];
    assert_int_equal(dt_run_dir_create(cfg.checkpoint.dir, &stale, made, sizeof made), 0);
    assert_int_equal(stale, 0);
    assert_true(there(dir, "runs/x"));
    char want[1100];
    snprintf(want, sizeof want, "%s/runs", dir);
    assert_string_equal(made, want); /* runs/ was made too */
    /* a failed run removes what it made while it is empty, and only that */
    dt_run_dir_remove_if_empty(cfg.checkpoint.dir, made);
    assert_false(there(dir, "runs"));
    assert_true(there(dir, ""));
    assert_int_equal(dt_run_dir_create(cfg.checkpoint.dir, &stale, made, sizeof made), 0);
    put(cfg.checkpoint.dir, "keep", "k", 1);
    dt_run_dir_remove_if_empty(cfg.checkpoint.dir, made);
    assert_true(there(dir, "runs/x/keep"));
    unlink(strcat(strcpy(want, cfg.checkpoint.dir), "/keep"));
    assert_int_equal(dt_run_dir_create(cfg.checkpoint.dir, &stale, made, sizeof made), 0);
    assert_string_equal(made, ""); /* there already: nothing made, nothing to remove */
    dt_run_dir_remove_if_empty(cfg.checkpoint.dir, made);
    assert_true(there(dir, "runs/x"));
    /* a checkpoint.dir with trailing slashes: the parents it made go too */
    struct dt_config slashed = cfg;
    snprintf(slashed.checkpoint.dir, sizeof slashed.checkpoint.dir, "%s/new/y//", dir);
    assert_int_equal(dt_run_dir_create(slashed.checkpoint.dir, &stale, made, sizeof made), 0);
    snprintf(want, sizeof want, "%s/new", dir);
    assert_string_equal(made, want);
    dt_run_dir_remove_if_empty(slashed.checkpoint.dir, made);
    assert_false(there(dir, "new"));

    /* --resume auto: last, else best, else a fresh start */
    char path[1200];
    assert_int_equal(dt_run_dir_resume_auto(&cfg, path, sizeof path), DT_RESUME_FRESH);
    put(cfg.checkpoint.dir, "best.safetensors", "b", 1);
    assert_int_equal(dt_run_dir_resume_auto(&cfg, path, sizeof path), DT_RESUME_BEST);
    assert_non_null(strstr(path, "runs/x/best.safetensors"));
    put(cfg.checkpoint.dir, "last.safetensors", "l", 1);
    assert_int_equal(dt_run_dir_resume_auto(&cfg, path, sizeof path), DT_RESUME_LAST);
    assert_non_null(strstr(path, "runs/x/last.safetensors"));

    /* a derived directory holding a run moves on to -2, still without making it */
    cfg.checkpoint.dir_default = true;
    struct dt_config before = cfg;
    assert_int_equal(dt_run_dir_choose(&cfg, &o, chosen, sizeof chosen, &moved), 0);
    assert_true(moved);
    assert_non_null(strstr(chosen, "runs/x-2"));
    assert_memory_equal(&before, &cfg, sizeof cfg); /* the config is never written */
    assert_false(there(dir, "runs/x-2"));
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_temp_path_says_whose),
        cmocka_unit_test(test_sweep_removes_only_dead_dtrain_writes),
        cmocka_unit_test(test_choose_touches_nothing_create_makes_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

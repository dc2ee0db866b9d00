#include "train/rundir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/err.h"
#include "util/fileio.h"

static bool file_exists(const char *dir, const char *name)
{
    char path[1200];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static bool holds_checkpoints(const char *dir)
{
    return file_exists(dir, "last.safetensors") || file_exists(dir, "best.safetensors");
}

/* The first runs/NAME-N (N >= 2) that holds no checkpoints. */
static int next_free_dir(struct dt_config *cfg)
{
    char base[1024], dir[1100];
    snprintf(base, sizeof base, "%s", cfg->checkpoint.dir);
    for (int n = 2; n < 100000; n++) {
        snprintf(dir, sizeof dir, "%s-%d", base, n);
        if (!holds_checkpoints(dir)) {
            if (strlen(dir) >= sizeof cfg->checkpoint.dir)
                return dt_fail(DT_EUSAGE, "checkpoint.dir: %s is too long", dir);
            memcpy(cfg->checkpoint.dir, dir, strlen(dir) + 1); /* length checked above */
            return 0;
        }
    }
    return dt_fail(DT_EUSAGE, "checkpoint.dir: %s-2 to -99999 all hold checkpoints", base);
}

static int probe_write(const char *dir)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/.dtrain-probe.%d", dir, (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, "x", 1) != 1 || fsync(fd) != 0) {
        int err = errno;
        if (fd >= 0) {
            close(fd);
            unlink(path);
        }
        return dt_fail(DT_ERUNTIME, "checkpoint.dir %s: cannot write there: %s", dir,
                       strerror(err));
    }
    close(fd);
    unlink(path);
    return 0;
}

/* "NAME.tmp.PID" is util/fileio's atomic temp file: the writer's PID tells a crashed write
 * (no such process) from one in progress. */
static bool stale_temp(const char *name)
{
    const char *t = strstr(name, ".tmp.");
    if (!t || !t[5])
        return false;
    char *end;
    long pid = strtol(t + 5, &end, 10);
    if (*end || pid <= 0)
        return false;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

static int remove_stale_temps(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!stale_temp(e->d_name))
            continue;
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        n += unlink(path) == 0;
    }
    closedir(d);
    return n;
}

int dt_run_dir_claim(struct dt_config *cfg, const struct dt_run_dir_opts *o, bool *moved,
                     int *stale)
{
    *moved = false;
    *stale = 0;
    const char *dir = cfg->checkpoint.dir;
    if (!o->resume && !o->overwrite && holds_checkpoints(dir)) {
        if (!cfg->checkpoint.dir_default)
            return dt_fail(DT_EUSAGE,
                           "checkpoint.dir %s already holds a run's checkpoints: --overwrite "
                           "replaces them, --resume auto continues that run, or set another "
                           "checkpoint.dir",
                           dir);
        int rc = next_free_dir(cfg);
        if (rc)
            return rc;
        *moved = true;
    }
    int rc = dt_mkdir_p(cfg->checkpoint.dir);
    if (rc)
        return rc;
    if ((rc = probe_write(cfg->checkpoint.dir)))
        return rc;
    *stale = remove_stale_temps(cfg->checkpoint.dir);
    return 0;
}

int dt_run_dir_check(const struct dt_config *cfg, bool *holds)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", cfg->checkpoint.dir);
    *holds = holds_checkpoints(dir);
    /* The nearest directory that exists decides: it must let us create what is missing. */
    for (;;) {
        struct stat st;
        if (stat(dir, &st) == 0) {
            if (!S_ISDIR(st.st_mode))
                return dt_fail(DT_ERUNTIME, "checkpoint.dir %s: %s is not a directory",
                               cfg->checkpoint.dir, dir);
            if (access(dir, W_OK | X_OK) != 0)
                return dt_fail(DT_ERUNTIME, "checkpoint.dir %s: cannot write there: %s",
                               cfg->checkpoint.dir, strerror(errno));
            return 0;
        }
        char *slash = strrchr(dir, '/');
        if (!slash)
            snprintf(dir, sizeof dir, ".");
        else if (slash == dir)
            dir[1] = '\0';
        else
            *slash = '\0';
    }
}

void dt_run_dir_resume_auto(const struct dt_config *cfg, char *path, size_t size, bool *found)
{
    *found = file_exists(cfg->checkpoint.dir, "last.safetensors");
    snprintf(path, size, "%s/last.safetensors", cfg->checkpoint.dir);
}

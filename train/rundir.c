#include "train/rundir.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
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

bool dt_run_dir_holds_checkpoints(const char *dir)
{
    return holds_checkpoints(dir);
}

/* The first runs/NAME-N (N >= 2) that holds no checkpoints, into out. */
static int next_free_dir(const char *base, char *out, size_t size)
{
    char dir[1100];
    for (int n = 2; n < 100000; n++) {
        snprintf(dir, sizeof dir, "%s-%d", base, n);
        if (!holds_checkpoints(dir)) {
            if (strlen(dir) >= size)
                return dt_fail(DT_EUSAGE, "checkpoint.dir: %s is too long", dir);
            memcpy(out, dir, strlen(dir) + 1); /* length checked above */
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

/* ---- temp files: whose they are, and whether their writer is still alive ---- */

/* Field 22 of /proc/PID/stat: the process's start time in clock ticks after boot. After the
 * command name, which may hold spaces and parentheses: so counted from the last ')'. */
static bool process_start(long pid, unsigned long long *start)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    if (!p)
        return false;
    p++; /* fields 3.. follow, one space before each */
    for (int field = 3; field < 22; field++) {
        p = strchr(p + 1, ' ');
        if (!p)
            return false;
    }
    char *end;
    *start = strtoull(p + 1, &end, 10);
    return end != p + 1;
}

static void host_name(char *out, size_t size)
{
    char h[256] = "";
    if (gethostname(h, sizeof h - 1) != 0 || !h[0])
        snprintf(h, sizeof h, "localhost");
    h[sizeof h - 1] = '\0';
    size_t n = 0;
    for (const char *c = h; *c && n + 1 < size; c++)
        out[n++] = isalnum((unsigned char)*c) || *c == '-' || *c == '_' ? *c : '_';
    out[n] = '\0';
}

int dt_run_dir_temp_path(const char *path, char *tmp, size_t size)
{
    char host[128];
    unsigned long long start = 0;
    host_name(host, sizeof host);
    long pid = (long)getpid();
    if (!process_start(pid, &start))
        start = 0; /* no /proc: the lock still tells a live writer */
    const char *slash = strrchr(path, '/');
    int dir_len = slash ? (int)(slash - path + 1) : 0;
    const char *base = slash ? slash + 1 : path;
    int n = snprintf(tmp, size, "%.*s.%s.tmp.%s.%ld.%llu", dir_len, path, base, host, pid, start);
    if (n < 0 || (size_t)n >= size)
        return dt_fail(DT_ERUNTIME, "%s: path too long for its temp file", path);
    return 0;
}

struct temp_name {
    char host[128];
    long pid;
    unsigned long long start;
};

/* ".BASE.tmp.HOST.PID.START" with BASE and HOST not empty, PID and START decimal. */
static bool parse_temp_name(const char *name, struct temp_name *t)
{
    if (name[0] != '.')
        return false;
    const char *tmp = strstr(name + 1, ".tmp.");
    if (!tmp || tmp == name + 1)
        return false;
    const char *host = tmp + 5;
    const char *dot2 = strrchr(host, '.');
    if (!dot2 || dot2 == host)
        return false;
    const char *dot1 = dot2 - 1;
    while (dot1 > host && *dot1 != '.')
        dot1--;
    if (dot1 == host || (size_t)(dot1 - host) >= sizeof t->host)
        return false;
    char *end;
    errno = 0;
    t->pid = strtol(dot1 + 1, &end, 10);
    if (end != dot2 || end == dot1 + 1 || t->pid <= 0 || errno)
        return false;
    t->start = strtoull(dot2 + 1, &end, 10);
    if (*end || end == dot2 + 1 || !isdigit((unsigned char)dot2[1]) || errno)
        return false;
    memcpy(t->host, host, (size_t)(dot1 - host));
    t->host[dot1 - host] = '\0';
    return true;
}

/* What every checkpoint dtrain writes starts with, after the 8-byte header length
 * (nn/checkpoint.c: the metadata first, "format" its first key). */
static const char SAFETENSORS_START[] = "{\"__metadata__\":{\"format\":\"pt\",\"dtrain_version\":";

/* The bytes there agree with the start of a dtrain checkpoint, as far as they go: a write
 * that died early leaves a short file. */
static bool looks_like_checkpoint(int fd)
{
    char buf[8 + sizeof SAFETENSORS_START];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n < 0)
        return false;
    size_t body = (size_t)n > 8 ? (size_t)n - 8 : 0;
    return memcmp(buf + 8, SAFETENSORS_START, body) == 0;
}

/* Opens dir/name and decides whether it is a temp file of a dtrain write whose writer is gone;
 * on true the lock is held and *fd_out is open (the caller removes the file, then closes). */
static bool stale_temp(const char *dir, const char *name, const char *my_host, int *fd_out)
{
    struct temp_name t;
    if (!parse_temp_name(name, &t))
        return false;
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat st;
    bool stale = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && looks_like_checkpoint(fd);
    if (stale) {
        /* The writer holds LOCK_EX for the whole write (util/fileio.h). */
        int lock = flock(fd, LOCK_EX | LOCK_NB) == 0 ? 1 : errno == EWOULDBLOCK ? 0 : -1;
        unsigned long long start;
        if (lock == 0)
            stale = false; /* a writer is at work */
        else if (!strcmp(t.host, my_host))
            stale = !(process_start(t.pid, &start) && (t.start == 0 || start == t.start));
        else
            stale = lock == 1; /* another host's file: its lock is all that can tell */
    }
    if (!stale) {
        close(fd);
        return false;
    }
    *fd_out = fd;
    return true;
}

int dt_run_dir_sweep(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    char host[128];
    host_name(host, sizeof host);
    int n = 0, fd;
    for (struct dirent *e; (e = readdir(d));) {
        if (!stale_temp(dir, e->d_name, host, &fd))
            continue;
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        n += unlink(path) == 0;
        close(fd);
    }
    closedir(d);
    return n;
}

/* ---- the directory ---- */

static int check_dir(const char *checkpoint_dir, bool *holds);

int dt_run_dir_choose(const struct dt_config *cfg, const struct dt_run_dir_opts *o, char *out,
                      size_t size, bool *moved)
{
    *moved = false;
    const char *dir = cfg->checkpoint.dir;
    if (strlen(dir) >= size)
        return dt_fail(DT_EUSAGE, "checkpoint.dir: %s is too long", dir);
    memcpy(out, dir, strlen(dir) + 1);
    if (!o->resume && !o->overwrite && holds_checkpoints(dir)) {
        if (!cfg->checkpoint.dir_default)
            return dt_fail(DT_EUSAGE,
                           "checkpoint.dir %s already holds a run's checkpoints: --overwrite "
                           "replaces them, --resume auto continues that run, or set another "
                           "checkpoint.dir",
                           dir);
        int rc = next_free_dir(dir, out, size);
        if (rc)
            return rc;
        *moved = true;
    }
    bool holds;
    return check_dir(out, &holds);
}

/* "a/b//" -> "a/b" ("/" stays): the walks below cut one component per slash. */
static void strip_trailing_slashes(char *p)
{
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        p[--n] = '\0';
}

/* The outermost directory of dir that does not exist yet ("" when dir exists). */
static void first_missing(const char *dir, char *out, size_t size)
{
    char at[1024];
    snprintf(at, sizeof at, "%s", dir);
    strip_trailing_slashes(at);
    out[0] = '\0';
    struct stat st;
    while (at[0] && stat(at, &st) != 0) {
        snprintf(out, size, "%s", at);
        char *slash = strrchr(at, '/');
        if (!slash || slash == at)
            break;
        *slash = '\0';
    }
}

int dt_run_dir_create(const char *dir, int *stale, char *made, size_t made_size)
{
    *stale = 0;
    first_missing(dir, made, made_size);
    int rc = dt_mkdir_p(dir);
    if (rc)
        return rc;
    if ((rc = probe_write(dir)))
        return rc;
    *stale = dt_run_dir_sweep(dir);
    return 0;
}

void dt_run_dir_remove_if_empty(const char *dir, const char *made)
{
    if (!made[0])
        return;
    char at[1024];
    snprintf(at, sizeof at, "%s", dir);
    strip_trailing_slashes(at);
    size_t top = strlen(made);
    while (strlen(at) >= top && rmdir(at) == 0) {
        char *slash = strrchr(at, '/');
        if (!slash || strlen(at) == top)
            break;
        *slash = '\0';
    }
}

int dt_run_dir_check(const struct dt_config *cfg, bool *holds)
{
    return check_dir(cfg->checkpoint.dir, holds);
}

static int check_dir(const char *checkpoint_dir, bool *holds)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", checkpoint_dir);
    *holds = holds_checkpoints(dir);
    /* The nearest directory that exists decides: it must let us create what is missing. */
    for (;;) {
        struct stat st;
        if (stat(dir, &st) == 0) {
            if (!S_ISDIR(st.st_mode))
                return dt_fail(DT_ERUNTIME, "checkpoint.dir %s: %s is not a directory",
                               checkpoint_dir, dir);
            if (access(dir, W_OK | X_OK) != 0)
                return dt_fail(DT_ERUNTIME, "checkpoint.dir %s: cannot write there: %s",
                               checkpoint_dir, strerror(errno));
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

enum dt_resume_auto dt_run_dir_resume_auto(const struct dt_config *cfg, char *path, size_t size)
{
    static const char *const names[] = {"last.safetensors", "best.safetensors"};
    for (int i = 0; i < 2; i++)
        if (file_exists(cfg->checkpoint.dir, names[i])) {
            snprintf(path, size, "%s/%s", cfg->checkpoint.dir, names[i]);
            return i == 0 ? DT_RESUME_LAST : DT_RESUME_BEST;
        }
    return DT_RESUME_FRESH;
}

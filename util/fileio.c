#include "util/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/err.h"
#include "util/printable.h"

static const char *file_kind(mode_t mode)
{
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO (named pipe)";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    return "a special file";
}

int dt_open_regular(const char *path, FILE **out, uint64_t *size)
{
    *out = NULL;
    char shown[DT_PRINTABLE_MAX]; /* a name with control characters stays one line */
    dt_printable(path, shown, sizeof shown);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return dt_fail(DT_EDATA, "%s: file not found", shown);
        return dt_fail(DT_EDATA, "%s: cannot open: %s", shown, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return dt_fail(DT_EDATA, "%s: cannot stat: %s", shown, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return dt_fail(DT_EDATA, "%s: is %s, not a regular file", shown, file_kind(st.st_mode));
    }
    /* Back to blocking reads: O_NONBLOCK was only for the open of a FIFO. */
    int flags = fcntl(fd, F_GETFL);
    FILE *f = flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 ? NULL : fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        return dt_fail(DT_EDATA, "%s: cannot open: %s", shown, strerror(e));
    }
    if (size)
        *size = (uint64_t)st.st_size;
    *out = f;
    return 0;
}

int dt_read_file_max(const char *path, size_t max_bytes, char **data, size_t *len)
{
    FILE *f;
    uint64_t size;
    char shown[DT_PRINTABLE_MAX];
    dt_printable(path, shown, sizeof shown);
    int rc = dt_open_regular(path, &f, &size);
    if (rc < 0)
        return rc;
    if (size > max_bytes) {
        fclose(f);
        return dt_fail(DT_EDATA, "%s: larger than %zu bytes", shown, max_bytes);
    }
    /* The size is only a hint (the file may grow while read): read at most max_bytes + 1. */
    size_t cap = (size_t)size + 1, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap || n > max_bytes)
            break;
        size_t bigger_cap = cap * 2 > max_bytes + 1 ? max_bytes + 1 : cap * 2;
        char *bigger = realloc(buf, bigger_cap + 1);
        if (!bigger) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap = bigger_cap;
    }
    int read_error = ferror(f);
    fclose(f);
    if (!buf)
        return dt_fail(DT_ERUNTIME, "%s: out of memory reading file", shown);
    if (read_error || n > max_bytes) {
        free(buf);
        if (read_error)
            return dt_fail(DT_EDATA, "%s: read error", shown);
        return dt_fail(DT_EDATA, "%s: larger than %zu bytes", shown, max_bytes);
    }
    buf[n] = 0;
    *data = buf;
    *len = n;
    return 0;
}

int dt_read_file(const char *path, char **data, size_t *len)
{
    return dt_read_file_max(path, DT_READ_FILE_MAX, data, len);
}

int dt_mkdir_p(const char *dir)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s", dir) >= (int)sizeof tmp)
        return dt_fail(DT_ERUNTIME, "%s: path too long", dir);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return dt_fail(DT_ERUNTIME, "%s: cannot create directory: %s", tmp, strerror(errno));
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return dt_fail(DT_ERUNTIME, "%s: cannot create directory: %s", tmp, strerror(errno));
    return 0;
}

int dt_atomic_open(struct dt_atomic_file *af, const char *path)
{
    char tmp[sizeof af->tmp_path];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    return dt_atomic_open_as(af, path, tmp);
}

int dt_atomic_open_as(struct dt_atomic_file *af, const char *path, const char *tmp_path)
{
    memset(af, 0, sizeof *af);
    if (snprintf(af->path, sizeof af->path, "%s", path) >= (int)sizeof af->path ||
        snprintf(af->tmp_path, sizeof af->tmp_path, "%s", tmp_path) >= (int)sizeof af->tmp_path)
        return dt_fail(DT_ERUNTIME, "%s: path too long", path);
    int fd = open(af->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return dt_fail(DT_ERUNTIME, "%s: cannot create its temp file %s: %s", af->path,
                       af->tmp_path, strerror(errno));
    /* Held until the file is closed: a sweep of stale temp files that can take this lock knows
     * the writer is gone (the kernel drops it with the process). Best effort: a filesystem
     * without locks still gets its file. */
    (void)flock(fd, LOCK_EX | LOCK_NB);
    af->f = fdopen(fd, "wb");
    if (!af->f) {
        close(fd);
        unlink(af->tmp_path);
        return dt_fail(DT_ERUNTIME, "%s: fdopen failed", af->tmp_path);
    }
    return 0;
}

static void fsync_parent_dir(const char *path)
{
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", path);
    int dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
}

int dt_atomic_commit(struct dt_atomic_file *af)
{
    if (!af->f)
        return dt_fail(DT_ERUNTIME, "%s: atomic file not open", af->path);
    int failed = fflush(af->f) != 0 || ferror(af->f) || fsync(fileno(af->f)) != 0;
    int saved = errno;
    failed |= fclose(af->f) != 0;
    af->f = NULL;
    if (failed) {
        unlink(af->tmp_path);
        return dt_fail(DT_ERUNTIME, "%s: write failed: %s", af->path, strerror(saved));
    }
    if (rename(af->tmp_path, af->path) != 0) {
        saved = errno;
        unlink(af->tmp_path);
        return dt_fail(DT_ERUNTIME, "%s: rename failed: %s", af->path, strerror(saved));
    }
    fsync_parent_dir(af->path);
    return 0;
}

void dt_atomic_abort(struct dt_atomic_file *af)
{
    if (af->f) {
        fclose(af->f);
        af->f = NULL;
        unlink(af->tmp_path);
    }
}

int dt_write_file_atomic(const char *path, const void *data, size_t len)
{
    return dt_write_file_atomic_as(path, NULL, data, len);
}

int dt_write_file_atomic_as(const char *path, const char *tmp_path, const void *data, size_t len)
{
    struct dt_atomic_file af;
    int rc = tmp_path ? dt_atomic_open_as(&af, path, tmp_path) : dt_atomic_open(&af, path);
    if (rc)
        return rc;
    if (len && fwrite(data, 1, len, af.f) != len) {
        dt_atomic_abort(&af);
        return dt_fail(DT_ERUNTIME, "%s: write failed: %s", path, strerror(errno));
    }
    return dt_atomic_commit(&af);
}

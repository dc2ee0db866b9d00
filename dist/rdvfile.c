/* The one-host rendezvous file; what is trusted and why is in rdvfile.h.
 *
 * A shared /tmp lets any local user create a name first: a predictable file there would hand
 * the ranks' token to whoever planted it, or point them at the wrong port. So the directory is
 * private and checked, and every check is made on the descriptor that is then used (fstat
 * after an O_NOFOLLOW open), never on a path that could be swapped between check and use.
 */
#include "dist/rdvfile.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/err.h"

#define HINT "set XDG_RUNTIME_DIR or TMPDIR to a directory of your own"

/* Opens `path` as a directory this user owns and nobody else may write: the fd, or < 0. */
static int open_private_dir(const char *path, bool create)
{
    if (create && mkdir(path, 0700) < 0 && errno != EEXIST)
        return dt_fail(DT_ERUNTIME, "rendezvous: cannot create %s: %s (%s)", path, strerror(errno),
                       HINT);
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        struct stat l;
        /* O_NOFOLLOW | O_DIRECTORY fails with ENOTDIR on a link too; lstat only names it */
        bool link = (err == ELOOP || err == ENOTDIR) && lstat(path, &l) == 0 && S_ISLNK(l.st_mode);
        return dt_fail(DT_ERUNTIME, "rendezvous: refusing %s: %s (%s)", path,
                       link             ? "it is a symbolic link"
                       : err == ENOTDIR ? "it is not a directory"
                                        : strerror(err),
                       HINT);
    }
    struct stat st;
    const char *why = NULL;
    char buf[96];
    if (fstat(fd, &st) < 0) {
        why = strerror(errno);
    } else if (st.st_uid != geteuid()) {
        snprintf(buf, sizeof buf, "it belongs to uid %u, not to you (uid %u)", (unsigned)st.st_uid,
                 (unsigned)geteuid());
        why = buf;
    } else if (st.st_mode & 022) {
        snprintf(buf, sizeof buf, "its mode 0%03o lets others write to it (chmod 700 it)",
                 (unsigned)(st.st_mode & 0777));
        why = buf;
    }
    if (why) {
        close(fd);
        return dt_fail(DT_ERUNTIME, "rendezvous: refusing directory %s: %s", path, why);
    }
    return fd;
}

/* $XDG_RUNTIME_DIR when it passes the checks (a stale or foreign one is passed over, as its
 * specification asks), else ${TMPDIR:-/tmp}/dtrain-<uid>, created when missing. */
static int private_dir(char *out, size_t cap)
{
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    if (xdg && xdg[0] == '/' && strlen(xdg) < cap) {
        int fd = open_private_dir(xdg, false);
        if (fd >= 0) {
            close(fd);
            snprintf(out, cap, "%s", xdg);
            return 0;
        }
        dt_clear_error();
    }
    const char *tmp = getenv("TMPDIR");
    int n = snprintf(out, cap, "%s/dtrain-%u", tmp && *tmp ? tmp : "/tmp", (unsigned)geteuid());
    if (n < 0 || (size_t)n >= cap)
        return dt_fail(DT_ERUNTIME, "rendezvous: TMPDIR '%s' is too long", tmp);
    int fd = open_private_dir(out, true);
    if (fd < 0)
        return fd;
    close(fd);
    return 0;
}

int dt_rdvfile_path(const char *key, char *out, size_t cap)
{
    char dir[256], safe[128];
    int rc = private_dir(dir, sizeof dir);
    if (rc < 0)
        return rc;
    /* The key is the launcher's: keep it to characters a file name takes. */
    size_t n = 0;
    for (const char *k = key; *k && n + 1 < sizeof safe; k++)
        safe[n++] = isalnum((unsigned char)*k) || *k == '-' || *k == '.' ? *k : '_';
    safe[n] = '\0';
    n = (size_t)snprintf(out, cap, "%s/dtrain-rdv-%s", dir, safe);
    return n < cap
               ? 0
               : dt_fail(DT_ERUNTIME, "rendezvous: path %s/dtrain-rdv-%s is too long", dir, safe);
}

/* Splits path into its directory (opened and checked) and its last component. */
static int open_parent(const char *path, const char **name)
{
    const char *slash = strrchr(path, '/');
    char dir[256];
    if (!slash || slash == path || (size_t)(slash - path) >= sizeof dir)
        return dt_fail(DT_ERUNTIME, "rendezvous: '%s' is not a path in a directory", path);
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = '\0';
    *name = slash + 1;
    return open_private_dir(dir, false);
}

/* The file must be this user's own regular file that nobody else may read or write. */
static int check_file(const char *path, const struct stat *st)
{
    if (S_ISLNK(st->st_mode))
        return dt_fail(DT_ERUNTIME, "rendezvous: refusing %s: it is a symbolic link", path);
    if (!S_ISREG(st->st_mode))
        return dt_fail(DT_ERUNTIME, "rendezvous: refusing %s: it is not a regular file", path);
    if (st->st_uid != geteuid())
        return dt_fail(DT_ERUNTIME,
                       "rendezvous: refusing %s: it belongs to uid %u, not to you (uid %u)", path,
                       (unsigned)st->st_uid, (unsigned)geteuid());
    if (st->st_mode & 077)
        return dt_fail(DT_ERUNTIME,
                       "rendezvous: refusing %s: its mode 0%03o lets others read or write it "
                       "(dtrain writes it 0600)",
                       path, (unsigned)(st->st_mode & 0777));
    return 0;
}

int dt_rdvfile_publish(const char *path, int port, const char *hex)
{
    const char *name = NULL;
    int dfd = open_parent(path, &name);
    if (dfd < 0)
        return dfd;
    struct stat st;
    int rc = 0;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
        rc = check_file(path, &st); /* a stale file of ours is replaced, anything else refused */
    char tmp[300], line[128];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", name, (int)getpid());
    int len = snprintf(line, sizeof line, "%d %d %s\n", (int)getpid(), port, hex);
    int fd = -1;
    if (rc == 0) {
        (void)unlinkat(dfd, tmp, 0); /* our own pid's leftover: only this process writes it */
        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        bool ok = fd >= 0 && write(fd, line, (size_t)len) == len;
        int err = errno;
        if (fd >= 0)
            close(fd);
        if (!ok || renameat(dfd, tmp, dfd, name) != 0) {
            err = ok ? errno : err;
            (void)unlinkat(dfd, tmp, 0);
            rc = dt_fail(DT_ERUNTIME, "rendezvous: cannot write %s: %s", path, strerror(err));
        }
    }
    close(dfd);
    return rc;
}

int dt_rdvfile_read(const char *path, int *port, char hex[DT_RDVFILE_HEX_MAX + 2])
{
    const char *name = NULL;
    int dfd = open_parent(path, &name);
    if (dfd < 0)
        return dfd;
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    int err = errno;
    close(dfd);
    if (fd < 0) {
        if (err == ENOENT)
            return 1;
        return dt_fail(DT_ERUNTIME, "rendezvous: refusing %s: %s", path,
                       err == ELOOP ? "it is a symbolic link" : strerror(err));
    }
    struct stat st;
    int rc = fstat(fd, &st) < 0 ? dt_fail(DT_ERUNTIME, "rendezvous: %s: %s", path, strerror(errno))
                                : check_file(path, &st);
    char buf[160];
    ssize_t n = rc == 0 ? read(fd, buf, sizeof buf - 1) : 0;
    close(fd);
    if (rc < 0)
        return rc;
    buf[n > 0 ? n : 0] = '\0';
    int pid = 0, p = 0;
    char fmt[32];
    snprintf(fmt, sizeof fmt, "%%d %%d %%%ds", DT_RDVFILE_HEX_MAX + 1);
    /* A file from a job that is gone (rank 0 SIGKILLed before it could remove it) is not read:
     * the live rank 0 of this job will replace it. */
    if (sscanf(buf, fmt, &pid, &p, hex) != 3 || pid <= 0 || kill(pid, 0) != 0 || p <= 0 ||
        p > 65535)
        return 1;
    *port = p;
    return 0;
}

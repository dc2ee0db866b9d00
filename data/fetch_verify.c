/* A fetched file's last step: the part file is checked against the registry's checksums (or,
 * with --trust / --sha256, against the user's word, recorded in a trust record beside it) and
 * only then renamed to its final name, fsync'd first so that a crash never leaves a final name
 * on unverified or torn bytes. A part file that fails is deleted. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "data/fetch_job.h"
#include "util/err.h"
#include "util/fileio.h"
#include "util/log.h"

static void fsync_path(const char *path, int flags)
{
    int fd = open(path, flags | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

int dt_fetch_promote(struct dt_fetch_job *j)
{
    fsync_path(j->part, O_RDONLY);
    if (rename(j->part, j->final) != 0)
        return dt_fail(DT_ERUNTIME, "%s: cannot rename into place: %s", j->final, strerror(errno));
    fsync_path(j->o->dir, O_RDONLY | O_DIRECTORY);
    return 0;
}

static int copy_fd(int in, int out, const char *src, const char *dst)
{
    char buf[1 << 16];
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return dt_fail(DT_EDATA, "%s: read error: %s", src, strerror(errno));
        if (n == 0)
            return 0;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(out, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                return dt_fail(DT_ERUNTIME, "%s: write failed: %s", dst,
                               strerror(w < 0 ? errno : EIO));
            off += w;
        }
    }
}

int dt_fetch_copy_to_part(const char *src, const char *part)
{
    /* The shared opener: a source replaced by a FIFO or a device since it was checked is
     * refused, not waited on. */
    FILE *in;
    int rc = dt_open_regular(src, &in, NULL);
    if (rc)
        return rc;
    int out = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) {
        fclose(in);
        return dt_fail(DT_ERUNTIME, "%s: cannot write: %s", part, strerror(errno));
    }
    rc = copy_fd(fileno(in), out, src, part);
    fclose(in);
    if (close(out) != 0 && !rc)
        rc = dt_fail(DT_ERUNTIME, "%s: write failed: %s", part, strerror(errno));
    if (rc)
        unlink(part);
    return rc;
}

int dt_fetch_check_vouched(const struct dt_fetch_job *j, const char *path, const char *label,
                           struct dt_digests *d)
{
    int rc = dt_checksum_file(path, 1, d);
    if (rc || !j->o->sha256 || dt_hex_equal(j->o->sha256, d->sha256))
        return rc;
    return dt_fail(DT_EDATA,
                   "%s: checksum mismatch: expected sha256 %s (--sha256), found sha256 %s", label,
                   j->o->sha256, d->sha256);
}

/* The registry's checksums did not match (the error says how): with --trust or --sha256 the
 * file is accepted on the user's word, if it is whole (a gzip stream must inflate to its end
 * with good CRCs), and its SHA-256 is recorded beside the final name. */
static int trust_part(struct dt_fetch_job *j, const char *label, enum dt_match *m)
{
    char registry[1200];
    snprintf(registry, sizeof registry, "%s", dt_last_error());
    struct dt_digests d;
    int rc = dt_fetch_check_vouched(j, j->part, label, &d);
    if (rc)
        return rc;
    if (d.content_too_large) /* what the registry check said is the cause: not a corrupt stream */
        return dt_fail(DT_EDATA, "%s; not trusted", registry);
    if (d.is_gzip && !d.gzip_ok)
        return dt_fail(DT_EDATA, "%s: corrupt gzip stream (truncated or bad CRC); not trusted",
                       label);
    if ((rc = dt_trust_write(j->final, d.sha256)))
        return rc;
    dt_log_warn("%s; accepted on your word (%s): SHA-256 %s recorded in %s" DT_TRUST_SUFFIX,
                registry, j->o->sha256 ? "--sha256" : "--trust", d.sha256, j->final);
    *m = DT_MATCH_TRUSTED;
    return 0;
}

/* A --from copy the registry does not know: the way to take it anyway. */
static int trust_hint(void)
{
    char why[1100];
    snprintf(why, sizeof why, "%s", dt_last_error());
    return dt_fail(DT_EDATA, "%s (a copy you vouch for: add --trust, or --sha256 HEX)", why);
}

int dt_fetch_verify_and_promote(struct dt_fetch_job *j, const char *source, const char *kind,
                                const char *how)
{
    enum dt_match m;
    char label[DT_FETCH_PATH_CAP + 300];
    snprintf(label, sizeof label, "%s (from %s)", j->f->name, source);
    int rc = dt_checksum_verify(j->part, j->f, label, &m);
    struct dt_digests d;
    if (rc == 0 && j->o->sha256)
        rc = dt_fetch_check_vouched(j, j->part, label, &d);
    else if (rc == -DT_EDATA && (j->o->trust || j->o->sha256))
        rc = trust_part(j, label, &m);
    else if (rc == -DT_EDATA && !strcmp(kind, "from") && strstr(dt_last_error(), "mismatch"))
        rc = trust_hint();
    if (rc) {
        unlink(j->part);
        return rc;
    }
    if (m != DT_MATCH_TRUSTED)
        dt_trust_remove(j->final); /* the registry's own copy needs no record */
    rc = dt_fetch_promote(j);
    if (rc)
        return rc;
    dt_fetch_report_verified(j, how, m);
    dt_fetch_json_file_done(j, kind, m);
    return 0;
}

/* `dtrain fetch`: puts a dataset where `train` looks for it, verified, resumable, offline-able.
 *
 * For each file of a registry entry the sources are tried in a fixed order:
 *   1. the file already under its final name, if it verifies (unless --force);
 *   2. --from DIR, or --from FILE for a one-file dataset (exclusive: no other source is tried);
 *   3. the distribution's copy (registry system_dir), unless --no-system-copies;
 *   4. the mirrors: --mirror URLs, then DTRAIN_MIRROR, then the registry's own, each retried
 *      with exponential backoff; --offline keeps only file:// mirrors.
 * Everything lands in "<file>.part" first and is renamed to the final name only after it
 * verified against a published checksum, so the final name never holds an unverified file.
 * A failed download keeps its .part for the next run to resume; a checksum mismatch deletes it.
 * The one exception to "a published checksum": --trust (with --from) and --sha256 HEX accept a
 * file the registry does not know, on the user's word, and record its SHA-256 beside it
 * (FILE.sha256, data/checksum.h) so that later runs, --verify and --list accept it too.
 *
 * Output: human lines on stderr (a live bar per file when stderr is a terminal), --json events
 * on stdout (one object per line), nothing but errors with --quiet. The error itself is left in
 * dt_last_error() for main.c to print once.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/cli.h"
#include "cmd/cmd.h"
#include "data/checksum.h"
#include "data/download.h"
#include "data/registry.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/fileio.h"
#include "util/json.h"
#include "util/log.h"

#define MAX_MIRRORS 32
#define PATH_CAP    4096
/* The cap on a file with no published size: three times the largest dataset file we know. */
#define DT_FETCH_UNSIZED_MAX ((uint64_t)512 << 20)

struct fetch_opts {
    const char *name, *dir, *from, *registry;
    const char *sha256; /* --sha256: the one file's SHA-256, vouched for by the user */
    bool trust;         /* --trust: accept what --from gives even when the registry differs */
    bool from_file;     /* --from names the archive itself (a one-file dataset) */
    const char *mirrors[MAX_MIRRORS]; /* --mirror, then DTRAIN_MIRROR */
    int nmirrors;
    char *env_mirrors;      /* owned copy of DTRAIN_MIRROR that mirrors[] points into */
    char dir_buf[PATH_CAP]; /* the default dir, when --dir is not given */
    bool list, verify, force, quiet, json, offline, no_system;
    int retries;
    double retry_delay;
    long connect_timeout, stall_timeout;
    long deadline;     /* --deadline, seconds per transfer; 0 = from the published size */
    uint64_t max_size; /* --max-size: the cap on a file whose size is not published */
};

/* Per-file state shared with the progress callback. */
struct file_job {
    const struct fetch_opts *o;
    const struct dt_reg_dataset *ds;
    const struct dt_reg_file *f;
    char final[PATH_CAP], part[PATH_CAP];
    double start, last_draw, last_json, last_plain;
    bool bar_drawn;
    bool tty; /* stderr is a terminal and not --quiet: draw a live bar */
};

/* ---- output ---- */

static void format_bytes(uint64_t n, char *buf, size_t cap)
{
    if (n >= 1000000000ull)
        snprintf(buf, cap, "%.2f GB", (double)n / 1e9);
    else if (n >= 1000000)
        snprintf(buf, cap, "%.1f MB", (double)n / 1e6);
    else if (n >= 1000)
        snprintf(buf, cap, "%.1f kB", (double)n / 1e3);
    else
        snprintf(buf, cap, "%llu B", (unsigned long long)n);
}

static void format_eta(double s, char *buf, size_t cap)
{
    if (!isfinite(s) || s < 0 || s > 359999)
        snprintf(buf, cap, "--:--");
    else if (s >= 3600)
        snprintf(buf, cap, "%d:%02d:%02d", (int)s / 3600, (int)s / 60 % 60, (int)s % 60);
    else
        snprintf(buf, cap, "%02d:%02d", (int)s / 60, (int)s % 60);
}

static void json_emit(struct dt_json_writer *w)
{
    dt_jw_end(w, stdout);
    fflush(stdout);
}

static void json_file_start(const struct file_job *j, const char *kind, const char *source,
                            uint64_t offset)
{
    if (!j->o->json)
        return;
    struct dt_json_writer w;
    dt_jw_begin(&w, "file_start");
    dt_jw_str(&w, "dataset", j->ds->name);
    dt_jw_str(&w, "file", j->f->name);
    dt_jw_str(&w, "kind", kind);
    dt_jw_str(&w, "source", source);
    dt_jw_int(&w, "offset", (long long)offset);
    dt_jw_int(&w, "size", (long long)j->f->size);
    json_emit(&w);
}

static void json_file_done(const struct file_job *j, const char *source, enum dt_match m)
{
    if (!j->o->json)
        return;
    struct stat st;
    struct dt_json_writer w;
    dt_jw_begin(&w, "file_done");
    dt_jw_str(&w, "dataset", j->ds->name);
    dt_jw_str(&w, "file", j->f->name);
    dt_jw_str(&w, "path", j->final);
    dt_jw_int(&w, "bytes", stat(j->final, &st) == 0 ? (long long)st.st_size : 0);
    dt_jw_str(&w, "source", source);
    dt_jw_str(&w, "matched", dt_match_name(m));
    json_emit(&w);
}

static void clear_bar(struct file_job *j)
{
    if (j->bar_drawn)
        fputs("\r\033[K", stderr);
    j->bar_drawn = false;
}

static void draw_bar(struct file_job *j, uint64_t have, uint64_t total, double rate)
{
    char got[32], all[32], speed[32], eta[32], bar[21];
    format_bytes(have, got, sizeof got);
    format_bytes(total, all, sizeof all);
    format_bytes((uint64_t)rate, speed, sizeof speed);
    double frac = total ? (double)have / (double)total : 0;
    if (frac > 1)
        frac = 1;
    int filled = (int)(frac * 20);
    for (int i = 0; i < 20; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[20] = 0;
    format_eta(rate > 0 && total > have ? (double)(total - have) / rate : NAN, eta, sizeof eta);
    fprintf(stderr, "\r\033[K%-28.28s [%s] %9s / %-9s %3d%% %9s/s ETA %s", j->f->name, bar, got,
            total ? all : "?", (int)(frac * 100), speed, eta);
    fflush(stderr);
    j->bar_drawn = true;
}

static void on_progress(void *ctx, uint64_t have, uint64_t total, uint64_t resumed)
{
    struct file_job *j = ctx;
    double now = dt_now(), elapsed = now - j->start;
    double rate = elapsed > 0 ? (double)(have - resumed) / elapsed : 0;
    if (!total)
        total = j->f->size;
    if (j->tty && now - j->last_draw >= 0.1) {
        j->last_draw = now;
        draw_bar(j, have, total, rate);
    } else if (!j->tty && now - j->last_plain >= 10) {
        j->last_plain = now;
        char got[32], all[32];
        format_bytes(have, got, sizeof got);
        format_bytes(total, all, sizeof all);
        dt_log_info("%s: %s of %s", j->f->name, got, total ? all : "?");
    }
    if (j->o->json && now - j->last_json >= 1.0) {
        j->last_json = now;
        struct dt_json_writer w;
        dt_jw_begin(&w, "progress");
        dt_jw_str(&w, "dataset", j->ds->name);
        dt_jw_str(&w, "file", j->f->name);
        dt_jw_int(&w, "bytes", (long long)have);
        dt_jw_int(&w, "total", (long long)total);
        dt_jw_num(&w, "rate", rate);
        json_emit(&w);
    }
}

/* ---- files ---- */

static bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static long long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static int join_path(char *out, const char *dir, const char *name, const char *suffix)
{
    if (snprintf(out, PATH_CAP, "%s/%s%s", dir, name, suffix) >= PATH_CAP)
        return dt_fail(DT_EUSAGE, "%s/%s: path too long", dir, name);
    return 0;
}

static void fsync_path(const char *path, int flags)
{
    int fd = open(path, flags | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* The verified part file becomes the final file: data on disk first, then the name. */
static int promote(struct file_job *j)
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

/* Copies src over the part file (never appends: a local copy is cheap to redo). */
static int copy_to_part(const char *src, const char *part)
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

static void report_verified(const struct file_job *j, const char *how, enum dt_match m)
{
    if (m == DT_MATCH_UNCHECKED)
        dt_log_info("%s: %s; no published checksum, size/format checked only", j->f->name, how);
    else if (m == DT_MATCH_TRUSTED)
        dt_log_info("%s: %s; trusted (its SHA-256 is the one recorded in %s" DT_TRUST_SUFFIX
                    ", not the registry's)",
                    j->f->name, how, j->f->name);
    else if (m == DT_MATCH_CONTENT_SHA256)
        dt_log_info("%s: %s; verified (content SHA-256 matched, archive repackaged)", j->f->name,
                    how);
    else
        dt_log_info("%s: %s; verified (%s matched)", j->f->name, how,
                    m == DT_MATCH_MD5 ? "MD5" : "SHA-256");
}

/* --sha256: the file must be the one the user vouched for, whatever the registry says. */
static int check_vouched(const struct file_job *j, const char *path, const char *label,
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
static int trust_part(struct file_job *j, const char *label, enum dt_match *m)
{
    char registry[1200];
    snprintf(registry, sizeof registry, "%s", dt_last_error());
    struct dt_digests d;
    int rc = check_vouched(j, j->part, label, &d);
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

/* Verifies the part file and renames it into place; a bad part file is deleted. */
static int verify_and_promote(struct file_job *j, const char *source, const char *kind,
                              const char *how)
{
    enum dt_match m;
    char label[PATH_CAP + 300];
    snprintf(label, sizeof label, "%s (from %s)", j->f->name, source);
    int rc = dt_checksum_verify(j->part, j->f, label, &m);
    struct dt_digests d;
    if (rc == 0 && j->o->sha256)
        rc = check_vouched(j, j->part, label, &d);
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
    rc = promote(j);
    if (rc)
        return rc;
    report_verified(j, how, m);
    json_file_done(j, kind, m);
    return 0;
}

/* ---- sources ---- */

static int copy_from(struct file_job *j, const char *src, const char *kind)
{
    if (!file_exists(src))
        return dt_fail(DT_EDATA, "%s: missing", src);
    json_file_start(j, "copy", src, 0);
    int rc = copy_to_part(src, j->part);
    if (rc)
        return rc;
    char how[PATH_CAP + 32];
    snprintf(how, sizeof how, "copied from %s", src);
    return verify_and_promote(j, src, kind, how);
}

static int try_local_copy(struct file_job *j, const char *dir, const char *kind)
{
    char src[PATH_CAP];
    int rc = join_path(src, dir, j->f->name, "");
    return rc ? rc : copy_from(j, src, kind);
}

static void mirror_url(char *url, size_t cap, const char *base, const char *name)
{
    size_t len = strlen(base);
    snprintf(url, cap, "%s%s%s", base, len && base[len - 1] == '/' ? "" : "/", name);
}

static void note_failure(char *errors, size_t cap)
{
    size_t len = strlen(errors);
    snprintf(errors + len, cap - len, "%s%s", len ? "; " : "", dt_last_error());
}

static double backoff(const struct fetch_opts *o, int attempt)
{
    return o->retry_delay * pow(2.0, attempt);
}

/* One URL with retries. 1 = try the next mirror, 0 = done, <0 = stop. */
static int try_url(struct file_job *j, const char *url, char *errors, size_t cap)
{
    /* Bounded by what the registry publishes: no more bytes than the file's size, and no
     * longer than it takes at 50 KB/s plus a minute (a dripping body beats the stall check).
     * A file with no published size gets --max-size in its place for both. */
    uint64_t max = j->f->size ? j->f->size : j->o->max_size;
    long deadline = j->o->deadline ? j->o->deadline : 60 + (long)(max / 50000);
    struct dt_dl_options dl = {.connect_timeout_s = j->o->connect_timeout,
                               .stall_time_s = j->o->stall_timeout,
                               .stall_bytes_per_s = 1,
                               .max_bytes = max,
                               .max_is_cap = !j->f->size,
                               .deadline_s = deadline,
                               .progress = on_progress,
                               .progress_ctx = j};
    if (!j->f->size)
        dt_log_info("%s: no published size: at most %llu bytes, within %ld s (--max-size, "
                    "--deadline)",
                    j->f->name, (unsigned long long)max, deadline);
    for (int attempt = 0; attempt <= j->o->retries; attempt++) {
        long long have = file_size(j->part);
        dt_log_info("%s: %s %s", j->f->name, have > 0 ? "resuming" : "downloading", url);
        json_file_start(j, "download", url, have > 0 ? (uint64_t)have : 0);
        j->start = dt_now();
        j->last_draw = j->last_json = j->last_plain = j->start;
        struct dt_dl_result res;
        int rc = dt_download(url, j->part, &dl, &res);
        clear_bar(j);
        if (rc == 0) {
            char how[128], got[32], kept[32];
            format_bytes(res.received, got, sizeof got);
            format_bytes(res.resumed, kept, sizeof kept);
            snprintf(how, sizeof how, "%s in %.1f s%s%s", got, dt_now() - j->start,
                     res.resumed ? " after the first " : "", res.resumed ? kept : "");
            return verify_and_promote(j, url, url, how);
        }
        if (res.failure == DT_DL_FATAL)
            return rc;
        if (res.failure == DT_DL_NEXT || attempt == j->o->retries) {
            note_failure(errors, cap);
            return 1;
        }
        double wait = backoff(j->o, attempt);
        dt_log_warn("%s; retrying in %.1f s", dt_last_error(), wait);
        dt_sleep(wait);
    }
    return 1;
}

/* The mirrors in order: --mirror, DTRAIN_MIRROR, then the registry's. */
static int mirror_list(const struct file_job *j, const char **out)
{
    int n = 0;
    for (int i = 0; i < j->o->nmirrors && n < MAX_MIRRORS; i++)
        out[n++] = j->o->mirrors[i];
    for (int i = 0; i < DT_REG_MAX_MIRRORS && j->ds->mirrors[i] && n < MAX_MIRRORS; i++)
        out[n++] = j->ds->mirrors[i];
    return n;
}

static int try_mirrors(struct file_job *j)
{
    const char *mirrors[MAX_MIRRORS];
    int n = mirror_list(j, mirrors), tried = 0;
    char errors[2048] = "";
    for (int i = 0; i < n; i++) {
        if (j->o->offline && dt_url_is_remote(mirrors[i]))
            continue;
        char url[PATH_CAP];
        mirror_url(url, sizeof url, mirrors[i], j->f->name);
        tried++;
        int rc = try_url(j, url, errors, sizeof errors);
        if (rc <= 0)
            return rc;
        if (i + 1 < n)
            dt_log_warn("%s; trying the next mirror", dt_last_error());
    }
    if (!tried && j->o->offline)
        return dt_fail(DT_EDATA,
                       "%s: not available offline (no file present, no system copy, no file:// "
                       "mirror; try --from DIR or --mirror file:///DIR)",
                       j->f->name);
    if (!tried)
        return dt_fail(DT_EDATA, "%s: no mirror known for this file (use --mirror URL)",
                       j->f->name);
    return dt_fail(DT_ERUNTIME, "%s: download failed from every mirror: %s", j->f->name, errors);
}

static int try_system_copy(struct file_job *j)
{
    const char *sys = j->ds->system_dir;
    char src[PATH_CAP];
    if (j->o->no_system || !sys || join_path(src, sys, j->f->name, "") || !file_exists(src))
        return 1;
    int rc = try_local_copy(j, sys, "system");
    if (rc == 0)
        return 0;
    if (rc != -DT_EDATA)
        return rc;
    dt_log_warn("%s; ignoring the system copy", dt_last_error());
    return 1;
}

/* The file under its final name: 0 = present and verified, 1 = fetch it. */
static int check_present(struct file_job *j)
{
    if (j->o->force || !file_exists(j->final))
        return 1;
    enum dt_match m;
    struct dt_digests d;
    if (dt_checksum_verify(j->final, j->f, j->f->name, &m) == 0 &&
        (!j->o->sha256 || check_vouched(j, j->final, j->f->name, &d) == 0)) {
        report_verified(j, "already present", m);
        json_file_done(j, "present", m);
        return 0;
    }
    dt_log_warn("%s; fetching it again", dt_last_error());
    return 1;
}

/* A part file from an earlier run may be complete (its size is the published one, or the size
 * is unknown): keep it if it verifies. One of unknown size that does not verify may just be
 * partial, so it stays for a resume; one of known size that does not verify is discarded. */
static int check_complete_part(struct file_job *j)
{
    long long have = file_size(j->part);
    if (have <= 0 || (j->f->size && (size_t)have < j->f->size))
        return 1;
    enum dt_match m;
    if ((!j->f->size || (size_t)have == j->f->size) &&
        dt_checksum_verify(j->part, j->f, j->f->name, &m) == 0) {
        int rc = promote(j);
        if (!rc) {
            report_verified(j, "completed earlier", m);
            json_file_done(j, "part", m);
        }
        return rc;
    }
    dt_clear_error();
    /* Of unknown size, one that reached --max-size cannot be resumed into anything valid. */
    if (j->f->size || (uint64_t)have >= j->o->max_size)
        unlink(j->part);
    return 1;
}

static int fetch_file(struct file_job *j)
{
    int rc = check_present(j);
    if (rc <= 0)
        return rc;
    if (j->o->force)
        unlink(j->part);
    if (j->o->from)
        return j->o->from_file ? copy_from(j, j->o->from, "from")
                               : try_local_copy(j, j->o->from, "from");
    if ((rc = try_system_copy(j)) <= 0)
        return rc;
    if ((rc = check_complete_part(j)) <= 0)
        return rc;
    return try_mirrors(j);
}

/* ---- the dataset ---- */

static int prepare_dir(const char *dir)
{
    int rc = dt_mkdir_p(dir);
    if (rc)
        return rc;
    if (access(dir, W_OK) != 0)
        return dt_fail(DT_ERUNTIME, "%s: directory is not writable: %s", dir, strerror(errno));
    return 0;
}

static int init_job(struct file_job *j, const struct fetch_opts *o, const struct dt_reg_dataset *ds,
                    int i)
{
    memset(j, 0, sizeof *j);
    j->o = o;
    j->ds = ds;
    j->f = &ds->files[i];
    j->tty = dt_log_is_tty();
    int rc = join_path(j->final, o->dir, j->f->name, "");
    return rc ? rc : join_path(j->part, o->dir, j->f->name, ".part");
}

static void json_dataset_done(const struct fetch_opts *o, const struct dt_reg_dataset *ds,
                              const char *event)
{
    if (!o->json)
        return;
    struct dt_json_writer w;
    dt_jw_begin(&w, event);
    dt_jw_str(&w, "dataset", ds->name);
    dt_jw_str(&w, "dir", o->dir);
    dt_jw_int(&w, "files", ds->nfiles);
    json_emit(&w);
}

/* A fetch that got nothing leaves nothing: no 0-byte .part files, and no directory it made
 * that stayed empty (a part with bytes stays, for the next run to resume). */
static void tidy_failed(const struct fetch_opts *o, const struct dt_reg_dataset *ds, bool made)
{
    for (int i = 0; i < ds->nfiles; i++) {
        char part[4200];
        struct stat st;
        if (join_path(part, o->dir, ds->files[i].name, ".part") == 0 && stat(part, &st) == 0 &&
            st.st_size == 0)
            unlink(part);
    }
    if (made)
        rmdir(o->dir); /* only succeeds when empty */
}

static int fetch_dataset(const struct fetch_opts *o, const struct dt_reg_dataset *ds)
{
    struct stat st;
    bool made = stat(o->dir, &st) != 0;
    int rc = prepare_dir(o->dir);
    for (int i = 0; i < ds->nfiles && !rc; i++) {
        struct file_job j;
        rc = init_job(&j, o, ds, i);
        if (!rc)
            rc = fetch_file(&j);
    }
    if (rc) {
        tidy_failed(o, ds, made);
        char why[600];
        snprintf(why, sizeof why, "%s", dt_last_error());
        if (dt_exit_code(rc) == DT_ERUNTIME && strstr(why, "every mirror"))
            rc = dt_fail(DT_ERUNTIME,
                         "%s; offline? `dtrain fetch %s --from FILE` takes a copy you have, "
                         "--mirror URL (or DTRAIN_MIRROR) a reachable one",
                         why, ds->name);
        return rc;
    }
    dt_log_info("%s: %d file%s ready in %s", ds->name, ds->nfiles, ds->nfiles == 1 ? "" : "s",
                o->dir);
    json_dataset_done(o, ds, "dataset_done");
    return 0;
}

static void json_verified(const struct file_job *j, bool ok, enum dt_match m)
{
    if (!j->o->json)
        return;
    struct dt_json_writer w;
    dt_jw_begin(&w, "file_verified");
    dt_jw_str(&w, "dataset", j->ds->name);
    dt_jw_str(&w, "file", j->f->name);
    dt_jw_bool(&w, "ok", ok);
    if (ok)
        dt_jw_str(&w, "matched", dt_match_name(m));
    else
        dt_jw_str(&w, "error", dt_last_error());
    json_emit(&w);
}

/* --verify: every file must be present and match; all are checked, the last failure is
 * returned and earlier ones are logged. */
static int verify_dataset(const struct fetch_opts *o, const struct dt_reg_dataset *ds)
{
    int failed = 0, rc = 0;
    for (int i = 0; i < ds->nfiles; i++) {
        struct file_job j;
        int jrc = init_job(&j, o, ds, i);
        if (jrc)
            return jrc;
        enum dt_match m = DT_MATCH_NONE;
        int frc = file_exists(j.final) ? dt_checksum_verify(j.final, j.f, j.final, &m)
                                       : dt_fail(DT_EDATA, "%s: missing", j.final);
        json_verified(&j, frc == 0, m);
        if (frc == 0) {
            report_verified(&j, "present", m);
            continue;
        }
        if (failed++)
            dt_log_error("%s", dt_last_error()); /* not the one main.c will print */
        rc = frc;
    }
    if (failed > 1)
        return dt_fail_context(rc, "%s: %d of %d files failed verification", ds->name, failed,
                               ds->nfiles);
    if (!failed) {
        dt_log_info("%s: all %d files verified in %s", ds->name, ds->nfiles, o->dir);
        json_dataset_done(o, ds, "dataset_verified");
    }
    return rc;
}

/* ---- --list ---- */

/* "verified", "trusted", "missing", "partial", "corrupt". */
static const char *dataset_status(const struct dt_reg_dataset *ds, const char *dir)
{
    int present = 0, good = 0, trusted = 0;
    for (int i = 0; i < ds->nfiles; i++) {
        char path[PATH_CAP];
        enum dt_match m;
        if (join_path(path, dir, ds->files[i].name, "") || !file_exists(path))
            continue;
        present++;
        good += dt_checksum_verify(path, &ds->files[i], NULL, &m) == 0;
        trusted += m == DT_MATCH_TRUSTED;
    }
    dt_clear_error();
    if (good == ds->nfiles)
        return trusted ? "trusted" : "verified";
    if (good < present)
        return "corrupt";
    return present ? "partial" : "missing";
}

static bool has_system_copy(const struct dt_reg_dataset *ds)
{
    char path[PATH_CAP];
    return ds->system_dir && !join_path(path, ds->system_dir, ds->files[0].name, "") &&
           file_exists(path);
}

static uint64_t dataset_bytes(const struct dt_reg_dataset *ds)
{
    uint64_t total = 0;
    for (int i = 0; i < ds->nfiles; i++) {
        if (!ds->files[i].size)
            return 0;
        total += ds->files[i].size;
    }
    return total;
}

static void list_one(const struct fetch_opts *o, const struct dt_reg_dataset *ds, const char *root)
{
    char dir[PATH_CAP], size[32];
    if (join_path(dir, root, ds->name, ""))
        return;
    const char *status = dataset_status(ds, dir);
    bool sys = !o->no_system && has_system_copy(ds);
    uint64_t bytes = dataset_bytes(ds);
    format_bytes(bytes, size, sizeof size);
    if (o->json) {
        struct dt_json_writer w;
        dt_jw_begin(&w, "dataset");
        dt_jw_str(&w, "name", ds->name);
        dt_jw_str(&w, "format", ds->format);
        dt_jw_int(&w, "files", ds->nfiles);
        dt_jw_int(&w, "bytes", (long long)bytes);
        dt_jw_str(&w, "status", status);
        dt_jw_str(&w, "dir", dir);
        dt_jw_bool(&w, "system_copy", sys);
        json_emit(&w);
        return;
    }
    printf("%-15s %-9s %-9s %-10s %s%s\n", ds->name, ds->format, bytes ? size : "?", status,
           ds->description, sys ? " [system copy available]" : "");
}

static int list_datasets(const struct fetch_opts *o)
{
    const char *root = o->dir ? o->dir : dt_data_root();
    size_t n;
    const struct dt_reg_dataset *all = dt_registry_all(&n);
    if (!o->json)
        printf("%-15s %-9s %-9s %-10s %s\n", "NAME", "FORMAT", "SIZE", "STATUS", "DESCRIPTION");
    for (size_t i = 0; i < n; i++)
        list_one(o, &all[i], root);
    if (!o->json)
        printf("(status of the files in %s/<name>)\n", root);
    fflush(stdout);
    return 0;
}

/* ---- options ---- */

enum {
    OPT_MIRROR = 256,
    OPT_FROM,
    OPT_OFFLINE,
    OPT_NO_SYSTEM,
    OPT_REGISTRY,
    OPT_RETRIES,
    OPT_RETRY_DELAY,
    OPT_CONNECT_TIMEOUT,
    OPT_STALL_TIMEOUT,
    OPT_DEADLINE,
    OPT_MAX_SIZE,
    OPT_JSON,
    OPT_TRUST,
    OPT_SHA256,
};

static const struct option long_opts[] = {
    {"dir", required_argument, NULL, 'd'},
    {"list", no_argument, NULL, 'l'},
    {"verify", no_argument, NULL, 'V'},
    {"force", no_argument, NULL, 'f'},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {"json", no_argument, NULL, OPT_JSON},
    {"mirror", required_argument, NULL, OPT_MIRROR},
    {"from", required_argument, NULL, OPT_FROM},
    {"offline", no_argument, NULL, OPT_OFFLINE},
    {"no-system-copies", no_argument, NULL, OPT_NO_SYSTEM},
    {"registry", required_argument, NULL, OPT_REGISTRY},
    {"retries", required_argument, NULL, OPT_RETRIES},
    {"retry-delay", required_argument, NULL, OPT_RETRY_DELAY},
    {"connect-timeout", required_argument, NULL, OPT_CONNECT_TIMEOUT},
    {"stall-timeout", required_argument, NULL, OPT_STALL_TIMEOUT},
    {"deadline", required_argument, NULL, OPT_DEADLINE},
    {"trust", no_argument, NULL, OPT_TRUST},
    {"sha256", required_argument, NULL, OPT_SHA256},
    {"max-size", required_argument, NULL, OPT_MAX_SIZE},
    {NULL, 0, NULL, 0},
};

static int parse_number(const char *opt, const char *arg, double lo, double hi, double *out)
{
    int rc = dt_cli_parse_double(opt, arg, lo, hi, out);
    return rc ? dt_fail_context(rc, "fetch") : 0;
}

static int add_mirror(struct fetch_opts *o, const char *url)
{
    if (o->nmirrors == MAX_MIRRORS)
        return dt_fail(DT_EUSAGE, "fetch: at most %d mirrors", MAX_MIRRORS);
    o->mirrors[o->nmirrors++] = url;
    return 0;
}

static int parse_numeric_option(struct fetch_opts *o, int c, const char *arg)
{
    double v = 0;
    int rc = 0;
    switch (c) {
    case OPT_RETRIES:
        if (!(rc = parse_number("--retries", arg, 0, 100, &v)) && v != floor(v))
            rc = dt_fail(DT_EUSAGE, "fetch: --retries expects a whole number, got '%s'", arg);
        o->retries = (int)v;
        break;
    case OPT_RETRY_DELAY:
        rc = parse_number("--retry-delay", arg, 0, 3600, &o->retry_delay);
        break;
    case OPT_CONNECT_TIMEOUT:
        rc = parse_number("--connect-timeout", arg, 1, 3600, &v);
        o->connect_timeout = (long)v;
        break;
    case OPT_STALL_TIMEOUT:
        rc = parse_number("--stall-timeout", arg, 1, 3600, &v);
        o->stall_timeout = (long)v;
        break;
    case OPT_DEADLINE:
        rc = parse_number("--deadline", arg, 1, 86400, &v);
        o->deadline = (long)v;
        break;
    case OPT_MAX_SIZE:
        if (!(rc = parse_number("--max-size", arg, 1, 1e15, &v)) && v != floor(v))
            rc = dt_fail(DT_EUSAGE, "fetch: --max-size expects a whole number of bytes, got '%s'",
                         arg);
        o->max_size = (uint64_t)v;
        break;
    }
    return rc;
}

static int parse_option(struct fetch_opts *o, int c, const char *arg, int *help)
{
    switch (c) {
    case 'd':
        o->dir = arg;
        return 0;
    case 'l':
        o->list = true;
        return 0;
    case 'V':
        o->verify = true;
        return 0;
    case 'f':
        o->force = true;
        return 0;
    case 'q':
        o->quiet = true;
        return 0;
    case 'h':
        *help = 1;
        return 0;
    case OPT_JSON:
        o->json = true;
        return 0;
    case OPT_MIRROR:
        return add_mirror(o, arg);
    case OPT_FROM:
        o->from = arg;
        return 0;
    case OPT_OFFLINE:
        o->offline = true;
        return 0;
    case OPT_NO_SYSTEM:
        o->no_system = true;
        return 0;
    case OPT_REGISTRY:
        o->registry = arg;
        return 0;
    case OPT_TRUST:
        o->trust = true;
        return 0;
    case OPT_SHA256:
        if (!dt_is_sha256_hex(arg))
            return dt_fail(DT_EUSAGE, "fetch: --sha256 expects 64 hex digits, got '%s'", arg);
        o->sha256 = arg;
        return 0;
    default:
        return parse_numeric_option(o, c, arg);
    }
}

static int env_mirrors(struct fetch_opts *o)
{
    const char *env = getenv("DTRAIN_MIRROR");
    if (!env || !*env)
        return 0;
    if (!(o->env_mirrors = strdup(env)))
        return dt_fail(DT_ERUNTIME, "out of memory");
    char *save = NULL;
    for (char *tok = strtok_r(o->env_mirrors, " ,\t\n", &save); tok;
         tok = strtok_r(NULL, " ,\t\n", &save)) {
        int rc = add_mirror(o, tok);
        if (rc)
            return dt_fail_context(rc, "DTRAIN_MIRROR");
    }
    return 0;
}

static int parse_args(struct fetch_opts *o, int argc, char **argv, int *help)
{
    opterr = 0;
    optind = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":d:lVfqh", long_opts, NULL)) != -1) {
        if (c == '?')
            return dt_fail(DT_EUSAGE, "fetch: unknown option '%s' (see 'dtrain fetch --help')",
                           argv[optind - 1]);
        if (c == ':')
            return dt_fail(DT_EUSAGE, "fetch: option '%s' needs a value", argv[optind - 1]);
        int rc = parse_option(o, c, optarg, help);
        if (rc)
            return rc;
    }
    if (optind < argc)
        o->name = argv[optind++];
    if (optind < argc)
        return dt_fail(DT_EUSAGE, "fetch: unexpected argument '%s' (one dataset at a time)",
                       argv[optind]);
    return env_mirrors(o);
}

/* --from FILE, --trust and --sha256 against the dataset they are for. */
static int check_local_args(struct fetch_opts *o, const struct dt_reg_dataset *ds)
{
    struct stat st;
    o->from_file = o->from && stat(o->from, &st) == 0 && !S_ISDIR(st.st_mode);
    if (o->from_file && ds->nfiles != 1)
        return dt_fail(DT_EUSAGE,
                       "fetch: --from %s is a file, but %s has %d files; give the directory "
                       "that holds them",
                       o->from, ds->name, ds->nfiles);
    if (o->trust && !o->from)
        return dt_fail(DT_EUSAGE, "fetch: --trust vouches for a copy you have; it needs --from "
                                  "FILE or DIR");
    if (o->sha256 && ds->nfiles != 1)
        return dt_fail(DT_EUSAGE,
                       "fetch: --sha256 names one file's checksum, but %s has %d files (use "
                       "--from DIR --trust)",
                       ds->name, ds->nfiles);
    return 0;
}

static int check_args(struct fetch_opts *o)
{
    if (o->list && o->name)
        return dt_fail(DT_EUSAGE, "fetch: --list takes no dataset name");
    if (!o->list && !o->name)
        return dt_fail(DT_EUSAGE, "fetch: which dataset? known: %s", dt_registry_names());
    if (o->list)
        return 0;
    if (!dt_registry_find(o->name))
        return dt_fail(DT_EUSAGE, "fetch: unknown dataset '%s' (known: %s)", o->name,
                       dt_registry_names());
    if (o->verify && (o->from || o->force || o->trust || o->sha256))
        return dt_fail(DT_EUSAGE, "fetch: --verify checks what is there; it takes no --from, "
                                  "--force, --trust or --sha256");
    return check_local_args(o, dt_registry_find(o->name));
}

static int default_dir(struct fetch_opts *o)
{
    if (o->dir || o->list)
        return 0;
    int rc = join_path(o->dir_buf, dt_data_root(), o->name, "");
    o->dir = o->dir_buf;
    return rc;
}

static int run_with(struct fetch_opts *o)
{
    const char *registry = o->registry ? o->registry : getenv("DTRAIN_REGISTRY");
    int rc = registry && *registry ? dt_registry_load(registry) : 0;
    if (!rc)
        rc = check_args(o);
    if (!rc)
        rc = default_dir(o);
    if (rc)
        return rc;
    if (o->list)
        return list_datasets(o);
    const struct dt_reg_dataset *ds = dt_registry_find(o->name);
    if (o->verify)
        return verify_dataset(o, ds);
    if ((rc = dt_download_global_init()))
        return rc;
    rc = fetch_dataset(o, ds);
    dt_download_global_cleanup();
    return rc;
}

static void json_error(const struct fetch_opts *o, int rc)
{
    if (!o->json || !rc)
        return;
    struct dt_json_writer w;
    dt_jw_begin(&w, "error");
    dt_jw_str(&w, "message", dt_last_error());
    dt_jw_int(&w, "exit_code", dt_exit_code(rc));
    json_emit(&w);
}

static int run_fetch(int argc, char **argv)
{
    struct fetch_opts o = {.retries = 3,
                           .retry_delay = 1.0,
                           .connect_timeout = 15,
                           .stall_timeout = 30,
                           .max_size = DT_FETCH_UNSIZED_MAX};
    int help = 0;
    int rc = parse_args(&o, argc, argv, &help);
    if (!rc && help) {
        fputs(dt_cmd_fetch.help, stdout);
    } else if (!rc) {
        enum dt_log_level saved = dt_log_get_level();
        if (o.quiet)
            dt_log_set_level(DT_LOG_QUIET);
        rc = run_with(&o);
        json_error(&o, rc);
        dt_log_set_level(saved);
    }
    dt_registry_unload();
    free(o.env_mirrors);
    return rc;
}

const struct dt_command dt_cmd_fetch = {
    .name = "fetch",
    .summary = "download and verify a dataset (mnist, fashion-mnist, kmnist, cifar10, cifar100)",
    .help =
        "usage: dtrain fetch NAME [options]      download NAME into $DTRAIN_DATA/NAME, verified\n"
        "       dtrain fetch NAME --verify       check the files there, without the network\n"
        "       dtrain fetch --list              known datasets, sizes, and what is present\n"
        "\n"
        "Every file is checked against its published checksum (or the SHA-256 of its\n"
        "decompressed content) before it takes its final name. A download that stops is kept\n"
        "as FILE.part and resumed next time.\n"
        "\n"
        "options:\n"
        "  -d, --dir DIR          put the files in DIR (default $DTRAIN_DATA/NAME, DTRAIN_DATA\n"
        "                         defaulting to ./data); with --list, the data root\n"
        "  -l, --list             list the known datasets and their status\n"
        "  -V, --verify           verify the files present in DIR, no download\n"
        "  -f, --force            fetch again even if a verified copy is present\n"
        "      --mirror URL       try URL (base directory; http, https, file://) first;\n"
        "                         repeatable\n"
        "      --from DIR         copy the files from DIR instead (verified; no network);\n"
        "                         --from FILE for a one-file dataset (cifar10, cifar100)\n"
        "      --trust            with --from: accept the copies even when they do not match\n"
        "                         the registry's checksums (their SHA-256 is recorded in\n"
        "                         FILE.sha256, which --verify and --list then accept)\n"
        "      --sha256 HEX       the file must have this SHA-256; accepted then whatever the\n"
        "                         registry says, and recorded as --trust does (one-file\n"
        "                         datasets)\n"
        "      --offline          never use the network (system copies, --from, file:// only)\n"
        "      --no-system-copies ignore distribution copies (e.g. Debian's\n"
        "                         /usr/share/datasets/fashion-mnist)\n"
        "      --registry FILE    load extra or overriding dataset entries (JSON)\n"
        "      --retries N        retries per mirror after a transient failure (default 3)\n"
        "      --retry-delay S    first retry delay in seconds, doubling (default 1)\n"
        "      --connect-timeout S  connection timeout (default 15)\n"
        "      --stall-timeout S  give up on a transfer stalled this long (default 30)\n"
        "      --deadline S     give up on a transfer not done in S seconds (default: a\n"
        "                       minute plus the published size at 50 KB/s)\n"
        "      --max-size BYTES  largest file accepted when the registry publishes no size\n"
        "                       (default 512 MiB; also sets that file's default deadline)\n"
        "  -q, --quiet            print nothing but errors\n"
        "      --json             one JSON event per line on stdout\n"
        "\n"
        "environment: DTRAIN_DATA (data root), DTRAIN_MIRROR (mirror URLs, space or comma\n"
        "separated, tried after --mirror), DTRAIN_REGISTRY (registry file).\n"
        "exit codes: 0 ok, 1 network or I/O failure, 2 usage (unknown dataset), 3 data error\n"
        "(checksum mismatch, missing file).\n",
    .run = run_fetch,
};

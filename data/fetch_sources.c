/* One file of a fetch, from the first source that gives a verified copy, in the order
 * data/fetch.h documents: present, --from, the system copy, an earlier complete part file, the
 * mirrors (each URL retried with exponential backoff, bounded by the published size). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/download.h"
#include "data/fetch_job.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/log.h"

static int copy_from(struct dt_fetch_job *j, const char *src, const char *kind)
{
    if (!dt_fetch_file_exists(src))
        return dt_fail(DT_EDATA, "%s: missing", src);
    dt_fetch_json_file_start(j, "copy", src, 0);
    int rc = dt_fetch_copy_to_part(src, j->part);
    if (rc)
        return rc;
    char how[DT_FETCH_PATH_CAP + 32];
    snprintf(how, sizeof how, "copied from %s", src);
    return dt_fetch_verify_and_promote(j, src, kind, how);
}

static int try_local_copy(struct dt_fetch_job *j, const char *dir, const char *kind)
{
    char src[DT_FETCH_PATH_CAP];
    int rc = dt_fetch_join_path(src, dir, j->f->name, "");
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

static double backoff(const struct dt_fetch_options *o, int attempt)
{
    return o->retry_delay * pow(2.0, attempt);
}

/* One URL with retries. 1 = try the next mirror, 0 = done, <0 = stop. */
static int try_url(struct dt_fetch_job *j, const char *url, char *errors, size_t cap)
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
                               .progress = dt_fetch_on_progress,
                               .progress_ctx = j};
    if (!j->f->size)
        dt_log_info("%s: no published size: at most %llu bytes, within %ld s (--max-size, "
                    "--deadline)",
                    j->f->name, (unsigned long long)max, deadline);
    for (int attempt = 0; attempt <= j->o->retries; attempt++) {
        long long have = dt_fetch_file_size(j->part);
        dt_log_info("%s: %s %s", j->f->name, have > 0 ? "resuming" : "downloading", url);
        dt_fetch_json_file_start(j, "download", url, have > 0 ? (uint64_t)have : 0);
        j->start = dt_now();
        j->last_draw = j->last_json = j->last_plain = j->start;
        struct dt_dl_result res;
        int rc = dt_download(url, j->part, &dl, &res);
        dt_fetch_clear_bar(j);
        if (rc == 0) {
            char how[128], got[32], kept[32];
            dt_fetch_format_bytes(res.received, got, sizeof got);
            dt_fetch_format_bytes(res.resumed, kept, sizeof kept);
            snprintf(how, sizeof how, "%s in %.1f s%s%s", got, dt_now() - j->start,
                     res.resumed ? " after the first " : "", res.resumed ? kept : "");
            return dt_fetch_verify_and_promote(j, url, url, how);
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

/* The mirrors in order: the options' (--mirror, DTRAIN_MIRROR), then the registry's. */
static int mirror_list(const struct dt_fetch_job *j, const char **out)
{
    int n = 0;
    for (int i = 0; i < j->o->nmirrors && n < DT_FETCH_MAX_MIRRORS; i++)
        out[n++] = j->o->mirrors[i];
    for (int i = 0; i < DT_REG_MAX_MIRRORS && j->ds->mirrors[i] && n < DT_FETCH_MAX_MIRRORS; i++)
        out[n++] = j->ds->mirrors[i];
    return n;
}

static int try_mirrors(struct dt_fetch_job *j)
{
    const char *mirrors[DT_FETCH_MAX_MIRRORS];
    int n = mirror_list(j, mirrors), tried = 0;
    char errors[2048] = "";
    for (int i = 0; i < n; i++) {
        if (j->o->offline && dt_url_is_remote(mirrors[i]))
            continue;
        char url[DT_FETCH_PATH_CAP];
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

static int try_system_copy(struct dt_fetch_job *j)
{
    const char *sys = j->ds->system_dir;
    char src[DT_FETCH_PATH_CAP];
    if (j->o->no_system || !sys || dt_fetch_join_path(src, sys, j->f->name, "") ||
        !dt_fetch_file_exists(src))
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
static int check_present(struct dt_fetch_job *j)
{
    if (j->o->force || !dt_fetch_file_exists(j->final))
        return 1;
    enum dt_match m;
    struct dt_digests d;
    if (dt_checksum_verify(j->final, j->f, j->f->name, &m) == 0 &&
        (!j->o->sha256 || dt_fetch_check_vouched(j, j->final, j->f->name, &d) == 0)) {
        dt_fetch_report_verified(j, "already present", m);
        dt_fetch_json_file_done(j, "present", m);
        return 0;
    }
    dt_log_warn("%s; fetching it again", dt_last_error());
    return 1;
}

/* A part file from an earlier run may be complete (its size is the published one, or the size
 * is unknown): keep it if it verifies. One of unknown size that does not verify may just be
 * partial, so it stays for a resume; one of known size that does not verify is discarded. */
static int check_complete_part(struct dt_fetch_job *j)
{
    long long have = dt_fetch_file_size(j->part);
    if (have <= 0 || (j->f->size && (size_t)have < j->f->size))
        return 1;
    enum dt_match m;
    if ((!j->f->size || (size_t)have == j->f->size) &&
        dt_checksum_verify(j->part, j->f, j->f->name, &m) == 0) {
        int rc = dt_fetch_promote(j);
        if (!rc) {
            dt_fetch_report_verified(j, "completed earlier", m);
            dt_fetch_json_file_done(j, "part", m);
        }
        return rc;
    }
    dt_clear_error();
    /* Of unknown size, one that reached --max-size cannot be resumed into anything valid. */
    if (j->f->size || (uint64_t)have >= j->o->max_size)
        unlink(j->part);
    return 1;
}

bool dt_fetch_from_is_file(const char *from)
{
    struct stat st;
    return from && stat(from, &st) == 0 && !S_ISDIR(st.st_mode);
}

int dt_fetch_file(struct dt_fetch_job *j)
{
    int rc = check_present(j);
    if (rc <= 0)
        return rc;
    if (j->o->force)
        unlink(j->part);
    /* --from FILE (checked to suit a one-file dataset before the first file) or --from DIR. */
    if (j->o->from)
        return dt_fetch_from_is_file(j->o->from) ? copy_from(j, j->o->from, "from")
                                                 : try_local_copy(j, j->o->from, "from");
    if ((rc = try_system_copy(j)) <= 0)
        return rc;
    if ((rc = check_complete_part(j)) <= 0)
        return rc;
    return try_mirrors(j);
}

/* What a fetch shows while it works: a live bar per file when stderr is a terminal (plain
 * periodic lines otherwise), the "verified (...)" lines, and with --json one event object per
 * line on stdout (file_start, progress, file_done, file_verified, dataset_done, error). */
#include <math.h>
#include <stdio.h>
#include <sys/stat.h>

#include "data/fetch_job.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/log.h"

void dt_fetch_format_bytes(uint64_t n, char *buf, size_t cap)
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

void dt_fetch_json_emit(struct dt_json_writer *w)
{
    dt_jw_end(w, stdout);
    fflush(stdout);
}

void dt_fetch_json_file_start(const struct dt_fetch_job *j, const char *kind, const char *source,
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
    dt_fetch_json_emit(&w);
}

void dt_fetch_json_file_done(const struct dt_fetch_job *j, const char *source, enum dt_match m)
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
    dt_fetch_json_emit(&w);
}

void dt_fetch_json_verified(const struct dt_fetch_job *j, bool ok, enum dt_match m)
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
    dt_fetch_json_emit(&w);
}

void dt_fetch_json_dataset_done(const struct dt_fetch_options *o, const struct dt_reg_dataset *ds,
                                const char *event)
{
    if (!o->json)
        return;
    struct dt_json_writer w;
    dt_jw_begin(&w, event);
    dt_jw_str(&w, "dataset", ds->name);
    dt_jw_str(&w, "dir", o->dir);
    dt_jw_int(&w, "files", ds->nfiles);
    dt_fetch_json_emit(&w);
}

void dt_fetch_json_error(const struct dt_fetch_options *o, int rc)
{
    if (!o->json || !rc)
        return;
    struct dt_json_writer w;
    dt_jw_begin(&w, "error");
    dt_jw_str(&w, "message", dt_last_error());
    dt_jw_int(&w, "exit_code", dt_exit_code(rc));
    dt_fetch_json_emit(&w);
}

void dt_fetch_report_verified(const struct dt_fetch_job *j, const char *how, enum dt_match m)
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

void dt_fetch_clear_bar(struct dt_fetch_job *j)
{
    if (j->bar_drawn)
        fputs("\r\033[K", stderr);
    j->bar_drawn = false;
}

static void draw_bar(struct dt_fetch_job *j, uint64_t have, uint64_t total, double rate)
{
    char got[32], all[32], speed[32], eta[32], bar[21];
    dt_fetch_format_bytes(have, got, sizeof got);
    dt_fetch_format_bytes(total, all, sizeof all);
    dt_fetch_format_bytes((uint64_t)rate, speed, sizeof speed);
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

void dt_fetch_on_progress(void *ctx, uint64_t have, uint64_t total, uint64_t resumed)
{
    struct dt_fetch_job *j = ctx;
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
        dt_fetch_format_bytes(have, got, sizeof got);
        dt_fetch_format_bytes(total, all, sizeof all);
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
        dt_fetch_json_emit(&w);
    }
}

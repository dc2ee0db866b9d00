/* One file of a fetch in progress, and the helpers the data/fetch*.c files share (internal to
 * the fetch engine; data/fetch.h is its interface). */
#ifndef DT_DATA_FETCH_JOB_H
#define DT_DATA_FETCH_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "data/checksum.h"
#include "data/fetch.h"
#include "data/registry.h"
#include "util/json.h"

#define DT_FETCH_PATH_CAP 4096

/* Per-file state, shared with the download's progress callback. */
struct dt_fetch_job {
    const struct dt_fetch_options *o;
    const struct dt_reg_dataset *ds;
    const struct dt_reg_file *f;
    char final[DT_FETCH_PATH_CAP], part[DT_FETCH_PATH_CAP];
    double start, last_draw, last_json, last_plain;
    bool bar_drawn;
    bool tty; /* stderr is a terminal and not --quiet: draw a live bar */
};

/* ---- paths (fetch.c) ---- */
bool dt_fetch_file_exists(const char *path);
long long dt_fetch_file_size(const char *path);
/* dir/name+suffix into out (DT_FETCH_PATH_CAP); -DT_EUSAGE when too long. */
int dt_fetch_join_path(char *out, const char *dir, const char *name, const char *suffix);
/* The job for file i of ds, its final and part paths in o->dir. */
int dt_fetch_job_init(struct dt_fetch_job *j, const struct dt_fetch_options *o,
                      const struct dt_reg_dataset *ds, int i);

/* ---- one file's sources (fetch_sources.c) ---- */
/* Present, from, system copy, earlier part file, mirrors: the first that verifies. */
int dt_fetch_file(struct dt_fetch_job *j);
/* --from names the file itself (a one-file dataset), not the directory holding it. */
bool dt_fetch_from_is_file(const char *from);

/* ---- verification (fetch_verify.c) ---- */
/* The verified part file becomes the final file: data on disk first, then the name. */
int dt_fetch_promote(struct dt_fetch_job *j);
/* Copies src over the part file (never appends: a local copy is cheap to redo). */
int dt_fetch_copy_to_part(const char *src, const char *part);
/* The sha256 option: the file must be the one the user vouched for, whatever the registry. */
int dt_fetch_check_vouched(const struct dt_fetch_job *j, const char *path, const char *label,
                           struct dt_digests *d);
/* Verifies the part file (trusting it where the options say so) and renames it into place; a
 * bad part file is deleted. `kind` is the source's kind for events ("from", "system", a URL). */
int dt_fetch_verify_and_promote(struct dt_fetch_job *j, const char *source, const char *kind,
                                const char *how);

/* ---- output (fetch_report.c) ---- */
void dt_fetch_format_bytes(uint64_t n, char *buf, size_t cap);
void dt_fetch_json_emit(struct dt_json_writer *w);
void dt_fetch_json_file_start(const struct dt_fetch_job *j, const char *kind, const char *source,
                              uint64_t offset);
void dt_fetch_json_file_done(const struct dt_fetch_job *j, const char *source, enum dt_match m);
void dt_fetch_json_verified(const struct dt_fetch_job *j, bool ok, enum dt_match m);
void dt_fetch_json_dataset_done(const struct dt_fetch_options *o, const struct dt_reg_dataset *ds,
                                const char *event);
/* The "verified (...)" line for a file that took its final name or was found good. */
void dt_fetch_report_verified(const struct dt_fetch_job *j, const char *how, enum dt_match m);
/* The download progress callback (struct dt_dl_options.progress), ctx a dt_fetch_job. */
void dt_fetch_on_progress(void *ctx, uint64_t have, uint64_t total, uint64_t resumed);
/* Ends a live bar before a log line. */
void dt_fetch_clear_bar(struct dt_fetch_job *j);

/* ---- --list (fetch_list.c) ---- */
int dt_fetch_list(const struct dt_fetch_options *o);

#endif

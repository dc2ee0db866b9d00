/* The fetch engine behind `dtrain fetch`: puts a registry dataset where `train` looks for it,
 * verified, resumable, offline-able; checks what is there (--verify); lists what is known.
 *
 * For each file of a registry entry the sources are tried in a fixed order:
 *   1. the file already under its final name, if it verifies (unless force);
 *   2. `from` DIR, or `from` FILE for a one-file dataset (exclusive: no other source is tried);
 *   3. the distribution's copy (registry system_dir), unless no_system;
 *   4. the mirrors: `mirrors` (the face puts --mirror, then DTRAIN_MIRROR there), then the
 *      registry's own, each retried with exponential backoff; offline keeps only file:// ones.
 * Everything lands in "<file>.part" first and is renamed to the final name only after it
 * verified against a published checksum, so the final name never holds an unverified file.
 * A failed download keeps its .part for the next run to resume; a checksum mismatch deletes it.
 * The one exception to "a published checksum": trust (with from) and sha256 accept a file the
 * registry does not know, on the user's word, and record its SHA-256 beside it (FILE.sha256,
 * data/checksum.h) so that later runs, --verify and --list accept it too.
 *
 * Output: human lines through util/log (a live bar per file when stderr is a terminal and the
 * log level shows info), and with `json` one event object per line on stdout. The error itself
 * is left in dt_last_error() for the caller to print once. Files: fetch.c (the dataset, the
 * run), fetch_sources.c (one file's sources in order), fetch_verify.c (a part file becomes the
 * final file, or is trusted, or goes), fetch_report.c (bar and events), fetch_list.c (--list). */
#ifndef DT_DATA_FETCH_H
#define DT_DATA_FETCH_H

#include <stdbool.h>
#include <stdint.h>

#define DT_FETCH_MAX_MIRRORS 32
/* The cap on a file with no published size: three times the largest dataset file we know. */
#define DT_FETCH_UNSIZED_MAX ((uint64_t)512 << 20)

struct dt_fetch_options {
    const char *name;     /* the registry dataset; NULL with list */
    const char *dir;      /* where its files go; NULL: $DTRAIN_DATA/NAME (with list: the root) */
    const char *from;     /* a directory holding the files, or the one file of a 1-file set */
    const char *registry; /* extra registry entries (JSON); NULL: DTRAIN_REGISTRY, if set */
    const char *sha256;   /* the one file's SHA-256, vouched for by the user */
    bool trust;           /* accept what `from` gives even when the registry differs */
    const char *mirrors[DT_FETCH_MAX_MIRRORS]; /* tried before the registry's own */
    int nmirrors;
    bool list, verify, force, json, offline, no_system;
    int retries;
    double retry_delay; /* seconds before the first retry, doubling */
    long connect_timeout, stall_timeout;
    long deadline;     /* seconds per transfer; 0 = from the published size */
    uint64_t max_size; /* the cap on a file whose size is not published */
};

/* The defaults of every field `dtrain fetch --help` documents. */
void dt_fetch_options_default(struct dt_fetch_options *o);
/* Appends a mirror base URL; -DT_EUSAGE past DT_FETCH_MAX_MIRRORS. */
int dt_fetch_add_mirror(struct dt_fetch_options *o, const char *url);
/* Loads the extra registry, checks the options against the dataset, then lists, verifies or
 * fetches. 0, or a negative code with the message in dt_last_error(). The caller unloads the
 * registry (dt_registry_unload) when done. */
int dt_fetch_run(const struct dt_fetch_options *o);
/* With `json`: the error event for a failed run (rc < 0), one line on stdout. */
void dt_fetch_json_error(const struct dt_fetch_options *o, int rc);

#endif

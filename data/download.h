/* Downloading one URL into a `.part` file with libcurl: redirects, timeouts, resume.
 *
 * A download appends to `part_path` and resumes from its current size with an HTTP Range
 * request; when the server cannot resume (it ignores Range and answers 200, or answers 416) the
 * part file is truncated and the transfer starts over from zero within the same call. The caller
 * owns retries, backoff and mirror order (data/fetch_sources.c), because only it knows what to try
 * next; this module classifies each failure so the caller can decide. Nothing here prints: progress
 * is reported through a callback. */
#ifndef DT_DATA_DOWNLOAD_H
#define DT_DATA_DOWNLOAD_H

#include <stdint.h>

/* What a failed attempt means for the caller. */
enum dt_dl_failure {
    DT_DL_OK = 0,
    DT_DL_RETRY, /* transient (connection reset, timeout, 5xx, cut short): retry this URL */
    DT_DL_NEXT,  /* permanent for this URL (404, 403, bad URL): try the next mirror */
    DT_DL_FATAL, /* local problem (disk full, unwritable file): stop everything */
};

/* Progress callback: bytes of the file present so far (including a resumed prefix), the
 * total when known (else 0), and the offset this transfer resumed from. */
typedef void (*dt_dl_progress_fn)(void *ctx, uint64_t have, uint64_t total, uint64_t resumed);

struct dt_dl_options {
    long connect_timeout_s; /* CURLOPT_CONNECTTIMEOUT */
    long stall_time_s;      /* abort when below stall_bytes_per_s for this long */
    long stall_bytes_per_s; /* CURLOPT_LOW_SPEED_LIMIT */
    uint64_t max_bytes;     /* a body longer than this is cut off (0 = none): the published
                               size, or a cap when the size is unknown */
    int max_is_cap;         /* max_bytes is a cap, not the published size (for the message) */
    long deadline_s;        /* the whole transfer, seconds (0 = none): a body dripping just
                               fast enough to beat the stall check still ends */
    dt_dl_progress_fn progress;
    void *progress_ctx;
};

struct dt_dl_result {
    enum dt_dl_failure failure;
    long http_status;  /* last response status (0 for file:// or when none was received) */
    uint64_t resumed;  /* bytes that were already in the part file and kept */
    uint64_t received; /* bytes written by this call */
    int restarted;     /* the server could not resume: the part file was started over */
};

/* Once per process, before any download (curl_global_init), and once after the last one. */
int dt_download_global_init(void);
void dt_download_global_cleanup(void);

/* Downloads `url` into `part_path`, resuming from the file's size. Returns 0 when the whole
 * resource was received, else a negative status with a one-line message naming the URL (HTTP
 * status, curl's reason, or the local errno) and result->failure saying what to do next. */
int dt_download(const char *url, const char *part_path, const struct dt_dl_options *opt,
                struct dt_dl_result *result);

/* True for URLs that need the network (http, https, ftp...), false for file:// and paths. */
int dt_url_is_remote(const char *url);

#endif

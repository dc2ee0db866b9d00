/* libcurl transfer of one URL into a `.part` file, resuming from the file's size.
 *
 * The part file is written with write(2) on an O_APPEND descriptor, not stdio, so that a full
 * disk (ENOSPC) surfaces at the write that hit it and is reported as such, instead of as a
 * generic curl write error after buffering. Whether a partial file can be continued is the
 * server's call: libcurl refuses a 200 answer to a Range request (CURLE_RANGE_ERROR) and a
 * 416 means our offset is past the end; both start the file over, once per call.
 *
 * Failures are classified (retry the URL / next mirror / stop) rather than retried here: the
 * policy of how often and how long to wait belongs to the command. */
#include "data/download.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include "util/err.h"

#ifndef DTRAIN_VERSION
#define DTRAIN_VERSION "dev"
#endif

struct transfer {
    CURL *curl;
    int fd;
    int write_errno;    /* errno of a failed write(2), 0 if none */
    int refused_resume; /* the server answered 200 to a Range request */
    int too_long;       /* the body went past opt->max_bytes */
    uint64_t resumed;
    uint64_t received;
    const struct dt_dl_options *opt;
};

int dt_download_global_init(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return dt_fail(DT_ERUNTIME, "cannot initialise libcurl");
    return 0;
}

void dt_download_global_cleanup(void)
{
    curl_global_cleanup();
}

int dt_url_is_remote(const char *url)
{
    return strncasecmp(url, "file://", 7) != 0 && strstr(url, "://") != NULL;
}

static int write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return errno ? errno : EIO;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
    struct transfer *t = ud;
    size_t len = size * nmemb;
    long status = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
    if (status == 200 && t->resumed > 0) {
        t->refused_resume = 1; /* defensive: libcurl normally catches this itself */
        return 0;
    }
    if (status >= 300)
        return len; /* an error page (416 passes FAILONERROR): not file content */
    if (t->opt->max_bytes && t->resumed + t->received + len > t->opt->max_bytes) {
        t->too_long = 1; /* an endless or wrong body: stop reading it */
        return 0;
    }
    int err = write_all(t->fd, data, len);
    if (err) {
        t->write_errno = err;
        return 0;
    }
    t->received += len;
    return len;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)ultotal;
    (void)ulnow;
    struct transfer *t = ud;
    if (t->opt->progress)
        t->opt->progress(t->opt->progress_ctx, t->resumed + (uint64_t)dlnow,
                         dltotal > 0 ? t->resumed + (uint64_t)dltotal : 0, t->resumed);
    return 0;
}

static void configure(struct transfer *t, const char *url, char *errbuf)
{
    CURL *c = t->curl;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https,ftp,ftps,file");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https,ftp,ftps");
    curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "dtrain/" DTRAIN_VERSION);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, t->opt->connect_timeout_s);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, t->opt->stall_time_s);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, t->opt->stall_bytes_per_s);
    if (t->opt->deadline_s > 0)
        curl_easy_setopt(c, CURLOPT_TIMEOUT, t->opt->deadline_s);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, t);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
}

static enum dt_dl_failure classify_http(long status)
{
    if (status == 408 || status == 429 || status >= 500)
        return DT_DL_RETRY;
    return DT_DL_NEXT;
}

static enum dt_dl_failure classify_curl(CURLcode rc)
{
    switch (rc) {
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_FILE_COULDNT_READ_FILE:
    case CURLE_REMOTE_FILE_NOT_FOUND:
    case CURLE_REMOTE_ACCESS_DENIED:
    case CURLE_LOGIN_DENIED:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_TOO_MANY_REDIRECTS:
        return DT_DL_NEXT;
    default:
        return DT_DL_RETRY;
    }
}

/* A declared length over the limit fails before the body (CURLE_FILESIZE_EXCEEDED); on_body's
 * count catches a body that declares none. Only from byte 0: a resumed request's answer may
 * declare the whole file (a server ignoring Range), which must end in a restart instead. */
static void set_max_size(struct transfer *t)
{
    curl_off_t max = t->resumed == 0 ? (curl_off_t)t->opt->max_bytes : 0;
    curl_easy_setopt(t->curl, CURLOPT_MAXFILESIZE_LARGE, max);
}

/* Empties the part file so the next perform starts from byte 0. */
static int restart_from_zero(struct transfer *t, const char *part_path)
{
    if (ftruncate(t->fd, 0) != 0)
        return dt_fail(DT_ERUNTIME, "%s: cannot truncate: %s", part_path, strerror(errno));
    t->resumed = 0;
    t->received = 0;
    t->refused_resume = 0;
    t->too_long = 0;
    curl_easy_setopt(t->curl, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)0);
    set_max_size(t);
    return 0;
}

/* The server cannot continue from our offset: start over (caller allows this once). */
static int cannot_resume(const struct transfer *t, CURLcode rc, long status)
{
    if (t->resumed == 0)
        return 0;
    return rc == CURLE_RANGE_ERROR || rc == CURLE_BAD_DOWNLOAD_RESUME || status == 416 ||
           t->refused_resume;
}

static int report(const struct transfer *t, CURLcode rc, long status, const char *url,
                  const char *part_path, const char *errbuf, struct dt_dl_result *r)
{
    r->http_status = status;
    r->resumed = t->resumed;
    r->received = t->received;
    if (t->write_errno) {
        r->failure = DT_DL_FATAL;
        return dt_fail(DT_ERUNTIME, "%s: write failed: %s", part_path, strerror(t->write_errno));
    }
    if (t->too_long || rc == CURLE_FILESIZE_EXCEEDED) {
        r->failure = DT_DL_NEXT;
        if (t->opt->max_is_cap)
            return dt_fail(DT_ERUNTIME,
                           "%s: sends more than %llu bytes (no size published; --max-size "
                           "raises the limit)",
                           url, (unsigned long long)t->opt->max_bytes);
        return dt_fail(DT_ERUNTIME, "%s: sends more than the published %llu bytes", url,
                       (unsigned long long)t->opt->max_bytes);
    }
    double took = 0;
    curl_easy_getinfo(t->curl, CURLINFO_TOTAL_TIME, &took);
    if (rc == CURLE_OPERATION_TIMEDOUT && t->opt->deadline_s > 0 &&
        took >= (double)t->opt->deadline_s - 0.5) {
        r->failure = DT_DL_NEXT;
        return dt_fail(DT_ERUNTIME, "%s: not done within the %ld s deadline", url,
                       t->opt->deadline_s);
    }
    if (rc == CURLE_OK && (status == 0 || (status >= 200 && status < 300))) {
        r->failure = DT_DL_OK;
        return 0;
    }
    if (rc == CURLE_HTTP_RETURNED_ERROR || (rc == CURLE_OK && status >= 300)) {
        r->failure = classify_http(status);
        return dt_fail(DT_ERUNTIME, "HTTP %ld from %s", status, url);
    }
    r->failure = classify_curl(rc);
    return dt_fail(DT_ERUNTIME, "%s: %s", url, errbuf[0] ? errbuf : curl_easy_strerror(rc));
}

static int open_part(const char *part_path, struct transfer *t)
{
    t->fd = open(part_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (t->fd < 0)
        return dt_fail(DT_ERUNTIME, "%s: cannot write: %s", part_path, strerror(errno));
    struct stat st;
    if (fstat(t->fd, &st) != 0) {
        close(t->fd);
        return dt_fail(DT_ERUNTIME, "%s: cannot stat: %s", part_path, strerror(errno));
    }
    t->resumed = (uint64_t)st.st_size;
    return 0;
}

int dt_download(const char *url, const char *part_path, const struct dt_dl_options *opt,
                struct dt_dl_result *result)
{
    memset(result, 0, sizeof *result);
    result->failure = DT_DL_FATAL;
    struct transfer t = {.opt = opt};
    if (open_part(part_path, &t))
        return -DT_ERUNTIME;
    t.curl = curl_easy_init();
    if (!t.curl) {
        close(t.fd);
        return dt_fail(DT_ERUNTIME, "cannot create a libcurl handle");
    }
    char errbuf[CURL_ERROR_SIZE] = "";
    configure(&t, url, errbuf);
    curl_easy_setopt(t.curl, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)t.resumed);
    set_max_size(&t);
    CURLcode rc = curl_easy_perform(t.curl);
    long status = 0;
    curl_easy_getinfo(t.curl, CURLINFO_RESPONSE_CODE, &status);
    int status_rc = 0;
    if (cannot_resume(&t, rc, status)) {
        result->restarted = 1;
        status_rc = restart_from_zero(&t, part_path);
        if (!status_rc) {
            errbuf[0] = 0;
            rc = curl_easy_perform(t.curl);
            status = 0;
            curl_easy_getinfo(t.curl, CURLINFO_RESPONSE_CODE, &status);
        }
    }
    if (!status_rc)
        status_rc = report(&t, rc, status, url, part_path, errbuf, result);
    /* Past the cap of a file of unknown size, what was kept is not the start of a file we
     * want: a resume would only go on past the cap. */
    if ((t.too_long || rc == CURLE_FILESIZE_EXCEEDED) && opt->max_is_cap && ftruncate(t.fd, 0))
        result->failure = DT_DL_FATAL;
    if (close(t.fd) != 0 && !status_rc) {
        result->failure = DT_DL_FATAL;
        status_rc = dt_fail(DT_ERUNTIME, "%s: write failed: %s", part_path, strerror(errno));
    }
    curl_easy_cleanup(t.curl);
    return status_rc;
}

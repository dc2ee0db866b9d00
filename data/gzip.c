/* gzip reading on top of zlib's inflate (see gzip.h for the contract).
 *
 * One reader owns one FILE, one z_stream and a fixed input buffer. Members are inflated with
 * windowBits 16+MAX_WBITS (gzip wrapper only, so zlib checks the CRC-32 and ISIZE trailer of
 * every member). After a member ends, what follows must be another gzip member or zero
 * padding to the end of the file; anything else is reported rather than silently ignored,
 * because a file with garbage after it is not the file the checksum in the registry named.
 */
#include "data/gzip.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "util/err.h"
#include "util/fileio.h"

#define GZ_INPUT_BYTES (256 * 1024)
/* Deflate's worst-case expansion is about 1032:1 (a stream of maximal-length matches). */
#define GZ_MAX_RATIO 1032

struct dt_gz_reader {
    FILE *f;
    int plain;      /* uncompressed file read through the same API */
    int zinit;      /* zs needs inflateEnd */
    int member_end; /* the current member ended; what follows is not yet examined */
    int done;       /* all data delivered */
    uint64_t out_offset;
    uint64_t in_offset; /* compressed bytes handed to zlib so far (for messages) */
    uint64_t file_size;
    uint64_t limit; /* most bytes delivered, all members together (dt_gz_set_limit) */
    z_stream zs;
    char path[4096];
    uint8_t in[GZ_INPUT_BYTES];
};

static int gz_io_error(struct dt_gz_reader *r)
{
    return dt_fail(DT_EDATA, "%s: read error (%s)", r->path, strerror(errno));
}

/* Keeps unread input, appends more from the file. Returns 0 or an error; avail_in stays 0
 * only at end of file. */
static int gz_refill(struct dt_gz_reader *r)
{
    size_t keep = r->zs.avail_in;
    if (keep && r->zs.next_in != r->in)
        memmove(r->in, r->zs.next_in, keep);
    size_t n = fread(r->in + keep, 1, sizeof(r->in) - keep, r->f);
    if (n == 0 && ferror(r->f))
        return gz_io_error(r);
    r->zs.next_in = r->in;
    r->zs.avail_in = (uInt)(keep + n);
    return 0;
}

static int gz_open_file(struct dt_gz_reader **out, const char *path, int plain)
{
    *out = NULL;
    struct dt_gz_reader *r = calloc(1, sizeof(*r));
    if (!r)
        return dt_fail(DT_ERUNTIME, "%s: out of memory opening", path);
    snprintf(r->path, sizeof(r->path), "%s", path);
    r->plain = plain;
    r->limit = DT_GZ_MAX_BYTES;
    uint64_t size;
    int rc = dt_open_regular(path, &r->f, &size);
    if (rc < 0) {
        free(r);
        return rc;
    }
    r->file_size = size;
    *out = r;
    return 0;
}

int dt_gz_open_plain(struct dt_gz_reader **out, const char *path)
{
    return gz_open_file(out, path, 1);
}

/* force_gz: the data must be gzip; otherwise it is gzip when it starts with the magic. */
static int gz_open(struct dt_gz_reader **out, const char *path, int force_gz)
{
    struct dt_gz_reader *r;
    int rc = gz_open_file(&r, path, 0);
    if (rc < 0)
        return rc;
    rc = gz_refill(r);
    if (rc == 0 && !force_gz && (r->zs.avail_in < 2 || r->in[0] != 0x1f || r->in[1] != 0x8b)) {
        /* Plain data: hand what was read back to the file position (a regular file). */
        if (fseeko(r->f, 0, SEEK_SET) != 0)
            rc = gz_io_error(r);
        r->zs.avail_in = 0;
        r->plain = 1;
        if (rc == 0) {
            *out = r;
            return 0;
        }
    }
    if (rc == 0 && r->zs.avail_in == 0)
        rc = dt_fail(DT_EDATA, "%s: not a gzip file (empty)", path);
    else if (rc == 0 && (r->zs.avail_in < 2 || r->in[0] != 0x1f || r->in[1] != 0x8b))
        rc = dt_fail(DT_EDATA, "%s: not a gzip file (bad magic 0x%02x%02x, expected 0x1f8b)", path,
                     r->in[0], r->zs.avail_in > 1 ? r->in[1] : 0);
    if (rc == 0 && inflateInit2(&r->zs, 16 + MAX_WBITS) != Z_OK)
        rc = dt_fail(DT_ERUNTIME, "%s: zlib initialisation failed", path);
    if (rc < 0) {
        fclose(r->f);
        free(r);
        return rc;
    }
    r->zinit = 1;
    *out = r;
    return 0;
}

int dt_gz_open(struct dt_gz_reader **out, const char *path)
{
    return gz_open(out, path, 1);
}

int dt_gz_open_any(struct dt_gz_reader **out, const char *path)
{
    return gz_open(out, path, 0);
}

void dt_gz_close(struct dt_gz_reader *r)
{
    if (!r)
        return;
    if (r->zinit)
        inflateEnd(&r->zs);
    fclose(r->f);
    free(r);
}

const char *dt_gz_path(const struct dt_gz_reader *r)
{
    return r->path;
}

uint64_t dt_gz_offset(const struct dt_gz_reader *r)
{
    return r->out_offset;
}

size_t dt_gz_plausible_size(const struct dt_gz_reader *r)
{
    uint64_t bound = r->plain ? r->file_size : r->file_size * GZ_MAX_RATIO + 65536;
    return bound > r->limit ? (size_t)r->limit : (size_t)bound;
}

void dt_gz_set_limit(struct dt_gz_reader *r, uint64_t max_bytes)
{
    r->limit = max_bytes < DT_GZ_MAX_BYTES ? max_bytes : DT_GZ_MAX_BYTES;
}

uint64_t dt_gz_limit(const struct dt_gz_reader *r)
{
    return r->limit;
}

/* The limit counts what every member delivered, not what the current one did: many small
 * members that each inflate to just under a limit must not add up to gigabytes. */
static int gz_over_limit(struct dt_gz_reader *r)
{
    if (r->limit % (1 << 20) == 0)
        return dt_fail(DT_EDATA, "%s: decompressed data exceeds the %llu MiB limit", r->path,
                       (unsigned long long)(r->limit >> 20));
    return dt_fail(DT_EDATA, "%s: decompressed data exceeds the %llu-byte limit", r->path,
                   (unsigned long long)r->limit);
}

/* True when the rest of the file (from the input buffer on) is all zero bytes. */
static int gz_rest_is_zero(struct dt_gz_reader *r, int *err)
{
    for (;;) {
        for (uInt i = 0; i < r->zs.avail_in; i++)
            if (r->zs.next_in[i] != 0)
                return 0;
        r->zs.avail_in = 0;
        if ((*err = gz_refill(r)) < 0)
            return 0;
        if (r->zs.avail_in == 0)
            return 1;
    }
}

/* After a member's trailer: start the next member, or finish at end of file. */
static int gz_next_member(struct dt_gz_reader *r)
{
    int rc;
    if (r->zs.avail_in < 2 && (rc = gz_refill(r)) < 0)
        return rc;
    if (r->zs.avail_in == 0) {
        r->done = 1;
        return 0;
    }
    if (r->zs.avail_in >= 2 && r->zs.next_in[0] == 0x1f && r->zs.next_in[1] == 0x8b) {
        if (inflateReset(&r->zs) != Z_OK)
            return dt_fail(DT_ERUNTIME, "%s: zlib reset failed", r->path);
        r->member_end = 0;
        return 0;
    }
    uint64_t at = r->in_offset;
    int err = 0;
    if (gz_rest_is_zero(r, &err)) {
        r->done = 1;
        return 0;
    }
    if (err < 0)
        return err;
    return dt_fail(DT_EDATA, "%s: trailing garbage after gzip data (at compressed byte %llu)",
                   r->path, (unsigned long long)at);
}

static int gz_data_error(struct dt_gz_reader *r)
{
    const char *msg = r->zs.msg ? r->zs.msg : "unknown error";
    if (strcmp(msg, "incorrect data check") == 0)
        return dt_fail(DT_EDATA, "%s: CRC mismatch (gzip data is corrupt)", r->path);
    if (strcmp(msg, "incorrect length check") == 0)
        return dt_fail(DT_EDATA, "%s: length mismatch (gzip size trailer disagrees with data)",
                       r->path);
    if (strstr(msg, "header") || strstr(msg, "compression method"))
        return dt_fail(DT_EDATA, "%s: bad gzip header (%s)", r->path, msg);
    return dt_fail(DT_EDATA, "%s: corrupt deflate data (%s)", r->path, msg);
}

static int gz_truncated(struct dt_gz_reader *r)
{
    return dt_fail(DT_EDATA,
                   "%s: truncated gzip data (file ends after %llu compressed bytes, %llu bytes "
                   "decompressed)",
                   r->path, (unsigned long long)r->file_size, (unsigned long long)r->out_offset);
}

/* One inflate call into buf; adds what it produced to *got. */
static int gz_inflate_some(struct dt_gz_reader *r, uint8_t *buf, size_t len, size_t *got)
{
    int rc;
    if (r->zs.avail_in == 0) {
        if ((rc = gz_refill(r)) < 0)
            return rc;
        if (r->zs.avail_in == 0)
            return gz_truncated(r);
    }
    size_t want = len - *got;
    if (want > r->limit - r->out_offset + 1) /* one byte past the limit tells "more" */
        want = (size_t)(r->limit - r->out_offset + 1);
    r->zs.next_out = buf + *got;
    r->zs.avail_out = want > UINT_MAX ? UINT_MAX : (uInt)want;
    uInt before_in = r->zs.avail_in;
    uInt before_out = r->zs.avail_out;
    int z = inflate(&r->zs, Z_NO_FLUSH);
    size_t produced = before_out - r->zs.avail_out;
    *got += produced;
    r->out_offset += produced;
    r->in_offset += before_in - r->zs.avail_in;
    switch (z) {
    case Z_OK:
        return 0;
    case Z_STREAM_END:
        r->member_end = 1;
        return 0;
    case Z_BUF_ERROR: /* no progress possible with input left: cannot happen, but be safe */
        return gz_truncated(r);
    case Z_MEM_ERROR:
        return dt_fail(DT_ERUNTIME, "%s: out of memory inflating", r->path);
    default: /* Z_DATA_ERROR, Z_NEED_DICT, Z_STREAM_ERROR */
        return gz_data_error(r);
    }
}

int dt_gz_read(struct dt_gz_reader *r, void *buf, size_t len, size_t *got)
{
    uint8_t *out = buf;
    *got = 0;
    if (r->out_offset > r->limit)
        return gz_over_limit(r);
    while (*got < len && !r->done) {
        int rc = 0;
        if (r->plain) {
            size_t want = len - *got;
            if (want > r->limit - r->out_offset + 1)
                want = (size_t)(r->limit - r->out_offset + 1);
            size_t n = fread(out + *got, 1, want, r->f);
            if (n == 0 && ferror(r->f))
                return gz_io_error(r);
            r->done = n == 0;
            *got += n;
            r->out_offset += n;
        } else if (r->member_end) {
            rc = gz_next_member(r);
        } else {
            rc = gz_inflate_some(r, out, len, got);
        }
        if (rc < 0)
            return rc;
        if (r->out_offset > r->limit)
            return gz_over_limit(r);
    }
    return 0;
}

int dt_gz_skip(struct dt_gz_reader *r, size_t len, size_t *got)
{
    uint8_t scratch[16384];
    *got = 0;
    while (*got < len) {
        size_t want = len - *got < sizeof(scratch) ? len - *got : sizeof(scratch);
        size_t n;
        int rc = dt_gz_read(r, scratch, want, &n);
        if (rc < 0)
            return rc;
        *got += n;
        if (n < want)
            break;
    }
    return 0;
}

/* The last member's ISIZE when it is plausible for the file, else 0: only a hint. */
static size_t gz_size_hint(struct dt_gz_reader *r)
{
    uint8_t t[4];
    if (r->plain)
        return (size_t)r->file_size;
    if (r->file_size < 18 || pread(fileno(r->f), t, 4, (off_t)r->file_size - 4) != 4)
        return 0;
    size_t isize = (size_t)t[0] | (size_t)t[1] << 8 | (size_t)t[2] << 16 | (size_t)t[3] << 24;
    return isize <= dt_gz_plausible_size(r) ? isize : 0;
}

static int gz_drain(struct dt_gz_reader *r, uint8_t **data, size_t *len)
{
    size_t cap = gz_size_hint(r) + 1, size = 0; /* +1: the read that finds the end */
    if (cap < 65536)
        cap = 65536;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf)
            return dt_fail(DT_ERUNTIME, "%s: out of memory (%zu bytes)", r->path, cap);
        size_t want = cap - size, got;
        int rc = dt_gz_read(r, buf + size, want, &got);
        if (rc < 0) {
            free(buf);
            return rc;
        }
        size += got;
        if (got < want)
            break;
        /* dt_gz_read fails past r->limit, so the buffer never needs more than limit + 1 */
        cap = cap * 2 > r->limit + 1 ? (size_t)r->limit + 1 : cap * 2;
        uint8_t *grown = realloc(buf, cap);
        if (!grown)
            free(buf);
        buf = grown;
    }
    uint8_t *fit = realloc(buf, size ? size : 1);
    *data = fit ? fit : buf;
    *len = size;
    return 0;
}

int dt_gz_read_all(const char *path, uint8_t **data, size_t *len)
{
    struct dt_gz_reader *r;
    *data = NULL;
    *len = 0;
    int rc = dt_gz_open(&r, path);
    if (rc < 0)
        return rc;
    rc = gz_drain(r, data, len);
    dt_gz_close(r);
    return rc;
}

int dt_gz_read_any(const char *path, uint8_t **data, size_t *len)
{
    struct dt_gz_reader *r;
    *data = NULL;
    *len = 0;
    int rc = dt_gz_open_any(&r, path);
    if (rc < 0)
        return rc;
    rc = gz_drain(r, data, len);
    dt_gz_close(r);
    return rc;
}

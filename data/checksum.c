/* One-pass file digests (MD5, SHA-256, SHA-256 of the gzip content) and the verification rule
 * shared by `fetch` and `fetch --verify`.
 *
 * Reading a 170 MB archive once instead of three times matters more than anything else here,
 * so the raw digests and the inflater are fed from the same read buffer. Gzip members are
 * followed to the end of the file (concatenated members are legal gzip and pigz writes them;
 * zero padding after the last one is accepted, as the readers do);
 * a stream that fails to inflate leaves content_sha256 empty and gzip_ok 0, which verification
 * reports as such rather than failing the digest call: the archive digests are still valid. */
#include "data/checksum.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <zlib.h>

#include "data/gzip.h"
#include "util/err.h"
#include "util/fileio.h"

#define CHUNK (1 << 16)

struct hasher {
    EVP_MD_CTX *md5, *sha, *content;
    z_stream z;
    int inflating;   /* inflateInit2 done and stream not failed */
    int member_done; /* the current gzip member ended; more bytes start a new one */
    int padding;     /* zero padding after the last member */
    int want_content;
    int started;
    uint64_t content_limit; /* decompressed bytes, all members together */
    unsigned char out[CHUNK];
    struct dt_digests *d;
};

const char *dt_match_name(enum dt_match m)
{
    switch (m) {
    case DT_MATCH_SHA256:
        return "sha256";
    case DT_MATCH_MD5:
        return "md5";
    case DT_MATCH_CONTENT_SHA256:
        return "content-sha256";
    case DT_MATCH_UNCHECKED:
        return "size-only";
    case DT_MATCH_TRUSTED:
        return "trusted-sha256";
    case DT_MATCH_NONE:
        break;
    }
    return "none";
}

int dt_hex_equal(const char *a, const char *b)
{
    return a && b && a[0] && strcasecmp(a, b) == 0;
}

static void to_hex(const unsigned char *bytes, unsigned n, char *hex)
{
    static const char digits[] = "0123456789abcdef";
    for (unsigned i = 0; i < n; i++) {
        hex[2 * i] = digits[bytes[i] >> 4];
        hex[2 * i + 1] = digits[bytes[i] & 15];
    }
    hex[2 * n] = 0;
}

static void finish_digest(EVP_MD_CTX *ctx, char *hex)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    if (EVP_DigestFinal_ex(ctx, md, &n) == 1)
        to_hex(md, n, hex);
    else
        hex[0] = 0;
}

static int hasher_init(struct hasher *h, int want_content, struct dt_digests *d)
{
    memset(d, 0, sizeof *d);
    h->d = d;
    h->content_limit = DT_GZ_MAX_BYTES;
    h->want_content = want_content;
    h->started = 0;
    h->inflating = 0;
    h->member_done = 0;
    h->padding = 0;
    h->md5 = EVP_MD_CTX_new();
    h->sha = EVP_MD_CTX_new();
    h->content = EVP_MD_CTX_new();
    if (!h->md5 || !h->sha || !h->content || !EVP_DigestInit_ex(h->md5, EVP_md5(), NULL) ||
        !EVP_DigestInit_ex(h->sha, EVP_sha256(), NULL) ||
        !EVP_DigestInit_ex(h->content, EVP_sha256(), NULL))
        return dt_fail(DT_ERUNTIME, "cannot initialise OpenSSL digests");
    return 0;
}

static void hasher_free(struct hasher *h)
{
    if (h->inflating)
        inflateEnd(&h->z);
    EVP_MD_CTX_free(h->md5);
    EVP_MD_CTX_free(h->sha);
    EVP_MD_CTX_free(h->content);
}

static void start_inflate(struct hasher *h, const unsigned char *data, size_t len)
{
    h->started = 1;
    h->d->is_gzip = len >= 2 && data[0] == 0x1f && data[1] == 0x8b;
    if (!h->want_content || !h->d->is_gzip)
        return;
    memset(&h->z, 0, sizeof h->z);
    h->inflating = inflateInit2(&h->z, 16 + MAX_WBITS) == Z_OK;
}

static void stop_inflate(struct hasher *h)
{
    h->d->gzip_ok = 0;
    inflateEnd(&h->z);
    h->inflating = 0;
}

/* Zero bytes after the last member are padding (as data/gzip.c accepts); anything else that
 * follows must be another member. */
static void skip_padding(struct hasher *h, const unsigned char *data, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (data[i] != 0)
            return stop_inflate(h);
}

/* Feeds compressed bytes to the inflater, member after member. */
static void feed_inflate(struct hasher *h, const unsigned char *data, size_t len)
{
    while (h->inflating && len > 0) {
        if (h->member_done && data[0] == 0)
            h->padding = 1;
        if (h->padding) {
            skip_padding(h, data, len);
            return;
        }
        if (h->member_done) {
            if (inflateReset(&h->z) != Z_OK)
                return stop_inflate(h);
            h->member_done = 0;
            h->d->gzip_ok = 0;
        }
        h->z.next_in = (unsigned char *)data;
        h->z.avail_in = (uInt)len;
        h->z.next_out = h->out;
        h->z.avail_out = CHUNK;
        int zr = inflate(&h->z, Z_NO_FLUSH);
        size_t produced = CHUNK - h->z.avail_out, used = len - h->z.avail_in;
        EVP_DigestUpdate(h->content, h->out, produced);
        h->d->content_size += produced;
        data += used;
        len -= used;
        /* The count runs over every member: many small ones must not add up to gigabytes. */
        if (h->d->content_size > h->content_limit) {
            h->d->content_too_large = 1;
            return stop_inflate(h);
        }
        if (zr == Z_STREAM_END) {
            h->member_done = 1;
            h->d->gzip_ok = 1;
        } else if (zr != Z_OK && !(zr == Z_BUF_ERROR && produced + used > 0)) {
            return stop_inflate(h);
        }
    }
}

static void hasher_update(struct hasher *h, const unsigned char *data, size_t len)
{
    if (!h->started)
        start_inflate(h, data, len);
    EVP_DigestUpdate(h->md5, data, len);
    EVP_DigestUpdate(h->sha, data, len);
    h->d->size += len;
    if (h->inflating)
        feed_inflate(h, data, len);
}

static void hasher_final(struct hasher *h)
{
    finish_digest(h->md5, h->d->md5);
    finish_digest(h->sha, h->d->sha256);
    /* A stream cut short (no Z_STREAM_END for the last member) is not valid content. */
    if (h->inflating && h->d->gzip_ok)
        finish_digest(h->content, h->d->content_sha256);
    else
        h->d->gzip_ok = 0;
}

int dt_checksum_buffer(const void *data, size_t len, int want_content, struct dt_digests *out)
{
    struct hasher h;
    int rc = hasher_init(&h, want_content, out);
    if (!rc) {
        hasher_update(&h, data, len);
        hasher_final(&h);
    }
    hasher_free(&h);
    return rc;
}

int dt_checksum_file(const char *path, int want_content, struct dt_digests *out)
{
    return dt_checksum_file_limited(path, want_content, DT_GZ_MAX_BYTES, out);
}

int dt_checksum_file_limited(const char *path, int want_content, uint64_t max_content,
                             struct dt_digests *out)
{
    FILE *f;
    int rc = dt_open_regular(path, &f, NULL);
    if (rc < 0)
        return rc;
    struct hasher *h = malloc(sizeof *h);
    unsigned char *buf = malloc(CHUNK);
    rc = h && buf ? hasher_init(h, want_content, out)
                  : dt_fail(DT_ERUNTIME, "%s: out of memory", path);
    if (!rc)
        h->content_limit = max_content;
    size_t n;
    while (!rc && (n = fread(buf, 1, CHUNK, f)) > 0)
        hasher_update(h, buf, n);
    if (!rc && ferror(f))
        rc = dt_fail(DT_EDATA, "%s: read error: %s", path, strerror(errno));
    if (!rc)
        hasher_final(h);
    if (h)
        hasher_free(h);
    free(h);
    free(buf);
    fclose(f);
    return rc;
}

static enum dt_match match_published(const struct dt_reg_file *f, const struct dt_digests *d)
{
    if (dt_hex_equal(f->sha256, d->sha256))
        return DT_MATCH_SHA256;
    if (dt_hex_equal(f->md5, d->md5))
        return DT_MATCH_MD5;
    if (dt_hex_equal(f->content_sha256, d->content_sha256))
        return DT_MATCH_CONTENT_SHA256;
    return DT_MATCH_NONE;
}

/* "expected md5 X or content-sha256 Y, found md5 A, content-sha256 B" */
static void describe_mismatch(const struct dt_reg_file *f, const struct dt_digests *d, char *msg,
                              size_t cap)
{
    size_t len = (size_t)snprintf(msg, cap, "expected");
    const char *sep = " ";
    if (f->sha256)
        len += (size_t)snprintf(msg + len, cap - len, "%ssha256 %s", sep, f->sha256), sep = " or ";
    if (f->md5)
        len += (size_t)snprintf(msg + len, cap - len, "%smd5 %s", sep, f->md5), sep = " or ";
    if (f->content_sha256)
        len +=
            (size_t)snprintf(msg + len, cap - len, "%scontent-sha256 %s", sep, f->content_sha256);
    len += (size_t)snprintf(msg + len, cap - len, ", found");
    sep = " ";
    if (f->sha256 || !f->md5)
        len += (size_t)snprintf(msg + len, cap - len, "%ssha256 %s", sep, d->sha256), sep = ", ";
    if (f->md5)
        len += (size_t)snprintf(msg + len, cap - len, "%smd5 %s", sep, d->md5), sep = ", ";
    if (f->content_sha256)
        snprintf(msg + len, cap - len, "%scontent-sha256 %s", sep,
                 d->content_sha256[0] ? d->content_sha256 : "(not a valid gzip stream)");
}

static int content_too_large(const struct dt_digests *d, const char *label)
{
    return dt_fail(DT_EDATA,
                   "%s: gzip content inflates past the size limit (stopped after %llu bytes; not "
                   "a dataset file)",
                   label, (unsigned long long)d->content_size);
}

static int verify_unchecked(const struct dt_reg_file *f, const struct dt_digests *d,
                            const char *label)
{
    if (d->content_too_large)
        return content_too_large(d, label);
    if (f->size && d->size != f->size)
        return dt_fail(DT_EDATA, "%s: size mismatch: expected %zu bytes, found %llu", label,
                       f->size, (unsigned long long)d->size);
    if (d->is_gzip && !d->gzip_ok)
        return dt_fail(DT_EDATA, "%s: corrupt gzip stream (truncated or bad CRC)", label);
    return 0;
}

int dt_checksum_verify(const char *path, const struct dt_reg_file *f, const char *label,
                       enum dt_match *match)
{
    struct dt_digests d;
    if (!label)
        label = path;
    *match = DT_MATCH_NONE;
    int rc = dt_checksum_file(path, f->content_sha256 || !dt_reg_file_has_checksum(f), &d);
    if (rc)
        return rc;
    if (!dt_reg_file_has_checksum(f)) {
        rc = verify_unchecked(f, &d, label);
        if (!rc)
            *match = DT_MATCH_UNCHECKED;
        return rc;
    }
    *match = match_published(f, &d);
    if (*match != DT_MATCH_NONE)
        return 0;
    /* A trusted checksum vouches for the bytes, not for what they inflate to: the bound first. */
    if (d.content_too_large)
        return content_too_large(&d, label);
    char trusted[65];
    if (dt_trust_read(path, trusted) == 0 && dt_hex_equal(trusted, d.sha256)) {
        *match = DT_MATCH_TRUSTED;
        return 0;
    }
    char msg[600];
    describe_mismatch(f, &d, msg, sizeof msg);
    return dt_fail(DT_EDATA, "%s: checksum mismatch: %s", label, msg);
}

/* ---- trust records ---- */

int dt_is_sha256_hex(const char *s)
{
    size_t n = 0;
    for (; s && s[n]; n++)
        if (!strchr("0123456789abcdefABCDEF", s[n]))
            return 0;
    return n == 64;
}

static int trust_path(char *out, size_t cap, const char *path)
{
    return (size_t)snprintf(out, cap, "%s" DT_TRUST_SUFFIX, path) < cap ? 0 : -1;
}

int dt_trust_read(const char *path, char hex[65])
{
    char record[4200], line[128];
    if (trust_path(record, sizeof record, path))
        return 1;
    /* Through the regular-file open: a FIFO planted as the record must not hang fetch. */
    FILE *f;
    if (dt_open_regular(record, &f, NULL)) {
        dt_clear_error(); /* no record (or no usable one): the file is simply not trusted */
        return 1;
    }
    int ok = fgets(line, sizeof line, f) && strlen(line) > 64 && strchr(" \t\n", line[64]);
    fclose(f);
    if (!ok)
        return 1;
    line[64] = 0;
    if (!dt_is_sha256_hex(line))
        return 1;
    memcpy(hex, line, 65);
    return 0;
}

int dt_trust_write(const char *path, const char *hex)
{
    char record[4200], text[4300];
    if (trust_path(record, sizeof record, path) || !dt_is_sha256_hex(hex))
        return dt_fail(DT_ERUNTIME, "%s: cannot record a trusted checksum", path);
    const char *base = strrchr(path, '/');
    int n = snprintf(text, sizeof text, "%s  %s\n", hex, base ? base + 1 : path);
    return dt_write_file_atomic(record, text, (size_t)n);
}

void dt_trust_remove(const char *path)
{
    char record[4200];
    if (trust_path(record, sizeof record, path) == 0)
        unlink(record);
}

/* Checksums of dataset files: MD5 and SHA-256 of the bytes as stored, and SHA-256 of the
 * gzip-decompressed content, all computed in one pass over the file (OpenSSL EVP, zlib).
 *
 * The content digest exists because distributions recompress archives (Debian's Fashion-MNIST):
 * the archive checksum then differs from the published one while the data is identical. A file
 * is accepted when any published checksum matches, and the result says which one did. */
#ifndef DT_DATA_CHECKSUM_H
#define DT_DATA_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

#include "data/registry.h"

struct dt_digests {
    char md5[33];
    char sha256[65];
    char content_sha256[65]; /* "" when the file is not gzip or does not decompress */
    uint64_t size;           /* bytes as stored */
    uint64_t content_size;   /* decompressed bytes (gzip only) */
    int is_gzip;             /* starts with the gzip magic */
    int gzip_ok;             /* decompressed to its end with valid CRCs (gzip only) */
    int content_too_large;   /* inflating stopped at the content limit (all members together) */
};

/* Which identity check accepted a file. */
enum dt_match {
    DT_MATCH_NONE = 0,
    DT_MATCH_SHA256,         /* archive SHA-256 equals the published one */
    DT_MATCH_MD5,            /* archive MD5 equals the published one */
    DT_MATCH_CONTENT_SHA256, /* decompressed content SHA-256 equals the published one */
    DT_MATCH_UNCHECKED,      /* no published checksum: size and gzip integrity only */
    DT_MATCH_TRUSTED,        /* SHA-256 equals the one recorded in FILE.sha256 (fetch --trust) */
};

/* "sha256", "md5", "content-sha256", "size-only", "trusted-sha256" (for --json and messages). */
const char *dt_match_name(enum dt_match m);

/* Digests of a file in one pass. The content digest is computed only when want_content and the
 * file starts with the gzip magic. Returns 0, or -DT_EDATA naming the path (missing/unreadable). */
int dt_checksum_file(const char *path, int want_content, struct dt_digests *out);
/* The same with a cap on the decompressed content (dt_checksum_file uses DT_GZ_MAX_BYTES):
 * content that inflates to more, counted over all gzip members, is not decompressed further;
 * it leaves content_sha256 empty and sets content_too_large. Only a regular file is read. */
int dt_checksum_file_limited(const char *path, int want_content, uint64_t max_content,
                             struct dt_digests *out);
/* The same for a memory buffer (tests, small files). */
int dt_checksum_buffer(const void *data, size_t len, int want_content, struct dt_digests *out);

/* Checks `path` against the registry entry. Returns 0 with *match set, or -DT_EDATA with a
 * one-line message naming the file and showing the expected and the found checksums. `label`
 * names the file in messages (the path when NULL). A file that matches no published checksum
 * is still accepted (DT_MATCH_TRUSTED) when its SHA-256 is the one its trust record holds. */
int dt_checksum_verify(const char *path, const struct dt_reg_file *f, const char *label,
                       enum dt_match *match);

/* Trust records: `fetch --trust` / `--sha256 HEX` accept a local file whose checksum is not the
 * registry's, on the user's word, and record the SHA-256 they vouched for beside it, in
 * PATH.sha256 ("HEX  NAME\n", sha256sum's format, so `sha256sum -c` reads it too). A later
 * verification accepts the file while it still has that SHA-256. */
#define DT_TRUST_SUFFIX ".sha256"

/* The SHA-256 recorded for `path` into hex (65 bytes): 0, or 1 when there is no well-formed
 * record (absent, unreadable, not 64 hex digits). Never sets an error. */
int dt_trust_read(const char *path, char hex[65]);
/* Records `hex` for `path`, atomically. 0 or -DT_ERUNTIME naming the record file. */
int dt_trust_write(const char *path, const char *hex);
/* Removes the record of `path`, if any (a file verified against the registry needs none). */
void dt_trust_remove(const char *path);
/* True when s is exactly 64 hex digits. */
int dt_is_sha256_hex(const char *s);

/* Case-insensitive comparison of two hex strings; NULL or "" never match. */
int dt_hex_equal(const char *a, const char *b);

#endif

/* Reading gzip files with zlib: a streaming reader and a whole-file convenience.
 *
 * Dataset archives are gzip files (possibly several concatenated members, as `cat a.gz b.gz`
 * or pigz produce). The streaming reader inflates on demand into the caller's buffer, so the
 * CIFAR tar can be parsed while it is being inflated and never exists in memory as a whole.
 * dt_gz_read_all() is the same reader draining into a buffer that grows geometrically: the
 * ISIZE trailer is used only as a hint, and only when it is plausible for the compressed size
 * (deflate cannot expand more than ~1032:1), so a lying header cannot make us allocate memory
 * the data does not fill. Every problem (missing file, bad magic, truncation, CRC mismatch,
 * corrupt deflate data, trailing garbage) fails with DT_EDATA and one line naming the file.
 *
 * A reader opened with dt_gz_open_plain() reads an uncompressed file through the same API, so
 * format readers accept "train-images-idx3-ubyte" as well as its .gz.
 */
#ifndef DT_DATA_GZIP_H
#define DT_DATA_GZIP_H

#include <stddef.h>
#include <stdint.h>

/* Decompressed data larger than this is refused (no dataset we read comes close). The count
 * runs over the whole file, all gzip members together: a file of many small members cannot
 * add up to more. */
#define DT_GZ_MAX_BYTES ((size_t)2 << 30)

struct dt_gz_reader;

/* Opens a gzip file; checks its magic bytes. Only a regular file is opened: a directory, FIFO,
 * device or socket fails with DT_EDATA saying what it is (and a FIFO does not block). */
int dt_gz_open(struct dt_gz_reader **out, const char *path);
/* Opens an uncompressed file for the same read API. */
int dt_gz_open_plain(struct dt_gz_reader **out, const char *path);
/* Opens a file that may be compressed or not: gzip when it starts with the gzip magic. */
int dt_gz_open_any(struct dt_gz_reader **out, const char *path);
/* Sets the most bytes the reader delivers, all gzip members together (default and maximum
 * DT_GZ_MAX_BYTES); a read past it fails with DT_EDATA "decompressed data exceeds the ...
 * limit". Call right after opening. Also caps dt_gz_plausible_size(). */
void dt_gz_set_limit(struct dt_gz_reader *r, uint64_t max_bytes);
uint64_t dt_gz_limit(const struct dt_gz_reader *r);
/* Reads up to len bytes into buf; *got is less than len only at the end of the data.
 * Returns 0 or -DT_EDATA (truncated, CRC mismatch, corrupt data, I/O error). */
int dt_gz_read(struct dt_gz_reader *r, void *buf, size_t len, size_t *got);
/* Discards len bytes; *got as for dt_gz_read. */
int dt_gz_skip(struct dt_gz_reader *r, size_t len, size_t *got);
/* Bytes delivered so far (decompressed offset). */
uint64_t dt_gz_offset(const struct dt_gz_reader *r);
/* Upper bound on the decompressed size this file could have (deflate's maximum ratio applied
 * to the file size, capped at the reader's limit): a safe limit for allocations sized from
 * headers inside the data. */
size_t dt_gz_plausible_size(const struct dt_gz_reader *r);
const char *dt_gz_path(const struct dt_gz_reader *r);
void dt_gz_close(struct dt_gz_reader *r);

/* Reads a whole gzip file (all members) into a malloc'd buffer. */
int dt_gz_read_all(const char *path, uint8_t **data, size_t *len);
/* Same for a file that may be compressed or not: gzip when it starts with the gzip magic. */
int dt_gz_read_any(const char *path, uint8_t **data, size_t *len);

#endif

/* File helpers shared by checkpoints and downloads: whole-file reads, directory creation, and
 * atomic replacement. An atomic file is written under "<path>.tmp.<pid>", fsync'd, renamed over
 * the final name and the directory fsync'd, so a crash leaves either the old file or the new
 * one, never a torn one. */
#ifndef DT_UTIL_FILEIO_H
#define DT_UTIL_FILEIO_H

#include <stdio.h>
#include <stddef.h>
#include <stdint.h>

struct dt_atomic_file {
    FILE *f;
    char path[4096];
    char tmp_path[4200];
};

/* Opens a regular file for reading ("rb"); *size gets its size (may be NULL). Anything else
 * (a directory, a FIFO, a device, a socket) is refused with DT_EDATA naming the path and what
 * it is, without blocking: the open is O_NONBLOCK, so a FIFO with no writer cannot hang it. */
int dt_open_regular(const char *path, FILE **f, uint64_t *size);
/* Reads a whole regular file into a malloc'd buffer (NUL-terminated for convenience), refusing
 * one larger than max_bytes ("PATH: larger than N bytes") so a wrong path (a log, /dev/zero, a
 * disk image) costs nothing. DT_EDATA when missing, unreadable, not a regular file or too
 * large, naming the path. */
int dt_read_file_max(const char *path, size_t max_bytes, char **data, size_t *len);
/* dt_read_file_max with DT_READ_FILE_MAX (1 GiB): for files with no tighter bound of their own. */
#define DT_READ_FILE_MAX ((size_t)1 << 30)
int dt_read_file(const char *path, char **data, size_t *len);
/* mkdir -p; DT_ERUNTIME naming the directory that could not be made. */
int dt_mkdir_p(const char *dir);

int dt_atomic_open(struct dt_atomic_file *af, const char *path);
/* The same under the caller's temp name (same directory as path, for the rename). The temp
 * file is flock()ed LOCK_EX until commit or abort closes it (train/rundir.h's sweep tests it). */
int dt_atomic_open_as(struct dt_atomic_file *af, const char *path, const char *tmp_path);
/* Flushes, fsyncs, renames into place. On failure the temp file is removed. */
int dt_atomic_commit(struct dt_atomic_file *af);
/* Discards the temp file (on any error path before commit). Safe to call twice. */
void dt_atomic_abort(struct dt_atomic_file *af);
/* Convenience: write one buffer atomically. */
int dt_write_file_atomic(const char *path, const void *data, size_t len);
/* ... under tmp_path (NULL: "<path>.tmp.<pid>"). */
int dt_write_file_atomic_as(const char *path, const char *tmp_path, const void *data, size_t len);

#endif

/* CIFAR-10 / CIFAR-100 binary archives, read straight from the .tar.gz, and the strict
 * streaming tar reader they need.
 *
 * CIFAR-10 (cifar-10-binary.tar.gz): cifar-10-batches-bin/data_batch_1..5.bin (train, in that
 * order), test_batch.bin, batches.meta.txt (class names, one a line). Records are 1 label byte
 * + 3072 pixel bytes (1024 R, 1024 G, 1024 B: already CHW).
 * CIFAR-100 (cifar-100-binary.tar.gz): cifar-100-binary/train.bin, test.bin,
 * fine_label_names.txt, coarse_label_names.txt. Records are 2 label bytes (coarse, fine) +
 * 3072 pixel bytes.
 * Members are found by base name whatever directory they sit in; each must appear exactly once.
 */
#ifndef DT_DATA_CIFAR_H
#define DT_DATA_CIFAR_H

#include <stdint.h>

#include "data/dataset.h"
#include "data/gzip.h"

/* ---- tar (ustar, GNU and pax headers), read while inflating ---- */

#define DT_TAR_NAME_MAX 4096

struct dt_tar {
    struct dt_gz_reader *gz;
    uint64_t offset;            /* archive offset of the next byte the reader will consume */
    uint64_t remaining;         /* unread data bytes of the current member */
    uint64_t padding;           /* pad bytes after the current member's data */
    char name[DT_TAR_NAME_MAX]; /* current member's path */
    uint64_t size;              /* current member's size */
};

/* Opens a gzip-compressed tar archive. */
int dt_tar_open(struct dt_tar *t, const char *path);
/* Advances to the next regular file (skipping what is left of the current one, directories,
 * links and pax/GNU extension headers, whose names and sizes apply to the next member).
 * Returns 1 with t->name and t->size set, 0 at the end-of-archive marker, or -DT_EDATA
 * (bad checksum, bad size field, truncated archive). */
int dt_tar_next(struct dt_tar *t);
/* Reads exactly len bytes (len <= t->remaining) of the current member. */
int dt_tar_read(struct dt_tar *t, void *buf, size_t len);
void dt_tar_close(struct dt_tar *t);
/* The last path component of a member name ("a/b/c.bin" -> "c.bin"). */
const char *dt_tar_basename(const char *name);

/* ---- CIFAR ---- */

/* The most a CIFAR archive may inflate to, all gzip members together. The published archives
 * inflate to 184 MB (176 MiB) each; a file that inflates to more is not one of them, and is
 * refused before it costs more than this in time or memory. */
#define DT_CIFAR_MAX_BYTES ((uint64_t)256 << 20)

/* Loads both splits from the archive at `path`. cifar100 selects the format; classes 0 means
 * the format's own (10, 100, or 20 with coarse_labels). A member whose size is more than the
 * archive can hold (a size near 2^64 included) fails with DT_EDATA naming the archive and the
 * member, whether the member is wanted or skipped. */
int dt_cifar_load_limited(struct dt_data *out, const char *path, int cifar100, int classes,
                          int coarse_labels, uint64_t max_bytes);
/* dt_cifar_load_limited with DT_CIFAR_MAX_BYTES. */
int dt_cifar_load(struct dt_data *out, const char *path, int cifar100, int classes,
                  int coarse_labels);

#endif

/* The datasets dtrain knows by name: their format, files, class names, where to download them
 * and how to recognise a good copy. One built-in table in data/registry.c; `dtrain fetch --list`,
 * the configs' data.dataset and the readers all consult it.
 *
 * A registry file (JSON, see docs/fetch.md) can add entries or replace built-in ones by name:
 * internal datasets, internal mirrors, and the tests' local server. Loading one changes the
 * process-wide view that dt_registry_find/all/names return until dt_registry_unload(). */
#ifndef DT_DATA_REGISTRY_H
#define DT_DATA_REGISTRY_H

#include <stddef.h>

#include "data/load.h" /* enum dt_data_format */

#define DT_REG_MAX_FILES   4
#define DT_REG_MAX_MIRRORS 4

struct dt_reg_file {
    const char *name;           /* file name as stored: "train-images-idx3-ubyte.gz" */
    size_t size;                /* published archive size in bytes (0 = unknown) */
    const char *md5;            /* published checksum of the archive (hex), or NULL */
    const char *sha256;         /* SHA-256 of the archive (hex), or NULL */
    const char *content_sha256; /* SHA-256 of the decompressed content, or NULL */
};

struct dt_reg_dataset {
    const char *name;           /* "fashion-mnist" */
    enum dt_data_format format; /* DT_DATA_IDX, DT_DATA_CIFAR10 or DT_DATA_CIFAR100 */
    const char *description;
    int classes;
    const char *const *class_names; /* classes entries, or NULL (CIFAR reads its meta file) */
    const char *mirrors[DT_REG_MAX_MIRRORS]; /* base URLs, tried in order, ending in '/' */
    int nfiles;
    struct dt_reg_file files[DT_REG_MAX_FILES];
    const char *system_dir; /* a distribution's copy (Debian's dataset-fashion-mnist), or NULL */
};

const struct dt_reg_dataset *dt_registry_find(const char *name);
/* All entries, for --list; *count gets their number. */
const struct dt_reg_dataset *dt_registry_all(size_t *count);
/* "mnist, fashion-mnist, ..." for error messages. */
const char *dt_registry_names(void);

/* Where datasets live by default: $DTRAIN_DATA, or "data" when it is unset or empty. Each
 * dataset is the directory ROOT/NAME. */
const char *dt_data_root(void);

/* A registry file is a few KiB of JSON; one larger than this is refused unread. */
#define DT_REGISTRY_FILE_MAX ((size_t)1 << 20)

/* Loads a registry file: its entries replace built-in ones of the same name and the others are
 * appended. Returns 0, or -DT_EUSAGE naming the file and the offending key (or saying it is not
 * a regular file, or larger than DT_REGISTRY_FILE_MAX). Loading a second file replaces the
 * first. */
int dt_registry_load(const char *path);
/* Back to the built-in table only; frees what dt_registry_load allocated. */
void dt_registry_unload(void);

/* True when the file has at least one published checksum (md5, sha256 or content_sha256). */
int dt_reg_file_has_checksum(const struct dt_reg_file *f);

#endif

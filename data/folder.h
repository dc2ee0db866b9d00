/* Image folders, laid out as torchvision's ImageFolder reads them:
 *
 *   DIR/train/<class>/<image>   DIR/test/<class>/<image>   (DIR/val/<class>/<image> optional)
 *
 * Classes are the sub-directories of train/, sorted by byte value (Python's sorted()); class i
 * is the i-th. test/ and val/ must have the same class folders. Within a class, files are
 * sorted by name too, so the sample order is fixed: class 0's files, then class 1's, and so
 * on. Names starting with '.' are skipped; only names ending in .png, .jpg or .jpeg (any case)
 * are images, other files are ignored. An image name that is not a readable regular file (a
 * directory, a FIFO, a dangling symlink or a symlink loop) counts as a bad image. A class
 * folder with no images, or train/ with no class folders, is an error.
 *
 * Images are decoded on all usable cores (plain threads, joined before the load returns: the
 * parent loads before it forks the ranks, and an OpenMP pool would not survive the fork), converted
 * to `channels` and fitted to h x w (data/image.h); h = w = 0 keeps the images' own size, which
 * must then be the same for all of them. A bad image fails the load naming the file, or with
 * skip_bad is left out and counted in dt_dataset.skipped.
 */
#ifndef DT_DATA_FOLDER_H
#define DT_DATA_FOLDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "data/dataset.h"

struct dt_folder_opts {
    int channels; /* 1 or 3 */
    int h, w;     /* target size, or 0, 0 */
    bool skip_bad;
    uint64_t max_pixels; /* pixel budget of one image (h x w); 0 = DT_IMAGE_MAX_PIXELS */
    int threads;         /* 0 = every CPU in this process's affinity mask */
    /* Called now and then from one thread with the images decoded so far in this split and
     * the split's total; the library prints nothing itself. May be NULL. */
    void (*progress)(void *ctx, const char *split, size_t done, size_t total);
    void *progress_ctx;
};

/* Loads one split from dir/<split>/<class>/... into d. `classes`/`nclasses`, when given,
 * are the class folder names the split must have, compared byte for byte with the names on
 * disk; NULL reads them from disk. d->names are the names for display: a control character
 * in a folder's name is '?' there (files are opened by their real paths). Error messages
 * show names with control characters as \xNN (util/printable.h). An image whose header
 * declares more than max_pixels pixels is a bad image, refused before it is decoded. */
int dt_folder_load_split(struct dt_dataset *d, const char *dir, const char *split,
                         char *const *classes, int nclasses, const struct dt_folder_opts *o);

/* Loads train and test (and val into *val when dir/val exists and val is not NULL; val->n
 * is 0 otherwise). */
int dt_folder_load(struct dt_data *out, struct dt_dataset *val, const char *dir,
                   const struct dt_folder_opts *o);

#endif

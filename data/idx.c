/* IDX reader (see idx.h).
 *
 * A file is decompressed whole into memory (47 MB for MNIST's training images), validated,
 * and then becomes the dataset array itself: the header is moved out of the way in place, so
 * the peak memory of a load is the dataset plus nothing but a 16-byte header. All sizes come
 * from the data actually read; the dims in the header are only compared against it.
 */
#include "data/idx.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/gzip.h"
#include "util/err.h"

#define IDX_IMAGES_MAGIC 0x00000803u
#define IDX_LABELS_MAGIC 0x00000801u
#define IDX_MAX_SIDE     65535u

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Checks magic and header length; *dims gets the header's dimensions. */
static int idx_header(const char *path, const uint8_t *buf, size_t len, uint32_t magic, int ndims,
                      uint32_t *dims)
{
    if (len < 4)
        return dt_fail(DT_EDATA, "%s: too short for an IDX header (%zu bytes)", path, len);
    uint32_t found = be32(buf);
    if (found != magic)
        return dt_fail(DT_EDATA, "%s: bad IDX magic 0x%08x, expected 0x%08x (%s)", path, found,
                       magic, ndims == 3 ? "images, 3 dims" : "labels, 1 dim");
    size_t header = 4 + 4 * (size_t)ndims;
    if (len < header)
        return dt_fail(DT_EDATA, "%s: truncated IDX header (%zu bytes, expected %zu)", path, len,
                       header);
    for (int i = 0; i < ndims; i++)
        dims[i] = be32(buf + 4 + 4 * i);
    if (dims[0] == 0)
        return dt_fail(DT_EDATA, "%s: empty dataset (0 %s)", path,
                       ndims == 3 ? "images" : "labels");
    return 0;
}

/* A .gz name must hold gzip data; any other name may hold either (told by the magic bytes,
 * read by the reader itself so that a FIFO or device is refused before anything reads it). */
static int idx_open(const char *path, struct dt_gz_reader **r)
{
    size_t n = strlen(path);
    bool gz = n > 3 && strcmp(path + n - 3, ".gz") == 0;
    return gz ? dt_gz_open(r, path) : dt_gz_open_any(r, path);
}

/* The header alone (4 + 4 * ndims bytes), checked: magic, dimensions. */
static int idx_read_header(struct dt_gz_reader *r, const char *path, uint32_t magic, int ndims,
                           uint32_t *dims)
{
    uint8_t hdr[16];
    size_t got = 0;
    int rc = dt_gz_read(r, hdr, 4 + 4 * (size_t)ndims, &got);
    return rc < 0 ? rc : idx_header(path, hdr, got, magic, ndims, dims);
}

/* Exactly `need` bytes of data after the header, and nothing after them: the payload is read
 * as the header sizes it, so a file that inflates to more (many gzip members, say) is refused
 * after need + 1 bytes instead of being decompressed whole. */
static int idx_read_payload(struct dt_gz_reader *r, const char *path, uint64_t need,
                            const char *dims_text, uint8_t **out)
{
    if (need > dt_gz_plausible_size(r))
        return dt_fail(DT_EDATA, "%s: dims %s need %llu bytes of data, more than the file can hold",
                       path, dims_text, (unsigned long long)need);
    uint8_t *buf = malloc(need ? (size_t)need : 1);
    if (!buf)
        return dt_fail(DT_ERUNTIME, "%s: out of memory (%llu bytes)", path,
                       (unsigned long long)need);
    size_t got = 0, extra = 0;
    uint8_t one;
    int rc = dt_gz_read(r, buf, (size_t)need, &got);
    if (rc == 0 && got == need)
        rc = dt_gz_read(r, &one, 1, &extra);
    if (rc == 0 && got != need)
        rc = dt_fail(DT_EDATA, "%s: dims %s need %llu bytes of data, found %zu", path, dims_text,
                     (unsigned long long)need, got);
    else if (rc == 0 && extra)
        rc = dt_fail(DT_EDATA, "%s: dims %s need %llu bytes of data, found more", path, dims_text,
                     (unsigned long long)need);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    *out = buf;
    return 0;
}

static int idx_read_images(struct dt_dataset *d, const char *path)
{
    struct dt_gz_reader *r;
    uint32_t dims[3];
    uint8_t *buf = NULL;
    int rc = idx_open(path, &r);
    if (rc < 0)
        return rc;
    rc = idx_read_header(r, path, IDX_IMAGES_MAGIC, 3, dims);
    if (rc == 0 &&
        (dims[1] == 0 || dims[2] == 0 || dims[1] > IDX_MAX_SIDE || dims[2] > IDX_MAX_SIDE))
        rc = dt_fail(DT_EDATA, "%s: bad image size %ux%u", path, dims[1], dims[2]);
    if (rc == 0) {
        char text[64];
        snprintf(text, sizeof(text), "%ux%ux%u", dims[0], dims[1], dims[2]);
        rc = idx_read_payload(r, path, (uint64_t)dims[0] * dims[1] * dims[2], text, &buf);
    }
    dt_gz_close(r);
    if (rc < 0)
        return rc;
    d->x = buf;
    d->n = dims[0];
    d->c = 1;
    d->h = (int)dims[1];
    d->w = (int)dims[2];
    return 0;
}

static int idx_read_labels(struct dt_dataset *d, const char *path, const char *images_path)
{
    struct dt_gz_reader *r;
    uint32_t n;
    uint8_t *buf = NULL;
    int rc = idx_open(path, &r);
    if (rc < 0)
        return rc;
    rc = idx_read_header(r, path, IDX_LABELS_MAGIC, 1, &n);
    if (rc == 0) {
        char text[32];
        snprintf(text, sizeof(text), "%u", n);
        rc = idx_read_payload(r, path, n, text, &buf);
    }
    dt_gz_close(r);
    if (rc == 0 && n != d->n)
        rc = dt_fail(DT_EDATA, "%s: %u labels, but %s has %zu images", path, n, images_path, d->n);
    for (uint32_t i = 0; rc == 0 && i < n; i++)
        if (buf[i] >= d->classes)
            rc = dt_fail(DT_EDATA, "%s: label %u of sample %u is out of range (classes %d)", path,
                         buf[i], i, d->classes);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    d->y = buf;
    return 0;
}

int dt_idx_load_split(struct dt_dataset *d, const char *images_path, const char *labels_path,
                      int classes)
{
    memset(d, 0, sizeof(*d));
    d->classes = classes > 0 ? classes : DT_IDX_DEFAULT_CLASSES;
    int rc = idx_read_images(d, images_path);
    if (rc == 0)
        rc = idx_read_labels(d, labels_path, images_path);
    if (rc < 0) {
        dt_dataset_free(d);
        return rc;
    }
    snprintf(d->source, sizeof(d->source), "%s, %s", images_path, labels_path);
    return 0;
}

/* dir/NAME.gz, or dir/NAME when only the uncompressed file exists. */
static void idx_path(char *out, size_t size, const char *dir, const char *name)
{
    snprintf(out, size, "%s/%s.gz", dir, name);
    if (access(out, F_OK) == 0)
        return;
    char plain[4096];
    snprintf(plain, sizeof(plain), "%s/%s", dir, name);
    if (access(plain, F_OK) == 0)
        snprintf(out, size, "%s", plain);
}

static int idx_load_named(struct dt_dataset *d, const char *dir, const char *images,
                          const char *labels, int classes)
{
    char ipath[4200], lpath[4200];
    idx_path(ipath, sizeof(ipath), dir, images);
    idx_path(lpath, sizeof(lpath), dir, labels);
    return dt_idx_load_split(d, ipath, lpath, classes);
}

int dt_idx_load_test(struct dt_dataset *test, const char *dir, int classes)
{
    memset(test, 0, sizeof *test);
    return idx_load_named(test, dir, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", classes);
}

int dt_idx_load(struct dt_data *out, const char *dir, int classes)
{
    memset(out, 0, sizeof(*out));
    int rc = idx_load_named(&out->train, dir, "train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                            classes);
    if (rc == 0)
        rc = idx_load_named(&out->test, dir, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte",
                            classes);
    if (rc == 0 && (out->test.h != out->train.h || out->test.w != out->train.w))
        rc = dt_fail(DT_EDATA,
                     "%s/t10k-images-idx3-ubyte.gz: images are %dx%d, but the training "
                     "images are %dx%d",
                     dir, out->test.h, out->test.w, out->train.h, out->train.w);
    if (rc < 0)
        dt_data_free(out);
    return rc;
}

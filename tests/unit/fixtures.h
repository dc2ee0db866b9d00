/* Test fixtures for the data/ readers, generated in C with zlib: IDX files, tar archives
 * (ustar, GNU long names, pax), CIFAR-10/100 binary archives, gzip in memory so tests can
 * damage any byte before writing. Nothing is committed as a binary blob.
 *
 * Pixel values and labels follow the same rules as tests/fixtures/mkdata.py, so a test can
 * recompute any sample: pixel k of sample i is fx_pixel(i, k) (test samples are numbered from
 * FX_TEST_BASE), the label of sample i is i % classes, and a CIFAR-100 coarse label is its
 * fine label / 5.
 *
 * Header-only (static inline) so every test binary can include it without a shared object.
 * Failures here abort the test: a fixture that cannot be built is a broken test machine.
 */
#ifndef DT_TESTS_FIXTURES_H
#define DT_TESTS_FIXTURES_H

#include <ftw.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define FX_TEST_BASE 1000000u

struct fx_buf {
    uint8_t *p;
    size_t n, cap;
};

static inline void fx_die(const char *what)
{
    fprintf(stderr, "fixture: %s\n", what);
    abort();
}

static inline void fx_put(struct fx_buf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        if (!b->p)
            fx_die("out of memory");
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, d, n);
    b->n += n;
}

static inline void fx_put_zeros(struct fx_buf *b, size_t n)
{
    static const uint8_t zeros[512];
    while (n) {
        size_t k = n < sizeof(zeros) ? n : sizeof(zeros);
        fx_put(b, zeros, k);
        n -= k;
    }
}

static inline void fx_free(struct fx_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

static inline uint8_t fx_pixel(uint64_t i, uint64_t k)
{
    return (uint8_t)((i * 7919 + k * 31 + (i * k) / 32) % 256);
}

static inline void fx_put_be32(struct fx_buf *b, uint32_t v)
{
    uint8_t t[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    fx_put(b, t, 4);
}

/* ---- files and directories ---- */

static inline void fx_mkdtemp(char *dir, size_t size)
{
    snprintf(dir, size, "/tmp/dtrain-test-XXXXXX");
    if (!mkdtemp(dir))
        fx_die("mkdtemp failed");
}

static inline int fx_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    return remove(path);
}

static inline void fx_rmtree(const char *dir)
{
    nftw(dir, fx_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static inline void fx_write(const char *path, const void *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(d, 1, n, f) != n || fclose(f) != 0)
        fx_die(path);
}

static inline void fx_path(char *out, size_t size, const char *dir, const char *name)
{
    snprintf(out, size, "%s/%s", dir, name);
}

/* ---- gzip ---- */

/* Appends one gzip member holding d[0..n) to out. */
static inline void fx_gzip_append(struct fx_buf *out, const void *d, size_t n)
{
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    if (deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        fx_die("deflateInit2");
    size_t bound = deflateBound(&zs, (uLong)n);
    struct fx_buf tmp = {0};
    fx_put_zeros(&tmp, bound);
    zs.next_in = (Bytef *)d;
    zs.avail_in = (uInt)n;
    zs.next_out = tmp.p;
    zs.avail_out = (uInt)bound;
    if (deflate(&zs, Z_FINISH) != Z_STREAM_END)
        fx_die("deflate");
    fx_put(out, tmp.p, zs.total_out);
    deflateEnd(&zs);
    fx_free(&tmp);
}

static inline void fx_write_gz(const char *path, const void *d, size_t n)
{
    struct fx_buf gz = {0};
    fx_gzip_append(&gz, d, n);
    fx_write(path, gz.p, gz.n);
    fx_free(&gz);
}

/* ---- IDX ---- */

/* Images file for samples first..first+n-1. */
static inline void fx_idx_images(struct fx_buf *b, uint32_t n, uint32_t h, uint32_t w,
                                 uint64_t first)
{
    fx_put_be32(b, 0x00000803u);
    fx_put_be32(b, n);
    fx_put_be32(b, h);
    fx_put_be32(b, w);
    for (uint64_t i = 0; i < n; i++)
        for (uint64_t k = 0; k < (uint64_t)h * w; k++) {
            uint8_t v = fx_pixel(first + i, k);
            fx_put(b, &v, 1);
        }
}

static inline void fx_idx_labels(struct fx_buf *b, uint32_t n, int classes)
{
    fx_put_be32(b, 0x00000801u);
    fx_put_be32(b, n);
    for (uint32_t i = 0; i < n; i++) {
        uint8_t v = (uint8_t)(i % (uint32_t)classes);
        fx_put(b, &v, 1);
    }
}

/* A complete, valid IDX directory (gzip'd files) with 28x28 images. */
static inline void fx_idx_dir(const char *dir, uint32_t ntrain, uint32_t ntest, int classes)
{
    static const char *names[4] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                   "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};
    for (int f = 0; f < 4; f++) {
        struct fx_buf b = {0};
        uint32_t n = f < 2 ? ntrain : ntest;
        if (f % 2 == 0)
            fx_idx_images(&b, n, 28, 28, f < 2 ? 0 : FX_TEST_BASE);
        else
            fx_idx_labels(&b, n, classes);
        char path[4200];
        fx_path(path, sizeof(path), dir, names[f]);
        fx_write_gz(path, b.p, b.n);
        fx_free(&b);
    }
}

/* ---- tar ---- */

static inline void fx_tar_octal(uint8_t *field, size_t len, uint64_t v)
{
    snprintf((char *)field, len, "%0*llo", (int)len - 1, (unsigned long long)v);
}

/* Fills the checksum of a header whose other fields are final. */
static inline void fx_tar_checksum(uint8_t *h)
{
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
}

/* A ustar header (POSIX magic); names up to 99 characters. */
static inline void fx_tar_header(struct fx_buf *b, const char *name, uint64_t size, char type)
{
    uint8_t h[512];
    memset(h, 0, sizeof(h));
    size_t len = strlen(name);
    memcpy(h, name, len < 99 ? len : 99);
    fx_tar_octal(h + 100, 8, 0644);
    fx_tar_octal(h + 108, 8, 1000);
    fx_tar_octal(h + 116, 8, 1000);
    fx_tar_octal(h + 124, 12, size);
    fx_tar_octal(h + 136, 12, 1300000000);
    h[156] = (uint8_t)type;
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    fx_tar_checksum(h);
    fx_put(b, h, sizeof(h));
}

static inline void fx_tar_data(struct fx_buf *b, const void *d, size_t n)
{
    fx_put(b, d, n);
    fx_put_zeros(b, (512 - n % 512) % 512);
}

static inline void fx_tar_member(struct fx_buf *b, const char *name, const void *d, size_t n)
{
    fx_tar_header(b, name, n, '0');
    fx_tar_data(b, d, n);
}

static inline void fx_tar_end(struct fx_buf *b)
{
    fx_put_zeros(b, 1024);
}

/* ---- CIFAR ---- */

static const char *const fx_cifar10_names[10] = {
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};

/* n records for samples first.. ; label_bytes 1 (CIFAR-10) or 2 (coarse, fine). */
static inline void fx_cifar_records(struct fx_buf *b, size_t n, uint64_t first, int label_bytes,
                                    int classes)
{
    for (uint64_t i = first; i < first + n; i++) {
        uint8_t label = (uint8_t)(i % (uint64_t)classes);
        if (label_bytes == 2) {
            uint8_t coarse = (uint8_t)(label / 5);
            fx_put(b, &coarse, 1);
        }
        fx_put(b, &label, 1);
        uint8_t px[3072];
        for (int k = 0; k < 3072; k++)
            px[k] = fx_pixel(i, (uint64_t)k);
        fx_put(b, px, sizeof(px));
    }
}

static inline void fx_cifar_member(struct fx_buf *tar, const char *name, size_t n, uint64_t first,
                                   int label_bytes, int classes)
{
    struct fx_buf r = {0};
    fx_cifar_records(&r, n, first, label_bytes, classes);
    fx_tar_member(tar, name, r.p, r.n);
    fx_free(&r);
}

/* CIFAR-10 tar (not yet gzip'd) in the published archive's member order, with `per_batch`
 * records per training batch; a member whose base name equals `omit` is left out. */
static inline void fx_cifar10_tar(struct fx_buf *tar, const char *dirname, size_t per_batch,
                                  size_t ntest, const char *omit)
{
    static const char *order[] = {"data_batch_1.bin", "batches.meta.txt", "data_batch_3.bin",
                                  "data_batch_4.bin", "test_batch.bin",   "readme.html",
                                  "data_batch_2.bin", "data_batch_5.bin"};
    char name[256];
    snprintf(name, sizeof(name), "%s/", dirname);
    fx_tar_header(tar, name, 0, '5');
    for (size_t m = 0; m < sizeof(order) / sizeof(order[0]); m++) {
        if (omit && strcmp(order[m], omit) == 0)
            continue;
        snprintf(name, sizeof(name), "%s/%s", dirname, order[m]);
        if (strncmp(order[m], "data_batch_", 11) == 0) {
            uint64_t batch = (uint64_t)(order[m][11] - '1');
            fx_cifar_member(tar, name, per_batch, batch * per_batch, 1, 10);
        } else if (strcmp(order[m], "test_batch.bin") == 0) {
            fx_cifar_member(tar, name, ntest, FX_TEST_BASE, 1, 10);
        } else if (strcmp(order[m], "batches.meta.txt") == 0) {
            struct fx_buf t = {0};
            for (int c = 0; c < 10; c++) {
                fx_put(&t, fx_cifar10_names[c], strlen(fx_cifar10_names[c]));
                fx_put(&t, "\n", 1);
            }
            fx_put(&t, "\n\n", 2); /* the published file ends with blank lines too */
            fx_tar_member(tar, name, t.p, t.n);
            fx_free(&t);
        } else {
            fx_tar_member(tar, name, "<html></html>\n", 14);
        }
    }
}

static inline void fx_cifar100_names(struct fx_buf *t, const char *prefix, int n)
{
    for (int c = 0; c < n; c++) {
        char line[64];
        int len = snprintf(line, sizeof(line), "%s%02d\n", prefix, c);
        fx_put(t, line, (size_t)len);
    }
}

static inline void fx_cifar100_tar(struct fx_buf *tar, size_t ntrain, size_t ntest,
                                   const char *omit)
{
    fx_tar_header(tar, "cifar-100-binary/", 0, '5');
    if (!omit || strcmp(omit, "coarse_label_names.txt") != 0) {
        struct fx_buf t = {0};
        fx_cifar100_names(&t, "coarse", 20);
        fx_tar_member(tar, "cifar-100-binary/coarse_label_names.txt", t.p, t.n);
        fx_free(&t);
    }
    if (!omit || strcmp(omit, "train.bin") != 0)
        fx_cifar_member(tar, "cifar-100-binary/train.bin", ntrain, 0, 2, 100);
    if (!omit || strcmp(omit, "fine_label_names.txt") != 0) {
        struct fx_buf t = {0};
        fx_cifar100_names(&t, "fine", 100);
        fx_tar_member(tar, "cifar-100-binary/fine_label_names.txt", t.p, t.n);
        fx_free(&t);
    }
    if (!omit || strcmp(omit, "test.bin") != 0)
        fx_cifar_member(tar, "cifar-100-binary/test.bin", ntest, FX_TEST_BASE, 2, 100);
}

/* Gzips tar and writes it to dir/name. */
static inline void fx_write_tar_gz(const char *dir, const char *name, const struct fx_buf *tar)
{
    char path[4200];
    fx_path(path, sizeof(path), dir, name);
    fx_write_gz(path, tar->p, tar->n);
}

#endif

/* data/image and data/folder: JPEG and PNG decode to the pixels written, channels convert,
 * dt_image_fit's antialiased bilinear gives the documented weights and centre crop; bad
 * files (corrupt, FIFO, directory) fail with DT_EDATA without hanging; a folder loads in
 * sorted class and file order, the same with 1 and 2 threads, and skip_bad counts.
 * Untrusted files: a header declaring more pixels than the budget fails before anything is
 * allocated (baseline and progressive JPEG, PNG); a truncated or corrupt JPEG or PNG fails
 * instead of decoding partly; names with control characters load, and show escaped in
 * messages. `make check-asan` runs these under ASan, so the folder loader is covered too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "tests/fixtures/jpeg_encode.h"
#include <png.h>

#include "data/folder.h"
#include "data/image.h"
#include "tests/unit/fixtures.h"
#include "util/err.h"
#include "util/printable.h"

static unsigned char *jpeg_opts(const uint8_t *px, int h, int w, int c, int progressive,
                                unsigned long *len)
{
    return fx_jpeg_encode(px, h, w, c, 100, progressive, len);
}

static unsigned char *jpeg_of(const uint8_t *px, int h, int w, int c, unsigned long *len)
{
    return jpeg_opts(px, h, w, c, 0, len);
}

static void write_png(const char *path, const uint8_t *px, int h, int w, int c)
{
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    img.width = (png_uint_32)w;
    img.height = (png_uint_32)h;
    img.format = c == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
    if (!png_image_write_to_file(&img, path, 0, px, 0, NULL))
        fx_die(path);
}

static void test_jpeg_gray_and_rgb(void **state)
{
    (void)state;
    uint8_t px[16 * 16];
    memset(px, 120, sizeof px);
    unsigned long len = 0;
    unsigned char *jpg = jpeg_of(px, 16, 16, 1, &len);
    struct dt_image img;
    assert_int_equal(dt_image_decode(jpg, len, "flat.jpg", 1, 0, &img), 0);
    assert_int_equal(img.h, 16);
    assert_int_equal(img.w, 16);
    assert_int_equal(img.c, 1);
    for (int i = 0; i < 256; i++)
        assert_in_range(img.px[i], 118, 122);
    dt_image_free(&img);
    assert_int_equal(dt_image_decode(jpg, len, "flat.jpg", 3, 0, &img), 0);
    assert_int_equal(img.c, 3);
    assert_int_equal(img.px[0], img.px[1]);
    assert_int_equal(img.px[1], img.px[2]);
    dt_image_free(&img);
    assert_int_equal(dt_image_decode(jpg, 20, "cut.jpg", 1, 0, &img), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "cut.jpg: corrupt JPEG"));
    free(jpg);
}

static void test_rgb_to_gray_is_pil_luma(void **state)
{
    (void)state;
    char dir[256], path[600];
    fx_mkdtemp(dir, sizeof dir);
    fx_path(path, sizeof path, dir, "c.png");
    const uint8_t px[6] = {255, 0, 0, 10, 10, 10};
    write_png(path, px, 1, 2, 3);
    uint8_t *buf;
    size_t len;
    assert_int_equal(dt_image_read_file(path, &buf, &len), 0);
    struct dt_image img;
    assert_int_equal(dt_image_decode(buf, len, path, 1, 0, &img), 0);
    assert_int_equal(img.px[0], 76); /* (255 * 19595 + 32768) >> 16 */
    assert_int_equal(img.px[1], 10); /* gray stays itself */
    dt_image_free(&img);
    free(buf);
    fx_rmtree(dir);
}

static void test_fit_weights_and_crop(void **state)
{
    (void)state;
    /* 1x4 row to 1x2: scale 1/2, support 2, taps 0.75 0.75 0.25 (/1.75) around source 1.0. */
    uint8_t row[4] = {0, 100, 200, 100}, out[50];
    struct dt_image img = {.h = 2, .w = 4, .c = 1, .px = (uint8_t[8]){0}};
    memcpy(img.px, row, 4);
    memcpy(img.px + 4, row, 4);
    assert_int_equal(dt_image_fit(&img, 1, 2, out), 0);
    assert_int_equal(out[0], 71);  /* (0*.75 + 100*.75 + 200*.25) / 1.75 = 71.4 */
    assert_int_equal(out[1], 143); /* taps 1..3 around 3.0: (100*.25 + 200*.75 + 100*.75) / 1.75 */
    /* 10x20, left half 0, right half 255, to 5x5: scaled to 5x10, centre columns 2..6. */
    uint8_t half[200];
    for (int i = 0; i < 200; i++)
        half[i] = (i % 20) < 10 ? 0 : 255;
    struct dt_image wide = {.h = 10, .w = 20, .c = 1, .px = half};
    assert_int_equal(dt_image_fit(&wide, 5, 5, out), 0);
    for (int y = 0; y < 5; y++) {
        assert_int_equal(out[y * 5 + 0], 0);
        assert_int_equal(out[y * 5 + 4], 255);
    }
    /* Same size: HWC to CHW, untouched. */
    uint8_t hwc[6] = {1, 2, 3, 4, 5, 6};
    struct dt_image same = {.h = 1, .w = 2, .c = 3, .px = hwc};
    assert_int_equal(dt_image_fit(&same, 1, 2, out), 0);
    const uint8_t chw[6] = {1, 4, 2, 5, 3, 6};
    assert_memory_equal(out, chw, 6);
}

static void test_read_refuses_fifo_and_directory(void **state)
{
    (void)state;
    char dir[256], path[600];
    fx_mkdtemp(dir, sizeof dir);
    fx_path(path, sizeof path, dir, "pipe.png");
    assert_int_equal(mkfifo(path, 0600), 0);
    uint8_t *buf;
    size_t len;
    assert_int_equal(dt_image_read_file(path, &buf, &len), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "a FIFO"));
    assert_int_equal(dt_image_read_file(dir, &buf, &len), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "a directory"));
    fx_rmtree(dir);
}

static void put_png(const char *dir, const char *rel, uint8_t value)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    uint8_t px[3 * 4];
    memset(px, value, sizeof px);
    write_png(path, px, 3, 4, 1);
}

static void make_folder(const char *dir)
{
    const char *dirs[] = {"train",   "test",   "train/b", "train/a",
                          "train/C", "test/a", "test/b",  "test/C"};
    char path[700];
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, dirs[i]);
        assert_int_equal(mkdir(path, 0700), 0);
    }
    put_png(dir, "train/b/2.png", 21);
    put_png(dir, "train/b/10.png", 20);
    put_png(dir, "train/a/x.PNG", 10);
    put_png(dir, "train/C/z.png", 0);
    put_png(dir, "test/a/1.png", 11);
    put_png(dir, "test/b/1.png", 22);
    put_png(dir, "test/C/1.png", 1);
    snprintf(path, sizeof path, "%s/train/a/readme.txt", dir);
    fx_write(path, "x", 1);
}

static void test_folder_sorted_and_threads_agree(void **state)
{
    (void)state;
    char dir[256];
    fx_mkdtemp(dir, sizeof dir);
    make_folder(dir);
    struct dt_data one, two;
    struct dt_folder_opts o = {.channels = 1, .threads = 1};
    assert_int_equal(dt_folder_load(&one, NULL, dir, &o), 0);
    o.threads = 2;
    assert_int_equal(dt_folder_load(&two, NULL, dir, &o), 0);
    /* Byte order: "C" < "a" < "b"; in b, "10.png" < "2.png". */
    assert_int_equal(one.train.classes, 3);
    assert_string_equal(one.train.names[0], "C");
    assert_string_equal(one.train.names[1], "a");
    assert_string_equal(one.train.names[2], "b");
    assert_int_equal(one.train.n, 4);
    assert_int_equal(one.train.h, 3);
    assert_int_equal(one.train.w, 4);
    const uint8_t labels[4] = {0, 1, 2, 2}, first[4] = {0, 10, 20, 21};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(one.train.y[i], labels[i]);
        assert_int_equal(one.train.x[i * 12], first[i]);
    }
    assert_int_equal(one.test.n, 3);
    assert_memory_equal(one.train.x, two.train.x, 4 * 12);
    assert_memory_equal(one.test.x, two.test.x, 3 * 12);
    dt_data_free(&one);
    dt_data_free(&two);
    fx_rmtree(dir);
}

static size_t calls;
static void count_progress(void *ctx, const char *split, size_t done, size_t total)
{
    (void)ctx;
    (void)split;
    assert_true(done <= total);
    calls++;
}

static void test_folder_skip_bad_counts(void **state)
{
    (void)state;
    char dir[256], path[700];
    fx_mkdtemp(dir, sizeof dir);
    make_folder(dir);
    snprintf(path, sizeof path, "%s/train/a/bad.png", dir);
    fx_write(path, "\x89PNG\r\n\x1a\nxx", 10);
    struct dt_data d;
    struct dt_folder_opts o = {.channels = 3, .h = 2, .w = 2};
    assert_int_equal(dt_folder_load(&d, NULL, dir, &o), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "train/a/bad.png: corrupt PNG"));
    o.skip_bad = true;
    o.progress = count_progress;
    calls = 0;
    assert_int_equal(dt_folder_load(&d, NULL, dir, &o), 0);
    assert_true(calls >= 2);
    assert_int_equal(d.train.n, 4);
    assert_int_equal(d.train.skipped, 1);
    assert_int_equal(d.train.c, 3);
    assert_non_null(strstr(d.train.first_bad, "bad.png"));
    assert_int_equal(d.train.y[1], 1); /* a's good image keeps its place and label */
    dt_data_free(&d);
    fx_rmtree(dir);
}

/* ---- untrusted files ---- */

/* A noisy h x w x c image: compresses poorly, so a cut lands in the pixel data. */
static uint8_t *noise(int h, int w, int c)
{
    uint8_t *px = malloc((size_t)h * w * c);
    for (size_t i = 0; i < (size_t)h * w * c; i++)
        px[i] = fx_pixel(i, 7);
    return px;
}

/* The frame header's height and width (SOF0 or SOF2) set to dh x dw: a small file that
 * declares a huge image, as a decompression bomb does. */
static void jpeg_declare(unsigned char *jpg, unsigned long len, unsigned dh, unsigned dw)
{
    for (unsigned long i = 0; i + 9 < len; i++)
        if (jpg[i] == 0xff && (jpg[i + 1] == 0xc0 || jpg[i + 1] == 0xc2)) {
            jpg[i + 5] = (uint8_t)(dh >> 8), jpg[i + 6] = (uint8_t)dh;
            jpg[i + 7] = (uint8_t)(dw >> 8), jpg[i + 8] = (uint8_t)dw;
            return;
        }
    fx_die("no SOF marker");
}

static void png_chunk(struct fx_buf *b, const char *type, const void *d, size_t n)
{
    fx_put_be32(b, (uint32_t)n);
    size_t at = b->n;
    fx_put(b, type, 4);
    fx_put(b, d, n);
    fx_put_be32(b, (uint32_t)crc32(0, b->p + at, (uInt)(n + 4)));
}

/* An 8-bit gray PNG whose header says dh x dw but whose IDAT holds `rows` rows of w pixels
 * (value v), each with filter byte 0: rows < dh is a stream that ends early. */
static void png_gray(struct fx_buf *b, uint32_t dh, uint32_t dw, int rows, int w, uint8_t v)
{
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    fx_put(b, sig, 8);
    uint8_t ihdr[13] = {0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0};
    for (int i = 0; i < 4; i++) {
        ihdr[i] = (uint8_t)(dw >> (24 - 8 * i));
        ihdr[4 + i] = (uint8_t)(dh >> (24 - 8 * i));
    }
    png_chunk(b, "IHDR", ihdr, 13);
    size_t raw_n = (size_t)rows * (size_t)(w + 1);
    uint8_t *raw = malloc(raw_n + 1);
    for (size_t i = 0; i < raw_n; i++)
        raw[i] = i % (size_t)(w + 1) ? v : 0;
    uLongf zn = compressBound(raw_n);
    uint8_t *z = malloc(zn);
    if (compress(z, &zn, raw, raw_n) != Z_OK)
        fx_die("compress");
    png_chunk(b, "IDAT", z, zn);
    png_chunk(b, "IEND", NULL, 0);
    free(raw);
    free(z);
}

static void test_pixel_budget(void **state)
{
    (void)state;
    struct dt_image img;
    uint8_t *px = noise(28, 28, 3);
    for (int progressive = 0; progressive < 2; progressive++) {
        unsigned long len = 0;
        unsigned char *jpg = jpeg_opts(px, 28, 28, 3, progressive, &len);
        /* The budget is exact: 28 x 28 = 784 pixels. */
        assert_int_equal(dt_image_decode(jpg, len, "ok.jpg", 3, 784, &img), 0);
        dt_image_free(&img);
        assert_int_equal(dt_image_decode(jpg, len, "ok.jpg", 3, 783, &img), -DT_EDATA);
        assert_non_null(strstr(dt_last_error(),
                               "ok.jpg: JPEG declares 28x28 pixels, more than data.max_pixels "
                               "= 783"));
        /* A 1 KB file declaring 65500 x 65500: refused at the header with the default budget
         * (before: 4 GB allocated and 16 s of decoding grey padding). */
        jpeg_declare(jpg, len, 65500, 65500);
        for (int c = 1; c <= 3; c += 2) {
            assert_int_equal(dt_image_decode(jpg, len, "bomb.jpg", c, 0, &img), -DT_EDATA);
            assert_non_null(strstr(dt_last_error(), "bomb.jpg: JPEG declares 65500x65500 pixels, "
                                                    "more than data.max_pixels = 67108864"));
        }
        free(jpg);
    }
    free(px);
    /* PNG: a 65500 x 65500 header over 8 rows of data; the budget, not the short stream, is
     * what it fails on. The largest budget still fails on the missing data, not on a size
     * product that overflowed. */
    struct fx_buf b = {0};
    png_gray(&b, 65500, 65500, 8, 8, 1);
    assert_int_equal(dt_image_decode(b.p, b.n, "bomb.png", 1, 0, &img), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "bomb.png: PNG declares 65500x65500 pixels, more "
                                            "than data.max_pixels = 67108864"));
    assert_int_equal(dt_image_decode(b.p, b.n, "bomb.png", 3, 4294836225u, &img), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "bomb.png: corrupt PNG"));
    fx_free(&b);
    png_gray(&b, 16, 64, 16, 64, 9);
    assert_int_equal(dt_image_decode(b.p, b.n, "ok.png", 3, 1024, &img), 0);
    assert_int_equal(img.h * img.w * img.c, 16 * 64 * 3);
    assert_int_equal(img.px[16 * 64 * 3 - 1], 9);
    dt_image_free(&img);
    assert_int_equal(dt_image_decode(b.p, b.n, "ok.png", 3, 1023, &img), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "ok.png: PNG declares 16x64 pixels"));
    fx_free(&b);
}

static void test_truncated_and_corrupt_jpeg(void **state)
{
    (void)state;
    struct dt_image img;
    uint8_t *px = noise(64, 64, 3);
    for (int progressive = 0; progressive < 2; progressive++) {
        unsigned long len = 0;
        unsigned char *jpg = jpeg_opts(px, 64, 64, 3, progressive, &len);
        assert_int_equal(dt_image_decode(jpg, len, "whole.jpg", 3, 0, &img), 0);
        dt_image_free(&img);
        /* Cut in the pixel data: libjpeg pads with grey and only warns; half an image must
         * not decode. Also cut just before the end-of-image marker. */
        unsigned long cuts[3] = {len / 2, len * 3 / 4, len - 2};
        for (int k = 0; k < 3; k++) {
            assert_int_equal(dt_image_decode(jpg, cuts[k], "cut.jpg", 3, 0, &img), -DT_EDATA);
            assert_non_null(strstr(dt_last_error(), "cut.jpg: corrupt JPEG: Premature end of JPEG "
                                                    "file"));
        }
        /* A marker in the middle of the entropy-coded data: a segment cut short. */
        unsigned char *bad = malloc(len);
        memcpy(bad, jpg, len);
        bad[len * 3 / 4] = 0xff;
        bad[len * 3 / 4 + 1] = 0xd3;
        assert_int_equal(dt_image_decode(bad, len, "marker.jpg", 3, 0, &img), -DT_EDATA);
        assert_non_null(strstr(dt_last_error(), "marker.jpg: corrupt JPEG: "));
        free(bad);
        /* Padding between the data and the end-of-image marker, which some cameras write,
         * loses no pixel: libjpeg warns of extraneous bytes, and the image loads. */
        bad = malloc(len + 64);
        memcpy(bad, jpg, len - 2);
        memset(bad + len - 2, 0x55, 64);
        memcpy(bad + len + 62, jpg + len - 2, 2);
        assert_int_equal(dt_image_decode(bad, len + 64, "padded.jpg", 3, 0, &img), 0);
        dt_image_free(&img);
        free(bad);
        free(jpg);
    }
    free(px);
}

/* A valid progressive gray JPEG of `nscans` scans (at most 1 + 10 + 63 * 11): the DC
 * coefficient and each AC coefficient alone, sent in successive-approximation steps. */
static unsigned char *jpeg_scans(int nscans, unsigned long *len)
{
    static jpeg_scan_info script[1 + 10 + 63 * 11];
    int n = 0, al = 10; /* the most successive approximation libjpeg allows */
    script[n++] = (jpeg_scan_info){1, {0}, 0, 0, 0, al};
    for (int a = al; a > 0; a--)
        script[n++] = (jpeg_scan_info){1, {0}, 0, 0, a, a - 1};
    for (int k = 1; k < 64; k++) {
        script[n++] = (jpeg_scan_info){1, {0}, k, k, 0, al};
        for (int a = al; a > 0; a--)
            script[n++] = (jpeg_scan_info){1, {0}, k, k, a, a - 1};
    }
    assert_true(nscans <= n);
    uint8_t *px = noise(16, 16, 1);
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr jerr;
    unsigned char *out = NULL;
    ci.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&ci);
    jpeg_mem_dest(&ci, &out, len);
    ci.image_width = 16;
    ci.image_height = 16;
    ci.input_components = 1;
    ci.in_color_space = JCS_GRAYSCALE;
    jpeg_set_defaults(&ci);
    ci.scan_info = script;
    ci.num_scans = nscans;
    jpeg_start_compress(&ci, TRUE);
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW row = px + (size_t)ci.next_scanline * 16;
        jpeg_write_scanlines(&ci, &row, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    free(px);
    return out;
}

/* Each scan of a progressive JPEG passes over the whole image: past 500 scans (encoders
 * write about 10) a small file could cost minutes within the pixel budget. */
static void test_jpeg_scan_limit(void **state)
{
    (void)state;
    struct dt_image img;
    unsigned long len = 0;
    unsigned char *jpg = jpeg_scans(500, &len);
    assert_int_equal(dt_image_decode(jpg, len, "500.jpg", 1, 0, &img), 0);
    dt_image_free(&img);
    free(jpg);
    jpg = jpeg_scans(501, &len);
    assert_int_equal(dt_image_decode(jpg, len, "501.jpg", 1, 0, &img), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "501.jpg: JPEG has more than 500 progressive scans"));
    free(jpg);
}

static void test_truncated_png(void **state)
{
    (void)state;
    struct dt_image img;
    /* Every cut that loses image data fails; only IEND (the last 12 bytes) is not needed. */
    struct fx_buf b = {0};
    png_gray(&b, 32, 32, 32, 32, 5);
    assert_int_equal(dt_image_decode(b.p, b.n, "whole.png", 1, 0, &img), 0);
    dt_image_free(&img);
    for (size_t cut = 8; cut < b.n - 12; cut++) {
        assert_int_equal(dt_image_decode(b.p, cut, "cut.png", 1, 0, &img), -DT_EDATA);
        assert_non_null(strstr(dt_last_error(), "cut.png: corrupt PNG"));
    }
    fx_free(&b);
    /* A complete file whose zlib stream holds 20 of the 32 rows. */
    png_gray(&b, 32, 32, 20, 32, 5);
    assert_int_equal(dt_image_decode(b.p, b.n, "short.png", 1, 0, &img), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "short.png: corrupt PNG: Not enough image data"));
    fx_free(&b);
}

static void test_printable(void **state)
{
    (void)state;
    char buf[32];
    assert_string_equal(dt_printable("a\nb\x1b[31m\x7f\xc3\xa9", buf, sizeof buf),
                        "a\\x0ab\\x1b[31m\\x7f\xc3\xa9");
    /* Truncated at a whole escape, never half of one. */
    assert_string_equal(dt_printable("abc\n", buf, 6), "abc");
    assert_string_equal(dt_printable("ab\ncd", buf, 7), "ab\\x0a");
    assert_string_equal(dt_printable("", buf, 1), "");
}

static void put_file(const char *dir, const char *rel, const void *d, size_t n)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    fx_write(path, d, n);
}

static void put_dir(const char *dir, const char *rel)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    assert_int_equal(mkdir(path, 0700), 0);
}

/* A folder of good PNGs and JPEGs plus a truncated JPEG, a JPEG bomb and a PNG bomb: the
 * load fails on the first bad one in order, skip_bad leaves all three out, and a budget
 * below the good images' size makes them bad too. */
static void test_folder_bad_images(void **state)
{
    (void)state;
    char dir[256];
    fx_mkdtemp(dir, sizeof dir);
    const char *dirs[] = {"train", "test", "train/a", "train/b", "test/a", "test/b"};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++)
        put_dir(dir, dirs[i]);
    uint8_t *px = noise(32, 32, 3);
    unsigned long jn = 0, pn = 0;
    unsigned char *jpg = jpeg_opts(px, 32, 32, 3, 0, &jn), *pjpg = jpeg_opts(px, 32, 32, 3, 1, &pn);
    struct fx_buf png = {0}, bomb_png = {0};
    png_gray(&png, 32, 32, 32, 32, 7);
    png_gray(&bomb_png, 60000, 60000, 4, 4, 7);
    put_file(dir, "train/a/1.jpg", jpg, jn);
    put_file(dir, "train/a/2.png", png.p, png.n);
    put_file(dir, "train/a/3.jpg", jpg, jn / 2); /* truncated */
    put_file(dir, "train/b/1.jpeg", pjpg, pn);
    put_file(dir, "train/b/2.png", bomb_png.p, bomb_png.n);
    jpeg_declare(pjpg, pn, 65500, 65500);
    put_file(dir, "train/b/3.jpg", pjpg, pn); /* progressive bomb */
    put_file(dir, "test/a/1.png", png.p, png.n);
    put_file(dir, "test/b/1.jpg", jpg, jn);

    struct dt_data d;
    struct dt_folder_opts o = {.channels = 3, .h = 16, .w = 16, .threads = 2};
    assert_int_equal(dt_folder_load(&d, NULL, dir, &o), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "train/a/3.jpg: corrupt JPEG: Premature end"));
    o.skip_bad = true;
    assert_int_equal(dt_folder_load(&d, NULL, dir, &o), 0);
    assert_int_equal(d.train.n, 3);
    assert_int_equal(d.train.skipped, 3);
    assert_non_null(strstr(d.train.first_bad, "3.jpg: corrupt JPEG"));
    const uint8_t labels[3] = {0, 0, 1};
    assert_memory_equal(d.train.y, labels, 3);
    assert_int_equal(d.test.n, 2);
    dt_data_free(&d);
    /* Without skip_bad, the bombs are named with their declared size. */
    put_file(dir, "train/a/3.jpg", jpg, jn);
    o.skip_bad = false;
    assert_int_equal(dt_folder_load(&d, NULL, dir, &o), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "train/b/2.png: PNG declares 60000x60000 pixels, "
                                            "more than data.max_pixels = 67108864"));
    char path[700];
    snprintf(path, sizeof path, "%s/train/b/2.png", dir);
    unlink(path);
    assert_int_equal(dt_folder_load(&d, NULL, dir, &o), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "train/b/3.jpg: JPEG declares 65500x65500 pixels"));
    /* A budget below 32 x 32: every image is bad. */
    snprintf(path, sizeof path, "%s/train/b/3.jpg", dir);
    unlink(path);
    o.max_pixels = 32 * 32 - 1;
    assert_int_equal(dt_folder_load(&d, NULL, dir, &o), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "train/a/1.jpg: JPEG declares 32x32 pixels, more "
                                            "than data.max_pixels = 1023"));
    o.skip_bad = true;
    assert_int_equal(dt_folder_load(&d, NULL, dir, &o), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "every image is bad"));
    o.max_pixels = 32 * 32;
    assert_int_equal(dt_folder_load(&d, NULL, dir, &o), 0);
    assert_int_equal(d.train.n, 4);
    assert_int_equal(d.train.skipped, 0);
    dt_data_free(&d);
    free(px);
    free(jpg);
    free(pjpg);
    fx_free(&png);
    fx_free(&bomb_png);
    fx_rmtree(dir);
}

/* Class folders named with control characters load in every split (test's folders are
 * compared with train's by their real names); the names are shown with '?', and a bad
 * file's name reaches the message escaped, on one line. */
static void test_folder_control_character_names(void **state)
{
    (void)state;
    char dir[256];
    fx_mkdtemp(dir, sizeof dir);
    const char *dirs[] = {"train",         "test",           "val",
                          "train/a\x01",   "train/b\x1b[1m", "test/a\x01",
                          "test/b\x1b[1m", "val/a\x01",      "val/b\x1b[1m"};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++)
        put_dir(dir, dirs[i]);
    struct fx_buf png = {0};
    png_gray(&png, 4, 4, 4, 4, 3);
    for (size_t i = 3; i < sizeof dirs / sizeof *dirs; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "%s/x\ty.png", dirs[i]);
        put_file(dir, rel, png.p, png.n);
    }
    struct dt_data d;
    struct dt_dataset val;
    struct dt_folder_opts o = {.channels = 1};
    assert_int_equal(dt_folder_load(&d, &val, dir, &o), 0);
    assert_int_equal(d.train.classes, 2);
    assert_string_equal(d.train.names[0], "a?");
    assert_string_equal(d.train.names[1], "b?[1m");
    assert_string_equal(d.test.names[1], "b?[1m");
    assert_int_equal(d.test.n, 2);
    assert_int_equal(val.n, 2);
    dt_data_free(&d);
    dt_dataset_free(&val);
    /* A test folder whose name differs only in the control character is another class. */
    char from[700], to[700];
    snprintf(from, sizeof from, "%s/test/a\x01", dir);
    snprintf(to, sizeof to, "%s/test/a\x02", dir);
    assert_int_equal(rename(from, to), 0);
    assert_int_equal(dt_folder_load(&d, NULL, dir, &o), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "class folder 'a\\x02' where the training set has "
                                            "'a\\x01'"));
    assert_int_equal(rename(to, from), 0);
    /* A corrupt image with a newline and an escape in its name. */
    put_file(dir, "train/a\x01/z\n\x1b[2J.png", "\x89PNG\r\n\x1a\nxx", 10);
    assert_int_equal(dt_folder_load(&d, NULL, dir, &o), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "/train/a\\x01/z\\x0a\\x1b[2J.png: corrupt PNG"));
    assert_null(strchr(dt_last_error(), '\n'));
    assert_null(strchr(dt_last_error(), '\x1b'));
    fx_free(&png);
    fx_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jpeg_gray_and_rgb),
        cmocka_unit_test(test_rgb_to_gray_is_pil_luma),
        cmocka_unit_test(test_fit_weights_and_crop),
        cmocka_unit_test(test_read_refuses_fifo_and_directory),
        cmocka_unit_test(test_folder_sorted_and_threads_agree),
        cmocka_unit_test(test_folder_skip_bad_counts),
        cmocka_unit_test(test_pixel_budget),
        cmocka_unit_test(test_truncated_and_corrupt_jpeg),
        cmocka_unit_test(test_jpeg_scan_limit),
        cmocka_unit_test(test_truncated_png),
        cmocka_unit_test(test_printable),
        cmocka_unit_test(test_folder_bad_images),
        cmocka_unit_test(test_folder_control_character_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

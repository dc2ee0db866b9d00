/* data/image and data/folder: JPEG and PNG decode to the pixels written, channels convert,
 * dt_image_fit's antialiased bilinear gives the documented weights and centre crop; bad
 * files (corrupt, FIFO, directory) fail with DT_EDATA without hanging; a folder loads in
 * sorted class and file order, the same with 1 and 2 threads, and skip_bad counts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include <jpeglib.h>
#include <png.h>

#include "data/folder.h"
#include "data/image.h"
#include "tests/unit/fixtures.h"
#include "util/err.h"

/* A JPEG of an h x w image with c channels, in memory. */
static unsigned char *jpeg_of(const uint8_t *px, int h, int w, int c, unsigned long *len)
{
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr jerr;
    unsigned char *out = NULL;
    ci.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&ci);
    jpeg_mem_dest(&ci, &out, len);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    ci.input_components = c;
    ci.in_color_space = c == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, 100, TRUE);
    jpeg_start_compress(&ci, TRUE);
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW row = (JSAMPROW)(px + (size_t)ci.next_scanline * (size_t)w * (size_t)c);
        jpeg_write_scanlines(&ci, &row, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    return out;
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
    assert_int_equal(dt_image_decode(jpg, len, "flat.jpg", 1, &img), 0);
    assert_int_equal(img.h, 16);
    assert_int_equal(img.w, 16);
    assert_int_equal(img.c, 1);
    for (int i = 0; i < 256; i++)
        assert_in_range(img.px[i], 118, 122);
    dt_image_free(&img);
    assert_int_equal(dt_image_decode(jpg, len, "flat.jpg", 3, &img), 0);
    assert_int_equal(img.c, 3);
    assert_int_equal(img.px[0], img.px[1]);
    assert_int_equal(img.px[1], img.px[2]);
    dt_image_free(&img);
    /* Cut in half: libjpeg pads a short stream, so only the header cut is corrupt. */
    assert_int_equal(dt_image_decode(jpg, 20, "cut.jpg", 1, &img), -DT_EDATA);
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
    assert_int_equal(dt_image_decode(buf, len, path, 1, &img), 0);
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
    const char *dirs[] = {"train", "test", "train/b", "train/a", "train/C", "test/a",
                          "test/b", "test/C"};
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jpeg_gray_and_rgb),
        cmocka_unit_test(test_rgb_to_gray_is_pil_luma),
        cmocka_unit_test(test_fit_weights_and_crop),
        cmocka_unit_test(test_read_refuses_fifo_and_directory),
        cmocka_unit_test(test_folder_sorted_and_threads_agree),
        cmocka_unit_test(test_folder_skip_bad_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

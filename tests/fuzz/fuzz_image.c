/* data/image.c: the input as an image file (PNG or JPEG, told apart by its first bytes as
 * the loader does) after one control byte: bit 0 picks 1 or 3 channels, bits 1-3 a target
 * size for dt_image_fit (the resize that follows every decode in training and predict).
 * The pixel budget is 2^20 here, not the default 2^26, so that a header declaring a large
 * image costs milliseconds per execution; the check itself is the same code either way.
 * With FUZZ_SEED_DIR set, the harness writes its seeds: small valid PNGs (gray, RGB,
 * palette, 16-bit, interlaced, RGBA) and JPEGs (baseline gray and RGB, progressive). */
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <stdlib.h>
#include <string.h>

#include "tests/fixtures/jpeg_encode.h"
#include <png.h>

#include "data/image.h"
#include "fuzz_common.h"

#define FUZZ_MAX_PIXELS ((uint64_t)1 << 20)

static void seed_write(const char *dir, const char *name, uint8_t control, const void *d, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return;
    fputc(control, f);
    fwrite(d, 1, n, f);
    fclose(f);
}

static void seed_png(const char *dir, const char *name, int h, int w, int color, int depth,
                     int interlace)
{
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, name);
    FILE *f = fopen(tmp, "wb");
    if (!png || !info || !f || setjmp(png_jmpbuf(png))) {
        if (f)
            fclose(f);
        png_destroy_write_struct(&png, &info);
        return;
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, depth, color,
                 interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    png_color pal[4] = {{0, 0, 0}, {255, 0, 0}, {0, 255, 0}, {0, 0, 255}};
    if (color == PNG_COLOR_TYPE_PALETTE)
        png_set_PLTE(png, info, pal, 4);
    png_write_info(png, info);
    size_t row = png_get_rowbytes(png, info);
    uint8_t *px = malloc(row * (size_t)h);
    for (size_t i = 0; i < row * (size_t)h; i++)
        px[i] = color == PNG_COLOR_TYPE_PALETTE ? (uint8_t)(i % 4 * (depth == 8 ? 1 : 0x11))
                                                : (uint8_t)(i * 37);
    png_bytep rows[64];
    for (int r = 0; r < h && r < 64; r++)
        rows[r] = px + (size_t)r * row;
    png_write_image(png, rows);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    fclose(f);
    free(px);
    /* The control byte goes first: read the file back and prepend it. */
    f = fopen(tmp, "rb");
    uint8_t buf[65536];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f)
        fclose(f);
    remove(tmp);
    seed_write(dir, name, 0x0b, buf, n);
}

static void seed_jpeg(const char *dir, const char *name, int h, int w, int c, int progressive)
{
    unsigned long len = 0;
    uint8_t *px = malloc((size_t)h * w * c);
    for (size_t i = 0; i < (size_t)h * w * c; i++)
        px[i] = (uint8_t)(i * 7 + i / (size_t)w);
    unsigned char *out = fx_jpeg_encode(px, h, w, c, 75, progressive, &len);
    seed_write(dir, name, (uint8_t)(c == 3 ? 0x05 : 0x04), out, len);
    free(out);
    free(px);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const char *dir = getenv("FUZZ_SEED_DIR");
    if (!dir)
        return 0;
    seed_png(dir, "gray8.png", 9, 7, PNG_COLOR_TYPE_GRAY, 8, 0);
    seed_png(dir, "gray1.png", 5, 11, PNG_COLOR_TYPE_GRAY, 1, 0);
    seed_png(dir, "rgb8.png", 8, 8, PNG_COLOR_TYPE_RGB, 8, 0);
    seed_png(dir, "rgb16-interlaced.png", 6, 10, PNG_COLOR_TYPE_RGB, 16, 1);
    seed_png(dir, "palette4.png", 7, 7, PNG_COLOR_TYPE_PALETTE, 4, 0);
    seed_png(dir, "rgba8.png", 4, 5, PNG_COLOR_TYPE_RGB_ALPHA, 8, 0);
    seed_png(dir, "gray-alpha16.png", 3, 3, PNG_COLOR_TYPE_GRAY_ALPHA, 16, 1);
    seed_jpeg(dir, "gray.jpg", 16, 12, 1, 0);
    seed_jpeg(dir, "rgb.jpg", 17, 23, 3, 0);
    seed_jpeg(dir, "progressive.jpg", 24, 16, 3, 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int channels = data[0] & 1 ? 3 : 1, side = 1 + ((data[0] >> 1) & 7) * 3;
    struct dt_image img;
    if (dt_image_decode(data + 1, size - 1, "fuzz", channels, FUZZ_MAX_PIXELS, &img) == 0) {
        if ((uint64_t)img.h * (uint64_t)img.w > FUZZ_MAX_PIXELS || img.c != channels)
            abort(); /* the budget or the channel conversion did not hold */
        uint8_t *out = malloc((size_t)side * (size_t)(side + 1) * (size_t)channels);
        if (out)
            dt_image_fit(&img, side, side + 1, out);
        free(out);
        dt_image_free(&img);
    }
    return 0;
}

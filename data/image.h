/* One image file in, one fixed-size uint8 CHW sample out: PNG (libpng) and JPEG (libjpeg-turbo).
 *
 * The format is told by the file's first bytes, not its name. Every PNG colour type and bit
 * depth is accepted: palette entries are expanded, 16-bit samples keep their high byte, and
 * an alpha channel is dropped (not composited), as PIL's convert("RGB") does. Channels are
 * converted to what the caller asks: gray to RGB by copying, RGB to gray with PIL's integer
 * ITU-R 601-2 luma (R*19595 + G*38470 + B*7471 + 32768) >> 16, which maps a gray image that
 * was stored as RGB back to itself exactly.
 *
 * Resizing (dt_image_fit) scales so the image covers H x W -- the shorter side (relative to
 * the target's aspect) lands on the target -- then crops the centre. The filter is bilinear
 * with antialiasing, as PIL's Image.resize(BILINEAR) does: each output pixel averages the
 * source pixels under a triangle of half-width max(1, 1/scale) source pixels centred on it,
 * separably (rows, then columns), rounded to the nearest integer. An image already H x W is
 * copied untouched.
 *
 * Files are untrusted: the size a header declares is checked against a pixel budget before
 * anything that large is allocated, and a truncated or corrupt stream is an error rather
 * than a partly decoded image (see image.c). Names in error messages have their control
 * characters escaped (util/printable.h).
 */
#ifndef DT_DATA_IMAGE_H
#define DT_DATA_IMAGE_H

#include <stddef.h>
#include <stdint.h>

/* A decoded image, interleaved HWC, c = 1 or 3. */
struct dt_image {
    int h, w, c;
    uint8_t *px;
};

/* Reads `path` safely for an unattended walk: opens it without blocking (a FIFO does not
 * hang), refuses anything but a regular file, and caps the size at 256 MiB. */
int dt_image_read_file(const char *path, uint8_t **buf, size_t *len);

/* The default pixel budget (config key data.max_pixels): 2^26 = 67,108,864 pixels, 8192 x
 * 8192, a 192 MiB RGB buffer. Above any camera's photo (61 MP at most today), just under
 * PIL's decompression-bomb warning (89.5 MP). */
#define DT_IMAGE_MAX_PIXELS ((uint64_t)1 << 26)

/* Decodes a PNG or JPEG in memory into out (px malloc'd) with `channels` channels (1 or 3).
 * An image that declares more than max_pixels pixels (0 = DT_IMAGE_MAX_PIXELS) fails before
 * it is decoded. `label` only names the file in error messages. Returns 0 or -DT_EDATA. */
int dt_image_decode(const uint8_t *buf, size_t len, const char *label, int channels,
                    uint64_t max_pixels, struct dt_image *out);

/* Scales and centre-crops img to h x w (see above) and writes it planar (CHW) into out,
 * h*w*img->c bytes. Returns 0, or -DT_ERUNTIME when out of memory. */
int dt_image_fit(const struct dt_image *img, int h, int w, uint8_t *out);

void dt_image_free(struct dt_image *img);

#endif

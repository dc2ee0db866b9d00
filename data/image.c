/* PNG and JPEG decoding, channel conversion and resizing (see image.h).
 *
 * Both libraries report errors by longjmp; each decoder keeps everything that must be freed
 * on that path in a struct reached through a pointer, so no local is clobbered by the jump.
 *
 * Untrusted files: the declared size is checked against the pixel budget after the header
 * and before anything of that size is allocated (a 1.5 KB JPEG can declare 65500 x 65500),
 * and a stream that ends early or holds data the decoder had to skip or guess is an error,
 * not a partly grey image: libjpeg only warns about those, so its warnings are errors here
 * except the few that lose no pixel (see jpeg_job_emit).
 */
#include "data/image.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jerror.h>
#include <jpeglib.h>
#include <png.h>

#include "util/err.h"
#include "util/fileio.h"
#include "util/printable.h"

#define MAX_FILE_BYTES (256u << 20)
#define MAX_SIDE       65535
/* A progressive JPEG is decoded scan by scan, each a pass over the whole image: a small file
 * of hundreds of near-empty scans multiplies the decoding cost the pixel budget bounds.
 * Encoders write about 10; 500 leaves fifty times that room (djpeg has -maxscans for the
 * same reason). */
#define MAX_JPEG_SCANS 500

int dt_image_read_file(const char *path, uint8_t **buf, size_t *len)
{
    char *data;
    int rc = dt_read_file_max(path, MAX_FILE_BYTES, &data, len);
    *buf = rc ? NULL : (uint8_t *)data;
    return rc;
}

/* The size a header declares against the budget, before anything that large is allocated.
 * *bytes gets the decoded buffer's size, h x w x c one-byte samples, computed without
 * overflow. `kind` is "PNG" or "JPEG". */
static int check_budget(const char *name, const char *kind, uint64_t h, uint64_t w, int c,
                        uint64_t max_pixels, size_t *bytes)
{
    uint64_t pixels;
    if (h == 0 || w == 0)
        return dt_fail(DT_EDATA, "%s: %s declares %llux%llu pixels, an empty image", name, kind,
                       (unsigned long long)h, (unsigned long long)w);
    if (__builtin_mul_overflow(h, w, &pixels) || pixels > max_pixels)
        return dt_fail(
            DT_EDATA, "%s: %s declares %llux%llu pixels, more than data.max_pixels = %llu", name,
            kind, (unsigned long long)h, (unsigned long long)w, (unsigned long long)max_pixels);
    if (pixels > SIZE_MAX || __builtin_mul_overflow((size_t)pixels, (size_t)c, bytes))
        return dt_fail(DT_EDATA, "%s: %s of %llux%llu pixels does not fit in memory here", name,
                       kind, (unsigned long long)h, (unsigned long long)w);
    return 0;
}

/* ---- PNG ---- */

struct png_job {
    jmp_buf jmp;
    const uint8_t *buf;
    size_t len, pos;
    char msg[160];
    png_structp png;
    png_infop info;
    uint8_t *px;
    png_bytep *rows;
    size_t bytes; /* of px */
};

static void png_job_error(png_structp png, png_const_charp msg)
{
    struct png_job *j = png_get_error_ptr(png);
    snprintf(j->msg, sizeof j->msg, "%s", msg);
    longjmp(j->jmp, 1);
}

static void png_job_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg; /* warnings (bad CRC in ancillary chunks, iCCP quirks) do not stop a load */
}

static void png_job_read(png_structp png, png_bytep out, png_size_t n)
{
    struct png_job *j = png_get_io_ptr(png);
    if (n > j->len - j->pos)
        png_error(png, "file is truncated");
    memcpy(out, j->buf + j->pos, n);
    j->pos += n;
}

static int decode_png_job(struct png_job *j, const char *name, int channels, uint64_t max_pixels,
                          struct dt_image *out)
{
    j->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, j, png_job_error, png_job_warning);
    if (!j->png || !(j->info = png_create_info_struct(j->png)))
        return dt_fail(DT_ERUNTIME, "%s: out of memory", name);
    if (setjmp(j->jmp))
        return dt_fail(DT_EDATA, "%s: corrupt PNG: %s", name, j->msg);
    png_set_read_fn(j->png, j, png_job_read);
    png_set_user_limits(j->png, MAX_SIDE, MAX_SIDE);
    png_read_info(j->png, j->info);
    png_uint_32 w = png_get_image_width(j->png, j->info);
    png_uint_32 h = png_get_image_height(j->png, j->info);
    int type = png_get_color_type(j->png, j->info);
    if (png_get_bit_depth(j->png, j->info) == 16)
        png_set_strip_16(j->png); /* keeps the high byte */
    if (type == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(j->png);
    if (type == PNG_COLOR_TYPE_GRAY || type == PNG_COLOR_TYPE_GRAY_ALPHA)
        png_set_expand_gray_1_2_4_to_8(j->png);
    /* Expanding a palette also turns tRNS into alpha; either way alpha is dropped. */
    png_set_strip_alpha(j->png);
    int gray_in = !(type & PNG_COLOR_MASK_COLOR) && type != PNG_COLOR_TYPE_PALETTE;
    if (gray_in && channels == 3)
        png_set_gray_to_rgb(j->png);
    png_set_interlace_handling(j->png);
    png_read_update_info(j->png, j->info);
    int got = png_get_channels(j->png, j->info);
    if (got != 1 && got != 3)
        return dt_fail(DT_EDATA, "%s: PNG decodes to %d channels, expected 1 or 3", name, got);
    size_t stride = png_get_rowbytes(j->png, j->info);
    int rc = check_budget(name, "PNG", h, w, got, max_pixels, &j->bytes);
    if (rc)
        return rc;
    if (stride != (size_t)w * (size_t)got) /* 8-bit samples after the transforms above */
        return dt_fail(DT_EDATA, "%s: PNG rows of %zu bytes, expected %zu", name, stride,
                       (size_t)w * (size_t)got);
    j->px = malloc(j->bytes);
    j->rows = malloc(sizeof *j->rows * h);
    if (!j->px || !j->rows)
        return dt_fail(DT_ERUNTIME, "%s: out of memory for a %ux%u (HxW) image", name, h, w);
    for (png_uint_32 r = 0; r < h; r++)
        j->rows[r] = j->px + r * stride;
    png_read_image(j->png, j->rows);
    out->h = (int)h;
    out->w = (int)w;
    out->c = got;
    out->px = j->px;
    j->px = NULL;
    return 0;
}

static int decode_png(const uint8_t *buf, size_t len, const char *name, int channels,
                      uint64_t max_pixels, struct dt_image *out)
{
    struct png_job *j = calloc(1, sizeof *j);
    if (!j)
        return dt_fail(DT_ERUNTIME, "%s: out of memory", name);
    j->buf = buf;
    j->len = len;
    int rc = decode_png_job(j, name, channels, max_pixels, out);
    png_destroy_read_struct(&j->png, j->info ? &j->info : NULL, NULL);
    free(j->px);
    free(j->rows);
    free(j);
    return rc;
}

/* ---- JPEG ---- */

struct jpeg_job {
    struct jpeg_error_mgr pub;
    jmp_buf jmp;
    struct jpeg_decompress_struct cinfo;
    struct jpeg_progress_mgr progress;
    char msg[JMSG_LENGTH_MAX + 64];
    uint8_t *px;
    size_t bytes; /* of px */
};

static void jpeg_job_error(j_common_ptr cinfo)
{
    struct jpeg_job *j = (struct jpeg_job *)cinfo->err;
    char what[JMSG_LENGTH_MAX];
    cinfo->err->format_message(cinfo, what);
    snprintf(j->msg, sizeof j->msg, "corrupt JPEG: %s", what);
    longjmp(j->jmp, 1);
}

/* libjpeg reports a stream that ends early ("Premature end of JPEG file"), a segment cut
 * short, a bad Huffman or arithmetic code and a lost restart marker as warnings and goes on,
 * filling what it could not decode with grey: here they fail the image. Warnings that lose
 * no pixel are let through: garbage bytes skipped between markers (some cameras pad their
 * files), an unknown Adobe transform code or JFIF revision, a bad ICC marker (not used). */
static void jpeg_job_emit(j_common_ptr cinfo, int level)
{
    if (level >= 0)
        return; /* trace messages */
    switch (cinfo->err->msg_code) {
    case JWRN_EXTRANEOUS_DATA:
    case JWRN_ADOBE_XFORM:
    case JWRN_JFIF_MAJOR:
    case JWRN_BOGUS_ICC:
        return;
    default:
        jpeg_job_error(cinfo);
    }
}

static void jpeg_job_progress(j_common_ptr cinfo)
{
    j_decompress_ptr d = (j_decompress_ptr)cinfo;
    struct jpeg_job *j = (struct jpeg_job *)cinfo->err;
    if (d->input_scan_number > MAX_JPEG_SCANS) {
        snprintf(j->msg, sizeof j->msg, "JPEG has more than %d progressive scans", MAX_JPEG_SCANS);
        longjmp(j->jmp, 1);
    }
}

static int decode_jpeg_job(struct jpeg_job *j, const uint8_t *buf, size_t len, const char *name,
                           int channels, uint64_t max_pixels, struct dt_image *out)
{
    j->cinfo.err = jpeg_std_error(&j->pub);
    j->pub.error_exit = jpeg_job_error;
    j->pub.emit_message = jpeg_job_emit;
    if (setjmp(j->jmp))
        return dt_fail(DT_EDATA, "%s: %s", name, j->msg);
    jpeg_create_decompress(&j->cinfo);
    j->progress.progress_monitor = jpeg_job_progress;
    j->cinfo.progress = &j->progress;
    jpeg_mem_src(&j->cinfo, buf, (unsigned long)len);
    jpeg_read_header(&j->cinfo, TRUE);
    if (j->cinfo.jpeg_color_space == JCS_CMYK || j->cinfo.jpeg_color_space == JCS_YCCK)
        return dt_fail(DT_EDATA, "%s: CMYK JPEG is not supported (convert it to RGB)", name);
    /* Before jpeg_start_decompress: a progressive file gets its whole-image coefficient
     * buffer there. */
    int rc = check_budget(name, "JPEG", j->cinfo.image_height, j->cinfo.image_width, channels,
                          max_pixels, &j->bytes);
    if (rc)
        return rc;
    j->cinfo.out_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_start_decompress(&j->cinfo);
    size_t w = j->cinfo.output_width, h = j->cinfo.output_height;
    int c = j->cinfo.output_components;
    if (w > MAX_SIDE || h > MAX_SIDE || c != channels || w * h * (size_t)c != j->bytes)
        return dt_fail(DT_EDATA, "%s: JPEG of %zux%zu with %d channels is not supported", name, h,
                       w, c);
    j->px = malloc(j->bytes);
    if (!j->px)
        return dt_fail(DT_ERUNTIME, "%s: out of memory for %zux%zu image", name, w, h);
    while (j->cinfo.output_scanline < h) {
        JSAMPROW row = j->px + (size_t)j->cinfo.output_scanline * w * (size_t)c;
        jpeg_read_scanlines(&j->cinfo, &row, 1);
    }
    jpeg_finish_decompress(&j->cinfo);
    out->h = (int)h;
    out->w = (int)w;
    out->c = c;
    out->px = j->px;
    j->px = NULL;
    return 0;
}

static int decode_jpeg(const uint8_t *buf, size_t len, const char *name, int channels,
                       uint64_t max_pixels, struct dt_image *out)
{
    struct jpeg_job *j = calloc(1, sizeof *j);
    if (!j)
        return dt_fail(DT_ERUNTIME, "%s: out of memory", name);
    int rc = decode_jpeg_job(j, buf, len, name, channels, max_pixels, out);
    jpeg_destroy_decompress(&j->cinfo);
    free(j->px);
    free(j);
    return rc;
}

/* ---- conversion, dispatch ---- */

static int to_gray(struct dt_image *img, const char *name)
{
    size_t n = (size_t)img->h * (size_t)img->w;
    uint8_t *g = malloc(n ? n : 1);
    if (!g)
        return dt_fail(DT_ERUNTIME, "%s: out of memory", name);
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = img->px + 3 * i;
        g[i] = (uint8_t)((p[0] * 19595u + p[1] * 38470u + p[2] * 7471u + 32768u) >> 16);
    }
    free(img->px);
    img->px = g;
    img->c = 1;
    return 0;
}

int dt_image_decode(const uint8_t *buf, size_t len, const char *label, int channels,
                    uint64_t max_pixels, struct dt_image *out)
{
    static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    memset(out, 0, sizeof *out);
    char name[DT_PRINTABLE_MAX];
    dt_printable(label, name, sizeof name);
    if (!max_pixels)
        max_pixels = DT_IMAGE_MAX_PIXELS;
    if (channels != 1 && channels != 3)
        return dt_fail(DT_EUSAGE, "%s: %d channels requested, expected 1 or 3", name, channels);
    int rc;
    if (len >= 8 && memcmp(buf, png_sig, 8) == 0)
        rc = decode_png(buf, len, name, channels, max_pixels, out);
    else if (len >= 3 && buf[0] == 0xff && buf[1] == 0xd8 && buf[2] == 0xff)
        rc = decode_jpeg(buf, len, name, channels, max_pixels, out);
    else
        return dt_fail(DT_EDATA, "%s: not a PNG or JPEG file (%s)", name,
                       len ? "unknown signature" : "empty");
    if (rc)
        return rc;
    if (out->h == 0 || out->w == 0) {
        dt_image_free(out);
        return dt_fail(DT_EDATA, "%s: image has no pixels", name);
    }
    if (out->c == 3 && channels == 1 && (rc = to_gray(out, name))) {
        dt_image_free(out);
        return rc;
    }
    return 0;
}

void dt_image_free(struct dt_image *img)
{
    free(img->px);
    memset(img, 0, sizeof *img);
}

/* ---- resizing ---- */

/* Weights of one output coordinate: source taps [first, first + n) with normalised weights. */
struct taps {
    int first, n;
    float *w; /* n weights */
};

/* PIL's antialiased bilinear: a triangle of half-width support = max(1, 1/scale) around the
 * output pixel's centre mapped into the source. `offset` is the crop offset in resized
 * coordinates. Returns an array of `count` taps (weights in one block), or NULL. */
static struct taps *make_taps(int src, double scale, int offset, int count, float **block)
{
    double support = scale < 1 ? 1.0 / scale : 1.0;
    int maxn = (int)ceil(support) * 2 + 1;
    struct taps *t = malloc(sizeof *t * (size_t)count);
    float *w = malloc(sizeof *w * (size_t)count * (size_t)maxn);
    if (!t || !w) {
        free(t);
        free(w);
        return NULL;
    }
    for (int i = 0; i < count; i++) {
        double centre = (i + offset + 0.5) / scale;
        int lo = (int)floor(centre - support + 0.5);
        int hi = (int)floor(centre + support + 0.5);
        if (lo < 0)
            lo = 0;
        if (hi > src)
            hi = src;
        if (hi - lo > maxn)
            hi = lo + maxn;
        double sum = 0;
        float *wi = w + (size_t)i * (size_t)maxn;
        for (int k = lo; k < hi; k++) {
            double d = fabs((k + 0.5 - centre) / support);
            double v = d < 1 ? 1 - d : 0;
            wi[k - lo] = (float)v;
            sum += v;
        }
        if (sum <= 0) { /* cannot happen with support >= 1, but never divide by zero */
            int k = (int)centre < src ? (int)centre : src - 1;
            lo = k;
            hi = k + 1;
            wi[0] = 1;
            sum = 1;
        }
        for (int k = 0; k < hi - lo; k++)
            wi[k] = (float)(wi[k] / sum);
        t[i] = (struct taps){lo, hi - lo, wi};
    }
    *block = w;
    return t;
}

static uint8_t clamp_round(float v)
{
    return v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)(v + 0.5f);
}

int dt_image_fit(const struct dt_image *img, int h, int w, uint8_t *out)
{
    int c = img->c;
    size_t plane = (size_t)h * (size_t)w;
    if (img->h == h && img->w == w) {
        for (size_t i = 0; i < plane; i++)
            for (int ch = 0; ch < c; ch++)
                out[(size_t)ch * plane + i] = img->px[i * (size_t)c + (size_t)ch];
        return 0;
    }
    /* Cover: the larger of the two ratios, so both sides reach the target. */
    double sy = (double)h / img->h, sx = (double)w / img->w;
    double scale = sy > sx ? sy : sx;
    int rh = (int)lround(img->h * scale), rw = (int)lround(img->w * scale);
    if (rh < h)
        rh = h;
    if (rw < w)
        rw = w;
    float *wy_block = NULL, *wx_block = NULL;
    struct taps *ty = make_taps(img->h, scale, (rh - h) / 2, h, &wy_block);
    struct taps *tx = make_taps(img->w, scale, (rw - w) / 2, w, &wx_block);
    float *rows = malloc(sizeof *rows * (size_t)img->h * (size_t)w * (size_t)c);
    if (!ty || !tx || !rows) {
        free(ty);
        free(tx);
        free(wy_block);
        free(wx_block);
        free(rows);
        return dt_fail(DT_ERUNTIME, "out of memory resizing a %dx%d image", img->h, img->w);
    }
    /* Horizontal pass over every source row, then vertical into the planar output. */
    for (int y = 0; y < img->h; y++)
        for (int x = 0; x < w; x++)
            for (int ch = 0; ch < c; ch++) {
                const uint8_t *src = img->px + ((size_t)y * (size_t)img->w) * (size_t)c;
                float acc = 0;
                for (int k = 0; k < tx[x].n; k++)
                    acc += tx[x].w[k] * src[(size_t)(tx[x].first + k) * (size_t)c + (size_t)ch];
                rows[((size_t)y * (size_t)w + (size_t)x) * (size_t)c + (size_t)ch] = acc;
            }
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int ch = 0; ch < c; ch++) {
                float acc = 0;
                for (int k = 0; k < ty[y].n; k++)
                    acc += ty[y].w[k] *
                           rows[((size_t)(ty[y].first + k) * (size_t)w + (size_t)x) * (size_t)c +
                                (size_t)ch];
                out[(size_t)ch * plane + (size_t)y * (size_t)w + (size_t)x] = clamp_round(acc);
            }
    free(ty);
    free(tx);
    free(wy_block);
    free(wx_block);
    free(rows);
    return 0;
}

/* util/draw.h's PNG renderer: shapes rasterised into an 8-bit RGB image by coverage (a pixel
 * takes the share of it a shape covers, from its centre's distance to the shape: lines and
 * circles come out anti-aliased), text from the 5x7 font scaled to whole pixels, then written
 * through libpng. No font files, no drawing library. */
#include <math.h>
#include <png.h>
#include <stdlib.h>
#include <string.h>

#include "util/draw.h"
#include "util/err.h"
#include "util/fileio.h"
#include "util/font5x7.h"

struct image {
    int w, h;
    unsigned char *rgb;
};

static void blend(struct image *im, int x, int y, uint32_t color, double alpha)
{
    if (x < 0 || y < 0 || x >= im->w || y >= im->h || alpha <= 0)
        return;
    if (alpha > 1)
        alpha = 1;
    unsigned char *p = im->rgb + 3 * ((size_t)y * (size_t)im->w + (size_t)x);
    for (int c = 0; c < 3; c++) {
        double v = (double)((color >> (16 - 8 * c)) & 0xff);
        p[c] = (unsigned char)lround(p[c] + (v - p[c]) * alpha);
    }
}

static double clamp01(double v)
{
    return v < 0 ? 0 : v > 1 ? 1 : v;
}

/* A segment of width w: coverage from the distance of each pixel centre to it; dashed lines
 * leave gaps of 3 pixels after 4. */
static void segment(struct image *im, double x1, double y1, double x2, double y2, double w,
                    uint32_t color, bool dashed)
{
    double half = w / 2, dx = x2 - x1, dy = y2 - y1, len2 = dx * dx + dy * dy;
    int xa = (int)floor(fmin(x1, x2) - half - 1), xb = (int)ceil(fmax(x1, x2) + half + 1);
    int ya = (int)floor(fmin(y1, y2) - half - 1), yb = (int)ceil(fmax(y1, y2) + half + 1);
    for (int y = ya; y <= yb; y++)
        for (int x = xa; x <= xb; x++) {
            if (x < 0 || y < 0 || x >= im->w || y >= im->h)
                continue;
            double px = x + 0.5, py = y + 0.5;
            double t = len2 > 0 ? ((px - x1) * dx + (py - y1) * dy) / len2 : 0;
            t = clamp01(t);
            if (dashed && fmod(t * sqrt(len2), 7.0) > 4.0)
                continue;
            double ex = x1 + t * dx - px, ey = y1 + t * dy - py;
            blend(im, x, y, color, clamp01(half + 0.5 - sqrt(ex * ex + ey * ey)));
        }
}

static void fill_rect(struct image *im, double x, double y, double w, double h, uint32_t color)
{
    int xa = (int)lround(x), xb = (int)lround(x + w), ya = (int)lround(y), yb = (int)lround(y + h);
    for (int py = ya; py < yb; py++)
        for (int px = xa; px < xb; px++)
            blend(im, px, py, color, 1);
}

static void circle(struct image *im, double cx, double cy, double r, uint32_t color)
{
    for (int y = (int)floor(cy - r - 1); y <= (int)ceil(cy + r + 1); y++)
        for (int x = (int)floor(cx - r - 1); x <= (int)ceil(cx + r + 1); x++) {
            double dx = x + 0.5 - cx, dy = y + 0.5 - cy;
            blend(im, x, y, color, clamp01(r + 0.5 - sqrt(dx * dx + dy * dy)));
        }
}

/* (x, y) is the baseline as in SVG: the glyphs' 7 rows end there. */
static void text(struct image *im, const struct dt_draw_item *it)
{
    int scale = (int)lround(it->size / 10);
    if (scale < 1)
        scale = 1;
    double width = (double)strlen(it->text) * 6 * scale - scale;
    double x = it->anchor == DT_ANCHOR_MIDDLE ? it->x - width / 2
               : it->anchor == DT_ANCHOR_END  ? it->x - width
                                              : it->x;
    int x0 = (int)lround(x), top = (int)lround(it->y) - 7 * scale;
    for (const char *c = it->text; *c; c++, x0 += 6 * scale) {
        const char *g = dt_font5x7_glyph((unsigned char)*c);
        for (int r = 0; r < 7; r++)
            for (int k = 0; k < 5; k++)
                if (g[r * 5 + k] == '#')
                    fill_rect(im, x0 + k * scale, top + r * scale, scale, scale, it->color);
    }
}

static void draw(struct image *im, const struct dt_draw_item *it)
{
    switch (it->kind) {
    case DT_DRAW_LINE:
        segment(im, it->x, it->y, it->x2, it->y2, it->width, it->color, it->dashed);
        break;
    case DT_DRAW_RECT:
        fill_rect(im, it->x, it->y, it->x2, it->y2, it->fill);
        if (it->width > 0) {
            double x2 = it->x + it->x2, y2 = it->y + it->y2;
            segment(im, it->x, it->y, x2, it->y, it->width, it->color, false);
            segment(im, x2, it->y, x2, y2, it->width, it->color, false);
            segment(im, x2, y2, it->x, y2, it->width, it->color, false);
            segment(im, it->x, y2, it->x, it->y, it->width, it->color, false);
        }
        break;
    case DT_DRAW_CIRCLE:
        circle(im, it->x, it->y, it->r, it->fill);
        break;
    case DT_DRAW_TEXT:
        text(im, it);
        break;
    case DT_DRAW_POLYLINE:
        for (size_t i = 1; i < it->npts; i++)
            segment(im, it->pts[2 * i - 2], it->pts[2 * i - 1], it->pts[2 * i], it->pts[2 * i + 1],
                    it->width, it->color, false);
        if (it->npts == 1) /* one point: a dot, or nothing would show */
            circle(im, it->pts[0], it->pts[1], it->width, it->color);
        break;
    }
}

static int write_png(const struct image *im, struct dt_atomic_file *af)
{
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_write_struct(&png, NULL);
        return dt_fail(DT_ERUNTIME, "%s: libpng: out of memory", af->path);
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        return dt_fail(DT_ERUNTIME, "%s: libpng could not write the image", af->path);
    }
    png_init_io(png, af->f);
    png_set_IHDR(png, info, (png_uint_32)im->w, (png_uint_32)im->h, 8, PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < im->h; y++)
        png_write_row(png, im->rgb + 3 * (size_t)y * (size_t)im->w);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    return 0;
}

int dt_draw_write_png(const struct dt_drawing *d, const char *path)
{
    if (d->failed || d->width <= 0 || d->height <= 0)
        return dt_fail(DT_ERUNTIME, "%s: out of memory drawing the picture", path);
    struct image im = {d->width, d->height, malloc(3 * (size_t)d->width * (size_t)d->height)};
    if (!im.rgb)
        return dt_fail(DT_ERUNTIME, "%s: out of memory for a %dx%d image", path, d->width,
                       d->height);
    memset(im.rgb, 0xff, 3 * (size_t)d->width * (size_t)d->height);
    for (size_t i = 0; i < d->n; i++)
        draw(&im, &d->items[i]);
    struct dt_atomic_file af;
    int rc = dt_atomic_open(&af, path);
    if (rc == 0) {
        rc = write_png(&im, &af);
        if (rc)
            dt_atomic_abort(&af);
        else
            rc = dt_atomic_commit(&af);
    }
    free(im.rgb);
    return rc;
}

/* A drawing as a list of shapes, rendered to SVG (util/svg.c) or to PNG (util/raster.c), so a
 * chart is laid out once and both files show the same picture. Coordinates are pixels, y down.
 *
 * A polyline may carry the data it plots (data_x, data_y): the SVG keeps them as attributes
 * next to the pixel points, so a reader (or a test) can check the picture against its source.
 */
#ifndef DT_UTIL_DRAW_H
#define DT_UTIL_DRAW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum dt_draw_kind { DT_DRAW_LINE, DT_DRAW_POLYLINE, DT_DRAW_RECT, DT_DRAW_TEXT, DT_DRAW_CIRCLE };
enum dt_text_anchor { DT_ANCHOR_START, DT_ANCHOR_MIDDLE, DT_ANCHOR_END };

struct dt_draw_item {
    enum dt_draw_kind kind;
    double x, y, x2, y2;  /* line ends; rect corner and size (x2 = w, y2 = h); circle centre */
    double r, width;      /* circle radius; stroke width (0: no stroke) */
    uint32_t color, fill; /* 0xRRGGBB; fill only for rect and circle */
    bool filled, dashed;
    double size; /* text height in pixels */
    enum dt_text_anchor anchor;
    char *text;   /* text; polyline: its series name (the SVG's data-series) */
    double *pts;  /* polyline: x0 y0 x1 y1 ... in pixels */
    double *data; /* polyline: the plotted values, x0 y0 x1 y1 ..., or NULL */
    size_t npts;
};

struct dt_drawing {
    int width, height;
    struct dt_draw_item *items;
    size_t n, cap;
    bool failed; /* out of memory: the writers refuse */
};

void dt_draw_init(struct dt_drawing *d, int width, int height);
void dt_draw_free(struct dt_drawing *d);
void dt_draw_line(struct dt_drawing *d, double x1, double y1, double x2, double y2, uint32_t color,
                  double width, bool dashed);
void dt_draw_rect(struct dt_drawing *d, double x, double y, double w, double h, uint32_t fill,
                  uint32_t stroke, double stroke_width);
void dt_draw_circle(struct dt_drawing *d, double x, double y, double r, uint32_t fill);
void dt_draw_text(struct dt_drawing *d, double x, double y, double size, enum dt_text_anchor anchor,
                  uint32_t color, const char *text);
/* n points in pixels (px, py), and when data_x is not NULL the values they plot. */
void dt_draw_polyline(struct dt_drawing *d, const double *px, const double *py, size_t n,
                      uint32_t color, double width, const char *series, const double *data_x,
                      const double *data_y);

/* SVG 1.1 text, or a PNG (8-bit RGB, through libpng). DT_ERUNTIME naming the path when it
 * cannot be written. */
int dt_draw_write_svg(const struct dt_drawing *d, const char *path);
int dt_draw_write_png(const struct dt_drawing *d, const char *path);
/* By the path's extension: .svg or .png; DT_EUSAGE for any other. */
int dt_draw_write(const struct dt_drawing *d, const char *path);

/* Width in pixels of text at size, as both renderers lay it out (a fixed advance). */
double dt_draw_text_width(const char *text, double size);

/* The smallest 1, 2 or 5 x 10^k step giving at most ~6 axis ticks over span (1 when span is
 * not positive). */
double dt_draw_tick_step(double span);

/* At most max bytes of s (SIZE_MAX: all of it) as XML text or attribute value: <, >, & and "
 * escaped, control characters other than tab dropped (XML 1.0 allows none). For SVG written
 * by hand (cmd/bench/plot.c) as well as by dt_draw_write_svg. */
void dt_draw_xml_text(FILE *f, const char *s, size_t max);

#endif

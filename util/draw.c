/* The shape list of util/draw.h. */
#include "util/draw.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/err.h"

void dt_draw_init(struct dt_drawing *d, int width, int height)
{
    memset(d, 0, sizeof *d);
    d->width = width;
    d->height = height;
}

void dt_draw_free(struct dt_drawing *d)
{
    for (size_t i = 0; i < d->n; i++) {
        free(d->items[i].text);
        free(d->items[i].pts);
        free(d->items[i].data);
    }
    free(d->items);
    memset(d, 0, sizeof *d);
}

static struct dt_draw_item *add(struct dt_drawing *d, enum dt_draw_kind kind)
{
    if (d->failed)
        return NULL;
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 64;
        void *p = realloc(d->items, cap * sizeof *d->items);
        if (!p) {
            d->failed = true;
            return NULL;
        }
        d->items = p;
        d->cap = cap;
    }
    struct dt_draw_item *it = &d->items[d->n++];
    memset(it, 0, sizeof *it);
    it->kind = kind;
    return it;
}

void dt_draw_line(struct dt_drawing *d, double x1, double y1, double x2, double y2, uint32_t color,
                  double width, bool dashed)
{
    struct dt_draw_item *it = add(d, DT_DRAW_LINE);
    if (it)
        *it = (struct dt_draw_item){.kind = DT_DRAW_LINE,
                                    .x = x1,
                                    .y = y1,
                                    .x2 = x2,
                                    .y2 = y2,
                                    .color = color,
                                    .width = width,
                                    .dashed = dashed};
}

void dt_draw_rect(struct dt_drawing *d, double x, double y, double w, double h, uint32_t fill,
                  uint32_t stroke, double stroke_width)
{
    struct dt_draw_item *it = add(d, DT_DRAW_RECT);
    if (it)
        *it = (struct dt_draw_item){.kind = DT_DRAW_RECT,
                                    .x = x,
                                    .y = y,
                                    .x2 = w,
                                    .y2 = h,
                                    .fill = fill,
                                    .filled = true,
                                    .color = stroke,
                                    .width = stroke_width};
}

void dt_draw_circle(struct dt_drawing *d, double x, double y, double r, uint32_t fill)
{
    struct dt_draw_item *it = add(d, DT_DRAW_CIRCLE);
    if (it)
        *it = (struct dt_draw_item){
            .kind = DT_DRAW_CIRCLE, .x = x, .y = y, .r = r, .fill = fill, .filled = true};
}

void dt_draw_text(struct dt_drawing *d, double x, double y, double size, enum dt_text_anchor anchor,
                  uint32_t color, const char *text)
{
    struct dt_draw_item *it = add(d, DT_DRAW_TEXT);
    if (!it)
        return;
    *it = (struct dt_draw_item){.kind = DT_DRAW_TEXT,
                                .x = x,
                                .y = y,
                                .size = size,
                                .anchor = anchor,
                                .color = color,
                                .text = strdup(text)};
    if (!it->text)
        d->failed = true;
}

void dt_draw_polyline(struct dt_drawing *d, const double *px, const double *py, size_t n,
                      uint32_t color, double width, const char *series, const double *data_x,
                      const double *data_y)
{
    struct dt_draw_item *it = add(d, DT_DRAW_POLYLINE);
    if (!it)
        return;
    *it = (struct dt_draw_item){.kind = DT_DRAW_POLYLINE,
                                .color = color,
                                .width = width,
                                .npts = n,
                                .text = strdup(series ? series : "")};
    it->pts = malloc((2 * n + 1) * sizeof(double));
    it->data = data_x ? malloc((2 * n + 1) * sizeof(double)) : NULL;
    if (!it->text || !it->pts || (data_x && !it->data)) {
        d->failed = true;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        it->pts[2 * i] = px[i];
        it->pts[2 * i + 1] = py[i];
        if (it->data) {
            it->data[2 * i] = data_x[i];
            it->data[2 * i + 1] = data_y[i];
        }
    }
}

double dt_draw_text_width(const char *text, double size)
{
    return (double)strlen(text) * size *
           0.6; /* a monospace advance: the SVG font's, and about the PNG's */
}

int dt_draw_write(const struct dt_drawing *d, const char *path)
{
    const char *dot = strrchr(path, '.');
    if (dot && !strcasecmp(dot, ".svg"))
        return dt_draw_write_svg(d, path);
    if (dot && !strcasecmp(dot, ".png"))
        return dt_draw_write_png(d, path);
    return dt_fail(DT_EUSAGE, "%s: the picture's name must end in .svg or .png", path);
}

double dt_draw_tick_step(double span)
{
    if (!(span > 0))
        return 1;
    double raw = span / 6, mag = pow(10, floor(log10(raw)));
    double r = raw / mag;
    return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * mag;
}

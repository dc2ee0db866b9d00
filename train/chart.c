/* The line chart of chart.h. */
#include "train/chart.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LEFT = 78, RIGHT = 24, TOP = 44, BOTTOM = 56 };

static const uint32_t palette[] = {0x1f77b4, 0xd62728, 0x2ca02c, 0xff7f0e, 0x9467bd,
                                   0x8c564b, 0xe377c2, 0x7f7f7f, 0xbcbd22, 0x17becf};

uint32_t dt_chart_color(int i)
{
    return palette[(unsigned)i % (sizeof palette / sizeof palette[0])];
}

struct range {
    double lo, hi;
};

static struct range data_range(const struct dt_chart *c, bool y_axis)
{
    struct range r = {INFINITY, -INFINITY};
    for (int s = 0; s < c->nseries; s++)
        for (size_t i = 0; i < c->series[s].n; i++) {
            double v = y_axis ? c->series[s].y[i] : c->series[s].x[i];
            if (isfinite(v)) {
                r.lo = fmin(r.lo, v);
                r.hi = fmax(r.hi, v);
            }
        }
    if (!(r.lo <= r.hi))
        r = (struct range){0, 1};
    if (r.hi - r.lo < 1e-12) { /* one value: give it room */
        double pad = fabs(r.lo) > 0 ? fabs(r.lo) * 0.1 : 1;
        r.lo -= pad;
        r.hi += pad;
    }
    if (y_axis) { /* a margin so curves do not sit on the frame */
        double pad = (r.hi - r.lo) * 0.05;
        r.lo -= pad;
        r.hi += pad;
    }
    return r;
}

static void format_tick(double v, double step, char *buf, size_t size)
{
    if (fabs(v) < step * 1e-6)
        v = 0;
    if (fabs(v) >= 1e5 || (fabs(v) > 0 && fabs(v) < 1e-3))
        snprintf(buf, size, "%.2g", v);
    else
        snprintf(buf, size, "%.*f", step >= 1 ? 0 : (int)ceil(-log10(step)), v);
}

struct frame {
    double x0, y0, w, h; /* plot area in pixels */
    struct range xr, yr;
};

static double px(const struct frame *f, double x)
{
    return f->x0 + (x - f->xr.lo) / (f->xr.hi - f->xr.lo) * f->w;
}

static double py(const struct frame *f, double y)
{
    return f->y0 + f->h - (y - f->yr.lo) / (f->yr.hi - f->yr.lo) * f->h;
}

static void axes(const struct dt_chart *c, const struct frame *f, struct dt_drawing *d)
{
    char buf[48];
    double ys = dt_draw_tick_step(f->yr.hi - f->yr.lo), xs = dt_draw_tick_step(f->xr.hi - f->xr.lo);
    for (double v = ceil(f->yr.lo / ys) * ys; v <= f->yr.hi + ys * 1e-9; v += ys) {
        dt_draw_line(d, f->x0, py(f, v), f->x0 + f->w, py(f, v), 0xe6e6e6, 1, false);
        format_tick(v, ys, buf, sizeof buf);
        dt_draw_text(d, f->x0 - 6, py(f, v) + 4, 11, DT_ANCHOR_END, 0x444444, buf);
    }
    for (double v = ceil(f->xr.lo / xs) * xs; v <= f->xr.hi + xs * 1e-9; v += xs) {
        dt_draw_line(d, px(f, v), f->y0, px(f, v), f->y0 + f->h, 0xeeeeee, 1, false);
        format_tick(v, xs, buf, sizeof buf);
        dt_draw_text(d, px(f, v), f->y0 + f->h + 18, 11, DT_ANCHOR_MIDDLE, 0x444444, buf);
    }
    dt_draw_line(d, f->x0, f->y0 + f->h, f->x0 + f->w, f->y0 + f->h, 0x333333, 1, false);
    dt_draw_line(d, f->x0, f->y0, f->x0, f->y0 + f->h, 0x333333, 1, false);
    dt_draw_text(d, f->x0 + f->w / 2, f->y0 + f->h + 42, 12, DT_ANCHOR_MIDDLE, 0x222222, c->xlabel);
    dt_draw_text(d, 8, f->y0 - 12, 12, DT_ANCHOR_START, 0x222222, c->ylabel);
    dt_draw_text(d, f->x0 + f->w / 2, 24, 16, DT_ANCHOR_MIDDLE, 0x111111, c->title);
}

/* The legend goes in the top right corner unless the curves end up there (accuracy rises):
 * then in the bottom right. */
static bool curves_end_high(const struct dt_chart *c, const struct frame *f)
{
    double sum = 0;
    int n = 0;
    for (int s = 0; s < c->nseries; s++)
        if (c->series[s].n) {
            sum += (c->series[s].y[c->series[s].n - 1] - f->yr.lo) / (f->yr.hi - f->yr.lo);
            n++;
        }
    return n && sum / n > 0.5;
}

static void legend(const struct dt_chart *c, const struct frame *f, bool bottom,
                   struct dt_drawing *d)
{
    double width = 0;
    for (int s = 0; s < c->nseries; s++)
        width = fmax(width, dt_draw_text_width(c->series[s].name, 11) + 60);
    double x = f->x0 + f->w - width - 8, y = f->y0 + 8;
    if (bottom)
        y = f->y0 + f->h - 8 - (18.0 * c->nseries + 8);
    dt_draw_rect(d, x, y, width, 18.0 * c->nseries + 8, 0xffffff, 0xbbbbbb, 1);
    for (int s = 0; s < c->nseries; s++) {
        double ly = y + 16 + 18.0 * s;
        dt_draw_line(d, x + 8, ly - 4, x + 30, ly - 4, c->series[s].color, 2.5, false);
        char name[128];
        snprintf(name, sizeof name, "%s%s", c->series[s].name, c->series[s].n ? "" : " (no data)");
        dt_draw_text(d, x + 36, ly, 11, DT_ANCHOR_START, 0x222222, name);
    }
}

void dt_chart_draw(const struct dt_chart *c, int width, int height, struct dt_drawing *d)
{
    dt_draw_init(d, width, height);
    struct frame f = {LEFT,
                      TOP,
                      width - LEFT - RIGHT,
                      height - TOP - BOTTOM,
                      data_range(c, false),
                      data_range(c, true)};
    axes(c, &f, d);
    bool high = curves_end_high(c, &f); /* legend below, mark labels above */
    for (int m = 0; m < c->nmarks; m++) {
        const struct dt_chart_mark *mk = &c->marks[m];
        dt_draw_line(d, px(&f, mk->x), f.y0, px(&f, mk->x), f.y0 + f.h, mk->color, 1.2, true);
        dt_draw_circle(d, px(&f, mk->x), py(&f, mk->y), 5, mk->color);
        /* the label on the side of the line with room for it */
        bool left = px(&f, mk->x) + 8 + dt_draw_text_width(mk->label, 11) > f.x0 + f.w;
        double ly = high ? f.y0 + f.h * 0.5 + 14.0 * m : f.y0 + f.h - 10 - 14.0 * m;
        dt_draw_text(d, px(&f, mk->x) + (left ? -6 : 6), ly, 11,
                     left ? DT_ANCHOR_END : DT_ANCHOR_START, mk->color, mk->label);
    }
    for (int s = 0; s < c->nseries; s++) {
        const struct dt_series *sr = &c->series[s];
        if (!sr->n)
            continue;
        double *pxs = malloc(2 * sr->n * sizeof(double)), *pys = pxs + sr->n;
        if (!pxs) {
            d->failed = true;
            return;
        }
        for (size_t i = 0; i < sr->n; i++) {
            pxs[i] = px(&f, sr->x[i]);
            pys[i] = py(&f, sr->y[i]);
        }
        dt_draw_polyline(d, pxs, pys, sr->n, sr->color, sr->width > 0 ? sr->width : 2, sr->name,
                         sr->x, sr->y);
        free(pxs);
    }
    legend(c, &f, high, d);
}

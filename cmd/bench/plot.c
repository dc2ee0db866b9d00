/* A benchmark table as an SVG bar chart, written by hand: a horizontal bar per row (label on
 * the left, value at the bar's end, a min-max whisker when the row was repeated), a value axis
 * with round ticks, the machine underneath the title. Plain SVG 1.1 with no scripts or external
 * references, so any browser, image viewer or XML parser takes it; no plotting dependency.
 *
 * Every row gets one <rect class="bar"> (a failed row an empty one plus "failed: why"), so a
 * reader, or a test, can match bars to rows one to one.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cmd/bench/bench.h"
#include "util/draw.h"
#include "util/err.h"

enum {
    WIDTH = 820,
    LEFT = 130,  /* label column */
    RIGHT = 110, /* room for the value printed after the longest bar */
    TOP = 64,    /* title and subtitle */
    ROW = 28,    /* height of one row */
    BAR = 18,    /* height of one bar */
    BOTTOM = 48, /* axis ticks and title */
};

static void format_value(double v, char *buf, size_t cap)
{
    if (fabs(v) >= 100)
        snprintf(buf, cap, "%.0f", v);
    else if (fabs(v) >= 10)
        snprintf(buf, cap, "%.1f", v);
    else
        snprintf(buf, cap, "%.3g", v);
}

static void row_label(const struct dt_bench_table *t, int i, char *buf, size_t cap)
{
    buf[0] = 0;
    int from = t->plot_label_col >= 0 ? t->plot_label_col : 0;
    int to = t->plot_label_col >= 0 ? t->plot_label_col + 1 : t->label_cols;
    for (int j = from; j < to; j++) {
        const struct dt_bench_cell *c = &t->cells[(size_t)i * t->ncols + j];
        size_t len = strlen(buf);
        const char *sep = j > from ? " x " : "";
        if (t->cols[j].kind == DT_BENCH_STR)
            snprintf(buf + len, cap - len, "%s%s", sep, c->str ? c->str : "");
        else
            snprintf(buf + len, cap - len, "%s%lld", sep, (long long)c->num);
    }
}

static double cell(const struct dt_bench_table *t, int i, int j)
{
    if (j < 0 || t->errors[i])
        return NAN;
    const struct dt_bench_cell *c = &t->cells[(size_t)i * t->ncols + j];
    return c->missing ? NAN : c->num;
}

int dt_bench_table_write_svg(const struct dt_bench_table *t, const char *path, const char *title,
                             const char *subtitle)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return dt_fail(DT_ERUNTIME, "%s: cannot write the plot: %m", path);
    double max = 0;
    for (int i = 0; i < t->rows; i++) {
        double v = fmax(cell(t, i, t->value_col), cell(t, i, t->hi_col));
        if (isfinite(v) && v > max)
            max = v;
    }
    double step = dt_draw_tick_step(max), top = step * ceil(max / step);
    if (!(top > 0))
        top = 1;
    int plot_w = WIDTH - LEFT - RIGHT, height = TOP + t->rows * ROW + BOTTOM;
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
            "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"13\">\n"
            "<style>.bar{fill:#3b75af}.failed{fill:none;stroke:#c0392b}"
            ".err{fill:#c0392b}.grid{stroke:#ddd}.whisker{stroke:#222}</style>\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            WIDTH, height, WIDTH, height);
    fputs("<text x=\"10\" y=\"22\" font-size=\"16\" font-weight=\"bold\">", f);
    dt_draw_xml_text(f, title, 200);
    fputs("</text>\n<text x=\"10\" y=\"42\" fill=\"#555\">", f);
    dt_draw_xml_text(f, subtitle, 160);
    fputs("</text>\n", f);

    int axis_y = TOP + t->rows * ROW;
    char buf[128];
    for (double v = 0; v <= top * (1 + 1e-9); v += step) {
        double x = LEFT + plot_w * v / top;
        format_value(v, buf, sizeof buf);
        fprintf(f,
                "<line class=\"grid\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>"
                "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"#555\">%s</text>\n",
                x, TOP - 6, x, axis_y, x, axis_y + 16, buf);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", LEFT + plot_w / 2, axis_y + 36);
    dt_draw_xml_text(f, t->value_name ? t->value_name : t->cols[t->value_col].head, 100);
    fputs("</text>\n", f);

    for (int i = 0; i < t->rows; i++) {
        int y = TOP + i * ROW + (ROW - BAR) / 2;
        row_label(t, i, buf, sizeof buf);
        fprintf(f, "<g class=\"row\"><text x=\"%d\" y=\"%d\" text-anchor=\"end\">", LEFT - 8,
                y + BAR - 4);
        dt_draw_xml_text(f, buf, 40);
        fputs("</text>", f);
        double v = cell(t, i, t->value_col);
        if (t->errors[i] || !isfinite(v)) {
            fprintf(f,
                    "<rect class=\"bar failed\" x=\"%d\" y=\"%d\" width=\"0\" height=\"%d\"/>"
                    "<text class=\"err\" x=\"%d\" y=\"%d\">failed: ",
                    LEFT, y, BAR, LEFT + 6, y + BAR - 4);
            dt_draw_xml_text(f, t->errors[i] ? t->errors[i] : "no value", 90);
            fputs("</text></g>\n", f);
            continue;
        }
        double w = plot_w * v / top;
        format_value(v, buf, sizeof buf);
        fprintf(f, "<rect class=\"bar\" x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\">", LEFT, y,
                w, BAR);
        fprintf(f, "<title>%s</title></rect>", buf);
        double lo = cell(t, i, t->lo_col), hi = cell(t, i, t->hi_col);
        if (isfinite(lo) && isfinite(hi) && hi > lo) {
            double x1 = LEFT + plot_w * lo / top, x2 = LEFT + plot_w * hi / top;
            int ym = y + BAR / 2;
            fprintf(f, "<path class=\"whisker\" d=\"M%.1f %dH%.1fM%.1f %dV%dM%.1f %dV%d\"/>", x1,
                    ym, x2, x1, ym - 5, ym + 5, x2, ym - 5, ym + 5);
            w = fmax(w, x2 - LEFT);
        }
        fprintf(f, "<text x=\"%.1f\" y=\"%d\">%s</text></g>\n", LEFT + w + 6, y + BAR - 4, buf);
    }
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#222\"/>\n", LEFT, TOP - 6,
            LEFT, axis_y);
    fputs("</svg>\n", f);
    if (fclose(f) != 0)
        return dt_fail(DT_ERUNTIME, "%s: writing the plot failed: %m", path);
    return 0;
}

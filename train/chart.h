/* A line chart laid out into a util/draw.h drawing: axes with round ticks, one polyline per
 * series (carrying its data, so the SVG can be checked against the source), a legend, and
 * marks (a dashed vertical line with a dot and a label: the best epoch). */
#ifndef DT_TRAIN_CHART_H
#define DT_TRAIN_CHART_H

#include <stddef.h>
#include <stdint.h>

#include "util/draw.h"

struct dt_series {
    char name[96];
    uint32_t color;
    double width;
    double *x, *y; /* owned by the caller */
    size_t n;
};

struct dt_chart_mark {
    double x, y;
    char label[96];
    uint32_t color;
};

#define DT_CHART_MAX_SERIES 32
#define DT_CHART_MAX_MARKS  16

struct dt_chart {
    char title[160];
    const char *xlabel, *ylabel;
    struct dt_series series[DT_CHART_MAX_SERIES];
    int nseries;
    struct dt_chart_mark marks[DT_CHART_MAX_MARKS];
    int nmarks;
};

/* The chart as a width x height drawing (d is initialised here). Series with no points are
 * left out of the plot but named in the legend as "(no data)". */
void dt_chart_draw(const struct dt_chart *c, int width, int height, struct dt_drawing *d);

/* The i-th colour of a palette that keeps neighbours apart. */
uint32_t dt_chart_color(int i);

#endif

/* util/draw.h's SVG renderer: plain SVG 1.1, no scripts or external references. A polyline with
 * data carries it as data-x and data-y (space-separated, %.9g) and its name as data-series,
 * point for point with its pixel points. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "util/draw.h"
#include "util/err.h"
#include "util/fileio.h"

void dt_draw_xml_text(FILE *f, const char *s, size_t max)
{
    for (size_t i = 0; *s && i < max; s++, i++) {
        switch (*s) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\t') /* XML 1.0 has no other controls */
                fputc(*s, f);
        }
    }
}

static void polyline(FILE *f, const struct dt_draw_item *it)
{
    fprintf(f, "<polyline class=\"series\" data-series=\"");
    dt_draw_xml_text(f, it->text, SIZE_MAX);
    fprintf(f, "\" fill=\"none\" stroke=\"#%06x\" stroke-width=\"%g\" points=\"", it->color,
            it->width);
    for (size_t i = 0; i < it->npts; i++)
        fprintf(f, "%s%.2f,%.2f", i ? " " : "", it->pts[2 * i], it->pts[2 * i + 1]);
    fputc('"', f);
    if (it->data) {
        for (int axis = 0; axis < 2; axis++) {
            fprintf(f, " data-%c=\"", axis ? 'y' : 'x');
            for (size_t i = 0; i < it->npts; i++)
                fprintf(f, "%s%.9g", i ? " " : "", it->data[2 * i + axis]);
            fputc('"', f);
        }
    }
    fputs("/>\n", f);
}

static void item(FILE *f, const struct dt_draw_item *it)
{
    static const char *const anchors[] = {"start", "middle", "end"};
    switch (it->kind) {
    case DT_DRAW_LINE:
        fprintf(f,
                "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#%06x\" "
                "stroke-width=\"%g\"%s/>\n",
                it->x, it->y, it->x2, it->y2, it->color, it->width,
                it->dashed ? " stroke-dasharray=\"4 3\"" : "");
        break;
    case DT_DRAW_RECT:
        fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"#%06x\"",
                it->x, it->y, it->x2, it->y2, it->fill);
        if (it->width > 0)
            fprintf(f, " stroke=\"#%06x\" stroke-width=\"%g\"", it->color, it->width);
        fputs("/>\n", f);
        break;
    case DT_DRAW_CIRCLE:
        fprintf(f, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"%.2f\" fill=\"#%06x\"/>\n", it->x, it->y,
                it->r, it->fill);
        break;
    case DT_DRAW_TEXT:
        fprintf(f,
                "<text x=\"%.2f\" y=\"%.2f\" font-family=\"monospace\" font-size=\"%g\" "
                "text-anchor=\"%s\" fill=\"#%06x\">",
                it->x, it->y, it->size, anchors[it->anchor], it->color);
        dt_draw_xml_text(f, it->text, SIZE_MAX);
        fputs("</text>\n", f);
        break;
    case DT_DRAW_POLYLINE:
        polyline(f, it);
        break;
    }
}

int dt_draw_write_svg(const struct dt_drawing *d, const char *path)
{
    if (d->failed)
        return dt_fail(DT_ERUNTIME, "%s: out of memory drawing the picture", path);
    struct dt_atomic_file af;
    int rc = dt_atomic_open(&af, path);
    if (rc)
        return rc;
    FILE *f = af.f;
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
            "height=\"%d\" viewBox=\"0 0 %d %d\">\n",
            d->width, d->height, d->width, d->height);
    for (size_t i = 0; i < d->n; i++)
        item(f, &d->items[i]);
    fputs("</svg>\n", f);
    return dt_atomic_commit(&af);
}

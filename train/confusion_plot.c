/* The confusion heat map of confusion_plot.h, laid out into a util/draw.h drawing. */
#include "train/confusion_plot.h"

#include <stdio.h>
#include <string.h>

#include "util/draw.h"
#include "util/err.h"

enum { CELL_MAX = 48, CELL_MIN = 14, GRID_MAX = 720, LEFT = 150, TOP = 70 };

/* White to deep blue by share. */
static uint32_t shade(double share)
{
    share = share < 0 ? 0 : share > 1 ? 1 : share;
    int r = (int)(255 - share * (255 - 8)), g = (int)(255 - share * (255 - 48)),
        b = (int)(255 - share * (255 - 107));
    return (uint32_t)r << 16 | (uint32_t)g << 8 | (uint32_t)b;
}

int dt_confusion_plot(const struct dt_eval_result *r, const struct dt_dataset *names,
                      const char *title, const char *path)
{
    int k = r->classes;
    int cell = k > 0 ? GRID_MAX / k : CELL_MAX;
    cell = cell > CELL_MAX ? CELL_MAX : cell < CELL_MIN ? CELL_MIN : cell;
    struct dt_drawing d;
    dt_draw_init(&d, LEFT + k * cell + 40, TOP + k * cell + 60);
    dt_draw_text(&d, d.width / 2.0, 26, 16, DT_ANCHOR_MIDDLE, 0x111111, title);
    dt_draw_text(&d, LEFT + k * cell / 2.0, TOP - 26, 12, DT_ANCHOR_MIDDLE, 0x222222,
                 "predicted class");
    dt_draw_text(&d, 8, TOP - 8, 12, DT_ANCHOR_START, 0x222222, "true class");
    char buf[64];
    for (int i = 0; i < k; i++) {
        double total = 0;
        for (int j = 0; j < k; j++)
            total += dt_eval_confusion(r, i, j);
        dt_draw_text(&d, LEFT - 6, TOP + (i + 0.5) * cell + 4, 11, DT_ANCHOR_END, 0x222222,
                     dt_dataset_class_name(names, i, buf, 20));
        snprintf(buf, sizeof buf, "%d", i);
        dt_draw_text(&d, LEFT + (i + 0.5) * cell, TOP - 6, 11, DT_ANCHOR_MIDDLE, 0x222222, buf);
        for (int j = 0; j < k; j++) {
            double v = dt_eval_confusion(r, i, j), share = total > 0 ? v / total : 0;
            dt_draw_rect(&d, LEFT + j * cell, TOP + i * cell, cell, cell, shade(share), 0xdddddd,
                         1);
            if (cell >= 24 && v > 0) {
                snprintf(buf, sizeof buf, "%.0f", v);
                dt_draw_text(&d, LEFT + (j + 0.5) * cell, TOP + (i + 0.5) * cell + 4, 10,
                             DT_ANCHOR_MIDDLE, share > 0.5 ? 0xffffff : 0x222222, buf);
            }
        }
    }
    int rc = dt_draw_write(&d, path);
    dt_draw_free(&d);
    return rc;
}

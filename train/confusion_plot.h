/* `eval --plot FILE`: a confusion matrix as a heat map (rows: true class, columns: predicted;
 * each cell shaded by its share of the row, the count written in it), SVG or PNG by FILE's
 * extension. */
#ifndef DT_TRAIN_CONFUSION_PLOT_H
#define DT_TRAIN_CONFUSION_PLOT_H

#include "data/dataset.h"
#include "train/evaluate.h"

/* names: the class names of d. DT_EUSAGE for an extension other than .svg or .png,
 * DT_ERUNTIME when the file cannot be written. */
int dt_confusion_plot(const struct dt_eval_result *r, const struct dt_dataset *names,
                      const char *title, const char *path);

#endif

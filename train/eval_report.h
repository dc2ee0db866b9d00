/* What `dtrain eval` prints: the checkpoint and its position (epoch, step), the figures of one
 * evaluated split as a text report or one JSON object (event "eval"): loss, accuracy, top-k
 * accuracy, per-class samples, precision, recall and F1 with their macro average, the confusion
 * matrix, and with --errors the worst misclassified samples named by their files (image folders) or
 * SPLIT#index (archives). */
#ifndef DT_TRAIN_EVAL_REPORT_H
#define DT_TRAIN_EVAL_REPORT_H

#include <stdio.h>

#include "data/dataset.h"
#include "train/evaluate.h"

struct dt_eval_report {
    const char *checkpoint;
    long long epoch, step; /* the checkpoint's position (epoch: the epochs completed at step) */
    enum dt_split split;
    const struct dt_dataset *data; /* the evaluated split: class and sample names */
    const struct dt_eval_result *result;
};

void dt_eval_print_text(const struct dt_eval_report *rep, FILE *out);
void dt_eval_print_json(const struct dt_eval_report *rep, FILE *out);

#endif

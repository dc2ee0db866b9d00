/* What train/predict*.c share (internal to the prediction engine; train/predict.h
 * is its interface): the model opened from the checkpoint, and what was predicted so far. */
#ifndef DT_TRAIN_PREDICT_RUN_H
#define DT_TRAIN_PREDICT_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nn/model.h"
#include "train/config.h"
#include "train/predict.h"

struct dt_predictor {
    const struct dt_predict_options *o;
    struct dt_config cfg;
    struct dt_model *model;
    struct dt_shape in;
    char **names; /* model->classes entries, or NULL */
    float *x;
    uint8_t *y;
    uint32_t *idx;
    double *prob;     /* model->classes: the checkpoint says how many, so never a fixed array */
    size_t good, bad; /* samples predicted, and inputs that could not be */
};

/* One sample's top classes: a text line, or a JSON object; label < 0 when not known. */
void dt_predict_report(struct dt_predictor *p, const char *file, int label, const float *out);
/* A file that could not be predicted: one line on stderr (control characters escaped) and,
 * with json, a record in its place among the predictions. Counted in p->bad. */
void dt_predict_report_bad(struct dt_predictor *p, const char *file, const char *error);

#endif

/* `eval --errors N`: the N misclassified samples the model was surest about, i.e. with the
 * highest probability on a wrong class (the predicted one), with their true and predicted
 * classes and both probabilities. Kept sorted as they come (worst first; on equal
 * probability the earlier sample first), so memory is N entries whatever the split's size. */
#ifndef DT_TRAIN_EVAL_ERRORS_H
#define DT_TRAIN_EVAL_ERRORS_H

#include <stddef.h>

#include "nn/model.h"

struct dt_eval_error {
    size_t sample; /* index in the evaluated split */
    int truth, predicted;
    double p_predicted; /* the model's probability of the predicted (wrong) class */
    double p_truth;     /* ...and of the true class */
};

struct dt_eval_errors {
    struct dt_eval_error *worst; /* n of them, worst first */
    int n, cap;
    double *prob; /* one row's probabilities */
    int classes;
};

/* Room for the worst `cap` (>= 1) of a model with `classes` outputs. 0 or -DT_ERUNTIME. */
int dt_eval_errors_init(struct dt_eval_errors *e, int cap, int classes);
void dt_eval_errors_free(struct dt_eval_errors *e);
/* Offers one misclassified sample: its output row (under the model's loss kind) and label. */
int dt_eval_errors_add(struct dt_eval_errors *e, enum dt_loss_kind loss, const float *row,
                       int classes, size_t sample, int truth);

#endif

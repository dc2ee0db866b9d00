/* The worst misclassified samples (see eval_errors.h). */
#include "train/eval_errors.h"

#include <stdlib.h>
#include <string.h>

#include "nn/loss.h"
#include "util/err.h"

int dt_eval_errors_init(struct dt_eval_errors *e, int cap, int classes)
{
    memset(e, 0, sizeof *e);
    e->worst = calloc((size_t)cap, sizeof *e->worst);
    e->prob = calloc((size_t)classes, sizeof *e->prob);
    e->cap = cap;
    e->classes = classes;
    if (e->worst && e->prob)
        return 0;
    dt_eval_errors_free(e);
    return dt_fail(DT_ERUNTIME, "out of memory for %d misclassified samples", cap);
}

void dt_eval_errors_free(struct dt_eval_errors *e)
{
    free(e->worst);
    free(e->prob);
    memset(e, 0, sizeof *e);
}

/* a ranks before b: surer of its wrong class, or as sure and earlier in the split. */
static int worse(const struct dt_eval_error *a, const struct dt_eval_error *b)
{
    return a->p_predicted > b->p_predicted ||
           (a->p_predicted == b->p_predicted && a->sample < b->sample);
}

int dt_eval_errors_add(struct dt_eval_errors *e, enum dt_loss_kind loss, const float *row,
                       int classes, size_t sample, int truth)
{
    if (classes > e->classes)
        return dt_fail(DT_ERUNTIME, "eval errors: %d outputs, room for %d", classes, e->classes);
    dt_loss_probabilities(loss, row, classes, e->prob);
    int predicted = dt_argmax(row, classes);
    struct dt_eval_error x = {.sample = sample,
                              .truth = truth,
                              .predicted = predicted,
                              .p_predicted = e->prob[predicted],
                              .p_truth = e->prob[truth]};
    if (e->n == e->cap && !worse(&x, &e->worst[e->n - 1]))
        return 0;
    int at = e->n < e->cap ? e->n++ : e->n - 1;
    while (at > 0 && worse(&x, &e->worst[at - 1])) {
        e->worst[at] = e->worst[at - 1];
        at--;
    }
    e->worst[at] = x;
    return 0;
}

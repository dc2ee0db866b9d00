/* Test-set evaluation shared by `train` (each epoch end) and `eval`: loss, accuracy, top-k
 * accuracy and the confusion matrix over a contiguous shard [begin, end) of a dataset, so N
 * ranks each evaluate 1/N of it and sum the result with one all-reduce; per-class precision,
 * recall and F1 from the matrix; optionally the worst misclassified samples (eval --errors,
 * train/eval_errors.h). */
#ifndef DT_TRAIN_EVALUATE_H
#define DT_TRAIN_EVALUATE_H

#include <stddef.h>

#include "data/batch.h"
#include "data/dataset.h"
#include "dist/comm.h"
#include "nn/model.h"

struct dt_eval_errors;

struct dt_eval_result {
    int classes;
    int top_k; /* also count labels within the top k outputs; 0 = no top-k (train's epochs) */
    /* Laid out as one float array so a single all-reduce sums all of it: [0] loss sum,
     * [1] correct, [2] samples, [3] within the top k, [4 ..] confusion[true][predicted]. */
    float *sums;
    /* When not NULL (a single-rank evaluation): collects the worst misclassified samples. */
    struct dt_eval_errors *errors;
};

/* top_k and errors start 0 / NULL; set them before dt_evaluate. */
int dt_eval_result_init(struct dt_eval_result *r, int classes);
void dt_eval_result_free(struct dt_eval_result *r);
double dt_eval_samples(const struct dt_eval_result *r);
double dt_eval_loss(const struct dt_eval_result *r);
double dt_eval_accuracy(const struct dt_eval_result *r);
/* Share of samples whose label is among the top_k outputs (ties as dt_argmax breaks them). */
double dt_eval_top_k_accuracy(const struct dt_eval_result *r);
float dt_eval_confusion(const struct dt_eval_result *r, int truth, int predicted);

/* One class's figures from the confusion matrix: support = samples of the class; precision =
 * correct / predicted as the class; recall = correct / support; F1 = their harmonic mean.
 * A ratio with nothing to divide by is 0 (scikit-learn's zero_division=0). */
struct dt_class_metrics {
    double support, precision, recall, f1;
};
struct dt_class_metrics dt_eval_class_metrics(const struct dt_eval_result *r, int cls);
/* Their unweighted mean over the classes that have samples or predictions (macro average). */
struct dt_class_metrics dt_eval_macro_metrics(const struct dt_eval_result *r);

/* Scratch for evaluation batches of up to `batch` samples (allocated once). */
struct dt_eval_scratch {
    int batch;
    float *x;
    uint8_t *y;
    uint32_t *idx;
};
int dt_eval_scratch_init(struct dt_eval_scratch *s, int batch, size_t sample_floats);
void dt_eval_scratch_free(struct dt_eval_scratch *s);

/* Evaluates this rank's shard of d (rank r of comm->size gets a contiguous 1/size) and sums
 * every rank's counts into r through comm. All ranks must call it. */
int dt_evaluate(struct dt_model *m, const struct dt_dataset *d, const struct dt_batcher *b,
                struct dt_eval_scratch *s, struct dt_comm *comm, struct dt_eval_result *r);

#endif

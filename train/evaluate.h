/* Test-set evaluation shared by `train` (each epoch end) and `eval`: loss, accuracy and the
 * confusion matrix over a contiguous shard [begin, end) of a dataset, so N ranks each
 * evaluate 1/N of it and sum the result with one all-reduce. */
#ifndef DT_TRAIN_EVALUATE_H
#define DT_TRAIN_EVALUATE_H

#include <stddef.h>

#include "data/batch.h"
#include "data/dataset.h"
#include "dist/comm.h"
#include "nn/model.h"

struct dt_eval_result {
    int classes;
    /* Laid out as one float array so a single all-reduce sums all of it:
     * [0] loss sum, [1] correct, [2] samples, [3 ..] confusion[true][predicted]. */
    float *sums;
};

int dt_eval_result_init(struct dt_eval_result *r, int classes);
void dt_eval_result_free(struct dt_eval_result *r);
double dt_eval_loss(const struct dt_eval_result *r);
double dt_eval_accuracy(const struct dt_eval_result *r);
float dt_eval_confusion(const struct dt_eval_result *r, int truth, int predicted);

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

#include "train/evaluate.h"

#include <stdlib.h>
#include <string.h>

#include "dist/launcher.h"
#include "nn/loss.h"
#include "train/eval_errors.h"
#include "util/alloc.h"
#include "util/err.h"

/* sums[] before the confusion matrix: loss, correct, samples, within the top k. */
#define SUMS_HEAD 4

int dt_eval_result_init(struct dt_eval_result *r, int classes)
{
    r->classes = classes;
    r->top_k = 0;
    r->errors = NULL;
    r->sums = dt_alloc(SUMS_HEAD + (size_t)classes * classes, sizeof(float));
    return r->sums ? 0 : -DT_ERUNTIME;
}

void dt_eval_result_free(struct dt_eval_result *r)
{
    dt_free(r->sums);
    r->sums = NULL;
}

double dt_eval_samples(const struct dt_eval_result *r)
{
    return r->sums[2];
}

double dt_eval_loss(const struct dt_eval_result *r)
{
    return r->sums[2] > 0 ? r->sums[0] / r->sums[2] : 0.0;
}

double dt_eval_accuracy(const struct dt_eval_result *r)
{
    return r->sums[2] > 0 ? r->sums[1] / r->sums[2] : 0.0;
}

double dt_eval_top_k_accuracy(const struct dt_eval_result *r)
{
    return r->sums[2] > 0 ? r->sums[3] / r->sums[2] : 0.0;
}

float dt_eval_confusion(const struct dt_eval_result *r, int truth, int predicted)
{
    return r->sums[SUMS_HEAD + (size_t)truth * r->classes + predicted];
}

static double ratio(double a, double b)
{
    return b > 0 ? a / b : 0.0;
}

struct dt_class_metrics dt_eval_class_metrics(const struct dt_eval_result *r, int cls)
{
    double support = 0, predicted = 0, correct = dt_eval_confusion(r, cls, cls);
    for (int j = 0; j < r->classes; j++) {
        support += dt_eval_confusion(r, cls, j);
        predicted += dt_eval_confusion(r, j, cls);
    }
    struct dt_class_metrics m = {.support = support,
                                 .precision = ratio(correct, predicted),
                                 .recall = ratio(correct, support)};
    m.f1 = ratio(2 * m.precision * m.recall, m.precision + m.recall);
    return m;
}

struct dt_class_metrics dt_eval_macro_metrics(const struct dt_eval_result *r)
{
    struct dt_class_metrics sum = {0, 0, 0, 0};
    int counted = 0;
    for (int c = 0; c < r->classes; c++) {
        double predicted = 0;
        for (int j = 0; j < r->classes; j++)
            predicted += dt_eval_confusion(r, j, c);
        struct dt_class_metrics m = dt_eval_class_metrics(r, c);
        if (m.support == 0 && predicted == 0)
            continue; /* a class absent from this split and never predicted says nothing */
        sum.support += m.support;
        sum.precision += m.precision;
        sum.recall += m.recall;
        sum.f1 += m.f1;
        counted++;
    }
    if (counted) {
        sum.precision /= counted;
        sum.recall /= counted;
        sum.f1 /= counted;
    }
    return sum;
}

int dt_eval_scratch_init(struct dt_eval_scratch *s, int batch, size_t sample_floats)
{
    s->batch = batch;
    s->x = dt_alloc((size_t)batch * sample_floats, sizeof(float));
    s->y = dt_alloc((size_t)batch, 1);
    s->idx = dt_alloc((size_t)batch, sizeof(uint32_t));
    if (!s->x || !s->y || !s->idx) {
        dt_eval_scratch_free(s);
        return -DT_ERUNTIME;
    }
    return 0;
}

void dt_eval_scratch_free(struct dt_eval_scratch *s)
{
    dt_free(s->x);
    dt_free(s->y);
    dt_free(s->idx);
    memset(s, 0, sizeof *s);
}

int dt_evaluate(struct dt_model *m, const struct dt_dataset *d, const struct dt_batcher *b,
                struct dt_eval_scratch *s, struct dt_comm *comm, struct dt_eval_result *r)
{
    size_t n = d->n, size = (size_t)comm->size, rank = (size_t)comm->rank;
    size_t begin = n * rank / size, end = n * (rank + 1) / size;
    int classes = r->classes;
    size_t nsums = SUMS_HEAD + (size_t)classes * classes;
    memset(r->sums, 0, nsums * sizeof(float));
    struct dt_forward_ctx ctx = {.training = false};
    double loss_total = 0;
    for (size_t at = begin; at < end; at += (size_t)s->batch) {
        int count = (int)(end - at < (size_t)s->batch ? end - at : (size_t)s->batch);
        for (int i = 0; i < count; i++)
            s->idx[i] = (uint32_t)(at + (size_t)i);
        dt_batch_assemble(b, d, s->idx, count, 0, 0, s->x, s->y);
        dt_launch_alive(); /* a long evaluation is progress for the launcher's watchdog */
        int rc = dt_model_forward(m, s->x, count, &ctx);
        if (rc)
            return rc;
        double loss_sum;
        int correct;
        dt_model_loss(m, s->y, count, &loss_sum, &correct);
        loss_total += loss_sum;
        r->sums[1] += (float)correct;
        r->sums[2] += (float)count;
        for (int i = 0; i < count; i++) {
            const float *row = m->output + (size_t)i * m->classes;
            int pred = dt_argmax(row, m->classes), label = s->y[i];
            if (label < classes && pred < classes)
                r->sums[SUMS_HEAD + (size_t)label * classes + pred] += 1.0f;
            if (label < m->classes && r->top_k > 0 &&
                dt_label_rank(row, m->classes, label) < r->top_k)
                r->sums[3] += 1.0f;
            if (r->errors && label < m->classes && pred != label &&
                (rc = dt_eval_errors_add(r->errors, m->loss, row, m->classes, at + (size_t)i,
                                         label)))
                return rc;
        }
    }
    r->sums[0] = (float)loss_total;
    return comm->allreduce_sum(comm, r->sums, nsums);
}

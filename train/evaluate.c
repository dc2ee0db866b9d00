#include "train/evaluate.h"

#include <stdlib.h>
#include <string.h>

#include "dist/launcher.h"
#include "nn/loss.h"
#include "util/alloc.h"
#include "util/err.h"

int dt_eval_result_init(struct dt_eval_result *r, int classes)
{
    r->classes = classes;
    r->sums = dt_alloc(3 + (size_t)classes * classes, sizeof(float));
    return r->sums ? 0 : -DT_ERUNTIME;
}

void dt_eval_result_free(struct dt_eval_result *r)
{
    dt_free(r->sums);
    r->sums = NULL;
}

double dt_eval_loss(const struct dt_eval_result *r)
{
    return r->sums[2] > 0 ? r->sums[0] / r->sums[2] : 0.0;
}

double dt_eval_accuracy(const struct dt_eval_result *r)
{
    return r->sums[2] > 0 ? r->sums[1] / r->sums[2] : 0.0;
}

float dt_eval_confusion(const struct dt_eval_result *r, int truth, int predicted)
{
    return r->sums[3 + (size_t)truth * r->classes + predicted];
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
    memset(r->sums, 0, (3 + (size_t)classes * classes) * sizeof(float));
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
            int pred = dt_argmax(m->output + (size_t)i * m->classes, m->classes);
            if (s->y[i] < classes && pred < classes)
                r->sums[3 + (size_t)s->y[i] * classes + pred] += 1.0f;
        }
    }
    r->sums[0] = (float)loss_total;
    return comm->allreduce_sum(comm, r->sums, 3 + (size_t)classes * classes);
}

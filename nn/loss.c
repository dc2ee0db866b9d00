/* NLL and fused softmax cross-entropy (see nn/loss.h). Per-sample sums are accumulated in
 * double so the reported loss does not depend on the order of a few thousand float additions
 * more than necessary. */
#include "nn/loss.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "util/err.h"

static const char *const kind_names[] = {
    [DT_LOSS_NLL] = "nll",
    [DT_LOSS_CROSS_ENTROPY] = "cross_entropy",
};
_Static_assert(sizeof kind_names / sizeof kind_names[0] == DT_LOSS_COUNT, "one name per loss");
const struct dt_names dt_loss_kind_names = DT_NAMES(kind_names);

int dt_loss_kind_parse(const char *name, enum dt_loss_kind *out)
{
    int v = dt_names_find(&dt_loss_kind_names, name);
    if (v < 0) {
        char valid[64];
        dt_names_join(&dt_loss_kind_names, valid, sizeof valid);
        return dt_fail(DT_EUSAGE, "unknown loss \"%s\" (valid: %s)", name, valid);
    }
    *out = (enum dt_loss_kind)v;
    return 0;
}

int dt_argmax(const float *row, int classes)
{
    int best = 0;
    for (int k = 1; k < classes; k++)
        if (row[k] > row[best])
            best = k;
    return best;
}

int dt_label_rank(const float *row, int classes, int label)
{
    int rank = 0;
    for (int k = 0; k < classes; k++)
        rank += row[k] > row[label] || (row[k] == row[label] && k < label);
    return rank;
}

void dt_loss_probabilities(enum dt_loss_kind kind, const float *row, int classes, double *prob)
{
    bool log_probs = kind == DT_LOSS_NLL;
    double max = row[dt_argmax(row, classes)], sum = 0;
    for (int k = 0; k < classes; k++)
        sum += prob[k] = exp(log_probs ? row[k] : row[k] - max);
    for (int k = 0; k < classes && !log_probs; k++)
        prob[k] /= sum;
}

/* log(sum(exp(row))) with the maximum factored out. */
static double row_logsumexp(const float *row, int classes, float max)
{
    double s = 0;
    for (int k = 0; k < classes; k++)
        s += exp((double)row[k] - max);
    return max + log(s);
}

/* Mean of the row, the part of the loss that label smoothing spreads over every class. */
static double row_mean(const float *row, int classes)
{
    double s = 0;
    for (int k = 0; k < classes; k++)
        s += row[k];
    return s / classes;
}

double dt_loss_sum(enum dt_loss_kind kind, float smoothing, const float *out, int classes,
                   const uint8_t *labels, int batch, int *correct)
{
    double sum = 0;
    int ok = 0;
    for (int b = 0; b < batch; b++) {
        const float *row = out + (size_t)b * classes;
        int label = labels[b];
        if (label >= classes) {
            sum += NAN;
            continue;
        }
        int best = dt_argmax(row, classes);
        ok += best == label;
        if (kind == DT_LOSS_CROSS_ENTROPY && smoothing != 0)
            sum += row_logsumexp(row, classes, row[best]) - (1.0 - smoothing) * row[label] -
                   smoothing * row_mean(row, classes);
        else if (kind == DT_LOSS_CROSS_ENTROPY)
            sum += row_logsumexp(row, classes, row[best]) - row[label];
        else
            sum -= row[label];
    }
    if (correct)
        *correct = ok;
    return sum;
}

int dt_loss_grad(enum dt_loss_kind kind, float smoothing, const float *out, int classes,
                 const uint8_t *labels, int batch, float scale, float *dout)
{
    for (int b = 0; b < batch; b++)
        if (labels[b] >= classes)
            return dt_fail(DT_EDATA, "sample %d of the batch: label %d is not below the %d classes",
                           b, labels[b], classes);
#pragma omp parallel for if (batch * classes > 65536)
    for (int b = 0; b < batch; b++) {
        const float *row = out + (size_t)b * classes;
        float *d = dout + (size_t)b * classes;
        if (kind == DT_LOSS_CROSS_ENTROPY) {
            float max = row[dt_argmax(row, classes)];
            double s = 0;
            for (int k = 0; k < classes; k++)
                s += exp((double)row[k] - max);
            /* Smoothing moves eps/C of the target mass to every class: the gradient is
             * softmax - (1 - eps) onehot - eps / C. */
            double spread = (double)smoothing / classes;
            for (int k = 0; k < classes; k++)
                d[k] = (float)(exp((double)row[k] - max) / s - spread) * scale;
            d[labels[b]] -= (float)(1.0 - smoothing) * scale;
        } else {
            for (int k = 0; k < classes; k++)
                d[k] = 0.0f;
            d[labels[b]] -= scale;
        }
    }
    return 0;
}

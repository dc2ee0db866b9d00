/* Classification losses on a batch of model outputs (batch x classes, row-major).
 *
 * nll:           loss_b = -out[b][label_b]; out is expected to be log-probabilities (a
 *                log_softmax layer last), exactly like torch.nn.functional.nll_loss.
 * cross_entropy: loss_b = logsumexp(out[b]) - out[b][label_b] on raw logits, computed with the
 *                row maximum subtracted so large logits never overflow; its gradient is
 *                softmax(out[b]) - onehot(label_b).
 *                With label smoothing eps (torch.nn.CrossEntropyLoss(label_smoothing=eps)) the
 *                target is (1 - eps) onehot + eps / classes: loss_b = logsumexp(out[b]) -
 *                (1 - eps) out[b][label_b] - eps mean(out[b]), gradient softmax - target.
 *                nll ignores the smoothing (torch's nll_loss has none; the config refuses it).
 * Both report sums over the batch; the caller divides (see dt_model_backward's grad_scale).
 */
#ifndef DT_NN_LOSS_H
#define DT_NN_LOSS_H

#include <stdint.h>

#include "nn/model.h"
#include "util/names.h"

/* loss.type's names: "nll", "cross_entropy" (enum dt_loss_kind is nn/model.h's). */
extern const struct dt_names dt_loss_kind_names;

/* "nll" or "cross_entropy" -> the kind; DT_EUSAGE naming the valid ones otherwise. */
int dt_loss_kind_parse(const char *name, enum dt_loss_kind *out);

/* The index of the row's largest output, the first one on a tie: the predicted class. */
int dt_argmax(const float *row, int classes);
/* How many classes rank above `label` in the row (a higher output, or the same output and a
 * lower index, as dt_argmax breaks ties): 0 = predicted, < k = within the top k. */
int dt_label_rank(const float *row, int classes, int label);
/* The row as class probabilities: exp of log-probabilities for nll (a log_softmax layer
 * last), the softmax of the logits for cross_entropy. */
void dt_loss_probabilities(enum dt_loss_kind kind, const float *row, int classes, double *prob);

/* Sum of per-sample losses; *correct counts argmax(out[b]) == label_b (first maximum wins).
 * A label >= classes contributes NaN to the sum and is never correct. */
double dt_loss_sum(enum dt_loss_kind kind, float smoothing, const float *out, int classes,
                   const uint8_t *labels, int batch, int *correct);

/* dout = d(sum of losses)/d(out) x scale. DT_EDATA naming the sample when a label is out of
 * range. */
int dt_loss_grad(enum dt_loss_kind kind, float smoothing, const float *out, int classes,
                 const uint8_t *labels, int batch, float scale, float *dout);

#endif

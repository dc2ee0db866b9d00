/* Which epoch's weights become best.safetensors, and where that epoch is.
 *
 * With a validation split: the highest validation accuracy. Without one: the lowest training
 * loss -- never the test accuracy, because picking the epoch that scores best on the test set
 * makes that same test figure an optimistic estimate of how the model does on new data.
 * A resumed run carries the record on (the checkpoint stores the best epoch's score, epoch and
 * step), so it replaces best.safetensors only with a better epoch; when the rule changed
 * between the runs (a validation split added or removed), the next epoch starts a new record. */
#ifndef DT_TRAIN_BEST_H
#define DT_TRAIN_BEST_H

#include <stdbool.h>
#include <stddef.h>

#include "util/json.h"

struct dt_best {
    bool on_val;           /* choose on validation accuracy (else on training loss) */
    bool any;              /* an epoch has been scored */
    double score;          /* higher is better: val accuracy, or minus the training loss */
    long long epoch, step; /* the best epoch (counted from 1) and the step at its end */
};

void dt_best_init(struct dt_best *b, bool on_val);
/* Scores the epoch `epoch` (from 1) that ended at `step`; true when it is the best so far (the
 * first epoch always is; a tie keeps the earlier). */
bool dt_best_update(struct dt_best *b, double val_accuracy, double train_loss, long long epoch,
                    long long step);
/* What the rule scores: "val_accuracy" or "train_loss". */
const char *dt_best_metric(const struct dt_best *b);
/* A score in the metric's own units (the loss positive again). */
double dt_best_metric_value(const struct dt_best *b, double score);

/* An epoch event's best fields: "best" (this epoch became the new best), "best_metric",
 * "best_score" (in the metric's units), "best_epoch", "best_step" (where best.safetensors'
 * epoch is); nothing while no epoch has been scored. */
void dt_best_json(const struct dt_best *b, bool new_best, struct dt_json_writer *w);
/* The epoch line's words for a new best: "new best: val accuracy 91.23%" or "new best: train
 * loss 0.3112". */
void dt_best_describe(const struct dt_best *b, char *buf, size_t size);

#endif

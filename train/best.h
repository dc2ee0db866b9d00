/* Which epoch's weights become best.safetensors.
 *
 * With a validation split: the highest validation accuracy. Without one: the lowest training
 * loss -- never the test accuracy, because picking the epoch that scores best on the test set
 * makes that same test figure an optimistic estimate of how the model does on new data. */
#ifndef DT_TRAIN_BEST_H
#define DT_TRAIN_BEST_H

#include <stdbool.h>

struct dt_best {
    bool on_val; /* choose on validation accuracy (else on training loss) */
    bool any;    /* an epoch has been scored */
    double score; /* higher is better: val accuracy, or minus the training loss */
};

void dt_best_init(struct dt_best *b, bool on_val);
/* Scores an epoch; true when it is the best so far (the first epoch always is). */
bool dt_best_update(struct dt_best *b, double val_accuracy, double train_loss);

#endif

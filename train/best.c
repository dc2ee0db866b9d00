/* The best-epoch rule (see best.h). */
#include "train/best.h"

void dt_best_init(struct dt_best *b, bool on_val)
{
    *b = (struct dt_best){.on_val = on_val};
}

bool dt_best_update(struct dt_best *b, double val_accuracy, double train_loss)
{
    double score = b->on_val ? val_accuracy : -train_loss;
    if (b->any && !(score > b->score))
        return false;
    b->any = true;
    b->score = score;
    return true;
}

/* The best-epoch rule (see best.h). */
#include "train/best.h"

#include <stdio.h>

void dt_best_init(struct dt_best *b, bool on_val)
{
    *b = (struct dt_best){.on_val = on_val};
}

bool dt_best_update(struct dt_best *b, double val_accuracy, double train_loss, long long epoch,
                    long long step)
{
    double score = b->on_val ? val_accuracy : -train_loss;
    if (b->any && !(score > b->score))
        return false;
    b->any = true;
    b->score = score;
    b->epoch = epoch;
    b->step = step;
    return true;
}

const char *dt_best_metric(const struct dt_best *b)
{
    return b->on_val ? "val_accuracy" : "train_loss";
}

double dt_best_metric_value(const struct dt_best *b, double score)
{
    return b->on_val ? score : -score;
}

void dt_best_json(const struct dt_best *b, bool new_best, struct dt_json_writer *w)
{
    if (!b->any)
        return;
    dt_jw_bool(w, "best", new_best);
    dt_jw_str(w, "best_metric", dt_best_metric(b));
    dt_jw_num(w, "best_score", dt_best_metric_value(b, b->score));
    dt_jw_int(w, "best_epoch", b->epoch);
    dt_jw_int(w, "best_step", b->step);
}

void dt_best_describe(const struct dt_best *b, char *buf, size_t size)
{
    if (b->on_val)
        snprintf(buf, size, "new best: val accuracy %.2f%%", 100 * b->score);
    else
        snprintf(buf, size, "new best: train loss %.4f", -b->score);
}

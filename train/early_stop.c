/* Early stopping (see train/early_stop.h). */
#include "train/early_stop.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn/checkpoint.h"

static const struct {
    const char *name;
    bool higher_better, needs_val;
} metrics[] = {
    [DT_ES_NONE] = {"none", false, false},
    [DT_ES_VAL_ACCURACY] = {"val_accuracy", true, true},
    [DT_ES_VAL_LOSS] = {"val_loss", false, true},
    [DT_ES_TRAIN_LOSS] = {"train_loss", false, false},
    [DT_ES_TRAIN_ACCURACY] = {"train_accuracy", true, false},
};
_Static_assert(sizeof metrics / sizeof metrics[0] == DT_ES_METRICS, "one row per metric");

const char *dt_es_metric_name(enum dt_es_metric m)
{
    return m < DT_ES_METRICS ? metrics[m].name : "?";
}

bool dt_es_metric_needs_val(enum dt_es_metric m)
{
    return m < DT_ES_METRICS && metrics[m].needs_val;
}

static int metric_by_name(const char *name)
{
    for (int m = 0; m < DT_ES_METRICS; m++)
        if (!strcmp(metrics[m].name, name))
            return m;
    return -1;
}

const char *dt_early_stop_resolve(struct dt_early_stop_config *c, bool has_val, char *msg,
                                  size_t size)
{
    static const char key[] = "train.early_stop.metric";
    int m = metric_by_name(c->metric_name);
    if (m < 0 && !strncmp(c->metric_name, "test_", 5)) {
        snprintf(msg, size,
                 "\"%s\": the test set is not offered, stopping where it scores best makes its "
                 "figures optimistic; hold out data.val_fraction and use val_%s",
                 c->metric_name, c->metric_name + 5);
        return key;
    }
    if (m < 0) {
        snprintf(msg, size,
                 "unknown metric \"%s\" (expected none, val_accuracy, val_loss, train_loss or "
                 "train_accuracy)",
                 c->metric_name);
        return key;
    }
    c->metric = (enum dt_es_metric)m;
    if (metrics[m].needs_val && !has_val) {
        snprintf(msg, size,
                 "%s needs a validation split: set data.val_fraction (e.g. 0.1), or use "
                 "train_loss",
                 c->metric_name);
        return key;
    }
    return NULL;
}

void dt_early_stop_init(struct dt_early_stop *s, const struct dt_early_stop_config *c)
{
    memset(s, 0, sizeof *s);
    s->metric = c->metric;
    s->patience = c->patience;
    s->min_delta = c->min_delta;
}

bool dt_early_stop_enabled(const struct dt_early_stop *s)
{
    return s->metric != DT_ES_NONE;
}

static double score_of(enum dt_es_metric m, const struct dt_epoch_scores *e)
{
    switch (m) {
    case DT_ES_VAL_ACCURACY:
        return e->val_accuracy;
    case DT_ES_VAL_LOSS:
        return e->val_loss;
    case DT_ES_TRAIN_LOSS:
        return e->train_loss;
    case DT_ES_TRAIN_ACCURACY:
        return e->train_accuracy;
    default:
        return NAN;
    }
}

bool dt_early_stop_update(struct dt_early_stop *s, const struct dt_epoch_scores *e, int epoch)
{
    if (!dt_early_stop_enabled(s))
        return false;
    double v = score_of(s->metric, e);
    bool higher = metrics[s->metric].higher_better;
    /* a NaN loss never improves: a diverged run stops after `patience` epochs */
    bool better = isfinite(v) &&
                  (!s->any || (higher ? v > s->best + s->min_delta : v < s->best - s->min_delta));
    if (better) {
        s->any = true;
        s->best = v;
        s->best_epoch = epoch;
        s->bad_epochs = 0;
    } else {
        s->bad_epochs++;
    }
    return dt_early_stop_due(s);
}

bool dt_early_stop_due(const struct dt_early_stop *s)
{
    return dt_early_stop_enabled(s) && s->bad_epochs >= s->patience;
}

void dt_early_stop_describe(const struct dt_early_stop *s, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s did not improve by more than %g for %d epoch%s",
                     dt_es_metric_name(s->metric), s->min_delta, s->bad_epochs,
                     s->bad_epochs == 1 ? "" : "s");
    if (s->any && n >= 0 && (size_t)n < size)
        snprintf(buf + n, size - (size_t)n, " (best %.6g at epoch %d)", s->best, s->best_epoch);
}

int dt_early_stop_save(const struct dt_early_stop *s, struct dt_checkpoint_meta *meta)
{
    if (!dt_early_stop_enabled(s))
        return 0;
    return dt_checkpoint_meta_setf(meta, "early_stop", "%s %.17g %d %d",
                                   dt_es_metric_name(s->metric), s->any ? s->best : NAN,
                                   s->best_epoch, s->bad_epochs);
}

void dt_early_stop_load(struct dt_early_stop *s, const struct dt_checkpoint_meta *meta)
{
    const char *v = dt_checkpoint_meta_get(meta, "early_stop");
    char name[32];
    double best;
    int best_epoch, bad;
    if (!dt_early_stop_enabled(s) || !v ||
        sscanf(v, "%31s %lf %d %d", name, &best, &best_epoch, &bad) != 4 ||
        metric_by_name(name) != (int)s->metric || bad < 0 || best_epoch < 0)
        return; /* another metric, none, or not ours to trust: count afresh */
    s->any = isfinite(best);
    s->best = s->any ? best : 0;
    s->best_epoch = best_epoch;
    s->bad_epochs = bad;
}

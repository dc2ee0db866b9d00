/* Early stopping: train.early_stop = { metric = "val_accuracy"; patience = N; min_delta = D; }
 * ends training when the metric has not improved by more than min_delta for `patience`
 * epochs in a row (Keras's EarlyStopping, PyTorch Lightning's): an epoch improves when its
 * value beats the best so far by more than min_delta, higher for accuracies, lower for losses.
 *
 * The metrics are the validation set's accuracy and loss and the training set's loss and
 * accuracy. Test-set metrics are refused on purpose: stopping where the test set scores best
 * makes the test figures an optimistic estimate (the same reason train/best.h never picks by
 * test accuracy); hold out data.val_fraction and stop on val_accuracy instead.
 *
 * Every rank scores the same reduced figures; rank 0's decision is broadcast, so all ranks stop
 * after the same epoch. The state (best value, its epoch, epochs without improvement) is stored
 * in every checkpoint's metadata, so a resumed run keeps counting where it stopped.
 */
#ifndef DT_TRAIN_EARLY_STOP_H
#define DT_TRAIN_EARLY_STOP_H

#include <stdbool.h>
#include <stddef.h>

enum dt_es_metric {
    DT_ES_NONE, /* early stopping off */
    DT_ES_VAL_ACCURACY,
    DT_ES_VAL_LOSS,
    DT_ES_TRAIN_LOSS,
    DT_ES_TRAIN_ACCURACY,
    DT_ES_METRICS
};

/* The config's train.early_stop group: metric_name as written, metric once resolved at load. */
struct dt_early_stop_config {
    char metric_name[32];
    enum dt_es_metric metric;
    int patience;     /* epochs without improvement before stopping, >= 1 */
    double min_delta; /* the smallest change that counts as an improvement, >= 0 */
};

/* At config load: metric_name -> metric. NULL when fine, else the key at fault
 * ("train.early_stop.metric") with the problem in msg. has_val: the config holds out a
 * validation split (or may, as a folder's val/ does: the run checks again once loaded). */
const char *dt_early_stop_resolve(struct dt_early_stop_config *c, bool has_val, char *msg,
                                  size_t size);
const char *dt_es_metric_name(enum dt_es_metric m);
bool dt_es_metric_needs_val(enum dt_es_metric m);

/* An epoch's figures, the whole job's. */
struct dt_epoch_scores {
    double val_accuracy, val_loss, train_loss, train_accuracy;
};

struct dt_early_stop {
    enum dt_es_metric metric;
    int patience;
    double min_delta;
    bool any;       /* an epoch has been scored */
    double best;    /* the metric's best value so far */
    int best_epoch; /* its epoch, counted from 1 */
    int bad_epochs; /* epochs in a row since then without improvement */
};

void dt_early_stop_init(struct dt_early_stop *s, const struct dt_early_stop_config *c);
bool dt_early_stop_enabled(const struct dt_early_stop *s);
/* Scores epoch (from 1); true when training stops after it. */
bool dt_early_stop_update(struct dt_early_stop *s, const struct dt_epoch_scores *e, int epoch);
/* The counter has reached the patience (a resumed run that had stopped). */
bool dt_early_stop_due(const struct dt_early_stop *s);
/* "val_accuracy did not improve by more than 0.001 for 3 epochs (best 0.8125 at epoch 4)" */
void dt_early_stop_describe(const struct dt_early_stop *s, char *buf, size_t size);

/* Checkpoint metadata: the state as "early_stop" = "METRIC BEST BEST_EPOCH BAD_EPOCHS". */
struct dt_checkpoint_meta;
int dt_early_stop_save(const struct dt_early_stop *s, struct dt_checkpoint_meta *meta);
/* Restores the state when the checkpoint's metric is this run's; another metric (or none)
 * starts counting afresh. */
void dt_early_stop_load(struct dt_early_stop *s, const struct dt_checkpoint_meta *meta);

#endif

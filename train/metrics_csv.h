/* metrics.csv of a run directory: one row per logged step, per epoch, and per resume.
 *
 *   kind,step,epoch,lr,train_loss,train_accuracy,val_loss,val_accuracy,test_loss,
 *   test_accuracy,samples_per_s,seconds,train_steps,resumed_at,best
 *
 * kind is step, epoch or resume; a cell not measured for that row is empty. step is the
 * global optimizer step after the row's work; epoch counts from 1. Step rows: the epoch's
 * running train loss/accuracy and the training seconds since this invocation's first step.
 * Epoch rows: the epoch's figures, its training seconds, train_steps (the steps its train
 * loss/accuracy cover: the whole epoch's, also when the run resumed inside it, because a
 * checkpoint carries the epoch's running sums), resumed_at (the step the run resumed at when
 * that was inside this epoch: seconds and samples_per_s cover the steps from there), best (1
 * when the epoch became the new best.safetensors epoch). A resume row marks where a resumed
 * or restarted run continued: rows after it supersede earlier rows past its step (a crash
 * after the last checkpoint leaves such rows), and readers keep the later ones.
 *
 * Readers look columns up by name in the header, so columns can be added at the end. */
#ifndef DT_TRAIN_METRICS_CSV_H
#define DT_TRAIN_METRICS_CSV_H

#include <stdbool.h>
#include <stddef.h>

enum dt_metric {
    DT_M_STEP,
    DT_M_EPOCH,
    DT_M_LR,
    DT_M_TRAIN_LOSS,
    DT_M_TRAIN_ACC,
    DT_M_VAL_LOSS,
    DT_M_VAL_ACC,
    DT_M_TEST_LOSS,
    DT_M_TEST_ACC,
    DT_M_SAMPLES_PER_S,
    DT_M_SECONDS,
    DT_M_TRAIN_STEPS,
    DT_M_RESUMED_AT,
    DT_M_BEST,
    DT_M_COUNT
};

enum dt_metrics_kind { DT_ROW_STEP, DT_ROW_EPOCH, DT_ROW_RESUME };

/* The column names after "kind", in enum order. */
const char *dt_metric_name(enum dt_metric m);

struct dt_metrics_row {
    enum dt_metrics_kind kind;
    double v[DT_M_COUNT];
    bool has[DT_M_COUNT];
};

/* The header line, '\n' included. */
const char *dt_metrics_csv_header(void);
/* One row as a line ('\n' included) into buf; the length, or 0 when it does not fit. */
size_t dt_metrics_csv_format(const struct dt_metrics_row *r, char *buf, size_t size);

struct dt_metrics {
    struct dt_metrics_row *rows;
    size_t n;
    bool torn; /* the last line had no newline (a write a crash cut): left out */
};

/* Reads path; resume rows applied (later rows replace earlier ones past a resume's step; the
 * resume rows themselves are kept). DT_EDATA naming the file and line for a missing or
 * unknown header, an unknown kind, or a cell that is not a number. */
int dt_metrics_csv_read(const char *path, struct dt_metrics *m);
void dt_metrics_free(struct dt_metrics *m);

#endif

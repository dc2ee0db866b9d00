/* `dtrain report`: a run directory's metrics.csv drawn as curves, like Darknet's chart.png.
 *
 * For each run: loss, accuracy and learning rate against the step (train from the step rows,
 * val and test from the epoch rows), and loss and accuracy against the epoch; the best epoch
 * (the last epoch row with best = 1: what best.safetensors holds) marked with a dashed line
 * and a dot on the score the best rule uses. Each chart is written as NAME.svg and NAME.png
 * (loss, accuracy, lr, loss_epoch, accuracy_epoch), into the run directory or out_dir; several
 * runs go on one set of charts named compare_NAME. Series are named train_loss, val_loss, ...
 * (RUN:train_loss when comparing, RUN the directory's name), and the SVG polylines carry
 * their data (util/draw.h).
 *
 * The run's TensorBoard files are read too, CRCs checked: a last record cut short by a crash
 * is tolerated (a warning), as is metrics.csv's torn last line; anything else damaged, a
 * directory that is missing or holds no metrics, is DT_EDATA naming the file. */
#ifndef DT_TRAIN_REPORT_H
#define DT_TRAIN_REPORT_H

#define DT_REPORT_MAX_RUNS  8
#define DT_REPORT_MAX_FILES 16

struct dt_report_opts {
    const char *const *dirs;
    int ndirs;           /* 1 to DT_REPORT_MAX_RUNS */
    const char *out_dir; /* NULL: dirs[0] */
};

struct dt_report_best {
    char run[1024];
    long long epoch, step; /* epoch 0: no epoch has been marked best */
    const char *metric;    /* "val_accuracy" or "train_loss" */
    double score;
};

struct dt_report_result {
    char files[DT_REPORT_MAX_FILES][1200];
    int nfiles;
    struct dt_report_best best[DT_REPORT_MAX_RUNS];
    int nruns;
};

int dt_report(const struct dt_report_opts *o, struct dt_report_result *res);

#endif

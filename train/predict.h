/* The prediction engine behind `dtrain predict`: a trained model on images. Each PNG or JPEG
 * (directories are walked) is decoded as the checkpoint's data config says (channels, size,
 * mean/std: the same path training batches take), and the top K classes are printed with
 * their probabilities, or one JSON object per image. With a split, each input is a dataset
 * directory of the checkpoint's format (IDX, CIFAR, image folder) and that split is
 * predicted, each sample named by its file below the directory (image folders) or
 * "DIR:SPLIT#i" (archives), its true label reported too.
 *
 * A file that cannot be read is reported in its place (stderr, and a JSON record) and the
 * others are predicted. Files: predict.c (the model, batches, the run), predict_files.c (the
 * inputs walked and listed), predict_report.c (the lines and JSON objects). */
#ifndef DT_TRAIN_PREDICT_H
#define DT_TRAIN_PREDICT_H

#include <stdbool.h>

#include "data/dataset.h"

#define DT_PREDICT_MAX_TOP 64

struct dt_predict_options {
    const char *checkpoint;
    const char *config;      /* the model's config file; NULL: the checkpoint's */
    const char *const *sets; /* KEY=VALUE overrides, applied in order */
    int nsets;
    const char *const *inputs; /* files and directories, or dataset directories */
    int ninputs;
    bool use_split; /* inputs are dataset directories; predict `split` */
    enum dt_split split;
    int top;     /* classes per sample, 1..DT_PREDICT_MAX_TOP */
    int threads; /* 0: the config's, else all usable cores */
    bool strict; /* a bad file fails the run (exit 3) */
    bool json;   /* one JSON object per sample on stdout */
};

/* Runs the prediction; 0, or a negative code with the message in dt_last_error(). Errors: no
 * input could be read, or with strict any could not (DT_EDATA); an unreadable checkpoint or
 * dataset (DT_EDATA); a bad config (DT_EUSAGE). */
int dt_predict(const struct dt_predict_options *o);

#endif

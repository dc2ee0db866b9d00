/* predict's FILE|DIR arguments as a list of image files (internal to train/predict*.c):
 * files as given, directories walked (symlinks not followed, hidden entries skipped), each
 * directory's images sorted by path; what a walk passed over is counted for one summary line. */
#ifndef DT_TRAIN_PREDICT_FILES_H
#define DT_TRAIN_PREDICT_FILES_H

#include <stdbool.h>
#include <stddef.h>

struct dt_predict_files {
    char **paths;
    size_t n, cap;
    size_t skipped;   /* files in walked directories with an extension dtrain does not read */
    char exts[8][16]; /* the first few such extensions, for the summary line */
    int nexts;
    bool exts_more; /* more kinds than exts holds */
    /* inputs that gave nothing to predict (missing, no image in it): the input, the error */
    char **bad_input, **bad_error;
    size_t nbad, badcap;
};

/* Lists the inputs into l (zeroed first). An input that yields nothing is recorded in
 * l->bad_*, not fatal; only running out of memory fails (-DT_ERUNTIME). */
int dt_predict_files_collect(const char *const *inputs, int n, struct dt_predict_files *l);
/* "skipped 3 files with unsupported extensions (.gif, .txt); ..." as a warning, if any. */
void dt_predict_files_report_skipped(struct dt_predict_files *l);
void dt_predict_files_free(struct dt_predict_files *l);

#endif

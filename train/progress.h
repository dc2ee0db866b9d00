/* Training progress for people: a live line on a terminal, plain periodic lines otherwise,
 * nothing with --quiet. Machine-readable events (--json) are separate (util/json.h on stdout);
 * this only ever writes to stderr. */
#ifndef DT_TRAIN_PROGRESS_H
#define DT_TRAIN_PROGRESS_H

#include <stdbool.h>

struct dt_progress {
    bool live; /* stderr is a terminal: redraw one line in place */
    bool quiet;
    int log_every; /* plain mode: a line every N steps (0 = only at epoch end) */
    int epochs;
    long steps_per_epoch;
    double epoch_start, last_draw;
    int line_len; /* width of the live line last drawn, to blank it */
};

void dt_progress_init(struct dt_progress *p, bool quiet, int log_every, int epochs,
                      long steps_per_epoch);
void dt_progress_epoch_start(struct dt_progress *p);
/* After each step: running mean loss and samples/s so far in this epoch. */
void dt_progress_step(struct dt_progress *p, int epoch, long step, double loss, double acc,
                      double samples_per_s);
/* Clears the live line (before any other output). */
void dt_progress_clear(struct dt_progress *p);

#endif

/* --max-restarts' policy (train/loop.c runs it): how long to wait before restart N, and when
 * a failure is the same as the one before it, so a deterministic failure (a full disk, a bad
 * file) does not burn every restart in a second. */
#ifndef DT_TRAIN_RESTART_H
#define DT_TRAIN_RESTART_H

#include <stdbool.h>

/* Seconds before restart n (1-based): 1, 2, 4, ... doubling up to DT_RESTART_MAX_DELAY. */
#define DT_RESTART_MAX_DELAY 30.0
double dt_restart_delay(int n);

/* Two failure messages say the same thing: equal once every "pid N" is read as "pid" (the
 * launcher names a failed rank's pid, new at every start). */
bool dt_restart_same_failure(const char *a, const char *b);

#endif

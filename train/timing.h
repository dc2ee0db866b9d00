/* Where a rank's time goes: seconds of data, forward, backward, all-reduce wait, optimizer,
 * checkpoint and evaluation, added up per epoch and per run from a few monotonic clock reads
 * per step (no per-element work), then gathered so rank 0 can report its own figures and
 * those of the slowest rank.
 *
 * The gather is one all-reduce of ranks x kinds floats where each rank fills its own row:
 * every rank calls it at the same point (the end of an epoch, the end of the run), as with
 * any collective. Times are seconds since the previous report: an epoch's checkpoint figure
 * holds the saves made since the previous epoch event (the save that follows an epoch's
 * report is counted in the next one, and in the run's totals).
 */
#ifndef DT_TRAIN_TIMING_H
#define DT_TRAIN_TIMING_H

#include <stdbool.h>
#include <stddef.h>

#include "dist/comm.h"

enum dt_time_kind {
    DT_TIME_DATA,       /* sampler and batch assembly */
    DT_TIME_FORWARD,    /* forward and the loss */
    DT_TIME_BACKWARD,   /* backward */
    DT_TIME_ALLREDUCE,  /* the gradient all-reduce and the shared-weights barrier: waiting for
                           the slowest rank shows here */
    DT_TIME_OPTIMIZER,  /* gradient clipping and the optimizer step */
    DT_TIME_CHECKPOINT, /* encoding checkpoints and handing them to the writer thread */
    DT_TIME_EVAL,       /* validation and test evaluation */
    DT_TIME_KINDS
};

/* "data", "forward", "backward", "allreduce_wait", "optimizer", "checkpoint", "eval": the JSON
 * keys (with "_s" added) and the trace's event names. */
const char *dt_time_kind_name(enum dt_time_kind k);
/* The trace's event name ("allreduce" for the wait) and category ("compute", "collective",
 * "data", "optimizer", "checkpoint", "eval"). */
const char *dt_time_kind_trace_name(enum dt_time_kind k);
const char *dt_time_kind_category(enum dt_time_kind k);

struct dt_timing {
    double epoch[DT_TIME_KINDS]; /* since the last epoch report */
    double run[DT_TIME_KINDS];   /* since the rank started training */
};

static inline void dt_timing_add(struct dt_timing *t, enum dt_time_kind k, double seconds)
{
    t->epoch[k] += seconds;
    t->run[k] += seconds;
}

/* What rank 0 reports: its own seconds and those of the rank with the most seconds in all. */
struct dt_timing_report {
    double rank0[DT_TIME_KINDS];
    int slowest; /* its rank */
    double slowest_s[DT_TIME_KINDS];
};

/* Collective: every rank passes its figures (the epoch's when run is false, else the run's);
 * every rank gets the report. The epoch figures are reset afterwards. */
int dt_timing_gather(struct dt_timing *t, struct dt_comm *comm, bool run,
                     struct dt_timing_report *out);

/* `"time_rank0": {...}, "time_slowest": {"rank": R, ...}` members for a JSON event, as one
 * object text (malloc'd) per key: the caller adds them with dt_jw_raw. */
char *dt_timing_json(const double *seconds, int rank);

/* " | data 0.12 fwd 1.30 bwd 2.41 wait 0.20 opt 0.05 ckpt 0.00 s" and, with several ranks,
 * " (slowest rank 1: 4.21 s)": the epoch line's compact part. */
void dt_timing_format(const struct dt_timing_report *r, int ranks, char *buf, size_t size);

/* The run's totals at the end of --profile's table, rank 0 and the slowest rank. */
void dt_timing_print_profile(const struct dt_timing_report *r, int ranks, long long steps);

#endif

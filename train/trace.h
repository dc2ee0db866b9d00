/* --trace FILE: a Chrome trace (the Trace Event Format's JSON object form, which Perfetto and
 * chrome://tracing load) of a training run, like Horovod's timeline.
 *
 * One track (pid) per rank, one thread track (tid) per thread of it: DT_TRACE_MAIN for the
 * rank's loop (steps, data, forward and backward per layer, the all-reduce, the optimizer,
 * evaluation, checkpoint encoding) and DT_TRACE_WRITER for the checkpoint writer thread (the
 * file writes). Every span is a complete ("X") event; process_name / thread_name metadata
 * name the tracks.
 *
 * Each rank buffers its events and appends them, one JSON object per line, to its own part
 * file FILE.rank<R>.part: when the buffer fills, after every epoch and when the rank ends (on
 * an error path too). The process that started the ranks merges the parts of its ranks into
 * FILE once they are done, whether the run succeeded or not, keeping every whole line (a rank
 * killed mid-write leaves at most one torn line, which is dropped). Timestamps are microseconds
 * of the monotonic clock since the parent's start, one clock for every rank of a host.
 */
#ifndef DT_TRAIN_TRACE_H
#define DT_TRAIN_TRACE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

enum { DT_TRACE_MAIN = 0, DT_TRACE_WRITER = 1 };

#define DT_TRACE_BUFFER 4096 /* events held before a rank appends them to its part */

struct dt_trace_event {
    const char *name, *cat; /* static strings, or the trace's own layer names */
    double t0, t1;          /* dt_now() seconds */
    long long step;         /* args.step, or -1 */
    int tid;
};

struct dt_trace {
    int rank;
    double base;        /* dt_now() of time 0 */
    FILE *part;         /* NULL: tracing is off (every call is then a no-op) */
    pthread_mutex_t mu; /* the writer thread records too */
    int n;
    int failed;         /* a write to the part failed: reported once at the end */
    char **layer_names; /* "fwd 3 conv2d", "bwd 3 conv2d": 2 x nlayers */
    int nlayers;
    struct dt_trace_event buf[DT_TRACE_BUFFER];
};

/* The part file of `rank` for FILE (caller's buffer). */
void dt_trace_part_path(const char *file, int rank, char *out, size_t size);

/* Parent, before the ranks start: removes stale parts of ranks [first, first + n). */
void dt_trace_prepare(const char *file, int first, int n);

/* A rank: opens its part (appending: a restarted job's rank continues it) and writes the
 * track names. DT_ERUNTIME naming the file when it cannot be opened. */
int dt_trace_open(struct dt_trace *t, const char *file, int rank, double base);
/* Names the model's layers for dt_trace_layer ("forward 3 conv2d") and hooks the trace into
 * the model's forward and backward. */
struct dt_model;
int dt_trace_attach_model(struct dt_trace *t, struct dt_model *m);

void dt_trace_span(struct dt_trace *t, int tid, const char *cat, const char *name, double t0,
                   double t1, long long step);
/* nn/model's per-layer hook (struct dt_model_layer_hook). */
void dt_trace_layer(void *trace, int layer, bool backward, double t0, double t1);

/* Appends the buffered events to the part now. */
void dt_trace_flush(struct dt_trace *t);
/* Flushes and closes; 0 or DT_ERUNTIME when a write failed. */
int dt_trace_close(struct dt_trace *t);

/* Parent, after the ranks: `out` (FILE, or another name for a host without rank 0) from
 * FILE's parts of ranks [first, first + n), written atomically; the parts are removed.
 * Returns the number of events, or a negative status. */
long dt_trace_merge(const char *file, const char *out, int first, int n);

#endif

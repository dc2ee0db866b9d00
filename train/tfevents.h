/* TensorBoard event files, written and read with no protobuf library.
 *
 * A file events.out.tfevents.<unix time>.<host> is a TFRecord stream: each record is
 *   uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes |
 *   length bytes of data         | uint32 masked CRC-32C of the data
 * and each record's data is one tensorflow.Event protobuf message, encoded here field by field
 * from the wire format (event.proto, summary.proto):
 *   Event      { double wall_time = 1; int64 step = 2; string file_version = 3;
 *                Summary summary = 5; SessionLog session_log = 6; }
 *   Summary    { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
 *   SessionLog { SessionStatus status = 1; }   (START = 1)
 * The first record is the file_version "brain.Event:2" event TensorBoard expects. A resumed
 * run writes a SessionLog START at the step it resumed from: TensorBoard then drops the
 * points of the earlier attempt past that step (its "purge orphaned data"), as `dtrain report`
 * does with metrics.csv.
 *
 * Every record is one write() on an O_APPEND descriptor, so a crash loses at most the record
 * being written, and the reader tolerates exactly that: a torn last record. */
#ifndef DT_TRAIN_TFEVENTS_H
#define DT_TRAIN_TFEVENTS_H

#include <stdbool.h>
#include <stddef.h>

struct dt_tf_scalar {
    const char *tag;
    size_t tag_len; /* the reader's tags point into the file, unterminated */
    float value;
};

#define DT_TF_MAX_SCALARS 16

/* ---- writer ---- */

struct dt_tfevents {
    int fd; /* -1 when closed */
    char path[1400];
};

/* Opens DIR/events.out.tfevents.<wall time>.<host> for appending and writes the file_version
 * record. DT_ERUNTIME naming the file on failure. */
int dt_tfevents_open(struct dt_tfevents *t, const char *dir, double wall_time);
/* One Event holding n scalars (at most DT_TF_MAX_SCALARS) at step. */
int dt_tfevents_scalars(struct dt_tfevents *t, double wall_time, long long step,
                        const struct dt_tf_scalar *s, int n);
/* A SessionLog START at step: a resumed (or restarted) run continues from there. */
int dt_tfevents_session_start(struct dt_tfevents *t, double wall_time, long long step);
void dt_tfevents_close(struct dt_tfevents *t);

/* The record (framing included) of an Event with n scalars, malloc'd into *rec; for tests and
 * the writer. */
int dt_tfevents_encode_scalars(double wall_time, long long step, const struct dt_tf_scalar *s,
                               int n, unsigned char **rec, size_t *len);

/* ---- reader ---- */

struct dt_tf_event {
    double wall_time;
    long long step;
    bool file_version; /* carries "brain.Event:2" */
    bool session_start;
    int nscalars;
    struct dt_tf_scalar scalars[DT_TF_MAX_SCALARS];
};

/* Reads every record of path, CRCs checked, calling on_event for each Event (a non-zero return
 * stops and is returned). A last record cut short (a crash mid-write) is skipped and *torn set;
 * a bad CRC, a malformed message, or a short record anywhere else is DT_EDATA naming the file
 * and the record's offset. */
int dt_tfevents_read(const char *path, int (*on_event)(void *ctx, const struct dt_tf_event *e),
                     void *ctx, bool *torn);

#endif

/* The run's history in its directory, and the one place a training run's events go out.
 *
 * Every event of `train` (probe, start, step, epoch, resume, restart, stop, final) is built
 * with the util/json.h writer and handed to dt_history_emit (the probe's, made before the run,
 * to dt_history_emit_text), which writes it to stdout when --json asked for that, and, in the
 * process that writes the run directory (global rank 0's), always:
 *   events.jsonl          the event line, whatever stdout gets
 *   metrics.csv           a row for each step, epoch and resume event (train/metrics_csv.h)
 *   events.out.tfevents.* the same scalars for TensorBoard (train/tfevents.h)
 * Besides those, dt_history_open writes config.cfg (the effective config, what --print-config
 * prints) and appends the command line to cmdline.txt.
 *
 * A fresh run starts a fresh history (the files of an earlier run in the directory are
 * replaced, as its checkpoints are); a run that resumes a checkpoint appends, and its resume
 * event marks the step it continues from. Files are opened O_APPEND and each record is one
 * write(), so forked ranks share the descriptors and a crash loses at most the record being
 * written. Writing to the history never stops training: a failed write is reported once on
 * stderr and that file is no longer written. */
#ifndef DT_TRAIN_HISTORY_H
#define DT_TRAIN_HISTORY_H

#include <stdbool.h>

#include "train/config.h"
#include "train/tfevents.h"
#include "util/json.h"

struct dt_history {
    bool json_stdout; /* --json: events to stdout too */
    int events_fd;    /* events.jsonl, -1 when not recording */
    int csv_fd;       /* metrics.csv */
    struct dt_tfevents tf;
    bool created[3]; /* this run created events.jsonl, metrics.csv, the tfevents file */
    char dir[1024];
};

/* Events to stdout only (when json_stdout); nothing recorded until dt_history_open. */
void dt_history_init(struct dt_history *h, bool json_stdout);

/* Starts recording into dir, the run directory (dt_run_dir_choose's choice, which exists by
 * now): config.cfg (cfg's text), cmdline.txt (argv as a shell line, program name first), and
 * the event files, truncated unless `resume`. DT_ERUNTIME naming the file when one cannot be
 * written. */
int dt_history_open(struct dt_history *h, const char *dir, const struct dt_config *cfg, int argc,
                    char *const *argv, bool resume);

/* Closes the event (dt_jw_end's job) and sends it where it goes (see above). */
void dt_history_emit(struct dt_history *h, struct dt_json_writer *w);

/* The same for an event made elsewhere as one JSON object ({"event":NAME,...}, no newline):
 * the `probe` event of --instances/--threads auto (cmd/auto_shape.c). */
void dt_history_emit_text(struct dt_history *h, const char *obj);

/* The end of the run: a failure (rc < 0, not a stop by signal) is recorded as an "error" event
 * in events.jsonl (main.c prints it on stdout with --json). Then the files are closed. */
void dt_history_close(struct dt_history *h, int rc);

/* A run that made its directory and failed before writing a checkpoint leaves nothing behind:
 * removes the files this history created (call after dt_history_close). */
void dt_history_discard(struct dt_history *h);

#endif

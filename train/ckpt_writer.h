/* Checkpoint files written by a background thread, so a mid-training checkpoint stalls the
 * step loop only for the copy of the tensors (dt_checkpoint_encode), not for the write, fsync
 * and rename, whose cost is the filesystem's (on the dev VM's disk a 3.6 MB ConvNet checkpoint
 * every step cost 6.5-9.6 ms of step time written in line, and nothing measurable this way).
 *
 * Jobs are written in the order submitted, each atomically (util/fileio.h: a crash or a
 * kill -9 leaves the old file or the new one); a job for a path that is still queued (not
 * started) replaces the queued bytes, so at most one write per file waits. A failed write is
 * reported by the next dt_ckpt_writer_submit or dt_ckpt_writer_wait, which return its error (the
 * path and why); dt_ckpt_writer_wait returns once everything submitted is on disk. The thread
 * starts at the first submit; dt_ckpt_writer_close waits for it and ends it. */
#ifndef DT_TRAIN_CKPT_WRITER_H
#define DT_TRAIN_CKPT_WRITER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

struct dt_ckpt_job;

struct dt_trace;

struct dt_ckpt_writer {
    pthread_mutex_t mu;
    pthread_cond_t wake, idle;
    pthread_t thread;
    bool started, quit, busy;
    struct dt_ckpt_job *head, *tail;
    int err_code;           /* first failed write since the last report, 0 if none */
    char err[1024];         /* its message */
    struct dt_trace *trace; /* --trace: each file write as a span of the writer's track */
};

void dt_ckpt_writer_init(struct dt_ckpt_writer *w);
/* Queues bytes (malloc'd; the writer frees them) for path. Returns an earlier write's error, if
 * one failed, having queued nothing. */
int dt_ckpt_writer_submit(struct dt_ckpt_writer *w, const char *path, unsigned char *bytes,
                          size_t len);
int dt_ckpt_writer_wait(struct dt_ckpt_writer *w);
/* Waits, stops the thread; returns what dt_ckpt_writer_wait would. */
int dt_ckpt_writer_close(struct dt_ckpt_writer *w);

#endif

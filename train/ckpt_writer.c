/* Background checkpoint writer (see train/ckpt_writer.h). */
#include "train/ckpt_writer.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train/rundir.h"
#include "train/trace.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/fileio.h"

struct dt_ckpt_job {
    struct dt_ckpt_job *next;
    unsigned char *bytes;
    size_t len;
    char path[];
};

void dt_ckpt_writer_init(struct dt_ckpt_writer *w)
{
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->wake, NULL);
    pthread_cond_init(&w->idle, NULL);
}

/* The thread is created by a rank pinned to its own cores: left there, its writes take turns
 * with the training threads. Any CPU of the machine will do for it (the kernel keeps it inside
 * a Slurm or container cpuset); it mostly waits on the disk. */
static void unpin_self(void)
{
    long n = sysconf(_SC_NPROCESSORS_CONF);
    cpu_set_t all;
    CPU_ZERO(&all);
    for (long c = 0; c < n && c < CPU_SETSIZE; c++)
        CPU_SET((int)c, &all);
    (void)pthread_setaffinity_np(pthread_self(), sizeof all, &all); /* best effort */
}

static void *writer_main(void *arg)
{
    struct dt_ckpt_writer *w = arg;
    unpin_self();
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->head && !w->quit)
            pthread_cond_wait(&w->wake, &w->mu);
        struct dt_ckpt_job *job = w->head;
        if (!job)
            break; /* quit with nothing left */
        w->head = job->next;
        if (!w->head)
            w->tail = NULL;
        w->busy = true;
        pthread_mutex_unlock(&w->mu);
        /* the error text is per thread (util/err.c): copied out under the lock below */
        /* under a temp name that says whose it is: train/rundir.h's sweep removes it if
         * this process dies mid-write, and nothing it did not write */
        char tmp[4200];
        double t0 = dt_now();
        int rc = dt_run_dir_temp_path(job->path, tmp, sizeof tmp);
        if (rc == 0)
            rc = dt_write_file_atomic_as(job->path, tmp, job->bytes, job->len);
        dt_trace_span(w->trace, DT_TRACE_WRITER, "checkpoint", "checkpoint write", t0, dt_now(),
                      -1);
        pthread_mutex_lock(&w->mu);
        if (rc && !w->err_code) {
            w->err_code = dt_exit_code(rc);
            snprintf(w->err, sizeof w->err, "%s", dt_last_error());
        }
        w->busy = false;
        free(job->bytes);
        free(job);
        if (!w->head)
            pthread_cond_broadcast(&w->idle);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* With w->mu held: the pending error as this thread's, cleared. */
static int take_error(struct dt_ckpt_writer *w)
{
    if (!w->err_code)
        return 0;
    int rc = dt_fail(w->err_code, "%s", w->err);
    w->err_code = 0;
    return rc;
}

int dt_ckpt_writer_submit(struct dt_ckpt_writer *w, const char *path, unsigned char *bytes,
                          size_t len)
{
    size_t n = strlen(path) + 1;
    struct dt_ckpt_job *job = malloc(sizeof *job + n);
    if (!job) {
        free(bytes);
        return dt_fail(DT_ERUNTIME, "%s: out of memory queueing the checkpoint", path);
    }
    *job = (struct dt_ckpt_job){.bytes = bytes, .len = len};
    memcpy(job->path, path, n);
    pthread_mutex_lock(&w->mu);
    int rc = take_error(w);
    if (!rc && !w->started) {
        if (pthread_create(&w->thread, NULL, writer_main, w) == 0)
            w->started = true;
        else
            rc = dt_fail(DT_ERUNTIME, "%s: cannot start the checkpoint writer thread", path);
    }
    if (rc) {
        pthread_mutex_unlock(&w->mu);
        free(job->bytes);
        free(job);
        return rc;
    }
    /* A queued, not yet started write of the same file is superseded: it takes the new bytes
     * in its place, so a writer slower than the steps holds one file per path, not a backlog. */
    for (struct dt_ckpt_job *q = w->head; q; q = q->next)
        if (!strcmp(q->path, job->path)) {
            free(q->bytes);
            q->bytes = job->bytes;
            q->len = job->len;
            pthread_mutex_unlock(&w->mu);
            free(job);
            return 0;
        }
    if (w->tail)
        w->tail->next = job;
    else
        w->head = job;
    w->tail = job;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

int dt_ckpt_writer_wait(struct dt_ckpt_writer *w)
{
    pthread_mutex_lock(&w->mu);
    while (w->head || w->busy)
        pthread_cond_wait(&w->idle, &w->mu);
    int rc = take_error(w);
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int dt_ckpt_writer_close(struct dt_ckpt_writer *w)
{
    int rc = w->started ? dt_ckpt_writer_wait(w) : 0;
    pthread_mutex_lock(&w->mu);
    w->quit = true;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->mu);
    if (w->started)
        pthread_join(w->thread, NULL);
    w->started = false;
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->wake);
    pthread_cond_destroy(&w->idle);
    return rc;
}

/* The run history (see history.h): one emit for every event, teed into the run directory. */
#include "train/history.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "train/metrics_csv.h"
#include "util/err.h"
#include "util/fileio.h"
#include "util/log.h"
#include "util/shell.h"

enum { F_EVENTS, F_CSV, F_TF };

/* Which event field fills which metrics.csv column, in step and in epoch events, and the
 * TensorBoard tag of the column (NULL: not a TensorBoard scalar). */
static const struct column {
    enum dt_metric metric;
    const char *step_key, *epoch_key, *tb_tag;
} columns[] = {
    {DT_M_STEP, "step", "step", NULL},
    {DT_M_EPOCH, "epoch", "epoch", NULL},
    {DT_M_LR, "lr", "lr", "lr"},
    {DT_M_TRAIN_LOSS, "loss", "train_loss", "train/loss"},
    {DT_M_TRAIN_ACC, "accuracy", "train_accuracy", "train/accuracy"},
    {DT_M_VAL_LOSS, NULL, "val_loss", "val/loss"},
    {DT_M_VAL_ACC, NULL, "val_accuracy", "val/accuracy"},
    {DT_M_TEST_LOSS, NULL, "test_loss", "test/loss"},
    {DT_M_TEST_ACC, NULL, "test_accuracy", "test/accuracy"},
    {DT_M_SAMPLES_PER_S, "samples_per_s", "samples_per_s", "samples_per_sec"},
    {DT_M_SECONDS, "elapsed_s", "seconds", NULL},
    {DT_M_TRAIN_STEPS, NULL, "train_steps", NULL},
    {DT_M_RESUMED_AT, NULL, "resumed_at", NULL},
    {DT_M_BEST, NULL, "best", NULL},
};
_Static_assert(sizeof columns / sizeof columns[0] == DT_M_COUNT, "a row for every metric");

static double wall_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void dt_history_init(struct dt_history *h, bool json_stdout)
{
    memset(h, 0, sizeof *h);
    h->json_stdout = json_stdout;
    h->events_fd = h->csv_fd = h->tf.fd = -1;
}

/* One record, one write: O_APPEND keeps records whole and in order across forked ranks. A file
 * that fails is said once and dropped: a full disk must not stop training. */
static void put(struct dt_history *h, int *fd, const char *name, const void *data, size_t len)
{
    if (*fd < 0)
        return;
    ssize_t n = write(*fd, data, len);
    if (n == (ssize_t)len)
        return;
    dt_log_warn("%s/%s: %s; no longer written", h->dir, name,
                n < 0 ? strerror(errno) : "short write");
    close(*fd);
    *fd = -1;
}

static int open_file(struct dt_history *h, const char *name, bool append, int *fd, bool *created)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", h->dir, name);
    *created = access(path, F_OK) != 0;
    *fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (append ? 0 : O_TRUNC), 0644);
    if (*fd < 0)
        return dt_fail(DT_ERUNTIME, "%s: cannot write: %s", path, strerror(errno));
    return 0;
}

static int append_cmdline(struct dt_history *h, int argc, char *const *argv)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem)
        return dt_fail(DT_ERUNTIME, "cmdline.txt: out of memory");
    dt_shell_word(mem, program_invocation_name);
    for (int i = 0; i < argc; i++) {
        fputc(' ', mem);
        dt_shell_word(mem, argv[i]);
    }
    fputc('\n', mem);
    fclose(mem);
    int fd;
    bool created;
    int rc = open_file(h, "cmdline.txt", true, &fd, &created);
    if (rc == 0) {
        put(h, &fd, "cmdline.txt", text, len);
        rc = fd < 0 ? dt_fail(DT_ERUNTIME, "%s/cmdline.txt: cannot write", h->dir) : 0;
        if (fd >= 0)
            close(fd);
    }
    free(text);
    return rc;
}

/* A fresh run's TensorBoard view must not show an earlier run of the directory: its event
 * files go, as its checkpoints are replaced. Only names of the event file form. */
static void remove_old_tfevents(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "events.out.tfevents.", 20))
            continue;
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
}

int dt_history_open(struct dt_history *h, const char *dir, const struct dt_config *cfg, int argc,
                    char *const *argv, bool resume)
{
    snprintf(h->dir, sizeof h->dir, "%s", dir);
    char path[1200];
    snprintf(path, sizeof path, "%s/config.cfg", h->dir);
    const char *text = cfg->text ? cfg->text : "";
    int rc = dt_write_file_atomic(path, text, strlen(text));
    if (rc == 0)
        rc = append_cmdline(h, argc, argv);
    if (rc == 0)
        rc = open_file(h, "events.jsonl", resume, &h->events_fd, &h->created[F_EVENTS]);
    if (rc == 0)
        rc = open_file(h, "metrics.csv", resume, &h->csv_fd, &h->created[F_CSV]);
    if (rc == 0 && lseek(h->csv_fd, 0, SEEK_END) == 0) {
        const char *header = dt_metrics_csv_header();
        put(h, &h->csv_fd, "metrics.csv", header, strlen(header));
    }
    if (rc == 0 && !resume)
        remove_old_tfevents(h->dir);
    if (rc == 0) {
        rc = dt_tfevents_open(&h->tf, h->dir, wall_clock());
        h->created[F_TF] = rc == 0;
    }
    if (rc) {
        dt_history_close(h, 0);
        return dt_fail_context(rc, "run history");
    }
    return 0;
}

/* The metrics of a step or epoch event, by the column table. */
static void fill_row(const struct dt_json *ev, bool epoch, struct dt_metrics_row *r)
{
    memset(r, 0, sizeof *r);
    r->kind = epoch ? DT_ROW_EPOCH : DT_ROW_STEP;
    for (int i = 0; i < DT_M_COUNT; i++) {
        const char *key = epoch ? columns[i].epoch_key : columns[i].step_key;
        const struct dt_json *v = key ? dt_json_get(ev, key) : NULL;
        if (v && v->type == DT_JSON_NUM)
            r->v[columns[i].metric] = v->num;
        else if (v && v->type == DT_JSON_BOOL)
            r->v[columns[i].metric] = v->b;
        else
            continue;
        r->has[columns[i].metric] = true;
    }
}

static void record_metrics(struct dt_history *h, const struct dt_metrics_row *r)
{
    char line[1024];
    size_t n = dt_metrics_csv_format(r, line, sizeof line);
    if (n)
        put(h, &h->csv_fd, "metrics.csv", line, n);
    if (h->tf.fd < 0)
        return;
    double wall = wall_clock();
    long long step = (long long)r->v[DT_M_STEP];
    int rc = 0;
    if (r->kind == DT_ROW_RESUME) {
        rc = dt_tfevents_session_start(&h->tf, wall, step);
    } else {
        struct dt_tf_scalar s[DT_M_COUNT];
        int ns = 0;
        for (int i = 0; i < DT_M_COUNT; i++)
            if (columns[i].tb_tag && r->has[columns[i].metric])
                s[ns++] =
                    (struct dt_tf_scalar){columns[i].tb_tag, 0, (float)r->v[columns[i].metric]};
        rc = ns ? dt_tfevents_scalars(&h->tf, wall, step, s, ns) : 0;
    }
    if (rc) {
        dt_log_warn("%s: %s; no longer written", h->tf.path, dt_last_error());
        dt_clear_error();
        dt_tfevents_close(&h->tf);
    }
}

/* Step, epoch and resume events become rows: parsed back from the line, so whatever fields an
 * event gains, the line is the one source of both the JSON and the table. */
static void record_event(struct dt_history *h, const char *line, size_t len)
{
    if (h->csv_fd < 0 && h->tf.fd < 0)
        return;
    struct dt_json *ev = dt_json_parse(line, len);
    const struct dt_json *kind = ev ? dt_json_get(ev, "event") : NULL;
    const char *name = kind && kind->type == DT_JSON_STR ? kind->str : "";
    struct dt_metrics_row r;
    if (!strcmp(name, "step") || !strcmp(name, "epoch")) {
        fill_row(ev, name[0] == 'e', &r);
        record_metrics(h, &r);
    } else if (!strcmp(name, "resume")) {
        const struct dt_json *step = dt_json_get(ev, "step");
        r = (struct dt_metrics_row){.kind = DT_ROW_RESUME};
        r.v[DT_M_STEP] = step && step->type == DT_JSON_NUM ? step->num : 0;
        r.has[DT_M_STEP] = true;
        record_metrics(h, &r);
    }
    if (!ev)
        dt_clear_error();
    dt_json_free(ev);
}

/* Sends one event object (malloc'd; freed here) where it goes: its newline takes the place of
 * the terminating NUL. */
static void emit_line(struct dt_history *h, char *obj)
{
    size_t len = strlen(obj);
    obj[len] = '\n'; /* in the terminating NUL's place: the line goes out by length */
    if (h->json_stdout) {
        fflush(stdout);
        ssize_t n = write(STDOUT_FILENO, obj, len + 1);
        (void)n;
    }
    put(h, &h->events_fd, "events.jsonl", obj, len + 1);
    record_event(h, obj, len);
    free(obj);
}

void dt_history_emit(struct dt_history *h, struct dt_json_writer *w)
{
    char *obj = dt_jw_finish(w); /* frees the buffer when the writer ran out of memory */
    memset(w, 0, sizeof *w);
    if (obj)
        emit_line(h, obj);
}

void dt_history_emit_text(struct dt_history *h, const char *obj)
{
    char *copy = strdup(obj);
    if (copy)
        emit_line(h, copy);
}

void dt_history_close(struct dt_history *h, int rc)
{
    int code = rc < 0 ? dt_exit_code(rc) : 0;
    if (h->events_fd >= 0 && code && code != DT_EINTR && code != DT_ETERM) {
        bool json = h->json_stdout;
        h->json_stdout = false; /* main.c prints its own on stdout */
        struct dt_json_writer w;
        dt_jw_begin(&w, "error");
        dt_jw_int(&w, "exit_code", code);
        dt_jw_str(&w, "message", dt_last_error());
        dt_history_emit(h, &w);
        h->json_stdout = json;
    }
    if (h->events_fd >= 0)
        close(h->events_fd);
    if (h->csv_fd >= 0)
        close(h->csv_fd);
    dt_tfevents_close(&h->tf);
    h->events_fd = h->csv_fd = -1;
}

void dt_history_discard(struct dt_history *h)
{
    if (!h->dir[0])
        return;
    static const char *const names[] = {"events.jsonl", "metrics.csv"};
    char path[1200];
    for (int i = 0; i < 2; i++)
        if (h->created[i]) {
            snprintf(path, sizeof path, "%s/%s", h->dir, names[i]);
            unlink(path);
        }
    if (h->created[F_TF])
        unlink(h->tf.path);
    snprintf(path, sizeof path, "%s/config.cfg", h->dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/cmdline.txt", h->dir);
    unlink(path);
}

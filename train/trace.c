/* The Chrome trace of a run (see train/trace.h). */
#include "train/trace.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nn/layers.h"
#include "nn/model.h"
#include "util/err.h"
#include "util/fileio.h"

void dt_trace_part_path(const char *file, int rank, char *out, size_t size)
{
    snprintf(out, size, "%s.rank%d.part", file, rank);
}

void dt_trace_prepare(const char *file, int first, int n)
{
    char path[4200];
    for (int r = first; r < first + n; r++) {
        dt_trace_part_path(file, r, path, sizeof path);
        unlink(path);
    }
}

static void write_metadata(struct dt_trace *t)
{
    /* sort_index keeps the ranks in order in the viewer whatever their names sort as */
    fprintf(t->part,
            "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
            "\"args\":{\"name\":\"rank %d\"}}\n"
            "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
            "\"args\":{\"sort_index\":%d}}\n"
            "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
            "\"args\":{\"name\":\"training loop\"}}\n"
            "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
            "\"args\":{\"name\":\"checkpoint writer\"}}\n",
            t->rank, t->rank, t->rank, t->rank, t->rank, DT_TRACE_MAIN, t->rank, DT_TRACE_WRITER);
}

int dt_trace_open(struct dt_trace *t, const char *file, int rank, double base)
{
    memset(t, 0, sizeof *t);
    t->rank = rank;
    t->base = base;
    pthread_mutex_init(&t->mu, NULL);
    char path[4200];
    dt_trace_part_path(file, rank, path, sizeof path);
    t->part = fopen(path, "ae");
    if (!t->part)
        return dt_fail(DT_ERUNTIME, "--trace: cannot write %s: %s", path, strerror(errno));
    write_metadata(t);
    return 0;
}

int dt_trace_attach_model(struct dt_trace *t, struct dt_model *m)
{
    if (!t || !t->part)
        return 0;
    int nlayers = m->nlayers;
    t->layer_names = calloc((size_t)nlayers * 2, sizeof *t->layer_names);
    if (!t->layer_names)
        return dt_fail(DT_ERUNTIME, "--trace: out of memory");
    t->nlayers = nlayers;
    for (int i = 0; i < nlayers; i++)
        for (int b = 0; b < 2; b++) {
            char name[96];
            snprintf(name, sizeof name, "%s %d %s", b ? "backward" : "forward", i,
                     m->layers[i]->kind->name);
            if (!(t->layer_names[2 * i + b] = strdup(name)))
                return dt_fail(DT_ERUNTIME, "--trace: out of memory");
        }
    m->layer_hook.fn = dt_trace_layer;
    m->layer_hook.ctx = t;
    return 0;
}

/* With t->mu held. */
static void flush_locked(struct dt_trace *t)
{
    for (int i = 0; i < t->n; i++) {
        const struct dt_trace_event *e = &t->buf[i];
        double ts = 1e6 * (e->t0 - t->base), dur = 1e6 * (e->t1 - e->t0);
        if (fprintf(t->part,
                    "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
                    "\"ts\":%.3f,\"dur\":%.3f",
                    e->name, e->cat, t->rank, e->tid, ts, dur > 0 ? dur : 0) < 0)
            t->failed = errno ? errno : EIO;
        if (e->step >= 0)
            fprintf(t->part, ",\"args\":{\"step\":%lld}", e->step);
        fputs("}\n", t->part);
    }
    t->n = 0;
    if (fflush(t->part) != 0 && !t->failed)
        t->failed = errno ? errno : EIO;
}

void dt_trace_span(struct dt_trace *t, int tid, const char *cat, const char *name, double t0,
                   double t1, long long step)
{
    if (!t || !t->part)
        return;
    pthread_mutex_lock(&t->mu);
    if (t->n == DT_TRACE_BUFFER)
        flush_locked(t);
    t->buf[t->n++] = (struct dt_trace_event){
        .name = name, .cat = cat, .t0 = t0, .t1 = t1, .step = step, .tid = tid};
    pthread_mutex_unlock(&t->mu);
}

void dt_trace_layer(void *trace, int layer, bool backward, double t0, double t1)
{
    struct dt_trace *t = trace;
    if (layer >= 0 && layer < t->nlayers)
        dt_trace_span(t, DT_TRACE_MAIN, "layer", t->layer_names[2 * layer + backward], t0, t1, -1);
}

void dt_trace_flush(struct dt_trace *t)
{
    if (!t || !t->part)
        return;
    pthread_mutex_lock(&t->mu);
    flush_locked(t);
    pthread_mutex_unlock(&t->mu);
}

int dt_trace_close(struct dt_trace *t)
{
    if (!t || !t->part)
        return 0;
    dt_trace_flush(t);
    int failed = t->failed;
    if (fclose(t->part) != 0 && !failed)
        failed = errno ? errno : EIO;
    t->part = NULL;
    for (int i = 0; i < 2 * t->nlayers; i++)
        free(t->layer_names[i]);
    free(t->layer_names);
    t->layer_names = NULL;
    pthread_mutex_destroy(&t->mu);
    if (failed)
        return dt_fail(DT_ERUNTIME, "--trace: writing rank %d's events failed: %s", t->rank,
                       strerror(failed));
    return 0;
}

/* Copies the whole lines of one part to out, each after a comma but the very first. */
static long copy_part(FILE *part, FILE *out, long *events)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long copied = 0;
    while ((len = getline(&line, &cap, part)) > 0) {
        /* a line a killed rank left half-written has no closing brace and newline */
        if (len < 3 || line[0] != '{' || line[len - 1] != '\n' || line[len - 2] != '}')
            continue;
        fputs(*events ? ",\n" : "\n", out);
        fwrite(line, 1, (size_t)len - 1, out);
        (*events)++;
        copied++;
    }
    free(line);
    return copied;
}

long dt_trace_merge(const char *file, const char *dest, int first, int n)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out)
        return dt_fail(DT_ERUNTIME, "--trace: out of memory");
    fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"tool\":\"dtrain\"},\"traceEvents\":[", out);
    long events = 0;
    char path[4200];
    for (int r = first; r < first + n; r++) {
        dt_trace_part_path(file, r, path, sizeof path);
        FILE *part = fopen(path, "re");
        if (!part)
            continue; /* a rank that never started */
        copy_part(part, out, &events);
        fclose(part);
    }
    fputs("\n]}\n", out);
    if (fclose(out) != 0) {
        free(text);
        return dt_fail(DT_ERUNTIME, "--trace: out of memory");
    }
    int rc = dt_write_file_atomic(dest, text, len);
    free(text);
    if (rc)
        return rc;
    for (int r = first; r < first + n; r++) {
        dt_trace_part_path(file, r, path, sizeof path);
        unlink(path);
    }
    return events;
}

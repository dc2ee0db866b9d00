/* train.init_from (the rules are in init_from.h). Two passes over the model's tensors: the
 * first decides each one's fate and fails before anything changes when nothing matches; the
 * second copies. Every rank runs it on the same file, so all start from the same weights (the
 * loop's checksum proves it). */
#include "train/init_from.h"

#include <stdio.h>
#include <string.h>

#include "nn/checkpoint.h"
#include "util/err.h"
#include "util/log.h"

enum fate { LOADED, SKIPPED, FRESH };

/* Names listed per kind in the report before "and N more". */
#define LIST_MAX 12

/* The file's tensor for model tensor t: by name, else by its layers.N name. */
static bool find(const struct dt_checkpoint_file *f, const struct dt_tensor_info *t,
                 struct dt_checkpoint_tensor *out)
{
    return dt_checkpoint_file_find(f, t->name, out) ||
           dt_checkpoint_file_find(f, t->index_name, out);
}

static enum fate fate_of(const struct dt_checkpoint_file *f, const struct dt_tensor_info *t,
                         bool count, struct dt_checkpoint_tensor *ft)
{
    if (!find(f, t, ft))
        return FRESH;
    if (count ? !ft->i64 : !ft->f32)
        return SKIPPED;
    if (ft->ndim != t->ndim)
        return SKIPPED;
    for (int d = 0; d < t->ndim; d++)
        if (ft->shape[d] != t->shape[d])
            return SKIPPED;
    return LOADED;
}

static bool is_count(const struct dt_tensor_info *t)
{
    return t->ndim == 0; /* batchnorm's num_batches_tracked, an int64 in the file */
}

static void copy(const struct dt_checkpoint_tensor *ft, const struct dt_tensor_info *t,
                 float *arena)
{
    if (is_count(t)) {
        long long v;
        memcpy(&v, ft->data, sizeof v);
        arena[t->offset] = (float)v;
    } else {
        memcpy(arena + t->offset, ft->data, t->count * sizeof(float));
    }
}

struct walk {
    const struct dt_checkpoint_file *f;
    struct dt_model *m;
    bool apply, report;
    struct dt_init_report r;
    int listed[3];
};

static void note(struct walk *w, enum fate fate, const struct dt_tensor_info *t,
                 const struct dt_checkpoint_tensor *ft)
{
    int *n = fate == LOADED ? &w->r.loaded : fate == SKIPPED ? &w->r.skipped : &w->r.fresh;
    (*n)++;
    if (!w->report || fate == LOADED || w->listed[fate]++ >= LIST_MAX)
        return;
    char a[96], b[96];
    if (fate == SKIPPED)
        dt_log_info("  skipped %s: %s %s in the file, %s %s in the model", t->name, ft->dtype,
                    dt_checkpoint_shape_text(a, sizeof a, ft->ndim, ft->shape),
                    is_count(t) ? "I64" : "F32",
                    dt_checkpoint_shape_text(
                        b, sizeof b, t->ndim,
                        (long long[4]){t->shape[0], t->shape[1], t->shape[2], t->shape[3]}));
    else
        dt_log_info("  new     %s: not in the file, initialised from train.seed", t->name);
}

static void walk_tensors(struct walk *w)
{
    struct dt_model *m = w->m;
    for (int pass = 0; pass < 2; pass++) {
        int n = pass ? m->nbuffer_tensors : m->ntensors;
        const struct dt_tensor_info *ts = pass ? m->buffer_tensors : m->tensors;
        float *arena = pass ? m->buffers : m->params;
        for (int i = 0; i < n; i++) {
            struct dt_checkpoint_tensor ft;
            enum fate fate = fate_of(w->f, &ts[i], pass && is_count(&ts[i]), &ft);
            if (w->apply && fate == LOADED)
                copy(&ft, &ts[i], arena);
            else if (!w->apply)
                note(w, fate, &ts[i], &ft);
        }
    }
}

/* File tensors that no model tensor took (by either name), optimizer state aside. */
static int count_unused(const struct dt_checkpoint_file *f, const struct dt_model *m)
{
    int unused = 0;
    for (int i = 0; i < dt_checkpoint_file_count(f); i++) {
        struct dt_checkpoint_tensor ft;
        dt_checkpoint_file_tensor(f, i, &ft);
        if (!strncmp(ft.name, "optimizer.", 10))
            continue;
        bool used = false;
        for (int pass = 0; pass < 2 && !used; pass++) {
            int n = pass ? m->nbuffer_tensors : m->ntensors;
            const struct dt_tensor_info *ts = pass ? m->buffer_tensors : m->tensors;
            for (int t = 0; t < n && !used; t++)
                used = !strcmp(ts[t].name, ft.name) || !strcmp(ts[t].index_name, ft.name);
        }
        unused += !used;
    }
    return unused;
}

int dt_run_init_from(const struct dt_config *cfg, struct dt_model *m, bool report,
                     struct dt_init_report *out)
{
    const char *path = cfg->train.init_from;
    struct dt_init_report none = {0};
    if (out)
        *out = none;
    if (!path[0])
        return 0;
    struct dt_checkpoint_file *f;
    int rc = dt_checkpoint_open(path, &f);
    if (rc)
        return dt_fail_context(rc, "%s: train.init_from", cfg->path);
    if (report)
        dt_log_info("init_from %s:", path);
    struct walk w = {.f = f, .m = m, .report = report};
    walk_tensors(&w); /* decide and report */
    w.r.unused = count_unused(f, m);
    if (w.r.loaded == 0) {
        dt_checkpoint_close(f);
        return dt_fail(DT_EUSAGE,
                       "%s: train.init_from: no tensor of %s matches the model by name and shape "
                       "(%d skipped for shape, %d not in the file; names look like \"%s\")",
                       cfg->path, path, w.r.skipped, w.r.fresh,
                       m->ntensors ? m->tensors[0].name : "none");
    }
    w.apply = true;
    walk_tensors(&w);
    dt_checkpoint_close(f);
    if (report) {
        for (int k = SKIPPED; k <= FRESH; k++)
            if (w.listed[k] > LIST_MAX)
                dt_log_info("  ... and %d more %s", w.listed[k] - LIST_MAX,
                            k == SKIPPED ? "skipped" : "new");
        dt_log_info("init_from: %d tensors loaded, %d skipped (shape), %d new, %d in the file "
                    "unused",
                    w.r.loaded, w.r.skipped, w.r.fresh, w.r.unused);
    }
    if (out)
        *out = w.r;
    return 0;
}

/* `dtrain train --dry-run`: everything a run would use, checked and shown without training:
 * the config, the files read and their sizes, the label histograms, the network layer by layer
 * (output shapes, parameters) and the job's shape (ranks, batch split, steps per epoch), as
 * text or one JSON object. */
#include "train/dry_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/batch.h"
#include "data/dataset.h"
#include "nn/model.h"
#include "train/init_from.h"
#include "train/norm_stats.h"
#include "train/param_groups.h"
#include "train/rundir.h"
#include "train/setup.h"
#include "util/err.h"
#include "util/json.h"

static void histogram(const struct dt_dataset *d, size_t *hist)
{
    memset(hist, 0, (size_t)d->classes * sizeof *hist);
    for (size_t i = 0; i < d->n; i++)
        if (d->y[i] < d->classes)
            hist[d->y[i]]++;
}

struct dry_run_facts {
    struct dt_data data;
    struct dt_model *model;
    size_t *train_hist, *test_hist;
    struct dt_job_steps steps;
    struct dt_run_memory memory; /* at the real per-rank batch, against what is available */
    bool dir_holds;              /* checkpoint.dir already holds a run's checkpoints */
};

static char *counts_json(const size_t *counts, int n)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f)
        return NULL;
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%zu", i ? "," : "[", counts[i]);
    fputs(n ? "]" : "[]", f);
    fclose(f);
    return out;
}

static int print_json(const struct dt_config *cfg, const struct dt_job_plan *p,
                      const struct dry_run_facts *f)
{
    const struct dt_dataset *tr = &f->data.train, *te = &f->data.test;
    char shape[48];
    char *names = dt_run_class_names_json(tr), *htrain = counts_json(f->train_hist, tr->classes),
         *htest = counts_json(f->test_hist, tr->classes);
    int rc = 0;
    if (!names || !htrain || !htest) {
        rc = dt_fail(DT_ERUNTIME, "out of memory writing JSON");
        goto out;
    }
    struct dt_json_writer w;
    dt_jw_begin(&w, "dry_run");
    dt_jw_str(&w, "config", cfg->path);
    dt_jw_str(&w, "dataset", cfg->data.dataset);
    dt_jw_str(&w, "format", dt_names_name(&dt_data_format_names, (int)cfg->data.format));
    dt_jw_str(&w, "dir", cfg->data.dir);
    dt_jw_str(&w, "train_files", tr->source);
    dt_jw_str(&w, "test_files", te->source);
    dt_jw_int(&w, "train_samples", (long long)tr->n);
    dt_jw_int(&w, "test_samples", (long long)te->n);
    snprintf(shape, sizeof shape, "[%d,%d,%d]", tr->c, tr->h, tr->w);
    dt_jw_raw(&w, "shape", shape);
    dt_jw_int(&w, "classes", tr->classes);
    dt_jw_raw(&w, "class_names", names);
    dt_jw_raw(&w, "train_histogram", htrain);
    dt_jw_raw(&w, "test_histogram", htest);
    dt_jw_int(&w, "layers", cfg->model.nlayers);
    dt_jw_int(&w, "parameters", (long long)f->model->nparams);
    dt_jw_int(&w, "outputs", f->model->classes);
    dt_jw_int(&w, "instances", cfg->dist.instances);
    dt_jw_int(&w, "ranks", p->job.world);
    dt_jw_int(&w, "threads", p->threads);
    dt_jw_int(&w, "global_batch", f->steps.global_batch);
    dt_jw_int(&w, "steps_per_epoch", f->steps.steps_per_epoch);
    dt_jw_int(&w, "epochs", cfg->train.epochs);
    dt_jw_int(&w, "memory_bytes", (long long)f->memory.total);
    dt_jw_int(&w, "memory_available_bytes", (long long)f->memory.available);
    dt_jw_end(&w, stdout);
out:
    free(names);
    free(htrain);
    free(htest);
    return rc;
}

/* The network, Darknet-style: a row per layer with its output shape and parameters, then
 * the totals. When the config names layers, a last column gives each layer's tensor-name
 * prefix (its name, or layers.N). */
static void print_network(const struct dt_model *m, const struct dt_config *cfg)
{
    bool named = false;
    for (int i = 0; i < cfg->model.nlayers && !named; i++)
        named = cfg->model.layers[i].name[0] != 0;
    printf("network     %-4s %-14s %-22s %-14s %10s%s\n", "#", "layer", "detail", "output",
           "params", named ? "  name" : "");
    printf("            %-4s %-14s %-22s %dx%dx%d\n", "", "input", "", m->input.c, m->input.h,
           m->input.w);
    for (int i = 0; i < m->nlayers; i++) {
        struct dt_layer_summary s;
        char shape[48];
        dt_model_layer_summary(m, i, &s);
        if (s.out.h == 1 && s.out.w == 1)
            snprintf(shape, sizeof shape, "%d", s.out.c);
        else
            snprintf(shape, sizeof shape, "%dx%dx%d", s.out.c, s.out.h, s.out.w);
        printf("            %-4d %-14s %-22s %-14s %10zu", i, s.type, s.detail, shape, s.nparams);
        if (named && cfg->model.layers[i].name[0])
            printf("  %s", cfg->model.layers[i].name);
        else if (named)
            printf("  layers.%d", i);
        if (s.precision[0])
            printf("  bf16: %s", s.precision);
        printf("\n");
    }
    printf("            %d layers, %zu parameters (%.2f M, %.1f KiB as float32)\n", m->nlayers,
           m->nparams, (double)m->nparams / 1e6, (double)m->nparams * 4 / 1024);
}

/* "12.3 MiB" or "4.5 GiB" */
static const char *size_text(char *buf, size_t size, double bytes)
{
    if (bytes >= (1 << 30))
        snprintf(buf, size, "%.1f GiB", bytes / (1 << 30));
    else
        snprintf(buf, size, "%.1f MiB", bytes / (1 << 20));
    return buf;
}

static void print_memory(const struct dt_run_memory *m)
{
    char total[32], avail[32], w[32], a[32], s[32], b[32];
    double r = m->ranks;
    printf("memory      %s estimated at batch %d per rank x %d (weights, gradients, optimizer "
           "%s; activations %s; layer scratch %s; input batches %s), %s available (%s)\n",
           size_text(total, sizeof total, m->total), m->batch, m->ranks,
           size_text(w, sizeof w, r * (m->model.params + m->model.grads + m->optimizer)),
           size_text(a, sizeof a, r * m->model.activations),
           size_text(s, sizeof s, r * m->model.scratch), size_text(b, sizeof b, r * m->batches),
           m->available > 0 ? size_text(avail, sizeof avail, m->available) : "?",
           m->available_from);
}

static void print_summary(const struct dt_config *cfg, const struct dt_job_plan *p,
                          const struct dry_run_facts *f)
{
    const struct dt_dataset *tr = &f->data.train, *te = &f->data.test;
    char buf[32];
    printf("config      %s: valid\n", cfg->path);
    printf("dataset     %s (%s) in %s\n", cfg->data.dataset,
           dt_names_name(&dt_data_format_names, (int)cfg->data.format), cfg->data.dir);
    printf("read        %s\n", tr->source);
    if (strcmp(te->source, tr->source) != 0)
        printf("            %s\n", te->source);
    printf("train       %zu samples, %dx%dx%d\n", tr->n, tr->c, tr->h, tr->w);
    printf("test        %zu samples, %dx%dx%d\n", te->n, te->c, te->h, te->w);
    printf("model       %d layers, %dx%dx%d -> %d outputs, %zu parameters, loss %s\n",
           cfg->model.nlayers, tr->c, tr->h, tr->w, f->model->classes, f->model->nparams,
           dt_names_name(&dt_loss_kind_names, cfg->loss.type));
    printf("optimizer   %s, lr %g\n", dt_optim_type_name(cfg->optimizer.type), cfg->optimizer.lr);
    printf("run         %d instance%s x %d thread%s, batch %d global (%d per instance), "
           "%lld steps per epoch, %d epoch%s\n",
           cfg->dist.instances, cfg->dist.instances > 1 ? "s" : "", p->threads,
           p->threads == 1 ? "" : "s", f->steps.global_batch, f->steps.rank_batch,
           f->steps.steps_per_epoch, cfg->train.epochs, cfg->train.epochs > 1 ? "s" : "");
    if (p->job.world != cfg->dist.instances)
        printf("job         %d ranks on %d host%s\n", p->job.world, p->env.nodes,
               p->env.nodes == 1 ? "" : "s");
    printf("checkpoints %s (writable%s)\n", cfg->checkpoint.dir,
           !f->dir_holds                 ? ""
           : cfg->checkpoint.dir_default ? "; holds a run's checkpoints: a run writes to a fresh "
                                           "NAME-N unless --overwrite or --resume"
                                         : "; holds a run's checkpoints: a run needs --overwrite "
                                           "or --resume");
    print_memory(&f->memory);
    print_network(f->model, cfg);
    printf("classes     %d\n", tr->classes);
    printf("  class  %-20s %8s %8s\n", "name", "train", "test");
    for (int i = 0; i < tr->classes; i++)
        printf("  %5d  %-20s %8zu %8zu\n", i, dt_dataset_class_name(tr, i, buf, sizeof buf),
               f->train_hist[i], f->test_hist[i]);
}

int dt_dry_run(const struct dt_config *cfg, const struct dt_job_plan *plan, bool json)
{
    struct dry_run_facts f;
    memset(&f, 0, sizeof f);
    struct dt_config *resolved = NULL;
    /* The checkpoint directory first, as a run checks it before reading any data. */
    int rc = dt_run_dir_check(cfg, &f.dir_holds);
    if (rc == 0)
        rc = dt_run_load_data(cfg, &f.data);
    if (rc)
        goto out;
    const struct dt_dataset *tr = &f.data.train;
    struct dt_shape in = {tr->c, tr->h, tr->w};
    /* As train does before any batch-sized buffer exists: the run at its real per-rank batch
     * against the memory available; then the augmentation the batcher would refuse. */
    if ((rc = dt_run_memory(cfg, plan, tr, &f.memory)) ||
        (rc = dt_run_check_memory(cfg, &f.memory)))
        goto out;
    /* data.mean/std = "auto": computed and shown as train would */
    if ((rc = dt_run_stats_resolve(cfg, tr, &resolved)))
        goto out;
    struct dt_batcher batcher;
    struct dt_batch_opts bo = dt_run_batch_opts(resolved ? resolved : cfg);
    if ((rc = dt_batcher_init(&batcher, tr, &bo))) {
        rc = dt_fail_context(rc, "%s: data", cfg->path);
        goto out;
    }
    /* the network table from a model of one sample: nothing of the real batch is allocated */
    if ((rc = dt_run_build_model(cfg, in, 1, tr->classes, &f.model)))
        goto out;
    /* fine-tuning's patterns and checkpoint, checked (and reported) as the run would */
    if ((rc = dt_run_check_groups(cfg, f.model)) ||
        (rc = dt_run_init_from(cfg, f.model, !json, NULL)))
        goto out;
    if ((rc = dt_job_plan_steps(plan, cfg, tr->n, &f.steps)))
        goto out;
    f.train_hist = calloc((size_t)tr->classes + 1, sizeof *f.train_hist);
    f.test_hist = calloc((size_t)tr->classes + 1, sizeof *f.test_hist);
    if (!f.train_hist || !f.test_hist) {
        rc = dt_fail(DT_ERUNTIME, "out of memory");
        goto out;
    }
    histogram(tr, f.train_hist);
    histogram(&f.data.test, f.test_hist);
    if (json)
        rc = print_json(cfg, plan, &f);
    else
        print_summary(cfg, plan, &f);
out:
    free(resolved);
    free(f.train_hist);
    free(f.test_hist);
    if (f.model)
        dt_model_free(f.model);
    dt_data_free(&f.data);
    return rc;
}

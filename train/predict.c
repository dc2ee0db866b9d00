/* The prediction engine (see predict.h): the model from the checkpoint, the inputs decoded
 * or loaded, forward passes in batches of BATCH, each sample reported (predict_report.c). */
#include "train/predict.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/batch.h"
#include "data/dataset.h"
#include "data/image.h"
#include "nn/checkpoint.h"
#include "nn/model.h"
#include "train/predict_files.h"
#include "train/predict_run.h"
#include "train/setup.h"
#include "util/alloc.h"
#include "util/err.h"
#include "util/json.h"
#include "util/log.h"

#define BATCH 256

/* The input shape the model was trained on: stored by checkpoints since issue 18; older ones
 * get the one their data format implies. */
static int input_shape(const struct dt_predictor *p, const struct dt_checkpoint_meta *meta,
                       struct dt_shape *in)
{
    const char *s = dt_checkpoint_meta_get(meta, "input");
    if (s && sscanf(s, "%dx%dx%d", &in->c, &in->h, &in->w) == 3 && in->c > 0 && in->h > 0 &&
        in->w > 0)
        return 0;
    enum dt_data_format format = p->cfg.data.format;
    if (format == DT_DATA_IDX)
        *in = (struct dt_shape){1, 28, 28};
    else if (format == DT_DATA_CIFAR10 || format == DT_DATA_CIFAR100)
        *in = (struct dt_shape){3, 32, 32};
    else if (p->cfg.data.size_h > 0)
        *in = (struct dt_shape){p->cfg.data.channels, p->cfg.data.size_h, p->cfg.data.size_w};
    else
        return dt_fail(DT_EDATA, "checkpoint records no input shape and its data config sets no "
                                 "data.size");
    return 0;
}

static void class_names(struct dt_predictor *p, const struct dt_checkpoint_meta *meta)
{
    const char *s = dt_checkpoint_meta_get(meta, "class_names");
    struct dt_json *v = s ? dt_json_parse(s, strlen(s)) : NULL;
    if (v && v->type == DT_JSON_ARR) {
        p->names = calloc((size_t)p->model->classes, sizeof *p->names);
        int i = 0;
        for (const struct dt_json *e = v->child; e && p->names && i < p->model->classes;
             e = e->next, i++)
            if (e->type == DT_JSON_STR)
                p->names[i] = strdup(e->str);
    }
    dt_json_free(v);
    dt_clear_error();
}

static int open_model(struct dt_predictor *p, const struct dt_predict_options *a)
{
    int rc = dt_run_config_for_checkpoint(&p->cfg, a->checkpoint, a->config, a->sets, a->nsets);
    if (rc)
        return rc;
    dt_nn_set_threads(a->threads ? a->threads : dt_run_threads(&p->cfg, 1));
    struct dt_checkpoint_meta meta = {0};
    rc = dt_checkpoint_read_meta(a->checkpoint, &meta);
    if (rc == 0)
        rc = input_shape(p, &meta, &p->in);
    if (rc == 0)
        rc = dt_run_build_model(&p->cfg, p->in, BATCH, 0, &p->model);
    struct dt_run_resume r;
    if (rc == 0)
        rc = dt_run_load_checkpoint(a->checkpoint, p->model, NULL, &r);
    if (rc == 0)
        class_names(p, &meta);
    dt_checkpoint_meta_free(&meta);
    if (rc)
        return rc;
    size_t sample = (size_t)p->in.c * p->in.h * p->in.w;
    p->x = dt_alloc((size_t)BATCH * sample, sizeof(float));
    p->y = dt_alloc(BATCH, 1);
    p->idx = dt_alloc(BATCH, sizeof(uint32_t));
    p->prob = dt_alloc((size_t)p->model->classes, sizeof(double));
    return p->x && p->y && p->idx && p->prob ? 0 : dt_fail(DT_ERUNTIME, "out of memory");
}

static void close_model(struct dt_predictor *p)
{
    for (int i = 0; p->names && i < p->model->classes; i++)
        free(p->names[i]);
    free(p->names);
    dt_free(p->x);
    dt_free(p->y);
    dt_free(p->idx);
    dt_free(p->prob);
    dt_model_free(p->model);
    dt_config_free(&p->cfg);
}

/* Predicts d's samples [0, n) in batches. Sample i is named names[i] when given, else by
 * d's own names (dt_dataset_sample_name) prefixed with "what:" for an archive. A sample with
 * errors[i] set could not be decoded: its error is reported in its place instead. */
static int predict_samples(struct dt_predictor *p, const struct dt_dataset *d, char *const *names,
                           char *const *errors, const char *what, enum dt_split split, bool labels)
{
    struct dt_batcher b;
    struct dt_batch_opts bo = {.mean = p->cfg.data.mean,
                               .nmean = p->cfg.data.nmean,
                               .std = p->cfg.data.std,
                               .nstd = p->cfg.data.nstd};
    int rc = dt_batcher_init(&b, d, &bo);
    if (rc)
        return rc;
    struct dt_forward_ctx ctx = {.training = false};
    for (size_t at = 0; at < d->n; at += BATCH) {
        int count = d->n - at < BATCH ? (int)(d->n - at) : BATCH;
        for (int i = 0; i < count; i++)
            p->idx[i] = (uint32_t)(at + (size_t)i);
        dt_batch_assemble(&b, d, p->idx, count, 0, 0, p->x, p->y);
        if ((rc = dt_model_forward(p->model, p->x, count, &ctx)))
            return rc;
        for (int i = 0; i < count; i++) {
            size_t s = at + (size_t)i;
            char name[1200], own[64];
            if (names)
                snprintf(name, sizeof name, "%s", names[s]);
            else if (d->files)
                snprintf(name, sizeof name, "%s", d->files[s]);
            else
                snprintf(name, sizeof name, "%s:%s", what ? what : "",
                         dt_dataset_sample_name(d, split, s, own, sizeof own));
            if (errors && errors[s])
                dt_predict_report_bad(p, name, errors[s]);
            else
                dt_predict_report(p, name, labels ? d->y[s] : -1,
                                  p->model->output + (size_t)i * p->model->classes);
        }
    }
    return 0;
}

/* Decodes files [0, n) into d (uint8 CHW, the model's shape), on every core. A file that fails
 * gets its error in errors[i] (malloc'd) and zero pixels; the others are unaffected. */
static int decode_chunk(const struct dt_predictor *p, char *const *paths, size_t n,
                        struct dt_dataset *d, char **errors)
{
    size_t sample = (size_t)p->in.c * p->in.h * p->in.w;
    bool oom = false;
#pragma omp parallel for schedule(dynamic, 8)
    for (size_t i = 0; i < n; i++) {
        uint8_t *buf = NULL;
        size_t len = 0;
        struct dt_image img = {0};
        int rc = dt_image_read_file(paths[i], &buf, &len);
        if (rc == 0)
            rc = dt_image_decode(buf, len, paths[i], p->in.c, (uint64_t)p->cfg.data.max_pixels,
                                 &img);
        if (rc == 0)
            rc = dt_image_fit(&img, p->in.h, p->in.w, d->x + i * sample);
        free(buf);
        dt_image_free(&img);
        errors[i] = NULL;
        if (rc) {
            memset(d->x + i * sample, 0, sample);
            /* dt_last_error() is per thread: this thread's failure. */
            if (!(errors[i] = strdup(dt_last_error())))
                oom = true;
        }
    }
    return oom ? dt_fail(DT_ERUNTIME, "out of memory") : 0;
}

#define CHUNK 4096

static int predict_files(struct dt_predictor *p)
{
    struct dt_predict_files l;
    int rc = dt_predict_files_collect(p->o->inputs, p->o->ninputs, &l);
    dt_predict_files_report_skipped(&l);
    /* One input and nothing to predict: its error is the run's error, one line. */
    if (!rc && l.n == 0 && l.nbad == 1) {
        rc = dt_fail(DT_EDATA, "%s", l.bad_error[0]);
        p->bad++;
    }
    for (size_t i = 0; !rc && i < l.nbad; i++)
        dt_predict_report_bad(p, l.bad_input[i], l.bad_error[i]);
    size_t sample = (size_t)p->in.c * p->in.h * p->in.w;
    size_t chunk = l.n < CHUNK ? l.n : CHUNK;
    struct dt_dataset d = {.c = p->in.c, .h = p->in.h, .w = p->in.w, .classes = p->model->classes};
    char **errors = rc ? NULL : calloc(chunk + 1, sizeof *errors);
    d.x = rc ? NULL : malloc(chunk * sample + 1);
    d.y = rc ? NULL : calloc(chunk + 1, 1);
    if (!rc && (!d.x || !d.y || !errors))
        rc = dt_fail(DT_ERUNTIME, "out of memory");
    for (size_t at = 0; !rc && at < l.n; at += CHUNK) {
        d.n = l.n - at < CHUNK ? l.n - at : CHUNK;
        rc = decode_chunk(p, l.paths + at, d.n, &d, errors);
        /* A single FILE that cannot be read fails the run with its own error line. */
        if (!rc && l.n == 1 && l.nbad == 0 && errors[0]) {
            rc = dt_fail(DT_EDATA, "%s", errors[0]);
            p->bad++;
        }
        if (!rc)
            rc = predict_samples(p, &d, l.paths + at, errors, NULL, DT_SPLIT_TEST, false);
        for (size_t i = 0; i < d.n; i++)
            free(errors[i]), errors[i] = NULL;
    }
    free(errors);
    free(d.x);
    free(d.y);
    dt_predict_files_free(&l);
    return rc;
}

/* The split of each input, a dataset directory of the checkpoint's format. */
static int predict_split(struct dt_predictor *p)
{
    const struct dt_predict_options *a = p->o;
    const char *split = dt_split_name(a->split);
    int rc = 0;
    for (int i = 0; i < a->ninputs && !rc; i++) {
        struct dt_config cfg = p->cfg;
        snprintf(cfg.data.dir, sizeof cfg.data.dir, "%s", a->inputs[i]);
        struct dt_data data;
        memset(&data, 0, sizeof data);
        rc = dt_run_load_data(&cfg, &data);
        const struct dt_dataset *d = dt_data_split(&data, a->split);
        if (!rc && d->n == 0)
            rc = dt_fail(DT_EDATA, "%s: no %s split", a->inputs[i], split);
        if (!rc && (d->c != p->in.c || d->h != p->in.h || d->w != p->in.w))
            rc = dt_fail(DT_EDATA, "%s: %s samples are %dx%dx%d, the model takes %dx%dx%d",
                         a->inputs[i], split, d->c, d->h, d->w, p->in.c, p->in.h, p->in.w);
        if (!rc)
            rc = predict_samples(p, d, NULL, NULL, a->inputs[i], a->split, true);
        dt_data_free(&data);
    }
    return rc;
}

int dt_predict(const struct dt_predict_options *o)
{
    struct dt_predictor p;
    memset(&p, 0, sizeof p);
    p.o = o;
    int rc = open_model(&p, o);
    if (rc == 0)
        rc = o->use_split ? predict_split(&p) : predict_files(&p);
    if (rc == 0 && p.bad && !p.good)
        rc = dt_fail(DT_EDATA, "predict: none of the %zu inputs could be read", p.bad);
    else if (rc == 0 && p.bad && o->strict)
        rc = dt_fail(DT_EDATA, "predict: %zu of %zu inputs could not be read (--strict)", p.bad,
                     p.bad + p.good);
    fflush(stdout);
    if (p.model)
        close_model(&p);
    else
        dt_config_free(&p.cfg);
    return rc;
}

/* `dtrain predict CHECKPOINT FILE...`: a trained model on images. Each PNG or JPEG (directories
 * are walked) is decoded as the checkpoint's data config says (channels, size, mean/std: the
 * same path training batches take), and the top K classes are printed with their
 * probabilities, or one JSON object per image. With --split, each argument is a dataset
 * directory of the checkpoint's format (IDX, CIFAR, image folder) and that split is predicted.
 */
#include <ctype.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "cmd/cli.h"
#include "cmd/cmd.h"
#include "data/batch.h"
#include "data/dataset.h"
#include "data/folder.h"
#include "data/image.h"
#include "nn/checkpoint.h"
#include "nn/model.h"
#include "train/setup.h"
#include "util/alloc.h"
#include "util/err.h"
#include "util/json.h"
#include "util/log.h"

#define PREDICT_USAGE "usage: dtrain predict CHECKPOINT FILE|DIR... [--top K] [--json]"
#define BATCH         256
#define MAX_TOP       64

enum { OPT_TOP = DT_OPT_COMMAND_BASE, OPT_SPLIT, OPT_CONFIG, OPT_THREADS };

struct predict_args {
    const char *checkpoint, *split, *config;
    char **inputs;
    int ninputs, top, threads;
    struct dt_cli_common common;
    struct dt_cli_sets sets;
};

/* What predicting needs from the checkpoint: the model, its input, its class names. */
struct predictor {
    struct dt_config cfg;
    struct dt_model *model;
    struct dt_shape in;
    char **names;   /* model->classes entries, or NULL */
    bool log_probs; /* the model ends in log_softmax (loss nll) */
    float *x;
    uint8_t *y;
    uint32_t *idx;
    double *prob; /* model->classes: the checkpoint says how many, so never a fixed array */
};

/* Files found, in the order they are predicted. */
struct file_list {
    char **paths;
    size_t n, cap;
};

static int take_option(void *ctx, int opt, const char *arg)
{
    struct predict_args *a = ctx;
    switch (opt) {
    case OPT_TOP:
        return dt_cli_parse_int("--top", arg, 1, MAX_TOP, &a->top);
    case OPT_SPLIT:
        if (strcmp(arg, "train") && strcmp(arg, "test") && strcmp(arg, "val"))
            return dt_fail(DT_EUSAGE, "--split: expected train, test or val, got '%s'", arg);
        a->split = arg;
        return 0;
    case OPT_CONFIG:
        a->config = arg;
        return 0;
    case OPT_THREADS:
        return dt_cli_parse_int("--threads", arg, 1, 1024, &a->threads);
    case DT_OPT_SET:
        return dt_cli_sets_add(&a->sets, arg);
    default:
        return dt_fail(DT_EUSAGE, "internal error: option %d not handled; %s", opt, PREDICT_USAGE);
    }
}

static int parse_args(int argc, char **argv, struct predict_args *a)
{
    static const struct option options[] = {
        DT_CLI_COMMON_LONGOPTS,
        {"top", required_argument, NULL, OPT_TOP},
        {"split", required_argument, NULL, OPT_SPLIT},
        {"config", required_argument, NULL, OPT_CONFIG},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"set", required_argument, NULL, DT_OPT_SET},
        {NULL, 0, NULL, 0},
    };
    int rc = dt_cli_getopt(argc, argv, options, &a->common, take_option, a, PREDICT_USAGE);
    if (rc)
        return rc;
    if (a->common.help)
        return 0;
    if (argc - optind < 2)
        return dt_fail(DT_EUSAGE, "predict: expected a CHECKPOINT and at least one FILE; %s",
                       PREDICT_USAGE);
    a->checkpoint = argv[optind];
    a->inputs = argv + optind + 1;
    a->ninputs = argc - optind - 1;
    return 0;
}

/* ---- the model ---- */

/* The input shape the model was trained on: stored by checkpoints since issue 18; older ones
 * get the one their data format implies. */
static int input_shape(const struct predictor *p, const struct dt_checkpoint_meta *meta,
                       struct dt_shape *in)
{
    const char *s = dt_checkpoint_meta_get(meta, "input");
    if (s && sscanf(s, "%dx%dx%d", &in->c, &in->h, &in->w) == 3 && in->c > 0 && in->h > 0 &&
        in->w > 0)
        return 0;
    const char *format = p->cfg.data.format;
    if (!strcmp(format, "idx"))
        *in = (struct dt_shape){1, 28, 28};
    else if (!strncmp(format, "cifar", 5))
        *in = (struct dt_shape){3, 32, 32};
    else if (p->cfg.data.size_h > 0)
        *in = (struct dt_shape){p->cfg.data.channels, p->cfg.data.size_h, p->cfg.data.size_w};
    else
        return dt_fail(DT_EDATA, "checkpoint records no input shape and its data config sets no "
                                 "data.size");
    return 0;
}

static void class_names(struct predictor *p, const struct dt_checkpoint_meta *meta)
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

static int open_model(struct predictor *p, const struct predict_args *a)
{
    int rc = dt_run_config_for_checkpoint(&p->cfg, a->checkpoint, a->config,
                                          (const char *const *)a->sets.items, a->sets.n);
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
    p->log_probs = !strcmp(p->cfg.loss.type, "nll");
    size_t sample = (size_t)p->in.c * p->in.h * p->in.w;
    p->x = dt_alloc((size_t)BATCH * sample, sizeof(float));
    p->y = dt_alloc(BATCH, 1);
    p->idx = dt_alloc(BATCH, sizeof(uint32_t));
    p->prob = dt_alloc((size_t)p->model->classes, sizeof(double));
    return p->x && p->y && p->idx && p->prob ? 0 : dt_fail(DT_ERUNTIME, "out of memory");
}

static void close_model(struct predictor *p)
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

/* ---- output ---- */

/* Probabilities of one output row, in place: softmax of scores, or exp of log-probabilities. */
static void probabilities(const struct predictor *p, const float *out, double *prob)
{
    int k = p->model->classes;
    double max = out[0], sum = 0;
    for (int i = 1; i < k; i++)
        max = out[i] > max ? out[i] : max;
    for (int i = 0; i < k; i++)
        sum += prob[i] = exp(p->log_probs ? out[i] : out[i] - max);
    for (int i = 0; i < k && !p->log_probs; i++)
        prob[i] /= sum;
}

static void top_k(const double *prob, int k, int top, int *best)
{
    for (int t = 0; t < top; t++) {
        int b = -1;
        for (int i = 0; i < k; i++) {
            bool taken = false;
            for (int u = 0; u < t; u++)
                taken |= best[u] == i;
            if (!taken && (b < 0 || prob[i] > prob[b]))
                b = i;
        }
        best[t] = b;
    }
}

/* Printed names go to a terminal: control characters are shown as '?'. */
static const char *name_of(const struct predictor *p, int i, char *buf, size_t n)
{
    if (p->names && p->names[i]) {
        snprintf(buf, n, "%s", p->names[i]);
        for (char *c = buf; *c; c++)
            if (iscntrl((unsigned char)*c))
                *c = '?';
    } else {
        snprintf(buf, n, "%d", i);
    }
    return buf;
}

static void report(const struct predictor *p, const struct predict_args *a, const char *file,
                   int label, const float *out)
{
    int k = p->model->classes, top = a->top < k ? a->top : k, best[MAX_TOP];
    double *prob = p->prob;
    char buf[128];
    probabilities(p, out, prob);
    top_k(prob, k, top, best);
    if (!a->common.json) {
        printf("%s", file);
        for (int t = 0; t < top; t++)
            printf("%s%s %.2f%%", t ? ", " : "  ", name_of(p, best[t], buf, sizeof buf),
                   100 * prob[best[t]]);
        printf("\n");
        return;
    }
    struct dt_json_writer w, list;
    memset(&list, 0, sizeof list);
    char *items = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&items, &len);
    for (int t = 0; f && t < top; t++) {
        dt_jw_begin(&list, NULL);
        dt_jw_str(&list, "class",
                  p->names && p->names[best[t]] ? p->names[best[t]]
                                                : name_of(p, best[t], buf, sizeof buf));
        dt_jw_int(&list, "index", best[t]);
        dt_jw_num(&list, "probability", prob[best[t]]);
        char *one = dt_jw_finish(&list);
        fprintf(f, "%s%s", t ? "," : "[", one ? one : "{}");
        free(one);
    }
    if (f) {
        fputs("]", f);
        fclose(f);
    }
    dt_jw_begin(&w, NULL);
    dt_jw_str(&w, "file", file);
    if (label >= 0)
        dt_jw_int(&w, "label", label);
    dt_jw_raw(&w, "top", items ? items : "[]");
    dt_jw_end(&w, stdout);
    free(items);
}

/* ---- running the model over samples ---- */

/* Predicts d's samples [0, n) in batches; names[i] labels sample i (or "<what>#i"). */
static int predict_samples(struct predictor *p, const struct predict_args *a,
                           const struct dt_dataset *d, char *const *names, const char *what,
                           bool labels)
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
            char name[1200];
            if (names)
                snprintf(name, sizeof name, "%s", names[at + (size_t)i]);
            else
                snprintf(name, sizeof name, "%s#%zu", what ? what : "", at + (size_t)i);
            report(p, a, name, labels ? d->y[at + (size_t)i] : -1,
                   p->model->output + (size_t)i * p->model->classes);
        }
    }
    return 0;
}

/* ---- image files ---- */

static bool is_image_name(const char *path)
{
    const char *dot = strrchr(path, '.');
    return dot &&
           (!strcasecmp(dot, ".png") || !strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"));
}

static int list_add(struct file_list *l, const char *path)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        char **paths = realloc(l->paths, cap * sizeof *paths);
        if (!paths)
            return dt_fail(DT_ERUNTIME, "out of memory listing files");
        l->paths = paths, l->cap = cap;
    }
    if (!(l->paths[l->n] = strdup(path)))
        return dt_fail(DT_ERUNTIME, "out of memory listing files");
    l->n++;
    return 0;
}

/* nftw has no context argument: the walk in progress. Process-wide only for its duration. */
static struct file_list *walking;

static int walk_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    /* Hidden files and folders are skipped, as the folder reader skips them. */
    const char *base = path + ftw->base;
    if (base[0] == '.' && ftw->level > 0)
        return type == FTW_D ? FTW_SKIP_SUBTREE : 0;
    if ((type == FTW_F || type == FTW_SL) && is_image_name(path))
        return list_add(walking, path) ? FTW_STOP : 0;
    return 0;
}

static int compare_paths(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* FILE arguments as given; directories walked (symlinks not followed, so no loop), their
 * images sorted by path. */
static int collect_files(const struct predict_args *a, struct file_list *l)
{
    for (int i = 0; i < a->ninputs; i++) {
        struct stat st;
        if (stat(a->inputs[i], &st) != 0)
            return dt_fail(DT_EDATA, "%s: no such file or directory", a->inputs[i]);
        if (!S_ISDIR(st.st_mode)) {
            int rc = list_add(l, a->inputs[i]);
            if (rc)
                return rc;
            continue;
        }
        size_t first = l->n;
        walking = l;
        int rc = nftw(a->inputs[i], walk_entry, 32, FTW_PHYS | FTW_ACTIONRETVAL);
        walking = NULL;
        if (rc < 0)
            return dt_fail(DT_EDATA, "%s: cannot walk the directory", a->inputs[i]);
        if (rc == FTW_STOP)
            return -DT_ERUNTIME;
        /* Empty first: with no file listed yet, l->paths is NULL, not a qsort argument. */
        if (l->n == first)
            return dt_fail(DT_EDATA, "%s: no .png, .jpg or .jpeg image in it", a->inputs[i]);
        qsort(l->paths + first, l->n - first, sizeof *l->paths, compare_paths);
    }
    return 0;
}

/* Decodes files [lo, hi) into d (uint8 CHW, the model's shape), on every core. */
static int decode_chunk(const struct predictor *p, char *const *paths, size_t n,
                        struct dt_dataset *d)
{
    size_t sample = (size_t)p->in.c * p->in.h * p->in.w;
    int failed = -1;
    char message[600] = "";
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
        if (rc) {
#pragma omp critical
            if (failed < 0 || (int)i < failed) { /* the first file in order is reported */
                failed = (int)i;
                snprintf(message, sizeof message, "%s", dt_last_error());
            }
        }
    }
    if (failed >= 0)
        return dt_fail(DT_EDATA, "%s", message);
    return 0;
}

#define CHUNK 4096

static int predict_files(struct predictor *p, const struct predict_args *a)
{
    struct file_list l = {0};
    int rc = collect_files(a, &l);
    size_t sample = (size_t)p->in.c * p->in.h * p->in.w;
    struct dt_dataset d = {.c = p->in.c, .h = p->in.h, .w = p->in.w, .classes = p->model->classes};
    d.x = rc ? NULL : malloc((l.n < CHUNK ? l.n : CHUNK) * sample + 1);
    d.y = rc ? NULL : calloc(CHUNK, 1);
    if (!rc && (!d.x || !d.y))
        rc = dt_fail(DT_ERUNTIME, "out of memory");
    for (size_t at = 0; !rc && at < l.n; at += CHUNK) {
        d.n = l.n - at < CHUNK ? l.n - at : CHUNK;
        rc = decode_chunk(p, l.paths + at, d.n, &d);
        if (!rc)
            rc = predict_samples(p, a, &d, l.paths + at, NULL, false);
    }
    free(d.x);
    free(d.y);
    for (size_t i = 0; i < l.n; i++)
        free(l.paths[i]);
    free(l.paths);
    return rc;
}

/* --split: each input is a dataset directory of the checkpoint's format. */
static int predict_split(struct predictor *p, const struct predict_args *a)
{
    int rc = 0;
    for (int i = 0; i < a->ninputs && !rc; i++) {
        struct dt_config cfg = p->cfg;
        snprintf(cfg.data.dir, sizeof cfg.data.dir, "%s", a->inputs[i]);
        struct dt_data data;
        memset(&data, 0, sizeof data);
        rc = dt_run_load_data(&cfg, &data);
        const struct dt_dataset *d = !strcmp(a->split, "train") ? &data.train
                                     : !strcmp(a->split, "val") ? &data.val
                                                                : &data.test;
        if (!rc && d->n == 0)
            rc = dt_fail(DT_EDATA, "%s: no %s split", a->inputs[i], a->split);
        if (!rc && (d->c != p->in.c || d->h != p->in.h || d->w != p->in.w))
            rc = dt_fail(DT_EDATA, "%s: %s samples are %dx%dx%d, the model takes %dx%dx%d",
                         a->inputs[i], a->split, d->c, d->h, d->w, p->in.c, p->in.h, p->in.w);
        char what[1100];
        snprintf(what, sizeof what, "%s:%s", a->inputs[i], a->split);
        if (!rc)
            rc = predict_samples(p, a, d, NULL, what, true);
        dt_data_free(&data);
    }
    return rc;
}

static const char predict_help[] =
    "usage: dtrain predict CHECKPOINT FILE|DIR... [options]\n"
    "\n"
    "Runs a trained model on images: each PNG or JPEG FILE (directories are walked for .png,\n"
    ".jpg and .jpeg, sorted by path) is decoded as the checkpoint's data config says\n"
    "(channels, data.size with cover + centre crop, mean/std) and its top K classes are\n"
    "printed with their probabilities.\n"
    "\n"
    "options:\n"
    "      --top K          classes per image (default 1, at most 64)\n"
    "      --split S        each argument is a dataset directory of the checkpoint's format\n"
    "                       (IDX, CIFAR, image folder): predict its train, test or val split;\n"
    "                       the true label is reported too\n"
    "      --config CFG     the model's config instead of the checkpoint's stored one\n"
    "      --set KEY=VALUE  override a config key (repeatable)\n"
    "      --threads T      compute threads (default: all usable cores)\n" DT_CLI_COMMON_HELP "\n"
    "--json: one object per image on stdout:\n"
    "  {\"file\":..., \"top\":[{\"class\":..., \"index\":..., \"probability\":...}, ...]}\n"
    "\n"
    "exit codes: 0 ok, 2 usage or config error, 3 unreadable image, checkpoint or dataset\n";

static int run_predict(int argc, char **argv)
{
    struct predict_args a;
    memset(&a, 0, sizeof a);
    a.top = 1;
    int rc = parse_args(argc, argv, &a);
    if (rc || a.common.help) {
        if (!rc)
            fputs(predict_help, stdout);
        dt_cli_sets_free(&a.sets);
        return rc;
    }
    dt_cli_apply_log_level(&a.common);
    struct predictor p;
    memset(&p, 0, sizeof p);
    rc = open_model(&p, &a);
    if (rc == 0)
        rc = a.split ? predict_split(&p, &a) : predict_files(&p, &a);
    fflush(stdout);
    if (p.model)
        close_model(&p);
    else
        dt_config_free(&p.cfg);
    dt_cli_sets_free(&a.sets);
    return rc;
}

const struct dt_command dt_cmd_predict = {
    .name = "predict",
    .summary = "classify images with a trained checkpoint",
    .help = predict_help,
    .run = run_predict,
};

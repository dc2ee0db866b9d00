/* `dtrain predict CHECKPOINT FILE...`: a trained model on images. Each PNG or JPEG (directories
 * are walked) is decoded as the checkpoint's data config says (channels, size, mean/std: the
 * same path training batches take), and the top K classes are printed with their
 * probabilities, or one JSON object per image. With --split, each argument is a dataset
 * directory of the checkpoint's format (IDX, CIFAR, image folder) and that split is predicted.
 */
#include <ctype.h>
#include <errno.h>
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

#define PREDICT_USAGE "usage: dtrain predict CHECKPOINT FILE|DIR... [--top K] [--json] [--strict]"
#define BATCH         256
#define MAX_TOP       64

enum { OPT_TOP = DT_OPT_COMMAND_BASE, OPT_SPLIT, OPT_CONFIG, OPT_THREADS, OPT_STRICT };

struct predict_args {
    const char *checkpoint, *split, *config;
    char **inputs;
    int ninputs, top, threads;
    bool strict; /* a bad file fails the run (exit 3) instead of only being reported */
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

/* Files found, in the order they are predicted, and what the walk left out. */
struct file_list {
    char **paths;
    size_t n, cap;
    size_t skipped;   /* files in walked directories with an extension dtrain does not read */
    char exts[8][16]; /* the first few such extensions, for the summary line */
    int nexts;
    bool exts_more; /* more kinds than exts holds */
    /* inputs that gave nothing to predict (missing, no image in it): the input, the error */
    char **bad_input, **bad_error;
    size_t nbad, badcap;
};

/* What was predicted and what was not, over the whole run. */
struct tally {
    size_t good, bad;
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
    case OPT_STRICT:
        a->strict = true;
        return 0;
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
        {"strict", no_argument, NULL, OPT_STRICT},
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
    p->log_probs = p->cfg.loss.type == DT_LOSS_NLL;
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

/* Text output is one line per file, so a name must not be able to end that line or start a
 * forged one: control characters (newline, carriage return, terminal escapes, DEL) are written
 * as C escapes (\n, \r, \t, \xHH) and, when `backslash`, a backslash as \\ so that the
 * escaped form reads back unambiguously. Returns a malloc'd string (NULL when out of memory). */
static bool is_control(unsigned char c)
{
    return c < 0x20 || c == 0x7f; /* not iscntrl: the same bytes in every locale */
}

static char *escape_text(const char *s, bool backslash)
{
    size_t n = 1;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++)
        n += is_control(*c) ? 4 : *c == '\\' && backslash ? 2 : 1;
    char *out = malloc(n), *o = out;
    for (const unsigned char *c = (const unsigned char *)s; out && *c; c++) {
        const char *short_form = *c == '\n'   ? "\\n"
                                 : *c == '\r' ? "\\r"
                                 : *c == '\t' ? "\\t"
                                              : NULL;
        if (short_form)
            o += sprintf(o, "%s", short_form);
        else if (is_control(*c))
            o += sprintf(o, "\\x%02x", *c);
        else if (*c == '\\' && backslash)
            o += sprintf(o, "\\\\");
        else
            *o++ = (char)*c;
    }
    if (out)
        *o = 0;
    return out;
}

/* A class's printed name: the checkpoint's name for it, escaped, or its index. */
static void print_class(const struct predictor *p, int i)
{
    char *name = p->names && p->names[i] ? escape_text(p->names[i], true) : NULL;
    if (name)
        fputs(name, stdout);
    else
        printf("%d", i);
    free(name);
}

static void report(const struct predictor *p, const struct predict_args *a, const char *file,
                   int label, const float *out)
{
    int k = p->model->classes, top = a->top < k ? a->top : k, best[MAX_TOP];
    double *prob = p->prob;
    char buf[32];
    probabilities(p, out, prob);
    top_k(prob, k, top, best);
    if (!a->common.json) {
        char *shown = escape_text(file, true);
        fputs(shown ? shown : "?", stdout);
        free(shown);
        for (int t = 0; t < top; t++) {
            fputs(t ? ", " : "  ", stdout);
            print_class(p, best[t]);
            printf(" %.2f%%", 100 * prob[best[t]]);
        }
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
        if (p->names && p->names[best[t]])
            dt_jw_str(&list, "class", p->names[best[t]]);
        else
            snprintf(buf, sizeof buf, "%d", best[t]), dt_jw_str(&list, "class", buf);
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

/* ---- bad inputs ---- */

/* A file that could not be predicted: one line on stderr (control characters escaped, so a
 * crafted name cannot forge lines there either) and, with --json, a record in its place among
 * the predictions. The run goes on. */
static void report_bad(const struct predict_args *a, const char *file, const char *error,
                       struct tally *t)
{
    char *line = escape_text(error, false);
    dt_log_error("%s", line ? line : "(out of memory)");
    free(line);
    t->bad++;
    if (!a->common.json)
        return;
    struct dt_json_writer w;
    dt_jw_begin(&w, NULL);
    dt_jw_str(&w, "file", file);
    dt_jw_str(&w, "error", error);
    dt_jw_end(&w, stdout);
}

/* ---- running the model over samples ---- */

/* Predicts d's samples [0, n) in batches; names[i] labels sample i (or "<what>#i"). A sample
 * with errors[i] set could not be decoded: its error is reported in its place instead. */
static int predict_samples(struct predictor *p, const struct predict_args *a,
                           const struct dt_dataset *d, char *const *names, char *const *errors,
                           const char *what, bool labels, struct tally *t)
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
            char name[1200];
            if (names)
                snprintf(name, sizeof name, "%s", names[s]);
            else
                snprintf(name, sizeof name, "%s#%zu", what ? what : "", s);
            if (errors && errors[s]) {
                report_bad(a, name, errors[s], t);
                continue;
            }
            report(p, a, name, labels ? d->y[s] : -1,
                   p->model->output + (size_t)i * p->model->classes);
            t->good++;
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

static int push(char ***items, size_t *n, size_t *cap, const char *s)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 64;
        char **more = realloc(*items, c * sizeof *more);
        if (!more)
            return dt_fail(DT_ERUNTIME, "out of memory listing files");
        *items = more, *cap = c;
    }
    if (!((*items)[*n] = strdup(s)))
        return dt_fail(DT_ERUNTIME, "out of memory listing files");
    (*n)++;
    return 0;
}

static int list_add(struct file_list *l, const char *path)
{
    return push(&l->paths, &l->n, &l->cap, path);
}

/* An input that gave no file to predict (missing, a directory without images). */
static int list_bad(struct file_list *l, const char *input, const char *message)
{
    size_t n = l->nbad, cap = l->badcap;
    int rc = push(&l->bad_input, &n, &cap, input);
    if (!rc)
        rc = push(&l->bad_error, &l->nbad, &l->badcap, message);
    return rc;
}

/* A file a walk passed over for its extension: counted, and its extension remembered for the
 * summary line (".gif", or "no extension"). */
static void list_skip(struct file_list *l, const char *base)
{
    l->skipped++;
    const char *dot = strrchr(base, '.');
    const char *ext = dot && dot != base ? dot : "no extension";
    char e[16];
    snprintf(e, sizeof e, "%s", ext);
    for (char *c = e; *c; c++)
        *c = is_control((unsigned char)*c) ? '?' : (char)tolower((unsigned char)*c);
    for (int i = 0; i < l->nexts; i++)
        if (!strcmp(l->exts[i], e))
            return;
    if (l->nexts < (int)(sizeof l->exts / sizeof l->exts[0]))
        memcpy(l->exts[l->nexts++], e, sizeof e);
    else
        l->exts_more = true;
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
    if (type != FTW_F && type != FTW_SL)
        return 0;
    if (is_image_name(path))
        return list_add(walking, path) ? FTW_STOP : 0;
    list_skip(walking, base);
    return 0;
}

static int compare_paths(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* FILE arguments as given; directories walked (symlinks not followed, so no loop), their
 * images sorted by path. An input that yields nothing is recorded in l->bad, not fatal. */
static int collect_files(const struct predict_args *a, struct file_list *l)
{
    for (int i = 0; i < a->ninputs; i++) {
        struct stat st;
        char msg[1100];
        if (stat(a->inputs[i], &st) != 0) {
            snprintf(msg, sizeof msg, "%s: no such file or directory", a->inputs[i]);
            if (list_bad(l, a->inputs[i], msg))
                return -DT_ERUNTIME;
            continue;
        }
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
        if (rc == FTW_STOP)
            return -DT_ERUNTIME;
        if (rc < 0)
            snprintf(msg, sizeof msg, "%s: cannot walk the directory: %s", a->inputs[i],
                     strerror(errno));
        else if (l->n == first)
            snprintf(msg, sizeof msg, "%s: no .png, .jpg or .jpeg image in it", a->inputs[i]);
        if ((rc < 0 || l->n == first) && list_bad(l, a->inputs[i], msg))
            return -DT_ERUNTIME;
        /* Nothing listed from it: l->paths may still be NULL, which is no qsort argument. */
        if (l->n > first)
            qsort(l->paths + first, l->n - first, sizeof *l->paths, compare_paths);
    }
    return 0;
}

static void list_free(struct file_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->paths[i]);
    for (size_t i = 0; i < l->nbad; i++)
        free(l->bad_input[i]), free(l->bad_error[i]);
    free(l->paths);
    free(l->bad_input);
    free(l->bad_error);
}

/* "skipped 3 files with unsupported extensions (.gif, .txt); dtrain reads .png, .jpg, .jpeg" */
static int compare_exts(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void report_skipped(struct file_list *l)
{
    if (!l->skipped)
        return;
    qsort(l->exts, (size_t)l->nexts, sizeof l->exts[0], compare_exts); /* not the walk's order */
    char exts[200] = "";
    size_t len = 0;
    for (int i = 0; i < l->nexts && len < sizeof exts; i++)
        len += (size_t)snprintf(exts + len, sizeof exts - len, "%s%s", i ? ", " : "", l->exts[i]);
    dt_log_warn("skipped %zu file%s with unsupported extensions (%s%s); dtrain reads .png, .jpg, "
                ".jpeg",
                l->skipped, l->skipped == 1 ? "" : "s", exts, l->exts_more ? ", ..." : "");
}

/* Decodes files [0, n) into d (uint8 CHW, the model's shape), on every core. A file that fails
 * gets its error in errors[i] (malloc'd) and zero pixels; the others are unaffected. */
static int decode_chunk(const struct predictor *p, char *const *paths, size_t n,
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

static int predict_files(struct predictor *p, const struct predict_args *a, struct tally *t)
{
    struct file_list l;
    memset(&l, 0, sizeof l);
    int rc = collect_files(a, &l);
    report_skipped(&l);
    /* One input and nothing to predict: its error is the run's error, one line. */
    if (!rc && l.n == 0 && l.nbad == 1) {
        rc = dt_fail(DT_EDATA, "%s", l.bad_error[0]);
        t->bad++;
    }
    for (size_t i = 0; !rc && i < l.nbad; i++)
        report_bad(a, l.bad_input[i], l.bad_error[i], t);
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
            t->bad++;
        }
        if (!rc)
            rc = predict_samples(p, a, &d, l.paths + at, errors, NULL, false, t);
        for (size_t i = 0; i < d.n; i++)
            free(errors[i]), errors[i] = NULL;
    }
    free(errors);
    free(d.x);
    free(d.y);
    list_free(&l);
    return rc;
}

/* --split: each input is a dataset directory of the checkpoint's format. */
static int predict_split(struct predictor *p, const struct predict_args *a, struct tally *t)
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
            rc = predict_samples(p, a, d, NULL, NULL, what, true, t);
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
    "      --threads T      compute threads (default: all usable cores)\n"
    "      --strict         exit 3 when any file could not be read (the others are still\n"
    "                       predicted)\n" DT_CLI_COMMON_HELP "\n"
    "A file that cannot be read (corrupt, truncated, missing) is reported on stderr, one line\n"
    "each, and the others are predicted. In walked directories, files whose extension is not\n"
    ".png, .jpg or .jpeg are skipped, and one line says how many. In text output, control\n"
    "characters and backslashes in names are written as C escapes (\\n, \\x1b, \\\\).\n"
    "\n"
    "--json: one object per image on stdout:\n"
    "  {\"file\":..., \"top\":[{\"class\":..., \"index\":..., \"probability\":...}, ...]}\n"
    "and one {\"file\":..., \"error\":...} in the place of each file that could not be read.\n"
    "\n"
    "exit codes: 0 ok (bad files reported), 2 usage or config error, 3 unreadable checkpoint or\n"
    "dataset, no file could be read, or --strict and a file could not be read\n";

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
    struct tally t = {0, 0};
    if (rc == 0)
        rc = a.split ? predict_split(&p, &a, &t) : predict_files(&p, &a, &t);
    if (rc == 0 && t.bad && !t.good)
        rc = dt_fail(DT_EDATA, "predict: none of the %zu inputs could be read", t.bad);
    else if (rc == 0 && t.bad && a.strict)
        rc = dt_fail(DT_EDATA, "predict: %zu of %zu inputs could not be read (--strict)", t.bad,
                     t.bad + t.good);
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

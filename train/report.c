/* `dtrain report` (see report.h): run directories -> series -> charts -> SVG and PNG. */
#include "train/report.h"

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/chart.h"
#include "train/metrics_csv.h"
#include "train/tfevents.h"
#include "util/draw.h"
#include "util/err.h"
#include "util/fileio.h"
#include "util/log.h"

enum { CHART_W = 860, CHART_H = 500 };

struct run_metrics {
    char dir[1024], name[256];
    struct dt_metrics m;
    const struct dt_metrics_row *best; /* the best epoch's row, or NULL */
};

static int ignore_event(void *ctx, const struct dt_tf_event *e)
{
    (void)e;
    ++*(long *)ctx;
    return 0;
}

/* Every TensorBoard file of the run, CRCs checked: what `report` promises about them. */
static int check_tfevents(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return dt_fail(DT_EDATA, "%s: cannot list: %s", dir, strerror(errno));
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d));) {
        if (strncmp(e->d_name, "events.out.tfevents.", 20))
            continue;
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        long events = 0;
        bool torn = false;
        rc = dt_tfevents_read(path, ignore_event, &events, &torn);
        if (rc == 0 && torn)
            dt_log_warn("%s: the last record is cut short (a crash mid-write); the %ld before "
                        "it are read",
                        path, events);
    }
    closedir(d);
    return rc;
}

static int load_run(const char *dir, struct run_metrics *r)
{
    memset(r, 0, sizeof *r);
    snprintf(r->dir, sizeof r->dir, "%s", dir);
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", dir);
    size_t n = strlen(tmp);
    while (n > 1 && tmp[n - 1] == '/')
        tmp[--n] = '\0';
    snprintf(r->name, sizeof r->name, "%s", basename(tmp));
    struct stat st;
    if (stat(dir, &st) != 0)
        return dt_fail(DT_EDATA, "%s: no such run directory", dir);
    if (!S_ISDIR(st.st_mode))
        return dt_fail(DT_EDATA, "%s: not a directory (report takes a run directory)", dir);
    char path[1200];
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    if (access(path, F_OK) != 0)
        return dt_fail(DT_EDATA, "%s: no metrics.csv (not a run directory of this dtrain)", dir);
    int rc = dt_metrics_csv_read(path, &r->m);
    if (rc)
        return rc;
    if (r->m.torn)
        dt_log_warn("%s: the last line is cut short (a crash mid-write); left out", path);
    size_t rows = 0;
    for (size_t i = 0; i < r->m.n; i++) {
        const struct dt_metrics_row *row = &r->m.rows[i];
        rows += row->kind != DT_ROW_RESUME;
        if (row->kind == DT_ROW_EPOCH && row->has[DT_M_BEST] && row->v[DT_M_BEST] > 0)
            r->best = row;
    }
    if (rows == 0)
        return dt_fail(DT_EDATA, "%s: no step or epoch logged yet", path);
    return check_tfevents(dir);
}

/* The epoch rows, the last of each epoch only (a run stopped inside an epoch reported it
 * partly; the resumed run reports it whole). */
static bool latest_of_epoch(const struct dt_metrics *m, size_t i)
{
    for (size_t j = i + 1; j < m->n; j++)
        if (m->rows[j].kind == DT_ROW_EPOCH && m->rows[j].v[DT_M_EPOCH] == m->rows[i].v[DT_M_EPOCH])
            return false;
    return true;
}

/* A series of column y against column x over the rows of kind. */
static void add_series(struct dt_chart *c, const struct run_metrics *r, bool prefix,
                       const char *name, uint32_t color, double width, enum dt_metrics_kind kind,
                       enum dt_metric x, enum dt_metric y)
{
    if (c->nseries == DT_CHART_MAX_SERIES)
        return;
    struct dt_series *s = &c->series[c->nseries++];
    memset(s, 0, sizeof *s);
    if (prefix)
        snprintf(s->name, sizeof s->name, "%.40s:%s", r->name, name);
    else
        snprintf(s->name, sizeof s->name, "%s", name);
    s->color = color;
    s->width = width;
    s->x = malloc((r->m.n + 1) * sizeof(double));
    s->y = malloc((r->m.n + 1) * sizeof(double));
    if (!s->x || !s->y)
        return; /* n stays 0: drawn as "(no data)" */
    for (size_t i = 0; i < r->m.n; i++) {
        const struct dt_metrics_row *row = &r->m.rows[i];
        if (row->kind != kind || !row->has[x] || !row->has[y])
            continue;
        if (kind == DT_ROW_EPOCH && !latest_of_epoch(&r->m, i))
            continue;
        s->x[s->n] = row->v[x];
        s->y[s->n++] = row->v[y];
    }
}

static bool has_rows(const struct run_metrics *r, enum dt_metrics_kind kind, enum dt_metric y)
{
    for (size_t i = 0; i < r->m.n; i++)
        if (r->m.rows[i].kind == kind && r->m.rows[i].has[y])
            return true;
    return false;
}

enum chart_kind { C_LOSS, C_ACC, C_LR, C_LOSS_EPOCH, C_ACC_EPOCH, C_COUNT };

static const struct chart_spec {
    const char *file, *title, *ylabel;
    bool by_epoch;
    enum dt_metric train, val, test; /* val, test = DT_M_COUNT: none */
} charts[C_COUNT] = {
    {"loss", "loss", "loss", false, DT_M_TRAIN_LOSS, DT_M_VAL_LOSS, DT_M_TEST_LOSS},
    {"accuracy", "accuracy", "accuracy", false, DT_M_TRAIN_ACC, DT_M_VAL_ACC, DT_M_TEST_ACC},
    {"lr", "learning rate", "lr", false, DT_M_LR, DT_M_COUNT, DT_M_COUNT},
    {"loss_epoch", "loss per epoch", "loss", true, DT_M_TRAIN_LOSS, DT_M_VAL_LOSS, DT_M_TEST_LOSS},
    {"accuracy_epoch", "accuracy per epoch", "accuracy", true, DT_M_TRAIN_ACC, DT_M_VAL_ACC,
     DT_M_TEST_ACC},
};

/* The best epoch on a chart: on the score the rule used when the chart shows it, else on the
 * first series drawn at that epoch. */
static void mark_best(struct dt_chart *c, const struct chart_spec *spec,
                      const struct run_metrics *r, bool prefix, uint32_t color)
{
    const struct dt_metrics_row *b = r->best;
    if (!b || c->nmarks == DT_CHART_MAX_MARKS)
        return;
    bool on_val = b->has[DT_M_VAL_ACC];
    enum dt_metric y = spec->train == DT_M_LR ? DT_M_LR : on_val ? spec->val : spec->train;
    if (!b->has[y])
        y = spec->train;
    if (!b->has[y])
        return;
    struct dt_chart_mark *mk = &c->marks[c->nmarks++];
    mk->x = spec->by_epoch ? b->v[DT_M_EPOCH] : b->v[DT_M_STEP];
    mk->y = b->v[y];
    mk->color = color;
    /* a long run name is cut so the label keeps its "best: epoch" part */
    snprintf(mk->label, sizeof mk->label, "%.40s%sbest: epoch %.0f (%s)", prefix ? r->name : "",
             prefix ? " " : "", b->v[DT_M_EPOCH], on_val ? "val accuracy" : "train loss");
}

static void build_chart(struct dt_chart *c, const struct chart_spec *spec,
                        const struct run_metrics *runs, int nruns)
{
    memset(c, 0, sizeof *c);
    bool compare = nruns > 1;
    snprintf(c->title, sizeof c->title, "%s%s%s", spec->title, compare ? ": " : "",
             compare ? "compared" : "");
    if (!compare)
        snprintf(c->title, sizeof c->title, "%s: %.60s", spec->title, runs[0].name);
    c->xlabel = spec->by_epoch ? "epoch" : "step";
    c->ylabel = spec->ylabel;
    enum dt_metric x = spec->by_epoch ? DT_M_EPOCH : DT_M_STEP;
    for (int i = 0; i < nruns; i++) {
        const struct run_metrics *r = &runs[i];
        int base = compare ? 3 * i : 0;
        /* train against the step: the step rows when the run logged steps */
        enum dt_metrics_kind tk =
            !spec->by_epoch && has_rows(r, DT_ROW_STEP, spec->train) ? DT_ROW_STEP : DT_ROW_EPOCH;
        add_series(c, r, compare, dt_metric_name(spec->train), dt_chart_color(base), 1.5, tk, x,
                   spec->train);
        if (spec->val != DT_M_COUNT && has_rows(r, DT_ROW_EPOCH, spec->val))
            add_series(c, r, compare, dt_metric_name(spec->val), dt_chart_color(base + 1), 2.5,
                       DT_ROW_EPOCH, x, spec->val);
        if (spec->test != DT_M_COUNT)
            add_series(c, r, compare, dt_metric_name(spec->test), dt_chart_color(base + 2), 2.5,
                       DT_ROW_EPOCH, x, spec->test);
        mark_best(c, spec, r, compare, compare ? dt_chart_color(base) : 0x9b1c1c);
    }
}

static void free_chart(struct dt_chart *c)
{
    for (int s = 0; s < c->nseries; s++) {
        free(c->series[s].x);
        free(c->series[s].y);
    }
}

static int write_chart(const struct dt_chart *c, const char *out, const char *file, bool compare,
                       struct dt_report_result *res)
{
    struct dt_drawing d;
    dt_chart_draw(c, CHART_W, CHART_H, &d);
    int rc = 0;
    for (int fmt = 0; fmt < 2 && rc == 0; fmt++) {
        if (res->nfiles == DT_REPORT_MAX_FILES)
            break;
        char *path = res->files[res->nfiles];
        snprintf(path, sizeof res->files[0], "%s/%s%s.%s", out, compare ? "compare_" : "", file,
                 fmt ? "png" : "svg");
        rc = fmt ? dt_draw_write_png(&d, path) : dt_draw_write_svg(&d, path);
        if (rc == 0)
            res->nfiles++;
    }
    dt_draw_free(&d);
    return rc;
}

int dt_report(const struct dt_report_opts *o, struct dt_report_result *res)
{
    memset(res, 0, sizeof *res);
    if (o->ndirs < 1 || o->ndirs > DT_REPORT_MAX_RUNS)
        return dt_fail(DT_EUSAGE, "report: 1 to %d run directories, not %d", DT_REPORT_MAX_RUNS,
                       o->ndirs);
    struct run_metrics *runs = calloc((size_t)o->ndirs, sizeof *runs);
    if (!runs)
        return dt_fail(DT_ERUNTIME, "report: out of memory");
    int rc = 0;
    for (int i = 0; i < o->ndirs && rc == 0; i++)
        rc = load_run(o->dirs[i], &runs[i]);
    const char *out = o->out_dir ? o->out_dir : o->dirs[0];
    if (rc == 0 && o->out_dir)
        rc = dt_mkdir_p(o->out_dir);
    for (int k = 0; k < C_COUNT && rc == 0; k++) {
        struct dt_chart c;
        build_chart(&c, &charts[k], runs, o->ndirs);
        rc = write_chart(&c, out, charts[k].file, o->ndirs > 1, res);
        free_chart(&c);
    }
    for (int i = 0; i < o->ndirs && rc == 0; i++) {
        struct dt_report_best *b = &res->best[res->nruns++];
        snprintf(b->run, sizeof b->run, "%s", runs[i].dir);
        if (!runs[i].best)
            continue;
        bool on_val = runs[i].best->has[DT_M_VAL_ACC];
        b->epoch = (long long)runs[i].best->v[DT_M_EPOCH];
        b->step = (long long)runs[i].best->v[DT_M_STEP];
        b->metric = on_val ? "val_accuracy" : "train_loss";
        b->score = runs[i].best->v[on_val ? DT_M_VAL_ACC : DT_M_TRAIN_LOSS];
    }
    for (int i = 0; i < o->ndirs; i++)
        dt_metrics_free(&runs[i].m);
    free(runs);
    return rc;
}

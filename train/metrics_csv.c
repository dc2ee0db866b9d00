/* metrics.csv (see metrics_csv.h): the row format shared by the run history that writes it
 * and `dtrain report` that reads it. */
#include "train/metrics_csv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/fileio.h"

static const char *const names[DT_M_COUNT] = {
    [DT_M_STEP] = "step",
    [DT_M_EPOCH] = "epoch",
    [DT_M_LR] = "lr",
    [DT_M_TRAIN_LOSS] = "train_loss",
    [DT_M_TRAIN_ACC] = "train_accuracy",
    [DT_M_VAL_LOSS] = "val_loss",
    [DT_M_VAL_ACC] = "val_accuracy",
    [DT_M_TEST_LOSS] = "test_loss",
    [DT_M_TEST_ACC] = "test_accuracy",
    [DT_M_SAMPLES_PER_S] = "samples_per_s",
    [DT_M_SECONDS] = "seconds",
    [DT_M_TRAIN_STEPS] = "train_steps",
    [DT_M_RESUMED_AT] = "resumed_at",
    [DT_M_BEST] = "best",
};
_Static_assert(sizeof names / sizeof names[0] == DT_M_COUNT, "a name for every metric");

static const char *const kinds[] = {
    [DT_ROW_STEP] = "step", [DT_ROW_EPOCH] = "epoch", [DT_ROW_RESUME] = "resume"};

const char *dt_metric_name(enum dt_metric m)
{
    return names[m];
}

const char *dt_metrics_csv_header(void)
{
    static char header[400];
    if (!header[0]) {
        size_t n = (size_t)snprintf(header, sizeof header, "kind");
        for (int i = 0; i < DT_M_COUNT; i++)
            n += (size_t)snprintf(header + n, sizeof header - n, ",%s", names[i]);
        snprintf(header + n, sizeof header - n, "\n");
    }
    return header;
}

size_t dt_metrics_csv_format(const struct dt_metrics_row *r, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s", kinds[r->kind]);
    for (int i = 0; i < DT_M_COUNT && n >= 0 && (size_t)n < size; i++) {
        bool whole = i == DT_M_STEP || i == DT_M_EPOCH || i == DT_M_TRAIN_STEPS ||
                     i == DT_M_RESUMED_AT || i == DT_M_BEST;
        if (!r->has[i] || !isfinite(r->v[i]))
            n += snprintf(buf + n, size - (size_t)n, ",");
        else if (whole)
            n += snprintf(buf + n, size - (size_t)n, ",%lld", (long long)r->v[i]);
        else
            n += snprintf(buf + n, size - (size_t)n, ",%.9g", r->v[i]);
    }
    if (n < 0 || (size_t)n + 2 > size)
        return 0;
    buf[n++] = '\n';
    buf[n] = '\0';
    return (size_t)n;
}

/* Splits line at commas in place; the number of cells (at most max). */
static int split(char *line, char **cells, int max)
{
    int n = 0;
    for (char *c = line;;) {
        if (n < max)
            cells[n] = c;
        n++;
        char *comma = strchr(c, ',');
        if (!comma)
            break;
        *comma = '\0';
        c = comma + 1;
    }
    return n < max ? n : max;
}

/* Where each known column sits in this file's header (-1: absent). */
static int read_header(const char *path, char *line, int *col, int *kind_col)
{
    char *cells[64];
    int n = split(line, cells, 64);
    *kind_col = -1;
    for (int m = 0; m < DT_M_COUNT; m++)
        col[m] = -1;
    for (int i = 0; i < n; i++) {
        if (!strcmp(cells[i], "kind"))
            *kind_col = i;
        for (int m = 0; m < DT_M_COUNT; m++)
            if (!strcmp(cells[i], names[m]))
                col[m] = i;
    }
    if (*kind_col < 0 || col[DT_M_STEP] < 0)
        return dt_fail(DT_EDATA, "%s: line 1: not a metrics.csv header (expected %.40s...)", path,
                       dt_metrics_csv_header());
    return 0;
}

static int parse_row(const char *path, size_t lineno, char *line, const int *col, int kind_col,
                     struct dt_metrics_row *r)
{
    char *cells[64];
    int n = split(line, cells, 64);
    memset(r, 0, sizeof *r);
    if (kind_col >= n)
        return dt_fail(DT_EDATA, "%s: line %zu: no kind cell", path, lineno);
    int k = 0;
    while (k < 3 && strcmp(cells[kind_col], kinds[k]))
        k++;
    if (k == 3)
        return dt_fail(DT_EDATA, "%s: line %zu: kind \"%.20s\" is not step, epoch or resume", path,
                       lineno, cells[kind_col]);
    r->kind = (enum dt_metrics_kind)k;
    for (int m = 0; m < DT_M_COUNT; m++) {
        if (col[m] < 0 || col[m] >= n || !cells[col[m]][0])
            continue;
        char *end;
        r->v[m] = strtod(cells[col[m]], &end);
        if (*end || !isfinite(r->v[m]))
            return dt_fail(DT_EDATA, "%s: line %zu: %s \"%.20s\" is not a number", path, lineno,
                           names[m], cells[col[m]]);
        r->has[m] = true;
    }
    if (!r->has[DT_M_STEP])
        return dt_fail(DT_EDATA, "%s: line %zu: no step", path, lineno);
    return 0;
}

/* A resume at step S: the rows of the earlier attempt past S are superseded. */
static void apply_resume(struct dt_metrics *m, double step)
{
    size_t keep = 0;
    for (size_t i = 0; i < m->n; i++)
        if (!(m->rows[i].v[DT_M_STEP] > step))
            m->rows[keep++] = m->rows[i];
    m->n = keep;
}

int dt_metrics_csv_read(const char *path, struct dt_metrics *m)
{
    memset(m, 0, sizeof *m);
    char *text;
    size_t len;
    int rc = dt_read_file(path, &text, &len);
    if (rc)
        return rc;
    if (len == 0) {
        free(text);
        return dt_fail(DT_EDATA, "%s: empty (no header)", path);
    }
    if (text[len - 1] != '\n') { /* the last row's write was cut: leave it out */
        m->torn = true;
        while (len > 0 && text[len - 1] != '\n')
            len--;
    }
    text[len] = '\0';
    int col[DT_M_COUNT], kind_col = -1;
    size_t cap = 0, lineno = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line && rc == 0;
         line = strtok_r(NULL, "\n", &save)) {
        if (++lineno == 1) {
            rc = read_header(path, line, col, &kind_col);
            continue;
        }
        if (m->n == cap) {
            cap = cap ? 2 * cap : 256;
            void *p = realloc(m->rows, cap * sizeof *m->rows);
            if (!p) {
                rc = dt_fail(DT_ERUNTIME, "%s: out of memory", path);
                break;
            }
            m->rows = p;
        }
        struct dt_metrics_row r;
        if ((rc = parse_row(path, lineno, line, col, kind_col, &r)))
            break;
        if (r.kind == DT_ROW_RESUME)
            apply_resume(m, r.v[DT_M_STEP]);
        m->rows[m->n++] = r;
    }
    if (rc == 0 && lineno == 0)
        rc = dt_fail(DT_EDATA, "%s: empty (no header)", path);
    free(text);
    if (rc)
        dt_metrics_free(m);
    return rc;
}

void dt_metrics_free(struct dt_metrics *m)
{
    free(m->rows);
    memset(m, 0, sizeof *m);
}

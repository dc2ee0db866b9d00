/* A benchmark's result table and its three textual forms: an aligned text table for people,
 * JSON lines for pipelines (the convention of every --json in dtrain: one object per line,
 * "event" first), CSV for spreadsheets. A failed row keeps its label cells and carries its
 * error instead of numbers, so a sweep with a crashed combination still reads as a whole.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/bench/bench.h"
#include "util/err.h"
#include "util/json.h"

void dt_bench_table_init(struct dt_bench_table *t, const char *event,
                         const struct dt_bench_col *cols, int ncols)
{
    memset(t, 0, sizeof *t);
    t->event = event;
    t->cols = cols;
    t->ncols = ncols;
    t->label_cols = 1;
    t->plot_label_col = -1;
    t->lo_col = t->hi_col = -1;
}

int dt_bench_table_add(struct dt_bench_table *t, const struct dt_bench_cell *cells,
                       const char *error)
{
    if (t->rows == t->cap) {
        int cap = t->cap ? 2 * t->cap : 16;
        struct dt_bench_cell *c = realloc(t->cells, (size_t)cap * t->ncols * sizeof *c);
        if (!c)
            return dt_fail(DT_ERUNTIME, "out of memory");
        t->cells = c;
        char **e = realloc(t->errors, (size_t)cap * sizeof *e);
        if (!e)
            return dt_fail(DT_ERUNTIME, "out of memory");
        t->errors = e;
        t->cap = cap;
    }
    memcpy(t->cells + (size_t)t->rows * t->ncols, cells, (size_t)t->ncols * sizeof *cells);
    t->errors[t->rows] = error ? strdup(error) : NULL;
    if (error && !t->errors[t->rows])
        return dt_fail(DT_ERUNTIME, "out of memory");
    t->rows++;
    return 0;
}

void dt_bench_table_free(struct dt_bench_table *t)
{
    for (int i = 0; i < t->rows; i++)
        free(t->errors[i]);
    free(t->errors);
    free(t->cells);
    memset(t, 0, sizeof *t);
}

static void format_cell(const struct dt_bench_col *col, const struct dt_bench_cell *c, char *buf,
                        size_t cap)
{
    if (c->missing || (col->kind != DT_BENCH_STR && !isfinite(c->num)))
        snprintf(buf, cap, "-");
    else if (col->kind == DT_BENCH_STR)
        snprintf(buf, cap, "%s", c->str ? c->str : "");
    else if (col->kind == DT_BENCH_INT)
        snprintf(buf, cap, col->fmt ? col->fmt : "%lld", (long long)c->num);
    else
        snprintf(buf, cap, col->fmt ? col->fmt : "%g", c->num);
}

void dt_bench_table_print_text(const struct dt_bench_table *t, FILE *out)
{
    int width[32] = {0};
    char buf[128];
    int ncols = t->ncols < 32 ? t->ncols : 32;
    for (int j = 0; j < ncols; j++)
        width[j] = (int)strlen(t->cols[j].head);
    for (int i = 0; i < t->rows; i++)
        for (int j = 0; j < ncols; j++) {
            format_cell(&t->cols[j], &t->cells[(size_t)i * t->ncols + j], buf, sizeof buf);
            if (j < t->label_cols || !t->errors[i])
                width[j] = width[j] > (int)strlen(buf) ? width[j] : (int)strlen(buf);
        }
    for (int j = 0; j < ncols; j++)
        if (!t->cols[j].text_hidden)
            fprintf(out, "%s%*s", j ? "  " : "", width[j], t->cols[j].head);
    fputc('\n', out);
    for (int i = 0; i < t->rows; i++) {
        for (int j = 0; j < ncols; j++) {
            if (t->errors[i] && j >= t->label_cols) {
                fprintf(out, "  FAILED: %s", t->errors[i]);
                break;
            }
            if (t->cols[j].text_hidden)
                continue;
            format_cell(&t->cols[j], &t->cells[(size_t)i * t->ncols + j], buf, sizeof buf);
            fprintf(out, "%s%*s", j ? "  " : "", width[j], buf);
        }
        fputc('\n', out);
    }
    fflush(out);
}

void dt_bench_table_print_json(const struct dt_bench_table *t, FILE *out)
{
    for (int i = 0; i < t->rows; i++) {
        struct dt_json_writer w;
        dt_jw_begin(&w, t->event);
        for (int j = 0; j < t->ncols; j++) {
            const struct dt_bench_col *col = &t->cols[j];
            const struct dt_bench_cell *c = &t->cells[(size_t)i * t->ncols + j];
            if (c->missing || (t->errors[i] && j >= t->label_cols))
                dt_jw_raw(&w, col->key, "null");
            else if (col->kind == DT_BENCH_STR)
                dt_jw_str(&w, col->key, c->str ? c->str : "");
            else if (col->kind == DT_BENCH_INT)
                dt_jw_int(&w, col->key, (long long)c->num);
            else
                dt_jw_num(&w, col->key, c->num);
        }
        dt_jw_bool(&w, "ok", t->errors[i] == NULL);
        if (t->errors[i])
            dt_jw_str(&w, "error", t->errors[i]);
        dt_jw_end(&w, out);
    }
    fflush(out);
}

/* RFC 4180: quote a field holding a comma, quote or line break; double the quotes. */
static void csv_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

int dt_bench_table_write_csv(const struct dt_bench_table *t, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return dt_fail(DT_ERUNTIME, "%s: cannot write the CSV file: %m", path);
    char buf[128];
    for (int j = 0; j < t->ncols; j++) {
        fputs(j ? "," : "", f);
        csv_field(f, t->cols[j].key);
    }
    fputs(",error\n", f);
    for (int i = 0; i < t->rows; i++) {
        for (int j = 0; j < t->ncols; j++) {
            const struct dt_bench_col *col = &t->cols[j];
            const struct dt_bench_cell *c = &t->cells[(size_t)i * t->ncols + j];
            fputs(j ? "," : "", f);
            if (c->missing || (t->errors[i] && j >= t->label_cols) ||
                (col->kind != DT_BENCH_STR && !isfinite(c->num)))
                continue;
            if (col->kind == DT_BENCH_STR)
                csv_field(f, c->str ? c->str : "");
            else if (col->kind == DT_BENCH_INT)
                fprintf(f, "%lld", (long long)c->num);
            else {
                snprintf(buf, sizeof buf, "%.6g", c->num);
                fputs(buf, f);
            }
        }
        fputc(',', f);
        csv_field(f, t->errors[i] ? t->errors[i] : "");
        fputc('\n', f);
    }
    if (fclose(f) != 0)
        return dt_fail(DT_ERUNTIME, "%s: writing the CSV file failed: %m", path);
    return 0;
}

int dt_bench_emit(const struct dt_bench_table *t, const struct dt_bench_machine *m,
                  const struct dt_bench_output *o, const char *what, const char *title)
{
    if (o->json) {
        dt_bench_machine_print(m, stdout, true, what);
        dt_bench_table_print_json(t, stdout);
    } else {
        dt_bench_machine_print(m, stdout, false, what);
        dt_bench_table_print_text(t, stdout);
    }
    int rc = 0;
    if (o->csv && (rc = dt_bench_table_write_csv(t, o->csv)))
        return rc;
    if (o->plot) {
        char sub[400];
        snprintf(sub, sizeof sub, "%s, %d core%s, %s", m->cpu, m->cores, m->cores == 1 ? "" : "s",
                 what);
        rc = dt_bench_table_write_svg(t, o->plot, title, sub);
    }
    return rc;
}

/* How predictions are shown: one text line per sample ("FILE  class 97.12%, ...") or one JSON
 * object per sample, and the bad inputs in their place. Names from disk and from the
 * checkpoint are escaped in text so that none can end a line or start a forged one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/loss.h"
#include "train/predict_run.h"
#include "util/json.h"
#include "util/log.h"

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
static void print_class(const struct dt_predictor *p, int i)
{
    char *name = p->names && p->names[i] ? escape_text(p->names[i], true) : NULL;
    if (name)
        fputs(name, stdout);
    else
        printf("%d", i);
    free(name);
}

static void report_text(const struct dt_predictor *p, const char *file, const int *best, int top)
{
    char *shown = escape_text(file, true);
    fputs(shown ? shown : "?", stdout);
    free(shown);
    for (int t = 0; t < top; t++) {
        fputs(t ? ", " : "  ", stdout);
        print_class(p, best[t]);
        printf(" %.2f%%", 100 * p->prob[best[t]]);
    }
    printf("\n");
}

static void report_json(const struct dt_predictor *p, const char *file, int label, const int *best,
                        int top)
{
    struct dt_json_writer w, list;
    memset(&list, 0, sizeof list);
    char *items = NULL, buf[32];
    size_t len = 0;
    FILE *f = open_memstream(&items, &len);
    for (int t = 0; f && t < top; t++) {
        dt_jw_begin(&list, NULL);
        if (p->names && p->names[best[t]])
            dt_jw_str(&list, "class", p->names[best[t]]);
        else
            snprintf(buf, sizeof buf, "%d", best[t]), dt_jw_str(&list, "class", buf);
        dt_jw_int(&list, "index", best[t]);
        dt_jw_num(&list, "probability", p->prob[best[t]]);
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

void dt_predict_report(struct dt_predictor *p, const char *file, int label, const float *out)
{
    int k = p->model->classes, top = p->o->top < k ? p->o->top : k, best[DT_PREDICT_MAX_TOP];
    dt_loss_probabilities(p->model->loss, out, k, p->prob);
    top_k(p->prob, k, top, best);
    if (p->o->json)
        report_json(p, file, label, best, top);
    else
        report_text(p, file, best, top);
    p->good++;
}

void dt_predict_report_bad(struct dt_predictor *p, const char *file, const char *error)
{
    char *line = escape_text(error, false);
    dt_log_error("%s", line ? line : "(out of memory)");
    free(line);
    p->bad++;
    if (!p->o->json)
        return;
    struct dt_json_writer w;
    dt_jw_begin(&w, NULL);
    dt_jw_str(&w, "file", file);
    dt_jw_str(&w, "error", error);
    dt_jw_end(&w, stdout);
}

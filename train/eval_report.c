/* eval's text report and JSON object (see eval_report.h). */
#include "train/eval_report.h"

#include <stdlib.h>
#include <string.h>

#include "train/eval_errors.h"
#include "util/json.h"

static void print_header(const struct dt_eval_report *rep, FILE *out)
{
    const struct dt_eval_result *r = rep->result;
    fprintf(out, "checkpoint %s (epoch %lld, step %lld)\n", rep->checkpoint, rep->epoch, rep->step);
    fprintf(out, "%s samples %.0f  loss %.4f  accuracy %.2f%%", dt_split_name(rep->split),
            dt_eval_samples(r), dt_eval_loss(r), 100 * dt_eval_accuracy(r));
    if (r->top_k > 0)
        fprintf(out, "  top-%d accuracy %.2f%%", r->top_k, 100 * dt_eval_top_k_accuracy(r));
    fprintf(out, "\n\n");
}

static void print_classes(const struct dt_eval_report *rep, FILE *out)
{
    const struct dt_eval_result *r = rep->result;
    char buf[32];
    fprintf(out, "%-14s %8s %9s %9s %9s %7s\n", "class", "samples", "accuracy", "precision",
            "recall", "F1");
    for (int i = 0; i < r->classes; i++) {
        struct dt_class_metrics m = dt_eval_class_metrics(r, i);
        /* Per-class accuracy is the recall; both columns stay, as people look for either. */
        fprintf(out, "%-14s %8.0f %8.2f%% %8.2f%% %8.2f%% %7.4f\n",
                dt_dataset_class_name(rep->data, i, buf, sizeof buf), m.support, 100 * m.recall,
                100 * m.precision, 100 * m.recall, m.f1);
    }
    struct dt_class_metrics macro = dt_eval_macro_metrics(r);
    fprintf(out, "%-14s %8.0f %9s %8.2f%% %8.2f%% %7.4f\n", "(macro avg)", macro.support, "",
            100 * macro.precision, 100 * macro.recall, macro.f1);
}

static void print_confusion(const struct dt_eval_report *rep, FILE *out)
{
    const struct dt_eval_result *r = rep->result;
    int k = r->classes;
    char buf[32];
    fprintf(out, "\nconfusion matrix (rows: true class, columns: predicted)\n%14s", "");
    for (int j = 0; j < k; j++)
        fprintf(out, " %5d", j);
    fprintf(out, "\n");
    for (int i = 0; i < k; i++) {
        fprintf(out, "%2d %-11.11s", i, dt_dataset_class_name(rep->data, i, buf, sizeof buf));
        for (int j = 0; j < k; j++)
            fprintf(out, " %5.0f", dt_eval_confusion(r, i, j));
        fprintf(out, "\n");
    }
}

static void print_errors(const struct dt_eval_report *rep, FILE *out)
{
    const struct dt_eval_errors *e = rep->result->errors;
    if (!e)
        return;
    fprintf(out, "\n%d worst misclassified (highest probability on a wrong class)\n", e->n);
    char own[64], t[32], p[32];
    for (int i = 0; i < e->n; i++) {
        const struct dt_eval_error *x = &e->worst[i];
        fprintf(out, "%s  true %s (%.2f%%)  predicted %s (%.2f%%)\n",
                dt_dataset_sample_name(rep->data, rep->split, x->sample, own, sizeof own),
                dt_dataset_class_name(rep->data, x->truth, t, sizeof t), 100 * x->p_truth,
                dt_dataset_class_name(rep->data, x->predicted, p, sizeof p), 100 * x->p_predicted);
    }
}

void dt_eval_print_text(const struct dt_eval_report *rep, FILE *out)
{
    print_header(rep, out);
    print_classes(rep, out);
    print_confusion(rep, out);
    print_errors(rep, out);
}

/* Arrays are built with the writer's escaping into a growing buffer and spliced in raw: a
 * class name or a file name has no length limit, so no fixed budget holds every one. */
typedef void item_fn(const struct dt_eval_report *rep, int i, struct dt_json_writer *item);

/* A JSON array of n objects, object i written by item(rep, i, ...). */
static char *json_objects(const struct dt_eval_report *rep, int n, item_fn *item)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    fputs("[", f);
    for (int i = 0; i < n; i++) {
        struct dt_json_writer w;
        dt_jw_begin(&w, NULL);
        item(rep, i, &w);
        char *s = dt_jw_finish(&w);
        fprintf(f, "%s%s", i ? "," : "", s ? s : "{}");
        free(s);
    }
    fputs("]", f);
    fclose(f);
    return text;
}

static void class_item(const struct dt_eval_report *rep, int i, struct dt_json_writer *item)
{
    char buf[32];
    struct dt_class_metrics m = dt_eval_class_metrics(rep->result, i);
    dt_jw_str(item, "name", dt_dataset_class_name(rep->data, i, buf, sizeof buf));
    dt_jw_num(item, "samples", m.support);
    dt_jw_num(item, "accuracy", m.recall);
    dt_jw_num(item, "precision", m.precision);
    dt_jw_num(item, "recall", m.recall);
    dt_jw_num(item, "f1", m.f1);
}

static char *json_confusion(const struct dt_eval_result *r)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    fputs("[", f);
    for (int i = 0; i < r->classes; i++) {
        fprintf(f, "%s[", i ? "," : "");
        for (int j = 0; j < r->classes; j++)
            fprintf(f, "%s%.0f", j ? "," : "", dt_eval_confusion(r, i, j));
        fputs("]", f);
    }
    fputs("]", f);
    fclose(f);
    return text;
}

static char *json_macro(const struct dt_eval_result *r)
{
    struct dt_class_metrics m = dt_eval_macro_metrics(r);
    struct dt_json_writer w;
    dt_jw_begin(&w, NULL);
    dt_jw_num(&w, "precision", m.precision);
    dt_jw_num(&w, "recall", m.recall);
    dt_jw_num(&w, "f1", m.f1);
    return dt_jw_finish(&w);
}

static void error_item(const struct dt_eval_report *rep, int i, struct dt_json_writer *item)
{
    const struct dt_eval_error *x = &rep->result->errors->worst[i];
    char own[64], t[32], p[32];
    dt_jw_str(item, "file",
              dt_dataset_sample_name(rep->data, rep->split, x->sample, own, sizeof own));
    dt_jw_int(item, "index", (long long)x->sample);
    dt_jw_str(item, "true", dt_dataset_class_name(rep->data, x->truth, t, sizeof t));
    dt_jw_int(item, "true_index", x->truth);
    dt_jw_num(item, "true_probability", x->p_truth);
    dt_jw_str(item, "predicted", dt_dataset_class_name(rep->data, x->predicted, p, sizeof p));
    dt_jw_int(item, "predicted_index", x->predicted);
    dt_jw_num(item, "predicted_probability", x->p_predicted);
}

static void splice(struct dt_json_writer *w, const char *key, char *raw)
{
    if (raw)
        dt_jw_raw(w, key, raw);
    free(raw);
}

void dt_eval_print_json(const struct dt_eval_report *rep, FILE *out)
{
    const struct dt_eval_result *r = rep->result;
    struct dt_json_writer w;
    dt_jw_begin(&w, "eval");
    dt_jw_str(&w, "checkpoint", rep->checkpoint);
    dt_jw_int(&w, "epoch", rep->epoch);
    dt_jw_int(&w, "step", rep->step);
    dt_jw_str(&w, "split", dt_split_name(rep->split));
    dt_jw_num(&w, "samples", dt_eval_samples(r));
    dt_jw_num(&w, "loss", dt_eval_loss(r));
    dt_jw_num(&w, "accuracy", dt_eval_accuracy(r));
    if (rep->split == DT_SPLIT_TEST) { /* the names eval has always used for the test split */
        dt_jw_num(&w, "test_loss", dt_eval_loss(r));
        dt_jw_num(&w, "test_accuracy", dt_eval_accuracy(r));
    }
    if (r->top_k > 0) {
        dt_jw_int(&w, "top_k", r->top_k);
        dt_jw_num(&w, "top_k_accuracy", dt_eval_top_k_accuracy(r));
    }
    splice(&w, "classes", json_objects(rep, r->classes, class_item));
    splice(&w, "macro", json_macro(r));
    splice(&w, "confusion", json_confusion(r));
    if (r->errors)
        splice(&w, "errors", json_objects(rep, rep->result->errors->n, error_item));
    dt_jw_end(&w, out);
}

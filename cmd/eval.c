/* `dtrain eval CHECKPOINT`: rebuilds the model a checkpoint was trained with (its config text
 * is in the checkpoint's metadata, or --config), loads the weights and reports test loss,
 * accuracy, per-class accuracy and the confusion matrix, as text or one JSON object. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd/cli.h"
#include "cmd/cmd.h"
#include "train/config.h"
#include "train/confusion_plot.h"
#include "train/evaluate.h"
#include "train/setup.h"
#include "data/batch.h"
#include "util/err.h"
#include "util/json.h"
#include "util/log.h"

static const char eval_help[] =
    "usage: dtrain eval CHECKPOINT [options]\n"
    "\n"
    "Evaluates a checkpoint on the test split of its dataset: loss, accuracy, per-class\n"
    "accuracy with class names, and the confusion matrix (rows: true class, columns: predicted).\n"
    "\n"
    "options:\n"
    "      --config CFG     build the model from CFG instead of the checkpoint's stored\n"
    "                       config\n"
    "      --data DIR       read the dataset from DIR (overrides data.dir)\n"
    "      --set KEY=VALUE  override a config key (repeatable)\n"
    "      --threads T      compute threads (default: the config's dist.threads; 0 there\n"
    "                       means all usable cores)\n"
    "      --plot FILE      also draw the confusion matrix as a heat map, SVG or PNG by\n"
    "                       FILE's extension (.svg, .png)\n" DT_CLI_COMMON_HELP "\n"
    "exit codes: 0 ok, 2 usage or config error, 3 missing/corrupt data or checkpoint\n";

#define EVAL_USAGE "usage: dtrain eval CHECKPOINT [--config CFG] [--data DIR] [--json]"

enum { OPT_CONFIG = DT_OPT_COMMAND_BASE, OPT_DATA, OPT_THREADS, OPT_PLOT };

struct eval_args {
    const char *checkpoint, *config, *data_dir, *plot;
    struct dt_cli_common common;
    struct dt_cli_sets sets;
    int threads;
};

static int take_option(void *ctx, int opt, const char *arg)
{
    struct eval_args *a = ctx;
    switch (opt) {
    case OPT_CONFIG:
        a->config = arg;
        return 0;
    case OPT_DATA:
        a->data_dir = arg;
        return 0;
    case DT_OPT_SET:
        return dt_cli_sets_add(&a->sets, arg);
    case OPT_THREADS:
        return dt_cli_parse_int("--threads", arg, 1, 1024, &a->threads);
    case OPT_PLOT: {
        const char *dot = strrchr(arg, '.');
        if (!dot || (strcasecmp(dot, ".svg") && strcasecmp(dot, ".png")))
            return dt_fail(DT_EUSAGE, "--plot %s: the name must end in .svg or .png; %s", arg,
                           EVAL_USAGE);
        a->plot = arg;
        return 0;
    }
    default:
        return dt_fail(DT_EUSAGE, "internal error: option %d not handled; %s", opt, EVAL_USAGE);
    }
}

static int parse_args(int argc, char **argv, struct eval_args *a)
{
    static const struct option options[] = {
        DT_CLI_COMMON_LONGOPTS,
        {"config", required_argument, NULL, OPT_CONFIG},
        {"data", required_argument, NULL, OPT_DATA},
        {"set", required_argument, NULL, DT_OPT_SET},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"plot", required_argument, NULL, OPT_PLOT},
        {NULL, 0, NULL, 0},
    };
    int rc = dt_cli_getopt(argc, argv, options, &a->common, take_option, a, EVAL_USAGE);
    if (rc)
        return rc;
    if (a->common.help)
        return 0;
    if (optind != argc - 1)
        return dt_fail(DT_EUSAGE, "eval: expected exactly one CHECKPOINT argument; %s", EVAL_USAGE);
    a->checkpoint = argv[optind];
    return 0;
}

/* DIR as a libconfig string literal: quotes, backslashes and control characters (a newline)
 * escaped, so any directory name reads back as itself. */
static char *quote_libconfig(const char *s)
{
    char *q = malloc(4 * strlen(s) + 3), *o = q;
    if (!q)
        return NULL;
    *o++ = '"';
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') {
            *o++ = '\\';
            *o++ = *s;
        } else if ((unsigned char)*s < 0x20) {
            o += sprintf(o, "\\x%02x", (unsigned char)*s);
        } else {
            *o++ = *s;
        }
    }
    *o++ = '"';
    *o = 0;
    return q;
}

/* --data DIR is one more override, after the --set ones. */
static int load_config(struct eval_args *a, struct dt_config *cfg)
{
    if (a->data_dir) {
        char *quoted = quote_libconfig(a->data_dir);
        if (!quoted)
            return dt_fail(DT_ERUNTIME, "out of memory");
        int rc = dt_cli_sets_addf(&a->sets, "data.dir", quoted);
        free(quoted);
        if (rc)
            return rc;
    }
    return dt_run_config_for_checkpoint(cfg, a->checkpoint, a->config,
                                        (const char *const *)a->sets.items, a->sets.n);
}

static void print_report(const struct dt_dataset *test, const struct dt_eval_result *r,
                         const char *checkpoint, const struct dt_run_resume *meta)
{
    int k = r->classes;
    char buf[32];
    /* epoch: the epochs completed at the checkpoint's step */
    printf("checkpoint %s (epoch %lld, step %lld)\n", checkpoint, meta->epoch, meta->step);
    printf("test samples %.0f  loss %.4f  accuracy %.2f%%\n\n", r->sums[2], dt_eval_loss(r),
           100 * dt_eval_accuracy(r));
    printf("%-14s %8s %9s\n", "class", "samples", "accuracy");
    for (int i = 0; i < k; i++) {
        float total = 0;
        for (int j = 0; j < k; j++)
            total += dt_eval_confusion(r, i, j);
        printf("%-14s %8.0f %8.2f%%\n", dt_dataset_class_name(test, i, buf, sizeof buf), total,
               total > 0 ? 100 * dt_eval_confusion(r, i, i) / total : 0.0);
    }
    printf("\nconfusion matrix (rows: true class, columns: predicted)\n%14s", "");
    for (int j = 0; j < k; j++)
        printf(" %5d", j);
    printf("\n");
    for (int i = 0; i < k; i++) {
        printf("%2d %-11.11s", i, dt_dataset_class_name(test, i, buf, sizeof buf));
        for (int j = 0; j < k; j++)
            printf(" %5.0f", dt_eval_confusion(r, i, j));
        printf("\n");
    }
}

static void print_json(const struct dt_dataset *test, const struct dt_eval_result *r,
                       const char *checkpoint, const struct dt_run_resume *meta)
{
    int k = r->classes;
    char buf[32];
    struct dt_json_writer per, conf, w;
    /* Arrays are built with the writer's escaping and spliced in raw. */
    memset(&per, 0, sizeof per);
    memset(&conf, 0, sizeof conf);
    dt_jw_begin(&w, "eval");
    dt_jw_str(&w, "checkpoint", checkpoint);
    dt_jw_int(&w, "epoch", meta->epoch);
    dt_jw_int(&w, "step", meta->step);
    dt_jw_num(&w, "samples", r->sums[2]);
    dt_jw_num(&w, "test_loss", dt_eval_loss(r));
    dt_jw_num(&w, "test_accuracy", dt_eval_accuracy(r));
    /* Grown as written: a class name (a folder's, a CIFAR meta line) has no length limit, so
     * no per-class budget can hold every name (a fixed one was overrun by long names). */
    char *classes = NULL, *matrix = NULL;
    size_t clen = 0, mlen = 0;
    FILE *cf = open_memstream(&classes, &clen), *mf = open_memstream(&matrix, &mlen);
    if (cf && mf) {
        fputs("[", cf);
        fputs("[", mf);
        for (int i = 0; i < k; i++) {
            float total = 0;
            for (int j = 0; j < k; j++)
                total += dt_eval_confusion(r, i, j);
            struct dt_json_writer item;
            dt_jw_begin(&item, NULL);
            dt_jw_str(&item, "name", dt_dataset_class_name(test, i, buf, sizeof buf));
            dt_jw_num(&item, "samples", total);
            dt_jw_num(&item, "accuracy", total > 0 ? dt_eval_confusion(r, i, i) / total : 0.0);
            char *s = dt_jw_finish(&item);
            fprintf(cf, "%s%s", i ? "," : "", s ? s : "{}");
            free(s);
            fprintf(mf, "%s[", i ? "," : "");
            for (int j = 0; j < k; j++)
                fprintf(mf, "%s%.0f", j ? "," : "", dt_eval_confusion(r, i, j));
            fputs("]", mf);
        }
        fputs("]", cf);
        fputs("]", mf);
    }
    if (cf)
        fclose(cf);
    if (mf)
        fclose(mf);
    if (cf && mf && classes && matrix) {
        dt_jw_raw(&w, "classes", classes);
        dt_jw_raw(&w, "confusion", matrix);
    }
    free(classes);
    free(matrix);
    dt_jw_end(&w, stdout);
}

static int run_eval(int argc, char **argv)
{
    struct eval_args a;
    memset(&a, 0, sizeof a);
    struct dt_config cfg;
    memset(&cfg, 0, sizeof cfg);
    int rc = parse_args(argc, argv, &a);
    if (rc || a.common.help) {
        if (!rc)
            fputs(eval_help, stdout);
        dt_cli_sets_free(&a.sets);
        return rc;
    }
    dt_cli_apply_log_level(&a.common);
    if ((rc = load_config(&a, &cfg))) {
        dt_cli_sets_free(&a.sets);
        return rc;
    }
    struct dt_dataset data;
    memset(&data, 0, sizeof data);
    struct dt_model *model = NULL;
    struct dt_batcher batcher;
    struct dt_eval_scratch scratch;
    struct dt_eval_result result;
    memset(&scratch, 0, sizeof scratch);
    memset(&result, 0, sizeof result);
    struct dt_comm *comm = dt_comm_single();
    if (!comm) {
        rc = dt_fail(DT_ERUNTIME, "out of memory");
        goto out;
    }
    if (a.threads)
        cfg.dist.threads = a.threads;
    cfg.dist.threads = dt_run_threads(&cfg, 1);
    dt_nn_set_threads(cfg.dist.threads);
    if (!a.data_dir)
        dt_run_locate_data(&cfg, a.checkpoint);
    if ((rc = dt_run_load_test(&cfg, &data)))
        goto out;
    const struct dt_dataset *test = &data;
    struct dt_batch_opts bo = {
        .mean = cfg.data.mean, .nmean = cfg.data.nmean, .std = cfg.data.std, .nstd = cfg.data.nstd};
    if ((rc = dt_batcher_init(&batcher, test, &bo)))
        goto out;
    int batch = cfg.train.eval_batch_size > 0 ? cfg.train.eval_batch_size : 256;
    struct dt_shape in = {test->c, test->h, test->w};
    if ((rc = dt_run_build_model(&cfg, in, batch, 0, &model)))
        goto out;
    /* The loss reads the output at each label: a label past the model's outputs would read
     * past its row (a checkpoint for 2 classes evaluated on a folder of 10). */
    if (model->classes < test->classes) {
        rc = dt_fail(DT_EDATA,
                     "%s: the model has %d outputs, but the test data in %s has %d classes",
                     a.checkpoint, model->classes, cfg.data.dir, test->classes);
        goto out;
    }
    struct dt_run_resume meta;
    if ((rc = dt_run_load_checkpoint(a.checkpoint, model, NULL, &meta)))
        goto out;
    if ((rc = dt_eval_scratch_init(&scratch, batch, (size_t)test->c * test->h * test->w)) ||
        (rc = dt_eval_result_init(&result, test->classes)))
        goto out;
    if ((rc = dt_evaluate(model, test, &batcher, &scratch, comm, &result)))
        goto out;
    if (a.common.json)
        print_json(test, &result, a.checkpoint, &meta);
    else if (!a.common.quiet)
        print_report(test, &result, a.checkpoint, &meta);
    if (a.plot) {
        char title[160];
        snprintf(title, sizeof title, "confusion: epoch %lld, step %lld, accuracy %.2f%%",
                 meta.epoch, meta.step, 100 * dt_eval_accuracy(&result));
        rc = dt_confusion_plot(&result, test, title, a.plot);
    }
out:
    dt_eval_result_free(&result);
    dt_eval_scratch_free(&scratch);
    dt_model_free(model);
    dt_dataset_free(&data);
    if (comm)
        comm->close(comm);
    dt_config_free(&cfg);
    dt_cli_sets_free(&a.sets);
    return rc;
}

const struct dt_command dt_cmd_eval = {
    .name = "eval",
    .summary = "evaluate a checkpoint on the test set",
    .help = eval_help,
    .run = run_eval,
};

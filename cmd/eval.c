/* `dtrain eval CHECKPOINT`: rebuilds the model a checkpoint was trained with (its config text
 * is in the checkpoint's metadata, or --config), loads the weights, evaluates one split
 * (train/evaluate.h) and prints the report (train/eval_report.h) as text or one JSON object. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd/cli.h"
#include "cmd/cmd.h"
#include "train/config.h"
#include "train/confusion_plot.h"
#include "train/eval_errors.h"
#include "train/eval_report.h"
#include "train/evaluate.h"
#include "train/setup.h"
#include "data/batch.h"
#include "util/err.h"
#include "util/log.h"

static const char eval_help[] =
    "usage: dtrain eval CHECKPOINT [options]\n"
    "\n"
    "Evaluates a checkpoint on a split of its dataset (the test split unless --split): loss,\n"
    "accuracy, top-k accuracy, per-class samples, accuracy, precision, recall and F1 with\n"
    "class names and their macro average, and the confusion matrix (rows: true class,\n"
    "columns: predicted).\n"
    "\n"
    "options:\n"
    "      --split S        evaluate the train, val or test split (default test; val is the\n"
    "                       folder's val/ or the data.val_fraction held out of train)\n"
    "      --top-k K        also report top-K accuracy (default 5 when the model has more\n"
    "                       than 5 classes)\n"
    "      --errors N       list the N misclassified samples with the highest probability on\n"
    "                       a wrong class: file (image folders; archives: SPLIT#index), true\n"
    "                       and predicted class with their probabilities\n"
    "      --config CFG     build the model from CFG instead of the checkpoint's stored\n"
    "                       config\n"
    "      --data DIR       read the dataset from DIR (overrides data.dir)\n"
    "      --set KEY=VALUE  override a config key (repeatable)\n" DT_CLI_PRECISION_HELP
    "      --threads T      compute threads (default: the config's dist.threads; 0 there\n"
    "                       means all usable cores)\n"
    "      --plot FILE      also draw the confusion matrix as a heat map, SVG or PNG by\n"
    "                       FILE's extension (.svg, .png)\n" DT_CLI_COMMON_HELP "\n"
    "exit codes: 0 ok, 2 usage or config error, 3 missing/corrupt data or checkpoint\n";

#define EVAL_USAGE                                                                                 \
    "usage: dtrain eval CHECKPOINT [--split S] [--top-k K] [--errors N] [--plot FILE] [--json]"

enum {
    OPT_CONFIG = DT_OPT_COMMAND_BASE,
    OPT_DATA,
    OPT_THREADS,
    OPT_SPLIT,
    OPT_TOP_K,
    OPT_ERRORS,
    OPT_PLOT
};

struct eval_args {
    const char *checkpoint, *config, *data_dir, *plot;
    struct dt_cli_common common;
    struct dt_cli_sets sets;
    int threads;
    enum dt_split split;
    int top_k;  /* 0: the default */
    int errors; /* 0: no list */
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
    case DT_OPT_PRECISION:
        return dt_cli_sets_addf(&a->sets, "train.precision", arg);
    case OPT_THREADS:
        return dt_cli_parse_int("--threads", arg, 1, 1024, &a->threads);
    case OPT_SPLIT:
        return dt_split_parse("--split", arg, &a->split);
    case OPT_TOP_K:
        return dt_cli_parse_int("--top-k", arg, 1, DT_MAX_CLASSES, &a->top_k);
    case OPT_ERRORS:
        return dt_cli_parse_int("--errors", arg, 1, 100000, &a->errors);
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
        {"precision", required_argument, NULL, DT_OPT_PRECISION},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"split", required_argument, NULL, OPT_SPLIT},
        {"top-k", required_argument, NULL, OPT_TOP_K},
        {"errors", required_argument, NULL, OPT_ERRORS},
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

static int run_eval(int argc, char **argv)
{
    struct eval_args a;
    memset(&a, 0, sizeof a);
    a.split = DT_SPLIT_TEST;
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
    struct dt_eval_errors errors;
    memset(&scratch, 0, sizeof scratch);
    memset(&result, 0, sizeof result);
    memset(&errors, 0, sizeof errors);
    struct dt_comm *comm = dt_comm_single();
    if (!comm) {
        rc = dt_fail(DT_ERUNTIME, "out of memory");
        goto out;
    }
    dt_nn_set_threads(a.threads ? a.threads : dt_run_threads(&cfg, 1));
    if (!a.data_dir)
        dt_run_locate_data(&cfg, a.checkpoint);
    if ((rc = dt_run_load_split(&cfg, a.split, &data)))
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
    if (a.top_k > model->classes) {
        rc = dt_fail(DT_EUSAGE, "--top-k %d: the model has %d classes", a.top_k, model->classes);
        goto out;
    }
    result.top_k = a.top_k ? a.top_k : model->classes > 5 ? 5 : 0;
    if (a.errors && (rc = dt_eval_errors_init(&errors, a.errors, model->classes)))
        goto out;
    result.errors = a.errors ? &errors : NULL;
    if ((rc = dt_evaluate(model, test, &batcher, &scratch, comm, &result)))
        goto out;
    struct dt_eval_report report = {.checkpoint = a.checkpoint,
                                    .epoch = meta.epoch,
                                    .step = meta.step,
                                    .split = a.split,
                                    .data = test,
                                    .result = &result};
    if (a.common.json)
        dt_eval_print_json(&report, stdout);
    else if (!a.common.quiet)
        dt_eval_print_text(&report, stdout);
    if (a.plot) {
        char title[160];
        snprintf(title, sizeof title, "confusion: %s, epoch %lld, step %lld, accuracy %.2f%%",
                 dt_split_name(a.split), meta.epoch, meta.step, 100 * dt_eval_accuracy(&result));
        rc = dt_confusion_plot(&result, test, title, a.plot);
    }
out:
    dt_eval_errors_free(&errors);
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
    .summary = "evaluate a checkpoint on the test set (or --split train|val)",
    .help = eval_help,
    .run = run_eval,
};

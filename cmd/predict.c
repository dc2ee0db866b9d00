/* `dtrain predict CHECKPOINT FILE...`: argv -> struct dt_predict_options -> dt_predict
 * (train/predict.h, the engine: the model, the file walk, decoding, the report). This file
 * holds the flags and the help text. */
#include <stdio.h>
#include <string.h>

#include "cmd/cli.h"
#include "cmd/cmd.h"
#include "train/predict.h"
#include "util/err.h"

#define PREDICT_USAGE "usage: dtrain predict CHECKPOINT FILE|DIR... [--top K] [--json] [--strict]"

enum { OPT_TOP = DT_OPT_COMMAND_BASE, OPT_SPLIT, OPT_CONFIG, OPT_THREADS, OPT_STRICT };

struct predict_args {
    struct dt_predict_options o;
    struct dt_cli_common common;
    struct dt_cli_sets sets;
};

static int take_option(void *ctx, int opt, const char *arg)
{
    struct predict_args *a = ctx;
    switch (opt) {
    case OPT_TOP:
        return dt_cli_parse_int("--top", arg, 1, DT_PREDICT_MAX_TOP, &a->o.top);
    case OPT_SPLIT:
        a->o.use_split = true;
        return dt_split_parse("--split", arg, &a->o.split);
    case OPT_CONFIG:
        a->o.config = arg;
        return 0;
    case OPT_THREADS:
        return dt_cli_parse_int("--threads", arg, 1, 1024, &a->o.threads);
    case OPT_STRICT:
        a->o.strict = true;
        return 0;
    case DT_OPT_SET:
        return dt_cli_sets_add(&a->sets, arg);
    case DT_OPT_PRECISION:
        return dt_cli_sets_addf(&a->sets, "train.precision", arg);
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
        {"precision", required_argument, NULL, DT_OPT_PRECISION},
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
    a->o.checkpoint = argv[optind];
    a->o.inputs = (const char *const *)argv + optind + 1;
    a->o.ninputs = argc - optind - 1;
    return 0;
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
    "      --set KEY=VALUE  override a config key (repeatable)\n" DT_CLI_PRECISION_HELP
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
    a.o.top = 1;
    int rc = parse_args(argc, argv, &a);
    if (!rc && a.common.help) {
        fputs(predict_help, stdout);
    } else if (!rc) {
        dt_cli_apply_log_level(&a.common);
        a.o.json = a.common.json;
        a.o.sets = (const char *const *)a.sets.items;
        a.o.nsets = a.sets.n;
        rc = dt_predict(&a.o);
    }
    dt_cli_sets_free(&a.sets);
    return rc;
}

const struct dt_command dt_cmd_predict = {
    .name = "predict",
    .summary = "classify images with a trained checkpoint",
    .help = predict_help,
    .run = run_predict,
};

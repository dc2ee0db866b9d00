/* `dtrain report RUN_DIR [--compare DIR]... [--out DIR]`: a run's curves as pictures. The
 * engine is train/report.c; this face parses, calls it once and prints what it wrote. */
#include <stdio.h>
#include <string.h>

#include "cmd/cli.h"
#include "cmd/cmd.h"
#include "train/report.h"
#include "util/err.h"
#include "util/json.h"
#include "util/log.h"

#define REPORT_USAGE "usage: dtrain report RUN_DIR [--compare DIR]... [--out DIR]"

enum { OPT_COMPARE = DT_OPT_COMMAND_BASE, OPT_OUT };

struct report_args {
    struct dt_cli_common common;
    const char *dirs[DT_REPORT_MAX_RUNS];
    int ndirs;
    const char *compare[DT_REPORT_MAX_RUNS];
    int ncompare;
    const char *out;
};

static int take_option(void *ctx, int opt, const char *arg)
{
    struct report_args *a = ctx;
    switch (opt) {
    case OPT_COMPARE:
        if (a->ncompare + 1 >= DT_REPORT_MAX_RUNS)
            return dt_fail(DT_EUSAGE, "report: at most %d runs on one chart; %s",
                           DT_REPORT_MAX_RUNS, REPORT_USAGE);
        a->compare[a->ncompare++] = arg;
        return 0;
    case OPT_OUT:
        a->out = arg;
        return 0;
    default:
        return dt_fail(DT_EUSAGE, "internal error: option %d not handled; %s", opt, REPORT_USAGE);
    }
}

static int parse_args(int argc, char **argv, struct report_args *a)
{
    static const struct option options[] = {
        DT_CLI_COMMON_LONGOPTS,
        {"compare", required_argument, NULL, OPT_COMPARE},
        {"out", required_argument, NULL, OPT_OUT},
        {NULL, 0, NULL, 0},
    };
    int rc = dt_cli_getopt(argc, argv, options, &a->common, take_option, a, REPORT_USAGE);
    if (rc || a->common.help)
        return rc;
    if (optind >= argc)
        return dt_fail(DT_EUSAGE, "report: no run directory given; %s", REPORT_USAGE);
    /* the first operand, then --compare's, then further operands (--compare A B) */
    a->dirs[a->ndirs++] = argv[optind];
    for (int i = 0; i < a->ncompare; i++)
        a->dirs[a->ndirs++] = a->compare[i];
    for (int i = optind + 1; i < argc; i++) {
        if (a->ndirs == DT_REPORT_MAX_RUNS)
            return dt_fail(DT_EUSAGE, "report: at most %d runs on one chart; %s",
                           DT_REPORT_MAX_RUNS, REPORT_USAGE);
        a->dirs[a->ndirs++] = argv[i];
    }
    return 0;
}

static void print_result(const struct dt_report_result *r, bool json)
{
    if (json) {
        for (int i = 0; i < r->nruns; i++) {
            struct dt_json_writer w;
            dt_jw_begin(&w, "report");
            dt_jw_str(&w, "run", r->best[i].run);
            if (r->best[i].epoch > 0) {
                dt_jw_int(&w, "best_epoch", r->best[i].epoch);
                dt_jw_int(&w, "best_step", r->best[i].step);
                dt_jw_str(&w, "best_metric", r->best[i].metric);
                dt_jw_num(&w, "best_score", r->best[i].score);
            }
            dt_jw_end(&w, stdout);
        }
        for (int i = 0; i < r->nfiles; i++) {
            struct dt_json_writer w;
            dt_jw_begin(&w, "file");
            dt_jw_str(&w, "path", r->files[i]);
            dt_jw_end(&w, stdout);
        }
        return;
    }
    for (int i = 0; i < r->nruns; i++) {
        const struct dt_report_best *b = &r->best[i];
        if (b->epoch > 0)
            printf("%s: best epoch %lld (step %lld), %s %.4g\n", b->run, b->epoch, b->step,
                   b->metric, b->score);
        else
            printf("%s: no finished epoch yet\n", b->run);
    }
    for (int i = 0; i < r->nfiles; i++)
        printf("wrote %s\n", r->files[i]);
}

static int run_report(int argc, char **argv)
{
    struct report_args a;
    memset(&a, 0, sizeof a);
    int rc = parse_args(argc, argv, &a);
    if (rc || a.common.help) {
        if (!rc)
            fputs(dt_cmd_report.help, stdout);
        return rc;
    }
    dt_cli_apply_log_level(&a.common);
    struct dt_report_opts o = {.dirs = a.dirs, .ndirs = a.ndirs, .out_dir = a.out};
    struct dt_report_result res;
    if ((rc = dt_report(&o, &res)))
        return rc;
    if (!a.common.quiet || a.common.json)
        print_result(&res, a.common.json);
    return 0;
}

const struct dt_command dt_cmd_report = {
    .name = "report",
    .summary = "draw a run's loss, accuracy and lr curves (SVG and PNG)",
    .help =
        "usage: dtrain report RUN_DIR [--compare DIR]... [--out DIR]\n"
        "\n"
        "Draws the curves of a training run from its directory's metrics.csv (train writes\n"
        "it into checkpoint.dir): loss, accuracy and learning rate against the step, loss\n"
        "and accuracy against the epoch, train / val / test, with the best epoch (the one\n"
        "best.safetensors holds) marked. Each chart is written as NAME.svg and NAME.png\n"
        "(loss, accuracy, lr, loss_epoch, accuracy_epoch) into RUN_DIR or --out DIR.\n"
        "The run's TensorBoard event files are checked too (CRCs); a last record or line\n"
        "cut short by a crash is left out with a warning.\n"
        "\n"
        "options:\n"
        "      --compare DIR    another run on the same charts (repeatable, or several DIRs\n"
        "                       after the first; up to 8 runs); files are compare_NAME.*\n"
        "      --out DIR        write the pictures into DIR (made if missing)\n" DT_CLI_COMMON_HELP
        "\n"
        "exit codes: 0 ok, 1 a picture could not be written, 2 usage error,\n"
        "            3 a run directory is missing, holds no metrics, or is damaged\n",
    .run = run_report,
};

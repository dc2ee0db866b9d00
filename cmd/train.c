/* `dtrain train CONFIG [options]`: the command line of a training run.
 *
 * This file owns argument parsing and the paths that do not train: --print-config (the
 * effective config, exactly what a checkpoint stores) and --dry-run (validate the config,
 * read the datasets, build the model for the data's shape, print what a run would use).
 * Training itself is dt_train_run() in cmd/train_run.c.
 *
 * Dedicated flags are turned into config overrides, applied after the --set options, so
 * there is one path for every value and --print-config shows the result:
 *   --instances N -> dist.instances, --threads T -> dist.threads, --json -> log.json,
 *   --quiet -> log.quiet, --log-every N -> log.every, --profile -> log.profile.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "cmd/cmd.h"
#include "train/config.h"
#include "train/setup.h"
#include "train/loop.h"
#include "data/dataset.h"
#include "data/registry.h"
#include "nn/model.h"
#include "util/err.h"
#include "util/json.h"

#define TRAIN_USAGE "usage: dtrain train CONFIG [options] (try 'dtrain train --help')"

enum {
    OPT_INSTANCES = DT_OPT_COMMAND_BASE,
    OPT_THREADS,
    OPT_PRINT_CONFIG,
    OPT_DRY_RUN,
    OPT_LOG_EVERY,
    OPT_PROFILE,
    OPT_RESUME,
    OPT_CONFIG_REFERENCE,
    OPT_NODES,
    OPT_NODE_RANK,
    OPT_MASTER,
    OPT_IFACE,
    OPT_TOKEN_FILE,
    OPT_RENDEZVOUS_TIMEOUT,
    OPT_TIMEOUT,
    OPT_BACKEND,
    OPT_PIN,
    OPT_CPU_LIST,
};

struct train_args {
    const char *config;
    struct dt_cli_common common;
    struct dt_cli_sets sets;  /* --set options, in order */
    struct dt_cli_sets flags; /* overrides from dedicated flags, applied after --set */
    bool print_config, dry_run, config_reference;
    const char *resume;
    struct dt_job_opts job;
};

static int take_flag(struct train_args *a, int opt, const char *arg)
{
    int n;
    int rc = 0;
    switch (opt) {
    case DT_OPT_SET:
        return dt_cli_sets_add(&a->sets, arg);
    case OPT_INSTANCES:
        if (!(rc = dt_cli_parse_int("--instances", arg, 1, 1024, &n)))
            rc = dt_cli_sets_addf(&a->flags, "dist.instances", arg);
        return rc;
    case OPT_THREADS:
        if (!(rc = dt_cli_parse_int("--threads", arg, 0, 1024, &n)))
            rc = dt_cli_sets_addf(&a->flags, "dist.threads", arg);
        return rc;
    case OPT_LOG_EVERY:
        if (!(rc = dt_cli_parse_int("--log-every", arg, 0, 1000000000, &n)))
            rc = dt_cli_sets_addf(&a->flags, "log.every", arg);
        return rc;
    case OPT_PROFILE:
        return dt_cli_sets_addf(&a->flags, "log.profile", "true");
    case OPT_PRINT_CONFIG:
        a->print_config = true;
        return 0;
    case OPT_DRY_RUN:
        a->dry_run = true;
        return 0;
    case OPT_RESUME:
        a->resume = arg;
        return 0;
    case OPT_CONFIG_REFERENCE:
        a->config_reference = true;
        return 0;
    case OPT_NODES:
        return dt_cli_parse_int("--nodes", arg, 1, 65536, &a->job.launch.nodes);
    case OPT_NODE_RANK:
        return dt_cli_parse_int("--node-rank", arg, 0, 65535, &a->job.launch.node_rank);
    case OPT_MASTER:
        a->job.launch.master = arg;
        return 0;
    case OPT_IFACE:
        a->job.iface = arg;
        return 0;
    case OPT_TOKEN_FILE:
        a->job.token_file = arg;
        return 0;
    case OPT_RENDEZVOUS_TIMEOUT:
        return dt_cli_parse_double("--rendezvous-timeout", arg, 0.001, 86400,
                                   &a->job.rendezvous_timeout);
    case OPT_TIMEOUT: {
        double t;
        return (rc = dt_cli_parse_double("--timeout", arg, 0.001, 86400, &t))
                   ? rc
                   : dt_cli_sets_addf(&a->flags, "dist.timeout", arg);
    }
    case OPT_BACKEND:
        return dt_cli_sets_addf(&a->flags, "dist.backend", arg);
    case OPT_PIN:
        return dt_cli_sets_addf(&a->flags, "dist.pin", arg);
    case OPT_CPU_LIST:
        return dt_cli_sets_addf(&a->flags, "dist.cpu_list", arg);
    default:
        return dt_fail(DT_EUSAGE, "internal error: option %d not handled; %s", opt, TRAIN_USAGE);
    }
}

static int parse_args(struct train_args *a, int argc, char **argv)
{
    static const struct option longopts[] = {
        DT_CLI_COMMON_LONGOPTS,
        {"set", required_argument, NULL, DT_OPT_SET},
        {"instances", required_argument, NULL, OPT_INSTANCES},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"print-config", no_argument, NULL, OPT_PRINT_CONFIG},
        {"dry-run", no_argument, NULL, OPT_DRY_RUN},
        {"log-every", required_argument, NULL, OPT_LOG_EVERY},
        {"profile", no_argument, NULL, OPT_PROFILE},
        {"resume", required_argument, NULL, OPT_RESUME},
        {"config-reference", no_argument, NULL, OPT_CONFIG_REFERENCE},
        {"nodes", required_argument, NULL, OPT_NODES},
        {"node-rank", required_argument, NULL, OPT_NODE_RANK},
        {"master", required_argument, NULL, OPT_MASTER},
        {"iface", required_argument, NULL, OPT_IFACE},
        {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
        {"rendezvous-timeout", required_argument, NULL, OPT_RENDEZVOUS_TIMEOUT},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"backend", required_argument, NULL, OPT_BACKEND},
        {"pin", required_argument, NULL, OPT_PIN},
        {"cpu-list", required_argument, NULL, OPT_CPU_LIST},
        {NULL, 0, NULL, 0},
    };
    optind = 0; /* GNU: full reset, so a second parse in one process starts clean */
    opterr = 0;
    int opt, rc;
    while ((opt = getopt_long(argc, argv, DT_CLI_COMMON_SHORTOPTS, longopts, NULL)) != -1) {
        if (opt == '?' || opt == ':')
            return dt_cli_bad_option(opt, argv, TRAIN_USAGE);
        if (dt_cli_common_option(&a->common, opt))
            continue;
        if ((rc = take_flag(a, opt, optarg)))
            return rc;
    }
    if (a->common.help || a->config_reference)
        return 0;
    if (optind >= argc)
        return dt_fail(DT_EUSAGE, "train: no config file given; %s", TRAIN_USAGE);
    if (optind + 1 < argc)
        return dt_fail(DT_EUSAGE, "train: one config file expected, got '%s' too; %s",
                       argv[optind + 1], TRAIN_USAGE);
    a->config = argv[optind];
    if (a->common.json && (rc = dt_cli_sets_addf(&a->flags, "log.json", "true")))
        return rc;
    if (a->common.quiet && (rc = dt_cli_sets_addf(&a->flags, "log.quiet", "true")))
        return rc;
    return 0;
}

/* ---- --dry-run ---- */

static void histogram(const struct dt_dataset *d, size_t *hist)
{
    memset(hist, 0, (size_t)d->classes * sizeof *hist);
    for (size_t i = 0; i < d->n; i++)
        if (d->y[i] < d->classes)
            hist[d->y[i]]++;
}

static const char *class_name(const struct dt_config *cfg, const struct dt_dataset *d, int i,
                              char *buf, size_t size)
{
    const struct dt_reg_dataset *reg = dt_registry_find(cfg->data.dataset);
    if (reg && reg->class_names && i < reg->classes && !cfg->data.coarse_labels)
        return reg->class_names[i];
    if (d->names && d->names[i])
        return d->names[i];
    snprintf(buf, size, "%d", i);
    return buf;
}

struct dry_run_facts {
    struct dt_data data;
    struct dt_model *model;
    size_t *train_hist, *test_hist;
    long long steps_per_epoch;
    int per_instance_batch, global_batch;
};

static void compute_steps(const struct dt_config *cfg, struct dry_run_facts *f)
{
    int n = cfg->dist.instances, b = cfg->train.batch_size;
    f->global_batch = cfg->train.batch_per_instance ? b * n : b;
    f->per_instance_batch = cfg->train.batch_per_instance ? b : (b + n - 1) / n;
    long long samples = (long long)f->data.train.n;
    f->steps_per_epoch = cfg->train.drop_last ? samples / f->global_batch
                                              : (samples + f->global_batch - 1) / f->global_batch;
}

/* A JSON array of the class names, escaped by util/json's own escaper. */
static char *class_names_json(const struct dt_config *cfg, const struct dt_dataset *d)
{
    char *out = NULL, buf[32];
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f)
        return NULL;
    for (int i = 0; i < d->classes; i++) {
        struct dt_json_writer s;
        memset(&s, 0, sizeof s);
        dt_json_escape_to(&s, class_name(cfg, d, i, buf, sizeof buf));
        fprintf(f, "%s%s", i ? "," : "[", s.buf ? s.buf : "null");
        free(s.buf);
    }
    fputs(d->classes ? "]" : "[]", f);
    fclose(f);
    return out;
}

static char *counts_json(const size_t *counts, int n)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f)
        return NULL;
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%zu", i ? "," : "[", counts[i]);
    fputs(n ? "]" : "[]", f);
    fclose(f);
    return out;
}

static int print_json(const struct dt_config *cfg, const struct dry_run_facts *f)
{
    const struct dt_dataset *tr = &f->data.train, *te = &f->data.test;
    char shape[48];
    char *names = class_names_json(cfg, tr), *htrain = counts_json(f->train_hist, tr->classes),
         *htest = counts_json(f->test_hist, tr->classes);
    int rc = 0;
    if (!names || !htrain || !htest) {
        rc = dt_fail(DT_ERUNTIME, "out of memory writing JSON");
        goto out;
    }
    struct dt_json_writer w;
    dt_jw_begin(&w, "dry_run");
    dt_jw_str(&w, "config", cfg->path);
    dt_jw_str(&w, "dataset", cfg->data.dataset);
    dt_jw_str(&w, "format", cfg->data.format);
    dt_jw_str(&w, "dir", cfg->data.dir);
    dt_jw_str(&w, "train_files", tr->source);
    dt_jw_str(&w, "test_files", te->source);
    dt_jw_int(&w, "train_samples", (long long)tr->n);
    dt_jw_int(&w, "test_samples", (long long)te->n);
    snprintf(shape, sizeof shape, "[%d,%d,%d]", tr->c, tr->h, tr->w);
    dt_jw_raw(&w, "shape", shape);
    dt_jw_int(&w, "classes", tr->classes);
    dt_jw_raw(&w, "class_names", names);
    dt_jw_raw(&w, "train_histogram", htrain);
    dt_jw_raw(&w, "test_histogram", htest);
    dt_jw_int(&w, "layers", cfg->model.nlayers);
    dt_jw_int(&w, "parameters", (long long)f->model->nparams);
    dt_jw_int(&w, "outputs", f->model->classes);
    dt_jw_int(&w, "instances", cfg->dist.instances);
    dt_jw_int(&w, "threads", cfg->dist.threads);
    dt_jw_int(&w, "global_batch", f->global_batch);
    dt_jw_int(&w, "steps_per_epoch", f->steps_per_epoch);
    dt_jw_int(&w, "epochs", cfg->train.epochs);
    dt_jw_end(&w, stdout);
out:
    free(names);
    free(htrain);
    free(htest);
    return rc;
}

static void print_summary(const struct dt_config *cfg, const struct dry_run_facts *f)
{
    const struct dt_dataset *tr = &f->data.train, *te = &f->data.test;
    char buf[32];
    printf("config      %s: valid\n", cfg->path);
    printf("dataset     %s (%s) in %s\n", cfg->data.dataset, cfg->data.format, cfg->data.dir);
    printf("read        %s\n", tr->source);
    if (strcmp(te->source, tr->source) != 0)
        printf("            %s\n", te->source);
    printf("train       %zu samples, %dx%dx%d\n", tr->n, tr->c, tr->h, tr->w);
    printf("test        %zu samples, %dx%dx%d\n", te->n, te->c, te->h, te->w);
    printf("model       %d layers, %dx%dx%d -> %d outputs, %zu parameters, loss %s\n",
           cfg->model.nlayers, tr->c, tr->h, tr->w, f->model->classes, f->model->nparams,
           cfg->loss.type);
    printf("optimizer   %s, lr %g\n", cfg->optimizer.type, cfg->optimizer.lr);
    printf("run         %d instance%s x %d thread%s, batch %d global (%d per instance), "
           "%lld steps per epoch, %d epoch%s\n",
           cfg->dist.instances, cfg->dist.instances > 1 ? "s" : "", cfg->dist.threads,
           cfg->dist.threads == 1 ? "" : "s", f->global_batch, f->per_instance_batch,
           f->steps_per_epoch, cfg->train.epochs, cfg->train.epochs > 1 ? "s" : "");
    printf("checkpoints %s\n", cfg->checkpoint.dir);
    printf("classes     %d\n", tr->classes);
    printf("  class  %-20s %8s %8s\n", "name", "train", "test");
    for (int i = 0; i < tr->classes; i++)
        printf("  %5d  %-20s %8zu %8zu\n", i, class_name(cfg, tr, i, buf, sizeof buf),
               f->train_hist[i], f->test_hist[i]);
}

static int dry_run(const struct dt_config *cfg, bool json)
{
    struct dry_run_facts f;
    memset(&f, 0, sizeof f);
    int rc = dt_data_load(&f.data, cfg->data.format, cfg->data.dir, cfg->data.classes,
                          cfg->data.coarse_labels);
    if (rc)
        goto out;
    const struct dt_dataset *tr = &f.data.train;
    struct dt_shape in = {tr->c, tr->h, tr->w};
    enum dt_loss_kind loss =
        strcmp(cfg->loss.type, "nll") == 0 ? DT_LOSS_NLL : DT_LOSS_CROSS_ENTROPY;
    if ((rc = dt_model_build(&f.model, cfg->model.layers, cfg->model.nlayers, in, 1, loss,
                             (uint64_t)cfg->train.seed))) {
        rc = dt_fail_context(rc, "%s: model", cfg->path);
        goto out;
    }
    if (f.model->classes < tr->classes) {
        rc = dt_fail(DT_EUSAGE,
                     "%s: model: the last layer has %d outputs but the dataset has %d classes",
                     cfg->path, f.model->classes, tr->classes);
        goto out;
    }
    f.train_hist = calloc((size_t)tr->classes + 1, sizeof *f.train_hist);
    f.test_hist = calloc((size_t)tr->classes + 1, sizeof *f.test_hist);
    if (!f.train_hist || !f.test_hist) {
        rc = dt_fail(DT_ERUNTIME, "out of memory");
        goto out;
    }
    histogram(tr, f.train_hist);
    histogram(&f.data.test, f.test_hist);
    compute_steps(cfg, &f);
    if (json)
        rc = print_json(cfg, &f);
    else
        print_summary(cfg, &f);
out:
    free(f.train_hist);
    free(f.test_hist);
    if (f.model)
        dt_model_free(f.model);
    dt_data_free(&f.data);
    return rc;
}

static int run_train(int argc, char **argv)
{
    struct train_args a;
    memset(&a, 0, sizeof a);
    dt_job_opts_init(&a.job);
    struct dt_config cfg;
    memset(&cfg, 0, sizeof cfg);
    int rc = parse_args(&a, argc, argv);
    if (rc || a.common.help || a.config_reference) {
        if (!rc && a.common.help)
            fputs(dt_cmd_train.help, stdout);
        else if (!rc)
            dt_config_print_reference(stdout);
        goto out;
    }
    dt_cli_apply_log_level(&a.common);
    for (int i = 0; i < a.flags.n && !rc; i++)
        rc = dt_cli_sets_add(&a.sets, a.flags.items[i]);
    if (rc || (rc = dt_config_load(&cfg, a.config, (const char *const *)a.sets.items, a.sets.n)))
        goto out;
    if (a.print_config) {
        fputs(cfg.text, stdout);
        goto out;
    }
    a.job.verbose = a.common.verbose;
    int local_instances;
    if ((rc = dt_job_local_shape(&cfg, &a.job, &local_instances, &cfg.dist.threads)))
        goto out;
    if (a.dry_run)
        rc = dry_run(&cfg, a.common.json);
    else {
        struct dt_train_options opt = {.resume = a.resume, .job = a.job};
        rc = dt_train_run(&cfg, &opt);
    }
out:
    dt_config_free(&cfg);
    dt_cli_sets_free(&a.sets);
    dt_cli_sets_free(&a.flags);
    return rc;
}

const struct dt_command dt_cmd_train = {
    .name = "train",
    .summary = "train a model from a config file",
    .help =
        "usage: dtrain train CONFIG [options]\n"
        "\n"
        "Trains the model that the libconfig file CONFIG describes (see configs/ and\n"
        "docs/config.md), on one or more instances (processes) of this machine.\n"
        "\n"
        "options:\n"
        "      --set KEY=VALUE  override one config key, e.g. --set train.epochs=5 or\n"
        "                       --set model.layers.3.p=0 (repeatable; applied in order, checked\n"
        "                       like the file; strings may be bare, lists as [0.5, 0.25])\n"
        "      --instances N    processes training together (sets dist.instances)\n"
        "      --threads T      compute threads per instance; 0 = cores / instances\n"
        "                       (sets dist.threads)\n"
        "      --print-config   print the effective config (file + defaults + overrides) in\n"
        "                       libconfig syntax and exit\n"
        "      --dry-run        check the config, read the datasets and build the model, print\n"
        "                       a summary (files, counts, shape, classes, label histograms)\n"
        "                       and exit without training\n"
        "      --log-every N    progress line every N steps when stderr is not a terminal;\n"
        "                       0 = once per epoch (sets log.every)\n"
        "      --profile        print per-layer forward/backward times at the end\n"
        "                       (sets log.profile)\n"
        "      --resume PATH    continue from the checkpoint PATH (same trajectory as an\n"
        "                       uninterrupted run)\n"
        "      --config-reference  print every config key (type, default, range, meaning)\n"
        "                       as a Markdown table and exit; needs no CONFIG\n"
        "\n"
        "placement (one host):\n"
        "      --pin MODE       cores (default: own physical cores per instance, one socket\n"
        "                       where it fits), sockets, none (sets dist.pin)\n"
        "      --cpu-list LIST  explicit CPUs like 0-7,16-23; instance r takes the r-th run of\n"
        "                       T of them (sets dist.cpu_list)\n"
        "      --backend B      auto, shm, tcp, hier, mpi (sets dist.backend)\n"
        "      --timeout S      a collective fails when a peer makes no progress for S seconds\n"
        "                       (sets dist.timeout; default 300)\n"
        "\n"
        "several hosts (see docs/multihost.md; mpirun, srun and torchrun variables work too):\n"
        "      --nodes M        hosts in the job, one dtrain per host (env NNODES)\n"
        "      --node-rank K    this host's index, 0..M-1 (env NODE_RANK)\n"
        "      --master H:P     rank 0's rendezvous address (env MASTER_ADDR, MASTER_PORT)\n"
        "      --iface NAME     network interface to use (env DTRAIN_SOCKET_IFNAME)\n"
        "      --token-file F   the job's shared secret (env DTRAIN_TOKEN)\n"
        "      --rendezvous-timeout S  how long to wait for every rank (default "
        "120)\n" DT_CLI_COMMON_HELP "\n"
        "--quiet and --json also set log.quiet and log.json. Flags win over --set.\n"
        "\n"
        "exit codes: 0 ok, 1 runtime failure, 2 usage or config error, 3 data error,\n"
        "            130/143 stopped by SIGINT/SIGTERM\n",
    .run = run_train,
};

/* `dtrain train CONFIG [options]`: the command line of a training run.
 *
 * This file owns argument parsing and the paths that do not train: --print-config (the
 * effective config, exactly what a checkpoint stores) and --dry-run (validate the config,
 * read the datasets, build the model for the data's shape, print what a run would use).
 * Training itself is dt_train_run() in train/loop.c, the dry run dt_dry_run() in
 * train/dry_run.c; both read the job plan (train/plan.c) made here once.
 *
 * Dedicated flags are turned into config overrides, applied after the --set options, so
 * there is one path for every value and --print-config shows the result:
 *   --instances N -> dist.instances, --threads T -> dist.threads, --json -> log.json,
 *   --quiet -> log.quiet, --log-every N -> log.every, --profile -> log.profile.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/auto_shape.h"
#include "cmd/cli.h"
#include "cmd/cmd.h"
#include "train/config.h"
#include "train/dry_run.h"
#include "train/loop.h"
#include "train/plan.h"
#include "train/rundir.h"
#include "train/setup.h"
#include "util/err.h"
#include "util/log.h"
#include "util/shell.h"

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
    OPT_TIMEOUT,
    OPT_BACKEND,
    OPT_PIN,
    OPT_CPU_LIST,
    OPT_OVERWRITE,
    OPT_MAX_RESTARTS,
    OPT_TRACE,
    OPT_PROBE_AGAIN,
    OPT_CORES,
};

struct train_args {
    const char *config;
    struct dt_cli_common common;
    struct dt_cli_sets sets;  /* --set options, in order */
    struct dt_cli_sets flags; /* overrides from dedicated flags, applied after --set */
    bool print_config, dry_run, config_reference, overwrite;
    int max_restarts;
    const char *resume;
    const char *trace;                              /* --trace FILE */
    bool auto_instances, auto_threads, probe_again; /* --instances/--threads auto */
    int cores;                                      /* --cores: CPUs the auto shapes divide */
    struct dt_cli_launch launch;                    /* --nodes, --master, ... */
};

static int take_flag(void *ctx, int opt, const char *arg)
{
    struct train_args *a = ctx;
    int n;
    int rc = 0;
    if (dt_cli_launch_option(&a->launch, opt, arg, &rc))
        return rc;
    switch (opt) {
    case DT_OPT_SET:
        return dt_cli_sets_add(&a->sets, arg);
    case OPT_INSTANCES:
        if ((a->auto_instances = !strcmp(arg, "auto")))
            return 0;
        if (dt_cli_parse_int("--instances", arg, 1, 1024, &n))
            return dt_fail(DT_EUSAGE,
                           "--instances: expected a count from 1 to 1024 or auto, got "
                           "'%s'",
                           arg);
        return dt_cli_sets_addf(&a->flags, "dist.instances", arg);
    case OPT_THREADS:
        if ((a->auto_threads = !strcmp(arg, "auto")))
            return 0;
        if (dt_cli_parse_int("--threads", arg, 0, 1024, &n))
            return dt_fail(DT_EUSAGE,
                           "--threads: expected a count from 0 to 1024 or auto, got "
                           "'%s'",
                           arg);
        return dt_cli_sets_addf(&a->flags, "dist.threads", arg);
    case OPT_PROBE_AGAIN:
        a->probe_again = true;
        return 0;
    case OPT_CORES:
        return dt_cli_parse_int("--cores", arg, 1, 4096, &a->cores);
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
    case OPT_TIMEOUT: {
        double t;
        return (rc = dt_cli_parse_double("--timeout", arg, 0.001, 86400, &t))
                   ? rc
                   : dt_cli_sets_addf(&a->flags, "dist.timeout", arg);
    }
    case OPT_BACKEND:
        return dt_cli_sets_addf(&a->flags, "dist.backend", arg);
    case DT_OPT_PRECISION:
        return dt_cli_sets_addf(&a->flags, "train.precision", arg);
    case OPT_PIN:
        return dt_cli_sets_addf(&a->flags, "dist.pin", arg);
    case OPT_CPU_LIST:
        return dt_cli_sets_addf(&a->flags, "dist.cpu_list", arg);
    case OPT_OVERWRITE:
        a->overwrite = true;
        return 0;
    case OPT_MAX_RESTARTS:
        return dt_cli_parse_int("--max-restarts", arg, 0, 1000, &a->max_restarts);
    case OPT_TRACE:
        if (!*arg)
            return dt_fail(DT_EUSAGE, "--trace: expected a file name; %s", TRAIN_USAGE);
        a->trace = arg;
        return 0;
    default:
        return dt_fail(DT_EUSAGE, "internal error: option %d not handled; %s", opt, TRAIN_USAGE);
    }
}

static int parse_args(struct train_args *a, int argc, char **argv)
{
    static const struct option longopts[] = {
        DT_CLI_COMMON_LONGOPTS,
        {"set", required_argument, NULL, DT_OPT_SET},
        {"precision", required_argument, NULL, DT_OPT_PRECISION},
        {"instances", required_argument, NULL, OPT_INSTANCES},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"print-config", no_argument, NULL, OPT_PRINT_CONFIG},
        {"dry-run", no_argument, NULL, OPT_DRY_RUN},
        {"log-every", required_argument, NULL, OPT_LOG_EVERY},
        {"profile", no_argument, NULL, OPT_PROFILE},
        {"resume", required_argument, NULL, OPT_RESUME},
        {"config-reference", no_argument, NULL, OPT_CONFIG_REFERENCE},
        DT_CLI_LAUNCH_LONGOPTS,
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"backend", required_argument, NULL, OPT_BACKEND},
        {"pin", required_argument, NULL, OPT_PIN},
        {"cpu-list", required_argument, NULL, OPT_CPU_LIST},
        {"overwrite", no_argument, NULL, OPT_OVERWRITE},
        {"max-restarts", required_argument, NULL, OPT_MAX_RESTARTS},
        {"trace", required_argument, NULL, OPT_TRACE},
        {"probe-again", no_argument, NULL, OPT_PROBE_AGAIN},
        {"cores", required_argument, NULL, OPT_CORES},
        {NULL, 0, NULL, 0},
    };
    int rc = dt_cli_getopt(argc, argv, longopts, &a->common, take_flag, a, TRAIN_USAGE);
    if (rc)
        return rc;
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

/* --resume auto: the newest checkpoint of the run, or a fresh start, so a requeued job script
 * needs no edits. With best.safetensors but no last.safetensors (a run killed before its first
 * last.safetensors, or one deleted) the run continues from best, and says so: the steps after
 * it are trained again, on the same trajectory. */
static const char *resolve_resume_auto(const struct dt_config *cfg, char *path, size_t size)
{
    switch (dt_run_dir_resume_auto(cfg, path, size)) {
    case DT_RESUME_LAST:
        return path;
    case DT_RESUME_BEST:
        dt_log_warn("--resume auto: %s has no last.safetensors; resuming from %s (the steps "
                    "after it are trained again)",
                    cfg->checkpoint.dir, path);
        return path;
    case DT_RESUME_FRESH:
        break;
    }
    dt_log_info("--resume auto: no checkpoint in %s yet, starting from step 0",
                cfg->checkpoint.dir);
    return NULL;
}

/* Settles the run's checkpoint directory (into dir) without touching the disk; dt_train_run
 * creates it once the data has loaded. */
static int choose_checkpoint_dir(const struct dt_config *cfg, const struct train_args *a,
                                 bool resume, char *dir, size_t size, bool *moved)
{
    struct dt_run_dir_opts o = {.resume = resume, .overwrite = a->overwrite};
    int rc = dt_run_dir_choose(cfg, &o, dir, size, moved);
    if (rc)
        return rc;
    if (*moved)
        dt_log_info("%s holds another run's checkpoints (--overwrite replaces them, --resume "
                    "auto continues it): this run writes to %s",
                    cfg->checkpoint.dir, dir);
    dt_log_info("checkpoints: %s/last.safetensors%s", dir,
                cfg->checkpoint.best ? " and best.safetensors" : "");
    return 0;
}

/* A job across hosts needs the user's token (dist/backend.c asks for it when the ranks start);
 * checked here, before anything is created or read, so the mistake costs a second. */
static int check_job_token(const struct dt_job_plan *p, const struct dt_job_opts *o)
{
    bool tcp = p->job.backend == DT_BACKEND_TCP || p->job.backend == DT_BACKEND_HIER;
    bool whole_job_here = !p->job.per_rank && p->job.local_n == p->job.world;
    if (!tcp || p->env.local_key[0] || whole_job_here)
        return 0;
    if (o->token_file)
        return access(o->token_file, R_OK) == 0
                   ? 0
                   : dt_fail(DT_EUSAGE, "--token-file %s: cannot read the job token: %s",
                             o->token_file, strerror(errno));
    const char *env = getenv("DTRAIN_TOKEN");
    if (!env || !*env)
        return dt_fail(DT_EUSAGE, "no job token: set DTRAIN_TOKEN or pass --token-file (every "
                                  "host of a multi-host job needs the same token)");
    return 0;
}

/* --instances auto / --threads auto: the probe (or its cache) picks the shape, which then
 * enters the config as dist.instances and dist.threads, so the plan, --print-config and the
 * checkpoints see it like any other value. A probe loads the datasets (shape->data), and the
 * run trains on those: dist.* changes nothing the loader reads. One host's job only: with several
 * hosts or an outside launcher every host would have to agree on it. */
static int apply_auto_shape(struct train_args *a, const struct dt_job_opts *job,
                            struct dt_config *cfg, struct dt_job_plan *plan,
                            struct dt_auto_shape *shape)
{
    if (plan->job.per_rank || plan->env.nodes > 1)
        return dt_fail(DT_EUSAGE,
                       "--%s auto: probes the shapes of a job on this host; with "
                       "several hosts or %s give --instances and --threads",
                       a->auto_instances ? "instances" : "threads",
                       plan->job.per_rank ? plan->env.source : "--nodes");
    struct dt_auto_shape_opts o = {.job = job,
                                   .auto_instances = a->auto_instances,
                                   .auto_threads = a->auto_threads,
                                   .cores = a->cores,
                                   .again = a->probe_again,
                                   .quiet = cfg->log.quiet};
    int rc = dt_auto_shape_choose(cfg, &o, shape);
    if (rc)
        return rc;
    char v[16];
    snprintf(v, sizeof v, "%d", shape->instances);
    if ((rc = dt_cli_sets_addf(&a->sets, "dist.instances", v)))
        return rc;
    snprintf(v, sizeof v, "%d", shape->threads);
    if ((rc = dt_cli_sets_addf(&a->sets, "dist.threads", v)))
        return rc;
    dt_config_free(cfg);
    memset(cfg, 0, sizeof *cfg);
    if ((rc = dt_config_load(cfg, a->config, (const char *const *)a->sets.items, a->sets.n)))
        return rc;
    return dt_job_plan_make(plan, cfg, job);
}

/* The command line that continues this run after a stop (the `stop` event's "resume"): this
 * one with --resume PATH in place of any --resume, and the checkpoint.dir it moved to. */
static char *resume_command(int argc, char **argv, const char *dir, bool moved)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out)
        return NULL;
    dt_shell_word(out, program_invocation_name);
    for (int i = 0; i < argc; i++) {
        /* --resume X, --resume=X, and the abbreviations getopt takes (--res X) */
        const char *eq = strchr(argv[i], '=');
        size_t n = eq ? (size_t)(eq - argv[i]) : strlen(argv[i]);
        if (n >= 5 && n <= 8 && !strncmp(argv[i], "--resume", n)) {
            i += !eq;
            continue;
        }
        fputc(' ', out);
        dt_shell_word(out, argv[i]);
    }
    if (moved) {
        char set[1100];
        snprintf(set, sizeof set, "checkpoint.dir=%s", dir);
        fputs(" --set ", out);
        dt_shell_word(out, set);
    }
    char path[1100];
    snprintf(path, sizeof path, "%s/last.safetensors", dir);
    fputs(" --resume ", out);
    dt_shell_word(out, path);
    fclose(out);
    return text;
}

static int run_train(int argc, char **argv)
{
    struct train_args a;
    memset(&a, 0, sizeof a);
    dt_cli_launch_init(&a.launch);
    struct dt_config cfg;
    memset(&cfg, 0, sizeof cfg);
    char *resume_cmd = NULL;
    struct dt_auto_shape shape; /* --instances/--threads auto: the choice, perhaps the data */
    memset(&shape, 0, sizeof shape);
    /* The command line as typed, for cmdline.txt and the resume command: getopt_long permutes
     * argv (the config path moves after the options). */
    char **typed = malloc(((size_t)argc + 1) * sizeof *typed);
    if (!typed)
        return dt_fail(DT_ERUNTIME, "out of memory");
    memcpy(typed, argv, (size_t)argc * sizeof *typed);
    typed[argc] = NULL;
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
    if (cfg.log.json)
        dt_log_set_json(true); /* log.json in the file, not only --json */
    if (a.print_config) {
        fputs(cfg.text, stdout);
        goto out;
    }
    struct dt_job_opts job;
    dt_job_opts_init(&job);
    job.verbose = a.common.verbose;
    if (a.launch.nodes)
        job.launch.nodes = a.launch.nodes;
    job.launch.node_rank = a.launch.node_rank;
    job.launch.master = a.launch.master;
    job.iface = a.launch.iface;
    job.token_file = a.launch.token_file;
    job.rendezvous_timeout = a.launch.rendezvous_timeout;
    struct dt_job_plan plan;
    if ((rc = dt_job_plan_make(&plan, &cfg, &job)))
        goto out;
    if ((a.auto_instances || a.auto_threads) && !a.dry_run &&
        (rc = apply_auto_shape(&a, &job, &cfg, &plan, &shape)))
        goto out;
    if (a.dry_run) {
        rc = dt_dry_run(&cfg, &plan, a.common.json);
        goto out;
    }
    if ((rc = check_job_token(&plan, &job)))
        goto out;
    char resume_path[1100];
    const char *resume = a.resume;
    if (resume && !strcmp(resume, "auto"))
        resume = resolve_resume_auto(&cfg, resume_path, sizeof resume_path);
    if (resume && (rc = dt_run_check_resume(resume)))
        goto out;
    /* Only the process of global rank 0 writes checkpoints, so it alone settles where. */
    bool leader = plan.job.rank_base == 0, moved = false;
    char dir[sizeof cfg.checkpoint.dir];
    snprintf(dir, sizeof dir, "%s", cfg.checkpoint.dir);
    if (leader && (rc = choose_checkpoint_dir(&cfg, &a, resume != NULL, dir, sizeof dir, &moved)))
        goto out;
    resume_cmd = resume_command(argc, typed, dir, moved); /* argv[0]: "train" */
    struct dt_train_options opt = {.resume = resume,
                                   .job = job,
                                   .plan = &plan,
                                   .checkpoint_dir = dir,
                                   .max_restarts = a.max_restarts,
                                   .create_dir = leader,
                                   .resume_command = resume_cmd,
                                   .trace = a.trace,
                                   .probe_json = shape.json,
                                   .data = shape.loaded ? &shape.data : NULL,
                                   .argc = argc,
                                   .argv = typed};
    shape.loaded = false; /* the run's now, freed there */
    rc = dt_train_run(&cfg, &opt);
out:
    if (shape.loaded)
        dt_data_free(&shape.data);
    free(resume_cmd);
    free(shape.json);
    free(typed);
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
        "                       like the file; strings may be bare, lists as [0.5, "
        "0.25])\n" DT_CLI_PRECISION_HELP
        "      --instances N    processes training together (sets dist.instances);\n"
        "                       auto = probe the shapes that fit this machine's CPUs\n"
        "                       and train with the fastest (cached; docs/cli.md)\n"
        "      --threads T      compute threads per instance; 0 = cores / instances\n"
        "                       (sets dist.threads); auto = probe, as --instances auto\n"
        "      --probe-again    with auto: measure again instead of the cached choice\n"
        "      --cores C        with auto: how many CPUs the probed shapes divide\n"
        "                       (default: the CPUs this process may use)\n"
        "      --print-config   print the effective config (file + defaults + overrides) in\n"
        "                       libconfig syntax and exit\n"
        "      --dry-run        check the config, read the datasets and build the model, print\n"
        "                       a summary (files, counts, shape, classes, label histograms)\n"
        "                       and exit without training\n"
        "      --log-every N    progress line every N steps when stderr is not a terminal;\n"
        "                       0 = once per epoch (sets log.every)\n"
        "      --profile        print per-layer forward/backward times at the end, then the\n"
        "                       run's totals of data, forward, backward, all-reduce wait,\n"
        "                       optimizer, checkpoint and eval seconds (sets log.profile)\n"
        "      --trace FILE     write a Chrome trace (Perfetto, chrome://tracing) of the run:\n"
        "                       a track per rank and thread with steps, layers, all-reduce,\n"
        "                       optimizer, data, evaluation and checkpoint spans\n"
        "      --resume PATH    continue from the checkpoint PATH (same trajectory as an\n"
        "                       uninterrupted run); auto = checkpoint.dir's last.safetensors,\n"
        "                       else its best.safetensors (with a warning), else a fresh start\n"
        "                       (requeued jobs)\n"
        "      --max-restarts N when a rank dies or a collective fails, stop every rank and\n"
        "                       start again from the newest last.safetensors, up to N times\n"
        "                       (torchrun's --max-restarts; default 0), waiting 1, 2, 4, ...\n"
        "                       30 s before each; a failure that repeats is not restarted\n"
        "      --overwrite      replace the checkpoints of another run in checkpoint.dir\n"
        "                       (without it a derived runs/NAME moves on to runs/NAME-2, and\n"
        "                       a checkpoint.dir you named is refused)\n"
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

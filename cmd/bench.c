/* `dtrain bench`: the command line of the two benchmarks.
 *
 *   dtrain bench CONFIG [--cores C | --threads-only | --grid LIST] [--steps S | --epochs E] ...
 *   dtrain bench allreduce [--backend shm|tcp|hier|mpi] [--instances N] [--dtype fp32|bf16]
 * [--min-bytes A] ...
 *
 * This file only parses and dispatches; the sweep is cmd/bench/sweep.c, the collective
 * benchmark cmd/bench/allreduce.c, and both hand a table to cmd/bench/report.c / plot.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/bench/bench.h"
#include "cmd/cli.h"
#include "cmd/cmd.h"
#include "nn/precision.h"
#include "util/err.h"
#include "util/log.h"
#include "util/parse.h"

#define BENCH_USAGE                                                                                \
    "usage: dtrain bench CONFIG [options] | dtrain bench allreduce [options] (try 'dtrain bench "  \
    "--help')"

#define DEFAULT_STEPS  50
#define DEFAULT_WARMUP 5

enum {
    OPT_CORES = DT_OPT_COMMAND_BASE,
    OPT_THREADS_ONLY,
    OPT_GRID,
    OPT_STEPS,
    OPT_WARMUP,
    OPT_EPOCHS,
    OPT_REPEAT,
    OPT_CSV,
    OPT_PLOT,
    OPT_TIMEOUT,
    OPT_BACKEND,
    OPT_INSTANCES,
    OPT_MIN_BYTES,
    OPT_MAX_BYTES,
    OPT_ITERS,
    OPT_NO_PIN,
    OPT_DTYPE,
};

struct bench_args {
    struct dt_cli_common common;
    struct dt_cli_sets sets;
    const char *target; /* CONFIG or "allreduce" */
    int cores, steps, warmup, epochs, repeat, instances, iters;
    bool threads_only, steps_given, no_pin;
    const char *grid, *csv, *plot, *backend;
    const char *precisions;      /* --precision LIST: the sweep once per value */
    const char *dtype;           /* allreduce --dtype: fp32 | bf16 */
    struct dt_cli_launch launch; /* --nodes (also hier's simulated hosts), --master, ... */
    double timeout;
    size_t min_bytes, max_bytes;
};

static int take_option(void *ctx, int opt, const char *arg)
{
    struct bench_args *a = ctx;
    int rc;
    if (dt_cli_launch_option(&a->launch, opt, arg, &rc))
        return rc;
    switch (opt) {
    case DT_OPT_SET:
        return dt_cli_sets_add(&a->sets, arg);
    case DT_OPT_PRECISION:
        a->precisions = arg;
        return 0;
    case OPT_CORES:
        return dt_cli_parse_int("--cores", arg, 1, 4096, &a->cores);
    case OPT_THREADS_ONLY:
        a->threads_only = true;
        return 0;
    case OPT_GRID:
        a->grid = arg;
        return 0;
    case OPT_STEPS:
        a->steps_given = true;
        return dt_cli_parse_int("--steps", arg, 1, 1000000000, &a->steps);
    case OPT_WARMUP:
        return dt_cli_parse_int("--warmup", arg, 0, 1000000000, &a->warmup);
    case OPT_EPOCHS:
        return dt_cli_parse_int("--epochs", arg, 1, 100000, &a->epochs);
    case OPT_REPEAT:
        return dt_cli_parse_int("--repeat", arg, 1, 64, &a->repeat);
    case OPT_CSV:
        a->csv = arg;
        return 0;
    case OPT_PLOT:
        a->plot = arg;
        return 0;
    case OPT_TIMEOUT:
        return dt_cli_parse_double("--timeout", arg, 0, 1e7, &a->timeout);
    case OPT_BACKEND:
        if (strcmp(arg, "shm") && strcmp(arg, "tcp") && strcmp(arg, "hier") && strcmp(arg, "mpi"))
            return dt_fail(DT_EUSAGE, "--backend: expected shm, tcp, hier or mpi, got '%s'", arg);
        a->backend = arg;
        return 0;
    case OPT_INSTANCES:
        return dt_cli_parse_int("--instances", arg, 1, 1024, &a->instances);
    case OPT_MIN_BYTES:
        return dt_parse_bytes("--min-bytes", arg, (size_t)16 << 30, &a->min_bytes);
    case OPT_MAX_BYTES:
        return dt_parse_bytes("--max-bytes", arg, (size_t)16 << 30, &a->max_bytes);
    case OPT_ITERS:
        return dt_cli_parse_int("--iters", arg, 1, 1000000, &a->iters);
    case OPT_NO_PIN:
        a->no_pin = true;
        return 0;
    case OPT_DTYPE:
        a->dtype = arg;
        return 0;
    default:
        return dt_fail(DT_EUSAGE, "internal error: option %d not handled; %s", opt, BENCH_USAGE);
    }
}

static int parse_args(struct bench_args *a, int argc, char **argv)
{
    static const struct option longopts[] = {
        DT_CLI_COMMON_LONGOPTS,
        {"set", required_argument, NULL, DT_OPT_SET},
        {"precision", required_argument, NULL, DT_OPT_PRECISION},
        {"cores", required_argument, NULL, OPT_CORES},
        {"threads-only", no_argument, NULL, OPT_THREADS_ONLY},
        {"grid", required_argument, NULL, OPT_GRID},
        {"steps", required_argument, NULL, OPT_STEPS},
        {"warmup", required_argument, NULL, OPT_WARMUP},
        {"epochs", required_argument, NULL, OPT_EPOCHS},
        {"repeat", required_argument, NULL, OPT_REPEAT},
        {"csv", required_argument, NULL, OPT_CSV},
        {"plot", required_argument, NULL, OPT_PLOT},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"backend", required_argument, NULL, OPT_BACKEND},
        {"instances", required_argument, NULL, OPT_INSTANCES},
        {"min-bytes", required_argument, NULL, OPT_MIN_BYTES},
        {"max-bytes", required_argument, NULL, OPT_MAX_BYTES},
        {"iters", required_argument, NULL, OPT_ITERS},
        {"no-pin", no_argument, NULL, OPT_NO_PIN},
        {"dtype", required_argument, NULL, OPT_DTYPE},
        DT_CLI_LAUNCH_LONGOPTS,
        {NULL, 0, NULL, 0},
    };
    int rc = dt_cli_getopt(argc, argv, longopts, &a->common, take_option, a, BENCH_USAGE);
    if (rc)
        return rc;
    if (a->common.help)
        return 0;
    if (optind >= argc)
        return dt_fail(DT_EUSAGE, "bench: no config file (or 'allreduce') given; %s", BENCH_USAGE);
    if (optind + 1 < argc)
        return dt_fail(DT_EUSAGE, "bench: one config file expected, got '%s' too; %s",
                       argv[optind + 1], BENCH_USAGE);
    a->target = argv[optind];
    return 0;
}

/* --precision fp32,bf16: the whole sweep once per value, each run with train.precision set
 * (after the --set overrides), each table under a line naming it. */
static int sweep_precisions(struct bench_args *a, struct dt_bench_sweep_opts *o,
                            const struct dt_bench_machine *m)
{
    char list[64], valid[64];
    if (snprintf(list, sizeof list, "%s", a->precisions) >= (int)sizeof list)
        return dt_fail(DT_EUSAGE, "--precision: list too long");
    dt_names_join(&dt_precision_names, valid, sizeof valid);
    for (char *p = strtok(list, ","); p; p = strtok(NULL, ","))
        if (dt_names_find(&dt_precision_names, p) < 0)
            return dt_fail(DT_EUSAGE, "--precision: unknown precision '%s' (expected %s)", p,
                           valid);
    snprintf(list, sizeof list, "%s", a->precisions);
    int rc = 0;
    for (char *p = strtok(list, ","); p && !rc; p = strtok(NULL, ",")) {
        if ((rc = dt_cli_sets_addf(&a->sets, "train.precision", p)))
            break;
        o->sets = a->sets.items;
        o->nsets = a->sets.n;
        if (!a->common.json)
            printf("# precision: %s (train.precision)\n", p);
        fflush(stdout);
        rc = dt_bench_sweep(o, m);
        free(a->sets.items[--a->sets.n]);
    }
    return rc;
}

static int run_sweep(struct bench_args *a, const struct dt_bench_machine *m)
{
    if ((a->threads_only && a->grid) || (a->epochs && a->steps_given))
        return dt_fail(DT_EUSAGE, "bench: %s; %s",
                       a->grid ? "--grid and --threads-only exclude each other"
                               : "--steps and --epochs exclude each other",
                       BENCH_USAGE);
    if (a->backend || a->instances || a->min_bytes || a->max_bytes || a->iters || a->no_pin ||
        a->dtype || dt_cli_launch_given(&a->launch))
        return dt_fail(DT_EUSAGE,
                       "bench: --backend, --instances, --nodes, --min-bytes, --max-bytes, "
                       "--iters, --no-pin, --dtype, --master, --node-rank, --iface, --token-file "
                       "and --rendezvous-timeout belong to 'bench allreduce' (a training sweep "
                       "takes --set dist.grad_dtype=...); %s",
                       BENCH_USAGE);
    struct dt_bench_sweep_opts o = {
        .config = a->target,
        .sets = a->sets.items,
        .nsets = a->sets.n,
        .cores = a->cores ? a->cores : m->cores,
        .threads_only = a->threads_only,
        .steps = a->steps ? a->steps : DEFAULT_STEPS,
        .warmup = a->warmup >= 0 ? a->warmup : DEFAULT_WARMUP,
        .epochs = a->epochs,
        .repeat = a->repeat ? a->repeat : 1,
        .timeout = a->timeout,
        .out = {a->common.json, a->common.quiet, a->common.verbose, a->csv, a->plot},
    };
    int n = a->grid           ? dt_bench_combos_parse(a->grid, &o.combos)
            : a->threads_only ? dt_bench_combos_threads(o.cores, &o.combos)
                              : dt_bench_combos_split(o.cores, &o.combos);
    if (n < 0)
        return n;
    o.ncombos = n;
    if (m->cpus > 0 && o.cores > m->cpus)
        dt_log_warn("bench: --cores %d exceeds the %d usable CPUs: the larger combinations are "
                    "oversubscribed and their figures say little",
                    o.cores, m->cpus);
    int rc = a->precisions ? sweep_precisions(a, &o, m) : dt_bench_sweep(&o, m);
    free(o.combos);
    return rc;
}

static int run_allreduce(struct bench_args *a, const struct dt_bench_machine *m)
{
    if (a->grid || a->threads_only || a->steps_given || a->epochs || a->repeat || a->sets.n ||
        a->precisions || a->cores || a->warmup >= 0)
        return dt_fail(DT_EUSAGE,
                       "bench allreduce: --grid, --threads-only, --steps, --warmup, "
                       "--epochs, --repeat, --cores, --set and --precision belong to the training "
                       "sweep; %s",
                       BENCH_USAGE);
    struct dt_bench_allreduce_opts o = {
        .backend = a->backend ? a->backend : "shm",
        .instances = a->instances ? a->instances : (m->cores > 1 ? m->cores : 2),
        .nodes = a->launch.nodes ? a->launch.nodes : 2,
        .min_bytes = a->min_bytes ? a->min_bytes : 1024,
        .max_bytes = a->max_bytes ? a->max_bytes : (size_t)64 << 20,
        .iters = a->iters,
        .no_pin = a->no_pin,
        .timeout = a->timeout > 0 ? a->timeout : 60,
        .rendezvous_timeout = a->launch.rendezvous_timeout > 0 ? a->launch.rendezvous_timeout : 30,
        .out = {a->common.json, a->common.quiet, a->common.verbose, a->csv, a->plot},
    };
    if (a->dtype) {
        int v = dt_names_find(&dt_grad_dtype_names, a->dtype);
        if (v < 0) {
            char names[64];
            dt_names_join(&dt_grad_dtype_names, names, sizeof names);
            return dt_fail(DT_EUSAGE, "bench allreduce: --dtype: unknown dtype '%s' (valid: %s)",
                           a->dtype, names);
        }
        o.dtype = (enum dt_grad_dtype)v;
    }
    const struct dt_cli_launch *l = &a->launch;
    if (l->master || l->node_rank >= 0 || l->iface || l->token_file) {
        if (strcmp(o.backend, "tcp") || !l->master || l->node_rank < 0 || !l->nodes || a->instances)
            return dt_fail(DT_EUSAGE,
                           "bench allreduce: across hosts, give --backend tcp --nodes M "
                           "--node-rank K --master HOST:PORT (one rank per host, no "
                           "--instances); %s",
                           BENCH_USAGE);
        if (l->node_rank >= l->nodes)
            return dt_fail(DT_EUSAGE, "bench allreduce: --node-rank %d is not in 0..%d",
                           l->node_rank, l->nodes - 1);
        o.master = l->master, o.iface = l->iface, o.token_file = l->token_file;
        o.node_rank = l->node_rank;
        o.instances = l->nodes;
    }
    if (o.min_bytes > o.max_bytes)
        return dt_fail(DT_EUSAGE, "bench allreduce: --min-bytes %zu is larger than --max-bytes %zu",
                       o.min_bytes, o.max_bytes);
    return dt_bench_allreduce(&o, m);
}

static int run_bench(int argc, char **argv)
{
    struct bench_args a;
    memset(&a, 0, sizeof a);
    a.warmup = -1;
    dt_cli_launch_init(&a.launch);
    int rc = parse_args(&a, argc, argv);
    if (!rc && a.common.help)
        fputs(dt_cmd_bench.help, stdout);
    if (rc || a.common.help)
        goto out;
    dt_cli_apply_log_level(&a.common);
    struct dt_bench_machine m;
    dt_bench_machine_read(&m);
    rc = strcmp(a.target, "allreduce") == 0 ? run_allreduce(&a, &m) : run_sweep(&a, &m);
out:
    dt_cli_sets_free(&a.sets);
    return rc;
}

const struct dt_command dt_cmd_bench = {
    .name = "bench",
    .summary = "sweep instances x threads, benchmark collectives",
    .help =
        "usage: dtrain bench CONFIG [options]\n"
        "       dtrain bench allreduce [options]\n"
        "\n"
        "Training sweep: runs CONFIG for every split of C cores into instances x threads\n"
        "(1 x C, 2 x C/2, ..., C x 1), each combination a separate `dtrain train` run, and\n"
        "prints a table: instances, threads, s/step (or s/epoch), samples/s, spread of the\n"
        "repeats (+-%, (max-min)/median), speedup over 1 x C, parallel efficiency (samples/s\n"
        "per core relative to 1 x 1, or to the baseline row when 1 x 1 did not run), the\n"
        "training loss and, with --epochs, the test accuracy. A header records the machine\n"
        "(CPU, sockets, cores, SMT), the dtrain version and the BLAS with its threading.\n"
        "A combination that fails is reported in its row and the sweep goes on; Ctrl-C stops\n"
        "the sweep and prints the rows done (exit 130).\n"
        "\n"
        "sweep options:\n"
        "      --cores C        cores to split (default: the usable physical cores)\n"
        "      --threads-only   one instance, threads 1, 2, 4, ..., C (speedup over 1 x 1)\n"
        "      --grid LIST      explicit combinations, e.g. \"1x16,2x8,4x4\"\n"
        "      --steps S        timed steps per run (default 50), after the warm-up\n"
        "      --warmup W       warm-up steps per run, not timed (default 5)\n"
        "      --epochs E       run E whole epochs instead (s/epoch, test accuracy)\n"
        "      --repeat R       run each combination R times; report the median and spread\n"
        "      --timeout SECS   give up on a run after SECS seconds (reported as failed)\n"
        "      --set KEY=VALUE  config override passed on to every run (repeatable)\n"
        "      --precision LIST the whole sweep once per value of train.precision, e.g.\n"
        "                       fp32,bf16 (one table each, under a '# precision:' line)\n"
        "\n"
        "allreduce options (float32 sum, checked exactly after every size):\n"
        "      --backend B      shm (default), tcp (loopback ring), hier (shm inside each of\n"
        "                       --nodes simulated hosts + tcp between them), mpi (run\n"
        "                       build-mpi/dtrain from `make dtrain-mpi` under mpirun)\n"
        "      --instances N    ranks (default: the usable physical cores, at least 2)\n"
        "      --nodes K        hier: simulated hosts, N divisible by K (default 2)\n"
        "      --min-bytes A    smallest message (default 1K; K, M, G suffixes)\n"
        "      --max-bytes B    largest message (default 64M); sizes double from A to B\n"
        "      --iters I        timed iterations per size (default: enough for ~0.2 s)\n"
        "      --timeout SECS   collective timeout (default 60)\n"
        "      --rendezvous-timeout SECS  how long every rank has to arrive (tcp, hier;\n"
        "                       default 30); DTRAIN_SOCKET_IFNAME and DTRAIN_SOCKET_BUFFER\n"
        "                       apply as in train\n"
        "      --no-pin         leave the ranks unpinned (default: one core each, as\n"
        "                       `train` and mpirun place them)\n"
        "      --dtype D        what is sent: fp32 (default) or bf16, dist.grad_dtype's\n"
        "                       all-reduce (bf16 terms, fp32 sums); bytes stay the float\n"
        "                       array's, algbw and busbw count the bytes sent (half)\n"
        "      --nodes M --node-rank K --master HOST:PORT [--iface NAME] [--token-file F]\n"
        "                       tcp across real hosts: run one `dtrain bench allreduce`\n"
        "                       per host (rank K of M; DTRAIN_TOKEN or --token-file alike\n"
        "                       on all);\n"
        "                       rank 0 listens on PORT and prints the table\n"
        "  Columns: bytes, us (median latency), algbw_GBs (bytes sent / time) and busbw_GBs\n"
        "  (algbw x 2(n-1)/n, the nccl-tests convention), iters, dtype, check.\n"
        "\n"
        "output options (both):\n"
        "      --csv FILE       also write the table as CSV (header row, \"error\" column last)\n"
        "      --plot FILE.svg  also draw a bar chart (samples/s or bus bandwidth per "
        "row)\n" DT_CLI_COMMON_HELP
        "  With --json stdout carries one \"bench_machine\" object, then one object per row\n"
        "  (\"bench_row\" / \"allreduce_row\", with \"ok\" and, when failed, \"error\").\n"
        "  --quiet hides the progress lines on stderr, not the results.\n"
        "\n"
        "exit codes: 0 ok (also when some combinations failed: see their rows), 1 runtime\n"
        "            failure (e.g. a rank of the all-reduce job died), 2 usage or config\n"
        "            error, 3 data error (e.g. the config file is missing), 130/143 stopped\n"
        "            by SIGINT/SIGTERM (the rows done are printed)\n",
    .run = run_bench,
};

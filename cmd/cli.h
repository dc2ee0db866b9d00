/* Command-line conventions shared by the subcommands (train, eval, bench, fetch).
 *
 * Every command parses with getopt_long in the same way: the common options (--quiet,
 * --verbose, --json, --help) come from DT_CLI_COMMON_LONGOPTS and are handled by
 * dt_cli_common_option(); repeated --set KEY=VALUE options are collected in a
 * struct dt_cli_sets and handed to dt_config_load(); an unknown option, a missing argument
 * or a bad number fails with DT_EUSAGE and ONE line: what was wrong plus the command's short
 * usage, which main.c prints. Commands keep their full help text in struct dt_command and
 * can append DT_CLI_COMMON_HELP so the common options read the same everywhere.
 */
#ifndef DT_CMD_CLI_H
#define DT_CMD_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>

/* Option codes above the char range for long-only options. Commands number their own from
 * DT_OPT_COMMAND_BASE. */
enum {
    DT_OPT_JSON = 0x100,
    DT_OPT_SET,
    DT_OPT_NODES, /* the launch flags (struct dt_cli_launch) */
    DT_OPT_NODE_RANK,
    DT_OPT_MASTER,
    DT_OPT_IFACE,
    DT_OPT_TOKEN_FILE,
    DT_OPT_RENDEZVOUS_TIMEOUT,
    DT_OPT_PRECISION, /* train, eval, predict: --precision P = --set train.precision=P */
    DT_OPT_COMMAND_BASE = 0x200,
};

/* The help line of --precision, the same on every face. */
#define DT_CLI_PRECISION_HELP                                                                      \
    "      --precision P    fp32 or bf16: conv2d and linear arithmetic (train.precision;\n"        \
    "                       bf16 = autocast-style mixed precision, docs/bf16.md)\n"

/* getopt_long short-option string for the common options: the leading ':' makes getopt
 * report a missing argument as ':' instead of printing its own message. */
#define DT_CLI_COMMON_SHORTOPTS ":qvh"

#define DT_CLI_COMMON_LONGOPTS                                                                     \
    {"quiet", no_argument, NULL, 'q'}, {"verbose", no_argument, NULL, 'v'},                        \
        {"json", no_argument, NULL, DT_OPT_JSON},                                                  \
    {                                                                                              \
        "help", no_argument, NULL, 'h'                                                             \
    }

#define DT_CLI_COMMON_HELP                                                                         \
    "  -q, --quiet          print nothing but errors\n"                                            \
    "  -v, --verbose        also print debugging detail (cores, files, timings)\n"                 \
    "      --json           machine-readable output: one JSON object per line on stdout\n"         \
    "  -h, --help           show this help and exit\n"

struct dt_cli_common {
    bool quiet, verbose, json, help;
};

/* The one option loop of every command: getopt_long over longopts (which include
 * DT_CLI_COMMON_LONGOPTS), the common options recorded in *common, every other one handed to
 * take(ctx, opt, optarg). 0 with optind at the first operand, or the first error (a bad
 * option gets `usage` appended). */
int dt_cli_getopt(int argc, char **argv, const struct option *longopts,
                  struct dt_cli_common *common, int (*take)(void *ctx, int opt, const char *arg),
                  void *ctx, const char *usage);

/* Handles a common option: returns true when `opt` was one (and records it). */
bool dt_cli_common_option(struct dt_cli_common *common, int opt);

/* Sets the process-wide log level from --quiet / --verbose (quiet wins). */
void dt_cli_apply_log_level(const struct dt_cli_common *common);

/* For getopt_long's '?' and ':' returns: the one-line DT_EUSAGE error naming the option,
 * followed by `usage` (e.g. "usage: dtrain train CONFIG [options]"). */
int dt_cli_bad_option(int opt, char **argv, const char *usage);

/* Parses OPTARG of option `name` as an integer in [min, max]. */
int dt_cli_parse_int(const char *name, const char *arg, long min, long max, int *out);
/* The same for a number (seconds, rates) in [lo, hi]. */
int dt_cli_parse_double(const char *name, const char *arg, double lo, double hi, double *out);

/* The flags of a job across hosts, shared by `train` and `bench allreduce` so both take the
 * same spellings and ranges: --nodes M (1..65536), --node-rank K (0..65535), --master
 * HOST:PORT, --iface NAME, --token-file F, --rendezvous-timeout S (0.001..86400 s). */
struct dt_cli_launch {
    int nodes;                               /* 0 when not given */
    int node_rank;                           /* -1 when not given */
    const char *master, *iface, *token_file; /* NULL when not given */
    double rendezvous_timeout;               /* 0 when not given */
};

#define DT_CLI_LAUNCH_LONGOPTS                                                                     \
    {"nodes", required_argument, NULL, DT_OPT_NODES},                                              \
        {"node-rank", required_argument, NULL, DT_OPT_NODE_RANK},                                  \
        {"master", required_argument, NULL, DT_OPT_MASTER},                                        \
        {"iface", required_argument, NULL, DT_OPT_IFACE},                                          \
        {"token-file", required_argument, NULL, DT_OPT_TOKEN_FILE},                                \
    {                                                                                              \
        "rendezvous-timeout", required_argument, NULL, DT_OPT_RENDEZVOUS_TIMEOUT                   \
    }

void dt_cli_launch_init(struct dt_cli_launch *l);
/* True when `opt` is a launch flag: its value is then checked and recorded, *rc set to 0 or
 * the DT_EUSAGE naming the flag. */
bool dt_cli_launch_option(struct dt_cli_launch *l, int opt, const char *arg, int *rc);
/* Whether any launch flag was given. */
bool dt_cli_launch_given(const struct dt_cli_launch *l);

/* Collected KEY=VALUE overrides, in command-line order; the strings are owned. */
struct dt_cli_sets {
    char **items;
    int n, cap;
};

/* Adds a --set argument (checks the KEY=VALUE shape only; dt_config_load checks the rest). */
int dt_cli_sets_add(struct dt_cli_sets *sets, const char *assignment);
/* Adds "key=value" built from a dedicated flag (--instances 4 -> dist.instances=4). */
int dt_cli_sets_addf(struct dt_cli_sets *sets, const char *key, const char *value);
void dt_cli_sets_free(struct dt_cli_sets *sets);

#endif

/* Shared command-line helpers; see cmd/cli.h for the conventions they implement.
 * Errors are one line so that a script's stderr shows exactly what went wrong. */
#include "cmd/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/log.h"

bool dt_cli_common_option(struct dt_cli_common *common, int opt)
{
    switch (opt) {
    case 'q':
        common->quiet = true;
        return true;
    case 'v':
        common->verbose = true;
        return true;
    case DT_OPT_JSON:
        common->json = true;
        dt_log_set_json(true);
        return true;
    case 'h':
        common->help = true;
        return true;
    default:
        return false;
    }
}

int dt_cli_getopt(int argc, char **argv, const struct option *longopts,
                  struct dt_cli_common *common, int (*take)(void *ctx, int opt, const char *arg),
                  void *ctx, const char *usage)
{
    optind = 0; /* GNU: full reset, so a second parse in one process starts clean */
    opterr = 0;
    int opt, rc;
    while ((opt = getopt_long(argc, argv, DT_CLI_COMMON_SHORTOPTS, longopts, NULL)) != -1) {
        if (opt == '?' || opt == ':')
            return dt_cli_bad_option(opt, argv, usage);
        if (!dt_cli_common_option(common, opt) && (rc = take(ctx, opt, optarg)))
            return rc;
    }
    return 0;
}

void dt_cli_apply_log_level(const struct dt_cli_common *common)
{
    dt_log_set_level(common->quiet     ? DT_LOG_QUIET
                     : common->verbose ? DT_LOG_VERBOSE
                                       : DT_LOG_NORMAL);
}

int dt_cli_bad_option(int opt, char **argv, const char *usage)
{
    /* getopt has already advanced optind past the offending word. */
    const char *word = optind > 0 ? argv[optind - 1] : "?";
    if (opt == ':')
        return dt_fail(DT_EUSAGE, "option '%s' needs a value; %s", word, usage);
    if (optopt && optopt < 0x100 && word[0] == '-' && word[1] != '-')
        return dt_fail(DT_EUSAGE, "unknown option '-%c'; %s", optopt, usage);
    return dt_fail(DT_EUSAGE, "unknown option '%s'; %s", word, usage);
}

int dt_cli_parse_int(const char *name, const char *arg, long min, long max, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (errno || end == arg || *end || v < min || v > max)
        return dt_fail(DT_EUSAGE, "%s: expected an integer between %ld and %ld, got '%s'", name,
                       min, max, arg);
    *out = (int)v;
    return 0;
}

int dt_cli_parse_double(const char *name, const char *arg, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || end == arg || *end || !(v >= lo && v <= hi))
        return dt_fail(DT_EUSAGE, "%s expects a number from %g to %g, got '%s'", name, lo, hi, arg);
    *out = v;
    return 0;
}

void dt_cli_launch_init(struct dt_cli_launch *l)
{
    memset(l, 0, sizeof *l);
    l->node_rank = -1;
}

bool dt_cli_launch_option(struct dt_cli_launch *l, int opt, const char *arg, int *rc)
{
    *rc = 0;
    switch (opt) {
    case DT_OPT_NODES:
        *rc = dt_cli_parse_int("--nodes", arg, 1, 65536, &l->nodes);
        return true;
    case DT_OPT_NODE_RANK:
        *rc = dt_cli_parse_int("--node-rank", arg, 0, 65535, &l->node_rank);
        return true;
    case DT_OPT_MASTER:
        l->master = arg;
        return true;
    case DT_OPT_IFACE:
        l->iface = arg;
        return true;
    case DT_OPT_TOKEN_FILE:
        l->token_file = arg;
        return true;
    case DT_OPT_RENDEZVOUS_TIMEOUT:
        *rc =
            dt_cli_parse_double("--rendezvous-timeout", arg, 0.001, 86400, &l->rendezvous_timeout);
        return true;
    default:
        return false;
    }
}

bool dt_cli_launch_given(const struct dt_cli_launch *l)
{
    return l->nodes || l->node_rank >= 0 || l->master || l->iface || l->token_file ||
           l->rendezvous_timeout > 0;
}

static int sets_push(struct dt_cli_sets *sets, char *item)
{
    if (!item)
        return dt_fail(DT_ERUNTIME, "out of memory collecting --set options");
    if (sets->n == sets->cap) {
        int cap = sets->cap ? 2 * sets->cap : 8;
        char **items = realloc(sets->items, (size_t)cap * sizeof *items);
        if (!items) {
            free(item);
            return dt_fail(DT_ERUNTIME, "out of memory collecting --set options");
        }
        sets->items = items;
        sets->cap = cap;
    }
    sets->items[sets->n++] = item;
    return 0;
}

int dt_cli_sets_add(struct dt_cli_sets *sets, const char *assignment)
{
    const char *eq = strchr(assignment, '=');
    if (!eq || eq == assignment)
        return dt_fail(DT_EUSAGE, "--set '%s': expected KEY=VALUE, like train.epochs=5",
                       assignment);
    return sets_push(sets, strdup(assignment));
}

int dt_cli_sets_addf(struct dt_cli_sets *sets, const char *key, const char *value)
{
    size_t len = strlen(key) + strlen(value) + 2;
    char *item = malloc(len);
    if (item)
        snprintf(item, len, "%s=%s", key, value);
    return sets_push(sets, item);
}

void dt_cli_sets_free(struct dt_cli_sets *sets)
{
    for (int i = 0; i < sets->n; i++)
        free(sets->items[i]);
    free(sets->items);
    sets->items = NULL;
    sets->n = sets->cap = 0;
}

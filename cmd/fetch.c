/* `dtrain fetch`: argv -> struct dt_fetch_options -> dt_fetch_run (data/fetch.h, the engine:
 * sources, verification, trust records, --list). This file holds the flags, DTRAIN_MIRROR, the
 * help text and the --quiet log level; the error is left in dt_last_error() for main.c. */
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "cmd/cmd.h"
#include "data/checksum.h"
#include "data/fetch.h"
#include "data/registry.h"
#include "util/err.h"
#include "util/log.h"

/* What argv holds beyond the engine's options. */
struct fetch_args {
    struct dt_fetch_options o;
    bool quiet;
    char *env_mirrors; /* owned copy of DTRAIN_MIRROR that o.mirrors points into */
};

enum {
    OPT_MIRROR = 256,
    OPT_FROM,
    OPT_OFFLINE,
    OPT_NO_SYSTEM,
    OPT_REGISTRY,
    OPT_RETRIES,
    OPT_RETRY_DELAY,
    OPT_CONNECT_TIMEOUT,
    OPT_STALL_TIMEOUT,
    OPT_DEADLINE,
    OPT_MAX_SIZE,
    OPT_JSON,
    OPT_TRUST,
    OPT_SHA256,
};

static const struct option long_opts[] = {
    {"dir", required_argument, NULL, 'd'},
    {"list", no_argument, NULL, 'l'},
    {"verify", no_argument, NULL, 'V'},
    {"force", no_argument, NULL, 'f'},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {"json", no_argument, NULL, OPT_JSON},
    {"mirror", required_argument, NULL, OPT_MIRROR},
    {"from", required_argument, NULL, OPT_FROM},
    {"offline", no_argument, NULL, OPT_OFFLINE},
    {"no-system-copies", no_argument, NULL, OPT_NO_SYSTEM},
    {"registry", required_argument, NULL, OPT_REGISTRY},
    {"retries", required_argument, NULL, OPT_RETRIES},
    {"retry-delay", required_argument, NULL, OPT_RETRY_DELAY},
    {"connect-timeout", required_argument, NULL, OPT_CONNECT_TIMEOUT},
    {"stall-timeout", required_argument, NULL, OPT_STALL_TIMEOUT},
    {"deadline", required_argument, NULL, OPT_DEADLINE},
    {"trust", no_argument, NULL, OPT_TRUST},
    {"sha256", required_argument, NULL, OPT_SHA256},
    {"max-size", required_argument, NULL, OPT_MAX_SIZE},
    {NULL, 0, NULL, 0},
};

static int parse_number(const char *opt, const char *arg, double lo, double hi, double *out)
{
    int rc = dt_cli_parse_double(opt, arg, lo, hi, out);
    return rc ? dt_fail_context(rc, "fetch") : 0;
}

static int parse_numeric_option(struct dt_fetch_options *o, int c, const char *arg)
{
    double v = 0;
    int rc = 0;
    switch (c) {
    case OPT_RETRIES:
        if (!(rc = parse_number("--retries", arg, 0, 100, &v)) && v != floor(v))
            rc = dt_fail(DT_EUSAGE, "fetch: --retries expects a whole number, got '%s'", arg);
        o->retries = (int)v;
        break;
    case OPT_RETRY_DELAY:
        rc = parse_number("--retry-delay", arg, 0, 3600, &o->retry_delay);
        break;
    case OPT_CONNECT_TIMEOUT:
        rc = parse_number("--connect-timeout", arg, 1, 3600, &v);
        o->connect_timeout = (long)v;
        break;
    case OPT_STALL_TIMEOUT:
        rc = parse_number("--stall-timeout", arg, 1, 3600, &v);
        o->stall_timeout = (long)v;
        break;
    case OPT_DEADLINE:
        rc = parse_number("--deadline", arg, 1, 86400, &v);
        o->deadline = (long)v;
        break;
    case OPT_MAX_SIZE:
        if (!(rc = parse_number("--max-size", arg, 1, 1e15, &v)) && v != floor(v))
            rc = dt_fail(DT_EUSAGE, "fetch: --max-size expects a whole number of bytes, got '%s'",
                         arg);
        o->max_size = (uint64_t)v;
        break;
    }
    return rc;
}

static int parse_option(struct fetch_args *a, int c, const char *arg, int *help)
{
    struct dt_fetch_options *o = &a->o;
    switch (c) {
    case 'd':
        o->dir = arg;
        return 0;
    case 'l':
        o->list = true;
        return 0;
    case 'V':
        o->verify = true;
        return 0;
    case 'f':
        o->force = true;
        return 0;
    case 'q':
        a->quiet = true;
        return 0;
    case 'h':
        *help = 1;
        return 0;
    case OPT_JSON:
        o->json = true;
        return 0;
    case OPT_MIRROR:
        return dt_fetch_add_mirror(o, arg);
    case OPT_FROM:
        o->from = arg;
        return 0;
    case OPT_OFFLINE:
        o->offline = true;
        return 0;
    case OPT_NO_SYSTEM:
        o->no_system = true;
        return 0;
    case OPT_REGISTRY:
        o->registry = arg;
        return 0;
    case OPT_TRUST:
        o->trust = true;
        return 0;
    case OPT_SHA256:
        if (!dt_is_sha256_hex(arg))
            return dt_fail(DT_EUSAGE, "fetch: --sha256 expects 64 hex digits, got '%s'", arg);
        o->sha256 = arg;
        return 0;
    default:
        return parse_numeric_option(o, c, arg);
    }
}

static int env_mirrors(struct fetch_args *a)
{
    const char *env = getenv("DTRAIN_MIRROR");
    if (!env || !*env)
        return 0;
    if (!(a->env_mirrors = strdup(env)))
        return dt_fail(DT_ERUNTIME, "out of memory");
    char *save = NULL;
    for (char *tok = strtok_r(a->env_mirrors, " ,\t\n", &save); tok;
         tok = strtok_r(NULL, " ,\t\n", &save)) {
        int rc = dt_fetch_add_mirror(&a->o, tok);
        if (rc)
            return dt_fail_context(rc, "DTRAIN_MIRROR");
    }
    return 0;
}

static int parse_args(struct fetch_args *a, int argc, char **argv, int *help)
{
    opterr = 0;
    optind = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":d:lVfqh", long_opts, NULL)) != -1) {
        if (c == '?')
            return dt_fail(DT_EUSAGE, "fetch: unknown option '%s' (see 'dtrain fetch --help')",
                           argv[optind - 1]);
        if (c == ':')
            return dt_fail(DT_EUSAGE, "fetch: option '%s' needs a value", argv[optind - 1]);
        int rc = parse_option(a, c, optarg, help);
        if (rc)
            return rc;
    }
    if (optind < argc)
        a->o.name = argv[optind++];
    if (optind < argc)
        return dt_fail(DT_EUSAGE, "fetch: unexpected argument '%s' (one dataset at a time)",
                       argv[optind]);
    return env_mirrors(a);
}

static int run_fetch(int argc, char **argv)
{
    struct fetch_args a = {.quiet = false, .env_mirrors = NULL};
    dt_fetch_options_default(&a.o);
    int help = 0;
    int rc = parse_args(&a, argc, argv, &help);
    if (!rc && help) {
        fputs(dt_cmd_fetch.help, stdout);
    } else if (!rc) {
        enum dt_log_level saved = dt_log_get_level();
        if (a.quiet)
            dt_log_set_level(DT_LOG_QUIET);
        rc = dt_fetch_run(&a.o);
        dt_fetch_json_error(&a.o, rc);
        dt_log_set_level(saved);
    }
    dt_registry_unload();
    free(a.env_mirrors);
    return rc;
}

const struct dt_command dt_cmd_fetch = {
    .name = "fetch",
    .summary = "download and verify a dataset (mnist, fashion-mnist, kmnist, cifar10, cifar100)",
    .help =
        "usage: dtrain fetch NAME [options]      download NAME into $DTRAIN_DATA/NAME, verified\n"
        "       dtrain fetch NAME --verify       check the files there, without the network\n"
        "       dtrain fetch --list              known datasets, sizes, and what is present\n"
        "\n"
        "Every file is checked against its published checksum (or the SHA-256 of its\n"
        "decompressed content) before it takes its final name. A download that stops is kept\n"
        "as FILE.part and resumed next time.\n"
        "\n"
        "options:\n"
        "  -d, --dir DIR          put the files in DIR (default $DTRAIN_DATA/NAME, DTRAIN_DATA\n"
        "                         defaulting to ./data); with --list, the data root\n"
        "  -l, --list             list the known datasets and their status\n"
        "  -V, --verify           verify the files present in DIR, no download\n"
        "  -f, --force            fetch again even if a verified copy is present\n"
        "      --mirror URL       try URL (base directory; http, https, file://) first;\n"
        "                         repeatable\n"
        "      --from DIR         copy the files from DIR instead (verified; no network);\n"
        "                         --from FILE for a one-file dataset (cifar10, cifar100)\n"
        "      --trust            with --from: accept the copies even when they do not match\n"
        "                         the registry's checksums (their SHA-256 is recorded in\n"
        "                         FILE.sha256, which --verify and --list then accept)\n"
        "      --sha256 HEX       the file must have this SHA-256; accepted then whatever the\n"
        "                         registry says, and recorded as --trust does (one-file\n"
        "                         datasets)\n"
        "      --offline          never use the network (system copies, --from, file:// only)\n"
        "      --no-system-copies ignore distribution copies (e.g. Debian's\n"
        "                         /usr/share/datasets/fashion-mnist)\n"
        "      --registry FILE    load extra or overriding dataset entries (JSON)\n"
        "      --retries N        retries per mirror after a transient failure (default 3)\n"
        "      --retry-delay S    first retry delay in seconds, doubling (default 1)\n"
        "      --connect-timeout S  connection timeout (default 15)\n"
        "      --stall-timeout S  give up on a transfer stalled this long (default 30)\n"
        "      --deadline S     give up on a transfer not done in S seconds (default: a\n"
        "                       minute plus the published size at 50 KB/s)\n"
        "      --max-size BYTES  largest file accepted when the registry publishes no size\n"
        "                       (default 512 MiB; also sets that file's default deadline)\n"
        "  -q, --quiet            print nothing but errors\n"
        "      --json             one JSON event per line on stdout\n"
        "\n"
        "environment: DTRAIN_DATA (data root), DTRAIN_MIRROR (mirror URLs, space or comma\n"
        "separated, tried after --mirror), DTRAIN_REGISTRY (registry file).\n"
        "exit codes: 0 ok, 1 network or I/O failure, 2 usage (unknown dataset), 3 data error\n"
        "(checksum mismatch, missing file).\n",
    .run = run_fetch,
};

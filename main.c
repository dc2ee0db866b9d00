/* dtrain: data-parallel CNN training on CPUs.
 *
 * main.c only dispatches: it finds the subcommand, runs it, prints the error a command left
 * (exactly once) and turns the status into the documented exit code:
 *   0 success, 1 runtime failure, 2 usage/config error, 3 data error, 130/143 signals.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "nn/kernels/fp32/blas.h"
#include "nn/kernels/isa.h"
#include "util/err.h"
#include "util/json.h"
#include "util/log.h"

static const struct dt_command *const commands[] = {&dt_cmd_fetch,   &dt_cmd_train, &dt_cmd_eval,
                                                    &dt_cmd_predict, &dt_cmd_bench, &dt_cmd_report};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void print_usage(FILE *out)
{
    fprintf(out, "usage: dtrain <command> [options]\n"
                 "       dtrain help <command> | dtrain --help | dtrain --version\n\ncommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "  %-7s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(out, "\nexit codes: 0 ok, 1 runtime failure, 2 usage or config error, 3 data error,\n"
                 "            130/143 stopped by SIGINT/SIGTERM\n"
                 "Run 'dtrain help <command>' for a command's options.\n");
}

static const struct dt_command *find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i]->name, name) == 0)
            return commands[i];
    return NULL;
}

/* "fetch|train|eval|bench|help", from the table: a new command is one more row. */
static void print_names(FILE *out)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "%s|", commands[i]->name);
    fputs("help", out);
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "dtrain: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nusage: dtrain <");
    print_names(stderr);
    fprintf(stderr, "> [options]; try 'dtrain --help'\n");
    return DT_EUSAGE;
}

/* --json: the failure as an event on stdout too, after whatever events came before it. */
static void emit_error_event(int code, const char *message)
{
    struct dt_json_writer w;
    dt_jw_begin(&w, "error");
    dt_jw_int(&w, "exit_code", code);
    dt_jw_str(&w, "message", message);
    dt_jw_end(&w, stdout);
}

int main(int argc, char **argv)
{
    /* First: may re-execute dtrain with OpenBLAS kernels that fit this CPU
     * (nn/kernels/fp32/blas.h). */
    dt_blas_select_kernels(argv);
    char isa_err[160];
    if (dt_isa_init_env(isa_err, sizeof isa_err)) {
        fprintf(stderr, "dtrain: %s\n", isa_err);
        return DT_EUSAGE;
    }
    if (argc < 2)
        return usage_error("%s", "no command given");
    const char *arg = argv[1];
    if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
        print_usage(stdout);
        return 0;
    }
    if (!strcmp(arg, "--version") || !strcmp(arg, "-V")) {
        printf("dtrain %s\n", DTRAIN_VERSION);
        return 0;
    }
    if (!strcmp(arg, "help")) {
        if (argc < 3) {
            print_usage(stdout);
            return 0;
        }
        const struct dt_command *c = find_command(argv[2]);
        if (!c)
            return usage_error("unknown command '%s'", argv[2]);
        fputs(c->help, stdout);
        return 0;
    }
    if (arg[0] == '-')
        return usage_error("unknown option '%s'", arg);
    const struct dt_command *c = find_command(arg);
    if (!c)
        return usage_error("unknown command '%s'", arg);

    dt_clear_error();
    int status = c->run(argc - 1, argv + 1);
    if (status < 0) {
        int code = dt_exit_code(status);
        /* Signals end quietly: the command already said it was stopping. */
        bool stopped = code == DT_EINTR || code == DT_ETERM;
        if (!stopped)
            dt_log_error("%s", dt_last_error());
        if (dt_log_json() && !stopped) /* a stop is a clean shutdown, not a failure */
            emit_error_event(code, dt_last_error());
        return code;
    }
    return 0;
}

/* The subcommands. Each returns 0 or a negative status with the message left in
 * dt_last_error(); main.c prints that message once and maps the status to the exit code.
 * A command never calls exit(). */
#ifndef DT_CMD_CMD_H
#define DT_CMD_CMD_H

struct dt_command {
    const char *name;
    const char *summary;               /* one line for `dtrain --help` */
    const char *help;                  /* full text for `dtrain help NAME` / NAME --help */
    int (*run)(int argc, char **argv); /* argv[0] is the command name */
};

extern const struct dt_command dt_cmd_fetch, dt_cmd_train, dt_cmd_eval, dt_cmd_bench,
    dt_cmd_predict, dt_cmd_report;

#endif

#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "util/err.h"

static int run_eval(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(dt_cmd_eval.help, stdout);
            return 0;
        }
    return dt_fail(DT_EUSAGE, "'eval' is not built yet in this version");
}

const struct dt_command dt_cmd_eval = {
    .name = "eval",
    .summary = "evaluate a checkpoint on the test set",
    .help = "usage: dtrain eval ...\n\nevaluate a checkpoint on the test set (not built yet in "
            "this version).\n",
    .run = run_eval,
};

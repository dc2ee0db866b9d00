#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "util/err.h"

static int run_train(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(dt_cmd_train.help, stdout);
            return 0;
        }
    return dt_fail(DT_EUSAGE, "'train' is not built yet in this version");
}

const struct dt_command dt_cmd_train = {
    .name = "train",
    .summary = "train a model from a config file",
    .help = "usage: dtrain train ...\n\ntrain a model from a config file (not built yet in this "
            "version).\n",
    .run = run_train,
};

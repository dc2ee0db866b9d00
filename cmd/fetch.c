#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "util/err.h"

static int run_fetch(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(dt_cmd_fetch.help, stdout);
            return 0;
        }
    return dt_fail(DT_EUSAGE, "'fetch' is not built yet in this version");
}

const struct dt_command dt_cmd_fetch = {
    .name = "fetch",
    .summary = "download and verify a dataset",
    .help = "usage: dtrain fetch ...\n\ndownload and verify a dataset (not built yet in this "
            "version).\n",
    .run = run_fetch,
};

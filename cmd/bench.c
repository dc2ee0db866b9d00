#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "util/err.h"

static int run_bench(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(dt_cmd_bench.help, stdout);
            return 0;
        }
    return dt_fail(DT_EUSAGE, "'bench' is not built yet in this version");
}

const struct dt_command dt_cmd_bench = {
    .name = "bench",
    .summary = "sweep instances x threads, benchmark collectives",
    .help = "usage: dtrain bench ...\n\nsweep instances x threads, benchmark collectives (not "
            "built yet in this version).\n",
    .run = run_bench,
};

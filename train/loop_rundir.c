/* The run directory's files around a training run, beside the checkpoints and the history:
 * made after the data loads, probe.json, removed again when the run fails before its first
 * checkpoint; and --trace's parts merged once the ranks are done. Split out of train/loop.c
 * (train/loop_internal.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train/loop_internal.h"
#include "train/rundir.h"
#include "util/err.h"
#include "util/fileio.h"
#include "util/log.h"

/* --trace: the parts of this process's ranks merged into one file (FILE where rank 0 runs, else
 * FILE.rank<R>.json after the host's first rank R: each host writes its own). */
int merge_trace(const struct run *run, int run_rc)
{
    const struct dt_job_plan *p = run->opt->plan;
    const char *file = run->opt->trace;
    char other[4200];
    const char *out = file;
    if (p->job.rank_base != 0) {
        snprintf(other, sizeof other, "%s.rank%d.json", file, p->job.rank_base);
        out = other;
    }
    char why[1024];
    snprintf(why, sizeof why, "%s", dt_last_error());
    long events = dt_trace_merge(file, out, p->job.rank_base, p->job.local_n);
    if (events < 0 && run_rc) { /* the run's own failure stays the one said */
        dt_log_warn("%s", dt_last_error());
        dt_fail(dt_exit_code(run_rc), "%s", why);
        return run_rc;
    }
    if (events < 0)
        return (int)events;
    if (!run->cfg->log.quiet)
        dt_log_info("trace: %ld events in %s (open it in https://ui.perfetto.dev or "
                    "chrome://tracing)",
                    events, out);
    return 0;
}

/* The run directory keeps how --instances/--threads auto chose the shape. */
int write_probe_json(const char *dir, const char *json)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/probe.json", dir);
    size_t len = strlen(json);
    char *text = malloc(len + 2);
    if (!text)
        return dt_fail(DT_ERUNTIME, "out of memory");
    memcpy(text, json, len);
    memcpy(text + len, "\n", 2);
    int rc = dt_write_file_atomic(path, text, len + 1);
    free(text);
    return rc;
}

/* A run that made its directory and failed before its first checkpoint leaves nothing there:
 * the history's files (after dt_history_close) and probe.json. */
void discard_run_files(struct dt_history *h, const struct dt_train_options *opt, const char *dir)
{
    dt_history_discard(h);
    if (opt->probe_json && opt->create_dir) {
        char path[1100];
        snprintf(path, sizeof path, "%s/probe.json", dir);
        unlink(path);
    }
}

/* The leader's checkpoint.dir, made now that the data has loaded: a run that fails on its data
 * leaves no empty directory behind. */
int create_run_dir(const char *dir, char *made, size_t made_size)
{
    int stale;
    int rc = dt_run_dir_create(dir, &stale, made, made_size);
    if (rc == 0 && stale)
        dt_log_info("%s: removed %d temp file%s of a checkpoint write that never finished", dir,
                    stale, stale == 1 ? "" : "s");
    return rc;
}

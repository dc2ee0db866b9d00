/* Per-rank time accounting (see train/timing.h). */
#include "train/timing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/json.h"
#include "util/log.h"

static const char *const kind_names[] = {"data",      "forward",    "backward", "allreduce_wait",
                                         "optimizer", "checkpoint", "eval"};
_Static_assert(sizeof kind_names / sizeof kind_names[0] == DT_TIME_KINDS, "one name per time kind");
/* The epoch line's abbreviations, in the same order. */
static const char *const short_names[] = {"data", "fwd", "bwd", "wait", "opt", "ckpt", "eval"};
_Static_assert(sizeof short_names / sizeof short_names[0] == DT_TIME_KINDS,
               "one short name per time kind");

/* The trace's event names and categories: what a trace viewer's user searches for. */
static const char *const trace_names[] = {"data",      "forward",    "backward", "allreduce",
                                          "optimizer", "checkpoint", "eval"};
static const char *const trace_cats[] = {"data",      "compute",    "compute", "collective",
                                         "optimizer", "checkpoint", "eval"};
_Static_assert(sizeof trace_names / sizeof trace_names[0] == DT_TIME_KINDS &&
                   sizeof trace_cats / sizeof trace_cats[0] == DT_TIME_KINDS,
               "one trace name and category per time kind");

const char *dt_time_kind_name(enum dt_time_kind k)
{
    return k < DT_TIME_KINDS ? kind_names[k] : "?";
}

const char *dt_time_kind_trace_name(enum dt_time_kind k)
{
    return k < DT_TIME_KINDS ? trace_names[k] : "?";
}

const char *dt_time_kind_category(enum dt_time_kind k)
{
    return k < DT_TIME_KINDS ? trace_cats[k] : "?";
}

/* Every rank finishes a step together (the all-reduce), so wall time is the same for all; the
 * slowest rank is the one that did the most outside the wait, the one the others waited for. */
static double busy_seconds(const float *row)
{
    double s = 0;
    for (int k = 0; k < DT_TIME_KINDS; k++)
        if (k != DT_TIME_ALLREDUCE && k != DT_TIME_EVAL) /* eval waits on the others too */
            s += row[k];
    return s;
}

int dt_timing_gather(struct dt_timing *t, struct dt_comm *comm, bool run,
                     struct dt_timing_report *out)
{
    const double *mine = run ? t->run : t->epoch;
    size_t n = (size_t)comm->size * DT_TIME_KINDS;
    float *rows = calloc(n, sizeof *rows);
    if (!rows)
        return dt_fail(DT_ERUNTIME, "out of memory gathering step times");
    for (int k = 0; k < DT_TIME_KINDS; k++)
        rows[(size_t)comm->rank * DT_TIME_KINDS + k] = (float)mine[k];
    int rc = comm->size > 1 ? comm->allreduce_sum(comm, rows, n) : 0;
    if (rc == 0) {
        int slow = 0;
        for (int r = 1; r < comm->size; r++)
            if (busy_seconds(rows + (size_t)r * DT_TIME_KINDS) >
                busy_seconds(rows + (size_t)slow * DT_TIME_KINDS))
                slow = r;
        out->slowest = slow;
        for (int k = 0; k < DT_TIME_KINDS; k++) {
            out->rank0[k] = rows[k];
            out->slowest_s[k] = rows[(size_t)slow * DT_TIME_KINDS + k];
        }
    }
    free(rows);
    if (!run)
        memset(t->epoch, 0, sizeof t->epoch);
    return rc;
}

char *dt_timing_json(const double *seconds, int rank)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    fputc('{', f);
    if (rank >= 0)
        fprintf(f, "\"rank\":%d,", rank);
    for (int k = 0; k < DT_TIME_KINDS; k++)
        fprintf(f, "%s\"%s_s\":%.6f", k ? "," : "", kind_names[k], seconds[k]);
    fputc('}', f);
    fclose(f);
    return text;
}

void dt_timing_format(const struct dt_timing_report *r, int ranks, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = 0;
    /* eval is left out of the line: the epoch line's seconds are training seconds */
    for (int k = 0; k < DT_TIME_KINDS && len < size; k++)
        if (k != DT_TIME_EVAL)
            len += (size_t)snprintf(buf + len, size - len, "%s%s %.2f", k ? " " : " | ",
                                    short_names[k], r->rank0[k]);
    if (len < size)
        len += (size_t)snprintf(buf + len, size - len, " s");
    if (ranks > 1 && r->slowest != 0 && len < size) {
        float row[DT_TIME_KINDS];
        for (int k = 0; k < DT_TIME_KINDS; k++)
            row[k] = (float)r->slowest_s[k];
        snprintf(buf + len, size - len, " (slowest: rank %d, %.2f s busy)", r->slowest,
                 busy_seconds(row));
    }
}

static void print_row(const char *who, const double *s, long long steps)
{
    double per = steps > 0 ? 1e3 / (double)steps : 0;
    dt_log_info("  %-14s data %8.3f  fwd %8.3f  bwd %8.3f  wait %8.3f  opt %8.3f  ckpt %8.3f  "
                "eval %8.3f s",
                who, s[DT_TIME_DATA], s[DT_TIME_FORWARD], s[DT_TIME_BACKWARD], s[DT_TIME_ALLREDUCE],
                s[DT_TIME_OPTIMIZER], s[DT_TIME_CHECKPOINT], s[DT_TIME_EVAL]);
    if (steps > 0)
        dt_log_info("  %-14s data %8.3f  fwd %8.3f  bwd %8.3f  wait %8.3f  opt %8.3f ms/step", "",
                    per * s[DT_TIME_DATA], per * s[DT_TIME_FORWARD], per * s[DT_TIME_BACKWARD],
                    per * s[DT_TIME_ALLREDUCE], per * s[DT_TIME_OPTIMIZER]);
}

void dt_timing_print_profile(const struct dt_timing_report *r, int ranks, long long steps)
{
    dt_log_info("time totals of the run, %lld steps:", steps);
    print_row("rank 0", r->rank0, steps);
    if (ranks > 1) {
        char who[32];
        snprintf(who, sizeof who, "slowest: rank %d", r->slowest);
        print_row(who, r->slowest_s, steps);
    }
}

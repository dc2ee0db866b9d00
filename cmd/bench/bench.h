/* `dtrain bench`: what its pieces share.
 *
 *   cmd/bench.c            command line, help, dispatch (sweep or `allreduce`)
 *   cmd/bench/machine.c    the machine header (CPU model, sockets, cores, SMT, BLAS)
 *   cmd/bench/sweep.c      the instances x threads sweep: one child `dtrain train` per run
 *   cmd/bench/combos.c     which combinations a sweep runs; the median of repeats
 *   cmd/bench/allreduce.c  the collective benchmark over shm / tcp / hier / mpi
 *   cmd/bench/report.c     one result table written as text, CSV or JSON lines
 *   cmd/bench/plot.c       the same table as an SVG bar chart
 *
 * Both benchmarks produce a struct dt_bench_table (columns + rows of cells); the report and
 * plot writers know nothing of what was measured, so a new column is one line in one place.
 */
#ifndef DT_CMD_BENCH_BENCH_H
#define DT_CMD_BENCH_BENCH_H

#include <stdbool.h>
#include <stdio.h>

#include "dist/comm.h"

/* ---- machine ---- */

struct dt_bench_machine {
    char cpu[128];      /* /proc/cpuinfo "model name" */
    int sockets;        /* with at least one usable CPU */
    int cores;          /* physical cores with at least one usable CPU */
    int cpus;           /* usable hardware threads (affinity mask) */
    int smt;            /* hardware threads per core (1 = SMT off or absent) */
    char blas[160];     /* openblas_get_config() */
    char threading[16]; /* "sequential", "pthreads", "openmp" */
    char kernels[160];  /* how OpenBLAS's kernels were chosen (nn/kernels/fp32/blas.h) */
};

/* Never fails: what cannot be read is left "unknown" / 0 (cores then falls back to cpus). */
void dt_bench_machine_read(struct dt_bench_machine *m);
/* "# key: value" lines for the text table, or one JSON "bench_machine" event. */
void dt_bench_machine_print(const struct dt_bench_machine *m, FILE *out, bool json,
                            const char *what);

/* ---- result tables ---- */

enum dt_bench_kind { DT_BENCH_INT, DT_BENCH_NUM, DT_BENCH_STR };

struct dt_bench_col {
    const char *head; /* text-table heading and CSV header */
    const char *key;  /* JSON key */
    enum dt_bench_kind kind;
    const char *fmt;  /* printf format for the text table (NUM/INT get a double / long long) */
    bool text_hidden; /* only in JSON and CSV (details that would crowd the text table) */
};

struct dt_bench_cell {
    double num;      /* INT and NUM cells */
    const char *str; /* STR cells (borrowed) */
    bool missing;    /* printed "-", empty in CSV, null in JSON */
};

struct dt_bench_table {
    const char *event; /* JSON event name of a row: "bench_row", "allreduce_row" */
    const struct dt_bench_col *cols;
    int ncols;
    struct dt_bench_cell *cells; /* rows x ncols, row-major */
    char **errors;               /* per row: NULL, or why the row failed (owned) */
    int rows, cap;
    int label_cols;     /* kept in failed rows; the plot joins them into a bar's label ("2 x 8") */
    int plot_label_col; /* or the plot labels bars with this one column (-1: label_cols) */
    int value_col;      /* plot: the bar length; lo_col/hi_col a whisker (-1: none) */
    int lo_col, hi_col;
    const char *value_name; /* plot axis title */
};

void dt_bench_table_init(struct dt_bench_table *t, const char *event,
                         const struct dt_bench_col *cols, int ncols);
/* Appends a row (cells copied; strings stay borrowed) with an optional error message. */
int dt_bench_table_add(struct dt_bench_table *t, const struct dt_bench_cell *cells,
                       const char *error);
void dt_bench_table_free(struct dt_bench_table *t);

/* The table as aligned text (failed rows show their error after the label columns), as JSON
 * lines (one object per row: the columns, "ok", and "error" when failed) or as CSV (a header,
 * then one line per row with an "error" column last). */
void dt_bench_table_print_text(const struct dt_bench_table *t, FILE *out);
void dt_bench_table_print_json(const struct dt_bench_table *t, FILE *out);
int dt_bench_table_write_csv(const struct dt_bench_table *t, const char *path);
/* One bar per row (failed rows: an empty bar marked "failed"), written to path. */
int dt_bench_table_write_svg(const struct dt_bench_table *t, const char *path, const char *title,
                             const char *subtitle);

/* ---- output options shared by both benchmarks ---- */

struct dt_bench_output {
    bool json, quiet, verbose;
    const char *csv, *plot;
};

/* Writes the finished table where the options say (stdout text or JSON, CSV, SVG). */
int dt_bench_emit(const struct dt_bench_table *t, const struct dt_bench_machine *m,
                  const struct dt_bench_output *o, const char *what, const char *title);

/* ---- the two benchmarks ---- */

struct dt_bench_combo {
    int instances, threads;
};

struct dt_bench_sweep_opts {
    const char *config;
    char **sets; /* --set KEY=VALUE passed on to every run */
    int nsets;
    struct dt_bench_combo *combos;
    int ncombos;
    int cores;          /* C: the baseline is 1 x C */
    bool threads_only;  /* baseline 1 x 1 */
    long steps, warmup; /* steps mode (epochs == 0) */
    int epochs;         /* epochs mode when > 0 */
    int repeat;
    double timeout; /* seconds per run; 0 = none */
    struct dt_bench_output out;
};

int dt_bench_sweep(const struct dt_bench_sweep_opts *o, const struct dt_bench_machine *m);

/* Combination lists. Each returns the count (malloc'd array in *out) or a negative status. */
int dt_bench_combos_split(int cores, struct dt_bench_combo **out);
int dt_bench_combos_threads(int cores, struct dt_bench_combo **out);
int dt_bench_combos_parse(const char *grid, struct dt_bench_combo **out);

/* Median of n values (sorts a copy; the mean of the middle two when n is even); NAN for
 * n == 0 or out of memory. Also used by the kernel benchmarks in bench/. */
double dt_bench_median(const double *v, int n);

struct dt_bench_allreduce_opts {
    const char *backend;  /* shm, tcp, hier, mpi */
    int instances, nodes; /* nodes: hier only, simulated hosts on this machine */
    size_t min_bytes, max_bytes;
    int iters;                /* timed iterations per size; 0 = enough for ~0.2 s */
    enum dt_grad_dtype dtype; /* what the all-reduce sends (dist.grad_dtype) */
    bool no_pin;              /* leave the ranks unpinned (default: one core each, like train) */
    double timeout;           /* collective timeout in seconds */
    /* Across real hosts (tcp only): this process is rank node_rank of `nodes`, one per host,
     * meeting at master (HOST:PORT), authenticated by DTRAIN_TOKEN; NULL for a forked job. */
    const char *master, *iface;
    const char *token_file; /* --token-file; NULL = DTRAIN_TOKEN */
    int node_rank;
    double rendezvous_timeout; /* seconds every rank has to arrive (tcp, hier) */
    struct dt_bench_output out;
};

int dt_bench_allreduce(const struct dt_bench_allreduce_opts *o, const struct dt_bench_machine *m);

#endif

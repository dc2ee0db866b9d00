/* `dtrain bench allreduce`: latency and bandwidth of the communicators' all-reduce, per message
 * size, the way nccl-tests reports them (algbw = bytes / time, busbw = algbw x 2(n-1)/n, which
 * for a ring is the bandwidth each link must carry, so figures compare across rank counts).
 *
 * The ranks are forked through dist/launcher (which supervises them and tears the job down if
 * one dies) and joined by the chosen communicator: shm (one segment for all), tcp (a ring on
 * 127.0.0.1, rank 0 handed a socket already bound to a free port), hier (--nodes simulated
 * hosts, each its own shm segment, their leaders on a tcp ring), or mpi (no fork: every process
 * of an `mpirun` is a rank). With --master, tcp runs across real hosts instead: one process
 * per host, started by hand like `train --nodes`, no fork. Rank 0 writes its figures into an
 * anonymous shared mapping that the parent turns into the table once the job is over, so even a job
 * that fails or is stopped half-way prints the sizes it finished.
 *
 * Every size is checked, before and after the timed iterations: each rank fills its buffer with
 * small integers that depend on rank and index, so the sum is exact in float32 and every rank
 * must end with exactly the expected value at every index. --dtype bf16 times the bf16
 * all-reduce (dist.grad_dtype) of the same float arrays; its pattern is 1 or 2 (by rank and
 * index) times a power of two, so every partial sum of up to 128 ranks is exact in bf16 too
 * (beyond that the check allows bf16's rounding). Its algbw and busbw count the bytes sent,
 * half the array's, as nccl-tests counts count x sizeof(type).
 */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmd/bench/bench.h"
#include "cmd/cli.h"
#include "dist/backend.h"
#include "dist/hier.h"
#include "dist/launch_env.h"
#include "dist/launcher.h"
#include "dist/mpi.h"
#include "dist/shm.h"
#include "dist/tcp.h"
#include "dist/pin.h"
#include "util/alloc.h"
#include "util/bf16.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/log.h"
#include "util/vec_isa.h"

#define MAX_SIZES 64
#define TARGET_S  0.2 /* timed seconds per size when --iters is not given */

/* ---- what rank 0 reports (in a MAP_SHARED mapping) ---- */

struct ar_row {
    size_t bytes;
    int iters;
    double us, algbw, busbw;
    char error[300]; /* empty when checked correct */
};

struct ar_shared {
    int rows;
    struct ar_row row[MAX_SIZES];
    char error[300]; /* why a rank gave up (first writer wins) */
    int error_set;
};

struct ar_job {
    const struct dt_bench_allreduce_opts *o;
    struct ar_shared *shared;
    size_t sizes[MAX_SIZES];
    int nsizes;
    struct dt_backend_job bj; /* the same join as train's (dist/backend.h) */
    char master_host[DT_LAUNCH_HOST_MAX + 1];
    int nranks;
    struct dt_pin_plan plan; /* one core per rank, as train's launcher and mpirun place them */
    bool pinned;
    bool progress, live;
};

/* Set in a rank by SIGINT/SIGTERM (forwarded by the launcher); rank 0 turns it into a decision
 * every rank takes at the same size. Signals are process-wide, so this is too. */
static volatile sig_atomic_t rank_stop;
static void on_rank_signal(int sig)
{
    rank_stop = sig;
}

static void shared_error(struct ar_shared *s, const char *msg)
{
    if (__atomic_exchange_n(&s->error_set, 1, __ATOMIC_ACQ_REL) == 0)
        snprintf(s->error, sizeof s->error, "%s", msg);
}

static float pattern(int rank, size_t i, enum dt_grad_dtype dtype)
{
    if (dtype == DT_GRAD_BF16)
        return ldexpf((float)(1 + (rank + (int)(i % 2)) % 2), (int)(i % 31) - 15);
    return (float)((rank + 1) * (int)(i % 31 + 1));
}

/* The sum of pattern() over `size` ranks. */
static float pattern_sum(int size, size_t i, enum dt_grad_dtype dtype)
{
    if (dtype == DT_GRAD_BF16) /* size ones, plus one more for each rank where rank + i is odd */
        return ldexpf((float)(size + (i % 2 ? (size + 1) / 2 : size / 2)), (int)(i % 31) - 15);
    return (float)size * (float)(size + 1) / 2 * (float)(i % 31 + 1);
}

static bool sum_ok(float got, float want, int size, enum dt_grad_dtype dtype)
{
    if (dtype == DT_GRAD_BF16 && size > 128) /* partial sums past 256 units round */
        return fabsf(got - want) <= want * (float)size * 0x1p-8f;
    return got == want;
}

/* One all-reduce of the exact pattern; every rank compares every element. Returns how many
 * ranks saw a wrong value (agreed by a second, fp32 all-reduce), or -1 when a collective
 * failed. */
static int checked_allreduce(struct dt_comm *c, float *buf, size_t n, enum dt_grad_dtype dtype,
                             char *why, size_t cap)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = pattern(c->rank, i, dtype);
    if (dt_comm_allreduce_sum(c, buf, n, dtype))
        return -1;
    float bad = 0;
    for (size_t i = 0; i < n; i++)
        if (!sum_ok(buf[i], pattern_sum(c->size, i, dtype), c->size, dtype)) {
            snprintf(why, cap, "rank %d: element %zu of %zu is %g, expected %g", c->rank, i, n,
                     (double)buf[i], (double)pattern_sum(c->size, i, dtype));
            bad = 1;
            break;
        }
    if (c->allreduce_sum(c, &bad, 1))
        return -1;
    return (int)bad;
}

static void draw_progress(const struct ar_job *j, int k)
{
    if (!j->progress)
        return;
    char line[160];
    snprintf(line, sizeof line, "dtrain: bench allreduce %s x %d [%d/%d] %zu bytes", j->o->backend,
             j->o->instances, k + 1, j->nsizes, j->sizes[k]);
    if (j->live)
        fprintf(stderr, "\r\033[K%s", line);
    else
        fprintf(stderr, "%s\n", line);
    fflush(stderr);
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Times one size; fills row (rank 0). */
static int measure_size(struct dt_comm *c, const struct ar_job *j, float *buf, size_t bytes,
                        double *times, struct ar_row *row)
{
    size_t n = bytes / sizeof(float);
    char why[200] = "";
    enum dt_grad_dtype dtype = j->o->dtype;
    int bad = checked_allreduce(c, buf, n, dtype, why, sizeof why);
    if (bad < 0)
        return -DT_ERUNTIME;
    memset(buf, 0, n * sizeof *buf);
    /* Warm-up, timed: the fastest of three sizes the timed loop (the first call of a size can
     * be slowed by page faults, which would leave too few iterations). */
    double fastest = INFINITY;
    for (int w = 0; w < 3; w++) {
        double t0 = dt_now();
        if (dt_comm_allreduce_sum(c, buf, n, dtype))
            return -DT_ERUNTIME;
        fastest = fmin(fastest, dt_now() - t0);
    }
    int iters = j->o->iters;
    if (iters <= 0) {
        iters = (int)(TARGET_S / (fastest > 1e-7 ? fastest : 1e-7));
        iters = iters < 5 ? 5 : iters > 1000 ? 1000 : iters;
        /* Every rank must run the same count: rank 0's decides. */
        if (c->broadcast(c, &iters, sizeof iters, 0))
            return -DT_ERUNTIME;
    }
    if (c->barrier(c))
        return -DT_ERUNTIME;
    for (int i = 0; i < iters; i++) {
        double t0 = dt_now();
        if (dt_comm_allreduce_sum(c, buf, n, dtype))
            return -DT_ERUNTIME;
        times[i] = dt_now() - t0;
    }
    if (!bad && (bad = checked_allreduce(c, buf, n, dtype, why, sizeof why)) < 0)
        return -DT_ERUNTIME;
    if (c->rank != 0)
        return 0;
    qsort(times, (size_t)iters, sizeof *times, compare_double);
    double t = iters % 2 ? times[iters / 2] : 0.5 * (times[iters / 2 - 1] + times[iters / 2]);
    row->bytes = bytes;
    row->iters = iters;
    row->us = t * 1e6;
    size_t sent = dtype == DT_GRAD_BF16 ? n * sizeof(dt_bf16) : bytes;
    row->algbw = t > 0 ? (double)sent / t / 1e9 : NAN;
    row->busbw = row->algbw * 2.0 * (c->size - 1) / c->size;
    if (bad)
        snprintf(row->error, sizeof row->error, "wrong result on %d rank%s (%s)", bad,
                 bad == 1 ? "" : "s", why[0] ? why : "see the other ranks");
    return 0;
}

static int rank_body(struct dt_comm *c, struct ar_job *j)
{
    float *buf = dt_alloc(j->sizes[j->nsizes - 1] / sizeof(float) + 1, sizeof(float));
    double *times = malloc(1000000 * sizeof *times);
    int rc = 0;
    if (!buf || !times) {
        rc = dt_fail(DT_ERUNTIME, "rank %d: out of memory", c->rank);
        goto out;
    }
    for (int k = 0; k < j->nsizes; k++) {
        int go = !rank_stop;
        if (c->broadcast(c, &go, sizeof go, 0)) {
            rc = -DT_ERUNTIME;
            break;
        }
        if (!go) {
            rc = rank_stop == SIGTERM ? -DT_ETERM : -DT_EINTR;
            break;
        }
        if (c->rank == 0)
            draw_progress(j, k);
        struct ar_row row;
        memset(&row, 0, sizeof row);
        if ((rc = measure_size(c, j, buf, j->sizes[k], times, &row)))
            break;
        if (c->rank == 0) {
            j->shared->row[k] = row;
            __atomic_store_n(&j->shared->rows, k + 1, __ATOMIC_RELEASE);
        }
    }
    if (rc && rc != -DT_EINTR && rc != -DT_ETERM)
        shared_error(j->shared, dt_last_error());
    if (c->rank == 0 && j->progress && j->live)
        fputs("\r\033[K", stderr);
out:
    dt_free(buf);
    free(times);
    return rc;
}

static int rank_main(int r, void *arg)
{
    struct ar_job *j = arg;
    struct sigaction sa = {.sa_handler = on_rank_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (j->pinned && dt_pin_apply(&j->plan, r) != 0)
        dt_clear_error(); /* unpinned figures are still figures; the header says pinned */
    /* tcp: rank 0 is the master; hier: rank 0 leads node 0, the leaders' master. */
    if (j->bj.master_fd >= 0 && r != 0)
        close(j->bj.master_fd);
    struct dt_comm *c = NULL;
    int rc = dt_backend_join(&j->bj, r, &c);
    if (rc) {
        rc = dt_fail_context(rc, "rank %d: joining the %s job", r, j->o->backend);
        shared_error(j->shared, dt_last_error());
        return rc;
    }
    rc = rank_body(c, j);
    c->close(c);
    return rc;
}

static void on_job_failure(void *arg, const char *reason)
{
    struct ar_job *j = arg;
    dt_backend_abort(&j->bj, reason);
}

/* Parent side of a forked job: the resources every rank inherits, then the launcher. */
static int run_forked(struct ar_job *j)
{
    const struct dt_bench_allreduce_opts *o = j->o;
    bool hier = !strcmp(o->backend, "hier");
    int rc = 0;
    if (hier && (o->nodes < 2 || o->instances % o->nodes != 0 || o->nodes > 1024))
        return dt_fail(DT_EUSAGE,
                       "bench allreduce: --backend hier needs --instances (%d) divisible by "
                       "--nodes (%d), and at least 2 nodes",
                       o->instances, o->nodes);
    struct dt_backend_job *b = &j->bj;
    if ((rc = dt_backend_parse(o->backend, &b->backend)))
        return rc;
    b->world = b->local_n = b->host_ranks = o->instances;
    b->nodes = b->groups = hier ? o->nodes : 1;
    b->iface = o->iface;
    b->token_file = o->token_file;
    b->timeout = o->timeout;
    b->rendezvous_timeout = o->rendezvous_timeout;
    if ((rc = dt_backend_prepare(b)))
        return rc;
    if (!o->no_pin) {
        struct dt_topology t;
        if (dt_topology_read(&t, NULL, NULL) == 0) {
            j->pinned = dt_pin_plan_make(&j->plan, &t, DT_PIN_CORES, NULL, o->instances, 1) == 0;
            dt_topology_free(&t);
        }
        dt_clear_error();
    }
    struct dt_launch_opts lo = {
        .n = o->instances, .rank_main = rank_main, .on_failure = on_job_failure, .arg = j};
    rc = dt_launch_run(&lo);
    dt_backend_release(b);
    if (j->pinned)
        dt_pin_plan_free(&j->plan);
    return rc;
}

/* mpi: this process is one rank of an mpirun job; only rank 0 reports. */
static int run_mpi(struct ar_job *j, bool *is_root)
{
    struct dt_comm *c;
    int rc = dt_mpi_comm_create(&c);
    if (rc)
        return rc;
    *is_root = c->rank == 0;
    j->nranks = c->size;
    if (c->size != j->o->instances && j->o->instances > 0)
        dt_log_debug("bench allreduce: mpi job has %d ranks (--instances ignored)", c->size);
    struct sigaction sa = {.sa_handler = on_rank_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    rc = rank_body(c, j);
    c->close(c);
    return rc;
}

/* Across hosts: this process is rank o->node_rank of a tcp ring of o->nodes processes, one per
 * host, started by hand (or by ssh/pdsh) like `train --nodes`; only rank 0 reports. */
static int run_across_hosts(struct ar_job *j, bool *is_root)
{
    const struct dt_bench_allreduce_opts *o = j->o;
    struct dt_backend_job *b = &j->bj;
    int rc = dt_launch_parse_hostport(o->master, j->master_host, &b->master_port, "--master");
    if (rc)
        return rc;
    b->backend = DT_BACKEND_TCP;
    b->world = b->nodes = o->nodes;
    b->rank_base = o->node_rank;
    b->per_rank = true; /* this process is the host's one rank: no fork */
    b->master_host = j->master_host;
    b->iface = o->iface;
    b->token_file = o->token_file;
    b->timeout = o->timeout;
    b->rendezvous_timeout = o->rendezvous_timeout;
    struct dt_comm *c = NULL;
    if ((rc = dt_backend_prepare(b)) == 0)
        rc = dt_backend_join(b, 0, &c);
    dt_backend_release(b);
    if (rc)
        return rc;
    *is_root = c->rank == 0;
    struct sigaction sa = {.sa_handler = on_rank_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    rc = rank_body(c, j);
    c->close(c);
    return rc;
}

static void size_label(size_t bytes, char *buf, size_t cap)
{
    if (bytes >= (1u << 30) && bytes % (1u << 30) == 0)
        snprintf(buf, cap, "%zu GiB", bytes >> 30);
    else if (bytes >= (1u << 20) && bytes % (1u << 20) == 0)
        snprintf(buf, cap, "%zu MiB", bytes >> 20);
    else if (bytes >= 1024 && bytes % 1024 == 0)
        snprintf(buf, cap, "%zu KiB", bytes >> 10);
    else
        snprintf(buf, cap, "%zu B", bytes);
}

enum { C_SIZE, C_BYTES, C_US, C_ALGBW, C_BUSBW, C_ITERS, C_DTYPE, C_CHECK, NCOLS };

static const struct dt_bench_col cols[NCOLS] = {
    {"size", "size", DT_BENCH_STR, NULL, false},
    {"bytes", "bytes", DT_BENCH_INT, NULL, false},
    {"us", "us", DT_BENCH_NUM, "%.1f", false},
    {"algbw GB/s", "algbw_GBs", DT_BENCH_NUM, "%.3f", false},
    {"busbw GB/s", "busbw_GBs", DT_BENCH_NUM, "%.3f", false},
    {"iters", "iters", DT_BENCH_INT, NULL, false},
    {"dtype", "dtype", DT_BENCH_STR, NULL, false},
    {"check", "check", DT_BENCH_STR, NULL, false},
};

static int report(const struct ar_job *j, const struct dt_bench_machine *m, int nranks)
{
    const struct ar_shared *s = j->shared;
    struct dt_bench_table t;
    dt_bench_table_init(&t, "allreduce_row", cols, NCOLS);
    t.label_cols = 2;
    t.plot_label_col = C_SIZE;
    t.value_col = C_BUSBW;
    t.value_name = "bus bandwidth, GB/s (higher is better)";
    char labels[MAX_SIZES][32];
    int rc = 0, rows = __atomic_load_n(&s->rows, __ATOMIC_ACQUIRE);
    for (int k = 0; k < rows && !rc; k++) {
        const struct ar_row *r = &s->row[k];
        size_label(r->bytes, labels[k], sizeof labels[k]);
        struct dt_bench_cell c[NCOLS];
        memset(c, 0, sizeof c);
        c[C_SIZE].str = labels[k];
        c[C_BYTES].num = (double)r->bytes;
        c[C_US].num = r->us;
        c[C_ALGBW].num = r->algbw;
        c[C_BUSBW].num = r->busbw;
        c[C_ITERS].num = r->iters;
        c[C_DTYPE].str = dt_names_name(&dt_grad_dtype_names, (int)j->o->dtype);
        c[C_CHECK].str = "ok";
        rc = dt_bench_table_add(&t, c, r->error[0] ? r->error : NULL);
    }
    char what[240], bf16[80];
    /* the vector build the ranks' conversions and sums run (util/vec_isa.h): same bits on every
     * build, different speed */
    snprintf(bf16, sizeof bf16, " of bf16 terms (bf16 on the wire, %s loops)",
             dt_vec_isa_name(dt_vec_isa_get()));
    snprintf(what, sizeof what, "allreduce, float32 sum%s, %s backend, %d ranks%s%s",
             j->o->dtype == DT_GRAD_BF16 ? bf16 : "", j->o->backend, nranks,
             j->o->master                    ? " on separate hosts"
             : strcmp(j->o->backend, "hier") ? ""
                                             : " on simulated hosts",
             j->pinned ? ", one core each" : "");
    if (!strcmp(j->o->backend, "hier"))
        snprintf(what + strlen(what), sizeof what - strlen(what), " (%d x %d)", j->o->nodes,
                 nranks / j->o->nodes);
    if (!rc)
        rc = dt_bench_emit(&t, m, &j->o->out, what, "dtrain bench allreduce: bus bandwidth");
    dt_bench_table_free(&t);
    return rc;
}

int dt_bench_allreduce(const struct dt_bench_allreduce_opts *o, const struct dt_bench_machine *m)
{
    struct ar_job *j = calloc(1, sizeof *j);
    if (!j)
        return dt_fail(DT_ERUNTIME, "out of memory");
    j->o = o;
    dt_backend_job_init(&j->bj);
    j->nranks = o->instances;
    j->progress = !o->out.quiet;
    j->live = dt_log_is_tty();
    size_t b = o->min_bytes < sizeof(float) ? sizeof(float) : o->min_bytes;
    for (; b <= o->max_bytes && j->nsizes < MAX_SIZES; b *= 2)
        j->sizes[j->nsizes++] = b / sizeof(float) * sizeof(float);
    j->shared =
        mmap(NULL, sizeof *j->shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (j->shared == MAP_FAILED) {
        free(j);
        return dt_fail(DT_ERUNTIME, "bench allreduce: mmap: %m");
    }
    int rc;
    bool mpi = !strcmp(o->backend, "mpi"), root = true;
    rc = mpi ? run_mpi(j, &root) : o->master ? run_across_hosts(j, &root) : run_forked(j);
    /* The launcher's message says which rank failed; a rank's own message says why. */
    if (rc && rc != -DT_EINTR && rc != -DT_ETERM && j->shared->error_set)
        rc = dt_fail(dt_exit_code(rc), "%s", j->shared->error);
    char saved[512] = "";
    if (rc)
        snprintf(saved, sizeof saved, "%s", dt_last_error());
    if (root && (j->shared->rows > 0 || !rc)) {
        int rrc = report(j, m, j->nranks);
        rc = rc ? rc : rrc;
    }
    if (rc && saved[0])
        dt_fail(dt_exit_code(rc), "%s", saved);
    munmap(j->shared, sizeof *j->shared);
    free(j);
    return rc;
}

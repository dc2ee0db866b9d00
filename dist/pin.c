/* Pin plans: which CPUs each rank of a job gets (the rules are in dist/topology.h and
 * docs/pinning.md), and binding the calling process to them.
 *
 * The cores mode decides *how many* SMT siblings the job uses before deciding *who* gets
 * them: with need = instances x threads, every hardware thread of SMT rank < K is used and
 * exactly `rem` threads of rank K, where K is the lowest rank at which the count reaches need.
 * That budget makes "physical cores first" a global property that no greedy per-rank choice
 * can break. Ranks are then placed one by one: into the socket that can hold the whole rank
 * within the budget and gives it the most threads below rank K (ties: the lowest socket, which
 * packs ranks compactly); if no socket can, the rank spans sockets, fullest first. Rank-K
 * threads go preferably to cores the rank already holds.
 *
 * Placing ranks one by one spreads the early ranks over first threads and leaves the later
 * ones their siblings (4 x 4 on 2 sockets x 4 cores x SMT2 would give 0-3 | 4-7 | 8-11 |
 * 12-15: every core shared by two ranks). Two ranks on one core evict each other's L1/L2 and
 * interfere in a way a rank's own threads, working on the same GEMM panels, do not. So a last
 * pass re-deals, per socket, the threads of the ranks that live wholly in it core by core
 * (0-1,8-9 | 2-3,10-11 ...), and keeps the result only if fewer cores end up shared between
 * ranks. The set of CPUs used, and each rank's socket, do not change.
 *
 * Every mode produces raw per-rank CPU sequences (`threads` long, possibly repeating when
 * wrapped); finish_plan() turns them into sorted distinct sets and computes `oversubscribed`.
 */
#include "dist/pin.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

#define MAX_RANK_ENTRIES (1 << 22) /* instances x threads: far past any machine, still small */

/* An explicit list is given as the list itself (dist.cpu_list, a digit first), not by name. */
static const char *const mode_names[] = {
    [DT_PIN_CORES] = "cores",
    [DT_PIN_SOCKETS] = "sockets",
    [DT_PIN_NONE] = "none",
    [DT_PIN_LIST] = NULL,
};
_Static_assert(sizeof mode_names / sizeof mode_names[0] == DT_PIN_MODE_COUNT,
               "one entry per pin mode");
const struct dt_names dt_pin_mode_names = DT_NAMES(mode_names);

int dt_pin_mode_parse(const char *s, enum dt_pin_mode *mode, const char *what)
{
    int v = dt_names_find(&dt_pin_mode_names, s);
    if (v >= 0)
        *mode = (enum dt_pin_mode)v;
    else if (s[0] >= '0' && s[0] <= '9')
        *mode = DT_PIN_LIST;
    else
        return dt_fail(DT_EUSAGE,
                       "%s: '%s' is not cores, sockets, none or a CPU list like 0-7,16-23", what,
                       s);
    return 0;
}

const char *dt_pin_mode_name(enum dt_pin_mode mode)
{
    switch (mode) {
    case DT_PIN_CORES:
        return "cores";
    case DT_PIN_SOCKETS:
        return "sockets";
    case DT_PIN_NONE:
        return "none";
    case DT_PIN_LIST:
        return "list";
    }
    return "?";
}

/* State of the cores-mode placement (see the file comment). Indices are into t->cpus. */
struct placer {
    const struct dt_topology *t;
    int *order;     /* CPU indices by (smt, socket, core): the order threads are handed out */
    bool *used;     /* per CPU index */
    int *core_rank; /* per core: the last rank that took one of its threads, or -1 */
    int level, rem; /* SMT rank K and how many rank-K threads the job may still use */
    int *seq;       /* output: the rank being placed writes its CPU ids here */
    int got, want, rank;
};

static int by_level(const void *a, const void *b, void *arg)
{
    const struct dt_cpu *c = arg, *x = &c[*(const int *)a], *y = &c[*(const int *)b];
    if (x->smt != y->smt)
        return x->smt - y->smt;
    if (x->socket != y->socket)
        return x->socket - y->socket;
    return x->core != y->core ? x->core - y->core : x->id - y->id;
}

static void take(struct placer *pl, int i)
{
    const struct dt_cpu *c = &pl->t->cpus[i];
    pl->used[i] = true;
    pl->core_rank[c->core] = pl->rank;
    pl->rem -= c->smt == pl->level;
    pl->seq[pl->got++] = c->id;
}

/* Free threads per socket: below rank K (lower[]), and at rank K (at_level[]). */
static void socket_room(const struct placer *pl, int *lower, int *at_level)
{
    for (int s = 0; s < pl->t->sockets; s++)
        lower[s] = at_level[s] = 0;
    for (int i = 0; i < pl->t->ncpus; i++) {
        const struct dt_cpu *c = &pl->t->cpus[i];
        if (pl->used[i])
            continue;
        lower[c->socket] += c->smt < pl->level;
        at_level[c->socket] += c->smt == pl->level;
    }
}

static void take_from_socket(struct placer *pl, int s)
{
    const struct dt_cpu *cpus = pl->t->cpus;
    for (int k = 0; k < pl->t->ncpus && pl->got < pl->want; k++) {
        int i = pl->order[k];
        if (cpus[i].socket == s && !pl->used[i] && cpus[i].smt < pl->level)
            take(pl, i);
    }
    /* Rank-K threads: siblings of the rank's own cores first, then any. */
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < pl->t->ncpus && pl->got < pl->want && pl->rem > 0; k++) {
            int i = pl->order[k];
            const struct dt_cpu *c = &cpus[i];
            if (c->socket == s && !pl->used[i] && c->smt == pl->level &&
                (pass == 1 || pl->core_rank[c->core] == pl->rank))
                take(pl, i);
        }
}

/* False only if the budget arithmetic were wrong: the budget always covers the rank.
 * lower[] and room[] are scratch, one entry per socket. */
static bool place_rank(struct placer *pl, int *lower, int *room)
{
    int sockets = pl->t->sockets, best = -1, best_lower = -1;
    socket_room(pl, lower, room);
    for (int s = 0; s < sockets; s++) {
        room[s] = lower[s] + (room[s] < pl->rem ? room[s] : pl->rem);
        int whole = lower[s] < pl->want ? lower[s] : pl->want;
        if (room[s] >= pl->want && whole > best_lower)
            best = s, best_lower = whole;
    }
    if (best >= 0) {
        take_from_socket(pl, best);
        return pl->got == pl->want;
    }
    /* Spans sockets: the roomiest first keeps most of the rank together. */
    while (pl->got < pl->want) {
        int s = 0;
        for (int u = 1; u < sockets; u++)
            if (room[u] > room[s])
                s = u;
        if (room[s] < 0)
            return false;
        take_from_socket(pl, s);
        room[s] = -1;
    }
    return true;
}

/* Core-major position of CPU index i: threads of one core are adjacent. */
static int by_core(const void *a, const void *b, void *arg)
{
    const struct dt_cpu *c = arg, *x = &c[*(const int *)a], *y = &c[*(const int *)b];
    return x->core != y->core ? x->core - y->core : x->smt - y->smt;
}

/* Cores (of the CPU indices pool[0..n), core-major) whose threads belong to more than one
 * rank, with owner[k] the rank of pool[k]. */
static int shared_cores(const struct dt_topology *t, const int *pool, const int *owner, int n)
{
    int shared = 0;
    for (int k = 1, counted = -1; k < n; k++) {
        int core = t->cpus[pool[k]].core;
        if (core == t->cpus[pool[k - 1]].core && owner[k] != owner[k - 1] && core != counted)
            shared++, counted = core;
    }
    return shared;
}

/* The re-deal described in the file comment, for socket s. rank_socket[r]: r's socket, or
 * -1 when it spans; cpu_rank[i]: the rank holding CPU index i, or -1. */
static void redeal_socket(const struct dt_topology *t, int s, int ranks, int threads, int *seq,
                          const int *rank_socket, const int *cpu_rank, const int *core_major,
                          int *scratch)
{
    int *pool = scratch, *owner = scratch + t->ncpus, *dealt = scratch + 2 * t->ncpus;
    int *members = scratch + 3 * t->ncpus, n = 0, m = 0;
    for (int k = 0; k < t->ncpus; k++) {
        int i = core_major[k], r = cpu_rank[i];
        if (t->cpus[i].socket == s && r >= 0 && rank_socket[r] == s)
            pool[n] = i, owner[n++] = r;
    }
    for (int r = 0; r < ranks; r++)
        if (rank_socket[r] == s)
            members[m++] = r;
    for (int k = 0; k < n; k++)
        dealt[k] = members[k / threads];
    if (m < 2 || shared_cores(t, pool, dealt, n) >= shared_cores(t, pool, owner, n))
        return;
    for (int k = 0; k < n; k++)
        seq[(size_t)dealt[k] * threads + k % threads] = t->cpus[pool[k]].id;
}

static int redeal_by_core(const struct dt_topology *t, int ranks, int threads, int *seq)
{
    int n = t->ncpus;
    int *index_of = malloc(sizeof(int) * DT_TOPO_MAX_CPUS);
    int *cpu_rank = malloc(sizeof(int) * (size_t)n);
    int *core_major = malloc(sizeof(int) * (size_t)n);
    int *rank_socket = malloc(sizeof(int) * (size_t)ranks);
    int *scratch = malloc(sizeof(int) * 4 * (size_t)n);
    int rc = 0;
    if (!index_of || !cpu_rank || !core_major || !rank_socket || !scratch) {
        rc = dt_fail(DT_ERUNTIME, "out of memory planning CPU pinning");
        goto out;
    }
    for (int i = 0; i < n; i++)
        index_of[t->cpus[i].id] = i, cpu_rank[i] = -1, core_major[i] = i;
    qsort_r(core_major, (size_t)n, sizeof(int), by_core, t->cpus);
    for (int r = 0; r < ranks; r++) {
        const int *mine = seq + (size_t)r * threads;
        rank_socket[r] = t->cpus[index_of[mine[0]]].socket;
        for (int j = 0; j < threads; j++) {
            const struct dt_cpu *c = &t->cpus[index_of[mine[j]]];
            cpu_rank[index_of[mine[j]]] = r;
            if (c->socket != rank_socket[r])
                rank_socket[r] = -1;
        }
    }
    /* A rank that became -1 part-way marked its earlier CPUs with its id: harmless, the pool
     * only takes CPUs of ranks whose socket is s. */
    for (int s = 0; s < t->sockets; s++)
        redeal_socket(t, s, ranks, threads, seq, rank_socket, cpu_rank, core_major, scratch);
out:
    free(index_of);
    free(cpu_rank);
    free(core_major);
    free(rank_socket);
    free(scratch);
    return rc;
}

/* Places `ranks` ranks of `threads` CPUs each; ranks x threads <= ncpus. seq is rank-major. */
static int place_cores(const struct dt_topology *t, int ranks, int threads, int *seq)
{
    int n = t->ncpus;
    struct placer pl = {.t = t, .seq = seq, .want = threads};
    pl.order = malloc(sizeof(int) * (size_t)n);
    pl.used = calloc((size_t)n, sizeof(bool));
    pl.core_rank = malloc(sizeof(int) * (size_t)t->cores);
    int *lower = malloc(sizeof(int) * (size_t)t->sockets);
    int *room = malloc(sizeof(int) * (size_t)t->sockets);
    int rc = 0;
    if (!pl.order || !pl.used || !pl.core_rank || !lower || !room) {
        rc = dt_fail(DT_ERUNTIME, "out of memory planning CPU pinning");
        goto out;
    }
    for (int i = 0; i < n; i++)
        pl.order[i] = i;
    qsort_r(pl.order, (size_t)n, sizeof(int), by_level, t->cpus);
    for (int c = 0; c < t->cores; c++)
        pl.core_rank[c] = -1;
    /* The budget: all threads below rank K, `rem` of rank K. order[] is sorted by rank. */
    int need = ranks * threads;
    pl.level = t->cpus[pl.order[need - 1]].smt;
    pl.rem = need;
    for (int i = 0; i < n; i++)
        pl.rem -= t->cpus[i].smt < pl.level;
    for (int r = 0; r < ranks; r++) {
        pl.rank = r, pl.got = 0, pl.seq = seq + (size_t)r * (size_t)threads;
        if (!place_rank(&pl, lower, room)) {
            rc = dt_fail(DT_ERUNTIME, "pin plan: no room left for rank %d (a bug)", r);
            break;
        }
    }
    if (rc == 0)
        rc = redeal_by_core(t, ranks, threads, seq);
out:
    free(pl.order);
    free(pl.used);
    free(pl.core_rank);
    free(lower);
    free(room);
    return rc;
}

/* Cores mode; when the job does not fit, the R ranks that do are placed and rank r repeats
 * rank r % R (with a rank bigger than the machine cycling through all of it). */
static int seq_cores(const struct dt_topology *t, int instances, int threads, int *seq)
{
    int fit_threads = threads < t->ncpus ? threads : t->ncpus;
    int fit_ranks = t->ncpus / fit_threads;
    if (fit_ranks > instances)
        fit_ranks = instances;
    int *base = malloc(sizeof(int) * (size_t)fit_ranks * (size_t)fit_threads);
    if (!base)
        return dt_fail(DT_ERUNTIME, "out of memory planning CPU pinning");
    int rc = place_cores(t, fit_ranks, fit_threads, base);
    for (int r = 0; rc == 0 && r < instances; r++)
        for (int j = 0; j < threads; j++)
            seq[(size_t)r * threads + j] = base[(r % fit_ranks) * fit_threads + j % fit_threads];
    free(base);
    return rc;
}

static int seq_list(const struct dt_topology *t, const char *list, int instances, int threads,
                    int *seq)
{
    int cap = DT_TOPO_MAX_CPUS * 16; /* room for repeats such as "0-3,0-3" */
    int *ids = malloc(sizeof(int) * (size_t)cap);
    bool *usable = calloc(DT_TOPO_MAX_CPUS, sizeof(bool));
    int n = ids && usable ? dt_cpu_list_parse(list ? list : "", ids, cap, "pin list")
                          : dt_fail(DT_ERUNTIME, "out of memory planning CPU pinning");
    for (int i = 0; usable && i < t->ncpus; i++)
        usable[t->cpus[i].id] = true;
    for (int i = 0; i < n; i++)
        if (!usable[ids[i]]) {
            int *have = malloc(sizeof(int) * (size_t)t->ncpus);
            char avail[160] = "?";
            for (int k = 0; have && k < t->ncpus; k++)
                have[k] = t->cpus[k].id;
            if (have)
                dt_cpu_list_format(have, t->ncpus, avail, sizeof avail);
            free(have);
            n = dt_fail(DT_EUSAGE, "pin list: CPU %d is not usable by this process (usable: %s)",
                        ids[i], avail);
            break;
        }
    for (size_t k = 0; n > 0 && k < (size_t)instances * (size_t)threads; k++)
        seq[k] = ids[k % (size_t)n];
    free(ids);
    free(usable);
    return n < 0 ? n : 0;
}

static int by_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* Per rank: sort and drop repeats; then flag any CPU that runs more than one thread. */
static int finish_plan(struct dt_pin_plan *p, int *seq, int seq_stride, const int *seq_len)
{
    int *ranks_on = calloc(DT_TOPO_MAX_CPUS, sizeof(int));
    if (!ranks_on)
        return dt_fail(DT_ERUNTIME, "out of memory planning CPU pinning");
    for (int r = 0; r < p->instances; r++) {
        int *s = seq + (size_t)r * seq_stride, *out = p->cpus + (size_t)r * p->stride, k = 0;
        qsort(s, (size_t)seq_len[r], sizeof(int), by_int);
        for (int j = 0; j < seq_len[r]; j++)
            if (j == 0 || s[j] != s[j - 1])
                out[k++] = s[j];
        p->ncpus[r] = k;
        for (int j = k; j < p->stride; j++)
            out[j] = -1;
        for (int j = 0; j < k; j++)
            ranks_on[out[j]]++;
        if (k < p->threads)
            p->oversubscribed = true;
    }
    for (int c = 0; c < DT_TOPO_MAX_CPUS; c++)
        if (ranks_on[c] > 1)
            p->oversubscribed = true;
    free(ranks_on);
    return 0;
}

/* sockets mode: seq holds whole sockets, `stride` entries per rank. */
static void seq_sockets(const struct dt_topology *t, int instances, int stride, int *seq, int *len)
{
    for (int r = 0; r < instances; r++) {
        len[r] = 0;
        for (int i = 0; i < t->ncpus; i++)
            if (t->cpus[i].socket == r % t->sockets)
                seq[(size_t)r * stride + len[r]++] = t->cpus[i].id;
    }
}

static int largest_socket(const struct dt_topology *t)
{
    int best = 0;
    for (int s = 0; s < t->sockets; s++) {
        int n = 0;
        for (int i = 0; i < t->ncpus; i++)
            n += t->cpus[i].socket == s;
        best = n > best ? n : best;
    }
    return best;
}

int dt_pin_plan_make(struct dt_pin_plan *p, const struct dt_topology *t, enum dt_pin_mode mode,
                     const char *list, int instances, int threads)
{
    memset(p, 0, sizeof *p);
    p->mode = mode, p->instances = instances, p->threads = threads;
    int stride = mode == DT_PIN_SOCKETS ? largest_socket(t) : threads;
    if (instances < 1 || threads < 1 || (long)instances * threads > MAX_RANK_ENTRIES ||
        (long)instances * stride > MAX_RANK_ENTRIES)
        return dt_fail(DT_EUSAGE,
                       "pinning %d instances x %d threads: need at least 1 of each and at most "
                       "%d CPU slots in all",
                       instances, threads, MAX_RANK_ENTRIES);
    if (mode == DT_PIN_NONE) {
        p->oversubscribed = (long)instances * threads > t->ncpus;
        return 0;
    }
    p->stride = stride;
    size_t entries = (size_t)instances * (size_t)p->stride;
    int *seq = malloc(sizeof(int) * entries);
    int *len = malloc(sizeof(int) * (size_t)instances);
    p->cpus = malloc(sizeof(int) * entries);
    p->ncpus = malloc(sizeof(int) * (size_t)instances);
    int rc = 0;
    if (!seq || !len || !p->cpus || !p->ncpus)
        rc = dt_fail(DT_ERUNTIME, "out of memory planning CPU pinning");
    else if (mode == DT_PIN_SOCKETS)
        seq_sockets(t, instances, p->stride, seq, len);
    else
        rc = mode == DT_PIN_LIST ? seq_list(t, list, instances, threads, seq)
                                 : seq_cores(t, instances, threads, seq);
    for (int r = 0; rc == 0 && mode != DT_PIN_SOCKETS && r < instances; r++)
        len[r] = threads;
    if (rc == 0)
        rc = finish_plan(p, seq, p->stride, len);
    free(seq);
    free(len);
    if (rc < 0)
        dt_pin_plan_free(p);
    return rc;
}

void dt_pin_plan_free(struct dt_pin_plan *p)
{
    free(p->cpus);
    free(p->ncpus);
    p->cpus = p->ncpus = NULL;
}

int dt_pin_apply(const struct dt_pin_plan *p, int rank)
{
    if (!p->cpus)
        return 0;
    if (rank < 0 || rank >= p->instances)
        return dt_fail(DT_ERUNTIME, "pinning rank %d of a plan for %d instances", rank,
                       p->instances);
    cpu_set_t *set = CPU_ALLOC(DT_TOPO_MAX_CPUS);
    size_t size = CPU_ALLOC_SIZE(DT_TOPO_MAX_CPUS);
    if (!set)
        return dt_fail(DT_ERUNTIME, "out of memory pinning rank %d", rank);
    CPU_ZERO_S(size, set);
    const int *cpus = p->cpus + (size_t)rank * p->stride;
    for (int j = 0; j < p->ncpus[rank]; j++)
        CPU_SET_S(cpus[j], size, set);
    int rc = sched_setaffinity(0, size, set) == 0 ? 0 : errno;
    CPU_FREE(set);
    if (rc)
        return dt_fail(DT_ERUNTIME, "pinning rank %d to its CPUs: sched_setaffinity: %s", rank,
                       strerror(rc));
    return 0;
}

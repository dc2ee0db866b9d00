/* The shared-memory communicator; the life cycle is described in shm.h.
 *
 * Segment layout (every part starts on its own cache line):
 *   struct shm_header   read-only job constants, then the sync line (arrival counter, futex
 *                       word, sleeper count, abort state) and the abort reason;
 *   size x struct shm_rank_line   written only by that rank: how many barriers it has arrived
 *                       at (names the missing ranks after a timeout) and the collectives it
 *                       entered last (the mismatch check);
 *   2 buffer sets, each in[size][chunk] floats then out[size][seg_max] floats.
 *
 * Epochs. Every rank counts the barriers it has passed (its epoch e). The one rule that makes
 * the double-buffered sets safe: data written during epoch e goes to set e & 1 and is read only
 * during epoch e + 1. A rank that writes set e & 1 again (epoch e + 2) has passed barrier e + 2,
 * which every rank reached only after it finished reading (epoch e + 1). Every collective obeys
 * the rule, so they can follow each other in any order with no extra synchronisation.
 *
 * All-reduce (large). The array is cut into chunks of `chunk` floats, each chunk into `size`
 * segments; rank r owns segment r. In epoch t a rank does three things at once:
 *   copy-in   chunk t: its segments k != r into in[r] of the set of epoch t;
 *   reduce    chunk t-1: segment r summed over ranks 0..size-1 in a fixed binary tree (its own
 *             term is read from its buffer), written back to its buffer and to out[r];
 *   gather    chunk t-2: the other ranks' out[k] copied into its buffer;
 * then a barrier. A chunk therefore costs one barrier and the array C + 1 barriers, and the
 * three streams overlap (the regions they touch are disjoint). Each segment is summed by exactly
 * one rank and copied by the others, so every rank ends bit-identical, and the fixed order makes
 * the result independent of timing. The chunk (1 MiB by default) bounds the segment size and keeps
 * the shared working set (2 sets x size x (chunk + chunk/size)) in the caches: the buffers are
 * streamed once.
 *
 * All-reduce (small, <= SMALL_BYTES): every rank copies its whole array into in[r], one
 * barrier, every rank sums all in[k] in the same tree. One barrier instead of two, and the same
 * order of additions on every rank keeps the results bit-identical.
 *
 * bf16 all-reduce (dist.grad_dtype): the same two algorithms over the same bytes. Copy-in packs
 * the terms as bf16 (so a chunk holds twice the elements); the reducing rank widens every rank's
 * bf16 terms (its own rounded the same way, from its buffer) to fp32 block by block, adds them in
 * the same tree, rounds the sum to bf16 into its buffer and its out area; the gather widens the
 * others' out areas. One rounding per term and one of the sum, whatever the rank count.
 *
 * Broadcast streams pieces of size x chunk floats (the in[] area of a set) from the root, one
 * barrier per piece; barrier is the barrier itself. The first barrier of every collective also
 * compares the call (op, root, length) with rank 0's, so mismatched calls fail loudly.
 *
 * Waiting. A barrier is a shared monotonic (wrapping) arrival counter: barrier e + 1 is
 * complete when it reaches (e + 1) x size. A waiter pause-spins for 50 us (not when there are
 * more ranks than cores), then sched_yields until 1 ms (it stays runnable: a futex wake-up
 * costs tens of microseconds on a busy machine), then sleeps with FUTEX_WAIT on a separate `gen`
 * word (shared, not PRIVATE: the ranks are different processes) in slices, re-checking the abort
 * flag and its deadline. The rank that completes a barrier bumps `gen` and wakes only when someone
 * registered as a sleeper (the sleeper count and the counter are both seq_cst, so either the
 * completer sees the sleeper or the sleeper sees the completed counter). Abort sets the flag, bumps
 * `gen` and wakes everyone: a waiter that read `gen` before the abort cannot miss it.
 *
 * The segment descriptors live in a small static table, process-wide because destroy must be
 * safe to call twice and from an atexit handler or a failure path, where free() is not; the
 * atexit handler unlinks any name the creating process still owns.
 */
#include "dist/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ volatile("yield" ::: "memory")
#else
#define cpu_relax() ((void)0)
#endif

#include "dist/bf16_sum.h"
#include "util/clock.h"
#include "util/cpu.h"
#include "util/err.h"
#include "util/sum_tree.h"

#define LINE         64
#define MAGIC        0x64747368u /* "dtsh" */
#define MAX_RANKS    1024
#define MAX_SEGMENTS 16
#define REASON_MAX   256
#define NAME_MAX_LEN 48
#ifndef SMALL_BYTES
#define SMALL_BYTES (16u << 10) /* all-reduce of at most this many bytes: one barrier */
#endif
#define SEG_ALIGN      16 /* floats: segments start on cache lines */
#define MAX_DATA_BYTES ((size_t)512 << 20)
/* A waiter pause-spins this long (not when oversubscribed), then sched_yields until
 * YIELD_SECONDS, then sleeps on the futex. Overridable with -D for tuning runs. */
#ifndef SPIN_SECONDS
#define SPIN_SECONDS 50e-6
#endif
#ifndef YIELD_SECONDS
#define YIELD_SECONDS 1e-3
#endif
#define SLEEP_SLICE     0.1 /* seconds: longest futex sleep between deadline checks */
#define DEFAULT_TIMEOUT 300.0
#define POPULATE_MAX    ((size_t)64 << 20)

enum { ABORT_NONE, ABORT_WRITING, ABORT_SET };
enum { SEG_FREE, SEG_LIVE, SEG_DYING };

struct shm_header {
    uint32_t magic, size;
    uint32_t cpus;           /* in the creator's affinity mask: ranks > cpus means oversubscribed */
    uint64_t chunk, seg_max; /* floats */
    uint64_t set_floats;     /* floats per buffer set */
    double timeout;
    _Alignas(LINE) _Atomic uint32_t arrived; /* wraps; barrier e+1 done at (e+1) * size */
    _Atomic uint32_t gen;                    /* futex word */
    _Atomic uint32_t sleepers;
    _Atomic uint32_t abort_state;
    _Alignas(LINE) char reason[REASON_MAX];
};

struct shm_rank_line {
    _Alignas(LINE) _Atomic uint32_t arrivals; /* barriers this rank has arrived at */
    _Atomic uint64_t call[2]; /* the collective it entered at epoch e, in call[e & 1] */
};

struct dt_shm_segment {
    _Atomic int state;
    pid_t owner;
    char name[NAME_MAX_LEN];
    void *base;
    size_t len;
    struct shm_header *hdr;
    struct shm_rank_line *ranks;
    float *data; /* 2 sets */
};

struct shm_comm {
    struct dt_shm_segment *seg;
    struct shm_header *hdr;
    int rank, size;
    uint32_t epoch; /* barriers passed */
    double spin;    /* seconds of pause-spinning before yielding */
    int failed;
    char error[512];
};

static struct dt_shm_segment segments[MAX_SEGMENTS];
static atomic_flag atexit_registered = ATOMIC_FLAG_INIT;

static size_t round_up(size_t x, size_t to)
{
    return (x + to - 1) / to * to;
}

/* ---- segment ---------------------------------------------------------------------------- */

static size_t header_bytes(int size)
{
    return round_up(sizeof(struct shm_header) + (size_t)size * sizeof(struct shm_rank_line), 4096);
}

static float *set_base(const struct dt_shm_segment *seg, uint32_t epoch)
{
    return seg->data + (size_t)(epoch & 1) * seg->hdr->set_floats;
}

static float *slot_in(const struct dt_shm_segment *seg, uint32_t epoch, int rank)
{
    return set_base(seg, epoch) + (size_t)rank * seg->hdr->chunk;
}

static float *slot_out(const struct dt_shm_segment *seg, uint32_t epoch, int rank)
{
    const struct shm_header *h = seg->hdr;
    return set_base(seg, epoch) + (size_t)h->size * h->chunk + (size_t)rank * h->seg_max;
}

static void release(struct dt_shm_segment *seg)
{
    if (seg->base)
        munmap(seg->base, seg->len);
    if (seg->owner == getpid())
        shm_unlink(seg->name);
    seg->base = NULL;
    atomic_store(&seg->state, SEG_FREE);
}

static void unlink_all_at_exit(void)
{
    for (int i = 0; i < MAX_SEGMENTS; i++)
        if (atomic_load(&segments[i].state) == SEG_LIVE && segments[i].owner == getpid())
            shm_unlink(segments[i].name);
}

static struct dt_shm_segment *take_descriptor(void)
{
    for (int i = 0; i < MAX_SEGMENTS; i++) {
        int expect = SEG_FREE;
        if (atomic_compare_exchange_strong(&segments[i].state, &expect, SEG_LIVE))
            return &segments[i];
    }
    return NULL;
}

/* Chunk floats: a multiple of SEG_ALIGN x size (so segments of a full chunk stay aligned),
 * shrunk when 2 sets for this many ranks would exceed MAX_DATA_BYTES. */
static size_t pick_chunk(int size, size_t chunk_bytes)
{
    size_t unit = (size_t)SEG_ALIGN * (size_t)size;
    size_t chunk = round_up(chunk_bytes / sizeof(float), unit);
    size_t per_chunk = 2 * sizeof(float) * ((size_t)size + 1); /* 2 sets, in + out */
    while (chunk > unit && chunk * per_chunk > MAX_DATA_BYTES)
        chunk -= unit;
    return chunk;
}

static int open_unique(char *name)
{
    for (int attempt = 0; attempt < 16; attempt++) {
        uint32_t rnd = 0;
        if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != sizeof rnd)
            rnd = (uint32_t)(dt_now() * 1e9) ^ (uint32_t)attempt * 2654435761u;
        snprintf(name, NAME_MAX_LEN, "/dtrain-%ld-%08x", (long)getpid(), rnd);
        int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    errno = EEXIST;
    return -1;
}

int dt_shm_segment_create(struct dt_shm_segment **out, int size, size_t chunk_bytes, double timeout)
{
    *out = NULL;
    if (size < 1 || size > MAX_RANKS)
        return dt_fail(DT_EUSAGE, "shm: %d ranks (expected 1..%d)", size, MAX_RANKS);
    if (timeout < 0)
        return dt_fail(DT_EUSAGE, "shm: negative timeout %g", timeout);
    struct dt_shm_segment *seg = take_descriptor();
    if (!seg)
        return dt_fail(DT_ERUNTIME, "shm: more than %d segments in one process", MAX_SEGMENTS);
    seg->owner = getpid();
    seg->base = NULL;
    size_t chunk = pick_chunk(size, chunk_bytes ? chunk_bytes : DT_SHM_DEFAULT_CHUNK_BYTES);
    size_t seg_max = chunk / (size_t)size;
    size_t set_floats = chunk * (size_t)size + seg_max * (size_t)size;
    size_t hbytes = header_bytes(size);
    seg->len = hbytes + 2 * set_floats * sizeof(float);

    int fd = open_unique(seg->name);
    if (fd < 0) {
        int err = errno;
        atomic_store(&seg->state, SEG_FREE);
        return dt_fail(DT_ERUNTIME, "shm: cannot create shared-memory segment %s: %s", seg->name,
                       strerror(err));
    }
    /* posix_fallocate, not ftruncate alone: a /dev/shm without room then fails here, with a
     * message, instead of killing a rank with SIGBUS at its first collective. */
    int err = posix_fallocate(fd, 0, (off_t)seg->len);
    if (err == ENOSPC || err == EFBIG) {
        close(fd);
        shm_unlink(seg->name);
        int rc = dt_fail(DT_ERUNTIME,
                         "shm: /dev/shm has no room for the %zu-byte segment of %d ranks (%s): "
                         "free some, or give the container a larger /dev/shm (docker run "
                         "--shm-size)",
                         seg->len, size, strerror(err));
        atomic_store(&seg->state, SEG_FREE);
        return rc;
    }
    if (err == EINVAL || err == EOPNOTSUPP) /* a file system without fallocate */
        err = ftruncate(fd, (off_t)seg->len) < 0 ? errno : 0;
    if (!err) {
        /* Pre-faulting keeps page faults out of the first collectives' timings. */
        int populate = seg->len <= POPULATE_MAX ? MAP_POPULATE : 0;
        seg->base = mmap(NULL, seg->len, PROT_READ | PROT_WRITE, MAP_SHARED | populate, fd, 0);
        if (seg->base == MAP_FAILED) {
            err = errno;
            seg->base = NULL;
        }
    }
    close(fd);
    if (err) {
        int rc = dt_fail(DT_ERUNTIME, "shm: cannot size or map %s (%zu bytes): %s", seg->name,
                         seg->len, strerror(err));
        release(seg);
        return rc;
    }
    /* The mapping is all the ranks need (they inherit it): with the name gone at once, even a
     * SIGKILLed parent leaves nothing in /dev/shm. */
    shm_unlink(seg->name);
    seg->hdr = seg->base;
    seg->ranks = (struct shm_rank_line *)((char *)seg->base + sizeof(struct shm_header));
    seg->data = (float *)((char *)seg->base + hbytes);
    struct shm_header *h = seg->hdr;
    h->magic = MAGIC;
    h->size = (uint32_t)size;
    h->chunk = chunk;
    h->seg_max = seg_max;
    h->set_floats = set_floats;
    h->timeout = timeout > 0 ? timeout : DEFAULT_TIMEOUT;
    h->cpus = (uint32_t)dt_cpu_usable();
    if (!atomic_flag_test_and_set(&atexit_registered))
        atexit(unlink_all_at_exit);
    *out = seg;
    return 0;
}

const char *dt_shm_segment_name(const struct dt_shm_segment *seg)
{
    return seg->name;
}

static void wake_all(struct shm_header *h)
{
    syscall(SYS_futex, &h->gen, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void dt_shm_segment_abort(struct dt_shm_segment *seg, const char *reason)
{
    if (!seg || atomic_load(&seg->state) != SEG_LIVE || !seg->hdr)
        return;
    struct shm_header *h = seg->hdr;
    uint32_t expect = ABORT_NONE;
    if (atomic_compare_exchange_strong(&h->abort_state, &expect, ABORT_WRITING)) {
        size_t i = 0; /* no snprintf: this runs in signal handlers */
        for (; reason && reason[i] && i < REASON_MAX - 1; i++)
            h->reason[i] = reason[i];
        h->reason[i] = '\0';
        atomic_store(&h->abort_state, ABORT_SET);
    }
    atomic_fetch_add(&h->gen, 1);
    wake_all(h);
}

void dt_shm_segment_destroy(struct dt_shm_segment *seg)
{
    if (!seg || seg < segments || seg >= segments + MAX_SEGMENTS)
        return;
    int expect = SEG_LIVE;
    if (atomic_compare_exchange_strong(&seg->state, &expect, SEG_DYING))
        release(seg);
}

/* ---- waiting ---------------------------------------------------------------------------- */

static bool barrier_done(struct shm_header *h, uint32_t target)
{
    /* seq_cst, not acquire: the sleeper protocol needs this load ordered after its increment
     * of `sleepers` (a plain load on x86). */
    return (int32_t)(atomic_load(&h->arrived) - target) >= 0;
}

static int comm_fail(struct shm_comm *s, int code, const char *fmt, const char *what,
                     const char *detail)
{
    snprintf(s->error, sizeof s->error, fmt, what, detail);
    s->failed = code;
    return dt_fail(code, "%s", s->error);
}

static int aborted(struct shm_comm *s, const char *what)
{
    struct shm_header *h = s->hdr;
    char reason[REASON_MAX] = "job aborted";
    /* The aborting process may be between its two stores; give it a moment. */
    for (int i = 0; i < 1000 && atomic_load(&h->abort_state) != ABORT_SET; i++)
        sched_yield();
    if (atomic_load(&h->abort_state) == ABORT_SET && h->reason[0])
        snprintf(reason, sizeof reason, "%s", h->reason);
    return comm_fail(s, DT_ERUNTIME, "shm %s: job aborted: %s", what, reason);
}

static int timed_out(struct shm_comm *s, const char *what, uint32_t target_arrivals)
{
    char missing[256] = "";
    size_t len = 0;
    int count = 0;
    for (int k = 0; k < s->size; k++) {
        uint32_t a = atomic_load(&s->seg->ranks[k].arrivals);
        if ((int32_t)(a - target_arrivals) >= 0)
            continue;
        if (count++ < 16 && len < sizeof missing - 16)
            len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%d",
                                    count > 1 ? ", " : "", k);
    }
    if (count > 16)
        snprintf(missing + len, sizeof missing - len, " and %d more", count - 16);
    char detail[400];
    snprintf(detail, sizeof detail, "rank%s %s never arrived within %g s (segment %s)",
             count == 1 ? "" : "s", count ? missing : "?", s->hdr->timeout, s->seg->name);
    return comm_fail(s, DT_ERUNTIME, "shm %s: %s", what, detail);
}

static void futex_sleep(_Atomic uint32_t *word, uint32_t expect, double seconds)
{
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    syscall(SYS_futex, word, FUTEX_WAIT, expect, &ts, NULL, 0);
}

/* Arrives at the next barrier and waits for every rank. */
static int barrier_wait(struct shm_comm *s, const char *what)
{
    struct shm_header *h = s->hdr;
    uint32_t target = (s->epoch + 1) * (uint32_t)s->size;
    atomic_store_explicit(&s->seg->ranks[s->rank].arrivals, s->epoch + 1, memory_order_relaxed);
    uint32_t prev = atomic_fetch_add(&h->arrived, 1);
    if (prev + 1 == target) {
        if (atomic_load(&h->sleepers)) {
            atomic_fetch_add(&h->gen, 1);
            wake_all(h);
        }
    } else {
        double start = dt_now(), deadline = start + h->timeout;
        double now = start;
        long polls = 0;
        while (!barrier_done(h, target)) {
            if (atomic_load_explicit(&h->abort_state, memory_order_relaxed) != ABORT_NONE)
                return aborted(s, what);
            if (now - start < s->spin) {
                cpu_relax();
                if ((++polls & 15) == 0)
                    now = dt_now();
                continue;
            }
            if (now - start > YIELD_SECONDS)
                break;
            sched_yield(); /* hands the core over when the rank we wait for shares it */
            now = dt_now();
        }
        while (!barrier_done(h, target)) {
            atomic_fetch_add(&h->sleepers, 1);
            uint32_t gen = atomic_load(&h->gen);
            bool done = barrier_done(h, target);
            bool abort = atomic_load(&h->abort_state) != ABORT_NONE;
            double left = deadline - dt_now();
            if (!done && !abort && left > 0)
                futex_sleep(&h->gen, gen, left < SLEEP_SLICE ? left : SLEEP_SLICE);
            atomic_fetch_sub(&h->sleepers, 1);
            if (abort)
                return aborted(s, what);
            if (!done && left <= 0 && !barrier_done(h, target))
                return timed_out(s, what, s->epoch + 1);
        }
    }
    if (atomic_load_explicit(&h->abort_state, memory_order_relaxed) != ABORT_NONE)
        return aborted(s, what);
    s->epoch++;
    return 0;
}

/* What a collective call was: op, root and length, so ranks can tell they called the same. */
enum { OP_ALLREDUCE = 1, OP_BROADCAST, OP_BARRIER, OP_ALLREDUCE_BF16 };

static uint64_t call_desc(int op, int root, size_t n)
{
    return (uint64_t)op << 56 | (uint64_t)(root & 0xffff) << 40 | ((uint64_t)n & 0xffffffffffu);
}

static void describe(char *out, size_t len, uint64_t d)
{
    int op = (int)(d >> 56), root = (int)(d >> 40 & 0xffff);
    unsigned long long n = d & 0xffffffffffu;
    if (op == OP_ALLREDUCE)
        snprintf(out, len, "all-reduce of %llu floats", n);
    else if (op == OP_ALLREDUCE_BF16)
        snprintf(out, len, "bf16 all-reduce of %llu floats", n);
    else if (op == OP_BROADCAST)
        snprintf(out, len, "broadcast of %llu bytes from rank %d", n, root);
    else
        snprintf(out, len, "barrier");
}

/* The first barrier of a collective, which also checks that rank 0 entered the same one: a
 * mismatch (a bug in the caller) fails here instead of summing unrelated data. Rank 0 cannot
 * overwrite call[e & 1] before every rank has passed barrier e + 2, so the read is safe. */
static int first_barrier(struct shm_comm *s, const char *what, uint64_t desc)
{
    uint32_t e = s->epoch;
    atomic_store_explicit(&s->seg->ranks[s->rank].call[e & 1], desc, memory_order_relaxed);
    int rc = barrier_wait(s, what);
    if (rc < 0 || s->rank == 0)
        return rc;
    uint64_t root_desc = atomic_load_explicit(&s->seg->ranks[0].call[e & 1], memory_order_relaxed);
    if (root_desc == desc)
        return 0;
    char mine[96], theirs[96], detail[256];
    describe(mine, sizeof mine, desc);
    describe(theirs, sizeof theirs, root_desc);
    snprintf(detail, sizeof detail, "rank %d called %s while rank 0 called %s", s->rank, mine,
             theirs);
    return comm_fail(s, DT_ERUNTIME, "shm %s: mismatched collectives: %s", what, detail);
}

/* ---- collectives ------------------------------------------------------------------------ */

static int enter(struct shm_comm *s, const char *what)
{
    if (s->failed)
        return dt_fail(s->failed, "%s", s->error);
    if (atomic_load_explicit(&s->hdr->abort_state, memory_order_relaxed) != ABORT_NONE)
        return aborted(s, what);
    return 0;
}

enum { BLOCK = 512, TREE_DEPTH = 11 }; /* dt_sum_tree_depth(MAX_RANKS) */

/* One block of sum_ranks's tree: an entry is a source's block, read in place, until something
 * is added into it; then its partial sum in sum[]. */
struct rank_block {
    const float *entry[TREE_DEPTH];
    float sum[TREE_DEPTH][BLOCK];
    size_t m;
};

static void add_ranks(void *ctx, int into, int from)
{
    struct rank_block *rb = ctx;
    const float *a = rb->entry[into], *b = rb->entry[from];
    float *acc = rb->sum[into];
    for (size_t i = 0; i < rb->m; i++)
        acc[i] = a[i] + b[i];
    rb->entry[into] = acc;
}

/* dst = the sum of src[0..nsrc) (nsrc >= 2) in util/sum_tree.h's tree over ranks, ((0+1)+(2+3))
 * for 4, the tree nn/grad_tree.c's slices continue across processes; also stored to copy when
 * not NULL. Blocked so the partial sums stay in L1. dst may be one of the sources: with two or
 * more, the sum ends in rb.sum[0], and dst is written only after a block is summed. */
static void sum_ranks(float *dst, float *copy, float *const *src, int nsrc, size_t n)
{
    struct rank_block rb;
    struct dt_sum_tree tree;
    for (size_t b = 0; b < n; b += BLOCK) {
        rb.m = n - b < BLOCK ? n - b : BLOCK;
        dt_sum_tree_begin(&tree);
        for (int k = 0; k < nsrc; k++) {
            rb.entry[dt_sum_tree_next(&tree)] = src[k] + b;
            dt_sum_tree_push(&tree, add_ranks, &rb);
        }
        const float *sum = rb.entry[dt_sum_tree_finish(&tree, add_ranks, &rb)];
        memcpy(dst + b, sum, rb.m * sizeof *dst);
        if (copy)
            memcpy(copy + b, sum, rb.m * sizeof *copy);
    }
}

/* sum_ranks for the bf16 all-reduce: the leaves are the ranks' bf16 terms, src[k], except
 * this rank's own (src[k] NULL), which is still fp32 in `own` and is rounded here as packing
 * would have rounded it. The same tree, its additions in fp32; the sum rounded to bf16 into
 * dst (as fp32) and copy (bf16, when not NULL). dst may be `own`: a block is read before it is
 * written. */
static void sum_ranks_bf16(float *dst, dt_bf16 *copy, const dt_bf16 *const *src, const float *own,
                           int nsrc, size_t n)
{
    struct rank_block rb;
    struct dt_sum_tree tree;
    for (size_t b = 0; b < n; b += BLOCK) {
        rb.m = n - b < BLOCK ? n - b : BLOCK;
        dt_sum_tree_begin(&tree);
        for (int k = 0; k < nsrc; k++) {
            int e = dt_sum_tree_next(&tree);
            if (src[k])
                dt_bf16_to_f32_n(src[k] + b, rb.sum[e], rb.m);
            else
                dt_bf16_round_n(own + b, rb.sum[e], rb.m);
            rb.entry[e] = rb.sum[e];
            dt_sum_tree_push(&tree, add_ranks, &rb);
        }
        const float *sum = rb.entry[dt_sum_tree_finish(&tree, add_ranks, &rb)];
        dt_bf16_round_n(sum, dst + b, rb.m);
        if (copy)
            dt_bf16_from_f32_n(dst + b, copy + b, rb.m);
    }
}

/* A slot's element e, in the all-reduce's wire type. */
static void *slot_at(float *slot, size_t e, bool bf16)
{
    return bf16 ? (void *)((dt_bf16 *)slot + e) : (void *)(slot + e);
}

/* m terms from buf into a slot: copied, or rounded to bf16. */
static void put_terms(void *slot, const float *buf, size_t m, bool bf16)
{
    if (bf16)
        dt_bf16_from_f32_n(buf, slot, m);
    else
        memcpy(slot, buf, m * sizeof *buf);
}

/* m finished sums from a slot into buf. */
static void get_sums(float *buf, const void *slot, size_t m, bool bf16)
{
    if (bf16)
        dt_bf16_to_f32_n(slot, buf, m);
    else
        memcpy(buf, slot, m * sizeof *buf);
}

static int allreduce_small(struct shm_comm *s, float *buf, size_t n, bool bf16)
{
    put_terms(slot_in(s->seg, s->epoch, s->rank), buf, n, bf16);
    int rc =
        first_barrier(s, "all-reduce", call_desc(bf16 ? OP_ALLREDUCE_BF16 : OP_ALLREDUCE, 0, n));
    if (rc < 0)
        return rc;
    if (bf16) {
        const dt_bf16 *src[MAX_RANKS];
        for (int k = 0; k < s->size; k++)
            src[k] = k == s->rank ? NULL : (const dt_bf16 *)slot_in(s->seg, s->epoch - 1, k);
        sum_ranks_bf16(buf, NULL, src, buf, s->size, n);
        return 0;
    }
    float *src[MAX_RANKS];
    for (int k = 0; k < s->size; k++)
        src[k] = k == s->rank ? buf : slot_in(s->seg, s->epoch - 1, k);
    sum_ranks(buf, NULL, src, s->size, n);
    return 0;
}

/* Segment k of a chunk of len floats: [k * seglen, ...) clipped to len. */
static size_t seg_len(size_t len, size_t seglen, int k)
{
    size_t start = (size_t)k * seglen;
    return start >= len ? 0 : (len - start < seglen ? len - start : seglen);
}

/* Segments start on cache lines: `align` elements of the wire type. */
static size_t chunk_seglen(size_t len, int size, size_t align)
{
    return round_up((len + (size_t)size - 1) / (size_t)size, align);
}

/* bf16 packs twice the elements into a slot's bytes, so a chunk holds twice as many: the same
 * bytes and the same number of barriers per chunk, half the chunks for an array. */
static int allreduce_pipelined(struct shm_comm *s, float *buf, size_t n, bool bf16)
{
    struct dt_shm_segment *seg = s->seg;
    size_t widen = bf16 ? 2 : 1, chunk = seg->hdr->chunk * widen, align = SEG_ALIGN * widen;
    size_t nchunks = (n + chunk - 1) / chunk;
    int r = s->rank;
    float *src[MAX_RANKS];
    const dt_bf16 *src16[MAX_RANKS];
    for (size_t t = 0; t < nchunks + 2; t++) {
        if (t < nchunks) { /* copy-in chunk t: every segment but ours */
            size_t base = t * chunk, len = n - base < chunk ? n - base : chunk;
            size_t sl = chunk_seglen(len, s->size, align), own = (size_t)r * sl;
            float *in = slot_in(seg, s->epoch, r);
            put_terms(in, buf + base, own < len ? own : len, bf16);
            if (own + sl < len)
                put_terms(slot_at(in, own + sl, bf16), buf + base + own + sl, len - own - sl, bf16);
        }
        if (t >= 1 && t - 1 < nchunks) { /* reduce chunk t-1, segment r */
            size_t c = t - 1, base = c * chunk, len = n - base < chunk ? n - base : chunk;
            size_t sl = chunk_seglen(len, s->size, align), m = seg_len(len, sl, r);
            float *mine = buf + base + (size_t)r * sl;
            if (bf16) {
                for (int k = 0; k < s->size; k++)
                    src16[k] =
                        k == r ? NULL
                               : (const dt_bf16 *)slot_in(seg, s->epoch - 1, k) + (size_t)r * sl;
                sum_ranks_bf16(mine, (dt_bf16 *)slot_out(seg, s->epoch, r), src16, mine, s->size,
                               m);
            } else {
                for (int k = 0; k < s->size; k++)
                    src[k] = k == r ? mine : slot_in(seg, s->epoch - 1, k) + (size_t)r * sl;
                sum_ranks(mine, slot_out(seg, s->epoch, r), src, s->size, m);
            }
        }
        if (t >= 2) { /* gather chunk t-2 */
            size_t c = t - 2, base = c * chunk, len = n - base < chunk ? n - base : chunk;
            size_t sl = chunk_seglen(len, s->size, align);
            for (int k = 0; k < s->size; k++)
                if (k != r)
                    get_sums(buf + base + (size_t)k * sl, slot_out(seg, s->epoch - 1, k),
                             seg_len(len, sl, k), bf16);
        }
        if (t + 1 < nchunks + 2) {
            uint64_t desc = call_desc(bf16 ? OP_ALLREDUCE_BF16 : OP_ALLREDUCE, 0, n);
            int rc = t == 0 ? first_barrier(s, "all-reduce", desc) : barrier_wait(s, "all-reduce");
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

static int allreduce(struct dt_comm *c, float *buf, size_t n, bool bf16)
{
    struct shm_comm *s = c->impl;
    int rc = enter(s, "all-reduce");
    if (rc < 0 || s->size == 1 || n == 0)
        return rc;
    size_t bytes = n * (bf16 ? sizeof(dt_bf16) : sizeof(float));
    if (bytes <= SMALL_BYTES && n <= s->hdr->chunk * (bf16 ? 2 : 1))
        return allreduce_small(s, buf, n, bf16);
    return allreduce_pipelined(s, buf, n, bf16);
}

static int shm_allreduce_sum(struct dt_comm *c, float *buf, size_t n)
{
    return allreduce(c, buf, n, false);
}

static int shm_allreduce_sum_bf16(struct dt_comm *c, float *buf, size_t n)
{
    return allreduce(c, buf, n, true);
}

static int shm_broadcast(struct dt_comm *c, void *buf, size_t bytes, int root)
{
    struct shm_comm *s = c->impl;
    if (root < 0 || root >= s->size)
        return dt_fail(DT_EUSAGE, "shm broadcast: root %d out of range (size %d)", root, s->size);
    int rc = enter(s, "broadcast");
    if (rc < 0 || s->size == 1 || bytes == 0)
        return rc;
    size_t piece = s->hdr->chunk * (size_t)s->size * sizeof(float);
    size_t npieces = (bytes + piece - 1) / piece;
    uint8_t *p = buf;
    for (size_t t = 0; t <= npieces; t++) {
        if (s->rank == root && t < npieces) {
            size_t off = t * piece, len = bytes - off < piece ? bytes - off : piece;
            memcpy(slot_in(s->seg, s->epoch, 0), p + off, len);
        } else if (s->rank != root && t >= 1) {
            size_t off = (t - 1) * piece, len = bytes - off < piece ? bytes - off : piece;
            memcpy(p + off, slot_in(s->seg, s->epoch - 1, 0), len);
        }
        if (t == 0)
            rc = first_barrier(s, "broadcast", call_desc(OP_BROADCAST, root, bytes));
        else if (t < npieces)
            rc = barrier_wait(s, "broadcast");
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int shm_barrier(struct dt_comm *c)
{
    struct shm_comm *s = c->impl;
    int rc = enter(s, "barrier");
    if (rc < 0 || s->size == 1)
        return rc;
    return first_barrier(s, "barrier", call_desc(OP_BARRIER, 0, 0));
}

static void shm_close(struct dt_comm *c)
{
    if (!c)
        return;
    free(c->impl);
    free(c);
}

int dt_shm_comm_create(struct dt_comm **out, struct dt_shm_segment *seg, int rank)
{
    *out = NULL;
    if (!seg || atomic_load(&seg->state) != SEG_LIVE || !seg->hdr || seg->hdr->magic != MAGIC)
        return dt_fail(DT_EUSAGE, "shm: communicator over a destroyed segment");
    int size = (int)seg->hdr->size;
    if (rank < 0 || rank >= size)
        return dt_fail(DT_EUSAGE, "shm: rank %d out of range (size %d)", rank, size);
    struct dt_comm *c = calloc(1, sizeof *c);
    struct shm_comm *s = calloc(1, sizeof *s);
    if (!c || !s) {
        free(c);
        free(s);
        return dt_fail(DT_ERUNTIME, "shm: out of memory");
    }
    s->seg = seg;
    s->hdr = seg->hdr;
    s->rank = rank;
    s->size = size;
    /* A comm re-created over a used segment continues where this rank left off. */
    s->epoch = atomic_load(&seg->ranks[rank].arrivals);
    /* More ranks than cores: spinning would only steal the core of the rank we wait for. The
     * count is the parent's: a rank pinned to one core sees only that one. */
    s->spin = (uint32_t)size > seg->hdr->cpus ? 0 : SPIN_SECONDS;
    c->rank = c->local_rank = rank;
    c->size = c->local_size = size;
    c->backend = "shm";
    c->allreduce_sum = shm_allreduce_sum;
    c->allreduce_sum_bf16 = shm_allreduce_sum_bf16;
    c->broadcast = shm_broadcast;
    c->barrier = shm_barrier;
    c->close = shm_close;
    c->impl = s;
    *out = c;
    return 0;
}

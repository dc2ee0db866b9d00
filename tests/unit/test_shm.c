/* dist/shm: all-reduce, broadcast and barrier between forked ranks (1..8, oversubscribed on a
 * small machine), many chunks and odd lengths, repeated collectives, abort, timeout naming the
 * missing rank, and cleanup of the segment name.
 *
 * Each test creates a segment, forks its ranks and waits; a rank checks its own results and
 * reports through its exit status (cmocka asserts must not run in a child), printing what went
 * wrong on stderr. When a rank fails, the parent aborts the segment so the others never hang. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dist/shm.h"
#include "util/clock.h"
#include "util/err.h"
#include "tests/unit/rank_check.h"
#include "tests/unit/shm_ranks.h"

typedef void (*rank_body)(struct dt_comm *c, struct dt_shm_segment *seg, void *arg);

static char dev_shm_path[128];

static int name_exists(const struct dt_shm_segment *seg)
{
    snprintf(dev_shm_path, sizeof dev_shm_path, "/dev/shm%s", dt_shm_segment_name(seg));
    return access(dev_shm_path, F_OK) == 0;
}

/* Forks n ranks running body; returns how many failed. The segment is destroyed and its name
 * checked gone. abort_after > 0: the parent aborts the segment after that many seconds. */
static int run_job_ex(int n, size_t chunk, double timeout, rank_body body, void *arg,
                      double abort_after, const char *abort_reason)
{
    struct dt_shm_segment *seg;
    assert_int_equal(dt_shm_segment_create(&seg, n, chunk, timeout), 0);
    assert_false(name_exists(seg)); /* unlinked at creation: the mapping is all ranks need */
    pid_t pids[16];
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        assert_true(pids[r] >= 0);
        if (pids[r] == 0) {
            struct dt_comm *c;
            CHECK(dt_shm_comm_create(&c, seg, r) == 0, "comm_create");
            CHECK(c->rank == r && c->size == n && c->local_rank == r && c->local_size == n,
                  "ranks");
            CHECK(strcmp(c->backend, "shm") == 0, "backend");
            body(c, seg, arg);
            c->close(c);
            dt_shm_segment_destroy(seg); /* in a child: unmaps only */
            _exit(0);
        }
    }
    if (abort_after > 0) {
        dt_sleep(abort_after);
        dt_shm_segment_abort(seg, abort_reason);
    }
    int failed = shm_ranks_wait(pids, n, seg);
    assert_false(name_exists(seg)); /* never there after creation, whoever exits how */
    dt_shm_segment_destroy(seg);
    assert_false(access(dev_shm_path, F_OK) == 0);
    return failed;
}

static int run_job(int n, size_t chunk, rank_body body, void *arg)
{
    return run_job_ex(n, chunk, 30, body, arg, 0, NULL);
}

static uint32_t mix(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352d;
    x ^= x >> 15;
    x *= 0x846ca68b;
    return x ^ (x >> 16);
}

static const size_t lengths[] = {0, 1, 2, 3, 5, 13, 31, 127, 1021, 4099, 65537, 1000003};

/* Integer-valued inputs: the sum is exact, so it is checked exactly. Then random fractions:
 * the sum depends on the order of additions, so the ranks compare their bits with rank 0's. */
static void allreduce_body(struct dt_comm *c, struct dt_shm_segment *seg, void *arg)
{
    (void)seg;
    (void)arg;
    size_t max = 1000003;
    float *buf = malloc(max * sizeof *buf), *ref = malloc(max * sizeof *ref);
    CHECK(buf && ref, "malloc");
    int n = c->size;
    for (size_t li = 0; li < sizeof lengths / sizeof *lengths; li++) {
        size_t len = lengths[li];
        for (size_t i = 0; i < len; i++)
            buf[i] = (float)((c->rank + 1) * (int)(i % 97 + 1));
        CHECK(c->allreduce_sum(c, buf, len) == 0, "allreduce len %zu", len);
        for (size_t i = 0; i < len; i++)
            CHECK(buf[i] == (float)(n * (n + 1) / 2 * (int)(i % 97 + 1)), "len %zu: buf[%zu] = %g",
                  len, i, buf[i]);
        for (size_t i = 0; i < len; i++)
            buf[i] = (float)(mix((uint32_t)(i * 8 + (size_t)c->rank)) >> 8) / 16777216.0f - 0.5f;
        CHECK(c->allreduce_sum(c, buf, len) == 0, "allreduce len %zu", len);
        memcpy(ref, buf, len * sizeof *buf);
        CHECK(c->broadcast(c, ref, len * sizeof *ref, 0) == 0, "broadcast");
        CHECK(memcmp(ref, buf, len * sizeof *buf) == 0, "len %zu: not bit-identical to rank 0",
              len);
    }
    free(buf);
    free(ref);
}

static void test_allreduce_1_to_8_ranks(void **state)
{
    (void)state;
    for (int n = 1; n <= 8; n++)
        assert_int_equal(run_job(n, 0, allreduce_body, NULL), 0);
}

/* Small chunks: many pipeline steps, a short last chunk, segments of unequal length. */
static void test_allreduce_small_chunks(void **state)
{
    (void)state;
    assert_int_equal(run_job(2, 4096, allreduce_body, NULL), 0);
    assert_int_equal(run_job(3, 1000, allreduce_body, NULL), 0);
    assert_int_equal(run_job(5, 64 << 10, allreduce_body, NULL), 0);
}

/* The sum's shape is a binary tree over ranks, ((0+1)+(2+3)) for 4, the one nn/grad_tree.h
 * continues across processes. Rank 0 holds 2^24 and the others 1: in rank order every 1 is
 * lost to rounding (2^24 + 1 rounds to 2^24), in the tree pairs of 1s survive. */
static float tree_of_ones(int n)
{
    float t[8];
    for (int r = 0; r < n; r++)
        t[r] = r == 0 ? 16777216.0f : 1.0f;
    for (int width = 1; width < n; width *= 2)
        for (int i = 0; i + width < n; i += 2 * width)
            t[i] += t[i + width];
    return t[0];
}

static void tree_order_body(struct dt_comm *c, struct dt_shm_segment *seg, void *arg)
{
    (void)seg;
    (void)arg;
    size_t sizes[] = {5, 1000003}; /* the small path and the pipelined one */
    float *buf = malloc(sizes[1] * sizeof *buf), want = tree_of_ones(c->size);
    CHECK(buf, "malloc");
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < sizes[k]; i++)
            buf[i] = c->rank == 0 ? 16777216.0f : 1.0f;
        CHECK(c->allreduce_sum(c, buf, sizes[k]) == 0, "allreduce");
        for (size_t i = 0; i < sizes[k]; i++)
            CHECK(buf[i] == want, "%d ranks, len %zu: buf[%zu] = %.1f, the tree gives %.1f",
                  c->size, sizes[k], i, buf[i], want);
    }
    free(buf);
}

static void test_allreduce_tree_order(void **state)
{
    (void)state;
    assert_true(tree_of_ones(4) == 16777218.0f); /* rank order would give 16777216 */
    for (int n = 3; n <= 8; n++)
        assert_int_equal(run_job(n, 0, tree_order_body, NULL), 0);
}

static void broadcast_body(struct dt_comm *c, struct dt_shm_segment *seg, void *arg)
{
    (void)seg;
    (void)arg;
    static const size_t sizes[] = {0, 1, 3, 4097, 1000003};
    size_t max = 1000003;
    uint8_t *buf = malloc(max);
    CHECK(buf, "malloc");
    for (int root = 0; root < c->size; root++)
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
            size_t len = sizes[si];
            for (size_t i = 0; i < len; i++)
                buf[i] = (uint8_t)(c->rank == root ? mix((uint32_t)(i + (size_t)root)) : 0xAA);
            CHECK(c->broadcast(c, buf, len, root) == 0, "broadcast root %d len %zu", root, len);
            for (size_t i = 0; i < len; i++)
                CHECK(buf[i] == (uint8_t)mix((uint32_t)(i + (size_t)root)),
                      "root %d len %zu byte %zu", root, len, i);
        }
    CHECK(c->broadcast(c, buf, 1, c->size) == -DT_EUSAGE, "root out of range");
    CHECK(c->broadcast(c, buf, 1, -1) == -DT_EUSAGE, "negative root");
    free(buf);
}

static void test_broadcast_every_root(void **state)
{
    (void)state;
    for (int n = 1; n <= 8; n++)
        assert_int_equal(run_job(n, n == 3 ? 4096 : 0, broadcast_body, NULL), 0);
}

/* Each rank stamps the round into a shared page before the barrier; after it, every stamp
 * must show the round. Rank r dawdles differently each round so arrival orders vary. */
static void barrier_body(struct dt_comm *c, struct dt_shm_segment *seg, void *arg)
{
    (void)seg;
    volatile int *stamps = arg;
    for (int round = 1; round <= 50; round++) {
        if ((round + c->rank) % 7 == 0)
            dt_sleep(0.0005);
        stamps[c->rank] = round;
        CHECK(c->barrier(c) == 0, "barrier round %d", round);
        for (int k = 0; k < c->size; k++)
            CHECK(stamps[k] >= round, "round %d: rank %d stamped %d", round, k, stamps[k]);
        CHECK(c->barrier(c) == 0, "second barrier round %d", round);
    }
}

static void test_barrier(void **state)
{
    (void)state;
    int *stamps = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(stamps != MAP_FAILED);
    for (int n = 1; n <= 8; n++) {
        memset(stamps, 0, 4096);
        assert_int_equal(run_job(n, 0, barrier_body, stamps), 0);
    }
    munmap(stamps, 4096);
}

/* 1000 rounds of the three collectives, small so the loop stays fast. */
static void repeat_body(struct dt_comm *c, struct dt_shm_segment *seg, void *arg)
{
    (void)seg;
    (void)arg;
    int n = c->size;
    float buf[37];
    for (int it = 0; it < 1000; it++) {
        size_t len = (size_t)(it % 37) + 1;
        for (size_t i = 0; i < len; i++)
            buf[i] = (float)(c->rank + it + (int)i);
        CHECK(c->allreduce_sum(c, buf, len) == 0, "allreduce it %d", it);
        for (size_t i = 0; i < len; i++)
            CHECK(buf[i] == (float)(n * (n - 1) / 2 + n * (it + (int)i)), "it %d [%zu]", it, i);
        int v = c->rank == it % n ? it : -1;
        CHECK(c->broadcast(c, &v, sizeof v, it % n) == 0, "broadcast it %d", it);
        CHECK(v == it, "broadcast it %d got %d", it, v);
        if (it % 3 == 0)
            CHECK(c->barrier(c) == 0, "barrier it %d", it);
    }
}

static void test_repeat_1000(void **state)
{
    (void)state;
    assert_int_equal(run_job(2, 0, repeat_body, NULL), 0);
    assert_int_equal(run_job(4, 0, repeat_body, NULL), 0);
}

/* A rank re-creating its comm over the same segment continues in step with the others. */
static void recreate_body(struct dt_comm *c, struct dt_shm_segment *seg, void *arg)
{
    (void)arg;
    int rank = c->rank;
    float x = 1.0f;
    CHECK(c->allreduce_sum(c, &x, 1) == 0 && x == (float)c->size, "first");
    if (rank == 0) {
        struct dt_comm *again;
        CHECK(dt_shm_comm_create(&again, seg, rank) == 0, "re-create");
        x = 2.0f;
        CHECK(again->allreduce_sum(again, &x, 1) == 0, "re-created comm");
        again->close(again);
    } else {
        x = 2.0f;
        CHECK(c->allreduce_sum(c, &x, 1) == 0, "second");
    }
    CHECK(x == 2.0f * (float)c->size, "sum %g", x);
}

static void test_recreate_comm(void **state)
{
    (void)state;
    assert_int_equal(run_job(3, 0, recreate_body, NULL), 0);
}

/* Rank 0 waits in a barrier that rank 1 never joins; the parent aborts. */
static void abort_body(struct dt_comm *c, struct dt_shm_segment *seg, void *arg)
{
    (void)seg;
    (void)arg;
    if (c->rank == 1)
        return;
    double t0 = dt_now();
    static float big[70000]; /* rank 2 waits in a pipelined all-reduce, rank 0 in a barrier */
    int rc = c->rank == 0 ? c->barrier(c) : c->allreduce_sum(c, big, 70000);
    CHECK(rc == -DT_ERUNTIME, "rc %d", rc);
    CHECK(strstr(dt_last_error(), "aborted") && strstr(dt_last_error(), "rank 1 died"), "message");
    CHECK(dt_now() - t0 < 10, "abort took %g s", dt_now() - t0);
    float x = 1.0f;
    CHECK(c->allreduce_sum(c, &x, 1) == -DT_ERUNTIME, "later calls fail too");
    CHECK(strstr(dt_last_error(), "rank 1 died"), "later message");
}

static void test_abort_wakes_waiters(void **state)
{
    (void)state;
    assert_int_equal(run_job_ex(3, 0, 60, abort_body, NULL, 0.3, "rank 1 died (signal 9)"), 0);
}

/* Entering a collective after the abort fails at once. */
static void abort_early_body(struct dt_comm *c, struct dt_shm_segment *seg, void *arg)
{
    (void)arg;
    if (c->rank == 0)
        dt_shm_segment_abort(seg, "first");
    dt_shm_segment_abort(seg, "second");
    CHECK(c->broadcast(c, &arg, sizeof arg, 0) == -DT_ERUNTIME, "broadcast after abort");
    CHECK(strstr(dt_last_error(), "first") || strstr(dt_last_error(), "second"), "reason");
}

static void test_abort_before_entering(void **state)
{
    (void)state;
    assert_int_equal(run_job(2, 0, abort_early_body, NULL), 0);
}

/* Rank 2 never arrives: the others time out naming it. */
static void timeout_body(struct dt_comm *c, struct dt_shm_segment *seg, void *arg)
{
    (void)seg;
    (void)arg;
    if (c->rank == 2)
        return;
    float x[3] = {1, 2, 3};
    int rc = c->rank == 0 ? c->allreduce_sum(c, x, 3) : c->barrier(c);
    CHECK(rc == -DT_ERUNTIME, "rc %d", rc);
    CHECK(strstr(dt_last_error(), "rank 2 never arrived"), "message");
}

static void test_timeout_names_missing_rank(void **state)
{
    (void)state;
    assert_int_equal(run_job_ex(3, 0, 0.3, timeout_body, NULL, 0, NULL), 0);
}

/* Ranks that call different collectives are told so (by comparing with rank 0's call). */
static void mismatch_body(struct dt_comm *c, struct dt_shm_segment *seg, void *arg)
{
    (void)seg;
    (void)arg;
    float x[20] = {0};
    if (c->rank == 0) {
        CHECK(c->allreduce_sum(c, x, 10) == 0, "rank 0 sees nothing wrong");
        return;
    }
    CHECK(c->allreduce_sum(c, x, 20) == -DT_ERUNTIME, "length mismatch");
    CHECK(strstr(dt_last_error(), "rank 1 called all-reduce of 20 floats while rank 0 called "
                                  "all-reduce of 10 floats"),
          "message");
}

static void mismatch_op_body(struct dt_comm *c, struct dt_shm_segment *seg, void *arg)
{
    (void)seg;
    (void)arg;
    int v = 0;
    if (c->rank == 0) {
        CHECK(c->barrier(c) == 0, "rank 0 barrier");
        return;
    }
    CHECK(c->broadcast(c, &v, sizeof v, 0) == -DT_ERUNTIME, "op mismatch");
    CHECK(strstr(dt_last_error(), "called broadcast of 4 bytes from rank 0 while rank 0 called "
                                  "barrier"),
          "message");
}

static void test_mismatched_collectives(void **state)
{
    (void)state;
    assert_int_equal(run_job(2, 0, mismatch_body, NULL), 0);
    assert_int_equal(run_job(2, 0, mismatch_op_body, NULL), 0);
}

static void test_segment_lifecycle(void **state)
{
    (void)state;
    struct dt_shm_segment *seg;
    assert_int_equal(dt_shm_segment_create(&seg, 0, 0, 0), -DT_EUSAGE);
    assert_int_equal(dt_shm_segment_create(&seg, 1025, 0, 0), -DT_EUSAGE);
    assert_int_equal(dt_shm_segment_create(&seg, 2, 0, 0), 0);
    const char *name = dt_shm_segment_name(seg);
    assert_int_equal(strncmp(name, "/dtrain-", 8), 0);
    assert_false(name_exists(seg));
    struct dt_comm *c;
    assert_int_equal(dt_shm_comm_create(&c, seg, 2), -DT_EUSAGE);
    assert_int_equal(dt_shm_comm_create(&c, seg, -1), -DT_EUSAGE);
    dt_shm_segment_abort(seg, NULL);
    dt_shm_segment_destroy(seg);
    assert_false(access(dev_shm_path, F_OK) == 0);
    dt_shm_segment_destroy(seg); /* idempotent */
    dt_shm_segment_destroy(NULL);
    dt_shm_segment_abort(seg, "after destroy: ignored");
    assert_int_equal(dt_shm_comm_create(&c, seg, 0), -DT_EUSAGE);
    /* Two live segments get different names. */
    struct dt_shm_segment *a, *b;
    assert_int_equal(dt_shm_segment_create(&a, 1, 0, 0), 0);
    assert_int_equal(dt_shm_segment_create(&b, 1, 0, 0), 0);
    assert_string_not_equal(dt_shm_segment_name(a), dt_shm_segment_name(b));
    dt_shm_segment_destroy(a);
    dt_shm_segment_destroy(b);
}

/* A creator that exits without destroying still leaves nothing behind (the atexit handler). */
static void test_exit_unlinks_forgotten_segment(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct dt_shm_segment *seg;
        char name[64] = "";
        if (dt_shm_segment_create(&seg, 2, 0, 0) == 0)
            snprintf(name, sizeof name, "%s", dt_shm_segment_name(seg));
        if (write(fds[1], name, sizeof name) != (ssize_t)sizeof name)
            _exit(2);
        exit(name[0] ? 0 : 1);
    }
    close(fds[1]);
    char name[64];
    assert_int_equal(read(fds[0], name, sizeof name), (ssize_t)sizeof name);
    close(fds[0]);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    snprintf(dev_shm_path, sizeof dev_shm_path, "/dev/shm%s", name);
    assert_false(access(dev_shm_path, F_OK) == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_segment_lifecycle),
        cmocka_unit_test(test_allreduce_1_to_8_ranks),
        cmocka_unit_test(test_allreduce_small_chunks),
        cmocka_unit_test(test_allreduce_tree_order),
        cmocka_unit_test(test_broadcast_every_root),
        cmocka_unit_test(test_barrier),
        cmocka_unit_test(test_repeat_1000),
        cmocka_unit_test(test_recreate_comm),
        cmocka_unit_test(test_abort_wakes_waiters),
        cmocka_unit_test(test_abort_before_entering),
        cmocka_unit_test(test_timeout_names_missing_rank),
        cmocka_unit_test(test_exit_unlinks_forgotten_segment),
        cmocka_unit_test(test_mismatched_collectives),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

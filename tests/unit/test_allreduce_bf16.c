/* The bf16 all-reduce (dist.grad_dtype = "bf16"): the loops of dist/bf16_sum.h against scalar
 * arithmetic, and the shm and tcp communicators between forked ranks against an fp32 reference
 * computed here in the order each one defines:
 *   shm        the bf16-rounded terms summed in fp32 in util/sum_tree.h's tree over ranks, the
 *              sum rounded to bf16 (small and chunked paths alike);
 *   tcp small  the rounded terms summed in rank order 0..size-1, the sum rounded;
 *   tcp ring   segment j of a round starts at rank j and travels the ring: each hop adds the
 *              next rank's rounded terms in fp32 and rounds the partial sum before it goes on.
 * Every rank must hold exactly the reference, bit for bit. A rank checks its own results and
 * reports through its exit status (cmocka asserts must not run in a child). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dist/bf16_sum.h"
#include "dist/shm.h"
#include "dist/tcp.h"
#include "util/bf16.h"
#include "util/err.h"
#include "util/sum_tree.h"
#include "util/vec_isa.h"
#include "tests/unit/rank_check.h"
#include "tests/unit/shm_ranks.h"

#define MAX_TEST_RANKS 7

/* Rank r's term i: a full fp32 mantissa (so rounding to bf16 matters), both signs, magnitudes
 * over several binades, and now and then a value exactly halfway between two bf16 (a tie). */
static float term(int rank, size_t i)
{
    uint32_t x = (uint32_t)(i * 2654435761u) ^ (uint32_t)(rank + 1) * 0x9e3779b9u;
    x ^= x >> 15, x *= 0x2c1b3c6du, x ^= x >> 12;
    float mag = ldexpf((float)(x & 0xffffff) / (float)(1 << 24) + 0.5f, (int)(x >> 28) - 8);
    if ((x >> 24 & 15) == 3) { /* a tie: bf16 mantissa bits, then exactly half an ulp */
        uint32_t u;
        memcpy(&u, &mag, sizeof u);
        u = (u & 0xffff0000u) | 0x8000u;
        memcpy(&mag, &u, sizeof u);
    }
    return (x >> 27 & 1) ? -mag : mag;
}

/* ---- the loops ---------------------------------------------------------------------------- */

static void test_loops_match_scalar_arithmetic(void **state)
{
    (void)state;
    enum { N = 1003 };
    static float acc[N], own[N], src32[N];
    static dt_bf16 src[N], inout[N], in[N];
    for (size_t i = 0; i < N; i++) {
        src32[i] = term(0, i);
        src[i] = dt_bf16_from_f32(term(1, i));
        in[i] = dt_bf16_from_f32(term(2, i));
        inout[i] = dt_bf16_from_f32(term(3, i));
        own[i] = acc[i] = term(4, i);
    }
    dt_bf16_add_n(acc, src, N);
    for (size_t i = 0; i < N; i++)
        assert_true(acc[i] == term(4, i) + dt_bf16_to_f32(src[i]));
    dt_bf16_add_own_n(own, src, N);
    for (size_t i = 0; i < N; i++)
        assert_true(own[i] == dt_bf16_round(term(4, i)) + dt_bf16_to_f32(src[i]));
    dt_bf16_sum_packed_n(inout, in, N);
    for (size_t i = 0; i < N; i++) {
        float want = dt_bf16_to_f32(dt_bf16_from_f32(term(3, i))) + dt_bf16_to_f32(in[i]);
        assert_int_equal(inout[i], dt_bf16_from_f32(want));
    }
    dt_bf16_round_n(src32, src32, N);
    for (size_t i = 0; i < N; i++)
        assert_true(src32[i] == dt_bf16_round(term(0, i)));
}

static void test_round_to_nearest_even(void **state)
{
    (void)state;
    /* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: even (1) wins; 1 + 3 * 2^-8 goes up. */
    assert_true(dt_bf16_round(1.0f + 0x1p-8f) == 1.0f);
    assert_true(dt_bf16_round(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);
    assert_true(dt_bf16_round(1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f);
    assert_true(dt_bf16_round(-1.0f - 0x1p-8f) == -1.0f);
    assert_true(isinf(dt_bf16_round(INFINITY)));
    assert_true(isnan(dt_bf16_round(NAN)));
}

/* ---- references ---------------------------------------------------------------------------- */

struct scalar_tree {
    float v[16];
};

static void add_scalars(void *ctx, int into, int from)
{
    struct scalar_tree *t = ctx;
    t->v[into] = t->v[into] + t->v[from];
}

/* shm: the rounded terms in the tree over ranks, the sum rounded. */
static float shm_reference(int size, size_t i)
{
    struct scalar_tree t;
    struct dt_sum_tree tree;
    dt_sum_tree_begin(&tree);
    for (int k = 0; k < size; k++) {
        t.v[dt_sum_tree_next(&tree)] = dt_bf16_round(term(k, i));
        dt_sum_tree_push(&tree, add_scalars, &t);
    }
    return dt_bf16_round(t.v[dt_sum_tree_finish(&tree, add_scalars, &t)]);
}

/* tcp's small path: rank order, the sum rounded. */
static float tcp_small_reference(int size, size_t i)
{
    float sum = dt_bf16_round(term(0, i));
    for (int k = 1; k < size; k++)
        sum += dt_bf16_round(term(k, i));
    return dt_bf16_round(sum);
}

/* tcp's ring: element i lies in round `off` (rounds of `round` elements) and, inside it, in
 * segment j (dist/tcp.c's seg_off split); its sum starts at rank j and gains ranks j+1, j+2, ...
 * one hop each, rounded before every hop and at the end. */
static size_t seg_off(size_t n, int size, int i)
{
    size_t base = n / (size_t)size, rem = n % (size_t)size;
    return (size_t)i * base + ((size_t)i < rem ? (size_t)i : rem);
}

static float tcp_ring_reference(int size, size_t n, size_t round, size_t i)
{
    size_t off = i / round * round, len = n - off < round ? n - off : round, at = i - off;
    int j = 0;
    while (seg_off(len, size, j + 1) <= at)
        j++;
    float partial = dt_bf16_round(term(j, i));
    for (int h = 1; h < size; h++)
        partial = dt_bf16_round(dt_bf16_round(term((j + h) % size, i)) + partial);
    return partial;
}

enum reference { REF_SHM, REF_TCP_SMALL, REF_TCP_RING };

struct case_ {
    enum reference ref;
    size_t n, round;
    bool mixed_levels; /* each rank runs another vector build of the loops (util/vec_isa.h) */
};

static float reference(const struct case_ *k, int size, size_t i)
{
    switch (k->ref) {
    case REF_SHM:
        return shm_reference(size, i);
    case REF_TCP_SMALL:
        return tcp_small_reference(size, i);
    default:
        return tcp_ring_reference(size, k->n, k->round, i);
    }
}

/* A rank: its terms, the bf16 all-reduce twice (the second must give the same bits), every
 * element against the reference; then an fp32 all-reduce, unaffected. */
static void check_rank(struct dt_comm *c, const struct case_ *k)
{
    if (k->mixed_levels) {
        /* rank r takes the r-th level this CPU has, counting from the widest, round robin */
        enum dt_vec_isa have[DT_VEC_ISA_COUNT];
        int nhave = 0;
        for (int i = DT_VEC_ISA_COUNT - 1; i >= 0; i--)
            if (dt_vec_isa_available((enum dt_vec_isa)i))
                have[nhave++] = (enum dt_vec_isa)i;
        dt_vec_isa_force(have[c->rank % nhave]);
    }
    float *buf = malloc(k->n * sizeof *buf), *again = malloc(k->n * sizeof *again);
    CHECK(buf && again, "out of memory");
    for (int pass = 0; pass < 2; pass++) {
        float *b = pass ? again : buf;
        for (size_t i = 0; i < k->n; i++)
            b[i] = term(c->rank, i);
        CHECK(c->allreduce_sum_bf16(c, b, k->n) == 0, "rank %d: bf16 all-reduce", c->rank);
    }
    CHECK(memcmp(buf, again, k->n * sizeof *buf) == 0, "rank %d: two runs differ", c->rank);
    for (size_t i = 0; i < k->n; i++) {
        float want = reference(k, c->size, i);
        CHECK(memcmp(&buf[i], &want, sizeof want) == 0,
              "rank %d of %d, n %zu: element %zu is %a, reference %a", c->rank, c->size, k->n, i,
              (double)buf[i], (double)want);
    }
    for (size_t i = 0; i < k->n; i++)
        buf[i] = (float)(c->rank + 1);
    CHECK(c->allreduce_sum(c, buf, k->n) == 0, "fp32 all-reduce");
    for (size_t i = 0; i < k->n; i++)
        CHECK(buf[i] == (float)(c->size * (c->size + 1) / 2), "fp32 after bf16: element %zu", i);
    free(buf);
    free(again);
}

/* ---- shm ------------------------------------------------------------------------------------ */

static int shm_job(int size, size_t chunk_bytes, const struct case_ *k)
{
    struct dt_shm_segment *seg;
    assert_int_equal(dt_shm_segment_create(&seg, size, chunk_bytes, 30), 0);
    pid_t pids[MAX_TEST_RANKS];
    for (int r = 0; r < size; r++) {
        pids[r] = fork();
        assert_true(pids[r] >= 0);
        if (pids[r] == 0) {
            struct dt_comm *c;
            CHECK(dt_shm_comm_create(&c, seg, r) == 0, "comm_create");
            check_rank(c, k);
            c->close(c);
            _exit(0);
        }
    }
    int failed = shm_ranks_wait(pids, size, seg);
    dt_shm_segment_destroy(seg);
    return failed;
}

static void test_shm_matches_tree_reference(void **state)
{
    (void)state;
    /* small (one barrier), a single chunk, and many chunks of a 4 KiB segment */
    static const size_t lengths[] = {1, 7, 1000, 5000, 70001};
    for (int size = 2; size <= 4; size++)
        for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
            struct case_ k = {REF_SHM, lengths[l], 0, false};
            assert_int_equal(shm_job(size, lengths[l] > 1000 ? 4096 : 0, &k), 0);
        }
}

/* A rank that sends bf16 while rank 0 sends fp32 fails loudly, not with mixed-up sums. */
static void test_shm_mismatched_dtype(void **state)
{
    (void)state;
    struct dt_shm_segment *seg;
    assert_int_equal(dt_shm_segment_create(&seg, 2, 0, 5), 0);
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            struct dt_comm *c;
            CHECK(dt_shm_comm_create(&c, seg, r) == 0, "comm_create");
            float buf[64] = {0};
            int rc = r == 0 ? c->allreduce_sum(c, buf, 64) : c->allreduce_sum_bf16(c, buf, 64);
            if (r == 1) {
                CHECK(rc < 0, "rank 1: a mismatched call succeeded");
                CHECK(strstr(dt_last_error(), "mismatched collectives") &&
                          strstr(dt_last_error(), "bf16 all-reduce of 64 floats"),
                      "rank 1: message");
                dt_shm_segment_abort(seg, "test: mismatch seen");
            }
            c->close(c);
            _exit(0);
        }
    }
    assert_int_equal(shm_ranks_wait(pids, 2, seg), 0);
    dt_shm_segment_destroy(seg);
}

/* ---- tcp ------------------------------------------------------------------------------------ */

static const char token[] = "test-token-bf16-allreduce";

static int tcp_job(int size, const struct case_ *k)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 16), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    pid_t pids[MAX_TEST_RANKS];
    for (int r = 0; r < size; r++) {
        pids[r] = fork();
        assert_true(pids[r] >= 0);
        if (pids[r] == 0) {
            alarm(60); /* a hung ring fails the test instead of hanging it */
            struct dt_tcp_opts o;
            dt_tcp_opts_init(&o);
            o.rank = o.local_rank = r, o.size = o.local_size = size;
            o.master_host = "127.0.0.1", o.master_port = ntohs(a.sin_port);
            o.master_fd = r == 0 ? fd : -1;
            o.token = (const uint8_t *)token, o.token_len = strlen(token);
            o.timeout = o.rendezvous_timeout = 20;
            if (r != 0)
                close(fd);
            struct dt_comm *c;
            CHECK(dt_tcp_comm_create(&c, &o) == 0, "rank %d: join", r);
            check_rank(c, k);
            c->close(c);
            _exit(0);
        }
    }
    close(fd);
    int failed = 0, st;
    for (int r = 0; r < size; r++)
        if (waitpid(pids[r], &st, 0) != pids[r] || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            failed++;
    return failed;
}

/* dist/tcp.c's limits for bf16: the small path twice fp32's elements (the same bytes per
 * link), rounds of 512 KiB per step (so size x 256 Ki elements). */
static size_t small_max(int size)
{
    return 2 * dt_tcp_small_max(size);
}

static void test_tcp_small_path_rank_order(void **state)
{
    (void)state;
    /* 7 ranks: a per-link limit that is not a multiple of 4 bytes fills the gather area to its
     * last byte */
    static const int sizes[] = {2, 3, 7};
    for (int z = 0; z < 3; z++) {
        struct case_ k = {REF_TCP_SMALL, small_max(sizes[z]), 0, false};
        assert_int_equal(tcp_job(sizes[z], &k), 0);
        k.n = 5;
        assert_int_equal(tcp_job(sizes[z], &k), 0);
    }
}

static void test_tcp_ring_rounds_each_hop(void **state)
{
    (void)state;
    for (int size = 2; size <= 3; size++) {
        size_t round = (size_t)size * (256u << 10);
        struct case_ k = {REF_TCP_RING, small_max(size) + 1, round, false};
        assert_int_equal(tcp_job(size, &k), 0);
        k.n = round + 12345; /* two rounds, the second short */
        assert_int_equal(tcp_job(size, &k), 0);
    }
}

/* Ranks whose CPUs differ (one with AVX-512, one with AVX2 only, one baseline) sum alike: each
 * rank here runs another vector build of the loops, and every rank still holds the reference's
 * bits, on shm's small and chunked paths and tcp's small path and ring. */
static void test_ranks_on_different_vector_levels_agree(void **state)
{
    (void)state;
    int levels = 0;
    for (int i = 0; i < DT_VEC_ISA_COUNT; i++)
        levels += dt_vec_isa_available((enum dt_vec_isa)i);
    if (levels < 2) {
        print_message("skip mixed vector levels: this CPU runs only the generic loops\n");
        skip();
    }
    static const size_t shm_lengths[] = {7, 70001};
    for (size_t l = 0; l < 2; l++) {
        struct case_ k = {REF_SHM, shm_lengths[l], 0, true};
        assert_int_equal(shm_job(3, shm_lengths[l] > 1000 ? 4096 : 0, &k), 0);
    }
    struct case_ small = {REF_TCP_SMALL, 1001, 0, true};
    assert_int_equal(tcp_job(3, &small), 0);
    size_t round = 3 * (256u << 10);
    struct case_ ring = {REF_TCP_RING, round + 12345, round, true};
    assert_int_equal(tcp_job(3, &ring), 0);
}

/* Two ranks: shm and tcp define the same sum (one addition, rounded), so the bits agree. */
static void test_two_ranks_shm_and_tcp_agree(void **state)
{
    (void)state;
    for (size_t i = 0; i < 100000; i++) {
        float shm = shm_reference(2, i), small = tcp_small_reference(2, i);
        float ring = tcp_ring_reference(2, 100000, 1 << 20, i);
        assert_true(memcmp(&shm, &small, sizeof shm) == 0);
        assert_true(memcmp(&shm, &ring, sizeof shm) == 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loops_match_scalar_arithmetic),
        cmocka_unit_test(test_round_to_nearest_even),
        cmocka_unit_test(test_shm_matches_tree_reference),
        cmocka_unit_test(test_shm_mismatched_dtype),
        cmocka_unit_test(test_tcp_small_path_rank_order),
        cmocka_unit_test(test_tcp_ring_rounds_each_hop),
        cmocka_unit_test(test_ranks_on_different_vector_levels_agree),
        cmocka_unit_test(test_two_ranks_shm_and_tcp_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* util/sum_tree: the one summation tree of dist.split_invariant.
 *  - its shape, written out as expressions: neighbours in pairs, then pairs of pairs, and for a
 *    count that is not a power of two the recursive "largest power of two below, plus the
 *    rest", (0..3) + ((4+5) + 6) for 7; and the entries it needs (1 + log2(n));
 *  - its two users give the same bits for 2 to 8 leaves, 3, 5, 6 and 7 included: nn/grad_tree
 *    over n slices of a batch and dist/shm's all-reduce (its small and its pipelined path) over
 *    n ranks holding those slices. The data tells the tree from the other orders a second
 *    implementation might use (left to right over the subtrees, or one chain), so a user that
 *    stops driving this code fails here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dist/shm.h"
#include "nn/grad_tree.h"
#include "tests/unit/rank_check.h"
#include "tests/unit/shm_ranks.h"
#include "util/sum_tree.h"

/* ---- the shape ------------------------------------------------------------------------------ */

enum { MAX_LEAVES = 300, EXPR = 4096 };

/* A user whose entries are expressions: the shape the tree adds in, as text. */
struct exprs {
    char e[16][EXPR];
};

static void add_exprs(void *ctx, int into, int from)
{
    struct exprs *x = ctx;
    assert_int_equal(from, into + 1);
    char sum[EXPR];
    snprintf(sum, sizeof sum, "(%s+%s)", x->e[into], x->e[from]);
    strcpy(x->e[into], sum);
}

static const char *tree_expr(struct exprs *x, int n)
{
    struct dt_sum_tree t;
    dt_sum_tree_begin(&t);
    for (int k = 0; k < n; k++) {
        int d = dt_sum_tree_next(&t);
        assert_true(d < 16);
        snprintf(x->e[d], EXPR, "%d", k);
        dt_sum_tree_push(&t, add_exprs, x);
    }
    int top = dt_sum_tree_finish(&t, add_exprs, x);
    assert_int_equal(top, n ? 0 : -1);
    return n ? x->e[0] : "";
}

/* The definition: sum(lo, n) = sum(lo, p) + sum(lo + p, n - p), p the largest power of two
 * below n. */
static void spec_expr(char *out, size_t cap, int lo, int n)
{
    if (n == 1) {
        snprintf(out, cap, "%d", lo);
        return;
    }
    int p = 1;
    while (2 * p < n)
        p *= 2;
    char *a = malloc(EXPR), *b = malloc(EXPR);
    assert_non_null(a);
    assert_non_null(b);
    spec_expr(a, EXPR, lo, p);
    spec_expr(b, EXPR, lo + p, n - p);
    snprintf(out, cap, "(%s+%s)", a, b);
    free(a);
    free(b);
}

static void test_shape(void **state)
{
    (void)state;
    static struct exprs x;
    assert_string_equal(tree_expr(&x, 0), "");
    assert_string_equal(tree_expr(&x, 1), "0");
    assert_string_equal(tree_expr(&x, 3), "((0+1)+2)");
    assert_string_equal(tree_expr(&x, 4), "((0+1)+(2+3))");
    assert_string_equal(tree_expr(&x, 5), "(((0+1)+(2+3))+4)");
    assert_string_equal(tree_expr(&x, 7), "(((0+1)+(2+3))+((4+5)+6))");
    assert_string_equal(tree_expr(&x, 8), "(((0+1)+(2+3))+((4+5)+(6+7)))");
    char want[EXPR];
    for (int n = 1; n <= 100; n++) {
        spec_expr(want, sizeof want, 0, n);
        assert_string_equal(tree_expr(&x, n), want);
    }
}

/* A user that only checks what it is asked to add: the entry above into. */
static void add_nothing(void *ctx, int into, int from)
{
    (void)ctx;
    assert_true(into >= 0);
    assert_int_equal(from, into + 1);
}

static void test_depth(void **state)
{
    (void)state;
    assert_int_equal(dt_sum_tree_depth(0), 0);
    assert_int_equal(dt_sum_tree_depth(1), 1);
    assert_int_equal(dt_sum_tree_depth(2), 2);
    assert_int_equal(dt_sum_tree_depth(7), 3);
    assert_int_equal(dt_sum_tree_depth(8), 4);
    assert_int_equal(dt_sum_tree_depth(1024), 11); /* dist/shm.c's most ranks */
    /* the most entries in use while adding n leaves is what depth(n) reserves */
    for (int n = 1; n <= MAX_LEAVES; n++) {
        struct dt_sum_tree t;
        int most = 0;
        dt_sum_tree_begin(&t);
        for (int k = 0; k < n; k++) {
            int d = dt_sum_tree_next(&t);
            most = d + 1 > most ? d + 1 : most;
            dt_sum_tree_push(&t, add_nothing, NULL);
        }
        assert_int_equal(most, dt_sum_tree_depth((unsigned long)n));
        assert_int_equal(dt_sum_tree_finish(&t, add_nothing, NULL), 0);
    }
}

/* ---- both users ----------------------------------------------------------------------------- */

enum { MAX_N = 8, LEN = 20011, SMALL_LEN = 1000, CHUNK_BYTES = 16 << 10 };

static float leaves[MAX_N][LEN], want[LEN];

/* Values over many binades, so that the order of additions shows in the bits. */
static void fill(float *v, int n, unsigned seed)
{
    srand(seed);
    for (int i = 0; i < n; i++)
        v[i] = ((float)rand() / RAND_MAX - 0.5f) * (float)(1 << (rand() % 20));
}

/* How many elements the other orders give other bits in: the subtrees added left to right,
 * ((0..3) + (4+5)) + 6 for 7, and one chain, ((0+1)+2)+... */
static void count_other_orders(int n, const float *sum, int *left_first, int *chain)
{
    *left_first = *chain = 0;
    for (int i = 0; i < LEN; i++) {
        float lf = 0, ch = leaves[0][i];
        int lo = 0;
        for (int p = 1 << 30; p; p >>= 1) {
            if (!(n & p))
                continue;
            float sub[MAX_N];
            for (int k = 0; k < p; k++)
                sub[k] = leaves[lo + k][i];
            for (int width = 1; width < p; width *= 2)
                for (int k = 0; k + width < p; k += 2 * width)
                    sub[k] += sub[k + width];
            lf = lo ? lf + sub[0] : sub[0];
            lo += p;
        }
        for (int k = 1; k < n; k++)
            ch += leaves[k][i];
        *left_first += memcmp(&lf, &sum[i], sizeof lf) != 0;
        *chain += memcmp(&ch, &sum[i], sizeof ch) != 0;
    }
}

static void shm_rank(struct dt_shm_segment *seg, int rank, int n)
{
    struct dt_comm *c;
    CHECK(dt_shm_comm_create(&c, seg, rank) == 0, "comm_create");
    static float buf[LEN];
    size_t lens[] = {SMALL_LEN, LEN}; /* the small path, then the pipelined one */
    for (int k = 0; k < 2; k++) {
        memcpy(buf, leaves[rank], lens[k] * sizeof *buf);
        CHECK(c->allreduce_sum(c, buf, lens[k]) == 0, "allreduce");
        for (size_t i = 0; i < lens[k]; i++)
            CHECK(memcmp(&buf[i], &want[i], sizeof *buf) == 0,
                  "%d ranks, len %zu: [%zu] = %a, nn/grad_tree gives %a", n, lens[k], i, buf[i],
                  want[i]);
    }
    c->close(c);
    dt_shm_segment_destroy(seg);
    _exit(0);
}

/* n ranks of the shm all-reduce, rank r holding leaf r; each compares its sum with want. */
static int shm_failures(int n)
{
    struct dt_shm_segment *seg;
    assert_int_equal(dt_shm_segment_create(&seg, n, CHUNK_BYTES, 30), 0);
    pid_t pids[MAX_N];
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        assert_true(pids[r] >= 0);
        if (pids[r] == 0)
            shm_rank(seg, r, n);
    }
    int failed = shm_ranks_wait(pids, n, seg);
    dt_shm_segment_destroy(seg);
    return failed;
}

static void test_grad_tree_and_shm_agree(void **state)
{
    (void)state;
    for (int k = 0; k < MAX_N; k++)
        fill(leaves[k], LEN, 300 + (unsigned)k);
    struct dt_grad_tree t = {0};
    assert_int_equal(dt_grad_tree_reserve(&t, LEN, MAX_N), 0);
    for (int n = 2; n <= MAX_N; n++) {
        dt_grad_tree_begin(&t, LEN);
        for (int k = 0; k < n; k++) {
            memcpy(dt_grad_tree_slot(&t), leaves[k], sizeof leaves[k]);
            dt_grad_tree_push(&t);
        }
        dt_grad_tree_finish(&t, want);
        assert_int_equal(shm_failures(n), 0);
        int left_first, chain;
        count_other_orders(n, want, &left_first, &chain);
        /* the data tells a chain from the tree (3 is ((0+1)+2) in both) */
        if (n > 3)
            assert_true(chain > 0);
        if (n == 7)
            assert_true(left_first > 0); /* 3 unequal subtrees: the order of adding them shows */
        else
            assert_int_equal(left_first, 0); /* at most 2 subtrees: one way to add them */
    }
    dt_grad_tree_release(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape),
        cmocka_unit_test(test_depth),
        cmocka_unit_test(test_grad_tree_and_shm_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

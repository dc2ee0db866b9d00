/* nn/grad_tree: weight gradients summed over fixed batch slices in a fixed binary tree.
 *  - the slice size for a global batch;
 *  - the tree's shape (util/sum_tree.h): neighbours in pairs, then pairs of pairs; unequal
 *    subtrees: the later ones summed first, then added to the earlier;
 *  - a model with a slice set computes, over a whole batch, the bits that its halves' (and
 *    quarters') gradients give when combined in that tree, which is what N instances and the
 *    shm all-reduce compute (conv2d on each algorithm, linear; the forward too). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "nn/grad_tree.h"
#include "nn/layers.h"
#include "nn/model.h"
#include "nn_specs.h"

static void test_slice_size(void **state)
{
    (void)state;
    assert_int_equal(dt_grad_slice(128), 16);
    assert_int_equal(dt_grad_slice(100), 25); /* 100 = 4 x 25: up to 4 instances line up */
    assert_int_equal(dt_grad_slice(12), 3);
    assert_int_equal(dt_grad_slice(32), 4);
    assert_int_equal(dt_grad_slice(8), 1);
    assert_int_equal(dt_grad_slice(7), 7); /* odd: one slice */
    assert_int_equal(dt_grad_slice(1), 1);
}

enum { N = 257, SLICES = 8 };

/* Values over many binades, so that the order of additions shows in the bits. */
static void fill(float *v, int n, unsigned seed)
{
    srand(seed);
    for (int i = 0; i < n; i++)
        v[i] = ((float)rand() / RAND_MAX - 0.5f) * (float)(1 << (rand() % 20));
}

static void sum_tree(struct dt_grad_tree *t, float s[][N], int first, int count, float *out)
{
    dt_grad_tree_begin(t, N);
    for (int k = first; k < first + count; k++) {
        memcpy(dt_grad_tree_slot(t), s[k], sizeof s[k]);
        dt_grad_tree_push(t);
    }
    dt_grad_tree_finish(t, out);
}

static void test_tree_shape(void **state)
{
    (void)state;
    static float s[SLICES][N];
    for (int k = 0; k < SLICES; k++)
        fill(s[k], N, 100 + (unsigned)k);
    struct dt_grad_tree t = {0};
    assert_int_equal(dt_grad_tree_reserve(&t, N, SLICES), 0);
    float got[N], half[2][N], quarter[4][N], want[N];
    sum_tree(&t, s, 0, 8, got);
    int linear_differs = 0;
    for (int i = 0; i < N; i++) {
        float p[4];
        for (int q = 0; q < 4; q++)
            p[q] = s[2 * q][i] + s[2 * q + 1][i];
        want[i] = (p[0] + p[1]) + (p[2] + p[3]);
        float chain = 0;
        for (int k = 0; k < SLICES; k++)
            chain = k ? chain + s[k][i] : s[k][i];
        linear_differs += memcmp(&chain, &want[i], sizeof chain) != 0;
    }
    assert_memory_equal(got, want, sizeof got);
    assert_true(linear_differs > 0); /* else this data could not tell the shapes apart */
    /* 2 and 4 instances: their subtrees, then the all-reduce's tree over ranks */
    for (int h = 0; h < 2; h++)
        sum_tree(&t, s, 4 * h, 4, half[h]);
    for (int q = 0; q < 4; q++)
        sum_tree(&t, s, 2 * q, 2, quarter[q]);
    for (int i = 0; i < N; i++) {
        float a = half[0][i] + half[1][i];
        float b = (quarter[0][i] + quarter[1][i]) + (quarter[2][i] + quarter[3][i]);
        assert_memory_equal(&a, &got[i], sizeof a);
        assert_memory_equal(&b, &got[i], sizeof b);
    }
    /* 6 slices: (0..3) + (4..5); 3 slices: (0+1) + 2; none: zeros */
    sum_tree(&t, s, 0, 6, got);
    for (int i = 0; i < N; i++) {
        float w = ((s[0][i] + s[1][i]) + (s[2][i] + s[3][i])) + (s[4][i] + s[5][i]);
        assert_memory_equal(&w, &got[i], sizeof w);
    }
    sum_tree(&t, s, 0, 3, got);
    for (int i = 0; i < N; i++) {
        float w = (s[0][i] + s[1][i]) + s[2][i];
        assert_memory_equal(&w, &got[i], sizeof w);
    }
    /* 7 slices: (0..3) + ((4+5) + 6), not ((0..3) + (4+5)) + 6 */
    sum_tree(&t, s, 0, 7, got);
    int left_first_differs = 0;
    for (int i = 0; i < N; i++) {
        float four = (s[0][i] + s[1][i]) + (s[2][i] + s[3][i]), two = s[4][i] + s[5][i];
        float w = four + (two + s[6][i]), left_first = (four + two) + s[6][i];
        assert_memory_equal(&w, &got[i], sizeof w);
        left_first_differs += memcmp(&w, &left_first, sizeof w) != 0;
    }
    assert_true(left_first_differs > 0);
    sum_tree(&t, s, 0, 0, got);
    for (int i = 0; i < N; i++)
        assert_true(got[i] == 0.0f);
    dt_grad_tree_release(&t);
}

/* conv2d (gemm) -> relu -> conv2d (winograd, or its fallback) -> relu -> conv2d (direct) ->
 * linear -> linear, on 3x8x8 inputs. */
static int specs(struct dt_layer_spec *s)
{
    int n = 0;
    s[n] = conv_spec(16, 3, 1, 1);
    s[n++].algo = DT_CONV2D_GEMM;
    s[n++] = spec_of("relu");
    s[n] = conv_spec(16, 3, 1, 1);
    s[n++].algo = DT_CONV2D_WINOGRAD;
    s[n++] = spec_of("relu");
    s[n] = conv_spec(8, 3, 2, 1);
    s[n++].algo = DT_CONV2D_DIRECT;
    s[n++] = linear_spec(24);
    s[n++] = linear_spec(10);
    return n;
}

enum { BATCH = 16, SLICE = 2 };

/* Gradients (and outputs) of samples [first, first + count) with slices of SLICE samples. */
static void run(struct dt_model *m, const float *x, const uint8_t *y, int first, int count,
                float *grads, float *out)
{
    size_t in = (size_t)m->input.c * m->input.h * m->input.w;
    struct dt_forward_ctx ctx = {.training = true, .seed = 1};
    assert_int_equal(dt_model_forward(m, x + first * in, count, &ctx), 0);
    memcpy(out + (size_t)first * m->classes, m->output, (size_t)count * m->classes * sizeof *out);
    assert_int_equal(dt_model_backward(m, y + first, count, 1.0f / BATCH), 0);
    memcpy(grads, m->grads, m->nparams * sizeof *grads);
}

static void test_model_split_invariant(void **state)
{
    (void)state;
    struct dt_layer_spec s[16];
    int n = specs(s);
    struct dt_shape shape = {3, 8, 8};
    struct dt_model *m;
    assert_int_equal(dt_model_build(&m, s, n, shape, BATCH, DT_LOSS_CROSS_ENTROPY, 3), 0);
    assert_int_equal(dt_model_set_grad_slice(m, SLICE), 0);
    assert_int_equal(m->grad_slice, SLICE);
    size_t in = 3 * 8 * 8, np = m->nparams, no = (size_t)BATCH * m->classes;
    float *x = malloc(BATCH * in * sizeof *x), *g = malloc(np * sizeof *g);
    float *part = malloc(4 * np * sizeof *part), *out = malloc(no * sizeof *out);
    float *out_part = malloc(no * sizeof *out_part);
    uint8_t y[BATCH];
    fill(x, (int)(BATCH * in), 7);
    for (int i = 0; i < BATCH; i++)
        y[i] = (uint8_t)(i * 7 % 10);
    run(m, x, y, 0, BATCH, g, out);
    /* 2 instances */
    for (int h = 0; h < 2; h++)
        run(m, x, y, h * BATCH / 2, BATCH / 2, part + h * np, out_part);
    assert_memory_equal(out, out_part, no * sizeof *out);
    for (size_t i = 0; i < np; i++) {
        float sum = part[i] + part[np + i];
        assert_memory_equal(&sum, &g[i], sizeof sum);
    }
    /* 4 instances: the shm all-reduce's tree over ranks */
    for (int q = 0; q < 4; q++)
        run(m, x, y, q * BATCH / 4, BATCH / 4, part + q * np, out_part);
    assert_memory_equal(out, out_part, no * sizeof *out);
    for (size_t i = 0; i < np; i++) {
        float sum = (part[i] + part[np + i]) + (part[2 * np + i] + part[3 * np + i]);
        assert_memory_equal(&sum, &g[i], sizeof sum);
    }
    /* off again: one sum over the batch */
    assert_int_equal(dt_model_set_grad_slice(m, 0), 0);
    assert_int_equal(m->grad_slice, 0);
    free(x);
    free(g);
    free(part);
    free(out);
    free(out_part);
    dt_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slice_size),
        cmocka_unit_test(test_tree_shape),
        cmocka_unit_test(test_model_split_invariant),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

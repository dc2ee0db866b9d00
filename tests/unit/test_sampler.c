/* data/sampler: the epoch permutation is a deterministic permutation; in global-batch mode
 * the ranks' shares of a step are a disjoint, ordered cover of the step's positions whatever
 * the instance count, with equal step counts; per-instance mode matches PyTorch's
 * DistributedSampler (strided shards, padding by wrapping) batched by a DataLoader. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "data/sampler.h"
#include "util/err.h"

static void test_permutation_is_deterministic(void **state)
{
    (void)state;
    enum { N = 1000 };
    static uint32_t a[N], b[N], c[N];
    dt_sampler_permutation(7, 3, N, a);
    dt_sampler_permutation(7, 3, N, b);
    dt_sampler_permutation(7, 4, N, c);
    assert_memory_equal(a, b, sizeof(a));
    int seen[N] = {0}, moved = 0, differ = 0;
    for (int i = 0; i < N; i++) {
        assert_true(a[i] < N);
        seen[a[i]]++;
        moved += a[i] != (uint32_t)i;
        differ += a[i] != c[i];
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(seen[i], 1);
    assert_true(moved > 900);
    assert_true(differ > 900);
    dt_sampler_permutation(7, 3, 1, a);
    assert_int_equal(a[0], 0);
}

/* Global mode: for each step, ranks 0..size-1 concatenated are perm[s*B, s*B+m). */
static void check_global(size_t n, size_t batch, int size, int drop_last)
{
    uint32_t *perm = malloc(n * sizeof(*perm));
    dt_sampler_permutation(11, 2, n, perm);
    size_t steps = drop_last ? n / batch : (n + batch - 1) / batch;
    uint32_t idx[64];
    size_t pos = 0;
    for (size_t s = 0; s < steps; s++) {
        size_t step_first = pos;
        for (int r = 0; r < size; r++) {
            struct dt_sampler sm;
            struct dt_sampler_opts o = {.n = n,
                                        .batch = batch,
                                        .rank = r,
                                        .size = size,
                                        .seed = 11,
                                        .drop_last = drop_last};
            assert_int_equal(dt_sampler_init(&sm, &o), 0);
            assert_int_equal(dt_sampler_steps(&sm), steps);
            assert_true(dt_sampler_max_count(&sm) <= 64);
            int count, global;
            assert_int_equal(dt_sampler_batch(&sm, 2, s, idx, &count, &global), 0);
            assert_true(count >= 0 && count <= dt_sampler_max_count(&sm));
            size_t m = n - s * batch < batch ? n - s * batch : batch;
            assert_int_equal(global, m);
            /* as even as possible: counts differ by at most one, larger ones first */
            assert_true(count == (int)(m / size) + (r < (int)(m % size)));
            for (int i = 0; i < count; i++)
                assert_int_equal(idx[i], perm[pos + i]);
            pos += (size_t)count;
            dt_sampler_free(&sm);
        }
        assert_int_equal(pos - step_first, n - s * batch < batch ? n - s * batch : batch);
    }
    assert_int_equal(pos, drop_last ? steps * batch : n);
    free(perm);
}

static void test_global_batches_cover_the_permutation(void **state)
{
    (void)state;
    size_t ns[] = {1, 7, 31, 97, 100};
    size_t batches[] = {1, 5, 8, 32};
    for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++)
        for (size_t b = 0; b < sizeof(batches) / sizeof(batches[0]); b++)
            for (int size = 1; size <= 8; size++)
                for (int drop = 0; drop < 2; drop++)
                    if (!drop || ns[a] >= batches[b])
                        check_global(ns[a], batches[b], size, drop);
}

/* PyTorch's DistributedSampler(shuffle) + DataLoader(batch_size=B), written out plainly. */
static void check_per_instance(size_t n, size_t batch, int size, int drop_last)
{
    uint32_t *perm = malloc(n * sizeof(*perm));
    dt_sampler_permutation(5, 9, n, perm);
    size_t per_rank = drop_last ? n / size : (n + size - 1) / size;
    size_t steps = drop_last ? per_rank / batch : (per_rank + batch - 1) / batch;
    size_t *used = calloc(n, sizeof(*used));
    for (int r = 0; r < size; r++) {
        struct dt_sampler sm;
        struct dt_sampler_opts o = {.n = n,
                                    .batch = batch,
                                    .rank = r,
                                    .size = size,
                                    .seed = 5,
                                    .drop_last = drop_last,
                                    .per_instance = 1};
        if (steps == 0) {
            assert_int_equal(dt_sampler_init(&sm, &o), -DT_EUSAGE);
            free(perm);
            free(used);
            return;
        }
        assert_int_equal(dt_sampler_init(&sm, &o), 0);
        assert_int_equal(dt_sampler_steps(&sm), steps);
        assert_int_equal(dt_sampler_max_count(&sm), batch);
        uint32_t idx[64];
        size_t k = 0;
        for (size_t s = 0; s < steps; s++) {
            int count, global;
            assert_int_equal(dt_sampler_batch(&sm, 9, s, idx, &count, &global), 0);
            size_t want = per_rank - s * batch < batch ? per_rank - s * batch : batch;
            assert_int_equal(count, want);
            assert_int_equal(global, want * size);
            for (int i = 0; i < count; i++, k++) {
                size_t position = (size_t)r + k * (size_t)size;
                assert_true(position < per_rank * size);
                assert_int_equal(idx[i], perm[position % n]);
                used[idx[i]]++;
            }
        }
        dt_sampler_free(&sm);
    }
    /* every sample used (at least) once unless dropped; padding repeats only the first few */
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += used[i];
    if (!drop_last)
        for (size_t i = 0; i < n; i++)
            assert_true(used[i] >= 1);
    assert_int_equal(total, drop_last ? steps * batch * size : per_rank * size);
    free(perm);
    free(used);
}

static void test_per_instance_matches_distributed_sampler(void **state)
{
    (void)state;
    size_t ns[] = {1, 3, 10, 31, 100};
    size_t batches[] = {1, 2, 7};
    for (size_t a = 0; a < sizeof(ns) / sizeof(ns[0]); a++)
        for (size_t b = 0; b < sizeof(batches) / sizeof(batches[0]); b++)
            for (int size = 1; size <= 8; size++)
                for (int drop = 0; drop < 2; drop++)
                    check_per_instance(ns[a], batches[b], size, drop);
}

static void test_rank_gets_nothing_in_a_small_last_step(void **state)
{
    (void)state;
    /* 10 samples, batch 4, 4 ranks: the last step has 2 samples, ranks 2 and 3 get none */
    struct dt_sampler sm;
    struct dt_sampler_opts o = {.n = 10, .batch = 4, .rank = 3, .size = 4, .seed = 1};
    assert_int_equal(dt_sampler_init(&sm, &o), 0);
    assert_int_equal(dt_sampler_steps(&sm), 3);
    uint32_t idx[1];
    int count = -1, global = -1;
    assert_int_equal(dt_sampler_batch(&sm, 0, 2, idx, &count, &global), 0);
    assert_int_equal(count, 0);
    assert_int_equal(global, 2);
    assert_int_equal(dt_sampler_batch(&sm, 0, 3, idx, &count, &global), -DT_ERUNTIME);
    assert_non_null(strstr(dt_last_error(), "step 3 is past the epoch's 3 steps"));
    dt_sampler_free(&sm);
}

static void test_sequential_mode(void **state)
{
    (void)state;
    struct dt_sampler sm;
    struct dt_sampler_opts o = {.n = 9, .batch = 4, .rank = 1, .size = 2, .sequential = 1};
    assert_int_equal(dt_sampler_init(&sm, &o), 0);
    uint32_t idx[2];
    int count, global;
    assert_int_equal(dt_sampler_batch(&sm, 5, 1, idx, &count, &global), 0);
    assert_int_equal(count, 2);
    assert_int_equal(idx[0], 6);
    assert_int_equal(idx[1], 7);
    assert_int_equal(dt_sampler_batch(&sm, 5, 2, idx, &count, &global), 0);
    assert_int_equal(count, 0);
    assert_int_equal(global, 1);
    dt_sampler_free(&sm);
}

static void test_bad_options(void **state)
{
    (void)state;
    struct dt_sampler sm;
    struct dt_sampler_opts o = {.n = 0, .batch = 4, .rank = 0, .size = 1};
    assert_int_equal(dt_sampler_init(&sm, &o), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "empty"));
    o.n = 10;
    o.rank = 2;
    o.size = 2;
    assert_int_equal(dt_sampler_init(&sm, &o), -DT_EUSAGE);
    assert_non_null(strstr(dt_last_error(), "rank 2 is not in 0..1"));
    o.rank = 0;
    o.batch = 0;
    assert_int_equal(dt_sampler_init(&sm, &o), -DT_EUSAGE);
    assert_non_null(strstr(dt_last_error(), "train.batch_size: 0 is out of range"));
    o.batch = 11;
    o.drop_last = 1;
    assert_int_equal(dt_sampler_init(&sm, &o), -DT_EUSAGE);
    assert_non_null(strstr(dt_last_error(), "drop_last leaves no step"));
    assert_null(sm.perm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_permutation_is_deterministic),
        cmocka_unit_test(test_global_batches_cover_the_permutation),
        cmocka_unit_test(test_per_instance_matches_distributed_sampler),
        cmocka_unit_test(test_rank_gets_nothing_in_a_small_last_step),
        cmocka_unit_test(test_sequential_mode),
        cmocka_unit_test(test_bad_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

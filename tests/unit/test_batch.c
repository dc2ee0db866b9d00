/* data/batch: normalization values equal torchvision's ToTensor + Normalize in float, labels
 * are gathered, and the flip/crop augmentation reproduces an explicit zero-padded crop and
 * mirror, keyed by (seed, epoch, sample) so a sample looks the same whichever batch (rank)
 * it lands in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/batch.h"
#include "util/err.h"

enum { N = 40, C = 3, H = 6, W = 5 };
static uint8_t xs[N * C * H * W], ys[N];
static struct dt_dataset ds = {.n = N, .c = C, .h = H, .w = W, .x = xs, .y = ys, .classes = 10};
static const float mean[3] = {0.4914f, 0.4822f, 0.4465f}, stdv[3] = {0.247f, 0.243f, 0.261f};

static int setup(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(xs); i++)
        xs[i] = (uint8_t)(i * 37 + i / 7);
    for (int i = 0; i < N; i++)
        ys[i] = (uint8_t)(i % 10);
    return 0;
}

static float expected(uint8_t v, int ch)
{
    return ((float)v / 255.0f - mean[ch]) / stdv[ch];
}

static void test_normalizes_per_channel(void **state)
{
    (void)state;
    struct dt_batcher b;
    struct dt_batch_opts o = {.mean = mean, .nmean = 3, .std = stdv, .nstd = 3};
    assert_int_equal(dt_batcher_init(&b, &ds, &o), 0);
    uint32_t idx[3] = {7, 0, 39};
    float x[3 * C * H * W];
    uint8_t y[3];
    dt_batch_assemble(&b, &ds, idx, 3, 0, 1, x, y);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(y[k], idx[k] % 10);
        for (int ch = 0; ch < C; ch++)
            for (int p = 0; p < H * W; p++) {
                uint8_t v = xs[(idx[k] * C + ch) * H * W + p];
                assert_true(x[(k * C + ch) * H * W + p] == expected(v, ch));
            }
    }
}

static void test_single_and_no_statistics(void **state)
{
    (void)state;
    struct dt_batcher b;
    float m = 0.5f, s = 0.5f;
    struct dt_batch_opts one = {.mean = &m, .nmean = 1, .std = &s, .nstd = 1};
    assert_int_equal(dt_batcher_init(&b, &ds, &one), 0);
    assert_true(b.lut[2][255] == 1.0f);
    assert_true(b.lut[1][0] == -1.0f);
    struct dt_batch_opts none = {0};
    assert_int_equal(dt_batcher_init(&b, &ds, &none), 0);
    assert_true(b.lut[0][255] == 1.0f);
    assert_true(b.lut[0][0] == 0.0f);
    assert_true(fabsf(b.lut[2][51] - 0.2f) < 1e-7f);
}

static void test_bad_options(void **state)
{
    (void)state;
    struct dt_batcher b;
    struct dt_batch_opts o = {.mean = mean, .nmean = 2};
    assert_int_equal(dt_batcher_init(&b, &ds, &o), -DT_EUSAGE);
    assert_string_equal(dt_last_error(), "data.mean: 2 values, expected 1 or 3 (one per channel)");
    float zero = 0.0f;
    o = (struct dt_batch_opts){.std = &zero, .nstd = 1};
    assert_int_equal(dt_batcher_init(&b, &ds, &o), -DT_EUSAGE);
    assert_string_equal(dt_last_error(), "data.std: 0 for channel 0, must be positive");
    o = (struct dt_batch_opts){.crop_padding = 5};
    assert_int_equal(dt_batcher_init(&b, &ds, &o), -DT_EUSAGE);
    assert_non_null(strstr(dt_last_error(), "data.crop_padding: 5 must be"));
    struct dt_dataset wide = ds;
    wide.c = 5;
    o = (struct dt_batch_opts){0};
    assert_int_equal(dt_batcher_init(&b, &wide, &o), -DT_EUSAGE);
    assert_non_null(strstr(dt_last_error(), "5 channels"));
}

/* Reference: pad with zeros by p, take the window at (oy, ox), mirror if flip. */
static void reference(const struct dt_batcher *b, uint32_t i, int oy, int ox, int flip, float *out)
{
    int p = b->crop_padding;
    uint8_t padded[C][H + 8][W + 8];
    memset(padded, 0, sizeof(padded));
    for (int ch = 0; ch < C; ch++)
        for (int r = 0; r < H; r++)
            for (int c = 0; c < W; c++)
                padded[ch][r + p][c + p] = xs[((i * C + ch) * H + r) * W + c];
    for (int ch = 0; ch < C; ch++)
        for (int r = 0; r < H; r++)
            for (int c = 0; c < W; c++) {
                int cc = flip ? W - 1 - c : c;
                out[(ch * H + r) * W + c] = b->lut[ch][padded[ch][r + oy][cc + ox]];
            }
}

static void test_flip_and_crop_match_reference(void **state)
{
    (void)state;
    struct dt_batcher b;
    struct dt_batch_opts o = {.mean = mean,
                              .nmean = 3,
                              .std = stdv,
                              .nstd = 3,
                              .hflip = 1,
                              .crop_padding = 2,
                              .seed = 99};
    assert_int_equal(dt_batcher_init(&b, &ds, &o), 0);
    uint32_t idx[N];
    for (int i = 0; i < N; i++)
        idx[i] = (uint32_t)(N - 1 - i);
    static float x[N * C * H * W], ref[C * H * W];
    uint8_t y[N];
    dt_batch_assemble(&b, &ds, idx, N, 3, 1, x, y);
    int flips = 0, shifted = 0;
    for (int k = 0; k < N; k++) {
        int oy, ox, flip;
        dt_batch_augment_params(&b, 3, idx[k], &oy, &ox, &flip);
        assert_true(oy >= 0 && oy <= 4 && ox >= 0 && ox <= 4);
        flips += flip;
        shifted += oy != 2 || ox != 2;
        reference(&b, idx[k], oy, ox, flip, ref);
        assert_memory_equal(x + k * C * H * W, ref, sizeof(ref));
        assert_int_equal(y[k], idx[k] % 10);
    }
    assert_true(flips > 5 && flips < N - 5);
    assert_true(shifted > N / 2);
    /* evaluation batches are never augmented */
    dt_batch_assemble(&b, &ds, idx, 1, 3, 0, x, y);
    reference(&b, idx[0], 2, 2, 0, ref);
    assert_memory_equal(x, ref, sizeof(ref));
}

static void test_augmentation_is_keyed_by_sample_not_batch(void **state)
{
    (void)state;
    struct dt_batcher b;
    struct dt_batch_opts o = {.hflip = 1, .crop_padding = 1, .seed = 4};
    assert_int_equal(dt_batcher_init(&b, &ds, &o), 0);
    static float big[N * C * H * W], small[C * H * W];
    uint32_t idx[N];
    for (int i = 0; i < N; i++)
        idx[i] = (uint32_t)i;
    uint8_t y[N];
    /* "rank 0" gets the whole batch, "rank 1" gets sample 17 alone */
    dt_batch_assemble(&b, &ds, idx, N, 8, 1, big, y);
    dt_batch_assemble(&b, &ds, idx + 17, 1, 8, 1, small, y);
    assert_memory_equal(big + 17 * C * H * W, small, sizeof(small));
    /* another epoch draws other crops and flips */
    int differ = 0;
    for (uint32_t i = 0; i < N; i++) {
        int a[3], c[3];
        dt_batch_augment_params(&b, 8, i, &a[0], &a[1], &a[2]);
        dt_batch_augment_params(&b, 9, i, &c[0], &c[1], &c[2]);
        differ += memcmp(a, c, sizeof(a)) != 0;
    }
    assert_true(differ > N / 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normalizes_per_channel),
        cmocka_unit_test(test_single_and_no_statistics),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_flip_and_crop_match_reference),
        cmocka_unit_test(test_augmentation_is_keyed_by_sample_not_batch),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}

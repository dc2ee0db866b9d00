/* data/augment and its use in data/batch: each transform on small hand-made images (identity
 * parameters give the plain batch back exactly, a 90-degree turn moves a known pattern, the
 * bilinear resize matches PyTorch's align_corners=False values, colour factors blend as
 * torchvision's), the crop and erase boxes stay inside the image over many draws, the
 * cross-key checks, and the batch-level properties training relies on: a sample's augmented
 * values depend only on (seed, epoch, sample), and turning augmentation on leaves the
 * existing crop and flip draws as they were. Also data/stats' per-channel statistics. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/augment.h"
#include "data/batch.h"
#include "data/stats.h"
#include "util/err.h"
#include "util/rng.h"

static const float zeros[4] = {0, 0, 0, 0}, ones[4] = {1, 1, 1, 1};

/* A draw that changes nothing for an h x w image. */
static struct dt_augment_draw identity(int h, int w)
{
    return (struct dt_augment_draw){
        .crop_h = h, .crop_w = w, .brightness = 1, .contrast = 1, .saturation = 1};
}

static void pattern(uint8_t *px, size_t n)
{
    for (size_t i = 0; i < n; i++)
        px[i] = (uint8_t)(i * 37 + i / 7 + 3);
}

static void test_identity_is_exact(void **state)
{
    (void)state;
    enum { C = 3, H = 5, W = 7 };
    uint8_t src[C * H * W];
    pattern(src, sizeof src);
    const float mean[3] = {0.4914f, 0.4822f, 0.4465f}, std[3] = {0.247f, 0.243f, 0.261f};
    struct dt_augment_image im = {C, H, W, mean, std};
    struct dt_augment_draw d = identity(H, W);
    float out[C * H * W];
    dt_augment_apply(NULL, &d, &im, src, out);
    for (int ch = 0; ch < C; ch++)
        for (int i = 0; i < H * W; i++)
            assert_true(out[ch * H * W + i] ==
                        ((float)src[ch * H * W + i] / 255.0f - mean[ch]) / std[ch]);
}

/* Values in pixel units: mean 0, std 1/255 undoes the /255. */
static const float unit_std[4] = {1.0f / 255, 1.0f / 255, 1.0f / 255, 1.0f / 255};

static void test_rotation_by_90_degrees(void **state)
{
    (void)state;
    enum { N = 5 };
    uint8_t src[N * N];
    for (int i = 0; i < N * N; i++)
        src[i] = (uint8_t)(10 * i);
    struct dt_augment_image im = {1, N, N, zeros, unit_std};
    struct dt_augment_draw d = identity(N, N);
    d.angle = 90; /* counter-clockwise: what was on the right is now on top */
    float out[N * N];
    dt_augment_apply(NULL, &d, &im, src, out);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            assert_float_equal(out[i * N + j], src[j * N + (N - 1 - i)], 1e-3);
    /* a small angle keeps the centre pixel and brings the fill into a corner */
    struct dt_augment_opts o = {.rotate_fill = 200};
    d.angle = 30;
    dt_augment_apply(&o, &d, &im, src, out);
    assert_float_equal(out[2 * N + 2], src[2 * N + 2], 1e-3);
    assert_true(out[0] > 60 && out[0] <= 200.001f); /* mostly fill */
}

/* Above 128 x 128 the rotation reads its source on demand instead of from a stack buffer: the
 * same turn, the same result. */
static void test_rotation_of_a_large_plane(void **state)
{
    (void)state;
    enum { N = 131 };
    static uint8_t src[N * N];
    static float out[N * N];
    pattern(src, sizeof src);
    struct dt_augment_image im = {1, N, N, zeros, unit_std};
    struct dt_augment_draw d = identity(N, N);
    d.angle = -90; /* clockwise: what was on the left is now on top */
    dt_augment_apply(NULL, &d, &im, src, out);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            assert_float_equal(out[i * N + j], src[(N - 1 - j) * N + i], 1e-2);
}

static void test_resized_crop_is_bilinear(void **state)
{
    (void)state;
    enum { N = 4 };
    uint8_t src[N * N];
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            src[i * N + j] = (uint8_t)(10 * j + 100 * (i > 1));
    struct dt_augment_image im = {1, N, N, zeros, unit_std};
    struct dt_augment_draw d = identity(N, N);
    d.crop_h = d.crop_w = 2; /* the top-left 2x2 box, upsampled to 4x4 */
    float out[N * N];
    dt_augment_apply(NULL, &d, &im, src, out);
    /* torch.nn.functional.interpolate([[0, 10]], size=4, mode="bilinear") per row */
    const float row[N] = {0, 2.5f, 7.5f, 10};
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            assert_float_equal(out[i * N + j], row[j], 1e-4);
}

static void test_flip_and_padded_crop_in_the_chain(void **state)
{
    (void)state;
    enum { H = 3, W = 4 };
    uint8_t src[H * W];
    pattern(src, sizeof src);
    struct dt_augment_image im = {1, H, W, zeros, unit_std};
    struct dt_augment_draw d = identity(H, W);
    d.pad = 1;
    d.oy = 0; /* shifted down by one: the top row is padding */
    d.ox = 1;
    d.flip = 1;
    float out[H * W];
    dt_augment_apply(NULL, &d, &im, src, out);
    for (int j = 0; j < W; j++)
        assert_true(out[j] == 0);
    for (int i = 1; i < H; i++)
        for (int j = 0; j < W; j++)
            assert_float_equal(out[i * W + j], src[(i - 1) * W + (W - 1 - j)], 1e-3);
}

static void test_colour_factors(void **state)
{
    (void)state;
    enum { C = 3, P = 4 };
    uint8_t src[C * P] = {10, 200, 50, 100, 20, 250, 60, 90, 30, 0, 255, 128};
    struct dt_augment_image im = {C, 2, 2, zeros, unit_std};
    struct dt_augment_draw d = identity(2, 2);
    float out[C * P];
    d.brightness = 0.5f;
    dt_augment_apply(NULL, &d, &im, src, out);
    for (int i = 0; i < C * P; i++)
        assert_float_equal(out[i], src[i] * 0.5f, 1e-3);
    d.brightness = 2.0f; /* clamped at white */
    dt_augment_apply(NULL, &d, &im, src, out);
    for (int i = 0; i < C * P; i++)
        assert_float_equal(out[i], fminf(src[i] * 2.0f, 255), 1e-3);
    /* contrast 0: every value is the image's mean grey */
    d = identity(2, 2);
    d.contrast = 0;
    dt_augment_apply(NULL, &d, &im, src, out);
    double grey = 0;
    for (int i = 0; i < P; i++)
        grey += 0.2989 * src[i] + 0.587 * src[P + i] + 0.114 * src[2 * P + i];
    for (int i = 0; i < C * P; i++)
        assert_float_equal(out[i], grey / P, 1e-3);
    /* saturation 0: each pixel becomes its own grey in every channel */
    d = identity(2, 2);
    d.saturation = 0;
    dt_augment_apply(NULL, &d, &im, src, out);
    for (int i = 0; i < P; i++) {
        double g = 0.2989 * src[i] + 0.587 * src[P + i] + 0.114 * src[2 * P + i];
        for (int ch = 0; ch < C; ch++)
            assert_float_equal(out[ch * P + i], g, 1e-3);
    }
}

static void test_crop_box_inside_for_many_draws(void **state)
{
    (void)state;
    const float scale[2] = {0.08f, 1.0f}, ratio[2] = {0.75f, 4.0f / 3};
    const int sizes[][2] = {{32, 32}, {7, 50}, {50, 7}, {1, 1}, {224, 160}};
    for (int s = 0; s < 5; s++) {
        int h = sizes[s][0], w = sizes[s][1];
        for (int k = 0; k < 2000; k++) {
            struct dt_rng r;
            dt_rng_init(&r, dt_rng_key(7, DT_RNG_TEST, (uint64_t)s, (uint64_t)k));
            int y, x, bh, bw;
            dt_augment_crop_box(&r, h, w, scale, ratio, &y, &x, &bh, &bw);
            assert_true(bh >= 1 && bw >= 1 && y >= 0 && x >= 0);
            assert_true(y + bh <= h && x + bw <= w);
        }
    }
    /* no ratio of the range fits the whole square's area: the centre crop at the nearest
     * ratio (torchvision's fallback) */
    const float all[2] = {1, 1}, wide[2] = {2, 3};
    struct dt_rng r;
    dt_rng_init(&r, 1);
    int y, x, bh, bw;
    dt_augment_crop_box(&r, 10, 10, all, wide, &y, &x, &bh, &bw);
    assert_int_equal(bw, 10);
    assert_int_equal(bh, 5);
    assert_int_equal(y, 2);
    assert_int_equal(x, 0);
    /* scale and ratio 1 on a square: the whole image */
    dt_augment_crop_box(&r, 9, 9, all, all, &y, &x, &bh, &bw);
    assert_true(y == 0 && x == 0 && bh == 9 && bw == 9);
}

static void test_erase_box_within_bounds(void **state)
{
    (void)state;
    const float scale[2] = {0.02f, 0.33f}, ratio[2] = {0.3f, 3.3f};
    int erased = 0;
    for (int k = 0; k < 2000; k++) {
        struct dt_rng r;
        dt_rng_init(&r, dt_rng_key(3, DT_RNG_TEST, 1, (uint64_t)k));
        int y, x, eh, ew;
        dt_augment_erase_box(&r, 32, 24, scale, ratio, &y, &x, &eh, &ew);
        assert_true(eh >= 0 && ew >= 0 && eh < 32 && ew < 24);
        assert_true(y >= 0 && x >= 0 && y + eh <= 32 && x + ew <= 24);
        if (eh > 0) {
            erased++;
            double share = (double)eh * ew / (32.0 * 24);
            assert_true(share > 0.005 && share < 0.45); /* the scale range, give or take rounding */
        }
    }
    assert_true(erased > 1900);
    /* applied: the rectangle holds the value in every channel, the rest is untouched */
    enum { C = 2, H = 6, W = 5 };
    uint8_t src[C * H * W];
    pattern(src, sizeof src);
    struct dt_augment_image im = {C, H, W, zeros, ones};
    struct dt_augment_opts o = {.erase_value = -3.5f};
    struct dt_augment_draw d = identity(H, W);
    d.erase_y = 1;
    d.erase_x = 2;
    d.erase_h = 3;
    d.erase_w = 2;
    float out[C * H * W];
    dt_augment_apply(&o, &d, &im, src, out);
    for (int ch = 0; ch < C; ch++)
        for (int i = 0; i < H; i++)
            for (int j = 0; j < W; j++) {
                float v = out[(ch * H + i) * W + j];
                if (i >= 1 && i < 4 && j >= 2 && j < 4)
                    assert_true(v == -3.5f);
                else
                    assert_true(v == (float)src[(ch * H + i) * W + j] / 255.0f);
            }
}

static struct dt_augment_opts defaults(void)
{
    return (struct dt_augment_opts){.ncrop_scale = 2,
                                    .crop_scale = {0.08f, 1},
                                    .ncrop_ratio = 2,
                                    .crop_ratio = {0.75f, 4.0f / 3},
                                    .nerase_scale = 2,
                                    .erase_scale = {0.02f, 0.33f},
                                    .nerase_ratio = 2,
                                    .erase_ratio = {0.3f, 3.3f}};
}

static void test_checks(void **state)
{
    (void)state;
    struct dt_augment_opts o = defaults();
    const char *key = NULL;
    char why[200];
    assert_int_equal(dt_augment_check(&o, &key, why, sizeof why), 0);
    o.crop_scale[0] = 0.9f;
    o.crop_scale[1] = 0.5f;
    assert_int_equal(dt_augment_check(&o, &key, why, sizeof why), -1);
    assert_string_equal(key, "data.augment.crop_scale");
    assert_string_equal(why, "min 0.9 is above max 0.5");
    o = defaults();
    o.nerase_ratio = 1;
    assert_int_equal(dt_augment_check(&o, &key, why, sizeof why), -1);
    assert_string_equal(key, "data.augment.erase_ratio");
    assert_string_equal(why, "expected [min, max], got 1 value");
    o = defaults();
    o.saturation = 0.2f;
    assert_int_equal(dt_augment_check_channels(&o, 1), -DT_EUSAGE);
    assert_non_null(strstr(dt_last_error(), "data.augment.saturation: 0.2 needs RGB images"));
    assert_int_equal(dt_augment_check_channels(&o, 3), 0);
    assert_false(dt_augment_enabled(&(struct dt_augment_opts){0}));
    assert_true(dt_augment_enabled(&o));
}

enum { N = 24, C = 3, H = 8, W = 8 };
static uint8_t xs[N * C * H * W], ys[N];
static struct dt_dataset ds = {.n = N, .c = C, .h = H, .w = W, .x = xs, .y = ys, .classes = 10};

static void test_batch_sample_independent_of_position(void **state)
{
    (void)state;
    pattern(xs, sizeof xs);
    struct dt_augment_opts o = defaults();
    o.resized_crop = true;
    o.rotate = 15;
    o.brightness = o.contrast = o.saturation = 0.4f;
    o.erase = 0.5f;
    o.rotate_fill = 9;
    struct dt_batch_opts bo = {.hflip = 1, .crop_padding = 2, .augment = &o, .seed = 11};
    struct dt_batcher b;
    assert_int_equal(dt_batcher_init(&b, &ds, &bo), 0);
    uint32_t idx[N];
    for (int i = 0; i < N; i++)
        idx[i] = (uint32_t)((i * 7) % N);
    static float all[N * C * H * W], one[C * H * W], again[N * C * H * W];
    uint8_t y[N];
    dt_batch_assemble(&b, &ds, idx, N, 5, 1, all, y);
    dt_batch_assemble(&b, &ds, idx, N, 5, 1, again, y);
    assert_memory_equal(all, again, sizeof all);
    for (int k = 0; k < N; k += 5) {
        dt_batch_assemble(&b, &ds, idx + k, 1, 5, 1, one, y);
        assert_memory_equal(one, all + (size_t)k * C * H * W, sizeof one);
    }
    /* another epoch draws other parameters */
    dt_batch_assemble(&b, &ds, idx, N, 6, 1, again, y);
    assert_memory_not_equal(all, again, sizeof all);
    /* the crop and flip draws are the ones dt_batch_augment_params gives without data.augment */
    for (uint32_t s = 0; s < N; s++) {
        struct dt_augment_draw d;
        int oy, ox, flip;
        dt_batch_sample_draw(&b, 5, s, &d);
        dt_batch_augment_params(&b, 5, s, &oy, &ox, &flip);
        assert_true(d.oy == oy && d.ox == ox && d.flip == flip && d.pad == 2);
    }
    /* evaluation batches are plain */
    dt_batch_assemble(&b, &ds, idx, 1, 5, 0, one, y);
    for (int i = 0; i < C * H * W; i++)
        assert_true(one[i] == (float)xs[(size_t)idx[0] * C * H * W + i] / 255.0f);
}

static void test_saturation_refused_for_gray_batches(void **state)
{
    (void)state;
    static uint8_t gray[4 * 5 * 5];
    struct dt_dataset g = {.n = 4, .c = 1, .h = 5, .w = 5, .x = gray, .y = gray, .classes = 2};
    struct dt_augment_opts o = defaults();
    o.saturation = 0.3f;
    struct dt_batch_opts bo = {.augment = &o};
    struct dt_batcher b;
    assert_int_equal(dt_batcher_init(&b, &g, &bo), -DT_EUSAGE);
}

static void test_channel_stats(void **state)
{
    (void)state;
    pattern(xs, sizeof xs);
    float mean[C], std[C];
    dt_dataset_channel_stats(&ds, mean, std);
    for (int ch = 0; ch < C; ch++) {
        double s = 0, q = 0, n = (double)N * H * W;
        for (int k = 0; k < N; k++)
            for (int i = 0; i < H * W; i++) {
                double v = xs[((size_t)k * C + ch) * H * W + i] / 255.0;
                s += v;
                q += v * v;
            }
        double m = s / n;
        assert_float_equal(mean[ch], m, 1e-6);
        assert_float_equal(std[ch], sqrt(q / n - m * m), 1e-6);
    }
    /* a constant channel has std 0 */
    static uint8_t flat[3 * 2 * 2];
    memset(flat, 51, sizeof flat);
    struct dt_dataset f = {.n = 3, .c = 1, .h = 2, .w = 2, .x = flat, .y = flat};
    dt_dataset_channel_stats(&f, mean, std);
    assert_float_equal(mean[0], 0.2f, 1e-7);
    assert_true(std[0] == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identity_is_exact),
        cmocka_unit_test(test_rotation_by_90_degrees),
        cmocka_unit_test(test_rotation_of_a_large_plane),
        cmocka_unit_test(test_resized_crop_is_bilinear),
        cmocka_unit_test(test_flip_and_padded_crop_in_the_chain),
        cmocka_unit_test(test_colour_factors),
        cmocka_unit_test(test_crop_box_inside_for_many_draws),
        cmocka_unit_test(test_erase_box_within_bounds),
        cmocka_unit_test(test_checks),
        cmocka_unit_test(test_batch_sample_independent_of_position),
        cmocka_unit_test(test_saturation_refused_for_gray_batches),
        cmocka_unit_test(test_channel_stats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

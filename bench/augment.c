/* Cost of data.augment per sample, against a training step of the config's model:
 *
 *   make build/bench/augment && ./build/bench/augment [config] [repeats] [threads]
 *
 * config defaults to configs/cifar10-resnet20.cfg (its batch size, its mean/std, its crop and
 * flip); the images are random bytes of CIFAR-10's shape (3x32x32; the cost does not depend on
 * the values). Each row times dt_batch_assemble over one batch with one set of transforms, the
 * last row all of them together; "% of step" divides by a forward + loss + backward of the
 * model on the plain batch (what one instance does per step besides the all-reduce and the
 * optimizer, so the percentage is an upper bound). Medians of `repeats` runs (default 20), on
 * `threads` threads (default 1: the 1x1 case; the assembly uses the rank's OpenMP threads). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/bench/bench.h"
#include "train/config.h"
#include "train/setup.h"
#include "data/batch.h"
#include "nn/model.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/rng.h"

enum { C = 3, H = 32, W = 32, N = 4096 };

struct bench {
    const struct dt_config *cfg;
    struct dt_dataset *d;
    uint32_t *idx;
    int batch, repeats;
    float *x;
    uint8_t *y;
};

/* Seconds per batch assembled with `aug` on top of the config's crop and flip. */
static double time_batch(const struct bench *b, const struct dt_augment_opts *aug, int augment)
{
    struct dt_batch_opts bo = dt_run_batch_opts(b->cfg);
    bo.augment = aug;
    struct dt_batcher batcher;
    if (dt_batcher_init(&batcher, b->d, &bo)) {
        fprintf(stderr, "augment: %s\n", dt_last_error());
        exit(2);
    }
    double *t = malloc((size_t)b->repeats * sizeof *t);
    for (int r = 0; r < b->repeats; r++) {
        double t0 = dt_now();
        dt_batch_assemble(&batcher, b->d, b->idx + (size_t)r * b->batch % (N - b->batch), b->batch,
                          (uint64_t)r, augment, b->x, b->y);
        t[r] = dt_now() - t0;
    }
    double m = dt_bench_median(t, b->repeats);
    free(t);
    return m;
}

static double time_step(const struct bench *b)
{
    struct dt_model *m;
    struct dt_shape in = {C, H, W};
    if (dt_run_build_model(b->cfg, in, b->batch, 10, &m)) {
        fprintf(stderr, "augment: %s\n", dt_last_error());
        exit(2);
    }
    uint64_t ids[4096];
    for (int i = 0; i < b->batch && i < 4096; i++)
        ids[i] = (uint64_t)i;
    struct dt_forward_ctx ctx = {.training = true, .seed = 1, .sample_ids = ids};
    int runs = b->repeats < 5 ? b->repeats : 5;
    double *t = malloc((size_t)(runs + 1) * sizeof *t);
    for (int r = 0; r <= runs; r++) { /* the first run warms up (allocations, Winograd packs) */
        double loss;
        int correct;
        double t0 = dt_now();
        dt_model_forward(m, b->x, b->batch, &ctx);
        dt_model_loss(m, b->y, b->batch, &loss, &correct);
        dt_model_backward(m, b->y, b->batch, 1.0f / (float)b->batch);
        t[r] = dt_now() - t0;
    }
    double s = dt_bench_median(t + 1, runs);
    free(t);
    dt_model_free(m);
    return s;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "configs/cifar10-resnet20.cfg";
    int repeats = argc > 2 ? atoi(argv[2]) : 20;
    int threads = argc > 3 ? atoi(argv[3]) : 1;
    if (repeats < 1 || threads < 1) {
        fprintf(stderr, "usage: augment [config] [repeats >= 1] [threads >= 1]\n");
        return 2;
    }
    static struct dt_config cfg;
    if (dt_config_load(&cfg, path, NULL, 0)) {
        fprintf(stderr, "augment: %s\n", dt_last_error());
        return 2;
    }
    if (cfg.data.nmean == DT_CONFIG_AUTO || cfg.data.nstd == DT_CONFIG_AUTO)
        cfg.data.nmean = cfg.data.nstd = 0; /* the statistics do not change the cost */
    dt_nn_set_threads(threads);
    struct dt_dataset d = {.n = N, .c = C, .h = H, .w = W, .classes = 10};
    d.x = dt_alloc((size_t)N * C * H * W, 1);
    d.y = dt_alloc(N, 1);
    struct bench b = {.cfg = &cfg, .d = &d, .batch = cfg.train.batch_size, .repeats = repeats};
    if (b.batch > N / 2)
        b.batch = N / 2;
    b.idx = dt_alloc(N, sizeof *b.idx);
    b.x = dt_alloc((size_t)b.batch * C * H * W, sizeof(float));
    b.y = dt_alloc((size_t)b.batch, 1);
    struct dt_rng r;
    dt_rng_init(&r, 42);
    for (size_t i = 0; i < (size_t)N * C * H * W; i++)
        d.x[i] = (uint8_t)dt_rng_next(&r);
    for (int i = 0; i < N; i++) {
        d.y[i] = (uint8_t)(i % 10);
        b.idx[i] = (uint32_t)dt_rng_below(&r, N);
    }

    struct dt_augment_opts base = cfg.data.augment, on[7];
    for (int i = 0; i < 7; i++)
        on[i] = base;
    on[0].resized_crop = true;
    on[1].rotate = 15;
    on[2].brightness = 0.4f;
    on[3].contrast = 0.4f;
    on[4].saturation = 0.4f;
    on[5].erase = 1.0f;
    on[6].resized_crop = true;
    on[6].rotate = 15;
    on[6].brightness = on[6].contrast = on[6].saturation = 0.4f;
    on[6].erase = 0.5f;
    const char *names[] = {"resized_crop",   "rotate 15", "brightness 0.4", "contrast 0.4",
                           "saturation 0.4", "erase 1.0", "all (erase 0.5)"};

    double step = time_step(&b);
    printf("# %s: batch %d, %d thread%s, %d repeats; step (forward+loss+backward) %.1f ms\n", path,
           b.batch, threads, threads == 1 ? "" : "s", repeats, step * 1e3);
    printf("%-28s %12s %12s %10s\n", "batch assembly", "us/sample", "ms/batch", "% of step");
    struct row {
        const char *name;
        const struct dt_augment_opts *aug;
        int augment;
    } rows[9] = {{"plain (evaluation)", NULL, 0}, {"config's crop + flip", NULL, 1}};
    for (int i = 0; i < 7; i++)
        rows[i + 2] = (struct row){names[i], &on[i], 1};
    for (int i = 0; i < 9; i++) {
        double s = time_batch(&b, rows[i].aug, rows[i].augment);
        printf("%-28s %12.2f %12.3f %9.2f%%\n", rows[i].name, s * 1e6 / b.batch, s * 1e3,
               100.0 * s / step);
    }
    dt_free(d.x);
    dt_free(d.y);
    dt_free(b.idx);
    dt_free(b.x);
    dt_free(b.y);
    dt_config_free(&cfg);
    return 0;
}

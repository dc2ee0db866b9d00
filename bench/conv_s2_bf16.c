/* The stride-2 conv2d layers of ResNet-20 (its downsampling 3x3 convs and 1x1 projections, on
 * CIFAR-10's 32x32 and on Fashion-MNIST's 28x28) in a bf16 model: the tile path
 * (nn/kernels/bf16/conv_s2_bf16.h, parity planes) against the emulated path (the layer's fp32
 * algorithm on bf16-rounded copies, what these layers ran before) and fp32, forward and
 * backward (both gradients) of one batch:
 *
 *   make build/bench/conv_s2_bf16 && ./build/bench/conv_s2_bf16 [repeats] [batch] [filter]
 *
 * (filter: only the layers whose name contains it, e.g. "proj").
 * Times are this thread's CPU time (CLOCK_THREAD_CPUTIME_ID), one thread, medians of
 * `repeats`: on a machine shared with other jobs, CPU time is far steadier than wall time
 * (cache contention still shows). The tile path needs AMX; elsewhere it runs the plain-C
 * tiles, which are for testing and far slower. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nn/kernels/isa.h"
#include "nn/layers.h"
#include "nn/model.h"
#include "nn/precision.h"

static double thread_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median forward and backward ms of one conv2d layer (kernel k, stride 2, pad k / 2) on
 * `in`, `out` channels, in `precision` on bf16 path p. */
static void time_layer(struct dt_shape in, int out, int k, enum dt_precision precision,
                       enum dt_bf16_path p, int repeats, int batch, double *fwd, double *bwd)
{
    struct dt_layer_spec spec = {.type = "conv2d",
                                 .out_channels = out,
                                 .kernel = k,
                                 .stride = 2,
                                 .padding = k / 2,
                                 .bias = false};
    struct dt_model_options opt = {.fusions = DT_FUSE_ALL, .precision = precision};
    struct dt_model *m;
    enum dt_bf16_path was = dt_isa_force_bf16_path(p);
    if (dt_model_build_with(&m, &spec, 1, in, batch, DT_LOSS_NLL, 1, &opt) < 0) {
        fprintf(stderr, "conv_s2_bf16: cannot build the layer\n");
        exit(1);
    }
    dt_isa_force_bf16_path(was);
    struct dt_layer *l = m->layers[0];
    size_t nin = (size_t)batch * in.c * in.h * in.w;
    size_t nout = (size_t)batch * l->out.c * l->out.h * l->out.w;
    float *x = malloc(nin * 4), *dx = malloc(nin * 4), *y = malloc(nout * 4);
    float *dy = malloc(nout * 4);
    for (size_t i = 0; i < nin; i++)
        x[i] = (float)sin((double)i);
    for (size_t i = 0; i < nout; i++)
        dy[i] = (float)cos((double)i);
    double *tf = malloc(repeats * sizeof *tf), *tb = malloc(repeats * sizeof *tb);
    struct dt_layer_fwd fc = {.run = {.training = true}};
    struct dt_layer_bwd bc = {0};
    for (int r = -1; r < repeats; r++) { /* one warm-up */
        double t0 = thread_seconds();
        l->kind->ops->forward(l, x, y, batch, &fc);
        double t1 = thread_seconds();
        l->kind->ops->backward(l, x, y, dy, dx, batch, &bc);
        double t2 = thread_seconds();
        if (r >= 0)
            tf[r] = (t1 - t0) * 1e3, tb[r] = (t2 - t1) * 1e3;
    }
    qsort(tf, repeats, sizeof *tf, cmp_double);
    qsort(tb, repeats, sizeof *tb, cmp_double);
    *fwd = tf[repeats / 2];
    *bwd = tb[repeats / 2];
    free(tf), free(tb), free(x), free(dx), free(y), free(dy);
    dt_model_free(m);
}

int main(int argc, char **argv)
{
    int repeats = argc > 1 ? atoi(argv[1]) : 5, batch = argc > 2 ? atoi(argv[2]) : 128;
    if (repeats < 1 || batch < 1) {
        fprintf(stderr, "usage: conv_s2_bf16 [repeats >= 1] [batch >= 1]\n");
        return 2;
    }
    dt_nn_set_threads(1);
    const char *why;
    enum dt_bf16_path tiles =
        dt_bf16_path_available(DT_BF16_AMX, &why) ? DT_BF16_AMX : DT_BF16_CTILE;
    static const struct {
        const char *name;
        struct dt_shape in;
        int out, k;
    } shapes[] = {
        {"ResNet-20 stage 2 conv 3x3/2", {16, 32, 32}, 32, 3},
        {"ResNet-20 stage 2 proj 1x1/2", {16, 32, 32}, 32, 1},
        {"ResNet-20 stage 3 conv 3x3/2", {32, 16, 16}, 64, 3},
        {"ResNet-20 stage 3 proj 1x1/2", {32, 16, 16}, 64, 1},
        {"fashion stage 2 conv 28->14", {16, 28, 28}, 32, 3},
        {"fashion stage 3 conv 14->7", {32, 14, 14}, 64, 3},
        {"fashion stage 3 proj 14->7", {32, 14, 14}, 64, 1},
    };
    printf("batch %d, %d repeats, bf16 tiles on %s; ms of thread CPU time (medians)\n", batch,
           repeats, dt_bf16_path_name(tiles));
    printf("%-30s %15s %15s %15s %11s\n", "layer", "fp32 fwd/bwd", "emulated", "tiles",
           "x emulated");
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        if (argc > 3 && !strstr(shapes[i].name, argv[3]))
            continue;
        double f32f, f32b, ef, eb, tf, tb;
        time_layer(shapes[i].in, shapes[i].out, shapes[i].k, DT_PRECISION_FP32, DT_BF16_REFERENCE,
                   repeats, batch, &f32f, &f32b);
        time_layer(shapes[i].in, shapes[i].out, shapes[i].k, DT_PRECISION_BF16, DT_BF16_REFERENCE,
                   repeats, batch, &ef, &eb);
        time_layer(shapes[i].in, shapes[i].out, shapes[i].k, DT_PRECISION_BF16, tiles, repeats,
                   batch, &tf, &tb);
        printf("%-30s %7.2f/%7.2f %7.2f/%7.2f %7.2f/%7.2f %5.2f/%5.2f\n", shapes[i].name, f32f,
               f32b, ef, eb, tf, tb, ef / tf, eb / tb);
    }
    return 0;
}

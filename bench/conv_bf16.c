/* bf16 convolution forward (nn/kernels/bf16/conv_bf16.h) against dtrain's fp32 kernels on the
 * reference models' stride-1 shapes, one batch at a time, one thread unless OMP_NUM_THREADS
 * says otherwise:
 *
 *   make build/bench/conv_bf16 && ./build/bench/conv_bf16 [repeats] [batch] [c]
 *
 * The layout passes ("in", "out") are the ones the layers run on this path (on amx the
 * AVX-512 builds of conv_bf16_layout.isa.c), into buffers zeroed once as the layers' are;
 * a third argument `c` runs the plain-C passes instead, to compare the two alternately.
 *
 * fp32 is the layer's choice between Winograd and direct (dt_conv_winograd_preferred). bf16 is
 * timed in three parts: "in", the conversion to channel-pair planes (a producer that stored
 * bf16 pair planes would fuse it), "tiles", the tile kernel on the best path this CPU has
 * (AMX; elsewhere the reference, which is for testing and far slower), and "out", the
 * compaction of the padded-width output to NCHW (a consumer reading that layout skips it).
 * "tiles x" is fp32 over the tiles alone, "all x" over all three parts. Weights are packed
 * once, outside the timing, as the optimizer step would. Medians of `repeats` runs.
 * Under each shape: the forward product in the channels-last layout (its "in" a transpose
 * that a channels-last network would not need; its output stays channels-last), then the two
 * backward products the same way ("in" = their operand layouts:
 * dY rows and the position-pair copies of X for the weight gradient, dY in pair planes for
 * the input gradient, which runs through the forward kernel; its compaction is not timed). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/bench/bench.h"
#include "nn/kernels/fp32/conv_direct.h"
#include "nn/kernels/fp32/conv_winograd.h"
#include "nn/kernels/bf16/conv_bf16.h"
#include "util/clock.h"
#include "util/cpu.h"

/* bytes of zero (64-byte aligned), for the buffers the layout passes write only the image of */
static void *zeroed(size_t bytes)
{
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    memset(p, 0, (bytes + 63) / 64 * 64);
    return p;
}

static float *floats(size_t n)
{
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    for (size_t i = 0; i < n; i++)
        p[i] = (float)rand() / RAND_MAX - 0.5f;
    return p;
}

int main(int argc, char **argv)
{
    int repeats = argc > 1 ? atoi(argv[1]) : 5, batch = argc > 2 ? atoi(argv[2]) : 128;
    int threads = omp_get_max_threads();
    enum dt_bf16_path path = dt_isa_bf16_path();
    /* The plain C runs on every path but amx (dt_conv_bf16_layout_on). */
    const struct dt_conv_bf16_layout *layout =
        dt_conv_bf16_layout_on(argc > 3 && strcmp(argv[3], "c") == 0 ? DT_BF16_CTILE : path);
    struct dt_cpu_features f;
    dt_cpu_features_read(&f);
    printf("# batch %d, %d thread%s, bf16 path %s (avx512 %d, avx512_bf16 %d, amx_bf16 %d), "
           "layout passes: %s\n",
           batch, threads, threads == 1 ? "" : "s", dt_bf16_path_name(path), f.avx512,
           f.avx512_bf16, f.amx_bf16, layout->name);
    printf("%-24s %9s %9s %9s %9s %8s %8s %6s\n", "shape", "fp32 ms", "in ms", "tiles ms", "out ms",
           "tiles x", "all x", "GF/s");
    static const struct {
        const char *name;
        struct dt_conv_shape s;
    } shapes[] = {
        {"ConvNet 1->16 28x28", {0, 1, 28, 28, 16, 3, 3, 1, 0}},
        {"ConvNet 16->32 26x26", {0, 16, 26, 26, 32, 3, 3, 1, 0}},
        {"ResNet 3->16 32x32", {0, 3, 32, 32, 16, 3, 3, 1, 1}},
        {"ResNet 16->16 32x32", {0, 16, 32, 32, 16, 3, 3, 1, 1}},
        {"ResNet 32->32 16x16", {0, 32, 16, 16, 32, 3, 3, 1, 1}},
        {"ResNet 64->64 8x8", {0, 64, 8, 8, 64, 3, 3, 1, 1}},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        struct dt_conv_shape s = shapes[i].s;
        s.n = batch;
        struct dt_conv_bf16_geom g;
        if (dt_conv_bf16_geometry(&s, &g))
            return 1;
        size_t sx = (size_t)s.c * s.h * s.w, sy = (size_t)s.k * g.oh * g.ow;
        float *x = floats(sx * batch), *w = floats((size_t)s.k * s.c * 9), *b = floats(s.k);
        float *y = floats(sy * batch);
        bool wino = dt_conv_winograd_preferred(&s);
        size_t ns = wino ? dt_conv_winograd_scratch_floats(&s, threads)
                         : dt_conv_direct_scratch_floats(&s, threads);
        float *scratch = floats(ns);
        dt_bf16 *xv = zeroed(g.xv * 2 * batch);
        float *yq = floats(g.yq * batch);
        dt_bf16 *wp = aligned_alloc(64, (g.wpack * 2 + 63) / 64 * 64);
        dt_conv_bf16_pack_weights(&s, &g, w, wp);
        double t32[64], tpad[64], t16[64], tout[64];
        for (int r = 0; r < repeats && r < 64; r++) {
            double t0 = dt_now();
            int rc = wino ? dt_conv_winograd_forward(&s, x, w, b, y, 0, scratch, ns, threads)
                          : dt_conv_direct_forward(&s, x, w, b, y, 0, scratch, ns, threads);
            double t1 = dt_now();
#pragma omp parallel for
            for (int n = 0; n < batch; n++)
                layout->pad_input_image(&s, &g, x + n * sx, false, NULL, xv + n * g.xv);
            double t2 = dt_now();
#pragma omp parallel for
            for (int n = 0; n < batch; n++)
                dt_conv_bf16_forward_on(path, &s, &g, xv + n * g.xv, wp, yq + n * g.yq);
            double t3 = dt_now();
#pragma omp parallel for
            for (int n = 0; n < batch; n++)
                layout->compact(&s, &g, yq + n * g.yq, b, false, true, DT_STORE_ROUNDED,
                                y + n * sy);
            double t4 = dt_now();
            if (rc)
                return 1;
            t32[r] = t1 - t0, tpad[r] = t2 - t1, t16[r] = t3 - t2, tout[r] = t4 - t3;
        }
        int n = repeats < 64 ? repeats : 64;
        double m32 = dt_bench_median(t32, n), mpad = dt_bench_median(tpad, n);
        double m16 = dt_bench_median(t16, n), mout = dt_bench_median(tout, n);
        double flops = 2.0 * batch * s.k * g.oh * g.ow * s.c * 9;
        printf("%-24s %9.2f %9.2f %9.2f %9.2f %7.1fx %7.1fx %6.0f\n", shapes[i].name, 1e3 * m32,
               1e3 * mpad, 1e3 * m16, 1e3 * mout, m32 / m16, m32 / (mpad + m16 + mout),
               flops / m16 / 1e9);
        /* Backward: the weight gradient over the batch and the input gradient through the
         * forward kernel, each against the fp32 layer's kernel; operand layouts timed apart. */
        float *dy = floats(sy * batch), *dx = floats(sx * batch),
              *dw = floats((size_t)s.k * s.c * 9);
        float *db = floats(s.k);
        struct dt_conv_shape t;
        struct dt_conv_bf16_geom gt;
        dt_conv_bf16_input_grad_shape(&s, &t);
        if (dt_conv_bf16_geometry(&t, &gt))
            return 1;
        dt_bf16 *dyq = zeroed(g.dyq * 2 * batch), *ev = zeroed(g.xt * 2 * batch);
        dt_bf16 *od = zeroed(g.xt * 2 * batch), *dyv = zeroed(gt.xv * 2 * batch);
        dt_bf16 *wt = aligned_alloc(64, (gt.wpack * 2 + 63) / 64 * 64);
        float *dwt = floats(g.dwt), *dxq = floats(gt.yq * batch);
        dt_conv_bf16_pack_weights_input_grad(&t, &gt, w, wt);
        dt_bf16 *xc = aligned_alloc(64, (g.xv * 2 * batch + 63) / 64 * 64);
        dt_bf16 *wcl = aligned_alloc(64, (g.wpack * 2 + 63) / 64 * 64);
        float *yc = floats(g.ycl * batch);
        dt_conv_bf16_pack_weights_cl(&s, &g, w, wcl);
        double w32[64], wlay[64], w16[64], i32[64], ilay[64], i16[64], clay[64], c16[64];
        for (int r = 0; r < n; r++) {
            double t0 = dt_now();
            int rc = wino
                         ? dt_conv_winograd_backward_weight(&s, x, dy, dw, db, scratch, ns, threads)
                         : dt_conv_direct_backward_weight(&s, x, dy, dw, db, scratch, ns, threads);
            double t1 = dt_now();
#pragma omp parallel for
            for (int i = 0; i < batch; i++) {
                layout->dy_rows_image(&s, &g, dy + i * sy, dyq + i * g.dyq);
                layout->position_pairs_image(&s, &g, x + i * sx, false, NULL, ev + i * g.xt,
                                             od + i * g.xt);
            }
            double t2 = dt_now();
            dt_conv_bf16_weight_grad_on(path, &s, &g, batch, dyq, ev, od, dwt, false);
            double t3 = dt_now();
            rc |= wino ? dt_conv_winograd_backward_input(&s, dy, w, dx, scratch, ns, threads)
                       : dt_conv_direct_backward_input(&s, dy, w, dx, scratch, ns, threads);
            double t4 = dt_now();
#pragma omp parallel for
            for (int i = 0; i < batch; i++)
                layout->pad_input_image(&t, &gt, dy + i * sy, false, NULL, dyv + i * gt.xv);
            double t5 = dt_now();
#pragma omp parallel for
            for (int i = 0; i < batch; i++)
                dt_conv_bf16_forward_on(path, &t, &gt, dyv + i * gt.xv, wt, dxq + i * gt.yq);
            double t6 = dt_now();
#pragma omp parallel for
            for (int i = 0; i < batch; i++)
                dt_conv_bf16_pad_input_cl(&s, &g, x + i * sx, xc + i * g.xv);
            double t7 = dt_now();
#pragma omp parallel for
            for (int i = 0; i < batch; i++)
                dt_conv_bf16_forward_cl_on(path, &s, &g, xc + i * g.xv, wcl, yc + i * g.ycl);
            double t8 = dt_now();
            clay[r] = t7 - t6, c16[r] = t8 - t7;
            if (rc)
                return 1;
            w32[r] = t1 - t0, wlay[r] = t2 - t1, w16[r] = t3 - t2;
            i32[r] = t4 - t3, ilay[r] = t5 - t4, i16[r] = t6 - t5;
        }
        double a = m32, bb = dt_bench_median(clay, n), c = dt_bench_median(c16, n);
        printf("  %-22s %9.2f %9.2f %9.2f %9s %7.1fx %7.1fx %6.0f\n", "forward, channels-last",
               1e3 * a, 1e3 * bb, 1e3 * c, "", a / c, a / (bb + c), flops / c / 1e9);
        a = dt_bench_median(w32, n), bb = dt_bench_median(wlay, n), c = dt_bench_median(w16, n);
        printf("  %-22s %9.2f %9.2f %9.2f %9s %7.1fx %7.1fx\n", "weight gradient", 1e3 * a,
               1e3 * bb, 1e3 * c, "", a / c, a / (bb + c));
        a = dt_bench_median(i32, n), bb = dt_bench_median(ilay, n), c = dt_bench_median(i16, n);
        printf("  %-22s %9.2f %9.2f %9.2f %9s %7.1fx %7.1fx\n", "input gradient", 1e3 * a, 1e3 * bb,
               1e3 * c, "", a / c, a / (bb + c));
        free(dy), free(dx), free(dw), free(db), free(dyq), free(ev), free(od), free(dyv);
        free(wt), free(dwt), free(dxq), free(xc), free(wcl), free(yc);
        free(x), free(w), free(b), free(y), free(scratch), free(xv), free(wp), free(yq);
    }
    return 0;
}

/* Benchmark: nn/kernels/fp32/conv_direct and nn/kernels/fp32/conv_winograd kernels against im2col +
 * OpenBLAS sgemm, side by side in one run.
 *
 * Times forward, weight gradient and input gradient of the reference models' convolutions
 * (ConvNet at batch 128, CIFAR CNN at batch 32) with 1 and 2 threads and prints the median of
 * several repeats in ms and GFLOP/s (2 * N * K * C * kh * kw * OH * OW per product: for
 * Winograd, which does fewer, the direct-convolution equivalent). All sides parallelise over
 * samples with OpenMP; OpenBLAS runs single-threaded inside each thread, the fastest way to use
 * it at these small per-sample GEMMs. The im2col side includes its im2col/col2im, bias, ReLU
 * and partial-sum reduction, which a layer would also have to do. Winograd runs only where
 * dt_conv_winograd_supported() (3x3, stride 1, pad <= 1); "pref" marks the shapes the conv2d
 * layer gives it (dt_conv_winograd_preferred). Each result is checked against im2col's, so a
 * wrong fast kernel cannot post a good time.
 *
 * Build and run (from the repository root): make -C bench && ./build/bench/conv_kernels [repeats]
 * [name]; with a name, only the cases whose names contain it (to profile one under perf).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <omp.h>

#include "cmd/bench/bench.h"
#include "nn/kernels/fp32/conv_direct.h"
#include "nn/kernels/isa.h"
#include "nn/kernels/fp32/conv_winograd.h"
#include "util/clock.h"
#include "util/err.h"

struct bench_case {
    const char *name;
    struct dt_conv_shape s;
};

static const struct bench_case cases[] = {
    {"convnet.conv1 1->16 28x28", {128, 1, 28, 28, 16, 3, 3, 1, 0}},
    {"convnet.conv2 16->32 26x26", {128, 16, 26, 26, 32, 3, 3, 1, 0}},
    {"cifar.conv1 3->32 32x32 p1", {32, 3, 32, 32, 32, 3, 3, 1, 1}},
    {"cifar.conv2 32->64 16x16 p1", {32, 32, 16, 16, 64, 3, 3, 1, 1}},
    {"resnet20.stage1 16->16 32x32 p1", {128, 16, 32, 32, 16, 3, 3, 1, 1}},
    {"resnet20.stage3 64->64 8x8 p1", {128, 64, 8, 8, 64, 3, 3, 1, 1}},
    {"resnet20.proj1 16->32 16x16 1x1", {128, 16, 16, 16, 32, 1, 1, 1, 0}},
    {"resnet20.proj2 32->64 8x8 1x1", {128, 32, 8, 8, 64, 1, 1, 1, 0}},
};

struct bufs {
    struct dt_conv_shape s;
    int oh, ow, taps, pix;
    size_t nx, nw, ny;
    float *x, *w, *b, *dy;
    float *y[3], *dw[3], *db[3], *dx[3]; /* [0] direct, [1] im2col, [2] Winograd */
    float *scratch, *wscratch;
    size_t nscratch, nwscratch;
    float *col, *part; /* per thread: column matrix, partial dw + db */
    int threads;
};

static float *alloc_floats(size_t n)
{
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        p[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    return p;
}

static void im2col(const struct bufs *B, const float *x, float *col)
{
    const struct dt_conv_shape *s = &B->s;
    for (int c = 0; c < s->c; c++)
        for (int i = 0; i < s->kh; i++)
            for (int j = 0; j < s->kw; j++) {
                float *dst = col + (size_t)((c * s->kh + i) * s->kw + j) * B->pix;
                for (int r = 0; r < B->oh; r++) {
                    int xr = r + i - s->pad;
                    for (int q = 0; q < B->ow; q++) {
                        int xc = q + j - s->pad;
                        bool in = xr >= 0 && xr < s->h && xc >= 0 && xc < s->w;
                        dst[r * B->ow + q] = in ? x[((size_t)c * s->h + xr) * s->w + xc] : 0.0f;
                    }
                }
            }
}

static void col2im(const struct bufs *B, const float *col, float *x)
{
    const struct dt_conv_shape *s = &B->s;
    memset(x, 0, sizeof(float) * (size_t)s->c * s->h * s->w);
    for (int c = 0; c < s->c; c++)
        for (int i = 0; i < s->kh; i++)
            for (int j = 0; j < s->kw; j++) {
                const float *src = col + (size_t)((c * s->kh + i) * s->kw + j) * B->pix;
                for (int r = 0; r < B->oh; r++) {
                    int xr = r + i - s->pad;
                    if (xr < 0 || xr >= s->h)
                        continue;
                    for (int q = 0; q < B->ow; q++) {
                        int xc = q + j - s->pad;
                        if (xc >= 0 && xc < s->w)
                            x[((size_t)c * s->h + xr) * s->w + xc] += src[r * B->ow + q];
                    }
                }
            }
}

static void gemm_forward(struct bufs *B)
{
    const struct dt_conv_shape *s = &B->s;
#pragma omp parallel num_threads(B->threads)
    {
        float *col = B->col + (size_t)omp_get_thread_num() * B->taps * B->pix;
#pragma omp for schedule(static)
        for (int n = 0; n < s->n; n++) {
            float *y = B->y[1] + (size_t)n * s->k * B->pix;
            im2col(B, B->x + (size_t)n * s->c * s->h * s->w, col);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->k, B->pix, B->taps, 1.0f,
                        B->w, B->taps, col, B->pix, 0.0f, y, B->pix);
            for (int k = 0; k < s->k; k++)
                for (int p = 0; p < B->pix; p++) {
                    float v = y[k * B->pix + p] + B->b[k];
                    y[k * B->pix + p] = v > 0.0f ? v : 0.0f;
                }
        }
    }
}

static void gemm_backward_weight(struct bufs *B)
{
    const struct dt_conv_shape *s = &B->s;
    size_t nw = B->nw, stride = nw + (size_t)s->k;
#pragma omp parallel num_threads(B->threads)
    {
        int tid = omp_get_thread_num(), team = omp_get_num_threads();
        float *col = B->col + (size_t)tid * B->taps * B->pix;
        float *part = B->part + tid * stride;
        memset(part, 0, sizeof(float) * stride);
        for (int n = s->n * tid / team; n < s->n * (tid + 1) / team; n++) {
            const float *dy = B->dy + (size_t)n * s->k * B->pix;
            im2col(B, B->x + (size_t)n * s->c * s->h * s->w, col);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->k, B->taps, B->pix, 1.0f, dy,
                        B->pix, col, B->pix, 1.0f, part, B->taps);
            for (int k = 0; k < s->k; k++)
                for (int p = 0; p < B->pix; p++)
                    part[nw + k] += dy[k * B->pix + p];
        }
#pragma omp barrier
#pragma omp for schedule(static)
        for (size_t i = 0; i < stride; i++) {
            float sum = 0.0f;
            for (int t = 0; t < team; t++)
                sum += B->part[t * stride + i];
            if (i < nw)
                B->dw[1][i] += sum;
            else
                B->db[1][i - nw] += sum;
        }
    }
}

static void gemm_backward_input(struct bufs *B)
{
    const struct dt_conv_shape *s = &B->s;
#pragma omp parallel num_threads(B->threads)
    {
        float *col = B->col + (size_t)omp_get_thread_num() * B->taps * B->pix;
#pragma omp for schedule(static)
        for (int n = 0; n < s->n; n++) {
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, B->taps, B->pix, s->k, 1.0f, B->w,
                        B->taps, B->dy + (size_t)n * s->k * B->pix, B->pix, 0.0f, col, B->pix);
            col2im(B, col, B->dx[1] + (size_t)n * s->c * s->h * s->w);
        }
    }
}

/* A kernel that refuses its arguments ends the benchmark with the kernel's own message. */
static void must(int rc)
{
    if (rc) {
        fprintf(stderr, "%s\n", dt_last_error());
        exit(1);
    }
}

static void direct_forward(struct bufs *B)
{
    must(dt_conv_direct_forward(&B->s, B->x, B->w, B->b, B->y[0], 1, B->scratch, B->nscratch,
                                B->threads));
}

static void direct_backward_weight(struct bufs *B)
{
    must(dt_conv_direct_backward_weight(&B->s, B->x, B->dy, B->dw[0], B->db[0], B->scratch,
                                        B->nscratch, B->threads));
}

static void direct_backward_input(struct bufs *B)
{
    must(dt_conv_direct_backward_input(&B->s, B->dy, B->w, B->dx[0], B->scratch, B->nscratch,
                                       B->threads));
}

static void winograd_forward(struct bufs *B)
{
    must(dt_conv_winograd_forward(&B->s, B->x, B->w, B->b, B->y[2], 1, B->wscratch, B->nwscratch,
                                  B->threads));
}

static void winograd_backward_weight(struct bufs *B)
{
    must(dt_conv_winograd_backward_weight(&B->s, B->x, B->dy, B->dw[2], B->db[2], B->wscratch,
                                          B->nwscratch, B->threads));
}

static void winograd_backward_input(struct bufs *B)
{
    must(dt_conv_winograd_backward_input(&B->s, B->dy, B->w, B->dx[2], B->wscratch, B->nwscratch,
                                         B->threads));
}

struct timing {
    double median, best; /* ms */
};

static struct timing summarize(const double *t, int repeats)
{
    double best = t[0];
    for (int r = 1; r < repeats; r++)
        best = fmin(best, t[r]);
    return (struct timing){dt_bench_median(t, repeats), best};
}

/* Times the implementations alternately, so a noisy neighbour slows all alike; fn[i] may be
 * NULL (not run). */
static void time_all(void (*fn[3])(struct bufs *), struct bufs *B, int repeats, struct timing *t)
{
    double ms[3][64];
    for (int i = 0; i < 3; i++) /* warm-up: page faults, caches, thread pool */
        if (fn[i])
            fn[i](B);
    for (int r = 0; r < repeats; r++)
        for (int i = 0; i < 3; i++) {
            if (!fn[i])
                continue;
            double t0 = dt_now();
            fn[i](B);
            ms[i][r] = (dt_now() - t0) * 1e3;
        }
    for (int i = 0; i < 3; i++)
        if (fn[i])
            t[i] = summarize(ms[i], repeats);
}

/* Largest |a - b| relative to the largest |b|. */
static double rel_diff(const float *a, const float *b, size_t n)
{
    double d = 0.0, m = 1e-30;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return d / m;
}

static void setup(struct bufs *B, const struct dt_conv_shape *s, int threads)
{
    memset(B, 0, sizeof *B);
    B->s = *s;
    B->threads = threads;
    B->oh = dt_conv_direct_out_h(s);
    B->ow = dt_conv_direct_out_w(s);
    B->pix = B->oh * B->ow;
    B->taps = s->c * s->kh * s->kw;
    B->nx = (size_t)s->n * s->c * s->h * s->w;
    B->nw = (size_t)s->k * B->taps;
    B->ny = (size_t)s->n * s->k * B->pix;
    B->x = alloc_floats(B->nx);
    B->w = alloc_floats(B->nw);
    B->b = alloc_floats((size_t)s->k);
    B->dy = alloc_floats(B->ny);
    for (int i = 0; i < 3; i++) {
        B->y[i] = alloc_floats(B->ny);
        B->dw[i] = alloc_floats(B->nw);
        B->db[i] = alloc_floats((size_t)s->k);
        B->dx[i] = alloc_floats(B->nx);
    }
    B->nscratch = dt_conv_direct_scratch_floats(s, threads);
    B->scratch = alloc_floats(B->nscratch);
    B->nwscratch = dt_conv_winograd_scratch_floats(s, threads);
    B->wscratch = B->nwscratch ? alloc_floats(B->nwscratch) : NULL;
    B->col = alloc_floats((size_t)threads * B->taps * B->pix);
    B->part = alloc_floats((size_t)threads * (B->nw + s->k));
}

static void teardown(struct bufs *B)
{
    free(B->x), free(B->w), free(B->b), free(B->dy), free(B->scratch), free(B->col);
    free(B->part), free(B->wscratch);
    for (int i = 0; i < 3; i++)
        free(B->y[i]), free(B->dw[i]), free(B->db[i]), free(B->dx[i]);
}

int main(int argc, char **argv)
{
    int repeats = argc > 1 ? atoi(argv[1]) : 9;
    const char *only = argc > 2 ? argv[2] : "";
    if (repeats < 1 || repeats > 64 || argc > 3) {
        fprintf(stderr, "usage: conv_kernels [repeats 1..64] [case name part]\n");
        return 2;
    }
    /* OpenBLAS would start its own threads under a 1-thread OpenMP team (not "in parallel") */
    openblas_set_num_threads(1);
    printf("direct kernels: %s path (DTRAIN_ISA=%s); ms and GF/s: median of %d repeats, best: GF/s "
           "of the fastest; "
           "GFLOP = 2*N*K*C*kh*kw*OH*OW / time (Winograd: the direct equivalent)\n",
           dt_conv_direct_uses_simd() ? "AVX-512" : "portable", dt_isa_name(), repeats);
    printf("%-28s %3s %-7s %20s   %20s   %20s %7s %7s %8s\n", "", "", "", "---- direct ----",
           "---- winograd ----", "--- im2col+sgemm ---", "", "", "");
    printf("%-28s %3s %-7s %6s %6s %6s   %6s %6s %6s   %6s %6s %6s %7s %7s %8s %8s\n", "conv",
           "thr", "product", "ms", "GF/s", "best", "ms", "GF/s", "best", "ms", "GF/s", "best",
           "d/gemm", "w/d", "d-diff", "w-diff");
    for (int threads = 1; threads <= 2; threads++) {
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            if (!strstr(cases[c].name, only))
                continue;
            struct bufs B;
            setup(&B, &cases[c].s, threads);
            bool wino = B.nwscratch > 0;
            char name[64];
            snprintf(name, sizeof name, "%s%s", cases[c].name,
                     dt_conv_winograd_preferred(&cases[c].s) ? " pref" : "");
            double gflop = 2.0 * B.ny * B.taps * 1e-9;
            struct {
                const char *name;
                void (*fn[3])(struct bufs *);
            } ops[] = {{"forward", {direct_forward, gemm_forward, wino ? winograd_forward : NULL}},
                       {"bwd-w",
                        {direct_backward_weight, gemm_backward_weight,
                         wino ? winograd_backward_weight : NULL}},
                       {"bwd-in",
                        {direct_backward_input, gemm_backward_input,
                         wino ? winograd_backward_input : NULL}}};
            for (int o = 0; o < 3; o++) {
                struct timing t[3] = {{0, 0}, {0, 0}, {0, 0}};
                time_all(ops[o].fn, &B, repeats, t);
                double diff = 0, wdiff = 0;
                if (o == 0) {
                    diff = rel_diff(B.y[0], B.y[1], B.ny);
                    wdiff = wino ? rel_diff(B.y[2], B.y[1], B.ny) : 0;
                } else if (o == 1) {
                    /* all accumulated the same number of times from different starts */
                    for (int i = 0; i < 3; i++) {
                        memset(B.dw[i], 0, sizeof(float) * B.nw);
                        if (ops[o].fn[i])
                            ops[o].fn[i](&B);
                    }
                    diff = rel_diff(B.dw[0], B.dw[1], B.nw);
                    wdiff = wino ? rel_diff(B.dw[2], B.dw[1], B.nw) : 0;
                } else {
                    diff = rel_diff(B.dx[0], B.dx[1], B.nx);
                    wdiff = wino ? rel_diff(B.dx[2], B.dx[1], B.nx) : 0;
                }
                char w[3][16];
                if (wino) {
                    snprintf(w[0], sizeof w[0], "%6.2f", t[2].median);
                    snprintf(w[1], sizeof w[1], "%6.1f", gflop / t[2].median * 1e3);
                    snprintf(w[2], sizeof w[2], "%6.1f", gflop / t[2].best * 1e3);
                } else {
                    for (int i = 0; i < 3; i++)
                        snprintf(w[i], sizeof w[i], "%6s", "-");
                }
                char ratio[16] = "      -";
                if (wino)
                    snprintf(ratio, sizeof ratio, "%6.2fx", t[0].median / t[2].median);
                printf("%-28s %3d %-7s %6.2f %6.1f %6.1f   %s %s %s   %6.2f %6.1f %6.1f %6.2fx %s "
                       "%8.1e %8.1e\n",
                       name, threads, ops[o].name, t[0].median, gflop / t[0].median * 1e3,
                       gflop / t[0].best * 1e3, w[0], w[1], w[2], t[1].median,
                       gflop / t[1].median * 1e3, gflop / t[1].best * 1e3,
                       t[1].median / t[0].median, ratio, diff, wdiff);
                fflush(stdout);
            }
            teardown(&B);
        }
    }
    return 0;
}

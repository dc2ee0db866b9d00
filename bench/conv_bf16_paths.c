/* The bf16 conv products on every hardware bf16 path this CPU has (avx512bf16: VDPBF16PS,
 * amx: TDPBF16PS) against dtrain's fp32 kernels, and the instruction rates that bound them:
 *
 *   make build/bench/conv_bf16_paths && OMP_NUM_THREADS=1 ./build/bench/conv_bf16_paths [rounds]
 * [batch]
 *
 * Times are thread CPU time (CLOCK_THREAD_CPUTIME_ID), the minimum over the rounds, the kernels
 * alternated within each round: a core shared with other jobs then costs little accuracy (time
 * slices are not counted; shared caches still are). One thread: the kernels are called outside
 * any parallel region with OMP_NUM_THREADS=1. Only the tile kernels are timed, not the layout
 * passes (bench/conv_bf16.c times those); fp32 is the layer's kernel (Winograd or direct).
 *
 * First line: a register-only loop of VDPBF16PS zmm and one of VFMADD231PS zmm (16 independent
 * accumulators each), ns per instruction. One VDPBF16PS does 64 flops, one FMA 32: the ratio
 * says how fast bf16 products can be against fp32 on this CPU at best. "rate %" is the
 * avx512bf16 kernel's VDPBF16PS count (without the zero groups it skips) over its time, as a
 * share of the register-only rate. */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "nn/kernels/bf16/conv_bf16.h"
#include "nn/kernels/fp32/conv_direct.h"
#include "nn/kernels/fp32/conv_winograd.h"

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void *alloc(size_t bytes)
{
    return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

static float *floats(size_t n)
{
    float *p = alloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = (float)rand() / RAND_MAX - 0.5f;
    return p;
}

/* ns per instruction of `count` VDPBF16PS (fma false) or VFMADD231PS zmm on 16 accumulators. */
__attribute__((target("avx512f,avx512bf16"), noinline)) static double register_rate(long count,
                                                                                    bool fma)
{
    __m512 acc[16], a = _mm512_set1_ps(1.0001f), b = _mm512_set1_ps(1e-3f);
    for (int i = 0; i < 16; i++)
        acc[i] = _mm512_set1_ps((float)i);
    double t0 = cpu_now();
    for (long i = 0; i < count / 16; i++) {
        if (fma)
#pragma GCC unroll 16
            for (int j = 0; j < 16; j++)
                acc[j] = _mm512_fmadd_ps(a, b, acc[j]);
        else
#pragma GCC unroll 16
            for (int j = 0; j < 16; j++)
                acc[j] = _mm512_dpbf16_ps(acc[j], (__m512bh)a, (__m512bh)b);
        __asm__ volatile("" : "+v"(a), "+v"(b)); /* not hoisted: each iteration issues 16 */
    }
    double t = cpu_now() - t0;
    float sink = 0;
    for (int i = 0; i < 16; i++)
        sink += _mm512_reduce_add_ps(acc[i]);
    __asm__ volatile("" : : "x"(sink));
    return 1e9 * t / count;
}

static double least(double a, double b)
{
    return a < b ? a : b;
}

struct operands {
    struct dt_conv_shape s, t; /* t: the input gradient's convolution */
    struct dt_conv_bf16_geom g, gt;
    float *x, *w, *b, *y, *dy, *dx, *dw, *db, *scratch, *yq, *dwt, *dxq;
    size_t ns;
    bool wino;
    dt_bf16 *xv, *wp, *dyq, *even, *odd, *dyv, *wt;
};

static int prepare(struct operands *o, struct dt_conv_shape s)
{
    o->s = s;
    dt_conv_bf16_input_grad_shape(&s, &o->t);
    if (dt_conv_bf16_geometry(&s, &o->g) || dt_conv_bf16_geometry(&o->t, &o->gt))
        return -1;
    const struct dt_conv_bf16_geom *g = &o->g, *gt = &o->gt;
    size_t sx = (size_t)s.c * s.h * s.w, sy = (size_t)s.k * g->oh * g->ow, n = s.n;
    size_t nw = (size_t)s.k * s.c * s.kh * s.kw;
    o->x = floats(sx * n), o->w = floats(nw), o->b = floats(s.k), o->y = floats(sy * n);
    o->dy = floats(sy * n), o->dx = floats(sx * n), o->dw = floats(nw), o->db = floats(s.k);
    o->wino = dt_conv_winograd_preferred(&s);
    o->ns = o->wino ? dt_conv_winograd_scratch_floats(&s, 1) : dt_conv_direct_scratch_floats(&s, 1);
    o->scratch = floats(o->ns);
    o->yq = floats(g->yq * n), o->dwt = floats(g->dwt), o->dxq = floats(gt->yq * n);
    o->xv = alloc(g->xv * 2 * n), o->wp = alloc(g->wpack * 2), o->dyq = alloc(g->dyq * 2 * n);
    o->even = alloc(g->xt * 2 * n), o->odd = alloc(g->xt * 2 * n);
    o->dyv = alloc(gt->xv * 2 * n), o->wt = alloc(gt->wpack * 2);
    dt_conv_bf16_pack_weights(&s, g, o->w, o->wp);
    dt_conv_bf16_pack_weights_input_grad(&o->t, gt, o->w, o->wt);
    for (size_t i = 0; i < n; i++) {
        dt_conv_bf16_pad_input(&s, g, o->x + i * sx, o->xv + i * g->xv);
        dt_conv_bf16_dy_rows(&s, g, o->dy + i * sy, o->dyq + i * g->dyq);
        dt_conv_bf16_position_pairs(&s, g, o->x + i * sx, o->even + i * g->xt, o->odd + i * g->xt);
        dt_conv_bf16_pad_input(&o->t, gt, o->dy + i * sy, o->dyv + i * gt->xv);
    }
    return 0;
}

static void release(struct operands *o)
{
    void *p[] = {o->x,   o->w,   o->b,  o->y,  o->dy,  o->dx,   o->dw,  o->db,  o->scratch, o->yq,
                 o->dwt, o->dxq, o->xv, o->wp, o->dyq, o->even, o->odd, o->dyv, o->wt};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++)
        free(p[i]);
}

/* The three products of fp32 (path < 0) or bf16 path p, CPU seconds each, into t[3]. */
static void time_products(struct operands *o, int p, double t[3])
{
    const struct dt_conv_shape *s = &o->s;
    int n = s->n;
    double t0 = cpu_now();
    if (p < 0) {
        if (o->wino) {
            dt_conv_winograd_forward(s, o->x, o->w, o->b, o->y, 0, o->scratch, o->ns, 1);
            t[0] = cpu_now() - t0;
            dt_conv_winograd_backward_input(s, o->dy, o->w, o->dx, o->scratch, o->ns, 1);
            t[1] = cpu_now() - t0 - t[0];
            dt_conv_winograd_backward_weight(s, o->x, o->dy, o->dw, o->db, o->scratch, o->ns, 1);
        } else {
            dt_conv_direct_forward(s, o->x, o->w, o->b, o->y, 0, o->scratch, o->ns, 1);
            t[0] = cpu_now() - t0;
            dt_conv_direct_backward_input(s, o->dy, o->w, o->dx, o->scratch, o->ns, 1);
            t[1] = cpu_now() - t0 - t[0];
            dt_conv_direct_backward_weight(s, o->x, o->dy, o->dw, o->db, o->scratch, o->ns, 1);
        }
        t[2] = cpu_now() - t0 - t[0] - t[1];
        return;
    }
    enum dt_bf16_path path = (enum dt_bf16_path)p;
    for (int i = 0; i < n; i++)
        dt_conv_bf16_forward_on(path, s, &o->g, o->xv + i * o->g.xv, o->wp, o->yq + i * o->g.yq);
    t[0] = cpu_now() - t0;
    for (int i = 0; i < n; i++)
        dt_conv_bf16_forward_on(path, &o->t, &o->gt, o->dyv + i * o->gt.xv, o->wt,
                                o->dxq + i * o->gt.yq);
    t[1] = cpu_now() - t0 - t[0];
    dt_conv_bf16_weight_grad_on(path, s, &o->g, n, o->dyq, o->even, o->odd, o->dwt, false);
    t[2] = cpu_now() - t0 - t[0] - t[1];
}

/* VDPBF16PS a tile path issues for each product, zero groups included. */
static void instructions(const struct operands *o, double count[3])
{
    const struct dt_conv_shape *s = &o->s, *t = &o->t;
    const struct dt_conv_bf16_geom *g = &o->g, *gt = &o->gt;
    double per_step = 256.0 * s->n;
    count[0] = per_step * ((s->k + 15) / 16) * (g->qpad / 16) * (s->kh * s->kw * g->cpad / 32);
    count[1] = per_step * ((t->k + 15) / 16) * (gt->qpad / 16) * (t->kh * t->kw * gt->cpad / 32);
    count[2] = per_step * ((s->k + 15) / 16) * (g->c16 / 16) * s->kh * s->kw * (g->qrow / 32);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 5, batch = argc > 2 ? atoi(argv[2]) : 32;
    if (rounds < 1 || batch < 1) {
        fprintf(stderr, "usage: conv_bf16_paths [rounds >= 1] [batch >= 1]\n");
        return 2;
    }
    static const enum dt_bf16_path hardware[2] = {DT_BF16_AVX512BF16, DT_BF16_AMX};
    bool have[2];
    for (int p = 0; p < 2; p++) {
        const char *why;
        have[p] = dt_bf16_path_available(hardware[p], &why);
        if (!have[p])
            printf("# %s: not timed (%s)\n", dt_bf16_path_name(hardware[p]), why);
    }
    double vdp_ns = 0;
    if (have[0]) {
        double fma_ns = 1e30;
        vdp_ns = 1e30;
        for (int r = 0; r < 5; r++) {
            vdp_ns = least(vdp_ns, register_rate(16 << 20, false));
            fma_ns = least(fma_ns, register_rate(16 << 20, true));
        }
        printf("# register-only zmm: VDPBF16PS %.3f ns, VFMADD231PS %.3f ns per instruction: bf16 "
               "products at best %.2fx fp32's flop rate\n",
               vdp_ns, fma_ns, 2 * fma_ns / vdp_ns);
    }
    printf("# batch %d, one thread, thread CPU time, minimum of %d rounds\n", batch, rounds);
    printf("%-22s %-9s %8s %11s %8s %11s %9s %7s\n", "shape", "product", "fp32 ms", "avx512bf16",
           "amx ms", "fp32/vdp x", "vdp/amx x", "rate %");
    static const struct {
        const char *name;
        struct dt_conv_shape s;
    } shapes[] = {
        {"ConvNet 16->32 26x26", {0, 16, 26, 26, 32, 3, 3, 1, 0}},
        {"ResNet 16->16 32x32", {0, 16, 32, 32, 16, 3, 3, 1, 1}},
        {"ResNet 32->32 16x16", {0, 32, 16, 16, 32, 3, 3, 1, 1}},
        {"ResNet 64->64 8x8", {0, 64, 8, 8, 64, 3, 3, 1, 1}},
    };
    static const char *const products[3] = {"forward", "in-grad", "w-grad"};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        struct operands o;
        struct dt_conv_shape s = shapes[i].s;
        s.n = batch;
        if (prepare(&o, s))
            return 1;
        double best[3][3], t[3], count[3];
        for (int a = 0; a < 3; a++)
            for (int c = 0; c < 3; c++)
                best[a][c] = 1e30;
        for (int r = 0; r < rounds; r++)
            for (int k = 0; k < 3; k++) { /* fp32, avx512bf16, amx */
                if (k > 0 && !have[k - 1])
                    continue;
                time_products(&o, k == 0 ? -1 : (int)hardware[k - 1], t);
                for (int c = 0; c < 3; c++)
                    best[k][c] = least(best[k][c], t[c]);
            }
        instructions(&o, count);
        for (int c = 0; c < 3; c++) {
            double f = 1e3 * best[0][c], v = have[0] ? 1e3 * best[1][c] : 0;
            double m = have[1] ? 1e3 * best[2][c] : 0;
            printf("%-22s %-9s %8.2f %11.2f %8.2f %10.2fx %8.1fx %6.0f%%\n", shapes[i].name,
                   products[c], f, v, m, have[0] ? f / v : 0, have[0] && have[1] ? v / m : 0,
                   have[0] ? 100 * count[c] * vdp_ns * 1e-9 / best[1][c] : 0);
        }
        release(&o);
    }
    return 0;
}

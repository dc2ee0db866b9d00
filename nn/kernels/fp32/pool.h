/* Pooling kernels: max, average and global average pooling over `planes` planes of h x w
 * floats ([sample][channel] planes, one after another), forward and backward. Plain pointers
 * and a window geometry, never a layer, so each is tested alone (tests/unit/test_pool.c); the
 * layers (nn/layer_maxpool2d.c, layer_avgpool2d.c, layer_global_avgpool.c) own the geometry's
 * checks and the scratch. Built once, for the binary's x86-64-v2. */
#ifndef DT_NN_KERNELS_FP32_POOL_H
#define DT_NN_KERNELS_FP32_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Window geometry of a pooling layer: k x k windows every `stride`, `pad` implicit padding,
 * an oh x ow output per plane. */
struct dt_pool_geom {
    int k, stride, pad, oh, ow;
};

/* A 2x2 window a b / c d whose top-left element is index i of a plane w wide: its maximum by
 * dt_maxpool_forward's rule (the first maximum in row-major order; a NaN wins), the winner's
 * index in *best. Branch-free, so that loops over windows vectorise; the 2x2 pool and the bf16
 * conv that pools as it compacts (nn/kernels/bf16/conv_bf16.c) share it. */
static inline float dt_pool2x2_window(float a, float b, float c, float d, int i, int w, int *best)
{
    int at = i;
    float max = a;
    bool t = b > max || b != b;
    max = t ? b : max;
    at = t ? i + 1 : at;
    t = c > max || c != c;
    max = t ? c : max;
    at = t ? i + w : at;
    t = d > max || d != d;
    max = t ? d : max;
    at = t ? i + w + 1 : at;
    *best = at;
    return max;
}

/* y = the maximum of each window (NaN wins; the first maximum on ties, like PyTorch), argmax =
 * its index within the input plane. Called inside a parallel region (a conv2d fused with the
 * pool, nn/layer_conv2d.c), it runs on the calling thread alone. */
void dt_maxpool_forward(const struct dt_pool_geom *g, const float *x, float *y, int32_t *argmax,
                        int planes, int h, int w);

/* dx = dy scattered to each window's winner (overwrites dx). With relu_y (the pool's output
 * when a relu below was fused into it) only where relu_y > 0: relu's gradient at the winner. */
void dt_maxpool_backward(const struct dt_pool_geom *g, const int32_t *argmax, const float *relu_y,
                         const float *dy, float *dx, int planes, int h, int w);

/* A maxpool2d's backward as the layer below it runs it, one sample at a time (the pool_grad
 * fusion, nn/fusion.h): the pool's geometry, its input plane (c x h x w), and from sample 0
 * its winner indices, its output (the relu mask of the relu between them: dy only where the
 * pooled value is > 0) and its dy. */
struct dt_pool_grad {
    struct dt_pool_geom g;
    int c, h, w;
    const int32_t *argmax;
    const float *relu_y;
    const float *dy;
};

/* Sample i's dx [c][h][w] into dst: dt_maxpool_backward's bits, on the calling thread. */
void dt_maxpool_backward_sample(const struct dt_pool_grad *p, int i, float *dst);

/* y = the mean of each window, padded zeros counted (count_include_pad: a k*k divisor). */
void dt_avgpool_forward(const struct dt_pool_geom *g, const float *x, float *y, int planes, int h,
                        int w);

/* dx = dy / (k*k) spread over each window (overwrites dx). */
void dt_avgpool_backward(const struct dt_pool_geom *g, const float *dy, float *dx, int planes,
                         int h, int w);

/* y[p] = the mean of plane p's hw floats. */
void dt_global_avgpool_forward(const float *x, float *y, int planes, size_t hw);

/* Plane p of dx = dy[p] / hw. */
void dt_global_avgpool_backward(const float *dy, float *dx, int planes, size_t hw);

#endif

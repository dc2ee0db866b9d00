/* The element-wise loops (nn/kernels/fp32/elementwise.h), as they were inside the layers: the
 * same loops and OpenMP pragmas, so the same instructions (objdump) and the same bits. */
#include "nn/kernels/fp32/elementwise.h"
#include "util/bf16.h"

#include <math.h>
#include <string.h>

#include "nn/kernels/parallel.h"

void dt_relu_forward(const float *x, float *y, long n)
{
#pragma omp parallel for simd if (parallel : n > DT_PARALLEL_MIN)
    for (long i = 0; i < n; i++)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void dt_relu_backward(const float *y, const float *dy, const float *extra, float *dx, long n)
{
    if (extra) {
#pragma omp parallel for simd if (parallel : n > DT_PARALLEL_MIN)
        for (long i = 0; i < n; i++) {
            /* the sum masked by bits: written as a select, GCC kept the addition under the
             * condition (it may trap) and ran the loop scalar, 3.5x slower */
            float d = dy[i] + extra[i];
            uint32_t bits;
            memcpy(&bits, &d, sizeof bits);
            bits &= y[i] > 0.0f ? 0xffffffffu : 0u;
            memcpy(&dx[i], &bits, sizeof bits);
        }
        return;
    }
#pragma omp parallel for simd if (parallel : n > DT_PARALLEL_MIN)
    for (long i = 0; i < n; i++) {
        /* dy read whatever y says: a load under the condition vectorises only with AVX-512's
         * masked loads, and the portable (x86-64-v2) build ran this loop scalar, 3.5x slower */
        float d = dy[i];
        dx[i] = y[i] > 0.0f ? d : 0.0f;
    }
}

void dt_gelu_forward(const float *x, float *y, long n)
{
#pragma omp parallel for if (n > DT_PARALLEL_MIN)
    for (long i = 0; i < n; i++)
        y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * (float)M_SQRT1_2));
}

void dt_gelu_backward(const float *x, const float *dy, float *dx, long n)
{
    const float inv_sqrt_2pi = 0.3989422804014327f;
#pragma omp parallel for if (n > DT_PARALLEL_MIN)
    for (long i = 0; i < n; i++) {
        float cdf = 0.5f * (1.0f + erff(x[i] * (float)M_SQRT1_2));
        float pdf = inv_sqrt_2pi * expf(-0.5f * x[i] * x[i]);
        dx[i] = dy[i] * (cdf + x[i] * pdf);
    }
}

void dt_add_forward(const float *x, const float *s, float *y, long n, bool relu, bool round_skip)
{
    if (round_skip) { /* a bf16 model's identity add: the skip as a bf16 value */
#pragma omp parallel for simd if (parallel : n > DT_PARALLEL_MIN)
        for (long i = 0; i < n; i++) {
            float v = x[i] + dt_bf16_round(s[i]);
            y[i] = relu ? (v > 0.0f ? v : 0.0f) : v;
        }
        return;
    }
    if (relu) {
#pragma omp parallel for simd if (parallel : n > DT_PARALLEL_MIN)
        for (long i = 0; i < n; i++) {
            float v = x[i] + s[i];
            y[i] = v > 0.0f ? v : 0.0f;
        }
        return;
    }
#pragma omp parallel for simd if (parallel : n > DT_PARALLEL_MIN)
    for (long i = 0; i < n; i++)
        y[i] = x[i] + s[i];
}

void dt_copy(float *dst, const float *src, long n)
{
#pragma omp parallel for simd if (parallel : n > DT_PARALLEL_MIN)
    for (long i = 0; i < n; i++)
        dst[i] = src[i];
}

void dt_add_into(float *dst, const float *src, long n)
{
#pragma omp parallel for simd if (parallel : n > DT_PARALLEL_MIN)
    for (long i = 0; i < n; i++)
        dst[i] += src[i];
}

void dt_dropout_apply(const uint8_t *mask, size_t units, size_t unit, float scale, const float *in,
                      float *out, int batch)
{
    size_t per_sample = units * unit;
#pragma omp parallel for if ((size_t)batch * per_sample > DT_PARALLEL_MIN)
    for (int b = 0; b < batch; b++) {
        const uint8_t *m = mask + (size_t)b * units;
        const float *src = in + (size_t)b * per_sample;
        float *dst = out + (size_t)b * per_sample;
        for (size_t u = 0; u < units; u++) {
            float s = m[u] ? scale : 0.0f;
            for (size_t i = 0; i < unit; i++)
                dst[u * unit + i] = src[u * unit + i] * s;
        }
    }
}

/* What the hand-written fp32 conv kernels (conv_direct, conv_winograd) share: the vector
 * width their buffers are padded to, the int-size check, and INLINE. Which instruction set a
 * kernel is built for is the Makefile's business (ISA sets, nn/kernels/isa_fn.h), so nothing
 * here depends on it. Include this only from nn/kernels/fp32/.
 */
#ifndef DT_NN_KERNELS_FP32_SIMD_H
#define DT_NN_KERNELS_FP32_SIMD_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

/* Floats per AVX-512 vector: the kernels pad channel blocks and scratch sections to whole
 * vectors. */
enum { LANES = 16 };

static inline size_t round_lanes(size_t n)
{
    return (n + LANES - 1) / LANES * LANES;
}

/* a * b * c * d fits an int: the kernels index with ints, and their *_supported() checks
 * every tensor and scratch section this way. */
static inline bool fits_int(long long a, long long b, long long c, long long d)
{
    long long p;
    return !__builtin_mul_overflow(a, b, &p) && !__builtin_mul_overflow(p, c, &p) &&
           !__builtin_mul_overflow(p, d, &p) && p <= INT_MAX;
}

/* For small helpers the hot loops must inline whatever the compiler's estimate says. */
#define INLINE static inline __attribute__((always_inline))

#endif

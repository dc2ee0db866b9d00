/* What the hand-written kernels (nn/conv_direct.c, nn/conv_winograd.c) share: the AVX-512
 * switch, the vector width their buffers are padded to, and the int-size check.
 *
 * The kernels are compiled with a target attribute rather than -mavx512f, so one binary (and
 * the sanitizer builds, which do not use -march=native) carries them and picks them at run time
 * (dt_conv_direct_uses_simd()). DT_HAVE_AVX512 is 0 where the compiler cannot emit them; the
 * callers then keep only their portable paths. Include this only from .c files of nn/.
 */
#ifndef DT_NN_SIMD_H
#define DT_NN_SIMD_H

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

#if defined(__x86_64__) && defined(__GNUC__)
#define DT_HAVE_AVX512 1
#include <immintrin.h>
#define SIMD   __attribute__((target("avx512f")))
#define INLINE static inline __attribute__((always_inline))
#else
#define DT_HAVE_AVX512 0
#endif

#endif

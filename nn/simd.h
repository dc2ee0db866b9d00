/* The AVX-512 switch shared by the hand-written kernels (nn/conv_direct.c, nn/conv_winograd.c).
 *
 * The kernels are compiled with a target attribute rather than -mavx512f, so one binary (and
 * the sanitizer builds, which do not use -march=native) carries them and picks them at run time
 * (dt_conv_direct_uses_simd()). DT_HAVE_AVX512 is 0 where the compiler cannot emit them; the
 * callers then keep only their portable paths. Include this only from .c files of nn/.
 */
#ifndef DT_NN_SIMD_H
#define DT_NN_SIMD_H

#if defined(__x86_64__) && defined(__GNUC__)
#define DT_HAVE_AVX512 1
#include <immintrin.h>
#define SIMD   __attribute__((target("avx512f")))
#define INLINE static inline __attribute__((always_inline))
#else
#define DT_HAVE_AVX512 0
#endif

#endif

#include "util/cpu.h"

#include <cpuid.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

/* XCR0: which register states the OS saves; AVX needs SSE+AVX (bits 1-2), AVX-512 also the
 * opmask and upper-ZMM states (bits 5-7). */
static unsigned long long xgetbv0(void)
{
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (unsigned long long)hi << 32 | lo;
}

void dt_cpu_features_read(struct dt_cpu_features *f)
{
    memset(f, 0, sizeof *f);
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d))
        return;
    char vendor[13];
    memcpy(vendor, &b, 4);
    memcpy(vendor + 4, &d, 4);
    memcpy(vendor + 8, &c, 4);
    vendor[12] = 0;
    f->vendor = !strcmp(vendor, "GenuineIntel")   ? DT_CPU_INTEL
                : !strcmp(vendor, "AuthenticAMD") ? DT_CPU_AMD
                                                  : DT_CPU_OTHER;
    unsigned max = a;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return;
    bool osxsave = c & bit_OSXSAVE;
    unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
    bool ymm = (xcr0 & 0x6) == 0x6, zmm = (xcr0 & 0xe6) == 0xe6;
    f->avx = ymm && (c & bit_AVX);
    f->fma = ymm && (c & bit_FMA);
    if (max < 7)
        return;
    __cpuid_count(7, 0, a, b, c, d);
    f->avx2 = f->avx && (b & bit_AVX2);
    f->avx512 =
        zmm && (b & bit_AVX512F) && (b & bit_AVX512BW) && (b & bit_AVX512VL) && (b & bit_AVX512DQ);
    /* AMX: TILECFG and TILEDATA states (XCR0 bits 17-18) next to the CPUID.7.0:EDX bits
     * AMX-BF16 (22) and AMX-TILE (24). */
    f->amx_bf16 = f->avx512 && (xcr0 & 0x60000) == 0x60000 && (d & (1u << 22)) && (d & (1u << 24));
    unsigned a1 = 0, b1, c1, d1;
    if (a >= 1)
        __cpuid_count(7, 1, a1, b1, c1, d1);
    f->avx512_bf16 = f->avx512 && (a1 & (1u << 5)); /* CPUID.7.1:EAX bit 5 */
}

int dt_cpu_usable(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

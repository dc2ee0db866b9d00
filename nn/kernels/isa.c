#include "nn/kernels/isa.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/kernels/bf16/amx.h"
#include "util/cpu.h"
#include "util/vec_isa.h"

static const char *const labels[DT_ISA_COUNT] = {"generic", "avx2", "avx512", "avx512bf16", "amx"};

/* -1 until chosen: the kernels call dt_isa_build() on every call, tests switch with dt_isa_set. */
static int current = -1;

/* Process-wide: dt_conv_direct_allow_simd's switch (tests and bench/conv_kernels). */
static bool conv_vectors = true;

/* builds[f][path]: the build of family f that serves each path. Where a family has no build
 * of its own for a path, the row names the one that gives its bits and speed there: the
 * optimizer's loops are AVX2 + FMA on the AVX-512 path too (its fmaf is what needed FMA), the
 * direct weight gradient has an AVX-512 kernel and otherwise the portable loops. A build named
 * here must be in the family's ISA set in the Makefile (else dtrain does not link). */
/* The avx512bf16 and amx paths run the AVX-512 builds of every fp32 family. */
#define AVX512_ALSO(isa) isa, isa, isa
static const enum dt_isa builds[DT_KERNEL_FAMILY_COUNT][DT_ISA_COUNT] = {
    [DT_KERNEL_CONV_DIRECT] = {DT_ISA_GENERIC, DT_ISA_AVX2, AVX512_ALSO(DT_ISA_AVX512)},
    [DT_KERNEL_CONV_DIRECT_WEIGHT] = {DT_ISA_GENERIC, DT_ISA_GENERIC, AVX512_ALSO(DT_ISA_AVX512)},
    [DT_KERNEL_WINOGRAD] = {DT_ISA_NONE, DT_ISA_AVX2, DT_ISA_AVX512, DT_ISA_AVX512BF16,
                            DT_ISA_AVX512BF16}, /* VDPBF16PS: train.bf16_winograd's products */
    [DT_KERNEL_BATCHNORM] = {DT_ISA_GENERIC, DT_ISA_AVX2, AVX512_ALSO(DT_ISA_AVX512)},
    [DT_KERNEL_OPTIM] = {DT_ISA_GENERIC, DT_ISA_AVX2, AVX512_ALSO(DT_ISA_AVX2)},
};

/* builds' counterpart for bf16 products: the bf16 path of each path. */
static const enum dt_bf16_path bf16_paths[DT_ISA_COUNT] = {
    DT_BF16_REFERENCE, DT_BF16_REFERENCE, DT_BF16_REFERENCE, DT_BF16_AVX512BF16, DT_BF16_AMX};

/* Test switch (dt_isa_force_bf16_path); DT_BF16_PATH_COUNT = none. */
static enum dt_bf16_path forced_bf16 = DT_BF16_PATH_COUNT;

static const char *const bf16_names[DT_BF16_PATH_COUNT] = {"reference", "ctile", "avx512bf16",
                                                           "amx"};

const char *dt_isa_label(enum dt_isa isa)
{
    return (unsigned)isa < DT_ISA_COUNT ? labels[isa] : "?";
}

/* The fp32 levels are util's (util/vec_isa.h: one rule per level for both); the bf16 paths
 * are AVX-512 plus their own instructions. */
bool dt_isa_available(enum dt_isa isa)
{
    if (isa == DT_ISA_GENERIC)
        return true;
    if (isa == DT_ISA_AVX2)
        return dt_vec_isa_available(DT_VEC_AVX2);
    bool avx512 = dt_vec_isa_available(DT_VEC_AVX512);
    if (isa == DT_ISA_AVX512)
        return avx512;
#if defined(__x86_64__) && defined(__GNUC__)
    struct dt_cpu_features f;
    dt_cpu_features_read(&f);
    if (isa == DT_ISA_AVX512BF16)
        return avx512 && f.avx512_bf16;
    if (isa == DT_ISA_AMX)
        return avx512 && dt_amx_usable(NULL);
#endif
    return false;
}

enum dt_isa dt_isa_best(void)
{
    for (int i = DT_ISA_COUNT - 1; i > 0; i--)
        if (dt_isa_available((enum dt_isa)i))
            return (enum dt_isa)i;
    return DT_ISA_GENERIC;
}

int dt_isa_parse(const char *name, enum dt_isa *isa, char *err, size_t errlen)
{
    for (int i = 0; i < DT_ISA_COUNT; i++)
        if (name && !strcmp(name, labels[i])) {
            *isa = (enum dt_isa)i;
            return 0;
        }
    snprintf(err, errlen,
             "DTRAIN_ISA: unknown instruction set '%s' (expected generic, avx2, avx512, "
             "avx512bf16 or amx)",
             name ? name : "");
    return -2;
}

int dt_isa_set(enum dt_isa isa, char *err, size_t errlen)
{
    if ((unsigned)isa >= DT_ISA_COUNT || !dt_isa_available(isa)) {
        const char *why = "";
        if (isa == DT_ISA_AMX && !dt_amx_usable(&why) && *why)
            snprintf(err, errlen,
                     "DTRAIN_ISA: this CPU cannot run the amx kernels: %s (best "
                     "here: %s)",
                     why, dt_isa_label(dt_isa_best()));
        else
            snprintf(err, errlen, "DTRAIN_ISA: this CPU cannot run the %s kernels (best here: %s)",
                     dt_isa_label(isa), dt_isa_label(dt_isa_best()));
        return -2;
    }
    current = (int)isa;
    return 0;
}

int dt_isa_init_env(char *err, size_t errlen)
{
    const char *v = getenv("DTRAIN_ISA");
    if (!v || !*v) {
        current = (int)dt_isa_best();
        return 0;
    }
    enum dt_isa isa;
    int rc = dt_isa_parse(v, &isa, err, errlen);
    return rc ? rc : dt_isa_set(isa, err, errlen);
}

enum dt_isa dt_isa_get(void)
{
    if (current < 0) {
        /* a library caller that never called dt_isa_init_env: honour a valid DTRAIN_ISA
         * (tests rerun the kernel tests that way), else the best path */
        char err[160];
        if (dt_isa_init_env(err, sizeof err))
            current = (int)dt_isa_best();
    }
    return (enum dt_isa)current;
}

const char *dt_isa_name(void)
{
    return dt_isa_label(dt_isa_get());
}

enum dt_isa dt_isa_build(enum dt_kernel_family f)
{
    bool conv =
        f == DT_KERNEL_CONV_DIRECT || f == DT_KERNEL_CONV_DIRECT_WEIGHT || f == DT_KERNEL_WINOGRAD;
    if (conv && !conv_vectors)
        return f == DT_KERNEL_WINOGRAD ? DT_ISA_NONE : DT_ISA_GENERIC;
    return builds[f][dt_isa_get()];
}

bool dt_isa_allow_conv_vectors(bool allow)
{
    bool was = conv_vectors;
    conv_vectors = allow;
    return was;
}

const char *dt_bf16_path_name(enum dt_bf16_path p)
{
    return (unsigned)p < DT_BF16_PATH_COUNT ? bf16_names[p] : "?";
}

bool dt_bf16_path_available(enum dt_bf16_path p, const char **why)
{
    if (why)
        *why = "";
    if (p == DT_BF16_AMX)
        return dt_amx_usable(why);
    if (p == DT_BF16_AVX512BF16 && !dt_isa_available(DT_ISA_AVX512BF16)) {
        if (why)
            *why = "the CPU has no AVX512-BF16 (VDPBF16PS)";
        return false;
    }
    return (unsigned)p < DT_BF16_PATH_COUNT;
}

enum dt_bf16_path dt_isa_bf16_path(void)
{
    return forced_bf16 != DT_BF16_PATH_COUNT ? forced_bf16 : bf16_paths[dt_isa_get()];
}

const char *dt_isa_bf16_path_text(void)
{
    enum dt_bf16_path p = dt_isa_bf16_path();
    if (p != DT_BF16_REFERENCE)
        return dt_bf16_path_name(p);
    return "reference (emulated: fp32 kernels on bf16-rounded operands)";
}

enum dt_bf16_path dt_isa_force_bf16_path(enum dt_bf16_path p)
{
    enum dt_bf16_path was = forced_bf16;
    forced_bf16 = p;
    return was;
}

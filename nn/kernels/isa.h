/* Which build of each kernel runs: every dispatch decision of the kernel room is here.
 *
 * The fp32 kernels (nn/kernels/fp32/NAME.isa.c) are compiled once per instruction set of
 * their ISA set (Makefile: generic, avx2, avx512, with that set's -m flags) into functions
 * named NAME_generic, NAME_avx2, NAME_avx512 (nn/kernels/isa_fn.h). The binary itself targets
 * plain x86-64-v2, so it runs anywhere; one path is chosen once, at the first kernel call or
 * dt_isa_init_env(), from cpuid, or from DTRAIN_ISA=generic|avx2|avx512 when the user forces
 * one. Each kernel family then asks dt_isa_build() which of its builds serves that path: a
 * family need not have a build per path (the optimizer's AVX2 loops serve the AVX-512 path,
 * Winograd has no generic build), and that mapping is the table in isa.c. */
#ifndef DT_NN_KERNELS_ISA_H
#define DT_NN_KERNELS_ISA_H

#include <stdbool.h>
#include <stddef.h>

/* The paths (DTRAIN_ISA), and the builds of the fp32 kernels; DT_ISA_NONE: no build. The
 * last two are paths only: they run the fp32 kernels' AVX-512 builds and differ in the bf16
 * products of a bf16 model (dt_isa_bf16_path). */
enum dt_isa {
    DT_ISA_NONE = -1,
    DT_ISA_GENERIC,
    DT_ISA_AVX2,
    DT_ISA_AVX512,
    DT_ISA_AVX512BF16, /* AVX-512 + AVX512-BF16 (Cooper Lake, Zen 4) */
    DT_ISA_AMX,        /* AVX-512 + AMX-BF16, Linux granting the tile data (Sapphire Rapids) */
    DT_ISA_COUNT
};

/* How the bf16 products of a bf16 model (train.precision) run: "amx" (TDPBF16PS through the
 * tile vocabulary), "avx512bf16" (the same kernel source with each tile product as VDPBF16PS
 * on zmm registers: Zen 4, Cooper Lake), "ctile" (the same source over plain-C tiles: tests),
 * "reference" (fp32 arithmetic on bf16-rounded values: any CPU; the layers run it through
 * their fp32 kernels, docs/bf16.md). The tile builds are ctile..amx, in this order. */
enum dt_bf16_path {
    DT_BF16_REFERENCE,
    DT_BF16_CTILE,
    DT_BF16_AVX512BF16,
    DT_BF16_AMX,
    DT_BF16_PATH_COUNT
};

/* The kernel families whose build is chosen at run time. */
enum dt_kernel_family {
    DT_KERNEL_CONV_DIRECT,        /* conv_direct.isa.c: forward and input gradient */
    DT_KERNEL_CONV_DIRECT_WEIGHT, /* conv_direct.isa.c: weight gradient */
    DT_KERNEL_WINOGRAD,           /* conv_winograd.isa.c */
    DT_KERNEL_BATCHNORM,          /* batchnorm.isa.c */
    DT_KERNEL_OPTIM,              /* optim_steps.isa.c */
    DT_KERNEL_FAMILY_COUNT
};

/* Declares function `name` of every fp32 build, for the header of a kernel family. Only the
 * builds its ISA set lists exist (Makefile); dt_isa_build() never picks another. */
#define DT_FP32_ISA_DECLARE(ret, name, params)                                                     \
    ret name##_generic params;                                                                     \
    ret name##_avx2 params;                                                                        \
    ret name##_avx512 params

/* "generic", "avx2", "avx512". */
const char *dt_isa_label(enum dt_isa isa);

/* The name of the path in use (choosing it first if nothing chose it yet). */
const char *dt_isa_name(void);

/* The path in use (choosing it first if nothing chose it yet). */
enum dt_isa dt_isa_get(void);

/* The build of family f that runs on the path in use: DT_ISA_NONE where f has none (Winograd
 * on the generic path, or the convolutions' vector builds switched off below). */
enum dt_isa dt_isa_build(enum dt_kernel_family f);

/* Test and benchmark switch: false makes the convolution families run their generic builds
 * (and Winograd none), whatever the path. Returns the previous setting. */
bool dt_isa_allow_conv_vectors(bool allow);

/* This CPU and this build can run isa (AVX2 means AVX2 + FMA). */
bool dt_isa_available(enum dt_isa isa);

/* The widest path this CPU can run. */
enum dt_isa dt_isa_best(void);

/* Name -> isa; 0, or -2 with a message naming the accepted values. */
int dt_isa_parse(const char *name, enum dt_isa *isa, char *err, size_t errlen);

/* Use isa from now on; 0, or -2 with a message when this CPU cannot run it. */
int dt_isa_set(enum dt_isa isa, char *err, size_t errlen);

/* The bf16 path of the path in use: amx on the amx path, avx512bf16 on the avx512bf16 path
 * (the best one where the CPU has AVX512-BF16 and no AMX, or Linux refused the tile data),
 * else the reference. A forced path (dt_isa_force_bf16_path) wins. */
enum dt_bf16_path dt_isa_bf16_path(void);

/* What a verbose line says of dt_isa_bf16_path(): "amx", "avx512bf16",
 * "reference (emulated: ...)". */
const char *dt_isa_bf16_path_text(void);

/* Test and benchmark switch: layers set up from now on take path p (DT_BF16_PATH_COUNT:
 * back to the rule above). p must be available. Returns the previous setting. */
enum dt_bf16_path dt_isa_force_bf16_path(enum dt_bf16_path p);

/* "reference", "ctile", "avx512bf16", "amx". */
const char *dt_bf16_path_name(enum dt_bf16_path p);

/* This CPU (and Linux) can run p; otherwise *why (if not NULL) says why. */
bool dt_bf16_path_available(enum dt_bf16_path p, const char **why);

/* Choose once from DTRAIN_ISA (unset or empty: the best path): 0, or -2 with a message
 * for an unknown name or a path this CPU lacks. */
int dt_isa_init_env(char *err, size_t errlen);

#endif
